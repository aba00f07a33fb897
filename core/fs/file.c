/* Whole-file writes; see file.h. */
#include "fs/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/sys.h"

int lz_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int lz_memfd_sealed(const char *name, const void *bytes, size_t len, bool exec, int *ret_fd,
		    struct lz_err *err)
{
	/* Said either way: the kernel's default follows vm.memfd_noexec. */
	_cleanup_close_ int fd = memfd_create(name, MFD_ALLOW_SEALING | MFD_CLOEXEC | (exec ? MFD_EXEC : MFD_NOEXEC_SEAL));
	if (fd < 0 && exec && errno == EACCES)
		return lz_err_set(err, EACCES,
				  "%s: memfd_create: %s (Lazaret execs it from a memory file: the sysctl "
				  "vm.memfd_noexec must be 0 or 1, not 2)",
				  name, strerror(EACCES));
	if (fd < 0)
		return lz_err_set(err, errno, "%s: memfd_create: %s", name, strerror(errno));
	int r = lz_write_all(fd, bytes, len);
	if (r < 0)
		return lz_err_set(err, -r, "%s: write: %s", name, strerror(-r));
	if (fcntl(fd, F_ADD_SEALS, LZ_MEMFD_SEALS) < 0)
		return lz_err_set(err, errno, "%s: F_ADD_SEALS: %s", name, strerror(errno));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int file_create(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
		       unsigned long long resolve, bool durable, struct lz_err *err)
{
	_cleanup_close_ int fd =
		lz_openat2_create(dirfd, name, O_WRONLY | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode, resolve);
	if (fd < 0)
		return lz_err_set(err, errno, "create %s: %s", name, strerror(errno));
	int r = lz_write_all(fd, data, len);
	if (r < 0)
		return lz_err_set(err, -r, "write %s: %s", name, strerror(-r));
	if (fchmod(fd, mode) < 0)
		return lz_err_set(err, errno, "chmod %s: %s", name, strerror(errno));
	if (durable && fsync(fd) < 0)
		return lz_err_set(err, errno, "fsync %s: %s", name, strerror(errno));
	return 0;
}

int lz_file_create(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
		   unsigned long long resolve, struct lz_err *err)
{
	return file_create(dirfd, name, data, len, mode, resolve, false, err);
}

int lz_file_create_durable(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
			   unsigned long long resolve, struct lz_err *err)
{
	return file_create(dirfd, name, data, len, mode, resolve, true, err);
}

int lz_dir_sync(int dirfd, struct lz_err *err)
{
	_cleanup_close_ int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return lz_err_set(err, errno, "fsync a directory: %s", strerror(errno));
	return 0;
}

static int dir_ensure(int dirfd, const char *name, mode_t mode, bool found_keeps_mode, int *ret_fd,
		      struct lz_err *err)
{
	/* One component: mkdirat would follow a symlink in a longer path
	 * before openat2 could refuse it. */
	if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return lz_err_set(err, EINVAL, "invalid directory name '%s'", name);
	bool made = mkdirat(dirfd, name, mode & 07777) == 0;
	if (!made && errno != EEXIST)
		return lz_err_set(err, errno, "create %s: %s", name, strerror(errno));
	_cleanup_close_ int fd =
		lz_openat2(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	struct stat st;
	/* O_PATH|O_NOFOLLOW reaches a symlink itself, which O_DIRECTORY then
	 * refuses as ENOTDIR: name it for what it is. */
	if (fd < 0 && errno == ENOTDIR && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		return lz_err_set(err, ELOOP, "open %s: is a symlink", name);
	if (fd < 0)
		return lz_err_set(err, errno, "open %s: %s", name, strerror(errno));
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "stat %s: %s", name, strerror(errno));
	if ((made || !found_keeps_mode) && (st.st_mode & 07777) != (mode & 07777)) {
		if (lz_fd_chmod(fd, mode & 07777) < 0)
			return lz_err_set(err, errno, "chmod %s: %s", name, strerror(errno));
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int lz_dir_ensure(int dirfd, const char *name, mode_t mode, int *ret_fd, struct lz_err *err)
{
	return dir_ensure(dirfd, name, mode, false, ret_fd, err);
}

int lz_dir_ensure_made(int dirfd, const char *name, mode_t mode, int *ret_fd, struct lz_err *err)
{
	return dir_ensure(dirfd, name, mode, true, ret_fd, err);
}

int lz_file_read_owned(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len, struct lz_err *err)
{
	_cleanup_close_ int fd =
		lz_openat2(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, LZ_RESOLVE_OWNED);
	struct stat st;
	if (fd < 0)
		return lz_err_set(err, errno, "open %s: %s", name, errno == ELOOP ? "a symlink" : strerror(errno));
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "stat %s: %s", name, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != getuid() || (st.st_mode & 077) != 0)
		return lz_err_set(err, EPERM,
				  "%s must be a regular file with one link, owned by you, without group or other "
				  "access",
				  name);
	if ((size_t)st.st_size > max)
		return lz_err_set(err, EFBIG, "%s: %jd bytes, more than %zu", name, (intmax_t)st.st_size, max);
	return lz_fd_read_bounded(fd, max, name, ret, ret_len, err);
}

int lz_fd_read_bounded(int fd, size_t max, const char *shown, char **ret, size_t *ret_len, struct lz_err *err)
{
	_cleanup_free_ char *buf = malloc(max + 1);
	if (buf == NULL)
		return lz_err_set(err, ENOMEM, "%s: out of memory", shown);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, max + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lz_err_set(err, errno, "read %s: %s", shown, strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) /* it held more than fstat said, or grew while read */
			return lz_err_set(err, EFBIG, "%s is larger than %zu bytes", shown, max);
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}
