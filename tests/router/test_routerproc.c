/* core/router/routerproc: the router program's arguments (what the RS
 * writes is what the program reads, and nothing else is accepted) and
 * its refusal to serve descriptors the RS did not place, and its log
 * lines' budget. The program
 * itself serving a sandbox is tests/e2e/test_router.sh. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_child.h"

#include "router/router.h"
#include "router/routerproc.h"
#include "util/cleanup.h"
#include "util/fdutil.h"

static int argc_of(const char *const *argv)
{
	int n = 0;
	while (argv[n] != NULL)
		n++;
	return n;
}

static void argv_round_trips(void **state)
{
	(void)state;
	for (int flags = 0; flags < 4; flags++) {
		const struct lz_routerproc_args in = { .hide_editor_config = flags & 1,
						       .isolate_ignored = flags & 2,
						       .watch_dirs = 65536,
						       .workspace = "/home/dev/a project" };
		char number[24];
		const char *argv[LZ_ROUTERPROC_ARGV_MAX];
		lz_routerproc_argv(&in, number, argv);
		assert_string_equal(argv[0], "lazaret-router");
		struct lz_routerproc_args out;
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_routerproc_parse(argc_of(argv), (char *const *)argv, &out, &err), 0);
		assert_int_equal(out.hide_editor_config, in.hide_editor_config);
		assert_int_equal(out.isolate_ignored, in.isolate_ignored);
		assert_int_equal(out.watch_dirs, in.watch_dirs);
		assert_string_equal(out.workspace, in.workspace);
	}
}

static void parse_refuses_anything_else(void **state)
{
	(void)state;
	static const char *const bad[][6] = {
		{ "lazaret-router", "--watch-dirs", "0", "--workspace", "/w", NULL },
		{ "lazaret-router", "--watch-dirs", "-1", "--workspace", "/w", NULL },
		{ "lazaret-router", "--watch-dirs", "12x", "--workspace", "/w", NULL },
		{ "lazaret-router", "--watch-dirs", "", "--workspace", "/w", NULL },
		{ "lazaret-router", "--watch-dirs", "99999999999999999999999", "--workspace", "/w", NULL },
		{ "lazaret-router", "--watch-dirs", "4", "--workspace", NULL },
		{ "lazaret-router", "--watch-dirs", "4", NULL },
		{ "lazaret-router", "--workspace", "/w", NULL },
		{ "lazaret-router", "--watch-dirs", "4", "--workspace", "/w", "--debug" },
		{ "lazaret-router", "--host", "/", "--watch-dirs", "4", NULL },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		int argc = 0;
		while (argc < 6 && bad[i][argc] != NULL)
			argc++;
		struct lz_routerproc_args out = { .watch_dirs = 7 };
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_routerproc_parse(argc, (char *const *)bad[i], &out, &err), -EINVAL);
		assert_true(err.msg[0] != '\0');
		assert_int_equal(out.watch_dirs, 7); /* untouched */
	}
}

/* The descriptors must be the types the RS places: /dev/null where the
 * FUSE device belongs (a character device, not 10:229), a file where a
 * directory belongs, a pipe where the slots file belongs, nothing at all. Nothing is served, nothing
 * classified. */
static void refuses(const int *given, const char *want)
{
	/* and the report pipe to the test, at 9 */
	int fds[LZ_ROUTERPROC_NFDS + 1];
	memcpy(fds, given, LZ_ROUTERPROC_NFDS * sizeof(int));
	fds[LZ_ROUTERPROC_NFDS] = report_fd;
	int r = lz_fds_place(fds, LZ_ROUTERPROC_NFDS + 1);
	report_fd = 3 + LZ_ROUTERPROC_NFDS;
	CHECK(r == 0, "place: %s", strerror(-r));
	const struct lz_routerproc_args a = { .isolate_ignored = true, .watch_dirs = 1, .workspace = "/w" };
	struct lz_err err = { 0, "" };
	r = lz_routerproc_run(&a, &err);
	CHECK(r == -EBADF, "run: %d (%s)", r, err.msg);
	CHECK(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
}

static void misplaced_body(void *arg)
{
	int which = *(int *)arg;
	int null = open("/dev/null", O_RDWR), dir = open("/", O_PATH | O_DIRECTORY), p[2];
	int slots = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	CHECK(null >= 0 && dir >= 0 && slots >= 0 && pipe(p) == 0, "setup: %s", strerror(errno));
	switch (which) {
	case 0: /* /dev/null is no FUSE device */
		refuses((const int[]){ null, dir, dir, p[1], p[1], slots }, "descriptor 3 is not the FUSE device");
		break;
	case 1: { /* the real device, a character device where the workspace belongs */
		int fuse = open("/dev/fuse", O_RDWR);
		CHECK(fuse >= 0, "open /dev/fuse: %s", strerror(errno));
		refuses((const int[]){ fuse, null, dir, p[1], p[1], slots }, "descriptor 4 is not the workspace");
		break;
	}
	case 2: { /* one where the Ignored Workspace State belongs */
		int fuse = open("/dev/fuse", O_RDWR);
		CHECK(fuse >= 0, "open /dev/fuse: %s", strerror(errno));
		refuses((const int[]){ fuse, dir, null, p[1], p[1], slots },
			"descriptor 5 is not the Ignored Workspace State");
		break;
	}
	default: { /* a pipe where the watch budget's slots file belongs */
		int fuse = open("/dev/fuse", O_RDWR);
		CHECK(fuse >= 0, "open /dev/fuse: %s", strerror(errno));
		refuses((const int[]){ fuse, dir, dir, p[1], p[1], p[0] },
			"descriptor 8 is not the watch budget's slots file");
	}
	}
}

static void run_refuses_misplaced_descriptors(void **state)
{
	(void)state;
	for (int which = 0; which < 4; which++)
		run_in_child(misplaced_body, &which);
}

/* The router's lines go to hc.log: a process logs LZ_ROUTER_LOG_LINES of
 * them, then one saying the rest are not logged, then nothing. */
static void log_budget(void *arg)
{
	(void)arg;
	int p[2];
	CHECK(pipe(p) == 0 && dup2(p[1], STDERR_FILENO) == STDERR_FILENO, "pipe: %s", strerror(errno));
	close(p[1]);
	for (int i = 0; i < 3 * LZ_ROUTER_LOG_LINES; i++)
		lz_router_log("line %d: a rebuild failed", i);
	close(STDERR_FILENO);
	char buf[65536];
	size_t n = 0;
	ssize_t k;
	while ((k = read(p[0], buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	int lines = 0;
	for (char *c = buf; *c; c++)
		lines += *c == '\n';
	CHECK(lines == LZ_ROUTER_LOG_LINES + 1, "%d lines", lines);
	CHECK(strncmp(buf, "lazaret-router: line 0: ", 24) == 0, "first: %.40s", buf);
	char last[128];
	snprintf(last, sizeof(last), "lazaret-router: line %d: ", LZ_ROUTER_LOG_LINES - 1);
	CHECK(strstr(buf, last) != NULL, "no line %d", LZ_ROUTER_LOG_LINES - 1);
	const char *end = "the rest of this generation's are not\n";
	CHECK(n > strlen(end) && strcmp(buf + n - strlen(end), end) == 0, "the last line: %s",
	      buf + (n > 100 ? n - 100 : 0));
}

static void log_lines_are_budgeted(void **state)
{
	(void)state;
	run_in_child(log_budget, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(argv_round_trips),
		cmocka_unit_test(parse_refuses_anything_else),
		cmocka_unit_test(run_refuses_misplaced_descriptors),
		cmocka_unit_test(log_lines_are_budgeted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
