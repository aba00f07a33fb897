/* Domain Store (spec 3.3 "Domain and Session Lifecycle Refinement", "Host
 * process identity and causal acquisition refinement"; 3.4 "Session
 * Terminals"; 3.6 "Durable generation document refinement"; 3.7 "Network
 * Isolation", "Durable encoding"; FR-19; C-REFINEMENT: sqlite3 replaces
 * redb).
 *
 * One sqlite3 database, `domain.sqlite`, directly beneath the Domain Root
 * (the persistent per-Domain directory). It holds the Domain's generation
 * document in typed tables: generations with their minted component IDs,
 * one participant row per (generation, role) with its ownership snapshot
 * (the network participant's includes the network readiness fingerprint,
 * FR-19), the State Anchor's mount identities, and Session Terminal rows.
 *
 * Ownership: only the Host Coordinator that holds the Domain's exclusive
 * flock opens the store, and it keeps the handle for its whole lifetime.
 * The store takes no lock of its own; that flock is what makes this
 * process the only opener (spec 3.6). A Runtime Supervisor, a Client CLI
 * or a status tool never opens it. The handle is single-threaded (the
 * HC's event loop) and must not be used in a forked child.
 *
 * Every call is one sqlite transaction (BEGIN IMMEDIATE -> store identity
 * -> the operation -> COMMIT): an interrupted write leaves the last
 * committed document, never half a decision. Inside a batch
 * (lz_dstore_batch_begin) a call is a savepoint of the batch's one
 * transaction instead: a refused call still changes nothing, and the
 * batch commits what the calls before and after it did
 * (lz_dstore_batch_abort rolls the whole batch back instead). Store
 * identity ('lazaret-domain-store-v1', version LZ_DSTORE_STORE_VERSION,
 * 4) is accepted before any other row is read. A version 2 or 3 store
 * whose schema is exactly that version's is upgraded in place: the later
 * tables are added and the version raised in the same transaction
 * (sqlstore.h "Upgrades"). Unversioned, unknown and newer databases, and
 * older ones with any other schema (version 1, whose participants table
 * lacks the network roles, included), refuse with -EPROTO and are left
 * byte for byte unchanged. Only an empty database, and only at
 * lz_dstore_open, gets the schema.
 *
 * The lifecycle, enforced here (each illegal move refuses with -ESTALE and
 * a message naming generation, role and phases; the row is unchanged):
 *
 *  Generation:  starting -> published -> stopping -> stopped | failed,
 *               forward moves only (any later state; never the same one).
 *               'stopped' additionally needs every participant clean and
 *               every session clean (-EBUSY otherwise); 'failed' keeps
 *               whatever evidence remains for bootstrap recovery. A new
 *               generation (previous maximum + 1, first 1) is refused with
 *               -EBUSY while an earlier one is not stopped or failed, and
 *               with -ESTALE when earlier rows name another Domain.
 *               starting -> published needs the same generation's network
 *               participant active (spec 3.3 "active ... publication
 *               ownership is committed", 3.7): sessions are admitted only
 *               after network readiness, and sessions already need a
 *               published generation. The other moves (starting ->
 *               stopping | failed included) do not. A published
 *               generation reads without its participants: a network
 *               released later does not unpublish it.
 *
 *  Participant (spec 3.3): absent -> intent -> acquiring -> active ->
 *               release -> clean.
 *   - intent is bare: no process, artifact, lease, mount or readiness. It is
 *     recorded only while the generation is starting or published.
 *   - Recording the first physical field moves intent to acquiring; fields
 *     are recorded only in intent or acquiring, only while the generation
 *     is starting, published or stopping (teardown may still have to stage
 *     a child it already spawned), and only move absent -> present.
 *     Recorded evidence is never replaced or cleared
 *     except by clean: a second artifact, a second lease, a second mount
 *     at the same path, or any field after activation or release, refuses.
 *   - The process slot moves unassigned -> staged -> committed with the
 *     exact same identity (boot ID, pidfs device and inode, PID, start
 *     time): the acquired child edges (sandbox, runtime_supervisor,
 *     attached_runsc, connectivity_helper = slirp4netns). Only the direct
 *     existing-process edges enter committed directly
 *     (lz_dstore_participant_enter_process): host_coordinator (the HC
 *     records itself) and network (the already committed Runtime
 *     Supervisor, spec 3.3 "Network RS"). An entered identity is as
 *     immutable as a committed one. Identities must be from the current
 *     boot.
 *   - network readiness (spec 3.6, 3.7, FR-19): the network participant
 *     records its readiness fingerprint once, only while the generation
 *     is starting, only in intent or acquiring with its process slot
 *     committed, and only while the same generation's
 *     connectivity_helper is active ("connectivity-helper ownership
 *     records ... exact committed pidfs ownership before network
 *     ownership records readiness"). It is never replaced, not even by
 *     the same value.
 *   - active needs all role evidence (no bare intent becomes active):
 *       prepared_lower      artifact ID and held lease
 *       state_anchor        at least one mount identity, and the same
 *                           generation's prepared_lower active (a mount is
 *                           never recorded over an unleased lower either).
 *                           There is no "no mounts" State Anchor: its
 *                           overlay root is itself a mount.
 *       sandbox, runtime_supervisor, attached_runsc, host_coordinator,
 *       connectivity_helper a committed process slot
 *       network             a committed process slot and the recorded
 *                           network readiness fingerprint
 *     and the generation starting or published.
 *   - intent, acquiring or active -> release keeps everything (a staged
 *     identity stays exact cleanup authority). Release and clean are
 *     allowed in any generation state, failed included (recovery).
 *   - release -> clean, and bare intent -> clean (after the caller's
 *     runtime-absence check), clear the process slot, artifact, lease,
 *     mounts and network readiness but keep the row: clean is terminal.
 *     acquiring and active must record release intent first.
 *   - prepared_lower release and clean need the same generation's
 *     state_anchor absent or clean (spec 3.6: a mounted State Anchor never
 *     becomes unleased). lz_dstore_anchor_unmounted commits "State Anchor
 *     clean" and "prepared-lower release intent" in one transaction.
 *   - connectivity_helper clean needs the same generation's network
 *     absent or clean (its readiness was recorded over the committed
 *     helper); release intent of the helper is not ordered.
 *
 *  Session Terminal (spec 3.4): intent -> running -> release -> clean.
 *   - begin needs a published generation; the store mints the Session ID.
 *   - the exec-client slot is staged in intent (generation published or
 *     stopping); lz_dstore_session_commit_running promotes it to committed
 *     (same identity), records the guest leader PID, start time and process
 *     group, and marks the session running in one transaction; it needs
 *     a published generation whose host_coordinator participant is active
 *     (the committed HC the terminal belongs to).
 *   - intent or running -> release keeps everything; release -> clean, or
 *     intent with an unassigned exec slot -> clean, clears the exec slot
 *     and the guest identity.
 *
 * What the caller must do (the store cannot see processes or mounts):
 * stage only an identity formed from a retained pidfd (lz_pidref_from_pidfd),
 * commit only after target readiness, record clean only after proving
 * absence, and follow spec 3.6's order around the Storage Catalog: intent
 * and artifact here, then lz_catalog_lease_acquire, then
 * lz_dstore_participant_set_lease_held; lease release after
 * lz_dstore_anchor_unmounted, then participant_clean(prepared_lower).
 * For the network: commit and activate connectivity_helper once slirp4netns
 * has configured the namespace, enter the network participant with the
 * Runtime Supervisor's own identity (the store does not compare it with
 * the runtime_supervisor row), and record readiness only after physical
 * attestation; tear down network before connectivity_helper.
 *
 * Threat: a planted, foreign or future database being reinterpreted; a
 * replaced process identity satisfying a role; a lost transition leaving a
 * mounted anchor unleased. File confinement as in sqlstore.h: domain.sqlite
 * and its journal, -wal and -shm files are opened beneath the retained
 * Domain Root descriptor and must be regular, ours, 0600, singly linked;
 * the store rechecks that before every transaction of its long-lived
 * connection. Once its identity is checked the store keeps a write-ahead
 * log (one sync a commit); a store an earlier Lazaret left with a rollback
 * journal is switched at that open.
 *
 * Conventions: 0 on success, -errno on failure with a message in err; ret_
 * parameters untouched on failure.
 *   -EINVAL   malformed argument, or a field the role does not have
 *   -EPROTO   not a Domain Store of version 4 (or 2 or 3, upgraded), or a
 *             row it cannot hold
 *   -EPERM, -ELOOP, -ENOTDIR, -EISDIR, -EXDEV  unsafe Domain Root,
 *             database, journal, -wal or -shm file
 *   -ENOENT   no such generation, participant or session
 *   -ESTALE   an illegal lifecycle move, replaced evidence, an identity
 *             that differs from the staged one or is from another boot,
 *             network readiness before the helper is active, publication
 *             without an active network participant
 *   -EBUSY    a generation is still live, or rows are not yet clean
 *   -EOVERFLOW generation numbers exhausted; too many mounts or sessions */
#ifndef LZ_DOMAINSTORE_H
#define LZ_DOMAINSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc/pidref.h"
#include "util/err.h"

#define LZ_DSTORE_STORE_NAME "lazaret-domain-store-v1"
#define LZ_DSTORE_STORE_VERSION 4 /* 2: network, connectivity_helper participants; 3: escalations;
                                   * 4: rs_namespaces */
#define LZ_DSTORE_DB_NAME "domain.sqlite"

#define LZ_DSTORE_HEX64_LEN 64    /* Domain ID, fingerprints, artifact ID */
#define LZ_DSTORE_ID_HEX_LEN 32   /* minted IDs: 16 random bytes */
#define LZ_DSTORE_PATH_MAX 4096   /* mount path bytes */
#define LZ_DSTORE_MOUNTS_MAX 256  /* mounts per participant */
#define LZ_DSTORE_SESSIONS_MAX 65536 /* session rows per generation */
#define LZ_DSTORE_LIST_MAX 1024   /* generation_list bound */

typedef struct lz_dstore lz_dstore;

enum lz_dstore_gen_state {
	LZ_DSTORE_GEN_STARTING = 1,
	LZ_DSTORE_GEN_PUBLISHED = 2,
	LZ_DSTORE_GEN_STOPPING = 3,
	LZ_DSTORE_GEN_STOPPED = 4, /* terminal: everything clean */
	LZ_DSTORE_GEN_FAILED = 5,  /* terminal: evidence kept for recovery */
};

enum lz_dstore_role {
	LZ_DSTORE_ROLE_PREPARED_LOWER = 1,
	LZ_DSTORE_ROLE_STATE_ANCHOR = 2,
	LZ_DSTORE_ROLE_SANDBOX = 3,
	LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR = 4,
	LZ_DSTORE_ROLE_ATTACHED_RUNSC = 5,
	LZ_DSTORE_ROLE_HOST_COORDINATOR = 6,
	LZ_DSTORE_ROLE_CONNECTIVITY_HELPER = 7, /* slirp4netns (FR-16) */
	LZ_DSTORE_ROLE_NETWORK = 8,             /* the Runtime Supervisor, FR-19 */
};
#define LZ_DSTORE_ROLE_COUNT 8

enum lz_dstore_phase {
	LZ_DSTORE_PHASE_INTENT = 1,
	LZ_DSTORE_PHASE_ACQUIRING = 2,
	LZ_DSTORE_PHASE_ACTIVE = 3,
	LZ_DSTORE_PHASE_RELEASE = 4,
	LZ_DSTORE_PHASE_CLEAN = 5,
};

enum lz_dstore_session_state {
	LZ_DSTORE_SESSION_INTENT = 1,
	LZ_DSTORE_SESSION_RUNNING = 2,
	LZ_DSTORE_SESSION_RELEASE = 3,
	LZ_DSTORE_SESSION_CLEAN = 4,
};

/* A durable host-process slot (spec 3.3). id is all zero when UNASSIGNED. */
enum lz_dstore_slot {
	LZ_DSTORE_SLOT_UNASSIGNED = 0,
	LZ_DSTORE_SLOT_STAGED = 1,
	LZ_DSTORE_SLOT_COMMITTED = 2,
};

struct lz_dstore_process {
	enum lz_dstore_slot phase;
	struct lz_pidref id;
};

struct lz_dstore_generation {
	uint64_t generation;
	char domain_id[LZ_DSTORE_HEX64_LEN + 1];
	char fingerprint[LZ_DSTORE_HEX64_LEN + 1];
	enum lz_dstore_gen_state state;
	int64_t created; /* CLOCK_REALTIME seconds */
	uint8_t boot_id[16];
	char coordinator_id[LZ_DSTORE_ID_HEX_LEN + 1]; /* Session Coordinator ID */
	char sidecar_id[LZ_DSTORE_ID_HEX_LEN + 1];     /* Network Sidecar ID */
	char sandbox_id[LZ_DSTORE_ID_HEX_LEN + 1];     /* Agent Sandbox ID */
};

/* Mount identity: the mount ID (statx STATX_MNT_ID_UNIQUE) and the device
 * and inode of the mount's root. */
struct lz_dstore_mount {
	char path[LZ_DSTORE_PATH_MAX + 1]; /* absolute */
	uint64_t mnt_id;
	uint64_t dev;
	uint64_t ino;
};

struct lz_dstore_participant {
	uint64_t generation;
	enum lz_dstore_role role;
	enum lz_dstore_phase phase;
	struct lz_dstore_process process;          /* process roles only */
	bool has_artifact;                         /* prepared_lower only */
	char artifact_id[LZ_DSTORE_HEX64_LEN + 1]; /* "" without one */
	bool lease_held;                           /* prepared_lower only */
	char network_ready[LZ_DSTORE_HEX64_LEN + 1]; /* network only; "" when not recorded */
	size_t n_mounts;                           /* state_anchor only */
	struct lz_dstore_mount *mounts; /* owned, ordered by path; NULL when none */
};

/* Guest identity of a Session Terminal, relative to the exact container. */
struct lz_dstore_guest {
	uint64_t leader_pid;
	uint64_t leader_start_time;
	uint64_t pgid;
};

struct lz_dstore_session {
	uint64_t generation;
	char session_id[LZ_DSTORE_ID_HEX_LEN + 1];
	enum lz_dstore_session_state state;
	int64_t created;
	struct lz_dstore_process exec; /* the runsc exec client */
	bool has_guest;
	struct lz_dstore_guest guest;
};

/* ---- handle ------------------------------------------------------------- */

/* domain_root_fd: the validated Domain Root (O_PATH|O_DIRECTORY is enough),
 * a directory owned by the invoking user with mode 0700. The handle keeps
 * its own duplicate of it; the caller's descriptor is not taken over.
 * Creates domain.sqlite when absent and checks the store identity. */
int lz_dstore_open(int domain_root_fd, lz_dstore **ret, struct lz_err *err);

/* Accepts NULL. */
void lz_dstore_close(lz_dstore *h);

/* Spec 3.3 makes each transition durable before the action it announces;
 * transitions with no action between them may become durable together.
 * lz_dstore_batch_begin opens one transaction (-EBUSY when one is open)
 * that every call joins until lz_dstore_batch_end commits it; a crash in
 * between leaves the document as before the batch. The caller keeps every
 * action out of a batch: the Host Coordinator refuses its actions while
 * lz_dstore_in_batch (core/runtime/coordinator.c). lz_dstore_batch_abort
 * rolls the batch back, calls that succeeded in it included: for
 * transitions that must be durable together or not at all. Closing the
 * handle in a batch rolls it back too. End and abort close the batch
 * whatever they return; -EPROTO when none is open. */
int lz_dstore_batch_begin(lz_dstore *h, struct lz_err *err);
int lz_dstore_batch_end(lz_dstore *h, struct lz_err *err);
int lz_dstore_batch_abort(lz_dstore *h, struct lz_err *err);
bool lz_dstore_in_batch(const lz_dstore *h);

/* ---- generations -------------------------------------------------------- */

/* Records generation (previous maximum + 1) in state starting with the
 * Domain ID and Configuration Fingerprint (64 lowercase hex each), the
 * current boot ID, and freshly minted coordinator, sidecar and sandbox
 * IDs. */
int lz_dstore_generation_begin(lz_dstore *h, const char *domain_id_hex,
			       const char *fingerprint_hex, uint64_t *ret_generation,
			       struct lz_err *err);

int lz_dstore_generation_get(lz_dstore *h, uint64_t generation,
			     struct lz_dstore_generation *ret, struct lz_err *err);

/* A forward move; published needs the network participant active. */
int lz_dstore_generation_set_state(lz_dstore *h, uint64_t generation,
				   enum lz_dstore_gen_state state, struct lz_err *err);

/* At most max (1..LZ_DSTORE_LIST_MAX) generations, the most recent first.
 * *ret_v is NULL when *ret_n is 0; free with free(). */
int lz_dstore_generation_list(lz_dstore *h, size_t max, struct lz_dstore_generation **ret_v,
			      size_t *ret_n, struct lz_err *err);

/* ---- participants ------------------------------------------------------- */

/* absent -> intent. */
int lz_dstore_participant_intent(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				 struct lz_err *err);

/* Process slot unassigned -> staged (process roles). */
int lz_dstore_participant_stage_process(lz_dstore *h, uint64_t generation,
					enum lz_dstore_role role, const struct lz_pidref *id,
					struct lz_err *err);

/* Process slot staged -> committed; id must equal the staged identity
 * exactly. */
int lz_dstore_participant_commit_process(lz_dstore *h, uint64_t generation,
					 enum lz_dstore_role role, const struct lz_pidref *id,
					 struct lz_err *err);

/* Process slot unassigned -> committed for a direct existing-process edge
 * (spec 3.3): host_coordinator (the HC records itself) and network (the
 * committed Runtime Supervisor); any other role is -EINVAL. */
int lz_dstore_participant_enter_process(lz_dstore *h, uint64_t generation,
					enum lz_dstore_role role, const struct lz_pidref *id,
					struct lz_err *err);

/* prepared_lower: the intended prepared-artifact ID (64 hex), once. */
int lz_dstore_participant_set_artifact(lz_dstore *h, uint64_t generation,
				       enum lz_dstore_role role, const char *artifact_id_hex,
				       struct lz_err *err);

/* prepared_lower: the exact catalog lease is held (after
 * lz_catalog_lease_acquire); needs the artifact. */
int lz_dstore_participant_set_lease_held(lz_dstore *h, uint64_t generation,
					 enum lz_dstore_role role, struct lz_err *err);

/* state_anchor: one more mount identity; path absolute, 1..PATH_MAX bytes,
 * unique within the participant; at most LZ_DSTORE_MOUNTS_MAX. */
int lz_dstore_participant_add_mount(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				    const struct lz_dstore_mount *mount, struct lz_err *err);

/* Spec 3.7 MarkNetworkReady, FR-19: the network participant records the
 * network readiness fingerprint (64 lowercase hex, binding generation,
 * configuration, policy, role and namespace identities) after physical
 * attestation succeeded; intent -> acquiring like any first field.
 * -ENOENT without the generation or its network participant; -ESTALE
 * unless the generation is starting, the participant is in intent or
 * acquiring with a committed process slot and no fingerprint yet (never
 * replaced, not even by the same value), and the same generation's
 * connectivity_helper is active. */
int lz_dstore_participant_set_network_ready(lz_dstore *h, uint64_t generation,
					    const char *fingerprint_hex, struct lz_err *err);

/* acquiring -> active, when the role's evidence is complete. */
int lz_dstore_participant_activate(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				   struct lz_err *err);

/* intent | acquiring | active -> release, keeping all evidence. */
int lz_dstore_participant_release_intent(lz_dstore *h, uint64_t generation,
					 enum lz_dstore_role role, struct lz_err *err);

/* release | intent -> clean: clears the snapshot, keeps the row.
 * prepared_lower waits for state_anchor, connectivity_helper for network
 * (absent or clean). */
int lz_dstore_participant_clean(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				struct lz_err *err);

/* Spec 3.6 unmount step 3, after the exact mount was proven absent:
 * state_anchor release -> clean and prepared_lower acquiring | active ->
 * release, in one transaction. */
int lz_dstore_anchor_unmounted(lz_dstore *h, uint64_t generation, struct lz_err *err);

/* On success the caller owns ret->mounts: lz_dstore_participant_clear. */
int lz_dstore_participant_get(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
			      struct lz_dstore_participant *ret, struct lz_err *err);

/* Frees p->mounts and resets it; accepts NULL. */
void lz_dstore_participant_clear(struct lz_dstore_participant *p);

/* sqlite's integrity check of the store (spec 3.9 verification). */
int lz_dstore_integrity(lz_dstore *h, struct lz_err *err);

/* ---- the generation's namespaces (spec 3.6 bootstrap recovery) ---------- */

/* The mount namespace the Runtime Supervisor was cloned into and the
 * network namespace it made for enforcement (the canary veth's and the
 * sandbox's), each by its Linux 6.18 namespace ID (never reused within
 * the generation's boot) and nsfs inode (proc/nsident.h). A mount
 * namespace gone takes its mounts with it, a network namespace its
 * devices; a process that has exited holds neither, even unreaped. */
enum lz_dstore_ns_kind {
	LZ_DSTORE_NS_MOUNT,   /* recorded with the Runtime Supervisor's staging */
	LZ_DSTORE_NS_NETWORK, /* recorded with the connectivity helper's */
};

struct lz_dstore_ns {
	uint64_t id;
	uint32_t inum;
};

struct lz_dstore_namespaces {
	bool have_mount, have_network;
	struct lz_dstore_ns mount, network;
};

/* Recorded once, before the process of its participant (Runtime
 * Supervisor, connectivity helper) is staged: that participant in intent
 * with no process, the generation starting; no namespace that process
 * could populate is ever unrecorded. -ESTALE otherwise, -EEXIST when
 * recorded before, -EINVAL for a zero ID or inode. */
int lz_dstore_rs_namespace_record(lz_dstore *h, uint64_t generation, enum lz_dstore_ns_kind kind,
				  const struct lz_dstore_ns *ns, struct lz_err *err);

/* Those recorded (none on a kernel before 6.18, or for a generation that
 * never staged its processes). */
int lz_dstore_rs_namespaces_get(lz_dstore *h, uint64_t generation, struct lz_dstore_namespaces *ret,
				struct lz_err *err);

/* ---- escalations (spec 3.8) ------------------------------------------------ */

/* An approved host command, recorded before it starts. */
struct lz_dstore_escalation {
	const char *request_id;  /* 32 hex */
	const char *session_id;  /* 32 hex */
	const char *argv_digest; /* 64 hex: SHA-256 of the length-framed argv */
	bool automatic;          /* by an auto_approve rule */
};

/* Records x as launching in a published (or stopping) generation; -EEXIST
 * when that request ID was recorded before (a request runs at most once,
 * spec 3.8), -ESTALE for any other generation state. */
int lz_dstore_escalation_launch(lz_dstore *h, uint64_t generation, const struct lz_dstore_escalation *x,
				struct lz_err *err);

/* launching -> ended; -ENOENT when there is no such launching record. */
int lz_dstore_escalation_end(lz_dstore *h, uint64_t generation, const char *request_id, struct lz_err *err);

/* ---- sessions ----------------------------------------------------------- */

/* A new Session Terminal in intent; *ret_session_id gets its minted ID. */
int lz_dstore_session_begin(lz_dstore *h, uint64_t generation,
			    char ret_session_id[LZ_DSTORE_ID_HEX_LEN + 1], struct lz_err *err);

/* Exec-client slot unassigned -> staged (session in intent). */
int lz_dstore_session_stage_exec(lz_dstore *h, uint64_t generation, const char *session_id,
				 const struct lz_pidref *exec, struct lz_err *err);

/* Spec 3.4 step 4: exec slot staged -> committed (exec must equal the
 * staged identity), guest identity recorded, intent -> running. guest is
 * NULL for a non-interactive session, whose cleanup goes through its exec
 * client (no process group is signalled for it). */
int lz_dstore_session_commit_running(lz_dstore *h, uint64_t generation, const char *session_id,
				     const struct lz_pidref *exec,
				     const struct lz_dstore_guest *guest, struct lz_err *err);

/* intent | running -> release, keeping all identities. */
int lz_dstore_session_release(lz_dstore *h, uint64_t generation, const char *session_id,
			      struct lz_err *err);

/* release | intent (exec unassigned) -> clean. */
int lz_dstore_session_clean(lz_dstore *h, uint64_t generation, const char *session_id,
			    struct lz_err *err);

int lz_dstore_session_get(lz_dstore *h, uint64_t generation, const char *session_id,
			  struct lz_dstore_session *ret, struct lz_err *err);

/* The generation's sessions, oldest first (then by ID); *ret_v is NULL
 * when *ret_n is 0; free with free(). */
int lz_dstore_session_list(lz_dstore *h, uint64_t generation, struct lz_dstore_session **ret_v,
			   size_t *ret_n, struct lz_err *err);

/* Sessions in intent, running or release. */
int lz_dstore_session_count_open(lz_dstore *h, uint64_t generation, uint64_t *ret_n,
				 struct lz_err *err);

/* ---- names -------------------------------------------------------------- */

/* The stored names ("starting", "state_anchor", "acquiring", "running",
 * "staged"), or NULL for a value outside the enum. */
const char *lz_dstore_gen_state_name(enum lz_dstore_gen_state s);
const char *lz_dstore_role_name(enum lz_dstore_role r);
const char *lz_dstore_phase_name(enum lz_dstore_phase p);
const char *lz_dstore_session_state_name(enum lz_dstore_session_state s);
const char *lz_dstore_slot_name(enum lz_dstore_slot s);

/* Whether kind ("generation", "participant", "session") may move from ->
 * to by the protocol models' table (core/store/moves.h, issue 17); every
 * write of the store checks it. */
bool lz_dstore_move_listed(const char *kind, const char *from, const char *to);

#endif
