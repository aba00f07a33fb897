/* Reading a Git index (Git's gitformat-index(5), versions 2 to 4) as Git
 * reads it, one entry at a time (spec 3.5: the index-lock guard reads the
 * index the sandbox wrote before it may replace the host's; the
 * classification reads the index in place). Memory does not grow with the
 * file and time is linear in it: libgit2 read an index whole and then
 * some (a version 4 index rebuilt every path in its own allocation: 63
 * bytes of the router's memory per byte of the file), sized a table from
 * the header's count before it read an entry, and hashed the paths into
 * a table the file could make collide (quadratic: hours for an index
 * under the guard's bound).
 *
 * Where Git and libgit2 could read one file as two sets of paths (Git
 * takes a path's length from its entry's name field, libgit2 from its
 * NUL), the file is refused: the guard must check the paths Git will
 * use. */
#ifndef LZ_ROUTER_GITINDEX_H
#define LZ_ROUTER_GITINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest path read; a longer one refuses the file (no file system
 * here takes such a path). */
#define LZ_GITINDEX_PATH_MAX 65535

/* One entry, in file order: its whole path (len bytes, no NUL in it),
 * the mode recorded, and bits: the merge stage (0 to 3) and whether the
 * entry is marked assume-unchanged or skip-worktree (host Git then does
 * not look at the file's changes). 0 goes on; a negative value stops the
 * reading and is returned. */
#define LZ_GITINDEX_STAGE 3u
#define LZ_GITINDEX_ASSUME_UNCHANGED 4u
#define LZ_GITINDEX_SKIP_WORKTREE 8u
typedef int lz_gitindex_entry_fn(void *ctx, const char *path, size_t len, uint32_t mode, unsigned bits);

/* Reads the index open for reading at fd (from its start, by pread: the
 * offset is left alone) of at most max_bytes. Refused with -EBADMSG: a
 * file that is not "DIRC" version 2, 3 or 4; whose SHA-1 at its end is
 * not that of the rest (also the all-zero one of index.skipHash); an
 * entry past the end, or a count of them other than the header's; a
 * name field other than the path's length (0xFFF: 4,095 or more); a path
 * without its NUL, with a NUL inside, or longer than LZ_GITINDEX_PATH_MAX;
 * extended flags in version 2 or unknown ones; a version 4 prefix longer
 * than the path before it (or any before the first); an extension past
 * the end, or a required one (a first byte not A to Z: a split or a
 * sparse index, which libgit2 cannot read either); a mode Git does not
 * record for a file (100644, 100755, 120000, 160000: Git expands an entry
 * of 040000 from the tree object it names, which the sandbox can write). -EFBIG past
 * max_bytes, -ENOMEM, -errno from reading, what flags add, or what each
 * returned. */
int lz_gitindex_read(int fd, uint64_t max_bytes, unsigned flags, lz_gitindex_entry_fn *each, void *ctx);

/* Whether an entry's path is one Git writes (its verify_path): no empty,
 * ".", ".." or ".git" (any case) component, none longer than
 * max_component. Git reads any path; host Git checks such an entry out
 * all the same (".git/hooks/post-checkout", then runs it). */
bool lz_gitindex_path_ok(const char *p, size_t len, size_t max_component);

/* flags: for an index the sandbox wrote, which host Git will use.
 * - Every optional extension but TREE and REUC is refused with
 *   -EOPNOTSUPP: a Git that loads with threads (index.threads, as scalar
 *   sets it) takes its entries and extensions from the offsets EOIE and
 *   IEOT name, not from where they are, and one could hide a split index
 *   or entries there; host Git trusts an untracked cache (UNTR) and an
 *   fsmonitor token (FSMN) to tell it which files to look at (a
 *   malformed UNTR crashes Git 2.39); NAME is libgit2's. Git inside
 *   writes none of them as Lazaret configures it (runtime/bundle.c). So
 *   is a file whose last 32 bytes before the hash read as an EOIE
 *   extension (Git finds EOIE there, inside any payload, found by a
 *   helper's review: a NAME payload's end hid a second TREE and entries).
 *   Resolve-undo records must be as Git writes them (-EBADMSG; Git reads
 *   past a record without its NUL).
 * - Entries out of Git's order are refused (-EBADMSG), and the cache
 *   tree (TREE) must name the trees of the entries (gitcachetree.h:
 *   -EILSEQ, -E2BIG). */
#define LZ_GITINDEX_PLAIN 1u

#endif
