/* ctlforge: the attacker at the control socket for tests/e2e/test_control.sh
 * (issue 14). A process of the developer's UID that knows the pinned CA
 * and tries what the Host Coordinator must refuse; it prints one line with
 * the outcome the test asserts on:
 *
 *   ctlforge RUNDIR DOMAIN FINGERPRINT CASE [FILE]
 *     silent         a connection that never starts its handshake
 *     plain          a datagram that is not TLS
 *     tls12          a TLS 1.2-only ClientHello
 *     wrong-ca       a client leaf of another CA, bound as this Domain's
 *     enroll FILE    an honest enrollment; the key's seed and the leaf to FILE
 *     use FILE       mTLS with FILE's key and leaf, then a Hello with a
 *                    wrong fingerprint: "admitted" when the coordinator
 *                    answers it (the channel was accepted)
 *     replay         the same enrollment record twice, on two connections
 *     oversize       an enrollment record of LZ_ENROLL_MAX + 1 bytes
 *     enroll-then-op an enrollment, then a Hello on the same connection
 *
 * Outcomes: "issued", "admitted", "refused <reason>", "closed", "no answer".
 * Exit 0 with an outcome, 2 when the attack could not even be set up.
 * Never installed; it runs nothing in the Domain (the Hello it sends is
 * refused before any command could be). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "config/domain.h"
#include "crypto/sigkey.h"
#include "crypto/x509ca.h"
#include "session/clientauth.h"
#include "session/enroll.h"
#include "session/pin.h"
#include "session/tlschan.h"
#include "session/wire.h"

#define MS 10000

static struct lz_path rundir;
static uint8_t domain_id[32], fingerprint[32];
static struct lz_pin pin;
static uint8_t buf[LZ_TLSCHAN_RECORD_MAX];

static void die(const char *what, const char *why)
{
	fprintf(stderr, "ctlforge: %s: %s\n", what, why);
	exit(2);
}

static int dial(void)
{
	int fd = -1;
	int r = lz_clientauth_connect(&rundir, &fd);
	if (r < 0)
		die("connect", strerror(-r));
	return fd;
}

/* The coordinator's last word on fd: a datagram (an alert), then EOF. */
static void expect_end(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	for (int i = 0; i < 4; i++) {
		if (poll(&p, 1, MS) <= 0) {
			puts("no answer");
			return;
		}
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
			puts("refused closed");
			return;
		}
	}
	puts("no answer");
}

static struct lz_tlschan *tls_client(int fd, const uint8_t *leaf, size_t leaf_len, const struct lz_sigkey *key)
{
	struct lz_err err = { 0, "" };
	struct lz_tlschan_cred cred = { pin.ca, pin.ca_len, leaf, leaf_len, key };
	struct lz_tlschan *ch = NULL;
	if (lz_tlschan_new(fd, false, &cred, &ch, &err) < 0 || lz_tlschan_handshake(ch, MS, &err) < 0)
		die("handshake", err.msg);
	return ch;
}

static size_t enroll_record(const struct lz_sigkey *key, uint8_t *out)
{
	struct lz_err err = { 0, "" };
	uint8_t *csr = NULL;
	size_t csr_len = 0, len = 0;
	if (lz_x509_csr_new(key, &csr, &csr_len, &err) < 0)
		die("csr", err.msg);
	struct lz_enroll e = { .csr = csr, .csr_len = csr_len };
	memcpy(e.domain_id, domain_id, 32);
	memcpy(e.fingerprint, fingerprint, 32);
	if (lz_enroll_encode(&e, out, LZ_ENROLL_MAX, &len) < 0)
		die("enroll", "encode");
	free(csr);
	return len;
}

/* Sends an enrollment record; prints and returns the answer (1 issued). */
static int enroll_send(struct lz_tlschan *ch, const uint8_t *rec, size_t len, uint8_t **leaf, size_t *leaf_len)
{
	struct lz_err err = { 0, "" };
	size_t n_fds = 0;
	if (lz_tlschan_send(ch, rec, len, NULL, 0, MS, &err) < 0) {
		printf("refused %s\n", err.msg);
		return 0;
	}
	ssize_t n = lz_tlschan_recv(ch, buf, sizeof(buf), NULL, 0, &n_fds, &err);
	struct lz_enroll_answer a;
	if (n < 0) {
		printf("refused %s\n", err.msg);
		return 0;
	}
	if (lz_enroll_answer_decode(buf, (size_t)n, &a) < 0)
		die("enroll", "a malformed answer");
	if (!a.issued) {
		printf("refused %.*s\n", (int)a.message_len, a.message);
		return 0;
	}
	if (leaf != NULL) {
		*leaf = malloc(a.cert_len);
		memcpy(*leaf, a.cert, a.cert_len);
		*leaf_len = a.cert_len;
	}
	return 1;
}

/* A Hello with a wrong fingerprint: an admitted channel gets the
 * coordinator's answer; a refused one its alert or end. */
static void hello_probe(struct lz_tlschan *ch)
{
	struct lz_err err = { 0, "" };
	struct lz_wire_msg m = { .type = LZ_WIRE_HELLO, .hello = { .protocol = LZ_WIRE_PROTOCOL, .client_pid = 1 } };
	memcpy(m.hello.domain_id, domain_id, 32);
	memset(m.hello.fingerprint, 0xee, 32);
	(void)lz_wire_send(ch, &m, NULL, 0, MS, &err);
	struct lz_wire_msg got;
	size_t n_fds = 0;
	int r = lz_wire_recv(ch, buf, sizeof(buf), &got, NULL, 0, &n_fds, &err);
	if (r == -ECONNRESET)
		r = lz_wire_recv(ch, buf, sizeof(buf), &got, NULL, 0, &n_fds, &err);
	if (r < 0) {
		printf("refused %s\n", err.msg);
		return;
	}
	if (got.type == LZ_WIRE_REFUSED && got.refused.code == ESTALE)
		puts("admitted");
	else if (got.type == LZ_WIRE_REFUSED)
		printf("refused %.*s\n", (int)got.refused.message_len, got.refused.message);
	else
		puts("admitted");
	lz_wire_msg_release(&got);
}

static void case_tls12(int fd)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	SSL_set_bio(ssl, rb, wb);
	SSL_set_connect_state(ssl);
	(void)SSL_do_handshake(ssl);
	int n = BIO_read(wb, buf, sizeof(buf));
	if (n <= 0 || send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
		die("tls12", "no ClientHello");
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	expect_end(fd);
}

static void case_wrong_ca(int fd)
{
	struct lz_err err = { 0, "" };
	struct lz_sigkey *ca_key = NULL, *key = NULL;
	struct lz_x509ca *ca = NULL;
	uint8_t *csr = NULL, *leaf = NULL, id[LZ_X509_CLIENT_ID_LEN] = { 1 };
	size_t csr_len = 0, leaf_len = 0;
	if (lz_sigkey_generate(&ca_key) < 0 || lz_sigkey_generate(&key) < 0 ||
	    lz_x509ca_new(ca_key, domain_id, pin.generation, time(NULL), &ca, &err) < 0 ||
	    lz_x509_csr_new(key, &csr, &csr_len, &err) < 0 ||
	    lz_x509ca_issue_client(ca, csr, csr_len, id, time(NULL), &leaf, &leaf_len, &err) < 0)
		die("wrong-ca", err.msg);
	hello_probe(tls_client(fd, leaf, leaf_len, key));
}

static void save(const char *file, const struct lz_sigkey *key, const uint8_t *leaf, size_t leaf_len)
{
	uint8_t seed[LZ_SIGKEY_SEED_LEN];
	(void)lz_sigkey_seed(key, seed);
	FILE *f = fopen(file, "wbx");
	if (f == NULL || fwrite(seed, 1, sizeof(seed), f) != sizeof(seed) || fwrite(leaf, 1, leaf_len, f) != leaf_len ||
	    fclose(f) != 0)
		die(file, strerror(errno));
}

static void case_use(int fd, const char *file)
{
	uint8_t data[LZ_SIGKEY_SEED_LEN + LZ_X509_CERT_MAX];
	FILE *f = fopen(file, "rb");
	size_t n = f ? fread(data, 1, sizeof(data), f) : 0;
	if (f)
		fclose(f);
	struct lz_sigkey *key = NULL;
	if (n <= LZ_SIGKEY_SEED_LEN || lz_sigkey_from_seed(data, &key) < 0)
		die(file, "no saved key and leaf");
	struct lz_err err = { 0, "" };
	struct lz_tlschan_cred cred = { pin.ca, pin.ca_len, data + LZ_SIGKEY_SEED_LEN, n - LZ_SIGKEY_SEED_LEN, key };
	struct lz_tlschan *ch = NULL;
	if (lz_tlschan_new(fd, false, &cred, &ch, &err) < 0)
		die("use", err.msg);
	/* Another generation's coordinator fails our check of its leaf, or
	 * ends the handshake over ours. */
	if (lz_tlschan_handshake(ch, MS, &err) < 0) {
		printf("refused %s\n", err.msg);
		return;
	}
	hello_probe(ch);
}

int main(int argc, char **argv)
{
	if (argc < 5)
		die("usage", "ctlforge RUNDIR DOMAIN FINGERPRINT CASE [FILE]");
	struct lz_err err = { 0, "" };
	rundir.fd = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
	rundir.canonical = argv[1];
	if (rundir.fd < 0 || lz_unhex(argv[2], domain_id, 32) < 0 || lz_unhex(argv[3], fingerprint, 32) < 0)
		die("usage", "RUNDIR DOMAIN FINGERPRINT");
	uint8_t *pin_buf = NULL;
	if (lz_pin_read(rundir.fd, domain_id, &pin_buf, &pin, &err) < 0)
		die("pin", err.msg);
	const char *c = argv[4], *file = argc > 5 ? argv[5] : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fd = dial();
	if (strcmp(c, "silent") == 0) {
		expect_end(fd);
	} else if (strcmp(c, "plain") == 0) {
		if (send(fd, "HELLO lazaret\n", 14, MSG_NOSIGNAL) != 14)
			die("plain", strerror(errno));
		expect_end(fd);
	} else if (strcmp(c, "tls12") == 0) {
		case_tls12(fd);
	} else if (strcmp(c, "wrong-ca") == 0) {
		case_wrong_ca(fd);
	} else if (strcmp(c, "use") == 0 && file) {
		case_use(fd, file);
	} else if (strcmp(c, "enroll") == 0 || strcmp(c, "replay") == 0 || strcmp(c, "oversize") == 0 ||
		   strcmp(c, "enroll-then-op") == 0) {
		struct lz_sigkey *key = NULL;
		if (lz_sigkey_generate(&key) < 0)
			die("key", "generate");
		static uint8_t rec[LZ_ENROLL_MAX + 1];
		size_t len = enroll_record(key, rec);
		struct lz_tlschan *ch = tls_client(fd, NULL, 0, NULL);
		uint8_t *leaf = NULL;
		size_t leaf_len = 0;
		if (strcmp(c, "oversize") == 0) {
			memset(rec + len, 0, sizeof(rec) - len);
			(void)enroll_send(ch, rec, sizeof(rec), NULL, NULL);
		} else if (enroll_send(ch, rec, len, &leaf, &leaf_len)) {
			if (strcmp(c, "enroll") == 0) {
				if (file == NULL)
					die("enroll", "needs FILE");
				save(file, key, leaf, leaf_len);
				puts("issued");
			} else if (strcmp(c, "enroll-then-op") == 0) {
				hello_probe(ch);
			} else { /* replay: the same record on a new connection */
				struct lz_tlschan *again = tls_client(dial(), NULL, 0, NULL);
				(void)enroll_send(again, rec, len, NULL, NULL);
			}
		}
	} else {
		die("usage", "unknown CASE");
	}
	return 0;
}
