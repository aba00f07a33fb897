/* The Host Coordinator's mechanisms (spec 3.1, 3.3, 3.4, 3.6, 3.7).
 *
 * The HC is the Domain's protocol face and lifetime authority. Lua
 * (lua/lazaret/runtime/hc.lua) orders the steps of a generation; this
 * module performs them and keeps every check, so a sequencing mistake can
 * stop a launch but never weaken it:
 *
 *  - Physical steps acquire evidence and hold it here: the prepared
 *    artifact and its tree, the catalog lease, the RS and what it reports
 *    (mount identities, the staged slirp4netns and runsc identities, the
 *    readiness record), the judged network readiness fingerprint.
 *  - Domain Store transitions (lz_hc_intent ... lz_hc_clean) name a role
 *    only; the evidence comes from what this HC holds, never from the
 *    caller, and the store refuses every illegal move (domainstore.h).
 *    On top of the store's own rules:
 *      * the RS starts only after every role it creates has durable intent
 *        and the prepared lower is active (leased);
 *      * an RS-reported identity is acknowledged only once the store holds
 *        it staged for that role (spec 3.3 step 6);
 *      * process identities are committed, and the network participant
 *        entered, only after the network attestation succeeded (step 9:
 *        commit after target readiness);
 *      * clean needs absence proof: the RS reaped (its PID and mount
 *        namespaces, runsc, the sandbox and slirp4netns ended with it) or
 *        never started; the prepared lower's catalog lease released.
 *  - lz_hc_close records a generation left live as failed, whatever the
 *    caller did, and salvages its logs into hc.log.
 * Every child is acquired through the broker; every signal and wait uses a
 * retained pidfd. */
#ifndef LZ_COORDINATOR_H
#define LZ_COORDINATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "runtime/domainverify.h"
#include "runtime/rsplan.h"
#include "runtime/rsproto.h"
#include "store/domainstore.h"
#include "util/err.h"

#define LZ_HC_MAX_SESSIONS 64
#define LZ_HC_IDLE_GRACE_MS 30000 /* serve ends when no session came by then */
#define LZ_HC_STOP_TIMEOUT_MS 30000

typedef struct lz_hc lz_hc;

/* The RS's body, run by the broker in the new namespaces with the plan. */
typedef int lz_hc_rs_main(void *plan, struct lz_err *err);

/* Evidence an HC records in the Domain Store (lz_hc_record). */
enum lz_hc_evidence {
	LZ_HC_EVIDENCE_ARTIFACT = 1, /* prepared_lower: the artifact ID looked up */
	LZ_HC_EVIDENCE_LEASE,        /* prepared_lower: the catalog lease is held */
	LZ_HC_EVIDENCE_MOUNTS,       /* state_anchor: the mount identities MOUNTS reported */
	LZ_HC_EVIDENCE_READINESS,    /* network: the judged readiness fingerprint */
};

/* ---- ownership ---------------------------------------------------------- */

/* Domain ownership (spec 3.3): the Domain flock (non-blocking: -EBUSY when
 * another HC holds it), runtime trees a dead HC left removed, the Domain
 * Store, a generation a lost HC left live recorded failed, runsc located.
 * cfg must outlive the handle. */
int lz_hc_open(const lz_config *cfg, lz_hc **ret, struct lz_err *err);

/* A new generation (starting, minted component IDs) and its runtime tree. */
int lz_hc_begin(lz_hc *hc, struct lz_err *err);

/* 0 before lz_hc_begin. */
/* Bootstrap recovery (spec 3.3, 3.6, issue 13), before lz_hc_begin and
 * ordered by lua/lazaret/runtime/recovery.lua: the lost generation (0:
 * none) and recording it failed; releasing the image leases of
 * generations proved dead (leaserecovery.h); removing their runtime trees
 * on the same proof; then lz_hc_recovered, which refuses (-EBUSY) while
 * anything of an earlier generation is kept, and without which
 * lz_hc_begin refuses. report gets one line per decision. */
typedef void lz_hc_report(void *ctx, const char *line);
int lz_hc_lost_generation(lz_hc *hc, uint64_t *ret, struct lz_err *err);
int lz_hc_record_lost(lz_hc *hc, uint64_t generation, struct lz_err *err);
int lz_hc_release_lost_leases(lz_hc *hc, lz_hc_report *report, void *ctx, struct lz_err *err);
int lz_hc_clean_runtime(lz_hc *hc, lz_hc_report *report, void *ctx, struct lz_err *err);
/* The store's Domain clean of failed generations proved gone: their
 * participants and sessions through release intent to clean. */
int lz_hc_retire_lost(lz_hc *hc, lz_hc_report *report, void *ctx, struct lz_err *err);
int lz_hc_recovered(lz_hc *hc, struct lz_err *err);

/* The prepared lower's artifact ID once looked up, else NULL. */
const char *lz_hc_artifact(const lz_hc *hc);
uint64_t lz_hc_generation(const lz_hc *hc);

/* ---- prepared lower (spec 3.6 lease acquisition and release) ------------- */

/* Resolves the profile's image to its published prepared artifact and
 * opens its tree (the artifact evidence). */
int lz_hc_lower_lookup(lz_hc *hc, struct lz_err *err);

/* Step 2: inserts the exact (artifact, Domain, generation) lease in one
 * catalog transaction; needs prepared_lower intent with this artifact. */
int lz_hc_lease_acquire(lz_hc *hc, struct lz_err *err);

/* Release step 4: under the catalog lock, rechecks that prepared_lower is
 * in release and the RS is gone, then removes only the exact lease (an
 * absent lease is accepted). No lease held: nothing to do. */
int lz_hc_lease_release(lz_hc *hc, struct lz_err *err);

/* ---- the Runtime Supervisor ------------------------------------------------ */

/* Builds the plan (rsplan.h), the bundle (bundle.h) and this generation's
 * canary key and challenge, then starts the RS through the broker in new
 * user (verified map), PID and mount namespaces; the broker's staged hook
 * stages the RS in the store before release. Needs prepared_lower active
 * and intent for state_anchor, runtime_supervisor, attached_runsc,
 * sandbox, connectivity_helper and network. */
int lz_hc_rs_spawn(lz_hc *hc, lz_hc_rs_main *rs_main, struct lz_err *err);

/* Receives the RS's next record, which must be of type (LZ_RS_MOUNTS,
 * LZ_RS_HELPER_STAGED, LZ_RS_STAGED or LZ_RS_READY) and this generation's,
 * and holds its evidence. FAILED refuses with the RS's reason (-EIO);
 * READY must name the staged runsc. */
int lz_hc_rs_expect(lz_hc *hc, enum lz_rs_msg_type type, struct lz_err *err);

/* Spec 3.3 steps 6-7: echoes the identity held for role
 * (connectivity_helper or attached_runsc) once the store holds exactly it
 * staged; the RS then releases the child. */
int lz_hc_rs_ack(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);

/* Spec 3.7 MarkNetworkReady: every predicate of the READY record, the
 * init's keyed answer to this generation's challenge, the RS's network
 * namespace read by the HC itself, then the readiness fingerprint
 * (lz_hc_readiness). */
int lz_hc_attest_network(lz_hc *hc, struct lz_err *err);

/* The judged readiness fingerprint (64 hex), or NULL. */
const char *lz_hc_readiness(const lz_hc *hc);

/* What the RS's launch steps took, as its READY record says ("mount 4.1,
 * start_router 12.0, ..." in ms; for the log only), or NULL before READY. */
const char *lz_hc_rs_steps(const lz_hc *hc);

/* The reason the RS gave when it failed (its FAILED record: a lost
 * workspace router, network helper or sandbox), or NULL. */
const char *lz_hc_rs_failure(const lz_hc *hc);

/* Spec 3.6 unmount steps 2: STOP, then the RS's exact unmount and absence
 * proof (STOPPED), or, when it could not report, its reaping (its mount
 * namespace ended with it). The RS is reaped either way, at most
 * LZ_HC_STOP_TIMEOUT_MS; without any proof -EIO and the mounts count as
 * present. No RS: nothing to do. */
int lz_hc_rs_stop(lz_hc *hc, struct lz_err *err);

/* ---- store batches (spec 3.3) ------------------------------------------- */

/* The store transitions between these commit as one transaction
 * (lz_dstore_batch_begin). While a batch is open every action of the
 * handle (begin, lease, the RS, publication, serving) refuses with
 * -EBUSY: a transition is durable before the action that follows it. */
int lz_hc_batch_begin(lz_hc *hc, struct lz_err *err);
int lz_hc_batch_end(lz_hc *hc, struct lz_err *err);

/* ---- publication and sessions ------------------------------------------- */

/* Listens on the host-private socket (SR-10) and records the generation
 * published (the store needs the network participant active). */
int lz_hc_publish(lz_hc *hc, struct lz_err *err);

/* Spec 3.9: the State Anchors a reset of paths (n == 0: all) would
 * discard, and the reset itself, on a coordinator that holds the Domain
 * (lz_hc_open) and began no generation (runtime/anchorreset.h). */
int lz_hc_reset_plan(lz_hc *hc, const char *const *paths, size_t n, char ***ret_v, size_t *ret_n,
		     struct lz_err *err);
int lz_hc_reset(lz_hc *hc, const char *const *planned, size_t n, struct lz_err *err);

/* Spec 3.9: structural verification on the same terms
 * (runtime/domainverify.h); returns how many checks failed. */
int lz_hc_verify(lz_hc *hc, lz_domain_verify_report *report, void *ctx, struct lz_err *err);

/* Spec 3.8: the route of a verified escalation request. The router (the
 * Lua sequence) decides; the coordinator enforces what it may decide:
 * AUTO only when an auto_approve rule matched (rule >= 0), PROMPT only in
 * the requesting session's own terminal, and anything else is a denial
 * with text as its message. */
enum lz_hc_route_action { LZ_HC_ROUTE_DENY, LZ_HC_ROUTE_PROMPT, LZ_HC_ROUTE_AUTO };

#define LZ_HC_ROUTE_TEXT_MAX 16384

struct lz_hc_route_query {
	const char *profile;
	const char *session_id; /* hex; "" when no live session holds the capability */
	bool terminal;          /* that session has a terminal */
	bool prompt_busy;       /* another prompt is up in it */
	uint16_t rows, cols;    /* its terminal, as the developer's client reported it */
	int rule;               /* the matching auto_approve rule, or -1 */
	char *const *argv;      /* as requested: any byte but NUL */
	size_t argc;
	const char *cwd, *why;
};

struct lz_hc_route {
	enum lz_hc_route_action action;
	char text[LZ_HC_ROUTE_TEXT_MAX]; /* the prompt, or why it is denied */
};

typedef void lz_hc_router(void *ctx, const struct lz_hc_route_query *q, struct lz_hc_route *ret);

/* Client Sessions (spec 3.4) until the last one ended (or none came within
 * LZ_HC_IDLE_GRACE_MS), or a stop signal came (proc/stopreq.h: 0, the
 * sessions still running told so); -EPIPE when the RS was lost. The socket
 * is closed and every session ended before it returns. Escalation requests
 * are routed through router (ctx passed back). */
int lz_hc_serve(lz_hc *hc, lz_hc_router *router, void *ctx, struct lz_err *err);

/* ---- Domain Store transitions (domainstore.h; the rules above) ----------- */

int lz_hc_intent(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);
int lz_hc_record(lz_hc *hc, enum lz_hc_evidence what, struct lz_err *err);
int lz_hc_stage(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);
int lz_hc_commit(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);
/* The direct existing-process edges: host_coordinator (this process) and
 * network (the Runtime Supervisor). */
int lz_hc_enter(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);
int lz_hc_activate(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);
int lz_hc_release(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);
int lz_hc_clean(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err);
/* Spec 3.6 unmount step 3: State Anchor clean and prepared-lower release
 * intent in one transaction, after the RS's absence proof. */
int lz_hc_anchor_unmounted(lz_hc *hc, struct lz_err *err);
int lz_hc_set_state(lz_hc *hc, enum lz_dstore_gen_state state, struct lz_err *err);
/* *ret is 0 when the role has no participant row. */
int lz_hc_phase(lz_hc *hc, enum lz_dstore_role role, enum lz_dstore_phase *ret, struct lz_err *err);

/* ---- end ------------------------------------------------------------------- */

/* Ends any session, closes the socket, kills an RS still running (it
 * takes its PID namespace with it), records a generation still live as
 * failed and copies the tail of a failed generation's runsc and
 * slirp4netns logs to standard error (hc.log), removes the runtime tree,
 * closes the store and releases the flock. Accepts NULL. */
void lz_hc_close(lz_hc *hc);

#endif
