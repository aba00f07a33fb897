/* The control socket's admission: see admission.h. */
#include "session/admission.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "crypto/x509ca.h"
#include "escalation/trustanchor.h"
#include "session/enroll.h"
#include "session/pin.h"
#include "util/testfault.h"

/* Sending the answer of an enrollment: a small record into an idle socket. */
#define ANSWER_MS 1000

struct enrolled {
	uint8_t client_id[LZ_X509_CLIENT_ID_LEN];
	uint8_t key[LZ_SIGKEY_PUBLIC_LEN];
	time_t until; /* the leaf's end */
};

struct lz_admission {
	struct lz_x509ca *ca;
	struct lz_sigkey *leaf_key;
	uint8_t *ca_der, *leaf_der;
	size_t ca_len, leaf_len;
	uint8_t manifest[LZ_TA_SEALED_MAX];
	size_t manifest_len;
	uint8_t domain_id[32], fingerprint[32];
	uint64_t generation;
	struct enrolled *clients;
	size_t n_clients, cap_clients;
};

int lz_admission_new(const struct lz_sigkey *tls_ca, const uint8_t domain_id[32], const uint8_t fingerprint[32],
		     uint64_t generation, const uint8_t *manifest, size_t manifest_len, struct lz_admission **ret,
		     struct lz_err *err)
{
	struct lz_admission *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if (manifest_len == 0 || manifest_len > sizeof(a->manifest)) {
		free(a);
		return lz_err_set(err, EINVAL, "a Trust Manifest of %zu bytes", manifest_len);
	}
	memcpy(a->manifest, manifest, manifest_len);
	a->manifest_len = manifest_len;
	memcpy(a->domain_id, domain_id, 32);
	memcpy(a->fingerprint, fingerprint, 32);
	a->generation = generation;
	time_t now = time(NULL);
	int r;
	if ((r = lz_x509ca_new(tls_ca, domain_id, generation, now, &a->ca, err)) < 0 ||
	    (r = lz_x509ca_cert(a->ca, &a->ca_der, &a->ca_len, err)) < 0)
		goto fail;
	if (lz_sigkey_generate(&a->leaf_key) < 0) {
		r = lz_err_set(err, EIO, "make the coordinator's TLS key");
		goto fail;
	}
	if ((r = lz_x509ca_issue_server(a->ca, a->leaf_key, now, &a->leaf_der, &a->leaf_len, err)) < 0)
		goto fail;
	*ret = a;
	return 0;
fail:
	lz_admission_free(a);
	return r;
}

void lz_admission_free(struct lz_admission *a)
{
	if (a == NULL)
		return;
	lz_x509ca_free(a->ca);
	lz_sigkey_free(a->leaf_key);
	free(a->ca_der);
	free(a->leaf_der);
	free(a->clients);
	free(a);
}

int lz_admission_pin(const struct lz_admission *a, int dirfd, struct lz_err *err)
{
	struct lz_pin p = { .generation = a->generation,
			    .ca = a->ca_der, .ca_len = a->ca_len,
			    .leaf = a->leaf_der, .leaf_len = a->leaf_len,
			    .manifest = a->manifest, .manifest_len = a->manifest_len };
	return lz_pin_write(dirfd, &p, err);
}

int lz_admission_channel(const struct lz_admission *a, int fd, struct lz_tlschan **ret, struct lz_err *err)
{
	struct lz_tlschan_cred cred = { a->ca_der, a->ca_len, a->leaf_der, a->leaf_len, a->leaf_key };
	return lz_tlschan_new(fd, true, &cred, ret, err);
}

static const struct enrolled *find_client(const struct lz_admission *a, const uint8_t id[LZ_X509_CLIENT_ID_LEN])
{
	for (size_t i = 0; i < a->n_clients; i++)
		if (memcmp(a->clients[i].client_id, id, LZ_X509_CLIENT_ID_LEN) == 0)
			return &a->clients[i];
	return NULL;
}

int lz_admission_admit(const struct lz_admission *a, struct lz_tlschan *ch, struct lz_err *err)
{
	uint8_t *der = NULL;
	size_t len = 0;
	int r = lz_tlschan_peer_cert(ch, &der, &len, err);
	if (r < 0)
		return r;
	if (der == NULL)
		return LZ_ADMISSION_ENROLLMENT;
	uint8_t id[LZ_X509_CLIENT_ID_LEN];
	r = lz_x509ca_check_client(a->ca, der, len, time(NULL), id, err);
	free(der);
	if (r < 0)
		return r;
	if (find_client(a, id) == NULL)
		return lz_err_set(err, EPERM, "a client certificate of a client this coordinator never enrolled");
	return LZ_ADMISSION_CLIENT;
}

/* Drops the entries whose leaves have ended, then makes room for one. */
static int room_for_one(struct lz_admission *a, time_t now, struct lz_err *err)
{
	size_t kept = 0;
	for (size_t i = 0; i < a->n_clients; i++)
		if (a->clients[i].until > now)
			a->clients[kept++] = a->clients[i];
	a->n_clients = kept;
	if (a->n_clients < a->cap_clients)
		return 0;
	if (a->cap_clients >= LZ_ADMISSION_MAX_CLIENTS)
		return lz_err_set(err, EBUSY, "%d clients enrolled in the last hour; try again later",
				  LZ_ADMISSION_MAX_CLIENTS);
	size_t cap = a->cap_clients ? 2 * a->cap_clients : 64;
	struct enrolled *c = realloc(a->clients, cap * sizeof(*c));
	if (c == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	a->clients = c;
	a->cap_clients = cap;
	return 0;
}

static int issue(struct lz_admission *a, const struct lz_enroll *e, uint8_t **ret_der, size_t *ret_len,
		 struct lz_err *err)
{
	if (memcmp(e->domain_id, a->domain_id, 32) != 0)
		return lz_err_set(err, EPROTO, "an enrollment for another Domain");
	if (memcmp(e->fingerprint, a->fingerprint, 32) != 0)
		return lz_err_set(err, ESTALE, "this Domain is running with a different configuration (Configuration "
					       "Fingerprint differs); end its sessions, then launch again");
	uint8_t key[LZ_SIGKEY_PUBLIC_LEN];
	int r = lz_x509_csr_public(e->csr, e->csr_len, key, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < a->n_clients; i++)
		if (memcmp(a->clients[i].key, key, sizeof(key)) == 0)
			return lz_err_set(err, EPERM, "a replayed enrollment: this key is enrolled already");
	time_t now = time(NULL);
	if ((r = room_for_one(a, now, err)) < 0)
		return r;
	struct enrolled c = { .until = now + LZ_X509_CLIENT_SECONDS };
	memcpy(c.key, key, sizeof(key));
	if (getrandom(c.client_id, sizeof(c.client_id), 0) != (ssize_t)sizeof(c.client_id))
		return lz_err_set(err, EIO, "no randomness for a client ID");
	/* Test builds: a leaf that ended an hour ago, for the refusal test. */
	time_t issued = lz_test_fault("enroll-expired") ? now - 2 * LZ_X509_CLIENT_SECONDS : now;
	if ((r = lz_x509ca_issue_client(a->ca, e->csr, e->csr_len, c.client_id, issued, ret_der, ret_len, err)) < 0)
		return r;
	a->clients[a->n_clients++] = c;
	return 0;
}

static void answer(struct lz_tlschan *ch, const struct lz_enroll_answer *ans)
{
	uint8_t buf[LZ_X509_CERT_MAX + LZ_ENROLL_MESSAGE_MAX + 32];
	size_t len;
	if (lz_enroll_answer_encode(ans, buf, sizeof(buf), &len) == 0 &&
	    lz_tlschan_send(ch, buf, len, NULL, 0, ANSWER_MS, NULL) == 0)
		(void)lz_tlschan_flush(ch, ANSWER_MS, NULL);
}

int lz_admission_enroll(struct lz_admission *a, struct lz_tlschan *ch, uint8_t *buf, struct lz_err *err)
{
	size_t n_fds = 0;
	ssize_t n = lz_tlschan_recv(ch, buf, LZ_TLSCHAN_RECORD_MAX, NULL, 0, &n_fds, err);
	if (n == -EAGAIN)
		return -EAGAIN;
	if (n < 0)
		return lz_err_prefix(err, (int)n, "enrollment: ");
	struct lz_enroll e;
	int r;
	uint8_t *der = NULL;
	size_t der_len = 0;
	if ((size_t)n > LZ_ENROLL_MAX)
		r = lz_err_set(err, EMSGSIZE, "an enrollment of %zd bytes (at most %u)", n, LZ_ENROLL_MAX);
	else if (lz_enroll_decode(buf, (size_t)n, &e) < 0)
		r = lz_err_set(err, EBADMSG, "a malformed enrollment");
	else
		r = issue(a, &e, &der, &der_len, err);
	struct lz_enroll_answer ans = { .issued = r == 0, .cert = der, .cert_len = der_len };
	if (r < 0) {
		ans.code = -r <= (int)LZ_ENROLL_MAX_ERRNO ? (uint32_t)-r : EIO;
		ans.message = err->msg;
		ans.message_len = strnlen(err->msg, sizeof(err->msg));
	}
	answer(ch, &ans);
	free(der);
	return r < 0 ? r : 0;
}
