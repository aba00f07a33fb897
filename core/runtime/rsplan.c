/* The Runtime Supervisor's plan; see rsplan.h. */
#include "runtime/rsplan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/file.h"
#include "fs/gitsentry.h"
#include "net/egressproxy.h"
#include "net/netpolicy.h"
#include "router/ignorewatch.h"
#include "runtime/memwatch.h"
#include "util/cleanup.h"
#include "util/sys.h"

int lz_rsplan_anchor_name(const char *path, char *out, size_t size)
{
	size_t n = 0;
	if (path[0] != '/')
		return -EINVAL; /* "" would be read past its end, "xusr" named as "/usr" */
	for (const char *p = path + 1; *p; p++) {
		/* A leading '.' too: the anchor directory's own entries that
		 * are not anchors (a reset's set-aside trees) start with one. */
		bool esc = *p == '/' || *p == '%' || (n == 0 && *p == '.');
		if (n + (esc ? 3 : 1) >= size || n + (esc ? 3 : 1) > NAME_MAX)
			return -ENAMETOOLONG;
		if (esc)
			n += (size_t)snprintf(out + n, size - n, "%%%02X", (unsigned char)*p);
		else
			out[n++] = *p;
	}
	out[n] = '\0';
	return 0;
}

static void anchor_init(struct lz_rs_anchor *a)
{
	*a = (struct lz_rs_anchor){ .lower_fd = -EBADF, .upper_fd = -EBADF, .work_fd = -EBADF,
				    .target_fd = -EBADF };
}

static void anchor_close(struct lz_rs_anchor *a)
{
	lz_close_fdp(&a->lower_fd);
	lz_close_fdp(&a->upper_fd);
	lz_close_fdp(&a->work_fd);
	lz_close_fdp(&a->target_fd);
}

/* The plan's own descriptors but prepared_fd (which free leaves to the
 * prepared image's holder); an initializer for int * or const int *. */
#define PLAN_OWN_FDS(p)                                                                                    \
	{ &(p)->control_fd,	  &(p)->log_fd,		   &(p)->root_target_fd, &(p)->root_upper_fd,          \
	  &(p)->root_work_fd,	  &(p)->policy_fd,	   &(p)->slirp_log_fd,	 &(p)->router_target_fd,       \
	  &(p)->router_program_fd, &(p)->host_ws_fd,	   &(p)->ignored_fd,	 &(p)->egress_stats_fd,        \
	  &(p)->egress_slots_fd,  &(p)->watch_slots_fd,   &(p)->memory_slots_fd, &(p)->runsc_fd,        \
	  &(p)->slirp_fd }

void lz_rsplan_free(struct lz_rs_plan *p)
{
	if (p == NULL)
		return;
	int *fds[] = PLAN_OWN_FDS(p);
	for (size_t i = 0; i < LZ_ARRAY_SIZE(fds); i++)
		lz_close_fdp(fds[i]);
	for (size_t i = 0; i < p->n_anchors; i++)
		anchor_close(&p->anchors[i]);
	for (size_t i = 0; i < p->n_volumes; i++) {
		lz_close_fdp(&p->volumes[i].source_fd);
		lz_close_fdp(&p->volumes[i].target_fd);
	}
	free(p->volumes);
	lz_gitsentry_free(p->git, p->n_git);
	free(p);
}

static void rsplan_freep(struct lz_rs_plan **p)
{
	lz_rsplan_free(*p);
}

size_t lz_rsplan_fds(const struct lz_rs_plan *p, int *fds, size_t cap)
{
	size_t n = 0;
	const int *own[] = PLAN_OWN_FDS(p);
	if (p->prepared_fd >= 0 && n < cap)
		fds[n++] = p->prepared_fd;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(own) && n < cap; i++)
		if (*own[i] >= 0)
			fds[n++] = *own[i];
	for (size_t i = 0; i < p->n_anchors; i++) {
		const struct lz_rs_anchor *a = &p->anchors[i];
		const int one[] = { a->lower_fd, a->upper_fd, a->work_fd, a->target_fd };
		for (size_t j = 0; j < LZ_ARRAY_SIZE(one) && n < cap; j++)
			fds[n++] = one[j];
	}
	for (size_t i = 0; i < p->n_volumes && n + 2 <= cap; i++) {
		fds[n++] = p->volumes[i].source_fd;
		fds[n++] = p->volumes[i].target_fd;
	}
	return n;
}

static int label(char *out, size_t size, const char *a, const char *b, struct lz_err *err)
{
	if ((size_t)snprintf(out, size, "%s%s", a, b) >= size)
		return lz_err_set(err, ENAMETOOLONG, "path too long: %s%s", a, b);
	return 0;
}

/* One State Anchor: its mount point, its lower in the prepared tree, its
 * upper and work directories in the Domain Root. */
static int plan_anchor(const struct lz_rsplan_input *in, size_t i, struct lz_rs_anchor *a,
		       struct lz_err *err)
{
	const char *dir = lz_config_selected(in->cfg)->persistent_dirs[i];
	const struct lz_path *domain_root = lz_config_storage_domain(in->cfg);
	struct lz_path anchors = LZ_PATH_INIT, one = LZ_PATH_INIT;
	char name[NAME_MAX + 1], idx[24];
	struct stat st;
	int r;
	snprintf(idx, sizeof(idx), "%zu", i);
	if ((r = lz_dir_ensure(in->gen->anchor, idx, 0755, &a->target_fd, err)) < 0)
		return r;
	char rel[32];
	snprintf(rel, sizeof(rel), "anchor/%s", idx);
	if (lz_gendir_label(in->gen, rel, a->target, sizeof(a->target)) < 0)
		return lz_err_set(err, ENAMETOOLONG, "runtime directory path too long");
	a->lower_fd = lz_openat2(in->rootfs_fd, dir + 1, O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (a->lower_fd < 0 && errno == ENOENT) {
		a->lower_fd = fcntl(in->gen->empty, F_DUPFD_CLOEXEC, 3);
		r = lz_gendir_label(in->gen, "empty", a->lower, sizeof(a->lower));
	} else {
		char prepared[4200];
		snprintf(prepared, sizeof(prepared), "%s/prepared/%s/rootfs",
			 lz_config_storage_root(in->cfg)->canonical, in->artifact);
		r = label(a->lower, sizeof(a->lower), prepared, dir, err);
	}
	if (a->lower_fd < 0)
		return lz_err_set(err, errno, "persistent directory %s in the image: %s%s", dir, strerror(errno),
				  errno == ELOOP || errno == ENOTDIR ? " (it must be a directory, not a symlink)" : "");
	if (r < 0)
		return lz_err_set(err, ENAMETOOLONG, "path of persistent directory %s too long", dir);
	if (lz_rsplan_anchor_name(dir, name, sizeof(name)) < 0)
		return lz_err_set(err, ENAMETOOLONG, "persistent directory %s: name too long for a State Anchor", dir);
	if (fstat(a->lower_fd, &st) < 0)
		return lz_err_set(err, errno, "stat %s in the image: %s", dir, strerror(errno));
	r = lz_path_owned_child(domain_root, "anchor", true, &anchors, err);
	if (r >= 0)
		r = lz_path_owned_child(&anchors, name, true, &one, err);
	if (r >= 0)
		r = label(a->upper, sizeof(a->upper), one.canonical, "/upper", err);
	if (r >= 0)
		r = label(a->work, sizeof(a->work), one.canonical, "/work", err);
	if (r >= 0)
		/* The upper's root gives the merged directory its owner and
		 * mode: the image's when made, then the sandbox's own (never
		 * reset by the host: a chown inside would make that refuse). */
		r = lz_dir_ensure_made(one.fd, "upper", st.st_mode & 07777, &a->upper_fd, err);
	if (r >= 0)
		r = lz_dir_ensure(one.fd, "work", 0700, &a->work_fd, err);
	lz_path_release(&anchors);
	lz_path_release(&one);
	return r;
}

/* A bind of the object source_fd (labelled source) onto a mount point
 * <gen>/<dir>/<idx>, a directory or an empty file like the source. */
static int plan_bind(const struct lz_rsplan_input *in, int dir_fd, const char *dir, size_t idx,
		     int source_fd, const char *source, mode_t mode, struct lz_rs_volume *v, struct lz_err *err)
{
	char name[24], rel[40];
	snprintf(name, sizeof(name), "%zu", idx);
	snprintf(rel, sizeof(rel), "%s/%s", dir, name);
	if ((v->source_fd = fcntl(source_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return lz_err_set(err, errno, "dup: %s", strerror(errno));
	if (lz_gendir_label(in->gen, rel, v->target, sizeof(v->target)) < 0)
		return lz_err_set(err, ENAMETOOLONG, "runtime directory path too long");
	int r = label(v->source, sizeof(v->source), source, "", err);
	if (r < 0)
		return r;
	if (S_ISDIR(mode))
		return lz_dir_ensure(dir_fd, name, 0755, &v->target_fd, err);
	_cleanup_close_ int made = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (made < 0 || (v->target_fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return lz_err_set(err, errno, "mount point %s: %s", rel, strerror(errno));
	return 0;
}

/* The binds the RS makes: each volume, the configuration's object, onto
 * <gen>/volume/<i>; then each of Git Sentry's files (SR-4), the object the
 * sentry checked, read-only onto <gen>/sentry/<i> (LZ_RS_SENTRY_DIR). */
static int plan_binds(const struct lz_rsplan_input *in, struct lz_rs_plan *plan, struct lz_err *err)
{
	const struct lz_config_profile *p = lz_config_selected(in->cfg);
	const struct lz_path *ws = lz_config_workspace(in->cfg);
	size_t n = p->n_volumes, n_files = 0;
	if (n > LZ_RS_MAX_VOLUMES)
		return lz_err_set(err, E2BIG, "more than %d volumes", LZ_RS_MAX_VOLUMES);
	int r = lz_gitsentry_plan(ws->fd, ws->canonical, &plan->git, &plan->n_git, err);
	if (r < 0)
		return lz_err_prefix(err, r, "Git Sentry: ");
	for (size_t i = 0; i < plan->n_git; i++)
		n_files += plan->git[i].kind == LZ_GITSENTRY_READONLY_FILE;
	if (n + n_files == 0)
		return 0;
	if ((plan->volumes = calloc(n + n_files, sizeof(*plan->volumes))) == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	_cleanup_close_ int volume_dir = -EBADF, sentry_dir = -EBADF;
	if ((n > 0 && (r = lz_dir_ensure(in->gen->dir.fd, "volume", 0755, &volume_dir, err)) < 0) ||
	    (n_files > 0 && (r = lz_dir_ensure(in->gen->dir.fd, LZ_RS_SENTRY_DIR, 0755, &sentry_dir, err)) < 0))
		return r;
	for (size_t i = 0; i < n; i++) {
		const struct lz_path *src = lz_config_volume_source(in->cfg, i);
		struct lz_rs_volume *v = &plan->volumes[i];
		*v = (struct lz_rs_volume){ .source_fd = -EBADF, .target_fd = -EBADF, .read_only = p->volumes[i].read_only };
		plan->n_volumes = i + 1; /* closed by lz_rsplan_free on failure */
		if ((r = plan_bind(in, volume_dir, "volume", i, src->fd, src->canonical, src->mode, v, err)) < 0)
			return r;
	}
	for (size_t i = 0; i < plan->n_git; i++) {
		const struct lz_gitsentry_mount *gm = &plan->git[i];
		if (gm->kind != LZ_GITSENTRY_READONLY_FILE)
			continue;
		struct lz_rs_volume *v = &plan->volumes[plan->n_volumes++];
		*v = (struct lz_rs_volume){ .source_fd = -EBADF, .target_fd = -EBADF, .read_only = true,
					    .git_sentry = true };
		if ((r = plan_bind(in, sentry_dir, LZ_RS_SENTRY_DIR, i, gm->fd, gm->host_path, S_IFREG, v, err)) <
		    0)
			return r;
	}
	return 0;
}

/* A slots file of the Storage Root (proc/lockslots.h): a budget every
 * Domain shares, made empty (0600) and never truncated or written;
 * anything but a file there refuses. */
static int open_storage_slots(const struct lz_rsplan_input *in, const char *name, int *ret, struct lz_err *err)
{
	struct stat st;
	*ret = lz_openat2_create(lz_config_storage_root(in->cfg)->fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600,
				 LZ_RESOLVE_OWNED);
	if (*ret < 0)
		return lz_err_set(err, errno, "open %s in the Storage Root: %s", name, strerror(errno));
	if (fstat(*ret, &st) < 0 || !S_ISREG(st.st_mode))
		return lz_err_set(err, EINVAL, "%s in the Storage Root is not a file (remove it; Lazaret makes it)",
				  name);
	return 0;
}

/* The sandbox's memory limits (runtime/memwatch.h): its own, and the
 * budget every sandbox of the host shares. One alone may not be given more
 * than all together may hold. */
static int plan_memory(const struct lz_rsplan_input *in, struct lz_rs_plan *plan, struct lz_err *err)
{
	uint32_t mib = lz_config_max_memory_mib(in->cfg);
	plan->memory_budget = lz_memwatch_host_budget();
	plan->max_memory = mib ? (uint64_t)mib << 20 : plan->memory_budget;
	if (plan->max_memory > plan->memory_budget)
		return lz_err_set(err, EINVAL, "runtime.max_memory_mib is %u MiB, more than every sandbox of this host "
					       "may hold together (%llu MiB, half of its memory): set it lower",
				  mib, (unsigned long long)(plan->memory_budget >> 20));
	return open_storage_slots(in, LZ_MEMWATCH_SLOTS, &plan->memory_slots_fd, err);
}

/* The developer's inotify budget, as the initial user namespace counts
 * it (ignorewatch.h); unreadable, the watch's own limit. */
static size_t watch_budget(void)
{
	char buf[32] = "";
	_cleanup_close_ int fd = open("/proc/sys/fs/inotify/max_user_watches", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	char *end = NULL;
	unsigned long v = n > 0 ? strtoul(buf, &end, 10) : 0;
	return v > 0 && end != buf ? lz_ignorewatch_budget(v) : LZ_IGNOREWATCH_MAX_DIRS;
}

/* Spec 3.5: the router's mount point in the generation, the canonical
 * workspace and the Domain's Ignored Workspace State (created 0700 on the
 * first launch that isolates; kept across generations, FR-4, DX-2). */
static int plan_router(const struct lz_rsplan_input *in, struct lz_rs_plan *plan, struct lz_err *err)
{
	const struct lz_path *ws = lz_config_workspace(in->cfg);
	struct lz_path ignored = LZ_PATH_INIT;
	int r;
	plan->isolate_ignored = lz_config_selected(in->cfg)->isolate_ignored;
	plan->hide_editor_config = lz_config_selected(in->cfg)->hide_editor_config;
	plan->watch_dirs = watch_budget();
	if ((r = open_storage_slots(in, LZ_IGNOREWATCH_SLOTS, &plan->watch_slots_fd, err)) < 0)
		return r;
	/* With isolation off (FR-9) the router still serves the workspace:
	 * nothing is ignored, but its policy (Git control files, setuid bits,
	 * repositories and editor files made inside) holds all the same. */
	if (in->router_program != NULL &&
	    (r = lz_memfd_sealed("lazaret-router", in->router_program, in->router_program_len, true,
				 &plan->router_program_fd, err)) < 0)
		return lz_err_prefix(err, r, "the workspace router's program: ");
	if ((plan->router_target_fd = fcntl(in->gen->workspace, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    (plan->host_ws_fd = fcntl(ws->fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return lz_err_set(err, errno, "dup: %s", strerror(errno));
	if (lz_gendir_label(in->gen, "workspace", plan->router_target, sizeof(plan->router_target)) < 0 ||
	    (r = label(plan->host_ws, sizeof(plan->host_ws), ws->canonical, "", err)) < 0)
		return lz_err_set(err, ENAMETOOLONG, "workspace path too long");
	if ((r = lz_path_owned_child(lz_config_storage_domain(in->cfg), "ignored", true, &ignored, err)) < 0)
		return lz_err_prefix(err, r, "Ignored Workspace State: ");
	r = label(plan->ignored, sizeof(plan->ignored), ignored.canonical, "", err);
	if (r >= 0)
		plan->ignored_fd = TAKE_FD(ignored.fd);
	lz_path_release(&ignored);
	return r;
}

/* runsc's sentry holds a host descriptor per cached dentry, a second one
 * for a cached file it has read (measured: dcache 10,000 held all 20,000
 * descriptors during `git status` of 20k files, 2,000 held 4,147), and
 * one per open guest file, all under the RLIMIT_NOFILE it inherits from
 * the RS. The RS raises its soft limit to the hard one (supervisor.c)
 * and the dentry cache is kept to a quarter of that: a large workspace is
 * then served, not answered with EMFILE inside the sandbox (issue 11
 * benchmark). */
uint32_t lz_rsplan_dcache_cap(uint64_t nofile)
{
	uint64_t quarter = nofile / 4;
	return quarter < UINT32_MAX ? (uint32_t)quarter : UINT32_MAX;
}

static uint32_t plan_dcache(uint32_t configured)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return configured;
	uint32_t cap = lz_rsplan_dcache_cap(rl.rlim_max);
	return cap < configured ? cap : configured;
}

#define HOST_ADDRS_MAX 256

/* The IPv4 addresses the host holds now, on every interface of the
 * coordinator's (the developer's) network namespace: the policy denies
 * them (a service the host offers on them is host authority). */
static int host_addrs(uint32_t out[HOST_ADDRS_MAX], size_t *ret_n, struct lz_err *err)
{
	struct ifaddrs *all = NULL;
	if (getifaddrs(&all) < 0)
		return lz_err_set(err, errno, "list the host's network addresses");
	size_t n = 0;
	int r = 0;
	for (struct ifaddrs *i = all; i != NULL && r == 0; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (n == HOST_ADDRS_MAX) {
			r = lz_err_set(err, E2BIG,
				       "the host holds more than %d IPv4 addresses; the network policy "
				       "denies each, and cannot hold more",
				       HOST_ADDRS_MAX);
			break;
		}
		struct sockaddr_in sin;
		memcpy(&sin, i->ifa_addr, sizeof(sin));
		out[n++] = ntohl(sin.sin_addr.s_addr);
	}
	freeifaddrs(all);
	*ret_n = n;
	return r;
}

/* Spec 3.7: the policy derived from the trusted configuration and the
 * host's addresses, as canonical bytes in a write-sealed memfd with their
 * digest. */
static int plan_policy(const struct lz_config_profile *p, struct lz_rs_plan *plan, struct lz_err *err)
{
	struct lz_prefix allow[LZ_CONFIG_LIST_MAX], deny[LZ_CONFIG_LIST_MAX];
	uint32_t host[HOST_ADDRS_MAX];
	size_t n_host = 0;
	for (size_t i = 0; i < p->n_allow; i++)
		allow[i] = p->allow[i].prefix;
	for (size_t i = 0; i < p->n_deny; i++)
		deny[i] = p->deny[i].prefix;
	_cleanup_free_ struct lz_netpolicy *pol = malloc(sizeof(*pol));
	_cleanup_free_ uint8_t *bytes = malloc(LZ_NETPOLICY_ENCODED_MAX);
	size_t len = 0;
	int r;
	if (pol == NULL || bytes == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if ((r = host_addrs(host, &n_host, err)) < 0 ||
	    (r = lz_netpolicy_derive(allow, p->n_allow, deny, p->n_deny, host, n_host, pol, err)) < 0 ||
	    (r = lz_netpolicy_set_names(pol, (const char *const *)p->allow_domains, p->n_allow_domains,
					(const char *const *)p->deny_domains, p->n_deny_domains, p->resolvers,
					p->n_resolvers, err)) < 0)
		return r;
	if ((r = lz_netpolicy_encode(pol, bytes, LZ_NETPOLICY_ENCODED_MAX, &len)) < 0)
		return lz_err_set(err, -r, "encode the network policy: %s", strerror(-r));
	if ((r = lz_netpolicy_digest_bytes(bytes, len, plan->policy_digest)) < 0)
		return lz_err_set(err, -r, "digest the network policy: %s", strerror(-r));
	return lz_netpolicy_to_memfd(bytes, len, &plan->policy_fd, err);
}

/* Egress by name: the proxy's refusals go to hc.log (through the RS's
 * relay, supervisor.c) and its counters to the Domain Root's egress.stats, replaced
 * at each launch (state inspect reads it); its connections are slots of
 * the Storage Root's egress.slots, which every Domain's proxy shares. */
static int plan_egress(const struct lz_rsplan_input *in, struct lz_rs_plan *plan, struct lz_err *err)
{
	if (lz_config_selected(in->cfg)->n_allow_domains == 0)
		return 0;
	plan->egress = true;
	plan->egress_stats_fd = lz_openat2_create(lz_config_storage_domain(in->cfg)->fd, LZ_EGRESS_STATS,
						  O_RDWR | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600, LZ_RESOLVE_OWNED);
	if (plan->egress_stats_fd < 0)
		return lz_err_set(err, errno, "create %s in the Domain Root: %s", LZ_EGRESS_STATS, strerror(errno));
	return open_storage_slots(in, LZ_EGRESS_SLOTS, &plan->egress_slots_fd, err);
}

int lz_rsplan_build(const struct lz_rsplan_input *in, struct lz_rs_plan **ret, int *ret_hc_fd,
		    struct lz_err *err)
{
	const struct lz_config_profile *p = lz_config_selected(in->cfg);
	_cleanup_(rsplan_freep) struct lz_rs_plan *plan = calloc(1, sizeof(*plan));
	struct lz_path slirp = LZ_PATH_INIT;
	int sv[2];
	int r;
	if (plan == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	int *fds[] = PLAN_OWN_FDS(plan);
	plan->prepared_fd = -EBADF;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(fds); i++)
		*fds[i] = -EBADF;
	if (p->n_persistent_dirs > LZ_RS_MAX_ANCHORS)
		return lz_err_set(err, E2BIG, "more than %d persistent directories", LZ_RS_MAX_ANCHORS);

	plan->generation = in->generation;
	snprintf(plan->domain_id, sizeof(plan->domain_id), "%s", in->domain_id);
	snprintf(plan->container_id, sizeof(plan->container_id), "%s", in->container_id);
	if ((size_t)snprintf(plan->runsc_path, sizeof(plan->runsc_path), "%s", in->runsc->canonical) >=
	    sizeof(plan->runsc_path))
		return lz_err_set(err, ENAMETOOLONG, "runsc's path is too long");
	if ((plan->runsc_fd = fcntl(in->runsc->fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return lz_err_set(err, errno, "dup: %s", strerror(errno));
	plan->dcache = plan_dcache(lz_config_dcache(in->cfg));
	if ((r = plan_memory(in, plan, err)) < 0)
		return r;
	memcpy(plan->canary_key, in->canary_key, LZ_CANARY_KEY_LEN);
	plan->prepared_fd = in->rootfs_fd;
	char prepared[4200];
	snprintf(prepared, sizeof(prepared), "%s/prepared/%s/rootfs", lz_config_storage_root(in->cfg)->canonical,
		 in->artifact);
	if ((r = label(plan->prepared, sizeof(plan->prepared), prepared, "", err)) < 0)
		return r;
	const struct {
		const char *child;
		int from;
		int *fd;
		char *label;
	} dirs[] = {
		{ "root", in->gen->root, &plan->root_target_fd, plan->root_target },
		{ "root-upper", in->gen->root_upper, &plan->root_upper_fd, plan->root_upper },
		{ "root-work", in->gen->root_work, &plan->root_work_fd, plan->root_work },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++) {
		if ((*dirs[i].fd = fcntl(dirs[i].from, F_DUPFD_CLOEXEC, 3)) < 0)
			return lz_err_set(err, errno, "dup: %s", strerror(errno));
		if (lz_gendir_label(in->gen, dirs[i].child, dirs[i].label, 4096) < 0)
			return lz_err_set(err, ENAMETOOLONG, "runtime directory path too long");
	}
	if (lz_gendir_label(in->gen, "runsc", plan->runsc_root, sizeof(plan->runsc_root)) < 0 ||
	    lz_gendir_label(in->gen, "bundle", plan->bundle, sizeof(plan->bundle)) < 0)
		return lz_err_set(err, ENAMETOOLONG, "runtime directory path too long");
	/* Only the anchors in use are written: the 64 slots are 1 MB, and
	 * each page written is a page fault here (issue 15). */
	for (size_t i = 0; i < p->n_persistent_dirs; i++) {
		anchor_init(&plan->anchors[i]);
		plan->n_anchors = i + 1; /* closed by lz_rsplan_free on failure */
		if ((r = plan_anchor(in, i, &plan->anchors[i], err)) < 0)
			return r;
	}
	plan->n_anchors = p->n_persistent_dirs;
	if ((r = plan_binds(in, plan, err)) < 0 || (r = plan_router(in, plan, err)) < 0)
		return r;
	if ((r = lz_gendir_open_log(in->gen, "runsc.log", &plan->log_fd, err)) < 0 ||
	    (r = plan_policy(p, plan, err)) < 0 || (r = plan_egress(in, plan, err)) < 0)
		return r;
	/* FR-16: slirp4netns from the system directories, named before
	 * anything starts when its package is missing. */
	if ((r = lz_config_host_tool(in->cfg, "slirp4netns", "the connectivity helper", "slirp4netns", &slirp, err)) < 0)
		return r;
	/* The plan owns the descriptor from here (lz_rsplan_free). */
	plan->slirp_fd = TAKE_FD(slirp.fd);
	snprintf(plan->slirp_path, sizeof(plan->slirp_path), "%s", slirp.canonical);
	lz_path_release(&slirp);
	if ((r = lz_gendir_open_log(in->gen, "slirp4netns.log", &plan->slirp_log_fd, err)) < 0)
		return r;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return lz_err_set(err, errno, "socketpair: %s", strerror(errno));
	plan->control_fd = sv[1];
	*ret_hc_fd = sv[0];
	*ret = TAKE_PTR(plan);
	return 0;
}

int lz_rsplan_reopen(const char *label, int inherited, int *ret, struct lz_err *err)
{
	struct stat want, got;
	int fd = open(label, O_PATH | O_NOFOLLOW | O_CLOEXEC); /* the identity below decides */
	if (fd < 0)
		return lz_err_set(err, errno, "reopen '%s': %s", label, strerror(errno));
	if (fstat(inherited, &want) < 0 || fstat(fd, &got) < 0 || want.st_dev != got.st_dev ||
	    want.st_ino != got.st_ino) {
		close(fd);
		return lz_err_set(err, ESTALE, "'%s' changed identity", label);
	}
	*ret = fd;
	return 0;
}
