/* Reading a Git index as Git reads it (gitindex.h). */
#include "router/gitindex.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "router/gitcachetree.h"

#define SIG_DIRC 0x44495243u
#define HASH_LEN 20    /* SHA-1: libgit2 reads no other index */
#define HEADER_LEN 12
#define ENTRY_FIXED 62 /* times, dev, ino, mode, uid, gid, size, object, flags */
#define FLAG_EXTENDED 0x4000
#define XFLAGS_KNOWN 0x6000 /* skip-worktree, intent-to-add */
#define XFLAG_INTENT_TO_ADD 0x2000
#define XFLAG_SKIP_WORKTREE 0x4000
#define FLAG_ASSUME_VALID 0x8000
#define OID_AT 40
#define NAME_FIELD_MAX 0xFFF
#define VARINT_MAX 3 /* bytes: enough for any prefix of LZ_GITINDEX_PATH_MAX */
#define CHUNK (64 * 1024)

/* The bytes before the hash, through a window that holds an entry whole:
 * what is consumed is hashed, in order. */
struct reader {
	int fd;
	uint64_t off;   /* file offset of buf[0] */
	uint64_t end;   /* where the hash begins */
	size_t at, len; /* consumed, filled bytes of buf */
	EVP_MD_CTX *sha;
	struct lz_cachetree *tree; /* LZ_GITINDEX_PLAIN: the entries' trees */
	uint8_t *kept[2];	   /* and the TREE and REUC payloads, to check */
	size_t kept_len[2];	   /* by KEPT_TREE, KEPT_REUC */
	char path[LZ_GITINDEX_PATH_MAX + 1]; /* the entry's path; version 4 builds on the last */
	size_t path_len;
	uint8_t buf[CHUNK + ENTRY_FIXED + 2 + VARINT_MAX + LZ_GITINDEX_PATH_MAX + 1 + 8];
};

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* At least n unconsumed bytes in buf, never reading past r->end. */
static int fill(struct reader *r, size_t n)
{
	if (r->len - r->at >= n)
		return 0;
	if (n > sizeof(r->buf) || r->off + r->at + n > r->end)
		return -EBADMSG;
	memmove(r->buf, r->buf + r->at, r->len - r->at);
	r->off += r->at;
	r->len -= r->at;
	r->at = 0;
	while (r->len < n) {
		size_t want = sizeof(r->buf) - r->len;
		if (want > r->end - (r->off + r->len))
			want = (size_t)(r->end - (r->off + r->len));
		ssize_t k = pread(r->fd, r->buf + r->len, want, (off_t)(r->off + r->len));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EBADMSG; /* shorter than it was */
		r->len += (size_t)k;
	}
	return 0;
}

static int consume(struct reader *r, size_t n)
{
	if (EVP_DigestUpdate(r->sha, r->buf + r->at, n) != 1)
		return -ENOMEM;
	r->at += n;
	return 0;
}

/* The offset (from r->at) of the first NUL at or after from, reading on
 * as needed; past from + max bytes, or the content's end, -EBADMSG. */
static int find_nul(struct reader *r, size_t from, size_t max, size_t *ret)
{
	size_t looked = from;
	for (;;) {
		size_t avail = r->len - r->at;
		if (avail > from + max + 1)
			avail = from + max + 1;
		const uint8_t *z = looked < avail ? memchr(r->buf + r->at + looked, 0, avail - looked) : NULL;
		if (z != NULL) {
			*ret = (size_t)(z - (r->buf + r->at));
			return 0;
		}
		if (avail >= from + max + 1)
			return -EBADMSG;
		looked = avail;
		int rc = fill(r, avail + 1);
		if (rc < 0)
			return rc;
	}
}

/* Git's varint (varint.c), at most VARINT_MAX bytes. */
static int varint(struct reader *r, size_t from, size_t *ret_value, size_t *ret_len)
{
	size_t v = 0;
	for (size_t i = 0; i < VARINT_MAX; i++) {
		int rc = fill(r, from + i + 1);
		if (rc < 0)
			return rc;
		uint8_t c = r->buf[r->at + from + i];
		v = i == 0 ? (size_t)(c & 127) : ((v + 1) << 7) + (c & 127);
		if (!(c & 128)) {
			*ret_value = v;
			*ret_len = i + 1;
			return 0;
		}
	}
	return -EBADMSG;
}

static int entry(struct reader *r, unsigned version, lz_gitindex_entry_fn *each, void *ctx)
{
	int rc = fill(r, ENTRY_FIXED);
	if (rc < 0)
		return rc;
	uint32_t mode = be32(r->buf + r->at + 24);
	if (mode != 0100644 && mode != 0100755 && mode != 0120000 && mode != 0160000)
		return -EBADMSG;
	uint16_t flags = be16(r->buf + r->at + 60), xflags = 0;
	uint8_t oid[LZ_CACHETREE_OID_LEN];
	memcpy(oid, r->buf + r->at + OID_AT, sizeof(oid));
	size_t hdr = ENTRY_FIXED, field = flags & NAME_FIELD_MAX, len, size;
	if (flags & FLAG_EXTENDED) {
		if (version < 3 || (rc = fill(r, ENTRY_FIXED + 2)) < 0)
			return rc < 0 ? rc : -EBADMSG;
		xflags = be16(r->buf + r->at + ENTRY_FIXED);
		if (xflags & ~XFLAGS_KNOWN)
			return -EBADMSG;
		hdr += 2;
	}
	if (version < 4) {
		size_t nul;
		if ((rc = find_nul(r, hdr, LZ_GITINDEX_PATH_MAX, &nul)) < 0)
			return rc;
		len = nul - hdr;
		memcpy(r->path, r->buf + r->at + hdr, len);
		size = (hdr + len + 8) & ~(size_t)7; /* NUL-padded to 8 bytes */
	} else {
		/* The last path less strip bytes, then the entry's own. */
		size_t strip, vlen, nul;
		if ((rc = varint(r, hdr, &strip, &vlen)) < 0)
			return rc;
		if (strip > r->path_len) /* the first entry's is 0: no path before it */
			return -EBADMSG;
		size_t keep = r->path_len - strip;
		if ((rc = find_nul(r, hdr + vlen, LZ_GITINDEX_PATH_MAX - keep, &nul)) < 0)
			return rc;
		size_t own = nul - (hdr + vlen);
		len = keep + own;
		memcpy(r->path + keep, r->buf + r->at + hdr + vlen, own);
		size = nul + 1;
	}
	/* Git takes the length from the name field, libgit2 from the NUL:
	 * they must agree. */
	if (field < NAME_FIELD_MAX ? len != field : len < NAME_FIELD_MAX)
		return -EBADMSG;
	if ((rc = fill(r, size)) < 0)
		return rc;
	r->path[len] = '\0';
	r->path_len = len;
	if ((rc = consume(r, size)) < 0)
		return rc;
	unsigned stage = (flags >> 12) & 3;
	if (r->tree != NULL &&
	    (rc = lz_cachetree_entry(r->tree, r->path, len, mode, oid, stage, xflags & XFLAG_INTENT_TO_ADD)) < 0)
		return rc;
	return each(ctx, r->path, len, mode,
		    stage | (flags & FLAG_ASSUME_VALID ? LZ_GITINDEX_ASSUME_UNCHANGED : 0) |
			    (xflags & XFLAG_SKIP_WORKTREE ? LZ_GITINDEX_SKIP_WORKTREE : 0));
}

/* Optional extensions (a first byte A to Z) are passed over; a required
 * one refuses the file. Plainly, only those Git 2.39 writes and reads as
 * they are: the cache tree and the resolve-undo records, kept whole to
 * check (NAME is libgit2's; Git ignores it). */
enum { KEPT_TREE, KEPT_REUC };
static const char kept_sig[2][4] = { [KEPT_TREE] = "TREE", [KEPT_REUC] = "REUC" };

static int extensions(struct reader *r, unsigned flags)
{
	while (r->off + r->at < r->end) {
		int rc = fill(r, 8);
		if (rc < 0)
			return rc;
		const uint8_t *x = r->buf + r->at;
		uint64_t size = be32(x + 4);
		if (x[0] < 'A' || x[0] > 'Z' || size > r->end - (r->off + r->at + 8))
			return -EBADMSG;
		int k = -1; /* not kept */
		if (flags & LZ_GITINDEX_PLAIN) {
			k = memcmp(x, kept_sig[KEPT_TREE], 4) == 0   ? KEPT_TREE
			    : memcmp(x, kept_sig[KEPT_REUC], 4) == 0 ? KEPT_REUC
								     : -2;
			if (k == -2)
				return -EOPNOTSUPP;
		}
		/* One of each is all Git writes (it reads the last). */
		if (k >= 0 && r->kept[k] != NULL)
			return -EBADMSG;
		if (k >= 0 && size > LZ_CACHETREE_MAX_BYTES)
			return -E2BIG;
		if (k >= 0 && (r->kept[k] = malloc(size ? size : 1)) == NULL)
			return -ENOMEM;
		if ((rc = consume(r, 8)) < 0)
			return rc;
		while (size > 0) {
			size_t n = size < CHUNK ? (size_t)size : CHUNK;
			if ((rc = fill(r, n)) < 0)
				return rc;
			if (k >= 0) {
				memcpy(r->kept[k] + r->kept_len[k], r->buf + r->at, n);
				r->kept_len[k] += n;
			}
			if ((rc = consume(r, n)) < 0)
				return rc;
			size -= n;
		}
	}
	return 0;
}

/* Git's "%o" of a mode a conflict stage can have, or 0 for none. */
static bool reuc_mode(const uint8_t *p, size_t len, size_t *pos, uint32_t *ret)
{
	const uint8_t *nul = memchr(p + *pos, 0, len - *pos);
	if (nul == NULL)
		return false;
	size_t n = (size_t)(nul - (p + *pos));
	static const char *const modes[] = { "0", "100644", "100755", "120000", "160000" };
	static const uint32_t values[] = { 0, 0100644, 0100755, 0120000, 0160000 };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (n == strlen(modes[i]) && memcmp(p + *pos, modes[i], n) == 0) {
			*ret = values[i];
			*pos += n + 1;
			return true;
		}
	return false;
}

/* The resolve-undo records as Git writes them (resolve-undo.c): a path
 * and its NUL, three modes, an object ID for each mode not 0; Git
 * refuses, and reads past the extension looking for, less. */
static int reuc_check(const uint8_t *p, size_t len)
{
	size_t pos = 0;
	while (pos < len) {
		const uint8_t *nul = memchr(p + pos, 0, len - pos);
		if (nul == NULL || nul == p + pos)
			return -EBADMSG;
		pos = (size_t)(nul - p) + 1;
		uint32_t mode[3];
		for (int i = 0; i < 3; i++)
			if (!reuc_mode(p, len, &pos, &mode[i]))
				return -EBADMSG;
		for (int i = 0; i < 3; i++) {
			if (mode[i] == 0)
				continue;
			if (len - pos < HASH_LEN)
				return -EBADMSG;
			pos += HASH_LEN;
		}
		if (mode[0] == 0 && mode[1] == 0 && mode[2] == 0)
			return -EBADMSG;
	}
	return 0;
}

/* Git that loads an index with threads takes an EOIE extension from the
 * 32 bytes before the hash, wherever the chain of extensions puts them
 * (read-cache.c, read_eoie_extension), and follows its offset to other
 * extensions and, through IEOT, other entries: bytes that read so,
 * inside another extension's payload, refuse a plain index. */
static int eoie_lookalike(struct reader *r)
{
	uint8_t tail[8];
	if (r->end < HEADER_LEN + 32)
		return 0;
	ssize_t k;
	while ((k = pread(r->fd, tail, sizeof(tail), (off_t)(r->end - 32))) < 0 && errno == EINTR)
		;
	if (k < 0)
		return -errno;
	if (k != (ssize_t)sizeof(tail))
		return -EBADMSG;
	return memcmp(tail, "EOIE", 4) == 0 && be32(tail + 4) == 4 + HASH_LEN ? -EOPNOTSUPP : 0;
}

static int read_all(struct reader *r, unsigned flags, lz_gitindex_entry_fn *each, void *ctx)
{
	int rc = fill(r, HEADER_LEN);
	if (rc < 0)
		return rc;
	uint32_t version = be32(r->buf + 4), count = be32(r->buf + 8);
	if (be32(r->buf) != SIG_DIRC || version < 2 || version > 4)
		return -EBADMSG;
	if ((rc = consume(r, HEADER_LEN)) < 0)
		return rc;
	for (uint32_t i = 0; i < count; i++)
		if ((rc = entry(r, version, each, ctx)) < 0)
			return rc;
	if ((rc = extensions(r, flags)) < 0)
		return rc;
	uint8_t want[HASH_LEN], got[EVP_MAX_MD_SIZE];
	unsigned got_len = 0;
	ssize_t k;
	while ((k = pread(r->fd, want, HASH_LEN, (off_t)r->end)) < 0 && errno == EINTR)
		;
	if (k < 0)
		return -errno;
	if (EVP_DigestFinal_ex(r->sha, got, &got_len) != 1)
		return -ENOMEM;
	if (k != HASH_LEN || got_len != HASH_LEN || memcmp(want, got, HASH_LEN) != 0)
		return -EBADMSG;
	if (!(flags & LZ_GITINDEX_PLAIN))
		return 0;
	if ((rc = eoie_lookalike(r)) < 0 ||
	    (r->kept[KEPT_REUC] != NULL && (rc = reuc_check(r->kept[KEPT_REUC], r->kept_len[KEPT_REUC])) < 0))
		return rc;
	return r->kept[KEPT_TREE] != NULL ? lz_cachetree_check(r->tree, r->kept[KEPT_TREE], r->kept_len[KEPT_TREE])
					  : 0;
}

bool lz_gitindex_path_ok(const char *p, size_t len, size_t max_component)
{
	for (size_t i = 0; i <= len;) {
		const char *sl = memchr(p + i, '/', len - i);
		size_t e = sl ? (size_t)(sl - p) : len, n = e - i;
		if (n == 0 || n > max_component || (n == 1 && p[i] == '.') ||
		    (n == 2 && p[i] == '.' && p[i + 1] == '.') || (n == 4 && strncasecmp(p + i, ".git", 4) == 0))
			return false;
		i = e + 1;
	}
	return true;
}

int lz_gitindex_read(int fd, uint64_t max_bytes, unsigned flags, lz_gitindex_entry_fn *each, void *ctx)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	if ((uint64_t)st.st_size > max_bytes)
		return -EFBIG;
	if (st.st_size < HEADER_LEN + HASH_LEN)
		return -EBADMSG;
	struct reader *r = malloc(sizeof(*r)); /* 130 KiB: not for a worker's stack */
	if (r == NULL)
		return -ENOMEM;
	r->fd = fd;
	r->off = 0;
	r->end = (uint64_t)st.st_size - HASH_LEN;
	r->at = r->len = r->path_len = 0;
	r->tree = NULL;
	r->kept[0] = r->kept[1] = NULL;
	r->kept_len[0] = r->kept_len[1] = 0;
	r->sha = EVP_MD_CTX_new();
	int rc = r->sha == NULL || EVP_DigestInit_ex(r->sha, EVP_sha1(), NULL) != 1 ? -ENOMEM
		 : (flags & LZ_GITINDEX_PLAIN)					    ? lz_cachetree_new(&r->tree)
										    : 0;
	if (rc == 0)
		rc = read_all(r, flags, each, ctx);
	EVP_MD_CTX_free(r->sha);
	lz_cachetree_free(r->tree);
	free(r->kept[0]);
	free(r->kept[1]);
	free(r);
	return rc;
}
