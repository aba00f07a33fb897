/* Whole-file writes and directory creation (core/fs/file.h): every byte
 * written across short writes and EINTR, modes exact whatever the umask,
 * an existing name or a symlink refused, and lz_dir_ensure's descriptor
 * and refusals.
 *
 * Each test gets its own mkdtemp directory under /tmp, opened O_PATH. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "fs/file.h"
#include "util/sys.h"

struct fx {
	char dir[64];
	int dfd;
	mode_t umask_saved;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/lz-test-file-XXXXXX";
	if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, f->dir) == NULL)
		return -1;
	f->dfd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->dfd < 0)
		return -1;
	f->umask_saved = umask(022);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	umask(f->umask_saved);
	close(f->dfd);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static mode_t mode_at(const struct fx *f, const char *name)
{
	struct stat st;
	if (fstatat(f->dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("stat %s: %s", name, strerror(errno));
	return st.st_mode;
}

static size_t read_at(const struct fx *f, const char *name, char *buf, size_t size)
{
	int fd = openat(f->dfd, name, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	size_t n = 0;
	ssize_t r;
	while (n < size && (r = read(fd, buf + n, size - n)) > 0)
		n += (size_t)r;
	close(fd);
	return n;
}

/* ---- lz_write_all -------------------------------------------------------- */

static void test_lz_write_all__writes_everything_across_short_writes(void **state)
{
	(void)state;
	/* A non-blocking pipe with a reader: writes return short counts. */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	size_t n = 1 << 20;
	uint8_t *buf = malloc(n), *got = malloc(n);
	assert_non_null(buf);
	assert_non_null(got);
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		_exit(lz_write_all(p[1], buf, n) == 0 ? 0 : 1);
	}
	close(p[1]);
	size_t have = 0;
	ssize_t r;
	while ((r = read(p[0], got + have, n - have)) > 0)
		have += (size_t)r;
	close(p[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(have, n);
	assert_memory_equal(got, buf, n);
	free(buf);
	free(got);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void test_lz_write_all__retries_on_eintr(void **state)
{
	(void)state;
	/* A blocking write into a full pipe is interrupted, before it wrote
	 * anything, by a signal installed without SA_RESTART (EINTR); the
	 * reader drains afterwards. */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int cap = fcntl(p[1], F_GETPIPE_SZ);
	assert_true(cap > 0);
	size_t n = (size_t)cap * 3;
	char *buf = malloc(n);
	assert_non_null(buf);
	memset(buf, 'x', n);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		/* Fill the pipe first, so the write blocks before any byte goes. */
		if (lz_write_all(p[1], buf, (size_t)cap) < 0)
			_exit(2);
		struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
		sigaction(SIGALRM, &sa, NULL);
		alarm(1);
		_exit(lz_write_all(p[1], buf, n) == 0 ? 0 : 1);
	}
	close(p[1]);
	sleep(2); /* the child's write blocks on the full pipe; SIGALRM lands */
	size_t have = 0;
	ssize_t r;
	char chunk[65536];
	while ((r = read(p[0], chunk, sizeof(chunk))) > 0)
		have += (size_t)r;
	close(p[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(have, (size_t)cap + n);
	free(buf);
}

static void test_lz_write_all__reader_gone_is_epipe(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	assert_int_equal(lz_write_all(p[1], "x", 1), -EPIPE);
	signal(SIGPIPE, old);
	close(p[1]);
	assert_int_equal(lz_write_all(-1, "x", 1), -EBADF);
	assert_int_equal(lz_write_all(-1, "", 0), 0); /* nothing to write */
}

static void test_lz_write_all__full_device_is_enospc(void **state)
{
	(void)state;
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		skip();
	assert_int_equal(lz_write_all(fd, "x", 1), -ENOSPC);
	close(fd);
}

/* ---- lz_file_create --------------------------------------------------- */

static void test_lz_file_create__contents_and_exact_mode(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	const mode_t masks[] = { 0, 077, 0777 };
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		char name[16], got[16];
		snprintf(name, sizeof(name), "f%zu", i);
		umask(masks[i]);
		assert_int_equal(lz_file_create(f->dfd, name, "a\0bc", 4, 0644, LZ_RESOLVE_OWNED, &err), 0);
		assert_int_equal(mode_at(f, name) & 07777, 0644);
		assert_true(S_ISREG(mode_at(f, name)));
		assert_int_equal(read_at(f, name, got, sizeof(got)), 4);
		assert_memory_equal(got, "a\0bc", 4);
	}
	umask(022);
	/* 0555 and 0444: read-only files are written before the mode is set. */
	assert_int_equal(lz_file_create(f->dfd, "ro", "x", 1, 0444, LZ_RESOLVE_OWNED, &err), 0);
	assert_int_equal(mode_at(f, "ro") & 07777, 0444);
	assert_int_equal(lz_file_create(f->dfd, "empty", "", 0, 0600, LZ_RESOLVE_OWNED, &err), 0);
	assert_int_equal(mode_at(f, "empty") & 07777, 0600);
}

static void test_lz_file_create__existing_name_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	char got[16];
	assert_int_equal(lz_file_create(f->dfd, "a", "first", 5, 0600, LZ_RESOLVE_OWNED, &err), 0);
	assert_int_equal(lz_file_create(f->dfd, "a", "second", 6, 0644, LZ_RESOLVE_OWNED, &err), -EEXIST);
	assert_int_equal(err.code, EEXIST);
	assert_non_null(strstr(err.msg, "create a"));
	assert_int_equal(read_at(f, "a", got, sizeof(got)), 5);
	assert_memory_equal(got, "first", 5);
	assert_int_equal(mode_at(f, "a") & 07777, 0600);
}

static void test_lz_file_create__symlink_not_followed(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(mkdirat(f->dfd, "out", 0700), 0);
	assert_int_equal(symlinkat("out/target", f->dfd, "link"), 0);
	assert_int_equal(symlinkat("out", f->dfd, "dirlink"), 0);
	/* A dangling link at the name: O_EXCL refuses, the target is not made. */
	assert_int_equal(lz_file_create(f->dfd, "link", "x", 1, 0600, LZ_RESOLVE_OWNED, &err), -EEXIST);
	/* A linked parent: openat2 refuses to resolve through it. */
	assert_int_equal(lz_file_create(f->dfd, "dirlink/x", "x", 1, 0600, LZ_RESOLVE_OWNED, &err), -ELOOP);
	/* Escaping the directory. */
	assert_int_equal(lz_file_create(f->dfd, "../lz-escape", "x", 1, 0600, LZ_RESOLVE_OWNED, &err), -EXDEV);
	struct stat st;
	assert_int_equal(fstatat(f->dfd, "out/target", &st, 0), -1);
	assert_int_equal(fstatat(f->dfd, "out/x", &st, 0), -1);
}

/* ---- lz_dir_ensure ------------------------------------------------------ */

static void test_lz_dir_ensure__exact_mode_whatever_the_umask(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	const mode_t masks[] = { 0, 077, 0777 };
	const mode_t modes[] = { 0700, 0755, 0555, 01777 };
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++)
		for (size_t j = 0; j < sizeof(modes) / sizeof(modes[0]); j++) {
			char name[16];
			snprintf(name, sizeof(name), "d%zu-%zu", i, j);
			umask(masks[i]);
			int fd = -1;
			assert_int_equal(lz_dir_ensure(f->dfd, name, modes[j], &fd, &err), 0);
			assert_true(fd >= 0);
			mode_t m = mode_at(f, name);
			assert_true(S_ISDIR(m));
			if ((m & 07777) != modes[j])
				fail_msg("%s: mode %04o under umask %04o, want %04o", name, (unsigned)(m & 07777),
					 (unsigned)masks[i], (unsigned)modes[j]);
			/* The descriptor is the directory: O_PATH, close-on-exec. */
			struct stat a, b;
			assert_int_equal(fstat(fd, &a), 0);
			assert_int_equal(fstatat(f->dfd, name, &b, AT_SYMLINK_NOFOLLOW), 0);
			assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
			int fl = fcntl(fd, F_GETFL);
			assert_true(fl & O_PATH);
			assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
			close(fd);
		}
}

static void test_lz_dir_ensure__existing_directory_reused_and_mode_set(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(mkdirat(f->dfd, "d", 0700), 0);
	assert_int_equal(lz_file_create(f->dfd, "d/kept", "k", 1, 0600, LZ_RESOLVE_OWNED, &err), 0);
	int fd = -1;
	assert_int_equal(lz_dir_ensure(f->dfd, "d", 0750, &fd, &err), 0);
	assert_int_equal(mode_at(f, "d") & 07777, 0750);
	struct stat st;
	assert_int_equal(fstatat(fd, "kept", &st, 0), 0); /* the same directory */
	close(fd);
	/* Found again with the mode it has: nothing changes. */
	assert_int_equal(lz_dir_ensure(f->dfd, "d", 0750, &fd, &err), 0);
	assert_int_equal(mode_at(f, "d") & 07777, 0750);
	close(fd);
}

/* A State Anchor's upper root: the mode is the caller's only on the
 * directory made; a found one keeps its own (the sandbox's). */
static void test_lz_dir_ensure_made__mode_only_when_made(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	mode_t old = umask(077);
	int fd = -1;
	assert_int_equal(lz_dir_ensure_made(f->dfd, "d", 0755, &fd, &err), 0);
	umask(old);
	assert_int_equal(mode_at(f, "d") & 07777, 0755);
	close(fd);
	assert_int_equal(fchmodat(f->dfd, "d", 0750, 0), 0);
	assert_int_equal(lz_dir_ensure_made(f->dfd, "d", 0755, &fd, &err), 0);
	assert_int_equal(mode_at(f, "d") & 07777, 0750);
	close(fd);
}

static void test_lz_dir_ensure__symlink_and_file_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(mkdirat(f->dfd, "real", 0700), 0);
	assert_int_equal(symlinkat("real", f->dfd, "link"), 0);
	assert_int_equal(symlinkat("nowhere", f->dfd, "dangling"), 0);
	assert_int_equal(lz_file_create(f->dfd, "file", "x", 1, 0600, LZ_RESOLVE_OWNED, &err), 0);
	int fd = 4242;
	assert_int_equal(lz_dir_ensure(f->dfd, "link", 0755, &fd, &err), -ELOOP);
	assert_int_equal(err.code, ELOOP);
	assert_int_equal(lz_dir_ensure(f->dfd, "dangling", 0755, &fd, &err), -ELOOP);
	assert_int_equal(lz_dir_ensure(f->dfd, "file", 0755, &fd, &err), -ENOTDIR);
	/* One component only: mkdirat would follow the link in "link/sub". */
	assert_int_equal(lz_dir_ensure(f->dfd, "link/sub", 0755, &fd, &err), -EINVAL);
	assert_int_equal(fd, 4242); /* untouched */
	/* The link's target kept its mode; nothing was made beneath it. */
	assert_int_equal(mode_at(f, "real") & 07777, 0700);
	struct stat st;
	assert_int_equal(fstatat(f->dfd, "real/sub", &st, 0), -1);
	assert_int_equal(fstatat(f->dfd, "nowhere", &st, 0), -1);
}

static void test_lz_dir_ensure__bad_names_and_dirfd(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	int fd = 4242;
	const char *bad[] = { "", ".", "..", "no/such", "../lz-escape-dir", "/tmp/lz-abs", "d/" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(lz_dir_ensure(f->dfd, bad[i], 0700, &fd, &err), -EINVAL);
	struct stat st;
	assert_int_equal(stat("/tmp/lz-escape-dir", &st), -1);
	assert_int_equal(stat("/tmp/lz-abs", &st), -1);
	assert_int_equal(lz_dir_ensure(-EBADF, "x", 0700, &fd, &err), -EBADF);
	assert_non_null(strstr(err.msg, "create x"));
	/* A directory we may not write in (skipped as root, who may). */
	if (geteuid() != 0) {
		assert_int_equal(mkdirat(f->dfd, "ro", 0500), 0);
		int ro = openat(f->dfd, "ro", O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_int_equal(lz_dir_ensure(ro, "x", 0700, &fd, &err), -EACCES);
		close(ro);
	}
	assert_int_equal(fd, 4242);
}

/* Sealed memory files (the router's program, the network policy). */
static void test_lz_memfd_sealed__cannot_change(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	int fd = -1;
	assert_int_equal(lz_memfd_sealed("lz-test", "abc", 3, false, &fd, &err), 0);
	char buf[8] = "";
	assert_int_equal(pread(fd, buf, sizeof(buf), 0), 3);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(fcntl(fd, F_GETFD), FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GET_SEALS), F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | F_SEAL_EXEC);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 0111, 0); /* data, never code */
	errno = 0;
	assert_int_equal(pwrite(fd, "x", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, 1), -1);
	assert_int_equal(ftruncate(fd, 10), -1);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
	void *map = mmap(NULL, 3, PROT_READ, MAP_SHARED, fd, 0); /* read mappings still work */
	assert_ptr_not_equal(map, MAP_FAILED);
	munmap(map, 3);
	assert_ptr_equal(mmap(NULL, 3, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
	close(fd);
}

/* An executable one runs: /bin/true's bytes, exec'd from the memory file. */
static void test_lz_memfd_sealed__an_executable_one_runs(void **state)
{
	(void)state;
	size_t len;
	char *bytes = lz_test_read_file("/bin/true", &len);
	assert_non_null(bytes);
	struct lz_err err = { 0, "" };
	int fd = -1;
	assert_int_equal(lz_memfd_sealed("lz-true", bytes, len, true, &fd, &err), 0);
	free(bytes);
	assert_int_equal(fcntl(fd, F_GET_SEALS), F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { "true", NULL }, *envp[] = { NULL };
		fexecve(fd, argv, envp);
		_exit(99);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(fd);
}

/* A stream that holds more than it may (a pipe: fstat says nothing of its
 * size) is refused, and one that holds exactly the bound is read whole. */
static void test_lz_fd_read_bounded__exact_bound_read_more_refused(void **state)
{
	(void)state;
	struct lz_err err = { 0 };
	for (size_t extra = 0; extra <= 1; extra++) {
		int p[2];
		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		assert_int_equal(lz_write_all(p[1], "0123456789", 8 + extra), 0);
		close(p[1]);
		char *buf = NULL;
		size_t len = 0;
		int r = lz_fd_read_bounded(p[0], 8, "'the pipe'", &buf, &len, &err);
		close(p[0]);
		if (extra == 0) {
			assert_int_equal(r, 0);
			assert_int_equal(len, 8);
			assert_string_equal(buf, "01234567");
			free(buf);
		} else {
			assert_int_equal(r, -EFBIG);
			assert_null(buf);
			assert_string_equal(err.msg, "'the pipe' is larger than 8 bytes");
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_write_all__writes_everything_across_short_writes),
		cmocka_unit_test(test_lz_write_all__retries_on_eintr),
		cmocka_unit_test(test_lz_fd_read_bounded__exact_bound_read_more_refused),
		cmocka_unit_test(test_lz_write_all__reader_gone_is_epipe),
		cmocka_unit_test(test_lz_write_all__full_device_is_enospc),
		cmocka_unit_test(test_lz_memfd_sealed__cannot_change),
		cmocka_unit_test(test_lz_memfd_sealed__an_executable_one_runs),
		cmocka_unit_test_setup_teardown(test_lz_file_create__contents_and_exact_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_file_create__existing_name_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_file_create__symlink_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_dir_ensure__exact_mode_whatever_the_umask, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_dir_ensure__existing_directory_reused_and_mode_set, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_dir_ensure_made__mode_only_when_made, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_dir_ensure__symlink_and_file_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_dir_ensure__bad_names_and_dirfd, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
