#include "runtime/rsrouter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "proc/caps.h"
#include "router/gitlib.h"
#include "router/ignorewatch.h"
#include "router/router.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/testfault.h"

/* How long the first classification may take (libgit2 reads the index
 * and every .gitignore of the workspace; an 80k-file tree takes well
 * under a second here). */
#define ROUTER_READY_TIMEOUT_MS 60000
/* How long the router may take to end after SIGTERM once unmounted. */
#define ROUTER_STOP_TIMEOUT_MS 5000

struct router_arg {
	int fuse_fd;
	int host_fd;
	int isolated_fd;
	int ready_fd; /* one byte once serving starts; closed unwritten on failure */
	bool hide_editor_config;
	bool isolate_ignored;
	size_t watch_dirs;
};

/* Where Debian's libgit2 (mbedTLS) looks for the system's CA bundle. */
#define LIBGIT2_CA_DIR "/etc/ssl/certs"

/* libgit2 parses the whole CA bundle when it is initialised (about 7 ms
 * here), for HTTPS the router never speaks. The router initialises it in
 * a mount namespace of its own where that directory is an empty tmpfs,
 * then returns to the generation's (issue 15). Without the directory, or
 * where it cannot be covered, the initialisation just reads it. */
static int gitlib_init_without_cas(struct lz_err *err)
{
	_cleanup_close_ int home = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return lz_err_set(err, errno, "router: its mount namespace: %s", strerror(errno));
	if (unshare(CLONE_NEWNS) < 0)
		return lz_err_set(err, errno, "router: a mount namespace for libgit2: %s", strerror(errno));
	(void)mount("none", LIBGIT2_CA_DIR, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "size=4k,nr_inodes=1,mode=0555");
	int r = lz_gitlib_load(err);
	if (setns(home, CLONE_NEWNS) < 0)
		return lz_err_set(err, errno, "router: back to the generation's mount namespace: %s",
				  strerror(errno));
	return r;
}

/* The router process: it keeps the FUSE device, its two backings and
 * the ready pipe only (not the HC's control socket, nor anything else of
 * the RS). The classification follows the workspace: ignorewatch rebuilds
 * and publishes a new snapshot when an ignore input or the index changes. */
static int router_main(void *argp, struct lz_err *err)
{
	const struct router_arg *a = argp;
	/* and the broker's report pipe: a failure says why */
	int keep[] = { a->fuse_fd, a->host_fd, a->isolated_fd, a->ready_fd, lz_broker_report_fd() };
	lz_fds_keep_only(keep, LZ_ARRAY_SIZE(keep));
	/* Spec 3.5: the developer's global excludes file, as the host's Git
	 * resolves it (from the coordinator's environment, inherited). */
	char excludes[4096] = "";
	int r = gitlib_init_without_cas(err);
	if (r < 0 || (a->isolate_ignored && (r = lz_ignoreclass_global_excludes(getenv("HOME"),
										    getenv("XDG_CONFIG_HOME"), excludes,
										    sizeof(excludes), err)) < 0))
		return r;
	/* The router reads what the sandbox writes (FUSE requests, the index
	 * through libgit2): a bug there must not reach the network, the
	 * developer's environment or more than the files it serves. Only
	 * what Git reads of the environment, no network namespace of its own
	 * use, and only the capabilities that serve files of the sandbox's
	 * owners, before the first thread (they are per thread). */
	static const char *const env_kept[] = { "HOME", "XDG_CONFIG_HOME", NULL }; /* Git's own */
	if ((r = lz_env_limit(env_kept)) < 0)
		return lz_err_set(err, -r, "router: environment: %s", strerror(-r));
	if (unshare(CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "router: empty network namespace: %s", strerror(errno));
	if ((r = lz_caps_limit(LZ_CAP(CAP_CHOWN) | LZ_CAP(CAP_DAC_OVERRIDE) | LZ_CAP(CAP_DAC_READ_SEARCH) |
			       LZ_CAP(CAP_FOWNER) | LZ_CAP(CAP_FSETID))) < 0)
		return lz_err_set(err, -r, "router: dropping capabilities: %s", strerror(-r));
	struct lz_ignoreclass_inputs in = {
		.workspace_fd = a->host_fd,
		.isolated_fd = a->isolated_fd,
		.global_excludes = excludes[0] ? excludes : NULL,
		.hide_editor_config = a->hide_editor_config,
		.share_ignored = !a->isolate_ignored,
	};
	lz_ignoreclass *snap = NULL;
	r = lz_ignoreclass_build(&in, &snap, err);
	if (r < 0)
		return lz_err_prefix(err, r, "classifying the workspace");
	struct lz_router_options opt;
	lz_router_options_default(&opt);
	opt.handle_signals = true; /* SIGTERM after the unmount ends the loop cleanly */
	lz_router *router = NULL;
	if ((r = lz_router_new(a->host_fd, a->isolated_fd, lz_router_classifier_ignoreclass(snap), &opt,
			       &router, err)) < 0)
		return r;
	lz_ignorewatch *watch = NULL;
	if ((r = lz_ignorewatch_start(router, &in, a->watch_dirs, &watch, err)) < 0) {
		lz_router_free(router);
		return r;
	}
	if (write(a->ready_fd, "", 1) != 1) {
		r = lz_err_set(err, errno, "router: the supervisor went away");
	} else {
		close(a->ready_fd);
		r = lz_router_serve(router, NULL, a->fuse_fd, err);
	}
	lz_ignorewatch_stop(watch);
	lz_router_free(router);
	return r;
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
	return lz_err_set(err, w < 0 ? -w : EIO, "workspace router: %s",
			  werr.msg[0] ? werr.msg : "ended before serving");
}

int lz_rsrouter_start(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err)
{
	if (lz_test_fault("bind-workspace"))
		return 0; /* bench/workspace's baseline: bundle.c binds it as it is */
	_cleanup_close_ int target = -EBADF, host = -EBADF, isolated = -EBADF, fuse = -EBADF,
			    mnt = -EBADF, ready_rd = -EBADF, ready_wr = -EBADF;
	int ready[2];
	int ret;
	if ((ret = lz_rsplan_reopen(p->router_target, p->router_target_fd, &target, err)) < 0 ||
	    (ret = lz_rsplan_reopen(p->host_ws, p->host_ws_fd, &host, err)) < 0 ||
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
	struct router_arg arg = { fuse, host, isolated, ready_wr, p->hide_editor_config, p->isolate_ignored,
				  p->watch_dirs };
	struct lz_broker_spec spec = { .label = "workspace router", .comm = "lazaret-router",
				       .join_pidfd = -1, .fn = router_main, .arg = &arg };
	if ((ret = lz_broker_spawn(&spec, &r->child, err)) < 0)
		return ret;
	/* The router holds the only device descriptor from here: its end
	 * aborts the connection. */
	lz_close_fdp(&fuse);
	lz_close_fdp(&ready_wr);
	if ((ret = await_ready(r, ready_rd, err)) < 0)
		return ret;
	if ((ret = lz_mountns_attach(mnt, target, &r->mount, err)) < 0)
		return ret;
	r->mounted = true;
	return 0;
}

int lz_rsrouter_stop(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err)
{
	int first = 0;
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
