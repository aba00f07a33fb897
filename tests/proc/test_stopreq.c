/* core/proc/stopreq: a stop signal becomes a request the caller polls for,
 * never the default action, and the caller's children (the broker's) keep
 * the default actions. Each case runs in a forked child: the signals stay
 * blocked there for good. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_child.h"

#include "proc/broker.h"
#include "proc/spawn.h"
#include "proc/stopreq.h"

static bool readable(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	return poll(&pf, 1, 0) == 1;
}

static void signals_become_one_request(void *arg)
{
	(void)arg;
	struct lz_err err = { 0, "" };
	CHECK(lz_stopreq_fd() == -1, "a descriptor before catch");
	CHECK(lz_stopreq_signal() == 0, "a signal before any came");
	CHECK(lz_stopreq_catch(&err) == 0, "%s", err.msg);
	CHECK(lz_stopreq_catch(&err) == 0, "again: %s", err.msg);
	int fd = lz_stopreq_fd();
	CHECK(fd >= 0, "no descriptor");
	CHECK(!readable(fd), "readable before a signal");
	CHECK(lz_stopreq_signal() == 0, "a signal before any came");
	CHECK(kill(getpid(), SIGTERM) == 0, "kill: %s", strerror(errno)); /* alive after it */
	CHECK(readable(fd), "SIGTERM did not reach the descriptor");
	CHECK(lz_stopreq_signal() == SIGTERM, "got %d", lz_stopreq_signal());
	CHECK(!readable(fd), "still readable once read");
	/* The first one is the answer for good. */
	CHECK(kill(getpid(), SIGHUP) == 0 && kill(getpid(), SIGINT) == 0, "kill: %s", strerror(errno));
	CHECK(lz_stopreq_signal() == SIGTERM, "got %d", lz_stopreq_signal());
	CHECK(!readable(fd), "readable after the later ones were read");
}

static void test_lz_stopreq__signals_become_one_request(void **state)
{
	(void)state;
	run_in_child(signals_become_one_request, NULL);
}

static int mask_is_empty(void *arg, struct lz_err *err)
{
	(void)arg;
	sigset_t now;
	if (sigprocmask(SIG_SETMASK, NULL, &now) < 0)
		return lz_err_set(err, errno, "sigprocmask: %s", strerror(errno));
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&now, sig) == 1)
			return lz_err_set(err, EPERM, "signal %d blocked in the broker's child", sig);
	return 0;
}

static void broker_children_keep_the_defaults(void *arg)
{
	(void)arg;
	struct lz_err err = { 0, "" };
	CHECK(lz_stopreq_catch(&err) == 0, "%s", err.msg);
	struct lz_broker_spec spec = { .join_pidfd = -1, .fn = mask_is_empty };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	CHECK(lz_broker_spawn(&spec, &child, &err) == 0, "%s", err.msg);
	int status = -1;
	CHECK(lz_broker_wait(&child, 5000, &status, &err) == 0, "%s", err.msg);
	CHECK(status == 0, "the child's mask: %d", status);

	/* And SIGTERM ends one, as it would without the caller's catch. */
	char *const argv[] = { "sleep", "30", NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sleep", .argv = argv, .stdin_fd = -1,
				 .stdout_fd = -1, .stderr_fd = -1 };
	struct lz_broker_spec sleeper = { .join_pidfd = -1, .exec = &exec };
	CHECK(lz_broker_spawn(&sleeper, &child, &err) == 0, "%s", err.msg);
	CHECK(lz_broker_signal(&child, SIGTERM) == 0, "signal");
	CHECK(lz_broker_wait(&child, 5000, &status, &err) == 0, "%s", err.msg);
	CHECK(status == 128 + SIGTERM, "status %d", status);
	CHECK(lz_stopreq_signal() == 0, "the child's signal reached the caller");
}

static void test_lz_stopreq__broker_children_keep_the_defaults(void **state)
{
	(void)state;
	run_in_child(broker_children_keep_the_defaults, NULL);
}

/* The executable lookup of lz_spawn_start, waiting (as on a mount that
 * does not answer) until the test ends it. */
static int waiting_lookup(void *ctx, struct lz_err *err)
{
	char c;
	(void)!read(*(const int *)ctx, &c, 1);
	return lz_err_set(err, EIO, "the lookup returned");
}

static void spawned_children_keep_the_defaults(void *arg)
{
	(void)arg;
	struct lz_err err = { 0, "" };
	CHECK(lz_stopreq_catch(&err) == 0, "%s", err.msg);
	int never[2];
	CHECK(pipe(never) == 0, "pipe: %s", strerror(errno));
	char *const argv[] = { "true", NULL };
	struct lz_spawn spec = { .exe_fd = -1, .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
	int pidfd = -1, status_fd = -1;
	CHECK(lz_spawn_start(&spec, waiting_lookup, &never[0], &never[0], 1, &pidfd, NULL, &status_fd, &err) == 0,
	      "%s", err.msg);
	usleep(100 * 1000); /* in its lookup by now, or about to be */
	CHECK(syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0) == 0, "signal: %s", strerror(errno));
	struct pollfd pf = { .fd = pidfd, .events = POLLIN };
	CHECK(poll(&pf, 1, 5000) == 1, "SIGTERM did not end a child waiting in its lookup");
	siginfo_t info = { 0 };
	CHECK(waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED) == 0, "waitid: %s", strerror(errno));
	CHECK(info.si_code == CLD_KILLED && info.si_status == SIGTERM, "code %d status %d", info.si_code,
	      info.si_status);
	CHECK(lz_stopreq_signal() == 0, "the child's signal reached the caller");
}

static void test_lz_stopreq__spawned_children_keep_the_defaults(void **state)
{
	(void)state;
	run_in_child(spawned_children_keep_the_defaults, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_stopreq__signals_become_one_request),
		cmocka_unit_test(test_lz_stopreq__broker_children_keep_the_defaults),
		cmocka_unit_test(test_lz_stopreq__spawned_children_keep_the_defaults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
