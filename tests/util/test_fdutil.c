/* core/util/fdutil: descriptors placed by number for a program about to
 * be exec'd, and sealed memory files (the router's program, the network
 * policy). Descriptor-table cases run in forked children. */
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

static void memfd_sealed_cannot_change(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int fd = -1;
	assert_int_equal(lz_memfd_sealed("lz-test", "abc", 3, false, &fd, &err), 0);
	char buf[8] = "";
	assert_int_equal(pread(fd, buf, sizeof(buf), 0), 3);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(fcntl(fd, F_GETFD), FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GET_SEALS), F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | F_SEAL_EXEC);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0111, 0); /* data, never code */
	errno = 0;
	assert_int_equal(pwrite(fd, "x", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, 1), -1);
	assert_int_equal(ftruncate(fd, 10), -1);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
	void *map = mmap(NULL, 3, PROT_READ, MAP_SHARED, fd, 0); /* read mappings still work */
	assert_ptr_not_equal(map, MAP_FAILED);
	munmap(map, 3);
	assert_ptr_equal(mmap(NULL, 3, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
	close(fd);
}

/* An executable one runs: /bin/true's bytes, exec'd from the memory file. */
static void memfd_sealed_exec_runs(void **state)
{
	(void)state;
	int src = open("/bin/true", O_RDONLY | O_CLOEXEC);
	assert_true(src >= 0);
	struct stat st;
	assert_int_equal(fstat(src, &st), 0);
	char *bytes = malloc((size_t)st.st_size);
	assert_non_null(bytes);
	assert_int_equal(read(src, bytes, (size_t)st.st_size), st.st_size);
	close(src);
	struct lz_err err = { 0, "" };
	int fd = -1;
	assert_int_equal(lz_memfd_sealed("lz-true", bytes, (size_t)st.st_size, true, &fd, &err), 0);
	free(bytes);
	assert_int_equal(fcntl(fd, F_GET_SEALS), F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { "true", NULL }, *envp[] = { NULL };
		fexecve(fd, argv, envp);
		_exit(99);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(place_moves_descriptors_by_number),
		cmocka_unit_test(place_refuses_too_many),
		cmocka_unit_test(memfd_sealed_cannot_change),
		cmocka_unit_test(memfd_sealed_exec_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
