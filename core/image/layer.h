/* OCI layer application (spec 3.6 "Prepared lower"; C-REFINEMENT "supported
 * OCI-aware preparer").
 *
 * Applies one verified layer blob (tar, tar+gzip or tar+zstd; libarchive
 * detects the filter, only the tar family of formats is accepted) to a
 * staging root held as an O_PATH|O_DIRECTORY descriptor, following the OCI
 * image-spec changeset rules: whiteouts (.wh.<name>), opaque directories
 * (.wh..wh..opq), hard links, numeric ownership, modes including
 * setuid/setgid/sticky, mtimes, user.* and security.capability xattrs.
 *
 * Invariants:
 * - Every entry path (and hard-link target) is validated before anything is
 *   written: relative, no ".." component, not empty, at most LZ_LAYER_PATH_MAX
 *   bytes, components at most 255 bytes, no component beginning with ".wh."
 *   other than the last. A leading "./" is stripped; "." and empty components
 *   are dropped.
 * - Every write is descriptor-relative: the parent directory is opened from
 *   the root with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), the final component is acted on
 *   with *at calls that never follow it. A symlink planted by an earlier
 *   entry or layer is therefore never followed: `a -> /etc` then `a/passwd`
 *   is refused.
 * - Directory modes and mtimes are applied at the end of the layer (deepest
 *   first), so a read-only directory does not block its own content and its
 *   mtime is not disturbed by it.
 * - Any refusal or failure fails the whole layer; the staging tree is then in
 *   an unspecified (but confined) state and the caller discards it.
 * - With a declared layer (lz_layer_options.declared), the compression
 *   libarchive finds must be the one its media type names (one gzip or zstd
 *   filter, or none), and the whole decompressed stream, up to its end and
 *   not only up to the tar end-of-archive marker, must hash to its diff_id
 *   (the image config's rootfs.diff_ids entry). The stream is hashed as the
 *   tar reader consumes it; a mismatch is found after the last entry, fails
 *   the layer, and the caller discards the tree as after any failure.
 * - At most LZ_LAYER_TAIL_MAX decompressed bytes may follow the tar
 *   end-of-archive marker (they are read, and hashed).
 * - What a layer makes is counted before it is made: each entry, and each
 *   missing parent directory an entry implies, takes an inode and a block
 *   of the options' bounds. Sparse entries (GNU sparse formats, whose holes
 *   cost blocks the content does not show) are refused: OCI and Docker
 *   tooling never write them.
 *
 * Threat: a hostile or malformed image (path traversal, symlink or hard-link
 * escapes, whiteouts aimed outside the tree, decompression bombs, entry
 * floods) writing outside the staging root or exhausting the preparer; a
 * layer whose content is not the one its config names (diff_id), or whose
 * compression is not the one its media type declares (a tool reading the
 * layer as declared would see other bytes than those applied).
 *
 * Runs in the preparation worker inside the verified user namespace, where
 * uid 0 is the invoking user and image IDs map to subordinate IDs; chown to
 * image IDs is expected to succeed there and its failure fails the layer.
 * Device nodes are never created (a user namespace may create the
 * character device 0/0, an overlay whiteout): each is recorded in the
 * report and is not fatal. The process locale must stay "C"
 * (Lazaret never calls setlocale), so libarchive hands out pathnames as the
 * raw bytes stored in the archive. */
#ifndef LZ_LAYER_H
#define LZ_LAYER_H

#include <stdint.h>

#include "image/oci.h"
#include "util/err.h"

#define LZ_LAYER_PATH_MAX 4096            /* bytes of an entry path */
#define LZ_LAYER_NAME_MAX 255             /* bytes of one path component */
#define LZ_LAYER_MAX_ENTRIES 1000000u     /* archive entries per layer */
#define LZ_LAYER_MAX_XATTRS 128           /* distinct xattrs per entry */
#define LZ_LAYER_XATTR_BLOCK 4096         /* charged once per object with xattrs */
#define LZ_LAYER_MAX_TRACKED (256u << 20) /* bytes of paths remembered per layer */
#define LZ_LAYER_PROGRESS_STEP (1u << 20) /* progress granularity, bytes */
#define LZ_LAYER_REPORT_PATHS 4           /* sample paths kept in a report */
#define LZ_LAYER_REPORT_TEXT 512          /* bytes of one sample (truncated) */
#define LZ_LAYER_TAIL_MAX (1u << 20)      /* decompressed bytes after the archive's end */

/* Whatever the options, a layer's uncompressed stream is at most
 * LZ_LAYER_MAX_EXPANSION times its blob's size, plus LZ_LAYER_EXPANSION_FLOOR:
 * no more than gzip can expand to (deflate's limit, 1032:1), since zstd has
 * none a layer needs. */
#define LZ_LAYER_MAX_EXPANSION 1032u
#define LZ_LAYER_EXPANSION_FLOOR (UINT64_C(1) << 20)

struct lz_layer_options {
	/* Optional. Called with the number of layer-blob bytes consumed so far
	 * (compressed input), at most once per LZ_LAYER_PROGRESS_STEP. */
	void (*progress)(void *ctx, uint64_t bytes_done);
	void *progress_ctx;
	/* Upper bound on regular-file content written by this layer, plus
	 * entry_bytes for each of its entries and each directory they imply;
	 * 0 means no bound. Exceeding it fails the layer with -ENOSPC. */
	uint64_t max_regular_bytes;
	uint64_t entry_bytes;
	/* Upper bound on its entries and the directories they imply, below
	 * LZ_LAYER_MAX_ENTRIES; 0 means that one. Exceeding it fails the
	 * layer with -ENOSPC (-E2BIG past that one). */
	uint64_t max_entries;
	/* Upper bound on its uncompressed stream: headers, content, the data
	 * of entries that write none (a whiteout's, a hard link's), the tail;
	 * 0 means no bound but the expansion bound (below). Exceeding it fails
	 * the layer with -EFBIG: a few KiB of zstd name a TiB of zeros, each
	 * byte of which is decompressed and hashed (the diff_id) whether it is
	 * written or skipped. */
	uint64_t max_stream_bytes;
	/* What the image declares of this layer (oci.h): its compression and
	 * its diff_id are checked against the content. NULL checks neither
	 * (tar, tar+gzip and tar+zstd are all applied); image preparation
	 * always passes it. */
	const struct lz_oci_layer *declared;
};

struct lz_layer_report {
	uint64_t entries;       /* archive entries processed, whiteouts included */
	/* Directories made because an entry's parent was missing: each is
	 * counted against max_entries and charged entry_bytes, as an entry. */
	uint64_t implied_dirs;
	uint64_t whiteouts;     /* .wh.<name> and opaque markers applied */
	uint64_t regular_bytes; /* regular-file content written */
	/* xattrs applied: each name and value, and LZ_LAYER_XATTR_BLOCK for
	 * each object that got one (the block a file system keeps them in);
	 * charged against max_regular_bytes as content is. */
	uint64_t xattr_bytes;
	uint64_t input_bytes;   /* layer-blob bytes consumed (compressed) */
	uint64_t stream_bytes;  /* uncompressed stream bytes read */
	/* Device nodes mknodat refused with EPERM (user namespace). */
	uint64_t skipped_devices;
	char skipped_device_paths[LZ_LAYER_REPORT_PATHS][LZ_LAYER_REPORT_TEXT];
	/* xattrs not applied: namespace not allowed (only user.* and
	 * security.capability are), the filesystem said ENOTSUP or EPERM, or
	 * the entry is a symlink, FIFO or device. Samples read "<path> <name>". */
	uint64_t skipped_xattrs;
	char skipped_xattr_samples[LZ_LAYER_REPORT_PATHS][LZ_LAYER_REPORT_TEXT];
};

/* Applies the layer read from layer_fd (read from its current offset; not
 * closed) on top of the tree beneath root_dirfd (an O_PATH|O_DIRECTORY
 * descriptor; not closed). opts and ret_report may be NULL. Returns 0, or
 * -errno with a message naming the entry path in err: -EINVAL for a refused
 * entry or archive (unsafe path, symlink or mount crossing, unsupported
 * format or entry type, a sparse entry, corrupt data, a compression other than the declared
 * one, more than LZ_LAYER_TAIL_MAX bytes after the archive's end), -EBADMSG
 * when the decompressed stream does not hash to the declared diff_id (the
 * message names both digests), -E2BIG for too many entries or tracked
 * paths, -ENOSPC beyond max_regular_bytes (or when the file system is
 * full), -EFBIG beyond max_stream_bytes, otherwise the failing system
 * call's errno. ret_report is untouched on failure. */
int lz_layer_apply(int root_dirfd, int layer_fd, const struct lz_layer_options *opts,
		   struct lz_layer_report *ret_report, struct lz_err *err);

#endif
