/* pidfs process identity (spec 3.3): parsers and a real child's identity. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include "proc/pidref.h"

/* Spec 3.3: a process in a PID namespace of its own with a /proc of its
 * own (the Runtime Supervisor) forms its children's identities with the
 * host's PIDs, which the coordinator's recovery looks them up by. Here a
 * first process of a new PID namespace forms its child's identity (clone3
 * and its /proc would say 2) and sends it; the test, outside, finds the
 * child alive by it. */
static void test_lz_pidref_from_pidfd__child_in_a_pid_namespace_has_its_host_pid(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t outer = fork();
	assert_true(outer >= 0);
	if (outer == 0) {
		if (lz_test_unshare_as_self(CLONE_NEWPID) < 0)
			_exit(91);
		pid_t first = fork(); /* PID 1 there */
		if (first < 0)
			_exit(92);
		if (first == 0) {
			/* The namespace ends with the test's kill of outer. */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
				_exit(95);
			/* As the Runtime Supervisor: the host's /proc kept, then a
			 * /proc of this PID namespace mounted over it. */
			int host = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (host < 0 || unshare(CLONE_NEWNS) < 0 ||
			    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
			    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
				_exit(96);
			lz_pidref_use_proc(host);
			int pidfd = -1;
			struct clone_args ca = { .flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&pidfd,
						 .exit_signal = SIGCHLD };
			long child = syscall(SYS_clone3, &ca, sizeof(ca));
			if (child == 0) {
				pause();
				_exit(0);
			}
			struct lz_pidref id;
			struct lz_err err;
			if (child != 2 || lz_pidref_from_pidfd(pidfd, &id, &err) < 0)
				_exit(93);
			if (write(p[1], &id, sizeof(id)) != sizeof(id))
				_exit(94);
			pause(); /* until the test kills the namespace */
			_exit(0);
		}
		int status;
		(void)waitpid(first, &status, 0);
		_exit(0);
	}
	close(p[1]);
	struct lz_pidref id;
	assert_int_equal(read(p[0], &id, sizeof(id)), sizeof(id));
	close(p[0]);
	assert_true(id.pid != 2);
	struct lz_err err;
	bool alive = false;
	assert_int_equal(lz_pidref_alive(&id, &alive, &err), 0);
	assert_true(alive);
	/* Its namespace's first process ends, and it with it. */
	assert_int_equal(kill(outer, SIGKILL), 0);
	int status;
	assert_int_equal(waitpid(outer, &status, 0), outer);
}

static void test_lz_boot_id_parse__canonical_order(void **state)
{
	(void)state;
	uint8_t id[16];
	assert_int_equal(lz_boot_id_parse("0123abcd-4567-89ef-0123-456789ABCDEF\n", id), 0);
	const uint8_t want[16] = { 0x01, 0x23, 0xab, 0xcd, 0x45, 0x67, 0x89, 0xef,
				   0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };
	assert_memory_equal(id, want, 16);
}

static void test_lz_boot_id_parse__malformed(void **state)
{
	(void)state;
	uint8_t id[16] = { 0 };
	assert_int_equal(lz_boot_id_parse("0123abcd-4567-89ef-0123-456789abcdeX", id), -EINVAL);
	assert_int_equal(lz_boot_id_parse("0123abcd_4567-89ef-0123-456789abcdef", id), -EINVAL);
	assert_int_equal(lz_boot_id_parse("0123abcd-4567-89ef-0123-456789abcdef0", id), -EINVAL);
	assert_int_equal(lz_boot_id_parse("0123abcd-45", id), -EINVAL);
}

static void test_lz_proc_stat_field__comm_with_parens_and_spaces(void **state)
{
	(void)state;
	uint64_t t = 0;
	const char *stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
			   "18446744073709551615 100 200\n";
	assert_int_equal(lz_proc_stat_field(stat, LZ_PROC_STAT_START_TIME, &t), 0);
	assert_true(t == UINT64_MAX);
	assert_int_equal(lz_proc_stat_field(stat, LZ_PROC_STAT_FLAGS, &t), 0);
	assert_true(t == 4194560);
	assert_int_equal(lz_proc_stat_field(stat, 3, &t), -EINVAL); /* the state is no number */
	assert_int_equal(lz_proc_stat_field("42 (x) S 1 2", LZ_PROC_STAT_START_TIME, &t), -EINVAL);
	assert_int_equal(lz_proc_stat_field("no parens", LZ_PROC_STAT_START_TIME, &t), -EINVAL);
}

static void test_lz_pidref_from_pidfd__real_child(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(pidfd >= 0);
	struct lz_pidref a, b;
	struct lz_err err;
	assert_int_equal(lz_pidref_from_pidfd(pidfd, &a, &err), 0);
	assert_int_equal(lz_pidref_from_pidfd(pidfd, &b, &err), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(a.pid, (uint32_t)pid);
	assert_true(a.pidfs_ino != 0);
	assert_true(a.start_time != 0);
	uint8_t boot[16];
	assert_int_equal(lz_boot_id(boot, &err), 0);
	assert_memory_equal(a.boot_id, boot, 16);
	/* Not a pidfd: fstatfs reports another filesystem. */
	assert_int_equal(lz_pidref_from_pidfd(STDIN_FILENO, &b, &err), -ENOTSUP);
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	waitpid(pid, NULL, 0);
	close(pidfd);
}

/* Alive while it runs; gone once it exited, reaped or not (a zombie whose
 * parent died holds nothing), and gone with another identity. */
static void test_lz_pidref_alive__running_zombie_reaped(void **state)
{
	(void)state;
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		close(go[1]);
		_exit(read(go[0], &c, 1) == 1 ? 0 : 1);
	}
	close(go[0]);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(pidfd >= 0);
	struct lz_pidref ref, other;
	struct lz_err err;
	bool alive = false;
	assert_int_equal(lz_pidref_from_pidfd(pidfd, &ref, &err), 0);
	assert_int_equal(lz_pidref_alive(&ref, &alive, &err), 0);
	assert_true(alive);
	other = ref;
	other.pidfs_ino++;
	assert_int_equal(lz_pidref_alive(&other, &alive, &err), 0);
	assert_false(alive);
	other = ref;
	other.boot_id[0] ^= 1;
	assert_int_equal(lz_pidref_alive(&other, &alive, &err), 0);
	assert_false(alive);
	/* Exited, not reaped: a zombie. */
	assert_int_equal(write(go[1], "x", 1), 1);
	siginfo_t si = { 0 };
	assert_int_equal(waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(lz_pidref_alive(&ref, &alive, &err), 0);
	assert_false(alive);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(lz_pidref_alive(&ref, &alive, &err), 0);
	assert_false(alive);
	close(pidfd);
	close(go[1]);
}

/* A recorded PID now used by a thread of another process (not a
 * thread-group leader, which a recorded process is): the process is
 * gone, not "cannot tell" (that would refuse every launch until the
 * unrelated thread ends). */
static void *park(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	pause();
	return NULL;
}

static void test_lz_pidref_alive__pid_of_another_process_thread(void **state)
{
	(void)state;
	int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	assert_true(self >= 0);
	struct lz_pidref ref;
	struct lz_err err;
	assert_int_equal(lz_pidref_from_pidfd(self, &ref, &err), 0);
	close(self);
	volatile pid_t tid = 0;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, park, (void *)&tid), 0);
	while (tid == 0)
		usleep(1000);
	ref.pid = (uint32_t)tid;
	bool alive = true;
	assert_int_equal(lz_pidref_alive(&ref, &alive, &err), 0);
	assert_false(alive);
	assert_int_equal(pthread_cancel(t), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_boot_id_parse__canonical_order),
		cmocka_unit_test(test_lz_boot_id_parse__malformed),
		cmocka_unit_test(test_lz_proc_stat_field__comm_with_parens_and_spaces),
		cmocka_unit_test(test_lz_pidref_from_pidfd__real_child),
		cmocka_unit_test(test_lz_pidref_from_pidfd__child_in_a_pid_namespace_has_its_host_pid),
		cmocka_unit_test(test_lz_pidref_alive__running_zombie_reaped),
		cmocka_unit_test(test_lz_pidref_alive__pid_of_another_process_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
