#include "util/fdutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/cleanup.h"


static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static void std_streams_to_null(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
}

void lz_fds_keep_only(int *keep, size_t n)
{
	std_streams_to_null();
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
	std_streams_to_null();
	for (size_t i = 0; i < n; i++)
		if (dup2(high[i], FIRST + (int)i) < 0) /* the copy is not close-on-exec */
			return -errno;
	(void)close_range(FIRST + (unsigned)n, ~0U, 0);
	return 0;
}

int lz_memfd_sealed(const char *name, const void *bytes, size_t len, bool exec, int *ret_fd,
		    struct lz_err *err)
{
	/* Said either way: the kernel's default follows vm.memfd_noexec. */
	_cleanup_close_ int fd = memfd_create(name, MFD_ALLOW_SEALING | MFD_CLOEXEC | (exec ? MFD_EXEC : MFD_NOEXEC_SEAL));
	if (fd < 0)
		return lz_err_set(err, errno, "%s: memfd_create: %s", name, strerror(errno));
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, (const char *)bytes + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return lz_err_set(err, w < 0 ? errno : EIO, "%s: write: %s", name,
					  w < 0 ? strerror(errno) : "short write");
		done += (size_t)w;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return lz_err_set(err, errno, "%s: F_ADD_SEALS: %s", name, strerror(errno));
	*ret_fd = TAKE_FD(fd);
	return 0;
}
