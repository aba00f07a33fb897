/* Domain identity (spec 3.2, FR-1).
 *
 * Domain ID = SHA-256("lazaret-domain-id-v1" || be32(len(profile)) || profile
 *                     || be32(len(workspace)) || workspace)
 * over the profile name and the canonical workspace path bytes. It namespaces
 * Domain resources; it is not a credential. */
#ifndef LZ_DOMAIN_H
#define LZ_DOMAIN_H

#include <stddef.h>
#include <stdint.h>

#define LZ_DOMAIN_ID_LEN 32
#define LZ_DOMAIN_ID_HEX_LEN (2 * LZ_DOMAIN_ID_LEN)
/* domains/<prefix><Domain ID>: a Domain Root `state rm` set aside and has
 * not finished deleting (runtime/domainremove.h). */
#define LZ_DOMAIN_ASIDE_PREFIX ".rm-"

/* Fails with -EOVERFLOW when a length does not fit 32 bits. */
int lz_domain_id(const char *profile, size_t profile_len, const char *workspace,
		 size_t workspace_len, uint8_t ret_id[LZ_DOMAIN_ID_LEN]);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void lz_hex(const uint8_t *bytes, size_t n, char *out);

/* Exactly 2n hex digits (either case) into n bytes; -EINVAL otherwise
 * (out may be partly written then). */
int lz_unhex(const char *hex, uint8_t *out, size_t n);

#endif
