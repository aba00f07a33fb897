/* The Runtime Supervisor's plan (core/runtime/rsplan.h) for configurations
 * loaded from TOML fixtures: identity fields, the prepared lower and the
 * root's layers as descriptors with matching labels, State Anchors (lower
 * from the image or the generation's empty/, upper taking the lower's
 * mode, work 0700, reused by the next generation), the sealed policy memfd
 * and its digest, the logs, the control socketpair, lz_rsplan_fds, and the
 * refusals (a symlink or a file where a persistent directory should be).
 * Needs slirp4netns (skipped without it), never runsc. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cfg_fixture.h"

#include "net/egressproxy.h"
#include "net/netpolicy.h"
#include "platform/hostprobe.h"
#include "router/ignorewatch.h"
#include "runtime/memwatch.h"
#include "runtime/rsplan.h"
#include "runtime/rsproto.h"
#include "store/domainstate.h"
#include "util/cleanup.h"

#define ARTIFACT "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"

struct fx {
	struct cfg_fx *c;
	int rootfs;
	char rootfs_path[PATH_MAX];
	uint8_t key[LZ_CANARY_KEY_LEN];
	struct lz_path runsc; /* a stand-in: /bin/true's file */
	struct lz_rsplan_input in;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL || (f->c = cfg_fx_new()) == NULL)
		return -1;
	/* The prepared lower: a small image tree. */
	cfg_fx_path(f->c, "image", f->rootfs_path);
	if (mkdir(f->rootfs_path, 0755) < 0)
		return -1;
	f->rootfs = open(f->rootfs_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->rootfs < 0 || mkdirat(f->rootfs, "root", 0700) < 0 || fchmodat(f->rootfs, "root", 0750, 0) < 0 ||
	    mkdirat(f->rootfs, "usr", 0755) < 0 || mkdirat(f->rootfs, "opt", 0755) < 0 ||
	    symlinkat("/usr", f->rootfs, "linked") < 0)
		return -1;
	int fd = openat(f->rootfs, "file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	for (size_t i = 0; i < sizeof(f->key); i++)
		f->key[i] = (uint8_t)(0xc0 + i);
	char *truth = realpath("/bin/true", NULL);
	f->runsc = (struct lz_path)LZ_PATH_INIT;
	if (truth == NULL || lz_path_open(truth, &f->runsc, NULL) < 0)
		return -1;
	free(truth);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->rootfs);
	lz_path_release(&f->runsc);
	cfg_fx_free(f->c);
	free(f);
	return 0;
}

static bool have_slirp(void)
{
	struct lz_path slirp = LZ_PATH_INIT;
	int r = lz_hostprobe_tool_locate("slirp4netns", NULL, &slirp);
	lz_path_release(&slirp);
	return r == 0;
}

static void load(struct fx *f, const char *tmpl, uint64_t gen)
{
	if (!have_slirp())
		skip();
	if (cfg_fx_load(f->c, tmpl) != 0)
		fail_msg("load: %s", f->c->err.msg);
	if (cfg_fx_gen(f->c, gen) != 0)
		fail_msg("gen: %s", f->c->err.msg);
	struct lz_config_summary s;
	lz_config_summarize(f->c->cfg, &s);
	f->in = (struct lz_rsplan_input){ .cfg = f->c->cfg, .gen = &f->c->gen, .generation = gen,
					  .domain_id = s.domain_id, .artifact = ARTIFACT,
					  .rootfs_fd = f->rootfs, .runsc = &f->runsc,
					  .container_id = "lazaret-test-1", .canary_key = f->key };
}

static void assert_same(int fd, int dirfd, const char *name)
{
	struct stat a, b;
	assert_int_equal(fstat(fd, &a), 0);
	if (fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("stat %s: %s", name, strerror(errno));
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		fail_msg("descriptor %d is not %s", fd, name);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

static mode_t mode_of(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("stat %s: %s", name, strerror(errno));
	return st.st_mode & 07777;
}

static size_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	size_t n = 0;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

static void test_lz_rsplan_anchor_name__escapes_and_bounds(void **state)
{
	(void)state;
	char out[300];
	assert_int_equal(lz_rsplan_anchor_name("/usr/local", out, sizeof(out)), 0);
	assert_string_equal(out, "usr%2Flocal");
	assert_int_equal(lz_rsplan_anchor_name("/a%b/c", out, sizeof(out)), 0);
	assert_string_equal(out, "a%25b%2Fc");
	assert_int_equal(lz_rsplan_anchor_name("/root", out, sizeof(out)), 0);
	assert_string_equal(out, "root");
	/* A leading dot is escaped (a reset's set-aside trees start with
	 * one), and the name decodes back; only there. */
	char back[300];
	assert_int_equal(lz_rsplan_anchor_name("/.reset-x/.b", out, sizeof(out)), 0);
	assert_string_equal(out, "%2Ereset-x%2F.b");
	assert_int_equal(lz_domain_anchor_path(out, back, sizeof(back)), 0);
	assert_string_equal(back, "/.reset-x/.b");
	assert_int_equal(lz_domain_anchor_path(".cache", back, sizeof(back)), -EINVAL);
	assert_int_equal(lz_domain_anchor_path("a%2Eb", back, sizeof(back)), -EINVAL);
	/* Too small a buffer, and past NAME_MAX. */
	assert_int_equal(lz_rsplan_anchor_name("/root", out, 4), -ENAMETOOLONG);
	assert_int_equal(lz_rsplan_anchor_name("/root", out, 5), 0);
	char longp[300] = "/";
	memset(longp + 1, 'x', 255);
	assert_int_equal(lz_rsplan_anchor_name(longp, out, sizeof(out)), 0);
	assert_int_equal(strlen(out), 255);
	longp[254] = '/'; /* 253 + 3 + 1 = 257 bytes */
	assert_int_equal(lz_rsplan_anchor_name(longp, out, sizeof(out)), -ENAMETOOLONG);
}

/* Only an absolute path names an anchor: "xusr/local" is not /usr/local's,
 * and "" is not read past its end (on the heap, so ASan would see it). */
static void test_lz_rsplan_anchor_name__relative_path_refused(void **state)
{
	(void)state;
	char out[300] = "untouched";
	char *empty = strdup("");
	assert_non_null(empty);
	assert_int_equal(lz_rsplan_anchor_name("xusr/local", out, sizeof(out)), -EINVAL);
	assert_int_equal(lz_rsplan_anchor_name("usr", out, sizeof(out)), -EINVAL);
	assert_int_equal(lz_rsplan_anchor_name(empty, out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "untouched");
	free(empty);
}

static void test_lz_rsplan_build__plan_contents(void **state)
{
	struct fx *f = *state;
	load(f, "version = 1\n[runtime]\nrunsc_dcache = 1234\n" "[profiles.dev]\nimage = \"docker://debian:bookworm\"\n"
		"persistent_dirs = [\"/root\", \"/usr/local\"]\n"
		"[profiles.dev.network]\nallow = [\"192.168.7.0/24\"]\ndeny = [\"8.8.8.0/24\"]\n",
	     3);
	struct lz_rs_plan *plan = NULL;
	int hc = -1;
	struct lz_err err = { 0, "" };
	if (lz_rsplan_build(&f->in, &plan, &hc, &err) != 0)
		fail_msg("build: %s", err.msg);
	const struct lz_gendir *g = &f->c->gen;
	const char *gen = g->dir.canonical;
	char want[PATH_MAX + 256];
	/* Identity. */
	assert_int_equal(plan->generation, 3);
	assert_string_equal(plan->domain_id, f->in.domain_id);
	assert_string_equal(plan->container_id, "lazaret-test-1");
	/* runsc: the caller's checked object, a descriptor of the plan's own. */
	assert_string_equal(plan->runsc_path, f->runsc.canonical);
	assert_true(plan->runsc_fd != f->runsc.fd);
	assert_same(plan->runsc_fd, AT_FDCWD, f->runsc.canonical);
	assert_int_equal(plan->dcache, 1234);
	assert_memory_equal(plan->canary_key, f->key, sizeof(f->key));
	/* The prepared lower: borrowed, labelled beneath the Storage Root. */
	assert_int_equal(plan->prepared_fd, f->rootfs);
	snprintf(want, sizeof(want), "%s/prepared/" ARTIFACT "/rootfs", lz_config_storage_root(f->c->cfg)->canonical);
	assert_string_equal(plan->prepared, want);
	/* The root's mount point and transient layers: copies of the gendir's. */
	assert_true(plan->root_target_fd != g->root);
	assert_same(plan->root_target_fd, g->dir.fd, "root");
	assert_same(plan->root_upper_fd, g->dir.fd, "root-upper");
	assert_same(plan->root_work_fd, g->dir.fd, "root-work");
	snprintf(want, sizeof(want), "%s/root", gen);
	assert_string_equal(plan->root_target, want);
	snprintf(want, sizeof(want), "%s/root-upper", gen);
	assert_string_equal(plan->root_upper, want);
	snprintf(want, sizeof(want), "%s/root-work", gen);
	assert_string_equal(plan->root_work, want);
	snprintf(want, sizeof(want), "%s/runsc", gen);
	assert_string_equal(plan->runsc_root, want);
	snprintf(want, sizeof(want), "%s/bundle", gen);
	assert_string_equal(plan->bundle, want);
	/* State Anchors. */
	assert_int_equal(plan->n_anchors, 2);
	const struct lz_path *dom = lz_config_storage_domain(f->c->cfg);
	int anchors = openat(dom->fd, "anchor", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(anchors >= 0);
	assert_int_equal(mode_of(dom->fd, "anchor"), 0700);
	const struct lz_rs_anchor *a = &plan->anchors[0];
	assert_same(a->lower_fd, f->rootfs, "root");
	snprintf(want, sizeof(want), "%s/prepared/" ARTIFACT "/rootfs/root", lz_config_storage_root(f->c->cfg)->canonical);
	assert_string_equal(a->lower, want);
	assert_same(a->upper_fd, anchors, "root/upper");
	assert_same(a->work_fd, anchors, "root/work");
	assert_int_equal(mode_of(anchors, "root"), 0700);
	assert_int_equal(mode_of(anchors, "root/upper"), 0750); /* the lower's */
	assert_int_equal(mode_of(anchors, "root/work"), 0700);
	snprintf(want, sizeof(want), "%s/anchor/root/upper", dom->canonical);
	assert_string_equal(a->upper, want);
	snprintf(want, sizeof(want), "%s/anchor/root/work", dom->canonical);
	assert_string_equal(a->work, want);
	assert_same(a->target_fd, g->anchor, "0");
	assert_int_equal(mode_of(g->anchor, "0"), 0755);
	snprintf(want, sizeof(want), "%s/anchor/0", gen);
	assert_string_equal(a->target, want);
	/* /usr/local is not in the image: the generation's empty/. */
	a = &plan->anchors[1];
	assert_same(a->lower_fd, g->dir.fd, "empty");
	snprintf(want, sizeof(want), "%s/empty", gen);
	assert_string_equal(a->lower, want);
	assert_same(a->upper_fd, anchors, "usr%2Flocal/upper");
	assert_int_equal(mode_of(anchors, "usr%2Flocal/upper"), 0755); /* empty/'s */
	assert_same(a->target_fd, g->anchor, "1");
	/* The policy: a sealed memfd whose bytes have the plan's digest. */
	int seals = fcntl(plan->policy_fd, F_GET_SEALS);
	assert_true(seals & F_SEAL_WRITE);
	assert_true(seals & F_SEAL_SEAL);
	uint8_t bytes[LZ_NETPOLICY_ENCODED_MAX], digest[32];
	ssize_t n = pread(plan->policy_fd, bytes, sizeof(bytes), 0);
	assert_true(n > 0);
	assert_int_equal(lz_netpolicy_digest_bytes(bytes, (size_t)n, digest), 0);
	assert_memory_equal(digest, plan->policy_digest, 32);
	assert_int_equal(write(plan->policy_fd, "x", 1), -1);
	/* slirp4netns located and kept as the descriptor it was checked
	 * through, its canonical path the label; the logs created in the
	 * generation. */
	struct lz_path slirp = LZ_PATH_INIT;
	assert_int_equal(lz_hostprobe_tool_locate("slirp4netns", NULL, &slirp), 0);
	assert_string_equal(plan->slirp_path, slirp.canonical);
	assert_same(plan->slirp_fd, AT_FDCWD, slirp.canonical);
	lz_path_release(&slirp);
	assert_same(plan->log_fd, g->dir.fd, "runsc.log");
	assert_same(plan->slirp_log_fd, g->dir.fd, "slirp4netns.log");
	/* The control socketpair: the HC's end talks to the plan's. */
	struct lz_rs_msg *m = calloc(1, sizeof(*m));
	assert_non_null(m);
	lz_rs_msg_init(m, LZ_HC_STOP, 3, f->in.domain_id);
	assert_int_equal(lz_rs_send(hc, m), 0);
	memset(m, 0, sizeof(*m));
	assert_int_equal(lz_rs_recv(plan->control_fd, m, 1000), 0);
	assert_true(lz_rs_msg_for(m, 3, f->in.domain_id));
	free(m);
	/* The workspace router (isolate_ignored defaults on): its mount point
	 * in the generation, the canonical workspace, and the Domain Root's
	 * ignored/ (0700, created here). */
	assert_true(plan->isolate_ignored);
	assert_same(plan->router_target_fd, g->dir.fd, "workspace");
	assert_int_equal(mode_of(g->dir.fd, "workspace"), 0700);
	snprintf(want, sizeof(want), "%s/workspace", gen);
	assert_string_equal(plan->router_target, want);
	const struct lz_path *ws = lz_config_workspace(f->c->cfg);
	assert_same(plan->host_ws_fd, ws->fd, ".");
	assert_string_equal(plan->host_ws, ws->canonical);
	assert_same(plan->ignored_fd, dom->fd, "ignored");
	assert_int_equal(mode_of(dom->fd, "ignored"), 0700);
	snprintf(want, sizeof(want), "%s/ignored", dom->canonical);
	assert_string_equal(plan->ignored, want);
	/* The router's watch budget: a quarter of the developer's inotify
	 * watches (router/ignorewatch.h). */
	FILE *w = fopen("/proc/sys/fs/inotify/max_user_watches", "r");
	unsigned long watches = 0;
	assert_non_null(w);
	assert_int_equal(fscanf(w, "%lu", &watches), 1);
	fclose(w);
	assert_int_equal(plan->watch_dirs, lz_ignorewatch_budget(watches));
	/* Memory: half of the host's for all sandboxes, and for this one. */
	assert_int_equal(plan->memory_budget, lz_memwatch_host_budget());
	assert_int_equal(plan->max_memory, plan->memory_budget);
	/* Every descriptor the RS keeps: among them the tools it runs. */
	int fds[64];
	assert_int_equal(lz_rsplan_fds(plan, fds, 64), 15 + 4 * 2);
	const int own[] = { plan->prepared_fd,	    plan->control_fd,	plan->log_fd,	  plan->root_target_fd,
			    plan->root_upper_fd,    plan->root_work_fd, plan->policy_fd,  plan->slirp_log_fd,
			    plan->router_target_fd, plan->host_ws_fd,	plan->ignored_fd, plan->watch_slots_fd,
			    plan->memory_slots_fd,  plan->runsc_fd,	plan->slirp_fd };
	assert_memory_equal(fds, own, sizeof(own));
	assert_int_equal(fds[15], plan->anchors[0].lower_fd);
	assert_int_equal(fds[22], plan->anchors[1].target_fd);
	for (size_t i = 0; i < 23; i++)
		assert_true(fds[i] >= 0);
	assert_int_equal(lz_rsplan_fds(plan, fds, 5), 5);
	close(anchors);
	close(hc);
	lz_rsplan_free(plan);
	lz_rsplan_free(NULL);
	/* The rootfs stays the caller's. */
	assert_true(fcntl(f->rootfs, F_GETFD) >= 0);
}

static void test_lz_rsplan_build__next_generation_reuses_anchors(void **state)
{
	struct fx *f = *state;
	load(f, CFG_FX_BASE "persistent_dirs = [\"/root\"]\n", 1);
	struct lz_rs_plan *plan = NULL;
	int hc = -1;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_rsplan_build(&f->in, &plan, &hc, &err), 0);
	/* The sandbox left data and changed the mode of /root. */
	char upper[PATH_MAX + 64];
	snprintf(upper, sizeof(upper), "%s/kept", plan->anchors[0].upper);
	int fd = open(upper, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(chmod(plan->anchors[0].upper, 0777), 0);
	close(hc);
	lz_rsplan_free(plan);
	lz_gendir_remove(&f->c->gen);
	assert_int_equal(cfg_fx_gen(f->c, 2), 0);
	f->in.generation = 2;
	assert_int_equal(lz_rsplan_build(&f->in, &plan, &hc, &err), 0);
	struct stat st;
	assert_int_equal(stat(upper, &st), 0); /* persisted */
	assert_int_equal(stat(plan->anchors[0].upper, &st), 0);
	/* The upper is authoritative (spec 3.6): the sandbox's mode stays. */
	assert_int_equal(st.st_mode & 07777, 0777);
	close(hc);
	lz_rsplan_free(plan);
}

static void test_lz_rsplan_build__persistent_dir_must_be_a_directory(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	const struct {
		const char *dir;
		int want;
		const char *msg;
	} cases[] = {
		{ "/linked", -ELOOP, "not a symlink" },
		{ "/file", -ENOTDIR, "not a symlink" },
	};
	for (size_t i = 0; i < 2; i++) {
		char tmpl[256];
		snprintf(tmpl, sizeof(tmpl), CFG_FX_BASE "persistent_dirs = [\"/opt\", \"%s\"]\n", cases[i].dir);
		if (i > 0) {
			lz_gendir_remove(&f->c->gen);
			lz_config_free(f->c->cfg);
			f->c->cfg = NULL;
		}
		load(f, tmpl, 1 + i);
		size_t before = open_fds();
		struct lz_rs_plan *plan = (struct lz_rs_plan *)&err; /* untouched marker */
		int hc = 4242;
		int r = lz_rsplan_build(&f->in, &plan, &hc, &err);
		if (r != cases[i].want)
			fail_msg("%s: %d (%s)", cases[i].dir, r, err.msg);
		assert_non_null(strstr(err.msg, cases[i].dir));
		assert_non_null(strstr(err.msg, cases[i].msg));
		assert_true(plan == (struct lz_rs_plan *)&err);
		assert_int_equal(hc, 4242);
		assert_int_equal(open_fds(), before); /* nothing leaked */
	}
}

/* The budgets every Domain shares are slots files of the Storage Root
 * (egress.slots: the egress proxies' connections; watch.slots: the
 * routers' inotify watches), which every plan opens for locking (never
 * truncated, never written); anything but a file there refuses the plan,
 * leaking nothing. */
static void test_lz_rsplan_build__slots_files_in_the_storage_root(void **state)
{
	struct fx *f = *state;
	char storage[PATH_MAX];
	const struct {
		const char *what, *name;
		int want;
		const char *msg;
	} cases[] = {
		{ "none yet", LZ_EGRESS_SLOTS, 0, "" },
		{ "a FIFO", LZ_EGRESS_SLOTS, -EINVAL, "egress.slots in the Storage Root is not a file (remove it" },
		{ "a symlink", LZ_EGRESS_SLOTS, -ELOOP, "open egress.slots in the Storage Root" },
		{ "a FIFO", LZ_IGNOREWATCH_SLOTS, -EINVAL, "watch.slots in the Storage Root is not a file (remove it" },
		{ "a FIFO", LZ_MEMWATCH_SLOTS, -EINVAL, "memory.slots in the Storage Root is not a file (remove it" },
		{ "a symlink", LZ_MEMWATCH_SLOTS, -ELOOP, "open memory.slots in the Storage Root" },
	};
	snprintf(storage, sizeof(storage), "%s/data/lazaret", f->c->dir);
	for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
		struct lz_err err = { 0, "" };
		if (i > 0) {
			lz_gendir_remove(&f->c->gen);
			lz_config_free(f->c->cfg);
			f->c->cfg = NULL;
		}
		load(f, CFG_FX_BASE "[profiles.dev.network]\nallow_domains = [\"a.example\"]\n"
				    "resolvers = [\"192.0.2.53\"]\n", 1 + i);
		int sdir = open(storage, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(sdir >= 0);
		(void)unlinkat(sdir, LZ_EGRESS_SLOTS, 0);
		(void)unlinkat(sdir, LZ_IGNOREWATCH_SLOTS, 0);
		(void)unlinkat(sdir, LZ_MEMWATCH_SLOTS, 0);
		if (strcmp(cases[i].what, "a FIFO") == 0)
			assert_int_equal(mknodat(sdir, cases[i].name, S_IFIFO | 0600, 0), 0);
		if (strcmp(cases[i].what, "a symlink") == 0)
			assert_int_equal(symlinkat("/tmp/elsewhere", sdir, cases[i].name), 0);
		size_t before = open_fds();
		struct lz_rs_plan *plan = NULL;
		int hc = -1;
		int r = lz_rsplan_build(&f->in, &plan, &hc, &err);
		if (r != cases[i].want || strstr(err.msg, cases[i].msg) == NULL)
			fail_msg("%s: %d (%s)", cases[i].what, r, err.msg);
		if (r == 0) {
			assert_true(plan->egress);
			assert_same(plan->egress_slots_fd, sdir, LZ_EGRESS_SLOTS);
			assert_same(plan->watch_slots_fd, sdir, LZ_IGNOREWATCH_SLOTS);
			assert_same(plan->memory_slots_fd, sdir, LZ_MEMWATCH_SLOTS);
			assert_int_equal(mode_of(sdir, LZ_EGRESS_SLOTS), 0600);
			assert_int_equal(mode_of(sdir, LZ_IGNOREWATCH_SLOTS), 0600);
			assert_int_equal(mode_of(sdir, LZ_MEMWATCH_SLOTS), 0600);
			assert_int_equal(fcntl(plan->egress_slots_fd, F_GETFL) & O_ACCMODE, O_RDWR);
			assert_int_equal(fcntl(plan->watch_slots_fd, F_GETFL) & O_ACCMODE, O_RDWR);
			assert_int_equal(fcntl(plan->memory_slots_fd, F_GETFL) & O_ACCMODE, O_RDWR);
			close(hc);
			lz_rsplan_free(plan);
		} else {
			assert_null(plan);
			assert_int_equal(open_fds(), before); /* nothing leaked */
		}
		close(sdir);
	}
}

/* runtime.max_memory_mib is the sandbox's own limit, refused past what
 * every sandbox of the host may hold together, leaking nothing. */
static void test_lz_rsplan_build__memory_limit_within_the_host_budget(void **state)
{
	struct fx *f = *state;
	uint64_t budget_mib = lz_memwatch_host_budget() >> 20;
	char cfg[1024];
	for (int i = 0; i < 2; i++) {
		uint64_t mib = i == 0 ? 256 : budget_mib + 1;
		if (i > 0) {
			lz_gendir_remove(&f->c->gen);
			lz_config_free(f->c->cfg);
			f->c->cfg = NULL;
		}
		snprintf(cfg, sizeof(cfg), CFG_FX_BASE "[runtime]\nmax_memory_mib = %llu\n", (unsigned long long)mib);
		load(f, cfg, 1 + i);
		size_t before = open_fds();
		struct lz_rs_plan *plan = NULL;
		int hc = -1;
		struct lz_err err = { 0, "" };
		int r = lz_rsplan_build(&f->in, &plan, &hc, &err);
		if (i == 0) {
			if (r != 0)
				fail_msg("build: %s", err.msg);
			assert_int_equal(plan->max_memory, 256ull << 20);
			assert_int_equal(plan->memory_budget, lz_memwatch_host_budget());
			close(hc);
			lz_rsplan_free(plan);
			continue;
		}
		assert_int_equal(r, -EINVAL);
		char want[160];
		snprintf(want, sizeof(want), "runtime.max_memory_mib is %llu MiB, more than every sandbox of this "
					     "host may hold together (%llu MiB, half of its memory)",
			 (unsigned long long)mib, (unsigned long long)budget_mib);
		if (strstr(err.msg, want) == NULL)
			fail_msg("%s", err.msg);
		assert_null(plan);
		assert_int_equal(open_fds(), before);
	}
}

/* Git Sentry's files are bound by the RS from the objects the sentry
 * checked, onto <gen>/sentry/<i> (the bundle names that path): the
 * workspace path, which another Domain's sandbox may replace, is only a
 * label. A layout the sentry refuses refuses the plan, leaking nothing. */
static void test_lz_rsplan_build__git_sentry_files_bound_by_descriptor(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "%s/.git", f->c->ws);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/.git/config", f->c->ws);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	load(f, CFG_FX_BASE "persistent_dirs = []\n", 1);
	struct lz_rs_plan *plan = NULL;
	int hc = -1;
	struct lz_err err = { 0, "" };
	if (lz_rsplan_build(&f->in, &plan, &hc, &err) != 0)
		fail_msg("build: %s", err.msg);
	/* config (read-only) and hooks (transient): one bind, for config. */
	assert_int_equal(plan->n_git, 2);
	assert_int_equal(plan->n_volumes, 1);
	const struct lz_rs_volume *v = &plan->volumes[0];
	size_t i = plan->git[0].kind == LZ_GITSENTRY_READONLY_FILE ? 0 : 1;
	assert_int_equal(plan->git[i].kind, LZ_GITSENTRY_READONLY_FILE);
	assert_true(v->git_sentry && v->read_only);
	assert_string_equal(v->source, p);
	int wsfd = open(f->c->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(wsfd >= 0);
	assert_same(v->source_fd, wsfd, ".git/config");
	close(wsfd);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof(want), "%s/sentry/%zu", f->c->gen.dir.canonical, i);
	assert_string_equal(v->target, want);
	int sentry = openat(f->c->gen.dir.fd, "sentry", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(sentry >= 0);
	snprintf(want, sizeof(want), "%zu", i);
	assert_same(v->target_fd, sentry, want);
	assert_int_equal(mode_of(sentry, want), 0600);
	close(sentry);
	int fds[64];
	size_t n = lz_rsplan_fds(plan, fds, 64);
	assert_int_equal(fds[n - 2], v->source_fd);
	assert_int_equal(fds[n - 1], v->target_fd);
	close(hc);
	lz_rsplan_free(plan);

	/* A config that is a symlink refuses the plan. */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink("/etc/hostname", p), 0);
	lz_gendir_remove(&f->c->gen);
	assert_int_equal(cfg_fx_gen(f->c, 2), 0);
	f->in.generation = 2;
	size_t before = open_fds();
	plan = NULL;
	hc = 4242;
	assert_int_equal(lz_rsplan_build(&f->in, &plan, &hc, &err), -EPERM);
	assert_non_null(strstr(err.msg, "Git Sentry: "));
	assert_null(plan);
	assert_int_equal(hc, 4242);
	assert_int_equal(open_fds(), before);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_rsplan_anchor_name__escapes_and_bounds),
		cmocka_unit_test(test_lz_rsplan_anchor_name__relative_path_refused),
		T(test_lz_rsplan_build__plan_contents),
		T(test_lz_rsplan_build__next_generation_reuses_anchors),
		T(test_lz_rsplan_build__persistent_dir_must_be_a_directory),
		T(test_lz_rsplan_build__git_sentry_files_bound_by_descriptor),
		T(test_lz_rsplan_build__slots_files_in_the_storage_root),
		T(test_lz_rsplan_build__memory_limit_within_the_host_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
