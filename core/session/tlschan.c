/* TLS 1.3 over SOCK_SEQPACKET through memory BIOs: see tlschan.h. */
#include "session/tlschan.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "crypto/x509ca.h"
#include "proc/spawn.h"
#include "session/packet.h"

/* A datagram: one record's ciphertext (four TLS records of 16 KiB and
 * their overhead), or one handshake flight. */
#define DATAGRAM_MAX (LZ_TLSCHAN_RECORD_MAX + 4096)

struct lz_tlschan {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	BIO *rbio, *wbio; /* owned by ssl */
	uint8_t *dgram; /* the datagram being received */
	uint8_t *out;   /* ciphertext of one record or flight not yet sent */
	size_t out_len;
	bool broken; /* a record's ciphertext could not be sent */
};

static const unsigned char alpn_wire[] = "\x11" LZ_TLSCHAN_ALPN;

static int tls_fail(struct lz_err *err, int code, const char *what)
{
	unsigned long e = ERR_get_error();
	char reason[256] = "OpenSSL failed";
	if (e != 0)
		ERR_error_string_n(e, reason, sizeof(reason));
	ERR_clear_error();
	return lz_err_set(err, code, "%s: %s", what, reason);
}

static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	unsigned char *chosen = NULL;
	if (SSL_select_next_proto(&chosen, outlen, alpn_wire, sizeof(alpn_wire) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = chosen;
	return SSL_TLSEXT_ERR_OK;
}

static bool configure(SSL_CTX *ctx, bool server, const struct lz_tlschan_cred *cred)
{
	const unsigned char *p = cred->ca_der;
	X509 *ca = d2i_X509(NULL, &p, (long)cred->ca_len);
	bool ok = ca != NULL && p == cred->ca_der + cred->ca_len &&
		  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca) == 1 &&
		  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
		  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1 &&
		  SSL_CTX_set1_sigalgs_list(ctx, "ed25519") == 1 && SSL_CTX_set1_groups_list(ctx, "X25519") == 1 &&
		  SSL_CTX_set_num_tickets(ctx, 0) == 1 && SSL_CTX_set_max_early_data(ctx, 0) == 1;
	X509_free(ca);
	if (!ok)
		return false;
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	/* The server asks for a certificate and checks any it gets; one
	 * without is an enrollment, which the caller confines. */
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (server)
		SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
	if (cred->cert_der == NULL)
		return true;
	EVP_PKEY *key = lz_sigkey_evp(cred->key);
	ok = key != NULL && SSL_CTX_use_certificate_ASN1(ctx, (int)cred->cert_len, cred->cert_der) == 1 &&
	     SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
	EVP_PKEY_free(key);
	return ok;
}

void lz_tlschan_warm_client(void)
{
	SSL_CTX_free(SSL_CTX_new(TLS_client_method()));
}

int lz_tlschan_new(int fd, bool server, const struct lz_tlschan_cred *cred, struct lz_tlschan **ret,
		   struct lz_err *err)
{
	struct lz_tlschan *ch = calloc(1, sizeof(*ch));
	if (ch == NULL || (ch->dgram = malloc(DATAGRAM_MAX)) == NULL || (ch->out = malloc(DATAGRAM_MAX)) == NULL) {
		if (ch != NULL)
			free(ch->dgram);
		free(ch);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	ch->fd = fd;
	ch->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (ch->ctx == NULL || !configure(ch->ctx, server, cred) || (ch->ssl = SSL_new(ch->ctx)) == NULL ||
	    (ch->rbio = BIO_new(BIO_s_mem())) == NULL) {
		lz_tlschan_free(ch);
		return tls_fail(err, EIO, "set up TLS");
	}
	if ((ch->wbio = BIO_new(BIO_s_mem())) == NULL) {
		BIO_free(ch->rbio);
		ch->rbio = NULL;
		lz_tlschan_free(ch);
		return tls_fail(err, EIO, "set up TLS");
	}
	SSL_set_bio(ch->ssl, ch->rbio, ch->wbio);
	/* An empty read BIO means "wait for a datagram", not end of file. */
	BIO_set_mem_eof_return(ch->rbio, -1);
	if (server)
		SSL_set_accept_state(ch->ssl);
	else if (SSL_set_alpn_protos(ch->ssl, alpn_wire, sizeof(alpn_wire) - 1) != 0 ||
		 SSL_set1_host(ch->ssl, LZ_X509_SERVER_NAME) != 1 ||
		 SSL_set_tlsext_host_name(ch->ssl, LZ_X509_SERVER_NAME) != 1) {
		lz_tlschan_free(ch);
		return tls_fail(err, EIO, "set up TLS");
	} else {
		SSL_set_connect_state(ch->ssl);
	}
	*ret = ch;
	return 0;
}

void lz_tlschan_free(struct lz_tlschan *ch)
{
	if (ch == NULL)
		return;
	SSL_free(ch->ssl); /* and its BIOs */
	SSL_CTX_free(ch->ctx);
	free(ch->dgram);
	free(ch->out);
	free(ch);
}

static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int n = poll(&p, 1, lz_remaining_ms(deadline));
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Sends the pending datagram (with fds), waiting for the socket until
 * deadline: 0 sent, -EAGAIN still pending, < 0 failed (the channel is
 * broken then: a record's ciphertext is lost). */
static int send_out(struct lz_tlschan *ch, const int *fds, size_t n_fds, int64_t deadline, struct lz_err *err)
{
	for (;;) {
		int r = lz_packet_send(ch->fd, ch->out, ch->out_len, fds, n_fds, 1);
		if (r == 0) {
			ch->out_len = 0;
			return 0;
		}
		if (r == -EAGAIN && lz_remaining_ms(deadline) == 0)
			return lz_err_set(err, EAGAIN, "the control socket is full");
		if (r == -EAGAIN && (r = wait_fd(ch->fd, POLLOUT, deadline)) == -ETIMEDOUT)
			continue;
		if (r < 0) {
			ch->broken = true;
			return lz_err_set(err, -r, "send on the control socket: %s", strerror(-r));
		}
	}
}

/* Whatever OpenSSL wrote, as one datagram with the descriptors. */
static int flush(struct lz_tlschan *ch, const int *fds, size_t n_fds, int64_t deadline, struct lz_err *err)
{
	size_t pending = BIO_ctrl_pending(ch->wbio);
	if (pending == 0)
		return 0;
	if (pending > DATAGRAM_MAX) {
		ch->broken = true;
		return lz_err_set(err, EMSGSIZE, "a TLS flight of %zu bytes", pending);
	}
	if (BIO_read(ch->wbio, ch->out, (int)pending) != (int)pending) {
		ch->broken = true;
		return tls_fail(err, EIO, "TLS output");
	}
	ch->out_len = pending;
	return send_out(ch, fds, n_fds, deadline, err);
}

/* One datagram into OpenSSL; its descriptors to the caller. */
static int feed(struct lz_tlschan *ch, bool dontwait, int *fds, size_t max_fds, size_t *n_fds, struct lz_err *err)
{
	size_t got = 0;
	ssize_t n = lz_packet_recv(ch->fd, ch->dgram, DATAGRAM_MAX, fds, max_fds, &got, dontwait);
	if (n == -EAGAIN)
		return -EAGAIN;
	if (n == -EPIPE)
		return lz_err_set(err, EPIPE, "the peer closed the connection");
	if (n == -EBADMSG)
		return lz_err_set(err, EBADMSG, "a malformed datagram on the control socket (oversized, or "
						"unexpected descriptors or ancillary data)");
	if (n < 0)
		return lz_err_set(err, (int)-n, "receive on the control socket: %s", strerror((int)-n));
	*n_fds = got;
	if (BIO_write(ch->rbio, ch->dgram, (int)n) != (int)n) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		*n_fds = 0;
		return tls_fail(err, EIO, "TLS input");
	}
	return 0;
}

/* A handshake flight is a few hundred bytes into an idle socket. */
#define FLIGHT_SEND_MS 1000

int lz_tlschan_handshake_step(struct lz_tlschan *ch, struct lz_err *err)
{
	for (;;) {
		int r = SSL_do_handshake(ch->ssl);
		int f = flush(ch, NULL, 0, lz_now_ms() + FLIGHT_SEND_MS, err); /* our flight, or our alert */
		if (f == -EAGAIN)
			f = lz_err_set(err, ETIMEDOUT, "TLS handshake: the peer does not take our flight");
		if (r == 1) {
			const unsigned char *alpn = NULL;
			unsigned int alpn_len = 0;
			SSL_get0_alpn_selected(ch->ssl, &alpn, &alpn_len);
			if (f < 0)
				return f;
			if (alpn_len != sizeof(LZ_TLSCHAN_ALPN) - 1 || memcmp(alpn, LZ_TLSCHAN_ALPN, alpn_len) != 0)
				return lz_err_set(err, EPERM, "the peer did not agree to %s", LZ_TLSCHAN_ALPN);
			return 1;
		}
		int e = SSL_get_error(ch->ssl, r);
		if (e != SSL_ERROR_WANT_READ) {
			long v = SSL_get_verify_result(ch->ssl);
			if (v != X509_V_OK)
				return lz_err_set(err, EPERM, "TLS handshake: the certificate was refused: %s",
						  X509_verify_cert_error_string(v));
			return tls_fail(err, EPERM, "TLS handshake");
		}
		if (f < 0)
			return f;
		size_t none = 0;
		if ((r = feed(ch, true, NULL, 0, &none, err)) == -EAGAIN)
			return 0;
		if (r < 0)
			return r;
	}
}

int lz_tlschan_handshake(struct lz_tlschan *ch, int timeout_ms, struct lz_err *err)
{
	int64_t deadline = lz_now_ms() + timeout_ms;
	int r;
	while ((r = lz_tlschan_handshake_step(ch, err)) == 0)
		if ((r = wait_fd(ch->fd, POLLIN, deadline)) < 0)
			return lz_err_set(err, -r, "TLS handshake: %s", strerror(-r));
	return r < 0 ? r : 0;
}

int lz_tlschan_peer_cert(const struct lz_tlschan *ch, uint8_t **ret_der, size_t *ret_len, struct lz_err *err)
{
	*ret_der = NULL;
	*ret_len = 0;
	X509 *x = SSL_get0_peer_certificate(ch->ssl);
	return x == NULL ? 0 : lz_x509_der(x, ret_der, ret_len, err);
}

int lz_tlschan_send(struct lz_tlschan *ch, const void *buf, size_t len, const int *fds, size_t n_fds,
		    int timeout_ms, struct lz_err *err)
{
	if (len == 0 || len > LZ_TLSCHAN_RECORD_MAX || n_fds > LZ_TLSCHAN_MAX_FDS)
		return lz_err_set(err, EMSGSIZE, "a record of %zu bytes with %zu descriptors", len, n_fds);
	if (ch->broken)
		return lz_err_set(err, EPIPE, "the TLS connection is broken");
	int64_t deadline = lz_now_ms() + timeout_ms;
	int r;
	if (ch->out_len > 0 && (r = send_out(ch, NULL, 0, deadline, err)) < 0)
		return r; /* -EAGAIN: this record was not taken */
	size_t written = 0;
	if (SSL_write_ex(ch->ssl, buf, len, &written) != 1 || written != len) {
		ch->broken = true;
		return tls_fail(err, EIO, "TLS send");
	}
	r = flush(ch, fds, n_fds, deadline, err);
	if (r == -EAGAIN && n_fds == 0)
		return 0; /* taken: lz_tlschan_flush sends it */
	if (r == -EAGAIN) {
		/* Descriptors are not kept for later: the record is lost. */
		ch->broken = true;
		return lz_err_set(err, ETIMEDOUT, "the control socket stayed full");
	}
	return r;
}

bool lz_tlschan_pending(const struct lz_tlschan *ch)
{
	return ch->out_len > 0;
}

int lz_tlschan_flush(struct lz_tlschan *ch, int timeout_ms, struct lz_err *err)
{
	if (ch->out_len == 0)
		return 0;
	return send_out(ch, NULL, 0, lz_now_ms() + timeout_ms, err);
}

ssize_t lz_tlschan_recv(struct lz_tlschan *ch, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds,
			struct lz_err *err)
{
	*n_fds = 0;
	if (cap < LZ_TLSCHAN_RECORD_MAX)
		return lz_err_set(err, EINVAL, "a receive buffer of %zu bytes", cap);
	for (;;) {
		/* A datagram that held only TLS's own messages (a KeyUpdate)
		 * yields nothing: take the next. */
		int r = feed(ch, false, fds, max_fds, n_fds, err);
		if (r < 0)
			return r;
		size_t total = 0, got = 0;
		while (total < cap && SSL_read_ex(ch->ssl, (uint8_t *)buf + total, cap - total, &got) == 1)
			total += got;
		int e = SSL_get_error(ch->ssl, 0);
		if (total > 0 && BIO_ctrl_pending(ch->rbio) == 0)
			return (ssize_t)total;
		if (total > 0 || (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_NONE)) {
			for (size_t i = 0; i < *n_fds; i++)
				close(fds[i]);
			*n_fds = 0;
			if (e == SSL_ERROR_ZERO_RETURN)
				return lz_err_set(err, EPIPE, "the peer closed the TLS connection");
			/* The peer's alert (a refused certificate) or a record
			 * that fails authentication: never a reason to retry. */
			if (e == SSL_ERROR_SSL)
				return tls_fail(err, EPERM, "the TLS connection was refused");
			return tls_fail(err, EPROTO, "TLS receive: not one whole record");
		}
		if (*n_fds > 0) {
			for (size_t i = 0; i < *n_fds; i++)
				close(fds[i]);
			*n_fds = 0;
			return lz_err_set(err, EPROTO, "descriptors without a record");
		}
	}
}
