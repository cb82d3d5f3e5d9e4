/* Read-only memory map of a whole file. */
#ifndef VT_BASE_MAPFILE_H
#define VT_BASE_MAPFILE_H

#include "base/status.h"

#include <stddef.h>

typedef struct mapfile {
    const void *data; /* (size) bytes, read-only; NULL for an empty file */
    size_t size;
} mapfile;

/* Map `path`. On failure the message names the path and the OS error. */
vt_status mapfile_open(const char *path, mapfile *out);
void mapfile_close(mapfile *m);

#endif
