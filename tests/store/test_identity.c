/* A Domain's recorded identity (store/identity.h): written once, whole and
 * durable, read back only when it derives the Domain Root's own name. */
#include <errno.h>
#include <fcntl.h>
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

#include "config/domain.h"
#include "store/identity.h"
#include "util/sys.h"

struct fx {
	char dir[64];
	int fd;
	char hex[LZ_DOMAIN_ID_HEX_LEN + 1];
};

#define PROFILE "dev"
#define WORKSPACE "/home/dev/project"

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/lz-test-identity-XXXXXX");
	if (mkdtemp(f->dir) == NULL || (f->fd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	uint8_t id[LZ_DOMAIN_ID_LEN];
	if (lz_domain_id(PROFILE, strlen(PROFILE), WORKSPACE, strlen(WORKSPACE), id) < 0)
		return -1;
	lz_hex(id, sizeof(id), f->hex);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->fd);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static void write_identity(const struct fx *f, const char *text, mode_t mode)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_IDENTITY_FILE);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* Recorded once, 0600, no temporary file left; read back as written;
 * recorded again for the same Domain, nothing changes. */
static void test_lz_identity__recorded_whole_and_read_back(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_domain_identity id;
	struct stat st, again;
	char path[128];
	assert_int_equal(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err), 0);
	snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_IDENTITY_FILE);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/.identity", f->dir);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(lz_identity_read(f->fd, f->hex, &id, &err), 0);
	assert_string_equal(id.profile, PROFILE);
	assert_string_equal(id.workspace, WORKSPACE);
	assert_int_equal(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err), 0);
	snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_IDENTITY_FILE);
	assert_int_equal(stat(path, &again), 0);
	assert_int_equal(again.st_ino, st.st_ino);
}

/* Another profile's identity in this Domain Root, a cut or empty file, a
 * symbolic link, or a file others may read: refused, never rewritten. */
static void test_lz_identity__foreign_cut_linked_and_open_files_are_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_domain_identity id;
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_IDENTITY_FILE);
	write_identity(f, "{\"lazaret_domain\":1,\"profile\":\"other\",\"workspace\":\"" WORKSPACE "\"}", 0600);
	assert_int_equal(lz_identity_read(f->fd, f->hex, &id, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "names another Domain"));
	assert_int_equal(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err), -EPROTO);
	write_identity(f, "{\"lazaret_domain\":1,\"profile\":\"dev\",\"works", 0600);
	assert_int_equal(lz_identity_read(f->fd, f->hex, &id, &err), -EPROTO);
	write_identity(f, "", 0600);
	assert_int_equal(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err), -EPROTO);
	size_t len = 99;
	char *text = lz_test_read_file(path, &len);
	assert_non_null(text);
	assert_int_equal(len, 0); /* not rewritten */
	free(text);
	write_identity(f, "{\"lazaret_domain\":1,\"profile\":\"dev\",\"workspace\":\"" WORKSPACE "\"}", 0644);
	assert_true(lz_identity_read(f->fd, f->hex, &id, &err) < 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_true(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_identity__recorded_whole_and_read_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_identity__foreign_cut_linked_and_open_files_are_refused, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
