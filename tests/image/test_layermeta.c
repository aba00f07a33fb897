/* Unit tests for core/image/layermeta.c: owners, times, the xattr
 * allow-list and its limits, report samples, and the metadata of special
 * objects. Entries are built with libarchive's archive_entry API; objects
 * live in a mkdtemp directory. Entries carry the caller's IDs, so the tests
 * pass as root and unprivileged alike; where the filesystem lacks user
 * xattrs the skip is asserted instead. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "image/layermeta.h"
#include "lz_test.h"

#define T_MTIME 1600000000

struct fixture {
	char base[64];
	int dir_fd; /* O_PATH|O_DIRECTORY of base */
	struct archive_entry *e;
	struct lz_layer_report rep;
	struct lz_err err;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	strcpy(f->base, "/tmp/lz-test-layermeta-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	f->dir_fd = open(f->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dir_fd >= 0);
	f->e = archive_entry_new();
	assert_non_null(f->e);
	archive_entry_set_uid(f->e, geteuid());
	archive_entry_set_gid(f->e, getegid());
	lz_err_clear(&f->err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	archive_entry_free(f->e);
	close(f->dir_fd);
	lz_test_rmtree(f->base);
	free(f);
	return 0;
}

struct xattr {
	const char *name, *value;
};

/* Gives the entry xattrs x[0..n) in that iteration order: archive_entry
 * hands them out last added first. */
static void set_xattrs(struct fixture *f, const struct xattr *x, size_t n)
{
	archive_entry_xattr_clear(f->e);
	while (n-- > 0)
		archive_entry_xattr_add_entry(f->e, x[n].name, x[n].value, strlen(x[n].value));
}

#define XATTRS(...)                              \
	((const struct xattr[]){ __VA_ARGS__ }), \
		(sizeof((const struct xattr[]){ __VA_ARGS__ }) / sizeof(struct xattr))

/* ---- owner and times ----------------------------------------------------- */

static void test_lz_layermeta_owner__range(void **state)
{
	struct fixture *f = *state;
	uid_t uid = 77;
	gid_t gid = 77;
	archive_entry_set_uid(f->e, 1000);
	archive_entry_set_gid(f->e, (la_int64_t)UINT32_MAX - 1);
	assert_int_equal(lz_layermeta_owner(f->e, "p", &uid, &gid, &f->err), 0);
	assert_int_equal(uid, 1000);
	assert_int_equal(gid, UINT32_MAX - 1);

	static const la_int64_t bad[] = { -1, (la_int64_t)UINT32_MAX, (la_int64_t)UINT32_MAX + 1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uid = gid = 77;
		archive_entry_set_uid(f->e, bad[i]);
		archive_entry_set_gid(f->e, 0);
		assert_int_equal(lz_layermeta_owner(f->e, "p", &uid, &gid, &f->err), -EINVAL);
		assert_string_equal(f->err.msg,
				    "layer entry 'p' refused: owner or group out of range");
		assert_int_equal(uid, 77); /* untouched */
		assert_int_equal(gid, 77);
		archive_entry_set_uid(f->e, 0);
		archive_entry_set_gid(f->e, bad[i]);
		assert_int_equal(lz_layermeta_owner(f->e, "p", &uid, &gid, &f->err), -EINVAL);
	}
}

static void test_lz_layermeta_times__set_or_omit(void **state)
{
	struct fixture *f = *state;
	struct timespec ts[2];
	lz_layermeta_times(f->e, ts);
	assert_int_equal(ts[1].tv_nsec, UTIME_OMIT);
	assert_int_equal(ts[0].tv_nsec, UTIME_OMIT);

	archive_entry_set_mtime(f->e, T_MTIME, 123456789);
	lz_layermeta_times(f->e, ts);
	assert_int_equal(ts[1].tv_sec, T_MTIME);
	assert_int_equal(ts[1].tv_nsec, 123456789);
	assert_int_equal(ts[0].tv_sec, T_MTIME); /* atime follows mtime */
	assert_int_equal(ts[0].tv_nsec, 123456789);
}

/* ---- samples ------------------------------------------------------------- */

static void test_lz_layermeta_sample__format_and_bounds(void **state)
{
	(void)state;
	char s[LZ_LAYER_REPORT_PATHS][LZ_LAYER_REPORT_TEXT];
	memset(s, 'Z', sizeof(s));
	lz_layermeta_sample(s, 1, "", NULL);
	assert_string_equal(s[0], ".");
	lz_layermeta_sample(s, 2, "a/b", "user.x");
	assert_string_equal(s[1], "a/b user.x");

	/* Beyond LZ_LAYER_REPORT_PATHS: counted by the caller, not kept. */
	char before[sizeof(s)];
	memcpy(before, s, sizeof(s));
	lz_layermeta_sample(s, LZ_LAYER_REPORT_PATHS + 1, "late", NULL);
	assert_memory_equal(s, before, sizeof(s));

	/* Truncated to LZ_LAYER_REPORT_TEXT - 1 bytes. */
	char a[600], b[100];
	memset(a, 'a', sizeof(a) - 1);
	a[sizeof(a) - 1] = '\0';
	memset(b, 'b', sizeof(b) - 1);
	b[sizeof(b) - 1] = '\0';
	lz_layermeta_sample(s, 3, a, b);
	assert_int_equal(strlen(s[2]), LZ_LAYER_REPORT_TEXT - 1);
	assert_int_equal(s[2][LZ_LAYER_REPORT_TEXT - 2], 'a'); /* no room for b */
	a[500] = '\0';
	lz_layermeta_sample(s, 4, a, b);
	assert_int_equal(strlen(s[3]), LZ_LAYER_REPORT_TEXT - 1);
	assert_int_equal(s[3][500], ' ');
	assert_int_equal(s[3][501], 'b');
}

/* ---- xattrs -------------------------------------------------------------- */

static void test_lz_layermeta_xattrs__allow_list_and_duplicates(void **state)
{
	struct fixture *f = *state;
	int fd = openat(f->dir_fd, "f", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	set_xattrs(f, XATTRS({ "user.a", "first" }, { "trusted.t", "evil" },
			     { "user.a", "second" }, /* a second pax spelling: ignored */
			     { "user.", "empty suffix" },
			     { "security.selinux", "system_u:object_r:shadow_t:s0" },
			     { "user.overlay.opaque", "y" })); /* overlayfs's own metadata */
	assert_int_equal(lz_layermeta_xattrs(f->e, fd, "f", &f->rep, &f->err), 0);

	char buf[64];
	ssize_t n = fgetxattr(fd, "user.a", buf, sizeof(buf));
	if (n < 0) { /* filesystem without user xattrs: reported instead */
		assert_int_equal(f->rep.skipped_xattrs, 5);
		assert_string_equal(f->rep.skipped_xattr_samples[0], "f user.a");
	} else {
		assert_int_equal(n, 5);
		assert_memory_equal(buf, "first", 5);
		assert_int_equal(f->rep.skipped_xattrs, 4);
		assert_string_equal(f->rep.skipped_xattr_samples[0], "f trusted.t");
		assert_string_equal(f->rep.skipped_xattr_samples[1], "f user.");
		assert_string_equal(f->rep.skipped_xattr_samples[2], "f security.selinux");
		assert_string_equal(f->rep.skipped_xattr_samples[3], "f user.overlay.opaque");
	}
	assert_true(fgetxattr(fd, "trusted.t", buf, sizeof(buf)) < 0);
	assert_true(fgetxattr(fd, "user.overlay.opaque", buf, sizeof(buf)) < 0);
	close(fd);
}

static void test_lz_layermeta_xattrs__no_fd_skips_all(void **state)
{
	struct fixture *f = *state;
	set_xattrs(f, XATTRS({ "user.a", "1" }, { "user.b", "2" }));
	assert_int_equal(lz_layermeta_xattrs(f->e, -1, "", &f->rep, &f->err), 0);
	assert_int_equal(f->rep.skipped_xattrs, 2);
	assert_string_equal(f->rep.skipped_xattr_samples[0], ". user.a");
	assert_string_equal(f->rep.skipped_xattr_samples[1], ". user.b");
}

static void test_lz_layermeta_xattrs__too_many(void **state)
{
	struct fixture *f = *state;
	/* Exactly the limit, duplicates not counted. */
	archive_entry_xattr_add_entry(f->e, "user.x0", "again", 5);
	char name[32];
	for (int i = 0; i < LZ_LAYER_MAX_XATTRS; i++) {
		snprintf(name, sizeof(name), "user.x%d", i);
		archive_entry_xattr_add_entry(f->e, name, "v", 1);
	}
	assert_int_equal(lz_layermeta_xattrs(f->e, -1, "p", &f->rep, &f->err), 0);
	assert_int_equal(f->rep.skipped_xattrs, LZ_LAYER_MAX_XATTRS);

	archive_entry_xattr_add_entry(f->e, "user.one-more", "v", 1);
	assert_int_equal(lz_layermeta_xattrs(f->e, -1, "p", &f->rep, &f->err), -EINVAL);
	assert_int_equal(f->err.code, EINVAL);
	assert_string_equal(f->err.msg, "layer entry 'p' refused: too many xattrs");
}

/* ---- special objects ----------------------------------------------------- */

static void test_lz_layermeta_finish_special__fifo(void **state)
{
	struct fixture *f = *state;
	struct lz_layerpath p;
	assert_int_equal(lz_layerpath_parse("fifo", 4, &p, &f->err), 0);
	assert_int_equal(mkfifoat(f->dir_fd, "fifo", 0600), 0);
	archive_entry_set_perm(f->e, 0640);
	archive_entry_set_mtime(f->e, T_MTIME, 0);
	set_xattrs(f, XATTRS({ "user.a", "1" }));
	assert_int_equal(lz_layermeta_finish_special(f->e, f->dir_fd, &p, true, &f->rep, &f->err),
			 0);
	struct stat st;
	assert_int_equal(fstatat(f->dir_fd, "fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_mtim.tv_sec, T_MTIME);
	assert_int_equal(st.st_uid, geteuid());
	/* A FIFO carries no xattrs here: skipped and reported. */
	assert_int_equal(f->rep.skipped_xattrs, 1);
	assert_string_equal(f->rep.skipped_xattr_samples[0], "fifo user.a");
}

static void test_lz_layermeta_finish_special__symlink_not_followed(void **state)
{
	struct fixture *f = *state;
	struct lz_layerpath p;
	int fd = openat(f->dir_fd, "target", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	struct stat before, st;
	assert_int_equal(fstatat(f->dir_fd, "target", &before, 0), 0);
	assert_int_equal(symlinkat("target", f->dir_fd, "l"), 0);
	assert_int_equal(lz_layerpath_parse("l", 1, &p, &f->err), 0);
	archive_entry_set_perm(f->e, 0777);
	archive_entry_set_mtime(f->e, T_MTIME, 0);
	assert_int_equal(lz_layermeta_finish_special(f->e, f->dir_fd, &p, false, &f->rep, &f->err),
			 0);
	assert_int_equal(fstatat(f->dir_fd, "l", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mtim.tv_sec, T_MTIME); /* the link's own time */
	assert_int_equal(fstatat(f->dir_fd, "target", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_mtim.tv_sec, before.st_mtim.tv_sec);
}

static void test_lz_layermeta_finish_special__bad_owner_changes_nothing(void **state)
{
	struct fixture *f = *state;
	struct lz_layerpath p;
	assert_int_equal(lz_layerpath_parse("fifo", 4, &p, &f->err), 0);
	assert_int_equal(mkfifoat(f->dir_fd, "fifo", 0600), 0);
	archive_entry_set_uid(f->e, -1);
	archive_entry_set_perm(f->e, 0666);
	assert_int_equal(lz_layermeta_finish_special(f->e, f->dir_fd, &p, true, &f->rep, &f->err),
			 -EINVAL);
	assert_non_null(strstr(f->err.msg, "owner or group out of range"));
	struct stat st;
	assert_int_equal(fstatat(f->dir_fd, "fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_layermeta_owner__range),
		T(test_lz_layermeta_times__set_or_omit),
		cmocka_unit_test(test_lz_layermeta_sample__format_and_bounds),
		T(test_lz_layermeta_xattrs__allow_list_and_duplicates),
		T(test_lz_layermeta_xattrs__no_fd_skips_all),
		T(test_lz_layermeta_xattrs__too_many),
		T(test_lz_layermeta_finish_special__fifo),
		T(test_lz_layermeta_finish_special__symlink_not_followed),
		T(test_lz_layermeta_finish_special__bad_owner_changes_nothing),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
