#include "image/ociwrite.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/domain.h"
#include "fs/file.h"
#include "util/cleanup.h"
#include "util/sys.h"

#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_LAYER "application/vnd.oci.image.layer.v1.tar"

struct blob {
	char digest[72];
	uint64_t size;
};

/* Streams from src (or the bytes buf/len when src < 0) into
 * blobs/sha256/<digest>, hashing on the way. */
static int put_blob(int blobs_fd, int src, const void *buf, size_t len, struct blob *ret,
		    struct lz_err *err)
{
	static const char tmp[] = ".incoming";
	_cleanup_close_ int out = lz_openat2_create(blobs_fd, tmp, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
						    0644, LZ_RESOLVE_OWNED);
	if (out < 0)
		return lz_err_set(err, errno, "create blob: %s", strerror(errno));
	fchmod(out, 0644);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return lz_err_set(err, ENOMEM, "sha256 init failed");
	}
	uint64_t size = 0;
	int r = 0;
	if (src < 0) {
		r = lz_write_all(out, buf, len);
		EVP_DigestUpdate(ctx, buf, len);
		size = len;
	} else {
		char chunk[1 << 16];
		ssize_t n;
		while ((n = read(src, chunk, sizeof(chunk))) != 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				r = -errno;
				break;
			}
			EVP_DigestUpdate(ctx, chunk, (size_t)n);
			if ((r = lz_write_all(out, chunk, (size_t)n)) < 0)
				break;
			size += (uint64_t)n;
		}
	}
	uint8_t md[32];
	unsigned int mdn = 0;
	bool ok = r == 0 && EVP_DigestFinal_ex(ctx, md, &mdn) == 1 && mdn == sizeof(md);
	EVP_MD_CTX_free(ctx);
	if (ok && fsync(out) < 0)
		r = -errno, ok = false;
	if (!ok) {
		(void)unlinkat(blobs_fd, tmp, 0);
		return lz_err_set(err, r ? -r : EIO, "write blob: %s", strerror(r ? -r : EIO));
	}
	char hex[65];
	lz_hex(md, sizeof(md), hex);
	if (renameat(blobs_fd, tmp, blobs_fd, hex) < 0)
		return lz_err_set(err, errno, "store blob: %s", strerror(errno));
	snprintf(ret->digest, sizeof(ret->digest), "sha256:%s", hex);
	ret->size = size;
	return 0;
}

static int put_json_blob(int blobs_fd, json_t *doc, struct blob *ret, struct lz_err *err)
{
	char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	if (text == NULL)
		return lz_err_set(err, ENOMEM, "encode JSON failed");
	int r = put_blob(blobs_fd, -1, text, strlen(text), ret, err);
	free(text);
	return r;
}

static int put_file(int dirfd, const char *name, json_t *doc, struct lz_err *err)
{
	char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	if (text == NULL)
		return lz_err_set(err, ENOMEM, "encode JSON failed");
	int r = lz_file_create(dirfd, name, text, strlen(text), 0644, LZ_RESOLVE_OWNED, err);
	free(text);
	return r;
}

static json_t *strv(const char *const *v)
{
	json_t *a = json_array();
	for (; v && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

static json_t *descriptor(const char *media_type, const struct blob *b)
{
	return json_pack("{s:s, s:s, s:I}", "mediaType", media_type, "digest", b->digest, "size",
			 (json_int_t)b->size);
}

int lz_ociwrite_single_layer(int layout_fd, int tar_fd, const char *tag,
			     const char *const *cmd, const char *const *env, struct lz_err *err)
{
	struct blob layer, config, manifest;
	int r;
	if (tar_fd < 0)
		return lz_err_set(err, EBADF, "no layer tarball");
	if (mkdirat(layout_fd, "blobs", 0755) < 0 && errno != EEXIST)
		return lz_err_set(err, errno, "create blobs: %s", strerror(errno));
	_cleanup_close_ int blobs = lz_openat2(layout_fd, "blobs", O_PATH | O_DIRECTORY | O_CLOEXEC,
					       LZ_RESOLVE_OWNED);
	if (blobs < 0 || (mkdirat(blobs, "sha256", 0755) < 0 && errno != EEXIST))
		return lz_err_set(err, errno, "create blobs/sha256: %s", strerror(errno));
	_cleanup_close_ int sha = lz_openat2(blobs, "sha256", O_PATH | O_DIRECTORY | O_CLOEXEC,
					     LZ_RESOLVE_OWNED);
	if (sha < 0)
		return lz_err_set(err, errno, "open blobs/sha256: %s", strerror(errno));

	if ((r = put_blob(sha, tar_fd, NULL, 0, &layer, err)) < 0)
		return lz_err_prefix(err, r, "layer: ");
	json_t *cfg = json_pack("{s:s, s:s, s:{s:o, s:o}, s:{s:s, s:[s]}}", "architecture", "amd64",
				"os", "linux", "config", "Env", strv(env), "Cmd", strv(cmd), "rootfs",
				"type", "layers", "diff_ids", layer.digest);
	if (cfg == NULL)
		return lz_err_set(err, ENOMEM, "build config JSON failed");
	r = put_json_blob(sha, cfg, &config, err);
	json_decref(cfg);
	if (r < 0)
		return r;
	json_t *man = json_pack("{s:i, s:s, s:o, s:[o]}", "schemaVersion", 2, "mediaType",
				MT_MANIFEST, "config", descriptor(MT_CONFIG, &config), "layers",
				descriptor(MT_LAYER, &layer));
	if (man == NULL)
		return lz_err_set(err, ENOMEM, "build manifest JSON failed");
	r = put_json_blob(sha, man, &manifest, err);
	json_decref(man);
	if (r < 0)
		return r;
	json_t *entry = descriptor(MT_MANIFEST, &manifest);
	json_object_set_new(entry, "annotations",
			    json_pack("{s:s}", "org.opencontainers.image.ref.name", tag));
	json_t *index = json_pack("{s:i, s:[o]}", "schemaVersion", 2, "manifests", entry);
	json_t *layout = json_pack("{s:s}", "imageLayoutVersion", "1.0.0");
	r = index && layout ? put_file(layout_fd, "oci-layout", layout, err) : -ENOMEM;
	if (r >= 0)
		r = put_file(layout_fd, "index.json", index, err);
	json_decref(index);
	json_decref(layout);
	if (r == -ENOMEM)
		return lz_err_set(err, ENOMEM, "build index JSON failed");
	return r;
}
