/* Domain Store: see domainstore.h for the ownership model, the lifecycle
 * rules and the caller's part of spec 3.3, 3.4 and 3.6.
 *
 * Every entry point is one transaction on the handle's long-lived
 * connection: recheck domain.sqlite -> BEGIN IMMEDIATE -> store identity
 * -> load the rows -> decide in C -> write whole rows -> COMMIT. Each
 * transition loads the current row into a struct, checks the move, edits
 * the struct and writes it back with one UPDATE, so a refusal never leaves
 * a partial write (the transaction rolls back) and the schema's CHECK
 * constraints are a second line behind the C rules.
 *
 * u64 values (generations, pidfs device and inode, start times, mount
 * identities, guest IDs) are stored as their bit pattern in INTEGER
 * columns; "most recent" orders generations unsigned (`g < 0 DESC, g
 * DESC`). */
#include "store/domainstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/domain.h"
#include "store/sqlstore.h"
#include "util/cleanup.h"

struct lz_dstore {
	int root_fd;         /* our duplicate of the Domain Root; named in sqlite's path */
	sqlite3 *db;         /* open for the handle's lifetime */
	struct lz_sqlstore_files files; /* the validated domain.sqlite, its log and index */
	uint8_t boot_id[16]; /* current boot: identities from another are refused */
	bool batch;          /* a batch's transaction is open */
};

/* ---- schema ------------------------------------------------------------- */

#define HEX(c, n) "length(" c ") = " #n " AND " c " NOT GLOB '*[^0-9a-f]*'"
#define BYTES(c, lo, hi) "length(CAST(" c " AS BLOB)) BETWEEN " #lo " AND " #hi
#define PROCESS_ROLES                                                                 \
	"('sandbox', 'runtime_supervisor', 'attached_runsc', 'host_coordinator', " \
	"'connectivity_helper', 'network')"

/* A process slot: phase plus the v1 pidfs identity, all NULL when
 * unassigned and all present otherwise. */
#define SLOT_COLUMNS(p)                                                                  \
	p "_slot TEXT NOT NULL CHECK (" p "_slot IN ('unassigned', 'staged', 'committed')), " \
	p "_boot_id BLOB CHECK (length(" p "_boot_id) = 16), "                                \
	p "_pidfs_dev INTEGER, "                                                               \
	p "_pidfs_ino INTEGER, "                                                               \
	p "_pid INTEGER CHECK (" p "_pid BETWEEN 1 AND 4294967295), "                          \
	p "_start_time INTEGER, "
#define SLOT_CHECK(p)                                                 \
	"CHECK ((" p "_slot = 'unassigned') = (" p "_boot_id IS NULL) AND " \
	"(" p "_boot_id IS NULL) = (" p "_pidfs_dev IS NULL) AND "          \
	"(" p "_boot_id IS NULL) = (" p "_pidfs_ino IS NULL) AND "          \
	"(" p "_boot_id IS NULL) = (" p "_pid IS NULL) AND "                \
	"(" p "_boot_id IS NULL) = (" p "_start_time IS NULL)), "

static const struct lz_sqlstore_table schema[] = {
	{ "generations",
	  "CREATE TABLE generations ("
	  "generation INTEGER PRIMARY KEY NOT NULL CHECK (generation <> 0), "
	  "domain_id TEXT NOT NULL CHECK (" HEX("domain_id", 64) "), "
	  "fingerprint TEXT NOT NULL CHECK (" HEX("fingerprint", 64) "), "
	  "state TEXT NOT NULL CHECK (state IN ('starting', 'published', 'stopping', 'stopped', "
	  "'failed')), "
	  "created INTEGER NOT NULL, "
	  "boot_id BLOB NOT NULL CHECK (length(boot_id) = 16), "
	  "coordinator_id TEXT NOT NULL UNIQUE CHECK (" HEX("coordinator_id", 32) "), "
	  "sidecar_id TEXT NOT NULL UNIQUE CHECK (" HEX("sidecar_id", 32) "), "
	  "sandbox_id TEXT NOT NULL UNIQUE CHECK (" HEX("sandbox_id", 32) ")"
	  ") STRICT", 1 },
	{ "participants",
	  "CREATE TABLE participants ("
	  "generation INTEGER NOT NULL REFERENCES generations (generation), "
	  "role TEXT NOT NULL CHECK (role IN ('prepared_lower', 'state_anchor', 'sandbox', "
	  "'runtime_supervisor', 'attached_runsc', 'host_coordinator', 'connectivity_helper', "
	  "'network')), "
	  "phase TEXT NOT NULL CHECK (phase IN ('intent', 'acquiring', 'active', 'release', "
	  "'clean')), "
	  SLOT_COLUMNS("proc")
	  "artifact_id TEXT CHECK (" HEX("artifact_id", 64) "), "
	  "lease_held INTEGER NOT NULL CHECK (lease_held IN (0, 1)), "
	  "network_ready TEXT CHECK (" HEX("network_ready", 64) "), "
	  SLOT_CHECK("proc")
	  "CHECK (proc_slot = 'unassigned' OR role IN " PROCESS_ROLES "), "
	  "CHECK ((artifact_id IS NULL AND lease_held = 0) OR role = 'prepared_lower'), "
	  "CHECK (lease_held = 0 OR artifact_id IS NOT NULL), "
	  "CHECK (network_ready IS NULL OR (role = 'network' AND proc_slot = 'committed')), "
	  "CHECK (role <> 'network' OR phase <> 'active' OR network_ready IS NOT NULL), "
	  "CHECK (phase NOT IN ('intent', 'clean') OR "
	  "(proc_slot = 'unassigned' AND artifact_id IS NULL AND lease_held = 0 AND "
	  "network_ready IS NULL)), "
	  "PRIMARY KEY (generation, role)"
	  ") STRICT, WITHOUT ROWID", 1 },
	{ "participant_mounts",
	  "CREATE TABLE participant_mounts ("
	  "generation INTEGER NOT NULL, "
	  "role TEXT NOT NULL CHECK (role = 'state_anchor'), "
	  "path TEXT NOT NULL CHECK (" BYTES("path", 1, 4096) " AND substr(path, 1, 1) = '/'), "
	  "mnt_id INTEGER NOT NULL, "
	  "dev INTEGER NOT NULL, "
	  "ino INTEGER NOT NULL, "
	  "PRIMARY KEY (generation, role, path), "
	  "FOREIGN KEY (generation, role) REFERENCES participants (generation, role)"
	  ") STRICT, WITHOUT ROWID", 1 },
	{ "sessions",
	  "CREATE TABLE sessions ("
	  "generation INTEGER NOT NULL REFERENCES generations (generation), "
	  "session_id TEXT NOT NULL CHECK (" HEX("session_id", 32) "), "
	  "state TEXT NOT NULL CHECK (state IN ('intent', 'running', 'release', 'clean')), "
	  "created INTEGER NOT NULL, "
	  SLOT_COLUMNS("exec")
	  "guest_leader_pid INTEGER, "
	  "guest_start_time INTEGER, "
	  "guest_pgid INTEGER, "
	  SLOT_CHECK("exec")
	  "CHECK ((guest_leader_pid IS NULL) = (guest_start_time IS NULL) AND "
	  "(guest_leader_pid IS NULL) = (guest_pgid IS NULL)), "
	  "CHECK (state <> 'intent' OR (exec_slot <> 'committed' AND guest_leader_pid IS NULL)), "
	  "CHECK (state <> 'running' OR exec_slot = 'committed'), "
	  "CHECK (state <> 'clean' OR (exec_slot = 'unassigned' AND guest_leader_pid IS NULL)), "
	  "PRIMARY KEY (generation, session_id)"
	  ") STRICT, WITHOUT ROWID", 1 },
	/* Spec 3.8: an approved escalation is recorded before its host
	 * process starts, so a request ID runs at most once. */
	{ "escalations",
	  "CREATE TABLE escalations ("
	  "generation INTEGER NOT NULL REFERENCES generations (generation), "
	  "request_id TEXT NOT NULL CHECK (" HEX("request_id", 32) "), "
	  "session_id TEXT NOT NULL CHECK (" HEX("session_id", 32) "), "
	  "verdict TEXT NOT NULL CHECK (verdict IN ('approved', 'auto_approved')), "
	  "argv_digest TEXT NOT NULL CHECK (" HEX("argv_digest", 64) "), "
	  "state TEXT NOT NULL CHECK (state IN ('launching', 'ended')), "
	  "created INTEGER NOT NULL, "
	  "PRIMARY KEY (generation, request_id)"
	  ") STRICT, WITHOUT ROWID",
	  3 },
	{ "rs_namespaces",
	  "CREATE TABLE rs_namespaces ("
	  "generation INTEGER NOT NULL REFERENCES generations (generation), "
	  "kind TEXT NOT NULL CHECK (kind IN ('mount', 'network')), "
	  "ns_id INTEGER NOT NULL CHECK (ns_id <> 0), "
	  "ns_inum INTEGER NOT NULL CHECK (ns_inum BETWEEN 1 AND 4294967295), "
	  "PRIMARY KEY (generation, kind)"
	  ") STRICT, WITHOUT ROWID",
	  4 },
};

static const struct lz_sqlstore_def dstore_def = {
	.store = LZ_DSTORE_STORE_NAME,
	.version = LZ_DSTORE_STORE_VERSION,
	.db_name = LZ_DSTORE_DB_NAME,
	.title = "Lazaret Domain Store",
	.noun = "Domain Store",
	.version_noun = "Domain Store",
	.root_title = "Domain Root",
	.schema = schema,
	.n_schema = LZ_ARRAY_SIZE(schema),
	.wal = true, /* only the coordinator writes it (spec 3.6); launch speed, issue 15 */
};

/* ---- names -------------------------------------------------------------- */

static const char *const gen_state_names[] = {
	[LZ_DSTORE_GEN_STARTING] = "starting", [LZ_DSTORE_GEN_PUBLISHED] = "published",
	[LZ_DSTORE_GEN_STOPPING] = "stopping", [LZ_DSTORE_GEN_STOPPED] = "stopped",
	[LZ_DSTORE_GEN_FAILED] = "failed",
};

static const char *const role_names[] = {
	[LZ_DSTORE_ROLE_PREPARED_LOWER] = "prepared_lower",
	[LZ_DSTORE_ROLE_STATE_ANCHOR] = "state_anchor",
	[LZ_DSTORE_ROLE_SANDBOX] = "sandbox",
	[LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR] = "runtime_supervisor",
	[LZ_DSTORE_ROLE_ATTACHED_RUNSC] = "attached_runsc",
	[LZ_DSTORE_ROLE_HOST_COORDINATOR] = "host_coordinator",
	[LZ_DSTORE_ROLE_CONNECTIVITY_HELPER] = "connectivity_helper",
	[LZ_DSTORE_ROLE_NETWORK] = "network",
};

static const char *const phase_names[] = {
	[LZ_DSTORE_PHASE_INTENT] = "intent",   [LZ_DSTORE_PHASE_ACQUIRING] = "acquiring",
	[LZ_DSTORE_PHASE_ACTIVE] = "active",   [LZ_DSTORE_PHASE_RELEASE] = "release",
	[LZ_DSTORE_PHASE_CLEAN] = "clean",
};

static const char *const session_state_names[] = {
	[LZ_DSTORE_SESSION_INTENT] = "intent", [LZ_DSTORE_SESSION_RUNNING] = "running",
	[LZ_DSTORE_SESSION_RELEASE] = "release", [LZ_DSTORE_SESSION_CLEAN] = "clean",
};

static const char *const slot_names[] = {
	[LZ_DSTORE_SLOT_UNASSIGNED] = "unassigned",
	[LZ_DSTORE_SLOT_STAGED] = "staged",
	[LZ_DSTORE_SLOT_COMMITTED] = "committed",
};

static const char *name_of(const char *const *names, size_t n, int v)
{
	return v >= 0 && (size_t)v < n ? names[v] : NULL;
}

/* The enum value of a stored name, or -1. */
static int value_of(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] != NULL && strcmp(names[i], s) == 0)
			return (int)i;
	return -1;
}

#define NAME(table, v) name_of(table, LZ_ARRAY_SIZE(table), (int)(v))

const char *lz_dstore_gen_state_name(enum lz_dstore_gen_state s)
{
	return NAME(gen_state_names, s);
}

const char *lz_dstore_role_name(enum lz_dstore_role r)
{
	return NAME(role_names, r);
}

const char *lz_dstore_phase_name(enum lz_dstore_phase p)
{
	return NAME(phase_names, p);
}

const char *lz_dstore_session_state_name(enum lz_dstore_session_state s)
{
	return NAME(session_state_names, s);
}

const char *lz_dstore_slot_name(enum lz_dstore_slot s)
{
	return NAME(slot_names, s);
}

/* ---- moves (core/store/moves.h) ---------------------------------------------- */

static const struct {
	const char *kind, *from, *to;
} moves[] = {
#define LZ_MOVE(k, f, t) { #k, #f, #t },
#include "store/moves.h"
#undef LZ_MOVE
};

bool lz_dstore_move_listed(const char *kind, const char *from, const char *to)
{
	for (size_t i = 0; i < LZ_ARRAY_SIZE(moves); i++)
		if (strcmp(moves[i].kind, kind) == 0 && strcmp(moves[i].from, from) == 0 &&
		    strcmp(moves[i].to, to) == 0)
			return true;
	return false;
}

/* A row of kind moving from -> to (equal: its evidence changes, it does
 * not move). The transition checks of each function come on top. */
static int check_move(const char *kind, const char *from, const char *to, struct lz_err *err)
{
	if (strcmp(from, to) == 0 || lz_dstore_move_listed(kind, from, to))
		return 0;
	return lz_err_set(err, EPROTO, "%s %s -> %s is not a move of the protocol model (core/store/moves.h)", kind,
			  from, to);
}

/* The current value of a row's state column (sql: one text column, bound
 * ?1 generation and ?2 key), for check_move. */
static int current_state(sqlite3 *db, const char *sql, uint64_t gen, const char *key, char *out, size_t n,
			 struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, sql, &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, gen, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, key, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r == 0)
		return lz_err_set(err, ENOENT, "generation %" PRIu64 " has no row %s", gen, key);
	const char *v = NULL;
	if (r > 0 && (r = lz_sqlstore_col_text(s, 0, 1, n - 1, "state", &v, err)) >= 0)
		snprintf(out, n, "%s", v);
	return r;
}

/* For messages: never NULL. */
static const char *gen_state_str(enum lz_dstore_gen_state s)
{
	const char *n = lz_dstore_gen_state_name(s);
	return n ? n : "?";
}

static const char *role_str(enum lz_dstore_role r)
{
	const char *n = lz_dstore_role_name(r);
	return n ? n : "?";
}

static const char *phase_str(enum lz_dstore_phase p)
{
	const char *n = lz_dstore_phase_name(p);
	return n ? n : "?";
}

static const char *session_state_str(enum lz_dstore_session_state s)
{
	const char *n = lz_dstore_session_state_name(s);
	return n ? n : "?";
}

static const char *slot_str(enum lz_dstore_slot s)
{
	const char *n = lz_dstore_slot_name(s);
	return n ? n : "?";
}

/* ---- roles -------------------------------------------------------------- */

static bool role_valid(enum lz_dstore_role r)
{
	return lz_dstore_role_name(r) != NULL;
}

static bool role_has_process(enum lz_dstore_role r)
{
	return r == LZ_DSTORE_ROLE_SANDBOX || r == LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR ||
	       r == LZ_DSTORE_ROLE_ATTACHED_RUNSC || r == LZ_DSTORE_ROLE_HOST_COORDINATOR ||
	       r == LZ_DSTORE_ROLE_CONNECTIVITY_HELPER || r == LZ_DSTORE_ROLE_NETWORK;
}

/* A direct existing-process edge (spec 3.3): the process exists before
 * the role, so it enters committed without a launch barrier to stage.
 * The HC records itself; the network participant's process is the
 * already committed Runtime Supervisor ("Network RS"). */
static bool role_is_direct(enum lz_dstore_role r)
{
	return r == LZ_DSTORE_ROLE_HOST_COORDINATOR || r == LZ_DSTORE_ROLE_NETWORK;
}

/* ---- argument checks ---------------------------------------------------- */

static int check_hex(const char *what, const char *s, size_t n, struct lz_err *err)
{
	if (s == NULL)
		return lz_err_set(err, EINVAL, "%s is missing", what);
	if (strnlen(s, n + 1) != n || !lz_sqlstore_is_hex(s, n))
		return lz_err_set(err, EINVAL, "%s must be exactly %zu lowercase hex digits", what, n);
	return 0;
}

static int check_role(enum lz_dstore_role role, struct lz_err *err)
{
	if (!role_valid(role))
		return lz_err_set(err, EINVAL, "unknown participant role %d", (int)role);
	return 0;
}

static int check_identity(const char *what, const struct lz_pidref *id, struct lz_err *err)
{
	if (id == NULL)
		return lz_err_set(err, EINVAL, "%s identity is missing", what);
	if (id->pid == 0)
		return lz_err_set(err, EINVAL, "%s pid must not be 0", what);
	return 0;
}

static int check_mount(const struct lz_dstore_mount *m, struct lz_err *err)
{
	if (m == NULL)
		return lz_err_set(err, EINVAL, "mount identity is missing");
	size_t n = strnlen(m->path, sizeof(m->path));
	if (n == 0 || n > LZ_DSTORE_PATH_MAX || m->path[0] != '/')
		return lz_err_set(err, EINVAL, "mount path must be absolute and at most %d bytes",
				  LZ_DSTORE_PATH_MAX);
	return 0;
}

static int check_guest(const struct lz_dstore_guest *g, struct lz_err *err)
{
	if (g == NULL)
		return lz_err_set(err, EINVAL, "guest identity is missing");
	if (g->leader_pid == 0 || g->pgid == 0)
		return lz_err_set(err, EINVAL, "guest leader pid and process group must not be 0");
	return 0;
}

static int done(int r, struct lz_err *err)
{
	return r < 0 ? lz_err_prefix(err, r, "domain store: ") : r;
}

static bool pidref_equal(const struct lz_pidref *a, const struct lz_pidref *b)
{
	return memcmp(a->boot_id, b->boot_id, sizeof(a->boot_id)) == 0 &&
	       a->pidfs_dev == b->pidfs_dev && a->pidfs_ino == b->pidfs_ino && a->pid == b->pid &&
	       a->start_time == b->start_time;
}

static int random_id(char out[LZ_DSTORE_ID_HEX_LEN + 1], struct lz_err *err)
{
	uint8_t b[LZ_DSTORE_ID_HEX_LEN / 2];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return lz_err_set(err, errno ? errno : EIO, "getrandom failed");
	lz_hex(b, sizeof(b), out);
	return 0;
}

/* ---- row codecs --------------------------------------------------------- */

/* Reads a process slot from six columns starting at i. */
static int read_slot(sqlite3_stmt *s, int i, const char *what, struct lz_dstore_process *ret,
		     struct lz_err *err)
{
	const char *name = NULL;
	int r = lz_sqlstore_col_text(s, i, 1, 32, what, &name, err);
	if (r < 0)
		return r;
	int phase = value_of(slot_names, LZ_ARRAY_SIZE(slot_names), name);
	if (phase < 0)
		return lz_err_set(err, EPROTO, "%s has an unknown slot phase", what);
	struct lz_dstore_process p = { .phase = (enum lz_dstore_slot)phase };
	if (p.phase == LZ_DSTORE_SLOT_UNASSIGNED) {
		for (int k = 1; k <= 5; k++)
			if (sqlite3_column_type(s, i + k) != SQLITE_NULL)
				return lz_err_set(err, EPROTO, "%s is unassigned but has an identity",
						  what);
		*ret = p;
		return 0;
	}
	sqlite3_int64 pid = 0;
	if ((r = lz_sqlstore_col_blob(s, i + 1, sizeof(p.id.boot_id), what, p.id.boot_id, err)) <
		    0 ||
	    (r = lz_sqlstore_col_u64(s, i + 2, what, &p.id.pidfs_dev, err)) < 0 ||
	    (r = lz_sqlstore_col_u64(s, i + 3, what, &p.id.pidfs_ino, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, i + 4, what, &pid, err)) < 0 ||
	    (r = lz_sqlstore_col_u64(s, i + 5, what, &p.id.start_time, err)) < 0)
		return r;
	if (pid < 1 || pid > UINT32_MAX)
		return lz_err_set(err, EPROTO, "%s pid %lld out of range", what, (long long)pid);
	p.id.pid = (uint32_t)pid;
	*ret = p;
	return 0;
}

/* Binds a process slot to six parameters starting at i. */
static int bind_slot(sqlite3 *db, sqlite3_stmt *s, int i, const struct lz_dstore_process *p,
		     struct lz_err *err)
{
	int r = lz_sqlstore_bind_text(db, s, i, slot_names[p->phase], err);
	if (r < 0)
		return r;
	if (p->phase == LZ_DSTORE_SLOT_UNASSIGNED) {
		for (int k = 1; k <= 5 && r >= 0; k++)
			r = lz_sqlstore_bind_null(db, s, i + k, err);
		return r;
	}
	if ((r = lz_sqlstore_bind_blob(db, s, i + 1, p->id.boot_id, sizeof(p->id.boot_id), err)) <
		    0 ||
	    (r = lz_sqlstore_bind_u64(db, s, i + 2, p->id.pidfs_dev, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, i + 3, p->id.pidfs_ino, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, i + 4, (sqlite3_int64)p->id.pid, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, i + 5, p->id.start_time, err)) < 0)
		return r;
	return 0;
}

static int read_enum(sqlite3_stmt *s, int i, const char *what, const char *const *names, size_t n,
		     int *ret, struct lz_err *err)
{
	const char *t = NULL;
	int r = lz_sqlstore_col_text(s, i, 1, 32, what, &t, err);
	if (r < 0)
		return r;
	int v = value_of(names, n, t);
	if (v < 0)
		return lz_err_set(err, EPROTO, "row field %s has an unknown value", what);
	*ret = v;
	return 0;
}

#define GEN_COLUMNS                                                                    \
	"generation, domain_id, fingerprint, state, created, boot_id, coordinator_id, " \
	"sidecar_id, sandbox_id"

static int read_generation(sqlite3_stmt *s, struct lz_dstore_generation *ret, struct lz_err *err)
{
	struct lz_dstore_generation g = { .generation = 0 };
	sqlite3_int64 created = 0;
	int state = 0, r;
	if ((r = lz_sqlstore_col_u64(s, 0, "generation", &g.generation, err)) < 0 ||
	    (r = lz_sqlstore_col_hex(s, 1, LZ_DSTORE_HEX64_LEN, "domain_id", g.domain_id, err)) <
		    0 ||
	    (r = lz_sqlstore_col_hex(s, 2, LZ_DSTORE_HEX64_LEN, "fingerprint", g.fingerprint, err)) <
		    0 ||
	    (r = read_enum(s, 3, "state", gen_state_names, LZ_ARRAY_SIZE(gen_state_names), &state,
			   err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 4, "created", &created, err)) < 0 ||
	    (r = lz_sqlstore_col_blob(s, 5, sizeof(g.boot_id), "boot_id", g.boot_id, err)) < 0 ||
	    (r = lz_sqlstore_col_hex(s, 6, LZ_DSTORE_ID_HEX_LEN, "coordinator_id",
				     g.coordinator_id, err)) < 0 ||
	    (r = lz_sqlstore_col_hex(s, 7, LZ_DSTORE_ID_HEX_LEN, "sidecar_id", g.sidecar_id, err)) <
		    0 ||
	    (r = lz_sqlstore_col_hex(s, 8, LZ_DSTORE_ID_HEX_LEN, "sandbox_id", g.sandbox_id, err)) <
		    0)
		return r;
	if (g.generation == 0)
		return lz_err_set(err, EPROTO, "generation 0 is not a generation");
	g.state = (enum lz_dstore_gen_state)state;
	g.created = created;
	*ret = g;
	return 0;
}

/* -ENOENT when absent. */
static int load_generation(sqlite3 *db, uint64_t gen, struct lz_dstore_generation *ret,
			   struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, "SELECT " GEN_COLUMNS " FROM generations WHERE generation = ?1",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, gen, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, ENOENT, "no generation %" PRIu64, gen);
	return read_generation(s, ret, err);
}

#define PARTICIPANT_COLUMNS                                                          \
	"generation, role, phase, proc_slot, proc_boot_id, proc_pidfs_dev, proc_pidfs_ino, " \
	"proc_pid, proc_start_time, artifact_id, lease_held, network_ready"

/* The schema's readiness checks again, for a row written without them:
 * only the network records readiness, only over its committed process
 * and outside intent and clean, and an active network has it. */
static int check_readiness_row(const struct lz_dstore_participant *p, struct lz_err *err)
{
	bool ready = p->network_ready[0] != '\0';
	if (ready && p->role != LZ_DSTORE_ROLE_NETWORK)
		return lz_err_set(err, EPROTO,
				  "generation %" PRIu64 " %s has network readiness; only the network "
				  "participant records it",
				  p->generation, role_str(p->role));
	if (ready && (p->process.phase != LZ_DSTORE_SLOT_COMMITTED ||
		      p->phase == LZ_DSTORE_PHASE_INTENT || p->phase == LZ_DSTORE_PHASE_CLEAN))
		return lz_err_set(err, EPROTO,
				  "generation %" PRIu64 " network has network readiness in phase %s "
				  "with the process slot %s",
				  p->generation, phase_str(p->phase), slot_str(p->process.phase));
	if (!ready && p->role == LZ_DSTORE_ROLE_NETWORK && p->phase == LZ_DSTORE_PHASE_ACTIVE)
		return lz_err_set(err, EPROTO,
				  "generation %" PRIu64 " network is active without network readiness",
				  p->generation);
	return 0;
}

/* The row without its mounts (n_mounts 0, mounts NULL). */
static int read_participant(sqlite3_stmt *s, struct lz_dstore_participant *ret,
			    struct lz_err *err)
{
	struct lz_dstore_participant p = { .generation = 0 };
	int role = 0, phase = 0, r;
	sqlite3_int64 lease = 0;
	if ((r = lz_sqlstore_col_u64(s, 0, "generation", &p.generation, err)) < 0 ||
	    (r = read_enum(s, 1, "role", role_names, LZ_ARRAY_SIZE(role_names), &role, err)) < 0 ||
	    (r = read_enum(s, 2, "phase", phase_names, LZ_ARRAY_SIZE(phase_names), &phase, err)) <
		    0 ||
	    (r = read_slot(s, 3, "process slot", &p.process, err)) < 0)
		return r;
	if (sqlite3_column_type(s, 9) != SQLITE_NULL) {
		if ((r = lz_sqlstore_col_hex(s, 9, LZ_DSTORE_HEX64_LEN, "artifact_id", p.artifact_id,
					     err)) < 0)
			return r;
		p.has_artifact = true;
	}
	if ((r = lz_sqlstore_col_i64(s, 10, "lease_held", &lease, err)) < 0)
		return r;
	if (lease != 0 && lease != 1)
		return lz_err_set(err, EPROTO, "row field lease_held is not 0 or 1");
	if (sqlite3_column_type(s, 11) != SQLITE_NULL &&
	    (r = lz_sqlstore_col_hex(s, 11, LZ_DSTORE_HEX64_LEN, "network_ready", p.network_ready,
				     err)) < 0)
		return r;
	p.role = (enum lz_dstore_role)role;
	p.phase = (enum lz_dstore_phase)phase;
	p.lease_held = lease == 1;
	if ((r = check_readiness_row(&p, err)) < 0)
		return r;
	*ret = p;
	return 0;
}

/* The row without mounts; -ENOENT when absent. */
static int load_participant(sqlite3 *db, uint64_t gen, enum lz_dstore_role role,
			    struct lz_dstore_participant *ret, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db,
				    "SELECT " PARTICIPANT_COLUMNS " FROM participants "
				    "WHERE generation = ?1 AND role = ?2",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, gen, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, role_names[role], err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, ENOENT, "generation %" PRIu64 " has no %s participant", gen,
				  role_str(role));
	return read_participant(s, ret, err);
}

/* Writes every field of p over its existing row. */
static int write_participant(sqlite3 *db, const struct lz_dstore_participant *p,
			     struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	char was[16];
	int r = current_state(db, "SELECT phase FROM participants WHERE generation = ?1 AND role = ?2", p->generation,
			      role_names[p->role], was, sizeof(was), err);
	if (r < 0 || (r = check_move("participant", was, phase_names[p->phase], err)) < 0)
		return r;
	r = lz_sqlstore_prepare(db,
				    "UPDATE participants SET phase = ?3, proc_slot = ?4, "
				    "proc_boot_id = ?5, proc_pidfs_dev = ?6, proc_pidfs_ino = ?7, "
				    "proc_pid = ?8, proc_start_time = ?9, artifact_id = ?10, "
				    "lease_held = ?11, network_ready = ?12 "
				    "WHERE generation = ?1 AND role = ?2",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, p->generation, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, role_names[p->role], err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 3, phase_names[p->phase], err);
	if (r >= 0)
		r = bind_slot(db, s, 4, &p->process, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 10, p->has_artifact ? p->artifact_id : NULL, err);
	if (r >= 0)
		r = lz_sqlstore_bind_i64(db, s, 11, p->lease_held ? 1 : 0, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 12, p->network_ready[0] ? p->network_ready : NULL,
					  err);
	if (r >= 0)
		r = lz_sqlstore_step_done(db, s, 1, err);
	return r;
}

static int count_mounts(sqlite3 *db, uint64_t gen, enum lz_dstore_role role, size_t *ret,
			struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	sqlite3_int64 n = 0;
	int r = lz_sqlstore_prepare(db,
				    "SELECT count(*) FROM participant_mounts "
				    "WHERE generation = ?1 AND role = ?2",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, gen, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, role_names[role], err);
	if (r >= 0 && (r = lz_sqlstore_step(db, s, err)) == 0)
		r = lz_err_set(err, EIO, "count returned nothing");
	if (r >= 0)
		r = lz_sqlstore_col_i64(s, 0, "count", &n, err);
	if (r < 0)
		return r;
	*ret = (size_t)n;
	return 0;
}

static int load_mounts(sqlite3 *db, struct lz_dstore_participant *p, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	_cleanup_free_ struct lz_dstore_mount *v = NULL;
	size_t n = 0, cap = 0;
	int r = lz_sqlstore_prepare(db,
				    "SELECT path, mnt_id, dev, ino FROM participant_mounts "
				    "WHERE generation = ?1 AND role = ?2 ORDER BY path",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, p->generation, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, role_names[p->role], err);
	while (r >= 0 && (r = lz_sqlstore_step(db, s, err)) > 0) {
		const char *path = NULL;
		if ((r = lz_sqlstore_list_reserve((void **)&v, &cap, n, sizeof(*v),
						  LZ_DSTORE_MOUNTS_MAX, err)) < 0 ||
		    (r = lz_sqlstore_col_text(s, 0, 1, LZ_DSTORE_PATH_MAX, "mount path", &path,
					      err)) < 0 ||
		    (r = lz_sqlstore_col_u64(s, 1, "mnt_id", &v[n].mnt_id, err)) < 0 ||
		    (r = lz_sqlstore_col_u64(s, 2, "dev", &v[n].dev, err)) < 0 ||
		    (r = lz_sqlstore_col_u64(s, 3, "ino", &v[n].ino, err)) < 0)
			break;
		memcpy(v[n].path, path, strlen(path) + 1);
		n++;
	}
	if (r < 0)
		return r;
	p->mounts = TAKE_PTR(v);
	p->n_mounts = n;
	return 0;
}

#define SESSION_COLUMNS                                                                 \
	"generation, session_id, state, created, exec_slot, exec_boot_id, exec_pidfs_dev, " \
	"exec_pidfs_ino, exec_pid, exec_start_time, guest_leader_pid, guest_start_time, "   \
	"guest_pgid"

static int read_session(sqlite3_stmt *s, struct lz_dstore_session *ret, struct lz_err *err)
{
	struct lz_dstore_session x = { .generation = 0 };
	sqlite3_int64 created = 0;
	int state = 0, r;
	if ((r = lz_sqlstore_col_u64(s, 0, "generation", &x.generation, err)) < 0 ||
	    (r = lz_sqlstore_col_hex(s, 1, LZ_DSTORE_ID_HEX_LEN, "session_id", x.session_id,
				     err)) < 0 ||
	    (r = read_enum(s, 2, "state", session_state_names, LZ_ARRAY_SIZE(session_state_names),
			   &state, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 3, "created", &created, err)) < 0 ||
	    (r = read_slot(s, 4, "exec slot", &x.exec, err)) < 0)
		return r;
	if (sqlite3_column_type(s, 10) != SQLITE_NULL) {
		if ((r = lz_sqlstore_col_u64(s, 10, "guest_leader_pid", &x.guest.leader_pid, err)) <
			    0 ||
		    (r = lz_sqlstore_col_u64(s, 11, "guest_start_time", &x.guest.leader_start_time,
					     err)) < 0 ||
		    (r = lz_sqlstore_col_u64(s, 12, "guest_pgid", &x.guest.pgid, err)) < 0)
			return r;
		x.has_guest = true;
	} else if (sqlite3_column_type(s, 11) != SQLITE_NULL ||
		   sqlite3_column_type(s, 12) != SQLITE_NULL) {
		return lz_err_set(err, EPROTO, "session %s has a partial guest identity",
				  x.session_id);
	}
	x.state = (enum lz_dstore_session_state)state;
	x.created = created;
	*ret = x;
	return 0;
}

/* -ENOENT when absent. */
static int load_session(sqlite3 *db, uint64_t gen, const char *id, struct lz_dstore_session *ret,
			struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db,
				    "SELECT " SESSION_COLUMNS " FROM sessions "
				    "WHERE generation = ?1 AND session_id = ?2",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, gen, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, id, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, ENOENT, "generation %" PRIu64 " has no session %s", gen, id);
	return read_session(s, ret, err);
}

static int write_session(sqlite3 *db, const struct lz_dstore_session *x, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	char was[16];
	int r = current_state(db, "SELECT state FROM sessions WHERE generation = ?1 AND session_id = ?2",
			      x->generation, x->session_id, was, sizeof(was), err);
	if (r < 0 || (r = check_move("session", was, session_state_names[x->state], err)) < 0)
		return r;
	r = lz_sqlstore_prepare(db,
				    "UPDATE sessions SET state = ?3, exec_slot = ?4, exec_boot_id = ?5, "
				    "exec_pidfs_dev = ?6, exec_pidfs_ino = ?7, exec_pid = ?8, "
				    "exec_start_time = ?9, guest_leader_pid = ?10, "
				    "guest_start_time = ?11, guest_pgid = ?12 "
				    "WHERE generation = ?1 AND session_id = ?2",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, x->generation, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, x->session_id, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 3, session_state_names[x->state], err);
	if (r >= 0)
		r = bind_slot(db, s, 4, &x->exec, err);
	for (int k = 0; r >= 0 && k < 3; k++) {
		const uint64_t v[] = { x->guest.leader_pid, x->guest.leader_start_time, x->guest.pgid };
		r = x->has_guest ? lz_sqlstore_bind_u64(db, s, 10 + k, v[k], err)
				 : lz_sqlstore_bind_null(db, s, 10 + k, err);
	}
	if (r >= 0)
		r = lz_sqlstore_step_done(db, s, 1, err);
	return r;
}

/* ---- handle ------------------------------------------------------------- */

void lz_dstore_close(lz_dstore *h)
{
	if (h == NULL)
		return;
	lz_sqlstore_close(h->db, h->root_fd, &dstore_def, &h->files);
	lz_close_fdp(&h->root_fd);
	free(h);
}

static void dstore_closep(lz_dstore **h)
{
	lz_dstore_close(*h);
	*h = NULL;
}

int lz_dstore_open(int domain_root_fd, lz_dstore **ret, struct lz_err *err)
{
	int r = lz_sqlstore_check_root(domain_root_fd, dstore_def.root_title, err);
	if (r < 0)
		return done(r, err);
	_cleanup_(dstore_closep) lz_dstore *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return done(lz_err_set(err, ENOMEM, "out of memory"), err);
	/* Our own descriptor: sqlite names it for the connection's lifetime. */
	h->root_fd = fcntl(domain_root_fd, F_DUPFD_CLOEXEC, 3);
	if (h->root_fd < 0)
		return done(lz_err_set(err, errno, "duplicate the Domain Root descriptor: %s",
				       strerror(errno)),
			    err);
	if ((r = lz_boot_id(h->boot_id, err)) < 0 ||
	    (r = lz_sqlstore_open(h->root_fd, &dstore_def, &h->db, &h->files, err)) < 0 ||
	    (r = lz_sqlstore_transact(h->db, &dstore_def, true, NULL, NULL, err)) < 0 ||
	    (r = lz_sqlstore_use_wal(h->db, h->root_fd, &dstore_def, &h->files, err)) < 0)
		return done(r, err);
	*ret = TAKE_PTR(h);
	return 0;
}

/* One transaction on the open connection; nothing creates the schema
 * after lz_dstore_open, so an emptied file refuses. */
static int run(lz_dstore *h, lz_sqlstore_fn fn, void *ctx, struct lz_err *err)
{
	if (h == NULL)
		return done(lz_err_set(err, EINVAL, "no Domain Store handle"), err);
	int r = lz_sqlstore_recheck(h->root_fd, &dstore_def, &h->files, err);
	if (r >= 0)
		r = h->batch ? lz_sqlstore_nested(h->db, fn, ctx, err)
			     : lz_sqlstore_transact(h->db, &dstore_def, false, fn, ctx, err);
	return done(r, err);
}

int lz_dstore_batch_begin(lz_dstore *h, struct lz_err *err)
{
	if (h == NULL)
		return done(lz_err_set(err, EINVAL, "no Domain Store handle"), err);
	if (h->batch)
		return done(lz_err_set(err, EBUSY, "a batch is already open"), err);
	int r = lz_sqlstore_recheck(h->root_fd, &dstore_def, &h->files, err);
	if (r >= 0 && (r = lz_sqlstore_begin(h->db, &dstore_def, err)) >= 0)
		h->batch = true;
	return done(r, err);
}

int lz_dstore_batch_end(lz_dstore *h, struct lz_err *err)
{
	if (h == NULL || !h->batch)
		return done(lz_err_set(err, EPROTO, "no batch is open"), err);
	h->batch = false;
	return done(lz_sqlstore_commit(h->db, err), err);
}

int lz_dstore_batch_abort(lz_dstore *h, struct lz_err *err)
{
	if (h == NULL || !h->batch)
		return done(lz_err_set(err, EPROTO, "no batch is open"), err);
	h->batch = false;
	/* sqlite may have rolled back already (a full disk, an I/O error). */
	return done(sqlite3_get_autocommit(h->db) ? 0 : lz_sqlstore_exec(h->db, "ROLLBACK", err), err);
}

bool lz_dstore_in_batch(const lz_dstore *h)
{
	return h != NULL && h->batch;
}

/* The arguments of one call and what it hands back. */
struct op {
	lz_dstore *h;
	uint64_t gen;
	enum lz_dstore_role role;
	enum lz_dstore_gen_state state;
	const struct lz_pidref *id;
	const char *text; /* Domain ID, artifact ID, session ID or readiness fingerprint */
	const char *text2; /* fingerprint */
	const struct lz_dstore_mount *mount;
	const struct lz_dstore_guest *guest;
	size_t max;
	/* results */
	uint64_t out_gen;
	uint64_t out_n;
	char out_id[LZ_DSTORE_ID_HEX_LEN + 1];
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	struct lz_dstore_session x;
	void *v;
	size_t n;
	size_t cap;
};

/* A staged or committed identity must be a current one (spec 3.3). */
static int check_current(const struct op *o, const char *what, const struct lz_pidref *id,
			 struct lz_err *err)
{
	if (memcmp(id->boot_id, o->h->boot_id, sizeof(id->boot_id)) != 0)
		return lz_err_set(err, ESTALE, "%s identity is from another boot", what);
	return 0;
}

/* ---- generations -------------------------------------------------------- */

static int gen_rank(enum lz_dstore_gen_state s)
{
	return s == LZ_DSTORE_GEN_FAILED ? LZ_DSTORE_GEN_STOPPED : (int)s;
}

static bool gen_terminal(enum lz_dstore_gen_state s)
{
	return s == LZ_DSTORE_GEN_STOPPED || s == LZ_DSTORE_GEN_FAILED;
}

static int begin_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;

	/* One live generation per Domain: recovery ends the previous one first. */
	int r = lz_sqlstore_prepare(db,
				    "SELECT generation, state FROM generations "
				    "WHERE state NOT IN ('stopped', 'failed') LIMIT 1",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r > 0) {
		uint64_t g = lz_sqlstore_i64_to_u64(sqlite3_column_int64(s, 0));
		const char *st = (const char *)sqlite3_column_text(s, 1);
		return lz_err_set(err, EBUSY, "generation %" PRIu64 " is still %s", g,
				  st ? st : "?");
	}
	lz_sqlstore_stmt_finalizep(&s);

	if ((r = lz_sqlstore_prepare(db,
				     "SELECT domain_id FROM generations WHERE domain_id <> ?1 LIMIT 1",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 1, o->text, err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	if (r > 0) {
		char other[LZ_DSTORE_HEX64_LEN + 1];
		if ((r = lz_sqlstore_col_hex(s, 0, LZ_DSTORE_HEX64_LEN, "domain_id", other, err)) < 0)
			return r;
		return lz_err_set(err, ESTALE, "this Domain Store records Domain %s, not %s", other,
				  o->text);
	}
	lz_sqlstore_stmt_finalizep(&s);

	uint64_t last = 0;
	if ((r = lz_sqlstore_prepare(db,
				     "SELECT generation FROM generations "
				     "ORDER BY generation < 0 DESC, generation DESC LIMIT 1",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	if (r > 0 && (r = lz_sqlstore_col_u64(s, 0, "generation", &last, err)) < 0)
		return r;
	lz_sqlstore_stmt_finalizep(&s);
	if (last == UINT64_MAX)
		return lz_err_set(err, EOVERFLOW, "generation numbers are exhausted");

	struct lz_dstore_generation g = { .generation = last + 1 };
	if ((r = random_id(g.coordinator_id, err)) < 0 || (r = random_id(g.sidecar_id, err)) < 0 ||
	    (r = random_id(g.sandbox_id, err)) < 0)
		return r;
	if ((r = lz_sqlstore_prepare(db,
				     "INSERT INTO generations (" GEN_COLUMNS ") VALUES "
				     "(?1, ?2, ?3, 'starting', ?4, ?5, ?6, ?7, ?8)",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, g.generation, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, o->text, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 3, o->text2, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 4, lz_sqlstore_now(), err)) < 0 ||
	    (r = lz_sqlstore_bind_blob(db, s, 5, o->h->boot_id, sizeof(o->h->boot_id), err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 6, g.coordinator_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 7, g.sidecar_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 8, g.sandbox_id, err)) < 0 ||
	    (r = lz_sqlstore_step_done(db, s, 1, err)) < 0)
		return r;
	o->out_gen = g.generation;
	return 0;
}

int lz_dstore_generation_begin(lz_dstore *h, const char *domain_id_hex,
			       const char *fingerprint_hex, uint64_t *ret_generation,
			       struct lz_err *err)
{
	struct op o = { .h = h, .text = domain_id_hex, .text2 = fingerprint_hex };
	int r;
	if ((r = check_hex("Domain ID", domain_id_hex, LZ_DSTORE_HEX64_LEN, err)) < 0 ||
	    (r = check_hex("configuration fingerprint", fingerprint_hex, LZ_DSTORE_HEX64_LEN,
			   err)) < 0)
		return done(r, err);
	if ((r = run(h, begin_fn, &o, err)) < 0)
		return r;
	*ret_generation = o.out_gen;
	return 0;
}

static int gen_get_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	return load_generation(db, o->gen, &o->g, err);
}

int lz_dstore_generation_get(lz_dstore *h, uint64_t generation,
			     struct lz_dstore_generation *ret, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation };
	int r = run(h, gen_get_fn, &o, err);
	if (r < 0)
		return r;
	*ret = o.g;
	return 0;
}

/* 1 and the first (role, phase) not clean, or 0. */
static int first_unclean(sqlite3 *db, uint64_t gen, const char *sql, char *what, size_t n,
			 struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, sql, &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, gen, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r > 0) {
		const char *a = (const char *)sqlite3_column_text(s, 0);
		const char *b = (const char *)sqlite3_column_text(s, 1);
		snprintf(what, n, "%s is %s", a ? a : "?", b ? b : "?");
	}
	return r;
}

static int other_phase(sqlite3 *db, uint64_t gen, enum lz_dstore_role role, int *ret,
		       struct lz_err *err);

static int set_state_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0)
		return r;
	if (gen_terminal(g.state) || gen_rank(o->state) <= gen_rank(g.state))
		return lz_err_set(err, ESTALE, "generation %" PRIu64 ": %s -> %s is not a forward move",
				  o->gen, gen_state_str(g.state), gen_state_str(o->state));
	/* Spec 3.3, 3.7: sessions are admitted only after network readiness,
	 * only a published generation admits them, and publication ownership
	 * needs the network participant active (committed RS and recorded
	 * readiness fingerprint). */
	if (o->state == LZ_DSTORE_GEN_PUBLISHED) {
		int net = 0;
		if ((r = other_phase(db, o->gen, LZ_DSTORE_ROLE_NETWORK, &net, err)) < 0)
			return r;
		if (net != LZ_DSTORE_PHASE_ACTIVE) {
			const char *np = net ? phase_str((enum lz_dstore_phase)net) : "absent";
			return lz_err_set(err, ESTALE,
					  "generation %" PRIu64 ": the network participant is %s, "
					  "not active; %s -> published needs it active (committed "
					  "Runtime Supervisor and network readiness)",
					  o->gen, np, gen_state_str(g.state));
		}
	}
	if (o->state == LZ_DSTORE_GEN_STOPPED) {
		char what[128];
		r = first_unclean(db, o->gen,
				  "SELECT role, phase FROM participants "
				  "WHERE generation = ?1 AND phase <> 'clean' ORDER BY role LIMIT 1",
				  what, sizeof(what), err);
		if (r > 0)
			return lz_err_set(err, EBUSY,
					  "generation %" PRIu64 " cannot stop: participant %s", o->gen,
					  what);
		if (r == 0)
			r = first_unclean(db, o->gen,
					  "SELECT session_id, state FROM sessions "
					  "WHERE generation = ?1 AND state <> 'clean' "
					  "ORDER BY session_id LIMIT 1",
					  what, sizeof(what), err);
		if (r > 0)
			return lz_err_set(err, EBUSY,
					  "generation %" PRIu64 " cannot stop: session %s", o->gen,
					  what);
		if (r < 0)
			return r;
	}
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = check_move("generation", gen_state_names[g.state], gen_state_names[o->state], err)) < 0 ||
	    (r = lz_sqlstore_prepare(db, "UPDATE generations SET state = ?2 WHERE generation = ?1", &s,
				     err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, gen_state_names[o->state], err)) < 0)
		return r;
	return lz_sqlstore_step_done(db, s, 1, err);
}

int lz_dstore_generation_set_state(lz_dstore *h, uint64_t generation,
				   enum lz_dstore_gen_state state, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .state = state };
	if (lz_dstore_gen_state_name(state) == NULL)
		return done(lz_err_set(err, EINVAL, "unknown generation state %d", (int)state), err);
	return run(h, set_state_fn, &o, err);
}

static int gen_list_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db,
				    "SELECT " GEN_COLUMNS " FROM generations "
				    "ORDER BY generation < 0 DESC, generation DESC LIMIT ?1",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_i64(db, s, 1, (sqlite3_int64)o->max, err);
	while (r >= 0 && (r = lz_sqlstore_step(db, s, err)) > 0) {
		if ((r = lz_sqlstore_list_reserve(&o->v, &o->cap, o->n,
						  sizeof(struct lz_dstore_generation), o->max,
						  err)) < 0)
			break;
		struct lz_dstore_generation *v = o->v;
		if ((r = read_generation(s, &v[o->n], err)) < 0)
			break;
		o->n++;
	}
	return r;
}

int lz_dstore_generation_list(lz_dstore *h, size_t max, struct lz_dstore_generation **ret_v,
			      size_t *ret_n, struct lz_err *err)
{
	struct op o = { .h = h, .max = max };
	if (max == 0 || max > LZ_DSTORE_LIST_MAX)
		return done(lz_err_set(err, EINVAL, "list bound must be 1 to %d", LZ_DSTORE_LIST_MAX),
			    err);
	int r = run(h, gen_list_fn, &o, err);
	if (r < 0) {
		free(o.v);
		return r;
	}
	*ret_v = o.v;
	*ret_n = o.n;
	return 0;
}

/* ---- participants ------------------------------------------------------- */

/* -ESTALE with "generation G role: " before the message. */
#define REFUSE(err, p, ...)                                                              \
	lz_err_prefix(err, lz_err_set(err, ESTALE, __VA_ARGS__), "generation %" PRIu64 " %s: ", \
		      (p)->generation, role_str((p)->role))

/* Loads the generation and participant of o. */
static int load_both(sqlite3 *db, const struct op *o, struct lz_dstore_generation *g,
		     struct lz_dstore_participant *p, struct lz_err *err)
{
	int r = load_generation(db, o->gen, g, err);
	return r < 0 ? r : load_participant(db, o->gen, o->role, p, err);
}

/* Physical acquisition may record a field now: intent or acquiring, in a
 * generation that is not over. */
static int acquirable(const struct lz_dstore_generation *g, const struct lz_dstore_participant *p,
		      const char *what, struct lz_err *err)
{
	if (gen_terminal(g->state))
		return REFUSE(err, p, "cannot %s: the generation is %s", what,
			      gen_state_str(g->state));
	if (p->phase != LZ_DSTORE_PHASE_INTENT && p->phase != LZ_DSTORE_PHASE_ACQUIRING)
		return REFUSE(err, p, "cannot %s in phase %s (only in intent or acquiring)", what,
			      phase_str(p->phase));
	return 0;
}

/* The other participant's phase, or 0 when it has no row. */
static int other_phase(sqlite3 *db, uint64_t gen, enum lz_dstore_role role, int *ret,
		       struct lz_err *err)
{
	struct lz_dstore_participant q;
	int r = load_participant(db, gen, role, &q, err);
	if (r == -ENOENT) {
		lz_err_clear(err);
		*ret = 0;
		return 0;
	}
	if (r < 0)
		return r;
	*ret = (int)q.phase;
	return 0;
}

/* spec 3.6: a State Anchor mount is recorded or activated only over an
 * active (leased) prepared lower of the same generation. */
static int require_lower_active(sqlite3 *db, const struct lz_dstore_participant *p,
				const char *what, struct lz_err *err)
{
	int ph = 0;
	int r = other_phase(db, p->generation, LZ_DSTORE_ROLE_PREPARED_LOWER, &ph, err);
	if (r < 0)
		return r;
	if (ph != LZ_DSTORE_PHASE_ACTIVE)
		return REFUSE(err, p, "cannot %s: prepared_lower is %s, not active (leased)", what,
			      ph ? phase_str((enum lz_dstore_phase)ph) : "absent");
	return 0;
}

/* The participant whose evidence depends on p's, or 0: it must be absent
 * or clean before p is released (release_too) or cleaned.
 *   spec 3.6: the prepared lower is released only once the State Anchor
 *   is clean, so a mounted anchor never becomes unleased.
 *   spec 3.3, 3.6: network readiness was recorded over the committed
 *   connectivity helper, so the helper's ownership is cleared only after
 *   the network's. */
static enum lz_dstore_role dependent_of(enum lz_dstore_role r, bool *release_too)
{
	*release_too = r == LZ_DSTORE_ROLE_PREPARED_LOWER;
	if (r == LZ_DSTORE_ROLE_PREPARED_LOWER)
		return LZ_DSTORE_ROLE_STATE_ANCHOR;
	if (r == LZ_DSTORE_ROLE_CONNECTIVITY_HELPER)
		return LZ_DSTORE_ROLE_NETWORK;
	return 0;
}

static int require_dependent_clean(sqlite3 *db, const struct lz_dstore_participant *p,
				   bool cleaning, const char *what, struct lz_err *err)
{
	bool release_too = false;
	enum lz_dstore_role dep = dependent_of(p->role, &release_too);
	if (dep == 0 || (!cleaning && !release_too))
		return 0;
	int ph = 0;
	int r = other_phase(db, p->generation, dep, &ph, err);
	if (r < 0)
		return r;
	if (ph != 0 && ph != LZ_DSTORE_PHASE_CLEAN)
		return REFUSE(err, p, "cannot %s: %s is %s, not clean", what, role_str(dep),
			      phase_str((enum lz_dstore_phase)ph));
	return 0;
}

static int intent_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_participant p = { .generation = o->gen, .role = o->role };
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0)
		return r;
	if (g.state != LZ_DSTORE_GEN_STARTING && g.state != LZ_DSTORE_GEN_PUBLISHED)
		return REFUSE(err, &p, "no new intent: the generation is %s", gen_state_str(g.state));
	r = load_participant(db, o->gen, o->role, &p, err);
	if (r == 0)
		return REFUSE(err, &p, "absent -> intent refused: already %s", phase_str(p.phase));
	if (r != -ENOENT)
		return r;
	lz_err_clear(err);
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = lz_sqlstore_prepare(db,
				     "INSERT INTO participants (generation, role, phase, proc_slot, "
				     "lease_held) VALUES (?1, ?2, 'intent', 'unassigned', 0)",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, role_names[o->role], err)) < 0)
		return r;
	return lz_sqlstore_step_done(db, s, 1, err);
}

int lz_dstore_participant_intent(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				 struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role };
	int r = check_role(role, err);
	return r < 0 ? done(r, err) : run(h, intent_fn, &o, err);
}

enum slot_move { MOVE_STAGE, MOVE_COMMIT, MOVE_ENTER };

static int process_move(sqlite3 *db, struct op *o, enum slot_move move, struct lz_err *err)
{
	static const char *const verbs[] = { "stage a process", "commit the process",
					     "enter a committed process" };
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	int r = load_both(db, o, &g, &p, err);
	if (r < 0 || (r = acquirable(&g, &p, verbs[move], err)) < 0)
		return r;
	enum lz_dstore_slot from = move == MOVE_COMMIT ? LZ_DSTORE_SLOT_STAGED : LZ_DSTORE_SLOT_UNASSIGNED;
	if (p.process.phase != from)
		return REFUSE(err, &p, "process slot is %s; %s needs %s (recorded evidence is never "
				       "replaced)",
			      slot_str(p.process.phase), verbs[move], slot_str(from));
	if (move == MOVE_COMMIT && !pidref_equal(&p.process.id, o->id))
		return REFUSE(err, &p,
			      "staged -> committed refused: identity (pid %" PRIu32 ", pidfs %" PRIu64
			      ":%" PRIu64 ", start %" PRIu64 ") is not the staged one (pid %" PRIu32
			      ", pidfs %" PRIu64 ":%" PRIu64 ", start %" PRIu64 ")",
			      o->id->pid, o->id->pidfs_dev, o->id->pidfs_ino, o->id->start_time,
			      p.process.id.pid, p.process.id.pidfs_dev, p.process.id.pidfs_ino,
			      p.process.id.start_time);
	p.process.phase = move == MOVE_STAGE ? LZ_DSTORE_SLOT_STAGED : LZ_DSTORE_SLOT_COMMITTED;
	p.process.id = *o->id;
	p.phase = LZ_DSTORE_PHASE_ACQUIRING;
	return write_participant(db, &p, err);
}

static int stage_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	return process_move(db, ctx, MOVE_STAGE, err);
}

static int commit_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	return process_move(db, ctx, MOVE_COMMIT, err);
}

static int enter_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	return process_move(db, ctx, MOVE_ENTER, err);
}

static int process_call(lz_dstore *h, uint64_t gen, enum lz_dstore_role role,
			const struct lz_pidref *id, lz_sqlstore_fn fn, struct lz_err *err)
{
	struct op o = { .h = h, .gen = gen, .role = role, .id = id };
	int r = check_role(role, err);
	if (r >= 0 && !role_has_process(role))
		r = lz_err_set(err, EINVAL, "role %s has no process slot", role_str(role));
	if (r >= 0 && fn == enter_fn && !role_is_direct(role))
		r = lz_err_set(err, EINVAL,
			       "role %s is an acquired child edge: stage its process first",
			       role_str(role));
	if (r >= 0)
		r = check_identity("process", id, err);
	if (r >= 0 && h != NULL)
		r = check_current(&o, "process", id, err);
	return r < 0 ? done(r, err) : run(h, fn, &o, err);
}

int lz_dstore_participant_stage_process(lz_dstore *h, uint64_t generation,
					enum lz_dstore_role role, const struct lz_pidref *id,
					struct lz_err *err)
{
	return process_call(h, generation, role, id, stage_fn, err);
}

int lz_dstore_participant_commit_process(lz_dstore *h, uint64_t generation,
					 enum lz_dstore_role role, const struct lz_pidref *id,
					 struct lz_err *err)
{
	return process_call(h, generation, role, id, commit_fn, err);
}

int lz_dstore_participant_enter_process(lz_dstore *h, uint64_t generation,
					enum lz_dstore_role role, const struct lz_pidref *id,
					struct lz_err *err)
{
	return process_call(h, generation, role, id, enter_fn, err);
}

static int artifact_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	int r = load_both(db, o, &g, &p, err);
	if (r < 0 || (r = acquirable(&g, &p, "record an artifact", err)) < 0)
		return r;
	if (p.has_artifact)
		return REFUSE(err, &p, "artifact %s is already recorded (never replaced)",
			      p.artifact_id);
	memcpy(p.artifact_id, o->text, LZ_DSTORE_HEX64_LEN + 1);
	p.has_artifact = true;
	p.phase = LZ_DSTORE_PHASE_ACQUIRING;
	return write_participant(db, &p, err);
}

int lz_dstore_participant_set_artifact(lz_dstore *h, uint64_t generation,
				       enum lz_dstore_role role, const char *artifact_id_hex,
				       struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role, .text = artifact_id_hex };
	int r = check_role(role, err);
	if (r >= 0 && role != LZ_DSTORE_ROLE_PREPARED_LOWER)
		r = lz_err_set(err, EINVAL, "role %s has no artifact", role_str(role));
	if (r >= 0)
		r = check_hex("artifact ID", artifact_id_hex, LZ_DSTORE_HEX64_LEN, err);
	return r < 0 ? done(r, err) : run(h, artifact_fn, &o, err);
}

static int lease_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	int r = load_both(db, o, &g, &p, err);
	if (r < 0 || (r = acquirable(&g, &p, "record a held lease", err)) < 0)
		return r;
	if (!p.has_artifact)
		return REFUSE(err, &p, "cannot record a held lease: no artifact is recorded");
	if (p.lease_held)
		return REFUSE(err, &p, "the lease is already recorded as held");
	p.lease_held = true;
	p.phase = LZ_DSTORE_PHASE_ACQUIRING;
	return write_participant(db, &p, err);
}

int lz_dstore_participant_set_lease_held(lz_dstore *h, uint64_t generation,
					 enum lz_dstore_role role, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role };
	int r = check_role(role, err);
	if (r >= 0 && role != LZ_DSTORE_ROLE_PREPARED_LOWER)
		r = lz_err_set(err, EINVAL, "role %s has no lease", role_str(role));
	return r < 0 ? done(r, err) : run(h, lease_fn, &o, err);
}

static int mount_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	size_t n = 0;
	int r = load_both(db, o, &g, &p, err);
	if (r < 0 || (r = acquirable(&g, &p, "record a mount", err)) < 0 ||
	    (r = require_lower_active(db, &p, "record a mount", err)) < 0 ||
	    (r = count_mounts(db, o->gen, o->role, &n, err)) < 0)
		return r;
	if (n >= LZ_DSTORE_MOUNTS_MAX)
		return lz_err_set(err, EOVERFLOW, "generation %" PRIu64 " %s already has %d mounts",
				  o->gen, role_str(o->role), LZ_DSTORE_MOUNTS_MAX);

	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = lz_sqlstore_prepare(db,
				     "SELECT 1 FROM participant_mounts "
				     "WHERE generation = ?1 AND role = ?2 AND path = ?3",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, role_names[o->role], err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 3, o->mount->path, err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	if (r > 0)
		return REFUSE(err, &p, "a mount at '%.256s' is already recorded (never replaced)",
			      o->mount->path);
	lz_sqlstore_stmt_finalizep(&s);

	p.phase = LZ_DSTORE_PHASE_ACQUIRING;
	if ((r = write_participant(db, &p, err)) < 0 ||
	    (r = lz_sqlstore_prepare(db,
				     "INSERT INTO participant_mounts (generation, role, path, mnt_id, "
				     "dev, ino) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, role_names[o->role], err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 3, o->mount->path, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 4, o->mount->mnt_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 5, o->mount->dev, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 6, o->mount->ino, err)) < 0)
		return r;
	return lz_sqlstore_step_done(db, s, 1, err);
}

int lz_dstore_participant_add_mount(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				    const struct lz_dstore_mount *mount, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role, .mount = mount };
	int r = check_role(role, err);
	if (r >= 0 && role != LZ_DSTORE_ROLE_STATE_ANCHOR)
		r = lz_err_set(err, EINVAL, "role %s has no mounts", role_str(role));
	if (r >= 0)
		r = check_mount(mount, err);
	return r < 0 ? done(r, err) : run(h, mount_fn, &o, err);
}

static int network_ready_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	int r = load_both(db, o, &g, &p, err);
	if (r < 0)
		return r;
	if (g.state != LZ_DSTORE_GEN_STARTING)
		return REFUSE(err, &p,
			      "cannot record network readiness in phase %s: the generation is %s "
			      "(only while starting)",
			      phase_str(p.phase), gen_state_str(g.state));
	if (p.phase != LZ_DSTORE_PHASE_INTENT && p.phase != LZ_DSTORE_PHASE_ACQUIRING)
		return REFUSE(err, &p,
			      "cannot record network readiness in phase %s (only in intent or "
			      "acquiring)",
			      phase_str(p.phase));
	if (p.network_ready[0] != '\0')
		return REFUSE(err, &p,
			      "cannot record network readiness in phase %s: %s is already recorded "
			      "(never replaced)",
			      phase_str(p.phase), p.network_ready);
	if (p.process.phase != LZ_DSTORE_SLOT_COMMITTED)
		return REFUSE(err, &p,
			      "cannot record network readiness in phase %s: the process slot is %s, "
			      "not committed (enter the Runtime Supervisor first)",
			      phase_str(p.phase), slot_str(p.process.phase));
	int helper = 0;
	if ((r = other_phase(db, o->gen, LZ_DSTORE_ROLE_CONNECTIVITY_HELPER, &helper, err)) < 0)
		return r;
	if (helper != LZ_DSTORE_PHASE_ACTIVE)
		return REFUSE(err, &p,
			      "cannot record network readiness in phase %s: connectivity_helper is "
			      "%s, not active (its committed ownership comes before network "
			      "readiness)",
			      phase_str(p.phase),
			      helper ? phase_str((enum lz_dstore_phase)helper) : "absent");
	memcpy(p.network_ready, o->text, LZ_DSTORE_HEX64_LEN + 1);
	p.phase = LZ_DSTORE_PHASE_ACQUIRING;
	return write_participant(db, &p, err);
}

int lz_dstore_participant_set_network_ready(lz_dstore *h, uint64_t generation,
					    const char *fingerprint_hex, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = LZ_DSTORE_ROLE_NETWORK,
			.text = fingerprint_hex };
	int r = check_hex("network readiness fingerprint", fingerprint_hex, LZ_DSTORE_HEX64_LEN,
			  err);
	return r < 0 ? done(r, err) : run(h, network_ready_fn, &o, err);
}

static int activate_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	int r = load_both(db, o, &g, &p, err);
	if (r < 0)
		return r;
	if (p.phase == LZ_DSTORE_PHASE_INTENT)
		return REFUSE(err, &p, "intent -> active refused: a bare intent never becomes active");
	if (p.phase != LZ_DSTORE_PHASE_ACQUIRING)
		return REFUSE(err, &p, "%s -> active refused (only from acquiring)",
			      phase_str(p.phase));
	if (g.state != LZ_DSTORE_GEN_STARTING && g.state != LZ_DSTORE_GEN_PUBLISHED)
		return REFUSE(err, &p, "acquiring -> active refused: the generation is %s",
			      gen_state_str(g.state));
	if (role_has_process(p.role) && p.process.phase != LZ_DSTORE_SLOT_COMMITTED)
		return REFUSE(err, &p, "acquiring -> active refused: process slot is %s, not committed",
			      slot_str(p.process.phase));
	if (p.role == LZ_DSTORE_ROLE_NETWORK && p.network_ready[0] == '\0')
		return REFUSE(err, &p, "acquiring -> active refused: network readiness is not "
				       "recorded");
	if (p.role == LZ_DSTORE_ROLE_PREPARED_LOWER && !(p.has_artifact && p.lease_held))
		return REFUSE(err, &p, "acquiring -> active refused: needs an artifact and a held "
				       "lease");
	if (p.role == LZ_DSTORE_ROLE_STATE_ANCHOR) {
		size_t n = 0;
		if ((r = count_mounts(db, o->gen, o->role, &n, err)) < 0)
			return r;
		if (n == 0)
			return REFUSE(err, &p, "acquiring -> active refused: no mount is recorded");
		if ((r = require_lower_active(db, &p, "become active", err)) < 0)
			return r;
	}
	p.phase = LZ_DSTORE_PHASE_ACTIVE;
	return write_participant(db, &p, err);
}

int lz_dstore_participant_activate(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				   struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role };
	int r = check_role(role, err);
	return r < 0 ? done(r, err) : run(h, activate_fn, &o, err);
}

static int release_one(sqlite3 *db, uint64_t gen, enum lz_dstore_role role, struct lz_err *err)
{
	struct lz_dstore_participant p;
	int r = load_participant(db, gen, role, &p, err);
	if (r < 0)
		return r;
	if (p.phase != LZ_DSTORE_PHASE_INTENT && p.phase != LZ_DSTORE_PHASE_ACQUIRING &&
	    p.phase != LZ_DSTORE_PHASE_ACTIVE)
		return REFUSE(err, &p, "%s -> release refused (only from intent, acquiring or active)",
			      phase_str(p.phase));
	if ((r = require_dependent_clean(db, &p, false, "record release intent", err)) < 0)
		return r;
	p.phase = LZ_DSTORE_PHASE_RELEASE;
	return write_participant(db, &p, err);
}

static int clean_one(sqlite3 *db, uint64_t gen, enum lz_dstore_role role, struct lz_err *err)
{
	struct lz_dstore_participant p;
	int r = load_participant(db, gen, role, &p, err);
	if (r < 0)
		return r;
	if (p.phase != LZ_DSTORE_PHASE_RELEASE && p.phase != LZ_DSTORE_PHASE_INTENT)
		return REFUSE(err, &p, "%s -> clean refused (only from release or a bare intent)",
			      phase_str(p.phase));
	if ((r = require_dependent_clean(db, &p, true, "become clean", err)) < 0)
		return r;
	/* The one transition that clears evidence: the explicit empty snapshot. */
	p.phase = LZ_DSTORE_PHASE_CLEAN;
	p.process = (struct lz_dstore_process){ .phase = LZ_DSTORE_SLOT_UNASSIGNED };
	p.has_artifact = false;
	p.artifact_id[0] = '\0';
	p.lease_held = false;
	p.network_ready[0] = '\0';
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = lz_sqlstore_prepare(db,
				     "DELETE FROM participant_mounts WHERE generation = ?1 AND role = ?2",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, role_names[role], err)) < 0 ||
	    (r = lz_sqlstore_step_done(db, s, -1, err)) < 0)
		return r;
	return write_participant(db, &p, err);
}

static int release_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	int r = load_generation(db, o->gen, &g, err);
	return r < 0 ? r : release_one(db, o->gen, o->role, err);
}

static int clean_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	int r = load_generation(db, o->gen, &g, err);
	return r < 0 ? r : clean_one(db, o->gen, o->role, err);
}

int lz_dstore_participant_release_intent(lz_dstore *h, uint64_t generation,
					 enum lz_dstore_role role, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role };
	int r = check_role(role, err);
	return r < 0 ? done(r, err) : run(h, release_fn, &o, err);
}

int lz_dstore_participant_clean(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
				struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role };
	int r = check_role(role, err);
	return r < 0 ? done(r, err) : run(h, clean_fn, &o, err);
}

static int unmounted_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_participant a;
	int r = load_generation(db, o->gen, &g, err);
	if (r >= 0)
		r = load_participant(db, o->gen, LZ_DSTORE_ROLE_STATE_ANCHOR, &a, err);
	if (r < 0)
		return r;
	if (a.phase != LZ_DSTORE_PHASE_RELEASE)
		return REFUSE(err, &a, "%s -> clean refused: unmount completion needs release intent",
			      phase_str(a.phase));
	if ((r = clean_one(db, o->gen, LZ_DSTORE_ROLE_STATE_ANCHOR, err)) < 0)
		return r;
	struct lz_dstore_participant l;
	if ((r = load_participant(db, o->gen, LZ_DSTORE_ROLE_PREPARED_LOWER, &l, err)) < 0)
		return r;
	if (l.phase != LZ_DSTORE_PHASE_ACQUIRING && l.phase != LZ_DSTORE_PHASE_ACTIVE)
		return REFUSE(err, &l, "%s -> release refused (only from acquiring or active here)",
			      phase_str(l.phase));
	return release_one(db, o->gen, LZ_DSTORE_ROLE_PREPARED_LOWER, err);
}

int lz_dstore_anchor_unmounted(lz_dstore *h, uint64_t generation, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation };
	return run(h, unmounted_fn, &o, err);
}

static int participant_get_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	int r = load_both(db, o, &g, &o->p, err);
	return r < 0 ? r : load_mounts(db, &o->p, err);
}

int lz_dstore_participant_get(lz_dstore *h, uint64_t generation, enum lz_dstore_role role,
			      struct lz_dstore_participant *ret, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .role = role };
	int r = check_role(role, err);
	r = r < 0 ? done(r, err) : run(h, participant_get_fn, &o, err);
	if (r < 0) {
		lz_dstore_participant_clear(&o.p);
		return r;
	}
	*ret = o.p;
	return 0;
}

void lz_dstore_participant_clear(struct lz_dstore_participant *p)
{
	if (p == NULL)
		return;
	free(p->mounts);
	p->mounts = NULL;
	p->n_mounts = 0;
}

/* ---- sessions ----------------------------------------------------------- */

#define SREFUSE(err, x, ...)                                                                \
	lz_err_prefix(err, lz_err_set(err, ESTALE, __VA_ARGS__),                                \
		      "generation %" PRIu64 " session %s: ", (x)->generation, (x)->session_id)

static int session_begin_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0)
		return r;
	if (g.state != LZ_DSTORE_GEN_PUBLISHED)
		return lz_err_set(err, ESTALE,
				  "generation %" PRIu64 " is %s: sessions begin only once published",
				  o->gen, gen_state_str(g.state));
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	sqlite3_int64 n = 0;
	if ((r = lz_sqlstore_prepare(db, "SELECT count(*) FROM sessions WHERE generation = ?1", &s,
				     err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0 ||
	    (r == 0 && (r = lz_err_set(err, EIO, "count returned nothing")) < 0) ||
	    (r = lz_sqlstore_col_i64(s, 0, "count", &n, err)) < 0)
		return r;
	if (n >= LZ_DSTORE_SESSIONS_MAX)
		return lz_err_set(err, EOVERFLOW, "generation %" PRIu64 " already has %d sessions",
				  o->gen, LZ_DSTORE_SESSIONS_MAX);
	lz_sqlstore_stmt_finalizep(&s);
	if ((r = random_id(o->out_id, err)) < 0 ||
	    (r = lz_sqlstore_prepare(db,
				     "INSERT INTO sessions (generation, session_id, state, created, "
				     "exec_slot) VALUES (?1, ?2, 'intent', ?3, 'unassigned')",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, o->out_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 3, lz_sqlstore_now(), err)) < 0)
		return r;
	return lz_sqlstore_step_done(db, s, 1, err);
}

int lz_dstore_session_begin(lz_dstore *h, uint64_t generation,
			    char ret_session_id[LZ_DSTORE_ID_HEX_LEN + 1], struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation };
	if (ret_session_id == NULL)
		return done(lz_err_set(err, EINVAL, "session ID buffer is missing"), err);
	int r = run(h, session_begin_fn, &o, err);
	if (r < 0)
		return r;
	memcpy(ret_session_id, o.out_id, sizeof(o.out_id));
	return 0;
}

static int stage_exec_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_session x;
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0 || (r = load_session(db, o->gen, o->text, &x, err)) < 0)
		return r;
	if (g.state != LZ_DSTORE_GEN_PUBLISHED && g.state != LZ_DSTORE_GEN_STOPPING)
		return SREFUSE(err, &x, "cannot stage the exec client: the generation is %s",
			       gen_state_str(g.state));
	if (x.state != LZ_DSTORE_SESSION_INTENT)
		return SREFUSE(err, &x, "cannot stage the exec client in state %s (only in intent)",
			       session_state_str(x.state));
	if (x.exec.phase != LZ_DSTORE_SLOT_UNASSIGNED)
		return SREFUSE(err, &x, "exec slot is %s; staging needs unassigned (recorded "
					"evidence is never replaced)",
			       slot_str(x.exec.phase));
	x.exec.phase = LZ_DSTORE_SLOT_STAGED;
	x.exec.id = *o->id;
	return write_session(db, &x, err);
}

static int check_session_args(const struct op *o, struct lz_err *err)
{
	return check_hex("session ID", o->text, LZ_DSTORE_ID_HEX_LEN, err);
}

int lz_dstore_session_stage_exec(lz_dstore *h, uint64_t generation, const char *session_id,
				 const struct lz_pidref *exec, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .text = session_id, .id = exec };
	int r = check_session_args(&o, err);
	if (r >= 0)
		r = check_identity("exec client", exec, err);
	if (r >= 0 && h != NULL)
		r = check_current(&o, "exec client", exec, err);
	return r < 0 ? done(r, err) : run(h, stage_exec_fn, &o, err);
}

static int running_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_session x;
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0 || (r = load_session(db, o->gen, o->text, &x, err)) < 0)
		return r;
	if (x.state != LZ_DSTORE_SESSION_INTENT)
		return SREFUSE(err, &x, "%s -> running refused (only from intent)",
			       session_state_str(x.state));
	if (g.state != LZ_DSTORE_GEN_PUBLISHED)
		return SREFUSE(err, &x, "intent -> running refused: the generation is %s",
			       gen_state_str(g.state));
	if (x.exec.phase != LZ_DSTORE_SLOT_STAGED)
		return SREFUSE(err, &x, "intent -> running refused: exec slot is %s, not staged",
			       slot_str(x.exec.phase));
	if (!pidref_equal(&x.exec.id, o->id))
		return SREFUSE(err, &x,
			       "staged -> committed refused: exec identity (pid %" PRIu32
			       ") is not the staged one (pid %" PRIu32 ")",
			       o->id->pid, x.exec.id.pid);
	int hc = 0;
	if ((r = other_phase(db, o->gen, LZ_DSTORE_ROLE_HOST_COORDINATOR, &hc, err)) < 0)
		return r;
	if (hc != LZ_DSTORE_PHASE_ACTIVE)
		return SREFUSE(err, &x,
			       "intent -> running refused: host_coordinator is %s, not active "
			       "(committed)",
			       hc ? phase_str((enum lz_dstore_phase)hc) : "absent");
	x.exec.phase = LZ_DSTORE_SLOT_COMMITTED;
	x.has_guest = o->guest != NULL;
	if (o->guest)
		x.guest = *o->guest;
	x.state = LZ_DSTORE_SESSION_RUNNING;
	return write_session(db, &x, err);
}

int lz_dstore_session_commit_running(lz_dstore *h, uint64_t generation, const char *session_id,
				     const struct lz_pidref *exec,
				     const struct lz_dstore_guest *guest, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .text = session_id, .id = exec, .guest = guest };
	int r = check_session_args(&o, err);
	if (r >= 0)
		r = check_identity("exec client", exec, err);
	if (r >= 0 && guest != NULL)
		r = check_guest(guest, err);
	return r < 0 ? done(r, err) : run(h, running_fn, &o, err);
}

static int session_release_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_session x;
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0 || (r = load_session(db, o->gen, o->text, &x, err)) < 0)
		return r;
	if (x.state != LZ_DSTORE_SESSION_INTENT && x.state != LZ_DSTORE_SESSION_RUNNING)
		return SREFUSE(err, &x, "%s -> release refused (only from intent or running)",
			       session_state_str(x.state));
	x.state = LZ_DSTORE_SESSION_RELEASE;
	return write_session(db, &x, err);
}

int lz_dstore_session_release(lz_dstore *h, uint64_t generation, const char *session_id,
			      struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .text = session_id };
	int r = check_session_args(&o, err);
	return r < 0 ? done(r, err) : run(h, session_release_fn, &o, err);
}

static int session_clean_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	struct lz_dstore_session x;
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0 || (r = load_session(db, o->gen, o->text, &x, err)) < 0)
		return r;
	if (x.state == LZ_DSTORE_SESSION_INTENT && x.exec.phase != LZ_DSTORE_SLOT_UNASSIGNED)
		return SREFUSE(err, &x, "intent -> clean refused: the exec slot is %s; record "
					"release intent first",
			       slot_str(x.exec.phase));
	if (x.state != LZ_DSTORE_SESSION_RELEASE && x.state != LZ_DSTORE_SESSION_INTENT)
		return SREFUSE(err, &x, "%s -> clean refused (only from release or a bare intent)",
			       session_state_str(x.state));
	x.state = LZ_DSTORE_SESSION_CLEAN;
	x.exec = (struct lz_dstore_process){ .phase = LZ_DSTORE_SLOT_UNASSIGNED };
	x.has_guest = false;
	x.guest = (struct lz_dstore_guest){ 0 };
	return write_session(db, &x, err);
}

int lz_dstore_session_clean(lz_dstore *h, uint64_t generation, const char *session_id,
			    struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .text = session_id };
	int r = check_session_args(&o, err);
	return r < 0 ? done(r, err) : run(h, session_clean_fn, &o, err);
}

static int session_get_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	int r = load_generation(db, o->gen, &g, err);
	return r < 0 ? r : load_session(db, o->gen, o->text, &o->x, err);
}

int lz_dstore_session_get(lz_dstore *h, uint64_t generation, const char *session_id,
			  struct lz_dstore_session *ret, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .text = session_id };
	int r = check_session_args(&o, err);
	if (r < 0)
		return done(r, err);
	if ((r = run(h, session_get_fn, &o, err)) < 0)
		return r;
	*ret = o.x;
	return 0;
}

static int session_list_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = load_generation(db, o->gen, &g, err);
	if (r >= 0)
		r = lz_sqlstore_prepare(db,
					"SELECT " SESSION_COLUMNS " FROM sessions WHERE generation = ?1 "
					"ORDER BY created, session_id",
					&s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err);
	while (r >= 0 && (r = lz_sqlstore_step(db, s, err)) > 0) {
		if ((r = lz_sqlstore_list_reserve(&o->v, &o->cap, o->n,
						  sizeof(struct lz_dstore_session),
						  LZ_DSTORE_SESSIONS_MAX, err)) < 0)
			break;
		struct lz_dstore_session *v = o->v;
		if ((r = read_session(s, &v[o->n], err)) < 0)
			break;
		o->n++;
	}
	return r;
}

int lz_dstore_session_list(lz_dstore *h, uint64_t generation, struct lz_dstore_session **ret_v,
			   size_t *ret_n, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation };
	int r = run(h, session_list_fn, &o, err);
	if (r < 0) {
		free(o.v);
		return r;
	}
	*ret_v = o.v;
	*ret_n = o.n;
	return 0;
}

static int count_open_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_generation g;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	sqlite3_int64 n = 0;
	int r = load_generation(db, o->gen, &g, err);
	if (r >= 0)
		r = lz_sqlstore_prepare(db,
					"SELECT count(*) FROM sessions WHERE generation = ?1 AND "
					"state IN ('intent', 'running', 'release')",
					&s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err);
	if (r >= 0 && (r = lz_sqlstore_step(db, s, err)) == 0)
		r = lz_err_set(err, EIO, "count returned nothing");
	if (r >= 0)
		r = lz_sqlstore_col_i64(s, 0, "count", &n, err);
	if (r < 0)
		return r;
	o->out_n = (uint64_t)n;
	return 0;
}

int lz_dstore_session_count_open(lz_dstore *h, uint64_t generation, uint64_t *ret_n,
				 struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation };
	int r = run(h, count_open_fn, &o, err);
	if (r < 0)
		return r;
	*ret_n = o.out_n;
	return 0;
}

/* ---- the generation's namespaces ------------------------------------------- */

static const char *const ns_kind_names[] = { [LZ_DSTORE_NS_MOUNT] = "mount", [LZ_DSTORE_NS_NETWORK] = "network" };

struct ns_op {
	enum lz_dstore_ns_kind kind;
	const struct lz_dstore_ns *ns;
};

static int rs_namespace_record_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	const struct ns_op *n = o->v;
	struct lz_dstore_generation g;
	struct lz_dstore_participant p;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = load_both(db, o, &g, &p, err);
	if (r < 0)
		return r;
	if (g.state != LZ_DSTORE_GEN_STARTING || p.phase != LZ_DSTORE_PHASE_INTENT ||
	    p.process.phase != LZ_DSTORE_SLOT_UNASSIGNED)
		return REFUSE(err, &p, "its %s namespace is recorded only before its process is staged (phase %s, "
			      "generation %s)", ns_kind_names[n->kind], phase_str(p.phase), gen_state_str(g.state));
	if ((r = lz_sqlstore_prepare(db, "SELECT 1 FROM rs_namespaces WHERE generation = ?1 AND kind = ?2", &s,
				     err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, ns_kind_names[n->kind], err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	if (r > 0)
		return lz_err_set(err, EEXIST, "generation %" PRIu64 " has its %s namespace recorded (never replaced)",
				  o->gen, ns_kind_names[n->kind]);
	lz_sqlstore_stmt_finalizep(&s);
	if ((r = lz_sqlstore_prepare(db, "INSERT INTO rs_namespaces (generation, kind, ns_id, ns_inum) "
					 "VALUES (?1, ?2, ?3, ?4)",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, ns_kind_names[n->kind], err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 3, n->ns->id, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 4, n->ns->inum, err)) < 0)
		return r;
	return lz_sqlstore_step_done(db, s, 1, err);
}

int lz_dstore_rs_namespace_record(lz_dstore *h, uint64_t generation, enum lz_dstore_ns_kind kind,
				  const struct lz_dstore_ns *ns, struct lz_err *err)
{
	if ((unsigned)kind > LZ_DSTORE_NS_NETWORK)
		return done(lz_err_set(err, EINVAL, "namespace kind %d is not recorded", (int)kind), err);
	if (ns->id == 0 || ns->inum == 0)
		return done(lz_err_set(err, EINVAL, "a namespace identity is zero"), err);
	struct ns_op n = { kind, ns };
	struct op o = { .h = h,
			.gen = generation,
			.role = kind == LZ_DSTORE_NS_MOUNT ? LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR
							   : LZ_DSTORE_ROLE_CONNECTIVITY_HELPER,
			.v = &n };
	return run(h, rs_namespace_record_fn, &o, err);
}

static int rs_namespaces_get_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	struct lz_dstore_namespaces *ret = o->v;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r;
	*ret = (struct lz_dstore_namespaces){ 0 };
	if ((r = lz_sqlstore_prepare(db, "SELECT kind, ns_id, ns_inum FROM rs_namespaces WHERE generation = ?1", &s,
				     err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0)
		return r;
	while ((r = lz_sqlstore_step(db, s, err)) > 0) {
		const unsigned char *kind = sqlite3_column_text(s, 0);
		sqlite3_int64 inum = 0;
		struct lz_dstore_ns ns;
		if ((r = lz_sqlstore_col_u64(s, 1, "ns_id", &ns.id, err)) < 0 ||
		    (r = lz_sqlstore_col_i64(s, 2, "ns_inum", &inum, err)) < 0)
			return r;
		if (kind == NULL || inum < 1 || inum > UINT32_MAX || ns.id == 0)
			return lz_err_set(err, EPROTO, "generation %" PRIu64 ": a namespace record is malformed",
					  o->gen);
		ns.inum = (uint32_t)inum;
		if (strcmp((const char *)kind, "mount") == 0) {
			ret->mount = ns;
			ret->have_mount = true;
		} else if (strcmp((const char *)kind, "network") == 0) {
			ret->network = ns;
			ret->have_network = true;
		} else {
			return lz_err_set(err, EPROTO, "generation %" PRIu64 ": a namespace record of unknown kind",
					  o->gen);
		}
	}
	return r;
}

int lz_dstore_rs_namespaces_get(lz_dstore *h, uint64_t generation, struct lz_dstore_namespaces *ret,
				struct lz_err *err)
{
	struct lz_dstore_namespaces ns;
	struct op o = { .h = h, .gen = generation, .v = &ns };
	int r = run(h, rs_namespaces_get_fn, &o, err);
	if (r >= 0)
		*ret = ns;
	return r;
}

/* ---- escalations (spec 3.8) --------------------------------------------- */

static int escalation_launch_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	const struct lz_dstore_escalation *x = o->v;
	struct lz_dstore_generation g;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = load_generation(db, o->gen, &g, err);
	if (r < 0)
		return r;
	if (g.state != LZ_DSTORE_GEN_PUBLISHED && g.state != LZ_DSTORE_GEN_STOPPING)
		return lz_err_set(err, ESTALE, "generation %" PRIu64 " is %s: no host command starts",
				  o->gen, gen_state_str(g.state));
	if ((r = lz_sqlstore_prepare(db, "SELECT 1 FROM escalations WHERE generation = ?1 AND request_id = ?2", &s,
				     err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, x->request_id, err)) < 0 || (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	if (r > 0)
		return lz_err_set(err, EEXIST, "escalation %s was approved before: it runs at most once",
				  x->request_id);
	lz_sqlstore_stmt_finalizep(&s);
	if ((r = lz_sqlstore_prepare(db,
				     "INSERT INTO escalations (generation, request_id, session_id, verdict, "
				     "argv_digest, state, created) VALUES (?1, ?2, ?3, ?4, ?5, 'launching', ?6)",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, x->request_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 3, x->session_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 4, x->automatic ? "auto_approved" : "approved", err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 5, x->argv_digest, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 6, lz_sqlstore_now(), err)) < 0)
		return r;
	return lz_sqlstore_step_done(db, s, 1, err);
}

int lz_dstore_escalation_launch(lz_dstore *h, uint64_t generation, const struct lz_dstore_escalation *x,
				struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .v = (void *)x };
	int r;
	if ((r = check_hex("request ID", x->request_id, LZ_DSTORE_ID_HEX_LEN, err)) < 0 ||
	    (r = check_hex("session ID", x->session_id, LZ_DSTORE_ID_HEX_LEN, err)) < 0 ||
	    (r = check_hex("argv digest", x->argv_digest, 64, err)) < 0)
		return done(r, err);
	return run(h, escalation_launch_fn, &o, err);
}

static int escalation_end_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct op *o = ctx;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r;
	if ((r = lz_sqlstore_prepare(db,
				     "UPDATE escalations SET state = 'ended' WHERE generation = ?1 AND "
				     "request_id = ?2 AND state = 'launching'",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_u64(db, s, 1, o->gen, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, o->text, err)) < 0)
		return r;
	if ((r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	return sqlite3_changes(db) == 1 ? 0
					: lz_err_set(err, ENOENT, "no launched escalation %s in generation %" PRIu64,
						     o->text, o->gen);
}

int lz_dstore_escalation_end(lz_dstore *h, uint64_t generation, const char *request_id, struct lz_err *err)
{
	struct op o = { .h = h, .gen = generation, .text = request_id };
	int r = check_hex("request ID", request_id, LZ_DSTORE_ID_HEX_LEN, err);
	return r < 0 ? done(r, err) : run(h, escalation_end_fn, &o, err);
}

static int integrity_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	(void)ctx;
	return lz_sqlstore_integrity(db, err);
}

int lz_dstore_integrity(lz_dstore *h, struct lz_err *err)
{
	return run(h, integrity_fn, NULL, err);
}
