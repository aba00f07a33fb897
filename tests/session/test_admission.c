/* The control socket's admission and publication pin
 * (core/session/admission.h, core/session/pin.h; spec 3.3, issue 14),
 * with a real Trust Anchor package, real certificates and real TLS 1.3
 * handshakes over socketpairs: the pin written and read back, and refused
 * when forged (another Domain's or generation's manifest, a CA the
 * manifest does not name, a tampered signature, a wrong mode, a symlink,
 * a malformed file); enrollment issuing a leaf that the coordinator then
 * admits, and refusing a replayed key, an oversized record, another
 * configuration, another Domain and a malformed record; a second record
 * on an enrollment connection never read as an enrollment; another
 * generation's leaf refused at the handshake. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "crypto/sigkey.h"
#include "crypto/x509ca.h"
#include "escalation/trustanchor.h"
#include "session/admission.h"
#include "session/enroll.h"
#include "session/pin.h"
#include "session/tlschan.h"

#define MS 5000

static const uint8_t DOMAIN[32] = { 1, 2, 3, 4 };
static const uint8_t FINGERPRINT[32] = { 5, 6, 7, 8 };

struct fx {
	char dir[64];
	int dirfd;
	struct lz_trust_anchor *ta;
	struct lz_admission *adm;
	uint8_t *pin_buf;
	struct lz_pin pin;
	uint8_t buf[LZ_TLSCHAN_RECORD_MAX];
};

static struct lz_admission *admission_of(const struct lz_trust_anchor *ta, uint64_t gen)
{
	struct lz_admission *a = NULL;
	struct lz_err err = { 0, "" };
	if (lz_admission_new(ta->tls_ca, DOMAIN, FINGERPRINT, gen, ta->manifest, ta->manifest_len, &a, &err) < 0)
		fail_msg("admission: %s", err.msg);
	return a;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct lz_err err = { 0, "" };
	snprintf(f->dir, sizeof(f->dir), "/tmp/lz-admission.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(chmod(f->dir, 0700), 0);
	f->dirfd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dirfd >= 0);
	assert_int_equal(lz_trust_anchor_create(DOMAIN, 7, &f->ta, &err), 0);
	f->adm = admission_of(f->ta, 7);
	assert_int_equal(lz_admission_pin(f->adm, f->dirfd, &err), 0);
	assert_int_equal(lz_pin_read(f->dirfd, DOMAIN, &f->pin_buf, &f->pin, &err), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_pin_remove(f->dirfd);
	(void)unlinkat(f->dirfd, "pin-target", 0);
	close(f->dirfd);
	rmdir(f->dir);
	free(f->pin_buf);
	lz_admission_free(f->adm);
	lz_trust_anchor_free(f->ta);
	free(f);
	return 0;
}

/* ---- the publication pin ------------------------------------------------------ */

static void test_lz_pin_read__what_the_coordinator_pinned(void **state)
{
	struct fx *f = *state;
	assert_int_equal(f->pin.generation, 7);
	assert_int_equal(f->pin.manifest_len, f->ta->manifest_len);
	assert_memory_equal(f->pin.manifest, f->ta->manifest, f->ta->manifest_len);
	/* Mode 0600, one link, the caller's. */
	struct stat st;
	assert_int_equal(fstatat(f->dirfd, LZ_PIN_FILE, &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	/* Another Domain's CLI refuses it. */
	uint8_t *buf = NULL;
	struct lz_pin p;
	struct lz_err err = { 0, "" };
	const uint8_t other[32] = { 9 };
	assert_int_equal(lz_pin_read(f->dirfd, other, &buf, &p, &err), -EPERM);
	assert_non_null(strstr(err.msg, "another Domain or generation"));
	/* Withdrawn: nothing to read. */
	lz_pin_remove(f->dirfd);
	assert_int_equal(lz_pin_read(f->dirfd, DOMAIN, &buf, &p, &err), -ENOENT);
}

static void write_pin(struct fx *f, const struct lz_pin *p)
{
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_pin_write(f->dirfd, p, &err), 0);
}

static int read_pin(struct fx *f, struct lz_err *err)
{
	uint8_t *buf = NULL;
	struct lz_pin p;
	int r = lz_pin_read(f->dirfd, DOMAIN, &buf, &p, err);
	free(buf);
	return r;
}

static void test_lz_pin_read__forgeries_refused(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	/* Another generation's CA with this generation's manifest. */
	struct lz_trust_anchor *ta2 = NULL;
	assert_int_equal(lz_trust_anchor_create(DOMAIN, 8, &ta2, &err), 0);
	struct lz_admission *adm2 = admission_of(ta2, 8);
	assert_int_equal(lz_admission_pin(adm2, f->dirfd, &err), 0);
	uint8_t *buf2 = NULL;
	struct lz_pin p2;
	assert_int_equal(lz_pin_read(f->dirfd, DOMAIN, &buf2, &p2, &err), 0);
	struct lz_pin mixed = f->pin;
	mixed.ca = p2.ca;
	mixed.ca_len = p2.ca_len;
	write_pin(f, &mixed);
	assert_int_equal(read_pin(f, &err), -EPERM);
	assert_non_null(strstr(err.msg, "not the Trust Manifest's TLS root"));
	/* The other generation's manifest under this pin's generation. */
	mixed = p2;
	mixed.generation = 7;
	write_pin(f, &mixed);
	assert_int_equal(read_pin(f, &err), -EPERM);
	/* A manifest whose signature does not hold. */
	uint8_t tampered[LZ_TA_SEALED_MAX];
	memcpy(tampered, f->pin.manifest, f->pin.manifest_len);
	tampered[f->pin.manifest_len - 1] ^= 1;
	mixed = f->pin;
	mixed.manifest = tampered;
	write_pin(f, &mixed);
	assert_int_equal(read_pin(f, &err), -EPERM);
	assert_non_null(strstr(err.msg, "not signed"));
	free(buf2);
	lz_admission_free(adm2);
	lz_trust_anchor_free(ta2);
	/* Bytes that are no pin; a pin readable by others; a symlink. */
	lz_pin_remove(f->dirfd);
	int fd = openat(f->dirfd, LZ_PIN_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "\x07\x01", 2), 2);
	close(fd);
	assert_int_equal(read_pin(f, &err), -EBADMSG);
	write_pin(f, &f->pin);
	assert_int_equal(read_pin(f, &err), 0);
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", f->dir, LZ_PIN_FILE);
	assert_int_equal(chmod(path, 0644), 0);
	assert_true(read_pin(f, &err) < 0);
	assert_int_equal(renameat(f->dirfd, LZ_PIN_FILE, f->dirfd, "pin-target"), 0);
	assert_int_equal(symlink("pin-target", path), 0);
	assert_true(read_pin(f, &err) < 0);
}

/* ---- enrollment and admission ------------------------------------------------- */

/* A connection to the coordinator's side: the handshakes stepped here. */
struct conn {
	int sv[2];
	struct lz_tlschan *srv, *cli;
};

static int conn_open(struct fx *f, struct conn *c, const uint8_t *leaf, size_t leaf_len,
		     const struct lz_sigkey *key)
{
	struct lz_err err = { 0, "" };
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, c->sv), 0);
	assert_int_equal(lz_admission_channel(f->adm, c->sv[0], &c->srv, &err), 0);
	struct lz_tlschan_cred cred = { f->pin.ca, f->pin.ca_len, leaf, leaf_len, key };
	assert_int_equal(lz_tlschan_new(c->sv[1], false, &cred, &c->cli, &err), 0);
	int s = 0, k = 0;
	for (int i = 0; i < 10 && (s != 1 || k != 1); i++) {
		if (k == 0)
			k = lz_tlschan_handshake_step(c->cli, &err);
		if (s == 0)
			s = lz_tlschan_handshake_step(c->srv, &err);
		if (s < 0)
			return s;
	}
	assert_int_equal(s, 1);
	return lz_admission_admit(f->adm, c->srv, &err);
}

static void conn_close(struct conn *c)
{
	lz_tlschan_free(c->srv);
	lz_tlschan_free(c->cli);
	close(c->sv[0]);
	close(c->sv[1]);
}

/* Sends record bytes on an enrollment connection; the coordinator's
 * verdict and the answer the client got. */
static int enroll_raw(struct fx *f, struct conn *c, const uint8_t *rec, size_t len, struct lz_enroll_answer *ans,
		      uint8_t *ans_buf, struct lz_err *err)
{
	assert_int_equal(lz_tlschan_send(c->cli, rec, len, NULL, 0, MS, NULL), 0);
	int r = lz_admission_enroll(f->adm, c->srv, f->buf, err);
	size_t n_fds = 0;
	ssize_t n = lz_tlschan_recv(c->cli, ans_buf, LZ_TLSCHAN_RECORD_MAX, NULL, 0, &n_fds, NULL);
	assert_true(n > 0);
	assert_int_equal(lz_enroll_answer_decode(ans_buf, (size_t)n, ans), 0);
	return r;
}

static int enroll_key(struct fx *f, const struct lz_sigkey *key, const uint8_t fingerprint[32], uint8_t **ret_leaf,
		      size_t *ret_len, struct lz_err *err)
{
	struct conn c;
	assert_int_equal(conn_open(f, &c, NULL, 0, NULL), LZ_ADMISSION_ENROLLMENT);
	uint8_t *csr = NULL;
	size_t csr_len = 0, len = 0;
	assert_int_equal(lz_x509_csr_new(key, &csr, &csr_len, err), 0);
	struct lz_enroll e = { .csr = csr, .csr_len = csr_len };
	memcpy(e.domain_id, DOMAIN, 32);
	memcpy(e.fingerprint, fingerprint, 32);
	uint8_t rec[LZ_ENROLL_MAX];
	assert_int_equal(lz_enroll_encode(&e, rec, sizeof(rec), &len), 0);
	uint8_t *ans_buf = malloc(LZ_TLSCHAN_RECORD_MAX);
	struct lz_enroll_answer ans;
	int r = enroll_raw(f, &c, rec, len, &ans, ans_buf, err);
	assert_int_equal(ans.issued, r == 0);
	if (r == 0) {
		*ret_leaf = malloc(ans.cert_len);
		memcpy(*ret_leaf, ans.cert, ans.cert_len);
		*ret_len = ans.cert_len;
	} else {
		assert_int_equal((int)ans.code, -r);
	}
	free(ans_buf);
	free(csr);
	conn_close(&c);
	return r;
}

static void test_lz_admission__enrolled_client_admitted_once_per_key(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_sigkey *key = NULL;
	assert_int_equal(lz_sigkey_generate(&key), 0);
	uint8_t *leaf = NULL, *again = NULL;
	size_t leaf_len = 0, again_len = 0;
	assert_int_equal(enroll_key(f, key, FINGERPRINT, &leaf, &leaf_len, &err), 0);
	/* The leaf opens an mTLS connection the coordinator admits. */
	struct conn c;
	assert_int_equal(conn_open(f, &c, leaf, leaf_len, key), LZ_ADMISSION_CLIENT);
	conn_close(&c);
	/* The same key again: a replayed enrollment. */
	assert_int_equal(enroll_key(f, key, FINGERPRINT, &again, &again_len, &err), -EPERM);
	assert_non_null(strstr(err.msg, "replayed"));
	/* Another generation's coordinator refuses the leaf in the handshake. */
	struct lz_trust_anchor *ta2 = NULL;
	assert_int_equal(lz_trust_anchor_create(DOMAIN, 8, &ta2, &err), 0);
	struct lz_admission *mine = f->adm;
	f->adm = admission_of(ta2, 8);
	assert_int_equal(conn_open(f, &c, leaf, leaf_len, key), -EPERM);
	conn_close(&c);
	lz_admission_free(f->adm);
	f->adm = mine;
	lz_trust_anchor_free(ta2);
	free(leaf);
	lz_sigkey_free(key);
}

static void test_lz_admission_enroll__refusals_answered(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_sigkey *key = NULL;
	assert_int_equal(lz_sigkey_generate(&key), 0);
	uint8_t *leaf = NULL;
	size_t leaf_len = 0;
	/* Another configuration. */
	const uint8_t other_fp[32] = { 1 };
	assert_int_equal(enroll_key(f, key, other_fp, &leaf, &leaf_len, &err), -ESTALE);
	/* 8,193 bytes, and a malformed record: refused and answered. */
	uint8_t *big = calloc(1, LZ_ENROLL_MAX + 1), *ans_buf = malloc(LZ_TLSCHAN_RECORD_MAX);
	struct lz_enroll_answer ans;
	struct conn c;
	assert_int_equal(conn_open(f, &c, NULL, 0, NULL), LZ_ADMISSION_ENROLLMENT);
	assert_int_equal(enroll_raw(f, &c, big, LZ_ENROLL_MAX + 1, &ans, ans_buf, &err), -EMSGSIZE);
	assert_false(ans.issued);
	assert_int_equal(ans.code, EMSGSIZE);
	conn_close(&c);
	assert_int_equal(conn_open(f, &c, NULL, 0, NULL), LZ_ADMISSION_ENROLLMENT);
	assert_int_equal(enroll_raw(f, &c, big, 100, &ans, ans_buf, &err), -EBADMSG);
	conn_close(&c);
	/* Nothing waiting: the coordinator waits, it does not block. */
	assert_int_equal(conn_open(f, &c, NULL, 0, NULL), LZ_ADMISSION_ENROLLMENT);
	assert_int_equal(lz_admission_enroll(f->adm, c.srv, f->buf, &err), -EAGAIN);
	conn_close(&c);
	/* After all that, the key still enrolls: refusals changed nothing. */
	assert_int_equal(enroll_key(f, key, FINGERPRINT, &leaf, &leaf_len, &err), 0);
	free(leaf);
	free(big);
	free(ans_buf);
	lz_sigkey_free(key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_pin_read__what_the_coordinator_pinned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_pin_read__forgeries_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_admission__enrolled_client_admitted_once_per_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_admission_enroll__refusals_answered, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
