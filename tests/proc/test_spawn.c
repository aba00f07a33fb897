/* Children through pidfds: exec errors, exit statuses, timeouts, streams. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/spawn.h"

static void test_lz_spawn_run__exit_status(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const ok[] = { "true", NULL };
	char *const bad[] = { "false", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/true", .argv = ok,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	assert_int_equal(lz_spawn_run(&spec, "true", 5000, &err), 0);
	spec.path = "/bin/false";
	spec.argv = bad;
	assert_int_equal(lz_spawn_run(&spec, "false", 5000, &err), -EIO);
	assert_non_null(strstr(err.msg, "false exited with status 1"));
}

static void test_lz_spawn__exec_errno_is_reported(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const argv[] = { "nothing", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/nonexistent/bin", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	int pidfd = -1;
	assert_int_equal(lz_spawn(&spec, &pidfd, NULL, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "exec 'nothing'"));
	spec.path = "relative";
	assert_int_equal(lz_spawn(&spec, &pidfd, NULL, &err), -EINVAL);
}

static void test_lz_spawn__environment_is_empty_and_argv_exact(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	char *const argv[] = { "sh", "-c", "env | wc -l; printf '%s|' \"$0\" \"$1\"", "a b", "*", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = -1 };
	int pidfd = -1;
	siginfo_t info;
	assert_int_equal(lz_spawn(&spec, &pidfd, NULL, &err), 0);
	close(p[1]);
	char buf[128] = { 0 };
	size_t n = 0;
	ssize_t r;
	while ((r = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)r;
	close(p[0]);
	assert_int_equal(lz_reap(pidfd, 5000, &info), 0);
	close(pidfd);
	/* sh itself may export PWD, SHLVL and _; nothing from our environment. */
	assert_null(strstr(buf, "HOME"));
	assert_non_null(strstr(buf, "a b|*|"));
}

static void test_lz_reap__timeout_kills(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const argv[] = { "sleep", "30", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/sleep", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	int64_t start = lz_now_ms();
	assert_int_equal(lz_spawn_run(&spec, "sleep", 200, &err), -ETIMEDOUT);
	assert_true(lz_now_ms() - start < 10000);
	assert_non_null(strstr(err.msg, "killed"));
}

static void test_lz_spawn__exe_fd_is_used_not_path(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int exe = open("/bin/true", O_PATH | O_CLOEXEC);
	assert_true(exe >= 0);
	char *const argv[] = { "true", NULL };
	struct lz_spawn spec = { .exe_fd = exe, .path = "/bin/false", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	assert_int_equal(lz_spawn_run(&spec, "true", 5000, &err), 0);
	close(exe);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_spawn_run__exit_status),
		cmocka_unit_test(test_lz_spawn__exec_errno_is_reported),
		cmocka_unit_test(test_lz_spawn__environment_is_empty_and_argv_exact),
		cmocka_unit_test(test_lz_reap__timeout_kills),
		cmocka_unit_test(test_lz_spawn__exe_fd_is_used_not_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
