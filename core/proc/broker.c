#include "proc/broker.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/stopreq.h"
#include "util/cleanup.h"
#include "util/fdutil.h"

#define BARRIER_RELEASE 'R'
#define LZ_BROKER_REFUSAL_MAX 160 /* what the wrapper says when it refuses its target */

/* ---- child side: async-signal-safe only ------------------------------- */

/* In a fn target's process: where its failure message goes (lz_broker_report_fd). */
static int fn_report_fd = -1;

static volatile int relay_pidfd = -1;

/* lz_broker_forget_in_children */
static void (*forget_fn)(void *ctx);
static void *forget_ctx;

static void forget(void)
{
	if (forget_fn != NULL)
		forget_fn(forget_ctx);
}

static void relay_signal(int sig)
{
	if (relay_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, relay_pidfd, sig, NULL, 0);
}

static _Noreturn void child_fail(int report, int e)
{
	(void)!write(report, &e, sizeof(e));
	_exit(125);
}

/* Appends s (NULL: nothing) to buf, which holds n of cap bytes. */
static size_t append(char *buf, size_t n, size_t cap, const char *s)
{
	while (s != NULL && *s != '\0' && n < cap)
		buf[n++] = *s++;
	return n;
}

/* Refuses the target with what failed, in the form its parent reads: an
 * exec target's report is the errno followed by the text (lz_broker_spawn
 * reads both), a fn target's is text (lz_broker_wait). One write, less
 * than PIPE_BUF: it arrives whole. */
static _Noreturn void child_refuse(const struct lz_broker_spec *spec, int report, int e,
				   const char *what)
{
	char buf[sizeof(int) + LZ_BROKER_REFUSAL_MAX];
	size_t n = 0;
	if (spec->exec) {
		memcpy(buf, &e, sizeof(e));
		n = append(buf, sizeof(e), sizeof(buf), what);
	} else {
		n = append(buf, n, sizeof(buf), what);
		n = append(buf, n, sizeof(buf), ": ");
		n = append(buf, n, sizeof(buf), strerrordesc_np(e));
	}
	(void)!write(report, buf, n);
	_exit(125);
}

/* Spec 3.3, SR-12: what the kernel grants by the developer's kernel uid
 * or by possession, not by user namespace, stays outside the sandbox's
 * user namespaces. Root of such a namespace is the developer's uid: through the
 * session keyring it inherited it would possess, and read, the developer's
 * keys (Kerberos KEYRING ccaches, CIFS and AFS tokens), and its
 * supplementary groups would open what the groups may (the docker group's
 * socket). Every process that enters one through this broker (the Runtime
 * Supervisor and all it starts, a session's exec client, the preparation
 * and removal workers) joins a fresh anonymous session keyring and drops
 * its supplementary groups before anything of its target runs; either
 * failing refuses the target. Keys whose permissions grant the user, not
 * only the possessor, stay readable by serial: the kernel's default for a
 * new key grants the user only "view".
 *
 * In a new user namespace this runs after the release, so its maps are
 * written (newgidmap leaves setgroups allowed) and it holds CAP_SETGID
 * there; setns into a user namespace grants every capability in it.
 * Raw syscalls: the child of clone3 has only this thread, while glibc's
 * setgroups would try to reach every thread its parent had. */
static void leave_host_credentials(const struct lz_broker_spec *spec, int report)
{
	/* ENOSYS: a kernel without keys has no keyring to hand on */
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS)
		child_refuse(spec, report, errno, "cannot leave the developer's session keyring (keyctl)");
	if (syscall(SYS_setgroups, 0, NULL) < 0)
		child_refuse(spec, report, errno, "cannot drop the supplementary groups (setgroups)");
}

static bool enters_userns(const struct lz_broker_spec *spec)
{
	return (spec->clone_flags & CLONE_NEWUSER) ||
	       (spec->join_pidfd >= 0 && (spec->join_flags & CLONE_NEWUSER));
}

/* A child's end as a shell reports it: its exit code, or 128 + signal. */
static int exit_status(const siginfo_t *info)
{
	return info->si_code == CLD_EXITED ? info->si_status : 128 + (info->si_status & 0x7f);
}

/* After joining a PID namespace only children enter it: fork the target
 * and relay signals and the exit status (the HC sees this wrapper as the
 * exec client; the target dies with it through its parent-death signal). */
static void fork_into_pidns(int report)
{
	/* The target checks this after arming its parent-death signal: a
	 * wrapper killed before then would leave it running unaccounted,
	 * an orphan of the host's init. */
	int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (self < 0)
		child_fail(report, errno);
	int pidfd = -1;
	pid_t pid = lz_clone_pidfd(0, &pidfd);
	if (pid < 0)
		child_fail(report, -pid);
	if (pid == 0) {
		struct pollfd wrapper = { .fd = self, .events = POLLIN };
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
			child_fail(report, errno);
		if (poll(&wrapper, 1, 0) != 0)
			child_fail(report, ESRCH);
		close(self);
		return; /* the grandchild runs the target */
	}
	close(self);
	/* The wrapper lives as long as the session: it keeps nothing of the
	 * coordinator's (the listening socket, other sessions' connections
	 * and terminals), so a connection the coordinator drops ends at once */
	int keep[] = { pidfd, report };
	int r = lz_fds_keep_only(keep, LZ_ARRAY_SIZE(keep));
	if (r < 0) {
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		child_fail(report, -r);
	}
	forget();
	relay_pidfd = pidfd;
	static const int forwarded[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
					 SIGWINCH, SIGCONT, SIGTSTP };
	struct sigaction sa = { .sa_handler = relay_signal };
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &sa, NULL);
	/* Only now EOF for the parent (once the grandchild execs): a signal
	 * it sends after the spawn returns finds the relay in place. */
	close(report);
	siginfo_t info;
	for (;;) {
		memset(&info, 0, sizeof(info));
		if (waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED) == 0)
			break;
		if (errno != EINTR)
			_exit(125);
	}
	_exit(exit_status(&info));
}

static _Noreturn void child_main(const struct lz_broker_spec *spec, int barrier, int report,
				 const struct lz_spawn_prepared *prep, int parent_pidfd,
				 uint64_t parent_ino, uint64_t parent_dev)
{
	char c = 0;
	ssize_t n;
	/* A child runs with every signal's default, as lz_spawn's do: the
	 * caller may hold some blocked (proc/stopreq.h). */
	lz_stopreq_unblock_all();
	do
		n = read(barrier, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 || c != BARRIER_RELEASE)
		_exit(125); /* barrier EOF or malformed release: never run the target */
	close(barrier);

	/* Step 8: arm parent death, then recheck the parent's exact pidfs
	 * authority so a parent lost before arming is noticed. The parent's
	 * own pidfd was inherited (getppid() is 0 in a new PID namespace):
	 * it must be the recorded identity and not yet readable (exited). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(report, errno);
	struct stat st;
	struct pollfd pp = { .fd = parent_pidfd, .events = POLLIN };
	if (fstat(parent_pidfd, &st) < 0 || (uint64_t)st.st_ino != parent_ino ||
	    (uint64_t)st.st_dev != parent_dev || poll(&pp, 1, 0) != 0)
		child_fail(report, ESRCH);
	close(parent_pidfd);
	if (spec->comm)
		(void)prctl(PR_SET_NAME, spec->comm);

	if (spec->join_pidfd >= 0 && setns(spec->join_pidfd, spec->join_flags) < 0)
		child_fail(report, errno);
	if (enters_userns(spec))
		leave_host_credentials(spec, report);
	if (spec->join_pidfd >= 0 && (spec->join_flags & CLONE_NEWPID))
		fork_into_pidns(report);
	if (spec->exec)
		lz_spawn_exec_prepared(prep, report);

	forget();
	struct lz_err err = { 0, "" };
	fn_report_fd = report;
	int r = spec->fn(spec->arg, &err);
	if (r < 0) {
		if (err.msg[0] == '\0')
			snprintf(err.msg, sizeof(err.msg), "%s", strerror(-r));
		(void)!write(report, err.msg, strnlen(err.msg, sizeof(err.msg)));
		_exit(1);
	}
	_exit(0);
}

int lz_broker_report_fd(void)
{
	return fn_report_fd;
}

/* ---- parent side ------------------------------------------------------- */

void lz_broker_forget_in_children(void (*fn)(void *ctx), void *ctx)
{
	forget_fn = fn;
	forget_ctx = ctx;
}

/* This process's own pidfd (close-on-exec) and pidfs identity. */
static int self_identity(int *ret_fd, uint64_t *ret_ino, uint64_t *ret_dev, struct lz_err *err)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return lz_err_set(err, e, "pidfd of this process: %s", strerror(e));
	}
	*ret_fd = fd;
	*ret_ino = st.st_ino;
	*ret_dev = st.st_dev;
	return 0;
}

/* write(2) that fails with EPIPE where the default action of SIGPIPE
 * would kill the caller (the coordinator, the RS keep it): a staged child
 * killed before its release must be a failed spawn, not a dead broker. */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t n)
{
	sigset_t pipe_only, was;
	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &was);
	ssize_t r = write(fd, buf, n);
	int e = errno;
	if (r < 0 && e == EPIPE && !sigismember(&was, SIGPIPE)) {
		struct timespec zero = { 0, 0 };
		(void)sigtimedwait(&pipe_only, NULL, &zero); /* the one this write raised */
	}
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	errno = e;
	return r;
}

/* Step 4: the child must still be there, unreaped (WNOWAIT). */
static int still_present(int pidfd, struct lz_err *err)
{
	siginfo_t info = { 0 };
	if (waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
		return lz_err_set(err, errno, "waitid(pidfd): %s", strerror(errno));
	if (info.si_pid != 0)
		return lz_err_set(err, ECHILD, "child exited before it was released");
	return 0;
}

int lz_broker_spawn(const struct lz_broker_spec *spec, struct lz_broker_child *ret,
		    struct lz_err *err)
{
	const char *label = spec->label ? spec->label : "child";
	struct lz_spawn_prepared prep = { .exe_fd = -EBADF, .null_fd = -EBADF,
					  .owned = { -EBADF, -EBADF, -EBADF } };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	uint64_t parent_ino = 0, parent_dev = 0;
	_cleanup_close_ int parent_pidfd = -EBADF;
	int barrier[2] = { -EBADF, -EBADF }, report[2] = { -EBADF, -EBADF };
	int r;

	if ((spec->exec == NULL) == (spec->fn == NULL))
		return lz_err_set(err, EINVAL, "%s: exactly one target", label);
	if ((spec->clone_flags & CLONE_NEWUSER) && spec->map == NULL)
		return lz_err_set(err, EINVAL, "%s: a user namespace needs an ID map", label);
	if ((r = self_identity(&parent_pidfd, &parent_ino, &parent_dev, err)) < 0)
		return r;
	if (spec->exec && (r = lz_spawn_prepare(spec->exec, &prep, err)) < 0)
		return r;
	if (pipe2(barrier, O_CLOEXEC) < 0 || pipe2(report, O_CLOEXEC) < 0) {
		r = lz_err_set(err, errno, "pipe: %s", strerror(errno));
		goto out;
	}

	fflush(NULL); /* the child must not write the parent's buffered output */
	pid_t pid = lz_clone_pidfd(spec->clone_flags, &child.pidfd);
	if (pid == 0) {
		close(barrier[1]);
		close(report[0]);
		child_main(spec, barrier[0], report[1], &prep, parent_pidfd, parent_ino, parent_dev);
	}
	lz_close_fdp(&barrier[0]);
	lz_close_fdp(&report[1]);
	if (pid < 0) {
		r = lz_err_set(err, -pid, "%s: clone3: %s", label, strerror(-pid));
		goto out;
	}
	child.report_fd = TAKE_FD(report[0]);
	child.exec = spec->exec != NULL;

	if ((r = still_present(child.pidfd, err)) < 0 ||
	    (r = lz_pidref_from_pidfd(child.pidfd, &child.id, err)) < 0)
		goto kill;
	if ((spec->clone_flags & CLONE_NEWUSER) &&
	    (r = lz_idmap_write_and_verify(spec->map, pid, child.pidfd, err)) < 0)
		goto kill;
	if (spec->staged && (r = spec->staged(spec->ctx, &child.id, child.pidfd, err)) < 0)
		goto kill;
	char c = BARRIER_RELEASE;
	if (write_nosigpipe(barrier[1], &c, 1) != 1) {
		r = lz_err_set(err, errno, "%s: release: %s", label, strerror(errno));
		goto kill;
	}
	lz_close_fdp(&barrier[1]);

	if (child.exec) {
		/* EOF: the target exec'd (the pipe is close-on-exec). Else the
		 * errno, and what failed when the wrapper refused (child_refuse). */
		struct {
			int e;
			char what[LZ_BROKER_REFUSAL_MAX];
		} rep = { 0, "" };
		ssize_t n;
		while ((n = read(child.report_fd, &rep, sizeof(rep))) < 0 && errno == EINTR)
			;
		if (n != 0) {
			bool known = n >= (ssize_t)sizeof(rep.e) && rep.e > 0;
			size_t len = n > (ssize_t)sizeof(rep.e) ? (size_t)n - sizeof(rep.e) : 0;
			r = lz_err_set(err, known ? rep.e : EIO, "%s: %.*s%s%s", label, (int)len, rep.what,
				       len > 0 ? ": " : "", known ? strerror(rep.e) : "failed before exec");
			goto kill;
		}
		lz_close_fdp(&child.report_fd);
	}
	*ret = child;
	r = 0;
	goto out;
kill:
	lz_broker_kill(&child);
out:
	lz_close_fdp(&barrier[0]);
	lz_close_fdp(&barrier[1]);
	lz_close_fdp(&report[0]);
	lz_close_fdp(&report[1]);
	if (spec->exec)
		lz_spawn_prepared_release(&prep);
	return r;
}

static void release(struct lz_broker_child *child)
{
	lz_close_fdp(&child->pidfd);
	lz_close_fdp(&child->report_fd);
}

int lz_broker_wait(struct lz_broker_child *child, int timeout_ms, int *ret_status,
		   struct lz_err *err)
{
	char msg[LZ_ERR_MSG_MAX] = "";
	size_t used = 0;
	bool timed_out = false;
	int64_t deadline = timeout_ms >= 0 ? lz_now_ms() + timeout_ms : -1;
	/* fn targets: the channel closes when the child exits; the limit
	 * holds while it is read */
	if (child->report_fd >= 0)
		used = lz_read_child_output(child->report_fd, child->pidfd, deadline, msg, sizeof(msg),
					    &timed_out);
	siginfo_t info;
	int r = lz_reap(child->pidfd, timed_out || deadline < 0 ? -1 : lz_remaining_ms(deadline), &info);
	if (timed_out)
		r = -ETIMEDOUT;
	release(child);
	if (r < 0)
		return lz_err_set(err, -r, "wait: %s", r == -ETIMEDOUT ? "timed out; killed" : strerror(-r));
	int status = exit_status(&info);
	if (ret_status)
		*ret_status = status;
	if (used > 0)
		return lz_err_set(err, EIO, "%s", msg);
	return 0;
}

int lz_broker_exited(const struct lz_broker_child *child, int *ret_status)
{
	siginfo_t info = { 0 };
	if (waitid(P_PIDFD, (id_t)child->pidfd, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
		return -errno;
	if (info.si_pid == 0)
		return 0;
	*ret_status = exit_status(&info);
	return info.si_code == CLD_EXITED;
}

int lz_broker_signal(const struct lz_broker_child *child, int sig)
{
	if (child->pidfd < 0)
		return -EBADF;
	if (syscall(SYS_pidfd_send_signal, child->pidfd, sig, NULL, 0) < 0)
		return -errno;
	return 0;
}

void lz_broker_kill(struct lz_broker_child *child)
{
	if (child == NULL || child->pidfd < 0)
		return;
	(void)lz_broker_signal(child, SIGKILL);
	siginfo_t info;
	(void)lz_reap(child->pidfd, -1, &info);
	release(child);
}
