/* Whole-file writes; see file.h. */
#include "fs/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
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

int lz_file_create(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
		   unsigned long long resolve, struct lz_err *err)
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
	return 0;
}

int lz_dir_ensure(int dirfd, const char *name, mode_t mode, int *ret_fd, struct lz_err *err)
{
	/* One component: mkdirat would follow a symlink in a longer path
	 * before openat2 could refuse it. */
	if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return lz_err_set(err, EINVAL, "invalid directory name '%s'", name);
	if (mkdirat(dirfd, name, mode & 07777) < 0 && errno != EEXIST)
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
	/* An O_PATH descriptor cannot be fchmod'ed; its /proc/self/fd link
	 * names exactly that object, never the name again. */
	if ((st.st_mode & 07777) != (mode & 07777)) {
		char self[32];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		if (fchmodat(AT_FDCWD, self, mode & 07777, 0) < 0)
			return lz_err_set(err, errno, "chmod %s: %s", name, strerror(errno));
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}
