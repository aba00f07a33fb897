/* The guest command of a Client Session (core/session/guestcmd.h; spec
 * 3.4, SR-2): argv exactly as sent, the base environment, and only a
 * well-formed TERM of a terminal session from the client's environment. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "session/guestcmd.h"

#define BYTES(s) ((struct lz_wire_bytes){ .ptr = (const uint8_t *)(s), .len = sizeof(s) - 1 })

static char **base_env(void)
{
	char **env = calloc(3, sizeof(char *));
	assert_non_null(env);
	env[0] = strdup("PATH=/usr/bin:/bin");
	env[1] = strdup("HOME=/root");
	return env;
}

static size_t count(char **v)
{
	size_t n = 0;
	while (v[n])
		n++;
	return n;
}

/* Builds with the given client TERM value (NULL: none sent); returns the
 * TERM entry found in env, or NULL. */
static char *term_for(const struct lz_wire_bytes *value, bool terminal, size_t *n_env)
{
	struct lz_wire_bytes argv[] = { BYTES("sh") };
	struct lz_wire_env env[] = { { BYTES("HOME"), BYTES("/home/dev") }, { BYTES("TERM"), { 0 } } };
	if (value)
		env[1].value = *value;
	struct lz_wire_run_command run = { .argv = argv, .argc = 1, .env = env, .n_env = value ? 2 : 1,
					   .terminal = terminal, .rows = 24, .cols = 80 };
	char **out_argv = NULL, **out_env = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_guestcmd_build(&run, base_env(), &out_argv, &out_env, &err), 0);
	char *term = NULL;
	*n_env = count(out_env);
	for (char **e = out_env; *e; e++) {
		assert_string_not_equal(*e, "HOME=/home/dev"); /* the client's own never enters */
		if (strncmp(*e, "TERM=", 5) == 0)
			term = strdup(*e);
	}
	free(out_argv);
	lz_guestcmd_env_free(out_env);
	return term;
}

static void argv_exact(void **state)
{
	(void)state;
	static const uint8_t weird[] = { 'a', 0xff, '\n', 0x1b, '[' };
	struct lz_wire_bytes argv[] = { BYTES("/bin/printf"), BYTES(""), { weird, sizeof(weird) }, BYTES("$HOME") };
	struct lz_wire_run_command run = { .argv = argv, .argc = 4 };
	char **out_argv = NULL, **out_env = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_guestcmd_build(&run, base_env(), &out_argv, &out_env, &err), 0);
	assert_int_equal(count(out_argv), 4);
	assert_string_equal(out_argv[0], "/bin/printf");
	assert_string_equal(out_argv[1], "");
	assert_memory_equal(out_argv[2], weird, sizeof(weird));
	assert_int_equal(out_argv[2][sizeof(weird)], '\0');
	assert_string_equal(out_argv[3], "$HOME");
	/* No terminal: the base environment, unchanged. */
	assert_int_equal(count(out_env), 2);
	assert_string_equal(out_env[0], "PATH=/usr/bin:/bin");
	assert_string_equal(out_env[1], "HOME=/root");
	free(out_argv);
	lz_guestcmd_env_free(out_env);
}

static void refuses_bad_arguments(void **state)
{
	(void)state;
	struct lz_wire_bytes empty_first[] = { BYTES(""), BYTES("x") };
	struct lz_wire_bytes nul_inside[] = { BYTES("sh"), BYTES("a\0b") };
	struct lz_wire_run_command runs[] = {
		{ .argv = empty_first, .argc = 2 },
		{ .argv = nul_inside, .argc = 2 },
		{ .argv = NULL, .argc = 0 },
	};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char **out_argv = (char **)0x1, **out_env = (char **)0x1;
		struct lz_err err = { 0, "" };
		/* base_env is consumed on failure too (ASan would see a leak). */
		assert_int_equal(lz_guestcmd_build(&runs[i], base_env(), &out_argv, &out_env, &err), -EINVAL);
		assert_true(err.msg[0] != '\0');
		assert_ptr_equal(out_argv, (char **)0x1); /* untouched on failure */
		assert_ptr_equal(out_env, (char **)0x1);
	}
}

static void term_of_a_terminal_session(void **state)
{
	(void)state;
	size_t n;
	struct lz_wire_bytes v = BYTES("xterm-256color");
	char *t = term_for(&v, true, &n);
	assert_string_equal(t, "TERM=xterm-256color");
	assert_int_equal(n, 3);
	free(t);
	struct lz_wire_bytes plus = BYTES("rxvt-unicode+x.y_z");
	t = term_for(&plus, true, &n);
	assert_string_equal(t, "TERM=rxvt-unicode+x.y_z");
	free(t);
	/* Without a terminal the client's TERM is ignored. */
	t = term_for(&v, false, &n);
	assert_null(t);
	assert_int_equal(n, 2);
}

static void forged_term_falls_back(void **state)
{
	(void)state;
	static const char long_name[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"; /* 65 */
	struct lz_wire_bytes bad[] = {
		BYTES("xterm\x1b]0;pwned\x07"), BYTES("xterm;rm -rf /"), BYTES("a b"), BYTES("x\0y"),
		BYTES(""), { (const uint8_t *)long_name, sizeof(long_name) - 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n;
		char *t = term_for(&bad[i], true, &n);
		assert_string_equal(t, "TERM=" LZ_GUESTCMD_TERM_DEFAULT);
		free(t);
	}
	/* No TERM sent at all. */
	size_t n;
	char *t = term_for(NULL, true, &n);
	assert_string_equal(t, "TERM=" LZ_GUESTCMD_TERM_DEFAULT);
	free(t);
}

/* A profile's TERM (in the base environment) is the one TERM of a
 * terminal session; an empty argument's span may carry no pointer. */
static void profile_term_kept_and_empty_span(void **state)
{
	(void)state;
	struct lz_wire_bytes argv[] = { BYTES("sh"), { NULL, 0 } };
	struct lz_wire_env env[] = { { BYTES("TERM"), BYTES("xterm-256color") } };
	struct lz_wire_run_command run = { .argv = argv, .argc = 2, .env = env, .n_env = 1,
					   .terminal = true, .rows = 24, .cols = 80 };
	char **base = base_env();
	base[2] = strdup("TERM=screen");
	char **grown = realloc(base, 4 * sizeof(char *));
	assert_non_null(grown);
	grown[3] = NULL;
	char **out_argv = NULL, **out_env = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_guestcmd_build(&run, grown, &out_argv, &out_env, &err), 0);
	assert_string_equal(out_argv[1], "");
	assert_int_equal(count(out_env), 3);
	assert_string_equal(out_env[2], "TERM=screen");
	free(out_argv);
	lz_guestcmd_env_free(out_env);
}

static void no_base_env_is_out_of_memory(void **state)
{
	(void)state;
	struct lz_wire_bytes argv[] = { BYTES("sh") };
	struct lz_wire_run_command run = { .argv = argv, .argc = 1 };
	char **out_argv = NULL, **out_env = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_guestcmd_build(&run, NULL, &out_argv, &out_env, &err), -ENOMEM);
	lz_guestcmd_env_free(NULL); /* accepts NULL */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(argv_exact),
		cmocka_unit_test(refuses_bad_arguments),
		cmocka_unit_test(term_of_a_terminal_session),
		cmocka_unit_test(forged_term_falls_back),
		cmocka_unit_test(profile_term_kept_and_empty_span),
		cmocka_unit_test(no_base_env_is_out_of_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
