/* Reading a user-named file; see userfile.h. */
#include "fs/userfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

int lz_userfile_read(const char *path, size_t max, char **ret, size_t *ret_len, struct lz_err *err)
{
	struct stat st;
	size_t plen = strnlen(path, PATH_MAX);
	if (plen == 0 || plen >= PATH_MAX)
		return lz_err_set(err, EINVAL, "'%.64s': not a usable path", path);
	if (max > LZ_USERFILE_MAX)
		max = LZ_USERFILE_MAX;
	/* O_NONBLOCK: a FIFO or a device must not block the open; it is
	 * refused by type right after. */
	_cleanup_close_ int fd =
		open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP)
		return lz_err_set(err, ELOOP, "'%s' is a symbolic link (not followed: name the file itself)",
				  path);
	if (fd < 0 || fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "'%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return lz_err_set(err, EINVAL, "'%s' is not a regular file", path);
	if ((uint64_t)st.st_size > max)
		return lz_err_set(err, EFBIG, "'%s' is larger than %zu bytes", path, max);
	_cleanup_free_ char *buf = malloc(max + 1);
	if (buf == NULL)
		return lz_err_set(err, ENOMEM, "'%s': out of memory", path);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, max + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lz_err_set(err, errno, "read '%s': %s", path, strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) /* it grew while being read */
			return lz_err_set(err, EFBIG, "'%s' is larger than %zu bytes", path, max);
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}
