/* lazaret-init: the product-owned root init of the Agent Sandbox (spec 3.7).
 *
 * It is PID 1 of the container's pid namespace inside gVisor. Its whole job
 * for now: reap every process that ends up as its child (orphans are
 * reparented to PID 1, and nobody else will collect them), ignore the
 * signals a terminal or a closed pipe would send, and exit 0 promptly when
 * the Runtime Supervisor asks with SIGTERM.
 *
 * Built statically (no ELF interpreter, no dynamic section) so nothing from
 * the sandbox image's root filesystem is loaded into it, and it reads no
 * environment, argument, file or inherited signal state: the disposition of
 * every signal it handles and its signal mask are set explicitly here. It
 * prints nothing unless setup itself fails. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t terminate;

/* SIGTERM is the Runtime Supervisor's request to stop: record it; the main
 * loop exits once it has reaped what is already dead. */
static void on_sigterm(int sig)
{
	(void)sig;
	terminate = 1;
}

/* SIGCHLD only has to interrupt sigsuspend; the loop does the reaping. A
 * handler is needed because SIG_DFL for SIGCHLD discards the signal
 * without waking sigsuspend. */
static void on_sigchld(int sig)
{
	(void)sig;
}

/* Best effort: there is nobody else to tell. */
static void say(const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static int fail(const char *what)
{
	const char *msg = strerror(errno);
	say("lazaret-init: ");
	say(what);
	say(": ");
	say(msg);
	say("\n");
	return 1;
}

int main(void)
{
	/* SIGINT and SIGHUP come from a terminal (a session's PTY closing or a
	 * user's ^C reaching the wrong group) and must not take the whole
	 * sandbox down; SIGPIPE would kill init on a write to a closed pipe. */
	static const int ignored[] = { SIGINT, SIGHUP, SIGPIPE };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		if (sigaction(ignored[i], &ign, NULL) < 0)
			return fail("sigaction");

	/* SIGTERM and SIGCHLD stay blocked except inside sigsuspend, so one
	 * arriving between the checks below and the wait is not lost. No
	 * SA_RESTART: the handlers only matter for waking sigsuspend. */
	sigset_t blocked, waiting;
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGCHLD);
	sigemptyset(&waiting);
	if (sigprocmask(SIG_SETMASK, &blocked, NULL) < 0)
		return fail("sigprocmask");
	struct sigaction term = { .sa_handler = on_sigterm };
	struct sigaction chld = { .sa_handler = on_sigchld, .sa_flags = SA_NOCLDSTOP };
	sigfillset(&term.sa_mask);
	sigfillset(&chld.sa_mask);
	if (sigaction(SIGTERM, &term, NULL) < 0 || sigaction(SIGCHLD, &chld, NULL) < 0)
		return fail("sigaction");

	for (;;) {
		/* Reap everything already dead, including children that died
		 * before the handlers were installed; __WALL also collects
		 * children whose exit signal is not SIGCHLD. */
		while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
			;
		if (terminate)
			return 0;
		sigsuspend(&waiting); /* always -1/EINTR after a handler ran */
	}
}
