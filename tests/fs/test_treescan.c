/* Read-only tree scans (treescan.h; spec 3.6, 3.9): usage counts without
 * following links or crossing mounts, and the overlay changes of an upper
 * layer over its lower, read in a user namespace.
 *
 * CI runs this suite as root. The _in_userns calls need newuidmap with
 * subordinate IDs, which root has not (as in tests/proc/test_broker.c): as
 * root they run in a forked child that becomes the test user scripts/test.sh
 * creates (LZ_TEST_USER, default lazaret-test; missing, the test fails, it
 * does not skip); as another user, that user needs an /etc/subuid range.
 * Their layers are made "foreign" first: owned by the namespace's ID 1000
 * (a subordinate ID on the host), directories 0700, files 0600, as a State
 * Anchor's upper layer is, so the test user alone cannot read them. Cases
 * that need mknod or mounts seen by the test user's worker run only as
 * root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/tree.h"
#include "fs/treescan.h"
#include "lz_test_user.h"
#include "proc/broker.h"

#define SANDBOX_ID 1000 /* the namespace ID that owns foreign trees */

static char base[64];
static int basefd = -1;

static const char *test_user(void)
{
	return getenv("LZ_TEST_USER") ? getenv("LZ_TEST_USER") : "lazaret-test";
}


static int setup(void **state)
{
	(void)state;
	strcpy(base, "/tmp/lz-treescan-XXXXXX");
	if (mkdtemp(base) == NULL || chmod(base, 0755) < 0) /* the test user reaches it */
		return -1;
	basefd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return basefd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int parent = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r;
	struct lz_idmap map;
	if (geteuid() != 0 && lz_test_has_subuid() && lz_idmap_for_invoking_user(&map, &err) == 0)
		r = lz_tree_remove_in_userns(&map, parent, base + 5, &err); /* foreign files */
	else
		r = lz_tree_remove(parent, base + 5, &err);
	if (r < 0)
		fprintf(stderr, "teardown: %s\n", err.msg);
	close(parent);
	close(basefd);
	return r;
}

/* ---- building trees --------------------------------------------------------- */

static char *at(const char *rel)
{
	static char p[4][PATH_MAX];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", base, rel);
	return p[i];
}

static void mk(const char *rel)
{
	if (mkdir(at(rel), 0755) < 0)
		fail_msg("mkdir '%s': %s", rel, strerror(errno));
}

static void put(const char *rel, size_t size)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		fail_msg("create '%s': %s", rel, strerror(errno));
	char buf[4096];
	memset(buf, 'x', sizeof(buf));
	while (size > 0) {
		size_t n = size < sizeof(buf) ? size : sizeof(buf);
		assert_int_equal(write(fd, buf, n), (ssize_t)n);
		size -= n;
	}
	close(fd);
}

static void sym(const char *target, const char *rel)
{
	if (symlink(target, at(rel)) < 0)
		fail_msg("symlink '%s': %s", rel, strerror(errno));
}

/* Sets a user.* xattr; false where the filesystem has none. */
static bool setx(const char *rel, const char *name, const char *value)
{
	if (setxattr(at(rel), name, value, strlen(value), 0) == 0)
		return true;
	if (errno == ENOTSUP)
		return false;
	fail_msg("setxattr '%s' %s: %s", rel, name, strerror(errno));
	return false;
}

/* rel/d/d/... with levels directories below rel (rel must exist). */
static void chain(const char *rel, int levels, const char *name)
{
	int fd = openat(basefd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int i = 0; i < levels; i++) {
		assert_int_equal(mkdirat(fd, name, 0755), 0);
		int next = openat(fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	close(fd);
}

/* Removes rel and the chain below it. */
static void unchain(const char *rel)
{
	struct lz_err err = { 0, "" };
	if (lz_tree_remove(basefd, rel, &err) < 0)
		fail_msg("remove '%s': %s", rel, err.msg);
}

/* What lz_tree_usage should find, by nftw (FTW_PHYS). */
static struct lz_tree_usage measured;
static ino_t measured_links[64];
static size_t n_measured_links;

static int measure_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)p, (void)ftw;
	if (flag == FTW_D || flag == FTW_DP) {
		measured.dirs++;
	} else {
		measured.files++;
		if (st->st_nlink > 1) {
			for (size_t i = 0; i < n_measured_links; i++)
				if (measured_links[i] == st->st_ino)
					return 0;
			if (n_measured_links == 64)
				return -1;
			measured_links[n_measured_links++] = st->st_ino;
		}
	}
	measured.bytes += (uint64_t)st->st_blocks * 512u;
	return 0;
}

static struct lz_tree_usage measure(const char *rel)
{
	memset(&measured, 0, sizeof(measured));
	n_measured_links = 0;
	assert_int_equal(nftw(at(rel), measure_one, 16, FTW_PHYS), 0);
	return measured;
}

/* ---- foreign trees -------------------------------------------------------- */

/* The lowest range of >= 65536 IDs that file lists for the test user. */
static unsigned long sub_start(const char *file, const struct passwd *pw)
{
	FILE *f = fopen(file, "re");
	if (f == NULL)
		fail_msg("%s: %s", file, strerror(errno));
	char line[256], uid[32];
	snprintf(uid, sizeof(uid), "%u", (unsigned)pw->pw_uid);
	unsigned long best = ULONG_MAX;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':');
		if (c1 == NULL)
			continue;
		*c1 = '\0';
		unsigned long start, count;
		if ((strcmp(line, pw->pw_name) == 0 || strcmp(line, uid) == 0) &&
		    sscanf(c1 + 1, "%lu:%lu", &start, &count) == 2 && count >= 65536 && start < best)
			best = start;
	}
	fclose(f);
	if (best == ULONG_MAX)
		fail_msg("%s lists no range for %s", file, pw->pw_name);
	return best;
}

static uid_t f_uid;
static gid_t f_gid;

static int foreign_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag, (void)ftw;
	if (lchown(p, f_uid, f_gid) < 0)
		return -1;
	if (S_ISLNK(st->st_mode))
		return 0;
	return chmod(p, S_ISDIR(st->st_mode) ? 0700 : 0600);
}

static int foreign_worker(void *arg, struct lz_err *err)
{
	if (nftw(arg, foreign_one, 16, FTW_PHYS | FTW_DEPTH) != 0)
		return lz_err_set(err, errno ? errno : EIO, "chown: %s", strerror(errno));
	return 0;
}

/* Runs fn(at(rel)) in a worker that is root of the invoking user's
 * namespace. */
static void as_ns_root(const char *label, int (*fn)(void *, struct lz_err *), const char *rel)
{
	struct lz_err err = { 0, "" };
	struct lz_idmap map;
	if (lz_idmap_for_invoking_user(&map, &err) < 0)
		fail_msg("%s", err.msg);
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	struct lz_broker_spec spec = { .label = label, .clone_flags = CLONE_NEWUSER, .map = &map,
				       .join_pidfd = -1, .fn = fn, .arg = at(rel) };
	int status = -1;
	if (lz_broker_spawn(&spec, &child, &err) < 0 || lz_broker_wait(&child, 10000, &status, &err) < 0 ||
	    status != 0)
		fail_msg("%s '%s' (%d): %s", label, rel, status, err.msg);
}

/* Hands rel to the namespace's ID SANDBOX_ID: as root directly, else by a
 * worker that is root of the invoking user's namespace. */
static void foreign(const char *rel)
{
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam(test_user());
		if (pw == NULL)
			fail_msg("test user '%s' does not exist (scripts/test.sh creates it)", test_user());
		f_uid = (uid_t)(sub_start("/etc/subuid", pw) + SANDBOX_ID - 1);
		f_gid = (gid_t)(sub_start("/etc/subgid", pw) + SANDBOX_ID - 1);
		if (nftw(at(rel), foreign_one, 16, FTW_PHYS | FTW_DEPTH) != 0)
			fail_msg("chown '%s': %s", rel, strerror(errno));
		return;
	}
	if (!lz_test_has_subuid())
		fail_msg("this user has no /etc/subuid range (see docs/install.md)");
	f_uid = SANDBOX_ID;
	f_gid = SANDBOX_ID;
	as_ns_root("chown", foreign_worker, rel);
}

/* chmod of a path foreign() handed over (0777 for a directory): as root
 * directly, else by a worker that is root of the user's namespace. */
static int chmod_worker(void *arg, struct lz_err *err)
{
	if (chmod(arg, 0777) < 0)
		return lz_err_set(err, errno, "chmod: %s", strerror(errno));
	return 0;
}

static void foreign_chmod_0777(const char *rel)
{
	if (geteuid() == 0) {
		if (chmod(at(rel), 0777) < 0)
			fail_msg("chmod '%s': %s", rel, strerror(errno));
		return;
	}
	as_ns_root("chmod", chmod_worker, rel);
}

/* ---- running as the test user ----------------------------------------------- */

#define MAX_CH 64

enum op { USAGE, CHANGES };

struct call {
	enum op op;
	const char *upper; /* USAGE: the name */
	const char *lower; /* NULL: none */
	size_t max;
	size_t held; /* CHANGES: 0, or the bound of lz_tree_changes_in_userns_bounded */
	bool null_ret;
	int (*prep)(void); /* as root, in the child, before it becomes the test user */
	rlim_t nofile;     /* > 0: the call runs in a child with this descriptor limit, soft and hard */
};

struct out {
	int rc; /* INT_MIN: the call did not happen (msg says why) */
	char msg[LZ_ERR_MSG_MAX + 64];
	struct lz_tree_usage u;
	int direct_rc; /* USAGE: lz_tree_usage as the user, outside any namespace */
	struct lz_tree_usage direct;
	struct lz_tree_changes_count count;
	struct lz_tree_change ch[MAX_CH];
};

static struct out *out; /* shared with the forked child */

static void body(const struct call *c)
{
	struct lz_err err = { 0, "" };
	struct lz_idmap map;
	if (c->nofile > 0) {
		/* a hard limit cannot be raised again: lowered in a child */
		pid_t pid = fork();
		if (pid == 0) {
			struct rlimit rl = { c->nofile, c->nofile };
			struct call once = *c;
			once.nofile = 0;
			if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
				snprintf(out->msg, sizeof(out->msg), "setrlimit: %s", strerror(errno));
			else
				body(&once);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, NULL, 0) != pid)
			snprintf(out->msg, sizeof(out->msg), "fork: %s", strerror(errno));
		return;
	}
	if (lz_idmap_for_invoking_user(&map, &err) < 0) {
		snprintf(out->msg, sizeof(out->msg), "idmap: %s", err.msg);
		return;
	}
	if (c->op == USAGE) {
		struct lz_err derr;
		out->direct_rc = lz_tree_usage(basefd, c->upper, &out->direct, &derr);
		out->rc = lz_tree_usage_in_userns(&map, basefd, c->upper, &out->u, &err);
	} else if (c->held == 0) {
		out->rc = lz_tree_changes_in_userns(&map, basefd, c->upper, c->lower ? basefd : -1,
						    c->lower, c->null_ret ? NULL : out->ch, c->max,
						    &out->count, &err);
	} else {
		out->rc = lz_tree_changes_in_userns_bounded(&map, basefd, c->upper,
							    c->lower ? basefd : -1, c->lower, c->held,
							    c->null_ret ? NULL : out->ch, c->max,
							    &out->count, &err);
	}
	snprintf(out->msg, sizeof(out->msg), "%s", err.msg);
}

static const struct out *as_user(const struct call *c)
{
	memset(out, 0, sizeof(*out));
	out->rc = INT_MIN;
	if (geteuid() != 0) {
		if (!lz_test_has_subuid())
			fail_msg("this user has no /etc/subuid range (see docs/install.md)");
		body(c);
	} else {
		struct passwd *pw = getpwnam(test_user());
		if (pw == NULL)
			fail_msg("test user '%s' does not exist (scripts/test.sh creates it)", test_user());
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			if (c->prep && c->prep() < 0) {
				snprintf(out->msg, sizeof(out->msg), "prep: %s", strerror(errno));
				_exit(2);
			}
			if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
				_exit(2);
			body(c);
			_exit(0);
		}
		int st = 0;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("as %s: %s", test_user(), out->msg[0] ? out->msg : "could not become the test user");
	}
	if (out->rc == INT_MIN)
		fail_msg("%s", out->msg);
	return out;
}

static void expect_rc(const struct out *o, int want)
{
	if (o->rc != want)
		fail_msg("returned %d, expected %d: %s", o->rc, want, o->msg);
}

static void expect_usage(const struct lz_tree_usage *got, const struct lz_tree_usage *want)
{
	assert_int_equal(got->files, want->files);
	assert_int_equal(got->dirs, want->dirs);
	assert_int_equal(got->bytes, want->bytes);
	assert_false(got->incomplete);
}

static void expect_change(const struct out *o, size_t i, enum lz_tree_change_kind kind,
			  const char *path, mode_t type)
{
	if (i >= o->count.listed)
		fail_msg("change %zu (%s) missing: %zu listed", i, path, o->count.listed);
	const struct lz_tree_change *c = &o->ch[i];
	if (c->kind != kind || strcmp(c->path, path) != 0 || (c->mode & S_IFMT) != type)
		fail_msg("change %zu: kind %d '%s' mode %o; expected kind %d '%s' type %o", i, c->kind,
			 c->path, (unsigned)c->mode, kind, path, (unsigned)type);
}

/* ---- lz_tree_usage ---------------------------------------------------------- */

static void test_lz_tree_usage__counts_known_tree(void **state)
{
	(void)state;
	mk("t");
	put("t/a", 8192);
	put("t/b", 4096);
	put("t/empty", 0);
	mk("t/sub");
	put("t/sub/c", 12288);
	mk("t/sub/deeper");
	put("t/sub/deeper/d", 1);
	struct lz_tree_usage want = measure("t"), got;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_tree_usage(basefd, "t", &got, &err), 0);
	assert_int_equal(got.files, 5);
	assert_int_equal(got.dirs, 3);
	assert_true(got.bytes >= 8192 + 4096 + 12288);
	expect_usage(&got, &want);
}

static void test_lz_tree_usage__symlinks_counted_not_followed(void **state)
{
	(void)state;
	put("big", 1 << 20);
	mk("bigdir");
	put("bigdir/one", 65536);
	put("bigdir/two", 65536);
	mk("t");
	sym("../big", "t/file-link");
	sym("../bigdir", "t/dir-link");
	sym("/", "t/root-link");
	sym(at("bigdir"), "t/abs-link");
	struct lz_tree_usage got;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_tree_usage(basefd, "t", &got, &err), 0);
	assert_int_equal(got.files, 4);
	assert_int_equal(got.dirs, 1);
	assert_true(got.bytes < 65536);
	struct lz_tree_usage want = measure("t");
	expect_usage(&got, &want);
	/* The root itself a link: one file, nothing followed. */
	sym("bigdir", "top-link");
	assert_int_equal(lz_tree_usage(basefd, "top-link", &got, &err), 0);
	assert_int_equal(got.files, 1);
	assert_int_equal(got.dirs, 0);
	assert_true(got.bytes < 65536);
}

static void test_lz_tree_usage__hard_links_counted_once(void **state)
{
	(void)state;
	mk("t");
	mk("t/sub");
	put("t/f", 65536);
	assert_int_equal(link(at("t/f"), at("t/g")), 0);
	assert_int_equal(link(at("t/f"), at("t/sub/h")), 0);
	struct lz_tree_usage got, want = measure("t");
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_tree_usage(basefd, "t", &got, &err), 0);
	assert_int_equal(got.files, 3);
	assert_int_equal(got.dirs, 2);
	assert_true(got.bytes >= 65536 && got.bytes < 2 * 65536);
	expect_usage(&got, &want);
}

static void test_lz_tree_usage__depth_limit_marks_incomplete(void **state)
{
	(void)state;
	struct lz_tree_usage got;
	struct lz_err err = { 0, "" };
	mk("t1");
	chain("t1", LZ_TREE_MAX_DEPTH, "d");
	int r = lz_tree_usage(basefd, "t1", &got, &err);
	unchain("t1");
	assert_int_equal(r, 0);
	assert_int_equal(got.dirs, LZ_TREE_MAX_DEPTH + 1);
	assert_false(got.incomplete);
	assert_int_equal(got.limit, LZ_TREE_LIMIT_NONE);
	mk("t2");
	chain("t2", LZ_TREE_MAX_DEPTH + 1, "d");
	r = lz_tree_usage(basefd, "t2", &got, &err);
	/* the worker's reply says which limit, too (state verify names it) */
	const struct out *o = as_user(&(struct call){ .op = USAGE, .upper = "t2" });
	unchain("t2");
	assert_int_equal(r, 0);
	assert_int_equal(got.dirs, LZ_TREE_MAX_DEPTH + 1);
	assert_true(got.incomplete);
	assert_int_equal(got.limit, LZ_TREE_LIMIT_DEPTH);
	expect_rc(o, 0);
	assert_true(o->u.incomplete);
	assert_int_equal(o->u.limit, LZ_TREE_LIMIT_DEPTH);
}

static void test_lz_tree_usage__missing_is_enoent(void **state)
{
	(void)state;
	struct lz_tree_usage got = { .bytes = 7, .files = 7, .dirs = 7 };
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_tree_usage(basefd, "nothing-here", &got, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "nothing-here"));
	assert_int_equal(got.bytes, 7); /* untouched */
	assert_int_equal(got.dirs, 7);
}

static void test_lz_tree_usage__bad_names_are_einval(void **state)
{
	(void)state;
	struct lz_tree_usage got;
	struct lz_err err = { 0, "" };
	struct lz_idmap map = { 0 };
	const char *bad[] = { "", ".", "..", "a/b", "/tmp" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(lz_tree_usage(basefd, bad[i], &got, &err), -EINVAL);
		assert_int_equal(lz_tree_usage_in_userns(&map, basefd, bad[i], &got, &err), -EINVAL);
	}
}

/* basefd again, in this process's (new) mount namespace: the old
 * descriptor still resolves in the mount tree it was opened in. */
static int reopen_base(void)
{
	int fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	close(basefd);
	basefd = fd;
	return 0;
}

/* Runs fn in a forked child with a private mount namespace (root's own, or
 * an unprivileged user's with a user namespace mapping only itself);
 * returns fn's result, or skips where no namespace can be made. */
static int in_mountns(int (*fn)(void))
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uid_t uid = getuid();
		gid_t gid = getgid();
		if (uid != 0) {
			char map[64];
			int fd;
			if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
				_exit(100);
			snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
			if ((fd = open("/proc/self/uid_map", O_WRONLY)) < 0 || write(fd, map, strlen(map)) < 0)
				_exit(100);
			close(fd);
			if ((fd = open("/proc/self/setgroups", O_WRONLY)) < 0 || write(fd, "deny", 4) < 0)
				_exit(100);
			close(fd);
			snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
			if ((fd = open("/proc/self/gid_map", O_WRONLY)) < 0 || write(fd, map, strlen(map)) < 0)
				_exit(100);
			close(fd);
		} else if (unshare(CLONE_NEWNS) < 0) {
			_exit(100);
		}
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || reopen_base() < 0)
			_exit(100);
		_exit(fn());
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 100)
		skip();
	return WEXITSTATUS(st);
}

/* 0: the tmpfs and the same-device bind mount were counted, not entered. */
static int usage_across_mounts(void)
{
	if (mount("tmpfs", at("t/tmpfs"), "tmpfs", 0, "size=1m") < 0 ||
	    mount(at("src"), at("t/bind"), NULL, MS_BIND, NULL) < 0)
		return 100;
	int fd = open(at("t/tmpfs/hidden"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return 3;
	close(fd);
	struct lz_tree_usage u;
	struct lz_err err = { 0, "" };
	if (lz_tree_usage(basefd, "t", &u, &err) < 0)
		return 4;
	if (u.dirs != 3 || u.files != 1 || !u.incomplete)
		return 5;
	return 0;
}

static void test_lz_tree_usage__mount_points_counted_not_entered(void **state)
{
	(void)state;
	mk("src");
	put("src/inside", 4096);
	mk("t");
	mk("t/tmpfs");
	mk("t/bind");
	put("t/f", 1);
	assert_int_equal(in_mountns(usage_across_mounts), 0);
}

/* ---- lz_tree_usage_in_userns ------------------------------------------------ */

static void test_lz_tree_usage_in_userns__reads_subordinate_owned_tree(void **state)
{
	(void)state;
	mk("layer");
	put("layer/a", 8192);
	mk("layer/private");
	put("layer/private/b", 4096);
	sym("/etc/shadow", "layer/private/link");
	mk("own");
	put("own/top", 4096);
	mk("own/private");
	put("own/private/c", 4096);
	mk("own/private/more");
	struct lz_tree_usage want_layer = measure("layer"), want_own = measure("own");
	foreign("layer");
	foreign("own/private");

	/* Wholly foreign: the user alone cannot open it; the worker reads it all. */
	const struct out *o = as_user(&(struct call){ .op = USAGE, .upper = "layer" });
	expect_rc(o, 0);
	assert_int_equal(o->direct_rc, -EACCES);
	expect_usage(&o->u, &want_layer);
	assert_int_equal(o->u.files, 3);
	assert_int_equal(o->u.dirs, 2);

	/* A foreign directory inside: the user alone gets an incomplete count. */
	o = as_user(&(struct call){ .op = USAGE, .upper = "own" });
	expect_rc(o, 0);
	expect_usage(&o->u, &want_own);
	assert_int_equal(o->direct_rc, 0);
	assert_true(o->direct.incomplete);
	assert_int_equal(o->direct.dirs, 2);
	assert_int_equal(o->direct.files, 1);
}

static void test_lz_tree_usage_in_userns__missing_is_enoent(void **state)
{
	(void)state;
	const struct out *o = as_user(&(struct call){ .op = USAGE, .upper = "nothing-here" });
	expect_rc(o, -ENOENT);
	assert_non_null(strstr(o->msg, "nothing-here"));
}

/* ---- lz_tree_changes_in_userns ---------------------------------------------- */

/* Layers for the kinds test; false where user xattrs are not supported. */
static bool make_layers(void)
{
	mk("lower");
	put("lower/keep", 1);
	put("lower/mod", 3);
	put("lower/gone", 1);
	mk("lower/d");
	put("lower/d/x", 1);
	put("lower/d/same", 1);
	mk("lower/od");
	put("lower/od/old", 1);
	mk("lower/xd");
	put("lower/xd/q", 1);
	put("lower/f2d", 1);

	mk("upper");
	put("upper/B", 1);
	mk("upper/d");
	put("upper/d/x", 2);
	put("upper/d/y", 1);
	put("upper/d.txt", 1);
	mk("upper/f2d");
	put("upper/f2d/z", 1);
	put("upper/fake", 5); /* not empty: overlayfs ignores its whiteout xattr */
	put("upper/gone", 0);
	sym("/etc", "upper/ln");
	put("upper/mod", 4);
	put("upper/new", 3);
	mk("upper/od");
	put("upper/od/n", 1);
	mk("upper/xd");
	put("upper/xd/q2", 1);
	put("upper/\xff", 1);
	if (!setx("upper/gone", "user.overlay.whiteout", "") ||
	    !setx("upper/fake", "user.overlay.whiteout", "") ||
	    !setx("upper/od", "user.overlay.opaque", "y") ||
	    !setx("upper/xd", "user.overlay.opaque", "x"))
		return false;
	foreign("lower");
	foreign("upper");
	return true;
}

static void test_lz_tree_changes_in_userns__kinds_in_sorted_order(void **state)
{
	(void)state;
	if (!make_layers())
		skip(); /* no user xattrs on this filesystem */
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper",
						      .lower = "lower", .max = MAX_CH });
	expect_rc(o, 0);
	size_t i = 0;
	expect_change(o, i++, LZ_TREE_ADDED, "B", S_IFREG);
	expect_change(o, i++, LZ_TREE_CHANGED, "d/x", S_IFREG); /* d itself: no change */
	expect_change(o, i++, LZ_TREE_ADDED, "d/y", S_IFREG);
	expect_change(o, i++, LZ_TREE_ADDED, "d.txt", S_IFREG);
	expect_change(o, i++, LZ_TREE_CHANGED, "f2d", S_IFDIR);
	expect_change(o, i++, LZ_TREE_ADDED, "f2d/z", S_IFREG);
	expect_change(o, i++, LZ_TREE_ADDED, "fake", S_IFREG);
	expect_change(o, i++, LZ_TREE_DELETED, "gone", 0);
	expect_change(o, i++, LZ_TREE_ADDED, "ln", S_IFLNK);
	expect_change(o, i++, LZ_TREE_CHANGED, "mod", S_IFREG);
	expect_change(o, i++, LZ_TREE_ADDED, "new", S_IFREG);
	expect_change(o, i++, LZ_TREE_OPAQUE, "od", S_IFDIR);
	expect_change(o, i++, LZ_TREE_ADDED, "od/n", S_IFREG);
	expect_change(o, i++, LZ_TREE_ADDED, "xd/q2", S_IFREG); /* "x" is not opaque */
	expect_change(o, i++, LZ_TREE_ADDED, "\xff", S_IFREG);
	assert_int_equal(o->count.listed, i);
	assert_int_equal(o->count.total, i);
	assert_false(o->count.incomplete);
	assert_int_equal(o->ch[9].size, 4);  /* mod */
	assert_int_equal(o->ch[10].size, 3); /* new */
	assert_int_equal(o->ch[7].mode, 0);  /* gone */
	assert_int_equal(o->ch[7].size, 0);
}

static void test_lz_tree_changes_in_userns__char_device_whiteout_is_deleted(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* mknod needs CAP_MKNOD in the initial namespace */
	mk("lower");
	put("lower/gone", 1);
	mk("upper");
	assert_int_equal(mknod(at("upper/gone"), S_IFCHR | 0600, makedev(0, 0)), 0);
	assert_int_equal(mknod(at("upper/tty"), S_IFCHR | 0600, makedev(5, 0)), 0);
	foreign("lower");
	foreign("upper");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper",
						      .lower = "lower", .max = MAX_CH });
	expect_rc(o, 0);
	expect_change(o, 0, LZ_TREE_DELETED, "gone", 0);
	expect_change(o, 1, LZ_TREE_ADDED, "tty", S_IFCHR);
	assert_int_equal(o->count.total, 2);
}

static void test_lz_tree_changes_in_userns__max_truncates_and_counts(void **state)
{
	(void)state;
	char rel[32];
	mk("upper");
	for (int i = 49; i >= 0; i--) {
		snprintf(rel, sizeof(rel), "upper/f%02d", i);
		put(rel, 1);
	}
	foreign("upper");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .max = 10 });
	expect_rc(o, 0);
	assert_int_equal(o->count.listed, 10);
	assert_int_equal(o->count.total, 50);
	assert_false(o->count.incomplete);
	assert_int_equal(o->count.limit, LZ_TREE_LIMIT_NONE);
	for (size_t i = 0; i < 10; i++) {
		snprintf(rel, sizeof(rel), "f%02zu", i);
		expect_change(o, i, LZ_TREE_ADDED, rel, S_IFREG);
	}
	o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .max = 0, .null_ret = true });
	expect_rc(o, 0);
	assert_int_equal(o->count.listed, 0);
	assert_int_equal(o->count.total, 50);
}

/* A directory in both layers is itself a change only where its mode or
 * owner differs (a chmod in the sandbox persists there). */
static void test_lz_tree_changes_in_userns__a_directorys_mode_is_a_change(void **state)
{
	(void)state;
	mk("lower");
	mk("lower/d");
	mk("lower/same");
	mk("upper");
	mk("upper/d");
	mk("upper/same");
	put("upper/same/new", 1);
	foreign("lower");
	foreign("upper");
	foreign_chmod_0777("upper/d");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .lower = "lower",
						      .max = MAX_CH });
	expect_rc(o, 0);
	expect_change(o, 0, LZ_TREE_CHANGED, "d", S_IFDIR);
	assert_int_equal(o->ch[0].mode & 07777, 0777);
	expect_change(o, 1, LZ_TREE_ADDED, "same/new", S_IFREG);
	assert_int_equal(o->count.total, 2);
}

static void test_lz_tree_changes_in_userns__no_lower_lists_all_added(void **state)
{
	(void)state;
	mk("upper");
	mk("upper/a");
	put("upper/a/b", 1);
	put("upper/c", 1);
	sym("a", "upper/l");
	foreign("upper");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .max = MAX_CH });
	expect_rc(o, 0);
	expect_change(o, 0, LZ_TREE_ADDED, "a", S_IFDIR);
	expect_change(o, 1, LZ_TREE_ADDED, "a/b", S_IFREG);
	expect_change(o, 2, LZ_TREE_ADDED, "c", S_IFREG);
	expect_change(o, 3, LZ_TREE_ADDED, "l", S_IFLNK); /* not followed into a/ */
	assert_int_equal(o->count.total, 4);
}

static void test_lz_tree_changes_in_userns__paths_are_raw_bytes(void **state)
{
	(void)state;
	mk("upper");
	put("upper/new\nline", 1);
	put("upper/\xc3\x28", 1); /* not UTF-8 */
	mk("upper/\x01" "dir");
	put("upper/\x01" "dir/tab\tfile", 1);
	foreign("upper");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .max = MAX_CH });
	expect_rc(o, 0);
	expect_change(o, 0, LZ_TREE_ADDED, "\x01" "dir", S_IFDIR);
	expect_change(o, 1, LZ_TREE_ADDED, "\x01" "dir/tab\tfile", S_IFREG);
	expect_change(o, 2, LZ_TREE_ADDED, "new\nline", S_IFREG);
	expect_change(o, 3, LZ_TREE_ADDED, "\xc3\x28", S_IFREG);
	assert_int_equal(o->count.total, 4);
}

static void test_lz_tree_changes_in_userns__depth_limit_marks_incomplete(void **state)
{
	(void)state;
	mk("u1");
	chain("u1", LZ_TREE_MAX_DEPTH, "d");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "u1", .null_ret = true });
	unchain("u1");
	expect_rc(o, 0);
	assert_int_equal(o->count.total, LZ_TREE_MAX_DEPTH);
	assert_false(o->count.incomplete);
	mk("u2");
	chain("u2", LZ_TREE_MAX_DEPTH + 1, "d");
	o = as_user(&(struct call){ .op = CHANGES, .upper = "u2", .null_ret = true });
	unchain("u2");
	expect_rc(o, 0);
	assert_int_equal(o->count.total, LZ_TREE_MAX_DEPTH);
	assert_true(o->count.incomplete);
	assert_int_equal(o->count.limit, LZ_TREE_LIMIT_DEPTH);
}

/* A tree deeper than the descriptor limit lets the walk hold (about two
 * descriptors a level): what it could not enter makes the scan
 * incomplete, as an unreadable directory does, never an error (a
 * sandbox could otherwise keep the developer from inspecting its state). */
static void test_lz_tree_changes_in_userns__out_of_descriptors_marks_incomplete(void **state)
{
	(void)state;
	mk("u");
	chain("u", 600, "d");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "u", .null_ret = true, .nofile = 400 });
	unchain("u");
	expect_rc(o, 0);
	assert_true(o->count.incomplete);
	assert_true(o->count.total > 100 && o->count.total < 600);
}

static void test_lz_tree_changes_in_userns__overlong_path_marks_incomplete(void **state)
{
	(void)state;
	char name[256];
	memset(name, 'n', 255);
	name[255] = '\0';
	mk("upper");
	chain("upper", 17, name); /* 16 levels make a 4095-byte path, the 17th cannot fit */
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .max = MAX_CH });
	expect_rc(o, 0);
	assert_int_equal(o->count.total, 16);
	assert_int_equal(strlen(o->ch[15].path), 16 * 255 + 15);
	assert_true(o->count.incomplete);
	assert_int_equal(o->count.limit, LZ_TREE_LIMIT_PATH);
}

/* The memory bound with a lowered max_held. Names are 3 bytes, so each is
 * charged NAME_CHARGE (treescan.h). Counting name bytes alone, as the
 * scan once did, SHORT_NAMES of them come to 12000 bytes, well within
 * SMALL_HELD; what keeping them costs, 48000 and more, is not. */
#define SMALL_HELD (32u << 10)
#define NAME_CHARGE (4 + 2 * sizeof(char *))
#define SHORT_NAMES 3000

/* dir/aaa, dir/aab, ...: n empty files, created in reverse of name order. */
static void short_names(const char *dir, int n)
{
	char rel[64];
	for (int i = n - 1; i >= 0; i--) {
		snprintf(rel, sizeof(rel), "%s/%c%c%c", dir, 'a' + i / 676, 'a' + i / 26 % 26, 'a' + i % 26);
		put(rel, 0);
	}
}

static void expect_sorted_files(const struct out *o, size_t from)
{
	for (size_t i = from; i < o->count.listed; i++) {
		assert_int_equal(o->ch[i].kind, LZ_TREE_ADDED);
		assert_int_equal(o->ch[i].mode & S_IFMT, S_IFREG);
		if (i > from && strcmp(o->ch[i - 1].path, o->ch[i].path) >= 0)
			fail_msg("'%s' listed before '%s'", o->ch[i - 1].path, o->ch[i].path);
	}
}

static void test_lz_tree_changes_in_userns_bounded__short_names_past_bound_cut_short(void **state)
{
	(void)state;
	mk("flat");
	short_names("flat", SHORT_NAMES);
	/* Two levels, each within the bound alone, not together: "0" sorts
	 * first, so its names are read while the parent's are held. */
	mk("deep");
	mk("deep/0");
	short_names("deep", SHORT_NAMES / 3);
	short_names("deep/0", SHORT_NAMES / 3);
	foreign("flat");
	foreign("deep");

	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "flat", .max = MAX_CH,
						      .held = SMALL_HELD });
	expect_rc(o, 0);
	assert_true(o->count.incomplete);
	assert_int_equal(o->count.limit, LZ_TREE_LIMIT_HELD);
	assert_true(o->count.total > 0);
	assert_true(o->count.total < SHORT_NAMES);
	assert_true(o->count.total * NAME_CHARGE <= SMALL_HELD);
	assert_int_equal(o->count.listed, MAX_CH);
	expect_sorted_files(o, 0);

	o = as_user(&(struct call){ .op = CHANGES, .upper = "deep", .max = MAX_CH, .held = SMALL_HELD });
	expect_rc(o, 0);
	assert_true(o->count.incomplete);
	assert_int_equal(o->count.limit, LZ_TREE_LIMIT_HELD);
	expect_change(o, 0, LZ_TREE_ADDED, "0", S_IFDIR);
	/* The parent's names are all walked; only the inner listing is cut. */
	assert_true(o->count.total > 1 + SHORT_NAMES / 3);
	assert_true(o->count.total < 1 + 2 * SHORT_NAMES / 3);
	expect_sorted_files(o, 1);
}

static void test_lz_tree_changes_in_userns_bounded__tree_within_bound_is_complete(void **state)
{
	(void)state;
	/* Each directory is within the bound, and what one held is given back
	 * before the next is read. */
	mk("upper");
	mk("upper/d1");
	mk("upper/d2");
	mk("upper/d3");
	short_names("upper/d1", SHORT_NAMES / 3);
	short_names("upper/d2", SHORT_NAMES / 3);
	short_names("upper/d3", SHORT_NAMES / 3);
	foreign("upper");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .max = MAX_CH,
						      .held = SMALL_HELD });
	expect_rc(o, 0);
	assert_false(o->count.incomplete);
	assert_int_equal(o->count.limit, LZ_TREE_LIMIT_NONE);
	assert_int_equal(o->count.total, 3 + SHORT_NAMES);
	expect_change(o, 0, LZ_TREE_ADDED, "d1", S_IFDIR);
	expect_change(o, 1, LZ_TREE_ADDED, "d1/aaa", S_IFREG);
	expect_change(o, 2, LZ_TREE_ADDED, "d1/aab", S_IFREG);
	expect_change(o, 27, LZ_TREE_ADDED, "d1/aba", S_IFREG);
	expect_sorted_files(o, 1);
}

static int mount_in_upper(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", at("upper/m"), "tmpfs", 0, "size=1m,mode=0755") < 0)
		return -1;
	int fd = open(at("upper/m/hidden"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return reopen_base();
}

static void test_lz_tree_changes_in_userns__mount_point_not_entered(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* the worker must see a mount the test user cannot make */
	mk("upper");
	mk("upper/m");
	put("upper/z", 1);
	foreign("upper");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "upper",
						      .max = MAX_CH, .prep = mount_in_upper });
	expect_rc(o, 0);
	expect_change(o, 0, LZ_TREE_ADDED, "m", S_IFDIR);
	expect_change(o, 1, LZ_TREE_ADDED, "z", S_IFREG);
	assert_int_equal(o->count.total, 2);
	assert_true(o->count.incomplete);
	assert_int_equal(o->count.limit, LZ_TREE_LIMIT_NONE); /* not entered, no bound hit */
}

static void test_lz_tree_changes_in_userns__missing_or_wrong_type(void **state)
{
	(void)state;
	mk("upper");
	put("file", 1);
	mk("real");
	sym("real", "link");
	const struct out *o = as_user(&(struct call){ .op = CHANGES, .upper = "nothing", .max = 0,
						      .null_ret = true });
	expect_rc(o, -ENOENT);
	o = as_user(&(struct call){ .op = CHANGES, .upper = "upper", .lower = "nothing",
				    .null_ret = true });
	expect_rc(o, -ENOENT);
	assert_non_null(strstr(o->msg, "nothing"));
	o = as_user(&(struct call){ .op = CHANGES, .upper = "file", .null_ret = true });
	expect_rc(o, -ENOTDIR);
	o = as_user(&(struct call){ .op = CHANGES, .upper = "link", .null_ret = true });
	expect_rc(o, -ENOTDIR); /* a symlinked layer is refused, not followed */
}

static void test_lz_tree_changes_in_userns__misuse_is_einval(void **state)
{
	(void)state;
	struct lz_idmap map = { 0 };
	struct lz_tree_changes_count n = { 0 };
	struct lz_tree_change ch[1];
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_tree_changes_in_userns(&map, basefd, "..", -1, NULL, ch, 1, &n, &err), -EINVAL);
	assert_int_equal(lz_tree_changes_in_userns(&map, basefd, "u", basefd, "a/b", ch, 1, &n, &err),
			 -EINVAL);
	assert_int_equal(lz_tree_changes_in_userns(&map, basefd, "u", -1, NULL, NULL, 1, &n, &err), -EINVAL);
	assert_int_equal(lz_tree_changes_in_userns_bounded(&map, basefd, "u", -1, NULL, 0, ch, 1, &n, &err),
			 -EINVAL);
	assert_int_equal(lz_tree_changes_in_userns_bounded(&map, basefd, "u", -1, NULL,
							   LZ_TREE_SCAN_MAX_HELD + 1ul, ch, 1, &n, &err),
			 -EINVAL);
}

int main(void)
{
	/* The depth tests keep a descriptor per level open. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	out = mmap(NULL, sizeof(*out), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (out == MAP_FAILED)
		return 1;
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_tree_usage__counts_known_tree),
		T(test_lz_tree_usage__symlinks_counted_not_followed),
		T(test_lz_tree_usage__hard_links_counted_once),
		T(test_lz_tree_usage__depth_limit_marks_incomplete),
		T(test_lz_tree_usage__missing_is_enoent),
		T(test_lz_tree_usage__bad_names_are_einval),
		T(test_lz_tree_usage__mount_points_counted_not_entered),
		T(test_lz_tree_usage_in_userns__reads_subordinate_owned_tree),
		T(test_lz_tree_usage_in_userns__missing_is_enoent),
		T(test_lz_tree_changes_in_userns__kinds_in_sorted_order),
		T(test_lz_tree_changes_in_userns__char_device_whiteout_is_deleted),
		T(test_lz_tree_changes_in_userns__max_truncates_and_counts),
		T(test_lz_tree_changes_in_userns__a_directorys_mode_is_a_change),
		T(test_lz_tree_changes_in_userns__no_lower_lists_all_added),
		T(test_lz_tree_changes_in_userns__paths_are_raw_bytes),
		T(test_lz_tree_changes_in_userns__depth_limit_marks_incomplete),
		T(test_lz_tree_changes_in_userns__overlong_path_marks_incomplete),
		T(test_lz_tree_changes_in_userns__out_of_descriptors_marks_incomplete),
		T(test_lz_tree_changes_in_userns_bounded__short_names_past_bound_cut_short),
		T(test_lz_tree_changes_in_userns_bounded__tree_within_bound_is_complete),
		T(test_lz_tree_changes_in_userns__mount_point_not_entered),
		T(test_lz_tree_changes_in_userns__missing_or_wrong_type),
		T(test_lz_tree_changes_in_userns__misuse_is_einval),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	munmap(out, sizeof(*out));
	return r;
}
