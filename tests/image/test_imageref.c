/* Unit tests for core/image/imageref.c: the three image reference forms a
 * profile may name (oci:PATH[:TAG], docker-archive:PATH, docker://REF), and
 * the refusals that keep a malformed one from reaching skopeo or the
 * preparer (issue 3). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "image/imageref.h"

static struct lz_image_ref ref;
static struct lz_err err;

static int parse(const char *text)
{
	memset(&ref, 0x5a, sizeof(ref)); /* what a refusal must leave alone */
	lz_err_clear(&err);
	return lz_image_ref_parse(text, &ref, &err);
}

static void assert_untouched(void)
{
	for (size_t i = 0; i < sizeof(ref); i++)
		if (((const unsigned char *)&ref)[i] != 0x5a)
			fail_msg("a refused reference wrote byte %zu of the result", i);
}

static void assert_refused(const char *text, const char *why)
{
	if (parse(text) != -EINVAL)
		fail_msg("'%s' was not refused", text);
	if (strstr(err.msg, why) == NULL)
		fail_msg("'%s': message '%s' lacks '%s'", text, err.msg, why);
	assert_untouched();
}

static void test_lz_image_ref_parse__oci_with_and_without_tag(void **state)
{
	(void)state;
	assert_int_equal(parse("oci:/srv/images/dev"), 0);
	assert_int_equal(ref.kind, LZ_IMAGE_OCI);
	assert_string_equal(ref.path, "/srv/images/dev");
	assert_string_equal(ref.tag, "");
	assert_string_equal(ref.ref, "");
	assert_int_equal(parse("oci:/srv/images/dev:v1.2-rc_3"), 0);
	assert_string_equal(ref.path, "/srv/images/dev");
	assert_string_equal(ref.tag, "v1.2-rc_3");
	/* A colon in a directory name is part of the path; the tag is what
	 * follows the last colon, when no slash does. */
	assert_int_equal(parse("oci:/srv/a:b/dev"), 0);
	assert_string_equal(ref.path, "/srv/a:b/dev");
	assert_string_equal(ref.tag, "");
	assert_int_equal(parse("oci:/srv/a:b/dev:latest"), 0);
	assert_string_equal(ref.path, "/srv/a:b/dev");
	assert_string_equal(ref.tag, "latest");
}

static void test_lz_image_ref_parse__docker_forms(void **state)
{
	(void)state;
	assert_int_equal(parse("docker-archive:/tmp/img.tar"), 0);
	assert_int_equal(ref.kind, LZ_IMAGE_DOCKER_ARCHIVE);
	assert_string_equal(ref.path, "/tmp/img.tar");
	assert_string_equal(ref.tag, "");
	assert_int_equal(parse("docker://registry.example/team/dev:1"), 0);
	assert_int_equal(ref.kind, LZ_IMAGE_DOCKER);
	assert_string_equal(ref.ref, "registry.example/team/dev:1");
	assert_string_equal(ref.path, "");
}

static void test_lz_image_ref_parse__refuses_malformed(void **state)
{
	(void)state;
	assert_refused("", "expected oci:PATH[:TAG], docker-archive:PATH or docker://REF");
	assert_refused("/srv/images/dev", "expected oci:PATH");
	assert_refused("OCI:/srv/images/dev", "expected oci:PATH"); /* schemes are lower case */
	assert_refused("docker:registry.example/dev", "expected oci:PATH");
	assert_refused("oci:", "image layout path");
	assert_refused("oci:relative/dev", "image layout path");
	assert_refused("oci:/srv/../etc", "image layout path");
	assert_refused("oci:/srv/./dev", "image layout path");
	assert_refused("oci:/srv//dev", "image layout path");
	assert_refused("oci:/srv/dev/", "image layout path");
	assert_refused("oci:/srv/dev:", "invalid tag");
	assert_refused("oci:/srv/dev:-x", "invalid tag");  /* a tag starts with a word character */
	assert_refused("oci:/srv/dev:.x", "invalid tag");
	assert_refused("oci:/srv/dev:a b", "invalid tag");
	assert_refused("oci:/srv/dev:a\x1b[2J", "invalid tag");
	assert_refused("docker-archive:", "image archive path");
	assert_refused("docker-archive:img.tar", "image archive path");
	assert_refused("docker-archive:/tmp/../img.tar", "image archive path");
	assert_refused("docker://", "docker:// needs a reference");
	assert_refused("docker://reg.example/dev latest", "whitespace or a control character");
	assert_refused("docker://reg.example/dev\t", "whitespace or a control character");
	assert_refused("docker://reg.example/\x1b]0;x\x07", "whitespace or a control character");
	assert_refused("docker://reg.example/\x7f", "whitespace or a control character");
}

/* prefix and max bytes parse, all of them in field; one more is refused. */
static void assert_bound(const char *prefix, size_t max, const char *field, const char *why)
{
	static char text[LZ_IMAGEREF_MAX + 64];
	size_t n = strlen(prefix);
	memcpy(text, prefix, n);
	memset(text + n, 'x', max + 1);
	text[n + max] = '\0';
	assert_int_equal(parse(text), 0);
	assert_int_equal(strlen(field), max);
	text[n + max] = 'x';
	text[n + max + 1] = '\0';
	assert_refused(text, why);
}

/* Every bound at its edge: the tag (128), the docker reference (255) and
 * a path (LZ_IMAGEREF_MAX, which the path grammar may bound below). */
static void test_lz_image_ref_parse__length_limits(void **state)
{
	(void)state;
	static char text[LZ_IMAGEREF_MAX + 64];
	assert_bound("oci:/srv/dev:", 128, ref.tag, "invalid tag");
	assert_bound("docker://", 255, ref.ref, "at most 255 bytes");

	/* A path one byte over the bound: /aaa...a of LZ_IMAGEREF_MAX + 1 bytes. */
	memcpy(text, "docker-archive:/", 16);
	memset(text + 16, 'a', LZ_IMAGEREF_MAX);
	text[15 + LZ_IMAGEREF_MAX + 1] = '\0';
	assert_int_equal(parse(text), -EINVAL);
	assert_untouched();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_image_ref_parse__oci_with_and_without_tag),
		cmocka_unit_test(test_lz_image_ref_parse__docker_forms),
		cmocka_unit_test(test_lz_image_ref_parse__refuses_malformed),
		cmocka_unit_test(test_lz_image_ref_parse__length_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
