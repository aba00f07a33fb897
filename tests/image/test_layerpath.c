/* Unit tests for core/image/layerpath.c: layer entry path validation and
 * normalisation, root-relative path buffers, and the messages that name an
 * entry. The parser is fed inputs no archive can carry (an embedded NUL). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "image/layerpath.h"
#include "util/cleanup.h"

/* ---- path normalisation -------------------------------------------------- */

static int parse(const char *in, size_t len, struct lz_layerpath *p, struct lz_err *err)
{
	lz_err_clear(err);
	return lz_layerpath_parse(in, len, p, err);
}

static void test_lz_layerpath_parse__normalises(void **state)
{
	(void)state;
	struct lz_layerpath p;
	struct lz_err err;
	assert_int_equal(parse("./a//b/./c/", 11, &p, &err), 0);
	assert_string_equal(p.full, "a/b/c");
	assert_int_equal(p.len, 5);
	assert_string_equal(p.parent, "a/b");
	assert_string_equal(p.name, "c");
	assert_ptr_equal(p.name, p.full + 4);
	assert_int_equal(parse("name", 4, &p, &err), 0);
	assert_string_equal(p.parent, "");
	assert_string_equal(p.name, "name");
	assert_int_equal(parse("./", 2, &p, &err), 0);
	assert_string_equal(p.full, "");
	assert_int_equal(p.len, 0);
	assert_string_equal(p.name, "");
	assert_int_equal(parse(".", 1, &p, &err), 0);
	assert_string_equal(p.full, "");
	assert_int_equal(parse("a/.wh.b", 7, &p, &err), 0);
	assert_string_equal(p.name, ".wh.b");
	/* Only the first len bytes count. */
	assert_int_equal(parse("abc/def", 3, &p, &err), 0);
	assert_string_equal(p.full, "abc");
}

static void test_lz_layerpath_parse__refusals(void **state)
{
	(void)state;
	static const struct {
		const char *in;
		size_t len;
		const char *why;
	} cases[] = {
		{ "", 0, "empty path" },
		{ "/etc/passwd", 11, "absolute path" },
		{ "../x", 4, "'..' component" },
		{ "a/../../x", 9, "'..' component" },
		{ "a/..", 4, "'..' component" },
		{ "a\0b", 3, "NUL byte" },
		{ ".wh.x/y", 7, "whiteout name used as a directory" },
		{ "a/.wh..wh..opq/y", 16, "whiteout name used as a directory" },
	};
	struct lz_layerpath p;
	struct lz_err err;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
		assert_int_equal(parse(cases[i].in, cases[i].len, &p, &err), -EINVAL);
		assert_int_equal(err.code, EINVAL);
		assert_non_null(strstr(err.msg, cases[i].why));
		assert_non_null(strstr(err.msg, " refused: "));
	}
	/* A raw path with a NUL is shown up to the NUL only. */
	assert_int_equal(parse("a\0b", 3, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "layer entry 'a' refused"));
}

static void test_lz_layerpath_parse__length_limits(void **state)
{
	(void)state;
	struct lz_layerpath p;
	struct lz_err err;
	char buf[LZ_LAYER_PATH_MAX + 2];

	memset(buf, 'a', sizeof(buf));
	for (size_t i = 100; i < LZ_LAYER_PATH_MAX; i += 101)
		buf[i] = '/';
	assert_int_equal(parse(buf, LZ_LAYER_PATH_MAX, &p, &err), 0);
	assert_int_equal(p.len, LZ_LAYER_PATH_MAX);
	assert_int_equal(parse(buf, LZ_LAYER_PATH_MAX + 1, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "longer than 4096"));
	/* The message shows a bounded prefix of a huge raw path. */
	assert_true(strlen(err.msg) < 256 + 64);

	memset(buf, 'b', 256);
	assert_int_equal(parse(buf, 255, &p, &err), 0);
	assert_int_equal(parse(buf, 256, &p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "longer than 255"));
}

/* ---- path buffers -------------------------------------------------------- */

static void test_lz_layerpath_push__joins_and_pops(void **state)
{
	(void)state;
	char buf[LZ_LAYER_PATH_MAX + 1] = "";
	size_t len = 0;
	assert_int_equal(lz_layerpath_push(buf, &len, "a"), 0);
	assert_string_equal(buf, "a"); /* no separator after the root */
	assert_int_equal(len, 1);
	size_t old = len;
	assert_int_equal(lz_layerpath_push(buf, &len, "bc"), 0);
	assert_string_equal(buf, "a/bc");
	assert_int_equal(len, 4);
	lz_layerpath_pop(buf, &len, old);
	assert_string_equal(buf, "a");
	assert_int_equal(len, 1);
	lz_layerpath_pop(buf, &len, 0);
	assert_string_equal(buf, "");
	assert_int_equal(len, 0);
}

static void test_lz_layerpath_push__enametoolong_leaves_buffer(void **state)
{
	(void)state;
	char buf[LZ_LAYER_PATH_MAX + 1];
	memset(buf, 'x', LZ_LAYER_PATH_MAX - 2);
	buf[LZ_LAYER_PATH_MAX - 2] = '\0';
	size_t len = LZ_LAYER_PATH_MAX - 2;
	/* "/y" fits exactly; "/yz" would be one byte too many. */
	assert_int_equal(lz_layerpath_push(buf, &len, "yz"), -ENAMETOOLONG);
	assert_int_equal(len, LZ_LAYER_PATH_MAX - 2);
	assert_int_equal(strlen(buf), LZ_LAYER_PATH_MAX - 2);
	assert_int_equal(lz_layerpath_push(buf, &len, "y"), 0);
	assert_int_equal(len, LZ_LAYER_PATH_MAX);
	assert_int_equal(strlen(buf), LZ_LAYER_PATH_MAX);
	assert_string_equal(buf + LZ_LAYER_PATH_MAX - 2, "/y");
}

/* ---- messages ------------------------------------------------------------ */

static void test_lz_layerpath_fail__names_entry_and_object(void **state)
{
	(void)state;
	struct lz_err err;
	lz_err_clear(&err);
	assert_int_equal(lz_layerpath_fail(&err, EACCES, "a/b", "chown", ""), -EACCES);
	assert_int_equal(err.code, EACCES);
	assert_string_equal(err.msg, "layer entry 'a/b': chown '.': Permission denied");
	/* No errno (e <= 0) is reported as EIO. */
	assert_int_equal(lz_layerpath_fail(&err, 0, "", "write", "f"), -EIO);
	assert_int_equal(err.code, EIO);
	assert_non_null(strstr(err.msg, "layer entry '.': write 'f': "));
	/* err is optional. */
	assert_int_equal(lz_layerpath_fail(NULL, ENOSPC, "x", "write", "x"), -ENOSPC);
}

static void test_lz_layerpath_refuse__einval(void **state)
{
	(void)state;
	struct lz_err err;
	lz_err_clear(&err);
	assert_int_equal(lz_layerpath_refuse(&err, "", "the root can only be a directory"),
			 -EINVAL);
	assert_int_equal(err.code, EINVAL);
	assert_string_equal(err.msg, "layer entry '.' refused: the root can only be a directory");
	assert_string_equal(lz_layerpath_shown(""), ".");
	assert_string_equal(lz_layerpath_shown("a"), "a");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_layerpath_parse__normalises),
		cmocka_unit_test(test_lz_layerpath_parse__refusals),
		cmocka_unit_test(test_lz_layerpath_parse__length_limits),
		cmocka_unit_test(test_lz_layerpath_push__joins_and_pops),
		cmocka_unit_test(test_lz_layerpath_push__enametoolong_leaves_buffer),
		cmocka_unit_test(test_lz_layerpath_fail__names_entry_and_object),
		cmocka_unit_test(test_lz_layerpath_refuse__einval),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
