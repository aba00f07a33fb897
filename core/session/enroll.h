/* The credential enrollment record (spec 3.3 "Protocol cryptography
 * refinement"; issue 14): the one request a control connection without a
 * client certificate may carry, at most LZ_ENROLL_MAX bytes. A Client CLI
 * names the Domain and configuration it expects (as its Hello does) and
 * sends a CSR for the key it holds in memory only; the coordinator
 * answers with a one-hour client leaf (crypto/x509ca.h).
 *
 *   Enroll: domain_id [u8; 32], fingerprint [u8; 32], csr: bytes
 *           (1..=LZ_X509_CSR_MAX, DER)
 *
 * The coordinator's answer, on the same connection, after which the
 * connection carries nothing more:
 *
 *   EnrollAnswer: enum { Issued(certificate: bytes, 1..=LZ_X509_CERT_MAX,
 *                        DER),
 *                        Refused(code: u32, 1..=LZ_ENROLL_MAX_ERRNO,
 *                                message: string, at most
 *                                LZ_ENROLL_MESSAGE_MAX bytes) }
 *
 * Postcard (util/postcard.h), canonical: decoding then encoding gives the
 * same bytes; a record with bytes left over is refused. */
#ifndef LZ_SESSION_ENROLL_H
#define LZ_SESSION_ENROLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_ENROLL_MAX 8192u
#define LZ_ENROLL_MESSAGE_MAX 1024u
#define LZ_ENROLL_MAX_ERRNO 4095u /* a Refused answer's code */

struct lz_enroll {
	uint8_t domain_id[32];
	uint8_t fingerprint[32];
	const uint8_t *csr; /* borrowed from the decoded buffer */
	size_t csr_len;
};

/* -EMSGSIZE when it does not fit cap or LZ_ENROLL_MAX, -EINVAL for an
 * empty or oversized CSR. */
int lz_enroll_encode(const struct lz_enroll *e, uint8_t *buf, size_t cap, size_t *ret_len);

/* -EMSGSIZE over LZ_ENROLL_MAX (nothing parsed), -EBADMSG for anything
 * malformed, truncated, non-canonical or followed by more bytes; *ret is
 * untouched then. */
int lz_enroll_decode(const uint8_t *buf, size_t len, struct lz_enroll *ret);

struct lz_enroll_answer {
	bool issued;
	const uint8_t *cert; /* Issued: borrowed */
	size_t cert_len;
	uint32_t code;       /* Refused */
	const char *message; /* Refused: borrowed, UTF-8, not NUL-terminated */
	size_t message_len;
};

/* -EINVAL for a value outside the rules above, -EMSGSIZE. */
int lz_enroll_answer_encode(const struct lz_enroll_answer *a, uint8_t *buf, size_t cap, size_t *ret_len);
/* -EBADMSG for anything but the canonical encoding of a valid answer. */
int lz_enroll_answer_decode(const uint8_t *buf, size_t len, struct lz_enroll_answer *ret);

#endif
