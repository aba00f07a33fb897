/* Unit tests for core/ociwrite.c, the single-layer OCI layout writer the
 * default image uses (issue 3, spec 3.6 "Prepared lower").
 *
 * The writer's output is read back only through the product's own verified
 * readers: lz_oci_open (manifest, config, digests, linux/amd64),
 * lz_oci_open_blob (the layer hashed in full) and lz_layer_apply (the layer
 * materialised into a tree). A layout the writer produced must pass every
 * check a hostile layout is held to, so the default image takes no shortcut.
 *
 * Each test works in its own mkdtemp directory: <base>/rootfs.tar (made with
 * libarchive), <base>/layout (the empty layout directory) and <base>/root
 * (where the layer is applied). Entries carry the caller's uid/gid, so the
 * tests pass as root and unprivileged alike. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "image/layer.h"
#include "image/oci.h"
#include "image/ociwrite.h"

#define HELLO "hello from the default image\n"

static const char *const CMD[] = { "/bin/bash", "-l", NULL };
static const char *const ENV[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", NULL };

/* ---- fixture ----------------------------------------------------------------- */

struct fixture {
	char base[64];
	int base_fd;   /* O_DIRECTORY of base */
	int layout_fd; /* O_PATH|O_DIRECTORY of base/layout, as the product holds it */
	int tar_fd;    /* O_RDONLY of base/rootfs.tar, at offset 0 */
	char tar_digest[LZ_OCI_DIGEST_STR_MAX];
	uint64_t tar_size;
};

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void digest_fd(int fd, char out[LZ_OCI_DIGEST_STR_MAX], uint64_t *ret_size)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	assert_non_null(ctx);
	assert_int_equal(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL), 1);
	char buf[4096];
	ssize_t n;
	uint64_t size = 0;
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		assert_int_equal(EVP_DigestUpdate(ctx, buf, (size_t)n), 1);
		size += (uint64_t)n;
	}
	assert_int_equal(n, 0);
	uint8_t md[32];
	unsigned int mdn = 0;
	assert_int_equal(EVP_DigestFinal_ex(ctx, md, &mdn), 1);
	EVP_MD_CTX_free(ctx);
	strcpy(out, "sha256:");
	for (size_t i = 0; i < sizeof(md); i++)
		sprintf(out + 7 + 2 * i, "%02x", md[i]);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	*ret_size = size;
}

static void add_entry(struct archive *a, const char *path, unsigned type, unsigned mode,
		      const char *data)
{
	struct archive_entry *e = archive_entry_new();
	assert_non_null(e);
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, mode);
	archive_entry_set_uid(e, getuid());
	archive_entry_set_gid(e, getgid());
	archive_entry_set_mtime(e, 1600000000, 0);
	archive_entry_set_size(e, data ? (la_int64_t)strlen(data) : 0);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	if (data)
		assert_int_equal(archive_write_data(a, data, strlen(data)), (la_ssize_t)strlen(data));
	archive_entry_free(e);
}

/* A small root filesystem: etc/, etc/hello and bin/ -> usr/bin. */
static void make_tar(struct fixture *f)
{
	int fd = openat(f->base_fd, "rootfs.tar", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	struct archive *a = archive_write_new();
	assert_non_null(a);
	assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	add_entry(a, "etc", AE_IFDIR, 0755, NULL);
	add_entry(a, "etc/hello", AE_IFREG, 0644, HELLO);
	add_entry(a, "usr", AE_IFDIR, 0755, NULL);
	add_entry(a, "usr/bin", AE_IFDIR, 0755, NULL);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "bin");
	archive_entry_set_filetype(e, AE_IFLNK);
	archive_entry_set_perm(e, 0777);
	archive_entry_set_symlink(e, "usr/bin");
	archive_entry_set_uid(e, getuid());
	archive_entry_set_gid(e, getgid());
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	archive_entry_free(e);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	assert_int_equal(close(fd), 0);
	f->tar_fd = openat(f->base_fd, "rootfs.tar", O_RDONLY | O_CLOEXEC);
	assert_true(f->tar_fd >= 0);
	digest_fd(f->tar_fd, f->tar_digest, &f->tar_size);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	strcpy(f->base, "/tmp/lz-test-ociwrite-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	f->base_fd = open(f->base, O_DIRECTORY | O_CLOEXEC);
	assert_true(f->base_fd >= 0);
	assert_int_equal(mkdirat(f->base_fd, "layout", 0755), 0);
	assert_int_equal(mkdirat(f->base_fd, "root", 0755), 0);
	f->layout_fd = openat(f->base_fd, "layout", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->layout_fd >= 0);
	make_tar(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->tar_fd);
	close(f->layout_fd);
	close(f->base_fd);
	assert_int_equal(nftw(f->base, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
	free(f);
	return 0;
}

/* Reads a whole small file beneath dirfd into a NUL-terminated buffer. */
static char *slurp(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	char *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	buf[st.st_size] = '\0';
	close(fd);
	return buf;
}

static bool exists_at(int dirfd, const char *path)
{
	struct stat st;
	return fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void write_layout(struct fixture *f, const char *tag)
{
	struct lz_err err = { 0, "" };
	int r = lz_ociwrite_single_layer(f->layout_fd, f->tar_fd, tag, CMD, ENV, &err);
	if (r < 0)
		fail_msg("lz_ociwrite_single_layer: %d %s", r, err.msg);
}

static void assert_strv(char *const *got, size_t n, const char *const *want)
{
	size_t i = 0;
	for (; want[i]; i++) {
		assert_true(i < n);
		assert_string_equal(got[i], want[i]);
	}
	assert_int_equal(n, i);
	assert_null(got[n]);
}

/* ---- the layout reads back through the verified reader ---------------------------- */

static void test_lz_ociwrite_single_layer__reads_back_verified(void **state)
{
	struct fixture *f = *state;
	write_layout(f, "latest");

	struct lz_oci_image *img = NULL;
	struct lz_err err = { 0, "" };
	int r = lz_oci_open(f->layout_fd, "latest", &img, &err);
	if (r < 0)
		fail_msg("lz_oci_open: %d %s", r, err.msg);
	assert_non_null(img);
	assert_int_equal(img->n_layers, 1);
	assert_string_equal(img->layers[0].digest, f->tar_digest);
	assert_string_equal(img->layers[0].diff_id, f->tar_digest);
	assert_int_equal(img->layers[0].size, f->tar_size);
	assert_int_equal(img->layers[0].compression, LZ_OCI_TAR);
	assert_int_equal(img->layers_bytes, f->tar_size);
	assert_strv(img->cmd, img->n_cmd, CMD);
	assert_strv(img->env, img->n_env, ENV);
	assert_int_equal(img->n_entrypoint, 0);
	assert_null(img->working_dir);
	assert_null(img->user);
	assert_memory_equal(img->manifest_digest, "sha256:", 7);
	assert_memory_equal(img->config_digest, "sha256:", 7);

	/* The platform, read from the config blob itself (lz_oci_open has
	 * already refused anything but linux/amd64). */
	char path[16 + 64 + 1];
	snprintf(path, sizeof(path), "blobs/sha256/%s", img->config_digest + 7);
	char *text = slurp(f->layout_fd, path);
	json_error_t jerr;
	json_t *cfg = json_loads(text, 0, &jerr);
	assert_non_null(cfg);
	assert_string_equal(json_string_value(json_object_get(cfg, "os")), "linux");
	assert_string_equal(json_string_value(json_object_get(cfg, "architecture")), "amd64");
	json_t *diff_ids = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
	assert_int_equal(json_array_size(diff_ids), 1);
	assert_string_equal(json_string_value(json_array_get(diff_ids, 0)), f->tar_digest);
	json_decref(cfg);
	free(text);

	text = slurp(f->layout_fd, "oci-layout");
	assert_non_null(strstr(text, "\"imageLayoutVersion\":\"1.0.0\""));
	free(text);
	lz_oci_image_free(img);
}

static void test_lz_ociwrite_single_layer__only_manifest_without_tag(void **state)
{
	struct fixture *f = *state;
	write_layout(f, "v1");
	struct lz_oci_image *img = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_oci_open(f->layout_fd, NULL, &img, &err), 0);
	assert_int_equal(img->n_layers, 1);
	lz_oci_image_free(img);
	/* Another tag is not there. */
	img = NULL;
	assert_int_equal(lz_oci_open(f->layout_fd, "latest", &img, &err), -ENOENT);
	assert_null(img);
}

static void test_lz_ociwrite_single_layer__empty_cmd_and_env(void **state)
{
	struct fixture *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_ociwrite_single_layer(f->layout_fd, f->tar_fd, "latest", NULL, NULL, &err),
			 0);
	struct lz_oci_image *img = NULL;
	assert_int_equal(lz_oci_open(f->layout_fd, "latest", &img, &err), 0);
	assert_int_equal(img->n_cmd, 0);
	assert_int_equal(img->n_env, 0);
	assert_null(img->cmd[0]);
	assert_null(img->env[0]);
	lz_oci_image_free(img);
}

static void test_lz_ociwrite_single_layer__blob_is_the_tar(void **state)
{
	struct fixture *f = *state;
	write_layout(f, "latest");
	struct lz_oci_image *img = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_oci_open(f->layout_fd, "latest", &img, &err), 0);
	int fd = -1;
	int r = lz_oci_open_blob(f->layout_fd, &img->layers[0], f->layout_fd, &fd, &err);
	if (r < 0)
		fail_msg("lz_oci_open_blob: %d %s", r, err.msg);
	assert_true(fd >= 0);
	char digest[LZ_OCI_DIGEST_STR_MAX];
	uint64_t size = 0;
	digest_fd(fd, digest, &size);
	assert_string_equal(digest, f->tar_digest);
	assert_int_equal(size, f->tar_size);
	close(fd);
	/* Nothing is left under the temporary blob name. */
	assert_false(exists_at(f->layout_fd, "blobs/sha256/.incoming"));
	lz_oci_image_free(img);
}

static void test_lz_ociwrite_single_layer__layer_applies(void **state)
{
	struct fixture *f = *state;
	write_layout(f, "latest");
	struct lz_oci_image *img = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_oci_open(f->layout_fd, "latest", &img, &err), 0);
	int fd = -1;
	assert_int_equal(lz_oci_open_blob(f->layout_fd, &img->layers[0], f->layout_fd, &fd, &err), 0);
	int root = openat(f->base_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(root >= 0);
	struct lz_layer_report report;
	/* as image preparation applies it: declared compression and diff_id
	 * checked against the content */
	struct lz_layer_options opts = { .declared = &img->layers[0] };
	int r = lz_layer_apply(root, fd, &opts, &report, &err);
	if (r < 0)
		fail_msg("lz_layer_apply: %d %s", r, err.msg);
	assert_int_equal(report.entries, 5);
	assert_int_equal(report.regular_bytes, strlen(HELLO));
	assert_int_equal(report.skipped_devices, 0);

	char *text = slurp(root, "etc/hello");
	assert_string_equal(text, HELLO);
	free(text);
	struct stat st;
	assert_int_equal(fstatat(root, "etc/hello", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(st.st_mtime, 1600000000);
	char target[64];
	ssize_t n = readlinkat(root, "bin", target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, "usr/bin");
	close(root);
	close(fd);
	lz_oci_image_free(img);
}

/* ---- refusals ---------------------------------------------------------------------- */

static void test_lz_ociwrite_single_layer__existing_layout_eexist(void **state)
{
	struct fixture *f = *state;
	static const char mine[] = "{\"imageLayoutVersion\":\"1.0.0\",\"mine\":true}";
	int fd = openat(f->base_fd, "layout/oci-layout", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, mine, strlen(mine)), (ssize_t)strlen(mine));
	close(fd);

	struct lz_err err = { 0, "" };
	int r = lz_ociwrite_single_layer(f->layout_fd, f->tar_fd, "latest", CMD, ENV, &err);
	assert_int_equal(r, -EEXIST);
	assert_int_equal(err.code, EEXIST);
	assert_non_null(strstr(err.msg, "oci-layout"));
	/* The existing file is untouched and no index names the new image. */
	char *text = slurp(f->layout_fd, "oci-layout");
	assert_string_equal(text, mine);
	free(text);
	assert_false(exists_at(f->layout_fd, "index.json"));
}

static void test_lz_ociwrite_single_layer__existing_index_eexist(void **state)
{
	struct fixture *f = *state;
	write_layout(f, "latest");
	char *before = slurp(f->layout_fd, "index.json");
	assert_int_equal(unlinkat(f->base_fd, "layout/oci-layout", 0), 0);
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_ociwrite_single_layer(f->layout_fd, f->tar_fd, "other", CMD, ENV, &err),
			 -EEXIST);
	assert_non_null(strstr(err.msg, "index.json"));
	char *after = slurp(f->layout_fd, "index.json");
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void test_lz_ociwrite_single_layer__unreadable_tar_fd(void **state)
{
	struct fixture *f = *state;
	int wr = openat(f->base_fd, "rootfs.tar", O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(wr >= 0);
	struct lz_err err = { 0, "" };
	int r = lz_ociwrite_single_layer(f->layout_fd, wr, "latest", CMD, ENV, &err);
	close(wr);
	assert_int_equal(r, -EBADF);
	assert_int_equal(err.code, EBADF);
	assert_non_null(strstr(err.msg, "layer"));
	assert_false(exists_at(f->layout_fd, "oci-layout"));
	assert_false(exists_at(f->layout_fd, "index.json"));
	struct lz_oci_image *img = NULL;
	assert_true(lz_oci_open(f->layout_fd, NULL, &img, &err) < 0);
	assert_null(img);
}

static void test_lz_ociwrite_single_layer__directory_as_tar_fd(void **state)
{
	struct fixture *f = *state;
	int dir = openat(f->base_fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	struct lz_err err = { 0, "" };
	int r = lz_ociwrite_single_layer(f->layout_fd, dir, "latest", CMD, ENV, &err);
	close(dir);
	assert_int_equal(r, -EISDIR);
	assert_false(exists_at(f->layout_fd, "index.json"));
}

static void test_lz_ociwrite_single_layer__closed_tar_fd(void **state)
{
	struct fixture *f = *state;
	struct lz_err err = { 0, "" };
	/* A descriptor number that is not open in this process. */
	int r = lz_ociwrite_single_layer(f->layout_fd, 1000000, "latest", CMD, ENV, &err);
	assert_int_equal(r, -EBADF);
	assert_false(exists_at(f->layout_fd, "oci-layout"));
}

static void test_lz_ociwrite_single_layer__symlinked_blobs_refused(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(mkdirat(f->base_fd, "elsewhere", 0755), 0);
	assert_int_equal(symlinkat("../elsewhere", f->base_fd, "layout/blobs"), 0);
	struct lz_err err = { 0, "" };
	int r = lz_ociwrite_single_layer(f->layout_fd, f->tar_fd, "latest", CMD, ENV, &err);
	assert_int_equal(r, -ELOOP);
	assert_non_null(strstr(err.msg, "blobs"));
	assert_false(exists_at(f->base_fd, "elsewhere/sha256"));
	assert_false(exists_at(f->layout_fd, "oci-layout"));
}

static void test_lz_ociwrite_single_layer__layout_not_a_directory(void **state)
{
	struct fixture *f = *state;
	struct lz_err err = { 0, "" };
	int r = lz_ociwrite_single_layer(f->tar_fd, f->tar_fd, "latest", CMD, ENV, &err);
	assert_int_equal(r, -ENOTDIR);
	assert_int_equal(err.code, ENOTDIR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_lz_ociwrite_single_layer__reads_back_verified),
		T(test_lz_ociwrite_single_layer__only_manifest_without_tag),
		T(test_lz_ociwrite_single_layer__empty_cmd_and_env),
		T(test_lz_ociwrite_single_layer__blob_is_the_tar),
		T(test_lz_ociwrite_single_layer__layer_applies),
		T(test_lz_ociwrite_single_layer__existing_layout_eexist),
		T(test_lz_ociwrite_single_layer__existing_index_eexist),
		T(test_lz_ociwrite_single_layer__unreadable_tar_fd),
		T(test_lz_ociwrite_single_layer__directory_as_tar_fd),
		T(test_lz_ociwrite_single_layer__closed_tar_fd),
		T(test_lz_ociwrite_single_layer__symlinked_blobs_refused),
		T(test_lz_ociwrite_single_layer__layout_not_a_directory),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
