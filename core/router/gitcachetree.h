/* Git's cache tree, checked against the entries of the index that carries
 * it (spec 3.5: the index-lock guard; gitformat-index(5), "Cache tree").
 * Host Git trusts a valid node of an index's TREE extension as the tree
 * of the entries below it: `git commit` writes the root's tree object
 * as the commit's tree without looking at the entries, and `git status`
 * and `git diff --cached` skip a directory whose node matches HEAD. A
 * sandbox that wrote the index could then have the developer commit a
 * tree the developer never saw staged (measured with Git 2.39: a staged
 * one-line change reviewed with `git diff --cached`, committed with a
 * file the diff never showed). So every valid node of a new index must
 * name the tree Git would write from that index's own entries.
 *
 * Fed the entries in file order, it builds each directory's tree object
 * as Git's cache-tree.c does and keeps, per directory, a keyed digest of
 * its path, its tree's ID and its count of entries; memory is one small
 * record per directory and the open directories' tree objects, each
 * bounded. */
#ifndef LZ_ROUTER_GITCACHETREE_H
#define LZ_ROUTER_GITCACHETREE_H

#include <stddef.h>
#include <stdint.h>

#define LZ_CACHETREE_OID_LEN 20 /* SHA-1, the only index this reads */

/* Past these, -E2BIG: directories in one index, bytes of the open
 * directories' tree objects together, bytes of the TREE extension. */
#define LZ_CACHETREE_MAX_DIRS (1u << 20)
#define LZ_CACHETREE_MAX_BYTES (64u << 20)

struct lz_cachetree;

/* -ENOMEM or 0. */
int lz_cachetree_new(struct lz_cachetree **ret);
void lz_cachetree_free(struct lz_cachetree *ct);

/* One entry: its path (len bytes), mode, object ID, merge stage and
 * whether it is only intended to be added (Git leaves it out of every
 * tree, and no node above it is valid). -EBADMSG for an entry out of
 * Git's order (by path bytes, then stage; one path and stage once),
 * -E2BIG past a bound, -ENOMEM. */
int lz_cachetree_entry(struct lz_cachetree *ct, const char *path, size_t len, uint32_t mode,
		       const uint8_t oid[LZ_CACHETREE_OID_LEN], unsigned stage, int intent_to_add);

/* After the last entry: the TREE extension's payload (ext, len bytes),
 * as Git writes it ("%s%c%d %d\n" and the ID of a valid node, children
 * after their parent in Git's order: by the name's length, then bytes;
 * nothing after the root's subtrees). 0 when every
 * valid node names the directory of its path with the count of entries
 * and the tree ID computed from them, and no entry below it is
 * unmerged, intended to be added or without an object; -EILSEQ when one
 * does not; -EBADMSG for a payload Git would not write; -E2BIG, -ENOMEM.
 * Called once. */
int lz_cachetree_check(struct lz_cachetree *ct, const uint8_t *ext, size_t len);

#endif
