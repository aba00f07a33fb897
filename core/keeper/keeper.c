/* lazaret-keeper (proc/keeper.h): a host command's parent, and the
 * subreaper of all it starts. Statically linked; only system calls. */
#include "proc/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc/pidref.h"
#include "proc/spawn.h"

#ifndef PIDFD_SIGNAL_PROCESS_GROUP
#define PIDFD_SIGNAL_PROCESS_GROUP (1U << 2)
#endif

extern char **environ;

static pid_t command_pid;
static int command_pidfd = -1;
static bool command_ended;
static int command_code, command_status; /* waitid's si_code and si_status */

static int send_kill(int pidfd, unsigned flags)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, flags);
}

/* Reaps every child that has ended, noting the command's status; whether
 * any child is left. */
static bool reap(void)
{
	for (;;) {
		siginfo_t si = { 0 };
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG) < 0)
			return errno != ECHILD;
		if (si.si_pid == 0)
			return true;
		if (si.si_pid == command_pid) {
			command_ended = true;
			command_code = si.si_code;
			command_status = si.si_status;
		}
	}
}

/* SIGKILL to each child listed in children (this thread's: the keeper
 * has one) and to the group each leads: a detached daemon and what it
 * started. A child is not reaped before its PID is opened here, so the
 * PID names it exactly (spec 3.3: signals go through a pidfd). Returns
 * how many children could not be signalled: another user's (a daemon
 * that sudo started, whose parent exited), beyond the developer's reach. */
static int kill_children(int children, int *ret_listed)
{
	int refused = 0;
	*ret_listed = 0;
	char buf[4096];
	size_t have = 0;
	off_t at = 0;
	for (;;) {
		ssize_t n = pread(children, buf + have, sizeof(buf) - have, at);
		if (n <= 0 && have == 0)
			return refused;
		if (n > 0) {
			at += n;
			have += (size_t)n;
		}
		/* whole numbers only; a partial one waits for the next read */
		size_t used = 0;
		for (size_t i = 0; i < have; i++) {
			if (buf[i] != ' ' && buf[i] != '\n')
				continue;
			long pid = 0;
			for (size_t k = used; k < i && buf[k] >= '0' && buf[k] <= '9'; k++)
				pid = pid * 10 + (buf[k] - '0');
			used = i + 1;
			int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, (pid_t)pid, 0) : -1;
			if (fd >= 0) {
				++*ret_listed;
				if (send_kill(fd, 0) < 0 && errno == EPERM)
					refused++;
				(void)send_kill(fd, PIDFD_SIGNAL_PROCESS_GROUP);
				close(fd);
			}
		}
		memmove(buf, buf + used, have - used);
		have -= used;
		if (n <= 0 || (have == sizeof(buf)))
			return refused;
	}
}

/* Kills the command, its group and every process below the keeper, and
 * reaps them all: what dies leaves its children to the keeper, so the
 * rounds go on until none is left, or only another user's are. */
static void end_all(int children, const sigset_t *chld)
{
	(void)send_kill(command_pidfd, 0);
	(void)send_kill(command_pidfd, PIDFD_SIGNAL_PROCESS_GROUP);
	for (int round = 0; reap(); round++) {
		int listed, refused = kill_children(children, &listed);
		if (listed > 0 && refused == listed)
			return;
		/* promptly at first; one held in the kernel is waited for */
		struct timespec wait = { 0, round < 20 ? 2 * 1000 * 1000 : 100 * 1000 * 1000 };
		(void)sigtimedwait(chld, NULL, &wait);
	}
}

/* Ends as the command did: its code, else its signal (no core). */
_Noreturn static void exit_as_command(void)
{
	if (!command_ended || command_code == CLD_EXITED)
		_exit(command_ended ? command_status : 127);
	int sig = command_status;
	struct rlimit none = { 0, 0 };
	(void)setrlimit(RLIMIT_CORE, &none);
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t only;
	sigemptyset(&only);
	sigaddset(&only, sig);
	(void)sigaction(sig, &dfl, NULL);
	(void)raise(sig);
	(void)sigprocmask(SIG_UNBLOCK, &only, NULL);
	_exit(128 + sig);
}

/* The keeper could not do its work: said on the status pipe the way the
 * coordinator reads a child's own failure (proc/spawn.h), then ended. */
_Noreturn static void refuse(int status_fd, int code, const char *what)
{
	struct lz_spawn_failure f = { .err = code };
	size_t n = strlen(what);
	if (n >= sizeof(f.msg))
		n = sizeof(f.msg) - 1;
	memcpy(f.msg, what, n);
	(void)!write(status_fd, &f, offsetof(struct lz_spawn_failure, msg) + n + 1);
	_exit(127);
}

/* Whether the process pid (a child, not yet reaped) never exec'd: the
 * kernel's PF_FORKNOEXEC in its stat. */
static bool never_execd(pid_t pid)
{
	char path[32], text[1024];
	uint64_t flags = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	text[n] = '\0';
	return lz_proc_stat_field(text, LZ_PROC_STAT_FLAGS, &flags) == 0 && (flags & LZ_PF_FORKNOEXEC) != 0;
}

/* Once the command's copy of execd has closed (it exec'd, or ended before
 * its exec, or said why its exec failed), the coordinator learns which
 * through the status pipe, which the keeper then closes: its own check
 * of the "forked, did not exec" flag would see the keeper's, which did
 * exec (a command the OOM killer or a kill -9 ended first is not
 * reported as started). True once told. */
static bool settle_start(int execd, int status_fd, pid_t command)
{
	int e = 0;
	ssize_t n = read(execd, &e, sizeof(e));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	/* Said as a child's own exec status (proc/spawn.h): its exec's
	 * errno, or ECHILD for one that ended before it (never an exec's). */
	if (n != (ssize_t)sizeof(e) && never_execd(command))
		e = ECHILD;
	if (n == (ssize_t)sizeof(e) || e == ECHILD)
		(void)!write(status_fd, &e, sizeof(e));
	close(execd);
	close(status_fd);
	return true;
}

static int parse_fd(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return errno == 0 && *end == '\0' && end != s && v >= 3 && v <= INT_MAX ? (int)v : -1;
}

/* The command's argument vector from the memory file args_fd (its
 * strings, each NUL-terminated), which is closed; NULL when it is not one. */
static char **read_argv(int args_fd)
{
	struct stat st;
	char *text = NULL;
	char **v = NULL;
	if (fstat(args_fd, &st) < 0 || st.st_size <= 0 || st.st_size > LZ_KEEPER_ARGS_MAX ||
	    (text = malloc((size_t)st.st_size)) == NULL ||
	    pread(args_fd, text, (size_t)st.st_size, 0) != st.st_size || text[st.st_size - 1] != '\0')
		goto done;
	size_t n = 0;
	for (off_t i = 0; i < st.st_size; i++)
		n += text[i] == '\0';
	if ((v = calloc(n + 1, sizeof(*v))) == NULL)
		goto done;
	for (size_t k = 0, at = 0; k < n; k++) {
		v[k] = text + at;
		at += strlen(text + at) + 1;
	}
	text = NULL; /* the strings of v */
done:
	free(text);
	close(args_fd);
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 127;
	int exe_fd = parse_fd(argv[1]), status_fd = parse_fd(argv[2]), args_fd = parse_fd(argv[3]);
	if (exe_fd < 0 || status_fd < 0 || args_fd < 0)
		return 127;
	/* Only the coordinator ends the keeper (its SIGTERM, or its death):
	 * a pkill of the command's own may match any process of the user. */
	pid_t parent = getppid();
	char **command = read_argv(args_fd);
	if (command == NULL)
		refuse(status_fd, EINVAL, "the host command's keeper: its argument vector is not readable");
	(void)signal(SIGCHLD, SIG_DFL); /* an inherited SIG_IGN would reap for it */
	sigset_t ending, old, chld;
	sigemptyset(&ending);
	sigaddset(&ending, SIGCHLD);
	sigaddset(&ending, SIGTERM);
	sigaddset(&ending, SIGHUP);
	sigaddset(&ending, SIGINT);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &ending, &old) < 0)
		return 127;
	/* Blocked before the coordinator's end can be its signal: the
	 * SIGKILL set for the child before its exec held until here. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		refuse(status_fd, errno, "the host command's keeper: prctl: cannot become its subreaper");
	int children = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
	if (children < 0)
		refuse(status_fd, errno,
		       "the host command's keeper: /proc/thread-self/children cannot be read (a kernel "
		       "without CONFIG_PROC_CHILDREN): what the command starts could not be ended with it");
	pid_t keeper = getpid();
	int execd[2];
	if (pipe2(execd, O_CLOEXEC | O_NONBLOCK) < 0)
		refuse(status_fd, errno, "the host command's keeper: pipe2 failed");
	struct clone_args args = { .flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)&command_pidfd,
				   .exit_signal = SIGCHLD };
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0)
		refuse(status_fd, errno, "the host command's keeper: clone3 failed");
	if (pid == 0) {
		(void)sigprocmask(SIG_SETMASK, &old, NULL);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != keeper || setpgid(0, 0) < 0 ||
		    fcntl(status_fd, F_SETFD, FD_CLOEXEC) < 0 || fcntl(exe_fd, F_SETFD, FD_CLOEXEC) < 0)
			_exit(127);
		(void)syscall(SYS_execveat, exe_fd, "", command, environ, AT_EMPTY_PATH);
		int e = errno;
		(void)!write(execd[1], &e, sizeof(e)); /* passed on by settle_start */
		_exit(127);
	}
	command_pid = (pid_t)pid;
	/* The command's streams are its own: the keeper holds none of them
	 * open past its end, and the status pipe only until its start is
	 * known (settle_start). */
	close(exe_fd);
	close(execd[1]);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3; fd++)
		if (null >= 0 && null != fd)
			(void)dup2(null, fd);
	bool started = false;
	struct timespec tick = { 0, 1000 * 1000 };
	for (;;) {
		/* Before the command is reaped: its stat still says whether it
		 * exec'd. Until then the wait looks again, after 1 ms at first
		 * and at most every 64 ms (an exec from a mount that does not
		 * answer may take long). */
		if (!started)
			started = settle_start(execd[0], status_fd, command_pid);
		siginfo_t si;
		int sig = started ? sigwaitinfo(&ending, &si) : sigtimedwait(&ending, &si, &tick);
		if (sig < 0 && tick.tv_nsec < 64 * 1000 * 1000)
			tick.tv_nsec *= 2;
		if (sig == SIGCHLD && !started)
			started = settle_start(execd[0], status_fd, command_pid);
		if (sig == SIGCHLD) {
			(void)reap();
			if (command_ended)
				break;
		} else if (sig > 0 && si.si_code == SI_USER && si.si_pid == parent) {
			/* SI_USER: kill(2), pidfd_send_signal(2) or the kernel's
			 * parent-death signal, whose sender is the kernel's to
			 * name; sigqueue(3) lets any process of the user name a
			 * pid of its choosing, with another code. */
			end_all(children, &chld);
			/* stopped from outside: as the coordinator's SIGKILL did */
			(void)raise(SIGKILL);
			_exit(128 + SIGKILL);
		}
	}
	end_all(children, &chld);
	exit_as_command();
}
