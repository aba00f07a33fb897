/* lazaret-init: the product-owned root init of the Agent Sandbox (spec 3.7).
 *
 * It is PID 1 of the container's pid namespace inside gVisor. Its whole job
 * for now: reap every process that ends up as its child (orphans are
 * reparented to PID 1, and nobody else will collect them), ignore the
 * signals a terminal or a closed pipe would send, and exit 0 promptly when
 * the Runtime Supervisor asks with SIGTERM.
 *
 * With "--attest <challenge as 64 hex digits>" (the HC writes that argument
 * vector; spec 3.7 "Imported behavior") it first observes the sandbox's
 * network (init/attest.h) and writes the record to standard output, which
 * is the Runtime Supervisor's pipe: one length byte, then the encoded
 * record. Standard output then becomes standard error, so the pipe is not
 * held by the init.
 *
 * With "--workspace-alias <absolute path>" after that (bundle.c) it first
 * makes that path, the workspace's path on the host, a symbolic link to
 * /workspace, so the absolute paths Git writes for a linked worktree
 * resolve inside too (spec 3.5's Git contract). Only inside the sandbox;
 * whatever is already there stays, and a failure costs only that.
 *
 * Built statically (no ELF interpreter, no dynamic section) so nothing from
 * the sandbox image's root filesystem is loaded into it, and it reads no
 * environment, file or inherited signal state: the disposition of every
 * signal it handles and its signal mask are set explicitly here. It prints
 * nothing unless setup itself fails. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/attest.h"

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

/* Absolute, and no empty, "." or ".." component: the path names one
 * place, as the host's canonical path does. */
static int alias_valid(const char *path)
{
	if (path[0] != '/' || strlen(path) >= PATH_MAX)
		return 0;
	for (const char *c = path + 1;; c++) {
		size_t len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c += len;
		if (*c == '\0')
			return 1;
	}
}

static void make_alias(const char *path)
{
	char buf[PATH_MAX];
	memcpy(buf, path, strlen(path) + 1);
	for (char *s = strchr(buf + 1, '/'); s != NULL; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
			fail("workspace alias");
			return;
		}
		*s = '/';
	}
	if (symlink("/workspace", buf) < 0 && errno != EEXIST)
		fail("workspace alias");
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int attest(const char *hex)
{
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], rec[1 + LZ_NETATTEST_ENCODED_MAX];
	size_t len = 0;
	if (strlen(hex) != 2 * sizeof(challenge)) {
		errno = EINVAL;
		return fail("--attest");
	}
	for (size_t i = 0; i < sizeof(challenge); i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			errno = EINVAL;
			return fail("--attest");
		}
		challenge[i] = (uint8_t)(hi << 4 | lo);
	}
	struct lz_netattest a;
	lz_init_attest(challenge, &a);
	if (lz_netattest_encode(&a, rec + 1, sizeof(rec) - 1, &len) < 0) {
		errno = EPROTO;
		return fail("encode the attestation");
	}
	rec[0] = (uint8_t)len;
	for (size_t off = 0; off < len + 1;) {
		ssize_t w = write(STDOUT_FILENO, rec + off, len + 1 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail("write the attestation");
		off += (size_t)w;
	}
	if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		return fail("dup2");
	return 0;
}

int main(int argc, char **argv)
{
	/* SIGINT and SIGHUP come from a terminal (a session's PTY closing or a
	 * user's ^C reaching the wrong group) and must not take the whole
	 * sandbox down; SIGPIPE would kill init on a write to a closed pipe. */
	static const int ignored[] = { SIGINT, SIGHUP, SIGPIPE };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		if (sigaction(ignored[i], &ign, NULL) < 0)
			return fail("sigaction");
	if ((argc == 3 || argc == 5) && strcmp(argv[1], "--attest") == 0) {
		if (argc == 5) {
			if (strcmp(argv[3], "--workspace-alias") != 0 || !alias_valid(argv[4])) {
				errno = EINVAL;
				return fail("--workspace-alias");
			}
			make_alias(argv[4]);
		}
		if (attest(argv[2]) != 0)
			return 1;
	} else if (argc != 1) {
		errno = EINVAL;
		return fail("arguments");
	}

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

	/* The init's streams are runsc's log on the host (runsc.log): any
	 * root process inside could write it through /proc/1/fd without
	 * bound. Nothing is said from here on, so they go. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0)
		return fail("/dev/null for the init's streams");
	close(null);

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
