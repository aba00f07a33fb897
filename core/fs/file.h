/* Whole-file writes that every module needs once (no partial writes, no
 * retry of a changed object). */
#ifndef LZ_FILE_H
#define LZ_FILE_H

#include <stddef.h>

#include "util/err.h"

/* Writes all n bytes, retrying on EINTR; 0 or -errno (-EIO when write
 * returns 0). */
int lz_write_all(int fd, const void *buf, size_t n);

/* Creates the new regular file name beneath dirfd (O_EXCL, no symlink
 * followed, resolved with openat2 `resolve`), writes data[0..len) and sets
 * mode whatever the umask. An existing name refuses (-EEXIST); a failure
 * after creation leaves the partial file for the caller's tree removal. */
int lz_file_create(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
		   unsigned long long resolve, struct lz_err *err);

#endif
