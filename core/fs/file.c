/* Whole-file writes; see file.h. */
#include "fs/file.h"

#include <errno.h>
#include <fcntl.h>
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
