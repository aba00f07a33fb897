/* Ed25519 signing keys (spec 3.3 "Protocol cryptography refinement"): the
 * protocol issuer, the coordinator's protocol key and the Agent Sandbox
 * request-signing key are each one of these.
 *
 * Keys live in process memory only (spec 3.3: all Trust Anchor material is
 * ephemeral); lz_sigkey_free wipes them. The one exception is the sandbox
 * key's seed, which the coordinator exports once with lz_sigkey_seed to
 * deliver it read-only into the sandbox (spec 3.3).
 *
 * Linked into the static Escalation Client too, so it depends on libcrypto
 * and core/util only. */
#ifndef LZ_CRYPTO_SIGKEY_H
#define LZ_CRYPTO_SIGKEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_SIGKEY_SEED_LEN 32
#define LZ_SIGKEY_PUBLIC_LEN 32
#define LZ_SIGKEY_SIG_LEN 64

struct lz_sigkey;

/* A fresh key from the kernel's random source. -ENOMEM, -EIO (OpenSSL). */
int lz_sigkey_generate(struct lz_sigkey **ret);

/* The key of a 32-byte seed (RFC 8032 private key). -ENOMEM, -EIO. */
int lz_sigkey_from_seed(const uint8_t seed[LZ_SIGKEY_SEED_LEN], struct lz_sigkey **ret);

/* The seed; the caller wipes it after use. -EIO. */
int lz_sigkey_seed(const struct lz_sigkey *key, uint8_t out[LZ_SIGKEY_SEED_LEN]);

void lz_sigkey_public(const struct lz_sigkey *key, uint8_t out[LZ_SIGKEY_PUBLIC_LEN]);

/* Pure Ed25519 over msg[0..len). -EIO when OpenSSL fails. */
int lz_sigkey_sign(const struct lz_sigkey *key, const void *msg, size_t len, uint8_t sig[LZ_SIGKEY_SIG_LEN]);

/* Whether sig is pub's Ed25519 signature over msg[0..len). False for an
 * invalid public key or any OpenSSL failure. */
bool lz_sig_verify(const uint8_t pub[LZ_SIGKEY_PUBLIC_LEN], const void *msg, size_t len,
		   const uint8_t sig[LZ_SIGKEY_SIG_LEN]);

/* SHA-256 of data[0..len) (credential IDs, spec 3.3). -EIO. */
int lz_sha256(const void *data, size_t len, uint8_t out[32]);

/* OpenSSL's key object (EVP_PKEY), a new reference the caller releases
 * with EVP_PKEY_free: for certificates and TLS (crypto/x509ca.h). NULL
 * when OpenSSL fails. */
struct evp_pkey_st;
struct evp_pkey_st *lz_sigkey_evp(const struct lz_sigkey *key);

/* Wipes and frees; accepts NULL. */
void lz_sigkey_free(struct lz_sigkey *key);

#endif
