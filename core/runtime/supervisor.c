#include "runtime/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/broker.h"
#include "proc/pidref.h"
#include "net/canary.h"
#include "net/egress.h"
#include "net/netpolicy.h"
#include "net/netroutes.h"
#include "net/netroutes_install.h"
#include "net/netroutes_ipv6.h"
#include "net/netroutes_observe.h"
#include "net/rtnl.h"
#include "proc/spawn.h"
#include "runtime/memwatch.h"
#include "runtime/rsrouter.h"
#include "fs/tree.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/logrelay.h"
#include "util/testfault.h"

static void msg_init(struct lz_rs_msg *m, const struct lz_rs_plan *p, uint32_t type)
{
	lz_rs_msg_init(m, type, p->generation, p->domain_id);
}

static void report_failure(const struct lz_rs_plan *p, const char *why)
{
	struct lz_rs_msg m;
	msg_init(&m, p, LZ_RS_FAILED);
	snprintf(m.text, sizeof(m.text), "%s", why);
	(void)lz_rs_send(p->control_fd, &m);
}

/* Runs a runsc subcommand against our container and captures stdout. */
static int runsc_query(const struct lz_rs_plan *p, const char *cmd, const char *arg, char *out,
		       size_t cap, struct lz_err *err)
{
	char root[4200];
	snprintf(root, sizeof(root), "--root=%s", p->runsc_root);
	char *argv[] = { "runsc", root, (char *)cmd, (char *)p->container_id, (char *)arg, NULL };
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	struct lz_spawn spec = { .label = "runsc", .exe_fd = p->runsc_fd,
				 .argv = argv, .stdin_fd = -1, .stdout_fd = pipefd[1],
				 .stderr_fd = p->log_fd };
	int pidfd = -1;
	int r = lz_spawn(&spec, &pidfd, NULL, err);
	close(pipefd[1]);
	if (r < 0) {
		close(pipefd[0]);
		return r;
	}
	bool timed_out;
	int64_t deadline = lz_now_ms() + 10000;
	(void)lz_read_child_output(pipefd[0], pidfd, deadline, out, cap, &timed_out);
	close(pipefd[0]);
	siginfo_t info;
	r = lz_reap(pidfd, timed_out ? -1 : lz_remaining_ms(deadline), &info);
	close(pidfd);
	if (timed_out)
		r = -ETIMEDOUT;
	if (r < 0)
		return lz_err_set(err, -r, "runsc %s: %s", cmd, strerror(-r));
	if (info.si_code != CLD_EXITED || info.si_status != 0)
		return lz_err_set(err, EIO, "runsc %s failed (status %d)", cmd, info.si_status);
	return 0;
}

struct staged_ctx {
	const struct lz_rs_plan *plan;
};

/* Step 6 for an RS-launched child: the HC persists the identity and
 * echoes it (type LZ_RS_STAGED for the attached runsc, LZ_RS_HELPER_STAGED
 * for slirp4netns). */
static int report_staged(const struct lz_rs_plan *p, uint32_t type, const char *what,
			 const struct lz_pidref *id, struct lz_err *err)
{
	struct lz_rs_msg m, ack;
	msg_init(&m, p, type);
	m.id = *id;
	int r = lz_rs_send(p->control_fd, &m);
	if (r < 0)
		return lz_err_set(err, -r, "report staged %s: %s", what, strerror(-r));
	if ((r = lz_rs_recv(p->control_fd, &ack, LZ_RS_START_TIMEOUT_MS)) < 0)
		return lz_err_set(err, -r, "wait for the commit acknowledgement: %s", strerror(-r));
	if (ack.type == LZ_HC_STOP) /* told to stop (proc/stopreq.h) */
		return lz_err_set(err, ECANCELED, "the Host Coordinator stopped the launch before %s was released",
				  what);
	if (!lz_rs_ack_echoes(&ack, &m))
		return lz_err_set(err, EPROTO, "the commit acknowledgement does not echo the staged "
					       "%s identity", what);
	return 0;
}

static int runsc_staged(void *ctxp, const struct lz_pidref *id, int pidfd, struct lz_err *err)
{
	(void)pidfd;
	return report_staged(((struct staged_ctx *)ctxp)->plan, LZ_RS_STAGED, "runsc", id, err);
}

static int net_prepare(struct lz_err *err);

struct helper_ctx {
	const struct lz_rs_plan *plan;
	struct lz_canary *canary;
};

/* slirp4netns was cloned while the RS was still in the host network
 * namespace, which it keeps for its outbound sockets. Before it is
 * released to run, the RS moves itself into a new enforcement namespace
 * (owned by its user namespace), prepares it and builds the canary, and
 * only then reports slirp4netns staged: the HC records that namespace
 * with its staging (spec 3.6) and the helper, attaching to the RS (PID 1
 * here), finds IPv6 already off (spec 3.7: before helper and canary
 * setup). The canary comes first because building it steps the RS into
 * the peer namespace for a moment, and neither the helper nor the HC's
 * reading may see it there. */
static int helper_staged(void *ctxp, const struct lz_pidref *id, int pidfd, struct lz_err *err)
{
	(void)pidfd;
	const struct helper_ctx *c = ctxp;
	const struct lz_rs_plan *p = c->plan;
	int r;
	if (unshare(CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "enforcement network namespace: %s", strerror(errno));
	if ((r = net_prepare(err)) < 0 || (r = lz_canary_create(p->canary_key, p->generation, c->canary, err)) < 0)
		return r;
	return report_staged(p, LZ_RS_HELPER_STAGED, "slirp4netns", id, err);
}

/* FR-16: the connectivity helper, a supervised child of the RS; the
 * enforcement namespace and the canary are built on the way. */
static int start_helper(const struct lz_rs_plan *p, struct lz_canary *canary, struct lz_broker_child *ret,
			struct lz_err *err)
{
	char *argv[] = { "slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
			 "--cidr=10.137.54.0/24", "--enable-sandbox", "--enable-seccomp", "1", "tap0", NULL, NULL };
	/* Egress by name: the sandbox's own DNS would be a way out past the
	 * proxy (names as queries); the proxy resolves for it. */
	if (p->egress) {
		memmove(&argv[2], &argv[1], 8 * sizeof(argv[0]));
		argv[1] = "--disable-dns";
	}
	struct lz_spawn exec = { .label = "slirp4netns", .exe_fd = p->slirp_fd, .argv = argv,
				 .stdin_fd = -1, .stdout_fd = p->slirp_log_fd, .stderr_fd = p->slirp_log_fd };
	struct helper_ctx hctx = { p, canary };
	struct lz_broker_spec spec = { .label = "slirp4netns", .join_pidfd = -1, .exec = &exec,
				       .staged = helper_staged, .ctx = &hctx };
	return lz_broker_spawn(&spec, ret, err);
}

/* Mounts are cloned from, and attached to, the RS's own mount namespace
 * only, from sources and targets reopened by label and proved to be the
 * HC's objects (lz_rsplan_reopen). */
static int mount_all(const struct lz_rs_plan *p, struct lz_rs_msg *mounts, struct lz_err *err)
{
	_cleanup_close_ int prepared = -EBADF, root = -EBADF, upper = -EBADF, work = -EBADF;
	int r;
	/* Kept for the life of the RS: the identities of its children are the
	 * host's PIDs (proc/pidref.h), and its /proc becomes its PID
	 * namespace's next. */
	int host_proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (host_proc < 0)
		return lz_err_set(err, errno, "open /proc: %s", strerror(errno));
	lz_pidref_use_proc(host_proc);
	if ((r = lz_mountns_prepare(err)) < 0 || (r = lz_rsplan_reopen(p->prepared, p->prepared_fd, &prepared, err)) < 0 ||
	    (r = lz_rsplan_reopen(p->root_target, p->root_target_fd, &root, err)) < 0 ||
	    (r = lz_rsplan_reopen(p->root_upper, p->root_upper_fd, &upper, err)) < 0 ||
	    (r = lz_rsplan_reopen(p->root_work, p->root_work_fd, &work, err)) < 0)
		return r;
	/* The lower stays untouched: runsc creates mount points and the guest
	 * writes in the transient upper only. */
	if ((r = lz_mountns_overlay(prepared, upper, work, root, &mounts->mounts[0], err)) < 0)
		return lz_err_prefix(err, r, "root: ");
	mounts->n_mounts = 1;
	for (size_t i = 0; i < p->n_anchors; i++) {
		const struct lz_rs_anchor *a = &p->anchors[i];
		_cleanup_close_ int target = -EBADF, lower = -EBADF, upper = -EBADF, work = -EBADF;
		if ((r = lz_rsplan_reopen(a->target, a->target_fd, &target, err)) < 0 ||
		    (r = lz_rsplan_reopen(a->lower, a->lower_fd, &lower, err)) < 0 ||
		    (r = lz_rsplan_reopen(a->upper, a->upper_fd, &upper, err)) < 0 ||
		    (r = lz_rsplan_reopen(a->work, a->work_fd, &work, err)) < 0)
			return r;
		if ((r = lz_mountns_overlay(lower, upper, work, target, &mounts->mounts[i + 1], err)) < 0)
			return lz_err_prefix(err, r, "State Anchor %zu: ", i);
		mounts->n_mounts++;
	}
	/* Volumes and Git Sentry's files: the objects the HC checked, bound
	 * where runsc looks; they end with this namespace. */
	for (size_t i = 0; i < p->n_volumes; i++) {
		const struct lz_rs_volume *v = &p->volumes[i];
		_cleanup_close_ int source = -EBADF, target = -EBADF;
		if ((r = lz_rsplan_reopen(v->source, v->source_fd, &source, err)) < 0 ||
		    (r = lz_rsplan_reopen(v->target, v->target_fd, &target, err)) < 0 ||
		    (r = lz_mountns_bind_tree(source, target, v->read_only, err)) < 0)
			return v->git_sentry ? lz_err_prefix(err, r, "Git Sentry: ")
					     : lz_err_prefix(err, r, "volume %zu: ", i);
	}
	return 0;
}

static int unmount_all(const struct lz_rs_plan *p, const struct lz_rs_msg *mounts,
		       struct lz_err *err)
{
	int first = 0;
	for (size_t i = mounts->n_mounts; i-- > 1;) {
		int r = lz_mountns_unmount_exact(p->anchors[i - 1].target, &mounts->mounts[i], err);
		if (r < 0 && first == 0)
			first = r;
	}
	if (mounts->n_mounts > 0) {
		int r = lz_mountns_unmount_exact(p->root_target, &mounts->mounts[0], err);
		if (r < 0 && first == 0)
			first = r;
	}
	return first;
}

/* Stops the sandbox: the init exits 0 on SIGTERM, and runsc run with it.
 * Anything else means the sandbox was lost before the stop reached it
 * (a lost gofer ends the guest, and with it the session that led the HC
 * to stop, before runsc run ends): the stop reports that, not a clean end. */
static int stop_runsc(const struct lz_rs_plan *p, struct lz_broker_child *runsc, struct lz_err *err)
{
	char out[256];
	struct lz_err kerr = { 0, "" }, ignored;
	int status = 0, r;
	if (runsc->pidfd < 0)
		return 0;
	struct pollfd ended = { .fd = runsc->pidfd, .events = POLLIN };
	if (poll(&ended, 1, 0) > 0) {
		(void)lz_broker_wait(runsc, 0, &status, &ignored);
		return lz_err_set(err, EIO, "the sandbox ended on its own (runsc run exited with status %d before the "
					    "stop); runsc's log is in hc.log", status);
	}
	int kr = runsc_query(p, "kill", "TERM", out, sizeof(out), &kerr);
	r = lz_broker_wait(runsc, LZ_RS_STOP_TIMEOUT_MS, &status, &ignored);
	if (r == -ETIMEDOUT)
		return lz_err_set(err, ETIMEDOUT, "the sandbox did not stop within %d ms; killed",
				  LZ_RS_STOP_TIMEOUT_MS);
	if (kr < 0)
		return lz_err_set(err, EIO, "the sandbox ended on its own (%s; runsc run exited with status %d); "
					    "runsc's log is in hc.log", kerr.msg, status);
	if (status != 0)
		return lz_err_set(err, EIO, "the sandbox did not stop cleanly (runsc run exited with status %d); "
					    "runsc's log is in hc.log", status);
	return 0;
}

/* ---- the enforcement network namespace (spec 3.7) ------------------------ */

static int link_up(const char *name, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	int r = lz_rtnl_open(&nl, name, err);
	if (r < 0)
		return r;
	if ((r = lz_rtnl_link_up(&nl, name)) < 0)
		return lz_err_set(err, -r, "bring %s up: %s", name, strerror(-r));
	return 0;
}

static int net_prepare(struct lz_err *err)
{
	/* Fact 3: runsc refuses a network "in the root namespace" when it
	 * finds /proc/sys/net/core/rmem_default; this namespace is not one. */
	if (mount("tmpfs", "/proc/sys/net/core", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=4k,mode=0555") < 0)
		return lz_err_set(err, errno, "network shim: %s", strerror(errno));
	int r = link_up("lo", err);
	if (r < 0)
		return r;
	/* Before the helper and canaries exist (spec 3.7). */
	/* The fault leaves IPv6 on, and the RS's own checks blind to it, so
	 * only the init's observation can catch it. */
	if (lz_test_fault("ipv6-on"))
		return 0;
	r = lz_netroutes_disable_ipv6(err);
	return r < 0 ? r : 0;
}

/* gVisor prefers a subnet of its own interfaces (a loopback address's
 * prefix) to any route, whatever the lengths: a deny written as the address
 * 10.0.0.1/8 would swallow an allowed 10.250.0.0/24. So each deny is split
 * around every route-kind prefix strictly inside it, and only the remaining
 * pieces become loopback addresses; longest-prefix semantics are kept. */
static int split_deny(struct lz_prefix d, const struct lz_netroutes_entry *e, size_t n,
		      struct lz_netroutes_entry *out, size_t *n_out, size_t cap, enum lz_netroutes_kind kind)
{
	bool hole = false;
	for (size_t i = 0; i < n; i++) {
		if (e[i].kind == LZ_NETROUTES_DENY || e[i].kind == LZ_NETROUTES_CANARY_DENY)
			continue;
		/* A piece split down to an allowed prefix is that route's. (An
		 * original deny never equals an allow: the policy resolves such
		 * a conflict to deny.) Shorter routes lose to the deny anyway. */
		if (lz_prefix_equal(e[i].prefix, d))
			return 0;
		if (e[i].prefix.len > d.len && lz_prefix_contains(d, e[i].prefix))
			hole = true;
	}
	if (!hole) {
		if (*n_out == cap)
			return -E2BIG;
		out[(*n_out)++] = (struct lz_netroutes_entry){ d, kind };
		return 0;
	}
	struct lz_prefix lo = { d.addr, (uint8_t)(d.len + 1) };
	struct lz_prefix hi = { d.addr | (1u << (31 - d.len)), (uint8_t)(d.len + 1) };
	int r = split_deny(lo, e, n, out, n_out, cap, kind);
	return r < 0 ? r : split_deny(hi, e, n, out, n_out, cap, kind);
}

/* Waits until slirp4netns's tap0 is in this namespace (configured: its
 * default route too; a lookup sends no packet). slirp4netns joins the
 * namespace of PID 1 (the RS) when it gets to it: until its tap0 is here
 * the RS must not step into another namespace, or the helper follows it
 * there (seen under load: tap0 configured in the egress link's peer). */
static int wait_helper(int helper_pidfd, bool configured, struct lz_err *err)
{
	int64_t deadline = lz_now_ms() + LZ_RS_TAP_TIMEOUT_MS;
	/* Woken by each link and route change, so the RS goes on as soon as
	 * tap0 is there; the short timeout only bounds a lost wakeup. */
	_cleanup_close_ int changes = lz_rtnl_subscribe(RTMGRP_LINK | RTMGRP_IPV4_ROUTE);
	if (changes < 0)
		return lz_err_set(err, -changes, "watch for slirp4netns's tap0: %s", strerror(-changes));
	for (;;) {
		struct lz_kroute gw;
		struct lz_err ignored;
		if (configured ? lz_netroutes_lookup(0xc0000201u /* 192.0.2.1 */, &gw, &ignored) == 0 &&
					 strcmp(gw.dev, "tap0") == 0 && gw.gateway == LZ_NET_GATEWAY
			       : if_nametoindex("tap0") != 0)
			return 0;
		struct pollfd p[2] = { { .fd = helper_pidfd, .events = POLLIN }, { .fd = changes, .events = POLLIN } };
		int left = lz_remaining_ms(deadline);
		if (poll(p, 2, left < 20 ? left : 20) < 0 && errno != EINTR)
			return lz_err_set(err, errno, "watch for slirp4netns's tap0: poll: %s", strerror(errno));
		if (p[0].revents)
			return lz_err_set(err, EIO, "slirp4netns exited before %s tap0 (its log follows in hc.log)",
					  configured ? "configuring" : "creating");
		if (lz_remaining_ms(deadline) == 0)
			return lz_err_set(err, ETIMEDOUT, "slirp4netns did not %s tap0",
					  configured ? "configure" : "create");
		(void)lz_rtnl_drain(changes, NULL, NULL);
	}
}

/* Waits for slirp4netns's tap0 (the gateway reachable through it), then
 * installs exactly the derived policy and compares what the kernel holds. */
static int net_policy(const struct lz_rs_plan *p, int helper_pidfd, struct lz_err *err)
{
	struct lz_netpolicy *pol = malloc(sizeof(*pol));
	struct lz_netroutes_entry *e = NULL;
	struct lz_kroute *obs = NULL;
	size_t n_obs = 0, n = 0;
	int r;
	if (pol == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if ((r = lz_netpolicy_from_memfd(p->policy_fd, p->policy_digest, pol, err)) < 0)
		goto out;
	/* slirp4netns --configure adds the default route last: until a lookup
	 * takes it, it may still be adding it. */
	if ((r = wait_helper(helper_pidfd, true, err)) < 0)
		goto out;
	/* slirp4netns --configure adds its own default route; the policy
	 * decides that one like every other. */
	if ((r = lz_netroutes_observe(&obs, &n_obs, err)) < 0)
		goto out;
	for (size_t i = 0; i < n_obs; i++)
		if (obs[i].dst.len == 0 && obs[i].table == RT_TABLE_MAIN &&
		    (r = lz_netroutes_delete(&obs[i], err)) < 0)
			goto out;
	free(obs);
	obs = NULL;
	e = calloc(pol->n_routes + 1, sizeof(*e));
	if (e == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < pol->n_routes; i++) {
		enum lz_netroutes_kind kind = (enum lz_netroutes_kind)pol->routes[i].kind;
		/* The fault opens the whole canary network on-link. */
		if (kind == LZ_NETROUTES_CANARY_DENY && lz_test_fault("canary-open"))
			kind = LZ_NETROUTES_CANARY_ALLOW;
		e[n++] = (struct lz_netroutes_entry){ pol->routes[i].prefix, kind };
	}
	/* With a name policy the proxy is the one way out (egress.h). */
	if (lz_netpolicy_direct_default(pol))
		e[n++] = (struct lz_netroutes_entry){ { 0, 0 }, LZ_NETROUTES_ALLOW };
	/* Allows and helpers first, then the deny pieces. */
	struct lz_netroutes_entry *split = calloc(LZ_NETROUTES_MAX, sizeof(*split));
	size_t n_split = 0;
	if (split == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (e[i].kind != LZ_NETROUTES_DENY && e[i].kind != LZ_NETROUTES_CANARY_DENY)
			split[n_split++] = e[i];
	for (size_t i = 0; i < n && r >= 0; i++)
		if (e[i].kind == LZ_NETROUTES_DENY || e[i].kind == LZ_NETROUTES_CANARY_DENY)
			r = split_deny(e[i].prefix, e, n, split, &n_split, LZ_NETROUTES_MAX, e[i].kind);
	if (r < 0) {
		free(split);
		lz_err_set(err, E2BIG, "the policy splits into more than %u entries", LZ_NETROUTES_MAX);
		goto out;
	}
	free(e);
	e = split;
	n = n_split;
	/* Denies as loopback addresses: the form runsc imports (netroutes.h). */
	if ((r = lz_netroutes_install_as(e, n, "tap0", LZ_NET_GATEWAY, LZ_NETROUTES_DENY_AS_ADDRESS,
					 err)) < 0 ||
	    (r = lz_netroutes_observe(&obs, &n_obs, err)) < 0 ||
	    (r = lz_netroutes_match_as(obs, n_obs, e, n, "tap0", LZ_NET_GATEWAY,
				       LZ_NETROUTES_DENY_AS_ADDRESS, err)) < 0 ||
	    (r = lz_netroutes_check_unrouted_denies(e, n, err)) < 0)
		goto out;
	bool clean = false;
	if (lz_test_fault("ipv6-on"))
		clean = true;
	else if ((r = lz_netroutes_ipv6_clean(&clean, err)) < 0)
		goto out;
	if (!clean)
		r = lz_err_set(err, EPROTO, "a non-loopback IPv6 address or route exists");
out:
	if (r < 0)
		lz_err_prefix(err, r, "network policy: ");
	free(obs);
	free(e);
	free(pol);
	return r;
}

/* The init's record (one length byte, then the encoding) from its standard
 * output; only the init's fields are taken. */
static int read_init_report(int fd, struct lz_netattest *att, struct lz_err *err)
{
	uint8_t buf[1 + LZ_NETATTEST_ENCODED_MAX];
	size_t got = 0, want = 1;
	int64_t deadline = lz_now_ms() + LZ_RS_INIT_REPORT_TIMEOUT_MS;
	while (got < want) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int left = lz_remaining_ms(deadline);
		if (left == 0)
			return lz_err_set(err, ETIMEDOUT, "the sandbox init did not report its network "
							  "observations within %d s", LZ_RS_INIT_REPORT_TIMEOUT_MS / 1000);
		int pr = poll(&pf, 1, left);
		if (pr < 0 && errno != EINTR)
			return lz_err_set(err, errno, "poll: %s", strerror(errno));
		if (pr <= 0)
			continue;
		ssize_t n = read(fd, buf + got, want - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return lz_err_set(err, EPIPE, "the sandbox init ended its report early");
		got += (size_t)n;
		if (got == 1 && (want = 1 + (size_t)buf[0]) > sizeof(buf))
			return lz_err_set(err, EBADMSG, "the sandbox init's report is too long");
	}
	struct lz_netattest in;
	if (lz_netattest_decode(buf + 1, got - 1, &in) < 0)
		return lz_err_set(err, EBADMSG, "the sandbox init's report does not decode");
	att->tap0_present = in.tap0_present;
	att->tap0_ifindex = in.tap0_ifindex;
	att->allowed_answered = in.allowed_answered;
	memcpy(att->allowed_echo, in.allowed_echo, sizeof(att->allowed_echo));
	att->denied_canary_unreachable = in.denied_canary_unreachable;
	att->ipv6_absent = in.ipv6_absent;
	att->netadmin_caps_empty = in.netadmin_caps_empty;
	att->route_mutation_refused = in.route_mutation_refused;
	return 0;
}

/* Spec 3.7 "Authority drop": network administration leaves every set,
 * bounding set included, so nothing this process runs can regain it. Then
 * observed: the sets read back without it and a link change is refused. */
static bool drop_netadmin(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	uint32_t bit = CAP_TO_MASK(CAP_NET_ADMIN);
	size_t i = CAP_TO_INDEX(CAP_NET_ADMIN);
	if (lz_test_fault("keep-netadmin"))
		return false;
	if (prctl(PR_CAPBSET_DROP, CAP_NET_ADMIN, 0, 0, 0) < 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 || syscall(SYS_capget, &h, d) < 0)
		return false;
	d[i].effective &= ~bit;
	d[i].permitted &= ~bit;
	d[i].inheritable &= ~bit;
	if (syscall(SYS_capset, &h, d) < 0 || syscall(SYS_capget, &h, d) < 0)
		return false;
	if (((d[i].effective | d[i].permitted | d[i].inheritable) & bit) ||
	    prctl(PR_CAPBSET_READ, CAP_NET_ADMIN, 0, 0, 0) != 0)
		return false;
	struct lz_err ignored;
	return link_up("lo", &ignored) == -EPERM;
}

/* Cleanup, its observation and the authority drop (spec 3.7 table). */
static void net_finish(const struct lz_rs_plan *p, struct lz_canary *canary, int *link_release,
		       struct lz_netattest *att)
{
	struct lz_err ignored, why = { 0, "" };
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], answer[LZ_CANARY_CHALLENGE_LEN];
	bool clean = false;
	/* Removed means unregistered: the kernel's release of the link (an
	 * RCU barrier) finishes in a child while the launch goes on. */
	att->veth_removed = lz_canary_remove(canary, link_release, &why) == 0;
	if (!att->veth_removed) /* the HC names the predicate; the log says why */
		dprintf(p->log_fd, "lazaret: %s\n", why.msg);
	/* Unreachable: no route leads to it except into lo, and a probe gets
	 * no answer (a lookup or probe that failed for want of descriptors or
	 * memory proves neither). A route through another link fails the
	 * predicate without a probe: through tap0 it would leave by
	 * slirp4netns. (runsc has taken tap0's address and routes by now:
	 * measured ENETUNREACH.) */
	struct lz_kroute rt;
	int lr = lz_netroutes_lookup(LZ_NET_CANARY_ALLOWED, &rt, &ignored);
	att->allowed_canary_unreachable_after =
		(lr == -ENETUNREACH || lr == -EHOSTUNREACH || (lr == 0 && strcmp(rt.dev, "lo") == 0)) &&
		getrandom(challenge, sizeof(challenge), 0) == (ssize_t)sizeof(challenge) &&
		lz_canary_no_answer(lz_canary_probe(LZ_NET_CANARY_ALLOWED, NULL, challenge, answer, LZ_CANARY_PROBE_MS));
	att->tap0_present_after = if_nametoindex("tap0") != 0;
	att->ipv6_unchanged_after = lz_test_fault("ipv6-on") || (lz_netroutes_ipv6_clean(&clean, &ignored) == 0 && clean);
	att->rs_netadmin_dropped = drop_netadmin();
}

/* The transient layer's files belong to namespace IDs: only the RS (their
 * namespace root) can remove them. */
static void discard_transient(const struct lz_rs_plan *p)
{
	struct lz_err ignored;
	const char *names[] = { "root-upper", "root-work" };
	for (size_t i = 0; i < 2; i++) {
		char path[4200];
		snprintf(path, sizeof(path), "%s", i == 0 ? p->root_upper : p->root_work);
		char *slash = strrchr(path, '/');
		if (slash == NULL)
			continue;
		*slash = '\0';
		int dir = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dir >= 0) {
			(void)lz_tree_remove(dir, names[i], &ignored);
			close(dir);
		}
	}
}

/* ---- the steps ------------------------------------------------------------ */

struct lz_rs {
	const struct lz_rs_plan *p;
	enum lz_rs_step step;
	struct lz_rs_msg mounts; /* what was mounted, for the exact unmount */
	struct lz_broker_child runsc, helper;
	struct lz_rsrouter router;
	struct lz_canary canary;
	/* The child finishing the canary veth's deletion after readiness
	 * (peerlink.h), until it is reaped. */
	int link_release;
	struct lz_egress egress;
	struct lz_netattest att;
	int report[2]; /* the init's standard output */
	/* The confined helpers' log (the router's standard error, the egress
	 * proxy's log): a pipe, non-blocking both ways (a full one drops a
	 * line rather than stall a helper), relayed to the RS's standard
	 * error, hc.log, through log_relay. A helper holds no descriptor of
	 * a host file whose mode, owner or times it could change
	 * (docs/threat-model.md). */
	int helper_log[2];
	struct lz_logrelay log_relay;
	struct lz_memwatch memwatch; /* from await_running on */
	char end_reason[LZ_ERR_MSG_MAX]; /* why serving ended, when the RS ended it */
	bool hc_alive;
	bool released; /* stop or abort ran */
	/* What each step took (us), by the step it completes, for READY's
	 * text and the HC's log (docs/performance.md). */
	int64_t step_began_us;
	int64_t step_us[LZ_RS_STEP_READY + 1];
};

/* The RS is forked from the HC: it keeps only the descriptors of its plan,
 * so it holds neither the Domain lock, nor the Domain Store, nor the HC's
 * end of the control socket (whose EOF is the HC-loss signal). Among them
 * are runsc's and slirp4netns's, which it executes (rsplan.h), and the
 * broker's report pipe, which its failure goes back through. */
static int keep_only_plan(const struct lz_rs_plan *p)
{
	int keep[21 + 4 * LZ_RS_MAX_ANCHORS + 2 * (LZ_RS_MAX_VOLUMES + LZ_GITSENTRY_MOUNTS_MAX)];
	size_t n = lz_rsplan_fds(p, keep, LZ_ARRAY_SIZE(keep) - 1);
	keep[n++] = lz_broker_report_fd();
	return lz_fds_keep_only(keep, n);
}

/* The dentry cache was sized for the hard descriptor limit (rsplan.c):
 * the RS, and runsc and the router after it, run with it. Only they: the
 * coordinator's other children (a host command) keep the developer's. */
static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int lz_rs_new(const struct lz_rs_plan *plan, lz_rs **ret, struct lz_err *err)
{
	int kept = keep_only_plan(plan);
	if (kept < 0)
		return lz_err_set(err, -kept, "standard streams to /dev/null: %s", strerror(-kept));
	raise_nofile();
	lz_rs *rs = calloc(1, sizeof(*rs));
	if (rs == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	rs->p = plan;
	rs->runsc = rs->helper = (struct lz_broker_child)LZ_BROKER_CHILD_INIT;
	rs->memwatch = (struct lz_memwatch)LZ_MEMWATCH_INIT;
	rs->router = (struct lz_rsrouter)LZ_RSROUTER_INIT;
	rs->canary = LZ_CANARY_INIT;
	rs->egress = LZ_EGRESS_INIT;
	rs->report[0] = rs->report[1] = rs->link_release = -EBADF;
	if (pipe2(rs->helper_log, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(rs);
		return lz_err_set(err, errno, "the helpers' log: %s", strerror(errno));
	}
	lz_logrelay_init(&rs->log_relay, STDERR_FILENO, LZ_RS_HELPER_LOG_MAX, "helper| ", "the helpers");
	rs->hc_alive = true;
	msg_init(&rs->mounts, plan, LZ_RS_MOUNTS);
	*ret = rs;
	return 0;
}

void lz_rs_free(lz_rs *rs)
{
	if (rs == NULL)
		return;
	lz_broker_kill(&rs->runsc);
	lz_broker_kill(&rs->helper);
	lz_broker_kill(&rs->router.child);
	lz_egress_stop(&rs->egress);
	lz_kill_reap(&rs->link_release);
	lz_close_fdp(&rs->helper_log[0]);
	lz_close_fdp(&rs->helper_log[1]);
	lz_close_fdp(&rs->report[0]);
	lz_close_fdp(&rs->report[1]);
	free(rs);
}

enum lz_rs_step lz_rs_reached(const lz_rs *rs)
{
	return rs->step;
}

static const char *const step_names[] = {
	[LZ_RS_STEP_NONE] = "start",	     [LZ_RS_STEP_MOUNTED] = "mount",
	[LZ_RS_STEP_ROUTER] = "start_router",	     [LZ_RS_STEP_EGRESS_STARTED] = "start_egress",
	[LZ_RS_STEP_HELPER] = "start_helper",	     [LZ_RS_STEP_CANARY_LIVE] = "prove_canary",
	[LZ_RS_STEP_EGRESS_LIVE] = "attach_egress",
	[LZ_RS_STEP_POLICY] = "install_policy",    [LZ_RS_STEP_ROUTER_ATTACHED] = "attach_router",
	[LZ_RS_STEP_RUNSC] = "start_runsc",
	[LZ_RS_STEP_RUNNING] = "await_running",    [LZ_RS_STEP_INIT_REPORTED] = "read_init_report",
	[LZ_RS_STEP_NET_FINISHED] = "finish_network", [LZ_RS_STEP_READY] = "report_ready",
};

const char *lz_rs_step_name(enum lz_rs_step step)
{
	return (size_t)step < LZ_ARRAY_SIZE(step_names) && step_names[step] ? step_names[step] : "unknown";
}

/* What the helpers logged, to the RS's standard error (hc.log): each line
 * made harmless, at most LZ_RS_HELPER_LOG_MAX bytes a generation (a
 * helper the sandbox subverted keeps no limit of its own), and at most a
 * pipe's worth a call, so that a helper writing on and on cannot keep the
 * RS from its control socket and its children. last: the helpers are
 * gone. */
static void relay_helper_log(lz_rs *rs, bool last)
{
	(void)lz_logrelay_pump(&rs->log_relay, rs->helper_log[0], 64 * 1024);
	if (last)
		lz_logrelay_finish(&rs->log_relay);
}

/* The one order: a step runs only right after the one before it
 * (want_done), which ends now. */
static int enter(lz_rs *rs, enum lz_rs_step want_done, const char *step, struct lz_err *err)
{
	if (rs->released || rs->step != want_done)
		return lz_err_set(err, EPROTO, "supervisor step %s out of order (after %s%s)", step,
				  step_names[rs->step], rs->released ? ", released" : "");
	relay_helper_log(rs, false); /* the router's first lines, before serve */
	int64_t now = lz_now_us();
	if (want_done != LZ_RS_STEP_NONE)
		rs->step_us[want_done] = now - rs->step_began_us;
	rs->step_began_us = now;
	return 0;
}

/* "mount 4.1, start_router 12.0, ...": every step up to finish_network,
 * in ms; cut short rather than overrun (the text is informational). */
static void format_steps(const lz_rs *rs, char *buf, size_t size)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int s = LZ_RS_STEP_MOUNTED; s <= LZ_RS_STEP_NET_FINISHED && off < size; s++) {
		int n = snprintf(buf + off, size - off, "%s%s %.1f", off ? ", " : "", step_names[s],
				 (double)rs->step_us[s] / 1000.0);
		if (n < 0 || (size_t)n >= size - off) {
			buf[off] = '\0';
			return;
		}
		off += (size_t)n;
	}
}

int lz_rs_mount(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_NONE, "mount", err);
	if (r < 0 || (r = mount_all(rs->p, &rs->mounts, err)) < 0)
		return r;
	if ((r = lz_rs_send(rs->p->control_fd, &rs->mounts)) < 0)
		return lz_err_set(err, -r, "report mounts: %s", strerror(-r));
	rs->step = LZ_RS_STEP_MOUNTED;
	return 0;
}

int lz_rs_start_router(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_MOUNTED, "start_router", err);
	if (r < 0 || (r = lz_rsrouter_start(rs->p, rs->helper_log[1], &rs->router, err)) < 0)
		return r;
	rs->step = LZ_RS_STEP_ROUTER;
	return 0;
}

/* Egress by name (egress.h): forked here, while the RS is still in the
 * host's network namespace, where the proxy's outbound sockets belong. */
int lz_rs_start_egress(lz_rs *rs, struct lz_err *err)
{
	const struct lz_rs_plan *p = rs->p;
	int r = enter(rs, LZ_RS_STEP_ROUTER, "start_egress", err);
	if (r < 0)
		return r;
	if (p->egress) {
		const struct lz_egress_params prm = { .policy_fd = p->policy_fd, .policy_digest = p->policy_digest,
						      .key = p->canary_key, .generation = p->generation,
						      .log_fd = rs->helper_log[1], .stats_fd = p->egress_stats_fd,
						      .slots_fd = p->egress_slots_fd };
		if ((r = lz_egress_start(&prm, &rs->egress, err)) < 0)
			return r;
	}
	rs->step = LZ_RS_STEP_EGRESS_STARTED;
	return 0;
}

int lz_rs_start_helper(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_EGRESS_STARTED, "start_helper", err);
	if (r < 0 || (r = start_helper(rs->p, &rs->canary, &rs->helper, err)) < 0)
		return r;
	/* The fault stands in for a helper slow to start (a loaded host):
	 * held until the RS waits for it. */
	if (lz_test_fault("helper-joins-late"))
		(void)lz_broker_signal(&rs->helper, SIGSTOP);
	rs->step = LZ_RS_STEP_HELPER;
	return 0;
}

int lz_rs_prove_canary(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_HELPER, "prove_canary", err);
	if (r < 0 || (r = lz_canary_prove_live(rs->p->canary_key, rs->p->generation, err)) < 0)
		return r;
	rs->att.canaries_live = true;
	rs->step = LZ_RS_STEP_CANARY_LIVE;
	return 0;
}

/* Test builds only (helper-joins-late): the RS steps into a throwaway
 * namespace for a while, as building the egress link does for moments; a
 * helper still on its way would join that one. */
static int netns_detour(struct lz_err *err)
{
	if (!lz_test_fault("helper-joins-late"))
		return 0;
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0 || unshare(CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "detour namespace: %s", strerror(errno));
	usleep(500 * 1000);
	if (setns(self, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "return from the detour namespace: %s", strerror(errno));
	return 0;
}

/* The proxy's link, before any policy route (the EGRESS route needs the
 * link), and its keyed answer. */
int lz_rs_attach_egress(lz_rs *rs, struct lz_err *err)
{
	const struct lz_rs_plan *p = rs->p;
	int r = enter(rs, LZ_RS_STEP_CANARY_LIVE, "attach_egress", err);
	if (r < 0)
		return r;
	if (lz_test_fault("helper-joins-late"))
		(void)lz_broker_signal(&rs->helper, SIGCONT);
	/* The egress link is built by stepping into other namespaces: the
	 * helper must have joined this one first (wait_helper). */
	if ((r = wait_helper(rs->helper.pidfd, false, err)) < 0 || (r = netns_detour(err)) < 0)
		return r;
	if (p->egress) {
		if ((r = lz_egress_attach(&rs->egress, err)) < 0 ||
		    (r = lz_egress_prove_live(p->canary_key, p->generation, p->policy_digest, err)) < 0)
			return r;
		/* The fault reports the proxy unproved: only the HC's check
		 * can then stop the launch. */
		rs->att.egress_proxy_live = !lz_test_fault("egress-unproved");
	}
	rs->step = LZ_RS_STEP_EGRESS_LIVE;
	return 0;
}

int lz_rs_install_policy(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_EGRESS_LIVE, "install_policy", err);
	if (r < 0 || (r = net_policy(rs->p, rs->helper.pidfd, err)) < 0)
		return r;
	rs->att.policy_matches = true;
	rs->step = LZ_RS_STEP_POLICY;
	return 0;
}

int lz_rs_attach_router(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_POLICY, "attach_router", err);
	if (r < 0 || (r = lz_rsrouter_attach(rs->p, &rs->router, err)) < 0)
		return r;
	rs->step = LZ_RS_STEP_ROUTER_ATTACHED;
	return 0;
}

int lz_rs_start_runsc(lz_rs *rs, struct lz_err *err)
{
	const struct lz_rs_plan *p = rs->p;
	int r = enter(rs, LZ_RS_STEP_ROUTER_ATTACHED, "start_runsc", err);
	if (r < 0)
		return r;
	/* The init's standard output carries its network observations. */
	if (pipe2(rs->report, O_CLOEXEC) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	char root[4200], dcache[32], bundle[4200];
	snprintf(root, sizeof(root), "--root=%s", p->runsc_root);
	snprintf(dcache, sizeof(dcache), "--dcache=%u", p->dcache);
	snprintf(bundle, sizeof(bundle), "--bundle=%s", p->bundle);
	/* C-REFINEMENT facts 1, 10, 12: no cgroups; the root overlay is the
	 * transient layer, so runsc adds none (never in the prepared lower). */
	char *argv[] = { "runsc", root, "--ignore-cgroups", "--network=sandbox", dcache,
			 "--overlay2=none", "run", bundle, (char *)p->container_id, NULL };
	struct lz_spawn exec = { .label = "runsc run", .exe_fd = p->runsc_fd, .argv = argv,
				 .stdin_fd = -1, .stdout_fd = rs->report[1], .stderr_fd = p->log_fd };
	struct staged_ctx sctx = { p };
	struct lz_broker_spec spec = { .label = "runsc run", .join_pidfd = -1, .exec = &exec,
				       .staged = runsc_staged, .ctx = &sctx };
	r = lz_broker_spawn(&spec, &rs->runsc, err);
	lz_close_fdp(&rs->report[1]);
	if (r < 0)
		return r;
	rs->step = LZ_RS_STEP_RUNSC;
	return 0;
}

/* The container runs once its init writes: the sandbox init reports its
 * network observations first thing (core/init/sandbox_init.c). Waiting for
 * that report replaces polling `runsc state`, a Go process start each time
 * (20-30 ms here) plus up to a poll interval of latency (issue 15). */
int lz_rs_await_running(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_RUNSC, "await_running", err);
	if (r < 0)
		return r;
	int64_t deadline = lz_now_ms() + LZ_RS_START_TIMEOUT_MS;
	for (;;) {
		struct pollfd pf[2] = { { .fd = rs->runsc.pidfd, .events = POLLIN },
					{ .fd = rs->report[0], .events = POLLIN } };
		int left = lz_remaining_ms(deadline);
		if (left == 0)
			return lz_err_set(err, ETIMEDOUT, "the sandbox did not start within %d s",
					  LZ_RS_START_TIMEOUT_MS / 1000);
		int pr = poll(pf, 2, left);
		if (pr < 0 && errno != EINTR)
			return lz_err_set(err, errno, "poll: %s", strerror(errno));
		if (pr > 0 && pf[0].revents)
			return lz_err_set(err, EIO, "runsc run exited during start; its log is in hc.log in "
						    "the Domain's runtime directory");
		if (pr > 0 && pf[1].revents)
			break;
	}
	/* The sandbox runs: its memory is watched from now on, or it does not
	 * run (runtime/memwatch.h). */
	const struct lz_memwatch_limits lim = { .own = rs->p->max_memory,
						.host = lz_test_fault("memory-least-host") ? 640ull << 20
											   : rs->p->memory_budget,
						.slots_fd = rs->p->memory_slots_fd };
	if ((r = lz_memwatch_open(lz_pidref_proc(), (pid_t)rs->runsc.id.pid, &lim, &rs->memwatch, err)) < 0 ||
	    (r = lz_memwatch_check(&rs->memwatch, err)) < 0)
		return r;
	if (r == LZ_MEMWATCH_PAST_HOST)
		return lz_err_set(err, ENOMEM, "no memory left for another sandbox: this one holds %llu MiB "
					       "once started, and the sandboxes running hold nearly all of the "
					       "%llu MiB every sandbox together may hold (half of the host's "
					       "memory); end one of them and launch again",
				  (unsigned long long)(rs->memwatch.seen >> 20),
				  (unsigned long long)(rs->memwatch.host >> 20));
	rs->step = LZ_RS_STEP_RUNNING;
	return 0;
}

int lz_rs_read_init_report(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_RUNNING, "read_init_report", err);
	if (r < 0 || (r = read_init_report(rs->report[0], &rs->att, err)) < 0)
		return r;
	/* Nothing more is read from the init's output: its streams go to
	 * /dev/null once it has reported (core/init/sandbox_init.c). */
	lz_close_fdp(&rs->report[0]);
	rs->step = LZ_RS_STEP_INIT_REPORTED;
	return 0;
}

int lz_rs_finish_network(lz_rs *rs, struct lz_err *err)
{
	int r = enter(rs, LZ_RS_STEP_INIT_REPORTED, "finish_network", err);
	if (r < 0)
		return r;
	net_finish(rs->p, &rs->canary, &rs->link_release, &rs->att);
	rs->step = LZ_RS_STEP_NET_FINISHED;
	return 0;
}

int lz_rs_report_ready(lz_rs *rs, struct lz_err *err)
{
	struct lz_rs_msg m;
	size_t alen = 0;
	int r = enter(rs, LZ_RS_STEP_NET_FINISHED, "report_ready", err);
	if (r < 0)
		return r;
	msg_init(&m, rs->p, LZ_RS_READY);
	m.id = rs->runsc.id;
	format_steps(rs, m.text, sizeof(m.text));
	if ((r = lz_netattest_encode(&rs->att, m.attest, sizeof(m.attest), &alen)) < 0)
		return lz_err_set(err, -r, "encode the attestation: %s", strerror(-r));
	m.attest_len = (uint32_t)alen;
	if ((r = lz_rs_send(rs->p->control_fd, &m)) < 0)
		return lz_err_set(err, -r, "report readiness: %s", strerror(-r));
	rs->step = LZ_RS_STEP_READY;
	return 0;
}

/* The canary veth's deleting child has ended (the link was unregistered
 * before readiness; this is the kernel's release of it). */
static void reap_link_release(lz_rs *rs)
{
	siginfo_t info;
	if (lz_reap(rs->link_release, -1, &info) == 0 && (info.si_code != CLD_EXITED || info.si_status != 0))
		dprintf(rs->p->log_fd, "lazaret: deleting the canary veth ended with %s %d\n",
			info.si_code == CLD_EXITED ? "status" : "signal", info.si_status);
	lz_close_fdp(&rs->link_release);
}

/* One look at the sandbox's memory (memwatch.h): 1 when serving ends
 * (*ret says why), 0 to go on. */
static int look_at_memory(lz_rs *rs, enum lz_rs_end *ret, struct lz_err *err)
{
	struct lz_err merr = { 0, "" };
	int m = lz_memwatch_check(&rs->memwatch, &merr);
	if (m == -ESRCH) { /* gone before runsc run said so */
		*ret = LZ_RS_END_RUNSC;
		return 1;
	}
	if (m < 0)
		return lz_err_set(err, -m, "watching the sandbox's memory: %s", merr.msg);
	if (m == LZ_MEMWATCH_WITHIN)
		return 0;
	const struct lz_memwatch *w = &rs->memwatch;
	unsigned long long host = w->host >> 20, share = w->host / w->running >> 20;
	if (m == LZ_MEMWATCH_PAST_OWN)
		snprintf(rs->end_reason, sizeof(rs->end_reason),
			 "the sandbox's memory passed its limit (%llu MiB in use, the limit is %llu MiB: "
			 "runtime.max_memory_mib, or half of the host's memory); it was stopped",
			 (unsigned long long)(w->seen >> 20), (unsigned long long)(w->limit >> 20));
	else if (m == LZ_MEMWATCH_PAST_HOST)
		snprintf(rs->end_reason, sizeof(rs->end_reason),
			 "the sandboxes of this host together passed their memory budget (%llu MiB for all of "
			 "them, half of the host's memory); this one needed %llu MiB, at least its share (%llu "
			 "MiB with %u sandboxes running); it was stopped",
			 host, (unsigned long long)(w->seen >> 20), share, w->running);
	else
		snprintf(rs->end_reason, sizeof(rs->end_reason),
			 "the sandboxes of this host together passed their memory budget (%llu MiB for all of "
			 "them, half of the host's memory); another needed memory within its share, and this "
			 "one held %llu MiB, more than its share (%llu MiB with %u sandboxes running); it was "
			 "stopped",
			 host, (unsigned long long)(lz_memwatch_held(&rs->memwatch) >> 20), share, w->running);
	*ret = LZ_RS_END_MEMORY;
	return 1;
}

int lz_rs_serve(lz_rs *rs, enum lz_rs_end *ret, struct lz_err *err)
{
	const struct lz_rs_plan *p = rs->p;
	int r = enter(rs, LZ_RS_STEP_READY, "serve", err);
	if (r < 0)
		return r;
	int64_t next_look = lz_now_ms();
	for (;;) {
		struct pollfd pf[7] = { { .fd = p->control_fd, .events = POLLIN },
					{ .fd = rs->runsc.pidfd, .events = POLLIN },
					{ .fd = rs->router.child.pidfd, .events = POLLIN },
					{ .fd = rs->helper.pidfd, .events = POLLIN },
					{ .fd = rs->egress.pidfd, .events = POLLIN },
					{ .fd = rs->helper_log[0], .events = POLLIN },
					{ .fd = rs->link_release, .events = POLLIN } };
		if (poll(pf, 7, lz_remaining_ms(next_look)) < 0) {
			if (errno == EINTR)
				continue;
			return lz_err_set(err, errno, "poll: %s", strerror(errno));
		}
		if (pf[5].revents & POLLIN)
			relay_helper_log(rs, false);
		if (pf[6].revents)
			reap_link_release(rs);
		if (pf[1].revents) {
			*ret = LZ_RS_END_RUNSC;
			return 0;
		}
		if (pf[2].revents) {
			*ret = LZ_RS_END_ROUTER;
			return 0;
		}
		/* The network participant is gone: a session joining now would
		 * get a sandbox without its network path (spec 3.7). */
		if (pf[3].revents) {
			*ret = LZ_RS_END_HELPER;
			return 0;
		}
		if (pf[4].revents) {
			*ret = LZ_RS_END_EGRESS;
			return 0;
		}
		if (pf[0].revents) {
			struct lz_rs_msg m;
			r = lz_rs_recv(p->control_fd, &m, 0);
			if (r == -EPIPE || r == -ECONNRESET) {
				rs->hc_alive = false;
				*ret = LZ_RS_END_HC_LOST;
				return 0;
			}
			if (r < 0)
				return lz_err_set(err, -r, "control socket: %s", strerror(-r));
			if (m.type == LZ_HC_STOP && lz_rs_msg_for(&m, p->generation, p->domain_id)) {
				*ret = LZ_RS_END_STOP;
				return 0;
			}
		}
		if (lz_remaining_ms(next_look) == 0) {
			next_look = lz_now_ms() + LZ_MEMWATCH_INTERVAL_MS;
			if ((r = look_at_memory(rs, ret, err)) != 0)
				return r < 0 ? r : 0;
		}
	}
}

const char *lz_rs_end_reason(const lz_rs *rs)
{
	return rs->end_reason;
}

/* Stops what runs and unmounts exactly, in reverse of acquisition. */
static int release(lz_rs *rs, struct lz_err *err)
{
	rs->released = true;
	lz_memwatch_close(&rs->memwatch);
	struct lz_err serr = { 0, "" };
	int sr = stop_runsc(rs->p, &rs->runsc, &serr);
	lz_broker_kill(&rs->runsc);
	lz_broker_kill(&rs->helper);
	lz_egress_stop(&rs->egress);
	lz_close_fdp(&rs->report[0]);
	lz_close_fdp(&rs->report[1]);
	/* Spec 3.5: the workspace mount goes first, and with it the router. */
	struct lz_err rerr = { 0, "" };
	int rr = lz_rsrouter_stop(rs->p, &rs->router, &rerr);
	relay_helper_log(rs, true); /* the helpers' last words */
	int r = unmount_all(rs->p, &rs->mounts, err);
	if (rr < 0 && r >= 0)
		r = lz_err_set(err, -rr, "%s", rerr.msg);
	if (r >= 0)
		discard_transient(rs->p);
	/* The sandbox's loss is what ended the generation: said first. */
	if (sr < 0 && r < 0) {
		char also[LZ_ERR_MSG_MAX];
		snprintf(also, sizeof(also), "%s", err->msg);
		return lz_err_set(err, -sr, "%s; %s", serr.msg, also);
	}
	return sr < 0 ? lz_err_set(err, -sr, "%s", serr.msg) : r;
}

int lz_rs_stop(lz_rs *rs, struct lz_err *err)
{
	struct lz_err uerr = { 0, "" };
	struct lz_rs_msg m;
	if (rs->released)
		return lz_err_set(err, EPROTO, "the supervisor was already released");
	int r = release(rs, &uerr);
	if (rs->hc_alive) {
		msg_init(&m, rs->p, r < 0 ? LZ_RS_FAILED : LZ_RS_STOPPED);
		snprintf(m.text, sizeof(m.text), "%s", uerr.msg);
		(void)lz_rs_send(rs->p->control_fd, &m);
	}
	return r < 0 ? lz_err_set(err, -r, "%s", uerr.msg) : 0;
}

void lz_rs_abort(lz_rs *rs, const char *why)
{
	struct lz_err ignored;
	if (rs->released)
		return;
	lz_canary_abandon(&rs->canary);
	/* FAILED first: the HC then knows why before the mounts go. */
	if (rs->hc_alive)
		report_failure(rs->p, why);
	rs->hc_alive = false;
	(void)release(rs, &ignored);
}
