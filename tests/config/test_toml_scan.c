/* Unit tests for core/config/toml_scan.c, the scanner of the TOML decoder:
 * the text check, positions and errors, whitespace and newlines, keys and
 * scalar values, each checked with where the cursor stops.
 *
 * Inputs are copied into exactly-sized heap buffers with no terminating NUL,
 * so AddressSanitizer catches any read past the end. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/toml_scan.h"

#define SENTINEL ((struct lz_toml_node *)(uintptr_t)0x5a5a)

/* A scanner over an exact copy of text; release with done(). */
struct fixture {
	struct lz_toml_scan sc;
	struct lz_toml_error err;
	char *copy;
};

static int open_exact(struct fixture *f, const char *text, size_t len)
{
	memset(f, 0, sizeof(*f));
	f->copy = malloc(len ? len : 1);
	assert_non_null(f->copy);
	if (len)
		memcpy(f->copy, text, len);
	return lz_toml_scan_init(&f->sc, f->copy, len, &f->err);
}

static void done(struct fixture *f)
{
	lz_toml_scan_done(&f->sc);
	free(f->copy);
}

#define OPEN(f, text) assert_int_equal(open_exact(f, text, sizeof(text) - 1), 0)

static void assert_pos(struct lz_toml_pos pos, uint32_t line, uint32_t column)
{
	assert_int_equal(pos.line, line);
	assert_int_equal(pos.column, column);
}

static void assert_err(const struct fixture *f, uint32_t line, uint32_t column, const char *msg)
{
	if (f->err.pos.line != line || f->err.pos.column != column || !strstr(f->err.msg, msg))
		print_message("got %u:%u '%s'; want %u:%u '%s'\n", f->err.pos.line, f->err.pos.column, f->err.msg,
			      line, column, msg);
	assert_pos(f->err.pos, line, column);
	assert_non_null(strstr(f->err.msg, msg));
}

/* ---- lz_toml_scan_init ---- */

static void test_lz_toml_scan_init__accepts_text_and_starts_at_line_one(void **state)
{
	(void)state;
	struct fixture f;
	OPEN(&f, "a = 1\r\n\tb = 'h\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80'\n");
	assert_int_equal(f.sc.off, 0);
	assert_int_equal(f.sc.line, 1);
	assert_int_equal(f.sc.line_start, 0);
	assert_ptr_equal(f.sc.s, f.copy);
	assert_pos(lz_toml_scan_pos(&f.sc, 0), 1, 1);
	done(&f);
}

static void test_lz_toml_scan_init__empty_and_null_empty_input(void **state)
{
	(void)state;
	struct lz_toml_scan sc;
	assert_int_equal(lz_toml_scan_init(&sc, NULL, 0, NULL), 0);
	assert_int_equal(lz_toml_scan_peek(&sc), -1);
	lz_toml_scan_done(&sc);
}

static void test_lz_toml_scan_init__refuses_bad_text_at_its_position(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		size_t len;
		uint32_t line, column;
		const char *msg;
	} cases[] = {
#define CASE(t, l, c, m) { t, sizeof(t) - 1, l, c, m }
		CASE("\xEF\xBB\xBF" "a = 1\n", 1, 1, "byte-order mark"),
		CASE("a = 1\nb\0", 2, 2, "NUL is not allowed"),
		CASE("a\n\nx = 1\r", 3, 6, "carriage return not followed by line feed"),
		CASE("ab\rc\n", 1, 3, "carriage return not followed by line feed"),
		CASE("a = \x01", 1, 5, "control characters"),
		CASE("\n\x7F", 2, 1, "control characters"),
		CASE("a\x1B", 1, 2, "control characters"),
		CASE("x = \"\xC0\x80\"", 1, 6, "invalid UTF-8"),	   /* overlong NUL */
		CASE("\xE0\x80\x80", 1, 1, "invalid UTF-8"),		   /* overlong 3-byte */
		CASE("\xF0\x80\x80\x80", 1, 1, "invalid UTF-8"),	   /* overlong 4-byte */
		CASE("ok\n\xED\xA0\x80", 2, 1, "invalid UTF-8"),	   /* surrogate */
		CASE("\xF4\x90\x80\x80", 1, 1, "invalid UTF-8"),	   /* above U+10FFFF */
		CASE("\xF5\x80\x80\x80", 1, 1, "invalid UTF-8"),	   /* bad lead byte */
		CASE("a\x80", 1, 2, "invalid UTF-8"),			   /* lone continuation */
		CASE("\xE2\x82", 1, 1, "invalid UTF-8"),		   /* truncated */
		CASE("\xE2\x28\xA1", 1, 1, "invalid UTF-8"),		   /* bad continuation */
#undef CASE
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fixture f;
		assert_int_equal(open_exact(&f, cases[i].text, cases[i].len), -EINVAL);
		assert_err(&f, cases[i].line, cases[i].column, cases[i].msg);
		assert_null(f.sc.scratch);
		done(&f);
	}
}

static void test_lz_toml_scan_init__refuses_missing_and_oversized_input(void **state)
{
	(void)state;
	struct lz_toml_scan sc;
	struct lz_toml_error err = { 0 };
	assert_int_equal(lz_toml_scan_init(&sc, NULL, 1, &err), -EINVAL);
	assert_pos(err.pos, 1, 1);
	assert_string_equal(err.msg, "no input");

	/* The size is checked before any byte is read. */
	char byte = 'a';
	memset(&err, 0, sizeof(err));
	assert_int_equal(lz_toml_scan_init(&sc, &byte, LZ_TOML_MAX_INPUT + 1, &err), -EINVAL);
	assert_pos(err.pos, 1, 1);
	assert_non_null(strstr(err.msg, "document larger than 16777216 bytes"));
}

static void test_lz_toml_scan_init__null_error_object(void **state)
{
	(void)state;
	struct lz_toml_scan sc;
	assert_int_equal(lz_toml_scan_init(&sc, "\0", 1, NULL), -EINVAL);
	assert_int_equal(lz_toml_scan_init(&sc, NULL, 1, NULL), -EINVAL);
}

/* ---- errors ---- */

static void test_lz_toml_scan_fail__records_position_and_message(void **state)
{
	(void)state;
	struct fixture f;
	OPEN(&f, "ab\ncdef\n");
	f.sc.off = 2;
	lz_toml_scan_eat_newline(&f.sc);
	assert_int_equal(lz_toml_scan_fail(&f.sc, 5, "bad %s %d", "thing", 7), -EINVAL);
	assert_err(&f, 2, 3, "bad thing 7");
	assert_int_equal(lz_toml_scan_fail_at(&f.sc, (struct lz_toml_pos){ 9, 4 }, "at %c", 'x'), -EINVAL);
	assert_err(&f, 9, 4, "at x");
	f.sc.off = 6;
	assert_int_equal(lz_toml_scan_oom(&f.sc), -ENOMEM);
	assert_err(&f, 2, 4, "out of memory");
	assert_string_equal(f.err.msg, "out of memory");

	/* Without an error object the codes are the same. */
	f.sc.err = NULL;
	assert_int_equal(lz_toml_scan_fail(&f.sc, 3, "x"), -EINVAL);
	assert_int_equal(lz_toml_scan_oom(&f.sc), -ENOMEM);
	done(&f);
}

static void test_lz_toml_scan_fail__truncates_long_messages(void **state)
{
	(void)state;
	struct fixture f;
	OPEN(&f, "a");
	char long_name[400];
	memset(long_name, 'k', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_int_equal(lz_toml_scan_fail(&f.sc, 0, "key '%s'", long_name), -EINVAL);
	assert_int_equal(strlen(f.err.msg), sizeof(f.err.msg) - 1);
	done(&f);
}

/* ---- whitespace, comments, newlines ---- */

static void test_lz_toml_scan_skip__whitespace_comment_and_newlines(void **state)
{
	(void)state;
	struct fixture f;
	OPEN(&f, " \t # note\r\n\n  x");
	lz_toml_scan_skip_ws(&f.sc);
	assert_int_equal(f.sc.off, 3);
	assert_int_equal(lz_toml_scan_peek(&f.sc), '#');
	lz_toml_scan_skip_comment(&f.sc);
	assert_int_equal(f.sc.off, 9);
	assert_true(lz_toml_is_newline(lz_toml_scan_peek(&f.sc)));
	lz_toml_scan_eat_newline(&f.sc); /* CRLF is one newline */
	assert_int_equal(f.sc.off, 11);
	assert_int_equal(f.sc.line, 2);
	assert_int_equal(f.sc.line_start, 11);
	lz_toml_scan_skip_comment(&f.sc); /* at a newline: stays */
	assert_int_equal(f.sc.off, 11);
	lz_toml_scan_eat_newline(&f.sc);
	assert_int_equal(f.sc.line, 3);
	lz_toml_scan_skip_ws(&f.sc);
	assert_int_equal(lz_toml_scan_peek(&f.sc), 'x');
	assert_pos(lz_toml_scan_pos(&f.sc, f.sc.off), 3, 3);
	f.sc.off++;
	assert_int_equal(lz_toml_scan_peek(&f.sc), -1);
	lz_toml_scan_skip_ws(&f.sc); /* at the end: stays */
	lz_toml_scan_skip_comment(&f.sc);
	assert_int_equal(f.sc.off, f.sc.len);
	done(&f);
}

static void test_lz_toml_is_newline__lf_and_cr_only(void **state)
{
	(void)state;
	assert_true(lz_toml_is_newline('\n'));
	assert_true(lz_toml_is_newline('\r'));
	assert_false(lz_toml_is_newline(' '));
	assert_false(lz_toml_is_newline('\t'));
	assert_false(lz_toml_is_newline(-1));
}

/* ---- keys ---- */

static void test_lz_toml_scan_key__bare_key_and_position(void **state)
{
	(void)state;
	struct fixture f;
	OPEN(&f, "x\n  ab-C_9.z = 1");
	f.sc.off = 1;
	lz_toml_scan_eat_newline(&f.sc);
	assert_int_equal(f.sc.line_start, 2);
	lz_toml_scan_skip_ws(&f.sc);
	struct lz_toml_key k;
	assert_int_equal(lz_toml_scan_key(&f.sc, &k), 0);
	assert_int_equal(k.off, 4);
	assert_int_equal(k.len, 6);
	assert_memory_equal(f.sc.s + k.off, "ab-C_9", 6);
	assert_pos(k.pos, 2, 3);
	assert_int_equal(lz_toml_scan_peek(&f.sc), '.'); /* dots are the parser's */
	f.sc.off++;
	assert_int_equal(lz_toml_scan_key(&f.sc, &k), 0);
	assert_int_equal(k.len, 1);
	assert_pos(k.pos, 2, 10);
	done(&f);
}

static void test_lz_toml_scan_key__refuses_quoted_and_missing_keys(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		const char *msg;
	} cases[] = {
		{ "\"a\" = 1", "quoted keys are not supported" },
		{ "'a' = 1", "quoted keys are not supported" },
		{ "= 1", "expected a key" },
		{ ".a", "expected a key" },
		{ "\xC3\xA9 = 1", "expected a key" },
		{ "", "expected a key" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fixture f;
		assert_int_equal(open_exact(&f, cases[i].text, strlen(cases[i].text)), 0);
		struct lz_toml_key k = { .off = 77, .len = 88 };
		assert_int_equal(lz_toml_scan_key(&f.sc, &k), -EINVAL);
		assert_err(&f, 1, 1, cases[i].msg);
		assert_int_equal(k.off, 77); /* untouched */
		assert_int_equal(k.len, 88);
		assert_int_equal(f.sc.off, 0);
		done(&f);
	}
}

/* ---- scalars ---- */

/* Scans the one scalar at the start of text; the caller frees the node. */
static struct lz_toml_node *scalar_at(struct fixture *f, const char *text, size_t len, size_t want_off, int at)
{
	_assert_int_equal(open_exact(f, text, len), 0, __FILE__, at);
	struct lz_toml_node *n = NULL;
	int r = lz_toml_scan_scalar(&f->sc, &n);
	if (r != 0)
		print_message("unexpected error %d at %u:%u: %s\n", r, f->err.pos.line, f->err.pos.column,
			      f->err.msg);
	_assert_int_equal(r, 0, __FILE__, at);
	_assert_true(n != NULL, "node", __FILE__, at);
	_assert_int_equal(f->sc.off, want_off, __FILE__, at);
	_assert_int_equal(n->flags, 0, __FILE__, at);
	return n;
}

#define SCALAR(f, text, off) scalar_at(f, text, sizeof(text) - 1, off, __LINE__)

static void test_lz_toml_scan_scalar__basic_string_decodes_escapes(void **state)
{
	(void)state;
	struct fixture f;
	struct lz_toml_node *n = SCALAR(&f, "\"a\\b\\t\\n\\f\\r\\\"\\\\\\u00E9\\U0001F600\\u20ac\" , x", 39);
	assert_int_equal(n->v.kind, LZ_TOML_STRING);
	assert_pos(n->v.pos, 1, 1);
	const char want[] = "a\b\t\n\f\r\"\\\xC3\xA9\xF0\x9F\x98\x80\xE2\x82\xAC";
	assert_int_equal(n->v.string.len, sizeof(want) - 1);
	assert_memory_equal(n->v.string.bytes, want, sizeof(want));
	lz_toml_free(&n->v);
	done(&f);
}

/* The scratch buffer is reused: a shorter second string gets only its own
 * bytes, and a long one grows the buffer. */
static void test_lz_toml_scan_scalar__strings_in_sequence_reuse_scratch(void **state)
{
	(void)state;
	char text[600];
	size_t n = 0;
	text[n++] = '"';
	memset(text + n, 'L', 500);
	n += 500;
	memcpy(text + n, "\",\"ab\",'c\\d'", 12);
	n += 12;

	struct fixture f;
	assert_int_equal(open_exact(&f, text, n), 0);
	struct lz_toml_node *a = NULL, *b = NULL, *c = NULL;
	assert_int_equal(lz_toml_scan_scalar(&f.sc, &a), 0);
	assert_int_equal(a->v.string.len, 500);
	assert_int_equal(strlen(a->v.string.bytes), 500);
	assert_true(f.sc.scratch_cap >= 504);
	assert_int_equal(lz_toml_scan_peek(&f.sc), ',');
	f.sc.off++;
	assert_int_equal(lz_toml_scan_scalar(&f.sc, &b), 0);
	assert_string_equal(b->v.string.bytes, "ab");
	assert_int_equal(b->v.string.len, 2);
	assert_pos(b->v.pos, 1, 504);
	f.sc.off++;
	assert_int_equal(lz_toml_scan_scalar(&f.sc, &c), 0);
	assert_string_equal(c->v.string.bytes, "c\\d"); /* literal: verbatim */
	assert_int_equal(f.sc.off, n);
	lz_toml_free(&a->v);
	lz_toml_free(&b->v);
	lz_toml_free(&c->v);
	lz_toml_scan_done(&f.sc);
	assert_null(f.sc.scratch);
	assert_int_equal(f.sc.scratch_cap, 0);
	done(&f); /* idempotent */
}

static void test_lz_toml_scan_scalar__empty_strings(void **state)
{
	(void)state;
	struct fixture f;
	struct lz_toml_node *n = SCALAR(&f, "\"\"''", 2);
	assert_int_equal(n->v.string.len, 0);
	assert_string_equal(n->v.string.bytes, "");
	lz_toml_free(&n->v);
	n = NULL;
	assert_int_equal(lz_toml_scan_scalar(&f.sc, &n), 0);
	assert_int_equal(n->v.string.len, 0);
	assert_int_equal(f.sc.off, 4);
	lz_toml_free(&n->v);
	done(&f);
}

static void test_lz_toml_scan_scalar__integers_and_their_end(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		size_t off;
		int64_t want;
	} cases[] = {
		{ "0", 1, 0 },
		{ "+0", 2, 0 },
		{ "-0]", 2, 0 },
		{ "42,", 2, 42 },
		{ "+17 # c", 3, 17 },
		{ "-5}", 2, -5 },
		{ "9223372036854775807", 19, INT64_MAX },
		{ "-9223372036854775808", 20, INT64_MIN },
		{ "-9223372036854775807", 20, -INT64_MAX },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fixture f;
		struct lz_toml_node *n = scalar_at(&f, cases[i].text, strlen(cases[i].text), cases[i].off, __LINE__);
		assert_int_equal(n->v.kind, LZ_TOML_INTEGER);
		assert_true(n->v.integer == cases[i].want);
		assert_pos(n->v.pos, 1, 1);
		lz_toml_free(&n->v);
		done(&f);
	}
}

static void test_lz_toml_scan_scalar__booleans(void **state)
{
	(void)state;
	struct fixture f;
	struct lz_toml_node *n = SCALAR(&f, "true,", 4);
	assert_int_equal(n->v.kind, LZ_TOML_BOOL);
	assert_true(n->v.boolean);
	lz_toml_free(&n->v);
	done(&f);
	n = SCALAR(&f, "false ", 5);
	assert_int_equal(n->v.kind, LZ_TOML_BOOL);
	assert_false(n->v.boolean);
	lz_toml_free(&n->v);
	done(&f);
}

static void test_lz_toml_scan_scalar__refusals_name_the_construct(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		uint32_t column;
		const char *msg;
	} cases[] = {
		{ "1.5", 1, "floats are not supported" },
		{ "1e3", 1, "floats are not supported" },
		{ "1E3", 1, "floats are not supported" },
		{ "inf", 1, "floats are not supported" },
		{ "+inf", 1, "floats are not supported" },
		{ "-nan", 1, "floats are not supported" },
		{ "1_000", 1, "underscores in integers are not supported" },
		{ "1979-05-27", 1, "dates and times are not supported" },
		{ "07:32:00", 1, "dates and times are not supported" },
		{ "0x1f", 1, "only decimal integers are supported" },
		{ "0o17", 1, "only decimal integers are supported" },
		{ "0b101", 1, "only decimal integers are supported" },
		{ "1x", 1, "invalid integer" },
		{ "-1-2", 1, "invalid integer" },
		{ "+", 1, "invalid integer" },
		{ "-", 1, "invalid integer" },
		{ "012", 1, "leading zeros are not allowed" },
		{ "-00", 1, "leading zeros are not allowed" },
		{ "9223372036854775808", 1, "integer out of range" },
		{ "-9223372036854775809", 1, "integer out of range" },
		{ "99999999999999999999999", 1, "integer out of range" },
		{ "True", 1, "expected a value" },
		{ "nul", 1, "expected a value" },
		{ "=", 1, "expected a value" },
		{ "", 1, "expected a value" },
		{ "[1]", 1, "expected a value" }, /* arrays are the parser's */
		{ "\"\"\"x\"\"\"", 1, "multi-line strings are not supported" },
		{ "'''x'''", 1, "multi-line strings are not supported" },
		{ "\"abc", 1, "unterminated string" },
		{ "'abc", 1, "unterminated string" },
		{ "\"ab\\", 1, "unterminated string" },
		{ "\"a\nb\"", 3, "newline in string" },
		{ "'a\r\nb'", 3, "newline in string" },
		{ "\"ok \\q\"", 5, "unknown escape" },
		{ "\"\\x41\"", 2, "unknown escape" },
		{ "\"a\\u12\"", 3, "invalid unicode escape" },
		{ "\"a\\u12g4\"", 3, "invalid unicode escape" },
		{ "\"\\U0000001\"", 2, "invalid unicode escape" },
		{ "\"\\uD800\"", 2, "invalid unicode escape" },
		{ "\"\\U00110000\"", 2, "invalid unicode escape" },
		{ "\"\\u0000\"", 2, "escaped NUL is not allowed" },
		{ "\"\\U00000000\"", 2, "escaped NUL is not allowed" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fixture f;
		assert_int_equal(open_exact(&f, cases[i].text, strlen(cases[i].text)), 0);
		struct lz_toml_node *n = SENTINEL;
		int r = lz_toml_scan_scalar(&f.sc, &n);
		if (r != -EINVAL)
			print_message("case '%s': got %d\n", cases[i].text, r);
		assert_int_equal(r, -EINVAL);
		assert_err(&f, 1, cases[i].column, cases[i].msg);
		assert_true(n == SENTINEL);
		done(&f);
	}
}

/* An error never quotes the string it is about. */
static void test_lz_toml_scan_scalar__messages_never_quote_values(void **state)
{
	(void)state;
	static const char *const texts[] = { "\"hunter2\\q\"", "\"hunter2", "'hunter2", "\"hunter2\\u12\"" };
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct fixture f;
		assert_int_equal(open_exact(&f, texts[i], strlen(texts[i])), 0);
		struct lz_toml_node *n = NULL;
		assert_int_equal(lz_toml_scan_scalar(&f.sc, &n), -EINVAL);
		assert_null(strstr(f.err.msg, "hunter2"));
		done(&f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_toml_scan_init__accepts_text_and_starts_at_line_one),
		cmocka_unit_test(test_lz_toml_scan_init__empty_and_null_empty_input),
		cmocka_unit_test(test_lz_toml_scan_init__refuses_bad_text_at_its_position),
		cmocka_unit_test(test_lz_toml_scan_init__refuses_missing_and_oversized_input),
		cmocka_unit_test(test_lz_toml_scan_init__null_error_object),
		cmocka_unit_test(test_lz_toml_scan_fail__records_position_and_message),
		cmocka_unit_test(test_lz_toml_scan_fail__truncates_long_messages),
		cmocka_unit_test(test_lz_toml_scan_skip__whitespace_comment_and_newlines),
		cmocka_unit_test(test_lz_toml_is_newline__lf_and_cr_only),
		cmocka_unit_test(test_lz_toml_scan_key__bare_key_and_position),
		cmocka_unit_test(test_lz_toml_scan_key__refuses_quoted_and_missing_keys),
		cmocka_unit_test(test_lz_toml_scan_scalar__basic_string_decodes_escapes),
		cmocka_unit_test(test_lz_toml_scan_scalar__strings_in_sequence_reuse_scratch),
		cmocka_unit_test(test_lz_toml_scan_scalar__empty_strings),
		cmocka_unit_test(test_lz_toml_scan_scalar__integers_and_their_end),
		cmocka_unit_test(test_lz_toml_scan_scalar__booleans),
		cmocka_unit_test(test_lz_toml_scan_scalar__refusals_name_the_construct),
		cmocka_unit_test(test_lz_toml_scan_scalar__messages_never_quote_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
