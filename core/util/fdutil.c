#include "util/fdutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* After the closing: a table the parent filled leaves room now. A child
 * that cannot have /dev/null must not go on with the parent's streams
 * (the developer's terminal, say): -errno. */
static int std_streams_to_null(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return -errno;
	int r = dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ? -errno : 0;
	if (null > STDERR_FILENO)
		close(null);
	return r;
}

int lz_fds_std_open(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int null = open("/dev/null", O_RDWR);
		if (null < 0)
			return -errno;
		if (null != fd) { /* a lower one was closed too: taken by the loop already */
			close(null);
			return -EBADF;
		}
	}
	return 0;
}

int lz_fds_keep_only(int *keep, size_t n)
{
	qsort(keep, n, sizeof(*keep), cmp_int);
	unsigned from = 3;
	for (size_t i = 0; i < n; i++) {
		if (keep[i] < (int)from)
			continue;
		if ((unsigned)keep[i] > from)
			(void)close_range(from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	(void)close_range(from, ~0U, 0);
	return std_streams_to_null();
}

int lz_fds_place(const int *fds, size_t n)
{
	enum { FIRST = 3, MAX = 16 };
	int high[MAX];
	if (n > MAX)
		return -E2BIG;
	/* Copies above every target first, so no dup2 below clobbers a
	 * source still to be placed. */
	for (size_t i = 0; i < n; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, FIRST + (int)n)) < 0)
			return -errno;
	for (size_t i = 0; i < n; i++)
		if (dup2(high[i], FIRST + (int)i) < 0) /* the copy is not close-on-exec */
			return -errno;
	(void)close_range(FIRST + (unsigned)n, ~0U, 0);
	return std_streams_to_null();
}

int lz_fd_path(int fd, char *buf, size_t cap)
{
	char link[32];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, buf, cap);
	if (n < 0)
		return -errno;
	if (n == 0 || (size_t)n >= cap || buf[0] != '/')
		return -ENAMETOOLONG;
	buf[n] = '\0';
	return 0;
}

int lz_fd_chmod(int fd, mode_t mode)
{
	char self[32];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	return fchmodat(AT_FDCWD, self, mode, 0);
}

ssize_t lz_read_small(const char *path, char *buf, size_t cap)
{
	return lz_read_small_at(AT_FDCWD, path, buf, cap);
}

ssize_t lz_read_small_at(int dirfd, const char *path, char *buf, size_t cap)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, cap - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	if (n == 0)
		return -EIO;
	buf[n] = '\0';
	return n;
}
