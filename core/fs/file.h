/* Whole-file writes and directory creation that every module needs once
 * (no partial writes, no retry of a changed object, modes exact whatever
 * the umask). */
#ifndef LZ_FILE_H
#define LZ_FILE_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

/* Writes all n bytes, retrying on EINTR; 0 or -errno (-EIO when write
 * returns 0). */
int lz_write_all(int fd, const void *buf, size_t n);

/* A memory file holding bytes[0..len), sealed against any change (write,
 * grow, shrink, and further seals: LZ_MEMFD_SEALS), close-on-exec; when
 * exec is false it is also sealed never to be executable (F_SEAL_EXEC),
 * whatever the host's vm.memfd_noexec. name is memfd_create's. An
 * executable one is refused (-EACCES) where vm.memfd_noexec is 2. */
#define LZ_MEMFD_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* Linux 6.3; Debian 12's headers predate them. */
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
int lz_memfd_sealed(const char *name, const void *bytes, size_t len, bool exec, int *ret_fd,
		    struct lz_err *err);

/* Creates the new regular file name beneath dirfd (O_EXCL, no symlink
 * followed, resolved with openat2 `resolve`), writes data[0..len) and sets
 * mode whatever the umask. An existing name refuses (-EEXIST); a failure
 * after creation leaves the partial file for the caller's tree removal. */
int lz_file_create(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
		   unsigned long long resolve, struct lz_err *err);

/* lz_file_create, then fsync: for a file renamed into place after it,
 * which a crash must not leave empty or cut. */
int lz_file_create_durable(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
			   unsigned long long resolve, struct lz_err *err);

/* fsync of the directory dirfd names (O_PATH is fine): a rename or a
 * creation in it made durable. */
int lz_dir_sync(int dirfd, struct lz_err *err);

/* Creates (or finds) the directory name (one component, else -EINVAL)
 * beneath dirfd and
 * returns it opened O_PATH|O_DIRECTORY|O_CLOEXEC in *ret_fd, resolved with
 * LZ_RESOLVE_OWNED: a symlink there refuses (-ELOOP), another file type
 * refuses (-ENOTDIR). Its mode is then exactly mode (07777 bits), whatever
 * the umask, set through the descriptor. *ret_fd untouched on failure. */
int lz_dir_ensure(int dirfd, const char *name, mode_t mode, int *ret_fd, struct lz_err *err);

/* lz_dir_ensure that sets mode only on the directory it makes: one found
 * keeps its own (a State Anchor's upper root, whose mode the sandbox owns
 * once made, spec 3.8). */
int lz_dir_ensure_made(int dirfd, const char *name, mode_t mode, int *ret_fd, struct lz_err *err);

/* Reads the regular file name beneath dirfd that Lazaret wrote: resolved
 * with LZ_RESOLVE_OWNED, opened non-blocking without following a link,
 * and refused unless it is a regular file with one link, owned by the
 * caller, without group or other access, of at most max bytes; read once
 * into a new NUL-terminated buffer (free() it). -ELOOP, -EPERM (type,
 * links, owner, mode), -EFBIG, -ENOMEM, -errno. */
int lz_file_read_owned(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len, struct lz_err *err);

/* Reads fd from its offset to its end, once, into a new NUL-terminated
 * buffer (free() it) of at most max bytes: a file that holds or grows to
 * more refuses (-EFBIG), as a read error does (-errno). shown names the
 * file in the message, as the caller quotes it. 0 or -errno. */
int lz_fd_read_bounded(int fd, size_t max, const char *shown, char **ret, size_t *ret_len, struct lz_err *err);

#endif
