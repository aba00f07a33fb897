/* Children through pidfds: exec errors, exit statuses, timeouts, streams,
 * the working directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

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

struct watch_count {
	int calls;
	int fail_at; /* the call that stops the child; 0: none */
};

static int count_check(void *ctx, struct lz_err *err)
{
	struct watch_count *w = ctx;
	if (++w->calls == w->fail_at)
		return lz_err_set(err, ENOSPC, "stopped by the watch at call %d", w->calls);
	return 0;
}

/* The watch is asked while the child runs; its refusal kills and reaps
 * the child at once and is the result. */
static void test_lz_spawn_run_watched__a_check_stops_the_child(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char pidfile[] = "/tmp/lz-test-watch-XXXXXX";
	int fd = mkstemp(pidfile);
	assert_true(fd >= 0);
	close(fd);
	char script[128];
	snprintf(script, sizeof(script), "echo $$ > %s; exec sleep 30", pidfile);
	char *const argv[] = { "sh", "-c", script, NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	struct watch_count w = { 0, 3 };
	const struct lz_spawn_watch watch = { 20, count_check, &w };
	int64_t start = lz_now_ms();
	assert_int_equal(lz_spawn_run_watched(&spec, "sleeper", 60000, &watch, &err), -ENOSPC);
	assert_true(lz_now_ms() - start < 5000);
	assert_int_equal(w.calls, 3);
	assert_non_null(strstr(err.msg, "stopped by the watch at call 3"));
	FILE *f = fopen(pidfile, "r");
	long pid = 0;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld", &pid), 1);
	fclose(f);
	unlink(pidfile);
	assert_true(pid > 0);
	assert_int_equal(kill((pid_t)pid, 0), -1); /* killed and reaped: no zombie */
	assert_int_equal(errno, ESRCH);
}

/* A child that fails is judged by the watch once more (what it stops for
 * may be why the child failed); a child that succeeds is not. */
static void test_lz_spawn_run_watched__after_the_child_ended(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const bad[] = { "false", NULL };
	char *const ok[] = { "true", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/false", .argv = bad,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	struct watch_count w = { 0, 0 };
	const struct lz_spawn_watch watch = { 10000, count_check, &w };
	assert_int_equal(lz_spawn_run_watched(&spec, "false", 5000, &watch, &err), -EIO);
	assert_non_null(strstr(err.msg, "false exited with status 1"));
	assert_int_equal(w.calls, 1);
	w = (struct watch_count){ 0, 1 };
	assert_int_equal(lz_spawn_run_watched(&spec, "false", 5000, &watch, &err), -ENOSPC);
	assert_non_null(strstr(err.msg, "stopped by the watch"));
	spec.path = "/bin/true";
	spec.argv = ok;
	w = (struct watch_count){ 0, 1 };
	assert_int_equal(lz_spawn_run_watched(&spec, "true", 5000, &watch, &err), 0);
	assert_int_equal(w.calls, 0);
	/* The time limit still holds between the looks. */
	char *const sleeper[] = { "sleep", "30", NULL };
	spec.path = "/bin/sleep";
	spec.argv = sleeper;
	w = (struct watch_count){ 0, 0 };
	const struct lz_spawn_watch often = { 20, count_check, &w };
	assert_int_equal(lz_spawn_run_watched(&spec, "sleep", 200, &often, &err), -ETIMEDOUT);
	assert_non_null(strstr(err.msg, "sleep: did not finish in time; killed"));
	assert_true(w.calls >= 5);
}

/* max_file_bytes bounds every file the child writes (RLIMIT_FSIZE), and
 * max_data_bytes its heap (RLIMIT_DATA), for what it starts too; the
 * caller's own limits are untouched. */
static void test_lz_spawn__limits_bound_the_child_not_the_caller(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char path[] = "/tmp/lz-test-fsize-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	char script[128];
	snprintf(script, sizeof(script), "exec head -c 100000 /dev/zero > %s", path);
	char *const argv[] = { "sh", "-c", script, NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1, .max_file_bytes = 4096 };
	struct rlimit before, after;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &before), 0);
	assert_int_equal(lz_spawn_run(&spec, "head", 5000, &err), -EIO);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &after), 0);
	assert_true(before.rlim_cur == after.rlim_cur && before.rlim_max == after.rlim_max);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 4096);
	spec.max_file_bytes = 0; /* none: the whole 100,000 bytes */
	assert_int_equal(lz_spawn_run(&spec, "head", 5000, &err), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 100000);

	/* max_data_bytes the same for RLIMIT_DATA: the child's shell reports
	 * it (in KiB), soft and hard. */
	snprintf(script, sizeof(script), "echo $(ulimit -S -d) $(ulimit -H -d) > %s", path);
	spec.max_data_bytes = 64 << 20;
	assert_int_equal(lz_spawn_run(&spec, "ulimit", 5000, &err), 0);
	FILE *f = fopen(path, "r");
	char got[64] = "";
	assert_non_null(f);
	assert_non_null(fgets(got, sizeof(got), f));
	fclose(f);
	assert_string_equal(got, "65536 65536\n");
	assert_int_equal(getrlimit(RLIMIT_DATA, &after), 0);
	assert_true(after.rlim_cur == RLIM_INFINITY || after.rlim_cur > (64 << 20));
	unlink(path);
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

static long minor_faults(void)
{
	struct rusage ru;
	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_minflt;
}

/* lz_spawn shares the caller's memory until the exec (issue 15): a fork
 * would leave every page the caller had written write-protected, and each
 * one it writes next a page fault. ASan builds fork (spawn.c says why). */
static void test_lz_spawn__leaves_the_callers_pages_writable(void **state)
{
	(void)state;
	enum { PAGES = 512 };
	long page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, PAGES * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(mem != MAP_FAILED);
	for (size_t i = 0; i < PAGES; i++)
		mem[i * (size_t)page] = 1;
	struct lz_err err = { 0, "" };
	char *const argv[] = { "true", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/true", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	assert_int_equal(lz_spawn_run(&spec, "true", 5000, &err), 0);
	long before = minor_faults();
	for (size_t i = 0; i < PAGES; i++)
		mem[i * (size_t)page] = 2;
	long faults = minor_faults() - before;
#if defined(__SANITIZE_ADDRESS__)
	assert_true(faults >= PAGES);
#else
	if (faults >= PAGES / 4)
		fail_msg("%ld page faults rewriting %d pages after a spawn", faults, PAGES);
#endif
	munmap(mem, PAGES * (size_t)page);
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

/* Runs /bin/pwd per spec (stdout to a pipe): what it printed, trailing
 * newline included, into out[0..size), and lz_spawn's result (the caller
 * asserts, so it can restore what it changed first). */
static int run_pwd(struct lz_spawn *spec, char *out, size_t size)
{
	struct lz_err err = { 0, "" };
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	static char *const argv[] = { "pwd", NULL };
	spec->exe_fd = -1;
	spec->path = "/bin/pwd";
	spec->argv = argv;
	spec->stdin_fd = -1;
	spec->stdout_fd = p[1];
	spec->stderr_fd = -1;
	int pidfd = -1;
	siginfo_t info;
	out[0] = '\0';
	int r = lz_spawn(spec, &pidfd, NULL, &err);
	close(p[1]);
	if (r < 0) {
		close(p[0]);
		snprintf(out, size, "lz_spawn: %s", err.msg);
		return r;
	}
	size_t n = 0;
	ssize_t k;
	while (n < size - 1 && (k = read(p[0], out + n, size - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = '\0';
	close(p[0]);
	r = lz_reap(pidfd, 5000, &info);
	close(pidfd);
	if (r < 0)
		return r;
	return info.si_code == CLD_EXITED && info.si_status == 0 ? 0 : -EIO;
}

/* A fresh directory under /tmp per test (its real path), removed by the
 * teardown whether the test passed or not. */
static int tmpdir_setup(void **state)
{
	char tmpl[] = "/tmp/lz-test-spawn-XXXXXX";
	char *path = malloc(PATH_MAX);
	if (path == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, path) == NULL) {
		free(path);
		return -1;
	}
	*state = path;
	return 0;
}

static int tmpdir_teardown(void **state)
{
	lz_test_rmtree(*state);
	free(*state);
	return 0;
}

/* own_group: the child leads a process group of its own (what it starts
 * can be signalled with it); without, it stays in the caller's. */
static void test_lz_spawn__own_group_leads_a_group_of_its_own(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const argv[] = { "sleep", "30", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/sleep", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	int pidfd = -1;
	pid_t pid = 0;
	assert_int_equal(lz_spawn(&spec, &pidfd, &pid, &err), 0);
	assert_int_equal(getpgid(pid), getpgrp());
	lz_kill_reap(&pidfd);
	spec.own_group = true;
	assert_int_equal(lz_spawn(&spec, &pidfd, &pid, &err), 0);
	assert_int_equal(getpgid(pid), pid);
	assert_int_equal(getsid(pid), getsid(0)); /* a group, not a session */
	lz_kill_reap(&pidfd);
}

static void test_lz_spawn__has_cwd_starts_in_cwd_fd(void **state)
{
	const char *dir = *state;
	char want[PATH_MAX + 2], got[PATH_MAX + 2], here[PATH_MAX];
	assert_non_null(getcwd(here, sizeof(here)));
	assert_string_not_equal(here, dir);
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd > 2);
	struct lz_spawn spec = { .has_cwd = true, .cwd_fd = dfd };
	assert_int_equal(run_pwd(&spec, got, sizeof(got)), 0);
	snprintf(want, sizeof(want), "%s\n", dir);
	assert_string_equal(got, want);
	/* The caller's own directory is not changed. */
	char after[PATH_MAX];
	assert_non_null(getcwd(after, sizeof(after)));
	assert_string_equal(after, here);
	close(dfd);
}

static void test_lz_spawn__cwd_fd_numbered_0_is_used_before_the_dup2s(void **state)
{
	const char *dir = *state;
	char want[PATH_MAX + 2], got[PATH_MAX + 2];
	/* Park stdin, so the directory takes descriptor 0. */
	int saved = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	assert_true(saved > 2);
	close(STDIN_FILENO);
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct lz_spawn spec = { .has_cwd = true, .cwd_fd = dfd };
	int r = dfd == 0 ? run_pwd(&spec, got, sizeof(got)) : -EBADF;
	if (dfd >= 0)
		close(dfd);
	assert_int_equal(dup2(saved, STDIN_FILENO), STDIN_FILENO);
	close(saved);
	assert_int_equal(dfd, 0);
	if (r < 0)
		fail_msg("%s (%s)", got, strerror(-r));
	snprintf(want, sizeof(want), "%s\n", dir);
	assert_string_equal(got, want);
}

static void test_lz_spawn__without_has_cwd_keeps_the_callers_directory(void **state)
{
	const char *dir = *state;
	char here[PATH_MAX], want[PATH_MAX + 2], got[PATH_MAX + 2];
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_non_null(getcwd(here, sizeof(here)));
	/* cwd_fd names a directory, but has_cwd is false: ignored. */
	struct lz_spawn spec = { .has_cwd = false, .cwd_fd = dfd };
	assert_int_equal(run_pwd(&spec, got, sizeof(got)), 0);
	snprintf(want, sizeof(want), "%s\n", here);
	assert_string_equal(got, want);
	/* And the zero-initialised spec (cwd_fd 0, has_cwd false) likewise. */
	struct lz_spawn zero = { 0 };
	assert_int_equal(run_pwd(&zero, got, sizeof(got)), 0);
	assert_string_equal(got, want);
	close(dfd);
}

static void test_lz_spawn__cwd_fd_not_a_directory_is_enotdir(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int fd = open("/bin/true", O_PATH | O_CLOEXEC);
	assert_true(fd >= 0);
	char *const argv[] = { "true", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/true", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
				 .has_cwd = true, .cwd_fd = fd };
	int pidfd = -1;
	assert_int_equal(lz_spawn(&spec, &pidfd, NULL, &err), -ENOTDIR);
	assert_non_null(strstr(err.msg, "exec 'true'"));
	close(fd);
}

/* A child's output is read until the child has exited, not until every
 * holder of the pipe has: a descendant left holding it (a daemonised
 * helper) neither delays the reader to its deadline nor turns a clean exit
 * into a timeout. */
static void test_lz_read_child_output__stops_when_the_child_exits(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	char *const argv[] = { "sh", "-c", "sleep 30 & echo hi", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = -1, .own_group = true };
	int pidfd = -1;
	assert_int_equal(lz_spawn(&spec, &pidfd, NULL, &err), 0);
	close(p[1]);
	char out[64];
	bool timed_out = true;
	int64_t start = lz_now_ms();
	size_t n = lz_read_child_output(p[0], pidfd, start + 10000, out, sizeof(out), &timed_out);
	assert_true(lz_now_ms() - start < 5000);
	assert_false(timed_out);
	assert_int_equal(n, 3);
	assert_string_equal(out, "hi\n");
	/* The sleep, left in the exited shell's group, leaves no orphan for
	 * the suites after this one. */
	assert_int_equal(syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 1U << 2 /* PIDFD_SIGNAL_PROCESS_GROUP */),
			 0);
	siginfo_t info;
	assert_int_equal(lz_reap(pidfd, 1000, &info), 0);
	assert_int_equal(info.si_status, 0);
	close(pidfd);
	close(p[0]);
}

/* A child that neither writes nor exits is killed at the deadline. */
static void test_lz_read_child_output__kills_at_the_deadline(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	char *const argv[] = { "sleep", "30", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .path = "/bin/sleep", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = -1 };
	int pidfd = -1;
	assert_int_equal(lz_spawn(&spec, &pidfd, NULL, &err), 0);
	close(p[1]);
	char out[64];
	bool timed_out = false;
	int64_t start = lz_now_ms();
	(void)lz_read_child_output(p[0], pidfd, start + 200, out, sizeof(out), &timed_out);
	assert_true(timed_out);
	assert_true(lz_now_ms() - start < 5000);
	siginfo_t info;
	assert_int_equal(lz_reap(pidfd, -1, &info), 0);
	assert_int_equal(info.si_code, CLD_KILLED);
	close(pidfd);
	close(p[0]);
}

/* ---- lz_spawn_start: the executable opened in the child ---- */

struct open_ctx {
	const char *path;
	int wait_fd; /* >= 0: the lookup waits for a byte on it first */
};

static int open_path(void *ctx, struct lz_err *err)
{
	const struct open_ctx *o = ctx;
	char c;
	if (o->wait_fd >= 0 && read(o->wait_fd, &c, 1) != 1)
		return lz_err_set(err, EIO, "the wait ended without a byte");
	int fd = open(o->path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return lz_err_set(err, errno, "cannot open %s: %s", o->path, strerror(errno));
	return fd;
}

/* lz_spawn_status once it says more than "not yet", within 5 s. */
static int await_status(int status_fd, int pidfd, bool *opening, struct lz_err *err)
{
	struct pollfd pf = { .fd = status_fd, .events = POLLIN };
	int r;
	for (int i = 0; i < 50 && (r = lz_spawn_status(status_fd, pidfd, "x", opening, err)) == 1; i++)
		(void)poll(&pf, 1, 100);
	return r;
}

static pid_t start(struct open_ctx *o, char *const *argv, int *pidfd, int *status_fd)
{
	struct lz_err err = { 0, "" };
	struct lz_spawn spec = { .exe_fd = -1, .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	pid_t pid = 0;
	assert_int_equal(lz_spawn_start(&spec, open_path, o, &o->wait_fd, 1, pidfd, &pid, status_fd, &err), 0);
	assert_true(pid > 0);
	return pid;
}

static void test_lz_spawn_start__runs_what_the_child_opened(void **state)
{
	(void)state;
	char *const argv[] = { "false", NULL };
	struct open_ctx o = { "/bin/false", -1 };
	int pidfd, status_fd;
	bool opening = true;
	struct lz_err err = { 0, "" };
	start(&o, argv, &pidfd, &status_fd);
	assert_int_equal(await_status(status_fd, pidfd, &opening, &err), 0);
	assert_false(opening);
	siginfo_t info;
	assert_int_equal(lz_reap(pidfd, 5000, &info), 0);
	assert_int_equal(info.si_code, CLD_EXITED);
	assert_int_equal(info.si_status, 1);
	close(pidfd);
	close(status_fd);
}

static void test_lz_spawn_start__an_open_failure_comes_back_with_its_message(void **state)
{
	(void)state;
	char *const argv[] = { "nothing", NULL };
	struct open_ctx o = { "/nonexistent/bin", -1 };
	int pidfd, status_fd;
	bool opening = false;
	struct lz_err err = { 0, "" };
	start(&o, argv, &pidfd, &status_fd);
	assert_int_equal(await_status(status_fd, pidfd, &opening, &err), -ENOENT);
	assert_true(opening);
	assert_string_equal(err.msg, "cannot open /nonexistent/bin: No such file or directory");
	siginfo_t info;
	assert_int_equal(lz_reap(pidfd, 5000, &info), 0);
	assert_int_equal(info.si_status, 127);
	close(pidfd);
	close(status_fd);
}

/* Opens the executable, then takes every descriptor the limit leaves but
 * the two lz_spawn_prepare needs (/dev/null and the executable's copy):
 * the keeper's argument file then finds none. */
static int open_path_leaving_two(void *ctx, struct lz_err *err)
{
	int fd = open_path(ctx, err);
	struct rlimit l = { 64, 64 };
	if (fd < 0 || setrlimit(RLIMIT_NOFILE, &l) < 0)
		return fd < 0 ? fd : lz_err_set(err, errno, "setrlimit: %s", strerror(errno));
	int last[2] = { -1, -1 }, d;
	while ((d = dup(fd)) >= 0) {
		last[0] = last[1];
		last[1] = d;
	}
	close(last[0]);
	close(last[1]);
	return fd;
}

/* No descriptor for the command's argument file: the start fails with the
 * reason, as an open failure does, instead of ending without one. */
static void test_lz_spawn_start__a_keeper_that_cannot_be_handed_the_command_says_why(void **state)
{
	(void)state;
	char *const argv[] = { "true", NULL };
	struct open_ctx o = { "/bin/true", -1 };
	int keeper = open(LZ_KEEPER_PATH, O_PATH | O_CLOEXEC);
	assert_true(keeper >= 0);
	struct lz_spawn spec = { .exe_fd = -1, .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1,
				 .keeper_fd = &keeper };
	int pidfd, status_fd;
	pid_t pid = 0;
	bool opening = false;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_spawn_start(&spec, open_path_leaving_two, &o, NULL, 0, &pidfd, &pid, &status_fd, &err), 0);
	assert_int_equal(await_status(status_fd, pidfd, &opening, &err), -EMFILE);
	assert_string_equal(err.msg, "hand the command to its keeper: Too many open files");
	siginfo_t info;
	assert_int_equal(lz_reap(pidfd, 5000, &info), 0);
	assert_int_equal(info.si_status, 127);
	close(pidfd);
	close(status_fd);
	close(keeper);
}

/* A command killed before its exec (the OOM killer, a kill -9; here
 * while the kernel copies a long argument vector) under a keeper is
 * reported as never started, as without one: not as started, and not as
 * refused while opening. The kill races the exec: tried until one lands
 * first. */
static void test_lz_spawn_start__a_keepers_command_killed_before_its_exec_never_started(void **state)
{
	(void)state;
	int keeper = open(LZ_KEEPER_PATH, O_PATH | O_CLOEXEC);
	assert_true(keeper >= 0);
	enum { N_ARGS = 15000 };
	static char big[100];
	memset(big, 'a', sizeof(big) - 1);
	char **argv = calloc(N_ARGS + 2, sizeof(*argv));
	assert_non_null(argv);
	argv[0] = "true";
	for (size_t i = 1; i <= N_ARGS; i++)
		argv[i] = big;
	struct open_ctx o = { "/bin/true", -1 };
	bool seen = false;
	for (int attempt = 0; attempt < 50 && !seen; attempt++) {
		struct lz_spawn spec = { .exe_fd = -1, .argv = argv, .stdin_fd = -1, .stdout_fd = -1,
					 .stderr_fd = -1, .keeper_fd = &keeper };
		int pidfd, status_fd;
		pid_t pid = 0;
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_spawn_start(&spec, open_path, &o, NULL, 0, &pidfd, &pid, &status_fd, &err), 0);
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
		int child = 0;
		for (int k = 0; k < 200000 && child <= 0; k++) {
			FILE *f = fopen(path, "r");
			if (f != NULL) {
				if (fscanf(f, "%d", &child) != 1)
					child = 0;
				fclose(f);
			}
		}
		if (child > 0)
			(void)kill(child, SIGKILL);
		bool opening = true;
		int r = await_status(status_fd, pidfd, &opening, &err);
		if (r == -ECHILD) {
			seen = true;
			assert_false(opening);
			assert_string_equal(err.msg, "exec 'x': the host process ended before it started");
		} else {
			assert_int_equal(r, 0); /* the exec came first: started */
		}
		siginfo_t info;
		assert_int_equal(lz_reap(pidfd, 5000, &info), 0);
		close(pidfd);
		close(status_fd);
	}
	free(argv);
	close(keeper);
	if (!seen)
		fail_msg("no kill landed before the exec in 50 tries");
}

static void test_lz_spawn_start__an_exec_failure_is_not_an_open_failure(void **state)
{
	(void)state;
	char *const argv[] = { "passwd", NULL };
	struct open_ctx o = { "/etc/passwd", -1 }; /* not executable */
	int pidfd, status_fd;
	bool opening = true;
	struct lz_err err = { 0, "" };
	start(&o, argv, &pidfd, &status_fd);
	assert_int_equal(await_status(status_fd, pidfd, &opening, &err), -EACCES);
	assert_false(opening);
	assert_non_null(strstr(err.msg, "exec 'x'"));
	lz_kill_reap(&pidfd);
	close(status_fd);
}

/* A child killed from outside before it exec'd (the OOM killer, kill -9)
 * closes its status pipe as an exec does: it is not reported as started. */
static void test_lz_spawn_start__killed_before_exec_is_not_started(void **state)
{
	(void)state;
	char *const argv[] = { "true", NULL };
	int never[2];
	assert_int_equal(pipe2(never, O_CLOEXEC), 0);
	struct open_ctx o = { "/bin/true", never[0] };
	int pidfd, status_fd;
	bool opening = true;
	struct lz_err err = { 0, "" };
	pid_t pid = start(&o, argv, &pidfd, &status_fd);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(await_status(status_fd, pidfd, &opening, &err), -ECHILD);
	assert_false(opening);
	assert_string_equal(err.msg, "exec 'x': the host process ended before it started");
	siginfo_t info;
	assert_int_equal(lz_reap(pidfd, 5000, &info), 0);
	assert_int_equal(info.si_code, CLD_KILLED);
	close(pidfd);
	close(status_fd);
	close(never[0]);
	close(never[1]);
}

/* The point of it: a lookup that never answers holds the child, never the
 * caller, which can kill it; and while it waits the child holds none of
 * the caller's descriptors but what it was given (a lock, a socket whose
 * end a peer awaits). */
static void test_lz_spawn_start__a_lookup_that_waits_holds_only_the_child(void **state)
{
	(void)state;
	char *const argv[] = { "true", NULL };
	int never[2];
	assert_int_equal(pipe2(never, O_CLOEXEC), 0);
	int callers = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(callers >= 0);
	struct open_ctx o = { "/bin/true", never[0] };
	int pidfd, status_fd;
	bool opening = false;
	struct lz_err err = { 0, "" };
	int64_t before = lz_now_ms();
	pid_t pid = start(&o, argv, &pidfd, &status_fd);
	assert_int_equal(lz_spawn_status(status_fd, pidfd, "true", &opening, &err), 1);
	struct pollfd pf = { .fd = status_fd, .events = POLLIN };
	assert_int_equal(poll(&pf, 1, 300), 0);
	assert_int_equal(lz_spawn_status(status_fd, pidfd, "true", &opening, &err), 1);
	assert_true(lz_now_ms() - before < 5000);
	char fds[64];
	snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(fds);
	assert_non_null(d);
	struct dirent *de;
	int others = 0;
	while ((de = readdir(d)) != NULL) {
		int n = de->d_name[0] == '.' ? -1 : atoi(de->d_name);
		if (n > 2 && n != never[0])
			others++;
	}
	closedir(d);
	assert_int_equal(others, 1); /* its end of the status pipe */
	close(callers);
	lz_kill_reap(&pidfd);
	close(never[0]);
	close(never[1]);
	close(status_fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_spawn_run__exit_status),
		cmocka_unit_test(test_lz_spawn_run_watched__a_check_stops_the_child),
		cmocka_unit_test(test_lz_spawn_run_watched__after_the_child_ended),
		cmocka_unit_test(test_lz_spawn__exec_errno_is_reported),
		cmocka_unit_test(test_lz_spawn__limits_bound_the_child_not_the_caller),
		cmocka_unit_test(test_lz_spawn__environment_is_empty_and_argv_exact),
		cmocka_unit_test(test_lz_reap__timeout_kills),
		cmocka_unit_test(test_lz_spawn__exe_fd_is_used_not_path),
		cmocka_unit_test(test_lz_spawn__own_group_leads_a_group_of_its_own),
		cmocka_unit_test_setup_teardown(test_lz_spawn__has_cwd_starts_in_cwd_fd,
						tmpdir_setup, tmpdir_teardown),
		cmocka_unit_test_setup_teardown(test_lz_spawn__cwd_fd_numbered_0_is_used_before_the_dup2s,
						tmpdir_setup, tmpdir_teardown),
		cmocka_unit_test_setup_teardown(test_lz_spawn__without_has_cwd_keeps_the_callers_directory,
						tmpdir_setup, tmpdir_teardown),
		cmocka_unit_test(test_lz_spawn__cwd_fd_not_a_directory_is_enotdir),
		cmocka_unit_test(test_lz_spawn__leaves_the_callers_pages_writable),
		cmocka_unit_test(test_lz_read_child_output__stops_when_the_child_exits),
		cmocka_unit_test(test_lz_read_child_output__kills_at_the_deadline),
		cmocka_unit_test(test_lz_spawn_start__runs_what_the_child_opened),
		cmocka_unit_test(test_lz_spawn_start__an_open_failure_comes_back_with_its_message),
		cmocka_unit_test(test_lz_spawn_start__a_keeper_that_cannot_be_handed_the_command_says_why),
		cmocka_unit_test(test_lz_spawn_start__a_keepers_command_killed_before_its_exec_never_started),
		cmocka_unit_test(test_lz_spawn_start__an_exec_failure_is_not_an_open_failure),
		cmocka_unit_test(test_lz_spawn_start__killed_before_exec_is_not_started),
		cmocka_unit_test(test_lz_spawn_start__a_lookup_that_waits_holds_only_the_child),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
