/* Structural verification of a Domain (spec 3.9, FR-11): run with the
 * Domain's exclusive lifecycle lock (an open Host Coordinator that began no
 * generation), so nothing writes while it looks. Each check is reported
 * with its result; nothing is changed.
 *
 *   identity     recorded and deriving the Domain ID
 *   domain store sqlite's integrity check; every generation ended
 *   leases       no image lease names the Domain (one left means a process
 *                of it could not be proved gone)
 *   anchors      anchor/ and each State Anchor in it are directories (no
 *                symlink), each with upper/ and work/; each upper scans
 *                completely (no mount inside, nothing unreadable); an
 *                anchor of a directory the profile no longer persists is
 *                reported
 *   leftovers    nothing set aside by an interrupted reset
 *   ignored      the Ignored Workspace State, when present, is a directory
 *                that scans completely */
#ifndef LZ_DOMAINVERIFY_H
#define LZ_DOMAINVERIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/pathauth.h"
#include "store/domainstore.h"
#include "util/err.h"

struct lz_domain_verify {
	const struct lz_path *storage_root;
	const struct lz_path *domain_root;
	const char *domain_hex;
	lz_dstore *store;
	char *const *persistent;
	size_t n_persistent;
};

/* One check's result; detail says what was found (never file contents). */
typedef void lz_domain_verify_report(void *ctx, const char *check, bool ok, const char *detail);

/* Runs every check, reporting each; returns how many failed (>= 0), or
 * -errno when a check could not run at all. */
int lz_domain_verify(const struct lz_domain_verify *v, lz_domain_verify_report *report, void *ctx,
		     struct lz_err *err);

#endif
