/* core/router/gitindex.h: indexes real Git wrote (versions 2, 3 and 4,
 * conflicts, intent-to-add, long paths, extensions) read entry for entry
 * as `git ls-files -s` lists them; bytes changed after Git wrote them, a
 * file past the bound, the ambiguities between Git and libgit2, and
 * required extensions refused. */
#include <errno.h>
#include <fcntl.h>
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
#include <openssl/evp.h>

#include "router/gitindex.h"

struct fx {
	char dir[64];
	char listed[1 << 16]; /* what the reader gave: "mode stage\tpath\n" each */
	size_t listed_len;
	unsigned entries;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/lz-test-gitindex.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	int r = system(cmd);
	free(f);
	return r == 0 ? 0 : -1;
}

/* Runs a shell command in the scratch repository (git init'ed by the
 * first call). */
static void git(struct fx *f, const char *fmt, ...)
{
	char body[8192], cmd[8192 + 320];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && export GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "
		 "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t && { [ -d .git ] || git init -q; } && %s",
		 f->dir, body);
	if (system(cmd) != 0)
		fail_msg("failed: %s", body);
}

static int list_entry(void *ctx, const char *path, size_t len, uint32_t mode, unsigned bits)
{
	struct fx *f = ctx;
	assert_int_equal(strlen(path), len); /* NUL-terminated, none inside */
	int n = snprintf(f->listed + f->listed_len, sizeof(f->listed) - f->listed_len, "%o %u%s%s\t%s\n", mode,
			 bits & LZ_GITINDEX_STAGE, bits & LZ_GITINDEX_ASSUME_UNCHANGED ? " av" : "",
			 bits & LZ_GITINDEX_SKIP_WORKTREE ? " sw" : "", path);
	assert_true(n > 0 && (size_t)n < sizeof(f->listed) - f->listed_len);
	f->listed_len += (size_t)n;
	f->entries++;
	return 0;
}

static unsigned read_flags; /* lz_gitindex_read's flags for read_file */

static int read_file(struct fx *f, const char *path, uint64_t max)
{
	f->listed_len = 0;
	f->listed[0] = '\0';
	f->entries = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	int r = lz_gitindex_read(fd, max, read_flags, list_entry, f);
	close(fd);
	return r;
}

static char *slurp(const char *path, size_t *ret_len)
{
	FILE *in = fopen(path, "rb");
	assert_non_null(in);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	assert_true(n < sizeof(buf));
	buf[n] = '\0';
	*ret_len = n;
	return buf;
}

/* The reader's list of the repository's index equals Git's. */
static void assert_reads_as_git(struct fx *f)
{
	char index[128], want[128];
	snprintf(index, sizeof(index), "%s/.git/index", f->dir);
	snprintf(want, sizeof(want), "%s/ls-files", f->dir);
	/* -v tags an entry: lower case assume-unchanged, S skip-worktree */
	git(f, "git ls-files -s -v -z | tr '\\0' '\\n' | sed -E -e 's/^S ([0-7]+) [0-9a-f]+ ([0-3])/\\1 \\2 sw/' "
	       "-e 's/^s ([0-7]+) [0-9a-f]+ ([0-3])/\\1 \\2 av sw/' -e 's/^[a-z] ([0-7]+) [0-9a-f]+ ([0-3])/\\1 \\2 av/' "
	       "-e 's/^[A-Z] ([0-7]+) [0-9a-f]+ ([0-3])/\\1 \\2/' > ls-files");
	assert_int_equal(read_file(f, index, UINT64_MAX), 0);
	size_t n;
	const char *expect = slurp(want, &n);
	assert_true(f->entries > 0);
	assert_string_equal(f->listed, expect);
}

static void test_versions_2_3_and_4_read_as_git_lists_them(void **state)
{
	struct fx *f = *state;
	git(f, "mkdir -p a/b && echo 1 > a/b/one && echo 2 > a/two && echo x > 'sp ace' && printf '\\351' > "
	       "\"$(printf 'l\\351')\" && ln -s a/two link && git add . && git commit -qm c");
	git(f, "git update-index --index-version 2");
	assert_reads_as_git(f);
	/* intent-to-add sets an extended flag: the file is version 3 */
	git(f, "echo n > new && git add -N new && git update-index --index-version 3");
	assert_reads_as_git(f);
	git(f, "git update-index --index-version 4");
	assert_reads_as_git(f);
	/* a TREE extension (optional) and an untracked cache (UNTR) */
	git(f, "git write-tree > /dev/null && git -c core.untrackedCache=true status -uall > /dev/null");
	assert_reads_as_git(f);
}

static void test_conflict_stages_and_a_path_past_the_name_field(void **state)
{
	struct fx *f = *state;
	git(f, "echo base > c && git add c && git commit -qm base && git checkout -qb other && echo other > c && "
	       "git commit -qam other && git checkout -q - && echo main > c && git commit -qam main && "
	       "{ git merge -q other >/dev/null 2>&1 || true; }");
	assert_reads_as_git(f);
	/* 4,200 bytes: the name field says 0xFFF, the NUL ends it; "z" after
	 * it strips all of it in version 4 (a varint of two bytes) */
	git(f, "git update-index --add --cacheinfo 100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,z");
	char path[4300];
	size_t k = 0;
	for (int i = 0; i < 20; i++) {
		memset(path + k, 'd', 200);
		k += 200;
		path[k++] = '/';
	}
	memset(path + k, 'f', 180);
	k += 180;
	path[k] = '\0';
	for (unsigned v = 2; v <= 4; v += 2) {
		git(f, "git update-index --index-version %u && git update-index --add --cacheinfo "
		       "100644,$(git hash-object -w c 2>/dev/null || echo x | git hash-object -w --stdin),%s",
		    v, path);
		assert_reads_as_git(f);
	}
}

/* A header that claims four billion entries in a file of a few hundred
 * bytes is refused at the end of the bytes, with nothing allocated for
 * the count. */
static void write_bytes(const char *path, const void *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	close(fd);
}

/* Writes b[0..n) with a fresh SHA-1 after it: what Git would accept by
 * its checksum. */
static void write_signed(const char *path, uint8_t *b, size_t n)
{
	unsigned len = 0;
	assert_int_equal(EVP_Digest(b, n, b + n, &len, EVP_sha1(), NULL), 1);
	assert_int_equal(len, 20);
	write_bytes(path, b, n + 20);
}

/* b[0..n), an index's bytes before its hash, with the header of an empty
 * extension ext (8 bytes) after them, signed: what the reader answers. */
static int read_with_extension(struct fx *f, const char *path, uint8_t *b, size_t n, const char *ext)
{
	memcpy(b + n, ext, 8);
	write_signed(path, b, n + 8);
	return read_file(f, path, UINT64_MAX);
}

/* The index of one entry, "ab", as Git writes it (version v). */
static size_t index_of_ab(struct fx *f, unsigned v, uint8_t *out, size_t cap)
{
	git(f, "rm -f .git/index && git update-index --add --cacheinfo 100644,"
	       "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,ab && git update-index --index-version %u",
	    v);
	char index[128];
	snprintf(index, sizeof(index), "%s/.git/index", f->dir);
	size_t n;
	const char *b = slurp(index, &n);
	assert_true(n <= cap && n > 20);
	memcpy(out, b, n);
	return n - 20;
}

static void test_what_git_and_libgit2_could_read_apart_is_refused(void **state)
{
	struct fx *f = *state;
	char path[128];
	snprintf(path, sizeof(path), "%s/crafted", f->dir);
	uint8_t b[4096];
	/* As written: read. */
	size_t n = index_of_ab(f, 2, b, sizeof(b));
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), 0);
	assert_string_equal(f->listed, "100644 0\tab\n");
	/* One byte changed, the checksum left: refused. */
	b[12 + 40] ^= 1;
	write_bytes(path, b, n + 20);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	b[12 + 40] ^= 1;
	/* The name field says 1 ("a"), the NUL says "ab": Git reads "a",
	 * libgit2 "a" too here, but the two rules part elsewhere: refused. */
	b[12 + 61] = 1;
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	b[12 + 61] = 2;
	/* Extended flags in version 2. */
	b[12 + 60] |= 0x40;
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	b[12 + 60] &= (uint8_t)~0x40;
	/* A count past the entries there are, up to four billion. */
	b[11] = 2;
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	memset(b + 8, 0xff, 4);
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	/* Versions 1 and 5, another signature. */
	memset(b + 8, 0, 4);
	b[11] = 1;
	b[7] = 5;
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	b[7] = 2;
	b[0] = 'X';
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	b[0] = 'D';
	/* A required extension (a split index's "link"), and an optional one
	 * that claims more than there is. */
	assert_int_equal(read_with_extension(f, path, b, n, "link\0\0\0\0"), -EBADMSG);
	assert_int_equal(read_with_extension(f, path, b, n, "TREE\0\0\0\x09"), -EBADMSG);
	assert_int_equal(read_with_extension(f, path, b, n, "TREE\0\0\0\0"), 0);
	/* Plain: the extensions a threaded Git reads by offset (EOIE, IEOT),
	 * the untracked cache and the fsmonitor token, and unknown ones, are
	 * refused; REUC and NAME are not, nor a TREE Git would write (an
	 * empty one it would not). */
	read_flags = LZ_GITINDEX_PLAIN;
	assert_int_equal(read_with_extension(f, path, b, n, "REUC\0\0\0\0"), 0);
	assert_int_equal(read_with_extension(f, path, b, n, "TREE\0\0\0\0"), -EBADMSG);
	static const char *const refused[] = { "EOIE", "IEOT", "UNTR", "FSMN", "NAME", "ZZZZ" };
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		char ext[8] = { 0 };
		memcpy(ext, refused[i], 4);
		assert_int_equal(read_with_extension(f, path, b, n, ext), -EOPNOTSUPP);
	}
	read_flags = 0;
	assert_int_equal(read_file(f, path, UINT64_MAX), 0); /* ZZZZ, read plainly */
	/* A mode Git does not record for a file: 040000 is expanded by Git
	 * from the tree object it names. */
	memcpy(b + 12 + 24, "\0\0\x40\0", 4);
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	memcpy(b + 12 + 24, "\0\0\x81\xa4", 4); /* 100644 again */
	/* The bound: the file's size, inclusive. */
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, n + 20), 0);
	assert_int_equal(read_file(f, path, n + 19), -EFBIG);
	/* Version 4: a prefix to strip on the first entry, or longer than the
	 * path before it. */
	n = index_of_ab(f, 4, b, sizeof(b));
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), 0);
	assert_string_equal(f->listed, "100644 0\tab\n");
	assert_int_equal(b[12 + 62], 0); /* the varint of the first entry */
	b[12 + 62] = 1;
	write_signed(path, b, n);
	assert_int_equal(read_file(f, path, UINT64_MAX), -EBADMSG);
	/* Cut short anywhere: refused, never read on past its end. */
	n = index_of_ab(f, 2, b, sizeof(b));
	for (size_t cut = 0; cut < n; cut++) {
		write_signed(path, b, cut);
		int r = read_file(f, path, UINT64_MAX);
		assert_true(r == -EBADMSG);
	}
}

/* The TREE extension's payload in b[0..n) (an index's bytes before its
 * hash): its offset, or 0 where there is none. The test repositories
 * have no path holding "TREE". */
static size_t tree_at(const uint8_t *b, size_t n, size_t *ret_len)
{
	const uint8_t *t = memmem(b + 12, n - 12, "TREE", 4);
	if (t == NULL)
		return 0;
	*ret_len = (size_t)t[4] << 24 | (size_t)t[5] << 16 | (size_t)t[6] << 8 | t[7];
	assert_true((size_t)(t - b) + 8 + *ret_len <= n);
	return (size_t)(t - b) + 8;
}

static int read_plainly(struct fx *f, const char *path)
{
	read_flags = LZ_GITINDEX_PLAIN;
	int r = read_file(f, path, UINT64_MAX);
	read_flags = 0;
	return r;
}

/* Every index Git writes, across the commands an agent runs (conflicts,
 * intent-to-add, a gitlink, skip-worktree, an empty index; index
 * versions 2 to 4), is read plainly, its cache tree checked: valid roots
 * and subtrees match what the reader computes from the entries. */
static void test_every_index_git_writes_passes_the_cache_tree_check(void **state)
{
	struct fx *f = *state;
	static const char *const steps[] = {
		"mkdir -p d/e f a0 'sp ace' && echo 1 >a && echo 2 >d/b && echo 3 >d/e/c && echo 4 >f/g && "
		"printf x >a-b && echo 5 >a.b && echo 6 >a0/x && echo 7 >'sp ace/y' && printf z >\"$(printf 'h\\377i')\" "
		"&& ln -s a lnk && echo e >ex && chmod +x ex && git add . && git commit -qm 1",
		"echo n >d/e/new && git add -N d/e/new && echo 2 >>a && git add a && git commit -qm 2",
		"git rm -q --cached d/e/new && rm d/e/new && git mv f/g f/h && git rm -q a.b && git commit -qm 3",
		"git checkout -q -b side && echo side >d/b && git commit -qam side && git checkout -q - && "
		"echo main >d/b && git commit -qam main && ! git merge -q side >/dev/null 2>&1",
		"echo resolved >d/b && git add d/b && git commit -qm merged",
		"echo s >>d/e/c && git add d/e/c && git stash -q",
		"git stash pop -q && git add d/e/c",
		"git commit -qm 4 && git reset -q --soft HEAD~1",
		"git reset -q --hard",
		"git read-tree HEAD",
		"git read-tree --empty && git write-tree >/dev/null",
		"git reset -q --hard && git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub && "
		"git commit -qm sub",
		"git sparse-checkout set d",
		"git sparse-checkout disable && git update-index --skip-worktree a",
		"git update-index --no-skip-worktree a && echo p >d/p && git add d/p && git commit -qm p -- d/p",
		"echo q >d/e/q && git add d/e/q && git write-tree >/dev/null",
	};
	char index[128];
	snprintf(index, sizeof(index), "%s/.git/index", f->dir);
	unsigned valid_roots = 0, checks = 0, resolve_undo = 0;
	for (unsigned v = 2; v <= 4; v += 2) {
		git(f, "rm -rf .git ./* && git init -q && git config index.version %u && git config core.sparseCheckout false",
		    v);
		for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			git(f, "%s", steps[i]);
			size_t n, tl = 0;
			uint8_t *b = (uint8_t *)slurp(index, &n);
			size_t t = tree_at(b, n - 20, &tl);
			valid_roots += t != 0 && tl > 1 && b[t + 1] != '-';
			resolve_undo += memmem(b, n, "REUC", 4) != NULL;
			if (read_plainly(f, index) != 0)
				fail_msg("index version %u, after step %zu: refused", v, i + 1);
			checks++;
		}
		read_flags = LZ_GITINDEX_PLAIN;
		assert_reads_as_git(f);
		read_flags = 0;
	}
	assert_int_equal(checks, 2 * sizeof(steps) / sizeof(steps[0]));
	assert_true(valid_roots >= 12); /* the check compared, not only passed over invalid nodes */
	assert_true(resolve_undo >= 2);	/* and read Git's resolve-undo records */
}

/* b[0..n) with the TREE payload at t (tl bytes) replaced by p (pl bytes),
 * signed, at path: the reader's answer, read plainly. */
static int read_with_tree(struct fx *f, const char *path, const uint8_t *b, size_t n, size_t t, size_t tl,
			  const void *p, size_t pl)
{
	static uint8_t out[1 << 16];
	assert_true(n - tl + pl + 20 <= sizeof(out));
	memcpy(out, b, t);
	out[t - 4] = (uint8_t)(pl >> 24), out[t - 3] = (uint8_t)(pl >> 16);
	out[t - 2] = (uint8_t)(pl >> 8), out[t - 1] = (uint8_t)pl;
	memcpy(out + t, p, pl);
	memcpy(out + t + pl, b + t + tl, n - t - tl);
	write_signed(path, out, n - tl + pl);
	return read_plainly(f, path);
}

static void hex_to_oid(const char *hex, uint8_t *oid)
{
	for (int i = 0; i < 20; i++)
		assert_int_equal(sscanf(hex + 2 * i, "%2hhx", &oid[i]), 1);
}

/* The attack, measured: a staged change the developer reviews, and a
 * cache tree naming another tree (one more file). Git commits that tree;
 * the reader refuses the index, as it does every other cache tree that
 * does not match the entries, or that Git would not write. */
static void test_a_cache_tree_other_than_the_entries_is_refused(void **state)
{
	struct fx *f = *state;
	git(f, "mkdir d && echo 1 >a && echo 2 >d/b && git add . && git commit -qm 1 && echo 3 >>d/b && git add d/b && "
	       "git write-tree >/dev/null && echo evil >evil && "
	       "printf '100644 blob %%s\\ta\\n100644 blob %%s\\tbackdoor\\n040000 tree %%s\\td\\n' "
	       "$(git rev-parse :a) $(git hash-object -w evil) $(git rev-parse HEAD:d) | git mktree >evil-tree");
	char index[128], forged[128], hex[128];
	snprintf(index, sizeof(index), "%s/.git/index", f->dir);
	snprintf(forged, sizeof(forged), "%s/forged", f->dir);
	size_t n = 0, tl = 0;
	uint8_t b[8192], p[512], evil[20];
	const char *raw = slurp(index, &n);
	assert_true(n <= sizeof(b));
	memcpy(b, raw, n);
	n -= 20;
	size_t t = tree_at(b, n, &tl);
	assert_true(t != 0 && tl < sizeof(p) - 8);
	snprintf(hex, sizeof(hex), "%s/evil-tree", f->dir);
	hex_to_oid(slurp(hex, &(size_t){ 0 }), evil);
	/* As Git wrote it: "\0" "2 1\n" <root id> "d\0" "1 0\n" <id>. */
	assert_memory_equal(b + t, "\0" "2 1\n", 5);
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, b + t, tl), 0);
	/* The root naming the tree with the backdoor: refused, and Git
	 * would have committed it. */
	memcpy(p, b + t, tl);
	memcpy(p + 5, evil, 20);
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, p, tl), -EILSEQ);
	git(f, "cp forged .git/index && git commit -qm reviewed && git ls-tree --name-only HEAD >committed");
	snprintf(hex, sizeof(hex), "%s/committed", f->dir);
	assert_string_equal(slurp(hex, &(size_t){ 0 }), "a\nbackdoor\nd\n");
	/* The subtree's id, or a count, other than the entries'. */
	memcpy(p, b + t, tl);
	p[tl - 1] ^= 1;
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, p, tl), -EILSEQ);
	memcpy(p, b + t, tl);
	p[1] = '3';
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, p, tl), -EILSEQ);
	/* A valid node where the index has no directory. */
	memcpy(p, b + t, tl);
	assert_int_equal(p[25], 'd');
	p[25] = 'q';
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, p, tl), -EILSEQ);
	/* Invalid nodes ("-1") name nothing: read. */
	uint8_t inv[] = "\0-1 1\nd\0-1 0\n", ordered[] = "\0-1 3\nd\0-1 0\nq\0-1 0\naa\0-1 0\n";
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, inv, sizeof(inv) - 1), 0);
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, ordered, sizeof(ordered) - 1), 0);
	/* What Git does not write: a count with a sign or a leading zero, a
	 * name on the root, a '/' in a name, bytes after the root's
	 * subtrees, fewer subtrees than it says, one name twice (Git 2.39
	 * reading it dies in every command) or out of Git's order (length,
	 * then bytes), a second TREE. */
	static const char *const malformed[] = { "\0+1 0\n",
						 "\0-1 01\n",
						 "\0-2 0\n",
						 "r\0-1 0\n",
						 "\0-1 1\nd/e\0-1 0\n",
						 "\0-1 0\nx",
						 "\0-1 2\nd\0-1 0\n",
						 "\0-1 0",
						 "\0-1 2\nd\0-1 0\nd\0-1 0\n",
						 "\0-1 2\nbb\0-1 0\na\0-1 0\n" };
	static const size_t lens[] = { 6, 7, 6, 7, 15, 7, 14, 5, 20, 21 };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		if (read_with_tree(f, forged, b, n, t, tl, malformed[i], lens[i]) != -EBADMSG)
			fail_msg("malformed TREE %zu read", i);
	uint8_t twice[1024];
	memcpy(twice, b + t - 8, tl + 8);
	memcpy(twice + tl + 8, b + t - 8, tl + 8);
	assert_int_equal(read_with_tree(f, forged, b, n, t - 8, tl + 8, twice, 2 * (tl + 8)), -EBADMSG);
}

/* b[0..n) with the extension sig holding p (pl bytes) after it, signed:
 * the reader's answer, read plainly. */
static int read_plainly_with(struct fx *f, const char *path, const uint8_t *b, size_t n, const char *sig,
			     const void *p, size_t pl)
{
	static uint8_t out[1 << 16];
	assert_true(n + 8 + pl + 20 <= sizeof(out));
	memcpy(out, b, n);
	memcpy(out + n, sig, 4);
	out[n + 4] = (uint8_t)(pl >> 24), out[n + 5] = (uint8_t)(pl >> 16);
	out[n + 6] = (uint8_t)(pl >> 8), out[n + 7] = (uint8_t)pl;
	memcpy(out + n + 8, p, pl);
	write_signed(path, out, n + 8 + pl);
	return read_plainly(f, path);
}

/* Resolve-undo records as Git writes them are read; what Git refuses or
 * reads past is not. And bytes that a threaded Git would read as an EOIE
 * extension at the end (here the end of a well-formed record's second
 * object ID) refuse the file, whatever holds them. */
static void test_resolve_undo_records_and_an_end_that_reads_as_eoie(void **state)
{
	struct fx *f = *state;
	char path[128];
	snprintf(path, sizeof(path), "%s/crafted", f->dir);
	uint8_t b[4096], rec[128];
	size_t n = index_of_ab(f, 2, b, sizeof(b));
	/* "ab", stages 1 and 2 recorded, then their two IDs */
	static const char head[] = "ab\0" "100644\0" "100755\0" "0";
	memcpy(rec, head, sizeof(head));
	size_t rl = sizeof(head);
	memset(rec + rl, 0x11, 40);
	rl += 40;
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", rec, rl), 0);
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", rec, rl - 1), -EBADMSG); /* an ID cut short */
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", rec, 7), -EBADMSG);	     /* modes cut short */
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", "ab", 2), -EBADMSG);	     /* no NUL */
	static const char odd_mode[] = "ab\0" "100664\0" "0\0" "0";
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", odd_mode, sizeof(odd_mode)), -EBADMSG);
	static const char none[] = "ab\0" "0\0" "0\0" "0";
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", none, sizeof(none)), -EBADMSG);
	/* The last 32 bytes before the hash: "EOIE", 24, an offset, a hash. */
	memcpy(rec + rl - 32, "EOIE\0\0\0\x18", 8);
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", rec, rl), -EOPNOTSUPP);
	rec[rl - 32 + 7] = 0x19; /* another size: Git finds no EOIE there */
	assert_int_equal(read_plainly_with(f, path, b, n, "REUC", rec, rl), 0);
}

/* An intent-to-add entry is in no tree Git writes: no node above it may
 * be valid, even with the ID Git would write leaving it out. */
static void test_a_valid_node_over_an_intent_to_add_entry_is_refused(void **state)
{
	struct fx *f = *state;
	git(f, "echo 1 >a && git add a && git commit -qm 1 && echo n >n && git add -N n && git write-tree >wt && "
	       "git ls-files | wc -l >count");
	char index[128], forged[128], hex[128];
	snprintf(index, sizeof(index), "%s/.git/index", f->dir);
	snprintf(forged, sizeof(forged), "%s/forged", f->dir);
	size_t n = 0, tl = 0, hl = 0;
	uint8_t b[4096], p[64];
	const char *raw = slurp(index, &n);
	assert_true(n <= sizeof(b));
	memcpy(b, raw, n);
	n -= 20;
	size_t t = tree_at(b, n, &tl);
	assert_true(t != 0);
	assert_memory_equal(b + t, "\0-1 0\n", 6);
	snprintf(hex, sizeof(hex), "%s/count", f->dir);
	assert_string_equal(slurp(hex, &hl), "2\n");
	memcpy(p, "\0" "2 0\n", 5);
	snprintf(hex, sizeof(hex), "%s/wt", f->dir);
	hex_to_oid(slurp(hex, &hl), p + 5);
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, p, 25), -EILSEQ);
	/* The same node, the entry added for real: read. */
	git(f, "git add n && git write-tree >wt");
	raw = slurp(index, &n);
	memcpy(b, raw, n);
	n -= 20;
	t = tree_at(b, n, &tl);
	assert_memory_equal(b + t, "\0" "2 0\n", 5);
	assert_int_equal(read_with_tree(f, forged, b, n, t, tl, b + t, tl), 0);
}

/* Entries out of Git's order, or one twice, are refused plainly. */
static void test_entries_out_of_order_are_refused(void **state)
{
	struct fx *f = *state;
	git(f, "rm -f .git/index && for p in ab ac; do git update-index --add --cacheinfo "
	       "100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,$p; done && git update-index --index-version 2");
	char index[128], path[128];
	snprintf(index, sizeof(index), "%s/.git/index", f->dir);
	snprintf(path, sizeof(path), "%s/crafted", f->dir);
	size_t n;
	uint8_t b[4096];
	const char *raw = slurp(index, &n);
	memcpy(b, raw, n);
	n -= 20;
	uint8_t *first = memmem(b, n, "ab", 3), *second = memmem(b, n, "ac", 3);
	assert_non_null(first);
	assert_non_null(second);
	assert_int_equal(read_plainly(f, index), 0);
	first[1] = 'c', second[1] = 'b'; /* ac, ab */
	write_signed(path, b, n);
	assert_int_equal(read_plainly(f, path), -EBADMSG);
	assert_int_equal(read_file(f, path, UINT64_MAX), 0); /* the classification reads it */
	second[1] = 'c'; /* ac, ac */
	write_signed(path, b, n);
	assert_int_equal(read_plainly(f, path), -EBADMSG);
}

/* The bits that make host Git skip a file's changes are given with the
 * entry, as `git ls-files -v` shows them. */
static void test_assume_unchanged_and_skip_worktree_are_given(void **state)
{
	struct fx *f = *state;
	git(f, "for p in a b c d; do echo $p >$p; done && git add . && git update-index --assume-unchanged a c && "
	       "git update-index --skip-worktree b c");
	assert_reads_as_git(f);
	assert_true(strstr(f->listed, "100644 0 av\ta\n100644 0 sw\tb\n100644 0 av sw\tc\n100644 0\td\n") != NULL);
}

/* A stop from the callback ends the reading with its value. */
static int stop_at_first(void *ctx, const char *path, size_t len, uint32_t mode, unsigned bits)
{
	(void)path, (void)len, (void)mode, (void)bits;
	++*(int *)ctx;
	return -ECANCELED;
}

static void test_the_callback_stops_it(void **state)
{
	struct fx *f = *state;
	git(f, "for i in 1 2 3; do echo $i > f$i; done && git add .");
	char index[128];
	snprintf(index, sizeof(index), "%s/.git/index", f->dir);
	int fd = open(index, O_RDONLY | O_CLOEXEC), calls = 0;
	assert_true(fd >= 0);
	assert_int_equal(lz_gitindex_read(fd, UINT64_MAX, 0, stop_at_first, &calls), -ECANCELED);
	assert_int_equal(calls, 1);
	close(fd);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_versions_2_3_and_4_read_as_git_lists_them),
		T(test_conflict_stages_and_a_path_past_the_name_field),
		T(test_what_git_and_libgit2_could_read_apart_is_refused),
		T(test_the_callback_stops_it),
		T(test_every_index_git_writes_passes_the_cache_tree_check),
		T(test_a_cache_tree_other_than_the_entries_is_refused),
		T(test_a_valid_node_over_an_intent_to_add_entry_is_refused),
		T(test_entries_out_of_order_are_refused),
		T(test_assume_unchanged_and_skip_worktree_are_given),
		T(test_resolve_undo_records_and_an_end_that_reads_as_eoie),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
