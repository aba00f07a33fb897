/* One generation's Trust Anchor package and protocol keys (spec 3.3
 * "Protocol cryptography refinement"), held in the Host Coordinator's
 * memory and never written to disk except the sandbox's own material:
 *
 *   tls_ca       the TLS CA root (used by the control socket's TLS)
 *   issuer       the protocol issuer root; signs the Trust Manifest and
 *                the two protocol credentials
 *   coordinator  the coordinator's protocol key: decisions, chunks,
 *                results and Session Request Capabilities
 *   sandbox      the Agent Sandbox's request-signing key; its seed goes
 *                into the sandbox, and the HC keeps only its public half
 *                once the sandbox holds it
 *
 * The credential directory the sandbox sees read-only (LZ_TA_* names):
 * its key seed, the sealed Trust Manifest, and the sealed coordinator and
 * sandbox credentials. No other private key leaves this struct. */
#ifndef LZ_ESCALATION_TRUSTANCHOR_H
#define LZ_ESCALATION_TRUSTANCHOR_H

#include <stddef.h>
#include <stdint.h>

#include "escalation/record.h"
#include "util/err.h"

#define LZ_TA_KEY_FILE "request-key"          /* the sandbox key's 32-byte seed */
#define LZ_TA_MANIFEST_FILE "trust-manifest"  /* sealed trust-manifest */
#define LZ_TA_COORDINATOR_FILE "coordinator"  /* sealed coordinator credential */
#define LZ_TA_SANDBOX_FILE "sandbox"          /* sealed sandbox credential */
#define LZ_TA_SEALED_MAX 256                  /* each sealed credential or manifest */

struct lz_trust_anchor {
	struct lz_esc_scope scope;
	struct lz_sigkey *tls_ca, *issuer, *coordinator, *sandbox; /* sandbox: NULL once dropped */
	uint8_t issuer_public[LZ_SIGKEY_PUBLIC_LEN];
	uint8_t coordinator_public[LZ_SIGKEY_PUBLIC_LEN];
	uint8_t sandbox_public[LZ_SIGKEY_PUBLIC_LEN];
	uint8_t sandbox_credential_id[LZ_ESC_CREDENTIAL_ID_LEN];
	uint8_t manifest[LZ_TA_SEALED_MAX], coordinator_credential[LZ_TA_SEALED_MAX],
		sandbox_credential[LZ_TA_SEALED_MAX];
	size_t manifest_len, coordinator_credential_len, sandbox_credential_len;
};

/* Fresh keys, manifest and credentials for one generation. */
int lz_trust_anchor_create(const uint8_t domain_id[LZ_ESC_DOMAIN_ID_LEN], uint64_t generation,
			   struct lz_trust_anchor **ret, struct lz_err *err);

/* Writes the sandbox's credential files (0444, created exclusively)
 * beneath dir_fd, and its key seed beneath key_dir_fd (owned
 * directories). The key is mounted on its own, over an empty
 * placeholder of its name in dir_fd: a file mount holds the file, so
 * its host name can go once the sandbox runs. Needs the sandbox key. */
int lz_trust_anchor_write_credentials(const struct lz_trust_anchor *ta, int dir_fd, int key_dir_fd,
				      struct lz_err *err);

/* The sandbox holds its key: unlinks the key file beneath key_dir_fd and
 * forgets the private half (spec 3.3). Idempotent. */
void lz_trust_anchor_drop_sandbox_key(struct lz_trust_anchor *ta, int key_dir_fd);

/* The sealed Session Request Capability of session_id into
 * out[0..LZ_ESC_CAPABILITY_MAX). */
int lz_trust_anchor_capability(const struct lz_trust_anchor *ta, const uint8_t session_id[LZ_ESC_ID_LEN],
			       uint8_t *out, size_t *ret_len);

/* Opens a sealed capability of this generation: signed by the
 * coordinator, of this scope and naming this generation's sandbox
 * credential. -EPERM, -EBADMSG, -ESTALE (another Domain or generation). */
int lz_trust_anchor_check_capability(const struct lz_trust_anchor *ta, const uint8_t *sealed, size_t len,
				     uint8_t session_id[LZ_ESC_ID_LEN]);

/* Wipes every key; accepts NULL. */
void lz_trust_anchor_free(struct lz_trust_anchor *ta);

#endif
