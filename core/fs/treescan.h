/* Read-only, descriptor-relative scans of trees: disk usage, and the
 * changes an overlay upper layer holds over its lower (spec 3.9, state
 * inspection).
 *
 * State Anchor upper layers (spec 3.6) and Ignored Workspace State hold
 * files and 0700 directories owned by subordinate IDs, which the developer
 * cannot read. The _in_userns variants therefore scan in a broker worker
 * (proc/broker.h) that is root of a user namespace with the developer's map
 * (proc/userns.h: 0 -> uid, 1..65536 -> subordinate IDs), as
 * lz_tree_remove_in_userns does; the result comes back over a pipe as
 * fixed-size records, read while the worker runs.
 *
 * Threat: the scanned trees are written by the sandbox, so their shape is
 * hostile. Nothing is followed: every directory is entered with
 * openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
 * RESOLVE_NO_XDEV, O_NOFOLLOW) relative to its parent, a symlink is an
 * entry and never a path, and a directory on another mount is counted but
 * not entered, so a planted link or mount cannot aim the scan at the host.
 * Depth (LZ_TREE_MAX_DEPTH), entries (LZ_TREE_SCAN_MAX_ENTRIES) and the
 * memory a changes scan holds for names (LZ_TREE_SCAN_MAX_HELD) are
 * bounded; hitting a bound or meeting an unreadable entry makes the result
 * incomplete, not an error, and a changes scan says which bound it hit.
 * Only metadata is read, never file contents, and nothing is written to
 * the tree. */
#ifndef LZ_TREESCAN_H
#define LZ_TREESCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/tree.h"
#include "util/err.h"

/* Entries (beneath the root) one scan examines at most. */
#define LZ_TREE_SCAN_MAX_ENTRIES 10000000u

/* Memory a changes scan holds at once, across all levels, for the names it
 * has read and not yet walked: every byte of each level's name buffer
 * (names with their NUL, and the buffer's unused room) plus
 * 2 * sizeof(char *) per name (a pointer to sort it by, and as much again
 * for the sort's scratch). That is all it allocates per entry, so the
 * worker stays within this plus a fixed amount per level
 * (LZ_TREE_MAX_DEPTH): 64 MiB is about 3 million names of 3 bytes, well
 * before LZ_TREE_SCAN_MAX_ENTRIES. */
#define LZ_TREE_SCAN_MAX_HELD (64u << 20)

/* Inodes with several links that a usage scan remembers; see bytes. */
#define LZ_TREE_USAGE_MAX_LINKS 65536u

/* The first bound that cut a scan short. */
enum lz_tree_limit {
	LZ_TREE_LIMIT_NONE,    /* none (an unreadable entry alone makes a scan incomplete) */
	LZ_TREE_LIMIT_DEPTH,   /* a directory deeper than LZ_TREE_MAX_DEPTH */
	LZ_TREE_LIMIT_ENTRIES, /* more than LZ_TREE_SCAN_MAX_ENTRIES entries */
	LZ_TREE_LIMIT_HELD,    /* names needing more than LZ_TREE_SCAN_MAX_HELD at once */
	LZ_TREE_LIMIT_PATH,    /* a path longer than LZ_TREE_CHANGE_PATH_MAX */
};

struct lz_tree_usage {
	/* Allocated: sum of st_blocks * 512 over the entries, each inode
	 * with several links once (up to LZ_TREE_USAGE_MAX_LINKS such
	 * inodes; beyond that per link). A directory that is not entered
	 * (mount point, unreadable) adds no bytes. */
	uint64_t bytes;
	uint64_t files;  /* non-directories (symlinks included), per link */
	uint64_t dirs;   /* directories, the root included */
	bool incomplete; /* a limit was hit or an entry could not be read */
	enum lz_tree_limit limit; /* DEPTH or ENTRIES when one was (then incomplete) */
};

/* In this process, for trees the caller can read. dirfd/name is a single
 * component (not "", ".", ".." or containing '/'); a non-directory root
 * counts as one file. A missing name is -ENOENT, an unreadable root an
 * error; anything unreadable beneath it only marks *ret incomplete. *ret
 * untouched on failure. */
int lz_tree_usage(int dirfd, const char *name, struct lz_tree_usage *ret, struct lz_err *err);

struct lz_idmap;

/* lz_tree_usage run by a broker worker in a user namespace with map. The
 * worker's own errors keep their errno (-ENOENT for a missing name); a
 * worker that dies or replies malformed is -EIO. */
int lz_tree_usage_in_userns(const struct lz_idmap *map, int dirfd, const char *name,
			    struct lz_tree_usage *ret, struct lz_err *err);

enum lz_tree_change_kind {
	LZ_TREE_ADDED,   /* not in the lower */
	LZ_TREE_CHANGED, /* present in the lower (any type) and replaced or modified */
	LZ_TREE_DELETED, /* a whiteout: hides the lower entry of that name */
	LZ_TREE_OPAQUE,  /* a directory hiding the lower's directory of that name */
};

#define LZ_TREE_CHANGE_PATH_MAX 4096

struct lz_tree_change {
	enum lz_tree_change_kind kind;
	mode_t mode;   /* of the upper entry (0 for DELETED) */
	uint64_t size; /* st_size of the upper entry (0 for DELETED) */
	/* Relative to the layer root, '/'-separated, no leading '/', NUL-
	 * terminated raw bytes (no encoding: may hold newlines or non-UTF-8).
	 * An entry whose path does not fit is neither listed nor entered, and
	 * the scan is incomplete. */
	char path[LZ_TREE_CHANGE_PATH_MAX];
};


struct lz_tree_changes_count {
	size_t listed;   /* written to the caller's array: min(total, max) */
	uint64_t total;  /* all changes found (at most LZ_TREE_SCAN_MAX_ENTRIES) */
	bool incomplete; /* a limit was hit or an entry could not be read */
	enum lz_tree_limit limit; /* which limit, when one was (then incomplete) */
};

/* The overlay changes the upper layer upper_dirfd/upper_name holds over the
 * lower lower_dirfd/lower_name (lower_name NULL: no lower, every entry is
 * ADDED), scanned by a broker worker in a user namespace with map:
 *   - a whiteout (a character device 0/0, or an empty regular file with the
 *     xattr user.overlay.whiteout or trusted.overlay.whiteout) is DELETED;
 *   - a directory with the xattr user.overlay.opaque or
 *     trusted.overlay.opaque = "y" is OPAQUE; its contents are listed, as
 *     ADDED, since the lower is hidden beneath it ("x", the marker of a
 *     directory holding xattr whiteouts, is not opaque);
 *   - an entry whose name exists in the lower (fstatat AT_SYMLINK_NOFOLLOW
 *     beneath the lower directory, each opened with LZ_RESOLVE_OWNED) is
 *     CHANGED, otherwise ADDED; a directory present in both that is not
 *     opaque is no change itself, only its changed contents are.
 * The worker sees trusted.* only with CAP_SYS_ADMIN in the initial user
 * namespace, so in practice the user.* forms (overlay "userxattr", as
 * Lazaret mounts) are the ones recognised.
 * Order: pre-order, siblings sorted bytewise (strcmp), so the output is
 * deterministic; a directory's contents follow it ("d/x" before "d.txt").
 * Up to max changes go to ret (a caller array; NULL when max is 0); past
 * max they are only counted. ret's contents are unspecified on failure,
 * *ret_count untouched. The worker's own errors keep their errno (-ENOENT
 * for a missing upper or lower, -ENOTDIR for a non-directory); a worker
 * that dies or replies malformed is -EIO. */
int lz_tree_changes_in_userns(const struct lz_idmap *map, int upper_dirfd,
			      const char *upper_name, int lower_dirfd, const char *lower_name,
			      struct lz_tree_change *ret, size_t max,
			      struct lz_tree_changes_count *ret_count, struct lz_err *err);

/* lz_tree_changes_in_userns with the bound on memory held for names as a
 * parameter, max_held (1 to LZ_TREE_SCAN_MAX_HELD; otherwise -EINVAL), in
 * place of LZ_TREE_SCAN_MAX_HELD: for tests, which reach a lowered bound
 * with a small tree. */
int lz_tree_changes_in_userns_bounded(const struct lz_idmap *map, int upper_dirfd,
				      const char *upper_name, int lower_dirfd,
				      const char *lower_name, size_t max_held,
				      struct lz_tree_change *ret, size_t max,
				      struct lz_tree_changes_count *ret_count, struct lz_err *err);

#endif
