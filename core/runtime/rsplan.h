/* The Runtime Supervisor's plan (spec 3.1, 3.6, 3.7): everything the HC
 * resolves for one generation's RS before the RS exists, as retained
 * descriptors with their path labels.
 *
 * The RS is forked from the HC into new user, PID and mount namespaces and
 * keeps only the plan's descriptors. It reopens each source and target by
 * its label in its own mount namespace and refuses unless the reopened
 * object is the inherited descriptor's (device and inode): the labels are
 * never authority on their own (spec 3.2 "trusted external pathname
 * handoff").
 *
 * State Anchors (spec 3.6, DX-2): one per persistent directory, its lower
 * that directory of the prepared lower (a symlink refuses; a directory the
 * image lacks gets the generation's empty/), its upper and work
 * directories beneath the Domain Root at anchor/<encoded path>/ ("/usr/
 * local" -> "usr%2Flocal"); the upper takes the lower's mode, so the
 * merged directory keeps it.
 *
 * Network (spec 3.7, FR-16, FR-19): the derived policy's canonical bytes
 * in a write-sealed memfd with the digest the HC computed, slirp4netns
 * located in the system directories, its log, and this generation's canary
 * key.
 *
 * Host tools: runsc (the HC's, located when it opened) and slirp4netns as
 * the O_PATH descriptors they were checked through (platform/hostprobe.h),
 * outside every tree the sandbox can write (config/config.h lz_config_host_tool).
 * The RS runs them from these descriptors (execveat), never by name: its
 * user and mount namespaces do not change what a descriptor is, and a name
 * replaced since the check cannot choose what runs.
 *
 * Workspace (spec 3.5): the router's mount point and both backings, also
 * reopened by label and checked in the RS.
 *
 * Volumes: each source is reopened by label in the RS and must be the
 * object the configuration opened (its descriptor is inherited), then
 * bound by the RS onto <gen>/volume/<i>; the OCI spec names that path,
 * which only Lazaret writes, so a source path swapped after the
 * configuration was loaded (a sandbox of another Domain can write where a
 * volume source lies) refuses the start instead of reaching another
 * object. Git Sentry's files (fs/gitsentry.h) the same way: the plan keeps
 * the sentry's plan, and each file it checked is bound read-only onto
 * <gen>/sentry/<i> (i its index in that plan), which the bundle names. */
#ifndef LZ_RSPLAN_H
#define LZ_RSPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "fs/gitsentry.h"
#include "net/canary.h"
#include "runtime/rsproto.h"
#include "runtime/rundir.h"
#include "util/err.h"

struct lz_rs_anchor {
	int lower_fd;
	int upper_fd;
	int work_fd;
	int target_fd;
	char target[4096]; /* label of target_fd, for the exact unmount */
	char lower[4096];  /* labels of the layers, reopened in the RS */
	char upper[4096];
	char work[4096];
};

#define LZ_RS_MAX_VOLUMES 64
#define LZ_RS_SENTRY_DIR "sentry"

struct lz_rs_volume {
	int source_fd; /* the configuration's (or Git Sentry's), duplicated */
	int target_fd; /* <gen>/volume/<i> (<gen>/sentry/<i>), of the source's type */
	bool read_only;
	bool git_sentry;
	char source[4096]; /* labels, reopened in the RS */
	char target[4096];
};

struct lz_rs_plan {
	int control_fd; /* SOCK_SEQPACKET to the HC */
	int log_fd;     /* runsc's stdout/stderr */
	uint64_t generation;
	char domain_id[65];
	int prepared_fd;     /* the prepared lower's rootfs (borrowed from the HC) */
	char prepared[4096]; /* its label: reopened in the RS's namespace */
	int root_target_fd;  /* <gen>/root */
	char root_target[4096];
	/* The transient writable layer of the root: an overlay over the
	 * prepared lower, discarded with the generation (spec 3.6). */
	int root_upper_fd;
	int root_work_fd;
	char root_upper[4096];
	char root_work[4096];
	struct lz_rs_anchor anchors[LZ_RS_MAX_ANCHORS];
	size_t n_anchors;
	struct lz_rs_volume *volumes; /* owned: the volumes, then Git Sentry's files */
	size_t n_volumes;
	struct lz_gitsentry_mount *git; /* owned: the bundle's Git Sentry mounts */
	size_t n_git;
	int runsc_fd;            /* O_PATH: what runs (hostprobe.h) */
	char runsc_path[4097];   /* its canonical path, a label */
	char runsc_root[4096]; /* --root */
	char bundle[4096];
	char container_id[80];
	uint32_t dcache;
	uint64_t max_memory; /* bytes of the sandbox's memory file (memwatch.h) */
	uint64_t memory_budget; /* bytes: every sandbox's memory files together */
	int memory_slots_fd;    /* the Storage Root's memory.slots: that budget */
	int policy_fd;
	uint8_t policy_digest[32];
	int slirp_fd;            /* O_PATH: what runs (hostprobe.h) */
	char slirp_path[4097];   /* its canonical path, a label */
	int slirp_log_fd;
	uint8_t canary_key[LZ_CANARY_KEY_LEN]; /* the HC keeps a copy */
	/* Egress by name (network.allow_domains, net/egress.h): the proxy's
	 * refusals go to hc.log, its counters to the Domain Root's
	 * egress.stats (state inspect reads it). */
	bool egress;
	int egress_stats_fd;
	int egress_slots_fd; /* the Storage Root's egress.slots (egressproxy.h) */
	/* Spec 3.5, SR-13: the workspace router (its ignore rules off when
	 * the profile sets isolate_ignored = false, FR-9). Its mount point in
	 * the generation, and its backings: the canonical workspace and the
	 * Domain Root's Ignored Workspace State (ignored/). */
	bool isolate_ignored;
	bool hide_editor_config; /* the profile's; the router's classification */
	size_t watch_dirs;	 /* the router's watch budget (router/ignorewatch.h) */
	int watch_slots_fd;	 /* the Storage Root's watch.slots: that budget, every Domain's */
	int router_program_fd; /* lazaret-router (router/routerproc.h), a sealed memfd */
	int router_target_fd;
	int host_ws_fd;
	int ignored_fd;
	char router_target[4096];
	char host_ws[4096];
	char ignored[4096];
};

struct lz_rsplan_input {
	const lz_config *cfg;
	const struct lz_gendir *gen;
	uint64_t generation;
	const char *domain_id; /* 64 hex */
	const char *artifact;  /* prepared-artifact ID, 64 hex */
	int rootfs_fd;        /* its rootfs, opened by the HC; the plan borrows it */
	const struct lz_path *runsc; /* located and checked; the plan keeps a copy */
	const char *container_id;
	const uint8_t *canary_key; /* LZ_CANARY_KEY_LEN bytes */
	/* The router's program (router/router_program.h); without it the
	 * plan has none and the router cannot start (unit tests). */
	const unsigned char *router_program;
	size_t router_program_len;
};

/* Builds the plan and the HC <-> RS socketpair: *ret_hc_fd is the HC's end.
 * The plan owns every descriptor in it except prepared_fd (the caller's
 * rootfs_fd, which must outlive the plan). */
int lz_rsplan_build(const struct lz_rsplan_input *in, struct lz_rs_plan **ret, int *ret_hc_fd,
		    struct lz_err *err);

/* Closes what the plan owns and frees it; accepts NULL. */
void lz_rsplan_free(struct lz_rs_plan *p);

/* The largest runsc dentry cache (`--dcache`) a descriptor limit of nofile
 * leaves room for: a quarter of it (rsplan.c says why). The plan uses the
 * smaller of this and the profile's runsc_dcache; `lazaret diag` reports
 * it. */
uint32_t lz_rsplan_dcache_cap(uint64_t nofile);

/* Every descriptor the RS keeps (the plan's own and prepared_fd) into
 * fds[0..cap); returns how many. */
size_t lz_rsplan_fds(const struct lz_rs_plan *p, int *fds, size_t cap);

/* In the RS's mount namespace: opens label (O_PATH, not followed) and
 * refuses (-ESTALE) unless it is the object of the inherited descriptor
 * (device and inode): labels are never authority on their own. */
int lz_rsplan_reopen(const char *label, int inherited, int *ret, struct lz_err *err);

/* The State Anchor directory name of a persistent path: "/usr/local" ->
 * "usr%2Flocal" ('/', '%' and a leading '.' escaped, so no anchor's name
 * starts with '.'; lz_domain_anchor_path reverses it); -EINVAL for a path
 * that is not absolute, -ENAMETOOLONG. */
int lz_rsplan_anchor_name(const char *path, char *out, size_t size);

#endif
