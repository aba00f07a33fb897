/* Shared sqlite3 machinery: see sqlstore.h for the file checks, the
 * descriptor VFS and the store identity rule.
 *
 * Order inside one store operation: validate the files -> open through the
 * descriptor VFS -> BEGIN IMMEDIATE -> identity -> the operation -> COMMIT
 * (or ROLLBACK). The validating descriptor is closed before sqlite opens
 * the file: closing any descriptor of the inode while sqlite holds its
 * POSIX locks would drop them. */
#include "store/sqlstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sys.h"

#define VFS_NAME "lazaret-fd"
#define BUSY_TIMEOUT_MS 10000 /* callers serialize already; belt and braces */
#define NAME_MAX_LEN 200      /* db_name plus "-journal" fits the path buffers */

/* ---- values ------------------------------------------------------------- */

bool lz_sqlstore_is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

const char *lz_sqlstore_sanitize(const unsigned char *in, int n, char out[68])
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

int64_t lz_sqlstore_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

int lz_sqlstore_list_reserve(void **v, size_t *cap, size_t n, size_t sz, size_t max,
			     struct lz_err *err)
{
	if (n >= max)
		return lz_err_set(err, EOVERFLOW, "more than %zu rows", max);
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	if (ncap > max)
		ncap = max;
	void *p = reallocarray(*v, ncap, sz);
	if (p == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	*v = p;
	*cap = ncap;
	return 0;
}

/* ---- statements --------------------------------------------------------- */

void lz_sqlstore_stmt_finalizep(sqlite3_stmt **s)
{
	sqlite3_finalize(*s); /* NULL is a no-op */
	*s = NULL;
}

void lz_sqlstore_db_closep(sqlite3 **db)
{
	sqlite3_close_v2(*db); /* NULL is a no-op; statements are gone by now */
	*db = NULL;
}

int lz_sqlstore_err(sqlite3 *db, int rc, struct lz_err *err, const char *what)
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

int lz_sqlstore_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret, struct lz_err *err)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_finalize(s);
		return lz_sqlstore_err(db, rc, err, "prepare statement");
	}
	*ret = s;
	return 0;
}

int lz_sqlstore_exec(sqlite3 *db, const char *sql, struct lz_err *err)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : lz_sqlstore_err(db, rc, err, sql);
}

int lz_sqlstore_bind_text(sqlite3 *db, sqlite3_stmt *s, int i, const char *v, struct lz_err *err)
{
	int rc = v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
	return rc == SQLITE_OK ? 0 : lz_sqlstore_err(db, rc, err, "bind");
}

int lz_sqlstore_bind_i64(sqlite3 *db, sqlite3_stmt *s, int i, sqlite3_int64 v, struct lz_err *err)
{
	int rc = sqlite3_bind_int64(s, i, v);
	return rc == SQLITE_OK ? 0 : lz_sqlstore_err(db, rc, err, "bind");
}

int lz_sqlstore_bind_u64(sqlite3 *db, sqlite3_stmt *s, int i, uint64_t v, struct lz_err *err)
{
	return lz_sqlstore_bind_i64(db, s, i, lz_sqlstore_u64_to_i64(v), err);
}

int lz_sqlstore_bind_blob(sqlite3 *db, sqlite3_stmt *s, int i, const void *v, int n,
			  struct lz_err *err)
{
	int rc = sqlite3_bind_blob(s, i, v, n, SQLITE_STATIC);
	return rc == SQLITE_OK ? 0 : lz_sqlstore_err(db, rc, err, "bind");
}

int lz_sqlstore_bind_null(sqlite3 *db, sqlite3_stmt *s, int i, struct lz_err *err)
{
	int rc = sqlite3_bind_null(s, i);
	return rc == SQLITE_OK ? 0 : lz_sqlstore_err(db, rc, err, "bind");
}

int lz_sqlstore_step(sqlite3 *db, sqlite3_stmt *s, struct lz_err *err)
{
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return lz_sqlstore_err(db, rc, err, "step");
}

int lz_sqlstore_step_done(sqlite3 *db, sqlite3_stmt *s, int changes, struct lz_err *err)
{
	int r = lz_sqlstore_step(db, s, err);
	if (r > 0)
		return lz_err_set(err, EPROTO, "statement returned an unexpected row");
	if (r == 0 && changes >= 0 && sqlite3_changes(db) != changes)
		return lz_err_set(err, EIO, "statement changed %d rows, not %d", sqlite3_changes(db),
				  changes);
	return r;
}

int lz_sqlstore_col_text(sqlite3_stmt *s, int i, size_t min, size_t max, const char *what,
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

int lz_sqlstore_col_hex(sqlite3_stmt *s, int i, size_t n, const char *what, char *out,
			struct lz_err *err)
{
	const char *t = NULL;
	int r = lz_sqlstore_col_text(s, i, n, n, what, &t, err);
	if (r < 0)
		return r;
	if (!lz_sqlstore_is_hex(t, n))
		return lz_err_set(err, EPROTO, "row field %s is not a %zu-digit hex ID", what, n);
	memcpy(out, t, n + 1);
	return 0;
}

int lz_sqlstore_col_i64(sqlite3_stmt *s, int i, const char *what, sqlite3_int64 *ret,
			struct lz_err *err)
{
	if (sqlite3_column_type(s, i) != SQLITE_INTEGER)
		return lz_err_set(err, EPROTO, "row field %s is not an integer", what);
	*ret = sqlite3_column_int64(s, i);
	return 0;
}

int lz_sqlstore_col_u64(sqlite3_stmt *s, int i, const char *what, uint64_t *ret,
			struct lz_err *err)
{
	sqlite3_int64 v = 0;
	int r = lz_sqlstore_col_i64(s, i, what, &v, err);
	if (r < 0)
		return r;
	*ret = lz_sqlstore_i64_to_u64(v);
	return 0;
}

int lz_sqlstore_col_blob(sqlite3_stmt *s, int i, size_t n, const char *what, void *out,
			 struct lz_err *err)
{
	if (sqlite3_column_type(s, i) != SQLITE_BLOB || sqlite3_column_bytes(s, i) != (int)n)
		return lz_err_set(err, EPROTO, "row field %s is not %zu bytes", what, n);
	const void *b = sqlite3_column_blob(s, i);
	if (b == NULL)
		return lz_err_set(err, ENOMEM, "out of memory reading %s", what);
	memcpy(out, b, n);
	return 0;
}

/* ---- the descriptor VFS ------------------------------------------------- */

/* The stock unix VFS canonicalizes names by readlink()ing every symlink
 * component, which turns "/proc/self/fd/N/<db>" back into a pathname that
 * is then re-resolved (and SQLITE_OPEN_NOFOLLOW refuses the magic link
 * outright). This copy of it keeps the name verbatim, so every open -
 * database, journal, directory fsync - goes through the retained
 * directory descriptor. Everything else is the unix VFS unchanged. */
static sqlite3_vfs fd_vfs;
static int fd_vfs_rc = SQLITE_ERROR;
static pthread_once_t fd_vfs_once = PTHREAD_ONCE_INIT;

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
		fd_vfs_rc = rc;
		return;
	}
	sqlite3_vfs *base = sqlite3_vfs_find("unix");
	if (base == NULL)
		return;
	fd_vfs = *base;
	fd_vfs.pNext = NULL;
	fd_vfs.zName = VFS_NAME;
	fd_vfs.xFullPathname = vfs_full_pathname;
	fd_vfs_rc = sqlite3_vfs_register(&fd_vfs, 0);
}

/* ---- files beneath the directory ---------------------------------------- */

static int open_how_mode(int dirfd, const char *name, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (unsigned long long)flags,
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = LZ_RESOLVE_OWNED,
	};
	return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
}

int lz_sqlstore_check_root(int dir_fd, const char *root_title, struct lz_err *err)
{
	struct stat st;
	if (fstat(dir_fd, &st) < 0)
		return lz_err_set(err, errno, "%s descriptor: %s", root_title, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return lz_err_set(err, ENOTDIR, "%s descriptor is not a directory", root_title);
	if (st.st_uid != getuid())
		return lz_err_set(err, EPERM, "%s is owned by uid %u, not by you (uid %u)", root_title,
				  (unsigned)st.st_uid, (unsigned)getuid());
	if ((st.st_mode & 07777) != 0700)
		return lz_err_set(err, EPERM, "%s has mode %04o, not 0700", root_title,
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

int lz_sqlstore_open_owned(int dir_fd, const char *name, struct stat *ret_st,
			   struct lz_err *err)
{
	const int flags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	bool created = true;
	_cleanup_close_ int fd = open_how_mode(dir_fd, name, flags | O_CREAT | O_EXCL, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = false;
		fd = open_how_mode(dir_fd, name, flags, 0);
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

static int check_name(const struct lz_sqlstore_def *def, struct lz_err *err)
{
	size_t n = def->db_name ? strnlen(def->db_name, NAME_MAX_LEN + 1) : 0;
	if (n == 0 || n > NAME_MAX_LEN || memchr(def->db_name, '/', n) != NULL)
		return lz_err_set(err, EINVAL, "store database name must be one short component");
	return 0;
}

enum { COMPANION_JOURNAL, COMPANION_WAL, COMPANION_SHM, N_COMPANIONS };
static const char *const companion_suffix[N_COMPANIONS] = { "-journal", "-wal", "-shm" };

/* Each file sqlite keeps beside the database and reads back (a hot
 * journal is rolled back, a write-ahead log replayed) is a file of ours,
 * 0600 like the database (sqlite gives its files the database's mode).
 * Where no log may be (a store keeping a rollback journal: sqlite
 * switches to WAL whenever a -wal file exists; a database still in that
 * format: a log beside it is another database's, which sqlite would
 * replay), a -wal or -shm file refuses. Once the store keeps its log
 * (f->wal), the -wal and -shm files are the ones sqlite opened; st[] gets
 * what was found (st_nlink 0: absent). */
static int check_companions(int dir_fd, const struct lz_sqlstore_def *def, bool log_allowed,
			    const struct lz_sqlstore_files *f, struct stat st[N_COMPANIONS], struct lz_err *err)
{
	char name[NAME_MAX_LEN + 16];
	for (size_t i = 0; i < N_COMPANIONS; i++) {
		snprintf(name, sizeof(name), "%s%s", def->db_name, companion_suffix[i]);
		const struct stat *held = NULL;
		if (f != NULL && f->wal)
			held = i == COMPANION_WAL ? &f->wal_st : i == COMPANION_SHM ? &f->shm_st : NULL;
		memset(&st[i], 0, sizeof(st[i]));
		if (fstatat(dir_fd, name, &st[i], AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				return lz_err_set(err, errno, "stat '%s': %s", name, strerror(errno));
			st[i].st_nlink = 0;
			if (held)
				return lz_err_set(err, EPERM, "'%s' was removed since it was opened", name);
			continue;
		}
		if (i != COMPANION_JOURNAL && !def->wal)
			return lz_err_set(err, EPROTO, "found '%s'; a v%" PRId64 " %s never uses WAL",
					  name, def->version, def->noun);
		if (i != COMPANION_JOURNAL && !log_allowed)
			return lz_err_set(err, EPROTO,
					  "found '%s' beside a %s that has no log of its own (new, or keeping a "
					  "rollback journal): another database's log, which would be replayed into it",
					  name, def->noun);
		if (held && (st[i].st_dev != held->st_dev || st[i].st_ino != held->st_ino))
			return lz_err_set(err, EPERM, "'%s' was replaced since it was opened", name);
		int r = check_owned_file(&st[i], name, true, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Validates (creating when absent) the database and its companions
 * before sqlite sees any, and refuses a WAL-mode database for a store
 * that keeps a rollback journal: converting a foreign WAL file would
 * write to it. */
static int prepare_db_file(int dir_fd, const struct lz_sqlstore_def *def, struct lz_sqlstore_files *ret,
			   struct lz_err *err)
{
	struct stat st;
	_cleanup_close_ int fd = lz_sqlstore_open_owned(dir_fd, def->db_name, &st, err);
	if (fd < 0)
		return fd;
	unsigned char h[100];
	ssize_t n = st.st_size > 0 ? pread(fd, h, sizeof(h), 0) : 0;
	if (n < 0)
		return lz_err_set(err, errno, "read '%s': %s", def->db_name, strerror(errno));
	bool sqlite = n == (ssize_t)sizeof(h) && memcmp(h, "SQLite format 3", 16) == 0;
	bool rollback = sqlite && h[18] == 1 && h[19] == 1, logged = sqlite && h[18] == 2 && h[19] == 2;
	if (sqlite && !rollback && !(def->wal && logged))
		return lz_err_set(err, EPROTO, "'%s' uses file format %u/%u%s; a v%" PRId64 " %s uses %s",
				  def->db_name, h[18], h[19], logged ? " (WAL)" : "", def->version, def->noun,
				  def->wal ? "1/1 (a rollback journal) or 2/2 (a write-ahead log)" : "a rollback journal");
	struct stat companions[N_COMPANIONS];
	int r = check_companions(dir_fd, def, def->wal && logged, NULL, companions, err);
	if (r < 0)
		return r;
	*ret = (struct lz_sqlstore_files){ .db = st,
					   .had_wal = companions[COMPANION_WAL].st_nlink > 0,
					   .had_shm = companions[COMPANION_SHM].st_nlink > 0 };
	return 0; /* fd closes here, before sqlite opens the file */
}

static int set_journal_mode(sqlite3 *db, const char *want, struct lz_err *err)
{
	char sql[40];
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode = %s", want);
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db, sql, &s, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	const char *mode = r > 0 ? (const char *)sqlite3_column_text(s, 0) : NULL;
	if (mode == NULL || strcmp(mode, want) != 0)
		return lz_err_set(err, EPROTO, "cannot use journal mode %s (sqlite kept %s)", want,
				  mode ? mode : "an unknown mode");
	return 0;
}

static int db_open(int dir_fd, const struct lz_sqlstore_def *def, sqlite3 **ret,
		   struct lz_err *err)
{
	pthread_once(&fd_vfs_once, vfs_register);
	if (fd_vfs_rc != SQLITE_OK)
		return lz_sqlstore_err(NULL, fd_vfs_rc, err, "register the descriptor VFS");

	char path[NAME_MAX_LEN + 64], what[NAME_MAX_LEN + 16];
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dir_fd, def->db_name);
	snprintf(what, sizeof(what), "open %s", def->db_name);
	_cleanup_sqldb_ sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX |
					 SQLITE_OPEN_PRIVATECACHE | SQLITE_OPEN_EXRESCODE,
				 VFS_NAME);
	if (rc != SQLITE_OK)
		return lz_sqlstore_err(db, rc, err, what);
	sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);

	/* A database file is data, not code: no triggers or views run, the
	 * schema cannot be written through PRAGMA writable_schema. */
	static const int off[] = { SQLITE_DBCONFIG_ENABLE_TRIGGER, SQLITE_DBCONFIG_ENABLE_VIEW,
				   SQLITE_DBCONFIG_TRUSTED_SCHEMA, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(off); i++)
		if ((rc = sqlite3_db_config(db, off[i], 0, NULL)) != SQLITE_OK)
			return lz_sqlstore_err(db, rc, err, "configure");
	if ((rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL)) != SQLITE_OK)
		return lz_sqlstore_err(db, rc, err, "configure");

	int r = lz_sqlstore_exec(db,
				 "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
				 "PRAGMA temp_store = MEMORY; PRAGMA secure_delete = ON",
				 err);
	if (r < 0)
		return r;
	/* A WAL store stays in the mode its file has until its identity is
	 * checked (lz_sqlstore_use_wal), and closing it before then folds no
	 * log into the file: a foreign file is refused unchanged. */
	if (def->wal && (rc = sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL)) != SQLITE_OK)
		return lz_sqlstore_err(db, rc, err, "configure");
	if (!def->wal && (r = set_journal_mode(db, "delete", err)) < 0)
		return r;
	*ret = TAKE_PTR(db);
	return 0;
}

int lz_sqlstore_use_wal(sqlite3 *db, int dir_fd, const struct lz_sqlstore_def *def, struct lz_sqlstore_files *f,
			struct lz_err *err)
{
	int r = set_journal_mode(db, "wal", err);
	if (r < 0)
		return r;
	int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
	if (rc != SQLITE_OK)
		return lz_sqlstore_err(db, rc, err, "configure");
	/* A read opens the log and its index: from here on, the files each
	 * transaction's recheck compares with. */
	if ((r = lz_sqlstore_exec(db, "PRAGMA schema_version", err)) < 0)
		return r;
	struct stat st[N_COMPANIONS];
	if ((r = check_companions(dir_fd, def, true, NULL, st, err)) < 0)
		return r;
	for (int i = COMPANION_WAL; i <= COMPANION_SHM; i++)
		if (st[i].st_nlink == 0)
			return lz_err_set(err, EPROTO, "sqlite did not make '%s%s'", def->db_name, companion_suffix[i]);
	f->wal_st = st[COMPANION_WAL];
	f->shm_st = st[COMPANION_SHM];
	f->wal = true;
	return 0;
}

/* Whether another connection holds name, a -shm file: sqlite's
 * dead-man switch, a read lock on byte 128 for as long as it is open. */
static bool shm_in_use(int dir_fd, const char *name)
{
	_cleanup_close_ int fd = openat(dir_fd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 128, .l_len = 1 };
	return fd >= 0 && fcntl(fd, F_GETLK, &l) == 0 && l.l_type != F_UNLCK;
}

void lz_sqlstore_close(sqlite3 *db, int dir_fd, const struct lz_sqlstore_def *def, const struct lz_sqlstore_files *f)
{
	sqlite3_close_v2(db);
	if (!def->wal || f == NULL || f->wal || db == NULL)
		return;
	/* Refused before its log was ours: what this open made goes, unless
	 * the log holds a commit (the index is sqlite's to rebuild) or another
	 * connection (a developer's sqlite3) uses them meanwhile. */
	char name[NAME_MAX_LEN + 16];
	struct stat st;
	snprintf(name, sizeof(name), "%s-shm", def->db_name);
	if (shm_in_use(dir_fd, name))
		return;
	bool log_kept = f->had_wal;
	if (!f->had_wal) {
		snprintf(name, sizeof(name), "%s-wal", def->db_name);
		log_kept = fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > 0;
		if (!log_kept)
			(void)unlinkat(dir_fd, name, 0);
	}
	if (!f->had_shm && !log_kept) {
		snprintf(name, sizeof(name), "%s-shm", def->db_name);
		(void)unlinkat(dir_fd, name, 0);
	}
}

int lz_sqlstore_open(int dir_fd, const struct lz_sqlstore_def *def, sqlite3 **ret_db,
		     struct lz_sqlstore_files *ret_files, struct lz_err *err)
{
	struct lz_sqlstore_files f;
	int r = check_name(def, err);
	if (r >= 0)
		r = prepare_db_file(dir_fd, def, &f, err);
	if (r >= 0)
		r = db_open(dir_fd, def, ret_db, err);
	if (r < 0)
		return r;
	if (ret_files)
		*ret_files = f;
	return 0;
}

int lz_sqlstore_recheck(int dir_fd, const struct lz_sqlstore_def *def, const struct lz_sqlstore_files *opened,
			struct lz_err *err)
{
	struct stat st, companions[N_COMPANIONS];
	int r = check_name(def, err);
	if (r < 0)
		return r;
	if (fstatat(dir_fd, def->db_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", def->db_name, strerror(errno));
	if (st.st_dev != opened->db.st_dev || st.st_ino != opened->db.st_ino)
		return lz_err_set(err, EPERM, "'%s' was replaced since it was opened", def->db_name);
	if ((r = check_owned_file(&st, def->db_name, true, err)) < 0)
		return r;
	return check_companions(dir_fd, def, opened->wal, opened, companions, err);
}

/* ---- store identity ----------------------------------------------------- */

static int create_object(sqlite3 *db, const char *name, const char *sql, struct lz_err *err)
{
	int r = lz_sqlstore_exec(db, sql, err);
	return r < 0 ? lz_err_prefix(err, r, "create table %s: ", name) : 0;
}

static int create_schema(sqlite3 *db, const struct lz_sqlstore_def *def, struct lz_err *err)
{
	int r = create_object(db, "meta", LZ_SQLSTORE_META_SQL, err);
	for (size_t i = 0; r >= 0 && i < def->n_schema; i++)
		r = create_object(db, def->schema[i].name, def->schema[i].sql, err);
	if (r < 0)
		return r;
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	r = lz_sqlstore_prepare(db, "INSERT INTO meta (key, value) VALUES ('store', ?1), ('version', ?2)",
				&s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_text(db, s, 1, def->store, err);
	if (r >= 0)
		r = lz_sqlstore_bind_i64(db, s, 2, def->version, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	return r < 0 ? lz_err_prefix(err, r, "write store identity: ") : 0;
}

/* The single meta row for key, positioned on its value (column 0). */
static int meta_row(sqlite3 *db, const struct lz_sqlstore_def *def, const char *key,
		    sqlite3_stmt **ret, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(db,
			       "SELECT value, (SELECT count(*) FROM meta WHERE key = ?1) FROM meta "
			       "WHERE key = ?1 LIMIT 1",
			       -1, &s, NULL) != SQLITE_OK)
		return lz_err_set(err, EPROTO, "not a %s: meta table unreadable (%s)", def->title,
				  sqlite3_errmsg(db));
	int r = lz_sqlstore_bind_text(db, s, 1, key, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	if (r < 0)
		return r;
	if (r == 0)
		return lz_err_set(err, EPROTO, "not a %s: no '%s' identity row", def->title, key);
	if (sqlite3_column_int64(s, 1) != 1)
		return lz_err_set(err, EPROTO, "not a %s: more than one '%s' row", def->title, key);
	*ret = TAKE_PTR(s);
	return 0;
}

/* Whether schema object i belongs to the schema of version v. */
static bool in_version(const struct lz_sqlstore_table *t, int64_t v)
{
	return (t->since > 1 ? t->since : 1) <= v;
}

/* The expected SQL of schema object `name` in version v, or NULL when it
 * is not ours. */
static const char *expected_sql(const struct lz_sqlstore_def *def, int64_t v, const char *name, size_t *ret_i)
{
	if (strcmp(name, "meta") == 0) {
		*ret_i = 0;
		return LZ_SQLSTORE_META_SQL;
	}
	for (size_t i = 0; i < def->n_schema; i++)
		if (in_version(&def->schema[i], v) && strcmp(name, def->schema[i].name) == 0) {
			*ret_i = i + 1;
			return def->schema[i].sql;
		}
	return NULL;
}

/* Every schema object with SQL must be one of version v's, verbatim, and
 * each of v's must be there; sqlite's own autoindexes have no SQL. */
static int schema_check(sqlite3 *db, const struct lz_sqlstore_def *def, int64_t v, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	_cleanup_free_ bool *seen = calloc(def->n_schema + 1, sizeof(*seen));
	if (seen == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	int r = lz_sqlstore_prepare(db, "SELECT name, sql, type FROM sqlite_schema", &s, err);
	char buf[68];
	while (r >= 0 && (r = lz_sqlstore_step(db, s, err)) > 0) {
		const unsigned char *name = sqlite3_column_text(s, 0);
		const unsigned char *sql = sqlite3_column_text(s, 1);
		const unsigned char *type = sqlite3_column_text(s, 2);
		if (sql == NULL) {
			if (type && name && strcmp((const char *)type, "index") == 0 &&
			    strncmp((const char *)name, "sqlite_autoindex_", 17) == 0)
				continue;
			return lz_err_set(err, EPROTO, "v%" PRId64 " schema mismatch: unexpected object '%s'", v,
					  lz_sqlstore_sanitize(name, sqlite3_column_bytes(s, 0), buf));
		}
		size_t i = 0;
		const char *want = name ? expected_sql(def, v, (const char *)name, &i) : NULL;
		if (want == NULL)
			return lz_err_set(err, EPROTO, "v%" PRId64 " schema mismatch: unexpected object '%s'", v,
					  lz_sqlstore_sanitize(name, sqlite3_column_bytes(s, 0), buf));
		if (strcmp((const char *)sql, want) != 0)
			return lz_err_set(err, EPROTO, "v%" PRId64 " schema mismatch: table '%s' differs", v,
					  (const char *)name);
		seen[i] = true;
	}
	if (r < 0)
		return r;
	for (size_t i = 0; i <= def->n_schema; i++)
		if (!seen[i] && (i == 0 || in_version(&def->schema[i - 1], v)))
			return lz_err_set(err, EPROTO, "v%" PRId64 " schema mismatch: table '%s' is missing", v,
					  i == 0 ? "meta" : def->schema[i - 1].name);
	return 0;
}

/* A store of version v, checked: the later tables, then the version. */
static int upgrade(sqlite3 *db, const struct lz_sqlstore_def *def, int64_t v, struct lz_err *err)
{
	int r = 0;
	for (size_t i = 0; r >= 0 && i < def->n_schema; i++)
		if (!in_version(&def->schema[i], v))
			r = create_object(db, def->schema[i].name, def->schema[i].sql, err);
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	if (r >= 0)
		r = lz_sqlstore_prepare(db, "UPDATE meta SET value = ?1 WHERE key = 'version'", &s, err);
	if (r >= 0)
		r = lz_sqlstore_bind_i64(db, s, 1, def->version, err);
	if (r >= 0)
		r = lz_sqlstore_step(db, s, err);
	return r < 0 ? lz_err_prefix(err, r, "upgrade the %s from version %" PRId64 ": ", def->noun, v) : 0;
}

/* Runs first in every transaction: an empty database gets the schema (when
 * allowed); anything else must prove its identity before any other row is
 * read. */
static int identity_check(sqlite3 *db, const struct lz_sqlstore_def *def, bool may_create,
			  struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	int r = lz_sqlstore_prepare(db,
				    "SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' "
				    "AND name = 'meta'), (SELECT count(*) FROM sqlite_schema)",
				    &s, err);
	if (r >= 0 && (r = lz_sqlstore_step(db, s, err)) == 0)
		r = lz_err_set(err, EIO, "schema query returned nothing");
	if (r < 0)
		return r;
	/* No schema object at all: no row to misread (a hot journal of an
	 * interrupted creation was rolled back when the transaction began). */
	if (sqlite3_column_int64(s, 1) == 0 && may_create)
		return create_schema(db, def, err);
	if (sqlite3_column_int64(s, 0) != 1)
		return lz_err_set(err, EPROTO,
				  "not a %s: no store identity (no 'meta' table; %lld other schema "
				  "objects)",
				  def->title, (long long)sqlite3_column_int64(s, 1));
	lz_sqlstore_stmt_finalizep(&s);

	char buf[68];
	if ((r = meta_row(db, def, "store", &s, err)) < 0)
		return r;
	const unsigned char *store = sqlite3_column_text(s, 0);
	int store_len = sqlite3_column_bytes(s, 0);
	if (sqlite3_column_type(s, 0) != SQLITE_TEXT || store == NULL ||
	    (size_t)store_len != strlen(def->store) ||
	    memcmp(store, def->store, (size_t)store_len) != 0)
		return lz_err_set(err, EPROTO, "not a %s: store is '%s', not '%s'", def->title,
				  lz_sqlstore_sanitize(store, store_len, buf), def->store);
	lz_sqlstore_stmt_finalizep(&s);

	if ((r = meta_row(db, def, "version", &s, err)) < 0)
		return r;
	if (sqlite3_column_type(s, 0) != SQLITE_INTEGER)
		return lz_err_set(err, EPROTO, "%s version '%s' is not an integer", def->version_noun,
				  lz_sqlstore_sanitize(sqlite3_column_text(s, 0),
						       sqlite3_column_bytes(s, 0), buf));
	sqlite3_int64 v = sqlite3_column_int64(s, 0);
	if (v < 1 || v > def->version)
		return lz_err_set(err, EPROTO, "%s version %lld is %s than supported %" PRId64,
				  def->version_noun, (long long)v,
				  v < def->version ? "older" : "newer", def->version);
	lz_sqlstore_stmt_finalizep(&s);
	if ((r = schema_check(db, def, v, err)) < 0 || v == def->version)
		return r;
	return upgrade(db, def, v, err);
}

/* ---- transactions ------------------------------------------------------- */

static void rollback(sqlite3 *db)
{
	if (!sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

static int begin(sqlite3 *db, const struct lz_sqlstore_def *def, bool may_create, struct lz_err *err)
{
	int r = lz_sqlstore_exec(db, "BEGIN IMMEDIATE", err);
	if (r < 0)
		return r;
	if ((r = identity_check(db, def, may_create, err)) < 0)
		rollback(db);
	return r;
}

int lz_sqlstore_commit(sqlite3 *db, struct lz_err *err)
{
	int r = lz_sqlstore_exec(db, "COMMIT", err);
	if (r < 0)
		rollback(db);
	return r;
}

int lz_sqlstore_transact(sqlite3 *db, const struct lz_sqlstore_def *def, bool may_create,
			 lz_sqlstore_fn fn, void *ctx, struct lz_err *err)
{
	int r = begin(db, def, may_create, err);
	if (r < 0)
		return r;
	if (fn != NULL && (r = fn(db, ctx, err)) < 0) {
		rollback(db);
		return r;
	}
	int c = lz_sqlstore_commit(db, err);
	return c < 0 ? c : r;
}

int lz_sqlstore_begin(sqlite3 *db, const struct lz_sqlstore_def *def, struct lz_err *err)
{
	return begin(db, def, false, err);
}

int lz_sqlstore_nested(sqlite3 *db, lz_sqlstore_fn fn, void *ctx, struct lz_err *err)
{
	if (sqlite3_get_autocommit(db))
		return lz_err_set(err, EPROTO, "no transaction is open");
	int r = lz_sqlstore_exec(db, "SAVEPOINT op", err);
	if (r < 0)
		return r;
	if ((r = fn(db, ctx, err)) >= 0) {
		int c = lz_sqlstore_exec(db, "RELEASE op", err);
		if (c == 0)
			return r;
		r = c;
	}
	/* Undo this operation's writes, keep the transaction. */
	sqlite3_exec(db, "ROLLBACK TO op; RELEASE op", NULL, NULL, NULL);
	return r;
}

int lz_sqlstore_integrity(sqlite3 *db, struct lz_err *err)
{
	_cleanup_sqlstmt_ sqlite3_stmt *s = NULL;
	char buf[68];
	int r = lz_sqlstore_prepare(db, "PRAGMA integrity_check(8)", &s, err);
	if (r >= 0 && (r = lz_sqlstore_step(db, s, err)) == 0)
		r = lz_err_set(err, EIO, "integrity_check returned nothing");
	if (r < 0)
		return r;
	const unsigned char *first = sqlite3_column_text(s, 0);
	if (first != NULL && strcmp((const char *)first, "ok") == 0)
		return 0;
	return lz_err_set(err, EBADMSG, "the database is damaged: %s",
			  lz_sqlstore_sanitize(first, sqlite3_column_bytes(s, 0), buf));
}
