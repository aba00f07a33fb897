/* TLS 1.3 over SOCK_SEQPACKET (core/session/tlschan.h; spec 3.3, issue
 * 14): real handshakes between two threads over a socketpair, with
 * certificates of a real generation CA (core/crypto/x509ca.h). Mutual
 * authentication, records byte-exact up to 64 KiB with their descriptors,
 * an enrollment connection without a client certificate, and refusals:
 * another CA on either side, the coordinator's leaf as a client, a plain
 * datagram instead of TLS, TLS 1.2 offered. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "crypto/sigkey.h"
#include "crypto/x509ca.h"
#include "session/tlschan.h"
#include "tls_pair.h"

#define TIMEOUT_MS 10000

#define DOMAIN TLS_PAIR_DOMAIN
#define CLIENT TLS_PAIR_CLIENT

static struct lz_err E;

struct side {
	int fd;
	bool server;
	struct lz_tlschan_cred cred;
	struct lz_tlschan *ch;
	int r;
	struct lz_err err;
};

static void *handshake(void *arg)
{
	struct side *s = arg;
	s->err = (struct lz_err){ 0, "" };
	s->r = lz_tlschan_new(s->fd, s->server, &s->cred, &s->ch, &s->err);
	if (s->r == 0)
		s->r = lz_tlschan_handshake(s->ch, TIMEOUT_MS, &s->err);
	if (s->r < 0)
		shutdown(s->fd, SHUT_RDWR); /* the other side sees the end */
	return NULL;
}

/* Both handshakes at once; the sockets stay in sv. */
static void connect_pair(struct side *srv, struct side *cli, int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	srv->fd = sv[0];
	srv->server = true;
	cli->fd = sv[1];
	cli->server = false;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, handshake, srv), 0);
	handshake(cli);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static void end_pair(struct side *srv, struct side *cli, int sv[2])
{
	lz_tlschan_free(srv->ch);
	lz_tlschan_free(cli->ch);
	close(sv[0]);
	close(sv[1]);
}

static void test_lz_tlschan__mutual_records_and_descriptors(void **state)
{
	(void)state;
	struct gen g;
	gen_make(&g);
	struct side srv = { .cred = server_cred(&g) }, cli = { .cred = client_cred(&g) };
	int sv[2];
	connect_pair(&srv, &cli, sv);
	assert_int_equal(srv.r, 0);
	assert_int_equal(cli.r, 0);
	/* The server names the client by the certificate it presented. */
	uint8_t *der = NULL, id[LZ_X509_CLIENT_ID_LEN];
	size_t len = 0;
	assert_int_equal(lz_tlschan_peer_cert(srv.ch, &der, &len, &E), 0);
	assert_non_null(der);
	assert_int_equal(lz_x509ca_check_client(g.ca, der, len, time(NULL), id, &E), 0);
	assert_memory_equal(id, CLIENT, sizeof(id));
	free(der);

	/* A 64 KiB record with a pipe's write end, then a one-byte record. */
	uint8_t *big = malloc(LZ_TLSCHAN_RECORD_MAX), *in = malloc(LZ_TLSCHAN_RECORD_MAX);
	for (size_t i = 0; i < LZ_TLSCHAN_RECORD_MAX; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(lz_tlschan_send(cli.ch, big, LZ_TLSCHAN_RECORD_MAX, &p[1], 1, TIMEOUT_MS, &E), 0);
	assert_int_equal(lz_tlschan_send(cli.ch, "x", 1, NULL, 0, TIMEOUT_MS, &E), 0);
	close(p[1]);
	int fds[LZ_TLSCHAN_MAX_FDS];
	size_t n_fds = 0;
	assert_int_equal(lz_tlschan_recv(srv.ch, in, LZ_TLSCHAN_RECORD_MAX, fds, LZ_TLSCHAN_MAX_FDS, &n_fds, &E),
			 LZ_TLSCHAN_RECORD_MAX);
	assert_memory_equal(in, big, LZ_TLSCHAN_RECORD_MAX);
	assert_int_equal(n_fds, 1);
	assert_int_equal(write(fds[0], "ok", 2), 2);
	close(fds[0]);
	char got[3] = "";
	assert_int_equal(read(p[0], got, 2), 2);
	assert_string_equal(got, "ok");
	close(p[0]);
	assert_int_equal(lz_tlschan_recv(srv.ch, in, LZ_TLSCHAN_RECORD_MAX, fds, LZ_TLSCHAN_MAX_FDS, &n_fds, &E), 1);
	assert_int_equal(in[0], 'x');
	assert_int_equal(n_fds, 0);
	/* And back. */
	assert_int_equal(lz_tlschan_send(srv.ch, "pong", 4, NULL, 0, TIMEOUT_MS, &E), 0);
	assert_int_equal(lz_tlschan_recv(cli.ch, in, LZ_TLSCHAN_RECORD_MAX, fds, LZ_TLSCHAN_MAX_FDS, &n_fds, &E), 4);
	assert_memory_equal(in, "pong", 4);
	/* Over the limit: refused before anything is sent. */
	assert_int_equal(lz_tlschan_send(cli.ch, big, LZ_TLSCHAN_RECORD_MAX + 1, NULL, 0, TIMEOUT_MS, &E), -EMSGSIZE);
	free(big);
	free(in);
	end_pair(&srv, &cli, sv);
	gen_free(&g);
}

/* Enrollment: no client certificate, the channel still encrypts and the
 * server sees no peer certificate. */
static void test_lz_tlschan__enrollment_without_client_certificate(void **state)
{
	(void)state;
	struct gen g;
	gen_make(&g);
	struct side srv = { .cred = server_cred(&g) }, cli = { .cred = { g.ca_der, g.ca_len, NULL, 0, NULL } };
	int sv[2];
	connect_pair(&srv, &cli, sv);
	assert_int_equal(srv.r, 0);
	assert_int_equal(cli.r, 0);
	uint8_t *der = (uint8_t *)1;
	size_t len = 1;
	assert_int_equal(lz_tlschan_peer_cert(srv.ch, &der, &len, &E), 0);
	assert_null(der);
	assert_int_equal(len, 0);
	end_pair(&srv, &cli, sv);
	gen_free(&g);
}

static void test_lz_tlschan__another_generation_refused(void **state)
{
	(void)state;
	struct gen g, other;
	gen_make(&g);
	gen_make(&other);
	int sv[2];
	/* The client trusts another generation's CA: the server is refused. */
	struct side srv = { .cred = server_cred(&g) };
	struct side cli = { .cred = { other.ca_der, other.ca_len, g.cli_der, g.cli_len, g.cli_key } };
	connect_pair(&srv, &cli, sv);
	assert_int_equal(cli.r, -EPERM);
	assert_non_null(strstr(cli.err.msg, "certificate was refused"));
	assert_true(srv.r < 0);
	end_pair(&srv, &cli, sv);
	/* The client presents another generation's leaf: refused. */
	srv = (struct side){ .cred = server_cred(&g) };
	cli = (struct side){ .cred = { g.ca_der, g.ca_len, other.cli_der, other.cli_len, other.cli_key } };
	connect_pair(&srv, &cli, sv);
	assert_int_equal(srv.r, -EPERM);
	assert_non_null(strstr(srv.err.msg, "certificate was refused"));
	assert_true(cli.r < 0 || lz_tlschan_recv(cli.ch, (uint8_t[LZ_TLSCHAN_RECORD_MAX]){ 0 }, LZ_TLSCHAN_RECORD_MAX,
						 NULL, 0, &(size_t){ 0 }, &E) < 0);
	end_pair(&srv, &cli, sv);
	gen_free(&g);
	gen_free(&other);
}

/* The coordinator's own leaf (serverAuth only) presented by a client. */
static void test_lz_tlschan__server_leaf_as_client_refused(void **state)
{
	(void)state;
	struct gen g;
	gen_make(&g);
	struct side srv = { .cred = server_cred(&g) }, cli = { .cred = server_cred(&g) };
	int sv[2];
	connect_pair(&srv, &cli, sv);
	assert_int_equal(srv.r, -EPERM);
	assert_non_null(strstr(srv.err.msg, "unsuitable certificate purpose"));
	end_pair(&srv, &cli, sv);
	gen_free(&g);
}

/* A peer that speaks no TLS, and one that offers TLS 1.2 only. */
static void test_lz_tlschan__plain_and_tls12_refused(void **state)
{
	(void)state;
	struct gen g;
	gen_make(&g);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	struct side srv = { .fd = sv[0], .server = true, .cred = server_cred(&g) };
	assert_int_equal(send(sv[1], "HELLO lazaret\n", 14, 0), 14);
	handshake(&srv);
	assert_int_equal(srv.r, -EPERM);
	lz_tlschan_free(srv.ch);
	close(sv[0]);
	close(sv[1]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	srv = (struct side){ .fd = sv[0], .server = true, .cred = server_cred(&g) };
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	assert_int_equal(SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION), 1);
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	SSL_set_bio(ssl, rb, wb);
	SSL_set_connect_state(ssl);
	assert_int_equal(SSL_do_handshake(ssl), -1);
	uint8_t hello[4096];
	int n = BIO_read(wb, hello, sizeof(hello));
	assert_true(n > 0);
	assert_int_equal(send(sv[1], hello, (size_t)n, 0), n);
	handshake(&srv);
	assert_int_equal(srv.r, -EPERM);
	assert_non_null(strstr(srv.err.msg, "TLS handshake"));
	/* The server answered with an alert and nothing else. */
	ssize_t m = recv(sv[1], hello, sizeof(hello), MSG_DONTWAIT);
	assert_true(m > 0 && hello[0] == 21 /* alert */);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	lz_tlschan_free(srv.ch);
	close(sv[0]);
	close(sv[1]);
	gen_free(&g);
}


/* Both handshakes stepped by one thread, as the coordinator's serve loop
 * would: neither step ever waits for the peer, and a server whose client
 * says nothing returns at once asking for input. */
static void test_lz_tlschan_handshake_step__interleaved_without_waiting(void **state)
{
	(void)state;
	struct gen g;
	gen_make(&g);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	struct lz_tlschan_cred sc = server_cred(&g);
	struct lz_tlschan *srv = NULL, *cli = NULL;
	assert_int_equal(lz_tlschan_new(sv[0], true, &sc, &srv, &E), 0);
	/* A silent client: the server does not block. */
	assert_int_equal(lz_tlschan_handshake_step(srv, &E), 0);
	lz_tlschan_free(srv);
	close(sv[0]);
	close(sv[1]);
	/* TLS 1.3 with a client certificate: two flights each way at most. */
	assert_true(tls_pair_connect(&g, 0, sv, &srv, &cli) <= 3);
	uint8_t *in = malloc(LZ_TLSCHAN_RECORD_MAX);
	size_t n_fds = 0;
	assert_int_equal(lz_tlschan_send(cli, "hello", 5, NULL, 0, TIMEOUT_MS, &E), 0);
	assert_int_equal(lz_tlschan_recv(srv, in, LZ_TLSCHAN_RECORD_MAX, NULL, 0, &n_fds, &E), 5);
	assert_memory_equal(in, "hello", 5);
	free(in);
	lz_tlschan_free(srv);
	lz_tlschan_free(cli);
	close(sv[0]);
	close(sv[1]);
	gen_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_tlschan__mutual_records_and_descriptors),
		cmocka_unit_test(test_lz_tlschan__enrollment_without_client_certificate),
		cmocka_unit_test(test_lz_tlschan__another_generation_refused),
		cmocka_unit_test(test_lz_tlschan__server_leaf_as_client_refused),
		cmocka_unit_test(test_lz_tlschan__plain_and_tls12_refused),
		cmocka_unit_test(test_lz_tlschan_handshake_step__interleaved_without_waiting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
