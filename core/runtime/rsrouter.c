#include "runtime/rsrouter.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/stopreq.h"
#include "router/routerproc.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/testfault.h"

/* How long the first classification may take (libgit2 reads the index
 * and every .gitignore of the workspace; an 80k-file tree takes well
 * under a second here). */
#define ROUTER_READY_TIMEOUT_MS 60000
/* How long the router may take to end after SIGTERM once unmounted. */
#define ROUTER_STOP_TIMEOUT_MS 5000

/* The router's program is exec'd from the plan's sealed memory file
 * (routerproc.h): the child keeps the descriptors the program finds by
 * number and nothing else of the RS. */
struct router_arg {
	int program_fd;
	int log_fd; /* becomes its standard error */
	int fds[LZ_ROUTERPROC_NFDS]; /* in routerproc.h's order */
	const char *argv[LZ_ROUTERPROC_ARGV_MAX];
	char *envp[4];
};

static int router_exec(void *argp, struct lz_err *err)
{
	const struct router_arg *a = argp;
	/* routerproc.h's descriptors, then the program itself */
	int fds[LZ_ROUTERPROC_NFDS + 1];
	memcpy(fds, a->fds, sizeof(a->fds));
	fds[LZ_ROUTERPROC_FD_REPORT - 3] = lz_broker_report_fd(); /* the broker's, in this child */
	fds[LZ_ROUTERPROC_NFDS] = a->program_fd;
	int program = 3 + LZ_ROUTERPROC_NFDS;
	if (dup2(a->log_fd, STDERR_FILENO) < 0)
		return lz_err_set(err, errno, "its log: %s", strerror(errno));
	int r = lz_fds_place(fds, LZ_ARRAY_SIZE(fds));
	if (r < 0)
		return lz_err_set(err, -r, "placing its descriptors: %s", strerror(-r));
	/* the program starts with no signal blocked or ignored */
	lz_stopreq_unblock_all();
	for (int sig = 1; sig < NSIG; sig++)
		(void)signal(sig, SIG_DFL);
	if (fcntl(program, F_SETFD, FD_CLOEXEC) == 0)
		fexecve(program, (char *const *)a->argv, a->envp);
	/* The broker's report pipe has moved: say why here. */
	lz_err_set(err, errno, "exec: %s", strerror(errno));
	(void)!write(LZ_ROUTERPROC_FD_REPORT, err->msg, strnlen(err->msg, sizeof(err->msg)));
	_exit(1);
}

/* What the host's Git reads of the environment to find the global
 * excludes file (spec 3.5); nothing else of the developer's reaches the
 * router (test builds: and the fault switch). */
static int router_env(char *envp[4])
{
	static const char *const names[] = { "HOME", "XDG_CONFIG_HOME",
#ifdef LZ_TEST_FAULTS
					     "LAZARET_TEST_FAULT"
#endif
	};
	size_t n = 0;
	envp[0] = NULL;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(names); i++) {
		const char *v = getenv(names[i]);
		if (v == NULL)
			continue;
		if (asprintf(&envp[n], "%s=%s", names[i], v) < 0) {
			envp[n] = NULL;
			return -ENOMEM;
		}
		envp[++n] = NULL;
	}
	return 0;
}

static void router_env_free(char *envp[4])
{
	for (size_t i = 0; envp[i] != NULL; i++)
		free(envp[i]);
}

/* Waits for the router's ready byte; on its failure, its own message. */
static int await_ready(struct lz_rsrouter *r, int ready_rd, struct lz_err *err)
{
	struct pollfd pf = { .fd = ready_rd, .events = POLLIN };
	int n;
	do
		n = poll(&pf, 1, ROUTER_READY_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	char byte;
	if (n > 0 && read(ready_rd, &byte, 1) == 1)
		return 0;
	int status = 0;
	struct lz_err werr = { 0, "" };
	int w = lz_broker_wait(&r->child, n == 0 ? 0 : 5000, &status, &werr);
	if (n == 0)
		return lz_err_set(err, ETIMEDOUT, "workspace router: not ready after %d s",
				  ROUTER_READY_TIMEOUT_MS / 1000);
	if (werr.msg[0])
		return lz_err_set(err, w < 0 ? -w : EIO, "workspace router: %s", werr.msg);
	return lz_err_set(err, EIO, "workspace router: ended before serving (exit status %d)", status);
}

int lz_rsrouter_start(const struct lz_rs_plan *p, int log_fd, struct lz_rsrouter *r, struct lz_err *err)
{
	if (lz_test_fault("bind-workspace"))
		return 0; /* bench/workspace's baseline: bundle.c binds it as it is */
	_cleanup_close_ int host = -EBADF, isolated = -EBADF, fuse = -EBADF, mnt = -EBADF, ready_rd = -EBADF,
			    ready_wr = -EBADF;
	int ready[2];
	int ret;
	if ((ret = lz_rsplan_reopen(p->host_ws, p->host_ws_fd, &host, err)) < 0 ||
	    (ret = lz_rsplan_reopen(p->ignored, p->ignored_fd, &isolated, err)) < 0)
		return ret;
	fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fuse < 0)
		return lz_err_set(err, errno, "open /dev/fuse: %s%s", strerror(errno),
				  errno == EACCES ? " (it must be mode 0666: scripts/setup.sh)" : "");
	if (pipe2(ready, O_CLOEXEC) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	ready_rd = ready[0];
	ready_wr = ready[1];
	if ((ret = lz_mountns_fuse_new(fuse, &mnt, err)) < 0)
		return ret;
	const struct lz_routerproc_args args = { .hide_editor_config = p->hide_editor_config,
						 .isolate_ignored = p->isolate_ignored,
						 /* the test build's smallest budget: two chunks */
						 .watch_dirs = lz_test_fault("watch-least-host") ? 512 : p->watch_dirs,
						 .workspace = p->host_ws };
	/* the broker's report pipe is placed by the child (it exists there) */
	struct router_arg arg = { .program_fd = p->router_program_fd,
				  .log_fd = log_fd,
				  .fds = { fuse, host, isolated, ready_wr, -1, p->watch_slots_fd } };
	if (arg.program_fd < 0)
		return lz_err_set(err, ENOEXEC, "workspace router: no program in the plan");
	char number[24];
	lz_routerproc_argv(&args, number, arg.argv);
	if (router_env(arg.envp) < 0) {
		router_env_free(arg.envp);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	struct lz_broker_spec spec = { .label = "workspace router", .comm = "lazaret-router",
				       .join_pidfd = -1, .fn = router_exec, .arg = &arg };
	ret = lz_broker_spawn(&spec, &r->child, err);
	router_env_free(arg.envp);
	if (ret < 0)
		return ret;
	/* The router holds the only device descriptor from here: its end
	 * aborts the connection. */
	lz_close_fdp(&fuse);
	r->ready_fd = TAKE_FD(ready_rd);
	r->mount_fd = TAKE_FD(mnt);
	return 0;
}

int lz_rsrouter_attach(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err)
{
	if (lz_test_fault("bind-workspace"))
		return 0;
	_cleanup_close_ int target = -EBADF;
	int ret = await_ready(r, r->ready_fd, err);
	lz_close_fdp(&r->ready_fd);
	if (ret < 0 || (ret = lz_rsplan_reopen(p->router_target, p->router_target_fd, &target, err)) < 0 ||
	    (ret = lz_mountns_attach(r->mount_fd, target, &r->mount, err)) < 0)
		return ret;
	lz_close_fdp(&r->mount_fd);
	r->mounted = true;
	return 0;
}

int lz_rsrouter_stop(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err)
{
	int first = 0;
	lz_close_fdp(&r->ready_fd);
	lz_close_fdp(&r->mount_fd);
	if (r->mounted) {
		first = lz_mountns_unmount_exact(p->router_target, &r->mount, err);
		r->mounted = first < 0; /* left in place when not proved ours */
	}
	if (r->child.pidfd >= 0) {
		int status = 0;
		struct lz_err werr = { 0, "" };
		(void)lz_broker_signal(&r->child, SIGTERM);
		int w = lz_broker_wait(&r->child, ROUTER_STOP_TIMEOUT_MS, &status, &werr);
		if (w < 0 && first == 0)
			first = lz_err_set(err, -w, "workspace router: %s", werr.msg);
	}
	return first;
}
