/* Removing a Domain whose workspace is gone (`lazaret state rm`, spec 3.9,
 * issue 13). A Domain is named by its ID, and only one whose recorded
 * identity derives that ID and whose recorded workspace no longer exists
 * is removed: a Domain that still has its workspace is reset, not removed.
 *
 * The same safety conditions as a reset: the Domain flock is taken (the
 * runtime directory is created for it when missing), a generation left by
 * a lost coordinator is recorded failed, the image leases of generations
 * proved dead are released (leaserecovery.h), and any lease left refuses.
 * Then the Domain Root is renamed aside within domains/ (one atomic step:
 * an interrupted removal leaves the whole Domain or none of it; `state rm`
 * of that Domain again, or the next removal of any Domain, finishes what
 * an interrupted one set aside) and
 * removed by a worker in a user namespace with the developer's map, and
 * the Domain's runtime directory goes with it. Nothing is resolved
 * through a symlink and no mount is crossed. */
#ifndef LZ_DOMAINREMOVE_H
#define LZ_DOMAINREMOVE_H

#include "fs/pathauth.h"
#include "store/identity.h"
#include "util/err.h"

struct lz_domain_remove {
	const struct lz_path *storage_root;
	const char *runtime_root; /* the configured Runtime Root's path */
	const char *domain_hex;
};

/* The Domain's identity, once it is proved removable by its identity and
 * the absence of its workspace (0), or 1 with an empty identity for a
 * Domain never launched (no identity, an empty Domain Root: `config check
 * --profile` and the `state` commands make it), or 2 with an empty
 * identity for a Domain whose removal was interrupted after it was set
 * aside (its files and runtime directory are left); -ENOENT (no such Domain),
 * -EPROTO (no identity but files, or a foreign identity), -EEXIST (its
 * workspace exists). */
int lz_domain_remove_check(const struct lz_domain_remove *r, struct lz_domain_identity *ret, struct lz_err *err);

/* Checks again, then removes (see above). -EBUSY while the Domain is held
 * or a lease of it is held. */
int lz_domain_remove_run(const struct lz_domain_remove *r, struct lz_err *err);

#endif
