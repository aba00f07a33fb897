/* The Host Coordinator's mechanisms; see coordinator.h. */
#include "runtime/coordinator.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <termios.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "proc/broker.h"
#include "net/canary.h"
#include "store/catalog.h"
#include "config/domain.h"
#include "store/domainstore.h"
#include "fs/gitsentry.h"
#include "platform/hostprobe.h"
#include "init/sandbox_init_blob.h"
#include "net/netpolicy.h"
#include "runtime/ocispec.h"
#include "image/prepare.h"
#include "runtime/supervisor.h"
#include "fs/tree.h"
#include "proc/userns.h"
#include "util/cleanup.h"
#include "util/sys.h"
#include "session/wire.h"

#define GUEST_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define INIT_IN_SANDBOX "/run/lazaret/init"
#define RESOLV_CONF "nameserver 10.137.54.3\n" /* slirp4netns's synthetic DNS */
#define IDLE_GRACE_MS 30000
#define STOP_TIMEOUT_MS 30000

/* One Client Session. Terminal sessions (spec 3.4) own a PTY master and
 * at most one record in flight each way: an Output not yet accepted by the
 * client stops reading the master (kernel PTY backpressure, no unbounded
 * queue), and an Input not yet written to the master stops reading that
 * client, so one session cannot starve another's control events. */
struct session {
	int client; /* -1: free slot */
	bool greeted;
	bool running;
	bool client_lost;
	struct lz_broker_child exec;
	char id[LZ_DSTORE_ID_HEX_LEN + 1];
	bool tty;
	int master;
	uint8_t out[LZ_WIRE_MAX_DATA];
	size_t out_len;
	uint8_t in[LZ_WIRE_MAX_DATA];
	size_t in_len, in_off;
	int release_stage;  /* 0 none; 1 SIGHUP sent; 2 SIGTERM sent; 3 SIGKILL sent */
	int64_t release_at; /* when the next stage is due */
};

#define RELEASE_GRACE_MS 2000
#define DRAIN_MS 2000

struct lz_hc {
	const lz_config *cfg;
	const struct lz_config_profile *profile;
	const struct lz_path *runtime_domain;
	int lock_fd;
	lz_dstore *store;
	uint64_t gen;
	char gen_name[32];
	struct lz_path gen_dir;
	char artifact[LZ_ARTIFACT_ID_HEX + 1];
	int rootfs_fd;
	bool lease_held;
	struct lz_broker_child rs;
	int control_fd;
	struct lz_rs_msg mounts;
	struct lz_pidref rs_id;
	struct lz_pidref runsc_id;
	struct lz_pidref slirp_id;
	char runsc_path[LZ_HOSTPROBE_PATH_MAX];
	char container_id[80];
	int listen_fd;
	bool ever_served;
	struct session sessions[LZ_HC_MAX_SESSIONS];
	uint8_t domain_id[32];
	uint8_t fingerprint[32];
	/* Spec 3.7: this generation's canary key and the init's challenge. */
	uint8_t canary_key[LZ_CANARY_KEY_LEN];
	uint8_t init_challenge[LZ_CANARY_CHALLENGE_LEN];
};

uint64_t lz_hc_generation(const lz_hc *hc)
{
	return hc->gen;
}

static const char *domain_hex(const lz_hc *hc)
{
	struct lz_config_summary s;
	lz_config_summarize(hc->cfg, &s);
	return s.domain_id;
}

static const char *fingerprint_hex(const lz_hc *hc)
{
	struct lz_config_summary s;
	lz_config_summarize(hc->cfg, &s);
	return s.fingerprint;
}

/* Writes bytes to a new file name beneath dirfd (created with mode). */
static int write_file(int dirfd, const char *name, const void *data, size_t len, unsigned mode,
		      struct lz_err *err)
{
	_cleanup_close_ int fd = lz_openat2_create(dirfd, name, O_WRONLY | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
						   mode, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno, "create %s: %s", name, strerror(errno));
	const char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lz_err_set(err, errno, "write %s: %s", name, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	if (fchmod(fd, mode) < 0)
		return lz_err_set(err, errno, "chmod %s: %s", name, strerror(errno));
	return 0;
}

static int subdir(int dirfd, const char *name, unsigned mode, int *ret, struct lz_err *err)
{
	if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
		return lz_err_set(err, errno, "create %s: %s", name, strerror(errno));
	int fd = lz_openat2(dirfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno, "open %s: %s", name, strerror(errno));
	*ret = fd;
	return 0;
}

/* Generations of an earlier, dead coordinator leave runtime directories;
 * the flock proves no live HC owns them. Their RS is gone with its PID
 * namespace, so their mount points are plain directories. */
static void remove_stale_generations(const lz_hc *hc)
{
	int fd = lz_openat2(hc->runtime_domain->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			    LZ_RESOLVE_OWNED);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return;
	}
	char names[64][32];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL && n < 64)
		if (strncmp(de->d_name, "gen-", 4) == 0 && strlen(de->d_name) < sizeof(names[0])) {
			memcpy(names[n], de->d_name, strlen(de->d_name) + 1);
			n++;
		}
	closedir(d);
	struct lz_idmap map;
	bool have_map = lz_idmap_for_invoking_user(&map, NULL) >= 0;
	for (size_t i = 0; i < n; i++)
		if (lz_tree_remove(hc->runtime_domain->fd, names[i], NULL) < 0 && have_map)
			(void)lz_tree_remove_in_userns(&map, hc->runtime_domain->fd, names[i], NULL);
	(void)unlinkat(hc->runtime_domain->fd, LZ_HC_SOCKET, 0);
}

/* A generation left starting, published or stopping belongs to a lost
 * coordinator (we hold the Domain flock now): it is recorded failed, with
 * its evidence kept for recovery (full recovery is a later issue). */
static void end_lost_generation(lz_hc *hc)
{
	struct lz_dstore_generation *v = NULL;
	size_t n = 0;
	struct lz_err e = { 0, "" };
	if (lz_dstore_generation_list(hc->store, 1, &v, &n, &e) < 0)
		return;
	if (n > 0 && v[0].state != LZ_DSTORE_GEN_STOPPED && v[0].state != LZ_DSTORE_GEN_FAILED) {
		fprintf(stderr, "generation %llu was left by a lost coordinator; recording it failed\n",
			(unsigned long long)v[0].generation);
		(void)lz_dstore_generation_set_state(hc->store, v[0].generation, LZ_DSTORE_GEN_FAILED, &e);
	}
	free(v);
}

/* The HC is a direct existing-process edge (spec 3.3): it records its own
 * current pidfs identity as committed. */
static int record_self(lz_hc *hc, struct lz_err *err)
{
	struct lz_pidref me;
	_cleanup_close_ int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (fd < 0)
		return lz_err_set(err, errno, "pidfd of the Host Coordinator: %s", strerror(errno));
	int r = lz_pidref_from_pidfd(fd, getpid(), &me, err);
	if (r >= 0)
		r = lz_dstore_participant_intent(hc->store, hc->gen, LZ_DSTORE_ROLE_HOST_COORDINATOR, err);
	if (r >= 0)
		r = lz_dstore_participant_enter_process(hc->store, hc->gen, LZ_DSTORE_ROLE_HOST_COORDINATOR,
							&me, err);
	if (r >= 0)
		r = lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_HOST_COORDINATOR, err);
	return r;
}

int lz_hc_open(const lz_config *cfg, lz_hc **ret, struct lz_err *err)
{
	lz_hc *hc = calloc(1, sizeof(*hc));
	int r;
	if (hc == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	hc->cfg = cfg;
	hc->profile = lz_config_selected(cfg);
	hc->runtime_domain = lz_config_runtime_domain(cfg);
	hc->lock_fd = hc->rootfs_fd = hc->control_fd = hc->listen_fd = -EBADF;
	hc->gen_dir = (struct lz_path)LZ_PATH_INIT;
	hc->rs = (struct lz_broker_child)LZ_BROKER_CHILD_INIT;
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
		hc->sessions[i].client = -1;
		hc->sessions[i].master = -1;
		hc->sessions[i].exec = (struct lz_broker_child)LZ_BROKER_CHILD_INIT;
	}
	if (hc->profile == NULL || hc->runtime_domain == NULL) {
		free(hc);
		return lz_err_set(err, EINVAL, "the Host Coordinator needs a resolved profile");
	}
	if ((r = lz_unhex(domain_hex(hc), hc->domain_id, 32)) < 0 ||
	    (r = lz_unhex(fingerprint_hex(hc), hc->fingerprint, 32)) < 0) {
		free(hc);
		return lz_err_set(err, EINVAL, "malformed Domain identity");
	}

	/* Spec 3.3: the Domain flock decides the one coordinator. */
	hc->lock_fd = lz_openat2_create(hc->runtime_domain->fd, LZ_HC_LOCK,
					O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600, LZ_RESOLVE_OWNED);
	if (hc->lock_fd < 0) {
		r = lz_err_set(err, errno, "Domain lock: %s", strerror(errno));
		goto fail;
	}
	if (flock(hc->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK
			    ? lz_err_set(err, EBUSY, "another Host Coordinator holds this Domain")
			    : lz_err_set(err, errno, "Domain lock: %s", strerror(errno));
		goto fail;
	}
	remove_stale_generations(hc);
	if ((r = lz_dstore_open(lz_config_storage_domain(cfg)->fd, &hc->store, err)) < 0)
		goto fail;
	end_lost_generation(hc);
	if ((r = lz_dstore_generation_begin(hc->store, domain_hex(hc), fingerprint_hex(hc), &hc->gen,
					    err)) < 0)
		goto fail;
	if ((r = record_self(hc, err)) < 0)
		goto fail;
	snprintf(hc->gen_name, sizeof(hc->gen_name), "gen-%llu", (unsigned long long)hc->gen);
	if ((r = lz_path_owned_child(hc->runtime_domain, hc->gen_name, true, &hc->gen_dir, err)) < 0)
		goto fail;
	if ((r = lz_hostprobe_tool_locate("runsc", err, &hc->runsc_path)) < 0) {
		lz_err_prefix(err, r, "gVisor's runsc (package runsc from bookworm-backports): ");
		goto fail;
	}
	snprintf(hc->container_id, sizeof(hc->container_id), "lazaret-%.16s-%llu", domain_hex(hc),
		 (unsigned long long)hc->gen);
	*ret = hc;
	return 0;
fail:
	lz_hc_close(hc, false);
	return r;
}

/* ---- prepared lower (spec 3.6 lease acquisition, steps 1-3) ----------------- */

int lz_hc_acquire_lower(lz_hc *hc, struct lz_err *err)
{
	const struct lz_path *storage = lz_config_storage_root(hc->cfg);
	int r;
	if ((r = lz_prepare_lookup(storage, hc->profile->image, hc->artifact, &hc->rootfs_fd, err)) < 0)
		return r;
	/* 1. intent with the intended artifact, 2. catalog lease, 3. held. */
	if ((r = lz_dstore_participant_intent(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER, err)) < 0 ||
	    (r = lz_dstore_participant_set_artifact(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER,
						    hc->artifact, err)) < 0)
		return r;
	if ((r = lz_catalog_lease_acquire(storage->fd, hc->artifact, domain_hex(hc), hc->gen, err)) < 0)
		return r;
	hc->lease_held = true;
	if ((r = lz_dstore_participant_set_lease_held(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER,
						      err)) < 0 ||
	    (r = lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER, err)) < 0)
		return r;
	return 0;
}

/* ---- the Runtime Supervisor ------------------------------------------------ */

/* "/usr/local" -> "usr%2Flocal": one directory name per persistent path. */
static void encode_path(const char *path, char *out, size_t size)
{
	size_t n = 0;
	for (const char *p = path + 1; *p && n + 4 < size; p++) {
		if (*p == '/' || *p == '%')
			n += (size_t)snprintf(out + n, size - n, "%%%02X", (unsigned char)*p);
		else
			out[n++] = *p;
	}
	out[n] = '\0';
}

/* The upper directory's root gives the merged directory its owner and
 * mode, so it mirrors the lower's mode (the owner is namespace root). */
static int anchor_dirs(lz_hc *hc, const char *path, int lower_fd, struct lz_rs_anchor *a,
		       struct lz_err *err)
{
	struct lz_path anchors = LZ_PATH_INIT, one = LZ_PATH_INIT;
	char name[512];
	struct stat st;
	int r;
	encode_path(path, name, sizeof(name));
	r = lz_path_owned_child(lz_config_storage_domain(hc->cfg), "anchor", true, &anchors, err);
	if (r >= 0)
		r = lz_path_owned_child(&anchors, name, true, &one, err);
	if (r >= 0 && fstat(lower_fd, &st) < 0)
		r = lz_err_set(err, errno, "stat %s in the image: %s", path, strerror(errno));
	snprintf(a->upper, sizeof(a->upper), "%s/upper", one.canonical ? one.canonical : "");
	snprintf(a->work, sizeof(a->work), "%s/work", one.canonical ? one.canonical : "");
	if (r >= 0)
		r = subdir(one.fd, "upper", 0700, &a->upper_fd, err);
	if (r >= 0 && fchmodat(one.fd, "upper", st.st_mode & 07777, 0) < 0)
		r = lz_err_set(err, errno, "chmod the State Anchor of %s: %s", path, strerror(errno));
	if (r >= 0)
		r = subdir(one.fd, "work", 0700, &a->work_fd, err);
	lz_path_release(&anchors);
	lz_path_release(&one);
	return r;
}

struct start_ctx {
	lz_hc *hc;
};

/* Spec 3.7: the HC derives the generation's policy from the trusted
 * configuration and hands its canonical bytes to the RS in a write-sealed
 * memfd with their digest. */
static int policy_memfd(lz_hc *hc, int *ret_fd, uint8_t digest[32], struct lz_err *err)
{
	const struct lz_config_profile *p = hc->profile;
	struct lz_prefix allow[LZ_CONFIG_LIST_MAX], deny[LZ_CONFIG_LIST_MAX];
	for (size_t i = 0; i < p->n_allow; i++)
		allow[i] = p->allow[i].prefix;
	for (size_t i = 0; i < p->n_deny; i++)
		deny[i] = p->deny[i].prefix;
	struct lz_netpolicy *pol = malloc(sizeof(*pol));
	uint8_t *bytes = malloc(LZ_NETPOLICY_ENCODED_MAX);
	size_t len = 0;
	int r = pol && bytes ? 0 : lz_err_set(err, ENOMEM, "out of memory");
	if (r >= 0)
		r = lz_netpolicy_derive(allow, p->n_allow, deny, p->n_deny, pol, err);
	if (r >= 0 && (r = lz_netpolicy_encode(pol, bytes, LZ_NETPOLICY_ENCODED_MAX, &len)) < 0)
		lz_err_set(err, -r, "encode the network policy: %s", strerror(-r));
	if (r >= 0 && (r = lz_netpolicy_digest_bytes(bytes, len, digest)) < 0)
		lz_err_set(err, -r, "digest the network policy: %s", strerror(-r));
	if (r >= 0)
		r = lz_netpolicy_to_memfd(bytes, len, ret_fd, err);
	free(bytes);
	free(pol);
	return r;
}

/* FR-16: slirp4netns, from the system directories, and its log; the RS
 * runs it (supervisor.h). Located here so a missing package is named
 * before anything starts. */
static int helper_plan(lz_hc *hc, struct lz_rs_plan *plan, struct lz_err *err)
{
	char tool[LZ_HOSTPROBE_PATH_MAX];
	int r = lz_hostprobe_tool_locate("slirp4netns", err, &tool);
	if (r < 0)
		return lz_err_prefix(err, r, "the connectivity helper (package slirp4netns): ");
	snprintf(plan->slirp_path, sizeof(plan->slirp_path), "%s", tool);
	plan->slirp_log_fd = lz_openat2_create(hc->gen_dir.fd, "slirp4netns.log",
					       O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600, LZ_RESOLVE_OWNED);
	if (plan->slirp_log_fd < 0)
		return lz_err_set(err, errno, "create slirp4netns.log: %s", strerror(errno));
	return 0;
}

static int rs_staged(void *ctxp, const struct lz_pidref *id, struct lz_err *err)
{
	lz_hc *hc = ((struct start_ctx *)ctxp)->hc;
	hc->rs_id = *id;
	return lz_dstore_participant_stage_process(hc->store, hc->gen, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR, id,
						   err);
}

static int build_mounts(lz_hc *hc, struct lz_oci_mount *m, size_t *n, char (*labels)[4200],
			struct lz_gitsentry_mount **ret_git, size_t *ret_n_git, struct lz_err *err)
{
	const struct lz_config_profile *p = hc->profile;
	const struct lz_path *ws = lz_config_workspace(hc->cfg);
	size_t k = 0;
	int r;
	for (size_t i = 0; i < p->n_persistent_dirs; i++) {
		snprintf(labels[k], sizeof(labels[k]), "%s/anchor/%zu", hc->gen_dir.canonical, i);
		m[k] = (struct lz_oci_mount){ .destination = p->persistent_dirs[i], .type = "bind",
					      .source = labels[k] };
		k++;
	}
	for (size_t i = 0; i < p->n_volumes; i++)
		m[k++] = (struct lz_oci_mount){ .destination = p->volumes[i].destination,
						.type = "bind",
						.source = lz_config_volume_source(hc->cfg, i)->canonical,
						.read_only = p->volumes[i].read_only };
	m[k++] = (struct lz_oci_mount){ .destination = "/workspace", .type = "bind",
					.source = ws->canonical };
	/* SR-4: Git Sentry, after /workspace so it lies on top. */
	if ((r = lz_gitsentry_plan(ws->fd, ws->canonical, ret_git, ret_n_git, err)) < 0)
		return lz_err_prefix(err, r, "Git Sentry: ");
	/* Pin .git as a mount point of its own: a mount point cannot be
	 * renamed, so `mv .git x` cannot slip the protected files aside. */
	struct stat st;
	if (*ret_n_git > 0 && fstatat(ws->fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode)) {
		snprintf(labels[k], sizeof(labels[k]), "%s/.git", ws->canonical);
		m[k] = (struct lz_oci_mount){ .destination = "/workspace/.git", .type = "bind",
					      .source = labels[k] };
		k++;
	}
	for (size_t i = 0; i < *ret_n_git; i++) {
		const struct lz_gitsentry_mount *g = &(*ret_git)[i];
		bool file = g->kind == LZ_GITSENTRY_READONLY_FILE;
		m[k++] = (struct lz_oci_mount){ .destination = g->sandbox_path,
						.type = file ? "bind" : "tmpfs",
						.source = file ? g->host_path : NULL,
						.read_only = file };
	}
	snprintf(labels[k], sizeof(labels[k]), "%s/init", hc->gen_dir.canonical);
	m[k] = (struct lz_oci_mount){ .destination = INIT_IN_SANDBOX, .type = "bind",
				      .source = labels[k], .read_only = true };
	k++;
	/* Spec 3.7: the product's resolver configuration, read-only. */
	snprintf(labels[k], sizeof(labels[k]), "%s/resolv.conf", hc->gen_dir.canonical);
	m[k] = (struct lz_oci_mount){ .destination = "/etc/resolv.conf", .type = "bind",
				      .source = labels[k], .read_only = true };
	k++;
	*n = k;
	return 0;
}

static int write_bundle(lz_hc *hc, int bundle_fd, struct lz_err *err)
{
	const struct lz_config_profile *p = hc->profile;
	size_t cap = p->n_persistent_dirs + p->n_volumes + LZ_GITSENTRY_MOUNTS_MAX + 4;
	struct lz_oci_mount *mounts = calloc(cap, sizeof(*mounts));
	char(*labels)[4200] = calloc(cap, sizeof(*labels));
	struct lz_gitsentry_mount *git = NULL;
	size_t n = 0, n_git = 0;
	char *json = NULL;
	char root[4200];
	int r;
	if (mounts == NULL || labels == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if ((r = build_mounts(hc, mounts, &n, labels, &git, &n_git, err)) < 0)
		goto out;
	snprintf(root, sizeof(root), "%s/root", hc->gen_dir.canonical);
	char challenge[2 * LZ_CANARY_CHALLENGE_LEN + 1];
	lz_hex(hc->init_challenge, sizeof(hc->init_challenge), challenge);
	char *const argv[] = { INIT_IN_SANDBOX, "--attest", challenge, NULL };
	char *const env[] = { GUEST_PATH, NULL };
	struct lz_oci_process init = { .argv = argv, .env = env, .cwd = "/" };
	/* The network namespace is the RS's, by path (fact 3): PID 1 there. */
	struct lz_ocispec spec = { .root_path = root, .hostname = "lazaret",
				   .netns_path = "/proc/1/ns/net", .process = &init,
				   .mounts = mounts, .n_mounts = n };
	if ((r = lz_ocispec_config_json(&spec, &json, err)) < 0)
		goto out;
	r = write_file(bundle_fd, "config.json", json, strlen(json), 0600, err);
out:
	free(json);
	free(git);
	free(labels);
	free(mounts);
	return r;
}

static int recv_rs(lz_hc *hc, struct lz_rs_msg *m, struct lz_err *err)
{
	int r = lz_rs_recv(hc->control_fd, m, LZ_RS_START_TIMEOUT_MS + 5000);
	if (r < 0)
		return lz_err_set(err, -r, "the Runtime Supervisor %s", r == -EPIPE ? "ended early" : strerror(-r));
	if (m->generation != hc->gen || strcmp(m->domain_id, domain_hex(hc)) != 0)
		return lz_err_set(err, EPROTO, "the Runtime Supervisor reported another generation");
	if (m->type == LZ_RS_FAILED)
		return lz_err_set(err, EIO, "the Runtime Supervisor failed: %s", m->text);
	return 0;
}

/* The RS's enforcement network namespace, read by the HC itself (spec 3.7
 * "Independent identity"): through /proc, then the pidfd proves the PID
 * still named the RS when the namespace was opened. */
static int rs_netns(lz_hc *hc, struct stat *ret, struct lz_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/ns/net", hc->rs_id.pid);
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0 || fstat(ns, ret) < 0)
		return lz_err_set(err, errno, "the Runtime Supervisor's network namespace: %s", strerror(errno));
	if (syscall(SYS_pidfd_send_signal, hc->rs.pidfd, 0, NULL, 0) < 0)
		return lz_err_set(err, ESRCH, "the Runtime Supervisor ended during network attestation");
	return 0;
}

/* Spec 3.7 MarkNetworkReady, first half: the attestation record must hold
 * every predicate and the init must have reached this generation's allowed
 * canary (only the key holder can form the answer); then the readiness
 * fingerprint over the RS's namespace as the HC reads it. */
static int network_attested(lz_hc *hc, const struct lz_rs_msg *m, const uint8_t policy_digest[32],
			    char fp_hex[2 * LZ_NETREADY_FP_LEN + 1], struct lz_err *err)
{
	struct lz_netattest att;
	uint8_t want[LZ_CANARY_CHALLENGE_LEN], fp[LZ_NETREADY_FP_LEN];
	struct lz_dstore_generation g;
	struct stat ns;
	int r;
	if (lz_netattest_decode(m->attest, m->attest_len, &att) < 0)
		return lz_err_set(err, EPROTO, "network readiness: the attestation record does not decode");
	if (lz_canary_answer(hc->canary_key, hc->gen, LZ_NET_CANARY_ALLOWED, hc->init_challenge, want) < 0)
		return lz_err_set(err, EIO, "network readiness: OpenSSL failed");
	if ((r = lz_netattest_check(&att, want, err)) < 0)
		return lz_err_prefix(err, r, "network readiness refused: ");
	if ((r = rs_netns(hc, &ns, err)) < 0 ||
	    (r = lz_dstore_generation_get(hc->store, hc->gen, &g, err)) < 0)
		return r;
	if ((r = lz_netready_fingerprint(hc->domain_id, hc->gen, hc->fingerprint, g.sidecar_id, policy_digest,
					 (uint64_t)ns.st_dev, (uint64_t)ns.st_ino, fp)) < 0)
		return lz_err_set(err, -r, "network readiness fingerprint: %s", strerror(-r));
	lz_hex(fp, sizeof(fp), fp_hex);
	return 0;
}

/* Second half, with the RS committed: the helper's committed ownership
 * before the network records readiness (spec 3.6); the network participant
 * is the RS itself, a direct existing-process edge (spec 3.3). Publication
 * needs it active (domainstore.h). */
static int network_record(lz_hc *hc, const char *fp_hex, struct lz_err *err)
{
	int r;
	if ((r = lz_dstore_participant_commit_process(hc->store, hc->gen, LZ_DSTORE_ROLE_CONNECTIVITY_HELPER,
						      &hc->slirp_id, err)) < 0 ||
	    (r = lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_CONNECTIVITY_HELPER, err)) < 0 ||
	    (r = lz_dstore_participant_enter_process(hc->store, hc->gen, LZ_DSTORE_ROLE_NETWORK, &hc->rs_id,
						     err)) < 0 ||
	    (r = lz_dstore_participant_set_network_ready(hc->store, hc->gen, fp_hex, err)) < 0)
		return r;
	return lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_NETWORK, err);
}

/* Spec 3.3 step 6: the persisted staged identity, echoed. */
static int ack_rs(lz_hc *hc, const struct lz_rs_msg *staged, struct lz_err *err)
{
	struct lz_rs_msg ack = *staged;
	ack.type = LZ_HC_ACK;
	int r = lz_rs_send(hc->control_fd, &ack);
	return r < 0 ? lz_err_set(err, -r, "acknowledge the staged identity: %s", strerror(-r)) : 0;
}

int lz_hc_start(lz_hc *hc, struct lz_err *err)
{
	const struct lz_config_profile *p = hc->profile;
	struct lz_rs_plan *plan = calloc(1, sizeof(*plan));
	struct lz_idmap map;
	int sv[2] = { -EBADF, -EBADF };
	int bundle_fd = -EBADF, empty_fd = -EBADF, anchor_root = -EBADF, runsc_root = -EBADF;
	int sessions_fd = -EBADF;
	int r;
	if (plan == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	plan->log_fd = plan->root_target_fd = plan->prepared_fd = plan->control_fd = -EBADF;
	plan->root_upper_fd = plan->root_work_fd = plan->hc_fd = plan->policy_fd = plan->slirp_log_fd = -EBADF;
	if (p->n_persistent_dirs > LZ_RS_MAX_ANCHORS) {
		r = lz_err_set(err, E2BIG, "more than %d persistent directories", LZ_RS_MAX_ANCHORS);
		goto out;
	}
	for (size_t i = 0; i < LZ_RS_MAX_ANCHORS; i++)
		plan->anchors[i] = (struct lz_rs_anchor){ .lower_fd = -EBADF, .upper_fd = -EBADF,
							  .work_fd = -EBADF, .target_fd = -EBADF };
	if ((r = lz_idmap_for_invoking_user(&map, err)) < 0)
		goto out;
	if (getrandom(hc->canary_key, sizeof(hc->canary_key), 0) != (ssize_t)sizeof(hc->canary_key) ||
	    getrandom(hc->init_challenge, sizeof(hc->init_challenge), 0) != (ssize_t)sizeof(hc->init_challenge)) {
		r = lz_err_set(err, EIO, "canary key: %s", strerror(errno));
		goto out;
	}
	memcpy(plan->canary_key, hc->canary_key, sizeof(plan->canary_key));

	/* The generation's runtime tree: root/, anchor/<i>, runsc/, bundle/,
	 * sessions/, empty/, the init binary and the runsc log. */
	int g = hc->gen_dir.fd;
	if ((r = subdir(g, "root", 0700, &plan->root_target_fd, err)) < 0 ||
	    (r = subdir(g, "root-upper", 0755, &plan->root_upper_fd, err)) < 0 ||
	    (r = subdir(g, "root-work", 0700, &plan->root_work_fd, err)) < 0 ||
	    (r = subdir(g, "anchor", 0700, &anchor_root, err)) < 0 ||
	    (r = subdir(g, "runsc", 0700, &runsc_root, err)) < 0 ||
	    (r = subdir(g, "bundle", 0700, &bundle_fd, err)) < 0 ||
	    (r = subdir(g, "sessions", 0700, &sessions_fd, err)) < 0 ||
	    (r = subdir(g, "empty", 0755, &empty_fd, err)) < 0 ||
	    (r = write_file(g, "init", lz_sandbox_init, lz_sandbox_init_len, 0555, err)) < 0 ||
	    (r = write_file(g, "resolv.conf", RESOLV_CONF, strlen(RESOLV_CONF), 0444, err)) < 0)
		goto out;
	plan->log_fd = lz_openat2_create(g, "runsc.log", O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
					 0600, LZ_RESOLVE_OWNED);
	if (plan->log_fd < 0) {
		r = lz_err_set(err, errno, "create runsc.log: %s", strerror(errno));
		goto out;
	}
	snprintf(plan->root_target, sizeof(plan->root_target), "%s/root", hc->gen_dir.canonical);
	snprintf(plan->root_upper, sizeof(plan->root_upper), "%s/root-upper", hc->gen_dir.canonical);
	snprintf(plan->root_work, sizeof(plan->root_work), "%s/root-work", hc->gen_dir.canonical);
	for (size_t i = 0; i < p->n_persistent_dirs; i++) {
		struct lz_rs_anchor *a = &plan->anchors[i];
		char name[32];
		const char *dir = p->persistent_dirs[i];
		snprintf(name, sizeof(name), "%zu", i);
		snprintf(a->target, sizeof(a->target), "%s/anchor/%zu", hc->gen_dir.canonical, i);
		if ((r = subdir(anchor_root, name, 0755, &a->target_fd, err)) < 0)
			goto out;
		a->lower_fd = lz_openat2(hc->rootfs_fd, dir + 1, O_PATH | O_DIRECTORY | O_CLOEXEC,
					 LZ_RESOLVE_OWNED);
		snprintf(a->lower, sizeof(a->lower), "%s/prepared/%s/rootfs%s",
			 lz_config_storage_root(hc->cfg)->canonical, hc->artifact, dir);
		if (a->lower_fd < 0 && errno == ENOENT) {
			a->lower_fd = fcntl(empty_fd, F_DUPFD_CLOEXEC, 3);
			snprintf(a->lower, sizeof(a->lower), "%s/empty", hc->gen_dir.canonical);
		}
		if (a->lower_fd < 0) {
			r = lz_err_set(err, errno, "persistent directory %s in the image: %s%s", dir,
				       strerror(errno),
				       errno == ELOOP || errno == ENOTDIR ? " (it must be a directory, "
									    "not a symlink)" : "");
			goto out;
		}
		if ((r = anchor_dirs(hc, dir, a->lower_fd, a, err)) < 0)
			goto out;
	}
	plan->n_anchors = p->n_persistent_dirs;
	if ((r = write_bundle(hc, bundle_fd, err)) < 0)
		goto out;

	plan->generation = hc->gen;
	snprintf(plan->domain_id, sizeof(plan->domain_id), "%s", domain_hex(hc));
	plan->prepared_fd = hc->rootfs_fd;
	snprintf(plan->prepared, sizeof(plan->prepared), "%s/prepared/%s/rootfs",
		 lz_config_storage_root(hc->cfg)->canonical, hc->artifact);
	snprintf(plan->runsc_path, sizeof(plan->runsc_path), "%s", hc->runsc_path);
	snprintf(plan->runsc_root, sizeof(plan->runsc_root), "%s/runsc", hc->gen_dir.canonical);
	snprintf(plan->bundle, sizeof(plan->bundle), "%s/bundle", hc->gen_dir.canonical);
	snprintf(plan->container_id, sizeof(plan->container_id), "%s", hc->container_id);
	plan->dcache = lz_config_dcache(hc->cfg);
	if ((r = policy_memfd(hc, &plan->policy_fd, plan->policy_digest, err)) < 0 ||
	    (r = helper_plan(hc, plan, err)) < 0)
		goto out;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		r = lz_err_set(err, errno, "socketpair: %s", strerror(errno));
		goto out;
	}
	plan->control_fd = sv[1];
	plan->hc_fd = sv[0];

	/* Spec 3.6 step 4: State Anchor intent before its mounts exist. */
	static const enum lz_dstore_role roles[] = { LZ_DSTORE_ROLE_STATE_ANCHOR,
						     LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR,
						     LZ_DSTORE_ROLE_ATTACHED_RUNSC, LZ_DSTORE_ROLE_SANDBOX,
						     LZ_DSTORE_ROLE_CONNECTIVITY_HELPER, LZ_DSTORE_ROLE_NETWORK };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(roles); i++)
		if ((r = lz_dstore_participant_intent(hc->store, hc->gen, roles[i], err)) < 0)
			goto out;

	struct start_ctx ctx = { hc };
	struct lz_broker_spec spec = {
		.label = "Runtime Supervisor",
		.comm = "lz-supervisor",
		/* No CLONE_NEWNET: the RS creates the enforcement namespace
		 * after cloning slirp4netns in the host's (supervisor.h). */
		.clone_flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS,
		.map = &map,
		.join_pidfd = -1,
		.fn = lz_rs_main,
		.arg = plan,
		.staged = rs_staged,
		.ctx = &ctx,
	};
	if ((r = lz_broker_spawn(&spec, &hc->rs, err)) < 0)
		goto out;
	hc->control_fd = TAKE_FD(sv[0]);
	lz_close_fdp(&sv[1]);
	plan->hc_fd = -EBADF;

	struct lz_rs_msg m;
	if ((r = recv_rs(hc, &m, err)) < 0)
		goto out;
	if (m.type != LZ_RS_MOUNTS || m.n_mounts != 1 + p->n_persistent_dirs) {
		r = lz_err_set(err, EPROTO, "the Runtime Supervisor reported unexpected mounts");
		goto out;
	}
	hc->mounts = m;
	for (size_t i = 0; i < m.n_mounts; i++) {
		const char *label = i == 0 ? "/" : p->persistent_dirs[i - 1];
		struct lz_dstore_mount dm = { .mnt_id = m.mounts[i].mnt_id, .dev = m.mounts[i].dev,
					      .ino = m.mounts[i].ino };
		snprintf(dm.path, sizeof(dm.path), "%s", label);
		if ((r = lz_dstore_participant_add_mount(hc->store, hc->gen, LZ_DSTORE_ROLE_STATE_ANCHOR,
							 &dm, err)) < 0)
			goto out;
	}
	if ((r = lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_STATE_ANCHOR, err)) < 0)
		goto out;
	/* Spec 3.6: connectivity-helper ownership is durable before the helper
	 * runs; it is committed once the RS has seen tap0 configured. */
	if ((r = recv_rs(hc, &m, err)) < 0)
		goto out;
	if (m.type != LZ_RS_HELPER_STAGED) {
		r = lz_err_set(err, EPROTO, "expected the staged slirp4netns identity");
		goto out;
	}
	hc->slirp_id = m.id;
	if ((r = lz_dstore_participant_stage_process(hc->store, hc->gen, LZ_DSTORE_ROLE_CONNECTIVITY_HELPER,
						     &m.id, err)) < 0 ||
	    (r = ack_rs(hc, &m, err)) < 0)
		goto out;

	/* The attached runsc: stage, echo, then readiness commits it. */
	if ((r = recv_rs(hc, &m, err)) < 0)
		goto out;
	if (m.type != LZ_RS_STAGED) {
		r = lz_err_set(err, EPROTO, "expected the staged runsc identity");
		goto out;
	}
	hc->runsc_id = m.id;
	if ((r = lz_dstore_participant_stage_process(hc->store, hc->gen, LZ_DSTORE_ROLE_ATTACHED_RUNSC,
						     &m.id, err)) < 0)
		goto out;
	if ((r = ack_rs(hc, &m, err)) < 0)
		goto out;
	if ((r = recv_rs(hc, &m, err)) < 0)
		goto out;
	if (m.type != LZ_RS_READY || memcmp(&m.id, &hc->runsc_id, sizeof(m.id)) != 0) {
		r = lz_err_set(err, EPROTO, "the readiness report does not name the staged runsc");
		goto out;
	}
	char fp_hex[2 * LZ_NETREADY_FP_LEN + 1];
	if ((r = network_attested(hc, &m, plan->policy_digest, fp_hex, err)) < 0)
		goto out;
	/* Step 9: committed only after readiness. */
	if ((r = lz_dstore_participant_commit_process(hc->store, hc->gen, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR,
						      &hc->rs_id, err)) < 0 ||
	    (r = lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR,
						err)) < 0 ||
	    (r = network_record(hc, fp_hex, err)) < 0 ||
	    (r = lz_dstore_participant_commit_process(hc->store, hc->gen, LZ_DSTORE_ROLE_ATTACHED_RUNSC,
						      &hc->runsc_id, err)) < 0 ||
	    (r = lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_ATTACHED_RUNSC, err)) < 0 ||
	    (r = lz_dstore_participant_stage_process(hc->store, hc->gen, LZ_DSTORE_ROLE_SANDBOX,
						     &hc->runsc_id, err)) < 0 ||
	    (r = lz_dstore_participant_commit_process(hc->store, hc->gen, LZ_DSTORE_ROLE_SANDBOX,
						      &hc->runsc_id, err)) < 0 ||
	    (r = lz_dstore_participant_activate(hc->store, hc->gen, LZ_DSTORE_ROLE_SANDBOX, err)) < 0)
		goto out;
	r = 0;
out:
	lz_close_fdp(&sv[0]);
	lz_close_fdp(&sv[1]);
	lz_close_fdp(&bundle_fd);
	lz_close_fdp(&empty_fd);
	lz_close_fdp(&anchor_root);
	lz_close_fdp(&runsc_root);
	lz_close_fdp(&sessions_fd);
	lz_close_fdp(&plan->log_fd);
	lz_close_fdp(&plan->root_target_fd);
	lz_close_fdp(&plan->policy_fd);
	lz_close_fdp(&plan->slirp_log_fd);
	lz_close_fdp(&plan->root_upper_fd);
	lz_close_fdp(&plan->root_work_fd);
	for (size_t i = 0; i < LZ_RS_MAX_ANCHORS; i++) {
		lz_close_fdp(&plan->anchors[i].lower_fd);
		lz_close_fdp(&plan->anchors[i].upper_fd);
		lz_close_fdp(&plan->anchors[i].work_fd);
		lz_close_fdp(&plan->anchors[i].target_fd);
	}
	free(plan);
	return r;
}

/* ---- publication and sessions --------------------------------------------- */

int lz_hc_socket_addr(const struct lz_path *runtime_domain, struct sockaddr_un *ret)
{
	*ret = (struct sockaddr_un){ .sun_family = AF_UNIX };
	if ((size_t)snprintf(ret->sun_path, sizeof(ret->sun_path), "/proc/self/fd/%d/%s",
			     runtime_domain->fd, LZ_HC_SOCKET) >= sizeof(ret->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int lz_hc_publish(lz_hc *hc, struct lz_err *err)
{
	struct sockaddr_un addr;
	/* Bind beneath the retained, 0700 runtime Domain directory (SR-10). */
	if (lz_hc_socket_addr(hc->runtime_domain, &addr) < 0)
		return lz_err_set(err, ENAMETOOLONG, "socket path too long");
	hc->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (hc->listen_fd < 0)
		return lz_err_set(err, errno, "socket: %s", strerror(errno));
	(void)unlinkat(hc->runtime_domain->fd, LZ_HC_SOCKET, 0);
	mode_t old = umask(0077);
	int r = bind(hc->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
	umask(old);
	if (r < 0 || listen(hc->listen_fd, 16) < 0)
		return lz_err_set(err, errno, "listen on %s/%s: %s", hc->runtime_domain->canonical,
				  LZ_HC_SOCKET, strerror(errno));
	return lz_dstore_generation_set_state(hc->store, hc->gen, LZ_DSTORE_GEN_PUBLISHED, err);
}

/* Refused carries UTF-8: bytes outside printable ASCII (a non-UTF-8 path
 * in a message, say) become '?', so the refusal always reaches the CLI. */
static void refuse_client(int fd, int code, const char *msg)
{
	char text[LZ_ERR_MSG_MAX];
	size_t n = strnlen(msg, sizeof(text) - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)msg[i];
		text[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	text[n] = '\0';
	if (code <= 0 || code > 4095)
		code = EIO;
	struct lz_wire_msg m = { .type = LZ_WIRE_REFUSED,
				 .refused = { .code = (uint32_t)code, .message = text,
					      .message_len = n } };
	(void)lz_wire_send(fd, &m, NULL, 0);
}

static void session_end(lz_hc *hc, struct session *s)
{
	struct lz_err ignored;
	if (s->exec.pidfd >= 0)
		lz_broker_kill(&s->exec);
	if (s->client >= 0)
		close(s->client);
	if (s->master >= 0)
		close(s->master);
	if (s->id[0]) {
		(void)lz_dstore_session_release(hc->store, hc->gen, s->id, &ignored);
		(void)lz_dstore_session_clean(hc->store, hc->gen, s->id, &ignored);
	}
	s->client = s->master = -1;
	s->greeted = s->running = s->client_lost = s->tty = false;
	s->exec = (struct lz_broker_child)LZ_BROKER_CHILD_INIT;
	s->id[0] = '\0';
	s->out_len = s->in_len = s->in_off = 0;
	s->release_stage = 0;
}

static bool bytes_ok(const struct lz_wire_bytes *b)
{
	return b->len > 0 && memchr(b->ptr, '\0', b->len) == NULL;
}

/* argv and env as NUL-terminated vectors (freed with one free each). */
static char **to_strv(const struct lz_wire_bytes *v, size_t n)
{
	size_t total = (n + 1) * sizeof(char *);
	for (size_t i = 0; i < n; i++)
		total += v[i].len + 1;
	char **out = malloc(total);
	if (out == NULL)
		return NULL;
	char *p = (char *)(out + n + 1);
	for (size_t i = 0; i < n; i++) {
		out[i] = p;
		memcpy(p, v[i].ptr, v[i].len);
		p[v[i].len] = '\0';
		p += v[i].len + 1;
	}
	out[n] = NULL;
	return out;
}

static char **guest_env(const lz_hc *hc)
{
	const struct lz_config_profile *p = hc->profile;
	size_t n = 3 + p->n_env;
	char **env = calloc(n + 1, sizeof(char *));
	if (env == NULL)
		return NULL;
	size_t k = 0;
	env[k++] = strdup(GUEST_PATH);
	env[k++] = strdup("HOME=/root");
	env[k++] = strdup("LANG=C.UTF-8");
	/* Profile environment references (spec 3.2), resolved by the loader. */
	for (size_t i = 0; i < p->n_env; i++) {
		char *s = NULL;
		if (asprintf(&s, "%s=%s", p->env[i].name, lz_config_env_value(hc->cfg, i)) < 0)
			s = NULL;
		env[k++] = s;
	}
	for (size_t i = 0; i < k; i++)
		if (env[i] == NULL) {
			for (size_t j = 0; j < k; j++)
				free(env[j]);
			free(env);
			return NULL;
		}
	return env;
}

static void free_env(char **env)
{
	for (char **e = env; e && *e; e++) {
		explicit_bzero(*e, strlen(*e));
		free(*e);
	}
	free(env);
}

struct session_ctx {
	lz_hc *hc;
	struct session *s;
};

static int exec_staged(void *ctxp, const struct lz_pidref *id, struct lz_err *err)
{
	struct session_ctx *c = ctxp;
	return lz_dstore_session_stage_exec(c->hc->store, c->hc->gen, c->s->id, id, err);
}

static bool term_value_ok(const struct lz_wire_bytes *v)
{
	if (v->len == 0 || v->len > 64)
		return false;
	for (size_t i = 0; i < v->len; i++) {
		uint8_t c = v->ptr[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.' || c == '_' || c == '+'))
			return false;
	}
	return true;
}

/* The client's TERM names the terminal the guest draws on; nothing else of
 * the client's environment enters the sandbox. */
static char *client_term(const struct lz_wire_run_command *run)
{
	for (size_t i = 0; i < run->n_env; i++) {
		const struct lz_wire_env *e = &run->env[i];
		if (e->name.len == 4 && memcmp(e->name.ptr, "TERM", 4) == 0 && term_value_ok(&e->value)) {
			char *t = NULL;
			if (asprintf(&t, "TERM=%.*s", (int)e->value.len, (const char *)e->value.ptr) < 0)
				return NULL;
			return t;
		}
	}
	return strdup("TERM=xterm");
}

/* Opens a PTY pair: the master stays with the HC (spec 3.4), the slave
 * (opened through the master, never by name) goes to runsc exec. */
static int open_pty(uint16_t rows, uint16_t cols, int *ret_master, int *ret_slave,
		    struct lz_err *err)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return lz_err_set(err, errno, "open a PTY: %s", strerror(errno));
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	int slave = -1;
	if (grantpt(master) < 0 || unlockpt(master) < 0 || ioctl(master, TIOCSWINSZ, &ws) < 0 ||
	    (slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    fcntl(master, F_SETFL, O_NONBLOCK) < 0) {
		int e = errno;
		close(master);
		return lz_err_set(err, e, "set up the PTY: %s", strerror(e));
	}
	*ret_master = master;
	*ret_slave = slave;
	return 0;
}

/* runsc exec writes the guest leader's PID (inside the sandbox) once the
 * guest runs (C-REFINEMENT fact 7). */
static int guest_leader(lz_hc *hc, const char *name, uint64_t *ret, struct lz_err *err)
{
	int64_t deadline = lz_now_ms() + 10000;
	for (;;) {
		_cleanup_close_ int dir = lz_openat2(hc->gen_dir.fd, "sessions", O_PATH | O_DIRECTORY | O_CLOEXEC,
						     LZ_RESOLVE_OWNED);
		_cleanup_close_ int fd = dir < 0 ? -1 : lz_openat2(dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
								   LZ_RESOLVE_OWNED);
		char text[32] = "";
		ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
		unsigned long long pid = 0;
		if (n > 0 && sscanf(text, "%llu", &pid) == 1 && pid > 0) {
			*ret = pid;
			return 0;
		}
		if (lz_remaining_ms(deadline) == 0)
			return lz_err_set(err, ETIMEDOUT, "the guest process did not start");
		usleep(10 * 1000);
	}
}

/* A session: the client's own stdin, stdout and stderr become the exec
 * client's (bytes and EOF pass unmodified, issue 4), or, for a terminal,
 * a PTY the HC owns (issue 5). */
static int session_start(lz_hc *hc, struct session *s, const struct lz_wire_run_command *run,
			 const int fds[3], struct lz_err *err)
{
	char **argv = NULL, **env = NULL;
	char *json = NULL, *term = NULL, file[64], pidfile[64], process[4300], root[4200],
	     pidarg[4300];
	int sessions_fd = -EBADF, slave = -EBADF;
	int r;

	for (size_t i = 0; i < run->argc; i++)
		if (!bytes_ok(&run->argv[i]) && !(run->argv[i].len == 0 && i > 0))
			return lz_err_set(err, EINVAL, "argument %zu is empty or contains NUL", i);
	if ((r = lz_dstore_session_begin(hc->store, hc->gen, s->id, err)) < 0)
		return r;
	argv = to_strv(run->argv, run->argc);
	env = guest_env(hc);
	if (argv == NULL || env == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if (run->terminal) {
		/* The TERM slot replaces LANG's position at the end of the defaults. */
		if ((term = client_term(run)) == NULL) {
			r = lz_err_set(err, ENOMEM, "out of memory");
			goto out;
		}
		size_t n = 0;
		while (env[n])
			n++;
		char **grown = realloc(env, (n + 2) * sizeof(char *));
		if (grown == NULL) {
			r = lz_err_set(err, ENOMEM, "out of memory");
			goto out;
		}
		env = grown;
		env[n] = TAKE_PTR(term);
		env[n + 1] = NULL;
		if ((r = open_pty(run->rows, run->cols, &s->master, &slave, err)) < 0)
			goto out;
		s->tty = true;
	}
	struct lz_oci_process proc = { .argv = argv, .env = env, .cwd = "/workspace",
				       .terminal = run->terminal };
	if ((r = lz_ocispec_process_json(&proc, &json, err)) < 0)
		goto out;
	sessions_fd = lz_openat2(hc->gen_dir.fd, "sessions", O_PATH | O_DIRECTORY | O_CLOEXEC,
				 LZ_RESOLVE_OWNED);
	if (sessions_fd < 0) {
		r = lz_err_set(err, errno, "sessions directory: %s", strerror(errno));
		goto out;
	}
	snprintf(file, sizeof(file), "%s.json", s->id);
	snprintf(pidfile, sizeof(pidfile), "%s.pid", s->id);
	r = write_file(sessions_fd, file, json, strlen(json), 0600, err);
	explicit_bzero(json, strlen(json)); /* it holds environment values */
	if (r < 0)
		goto out;
	snprintf(process, sizeof(process), "--process=%s/sessions/%s", hc->gen_dir.canonical, file);
	snprintf(pidarg, sizeof(pidarg), "--internal-pid-file=%s/sessions/%s", hc->gen_dir.canonical,
		 pidfile);
	snprintf(root, sizeof(root), "--root=%s/runsc", hc->gen_dir.canonical);
	char *exec_argv[] = { "runsc", root, "exec", process, pidarg, hc->container_id, NULL };
	struct lz_spawn exec = { .label = "runsc exec", .exe_fd = -1, .path = hc->runsc_path,
				 .argv = exec_argv,
				 .stdin_fd = s->tty ? slave : fds[0],
				 .stdout_fd = s->tty ? slave : fds[1],
				 .stderr_fd = s->tty ? slave : fds[2],
				 /* The PTY is runsc exec's controlling terminal, so the
				  * line discipline's signals reach it and it forwards them
				  * to the guest's foreground group. */
				 .ctty = s->tty };
	struct session_ctx ctx = { hc, s };
	/* Fact 6: runsc exec reaches the sandbox only from the RS's
	 * namespaces; it joins them through the RS's pidfd. */
	struct lz_broker_spec spec = {
		.label = "runsc exec",
		.comm = "lz-exec-client",
		.join_pidfd = hc->rs.pidfd,
		.join_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID,
		.exec = &exec,
		.staged = exec_staged,
		.ctx = &ctx,
	};
	if ((r = lz_broker_spawn(&spec, &s->exec, err)) < 0)
		goto out;
	lz_close_fdp(&slave);
	/* Spec 3.4 steps 3-4: the guest leader is known before any terminal
	 * event is admitted; runsc exec with a terminal makes it a session
	 * and process-group leader, so its group is its PID. runsc exposes
	 * no start time; it stays 0 (negative evidence only). */
	struct lz_dstore_guest guest = { 0 };
	struct lz_dstore_guest *g = NULL;
	if (s->tty) {
		if ((r = guest_leader(hc, pidfile, &guest.leader_pid, err)) < 0)
			goto out;
		guest.pgid = guest.leader_pid;
		g = &guest;
	}
	if ((r = lz_dstore_session_commit_running(hc->store, hc->gen, s->id, &s->exec.id, g, err)) < 0)
		goto out;
	s->running = true;
	hc->ever_served = true;
	struct lz_wire_msg welcome = { .type = LZ_WIRE_WELCOME,
				       .welcome = { .protocol = LZ_WIRE_PROTOCOL, .generation = hc->gen } };
	(void)lz_unhex(s->id, welcome.welcome.session_id, 16);
	(void)lz_wire_send(s->client, &welcome, NULL, 0);
out:
	lz_close_fdp(&slave);
	lz_close_fdp(&sessions_fd);
	free(json);
	free(term);
	free(argv);
	free_env(env);
	return r;
}

/* Client loss or close (spec 3.4 release): SIGHUP, grace, SIGTERM, grace,
 * SIGKILL, through the exec client that forwards to the guest group. */
static void start_release(struct session *s)
{
	if (s->release_stage > 0 || s->exec.pidfd < 0)
		return;
	(void)lz_broker_signal(&s->exec, SIGHUP);
	s->release_stage = 1;
	s->release_at = lz_now_ms() + RELEASE_GRACE_MS;
}

static void advance_release(struct session *s)
{
	if (s->release_stage == 0 || s->exec.pidfd < 0 || lz_remaining_ms(s->release_at) > 0)
		return;
	(void)lz_broker_signal(&s->exec, s->release_stage == 1 ? SIGTERM : SIGKILL);
	s->release_stage++;
	s->release_at = lz_now_ms() + RELEASE_GRACE_MS;
}

static void client_gone(struct session *s)
{
	s->client_lost = true;
	close(s->client);
	s->client = -1;
	if (s->tty)
		start_release(s);
	else
		(void)lz_broker_signal(&s->exec, SIGTERM);
}

/* Writes what is pending for the master; false when it cannot take more. */
static void flush_input(struct session *s)
{
	while (s->in_off < s->in_len) {
		ssize_t n = write(s->master, s->in + s->in_off, s->in_len - s->in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		s->in_off += (size_t)n;
	}
	if (s->in_off == s->in_len)
		s->in_len = s->in_off = 0;
}

/* Sends the pending Output record; it stays pending on a full socket. */
static void flush_output(struct session *s)
{
	if (s->out_len == 0 || s->client < 0)
		return;
	struct lz_wire_msg m = { .type = LZ_WIRE_OUTPUT, .output = { s->out, s->out_len } };
	int r = lz_wire_send(s->client, &m, NULL, 0);
	if (r == 0)
		s->out_len = 0;
	else if (r != -EAGAIN)
		client_gone(s);
}

static void read_master(struct session *s)
{
	if (s->out_len > 0 || s->master < 0)
		return;
	ssize_t n = read(s->master, s->out, sizeof(s->out));
	if (n > 0) {
		s->out_len = (size_t)n;
		flush_output(s);
	}
}

static void client_message(lz_hc *hc, struct session *s, uint8_t *buf)
{
	struct lz_wire_msg m;
	int fds[LZ_WIRE_MAX_FDS];
	size_t n_fds = 0;
	struct lz_err err = { 0, "" };
	int r = lz_wire_recv(s->client, buf, LZ_WIRE_MAX, &m, fds, LZ_WIRE_MAX_FDS, &n_fds);
	if (r == -EAGAIN)
		return;
	if (r < 0) {
		if (!s->running)
			session_end(hc, s);
		else
			client_gone(s);
		return;
	}
	if (!s->greeted) {
		if (m.type != LZ_WIRE_HELLO || m.hello.protocol != LZ_WIRE_PROTOCOL ||
		    memcmp(m.hello.domain_id, hc->domain_id, 32) != 0)
			refuse_client(s->client, EPROTO, "not a client of this Domain");
		else if (memcmp(m.hello.fingerprint, hc->fingerprint, 32) != 0)
			refuse_client(s->client, ESTALE,
				      "this Domain is running with a different configuration "
				      "(Configuration Fingerprint differs); end its sessions, then "
				      "launch again");
		else
			s->greeted = true;
		if (!s->greeted)
			session_end(hc, s);
	} else if (!s->running && m.type == LZ_WIRE_RUN_COMMAND) {
		if (n_fds != (m.run.terminal ? 0 : LZ_WIRE_STDIO_FDS)) {
			refuse_client(s->client, EPROTO, "a command needs its three standard streams, "
							 "or a terminal");
			session_end(hc, s);
		} else if ((r = session_start(hc, s, &m.run, fds, &err)) < 0) {
			refuse_client(s->client, -r, err.msg);
			session_end(hc, s);
		}
	} else if (s->running && s->release_stage == 0 && m.type == LZ_WIRE_SIGNAL) {
		/* Spec 3.4: Interrupt, Quit and Suspend for the guest group. */
		static const int sigs[] = { [LZ_WIRE_SIG_INTERRUPT] = SIGINT, [LZ_WIRE_SIG_QUIT] = SIGQUIT,
					    [LZ_WIRE_SIG_SUSPEND] = SIGTSTP, [LZ_WIRE_SIG_HANGUP] = SIGHUP,
					    [LZ_WIRE_SIG_TERMINATE] = SIGTERM };
		(void)lz_broker_signal(&s->exec, sigs[m.sig]);
	} else if (s->running && s->tty && s->release_stage == 0 && m.type == LZ_WIRE_INPUT) {
		memcpy(s->in, m.input.ptr, m.input.len);
		s->in_len = m.input.len;
		s->in_off = 0;
		flush_input(s);
	} else if (s->running && s->tty && s->release_stage == 0 && m.type == LZ_WIRE_RESIZE) {
		/* The kernel sends SIGWINCH to the PTY's foreground group (runsc
		 * exec), which forwards it to the guest's. */
		struct winsize ws = { .ws_row = m.resize.rows, .ws_col = m.resize.cols };
		(void)ioctl(s->master, TIOCSWINSZ, &ws);
	} else if (s->running && m.type == LZ_WIRE_DETACH) {
		if (s->tty)
			start_release(s);
	} else if (!(s->running && m.type == LZ_WIRE_CLOSE_INPUT)) {
		refuse_client(s->client, EPROTO, "unexpected message");
		if (s->running)
			client_gone(s);
		else
			session_end(hc, s);
	}
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	lz_wire_msg_release(&m);
}

/* Sends one record, waiting (bounded) while the client's socket is full. */
static void send_bounded(int fd, const struct lz_wire_msg *m, int64_t deadline)
{
	for (;;) {
		int r = lz_wire_send(fd, m, NULL, 0);
		if (r != -EAGAIN)
			return;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, lz_remaining_ms(deadline)) <= 0)
			return;
	}
}

/* Spec 3.4 session end: reap the exec client, drain the PTY in order until
 * EOF or the bounded deadline, then exactly one SessionExit. */
static void exec_ended(lz_hc *hc, struct session *s)
{
	int status = 255;
	struct lz_err ignored;
	(void)lz_broker_wait(&s->exec, 0, &status, &ignored);
	if (s->client >= 0 && s->tty) {
		int64_t deadline = lz_now_ms() + DRAIN_MS;
		if (s->out_len > 0) {
			struct lz_wire_msg m = { .type = LZ_WIRE_OUTPUT, .output = { s->out, s->out_len } };
			send_bounded(s->client, &m, deadline);
			s->out_len = 0;
		}
		for (;;) {
			ssize_t n = read(s->master, s->out, sizeof(s->out));
			if (n <= 0 || lz_remaining_ms(deadline) == 0)
				break; /* EIO: no slave left; EAGAIN: drained */
			struct lz_wire_msg m = { .type = LZ_WIRE_OUTPUT, .output = { s->out, (size_t)n } };
			send_bounded(s->client, &m, deadline);
		}
	}
	if (s->client >= 0) {
		struct lz_wire_msg m = { .type = LZ_WIRE_SESSION_EXIT,
					 .exit = { .kind = LZ_WIRE_EXITED, .value = (uint8_t)status } };
		send_bounded(s->client, &m, lz_now_ms() + DRAIN_MS);
	}
	session_end(hc, s);
}

static void accept_client(lz_hc *hc)
{
	int fd = accept4(hc->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
		close(fd);
		return;
	}
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
		if (hc->sessions[i].client < 0 && hc->sessions[i].exec.pidfd < 0) {
			hc->sessions[i].client = fd;
			return;
		}
	refuse_client(fd, EBUSY, "too many sessions in this Domain");
	close(fd);
}

static bool sessions_active(const lz_hc *hc)
{
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
		if (hc->sessions[i].client >= 0 || hc->sessions[i].exec.pidfd >= 0)
			return true;
	return false;
}

int lz_hc_serve(lz_hc *hc, struct lz_err *err)
{
	enum { FIXED = 3 };
	struct pollfd pf[FIXED + 3 * LZ_HC_MAX_SESSIONS];
	struct session *owner[FIXED + 3 * LZ_HC_MAX_SESSIONS];
	uint8_t *buf = malloc(LZ_WIRE_MAX);
	int64_t started = lz_now_ms();
	int r = 0;
	if (buf == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	for (;;) {
		if (!sessions_active(hc) &&
		    (hc->ever_served || lz_remaining_ms(started + IDLE_GRACE_MS) == 0))
			break;
		size_t n = 0;
		int timeout = hc->ever_served ? -1 : lz_remaining_ms(started + IDLE_GRACE_MS);
		pf[n++] = (struct pollfd){ .fd = hc->listen_fd, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = hc->control_fd, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = hc->rs.pidfd, .events = POLLIN };
		for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
			struct session *s = &hc->sessions[i];
			if (s->client >= 0) {
				short ev = (short)((s->in_len == 0 ? POLLIN : 0) | (s->out_len > 0 ? POLLOUT : 0));
				owner[n] = s;
				pf[n++] = (struct pollfd){ .fd = s->client, .events = ev };
			}
			if (s->exec.pidfd >= 0) {
				owner[n] = s;
				pf[n++] = (struct pollfd){ .fd = s->exec.pidfd, .events = POLLIN };
			}
			if (s->master >= 0 && s->running) {
				/* Backpressure: no read while an Output is pending or
				 * nobody is there to take it. */
				short ev = (short)((s->out_len == 0 && s->client >= 0 ? POLLIN : 0) |
						   (s->in_len > 0 ? POLLOUT : 0));
				owner[n] = s;
				pf[n++] = (struct pollfd){ .fd = s->master, .events = ev };
			}
			if (s->release_stage > 0 && s->exec.pidfd >= 0) {
				int left = lz_remaining_ms(s->release_at);
				if (timeout < 0 || left < timeout)
					timeout = left;
			}
		}
		if (poll(pf, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			r = lz_err_set(err, errno, "poll: %s", strerror(errno));
			break;
		}
		if (pf[1].revents || pf[2].revents) {
			r = lz_err_set(err, EPIPE, "the Runtime Supervisor ended; the sandbox is gone");
			break;
		}
		for (size_t i = FIXED; i < n; i++) {
			struct session *s = owner[i];
			if (!pf[i].revents)
				continue;
			if (pf[i].fd == s->exec.pidfd) {
				exec_ended(hc, s);
			} else if (pf[i].fd == s->client) {
				if (pf[i].revents & POLLOUT)
					flush_output(s);
				if (s->client >= 0 && (pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
					client_message(hc, s, buf);
			} else if (pf[i].fd == s->master) {
				if (pf[i].revents & POLLOUT)
					flush_input(s);
				if (pf[i].revents & POLLIN)
					read_master(s);
			}
		}
		for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
			advance_release(&hc->sessions[i]);
		if (pf[0].revents & POLLIN)
			accept_client(hc);
	}
	/* No new sessions from here on: the socket goes before teardown. */
	lz_close_fdp(&hc->listen_fd);
	(void)unlinkat(hc->runtime_domain->fd, LZ_HC_SOCKET, 0);
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
		if (hc->sessions[i].client >= 0 || hc->sessions[i].exec.pidfd >= 0) {
			if (hc->sessions[i].client >= 0)
				refuse_client(hc->sessions[i].client, EPIPE, err->msg);
			session_end(hc, &hc->sessions[i]);
		}
	free(buf);
	return r;
}

/* ---- teardown (spec 3.6 unmount and lease-release refinement) ------------ */

static int stop_unstarted(lz_hc *hc, struct lz_err *err);

int lz_hc_stop(lz_hc *hc, struct lz_err *err)
{
	int r;
	if (hc->rs.pidfd < 0)
		return stop_unstarted(hc, err);
	(void)lz_dstore_generation_set_state(hc->store, hc->gen, LZ_DSTORE_GEN_STOPPING, err);
	/* 1. release intent, keeping the exact mount and artifact identity. */
	if ((r = lz_dstore_participant_release_intent(hc->store, hc->gen, LZ_DSTORE_ROLE_STATE_ANCHOR,
						      err)) < 0)
		return r;
	/* 2. the RS verifies and unmounts exactly, and proves absence. */
	struct lz_rs_msg m = { .type = LZ_HC_STOP, .generation = hc->gen };
	snprintf(m.domain_id, sizeof(m.domain_id), "%s", domain_hex(hc));
	(void)lz_rs_send(hc->control_fd, &m);
	bool proved = false;
	char why[LZ_RS_TEXT_MAX] = "";
	for (;;) {
		r = lz_rs_recv(hc->control_fd, &m, STOP_TIMEOUT_MS);
		if (r < 0)
			break;
		if (m.type == LZ_RS_STOPPED) {
			proved = true;
			break;
		}
		if (m.type == LZ_RS_FAILED) {
			snprintf(why, sizeof(why), "%s", m.text);
			break;
		}
	}
	int status;
	struct lz_err werr;
	r = lz_broker_wait(&hc->rs, STOP_TIMEOUT_MS, &status, &werr);
	lz_close_fdp(&hc->control_fd);
	/* slirp4netns was in the RS's PID namespace: gone with the reaped RS. */
	/* The mounts lived only in the RS's mount namespace, which ended with
	 * the reaped RS and its PID namespace: that is the independent
	 * absence proof when the RS could not report its own. */
	if (!proved && r < 0 && r != -EIO)
		return lz_err_set(err, -r, "stopping the Runtime Supervisor: %s%s%s", werr.msg,
				  why[0] ? "; " : "", why);
	/* 3. anchor clean and prepared-lower release intent, atomically; the
	 * process participants are gone with the RS. */
	static const enum lz_dstore_role roles[] = { LZ_DSTORE_ROLE_NETWORK, LZ_DSTORE_ROLE_CONNECTIVITY_HELPER,
						     LZ_DSTORE_ROLE_SANDBOX, LZ_DSTORE_ROLE_ATTACHED_RUNSC,
						     LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(roles); i++)
		if ((r = lz_dstore_participant_release_intent(hc->store, hc->gen, roles[i], err)) < 0 ||
		    (r = lz_dstore_participant_clean(hc->store, hc->gen, roles[i], err)) < 0)
			return r;
	return lz_dstore_anchor_unmounted(hc->store, hc->gen, err);
}

/* A start that failed before the supervisor existed left bare intents (no
 * process, no mount can exist without the RS): they become clean, and a
 * held lease moves to release so lz_hc_release_lower can remove it. */
static int stop_unstarted(lz_hc *hc, struct lz_err *err)
{
	static const enum lz_dstore_role roles[] = { LZ_DSTORE_ROLE_NETWORK, LZ_DSTORE_ROLE_CONNECTIVITY_HELPER,
						     LZ_DSTORE_ROLE_SANDBOX, LZ_DSTORE_ROLE_ATTACHED_RUNSC,
						     LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR,
						     LZ_DSTORE_ROLE_STATE_ANCHOR };
	struct lz_err ignored;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(roles); i++) {
		struct lz_dstore_participant p;
		if (lz_dstore_participant_get(hc->store, hc->gen, roles[i], &p, &ignored) < 0)
			continue; /* never recorded */
		enum lz_dstore_phase phase = p.phase;
		lz_dstore_participant_clear(&p);
		if (phase == LZ_DSTORE_PHASE_CLEAN)
			continue;
		int r = 0;
		if (phase != LZ_DSTORE_PHASE_INTENT && phase != LZ_DSTORE_PHASE_RELEASE)
			r = lz_dstore_participant_release_intent(hc->store, hc->gen, roles[i], err);
		if (r < 0 || (r = lz_dstore_participant_clean(hc->store, hc->gen, roles[i], err)) < 0)
			return r;
	}
	if (!hc->lease_held)
		return 0;
	return lz_dstore_participant_release_intent(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER,
						    err);
}

/* Step 4's recheck, under the catalog lock: the Domain's own record still
 * says release, and the supervisor that held the mounts is gone. */
static int lease_recheck(void *ctxp, struct lz_err *err)
{
	lz_hc *hc = ctxp;
	struct lz_dstore_participant p;
	int r = lz_dstore_participant_get(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER, &p, err);
	if (r < 0)
		return r;
	lz_dstore_participant_clear(&p);
	if (p.phase != LZ_DSTORE_PHASE_RELEASE || hc->rs.pidfd >= 0)
		return lz_err_set(err, ESTALE, "prepared lower is not in release, or its mounts may "
					       "still exist");
	return 0;
}

int lz_hc_release_lower(lz_hc *hc, struct lz_err *err)
{
	int r;
	if (!hc->lease_held)
		return 0;
	r = lz_catalog_lease_release(lz_config_storage_root(hc->cfg)->fd, hc->artifact, domain_hex(hc),
				     hc->gen, lease_recheck, hc, err);
	if (r < 0 && r != -ENOENT)
		return r;
	hc->lease_held = false;
	return lz_dstore_participant_clean(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER, err);
}

/* A failed generation's logs (runsc's, slirp4netns's) go to the HC's log
 * (its stderr) before the runtime directory is removed: the diagnosis
 * survives. */
static void keep_log(const lz_hc *hc, const char *name)
{
	_cleanup_close_ int fd = lz_openat2(hc->gen_dir.fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
					    LZ_RESOLVE_OWNED);
	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > 16384 ? size - 16384 : 0;
	char buf[16384];
	ssize_t n = pread(fd, buf, sizeof(buf), from);
	if (n > 0) {
		fprintf(stderr, "--- %s of generation %llu (last %zd bytes) ---\n", name,
			(unsigned long long)hc->gen, n);
		fwrite(buf, 1, (size_t)n, stderr);
		fprintf(stderr, "--- end of %s ---\n", name);
		fflush(stderr);
	}
}

void lz_hc_close(lz_hc *hc, bool ok)
{
	struct lz_err ignored;
	if (hc == NULL)
		return;
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
		if (hc->sessions[i].client >= 0 || hc->sessions[i].exec.pidfd >= 0)
			session_end(hc, &hc->sessions[i]);
	if (hc->listen_fd >= 0) {
		lz_close_fdp(&hc->listen_fd);
		(void)unlinkat(hc->runtime_domain->fd, LZ_HC_SOCKET, 0);
	}
	/* A supervisor still running here means a failed start or stop: it
	 * takes its PID namespace (runsc and the sandbox) with it. */
	lz_broker_kill(&hc->rs);
	lz_close_fdp(&hc->control_fd);
	if (hc->store && hc->gen) {
		if (ok)
			ok = lz_dstore_participant_release_intent(hc->store, hc->gen,
								  LZ_DSTORE_ROLE_HOST_COORDINATOR, &ignored) >= 0 &&
			     lz_dstore_participant_clean(hc->store, hc->gen, LZ_DSTORE_ROLE_HOST_COORDINATOR,
							 &ignored) >= 0 &&
			     lz_dstore_generation_set_state(hc->store, hc->gen, LZ_DSTORE_GEN_STOPPED,
							    &ignored) >= 0;
		if (!ok)
			(void)lz_dstore_generation_set_state(hc->store, hc->gen, LZ_DSTORE_GEN_FAILED,
							     &ignored);
	}
	if (!ok && hc->gen_dir.fd >= 0) {
		keep_log(hc, "runsc.log");
		keep_log(hc, "slirp4netns.log");
	}
	if (hc->gen_dir.fd >= 0 && lz_tree_remove(hc->runtime_domain->fd, hc->gen_name, &ignored) < 0) {
		/* A supervisor lost mid-way leaves namespace-owned files. */
		struct lz_idmap map;
		if (lz_idmap_for_invoking_user(&map, &ignored) >= 0)
			(void)lz_tree_remove_in_userns(&map, hc->runtime_domain->fd, hc->gen_name,
						       &ignored);
	}
	lz_path_release(&hc->gen_dir);
	lz_close_fdp(&hc->rootfs_fd);
	lz_dstore_close(hc->store);
	lz_close_fdp(&hc->lock_fd);
	free(hc);
}
