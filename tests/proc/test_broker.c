/* The causal acquisition broker (broker.h; spec 3.3 steps 2-8): exec and fn
 * targets, the staged hook before the barrier is released, exact signals and
 * waits through the pidfd, and joining another process's PID and mount
 * namespaces.
 *
 * CI runs this suite as root. A new user namespace needs newuidmap with
 * subordinate IDs, which root has not: that path runs only for an
 * unprivileged user listed in /etc/subuid, and the namespace-joining path
 * (which needs CAP_SYS_ADMIN over the target's namespaces) only as root.
 * Run as root, the user-namespace cases become the test user (LZ_TEST_USER,
 * default lazaret-test) in a child. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <poll.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include "lz_test_user.h"

#include "proc/broker.h"

static const char *bin(const char *name)
{
	static char path[64];
	snprintf(path, sizeof(path), "/usr/bin/%s", name);
	if (access(path, X_OK) == 0)
		return path;
	snprintf(path, sizeof(path), "/bin/%s", name);
	return path;
}

/* Reads fd to EOF into buf (NUL-terminated) and closes it. */
static size_t drain(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;
	while (n < cap - 1 && ((r = read(fd, buf + n, cap - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
		if (r > 0)
			n += (size_t)r;
	buf[n] = '\0';
	close(fd);
	return n;
}

/* Every marker path handed out, removed at the end even after a failure. */
static char markers[16][64];
static size_t n_markers;

static void make_marker_path(char *path, size_t cap)
{
	snprintf(path, cap, "/tmp/lz-test-broker-marker.XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(unlink(path), 0);
	if (n_markers < sizeof(markers) / sizeof(markers[0]))
		snprintf(markers[n_markers++], sizeof(markers[0]), "%s", path);
}

static int remove_markers(void **state)
{
	(void)state;
	for (size_t i = 0; i < n_markers; i++)
		(void)unlink(markers[i]);
	return 0;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Waits up to ms for path to appear. */
static bool appears(const char *path, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		if (exists(path))
			return true;
		usleep(10 * 1000);
	}
	return exists(path);
}

/* ---- exec targets --------------------------------------------------------- */

static void test_lz_broker_spawn__exec_argv_env_and_streams_are_exact(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int in[2], out[2], errp[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(errp, O_CLOEXEC), 0);
	/* $0 and every argument, byte for byte; the environment exactly as
	 * execve passed it (/proc/$$/environ: the shell's own additions such
	 * as PWD are not in it); stdin copied to stdout; stderr separate. */
	char *const argv[] = { "sh", "-c",
			       "printf '[%s]' \"$0\" \"$@\"; printf '\\n'; cat; printf err >&2; "
			       "tr '\\0' '\\n' </proc/$$/environ",
			       "zero", "a b", "*", "", "$HOME", NULL };
	char *const envp[] = { "LZ_A=1", "LZ_B=x y", NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv, .envp = envp,
				 .stdin_fd = in[0], .stdout_fd = out[1], .stderr_fd = errp[1] };
	struct lz_broker_spec spec = { .label = "exact", .join_pidfd = -1, .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	assert_true(child.pidfd >= 0);
	assert_true(child.exec);
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	assert_int_equal(write(in[1], "stdin bytes\n", 12), 12);
	close(in[1]);
	char obuf[1024], ebuf[256];
	drain(out[0], obuf, sizeof(obuf));
	drain(errp[0], ebuf, sizeof(ebuf));
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), 0);
	assert_int_equal(status, 0);
	assert_int_equal(child.pidfd, -EBADF);
	assert_string_equal(obuf, "[zero][a b][*][][$HOME]\nstdin bytes\nLZ_A=1\nLZ_B=x y\n");
	assert_string_equal(ebuf, "err");
}

static void test_lz_broker_wait__exec_exit_status(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const argv[] = { "sh", "-c", "exit 3", NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec spec = { .join_pidfd = -1, .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	int status = -1;
	/* A non-zero exec status is a status, not an error. */
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), 0);
	assert_int_equal(status, 3);
}

/* lz_broker_exited sees an exit without reaping it; a signal is no exit. */
static void test_lz_broker_exited__peeks_without_reaping(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const argv[] = { "sh", "-c", "read x; exit 128", NULL };
	int in[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv, .stdin_fd = in[0],
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec spec = { .join_pidfd = -1, .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	close(in[0]);
	int status = -1;
	assert_int_equal(lz_broker_exited(&child, &status), 0); /* waits on its stdin */
	close(in[1]);
	struct pollfd pf = { .fd = child.pidfd, .events = POLLIN };
	assert_int_equal(poll(&pf, 1, 5000), 1);
	assert_int_equal(lz_broker_exited(&child, &status), 1);
	assert_int_equal(status, 128);
	assert_int_equal(lz_broker_exited(&child, &status), 1); /* still not reaped */
	status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), 0);
	assert_int_equal(status, 128);

	char *const sleeper[] = { "sleep", "30", NULL };
	exec = (struct lz_spawn){ .exe_fd = -1, .path = "/bin/sleep", .argv = sleeper, .stdin_fd = -1,
				  .stdout_fd = -1, .stderr_fd = -1 };
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	assert_int_equal(lz_broker_signal(&child, SIGKILL), 0);
	pf.fd = child.pidfd;
	assert_int_equal(poll(&pf, 1, 5000), 1);
	assert_int_equal(lz_broker_exited(&child, &status), 0);
	assert_int_equal(status, 128 + SIGKILL);
	lz_broker_kill(&child);
}

static void test_lz_broker_spawn__exec_missing_file_is_enoent(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char *const argv[] = { "missing", NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/nonexistent/lz-test-missing", .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec spec = { .label = "missing", .join_pidfd = -1, .exec = &exec };
	struct lz_broker_child child = { .pidfd = 12345, .report_fd = 54321 };
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), -ENOENT);
	assert_int_equal(err.code, ENOENT);
	assert_non_null(strstr(err.msg, "missing"));
	/* *ret untouched on failure. */
	assert_int_equal(child.pidfd, 12345);
	assert_int_equal(child.report_fd, 54321);
}

static void test_lz_broker_spawn__spec_misuse_is_einval(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	struct lz_broker_spec none = { .join_pidfd = -1 };
	assert_int_equal(lz_broker_spawn(&none, &child, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "exactly one target"));
	char *const argv[] = { "true", NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/true", .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec userns = { .join_pidfd = -1, .exec = &exec,
					 .clone_flags = CLONE_NEWUSER };
	assert_int_equal(lz_broker_spawn(&userns, &child, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "ID map"));
	assert_int_equal(child.pidfd, -EBADF);
}

/* ---- fn targets ----------------------------------------------------------- */

static int fn_fails_with_message(void *arg, struct lz_err *err)
{
	(void)arg;
	return lz_err_set(err, EACCES, "cannot open the anchor: %s", "denied by test");
}

static int fn_fails_silently(void *arg, struct lz_err *err)
{
	(void)arg;
	(void)err;
	return -ENOENT;
}

static int fn_succeeds(void *arg, struct lz_err *err)
{
	(void)err;
	/* Proves it ran in the child: the name set through spec.comm. */
	char name[17] = "";
	prctl(PR_GET_NAME, name);
	return strcmp(name, (const char *)arg) == 0 ? 0 : -ESRCH;
}

static void test_lz_broker_wait__fn_error_message_is_eio(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_broker_spec spec = { .label = "fn", .join_pidfd = -1, .fn = fn_fails_with_message };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	assert_false(child.exec);
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), -EIO);
	assert_int_equal(status, 1);
	assert_string_equal(err.msg, "cannot open the anchor: denied by test");

	/* Without a message the errno's text comes back. */
	spec.fn = fn_fails_silently;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), -EIO);
	assert_int_equal(status, 1);
	assert_string_equal(err.msg, strerror(ENOENT));
}

static void test_lz_broker_wait__fn_success_is_zero(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_broker_spec spec = { .comm = "lz-test-fn", .join_pidfd = -1, .fn = fn_succeeds,
				       .arg = (void *)"lz-test-fn" };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), 0);
	assert_int_equal(status, 0);
}

/* ---- the staged hook (step 6) before the release (step 7) ----------------- */

struct staged_obs {
	const char *marker;
	int calls;
	bool marker_seen;       /* the target ran before the hook returned */
	bool pidfs_matches;     /* a pidfd opened for id->pid has id's pidfs inode */
	struct lz_pidref id;
	int own_pidfd;          /* that pidfd, kept to observe the child's end */
	int fail_with;          /* > 0: the hook refuses with this errno */
};

static int staged_hook(void *ctx, const struct lz_pidref *id, int pidfd, struct lz_err *err)
{
	(void)pidfd;
	struct staged_obs *o = ctx;
	o->calls++;
	o->id = *id;
	/* Give an unblocked child ample time to run its target. */
	usleep(200 * 1000);
	o->marker_seen = exists(o->marker);
	struct stat st;
	o->own_pidfd = (int)syscall(SYS_pidfd_open, id->pid, 0);
	o->pidfs_matches = o->own_pidfd >= 0 && fstat(o->own_pidfd, &st) == 0 &&
			   (uint64_t)st.st_ino == id->pidfs_ino && (uint64_t)st.st_dev == id->pidfs_dev;
	if (o->fail_with > 0)
		return lz_err_set(err, o->fail_with, "hook refused: persist failed");
	return 0;
}

static void test_lz_broker_spawn__staged_hook_sees_identity_before_target(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char marker[64];
	make_marker_path(marker, sizeof(marker));
	char *const argv[] = { "touch", marker, NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = bin("touch"), .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct staged_obs obs = { .marker = marker, .own_pidfd = -1 };
	struct lz_broker_spec spec = { .label = "staged", .join_pidfd = -1, .exec = &exec,
				       .staged = staged_hook, .ctx = &obs };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	assert_int_equal(obs.calls, 1);
	assert_false(obs.marker_seen);
	assert_true(obs.pidfs_matches);
	/* The hook saw exactly the identity of the returned pidfd. */
	struct lz_pidref now;
	assert_int_equal(lz_pidref_from_pidfd(child.pidfd, &now, &err), 0);
	assert_memory_equal(&obs.id, &child.id, sizeof(obs.id));
	assert_int_equal(now.pidfs_ino, obs.id.pidfs_ino);
	assert_int_equal(now.pidfs_dev, obs.id.pidfs_dev);
	assert_int_equal(now.pid, obs.id.pid);
	assert_memory_equal(now.boot_id, obs.id.boot_id, sizeof(now.boot_id));
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), 0);
	assert_int_equal(status, 0);
	/* ... and the target did run after the release. */
	assert_true(exists(marker));
	unlink(marker);
	close(obs.own_pidfd);
}

/* The staged child killed before its release (a same-user process, the
 * OOM killer): the release finds its barrier closed, and the spawn fails
 * (EPIPE) instead of the broker dying of SIGPIPE. */
static int kill_staged_child(void *ctx, const struct lz_pidref *id, int pidfd, struct lz_err *err)
{
	(void)ctx, (void)id, (void)err;
	(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	(void)poll(&p, 1, 5000); /* gone, its barrier end closed */
	return 0;
}

static void test_lz_broker_spawn__a_child_killed_before_release_fails_the_spawn(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		struct lz_err err = { 0, "" };
		char *const argv[] = { "true", NULL };
		struct lz_spawn exec = { .exe_fd = -1, .path = bin("true"), .argv = argv, .stdin_fd = -1,
					 .stdout_fd = -1, .stderr_fd = -1 };
		struct lz_broker_spec spec = { .label = "killed", .join_pidfd = -1, .exec = &exec,
					       .staged = kill_staged_child };
		struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
		int r = lz_broker_spawn(&spec, &child, &err);
		_exit(r == -EPIPE && strstr(err.msg, "release") != NULL ? 0 : 1);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the broker died of signal %d", WTERMSIG(status));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_lz_broker_spawn__failing_hook_kills_before_target(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char marker[64];
	make_marker_path(marker, sizeof(marker));
	char *const argv[] = { "touch", marker, NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = bin("touch"), .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct staged_obs obs = { .marker = marker, .own_pidfd = -1, .fail_with = EDQUOT };
	struct lz_broker_spec spec = { .label = "refused", .join_pidfd = -1, .exec = &exec,
				       .staged = staged_hook, .ctx = &obs };
	struct lz_broker_child child = { .pidfd = 777, .report_fd = 778 };
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), -EDQUOT);
	assert_non_null(strstr(err.msg, "hook refused: persist failed"));
	assert_int_equal(obs.calls, 1);
	assert_true(obs.pidfs_matches);
	assert_int_equal(child.pidfd, 777);
	assert_int_equal(child.report_fd, 778);
	/* The child is gone (its pidfd is readable) and never ran the target. */
	struct pollfd p = { .fd = obs.own_pidfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_true(p.revents & POLLIN);
	assert_false(appears(marker, 300));
	close(obs.own_pidfd);
	unlink(marker);
}

static int fn_touch(void *arg, struct lz_err *err)
{
	int fd = open(arg, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return lz_err_set(err, errno, "create marker: %s", strerror(errno));
	close(fd);
	return 0;
}

static void test_lz_broker_spawn__failing_hook_stops_fn_target(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	char marker[64];
	make_marker_path(marker, sizeof(marker));
	struct staged_obs obs = { .marker = marker, .own_pidfd = -1, .fail_with = EPERM };
	struct lz_broker_spec spec = { .label = "refused fn", .join_pidfd = -1, .fn = fn_touch,
				       .arg = marker, .staged = staged_hook, .ctx = &obs };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), -EPERM);
	assert_false(obs.marker_seen);
	assert_int_equal(child.pidfd, -EBADF);
	assert_false(appears(marker, 300));
	close(obs.own_pidfd);

	/* Control: the same fn target with an accepting hook does create it. */
	obs = (struct staged_obs){ .marker = marker, .own_pidfd = -1 };
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), 0);
	assert_false(obs.marker_seen);
	assert_true(exists(marker));
	close(obs.own_pidfd);
	unlink(marker);
}

/* ---- waits and signals through the pidfd ---------------------------------- */

static void spawn_sleep(struct lz_broker_child *child)
{
	struct lz_err err = { 0, "" };
	static char *const argv[] = { "sleep", "30", NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = bin("sleep"), .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec spec = { .join_pidfd = -1, .exec = &exec };
	assert_int_equal(lz_broker_spawn(&spec, child, &err), 0);
}

static void test_lz_broker_wait__timeout_kills(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	spawn_sleep(&child);
	int watch = fcntl(child.pidfd, F_DUPFD_CLOEXEC, 3);
	assert_true(watch >= 0);
	int status = -1;
	int64_t start = lz_now_ms();
	assert_int_equal(lz_broker_wait(&child, 200, &status, &err), -ETIMEDOUT);
	assert_true(lz_now_ms() - start < 5000);
	assert_int_equal(status, -1); /* untouched on failure */
	assert_non_null(strstr(err.msg, "timed out"));
	assert_int_equal(child.pidfd, -EBADF);
	/* Killed and reaped: the process no longer exists. */
	struct pollfd p = { .fd = watch, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 0), 1);
	siginfo_t info = { 0 };
	assert_int_equal(waitid(P_PIDFD, (id_t)watch, &info, WEXITED | WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	close(watch);
}

static int fn_sleeps(void *arg, struct lz_err *err)
{
	(void)arg;
	(void)err;
	sleep(30);
	return 0;
}

/* A function target holds its report channel open while it runs: the
 * limit holds while the channel is read (a router blocked in its first
 * build held its stop, and a launch, forever). */
static void test_lz_broker_wait__timeout_kills_a_silent_fn_target(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_broker_spec spec = { .label = "fn", .join_pidfd = -1, .fn = fn_sleeps };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	assert_false(child.exec);
	int status = -1;
	int64_t start = lz_now_ms();
	assert_int_equal(lz_broker_wait(&child, 200, &status, &err), -ETIMEDOUT);
	assert_true(lz_now_ms() - start < 5000);
	assert_non_null(strstr(err.msg, "timed out"));
	assert_int_equal(child.pidfd, -EBADF);
	/* zero: killed at once unless already gone */
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	start = lz_now_ms();
	assert_int_equal(lz_broker_wait(&child, 0, &status, &err), -ETIMEDOUT);
	assert_true(lz_now_ms() - start < 5000);
}

static void test_lz_broker_signal__delivers_through_pidfd(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	spawn_sleep(&child);
	assert_int_equal(lz_broker_signal(&child, SIGUSR1), 0);
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), 0);
	assert_int_equal(status, 128 + SIGUSR1);
	/* A released child has no pidfd to signal. */
	assert_int_equal(lz_broker_signal(&child, SIGTERM), -EBADF);
	/* Signal 0 probes; an invalid signal is the kernel's -EINVAL. */
	spawn_sleep(&child);
	assert_int_equal(lz_broker_signal(&child, 0), 0);
	assert_int_equal(lz_broker_signal(&child, 1000), -EINVAL);
	lz_broker_kill(&child);
	assert_int_equal(child.pidfd, -EBADF);
	lz_broker_kill(&child); /* an empty child is accepted */
	lz_broker_kill(NULL);
}

/* ---- joining a PID and mount namespace (root) ----------------------------- */

/* A holder: PID 1 of a new PID namespace with its own mount namespace and a
 * /proc of that PID namespace; it waits to be killed. */
static int start_holder(int *ret_pidfd)
{
	int ready[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	int pidfd = -1;
	pid_t pid = lz_clone_pidfd(CLONE_NEWPID | CLONE_NEWNS, &pidfd);
	if (pid == 0) {
		close(ready[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		prctl(PR_SET_NAME, "lz-test-holder");
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			_exit(1);
		(void)!write(ready[1], "R", 1);
		for (;;)
			pause();
	}
	close(ready[1]);
	assert_true(pid > 0);
	char c = 0;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	*ret_pidfd = pidfd;
	return 0;
}

static void stop_holder(int pidfd)
{
	siginfo_t info;
	(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	(void)lz_reap(pidfd, -1, &info);
	close(pidfd);
}

/* Runs sh -c script in the holder's namespaces; returns the status and the
 * output in out. */
static int run_joined(int holder, const char *script, char *out, size_t cap,
		      struct lz_broker_child *keep)
{
	struct lz_err err = { 0, "" };
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	char *const argv[] = { "sh", "-c", (char *)script, NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv, .stdin_fd = -1,
				 .stdout_fd = p[1], .stderr_fd = -1 };
	struct lz_broker_spec spec = { .label = "joined", .comm = "lz-test-join", .join_pidfd = holder,
				       .join_flags = CLONE_NEWPID | CLONE_NEWNS, .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	int r = lz_broker_spawn(&spec, &child, &err);
	close(p[1]);
	if (r < 0) {
		close(p[0]);
		print_error("spawn: %s\n", err.msg);
		return r;
	}
	if (keep) {
		*keep = child;
		return p[0];
	}
	drain(p[0], out, cap);
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 10000, &status, &err), 0);
	return status;
}

/* The wrapper that joins a PID namespace killed (by a same-user process)
 * just after its release, before its child has armed the parent-death
 * signal: the child must not go on to run the target as an orphan of the
 * host's init. Raced 60 times; a target's command line is the marker. */
#define ORPHAN_MARK "9.3137"

static int kill_wrapper_soon(void *ctx, const struct lz_pidref *id, int pidfd, struct lz_err *err)
{
	(void)ctx, (void)pidfd, (void)err;
	pid_t wrapper = (pid_t)id->pid;
	if (fork() == 0) {
		struct timespec t0, t;
		long wait_us = random() % 400;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < wait_us);
		kill(wrapper, SIGKILL);
		_exit(0);
	}
	return 0;
}

/* Kills every process running "sleep ORPHAN_MARK"; returns how many. */
static int kill_orphans(void)
{
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[300], cmd[64] = "";
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd < 0 ? -1 : read(fd, cmd, sizeof(cmd) - 1);
		if (fd >= 0)
			close(fd);
		if (k > 0 && memcmp(cmd, "sleep\0" ORPHAN_MARK, sizeof("sleep\0" ORPHAN_MARK)) == 0) {
			kill(atoi(e->d_name), SIGKILL);
			n++;
		}
	}
	if (d != NULL)
		closedir(d);
	return n;
}

static void test_lz_broker_spawn__a_killed_pidns_wrapper_leaves_no_orphan(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	int holder = -1;
	start_holder(&holder);
	srandom((unsigned)getpid());
	for (int i = 0; i < 60; i++) {
		char *const argv[] = { "sleep", ORPHAN_MARK, NULL };
		struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sleep", .argv = argv, .stdin_fd = -1,
					 .stdout_fd = -1, .stderr_fd = -1 };
		struct lz_broker_spec spec = { .label = "race", .join_pidfd = holder, .join_flags = CLONE_NEWPID,
					       .exec = &exec, .staged = kill_wrapper_soon };
		struct lz_err err = { 0, "" };
		struct lz_broker_child c = LZ_BROKER_CHILD_INIT;
		if (lz_broker_spawn(&spec, &c, &err) == 0)
			lz_broker_kill(&c); /* the session's end: its target goes too */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	usleep(300 * 1000);
	int orphans = kill_orphans();
	stop_holder(holder);
	assert_int_equal(orphans, 0);
}

static void test_lz_broker_spawn__join_pidns_and_mountns(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	int holder = -1;
	start_holder(&holder);
	char out[256];
	/* $$ is the PID in the joined PID namespace (the holder is 1); the
	 * first field of /proc/self/stat is the PID as the joined mount
	 * namespace's /proc sees it, and /proc/1 is the holder. */
	int status = run_joined(holder, "read pid rest </proc/self/stat; "
					"echo \"$$ $pid $(cat /proc/1/comm)\"", out, sizeof(out), NULL);
	assert_int_equal(status, 0);
	int shell = 0, proc = 0;
	char comm[32] = "";
	assert_int_equal(sscanf(out, "%d %d %31s", &shell, &proc, comm), 3);
	assert_in_range(shell, 2, 20);
	assert_int_equal(proc, shell);
	assert_string_equal(comm, "lz-test-holder");
	stop_holder(holder);
}

static void test_lz_broker_wait__joined_pidns_relays_exit_status(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	int holder = -1;
	start_holder(&holder);
	char out[64];
	assert_int_equal(run_joined(holder, "exit 5", out, sizeof(out), NULL), 5);
	assert_int_equal(run_joined(holder, "kill -9 $$", out, sizeof(out), NULL), 137);
	assert_int_equal(run_joined(holder, "exit 0", out, sizeof(out), NULL), 0);
	stop_holder(holder);
}

static void test_lz_broker_signal__joined_pidns_relays_signal(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	int holder = -1;
	start_holder(&holder);
	struct lz_err err = { 0, "" };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	/* The target handles TERM itself: status 42 proves the wrapper relayed
	 * the signal (a wrapper killed by it would give 143). */
	int out = run_joined(holder, "trap 'exit 42' TERM; echo up; while :; do sleep 0.05; done", NULL, 0,
			     &child);
	assert_true(out >= 0);
	char buf[8] = "";
	assert_int_equal(read(out, buf, 3), 3); /* the trap is installed */
	close(out);
	usleep(100 * 1000); /* the wrapper installs its relay after the exec report */
	assert_int_equal(lz_broker_signal(&child, SIGTERM), 0);
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 10000, &status, &err), 0);
	assert_int_equal(status, 42);
	stop_holder(holder);
}

static void test_lz_broker_spawn__join_failure_is_reported(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	/* A pidfd of an exited, reaped process: setns fails in the wrapper and
	 * the errno comes back; the target never runs. */
	int pidfd = -1;
	pid_t pid = lz_clone_pidfd(0, &pidfd);
	if (pid == 0)
		_exit(0);
	assert_true(pid > 0);
	siginfo_t info;
	assert_int_equal(lz_reap(pidfd, 5000, &info), 0);
	char marker[64];
	make_marker_path(marker, sizeof(marker));
	char *const argv[] = { "touch", marker, NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = bin("touch"), .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec spec = { .join_pidfd = pidfd, .join_flags = CLONE_NEWNS, .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), -ESRCH);
	assert_int_equal(child.pidfd, -EBADF);
	assert_false(appears(marker, 200));
	close(pidfd);
}

/* ---- what children forget (spec 3.3: keys stay in the coordinator) -------- */

static unsigned char secret[32];

static void wipe_secret(void *ctx)
{
	explicit_bzero(ctx, sizeof(secret));
}

static bool secret_is_wiped(const unsigned char *s)
{
	for (size_t i = 0; i < sizeof(secret); i++)
		if (s[i] != 0)
			return false;
	return true;
}

static int fn_secret_wiped(void *arg, struct lz_err *err)
{
	(void)arg;
	(void)err;
	return secret_is_wiped(secret) ? 0 : -EEXIST;
}

static int run_fn(int (*fn)(void *, struct lz_err *))
{
	struct lz_err err = { 0, "" };
	struct lz_broker_spec spec = { .label = "fn", .join_pidfd = -1, .fn = fn };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	int status = -1;
	(void)lz_broker_wait(&child, 5000, &status, &err);
	return status;
}

static void test_lz_broker_forget_in_children__fn_target_runs_without_it(void **state)
{
	(void)state;
	memset(secret, 0xa5, sizeof(secret));
	/* Nothing registered: the fork holds the parent's copy. */
	assert_int_equal(run_fn(fn_secret_wiped), 1);
	lz_broker_forget_in_children(wipe_secret, secret);
	assert_int_equal(run_fn(fn_secret_wiped), 0);
	lz_broker_forget_in_children(NULL, NULL);
	assert_false(secret_is_wiped(secret)); /* the parent's own is kept */
	assert_int_equal(run_fn(fn_secret_wiped), 1);
}

/* The wrapper of a joined PID namespace lives as long as its target: its
 * memory, read from here, holds no secret once the spawn returned. */
static void test_lz_broker_forget_in_children__pidns_wrapper_runs_without_it(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	int holder = -1;
	start_holder(&holder);
	memset(secret, 0xa5, sizeof(secret));
	for (int forget = 0; forget < 2; forget++) {
		lz_broker_forget_in_children(forget ? wipe_secret : NULL, secret);
		struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
		int out = run_joined(holder, "sleep 30", NULL, 0, &child);
		assert_true(out >= 0);
		unsigned char seen[sizeof(secret)];
		struct iovec local = { seen, sizeof(seen) }, remote = { secret, sizeof(secret) };
		assert_int_equal(process_vm_readv(child.id.pid, &local, 1, &remote, 1, 0), (ssize_t)sizeof(seen));
		assert_int_equal(secret_is_wiped(seen), forget == 1);
		lz_broker_kill(&child);
		close(out);
	}
	lz_broker_forget_in_children(NULL, NULL);
	stop_holder(holder);
}

/* ---- a new user namespace (unprivileged users with subordinate IDs) ------- */


/* The body, without cmocka (it may run in a forked child): 0 when the
 * namespace child saw uid 0 and exactly Lazaret's two-line map. */
static int userns_check(char *why, size_t size)
{
	struct lz_err err = { 0, "" };
	struct lz_idmap map;
	if (lz_idmap_for_invoking_user(&map, &err) < 0) {
		snprintf(why, size, "idmap: %s", err.msg);
		return 1;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return 1;
	char *const argv[] = { "sh", "-c", "id -u; cat /proc/self/uid_map", NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv, .stdin_fd = -1,
				 .stdout_fd = p[1], .stderr_fd = -1 };
	struct lz_broker_spec spec = { .join_pidfd = -1, .clone_flags = CLONE_NEWUSER, .map = &map,
				       .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	if (lz_broker_spawn(&spec, &child, &err) < 0) {
		snprintf(why, size, "spawn: %s", err.msg);
		return 1;
	}
	close(p[1]);
	char out[512];
	drain(p[0], out, sizeof(out));
	int status = -1;
	if (lz_broker_wait(&child, 5000, &status, &err) < 0 || status != 0) {
		snprintf(why, size, "child failed (%d): %s", status, err.msg);
		return 1;
	}
	unsigned id, a0, h0, c0, a1, h1, c1;
	if (sscanf(out, "%u %u %u %u %u %u %u", &id, &a0, &h0, &c0, &a1, &h1, &c1) != 7 || id != 0 ||
	    a0 != 0 || h0 != getuid() || c0 != 1 || a1 != 1 || h1 != map.subuid_start ||
	    c1 != LZ_USERNS_SUBID_COUNT) {
		snprintf(why, size, "unexpected namespace view: %.200s", out);
		return 1;
	}
	return 0;
}

/* A group the test user is given besides its own when the suite runs as
 * root (which may have none): what a process in a user namespace must not
 * keep (the docker group, to the developer). It need not exist. */
#define TEST_GROUP 4242

/* lz_test_run_as_user (tests/lz_test_user.h), as root with TEST_GROUP as
 * a supplementary group. */
static void run_as_test_user(int (*check)(char *why, size_t size))
{
	lz_test_run_as_user(check, TEST_GROUP);
}

static void test_lz_broker_spawn__new_userns_has_verified_map(void **state)
{
	(void)state;
	run_as_test_user(userns_check);
}

/* ---- the developer's keys and groups stay outside (spec 3.3, SR-12) ------- */

/* The Groups: line of /proc/self/status, without its blanks. */
static int status_groups(char *buf, size_t size)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (f == NULL)
		return -errno;
	char line[512];
	int r = -ENOENT;
	while (r < 0 && fgets(line, sizeof(line), f))
		if (strncmp(line, "Groups:", 7) == 0) {
			const char *v = line + 7;
			v += strspn(v, " \t");
			snprintf(buf, size, "%.*s", (int)strcspn(v, "\n"), v);
			size_t n = strlen(buf);
			while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
				buf[--n] = '\0';
			r = 0;
		}
	fclose(f);
	return r;
}

/* The target, in a user namespace: the key the test holds in its session
 * keyring (a Kerberos ticket, to the developer) cannot be read by its
 * serial, and no supplementary group is left. */
static int fn_holds_no_host_credentials(void *arg, struct lz_err *err)
{
	int32_t serial = *(const int32_t *)arg;
	char buf[64], groups[256];
	long n = syscall(SYS_keyctl, KEYCTL_READ, serial, buf, sizeof(buf));
	if (n >= 0)
		return lz_err_set(err, EEXIST, "read the caller's key by its serial (%ld bytes)", n);
	int r = status_groups(groups, sizeof(groups));
	if (r < 0)
		return lz_err_set(err, -r, "Groups: of /proc/self/status: %s", strerror(-r));
	if (groups[0] != '\0')
		return lz_err_set(err, EEXIST, "kept supplementary groups: %s", groups);
	return 0;
}

/* In the checking child: a session keyring of its own (named, so the
 * caller's is not touched) holding a "user" key this process can read,
 * and at least one supplementary group. */
static int hold_host_credentials(int32_t *ret_serial, char *why, size_t size)
{
	char name[64];
	snprintf(name, sizeof(name), "lz-test-broker-%d", (int)getpid());
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, name) < 0) {
		snprintf(why, size, "join a session keyring: %s", strerror(errno));
		return 1;
	}
	long serial = syscall(SYS_add_key, "user", "lz-test-broker-key", "secret", 6, KEY_SPEC_SESSION_KEYRING);
	char buf[16];
	if (serial < 0 || syscall(SYS_keyctl, KEYCTL_READ, serial, buf, sizeof(buf)) != 6) {
		snprintf(why, size, "add and read back a key: %s", strerror(errno));
		return 1;
	}
	char groups[256] = "";
	if (status_groups(groups, sizeof(groups)) < 0 || groups[0] == '\0') {
		snprintf(why, size, "this process has no supplementary group to leave behind (run as root, "
				    "or as a user with one)");
		return 1;
	}
	*ret_serial = (int32_t)serial;
	return 0;
}

/* The flags the Runtime Supervisor is created with (coordinator.c). */
#define RS_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS)

static int spawn_fn_and_wait(struct lz_broker_spec *spec, char *why, size_t size)
{
	struct lz_err err = { 0, "" };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	if (lz_broker_spawn(spec, &child, &err) < 0) {
		snprintf(why, size, "spawn: %s", err.msg);
		return 1;
	}
	int status = -1;
	if (lz_broker_wait(&child, 5000, &status, &err) < 0 || status != 0) {
		snprintf(why, size, "%s (%d): %s", spec->label, status, err.msg);
		return 1;
	}
	return 0;
}

/* The key and groups a check's target must not hold, and the invoking
 * user's ID map for its user namespace. */
static int hold_credentials_and_map(int32_t *serial, struct lz_idmap *map, char *why, size_t size)
{
	struct lz_err err = { 0, "" };
	if (hold_host_credentials(serial, why, size) != 0)
		return 1;
	if (lz_idmap_for_invoking_user(map, &err) < 0) {
		snprintf(why, size, "idmap: %s", err.msg);
		return 1;
	}
	return 0;
}

/* The Runtime Supervisor's path: a fn target in a new user namespace. */
static int keys_new_userns_check(char *why, size_t size)
{
	struct lz_idmap map;
	int32_t serial = 0;
	if (hold_credentials_and_map(&serial, &map, why, size) != 0)
		return 1;
	struct lz_broker_spec spec = { .label = "new user namespace", .clone_flags = RS_FLAGS, .map = &map,
				       .join_pidfd = -1, .fn = fn_holds_no_host_credentials, .arg = &serial };
	return spawn_fn_and_wait(&spec, why, size);
}

static void test_lz_broker_spawn__new_userns_leaves_keyring_and_groups(void **state)
{
	(void)state;
	run_as_test_user(keys_new_userns_check);
}

static int fn_holds(void *arg, struct lz_err *err)
{
	(void)arg;
	(void)err;
	for (;;)
		pause();
	return 0; /* not reached: killed */
}

/* A session's exec client's path: joining the user, mount and PID
 * namespaces of a process made like the Runtime Supervisor. */
static int keys_joined_userns_check(char *why, size_t size)
{
	struct lz_err err = { 0, "" };
	struct lz_idmap map;
	int32_t serial = 0;
	if (hold_credentials_and_map(&serial, &map, why, size) != 0)
		return 1;
	struct lz_broker_spec holder_spec = { .label = "holder", .clone_flags = RS_FLAGS, .map = &map,
					      .join_pidfd = -1, .fn = fn_holds };
	struct lz_broker_child holder = LZ_BROKER_CHILD_INIT;
	if (lz_broker_spawn(&holder_spec, &holder, &err) < 0) {
		snprintf(why, size, "holder: %s", err.msg);
		return 1;
	}
	struct lz_broker_spec spec = { .label = "joined user namespace", .join_pidfd = holder.pidfd,
				       .join_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID,
				       .fn = fn_holds_no_host_credentials, .arg = &serial };
	int r = spawn_fn_and_wait(&spec, why, size);
	lz_broker_kill(&holder);
	return r;
}

static void test_lz_broker_spawn__joined_userns_leaves_keyring_and_groups(void **state)
{
	(void)state;
	run_as_test_user(keys_joined_userns_check);
}

/* ---- host tools run from their descriptors (platform/hostprobe.h) -------- */

/* A tool (a copy of true) in a directory of its own, its O_PATH descriptor,
 * and the end of a pipe a holder says "hidden" on. */
struct tool_fx {
	char dir[64];
	char path[96];
	int fd;
	int hidden;
};

/* In a process of the RS's making (its own user and mount namespaces): a
 * tmpfs over the tool's directory, so its path shows nothing there. */
static int hide_tool(const struct tool_fx *t, struct lz_err *err)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || mount("tmpfs", t->dir, "tmpfs", 0, NULL) < 0)
		return lz_err_set(err, errno, "hide %s: %s", t->dir, strerror(errno));
	if (access(t->path, F_OK) == 0 || errno != ENOENT)
		return lz_err_set(err, EEXIST, "%s is still there", t->path);
	return 0;
}

/* The RS's way (supervisor.c: runsc, slirp4netns): its own broker child
 * executes the descriptor, with no name that leads to the file. */
static int fn_runs_tool(void *arg, struct lz_err *err)
{
	const struct tool_fx *t = arg;
	int r = hide_tool(t, err);
	if (r < 0)
		return r;
	char *argv[] = { "tool", NULL };
	struct lz_spawn exec = { .exe_fd = t->fd, .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec spec = { .label = "tool", .join_pidfd = -1, .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	int status = -1;
	if ((r = lz_broker_spawn(&spec, &child, err)) < 0 || (r = lz_broker_wait(&child, 5000, &status, err)) < 0)
		return r;
	return status == 0 ? 0 : lz_err_set(err, EIO, "the tool exited %d", status);
}

static int fn_hides_and_holds(void *arg, struct lz_err *err)
{
	const struct tool_fx *t = arg;
	int r = hide_tool(t, err);
	if (r < 0)
		return r;
	(void)!write(t->hidden, "h", 1);
	for (;;)
		pause();
	return 0; /* not reached: killed */
}

static int tool_fx_make(struct tool_fx *t, char *why, size_t size)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/lz-test-broker-tool.XXXXXX");
	size_t len = 0;
	char *bytes = lz_test_read_file(bin("true"), &len);
	int fd = -1;
	if (bytes == NULL || mkdtemp(t->dir) == NULL || chmod(t->dir, 0755) < 0) {
		snprintf(why, size, "fixture: %s", strerror(errno));
		free(bytes);
		return 1;
	}
	snprintf(t->path, sizeof(t->path), "%s/tool", t->dir);
	fd = open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	bool ok = fd >= 0 && write(fd, bytes, len) == (ssize_t)len;
	free(bytes);
	if (fd >= 0)
		close(fd);
	if (!ok || (t->fd = open(t->path, O_PATH | O_CLOEXEC)) < 0) {
		snprintf(why, size, "fixture %s: %s", t->path, strerror(errno));
		return 1;
	}
	return 0;
}

static void tool_fx_free(struct tool_fx *t)
{
	close(t->fd);
	unlink(t->path);
	rmdir(t->dir);
}

static int tool_in_userns_check(char *why, size_t size)
{
	struct lz_err err = { 0, "" };
	struct lz_idmap map;
	struct tool_fx t;
	if (lz_idmap_for_invoking_user(&map, &err) < 0) {
		snprintf(why, size, "idmap: %s", err.msg);
		return 1;
	}
	if (tool_fx_make(&t, why, size) != 0)
		return 1;
	/* The Runtime Supervisor's own children. */
	struct lz_broker_spec spec = { .label = "supervisor", .clone_flags = RS_FLAGS, .map = &map, .join_pidfd = -1,
				       .fn = fn_runs_tool, .arg = &t };
	int r = spawn_fn_and_wait(&spec, why, size);
	/* A session's exec client, joining a supervisor's namespaces. */
	int ready[2] = { -1, -1 };
	struct lz_broker_child holder = LZ_BROKER_CHILD_INIT, child = LZ_BROKER_CHILD_INIT;
	char c;
	if (r == 0 && pipe2(ready, O_CLOEXEC) < 0)
		r = 1;
	t.hidden = ready[1];
	struct lz_broker_spec hspec = { .label = "holder", .clone_flags = RS_FLAGS, .map = &map, .join_pidfd = -1,
					.fn = fn_hides_and_holds, .arg = &t };
	if (r == 0 && (lz_broker_spawn(&hspec, &holder, &err) < 0 || read(ready[0], &c, 1) != 1)) {
		snprintf(why, size, "holder: %s", err.msg[0] ? err.msg : "did not hide the tool");
		r = 1;
	}
	char *argv[] = { "tool", NULL };
	struct lz_spawn exec = { .exe_fd = t.fd, .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec jspec = { .label = "exec client", .join_pidfd = holder.pidfd,
					.join_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID, .exec = &exec };
	int status = -1;
	if (r == 0 && (lz_broker_spawn(&jspec, &child, &err) < 0 || lz_broker_wait(&child, 5000, &status, &err) < 0 ||
		       status != 0)) {
		snprintf(why, size, "exec client (%d): %s", status, err.msg);
		r = 1;
	}
	lz_broker_kill(&holder);
	if (ready[0] >= 0) {
		close(ready[0]);
		close(ready[1]);
	}
	tool_fx_free(&t);
	return r;
}

/* runsc and slirp4netns run from the descriptors they were checked through,
 * in the Runtime Supervisor's user and mount namespaces and in an exec
 * client that joined them: there the descriptor still executes, whatever
 * its path shows. */
static void test_lz_broker_spawn__userns_runs_a_tool_from_its_descriptor(void **state)
{
	(void)state;
	run_as_test_user(tool_in_userns_check);
}

static bool write_proc(pid_t pid, const char *file, const char *text)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok;
}

/* A user namespace whose setgroups is denied: the wrapper that joins it
 * cannot drop its groups, and refuses its target with the reason. */
static void test_lz_broker_spawn__userns_keeping_groups_is_refused(void **state)
{
	(void)state;
	int ready[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	int holder = -1;
	pid_t pid = lz_clone_pidfd(CLONE_NEWUSER, &holder);
	if (pid == 0) {
		close(ready[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char c;
		(void)!read(ready[0], &c, 1);
		for (;;)
			pause();
	}
	assert_true(pid > 0);
	close(ready[0]);
	char map[64];
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)getuid());
	assert_true(write_proc(pid, "uid_map", map));
	assert_true(write_proc(pid, "setgroups", "deny"));
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)getgid());
	assert_true(write_proc(pid, "gid_map", map));

	struct lz_err err = { 0, "" };
	char marker[64];
	make_marker_path(marker, sizeof(marker));
	char *const argv[] = { "touch", marker, NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = bin("touch"), .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec spec = { .label = "joined", .join_pidfd = holder, .join_flags = CLONE_NEWUSER,
				       .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), -EPERM);
	assert_string_equal(err.msg, "joined: cannot drop the supplementary groups (setgroups): "
				     "Operation not permitted");
	assert_int_equal(child.pidfd, -EBADF);
	assert_false(appears(marker, 200));

	/* A fn target's refusal comes back as text through lz_broker_wait. */
	spec = (struct lz_broker_spec){ .label = "joined fn", .join_pidfd = holder,
					.join_flags = CLONE_NEWUSER, .fn = fn_touch, .arg = marker };
	assert_int_equal(lz_broker_spawn(&spec, &child, &err), 0);
	int status = -1;
	assert_int_equal(lz_broker_wait(&child, 5000, &status, &err), -EIO);
	assert_int_equal(status, 125);
	assert_string_equal(err.msg, "cannot drop the supplementary groups (setgroups): Operation not permitted");
	assert_false(exists(marker));
	close(ready[1]);
	stop_holder(holder);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_broker_spawn__exec_argv_env_and_streams_are_exact),
		cmocka_unit_test(test_lz_broker_wait__exec_exit_status),
		cmocka_unit_test(test_lz_broker_exited__peeks_without_reaping),
		cmocka_unit_test(test_lz_broker_spawn__exec_missing_file_is_enoent),
		cmocka_unit_test(test_lz_broker_spawn__spec_misuse_is_einval),
		cmocka_unit_test(test_lz_broker_wait__fn_error_message_is_eio),
		cmocka_unit_test(test_lz_broker_wait__fn_success_is_zero),
		cmocka_unit_test(test_lz_broker_spawn__staged_hook_sees_identity_before_target),
		cmocka_unit_test(test_lz_broker_spawn__failing_hook_kills_before_target),
		cmocka_unit_test(test_lz_broker_spawn__a_child_killed_before_release_fails_the_spawn),
		cmocka_unit_test(test_lz_broker_spawn__failing_hook_stops_fn_target),
		cmocka_unit_test(test_lz_broker_wait__timeout_kills),
		cmocka_unit_test(test_lz_broker_wait__timeout_kills_a_silent_fn_target),
		cmocka_unit_test(test_lz_broker_signal__delivers_through_pidfd),
		cmocka_unit_test(test_lz_broker_spawn__join_pidns_and_mountns),
		cmocka_unit_test(test_lz_broker_spawn__a_killed_pidns_wrapper_leaves_no_orphan),
		cmocka_unit_test(test_lz_broker_wait__joined_pidns_relays_exit_status),
		cmocka_unit_test(test_lz_broker_signal__joined_pidns_relays_signal),
		cmocka_unit_test(test_lz_broker_spawn__join_failure_is_reported),
		cmocka_unit_test(test_lz_broker_forget_in_children__fn_target_runs_without_it),
		cmocka_unit_test(test_lz_broker_forget_in_children__pidns_wrapper_runs_without_it),
		cmocka_unit_test(test_lz_broker_spawn__new_userns_has_verified_map),
		cmocka_unit_test(test_lz_broker_spawn__new_userns_leaves_keyring_and_groups),
		cmocka_unit_test(test_lz_broker_spawn__joined_userns_leaves_keyring_and_groups),
		cmocka_unit_test(test_lz_broker_spawn__userns_runs_a_tool_from_its_descriptor),
		cmocka_unit_test(test_lz_broker_spawn__userns_keeping_groups_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, remove_markers);
}
