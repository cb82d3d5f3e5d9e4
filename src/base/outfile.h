/* Output files that appear whole or not at all.
 *
 * outfile_open creates a temporary file next to the final path (same folder, so
 * the rename cannot cross a file system): "<path>.tmp.XXXXXX". The caller writes
 * through of->f; outfile_commit flushes, fsyncs, closes and renames it over the
 * final path, then fsyncs the folder, so the final name holds either the old
 * file or the complete new one, also after a crash. outfile_abort removes it.
 *
 * A process that can be interrupted while writing (vt quantize, vt synth) calls
 * outfile_cleanup_on_signals() once: SIGINT, SIGTERM, SIGHUP and SIGXFSZ then
 * remove every temporary file still open before the signal takes its default
 * action. The library never installs a handler by itself. */
#ifndef VT_BASE_OUTFILE_H
#define VT_BASE_OUTFILE_H

#include "base/status.h"

#include <stdio.h>

typedef struct outfile {
    FILE *f;    /* write here; owned by the outfile */
    char *path; /* the final name */
    char *tmp;  /* the temporary name */
    int slot;   /* in the registry the signal handler reads, or -1 */
} outfile;

/* Create the temporary file for `path`. VT_E_IO (with errno's text) if the
 * folder does not take it. */
vt_status outfile_open(const char *path, outfile *of);
/* Finish the file and rename it into place; on failure the temporary file is
 * removed and the final name is untouched. Frees of in every case. */
vt_status outfile_commit(outfile *of);
/* Remove the temporary file and free of. Safe on a zeroed outfile. */
void outfile_abort(outfile *of);

/* VT_E_INVALID when writing `out` would replace `in`: the same file, also under
 * another path or through a hard or symbolic link (same device and inode). An
 * `out` that does not exist yet is fine. */
vt_status outfile_check_not_input(const char *in, const char *out);

/* Remove the temporary files of all open outfiles (async-signal-safe). */
void outfile_unlink_pending(void);
/* Install the handlers described at the top (for programs, not the library). */
void outfile_cleanup_on_signals(void);

#endif
