/* Storage Catalog: see catalog.h for the section protocol, invariants and
 * the caller's part of spec 3.6.
 *
 * Lock order: catalog.lock (flock) -> sqlite database -> transaction. Every
 * section releases in reverse order before returning; nothing survives a
 * call, so a forked child or a crashed coordinator leaves no open catalog. */
#include "catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sys.h"

#define JOURNAL_NAME LZ_CATALOG_DB_NAME "-journal"
#define VFS_NAME "lazaret-catalog"
#define BUSY_TIMEOUT_MS 10000 /* the flock already serializes; belt and braces */

/* ---- schema ------------------------------------------------------------- */

/* The v1 schema, compared verbatim with sqlite_schema on every open: a v1
 * catalog whose tables, checks, triggers or views differ is not v1. u64
 * values are stored as their two's-complement bit pattern in INTEGER
 * columns (sqlite integers are signed); see u64_to_i64. */
#define HEX64(c) "length(" c ") = 64 AND " c " NOT GLOB '*[^0-9a-f]*'"
#define BYTES(c, lo, hi) "length(CAST(" c " AS BLOB)) BETWEEN " #lo " AND " #hi

static const struct {
	const char *name;
	const char *sql;
} schema[] = {
	{ "meta", "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value ANY NOT NULL) STRICT" },
	{ "artifacts",
	  "CREATE TABLE artifacts ("
	  "id TEXT PRIMARY KEY NOT NULL CHECK (" HEX64("id") "), "
	  "source_ref TEXT NOT NULL CHECK (" BYTES("source_ref", 1, 4096) "), "
	  "manifest_digest TEXT NOT NULL CHECK (" BYTES("manifest_digest", 1, 4096) "), "
	  "config_digest TEXT NOT NULL CHECK (" BYTES("config_digest", 1, 4096) "), "
	  "size INTEGER NOT NULL, "
	  "state TEXT NOT NULL CHECK (state IN ('published', 'quarantined')), "
	  "created INTEGER NOT NULL"
	  ") STRICT" },
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
	  ") STRICT" },
	{ "leases",
	  "CREATE TABLE leases ("
	  "artifact_id TEXT NOT NULL REFERENCES artifacts (id), "
	  "domain_id TEXT NOT NULL CHECK (" HEX64("domain_id") "), "
	  "generation INTEGER NOT NULL, "
	  "PRIMARY KEY (artifact_id, domain_id, generation)"
	  ") STRICT, WITHOUT ROWID" },
};

/* ---- small helpers ------------------------------------------------------ */

static __thread bool in_section;

static void stmt_finalizep(sqlite3_stmt **s)
{
	sqlite3_finalize(*s); /* NULL is a no-op */
	*s = NULL;
}

static void db_closep(sqlite3 **db)
{
	sqlite3_close_v2(*db); /* NULL is a no-op; statements are gone by now */
	*db = NULL;
}

#define _cleanup_stmt_ _cleanup_(stmt_finalizep)
#define _cleanup_db_ _cleanup_(db_closep)

static sqlite3_int64 u64_to_i64(uint64_t v)
{
	sqlite3_int64 r = 0;
	memcpy(&r, &v, sizeof(r));
	return r;
}

static uint64_t i64_to_u64(sqlite3_int64 v)
{
	uint64_t r;
	memcpy(&r, &v, sizeof(r));
	return r;
}

static bool is_hex64(const char *s, size_t n)
{
	if (n != LZ_CATALOG_ID_HEX_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static int check_id(const char *what, const char *s, struct lz_err *err)
{
	if (s == NULL)
		return lz_err_set(err, EINVAL, "%s is missing", what);
	if (!is_hex64(s, strnlen(s, LZ_CATALOG_ID_HEX_LEN + 1)))
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

/* Copies at most 64 bytes of untrusted text for a message, printable ASCII
 * only, so a foreign database cannot smuggle control characters into it. */
static const char *sanitize(const unsigned char *in, int n, char out[68])
{
	int i = 0;
	for (; in != NULL && i < n && i < 64; i++)
		out[i] = (in[i] >= 0x20 && in[i] < 0x7f) ? (char)in[i] : '?';
	if (in != NULL && n > 64) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

/* A text column for a message; never NULL. */
static const char *text_or(sqlite3_stmt *s, int i)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	return t ? t : "?";
}

static int64_t now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

/* ---- sqlite plumbing ---------------------------------------------------- */

static int sql_err(sqlite3 *db, int rc, struct lz_err *err, const char *what)
{
	int e;
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		e = ENOMEM;
		break;
	case SQLITE_FULL:
		e = ENOSPC;
		break;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		e = EACCES;
		break;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		e = EAGAIN;
		break;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_FORMAT:
	case SQLITE_MISMATCH:
	case SQLITE_SCHEMA:
		e = EPROTO;
		break;
	case SQLITE_CONSTRAINT:
	case SQLITE_RANGE:
	case SQLITE_TOOBIG:
		e = EINVAL;
		break;
	default:
		e = EIO;
		break;
	}
	return lz_err_set(err, e, "%s: %s", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

static int stmt_new(sqlite3 *db, const char *sql, sqlite3_stmt **ret, struct lz_err *err)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_finalize(s);
		return sql_err(db, rc, err, "prepare statement");
	}
	*ret = s;
	return 0;
}

static int exec(sqlite3 *db, const char *sql, struct lz_err *err)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : sql_err(db, rc, err, sql);
}

/* Binds text (NULL binds SQL NULL) and integers; index from 1. */
static int bind_text(sqlite3 *db, sqlite3_stmt *s, int i, const char *v, struct lz_err *err)
{
	int rc = v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
	return rc == SQLITE_OK ? 0 : sql_err(db, rc, err, "bind");
}

static int bind_i64(sqlite3 *db, sqlite3_stmt *s, int i, sqlite3_int64 v, struct lz_err *err)
{
	int rc = sqlite3_bind_int64(s, i, v);
	return rc == SQLITE_OK ? 0 : sql_err(db, rc, err, "bind");
}

/* 1: a row, 0: done, <0: error. */
static int step(sqlite3 *db, sqlite3_stmt *s, struct lz_err *err)
{
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return sql_err(db, rc, err, "step");
}

/* Runs sql with up to three text parameters (NULL ends the list) and
 * expects no row back. */
static int run3(sqlite3 *db, const char *sql, const char *a, const char *b, const char *c,
		struct lz_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, sql, &s, err);
	const char *args[] = { a, b, c };
	for (int i = 0; r >= 0 && i < 3 && args[i]; i++)
		r = bind_text(db, s, i + 1, args[i], err);
	if (r >= 0)
		r = step(db, s, err);
	if (r > 0)
		r = lz_err_set(err, EPROTO, "statement returned an unexpected row");
	return r;
}

/* A text column holding min..max bytes and no NUL, else -EPROTO. */
static int col_text(sqlite3_stmt *s, int i, size_t min, size_t max, const char *what,
		    const char **ret, struct lz_err *err)
{
	if (sqlite3_column_type(s, i) != SQLITE_TEXT)
		return lz_err_set(err, EPROTO, "row field %s is not text", what);
	const char *t = (const char *)sqlite3_column_text(s, i);
	int n = sqlite3_column_bytes(s, i);
	if (t == NULL)
		return lz_err_set(err, ENOMEM, "out of memory reading %s", what);
	if (n < 0 || (size_t)n < min || (size_t)n > max || strlen(t) != (size_t)n)
		return lz_err_set(err, EPROTO, "row field %s has an invalid length", what);
	*ret = t;
	return 0;
}

static int col_id(sqlite3_stmt *s, int i, const char *what, char out[LZ_CATALOG_ID_HEX_LEN + 1],
		  struct lz_err *err)
{
	const char *t = NULL;
	int r = col_text(s, i, LZ_CATALOG_ID_HEX_LEN, LZ_CATALOG_ID_HEX_LEN, what, &t, err);
	if (r < 0)
		return r;
	if (!is_hex64(t, LZ_CATALOG_ID_HEX_LEN))
		return lz_err_set(err, EPROTO, "row field %s is not a 64-digit hex ID", what);
	memcpy(out, t, LZ_CATALOG_ID_HEX_LEN + 1);
	return 0;
}

static int col_int(sqlite3_stmt *s, int i, const char *what, sqlite3_int64 *ret, struct lz_err *err)
{
	if (sqlite3_column_type(s, i) != SQLITE_INTEGER)
		return lz_err_set(err, EPROTO, "row field %s is not an integer", what);
	*ret = sqlite3_column_int64(s, i);
	return 0;
}

static int col_strdup(sqlite3_stmt *s, int i, const char *what, char **ret, struct lz_err *err)
{
	const char *t = NULL;
	int r = col_text(s, i, 1, LZ_CATALOG_STR_MAX, what, &t, err);
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
	if (n >= LZ_CATALOG_LIST_MAX)
		return lz_err_set(err, EOVERFLOW, "more than %d rows", LZ_CATALOG_LIST_MAX);
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	if (ncap > LZ_CATALOG_LIST_MAX)
		ncap = LZ_CATALOG_LIST_MAX;
	void *p = reallocarray(*v, ncap, sz);
	if (p == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	*v = p;
	*cap = ncap;
	return 0;
}

/* ---- the catalog VFS ---------------------------------------------------- */

/* The stock unix VFS canonicalizes names by readlink()ing every symlink
 * component, which turns "/proc/self/fd/N/catalog.sqlite" back into a
 * pathname that is then re-resolved (and SQLITE_OPEN_NOFOLLOW refuses the
 * magic link outright). This copy of it keeps the name verbatim, so every
 * open - database, journal, directory fsync - goes through the retained
 * Storage Root descriptor. Everything else is the unix VFS unchanged. */
static sqlite3_vfs catalog_vfs;
static int catalog_vfs_rc = SQLITE_ERROR;
static pthread_once_t catalog_vfs_once = PTHREAD_ONCE_INIT;

static int vfs_full_pathname(sqlite3_vfs *vfs, const char *name, int n_out, char *out)
{
	(void)vfs;
	size_t n = strlen(name);
	if (name[0] != '/' || n_out <= 0 || n >= (size_t)n_out)
		return SQLITE_CANTOPEN;
	memcpy(out, name, n + 1);
	return SQLITE_OK;
}

static void vfs_register(void)
{
	int rc = sqlite3_initialize();
	if (rc != SQLITE_OK) {
		catalog_vfs_rc = rc;
		return;
	}
	sqlite3_vfs *base = sqlite3_vfs_find("unix");
	if (base == NULL)
		return;
	catalog_vfs = *base;
	catalog_vfs.pNext = NULL;
	catalog_vfs.zName = VFS_NAME;
	catalog_vfs.xFullPathname = vfs_full_pathname;
	catalog_vfs_rc = sqlite3_vfs_register(&catalog_vfs, 0);
}

/* ---- files beneath the Storage Root ------------------------------------- */

static int open_how_mode(int dirfd, const char *name, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (unsigned long long)flags,
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = LZ_RESOLVE_OWNED,
	};
	return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
}

static int check_root(int root_fd, struct lz_err *err)
{
	struct stat st;
	if (fstat(root_fd, &st) < 0)
		return lz_err_set(err, errno, "Storage Root descriptor: %s", strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return lz_err_set(err, ENOTDIR, "Storage Root descriptor is not a directory");
	if (st.st_uid != getuid())
		return lz_err_set(err, EPERM, "Storage Root is owned by uid %u, not by you (uid %u)",
				  (unsigned)st.st_uid, (unsigned)getuid());
	if ((st.st_mode & 07777) != 0700)
		return lz_err_set(err, EPERM, "Storage Root has mode %04o, not 0700",
				  (unsigned)(st.st_mode & 07777));
	return 0;
}

static int check_owned_file(const struct stat *st, const char *name, bool exact_mode,
			    struct lz_err *err)
{
	if (!S_ISREG(st->st_mode))
		return lz_err_set(err, EPERM, "'%s' is not a regular file", name);
	if (st->st_uid != getuid())
		return lz_err_set(err, EPERM, "'%s' is owned by uid %u, not by you (uid %u)", name,
				  (unsigned)st->st_uid, (unsigned)getuid());
	mode_t m = st->st_mode & 07777;
	if (exact_mode ? m != 0600 : (m & 07177) != 0)
		return lz_err_set(err, EPERM, "'%s' has mode %04o, not 0600", name, (unsigned)m);
	if (st->st_nlink != 1)
		return lz_err_set(err, EPERM, "'%s' has %ju links, not 1", name,
				  (uintmax_t)st->st_nlink);
	return 0;
}

/* Opens (creating 0600 when absent) a regular file directly beneath the
 * Storage Root and checks that it is ours, 0600 and singly linked. */
static int open_owned_file(int root_fd, const char *name, struct stat *ret_st, struct lz_err *err)
{
	const int flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	bool created = true;
	_cleanup_close_ int fd = open_how_mode(root_fd, name, flags | O_CREAT | O_EXCL, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = false;
		fd = open_how_mode(root_fd, name, flags, 0);
	}
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return lz_err_set(err, e, "'%s' is a symlink", name);
		if (e == EXDEV)
			return lz_err_set(err, e, "'%s' crosses a mount point", name);
		return lz_err_set(err, e, "open '%s': %s", name, strerror(e));
	}
	/* The umask may have narrowed a file we just made; widen to exactly 0600. */
	if (created && fchmod(fd, 0600) < 0)
		return lz_err_set(err, errno, "chmod '%s': %s", name, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", name, strerror(errno));
	int r = check_owned_file(&st, name, true, err);
	if (r < 0)
		return r;
	*ret_st = st;
	return TAKE_FD(fd);
}

/* Validates (creating when absent) the database and a leftover journal
 * before sqlite sees either, and refuses a WAL-mode database: v1 uses a
 * rollback journal, and converting a foreign WAL file would write to it. */
static int prepare_db_file(int root_fd, struct lz_err *err)
{
	struct stat st;
	_cleanup_close_ int fd = open_owned_file(root_fd, LZ_CATALOG_DB_NAME, &st, err);
	if (fd < 0)
		return fd;
	unsigned char h[100];
	ssize_t n = st.st_size > 0 ? pread(fd, h, sizeof(h), 0) : 0;
	if (n < 0)
		return lz_err_set(err, errno, "read '%s': %s", LZ_CATALOG_DB_NAME, strerror(errno));
	if (n == (ssize_t)sizeof(h) && memcmp(h, "SQLite format 3", 16) == 0 &&
	    (h[18] != 1 || h[19] != 1))
		return lz_err_set(err, EPROTO,
				  "'%s' uses file format %u/%u (WAL?); a v1 catalog uses a rollback journal",
				  LZ_CATALOG_DB_NAME, h[18], h[19]);

	/* sqlite switches to WAL whenever a -wal file exists: a v1 catalog
	 * never has one, so either is foreign. */
	static const char *const wal_names[] = { LZ_CATALOG_DB_NAME "-wal", LZ_CATALOG_DB_NAME "-shm" };
	struct stat jst;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(wal_names); i++) {
		if (fstatat(root_fd, wal_names[i], &jst, AT_SYMLINK_NOFOLLOW) == 0)
			return lz_err_set(err, EPROTO, "found '%s'; a v1 catalog never uses WAL",
					  wal_names[i]);
		if (errno != ENOENT)
			return lz_err_set(err, errno, "stat '%s': %s", wal_names[i], strerror(errno));
	}
	if (fstatat(root_fd, JOURNAL_NAME, &jst, AT_SYMLINK_NOFOLLOW) == 0) {
		int r = check_owned_file(&jst, JOURNAL_NAME, false, err);
		if (r < 0)
			return r;
	} else if (errno != ENOENT) {
		return lz_err_set(err, errno, "stat '%s': %s", JOURNAL_NAME, strerror(errno));
	}
	/* fd closes here, before sqlite opens the file: closing any descriptor
	 * of the inode later would drop sqlite's POSIX locks. */
	return 0;
}

static int db_open(int root_fd, sqlite3 **ret, struct lz_err *err)
{
	pthread_once(&catalog_vfs_once, vfs_register);
	if (catalog_vfs_rc != SQLITE_OK)
		return sql_err(NULL, catalog_vfs_rc, err, "register the catalog VFS");

	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", root_fd, LZ_CATALOG_DB_NAME);
	_cleanup_db_ sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX |
					 SQLITE_OPEN_PRIVATECACHE | SQLITE_OPEN_EXRESCODE,
				 VFS_NAME);
	if (rc != SQLITE_OK)
		return sql_err(db, rc, err, "open " LZ_CATALOG_DB_NAME);
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);

	/* A database file is data, not code: no triggers or views run, the
	 * schema cannot be written through PRAGMA writable_schema. */
	static const int off[] = { SQLITE_DBCONFIG_ENABLE_TRIGGER, SQLITE_DBCONFIG_ENABLE_VIEW,
				   SQLITE_DBCONFIG_TRUSTED_SCHEMA, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(off); i++)
		if ((rc = sqlite3_db_config(db, off[i], 0, NULL)) != SQLITE_OK)
			return sql_err(db, rc, err, "configure");
	if ((rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL)) != SQLITE_OK)
		return sql_err(db, rc, err, "configure");

	int r = exec(db,
		     "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
		     "PRAGMA temp_store = MEMORY; PRAGMA secure_delete = ON",
		     err);
	if (r < 0)
		return r;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if ((r = stmt_new(db, "PRAGMA journal_mode = DELETE", &s, err)) < 0 ||
	    (r = step(db, s, err)) < 0)
		return r;
	const char *mode = r > 0 ? (const char *)sqlite3_column_text(s, 0) : NULL;
	if (mode == NULL || strcmp(mode, "delete") != 0)
		return lz_err_set(err, EPROTO, "cannot use the rollback journal (journal mode %s)",
				  mode ? mode : "unknown");
	stmt_finalizep(&s);
	*ret = TAKE_PTR(db);
	return 0;
}

/* ---- store identity ----------------------------------------------------- */

static int create_schema(sqlite3 *db, struct lz_err *err)
{
	for (size_t i = 0; i < LZ_ARRAY_SIZE(schema); i++) {
		int r = exec(db, schema[i].sql, err);
		if (r < 0)
			return lz_err_prefix(err, r, "create table %s: ", schema[i].name);
	}
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, "INSERT INTO meta (key, value) VALUES ('store', ?1), ('version', ?2)",
			 &s, err);
	if (r >= 0)
		r = bind_text(db, s, 1, LZ_CATALOG_STORE_NAME, err);
	if (r >= 0)
		r = bind_i64(db, s, 2, LZ_CATALOG_STORE_VERSION, err);
	if (r >= 0)
		r = step(db, s, err);
	return r < 0 ? lz_err_prefix(err, r, "write store identity: ") : 0;
}

/* The single meta row for key, positioned on its value (column 0). */
static int meta_row(sqlite3 *db, const char *key, sqlite3_stmt **ret, struct lz_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT value, (SELECT count(*) FROM meta WHERE key = ?1) FROM meta "
			       "WHERE key = ?1 LIMIT 1",
			       -1, &s, NULL) != SQLITE_OK)
		return lz_err_set(err, EPROTO, "not a Lazaret Storage Catalog: meta table unreadable (%s)",
				  sqlite3_errmsg(db));
	int r = bind_text(db, s, 1, key, err);
	if (r >= 0)
		r = step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, EPROTO, "not a Lazaret Storage Catalog: no '%s' identity row", key);
	if (sqlite3_column_int64(s, 1) != 1)
		return lz_err_set(err, EPROTO, "not a Lazaret Storage Catalog: more than one '%s' row",
				  key);
	*ret = TAKE_PTR(s);
	return 0;
}

/* Every schema object with SQL must be one of v1's, verbatim, and each of
 * v1's must be there; sqlite's own autoindexes have no SQL. */
static int schema_check(sqlite3 *db, struct lz_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, "SELECT name, sql, type FROM sqlite_schema", &s, err);
	bool seen[LZ_ARRAY_SIZE(schema)] = { false };
	char buf[68];
	while (r >= 0 && (r = step(db, s, err)) > 0) {
		const unsigned char *name = sqlite3_column_text(s, 0);
		const unsigned char *sql = sqlite3_column_text(s, 1);
		const unsigned char *type = sqlite3_column_text(s, 2);
		if (sql == NULL) {
			if (type && name && strcmp((const char *)type, "index") == 0 &&
			    strncmp((const char *)name, "sqlite_autoindex_", 17) == 0)
				continue;
			return lz_err_set(err, EPROTO, "v1 schema mismatch: unexpected object '%s'",
					  sanitize(name, sqlite3_column_bytes(s, 0), buf));
		}
		size_t i = 0;
		while (i < LZ_ARRAY_SIZE(schema) &&
		       !(name && strcmp((const char *)name, schema[i].name) == 0))
			i++;
		if (i == LZ_ARRAY_SIZE(schema))
			return lz_err_set(err, EPROTO, "v1 schema mismatch: unexpected object '%s'",
					  sanitize(name, sqlite3_column_bytes(s, 0), buf));
		if (strcmp((const char *)sql, schema[i].sql) != 0)
			return lz_err_set(err, EPROTO, "v1 schema mismatch: table '%s' differs",
					  schema[i].name);
		seen[i] = true;
	}
	if (r < 0)
		return r;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(schema); i++)
		if (!seen[i])
			return lz_err_set(err, EPROTO, "v1 schema mismatch: table '%s' is missing",
					  schema[i].name);
	return 0;
}

/* Runs first in every transaction: an empty database gets v1; anything
 * else must prove v1 identity before any other row is read. */
static int identity_check(sqlite3 *db, struct lz_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db,
			 "SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'), "
			 "(SELECT count(*) FROM sqlite_schema)",
			 &s, err);
	if (r >= 0 && (r = step(db, s, err)) == 0)
		r = lz_err_set(err, EIO, "schema query returned nothing");
	if (r < 0)
		return r;
	/* No schema object at all: no row to misread (a hot journal of an
	 * interrupted creation was rolled back when the transaction began). */
	if (sqlite3_column_int64(s, 1) == 0)
		return create_schema(db, err);
	if (sqlite3_column_int64(s, 0) != 1)
		return lz_err_set(err, EPROTO,
				  "not a Lazaret Storage Catalog: no store identity (no 'meta' table; "
				  "%lld other schema objects)",
				  (long long)sqlite3_column_int64(s, 1));
	stmt_finalizep(&s);

	char buf[68];
	if ((r = meta_row(db, "store", &s, err)) < 0)
		return r;
	const unsigned char *store = sqlite3_column_text(s, 0);
	int store_len = sqlite3_column_bytes(s, 0);
	if (sqlite3_column_type(s, 0) != SQLITE_TEXT || store == NULL ||
	    (size_t)store_len != strlen(LZ_CATALOG_STORE_NAME) ||
	    memcmp(store, LZ_CATALOG_STORE_NAME, (size_t)store_len) != 0)
		return lz_err_set(err, EPROTO, "not a Lazaret Storage Catalog: store is '%s', not '%s'",
				  sanitize(store, store_len, buf), LZ_CATALOG_STORE_NAME);
	stmt_finalizep(&s);

	if ((r = meta_row(db, "version", &s, err)) < 0)
		return r;
	if (sqlite3_column_type(s, 0) != SQLITE_INTEGER)
		return lz_err_set(err, EPROTO, "storage catalog version '%s' is not an integer",
				  sanitize(sqlite3_column_text(s, 0), sqlite3_column_bytes(s, 0), buf));
	sqlite3_int64 v = sqlite3_column_int64(s, 0);
	if (v != LZ_CATALOG_STORE_VERSION)
		return lz_err_set(err, EPROTO, "storage catalog version %lld is %s than supported %d",
				  (long long)v, v < LZ_CATALOG_STORE_VERSION ? "older" : "newer",
				  LZ_CATALOG_STORE_VERSION);
	stmt_finalizep(&s);
	return schema_check(db, err);
}

/* ---- the section -------------------------------------------------------- */

typedef int (*section_fn)(sqlite3 *db, void *ctx, struct lz_err *err);

static int run_locked(int root_fd, section_fn fn, void *ctx, struct lz_err *err)
{
	int r = prepare_db_file(root_fd, err);
	if (r < 0)
		return r;
	_cleanup_db_ sqlite3 *db = NULL;
	if ((r = db_open(root_fd, &db, err)) < 0)
		return r;
	if ((r = exec(db, "BEGIN IMMEDIATE", err)) < 0)
		return r;
	r = identity_check(db, err);
	if (r >= 0)
		r = fn(db, ctx, err);
	if (r < 0) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return r;
	}
	int c = exec(db, "COMMIT", err);
	return c < 0 ? c : r; /* a failed COMMIT is rolled back by close */
}

static int section(int root_fd, section_fn fn, void *ctx, struct lz_err *err)
{
	if (in_section)
		return lz_err_set(err, EDEADLK, "called from inside a catalog section");
	int r = check_root(root_fd, err);
	if (r < 0)
		return r;
	struct stat st;
	_cleanup_close_ int lock_fd = open_owned_file(root_fd, LZ_CATALOG_LOCK_NAME, &st, err);
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
	    (r = col_int(s, 4, "size", &size, err)) < 0 ||
	    (r = col_text(s, 5, 1, 32, "state", &state, err)) < 0 ||
	    (r = col_int(s, 6, "created", &created, err)) < 0 ||
	    (r = col_int(s, 7, "lease count", &leases, err)) < 0)
		return r;
	if (strcmp(state, "published") == 0)
		a->state = LZ_CATALOG_ARTIFACT_PUBLISHED;
	else if (strcmp(state, "quarantined") == 0)
		a->state = LZ_CATALOG_ARTIFACT_QUARANTINED;
	else
		return lz_err_set(err, EPROTO, "artifact %s has an unknown state", a->id);
	a->size = i64_to_u64(size);
	a->created = created;
	a->lease_count = (uint64_t)leases;
	return 0;
}

static int read_artifact(sqlite3_stmt *s, struct lz_catalog_artifact *ret, struct lz_err *err)
{
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
	if ((r = col_int(s, i + 1, "worker pidfs dev", &dev, err)) < 0 ||
	    (r = col_int(s, i + 2, "worker pidfs inode", &ino, err)) < 0 ||
	    (r = col_int(s, i + 3, "worker pid", &pid, err)) < 0 ||
	    (r = col_int(s, i + 4, "worker start time", &start, err)) < 0)
		return r;
	if (pid < 1 || pid > UINT32_MAX)
		return lz_err_set(err, EPROTO, "worker pid %lld out of range", (long long)pid);
	w.pidfs_dev = i64_to_u64(dev);
	w.pidfs_ino = i64_to_u64(ino);
	w.pid = (uint32_t)pid;
	w.start_time = i64_to_u64(start);
	*ret = w;
	*ret_has = true;
	return 0;
}

static int read_prepare_op(sqlite3_stmt *s, struct lz_catalog_prepare_op *ret, struct lz_err *err)
{
	struct lz_catalog_prepare_op op = { .has_worker = false };
	const char *name = NULL, *state = NULL;
	sqlite3_int64 created = 0;
	int r;
	if ((r = col_id(s, 0, "id", op.id, err)) < 0 ||
	    (r = col_id(s, 1, "artifact_id", op.artifact_id, err)) < 0 ||
	    (r = col_text(s, 2, 1, LZ_CATALOG_NAME_MAX, "staging_name", &name, err)) < 0 ||
	    (r = col_text(s, 3, 1, 32, "state", &state, err)) < 0 ||
	    (r = col_int(s, 4, "created", &created, err)) < 0 ||
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
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, "SELECT " PREPARE_COLUMNS " FROM prepare_ops WHERE id = ?1", &s, err);
	if (r >= 0)
		r = bind_text(db, s, 1, op_id, err);
	if (r >= 0)
		r = step(db, s, err);
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
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts a WHERE a.id = ?1", &s, err);
	if (r >= 0)
		r = bind_text(db, s, 1, id, err);
	if (r >= 0)
		r = step(db, s, err);
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
	enum lz_catalog_artifact_state state;
	uint64_t leases;
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

	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if ((r = stmt_new(db,
			  "SELECT id FROM prepare_ops WHERE artifact_id = ?1 AND state = 'preparing'",
			  &s, err)) < 0 ||
	    (r = bind_text(db, s, 1, c->artifact_id, err)) < 0 || (r = step(db, s, err)) < 0)
		return r;
	if (r > 0)
		return lz_err_set(err, EBUSY, "prepared artifact %s is already being prepared by operation %s",
				  c->artifact_id, text_or(s, 0));
	stmt_finalizep(&s);

	if ((r = stmt_new(db, "SELECT id FROM prepare_ops WHERE staging_name = ?1", &s, err)) < 0 ||
	    (r = bind_text(db, s, 1, c->staging_name, err)) < 0 || (r = step(db, s, err)) < 0)
		return r;
	if (r > 0)
		return lz_err_set(err, EEXIST, "staging directory '%s' already belongs to operation %s",
				  c->staging_name, text_or(s, 0));
	stmt_finalizep(&s);

	if ((r = stmt_new(db,
			  "INSERT INTO prepare_ops (id, artifact_id, staging_name, state, created) "
			  "VALUES (?1, ?2, ?3, 'preparing', ?4)",
			  &s, err)) < 0 ||
	    (r = bind_text(db, s, 1, c->op_id, err)) < 0 ||
	    (r = bind_text(db, s, 2, c->artifact_id, err)) < 0 ||
	    (r = bind_text(db, s, 3, c->staging_name, err)) < 0 ||
	    (r = bind_i64(db, s, 4, now_seconds(), err)) < 0)
		return r;
	return step(db, s, err);
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
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if ((r = stmt_new(db,
			  "UPDATE prepare_ops SET worker_boot_id = ?2, worker_pidfs_dev = ?3, "
			  "worker_pidfs_ino = ?4, worker_pid = ?5, worker_start_time = ?6 WHERE id = ?1",
			  &s, err)) < 0 ||
	    (r = bind_text(db, s, 1, c->op_id, err)) < 0)
		return r;
	int rc = sqlite3_bind_blob(s, 2, w->boot_id, sizeof(w->boot_id), SQLITE_STATIC);
	if (rc != SQLITE_OK)
		return sql_err(db, rc, err, "bind");
	if ((r = bind_i64(db, s, 3, u64_to_i64(w->pidfs_dev), err)) < 0 ||
	    (r = bind_i64(db, s, 4, u64_to_i64(w->pidfs_ino), err)) < 0 ||
	    (r = bind_i64(db, s, 5, (sqlite3_int64)w->pid, err)) < 0 ||
	    (r = bind_i64(db, s, 6, u64_to_i64(w->start_time), err)) < 0)
		return r;
	return step(db, s, err);
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

struct list_ctx {
	const char *artifact_id; /* lease filter, or NULL */
	void *v;
	size_t n;
	size_t cap;
};

static int prepare_list_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct list_ctx *c = ctx;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, "SELECT " PREPARE_COLUMNS " FROM prepare_ops ORDER BY id", &s, err);
	while (r >= 0 && (r = step(db, s, err)) > 0) {
		if ((r = list_reserve(&c->v, &c->cap, c->n, sizeof(struct lz_catalog_prepare_op),
				      err)) < 0)
			break;
		struct lz_catalog_prepare_op *ops = c->v;
		if ((r = read_prepare_op(s, &ops[c->n], err)) < 0)
			break;
		c->n++;
	}
	return r;
}

int lz_catalog_prepare_list(int root_fd, struct lz_catalog_prepare_op **ret_ops, size_t *ret_n,
			    struct lz_err *err)
{
	struct list_ctx c = { .v = NULL };
	int r = section(root_fd, prepare_list_fn, &c, err);
	if (r < 0) {
		free(c.v);
		return done(r, err);
	}
	*ret_ops = c.v;
	*ret_n = c.n;
	return 0;
}

/* ---- artifacts ---------------------------------------------------------- */

static int publish_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct op_ctx *c = ctx;
	const struct lz_catalog_artifact_spec *a = c->spec;
	struct lz_catalog_prepare_op op;
	enum lz_catalog_artifact_state state;
	uint64_t leases;
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

	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if ((r = stmt_new(db,
			  "INSERT INTO artifacts (id, source_ref, manifest_digest, config_digest, size, "
			  "state, created) VALUES (?1, ?2, ?3, ?4, ?5, 'published', ?6)",
			  &s, err)) < 0 ||
	    (r = bind_text(db, s, 1, a->id, err)) < 0 ||
	    (r = bind_text(db, s, 2, a->source_ref, err)) < 0 ||
	    (r = bind_text(db, s, 3, a->manifest_digest, err)) < 0 ||
	    (r = bind_text(db, s, 4, a->config_digest, err)) < 0 ||
	    (r = bind_i64(db, s, 5, u64_to_i64(a->size), err)) < 0 ||
	    (r = bind_i64(db, s, 6, now_seconds(), err)) < 0 || (r = step(db, s, err)) < 0)
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
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts a WHERE a.id = ?1", &s, err);
	if (r >= 0)
		r = bind_text(db, s, 1, c->id, err);
	if (r >= 0)
		r = step(db, s, err);
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

static int artifact_list_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct list_ctx *c = ctx;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, "SELECT " ARTIFACT_COLUMNS " FROM artifacts a ORDER BY a.id", &s, err);
	while (r >= 0 && (r = step(db, s, err)) > 0) {
		if ((r = list_reserve(&c->v, &c->cap, c->n, sizeof(struct lz_catalog_artifact), err)) <
		    0)
			break;
		struct lz_catalog_artifact *v = c->v;
		if ((r = read_artifact(s, &v[c->n], err)) < 0)
			break;
		c->n++;
	}
	return r;
}

int lz_catalog_artifact_list(int root_fd, struct lz_catalog_artifact **ret_v, size_t *ret_n,
			     struct lz_err *err)
{
	struct list_ctx c = { .v = NULL };
	int r = section(root_fd, artifact_list_fn, &c, err);
	if (r < 0) {
		lz_catalog_artifact_list_free(c.v, c.n);
		return done(r, err);
	}
	*ret_v = c.v;
	*ret_n = c.n;
	return 0;
}

static int quarantine_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const char *id = ctx;
	enum lz_catalog_artifact_state state;
	uint64_t leases;
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
	enum lz_catalog_artifact_state state;
	uint64_t leases;
	int r = find_artifact(db, id, &state, &leases, err);
	if (r < 0)
		return r;
	if (leases > 0)
		return lz_err_set(err, EBUSY, "prepared artifact %s still has %" PRIu64 " lease(s)", id,
				  leases);
	if (state != LZ_CATALOG_ARTIFACT_QUARANTINED)
		return lz_err_set(err, ESTALE, "prepared artifact %s is published; quarantine it first",
				  id);
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
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db,
			 "SELECT 1 FROM leases WHERE artifact_id = ?1 AND domain_id = ?2 AND "
			 "generation = ?3",
			 &s, err);
	if (r >= 0)
		r = bind_text(db, s, 1, c->artifact_id, err);
	if (r >= 0)
		r = bind_text(db, s, 2, c->domain_id, err);
	if (r >= 0)
		r = bind_i64(db, s, 3, u64_to_i64(c->generation), err);
	return r < 0 ? r : step(db, s, err);
}

static int lease_write(sqlite3 *db, const struct lease_ctx *c, const char *sql, struct lz_err *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	int r = stmt_new(db, sql, &s, err);
	if (r >= 0)
		r = bind_text(db, s, 1, c->artifact_id, err);
	if (r >= 0)
		r = bind_text(db, s, 2, c->domain_id, err);
	if (r >= 0)
		r = bind_i64(db, s, 3, u64_to_i64(c->generation), err);
	if (r >= 0)
		r = step(db, s, err);
	if (r >= 0 && sqlite3_changes(db) != 1)
		r = lz_err_set(err, EIO, "lease write changed %d rows, not 1", sqlite3_changes(db));
	return r;
}

static int acquire_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	const struct lease_ctx *c = ctx;
	enum lz_catalog_artifact_state state;
	uint64_t leases;
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

static int lease_list_fn(sqlite3 *db, void *ctx, struct lz_err *err)
{
	struct list_ctx *c = ctx;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	/* generation holds a u64 bit pattern: values >= 2^63 read as negative
	 * and sort after all others, in unsigned order among themselves. */
	int r = stmt_new(db,
			 "SELECT artifact_id, domain_id, generation FROM leases "
			 "WHERE ?1 IS NULL OR artifact_id = ?1 "
			 "ORDER BY artifact_id, domain_id, generation < 0, generation",
			 &s, err);
	if (r >= 0)
		r = bind_text(db, s, 1, c->artifact_id, err);
	while (r >= 0 && (r = step(db, s, err)) > 0) {
		if ((r = list_reserve(&c->v, &c->cap, c->n, sizeof(struct lz_catalog_lease), err)) < 0)
			break;
		struct lz_catalog_lease *l = &((struct lz_catalog_lease *)c->v)[c->n];
		sqlite3_int64 gen = 0;
		if ((r = col_id(s, 0, "artifact_id", l->artifact_id, err)) < 0 ||
		    (r = col_id(s, 1, "domain_id", l->domain_id, err)) < 0 ||
		    (r = col_int(s, 2, "generation", &gen, err)) < 0)
			break;
		l->generation = i64_to_u64(gen);
		c->n++;
	}
	return r;
}

int lz_catalog_lease_list(int root_fd, const char *artifact_id, struct lz_catalog_lease **ret_v,
			  size_t *ret_n, struct lz_err *err)
{
	struct list_ctx c = { .artifact_id = artifact_id };
	int r = artifact_id ? check_id("artifact ID", artifact_id, err) : 0;
	if (r >= 0)
		r = section(root_fd, lease_list_fn, &c, err);
	if (r < 0) {
		free(c.v);
		return done(r, err);
	}
	*ret_v = c.v;
	*ret_n = c.n;
	return 0;
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
