#include "base/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

vt_status mapfile_open(const char *path, mapfile *out) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return vt_errorf(VT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return vt_errorf(VT_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return vt_errorf(VT_E_IO, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return vt_errorf(e == ENOMEM ? VT_E_NOMEM : VT_E_IO, "%s: cannot map %lld bytes: %s",
                             path, (long long)st.st_size, strerror(e));
        }
        out->data = p;
        out->size = (size_t)st.st_size;
    }
    close(fd);
    return VT_OK;
}

void mapfile_close(mapfile *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}
