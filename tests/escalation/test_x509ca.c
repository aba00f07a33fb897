/* The control socket's certificate authority (core/crypto/x509ca.h; spec
 * 3.3 "Protocol cryptography refinement", issue 14): the coordinator's
 * leaf verifies as a TLS server for its one name under the CA and never
 * as a client; a client leaf issued from a real CSR is accepted only by
 * the CA, Domain and generation that issued it, only while valid; wrong
 * keys, forged or malformed requests and certificates are refused with
 * their reason. Certificates and requests are made with OpenSSL itself. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "crypto/sigkey.h"
#include "crypto/x509ca.h"

#define GENERATION 41u
#define NOW ((time_t)1796000000) /* 2026-11 */

static const uint8_t DOMAIN[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
				    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };
static const uint8_t CLIENT[LZ_X509_CLIENT_ID_LEN] = { 0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5, 0x06, 0x17,
						      0x28, 0x39, 0x4a, 0x5b, 0x6c, 0x7d, 0x8e, 0x9f };

struct fx {
	struct lz_sigkey *ca_key;
	struct lz_x509ca *ca;
};

static struct lz_err E;

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(lz_sigkey_generate(&f->ca_key), 0);
	assert_int_equal(lz_x509ca_new(f->ca_key, DOMAIN, GENERATION, NOW, &f->ca, &E), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_x509ca_free(f->ca);
	lz_sigkey_free(f->ca_key);
	free(f);
	return 0;
}

static X509 *parse(const uint8_t *der, size_t len)
{
	const unsigned char *p = der;
	X509 *x = d2i_X509(NULL, &p, (long)len);
	assert_non_null(x);
	return x;
}

/* A DER CSR for a fresh key of that type (EVP_PKEY_ED25519 or EC). */
static uint8_t *make_csr(int type, size_t *ret_len, EVP_PKEY **ret_key)
{
	EVP_PKEY *key = type == EVP_PKEY_EC ? EVP_EC_gen("P-256") : EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	assert_non_null(key);
	X509_REQ *req = X509_REQ_new();
	assert_non_null(req);
	assert_int_equal(X509_REQ_set_pubkey(req, key), 1);
	X509_NAME *n = X509_REQ_get_subject_name(req);
	assert_int_equal(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"any", -1, -1, 0),
			 1);
	assert_true(X509_REQ_sign(req, key, type == EVP_PKEY_EC ? EVP_sha256() : NULL) > 0);
	unsigned char *der = NULL;
	int len = i2d_X509_REQ(req, &der);
	assert_true(len > 0);
	uint8_t *copy = malloc((size_t)len);
	memcpy(copy, der, (size_t)len);
	OPENSSL_free(der);
	X509_REQ_free(req);
	*ret_len = (size_t)len;
	if (ret_key)
		*ret_key = key;
	else
		EVP_PKEY_free(key);
	return copy;
}

static uint8_t *issue_client(struct lz_x509ca *ca, time_t now, size_t *ret_len)
{
	size_t csr_len = 0;
	uint8_t *csr = make_csr(EVP_PKEY_ED25519, &csr_len, NULL), *der = NULL;
	assert_int_equal(lz_x509ca_issue_client(ca, csr, csr_len, CLIENT, now, &der, ret_len, &E), 0);
	free(csr);
	return der;
}

/* OpenSSL's own chain verification with only the CA trusted. */
static int verify_at(struct fx *f, const uint8_t *leaf, size_t leaf_len, int purpose, const char *host, time_t at)
{
	uint8_t *ca_der = NULL;
	size_t ca_len = 0;
	assert_int_equal(lz_x509ca_cert(f->ca, &ca_der, &ca_len, &E), 0);
	X509 *ca = parse(ca_der, ca_len), *x = parse(leaf, leaf_len);
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	assert_int_equal(X509_STORE_add_cert(store, ca), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, store, x, NULL), 1);
	X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_time(param, at);
	X509_VERIFY_PARAM_set_purpose(param, purpose);
	if (host)
		X509_VERIFY_PARAM_set1_host(param, host, 0);
	int ok = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	X509_free(x);
	X509_free(ca);
	free(ca_der);
	return ok;
}

static int verify_as(struct fx *f, const uint8_t *leaf, size_t leaf_len, int purpose, const char *host)
{
	return verify_at(f, leaf, leaf_len, purpose, host, NOW + 10);
}

static void test_lz_x509ca_issue_server__a_server_for_its_name_only(void **state)
{
	struct fx *f = *state;
	struct lz_sigkey *hc_key = NULL;
	uint8_t *der = NULL, id[LZ_X509_CLIENT_ID_LEN];
	size_t len = 0;
	assert_int_equal(lz_sigkey_generate(&hc_key), 0);
	assert_int_equal(lz_x509ca_issue_server(f->ca, hc_key, NOW, &der, &len, &E), 0);
	assert_int_equal(verify_as(f, der, len, X509_PURPOSE_SSL_SERVER, LZ_X509_SERVER_NAME), 1);
	assert_int_equal(verify_as(f, der, len, X509_PURPOSE_SSL_SERVER, "other.lazaret.invalid"), 0);
	assert_int_equal(verify_as(f, der, len, X509_PURPOSE_SSL_CLIENT, NULL), 0);
	/* The HC leaf presented as a client. */
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not for a client"));
	free(der);
	lz_sigkey_free(hc_key);
}

/* The CA and the coordinator's leaf still verify when the host's clock is
 * stepped back an hour after they were issued (NTP, a resumed machine). */
static void test_lz_x509ca_issue_server__valid_across_a_clock_stepped_back(void **state)
{
	struct fx *f = *state;
	struct lz_sigkey *hc_key = NULL;
	uint8_t *der = NULL;
	size_t len = 0;
	assert_int_equal(lz_sigkey_generate(&hc_key), 0);
	assert_int_equal(lz_x509ca_issue_server(f->ca, hc_key, NOW, &der, &len, &E), 0);
	assert_int_equal(verify_at(f, der, len, X509_PURPOSE_SSL_SERVER, LZ_X509_SERVER_NAME, NOW - 3600), 1);
	assert_int_equal(
		verify_at(f, der, len, X509_PURPOSE_SSL_SERVER, LZ_X509_SERVER_NAME, NOW - LZ_X509_BACKDATE_SECONDS - 10),
		0);
	free(der);
	lz_sigkey_free(hc_key);
}

static void test_lz_x509ca_issue_client__accepted_here_and_names_the_client(void **state)
{
	struct fx *f = *state;
	size_t len = 0;
	uint8_t *der = issue_client(f->ca, NOW, &len), id[LZ_X509_CLIENT_ID_LEN] = { 0 };
	assert_int_equal(verify_as(f, der, len, X509_PURPOSE_SSL_CLIENT, NULL), 1);
	assert_int_equal(verify_as(f, der, len, X509_PURPOSE_SSL_SERVER, NULL), 0);
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW + 10, id, &E), 0);
	assert_memory_equal(id, CLIENT, sizeof(id));
	/* The CSR's subject and anything else it asked for are not copied. */
	X509 *x = parse(der, len);
	char cn[64] = "";
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
	assert_string_equal(cn, "Lazaret Client CLI");
	X509_free(x);
	free(der);
}

static void test_lz_x509ca_check_client__expired_and_not_yet_valid(void **state)
{
	struct fx *f = *state;
	size_t len = 0;
	uint8_t *der = issue_client(f->ca, NOW, &len), id[LZ_X509_CLIENT_ID_LEN];
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW + LZ_X509_CLIENT_SECONDS - 1, id, &E), 0);
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW + LZ_X509_CLIENT_SECONDS + 1, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not valid now"));
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW - LZ_X509_CLIENT_BACKDATE_SECONDS - 1, id, &E),
			 -EPERM);
	assert_non_null(strstr(E.msg, "not valid now"));
	free(der);
}

/* Another generation's CA (another key), and a CA of another Domain with
 * this very key and generation: neither's client is accepted. */
static void test_lz_x509ca_check_client__other_ca_domain_or_generation(void **state)
{
	struct fx *f = *state;
	struct lz_sigkey *other_key = NULL;
	struct lz_x509ca *other = NULL, *same_key_other_domain = NULL, *next_generation = NULL;
	uint8_t domain2[32], id[LZ_X509_CLIENT_ID_LEN];
	memcpy(domain2, DOMAIN, 32);
	domain2[31] ^= 1;
	assert_int_equal(lz_sigkey_generate(&other_key), 0);
	assert_int_equal(lz_x509ca_new(other_key, DOMAIN, GENERATION, NOW, &other, &E), 0);
	assert_int_equal(lz_x509ca_new(f->ca_key, domain2, GENERATION, NOW, &same_key_other_domain, &E), 0);
	assert_int_equal(lz_x509ca_new(other_key, DOMAIN, GENERATION + 1, NOW, &next_generation, &E), 0);
	size_t len = 0;
	uint8_t *der = issue_client(other, NOW, &len);
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not issued by this generation's CA"));
	/* The same key in the next generation: refused too. */
	assert_int_equal(lz_x509ca_check_client(next_generation, der, len, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not issued by this generation's CA"));
	free(der);
	der = issue_client(same_key_other_domain, NOW, &len);
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "bound to another Domain or generation"));
	free(der);
	lz_x509ca_free(other);
	lz_x509ca_free(same_key_other_domain);
	lz_x509ca_free(next_generation);
	lz_sigkey_free(other_key);
}

/* A leaf the CA's key signed, but for serverAuth only: no client. */
static void test_lz_x509ca_check_client__server_auth_only_refused(void **state)
{
	struct fx *f = *state;
	uint8_t seed[LZ_SIGKEY_SEED_LEN], *ca_der = NULL, id[LZ_X509_CLIENT_ID_LEN];
	size_t ca_len = 0;
	assert_int_equal(lz_sigkey_seed(f->ca_key, seed), 0);
	EVP_PKEY *ca_pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, sizeof(seed));
	assert_int_equal(lz_x509ca_cert(f->ca, &ca_der, &ca_len, &E), 0);
	X509 *ca = parse(ca_der, ca_len);
	/* The client leaf, re-purposed and re-signed by the CA's key. */
	size_t len = 0;
	uint8_t *der = issue_client(f->ca, NOW, &len);
	X509 *x = parse(der, len);
	int loc = X509_get_ext_by_NID(x, NID_ext_key_usage, -1);
	assert_true(loc >= 0);
	X509_EXTENSION_free(X509_delete_ext(x, loc));
	EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
	sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_server_auth));
	assert_int_equal(X509_add1_ext_i2d(x, NID_ext_key_usage, eku, 1, X509V3_ADD_DEFAULT), 1);
	sk_ASN1_OBJECT_free(eku);
	assert_true(X509_sign(x, ca_pkey, NULL) > 0);
	unsigned char *forged = NULL;
	int n = i2d_X509(x, &forged);
	assert_true(n > 0);
	assert_int_equal(lz_x509ca_check_client(f->ca, forged, (size_t)n, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not for a client"));
	OPENSSL_free(forged);
	X509_free(x);
	X509_free(ca);
	EVP_PKEY_free(ca_pkey);
	free(der);
	free(ca_der);
}

static void test_lz_x509ca_check_client__malformed_refused(void **state)
{
	struct fx *f = *state;
	size_t len = 0;
	uint8_t *der = issue_client(f->ca, NOW, &len), id[LZ_X509_CLIENT_ID_LEN];
	uint8_t *longer = malloc(len + 1);
	memcpy(longer, der, len);
	longer[len] = 0;
	assert_int_equal(lz_x509ca_check_client(f->ca, longer, len + 1, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not one DER certificate"));
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len - 1, NOW + 10, id, &E), -EPERM);
	assert_int_equal(lz_x509ca_check_client(f->ca, der, 0, NOW + 10, id, &E), -EPERM);
	/* A flipped bit in the signature. */
	der[len - 1] ^= 1;
	assert_int_equal(lz_x509ca_check_client(f->ca, der, len, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not issued by this generation's CA"));
	uint8_t *big = calloc(1, LZ_X509_CERT_MAX + 1);
	assert_int_equal(lz_x509ca_check_client(f->ca, big, LZ_X509_CERT_MAX + 1, NOW + 10, id, &E), -EPERM);
	assert_non_null(strstr(E.msg, "at most"));
	free(big);
	free(longer);
	free(der);
}

static void test_lz_x509ca_issue_client__bad_requests_refused(void **state)
{
	struct fx *f = *state;
	size_t len = 0, n = 0;
	uint8_t *der = NULL;
	/* Not Ed25519. */
	uint8_t *csr = make_csr(EVP_PKEY_EC, &len, NULL);
	assert_int_equal(lz_x509ca_issue_client(f->ca, csr, len, CLIENT, NOW, &der, &n, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not Ed25519"));
	free(csr);
	/* Signed by another key than its own (no proof of possession): the
	 * last byte is the signature's. */
	csr = make_csr(EVP_PKEY_ED25519, &len, NULL);
	csr[len - 1] ^= 1;
	assert_int_equal(lz_x509ca_issue_client(f->ca, csr, len, CLIENT, NOW, &der, &n, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not signed by its key"));
	csr[len - 1] ^= 1;
	/* Trailing bytes, truncation, oversize. */
	uint8_t *longer = calloc(1, LZ_X509_CSR_MAX + 1);
	memcpy(longer, csr, len);
	assert_int_equal(lz_x509ca_issue_client(f->ca, longer, len + 1, CLIENT, NOW, &der, &n, &E), -EPERM);
	assert_non_null(strstr(E.msg, "not one DER request"));
	assert_int_equal(lz_x509ca_issue_client(f->ca, csr, len - 1, CLIENT, NOW, &der, &n, &E), -EPERM);
	assert_int_equal(lz_x509ca_issue_client(f->ca, longer, LZ_X509_CSR_MAX + 1, CLIENT, NOW, &der, &n, &E),
			 -EPERM);
	assert_non_null(strstr(E.msg, "at most"));
	assert_null(der);
	/* The good request still works. */
	assert_int_equal(lz_x509ca_issue_client(f->ca, csr, len, CLIENT, NOW, &der, &n, &E), 0);
	free(der);
	free(longer);
	free(csr);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_x509ca_issue_server__a_server_for_its_name_only),
		T(test_lz_x509ca_issue_server__valid_across_a_clock_stepped_back),
		T(test_lz_x509ca_issue_client__accepted_here_and_names_the_client),
		T(test_lz_x509ca_check_client__expired_and_not_yet_valid),
		T(test_lz_x509ca_check_client__other_ca_domain_or_generation),
		T(test_lz_x509ca_check_client__server_auth_only_refused),
		T(test_lz_x509ca_check_client__malformed_refused),
		T(test_lz_x509ca_issue_client__bad_requests_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
