/* OCI image-layout reader (spec 3.6 "Prepared lower"; C-REFINEMENT "supported
 * OCI-aware preparer").
 *
 * A base image is an OCI image layout directory: `oci-layout` with
 * imageLayoutVersion "1.0.0", `index.json`, and content-addressed blobs under
 * `blobs/sha256/<hex>`. skopeo may only copy images into such a layout;
 * reading and verifying it is ours.
 *
 * lz_oci_open selects one manifest (by the org.opencontainers.image.ref.name
 * annotation, or the only entry when no tag is given), resolves an image
 * index to its linux/amd64 manifest, and loads the manifest and config blobs
 * after checking each against its declared sha256 digest and size. Layer
 * blobs are checked for presence and size there, and hashed in full only by
 * lz_oci_open_blob, which returns a private copy of the bytes it hashed.
 *
 * Invariants:
 * - Every file is opened relative to the caller's layout directory fd with
 *   openat2(LZ_RESOLVE_CONFINED); a symlink anywhere (including `blobs` or
 *   `blobs/sha256`) is refused, and blobs must be regular files.
 * - Bytes are parsed only after their digest matched, from the same buffer
 *   that was hashed; nothing is re-opened by name after verification.
 * - Only sha256 digests in canonical form ("sha256:" + 64 lowercase hex);
 *   only the media types listed in oci.c (OCI and Docker v2 schema2 image
 *   index/manifest list, manifest, config, tar / tar+gzip / tar+zstd layers).
 * - Hard limits: JSON documents (index.json, index, manifest, config) at most
 *   LZ_OCI_JSON_MAX bytes; at most LZ_OCI_LAYERS_MAX layers; string lists in
 *   the config at most LZ_OCI_STRV_MAX entries of LZ_OCI_STR_MAX bytes.
 *
 * Threat: a tampered, truncated or substituted blob, a layout whose entries
 * are symlinks or special files pointing elsewhere, media-type confusion
 * between index, manifest and config, and documents sized to exhaust memory.
 * The layout itself must not be writable by the sandbox: a verified
 * descriptor stays valid only while nobody writes to the blob (the
 * preparation worker reads it at once).
 *
 * Errors (negative errno, message in err naming the digest or file):
 *   ENOENT    missing file or blob, tag not found, no linux/amd64 manifest
 *   ELOOP     a path component is a symlink
 *   EBADMSG   digest or size mismatch
 *   ENOTSUP   non-sha256 digest, unknown media type, wrong platform,
 *             layout version other than 1.0.0
 *   EFBIG     a document over LZ_OCI_JSON_MAX; E2BIG: too many entries
 *   ENOTUNIQ  no tag given and several manifests, or a tag/platform matches
 *             more than one entry
 *   EINVAL    malformed JSON, digest, descriptor or field; not a regular file
 *   ENOMEM, EIO and other errno values from the system */
#ifndef LZ_OCI_H
#define LZ_OCI_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_OCI_DIGEST_LEN 32
#define LZ_OCI_DIGEST_STR_MAX 72 /* "sha256:" + 64 hex + NUL */
#define LZ_OCI_JSON_MAX (4u << 20)
#define LZ_OCI_LAYERS_MAX 256
#define LZ_OCI_MANIFESTS_MAX 4096 /* entries in index.json or an image index */
#define LZ_OCI_STRV_MAX 4096
#define LZ_OCI_STR_MAX 65536

enum lz_oci_compression {
	LZ_OCI_TAR,
	LZ_OCI_GZIP,
	LZ_OCI_ZSTD,
};

/* diff_id and compression are what the config and the media type declare;
 * lz_layer_apply (layer.h) checks both against the content it applies. */
struct lz_oci_layer {
	char digest[LZ_OCI_DIGEST_STR_MAX];  /* blob digest, "sha256:<64 hex>" */
	char diff_id[LZ_OCI_DIGEST_STR_MAX]; /* digest of the uncompressed tar (config rootfs) */
	uint64_t size;                       /* declared blob size in bytes */
	enum lz_oci_compression compression;
};

/* Everything the image says that preparation and a runtime need later. All
 * memory belongs to the image and is released by lz_oci_image_free. String
 * vectors are NULL-terminated and never NULL themselves (possibly empty);
 * working_dir and user are NULL when unset or empty. */
struct lz_oci_image {
	char manifest_digest[LZ_OCI_DIGEST_STR_MAX]; /* source image identity */
	char config_digest[LZ_OCI_DIGEST_STR_MAX];
	struct lz_oci_layer *layers; /* n_layers entries, bottom layer first */
	size_t n_layers;
	uint64_t layers_bytes; /* sum of the declared layer sizes */
	char **env;            /* "NAME=value" */
	size_t n_env;
	char **entrypoint;
	size_t n_entrypoint;
	char **cmd;
	size_t n_cmd;
	char *working_dir;
	char *user;
};

/* Parses a canonical "sha256:<64 lowercase hex>" digest into out.
 * -ENOTSUP for another (well-formed) algorithm, -EINVAL otherwise. */
int lz_oci_digest_parse(const char *s, uint8_t out[LZ_OCI_DIGEST_LEN]);

/* Reads the layout beneath layout_dirfd (a directory fd, O_PATH is fine; the
 * caller keeps ownership) and returns the verified image for tag_or_null in
 * *ret (caller frees with lz_oci_image_free). *ret is untouched on failure. */
int lz_oci_open(int layout_dirfd, const char *tag_or_null, struct lz_oci_image **ret,
		struct lz_err *err);

/* Opens blobs/sha256/<hex> of layer beneath layout_dirfd read-only and
 * copies it, through sha256, into an unnamed file (O_TMPFILE) in
 * copy_dir_fd's directory, checking its size and digest. On success
 * *ret_fd is that copy (O_RDWR|O_CLOEXEC, offset 0), owned by the caller:
 * the bytes hashed, whoever writes the layout meanwhile. *ret_fd is
 * untouched on failure. */
int lz_oci_open_blob(int layout_dirfd, const struct lz_oci_layer *layer, int copy_dir_fd, int *ret_fd,
		     struct lz_err *err);

/* Accepts NULL. */
void lz_oci_image_free(struct lz_oci_image *image);

#endif
