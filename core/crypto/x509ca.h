/* The generation's certificate authority for the control socket's TLS
 * (spec 3.3 "Protocol cryptography refinement"; issue 14).
 *
 * Its key is the Trust Anchor's Ed25519 TLS-CA key; it lives in the Host
 * Coordinator's memory and dies with the generation. It issues two kinds
 * of leaf, both Ed25519:
 *   - the coordinator's: serverAuth only, for coordinator.lazaret.invalid;
 *   - a Client CLI's: clientAuth only, one hour, bound to this Domain,
 *     generation and client by one URI subject alternative name, issued
 *     from a CSR whose signature proves the client holds its key.
 * lz_x509ca_check_client is the whole acceptance rule for a presented
 * client certificate: signature by this CA, validity now, exactly the
 * clientAuth purpose, and the binding to this Domain and generation.
 *
 * Certificates cross this interface as DER. */
#ifndef LZ_CRYPTO_X509CA_H
#define LZ_CRYPTO_X509CA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "crypto/sigkey.h"
#include "util/err.h"

#define LZ_X509_SERVER_NAME "coordinator.lazaret.invalid"
#define LZ_X509_CLIENT_SECONDS 3600 /* spec 3.3: one-hour client leaves */
/* notBefore of the CA and the coordinator's leaf, this long before their
 * issue. Both ends read one host's clock, but it can be stepped back
 * while a generation serves (NTP, a resumed machine): a notBefore just
 * before the issue would then refuse every new client until the clock
 * caught up. It says nothing else here (every key lives in memory, for
 * one generation). A client's leaf is checked seconds after its issue and
 * stays a one-hour leaf: a minute back. */
#define LZ_X509_BACKDATE_SECONDS (24L * 3600)
#define LZ_X509_CLIENT_BACKDATE_SECONDS 60L
#define LZ_X509_CLIENT_ID_LEN 16
#define LZ_X509_CERT_MAX 4096 /* larger DER is refused, never parsed */
#define LZ_X509_CSR_MAX 4096

struct lz_x509ca;

/* A CA for generation of the Domain domain_id, self-signed with ca_key
 * (which the caller keeps), valid from now. */
int lz_x509ca_new(const struct lz_sigkey *ca_key, const uint8_t domain_id[32], uint64_t generation, time_t now,
		  struct lz_x509ca **ret, struct lz_err *err);

void lz_x509ca_free(struct lz_x509ca *ca);

/* The CA certificate, to pin in the Domain's publication; the caller
 * frees *ret_der. */
int lz_x509ca_cert(const struct lz_x509ca *ca, uint8_t **ret_der, size_t *ret_len, struct lz_err *err);

/* Any certificate (X509) as DER; the caller frees *ret_der. */
struct x509_st;
int lz_x509_der(struct x509_st *cert, uint8_t **ret_der, size_t *ret_len, struct lz_err *err);

/* The coordinator's leaf for leaf_key: serverAuth only, for
 * LZ_X509_SERVER_NAME, valid as long as the CA. */
int lz_x509ca_issue_server(const struct lz_x509ca *ca, const struct lz_sigkey *leaf_key, time_t now,
			   uint8_t **ret_der, size_t *ret_len, struct lz_err *err);

/* A Client CLI's leaf from its DER CSR (an Ed25519 key and the CSR's
 * signature by it; nothing else of the CSR is copied): clientAuth only,
 * valid LZ_X509_CLIENT_SECONDS from now, bound to client_id. */
int lz_x509ca_issue_client(const struct lz_x509ca *ca, const uint8_t *csr, size_t csr_len,
			   const uint8_t client_id[LZ_X509_CLIENT_ID_LEN], time_t now, uint8_t **ret_der,
			   size_t *ret_len, struct lz_err *err);

/* Accepts a presented client certificate only if this CA signed it, it is
 * valid at now, its only extended purpose is clientAuth, it is no CA, and
 * it names this Domain and generation; *ret_client_id is the client it
 * was issued to. -EPERM with the reason otherwise. */
int lz_x509ca_check_client(const struct lz_x509ca *ca, const uint8_t *der, size_t len, time_t now,
			   uint8_t ret_client_id[LZ_X509_CLIENT_ID_LEN], struct lz_err *err);

/* A Client CLI's certificate request for its key (Ed25519, signed by
 * it); the caller frees *ret_der. */
int lz_x509_csr_new(const struct lz_sigkey *key, uint8_t **ret_der, size_t *ret_len, struct lz_err *err);

/* The Ed25519 public key of a DER certificate request (not verified:
 * lz_x509ca_issue_client does that) or certificate. -EPERM otherwise. */
int lz_x509_csr_public(const uint8_t *csr, size_t len, uint8_t out[LZ_SIGKEY_PUBLIC_LEN], struct lz_err *err);
int lz_x509_cert_public(const uint8_t *der, size_t len, uint8_t out[LZ_SIGKEY_PUBLIC_LEN], struct lz_err *err);

#endif
