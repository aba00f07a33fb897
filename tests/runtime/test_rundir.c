/* The runtime Domain directory (core/runtime/rundir.h): the generation
 * tree's layout and exact modes whatever the umask, the socket address
 * named through the directory's descriptor, logs (append, salvage), the
 * session PID file, the Domain flock, and removal of stale trees.
 *
 * Each test gets its own mkdtemp directory D; the runtime Domain directory
 * is D/rt, opened as a Lazaret-owned root (0700). Passes as root and as an
 * ordinary user. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "fs/file.h"
#include "fs/pathauth.h"
#include "proc/spawn.h"
#include "runtime/rundir.h"

#define INIT_BYTES "\x7f" "ELF-not-really"
#define RESOLV "nameserver 10.137.54.3\n"

struct fx {
	char dir[64];
	char rt[128];
	struct lz_path domain;
	mode_t umask_saved;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/lz-test-rundir-XXXXXX";
	if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, f->dir) == NULL)
		return -1;
	snprintf(f->rt, sizeof(f->rt), "%s/rt", f->dir);
	f->domain = (struct lz_path)LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open_owned_root(f->rt, &f->domain, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	f->umask_saved = umask(022);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	umask(f->umask_saved);
	lz_path_release(&f->domain);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static void assert_mode(int dirfd, const char *name, mode_t type, mode_t mode)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("stat %s: %s", name, strerror(errno));
	if ((st.st_mode & S_IFMT) != type || (st.st_mode & 07777) != mode)
		fail_msg("%s: mode %06o, want %06o", name, (unsigned)st.st_mode, (unsigned)(type | mode));
	assert_int_equal(st.st_uid, geteuid());
}

static bool exists_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void create_gen(struct fx *f, uint64_t n, struct lz_gendir *g)
{
	struct lz_err err = { 0, "" };
	if (lz_gendir_create(&f->domain, n, INIT_BYTES, sizeof(INIT_BYTES) - 1, RESOLV, g, &err) != 0)
		fail_msg("gendir_create: %s", err.msg);
}

static size_t slurp(int dirfd, const char *name, char *buf, size_t size)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return (size_t)n;
}

/* ---- the generation tree ------------------------------------------------ */

static void test_lz_gendir_create__layout_and_exact_modes_whatever_the_umask(void **state)
{
	struct fx *f = *state;
	const mode_t masks[] = { 0, 077, 0277 };
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		umask(masks[i]);
		struct lz_gendir g = LZ_GENDIR_INIT;
		create_gen(f, 10 + i, &g);
		char name[32];
		snprintf(name, sizeof(name), "gen-%zu", 10 + i);
		assert_string_equal(g.name, name);
		assert_mode(f->domain.fd, name, S_IFDIR, 0700);
		const struct {
			const char *name;
			mode_t mode;
			int fd;
		} want[] = {
			{ "root", 0700, g.root },     { "root-upper", 0755, g.root_upper },
			{ "root-work", 0700, g.root_work }, { "anchor", 0700, g.anchor },
			{ "runsc", 0700, g.runsc },   { "bundle", 0700, g.bundle },
			{ "sessions", 0700, g.sessions }, { "empty", 0755, g.empty },
		};
		for (size_t j = 0; j < sizeof(want) / sizeof(want[0]); j++) {
			assert_mode(g.dir.fd, want[j].name, S_IFDIR, want[j].mode);
			/* Each descriptor is that directory, O_PATH. */
			struct stat a, b;
			assert_int_equal(fstat(want[j].fd, &a), 0);
			assert_int_equal(fstatat(g.dir.fd, want[j].name, &b, AT_SYMLINK_NOFOLLOW), 0);
			assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
			assert_true(fcntl(want[j].fd, F_GETFL) & O_PATH);
			assert_true(fcntl(want[j].fd, F_GETFD) & FD_CLOEXEC);
		}
		assert_mode(g.dir.fd, "init", S_IFREG, 0555);
		assert_mode(g.dir.fd, "resolv.conf", S_IFREG, 0444);
		char buf[64];
		assert_int_equal(slurp(g.dir.fd, "init", buf, sizeof(buf)), sizeof(INIT_BYTES) - 1);
		assert_memory_equal(buf, INIT_BYTES, sizeof(INIT_BYTES) - 1);
		slurp(g.dir.fd, "resolv.conf", buf, sizeof(buf));
		assert_string_equal(buf, RESOLV);
		/* The label: the generation's canonical path. */
		char label[256], want_label[256];
		assert_int_equal(lz_gendir_label(&g, "bundle", label, sizeof(label)), 0);
		snprintf(want_label, sizeof(want_label), "%s/%s/bundle", f->rt, name);
		assert_string_equal(label, want_label);
		assert_int_equal(lz_gendir_label(&g, "bundle", label, strlen(want_label)), -ENAMETOOLONG);
		assert_int_equal(lz_gendir_label(&g, "bundle", label, strlen(want_label) + 1), 0);
		lz_gendir_remove(&g);
		assert_false(exists_at(f->domain.fd, name));
		assert_int_equal(g.root, -EBADF);
		assert_int_equal(g.dir.fd, -EBADF);
		lz_gendir_remove(&g); /* idempotent */
	}
	struct lz_gendir empty = LZ_GENDIR_INIT;
	lz_gendir_remove(&empty); /* an empty gendir */
}

static void test_lz_gendir_create__existing_generation_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g = LZ_GENDIR_INIT, again = LZ_GENDIR_INIT;
	create_gen(f, 1, &g);
	assert_int_equal(lz_file_create(g.sessions, "marker", "m", 1, 0600, 0, &err), 0);
	assert_int_equal(lz_gendir_create(&f->domain, 1, "x", 1, RESOLV, &again, &err), -EEXIST);
	assert_int_equal(err.code, EEXIST);
	assert_int_equal(again.dir.fd, -EBADF); /* untouched */
	/* The refusal removed nothing of the live generation. */
	assert_true(exists_at(g.sessions, "marker"));
	/* A symlink planted at the generation's name is not followed. */
	assert_int_equal(symlinkat(f->dir, f->domain.fd, "gen-2"), 0);
	assert_int_equal(lz_gendir_create(&f->domain, 2, "x", 1, RESOLV, &again, &err), -EEXIST);
	char planted[PATH_MAX];
	snprintf(planted, sizeof(planted), "%s/root", f->dir);
	assert_false(exists_at(AT_FDCWD, planted));
	lz_gendir_remove(&g);
}

static void test_lz_gendir_create__unwritable_directory_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g = LZ_GENDIR_INIT;
	/* A read-only runtime directory. Root may write anywhere, so as root
	 * the attempt runs in a child user namespace with no mapping: there
	 * it has no capability over the directory, only its owner's bits. */
	assert_int_equal(chmod(f->rt, 0500), 0);
	if (geteuid() == 0) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(unshare(CLONE_NEWUSER) == 0 &&
					      lz_gendir_create(&f->domain, 3, "x", 1, RESOLV, &g, &err) == -EACCES
				      ? 0
				      : 1);
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	} else {
		assert_int_equal(lz_gendir_create(&f->domain, 3, "x", 1, RESOLV, &g, &err), -EACCES);
	}
	assert_int_equal(chmod(f->rt, 0700), 0);
	assert_false(exists_at(f->domain.fd, "gen-3"));
	assert_int_equal(g.dir.fd, -EBADF);
}

/* ---- logs ----------------------------------------------------------------- */

static void test_lz_gendir_open_log__appends_0600_and_refuses_symlinks(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g = LZ_GENDIR_INIT;
	create_gen(f, 1, &g);
	const mode_t masks[] = { 0, 077, 0277 };
	for (size_t i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "l%zu.log", i);
		umask(masks[i]);
		int fd = -1;
		assert_int_equal(lz_gendir_open_log(&g, name, &fd, &err), 0);
		assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
		assert_int_equal(write(fd, "one\n", 4), 4);
		close(fd);
		assert_mode(g.dir.fd, name, S_IFREG, 0600);
		/* Reopened: appended, not truncated. */
		assert_int_equal(lz_gendir_open_log(&g, name, &fd, &err), 0);
		assert_int_equal(write(fd, "two\n", 4), 4);
		close(fd);
		char buf[64];
		slurp(g.dir.fd, name, buf, sizeof(buf));
		assert_string_equal(buf, "one\ntwo\n");
	}
	umask(022);
	char target[PATH_MAX];
	snprintf(target, sizeof(target), "%s/victim", f->dir);
	assert_int_equal(symlinkat(target, g.dir.fd, "runsc.log"), 0);
	int fd = 4242;
	assert_int_equal(lz_gendir_open_log(&g, "runsc.log", &fd, &err), -ELOOP);
	assert_int_equal(lz_gendir_open_log(&g, "../escape.log", &fd, &err), -EXDEV);
	assert_int_equal(fd, 4242);
	assert_false(exists_at(AT_FDCWD, target));
	assert_false(exists_at(f->domain.fd, "escape.log"));
	lz_gendir_remove(&g);
}

static void test_lz_gendir_salvage_log__last_bytes_between_markers(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g = LZ_GENDIR_INIT;
	create_gen(f, 4, &g);
	/* Missing log: nothing. */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	lz_gendir_salvage_log(&g, 4, "runsc.log", p[1]);
	close(p[1]);
	static char buf[5 * LZ_RUNDIR_LOG_TAIL]; /* escaped and marked, it grows */
	assert_int_equal(read(p[0], buf, sizeof(buf)), 0);
	close(p[0]);
	/* A log longer than the tail: its last LZ_RUNDIR_LOG_TAIL bytes. */
	int fd = -1;
	assert_int_equal(lz_gendir_open_log(&g, "runsc.log", &fd, &err), 0);
	for (int i = 0; i < 3000; i++)
		dprintf(fd, "line %05d\n", i); /* 11 bytes each: 33000 */
	close(fd);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/salvage", f->dir);
	int outfd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(outfd >= 0);
	lz_gendir_salvage_log(&g, 4, "runsc.log", outfd);
	ssize_t n = pread(outfd, buf, sizeof(buf) - 1, 0);
	close(outfd);
	assert_true(n > 0);
	buf[n] = '\0';
	char head[128];
	snprintf(head, sizeof(head), "--- runsc.log of generation 4 (last %d bytes) ---\n", LZ_RUNDIR_LOG_TAIL);
	assert_int_equal(strncmp(buf, head, strlen(head)), 0);
	const char *tail = "runsc.log| line 02999\n--- end of runsc.log ---\n";
	assert_string_equal(buf + n - strlen(tail), tail);
	/* 33000 - 16384 = 16616 = 11 * 1510 + 6: starts mid-line; each line
	 * is marked as the log's. */
	assert_memory_equal(buf + strlen(head), "runsc.log| 1510\nrunsc.log| line 01511\n", 38);
	assert_int_equal((size_t)n, strlen(head) + LZ_RUNDIR_LOG_TAIL + 1490 * strlen("runsc.log| ") +
					    strlen("--- end of runsc.log ---\n"));
	/* What the sandbox wrote there drives no terminal and forges no line
	 * of the coordinator's. */
	assert_int_equal(lz_gendir_open_log(&g, "runsc.log", &fd, &err), 0);
	dprintf(fd, "evil \x1b]52;c;eA==\x07\r\x9b" "2J\n--- end of runsc.log ---\nlazaret: forged\n");
	close(fd);
	outfd = open(path, O_RDWR | O_TRUNC | O_CLOEXEC);
	assert_true(outfd >= 0);
	lz_gendir_salvage_log(&g, 4, "runsc.log", outfd);
	n = pread(outfd, buf, sizeof(buf) - 1, 0);
	close(outfd);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_null(memchr(buf, 0x1b, (size_t)n));
	assert_null(memchr(buf, 0x07, (size_t)n));
	assert_null(memchr(buf, '\r', (size_t)n));
	assert_null(memchr(buf, 0x9b, (size_t)n));
	assert_non_null(strstr(buf, "\nrunsc.log| evil \\e]52;c;eA==\\x07\\r\\x9b2J\n"));
	assert_non_null(strstr(buf, "\nrunsc.log| --- end of runsc.log ---\nrunsc.log| lazaret: forged\n"));
	assert_null(strstr(buf, "\nlazaret: forged"));
	/* An empty gendir: nothing, no crash. */
	struct lz_gendir none = LZ_GENDIR_INIT;
	lz_gendir_salvage_log(&none, 4, "runsc.log", STDERR_FILENO);
	lz_gendir_remove(&g);
}

/* ---- the session PID file ------------------------------------------------- */

static void put(int dirfd, const char *name, const char *text)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void test_lz_gendir_session_pid__reads_a_positive_pid(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g = LZ_GENDIR_INIT;
	create_gen(f, 5, &g);
	uint64_t pid = 0;
	put(g.sessions, "s1.pid", "1234\n");
	assert_int_equal(lz_gendir_session_pid(&g, "s1.pid", 1000, &pid, &err), 0);
	assert_int_equal(pid, 1234);
	put(g.sessions, "s2.pid", "2147483647");
	assert_int_equal(lz_gendir_session_pid(&g, "s2.pid", 0, &pid, &err), 0);
	assert_int_equal(pid, 2147483647);
	lz_gendir_remove(&g);
}

static void test_lz_gendir_session_pid__waits_for_the_file(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g = LZ_GENDIR_INIT;
	create_gen(f, 6, &g);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		usleep(200 * 1000);
		int fd = openat(g.sessions, "late.pid", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		_exit(fd >= 0 && write(fd, "77\n", 3) == 3 ? 0 : 1);
	}
	uint64_t pid = 0;
	int64_t t0 = lz_now_ms();
	assert_int_equal(lz_gendir_session_pid(&g, "late.pid", 10000, &pid, &err), 0);
	assert_int_equal(pid, 77);
	assert_true(lz_now_ms() - t0 >= 150);
	int st;
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	lz_gendir_remove(&g);
}

static void test_lz_gendir_session_pid__bad_or_missing_times_out(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g = LZ_GENDIR_INIT;
	create_gen(f, 7, &g);
	char target[PATH_MAX];
	snprintf(target, sizeof(target), "%s/real.pid", f->dir);
	int fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "99\n", 3), 3);
	close(fd);
	assert_int_equal(symlinkat(target, g.sessions, "link.pid"), 0);
	put(g.sessions, "zero.pid", "0\n");
	put(g.sessions, "neg.pid", "-1\n");
	put(g.sessions, "text.pid", "pid\n");
	put(g.sessions, "empty.pid", "");
	put(g.sessions, "huge.pid", "99999999999\n");
	const char *names[] = { "missing.pid", "link.pid", "zero.pid", "neg.pid", "text.pid", "empty.pid",
				"huge.pid" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		uint64_t pid = 4242;
		int64_t t0 = lz_now_ms();
		int r = lz_gendir_session_pid(&g, names[i], 50, &pid, &err);
		if (r != -ETIMEDOUT)
			fail_msg("%s: %d, pid %llu", names[i], r, (unsigned long long)pid);
		assert_int_equal(pid, 4242); /* untouched */
		assert_true(lz_now_ms() - t0 >= 40);
		assert_non_null(strstr(err.msg, "did not start"));
	}
	lz_gendir_remove(&g);
}

/* ---- the socket address --------------------------------------------------- */

static void test_lz_rundir_socket_addr__names_the_directory_descriptor(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un a;
	memset(&a, 0x55, sizeof(a));
	assert_int_equal(lz_rundir_socket_addr(&f->domain, &a), 0);
	assert_int_equal(a.sun_family, AF_UNIX);
	char want[64];
	snprintf(want, sizeof(want), "/proc/self/fd/%d/" LZ_RUNDIR_SOCKET, f->domain.fd);
	assert_string_equal(a.sun_path, want);
	/* Binding there creates hc.sock in the runtime Domain directory. */
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_mode(f->domain.fd, LZ_RUNDIR_SOCKET, S_IFSOCK, 0777 & ~022);
	close(s);
}

/* ---- the Domain flock ----------------------------------------------------- */

static void test_lz_rundir_lock__one_holder(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	const mode_t masks[] = { 0, 077, 0277 };
	for (size_t i = 0; i < 3; i++) {
		umask(masks[i]);
		int a = -1, b = 4242;
		assert_int_equal(lz_rundir_lock(&f->domain, &a, &err), 0);
		assert_true(fcntl(a, F_GETFD) & FD_CLOEXEC);
		assert_mode(f->domain.fd, LZ_RUNDIR_LOCK, S_IFREG, 0600);
		/* A second coordinator, in this process or another. */
		assert_int_equal(lz_rundir_lock(&f->domain, &b, &err), -EBUSY);
		assert_int_equal(err.code, EBUSY);
		assert_non_null(strstr(err.msg, "another Host Coordinator"));
		assert_int_equal(b, 4242);
		pid_t child = fork();
		assert_true(child >= 0);
		if (child == 0) {
			int c = -1;
			_exit(lz_rundir_lock(&f->domain, &c, NULL) == -EBUSY ? 0 : 1);
		}
		int st;
		assert_int_equal(waitpid(child, &st, 0), child);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		/* Released with its descriptor. */
		close(a);
		assert_int_equal(lz_rundir_lock(&f->domain, &b, &err), 0);
		close(b);
		assert_int_equal(unlinkat(f->domain.fd, LZ_RUNDIR_LOCK, 0), 0);
	}
}

/* A moment's hold (`state list` looking whether the Domain is in use) is
 * waited out; one held on is still refused. */
static void test_lz_rundir_lock__a_brief_hold_is_waited_out(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	int a = -1;
	assert_int_equal(lz_rundir_lock(&f->domain, &a, &err), 0);
	close(a);
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		int fd = openat(f->domain.fd, LZ_RUNDIR_LOCK, O_RDWR | O_CLOEXEC);
		if (fd < 0 || flock(fd, LOCK_EX) < 0 || write(go[1], "x", 1) != 1)
			_exit(1);
		usleep(60 * 1000);
		_exit(0); /* the hold ends with the process */
	}
	char c;
	assert_int_equal(read(go[0], &c, 1), 1);
	assert_int_equal(lz_rundir_lock(&f->domain, &a, &err), 0);
	int st;
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	int64_t t0 = lz_now_ms();
	int b = 4242;
	assert_int_equal(lz_rundir_lock(&f->domain, &b, &err), -EBUSY);
	assert_true(lz_now_ms() - t0 >= LZ_RUNDIR_LOCK_WAIT_MS);
	close(a);
	close(go[0]);
	close(go[1]);
}

static void test_lz_rundir_lock__symlink_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	char target[PATH_MAX];
	snprintf(target, sizeof(target), "%s/victim", f->dir);
	assert_int_equal(symlinkat(target, f->domain.fd, LZ_RUNDIR_LOCK), 0);
	int fd = 4242;
	assert_int_equal(lz_rundir_lock(&f->domain, &fd, &err), -ELOOP);
	assert_non_null(strstr(err.msg, "Domain lock"));
	assert_int_equal(fd, 4242);
	assert_false(exists_at(AT_FDCWD, target));
}

/* ---- stale trees ------------------------------------------------------------ */

static void test_lz_rundir_generations__lists_then_removes_one_at_a_time(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_gendir g1 = LZ_GENDIR_INIT, g2 = LZ_GENDIR_INIT;
	uint64_t gens[8];
	create_gen(f, 1, &g1);
	create_gen(f, 12, &g2);
	/* What a dead coordinator left: open descriptors are dropped, the
	 * trees stay (the gendirs forget them). */
	assert_int_equal(lz_file_create(g2.anchor, "deep", "x", 1, 0400, 0, &err), 0);
	g1.parent = g2.parent = NULL;
	lz_gendir_remove(&g1);
	lz_gendir_remove(&g2);
	int lock = -1;
	assert_int_equal(lz_rundir_lock(&f->domain, &lock, &err), 0);
	put(f->domain.fd, LZ_RUNDIR_LOG, "kept\n");
	put(f->domain.fd, LZ_RUNDIR_SOCKET, "");
	assert_int_equal(mkdirat(f->domain.fd, "other", 0700), 0);
	/* Names that are not a generation's are not listed. */
	assert_int_equal(mkdirat(f->domain.fd, "gen-", 0700), 0);
	assert_int_equal(mkdirat(f->domain.fd, "gen-01", 0700), 0);
	assert_int_equal(mkdirat(f->domain.fd, "gen-3x", 0700), 0);
	assert_int_equal(lz_rundir_generations(&f->domain, gens, 8, &err), 2);
	assert_true((gens[0] == 1 && gens[1] == 12) || (gens[0] == 12 && gens[1] == 1));
	assert_int_equal(lz_rundir_generations(&f->domain, gens, 1, &err), 1); /* bounded */
	/* Out of descriptors: an error, never "no trees left". */
	struct lz_test_fds full;
	assert_int_equal(lz_test_fds_fill(&full), 0);
	int listed = lz_rundir_generations(&f->domain, gens, 8, &err);
	assert_int_equal(lz_test_fds_release(&full), 0);
	assert_int_equal(listed, -EMFILE);
	assert_int_equal(lz_rundir_remove_generation(&f->domain, 12, &err), 0);
	assert_false(exists_at(f->domain.fd, "gen-12"));
	assert_true(exists_at(f->domain.fd, "gen-1"));
	assert_int_equal(lz_rundir_remove_generation(&f->domain, 1, &err), 0);
	assert_false(exists_at(f->domain.fd, "gen-1"));
	assert_int_equal(lz_rundir_generations(&f->domain, gens, 8, &err), 0);
	lz_rundir_remove_socket(&f->domain);
	assert_false(exists_at(f->domain.fd, LZ_RUNDIR_SOCKET));
	assert_true(exists_at(f->domain.fd, LZ_RUNDIR_LOCK));
	assert_true(exists_at(f->domain.fd, LZ_RUNDIR_LOG));
	assert_true(exists_at(f->domain.fd, "other"));
	close(lock);
	assert_int_equal(lz_rundir_remove_generation(&f->domain, 1, &err), 0); /* nothing left: fine */
}

static off_t size_at(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("stat %s: %s", name, strerror(errno));
	return st.st_size;
}

/* hc.log past its limit moves to hc.log.1 (replacing the one before) when
 * a coordinator takes the Domain, and what it writes after goes to a new
 * hc.log; small logs and other files stay. */
static void test_lz_rundir_rotate_log__keeps_one_old_log(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	int d = f->domain.fd;
	char chunk[4096];
	memset(chunk, 'x', sizeof(chunk));
	int log = openat(d, LZ_RUNDIR_LOG, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	assert_true(log >= 0);
	assert_int_equal(write(log, chunk, 100), 100);
	assert_int_equal(lz_rundir_rotate_log(&f->domain, log, 1000, &err), 0); /* small */
	assert_false(exists_at(d, LZ_RUNDIR_LOG_OLD));
	int old = openat(d, LZ_RUNDIR_LOG_OLD, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(old >= 0);
	assert_int_equal(write(old, "older\n", 6), 6);
	close(old);
	for (int i = 0; i < 2; i++)
		assert_int_equal(write(log, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	off_t big = size_at(d, LZ_RUNDIR_LOG);
	assert_int_equal(lz_rundir_rotate_log(&f->domain, log, 1000, &err), 1);
	assert_int_equal(size_at(d, LZ_RUNDIR_LOG_OLD), big); /* the older one replaced */
	assert_int_equal(size_at(d, LZ_RUNDIR_LOG), 0);
	assert_mode(d, LZ_RUNDIR_LOG, S_IFREG, 0600);
	assert_false(exists_at(d, LZ_RUNDIR_LOG ".new")); /* made under it, then moved */
	assert_true(fcntl(log, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(log, "after\n", 6), 6);
	char buf[64];
	slurp(d, LZ_RUNDIR_LOG, buf, sizeof(buf));
	assert_string_equal(buf, "after\n");
	assert_int_equal(size_at(d, LZ_RUNDIR_LOG_OLD), big);
	/* A descriptor that is not the Domain's hc.log is left alone. */
	char other[PATH_MAX];
	snprintf(other, sizeof(other), "%s/other.log", f->dir);
	int o = open(other, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(o >= 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(write(o, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	assert_int_equal(lz_rundir_rotate_log(&f->domain, o, 1000, &err), 0);
	assert_int_equal(size_at(d, LZ_RUNDIR_LOG_OLD), big);
	close(o);
	close(log);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_gendir_create__layout_and_exact_modes_whatever_the_umask),
		T(test_lz_gendir_create__existing_generation_refused),
		T(test_lz_gendir_create__unwritable_directory_refused),
		T(test_lz_gendir_open_log__appends_0600_and_refuses_symlinks),
		T(test_lz_gendir_salvage_log__last_bytes_between_markers),
		T(test_lz_gendir_session_pid__reads_a_positive_pid),
		T(test_lz_gendir_session_pid__waits_for_the_file),
		T(test_lz_gendir_session_pid__bad_or_missing_times_out),
		T(test_lz_rundir_socket_addr__names_the_directory_descriptor),
		T(test_lz_rundir_lock__one_holder),
		T(test_lz_rundir_lock__a_brief_hold_is_waited_out),
		T(test_lz_rundir_lock__symlink_refused),
		T(test_lz_rundir_generations__lists_then_removes_one_at_a_time),
		T(test_lz_rundir_rotate_log__keeps_one_old_log),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
