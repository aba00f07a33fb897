/* Shared sqlite3 machinery of Lazaret's durable stores (spec 3.6 "Durable
 * generation document refinement"; C-REFINEMENT: sqlite3 replaces redb).
 * Used by the Storage Catalog (catalog.c) and the Domain Store
 * (domainstore.c); it knows neither.
 *
 * What it provides:
 *  - A confined database file. The database directly beneath a retained
 *    directory descriptor is opened with openat2 (RESOLVE_BENEATH |
 *    NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV), created 0600 when absent, and
 *    must be a regular file owned by the invoking user, mode exactly 0600,
 *    one link; so must its journal, -wal and -shm files where present. A
 *    store keeps a rollback journal unless its def says wal; a store that
 *    keeps one refuses a WAL database and any -wal or -shm file, and a
 *    wal store refuses them beside a database still in the rollback
 *    format (a log there is another database's: sqlite would replay it).
 *    Once a wal store keeps its log, every recheck requires the -wal and
 *    -shm files found at those names once sqlite had opened them (a log
 *    removed or replaced under an open connection would lose or forge
 *    commits). sqlite binds no log to its
 *    database: a -wal copied beside a wal store from another copy of it is
 *    replayed; nothing but this directory's 0700 keeps one out.
 *  - A descriptor-based VFS. sqlite reaches the file as
 *    "/proc/self/fd/<dir_fd>/<name>" through a copy of the unix VFS whose
 *    xFullPathname keeps that name verbatim (the stock one readlink()s it
 *    back into a pathname that would be re-resolved), so the retained
 *    descriptor, not a pathname, decides the directory for the database,
 *    its journal, log and index, and the directory fsync. The caller keeps dir_fd open and
 *    unchanged for as long as the connection lives.
 *  - A connection configured as data, not code: no triggers, views,
 *    untrusted schema or extensions; defensive mode; journal_mode=DELETE
 *    (or WAL, see lz_sqlstore_use_wal), synchronous=FULL, foreign_keys=ON,
 *    secure_delete=ON.
 *  - Store identity. lz_sqlstore_transact runs BEGIN IMMEDIATE, then
 *    the identity check before the caller's function reads any row: the
 *    `meta` table must hold exactly one 'store' row equal to def->store and
 *    one integer 'version' row equal to def->version, and the schema must
 *    be exactly def->schema (verbatim SQL, nothing more, nothing less).
 *    Anything else refuses with -EPROTO and rolls back, leaving the file
 *    byte for byte unchanged. Only an empty database (no schema object),
 *    and only when the caller allows creation, gets the schema and the
 *    identity rows, in that same transaction.
 *  - Upgrades. A store of an older version whose schema is exactly that
 *    version's (the tables with `since` up to it) gets the later tables
 *    and the current version in the same transaction, before the
 *    caller's function runs; tables are only ever added. An older store
 *    with any other schema refuses as above.
 *
 * Threat: a planted symlink, hard link, foreign-owned or group/world
 * accessible database, journal, log or index redirecting or exposing
 * store writes, or a planted log replayed into the store; a
 * foreign, older or newer database being reinterpreted as ours; a database
 * file carrying triggers or views that would run code on our writes.
 *
 * Locking is the caller's: the catalog takes its flock around open and
 * transaction; the Domain Store relies on the Domain flock its Host
 * Coordinator holds. Connections are opened SQLITE_OPEN_NOMUTEX: one
 * thread at a time per connection, and never used in a forked child.
 *
 * Conventions: 0 (or a count, or 1 for "a row") on success, -errno on
 * failure with a message in err; ret_ parameters untouched on failure.
 *   -EPROTO   not this store, or a row the store cannot hold
 *   -EPERM, -ELOOP, -ENOTDIR, -EISDIR, -EXDEV  unsafe directory, database,
 *             journal, -wal or -shm file
 *   sqlite failures map to errno as lz_sqlstore_err documents. */
#ifndef LZ_SQLSTORE_H
#define LZ_SQLSTORE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "util/cleanup.h"
#include "util/err.h"

/* One schema object: its name in sqlite_schema and its exact SQL. */
struct lz_sqlstore_table {
	const char *name;
	const char *sql;
	int64_t since; /* the store version that added it (0: the first) */
};

/* Describes one store. The words go into messages:
 *   "not a <title>: no store identity ..."
 *   "<version_noun> version 2 is newer than supported 1"
 *   "a v<version> <noun> never uses WAL"
 *   "<root_title> has mode 0755, not 0700" */
struct lz_sqlstore_def {
	const char *store;    /* meta 'store' value */
	int64_t version;      /* meta 'version' value */
	const char *db_name;  /* one component beneath the directory */
	const char *title;
	const char *noun;
	const char *version_noun;
	const char *root_title;
	const struct lz_sqlstore_table *schema; /* every object but meta, which is fixed */
	size_t n_schema;
	/* Keeps a write-ahead log once lz_sqlstore_use_wal switched it: one
	 * sync a commit against a rollback journal's four. */
	bool wal;
};

/* The meta table every store shares, created first and checked verbatim
 * like the rest of the schema. */
#define LZ_SQLSTORE_META_SQL \
	"CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value ANY NOT NULL) STRICT"

/* ---- files -------------------------------------------------------------- */

/* dir_fd (O_PATH|O_DIRECTORY is enough) must be a directory owned by the
 * invoking user with mode exactly 0700. */
int lz_sqlstore_check_root(int dir_fd, const char *root_title, struct lz_err *err);

/* Opens name directly beneath dir_fd O_RDWR (creating it 0600 when absent,
 * whatever the umask) and checks that it is a regular file of ours, mode
 * 0600, one link. Returns the descriptor (O_CLOEXEC); *ret_st is its stat. */
int lz_sqlstore_open_owned(int dir_fd, const char *name, struct stat *ret_st,
			   struct lz_err *err);

/* What lz_sqlstore_open validated, and once the store keeps its log
 * (lz_sqlstore_use_wal) the log and index sqlite holds open. */
struct lz_sqlstore_files {
	struct stat db, wal_st, shm_st;
	bool had_wal, had_shm; /* there before sqlite opened the database */
	bool wal;              /* lz_sqlstore_use_wal succeeded */
};

/* Validates (creating when absent) def->db_name beneath dir_fd and its
 * companions, then opens and configures a connection through the
 * descriptor VFS. *ret_files (optional) receives what was validated, for
 * lz_sqlstore_recheck and lz_sqlstore_close. Runs no transaction: the identity is
 * checked by lz_sqlstore_transact. */
int lz_sqlstore_open(int dir_fd, const struct lz_sqlstore_def *def, sqlite3 **ret_db,
		     struct lz_sqlstore_files *ret_files, struct lz_err *err);

/* For a connection kept open between transactions: the name still refers
 * to the validated file (same device and inode, still ours, 0600, one
 * link) and its companions pass as at open; once the store keeps its log,
 * the -wal and -shm names are still sqlite's files. */
int lz_sqlstore_recheck(int dir_fd, const struct lz_sqlstore_def *def, const struct lz_sqlstore_files *opened,
			struct lz_err *err);

/* For a def with wal, once its identity was checked: switches the
 * connection (and the file) to the write-ahead log, and records in *f the
 * log and index sqlite opened. Until then closing the connection folds no
 * log into the database. */
int lz_sqlstore_use_wal(sqlite3 *db, int dir_fd, const struct lz_sqlstore_def *def, struct lz_sqlstore_files *f,
			struct lz_err *err);

/* Closes db (NULL: nothing). A wal store refused before lz_sqlstore_use_wal
 * is left as it was: the -wal and -shm files this open made are removed. */
void lz_sqlstore_close(sqlite3 *db, int dir_fd, const struct lz_sqlstore_def *def,
		       const struct lz_sqlstore_files *f);

/* ---- transactions ------------------------------------------------------- */

typedef int (*lz_sqlstore_fn)(sqlite3 *db, void *ctx, struct lz_err *err);

/* BEGIN IMMEDIATE -> identity check (creating the schema in an empty
 * database only when may_create) -> fn(db, ctx, err) -> COMMIT. Any failure
 * rolls back, so the connection is outside a transaction on return. fn's
 * non-negative result is returned. */
int lz_sqlstore_transact(sqlite3 *db, const struct lz_sqlstore_def *def, bool may_create,
			 lz_sqlstore_fn fn, void *ctx, struct lz_err *err);

/* A batch: several operations in one transaction, so one commit (and one
 * set of syncs) instead of one each. lz_sqlstore_begin runs BEGIN
 * IMMEDIATE and the identity check (rolled back on failure);
 * lz_sqlstore_nested runs fn inside the open transaction under a
 * savepoint, so a failing fn undoes only its own writes;
 * lz_sqlstore_commit commits, rolling back when COMMIT fails (the
 * connection is then outside a transaction). */
int lz_sqlstore_begin(sqlite3 *db, const struct lz_sqlstore_def *def, struct lz_err *err);
int lz_sqlstore_nested(sqlite3 *db, lz_sqlstore_fn fn, void *ctx, struct lz_err *err);
int lz_sqlstore_commit(sqlite3 *db, struct lz_err *err);

/* ---- statements --------------------------------------------------------- */

/* Maps an sqlite result code to -errno with "<what>: <sqlite message>":
 * NOMEM -> ENOMEM, FULL -> ENOSPC, READONLY/PERM/AUTH -> EACCES,
 * BUSY/LOCKED -> EAGAIN, CORRUPT/NOTADB/FORMAT/MISMATCH/SCHEMA -> EPROTO,
 * CONSTRAINT/RANGE/TOOBIG -> EINVAL, anything else EIO. db may be NULL. */
int lz_sqlstore_err(sqlite3 *db, int rc, struct lz_err *err, const char *what);

int lz_sqlstore_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret, struct lz_err *err);
int lz_sqlstore_exec(sqlite3 *db, const char *sql, struct lz_err *err);
/* PRAGMA integrity_check (in the caller's transaction): 0 when sqlite
 * reports "ok", -EBADMSG with its first finding otherwise. */
int lz_sqlstore_integrity(sqlite3 *db, struct lz_err *err);

/* Parameter indexes from 1. NULL text binds SQL NULL. Text and blobs are
 * bound SQLITE_STATIC: they must outlive the statement's execution. */
int lz_sqlstore_bind_text(sqlite3 *db, sqlite3_stmt *s, int i, const char *v, struct lz_err *err);
int lz_sqlstore_bind_i64(sqlite3 *db, sqlite3_stmt *s, int i, sqlite3_int64 v,
			 struct lz_err *err);
int lz_sqlstore_bind_u64(sqlite3 *db, sqlite3_stmt *s, int i, uint64_t v, struct lz_err *err);
int lz_sqlstore_bind_blob(sqlite3 *db, sqlite3_stmt *s, int i, const void *v, int n,
			  struct lz_err *err);
int lz_sqlstore_bind_null(sqlite3 *db, sqlite3_stmt *s, int i, struct lz_err *err);

/* 1: a row, 0: done, <0: error. */
int lz_sqlstore_step(sqlite3 *db, sqlite3_stmt *s, struct lz_err *err);

/* Steps a statement that must not return a row and must change exactly
 * `changes` rows (-1: any number); else -EPROTO / -EIO. */
int lz_sqlstore_step_done(sqlite3 *db, sqlite3_stmt *s, int changes, struct lz_err *err);

/* Column readers: the wrong type or shape is -EPROTO naming `what`. */
/* Text of min..max bytes without NUL; *ret points into the statement. */
int lz_sqlstore_col_text(sqlite3_stmt *s, int i, size_t min, size_t max, const char *what,
			 const char **ret, struct lz_err *err);
/* Exactly n lowercase hex digits copied to out (n + 1 bytes). */
int lz_sqlstore_col_hex(sqlite3_stmt *s, int i, size_t n, const char *what, char *out,
			struct lz_err *err);
int lz_sqlstore_col_i64(sqlite3_stmt *s, int i, const char *what, sqlite3_int64 *ret,
			struct lz_err *err);
int lz_sqlstore_col_u64(sqlite3_stmt *s, int i, const char *what, uint64_t *ret,
			struct lz_err *err);
/* A blob of exactly n bytes copied to out. */
int lz_sqlstore_col_blob(sqlite3_stmt *s, int i, size_t n, const char *what, void *out,
			 struct lz_err *err);

void lz_sqlstore_stmt_finalizep(sqlite3_stmt **s);
void lz_sqlstore_db_closep(sqlite3 **db);
#define _cleanup_sqlstmt_ _cleanup_(lz_sqlstore_stmt_finalizep)
#define _cleanup_sqldb_ _cleanup_(lz_sqlstore_db_closep)

/* ---- values ------------------------------------------------------------- */

/* u64 values are stored as their two's-complement bit pattern in INTEGER
 * columns (sqlite integers are signed): values >= 2^63 read as negative.
 * In SQL, unsigned order is `ORDER BY c < 0, c`. */
static inline sqlite3_int64 lz_sqlstore_u64_to_i64(uint64_t v)
{
	sqlite3_int64 r = 0;
	memcpy(&r, &v, sizeof(r));
	return r;
}

static inline uint64_t lz_sqlstore_i64_to_u64(sqlite3_int64 v)
{
	uint64_t r = 0;
	memcpy(&r, &v, sizeof(r));
	return r;
}

/* s[0..n) is n lowercase hex digits. */
bool lz_sqlstore_is_hex(const char *s, size_t n);

/* Copies at most 64 bytes of untrusted text for a message, printable ASCII
 * only, so a foreign database cannot smuggle control characters into it. */
const char *lz_sqlstore_sanitize(const unsigned char *in, int n, char out[68]);

/* CLOCK_REALTIME seconds. */
int64_t lz_sqlstore_now(void);

/* Grows *v (elements of size sz) to hold n + 1; at most max elements
 * (-EOVERFLOW "more than <max> rows"). */
int lz_sqlstore_list_reserve(void **v, size_t *cap, size_t n, size_t sz, size_t max,
			     struct lz_err *err);

#endif
