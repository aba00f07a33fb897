/* Who may use a generation's control socket (spec 3.3 "Protocol
 * cryptography refinement"; issue 14): the Host Coordinator's side of
 * the TLS, the generation CA and the coordinator's leaf, enrollment, and
 * the check of every client certificate.
 *
 * A connection is TLS 1.3 (session/tlschan.h) from its first byte. One
 * without a client certificate is an enrollment: it may carry one record
 * of at most LZ_ENROLL_MAX bytes (session/enroll.h) naming this Domain and
 * configuration with a CSR, answered by a one-hour clientAuth leaf bound
 * to a fresh client ID, and nothing after that. Every other operation
 * needs a new connection presenting such a leaf: this CA's, valid now,
 * clientAuth only, for this Domain and generation, of a client this
 * coordinator enrolled. A key enrolls once. Every refusal comes back with
 * its reason for the coordinator's log; none changes any state but the
 * enrolled clients'. */
#ifndef LZ_SESSION_ADMISSION_H
#define LZ_SESSION_ADMISSION_H

#include <stddef.h>
#include <stdint.h>

#include "crypto/sigkey.h"
#include "session/tlschan.h"
#include "util/err.h"

#define LZ_ADMISSION_MAX_CLIENTS 65536 /* enrolled in the last hour */

struct lz_admission;

/* The generation's CA (from the Trust Anchor's TLS-CA key, which the
 * caller keeps) and a fresh leaf key and leaf for the coordinator;
 * manifest is the sealed Trust Manifest to pin. */
int lz_admission_new(const struct lz_sigkey *tls_ca, const uint8_t domain_id[32], const uint8_t fingerprint[32],
		     uint64_t generation, const uint8_t *manifest, size_t manifest_len, struct lz_admission **ret,
		     struct lz_err *err);
/* Wipes the keys; accepts NULL. */
void lz_admission_free(struct lz_admission *a);

/* Writes the publication pin (session/pin.h) beneath the runtime Domain
 * directory dirfd, before the socket is bound. */
int lz_admission_pin(const struct lz_admission *a, int dirfd, struct lz_err *err);

/* The server side of a new connection on fd (not owned). */
int lz_admission_channel(const struct lz_admission *a, int fd, struct lz_tlschan **ret, struct lz_err *err);

enum lz_admission_peer {
	LZ_ADMISSION_ENROLLMENT = 0, /* no client certificate */
	LZ_ADMISSION_CLIENT = 1,     /* an enrolled client's leaf */
};

/* After the handshake: what the peer is, or -EPERM and why. */
int lz_admission_admit(const struct lz_admission *a, struct lz_tlschan *ch, struct lz_err *err);

/* An enrollment connection's record, read into buf (LZ_TLSCHAN_RECORD_MAX
 * bytes): -EAGAIN when none is waiting; 0 when a leaf was issued; < 0 when
 * refused (the refusal is answered when the peer can be told). Either way
 * the connection carries nothing more. */
int lz_admission_enroll(struct lz_admission *a, struct lz_tlschan *ch, uint8_t *buf, struct lz_err *err);

#endif
