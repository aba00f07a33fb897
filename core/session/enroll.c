/* The credential enrollment record: see enroll.h. */
#include "session/enroll.h"

#include <errno.h>

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
