/* Storage Catalog (spec 3.6, OR-7): store identity and its refusals, every
 * operation's round trip and refusal, u64 bit patterns, the lease rules
 * behind reclamation, the confinement of catalog.lock and catalog.sqlite,
 * serialization of concurrent processes by the catalog lock, and that no
 * descriptor of the catalog survives a call.
 *
 * Every test works in its own mkdtemp Storage Root under /tmp (mode 0700,
 * held as an O_PATH|O_DIRECTORY descriptor), removed by the teardown. The
 * "foreign database" fixtures are written with the plain sqlite3 API by
 * pathname, which only the test may do. Cases needing another uid or a
 * private mount namespace run as root only and are skipped otherwise. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include <sqlite3.h>

#include "store/catalog.h"
#include "store/sqlstore.h" /* lz_sqlstore_now: the store's clock (time() reads a coarse one that lags it) */

#define X4(s) s s s s
#define X16(s) X4(X4(s))
#define H64(s) X4(X16(s))

#define ART_A H64("a")
#define ART_B H64("b")
#define ART_C H64("c")
#define DOM_1 H64("1")
#define DOM_2 H64("2")
#define OP_1 H64("0")
#define OP_2 H64("9")
#define OP_3 H64("8")

#define NOBODY 65534

/* ---- fixture and helpers ------------------------------------------------ */

struct fx {
	char dir[64]; /* "/tmp/lz-test-catalog-XXXXXX" */
	int root;     /* O_PATH|O_DIRECTORY */
};

static struct lz_err E;

static void check_msg(const char *needle)
{
	if (needle != NULL && strstr(E.msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", E.msg, needle);
}

#define OK(expr)                                                                        \
	do {                                                                            \
		lz_err_clear(&E);                                                       \
		int r_ = (expr);                                                        \
		if (r_ < 0)                                                             \
			fail_msg("%s failed: %d (%s)", #expr, r_, E.msg);               \
	} while (0)

#define FAILS(errno_, needle, expr)                                                       \
	do {                                                                            \
		lz_err_clear(&E);                                                       \
		int r_ = (expr);                                                        \
		if (r_ != -(errno_))                                                      \
			fail_msg("%s: expected %d, got %d (%s)", #expr, -(errno_), r_, E.msg); \
		assert_int_equal(E.code, (errno_));                                       \
		check_msg(needle);                                                      \
	} while (0)

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/lz-test-catalog-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	f->root = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->root < 0) {
		rmdir(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->root);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static char *pj(char out[PATH_MAX], const struct fx *f, const char *rel)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", f->dir, rel);
	assert_true(n > 0 && n < PATH_MAX);
	return out;
}

static bool exists(const struct fx *f, const char *rel)
{
	struct stat st;
	return fstatat(f->root, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static mode_t mode_of(const struct fx *f, const char *rel)
{
	struct stat st;
	if (fstatat(f->root, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("stat '%s': %s", rel, strerror(errno));
	return st.st_mode & 07777;
}

/* Whole file contents (malloc'd) and size. */
static unsigned char *slurp(const struct fx *f, const char *rel, size_t *ret_n)
{
	int fd = openat(f->root, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		fail_msg("open '%s': %s", rel, strerror(errno));
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	unsigned char *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*ret_n = (size_t)st.st_size;
	return buf;
}

/* Runs SQL on catalog.sqlite by pathname with the stock sqlite VFS. */
static void raw_exec(const struct fx *f, const char *sql)
{
	char path[PATH_MAX];
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(pj(path, f, LZ_CATALOG_DB_NAME), &db, SQLITE_OPEN_READWRITE, NULL);
	if (rc != SQLITE_OK)
		fail_msg("raw open: %s", sqlite3_errstr(rc));
	char *msg = NULL;
	rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fail_msg("raw exec '%s': %s", sql, msg ? msg : sqlite3_errstr(rc));
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* A 0600 database file of our own that is not a catalog. */
static void make_foreign_db(const struct fx *f, const char *sql)
{
	int fd = openat(f->root, LZ_CATALOG_DB_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0600), 0);
	close(fd);
	raw_exec(f, sql);
}

/* The operation is refused with EPROTO naming needle, and the database
 * file is byte for byte what it was, with no journal left behind. */
static void assert_identity_refused(const struct fx *f, const char *needle)
{
	size_t n0, n1;
	unsigned char *before = slurp(f, LZ_CATALOG_DB_NAME, &n0);
	struct lz_catalog_artifact *v = (void *)1;
	size_t n = 77;
	FAILS(EPROTO, needle, lz_catalog_artifact_list(f->root, &v, &n, &E));
	assert_ptr_equal(v, (void *)1);
	assert_int_equal(n, 77);
	FAILS(EPROTO, needle, lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	unsigned char *after = slurp(f, LZ_CATALOG_DB_NAME, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	assert_false(exists(f, LZ_CATALOG_DB_NAME "-journal"));
	free(before);
	free(after);
}

static struct lz_catalog_artifact_spec spec_of(const char *id)
{
	return (struct lz_catalog_artifact_spec){
		.id = id,
		.source_ref = "docker://debian:12",
		.manifest_digest = "sha256:" H64("d"),
		.config_digest = "sha256:" H64("e"),
		.size = 123456789,
	};
}

static void publish(const struct fx *f, const char *op, const char *art, const char *staging)
{
	struct lz_catalog_artifact_spec s = spec_of(art);
	OK(lz_catalog_prepare_intent_begin(f->root, op, art, staging, &E));
	OK(lz_catalog_artifact_publish(f->root, op, &s, &E));
}

static struct lz_catalog_worker worker_of(uint8_t fill, uint32_t pid)
{
	struct lz_catalog_worker w = { .pidfs_dev = 0x12, .pidfs_ino = 0x3456, .pid = pid,
				       .start_time = 987654 };
	memset(w.boot_id, fill, sizeof(w.boot_id));
	return w;
}

static uint64_t count(const struct fx *f, const char *art)
{
	uint64_t n = 0;
	OK(lz_catalog_lease_count(f->root, art, &n, &E));
	return n;
}

static int list_ops(const struct fx *f, struct lz_catalog_prepare_op **ops, size_t *n)
{
	*ops = NULL;
	*n = 0;
	return lz_catalog_prepare_list(f->root, ops, n, &E);
}

/* Count of descriptors of this process naming a catalog file. */
static int catalog_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char path[300], link[PATH_MAX];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (strstr(link, "/catalog.") != NULL)
			found++;
	}
	closedir(d);
	return found;
}

/* ---- identity ----------------------------------------------------------- */

static void test_lz_catalog_check__creates_schema_and_identity(void **state)
{
	struct fx *f = *state;
	assert_false(exists(f, LZ_CATALOG_DB_NAME));
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(mode_of(f, LZ_CATALOG_DB_NAME), 0600);
	assert_int_equal(mode_of(f, LZ_CATALOG_LOCK_NAME), 0600);
	assert_false(exists(f, LZ_CATALOG_DB_NAME "-journal"));

	char path[PATH_MAX];
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	assert_int_equal(sqlite3_open_v2(pj(path, f, LZ_CATALOG_DB_NAME), &db, SQLITE_OPEN_READONLY,
					 NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT key, value, typeof(value) FROM meta ORDER BY key",
					    -1, &s, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal(sqlite3_column_text(s, 0), "store");
	assert_string_equal(sqlite3_column_text(s, 1), LZ_CATALOG_STORE_NAME);
	assert_string_equal(sqlite3_column_text(s, 2), "text");
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal(sqlite3_column_text(s, 0), "version");
	assert_int_equal(sqlite3_column_int64(s, 1), LZ_CATALOG_STORE_VERSION);
	assert_string_equal(sqlite3_column_text(s, 2), "integer");
	assert_int_equal(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
					    "('artifacts', 'prepare_ops', 'leases', 'artifact_refs')",
					    -1, &s, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(s, 0), 4);
	sqlite3_finalize(s);
	sqlite3_close(db);

	/* A second section accepts what the first one wrote. */
	OK(lz_catalog_check(f->root, &E));
}

static void test_lz_catalog_check__creates_0600_under_umask_0277(void **state)
{
	struct fx *f = *state;
	mode_t old = umask(0277);
	lz_err_clear(&E);
	int r = lz_catalog_check(f->root, &E);
	umask(old);
	if (r < 0)
		fail_msg("check: %s", E.msg);
	assert_int_equal(mode_of(f, LZ_CATALOG_DB_NAME), 0600);
	assert_int_equal(mode_of(f, LZ_CATALOG_LOCK_NAME), 0600);
}

static void test_lz_catalog_check__unknown_store_name_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "UPDATE meta SET value = 'someone-elses-store' WHERE key = 'store'");
	assert_identity_refused(f, "store is 'someone-elses-store'");
}

static void test_lz_catalog_check__version_0_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "UPDATE meta SET value = 0 WHERE key = 'version'");
	assert_identity_refused(f, "version 0 is older");
}

static void test_lz_catalog_check__version_3_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "UPDATE meta SET value = 3 WHERE key = 'version'");
	assert_identity_refused(f, "version 3 is newer");
}

/* A v1 catalog (no artifact_refs) gains the table in place, its rows kept. */
static void test_lz_catalog_check__version_1_upgraded(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	raw_exec(f, "DROP TABLE artifact_refs");
	raw_exec(f, "UPDATE meta SET value = 1 WHERE key = 'version'");
	OK(lz_catalog_artifact_name(f->root, ART_A, "docker://debian:bookworm", &E));
	struct lz_catalog_artifact a;
	OK(lz_catalog_artifact_get(f->root, ART_A, &a, &E));
	assert_string_equal(a.source_ref, "docker://debian:12");
	lz_catalog_artifact_clear(&a);
	struct lz_catalog_ref *v = NULL;
	size_t n = 0;
	OK(lz_catalog_artifact_named(f->root, "docker://debian:bookworm", &v, &n, &E));
	assert_int_equal(n, 1);
	assert_string_equal(v[0].artifact_id, ART_A);
	free(v);
	/* ... and a v1 catalog with another table is not v1 */
	raw_exec(f, "DROP TABLE artifact_refs");
	raw_exec(f, "CREATE TABLE artifact_refs (x INTEGER)");
	raw_exec(f, "UPDATE meta SET value = 1 WHERE key = 'version'");
	FAILS(EPROTO, "unexpected object 'artifact_refs'", lz_catalog_check(f->root, &E));
}

static void test_lz_catalog_check__version_as_text_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "UPDATE meta SET value = '1' WHERE key = 'version'");
	assert_identity_refused(f, "version '1' is not an integer");
}

static void test_lz_catalog_check__missing_version_row_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "DELETE FROM meta WHERE key = 'version'");
	assert_identity_refused(f, "no 'version' identity row");
}

static void test_lz_catalog_check__missing_meta_in_nonempty_db_refused(void **state)
{
	struct fx *f = *state;
	make_foreign_db(f, "CREATE TABLE foreign_rows (x INTEGER); INSERT INTO foreign_rows VALUES (42)");
	assert_identity_refused(f, "no store identity (no 'meta' table; 1 other schema objects)");
}

static void test_lz_catalog_check__foreign_meta_shape_refused(void **state)
{
	struct fx *f = *state;
	make_foreign_db(f, "CREATE TABLE meta (a, b); INSERT INTO meta VALUES (1, 2)");
	assert_identity_refused(f, "meta table unreadable");
}

static void test_lz_catalog_check__extra_schema_object_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "CREATE TABLE extra (x)");
	assert_identity_refused(f, "unexpected object 'extra'");
}

static void test_lz_catalog_check__trigger_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "CREATE TRIGGER t AFTER INSERT ON leases BEGIN DELETE FROM artifacts; END");
	assert_identity_refused(f, "unexpected object 't'");
}

static void test_lz_catalog_check__altered_table_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "ALTER TABLE leases ADD COLUMN note TEXT");
	assert_identity_refused(f, "table 'leases' differs");
}

static void test_lz_catalog_check__dropped_table_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "DROP TABLE leases");
	assert_identity_refused(f, "table 'leases' is missing");
}

static void test_lz_catalog_check__wal_database_refused(void **state)
{
	struct fx *f = *state;
	make_foreign_db(f, "PRAGMA journal_mode = WAL; CREATE TABLE x (y)");
	assert_false(exists(f, LZ_CATALOG_DB_NAME "-wal"));
	assert_identity_refused(f, "WAL");
	assert_false(exists(f, LZ_CATALOG_DB_NAME "-wal"));
}

static void test_lz_catalog_check__wal_file_present_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	int fd = openat(f->root, LZ_CATALOG_DB_NAME "-wal", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_identity_refused(f, "found 'catalog.sqlite-wal'");
	assert_int_equal(unlinkat(f->root, LZ_CATALOG_DB_NAME "-wal", 0), 0);
	assert_int_equal(symlinkat("elsewhere", f->root, LZ_CATALOG_DB_NAME "-shm"), 0);
	assert_identity_refused(f, "found 'catalog.sqlite-shm'");
}

static void test_lz_catalog_check__empty_file_gets_schema(void **state)
{
	struct fx *f = *state;
	/* An interrupted first section may leave the created, still empty file. */
	int fd = openat(f->root, LZ_CATALOG_DB_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0600), 0);
	close(fd);
	OK(lz_catalog_check(f->root, &E));
	publish(f, OP_1, ART_A, "stage-a");
	assert_int_equal(count(f, ART_A), 0);
}

static void test_lz_catalog_check__not_a_database_refused(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->root, LZ_CATALOG_DB_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0600), 0);
	char junk[4096];
	memset(junk, 'J', sizeof(junk));
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	assert_identity_refused(f, "not a database");
}

/* ---- confinement of the files ------------------------------------------- */

static void test_lz_catalog_check__lock_symlink_refused(void **state)
{
	struct fx *f = *state;
	char target[PATH_MAX], link[PATH_MAX];
	int fd = openat(f->root, "elsewhere", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink(pj(target, f, "elsewhere"), pj(link, f, LZ_CATALOG_LOCK_NAME)), 0);
	FAILS(ELOOP, "'catalog.lock' is a symlink", lz_catalog_check(f->root, &E));
	assert_false(exists(f, LZ_CATALOG_DB_NAME));
}

static void test_lz_catalog_check__db_symlink_refused(void **state)
{
	struct fx *f = *state;
	char p1[PATH_MAX], p2[PATH_MAX];
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(rename(pj(p1, f, LZ_CATALOG_DB_NAME), pj(p2, f, "real.sqlite")), 0);
	assert_int_equal(symlink("real.sqlite", p1), 0);
	FAILS(ELOOP, "'catalog.sqlite' is a symlink", lz_catalog_check(f->root, &E));
	/* A dangling one is not created through either. */
	assert_int_equal(unlink(p1), 0);
	assert_int_equal(symlink("/tmp/lz-test-catalog-nonexistent", p1), 0);
	FAILS(ELOOP, "symlink", lz_catalog_check(f->root, &E));
	struct stat st;
	assert_int_equal(stat("/tmp/lz-test-catalog-nonexistent", &st), -1);
}

static void test_lz_catalog_check__journal_symlink_refused(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(symlink("/tmp/lz-test-catalog-nonexistent", pj(p, f, LZ_CATALOG_DB_NAME "-journal")),
			 0);
	FAILS(EPERM, "'catalog.sqlite-journal' is not a regular file", lz_catalog_check(f->root, &E));
}

static void test_lz_catalog_check__db_mode_0644_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(fchmodat(f->root, LZ_CATALOG_DB_NAME, 0644, 0), 0);
	FAILS(EPERM, "'catalog.sqlite' has mode 0644, not 0600", lz_catalog_check(f->root, &E));
	assert_int_equal(mode_of(f, LZ_CATALOG_DB_NAME), 0644); /* refused, not repaired */
}

static void test_lz_catalog_check__lock_mode_0666_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(fchmodat(f->root, LZ_CATALOG_LOCK_NAME, 0666, 0), 0);
	FAILS(EPERM, "'catalog.lock' has mode 0666", lz_catalog_check(f->root, &E));
}

static void test_lz_catalog_check__db_hard_link_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(linkat(f->root, LZ_CATALOG_DB_NAME, f->root, "second-name", 0), 0);
	FAILS(EPERM, "has 2 links", lz_catalog_check(f->root, &E));
}

static void test_lz_catalog_check__db_directory_refused(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	assert_int_equal(mkdir(pj(p, f, LZ_CATALOG_DB_NAME), 0700), 0);
	FAILS(EISDIR, "catalog.sqlite", lz_catalog_check(f->root, &E));
}

static void test_lz_catalog_check__db_other_owner_refused(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(fchownat(f->root, LZ_CATALOG_DB_NAME, NOBODY, NOBODY, AT_SYMLINK_NOFOLLOW), 0);
	FAILS(EPERM, "'catalog.sqlite' is owned by uid 65534", lz_catalog_check(f->root, &E));
}

static void test_lz_catalog_check__root_mode_0755_refused(void **state)
{
	struct fx *f = *state;
	assert_int_equal(chmod(f->dir, 0755), 0);
	FAILS(EPERM, "Storage Root has mode 0755", lz_catalog_check(f->root, &E));
	assert_false(exists(f, LZ_CATALOG_LOCK_NAME));
}

static void test_lz_catalog_check__root_not_directory_refused(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->root, "file", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	FAILS(ENOTDIR, "not a directory", lz_catalog_check(fd, &E));
	close(fd);
	FAILS(EBADF, "Storage Root descriptor", lz_catalog_check(-1, &E));
}

static void test_lz_catalog_check__db_mount_point_refused(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	OK(lz_catalog_check(f->root, &E));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Private mount namespace: bind another file over the database. */
		char p[PATH_MAX], q[PATH_MAX];
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(77);
		snprintf(p, sizeof(p), "%s/decoy", f->dir);
		snprintf(q, sizeof(q), "%s/%s", f->dir, LZ_CATALOG_DB_NAME);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 || mount(p, q, NULL, MS_BIND, NULL) < 0)
			_exit(77);
		close(fd);
		/* f->root still names the parent namespace's mount: reopen. */
		int root = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct lz_err e = { 0, "" };
		int r = lz_catalog_check(root, &e);
		if (r != -EXDEV || strstr(e.msg, "crosses a mount point") == NULL) {
			fprintf(stderr, "mount point: %d %s\n", r, e.msg);
			_exit(1);
		}
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* sqlite reaches the database through the retained descriptor: with a
 * tmpfs mounted over the Storage Root's pathname, the catalog is still
 * written in the directory the descriptor names, not at the pathname. */
static void test_lz_catalog_check__uses_descriptor_not_pathname(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", f->dir, "tmpfs", 0, "mode=0700") < 0)
			_exit(77);
		struct lz_err e = { 0, "" };
		if (lz_catalog_check(f->root, &e) < 0 || lz_catalog_check(f->root, &e) < 0)
			_exit(1);
		char p[PATH_MAX];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", f->dir, LZ_CATALOG_DB_NAME);
		if (stat(p, &st) == 0) /* nothing written to the decoy */
			_exit(2);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(exists(f, LZ_CATALOG_DB_NAME));
	size_t n;
	unsigned char *b = slurp(f, LZ_CATALOG_DB_NAME, &n);
	assert_true(n >= 100);
	assert_memory_equal(b, "SQLite format 3", 16);
	free(b);
}

static void test_lz_catalog_check__no_descriptor_survives(void **state)
{
	struct fx *f = *state;
	assert_int_equal(catalog_fds(), 0);
	publish(f, OP_1, ART_A, "stage-a");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	FAILS(EEXIST, NULL, lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	struct lz_catalog_artifact *v = NULL;
	size_t n = 0;
	OK(lz_catalog_artifact_list(f->root, &v, &n, &E));
	lz_catalog_artifact_list_free(v, n);
	assert_int_equal(catalog_fds(), 0);
	raw_exec(f, "UPDATE meta SET value = 7 WHERE key = 'version'");
	FAILS(EPROTO, NULL, lz_catalog_check(f->root, &E));
	assert_int_equal(catalog_fds(), 0);
}

static void test_lz_catalog_check__null_err_allowed(void **state)
{
	struct fx *f = *state;
	assert_int_equal(lz_catalog_check(f->root, NULL), 0);
	assert_int_equal(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, NULL), -ENOENT);
	assert_int_equal(lz_catalog_lease_acquire(f->root, "x", DOM_1, 1, NULL), -EINVAL);
}

/* ---- preparation operations --------------------------------------------- */

static void test_lz_catalog_prepare_intent_begin__round_trip(void **state)
{
	struct fx *f = *state;
	int64_t t0 = lz_sqlstore_now();
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	int64_t t1 = lz_sqlstore_now();
	struct lz_catalog_prepare_op *ops;
	size_t n;
	OK(list_ops(f, &ops, &n));
	assert_int_equal(n, 1);
	assert_string_equal(ops[0].id, OP_1);
	assert_string_equal(ops[0].artifact_id, ART_A);
	assert_string_equal(ops[0].staging_name, "stage-a");
	assert_int_equal(ops[0].state, LZ_CATALOG_PREPARE_PREPARING);
	assert_false(ops[0].has_worker);
	assert_true(ops[0].created >= t0 && ops[0].created <= t1);
	free(ops);
}

static void test_lz_catalog_prepare_intent_begin__duplicates_refused(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	FAILS(EEXIST, "operation " OP_1 " already exists",
	      lz_catalog_prepare_intent_begin(f->root, OP_1, ART_B, "stage-b", &E));
	FAILS(EEXIST, "staging directory 'stage-a' already belongs to operation " OP_1,
	      lz_catalog_prepare_intent_begin(f->root, OP_2, ART_B, "stage-a", &E));
	FAILS(EBUSY, "already being prepared by operation " OP_1,
	      lz_catalog_prepare_intent_begin(f->root, OP_2, ART_A, "stage-b", &E));
	struct lz_catalog_prepare_op *ops;
	size_t n;
	OK(list_ops(f, &ops, &n));
	assert_int_equal(n, 1);
	free(ops);
}

static void test_lz_catalog_prepare_intent_begin__published_artifact_refused(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	FAILS(EEXIST, "already in the catalog",
	      lz_catalog_prepare_intent_begin(f->root, OP_2, ART_A, "stage-b", &E));
}

static void test_lz_catalog_prepare_intent_begin__invalid_arguments_refused(void **state)
{
	struct fx *f = *state;
	char long_name[LZ_CATALOG_NAME_MAX + 2];
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	const char *bad_ids[] = { NULL, "", H64("A"), "0123", H64("a") "0", X4(X16("g")),
				  X16("a") X16("a") X16("a") X4("a") X4("a") X4("a") "aa a" };
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		FAILS(EINVAL, "operation ID",
		      lz_catalog_prepare_intent_begin(f->root, bad_ids[i], ART_A, "s", &E));
		FAILS(EINVAL, "artifact ID",
		      lz_catalog_prepare_intent_begin(f->root, OP_1, bad_ids[i], "s", &E));
	}
	const char *bad_names[] = { NULL, "", ".", "..", "a/b", "/", long_name };
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
		FAILS(EINVAL, "staging directory name",
		      lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, bad_names[i], &E));
	/* Refused before the Storage Root is touched. */
	assert_false(exists(f, LZ_CATALOG_LOCK_NAME));
	assert_false(exists(f, LZ_CATALOG_DB_NAME));
	long_name[LZ_CATALOG_NAME_MAX] = '\0';
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, long_name, &E));
}

static void test_lz_catalog_prepare_intent_set_worker__round_trip_u64_max(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	struct lz_catalog_worker w = { .pidfs_dev = UINT64_MAX, .pidfs_ino = UINT64_MAX,
				       .pid = UINT32_MAX, .start_time = UINT64_MAX };
	memset(w.boot_id, 0xff, sizeof(w.boot_id));
	w.boot_id[0] = 0x00;
	OK(lz_catalog_prepare_intent_set_worker(f->root, OP_1, &w, &E));
	struct lz_catalog_prepare_op *ops;
	size_t n;
	OK(list_ops(f, &ops, &n));
	assert_int_equal(n, 1);
	assert_true(ops[0].has_worker);
	assert_memory_equal(ops[0].worker.boot_id, w.boot_id, sizeof(w.boot_id));
	assert_true(ops[0].worker.pidfs_dev == UINT64_MAX);
	assert_true(ops[0].worker.pidfs_ino == UINT64_MAX);
	assert_true(ops[0].worker.pid == UINT32_MAX);
	assert_true(ops[0].worker.start_time == UINT64_MAX);
	free(ops);

	/* The bit pattern next to the sign boundary survives too. */
	OK(lz_catalog_prepare_intent_begin(f->root, OP_2, ART_B, "stage-b", &E));
	struct lz_catalog_worker w2 = worker_of(0x5a, 1);
	w2.pidfs_dev = (uint64_t)INT64_MAX + 1;
	w2.pidfs_ino = (uint64_t)INT64_MAX;
	w2.start_time = 0;
	OK(lz_catalog_prepare_intent_set_worker(f->root, OP_2, &w2, &E));
	OK(list_ops(f, &ops, &n));
	assert_int_equal(n, 2);
	assert_string_equal(ops[1].id, OP_2);
	assert_true(ops[1].worker.pidfs_dev == (uint64_t)INT64_MAX + 1);
	assert_true(ops[1].worker.pidfs_ino == (uint64_t)INT64_MAX);
	assert_true(ops[1].worker.start_time == 0);
	assert_true(ops[1].worker.pid == 1);
	free(ops);
}

static void test_lz_catalog_prepare_intent_set_worker__once_only(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	struct lz_catalog_worker w = worker_of(7, 4242), other = worker_of(7, 4243);
	OK(lz_catalog_prepare_intent_set_worker(f->root, OP_1, &w, &E));
	OK(lz_catalog_prepare_intent_set_worker(f->root, OP_1, &w, &E)); /* same: no-op */
	FAILS(EEXIST, "already records another worker",
	      lz_catalog_prepare_intent_set_worker(f->root, OP_1, &other, &E));
	struct lz_catalog_prepare_op *ops;
	size_t n;
	OK(list_ops(f, &ops, &n));
	assert_int_equal(ops[0].worker.pid, 4242);
	free(ops);
}

static void test_lz_catalog_prepare_intent_set_worker__refusals(void **state)
{
	struct fx *f = *state;
	struct lz_catalog_worker w = worker_of(1, 100);
	FAILS(ENOENT, "no preparation operation " OP_1,
	      lz_catalog_prepare_intent_set_worker(f->root, OP_1, &w, &E));
	FAILS(EINVAL, "worker identity is missing",
	      lz_catalog_prepare_intent_set_worker(f->root, OP_1, NULL, &E));
	w.pid = 0;
	FAILS(EINVAL, "pid must not be 0", lz_catalog_prepare_intent_set_worker(f->root, OP_1, &w, &E));
	w.pid = 100;
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	OK(lz_catalog_prepare_intent_abandon(f->root, OP_1, &E));
	FAILS(ESTALE, "no longer preparing", lz_catalog_prepare_intent_set_worker(f->root, OP_1, &w, &E));
}

static void test_lz_catalog_prepare_intent_abandon__round_trip(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	OK(lz_catalog_prepare_intent_abandon(f->root, OP_1, &E));
	OK(lz_catalog_prepare_intent_abandon(f->root, OP_1, &E)); /* idempotent */
	struct lz_catalog_prepare_op *ops;
	size_t n;
	OK(list_ops(f, &ops, &n));
	assert_int_equal(n, 1);
	assert_int_equal(ops[0].state, LZ_CATALOG_PREPARE_ABANDONED);
	free(ops);
	/* An abandoned operation no longer blocks a new preparation. */
	OK(lz_catalog_prepare_intent_begin(f->root, OP_2, ART_A, "stage-a2", &E));
	FAILS(ENOENT, NULL, lz_catalog_prepare_intent_abandon(f->root, OP_3, &E));
}

static void test_lz_catalog_prepare_intent_abandon__published_refused(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	FAILS(ESTALE, "already published", lz_catalog_prepare_intent_abandon(f->root, OP_1, &E));
}

static void test_lz_catalog_prepare_intent_remove__only_when_finished(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	FAILS(EBUSY, "still preparing", lz_catalog_prepare_intent_remove(f->root, OP_1, &E));
	OK(lz_catalog_prepare_intent_abandon(f->root, OP_1, &E));
	OK(lz_catalog_prepare_intent_remove(f->root, OP_1, &E));
	FAILS(ENOENT, NULL, lz_catalog_prepare_intent_remove(f->root, OP_1, &E));
	publish(f, OP_2, ART_B, "stage-b");
	OK(lz_catalog_prepare_intent_remove(f->root, OP_2, &E));
	struct lz_catalog_prepare_op *ops;
	size_t n = 99;
	OK(list_ops(f, &ops, &n));
	assert_int_equal(n, 0);
	assert_null(ops);
	/* The artifact outlives its operation record. */
	assert_int_equal(count(f, ART_B), 0);
}

static void test_lz_catalog_prepare_list__untouched_on_failure(void **state)
{
	struct fx *f = *state;
	OK(lz_catalog_check(f->root, &E));
	raw_exec(f, "UPDATE meta SET value = 'x' WHERE key = 'store'");
	struct lz_catalog_prepare_op *ops = (void *)1;
	size_t n = 5;
	FAILS(EPROTO, NULL, lz_catalog_prepare_list(f->root, &ops, &n, &E));
	assert_ptr_equal(ops, (void *)1);
	assert_int_equal(n, 5);
}

/* ---- artifacts ---------------------------------------------------------- */

static void test_lz_catalog_artifact_publish__round_trip(void **state)
{
	struct fx *f = *state;
	int64_t t0 = lz_sqlstore_now();
	publish(f, OP_1, ART_A, "stage-a");
	int64_t t1 = lz_sqlstore_now();
	struct lz_catalog_artifact a;
	OK(lz_catalog_artifact_get(f->root, ART_A, &a, &E));
	assert_string_equal(a.id, ART_A);
	assert_string_equal(a.source_ref, "docker://debian:12");
	assert_string_equal(a.manifest_digest, "sha256:" H64("d"));
	assert_string_equal(a.config_digest, "sha256:" H64("e"));
	assert_true(a.size == 123456789);
	assert_int_equal(a.state, LZ_CATALOG_ARTIFACT_PUBLISHED);
	assert_true(a.created >= t0 && a.created <= t1);
	assert_true(a.lease_count == 0);
	lz_catalog_artifact_clear(&a);
	lz_catalog_artifact_clear(&a); /* idempotent */
	lz_catalog_artifact_clear(NULL);

	struct lz_catalog_prepare_op *ops;
	size_t n;
	OK(list_ops(f, &ops, &n));
	assert_int_equal(ops[0].state, LZ_CATALOG_PREPARE_PUBLISHED);
	free(ops);
}

static void test_lz_catalog_artifact_publish__size_u64_max_round_trip(void **state)
{
	struct fx *f = *state;
	const uint64_t sizes[] = { UINT64_MAX, (uint64_t)INT64_MAX + 1, 0 };
	const char *ids[] = { ART_A, ART_B, ART_C };
	const char *ops[] = { OP_1, OP_2, OP_3 };
	const char *stages[] = { "s1", "s2", "s3" };
	for (size_t i = 0; i < 3; i++) {
		struct lz_catalog_artifact_spec s = spec_of(ids[i]);
		s.size = sizes[i];
		OK(lz_catalog_prepare_intent_begin(f->root, ops[i], ids[i], stages[i], &E));
		OK(lz_catalog_artifact_publish(f->root, ops[i], &s, &E));
	}
	for (size_t i = 0; i < 3; i++) {
		struct lz_catalog_artifact a;
		OK(lz_catalog_artifact_get(f->root, ids[i], &a, &E));
		assert_true(a.size == sizes[i]);
		lz_catalog_artifact_clear(&a);
	}
}

static void test_lz_catalog_artifact_publish__refusals(void **state)
{
	struct fx *f = *state;
	struct lz_catalog_artifact_spec s = spec_of(ART_A);
	FAILS(ENOENT, "no preparation operation", lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_B, "stage-b", &E));
	FAILS(ESTALE, "prepares artifact " ART_B ", not " ART_A,
	      lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	OK(lz_catalog_prepare_intent_abandon(f->root, OP_1, &E));
	s = spec_of(ART_B);
	FAILS(ESTALE, "no longer preparing", lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	FAILS(ENOENT, NULL, lz_catalog_artifact_get(f->root, ART_B, &(struct lz_catalog_artifact){ 0 }, &E));

	OK(lz_catalog_prepare_intent_begin(f->root, OP_2, ART_A, "stage-a", &E));
	s = spec_of(ART_A);
	OK(lz_catalog_artifact_publish(f->root, OP_2, &s, &E));
	FAILS(ESTALE, "no longer preparing", lz_catalog_artifact_publish(f->root, OP_2, &s, &E));
	FAILS(EINVAL, "artifact description is missing",
	      lz_catalog_artifact_publish(f->root, OP_2, NULL, &E));
}

static void test_lz_catalog_artifact_publish__string_bounds(void **state)
{
	struct fx *f = *state;
	char *big = malloc(LZ_CATALOG_STR_MAX + 2);
	assert_non_null(big);
	memset(big, 'r', LZ_CATALOG_STR_MAX + 1);
	big[LZ_CATALOG_STR_MAX + 1] = '\0';
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	struct lz_catalog_artifact_spec s = spec_of(ART_A);
	s.source_ref = big;
	FAILS(EINVAL, "source reference is longer than 4096 bytes",
	      lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	s.source_ref = "";
	FAILS(EINVAL, "source reference is empty", lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	s = spec_of(ART_A);
	s.manifest_digest = NULL;
	FAILS(EINVAL, "manifest digest is missing", lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	s = spec_of(ART_A);
	s.config_digest = big;
	FAILS(EINVAL, "config digest", lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	s = spec_of("A" H64("a"));
	FAILS(EINVAL, "artifact ID", lz_catalog_artifact_publish(f->root, OP_1, &s, &E));

	big[LZ_CATALOG_STR_MAX] = '\0'; /* exactly the limit */
	s = spec_of(ART_A);
	s.source_ref = big;
	s.manifest_digest = big;
	s.config_digest = big;
	OK(lz_catalog_artifact_publish(f->root, OP_1, &s, &E));
	struct lz_catalog_artifact a;
	OK(lz_catalog_artifact_get(f->root, ART_A, &a, &E));
	assert_string_equal(a.source_ref, big);
	assert_string_equal(a.config_digest, big);
	lz_catalog_artifact_clear(&a);
	free(big);
}

static void test_lz_catalog_artifact_get__unknown_untouched(void **state)
{
	struct fx *f = *state;
	struct lz_catalog_artifact a;
	memset(&a, 0x5c, sizeof(a));
	struct lz_catalog_artifact copy = a;
	FAILS(ENOENT, "no prepared artifact " ART_A, lz_catalog_artifact_get(f->root, ART_A, &a, &E));
	assert_memory_equal(&a, &copy, sizeof(a));
	FAILS(EINVAL, "artifact ID", lz_catalog_artifact_get(f->root, "nope", &a, &E));
	assert_memory_equal(&a, &copy, sizeof(a));
}

static void test_lz_catalog_artifact_list__with_lease_counts(void **state)
{
	struct fx *f = *state;
	struct lz_catalog_artifact *v = NULL;
	size_t n = 9;
	OK(lz_catalog_artifact_list(f->root, &v, &n, &E));
	assert_int_equal(n, 0);
	assert_null(v);
	lz_catalog_artifact_list_free(NULL, 0);

	publish(f, OP_2, ART_B, "stage-b");
	publish(f, OP_1, ART_A, "stage-a");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_2, 1, &E));
	OK(lz_catalog_artifact_list(f->root, &v, &n, &E));
	assert_int_equal(n, 2);
	assert_string_equal(v[0].id, ART_A);
	assert_true(v[0].lease_count == 2);
	assert_string_equal(v[1].id, ART_B);
	assert_true(v[1].lease_count == 0);
	assert_string_equal(v[1].source_ref, "docker://debian:12");
	lz_catalog_artifact_list_free(v, n);
}

static void test_lz_catalog_artifact_mark_quarantined__round_trip(void **state)
{
	struct fx *f = *state;
	FAILS(ENOENT, NULL, lz_catalog_artifact_mark_quarantined(f->root, ART_A, &E));
	publish(f, OP_1, ART_A, "stage-a");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	FAILS(EBUSY, "still has 1 lease(s)", lz_catalog_artifact_mark_quarantined(f->root, ART_A, &E));
	OK(lz_catalog_lease_release(f->root, ART_A, DOM_1, 1, NULL, NULL, &E));
	OK(lz_catalog_artifact_mark_quarantined(f->root, ART_A, &E));
	OK(lz_catalog_artifact_mark_quarantined(f->root, ART_A, &E)); /* idempotent */
	struct lz_catalog_artifact a;
	OK(lz_catalog_artifact_get(f->root, ART_A, &a, &E));
	assert_int_equal(a.state, LZ_CATALOG_ARTIFACT_QUARANTINED);
	lz_catalog_artifact_clear(&a);
	/* No new lease on the way to reclamation. */
	FAILS(ESTALE, "quarantined; no new leases",
	      lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 2, &E));
	assert_int_equal(count(f, ART_A), 0);
}

static void test_lz_catalog_artifact_delete__refused_with_lease(void **state)
{
	struct fx *f = *state;
	FAILS(ENOENT, NULL, lz_catalog_artifact_delete(f->root, ART_A, &E));
	publish(f, OP_1, ART_A, "stage-a");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 7, &E));
	FAILS(EBUSY, "still has 1 lease(s)", lz_catalog_artifact_delete(f->root, ART_A, &E));
	OK(lz_catalog_lease_release(f->root, ART_A, DOM_1, 7, NULL, NULL, &E));
	FAILS(ESTALE, "quarantine it first", lz_catalog_artifact_delete(f->root, ART_A, &E));
	OK(lz_catalog_artifact_mark_quarantined(f->root, ART_A, &E));
	OK(lz_catalog_artifact_delete(f->root, ART_A, &E));
	struct lz_catalog_artifact a;
	FAILS(ENOENT, NULL, lz_catalog_artifact_get(f->root, ART_A, &a, &E));
	FAILS(ENOENT, NULL, lz_catalog_artifact_delete(f->root, ART_A, &E));
	/* Once gone, the artifact may be prepared again. */
	publish(f, OP_2, ART_A, "stage-a2");
}

/* Another reference given for a published artifact is recorded with its
 * time (renewed when given again), listed by reference, and goes with the
 * artifact. */
static void test_lz_catalog_artifact_name__round_trip(void **state)
{
	struct fx *f = *state;
	struct lz_catalog_ref *v = NULL;
	size_t n = 9;
	FAILS(ENOENT, "no prepared artifact", lz_catalog_artifact_name(f->root, ART_A, "docker://debian:bookworm", &E));
	FAILS(EINVAL, NULL, lz_catalog_artifact_name(f->root, ART_A, "", &E));
	FAILS(EINVAL, NULL, lz_catalog_artifact_name(f->root, "x", "docker://debian:bookworm", &E));
	publish(f, OP_1, ART_A, "stage-a");
	publish(f, OP_2, ART_B, "stage-b");
	OK(lz_catalog_artifact_named(f->root, "docker://debian:bookworm", &v, &n, &E));
	assert_int_equal(n, 0);
	free(v);
	int64_t t0 = lz_sqlstore_now();
	OK(lz_catalog_artifact_name(f->root, ART_B, "docker://debian:bookworm", &E));
	OK(lz_catalog_artifact_name(f->root, ART_A, "docker://debian:bookworm", &E));
	OK(lz_catalog_artifact_name(f->root, ART_A, "docker://debian:bookworm", &E)); /* renewed */
	OK(lz_catalog_artifact_name(f->root, ART_A, "docker-archive:/x.tar", &E));
	OK(lz_catalog_artifact_named(f->root, "docker://debian:bookworm", &v, &n, &E));
	assert_int_equal(n, 2);
	assert_string_equal(v[0].artifact_id, ART_A);
	assert_string_equal(v[1].artifact_id, ART_B);
	assert_true(v[0].recorded >= t0 && v[0].recorded <= lz_sqlstore_now());
	free(v);
	/* reclaimed: no new name, and its names go with it */
	OK(lz_catalog_artifact_mark_quarantined(f->root, ART_A, &E));
	FAILS(ESTALE, "being reclaimed", lz_catalog_artifact_name(f->root, ART_A, "docker://other", &E));
	OK(lz_catalog_artifact_delete(f->root, ART_A, &E));
	OK(lz_catalog_artifact_named(f->root, "docker://debian:bookworm", &v, &n, &E));
	assert_int_equal(n, 1);
	assert_string_equal(v[0].artifact_id, ART_B);
	free(v);
	OK(lz_catalog_artifact_named(f->root, "docker-archive:/x.tar", &v, &n, &E));
	assert_int_equal(n, 0);
	free(v);
}

/* ---- leases ------------------------------------------------------------- */

static void test_lz_catalog_lease_acquire__unknown_artifact_refused(void **state)
{
	struct fx *f = *state;
	FAILS(ENOENT, "no prepared artifact " ART_A,
	      lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	/* A preparing artifact is not leasable either. */
	OK(lz_catalog_prepare_intent_begin(f->root, OP_1, ART_A, "stage-a", &E));
	FAILS(ENOENT, NULL, lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	FAILS(EINVAL, "Domain ID", lz_catalog_lease_acquire(f->root, ART_A, H64("D"), 1, &E));
	FAILS(EINVAL, "artifact ID", lz_catalog_lease_acquire(f->root, NULL, DOM_1, 1, &E));
}

static void test_lz_catalog_lease_acquire__duplicate_refused(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	FAILS(EEXIST, "generation 1) is already held",
	      lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	/* Any other member of the triple makes another lease. */
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 2, &E));
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_2, 1, &E));
	assert_int_equal(count(f, ART_A), 3);
}

static void test_lz_catalog_lease_acquire__generation_u64_max_round_trip(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	const uint64_t gens[] = { UINT64_MAX, 0, (uint64_t)INT64_MAX + 1, 1, (uint64_t)INT64_MAX };
	for (size_t i = 0; i < 5; i++)
		OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, gens[i], &E));
	FAILS(EEXIST, "generation 18446744073709551615)",
	      lz_catalog_lease_acquire(f->root, ART_A, DOM_1, UINT64_MAX, &E));
	struct lz_catalog_lease *v = NULL;
	size_t n = 0;
	OK(lz_catalog_lease_list(f->root, ART_A, &v, &n, &E));
	assert_int_equal(n, 5);
	const uint64_t sorted[] = { 0, 1, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX };
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(v[i].artifact_id, ART_A);
		assert_string_equal(v[i].domain_id, DOM_1);
		assert_true(v[i].generation == sorted[i]);
	}
	free(v);
	OK(lz_catalog_lease_release(f->root, ART_A, DOM_1, UINT64_MAX, NULL, NULL, &E));
	FAILS(ENOENT, NULL, lz_catalog_lease_release(f->root, ART_A, DOM_1, UINT64_MAX, NULL, NULL, &E));
	assert_int_equal(count(f, ART_A), 4);
}

static void test_lz_catalog_lease_release__exact_triple_only(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	publish(f, OP_2, ART_B, "stage-b");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 5, &E));
	FAILS(ENOENT, "no lease (" ART_A ", Domain " DOM_1 ", generation 6)",
	      lz_catalog_lease_release(f->root, ART_A, DOM_1, 6, NULL, NULL, &E));
	FAILS(ENOENT, NULL, lz_catalog_lease_release(f->root, ART_A, DOM_2, 5, NULL, NULL, &E));
	FAILS(ENOENT, NULL, lz_catalog_lease_release(f->root, ART_B, DOM_1, 5, NULL, NULL, &E));
	FAILS(ENOENT, NULL, lz_catalog_lease_release(f->root, ART_C, DOM_1, 5, NULL, NULL, &E));
	assert_int_equal(count(f, ART_A), 1);
	OK(lz_catalog_lease_release(f->root, ART_A, DOM_1, 5, NULL, NULL, &E));
	assert_int_equal(count(f, ART_A), 0);
	FAILS(ENOENT, NULL, lz_catalog_lease_release(f->root, ART_A, DOM_1, 5, NULL, NULL, &E));
}

struct recheck {
	int calls;
	int ret;
	int inner; /* what a nested catalog call returned */
	int root;
};

static int recheck_cb(void *ctx, struct lz_err *err)
{
	struct recheck *c = ctx;
	c->calls++;
	uint64_t n = 0;
	struct lz_err inner = { 0, "" };
	c->inner = lz_catalog_lease_count(c->root, ART_A, &n, &inner);
	if (c->ret < 0)
		return lz_err_set(err, c->ret, "State Anchor mount still present");
	return c->ret;
}

static int silent_refusal_cb(void *ctx, struct lz_err *err)
{
	(void)ctx, (void)err;
	return -EAGAIN;
}

static void test_lz_catalog_lease_release__recheck_refusal_keeps_lease(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	struct recheck c = { .ret = -EBUSY, .root = f->root };
	FAILS(EBUSY, "release refused by the recheck: State Anchor mount still present",
	      lz_catalog_lease_release(f->root, ART_A, DOM_1, 1, recheck_cb, &c, &E));
	assert_int_equal(c.calls, 1);
	assert_int_equal(count(f, ART_A), 1);
	FAILS(EAGAIN, "release refused by the recheck",
	      lz_catalog_lease_release(f->root, ART_A, DOM_1, 1, silent_refusal_cb, NULL, &E));
	assert_int_equal(count(f, ART_A), 1);
	/* No lease: the recheck is not consulted. */
	FAILS(ENOENT, NULL, lz_catalog_lease_release(f->root, ART_A, DOM_1, 2, recheck_cb, &c, &E));
	assert_int_equal(c.calls, 1);
}

static void test_lz_catalog_lease_release__recheck_runs_under_lock(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 1, &E));
	struct recheck c = { .ret = 0, .root = f->root };
	OK(lz_catalog_lease_release(f->root, ART_A, DOM_1, 1, recheck_cb, &c, &E));
	assert_int_equal(c.calls, 1);
	/* A catalog call from inside the section would deadlock on the lock. */
	assert_int_equal(c.inner, -EDEADLK);
	assert_int_equal(count(f, ART_A), 0);
}

static void test_lz_catalog_lease_count__unknown_untouched(void **state)
{
	struct fx *f = *state;
	uint64_t n = 12345;
	FAILS(ENOENT, NULL, lz_catalog_lease_count(f->root, ART_A, &n, &E));
	assert_true(n == 12345);
	FAILS(EINVAL, NULL, lz_catalog_lease_count(f->root, "", &n, &E));
	assert_true(n == 12345);
}

static void test_lz_catalog_lease_list__filter(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	publish(f, OP_2, ART_B, "stage-b");
	OK(lz_catalog_lease_acquire(f->root, ART_B, DOM_2, 3, &E));
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_2, 1, &E));
	OK(lz_catalog_lease_acquire(f->root, ART_A, DOM_1, 9, &E));
	struct lz_catalog_lease *v = NULL;
	size_t n = 0;
	OK(lz_catalog_lease_list(f->root, NULL, &v, &n, &E));
	assert_int_equal(n, 3);
	assert_string_equal(v[0].artifact_id, ART_A);
	assert_string_equal(v[0].domain_id, DOM_1);
	assert_true(v[0].generation == 9);
	assert_string_equal(v[1].domain_id, DOM_2);
	assert_string_equal(v[2].artifact_id, ART_B);
	free(v);
	OK(lz_catalog_lease_list(f->root, ART_B, &v, &n, &E));
	assert_int_equal(n, 1);
	assert_true(v[0].generation == 3);
	free(v);
	OK(lz_catalog_lease_list(f->root, ART_C, &v, &n, &E));
	assert_int_equal(n, 0);
	assert_null(v);
	struct lz_catalog_lease *keep = (void *)1;
	FAILS(EINVAL, NULL, lz_catalog_lease_list(f->root, "zz", &keep, &n, &E));
	assert_ptr_equal(keep, (void *)1);
}

/* Two processes race 50 acquisitions each; the catalog lock serializes
 * them, so every one lands and none is lost to a concurrent transaction. */
static void test_lz_catalog_lease_acquire__concurrent_processes_serialized(void **state)
{
	struct fx *f = *state;
	publish(f, OP_1, ART_A, "stage-a");
	const char *domains[] = { DOM_1, DOM_2 };
	pid_t pids[2];
	for (int c = 0; c < 2; c++) {
		pids[c] = fork();
		assert_true(pids[c] >= 0);
		if (pids[c] == 0) {
			int failures = 0;
			for (uint64_t g = 0; g < 50; g++) {
				struct lz_err e = { 0, "" };
				if (lz_catalog_lease_acquire(f->root, ART_A, domains[c], g, &e) < 0) {
					fprintf(stderr, "child %d: %s\n", c, e.msg);
					failures++;
				}
			}
			_exit(failures > 100 ? 100 : failures);
		}
	}
	for (int c = 0; c < 2; c++) {
		int status;
		assert_int_equal(waitpid(pids[c], &status, 0), pids[c]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	assert_int_equal(count(f, ART_A), 100);
	assert_int_equal(catalog_fds(), 0);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lz_catalog_check__creates_schema_and_identity),
		T(test_lz_catalog_check__creates_0600_under_umask_0277),
		T(test_lz_catalog_check__unknown_store_name_refused),
		T(test_lz_catalog_check__version_0_refused),
		T(test_lz_catalog_check__version_3_refused),
		T(test_lz_catalog_check__version_1_upgraded),
		T(test_lz_catalog_check__version_as_text_refused),
		T(test_lz_catalog_check__missing_version_row_refused),
		T(test_lz_catalog_check__missing_meta_in_nonempty_db_refused),
		T(test_lz_catalog_check__foreign_meta_shape_refused),
		T(test_lz_catalog_check__extra_schema_object_refused),
		T(test_lz_catalog_check__trigger_refused),
		T(test_lz_catalog_check__altered_table_refused),
		T(test_lz_catalog_check__dropped_table_refused),
		T(test_lz_catalog_check__wal_database_refused),
		T(test_lz_catalog_check__wal_file_present_refused),
		T(test_lz_catalog_check__empty_file_gets_schema),
		T(test_lz_catalog_check__not_a_database_refused),
		T(test_lz_catalog_check__lock_symlink_refused),
		T(test_lz_catalog_check__db_symlink_refused),
		T(test_lz_catalog_check__journal_symlink_refused),
		T(test_lz_catalog_check__db_mode_0644_refused),
		T(test_lz_catalog_check__lock_mode_0666_refused),
		T(test_lz_catalog_check__db_hard_link_refused),
		T(test_lz_catalog_check__db_directory_refused),
		T(test_lz_catalog_check__db_other_owner_refused),
		T(test_lz_catalog_check__root_mode_0755_refused),
		T(test_lz_catalog_check__root_not_directory_refused),
		T(test_lz_catalog_check__db_mount_point_refused),
		T(test_lz_catalog_check__uses_descriptor_not_pathname),
		T(test_lz_catalog_check__no_descriptor_survives),
		T(test_lz_catalog_check__null_err_allowed),
		T(test_lz_catalog_prepare_intent_begin__round_trip),
		T(test_lz_catalog_prepare_intent_begin__duplicates_refused),
		T(test_lz_catalog_prepare_intent_begin__published_artifact_refused),
		T(test_lz_catalog_prepare_intent_begin__invalid_arguments_refused),
		T(test_lz_catalog_prepare_intent_set_worker__round_trip_u64_max),
		T(test_lz_catalog_prepare_intent_set_worker__once_only),
		T(test_lz_catalog_prepare_intent_set_worker__refusals),
		T(test_lz_catalog_prepare_intent_abandon__round_trip),
		T(test_lz_catalog_prepare_intent_abandon__published_refused),
		T(test_lz_catalog_prepare_intent_remove__only_when_finished),
		T(test_lz_catalog_prepare_list__untouched_on_failure),
		T(test_lz_catalog_artifact_publish__round_trip),
		T(test_lz_catalog_artifact_publish__size_u64_max_round_trip),
		T(test_lz_catalog_artifact_publish__refusals),
		T(test_lz_catalog_artifact_publish__string_bounds),
		T(test_lz_catalog_artifact_get__unknown_untouched),
		T(test_lz_catalog_artifact_list__with_lease_counts),
		T(test_lz_catalog_artifact_mark_quarantined__round_trip),
		T(test_lz_catalog_artifact_delete__refused_with_lease),
		T(test_lz_catalog_artifact_name__round_trip),
		T(test_lz_catalog_lease_acquire__unknown_artifact_refused),
		T(test_lz_catalog_lease_acquire__duplicate_refused),
		T(test_lz_catalog_lease_acquire__generation_u64_max_round_trip),
		T(test_lz_catalog_lease_release__exact_triple_only),
		T(test_lz_catalog_lease_release__recheck_refusal_keeps_lease),
		T(test_lz_catalog_lease_release__recheck_runs_under_lock),
		T(test_lz_catalog_lease_count__unknown_untouched),
		T(test_lz_catalog_lease_list__filter),
		T(test_lz_catalog_lease_acquire__concurrent_processes_serialized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
