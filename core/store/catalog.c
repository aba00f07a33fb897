/* Storage Catalog: see catalog.h for the section protocol, invariants and
 * the caller's part of spec 3.6. The confined files, the descriptor VFS,
 * the connection settings and the store identity check are sqlstore.c's.
 *
 * Lock order: catalog.lock (flock) -> sqlite database -> transaction. Every
 * section releases in reverse order before returning; nothing survives a
 * call, so a forked child or a crashed coordinator leaves no open catalog. */
#include "store/catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/sqlstore.h"
#include "util/cleanup.h"

/* ---- schema ------------------------------------------------------------- */

/* The schema (after sqlstore's meta table), each object with the version
 * that added it, compared verbatim with sqlite_schema on every open: a v1
 * catalog whose tables, checks, triggers or views differ is not v1 (nor
 * is a v2 one v2); a v1 catalog is upgraded in place. u64 values are stored as their
 * two's-complement bit pattern in INTEGER columns (sqlite integers are
 * signed); see lz_sqlstore_u64_to_i64. */
#define HEX64(c) "length(" c ") = 64 AND " c " NOT GLOB '*[^0-9a-f]*'"
#define BYTES(c, lo, hi) "length(CAST(" c " AS BLOB)) BETWEEN " #lo " AND " #hi

static const struct lz_sqlstore_table schema[] = {
	{ "artifacts",
	  "CREATE TABLE artifacts ("
	  "id TEXT PRIMARY KEY NOT NULL CHECK (" HEX64("id") "), "
	  "source_ref TEXT NOT NULL CHECK (" BYTES("source_ref", 1, 4096) "), "
	  "manifest_digest TEXT NOT NULL CHECK (" BYTES("manifest_digest", 1, 4096) "), "
	  "config_digest TEXT NOT NULL CHECK (" BYTES("config_digest", 1, 4096) "), "
	  "size INTEGER NOT NULL, "
	  "state TEXT NOT NULL CHECK (state IN ('published', 'quarantined')), "
	  "created INTEGER NOT NULL"
	  ") STRICT", 1 },
	{ "prepare_ops",
	  "CREATE TABLE prepare_ops ("
	  "id TEXT PRIMARY KEY NOT NULL CHECK (" HEX64("id") "), "
	  "artifact_id TEXT NOT NULL CHECK (" HEX64("artifact_id") "), "
	  "staging_name TEXT NOT NULL UNIQUE CHECK (" BYTES("staging_name", 1, 255) "), "
	  "state TEXT NOT NULL CHECK (state IN ('preparing', 'published', 'abandoned')), "
	  "created INTEGER NOT NULL, "
	  "worker_boot_id BLOB CHECK (length(worker_boot_id) = 16), "
	  "worker_pidfs_dev INTEGER, "
	  "worker_pidfs_ino INTEGER, "
	  "worker_pid INTEGER CHECK (worker_pid BETWEEN 1 AND 4294967295), "
	  "worker_start_time INTEGER, "
	  "CHECK ((worker_boot_id IS NULL) = (worker_pidfs_dev IS NULL) AND "
	  "(worker_boot_id IS NULL) = (worker_pidfs_ino IS NULL) AND "
	  "(worker_boot_id IS NULL) = (worker_pid IS NULL) AND "
	  "(worker_boot_id IS NULL) = (worker_start_time IS NULL))"
	  ") STRICT", 1 },
	{ "leases",
	  "CREATE TABLE leases ("
	  "artifact_id TEXT NOT NULL REFERENCES artifacts (id), "
	  "domain_id TEXT NOT NULL CHECK (" HEX64("domain_id") "), "
	  "generation INTEGER NOT NULL, "
	  "PRIMARY KEY (artifact_id, domain_id, generation)"
	  ") STRICT, WITHOUT ROWID", 1 },
	/* v2: the other references an artifact was prepared under (the
	 * artifact's own source_ref is the first), each with when it was
	 * last given (a v1 catalog gains the empty table in place) */
	{ "artifact_refs",
	  "CREATE TABLE artifact_refs ("
	  "artifact_id TEXT NOT NULL REFERENCES artifacts (id), "
	  "source_ref TEXT NOT NULL CHECK (" BYTES("source_ref", 1, 4096) "), "
	  "recorded INTEGER NOT NULL, "
	  "PRIMARY KEY (artifact_id, source_ref)"
	  ") STRICT, WITHOUT ROWID", 2 },
};

static const struct lz_sqlstore_def catalog_def = {
	.store = LZ_CATALOG_STORE_NAME,
	.version = LZ_CATALOG_STORE_VERSION,
	.db_name = LZ_CATALOG_DB_NAME,
	.title = "Lazaret Storage Catalog",
	.noun = "catalog",
	.version_noun = "storage catalog",
	.root_title = "Storage Root",
	.schema = schema,
	.n_schema = LZ_ARRAY_SIZE(schema),
};

/* ---- small helpers ------------------------------------------------------ */

static __thread bool in_section;

static int check_id(const char *what, const char *s, struct lz_err *err)
{
	if (s == NULL)
		return lz_err_set(err, EINVAL, "%s is missing", what);
	size_t n = strnlen(s, LZ_CATALOG_ID_HEX_LEN + 1);
	if (n != LZ_CATALOG_ID_HEX_LEN || !lz_sqlstore_is_hex(s, n))
		return lz_err_set(err, EINVAL, "%s must be exactly %d lowercase hex digits", what,
				  LZ_CATALOG_ID_HEX_LEN);
	return 0;
}

static int check_str(const char *what, const char *s, struct lz_err *err)
{
	if (s == NULL)
		return lz_err_set(err, EINVAL, "%s is missing", what);
	size_t n = strnlen(s, LZ_CATALOG_STR_MAX + 1);
	if (n == 0)
		return lz_err_set(err, EINVAL, "%s is empty", what);
	if (n > LZ_CATALOG_STR_MAX)
		return lz_err_set(err, EINVAL, "%s is longer than %d bytes", what, LZ_CATALOG_STR_MAX);
	return 0;
}

static int check_name(const char *what, const char *s, struct lz_err *err)
{
	if (s == NULL)
		return lz_err_set(err, EINVAL, "%s is missing", what);
	size_t n = strnlen(s, LZ_CATALOG_NAME_MAX + 1);
	if (n == 0 || n > LZ_CATALOG_NAME_MAX || memchr(s, '/', n) != NULL || strcmp(s, ".") == 0 ||
	    strcmp(s, "..") == 0)
		return lz_err_set(err, EINVAL, "%s must be one path component of 1 to %d bytes", what,
				  LZ_CATALOG_NAME_MAX);
	return 0;
}

/* A text column for a message; never NULL. */
static const char *text_or(sqlite3_stmt *s, int i)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	return t ? t : "?";
}

/* ---- sqlite plumbing ---------------------------------------------------- */

/* Runs sql with up to three text parameters (NULL ends the list) and
 * expects no row back. */
static int run3(sqlite3 *db, const char *sql, const char *a, const char *b, const char *c,
		struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, sql, &s, err);
	const char *args[] = { a, b, c };
	for (int i = 0; r >= 0 && i < 3 && args[i]; i++)
		r = lz_sqlstore_bind_text(db, s, i + 1, args[i], err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r > 0)
		r = lz_err_set(err, EPROTO, "statement returned an unexpected row");
	return r;
}

static int col_id(sqlite3_stmt *s, int i, const char *what, char out[LZ_CATALOG_ID_HEX_LEN + 1],
		  struct lz_err *err)
{
	return lz_sqlstore_col_hex(s, i, LZ_CATALOG_ID_HEX_LEN, what, out, err);
}

static int col_strdup(sqlite3_stmt *s, int i, const char *what, char **ret, struct lz_err *err)
{
	const char *t = NULL;
	int r = lz_sqlstore_col_text(s, i, 1, LZ_CATALOG_STR_MAX, what, &t, err);
	if (r < 0)
		return r;
	char *d = strdup(t);
	if (d == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	*ret = d;
	return 0;
}

/* Grows *v (elements of size sz) to hold n + 1; bounded by LIST_MAX. */
static int list_reserve(void **v, size_t *cap, size_t n, size_t sz, struct lz_err *err)
{
	return lz_sqlstore_list_reserve(v, cap, n, sz, LZ_CATALOG_LIST_MAX, err);
}

/* ---- the section -------------------------------------------------------- */

typedef int (*section_fn)(sqlite3 *db, void *ctx, struct lz_err *err);

static int run_locked(int root_fd, section_fn fn, void *ctx, struct lz_err *err)
{
	_cleanup_sqldb_ sqlite3 *db = NULL;
	int r = lz_sqlstore_open(root_fd, &catalog_def, &db, NULL, err);
	if (r < 0)
		return r;
	/* a failed COMMIT is rolled back before close */
	return lz_sqlstore_transact(db, &catalog_def, true, fn, ctx, err);
}

static int section(int root_fd, section_fn fn, void *ctx, struct lz_err *err)
{
	if (in_section)
		return lz_err_set(err, EDEADLK, "called from inside a catalog section");
	int r = lz_sqlstore_check_root(root_fd, catalog_def.root_title, err);
	if (r < 0)
		return r;
	struct stat st;
	_cleanup_close_ int lock_fd = lz_sqlstore_open_owned(root_fd, LZ_CATALOG_LOCK_NAME, &st, err);
	if (lock_fd < 0)
		return lock_fd;
	while (flock(lock_fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return lz_err_set(err, errno, "lock '%s': %s", LZ_CATALOG_LOCK_NAME,
					  strerror(errno));
	in_section = true;
	r = run_locked(root_fd, fn, ctx, err);
	in_section = false;
	flock(lock_fd, LOCK_UN); /* also when a forked child shares the descriptor */
	return r;
}

static int done(int r, struct lz_err *err)
{
	return r < 0 ? lz_err_prefix(err, r, "storage catalog: ") : r;
}

/* ---- row readers -------------------------------------------------------- */

#define ARTIFACT_COLUMNS                                                                       \
	"a.id, a.source_ref, a.manifest_digest, a.config_digest, a.size, a.state, a.created, " \
	"(SELECT count(*) FROM leases l WHERE l.artifact_id = a.id)"

static int read_artifact_fields(sqlite3_stmt *s, struct lz_catalog_artifact *a,
				struct lz_err *err)
{
	sqlite3_int64 size = 0, created = 0, leases = 0;
	const char *state = NULL;
	int r;
	if ((r = col_id(s, 0, "id", a->id, err)) < 0 ||
	    (r = col_strdup(s, 1, "source_ref", &a->source_ref, err)) < 0 ||
	    (r = col_strdup(s, 2, "manifest_digest", &a->manifest_digest, err)) < 0 ||
	    (r = col_strdup(s, 3, "config_digest", &a->config_digest, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 4, "size", &size, err)) < 0 ||
	    (r = lz_sqlstore_col_text(s, 5, 1, 32, "state", &state, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 6, "created", &created, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 7, "lease count", &leases, err)) < 0)
		return r;
	if (strcmp(state, "published") == 0)
		a->state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	else if (strcmp(state, "quarantined") == 0)
		a->state = LZ_CATALOG_ARTIFACT_QUARANTINED;
	else
		return lz_err_set(err, EPROTO, "artifact %s has an unknown state", a->id);
	a->size = lz_sqlstore_i64_to_u64(size);
	a->created = created;
	a->lease_count = (uint64_t)leases;
	return 0;
}

/* A row reader of list_ctx (out: struct lz_catalog_artifact). */
static int read_artifact(sqlite3_stmt *s, void *out, struct lz_err *err)
{
	struct lz_catalog_artifact *ret = out;
	struct lz_catalog_artifact a = { .source_ref = NULL };
	int r = read_artifact_fields(s, &a, err);
	if (r < 0) {
		lz_catalog_artifact_clear(&a);
		return r;
	}
	*ret = a;
	return 0;
}

#define PREPARE_COLUMNS                                                                \
	"id, artifact_id, staging_name, state, created, worker_boot_id, worker_pidfs_dev, " \
	"worker_pidfs_ino, worker_pid, worker_start_time"

static int read_worker(sqlite3_stmt *s, int i, bool *ret_has, struct lz_catalog_worker *ret,
		       struct lz_err *err)
{
	if (sqlite3_column_type(s, i) == SQLITE_NULL) {
		*ret_has = false;
		return 0;
	}
	struct lz_catalog_worker w;
	sqlite3_int64 dev = 0, ino = 0, pid = 0, start = 0;
	int r;
	if (sqlite3_column_type(s, i) != SQLITE_BLOB ||
	    sqlite3_column_bytes(s, i) != LZ_CATALOG_BOOT_ID_LEN)
		return lz_err_set(err, EPROTO, "worker boot ID is not %d bytes", LZ_CATALOG_BOOT_ID_LEN);
	memcpy(w.boot_id, sqlite3_column_blob(s, i), LZ_CATALOG_BOOT_ID_LEN);
	if ((r = lz_sqlstore_col_i64(s, i + 1, "worker pidfs dev", &dev, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, i + 2, "worker pidfs inode", &ino, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, i + 3, "worker pid", &pid, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, i + 4, "worker start time", &start, err)) < 0)
		return r;
	if (pid < 1 || pid > UINT32_MAX)
		return lz_err_set(err, EPROTO, "worker pid %lld out of range", (long long)pid);
	w.pidfs_dev = lz_sqlstore_i64_to_u64(dev);
	w.pidfs_ino = lz_sqlstore_i64_to_u64(ino);
	w.pid = (uint32_t)pid;
	w.start_time = lz_sqlstore_i64_to_u64(start);
	*ret = w;
	*ret_has = true;
	return 0;
}

/* A row reader of list_ctx (out: struct lz_catalog_prepare_op). */
static int read_prepare_op(sqlite3_stmt *s, void *out, struct lz_err *err)
{
	struct lz_catalog_prepare_op *ret = out;
	struct lz_catalog_prepare_op op = { .has_worker = false };
	const char *name = NULL, *state = NULL;
	sqlite3_int64 created = 0;
	int r;
	if ((r = col_id(s, 0, "id", op.id, err)) < 0 ||
	    (r = col_id(s, 1, "artifact_id", op.artifact_id, err)) < 0 ||
	    (r = lz_sqlstore_col_text(s, 2, 1, LZ_CATALOG_NAME_MAX, "staging_name", &name, err)) < 0 ||
	    (r = lz_sqlstore_col_text(s, 3, 1, 32, "state", &state, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 4, "created", &created, err)) < 0 ||
	    (r = read_worker(s, 5, &op.has_worker, &op.worker, err)) < 0)
		return r;
	memcpy(op.staging_name, name, strlen(name) + 1);
	if (strcmp(state, "preparing") == 0)
		op.state = LZ_CATALOG_PREPARE_PREPARING;
	else if (strcmp(state, "published") == 0)
		op.state = LZ_CATALOG_PREPARE_PUBLISHED;
	else if (strcmp(state, "abandoned") == 0)
		op.state = LZ_CATALOG_PREPARE_ABANDONED;
	else
		return lz_err_set(err, EPROTO, "operation %s has an unknown state", op.id);
	op.created = created;
	*ret = op;
	return 0;
}

/* Looks up one preparation operation; -ENOENT when absent. */
static int find_op(sqlite3 *db, const char *op_id, struct lz_catalog_prepare_op *ret,
		   struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, "SELECT " PREPARE_COLUMNS " FROM prepare_ops WHERE id = ?1", &s,
				    err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 1, op_id, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, ENOENT, "no preparation operation %s", op_id);
	return read_prepare_op(s, ret, err);
}

/* The artifact's state and lease count; -ENOENT when absent. */
static int find_artifact(sqlite3 *db, const char *id, enum lz_catalog_artifact_state *ret_state,
			 uint64_t *ret_leases, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts a WHERE a.id = ?1",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 1, id, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, ENOENT, "no prepared artifact %s", id);
	struct lz_catalog_artifact a;
	if ((r = read_artifact(s, &a, err)) < 0)
		return r;
	*ret_state = a.state;
	*ret_leases = a.lease_count;
	lz_catalog_artifact_clear(&a);
	return 0;
}

/* ---- check -------------------------------------------------------------- */

static int noop_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	(void)db, (void)ctx, (void)err;
	return 0;
}

int lz_catalog_check(int root_fd, struct lz_err *err)
{
	return done(section(root_fd, noop_fn, NULL, err), err);
}

/* ---- preparation operations --------------------------------------------- */

struct op_ctx {
	const char *op_id;
	const char *artifact_id;
	const char *staging_name;
	const struct lz_catalog_worker *worker;
	const struct lz_catalog_artifact_spec *spec;
};

static int begin_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct op_ctx *c = ctx;
	struct lz_catalog_prepare_op op;
	enum lz_catalog_artifact_state state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	uint64_t leases = 0;
	int r = find_op(db, c->op_id, &op, err);
	if (r == 0)
		return lz_err_set(err, EEXIST, "preparation operation %s already exists", c->op_id);
	if (r != -ENOENT)
		return r;
	r = find_artifact(db, c->artifact_id, &state, &leases, err);
	if (r == 0)
		return lz_err_set(err, EEXIST, "prepared artifact %s is already in the catalog",
				  c->artifact_id);
	if (r != -ENOENT)
		return r;

	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = lz_sqlstore_prepare(db,
			  "SELECT id FROM prepare_ops WHERE artifact_id = ?1 AND state = 'preparing'",
			  &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 1, c->artifact_id, err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	if (r > 0)
		return lz_err_set(err, EBUSY, "prepared artifact %s is already being prepared by operation %s",
				  c->artifact_id, text_or(s, 0));
	lz_sqlstore_stmt_finalizep(&s);

	if ((r = lz_sqlstore_prepare(db, "SELECT id FROM prepare_ops WHERE staging_name = ?1", &s,
				     err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 1, c->staging_name, err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	if (r > 0)
		return lz_err_set(err, EEXIST, "staging directory '%s' already belongs to operation %s",
				  c->staging_name, text_or(s, 0));
	lz_sqlstore_stmt_finalizep(&s);

	if ((r = lz_sqlstore_prepare(db,
			  "INSERT INTO prepare_ops (id, artifact_id, staging_name, state, created) "
			  "VALUES (?1, ?2, ?3, 'preparing', ?4)",
			  &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 1, c->op_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, c->artifact_id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 3, c->staging_name, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 4, lz_sqlstore_now(), err)) < 0)
		return r;
	return lz_sqlstore_step(db, s, err);
}

int lz_catalog_prepare_intent_begin(int root_fd, const char *op_id, const char *artifact_id,
				    const char *staging_name, struct lz_err *err)
{
	struct op_ctx c = { .op_id = op_id, .artifact_id = artifact_id, .staging_name = staging_name };
	int r;
	if ((r = check_id("operation ID", op_id, err)) < 0 ||
	    (r = check_id("artifact ID", artifact_id, err)) < 0 ||
	    (r = check_name("staging directory name", staging_name, err)) < 0)
		return done(r, err);
	return done(section(root_fd, begin_fn, &c, err), err);
}

static bool worker_equal(const struct lz_catalog_worker *a, const struct lz_catalog_worker *b)
{
	return memcmp(a->boot_id, b->boot_id, sizeof(a->boot_id)) == 0 &&
	       a->pidfs_dev == b->pidfs_dev && a->pidfs_ino == b->pidfs_ino && a->pid == b->pid &&
	       a->start_time == b->start_time;
}

static int set_worker_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct op_ctx *c = ctx;
	struct lz_catalog_prepare_op op;
	int r = find_op(db, c->op_id, &op, err);
	if (r < 0)
		return r;
	if (op.state != LZ_CATALOG_PREPARE_PREPARING)
		return lz_err_set(err, ESTALE, "preparation operation %s is no longer preparing",
				  c->op_id);
	if (op.has_worker)
		return worker_equal(&op.worker, c->worker)
			       ? 0
			       : lz_err_set(err, EEXIST,
					    "preparation operation %s already records another worker",
					    c->op_id);

	const struct lz_catalog_worker *w = c->worker;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = lz_sqlstore_prepare(db,
			  "UPDATE prepare_ops SET worker_boot_id = ?2, worker_pidfs_dev = ?3, "
			  "worker_pidfs_ino = ?4, worker_pid = ?5, worker_start_time = ?6 WHERE id = ?1",
			  &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 1, c->op_id, err)) < 0)
		return r;
	int rc = sqlite3_bind_blob(s, 2, w->boot_id, sizeof(w->boot_id), SQLITE_STATIC);
	if (rc != SQLITE_OK)
		return lz_sqlstore_err(db, rc, err, "bind");
	if ((r = lz_sqlstore_bind_i64(db, s, 3, lz_sqlstore_u64_to_i64(w->pidfs_dev), err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 4, lz_sqlstore_u64_to_i64(w->pidfs_ino), err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 5, (sqlite3_int64)w->pid, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 6, lz_sqlstore_u64_to_i64(w->start_time), err)) < 0)
		return r;
	return lz_sqlstore_step(db, s, err);
}

int lz_catalog_prepare_intent_set_worker(int root_fd, const char *op_id,
					 const struct lz_catalog_worker *worker, struct lz_err *err)
{
	struct op_ctx c = { .op_id = op_id, .worker = worker };
	int r = check_id("operation ID", op_id, err);
	if (r >= 0 && worker == NULL)
		r = lz_err_set(err, EINVAL, "worker identity is missing");
	if (r >= 0 && worker->pid == 0)
		r = lz_err_set(err, EINVAL, "worker pid must not be 0");
	if (r < 0)
		return done(r, err);
	return done(section(root_fd, set_worker_fn, &c, err), err);
}

static int abandon_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct op_ctx *c = ctx;
	struct lz_catalog_prepare_op op;
	int r = find_op(db, c->op_id, &op, err);
	if (r < 0)
		return r;
	if (op.state == LZ_CATALOG_PREPARE_ABANDONED)
		return 0;
	if (op.state != LZ_CATALOG_PREPARE_PREPARING)
		return lz_err_set(err, ESTALE, "preparation operation %s is already published",
				  c->op_id);
	return run3(db, "UPDATE prepare_ops SET state = 'abandoned' WHERE id = ?1", c->op_id, NULL,
		    NULL, err);
}

int lz_catalog_prepare_intent_abandon(int root_fd, const char *op_id, struct lz_err *err)
{
	struct op_ctx c = { .op_id = op_id };
	int r = check_id("operation ID", op_id, err);
	if (r < 0)
		return done(r, err);
	return done(section(root_fd, abandon_fn, &c, err), err);
}

static int remove_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct op_ctx *c = ctx;
	struct lz_catalog_prepare_op op;
	int r = find_op(db, c->op_id, &op, err);
	if (r < 0)
		return r;
	if (op.state == LZ_CATALOG_PREPARE_PREPARING)
		return lz_err_set(err, EBUSY,
				  "preparation operation %s is still preparing; abandon it first",
				  c->op_id);
	return run3(db, "DELETE FROM prepare_ops WHERE id = ?1", c->op_id, NULL, NULL, err);
}

int lz_catalog_prepare_intent_remove(int root_fd, const char *op_id, struct lz_err *err)
{
	struct op_ctx c = { .op_id = op_id };
	int r = check_id("operation ID", op_id, err);
	if (r < 0)
		return done(r, err);
	return done(section(root_fd, remove_fn, &c, err), err);
}

/* A listing: every row of sql (its ?1 bound to param, NULL binds NULL)
 * read by read into an element of elem bytes; free_list (NULL: free)
 * releases what was read when the listing fails. */
struct list_ctx {
	const char *sql;
	const char *param;
	size_t elem;
	int (*read)(sqlite3_stmt *s, void *out, struct lz_err *err);
	void (*free_list)(void *v, size_t n);
	void *v;
	size_t n;
	size_t cap;
};

static int list_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct list_ctx *c = ctx;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, c->sql, &s, err);
	if (r >= 0 && sqlite3_bind_parameter_count(s) > 0)
		r = lz_sqlstore_bind_text(db, s, 1, c->param, err);
	while (r >= 0 && (r = lz_sqlstore_step(db, s, err)) > 0) {
		if ((r = list_reserve(&c->v, &c->cap, c->n, c->elem, err)) < 0 ||
		    (r = c->read(s, (char *)c->v + c->n * c->elem, err)) < 0)
			break;
		c->n++;
	}
	return r;
}

/* The outputs are set only on success. */
static int list(int root_fd, struct list_ctx *c, void **ret_v, size_t *ret_n, struct lz_err *err)
{
	int r = section(root_fd, list_fn, c, err);
	if (r < 0) {
		if (c->free_list != NULL)
			c->free_list(c->v, c->n);
		else
			free(c->v);
		return done(r, err);
	}
	*ret_v = c->v;
	*ret_n = c->n;
	return 0;
}

int lz_catalog_prepare_list(int root_fd, struct lz_catalog_prepare_op **ret_ops, size_t *ret_n,
			    struct lz_err *err)
{
	struct list_ctx c = { .sql = "SELECT " PREPARE_COLUMNS " FROM prepare_ops ORDER BY id",
			      .elem = sizeof(**ret_ops),
			      .read = read_prepare_op };
	void *v = NULL;
	int r = list(root_fd, &c, &v, ret_n, err);
	if (r == 0)
		*ret_ops = v;
	return r;
}

/* ---- artifacts ---------------------------------------------------------- */

static int publish_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct op_ctx *c = ctx;
	const struct lz_catalog_artifact_spec *a = c->spec;
	struct lz_catalog_prepare_op op;
	enum lz_catalog_artifact_state state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	uint64_t leases = 0;
	int r = find_op(db, c->op_id, &op, err);
	if (r < 0)
		return r;
	if (op.state != LZ_CATALOG_PREPARE_PREPARING)
		return lz_err_set(err, ESTALE, "preparation operation %s is no longer preparing",
				  c->op_id);
	if (strcmp(op.artifact_id, a->id) != 0)
		return lz_err_set(err, ESTALE, "preparation operation %s prepares artifact %s, not %s",
				  c->op_id, op.artifact_id, a->id);
	r = find_artifact(db, a->id, &state, &leases, err);
	if (r == 0)
		return lz_err_set(err, EEXIST, "prepared artifact %s is already in the catalog", a->id);
	if (r != -ENOENT)
		return r;

	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = lz_sqlstore_prepare(db,
			  "INSERT INTO artifacts (id, source_ref, manifest_digest, config_digest, size, "
			  "state, created) VALUES (?1, ?2, ?3, ?4, ?5, 'published', ?6)",
			  &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 1, a->id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, a->source_ref, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 3, a->manifest_digest, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 4, a->config_digest, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 5, lz_sqlstore_u64_to_i64(a->size), err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 6, lz_sqlstore_now(), err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	return run3(db, "UPDATE prepare_ops SET state = 'published' WHERE id = ?1", c->op_id, NULL,
		    NULL, err);
}

int lz_catalog_artifact_publish(int root_fd, const char *op_id,
				const struct lz_catalog_artifact_spec *spec, struct lz_err *err)
{
	struct op_ctx c = { .op_id = op_id, .spec = spec };
	int r = check_id("operation ID", op_id, err);
	if (r >= 0 && spec == NULL)
		r = lz_err_set(err, EINVAL, "artifact description is missing");
	if (r >= 0)
		r = check_id("artifact ID", spec->id, err);
	if (r >= 0)
		r = check_str("source reference", spec->source_ref, err);
	if (r >= 0)
		r = check_str("manifest digest", spec->manifest_digest, err);
	if (r >= 0)
		r = check_str("config digest", spec->config_digest, err);
	if (r >= 0)
		r = section(root_fd, publish_fn, &c, err);
	return done(r, err);
}

struct get_ctx {
	const char *id;
	struct lz_catalog_artifact a;
};

static int get_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct get_ctx *c = ctx;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts a WHERE a.id = ?1",
				    &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 1, c->id, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, ENOENT, "no prepared artifact %s", c->id);
	return read_artifact(s, &c->a, err);
}

int lz_catalog_artifact_get(int root_fd, const char *artifact_id, struct lz_catalog_artifact *ret,
			    struct lz_err *err)
{
	struct get_ctx c = { .id = artifact_id };
	int r = check_id("artifact ID", artifact_id, err);
	if (r >= 0)
		r = section(root_fd, get_fn, &c, err);
	if (r < 0) {
		lz_catalog_artifact_clear(&c.a);
		return done(r, err);
	}
	*ret = c.a;
	return 0;
}

static void artifact_list_free(void *v, size_t n)
{
	lz_catalog_artifact_list_free(v, n);
}

int lz_catalog_artifact_list(int root_fd, struct lz_catalog_artifact **ret_v, size_t *ret_n,
			     struct lz_err *err)
{
	struct list_ctx c = { .sql = "SELECT " ARTIFACT_COLUMNS " FROM artifacts a ORDER BY a.id",
			      .elem = sizeof(**ret_v),
			      .read = read_artifact,
			      .free_list = artifact_list_free };
	void *v = NULL;
	int r = list(root_fd, &c, &v, ret_n, err);
	if (r == 0)
		*ret_v = v;
	return r;
}

struct ref_ctx {
	const char *id;
	const char *source_ref;
};

static int name_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct ref_ctx *c = ctx;
	enum lz_catalog_artifact_state state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	uint64_t leases = 0;
	int r = find_artifact(db, c->id, &state, &leases, err);
	if (r < 0)
		return r;
	if (state != LZ_CATALOG_ARTIFACT_PUBLISHED)
		return lz_err_set(err, ESTALE, "prepared artifact %s is being reclaimed", c->id);
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if ((r = lz_sqlstore_prepare(db,
				     "INSERT INTO artifact_refs (artifact_id, source_ref, recorded) VALUES (?1, ?2, ?3) "
				     "ON CONFLICT (artifact_id, source_ref) DO UPDATE SET recorded = excluded.recorded",
				     &s, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 1, c->id, err)) < 0 ||
	    (r = lz_sqlstore_bind_text(db, s, 2, c->source_ref, err)) < 0 ||
	    (r = lz_sqlstore_bind_i64(db, s, 3, lz_sqlstore_now(), err)) < 0 ||
	    (r = lz_sqlstore_step(db, s, err)) < 0)
		return r;
	return 0;
}

int lz_catalog_artifact_name(int root_fd, const char *artifact_id, const char *source_ref, struct lz_err *err)
{
	struct ref_ctx c = { .id = artifact_id, .source_ref = source_ref };
	int r = check_id("artifact ID", artifact_id, err);
	if (r >= 0)
		r = check_str("source reference", source_ref, err);
	if (r >= 0)
		r = section(root_fd, name_fn, &c, err);
	return done(r, err);
}

static int read_ref_row(sqlite3_stmt *s, void *out, struct lz_err *err)
{
	struct lz_catalog_ref *ref = out;
	sqlite3_int64 recorded = 0;
	int r;
	if ((r = col_id(s, 0, "artifact_id", ref->artifact_id, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 1, "recorded", &recorded, err)) < 0)
		return r;
	ref->recorded = recorded;
	return 0;
}

int lz_catalog_artifact_named(int root_fd, const char *source_ref, struct lz_catalog_ref **ret_v, size_t *ret_n,
			      struct lz_err *err)
{
	struct list_ctx c = { .sql = "SELECT artifact_id, recorded FROM artifact_refs WHERE source_ref = ?1 "
				     "ORDER BY artifact_id",
			      .param = source_ref,
			      .elem = sizeof(**ret_v),
			      .read = read_ref_row };
	void *v = NULL;
	int r = check_str("source reference", source_ref, err);
	if (r < 0)
		return done(r, err);
	r = list(root_fd, &c, &v, ret_n, err);
	if (r == 0)
		*ret_v = v;
	return r;
}

static int quarantine_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const char *id = ctx;
	enum lz_catalog_artifact_state state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	uint64_t leases = 0;
	int r = find_artifact(db, id, &state, &leases, err);
	if (r < 0)
		return r;
	if (leases > 0)
		return lz_err_set(err, EBUSY, "prepared artifact %s still has %" PRIu64 " lease(s)", id,
				  leases);
	if (state == LZ_CATALOG_ARTIFACT_QUARANTINED)
		return 0;
	return run3(db, "UPDATE artifacts SET state = 'quarantined' WHERE id = ?1", id, NULL, NULL,
		    err);
}

int lz_catalog_artifact_mark_quarantined(int root_fd, const char *artifact_id, struct lz_err *err)
{
	int r = check_id("artifact ID", artifact_id, err);
	if (r < 0)
		return done(r, err);
	return done(section(root_fd, quarantine_fn, (void *)artifact_id, err), err);
}

static int delete_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const char *id = ctx;
	enum lz_catalog_artifact_state state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	uint64_t leases = 0;
	int r = find_artifact(db, id, &state, &leases, err);
	if (r < 0)
		return r;
	if (leases > 0)
		return lz_err_set(err, EBUSY, "prepared artifact %s still has %" PRIu64 " lease(s)", id,
				  leases);
	if (state != LZ_CATALOG_ARTIFACT_QUARANTINED)
		return lz_err_set(err, ESTALE, "prepared artifact %s is published; quarantine it first",
				  id);
	if ((r = run3(db, "DELETE FROM artifact_refs WHERE artifact_id = ?1", id, NULL, NULL, err)) < 0)
		return r;
	return run3(db, "DELETE FROM artifacts WHERE id = ?1", id, NULL, NULL, err);
}

int lz_catalog_artifact_delete(int root_fd, const char *artifact_id, struct lz_err *err)
{
	int r = check_id("artifact ID", artifact_id, err);
	if (r < 0)
		return done(r, err);
	return done(section(root_fd, delete_fn, (void *)artifact_id, err), err);
}

/* ---- leases ------------------------------------------------------------- */

struct lease_ctx {
	const char *artifact_id;
	const char *domain_id;
	uint64_t generation;
	lz_catalog_recheck_fn recheck;
	void *recheck_ctx;
	uint64_t count;
};

static int check_lease_args(const char *artifact_id, const char *domain_id, struct lz_err *err)
{
	int r = check_id("artifact ID", artifact_id, err);
	return r < 0 ? r : check_id("Domain ID", domain_id, err);
}

/* 1 when the exact lease exists, 0 when not. */
static int lease_exists(sqlite3 *db, const struct lease_ctx *c, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db,
			 "SELECT 1 FROM leases WHERE artifact_id = ?1 AND domain_id = ?2 AND "
			 "generation = ?3",
			 &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 1, c->artifact_id, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, c->domain_id, err);
	if (r >= 0)
		r = lz_sqlstore_bind_i64(db, s, 3, lz_sqlstore_u64_to_i64(c->generation), err);
	return r < 0 ? r : lz_sqlstore_step(db, s, err);
}

static int lease_write(sqlite3 *db, const struct lease_ctx *c, const char *sql, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, sql, &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 1, c->artifact_id, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 2, c->domain_id, err);
	if (r >= 0)
		r = lz_sqlstore_bind_i64(db, s, 3, lz_sqlstore_u64_to_i64(c->generation), err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r >= 0 && sqlite3_changes(db) != 1)
		r = lz_err_set(err, EIO, "lease write changed %d rows, not 1", sqlite3_changes(db));
	return r;
}

static int acquire_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct lease_ctx *c = ctx;
	enum lz_catalog_artifact_state state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	uint64_t leases = 0;
	int r = find_artifact(db, c->artifact_id, &state, &leases, err);
	if (r < 0)
		return r;
	if (state != LZ_CATALOG_ARTIFACT_PUBLISHED)
		return lz_err_set(err, ESTALE, "prepared artifact %s is quarantined; no new leases",
				  c->artifact_id);
	if ((r = lease_exists(db, c, err)) < 0)
		return r;
	if (r > 0)
		return lz_err_set(err, EEXIST,
				  "lease (%s, Domain %s, generation %" PRIu64 ") is already held",
				  c->artifact_id, c->domain_id, c->generation);
	return lease_write(db, c,
			   "INSERT INTO leases (artifact_id, domain_id, generation) VALUES (?1, ?2, ?3)",
			   err);
}

int lz_catalog_lease_acquire(int root_fd, const char *artifact_id, const char *domain_id,
			     uint64_t generation, struct lz_err *err)
{
	struct lease_ctx c = { .artifact_id = artifact_id, .domain_id = domain_id,
			       .generation = generation };
	int r = check_lease_args(artifact_id, domain_id, err);
	if (r < 0)
		return done(r, err);
	return done(section(root_fd, acquire_fn, &c, err), err);
}

static int release_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct lease_ctx *c = ctx;
	int r = lease_exists(db, c, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, ENOENT, "no lease (%s, Domain %s, generation %" PRIu64 ")",
				  c->artifact_id, c->domain_id, c->generation);
	if (c->recheck) {
		lz_err_clear(err);
		r = c->recheck(c->recheck_ctx, err);
		if (r < 0) {
			if (err && err->msg[0] == '\0')
				return lz_err_set(err, r, "release refused by the recheck");
			return lz_err_prefix(err, r, "release refused by the recheck: ");
		}
	}
	return lease_write(db, c,
			   "DELETE FROM leases WHERE artifact_id = ?1 AND domain_id = ?2 AND "
			   "generation = ?3",
			   err);
}

int lz_catalog_lease_release(int root_fd, const char *artifact_id, const char *domain_id,
			     uint64_t generation, lz_catalog_recheck_fn recheck, void *ctx,
			     struct lz_err *err)
{
	struct lease_ctx c = { .artifact_id = artifact_id, .domain_id = domain_id,
			       .generation = generation, .recheck = recheck, .recheck_ctx = ctx };
	int r = check_lease_args(artifact_id, domain_id, err);
	if (r < 0)
		return done(r, err);
	return done(section(root_fd, release_fn, &c, err), err);
}

static int count_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct lease_ctx *c = ctx;
	enum lz_catalog_artifact_state state;
	return find_artifact(db, c->artifact_id, &state, &c->count, err);
}

int lz_catalog_lease_count(int root_fd, const char *artifact_id, uint64_t *ret_count,
			   struct lz_err *err)
{
	struct lease_ctx c = { .artifact_id = artifact_id };
	int r = check_id("artifact ID", artifact_id, err);
	if (r >= 0)
		r = section(root_fd, count_fn, &c, err);
	if (r < 0)
		return done(r, err);
	*ret_count = c.count;
	return 0;
}

static int read_lease_row(sqlite3_stmt *s, void *out, struct lz_err *err)
{
	struct lz_catalog_lease *l = out;
	sqlite3_int64 gen = 0;
	int r;
	if ((r = col_id(s, 0, "artifact_id", l->artifact_id, err)) < 0 ||
	    (r = col_id(s, 1, "domain_id", l->domain_id, err)) < 0 ||
	    (r = lz_sqlstore_col_i64(s, 2, "generation", &gen, err)) < 0)
		return r;
	l->generation = lz_sqlstore_i64_to_u64(gen);
	return 0;
}

int lz_catalog_lease_list(int root_fd, const char *artifact_id, struct lz_catalog_lease **ret_v,
			  size_t *ret_n, struct lz_err *err)
{
	/* generation holds a u64 bit pattern: values >= 2^63 read as negative
	 * and sort after all others, in unsigned order among themselves. */
	struct list_ctx c = { .sql = "SELECT artifact_id, domain_id, generation FROM leases "
				     "WHERE ?1 IS NULL OR artifact_id = ?1 "
				     "ORDER BY artifact_id, domain_id, generation < 0, generation",
			      .param = artifact_id,
			      .elem = sizeof(**ret_v),
			      .read = read_lease_row };
	void *v = NULL;
	int r = artifact_id ? check_id("artifact ID", artifact_id, err) : 0;
	if (r < 0)
		return done(r, err);
	r = list(root_fd, &c, &v, ret_n, err);
	if (r == 0)
		*ret_v = v;
	return r;
}

/* ---- ownership ---------------------------------------------------------- */

void lz_catalog_artifact_clear(struct lz_catalog_artifact *a)
{
	if (a == NULL)
		return;
	free(a->source_ref);
	free(a->manifest_digest);
	free(a->config_digest);
	a->source_ref = a->manifest_digest = a->config_digest = NULL;
}

void lz_catalog_artifact_list_free(struct lz_catalog_artifact *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		lz_catalog_artifact_clear(&v[i]);
	free(v);
}

int lz_catalog_domain_leases(int root_fd, const char *domain_id, size_t *ret_n, uint64_t *ret_generation,
			     struct lz_err *err)
{
	struct lz_catalog_lease *v = NULL;
	size_t n = 0, held = 0;
	uint64_t gen = 0;
	int r = lz_catalog_lease_list(root_fd, NULL, &v, &n, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].domain_id, domain_id) == 0) {
			held++;
			gen = v[i].generation;
		}
	free(v);
	*ret_n = held;
	*ret_generation = gen;
	return 0;
}
