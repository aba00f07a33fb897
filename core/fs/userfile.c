/* Reading a user-named file; see userfile.h. */
#include "fs/userfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/file.h"
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
	char shown[PATH_MAX + 2];
	snprintf(shown, sizeof(shown), "'%s'", path);
	return lz_fd_read_bounded(fd, max, shown, ret, ret_len, err);
}
