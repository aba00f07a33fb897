/* ID-map verification (SR-12). The namespace itself is exercised end to end
 * by the image preparation tests, which run as the unprivileged test user. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "proc/userns.h"

static void test_lz_idmap_verify_text__exact_maps(void **state)
{
	(void)state;
	struct lz_err err;
	const char *kernel = "         0       1001          1\n         1     100000      65536\n";
	assert_int_equal(lz_idmap_verify_text(kernel, 1001, 100000, &err), 0);
}

static void test_lz_idmap_verify_text__refusals(void **state)
{
	(void)state;
	struct lz_err err;
	const char *bad[] = {
		"0 1001 1\n",                                 /* subordinate line missing */
		"0 1001 1\n1 100000 65535\n",                 /* short range */
		"0 1001 1\n1 100000 65537\n",                 /* wider range */
		"0 1002 1\n1 100000 65536\n",                 /* other host uid */
		"0 0 1\n1 100000 65536\n",                    /* host root */
		"0 1001 1\n1 200000 65536\n",                 /* other range */
		"0 1001 1\n1 100000 65536\n65537 300000 1\n", /* extra line */
		"1 100000 65536\n0 1001 1\n",                 /* order swapped */
		"0 1001 1 1\n1 100000 65536\n",               /* extra field */
		"",
		"0 1001 99999999999\n1 100000 65536\n", /* overflow */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		print_message("case %zu\n", i);
		assert_int_equal(lz_idmap_verify_text(bad[i], 1001, 100000, &err), -EPERM);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_idmap_verify_text__exact_maps),
		cmocka_unit_test(test_lz_idmap_verify_text__refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
