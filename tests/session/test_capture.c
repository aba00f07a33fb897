/* Bounded output capture of a child (core/session/capture.h): status,
 * output through a pipe or a PTY, truncation, the timeout, and a
 * descendant that keeps the stream open. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proc/spawn.h"
#include "session/capture.h"

static struct lz_capture_result run_sh(const char *script, bool terminal, int timeout_ms, size_t max)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	struct lz_capture_request req = { .path = "/bin/sh", .argv = argv, .terminal = terminal,
					  .timeout_ms = timeout_ms, .max_output = max };
	struct lz_capture_result r;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_capture_run(&req, &r, &err), 0);
	return r;
}

static void status_and_output(void **state)
{
	(void)state;
	struct lz_capture_result r = run_sh("echo out; echo err >&2; exit 3", false, 10000, 4096);
	assert_int_equal(r.status, 3);
	assert_false(r.timed_out);
	assert_false(r.truncated);
	assert_string_equal(r.output, "out\nerr\n");
	assert_int_equal(r.len, 8);
	lz_capture_result_free(&r);
	lz_capture_result_free(&r); /* idempotent */
}

static void signal_is_128_plus_n(void **state)
{
	(void)state;
	struct lz_capture_result r = run_sh("kill -9 $$", false, 10000, 64);
	assert_int_equal(r.status, 128 + 9);
	lz_capture_result_free(&r);
}

static void stdin_is_not_ours(void **state)
{
	(void)state;
	/* Without a terminal, standard input is /dev/null: read sees EOF. */
	struct lz_capture_result r = run_sh("if read x; then echo got; else echo eof; fi", false, 10000, 64);
	assert_string_equal(r.output, "eof\n");
	lz_capture_result_free(&r);
}

static void terminal_mode(void **state)
{
	(void)state;
	struct lz_capture_result r = run_sh("test -t 0 && test -t 1 && test -t 2 && stty size", true, 10000, 256);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.output, "24 80"));
	lz_capture_result_free(&r);
	r = run_sh("test -t 1", false, 10000, 64);
	assert_int_equal(r.status, 1);
	lz_capture_result_free(&r);
}

static void truncates_but_drains(void **state)
{
	(void)state;
	/* 200 KiB: more than a pipe holds, so the child finishes only when
	 * we keep reading past max. */
	struct lz_capture_result r =
		run_sh("i=0; while [ $i -lt 3200 ]; do echo 0123456789012345678901234567890123456789012345678901234567890; i=$((i+1)); done; exit 5",
		       false, 30000, 1000);
	assert_int_equal(r.status, 5);
	assert_true(r.truncated);
	assert_int_equal(r.len, 1000);
	assert_int_equal(r.output[1000], '\0');
	lz_capture_result_free(&r);
}

static void timeout_kills(void **state)
{
	(void)state;
	int64_t t0 = lz_now_ms();
	struct lz_capture_result r = run_sh("echo started; sleep 30", false, 300, 64);
	assert_true(r.timed_out);
	assert_int_equal(r.status, -1);
	assert_string_equal(r.output, "started\n");
	assert_true(lz_now_ms() - t0 < 10000);
	lz_capture_result_free(&r);
}

static void descendant_holding_the_stream(void **state)
{
	(void)state;
	int64_t t0 = lz_now_ms();
	struct lz_capture_result r = run_sh("sleep 20 & echo done", false, 30000, 64);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.output, "done\n");
	assert_true(lz_now_ms() - t0 < 10000); /* not the sleeper's 20 s */
	lz_capture_result_free(&r);
}

static void unstartable(void **state)
{
	(void)state;
	char *argv[] = { "nothing", NULL };
	struct lz_capture_request req = { .path = "/nonexistent/nothing", .argv = argv, .timeout_ms = 1000,
					  .max_output = 64 };
	struct lz_capture_result r = { .status = 42 };
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_capture_run(&req, &r, &err), -ENOENT);
	assert_int_equal(r.status, 42); /* untouched */
	assert_true(err.msg[0] != '\0');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(status_and_output),
		cmocka_unit_test(signal_is_128_plus_n),
		cmocka_unit_test(stdin_is_not_ours),
		cmocka_unit_test(terminal_mode),
		cmocka_unit_test(truncates_but_drains),
		cmocka_unit_test(timeout_kills),
		cmocka_unit_test(descendant_holding_the_stream),
		cmocka_unit_test(unstartable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
