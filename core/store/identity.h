/* A Domain's recorded identity (spec 3.9: Domains are resolved through
 * trusted host metadata, never a path the user names): the profile name
 * and canonical workspace its Domain ID was derived from, kept as
 * `identity` in its Domain Root.
 *
 * The file is written once, by the Host Coordinator holding the Domain
 * flock, and read without any lock (a Domain in use can be listed). It
 * proves nothing by itself: a reader recomputes the Domain ID from it and
 * refuses a file that does not derive the Domain Root's own name (a
 * copied, edited or foreign Domain). */
#ifndef LZ_STORE_IDENTITY_H
#define LZ_STORE_IDENTITY_H

#include <stddef.h>

#include "util/err.h"

#define LZ_IDENTITY_FILE "identity"
#define LZ_IDENTITY_MAX 8192

struct lz_domain_identity {
	char profile[256];
	char workspace[4096];
};

/* Records profile and workspace beneath the Domain Root domain_fd (0600,
 * by rename) unless the same identity is there; a different one refuses
 * (-EPROTO). */
int lz_identity_ensure(int domain_fd, const char *profile, const char *workspace, struct lz_err *err);

/* Reads the identity beneath domain_fd and checks that it derives
 * domain_hex: -EPROTO (malformed or foreign), -ENOENT (none recorded),
 * -EPERM (type, owner, mode, links). */
int lz_identity_read(int domain_fd, const char *domain_hex, struct lz_domain_identity *ret, struct lz_err *err);

/* The host directories a Domain's sandbox has been given to write (its
 * writable volumes' canonical sources, spec 3.2), kept as `volumes` in
 * its Domain Root: every one any launch mounted, not only the current
 * configuration's, since the bytes its sandbox wrote stay there after the
 * volume leaves the configuration (spec 3.8: a host command is never
 * such bytes). Like the identity, written by the coordinator holding the
 * Domain flock and read without a lock. */
#define LZ_VOLUMES_FILE "volumes"
#define LZ_VOLUMES_MAX_BYTES (1024 * 1024)

/* Adds sources (canonical paths) to the record, rewriting it (durable, by
 * rename) only when one is new; a record that would pass
 * LZ_VOLUMES_MAX_BYTES refuses (-E2BIG). */
int lz_identity_record_volumes(int domain_fd, const char *const *sources, size_t n, struct lz_err *err);

/* Calls each(ctx, source) for every recorded source until one returns
 * nonzero, and returns that (0: all seen, or no record). -EPROTO
 * (malformed), -EPERM (type, owner, mode, links), -errno. */
int lz_identity_volumes_each(int domain_fd, int (*each)(void *ctx, const char *source), void *ctx,
			     struct lz_err *err);

#endif
