/* The credential enrollment record: see enroll.h. */
#include "session/enroll.h"

#include <errno.h>
#include <stdbool.h>

#include "crypto/x509ca.h"
#include "util/postcard.h"

int lz_enroll_encode(const struct lz_enroll *e, uint8_t *buf, size_t cap, size_t *ret_len)
{
	if (e->csr_len == 0 || e->csr_len > LZ_X509_CSR_MAX)
		return -EINVAL;
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, cap < LZ_ENROLL_MAX ? cap : LZ_ENROLL_MAX);
	(void)lz_pc_put_fixed(&w, e->domain_id, sizeof(e->domain_id));
	(void)lz_pc_put_fixed(&w, e->fingerprint, sizeof(e->fingerprint));
	(void)lz_pc_put_bytes(&w, e->csr, e->csr_len);
	return lz_pc_writer_finish(&w, ret_len);
}

int lz_enroll_decode(const uint8_t *buf, size_t len, struct lz_enroll *ret)
{
	if (len > LZ_ENROLL_MAX)
		return -EMSGSIZE;
	struct lz_enroll e;
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, buf, len);
	int k;
	if ((k = lz_pc_get_fixed(&r, e.domain_id, sizeof(e.domain_id))) < 0 ||
	    (k = lz_pc_get_fixed(&r, e.fingerprint, sizeof(e.fingerprint))) < 0 ||
	    (k = lz_pc_get_bytes(&r, LZ_X509_CSR_MAX, &e.csr, &e.csr_len)) < 0 || (k = lz_pc_reader_end(&r)) < 0)
		return k;
	if (e.csr_len == 0)
		return -EBADMSG;
	*ret = e;
	return 0;
}

enum { ANSWER_ISSUED = 0, ANSWER_REFUSED = 1 };

static bool answer_valid(const struct lz_enroll_answer *a)
{
	if (a->issued)
		return a->cert_len > 0 && a->cert_len <= LZ_X509_CERT_MAX;
	return a->code > 0 && a->code <= LZ_ENROLL_MAX_ERRNO && a->message_len <= LZ_ENROLL_MESSAGE_MAX;
}

int lz_enroll_answer_encode(const struct lz_enroll_answer *a, uint8_t *buf, size_t cap, size_t *ret_len)
{
	if (!answer_valid(a) || (!a->issued && !lz_pc_utf8_valid((const uint8_t *)a->message, a->message_len)))
		return -EINVAL;
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, cap);
	(void)lz_pc_put_discriminant(&w, a->issued ? ANSWER_ISSUED : ANSWER_REFUSED);
	if (a->issued) {
		(void)lz_pc_put_bytes(&w, a->cert, a->cert_len);
	} else {
		(void)lz_pc_put_u32(&w, a->code);
		(void)lz_pc_put_str(&w, a->message, a->message_len);
	}
	return lz_pc_writer_finish(&w, ret_len);
}

int lz_enroll_answer_decode(const uint8_t *buf, size_t len, struct lz_enroll_answer *ret)
{
	struct lz_enroll_answer a = { 0 };
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, buf, len);
	uint32_t kind;
	int k = lz_pc_get_discriminant(&r, &kind);
	if (k < 0)
		return k;
	if (kind == ANSWER_ISSUED) {
		a.issued = true;
		k = lz_pc_get_bytes(&r, LZ_X509_CERT_MAX, &a.cert, &a.cert_len);
	} else if (kind == ANSWER_REFUSED) {
		if ((k = lz_pc_get_u32(&r, &a.code)) == 0)
			k = lz_pc_get_str(&r, LZ_ENROLL_MESSAGE_MAX, &a.message, &a.message_len);
	} else {
		return -EBADMSG;
	}
	if (k < 0 || (k = lz_pc_reader_end(&r)) < 0)
		return k;
	if (!answer_valid(&a))
		return -EBADMSG;
	*ret = a;
	return 0;
}
