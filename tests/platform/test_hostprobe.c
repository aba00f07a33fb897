/* Unit tests for core/hostprobe.c, the host readiness probes.
 *
 * This file includes hostprobe.c itself, so the static pieces whose failure
 * paths the public API cannot reach on a healthy host (the tool search over
 * fixture directories, the runner's timeout kill and output bound, the
 * first-line sanitizer) are tested directly. The linker then takes every
 * lz_hostprobe_* symbol from here and never pulls hostprobe.o out of the
 * core library.
 *
 * Root or not: every test passes both as root and as an unprivileged user.
 * test_device_rw_at__no_permission needs root to create its fixture device
 * node and is skipped (reported as skipped) otherwise. Tests using runsc
 * skip when it is not installed. Subid parsing runs on exactly-sized heap
 * copies, so AddressSanitizer catches over-reads.
 *
 * The tool search refuses a tool beneath a directory anyone but root or the
 * caller may write, /tmp included: its fixtures live in a directory made
 * beneath $HOME (whose every directory must be root's or the caller's and
 * not group- or other-writable, as /root and /home/<user> are; the tests
 * skip otherwise) and removed afterwards. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dirent.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include "lz_test.h"

#include "platform/hostprobe.c"

/* ---- helpers ----------------------------------------------------------- */

static int parse_exact(const char *doc, size_t len, const char *user, uid_t uid,
		       struct lz_err *err, struct lz_hostprobe_subids *ret)
{
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, doc, len);
	int r = lz_hostprobe_subid_parse(copy, len, "fixture", user, uid, err, ret);
	free(copy);
	return r;
}

#define PARSE(doc, user, uid, err, ret) parse_exact(doc, sizeof(doc) - 1, user, uid, err, ret)

/* Fails the test when a refused document changed *ret. */
static void assert_untouched(const struct lz_hostprobe_subids *ids)
{
	assert_int_equal(ids->n, 99);
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	assert_non_null(d);
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

/* No child of ours is left, reaped or not. */
static void assert_no_children(void)
{
	siginfo_t info;
	errno = 0;
	assert_int_equal(waitid(P_ALL, 0, &info, WEXITED | WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static int open_path(const char *path)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

struct tmpdir {
	char path[PATH_MAX];
};

static void tmpdir_make(struct tmpdir *t)
{
	snprintf(t->path, sizeof(t->path), "/tmp/lz-hostprobe-XXXXXX");
	assert_non_null(mkdtemp(t->path));
}

static bool dir_clean(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_uid == 0 || st.st_uid == geteuid()) &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* A directory whose every ancestor is root's or ours and not group- or
 * other-writable, with no symbolic link on the way: beneath $HOME, or fail. */
static void clean_tmpdir_make(struct tmpdir *t)
{
	const char *home = getenv("HOME");
	char prefix[PATH_MAX];
	/* A canonical-looking $HOME: absolute, not "/", no "//" or trailing '/'
	 * (the tests compare the fixture's name with the canonical path). */
	bool clean = home != NULL && home[0] == '/' && strlen(home) > 1 && strlen(home) < sizeof(prefix) - 32 &&
		     strstr(home, "//") == NULL && home[strlen(home) - 1] != '/' && dir_clean("/");
	for (size_t i = 1; clean; i++) {
		if (home[i] != '/' && home[i] != '\0')
			continue;
		memcpy(prefix, home, i);
		prefix[i] = '\0';
		clean = dir_clean(prefix);
		if (home[i] == '\0')
			break;
	}
	if (!clean) {
		fail_msg("$HOME (%s) is not a directory only root or you may write: the locate fixtures need one",
			 home ? home : "unset");
	}
	snprintf(t->path, sizeof(t->path), "%s/.lz-test-hostprobe-XXXXXX", home);
	assert_non_null(mkdtemp(t->path)); /* 0700 */
}

static void tmpdir_file(const struct tmpdir *t, const char *name, mode_t mode)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", t->path, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

static void tmpdir_remove(const struct tmpdir *t, const char *const *names)
{
	char path[PATH_MAX + 64];
	for (; *names; names++) {
		snprintf(path, sizeof(path), "%s/%s", t->path, *names);
		if (unlink(path) < 0)
			rmdir(path);
	}
	assert_int_equal(rmdir(t->path), 0);
}

/* ---- kernel ------------------------------------------------------------ */

static void test_lz_hostprobe_kernel_parse_release__distribution_suffix(void **state)
{
	(void)state;
	unsigned major = 0, minor = 0;
	assert_int_equal(lz_hostprobe_kernel_parse_release("6.18.44-fc-v657", NULL, &major, &minor), 0);
	assert_int_equal(major, 6);
	assert_int_equal(minor, 18);
	assert_int_equal(lz_hostprobe_kernel_parse_release("5.10.0-28-amd64", NULL, &major, &minor), 0);
	assert_int_equal(major, 5);
	assert_int_equal(minor, 10);
}

static void test_lz_hostprobe_kernel_parse_release__major_minor_only(void **state)
{
	(void)state;
	unsigned major = 0, minor = 0;
	assert_int_equal(lz_hostprobe_kernel_parse_release("6.9", NULL, &major, &minor), 0);
	assert_int_equal(major, 6);
	assert_int_equal(minor, 9);
}

static void test_lz_hostprobe_kernel_parse_release__malformed(void **state)
{
	(void)state;
	static const char *const bad[] = { "", "6", "6.", "x.1", "6.x", ".9", "-6.9", " 6.9", "6-9" };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		struct lz_err err = { 0 };
		unsigned major = 77, minor = 77;
		assert_int_equal(lz_hostprobe_kernel_parse_release(bad[i], &err, &major, &minor), -EINVAL);
		assert_int_equal(major, 77);
		assert_int_equal(minor, 77);
		assert_int_equal(err.code, EINVAL);
		assert_non_null(strstr(err.msg, "expected <major>.<minor>"));
	}
}

static void test_lz_hostprobe_kernel_parse_release__overflow(void **state)
{
	(void)state;
	unsigned major = 77, minor = 77;
	assert_int_equal(lz_hostprobe_kernel_parse_release("4294967296.1", NULL, &major, &minor), -EINVAL);
	assert_int_equal(lz_hostprobe_kernel_parse_release("6.99999999999999999999", NULL, &major, &minor),
			 -EINVAL);
	assert_int_equal(major, 77);
	assert_int_equal(lz_hostprobe_kernel_parse_release("4294967295.0", NULL, &major, &minor), 0);
	assert_int_equal(major, 4294967295u);
}

static void test_lz_hostprobe_kernel__matches_uname(void **state)
{
	(void)state;
	struct utsname u;
	struct lz_hostprobe_kernel k;
	assert_int_equal(uname(&u), 0);
	assert_int_equal(lz_hostprobe_kernel(NULL, &k), 0);
	assert_string_equal(k.release, u.release);
	assert_string_equal(k.machine, u.machine);
	assert_true(k.version_known); /* every Linux release starts major.minor */
	assert_true(k.major >= 3);
}

/* ---- identity ---------------------------------------------------------- */

static void test_lz_hostprobe_identity__invoking_user(void **state)
{
	(void)state;
	struct lz_hostprobe_identity id;
	assert_int_equal(lz_hostprobe_identity(NULL, &id), 0);
	assert_int_equal(id.uid, getuid());
	assert_int_equal(id.gid, getgid());
	struct passwd *pw = getpwuid(getuid());
	assert_int_equal(id.has_user, pw != NULL);
	if (pw != NULL)
		assert_string_equal(id.user, pw->pw_name);
}

/* The passwd database unreadable for want of descriptors: an error, not
 * "no such user" (which would match subordinate IDs by uid alone). */
static void test_lz_hostprobe_identity__an_unreadable_database_is_an_error(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	struct lz_hostprobe_identity id;
	struct lz_test_fds full;
	assert_int_equal(lz_test_fds_fill(&full), 0);
	int r = lz_hostprobe_identity(&err, &id);
	assert_int_equal(lz_test_fds_release(&full), 0);
	assert_int_equal(r, -EMFILE);
	assert_non_null(strstr(err.msg, "passwd entry"));
}

/* ---- subid parser ------------------------------------------------------ */

static void test_lz_hostprobe_subid_parse__single_range(void **state)
{
	(void)state;
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(PARSE("alice:100000:65536\n", "alice", 1000, NULL, &ids), 0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(ids.ranges[0].start, 100000);
	assert_int_equal(ids.ranges[0].count, 65536);
}

static void test_lz_hostprobe_subid_parse__multiple_ranges_in_file_order(void **state)
{
	(void)state;
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(PARSE("alice:300000:10\n"
			       "bob:165536:65536\n"
			       "alice:100000:65536\n",
			       "alice", 1000, NULL, &ids),
			 0);
	assert_int_equal(ids.n, 2);
	assert_int_equal(ids.ranges[0].start, 300000);
	assert_int_equal(ids.ranges[0].count, 10);
	assert_int_equal(ids.ranges[1].start, 100000);
	assert_int_equal(ids.ranges[1].count, 65536);
}

static void test_lz_hostprobe_subid_parse__comments_and_blank_lines(void **state)
{
	(void)state;
	struct lz_hostprobe_subids ids = { .n = 99 };
	/* Last line without a newline; a comment may say anything. */
	assert_int_equal(PARSE("# owner:start:count\n"
			       "\n"
			       "  \t\n"
			       "#alice:1:2 not parsed: ::: \n"
			       "alice:100000:65536",
			       "alice", 1000, NULL, &ids),
			 0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(ids.ranges[0].start, 100000);
}

static void test_lz_hostprobe_subid_parse__empty_file(void **state)
{
	(void)state;
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(parse_exact("", 0, "alice", 1000, NULL, &ids), 0);
	assert_int_equal(ids.n, 0);
}

static void test_lz_hostprobe_subid_parse__matches_name_or_uid(void **state)
{
	(void)state;
	static const char doc[] = "1000:200000:65536\n"
				  "alice:100000:65536\n"
				  "alice2:400000:1\n"
				  "10000:500000:1\n"
				  "100:600000:1\n";
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(PARSE(doc, "alice", 1000, NULL, &ids), 0);
	assert_int_equal(ids.n, 2);
	assert_int_equal(ids.ranges[0].start, 200000);
	assert_int_equal(ids.ranges[1].start, 100000);

	/* No passwd entry: the uid alone matches. */
	assert_int_equal(PARSE(doc, NULL, 1000, NULL, &ids), 0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(ids.ranges[0].start, 200000);

	/* Neither a prefix of the name nor of the uid matches. */
	assert_int_equal(PARSE(doc, "alic", 10, NULL, &ids), 0);
	assert_int_equal(ids.n, 0);
}

static void test_lz_hostprobe_subid_parse__malformed_line_number(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(PARSE("alice:100000:65536\n"
			       "# fine\n"
			       "bob 165536 65536\n",
			       "alice", 1000, &err, &ids),
			 -EINVAL);
	assert_untouched(&ids);
	assert_int_equal(err.code, EINVAL);
	assert_string_equal(err.msg, "parse 'fixture': line 3: expected owner:start:count");
}

static void test_lz_hostprobe_subid_parse__malformed_variants(void **state)
{
	(void)state;
	static const struct {
		const char *doc;
		const char *why;
	} bad[] = {
		{ "alice:1\n", "expected owner:start:count" },
		{ "alice:1:2:3\n", "too many fields" },
		{ ":1:2\n", "empty owner" },
		{ "al ice:1:2\n", "space or control character in owner" },
		{ "alice:-1:2\n", "start is not" },
		{ "alice:+1:2\n", "start is not" },
		{ "alice:01:2\n", "start is not" },
		{ "alice:0x10:2\n", "start is not" },
		{ "alice: 1:2\n", "start is not" },
		{ "alice::2\n", "start is not" },
		{ "alice:1:\n", "count is not" },
		{ "alice:1:2 \n", "count is not" },
		{ "alice:1:2\r\n", "count is not" },
		{ "alice:1:2#x\n", "count is not" },
		/* Another user's malformed line is refused as well. */
		{ "bob:1:x\n", "count is not" },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		struct lz_err err = { 0 };
		struct lz_hostprobe_subids ids = { .n = 99 };
		int r = parse_exact(bad[i].doc, strlen(bad[i].doc), "alice", 1000, &err, &ids);
		if (r != -EINVAL || strstr(err.msg, bad[i].why) == NULL)
			fail_msg("%zu: '%s' gave %d '%s'", i, bad[i].doc, r, err.msg);
		assert_non_null(strstr(err.msg, "line 1: "));
		assert_untouched(&ids);
	}
}

static void test_lz_hostprobe_subid_parse__integer_overflow(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"alice:4294967296:1\n",	       /* start above 2^32 - 1 */
		"alice:1:4294967296\n",	       /* count above 2^32 - 1 */
		"alice:4294967295:2\n",	       /* start + count beyond 2^32 */
		"alice:99999999999999999999999:1\n", /* would wrap 64 bits */
		"alice:1:18446744073709551617\n",
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		struct lz_err err = { 0 };
		struct lz_hostprobe_subids ids = { .n = 99 };
		assert_int_equal(parse_exact(bad[i], strlen(bad[i]), "alice", 1000, &err, &ids), -EINVAL);
		assert_untouched(&ids);
	}
	/* The last ID of the space is reachable, exactly. */
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(PARSE("alice:4294967295:1\nalice:0:4294967295\n", "alice", 1000, NULL, &ids), 0);
	assert_int_equal(ids.n, 2);
	assert_int_equal(ids.ranges[0].start, 4294967295u);
	assert_int_equal(ids.ranges[1].count, 4294967295u);
}

static void test_lz_hostprobe_subid_parse__nul_byte(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	struct lz_hostprobe_subids ids = { .n = 99 };
	static const char doc[] = "alice:1:2\nal\0ice:1:2\n";
	assert_int_equal(parse_exact(doc, sizeof(doc) - 1, "alice", 1000, &err, &ids), -EINVAL);
	assert_string_equal(err.msg, "parse 'fixture': line 2: NUL byte");
	assert_untouched(&ids);
}

static void test_lz_hostprobe_subid_parse__too_many_ranges(void **state)
{
	(void)state;
	char *doc = malloc(64 * (LZ_HOSTPROBE_SUBID_RANGES_MAX + 1));
	size_t len = 0;
	assert_non_null(doc);
	for (int i = 0; i < LZ_HOSTPROBE_SUBID_RANGES_MAX; i++)
		len += (size_t)sprintf(doc + len, "alice:%d:1\n", 100000 + i);
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(parse_exact(doc, len, "alice", 1000, NULL, &ids), 0);
	assert_int_equal(ids.n, LZ_HOSTPROBE_SUBID_RANGES_MAX);

	len += (size_t)sprintf(doc + len, "alice:1:1\n");
	struct lz_err err = { 0 };
	ids.n = 99;
	assert_int_equal(parse_exact(doc, len, "alice", 1000, &err, &ids), -E2BIG);
	assert_untouched(&ids);
	assert_non_null(strstr(err.msg, "line 65: more than 64 ranges for 'alice'"));
	free(doc);
}

static void test_lz_hostprobe_subid_parse__too_large(void **state)
{
	(void)state;
	size_t len = LZ_HOSTPROBE_SUBID_FILE_MAX + 1;
	char *doc = malloc(len);
	assert_non_null(doc);
	memset(doc, '\n', len);
	struct lz_err err = { 0 };
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(parse_exact(doc, len, "alice", 1000, &err, &ids), -EFBIG);
	assert_untouched(&ids);
	assert_int_equal(parse_exact(doc, len - 1, "alice", 1000, &err, &ids), 0);
	free(doc);
}

/* ---- subid files ------------------------------------------------------- */

static int memfd_with(const char *bytes, size_t len)
{
	int fd = memfd_create("subuid", MFD_CLOEXEC);
	assert_true(fd >= 0);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, bytes + off, len - off);
		assert_true(n > 0);
		off += (size_t)n;
	}
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static void test_lz_hostprobe_subid_read_fd__regular_file(void **state)
{
	(void)state;
	static const char doc[] = "alice:100000:65536\nbob:165536:65536\n";
	int fd = memfd_with(doc, sizeof(doc) - 1);
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(lz_hostprobe_subid_read_fd(fd, "memfd", "bob", 1001, NULL, &ids), 0);
	assert_int_equal(ids.n, 1);
	assert_int_equal(ids.ranges[0].start, 165536);
	close(fd);
}

static void test_lz_hostprobe_subid_read_fd__larger_than_limit(void **state)
{
	(void)state;
	size_t len = LZ_HOSTPROBE_SUBID_FILE_MAX + 1;
	char *doc = malloc(len);
	assert_non_null(doc);
	memset(doc, '\n', len);
	int fd = memfd_with(doc, len);
	struct lz_err err = { 0 };
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(lz_hostprobe_subid_read_fd(fd, "memfd", "alice", 1000, &err, &ids), -EFBIG);
	assert_string_equal(err.msg, "read 'memfd': larger than 1048576 bytes");
	assert_untouched(&ids);

	/* Exactly at the limit is accepted. */
	assert_int_equal(ftruncate(fd, LZ_HOSTPROBE_SUBID_FILE_MAX), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(lz_hostprobe_subid_read_fd(fd, "memfd", "alice", 1000, NULL, &ids), 0);
	assert_int_equal(ids.n, 0);
	close(fd);
	free(doc);
}

static void test_lz_hostprobe_subid_read_fd__not_regular_file(void **state)
{
	(void)state;
	int p[2];
	struct lz_err err = { 0 };
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(lz_hostprobe_subid_read_fd(p[0], "pipe", "alice", 1000, &err, &ids), -EINVAL);
	assert_string_equal(err.msg, "read 'pipe': not a regular file");
	assert_untouched(&ids);
	close(p[0]);
	close(p[1]);
}

static void test_lz_hostprobe_subid_read_fd__bad_fd(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	struct lz_hostprobe_subids ids = { .n = 99 };
	assert_int_equal(lz_hostprobe_subid_read_fd(-1, "nothing", "alice", 1000, &err, &ids), -EBADF);
	assert_non_null(strstr(err.msg, "stat 'nothing': "));
	assert_untouched(&ids);
}

static void test_lz_hostprobe_subids__reads_etc_file(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	struct lz_hostprobe_subids ids = { .n = 99 };
	/* Nobody holds IDs under this name and uid; the file may be absent. */
	int r = lz_hostprobe_subids(LZ_HOSTPROBE_SUBGID, "lz-no-such-user", 4000000000u, &err, &ids);
	if (r == -ENOENT) {
		assert_string_equal(err.msg, "open '/etc/subgid': No such file or directory");
		assert_untouched(&ids);
	} else {
		assert_int_equal(r, 0);
		assert_int_equal(ids.n, 0);
	}
}

/* ---- the range a launch maps ------------------------------------------- */

static struct lz_hostprobe_subids ranges_of(size_t n, const uint32_t (*v)[2])
{
	struct lz_hostprobe_subids ids = { .n = n };
	for (size_t i = 0; i < n; i++)
		ids.ranges[i] = (struct lz_hostprobe_subid_range){ v[i][0], v[i][1] };
	return ids;
}

static void test_lz_hostprobe_subid_choose__lowest_of_at_least_65536(void **state)
{
	(void)state;
	const uint32_t v[][2] = { { 300000, 65536 }, { 100000, 65535 }, { 200000, 100000 }, { 5000, 10 } };
	struct lz_hostprobe_subids ids = ranges_of(4, v);
	struct lz_hostprobe_subid_range r = { 7, 7 };
	assert_int_equal(lz_hostprobe_subid_choose(&ids, LZ_HOSTPROBE_SUBUID, 1000, "alice", NULL, &r), 0);
	assert_int_equal(r.start, 200000);
	assert_int_equal(r.count, 100000);
}

/* Adjacent ranges are not one: the launch maps a single allocation. */
static void test_lz_hostprobe_subid_choose__adjacent_halves_are_none(void **state)
{
	(void)state;
	const uint32_t v[][2] = { { 132768, 32768 }, { 100000, 32768 } };
	struct lz_hostprobe_subids ids = ranges_of(2, v);
	struct lz_hostprobe_subid_range r = { 7, 7 };
	struct lz_err err = { 0 };
	assert_int_equal(lz_hostprobe_subid_choose(&ids, LZ_HOSTPROBE_SUBGID, 1000, "alice", &err, &r), -ENOENT);
	assert_string_equal(err.msg, "no /etc/subgid range of at least 65536 IDs for you (add one with usermod "
				     "--add-subgids; see docs/install.md)");
	assert_int_equal(r.start, 7);
	ids.n = 0;
	assert_int_equal(lz_hostprobe_subid_choose(&ids, LZ_HOSTPROBE_SUBUID, 1000, "alice", &err, &r), -ENOENT);
	assert_string_equal(err.msg, "no allocation for alice in /etc/subuid (add a range of at least 65536 IDs "
				     "with usermod --add-subuids; see docs/install.md)");
}

/* Image IDs become the range's host IDs: not root, a system ID or yours. */
static void test_lz_hostprobe_subid_choose__refuses_an_unsafe_range(void **state)
{
	(void)state;
	static const struct {
		uint32_t start, count, own;
		enum lz_hostprobe_subid_kind kind;
		const char *why;
	} cases[] = {
		{ 0, 65536, 1000, LZ_HOSTPROBE_SUBUID, "/etc/subuid: alice's range 0-65535 (the lowest of at least "
						       "65536 IDs, the one a launch maps) holds uid 0 (root)" },
		{ 0, 65536, 1000, LZ_HOSTPROBE_SUBGID, "/etc/subgid: alice's range 0-65535 (" },
		{ 1, 65536, 1000, LZ_HOSTPROBE_SUBUID, "starts below 1000, among the system's IDs" },
		{ 999, 65536, 100, LZ_HOSTPROBE_SUBUID, "starts below 1000" },
		{ 1000, 65536, 1001, LZ_HOSTPROBE_SUBUID, "/etc/subuid: alice's range 1000-66535 (the lowest of "
							  "at least 65536 IDs, the one a launch maps) holds your own "
							  "uid" },
		{ 100000, 65536, 165535, LZ_HOSTPROBE_SUBGID, "holds your own gid" },
		{ 100000, 65536, 100000, LZ_HOSTPROBE_SUBGID, "holds your own gid" },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
		/* A safe range later in the file is not taken instead. */
		const uint32_t v[][2] = { { 400000, 65536 }, { cases[i].start, cases[i].count } };
		struct lz_hostprobe_subids ids = ranges_of(2, v);
		struct lz_hostprobe_subid_range r = { 7, 7 };
		struct lz_err err = { 0 };
		print_message("case %zu\n", i);
		assert_int_equal(lz_hostprobe_subid_choose(&ids, cases[i].kind, cases[i].own, "alice", &err, &r),
				 -EPERM);
		assert_non_null(strstr(err.msg, cases[i].why));
		assert_non_null(strstr(err.msg, "usermod --del-sub"));
		assert_int_equal(r.start, 7);
	}
	/* Just past the edges is fine. */
	const uint32_t ok[][2] = { { 1000, 65536 } };
	struct lz_hostprobe_subids ids = ranges_of(1, ok);
	struct lz_hostprobe_subid_range r;
	assert_int_equal(lz_hostprobe_subid_choose(&ids, LZ_HOSTPROBE_SUBUID, 999, "alice", NULL, &r), 0);
	assert_int_equal(lz_hostprobe_subid_choose(&ids, LZ_HOSTPROBE_SUBUID, 66536, "alice", NULL, &r), 0);
	const uint32_t top[][2] = { { 4294901760u, 65536 } };
	ids = ranges_of(1, top);
	assert_int_equal(lz_hostprobe_subid_choose(&ids, LZ_HOSTPROBE_SUBUID, 4294967295u, "1000", NULL, &r), -EPERM);
}

/* ---- files and devices ------------------------------------------------- */

static void test_lz_hostprobe_file__dev_null(void **state)
{
	(void)state;
	struct lz_hostprobe_file f;
	assert_int_equal(lz_hostprobe_file("/dev/null", NULL, &f), 0);
	assert_true(S_ISCHR(f.mode));
	assert_int_equal(f.mode & 0777, 0666);
	assert_int_equal(f.uid, 0);
}

static void test_lz_hostprobe_file__missing(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	struct lz_hostprobe_file f = { .uid = 77 };
	assert_int_equal(lz_hostprobe_file("/nonexistent/lz", &err, &f), -ENOENT);
	assert_string_equal(err.msg, "stat '/nonexistent/lz': No such file or directory");
	assert_int_equal(f.uid, 77);
}

/* No link is followed, neither the last component nor one on the way. */
static void test_lz_hostprobe_file__follows_no_symlink(void **state)
{
	(void)state;
	struct tmpdir t;
	struct lz_err err = { 0 };
	struct lz_hostprobe_file f = { .uid = 77 };
	char link[PATH_MAX + 16], through[PATH_MAX + 32], dir[PATH_MAX + 16];
	tmpdir_make(&t);
	snprintf(link, sizeof(link), "%s/null", t.path);
	assert_int_equal(symlink("/dev/null", link), 0);
	assert_int_equal(lz_hostprobe_file(link, &err, &f), -ELOOP);
	assert_non_null(strstr(err.msg, "/null' is a symbolic link; the probe follows none"));
	snprintf(dir, sizeof(dir), "%s/dev", t.path);
	assert_int_equal(symlink("/dev", dir), 0);
	snprintf(through, sizeof(through), "%s/null", dir);
	assert_int_equal(lz_hostprobe_file(through, &err, &f), -ELOOP);
	assert_non_null(strstr(err.msg, "/dev' is a symbolic link"));
	assert_int_equal(f.uid, 77);
	/* The directory itself is fine, and so is a path without links. */
	assert_int_equal(lz_hostprobe_file(t.path, NULL, &f), 0);
	assert_true(S_ISDIR(f.mode));
	assert_int_equal(lz_hostprobe_file("/", NULL, &f), 0);
	assert_true(S_ISDIR(f.mode));
	tmpdir_remove(&t, (const char *const[]){ "null", "dev", NULL });
}

static void test_lz_hostprobe_file__refuses_unclean_paths(void **state)
{
	(void)state;
	static const char *const bad[] = { "dev/null", "/dev/../dev/null", "/dev/./null", "/dev//null", "/dev/" };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		struct lz_err err = { 0 };
		struct lz_hostprobe_file f = { .uid = 77 };
		assert_int_equal(lz_hostprobe_file(bad[i], &err, &f), -EINVAL);
		assert_memory_equal(err.msg, "stat '", 6);
		assert_int_equal(f.uid, 77);
	}
}

static void test_device_rw_at__dev_null(void **state)
{
	(void)state;
	int before = count_open_fds();
	assert_int_equal(device_rw_at("/dev/null", NULL), 0);
	assert_int_equal(count_open_fds(), before);
}

/* Reports choose the path: only the devices Lazaret needs are opened. */
static void test_lz_hostprobe_device_rw__refuses_other_devices(void **state)
{
	(void)state;
	static const char *const bad[] = { "/dev/null", "/dev/ttyS0", "/dev/watchdog", "/dev/fuse/", "/dev/./fuse",
					   "fuse", "" };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		struct lz_err err = { 0 };
		assert_int_equal(lz_hostprobe_device_rw(bad[i], &err), -EINVAL);
		assert_non_null(strstr(err.msg, "not one of the probed devices (/dev/fuse, /dev/net/tun, /dev/kvm)"));
	}
	/* The listed ones are probed (the answer is the host's). */
	for (const char *const *d = lz_hostprobe_devices; *d; d++) {
		struct lz_err err = { 0 };
		int r = lz_hostprobe_device_rw(*d, &err);
		assert_true(r != -EINVAL);
	}
}

static void test_device_rw_at__missing(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	assert_int_equal(device_rw_at("/dev/lz-no-such-device", &err), -ENOENT);
	assert_string_equal(err.msg, "open '/dev/lz-no-such-device': No such file or directory");
}

static void test_device_rw_at__not_a_character_device(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	assert_int_equal(device_rw_at(lz_test_source("CMakeLists.txt"), &err), -ENODEV);
	assert_non_null(strstr(err.msg, "CMakeLists.txt': not a character device"));
	assert_int_equal(device_rw_at("/tmp", &err), -ENODEV);
}

/* Needs root to create a 0600 device node (a copy of /dev/null) and then
 * probes it as uid/gid 65534 in a child; skipped when not root. */
static void test_device_rw_at__no_permission(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: needs root to create the fixture device node\n");
		skip();
	}
	struct tmpdir t;
	char node[PATH_MAX + 16];
	tmpdir_make(&t);
	assert_int_equal(chmod(t.path, 0755), 0);
	snprintf(node, sizeof(node), "%s/null0600", t.path);
	assert_int_equal(mknod(node, S_IFCHR | 0600, makedev(1, 3)), 0);
	int rootfd = open(node, O_RDWR | O_CLOEXEC);
	if (rootfd < 0) { /* /tmp mounted nodev: no meaningful fixture */
		unlink(node);
		rmdir(t.path);
		print_message("skipped: device nodes unusable under /tmp\n");
		skip();
	}
	close(rootfd);

	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lz_err err = { 0 };
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		int r = device_rw_at(node, &err);
		_exit(r == -EACCES && strstr(err.msg, "open read-write '") == err.msg ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unlink(node);
	rmdir(t.path);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- user namespaces --------------------------------------------------- */

static void test_lz_hostprobe_userns__reaps_its_child(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	int before = count_open_fds();
	int r = lz_hostprobe_userns(&err);
	/* Works as root and wherever unprivileged user namespaces are allowed;
	 * elsewhere the child's errno comes back with the operation named. */
	if (r < 0) {
		assert_int_equal(err.code, -r);
		assert_non_null(strstr(err.msg, "unshare 'CLONE_NEWUSER': "));
	}
	assert_no_children();
	assert_int_equal(count_open_fds(), before);
}

/* ---- tool search ------------------------------------------------------- */

static void test_lz_hostprobe_tool_locate__refuses_unknown_name(void **state)
{
	(void)state;
	static const char *const bad[] = { "bash", "sh", "", "runsc ", "../bin/runsc", "/usr/bin/runsc",
					   "RUNSC", "runsc/" };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		struct lz_err err = { 0 };
		struct lz_path tool = LZ_PATH_INIT;
		assert_int_equal(lz_hostprobe_tool_locate(bad[i], &err, &tool), -EINVAL);
		assert_int_equal(tool.fd, -EBADF);
		assert_null(tool.canonical);
		assert_non_null(strstr(err.msg, "not an allowed tool name"));
	}
}

static void test_lz_hostprobe_tool_version__refuses_unknown_name(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	static struct lz_hostprobe_tool t = { .path = "untouched" };
	assert_int_equal(lz_hostprobe_tool_version("ls", &err, &t), -EINVAL);
	assert_string_equal(t.path, "untouched");
	assert_string_equal(err.msg, "locate 'ls': not an allowed tool name");
}

/* The descriptor is of the file at the canonical path. */
static void assert_is(const struct lz_path *p, const char *path)
{
	struct stat a, b;
	assert_int_equal(fstat(p->fd, &a), 0);
	assert_int_equal(stat(path, &b), 0);
	assert_true(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
	assert_true(fcntl(p->fd, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(p->fd, F_GETFL) & O_PATH);
}

static void test_lz_hostprobe_tool_locate__runsc_in_trusted_dir(void **state)
{
	(void)state;
	struct lz_path tool = LZ_PATH_INIT;
	struct lz_err err = { 0 };
	int r = lz_hostprobe_tool_locate("runsc", &err, &tool);
	if (r == -ENOENT) {
		print_message("skipped: runsc not installed (%s)\n", err.msg);
		skip();
	}
	assert_int_equal(r, 0);
	/* The canonical path of the first trusted directory's runsc. */
	char *want = NULL;
	for (const char *const *d = lz_hostprobe_trusted_dirs; *d && want == NULL; d++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/runsc", *d);
		want = realpath(path, NULL);
	}
	assert_non_null(want);
	assert_string_equal(tool.canonical, want);
	assert_is(&tool, want);
	free(want);
	lz_path_release(&tool);
}

static void test_locate_in__first_directory_wins(void **state)
{
	(void)state;
	struct tmpdir a, b;
	char want[PATH_MAX + 16];
	struct lz_path tool = LZ_PATH_INIT;
	clean_tmpdir_make(&a);
	clean_tmpdir_make(&b);
	tmpdir_file(&b, "runsc", 0755);
	const char *dirs[] = { a.path, b.path, NULL };
	assert_int_equal(locate_in(dirs, "runsc", NULL, &tool), 0);
	snprintf(want, sizeof(want), "%s/runsc", b.path);
	assert_string_equal(tool.canonical, want);
	assert_true(tool.fd > 2);
	assert_is(&tool, want);
	lz_path_release(&tool);

	tmpdir_file(&a, "runsc", 0700);
	assert_int_equal(locate_in(dirs, "runsc", NULL, &tool), 0);
	snprintf(want, sizeof(want), "%s/runsc", a.path);
	assert_string_equal(tool.canonical, want);
	lz_path_release(&tool);
	tmpdir_remove(&a, (const char *const[]){ "runsc", NULL });
	tmpdir_remove(&b, (const char *const[]){ "runsc", NULL });
}

static void test_locate_in__not_found_lists_directories(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	struct lz_path tool = LZ_PATH_INIT;
	const char *dirs[] = { "/nonexistent/a", "/dev/null", NULL }; /* ENOENT, ENOTDIR */
	assert_int_equal(locate_in(dirs, "slirp4netns", &err, &tool), -ENOENT);
	assert_string_equal(err.msg, "locate 'slirp4netns': not found in /nonexistent/a /dev/null");
	assert_int_equal(tool.fd, -EBADF);
	assert_null(tool.canonical);
}

static void test_locate_in__refuses_writable_by_others(void **state)
{
	(void)state;
	struct tmpdir a, b;
	struct lz_err err = { 0 };
	struct lz_path tool = LZ_PATH_INIT;
	char path[PATH_MAX + 16];
	clean_tmpdir_make(&a);
	clean_tmpdir_make(&b);
	tmpdir_file(&a, "runsc", 0775); /* group-writable: refused ... */
	tmpdir_file(&b, "runsc", 0755); /* ... and not skipped for this one */
	const char *dirs[] = { a.path, b.path, NULL };
	assert_int_equal(locate_in(dirs, "runsc", &err, &tool), -EPERM);
	assert_non_null(strstr(err.msg, "writable by group/others"));
	assert_int_equal(tool.fd, -EBADF);
	snprintf(path, sizeof(path), "%s/runsc", a.path);
	assert_int_equal(chmod(path, 0757), 0);
	assert_int_equal(locate_in(dirs, "runsc", &err, &tool), -EPERM);
	assert_int_equal(tool.fd, -EBADF);
	tmpdir_remove(&a, (const char *const[]){ "runsc", NULL });
	tmpdir_remove(&b, (const char *const[]){ "runsc", NULL });
}

/* Whoever may write a directory on the way may rename any file into the
 * tool's place after the check: such a directory refuses the tool. */
static void test_locate_in__refuses_a_directory_others_may_write(void **state)
{
	(void)state;
	struct tmpdir a, t;
	struct lz_err err = { 0 };
	struct lz_path tool = LZ_PATH_INIT;
	char sub[PATH_MAX + 16], want[PATH_MAX + 64];
	clean_tmpdir_make(&a);
	snprintf(sub, sizeof(sub), "%s/bin", a.path);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(want, sizeof(want), "%s/runsc", sub);
	int fd = open(want, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(chmod(want, 0755), 0);
	const char *dirs[] = { sub, NULL };
	assert_int_equal(locate_in(dirs, "runsc", NULL, &tool), 0);
	lz_path_release(&tool);
	/* The tool's own directory, group-writable (root:staff 2775). */
	assert_int_equal(chmod(sub, 02775), 0);
	assert_int_equal(locate_in(dirs, "runsc", &err, &tool), -EPERM);
	assert_int_equal(tool.fd, -EBADF);
	assert_non_null(strstr(err.msg, "directory '"));
	assert_non_null(strstr(err.msg, "/bin' (owner uid "));
	assert_non_null(strstr(err.msg, "mode 2775) may be written by someone other than root or you"));
	/* An ancestor, writable by others. */
	assert_int_equal(chmod(sub, 0755), 0);
	assert_int_equal(chmod(a.path, 0703), 0);
	assert_int_equal(locate_in(dirs, "runsc", &err, &tool), -EPERM);
	assert_non_null(strstr(err.msg, "mode 0703)"));
	assert_int_equal(chmod(a.path, 0700), 0);
	assert_int_equal(unlink(want), 0);
	assert_int_equal(rmdir(sub), 0);
	tmpdir_remove(&a, (const char *const[]){ NULL });

	/* /tmp (1777) is on the way of anything beneath it. */
	tmpdir_make(&t);
	assert_int_equal(chmod(t.path, 0755), 0);
	tmpdir_file(&t, "slirp4netns", 0755);
	const char *tdirs[] = { t.path, NULL };
	assert_int_equal(locate_in(tdirs, "slirp4netns", &err, &tool), -EPERM);
	assert_non_null(strstr(err.msg, "directory '/tmp' (owner uid 0, mode 1777)"));
	tmpdir_remove(&t, (const char *const[]){ "slirp4netns", NULL });
}

/* A link in a trusted directory is resolved once: the tool is the file it
 * names, checked with every directory on that file's own path. */
static void test_locate_in__resolves_a_link_once(void **state)
{
	(void)state;
	struct tmpdir trusted, elsewhere;
	struct lz_err err = { 0 };
	struct lz_path tool = LZ_PATH_INIT;
	char link[PATH_MAX + 16], target[PATH_MAX + 64], sub[PATH_MAX + 16];
	clean_tmpdir_make(&trusted);
	clean_tmpdir_make(&elsewhere);
	tmpdir_file(&elsewhere, "runsc-release", 0755);
	snprintf(target, sizeof(target), "%s/runsc-release", elsewhere.path);
	snprintf(link, sizeof(link), "%s/runsc", trusted.path);
	assert_int_equal(symlink(target, link), 0);
	const char *dirs[] = { trusted.path, NULL };
	assert_int_equal(locate_in(dirs, "runsc", NULL, &tool), 0);
	assert_string_equal(tool.canonical, target);
	assert_is(&tool, target);
	lz_path_release(&tool);

	/* The target's directory may be written by others: refused, though
	 * the link and its own directory are fine. */
	snprintf(sub, sizeof(sub), "%s/shared", elsewhere.path);
	assert_int_equal(mkdir(sub, 0777), 0);
	assert_int_equal(chmod(sub, 0777), 0);
	tmpdir_file(&elsewhere, "shared/runsc", 0755);
	snprintf(target, sizeof(target), "%s/runsc", sub);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(locate_in(dirs, "runsc", &err, &tool), -EPERM);
	assert_non_null(strstr(err.msg, "/shared' (owner uid"));
	assert_non_null(strstr(err.msg, "mode 0777)"));
	assert_int_equal(tool.fd, -EBADF);

	/* A link to nothing is no tool there. */
	assert_int_equal(unlink(target), 0);
	assert_int_equal(locate_in(dirs, "runsc", &err, &tool), -ENOENT);
	assert_int_equal(rmdir(sub), 0);
	tmpdir_remove(&trusted, (const char *const[]){ "runsc", NULL });
	tmpdir_remove(&elsewhere, (const char *const[]){ "runsc-release", NULL });
}

static void test_locate_in__refuses_non_executable(void **state)
{
	(void)state;
	struct tmpdir a;
	struct lz_err err = { 0 };
	struct lz_path tool = LZ_PATH_INIT;
	char sub[PATH_MAX + 16];
	clean_tmpdir_make(&a);
	tmpdir_file(&a, "newuidmap", 0644);
	snprintf(sub, sizeof(sub), "%s/newgidmap", a.path);
	assert_int_equal(mkdir(sub, 0755), 0);
	const char *dirs[] = { a.path, NULL };
	assert_int_equal(locate_in(dirs, "newuidmap", &err, &tool), -EACCES);
	assert_non_null(strstr(err.msg, "newuidmap': not an executable file"));
	assert_int_equal(locate_in(dirs, "newgidmap", &err, &tool), -EACCES);
	assert_int_equal(tool.fd, -EBADF);
	tmpdir_remove(&a, (const char *const[]){ "newuidmap", "newgidmap", NULL });
}

/* The located descriptor runs the file that was checked, whatever is
 * renamed over its name afterwards (what the launch relies on: runsc,
 * slirp4netns, newuidmap and newgidmap run from it). */
static void test_locate_in__descriptor_runs_the_checked_file(void **state)
{
	(void)state;
	struct tmpdir a;
	struct lz_path tool = LZ_PATH_INIT;
	char path[PATH_MAX + 16], other[PATH_MAX + 16];
	clean_tmpdir_make(&a);
	snprintf(path, sizeof(path), "%s/runsc", a.path);
	snprintf(other, sizeof(other), "%s/other", a.path);
	char *truth = realpath("/bin/true", NULL), *lie = realpath("/bin/false", NULL);
	assert_non_null(truth);
	assert_non_null(lie);
	/* Copies (a hard link would need the same file system). */
	const char *const src[] = { truth, lie };
	const char *const dst[] = { path, other };
	for (int i = 0; i < 2; i++) {
		size_t len = 0;
		char *bytes = lz_test_read_file(src[i], &len);
		assert_non_null(bytes);
		int fd = open(dst[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, bytes, len), (ssize_t)len);
		close(fd);
		assert_int_equal(chmod(dst[i], 0755), 0);
		free(bytes);
	}
	free(truth);
	free(lie);
	const char *dirs[] = { a.path, NULL };
	assert_int_equal(locate_in(dirs, "runsc", NULL, &tool), 0);
	assert_int_equal(rename(other, path), 0); /* false, now named runsc */
	char *argv[] = { (char *)"runsc", NULL };
	struct lz_spawn by_fd = { .exe_fd = tool.fd, .argv = argv, .stdin_fd = -1, .stdout_fd = -1,
				  .stderr_fd = -1 };
	assert_int_equal(lz_spawn_run(&by_fd, "by descriptor", 5000, NULL), 0);
	struct lz_spawn by_name = { .exe_fd = -1, .path = path, .argv = argv, .stdin_fd = -1, .stdout_fd = -1,
				    .stderr_fd = -1 };
	assert_int_equal(lz_spawn_run(&by_name, "by name", 5000, NULL), -EIO);
	lz_path_release(&tool);
	tmpdir_remove(&a, (const char *const[]){ "runsc", NULL });
}

/* ---- running tools ----------------------------------------------------- */

static void test_run_capture__stdout_of_program(void **state)
{
	(void)state;
	char buf[64];
	size_t len = 0;
	int exe = open_path("/bin/echo");
	char *argv[] = { (char *)"echo", (char *)"hello", (char *)"world", NULL };
	int before = count_open_fds();
	assert_int_equal(run_capture(exe, "echo", argv, 5000, NULL, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 12);
	assert_memory_equal(buf, "hello world\n", 12);
	assert_int_equal(count_open_fds(), before);
	assert_no_children();
	close(exe);
}

static void test_run_capture__empty_environment(void **state)
{
	(void)state;
	char buf[64];
	size_t len = 99;
	int exe = open_path("/usr/bin/env");
	char *argv[] = { (char *)"env", NULL };
	setenv("LZ_HOSTPROBE_TEST_SECRET", "x", 1);
	assert_int_equal(run_capture(exe, "env", argv, 5000, NULL, buf, sizeof(buf), &len), 0);
	unsetenv("LZ_HOSTPROBE_TEST_SECRET");
	assert_int_equal(len, 0);
	close(exe);
}

static void test_run_capture__stdin_is_dev_null(void **state)
{
	(void)state;
	char buf[64];
	size_t len = 99;
	int exe = open_path("/bin/cat");
	char *argv[] = { (char *)"cat", NULL };
	assert_int_equal(run_capture(exe, "cat", argv, 5000, NULL, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 0);
	close(exe);
}

static void test_run_capture__timeout_kills_child(void **state)
{
	(void)state;
	char buf[64];
	size_t len = 99;
	struct lz_err err = { 0 };
	int exe = open_path("/bin/sleep");
	char *argv[] = { (char *)"sleep", (char *)"30", NULL };
	int64_t start = lz_now_ms();
	assert_int_equal(run_capture(exe, "sleep 30", argv, 200, &err, buf, sizeof(buf), &len), -ETIMEDOUT);
	int64_t took = lz_now_ms() - start;
	assert_true(took >= 200 && took < 3000);
	assert_string_equal(err.msg, "run 'sleep 30': no exit within 200 ms; killed");
	assert_int_equal(len, 99);
	assert_no_children();
	close(exe);
}

static void test_run_capture__output_bounded(void **state)
{
	(void)state;
	char buf[LZ_HOSTPROBE_OUTPUT_MAX];
	size_t len = 0;
	int exe = open_path("/usr/bin/yes");
	char *argv[] = { (char *)"yes", NULL };
	/* yes never ends by itself: the closed pipe (SIGPIPE) ends it. */
	assert_int_equal(run_capture(exe, "yes", argv, 5000, NULL, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, sizeof(buf));
	assert_memory_equal(buf, "y\ny\n", 4);
	assert_no_children();
	close(exe);
}

static void test_run_capture__nonzero_exit(void **state)
{
	(void)state;
	char buf[64];
	size_t len = 99;
	struct lz_err err = { 0 };
	int exe = open_path("/bin/false");
	char *argv[] = { (char *)"false", NULL };
	assert_int_equal(run_capture(exe, "false", argv, 5000, &err, buf, sizeof(buf), &len), -EIO);
	assert_string_equal(err.msg, "run 'false': exit status 1");
	assert_int_equal(len, 99);
	close(exe);
}

static void test_run_capture__exec_failure_reports_errno(void **state)
{
	(void)state;
	char buf[64];
	size_t len = 99;
	struct lz_err err = { 0 };
	int exe = open_path(lz_test_source("CMakeLists.txt")); /* no execute bit */
	char *argv[] = { (char *)"CMakeLists.txt", NULL };
	assert_int_equal(run_capture(exe, "cml", argv, 5000, &err, buf, sizeof(buf), &len), -EACCES);
	assert_string_equal(err.msg, "exec 'cml': Permission denied");
	assert_int_equal(len, 99);
	assert_no_children();
	close(exe);
}

static void test_run_capture__stdio_closed_in_parent(void **state)
{
	(void)state;
	/* With 0..2 closed, pipes and /dev/null land on 0..2; the child's
	 * stdio must still come out right. */
	char buf[64];
	size_t len = 0;
	int exe = open_path("/bin/echo");
	char *argv[] = { (char *)"echo", (char *)"ok", NULL };
	int saved[3];
	for (int i = 0; i < 3; i++) {
		saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 10);
		assert_true(saved[i] >= 0);
	}
	close(0);
	close(1);
	close(2);
	int r = run_capture(exe, "echo", argv, 5000, NULL, buf, sizeof(buf), &len);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(dup2(saved[i], i), i);
		close(saved[i]);
	}
	assert_int_equal(r, 0);
	assert_int_equal(len, 3);
	assert_memory_equal(buf, "ok\n", 3);
	close(exe);
}

static void test_first_line__sanitized(void **state)
{
	(void)state;
	char out[16];
	assert_int_equal(first_line("v1.2\nmore", 9, out, sizeof(out)), 4);
	assert_string_equal(out, "v1.2");
	assert_int_equal(first_line("v1\r\n", 4, out, sizeof(out)), 2);
	assert_string_equal(out, "v1");
	assert_int_equal(first_line("no newline", 10, out, sizeof(out)), 10);
	assert_string_equal(out, "no newline");
	assert_int_equal(first_line("\x1b[31mred\t\xc3\xa9", 11, out, sizeof(out)), 11);
	assert_string_equal(out, "?[31mred???");
	assert_int_equal(first_line("0123456789abcdefghij", 20, out, sizeof(out)), 15);
	assert_string_equal(out, "0123456789abcde");
	assert_int_equal(first_line("\nsecond", 7, out, sizeof(out)), 0);
	assert_string_equal(out, "");
}

static void test_lz_hostprobe_tool_version__runsc(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	static struct lz_hostprobe_tool t;
	int before = count_open_fds();
	int r = lz_hostprobe_tool_version("runsc", &err, &t);
	if (r == -ENOENT) {
		print_message("skipped: runsc not installed (%s)\n", err.msg);
		skip();
	}
	assert_int_equal(r, 0);
	assert_non_null(strstr(t.path, "/runsc"));
	assert_memory_equal(t.version, "runsc version ", 14);
	assert_null(strchr(t.version, '\n'));
	assert_int_equal(count_open_fds(), before);
	assert_no_children();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_hostprobe_kernel_parse_release__distribution_suffix),
		cmocka_unit_test(test_lz_hostprobe_kernel_parse_release__major_minor_only),
		cmocka_unit_test(test_lz_hostprobe_kernel_parse_release__malformed),
		cmocka_unit_test(test_lz_hostprobe_kernel_parse_release__overflow),
		cmocka_unit_test(test_lz_hostprobe_kernel__matches_uname),
		cmocka_unit_test(test_lz_hostprobe_identity__invoking_user),
		cmocka_unit_test(test_lz_hostprobe_identity__an_unreadable_database_is_an_error),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__single_range),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__multiple_ranges_in_file_order),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__comments_and_blank_lines),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__empty_file),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__matches_name_or_uid),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__malformed_line_number),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__malformed_variants),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__integer_overflow),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__nul_byte),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__too_many_ranges),
		cmocka_unit_test(test_lz_hostprobe_subid_parse__too_large),
		cmocka_unit_test(test_lz_hostprobe_subid_read_fd__regular_file),
		cmocka_unit_test(test_lz_hostprobe_subid_read_fd__larger_than_limit),
		cmocka_unit_test(test_lz_hostprobe_subid_read_fd__not_regular_file),
		cmocka_unit_test(test_lz_hostprobe_subid_read_fd__bad_fd),
		cmocka_unit_test(test_lz_hostprobe_subids__reads_etc_file),
		cmocka_unit_test(test_lz_hostprobe_subid_choose__lowest_of_at_least_65536),
		cmocka_unit_test(test_lz_hostprobe_subid_choose__adjacent_halves_are_none),
		cmocka_unit_test(test_lz_hostprobe_subid_choose__refuses_an_unsafe_range),
		cmocka_unit_test(test_lz_hostprobe_file__dev_null),
		cmocka_unit_test(test_lz_hostprobe_file__missing),
		cmocka_unit_test(test_lz_hostprobe_file__follows_no_symlink),
		cmocka_unit_test(test_lz_hostprobe_file__refuses_unclean_paths),
		cmocka_unit_test(test_device_rw_at__dev_null),
		cmocka_unit_test(test_lz_hostprobe_device_rw__refuses_other_devices),
		cmocka_unit_test(test_device_rw_at__missing),
		cmocka_unit_test(test_device_rw_at__not_a_character_device),
		cmocka_unit_test(test_device_rw_at__no_permission),
		cmocka_unit_test(test_lz_hostprobe_userns__reaps_its_child),
		cmocka_unit_test(test_lz_hostprobe_tool_locate__refuses_unknown_name),
		cmocka_unit_test(test_lz_hostprobe_tool_version__refuses_unknown_name),
		cmocka_unit_test(test_lz_hostprobe_tool_locate__runsc_in_trusted_dir),
		cmocka_unit_test(test_locate_in__first_directory_wins),
		cmocka_unit_test(test_locate_in__not_found_lists_directories),
		cmocka_unit_test(test_locate_in__refuses_writable_by_others),
		cmocka_unit_test(test_locate_in__refuses_a_directory_others_may_write),
		cmocka_unit_test(test_locate_in__resolves_a_link_once),
		cmocka_unit_test(test_locate_in__refuses_non_executable),
		cmocka_unit_test(test_locate_in__descriptor_runs_the_checked_file),
		cmocka_unit_test(test_run_capture__stdout_of_program),
		cmocka_unit_test(test_run_capture__empty_environment),
		cmocka_unit_test(test_run_capture__stdin_is_dev_null),
		cmocka_unit_test(test_run_capture__timeout_kills_child),
		cmocka_unit_test(test_run_capture__output_bounded),
		cmocka_unit_test(test_run_capture__nonzero_exit),
		cmocka_unit_test(test_run_capture__exec_failure_reports_errno),
		cmocka_unit_test(test_run_capture__stdio_closed_in_parent),
		cmocka_unit_test(test_first_line__sanitized),
		cmocka_unit_test(test_lz_hostprobe_tool_version__runsc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
