/* The preparer's budget (prepare.h): what an image may write on the
 * Storage Root's file system, measured on a real one. Each test runs in a
 * forked child with a user and mount namespace of its own (uid and gid
 * mapped to 0: as root and as an ordinary user alike) holding a tmpfs of
 * 4 MiB and 200 inodes; the child's exit status is the verdict. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "image/prepare.h"

#define CHECK(cond)                                                                 \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
			_exit(1);                                                   \
		}                                                                   \
	} while (0)

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

/* In the child: a tmpfs of 4 MiB (1,024 pages) and 200 inodes on dir,
 * opened. */
static int small_fs(const char *dir)
{
	char map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	CHECK(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0);
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	write_file("/proc/self/gid_map", map);
	CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
	CHECK(mount("tmpfs", dir, "tmpfs", 0, "size=4m,nr_inodes=200") == 0);
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	return fd;
}

static void budget_child(const char *mountpoint)
{
	int dir = small_fs(mountpoint);
	struct lz_prepare_budget b;
	struct lz_err err = { 0, "" };
	CHECK(lz_prepare_budget(dir, &b, &err) == 0);
	/* 1,024 pages free less 51 kept; 199 inodes free less 10 kept; an
	 * entry costs a page */
	CHECK(b.bytes == (1024 - 51) * 4096ull);
	CHECK(b.entries == 199 - 10);
	CHECK(b.block == 4096);
	/* 3 MiB written: 256 pages left, of which 51 stay free */
	int fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	static char chunk[1 << 20];
	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; i < 3; i++)
		CHECK(write(fd, chunk, sizeof(chunk)) == (ssize_t)sizeof(chunk));
	CHECK(lz_prepare_budget(dir, &b, &err) == 0);
	CHECK(b.bytes == (256 - 51) * 4096ull);
	/* filled to the last page: nothing left, not a wrapped count */
	while (write(fd, chunk, sizeof(chunk)) > 0)
		;
	CHECK(lz_prepare_budget(dir, &b, &err) == 0);
	CHECK(b.bytes == 0);
	/* a file system that counts no blocks or inodes (tmpfs without a
	 * size): no bound, not a full one */
	CHECK(mount("tmpfs", mountpoint, "tmpfs", 0, "size=0,nr_inodes=0") == 0);
	int unbounded = open(mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(unbounded >= 0);
	CHECK(lz_prepare_budget(unbounded, &b, &err) == 0);
	CHECK(b.bytes == UINT64_MAX && b.entries == UINT64_MAX);
	_exit(0);
}

static void test_lz_prepare_budget__keeps_a_twentieth_free(void **state)
{
	(void)state;
	char dir[] = "/tmp/lz-test-budget.XXXXXX";
	assert_non_null(mkdtemp(dir));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		budget_child(dir);
	int status = -1;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(rmdir(dir), 0); /* the mount went with the child's namespace */
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_prepare_budget__keeps_a_twentieth_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
