/* A Domain's recorded identity (store/identity.h): written once, whole and
 * durable, read back only when it derives the Domain Root's own name; its
 * volume record: a union that only grows, refused when damaged. */
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

/* Writes the Domain Root's file name as a hand (or a crash) would. */
static void write_record(const struct fx *f, const char *name, const char *text, mode_t mode)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
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
	write_record(f, LZ_IDENTITY_FILE,
		     "{\"lazaret_domain\":1,\"profile\":\"other\",\"workspace\":\"" WORKSPACE "\"}", 0600);
	assert_int_equal(lz_identity_read(f->fd, f->hex, &id, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "names another Domain"));
	assert_int_equal(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err), -EPROTO);
	write_record(f, LZ_IDENTITY_FILE, "{\"lazaret_domain\":1,\"profile\":\"dev\",\"works", 0600);
	assert_int_equal(lz_identity_read(f->fd, f->hex, &id, &err), -EPROTO);
	write_record(f, LZ_IDENTITY_FILE, "", 0600);
	assert_int_equal(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err), -EPROTO);
	size_t len = 99;
	char *text = lz_test_read_file(path, &len);
	assert_non_null(text);
	assert_int_equal(len, 0); /* not rewritten */
	free(text);
	write_record(f, LZ_IDENTITY_FILE,
		     "{\"lazaret_domain\":1,\"profile\":\"dev\",\"workspace\":\"" WORKSPACE "\"}", 0644);
	assert_true(lz_identity_read(f->fd, f->hex, &id, &err) < 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_true(lz_identity_ensure(f->fd, PROFILE, WORKSPACE, &err) < 0);
}

struct seen {
	char v[8][64];
	size_t n;
	const char *stop_at;
};

static int collect(void *ctx, const char *source)
{
	struct seen *s = ctx;
	if (s->n < 8)
		snprintf(s->v[s->n++], sizeof(s->v[0]), "%s", source);
	return s->stop_at != NULL && strcmp(source, s->stop_at) == 0;
}


/* No record: nothing seen. Sources recorded, then more: every one is kept
 * (a volume that left the configuration stays), each once, and the same
 * set again rewrites nothing; each stops where its callback says. */
static void test_lz_identity__volumes_accumulate_and_are_listed(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct seen s = { .n = 0 };
	char path[128];
	struct stat st, again;
	assert_int_equal(lz_identity_volumes_each(f->fd, collect, &s, &err), 0);
	assert_int_equal(s.n, 0);
	const char *first[] = { "/home/dev/cache", "/srv/shared" };
	assert_int_equal(lz_identity_record_volumes(f->fd, first, 2, &err), 0);
	snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_VOLUMES_FILE);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	const char *second[] = { "/srv/shared", "/home/dev/tools" };
	assert_int_equal(lz_identity_record_volumes(f->fd, second, 2, &err), 0);
	assert_int_equal(lz_identity_volumes_each(f->fd, collect, &s, &err), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.v[0], "/home/dev/cache");
	assert_string_equal(s.v[1], "/srv/shared");
	assert_string_equal(s.v[2], "/home/dev/tools");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(lz_identity_record_volumes(f->fd, first, 2, &err), 0);
	assert_int_equal(stat(path, &again), 0);
	assert_int_equal(again.st_ino, st.st_ino); /* nothing new: not rewritten */
	snprintf(path, sizeof(path), "%s/.%s", f->dir, LZ_VOLUMES_FILE);
	assert_int_equal(access(path, F_OK), -1);
	s = (struct seen){ .n = 0, .stop_at = "/srv/shared" };
	assert_int_equal(lz_identity_volumes_each(f->fd, collect, &s, &err), 1);
	assert_int_equal(s.n, 2);
}

/* A damaged record (cut, a relative path, a non-string, an unknown key,
 * another version), one others may read, or a link: refused, by the
 * reader and by the recorder, which never rewrites it. */
static void test_lz_identity__damaged_volume_records_are_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct seen s = { .n = 0 };
	const char *one[] = { "/a" };
	const char *bad[] = {
		"{\"lazaret_volumes\":1,\"sources\":[\"/a\"",
		"{\"lazaret_volumes\":1,\"sources\":[\"a\"]}",
		"{\"lazaret_volumes\":1,\"sources\":[1]}",
		"{\"lazaret_volumes\":1,\"sources\":[],\"more\":1}",
		"{\"lazaret_volumes\":2,\"sources\":[]}",
		"{\"lazaret_volumes\":1,\"sources\":{}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_record(f, LZ_VOLUMES_FILE, bad[i], 0600);
		assert_int_equal(lz_identity_volumes_each(f->fd, collect, &s, &err), -EPROTO);
		assert_int_equal(lz_identity_record_volumes(f->fd, one, 1, &err), -EPROTO);
		char path[128];
		snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_VOLUMES_FILE);
		size_t len = 0;
		char *text = lz_test_read_file(path, &len);
		assert_non_null(text);
		assert_int_equal(len, strlen(bad[i]));
		assert_memory_equal(text, bad[i], len); /* not rewritten */
		free(text);
	}
	assert_int_equal(s.n, 0);
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_VOLUMES_FILE);
	write_record(f, LZ_VOLUMES_FILE, "{\"lazaret_volumes\":1,\"sources\":[\"/a\"]}", 0600);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(lz_identity_volumes_each(f->fd, collect, &s, &err), -EPERM);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_true(lz_identity_volumes_each(f->fd, collect, &s, &err) < 0);
	assert_true(lz_identity_record_volumes(f->fd, one, 1, &err) < 0);
	assert_int_equal(s.n, 0);
}

/* A source that is not UTF-8 cannot be recorded; the record is left as
 * it was. */
static void test_lz_identity__a_volume_that_cannot_be_recorded_changes_nothing(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct seen s = { .n = 0 };
	const char *good[] = { "/a" };
	const char *bad[] = { "/b", "/\xff" };
	assert_int_equal(lz_identity_record_volumes(f->fd, good, 1, &err), 0);
	assert_int_equal(lz_identity_record_volumes(f->fd, bad, 2, &err), -EINVAL);
	assert_int_equal(lz_identity_volumes_each(f->fd, collect, &s, &err), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.v[0], "/a");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_identity__recorded_whole_and_read_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_identity__foreign_cut_linked_and_open_files_are_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_identity__volumes_accumulate_and_are_listed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_identity__damaged_volume_records_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_identity__a_volume_that_cannot_be_recorded_changes_nothing,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
