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

#endif
