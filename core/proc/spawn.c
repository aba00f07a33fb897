#include "proc/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs/file.h"
#include "proc/keeper.h"
#include "proc/pidref.h"
#include "proc/stopreq.h"
#include "util/cleanup.h"
#include "util/fdutil.h"

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

void lz_kill_reap(int *pidfd)
{
	if (*pidfd < 0)
		return;
	siginfo_t info;
	(void)syscall(SYS_pidfd_send_signal, *pidfd, SIGKILL, NULL, 0);
	while (waitid(P_PIDFD, (id_t)*pidfd, &info, WEXITED) < 0 && errno == EINTR)
		;
	lz_close_fdp(pidfd);
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

size_t lz_read_child_output(int fd, int pidfd, int64_t deadline, char *buf, size_t cap,
			    bool *ret_timed_out)
{
	size_t used = 0;
	*ret_timed_out = false;
	if (cap == 0)
		return 0;
	while (used + 1 < cap) {
		/* the pipe, and the child: once it has exited, what is left to
		 * read is read, and a descendant holding the pipe is not waited for */
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
		int r = poll(p, 2, deadline >= 0 ? lz_remaining_ms(deadline) : -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 || (r < 0 && deadline >= 0)) {
			(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
			*ret_timed_out = true;
			break;
		}
		if (r > 0 && !p[0].revents)
			break; /* exited, nothing left in the pipe */
		ssize_t n = read(fd, buf + used, cap - 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	return used;
}

/* A copy of fd above the standard streams (the caller's fd stays its own),
 * or fd itself when it already is: 1 when a copy was made. */
static int above_stdio(int fd, int *ret)
{
	if (fd > 2) {
		*ret = fd;
		return 0;
	}
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (nfd < 0)
		return -errno;
	*ret = nfd;
	return 1;
}

int lz_spawn_prepare(const struct lz_spawn *spec, struct lz_spawn_prepared *ret, struct lz_err *err)
{
	const char *label = spec->label ? spec->label : spec->argv[0];
	struct lz_spawn_prepared p = { .spec = spec, .exe_fd = -EBADF, .null_fd = -EBADF,
				       .owned = { -EBADF, -EBADF, -EBADF }, .keeper_fd = -EBADF,
				       .keeper_args_fd = -EBADF };
	int r;
	if (spec->exe_fd < 0 && (spec->path == NULL || spec->path[0] != '/'))
		return lz_err_set(err, EINVAL, "spawn '%s': no executable", label);
	p.null_fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (p.null_fd < 0)
		return lz_err_set(err, errno, "open '/dev/null': %s", strerror(errno));
	if ((r = above_stdio(p.null_fd, &p.null_fd)) < 0)
		goto fail;
	if (spec->exe_fd >= 0 && (p.exe_fd = fcntl(spec->exe_fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		r = -errno;
		goto fail;
	}
	const int want[3] = { spec->stdin_fd, spec->stdout_fd, spec->stderr_fd };
	for (int i = 0; i < 3; i++) {
		int fd = want[i] < 0 ? p.null_fd : want[i];
		if ((r = above_stdio(fd, &p.fds[i])) < 0)
			goto fail;
		if (r == 1)
			p.owned[i] = p.fds[i];
	}
	*ret = p;
	return 0;
fail:
	lz_spawn_prepared_release(&p);
	return lz_err_set(err, -r, "spawn '%s': %s", label, strerror(-r));
}

void lz_spawn_prepared_release(struct lz_spawn_prepared *p)
{
	for (int i = 0; i < 3; i++)
		lz_close_fdp(&p->owned[i]);
	lz_close_fdp(&p->exe_fd);
	lz_close_fdp(&p->null_fd);
}

/* In the child: lowers resource's limit, soft and hard, to at most max
 * (0: unchanged). Lowering needs no privilege; a lower limit the caller
 * had already stays. */
static int lower_limit(int resource, uint64_t max)
{
	struct rlimit l;
	if (max == 0)
		return 0;
	if (getrlimit(resource, &l) < 0)
		return -1;
	if (l.rlim_max == RLIM_INFINITY || l.rlim_max > max)
		l.rlim_max = max;
	if (l.rlim_cur == RLIM_INFINITY || l.rlim_cur > l.rlim_max)
		l.rlim_cur = l.rlim_max;
	return setrlimit(resource, &l);
}

_Noreturn void lz_spawn_exec_prepared(const struct lz_spawn_prepared *p, int status_fd)
{
	static char *const empty_env[] = { NULL };
	const struct lz_spawn *spec = p->spec;
	char *const *envp = spec->envp ? spec->envp : empty_env;
	struct sigaction dfl = { .sa_handler = SIG_DFL };

	lz_stopreq_unblock_all();
	sigaction(SIGPIPE, &dfl, NULL);
	if (spec->detach)
		(void)setsid();
	else
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Before exec, so whatever the program starts is in it; a session
	 * (detach, ctty) is a group of its own already. */
	if (spec->own_group && !spec->detach && !spec->ctty && setpgid(0, 0) < 0)
		goto fail;
	/* Before the dup2s, which may reuse cwd_fd's number. */
	if (spec->has_cwd && fchdir(spec->cwd_fd) < 0)
		goto fail;
	if (lower_limit(RLIMIT_FSIZE, spec->max_file_bytes) < 0 || lower_limit(RLIMIT_DATA, spec->max_data_bytes) < 0)
		goto fail;
	if (dup2(p->fds[0], STDIN_FILENO) >= 0 && dup2(p->fds[1], STDOUT_FILENO) >= 0 &&
	    dup2(p->fds[2], STDERR_FILENO) >= 0 &&
	    (!spec->ctty || (setsid() >= 0 && ioctl(STDIN_FILENO, TIOCSCTTY, 0) == 0))) {
		/* Anything an embedding leaked without O_CLOEXEC. */
		(void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
		if (p->keeper_argv != NULL) {
			/* the three it is told the numbers of */
			if (fcntl(p->exe_fd, F_SETFD, 0) == 0 && fcntl(status_fd, F_SETFD, 0) == 0 &&
			    fcntl(p->keeper_args_fd, F_SETFD, 0) == 0)
				execveat(p->keeper_fd, "", p->keeper_argv, envp, AT_EMPTY_PATH);
		} else if (p->exe_fd >= 0)
			execveat(p->exe_fd, "", spec->argv, envp, AT_EMPTY_PATH);
		else
			execve(spec->path, spec->argv, envp);
	}
fail:;
	int e = errno;
	(void)!write(status_fd, &e, sizeof(e));
	_exit(127);
}

/* Reads the exec-status pipe: 0 when it closed on exec, else -errno. */
static int exec_status(int st_r)
{
	int exec_errno = 0;
	ssize_t n;
	while ((n = read(st_r, &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR)
		;
	if (n == 0)
		return 0;
	if (n == (ssize_t)sizeof(exec_errno) && exec_errno > 0)
		return -exec_errno;
	return -EIO;
}

/* In a child: the handlers it shares with its caller back to default,
 * before anything unblocks a signal (async-signal-safe). */
static void default_handlers(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, old;
	for (int sig = 1; sig < NSIG; sig++)
		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL)
			(void)sigaction(sig, &dfl, NULL);
}

#if !defined(__SANITIZE_ADDRESS__)
struct vfork_arg {
	const struct lz_spawn_prepared *prep;
	int status_fd;
};

/* The child of lz_spawn, in the parent's memory until it execs: it runs
 * on its own stack, with every signal blocked (the parent's mask at the
 * clone) until the handlers it shares the code of are back to default. */
static int vfork_child(void *argp)
{
	const struct vfork_arg *a = argp;
	default_handlers();
	lz_spawn_exec_prepared(a->prep, a->status_fd);
}
#endif

/* clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: a fork would
 * write-protect every page of the caller, which then takes a page fault
 * on each page it writes next (about 12 us each on the machines measured;
 * the CLI wrote some 240 after starting its coordinator: issue 15). */
static pid_t vfork_exec(const struct lz_spawn_prepared *prep, int status_fd, int *ret_pidfd)
{
#if defined(__SANITIZE_ADDRESS__)
	/* ASan's shadow memory would be shared with the child, whose frames
	 * it poisons and never unpoisons: plain fork in those builds. */
	pid_t pid = lz_clone_pidfd(0, ret_pidfd);
	if (pid == 0)
		lz_spawn_exec_prepared(prep, status_fd);
	return pid;
#else
	/* The parent is suspended until the child execs or exits, so its
	 * frame, and this buffer in it, hold still meanwhile. */
	_Alignas(16) char stack[32768];
	struct vfork_arg arg = { prep, status_fd };
	sigset_t all, old;
	int pidfd = -EBADF;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int pid = clone(vfork_child, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &arg,
			&pidfd);
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0)
		return -e;
	*ret_pidfd = pidfd;
	return pid;
#endif
}

int lz_spawn(const struct lz_spawn *spec, int *ret_pidfd, pid_t *ret_pid, struct lz_err *err)
{
	const char *label = spec->label ? spec->label : spec->argv[0];
	struct lz_spawn_prepared prep;
	int p[2], r;

	if ((r = lz_spawn_prepare(spec, &prep, err)) < 0)
		return r;
	if (pipe2(p, O_CLOEXEC) < 0) {
		lz_spawn_prepared_release(&prep);
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	}
	int pidfd = -EBADF;
	fflush(NULL);
	pid_t pid = vfork_exec(&prep, p[1], &pidfd);
	lz_spawn_prepared_release(&prep);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return lz_err_set(err, -pid, "clone '%s': %s", label, strerror(-pid));
	}
	r = exec_status(p[0]);
	close(p[0]);
	if (r < 0) {
		siginfo_t info;
		(void)lz_reap(pidfd, -1, &info);
		close(pidfd);
		if (r == -EIO)
			return lz_err_set(err, EIO, "exec '%s': child failed before exec", label);
		return lz_err_set(err, -r, "exec '%s': %s", label, strerror(-r));
	}
	*ret_pidfd = pidfd;
	if (ret_pid)
		*ret_pid = pid;
	return 0;
}

/* One write, so one read takes it whole. */
_Static_assert(sizeof(struct lz_spawn_failure) <= PIPE_BUF, "the status record fits a pipe's atomic write");

/* The keeper's argument vector (proc/keeper.h): the descriptors it is
 * told the numbers of, the target's argv in a memory file of its own
 * (*ret_args_fd); NULL when that cannot be made. */
static char *const *keeper_argv(char *const *argv, int exe_fd, int status_fd, int *ret_args_fd)
{
	static char exe[16], status[16], args[16];
	static char *v[] = { LZ_KEEPER_NAME, exe, status, args, NULL };
	int fd = memfd_create("lazaret-argv", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (size_t i = 0; argv[i] != NULL; i++)
		if (lz_write_all(fd, argv[i], strlen(argv[i]) + 1) < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return NULL;
		}
	snprintf(exe, sizeof(exe), "%d", exe_fd);
	snprintf(status, sizeof(status), "%d", status_fd);
	snprintf(args, sizeof(args), "%d", fd);
	*ret_args_fd = fd;
	return v;
}

_Noreturn static void open_and_exec(const struct lz_spawn *spec, lz_spawn_open_fn *open_exe, void *ctx,
				    const int *keep, size_t n_keep, pid_t parent, int status_fd)
{
	/* A fork of a single-threaded caller: the lookup may use anything. */
	struct lz_spawn_failure f = { 0, "" };
	struct lz_err err = { 0, "" };
	struct lz_spawn_prepared prep;
	/* Ends with the caller, also one that ended before the prctl. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(127);
	default_handlers();
	/* Also the lookup: a caller may hold signals blocked (proc/stopreq.h),
	 * and a SIGTERM that waited would not end a child stuck in it. */
	lz_stopreq_unblock_all();
	/* The keeper's caller ends it with SIGTERM, also before the keeper
	 * runs (a lookup that waits), whatever the caller does with it. */
	if (spec->keeper_fd != NULL)
		(void)signal(SIGTERM, SIG_DFL);
	/* While the lookup waits it holds nothing of the caller's but what
	 * it needs (a lock, a socket whose end the caller's peer awaits). */
	int kept[LZ_SPAWN_KEEP_MAX + 6] = { status_fd, spec->stdin_fd, spec->stdout_fd, spec->stderr_fd,
					    spec->has_cwd ? spec->cwd_fd : -1,
					    spec->keeper_fd != NULL ? *spec->keeper_fd : -1 };
	size_t n_kept = 6;
	for (size_t i = 0; i < n_keep && i < LZ_SPAWN_KEEP_MAX; i++)
		kept[n_kept++] = keep[i];
	int r = lz_fds_keep_only(kept, n_kept);
	int fd = r < 0 ? lz_err_set(&err, -r, "standard streams to /dev/null: %s", strerror(-r)) : open_exe(ctx, &err);
	if (fd >= 0) {
		struct lz_spawn with_exe = *spec;
		with_exe.exe_fd = fd;
		if (lz_spawn_prepare(&with_exe, &prep, &err) == 0) {
			if (spec->keeper_fd != NULL) {
				prep.keeper_fd = *spec->keeper_fd;
				prep.keeper_argv = keeper_argv(spec->argv, prep.exe_fd, status_fd, &prep.keeper_args_fd);
			}
			if (spec->keeper_fd == NULL || prep.keeper_argv != NULL)
				lz_spawn_exec_prepared(&prep, status_fd);
			lz_err_set(&err, errno, "hand the command to its keeper: %s", strerror(errno));
		}
	}
	f.err = err.code > 0 ? err.code : EIO;
	size_t n = strnlen(err.msg, sizeof(f.msg) - 1);
	memcpy(f.msg, err.msg, n);
	(void)!write(status_fd, &f, offsetof(struct lz_spawn_failure, msg) + n + 1);
	_exit(127);
}

int lz_spawn_start(const struct lz_spawn *spec, lz_spawn_open_fn *open_exe, void *ctx, const int *keep, size_t n_keep,
		   int *ret_pidfd, pid_t *ret_pid, int *ret_status_fd, struct lz_err *err)
{
	const char *label = spec->label ? spec->label : spec->argv[0];
	int p[2], pidfd = -EBADF;
	if (n_keep > LZ_SPAWN_KEEP_MAX)
		return lz_err_set(err, E2BIG, "spawn '%s': more than %d descriptors to keep", label, LZ_SPAWN_KEEP_MAX);
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = lz_clone_pidfd(0, &pidfd);
	if (pid == 0) {
		close(p[0]);
		open_and_exec(spec, open_exe, ctx, keep, n_keep, parent, p[1]);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return lz_err_set(err, -pid, "fork for '%s': %s", label, strerror(-pid));
	}
	*ret_pidfd = pidfd;
	*ret_status_fd = p[0];
	if (ret_pid)
		*ret_pid = pid;
	return 0;
}


/* The first line of path beginning with key, its number. */
static int proc_number(const char *path, const char *key, long *ret)
{
	char text[1024];
	if (lz_read_small(path, text, sizeof(text)) < 0)
		return -1;
	for (const char *line = text; line != NULL; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			return sscanf(line + strlen(key), "%ld", ret) == 1 ? 0 : -1;
	return -1;
}

/* A child that ended before its exec: -ECHILD, so said. */
static int never_started(const char *label, struct lz_err *err)
{
	return lz_err_set(err, ECHILD, "exec '%s': the host process ended before it started", label);
}

/* The status pipe read empty: an exec closed it, or an exit (a kill from
 * outside) before one; the child's flags tell, read through the PID this
 * /proc gives its pidfd. Where /proc cannot tell (another PID namespace's,
 * or hidepid hiding a process that exec'd a set-ID program), it counts
 * as started, as it most likely did. */
static int proved_exec(int pidfd, const char *label, struct lz_err *err)
{
	char path[64], text[1024];
	long pid = 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	if (proc_number(path, "Pid:", &pid) < 0 || pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	uint64_t flags = 0;
	if (lz_read_small(path, text, sizeof(text)) < 0)
		return 0;
	if (lz_proc_stat_field(text, LZ_PROC_STAT_FLAGS, &flags) == 0 && (flags & LZ_PF_FORKNOEXEC))
		return never_started(label, err);
	return 0;
}

int lz_spawn_status(int status_fd, int pidfd, const char *label, bool *ret_opening, struct lz_err *err)
{
	struct lz_spawn_failure f = { 0, "" };
	ssize_t n;
	*ret_opening = false;
	while ((n = read(status_fd, &f, sizeof(f))) < 0 && errno == EINTR)
		;
	f.msg[sizeof(f.msg) - 1] = '\0';
	if (n < 0 && errno == EAGAIN)
		return 1;
	if (n == 0)
		return proved_exec(pidfd, label, err);
	if (n < (ssize_t)sizeof(f.err) || f.err <= 0)
		return lz_err_set(err, EIO, "exec '%s': child failed before exec", label);
	if (n == (ssize_t)sizeof(f.err) && f.err == ECHILD) /* a keeper's word for a child that never exec'd */
		return never_started(label, err);
	if (n == (ssize_t)sizeof(f.err))
		return lz_err_set(err, f.err, "exec '%s': %s", label, strerror(f.err));
	*ret_opening = true;
	return lz_err_set(err, f.err, "%s", f.msg);
}

int lz_spawn_run(const struct lz_spawn *spec, const char *label, int timeout_ms,
		 struct lz_err *err)
{
	return lz_spawn_run_watched(spec, label, timeout_ms, NULL, err);
}

int lz_spawn_run_watched(const struct lz_spawn *spec, const char *label, int timeout_ms,
			 const struct lz_spawn_watch *watch, struct lz_err *err)
{
	_cleanup_close_ int pidfd = -EBADF;
	int r = lz_spawn(spec, &pidfd, NULL, err);
	if (r < 0)
		return r;
	int64_t deadline = lz_now_ms() + timeout_ms;
	for (;;) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int left = timeout_ms < 0 ? -1 : lz_remaining_ms(deadline);
		int wait = watch == NULL || (left >= 0 && left < watch->interval_ms) ? left : watch->interval_ms;
		int n = poll(&p, 1, wait);
		if (n > 0)
			break;
		if (n < 0 && errno != EINTR)
			r = lz_err_set(err, errno, "%s: poll: %s", label, strerror(errno));
		else if (n == 0 && left == 0)
			r = lz_err_set(err, ETIMEDOUT, "%s: did not finish in time; killed", label);
		else if (n == 0 && watch != NULL)
			r = watch->check(watch->ctx, err);
		if (r < 0) {
			lz_kill_reap(&pidfd);
			return r;
		}
	}
	siginfo_t info = { 0 };
	if ((r = lz_reap(pidfd, -1, &info)) < 0) /* it has exited: only the reap */
		return lz_err_set(err, -r, "%s: waitid: %s", label, strerror(-r));
	if (info.si_code == CLD_EXITED && info.si_status == 0)
		return 0;
	/* What stops it may also be why it failed, between two looks. */
	if (watch != NULL && (r = watch->check(watch->ctx, err)) < 0)
		return r;
	if (info.si_code == CLD_EXITED)
		return lz_err_set(err, EIO, "%s exited with status %d", label, info.si_status);
	return lz_err_set(err, EIO, "%s was killed by signal %d", label, info.si_status);
}
