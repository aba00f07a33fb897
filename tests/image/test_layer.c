/* Unit tests for core/image/layer.c, OCI layer application, through its
 * public entry point lz_layer_apply; the path normaliser it relies on has
 * its own suite (test_layerpath.c).
 *
 * Every test builds its layers with libarchive's writer into a memfd (plain
 * tar, gzip or zstd), applies them to <tmp>/root, and checks the tree. Next
 * to the staging root sit a sentinel directory <tmp>/outside that must stay
 * empty and a file <tmp>/secret that must keep one link and its content:
 * every refusal test checks that nothing was written outside.
 *
 * Root or not: CI runs these as root, which is the primary mode. Entries are
 * owned by the caller's IDs unless a test says otherwise, so everything but
 * the ownership assertions also passes unprivileged; the ownership test is
 * skipped when not root. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include <ftw.h>
#include <locale.h>
#include <sys/mman.h>

#include "image/layer.h"
#include "util/cleanup.h"

/* ---- fixture ------------------------------------------------------------- */

struct fixture {
	char base[64];
	int base_fd; /* O_PATH of base */
	int root_fd; /* O_PATH|O_DIRECTORY of base/root: the staging root */
};

static int unlock_cb(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_D || type == FTW_DNR)
		chmod(p, (st->st_mode & 07777) | 0700);
	return 0;
}

static int remove_cb(const char *p, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(p);
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	strcpy(f->base, "/tmp/lz-test-layer-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	f->base_fd = open(f->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->base_fd >= 0);
	assert_int_equal(mkdirat(f->base_fd, "root", 0755), 0);
	assert_int_equal(mkdirat(f->base_fd, "outside", 0755), 0);
	int fd = openat(f->base_fd, "secret", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "secret", 6), 6);
	close(fd);
	f->root_fd = openat(f->base_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->root_fd >= 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->root_fd);
	close(f->base_fd);
	/* Unprivileged runs: 0555 directories must be opened up first. */
	nftw(f->base, unlock_cb, 16, FTW_PHYS);
	nftw(f->base, remove_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* ---- archive builder ----------------------------------------------------- */

enum { F_TAR, F_GZIP, F_ZSTD };

#define T_MTIME 1600000000
#define M0 010000 /* mode 0000 (0 selects the default) */

struct ent {
	const char *path;
	unsigned type;        /* AE_IF*; 0 means AE_IFREG */
	unsigned mode;        /* permission bits; 0 means 0644 (0755 for dirs), M0 means 0 */
	const char *data;     /* regular-file content */
	size_t size;          /* content size when data is binary; else strlen */
	const char *target;   /* symlink target */
	const char *hardlink; /* hard-link target path */
	bool owner;           /* use uid/gid below instead of the caller's */
	uid_t uid;
	gid_t gid;
	time_t mtime; /* 0 means T_MTIME */
	unsigned rmajor, rminor;
	const char *xname, *xvalue;
};

#define ENTS(...)                              \
	((const struct ent[]){ __VA_ARGS__ }), \
		(sizeof((const struct ent[]){ __VA_ARGS__ }) / sizeof(struct ent))
#define OWN(u, g) .owner = true, .uid = (u), .gid = (g)

static void write_entry(struct archive *a, const struct ent *x)
{
	struct archive_entry *e = archive_entry_new();
	assert_non_null(e);
	unsigned type = x->type ? x->type : AE_IFREG;
	archive_entry_set_pathname(e, x->path);
	archive_entry_set_filetype(e, type);
	mode_t perm = x->mode ? x->mode : type == AE_IFDIR ? 0755 : 0644;
	archive_entry_set_perm(e, x->mode == M0 ? 0 : perm);
	archive_entry_set_uid(e, x->owner ? x->uid : geteuid());
	archive_entry_set_gid(e, x->owner ? x->gid : getegid());
	archive_entry_set_mtime(e, x->mtime ? x->mtime : T_MTIME, 0);
	size_t size = 0;
	if (x->hardlink) {
		archive_entry_set_hardlink(e, x->hardlink);
		archive_entry_set_size(e, 0);
	} else if (type == AE_IFREG) {
		size = x->size ? x->size : x->data ? strlen(x->data) : 0;
		archive_entry_set_size(e, (la_int64_t)size);
	}
	if (x->target)
		archive_entry_set_symlink(e, x->target);
	if (type == AE_IFCHR || type == AE_IFBLK) {
		archive_entry_set_rdevmajor(e, x->rmajor);
		archive_entry_set_rdevminor(e, x->rminor);
	}
	if (x->xname)
		archive_entry_xattr_add_entry(e, x->xname, x->xvalue, strlen(x->xvalue));
	int r = archive_write_header(a, e);
	if (r != ARCHIVE_OK)
		print_error("archive_write_header '%s': %s\n", x->path, archive_error_string(a));
	assert_int_equal(r, ARCHIVE_OK);
	if (size > 0)
		assert_int_equal(archive_write_data(a, x->data, size), (la_ssize_t)size);
	archive_entry_free(e);
}

/* A memfd at offset 0 holding the layer. */
static int build(const struct ent *ents, size_t n, int filter)
{
	int fd = memfd_create("layer", MFD_CLOEXEC);
	assert_true(fd >= 0);
	struct archive *a = archive_write_new();
	assert_non_null(a);
	assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	if (filter == F_GZIP)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	else if (filter == F_ZSTD)
		assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++)
		write_entry(a, &ents[i]);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static int apply_fd(struct fixture *f, int fd, const struct lz_layer_options *opts,
		    struct lz_layer_report *rep, struct lz_err *err)
{
	lz_err_clear(err);
	return lz_layer_apply(f->root_fd, fd, opts, rep, err);
}

static void apply_ok_rep(struct fixture *f, int filter, struct lz_layer_report *rep,
			 const struct ent *ents, size_t n)
{
	struct lz_err err;
	int fd = build(ents, n, filter);
	int r = apply_fd(f, fd, NULL, rep, &err);
	close(fd);
	if (r != 0)
		print_error("lz_layer_apply: %d %s\n", r, err.msg);
	assert_int_equal(r, 0);
}

static void apply_ok(struct fixture *f, const struct ent *ents, size_t n)
{
	struct lz_layer_report rep;
	apply_ok_rep(f, F_TAR, &rep, ents, n);
	assert_int_equal(rep.entries, n);
}

#define APPLY_OK(f, ...) apply_ok(f, ENTS(__VA_ARGS__))

/* Applies a layer that must be refused with code, a message containing
 * needle, and the report untouched. */
static void apply_fail(struct fixture *f, int code, const char *needle, const struct ent *ents,
		       size_t n)
{
	struct lz_err err;
	struct lz_layer_report rep, pristine;
	memset(&rep, 0xa5, sizeof(rep));
	memcpy(&pristine, &rep, sizeof(rep));
	int fd = build(ents, n, F_TAR);
	int r = apply_fd(f, fd, NULL, &rep, &err);
	close(fd);
	if (r != code || strstr(err.msg, needle) == NULL)
		print_error("lz_layer_apply: got %d '%s', want %d '...%s...'\n", r, err.msg, code,
			    needle);
	assert_int_equal(r, code);
	assert_int_equal(err.code, -code);
	assert_non_null(strstr(err.msg, needle));
	assert_memory_equal(&rep, &pristine, sizeof(rep));
}

#define APPLY_FAIL(f, code, needle, ...) apply_fail(f, code, needle, ENTS(__VA_ARGS__))

/* ---- tree assertions ----------------------------------------------------- */

static bool exists(struct fixture *f, const char *path)
{
	struct stat st;
	return fstatat(f->root_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static struct stat lst(struct fixture *f, const char *path)
{
	struct stat st;
	if (fstatat(f->root_fd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
		print_error("missing '%s': %s\n", path, strerror(errno));
	assert_int_equal(fstatat(f->root_fd, path, &st, AT_SYMLINK_NOFOLLOW), 0);
	return st;
}

static void assert_content(struct fixture *f, const char *path, const char *want)
{
	char buf[256];
	int fd = openat(f->root_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

static void assert_link(struct fixture *f, const char *path, const char *want)
{
	char buf[LZ_LAYER_PATH_MAX + 1];
	ssize_t n = readlinkat(f->root_fd, path, buf, sizeof(buf) - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
}

static void assert_mode(struct fixture *f, const char *path, mode_t type, mode_t perm)
{
	struct stat st = lst(f, path);
	assert_int_equal(st.st_mode & S_IFMT, type);
	assert_int_equal(st.st_mode & 07777, perm);
}

static size_t count_dir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	DIR *d = fdopendir(fd);
	assert_non_null(d);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* base holds exactly root, outside (empty) and secret (one link, intact). */
static void assert_outside_untouched(struct fixture *f)
{
	assert_int_equal(count_dir(f->base_fd, "."), 3);
	assert_int_equal(count_dir(f->base_fd, "outside"), 0);
	struct stat st;
	assert_int_equal(fstatat(f->base_fd, "secret", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(st.st_size, 6);
}

/* ---- entry types --------------------------------------------------------- */

static void test_lz_layer_apply__regular_files_and_modes(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "./etc/hostname", .data = "box\n" },
		 { .path = "bin/su", .mode = 04755, .data = "ELF" },
		 { .path = "bin/wall", .mode = 02755, .data = "ELF2" },
		 { .path = "empty", .mode = 0600 },
		 { .path = "secret", .mode = M0, .data = "x" });
	assert_mode(f, "etc", S_IFDIR, 0755); /* implied */
	assert_mode(f, "etc/hostname", S_IFREG, 0644);
	assert_content(f, "etc/hostname", "box\n");
	assert_mode(f, "bin/su", S_IFREG, 04755);
	assert_content(f, "bin/su", "ELF");
	assert_mode(f, "bin/wall", S_IFREG, 02755);
	assert_mode(f, "empty", S_IFREG, 0600);
	assert_int_equal(lst(f, "empty").st_size, 0);
	assert_mode(f, "secret", S_IFREG, 0000);
	assert_int_equal(lst(f, "etc/hostname").st_mtim.tv_sec, T_MTIME);
	assert_outside_untouched(f);
}

static void test_lz_layer_apply__filters(void **state)
{
	struct fixture *f = *state;
	static const int filters[] = { F_TAR, F_GZIP, F_ZSTD };
	static const char *const names[] = { "tar", "gzip", "zstd" };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(filters); i++) {
		char path[32], data[32];
		snprintf(path, sizeof(path), "d/%s", names[i]);
		snprintf(data, sizeof(data), "via %s", names[i]);
		struct lz_layer_report rep;
		apply_ok_rep(f, filters[i], &rep, ENTS({ .path = path, .data = data }));
		assert_int_equal(rep.entries, 1);
		assert_int_equal(rep.regular_bytes, strlen(data));
		assert_true(rep.input_bytes > 0);
		assert_content(f, path, data);
	}
}

static void test_lz_layer_apply__directories(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "./", .type = AE_IFDIR, .mode = 0755, .mtime = 1111 },
		 { .path = "ro/", .type = AE_IFDIR, .mode = 0555, .mtime = 2222 },
		 { .path = "ro/file", .data = "inside read-only" },
		 { .path = "tmp", .type = AE_IFDIR, .mode = 01777, .mtime = 3333 },
		 { .path = "tmp/x", .data = "x" },
		 { .path = "sgid/", .type = AE_IFDIR, .mode = 02775 });
	assert_mode(f, ".", S_IFDIR, 0755);
	assert_int_equal(lst(f, ".").st_mtim.tv_sec, 1111);
	assert_mode(f, "ro", S_IFDIR, 0555);
	assert_int_equal(lst(f, "ro").st_mtim.tv_sec, 2222); /* after its content */
	assert_content(f, "ro/file", "inside read-only");
	assert_mode(f, "tmp", S_IFDIR, 01777);
	assert_int_equal(lst(f, "tmp").st_mtim.tv_sec, 3333);
	assert_mode(f, "sgid", S_IFDIR, 02775);

	/* An existing directory is updated in place and keeps its content;
	 * the last entry for a directory wins. */
	APPLY_OK(f, { .path = "ro", .type = AE_IFDIR, .mode = 0700, .mtime = 4444 },
		 { .path = "tmp", .type = AE_IFDIR, .mode = 0711 },
		 { .path = "tmp", .type = AE_IFDIR, .mode = 0750, .mtime = 5555 });
	assert_mode(f, "ro", S_IFDIR, 0700);
	assert_int_equal(lst(f, "ro").st_mtim.tv_sec, 4444);
	assert_content(f, "ro/file", "inside read-only");
	assert_mode(f, "tmp", S_IFDIR, 0750);
	assert_int_equal(lst(f, "tmp").st_mtim.tv_sec, 5555);
	assert_true(exists(f, "tmp/x"));
}

static void test_lz_layer_apply__symlinks(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "bin", .type = AE_IFLNK, .target = "usr/bin", .mtime = 7777 },
		 { .path = "etc/passwd", .type = AE_IFLNK, .target = "/etc/passwd" },
		 { .path = "up", .type = AE_IFLNK, .target = "../../.." });
	assert_true(S_ISLNK(lst(f, "bin").st_mode));
	assert_link(f, "bin", "usr/bin");
	assert_link(f, "etc/passwd", "/etc/passwd");
	assert_link(f, "up", "../../..");
	assert_int_equal(lst(f, "bin").st_mtim.tv_sec, 7777);
	assert_outside_untouched(f);
}

static void test_lz_layer_apply__hardlinks(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "usr/bin/perl5", .mode = 0755, .data = "perl" },
		 { .path = "usr/bin/perl", .hardlink = "usr/bin/perl5" },
		 { .path = "./other/perl", .hardlink = "./usr/bin/perl5" },
		 { .path = "usr/bin/perl", .hardlink = "usr/bin/perl" }); /* self: no-op */
	struct stat a = lst(f, "usr/bin/perl5");
	struct stat b = lst(f, "usr/bin/perl");
	struct stat c = lst(f, "other/perl");
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(a.st_ino, c.st_ino);
	assert_int_equal(a.st_nlink, 3);
	assert_mode(f, "usr/bin/perl", S_IFREG, 0755);

	/* Hard link to a file of a lower layer, replacing an existing file. */
	APPLY_OK(f, { .path = "usr/bin/perl", .data = "other" });
	APPLY_OK(f, { .path = "usr/bin/perl", .hardlink = "usr/bin/perl5" });
	assert_int_equal(lst(f, "usr/bin/perl").st_ino, a.st_ino);
}

static void test_lz_layer_apply__fifo(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "run/initctl", .type = AE_IFIFO, .mode = 0640, .mtime = 9999 });
	assert_mode(f, "run/initctl", S_IFIFO, 0640);
	assert_int_equal(lst(f, "run/initctl").st_mtim.tv_sec, 9999);
}

/* Devices are reported, never made, as root too: a character device 0/0
 * (which a user namespace may create) is an overlay whiteout. */
static void test_lz_layer_apply__devices_are_reported_never_made(void **state)
{
	struct fixture *f = *state;
	struct lz_layer_report rep;
	apply_ok_rep(f, F_TAR, &rep,
		     ENTS({ .path = "dev/null", .type = AE_IFCHR, .mode = 0666, .rmajor = 1,
			    .rminor = 3 },
			  { .path = "dev/loop0", .type = AE_IFBLK, .mode = 0660, .rmajor = 7 },
			  { .path = "etc/hidden", .type = AE_IFCHR, .mode = 0644 }));
	assert_int_equal(rep.skipped_devices, 3);
	assert_string_equal(rep.skipped_device_paths[0], "dev/null");
	assert_string_equal(rep.skipped_device_paths[1], "dev/loop0");
	assert_string_equal(rep.skipped_device_paths[2], "etc/hidden");
	assert_false(exists(f, "dev/null"));
	assert_false(exists(f, "dev/loop0"));
	assert_false(exists(f, "etc/hidden"));
}

static void test_lz_layer_apply__ownership(void **state)
{
	struct fixture *f = *state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	APPLY_OK(f, { .path = "home/u", .type = AE_IFDIR, .mode = 0750, OWN(1234, 5678) },
		 { .path = "home/u/su", .mode = 04755, .data = "x", OWN(1234, 5678) },
		 { .path = "home/u/sg", .mode = 02755, .data = "x", OWN(1234, 5678) },
		 { .path = "home/u/l", .type = AE_IFLNK, .target = "su", OWN(4321, 8765) },
		 { .path = "home/u/p", .type = AE_IFIFO, OWN(11, 12) });
	struct stat st = lst(f, "home/u");
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 5678);
	assert_int_equal(st.st_mode & 07777, 0750);
	st = lst(f, "home/u/su");
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 5678);
	assert_int_equal(st.st_mode & 07777, 04755); /* chmod after chown */
	st = lst(f, "home/u/sg");
	assert_int_equal(st.st_mode & 07777, 02755);
	st = lst(f, "home/u/l");
	assert_int_equal(st.st_uid, 4321);
	assert_int_equal(st.st_gid, 8765);
	st = lst(f, "home/u/p");
	assert_int_equal(st.st_uid, 11);
	assert_int_equal(st.st_gid, 12);
}

static void test_lz_layer_apply__xattrs(void **state)
{
	struct fixture *f = *state;
	struct lz_layer_report rep;
	apply_ok_rep(f, F_TAR, &rep,
		     ENTS({ .path = "f", .data = "x", .xname = "user.lazaret", .xvalue = "yes" },
			  { .path = "g", .data = "y", .xname = "trusted.evil", .xvalue = "no" },
			  { .path = "l", .type = AE_IFLNK, .target = "f", .xname = "user.l",
			    .xvalue = "z" }));
	char buf[16];
	int fd = openat(f->root_fd, "f", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ssize_t n = fgetxattr(fd, "user.lazaret", buf, sizeof(buf));
	close(fd);
	if (n < 0) { /* filesystem without user xattrs: reported instead */
		assert_int_equal(rep.skipped_xattrs, 3);
		assert_string_equal(rep.skipped_xattr_samples[0], "f user.lazaret");
		return;
	}
	assert_int_equal(n, 3);
	assert_memory_equal(buf, "yes", 3);
	/* trusted.* is never applied; symlinks carry none. */
	assert_int_equal(rep.skipped_xattrs, 2);
	assert_string_equal(rep.skipped_xattr_samples[0], "g trusted.evil");
	assert_string_equal(rep.skipped_xattr_samples[1], "l user.l");
	fd = openat(f->root_fd, "g", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(fgetxattr(fd, "trusted.evil", buf, sizeof(buf)) < 0);
	close(fd);
}

/* Go and Python write non-ASCII names as UTF-8 pax "path" records. Read in
 * the C locale, libarchive warns that it cannot convert them and hands out
 * the bytes unchanged: the layer must still apply, byte for byte. */
static void test_lz_layer_apply__utf8_pax_path(void **state)
{
	struct fixture *f = *state;
	static const char name[] = "caf\xc3\xa9/\xe2\x82\xac";
	if (setlocale(LC_CTYPE, "C.UTF-8") == NULL) {
		skip();
		return;
	}
	int fd = build(ENTS({ .path = name, .data = "euro" }), F_TAR);
	assert_non_null(setlocale(LC_CTYPE, "C"));
	char buf[4096];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	assert_true(n > 0);
	assert_non_null(memmem(buf, (size_t)n, "path=caf\xc3\xa9", 10));
	struct lz_layer_report rep;
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, NULL, &rep, &err), 0);
	close(fd);
	assert_int_equal(rep.entries, 1);
	assert_content(f, name, "euro");
}

static void test_lz_layer_apply__empty_archive(void **state)
{
	struct fixture *f = *state;
	struct lz_layer_report rep;
	apply_ok_rep(f, F_GZIP, &rep, NULL, 0);
	assert_int_equal(rep.entries, 0);
	assert_int_equal(count_dir(f->root_fd, "."), 0);
}

/* ---- replacement --------------------------------------------------------- */

static void test_lz_layer_apply__replaces_dir_with_file(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "x/child/deep", .data = "lower" },
		 { .path = "x/l", .type = AE_IFLNK, .target = "/" });
	APPLY_OK(f, { .path = "x", .data = "now a file" });
	assert_mode(f, "x", S_IFREG, 0644);
	assert_content(f, "x", "now a file");
}

static void test_lz_layer_apply__replaces_file_with_dir(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "y", .data = "lower file" });
	APPLY_OK(f, { .path = "y", .type = AE_IFDIR, .mode = 0711 },
		 { .path = "y/z", .data = "z" });
	assert_mode(f, "y", S_IFDIR, 0711);
	assert_content(f, "y/z", "z");
}

static void test_lz_layer_apply__replaces_symlink_without_following(void **state)
{
	struct fixture *f = *state;
	char target[96];
	snprintf(target, sizeof(target), "%s/outside", f->base);
	APPLY_OK(f, { .path = "l", .type = AE_IFLNK, .target = target },
		 { .path = "m", .type = AE_IFLNK, .target = target });
	APPLY_OK(f, { .path = "l", .data = "replaced" }, { .path = "m", .type = AE_IFDIR },
		 { .path = "m/inside", .data = "inside" });
	assert_mode(f, "l", S_IFREG, 0644);
	assert_content(f, "l", "replaced");
	assert_mode(f, "m", S_IFDIR, 0755);
	assert_content(f, "m/inside", "inside");
	assert_outside_untouched(f);
}

/* ---- whiteouts ----------------------------------------------------------- */

static void test_lz_layer_apply__whiteout_file_and_dir(void **state)
{
	struct fixture *f = *state;
	struct lz_layer_report rep;
	/* Emptying a read-only directory takes root (the worker is root in its
	 * user namespace); unprivileged runs use a writable one. */
	unsigned ro_mode = geteuid() == 0 ? 0555 : 0755;
	APPLY_OK(f, { .path = "etc/a", .data = "a" }, { .path = "etc/b", .data = "b" },
		 { .path = "dir/x/y", .data = "y" },
		 { .path = "dir/x/l", .type = AE_IFLNK, .target = "/etc" },
		 { .path = "ro", .type = AE_IFDIR, .mode = ro_mode },
		 { .path = "ro/f", .data = "f" });
	apply_ok_rep(f, F_GZIP, &rep,
		     ENTS({ .path = "etc/.wh.a" }, { .path = ".wh.dir" }, { .path = "./.wh.ro" },
			  { .path = "etc/.wh.missing" }, { .path = "nodir/.wh.missing" }));
	assert_int_equal(rep.whiteouts, 5);
	assert_false(exists(f, "etc/a"));
	assert_content(f, "etc/b", "b");
	assert_false(exists(f, "dir"));
	assert_false(exists(f, "ro"));
	assert_false(exists(f, "etc/.wh.a"));
	assert_false(exists(f, ".wh.dir"));
	assert_false(exists(f, "etc/.wh.missing"));
	assert_false(exists(f, "nodir"));
	assert_outside_untouched(f);
}

static void test_lz_layer_apply__whiteout_spares_same_layer(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "d/lower", .data = "lower" });
	/* d/new is written by this layer before the whiteout of d: only the
	 * lower content of d goes; f written by this layer stays. */
	APPLY_OK(f, { .path = "d/new", .data = "new" }, { .path = ".wh.d" },
		 { .path = "f", .data = "f" }, { .path = ".wh.f" });
	assert_content(f, "d/new", "new");
	assert_false(exists(f, "d/lower"));
	assert_content(f, "f", "f");
}

static void test_lz_layer_apply__opaque_dir(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "d/old1", .data = "1" }, { .path = "d/sub/old2", .data = "2" },
		 { .path = "d/keep/oldinner", .data = "3" },
		 { .path = "d/l", .type = AE_IFLNK, .target = "/" },
		 { .path = "other/stay", .data = "4" });
	APPLY_OK(f, { .path = "d/new1", .data = "n1" }, { .path = "d/keep/inner", .data = "n3" },
		 { .path = "d/.wh..wh..opq" }, { .path = "d/new2", .data = "n2" });
	assert_content(f, "d/new1", "n1");
	assert_content(f, "d/new2", "n2");
	assert_content(f, "d/keep/inner", "n3");
	assert_false(exists(f, "d/keep/oldinner"));
	assert_false(exists(f, "d/old1"));
	assert_false(exists(f, "d/sub"));
	assert_false(exists(f, "d/l"));
	assert_false(exists(f, "d/.wh..wh..opq"));
	assert_int_equal(count_dir(f->root_fd, "d"), 3);
	assert_content(f, "other/stay", "4");
}

static void test_lz_layer_apply__opaque_dir_first(void **state)
{
	struct fixture *f = *state;
	APPLY_OK(f, { .path = "d/old", .data = "1" });
	APPLY_OK(f, { .path = "d", .type = AE_IFDIR, .mode = 0750 }, { .path = "d/.wh..wh..opq" },
		 { .path = "d/new", .data = "n" }, { .path = "e/.wh..wh..opq" },
		 { .path = "d/.wh..wh.plnk" });
	assert_mode(f, "d", S_IFDIR, 0750);
	assert_int_equal(count_dir(f->root_fd, "d"), 1);
	assert_content(f, "d/new", "n");
	assert_false(exists(f, "e")); /* opaque marker of a missing dir: nothing */
}

static void test_lz_layer_apply__whiteout_refusals(void **state)
{
	struct fixture *f = *state;
	APPLY_FAIL(f, -EINVAL, "whiteout names no entry", { .path = "a/.wh..." });
	APPLY_FAIL(f, -EINVAL, "whiteout names no entry", { .path = ".wh." });
	APPLY_FAIL(f, -EINVAL, "whiteout name used as a directory",
		   { .path = ".wh.a/b", .data = "x" });
	/* Whiteout through a symlink to outside the tree. */
	APPLY_FAIL(f, -EINVAL, "symbolic link",
		   { .path = "s", .type = AE_IFLNK, .target = f->base },
		   { .path = "s/.wh.secret" });
	APPLY_FAIL(f, -EINVAL, "symbolic link", { .path = "s/.wh..wh..opq" });
	assert_outside_untouched(f);
}

/* ---- refusals ------------------------------------------------------------ */

static void test_lz_layer_apply__refuses_traversal(void **state)
{
	struct fixture *f = *state;
	char abs[96];
	snprintf(abs, sizeof(abs), "%s/outside/abs", f->base);
	APPLY_FAIL(f, -EINVAL, "'..' component", { .path = "../x", .data = "x" });
	APPLY_FAIL(f, -EINVAL, "'..' component", { .path = "../outside/x", .data = "x" });
	APPLY_FAIL(f, -EINVAL, "absolute path", { .path = abs, .data = "x" });
	APPLY_FAIL(f, -EINVAL, "'..' component", { .path = "a/../../x", .data = "x" });
	APPLY_FAIL(f, -EINVAL, "'..' component", { .path = "ok", .data = "x" },
		   { .path = "a/../../outside/x", .type = AE_IFDIR });
	assert_outside_untouched(f);
	assert_false(exists(f, "a")); /* refused before any write */
}

static void test_lz_layer_apply__refuses_symlink_then_write(void **state)
{
	struct fixture *f = *state;
	char target[96];
	snprintf(target, sizeof(target), "%s/outside", f->base);
	APPLY_FAIL(f, -EINVAL, "layer entry 'a/f' refused: 'a' is or crosses a symbolic link",
		   { .path = "a", .type = AE_IFLNK, .target = target },
		   { .path = "a/f", .data = "pwned" });
	APPLY_FAIL(f, -EINVAL, "symbolic link", { .path = "a/sub/f", .data = "pwned" });
	APPLY_FAIL(f, -EINVAL, "symbolic link", { .path = "a/d", .type = AE_IFDIR });
	APPLY_FAIL(f, -EINVAL, "symbolic link", { .path = "a/l", .type = AE_IFLNK, .target = "x" });
	assert_outside_untouched(f);
}

static void test_lz_layer_apply__refuses_relative_symlink_then_write(void **state)
{
	struct fixture *f = *state;
	APPLY_FAIL(f, -EINVAL, "'a' is or crosses a symbolic link",
		   { .path = "a", .type = AE_IFLNK, .target = ".." },
		   { .path = "a/x", .data = "pwned" });
	APPLY_FAIL(f, -EINVAL, "symbolic link", { .path = "b", .type = AE_IFLNK, .target = "." },
		   { .path = "b/b/b/x", .data = "pwned" });
	assert_outside_untouched(f);
	assert_false(exists(f, "x"));
}

static void test_lz_layer_apply__refuses_hardlink_escapes(void **state)
{
	struct fixture *f = *state;
	char abs[96];
	snprintf(abs, sizeof(abs), "%s/secret", f->base);
	APPLY_FAIL(f, -EINVAL, "'..' component", { .path = "h", .hardlink = "../secret" });
	APPLY_FAIL(f, -EINVAL, "absolute path", { .path = "h", .hardlink = abs });
	/* Through a symlink inside the tree and one pointing outside. */
	APPLY_FAIL(f, -EINVAL, "symbolic link", { .path = "d/f", .data = "f" },
		   { .path = "s", .type = AE_IFLNK, .target = "d" },
		   { .path = "h", .hardlink = "s/f" });
	APPLY_FAIL(f, -EINVAL, "symbolic link",
		   { .path = "o", .type = AE_IFLNK, .target = f->base },
		   { .path = "h", .hardlink = "o/secret" });
	APPLY_FAIL(f, -EINVAL, "does not exist", { .path = "h", .hardlink = "missing" });
	APPLY_FAIL(f, -EINVAL, "does not exist", { .path = "h", .hardlink = "nodir/missing" });
	APPLY_FAIL(f, -EINVAL, "is a directory", { .path = "dd", .type = AE_IFDIR },
		   { .path = "h", .hardlink = "dd" });
	APPLY_FAIL(f, -EINVAL, "root directory", { .path = "h", .hardlink = "./" });
	assert_outside_untouched(f);
	assert_false(exists(f, "h"));
}

static void test_lz_layer_apply__refuses_long_paths(void **state)
{
	struct fixture *f = *state;
	char name[300], path[LZ_LAYER_PATH_MAX + 16];
	memset(name, 'n', 256);
	name[256] = '\0';
	APPLY_FAIL(f, -EINVAL, "longer than 255", { .path = name, .data = "x" });
	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	for (size_t i = 200; i < sizeof(path) - 1; i += 201)
		path[i] = '/';
	APPLY_FAIL(f, -EINVAL, "longer than 4096", { .path = path, .data = "x" });
	assert_int_equal(count_dir(f->root_fd, "."), 0);
}

static void test_lz_layer_apply__refuses_root_as_non_directory(void **state)
{
	struct fixture *f = *state;
	APPLY_FAIL(f, -EINVAL, "the root can only be a directory", { .path = ".", .data = "x" });
	APPLY_FAIL(f, -EINVAL, "the root can only be a directory",
		   { .path = ".", .type = AE_IFLNK, .target = "/" });
}

static void test_lz_layer_apply__refuses_zip(void **state)
{
	struct fixture *f = *state;
	int fd = memfd_create("zip", MFD_CLOEXEC);
	assert_true(fd >= 0);
	struct archive *a = archive_write_new();
	assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	write_entry(a, &(struct ent){ .path = "zipped", .data = "zip" });
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, NULL, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "opening layer"));
	close(fd);
	assert_false(exists(f, "zipped"));
}

/* n deterministic incompressible bytes, malloc'd. */
static char *noise_of(size_t n)
{
	char *buf = malloc(n);
	assert_non_null(buf);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (char)x;
	}
	return buf;
}

static void test_lz_layer_apply__refuses_truncated_gzip(void **state)
{
	struct fixture *f = *state;
	size_t n = 512 * 1024;
	char *noise = noise_of(n);
	int fd = build(ENTS({ .path = "big", .data = noise, .size = n },
			    { .path = "after", .data = "a" }),
		       F_GZIP);
	free(noise);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(ftruncate(fd, st.st_size / 2), 0);
	struct lz_err err;
	int r = apply_fd(f, fd, NULL, NULL, &err);
	close(fd);
	assert_int_equal(r, -EINVAL);
	assert_non_null(strstr(err.msg, "layer entry 'big'"));
	assert_false(exists(f, "after"));
}

static void test_lz_layer_apply__refuses_corrupt_gzip(void **state)
{
	struct fixture *f = *state;
	int fd = build(ENTS({ .path = "file", .data = "content that gets corrupted" }), F_GZIP);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	/* Keep the gzip header (10 bytes); replace the deflate stream. */
	char junk[64];
	memset(junk, 0xff, sizeof(junk));
	assert_int_equal(pwrite(fd, junk, sizeof(junk), 10), (ssize_t)sizeof(junk));
	struct lz_err err;
	int r = apply_fd(f, fd, NULL, NULL, &err);
	close(fd);
	assert_int_equal(r, -EINVAL);
	assert_true(err.msg[0] != '\0');
	assert_false(exists(f, "file"));
}

static void test_lz_layer_apply__bad_descriptors(void **state)
{
	struct fixture *f = *state;
	struct lz_err err;
	assert_int_equal(lz_layer_apply(-1, 0, NULL, NULL, &err), -EBADF);
	assert_int_equal(lz_layer_apply(f->root_fd, -1, NULL, NULL, &err), -EBADF);
	assert_int_equal(err.code, EBADF);
	/* A directory is not a layer. */
	int fd = openat(f->base_fd, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(lz_layer_apply(f->root_fd, fd, NULL, NULL, &err) < 0);
	close(fd);
}

/* ---- what the image declares: compression and diff_id ------------------- */

/* The bytes of fd (read from offset 0) in a malloc'd buffer of *ret_n. */
static char *slurp_fd(int fd, size_t *ret_n)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	char *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), (ssize_t)st.st_size);
	*ret_n = (size_t)st.st_size;
	return buf;
}

static void diff_id_of(const void *data, size_t n, char out[LZ_OCI_DIGEST_STR_MAX])
{
	uint8_t md[32];
	unsigned int mdn = 0;
	assert_int_equal(EVP_Digest(data, n, md, &mdn, EVP_sha256(), NULL), 1);
	strcpy(out, "sha256:");
	for (size_t i = 0; i < sizeof(md); i++)
		sprintf(out + 7 + 2 * i, "%02x", md[i]);
}

/* A memfd holding data[0..n) as it is (F_TAR) or compressed with filter:
 * exactly these bytes decompressed, so their digest is the diff_id. */
static int compressed(const char *data, size_t n, int filter)
{
	int fd = memfd_create("blob", MFD_CLOEXEC);
	assert_true(fd >= 0);
	if (filter == F_TAR) {
		assert_int_equal(write(fd, data, n), (ssize_t)n);
		assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
		return fd;
	}
	struct archive *a = archive_write_new();
	assert_non_null(a);
	assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
	if (filter == F_GZIP)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	else
		assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "stream");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)n);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	assert_int_equal(archive_write_data(a, data, n), (la_ssize_t)n);
	archive_entry_free(e);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

/* compressed(), twice: inner inside outer. */
static int compressed_twice(const char *data, size_t n, int inner, int outer)
{
	int fd = compressed(data, n, inner);
	size_t m;
	char *once = slurp_fd(fd, &m);
	close(fd);
	fd = compressed(once, m, outer);
	free(once);
	return fd;
}

/* The uncompressed tar of one file "file" (with tail appended: bytes after
 * the end-of-archive marker) and its diff_id. */
static char *layer_tar(const char *tail, size_t tail_n, size_t *ret_n,
		       char diff_id[LZ_OCI_DIGEST_STR_MAX])
{
	int fd = build(ENTS({ .path = "file", .data = "declared content" }), F_TAR);
	size_t n;
	char *tar = slurp_fd(fd, &n);
	close(fd);
	char *all = realloc(tar, n + tail_n + 1);
	assert_non_null(all);
	if (tail_n > 0)
		memcpy(all + n, tail, tail_n);
	*ret_n = n + tail_n;
	diff_id_of(all, *ret_n, diff_id);
	return all;
}

static enum lz_oci_compression declared_as(int filter)
{
	return filter == F_GZIP ? LZ_OCI_GZIP : filter == F_ZSTD ? LZ_OCI_ZSTD : LZ_OCI_TAR;
}

/* Applies fd with decl declared; a refusal leaves the report untouched. */
static int apply_declared(struct fixture *f, int fd, const struct lz_oci_layer *decl,
			  struct lz_err *err)
{
	struct lz_layer_options opts = { .declared = decl };
	struct lz_layer_report rep, pristine;
	memset(&rep, 0xa5, sizeof(rep));
	memcpy(&pristine, &rep, sizeof(rep));
	int r = apply_fd(f, fd, &opts, &rep, err);
	if (r < 0)
		assert_memory_equal(&rep, &pristine, sizeof(rep));
	else
		assert_int_equal(rep.entries, 1);
	return r;
}

/* apply_declared of data[0..n) compressed with filter. */
static int apply_compressed(struct fixture *f, const char *data, size_t n, int filter,
			    const struct lz_oci_layer *decl, struct lz_err *err)
{
	int fd = compressed(data, n, filter);
	int r = apply_declared(f, fd, decl, err);
	close(fd);
	return r;
}

static void test_lz_layer_apply__declared_layer_with_its_diff_id_applies(void **state)
{
	struct fixture *f = *state;
	static const int filters[] = { F_TAR, F_GZIP, F_ZSTD };
	struct lz_oci_layer decl = { .digest = "" };
	size_t n;
	char *tar = layer_tar(NULL, 0, &n, decl.diff_id);
	for (size_t i = 0; i < LZ_ARRAY_SIZE(filters); i++) {
		struct lz_err err;
		decl.compression = declared_as(filters[i]);
		int r = apply_compressed(f, tar, n, filters[i], &decl, &err);
		if (r != 0)
			fail_msg("filter %d: %d %s", filters[i], r, err.msg);
		assert_content(f, "file", "declared content");
		assert_int_equal(unlinkat(f->root_fd, "file", 0), 0);
	}
	free(tar);
}

/* The config's rootfs.diff_ids names other content: refused, naming both
 * digests. */
static void test_lz_layer_apply__diff_id_mismatch_refused(void **state)
{
	struct fixture *f = *state;
	static const int filters[] = { F_TAR, F_GZIP, F_ZSTD };
	struct lz_oci_layer decl = { .digest = "" };
	char actual[LZ_OCI_DIGEST_STR_MAX];
	size_t n;
	char *tar = layer_tar(NULL, 0, &n, actual);
	diff_id_of("other content", 13, decl.diff_id);
	for (size_t i = 0; i < LZ_ARRAY_SIZE(filters); i++) {
		struct lz_err err;
		decl.compression = declared_as(filters[i]);
		int r = apply_compressed(f, tar, n, filters[i], &decl, &err);
		if (r != -EBADMSG)
			fail_msg("filter %d: want -EBADMSG, got %d (%s)", filters[i], r, err.msg);
		assert_int_equal(err.code, EBADMSG);
		assert_non_null(strstr(err.msg, actual));
		assert_non_null(strstr(err.msg, decl.diff_id));
		assert_non_null(strstr(err.msg, "diff_ids"));
	}
	free(tar);
	assert_outside_untouched(f);
}

/* What follows the tar end-of-archive marker is part of the uncompressed
 * stream the diff_id names: content hidden there is hashed too, and a
 * diff_id over the tar alone does not match. The tail spans many blocks of
 * the decompressed stream, beyond what the tar reader reads ahead. */
static void test_lz_layer_apply__diff_id_covers_bytes_after_the_archive_end(void **state)
{
	struct fixture *f = *state;
	size_t tail_n = 256 * 1024;
	char *tail = noise_of(tail_n);
	struct lz_oci_layer decl = { .compression = LZ_OCI_GZIP };
	char without_tail[LZ_OCI_DIGEST_STR_MAX];
	size_t n, m;
	char *tar = layer_tar(tail, tail_n, &n, decl.diff_id);
	free(tail);
	free(layer_tar(NULL, 0, &m, without_tail));
	assert_int_equal(m + tail_n, n);

	struct lz_err err;
	assert_int_equal(apply_compressed(f, tar, n, F_GZIP, &decl, &err), 0);
	assert_content(f, "file", "declared content");

	memcpy(decl.diff_id, without_tail, sizeof(without_tail));
	assert_int_equal(apply_compressed(f, tar, n, F_GZIP, &decl, &err), -EBADMSG);
	free(tar);
}

/* Zeros after the marker cost nothing compressed; only LZ_LAYER_TAIL_MAX
 * bytes of them are read, even with the diff_id right. */
static void test_lz_layer_apply__refuses_a_long_tail_after_the_archive(void **state)
{
	struct fixture *f = *state;
	size_t tail_n = 2 * (size_t)LZ_LAYER_TAIL_MAX;
	char *zeros = calloc(1, tail_n);
	assert_non_null(zeros);
	struct lz_oci_layer decl = { .compression = LZ_OCI_ZSTD };
	size_t n;
	char *tar = layer_tar(zeros, tail_n, &n, decl.diff_id);
	free(zeros);
	struct lz_err err;
	int r = apply_compressed(f, tar, n, F_ZSTD, &decl, &err);
	free(tar);
	if (r != -EINVAL)
		fail_msg("want -EINVAL, got %d (%s)", r, err.msg);
	assert_non_null(strstr(err.msg, "follow the end of its archive"));
}

/* The media type's compression must be the one the content has, every
 * combination; a stream compressed twice over is refused whatever the
 * outer filter. Nothing of a refused layer is applied. */
static void test_lz_layer_apply__compression_must_match_the_media_type(void **state)
{
	struct fixture *f = *state;
	static const int filters[] = { F_TAR, F_GZIP, F_ZSTD };
	static const char *const names[] = { "uncompressed", "gzip-compressed", "zstd-compressed" };
	struct lz_oci_layer decl = { .digest = "" };
	size_t n;
	char *tar = layer_tar(NULL, 0, &n, decl.diff_id);
	for (size_t d = 0; d < LZ_ARRAY_SIZE(filters); d++)
		for (size_t c = 0; c < LZ_ARRAY_SIZE(filters); c++) {
			if (d == c)
				continue;
			struct lz_err err;
			decl.compression = declared_as(filters[d]);
			int r = apply_compressed(f, tar, n, filters[c], &decl, &err);
			char want[160];
			snprintf(want, sizeof(want), "declares it %s, but its content is %s", names[d],
				 names[c]);
			if (r != -EINVAL || strstr(err.msg, want) == NULL)
				fail_msg("declared %s, content %s: got %d '%s'", names[d], names[c], r,
					 err.msg);
			assert_false(exists(f, "file"));
		}

	static const int twice[][2] = { { F_GZIP, F_GZIP }, { F_GZIP, F_ZSTD }, { F_ZSTD, F_GZIP } };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(twice); i++) {
		struct lz_err err;
		int fd = compressed_twice(tar, n, twice[i][0], twice[i][1]);
		decl.compression = declared_as(twice[i][1]);
		int r = apply_declared(f, fd, &decl, &err);
		close(fd);
		if (r != -EINVAL || strstr(err.msg, "compressed 2 times over") == NULL)
			fail_msg("compressed twice (%zu): got %d '%s'", i, r, err.msg);
		assert_false(exists(f, "file"));
	}
	free(tar);
	assert_outside_untouched(f);
}

static void test_lz_layer_apply__malformed_declared_diff_id_refused(void **state)
{
	struct fixture *f = *state;
	struct lz_oci_layer decl = { .diff_id = "sha256:ABCD", .compression = LZ_OCI_TAR };
	size_t n;
	char ignored[LZ_OCI_DIGEST_STR_MAX];
	char *tar = layer_tar(NULL, 0, &n, ignored);
	struct lz_err err;
	assert_int_equal(apply_compressed(f, tar, n, F_TAR, &decl, &err), -EINVAL);
	free(tar);
	assert_non_null(strstr(err.msg, "diff_id"));
	assert_false(exists(f, "file"));
}

/* ---- limits and progress ------------------------------------------------- */

struct progress_log {
	uint64_t calls, last;
};

static void on_progress(void *ctx, uint64_t done)
{
	struct progress_log *log = ctx;
	assert_true(done >= log->last + LZ_LAYER_PROGRESS_STEP);
	log->last = done;
	log->calls++;
}

static void test_lz_layer_apply__progress_every_mib(void **state)
{
	struct fixture *f = *state;
	size_t n = 3 * 1024 * 1024 + 100;
	char *noise = noise_of(n);
	int fd = build(ENTS({ .path = "big", .data = noise, .size = n }), F_TAR);
	struct progress_log log = { 0 };
	struct lz_layer_options opts = { .progress = on_progress, .progress_ctx = &log };
	struct lz_layer_report rep;
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, &opts, &rep, &err), 0);
	close(fd);
	assert_int_equal(log.calls, 3);
	assert_int_equal(rep.regular_bytes, n);
	assert_true(rep.input_bytes > n);
	assert_int_equal(lst(f, "big").st_size, (off_t)n);
	int rfd = openat(f->root_fd, "big", O_RDONLY | O_CLOEXEC);
	assert_true(rfd >= 0);
	char *back = malloc(n);
	assert_non_null(back);
	assert_int_equal(read(rfd, back, n), (ssize_t)n);
	close(rfd);
	assert_memory_equal(back, noise, n);
	free(back);
	free(noise);
}

static void test_lz_layer_apply__max_regular_bytes(void **state)
{
	struct fixture *f = *state;
	int fd = build(ENTS({ .path = "a", .data = "0123456789" },
			    { .path = "b", .data = "0123456789" }),
		       F_TAR);
	struct lz_layer_options opts = { .max_regular_bytes = 15 };
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, &opts, NULL, &err), -ENOSPC);
	close(fd);
	assert_non_null(strstr(err.msg, "layer entry 'b'"));
}

/* The data of an entry that writes none is read (and hashed) all the
 * same: it counts against the stream's bound, and is refused before the
 * rest of it is read. */
static void test_lz_layer_apply__skipped_data_counts_against_the_stream_bound(void **state)
{
	struct fixture *f = *state;
	static char zeros[1 << 20];
	int fd = build(ENTS({ .path = "a", .data = "0123456789" },
			    { .path = ".wh..wh.junk", .data = zeros, .size = sizeof(zeros) },
			    { .path = "c", .data = "after" }),
		       F_ZSTD);
	struct lz_layer_options opts = { .max_stream_bytes = 256 * 1024 };
	struct lz_layer_report rep;
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, &opts, &rep, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "uncompressed stream exceeds 262144 bytes"));
	assert_false(exists(f, "c"));
	/* The same layer under a bound it fits: applied, and counted whole. */
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	opts.max_stream_bytes = 2 << 20;
	assert_int_equal(apply_fd(f, fd, &opts, &rep, &err), 0);
	close(fd);
	assert_true(exists(f, "c"));
	assert_true(rep.stream_bytes > sizeof(zeros) && rep.stream_bytes < opts.max_stream_bytes);
}

/* Without any option, a layer expands no more than gzip can: 16 MiB of
 * zeros in a few KiB of zstd is refused, the same in gzip (which cannot
 * shrink it that far) is not. */
static void test_lz_layer_apply__expansion_beyond_gzips_is_refused(void **state)
{
	struct fixture *f = *state;
	size_t n = 16 << 20;
	char *zeros = calloc(1, n);
	assert_non_null(zeros);
	int fd = build(ENTS({ .path = "zeros", .data = zeros, .size = n }), F_ZSTD);
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, NULL, NULL, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "more than gzip can expand"));
	close(fd);
	fd = build(ENTS({ .path = "zeros", .data = zeros, .size = n }), F_GZIP);
	assert_int_equal(apply_fd(f, fd, NULL, NULL, &err), 0);
	close(fd);
	free(zeros);
	assert_true(exists(f, "zeros"));
}

/* Each entry is charged entry_bytes of the content bound: a flood of
 * empty directories takes blocks too (prepare.h). */
static void test_lz_layer_apply__entries_are_charged_to_the_content_bound(void **state)
{
	struct fixture *f = *state;
	int fd = build(ENTS({ .path = "a", .type = AE_IFDIR, .mode = 0755 }, { .path = "b", .type = AE_IFDIR, .mode = 0755 },
			    { .path = "c", .type = AE_IFDIR, .mode = 0755 }),
		       F_TAR);
	struct lz_layer_options opts = { .max_regular_bytes = 2 * 4096 + 1, .entry_bytes = 4096 };
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, &opts, NULL, &err), -ENOSPC);
	close(fd);
	assert_true(exists(f, "b"));
	assert_false(exists(f, "c"));
}

/* An object's xattrs take room as its content does (a block of their
 * own, on ext4): they are charged to the same bound. */
static void test_lz_layer_apply__xattrs_are_charged_to_the_content_bound(void **state)
{
	struct fixture *f = *state;
	static char value[1001];
	memset(value, 'v', 1000);
	int fd = build(ENTS({ .path = "a", .type = AE_IFDIR, .mode = 0755, .xname = "user.x", .xvalue = value },
			    { .path = "b", .type = AE_IFDIR, .mode = 0755, .xname = "user.x", .xvalue = value },
			    { .path = "c", .type = AE_IFDIR, .mode = 0755, .xname = "user.x", .xvalue = value }),
		       F_TAR);
	/* The three entries fit, and one object's xattrs with them. */
	const uint64_t one = LZ_LAYER_XATTR_BLOCK + strlen("user.x") + 1000;
	struct lz_layer_options opts = { .max_regular_bytes = 3 * 4096 + one + 100, .entry_bytes = 4096 };
	struct lz_layer_report rep;
	struct lz_err err;
	int r = apply_fd(f, fd, &opts, &rep, &err);
	close(fd);
	if (r == 0 && rep.skipped_xattrs == 3) /* filesystem without user xattrs */
		return;
	assert_int_equal(r, -ENOSPC);
	assert_non_null(strstr(err.msg, "layer entry 'b': its xattrs exceed"));
	assert_false(exists(f, "c"));
}

/* The preparer's inode budget (prepare.h) bounds a layer below the
 * constant one. */
static void test_lz_layer_apply__max_entries(void **state)
{
	struct fixture *f = *state;
	int fd = build(ENTS({ .path = "a", .data = "0" }, { .path = "b", .data = "1" }, { .path = "c", .data = "2" }),
		       F_TAR);
	struct lz_layer_options opts = { .max_entries = 2 };
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, &opts, NULL, &err), -ENOSPC);
	close(fd);
	assert_non_null(strstr(err.msg, "more than 2 entries"));
	assert_false(exists(f, "c"));
}

/* A directory an entry implies (its parent is missing) takes an inode and
 * a block like an entry: one short path ten levels deep must not make ten
 * uncounted directories (a few KiB of such paths fill a file system's
 * inodes). It counts against max_entries, before it is made. */
static void test_lz_layer_apply__implied_directories_count_as_entries(void **state)
{
	struct fixture *f = *state;
	int fd = build(ENTS({ .path = "a/b/c/d/f", .data = "x" }), F_TAR);
	struct lz_layer_options opts = { .max_entries = 3 };
	struct lz_layer_report rep;
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, &opts, &rep, &err), -ENOSPC);
	assert_non_null(strstr(err.msg, "more than 3 entries with the directory 'a/b/c' it implies"));
	/* f, then a and b: c would be the fourth */
	assert_true(exists(f, "a/b"));
	assert_false(exists(f, "a/b/c"));

	/* Unbounded, the layer reports what it implied. */
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(apply_fd(f, fd, NULL, &rep, &err), 0);
	close(fd);
	assert_int_equal(rep.entries, 1);
	assert_int_equal(rep.implied_dirs, 2); /* c and d: a and b were there */
	assert_content(f, "a/b/c/d/f", "x");
}

/* ... and each is charged entry_bytes of the content bound. */
static void test_lz_layer_apply__implied_directories_are_charged_to_the_content_bound(void **state)
{
	struct fixture *f = *state;
	int fd = build(ENTS({ .path = "a/b/c/d/f" }), F_TAR);
	struct lz_layer_options opts = { .max_regular_bytes = 3 * 4096 + 1, .entry_bytes = 4096 };
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, &opts, NULL, &err), -ENOSPC);
	close(fd);
	assert_non_null(strstr(err.msg, "exceed 12289 bytes with the directory 'a/b/c' it implies"));
	assert_true(exists(f, "a/b"));
	assert_false(exists(f, "a/b/c"));
}

/* ---- sparse entries: a raw tar writer ------------------------------------ */

/* A 512-byte tar header: ustar, or old GNU ("ustar  \0") when gnu. */
static void raw_header(char h[512], const char *name, uint64_t size, char type, bool gnu)
{
	memset(h, 0, 512);
	snprintf(h, 100, "%s", name);
	snprintf(h + 100, 8, "%07o", 0644);
	snprintf(h + 108, 8, "%07o", (unsigned)geteuid()); /* the caller's, as write_entry's */
	snprintf(h + 116, 8, "%07o", (unsigned)getegid());
	snprintf(h + 124, 12, "%011llo", (unsigned long long)size);
	snprintf(h + 136, 12, "%011o", T_MTIME);
	h[156] = type;
	memcpy(h + 257, gnu ? "ustar  " : "ustar\0" "00", 8);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
}

/* Appends len bytes and the padding to the next 512. */
static void raw_put(int fd, const void *buf, size_t len)
{
	static const char zeros[512];
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	if (len % 512)
		assert_int_equal(write(fd, zeros, 512 - len % 512), (ssize_t)(512 - len % 512));
}

/* A pax extended header holding the records "key=value" of kv, then the
 * header of the entry it describes. */
static void raw_pax(int fd, const char *const *kv, size_t n, const char *name, uint64_t size)
{
	char body[1024] = "", h[512];
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t rec = strlen(kv[i]) + 3; /* " " "\n" and a one-digit length */
		while (snprintf(NULL, 0, "%zu", rec) + strlen(kv[i]) + 2 != rec)
			rec++;
		len += (size_t)snprintf(body + len, sizeof(body) - len, "%zu %s\n", rec, kv[i]);
	}
	raw_header(h, "PaxHeaders/x", len, 'x', false);
	raw_put(fd, h, 512);
	raw_put(fd, body, len);
	raw_header(h, name, size, '0', false);
	raw_put(fd, h, 512);
}

static void raw_end(int fd)
{
	static const char zeros[1024];
	assert_int_equal(write(fd, zeros, sizeof(zeros)), (ssize_t)sizeof(zeros));
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
}

static void assert_sparse_refused(struct fixture *f, int fd, const char *name)
{
	struct lz_err err;
	/* bounds it fits: the refusal is for the format, not the size */
	struct lz_layer_options opts = { .max_regular_bytes = 1 << 20, .entry_bytes = 4096 };
	assert_int_equal(apply_fd(f, fd, &opts, NULL, &err), -EINVAL);
	close(fd);
	char want[128];
	snprintf(want, sizeof(want), "layer entry '%s' refused: sparse file", name);
	if (strstr(err.msg, want) == NULL)
		print_error("got '%s'\n", err.msg);
	assert_non_null(strstr(err.msg, want));
	/* nothing of the holes was made (content met before a hole may be) */
	struct stat st;
	if (fstatat(f->root_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		assert_true(st.st_size <= 3);
}

/* GNU sparse entries place bytes at offsets of their own: a byte every
 * 4 KiB is charged a byte and costs a block. Refused, whichever of the
 * formats: pax 1.0 (the map in the data), pax 0.1 (the map in a record),
 * old GNU ('S', the map in the header), and a pax size beyond the content
 * without a map (a hole at the end). */
static void test_lz_layer_apply__refuses_sparse_entries(void **state)
{
	struct fixture *f = *state;
	char h[512];

	int fd = memfd_create("sparse10", MFD_CLOEXEC);
	const char *kv10[] = { "GNU.sparse.major=1", "GNU.sparse.minor=0", "GNU.sparse.name=s10",
			       "GNU.sparse.realsize=8193" };
	static const char map[] = "3\n0\n1\n4096\n1\n8192\n1\n";
	char data[512 + 3];
	memset(data, 0, sizeof(data));
	memcpy(data, map, sizeof(map) - 1);
	memcpy(data + 512, "xyz", 3);
	raw_pax(fd, kv10, 4, "GNUSparseFile.0/s10", sizeof(data));
	raw_put(fd, data, sizeof(data));
	raw_end(fd);
	assert_sparse_refused(f, fd, "s10");

	fd = memfd_create("sparse01", MFD_CLOEXEC);
	const char *kv01[] = { "GNU.sparse.map=0,1,4096,1,8192,1", "GNU.sparse.realsize=8193" };
	raw_pax(fd, kv01, 2, "s01", 3);
	raw_put(fd, "xyz", 3);
	raw_end(fd);
	assert_sparse_refused(f, fd, "s01");

	fd = memfd_create("oldgnu", MFD_CLOEXEC);
	raw_header(h, "sgnu", 3, 'S', true);
	for (int i = 0; i < 3; i++) { /* struct gnu_sparse sparse[4] at 386 */
		snprintf(h + 386 + 24 * i, 12, "%011o", 4096 * i);
		snprintf(h + 386 + 24 * i + 12, 12, "%011o", 1);
	}
	snprintf(h + 483, 12, "%011o", 8193); /* realsize */
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	raw_put(fd, h, 512);
	raw_put(fd, "xyz", 3);
	raw_end(fd);
	assert_sparse_refused(f, fd, "sgnu");

	fd = memfd_create("realsize", MFD_CLOEXEC);
	const char *kvsize[] = { "GNU.sparse.realsize=1099511627776" };
	raw_pax(fd, kvsize, 1, "tail", 3);
	raw_put(fd, "xyz", 3);
	raw_end(fd);
	assert_sparse_refused(f, fd, "tail");

	/* The same writer's plain entry applies: it is the format that is refused. */
	fd = memfd_create("plain", MFD_CLOEXEC);
	const char *kvplain[] = { "path=plain" };
	raw_pax(fd, kvplain, 1, "ignored", 3);
	raw_put(fd, "xyz", 3);
	raw_end(fd);
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, NULL, NULL, &err), 0);
	close(fd);
	assert_content(f, "plain", "xyz");
}

static void test_lz_layer_apply__too_many_entries(void **state)
{
	struct fixture *f = *state;
	/* LZ_LAYER_MAX_ENTRIES + 1 whiteouts of a missing name: cheap to
	 * write, compress and apply, and none of them touches the tree. In
	 * gzip: zstd would shrink the repeated header beyond what a layer
	 * may expand to (LZ_LAYER_MAX_EXPANSION). */
	int fd = memfd_create("many", MFD_CLOEXEC);
	assert_true(fd >= 0);
	struct archive *a = archive_write_new();
	assert_int_equal(archive_write_set_format_ustar(a), ARCHIVE_OK);
	assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_set_filter_option(a, "gzip", "compression-level", "1"), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, ".wh.none");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 0);
	for (unsigned i = 0; i <= LZ_LAYER_MAX_ENTRIES; i++)
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	archive_entry_free(e);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	struct lz_err err;
	assert_int_equal(apply_fd(f, fd, NULL, NULL, &err), -E2BIG);
	close(fd);
	assert_non_null(strstr(err.msg, "more than 1000000 entries"));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_layer_apply__regular_files_and_modes),
		T(test_lz_layer_apply__filters),
		T(test_lz_layer_apply__directories),
		T(test_lz_layer_apply__symlinks),
		T(test_lz_layer_apply__hardlinks),
		T(test_lz_layer_apply__fifo),
		T(test_lz_layer_apply__devices_are_reported_never_made),
		T(test_lz_layer_apply__ownership),
		T(test_lz_layer_apply__xattrs),
		T(test_lz_layer_apply__utf8_pax_path),
		T(test_lz_layer_apply__empty_archive),
		T(test_lz_layer_apply__replaces_dir_with_file),
		T(test_lz_layer_apply__replaces_file_with_dir),
		T(test_lz_layer_apply__replaces_symlink_without_following),
		T(test_lz_layer_apply__whiteout_file_and_dir),
		T(test_lz_layer_apply__whiteout_spares_same_layer),
		T(test_lz_layer_apply__opaque_dir),
		T(test_lz_layer_apply__opaque_dir_first),
		T(test_lz_layer_apply__whiteout_refusals),
		T(test_lz_layer_apply__refuses_traversal),
		T(test_lz_layer_apply__refuses_symlink_then_write),
		T(test_lz_layer_apply__refuses_relative_symlink_then_write),
		T(test_lz_layer_apply__refuses_hardlink_escapes),
		T(test_lz_layer_apply__refuses_long_paths),
		T(test_lz_layer_apply__refuses_root_as_non_directory),
		T(test_lz_layer_apply__refuses_zip),
		T(test_lz_layer_apply__refuses_truncated_gzip),
		T(test_lz_layer_apply__refuses_corrupt_gzip),
		T(test_lz_layer_apply__bad_descriptors),
		T(test_lz_layer_apply__declared_layer_with_its_diff_id_applies),
		T(test_lz_layer_apply__diff_id_mismatch_refused),
		T(test_lz_layer_apply__diff_id_covers_bytes_after_the_archive_end),
		T(test_lz_layer_apply__refuses_a_long_tail_after_the_archive),
		T(test_lz_layer_apply__compression_must_match_the_media_type),
		T(test_lz_layer_apply__malformed_declared_diff_id_refused),
		T(test_lz_layer_apply__progress_every_mib),
		T(test_lz_layer_apply__max_regular_bytes),
		T(test_lz_layer_apply__xattrs_are_charged_to_the_content_bound),
		T(test_lz_layer_apply__skipped_data_counts_against_the_stream_bound),
		T(test_lz_layer_apply__expansion_beyond_gzips_is_refused),
		T(test_lz_layer_apply__max_entries),
		T(test_lz_layer_apply__entries_are_charged_to_the_content_bound),
		T(test_lz_layer_apply__too_many_entries),
		T(test_lz_layer_apply__implied_directories_count_as_entries),
		T(test_lz_layer_apply__implied_directories_are_charged_to_the_content_bound),
		T(test_lz_layer_apply__refuses_sparse_entries),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
