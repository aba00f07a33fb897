/* The control socket's certificate authority: see x509ca.h. */
#include "crypto/x509ca.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "config/domain.h"
#include "util/testfault.h"

/* The CA and the coordinator's leaf outlive any generation's serving. */
#define CA_SECONDS (366L * 24 * 3600)
#define URI_PREFIX "urn:lazaret:control:"
#define URI_MAX (sizeof(URI_PREFIX) + 64 + 1 + 20 + 1 + 2 * LZ_X509_CLIENT_ID_LEN + 1)

struct lz_x509ca {
	EVP_PKEY *key;
	X509 *cert;
	uint8_t domain_id[32];
	uint64_t generation;
};

static int ssl_fail(struct lz_err *err, const char *what)
{
	return lz_err_set(err, EIO, "%s: OpenSSL failed", what);
}

static void binding_uri(const uint8_t domain_id[32], uint64_t generation, const uint8_t *client_id, char *out,
			size_t cap)
{
	char domain[65], client[2 * LZ_X509_CLIENT_ID_LEN + 1];
	lz_hex(domain_id, 32, domain);
	lz_hex(client_id, LZ_X509_CLIENT_ID_LEN, client);
	snprintf(out, cap, URI_PREFIX "%s:%" PRIu64 ":%s", domain, generation, client);
}

/* One extension in OpenSSL's configuration syntax ("critical,..."), with
 * issuer as the authority for key identifiers (NULL: self-signed). */
static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_nconf_nid(NULL, &ctx, nid, value);
	bool ok = ext != NULL && X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok;
}

/* A leaf's extensions: no CA, one key usage, one extended purpose, one
 * subject alternative name (spec 3.3: the purposes never mix). */
static bool leaf_extensions(X509 *x, X509 *ca, const char *purpose, const char *san)
{
	return add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE") &&
	       add_ext(x, ca, NID_key_usage, "critical,digitalSignature") &&
	       add_ext(x, ca, NID_ext_key_usage, purpose) && add_ext(x, ca, NID_subject_alt_name, san) &&
	       add_ext(x, ca, NID_subject_key_identifier, "hash") &&
	       add_ext(x, ca, NID_authority_key_identifier, "keyid:always");
}

/* A certificate with a random serial, the CA's name as issuer, the given
 * subject CN, valid from backdate seconds before now until seconds after
 * it; its extensions are the caller's. */
static X509 *skeleton(const X509_NAME *issuer, const char *cn, EVP_PKEY *subject_key, time_t now, long backdate,
		      long seconds)
{
	X509 *x = X509_new();
	X509_NAME *subject = X509_NAME_new();
	uint8_t serial[16];
	BIGNUM *bn = NULL;
	bool ok = x != NULL && subject != NULL && RAND_bytes(serial, sizeof(serial)) == 1;
	if (ok) {
		serial[0] &= 0x7f; /* positive, 16 bytes at most (RFC 5280 4.1.2.2) */
		serial[0] |= 0x40;
		ok = (bn = BN_bin2bn(serial, sizeof(serial), NULL)) != NULL &&
		     BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL && X509_set_version(x, X509_VERSION_3) &&
		     X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0) &&
		     X509_set_subject_name(x, subject) && X509_set_issuer_name(x, issuer ? issuer : subject) &&
		     X509_time_adj_ex(X509_getm_notBefore(x), 0, -backdate, &now) != NULL &&
		     X509_time_adj_ex(X509_getm_notAfter(x), 0, seconds, &now) != NULL &&
		     X509_set_pubkey(x, subject_key) == 1;
	}
	BN_free(bn);
	X509_NAME_free(subject);
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* OpenSSL's encoding (n bytes, freed here) as the caller's malloc()ed copy. */
static int take_der(unsigned char *der, int n, uint8_t **ret_der, size_t *ret_len, struct lz_err *err)
{
	*ret_der = malloc((size_t)n);
	if (*ret_der == NULL) {
		OPENSSL_free(der);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	memcpy(*ret_der, der, (size_t)n);
	OPENSSL_free(der);
	*ret_len = (size_t)n;
	return 0;
}

int lz_x509_der(X509 *x, uint8_t **ret_der, size_t *ret_len, struct lz_err *err)
{
	unsigned char *der = NULL;
	int n = i2d_X509(x, &der);
	if (n <= 0)
		return ssl_fail(err, "encode a certificate");
	return take_der(der, n, ret_der, ret_len, err);
}

int lz_x509ca_new(const struct lz_sigkey *ca_key, const uint8_t domain_id[32], uint64_t generation, time_t now,
		  struct lz_x509ca **ret, struct lz_err *err)
{
	struct lz_x509ca *ca = calloc(1, sizeof(*ca));
	if (ca == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	memcpy(ca->domain_id, domain_id, 32);
	ca->generation = generation;
	char cn[64];
	snprintf(cn, sizeof(cn), "Lazaret control CA, generation %" PRIu64, generation);
	if ((ca->key = lz_sigkey_evp(ca_key)) == NULL ||
	    (ca->cert = skeleton(NULL, cn, ca->key, now, LZ_X509_BACKDATE_SECONDS, CA_SECONDS)) == NULL ||
	    !add_ext(ca->cert, NULL, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
	    !add_ext(ca->cert, NULL, NID_key_usage, "critical,keyCertSign,cRLSign") ||
	    !add_ext(ca->cert, NULL, NID_subject_key_identifier, "hash") || X509_sign(ca->cert, ca->key, NULL) <= 0) {
		lz_x509ca_free(ca);
		return ssl_fail(err, "create the control CA");
	}
	*ret = ca;
	return 0;
}

void lz_x509ca_free(struct lz_x509ca *ca)
{
	if (ca == NULL)
		return;
	EVP_PKEY_free(ca->key);
	X509_free(ca->cert);
	free(ca);
}

int lz_x509ca_cert(const struct lz_x509ca *ca, uint8_t **ret_der, size_t *ret_len, struct lz_err *err)
{
	return lz_x509_der(ca->cert, ret_der, ret_len, err);
}

static int sign_leaf(const struct lz_x509ca *ca, X509 *x, uint8_t **ret_der, size_t *ret_len, struct lz_err *err)
{
	if (x == NULL || X509_sign(x, ca->key, NULL) <= 0) {
		X509_free(x);
		return ssl_fail(err, "issue a certificate");
	}
	int r = lz_x509_der(x, ret_der, ret_len, err);
	X509_free(x);
	return r;
}

int lz_x509ca_issue_server(const struct lz_x509ca *ca, const struct lz_sigkey *leaf_key, time_t now,
			   uint8_t **ret_der, size_t *ret_len, struct lz_err *err)
{
	EVP_PKEY *key = lz_sigkey_evp(leaf_key);
	if (key == NULL)
		return ssl_fail(err, "the coordinator's TLS key");
	X509 *x = skeleton(X509_get_subject_name(ca->cert), LZ_X509_SERVER_NAME, key, now, LZ_X509_BACKDATE_SECONDS,
			   CA_SECONDS);
	EVP_PKEY_free(key);
	if (x != NULL && !leaf_extensions(x, ca->cert, "critical,serverAuth", "DNS:" LZ_X509_SERVER_NAME)) {
		X509_free(x);
		x = NULL;
	}
	return sign_leaf(ca, x, ret_der, ret_len, err);
}

int lz_x509ca_issue_client(const struct lz_x509ca *ca, const uint8_t *csr, size_t csr_len,
			   const uint8_t client_id[LZ_X509_CLIENT_ID_LEN], time_t now, uint8_t **ret_der,
			   size_t *ret_len, struct lz_err *err)
{
	if (csr_len == 0 || csr_len > LZ_X509_CSR_MAX)
		return lz_err_set(err, EPERM, "a certificate request of %zu bytes (at most %d)", csr_len,
				  LZ_X509_CSR_MAX);
	const unsigned char *p = csr;
	X509_REQ *req = d2i_X509_REQ(NULL, &p, (long)csr_len);
	if (req == NULL || p != csr + csr_len) {
		X509_REQ_free(req);
		return lz_err_set(err, EPERM, "the certificate request is not one DER request");
	}
	EVP_PKEY *key = X509_REQ_get_pubkey(req);
	int r = 0;
	if (key == NULL || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519)
		r = lz_err_set(err, EPERM, "the certificate request's key is not Ed25519");
	else if (X509_REQ_verify(req, key) != 1)
		r = lz_err_set(err, EPERM, "the certificate request is not signed by its key");
	X509_REQ_free(req);
	if (r < 0) {
		EVP_PKEY_free(key);
		return r;
	}
	char uri[URI_MAX], san[URI_MAX + 16];
	binding_uri(ca->domain_id, ca->generation, client_id, uri, sizeof(uri));
	snprintf(san, sizeof(san), "URI:%s", uri);
	X509 *x = skeleton(X509_get_subject_name(ca->cert), "Lazaret Client CLI", key, now,
			   LZ_X509_CLIENT_BACKDATE_SECONDS, LZ_X509_CLIENT_SECONDS);
	EVP_PKEY_free(key);
	/* Test builds (lazaret-faults, util/testfault.h): a client leaf for the
	 * server purpose only, which the coordinator must refuse. */
	const char *purpose = lz_test_fault("enroll-server-purpose") ? "critical,serverAuth" : "critical,clientAuth";
	if (x != NULL && !leaf_extensions(x, ca->cert, purpose, san)) {
		X509_free(x);
		x = NULL;
	}
	return sign_leaf(ca, x, ret_der, ret_len, err);
}

/* Exactly one extended purpose, clientAuth: a leaf that could also serve
 * (the coordinator's, or one asking for both) is no client's. */
static bool client_only(X509 *x)
{
	int crit = 0;
	EXTENDED_KEY_USAGE *eku = X509_get_ext_d2i(x, NID_ext_key_usage, &crit, NULL);
	bool ok = eku != NULL && sk_ASN1_OBJECT_num(eku) == 1 &&
		  OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, 0)) == NID_client_auth;
	EXTENDED_KEY_USAGE_free(eku);
	return ok;
}

/* The one URI name, which must be exactly the one this CA issues for
 * some client: the client ID is read from its tail, the whole name
 * rendered again from it and compared (lowercase hex, nothing more). */
static bool bound_here(const struct lz_x509ca *ca, X509 *x, uint8_t client_id[LZ_X509_CLIENT_ID_LEN])
{
	int crit = 0;
	GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, &crit, NULL);
	bool ok = names != NULL && sk_GENERAL_NAME_num(names) == 1;
	const GENERAL_NAME *n = ok ? sk_GENERAL_NAME_value(names, 0) : NULL;
	ok = ok && n->type == GEN_URI;
	if (ok) {
		const ASN1_IA5STRING *s = n->d.uniformResourceIdentifier;
		const char *v = (const char *)ASN1_STRING_get0_data(s);
		size_t len = (size_t)ASN1_STRING_length(s);
		char want[URI_MAX];
		/* OpenSSL's strings end in a NUL after their length. */
		ok = len > 2 * LZ_X509_CLIENT_ID_LEN &&
		     lz_unhex(v + len - 2 * LZ_X509_CLIENT_ID_LEN, client_id, LZ_X509_CLIENT_ID_LEN) == 0;
		if (ok) {
			binding_uri(ca->domain_id, ca->generation, client_id, want, sizeof(want));
			ok = strlen(want) == len && memcmp(v, want, len) == 0;
		}
	}
	GENERAL_NAMES_free(names);
	return ok;
}

int lz_x509ca_check_client(const struct lz_x509ca *ca, const uint8_t *der, size_t len, time_t now,
			   uint8_t ret_client_id[LZ_X509_CLIENT_ID_LEN], struct lz_err *err)
{
	if (len == 0 || len > LZ_X509_CERT_MAX)
		return lz_err_set(err, EPERM, "a client certificate of %zu bytes (at most %d)", len, LZ_X509_CERT_MAX);
	const unsigned char *p = der;
	X509 *x = d2i_X509(NULL, &p, (long)len);
	EVP_PKEY *key = x ? X509_get0_pubkey(x) : NULL;
	int r = 0;
	uint8_t id[LZ_X509_CLIENT_ID_LEN];
	if (x == NULL || p != der + len)
		r = lz_err_set(err, EPERM, "the client certificate is not one DER certificate");
	else if (X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(ca->cert)) != 0 ||
		 X509_verify(x, ca->key) != 1)
		r = lz_err_set(err, EPERM, "the client certificate was not issued by this generation's CA");
	else if (X509_cmp_time(X509_get0_notBefore(x), &now) >= 0 || X509_cmp_time(X509_get0_notAfter(x), &now) <= 0)
		r = lz_err_set(err, EPERM, "the client certificate is not valid now (expired or not yet valid)");
	else if (X509_check_ca(x) != 0 || !client_only(x))
		r = lz_err_set(err, EPERM, "the certificate is not for a client (its purpose is not clientAuth alone)");
	else if (key == NULL || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519)
		r = lz_err_set(err, EPERM, "the client certificate's key is not Ed25519");
	else if (!bound_here(ca, x, id))
		r = lz_err_set(err, EPERM, "the client certificate is bound to another Domain or generation");
	X509_free(x);
	if (r == 0)
		memcpy(ret_client_id, id, sizeof(id));
	return r;
}

int lz_x509_csr_new(const struct lz_sigkey *key, uint8_t **ret_der, size_t *ret_len, struct lz_err *err)
{
	EVP_PKEY *k = lz_sigkey_evp(key);
	X509_REQ *req = X509_REQ_new();
	unsigned char *der = NULL;
	int n = -1;
	if (k != NULL && req != NULL && X509_REQ_set_pubkey(req, k) == 1 && X509_REQ_sign(req, k, NULL) > 0)
		n = i2d_X509_REQ(req, &der);
	X509_REQ_free(req);
	EVP_PKEY_free(k);
	if (n <= 0 || n > LZ_X509_CSR_MAX) {
		OPENSSL_free(der);
		return ssl_fail(err, "make a certificate request");
	}
	return take_der(der, n, ret_der, ret_len, err);
}

/* An Ed25519 key's 32 public bytes. */
static int ed25519_public(EVP_PKEY *k, uint8_t out[LZ_SIGKEY_PUBLIC_LEN], const char *what, struct lz_err *err)
{
	size_t n = LZ_SIGKEY_PUBLIC_LEN;
	if (k == NULL || EVP_PKEY_get_id(k) != EVP_PKEY_ED25519 || EVP_PKEY_get_raw_public_key(k, out, &n) != 1 ||
	    n != LZ_SIGKEY_PUBLIC_LEN)
		return lz_err_set(err, EPERM, "%s has no Ed25519 key", what);
	return 0;
}

int lz_x509_csr_public(const uint8_t *csr, size_t len, uint8_t out[LZ_SIGKEY_PUBLIC_LEN], struct lz_err *err)
{
	if (len == 0 || len > LZ_X509_CSR_MAX)
		return lz_err_set(err, EPERM, "a certificate request of %zu bytes (at most %d)", len, LZ_X509_CSR_MAX);
	const unsigned char *p = csr;
	X509_REQ *req = d2i_X509_REQ(NULL, &p, (long)len);
	int r = req == NULL || p != csr + len ? lz_err_set(err, EPERM, "the certificate request is not one DER request")
					       : ed25519_public(X509_REQ_get0_pubkey(req), out, "the certificate request", err);
	X509_REQ_free(req);
	return r;
}

int lz_x509_cert_public(const uint8_t *der, size_t len, uint8_t out[LZ_SIGKEY_PUBLIC_LEN], struct lz_err *err)
{
	if (len == 0 || len > LZ_X509_CERT_MAX)
		return lz_err_set(err, EPERM, "a certificate of %zu bytes (at most %d)", len, LZ_X509_CERT_MAX);
	const unsigned char *p = der;
	X509 *x = d2i_X509(NULL, &p, (long)len);
	int r = x == NULL || p != der + len ? lz_err_set(err, EPERM, "not one DER certificate")
					     : ed25519_public(X509_get0_pubkey(x), out, "the certificate", err);
	X509_free(x);
	return r;
}
