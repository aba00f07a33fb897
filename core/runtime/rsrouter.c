#include "runtime/rsrouter.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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
	const char *global_excludes;
	bool hide_editor_config;
	bool isolate_ignored;
};

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
	struct lz_ignoreclass_inputs in = {
		.workspace_fd = a->host_fd,
		.isolated_fd = a->isolated_fd,
		.global_excludes = a->global_excludes[0] ? a->global_excludes : NULL,
		.hide_editor_config = a->hide_editor_config,
		.share_ignored = !a->isolate_ignored,
	};
	lz_ignoreclass *snap = NULL;
	int r = lz_ignoreclass_build(&in, &snap, err);
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
	if ((r = lz_ignorewatch_start(router, &in, &watch, err)) < 0) {
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
	struct router_arg arg = { fuse, host, isolated, ready_wr, p->global_excludes,
				  p->hide_editor_config, p->isolate_ignored };
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
