/* core/util/fdutil: descriptors placed by number for a program about to
 * be exec'd. Descriptor-table cases run in forked children. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_child.h"

#include "util/fdutil.h"

static ino_t ino_of(int fd)
{
	struct stat st;
	CHECK(fstat(fd, &st) == 0, "fstat %d: %s", fd, strerror(errno));
	return st.st_ino;
}

/* Sources on each other's targets (3 and 4 crosswise), one above them
 * all, and the child's own report pipe: each lands at 3 + i, open across
 * exec; everything else from 3 up is closed. */
static void place_body(void *arg)
{
	(void)arg;
	int memfd = memfd_create("a", 0), p[2];
	CHECK(memfd >= 0 && pipe(p) == 0, "setup: %s", strerror(errno));
	int high[4] = { fcntl(memfd, F_DUPFD, 50), fcntl(p[0], F_DUPFD, 50), fcntl(p[1], F_DUPFD, 50),
			fcntl(report_fd, F_DUPFD, 50) };
	for (int i = 0; i < 4; i++)
		CHECK(high[i] >= 50, "dup: %s", strerror(errno));
	(void)close_range(3, 49, 0);
	report_fd = high[3];
	CHECK(dup2(high[0], 4) == 4 && dup2(high[1], 3) == 3, "dup2: %s", strerror(errno));
	close(high[0]);
	close(high[1]);
	ino_t imem = ino_of(4), ird = ino_of(3), iwr = ino_of(high[2]), irep = ino_of(report_fd);
	int stray = open("/dev/null", O_RDONLY); /* not asked for: closed */
	const int fds[] = { 4, 3, high[2], report_fd };
	int r = lz_fds_place(fds, 4);
	report_fd = 6;
	CHECK(r == 0, "place: %s", strerror(-r));
	CHECK(ino_of(3) == imem && ino_of(4) == ird && ino_of(5) == iwr && ino_of(6) == irep, "placed in order");
	for (int fd = 3; fd <= 6; fd++)
		CHECK(fcntl(fd, F_GETFD) == 0, "descriptor %d is close-on-exec", fd);
	for (int fd = 7; fd <= 64; fd++)
		CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF, "descriptor %d left open (stray %d)", fd, stray);
	struct stat in, null;
	CHECK(fstat(STDIN_FILENO, &in) == 0 && stat("/dev/null", &null) == 0 && in.st_rdev == null.st_rdev,
	      "stdin is /dev/null");
}

static void place_moves_descriptors_by_number(void **state)
{
	(void)state;
	run_in_child(place_body, NULL);
}

static void place_refuses_too_many(void **state)
{
	(void)state;
	int fds[17];
	for (size_t i = 0; i < 17; i++)
		fds[i] = STDERR_FILENO;
	assert_int_equal(lz_fds_place(fds, 17), -E2BIG);
	assert_int_equal(fcntl(STDERR_FILENO, F_GETFD), 0); /* nothing touched */
}

/* A full table at the fork (the parent's, filled to its limit): the
 * child still gets /dev/null for stdin and stdout once it has closed
 * what it does not keep, never the parent's streams (a file standing for
 * the developer's terminal here). */
static void keep_only_full_body(void *arg)
{
	(void)arg;
	int terminal = memfd_create("terminal", MFD_CLOEXEC);
	CHECK(terminal >= 0 && dup2(terminal, STDOUT_FILENO) == STDOUT_FILENO && dup2(terminal, STDIN_FILENO) == 0,
	      "setup: %s", strerror(errno));
	struct rlimit low = { 64, 64 };
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit: %s", strerror(errno));
	while (open("/dev/null", O_RDONLY) >= 0)
		;
	CHECK(errno == EMFILE, "the table did not fill: %s", strerror(errno));
	int keep[] = { report_fd };
	int r = lz_fds_keep_only(keep, 1);
	CHECK(r == 0, "keep_only: %s", strerror(-r));
	struct stat out, in, null;
	CHECK(fstat(STDOUT_FILENO, &out) == 0 && fstat(STDIN_FILENO, &in) == 0 && stat("/dev/null", &null) == 0,
	      "stat");
	CHECK(S_ISCHR(out.st_mode) && out.st_rdev == null.st_rdev, "stdout is still the parent's");
	CHECK(S_ISCHR(in.st_mode) && in.st_rdev == null.st_rdev, "stdin is still the parent's");
}

static void keep_only_gives_null_streams_from_a_full_table(void **state)
{
	(void)state;
	run_in_child(keep_only_full_body, NULL);
}

/* A descriptor's path as this namespace names it; a buffer too small, a
 * bad descriptor and a non-path (a pipe) are refused. */
static void fd_path_names_the_directory(void **state)
{
	(void)state;
	char dir[] = "/tmp/lz-fdpath.XXXXXX", buf[64];
	assert_non_null(mkdtemp(dir));
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(lz_fd_path(fd, buf, sizeof(buf)), 0);
	assert_string_equal(buf, dir);
	assert_int_equal(lz_fd_path(fd, buf, strlen(dir)), -ENAMETOOLONG); /* no room for the NUL */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(lz_fd_path(p[0], buf, sizeof(buf)), -ENAMETOOLONG); /* "pipe:[...]" */
	assert_int_equal(lz_fd_path(-1, buf, sizeof(buf)), -ENOENT);
	close(p[0]);
	close(p[1]);
	close(fd);
	assert_int_equal(rmdir(dir), 0);
}

/* Closed standard streams get /dev/null, so the next descriptor opened
 * (a socket) takes no stream's number; open ones are left as they are. */
static void std_open_body(void *arg)
{
	(void)arg;
	struct stat before, null, st;
	CHECK(fstat(STDERR_FILENO, &before) == 0 && stat("/dev/null", &null) == 0, "stat");
	close(STDIN_FILENO);
	close(STDOUT_FILENO);
	CHECK(lz_fds_std_open() == 0, "std_open");
	for (int fd = 0; fd <= 1; fd++)
		CHECK(fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == null.st_rdev, "%d is /dev/null", fd);
	CHECK(fstat(STDERR_FILENO, &st) == 0 && st.st_ino == before.st_ino && st.st_dev == before.st_dev,
	      "stderr untouched");
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(s > 2, "a socket took descriptor %d", s);
	close(s);
}

static void std_open_fills_closed_streams(void **state)
{
	(void)state;
	run_in_child(std_open_body, NULL);
}

static void read_small_reads_whole_or_says_why(void **state)
{
	(void)state;
	char buf[8];
	assert_int_equal(lz_read_small("/proc/self/comm", buf, sizeof(buf)), 7); /* truncated to fit */
	assert_int_equal(strlen(buf), 7);
	assert_int_equal(lz_read_small("/nonexistent", buf, sizeof(buf)), -ENOENT);
	assert_int_equal(lz_read_small("/dev/null", buf, sizeof(buf)), -EIO); /* empty */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(place_moves_descriptors_by_number),
		cmocka_unit_test(place_refuses_too_many),
		cmocka_unit_test(keep_only_gives_null_streams_from_a_full_table),
		cmocka_unit_test(fd_path_names_the_directory),
		cmocka_unit_test(read_small_reads_whole_or_says_why),
		cmocka_unit_test(std_open_fills_closed_streams),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
