/* OCI image-layout reader (see oci.h for the contract and the threat).
 *
 * Order of trust: oci-layout and index.json are read (bounded) and parsed as
 * the root of the layout; every further document is read only through a
 * descriptor (media type, digest, size) taken from an already-parsed
 * document, hashed while being read into one buffer, and parsed from that
 * buffer only after the digest matched. The media type a descriptor declares
 * decides how its blob is parsed, and a document's own mediaType field (when
 * present) must agree, so an index cannot be passed off as a manifest or a
 * config. */
#include "image/oci.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/file.h"
#include "util/cleanup.h"
#include "util/sys.h"

#define OCI_LAYOUT_MAX 65536 /* the oci-layout file is one tiny object */
#define READ_CHUNK (128u * 1024u)
#define LABEL_MAX 192
#define TAG_ANNOTATION "org.opencontainers.image.ref.name"

enum kind { K_INDEX, K_MANIFEST, K_CONFIG, K_LAYER };

/* The accepted media types: OCI image spec 1.x and the Docker v2 schema2
 * equivalents skopeo may write. Anything else (foreign or non-distributable
 * layers, artifacts, schema1) is refused. */
static const struct media_type {
	const char *name;
	enum kind kind;
	enum lz_oci_compression compression;
} media_types[] = {
	{ "application/vnd.oci.image.index.v1+json", K_INDEX, LZ_OCI_TAR },
	{ "application/vnd.docker.distribution.manifest.list.v2+json", K_INDEX, LZ_OCI_TAR },
	{ "application/vnd.oci.image.manifest.v1+json", K_MANIFEST, LZ_OCI_TAR },
	{ "application/vnd.docker.distribution.manifest.v2+json", K_MANIFEST, LZ_OCI_TAR },
	{ "application/vnd.oci.image.config.v1+json", K_CONFIG, LZ_OCI_TAR },
	{ "application/vnd.docker.container.image.v1+json", K_CONFIG, LZ_OCI_TAR },
	{ "application/vnd.oci.image.layer.v1.tar", K_LAYER, LZ_OCI_TAR },
	{ "application/vnd.oci.image.layer.v1.tar+gzip", K_LAYER, LZ_OCI_GZIP },
	{ "application/vnd.oci.image.layer.v1.tar+zstd", K_LAYER, LZ_OCI_ZSTD },
	{ "application/vnd.docker.image.rootfs.diff.tar", K_LAYER, LZ_OCI_TAR },
	{ "application/vnd.docker.image.rootfs.diff.tar.gzip", K_LAYER, LZ_OCI_GZIP },
};

/* A parsed descriptor; digest is canonical, so it also names the blob path. */
struct desc {
	const struct media_type *mt;
	char digest[LZ_OCI_DIGEST_STR_MAX];
	uint8_t raw[LZ_OCI_DIGEST_LEN];
	uint64_t size;
};

static void evp_md_ctx_freep(EVP_MD_CTX **p)
{
	EVP_MD_CTX_free(*p);
	*p = NULL;
}

/* jansson's own cleanup helper (2.14+). */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- diagnostics --------------------------------------------------------- */

/* Layout text in a message: bytes outside printable ASCII become '?', so a
 * hostile tag cannot carry terminal escapes into a report. */
static const char *printable(const char *s, char *buf, size_t cap)
{
	size_t i = 0;
	for (; s[i] != '\0' && i + 1 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		buf[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
	}
	buf[i] = '\0';
	if (s[i] != '\0' && cap > 4)
		memcpy(buf + cap - 4, "...", 4);
	return buf;
}

struct strbuf {
	char s[LZ_ERR_MSG_MAX / 2];
	size_t len;
	bool full;
};

static void sb_add(struct strbuf *b, const char *text)
{
	char tmp[80];
	const char *t = printable(text, tmp, sizeof(tmp));
	size_t n = strlen(t);
	if (b->full)
		return;
	if (b->len + n + 4 >= sizeof(b->s)) {
		memcpy(b->s + b->len, "...", 4);
		b->len += 3;
		b->full = true;
		return;
	}
	memcpy(b->s + b->len, t, n + 1);
	b->len += n;
}

static void hex_digest(const uint8_t raw[LZ_OCI_DIGEST_LEN], char out[LZ_OCI_DIGEST_STR_MAX])
{
	static const char hex[] = "0123456789abcdef";
	memcpy(out, "sha256:", 7);
	for (size_t i = 0; i < LZ_OCI_DIGEST_LEN; i++) {
		out[7 + 2 * i] = hex[raw[i] >> 4];
		out[7 + 2 * i + 1] = hex[raw[i] & 0xf];
	}
	out[7 + 2 * LZ_OCI_DIGEST_LEN] = '\0';
}

/* ---- digests --------------------------------------------------------------- */

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* OCI digest grammar: algorithm-component ([+._-] algorithm-component)*. */
static bool algorithm_ok(const char *s, size_t n)
{
	bool need_alnum = true;
	for (size_t i = 0; i < n; i++) {
		if (is_lower_alnum(s[i]))
			need_alnum = false;
		else if (!need_alnum && strchr("+._-", s[i]) != NULL)
			need_alnum = true;
		else
			return false;
	}
	return n > 0 && !need_alnum;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* uppercase is not canonical for sha256 */
}

int lz_oci_digest_parse(const char *s, uint8_t out[LZ_OCI_DIGEST_LEN])
{
	if (s == NULL)
		return -EINVAL;
	const char *colon = strchr(s, ':');
	if (colon == NULL || !algorithm_ok(s, (size_t)(colon - s)))
		return -EINVAL;
	const char *enc = colon + 1;
	if ((size_t)(colon - s) != 6 || memcmp(s, "sha256", 6) != 0) {
		size_t n = strlen(enc);
		if (n == 0 || strspn(enc, "abcdefghijklmnopqrstuvwxyz"
					  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=_-") != n)
			return -EINVAL;
		return -ENOTSUP;
	}
	if (strlen(enc) != 2 * LZ_OCI_DIGEST_LEN)
		return -EINVAL;
	uint8_t tmp[LZ_OCI_DIGEST_LEN];
	for (size_t i = 0; i < LZ_OCI_DIGEST_LEN; i++) {
		int hi = hexval(enc[2 * i]), lo = hexval(enc[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		tmp[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(out, tmp, sizeof(tmp));
	return 0;
}

/* ---- files ----------------------------------------------------------------- */

static void blob_path(const char *digest, char out[sizeof("blobs/sha256/") + 64])
{
	/* digest is canonical (checked by lz_oci_digest_parse): no '/' or "..". */
	memcpy(out, "blobs/sha256/", 13);
	memcpy(out + 13, digest + 7, 64);
	out[13 + 64] = '\0';
}

/* Opens path beneath dirfd and checks it is a regular file. O_NONBLOCK keeps
 * a planted FIFO from blocking the open; it is cleared afterwards. */
static int open_regular(int dirfd, const char *path, int flags, const char *label, int *ret_fd,
			struct stat *ret_st, struct lz_err *err)
{
	/* openat2 refuses O_PATH combined with anything but these. */
	int extra = (flags & O_PATH) ? 0 : O_NOCTTY | O_NONBLOCK;
	_cleanup_close_ int fd = lz_openat2(dirfd, path, flags | extra | O_CLOEXEC | O_NOFOLLOW,
					    LZ_RESOLVE_CONFINED);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT)
			return lz_err_set(err, e, "%s is missing", label);
		if (e == ELOOP)
			return lz_err_set(err, e, "%s resolves through a symlink", label);
		return lz_err_set(err, e, "open %s: %s", label, strerror(e));
	}
	struct stat st = { 0 };
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "stat %s: %s", label, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return lz_err_set(err, EINVAL, "%s is not a regular file", label);
	if (!(flags & O_PATH)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
			return lz_err_set(err, errno, "fcntl %s: %s", label, strerror(errno));
	}
	*ret_fd = TAKE_FD(fd);
	*ret_st = st;
	return 0;
}

/* Reads fd from its offset to end of file, which must be exactly size bytes
 * away, hashing everything read. With dst (size + 1 bytes) the bytes are kept
 * there; otherwise they stream through a scratch buffer, and to copy_fd when
 * it is >= 0. */
static int read_hash(int fd, uint64_t size, char *dst, int copy_fd, const char *label,
		     uint8_t ret_digest[LZ_OCI_DIGEST_LEN], struct lz_err *err)
{
	_cleanup_(evp_md_ctx_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		return lz_err_set(err, ENOMEM, "hashing %s: cannot set up sha256", label);
	_cleanup_free_ char *scratch = NULL;
	if (dst == NULL && (scratch = malloc(READ_CHUNK)) == NULL)
		return lz_err_set(err, ENOMEM, "hashing %s: out of memory", label);

	uint64_t total = 0;
	for (;;) {
		/* total <= size here, so one more byte always fits in dst. */
		char *p = dst ? dst + total : scratch;
		size_t want = dst ? (size_t)(size + 1 - total) : READ_CHUNK;
		ssize_t n = read(fd, p, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return lz_err_set(err, errno, "read %s: %s", label, strerror(errno));
		}
		if (n == 0)
			break;
		if ((uint64_t)n > size - total)
			return lz_err_set(err, EBADMSG, "%s is longer than its declared %" PRIu64 " bytes",
					  label, size);
		if (EVP_DigestUpdate(ctx, p, (size_t)n) != 1)
			return lz_err_set(err, EIO, "hashing %s failed", label);
		if (copy_fd >= 0 && lz_write_all(copy_fd, p, (size_t)n) < 0)
			return lz_err_set(err, errno, "copy %s: %s", label, strerror(errno));
		total += (uint64_t)n;
	}
	if (total != size)
		return lz_err_set(err, EBADMSG, "%s has %" PRIu64 " bytes, its descriptor declares %" PRIu64,
				  label, total, size);
	unsigned int len = 0;
	if (EVP_DigestFinal_ex(ctx, ret_digest, &len) != 1 || len != LZ_OCI_DIGEST_LEN)
		return lz_err_set(err, EIO, "hashing %s failed", label);
	return 0;
}

/* Reads a whole JSON document of at most limit bytes and parses it as an
 * object. With d, the file is the blob d names: its size must be d->size and
 * its bytes must hash to d->digest before they are parsed. */
static int load_json(int dirfd, const char *path, const struct desc *d, size_t limit,
		     const char *label, json_t **ret, struct lz_err *err)
{
	if (d != NULL && d->size > limit)
		return lz_err_set(err, EFBIG, "%s declares %" PRIu64 " bytes, over the limit of %zu",
				  label, d->size, limit);
	_cleanup_close_ int fd = -EBADF;
	struct stat st = { 0 };
	int r = open_regular(dirfd, path, O_RDONLY, label, &fd, &st, err);
	if (r < 0)
		return r;
	if (d == NULL && (uint64_t)st.st_size > limit)
		return lz_err_set(err, EFBIG, "%s has %lld bytes, over the limit of %zu", label,
				  (long long)st.st_size, limit);
	uint64_t size = d ? d->size : (uint64_t)st.st_size;
	if ((uint64_t)st.st_size != size)
		return lz_err_set(err, EBADMSG, "%s has %lld bytes, its descriptor declares %" PRIu64,
				  label, (long long)st.st_size, size);

	_cleanup_free_ char *buf = malloc((size_t)size + 1);
	if (buf == NULL)
		return lz_err_set(err, ENOMEM, "reading %s: out of memory", label);
	uint8_t got[LZ_OCI_DIGEST_LEN];
	r = read_hash(fd, size, buf, -1, label, got, err);
	if (r < 0)
		return r;
	if (d != NULL && memcmp(got, d->raw, sizeof(got)) != 0) {
		char hex[LZ_OCI_DIGEST_STR_MAX];
		hex_digest(got, hex);
		return lz_err_set(err, EBADMSG, "%s: digest mismatch, content hashes to %s", label, hex);
	}

	json_error_t jerr;
	json_t *root = json_loadb(buf, (size_t)size, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		char tmp[100];
		return lz_err_set(err, EINVAL, "%s: malformed JSON at line %d: %s", label, jerr.line,
				  printable(jerr.text, tmp, sizeof(tmp)));
	}
	if (!json_is_object(root)) {
		json_decref(root);
		return lz_err_set(err, EINVAL, "%s: not a JSON object", label);
	}
	*ret = root;
	return 0;
}

/* ---- documents ------------------------------------------------------------- */

static const struct media_type *media_type_find(const char *name)
{
	for (size_t i = 0; i < LZ_ARRAY_SIZE(media_types); i++)
		if (strcmp(media_types[i].name, name) == 0)
			return &media_types[i];
	return NULL;
}

/* Parses descriptor obj (named label in messages); its media type must be of
 * one of the kinds in the mask (1 << kind). */
static int parse_desc(json_t *obj, unsigned kinds, const char *label, struct desc *ret,
		      struct lz_err *err)
{
	char tmp[100];
	if (!json_is_object(obj))
		return lz_err_set(err, EINVAL, "%s: descriptor is not an object", label);
	const char *mt = json_string_value(json_object_get(obj, "mediaType"));
	const char *digest = json_string_value(json_object_get(obj, "digest"));
	json_t *size = json_object_get(obj, "size");
	if (mt == NULL || digest == NULL || !json_is_integer(size))
		return lz_err_set(err, EINVAL, "%s: descriptor needs mediaType, digest and size",
				  label);

	struct desc d = { 0 };
	int r = lz_oci_digest_parse(digest, d.raw);
	if (r == -ENOTSUP)
		return lz_err_set(err, ENOTSUP, "%s: digest '%s' is not sha256", label,
				  printable(digest, tmp, sizeof(tmp)));
	if (r < 0)
		return lz_err_set(err, EINVAL, "%s: malformed digest '%s'", label,
				  printable(digest, tmp, sizeof(tmp)));
	memcpy(d.digest, digest, 7 + 2 * LZ_OCI_DIGEST_LEN + 1);

	d.mt = media_type_find(mt);
	if (d.mt == NULL || !(kinds & (1u << d.mt->kind)))
		return lz_err_set(err, ENOTSUP, "%s %s: media type '%s' is not accepted here", label,
				  d.digest, printable(mt, tmp, sizeof(tmp)));
	if (json_integer_value(size) < 0)
		return lz_err_set(err, EINVAL, "%s %s: negative size", label, d.digest);
	d.size = (uint64_t)json_integer_value(size);
	*ret = d;
	return 0;
}

/* schemaVersion 2, and a mediaType field (optional in OCI) agreeing with the
 * descriptor the document was reached through. */
static int check_header(json_t *doc, const struct desc *d, const char *label, struct lz_err *err)
{
	json_t *v = json_object_get(doc, "schemaVersion");
	if (!json_is_integer(v) || json_integer_value(v) != 2)
		return lz_err_set(err, EINVAL, "%s: schemaVersion must be 2", label);
	json_t *mt = json_object_get(doc, "mediaType");
	if (mt == NULL || d == NULL)
		return 0;
	if (!json_is_string(mt) || strcmp(json_string_value(mt), d->mt->name) != 0) {
		char tmp[100];
		return lz_err_set(err, EINVAL, "%s: mediaType '%s' contradicts its descriptor's '%s'",
				  label, printable(json_string_value(mt) ? json_string_value(mt) : "?",
						   tmp, sizeof(tmp)),
				  d->mt->name);
	}
	return 0;
}

static int check_layout_version(int dirfd, struct lz_err *err)
{
	_cleanup_json_ json_t *doc = NULL;
	int r = load_json(dirfd, "oci-layout", NULL, OCI_LAYOUT_MAX, "'oci-layout'", &doc, err);
	if (r < 0)
		return lz_err_prefix(err, r, "not an OCI image layout: ");
	const char *v = json_string_value(json_object_get(doc, "imageLayoutVersion"));
	if (v == NULL)
		return lz_err_set(err, EINVAL, "'oci-layout': imageLayoutVersion missing");
	if (strcmp(v, "1.0.0") != 0) {
		char tmp[100];
		return lz_err_set(err, ENOTSUP, "'oci-layout': imageLayoutVersion '%s' is not 1.0.0",
				  printable(v, tmp, sizeof(tmp)));
	}
	return 0;
}

/* The manifests array of an index document, bounded. */
static int manifests_of(json_t *doc, const char *label, json_t **ret, size_t *ret_n,
			struct lz_err *err)
{
	json_t *m = json_object_get(doc, "manifests");
	if (!json_is_array(m))
		return lz_err_set(err, EINVAL, "%s: manifests must be an array", label);
	size_t n = json_array_size(m);
	if (n > LZ_OCI_MANIFESTS_MAX)
		return lz_err_set(err, E2BIG, "%s lists %zu manifests, over the limit of %d", label, n,
				  LZ_OCI_MANIFESTS_MAX);
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(m, i);
		json_t *a = json_object_get(e, "annotations");
		if (!json_is_object(e) || (a != NULL && !json_is_object(a)))
			return lz_err_set(err, EINVAL, "%s: manifests[%zu] is malformed", label, i);
	}
	*ret = m;
	*ret_n = n;
	return 0;
}

static const char *tag_of(json_t *entry)
{
	return json_string_value(json_object_get(json_object_get(entry, "annotations"), TAG_ANNOTATION));
}

static void list_tags(json_t *manifests, struct strbuf *b)
{
	size_t untagged = 0, tagged = 0, i;
	json_t *e;
	json_array_foreach(manifests, i, e) {
		const char *t = tag_of(e);
		if (t == NULL) {
			untagged++;
			continue;
		}
		if (tagged++ > 0)
			sb_add(b, ", ");
		sb_add(b, "'");
		sb_add(b, t);
		sb_add(b, "'");
	}
	if (tagged == 0)
		sb_add(b, "none");
	if (untagged > 0) {
		char tmp[48];
		snprintf(tmp, sizeof(tmp), " (and %zu untagged)", untagged);
		sb_add(b, tmp);
	}
}

/* Picks the index.json entry for tag (or the only entry). */
static int select_entry(json_t *index, const char *tag, struct desc *ret, struct lz_err *err)
{
	json_t *manifests;
	size_t n;
	int r = check_header(index, NULL, "'index.json'", err);
	if (r < 0)
		return r;
	r = manifests_of(index, "'index.json'", &manifests, &n, err);
	if (r < 0)
		return r;
	if (n == 0)
		return lz_err_set(err, ENOENT, "'index.json' lists no manifests");

	json_t *chosen = NULL;
	struct strbuf tags = { .len = 0 };
	char tmp[100];
	if (tag == NULL) {
		if (n != 1) {
			list_tags(manifests, &tags);
			return lz_err_set(err, ENOTUNIQ,
					  "'index.json' lists %zu manifests and no tag was given; tags: %s",
					  n, tags.s);
		}
		chosen = json_array_get(manifests, 0);
	} else {
		size_t matches = 0, i;
		json_t *e;
		json_array_foreach(manifests, i, e) {
			const char *t = tag_of(e);
			if (t != NULL && strcmp(t, tag) == 0) {
				chosen = e;
				matches++;
			}
		}
		if (matches == 0) {
			list_tags(manifests, &tags);
			return lz_err_set(err, ENOENT, "tag '%s' not found in 'index.json'; tags: %s",
					  printable(tag, tmp, sizeof(tmp)), tags.s);
		}
		if (matches > 1)
			return lz_err_set(err, ENOTUNIQ, "tag '%s' names %zu entries in 'index.json'",
					  printable(tag, tmp, sizeof(tmp)), matches);
	}
	return parse_desc(chosen, 1u << K_INDEX | 1u << K_MANIFEST, "'index.json' entry", ret, err);
}

static bool platform_is(json_t *platform, const char *os, const char *arch)
{
	const char *o = json_string_value(json_object_get(platform, "os"));
	const char *a = json_string_value(json_object_get(platform, "architecture"));
	return o != NULL && a != NULL && strcmp(o, os) == 0 && strcmp(a, arch) == 0;
}

/* Resolves image index d to its linux/amd64 manifest. Among several
 * linux/amd64 entries, the one without a variant wins; otherwise ambiguous. */
static int resolve_index(int dirfd, const struct desc *d, struct desc *ret, struct lz_err *err)
{
	char label[LABEL_MAX], path[sizeof("blobs/sha256/") + 64];
	snprintf(label, sizeof(label), "image index %s", d->digest);
	blob_path(d->digest, path);
	_cleanup_json_ json_t *doc = NULL;
	int r = load_json(dirfd, path, d, LZ_OCI_JSON_MAX, label, &doc, err);
	if (r < 0)
		return r;
	r = check_header(doc, d, label, err);
	if (r < 0)
		return r;
	json_t *manifests, *e;
	size_t n, i;
	r = manifests_of(doc, label, &manifests, &n, err);
	if (r < 0)
		return r;

	json_t *plain = NULL, *any = NULL;
	size_t n_plain = 0, n_any = 0;
	struct strbuf seen = { .len = 0 };
	json_array_foreach(manifests, i, e) {
		json_t *p = json_object_get(e, "platform");
		if (!platform_is(p, "linux", "amd64")) {
			const char *o = json_string_value(json_object_get(p, "os"));
			const char *a = json_string_value(json_object_get(p, "architecture"));
			if (seen.len > 0)
				sb_add(&seen, ", ");
			sb_add(&seen, o ? o : "?");
			sb_add(&seen, "/");
			sb_add(&seen, a ? a : "?");
			continue;
		}
		any = e;
		n_any++;
		if (json_object_get(p, "variant") == NULL) {
			plain = e;
			n_plain++;
		}
	}
	json_t *chosen = n_plain == 1 ? plain : n_plain == 0 && n_any == 1 ? any : NULL;
	if (n_any == 0)
		return lz_err_set(err, ENOENT, "%s has no linux/amd64 manifest (platforms: %s)", label,
				  seen.len ? seen.s : "none");
	if (chosen == NULL)
		return lz_err_set(err, ENOTUNIQ, "%s has %zu linux/amd64 manifests", label, n_any);
	char elabel[LABEL_MAX + 16];
	snprintf(elabel, sizeof(elabel), "%s entry", label);
	return parse_desc(chosen, 1u << K_MANIFEST, elabel, ret, err);
}

/* ---- config ---------------------------------------------------------------- */

static void strv_free(char **v)
{
	if (v == NULL)
		return;
	for (char **p = v; *p != NULL; p++)
		free(*p);
	free(v);
}

static int dup_string(json_t *s, const char *label, const char *field, char **ret,
		      struct lz_err *err)
{
	size_t n = json_string_length(s);
	const char *v = json_string_value(s);
	if (v == NULL)
		return lz_err_set(err, EINVAL, "%s: %s must be a string", label, field);
	if (n > LZ_OCI_STR_MAX || strlen(v) != n)
		return lz_err_set(err, EINVAL, "%s: %s is too long or contains NUL", label, field);
	char *c = strdup(v);
	if (c == NULL)
		return lz_err_set(err, ENOMEM, "%s: out of memory", label);
	*ret = c;
	return 0;
}

/* config.<field>: absent or null gives an empty vector. */
static int parse_strv(json_t *config, const char *field, bool env, const char *label,
		      char ***ret, size_t *ret_n, struct lz_err *err)
{
	json_t *a = json_object_get(config, field);
	size_t n = json_is_array(a) ? json_array_size(a) : 0;
	if (a != NULL && !json_is_null(a) && !json_is_array(a))
		return lz_err_set(err, EINVAL, "%s: config.%s must be an array", label, field);
	if (n > LZ_OCI_STRV_MAX)
		return lz_err_set(err, E2BIG, "%s: config.%s has %zu entries, over the limit of %d",
				  label, field, n, LZ_OCI_STRV_MAX);
	char **v = calloc(n + 1, sizeof(*v));
	if (v == NULL)
		return lz_err_set(err, ENOMEM, "%s: out of memory", label);
	for (size_t i = 0; i < n; i++) {
		char name[48];
		snprintf(name, sizeof(name), "config.%s[%zu]", field, i);
		int r = dup_string(json_array_get(a, i), label, name, &v[i], err);
		if (r == 0 && env && (v[i][0] == '=' || strchr(v[i], '=') == NULL))
			r = lz_err_set(err, EINVAL, "%s: %s is not NAME=value", label, name);
		if (r < 0) {
			strv_free(v);
			return r;
		}
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* config.<field>: absent, null or "" give NULL. */
static int parse_opt_string(json_t *config, const char *field, const char *label, char **ret,
			    struct lz_err *err)
{
	json_t *s = json_object_get(config, field);
	if (s == NULL || json_is_null(s) || (json_is_string(s) && json_string_length(s) == 0))
		return 0;
	char name[48];
	snprintf(name, sizeof(name), "config.%s", field);
	return dup_string(s, label, name, ret, err);
}

static int parse_config(json_t *doc, const char *label, struct lz_oci_image *image,
			struct lz_err *err)
{
	const char *os = json_string_value(json_object_get(doc, "os"));
	const char *arch = json_string_value(json_object_get(doc, "architecture"));
	char t1[40], t2[40];
	if (os == NULL || arch == NULL)
		return lz_err_set(err, EINVAL, "%s: os and architecture are required", label);
	if (strcmp(os, "linux") != 0 || strcmp(arch, "amd64") != 0)
		return lz_err_set(err, ENOTSUP, "%s: platform %s/%s is not linux/amd64", label,
				  printable(os, t1, sizeof(t1)), printable(arch, t2, sizeof(t2)));

	json_t *c = json_object_get(doc, "config");
	if (c != NULL && !json_is_null(c) && !json_is_object(c))
		return lz_err_set(err, EINVAL, "%s: config must be an object", label);
	int r;
	if ((r = parse_strv(c, "Env", true, label, &image->env, &image->n_env, err)) < 0 ||
	    (r = parse_strv(c, "Entrypoint", false, label, &image->entrypoint, &image->n_entrypoint,
			    err)) < 0 ||
	    (r = parse_strv(c, "Cmd", false, label, &image->cmd, &image->n_cmd, err)) < 0 ||
	    (r = parse_opt_string(c, "WorkingDir", label, &image->working_dir, err)) < 0 ||
	    (r = parse_opt_string(c, "User", label, &image->user, err)) < 0)
		return r;

	json_t *rootfs = json_object_get(doc, "rootfs");
	const char *type = json_string_value(json_object_get(rootfs, "type"));
	json_t *diff_ids = json_object_get(rootfs, "diff_ids");
	if (type == NULL || strcmp(type, "layers") != 0 || !json_is_array(diff_ids))
		return lz_err_set(err, EINVAL, "%s: rootfs must be {type: layers, diff_ids: [...]}",
				  label);
	if (json_array_size(diff_ids) != image->n_layers)
		return lz_err_set(err, EINVAL, "%s: rootfs lists %zu diff_ids for %zu layers", label,
				  json_array_size(diff_ids), image->n_layers);
	for (size_t i = 0; i < image->n_layers; i++) {
		const char *id = json_string_value(json_array_get(diff_ids, i));
		uint8_t raw[LZ_OCI_DIGEST_LEN];
		r = lz_oci_digest_parse(id, raw);
		if (r < 0)
			return lz_err_set(err, -r, "%s: diff_ids[%zu] is not a sha256 digest", label, i);
		memcpy(image->layers[i].diff_id, id, 7 + 2 * LZ_OCI_DIGEST_LEN + 1);
	}
	return 0;
}

/* ---- manifest -------------------------------------------------------------- */

/* A layer blob must exist as a regular file of its declared size; its content
 * is verified when lz_oci_open_blob copies it. */
static int check_layer_present(int dirfd, const struct desc *d, struct lz_err *err)
{
	char label[LABEL_MAX], path[sizeof("blobs/sha256/") + 64];
	snprintf(label, sizeof(label), "layer %s", d->digest);
	blob_path(d->digest, path);
	_cleanup_close_ int fd = -EBADF;
	struct stat st = { 0 };
	int r = open_regular(dirfd, path, O_PATH, label, &fd, &st, err);
	if (r < 0)
		return r;
	if ((uint64_t)st.st_size != d->size)
		return lz_err_set(err, EBADMSG, "%s has %lld bytes, its descriptor declares %" PRIu64,
				  label, (long long)st.st_size, d->size);
	return 0;
}

static int load_manifest(int dirfd, const struct desc *d, struct lz_oci_image *image,
			 struct lz_err *err)
{
	char label[LABEL_MAX], path[sizeof("blobs/sha256/") + 64];
	snprintf(label, sizeof(label), "manifest %s", d->digest);
	blob_path(d->digest, path);
	_cleanup_json_ json_t *doc = NULL;
	int r = load_json(dirfd, path, d, LZ_OCI_JSON_MAX, label, &doc, err);
	if (r < 0)
		return r;
	if ((r = check_header(doc, d, label, err)) < 0)
		return r;

	char elabel[LABEL_MAX + 16];
	struct desc config;
	snprintf(elabel, sizeof(elabel), "%s config", label);
	if ((r = parse_desc(json_object_get(doc, "config"), 1u << K_CONFIG, elabel, &config, err)) < 0)
		return r;

	json_t *layers = json_object_get(doc, "layers");
	if (!json_is_array(layers))
		return lz_err_set(err, EINVAL, "%s: layers must be an array", label);
	size_t n = json_array_size(layers);
	if (n > LZ_OCI_LAYERS_MAX)
		return lz_err_set(err, E2BIG, "%s has %zu layers, over the limit of %d", label, n,
				  LZ_OCI_LAYERS_MAX);
	image->layers = calloc(n ? n : 1, sizeof(*image->layers));
	if (image->layers == NULL)
		return lz_err_set(err, ENOMEM, "%s: out of memory", label);
	for (size_t i = 0; i < n; i++) {
		struct desc l;
		snprintf(elabel, sizeof(elabel), "%s layers[%zu]", label, i);
		if ((r = parse_desc(json_array_get(layers, i), 1u << K_LAYER, elabel, &l, err)) < 0)
			return r;
		if (l.size > UINT64_MAX - image->layers_bytes)
			return lz_err_set(err, EOVERFLOW, "%s: layer sizes overflow", label);
		if ((r = check_layer_present(dirfd, &l, err)) < 0)
			return r;
		struct lz_oci_layer *out = &image->layers[i];
		memcpy(out->digest, l.digest, sizeof(out->digest));
		out->size = l.size;
		out->compression = l.mt->compression;
		image->layers_bytes += l.size;
		image->n_layers = i + 1;
	}

	snprintf(label, sizeof(label), "config %s", config.digest);
	blob_path(config.digest, path);
	_cleanup_json_ json_t *cdoc = NULL;
	if ((r = load_json(dirfd, path, &config, LZ_OCI_JSON_MAX, label, &cdoc, err)) < 0)
		return r;
	if ((r = parse_config(cdoc, label, image, err)) < 0)
		return r;
	memcpy(image->manifest_digest, d->digest, sizeof(image->manifest_digest));
	memcpy(image->config_digest, config.digest, sizeof(image->config_digest));
	return 0;
}

static void image_freep(struct lz_oci_image **p)
{
	lz_oci_image_free(*p);
	*p = NULL;
}

int lz_oci_open(int layout_dirfd, const char *tag_or_null, struct lz_oci_image **ret,
		struct lz_err *err)
{
	assert(ret != NULL);
	if (tag_or_null != NULL && tag_or_null[0] == '\0')
		return lz_err_set(err, EINVAL, "empty image tag");
	int r = check_layout_version(layout_dirfd, err);
	if (r < 0)
		return r;

	struct desc entry;
	{
		_cleanup_json_ json_t *index = NULL;
		r = load_json(layout_dirfd, "index.json", NULL, LZ_OCI_JSON_MAX, "'index.json'", &index,
			      err);
		if (r < 0)
			return r;
		r = select_entry(index, tag_or_null, &entry, err);
		if (r < 0)
			return r;
	}
	if (entry.mt->kind == K_INDEX) {
		struct desc m;
		r = resolve_index(layout_dirfd, &entry, &m, err);
		if (r < 0)
			return r;
		entry = m;
	}

	_cleanup_(image_freep) struct lz_oci_image *image = calloc(1, sizeof(*image));
	if (image == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	r = load_manifest(layout_dirfd, &entry, image, err);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(image);
	return 0;
}

int lz_oci_open_blob(int layout_dirfd, const struct lz_oci_layer *layer, int copy_dir_fd, int *ret_fd,
		     struct lz_err *err)
{
	assert(layer != NULL && ret_fd != NULL);
	char label[LABEL_MAX], path[sizeof("blobs/sha256/") + 64];
	uint8_t want[LZ_OCI_DIGEST_LEN];
	int r = lz_oci_digest_parse(layer->digest, want);
	if (r < 0) {
		char tmp[100];
		return lz_err_set(err, -r, "layer digest '%s' is not a canonical sha256 digest",
				  printable(layer->digest, tmp, sizeof(tmp)));
	}
	snprintf(label, sizeof(label), "layer %s", layer->digest);
	blob_path(layer->digest, path);

	_cleanup_close_ int fd = -EBADF, copy = -EBADF;
	struct stat st = { 0 };
	r = open_regular(layout_dirfd, path, O_RDONLY, label, &fd, &st, err);
	if (r < 0)
		return r;
	if ((uint64_t)st.st_size != layer->size)
		return lz_err_set(err, EBADMSG, "%s has %lld bytes, its descriptor declares %" PRIu64,
				  label, (long long)st.st_size, layer->size);
	/* Whoever can write the layout could change the blob between a hash
	 * and a second read: what is returned is the copy that was hashed. */
	if ((copy = openat(copy_dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
		return lz_err_set(err, errno, "a private copy of %s: %s", label, strerror(errno));
	uint8_t got[LZ_OCI_DIGEST_LEN];
	r = read_hash(fd, layer->size, NULL, copy, label, got, err);
	if (r < 0)
		return r;
	if (memcmp(got, want, sizeof(got)) != 0) {
		char hex[LZ_OCI_DIGEST_STR_MAX];
		hex_digest(got, hex);
		return lz_err_set(err, EBADMSG, "%s: digest mismatch, content hashes to %s", label, hex);
	}
	if (lseek(copy, 0, SEEK_SET) != 0)
		return lz_err_set(err, errno, "seek %s: %s", label, strerror(errno));
	*ret_fd = TAKE_FD(copy);
	return 0;
}

void lz_oci_image_free(struct lz_oci_image *image)
{
	if (image == NULL)
		return;
	free(image->layers);
	strv_free(image->env);
	strv_free(image->entrypoint);
	strv_free(image->cmd);
	free(image->working_dir);
	free(image->user);
	free(image);
}
