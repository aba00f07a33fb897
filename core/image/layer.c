/* OCI layer application (see layer.h for the contract and the threat).
 *
 * This module reads the layer and materialises its entries: libarchive with
 * built-in filters and the tar formats only, the entry loop and its limits,
 * progress, one function per entry type (regular file content, directory,
 * symlink, FIFO, device, hard link) and the directory fixups. The
 * mechanisms it relies on live beside it, each behind its own header:
 * - layerpath.h: entry path validation and normalisation;
 * - layertree.h: descriptor-relative writes and removal beneath the staging
 *   root (resolution, implied directories, clearing a name);
 * - layerwhiteout.h: the same-layer created set and OCI whiteouts;
 * - layermeta.h: owners, times, xattrs and the report's samples.
 *
 * Reading. Two libarchive readers are chained: src reads the blob with the
 * gzip and zstd filters and the "raw" format, whose one entry is the
 * decompressed stream, handed out block by block; the tar reader (a) reads
 * that stream through feed(), which hashes each block on its way (the
 * diff_id, layer.h). One decompression serves the hash and the entries: a
 * first pass that only hashed would decompress every layer twice, and a
 * decompressed copy on disk would take its full size before the budget
 * has seen an entry. a has no skip callback, so what it skips it reads,
 * and hashes. The tar reader stops at the end-of-archive marker; what
 * follows in the stream is part of the diff_id, so src is then read to its
 * end, declared layer or not, at most LZ_LAYER_TAIL_MAX bytes of it (zeros
 * after the marker cost nothing to compress and nothing else bounds them). Which filters src
 * stacked, archive_filter_code(src, 0) and archive_filter_count(src),
 * checks the compression the media type declares.
 *
 * Directory fixups. Modes and mtimes of directory entries are applied after
 * the last entry, children before parents (reverse lexical order), so that a
 * 0555 directory does not block its content and content does not bump its
 * mtime. Owners are applied at once. A directory replaced later in the layer
 * is recognised by its inode and left alone. */
#include "image/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "config/domain.h"
#include "image/layermeta.h"
#include "image/layerpath.h"
#include "image/layertree.h"
#include "image/layerwhiteout.h"
#include "util/cleanup.h"

#define LAYER_READ_BLOCK (64u * 1024u)
#define SPARSE_REFUSED "sparse file (GNU sparse entries are not supported; OCI and Docker tooling do not write them)"

struct dirfix {
	char *path; /* "" for the root */
	uint64_t seq;
	uint64_t dev, ino;
	mode_t mode;
	struct timespec times[2];
};

struct layer {
	struct lz_layertree tree; /* the staging root and the caller's err */
	struct archive *a;        /* the tar reader, fed by src through feed() */
	struct archive *src;      /* the blob; its raw entry is the decompressed stream */
	EVP_MD_CTX *md;           /* sha256 of what src handed out; NULL: no diff_id */
	uint8_t diff_id[LZ_OCI_DIGEST_LEN];
	bool src_failed;          /* feed() saw src fail: the error is src's */
	bool hash_failed;
	bool stream_over;         /* more than max_stream */
	uint64_t max_stream;      /* 0: none; else the lesser of the option and the expansion bound */
	bool stream_by_ratio;     /* max_stream is the expansion bound */
	const struct lz_layer_options *opts;
	struct lz_layer_report rep;
	struct lz_layerwhiteout created; /* what this layer wrote: whiteouts spare it */
	struct dirfix *fix;
	size_t nfix, capfix;
	uint64_t tracked; /* bytes of remembered paths (created set and fixups), bounded */
	uint64_t progress_last;
	uint64_t max_entries; /* entries and implied directories, at most */
};

static void archive_read_freep(struct archive **a)
{
	if (*a != NULL)
		archive_read_free(*a);
	*a = NULL;
}

static void evp_md_ctx_freep(EVP_MD_CTX **p)
{
	EVP_MD_CTX_free(*p);
	*p = NULL;
}

static void layer_done(struct layer *L)
{
	lz_layerwhiteout_done(&L->created);
	for (size_t i = 0; i < L->nfix; i++)
		free(L->fix[i].path);
	free(L->fix);
	L->fix = NULL;
	L->nfix = L->capfix = 0;
}

/* ---- errors and progress ------------------------------------------------- */

/* libarchive reports format problems with its own codes; a refusal is
 * EINVAL, an I/O or memory failure keeps its errno. */
static int fail_archive(struct layer *L, const char *path, const char *op)
{
	if (L->hash_failed)
		return lz_err_set(L->tree.err, EIO, "layer: hashing its content failed");
	if (L->stream_over)
		return lz_err_set(L->tree.err, EFBIG,
				  L->stream_by_ratio
					  ? "layer refused: its uncompressed stream exceeds %llu bytes, more than "
					    "gzip can expand its compressed size to (a decompression bomb)"
					  : "layer refused: its uncompressed stream exceeds %llu bytes, more than the "
					    "Storage Root's file system has free (a decompression bomb, or an image "
					    "too large for the free space)",
				  (unsigned long long)L->max_stream);
	struct archive *from = L->a == NULL || L->src_failed ? L->src : L->a;
	int e = archive_errno(from);
	const char *msg = archive_error_string(from);
	if (e <= 0 || e == EILSEQ)
		e = EINVAL;
	if (path != NULL)
		return lz_err_set(L->tree.err, e, "layer entry '%s': %s: %s",
				  lz_layerpath_shown(path), op,
				  msg ? msg : "unknown libarchive error");
	return lz_err_set(L->tree.err, e, "layer: %s: %s", op,
			  msg ? msg : "unknown libarchive error");
}

static void progress(struct layer *L)
{
	la_int64_t done = archive_filter_bytes(L->src, -1);
	if (done < 0)
		return;
	L->rep.input_bytes = (uint64_t)done;
	if (L->opts && L->opts->progress &&
	    (uint64_t)done - L->progress_last >= LZ_LAYER_PROGRESS_STEP) {
		L->progress_last = (uint64_t)done;
		L->opts->progress(L->opts->progress_ctx, (uint64_t)done);
	}
}

/* ---- the decompressed stream --------------------------------------------- */

/* Counts len more bytes of the stream, and hashes them: false when the
 * stream is over its bound or the hash failed (the flags say which). */
static bool take(struct layer *L, const void *buf, size_t len)
{
	L->rep.stream_bytes += len;
	if (L->max_stream > 0 && L->rep.stream_bytes > L->max_stream) {
		L->stream_over = true;
		return false;
	}
	if (L->md != NULL && EVP_DigestUpdate(L->md, buf, len) != 1) {
		L->hash_failed = true;
		return false;
	}
	return true;
}

/* The tar reader's read callback: the next block of the decompressed
 * stream, counted and hashed. A failure of src is reported as src's
 * (fail_archive). */
static la_ssize_t feed(struct archive *a, void *ctx, const void **buf)
{
	(void)a;
	struct layer *L = ctx;
	size_t len = 0;
	la_int64_t off;
	int ar = archive_read_data_block(L->src, buf, &len, &off);
	if (ar == ARCHIVE_EOF)
		return 0;
	if (ar != ARCHIVE_OK) {
		L->src_failed = true;
		return -1;
	}
	return take(L, *buf, len) ? (la_ssize_t)len : -1;
}

static const char *compression_name(int filter)
{
	switch (filter) {
	case ARCHIVE_FILTER_NONE:
		return "uncompressed";
	case ARCHIVE_FILTER_GZIP:
		return "gzip-compressed";
	case ARCHIVE_FILTER_ZSTD:
		return "zstd-compressed";
	default:
		return "compressed otherwise";
	}
}

/* The media type names one filter or none. Filter 0 is the one nearest the
 * tar data and the count includes the "none" that reads the descriptor, so
 * a declared gzip is exactly [gzip, none]: a stream compressed twice over
 * (gzip inside zstd) is refused too. */
static int check_compression(struct layer *L, enum lz_oci_compression declared)
{
	int want = ARCHIVE_FILTER_NONE;
	switch (declared) {
	case LZ_OCI_TAR:
		break;
	case LZ_OCI_GZIP:
		want = ARCHIVE_FILTER_GZIP;
		break;
	case LZ_OCI_ZSTD:
		want = ARCHIVE_FILTER_ZSTD;
		break;
	}
	int n = archive_filter_count(L->src);
	int got = archive_filter_code(L->src, 0);
	if (n == (want == ARCHIVE_FILTER_NONE ? 1 : 2) && got == want)
		return 0;
	if (n > 2)
		return lz_err_set(L->tree.err, EINVAL,
				  "layer refused: its media type declares it %s, but its content is "
				  "compressed %d times over",
				  compression_name(want), n - 1);
	return lz_err_set(L->tree.err, EINVAL,
			  "layer refused: its media type declares it %s, but its content is %s",
			  compression_name(want), compression_name(got));
}

/* Reads src to its end, past the tar reader's end-of-archive marker: the
 * diff_id covers the whole stream, and the report counts all the input.
 * Then compares the diff_id, when there is one. */
static int finish_stream(struct layer *L)
{
	uint64_t tail = 0;
	for (;;) {
		const void *buf;
		size_t len = 0;
		la_int64_t off;
		int ar = archive_read_data_block(L->src, &buf, &len, &off);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK) {
			L->src_failed = true;
			return fail_archive(L, NULL, "reading past the end of the archive");
		}
		tail += len;
		if (tail > LZ_LAYER_TAIL_MAX)
			return lz_err_set(L->tree.err, EINVAL,
					  "layer refused: more than %u bytes follow the end of its archive",
					  LZ_LAYER_TAIL_MAX);
		if (!take(L, buf, len))
			return fail_archive(L, NULL, "reading past the end of the archive");
		progress(L);
	}
	progress(L);
	if (L->md == NULL)
		return 0;
	uint8_t got[LZ_OCI_DIGEST_LEN];
	unsigned int n = 0;
	if (EVP_DigestFinal_ex(L->md, got, &n) != 1 || n != sizeof(got)) {
		L->hash_failed = true;
		return fail_archive(L, NULL, "hashing");
	}
	if (memcmp(got, L->diff_id, sizeof(got)) == 0)
		return 0;
	char hex[2 * LZ_OCI_DIGEST_LEN + 1];
	lz_hex(got, sizeof(got), hex);
	/* declared->diff_id parsed as canonical: printable */
	return lz_err_set(L->tree.err, EBADMSG,
			  "layer refused: its uncompressed content hashes to sha256:%s, but the "
			  "image config's rootfs.diff_ids names %s",
			  hex, L->opts->declared->diff_id);
}

/* ---- entry types --------------------------------------------------------- */

static int write_all(int fd, const char *buf, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* What the layer has taken of max_regular_bytes: its content and xattrs,
 * and entry_bytes for each entry and each implied directory so far. */
static uint64_t charged(const struct layer *L)
{
	return L->rep.regular_bytes + L->rep.xattr_bytes +
	       (L->rep.entries + L->rep.implied_dirs) * (L->opts ? L->opts->entry_bytes : 0);
}

/* The entry's xattrs on fd, then the budget: what they took past it fails
 * the layer (the tree is discarded), so it overshoots by one object's
 * xattrs at most. */
static int apply_xattrs(struct layer *L, struct archive_entry *e, int fd, const char *path)
{
	int r = lz_layermeta_xattrs(e, fd, path, &L->rep, L->tree.err);
	uint64_t max = L->opts ? L->opts->max_regular_bytes : 0;
	if (r >= 0 && max > 0 && charged(L) > max)
		return lz_err_set(L->tree.err, ENOSPC, "layer entry '%s': its xattrs exceed %llu bytes with the rest",
				  lz_layerpath_shown(path), (unsigned long long)max);
	return r;
}

/* Counts one more inode in *count: an archive entry (dir NULL), or the
 * directory dir that entry implies (layertree.h), which takes an inode and
 * a block as well. Both share max_entries and are charged entry_bytes. */
static int count_inode(struct layer *L, uint64_t *count, const char *entry, const char *dir)
{
	if (L->rep.entries + L->rep.implied_dirs >= L->max_entries) {
		/* the option's bound is the file system's free inodes */
		int e = L->max_entries < LZ_LAYER_MAX_ENTRIES ? ENOSPC : E2BIG;
		if (dir == NULL)
			return lz_err_set(L->tree.err, e, "layer: more than %llu entries",
					  (unsigned long long)L->max_entries);
		return lz_err_set(L->tree.err, e,
				  "layer entry '%s': more than %llu entries with the directory '%s' it implies",
				  lz_layerpath_shown(entry), (unsigned long long)L->max_entries,
				  lz_layerpath_shown(dir));
	}
	(*count)++;
	uint64_t max = L->opts ? L->opts->max_regular_bytes : 0;
	if (max > 0 && charged(L) > max) {
		if (dir == NULL)
			return lz_err_set(L->tree.err, ENOSPC, "layer: its entries exceed %llu bytes",
					  (unsigned long long)max);
		return lz_err_set(L->tree.err, ENOSPC,
				  "layer entry '%s': its entries exceed %llu bytes with the directory '%s' it implies",
				  lz_layerpath_shown(entry), (unsigned long long)max, lz_layerpath_shown(dir));
	}
	return 0;
}

/* The staging tree's hook (layertree.h): before it makes a directory an
 * entry implies. */
static int count_implied(void *ctx, const char *entry, const char *dir)
{
	struct layer *L = ctx;
	return count_inode(L, &L->rep.implied_dirs, entry, dir);
}

static int apply_regular(struct layer *L, struct archive_entry *e, int pfd,
			 const struct lz_layerpath *p)
{
	uid_t uid = 0;
	gid_t gid = 0;
	struct timespec ts[2];
	int r = lz_layermeta_owner(e, p->full, &uid, &gid, L->tree.err);
	if (r < 0)
		return r;
	/* A sparse entry (GNU sparse in pax or old GNU) places its data at
	 * offsets of its own: a byte every 4 KiB costs a block each, far
	 * more than the bytes charged. OCI and Docker tooling never write
	 * one. */
	if (archive_entry_sparse_count(e) > 0)
		return lz_layerpath_refuse(L->tree.err, p->full, SPARSE_REFUSED);
	if ((r = lz_layertree_make_room(&L->tree, pfd, p, false, NULL)) < 0)
		return r;
	_cleanup_close_ int fd =
		openat(pfd, p->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "create", p->full);

	uint64_t end = 0;
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int ar = archive_read_data_block(L->a, &buf, &len, &off);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK)
			return fail_archive(L, p->full, "reading content");
		if (off < 0 || (uint64_t)off > INT64_MAX - len)
			return lz_layerpath_refuse(L->tree.err, p->full, "bad content offset");
		if ((uint64_t)off != end) /* a hole: sparse after all */
			return lz_layerpath_refuse(L->tree.err, p->full, SPARSE_REFUSED);
		uint64_t max = L->opts ? L->opts->max_regular_bytes : 0;
		if (max > 0 && charged(L) + len > max)
			return lz_err_set(L->tree.err, ENOSPC,
					  "layer entry '%s': layer content exceeds %llu bytes",
					  p->full, (unsigned long long)max);
		if ((r = write_all(fd, buf, len, (off_t)off)) < 0)
			return lz_layerpath_fail(L->tree.err, -r, p->full, "write", p->full);
		L->rep.regular_bytes += len;
		end += len;
		progress(L);
	}
	/* A size beyond the content (GNU.sparse.realsize without a map) is a
	 * hole at the end: sparse too. */
	la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
	if (size > 0 && (uint64_t)size > end)
		return lz_layerpath_refuse(L->tree.err, p->full, SPARSE_REFUSED);

	if (fchown(fd, uid, gid) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "chown", p->full);
	if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "chmod", p->full);
	if ((r = apply_xattrs(L, e, fd, p->full)) < 0)
		return r;
	lz_layermeta_times(e, ts);
	if (futimens(fd, ts) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "set times of", p->full);
	return 0;
}

static int add_fixup(struct layer *L, struct archive_entry *e, const char *path,
		     const struct stat *st)
{
	if (L->nfix == L->capfix) {
		size_t cap = L->capfix ? L->capfix * 2 : 64;
		struct dirfix *v = reallocarray(L->fix, cap, sizeof(*v));
		if (v == NULL)
			return lz_err_set(L->tree.err, ENOMEM, "layer entry '%s': out of memory",
					  lz_layerpath_shown(path));
		L->fix = v;
		L->capfix = cap;
	}
	size_t n = strlen(path);
	L->tracked += n + 1 + sizeof(struct dirfix);
	if (L->tracked > LZ_LAYER_MAX_TRACKED)
		return lz_err_set(L->tree.err, E2BIG,
				  "layer entry '%s': more than %u bytes of paths",
				  lz_layerpath_shown(path), LZ_LAYER_MAX_TRACKED);
	struct dirfix *f = &L->fix[L->nfix];
	if ((f->path = strdup(path)) == NULL)
		return lz_err_set(L->tree.err, ENOMEM, "layer entry '%s': out of memory",
				  lz_layerpath_shown(path));
	f->seq = L->rep.entries;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->mode = archive_entry_perm(e) & 07777;
	lz_layermeta_times(e, f->times);
	L->nfix++;
	return 0;
}

static int apply_dir(struct layer *L, struct archive_entry *e, int pfd,
		     const struct lz_layerpath *p)
{
	uid_t uid = 0;
	gid_t gid = 0;
	struct stat st;
	int r = lz_layermeta_owner(e, p->full, &uid, &gid, L->tree.err);
	if (r < 0)
		return r;

	if (p->len == 0) { /* the root itself: pfd is the root */
		if (fchownat(pfd, "", uid, gid, AT_EMPTY_PATH) < 0)
			return lz_layerpath_fail(L->tree.err, errno, "", "chown", "");
		if (archive_entry_xattr_count(e) > 0) {
			_cleanup_close_ int fd = lz_layertree_open(&L->tree, "", O_RDONLY);
			if (fd < 0)
				return lz_layertree_dir_error(&L->tree, -fd, "", "");
			if ((r = apply_xattrs(L, e, fd, "")) < 0)
				return r;
		}
		if (fstat(pfd, &st) < 0)
			return lz_layerpath_fail(L->tree.err, errno, "", "stat", "");
		return add_fixup(L, e, "", &st);
	}

	if ((r = lz_layertree_make_room(&L->tree, pfd, p, true, &st)) < 0)
		return r;
	if (r == 0) {
		/* 0700 until the fixup: the content is written first. */
		if ((r = lz_layertree_make_dir(pfd, p->name, 0700)) < 0)
			return lz_layerpath_fail(L->tree.err, -r, p->full, "create directory",
						 p->full);
	}
	if (fchownat(pfd, p->name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "chown", p->full);
	if (archive_entry_xattr_count(e) > 0) {
		_cleanup_close_ int fd =
			openat(pfd, p->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return lz_layerpath_fail(L->tree.err, errno, p->full, "open directory",
						 p->full);
		if ((r = apply_xattrs(L, e, fd, p->full)) < 0)
			return r;
	}
	if (fstatat(pfd, p->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "stat", p->full);
	return add_fixup(L, e, p->full, &st);
}

static int apply_symlink(struct layer *L, struct archive_entry *e, int pfd,
			 const struct lz_layerpath *p)
{
	const char *target = archive_entry_symlink(e);
	if (target == NULL || target[0] == '\0')
		return lz_layerpath_refuse(L->tree.err, p->full, "symbolic link without a target");
	if (strlen(target) > LZ_LAYER_PATH_MAX)
		return lz_layerpath_refuse(L->tree.err, p->full,
					   "symbolic link target longer than 4096 bytes");
	int r = lz_layertree_make_room(&L->tree, pfd, p, false, NULL);
	if (r < 0)
		return r;
	if (symlinkat(target, pfd, p->name) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "create symbolic link",
					 p->full);
	return lz_layermeta_finish_special(e, pfd, p, false, &L->rep, L->tree.err);
}

static int apply_fifo(struct layer *L, struct archive_entry *e, int pfd,
		      const struct lz_layerpath *p)
{
	int r = lz_layertree_make_room(&L->tree, pfd, p, false, NULL);
	if (r < 0)
		return r;
	if (mkfifoat(pfd, p->name, 0600) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "create FIFO", p->full);
	return lz_layermeta_finish_special(e, pfd, p, true, &L->rep, L->tree.err);
}

/* Devices are never made, only reported: a user namespace may create a
 * character device 0/0 since Linux 5.8, which is an overlay whiteout, the
 * root overlay's own metadata (as user.overlay.* xattrs are, layermeta.c),
 * and no other device node can be made there. What the path named before
 * is gone, as the entry says. */
static int apply_device(struct layer *L, int pfd, const struct lz_layerpath *p)
{
	int r = lz_layertree_make_room(&L->tree, pfd, p, false, NULL);
	if (r < 0)
		return r;
	L->rep.skipped_devices++;
	lz_layermeta_sample(L->rep.skipped_device_paths, L->rep.skipped_devices, p->full, NULL);
	return 0;
}

/* A hard link names an existing non-directory of the staging tree, resolved
 * like any entry path (beneath, no symlink on the way); linkat without
 * AT_SYMLINK_FOLLOW links that object itself, even when it is a symlink. */
static int apply_hardlink(struct layer *L, const char *raw_target, int pfd,
			  const struct lz_layerpath *p)
{
	struct lz_layerpath t;
	int r = lz_layerpath_parse(raw_target, strlen(raw_target), &t, L->tree.err);
	if (r < 0)
		return lz_err_prefix(L->tree.err, r,
				     "layer entry '%s': hard link target: ", p->full);
	if (t.len == 0)
		return lz_layerpath_refuse(L->tree.err, p->full, "hard link to the root directory");

	_cleanup_close_ int tpfd = -EBADF;
	r = lz_layertree_open_dir(&L->tree, t.parent, false, p->full, &tpfd);
	if (r == -ENOENT || r == -ENOTDIR)
		return lz_err_set(L->tree.err, EINVAL,
				  "layer entry '%s' refused: hard link target '%s' does not exist",
				  p->full, t.full);
	if (r < 0)
		return lz_err_prefix(L->tree.err, r, "hard link target '%s': ", t.full);
	struct stat tst, st;
	if (fstatat(tpfd, t.name, &tst, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return lz_err_set(
				L->tree.err, EINVAL,
				"layer entry '%s' refused: hard link target '%s' does not exist",
				p->full, t.full);
		return lz_layerpath_fail(L->tree.err, errno, p->full, "stat", t.full);
	}
	if (S_ISDIR(tst.st_mode))
		return lz_err_set(L->tree.err, EINVAL,
				  "layer entry '%s' refused: hard link target '%s' is a directory",
				  p->full, t.full);
	if (fstatat(pfd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == tst.st_dev &&
	    st.st_ino == tst.st_ino)
		return 0; /* already that inode (including a link to itself) */
	if ((r = lz_layertree_make_room(&L->tree, pfd, p, false, NULL)) < 0)
		return r;
	if (linkat(tpfd, t.name, pfd, p->name, 0) < 0)
		return lz_layerpath_fail(L->tree.err, errno, p->full, "hard link to", t.full);
	return 0;
}

static int apply_entry(struct layer *L, struct archive_entry *e)
{
	const char *raw = archive_entry_pathname(e);
	if (raw == NULL)
		return lz_err_set(L->tree.err, EINVAL, "layer entry %llu refused: no path",
				  (unsigned long long)L->rep.entries);
	struct lz_layerpath p;
	int r = lz_layerpath_parse(raw, strlen(raw), &p, L->tree.err);
	if (r < 0)
		return r;
	if (lz_layerwhiteout_is_marker(p.name))
		return lz_layerwhiteout_apply(&L->created, &L->tree, &p, &L->rep, &L->tracked);

	const char *link = archive_entry_hardlink(e);
	unsigned type = archive_entry_filetype(e);
	if (p.len == 0 && (link != NULL || type != AE_IFDIR))
		return lz_layerpath_refuse(L->tree.err, ".", "the root can only be a directory");

	_cleanup_close_ int pfd = -EBADF;
	if ((r = lz_layertree_open_dir(&L->tree, p.parent, true, p.full, &pfd)) < 0)
		return r;
	if (link != NULL)
		r = apply_hardlink(L, link, pfd, &p);
	else
		switch (type) {
		case AE_IFREG:
			r = apply_regular(L, e, pfd, &p);
			break;
		case AE_IFDIR:
			r = apply_dir(L, e, pfd, &p);
			break;
		case AE_IFLNK:
			r = apply_symlink(L, e, pfd, &p);
			break;
		case AE_IFIFO:
			r = apply_fifo(L, e, pfd, &p);
			break;
		case AE_IFCHR:
		case AE_IFBLK:
			r = apply_device(L, pfd, &p);
			break;
		default:
			return lz_layerpath_refuse(L->tree.err, p.full, "unsupported entry type");
		}
	if (r < 0)
		return r;
	return lz_layerwhiteout_mark(&L->created, p.full, p.len, &L->tracked, L->tree.err);
}

/* ---- directory fixups ---------------------------------------------------- */

static int fixup_cmp(const void *a, const void *b)
{
	const struct dirfix *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Children before parents (reverse lexical order puts "a/b" before "a"); of
 * several entries for one directory, the last in the archive wins. */
static int apply_fixups(struct layer *L)
{
	if (L->nfix == 0)
		return 0;
	qsort(L->fix, L->nfix, sizeof(*L->fix), fixup_cmp);
	for (size_t i = L->nfix; i-- > 0;) {
		const struct dirfix *f = &L->fix[i];
		if (i + 1 < L->nfix && strcmp(f->path, L->fix[i + 1].path) == 0)
			continue;
		_cleanup_close_ int fd =
			lz_layertree_open(&L->tree, f->path, O_RDONLY | O_NOFOLLOW);
		if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
			continue; /* replaced later in the layer */
		if (fd < 0)
			return lz_layertree_dir_error(&L->tree, -fd, f->path, f->path);
		struct stat st;
		if (fstat(fd, &st) < 0)
			return lz_layerpath_fail(L->tree.err, errno, f->path, "stat", f->path);
		if (st.st_dev != f->dev || st.st_ino != f->ino)
			continue;
		if (fchmod(fd, f->mode) < 0)
			return lz_layerpath_fail(L->tree.err, errno, f->path, "chmod", f->path);
		if (futimens(fd, f->times) < 0)
			return lz_layerpath_fail(L->tree.err, errno, f->path, "set times of",
						 f->path);
	}
	return 0;
}

/* ---- entry point --------------------------------------------------------- */

/* In the C locale libarchive cannot convert a UTF-8 pax path to the locale
 * and says so with ARCHIVE_WARN, handing out the archive's bytes unchanged:
 * that warning is expected. Any other warning fails the layer. */
static bool benign_warning(struct archive *a)
{
	const char *msg = archive_error_string(a);
	return msg != NULL && strstr(msg, " can't be converted from ") != NULL;
}

int lz_layer_apply(int root_dirfd, int layer_fd, const struct lz_layer_options *opts,
		   struct lz_layer_report *ret_report, struct lz_err *err)
{
	if (root_dirfd < 0 || layer_fd < 0)
		return lz_err_set(err, EBADF, "layer: bad descriptor");

	const struct lz_oci_layer *declared = opts != NULL ? opts->declared : NULL;
	_cleanup_(layer_done) struct layer L = { .tree = { .root = root_dirfd, .err = err },
						 .opts = opts, .max_entries = LZ_LAYER_MAX_ENTRIES };
	L.tree.implied = count_implied;
	L.tree.implied_ctx = &L;
	if (declared != NULL && lz_oci_digest_parse(declared->diff_id, L.diff_id) < 0)
		return lz_err_set(err, EINVAL, "layer: its diff_id is not a canonical sha256 digest");
	/* src before a: a is freed first. */
	_cleanup_(archive_read_freep) struct archive *src = archive_read_new();
	_cleanup_(archive_read_freep) struct archive *a = archive_read_new();
	_cleanup_(evp_md_ctx_freep) EVP_MD_CTX *md = NULL;
	if (src == NULL || a == NULL)
		return lz_err_set(err, ENOMEM, "layer: out of memory");
	L.src = src;
	struct stat blob;
	if (fstat(layer_fd, &blob) < 0)
		return lz_err_set(err, errno, "layer: %s", strerror(errno));
	uint64_t size = blob.st_size > 0 ? (uint64_t)blob.st_size : 0;
	uint64_t expands = size > (UINT64_MAX - LZ_LAYER_EXPANSION_FLOOR) / LZ_LAYER_MAX_EXPANSION
				   ? UINT64_MAX
				   : size * LZ_LAYER_MAX_EXPANSION + LZ_LAYER_EXPANSION_FLOOR;
	uint64_t opt = opts != NULL ? opts->max_stream_bytes : 0;
	L.stream_by_ratio = opt == 0 || expands < opt;
	L.max_stream = L.stream_by_ratio ? expands : opt;
	/* ARCHIVE_WARN from a filter means an external helper program: refused. */
	if (archive_read_support_filter_gzip(src) != ARCHIVE_OK ||
	    archive_read_support_filter_zstd(src) != ARCHIVE_OK ||
	    archive_read_support_filter_none(src) != ARCHIVE_OK ||
	    archive_read_support_format_raw(src) != ARCHIVE_OK ||
	    archive_read_support_format_tar(a) != ARCHIVE_OK)
		return lz_err_set(err, ENOTSUP,
				  "layer: libarchive lacks built-in gzip, zstd, raw or tar support");
	struct archive_entry *stream;
	if (archive_read_open_fd(src, layer_fd, LAYER_READ_BLOCK) != ARCHIVE_OK ||
	    archive_read_next_header(src, &stream) != ARCHIVE_OK)
		return fail_archive(&L, NULL, "opening layer");
	int r;
	if (declared != NULL) {
		if ((r = check_compression(&L, declared->compression)) < 0)
			return r;
		if ((md = EVP_MD_CTX_new()) == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
			return lz_err_set(err, ENOMEM, "layer: cannot set up sha256");
		L.md = md;
	}
	L.a = a;
	if (archive_read_open(a, &L, NULL, feed, NULL) != ARCHIVE_OK)
		return fail_archive(&L, NULL, "opening layer");

	if (opts != NULL && opts->max_entries > 0 && opts->max_entries < L.max_entries)
		L.max_entries = opts->max_entries;
	for (;;) {
		struct archive_entry *e;
		int ar = archive_read_next_header(a, &e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK && !(ar == ARCHIVE_WARN && benign_warning(a)))
			return fail_archive(&L, NULL, "reading entry header");
		if ((r = count_inode(&L, &L.rep.entries, NULL, NULL)) < 0)
			return r;
		if ((r = apply_entry(&L, e)) < 0)
			return r;
		progress(&L);
	}
	if ((r = finish_stream(&L)) < 0)
		return r;
	if ((r = apply_fixups(&L)) < 0)
		return r;
	progress(&L);
	if (ret_report)
		*ret_report = L.rep;
	return 0;
}
