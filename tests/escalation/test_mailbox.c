/* The Escalation Mailbox (core/escalation/mailbox.h; spec 3.8): what
 * lz_mailbox_take accepts (a regular file with one link, at most
 * LZ_ESC_RECORD_MAX bytes, a short name not starting with '.') and that
 * every other entry is refused and leaves the outbox all the same (a
 * symlink, a FIFO without blocking, a hard link, a directory moved aside,
 * an oversized file, an overlong name), so no entry is seen twice and no
 * call livelocks; posting by rename, withdrawal, the outbox watch, and
 * closing.
 *
 * Each test gets its own mkdtemp directory under /tmp, opened O_PATH, as
 * the generation directory; real files and real syscalls throughout. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "escalation/mailbox.h"
#include "escalation/record.h"

struct fx {
	char dir[64];
	int gen;              /* the temporary directory, O_PATH */
	struct lz_mailbox mb; /* created beneath gen */
	uint8_t *buf;         /* LZ_ESC_RECORD_MAX bytes for lz_mailbox_take */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/lz-test-mailbox-XXXXXX";
	if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, f->dir) == NULL)
		return -1;
	f->gen = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	f->buf = malloc(LZ_ESC_RECORD_MAX);
	if (f->gen < 0 || f->buf == NULL)
		return -1;
	struct lz_mailbox init = LZ_MAILBOX_INIT;
	f->mb = init;
	struct lz_err err = { 0, "" };
	if (lz_mailbox_create(f->gen, &f->mb, &err) < 0) {
		fprintf(stderr, "lz_mailbox_create: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_mailbox_close(&f->mb);
	close(f->gen);
	lz_test_rmtree(f->dir);
	free(f->buf);
	free(f);
	return 0;
}

/* Creates dfd/name holding data[0..len) (mode 0600). */
static void put(int dfd, const char *name, const void *data, size_t len)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		fail_msg("create %s: %s", name, strerror(errno));
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n <= 0)
			fail_msg("write %s: %s", name, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

static bool exists(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Reads dfd/name whole into buf[0..size); the byte count. */
static size_t read_at(int dfd, const char *name, void *buf, size_t size)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("open %s: %s", name, strerror(errno));
	size_t n = 0;
	ssize_t r;
	while (n < size && (r = read(fd, (uint8_t *)buf + n, size - n)) > 0)
		n += (size_t)r;
	close(fd);
	return n;
}

/* How many entries dfd holds, . and .. aside; *dots counts the names
 * starting with '.'. */
static int count_entries(int dfd, int *dots)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	DIR *d = fdopendir(fd);
	assert_non_null(d);
	int n = 0;
	*dots = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n++;
		if (e->d_name[0] == '.')
			(*dots)++;
	}
	closedir(d);
	return n;
}

static int take(struct fx *f, size_t *len, struct lz_err *err)
{
	return lz_mailbox_take(&f->mb, f->buf, len, err);
}

/* ---- lz_mailbox_create --------------------------------------------------- */

static void test_lz_mailbox_create__makes_four_private_directories(void **state)
{
	struct fx *f = *state;
	static const char *const names[] = { "outbox", "inbox", "credential", "key" };
	struct stat st;
	assert_int_equal(fstatat(f->gen, LZ_MAILBOX_DIR, &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(fstatat(f->mb.dir, names[i], &st, AT_SYMLINK_NOFOLLOW), 0);
		assert_true(S_ISDIR(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0700);
	}
	assert_true(f->mb.outbox >= 0 && f->mb.inbox >= 0 && f->mb.credential >= 0 && f->mb.key >= 0);
	assert_true(f->mb.watch >= 0);
	assert_int_equal(f->mb.refused, 0);

	/* Again over the existing tree: found, not refused. */
	struct lz_mailbox again = LZ_MAILBOX_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_mailbox_create(f->gen, &again, &err), 0);
	lz_mailbox_close(&again);
}

static void test_lz_mailbox_create__symlinked_escalation_refused_ret_untouched(void **state)
{
	struct fx *f = *state;
	char sub[96];
	snprintf(sub, sizeof(sub), "%s/other", f->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	int other = open(sub, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(other >= 0);
	assert_int_equal(mkdirat(other, "real", 0700), 0);
	assert_int_equal(symlinkat("real", other, LZ_MAILBOX_DIR), 0);

	struct lz_mailbox mb = LZ_MAILBOX_INIT;
	mb.refused = 77; /* a marker: untouched on failure */
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_mailbox_create(other, &mb, &err), -ELOOP);
	assert_int_equal(mb.refused, 77);
	assert_int_equal(mb.dir, -EBADF);
	assert_int_equal(mb.watch, -EBADF);
	close(other);
}

/* ---- lz_mailbox_take: what is accepted ----------------------------------- */

static void test_lz_mailbox_take__empty_outbox_returns_0(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	size_t len = 12345;
	assert_int_equal(take(f, &len, &err), 0);
	assert_int_equal(len, 12345); /* untouched */
}

static void test_lz_mailbox_take__regular_file_exact_bytes_and_removed(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	static const uint8_t rec[] = { 0x00, 0x01, 'r', 'e', 'q', 0xff, 0x00, '\n' };
	put(f->mb.outbox, "req-1", rec, sizeof(rec));
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 1);
	assert_int_equal(len, sizeof(rec));
	assert_memory_equal(f->buf, rec, sizeof(rec));
	assert_false(exists(f->mb.outbox, "req-1"));
	assert_int_equal(take(f, &len, &err), 0);
}

/* Out of descriptors for now: the entry stays, unread, and a later take
 * reads it (a request removed unread would never be answered). */
static void test_lz_mailbox_take__an_entry_unreadable_for_now_is_kept(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	static const uint8_t rec[] = { 'r', 'e', 'q', 0x00, 0x02 };
	put(f->mb.outbox, "req-2", rec, sizeof(rec));
	size_t len = 0;
	struct lz_test_fds fds;
	assert_int_equal(lz_test_fds_fill(&fds), 0);
	int r = take(f, &len, &err);
	assert_int_equal(lz_test_fds_release(&fds), 0);
	assert_int_equal(r, -EAGAIN);
	assert_non_null(strstr(err.msg, "req-2"));
	assert_true(exists(f->mb.outbox, "req-2"));
	assert_true(lz_mailbox_pending(&f->mb));
	assert_int_equal(take(f, &len, &err), 1);
	assert_int_equal(len, sizeof(rec));
	assert_memory_equal(f->buf, rec, sizeof(rec));
	assert_false(exists(f->mb.outbox, "req-2"));
}

static void test_lz_mailbox_take__empty_file_is_taken_with_length_0(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	put(f->mb.outbox, "empty", "", 0);
	size_t len = 99;
	assert_int_equal(take(f, &len, &err), 1);
	assert_int_equal(len, 0);
	assert_false(exists(f->mb.outbox, "empty"));
}

static void test_lz_mailbox_take__dot_entry_ignored_and_kept(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	put(f->mb.outbox, ".req-1.tmp", "partial", 7);
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 0);
	assert_true(exists(f->mb.outbox, ".req-1.tmp"));
	assert_int_equal(take(f, &len, &err), 0);
	assert_true(exists(f->mb.outbox, ".req-1.tmp"));
}

static void test_lz_mailbox_take__exactly_record_max_accepted(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	uint8_t *rec = malloc(LZ_ESC_RECORD_MAX);
	assert_non_null(rec);
	for (size_t i = 0; i < LZ_ESC_RECORD_MAX; i++)
		rec[i] = (uint8_t)(i * 31 + 7);
	put(f->mb.outbox, "big", rec, LZ_ESC_RECORD_MAX);
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 1);
	assert_int_equal(len, LZ_ESC_RECORD_MAX);
	assert_int_equal(len, 65536);
	assert_memory_equal(f->buf, rec, LZ_ESC_RECORD_MAX);
	assert_false(exists(f->mb.outbox, "big"));
	free(rec);
}

static void test_lz_mailbox_take__one_byte_over_record_max_is_e2big_and_removed(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	size_t n = LZ_ESC_RECORD_MAX + 1;
	uint8_t *rec = calloc(1, n);
	assert_non_null(rec);
	put(f->mb.outbox, "huge", rec, n);
	size_t len = 4242;
	assert_int_equal(take(f, &len, &err), -E2BIG);
	assert_int_equal(err.code, E2BIG);
	assert_non_null(strstr(err.msg, "huge"));
	assert_non_null(strstr(err.msg, "65537"));
	assert_int_equal(len, 4242); /* untouched on failure */
	assert_false(exists(f->mb.outbox, "huge"));
	assert_int_equal(take(f, &len, &err), 0);
	free(rec);
}

static void test_lz_mailbox_take__name_of_63_accepted_64_removed_unread(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	char name63[LZ_MAILBOX_NAME_MAX], name64[LZ_MAILBOX_NAME_MAX + 1];
	memset(name63, 'a', sizeof(name63) - 1);
	name63[sizeof(name63) - 1] = '\0';
	memset(name64, 'b', sizeof(name64) - 1);
	name64[sizeof(name64) - 1] = '\0';
	assert_int_equal(strlen(name63), 63);
	assert_int_equal(strlen(name64), 64);

	put(f->mb.outbox, name64, "too-long", 8);
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 0);
	assert_false(exists(f->mb.outbox, name64));

	/* Longer still, and a directory: moved aside, not looped on. */
	char name100[101];
	memset(name100, 'c', 100);
	name100[100] = '\0';
	assert_int_equal(mkdirat(f->mb.outbox, name100, 0700), 0);
	assert_int_equal(take(f, &len, &err), 0);
	assert_false(exists(f->mb.outbox, name100));
	assert_true(exists(f->mb.dir, "refused-0"));

	put(f->mb.outbox, name63, "ok", 2);
	assert_int_equal(take(f, &len, &err), 1);
	assert_int_equal(len, 2);
	assert_memory_equal(f->buf, "ok", 2);
	assert_false(exists(f->mb.outbox, name63));
}

static void test_lz_mailbox_take__several_entries_one_per_call(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	static const char *const names[] = { "a", "b", "c", "d" };
	enum { N = sizeof(names) / sizeof(names[0]) };
	for (size_t i = 0; i < N; i++) {
		char body[16];
		int n = snprintf(body, sizeof(body), "body-%s", names[i]);
		put(f->mb.outbox, names[i], body, (size_t)n);
	}
	put(f->mb.outbox, ".hidden", "x", 1);
	bool seen[N] = { false };
	for (size_t k = 0; k < N; k++) {
		size_t len = 0;
		assert_int_equal(take(f, &len, &err), 1);
		assert_int_equal(len, 6);
		assert_memory_equal(f->buf, "body-", 5);
		size_t i = (size_t)(f->buf[5] - 'a');
		assert_true(i < N);
		assert_false(seen[i]);
		seen[i] = true;
		assert_false(exists(f->mb.outbox, names[i]));
		int dots;
		assert_int_equal(count_entries(f->mb.outbox, &dots), (int)(N - k - 1) + 1);
		assert_int_equal(dots, 1);
	}
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 0);
	assert_true(exists(f->mb.outbox, ".hidden"));
}

/* The sandbox can fill the outbox with names being written: entries are
 * found by the watch's events, never by listing the outbox each take. */
static void test_lz_mailbox_take__found_by_events_not_by_listing(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 0);
	unsigned listed = f->mb.listings; /* the first take lists it once */
	assert_int_equal(listed, 1);
	for (int i = 0; i < 2000; i++) {
		char name[32];
		snprintf(name, sizeof(name), ".partial-%d", i);
		put(f->mb.outbox, name, "x", 1);
	}
	put(f->mb.outbox, "req", "body", 4);
	assert_int_equal(take(f, &len, &err), 1);
	assert_memory_equal(f->buf, "body", 4);
	assert_int_equal(take(f, &len, &err), 0);
	assert_int_equal(f->mb.listings, listed);
	int dots;
	assert_int_equal(count_entries(f->mb.outbox, &dots), 2000);
}

/* More ready entries than the ready queue holds: the ones past it wait
 * in the kernel's event queue, not for a listing, and each entry is
 * taken once. */
static void test_lz_mailbox_take__entries_past_the_queue_taken_once(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 0);
	enum { N = LZ_MAILBOX_READY_MAX + 40 };
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "req-%d", i);
		put(f->mb.outbox, name, name, strlen(name));
	}
	static bool seen[N];
	memset(seen, 0, sizeof(seen));
	for (int k = 0; k < N; k++) {
		assert_int_equal(take(f, &len, &err), 1);
		f->buf[len] = '\0';
		int i = -1;
		assert_int_equal(sscanf((const char *)f->buf, "req-%d", &i), 1);
		assert_true(i >= 0 && i < N);
		assert_false(seen[i]);
		seen[i] = true;
	}
	assert_int_equal(take(f, &len, &err), 0);
	assert_int_equal(f->mb.listings, 1); /* the first take's */
	int dots;
	assert_int_equal(count_entries(f->mb.outbox, &dots), 0);
}

/* A burst of names made and removed again, more than the ready queue
 * holds, next to many '.' names the sandbox left: no listing reads them
 * (each burst used to set one off: a helper's audit measured 105 ms of
 * the coordinator for 400,000 '.' names against a few ms of the
 * sandbox's), and the entry after the burst is taken. */
static void test_lz_mailbox_take__a_burst_past_the_ready_queue_lists_nothing(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 0);
	for (int i = 0; i < 3000; i++) {
		char name[32];
		snprintf(name, sizeof(name), ".partial-%d", i);
		put(f->mb.outbox, name, "x", 1);
	}
	for (int i = 0; i < 4 * LZ_MAILBOX_READY_MAX; i++) {
		char name[32];
		snprintf(name, sizeof(name), "gone-%d", i);
		put(f->mb.outbox, name, "x", 1);
		assert_int_equal(unlinkat(f->mb.outbox, name, 0), 0);
	}
	put(f->mb.outbox, "req", "body", 4);
	unsigned long scanned = f->mb.scanned;
	int r, calls = 0;
	while ((r = take(f, &len, &err)) == 0 && lz_mailbox_pending(&f->mb) && ++calls < 1000)
		;
	assert_int_equal(r, 1);
	assert_memory_equal(f->buf, "body", 4);
	assert_int_equal(f->mb.listings, 1);
	assert_int_equal(f->mb.scanned, scanned);
	assert_int_equal(take(f, &len, &err), 0);
	assert_false(lz_mailbox_pending(&f->mb));
}

/* Names made and removed again as fast as they are reported cost a take
 * a bounded number of lookups: it returns 0 with more pending, and the
 * entry behind them is taken by a later call. */
static void test_lz_mailbox_take__names_already_gone_are_skipped_a_bounded_number(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), 0);
	assert_false(lz_mailbox_pending(&f->mb));
	for (int i = 0; i < 200; i++) {
		char name[32];
		snprintf(name, sizeof(name), "gone-%d", i);
		put(f->mb.outbox, name, "x", 1);
		assert_int_equal(unlinkat(f->mb.outbox, name, 0), 0);
	}
	put(f->mb.outbox, "req", "body", 4);
	int bounded = 0, r;
	while ((r = take(f, &len, &err)) == 0 && lz_mailbox_pending(&f->mb) && bounded < 100)
		bounded++;
	assert_int_equal(r, 1);
	assert_memory_equal(f->buf, "body", 4);
	assert_true(bounded >= 1); /* 400 reported names: not all in one take */
	assert_int_equal(take(f, &len, &err), 0);
	assert_false(lz_mailbox_pending(&f->mb));
}

/* Names being written ('.') cost a take a bounded number of directory
 * entries however many the sandbox leaves: a listing (here the one a new
 * coordinator makes of an outbox filled before its watch) reads at most
 * LZ_MAILBOX_SCAN_PER_TAKE entries per take, which then returns 0 with
 * more pending (the caller takes again without waiting for an event that
 * may never come), and reads on at the next; the entry among them is
 * taken, once. */
static void test_lz_mailbox_take__a_listing_reads_a_bounded_number_of_entries_per_take(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	size_t len = 0;
	enum { DOTS = 5000 };
	int outbox = fcntl(f->mb.outbox, F_DUPFD_CLOEXEC, 3);
	assert_true(outbox >= 0);
	lz_mailbox_close(&f->mb);
	for (int i = 0; i < DOTS; i++) {
		char name[32];
		snprintf(name, sizeof(name), ".partial-%d", i);
		put(outbox, name, "x", 1);
	}
	put(outbox, "req", "body", 4);
	close(outbox);
	struct lz_mailbox init = LZ_MAILBOX_INIT;
	f->mb = init;
	assert_int_equal(lz_mailbox_create(f->gen, &f->mb, &err), 0);

	int taken = 0, paused = 0, calls = 0;
	do {
		unsigned long before = f->mb.scanned;
		int r = take(f, &len, &err);
		if (f->mb.scanned - before > LZ_MAILBOX_SCAN_PER_TAKE)
			fail_msg("one take read %lu directory entries", f->mb.scanned - before);
		if (r == 1) {
			assert_int_equal(len, 4);
			assert_memory_equal(f->buf, "body", 4);
			taken++;
		} else {
			assert_int_equal(r, 0);
			if (taken == 0)
				assert_true(lz_mailbox_pending(&f->mb));
			paused += lz_mailbox_pending(&f->mb);
		}
	} while (lz_mailbox_pending(&f->mb) && ++calls < 100);
	assert_int_equal(taken, 1);
	/* 5,003 entries (. and .. too), one take's worth around "req": the
	 * rest needs three takes that stop at the bound at least */
	assert_true(paused >= (DOTS + 3 - LZ_MAILBOX_SCAN_PER_TAKE) / LZ_MAILBOX_SCAN_PER_TAKE);
	assert_int_equal(f->mb.scanned, DOTS + 3);
	assert_int_equal(f->mb.listings, 1);
	assert_int_equal(take(f, &len, &err), 0);
	int dots;
	assert_int_equal(count_entries(f->mb.outbox, &dots), DOTS);
	assert_int_equal(dots, DOTS);
}

/* ---- lz_mailbox_take: what is refused ------------------------------------ */

static void test_lz_mailbox_take__symlink_is_eloop_removed_target_untouched(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	put(f->gen, "target", "secret", 6);
	assert_int_equal(symlinkat("../../target", f->mb.outbox, "link"), 0);
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), -ELOOP);
	assert_int_equal(err.code, ELOOP);
	assert_non_null(strstr(err.msg, "link"));
	assert_non_null(strstr(err.msg, "symlink"));
	assert_false(exists(f->mb.outbox, "link"));
	char got[16];
	assert_int_equal(read_at(f->gen, "target", got, sizeof(got)), 6);
	assert_memory_equal(got, "secret", 6);
	assert_int_equal(take(f, &len, &err), 0);
}

static void test_lz_mailbox_take__fifo_refused_without_blocking_and_removed(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(mkfifoat(f->mb.outbox, "fifo", 0600), 0);
	/* A blocking open of a FIFO with no writer would never return: the
	 * alarm's default action ends the suite rather than hanging it. */
	alarm(10);
	size_t len = 0;
	int r = take(f, &len, &err);
	alarm(0);
	assert_int_equal(r, -EPERM);
	assert_non_null(strstr(err.msg, "fifo"));
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_false(exists(f->mb.outbox, "fifo"));
	assert_int_equal(take(f, &len, &err), 0);
}

/* An entry's name is the sandbox's: a refusal that names it reaches
 * hc.log escaped, one line that drives no terminal. */
static void test_lz_mailbox_take__refused_name_is_escaped(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	static const char name[] = "a\nescalation: forged\x1b]52;c;eA==\x07";
	assert_int_equal(mkfifoat(f->mb.outbox, name, 0600), 0);
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), -EPERM);
	assert_null(strchr(err.msg, '\n'));
	assert_null(strchr(err.msg, '\x1b'));
	assert_null(strchr(err.msg, '\x07'));
	assert_non_null(strstr(err.msg, "a\\nescalation: forged\\e]52;c;eA==\\x07"));
	assert_false(exists(f->mb.outbox, name));
}

static void test_lz_mailbox_take__hard_link_is_eperm_and_entry_removed(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	put(f->mb.outbox, "linked", "twice", 5);
	assert_int_equal(linkat(f->mb.outbox, "linked", f->gen, "elsewhere", 0), 0);
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), -EPERM);
	assert_non_null(strstr(err.msg, "linked"));
	assert_non_null(strstr(err.msg, "links"));
	assert_false(exists(f->mb.outbox, "linked"));
	/* The other name survives, and now has one link. */
	struct stat st;
	assert_int_equal(fstatat(f->gen, "elsewhere", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_nlink, 1);
	char got[8];
	assert_int_equal(read_at(f->gen, "elsewhere", got, sizeof(got)), 5);
	assert_memory_equal(got, "twice", 5);
	assert_int_equal(take(f, &len, &err), 0);
}

static void test_lz_mailbox_take__directory_moved_aside_no_livelock(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(mkdirat(f->mb.outbox, "dir", 0700), 0);
	int sub = openat(f->mb.outbox, "dir", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(sub >= 0);
	put(sub, "inside", "x", 1); /* not empty: neither unlink nor rmdir removes it */
	close(sub);
	size_t len = 0;
	assert_int_equal(take(f, &len, &err), -EPERM);
	assert_non_null(strstr(err.msg, "dir"));
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_false(exists(f->mb.outbox, "dir"));
	assert_true(exists(f->mb.dir, "refused-0"));
	assert_int_equal(f->mb.refused, 1);
	assert_int_equal(take(f, &len, &err), 0);

	/* A second one goes to the next name. */
	assert_int_equal(mkdirat(f->mb.outbox, "dir2", 0700), 0);
	assert_int_equal(take(f, &len, &err), -EPERM);
	assert_true(exists(f->mb.dir, "refused-1"));
	assert_false(exists(f->mb.outbox, "dir2"));
	assert_int_equal(take(f, &len, &err), 0);
}

/* A directory the sandbox made unwritable (0555, 0000): moving it to
 * another parent needs write permission on it, which the coordinator
 * gives back, through a descriptor, before it moves it aside; it is not
 * refused again at the next listing. (As root, permission is no
 * obstacle: the test means something as the test user, as CI runs it.) */
static void test_lz_mailbox_take__an_unwritable_directory_is_moved_aside_too(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	const mode_t modes[] = { 0555, 0000 };
	for (unsigned i = 0; i < 2; i++) {
		char name[8];
		snprintf(name, sizeof(name), "ro%u", i);
		assert_int_equal(mkdirat(f->mb.outbox, name, 0700), 0);
		int sub = openat(f->mb.outbox, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(sub >= 0);
		put(sub, "inside", "x", 1);
		close(sub);
		assert_int_equal(fchmodat(f->mb.outbox, name, modes[i], 0), 0);
		size_t len = 0;
		unsigned before = f->mb.refused;
		int r = take(f, &len, &err);
		if (r != -EPERM && r != -EACCES) /* not a regular file; 0000 cannot be opened to tell */
			fail_msg("take: %d (%s)", r, err.msg);
		assert_false(exists(f->mb.outbox, name));
		assert_int_equal(f->mb.refused, before + 1);
		assert_int_equal(take(f, &len, &err), 0);
	}
}

/* ---- lz_mailbox_post, lz_mailbox_withdraw -------------------------------- */

static void test_lz_mailbox_post__creates_0444_by_rename_and_replaces(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	static const uint8_t first[] = { 1, 2, 3, 0, 4 };
	static const uint8_t second[] = { 9, 8 };
	assert_int_equal(lz_mailbox_post(&f->mb, "result-1", first, sizeof(first), &err), 0);
	struct stat st;
	assert_int_equal(fstatat(f->mb.inbox, "result-1", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0444);
	uint8_t got[16];
	assert_int_equal(read_at(f->mb.inbox, "result-1", got, sizeof(got)), sizeof(first));
	assert_memory_equal(got, first, sizeof(first));
	int dots;
	assert_int_equal(count_entries(f->mb.inbox, &dots), 1);
	assert_int_equal(dots, 0);

	assert_int_equal(lz_mailbox_post(&f->mb, "result-1", second, sizeof(second), &err), 0);
	assert_int_equal(read_at(f->mb.inbox, "result-1", got, sizeof(got)), sizeof(second));
	assert_memory_equal(got, second, sizeof(second));
	assert_int_equal(fstatat(f->mb.inbox, "result-1", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mode & 07777, 0444);
	assert_int_equal(count_entries(f->mb.inbox, &dots), 1);
	assert_int_equal(dots, 0);

	/* A stale temporary of that name (an interrupted post) is replaced. */
	put(f->mb.inbox, ".result-2", "stale", 5);
	assert_int_equal(lz_mailbox_post(&f->mb, "result-2", second, sizeof(second), &err), 0);
	assert_int_equal(read_at(f->mb.inbox, "result-2", got, sizeof(got)), sizeof(second));
	assert_int_equal(count_entries(f->mb.inbox, &dots), 2);
	assert_int_equal(dots, 0);
}

static void test_lz_mailbox_post__name_too_long_is_enametoolong(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	char name[LZ_MAILBOX_NAME_MAX + 1];
	memset(name, 'n', LZ_MAILBOX_NAME_MAX);
	name[LZ_MAILBOX_NAME_MAX] = '\0';
	assert_int_equal(lz_mailbox_post(&f->mb, name, (const uint8_t *)"x", 1, &err), -ENAMETOOLONG);
	int dots;
	assert_int_equal(count_entries(f->mb.inbox, &dots), 0);
	/* One shorter fits ('.' plus 63). */
	name[LZ_MAILBOX_NAME_MAX - 1] = '\0';
	assert_int_equal(lz_mailbox_post(&f->mb, name, (const uint8_t *)"x", 1, &err), 0);
	assert_true(exists(f->mb.inbox, name));
}

static void test_lz_mailbox_withdraw__removes_and_tolerates_missing(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_mailbox_post(&f->mb, "decision-1", (const uint8_t *)"d", 1, &err), 0);
	assert_int_equal(lz_mailbox_post(&f->mb, "decision-2", (const uint8_t *)"e", 1, &err), 0);
	lz_mailbox_withdraw(&f->mb, "decision-1");
	assert_false(exists(f->mb.inbox, "decision-1"));
	assert_true(exists(f->mb.inbox, "decision-2"));
	lz_mailbox_withdraw(&f->mb, "decision-1");
	lz_mailbox_withdraw(&f->mb, "never-posted");
	assert_true(exists(f->mb.inbox, "decision-2"));

	struct lz_mailbox closed = LZ_MAILBOX_INIT;
	lz_mailbox_withdraw(&closed, "decision-2");
	assert_true(exists(f->mb.inbox, "decision-2"));
}

/* ---- The watch, closing -------------------------------------------------- */

static int poll_now(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0);
}

static void test_lz_mailbox_watch__readable_after_rename_into_outbox_drained(void **state)
{
	struct fx *f = *state;
	assert_int_equal(poll_now(f->mb.watch), 0);
	lz_mailbox_drain_watch(&f->mb); /* nothing to drain: returns at once */
	assert_int_equal(poll_now(f->mb.watch), 0);

	/* Written outside, renamed in: only IN_MOVED_TO can report it. */
	put(f->gen, "staged", "req", 3);
	assert_int_equal(poll_now(f->mb.watch), 0);
	assert_int_equal(renameat(f->gen, "staged", f->mb.outbox, "req-1"), 0);
	assert_int_equal(poll_now(f->mb.watch), 1);
	lz_mailbox_drain_watch(&f->mb);
	assert_int_equal(poll_now(f->mb.watch), 0);

	/* A file closed after writing in place (IN_CLOSE_WRITE). */
	put(f->mb.outbox, "req-2", "req", 3);
	assert_int_equal(poll_now(f->mb.watch), 1);
	lz_mailbox_drain_watch(&f->mb);
	assert_int_equal(poll_now(f->mb.watch), 0);

	/* Posting to the inbox is not watched. */
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_mailbox_post(&f->mb, "r", (const uint8_t *)"r", 1, &err), 0);
	assert_int_equal(poll_now(f->mb.watch), 0);
}

static void test_lz_mailbox_close__safe_on_init_and_twice(void **state)
{
	struct fx *f = *state;
	struct lz_mailbox mb = LZ_MAILBOX_INIT;
	lz_mailbox_close(&mb);
	lz_mailbox_close(&mb);
	assert_int_equal(mb.dir, -EBADF);
	assert_int_equal(mb.watch, -EBADF);

	int outbox = f->mb.outbox;
	lz_mailbox_close(&f->mb);
	assert_int_equal(f->mb.dir, -EBADF);
	assert_int_equal(f->mb.outbox, -EBADF);
	assert_int_equal(f->mb.inbox, -EBADF);
	assert_int_equal(f->mb.credential, -EBADF);
	assert_int_equal(f->mb.key, -EBADF);
	assert_int_equal(f->mb.watch, -EBADF);
	assert_int_equal(fcntl(outbox, F_GETFD), -1); /* really closed */
	assert_int_equal(errno, EBADF);
	lz_mailbox_close(&f->mb); /* and teardown closes it once more */
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lz_mailbox_create__makes_four_private_directories),
		T(test_lz_mailbox_create__symlinked_escalation_refused_ret_untouched),
		T(test_lz_mailbox_take__empty_outbox_returns_0),
		T(test_lz_mailbox_take__regular_file_exact_bytes_and_removed),
		T(test_lz_mailbox_take__an_entry_unreadable_for_now_is_kept),
		T(test_lz_mailbox_take__empty_file_is_taken_with_length_0),
		T(test_lz_mailbox_take__dot_entry_ignored_and_kept),
		T(test_lz_mailbox_take__exactly_record_max_accepted),
		T(test_lz_mailbox_take__one_byte_over_record_max_is_e2big_and_removed),
		T(test_lz_mailbox_take__name_of_63_accepted_64_removed_unread),
		T(test_lz_mailbox_take__several_entries_one_per_call),
		T(test_lz_mailbox_take__found_by_events_not_by_listing),
		T(test_lz_mailbox_take__entries_past_the_queue_taken_once),
		T(test_lz_mailbox_take__a_burst_past_the_ready_queue_lists_nothing),
		T(test_lz_mailbox_take__names_already_gone_are_skipped_a_bounded_number),
		T(test_lz_mailbox_take__a_listing_reads_a_bounded_number_of_entries_per_take),
		T(test_lz_mailbox_take__symlink_is_eloop_removed_target_untouched),
		T(test_lz_mailbox_take__fifo_refused_without_blocking_and_removed),
		T(test_lz_mailbox_take__refused_name_is_escaped),
		T(test_lz_mailbox_take__hard_link_is_eperm_and_entry_removed),
		T(test_lz_mailbox_take__directory_moved_aside_no_livelock),
		T(test_lz_mailbox_take__an_unwritable_directory_is_moved_aside_too),
		T(test_lz_mailbox_post__creates_0444_by_rename_and_replaces),
		T(test_lz_mailbox_post__name_too_long_is_enametoolong),
		T(test_lz_mailbox_withdraw__removes_and_tolerates_missing),
		T(test_lz_mailbox_watch__readable_after_rename_into_outbox_drained),
		T(test_lz_mailbox_close__safe_on_init_and_twice),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
