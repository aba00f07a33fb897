/* lazaret-init (core/init/sandbox_init.c), through the bytes embedded in the
 * product (init/sandbox_init_blob.h; spec 3.7): a static ELF with no
 * interpreter and no dynamic section, silent, ignoring SIGINT/SIGHUP/SIGPIPE,
 * exiting 0 on SIGTERM and, as PID 1 of a pid namespace (root only),
 * reaping the orphans reparented to it. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "init/sandbox_init_blob.h"

/* ---- (a) the ELF image ---- */

static void test_lz_sandbox_init__static_elf(void **state)
{
	(void)state;
	const unsigned char *b = lz_sandbox_init;
	size_t len = lz_sandbox_init_len;
	Elf64_Ehdr eh;
	assert_true(len > sizeof(eh));
	memcpy(&eh, b, sizeof(eh));
	assert_memory_equal(eh.e_ident, ELFMAG, SELFMAG);
	assert_int_equal(eh.e_ident[EI_CLASS], ELFCLASS64);
	assert_int_equal(eh.e_ident[EI_DATA], ELFDATA2LSB);
#if defined(__x86_64__)
	assert_int_equal(eh.e_machine, EM_X86_64);
#elif defined(__aarch64__)
	assert_int_equal(eh.e_machine, EM_AARCH64);
#endif
	/* ET_EXEC, or a static PIE; either way judged by its program headers. */
	assert_true(eh.e_type == ET_EXEC || eh.e_type == ET_DYN);
	assert_int_equal(eh.e_phentsize, sizeof(Elf64_Phdr));
	assert_true(eh.e_phnum > 0);
	assert_true(eh.e_phoff <= len && (len - eh.e_phoff) / sizeof(Elf64_Phdr) >= eh.e_phnum);
	bool load = false;
	for (size_t i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, b + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_INTERP)
			fail_msg("program header %zu is PT_INTERP", i);
		if (ph.p_type == PT_DYNAMIC)
			fail_msg("program header %zu is PT_DYNAMIC", i);
		load |= ph.p_type == PT_LOAD;
	}
	assert_true(load);
}

/* ---- (b) running it ---- */

static char tmpdir[64];
static char init_path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/lz-test-init.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return -1;
	snprintf(init_path, sizeof(init_path), "%s/lazaret-init", tmpdir);
	int fd = open(init_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off < lz_sandbox_init_len) {
		ssize_t w = write(fd, lz_sandbox_init + off, lz_sandbox_init_len - off);
		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	/* Closed before any fork, so exec never meets ETXTBSY. */
	return close(fd);
}

static int teardown(void **state)
{
	(void)state;
	unlink(init_path);
	return rmdir(tmpdir);
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The signal masks of pid from /proc (SigIgn, SigCgt), as bit sets. */
static bool read_sigmasks(pid_t pid, unsigned long long *ign, unsigned long long *cgt)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return false;
	int found = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "SigIgn: %llx", ign) == 1)
			found |= 1;
		if (sscanf(line, "SigCgt: %llx", cgt) == 1)
			found |= 2;
	}
	fclose(f);
	return found == 3;
}

#define SIGBIT(s) (1ULL << ((s) - 1))

/* Waits until pid has its SIGTERM handler (i.e. init is past setup). */
static void wait_ready(pid_t pid)
{
	long long deadline = now_ms() + 2000;
	unsigned long long ign = 0, cgt = 0;
	while (!(read_sigmasks(pid, &ign, &cgt) && (cgt & SIGBIT(SIGTERM)))) {
		if (now_ms() > deadline)
			fail_msg("lazaret-init never installed its SIGTERM handler");
		sleep_ms(5);
	}
	assert_true(cgt & SIGBIT(SIGCHLD));
	assert_true(ign & SIGBIT(SIGINT));
	assert_true(ign & SIGBIT(SIGHUP));
	assert_true(ign & SIGBIT(SIGPIPE));
}

/* Waits up to timeout_ms for pid to exit; returns its status, or -1. */
static int wait_exit(pid_t pid, int timeout_ms)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(pidfd >= 0);
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	int n;
	while ((n = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	close(pidfd);
	if (n == 0)
		return -1;
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void test_lz_sandbox_init__sigterm_exits_zero_silently(void **state)
{
	(void)state;
	int out[2];
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The environment is ignored: give it noise. */
		char *const argv[] = { "lazaret-init", NULL };
		char *const envp[] = { "LD_PRELOAD=/nonexistent.so", "LANG=xx", NULL };
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL); /* a hostile inherited mask */
		if (dup2(out[1], STDOUT_FILENO) < 0 || dup2(out[1], STDERR_FILENO) < 0)
			_exit(126);
		execve(init_path, argv, envp);
		_exit(127);
	}
	close(out[1]);
	wait_ready(pid);

	/* Terminal and pipe signals leave it running. */
	assert_int_equal(kill(pid, SIGINT), 0);
	assert_int_equal(kill(pid, SIGHUP), 0);
	assert_int_equal(kill(pid, SIGPIPE), 0);
	assert_int_equal(wait_exit(pid, 200), -1);

	long long start = now_ms();
	assert_int_equal(kill(pid, SIGTERM), 0);
	int status = wait_exit(pid, 2000);
	assert_int_not_equal(status, -1);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(now_ms() - start < 2000);

	char buf[64];
	assert_int_equal(read(out[0], buf, sizeof(buf)), 0); /* printed nothing */
	close(out[0]);
}

/* ---- (c) as PID 1: orphans are reaped (root only) ---- */

static pid_t live_helper, live_init;

/* The only child pid listed in /proc/<pid>/task/<pid>/children, or 0. */
static pid_t only_child(pid_t pid)
{
	char path[96], buf[128];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	int a, b;
	if (sscanf(buf, "%d %d", &a, &b) != 1)
		return 0;
	return a;
}

/* Runs in a child of the test: enters a new pid namespace, starts init as
 * its PID 1, then makes an orphan that is reparented to init. Writes init's
 * pid (as the test sees it) to report, then waits for init and exits with
 * its exit code (or 100 + signal). */
static void pidns_helper(int report)
{
	if (unshare(CLONE_NEWPID) < 0)
		_exit(errno == EPERM || errno == EINVAL ? 99 : 98);
	pid_t init = fork();
	if (init < 0)
		_exit(97);
	if (init == 0) {
		char *const argv[] = { "lazaret-init", NULL };
		char *const envp[] = { NULL };
		execve(init_path, argv, envp);
		_exit(127);
	}
	pid_t parent = fork(); /* pid 2 of the namespace */
	if (parent < 0)
		_exit(96);
	if (parent == 0) {
		if (fork() == 0) { /* the orphan-to-be: waits to be killed */
			for (;;)
				pause();
		}
		_exit(0); /* orphan its child: it goes to the namespace's PID 1 */
	}
	int status;
	if (waitpid(parent, &status, 0) != parent)
		_exit(95);
	if (write(report, &init, sizeof(init)) != sizeof(init))
		_exit(94);
	close(report);
	if (waitpid(init, &status, 0) != init)
		_exit(93);
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
}

/* Anything but no argument or "--attest <64 hex digits>" (then optionally
 * "--workspace-alias <path>") is refused at once, before any observation
 * or reaping. */
static int run_with_args(char *const argv[], char *msg, size_t cap)
{
	int out[2];
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *const envp[] = { NULL };
		if (dup2(out[1], STDOUT_FILENO) < 0 || dup2(out[1], STDERR_FILENO) < 0)
			_exit(126);
		execve(init_path, argv, envp);
		_exit(127);
	}
	close(out[1]);
	int status = wait_exit(pid, 2000);
	ssize_t n = read(out[0], msg, cap - 1);
	msg[n > 0 ? n : 0] = '\0';
	close(out[0]);
	return status;
}

static void test_lz_sandbox_init__bad_arguments_refused(void **state)
{
	(void)state;
	char msg[256];
	char *const unknown[] = { "lazaret-init", "--unexpected", NULL };
	char *const short_hex[] = { "lazaret-init", "--attest", "abcd", NULL };
	char *const upper_hex[] = { "lazaret-init", "--attest",
				    "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789", NULL };
	int status = run_with_args(unknown, msg, sizeof(msg));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	assert_non_null(strstr(msg, "lazaret-init: arguments: Invalid argument"));
	status = run_with_args(short_hex, msg, sizeof(msg));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	assert_non_null(strstr(msg, "lazaret-init: --attest: Invalid argument"));
	status = run_with_args(upper_hex, msg, sizeof(msg));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	assert_non_null(strstr(msg, "--attest"));
	/* The workspace alias names one absolute place, or nothing is made. */
	static const char *const bad_alias[][2] = {
		{ "--workspace-alias", "rel/ws" },   { "--workspace-alias", "/a/../ws" },
		{ "--workspace-alias", "/a//ws" },   { "--workspace-alias", "/a/ws/" },
		{ "--workspace-alias", "/" },	     { "--workspace-alias", "/a/./ws" },
		{ "--workspace-alias", "" },	     { "--alias", "/a/ws" },
	};
	for (size_t i = 0; i < sizeof(bad_alias) / sizeof(bad_alias[0]); i++) {
		char *const argv[] = { "lazaret-init", "--attest",
				       "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
				       (char *)bad_alias[i][0], (char *)bad_alias[i][1], NULL };
		status = run_with_args(argv, msg, sizeof(msg));
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		if (strstr(msg, "lazaret-init: --workspace-alias: Invalid argument") == NULL)
			fail_msg("%s %s: %s", bad_alias[i][0], bad_alias[i][1], msg);
	}
}

static void test_lz_sandbox_init__reaps_orphans_as_pid1(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	if (only_child(getpid()) < 0)
		skip(); /* no /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN) */
	int rep[2];
	assert_int_equal(pipe2(rep, O_CLOEXEC), 0);
	pid_t helper = fork();
	assert_true(helper >= 0);
	live_helper = helper;
	if (helper == 0) {
		close(rep[0]);
		pidns_helper(rep[1]);
	}
	close(rep[1]);
	pid_t init = 0;
	ssize_t n = read(rep[0], &init, sizeof(init));
	close(rep[0]);
	if (n != sizeof(init)) {
		int status;
		assert_int_equal(waitpid(helper, &status, 0), helper);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 99)
			skip(); /* no pid namespaces here */
		fail_msg("helper failed: status 0x%x", status);
	}
	live_init = init;
	wait_ready(init);

	/* The orphan, as a child of init. */
	pid_t orphan = 0;
	long long deadline = now_ms() + 2000;
	while ((orphan = only_child(init)) <= 0) {
		if (now_ms() > deadline)
			fail_msg("no orphan was reparented to lazaret-init");
		sleep_ms(5);
	}
	assert_int_equal(kill(orphan, SIGKILL), 0);

	/* Reaped: its /proc entry goes away (a zombie would keep it). */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d", (int)orphan);
	deadline = now_ms() + 2000;
	while (access(path, F_OK) == 0) {
		if (now_ms() > deadline)
			fail_msg("orphan %d was not reaped by lazaret-init", (int)orphan);
		sleep_ms(5);
	}

	assert_int_equal(kill(init, SIGTERM), 0);
	int status = wait_exit(helper, 2000);
	live_helper = live_init = 0;
	assert_int_not_equal(status, -1);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* After a failed assertion: killing init ends its whole pid namespace. */
static int kill_leftovers(void **state)
{
	(void)state;
	if (live_init > 0)
		kill(live_init, SIGKILL);
	if (live_helper > 0)
		waitpid(live_helper, NULL, 0);
	live_helper = live_init = 0;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_sandbox_init__static_elf),
		cmocka_unit_test(test_lz_sandbox_init__sigterm_exits_zero_silently),
		cmocka_unit_test(test_lz_sandbox_init__bad_arguments_refused),
		cmocka_unit_test_teardown(test_lz_sandbox_init__reaps_orphans_as_pid1, kill_leftovers),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
