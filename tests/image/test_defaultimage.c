/* Unit tests for core/image/defaultimage.c: what mmdebstrap prints (text
 * from a mirror and from packages' scripts) reaches the developer's
 * terminal escaped, line by line, marked as mmdebstrap's. The mmdebstrap
 * here is this test program itself (run as "mmdebstrap ..." it plays the
 * tool, below); the real one goes through `lazaret image build-default`. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "fs/pathauth.h"
#include "image/defaultimage.h"

/* A mirror's error reason and a maintainer script's output, each with
 * what would drive a terminal; then a failure. */
static int fake_mmdebstrap(void)
{
	printf("Get:1 http://mirror.invalid bookworm InRelease [\033]52;c;aGVsbG8=\a]\n");
	fflush(stdout);
	fprintf(stderr, "E: \033[2J\033[Hrepository answered: 451 \xe2\x80\xae" "detalucni\r\n");
	fprintf(stderr, "no newline at the end \033[31m");
	return 1;
}

static void test_lz_default_image_build__mmdebstraps_output_is_shown_escaped(void **state)
{
	(void)state;
	char dir[] = "/tmp/lz-test-defaultimage-XXXXXX", root[PATH_MAX], self[PATH_MAX], log[PATH_MAX];
	assert_non_null(mkdtemp(dir));
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(log, sizeof(log), "%s/stderr", dir);
	assert_int_equal(mkdir(root, 0700), 0);
	assert_non_null(realpath("/proc/self/exe", self));
	struct lz_path storage = LZ_PATH_INIT, tool = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open_owned_root(root, &storage, &err), 0);
	assert_int_equal(lz_path_open(self, &tool, &err), 0);

	fflush(stderr);
	int saved = dup(STDERR_FILENO), out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(saved >= 0 && out >= 0);
	assert_int_equal(dup2(out, STDERR_FILENO), STDERR_FILENO);
	close(out);
	char *ref = NULL;
	int r = lz_default_image_build(&storage, &tool, &ref, &err);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);
	lz_path_release(&tool);
	lz_path_release(&storage);
	assert_true(r < 0);
	assert_null(ref);

	char text[4096];
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	assert_true(n > 0);
	text[n] = '\0';
	lz_test_rmtree(dir);
	assert_null(memchr(text, '\033', (size_t)n));
	assert_null(memchr(text, '\r', (size_t)n));
	assert_null(memchr(text, '\a', (size_t)n));
	assert_non_null(strstr(text, "mmdebstrap: Get:1 http://mirror.invalid bookworm InRelease [\\e]52;c;aGVsbG8=\\x07]\n"));
	assert_non_null(strstr(text, "mmdebstrap: E: \\e[2J\\e[Hrepository answered: 451 \\u{202E}detalucni\\r\n"));
	assert_non_null(strstr(text, "mmdebstrap: no newline at the end \\e[31m\n"));
}

int main(int argc, char **argv)
{
	(void)argc;
	if (strcmp(argv[0], "mmdebstrap") == 0)
		return fake_mmdebstrap();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_default_image_build__mmdebstraps_output_is_shown_escaped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
