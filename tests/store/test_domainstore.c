/* Domain Store (spec 3.3, 3.4, 3.6): store identity and its refusals
 * (file bytes unchanged), confinement of domain.sqlite at open and under
 * the long-lived handle, every legal and illegal transition of
 * generations, participants and sessions, the network and
 * connectivity-helper participants and the network readiness fingerprint
 * that publication needs (spec 3.3, 3.6, 3.7, FR-19), u64 bit patterns, exact
 * staged -> committed identity, evidence immutability, clean semantics,
 * the cross-role rules of spec 3.6, and persistence across close/open.
 *
 * Every test works in its own mkdtemp Domain Root under /tmp (mode 0700,
 * held as an O_PATH|O_DIRECTORY descriptor), removed by the teardown.
 * "Foreign database" fixtures are written with the plain sqlite3 API by
 * pathname, which only the test may do. Cases needing another uid run as
 * root only and are skipped otherwise. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include <sqlite3.h>

#include "store/catalog.h"
#include "store/domainstore.h"
#include "store/sqlstore.h" /* lz_sqlstore_now: the store's clock (time() reads a coarse one that lags it) */
#include "proc/pidref.h"

#define X4(s) s s s s
#define X16(s) X4(X4(s))
#define H32(s) X16(s) X16(s)
#define H64(s) X4(X16(s))

#define DOM H64("d")
#define DOM2 H64("e")
#define FP H64("f")
#define ART H64("a")
#define ART2 H64("b")
#define NR H64("c")  /* network readiness fingerprint */
#define NR2 H64("7")

#define NOBODY 65534

#define PL LZ_DSTORE_ROLE_PREPARED_LOWER
#define SA LZ_DSTORE_ROLE_STATE_ANCHOR
#define SB LZ_DSTORE_ROLE_SANDBOX
#define RS LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR
#define RC LZ_DSTORE_ROLE_ATTACHED_RUNSC
#define HC LZ_DSTORE_ROLE_HOST_COORDINATOR
#define CH LZ_DSTORE_ROLE_CONNECTIVITY_HELPER
#define NET LZ_DSTORE_ROLE_NETWORK

#define CH_PID 30  /* slirp4netns */
#define NET_PID 31 /* the Runtime Supervisor, entered as the network's process */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- fixture and helpers ------------------------------------------------ */

struct fx {
	char dir[64]; /* "/tmp/lz-test-dstore-XXXXXX" */
	int root;     /* O_PATH|O_DIRECTORY */
	lz_dstore *h; /* open unless the test closed it */
};

static struct lz_err E;
static uint8_t BOOT[16];

static void check_msg(const char *needle)
{
	if (needle != NULL && strstr(E.msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", E.msg, needle);
}

#define OK(expr)                                                          \
	do {                                                              \
		lz_err_clear(&E);                                         \
		int r_ = (expr);                                          \
		if (r_ < 0)                                               \
			fail_msg("%s failed: %d (%s)", #expr, r_, E.msg); \
	} while (0)

#define FAILS(errno_, needle, expr)                                                            \
	do {                                                                                   \
		lz_err_clear(&E);                                                              \
		int r_ = (expr);                                                               \
		if (r_ != -(errno_))                                                           \
			fail_msg("%s: expected %d, got %d (%s)", #expr, -(errno_), r_, E.msg); \
		assert_int_equal(E.code, (errno_));                                            \
		check_msg(needle);                                                             \
	} while (0)

static int setup_bare(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/lz-test-dstore-XXXXXX");
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

static int setup(void **state)
{
	if (setup_bare(state) < 0)
		return -1;
	struct fx *f = *state;
	struct lz_err e = { 0, "" };
	if (lz_dstore_open(f->root, &f->h, &e) < 0) {
		fprintf(stderr, "open: %s\n", e.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_dstore_close(f->h);
	close(f->root);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	if (lz_boot_id(BOOT, &e) < 0) {
		fprintf(stderr, "boot id: %s\n", e.msg);
		return -1;
	}
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

/* Runs SQL on domain.sqlite by pathname with the stock sqlite VFS. */
static void raw_exec(const struct fx *f, const char *sql)
{
	char path[PATH_MAX];
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(pj(path, f, LZ_DSTORE_DB_NAME), &db, SQLITE_OPEN_READWRITE, NULL);
	if (rc != SQLITE_OK)
		fail_msg("raw open: %s", sqlite3_errstr(rc));
	char *msg = NULL;
	rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fail_msg("raw exec '%s': %s", sql, msg ? msg : sqlite3_errstr(rc));
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static void make_foreign_db(const struct fx *f, const char *sql)
{
	int fd = openat(f->root, LZ_DSTORE_DB_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0600), 0);
	close(fd);
	raw_exec(f, sql);
}

static void close_store(struct fx *f)
{
	lz_dstore_close(f->h);
	f->h = NULL;
}

static void reopen(struct fx *f)
{
	close_store(f);
	OK(lz_dstore_open(f->root, &f->h, &E));
}

/* lz_dstore_open refuses with errno_ naming needle, leaves *ret alone, and
 * the database is byte for byte what it was, with no journal left. */
static void assert_open_refused(const struct fx *f, int errno_, const char *needle)
{
	size_t n0, n1;
	unsigned char *before = slurp(f, LZ_DSTORE_DB_NAME, &n0);
	lz_dstore *h = (void *)1;
	FAILS(errno_, needle, lz_dstore_open(f->root, &h, &E));
	assert_ptr_equal(h, (void *)1);
	unsigned char *after = slurp(f, LZ_DSTORE_DB_NAME, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-journal"));
	free(before);
	free(after);
}

static struct lz_pidref P(uint32_t pid)
{
	struct lz_pidref p = { .pidfs_dev = 0x100 + pid, .pidfs_ino = 0x10000 + pid, .pid = pid,
			       .start_time = 5000 + pid };
	memcpy(p.boot_id, BOOT, sizeof(BOOT));
	return p;
}

static bool pidref_eq(const struct lz_pidref *a, const struct lz_pidref *b)
{
	return memcmp(a->boot_id, b->boot_id, 16) == 0 && a->pidfs_dev == b->pidfs_dev &&
	       a->pidfs_ino == b->pidfs_ino && a->pid == b->pid && a->start_time == b->start_time;
}

static struct lz_dstore_mount M(const char *path, uint64_t base)
{
	struct lz_dstore_mount m = { .mnt_id = base, .dev = base + 1, .ino = base + 2 };
	snprintf(m.path, sizeof(m.path), "%s", path);
	return m;
}

static uint64_t gen_new(struct fx *f)
{
	uint64_t g = 0;
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	return g;
}

static void set_state(struct fx *f, uint64_t g, enum lz_dstore_gen_state s)
{
	OK(lz_dstore_generation_set_state(f->h, g, s, &E));
}

static struct lz_dstore_generation gen_get(struct fx *f, uint64_t g)
{
	struct lz_dstore_generation x;
	OK(lz_dstore_generation_get(f->h, g, &x, &E));
	return x;
}

/* The connectivity helper staged, committed and active (an acquired
 * child edge). */
static void helper_active(struct fx *f, uint64_t g)
{
	struct lz_pidref ch = P(CH_PID);
	OK(lz_dstore_participant_intent(f->h, g, CH, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, CH, &ch, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, CH, &ch, &E));
	OK(lz_dstore_participant_activate(f->h, g, CH, &E));
}

/* The network participant entered with the RS identity (a direct edge);
 * in acquiring, without readiness. */
static void network_entered(struct fx *f, uint64_t g)
{
	struct lz_pidref rs = P(NET_PID);
	OK(lz_dstore_participant_intent(f->h, g, NET, &E));
	OK(lz_dstore_participant_enter_process(f->h, g, NET, &rs, &E));
}

/* Spec 3.6, 3.7: helper active, then the network with its readiness
 * fingerprint recorded and active; what publication needs. */
static void network_active(struct fx *f, uint64_t g)
{
	helper_active(f, g);
	network_entered(f, g);
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	OK(lz_dstore_participant_activate(f->h, g, NET, &E));
}

/* Teardown in order: network, then its helper. */
static void network_clean(struct fx *f, uint64_t g)
{
	OK(lz_dstore_participant_release_intent(f->h, g, NET, &E));
	OK(lz_dstore_participant_clean(f->h, g, NET, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, CH, &E));
	OK(lz_dstore_participant_clean(f->h, g, CH, &E));
}

/* An active network participant, then publication. */
static void publish(struct fx *f, uint64_t g)
{
	network_active(f, g);
	set_state(f, g, LZ_DSTORE_GEN_PUBLISHED);
}

/* A participant snapshot; free with lz_dstore_participant_clear. */
static struct lz_dstore_participant part(struct fx *f, uint64_t g, enum lz_dstore_role r)
{
	struct lz_dstore_participant p;
	OK(lz_dstore_participant_get(f->h, g, r, &p, &E));
	assert_int_equal(p.generation, g);
	assert_int_equal(p.role, r);
	return p;
}

static enum lz_dstore_phase phase(struct fx *f, uint64_t g, enum lz_dstore_role r)
{
	struct lz_dstore_participant p = part(f, g, r);
	lz_dstore_participant_clear(&p);
	return p.phase;
}

static void assert_part_equal(const struct lz_dstore_participant *a,
			      const struct lz_dstore_participant *b)
{
	assert_int_equal(a->generation, b->generation);
	assert_int_equal(a->role, b->role);
	assert_int_equal(a->phase, b->phase);
	assert_int_equal(a->process.phase, b->process.phase);
	assert_true(pidref_eq(&a->process.id, &b->process.id));
	assert_int_equal(a->has_artifact, b->has_artifact);
	assert_string_equal(a->artifact_id, b->artifact_id);
	assert_int_equal(a->lease_held, b->lease_held);
	assert_string_equal(a->network_ready, b->network_ready);
	assert_int_equal(a->n_mounts, b->n_mounts);
	for (size_t i = 0; i < a->n_mounts; i++) {
		assert_string_equal(a->mounts[i].path, b->mounts[i].path);
		assert_int_equal(a->mounts[i].mnt_id, b->mounts[i].mnt_id);
		assert_int_equal(a->mounts[i].dev, b->mounts[i].dev);
		assert_int_equal(a->mounts[i].ino, b->mounts[i].ino);
	}
}

/* The participant is exactly as `before`. */
static void assert_unchanged(struct fx *f, const struct lz_dstore_participant *before)
{
	struct lz_dstore_participant now = part(f, before->generation, before->role);
	assert_part_equal(before, &now);
	lz_dstore_participant_clear(&now);
}

static void lower_active(struct fx *f, uint64_t g)
{
	OK(lz_dstore_participant_intent(f->h, g, PL, &E));
	OK(lz_dstore_participant_set_artifact(f->h, g, PL, ART, &E));
	OK(lz_dstore_participant_set_lease_held(f->h, g, PL, &E));
	OK(lz_dstore_participant_activate(f->h, g, PL, &E));
}

static void anchor_active(struct fx *f, uint64_t g)
{
	struct lz_dstore_mount m = M("/", 77);
	OK(lz_dstore_participant_intent(f->h, g, SA, &E));
	OK(lz_dstore_participant_add_mount(f->h, g, SA, &m, &E));
	OK(lz_dstore_participant_activate(f->h, g, SA, &E));
}

static void proc_active(struct fx *f, uint64_t g, enum lz_dstore_role r, uint32_t pid)
{
	struct lz_pidref p = P(pid);
	OK(lz_dstore_participant_intent(f->h, g, r, &E));
	if (r == HC) {
		OK(lz_dstore_participant_enter_process(f->h, g, r, &p, &E));
	} else {
		OK(lz_dstore_participant_stage_process(f->h, g, r, &p, &E));
		OK(lz_dstore_participant_commit_process(f->h, g, r, &p, &E));
	}
	OK(lz_dstore_participant_activate(f->h, g, r, &E));
}

/* A published generation with an active host_coordinator, connectivity
 * helper and network. */
static uint64_t published(struct fx *f)
{
	uint64_t g = gen_new(f);
	proc_active(f, g, HC, 10);
	publish(f, g);
	return g;
}

static struct lz_dstore_session sess(struct fx *f, uint64_t g, const char *id)
{
	struct lz_dstore_session x;
	OK(lz_dstore_session_get(f->h, g, id, &x, &E));
	return x;
}

static uint64_t open_sessions(struct fx *f, uint64_t g)
{
	uint64_t n = 99;
	OK(lz_dstore_session_count_open(f->h, g, &n, &E));
	return n;
}

/* ---- identity ----------------------------------------------------------- */

static void test_lz_dstore_open__creates_schema_and_identity(void **state)
{
	struct fx *f = *state;
	assert_int_equal(mode_of(f, LZ_DSTORE_DB_NAME), 0600);
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-journal"));

	char path[PATH_MAX];
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	assert_int_equal(sqlite3_open_v2(pj(path, f, LZ_DSTORE_DB_NAME), &db, SQLITE_OPEN_READONLY,
					 NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT key, value, typeof(value) FROM meta ORDER BY key",
					    -1, &s, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal(sqlite3_column_text(s, 0), "store");
	assert_string_equal(sqlite3_column_text(s, 1), "lazaret-domain-store-v1");
	assert_string_equal(sqlite3_column_text(s, 2), "text");
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal(sqlite3_column_text(s, 0), "version");
	assert_int_equal(sqlite3_column_int64(s, 1), 4);
	assert_string_equal(sqlite3_column_text(s, 2), "integer");
	assert_int_equal(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
					    "('generations', 'participants', 'participant_mounts', 'sessions', "
					    "'escalations', 'rs_namespaces')",
					    -1, &s, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(s, 0), 6);
	sqlite3_finalize(s);
	/* readiness is a network participant field, not a generation one */
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT (SELECT count(*) FROM pragma_table_info('generations') "
					    "WHERE name = 'network_ready'), (SELECT count(*) FROM "
					    "pragma_table_info('participants') WHERE name = 'network_ready')",
					    -1, &s, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(s, 0), 0);
	assert_int_equal(sqlite3_column_int64(s, 1), 1);
	sqlite3_finalize(s);
	sqlite3_close(db);

	/* A second open accepts what the first one wrote. */
	reopen(f);
	gen_new(f);
}

static void test_lz_dstore_open__creates_0600_under_umask_0277(void **state)
{
	struct fx *f = *state;
	lz_dstore *h = NULL;
	mode_t old = umask(0277);
	lz_err_clear(&E);
	int r = lz_dstore_open(f->root, &h, &E);
	umask(old);
	if (r < 0)
		fail_msg("open: %s", E.msg);
	lz_dstore_close(h);
	assert_int_equal(mode_of(f, LZ_DSTORE_DB_NAME), 0600);
}

static void test_lz_dstore_open__unknown_store_name_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "UPDATE meta SET value = 'someone-elses-store' WHERE key = 'store'");
	assert_open_refused(f, EPROTO, "store is 'someone-elses-store', not 'lazaret-domain-store-v1'");
}

static void test_lz_dstore_open__storage_catalog_refused(void **state)
{
	struct fx *f = *state;
	/* A real Storage Catalog under the Domain Store's name. */
	OK(lz_catalog_check(f->root, &E));
	assert_int_equal(renameat(f->root, LZ_CATALOG_DB_NAME, f->root, LZ_DSTORE_DB_NAME), 0);
	assert_open_refused(f, EPROTO, "store is 'lazaret-storage-catalog-v1'");
}

static void test_lz_dstore_open__version_0_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "UPDATE meta SET value = 0 WHERE key = 'version'");
	assert_open_refused(f, EPROTO, "Domain Store version 0 is older than supported 4");
}

/* Version 1 had no network readiness column: its generations are not
 * reinterpreted as v2 rows that merely lack readiness. */
static void test_lz_dstore_open__version_1_refused(void **state)
{
	struct fx *f = *state;
	set_state(f, gen_new(f), LZ_DSTORE_GEN_FAILED);
	close_store(f);
	raw_exec(f, "UPDATE meta SET value = 1 WHERE key = 'version'");
	assert_open_refused(f, EPROTO, "v1 schema mismatch");
}

static void test_lz_dstore_open__version_5_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "UPDATE meta SET value = 5 WHERE key = 'version'");
	assert_open_refused(f, EPROTO, "Domain Store version 5 is newer than supported 4");
}

/* A v2 store (no escalations table) is upgraded in its first
 * transaction, keeping its rows; tables are only added. */
static void test_lz_dstore_open__version_2_upgraded(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	close_store(f);
	raw_exec(f, "DROP TABLE escalations");
	raw_exec(f, "DROP TABLE rs_namespaces");
	raw_exec(f, "UPDATE meta SET value = 2 WHERE key = 'version'");
	reopen(f);
	struct lz_dstore_generation x;
	assert_int_equal(lz_dstore_generation_get(f->h, g, &x, &E), 0);
	assert_int_equal(x.state, LZ_DSTORE_GEN_FAILED);
	close_store(f);
	/* Upgraded: a v4 store now, whose escalations and rs_namespaces
	 * tables exist. */
	raw_exec(f, "INSERT INTO escalations VALUES (1, '00000000000000000000000000000001', "
		    "'00000000000000000000000000000002', 'approved', "
		    "'0000000000000000000000000000000000000000000000000000000000000003', 'ended', 0)");
	raw_exec(f, "INSERT INTO rs_namespaces VALUES (1, 'mount', 7, 8)");
	raw_exec(f, "UPDATE meta SET value = 5 WHERE key = 'version'");
	assert_open_refused(f, EPROTO, "version 5 is newer than supported 4");
}

/* A v3 store (no rs_namespaces) gains the table and keeps its rows; its
 * generations simply have no namespaces recorded. */
static void test_lz_dstore_open__version_3_upgraded(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	close_store(f);
	raw_exec(f, "DROP TABLE rs_namespaces");
	raw_exec(f, "UPDATE meta SET value = 3 WHERE key = 'version'");
	reopen(f);
	struct lz_dstore_namespaces got;
	OK(lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	assert_false(got.have_mount || got.have_network);
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	struct lz_dstore_ns ns = { .id = 3, .inum = 4 };
	OK(lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &ns, &E));
}

/* ---- the generation's namespaces ------------------------------------------ */

/* Each kind once, with its participant's staging, never replaced; the
 * full ranges of ID and inode read back. */
static void test_lz_dstore_rs_namespace_record__before_staging_only_once(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_dstore_ns mnt = { .id = UINT64_MAX, .inum = UINT32_MAX }, net = { .id = 1ull << 63, .inum = 1 };
	struct lz_dstore_namespaces got;
	FAILS(ENOENT, "", lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &mnt, &E));
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	OK(lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &mnt, &E));
	/* The network namespace goes with the connectivity helper's intent. */
	FAILS(ENOENT, "", lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_NETWORK, &net, &E));
	OK(lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	assert_true(got.have_mount && !got.have_network);
	OK(lz_dstore_participant_intent(f->h, g, CH, &E));
	OK(lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_NETWORK, &net, &E));
	OK(lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	assert_true(got.have_mount && got.mount.id == UINT64_MAX && got.mount.inum == UINT32_MAX);
	assert_true(got.have_network && got.network.id == 1ull << 63 && got.network.inum == 1);
	FAILS(EEXIST, "never replaced", lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &net, &E));
	FAILS(EEXIST, "never replaced", lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_NETWORK, &mnt, &E));
	OK(lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	assert_true(got.mount.id == UINT64_MAX && got.network.id == 1ull << 63);
}

static void test_lz_dstore_rs_namespace_record__after_staging_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref id = P(7), ch = P(CH_PID);
	struct lz_dstore_ns ns = { .id = 3, .inum = 4 };
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RS, &id, &E));
	FAILS(ESTALE, "recorded only before its process is staged",
	      lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &ns, &E));
	OK(lz_dstore_participant_intent(f->h, g, CH, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, CH, &ch, &E));
	FAILS(ESTALE, "recorded only before its process is staged",
	      lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_NETWORK, &ns, &E));
	struct lz_dstore_namespaces got;
	OK(lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	assert_false(got.have_mount || got.have_network);
	ns.id = 0;
	FAILS(EINVAL, "a namespace identity is zero",
	      lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &ns, &E));
	ns = (struct lz_dstore_ns){ .id = 3, .inum = 4 };
	FAILS(EINVAL, "is not recorded", lz_dstore_rs_namespace_record(f->h, g, (enum lz_dstore_ns_kind)7, &ns, &E));
}

/* Forged rows (an inode beyond 32 bits, an unknown kind) are refused. */
static void test_lz_dstore_rs_namespaces_get__forged_row_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_dstore_namespaces got;
	close_store(f);
	raw_exec(f, "PRAGMA ignore_check_constraints = ON; "
		    "INSERT INTO rs_namespaces VALUES (1, 'mount', 3, 4294967296)");
	reopen(f);
	FAILS(EPROTO, "malformed", lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	close_store(f);
	raw_exec(f, "PRAGMA ignore_check_constraints = ON; DELETE FROM rs_namespaces; "
		    "INSERT INTO rs_namespaces VALUES (1, 'user', 3, 4)");
	reopen(f);
	FAILS(EPROTO, "unknown kind", lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
}

/* A v2 store that already has a later table is not a v2 store: refused,
 * unchanged. */
static void test_lz_dstore_open__version_2_with_later_table_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "UPDATE meta SET value = 2 WHERE key = 'version'");
	size_t n0, n1;
	unsigned char *before = slurp(f, LZ_DSTORE_DB_NAME, &n0);
	assert_open_refused(f, EPROTO, "v2 schema mismatch: unexpected object 'escalations'");
	unsigned char *after = slurp(f, LZ_DSTORE_DB_NAME, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	free(before);
	free(after);
}

static void test_lz_dstore_open__version_as_text_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "UPDATE meta SET value = '2' WHERE key = 'version'");
	assert_open_refused(f, EPROTO, "version '2' is not an integer");
}

static void test_lz_dstore_open__unversioned_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "DELETE FROM meta WHERE key = 'version'");
	assert_open_refused(f, EPROTO, "no 'version' identity row");
}

static void test_lz_dstore_open__altered_meta_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	/* meta's SQL rewritten behind sqlite's back */
	raw_exec(f, "PRAGMA writable_schema = ON; "
		    "UPDATE sqlite_schema SET sql = 'CREATE TABLE meta (key TEXT NOT NULL, value ANY "
		    "NOT NULL) STRICT' WHERE name = 'meta'");
	assert_open_refused(f, EPROTO, NULL);
}

static void test_lz_dstore_open__missing_meta_in_nonempty_db_refused(void **state)
{
	struct fx *f = *state;
	make_foreign_db(f, "CREATE TABLE generations (x INTEGER); INSERT INTO generations VALUES (42)");
	assert_open_refused(f, EPROTO,
			    "not a Lazaret Domain Store: no store identity (no 'meta' table; 1 other "
			    "schema objects)");
}

static void test_lz_dstore_open__foreign_meta_shape_refused(void **state)
{
	struct fx *f = *state;
	make_foreign_db(f, "CREATE TABLE meta (a, b); INSERT INTO meta VALUES (1, 2)");
	assert_open_refused(f, EPROTO, "meta table unreadable");
}

static void test_lz_dstore_open__extra_schema_object_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "CREATE TABLE extra (x)");
	assert_open_refused(f, EPROTO, "unexpected object 'extra'");
}

static void test_lz_dstore_open__trigger_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "CREATE TRIGGER t AFTER INSERT ON sessions BEGIN DELETE FROM generations; END");
	assert_open_refused(f, EPROTO, "unexpected object 't'");
}

static void test_lz_dstore_open__altered_table_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "ALTER TABLE participants ADD COLUMN note TEXT");
	assert_open_refused(f, EPROTO, "table 'participants' differs");
}

static void test_lz_dstore_open__dropped_table_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "DROP TABLE participant_mounts");
	assert_open_refused(f, EPROTO, "table 'participant_mounts' is missing");
}

/* A foreign WAL database is refused by its identity, and left as it was. */
static void test_lz_dstore_open__foreign_wal_database_refused(void **state)
{
	struct fx *f = *state;
	make_foreign_db(f, "PRAGMA journal_mode = WAL; CREATE TABLE x (y)");
	assert_open_refused(f, EPROTO, "no store identity");
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-wal"));
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-shm"));
}

/* A refused open leaves the log and index another connection (a
 * developer's sqlite3) has open: that connection's commits go there. */
static void test_lz_dstore_open__refused_open_leaves_another_connections_log(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	make_foreign_db(f, "PRAGMA journal_mode = WAL; CREATE TABLE x (y)");
	sqlite3 *raw = NULL;
	assert_int_equal(sqlite3_open_v2(pj(path, f, LZ_DSTORE_DB_NAME), &raw, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(raw, "SELECT count(*) FROM x", NULL, NULL, NULL), SQLITE_OK);
	lz_dstore *h = NULL;
	FAILS(EPROTO, "no store identity", lz_dstore_open(f->root, &h, &E));
	assert_true(exists(f, LZ_DSTORE_DB_NAME "-wal"));
	assert_true(exists(f, LZ_DSTORE_DB_NAME "-shm"));
	assert_int_equal(sqlite3_exec(raw, "INSERT INTO x VALUES (1)", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_close(raw), SQLITE_OK);
	assert_int_equal(sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_stmt *s = NULL;
	assert_int_equal(sqlite3_prepare_v2(raw, "SELECT count(*) FROM x", -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(s, 0), 1);
	sqlite3_finalize(s);
	assert_int_equal(sqlite3_close(raw), SQLITE_OK);
}

/* A foreign WAL database whose writer was killed: its log holds commits
 * not yet in the file. Refused by its identity, and neither the file nor
 * its log changes (closing would fold the log in). */
static void test_lz_dstore_open__foreign_wal_database_with_its_log_refused_unchanged(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->root, LZ_DSTORE_DB_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char path[PATH_MAX];
		sqlite3 *db = NULL;
		if (sqlite3_open_v2(pj(path, f, LZ_DSTORE_DB_NAME), &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
		    sqlite3_exec(db, "PRAGMA journal_mode = WAL; CREATE TABLE x (y); INSERT INTO x VALUES (1)", NULL,
				 NULL, NULL) != SQLITE_OK)
			_exit(1);
		raise(SIGKILL);
		_exit(2);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	size_t n0, n1;
	unsigned char *log0 = slurp(f, LZ_DSTORE_DB_NAME "-wal", &n0);
	assert_true(n0 > 0);
	assert_open_refused(f, EPROTO, "no store identity");
	unsigned char *log1 = slurp(f, LZ_DSTORE_DB_NAME "-wal", &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(log0, log1, n0);
	free(log0);
	free(log1);
}

/* A log beside a store still in the rollback format was never its own
 * (the switch writes the format before any log): it is not replayed. */
static void test_lz_dstore_open__a_log_beside_a_rollback_journal_store_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	raw_exec(f, "PRAGMA journal_mode = DELETE");
	int fd = openat(f->root, LZ_DSTORE_DB_NAME "-wal", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not this store's", 16), 16);
	close(fd);
	assert_open_refused(f, EPROTO, "another database's log");
	assert_int_equal(unlinkat(f->root, LZ_DSTORE_DB_NAME "-wal", 0), 0);
	reopen(f);
}

static unsigned char file_format(const struct fx *f)
{
	size_t n = 0;
	unsigned char *b = slurp(f, LZ_DSTORE_DB_NAME, &n);
	assert_true(n >= 100);
	assert_int_equal(b[18], b[19]);
	unsigned char v = b[18];
	free(b);
	return v;
}

/* One sync a commit (issue 15): the store keeps a write-ahead log, as
 * 0600 files of its own that a clean close folds back and removes. */
static void test_lz_dstore_open__keeps_a_write_ahead_log(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	assert_int_equal(file_format(f), 2);
	assert_int_equal(mode_of(f, LZ_DSTORE_DB_NAME "-wal"), 0600);
	assert_int_equal(mode_of(f, LZ_DSTORE_DB_NAME "-shm"), 0600);
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-journal"));
	close_store(f);
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-wal"));
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-shm"));
	reopen(f);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_STARTING);
}

/* A store an earlier Lazaret kept with a rollback journal: switched at
 * open, every row kept. */
static void test_lz_dstore_open__rollback_journal_store_switched(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	close_store(f);
	raw_exec(f, "PRAGMA journal_mode = DELETE");
	assert_int_equal(file_format(f), 1);
	reopen(f);
	assert_int_equal(file_format(f), 2);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_STARTING);
}

/* A coordinator killed after a commit leaves the log; the next open
 * replays it through the descriptor VFS. */
static void test_lz_dstore__commit_survives_a_killed_process(void **state)
{
	struct fx *f = *state;
	close_store(f);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		lz_dstore *h = NULL;
		uint64_t g = 0;
		struct lz_err e = { 0, "" };
		if (lz_dstore_open(f->root, &h, &e) < 0 || lz_dstore_generation_begin(h, DOM, FP, &g, &e) < 0)
			_exit(1);
		raise(SIGKILL);
		_exit(2);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	size_t n = 0;
	free(slurp(f, LZ_DSTORE_DB_NAME "-wal", &n));
	assert_true(n > 0);
	reopen(f);
	assert_int_equal(gen_get(f, 1).state, LZ_DSTORE_GEN_STARTING);
}

static void test_lz_dstore_open__not_a_database_refused(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->root, LZ_DSTORE_DB_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0600), 0);
	char junk[4096];
	memset(junk, 'J', sizeof(junk));
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	assert_open_refused(f, EPROTO, "not a database");
}

static void test_lz_dstore_open__empty_file_gets_schema(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->root, LZ_DSTORE_DB_NAME, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0600), 0);
	close(fd);
	OK(lz_dstore_open(f->root, &f->h, &E));
	assert_int_equal(gen_new(f), 1);
}

/* An open handle checks the identity again in every transaction. */
static void test_lz_dstore_generation_begin__identity_changed_under_handle_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	raw_exec(f, "UPDATE meta SET value = 5 WHERE key = 'version'");
	size_t n0, n1;
	unsigned char *before = slurp(f, LZ_DSTORE_DB_NAME, &n0);
	uint64_t keep = 77;
	FAILS(EPROTO, "domain store: Domain Store version 5 is newer",
	      lz_dstore_generation_begin(f->h, DOM, FP, &keep, &E));
	assert_int_equal(keep, 77);
	struct lz_dstore_generation x;
	FAILS(EPROTO, "version 5", lz_dstore_generation_get(f->h, g, &x, &E));
	unsigned char *after = slurp(f, LZ_DSTORE_DB_NAME, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	free(before);
	free(after);
	raw_exec(f, "UPDATE meta SET value = 4 WHERE key = 'version'");
	assert_int_equal(gen_new(f), 2);
}

/* ---- confinement -------------------------------------------------------- */

static void test_lz_dstore_open__db_symlink_refused(void **state)
{
	struct fx *f = *state;
	char p1[PATH_MAX], p2[PATH_MAX];
	close_store(f);
	assert_int_equal(rename(pj(p1, f, LZ_DSTORE_DB_NAME), pj(p2, f, "real.sqlite")), 0);
	assert_int_equal(symlink("real.sqlite", p1), 0);
	FAILS(ELOOP, "'domain.sqlite' is a symlink", lz_dstore_open(f->root, &f->h, &E));
	assert_null(f->h);
	assert_int_equal(unlink(p1), 0);
	assert_int_equal(symlink("/tmp/lz-test-dstore-nonexistent", p1), 0);
	FAILS(ELOOP, "symlink", lz_dstore_open(f->root, &f->h, &E));
	struct stat st;
	assert_int_equal(stat("/tmp/lz-test-dstore-nonexistent", &st), -1);
}

static void test_lz_dstore_open__db_mode_0644_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	assert_int_equal(fchmodat(f->root, LZ_DSTORE_DB_NAME, 0644, 0), 0);
	FAILS(EPERM, "'domain.sqlite' has mode 0644, not 0600", lz_dstore_open(f->root, &f->h, &E));
	assert_int_equal(mode_of(f, LZ_DSTORE_DB_NAME), 0644); /* refused, not repaired */
}

static void test_lz_dstore_open__db_hard_link_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	assert_int_equal(linkat(f->root, LZ_DSTORE_DB_NAME, f->root, "second-name", 0), 0);
	FAILS(EPERM, "'domain.sqlite' has 2 links, not 1", lz_dstore_open(f->root, &f->h, &E));
}

static void test_lz_dstore_open__journal_symlink_refused(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	close_store(f);
	assert_int_equal(symlink("/tmp/lz-test-dstore-nonexistent",
				 pj(p, f, LZ_DSTORE_DB_NAME "-journal")),
			 0);
	FAILS(EPERM, "'domain.sqlite-journal' is not a regular file",
	      lz_dstore_open(f->root, &f->h, &E));
}

static void test_lz_dstore_open__wal_symlink_refused(void **state)
{
	struct fx *f = *state;
	close_store(f);
	assert_int_equal(symlinkat("/tmp/lz-test-dstore-nonexistent", f->root, LZ_DSTORE_DB_NAME "-wal"), 0);
	assert_open_refused(f, EPERM, "'domain.sqlite-wal' is not a regular file");
	assert_int_equal(unlinkat(f->root, LZ_DSTORE_DB_NAME "-wal", 0), 0);
	assert_int_equal(symlinkat("/tmp/lz-test-dstore-nonexistent", f->root, LZ_DSTORE_DB_NAME "-shm"), 0);
	assert_open_refused(f, EPERM, "'domain.sqlite-shm' is not a regular file");
}

static void test_lz_dstore_open__db_directory_refused(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	assert_int_equal(mkdir(pj(p, f, LZ_DSTORE_DB_NAME), 0700), 0);
	FAILS(EISDIR, "domain.sqlite", lz_dstore_open(f->root, &f->h, &E));
}

static void test_lz_dstore_open__db_other_owner_refused(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	close_store(f);
	assert_int_equal(fchownat(f->root, LZ_DSTORE_DB_NAME, NOBODY, NOBODY, AT_SYMLINK_NOFOLLOW), 0);
	FAILS(EPERM, "'domain.sqlite' is owned by uid 65534", lz_dstore_open(f->root, &f->h, &E));
}

static void test_lz_dstore_open__root_mode_0755_refused(void **state)
{
	struct fx *f = *state;
	assert_int_equal(chmod(f->dir, 0755), 0);
	FAILS(EPERM, "Domain Root has mode 0755", lz_dstore_open(f->root, &f->h, &E));
	assert_false(exists(f, LZ_DSTORE_DB_NAME));
}

static void test_lz_dstore_open__root_not_directory_refused(void **state)
{
	struct fx *f = *state;
	int fd = openat(f->root, "file", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	lz_dstore *h = (void *)1;
	FAILS(ENOTDIR, "not a directory", lz_dstore_open(fd, &h, &E));
	close(fd);
	FAILS(EBADF, "Domain Root descriptor", lz_dstore_open(-1, &h, &E));
	assert_ptr_equal(h, (void *)1);
}

/* The handle keeps its own descriptor: the caller's may close, and a
 * rename of the directory's pathname does not redirect the store. */
static void test_lz_dstore_open__keeps_its_own_descriptor(void **state)
{
	struct fx *f = *state;
	close_store(f);
	int fd = dup(f->root);
	assert_true(fd >= 0);
	OK(lz_dstore_open(fd, &f->h, &E));
	close(fd);
	char moved[PATH_MAX];
	snprintf(moved, sizeof(moved), "%s.moved", f->dir);
	assert_int_equal(rename(f->dir, moved), 0);
	assert_int_equal(mkdir(f->dir, 0700), 0);
	uint64_t g = gen_new(f);
	assert_int_equal(g, 1);
	close_store(f);
	struct stat st;
	char p[PATH_MAX];
	assert_int_equal(stat(pj(p, f, LZ_DSTORE_DB_NAME), &st), -1);
	/* back where the test's descriptor (and teardown) expect it */
	assert_int_equal(rmdir(f->dir), 0);
	assert_int_equal(rename(moved, f->dir), 0);
	OK(lz_dstore_open(f->root, &f->h, &E));
	assert_int_equal(gen_get(f, 1).state, LZ_DSTORE_GEN_STARTING);
}

/* The long-lived handle rechecks domain.sqlite before every transaction. */
static void test_lz_dstore_generation_begin__db_changed_under_handle_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = 0;
	assert_int_equal(fchmodat(f->root, LZ_DSTORE_DB_NAME, 0644, 0), 0);
	FAILS(EPERM, "'domain.sqlite' has mode 0644", lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	assert_int_equal(fchmodat(f->root, LZ_DSTORE_DB_NAME, 0600, 0), 0);

	assert_int_equal(linkat(f->root, LZ_DSTORE_DB_NAME, f->root, "second-name", 0), 0);
	FAILS(EPERM, "has 2 links", lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	assert_int_equal(unlinkat(f->root, "second-name", 0), 0);

	assert_int_equal(g, 0);
	assert_int_equal(gen_new(f), 1);

	/* The write-ahead log and its index (there since that commit): ours,
	 * 0600 at most, one link. */
	uint64_t open_sessions = 0;
	assert_int_equal(fchmodat(f->root, LZ_DSTORE_DB_NAME "-wal", 0640, 0), 0);
	FAILS(EPERM, "'domain.sqlite-wal' has mode 0640", lz_dstore_session_count_open(f->h, 1, &open_sessions, &E));
	assert_int_equal(fchmodat(f->root, LZ_DSTORE_DB_NAME "-wal", 0600, 0), 0);
	assert_int_equal(linkat(f->root, LZ_DSTORE_DB_NAME "-shm", f->root, "second-name", 0), 0);
	FAILS(EPERM, "'domain.sqlite-shm' has 2 links", lz_dstore_session_count_open(f->h, 1, &open_sessions, &E));
	assert_int_equal(unlinkat(f->root, "second-name", 0), 0);
	OK(lz_dstore_session_count_open(f->h, 1, &open_sessions, &E));
	assert_int_equal(fchmodat(f->root, LZ_DSTORE_DB_NAME "-shm", 0400, 0), 0);
	FAILS(EPERM, "'domain.sqlite-shm' has mode 0400", lz_dstore_session_count_open(f->h, 1, &open_sessions, &E));
	assert_int_equal(fchmodat(f->root, LZ_DSTORE_DB_NAME "-shm", 0600, 0), 0);
	/* The log sqlite writes, not one by its name: removed or replaced, a
	 * commit would go to a file nobody replays, or a planted one would be. */
	char wal[PATH_MAX], kept[PATH_MAX];
	pj(wal, f, LZ_DSTORE_DB_NAME "-wal");
	pj(kept, f, "kept-wal");
	assert_int_equal(rename(wal, kept), 0);
	FAILS(EPERM, "'domain.sqlite-wal' was removed since it was opened",
	      lz_dstore_session_count_open(f->h, 1, &open_sessions, &E));
	int fd = openat(f->root, LZ_DSTORE_DB_NAME "-wal", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	FAILS(EPERM, "'domain.sqlite-wal' was replaced since it was opened",
	      lz_dstore_session_count_open(f->h, 1, &open_sessions, &E));
	assert_int_equal(rename(kept, wal), 0);
	OK(lz_dstore_session_count_open(f->h, 1, &open_sessions, &E));

	/* Another file renamed over the name: refused, whatever it holds. */
	char a[PATH_MAX], b[PATH_MAX];
	assert_int_equal(linkat(f->root, LZ_DSTORE_DB_NAME, f->root, "keep", 0), 0);
	int cp = openat(f->root, "copy", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	size_t n;
	unsigned char *bytes = slurp(f, LZ_DSTORE_DB_NAME, &n);
	assert_int_equal(write(cp, bytes, n), (ssize_t)n);
	close(cp);
	free(bytes);
	assert_int_equal(rename(pj(a, f, "copy"), pj(b, f, LZ_DSTORE_DB_NAME)), 0);
	FAILS(EPERM, "'domain.sqlite' was replaced since it was opened",
	      lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	assert_int_equal(rename(pj(a, f, "keep"), b), 0);
	set_state(f, 1, LZ_DSTORE_GEN_FAILED);
	assert_int_equal(gen_new(f), 2);
}

/* ---- generations -------------------------------------------------------- */

static void test_lz_dstore_generation_begin__round_trip(void **state)
{
	struct fx *f = *state;
	int64_t t0 = lz_sqlstore_now();
	uint64_t g = gen_new(f);
	int64_t t1 = lz_sqlstore_now();
	assert_int_equal(g, 1);
	struct lz_dstore_generation x = gen_get(f, g);
	assert_int_equal(x.generation, 1);
	assert_string_equal(x.domain_id, DOM);
	assert_string_equal(x.fingerprint, FP);
	assert_int_equal(x.state, LZ_DSTORE_GEN_STARTING);
	assert_true(x.created >= t0 && x.created <= t1);
	assert_memory_equal(x.boot_id, BOOT, 16);
	const char *ids[] = { x.coordinator_id, x.sidecar_id, x.sandbox_id };
	for (int i = 0; i < 3; i++) {
		assert_int_equal(strlen(ids[i]), LZ_DSTORE_ID_HEX_LEN);
		assert_int_equal(strspn(ids[i], "0123456789abcdef"), LZ_DSTORE_ID_HEX_LEN);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(ids[i], ids[j]);
	}
	/* every generation mints new IDs */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	struct lz_dstore_generation y = gen_get(f, gen_new(f));
	assert_int_equal(y.generation, 2);
	assert_string_not_equal(y.coordinator_id, x.coordinator_id);
	assert_string_not_equal(y.sidecar_id, x.sidecar_id);
	assert_string_not_equal(y.sandbox_id, x.sandbox_id);
}

static void test_lz_dstore_generation_begin__refused_while_one_is_live(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f), keep = 77;
	static const enum lz_dstore_gen_state live[] = { LZ_DSTORE_GEN_STARTING,
							  LZ_DSTORE_GEN_PUBLISHED,
							  LZ_DSTORE_GEN_STOPPING };
	for (size_t i = 0; i < 3; i++) {
		if (live[i] == LZ_DSTORE_GEN_PUBLISHED)
			publish(f, g);
		else if (i > 0)
			set_state(f, g, live[i]);
		char needle[64];
		snprintf(needle, sizeof(needle), "generation 1 is still %s",
			 lz_dstore_gen_state_name(live[i]));
		FAILS(EBUSY, needle, lz_dstore_generation_begin(f->h, DOM, FP, &keep, &E));
		assert_int_equal(keep, 77);
	}
	network_clean(f, g);
	set_state(f, g, LZ_DSTORE_GEN_STOPPED);
	assert_int_equal(gen_new(f), 2);
}

static void test_lz_dstore_generation_begin__other_domain_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f), keep = 77;
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	FAILS(ESTALE, "records Domain " DOM ", not " DOM2,
	      lz_dstore_generation_begin(f->h, DOM2, FP, &keep, &E));
	assert_int_equal(keep, 77);
	/* another fingerprint is a new configuration of the same Domain */
	OK(lz_dstore_generation_begin(f->h, DOM, H64("9"), &keep, &E));
	assert_int_equal(keep, 2);
	assert_string_equal(gen_get(f, 2).fingerprint, H64("9"));
}

static void test_lz_dstore_generation_begin__invalid_arguments_refused(void **state)
{
	struct fx *f = *state;
	uint64_t keep = 77;
	FAILS(EINVAL, "Domain ID is missing", lz_dstore_generation_begin(f->h, NULL, FP, &keep, &E));
	FAILS(EINVAL, "Domain ID must be exactly 64 lowercase hex digits",
	      lz_dstore_generation_begin(f->h, H64("D"), FP, &keep, &E));
	FAILS(EINVAL, "Domain ID", lz_dstore_generation_begin(f->h, DOM "0", FP, &keep, &E));
	FAILS(EINVAL, "configuration fingerprint",
	      lz_dstore_generation_begin(f->h, DOM, "abc", &keep, &E));
	FAILS(EINVAL, "no Domain Store handle", lz_dstore_generation_begin(NULL, DOM, FP, &keep, &E));
	assert_int_equal(keep, 77);
}

/* Generation numbers are u64 bit patterns: u64 max round trips, orders
 * last, and the next one is refused rather than wrapped. */
static void test_lz_dstore_generation_begin__u64_max_round_trip(void **state)
{
	struct fx *f = *state;
	assert_int_equal(gen_new(f), 1);
	set_state(f, 1, LZ_DSTORE_GEN_FAILED);
	raw_exec(f, "INSERT INTO generations VALUES (-2, '" DOM "', '" FP "', 'stopped', 0, "
		    "zeroblob(16), '" H32("a") "', '" H32("b") "', '" H32("c") "')");
	raw_exec(f, "INSERT INTO generations VALUES (9223372036854775807, '" DOM "', '" FP
		    "', 'stopped', 0, zeroblob(16), '" H32("1") "', '" H32("2") "', '" H32("3")
		    "')");
	uint64_t g = gen_new(f);
	assert_true(g == UINT64_MAX);
	struct lz_dstore_generation x = gen_get(f, UINT64_MAX);
	assert_true(x.generation == UINT64_MAX);
	assert_int_equal(gen_get(f, UINT64_MAX - 1).state, LZ_DSTORE_GEN_STOPPED);
	assert_int_equal(gen_get(f, (uint64_t)INT64_MAX).state, LZ_DSTORE_GEN_STOPPED);

	struct lz_dstore_generation *v = NULL;
	size_t n = 0;
	OK(lz_dstore_generation_list(f->h, 10, &v, &n, &E));
	assert_int_equal(n, 4);
	assert_true(v[0].generation == UINT64_MAX);
	assert_true(v[1].generation == UINT64_MAX - 1);
	assert_true(v[2].generation == (uint64_t)INT64_MAX);
	assert_int_equal(v[3].generation, 1);
	free(v);

	/* participants and sessions key on it as well */
	proc_active(f, g, HC, 42);
	publish(f, g);
	struct lz_dstore_participant net = part(f, g, NET);
	assert_true(net.generation == UINT64_MAX);
	assert_string_equal(net.network_ready, NR);
	char sid[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, sid, &E));
	assert_true(sess(f, g, sid).generation == UINT64_MAX);
	assert_int_equal(phase(f, g, HC), LZ_DSTORE_PHASE_ACTIVE);

	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	uint64_t keep = 77;
	FAILS(EOVERFLOW, "generation numbers are exhausted",
	      lz_dstore_generation_begin(f->h, DOM, FP, &keep, &E));
	assert_int_equal(keep, 77);
}

static void test_lz_dstore_generation_set_state__forward_moves(void **state)
{
	struct fx *f = *state;
	/* starting -> published -> stopping -> stopped */
	uint64_t g = gen_new(f);
	publish(f, g);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_PUBLISHED);
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_STOPPING);
	network_clean(f, g);
	set_state(f, g, LZ_DSTORE_GEN_STOPPED);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_STOPPED);

	/* skipping forward is a forward move */
	static const enum lz_dstore_gen_state paths[][3] = {
		{ LZ_DSTORE_GEN_FAILED, 0, 0 },
		{ LZ_DSTORE_GEN_STOPPING, LZ_DSTORE_GEN_FAILED, 0 },
		{ LZ_DSTORE_GEN_PUBLISHED, LZ_DSTORE_GEN_FAILED, 0 },
		{ LZ_DSTORE_GEN_STOPPED, 0, 0 },
		{ LZ_DSTORE_GEN_PUBLISHED, LZ_DSTORE_GEN_STOPPED, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		g = gen_new(f);
		for (size_t k = 0; k < 3 && paths[i][k]; k++) {
			if (paths[i][k] == LZ_DSTORE_GEN_PUBLISHED) {
				publish(f, g);
			} else {
				if (paths[i][k] == LZ_DSTORE_GEN_STOPPED && k > 0)
					network_clean(f, g); /* stopped: everything clean */
				set_state(f, g, paths[i][k]);
			}
			assert_int_equal(gen_get(f, g).state, paths[i][k]);
		}
	}
}

static void test_lz_dstore_generation_set_state__illegal_moves_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	FAILS(ESTALE, "generation 1: starting -> starting is not a forward move",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_STARTING, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(ESTALE, "stopping -> published is not a forward move",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_PUBLISHED, &E));
	FAILS(ESTALE, "stopping -> starting",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_STARTING, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPED);
	static const enum lz_dstore_gen_state all[] = {
		LZ_DSTORE_GEN_STARTING, LZ_DSTORE_GEN_PUBLISHED, LZ_DSTORE_GEN_STOPPING,
		LZ_DSTORE_GEN_STOPPED, LZ_DSTORE_GEN_FAILED
	};
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		FAILS(ESTALE, "stopped -> ", lz_dstore_generation_set_state(f->h, g, all[i], &E));
	g = gen_new(f);
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		FAILS(ESTALE, "failed -> ", lz_dstore_generation_set_state(f->h, g, all[i], &E));
	assert_int_equal(gen_get(f, 1).state, LZ_DSTORE_GEN_STOPPED);
	assert_int_equal(gen_get(f, 2).state, LZ_DSTORE_GEN_FAILED);

	FAILS(ENOENT, "no generation 9",
	      lz_dstore_generation_set_state(f->h, 9, LZ_DSTORE_GEN_FAILED, &E));
	FAILS(EINVAL, "unknown generation state 0",
	      lz_dstore_generation_set_state(f->h, 2, (enum lz_dstore_gen_state)0, &E));
	FAILS(EINVAL, "unknown generation state 6",
	      lz_dstore_generation_set_state(f->h, 2, (enum lz_dstore_gen_state)6, &E));
}

static void test_lz_dstore_generation_set_state__stopped_needs_everything_clean(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	char sid[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, sid, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(EBUSY, "generation 1 cannot stop: participant connectivity_helper is active",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_STOPPED, &E));
	network_clean(f, g);
	FAILS(EBUSY, "generation 1 cannot stop: participant host_coordinator is active",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_STOPPED, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, HC, &E));
	FAILS(EBUSY, "participant host_coordinator is release",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_STOPPED, &E));
	OK(lz_dstore_participant_clean(f->h, g, HC, &E));
	FAILS(EBUSY, "cannot stop: session ", lz_dstore_generation_set_state(f->h, g,
									       LZ_DSTORE_GEN_STOPPED, &E));
	check_msg(" is intent");
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_STOPPING);
	OK(lz_dstore_session_clean(f->h, g, sid, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPED);
}

static void test_lz_dstore_generation_get__unknown_untouched(void **state)
{
	struct fx *f = *state;
	struct lz_dstore_generation x;
	memset(&x, 0x5a, sizeof(x));
	FAILS(ENOENT, "domain store: no generation 1", lz_dstore_generation_get(f->h, 1, &x, &E));
	FAILS(ENOENT, "no generation 0", lz_dstore_generation_get(f->h, 0, &x, &E));
	unsigned char want[sizeof(x)];
	memset(want, 0x5a, sizeof(want));
	assert_memory_equal(&x, want, sizeof(x));
}

static void test_lz_dstore_generation_list__recent_first_bounded(void **state)
{
	struct fx *f = *state;
	struct lz_dstore_generation *v = (void *)1;
	size_t n = 77;
	OK(lz_dstore_generation_list(f->h, 5, &v, &n, &E));
	assert_int_equal(n, 0);
	assert_null(v);
	for (int i = 0; i < 5; i++)
		set_state(f, gen_new(f), LZ_DSTORE_GEN_FAILED);
	OK(lz_dstore_generation_list(f->h, 3, &v, &n, &E));
	assert_int_equal(n, 3);
	assert_int_equal(v[0].generation, 5);
	assert_int_equal(v[1].generation, 4);
	assert_int_equal(v[2].generation, 3);
	assert_string_equal(v[2].domain_id, DOM);
	free(v);
	OK(lz_dstore_generation_list(f->h, LZ_DSTORE_LIST_MAX, &v, &n, &E));
	assert_int_equal(n, 5);
	free(v);
	v = (void *)1;
	n = 77;
	FAILS(EINVAL, "list bound", lz_dstore_generation_list(f->h, 0, &v, &n, &E));
	FAILS(EINVAL, "list bound",
	      lz_dstore_generation_list(f->h, LZ_DSTORE_LIST_MAX + 1, &v, &n, &E));
	assert_ptr_equal(v, (void *)1);
	assert_int_equal(n, 77);
}

/* ---- network and connectivity helper (spec 3.3, 3.6, 3.7, FR-19) -------- */

/* The whole acquisition: both intents, the helper staged, committed and
 * active, the network entered with the RS identity, its readiness
 * recorded, activation, publication; the fingerprint reads back. */
static void test_lz_dstore_participant_set_network_ready__then_publish(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref ch = P(CH_PID), rs = P(NET_PID);
	OK(lz_dstore_participant_intent(f->h, g, CH, &E));
	OK(lz_dstore_participant_intent(f->h, g, NET, &E));
	assert_int_equal(phase(f, g, CH), LZ_DSTORE_PHASE_INTENT);
	assert_int_equal(phase(f, g, NET), LZ_DSTORE_PHASE_INTENT);
	OK(lz_dstore_participant_stage_process(f->h, g, CH, &ch, &E));
	FAILS(ESTALE, "generation 1 connectivity_helper: acquiring -> active refused: process slot "
		      "is staged, not committed",
	      lz_dstore_participant_activate(f->h, g, CH, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, CH, &ch, &E));
	OK(lz_dstore_participant_activate(f->h, g, CH, &E));
	struct lz_dstore_participant h = part(f, g, CH);
	assert_int_equal(h.phase, LZ_DSTORE_PHASE_ACTIVE);
	assert_int_equal(h.process.phase, LZ_DSTORE_SLOT_COMMITTED);
	assert_true(pidref_eq(&h.process.id, &ch));
	assert_string_equal(h.network_ready, "");

	OK(lz_dstore_participant_enter_process(f->h, g, NET, &rs, &E));
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	struct lz_dstore_participant n = part(f, g, NET);
	assert_int_equal(n.phase, LZ_DSTORE_PHASE_ACQUIRING);
	assert_int_equal(n.process.phase, LZ_DSTORE_SLOT_COMMITTED);
	assert_true(pidref_eq(&n.process.id, &rs));
	assert_string_equal(n.network_ready, NR);
	OK(lz_dstore_participant_activate(f->h, g, NET, &E));
	set_state(f, g, LZ_DSTORE_GEN_PUBLISHED);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_PUBLISHED);
	n.phase = LZ_DSTORE_PHASE_ACTIVE;
	assert_unchanged(f, &n);
	assert_unchanged(f, &h);
	char sid[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, sid, &E));

	/* durable across a reopen; a later generation starts without readiness */
	reopen(f);
	assert_unchanged(f, &n);
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	uint64_t g2 = gen_new(f);
	network_entered(f, g2);
	assert_string_equal(part(f, g2, NET).network_ready, "");
	helper_active(f, g2);
	OK(lz_dstore_participant_set_network_ready(f->h, g2, NR2, &E));
	assert_string_equal(part(f, g2, NET).network_ready, NR2);
	assert_string_equal(part(f, g, NET).network_ready, NR);
}

/* Publication needs the network participant active; the other moves do
 * not; and a published generation reads without it later. */
static void test_lz_dstore_generation_set_state__published_needs_network_active(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	proc_active(f, g, HC, 10);
	FAILS(ESTALE, "domain store: generation 1: the network participant is absent, not active; "
		      "starting -> published needs it active",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_PUBLISHED, &E));
	OK(lz_dstore_participant_intent(f->h, g, NET, &E));
	FAILS(ESTALE, "the network participant is intent, not active",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_PUBLISHED, &E));
	/* an active helper is not enough */
	helper_active(f, g);
	struct lz_pidref rs = P(NET_PID);
	OK(lz_dstore_participant_enter_process(f->h, g, NET, &rs, &E));
	FAILS(ESTALE, "the network participant is acquiring, not active",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_PUBLISHED, &E));
	/* nor is recorded readiness before activation */
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	FAILS(ESTALE, "the network participant is acquiring, not active",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_PUBLISHED, &E));
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_STARTING);
	char sid[LZ_DSTORE_ID_HEX_LEN + 1] = "untouched";
	FAILS(ESTALE, "sessions begin only once published",
	      lz_dstore_session_begin(f->h, g, sid, &E));
	assert_string_equal(sid, "untouched");
	OK(lz_dstore_participant_activate(f->h, g, NET, &E));
	set_state(f, g, LZ_DSTORE_GEN_PUBLISHED);

	/* released and cleaned later, the generation still reads as published */
	network_clean(f, g);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_PUBLISHED);
	struct lz_dstore_generation *v = NULL;
	size_t n = 0;
	OK(lz_dstore_generation_list(f->h, 1, &v, &n, &E));
	assert_int_equal(n, 1);
	assert_int_equal(v[0].state, LZ_DSTORE_GEN_PUBLISHED);
	free(v);

	/* a network released before activation does not publish either */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	helper_active(f, g);
	network_entered(f, g);
	OK(lz_dstore_participant_release_intent(f->h, g, NET, &E));
	FAILS(ESTALE, "generation 2: the network participant is release, not active",
	      lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_PUBLISHED, &E));
	/* the other moves do not need it */
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_FAILED);
}

/* Spec 3.6: the helper's committed ownership before network readiness. */
static void test_lz_dstore_participant_set_network_ready__needs_active_helper(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref ch = P(CH_PID);
	network_entered(f, g);
	struct lz_dstore_participant n = part(f, g, NET);
	FAILS(ESTALE, "generation 1 network: cannot record network readiness in phase acquiring: "
		      "connectivity_helper is absent, not active (its committed ownership comes "
		      "before network readiness)",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	OK(lz_dstore_participant_intent(f->h, g, CH, &E));
	FAILS(ESTALE, "connectivity_helper is intent, not active",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, CH, &ch, &E));
	FAILS(ESTALE, "connectivity_helper is acquiring, not active",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, CH, &ch, &E));
	FAILS(ESTALE, "connectivity_helper is acquiring, not active",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_unchanged(f, &n);
	OK(lz_dstore_participant_activate(f->h, g, CH, &E));
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));

	/* a helper already released does not count */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	helper_active(f, g);
	network_entered(f, g);
	OK(lz_dstore_participant_release_intent(f->h, g, CH, &E));
	FAILS(ESTALE, "generation 2 network: cannot record network readiness in phase acquiring: "
		      "connectivity_helper is release, not active",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_string_equal(part(f, g, NET).network_ready, "");
}

/* The network's process (the RS) is entered before readiness. */
static void test_lz_dstore_participant_set_network_ready__needs_entered_process(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	helper_active(f, g);
	FAILS(ENOENT, "generation 1 has no network participant",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	OK(lz_dstore_participant_intent(f->h, g, NET, &E));
	struct lz_dstore_participant n = part(f, g, NET);
	FAILS(ESTALE, "generation 1 network: cannot record network readiness in phase intent: the "
		      "process slot is unassigned, not committed",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_unchanged(f, &n); /* still a bare intent */
	FAILS(ESTALE, "generation 1 network: intent -> active refused",
	      lz_dstore_participant_activate(f->h, g, NET, &E));
	struct lz_pidref rs = P(NET_PID);
	OK(lz_dstore_participant_enter_process(f->h, g, NET, &rs, &E));
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_string_equal(part(f, g, NET).network_ready, NR);
}

static void test_lz_dstore_participant_set_network_ready__never_replaced(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	helper_active(f, g);
	network_entered(f, g);
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	struct lz_dstore_participant n = part(f, g, NET);
	FAILS(ESTALE, "generation 1 network: cannot record network readiness in phase acquiring: " NR
		      " is already recorded (never replaced)",
	      lz_dstore_participant_set_network_ready(f->h, g, NR2, &E));
	FAILS(ESTALE, "is already recorded", lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_unchanged(f, &n);
	OK(lz_dstore_participant_activate(f->h, g, NET, &E));
	FAILS(ESTALE, "generation 1 network: cannot record network readiness in phase active (only "
		      "in intent or acquiring)",
	      lz_dstore_participant_set_network_ready(f->h, g, NR2, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, NET, &E));
	FAILS(ESTALE, "cannot record network readiness in phase release",
	      lz_dstore_participant_set_network_ready(f->h, g, NR2, &E));
	n.phase = LZ_DSTORE_PHASE_RELEASE;
	assert_unchanged(f, &n); /* release keeps the fingerprint and the RS identity */
	OK(lz_dstore_participant_clean(f->h, g, NET, &E));
	FAILS(ESTALE, "cannot record network readiness in phase clean",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_string_equal(part(f, g, NET).network_ready, "");
}

static void test_lz_dstore_participant_set_network_ready__only_while_starting(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	struct lz_dstore_participant n = part(f, g, NET);
	FAILS(ESTALE, "generation 1 network: cannot record network readiness in phase active: the "
		      "generation is published (only while starting)",
	      lz_dstore_participant_set_network_ready(f->h, g, NR2, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(ESTALE, "the generation is stopping",
	      lz_dstore_participant_set_network_ready(f->h, g, NR2, &E));
	assert_unchanged(f, &n);

	/* entered and with an active helper, but the generation moved on */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	helper_active(f, g);
	network_entered(f, g);
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(ESTALE, "generation 2 network: cannot record network readiness in phase acquiring: "
		      "the generation is stopping (only while starting)",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	FAILS(ESTALE, "the generation is failed",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_string_equal(part(f, g, NET).network_ready, "");
}

static void test_lz_dstore_participant_set_network_ready__malformed_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	helper_active(f, g);
	network_entered(f, g);
	char short63[64], nonhex[65], space[65];
	memcpy(short63, NR, 63);
	short63[63] = '\0';
	memcpy(nonhex, NR, sizeof(nonhex));
	nonhex[40] = 'g';
	memcpy(space, NR, sizeof(space));
	space[0] = ' ';
	const char *const bad[] = {
		H64("C"),          /* uppercase */
		H32("c") H32("C"), /* partly uppercase */
		short63,
		NR "c",            /* 65 */
		nonhex,
		space,
		"",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		FAILS(EINVAL,
		      "domain store: network readiness fingerprint must be exactly 64 lowercase "
		      "hex digits",
		      lz_dstore_participant_set_network_ready(f->h, g, bad[i], &E));
	FAILS(EINVAL, "network readiness fingerprint is missing",
	      lz_dstore_participant_set_network_ready(f->h, g, NULL, &E));
	FAILS(EINVAL, "no Domain Store handle",
	      lz_dstore_participant_set_network_ready(NULL, g, NR, &E));
	/* nothing recorded: activation is still refused */
	assert_string_equal(part(f, g, NET).network_ready, "");
	FAILS(ESTALE, "network readiness is not recorded",
	      lz_dstore_participant_activate(f->h, g, NET, &E));
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	assert_string_equal(part(f, g, NET).network_ready, NR);
}

static void test_lz_dstore_participant_set_network_ready__unknown_generation(void **state)
{
	struct fx *f = *state;
	FAILS(ENOENT, "domain store: no generation 1",
	      lz_dstore_participant_set_network_ready(f->h, 1, NR, &E));
	uint64_t g = gen_new(f);
	FAILS(ENOENT, "no generation 9", lz_dstore_participant_set_network_ready(f->h, 9, NR, &E));
	FAILS(ENOENT, "no generation 0", lz_dstore_participant_set_network_ready(f->h, 0, NR, &E));
	FAILS(ENOENT, "generation 1 has no network participant",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
}

static void test_lz_dstore_participant_activate__network_needs_readiness(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	helper_active(f, g);
	network_entered(f, g);
	struct lz_dstore_participant n = part(f, g, NET);
	FAILS(ESTALE, "generation 1 network: acquiring -> active refused: network readiness is not "
		      "recorded",
	      lz_dstore_participant_activate(f->h, g, NET, &E));
	assert_unchanged(f, &n);
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	OK(lz_dstore_participant_activate(f->h, g, NET, &E));
	assert_int_equal(phase(f, g, NET), LZ_DSTORE_PHASE_ACTIVE);
	/* the helper's activation needs only its committed slot */
	assert_int_equal(phase(f, g, CH), LZ_DSTORE_PHASE_ACTIVE);
}

/* Release keeps the fingerprint; clean clears it; the helper is cleaned
 * only after the network. */
static void test_lz_dstore_participant_clean__network_then_helper(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	network_active(f, g);
	struct lz_dstore_participant n = part(f, g, NET), h = part(f, g, CH);
	/* release intent of the helper is not ordered ... */
	OK(lz_dstore_participant_release_intent(f->h, g, CH, &E));
	h.phase = LZ_DSTORE_PHASE_RELEASE;
	assert_unchanged(f, &h);
	/* ... its clean is */
	FAILS(ESTALE, "generation 1 connectivity_helper: cannot become clean: "
		      "network is active, not clean",
	      lz_dstore_participant_clean(f->h, g, CH, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, NET, &E));
	n.phase = LZ_DSTORE_PHASE_RELEASE;
	assert_unchanged(f, &n);
	FAILS(ESTALE, "network is release, not clean", lz_dstore_participant_clean(f->h, g, CH, &E));
	assert_unchanged(f, &h);
	OK(lz_dstore_participant_clean(f->h, g, NET, &E));
	struct lz_dstore_participant c = part(f, g, NET);
	assert_int_equal(c.phase, LZ_DSTORE_PHASE_CLEAN);
	assert_string_equal(c.network_ready, "");
	assert_int_equal(c.process.phase, LZ_DSTORE_SLOT_UNASSIGNED);
	assert_int_equal(c.process.id.pid, 0);
	OK(lz_dstore_participant_clean(f->h, g, CH, &E));
	c = part(f, g, CH);
	assert_int_equal(c.phase, LZ_DSTORE_PHASE_CLEAN);
	assert_int_equal(c.process.phase, LZ_DSTORE_SLOT_UNASSIGNED);
	FAILS(ESTALE, "cannot record network readiness in phase clean",
	      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));

	/* bare intents likewise; an absent network does not hold the helper */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	OK(lz_dstore_participant_intent(f->h, g, CH, &E));
	OK(lz_dstore_participant_intent(f->h, g, NET, &E));
	FAILS(ESTALE, "generation 2 connectivity_helper: cannot become clean: "
		      "network is intent, not clean",
	      lz_dstore_participant_clean(f->h, g, CH, &E));
	OK(lz_dstore_participant_clean(f->h, g, NET, &E));
	OK(lz_dstore_participant_clean(f->h, g, CH, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	helper_active(f, g);
	OK(lz_dstore_participant_release_intent(f->h, g, CH, &E));
	OK(lz_dstore_participant_clean(f->h, g, CH, &E));
	/* and the network does not wait for the helper */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	network_active(f, g);
	OK(lz_dstore_participant_release_intent(f->h, g, NET, &E));
	OK(lz_dstore_participant_clean(f->h, g, NET, &E));
	assert_int_equal(phase(f, g, CH), LZ_DSTORE_PHASE_ACTIVE);
}

/* A readiness value written behind the store's back (CHECK constraints
 * switched off) is refused when read, by every call that reads the row. */
#define REPAIR_NETWORK                                                           \
	"UPDATE participants SET network_ready = NULL, proc_slot = 'committed', " \
	"phase = CASE role WHEN 'network' THEN 'acquiring' ELSE 'active' END"
static void test_lz_dstore_participant_get__forged_network_ready_refused(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *role;
		const char *set;
		const char *needle;
	} forged[] = {
		{ "network", "network_ready = '" H64("C") "'",
		  "row field network_ready is not a 64-digit hex ID" },
		{ "network", "network_ready = '" H32("c") "'",
		  "row field network_ready has an invalid length" },
		{ "network", "network_ready = '" H64("c") "0'",
		  "row field network_ready has an invalid length" },
		{ "network", "network_ready = ''", "row field network_ready has an invalid length" },
		{ "network", "network_ready = '" H32("c") H32("g") "'",
		  "network_ready is not a 64-digit hex ID" },
		{ "host_coordinator", "network_ready = '" NR "'",
		  "generation 1 host_coordinator has network readiness; only the network "
		  "participant records it" },
		{ "connectivity_helper", "network_ready = '" NR "'",
		  "generation 1 connectivity_helper has network readiness" },
		{ "network", "network_ready = '" NR "', proc_slot = 'staged'",
		  "generation 1 network has network readiness in phase acquiring with the process "
		  "slot staged" },
		{ "network", "network_ready = '" NR "', phase = 'clean'",
		  "network has network readiness in phase clean" },
		{ "network", "phase = 'active'", "generation 1 network is active without network "
						 "readiness" },
	};
	uint64_t g = gen_new(f);
	proc_active(f, g, HC, 10);
	helper_active(f, g);
	network_entered(f, g);
	char sql[768];
	for (size_t i = 0; i < ARRAY_SIZE(forged); i++) {
		snprintf(sql, sizeof(sql),
			 "PRAGMA ignore_check_constraints = ON; "
			 REPAIR_NETWORK "; "
			 "UPDATE participants SET %s WHERE generation = 1 AND role = '%s'",
			 forged[i].set, forged[i].role);
		raw_exec(f, sql);
		enum lz_dstore_role role = strcmp(forged[i].role, "network") == 0 ? NET
					   : strcmp(forged[i].role, "host_coordinator") == 0 ? HC
											     : CH;
		struct lz_dstore_participant p;
		memset(&p, 0x5a, sizeof(p));
		FAILS(EPROTO, forged[i].needle, lz_dstore_participant_get(f->h, g, role, &p, &E));
		unsigned char want[sizeof(p)];
		memset(want, 0x5a, sizeof(want));
		assert_memory_equal(&p, want, sizeof(p));
		FAILS(EPROTO, forged[i].needle, lz_dstore_participant_activate(f->h, g, role, &E));
		FAILS(EPROTO, forged[i].needle, lz_dstore_participant_release_intent(f->h, g, role, &E));
		if (role == NET)
			FAILS(EPROTO, forged[i].needle,
			      lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	}
	/* the schema itself refuses such rows while its checks are on */
	raw_exec(f, REPAIR_NETWORK);
	static const char *const refused[] = {
		"UPDATE participants SET network_ready = '" H64("C") "' WHERE role = 'network'",
		"UPDATE participants SET network_ready = '" H32("c") "' WHERE role = 'network'",
		"UPDATE participants SET network_ready = '" NR "' WHERE role = 'host_coordinator'",
		"UPDATE participants SET network_ready = '" NR "' WHERE role = 'connectivity_helper'",
		"UPDATE participants SET network_ready = '" NR "', proc_slot = 'staged' "
		"WHERE role = 'network'",
		"UPDATE participants SET phase = 'active' WHERE role = 'network'",
	};
	char path[PATH_MAX];
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open_v2(pj(path, f, LZ_DSTORE_DB_NAME), &db, SQLITE_OPEN_READWRITE,
					 NULL),
			 SQLITE_OK);
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
		if (sqlite3_exec(db, refused[i], NULL, NULL, NULL) != SQLITE_CONSTRAINT)
			fail_msg("the schema accepted '%s'", refused[i]);
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
	/* repaired, the rows read again and the flow goes on */
	assert_string_equal(part(f, g, NET).network_ready, "");
	OK(lz_dstore_participant_set_network_ready(f->h, g, NR, &E));
	OK(lz_dstore_participant_activate(f->h, g, NET, &E));
	set_state(f, g, LZ_DSTORE_GEN_PUBLISHED);
}

/* ---- participants ------------------------------------------------------- */

static void test_lz_dstore_participant_intent__round_trip(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	for (int r = PL; r <= LZ_DSTORE_ROLE_COUNT; r++) {
		OK(lz_dstore_participant_intent(f->h, g, r, &E));
		struct lz_dstore_participant p = part(f, g, r);
		assert_int_equal(p.phase, LZ_DSTORE_PHASE_INTENT);
		assert_int_equal(p.process.phase, LZ_DSTORE_SLOT_UNASSIGNED);
		assert_false(p.has_artifact);
		assert_string_equal(p.artifact_id, "");
		assert_false(p.lease_held);
		assert_string_equal(p.network_ready, "");
		assert_int_equal(p.n_mounts, 0);
		assert_null(p.mounts);
		lz_dstore_participant_clear(&p);
	}
}

static void test_lz_dstore_participant_intent__refusals(void **state)
{
	struct fx *f = *state;
	FAILS(ENOENT, "no generation 1", lz_dstore_participant_intent(f->h, 1, SB, &E));
	uint64_t g = gen_new(f);
	OK(lz_dstore_participant_intent(f->h, g, SB, &E));
	FAILS(ESTALE, "generation 1 sandbox: absent -> intent refused: already intent",
	      lz_dstore_participant_intent(f->h, g, SB, &E));
	FAILS(EINVAL, "unknown participant role 0",
	      lz_dstore_participant_intent(f->h, g, (enum lz_dstore_role)0, &E));
	FAILS(EINVAL, "unknown participant role 9",
	      lz_dstore_participant_intent(f->h, g, (enum lz_dstore_role)9, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(ESTALE, "generation 1 attached_runsc: no new intent: the generation is stopping",
	      lz_dstore_participant_intent(f->h, g, RC, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	FAILS(ESTALE, "the generation is failed", lz_dstore_participant_intent(f->h, g, RC, &E));
	struct lz_dstore_participant p;
	FAILS(ENOENT, "generation 1 has no attached_runsc participant",
	      lz_dstore_participant_get(f->h, g, RC, &p, &E));
}

/* Prepared lower, spec 3.6 steps 1-3 and release steps 3-5. */
static void test_lz_dstore_participant_set_artifact__prepared_lower_flow(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	OK(lz_dstore_participant_intent(f->h, g, PL, &E));
	OK(lz_dstore_participant_set_artifact(f->h, g, PL, ART, &E));
	struct lz_dstore_participant p = part(f, g, PL);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_ACQUIRING);
	assert_true(p.has_artifact);
	assert_string_equal(p.artifact_id, ART);
	assert_false(p.lease_held);
	FAILS(ESTALE, "generation 1 prepared_lower: acquiring -> active refused: needs an artifact "
		      "and a held lease",
	      lz_dstore_participant_activate(f->h, g, PL, &E));
	assert_unchanged(f, &p);
	OK(lz_dstore_participant_set_lease_held(f->h, g, PL, &E));
	p = part(f, g, PL);
	assert_true(p.lease_held);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_ACQUIRING);
	OK(lz_dstore_participant_activate(f->h, g, PL, &E));
	assert_int_equal(phase(f, g, PL), LZ_DSTORE_PHASE_ACTIVE);
	OK(lz_dstore_participant_release_intent(f->h, g, PL, &E));
	p = part(f, g, PL);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_RELEASE);
	assert_string_equal(p.artifact_id, ART); /* release keeps evidence */
	assert_true(p.lease_held);
	OK(lz_dstore_participant_clean(f->h, g, PL, &E));
	p = part(f, g, PL);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_CLEAN);
	assert_false(p.has_artifact);
	assert_string_equal(p.artifact_id, "");
	assert_false(p.lease_held);
}

static void test_lz_dstore_participant_set_artifact__refusals(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	FAILS(ENOENT, "generation 1 has no prepared_lower participant",
	      lz_dstore_participant_set_artifact(f->h, g, PL, ART, &E));
	OK(lz_dstore_participant_intent(f->h, g, PL, &E));
	OK(lz_dstore_participant_intent(f->h, g, SB, &E));
	FAILS(EINVAL, "role sandbox has no artifact",
	      lz_dstore_participant_set_artifact(f->h, g, SB, ART, &E));
	FAILS(EINVAL, "artifact ID must be exactly 64",
	      lz_dstore_participant_set_artifact(f->h, g, PL, "abc", &E));
	FAILS(EINVAL, "artifact ID is missing",
	      lz_dstore_participant_set_artifact(f->h, g, PL, NULL, &E));
	FAILS(ESTALE, "generation 1 prepared_lower: cannot record a held lease: no artifact",
	      lz_dstore_participant_set_lease_held(f->h, g, PL, &E));
	FAILS(EINVAL, "role state_anchor has no lease",
	      lz_dstore_participant_set_lease_held(f->h, g, SA, &E));
	assert_int_equal(phase(f, g, PL), LZ_DSTORE_PHASE_INTENT);
	OK(lz_dstore_participant_set_artifact(f->h, g, PL, ART, &E));
	struct lz_dstore_participant p = part(f, g, PL);
	FAILS(ESTALE, "artifact " ART " is already recorded (never replaced)",
	      lz_dstore_participant_set_artifact(f->h, g, PL, ART2, &E));
	FAILS(ESTALE, "already recorded", lz_dstore_participant_set_artifact(f->h, g, PL, ART, &E));
	OK(lz_dstore_participant_set_lease_held(f->h, g, PL, &E));
	FAILS(ESTALE, "the lease is already recorded as held",
	      lz_dstore_participant_set_lease_held(f->h, g, PL, &E));
	p.lease_held = true;
	assert_unchanged(f, &p);
}

static void test_lz_dstore_participant_commit_process__round_trip_u64_max(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref id = { .pidfs_dev = UINT64_MAX, .pidfs_ino = UINT64_MAX, .pid = UINT32_MAX,
				.start_time = UINT64_MAX };
	memcpy(id.boot_id, BOOT, 16);
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RS, &id, &E));
	struct lz_dstore_participant p = part(f, g, RS);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_ACQUIRING);
	assert_int_equal(p.process.phase, LZ_DSTORE_SLOT_STAGED);
	assert_true(pidref_eq(&p.process.id, &id));
	FAILS(ESTALE, "generation 1 runtime_supervisor: acquiring -> active refused: process slot "
		      "is staged, not committed",
	      lz_dstore_participant_activate(f->h, g, RS, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, RS, &id, &E));
	p = part(f, g, RS);
	assert_int_equal(p.process.phase, LZ_DSTORE_SLOT_COMMITTED);
	assert_true(p.process.id.pidfs_dev == UINT64_MAX && p.process.id.pidfs_ino == UINT64_MAX &&
		    p.process.id.start_time == UINT64_MAX && p.process.id.pid == UINT32_MAX);
	OK(lz_dstore_participant_activate(f->h, g, RS, &E));
	p.phase = LZ_DSTORE_PHASE_ACTIVE;
	assert_unchanged(f, &p);
	/* and values at the sign boundary */
	struct lz_pidref b = P(1);
	b.pidfs_dev = (uint64_t)INT64_MAX + 1;
	b.pidfs_ino = (uint64_t)INT64_MAX;
	b.start_time = 0;
	OK(lz_dstore_participant_intent(f->h, g, RC, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RC, &b, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, RC, &b, &E));
	p = part(f, g, RC);
	assert_true(pidref_eq(&p.process.id, &b));
}

/* staged -> committed only with the exact same identity, field by field. */
static void test_lz_dstore_participant_commit_process__different_identity_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref id = P(300);
	OK(lz_dstore_participant_intent(f->h, g, RC, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RC, &id, &E));
	struct lz_dstore_participant before = part(f, g, RC);
	for (int k = 0; k < 5; k++) {
		struct lz_pidref other = id;
		switch (k) {
		case 0:
			other.pidfs_dev++;
			break;
		case 1:
			other.pidfs_ino++;
			break;
		case 2:
			other.pid++;
			break;
		case 3:
			other.start_time++;
			break;
		case 4:
			other.boot_id[15] ^= 1;
			break;
		}
		if (k == 4) /* another boot is refused before the row is read */
			FAILS(ESTALE, "process identity is from another boot",
			      lz_dstore_participant_commit_process(f->h, g, RC, &other, &E));
		else
			FAILS(ESTALE,
			      "generation 1 attached_runsc: staged -> committed refused: identity",
			      lz_dstore_participant_commit_process(f->h, g, RC, &other, &E));
		assert_unchanged(f, &before);
	}
	OK(lz_dstore_participant_commit_process(f->h, g, RC, &id, &E));
}

static void test_lz_dstore_participant_stage_process__refusals(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref id = P(50), id2 = P(51), zero = P(0), foreign = P(52);
	foreign.boot_id[0] ^= 0xff;
	OK(lz_dstore_participant_intent(f->h, g, PL, &E));
	OK(lz_dstore_participant_intent(f->h, g, SB, &E));
	FAILS(EINVAL, "role prepared_lower has no process slot",
	      lz_dstore_participant_stage_process(f->h, g, PL, &id, &E));
	FAILS(EINVAL, "role state_anchor has no process slot",
	      lz_dstore_participant_commit_process(f->h, g, SA, &id, &E));
	FAILS(EINVAL, "process pid must not be 0",
	      lz_dstore_participant_stage_process(f->h, g, SB, &zero, &E));
	FAILS(EINVAL, "process identity is missing",
	      lz_dstore_participant_stage_process(f->h, g, SB, NULL, &E));
	FAILS(ESTALE, "process identity is from another boot",
	      lz_dstore_participant_stage_process(f->h, g, SB, &foreign, &E));
	FAILS(ESTALE, "generation 1 sandbox: process slot is unassigned; commit the process needs "
		      "staged",
	      lz_dstore_participant_commit_process(f->h, g, SB, &id, &E));
	assert_int_equal(phase(f, g, SB), LZ_DSTORE_PHASE_INTENT);
	OK(lz_dstore_participant_stage_process(f->h, g, SB, &id, &E));
	struct lz_dstore_participant staged = part(f, g, SB);
	FAILS(ESTALE, "process slot is staged; stage a process needs unassigned",
	      lz_dstore_participant_stage_process(f->h, g, SB, &id2, &E));
	FAILS(ESTALE, "process slot is staged",
	      lz_dstore_participant_stage_process(f->h, g, SB, &id, &E));
	assert_unchanged(f, &staged);
	OK(lz_dstore_participant_commit_process(f->h, g, SB, &id, &E));
	struct lz_dstore_participant committed = part(f, g, SB);
	FAILS(ESTALE, "process slot is committed; commit the process needs staged",
	      lz_dstore_participant_commit_process(f->h, g, SB, &id, &E));
	FAILS(ESTALE, "process slot is committed; stage a process needs unassigned",
	      lz_dstore_participant_stage_process(f->h, g, SB, &id2, &E));
	assert_unchanged(f, &committed);
	FAILS(ENOENT, "has no runtime_supervisor participant",
	      lz_dstore_participant_stage_process(f->h, g, RS, &id, &E));
	FAILS(ENOENT, "no generation 5", lz_dstore_participant_stage_process(f->h, 5, SB, &id, &E));
}

/* Spec 3.3: the direct existing-process edges are the HC itself and
 * Network RS; every other process role is an acquired child edge. */
static void test_lz_dstore_participant_enter_process__direct_edges_only(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref hc = P(1000);
	OK(lz_dstore_participant_intent(f->h, g, HC, &E));
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	OK(lz_dstore_participant_intent(f->h, g, CH, &E));
	static const enum lz_dstore_role children[] = { SB, RS, RC, CH };
	for (size_t i = 0; i < ARRAY_SIZE(children); i++)
		FAILS(EINVAL, "is an acquired child edge: stage its process first",
		      lz_dstore_participant_enter_process(f->h, g, children[i], &hc, &E));
	FAILS(EINVAL, "role prepared_lower has no process slot",
	      lz_dstore_participant_enter_process(f->h, g, PL, &hc, &E));
	OK(lz_dstore_participant_enter_process(f->h, g, HC, &hc, &E));
	struct lz_dstore_participant p = part(f, g, HC);
	assert_int_equal(p.process.phase, LZ_DSTORE_SLOT_COMMITTED);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_ACQUIRING);
	assert_true(pidref_eq(&p.process.id, &hc));
	struct lz_pidref other = P(1001);
	FAILS(ESTALE, "generation 1 host_coordinator: process slot is committed; enter a committed "
		      "process needs unassigned",
	      lz_dstore_participant_enter_process(f->h, g, HC, &other, &E));
	assert_unchanged(f, &p);
	OK(lz_dstore_participant_activate(f->h, g, HC, &E));
	assert_int_equal(phase(f, g, CH), LZ_DSTORE_PHASE_INTENT);

	/* network: the Runtime Supervisor's identity, just as immutable */
	struct lz_pidref rs = P(1002);
	OK(lz_dstore_participant_intent(f->h, g, NET, &E));
	OK(lz_dstore_participant_enter_process(f->h, g, NET, &rs, &E));
	struct lz_dstore_participant n = part(f, g, NET);
	assert_int_equal(n.phase, LZ_DSTORE_PHASE_ACQUIRING);
	assert_int_equal(n.process.phase, LZ_DSTORE_SLOT_COMMITTED);
	assert_true(pidref_eq(&n.process.id, &rs));
	assert_string_equal(n.network_ready, "");
	FAILS(ESTALE, "generation 1 network: process slot is committed; enter a committed process "
		      "needs unassigned",
	      lz_dstore_participant_enter_process(f->h, g, NET, &other, &E));
	FAILS(ESTALE, "network: process slot is committed",
	      lz_dstore_participant_enter_process(f->h, g, NET, &rs, &E));
	FAILS(ESTALE, "process slot is committed; stage a process needs unassigned",
	      lz_dstore_participant_stage_process(f->h, g, NET, &other, &E));
	FAILS(ESTALE, "process slot is committed; commit the process needs staged",
	      lz_dstore_participant_commit_process(f->h, g, NET, &rs, &E));
	struct lz_pidref zero = P(0), foreign = P(1003);
	foreign.boot_id[0] ^= 1;
	FAILS(EINVAL, "process pid must not be 0",
	      lz_dstore_participant_enter_process(f->h, g, NET, &zero, &E));
	FAILS(ESTALE, "process identity is from another boot",
	      lz_dstore_participant_enter_process(f->h, g, NET, &foreign, &E));
	assert_unchanged(f, &n);
	lz_dstore_participant_clear(&n);
	/* entering needs a row, like every other move */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g = gen_new(f);
	FAILS(ENOENT, "generation 2 has no network participant",
	      lz_dstore_participant_enter_process(f->h, g, NET, &rs, &E));
}

static void test_lz_dstore_participant_activate__requires_evidence(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	for (int r = PL; r <= LZ_DSTORE_ROLE_COUNT; r++) {
		OK(lz_dstore_participant_intent(f->h, g, r, &E));
		FAILS(ESTALE, "intent -> active refused: a bare intent never becomes active",
		      lz_dstore_participant_activate(f->h, g, r, &E));
		check_msg(lz_dstore_role_name(r));
		assert_int_equal(phase(f, g, r), LZ_DSTORE_PHASE_INTENT);
	}
	FAILS(ENOENT, "no generation 2", lz_dstore_participant_activate(f->h, 2, SB, &E));
	FAILS(EINVAL, "unknown participant role",
	      lz_dstore_participant_activate(f->h, g, (enum lz_dstore_role)99, &E));
	/* a staged slot does not satisfy an active role */
	struct lz_pidref id = P(7);
	OK(lz_dstore_participant_stage_process(f->h, g, SB, &id, &E));
	FAILS(ESTALE, "generation 1 sandbox: acquiring -> active refused: process slot is staged",
	      lz_dstore_participant_activate(f->h, g, SB, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, SB, &id, &E));
	OK(lz_dstore_participant_activate(f->h, g, SB, &E));
	FAILS(ESTALE, "active -> active refused (only from acquiring)",
	      lz_dstore_participant_activate(f->h, g, SB, &E));
	/* not while the generation is stopping, even with complete evidence */
	struct lz_pidref rs = P(8);
	OK(lz_dstore_participant_stage_process(f->h, g, RS, &rs, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, RS, &rs, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(ESTALE, "acquiring -> active refused: the generation is stopping",
	      lz_dstore_participant_activate(f->h, g, RS, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, RS, &E));
	FAILS(ESTALE, "release -> active refused", lz_dstore_participant_activate(f->h, g, RS, &E));
}

static void test_lz_dstore_participant_add_mount__state_anchor_flow(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_dstore_mount root = M("/", 10), home = M("/home/dev/.cargo", 20),
			       big = M("/opt/tools", UINT64_MAX - 2);
	OK(lz_dstore_participant_intent(f->h, g, SA, &E));
	FAILS(ESTALE, "generation 1 state_anchor: cannot record a mount: prepared_lower is absent, "
		      "not active",
	      lz_dstore_participant_add_mount(f->h, g, SA, &root, &E));
	OK(lz_dstore_participant_intent(f->h, g, PL, &E));
	OK(lz_dstore_participant_set_artifact(f->h, g, PL, ART, &E));
	FAILS(ESTALE, "prepared_lower is acquiring, not active (leased)",
	      lz_dstore_participant_add_mount(f->h, g, SA, &root, &E));
	OK(lz_dstore_participant_set_lease_held(f->h, g, PL, &E));
	OK(lz_dstore_participant_activate(f->h, g, PL, &E));
	assert_int_equal(phase(f, g, SA), LZ_DSTORE_PHASE_INTENT);

	OK(lz_dstore_participant_add_mount(f->h, g, SA, &root, &E));
	assert_int_equal(phase(f, g, SA), LZ_DSTORE_PHASE_ACQUIRING);
	OK(lz_dstore_participant_add_mount(f->h, g, SA, &home, &E));
	OK(lz_dstore_participant_add_mount(f->h, g, SA, &big, &E));
	struct lz_dstore_mount again = M("/home/dev/.cargo", 99);
	FAILS(ESTALE, "a mount at '/home/dev/.cargo' is already recorded (never replaced)",
	      lz_dstore_participant_add_mount(f->h, g, SA, &again, &E));
	OK(lz_dstore_participant_activate(f->h, g, SA, &E));
	struct lz_dstore_participant p = part(f, g, SA);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_ACTIVE);
	assert_int_equal(p.n_mounts, 3);
	assert_string_equal(p.mounts[0].path, "/"); /* ordered by path */
	assert_string_equal(p.mounts[1].path, "/home/dev/.cargo");
	assert_string_equal(p.mounts[2].path, "/opt/tools");
	assert_int_equal(p.mounts[1].mnt_id, 20);
	assert_int_equal(p.mounts[1].dev, 21);
	assert_int_equal(p.mounts[1].ino, 22);
	assert_true(p.mounts[2].mnt_id == UINT64_MAX - 2 && p.mounts[2].dev == UINT64_MAX - 1 &&
		    p.mounts[2].ino == UINT64_MAX);
	struct lz_dstore_mount late = M("/late", 5);
	FAILS(ESTALE, "cannot record a mount in phase active (only in intent or acquiring)",
	      lz_dstore_participant_add_mount(f->h, g, SA, &late, &E));
	assert_unchanged(f, &p);
	lz_dstore_participant_clear(&p);
	lz_dstore_participant_clear(&p); /* idempotent */
	lz_dstore_participant_clear(NULL);
}

static void test_lz_dstore_participant_add_mount__invalid_arguments_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	lower_active(f, g);
	OK(lz_dstore_participant_intent(f->h, g, SA, &E));
	struct lz_dstore_mount rel = M("relative/path", 1), empty = M("", 1), m = M("/", 1);
	FAILS(EINVAL, "mount path must be absolute",
	      lz_dstore_participant_add_mount(f->h, g, SA, &rel, &E));
	FAILS(EINVAL, "mount path must be absolute",
	      lz_dstore_participant_add_mount(f->h, g, SA, &empty, &E));
	FAILS(EINVAL, "mount identity is missing",
	      lz_dstore_participant_add_mount(f->h, g, SA, NULL, &E));
	FAILS(EINVAL, "role prepared_lower has no mounts",
	      lz_dstore_participant_add_mount(f->h, g, PL, &m, &E));
	struct lz_dstore_mount *full = malloc(sizeof(*full));
	assert_non_null(full);
	memset(full->path, 'a', sizeof(full->path)); /* no terminator within bounds */
	full->path[0] = '/';
	FAILS(EINVAL, "at most 4096 bytes", lz_dstore_participant_add_mount(f->h, g, SA, full, &E));
	full->path[LZ_DSTORE_PATH_MAX] = '\0'; /* exactly 4096 bytes: accepted */
	OK(lz_dstore_participant_add_mount(f->h, g, SA, full, &E));
	struct lz_dstore_participant p = part(f, g, SA);
	assert_int_equal(p.n_mounts, 1);
	assert_int_equal(strlen(p.mounts[0].path), LZ_DSTORE_PATH_MAX);
	lz_dstore_participant_clear(&p);
	free(full);
}

static void test_lz_dstore_participant_add_mount__bounded(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	lower_active(f, g);
	OK(lz_dstore_participant_intent(f->h, g, SA, &E));
	for (unsigned i = 0; i < LZ_DSTORE_MOUNTS_MAX; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/m%04u", i);
		struct lz_dstore_mount m = M(path, (uint64_t)i);
		OK(lz_dstore_participant_add_mount(f->h, g, SA, &m, &E));
	}
	struct lz_dstore_mount one_more = M("/z", 1);
	FAILS(EOVERFLOW, "already has 256 mounts",
	      lz_dstore_participant_add_mount(f->h, g, SA, &one_more, &E));
	struct lz_dstore_participant p = part(f, g, SA);
	assert_int_equal(p.n_mounts, LZ_DSTORE_MOUNTS_MAX);
	lz_dstore_participant_clear(&p);
}

/* Recorded evidence is never replaced or cleared except by clean. */
static void test_lz_dstore_participant__evidence_immutable(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	lower_active(f, g);
	anchor_active(f, g);
	proc_active(f, g, SB, 20);
	struct lz_dstore_participant pl = part(f, g, PL), sa = part(f, g, SA), sb = part(f, g, SB);
	struct lz_pidref other = P(21);
	struct lz_dstore_mount m = M("/new", 3);
	for (int pass = 0; pass < 2; pass++) {
		/* active, then release: nothing can be added or replaced */
		FAILS(ESTALE, "prepared_lower: cannot record an artifact in phase",
		      lz_dstore_participant_set_artifact(f->h, g, PL, ART2, &E));
		FAILS(ESTALE, "cannot record a held lease in phase",
		      lz_dstore_participant_set_lease_held(f->h, g, PL, &E));
		FAILS(ESTALE, "state_anchor: cannot record a mount in phase",
		      lz_dstore_participant_add_mount(f->h, g, SA, &m, &E));
		FAILS(ESTALE, "sandbox: cannot stage a process in phase",
		      lz_dstore_participant_stage_process(f->h, g, SB, &other, &E));
		FAILS(ESTALE, "cannot commit the process in phase",
		      lz_dstore_participant_commit_process(f->h, g, SB, &other, &E));
		check_msg(pass == 0 ? "in phase active" : "in phase release");
		assert_unchanged(f, &pl);
		assert_unchanged(f, &sa);
		assert_unchanged(f, &sb);
		if (pass == 0) {
			OK(lz_dstore_participant_release_intent(f->h, g, SB, &E));
			OK(lz_dstore_participant_release_intent(f->h, g, SA, &E));
			sb.phase = sa.phase = LZ_DSTORE_PHASE_RELEASE;
			OK(lz_dstore_anchor_unmounted(f->h, g, &E));
			/* step 3 cleaned the anchor; re-create the check on the lower only */
			pl.phase = LZ_DSTORE_PHASE_RELEASE;
			lz_dstore_participant_clear(&sa);
			sa = part(f, g, SA);
			assert_int_equal(sa.phase, LZ_DSTORE_PHASE_CLEAN);
		}
	}
	lz_dstore_participant_clear(&pl);
	lz_dstore_participant_clear(&sa);
	lz_dstore_participant_clear(&sb);
}

static void test_lz_dstore_participant_release_intent__keeps_evidence(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref id = P(60);
	/* partial: staged only */
	OK(lz_dstore_participant_intent(f->h, g, RC, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RC, &id, &E));
	struct lz_dstore_participant p = part(f, g, RC);
	OK(lz_dstore_participant_release_intent(f->h, g, RC, &E));
	p.phase = LZ_DSTORE_PHASE_RELEASE;
	assert_unchanged(f, &p); /* still staged: exact cleanup authority */
	FAILS(ESTALE, "generation 1 attached_runsc: release -> release refused (only from intent, "
		      "acquiring or active)",
	      lz_dstore_participant_release_intent(f->h, g, RC, &E));
	FAILS(ESTALE, "release -> active", lz_dstore_participant_activate(f->h, g, RC, &E));
	/* active */
	proc_active(f, g, RS, 61);
	p = part(f, g, RS);
	OK(lz_dstore_participant_release_intent(f->h, g, RS, &E));
	p.phase = LZ_DSTORE_PHASE_RELEASE;
	assert_unchanged(f, &p);
	/* bare intent */
	OK(lz_dstore_participant_intent(f->h, g, SB, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, SB, &E));
	assert_int_equal(phase(f, g, SB), LZ_DSTORE_PHASE_RELEASE);
	/* allowed in a failed generation (recovery) */
	OK(lz_dstore_participant_intent(f->h, g, HC, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	OK(lz_dstore_participant_release_intent(f->h, g, HC, &E));
	FAILS(ENOENT, "has no prepared_lower participant",
	      lz_dstore_participant_release_intent(f->h, g, PL, &E));
}

static void test_lz_dstore_participant_clean__semantics(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref id = P(70);
	/* acquiring and active must record release intent first */
	OK(lz_dstore_participant_intent(f->h, g, RC, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RC, &id, &E));
	FAILS(ESTALE, "generation 1 attached_runsc: acquiring -> clean refused (only from release "
		      "or a bare intent)",
	      lz_dstore_participant_clean(f->h, g, RC, &E));
	OK(lz_dstore_participant_commit_process(f->h, g, RC, &id, &E));
	OK(lz_dstore_participant_activate(f->h, g, RC, &E));
	FAILS(ESTALE, "active -> clean refused", lz_dstore_participant_clean(f->h, g, RC, &E));
	assert_int_equal(phase(f, g, RC), LZ_DSTORE_PHASE_ACTIVE);
	OK(lz_dstore_participant_release_intent(f->h, g, RC, &E));
	OK(lz_dstore_participant_clean(f->h, g, RC, &E));
	struct lz_dstore_participant p = part(f, g, RC);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_CLEAN); /* the row stays */
	assert_int_equal(p.process.phase, LZ_DSTORE_SLOT_UNASSIGNED);
	assert_int_equal(p.process.id.pid, 0);
	assert_int_equal(p.process.id.pidfs_ino, 0);

	/* clean is terminal */
	FAILS(ESTALE, "clean -> clean refused", lz_dstore_participant_clean(f->h, g, RC, &E));
	FAILS(ESTALE, "clean -> release refused",
	      lz_dstore_participant_release_intent(f->h, g, RC, &E));
	FAILS(ESTALE, "clean -> active refused", lz_dstore_participant_activate(f->h, g, RC, &E));
	FAILS(ESTALE, "cannot stage a process in phase clean",
	      lz_dstore_participant_stage_process(f->h, g, RC, &id, &E));
	FAILS(ESTALE, "absent -> intent refused: already clean",
	      lz_dstore_participant_intent(f->h, g, RC, &E));
	assert_unchanged(f, &p);

	/* a bare intent may become clean directly */
	OK(lz_dstore_participant_intent(f->h, g, SB, &E));
	OK(lz_dstore_participant_clean(f->h, g, SB, &E));
	assert_int_equal(phase(f, g, SB), LZ_DSTORE_PHASE_CLEAN);

	/* clean clears mounts, artifact and lease too */
	lower_active(f, g);
	anchor_active(f, g);
	OK(lz_dstore_participant_release_intent(f->h, g, SA, &E));
	OK(lz_dstore_participant_clean(f->h, g, SA, &E));
	p = part(f, g, SA);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_CLEAN);
	assert_int_equal(p.n_mounts, 0);
	assert_null(p.mounts);
	OK(lz_dstore_participant_release_intent(f->h, g, PL, &E));
	OK(lz_dstore_participant_clean(f->h, g, PL, &E));
	p = part(f, g, PL);
	assert_false(p.has_artifact);
	assert_false(p.lease_held);
	assert_int_equal(p.phase, LZ_DSTORE_PHASE_CLEAN);
}

/* spec 3.6: a mounted State Anchor never becomes unleased. */
static void test_lz_dstore_participant_release_intent__lower_waits_for_clean_anchor(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	lower_active(f, g);
	OK(lz_dstore_participant_intent(f->h, g, SA, &E));
	FAILS(ESTALE, "generation 1 prepared_lower: cannot record release intent: state_anchor is "
		      "intent, not clean",
	      lz_dstore_participant_release_intent(f->h, g, PL, &E));
	struct lz_dstore_mount m = M("/", 1);
	OK(lz_dstore_participant_add_mount(f->h, g, SA, &m, &E));
	OK(lz_dstore_participant_activate(f->h, g, SA, &E));
	FAILS(ESTALE, "state_anchor is active, not clean",
	      lz_dstore_participant_release_intent(f->h, g, PL, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, SA, &E));
	FAILS(ESTALE, "state_anchor is release, not clean",
	      lz_dstore_participant_release_intent(f->h, g, PL, &E));
	assert_int_equal(phase(f, g, PL), LZ_DSTORE_PHASE_ACTIVE);
	OK(lz_dstore_participant_clean(f->h, g, SA, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, PL, &E));

	/* clean of the lower likewise */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	uint64_t g2 = gen_new(f);
	OK(lz_dstore_participant_intent(f->h, g2, PL, &E));
	OK(lz_dstore_participant_intent(f->h, g2, SA, &E));
	FAILS(ESTALE, "prepared_lower: cannot become clean: state_anchor is intent",
	      lz_dstore_participant_clean(f->h, g2, PL, &E));
	OK(lz_dstore_participant_clean(f->h, g2, SA, &E));
	OK(lz_dstore_participant_clean(f->h, g2, PL, &E));
}

static void test_lz_dstore_anchor_unmounted__atomic(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	lower_active(f, g);
	anchor_active(f, g);
	struct lz_dstore_participant pl = part(f, g, PL), sa = part(f, g, SA);
	FAILS(ESTALE, "generation 1 state_anchor: active -> clean refused: unmount completion needs "
		      "release intent",
	      lz_dstore_anchor_unmounted(f->h, g, &E));
	assert_unchanged(f, &pl);
	assert_unchanged(f, &sa);

	/* a refusal on the lower's side rolls the anchor's clean back */
	OK(lz_dstore_participant_release_intent(f->h, g, SA, &E));
	OK(lz_dstore_participant_clean(f->h, g, SA, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, PL, &E));
	uint64_t g2 = 0;
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	g2 = gen_new(f);
	lower_active(f, g2);
	anchor_active(f, g2);
	OK(lz_dstore_participant_release_intent(f->h, g2, SA, &E));
	raw_exec(f, "UPDATE participants SET phase = 'release' WHERE generation = 2 AND "
		    "role = 'prepared_lower'");
	struct lz_dstore_participant sa2 = part(f, g2, SA), pl2 = part(f, g2, PL);
	FAILS(ESTALE, "generation 2 prepared_lower: release -> release refused",
	      lz_dstore_anchor_unmounted(f->h, g2, &E));
	assert_unchanged(f, &sa2); /* still release, mount still recorded */
	assert_int_equal(sa2.n_mounts, 1);
	assert_unchanged(f, &pl2);
	raw_exec(f, "UPDATE participants SET phase = 'active' WHERE generation = 2 AND "
		    "role = 'prepared_lower'");

	OK(lz_dstore_anchor_unmounted(f->h, g2, &E));
	struct lz_dstore_participant a = part(f, g2, SA), l = part(f, g2, PL);
	assert_int_equal(a.phase, LZ_DSTORE_PHASE_CLEAN);
	assert_int_equal(a.n_mounts, 0);
	assert_int_equal(l.phase, LZ_DSTORE_PHASE_RELEASE);
	assert_string_equal(l.artifact_id, ART); /* lease still held until the catalog removes it */
	assert_true(l.lease_held);
	OK(lz_dstore_participant_clean(f->h, g2, PL, &E));
	FAILS(ENOENT, "no generation 3", lz_dstore_anchor_unmounted(f->h, 3, &E));
	lz_dstore_participant_clear(&sa);
	lz_dstore_participant_clear(&sa2);
	lz_dstore_participant_clear(&a);
}

static void test_lz_dstore_participant__failed_generation_acquires_nothing(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref id = P(90);
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	OK(lz_dstore_participant_intent(f->h, g, PL, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	/* teardown may still record a child it already spawned */
	OK(lz_dstore_participant_stage_process(f->h, g, RS, &id, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	FAILS(ESTALE, "generation 1 runtime_supervisor: cannot commit the process: the generation "
		      "is failed",
	      lz_dstore_participant_commit_process(f->h, g, RS, &id, &E));
	FAILS(ESTALE, "cannot record an artifact: the generation is failed",
	      lz_dstore_participant_set_artifact(f->h, g, PL, ART, &E));
	OK(lz_dstore_participant_release_intent(f->h, g, RS, &E));
	OK(lz_dstore_participant_clean(f->h, g, RS, &E));
	OK(lz_dstore_participant_clean(f->h, g, PL, &E));
}

static void test_lz_dstore_participant_get__unknown_untouched(void **state)
{
	struct fx *f = *state;
	struct lz_dstore_participant p;
	memset(&p, 0x5a, sizeof(p));
	FAILS(ENOENT, "no generation 1", lz_dstore_participant_get(f->h, 1, SB, &p, &E));
	uint64_t g = gen_new(f);
	FAILS(ENOENT, "generation 1 has no sandbox participant",
	      lz_dstore_participant_get(f->h, g, SB, &p, &E));
	FAILS(EINVAL, "unknown participant role",
	      lz_dstore_participant_get(f->h, g, (enum lz_dstore_role)-1, &p, &E));
	unsigned char want[sizeof(p)];
	memset(want, 0x5a, sizeof(want));
	assert_memory_equal(&p, want, sizeof(p));
}

/* ---- sessions ----------------------------------------------------------- */

static void test_lz_dstore_session_begin__needs_published_generation(void **state)
{
	struct fx *f = *state;
	char sid[LZ_DSTORE_ID_HEX_LEN + 1] = "untouched";
	FAILS(ENOENT, "no generation 1", lz_dstore_session_begin(f->h, 1, sid, &E));
	uint64_t g = gen_new(f);
	FAILS(ESTALE, "generation 1 is starting: sessions begin only once published",
	      lz_dstore_session_begin(f->h, g, sid, &E));
	assert_string_equal(sid, "untouched");
	FAILS(EINVAL, "session ID buffer is missing", lz_dstore_session_begin(f->h, g, NULL, &E));
	/* an active network alone admits no session: publication does */
	network_active(f, g);
	FAILS(ESTALE, "generation 1 is starting", lz_dstore_session_begin(f->h, g, sid, &E));
	set_state(f, g, LZ_DSTORE_GEN_PUBLISHED);
	char a[LZ_DSTORE_ID_HEX_LEN + 1], b[LZ_DSTORE_ID_HEX_LEN + 1];
	int64_t t0 = lz_sqlstore_now();
	OK(lz_dstore_session_begin(f->h, g, a, &E));
	OK(lz_dstore_session_begin(f->h, g, b, &E));
	assert_int_equal(strlen(a), LZ_DSTORE_ID_HEX_LEN);
	assert_int_equal(strspn(a, "0123456789abcdef"), LZ_DSTORE_ID_HEX_LEN);
	assert_string_not_equal(a, b);
	struct lz_dstore_session x = sess(f, g, a);
	assert_int_equal(x.state, LZ_DSTORE_SESSION_INTENT);
	assert_int_equal(x.exec.phase, LZ_DSTORE_SLOT_UNASSIGNED);
	assert_false(x.has_guest);
	assert_true(x.created >= t0 && x.created <= lz_sqlstore_now());
	assert_int_equal(open_sessions(f, g), 2);
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(ESTALE, "generation 1 is stopping", lz_dstore_session_begin(f->h, g, sid, &E));
}

/* Spec 3.4 acquisition and release. */
static void test_lz_dstore_session_commit_running__flow(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	char sid[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, sid, &E));
	struct lz_pidref exec = P(400);
	OK(lz_dstore_session_stage_exec(f->h, g, sid, &exec, &E));
	struct lz_dstore_session x = sess(f, g, sid);
	assert_int_equal(x.state, LZ_DSTORE_SESSION_INTENT);
	assert_int_equal(x.exec.phase, LZ_DSTORE_SLOT_STAGED);
	assert_true(pidref_eq(&x.exec.id, &exec));
	struct lz_dstore_guest guest = { .leader_pid = UINT64_MAX, .leader_start_time = UINT64_MAX,
					 .pgid = (uint64_t)INT64_MAX + 1 };
	OK(lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));
	x = sess(f, g, sid);
	assert_int_equal(x.state, LZ_DSTORE_SESSION_RUNNING);
	assert_int_equal(x.exec.phase, LZ_DSTORE_SLOT_COMMITTED);
	assert_true(pidref_eq(&x.exec.id, &exec));
	assert_true(x.has_guest);
	assert_true(x.guest.leader_pid == UINT64_MAX && x.guest.leader_start_time == UINT64_MAX &&
		    x.guest.pgid == (uint64_t)INT64_MAX + 1);
	assert_int_equal(open_sessions(f, g), 1);

	OK(lz_dstore_session_release(f->h, g, sid, &E));
	struct lz_dstore_session y = sess(f, g, sid);
	assert_int_equal(y.state, LZ_DSTORE_SESSION_RELEASE);
	assert_int_equal(y.exec.phase, LZ_DSTORE_SLOT_COMMITTED); /* identities kept */
	assert_true(pidref_eq(&y.exec.id, &exec));
	assert_true(y.has_guest && y.guest.pgid == x.guest.pgid);
	assert_int_equal(open_sessions(f, g), 1);

	OK(lz_dstore_session_clean(f->h, g, sid, &E));
	y = sess(f, g, sid);
	assert_int_equal(y.state, LZ_DSTORE_SESSION_CLEAN);
	assert_int_equal(y.exec.phase, LZ_DSTORE_SLOT_UNASSIGNED);
	assert_int_equal(y.exec.id.pid, 0);
	assert_false(y.has_guest);
	assert_int_equal(y.guest.leader_pid, 0);
	assert_int_equal(open_sessions(f, g), 0);
}

static void test_lz_dstore_session_commit_running__refusals(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	publish(f, g); /* no host_coordinator yet */
	char sid[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, sid, &E));
	struct lz_pidref exec = P(500), other = P(501);
	struct lz_dstore_guest guest = { .leader_pid = 2, .leader_start_time = 3, .pgid = 2 };
	struct lz_dstore_guest zero_pgid = { .leader_pid = 2, .leader_start_time = 3, .pgid = 0 };
	char prefix[128];
	snprintf(prefix, sizeof(prefix), "generation 1 session %s: ", sid);

	FAILS(ESTALE, "intent -> running refused: exec slot is unassigned, not staged",
	      lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));
	check_msg(prefix);
	OK(lz_dstore_session_stage_exec(f->h, g, sid, &exec, &E));
	struct lz_dstore_session before = sess(f, g, sid);
	FAILS(ESTALE, "staged -> committed refused: exec identity (pid 501) is not the staged one",
	      lz_dstore_session_commit_running(f->h, g, sid, &other, &guest, &E));
	FAILS(ESTALE, "host_coordinator is absent, not active",
	      lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));
	OK(lz_dstore_participant_intent(f->h, g, HC, &E));
	FAILS(ESTALE, "host_coordinator is intent, not active",
	      lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));
	struct lz_pidref hc = P(10);
	OK(lz_dstore_participant_enter_process(f->h, g, HC, &hc, &E));
	OK(lz_dstore_participant_activate(f->h, g, HC, &E));
	FAILS(EINVAL, "must not be 0",
	      lz_dstore_session_commit_running(f->h, g, sid, &exec, &zero_pgid, &E));
	FAILS(EINVAL, "exec client identity is missing",
	      lz_dstore_session_commit_running(f->h, g, sid, NULL, &guest, &E));
	struct lz_dstore_session now = sess(f, g, sid);
	assert_int_equal(now.state, before.state);
	assert_int_equal(now.exec.phase, LZ_DSTORE_SLOT_STAGED);
	assert_true(pidref_eq(&now.exec.id, &exec));
	assert_false(now.has_guest);

	OK(lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));
	FAILS(ESTALE, "running -> running refused (only from intent)",
	      lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));
	FAILS(ENOENT, "generation 1 has no session " H32("0"),
	      lz_dstore_session_commit_running(f->h, g, H32("0"), &exec, &guest, &E));
	FAILS(EINVAL, "session ID must be exactly 32",
	      lz_dstore_session_commit_running(f->h, g, "xyz", &exec, &guest, &E));

	/* not once the generation stops serving */
	char s2[LZ_DSTORE_ID_HEX_LEN + 1];
	struct lz_pidref e2 = P(502);
	OK(lz_dstore_session_begin(f->h, g, s2, &E));
	OK(lz_dstore_session_stage_exec(f->h, g, s2, &e2, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	FAILS(ESTALE, "intent -> running refused: the generation is stopping",
	      lz_dstore_session_commit_running(f->h, g, s2, &e2, &guest, &E));
	/* sessions are scoped to their generation */
	FAILS(ENOENT, "no generation 2",
	      lz_dstore_session_commit_running(f->h, 2, s2, &e2, &guest, &E));
}

static void test_lz_dstore_session_stage_exec__refusals(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	char sid[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, sid, &E));
	struct lz_pidref exec = P(600), other = P(601), zero = P(0), foreign = P(602);
	foreign.boot_id[3] ^= 0x10;
	FAILS(EINVAL, "exec client pid must not be 0",
	      lz_dstore_session_stage_exec(f->h, g, sid, &zero, &E));
	FAILS(ESTALE, "exec client identity is from another boot",
	      lz_dstore_session_stage_exec(f->h, g, sid, &foreign, &E));
	FAILS(EINVAL, "session ID is missing", lz_dstore_session_stage_exec(f->h, g, NULL, &exec, &E));
	FAILS(EINVAL, "session ID must be exactly 32 lowercase hex digits",
	      lz_dstore_session_stage_exec(f->h, g, H32("A"), &exec, &E));
	FAILS(ENOENT, "has no session", lz_dstore_session_stage_exec(f->h, g, H32("1"), &exec, &E));
	OK(lz_dstore_session_stage_exec(f->h, g, sid, &exec, &E));
	FAILS(ESTALE, "exec slot is staged; staging needs unassigned",
	      lz_dstore_session_stage_exec(f->h, g, sid, &other, &E));
	struct lz_dstore_session x = sess(f, g, sid);
	assert_true(pidref_eq(&x.exec.id, &exec));
	struct lz_dstore_guest guest = { .leader_pid = 2, .leader_start_time = 3, .pgid = 2 };
	OK(lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));
	FAILS(ESTALE, "cannot stage the exec client in state running (only in intent)",
	      lz_dstore_session_stage_exec(f->h, g, sid, &other, &E));
	/* staging of an already spawned exec client is still recorded while
	 * stopping, never once the generation is failed */
	char s2[LZ_DSTORE_ID_HEX_LEN + 1], s3[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, s2, &E));
	OK(lz_dstore_session_begin(f->h, g, s3, &E));
	set_state(f, g, LZ_DSTORE_GEN_STOPPING);
	OK(lz_dstore_session_stage_exec(f->h, g, s2, &other, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	FAILS(ESTALE, "cannot stage the exec client: the generation is failed",
	      lz_dstore_session_stage_exec(f->h, g, s3, &other, &E));
}

static void test_lz_dstore_session_clean__semantics(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	char bare[LZ_DSTORE_ID_HEX_LEN + 1], staged[LZ_DSTORE_ID_HEX_LEN + 1],
		run[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, bare, &E));
	OK(lz_dstore_session_begin(f->h, g, staged, &E));
	OK(lz_dstore_session_begin(f->h, g, run, &E));
	struct lz_pidref e1 = P(700), e2 = P(701);
	struct lz_dstore_guest guest = { .leader_pid = 2, .leader_start_time = 3, .pgid = 2 };
	OK(lz_dstore_session_stage_exec(f->h, g, staged, &e1, &E));
	OK(lz_dstore_session_stage_exec(f->h, g, run, &e2, &E));
	OK(lz_dstore_session_commit_running(f->h, g, run, &e2, &guest, &E));
	assert_int_equal(open_sessions(f, g), 3);

	/* bare intent -> clean */
	OK(lz_dstore_session_clean(f->h, g, bare, &E));
	assert_int_equal(sess(f, g, bare).state, LZ_DSTORE_SESSION_CLEAN);
	FAILS(ESTALE, "clean -> clean refused", lz_dstore_session_clean(f->h, g, bare, &E));
	FAILS(ESTALE, "clean -> release refused (only from intent or running)",
	      lz_dstore_session_release(f->h, g, bare, &E));
	FAILS(ESTALE, "cannot stage the exec client in state clean",
	      lz_dstore_session_stage_exec(f->h, g, bare, &e1, &E));
	FAILS(ESTALE, "clean -> running refused",
	      lz_dstore_session_commit_running(f->h, g, bare, &e1, &guest, &E));

	/* partial intent and running must record release intent first */
	FAILS(ESTALE, "intent -> clean refused: the exec slot is staged; record release intent first",
	      lz_dstore_session_clean(f->h, g, staged, &E));
	FAILS(ESTALE, "running -> clean refused", lz_dstore_session_clean(f->h, g, run, &E));
	assert_int_equal(sess(f, g, run).state, LZ_DSTORE_SESSION_RUNNING);
	OK(lz_dstore_session_release(f->h, g, staged, &E));
	struct lz_dstore_session x = sess(f, g, staged);
	assert_int_equal(x.state, LZ_DSTORE_SESSION_RELEASE);
	assert_int_equal(x.exec.phase, LZ_DSTORE_SLOT_STAGED); /* exact cleanup authority */
	FAILS(ESTALE, "release -> release refused", lz_dstore_session_release(f->h, g, staged, &E));
	FAILS(ESTALE, "release -> running refused",
	      lz_dstore_session_commit_running(f->h, g, staged, &e1, &guest, &E));
	OK(lz_dstore_session_clean(f->h, g, staged, &E));
	OK(lz_dstore_session_release(f->h, g, run, &E));
	OK(lz_dstore_session_clean(f->h, g, run, &E));
	assert_int_equal(open_sessions(f, g), 0);
}

static void test_lz_dstore_session_list__order_and_scope(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	char ids[3][LZ_DSTORE_ID_HEX_LEN + 1];
	for (int i = 0; i < 3; i++)
		OK(lz_dstore_session_begin(f->h, g, ids[i], &E));
	OK(lz_dstore_session_release(f->h, g, ids[1], &E));
	struct lz_dstore_session *v = NULL;
	size_t n = 0;
	OK(lz_dstore_session_list(f->h, g, &v, &n, &E));
	assert_int_equal(n, 3);
	/* same second: ordered by ID then; every ID is there once */
	for (int i = 0; i < 3; i++) {
		int seen = 0;
		for (size_t k = 0; k < n; k++)
			seen += strcmp(v[k].session_id, ids[i]) == 0;
		assert_int_equal(seen, 1);
		if (i > 0)
			assert_true(v[i - 1].created < v[i].created ||
				    strcmp(v[i - 1].session_id, v[i].session_id) < 0);
	}
	free(v);
	assert_int_equal(open_sessions(f, g), 3);

	/* another generation sees none of them */
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	uint64_t g2 = published(f);
	OK(lz_dstore_session_list(f->h, g2, &v, &n, &E));
	assert_int_equal(n, 0);
	assert_null(v);
	struct lz_dstore_session x;
	FAILS(ENOENT, "generation 2 has no session", lz_dstore_session_get(f->h, g2, ids[0], &x, &E));
	assert_int_equal(open_sessions(f, g2), 0);

	v = (void *)1;
	n = 77;
	uint64_t c = 77;
	FAILS(ENOENT, "no generation 9", lz_dstore_session_list(f->h, 9, &v, &n, &E));
	FAILS(ENOENT, "no generation 9", lz_dstore_session_count_open(f->h, 9, &c, &E));
	assert_ptr_equal(v, (void *)1);
	assert_int_equal(n, 77);
	assert_int_equal(c, 77);
}

/* ---- persistence and handle --------------------------------------------- */

static void test_lz_dstore_open__reopen_shows_same_rows(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	lower_active(f, g);
	anchor_active(f, g);
	struct lz_pidref rs = P(800);
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RS, &rs, &E));
	char sid[LZ_DSTORE_ID_HEX_LEN + 1];
	OK(lz_dstore_session_begin(f->h, g, sid, &E));
	struct lz_pidref exec = P(801);
	struct lz_dstore_guest guest = { .leader_pid = 5, .leader_start_time = 6, .pgid = 5 };
	OK(lz_dstore_session_stage_exec(f->h, g, sid, &exec, &E));
	OK(lz_dstore_session_commit_running(f->h, g, sid, &exec, &guest, &E));

	struct lz_dstore_generation gb = gen_get(f, g);
	struct lz_dstore_participant before[LZ_DSTORE_ROLE_COUNT + 1];
	const enum lz_dstore_role roles[] = { PL, SA, RS, HC, CH, NET };
	for (size_t i = 0; i < ARRAY_SIZE(roles); i++)
		before[roles[i]] = part(f, g, roles[i]);
	struct lz_dstore_session sb = sess(f, g, sid);

	reopen(f);
	struct lz_dstore_generation ga = gen_get(f, g);
	assert_int_equal(ga.generation, gb.generation);
	assert_string_equal(ga.domain_id, gb.domain_id);
	assert_string_equal(ga.fingerprint, gb.fingerprint);
	assert_int_equal(ga.state, gb.state);
	assert_int_equal(ga.created, gb.created);
	assert_memory_equal(ga.boot_id, gb.boot_id, 16);
	assert_string_equal(ga.coordinator_id, gb.coordinator_id);
	assert_string_equal(ga.sidecar_id, gb.sidecar_id);
	assert_string_equal(ga.sandbox_id, gb.sandbox_id);
	assert_string_equal(before[NET].network_ready, NR);
	for (size_t i = 0; i < ARRAY_SIZE(roles); i++) {
		assert_unchanged(f, &before[roles[i]]);
		lz_dstore_participant_clear(&before[roles[i]]);
	}
	struct lz_dstore_session sa = sess(f, g, sid);
	assert_int_equal(sa.state, sb.state);
	assert_int_equal(sa.created, sb.created);
	assert_int_equal(sa.exec.phase, sb.exec.phase);
	assert_true(pidref_eq(&sa.exec.id, &sb.exec.id));
	assert_true(sa.has_guest && sa.guest.leader_pid == 5 && sa.guest.leader_start_time == 6 &&
		    sa.guest.pgid == 5);
	struct lz_dstore_participant sbx;
	FAILS(ENOENT, NULL, lz_dstore_participant_get(f->h, g, SB, &sbx, &E));
	/* and the rules hold across the reopen */
	OK(lz_dstore_participant_commit_process(f->h, g, RS, &rs, &E));
	uint64_t keep = 77;
	FAILS(EBUSY, "still published", lz_dstore_generation_begin(f->h, DOM, FP, &keep, &E));
}

static void test_lz_dstore_close__null_and_null_handle(void **state)
{
	struct fx *f = *state;
	lz_dstore_close(NULL);
	struct lz_pidref id = P(1);
	uint64_t n = 77;
	FAILS(EINVAL, "no Domain Store handle", lz_dstore_participant_intent(NULL, 1, SB, &E));
	FAILS(EINVAL, "no Domain Store handle",
	      lz_dstore_participant_stage_process(NULL, 1, SB, &id, &E));
	FAILS(EINVAL, "no Domain Store handle", lz_dstore_session_count_open(NULL, 1, &n, &E));
	assert_int_equal(n, 77);
	/* a NULL error object is allowed */
	assert_int_equal(lz_dstore_participant_intent(f->h, 1, SB, NULL), -ENOENT);
	uint64_t g = 0;
	assert_int_equal(lz_dstore_generation_begin(f->h, DOM, FP, &g, NULL), 0);
	assert_int_equal(lz_dstore_participant_activate(f->h, g, SB, NULL), -ENOENT);
	assert_int_equal(lz_dstore_participant_intent(f->h, g, SB, NULL), 0);
	assert_int_equal(lz_dstore_participant_activate(f->h, g, SB, NULL), -ESTALE);
	assert_int_equal(lz_dstore_participant_intent(f->h, g, (enum lz_dstore_role)0, NULL),
			 -EINVAL);
	assert_false(exists(f, LZ_DSTORE_DB_NAME "-journal"));
}

static void test_lz_dstore_role_name__names(void **state)
{
	(void)state;
	assert_string_equal(lz_dstore_role_name(LZ_DSTORE_ROLE_PREPARED_LOWER), "prepared_lower");
	assert_string_equal(lz_dstore_role_name(LZ_DSTORE_ROLE_HOST_COORDINATOR), "host_coordinator");
	assert_null(lz_dstore_role_name((enum lz_dstore_role)0));
	assert_string_equal(lz_dstore_role_name(LZ_DSTORE_ROLE_CONNECTIVITY_HELPER),
			    "connectivity_helper");
	assert_string_equal(lz_dstore_role_name(LZ_DSTORE_ROLE_NETWORK), "network");
	assert_null(lz_dstore_role_name((enum lz_dstore_role)(LZ_DSTORE_ROLE_COUNT + 1)));
	assert_string_equal(lz_dstore_phase_name(LZ_DSTORE_PHASE_ACQUIRING), "acquiring");
	assert_null(lz_dstore_phase_name((enum lz_dstore_phase)6));
	assert_string_equal(lz_dstore_gen_state_name(LZ_DSTORE_GEN_FAILED), "failed");
	assert_null(lz_dstore_gen_state_name((enum lz_dstore_gen_state)-1));
	assert_string_equal(lz_dstore_session_state_name(LZ_DSTORE_SESSION_RUNNING), "running");
	assert_string_equal(lz_dstore_slot_name(LZ_DSTORE_SLOT_UNASSIGNED), "unassigned");
	assert_string_equal(lz_dstore_slot_name(LZ_DSTORE_SLOT_COMMITTED), "committed");
	assert_null(lz_dstore_slot_name((enum lz_dstore_slot)3));
}

/* ---- batches ------------------------------------------------------------ */

static void test_lz_dstore_batch__commits_together_and_a_refusal_changes_nothing(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	OK(lz_dstore_batch_begin(f->h, &E));
	assert_true(lz_dstore_in_batch(f->h));
	OK(lz_dstore_participant_intent(f->h, g, HC, &E));
	/* A refused move inside the batch undoes only itself. */
	FAILS(ESTALE, "intent -> active", lz_dstore_participant_activate(f->h, g, HC, &E));
	OK(lz_dstore_participant_intent(f->h, g, SB, &E));
	FAILS(EBUSY, "already open", lz_dstore_batch_begin(f->h, &E));
	OK(lz_dstore_batch_end(f->h, &E));
	assert_false(lz_dstore_in_batch(f->h));
	FAILS(EPROTO, "no batch is open", lz_dstore_batch_end(f->h, &E));
	reopen(f);
	assert_int_equal(phase(f, g, HC), LZ_DSTORE_PHASE_INTENT);
	assert_int_equal(phase(f, g, SB), LZ_DSTORE_PHASE_INTENT);
}

/* A coordinator lost inside a batch leaves the document as before it. */
static void test_lz_dstore_batch__closed_inside_rolls_back(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	OK(lz_dstore_participant_intent(f->h, g, HC, &E));
	OK(lz_dstore_batch_begin(f->h, &E));
	OK(lz_dstore_participant_intent(f->h, g, SB, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	reopen(f);
	assert_int_equal(phase(f, g, HC), LZ_DSTORE_PHASE_INTENT);
	struct lz_dstore_participant p;
	FAILS(ENOENT, NULL, lz_dstore_participant_get(f->h, g, SB, &p, &E));
	assert_int_equal(gen_get(f, g).state, LZ_DSTORE_GEN_STARTING);
}

/* Namespace and staging durable together or not at all
 * (coordinator.c stage_with_namespace): a refused staging aborts the
 * batch, and the namespace can be recorded on the retry. */
static void test_lz_dstore_batch_abort__rolls_back_the_calls_that_succeeded(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_pidref other_boot = P(7), id = P(7);
	other_boot.boot_id[0] ^= 0xff;
	struct lz_dstore_ns ns = { .id = 3, .inum = 4 };
	struct lz_dstore_namespaces got;
	OK(lz_dstore_participant_intent(f->h, g, RS, &E));
	FAILS(EPROTO, "no batch is open", lz_dstore_batch_abort(f->h, &E));
	OK(lz_dstore_batch_begin(f->h, &E));
	OK(lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &ns, &E));
	FAILS(ESTALE, "another boot", lz_dstore_participant_stage_process(f->h, g, RS, &other_boot, &E));
	OK(lz_dstore_batch_abort(f->h, &E));
	assert_false(lz_dstore_in_batch(f->h));
	OK(lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	assert_false(got.have_mount);
	OK(lz_dstore_batch_begin(f->h, &E));
	OK(lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &ns, &E));
	OK(lz_dstore_participant_stage_process(f->h, g, RS, &id, &E));
	OK(lz_dstore_batch_end(f->h, &E));
	reopen(f);
	OK(lz_dstore_rs_namespaces_get(f->h, g, &got, &E));
	assert_true(got.have_mount && got.mount.id == 3 && got.mount.inum == 4);
	assert_int_equal(phase(f, g, RS), LZ_DSTORE_PHASE_ACQUIRING);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
#define TB(name) cmocka_unit_test_setup_teardown(name, setup_bare, teardown)


/* ---- escalations (spec 3.8) ---------------------------------------------------- */

#define REQ "0123456789abcdef0123456789abcdef"
#define SID "fedcba9876543210fedcba9876543210"
#define DIG "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void test_lz_dstore_escalation__recorded_once_then_ended(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	struct lz_dstore_escalation x = { .request_id = REQ, .session_id = SID, .argv_digest = DIG, .automatic = true };
	assert_int_equal(lz_dstore_escalation_launch(f->h, g, &x, &E), 0);
	/* Spec 3.8: the same request ID never launches twice, approved by a
	 * rule or by the developer. */
	FAILS(EEXIST, "runs at most once", lz_dstore_escalation_launch(f->h, g, &x, &E));
	x.automatic = false;
	FAILS(EEXIST, "runs at most once", lz_dstore_escalation_launch(f->h, g, &x, &E));
	assert_int_equal(lz_dstore_escalation_end(f->h, g, REQ, &E), 0);
	FAILS(ENOENT, "no launched escalation", lz_dstore_escalation_end(f->h, g, REQ, &E));
	FAILS(EEXIST, "runs at most once", lz_dstore_escalation_launch(f->h, g, &x, &E));
	FAILS(ENOENT, "no launched escalation",
	      lz_dstore_escalation_end(f->h, g, "00000000000000000000000000000000", &E));
}

static void test_lz_dstore_escalation__needs_a_serving_generation(void **state)
{
	struct fx *f = *state;
	uint64_t g = gen_new(f);
	struct lz_dstore_escalation x = { .request_id = REQ, .session_id = SID, .argv_digest = DIG };
	FAILS(ESTALE, "no host command starts", lz_dstore_escalation_launch(f->h, g, &x, &E));
	set_state(f, g, LZ_DSTORE_GEN_FAILED);
	FAILS(ESTALE, "no host command starts", lz_dstore_escalation_launch(f->h, g, &x, &E));
	FAILS(ENOENT, "generation", lz_dstore_escalation_launch(f->h, g + 7, &x, &E));
}

static void test_lz_dstore_escalation__malformed_ids_refused(void **state)
{
	struct fx *f = *state;
	uint64_t g = published(f);
	struct lz_dstore_escalation x = { .request_id = "0123", .session_id = SID, .argv_digest = DIG };
	FAILS(EINVAL, "request ID", lz_dstore_escalation_launch(f->h, g, &x, &E));
	x.request_id = REQ;
	x.session_id = "FEDCBA9876543210FEDCBA9876543210";
	FAILS(EINVAL, "session ID", lz_dstore_escalation_launch(f->h, g, &x, &E));
	x.session_id = SID;
	x.argv_digest = REQ;
	FAILS(EINVAL, "argv digest", lz_dstore_escalation_launch(f->h, g, &x, &E));
	FAILS(EINVAL, "request ID", lz_dstore_escalation_end(f->h, g, "'; DROP TABLE x; --", &E));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lz_dstore_open__creates_schema_and_identity),
		TB(test_lz_dstore_open__creates_0600_under_umask_0277),
		T(test_lz_dstore_open__unknown_store_name_refused),
		TB(test_lz_dstore_open__storage_catalog_refused),
		T(test_lz_dstore_open__version_0_refused),
		T(test_lz_dstore_open__version_1_refused),
		T(test_lz_dstore_open__version_5_refused),
		T(test_lz_dstore_escalation__recorded_once_then_ended),
		T(test_lz_dstore_escalation__needs_a_serving_generation),
		T(test_lz_dstore_escalation__malformed_ids_refused),
		T(test_lz_dstore_open__version_2_upgraded),
		T(test_lz_dstore_open__version_3_upgraded),
		T(test_lz_dstore_rs_namespace_record__before_staging_only_once),
		T(test_lz_dstore_rs_namespace_record__after_staging_refused),
		T(test_lz_dstore_rs_namespaces_get__forged_row_refused),
		T(test_lz_dstore_open__version_2_with_later_table_refused),
		T(test_lz_dstore_open__version_as_text_refused),
		T(test_lz_dstore_open__unversioned_refused),
		T(test_lz_dstore_open__altered_meta_refused),
		TB(test_lz_dstore_open__missing_meta_in_nonempty_db_refused),
		TB(test_lz_dstore_open__foreign_meta_shape_refused),
		T(test_lz_dstore_open__extra_schema_object_refused),
		T(test_lz_dstore_open__trigger_refused),
		T(test_lz_dstore_open__altered_table_refused),
		T(test_lz_dstore_open__dropped_table_refused),
		TB(test_lz_dstore_open__foreign_wal_database_refused),
		TB(test_lz_dstore_open__foreign_wal_database_with_its_log_refused_unchanged),
		TB(test_lz_dstore_open__refused_open_leaves_another_connections_log),
		T(test_lz_dstore_open__a_log_beside_a_rollback_journal_store_refused),
		T(test_lz_dstore_open__keeps_a_write_ahead_log),
		T(test_lz_dstore_open__rollback_journal_store_switched),
		T(test_lz_dstore__commit_survives_a_killed_process),
		T(test_lz_dstore_open__wal_symlink_refused),
		TB(test_lz_dstore_open__not_a_database_refused),
		TB(test_lz_dstore_open__empty_file_gets_schema),
		T(test_lz_dstore_generation_begin__identity_changed_under_handle_refused),
		T(test_lz_dstore_open__db_symlink_refused),
		T(test_lz_dstore_open__db_mode_0644_refused),
		T(test_lz_dstore_open__db_hard_link_refused),
		T(test_lz_dstore_open__journal_symlink_refused),
		TB(test_lz_dstore_open__db_directory_refused),
		T(test_lz_dstore_open__db_other_owner_refused),
		TB(test_lz_dstore_open__root_mode_0755_refused),
		TB(test_lz_dstore_open__root_not_directory_refused),
		T(test_lz_dstore_open__keeps_its_own_descriptor),
		T(test_lz_dstore_generation_begin__db_changed_under_handle_refused),
		T(test_lz_dstore_generation_begin__round_trip),
		T(test_lz_dstore_generation_begin__refused_while_one_is_live),
		T(test_lz_dstore_generation_begin__other_domain_refused),
		T(test_lz_dstore_generation_begin__invalid_arguments_refused),
		T(test_lz_dstore_generation_begin__u64_max_round_trip),
		T(test_lz_dstore_generation_set_state__forward_moves),
		T(test_lz_dstore_generation_set_state__illegal_moves_refused),
		T(test_lz_dstore_generation_set_state__stopped_needs_everything_clean),
		T(test_lz_dstore_generation_get__unknown_untouched),
		T(test_lz_dstore_generation_list__recent_first_bounded),
		T(test_lz_dstore_participant_set_network_ready__then_publish),
		T(test_lz_dstore_generation_set_state__published_needs_network_active),
		T(test_lz_dstore_participant_set_network_ready__needs_active_helper),
		T(test_lz_dstore_participant_set_network_ready__needs_entered_process),
		T(test_lz_dstore_participant_set_network_ready__never_replaced),
		T(test_lz_dstore_participant_set_network_ready__only_while_starting),
		T(test_lz_dstore_participant_set_network_ready__malformed_refused),
		T(test_lz_dstore_participant_set_network_ready__unknown_generation),
		T(test_lz_dstore_participant_activate__network_needs_readiness),
		T(test_lz_dstore_participant_clean__network_then_helper),
		T(test_lz_dstore_participant_get__forged_network_ready_refused),
		T(test_lz_dstore_participant_intent__round_trip),
		T(test_lz_dstore_participant_intent__refusals),
		T(test_lz_dstore_participant_set_artifact__prepared_lower_flow),
		T(test_lz_dstore_participant_set_artifact__refusals),
		T(test_lz_dstore_participant_commit_process__round_trip_u64_max),
		T(test_lz_dstore_participant_commit_process__different_identity_refused),
		T(test_lz_dstore_participant_stage_process__refusals),
		T(test_lz_dstore_participant_enter_process__direct_edges_only),
		T(test_lz_dstore_participant_activate__requires_evidence),
		T(test_lz_dstore_participant_add_mount__state_anchor_flow),
		T(test_lz_dstore_participant_add_mount__invalid_arguments_refused),
		T(test_lz_dstore_participant_add_mount__bounded),
		T(test_lz_dstore_participant__evidence_immutable),
		T(test_lz_dstore_participant_release_intent__keeps_evidence),
		T(test_lz_dstore_participant_clean__semantics),
		T(test_lz_dstore_participant_release_intent__lower_waits_for_clean_anchor),
		T(test_lz_dstore_anchor_unmounted__atomic),
		T(test_lz_dstore_participant__failed_generation_acquires_nothing),
		T(test_lz_dstore_participant_get__unknown_untouched),
		T(test_lz_dstore_session_begin__needs_published_generation),
		T(test_lz_dstore_session_commit_running__flow),
		T(test_lz_dstore_session_commit_running__refusals),
		T(test_lz_dstore_session_stage_exec__refusals),
		T(test_lz_dstore_session_clean__semantics),
		T(test_lz_dstore_session_list__order_and_scope),
		T(test_lz_dstore_open__reopen_shows_same_rows),
		T(test_lz_dstore_close__null_and_null_handle),
		T(test_lz_dstore_batch__commits_together_and_a_refusal_changes_nothing),
		T(test_lz_dstore_batch__closed_inside_rolls_back),
		T(test_lz_dstore_batch_abort__rolls_back_the_calls_that_succeeded),
		cmocka_unit_test(test_lz_dstore_role_name__names),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
