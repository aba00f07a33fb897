/* What `lazaret state list` reports about the Domains under one Storage
 * Root (spec 3.9, FR-11, DX-6): each Domain Root's recorded identity, whether
 * a Host Coordinator holds it, when it was last used, its State Anchors'
 * upper layers and its Ignored Workspace State with their sizes, and its
 * image leases.
 *
 * Read-only, and safe beside a running Domain: no store is opened (its
 * Host Coordinator owns it), the Domain flock is only tried and released
 * at once, and the sizes are measured by a worker in a user namespace with
 * the developer's map (treescan.h) that follows no link and crosses no
 * mount. A Domain Root whose identity does not derive its own name is
 * listed as foreign, with nothing else read from it. */
#ifndef LZ_STORE_DOMAINSTATE_H
#define LZ_STORE_DOMAINSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/domain.h"
#include "fs/pathauth.h"
#include "fs/treescan.h"
#include "store/identity.h"
#include "util/err.h"

#define LZ_DOMAINSTATE_MAX 4096 /* Domains listed */

struct lz_domain_anchor {
	char path[4096];            /* the persistent directory inside, "/usr/local" */
	struct lz_tree_usage upper; /* its upper layer */
	bool measured;
};

struct lz_domain_state {
	char id[LZ_DOMAIN_ID_HEX_LEN + 1];
	bool identity_ok;
	struct lz_domain_identity identity;
	char problem[LZ_ERR_MSG_MAX]; /* why the identity is not ok; "" otherwise */
	bool never_launched; /* no identity and an empty Domain Root */
	bool active;        /* a Host Coordinator holds the Domain flock */
	bool workspace_gone; /* the recorded workspace no longer exists */
	int64_t last_use;   /* seconds since the epoch: the Domain Store's mtime; 0 unknown */
	struct lz_domain_anchor *anchors;
	size_t n_anchors;
	struct lz_tree_usage ignored;
	bool has_ignored;
	uint64_t leases; /* catalog leases naming this Domain */
	/* Set aside by a `state rm` that stopped before deleting it; nothing
	 * else is read from it (`state rm <id>` finishes the removal). */
	bool removal_interrupted;
};

/* Every Domain Root beneath storage_root/domains, ordered by ID, then
 * every one an interrupted removal set aside. runtime_root
 * is the configured Runtime Root's path label (its Domain flocks decide
 * "active"); sizes false skips the measuring. Free with
 * lz_domain_state_free. */
int lz_domain_state_list(const struct lz_path *storage_root, const char *runtime_root, bool sizes,
			 struct lz_domain_state **ret_v, size_t *ret_n, struct lz_err *err);

void lz_domain_state_free(struct lz_domain_state *v, size_t n);

/* Whether canonical (an absolute path without symlinks) lies inside, or
 * holds, a tree some Domain under storage_root recorded as its sandbox's
 * to write: its workspace (identity.h) or a writable volume's source any
 * launch of it mounted (its volume record). 1 with that tree in ret (cap
 * bytes) and *kind "the workspace" or "a volume source", 0 when none.
 * That sandbox can write there (spec 3.8: a host command is never such
 * bytes). Only Lazaret's own Domain Roots are read; one whose identity
 * or volume record cannot be read (descriptors, memory, a damaged or
 * foreign record) fails the check; one never launched has none. */
int lz_domain_writable_holding(const struct lz_path *storage_root, const char *canonical, char *ret, size_t cap,
			       const char **kind, struct lz_err *err);

/* What `lazaret state inspect` shows of one State Anchor: the changes its
 * upper layer holds over the prepared lower (treescan.h), metadata only. */
struct lz_anchor_changes {
	char path[4096]; /* the persistent directory, "/usr/local" */
	bool has_lower;  /* the lower was found in the prepared tree */
	struct lz_tree_change *v;
	struct lz_tree_changes_count count;
};

/* The changes of the anchors of paths (those that have one) beneath the
 * Domain Root domain_root, against lower_rootfs_fd (the prepared lower's
 * rootfs, -1: none, everything counts as added), at most max listed per
 * anchor. Free with lz_anchor_changes_free. */
int lz_domain_inspect(int domain_root_fd, int lower_rootfs_fd, const char *const *paths, size_t n, size_t max,
		      struct lz_anchor_changes **ret_v, size_t *ret_n, struct lz_err *err);

void lz_anchor_changes_free(struct lz_anchor_changes *v, size_t n);

/* Whether the Domain Root at domain_fd (O_PATH) holds no entry: 1 empty
 * (a Domain never launched), 0 not, -errno. */
int lz_domain_root_empty(int domain_fd);

/* Whether s is a Domain ID as a Domain Root is named: 64 lowercase hex. */
bool lz_domain_id_hex(const char *s);

/* Decodes a State Anchor directory name ("usr%2Flocal") into the
 * persistent path ("/usr/local"); -EINVAL for a name Lazaret never makes. */
int lz_domain_anchor_path(const char *name, char *out, size_t size);

#endif
