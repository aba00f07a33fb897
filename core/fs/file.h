/* Whole-file writes and directory creation that every module needs once
 * (no partial writes, no retry of a changed object, modes exact whatever
 * the umask). */
#ifndef LZ_FILE_H
#define LZ_FILE_H

#include <stddef.h>
#include <sys/types.h>

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

/* Creates (or finds) the directory name (one component, else -EINVAL)
 * beneath dirfd and
 * returns it opened O_PATH|O_DIRECTORY|O_CLOEXEC in *ret_fd, resolved with
 * LZ_RESOLVE_OWNED: a symlink there refuses (-ELOOP), another file type
 * refuses (-ENOTDIR). Its mode is then exactly mode (07777 bits), whatever
 * the umask, set through the descriptor. *ret_fd untouched on failure. */
int lz_dir_ensure(int dirfd, const char *name, mode_t mode, int *ret_fd, struct lz_err *err);

/* Reads the regular file name beneath dirfd that Lazaret wrote: resolved
 * with LZ_RESOLVE_OWNED, opened non-blocking without following a link,
 * and refused unless it is a regular file with one link, owned by the
 * caller, without group or other access, of at most max bytes; read once
 * into a new NUL-terminated buffer (free() it). -ELOOP, -EPERM (type,
 * links, owner, mode), -EFBIG, -ENOMEM, -errno. */
int lz_file_read_owned(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len, struct lz_err *err);

#endif
