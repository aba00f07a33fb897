/* TLS 1.3 over the control socket's SOCK_SEQPACKET connection (spec 3.3
 * "Protocol cryptography refinement"; issue 14).
 *
 * One plaintext record is one SSL_write, and its ciphertext travels as
 * one datagram, so record boundaries survive and the descriptors a
 * record carries (SCM_RIGHTS) ride on the datagram of that record, after
 * the handshake authenticated the peer. The connection is fixed to TLS
 * 1.3, ALPN "lazaret-control/1", Ed25519 signatures and X25519: no early
 * data, no session tickets or resumption, no renegotiation (TLS 1.3 has
 * none). Memory BIOs do the I/O: OpenSSL never touches the socket.
 *
 * The server trusts the generation's CA for client certificates and may
 * accept a connection without one (an enrollment: the caller allows only
 * that then); the client trusts the CA for LZ_X509_SERVER_NAME. The
 * binding of a client certificate to the Domain and generation is the
 * caller's lz_x509ca_check_client on lz_tlschan_peer_cert. */
#ifndef LZ_SESSION_TLSCHAN_H
#define LZ_SESSION_TLSCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crypto/sigkey.h"
#include "util/err.h"

#define LZ_TLSCHAN_ALPN "lazaret-control/1"
#define LZ_TLSCHAN_RECORD_MAX 65536u /* plaintext bytes of one record */
#define LZ_TLSCHAN_MAX_FDS 8u
#define LZ_TLSCHAN_FOREVER 0x7fffffff /* timeout_ms: as long as it takes */

struct lz_tlschan;

struct lz_tlschan_cred {
	const uint8_t *ca_der; /* the generation's CA, the only trust anchor */
	size_t ca_len;
	const uint8_t *cert_der; /* this side's leaf; NULL: none (enrollment) */
	size_t cert_len;
	const struct lz_sigkey *key; /* its key */
};

/* OpenSSL 3 fetches every algorithm its TLS stack may use on a process's
 * first SSL_CTX_new (2 to 3 ms here) and keeps them: a client that will
 * open a channel and has time to spare (the CLI while its coordinator
 * starts) pays it then. Nothing else changes. */
void lz_tlschan_warm_client(void);

/* A channel on the connected SOCK_SEQPACKET socket fd (not owned). */
int lz_tlschan_new(int fd, bool server, const struct lz_tlschan_cred *cred, struct lz_tlschan **ret,
		   struct lz_err *err);
void lz_tlschan_free(struct lz_tlschan *ch);

/* The handshake, within timeout_ms; -EPERM with the peer's or our alert
 * when authentication fails. */
int lz_tlschan_handshake(struct lz_tlschan *ch, int timeout_ms, struct lz_err *err);

/* As much of the handshake as the datagrams already waiting allow, never
 * waiting for the peer: 1 when complete, 0 when it needs the peer's next
 * flight (poll the socket for input, then step again), < 0 as above. A
 * coordinator serving many connections steps each without stalling the
 * others on a slow or silent client. */
int lz_tlschan_handshake_step(struct lz_tlschan *ch, struct lz_err *err);

/* The peer's leaf as DER (client certificate on the server; NULL when the
 * client presented none). The caller frees *ret_der. */
int lz_tlschan_peer_cert(const struct lz_tlschan *ch, uint8_t **ret_der, size_t *ret_len, struct lz_err *err);

/* One record of len bytes (1..LZ_TLSCHAN_RECORD_MAX) with n_fds
 * descriptors, as one datagram, waiting up to timeout_ms for the socket.
 * A record without descriptors that does not fit the socket in time is
 * still taken (0): its ciphertext waits in the channel, and
 * lz_tlschan_flush sends it when the socket takes it; the next send first
 * does, and answers -EAGAIN, taking nothing, while it cannot. A record
 * with descriptors that does not fit in time breaks the channel
 * (-ETIMEDOUT), as does any other failure after encryption. */
int lz_tlschan_send(struct lz_tlschan *ch, const void *buf, size_t len, const int *fds, size_t n_fds,
		    int timeout_ms, struct lz_err *err);
/* Whether a taken record waits for the socket (poll it for POLLOUT). */
bool lz_tlschan_pending(const struct lz_tlschan *ch);
/* Sends what waits, waiting up to timeout_ms for the socket: 0 nothing
 * left, -EAGAIN still waiting, < 0 the channel is broken. */
int lz_tlschan_flush(struct lz_tlschan *ch, int timeout_ms, struct lz_err *err);
/* One record into buf (cap bytes at least LZ_TLSCHAN_RECORD_MAX) and the
 * descriptors of its datagram (O_CLOEXEC); -EAGAIN when none is waiting
 * on a non-blocking socket, -EPIPE at the peer's end. */
ssize_t lz_tlschan_recv(struct lz_tlschan *ch, void *buf, size_t cap, int *fds, size_t max_fds, size_t *n_fds,
			struct lz_err *err);

#endif
