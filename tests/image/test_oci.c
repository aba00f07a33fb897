/* OCI image-layout reader (spec 3.6 "Prepared lower"): selection by tag,
 * image-index resolution to linux/amd64, digest and size verification of
 * every blob, confinement beneath the layout directory, media types, limits.
 * Each test builds its layout on the fly in its own mkdtemp directory. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_OCI_TAR "application/vnd.oci.image.layer.v1.tar"
#define MT_OCI_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define MT_OCI_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"
#define MT_DOCKER_GZIP "application/vnd.docker.image.rootfs.diff.tar.gzip"

#define SENTINEL ((struct lz_oci_image *)(uintptr_t)0x5eed)

/* ---- layout builder -------------------------------------------------------- */

struct layout {
	char dir[64];
	int fd; /* O_PATH directory fd, as the product holds it */
};

static void digest_of(const void *data, size_t len, char out[LZ_OCI_DIGEST_STR_MAX])
{
	uint8_t md[32];
	unsigned int n = 0;
	assert_int_equal(EVP_Digest(data, len, md, &n, EVP_sha256(), NULL), 1);
	strcpy(out, "sha256:");
	for (size_t i = 0; i < 32; i++)
		sprintf(out + 7 + 2 * i, "%02x", md[i]);
}

static void write_at(int dirfd, const char *path, const void *data, size_t len)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static void write_str(int dirfd, const char *path, const char *s)
{
	write_at(dirfd, path, s, strlen(s));
}

static char *blob_rel(const char *digest)
{
	static char path[sizeof("blobs/sha256/") + 64];
	memcpy(path, "blobs/sha256/", 13);
	strncpy(path + 13, digest + 7, 64);
	path[13 + 64] = '\0';
	return path;
}

static void layout_init(struct layout *l)
{
	strcpy(l->dir, "/tmp/lz-test-oci-XXXXXX");
	assert_non_null(mkdtemp(l->dir));
	int dfd = open(l->dir, O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	assert_int_equal(mkdirat(dfd, "blobs", 0755), 0);
	assert_int_equal(mkdirat(dfd, "blobs/sha256", 0755), 0);
	write_str(dfd, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
	close(dfd);
	l->fd = open(l->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(l->fd >= 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void layout_fini(struct layout *l)
{
	close(l->fd);
	assert_int_equal(nftw(l->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* Writes data as a blob; returns its digest in out. */
static void put_blob(struct layout *l, const void *data, size_t len, char out[LZ_OCI_DIGEST_STR_MAX])
{
	digest_of(data, len, out);
	int dfd = open(l->dir, O_DIRECTORY | O_CLOEXEC);
	write_at(dfd, blob_rel(out), data, len);
	close(dfd);
}

/* Opens a plain (non-O_PATH) fd on the layout directory for edits. */
static int dir_fd(struct layout *l)
{
	int dfd = open(l->dir, O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	return dfd;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	assert_true(vasprintf(&s, fmt, ap) >= 0);
	va_end(ap);
	return s;
}

/* What one image needs; zero fields take the OCI linux/amd64 defaults. */
struct spec {
	const char *os, *arch;
	const char *manifest_mt;  /* descriptor and document mediaType */
	const char *config_mt;
	const char *layer_mt[4];  /* per layer; NULL -> tar+gzip */
	size_t n_layers;
	const char *config_body;  /* the config's "config" member, default {} */
	const char *layers_json;  /* replaces the generated layers array */
	const char *diff_ids;     /* replaces the generated diff_ids array */
	const char *marker;       /* makes otherwise equal images distinct */
};

struct built {
	char manifest[LZ_OCI_DIGEST_STR_MAX];
	size_t manifest_size;
	char config[LZ_OCI_DIGEST_STR_MAX];
	size_t config_size;
	char layer[4][LZ_OCI_DIGEST_STR_MAX];
	size_t layer_size[4];
};

static void build_image(struct layout *l, const struct spec *s, struct built *b)
{
	memset(b, 0, sizeof(*b));
	char layers[2048] = "[", diffs[1024] = "[";
	for (size_t i = 0; i < s->n_layers; i++) {
		char content[128];
		int n = snprintf(content, sizeof(content), "layer %zu of %s", i,
				 s->marker ? s->marker : "image");
		put_blob(l, content, (size_t)n, b->layer[i]);
		b->layer_size[i] = (size_t)n;
		snprintf(layers + strlen(layers), sizeof(layers) - strlen(layers),
			 "%s{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu}", i ? "," : "",
			 s->layer_mt[i] ? s->layer_mt[i] : MT_OCI_GZIP, b->layer[i], b->layer_size[i]);
		snprintf(diffs + strlen(diffs), sizeof(diffs) - strlen(diffs), "%s\"%s\"",
			 i ? "," : "", b->layer[i]);
	}
	strcat(layers, "]");
	strcat(diffs, "]");

	char *config = xasprintf(
		"{\"architecture\":\"%s\",\"os\":\"%s\",\"config\":%s,"
		"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":%s},\"comment\":\"%s\"}",
		s->arch ? s->arch : "amd64", s->os ? s->os : "linux",
		s->config_body ? s->config_body : "{}", s->diff_ids ? s->diff_ids : diffs,
		s->marker ? s->marker : "");
	put_blob(l, config, strlen(config), b->config);
	b->config_size = strlen(config);
	free(config);

	const char *mmt = s->manifest_mt ? s->manifest_mt : MT_OCI_MANIFEST;
	char *manifest = xasprintf(
		"{\"schemaVersion\":2,\"mediaType\":\"%s\",\"config\":{\"mediaType\":\"%s\","
		"\"digest\":\"%s\",\"size\":%zu},\"layers\":%s}",
		mmt, s->config_mt ? s->config_mt : MT_OCI_CONFIG, b->config, b->config_size,
		s->layers_json ? s->layers_json : layers);
	put_blob(l, manifest, strlen(manifest), b->manifest);
	b->manifest_size = strlen(manifest);
	free(manifest);
}

struct entry {
	const char *mt;
	const char *digest;
	size_t size;
	const char *tag;
	const char *os, *arch, *variant; /* platform, when os is set */
};

/* An index document; mt (when set) becomes its mediaType field. */
static char *index_doc(const char *mt, size_t n, const struct entry *e)
{
	char *out = xasprintf("{\"schemaVersion\":2,%s%s%s\"manifests\":[", mt ? "\"mediaType\":\"" : "",
			      mt ? mt : "", mt ? "\"," : "");
	for (size_t i = 0; i < n; i++) {
		char platform[160] = "", annotations[160] = "";
		if (e[i].os)
			snprintf(platform, sizeof(platform),
				 ",\"platform\":{\"os\":\"%s\",\"architecture\":\"%s\"%s%s%s}", e[i].os,
				 e[i].arch, e[i].variant ? ",\"variant\":\"" : "",
				 e[i].variant ? e[i].variant : "", e[i].variant ? "\"" : "");
		if (e[i].tag)
			snprintf(annotations, sizeof(annotations),
				 ",\"annotations\":{\"org.opencontainers.image.ref.name\":\"%s\"}",
				 e[i].tag);
		char *next = xasprintf("%s%s{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu%s%s}",
				       out, i ? "," : "", e[i].mt, e[i].digest, e[i].size, platform,
				       annotations);
		free(out);
		out = next;
	}
	char *done = xasprintf("%s]}", out);
	free(out);
	return done;
}

static void write_index(struct layout *l, size_t n, const struct entry *e)
{
	char *doc = index_doc(NULL, n, e);
	int dfd = dir_fd(l);
	write_str(dfd, "index.json", doc);
	close(dfd);
	free(doc);
}

/* One image, one index.json entry (tagged "latest" unless tag is NULL). */
static void single(struct layout *l, const struct spec *s, const char *tag, struct built *b)
{
	build_image(l, s, b);
	struct entry e = { s->manifest_mt ? s->manifest_mt : MT_OCI_MANIFEST, b->manifest,
			   b->manifest_size, tag, NULL, NULL, NULL };
	write_index(l, 1, &e);
}

static void open_ok(struct layout *l, const char *tag, struct lz_oci_image **ret)
{
	struct lz_err err = { 0 };
	int r = lz_oci_open(l->fd, tag, ret, &err);
	if (r != 0)
		fail_msg("lz_oci_open: %d %s", r, err.msg);
}

/* Refusal with code, a message containing want, and *ret untouched. */
static void open_fails(struct layout *l, const char *tag, int code, const char *want)
{
	struct lz_err err = { 0 };
	struct lz_oci_image *img = SENTINEL;
	int r = lz_oci_open(l->fd, tag, &img, &err);
	if (r != -code)
		fail_msg("lz_oci_open: want %d, got %d (%s)", -code, r, err.msg);
	assert_ptr_equal(img, SENTINEL);
	assert_int_equal(err.code, code);
	if (getenv("LZ_TEST_VERBOSE"))
		print_message("  refused: %s\n", err.msg);
	if (want && strstr(err.msg, want) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, want);
}

static void blob_fails(struct layout *l, const struct lz_oci_layer *layer, int code,
		       const char *want)
{
	struct lz_err err = { 0 };
	int fd = 12345;
	int r = lz_oci_open_blob(l->fd, layer, l->fd, &fd, &err);
	if (r != -code)
		fail_msg("lz_oci_open_blob: want %d, got %d (%s)", -code, r, err.msg);
	assert_int_equal(fd, 12345);
	if (getenv("LZ_TEST_VERBOSE"))
		print_message("  refused: %s\n", err.msg);
	if (want && strstr(err.msg, want) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, want);
}

static const struct spec plain = { .n_layers = 1 };

/* ---- lz_oci_digest_parse --------------------------------------------------- */

static void test_lz_oci_digest_parse__canonical_sha256(void **state)
{
	(void)state;
	char d[LZ_OCI_DIGEST_STR_MAX];
	uint8_t out[32], want[32];
	unsigned int n;
	digest_of("abc", 3, d);
	EVP_Digest("abc", 3, want, &n, EVP_sha256(), NULL);
	assert_int_equal(lz_oci_digest_parse(d, out), 0);
	assert_memory_equal(out, want, 32);
}

static void test_lz_oci_digest_parse__other_algorithm_unsupported(void **state)
{
	(void)state;
	uint8_t out[32];
	memset(out, 0xaa, sizeof(out));
	assert_int_equal(lz_oci_digest_parse("sha512:0123abcd", out), -ENOTSUP);
	assert_int_equal(lz_oci_digest_parse("sha256+b64u:LCa0a2j_xo_5m0U8HTBBNBNCLXBkg7-g-YpeiGJm564", out),
			 -ENOTSUP);
	assert_int_equal(out[0], 0xaa);
}

static void test_lz_oci_digest_parse__malformed(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"sha256",
		"sha256:",
		":0123",
		"SHA256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
		"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a",
		"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad0",
		"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ag",
		"sha256:../../../../etc/passwd",
		"sha-:abcd",
		"sha512:ab/cd",
	};
	uint8_t out[32];
	memset(out, 0xaa, sizeof(out));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (lz_oci_digest_parse(bad[i], out) != -EINVAL)
			fail_msg("'%s' not refused with EINVAL", bad[i]);
	assert_int_equal(lz_oci_digest_parse(NULL, out), -EINVAL);
	assert_int_equal(out[0], 0xaa);
}

/* ---- lz_oci_open: selection ------------------------------------------------ */

static void test_lz_oci_open__single_manifest_without_tag(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	struct spec s = { .n_layers = 3, .layer_mt = { MT_OCI_GZIP, MT_OCI_ZSTD, MT_OCI_TAR } };
	single(&l, &s, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	assert_string_equal(img->manifest_digest, b.manifest);
	assert_string_equal(img->config_digest, b.config);
	assert_int_equal(img->n_layers, 3);
	assert_int_equal(img->layers_bytes, b.layer_size[0] + b.layer_size[1] + b.layer_size[2]);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(img->layers[i].digest, b.layer[i]);
		assert_string_equal(img->layers[i].diff_id, b.layer[i]);
		assert_int_equal(img->layers[i].size, b.layer_size[i]);
	}
	assert_int_equal(img->layers[0].compression, LZ_OCI_GZIP);
	assert_int_equal(img->layers[1].compression, LZ_OCI_ZSTD);
	assert_int_equal(img->layers[2].compression, LZ_OCI_TAR);
	/* Absent config fields: empty vectors, NULL strings. */
	assert_non_null(img->env);
	assert_null(img->env[0]);
	assert_int_equal(img->n_env, 0);
	assert_non_null(img->cmd);
	assert_non_null(img->entrypoint);
	assert_null(img->working_dir);
	assert_null(img->user);
	lz_oci_image_free(img);
	lz_oci_image_free(NULL);
	layout_fini(&l);
}

static void test_lz_oci_open__config_fields_extracted(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	struct spec s = {
		.n_layers = 0,
		.config_body = "{\"Env\":[\"PATH=/usr/bin:/bin\",\"EMPTY=\"],"
			       "\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":null,"
			       "\"WorkingDir\":\"/srv\",\"User\":\"1000:1000\",\"Labels\":{\"a\":\"b\"}}",
	};
	single(&l, &s, "latest", &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	assert_int_equal(img->n_layers, 0);
	assert_int_equal(img->layers_bytes, 0);
	assert_int_equal(img->n_env, 2);
	assert_string_equal(img->env[0], "PATH=/usr/bin:/bin");
	assert_string_equal(img->env[1], "EMPTY=");
	assert_null(img->env[2]);
	assert_int_equal(img->n_entrypoint, 2);
	assert_string_equal(img->entrypoint[1], "-c");
	assert_int_equal(img->n_cmd, 0);
	assert_null(img->cmd[0]);
	assert_string_equal(img->working_dir, "/srv");
	assert_string_equal(img->user, "1000:1000");
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open__malformed_config_fields_refused(void **state)
{
	(void)state;
	static const char *const bodies[] = {
		"{\"Env\":[\"NOEQUALS\"]}",
		"{\"Env\":[\"=value\"]}",
		"{\"Env\":\"PATH=/bin\"}",
		"{\"Cmd\":[1]}",
		"{\"WorkingDir\":7}",
		"[]",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		struct layout l;
		struct built b;
		layout_init(&l);
		struct spec s = { .config_body = bodies[i] };
		single(&l, &s, NULL, &b);
		open_fails(&l, NULL, EINVAL, b.config);
		layout_fini(&l);
	}
}

static void test_lz_oci_open__tag_selects_manifest(void **state)
{
	(void)state;
	struct layout l;
	struct built a, b;
	layout_init(&l);
	build_image(&l, &(struct spec){ .n_layers = 1, .marker = "a" }, &a);
	build_image(&l, &(struct spec){ .n_layers = 1, .marker = "b" }, &b);
	struct entry e[] = {
		{ MT_OCI_MANIFEST, a.manifest, a.manifest_size, "alpha", NULL, NULL, NULL },
		{ MT_OCI_MANIFEST, b.manifest, b.manifest_size, "beta", NULL, NULL, NULL },
	};
	write_index(&l, 2, e);
	struct lz_oci_image *img = NULL;
	open_ok(&l, "beta", &img);
	assert_string_equal(img->manifest_digest, b.manifest);
	assert_string_equal(img->layers[0].digest, b.layer[0]);
	lz_oci_image_free(img);
	open_ok(&l, "alpha", &img);
	assert_string_equal(img->manifest_digest, a.manifest);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open__missing_tag_names_available_tags(void **state)
{
	(void)state;
	struct layout l;
	struct built a, b;
	layout_init(&l);
	build_image(&l, &(struct spec){ .marker = "a" }, &a);
	build_image(&l, &(struct spec){ .marker = "b" }, &b);
	struct entry e[] = {
		{ MT_OCI_MANIFEST, a.manifest, a.manifest_size, "alpha", NULL, NULL, NULL },
		{ MT_OCI_MANIFEST, b.manifest, b.manifest_size, "beta\\u001b[31m", NULL, NULL, NULL },
		{ MT_OCI_MANIFEST, b.manifest, b.manifest_size, NULL, NULL, NULL, NULL },
	};
	write_index(&l, 3, e);
	open_fails(&l, "gamma", ENOENT, "'alpha', 'beta?[31m' (and 1 untagged)");
	open_fails(&l, "", EINVAL, "empty");
	layout_fini(&l);
}

static void test_lz_oci_open__multiple_manifests_without_tag_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built a, b;
	layout_init(&l);
	build_image(&l, &(struct spec){ .marker = "a" }, &a);
	build_image(&l, &(struct spec){ .marker = "b" }, &b);
	struct entry e[] = {
		{ MT_OCI_MANIFEST, a.manifest, a.manifest_size, "alpha", NULL, NULL, NULL },
		{ MT_OCI_MANIFEST, b.manifest, b.manifest_size, "beta", NULL, NULL, NULL },
	};
	write_index(&l, 2, e);
	open_fails(&l, NULL, ENOTUNIQ, "tags: 'alpha', 'beta'");
	layout_fini(&l);
}

static void test_lz_oci_open__duplicate_tag_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built a, b;
	layout_init(&l);
	build_image(&l, &(struct spec){ .marker = "a" }, &a);
	build_image(&l, &(struct spec){ .marker = "b" }, &b);
	struct entry e[] = {
		{ MT_OCI_MANIFEST, a.manifest, a.manifest_size, "same", NULL, NULL, NULL },
		{ MT_OCI_MANIFEST, b.manifest, b.manifest_size, "same", NULL, NULL, NULL },
	};
	write_index(&l, 2, e);
	open_fails(&l, "same", ENOTUNIQ, "'same'");
	layout_fini(&l);
}

static void test_lz_oci_open__empty_index_refused(void **state)
{
	(void)state;
	struct layout l;
	layout_init(&l);
	write_index(&l, 0, NULL);
	open_fails(&l, NULL, ENOENT, "no manifests");
	layout_fini(&l);
}

/* ---- lz_oci_open: image indexes and platforms ----------------------------- */

/* arm64 and amd64 images behind one image index blob, tagged "multi". */
static void multi_arch(struct layout *l, const char *index_mt, const char *manifest_mt,
		       const char *const *arches, size_t n, struct built *b, const char *variant_of_1)
{
	struct entry e[4];
	for (size_t i = 0; i < n; i++) {
		char marker[32];
		snprintf(marker, sizeof(marker), "%s-%zu", arches[i], i);
		build_image(l,
			    &(struct spec){ .n_layers = 1, .marker = marker, .arch = arches[i],
					    .manifest_mt = manifest_mt },
			    &b[i]);
		e[i] = (struct entry){ manifest_mt, b[i].manifest, b[i].manifest_size, NULL, "linux",
				       arches[i], i == 1 ? variant_of_1 : NULL };
	}
	char *doc = index_doc(index_mt, n, e);
	char idx[LZ_OCI_DIGEST_STR_MAX];
	put_blob(l, doc, strlen(doc), idx);
	struct entry top = { index_mt, idx, strlen(doc), "multi", NULL, NULL, NULL };
	write_index(l, 1, &top);
	free(doc);
}

static void test_lz_oci_open__index_resolves_linux_amd64(void **state)
{
	(void)state;
	struct layout l;
	struct built b[2];
	layout_init(&l);
	multi_arch(&l, MT_OCI_INDEX, MT_OCI_MANIFEST, (const char *[]){ "arm64", "amd64" }, 2, b, NULL);
	struct lz_oci_image *img = NULL;
	open_ok(&l, "multi", &img);
	assert_string_equal(img->manifest_digest, b[1].manifest);
	assert_string_equal(img->layers[0].digest, b[1].layer[0]);
	lz_oci_image_free(img);
	open_ok(&l, NULL, &img);
	assert_string_equal(img->manifest_digest, b[1].manifest);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open__docker_manifest_list_resolves_linux_amd64(void **state)
{
	(void)state;
	struct layout l;
	struct built b[3];
	layout_init(&l);
	multi_arch(&l, MT_DOCKER_LIST, MT_DOCKER_MANIFEST,
		   (const char *[]){ "amd64", "amd64", "arm64" }, 3, b, "v3");
	struct lz_oci_image *img = NULL;
	open_ok(&l, "multi", &img);
	/* The entry without a variant wins over amd64/v3. */
	assert_string_equal(img->manifest_digest, b[0].manifest);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open__index_ambiguous_amd64_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b[2];
	layout_init(&l);
	multi_arch(&l, MT_OCI_INDEX, MT_OCI_MANIFEST, (const char *[]){ "amd64", "amd64" }, 2, b, NULL);
	open_fails(&l, "multi", ENOTUNIQ, "2 linux/amd64 manifests");
	layout_fini(&l);
}

static void test_lz_oci_open__index_without_amd64_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b[2];
	layout_init(&l);
	multi_arch(&l, MT_OCI_INDEX, MT_OCI_MANIFEST, (const char *[]){ "arm64", "riscv64" }, 2, b,
		   NULL);
	open_fails(&l, "multi", ENOENT, "no linux/amd64 manifest (platforms: linux/arm64, linux/riscv64)");
	layout_fini(&l);
}

static void test_lz_oci_open__index_media_type_field_contradicts_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	build_image(&l, &plain, &b);
	struct entry e = { MT_OCI_MANIFEST, b.manifest, b.manifest_size, NULL, "linux", "amd64", NULL };
	/* An index document whose own mediaType says "manifest". */
	char *doc = index_doc(MT_OCI_MANIFEST, 1, &e);
	char idx[LZ_OCI_DIGEST_STR_MAX];
	put_blob(&l, doc, strlen(doc), idx);
	struct entry top = { MT_OCI_INDEX, idx, strlen(doc), NULL, NULL, NULL, NULL };
	write_index(&l, 1, &top);
	free(doc);
	open_fails(&l, NULL, EINVAL, "contradicts");
	layout_fini(&l);
}

static void test_lz_oci_open__config_os_windows_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &(struct spec){ .os = "windows" }, NULL, &b);
	open_fails(&l, NULL, ENOTSUP, "platform windows/amd64 is not linux/amd64");
	layout_fini(&l);

	layout_init(&l);
	single(&l, &(struct spec){ .arch = "arm64" }, NULL, &b);
	open_fails(&l, NULL, ENOTSUP, b.config);
	layout_fini(&l);
}

/* ---- lz_oci_open: verification -------------------------------------------- */

/* Replaces a blob's bytes with same-length different bytes. */
static void corrupt_blob(struct layout *l, const char *digest, size_t size, long delta)
{
	char *junk = calloc(1, size + 1);
	memset(junk, ' ', size);
	int dfd = dir_fd(l);
	write_at(dfd, blob_rel(digest), junk, (size_t)((long)size + delta));
	close(dfd);
	free(junk);
}

static void test_lz_oci_open__manifest_digest_mismatch(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	corrupt_blob(&l, b.manifest, b.manifest_size, 0);
	open_fails(&l, NULL, EBADMSG, b.manifest);
	layout_fini(&l);
}

static void test_lz_oci_open__manifest_size_mismatch(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	build_image(&l, &plain, &b);
	struct entry e = { MT_OCI_MANIFEST, b.manifest, b.manifest_size + 1, NULL, NULL, NULL, NULL };
	write_index(&l, 1, &e);
	open_fails(&l, NULL, EBADMSG, b.manifest);
	layout_fini(&l);
}

static void test_lz_oci_open__config_digest_mismatch(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	corrupt_blob(&l, b.config, b.config_size, 0);
	open_fails(&l, NULL, EBADMSG, b.config);
	layout_fini(&l);
}

static void test_lz_oci_open__index_blob_digest_mismatch(void **state)
{
	(void)state;
	struct layout l;
	struct built b[2];
	layout_init(&l);
	multi_arch(&l, MT_OCI_INDEX, MT_OCI_MANIFEST, (const char *[]){ "arm64", "amd64" }, 2, b, NULL);
	/* Corrupt the image index blob that index.json points to. */
	int dfd = dir_fd(&l);
	char buf[4096];
	int fd = openat(dfd, "index.json", O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n] = '\0';
	char *d = strstr(buf, "sha256:") + 7;
	char idx[LZ_OCI_DIGEST_STR_MAX] = "sha256:";
	memcpy(idx + 7, d, 64);
	idx[71] = '\0';
	close(dfd);
	struct stat st;
	assert_int_equal(fstatat(l.fd, blob_rel(idx), &st, 0), 0);
	corrupt_blob(&l, idx, (size_t)st.st_size, 0);
	open_fails(&l, NULL, EBADMSG, idx);
	layout_fini(&l);
}

static void test_lz_oci_open__missing_manifest_blob_names_digest(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	assert_int_equal(unlinkat(l.fd, blob_rel(b.manifest), 0), 0);
	open_fails(&l, NULL, ENOENT, b.manifest);
	layout_fini(&l);
}

static void test_lz_oci_open__missing_config_blob_names_digest(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	assert_int_equal(unlinkat(l.fd, blob_rel(b.config), 0), 0);
	open_fails(&l, NULL, ENOENT, b.config);
	layout_fini(&l);
}

static void test_lz_oci_open__missing_layer_blob_names_digest(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &(struct spec){ .n_layers = 2 }, NULL, &b);
	assert_int_equal(unlinkat(l.fd, blob_rel(b.layer[1]), 0), 0);
	open_fails(&l, NULL, ENOENT, b.layer[1]);
	layout_fini(&l);
}

static void test_lz_oci_open__layer_size_mismatch(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	corrupt_blob(&l, b.layer[0], b.layer_size[0], -1);
	open_fails(&l, NULL, EBADMSG, b.layer[0]);
	layout_fini(&l);
}

/* ---- lz_oci_open: confinement ---------------------------------------------- */

static void test_lz_oci_open__blob_symlink_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	/* Same bytes, one directory up: content would verify, the path must not. */
	int dfd = dir_fd(&l);
	assert_int_equal(renameat(dfd, blob_rel(b.manifest), dfd, "elsewhere"), 0);
	assert_int_equal(symlinkat("../../elsewhere", dfd, blob_rel(b.manifest)), 0);
	close(dfd);
	open_fails(&l, NULL, ELOOP, b.manifest);
	layout_fini(&l);
}

static void test_lz_oci_open__blobs_dir_symlink_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	int dfd = dir_fd(&l);
	assert_int_equal(renameat(dfd, "blobs", dfd, "real-blobs"), 0);
	assert_int_equal(symlinkat("real-blobs", dfd, "blobs"), 0);
	close(dfd);
	open_fails(&l, NULL, ELOOP, b.manifest);
	layout_fini(&l);
}

static void test_lz_oci_open__index_json_symlink_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	int dfd = dir_fd(&l);
	assert_int_equal(renameat(dfd, "index.json", dfd, "other.json"), 0);
	assert_int_equal(symlinkat("other.json", dfd, "index.json"), 0);
	close(dfd);
	open_fails(&l, NULL, ELOOP, "index.json");
	layout_fini(&l);
}

static void test_lz_oci_open__special_file_blob_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	/* A FIFO config: the open must neither block nor accept it. */
	int dfd = dir_fd(&l);
	assert_int_equal(unlinkat(dfd, blob_rel(b.config), 0), 0);
	assert_int_equal(mkfifoat(dfd, blob_rel(b.config), 0644), 0);
	close(dfd);
	open_fails(&l, NULL, EINVAL, b.config);
	layout_fini(&l);

	/* A directory where a layer should be. */
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	dfd = dir_fd(&l);
	assert_int_equal(unlinkat(dfd, blob_rel(b.layer[0]), 0), 0);
	assert_int_equal(mkdirat(dfd, blob_rel(b.layer[0]), 0755), 0);
	close(dfd);
	open_fails(&l, NULL, EINVAL, "not a regular file");
	layout_fini(&l);
}

/* ---- lz_oci_open: grammar, media types, limits ----------------------------- */

static void test_lz_oci_open__non_sha256_digest_refused(void **state)
{
	(void)state;
	struct layout l;
	layout_init(&l);
	struct entry e = { MT_OCI_MANIFEST,
			   "sha512:cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
			   "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
			   100, NULL, NULL, NULL, NULL };
	write_index(&l, 1, &e);
	open_fails(&l, NULL, ENOTSUP, "is not sha256");
	layout_fini(&l);
}

static void test_lz_oci_open__bad_hex_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	build_image(&l, &plain, &b);
	char upper[LZ_OCI_DIGEST_STR_MAX];
	strcpy(upper, b.manifest);
	for (char *p = upper + 7; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	struct entry e = { MT_OCI_MANIFEST, upper, b.manifest_size, NULL, NULL, NULL, NULL };
	write_index(&l, 1, &e);
	open_fails(&l, NULL, EINVAL, "malformed digest");
	layout_fini(&l);

	layout_init(&l);
	struct entry t = { MT_OCI_MANIFEST, "sha256:../../index.json", 10, NULL, NULL, NULL, NULL };
	write_index(&l, 1, &t);
	open_fails(&l, NULL, EINVAL, "malformed digest");
	layout_fini(&l);
}

static void test_lz_oci_open__unknown_layer_media_type_refused(void **state)
{
	(void)state;
	static const char *const types[] = {
		"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
		"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
		"application/vnd.oci.image.config.v1+json",
		"text/plain",
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct layout l;
		struct built b;
		layout_init(&l);
		single(&l, &(struct spec){ .n_layers = 1, .layer_mt = { types[i] } }, NULL, &b);
		open_fails(&l, NULL, ENOTSUP, b.layer[0]);
		layout_fini(&l);
	}
}

static void test_lz_oci_open__wrong_kind_of_media_type_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	/* index.json pointing at a config. */
	layout_init(&l);
	build_image(&l, &plain, &b);
	struct entry e = { MT_OCI_CONFIG, b.config, b.config_size, NULL, NULL, NULL, NULL };
	write_index(&l, 1, &e);
	open_fails(&l, NULL, ENOTSUP, b.config);
	layout_fini(&l);

	/* A manifest whose config descriptor says "layer". */
	layout_init(&l);
	single(&l, &(struct spec){ .config_mt = MT_OCI_GZIP }, NULL, &b);
	open_fails(&l, NULL, ENOTSUP, "not accepted");
	layout_fini(&l);

	/* A manifest document claiming to be an index. */
	layout_init(&l);
	build_image(&l, &(struct spec){ .manifest_mt = MT_OCI_INDEX }, &b);
	struct entry m = { MT_OCI_MANIFEST, b.manifest, b.manifest_size, NULL, NULL, NULL, NULL };
	write_index(&l, 1, &m);
	open_fails(&l, NULL, EINVAL, "contradicts");
	layout_fini(&l);
}

static void test_lz_oci_open__oversized_index_json_refused(void **state)
{
	(void)state;
	struct layout l;
	layout_init(&l);
	size_t n = LZ_OCI_JSON_MAX + 1;
	char *big = malloc(n);
	memset(big, ' ', n);
	memcpy(big, "{\"schemaVersion\":2,\"manifests\":[]}", 34);
	int dfd = dir_fd(&l);
	write_at(dfd, "index.json", big, n);
	close(dfd);
	free(big);
	open_fails(&l, NULL, EFBIG, "index.json");
	layout_fini(&l);
}

static void test_lz_oci_open__oversized_manifest_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	build_image(&l, &plain, &b);
	struct entry e = { MT_OCI_MANIFEST, b.manifest, LZ_OCI_JSON_MAX + 1, NULL, NULL, NULL, NULL };
	write_index(&l, 1, &e);
	open_fails(&l, NULL, EFBIG, b.manifest);
	layout_fini(&l);
}

static void test_lz_oci_open__too_many_layers_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	char one[LZ_OCI_DIGEST_STR_MAX];
	digest_of("x", 1, one);
	size_t cap = (LZ_OCI_LAYERS_MAX + 1) * 160 + 8;
	char *layers = malloc(cap);
	strcpy(layers, "[");
	for (size_t i = 0; i <= LZ_OCI_LAYERS_MAX; i++)
		snprintf(layers + strlen(layers), cap - strlen(layers),
			 "%s{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":1}", i ? "," : "",
			 MT_OCI_TAR, one);
	strcat(layers, "]");
	single(&l, &(struct spec){ .layers_json = layers }, NULL, &b);
	free(layers);
	open_fails(&l, NULL, E2BIG, "257 layers");
	layout_fini(&l);
}

static void test_lz_oci_open__negative_size_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	build_image(&l, &plain, &b);
	char *doc = xasprintf("{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\","
			      "\"digest\":\"%s\",\"size\":-1}]}",
			      MT_OCI_MANIFEST, b.manifest);
	int dfd = dir_fd(&l);
	write_str(dfd, "index.json", doc);
	close(dfd);
	free(doc);
	open_fails(&l, NULL, EINVAL, "negative size");
	layout_fini(&l);
}

static void test_lz_oci_open__malformed_index_json_refused(void **state)
{
	(void)state;
	static const char *const docs[] = {
		"{",
		"[]",
		"{\"schemaVersion\":2,\"manifests\":[],\"manifests\":[]}",
		"{\"schemaVersion\":1,\"manifests\":[]}",
		"{\"schemaVersion\":2}",
		"{\"schemaVersion\":2,\"manifests\":[7]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"annotations\":[]}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" MT_OCI_MANIFEST "\"}]}",
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		struct layout l;
		layout_init(&l);
		int dfd = dir_fd(&l);
		write_str(dfd, "index.json", docs[i]);
		close(dfd);
		open_fails(&l, NULL, EINVAL, "index.json");
		layout_fini(&l);
	}
}

static void test_lz_oci_open__diff_ids_mismatch_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &(struct spec){ .n_layers = 1, .diff_ids = "[]" }, NULL, &b);
	open_fails(&l, NULL, EINVAL, "0 diff_ids for 1 layers");
	layout_fini(&l);

	layout_init(&l);
	single(&l, &(struct spec){ .n_layers = 1, .diff_ids = "[\"md5:abcd\"]" }, NULL, &b);
	open_fails(&l, NULL, ENOTSUP, "diff_ids[0]");
	layout_fini(&l);
}

static void test_lz_oci_open__missing_oci_layout_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	assert_int_equal(unlinkat(l.fd, "oci-layout", 0), 0);
	open_fails(&l, NULL, ENOENT, "not an OCI image layout");
	layout_fini(&l);
}

static void test_lz_oci_open__wrong_layout_version_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	int dfd = dir_fd(&l);
	write_str(dfd, "oci-layout", "{\"imageLayoutVersion\":\"2.0.0\"}");
	open_fails(&l, NULL, ENOTSUP, "2.0.0");
	write_str(dfd, "oci-layout", "{}");
	open_fails(&l, NULL, EINVAL, "imageLayoutVersion");
	close(dfd);
	layout_fini(&l);
}

static void test_lz_oci_open__missing_index_json_refused(void **state)
{
	(void)state;
	struct layout l;
	layout_init(&l);
	open_fails(&l, NULL, ENOENT, "'index.json' is missing");
	layout_fini(&l);
}

/* ---- Docker v2 schema2 ----------------------------------------------------- */

/* A real tar.gz with one file, via libarchive. */
static size_t make_targz(char *buf, size_t cap)
{
	struct archive *a = archive_write_new();
	size_t used = 0;
	assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "etc/hello");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 6);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	assert_int_equal(archive_write_data(a, "hello\n", 6), 6);
	archive_entry_free(e);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return used;
}

static void test_lz_oci_open__docker_schema2_accepted(void **state)
{
	(void)state;
	struct layout l;
	layout_init(&l);
	char tgz[8192], layer[LZ_OCI_DIGEST_STR_MAX];
	size_t n = make_targz(tgz, sizeof(tgz));
	put_blob(&l, tgz, n, layer);
	char *layers = xasprintf("[{\"mediaType\":\"%s\",\"size\":%zu,\"digest\":\"%s\"}]",
				 MT_DOCKER_GZIP, n, layer);
	char *diff = xasprintf("[\"%s\"]", layer); /* not checked here */
	struct built b;
	single(&l,
	       &(struct spec){ .manifest_mt = MT_DOCKER_MANIFEST, .config_mt = MT_DOCKER_CONFIG,
			       .layers_json = layers, .diff_ids = diff },
	       "t", &b);
	free(layers);
	free(diff);

	struct lz_oci_image *img = NULL;
	open_ok(&l, "t", &img);
	assert_int_equal(img->n_layers, 1);
	assert_int_equal(img->layers[0].compression, LZ_OCI_GZIP);
	assert_string_equal(img->layers[0].digest, layer);

	struct lz_err err = { 0 };
	int fd = -1;
	assert_int_equal(lz_oci_open_blob(l.fd, &img->layers[0], l.fd, &fd, &err), 0);
	struct archive *a = archive_read_new();
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_fd(a, fd, 4096), ARCHIVE_OK);
	struct archive_entry *e;
	assert_int_equal(archive_read_next_header(a, &e), ARCHIVE_OK);
	assert_string_equal(archive_entry_pathname(e), "etc/hello");
	archive_read_free(a);
	close(fd);
	lz_oci_image_free(img);
	layout_fini(&l);
}

/* ---- lz_oci_open_blob ------------------------------------------------------ */

/* fd reads size bytes (a small blob) whose digest is digest. */
static void assert_reads_blob(int fd, size_t size, const char *digest)
{
	char buf[256], d[LZ_OCI_DIGEST_STR_MAX];
	ssize_t n = read(fd, buf, sizeof(buf));
	assert_int_equal(n, (ssize_t)size);
	digest_of(buf, (size_t)n, d);
	assert_string_equal(d, digest);
}

static void test_lz_oci_open_blob__verified_fd_at_offset_zero(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &(struct spec){ .n_layers = 2 }, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	struct lz_err err = { 0 };
	int fd = -1;
	assert_int_equal(lz_oci_open_blob(l.fd, &img->layers[1], l.fd, &fd, &err), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK), O_RDWR); /* the private copy */
	assert_reads_blob(fd, b.layer_size[1], b.layer[1]);
	close(fd);
	lz_oci_image_free(img);
	layout_fini(&l);
}

/* Whoever can write the layout rewrites a blob in place once it was
 * hashed: what the caller reads is still what was hashed. */
static void test_lz_oci_open_blob__a_blob_rewritten_after_the_hash_is_not_read(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	struct lz_err err = { 0 };
	int fd = -1;
	assert_int_equal(lz_oci_open_blob(l.fd, &img->layers[0], l.fd, &fd, &err), 0);
	char path[sizeof("blobs/sha256/") + LZ_OCI_DIGEST_STR_MAX];
	snprintf(path, sizeof(path), "blobs/sha256/%.64s", b.layer[0] + strlen("sha256:"));
	int w = openat(l.fd, path, O_WRONLY | O_CLOEXEC);
	assert_true(w >= 0);
	char *poison = malloc(b.layer_size[0]);
	assert_non_null(poison);
	memset(poison, 'P', b.layer_size[0]);
	assert_int_equal(write(w, poison, b.layer_size[0]), (ssize_t)b.layer_size[0]);
	close(w);
	assert_reads_blob(fd, b.layer_size[0], b.layer[0]);
	free(poison);
	close(fd);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open_blob__large_layer_streams(void **state)
{
	(void)state;
	struct layout l;
	layout_init(&l);
	size_t n = 3 * 1024 * 1024 + 17; /* several read chunks */
	char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i * 7 + 3);
	struct lz_oci_layer layer = { .size = n, .compression = LZ_OCI_TAR };
	put_blob(&l, data, n, layer.digest);
	free(data);
	struct lz_err err = { 0 };
	int fd = -1;
	assert_int_equal(lz_oci_open_blob(l.fd, &layer, l.fd, &fd, &err), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
	close(fd);
	layer.size = n + 1;
	blob_fails(&l, &layer, EBADMSG, layer.digest);
	layout_fini(&l);
}

static void test_lz_oci_open_blob__layer_digest_mismatch(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	corrupt_blob(&l, b.layer[0], b.layer_size[0], 0);
	blob_fails(&l, &img->layers[0], EBADMSG, b.layer[0]);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open_blob__truncated_layer(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	int dfd = dir_fd(&l);
	int fd = openat(dfd, blob_rel(b.layer[0]), O_WRONLY);
	assert_int_equal(ftruncate(fd, (off_t)b.layer_size[0] - 3), 0);
	close(fd);
	close(dfd);
	blob_fails(&l, &img->layers[0], EBADMSG, b.layer[0]);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open_blob__missing_blob_names_digest(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	assert_int_equal(unlinkat(l.fd, blob_rel(b.layer[0]), 0), 0);
	blob_fails(&l, &img->layers[0], ENOENT, b.layer[0]);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open_blob__symlink_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	int dfd = dir_fd(&l);
	assert_int_equal(renameat(dfd, blob_rel(b.layer[0]), dfd, "outside"), 0);
	assert_int_equal(symlinkat("../../outside", dfd, blob_rel(b.layer[0])), 0);
	close(dfd);
	blob_fails(&l, &img->layers[0], ELOOP, b.layer[0]);

	/* An absolute symlink for the blobs directory itself. */
	dfd = dir_fd(&l);
	assert_int_equal(unlinkat(dfd, blob_rel(b.layer[0]), 0), 0);
	assert_int_equal(renameat(dfd, "outside", dfd, blob_rel(b.layer[0])), 0);
	assert_int_equal(renameat(dfd, "blobs", dfd, "real"), 0);
	char target[128];
	snprintf(target, sizeof(target), "%s/real", l.dir);
	assert_int_equal(symlinkat(target, dfd, "blobs"), 0);
	close(dfd);
	blob_fails(&l, &img->layers[0], ELOOP, b.layer[0]);
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open_blob__fifo_refused(void **state)
{
	(void)state;
	struct layout l;
	struct built b;
	layout_init(&l);
	single(&l, &plain, NULL, &b);
	struct lz_oci_image *img = NULL;
	open_ok(&l, NULL, &img);
	int dfd = dir_fd(&l);
	assert_int_equal(unlinkat(dfd, blob_rel(b.layer[0]), 0), 0);
	assert_int_equal(mkfifoat(dfd, blob_rel(b.layer[0]), 0644), 0);
	close(dfd);
	/* Would block forever if the open waited for a writer. */
	blob_fails(&l, &img->layers[0], EINVAL, "not a regular file");
	lz_oci_image_free(img);
	layout_fini(&l);
}

static void test_lz_oci_open_blob__malformed_layer_digest(void **state)
{
	(void)state;
	struct layout l;
	layout_init(&l);
	struct lz_oci_layer layer = { .digest = "sha256:../../../etc/passwd", .size = 1 };
	blob_fails(&l, &layer, EINVAL, "canonical");
	strcpy(layer.digest, "sha384:abcd");
	blob_fails(&l, &layer, ENOTSUP, "canonical");
	layout_fini(&l);
}

/* ---- layouts written by real tools ---------------------------------------- */

static bool have_tool(const char *name)
{
	char *cmd = xasprintf("command -v %s >/dev/null 2>&1", name);
	int r = system(cmd);
	free(cmd);
	return r == 0;
}

static void run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run(const char *fmt, ...)
{
	va_list ap;
	char *cmd = NULL;
	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) >= 0);
	va_end(ap);
	int r = system(cmd);
	if (r != 0)
		fail_msg("'%s' exited with %d", cmd, r);
	free(cmd);
}

/* Verifies every layer of img and returns how many there were. */
static size_t verify_all_layers(int dirfd, const struct lz_oci_image *img)
{
	for (size_t i = 0; i < img->n_layers; i++) {
		struct lz_err err = { 0 };
		int fd = -1;
		if (lz_oci_open_blob(dirfd, &img->layers[i], dirfd, &fd, &err) != 0)
			fail_msg("layer %zu: %s", i, err.msg);
		close(fd);
	}
	return img->n_layers;
}

static void test_lz_oci_open__umoci_layout(void **state)
{
	(void)state;
	if (!have_tool("umoci"))
		skip();
	char dir[] = "/tmp/lz-test-oci-umoci-XXXXXX";
	assert_non_null(mkdtemp(dir));
	run("cd %s && umoci init --layout img && umoci new --image img:t", dir);
	char *path = xasprintf("%s/img", dir);
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct lz_oci_image *img = NULL;
	struct lz_err err = { 0 };
	if (lz_oci_open(fd, "t", &img, &err) != 0)
		fail_msg("umoci layout: %s", err.msg);
	assert_int_equal(img->n_layers, 0);
	assert_non_null(img->env);
	lz_oci_image_free(img);

	/* A second tag with a real gzip layer. */
	run("cd %s && mkdir src && echo hi >src/f && umoci new --image img:u && "
	    "umoci insert --image img:u src/f /etc/hello >/dev/null",
	    dir);
	if (lz_oci_open(fd, "u", &img, &err) != 0)
		fail_msg("umoci layout: %s", err.msg);
	assert_int_equal(img->n_layers, 1);
	assert_int_equal(img->layers[0].compression, LZ_OCI_GZIP);
	assert_int_equal(verify_all_layers(fd, img), 1);
	lz_oci_image_free(img);
	/* Two tags now: no default. */
	assert_int_equal(lz_oci_open(fd, NULL, &img, &err), -ENOTUNIQ);
	assert_non_null(strstr(err.msg, "'t', 'u'"));
	close(fd);
	free(path);
	run("rm -rf %s", dir);
}

/* skopeo as transport: OCI copy, Docker v2s2 in an OCI layout, and a
 * docker-archive round trip, all local (no registry). */
static void test_lz_oci_open__skopeo_copied_layouts(void **state)
{
	(void)state;
	if (!have_tool("umoci") || !have_tool("skopeo"))
		skip();
	char dir[] = "/tmp/lz-test-oci-skopeo-XXXXXX";
	assert_non_null(mkdtemp(dir));
	run("cd %s && umoci init --layout src && umoci new --image src:t && mkdir f && "
	    "echo hi >f/x && umoci insert --image src:t f/x /x >/dev/null && "
	    "skopeo --insecure-policy copy -q oci:src:t oci:oci:a && "
	    "skopeo --insecure-policy copy -q --format v2s2 oci:src:t oci:v2s2:b && "
	    "skopeo --insecure-policy copy -q oci:src:t docker-archive:da.tar:x/y:z && "
	    "skopeo --insecure-policy copy -q docker-archive:da.tar oci:da:c",
	    dir);
	static const char *const cases[][2] = { { "oci", "a" }, { "v2s2", "b" }, { "da", "c" } };
	for (size_t i = 0; i < 3; i++) {
		char *path = xasprintf("%s/%s", dir, cases[i][0]);
		int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(fd >= 0);
		struct lz_oci_image *img = NULL;
		struct lz_err err = { 0 };
		if (lz_oci_open(fd, cases[i][1], &img, &err) != 0)
			fail_msg("skopeo layout %s: %s", cases[i][0], err.msg);
		assert_int_equal(verify_all_layers(fd, img), 1);
		lz_oci_image_free(img);
		close(fd);
		free(path);
	}
	run("rm -rf %s", dir);
}

/* The diff_ids real tools write are what image preparation hashes: a layer
 * umoci repacked (tar+gzip), skopeo's zstd recompression of it and its
 * Docker v2s2 copy are applied with their media type and diff_id checked
 * (lz_layer_apply, layer.h). Root only: the entries are root's. (A layer
 * `umoci insert` writes is no complete tar, without padding or end marker,
 * and libarchive refuses it; repack writes a complete one.) */
static void test_lz_oci_open__tool_written_layers_match_their_diff_ids(void **state)
{
	(void)state;
	if (geteuid() != 0 || !have_tool("umoci") || !have_tool("skopeo"))
		skip();
	char dir[] = "/tmp/lz-test-oci-diffid-XXXXXX";
	assert_non_null(mkdtemp(dir));
	run("cd %s && umoci init --layout img && umoci new --image img:base && "
	    "umoci unpack --image img:base b >/dev/null && mkdir b/rootfs/etc && "
	    "echo hi >b/rootfs/etc/hello && umoci repack --image img:t b >/dev/null && "
	    "skopeo --insecure-policy copy -q --dest-compress-format zstd oci:img:t oci:zstd:t && "
	    "skopeo --insecure-policy copy -q --format v2s2 oci:img:t oci:v2s2:t",
	    dir);
	static const struct {
		const char *layout;
		enum lz_oci_compression compression;
	} cases[] = { { "img", LZ_OCI_GZIP }, { "zstd", LZ_OCI_ZSTD }, { "v2s2", LZ_OCI_GZIP } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *path = xasprintf("%s/%s", dir, cases[i].layout);
		int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(fd >= 0);
		struct lz_oci_image *img = NULL;
		struct lz_err err = { 0 };
		if (lz_oci_open(fd, "t", &img, &err) != 0)
			fail_msg("%s: %s", cases[i].layout, err.msg);
		assert_int_equal(img->n_layers, 1);
		assert_int_equal(img->layers[0].compression, cases[i].compression);
		int blob = -1;
		if (lz_oci_open_blob(fd, &img->layers[0], fd, &blob, &err) != 0)
			fail_msg("%s: %s", cases[i].layout, err.msg);
		char *root = xasprintf("%s/root-%s", dir, cases[i].layout);
		assert_int_equal(mkdir(root, 0755), 0);
		int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(rfd >= 0);
		struct lz_layer_options opts = { .declared = &img->layers[0] };
		if (lz_layer_apply(rfd, blob, &opts, NULL, &err) != 0)
			fail_msg("%s: layer applied: %s", cases[i].layout, err.msg);
		struct stat st;
		assert_int_equal(fstatat(rfd, "etc/hello", &st, AT_SYMLINK_NOFOLLOW), 0);
		assert_int_equal(st.st_size, 3);
		close(rfd);
		close(blob);
		close(fd);
		free(root);
		free(path);
		lz_oci_image_free(img);
	}
	run("rm -rf %s", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_oci_digest_parse__canonical_sha256),
		cmocka_unit_test(test_lz_oci_digest_parse__other_algorithm_unsupported),
		cmocka_unit_test(test_lz_oci_digest_parse__malformed),
		cmocka_unit_test(test_lz_oci_open__single_manifest_without_tag),
		cmocka_unit_test(test_lz_oci_open__config_fields_extracted),
		cmocka_unit_test(test_lz_oci_open__malformed_config_fields_refused),
		cmocka_unit_test(test_lz_oci_open__tag_selects_manifest),
		cmocka_unit_test(test_lz_oci_open__missing_tag_names_available_tags),
		cmocka_unit_test(test_lz_oci_open__multiple_manifests_without_tag_refused),
		cmocka_unit_test(test_lz_oci_open__duplicate_tag_refused),
		cmocka_unit_test(test_lz_oci_open__empty_index_refused),
		cmocka_unit_test(test_lz_oci_open__index_resolves_linux_amd64),
		cmocka_unit_test(test_lz_oci_open__docker_manifest_list_resolves_linux_amd64),
		cmocka_unit_test(test_lz_oci_open__index_ambiguous_amd64_refused),
		cmocka_unit_test(test_lz_oci_open__index_without_amd64_refused),
		cmocka_unit_test(test_lz_oci_open__index_media_type_field_contradicts_refused),
		cmocka_unit_test(test_lz_oci_open__config_os_windows_refused),
		cmocka_unit_test(test_lz_oci_open__manifest_digest_mismatch),
		cmocka_unit_test(test_lz_oci_open__manifest_size_mismatch),
		cmocka_unit_test(test_lz_oci_open__config_digest_mismatch),
		cmocka_unit_test(test_lz_oci_open__index_blob_digest_mismatch),
		cmocka_unit_test(test_lz_oci_open__missing_manifest_blob_names_digest),
		cmocka_unit_test(test_lz_oci_open__missing_config_blob_names_digest),
		cmocka_unit_test(test_lz_oci_open__missing_layer_blob_names_digest),
		cmocka_unit_test(test_lz_oci_open__layer_size_mismatch),
		cmocka_unit_test(test_lz_oci_open__blob_symlink_refused),
		cmocka_unit_test(test_lz_oci_open__blobs_dir_symlink_refused),
		cmocka_unit_test(test_lz_oci_open__index_json_symlink_refused),
		cmocka_unit_test(test_lz_oci_open__special_file_blob_refused),
		cmocka_unit_test(test_lz_oci_open__non_sha256_digest_refused),
		cmocka_unit_test(test_lz_oci_open__bad_hex_refused),
		cmocka_unit_test(test_lz_oci_open__unknown_layer_media_type_refused),
		cmocka_unit_test(test_lz_oci_open__wrong_kind_of_media_type_refused),
		cmocka_unit_test(test_lz_oci_open__oversized_index_json_refused),
		cmocka_unit_test(test_lz_oci_open__oversized_manifest_refused),
		cmocka_unit_test(test_lz_oci_open__too_many_layers_refused),
		cmocka_unit_test(test_lz_oci_open__negative_size_refused),
		cmocka_unit_test(test_lz_oci_open__malformed_index_json_refused),
		cmocka_unit_test(test_lz_oci_open__diff_ids_mismatch_refused),
		cmocka_unit_test(test_lz_oci_open__missing_oci_layout_refused),
		cmocka_unit_test(test_lz_oci_open__wrong_layout_version_refused),
		cmocka_unit_test(test_lz_oci_open__missing_index_json_refused),
		cmocka_unit_test(test_lz_oci_open__docker_schema2_accepted),
		cmocka_unit_test(test_lz_oci_open_blob__verified_fd_at_offset_zero),
		cmocka_unit_test(test_lz_oci_open_blob__a_blob_rewritten_after_the_hash_is_not_read),
		cmocka_unit_test(test_lz_oci_open_blob__large_layer_streams),
		cmocka_unit_test(test_lz_oci_open_blob__layer_digest_mismatch),
		cmocka_unit_test(test_lz_oci_open_blob__truncated_layer),
		cmocka_unit_test(test_lz_oci_open_blob__missing_blob_names_digest),
		cmocka_unit_test(test_lz_oci_open_blob__symlink_refused),
		cmocka_unit_test(test_lz_oci_open_blob__fifo_refused),
		cmocka_unit_test(test_lz_oci_open_blob__malformed_layer_digest),
		cmocka_unit_test(test_lz_oci_open__umoci_layout),
		cmocka_unit_test(test_lz_oci_open__skopeo_copied_layouts),
		cmocka_unit_test(test_lz_oci_open__tool_written_layers_match_their_diff_ids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
