#include "base/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The temporary names the signal handler removes. A slot's name is complete
 * before `used` is set and `used` is cleared before the name changes, so the
 * handler never reads a half-written name. */
#define OUTFILE_SLOTS 8
static struct {
    volatile sig_atomic_t used;
    char name[PATH_MAX + 32];
} pending[OUTFILE_SLOTS];
static pthread_mutex_t pending_mu = PTHREAD_MUTEX_INITIALIZER;

static int pending_add(const char *name) {
    if (strlen(name) >= sizeof pending[0].name) return -1;
    pthread_mutex_lock(&pending_mu);
    int slot = -1;
    for (int i = 0; i < OUTFILE_SLOTS && slot < 0; i++)
        if (!pending[i].used) slot = i;
    if (slot >= 0) {
        strcpy(pending[slot].name, name);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        pending[slot].used = 1;
    }
    pthread_mutex_unlock(&pending_mu);
    return slot;
}

static void pending_remove(int slot) {
    if (slot < 0) return;
    pthread_mutex_lock(&pending_mu);
    pending[slot].used = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&pending_mu);
}

void outfile_unlink_pending(void) {
    for (int i = 0; i < OUTFILE_SLOTS; i++)
        if (pending[i].used) unlink(pending[i].name);
}

static void on_signal(int sig) {
    outfile_unlink_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

void outfile_cleanup_on_signals(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* a signal the parent set to ignored (nohup, `trap '' XFSZ`) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static void outfile_free(outfile *of) {
    free(of->path);
    free(of->tmp);
    of->path = of->tmp = NULL;
    of->f = NULL;
    of->slot = -1;
}

vt_status outfile_open(const char *path, outfile *of) {
    memset(of, 0, sizeof *of);
    of->slot = -1;
    const size_t n = strlen(path);
    of->path = malloc(n + 1);
    of->tmp = malloc(n + 12);
    if (!of->path || !of->tmp) {
        outfile_free(of);
        return vt_errorf(VT_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(of->path, path, n + 1);
    memcpy(of->tmp, path, n);
    memcpy(of->tmp + n, ".tmp.XXXXXX", 12);
    const int fd = mkostemp(of->tmp, O_CLOEXEC);
    if (fd < 0) {
        vt_status s = vt_errorf(VT_E_IO, "%s: cannot create a temporary file next to it: %s", path,
                                strerror(errno));
        outfile_free(of);
        return s;
    }
    of->slot = pending_add(of->tmp);
    /* mkstemp makes it 0600; a model file gets what a plain create would */
    const mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    of->f = fdopen(fd, "wb");
    if (!of->f) {
        vt_status s = vt_errorf(VT_E_IO, "%s: fdopen: %s", of->tmp, strerror(errno));
        close(fd);
        outfile_abort(of);
        return s;
    }
    setvbuf(of->f, NULL, _IOFBF, 1 << 20);
    return VT_OK;
}

void outfile_abort(outfile *of) {
    if (of->f) fclose(of->f);
    of->f = NULL;
    if (of->tmp) unlink(of->tmp);
    pending_remove(of->slot);
    outfile_free(of);
}

vt_status outfile_commit(outfile *of) {
    int err = 0;
    if (fflush(of->f) != 0) err = errno ? errno : EIO;
    if (!err && fsync(fileno(of->f)) != 0 && errno != EINVAL && errno != EROFS) err = errno;
    if (fclose(of->f) != 0 && !err) err = errno ? errno : EIO;
    of->f = NULL;
    if (err) {
        vt_status s = vt_errorf(VT_E_IO, "%s: write failed: %s", of->tmp, strerror(err));
        outfile_abort(of);
        return s;
    }
    if (rename(of->tmp, of->path) != 0) {
        vt_status s = vt_errorf(VT_E_IO, "%s: cannot rename to %s: %s", of->tmp, of->path, strerror(errno));
        outfile_abort(of);
        return s;
    }
    pending_remove(of->slot);
    /* the rename is durable once the folder is synced */
    char *slash = strrchr(of->path, '/');
    if (slash) *slash = 0;
    const int dfd = open(slash ? (of->path[0] ? of->path : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    outfile_free(of);
    return VT_OK;
}

vt_status outfile_check_not_input(const char *in, const char *out) {
    struct stat si, so;
    if (stat(in, &si) != 0 || stat(out, &so) != 0) return VT_OK; /* out does not exist yet */
    if (si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return vt_errorf(VT_E_INVALID,
                         "the output '%s' is the input '%s' (the same file%s): writing it would destroy "
                         "the input; choose another output name",
                         out, in, strcmp(in, out) ? ", through another path or a link" : "");
    return VT_OK;
}
