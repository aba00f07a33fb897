/* Mounts in a private mount namespace (mountns.h; spec 3.6): the overlay of
 * a State Anchor, the read-only prepared root, mount identities and exact
 * unmounting.
 *
 * Runs as root (CI). Every test does its namespace work in a forked child
 * that unshares its mount namespace and makes / private; the child checks
 * with CHECK(), which sends the first failure through a pipe, so this
 * process (cmocka's) never leaves the host's mount namespace and a failed
 * test cannot leave a mount on the host. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/mountns.h"

#include "lz_child.h"
#define CHECK_R(call, expected)                                                                \
	do {                                                                                   \
		int r_ = (call);                                                               \
		if (r_ != (expected))                                                          \
			child_fail(__FILE__, __LINE__, "%s returned %d (%s), expected %d: %s", \
				   #call, r_, strerror(r_ < 0 ? -r_ : 0), (expected), err.msg); \
	} while (0)

struct fixture {
	char dir[64]; /* a fresh directory under /tmp, removed afterwards */
};

static int dir_fd(const char *dir, const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "open '%s': %s", path, strerror(errno));
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write '%s'", path);
	close(fd);
}

static void read_text(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open '%s': %s", path, strerror(errno));
	ssize_t n = read(fd, buf, cap - 1);
	CHECK(n >= 0, "read '%s'", path);
	buf[n] = '\0';
	close(fd);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Runs body(dir) in a forked child in a new, private mount namespace and
 * fails the test with the child's first failure message, if any; then
 * checks that none of the child's mounts is visible in this namespace. */
struct private_ns_arg {
	const char *dir;
	void (*body)(const char *dir);
};

static void private_ns_child(void *argp)
{
	const struct private_ns_arg *a = argp;
	/* Not root: in a user namespace of its own (tests that need the
	 * host's root skip before). */
	if (unshare(CLONE_NEWNS | (geteuid() != 0 ? CLONE_NEWUSER : 0)) < 0)
		child_fail(__FILE__, __LINE__, "unshare(CLONE_NEWNS): %s", strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_fail(__FILE__, __LINE__, "make / private: %s", strerror(errno));
	a->body(a->dir);
}

static void in_private_ns(const char *dir, void (*body)(const char *dir))
{
	run_in_child(private_ns_child, &(struct private_ns_arg){ dir, body });
	/* Nothing the child mounted is visible here. */
	FILE *f = fopen("/proc/self/mountinfo", "re");
	assert_non_null(f);
	char line[4096];
	while (fgets(line, sizeof(line), f))
		if (strstr(line, dir))
			fail_msg("mount leaked into the host namespace: %s", line);
	fclose(f);
}

static int setup(void **state)
{
	if (geteuid() != 0)
		return 0; /* each test skips */
	struct fixture *fx = calloc(1, sizeof(*fx));
	if (fx == NULL)
		return -1;
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/lz-test-mountns.XXXXXX");
	if (mkdtemp(fx->dir) == NULL) {
		free(fx);
		return -1;
	}
	static const char *const subdirs[] = { "lower", "upper", "work", "merged", "src", "ro" };
	char path[256];
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", fx->dir, subdirs[i]);
		if (mkdir(path, 0755) < 0)
			return -1;
	}
	*state = fx;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	if (fx == NULL)
		return 0;
	(void)chmod(fx->dir, 0755);
	int r = nftw(fx->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	*state = NULL;
	return r == 0 ? 0 : -1;
}

#define NEED_ROOT()                 \
	do {                        \
		if (geteuid() != 0) \
			skip();     \
	} while (0)

/* ---- overlay ---------------------------------------------------------------- */

static void mount_overlay(const char *dir, struct lz_mount_id *id)
{
	struct lz_err err = { 0, "" };
	char path[256];
	snprintf(path, sizeof(path), "%s/lower/file", dir);
	write_text(path, "from the lower\n");
	int lower = dir_fd(dir, "lower"), upper = dir_fd(dir, "upper"), work = dir_fd(dir, "work"),
	    merged = dir_fd(dir, "merged");
	CHECK(lower >= 0 && upper >= 0 && work >= 0 && merged >= 0, "open layers: %s", strerror(errno));
	CHECK_R(lz_mountns_overlay(lower, upper, work, merged, id, &err), 0);
	close(lower);
	close(upper);
	close(work);
	close(merged);
}

static void body_overlay_merges_and_writes_to_upper(const char *dir)
{
	struct lz_err err = { 0, "" };
	struct lz_mount_id id, here, parent;
	char path[256], buf[128];
	snprintf(path, sizeof(path), "%s", dir);
	CHECK_R(lz_mountns_identify(path, &parent, &err), 0);
	mount_overlay(dir, &id);

	/* The returned identity is the mount now found at the target. */
	snprintf(path, sizeof(path), "%s/merged", dir);
	CHECK_R(lz_mountns_identify(path, &here, &err), 0);
	CHECK(here.mnt_id == id.mnt_id && here.dev == id.dev && here.ino == id.ino,
	      "identify: %llu/%llu/%llu, returned %llu/%llu/%llu", (unsigned long long)here.mnt_id,
	      (unsigned long long)here.dev, (unsigned long long)here.ino,
	      (unsigned long long)id.mnt_id, (unsigned long long)id.dev, (unsigned long long)id.ino);
	CHECK(id.mnt_id != parent.mnt_id && id.dev != parent.dev, "the overlay is a new mount");
	bool present = false;
	CHECK_R(lz_mountns_present(id.mnt_id, &present, &err), 0);
	CHECK(present, "mount %llu not in mountinfo", (unsigned long long)id.mnt_id);

	/* The lower shows through. */
	snprintf(path, sizeof(path), "%s/merged/file", dir);
	read_text(path, buf, sizeof(buf));
	CHECK(strcmp(buf, "from the lower\n") == 0, "merged/file: [%s]", buf);

	/* A new file lands in the upper only. */
	snprintf(path, sizeof(path), "%s/merged/new", dir);
	write_text(path, "written\n");
	snprintf(path, sizeof(path), "%s/upper/new", dir);
	read_text(path, buf, sizeof(buf));
	CHECK(strcmp(buf, "written\n") == 0, "upper/new: [%s]", buf);
	snprintf(path, sizeof(path), "%s/lower/new", dir);
	CHECK(!exists(path), "the write reached the lower");

	/* Changing a lower file copies it up; the lower keeps its content. */
	snprintf(path, sizeof(path), "%s/merged/file", dir);
	write_text(path, "changed\n");
	snprintf(path, sizeof(path), "%s/upper/file", dir);
	read_text(path, buf, sizeof(buf));
	CHECK(strcmp(buf, "changed\n") == 0, "upper/file: [%s]", buf);
	snprintf(path, sizeof(path), "%s/lower/file", dir);
	read_text(path, buf, sizeof(buf));
	CHECK(strcmp(buf, "from the lower\n") == 0, "lower/file changed: [%s]", buf);
}

static void test_lz_mountns_overlay__merges_and_writes_to_upper(void **state)
{
	NEED_ROOT();
	struct fixture *fx = *state;
	in_private_ns(fx->dir, body_overlay_merges_and_writes_to_upper);
	/* The upper outlives the namespace: it is the Domain's state. */
	char path[256];
	snprintf(path, sizeof(path), "%s/upper/new", fx->dir);
	assert_true(exists(path));
	snprintf(path, sizeof(path), "%s/merged/file", fx->dir);
	assert_false(exists(path));
}

static void body_overlay_bad_layer_fails(const char *dir)
{
	struct lz_err err = { 0, "" };
	struct lz_mount_id id = { 1, 2, 3 };
	int lower = dir_fd(dir, "lower"), upper = dir_fd(dir, "upper"), merged = dir_fd(dir, "merged");
	CHECK(lower >= 0 && upper >= 0 && merged >= 0, "open layers");
	/* workdir == upperdir is refused by overlayfs. */
	int r = lz_mountns_overlay(lower, upper, upper, merged, &id, &err);
	CHECK(r < 0, "overlay with workdir == upperdir succeeded");
	CHECK(strstr(err.msg, "overlay") != NULL, "message: %s", err.msg);
	CHECK(id.mnt_id == 1 && id.dev == 2 && id.ino == 3, "*ret changed on failure");
	/* A descriptor that is not open. */
	(void)close(999);
	CHECK_R(lz_mountns_overlay(999, upper, dir_fd(dir, "work"), merged, &id, &err), -EBADF);
	CHECK(id.mnt_id == 1 && id.dev == 2 && id.ino == 3, "*ret changed on failure");
}

static void test_lz_mountns_overlay__invalid_layers_fail(void **state)
{
	NEED_ROOT();
	struct fixture *fx = *state;
	in_private_ns(fx->dir, body_overlay_bad_layer_fails);
}

/* ---- exact unmounting ------------------------------------------------------- */

static void body_unmount_exact(const char *dir)
{
	struct lz_err err = { 0, "" };
	struct lz_mount_id id;
	char merged[256], file[256];
	mount_overlay(dir, &id);
	snprintf(merged, sizeof(merged), "%s/merged", dir);
	snprintf(file, sizeof(file), "%s/merged/file", dir);
	bool present = false;

	/* Any field off refuses and leaves the mount. */
	struct lz_mount_id wrong[3] = { id, id, id };
	wrong[0].mnt_id++;
	wrong[1].dev++;
	wrong[2].ino++;
	for (int i = 0; i < 3; i++) {
		CHECK_R(lz_mountns_unmount_exact(merged, &wrong[i], &err), -ESTALE);
		CHECK(strstr(err.msg, "not the recorded one") != NULL, "message: %s", err.msg);
		CHECK_R(lz_mountns_present(id.mnt_id, &present, &err), 0);
		CHECK(present, "wrong identity %d: the mount is gone", i);
		CHECK(exists(file), "wrong identity %d: merged/file is gone", i);
	}

	/* The recorded identity unmounts, and the mount is proved absent. */
	CHECK_R(lz_mountns_unmount_exact(merged, &id, &err), 0);
	present = true;
	CHECK_R(lz_mountns_present(id.mnt_id, &present, &err), 0);
	CHECK(!present, "mount %llu still present", (unsigned long long)id.mnt_id);
	CHECK(!exists(file), "merged/file still visible after unmount");

	/* Now the target is a plain directory of the parent mount: refused. */
	CHECK_R(lz_mountns_unmount_exact(merged, &id, &err), -ESTALE);
}

static void test_lz_mountns_unmount_exact__refuses_wrong_identity(void **state)
{
	NEED_ROOT();
	struct fixture *fx = *state;
	in_private_ns(fx->dir, body_unmount_exact);
}

static void body_unmount_stacked(const char *dir)
{
	struct lz_err err = { 0, "" };
	struct lz_mount_id under, over;
	char merged[256];
	snprintf(merged, sizeof(merged), "%s/merged", dir);
	mount_overlay(dir, &under);
	/* A second mount stacked on the same target hides the recorded one. */
	int src = dir_fd(dir, "src"), target = open(merged, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(src >= 0 && target >= 0, "open");
	CHECK_R(lz_mountns_bind_ro(src, target, &over, &err), 0);
	close(src);
	close(target);
	CHECK(over.mnt_id != under.mnt_id, "stacked mount has its own ID");
	CHECK_R(lz_mountns_unmount_exact(merged, &under, &err), -ESTALE);
	bool present = false;
	CHECK_R(lz_mountns_present(over.mnt_id, &present, &err), 0);
	CHECK(present, "the stacked mount was removed by a refused unmount");
	CHECK_R(lz_mountns_unmount_exact(merged, &over, &err), 0);
	CHECK_R(lz_mountns_unmount_exact(merged, &under, &err), 0);
}

static void test_lz_mountns_unmount_exact__stacked_mount_is_not_the_recorded_one(void **state)
{
	NEED_ROOT();
	struct fixture *fx = *state;
	in_private_ns(fx->dir, body_unmount_stacked);
}

/* ---- read-only bind ------------------------------------------------------- */

static void body_bind_ro(const char *dir)
{
	struct lz_err err = { 0, "" };
	struct lz_mount_id id, here;
	char path[256], buf[64];
	snprintf(path, sizeof(path), "%s/src/file", dir);
	write_text(path, "prepared\n");
	int src = dir_fd(dir, "src"), target = dir_fd(dir, "ro");
	CHECK(src >= 0 && target >= 0, "open");
	CHECK_R(lz_mountns_bind_ro(src, target, &id, &err), 0);
	close(src);
	close(target);

	snprintf(path, sizeof(path), "%s/ro", dir);
	CHECK_R(lz_mountns_identify(path, &here, &err), 0);
	CHECK(here.mnt_id == id.mnt_id && here.dev == id.dev && here.ino == id.ino,
	      "identify does not match the returned identity");

	snprintf(path, sizeof(path), "%s/ro/file", dir);
	read_text(path, buf, sizeof(buf));
	CHECK(strcmp(buf, "prepared\n") == 0, "ro/file: [%s]", buf);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	CHECK(fd < 0 && errno == EROFS, "open for writing: fd %d, %s", fd, strerror(errno));
	snprintf(path, sizeof(path), "%s/ro/new", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd < 0 && errno == EROFS, "create: fd %d, %s", fd, strerror(errno));
	CHECK(mkdir(path, 0755) < 0 && errno == EROFS, "mkdir: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/ro/file", dir);
	CHECK(unlink(path) < 0 && errno == EROFS, "unlink: %s", strerror(errno));

	/* The source stays writable, and the view shows its changes. */
	snprintf(path, sizeof(path), "%s/src/later", dir);
	write_text(path, "later\n");
	snprintf(path, sizeof(path), "%s/ro/later", dir);
	CHECK(exists(path), "the view is not of the source");

	snprintf(path, sizeof(path), "%s/ro", dir);
	CHECK_R(lz_mountns_unmount_exact(path, &id, &err), 0);
}

static void test_lz_mountns_bind_ro__view_is_read_only(void **state)
{
	NEED_ROOT();
	struct fixture *fx = *state;
	in_private_ns(fx->dir, body_bind_ro);
}

/* ---- prepare: private propagation and an own /proc ---------------------- */

static void body_prepare(const char *dir)
{
	(void)dir;
	struct lz_err err = { 0, "" };
	/* A new PID namespace takes effect for children: PID 1 there. */
	CHECK(unshare(CLONE_NEWPID) == 0, "unshare(CLONE_NEWPID): %s", strerror(errno));
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* Shared again, so the check below can fail. */
		CHECK(mount(NULL, "/", NULL, MS_REC | MS_SHARED, NULL) == 0, "make shared");
		CHECK_R(lz_mountns_prepare(&err), 0);
		char buf[4096];
		read_text("/proc/self/stat", buf, sizeof(buf));
		CHECK(strncmp(buf, "1 ", 2) == 0, "/proc is not this PID namespace's: %.40s", buf);
		FILE *f = fopen("/proc/self/mountinfo", "re");
		CHECK(f != NULL, "mountinfo");
		while (fgets(buf, sizeof(buf), f))
			CHECK(strstr(buf, " shared:") == NULL, "a mount still propagates: %s", buf);
		fclose(f);
		_exit(0);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the PID 1 child failed (status %#x)", status);
}

static void test_lz_mountns_prepare__private_mounts_and_own_proc(void **state)
{
	NEED_ROOT();
	struct fixture *fx = *state;
	in_private_ns(fx->dir, body_prepare);
}

/* ---- confine_writes: read-only but the trees served ----------------------- */

static uint64_t mount_id_of(int dirfd, const char *path)
{
	struct statx stx;
	CHECK(statx(dirfd, path, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) == 0, "statx '%s': %s",
	      path, strerror(errno));
	return stx.stx_mnt_id;
}

static void body_confine_writes(const char *dir)
{
	struct lz_err err = { 0, "" };
	char path[512], outer[256], inner[256], beside[256];
	snprintf(outer, sizeof(outer), "%s/src", dir);
	snprintf(inner, sizeof(inner), "%s/src/sub", dir);
	CHECK(mkdir(inner, 0755) == 0, "mkdir");
	snprintf(beside, sizeof(beside), "%s/ro/beside", dir);
	write_text(beside, "beside\n");
	/* the inner tree first: it must still be attached on top */
	int fds[2] = { open(inner, O_PATH | O_DIRECTORY | O_CLOEXEC), open(outer, O_PATH | O_DIRECTORY | O_CLOEXEC) };
	CHECK(fds[0] >= 0 && fds[1] >= 0, "open trees: %s", strerror(errno));
	int too_many[LZ_MOUNTNS_CONFINE_MAX + 1] = { 0 };
	CHECK_R(lz_mountns_confine_writes(too_many, LZ_MOUNTNS_CONFINE_MAX + 1, &err), -EINVAL);
	CHECK_R(lz_mountns_confine_writes(fds, 2, &err), 0);

	/* Outside the trees nothing changes, by path or by ".." from them. */
	CHECK(chmod(beside, 0600) < 0 && errno == EROFS, "chmod beside: %s", strerror(errno));
	CHECK(fchmodat(fds[1], "../ro/beside", 0600, 0) < 0 && errno == EROFS, "chmod ../ro/beside: %s",
	      strerror(errno));
	CHECK(utimensat(fds[0], "../../ro/beside", NULL, 0) < 0 && errno == EROFS, "utimes: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/ro/new", dir);
	CHECK(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EROFS, "create beside: %s",
	      strerror(errno));
	CHECK(chmod(dir, 0700) < 0 && errno == EROFS, "chmod the parent: %s", strerror(errno));

	/* Inside them everything does, through the descriptors, by path,
	 * and through /proc/self/fd as libgit2 resolves it (realpath). */
	int fd = openat(fds[1], "by-fd", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "create by descriptor: %s", strerror(errno));
	close(fd);
	CHECK(fchmodat(fds[1], "by-fd", 0600, 0) == 0, "chmod inside: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/by-path", inner);
	write_text(path, "inner\n");
	char proc[64], real[PATH_MAX];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fds[0]);
	CHECK(realpath(proc, real) != NULL && strcmp(real, inner) == 0, "realpath: %s", real);
	CHECK(mount_id_of(AT_FDCWD, inner) == mount_id_of(fds[0], ""), "the inner path is not the inner clone");
	CHECK(mount_id_of(AT_FDCWD, outer) == mount_id_of(fds[1], ""), "the outer path is not the outer clone");
	close(fds[0]);
	close(fds[1]);
}

static void test_lz_mountns_confine_writes__only_the_trees_change(void **state)
{
	NEED_ROOT();
	struct fixture *fx = *state;
	in_private_ns(fx->dir, body_confine_writes);
	/* What the clones wrote is on the host. */
	char path[256];
	snprintf(path, sizeof(path), "%s/src/by-fd", fx->dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/src/sub/by-path", fx->dir);
	assert_true(exists(path));
	snprintf(path, sizeof(path), "%s/ro/beside", fx->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
}

/* ---- present: mountinfo lines of any length ------------------------------ */

/* A reusable mount ID no mount has (they are allocated lowest first). */
#define UNUSED_ID 2000000000ull
/* Where the second piece of a line read with a 4 KiB buffer starts. */
#define PIECE 4095

/* The mountinfo line of mount id (without its newline) read whole, or
 * NULL: the test's own reading, with getline. */
static char *mountinfo_line(uint64_t id)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	CHECK(f != NULL, "mountinfo: %s", strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		char *end;
		if (strtoull(line, &end, 10) == id && *end == ' ') {
			line[n - 1] = '\0';
			fclose(f);
			return line;
		}
	}
	free(line);
	fclose(f);
	return NULL;
}

static void assert_present(uint64_t id, bool want)
{
	struct lz_err err = { 0, "" };
	bool present = !want;
	CHECK_R(lz_mountns_present(id, &present, &err), 0);
	CHECK(present == want, "mount %llu: present %d, want %d", (unsigned long long)id, present, want);
}

static void body_present_long_lines(const char *dir)
{
	char path[PATH_MAX];
	/* A tmpfs whose source is 4050 '0's and UNUSED_ID: its line's byte
	 * PIECE is one of the zeros, the start of a piece that reads as
	 * UNUSED_ID. */
	static char source[4096];
	memset(source, '0', 4050);
	snprintf(source + 4050, sizeof(source) - 4050, "%llu", UNUSED_ID);
	snprintf(path, sizeof(path), "%s/long-source", dir);
	CHECK(mkdir(path, 0755) == 0, "mkdir: %s", strerror(errno));
	CHECK(mount(source, path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") == 0, "mount: %s", strerror(errno));
	uint64_t src_id = mount_id_of(AT_FDCWD, path);

	/* A mount point of some 3500 bytes of spaces and backslashes, each
	 * four in mountinfo: a line of some 14 KiB. */
	size_t n = (size_t)snprintf(path, sizeof(path), "%s/deep", dir);
	CHECK(mkdir(path, 0755) == 0, "mkdir: %s", strerror(errno));
	for (int depth = 0; depth < 14; depth++) {
		path[n++] = '/';
		for (int k = 0; k < 250; k++)
			path[n++] = k % 2 ? '\\' : ' ';
		path[n] = '\0';
		CHECK(mkdir(path, 0755) == 0, "mkdir (%zu bytes): %s", n, strerror(errno));
	}
	CHECK(mount("deep", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") == 0, "mount: %s", strerror(errno));
	uint64_t deep_id = mount_id_of(AT_FDCWD, path);
	char deep[PATH_MAX];
	memcpy(deep, path, n + 1);

	/* One more, listed after the long lines. */
	snprintf(path, sizeof(path), "%s/after", dir);
	CHECK(mkdir(path, 0755) == 0, "mkdir: %s", strerror(errno));
	CHECK(mount("after", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") == 0, "mount: %s", strerror(errno));
	uint64_t after_id = mount_id_of(AT_FDCWD, path);

	/* The lines are what this test needs them to be. */
	char *line = mountinfo_line(src_id), *end;
	CHECK(line != NULL && strlen(line) > PIECE + 64, "the long-source line");
	CHECK(line[PIECE] == '0' && strtoull(line + PIECE, &end, 10) == UNUSED_ID && *end == ' ',
	      "byte %d of the line does not start '0...%llu '", PIECE, UNUSED_ID);
	free(line);
	line = mountinfo_line(deep_id);
	CHECK(line != NULL && strlen(line) > 14000, "the deep line");
	free(line);
	CHECK(mountinfo_line(UNUSED_ID) == NULL, "mount %llu exists", UNUSED_ID);

	/* Only a line's start is a mount ID: digits inside a line name no
	 * mount, and every mount is found, after long lines too. */
	assert_present(UNUSED_ID, false);
	assert_present(src_id, true);
	assert_present(deep_id, true);
	assert_present(after_id, true);
	CHECK(umount2(deep, UMOUNT_NOFOLLOW) == 0, "umount: %s", strerror(errno));
	assert_present(deep_id, false);
	assert_present(after_id, true);
}

/* A fresh directory whoever runs the test (teardown removes it). */
static int setup_any_user(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	if (fx == NULL)
		return -1;
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/lz-test-mountinfo.XXXXXX");
	if (mkdtemp(fx->dir) == NULL) {
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static void test_lz_mountns_present__long_mountinfo_lines(void **state)
{
	struct fixture *fx = *state;
	/* Root, or a user namespace in which this user mounts a tmpfs. */
	pid_t probe = fork();
	assert_true(probe >= 0);
	if (probe == 0)
		_exit(geteuid() == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : 1);
	int status = 0;
	assert_int_equal(waitpid(probe, &status, 0), probe);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		skip();
	in_private_ns(fx->dir, body_present_long_lines);
}

/* ---- identify and present without a namespace ----------------------------- */

static void test_lz_mountns_identify__errors(void **state)
{
	struct fixture *fx = *state;
	struct lz_err err = { 0, "" };
	struct lz_mount_id id = { 7, 8, 9 };
	assert_int_equal(lz_mountns_identify("/nonexistent/lz-test", &id, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent/lz-test"));
	assert_int_equal(id.mnt_id, 7);
	if (fx == NULL)
		return;
	/* Not a directory, and a symlink is not followed. */
	char file[256], link[256];
	snprintf(file, sizeof(file), "%s/plain", fx->dir);
	snprintf(link, sizeof(link), "%s/link", fx->dir);
	int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(symlink("lower", link), 0);
	assert_int_equal(lz_mountns_identify(file, &id, &err), -ENOTDIR);
	assert_int_equal(lz_mountns_identify(link, &id, &err), -ENOTDIR);
	assert_int_equal(id.mnt_id, 7);
	assert_int_equal(lz_mountns_unmount_exact(link, &id, &err), -ENOTDIR);
}

static void test_lz_mountns_present__root_yes_unknown_no(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_mount_id root;
	assert_int_equal(lz_mountns_identify("/", &root, &err), 0);
	bool present = false;
	assert_int_equal(lz_mountns_present(root.mnt_id, &present, &err), 0);
	assert_true(present);
	assert_int_equal(lz_mountns_present(UINT64_MAX - 1, &present, &err), 0);
	assert_false(present);
}

/* Linux 6.18: mounts are named by their unique IDs, which statmount(2)
 * answers for; the reusable ID of the same mount is no name for it. */
static void test_lz_mountns_identify__unique_ids(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_mount_id root;
	assert_int_equal(lz_mountns_identify("/", &root, &err), 0);
	assert_true(root.mnt_id >= LZ_MOUNT_ID_UNIQUE_MIN);
	bool present = false;
	assert_int_equal(lz_mountns_present_in(0, root.mnt_id, &present, &err), 0);
	assert_true(present);
	struct statx sx;
	assert_int_equal(statx(AT_FDCWD, "/", 0, STATX_MNT_ID, &sx), 0);
	assert_true(sx.stx_mnt_id < LZ_MOUNT_ID_UNIQUE_MIN);
	assert_int_equal(lz_mountns_present_in(0, sx.stx_mnt_id, &present, &err), -EINVAL);
	assert_int_equal(lz_mountns_present_in(0, LZ_MOUNT_ID_UNIQUE_MIN + 0xfffffffull, &present, &err), 0);
	assert_false(present);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_mountns_identify__unique_ids),
		cmocka_unit_test_setup_teardown(test_lz_mountns_overlay__merges_and_writes_to_upper, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_mountns_overlay__invalid_layers_fail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_mountns_unmount_exact__refuses_wrong_identity, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_mountns_unmount_exact__stacked_mount_is_not_the_recorded_one, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_mountns_bind_ro__view_is_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_mountns_prepare__private_mounts_and_own_proc, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_mountns_confine_writes__only_the_trees_change, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_mountns_identify__errors, setup, teardown),
		cmocka_unit_test(test_lz_mountns_present__root_yes_unknown_no),
		cmocka_unit_test_setup_teardown(test_lz_mountns_present__long_mountinfo_lines, setup_any_user,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
