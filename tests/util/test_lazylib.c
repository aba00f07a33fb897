/* util/lazylib.h: libraries opened when first used. A missing library is
 * an error naming it when loaded up front, and ends the process (as a
 * missing DT_NEEDED library would) when a call reaches it first. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/lazylib.h"

LZ_LAZYLIB(missing, "liblazaret-test-absent.so.7")
LZ_LAZYLIB(libm_lazy, "libm.so.6")

static void test_lazylib__a_present_library_loads_and_forwards(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	assert_int_equal(libm_lazy_load(&err), 0);
	double (*cosine)(double) = (double (*)(double))libm_lazy_sym("cos");
	assert_true(cosine(0.0) == 1.0);
}

static void test_lazylib__a_missing_library_is_an_error_naming_it(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	assert_int_equal(missing_load(&err), -ENOENT);
	assert_non_null(strstr(err.msg, "liblazaret-test-absent.so.7"));
	assert_non_null(strstr(err.msg, "install"));
	/* asked again: the same answer, nothing retried or cached as loaded */
	assert_int_equal(missing_load(&err), -ENOENT);
}

/* A call that reaches a missing library or function ends the process
 * with status 127 and says which on standard error. */
static void expect_exit_127(const char *lib_or_fn, void *(*sym)(const char *), const char *name)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		(void)sym(name);
		_exit(0);
	}
	close(p[1]);
	char out[512] = "";
	ssize_t n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	out[n > 0 ? n : 0] = '\0';
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 127);
	if (strstr(out, lib_or_fn) == NULL)
		fail_msg("stderr '%s' does not name %s", out, lib_or_fn);
}

static void test_lazylib__a_call_without_the_library_ends_the_process(void **state)
{
	(void)state;
	expect_exit_127("liblazaret-test-absent.so.7", missing_sym, "anything");
	expect_exit_127("lazaret_no_such_function", libm_lazy_sym, "lazaret_no_such_function");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lazylib__a_present_library_loads_and_forwards),
		cmocka_unit_test(test_lazylib__a_missing_library_is_an_error_naming_it),
		cmocka_unit_test(test_lazylib__a_call_without_the_library_ends_the_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
