#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

pid_t lz_clone_pidfd(uint64_t extra_flags, int *ret_pidfd)
{
	int pidfd = -EBADF;
	struct clone_args args = {
		.flags = CLONE_PIDFD | extra_flags,
		.pidfd = (uint64_t)(uintptr_t)&pidfd,
		.exit_signal = SIGCHLD,
	};
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		return -errno;
	if (pid > 0)
		*ret_pidfd = pidfd;
	return (pid_t)pid;
}

int64_t lz_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lz_remaining_ms(int64_t deadline)
{
	int64_t left = deadline - lz_now_ms();
	return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

int lz_reap(int pidfd, int timeout_ms, siginfo_t *ret)
{
	int timed_out = 0, r;
	if (timeout_ms >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int64_t deadline = lz_now_ms() + timeout_ms;
		while ((r = poll(&p, 1, lz_remaining_ms(deadline))) < 0 && errno == EINTR)
			;
		if (r <= 0) {
			timed_out = r == 0 ? -ETIMEDOUT : -errno;
			(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		}
	}
	siginfo_t info = { 0 };
	while ((r = waitid(P_PIDFD, (id_t)pidfd, &info, WEXITED)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return -errno;
	if (timed_out < 0)
		return timed_out;
	*ret = info;
	return 0;
}

/* Moves *fd above the standard streams so dup2 onto 0..2 cannot clobber it. */
static int above_stdio(int *fd)
{
	if (*fd > 2)
		return 0;
	int nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	if (nfd < 0)
		return -errno;
	*fd = nfd; /* the caller's original stays the caller's */
	return 1;
}

static _Noreturn void exec_child(const struct lz_spawn *spec, int exe_fd, const int fds[3],
				 int status_fd)
{
	static char *const empty_env[] = { NULL };
	char *const *envp = spec->envp ? spec->envp : empty_env;
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	sigaction(SIGPIPE, &dfl, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (dup2(fds[0], STDIN_FILENO) >= 0 && dup2(fds[1], STDOUT_FILENO) >= 0 &&
	    dup2(fds[2], STDERR_FILENO) >= 0) {
		/* Anything an embedding leaked without O_CLOEXEC. */
		(void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
		if (exe_fd >= 0)
			execveat(exe_fd, "", spec->argv, envp, AT_EMPTY_PATH);
		else
			execve(spec->path, spec->argv, envp);
	}
	int e = errno;
	(void)!write(status_fd, &e, sizeof(e));
	_exit(127);
}

int lz_spawn(const struct lz_spawn *spec, int *ret_pidfd, pid_t *ret_pid, struct lz_err *err)
{
	const char *label = spec->label ? spec->label : spec->argv[0];
	_cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
	_cleanup_close_ int exe = -EBADF, st_r = -EBADF, st_w = -EBADF;
	int owned[3] = { -EBADF, -EBADF, -EBADF };
	int fds[3] = { spec->stdin_fd, spec->stdout_fd, spec->stderr_fd };
	int p[2], r = 0;

	if (null_fd < 0)
		return lz_err_set(err, errno, "open '/dev/null': %s", strerror(errno));
	if (spec->exe_fd >= 0 && (exe = fcntl(spec->exe_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return lz_err_set(err, errno, "dup '%s': %s", label, strerror(errno));
	if (spec->exe_fd < 0 && (spec->path == NULL || spec->path[0] != '/'))
		return lz_err_set(err, EINVAL, "spawn '%s': no executable", label);
	if (pipe2(p, O_CLOEXEC) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	st_r = p[0];
	st_w = p[1];
	if ((r = above_stdio(&st_w)) < 0)
		return lz_err_set(err, -r, "fcntl: %s", strerror(-r));
	if (r == 1)
		close(p[1]);
	for (int i = 0; i < 3; i++) {
		if (fds[i] < 0)
			fds[i] = null_fd;
		int copy = fds[i];
		if ((r = above_stdio(&copy)) < 0)
			goto fail_fds;
		if (r == 1)
			owned[i] = fds[i] = copy;
	}

	int pidfd = -EBADF;
	fflush(NULL);
	pid_t pid = lz_clone_pidfd(0, &pidfd);
	if (pid == 0)
		exec_child(spec, exe, fds, st_w);
	for (int i = 0; i < 3; i++)
		lz_close_fdp(&owned[i]);
	if (pid < 0)
		return lz_err_set(err, -pid, "clone3 '%s': %s", label, strerror(-pid));
	lz_close_fdp(&st_w);

	int exec_errno = 0;
	ssize_t n;
	while ((n = read(st_r, &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR)
		;
	if (n != 0) {
		siginfo_t info;
		(void)lz_reap(pidfd, -1, &info);
		close(pidfd);
		if (n == (ssize_t)sizeof(exec_errno) && exec_errno > 0)
			return lz_err_set(err, exec_errno, "exec '%s': %s", label, strerror(exec_errno));
		return lz_err_set(err, EIO, "exec '%s': child failed before exec", label);
	}
	*ret_pidfd = pidfd;
	if (ret_pid)
		*ret_pid = pid;
	return 0;
fail_fds:
	for (int i = 0; i < 3; i++)
		lz_close_fdp(&owned[i]);
	return lz_err_set(err, -r, "fcntl: %s", strerror(-r));
}

int lz_spawn_run(const struct lz_spawn *spec, const char *label, int timeout_ms,
		 struct lz_err *err)
{
	_cleanup_close_ int pidfd = -EBADF;
	siginfo_t info;
	int r = lz_spawn(spec, &pidfd, NULL, err);
	if (r < 0)
		return r;
	if ((r = lz_reap(pidfd, timeout_ms, &info)) < 0)
		return lz_err_set(err, -r, "%s: %s", label,
				  r == -ETIMEDOUT ? "did not finish in time; killed" : strerror(-r));
	if (info.si_code == CLD_EXITED && info.si_status == 0)
		return 0;
	if (info.si_code == CLD_EXITED)
		return lz_err_set(err, EIO, "%s exited with status %d", label, info.si_status);
	return lz_err_set(err, EIO, "%s was killed by signal %d", label, info.si_status);
}
