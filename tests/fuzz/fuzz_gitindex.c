/* libFuzzer target for core/router/gitindex.c (lz_gitindex_read), which
 * reads the Git index a sandbox wrote (the index-lock guard, before it may
 * replace the host's; the classification, in place).
 *
 * The input is a control byte and then an index file's bytes (the seeds in
 * tests/fuzz/corpus/gitindex/ are .git/index files real Git wrote, each
 * after a control byte of 0x01). The control byte:
 *   bits 0-1  0: the bytes are the file as they are; 1 to 3: the file's
 *             last 20 bytes (a real index's SHA-1) are replaced by the
 *             SHA-1 of the bytes before them (an input of 20 bytes or
 *             fewer gives just that hash), so that a mutated file still
 *             passes the hash check and the entries are really read;
 *   bits 2-4  max_bytes: 0 to 3 unlimited, 4 the file's length less one,
 *             5 its length, 6 its length plus one, 7 half its length;
 *   bits 5-7  0 to 5: the callback always returns 0; 6 or 7: it returns
 *             SENTINEL at the first or second entry.
 * The file is written to a memfd whose offset is set to 7.
 *
 * Checks (each abort()s):
 *  - the result is 0, -EBADMSG, -ENOMEM, -EFBIG or the callback's
 *    SENTINEL; -EFBIG exactly when the file is longer than max_bytes
 *    (and then no entry is given); SENTINEL exactly when the callback
 *    returned it, and no entry is given after it; the fd's offset is 7
 *    after the call;
 *  - each entry: path[len] is NUL and no NUL is in its len bytes, len <=
 *    LZ_GITINDEX_PATH_MAX, stage <= 3; at most the header's count of
 *    entries, and at most what the file's size holds (12 bytes of header,
 *    20 of hash, at least 64 an entry: 62 fixed bytes and the NUL, padded
 *    to 8 before version 4, a varint byte and the NUL in version 4); on
 *    0, exactly the header's count;
 *  - a model: a separate, plain re-parse of the same bytes from
 *    gitformat-index(5) and the refusals gitindex.h documents. Each entry
 *    the reader gives must be the model's next one (same path bytes, mode
 *    and stage), and (when the callback did not stop it and memory did
 *    not run out) the reader accepts the file exactly when the model
 *    does. The model reads the whole file in memory; it is written for
 *    obviousness, not speed. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "router/gitindex.h"

#define SENTINEL (-4242)
#define HASH_LEN 20
#define OFFSET_MARK 7

static void check(bool ok)
{
	if (!ok)
		abort();
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* --- the model ------------------------------------------------------------ */

/* gitformat-index(5): a 12-byte header ("DIRC", version, count), count
 * entries, extensions, the SHA-1 of everything before it. An entry:
 * ctime (8), mtime (8), dev, ino, mode, uid, gid, size (4 each), the
 * object name (20), flags (2: assume-valid 0x8000, extended 0x4000, stage
 * 0x3000, name length 0x0FFF), in version 3 and up extended flags (2)
 * when the extended flag is set, then the path. Before version 4 the path
 * is NUL-terminated and the entry NUL-padded: its size is the path's
 * offset in the entry plus the path's length plus 8, rounded down to a
 * multiple of 8. In version 4: Git's varint N (bytes of the previous path
 * to drop from its end), then the rest of the path, NUL-terminated, no
 * padding. */
struct model {
	const uint8_t *f;
	size_t end; /* where the hash begins */
	size_t pos; /* the next entry, or the extensions */
	unsigned version;
	uint32_t count, done;
	bool bad;
	/* the entry last read */
	char path[LZ_GITINDEX_PATH_MAX + 1];
	size_t path_len;
	uint32_t mode;
	unsigned bits; /* the stage, assume-unchanged, skip-worktree */
};

static void model_begin(struct model *m, const uint8_t *f, size_t n)
{
	m->f = f;
	m->bad = true;
	m->done = m->count = 0;
	m->path_len = 0;
	if (n < 12 + HASH_LEN)
		return;
	m->end = n - HASH_LEN;
	if (memcmp(f, "DIRC", 4) != 0)
		return;
	m->version = get32(f + 4);
	if (m->version < 2 || m->version > 4)
		return;
	m->count = get32(f + 8);
	m->pos = 12;
	m->bad = false;
}

/* Reads the next entry into m; false (and m->bad) when it is refused. */
static bool model_next(struct model *m)
{
	if (m->bad || m->done >= m->count)
		return m->bad = true, false;
	const uint8_t *f = m->f;
	size_t p = m->pos, end = m->end;
	if (end - p < 62)
		return m->bad = true, false;
	uint32_t mode = get32(f + p + 24);
	if (mode != 0100644 && mode != 0100755 && mode != 0120000 && mode != 0160000)
		return m->bad = true, false; /* Git expands 040000 from a tree object */
	uint16_t flags = get16(f + p + 60);
	size_t field = flags & 0x0FFF;
	size_t name = p + 62;
	uint16_t xflags = 0;
	if (flags & 0x4000) {
		if (m->version < 3 || end - name < 2)
			return m->bad = true, false;
		xflags = get16(f + name);
		if (xflags & ~(0x4000 | 0x2000)) /* skip-worktree, intent-to-add */
			return m->bad = true, false;
		name += 2;
	}
	size_t len, next;
	if (m->version < 4) {
		const uint8_t *nul = memchr(f + name, 0, end - name);
		if (nul == NULL)
			return m->bad = true, false;
		len = (size_t)(nul - (f + name));
		if (len > LZ_GITINDEX_PATH_MAX)
			return m->bad = true, false;
		memcpy(m->path, f + name, len);
		next = p + (((name - p) + len + 8) & ~(size_t)7);
		if (next > end)
			return m->bad = true, false;
	} else {
		/* Git's varint.c: 7 bits a byte, high bit "more", and one
		 * added before each shift. */
		size_t q = name;
		if (q >= end)
			return m->bad = true, false;
		uint8_t c = f[q++];
		uint64_t strip = c & 127;
		while (c & 128) {
			if (q >= end || strip > ((uint64_t)1 << 40))
				return m->bad = true, false;
			c = f[q++];
			strip = ((strip + 1) << 7) + (c & 127);
		}
		if ((m->done == 0 && strip != 0) || strip > m->path_len)
			return m->bad = true, false;
		size_t keep = m->path_len - (size_t)strip;
		const uint8_t *nul = memchr(f + q, 0, end - q);
		if (nul == NULL)
			return m->bad = true, false;
		size_t own = (size_t)(nul - (f + q));
		len = keep + own;
		if (len > LZ_GITINDEX_PATH_MAX)
			return m->bad = true, false;
		memcpy(m->path + keep, f + q, own);
		next = q + own + 1;
	}
	/* The name field is the path's length, or 0xFFF for 0xFFF and more. */
	if (field < 0x0FFF ? len != field : len < 0x0FFF)
		return m->bad = true, false;
	m->path[len] = '\0';
	m->path_len = len;
	m->mode = mode;
	m->bits = ((flags >> 12) & 3) | (flags & 0x8000 ? LZ_GITINDEX_ASSUME_UNCHANGED : 0) |
		  (xflags & 0x4000 ? LZ_GITINDEX_SKIP_WORKTREE : 0);
	m->pos = next;
	m->done++;
	return true;
}

/* After the entries: the extensions and the hash. */
static bool model_end(struct model *m)
{
	if (m->bad || m->done != m->count)
		return false;
	const uint8_t *f = m->f;
	size_t p = m->pos, end = m->end;
	while (p < end) {
		if (end - p < 8 || f[p] < 'A' || f[p] > 'Z')
			return false;
		uint32_t size = get32(f + p + 4);
		if (size > end - p - 8)
			return false;
		p += 8 + (size_t)size;
	}
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	check(EVP_Digest(f, end, md, &md_len, EVP_sha1(), NULL) == 1 && md_len == HASH_LEN);
	return memcmp(md, f + end, HASH_LEN) == 0;
}

/* --- the run -------------------------------------------------------------- */

static struct model model;

struct run {
	size_t file_len;
	uint32_t header_count; /* 0 when the file is too short for one */
	unsigned calls;
	unsigned stop_at; /* 1-based; 0: never */
	bool stopped;
};

static int each(void *ctx, const char *path, size_t len, uint32_t mode, unsigned bits)
{
	struct run *r = ctx;
	check(!r->stopped);
	check(path != NULL && len <= LZ_GITINDEX_PATH_MAX &&
	      (bits & ~(LZ_GITINDEX_STAGE | LZ_GITINDEX_ASSUME_UNCHANGED | LZ_GITINDEX_SKIP_WORKTREE)) == 0);
	check(path[len] == '\0' && memchr(path, '\0', len) == NULL);
	r->calls++;
	check(r->calls <= r->header_count);
	check(r->file_len >= 12 + HASH_LEN && (r->file_len - 12 - HASH_LEN) / 64 >= r->calls);
	check(model_next(&model));
	check(model.path_len == len && memcmp(model.path, path, len) == 0);
	check(model.mode == mode && model.bits == bits);
	if (r->calls == r->stop_at) {
		r->stopped = true;
		return SENTINEL;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	if (fd < 0) {
		fd = memfd_create("fuzz-gitindex", MFD_CLOEXEC);
		check(fd >= 0);
	}
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	const uint8_t *in = data + 1;
	size_t in_len = size - 1;

	/* An exact-size copy of the file, so ASan sees the model read past it. */
	bool rehash = (ctl & 3) != 0;
	size_t file_len = rehash ? (in_len > HASH_LEN ? in_len : HASH_LEN) : in_len;
	uint8_t *file = malloc(file_len ? file_len : 1);
	check(file != NULL);
	if (rehash) {
		size_t body = file_len - HASH_LEN;
		memcpy(file, in, body);
		unsigned md_len = 0;
		uint8_t md[EVP_MAX_MD_SIZE];
		check(EVP_Digest(file, body, md, &md_len, EVP_sha1(), NULL) == 1 && md_len == HASH_LEN);
		memcpy(file + body, md, HASH_LEN);
	} else {
		memcpy(file, in, in_len);
	}

	uint64_t max_bytes;
	switch ((ctl >> 2) & 7) {
	case 4:
		max_bytes = file_len ? file_len - 1 : 0;
		break;
	case 5:
		max_bytes = file_len;
		break;
	case 6:
		max_bytes = (uint64_t)file_len + 1;
		break;
	case 7:
		max_bytes = file_len / 2;
		break;
	default:
		max_bytes = UINT64_MAX;
		break;
	}
	unsigned sel = (ctl >> 5) & 7;

	check(ftruncate(fd, 0) == 0);
	for (size_t done = 0; done < file_len;) {
		ssize_t k = pwrite(fd, file + done, file_len - done, (off_t)done);
		check(k > 0);
		done += (size_t)k;
	}
	check(lseek(fd, OFFSET_MARK, SEEK_SET) == OFFSET_MARK);

	struct run r = {
		.file_len = file_len,
		.header_count = file_len >= 12 ? get32(file + 8) : 0,
		.stop_at = sel == 6 ? 1 : sel == 7 ? 2 : 0,
	};
	model_begin(&model, file, file_len);
	int rc = lz_gitindex_read(fd, max_bytes, 0, each, &r);

	check(lseek(fd, 0, SEEK_CUR) == OFFSET_MARK);
	if (file_len > max_bytes) {
		check(rc == -EFBIG && r.calls == 0);
	} else if (r.stopped) {
		check(rc == SENTINEL);
	} else {
		check(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
		check(rc != 0 || r.calls == r.header_count);
		if (rc != -ENOMEM) {
			/* The model goes on from the entries the reader gave. */
			while (!model.bad && model.done < model.count)
				model_next(&model);
			check(model_end(&model) == (rc == 0));
		}
	}
	free(file);
	return 0;
}
