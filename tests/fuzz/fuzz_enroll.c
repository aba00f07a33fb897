/* libFuzzer target for core/session/enroll.c and the CSR path of
 * core/crypto/x509ca.c (issue 14): an accepted record borrows its CSR
 * from inside the input and re-encodes to exactly the input (canonical);
 * a refused one is -EMSGSIZE (only over LZ_ENROLL_MAX) or -EBADMSG; the
 * CSR of an accepted record, given to a real CA, is issued or refused with
 * -EPERM, nothing else. The same bytes also go to the two decoders of
 * what a Client CLI reads from the coordinator, the enrollment answer and
 * the publication pin (core/session/pin.c): accepted only canonical and
 * within their limits. Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/sigkey.h"
#include "crypto/x509ca.h"
#include "session/enroll.h"
#include "session/pin.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static struct lz_x509ca *the_ca(void)
{
	static struct lz_x509ca *ca;
	if (ca == NULL) {
		uint8_t seed[LZ_SIGKEY_SEED_LEN] = { 1 }, domain[32] = { 2 };
		struct lz_sigkey *key = NULL;
		struct lz_err e = { 0, "" };
		check(lz_sigkey_from_seed(seed, &key) == 0);
		check(lz_x509ca_new(key, domain, 3, 1796000000, &ca, &e) == 0);
		lz_sigkey_free(key);
	}
	return ca;
}

/* The answer and the pin: canonical when accepted. */
static void client_side(const uint8_t *data, size_t size)
{
	static uint8_t again[LZ_PIN_MAX + LZ_X509_CERT_MAX];
	size_t len = 0;
	struct lz_enroll_answer a;
	if (lz_enroll_answer_decode(data, size, &a) == 0) {
		check(a.issued ? a.cert_len > 0 && a.cert_len <= LZ_X509_CERT_MAX
			       : a.code > 0 && a.code <= LZ_ENROLL_MAX_ERRNO && a.message_len <= LZ_ENROLL_MESSAGE_MAX);
		check(lz_enroll_answer_encode(&a, again, sizeof(again), &len) == 0 && len == size &&
		      memcmp(again, data, size) == 0);
	}
	struct lz_pin p;
	if (lz_pin_decode(data, size, &p) == 0) {
		check(size <= LZ_PIN_MAX && p.ca_len > 0 && p.leaf_len > 0 && p.manifest_len > 0);
		check(lz_pin_encode(&p, again, sizeof(again), &len) == 0 && len == size && memcmp(again, data, size) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	client_side(data, size);
	struct lz_enroll e;
	memset(&e, 0xa5, sizeof(e));
	int r = lz_enroll_decode(data, size, &e);
	if (r < 0) {
		check(r == -EBADMSG || (r == -EMSGSIZE && size > LZ_ENROLL_MAX));
		return 0;
	}
	check(size <= LZ_ENROLL_MAX && e.csr_len > 0 && e.csr_len <= LZ_X509_CSR_MAX);
	check(e.csr >= data && e.csr + e.csr_len == data + size);
	uint8_t again[LZ_ENROLL_MAX];
	size_t len = 0;
	check(lz_enroll_encode(&e, again, sizeof(again), &len) == 0 && len == size && memcmp(again, data, size) == 0);
	uint8_t client[LZ_X509_CLIENT_ID_LEN] = { 4 }, *der = NULL;
	size_t der_len = 0;
	struct lz_err err = { 0, "" };
	r = lz_x509ca_issue_client(the_ca(), e.csr, e.csr_len, client, 1796000000, &der, &der_len, &err);
	check(r == 0 || r == -EPERM);
	if (r == 0) {
		uint8_t id[LZ_X509_CLIENT_ID_LEN];
		check(lz_x509ca_check_client(the_ca(), der, der_len, 1796000000 + 10, id, &err) == 0);
		check(memcmp(id, client, sizeof(id)) == 0);
	}
	free(der);
	return 0;
}
