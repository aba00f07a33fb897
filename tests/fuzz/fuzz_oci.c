/* libFuzzer target for the document parsing of core/image/oci.c (an
 * untrusted OCI image layout).
 *
 * oci.h offers no parse-from-buffer entry point: lz_oci_open reads every
 * document from a layout directory, and each blob must hash to the digest
 * that names it. Rather than write files for every input, this target
 * compiles oci.c into itself (its public functions renamed fz_oci_*, so
 * they do not clash with the core's) and drives the static parsers on
 * documents parsed as load_json parses them (jansson, duplicates refused,
 * an object at the top). What needs the directory (the layout version
 * file, the digest and size checks, resolve_index and load_manifest's
 * blob reads, lz_oci_open_blob) is not reached here.
 *
 * The first input byte picks the mode, the rest is its input:
 *   0 lz_oci_digest_parse (the core's and this copy) on the text up to the
 *     first NUL: accepted exactly for "sha256:" and 64 lowercase hex
 *     digits, decoded to those bytes; -ENOTSUP exactly for another
 *     well-formed algorithm; -EINVAL otherwise; out untouched on refusal.
 *   1 index.json: a tag (first byte its length, 0 for none), then the
 *     document through select_entry: a refusal is one of the documented
 *     codes with a printable message naming it and the descriptor
 *     untouched; an accepted entry is the only entry (no tag) or the only
 *     one annotated with the tag, with a canonical sha256 digest decoding
 *     to its raw bytes, and an index or manifest media type of the accepted
 *     list.
 *   2 a manifest: check_header against a manifest descriptor, then
 *     parse_desc of its config (config media types only) and of each layer
 *     (layer media types only): the same rules for each descriptor, and
 *     never a media type of another kind (media-type confusion).
 *   3 an image config, with the number of layers from the first byte:
 *     parse_config either refuses with a documented code and a printable
 *     message, or gives NULL-terminated string vectors of their counts
 *     (within LZ_OCI_STRV_MAX entries of at most LZ_OCI_STR_MAX bytes, no
 *     NUL inside, Env entries NAME=value), working_dir and user NULL or
 *     non-empty, and a canonical diff_id per layer. Whatever it returns,
 *     lz_oci_image_free releases everything (LeakSanitizer checks).
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define lz_oci_digest_parse fz_oci_digest_parse
#define lz_oci_open fz_oci_open
#define lz_oci_open_blob fz_oci_open_blob
#define lz_oci_image_free fz_oci_image_free
#include "image/oci.c"
#undef lz_oci_digest_parse
#undef lz_oci_open
#undef lz_oci_open_blob
#undef lz_oci_image_free

/* The core's own (oci.h declared the renamed one). */
int lz_oci_digest_parse(const char *s, uint8_t out[LZ_OCI_DIGEST_LEN]);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static bool printable_msg(const struct lz_err *err)
{
	size_t n = strnlen(err->msg, sizeof(err->msg));
	if (n == 0 || n == sizeof(err->msg))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)err->msg[i] < 0x20 || (unsigned char)err->msg[i] >= 0x7f)
			return false;
	return true;
}

static bool is_lowhex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* "sha256:" and 64 lowercase hex digits, and nothing else. */
static bool canonical(const char *s)
{
	if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 2 * LZ_OCI_DIGEST_LEN)
		return false;
	for (size_t i = 7; s[i] != '\0'; i++)
		if (!is_lowhex(s[i]))
			return false;
	return true;
}

static void decode_hex(const char *hex, uint8_t out[LZ_OCI_DIGEST_LEN])
{
	for (size_t i = 0; i < LZ_OCI_DIGEST_LEN; i++) {
		char h = hex[2 * i], l = hex[2 * i + 1];
		int hi = h <= '9' ? h - '0' : h - 'a' + 10, lo = l <= '9' ? l - '0' : l - 'a' + 10;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
}

/* The OCI digest grammar for another algorithm: algorithm-component
 * ([+._-] algorithm-component)* ":" [a-zA-Z0-9=_-]+, components of
 * lowercase letters and digits. */
static bool other_algorithm(const char *s)
{
	const char *colon = strchr(s, ':');
	if (colon == NULL || colon == s)
		return false;
	if ((size_t)(colon - s) == 6 && memcmp(s, "sha256", 6) == 0)
		return false;
	bool at_start = true;
	for (const char *p = s; p < colon; p++) {
		bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
		if (alnum) {
			at_start = false;
		} else if (strchr("+._-", *p) != NULL && !at_start) {
			at_start = true;
		} else {
			return false;
		}
	}
	if (at_start)
		return false;
	const char *enc = colon + 1;
	if (*enc == '\0')
		return false;
	for (; *enc; enc++) {
		char c = *enc;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '=' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void fuzz_digest(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	check(s != NULL);
	memcpy(s, data, size);
	s[size] = '\0';
	bool ok = canonical(s), other = !ok && other_algorithm(s);
	uint8_t want[LZ_OCI_DIGEST_LEN];
	if (ok)
		decode_hex(s + 7, want);
	for (int copy = 0; copy < 2; copy++) {
		uint8_t out[LZ_OCI_DIGEST_LEN];
		memset(out, 0xa5, sizeof(out));
		int r = copy ? fz_oci_digest_parse(s, out) : lz_oci_digest_parse(s, out);
		if (ok) {
			check(r == 0 && memcmp(out, want, sizeof(out)) == 0);
		} else {
			check(r == (other ? -ENOTSUP : -EINVAL));
			for (size_t i = 0; i < sizeof(out); i++)
				check(out[i] == 0xa5);
		}
	}
	free(s);
}

/* A document as load_json would have it, or NULL. */
static json_t *doc_of(const uint8_t *data, size_t size)
{
	json_error_t jerr;
	json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
	if (root != NULL && !json_is_object(root)) {
		json_decref(root);
		return NULL;
	}
	return root;
}

/* An accepted descriptor d of obj, whose media type must be of a kind in
 * kinds. */
static void check_desc(json_t *obj, const struct desc *d, unsigned kinds)
{
	check(d->mt != NULL);
	bool listed = false;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(media_types); i++)
		listed |= d->mt == &media_types[i];
	check(listed && (kinds & (1u << d->mt->kind)) != 0);
	check(strcmp(json_string_value(json_object_get(obj, "mediaType")), d->mt->name) == 0);
	check(canonical(d->digest) && strcmp(json_string_value(json_object_get(obj, "digest")), d->digest) == 0);
	uint8_t raw[LZ_OCI_DIGEST_LEN];
	decode_hex(d->digest + 7, raw);
	check(memcmp(raw, d->raw, sizeof(raw)) == 0);
	json_t *size = json_object_get(obj, "size");
	check(json_is_integer(size) && json_integer_value(size) >= 0 &&
	      (uint64_t)json_integer_value(size) == d->size);
}

/* parse_desc of obj under kinds, checked either way; returns whether it
 * was accepted. */
static bool try_desc(json_t *obj, unsigned kinds)
{
	struct desc d, sentinel;
	memset(&d, 0x5a, sizeof(d));
	memcpy(&sentinel, &d, sizeof(d));
	struct lz_err err = { 0 };
	int r = parse_desc(obj, kinds, "fuzz", &d, &err);
	if (r < 0) {
		check((r == -EINVAL || r == -ENOTSUP) && err.code == -r && printable_msg(&err));
		check(memcmp(&d, &sentinel, sizeof(d)) == 0);
		return false;
	}
	check(r == 0);
	check_desc(obj, &d, kinds);
	return true;
}

static void fuzz_index(const uint8_t *data, size_t size)
{
	if (size == 0)
		return;
	size_t tn = data[0];
	if (tn > size - 1)
		tn = size - 1;
	char tag[256];
	memcpy(tag, data + 1, tn);
	tag[tn] = '\0';
	const char *t = tn > 0 && strlen(tag) == tn ? tag : NULL;
	json_t *doc = doc_of(data + 1 + tn, size - 1 - tn);
	if (doc == NULL)
		return;

	struct desc d, sentinel;
	memset(&d, 0x5a, sizeof(d));
	memcpy(&sentinel, &d, sizeof(d));
	struct lz_err err = { 0 };
	int r = select_entry(doc, t, &d, &err);
	if (r < 0) {
		check((r == -EINVAL || r == -ENOTSUP || r == -ENOENT || r == -ENOTUNIQ || r == -E2BIG) &&
		      err.code == -r && printable_msg(&err));
		check(memcmp(&d, &sentinel, sizeof(d)) == 0);
		json_decref(doc);
		return;
	}
	check(r == 0);
	json_t *v = json_object_get(doc, "schemaVersion");
	check(json_is_integer(v) && json_integer_value(v) == 2);
	json_t *m = json_object_get(doc, "manifests");
	check(json_is_array(m) && json_array_size(m) >= 1 && json_array_size(m) <= LZ_OCI_MANIFESTS_MAX);
	json_t *chosen = NULL;
	if (t == NULL) {
		check(json_array_size(m) == 1);
		chosen = json_array_get(m, 0);
	} else {
		size_t matches = 0, i;
		json_t *e;
		json_array_foreach(m, i, e) {
			const char *et = json_string_value(
				json_object_get(json_object_get(e, "annotations"), TAG_ANNOTATION));
			if (et != NULL && strcmp(et, t) == 0) {
				matches++;
				chosen = e;
			}
		}
		check(matches == 1);
	}
	check_desc(chosen, &d, 1u << K_INDEX | 1u << K_MANIFEST);
	json_decref(doc);
}

static void fuzz_manifest(const uint8_t *data, size_t size)
{
	json_t *doc = doc_of(data, size);
	if (doc == NULL)
		return;
	static const struct desc manifest = {
		.mt = &media_types[2], /* application/vnd.oci.image.manifest.v1+json */
		.digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000",
	};
	struct lz_err err = { 0 };
	int r = check_header(doc, &manifest, "fuzz", &err);
	if (r < 0) {
		check(r == -EINVAL && err.code == EINVAL && printable_msg(&err));
	} else {
		json_t *mt = json_object_get(doc, "mediaType");
		check(r == 0 && (mt == NULL || strcmp(json_string_value(mt), manifest.mt->name) == 0));
	}
	try_desc(json_object_get(doc, "config"), 1u << K_CONFIG);
	json_t *layers = json_object_get(doc, "layers"), *e;
	size_t i;
	json_array_foreach(layers, i, e) {
		if (i >= LZ_OCI_LAYERS_MAX)
			break;
		try_desc(e, 1u << K_LAYER);
		/* the same descriptor where only indexes or manifests go */
		try_desc(e, 1u << K_INDEX | 1u << K_MANIFEST);
	}
	json_decref(doc);
}

static void check_strv(char **v, size_t n, bool env)
{
	check(v != NULL && n <= LZ_OCI_STRV_MAX && v[n] == NULL);
	for (size_t i = 0; i < n; i++) {
		check(v[i] != NULL);
		size_t len = strlen(v[i]);
		check(len <= LZ_OCI_STR_MAX);
		if (env)
			check(v[i][0] != '=' && strchr(v[i], '=') != NULL);
	}
}

static void fuzz_config(const uint8_t *data, size_t size)
{
	if (size == 0)
		return;
	size_t n_layers = data[0] % 8;
	json_t *doc = doc_of(data + 1, size - 1);
	if (doc == NULL)
		return;
	struct lz_oci_image *image = calloc(1, sizeof(*image));
	check(image != NULL);
	image->layers = calloc(n_layers ? n_layers : 1, sizeof(*image->layers));
	check(image->layers != NULL);
	image->n_layers = n_layers;
	struct lz_err err = { 0 };
	int r = parse_config(doc, "fuzz", image, &err);
	if (r < 0) {
		check((r == -EINVAL || r == -ENOTSUP || r == -E2BIG) && err.code == -r && printable_msg(&err));
	} else {
		check(r == 0);
		check_strv(image->env, image->n_env, true);
		check_strv(image->entrypoint, image->n_entrypoint, false);
		check_strv(image->cmd, image->n_cmd, false);
		check(image->working_dir == NULL ||
		      (image->working_dir[0] != '\0' && strlen(image->working_dir) <= LZ_OCI_STR_MAX));
		check(image->user == NULL || (image->user[0] != '\0' && strlen(image->user) <= LZ_OCI_STR_MAX));
		for (size_t i = 0; i < n_layers; i++)
			check(canonical(image->layers[i].diff_id));
		const char *os = json_string_value(json_object_get(doc, "os"));
		const char *arch = json_string_value(json_object_get(doc, "architecture"));
		check(os != NULL && arch != NULL && strcmp(os, "linux") == 0 && strcmp(arch, "amd64") == 0);
	}
	fz_oci_image_free(image);
	json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 4) {
	case 0:
		fuzz_digest(data + 1, size - 1);
		break;
	case 1:
		fuzz_index(data + 1, size - 1);
		break;
	case 2:
		fuzz_manifest(data + 1, size - 1);
		break;
	default:
		fuzz_config(data + 1, size - 1);
		break;
	}
	return 0;
}
