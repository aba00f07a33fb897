/* Resetting State Anchors (spec 3.9, FR-11, OR-5): discarding the upper
 * layer of one persistent directory, or of all, so that the next launch
 * sees the current prepared lower there again. The prepared lower, the
 * workspace, the Ignored Workspace State and every other State Anchor are
 * left alone.
 *
 * The caller holds the Domain's exclusive lifecycle lock: an open Host
 * Coordinator handle (lz_hc_open) that has begun no generation, which
 * took the Domain flock, recorded a lost generation failed and released
 * the leases of generations proved dead. A lease of the Domain that is
 * still held then means a process may still use the state, and the reset
 * refuses (-EBUSY).
 *
 * Crash consistency (OR-5): each selected anchor directory is first
 * renamed aside within anchor/ (one atomic rename), then removed by a
 * worker in a user namespace with the developer's map (its files belong
 * to subordinate IDs). Interrupted before the rename, the anchor is as it
 * was; after it, the anchor is absent and the next launch creates it
 * empty. What an interrupted reset set aside is removed by the next
 * reset. Every name is resolved beneath the Domain Root's descriptor with
 * no symlink followed and no mount crossed: an anchor that is a symlink
 * refuses. */
#ifndef LZ_ANCHORRESET_H
#define LZ_ANCHORRESET_H

#include <stddef.h>

#include "fs/pathauth.h"
#include "util/err.h"

struct lz_anchor_reset {
	const struct lz_path *storage_root; /* its catalog holds the leases */
	const struct lz_path *domain_root;
	const char *domain_hex;
	char *const *persistent; /* the profile's persistent directories */
	size_t n_persistent;
};

/* The most anchors one reset takes (a profile lists up to 256 persistent
 * directories; earlier profiles leave anchors of their own). */
#define LZ_ANCHOR_RESET_MAX 65536

/* The persistent directories a reset of paths (n == 0: all of the Domain's
 * anchors) would discard, as container paths, sorted; only those with an
 * anchor. A path that is not one of the profile's persistent directories
 * refuses (-EINVAL). Free with lz_anchor_reset_free. */
int lz_anchor_reset_plan(const struct lz_anchor_reset *a, const char *const *paths, size_t n, char ***ret_v,
			 size_t *ret_n, struct lz_err *err);

/* Discards the anchors of the planned paths (see above). planned is held
 * to what a plan could name: every path one of the profile's persistent
 * directories (as lz_anchor_reset_plan normalizes them), or exactly every
 * anchor the Domain has (the plan of all); anything else, or a path named
 * twice, refuses (-EINVAL) before anything is touched. */
int lz_anchor_reset_run(const struct lz_anchor_reset *a, const char *const *planned, size_t n, struct lz_err *err);

void lz_anchor_reset_free(char **v, size_t n);

#endif
