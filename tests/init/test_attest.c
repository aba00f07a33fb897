/* The init's route mutation predicate (core/init/attest.c; spec 3.7
 * "Imported behavior"): a route change counts as refused only when it is
 * refused for want of authority.
 *
 * Each test forks a child that unshares a fresh network namespace (lo left
 * down, a veth named tap0, also down) and runs lz_init_attest there; the
 * child reports through its exit status. They need root and are skipped
 * otherwise. */
#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "init/attest.h"

extern char **environ;

enum { CHILD_REFUSED = 10, CHILD_NOT_REFUSED = 11, CHILD_SETUP_FAILED = 12 };

static int run(char *const argv[])
{
	pid_t pid;
	int status;
	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int drop_netadmin(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	d[CAP_TO_INDEX(CAP_NET_ADMIN)].effective &= ~CAP_TO_MASK(CAP_NET_ADMIN);
	return (int)syscall(SYS_capset, &h, d);
}

/* In a fresh namespace with a down tap0: the child's exit status says
 * what lz_init_attest found. */
static int attest_in_netns(int without_netadmin)
{
	if (geteuid() != 0)
		skip();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *veth[] = { "ip", "link", "add", "tap0", "type", "veth", "peer", "name", "tap0peer", NULL };
		if (unshare(CLONE_NEWNET) < 0 || run(veth) < 0)
			_exit(CHILD_SETUP_FAILED);
		if (without_netadmin && drop_netadmin() < 0)
			_exit(CHILD_SETUP_FAILED);
		const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN] = { 1 };
		struct lz_netattest a;
		lz_init_attest(challenge, &a);
		_exit(a.route_mutation_refused ? CHILD_REFUSED : CHILD_NOT_REFUSED);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_not_equal(WEXITSTATUS(status), CHILD_SETUP_FAILED);
	return WEXITSTATUS(status);
}

/* With the authority to change routes, the changes still fail here (the
 * links are down: ENETDOWN; no such route: ESRCH), and that must not pass
 * for a refusal. */
static void test_lz_init_attest__other_errors_are_not_refusals(void **state)
{
	(void)state;
	assert_int_equal(attest_in_netns(0), CHILD_NOT_REFUSED);
}

static void test_lz_init_attest__refused_without_netadmin(void **state)
{
	(void)state;
	assert_int_equal(attest_in_netns(1), CHILD_REFUSED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_init_attest__other_errors_are_not_refusals),
		cmocka_unit_test(test_lz_init_attest__refused_without_netadmin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
