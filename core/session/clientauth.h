/* The Client CLI's side of the control socket's TLS (spec 3.3 "Protocol
 * cryptography refinement"; session/admission.h is the coordinator's).
 *
 * The CLI trusts what the publication pin (session/pin.h) names: the
 * generation CA, and only the coordinator leaf pinned there. On one
 * connection without a certificate it enrolls a fresh Ed25519 key that
 * lives only in this process's memory and gets a one-hour clientAuth
 * leaf; it then opens a new connection presenting that leaf, which is
 * the only one that carries the wire protocol. */
#ifndef LZ_SESSION_CLIENTAUTH_H
#define LZ_SESSION_CLIENTAUTH_H

#include <stdint.h>

#include "fs/pathauth.h"
#include "session/tlschan.h"
#include "util/err.h"

#define LZ_CLIENTAUTH_HANDSHAKE_MS 10000

/* Connects to the runtime Domain directory's control socket: 0, or
 * -ENOENT/-ECONNREFUSED when nobody listens there, other -errno. */
int lz_clientauth_connect(const struct lz_path *runtime_domain, int *ret_fd);

/* Enrolls over enroll_fd (a connected socket, always consumed) and opens
 * the client's mTLS connection: *ret_fd and *ret_ch on success. -EAGAIN
 * when the coordinator went away before anything was asked of it (try
 * again); -EPERM and the reason when the pin, the coordinator's
 * certificate or the enrollment is refused; the coordinator's own
 * refusal comes back as its errno and message. */
int lz_clientauth_open(const struct lz_path *runtime_domain, int enroll_fd, const uint8_t domain_id[32],
		       const uint8_t fingerprint[32], int *ret_fd, struct lz_tlschan **ret_ch, struct lz_err *err);

#endif
