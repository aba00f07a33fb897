/* The sandbox's memory watch (core/runtime/memwatch.h), with this test as
 * `runsc run` and a child of it, this program again under another argv[0],
 * as runsc-sandbox: it holds a memfd of the given name and grows it when
 * told. The watch finds it among the test's children by argv[0] and
 * parent, reads the file's allocated size, says when it passes the limit
 * and when the process is gone, and refuses a child that is not the
 * sandbox or has no memory file. Passes as root and as an ordinary user. */
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
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_slots.h"
#include "lz_test.h"

#include "runtime/memwatch.h"

#define MIB (1u << 20)

/* The stand-in: a memfd named argv[1] of argv[2] MiB; then, for each line
 * "N" on standard input, N MiB more ("-N": the last N MiB punched out, as
 * gVisor gives memory back); ends at EOF. Says "r" once ready and after
 * each change. */
static int stand_in(char **argv)
{
	int fd = memfd_create(argv[1], MFD_CLOEXEC);
	off_t size = (off_t)atoi(argv[2]) * MIB;
	if (fd < 0 || (size > 0 && fallocate(fd, 0, 0, size) < 0))
		return 1;
	char line[32];
	if (write(STDOUT_FILENO, "r", 1) != 1)
		return 1;
	for (;;) {
		ssize_t n = read(STDIN_FILENO, line, sizeof(line) - 1);
		if (n <= 0)
			return 0;
		line[n] = '\0';
		off_t more = (off_t)atoi(line) * MIB;
		if (more < 0 && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size + more, -more) < 0)
			return 1;
		if (more >= 0 && fallocate(fd, 0, size, more) < 0)
			return 1;
		size += more;
		if (write(STDOUT_FILENO, "r", 1) != 1)
			return 1;
	}
}

/* A sandbox's own limit, and no shared budget. */
static const struct lz_memwatch_limits *own(uint64_t bytes)
{
	static struct lz_memwatch_limits lim;
	lim = (struct lz_memwatch_limits){ .own = bytes, .slots_fd = -1 };
	return &lim;
}

struct child {
	pid_t pid;
	int to, from;
};

static void start(struct child *c, const char *argv0, const char *memfd_name, const char *mib)
{
	int in[2], out[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		char *const argv[] = { (char *)argv0, (char *)memfd_name, (char *)mib, NULL };
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->to = in[1];
	c->from = out[0];
	char ready;
	assert_int_equal(read(c->from, &ready, 1), 1);
}

static void grow(struct child *c, int mib)
{
	char line[16], ready;
	int n = snprintf(line, sizeof(line), "%d\n", mib);
	assert_int_equal(write(c->to, line, (size_t)n), n);
	assert_int_equal(read(c->from, &ready, 1), 1);
}

/* Closes its input: the stand-in exits. Not reaped (a zombie) unless reap. */
static void end(struct child *c, bool reap)
{
	close(c->to);
	char b;
	assert_int_equal(read(c->from, &b, 1), 0); /* its end of the pipe closed: it exited */
	close(c->from);
	if (reap) {
		int status;
		assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	}
}

static void test_lz_memwatch__reads_the_memory_file_and_its_limit(void **state)
{
	(void)state;
	struct child c;
	start(&c, "runsc-sandbox", "runsc-memory", "8");
	struct lz_memwatch w = LZ_MEMWATCH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_memwatch_open(-1, getpid(), own(16 * MIB), &w, &err) < 0)
		fail_msg("open: %s", err.msg);
	assert_int_equal(lz_memwatch_check(&w, &err), 0);
	assert_true(w.seen >= 8 * MIB && w.seen < 16 * MIB);
	grow(&c, 16);
	assert_int_equal(lz_memwatch_check(&w, &err), LZ_MEMWATCH_PAST_OWN);
	assert_true(w.seen >= 24 * MIB);
	/* Gone: first a zombie, then reaped. */
	end(&c, false);
	assert_int_equal(lz_memwatch_check(&w, &err), -ESRCH);
	int status;
	assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
	assert_int_equal(lz_memwatch_check(&w, &err), -ESRCH);
	lz_memwatch_close(&w);
	assert_true(w.pid_dir < 0);
}

/* Only runsc-sandbox's own memory file is watched: a child of another
 * name, or the sandbox without that file, is refused, never watched in
 * its place. */
static void test_lz_memwatch__refuses_what_is_not_the_sandbox(void **state)
{
	(void)state;
	struct lz_memwatch w = LZ_MEMWATCH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_memwatch_open(-1, getpid(), own(MIB), &w, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no runsc-sandbox process under runsc run"));

	struct child c;
	start(&c, "runsc-gofer", "runsc-memory", "1");
	assert_int_equal(lz_memwatch_open(-1, getpid(), own(MIB), &w, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no runsc-sandbox process"));
	end(&c, true);

	start(&c, "runsc-sandbox", "runsc-other", "1");
	assert_int_equal(lz_memwatch_open(-1, getpid(), own(MIB), &w, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "has no memory file"));
	end(&c, true);
	assert_true(w.pid_dir < 0);
}

/* Another process's child is not this runsc's sandbox. */
static void test_lz_memwatch__takes_only_children_of_runsc(void **state)
{
	(void)state;
	struct child c;
	start(&c, "runsc-sandbox", "runsc-memory", "1");
	struct lz_memwatch w = LZ_MEMWATCH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_memwatch_open(-1, getppid(), own(MIB), &w, &err), -ENOENT);
	end(&c, true);
}

static void test_lz_memwatch__host_budget_is_half_the_memory(void **state)
{
	(void)state;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t half = (uint64_t)pages * (uint64_t)page / 2;
	uint64_t got = lz_memwatch_host_budget();
	assert_true(got > half - half / 100 && got < half + half / 100);
}

/* Another sandbox's watch, as the locks it holds: `chunks` of the n chunks
 * of the slots file and a presence slot, and a want slot (a sandbox short
 * below its share) or the yield slot (one giving way). */
enum { OTHER_WANTS = 1, OTHER_YIELDS = 2 };

struct other {
	unsigned n, chunks;
	int flags;
};

/* Takes one of the n slots at base through its own set. */
static int take_at(int fd, unsigned base, unsigned n)
{
	struct lz_lockslots set;
	return lz_lockslots_init_at(&set, fd, base, n) < 0 || lz_lockslots_take(&set) < 0 ? -1 : 0;
}

static int other_hold(int fd, const void *arg)
{
	const struct other *o = arg;
	const struct slot_take chunks = { o->n, o->chunks };
	if (slot_holder_take(fd, &chunks) < 0 || take_at(fd, LZ_MEMWATCH_PRESENT_BASE, LZ_LOCKSLOTS_MAX) < 0 ||
	    ((o->flags & OTHER_WANTS) && take_at(fd, LZ_MEMWATCH_WANT_BASE, LZ_LOCKSLOTS_MAX) < 0) ||
	    ((o->flags & OTHER_YIELDS) && take_at(fd, LZ_MEMWATCH_YIELD_BASE, 1) < 0))
		return -1;
	return 0;
}

static struct slot_holder other_start(const char *path, unsigned n, unsigned chunks, int flags)
{
	const struct other o = { n, chunks, flags };
	return slot_holder_run(path, other_hold, &o);
}

/* How many of the n slots at base descriptions other than fd's hold. */
static int held_at(int fd, unsigned base, unsigned n)
{
	struct lz_lockslots set;
	assert_int_equal(lz_lockslots_init_at(&set, fd, base, n), 0);
	int held = lz_lockslots_others(&set);
	lz_lockslots_destroy(&set);
	return held;
}

#define WANTS(b) held_at((b).look, LZ_MEMWATCH_WANT_BASE, LZ_LOCKSLOTS_MAX)
#define YIELDS(b) held_at((b).look, LZ_MEMWATCH_YIELD_BASE, 1)

/* A slots file of N chunks of 32 MiB, and a watch on a stand-in sandbox. */
#define N 8

struct budget {
	char path[32];
	int fd, look; /* the watch's descriptor; another open, to look with */
	struct lz_memwatch_limits lim;
	struct child c;
	struct lz_memwatch w;
	struct lz_err err;
};

static void budget_file(struct budget *b)
{
	*b = (struct budget){ .w = LZ_MEMWATCH_INIT };
	snprintf(b->path, sizeof(b->path), "/tmp/lz-memwatch-XXXXXX");
	assert_true((b->fd = mkstemp(b->path)) >= 0);
	assert_true((b->look = open(b->path, O_RDWR | O_CLOEXEC)) >= 0);
	b->lim = (struct lz_memwatch_limits){ .own = 1024 * MIB, .host = N * 32ull * MIB, .slots_fd = b->fd };
}

/* The watch on a stand-in of `mib` MiB: what its first look says. */
static int budget_watch(struct budget *b, const char *mib)
{
	start(&b->c, "runsc-sandbox", "runsc-memory", mib);
	if (lz_memwatch_open(-1, getpid(), &b->lim, &b->w, &b->err) < 0)
		fail_msg("open: %s", b->err.msg);
	assert_int_equal(b->w.chunk, 32 * MIB);
	return lz_memwatch_check(&b->w, &b->err);
}

static void budget_start(struct budget *b, const char *mib)
{
	budget_file(b);
	assert_int_equal(budget_watch(b, mib), LZ_MEMWATCH_WITHIN);
}

static int look(struct budget *b)
{
	return lz_memwatch_check(&b->w, &b->err);
}

/* Closes the watch: nothing of the file stays locked. */
static void budget_end(struct budget *b)
{
	lz_memwatch_close(&b->w);
	assert_int_equal(slots_locked(b->look, LZ_MEMWATCH_YIELD_BASE + 1), 0);
	end(&b->c, true);
	close(b->look);
	close(b->fd);
	unlink(b->path);
}

/* The budget every sandbox shares: a watch holds chunks of it as its
 * sandbox's memory file fills them, rounded up, and a presence slot; it
 * gives chunks back as the file shrinks, and everything when it closes.
 * Short of chunks below its share (the budget divided by the sandboxes
 * running), it runs on and says so on the want byte. */
static void test_lz_memwatch__shares_the_host_budget(void **state)
{
	(void)state;
	struct budget b;
	budget_start(&b, "40");
	assert_int_equal(lz_memwatch_held(&b.w), 64 * MIB); /* 40 MiB, rounded up */
	assert_int_equal(slots_locked(b.look, N), 2);
	assert_int_equal(slots_locked(b.look, 2 * LZ_LOCKSLOTS_MAX), 3); /* and its presence */

	struct slot_holder other = other_start(b.path, N, 5, 0);
	grow(&b.c, 30); /* 70 MiB: the last free chunk */
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN);
	assert_int_equal(slots_locked(b.look, N), N);
	slot_holder_end(&other);
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN); /* 3 held: gave none back */
	assert_int_equal(lz_memwatch_held(&b.w), 96 * MIB);
	grow(&b.c, -40); /* 30 MiB: one chunk, the others given back */
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN);
	assert_int_equal(lz_memwatch_held(&b.w), 32 * MIB);
	other = other_start(b.path, N, 6, 0);
	grow(&b.c, 60); /* 90 MiB: needs 3 of its share of 4, 1 left */
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN);
	assert_int_equal(b.w.running, 2);
	assert_int_equal(lz_memwatch_held(&b.w), 64 * MIB);
	assert_int_equal(WANTS(b), 1);
	slot_holder_end(&other);
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN);
	assert_int_equal(slots_locked(b.look, N), 3);
	assert_int_equal(WANTS(b), 0);

	grow(&b.c, -70); /* 20 MiB left */
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN);
	assert_int_equal(lz_memwatch_held(&b.w), 32 * MIB);
	assert_int_equal(slots_locked(b.look, N), 1);
	/* Its own limit comes first: nothing more is taken past it. */
	grow(&b.c, 1100);
	assert_int_equal(look(&b), LZ_MEMWATCH_PAST_OWN);
	assert_int_equal(slots_locked(b.look, N), 1);
	budget_end(&b);
}

/* Short of chunks at its share or past it, the sandbox is the one past
 * the budget; at its first look (a launch), short at all. */
static void test_lz_memwatch__at_its_share_it_is_the_one_past(void **state)
{
	(void)state;
	struct budget b;
	budget_start(&b, "100"); /* 4 chunks */
	struct slot_holder other = other_start(b.path, N, 4, 0);
	grow(&b.c, 40); /* 140 MiB, a fifth: its share is 4 */
	assert_int_equal(look(&b), LZ_MEMWATCH_PAST_HOST);
	assert_int_equal(b.w.running, 2);
	assert_int_equal(WANTS(b), 0);
	slot_holder_end(&other);
	budget_end(&b);

	/* A launch that finds nothing left: past, though far below its share. */
	budget_file(&b);
	struct slot_holder all = other_start(b.path, N, N, 0);
	assert_int_equal(budget_watch(&b, "1"), LZ_MEMWATCH_PAST_HOST);
	assert_int_equal(WANTS(b), 0);
	slot_holder_end(&all);
	budget_end(&b);
}

/* Past its share while another is short below its own, the sandbox gives
 * way (and takes the yield byte): unless a chunk is free (another has just
 * given way), or another is giving way already. */
static void test_lz_memwatch__past_its_share_it_gives_way(void **state)
{
	(void)state;
	struct budget b;
	budget_start(&b, "180"); /* 6 chunks, its share 4 of 8 once two run */
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN); /* nobody short */
	struct slot_holder short_one = other_start(b.path, N, 1, OTHER_WANTS);
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN); /* one chunk free */
	assert_int_equal(YIELDS(b), 0);
	slot_holder_end(&short_one);
	short_one = other_start(b.path, N, 2, OTHER_WANTS);
	struct slot_holder yielding = other_start(b.path, N, 0, OTHER_YIELDS);
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN); /* one gives way already */
	assert_int_equal(b.w.running, 3);
	slot_holder_end(&yielding);
	assert_int_equal(look(&b), LZ_MEMWATCH_YIELD);
	assert_int_equal(b.w.running, 2);
	assert_int_equal(YIELDS(b), 1);
	slot_holder_end(&short_one);
	budget_end(&b);

	/* At its share exactly, it does not give way. */
	budget_start(&b, "120"); /* 4 chunks */
	short_one = other_start(b.path, N, 3, OTHER_WANTS);
	assert_int_equal(look(&b), LZ_MEMWATCH_WITHIN);
	assert_int_equal(YIELDS(b), 0);
	slot_holder_end(&short_one);
	budget_end(&b);
}

/* Chunks grow with the budget (at most LZ_LOCKSLOTS_MAX slots); a budget
 * of less than one, or a slots file that is not one, is refused. */
static void test_lz_memwatch__sizes_and_refuses_budgets(void **state)
{
	(void)state;
	char path[] = "/tmp/lz-memwatch-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	struct child c;
	start(&c, "runsc-sandbox", "runsc-memory", "1");
	struct lz_memwatch w = LZ_MEMWATCH_INIT;
	struct lz_err err = { 0, "" };
	struct lz_memwatch_limits lim = { .own = MIB, .host = 1ull << 40, .slots_fd = fd };
	assert_int_equal(lz_memwatch_open(-1, getpid(), &lim, &w, &err), 0);
	assert_int_equal(w.chunk, (1ull << 40) / LZ_LOCKSLOTS_MAX);
	lz_memwatch_close(&w);
	w = (struct lz_memwatch)LZ_MEMWATCH_INIT;
	lim.host = UINT64_MAX; /* the host's memory unknown */
	assert_int_equal(lz_memwatch_open(-1, getpid(), &lim, &w, &err), 0);
	assert_true(w.chunk > UINT64_MAX / LZ_LOCKSLOTS_MAX && w.host / w.chunk <= LZ_LOCKSLOTS_MAX);
	lz_memwatch_close(&w);

	w = (struct lz_memwatch)LZ_MEMWATCH_INIT;
	lim.host = 16 * MIB;
	assert_int_equal(lz_memwatch_open(-1, getpid(), &lim, &w, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "less than one chunk"));
	assert_true(w.pid_dir < 0);

	int rd = open(path, O_RDONLY | O_CLOEXEC);
	lim = (struct lz_memwatch_limits){ .own = MIB, .host = 64 * MIB, .slots_fd = rd };
	assert_int_equal(lz_memwatch_open(-1, getpid(), &lim, &w, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "memory.slots"));
	assert_true(w.pid_dir < 0 && !w.shared);
	end(&c, true);
	close(rd);
	close(fd);
	unlink(path);
}

int main(int argc, char **argv)
{
	if (argc == 3 && (strcmp(argv[0], "runsc-sandbox") == 0 || strcmp(argv[0], "runsc-gofer") == 0))
		return stand_in(argv);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_memwatch__reads_the_memory_file_and_its_limit),
		cmocka_unit_test(test_lz_memwatch__refuses_what_is_not_the_sandbox),
		cmocka_unit_test(test_lz_memwatch__takes_only_children_of_runsc),
		cmocka_unit_test(test_lz_memwatch__host_budget_is_half_the_memory),
		cmocka_unit_test(test_lz_memwatch__shares_the_host_budget),
		cmocka_unit_test(test_lz_memwatch__at_its_share_it_is_the_one_past),
		cmocka_unit_test(test_lz_memwatch__past_its_share_it_gives_way),
		cmocka_unit_test(test_lz_memwatch__sizes_and_refuses_budgets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
