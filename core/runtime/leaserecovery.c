/* Lost generations' catalog leases: see leaserecovery.h. */
#include "runtime/leaserecovery.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/mountns.h"
#include "proc/nsident.h"
#include "proc/pidref.h"
#include "proc/spawn.h"
#include "store/catalog.h"
#include "util/cleanup.h"
#include "util/escape.h"

/* Leaves why empty when the recorded process is gone (or none was
 * recorded); writes the reason when it is alive or cannot be checked. */
static void judge_process(const char *what, const struct lz_dstore_process *p, int64_t deadline, char *why,
			  size_t cap)
{
	if (why[0] || p->phase == LZ_DSTORE_SLOT_UNASSIGNED)
		return;
	bool alive = true;
	struct lz_err e = { 0, "" };
	if (lz_pidref_await_gone(&p->id, lz_remaining_ms(deadline), &alive, &e) < 0)
		snprintf(why, cap, "cannot tell whether its %s (PID %u) is gone: %s", what, p->id.pid, e.msg);
	else if (alive)
		snprintf(why, cap, "its %s (PID %u) still runs", what, p->id.pid);
}

/* The holder's name for the developer, escaped: any process may set its
 * own (PR_SET_NAME), and hc.log reaches a terminal. */
static const char *process_name(pid_t pid, char *out, size_t cap)
{
	char path[32], comm[17];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd >= 0 ? read(fd, comm, sizeof(comm) - 1) : -1;
	if (n <= 0)
		return "its name unreadable";
	if (comm[n - 1] == '\n')
		n--;
	lz_escape(comm, (size_t)n, out, cap);
	return out;
}

/* A mount namespace is asked for by listmount, which answers whoever
 * holds it (a descriptor passed on, a bind mount, a process /proc does
 * not show); -errno where this kernel cannot tell this caller. */
static int await_mountns_gone(uint64_t id, int64_t deadline, bool *ret_alive, struct lz_err *err)
{
	for (;;) {
		int rc = lz_mountns_ns_exists(id, ret_alive, err);
		if (rc < 0 || !*ret_alive || lz_remaining_ms(deadline) <= 0)
			return rc;
		usleep(20 * 1000);
	}
}

/* Spec 3.6: the generation's mounts and namespaces, each inspected on its
 * own rather than inferred from its processes (nsident.h): no recorded
 * State Anchor mount in the host's mount namespace or in the RS's, then
 * the RS's mount namespace and the enforcement network namespace (with
 * the canary veth) freed. */

static void judge_namespace(const char *what, enum lz_dstore_ns_kind kind, const struct lz_dstore_ns *ns,
			    int64_t deadline, char *why, size_t cap)
{
	struct lz_err e = { 0, "" };
	bool alive = true;
	struct lz_nsident id = { .type = kind == LZ_DSTORE_NS_MOUNT ? CLONE_NEWNS : CLONE_NEWNET,
				 .id = ns->id,
				 .inum = ns->inum };
	int rc = kind == LZ_DSTORE_NS_MOUNT ? await_mountns_gone(ns->id, deadline, &alive, &e) : -ENOSYS;
	if (rc < 0) {
		e = (struct lz_err){ 0, "" };
		rc = lz_nsident_await_gone(&id, lz_remaining_ms(deadline), &alive, &e);
	}
	pid_t holder = 0;
	char name[LZ_ESCAPE_MAX(16) + 1];
	if (rc < 0)
		snprintf(why, cap, "cannot tell whether its %s is gone: %s", what, e.msg);
	else if (alive && lz_nsident_find_holder(&id, &holder, &e) == 1)
		snprintf(why, cap,
			 "its %s (namespace ID %llu) still exists: process %d (%s) holds it (a thread in it or a "
			 "descriptor of it)",
			 what, (unsigned long long)ns->id, (int)holder, process_name(holder, name, sizeof(name)));
	else if (alive)
		snprintf(why, cap,
			 "its %s (namespace ID %llu) still exists: a process or descriptor outside the ones it "
			 "recorded holds it",
			 what, (unsigned long long)ns->id);
}

static void judge_namespaces(lz_dstore *store, const struct lz_dstore_generation *gen, int64_t deadline, char *why,
			     size_t cap)
{
	struct lz_err e = { 0, "" };
	uint8_t boot[16];
	if (lz_boot_id(boot, &e) < 0) {
		snprintf(why, cap, "cannot read this boot's ID: %s", e.msg);
		return;
	}
	if (memcmp(boot, gen->boot_id, sizeof(boot)) != 0)
		return; /* another boot: no namespace or mount of it survives */
	struct lz_dstore_namespaces ns;
	if (lz_dstore_rs_namespaces_get(store, gen->generation, &ns, &e) < 0) {
		snprintf(why, cap, "its namespace records cannot be read: %s", e.msg);
		return;
	}
	struct lz_dstore_participant anchor = { 0 };
	int r = lz_dstore_participant_get(store, gen->generation, LZ_DSTORE_ROLE_STATE_ANCHOR, &anchor, &e);
	if (r < 0 && r != -ENOENT) {
		snprintf(why, cap, "its State Anchor record cannot be read: %s", e.msg);
		return;
	}
	bool present = false;
	for (size_t i = 0; i < anchor.n_mounts && !why[0]; i++) {
		const struct lz_dstore_mount *m = &anchor.mounts[i];
		/* A reusable ID (recorded by an older build or kernel) names
		 * nothing now: any host mount may carry it. Such a generation
		 * rests on its processes, as it did then. */
		if (m->mnt_id < LZ_MOUNT_ID_UNIQUE_MIN)
			continue;
		if (lz_mountns_present(m->mnt_id, &present, &e) < 0 ||
		    (!present && ns.have_mount && lz_mountns_present_in(ns.mount.id, m->mnt_id, &present, &e) < 0))
			snprintf(why, cap, "cannot tell whether its mount of %.256s is gone: %s", m->path, e.msg);
		else if (present)
			snprintf(why, cap, "its mount of %.256s (mount ID %llu) still exists", m->path,
				 (unsigned long long)m->mnt_id);
	}
	lz_dstore_participant_clear(&anchor);
	if (!why[0] && ns.have_mount)
		judge_namespace("mount namespace", LZ_DSTORE_NS_MOUNT, &ns.mount, deadline, why, cap);
	if (!why[0] && ns.have_network)
		judge_namespace("network namespace", LZ_DSTORE_NS_NETWORK, &ns.network, deadline, why, cap);
}

int lz_leaserecovery_record_lost(lz_dstore *store, uint64_t generation, struct lz_err *err)
{
	struct lz_dstore_participant p;
	bool alive = false;
	int r = lz_dstore_participant_get(store, generation, LZ_DSTORE_ROLE_HOST_COORDINATOR, &p, err);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r >= 0) {
		if (p.process.phase != LZ_DSTORE_SLOT_UNASSIGNED)
			r = lz_pidref_alive(&p.process.id, &alive, err);
		uint32_t pid = p.process.id.pid;
		lz_dstore_participant_clear(&p);
		if (r < 0)
			return lz_err_prefix(err, r, "the coordinator of generation %llu: ",
					     (unsigned long long)generation);
		if (alive)
			return lz_err_set(err, EBUSY,
					  "generation %llu is still served by its coordinator (process %u), which "
					  "holds another lock file: was the runtime directory removed, or is "
					  "XDG_RUNTIME_DIR another? End that session first",
					  (unsigned long long)generation, (unsigned)pid);
	}
	return lz_dstore_generation_set_state(store, generation, LZ_DSTORE_GEN_FAILED, err);
}

void lz_leaserecovery_judge(lz_dstore *store, uint64_t g, int64_t deadline, char *why, size_t cap)
{
	/* A lost generation's processes may still be exiting (its Runtime
	 * Supervisor waits for its whole PID namespace): they get until
	 * deadline to finish before they count as running. */
	struct lz_err e = { 0, "" };
	struct lz_dstore_generation gen;
	why[0] = '\0';
	int r = lz_dstore_generation_get(store, g, &gen, &e);
	if (r == -ENOENT) {
		snprintf(why, cap, "the Domain Store has no record of it");
		return;
	}
	if (r < 0) {
		snprintf(why, cap, "its record cannot be read: %s", e.msg);
		return;
	}
	if (gen.state != LZ_DSTORE_GEN_STOPPED && gen.state != LZ_DSTORE_GEN_FAILED) {
		snprintf(why, cap, "it is still %s", lz_dstore_gen_state_name(gen.state));
		return;
	}
	static const enum lz_dstore_role roles[] = { LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR,
						     LZ_DSTORE_ROLE_ATTACHED_RUNSC,
						     LZ_DSTORE_ROLE_CONNECTIVITY_HELPER };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(roles) && !why[0]; i++) {
		struct lz_dstore_participant p;
		r = lz_dstore_participant_get(store, g, roles[i], &p, &e);
		if (r == -ENOENT)
			continue; /* never had an intent: never started */
		if (r < 0) {
			snprintf(why, cap, "its %s record cannot be read: %s", lz_dstore_role_name(roles[i]), e.msg);
			break;
		}
		judge_process(lz_dstore_role_name(roles[i]), &p.process, deadline, why, cap);
		lz_dstore_participant_clear(&p);
	}
	if (why[0])
		return;
	_cleanup_free_ struct lz_dstore_session *v = NULL;
	size_t n = 0;
	if (lz_dstore_session_list(store, g, &v, &n, &e) < 0) {
		snprintf(why, cap, "its sessions cannot be read: %s", e.msg);
		return;
	}
	for (size_t i = 0; i < n && !why[0]; i++)
		judge_process("session's exec client", &v[i].exec, deadline, why, cap);
	if (!why[0])
		judge_namespaces(store, &gen, deadline, why, cap);
}

/* Spec 3.6 step 4's recheck, under the catalog lock: the Domain's own
 * record still says release, on the lease's artifact. */
struct recheck {
	lz_dstore *store;
	uint64_t generation;
	const char *artifact_id;
	bool refused; /* the recheck, not the catalog, kept the lease */
};

static int release_recheck(void *ctxp, struct lz_err *err)
{
	struct recheck *c = ctxp;
	struct lz_dstore_participant p;
	int r = lz_dstore_participant_get(c->store, c->generation, LZ_DSTORE_ROLE_PREPARED_LOWER, &p, err);
	if (r >= 0) {
		bool ok = p.phase == LZ_DSTORE_PHASE_RELEASE && p.has_artifact &&
			  strcmp(p.artifact_id, c->artifact_id) == 0;
		lz_dstore_participant_clear(&p);
		if (!ok)
			r = lz_err_set(err, ESTALE, "its prepared_lower record is no longer release intent on this "
						    "artifact");
	}
	c->refused = r < 0;
	return r;
}

/* Spec 3.6 bootstrap recovery, the generation's exact mounts proved
 * absent (lz_leaserecovery_judge): clean State Anchor state and
 * prepared-lower release intent in one transaction
 * (lz_dstore_anchor_unmounted), the anchor first taken to release intent;
 * without an anchor to clean, the lower's release intent alone. */
static int record_release_intent(lz_dstore *store, uint64_t g, struct lz_err *err)
{
	struct lz_dstore_participant a;
	int r = lz_dstore_participant_get(store, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &a, err);
	if (r < 0 && r != -ENOENT)
		return r;
	enum lz_dstore_phase phase = r == -ENOENT ? LZ_DSTORE_PHASE_CLEAN : a.phase;
	if (r >= 0)
		lz_dstore_participant_clear(&a);
	if (phase == LZ_DSTORE_PHASE_CLEAN)
		return lz_dstore_participant_release_intent(store, g, LZ_DSTORE_ROLE_PREPARED_LOWER, err);
	if (phase != LZ_DSTORE_PHASE_RELEASE &&
	    (r = lz_dstore_participant_release_intent(store, g, LZ_DSTORE_ROLE_STATE_ANCHOR, err)) < 0)
		return r;
	return lz_dstore_anchor_unmounted(store, g, err);
}

/* Spec 3.6: a lease is released only on its Domain's matching evidence.
 * Leaves why empty with the generation's prepared_lower record in release
 * intent on the lease's artifact (committing that intent when the record
 * is acquiring or active); otherwise says why the lease stays: the record
 * is missing, unreadable, names another artifact (or none: clean), or
 * cannot take release intent. */
static void judge_lower(lz_dstore *store, const struct lz_catalog_lease *l, char *why, size_t cap)
{
	struct lz_err e = { 0, "" };
	struct lz_dstore_participant p;
	int r = lz_dstore_participant_get(store, l->generation, LZ_DSTORE_ROLE_PREPARED_LOWER, &p, &e);
	if (r == -ENOENT) {
		snprintf(why, cap, "the Domain Store has no prepared_lower record of it");
		return;
	}
	if (r < 0) {
		snprintf(why, cap, "its prepared_lower record cannot be read: %s", e.msg);
		return;
	}
	enum lz_dstore_phase phase = p.phase;
	if (!p.has_artifact)
		snprintf(why, cap, "its prepared_lower record (%s) names no artifact", lz_dstore_phase_name(phase));
	else if (strcmp(p.artifact_id, l->artifact_id) != 0)
		snprintf(why, cap, "its prepared_lower record (%s) names artifact %.12s", lz_dstore_phase_name(phase),
			 p.artifact_id);
	lz_dstore_participant_clear(&p);
	if (why[0] || phase == LZ_DSTORE_PHASE_RELEASE)
		return;
	if (phase != LZ_DSTORE_PHASE_ACQUIRING && phase != LZ_DSTORE_PHASE_ACTIVE)
		snprintf(why, cap, "its prepared_lower record is %s", lz_dstore_phase_name(phase));
	else if (record_release_intent(store, l->generation, &e) < 0)
		snprintf(why, cap, "its release intent cannot be recorded: %s", e.msg);
}

int lz_leaserecovery_run(lz_dstore *store, int storage_root_fd, const char *domain_hex, int64_t deadline,
			 lz_leaserecovery_report_fn *report, void *ctx, size_t *ret_released,
			 struct lz_err *err)
{
	_cleanup_free_ struct lz_catalog_lease *v = NULL;
	size_t n = 0, released = 0;
	int r = lz_catalog_lease_list(storage_root_fd, NULL, &v, &n, err);
	if (r < 0)
		return lz_err_prefix(err, r, "lease recovery: ");
	for (size_t i = 0; i < n; i++) {
		const struct lz_catalog_lease *l = &v[i];
		if (strcmp(l->domain_id, domain_hex) != 0)
			continue;
		/* Room for an lz_err message in why, and for why in line. */
		char why[LZ_ERR_MSG_MAX + 256], line[LZ_ERR_MSG_MAX + 512];
		lz_leaserecovery_judge(store, l->generation, deadline, why, sizeof(why));
		if (!why[0])
			judge_lower(store, l, why, sizeof(why));
		/* Spec 3.6 step 4: the exact lease, rechecked under the lock. */
		struct recheck c = { store, l->generation, l->artifact_id, false };
		struct lz_err e = { 0, "" };
		r = why[0] ? 0
			   : lz_catalog_lease_release(storage_root_fd, l->artifact_id, domain_hex, l->generation,
						      release_recheck, &c, &e);
		if (r < 0 && c.refused)
			snprintf(why, sizeof(why), "rechecked under the catalog lock: %s", e.msg);
		if (why[0]) {
			snprintf(line, sizeof(line), "kept the catalog lease of generation %llu on artifact %.12s: %s",
				 (unsigned long long)l->generation, l->artifact_id, why);
			report(ctx, line);
			continue;
		}
		if (r < 0 && r != -ENOENT) {
			if (err)
				*err = e;
			return lz_err_prefix(err, r, "lease recovery: ");
		}
		if (r == -ENOENT)
			snprintf(line, sizeof(line),
				 "the catalog lease of lost generation %llu on artifact %.12s was already absent",
				 (unsigned long long)l->generation, l->artifact_id);
		else
			snprintf(line, sizeof(line),
				 "released the catalog lease of lost generation %llu on artifact %.12s: every process, "
				 "mount and namespace it recorded is gone",
				 (unsigned long long)l->generation, l->artifact_id);
		released += r == 0;
		/* Step 5, the lease gone: Domain clean. */
		size_t len = strlen(line);
		if (lz_dstore_participant_clean(store, l->generation, LZ_DSTORE_ROLE_PREPARED_LOWER, &e) < 0)
			snprintf(line + len, sizeof(line) - len, "; its prepared_lower record stays in release: %s",
				 e.msg);
		report(ctx, line);
	}
	if (ret_released)
		*ret_released = released;
	return 0;
}

/* Spec 3.6 "Domain clean": the Domain's evidence outlives every catalog
 * lease of its generation, kept ones included. */
static int no_lease_left(int storage_root_fd, const char *domain_hex, uint64_t g, struct lz_err *err)
{
	_cleanup_free_ struct lz_catalog_lease *v = NULL;
	size_t n = 0;
	int r = lz_catalog_lease_list(storage_root_fd, NULL, &v, &n, err);
	if (r < 0)
		return lz_err_prefix(err, r, "the catalog's leases cannot be read: ");
	for (size_t i = 0; i < n; i++)
		if (v[i].generation == g && strcmp(v[i].domain_id, domain_hex) == 0)
			return lz_err_set(err, EBUSY, "its catalog lease on artifact %.12s still exists",
					  v[i].artifact_id);
	return 0;
}

int lz_leaserecovery_retire_lower(lz_dstore *store, int storage_root_fd, const char *domain_hex, uint64_t g,
				  struct lz_err *err)
{
	struct lz_dstore_participant p;
	int r = lz_dstore_participant_get(store, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &p, err);
	if (r == -ENOENT) {
		lz_err_clear(err);
		return 0;
	}
	if (r < 0)
		return r;
	enum lz_dstore_phase phase = p.phase;
	lz_dstore_participant_clear(&p);
	if (phase == LZ_DSTORE_PHASE_CLEAN)
		return 0;
	if ((r = no_lease_left(storage_root_fd, domain_hex, g, err)) < 0)
		return r;
	if (phase == LZ_DSTORE_PHASE_ACQUIRING || phase == LZ_DSTORE_PHASE_ACTIVE)
		r = lz_dstore_participant_release_intent(store, g, LZ_DSTORE_ROLE_PREPARED_LOWER, err);
	return r < 0 ? r : lz_dstore_participant_clean(store, g, LZ_DSTORE_ROLE_PREPARED_LOWER, err);
}
