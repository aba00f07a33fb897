/* Test helper: one generation's real control-socket credentials
 * (core/crypto/x509ca.h) and a TLS-connected SOCK_SEQPACKET pair
 * (core/session/tlschan.h), for the unit tests of what runs inside the
 * channel. Header-only; each test file includes it once. */
#ifndef LZ_TESTS_TLS_PAIR_H
#define LZ_TESTS_TLS_PAIR_H

#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crypto/sigkey.h"
#include "crypto/x509ca.h"
#include "session/tlschan.h"

static const uint8_t TLS_PAIR_DOMAIN[32] = { 9, 9, 9 };
static const uint8_t TLS_PAIR_CLIENT[LZ_X509_CLIENT_ID_LEN] = { 7, 7, 7 };

/* One generation's credentials: its CA, the coordinator's leaf and one
 * enrolled client's. */
struct gen {
	struct lz_sigkey *ca_key, *hc_key, *cli_key;
	struct lz_x509ca *ca;
	uint8_t *ca_der, *hc_der, *cli_der;
	size_t ca_len, hc_len, cli_len;
};

static void gen_make(struct gen *g)
{
	struct lz_err err = { 0, "" };
	time_t now = time(NULL);
	memset(g, 0, sizeof(*g));
	uint8_t *csr = NULL;
	size_t csr_len = 0;
	assert_int_equal(lz_sigkey_generate(&g->ca_key), 0);
	assert_int_equal(lz_sigkey_generate(&g->hc_key), 0);
	assert_int_equal(lz_sigkey_generate(&g->cli_key), 0);
	assert_int_equal(lz_x509ca_new(g->ca_key, TLS_PAIR_DOMAIN, 5, now, &g->ca, &err), 0);
	assert_int_equal(lz_x509ca_cert(g->ca, &g->ca_der, &g->ca_len, &err), 0);
	assert_int_equal(lz_x509ca_issue_server(g->ca, g->hc_key, now, &g->hc_der, &g->hc_len, &err), 0);
	assert_int_equal(lz_x509_csr_new(g->cli_key, &csr, &csr_len, &err), 0);
	assert_int_equal(lz_x509ca_issue_client(g->ca, csr, csr_len, TLS_PAIR_CLIENT, now, &g->cli_der, &g->cli_len,
						&err),
			 0);
	free(csr);
}

static void gen_free(struct gen *g)
{
	lz_x509ca_free(g->ca);
	lz_sigkey_free(g->ca_key);
	lz_sigkey_free(g->hc_key);
	lz_sigkey_free(g->cli_key);
	free(g->ca_der);
	free(g->hc_der);
	free(g->cli_der);
}

static struct lz_tlschan_cred server_cred(const struct gen *g)
{
	return (struct lz_tlschan_cred){ g->ca_der, g->ca_len, g->hc_der, g->hc_len, g->hc_key };
}

static struct lz_tlschan_cred client_cred(const struct gen *g)
{
	return (struct lz_tlschan_cred){ g->ca_der, g->ca_len, g->cli_der, g->cli_len, g->cli_key };
}

/* A socketpair of type_flags (SOCK_NONBLOCK or 0 beside SOCK_SEQPACKET),
 * the coordinator's channel on sv[0] and the client's on sv[1], both
 * handshakes stepped by this thread to completion; returns the rounds it
 * took. */
static int tls_pair_connect(const struct gen *g, int type_flags, int sv[2], struct lz_tlschan **srv,
			     struct lz_tlschan **cli)
{
	struct lz_err err = { 0, "" };
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | type_flags, 0, sv), 0);
	struct lz_tlschan_cred sc = server_cred(g), cc = client_cred(g);
	assert_int_equal(lz_tlschan_new(sv[0], true, &sc, srv, &err), 0);
	assert_int_equal(lz_tlschan_new(sv[1], false, &cc, cli, &err), 0);
	int s = 0, c = 0, rounds = 0;
	for (; (s != 1 || c != 1) && rounds < 10; rounds++) {
		if (c != 1)
			c = lz_tlschan_handshake_step(*cli, &err);
		assert_true(c >= 0);
		if (s != 1)
			s = lz_tlschan_handshake_step(*srv, &err);
		assert_true(s >= 0);
	}
	assert_int_equal(s, 1);
	assert_int_equal(c, 1);
	return rounds;
}

#endif
