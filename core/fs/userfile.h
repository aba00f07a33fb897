/* Reading a file the user names on the command line (a `diag --report` or
 * a `qualify` suite): the user's own input, read once, by name, as the
 * invoking user.
 *
 * Threat: the name is the user's, but what it points to may not be what
 * the user meant: a symbolic link swapped in for the file, a FIFO or device
 * that blocks or never ends, or a file that grows without bound. The read
 * follows no symbolic link in the last component (O_NOFOLLOW), opens
 * without blocking and without acquiring a controlling terminal, accepts
 * only a regular file and reads at most `max` bytes (refusing a file that is
 * or becomes larger). The descriptor is O_CLOEXEC and closed before
 * returning. No Lua here: lazaret.core.script (bindings/fs/l_script.c)
 * compiles the text. */
#ifndef LZ_USERFILE_H
#define LZ_USERFILE_H

#include <stddef.h>

#include "util/err.h"

/* The largest file lz_userfile_read accepts (1 MiB). */
#define LZ_USERFILE_MAX ((size_t)1 << 20)

/* Reads the regular file at path (absolute or relative to the working
 * directory; a symbolic link as its last component refuses with -ELOOP)
 * into a new NUL-terminated buffer. max is capped at LZ_USERFILE_MAX.
 * On success *ret (free() it) and *ret_len are set; on failure they are
 * untouched and err names the path:
 *   -EINVAL   empty path or longer than PATH_MAX, or not a regular file
 *   -ELOOP    the last component is a symbolic link
 *   -EFBIG    larger than max bytes (or it grew while being read)
 *   -ENOMEM   out of memory
 *   -errno    open, fstat or read failed (ENOENT, EACCES, ...) */
int lz_userfile_read(const char *path, size_t max, char **ret, size_t *ret_len, struct lz_err *err);

#endif
