/* The publication pin: see pin.h. */
#include "session/pin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crypto/x509ca.h"
#include "escalation/record.h"
#include "escalation/trustanchor.h"
#include "fs/file.h"
#include "util/sys.h"
#include "util/postcard.h"

#define PIN_ASIDE LZ_PIN_FILE ".new"

int lz_pin_encode(const struct lz_pin *p, uint8_t *buf, size_t cap, size_t *ret_len)
{
	if (p->ca_len == 0 || p->ca_len > LZ_X509_CERT_MAX || p->leaf_len == 0 || p->leaf_len > LZ_X509_CERT_MAX ||
	    p->manifest_len == 0 || p->manifest_len > LZ_TA_SEALED_MAX)
		return -EINVAL;
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, cap < LZ_PIN_MAX ? cap : LZ_PIN_MAX);
	(void)lz_pc_put_u64(&w, p->generation);
	(void)lz_pc_put_bytes(&w, p->ca, p->ca_len);
	(void)lz_pc_put_bytes(&w, p->leaf, p->leaf_len);
	(void)lz_pc_put_bytes(&w, p->manifest, p->manifest_len);
	return lz_pc_writer_finish(&w, ret_len);
}

int lz_pin_decode(const uint8_t *buf, size_t len, struct lz_pin *ret)
{
	if (len > LZ_PIN_MAX)
		return -EBADMSG;
	struct lz_pin p;
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, buf, len);
	int k;
	if ((k = lz_pc_get_u64(&r, &p.generation)) < 0 || (k = lz_pc_get_bytes(&r, LZ_X509_CERT_MAX, &p.ca, &p.ca_len)) < 0 ||
	    (k = lz_pc_get_bytes(&r, LZ_X509_CERT_MAX, &p.leaf, &p.leaf_len)) < 0 ||
	    (k = lz_pc_get_bytes(&r, LZ_TA_SEALED_MAX, &p.manifest, &p.manifest_len)) < 0 ||
	    (k = lz_pc_reader_end(&r)) < 0)
		return -EBADMSG;
	if (p.ca_len == 0 || p.leaf_len == 0 || p.manifest_len == 0)
		return -EBADMSG;
	*ret = p;
	return 0;
}

int lz_pin_write(int dirfd, const struct lz_pin *p, struct lz_err *err)
{
	uint8_t buf[LZ_PIN_MAX];
	size_t len;
	int r = lz_pin_encode(p, buf, sizeof(buf), &len);
	if (r < 0)
		return lz_err_set(err, -r, "encode the publication pin");
	(void)unlinkat(dirfd, PIN_ASIDE, 0);
	if ((r = lz_file_create(dirfd, PIN_ASIDE, buf, len, 0600, LZ_RESOLVE_OWNED, err)) < 0)
		return r;
	if (renameat(dirfd, PIN_ASIDE, dirfd, LZ_PIN_FILE) < 0) {
		r = lz_err_set(err, errno, "publish %s: %s", LZ_PIN_FILE, strerror(errno));
		(void)unlinkat(dirfd, PIN_ASIDE, 0);
	}
	return r;
}

void lz_pin_remove(int dirfd)
{
	(void)unlinkat(dirfd, LZ_PIN_FILE, 0);
}

/* The manifest is the issuer's signed statement binding this CA to this
 * Domain and generation (spec 3.3). */
static int manifest_binds(const struct lz_pin *p, const uint8_t domain_id[32], struct lz_err *err)
{
	uint32_t kind;
	struct lz_esc_bytes payload;
	struct lz_esc_record claimed, rec;
	if (lz_esc_frame(p->manifest, p->manifest_len, &kind, &payload) < 0 || kind != LZ_ESC_TRUST_MANIFEST ||
	    lz_esc_decode(kind, payload.p, payload.n, &claimed) < 0)
		return lz_err_set(err, EPERM, "the publication pin's Trust Manifest is malformed");
	if (lz_esc_open(p->manifest, p->manifest_len, LZ_ESC_KIND_BIT(LZ_ESC_TRUST_MANIFEST),
			claimed.manifest.issuer_public, &rec, NULL) < 0)
		return lz_err_set(err, EPERM, "the publication pin's Trust Manifest is not signed by its issuer");
	if (memcmp(rec.scope.domain_id, domain_id, 32) != 0 || rec.scope.generation != p->generation)
		return lz_err_set(err, EPERM, "the publication pin's Trust Manifest is for another Domain or "
					      "generation");
	uint8_t ca_public[LZ_SIGKEY_PUBLIC_LEN];
	int r = lz_x509_cert_public(p->ca, p->ca_len, ca_public, err);
	if (r < 0)
		return lz_err_prefix(err, r, "the publication pin's CA: ");
	if (memcmp(ca_public, rec.manifest.tls_ca_public, sizeof(ca_public)) != 0)
		return lz_err_set(err, EPERM, "the publication pin's CA is not the Trust Manifest's TLS root");
	return 0;
}

int lz_pin_read(int dirfd, const uint8_t domain_id[32], uint8_t **ret_buf, struct lz_pin *ret, struct lz_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	int r = lz_file_read_owned(dirfd, LZ_PIN_FILE, LZ_PIN_MAX, &buf, &len, err);
	if (r < 0)
		return r;
	struct lz_pin p;
	if (lz_pin_decode((const uint8_t *)buf, len, &p) < 0)
		r = lz_err_set(err, EBADMSG, "the publication pin %s is malformed", LZ_PIN_FILE);
	else
		r = manifest_binds(&p, domain_id, err);
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret_buf = (uint8_t *)buf;
	*ret = p;
	return 0;
}
