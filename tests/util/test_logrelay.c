/* core/util/logrelay: another process's log relayed line by line, made
 * harmless and bounded whatever the writer sends. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/logrelay.h"

struct fx {
	int in[2];  /* the writer's pipe */
	int out;    /* what we log to: a memory file */
	struct lz_logrelay r;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL || pipe2(f->in, O_NONBLOCK | O_CLOEXEC) < 0 || (f->out = memfd_create("log", 0)) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->in[0]);
	close(f->in[1]);
	close(f->out);
	free(f);
	return 0;
}

static void put(struct fx *f, const void *s, size_t n)
{
	assert_int_equal(write(f->in[1], s, n), (ssize_t)n);
}

/* What was logged so far (a new buffer, NUL-terminated). */
static char *logged(struct fx *f)
{
	off_t n = lseek(f->out, 0, SEEK_END);
	char *s = malloc((size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(pread(f->out, s, (size_t)n, 0), n);
	s[n] = '\0';
	return s;
}

/* Printable lines go as they are, one per line; a line with an escape
 * sequence, a carriage return or bytes that are not UTF-8 is escaped and
 * stays one line; a line written in two pieces is relayed once, whole. */
static void test_lz_logrelay__lines_plain_and_escaped(void **state)
{
	struct fx *f = *state;
	lz_logrelay_init(&f->r, f->out, 1 << 20, "w| ", "the writer");
	put(f, "lazaret-router: plain \\x1b already escaped\n", 43);
	put(f, "evil \x1b]0;title\x07 \r fake line\n", 28);
	put(f, "half ", 5);
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), 76);
	put(f, "and half\n\xff\xfe\n", 12);
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), 12);
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), 0); /* nothing waiting */
	lz_logrelay_finish(&f->r);
	char *s = logged(f);
	assert_string_equal(s, "w| lazaret-router: plain \\x1b already escaped\n"
			       "w| evil \\e]0;title\\x07 \\r fake line\n"
			       "w| half and half\n"
			       "w| \\xff\\xfe\n");
	free(s);
}

/* Past the budget lines are read and counted, not kept, what is written
 * charged (the prefix and escapes included: a line of control bytes
 * takes four times its length); finish says how many bytes, and relays
 * the line begun without its end. */
static void test_lz_logrelay__budget_then_counted(void **state)
{
	struct fx *f = *state;
	lz_logrelay_init(&f->r, f->out, 40, "w| ", "the writer");
	put(f, "0123456789\n", 11);                     /* 3 + 10 + 1 = 14: kept */
	put(f, "\x01\x02\x03\x04\x05\x06\n", 7);     /* 3 + 24 + 1 = 28: past 40, dropped */
	put(f, "abc\n", 4);                             /* 7: kept (21) */
	put(f, "0123456789", 10);                       /* a line begun */
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), 32);
	put(f, "xy\n", 3);                              /* ended: 3 + 12 + 1 = 16, kept (37) */
	put(f, "more\n", 5);                            /* 8: past 40, dropped */
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), 8);
	lz_logrelay_finish(&f->r);
	char *s = logged(f);
	assert_string_equal(s, "w| 0123456789\nw| abc\nw| 0123456789xy\n"
			       "36 more bytes of what the writer logged were not kept\n");
	free(s);
}

/* A line longer than the carry goes in pieces; one call reads at most max
 * bytes (a writer that never stops cannot hold the reader), the rest at
 * the next. */
static void test_lz_logrelay__long_lines_and_bounded_calls(void **state)
{
	struct fx *f = *state;
	lz_logrelay_init(&f->r, f->out, 1 << 20, "w| ", "the writer");
	static char big[LZ_LOGRELAY_LINE_MAX * 2 + 10];
	memset(big, 'x', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	put(f, big, sizeof(big));
	ssize_t first = lz_logrelay_pump(&f->r, f->in[0], 4096);
	assert_true(first >= 4096 && first < (ssize_t)sizeof(big));
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), (ssize_t)sizeof(big) - first);
	char *s = logged(f);
	size_t lines = 0, longest = 0, cur = 0;
	for (char *p = s; *p; p++) {
		if (*p == '\n') {
			lines++;
			longest = cur > longest ? cur : longest;
			cur = 0;
		} else {
			cur++;
		}
	}
	assert_int_equal(lines, 3);
	assert_int_equal(longest, LZ_LOGRELAY_LINE_MAX + 3);
	assert_int_equal(strlen(s), sizeof(big) + 2 + 3 * 3);
	free(s);
}

/* The writer's end: 0, and what was begun comes out at finish. */
static void test_lz_logrelay__end_of_the_writer(void **state)
{
	struct fx *f = *state;
	lz_logrelay_init(&f->r, f->out, 1 << 20, "w| ", "the writer");
	put(f, "last words", 10);
	close(f->in[1]);
	f->in[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), 10);
	assert_int_equal(lz_logrelay_pump(&f->r, f->in[0], 1 << 20), 0);
	lz_logrelay_finish(&f->r);
	char *s = logged(f);
	assert_string_equal(s, "w| last words\n");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_logrelay__lines_plain_and_escaped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_logrelay__budget_then_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_logrelay__long_lines_and_bounded_calls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_logrelay__end_of_the_writer, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
