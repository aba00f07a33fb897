/* The publication pin (spec 3.3 "Protocol cryptography refinement"): what
 * a Client CLI trusts when it reaches a generation's control socket,
 * written by the Host Coordinator beside the socket in the validated,
 * host-private runtime Domain directory before the socket is bound, and
 * removed after it when publication is withdrawn.
 *
 *   Pin: generation u64,
 *        ca bytes (DER, the generation CA),
 *        leaf bytes (DER, the coordinator's serverAuth leaf),
 *        manifest bytes (the sealed Trust Manifest)
 *
 * Postcard, canonical, at most LZ_PIN_MAX bytes. lz_pin_read accepts a pin
 * only when the manifest is the protocol issuer's signed statement (the
 * issuer key it names) for this Domain and the pin's generation and names
 * the CA's key as the TLS root. A client then trusts only that CA and
 * accepts only that exact leaf from the coordinator. */
#ifndef LZ_SESSION_PIN_H
#define LZ_SESSION_PIN_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_PIN_FILE "hc.pin"
#define LZ_PIN_MAX 16384u

struct lz_pin {
	uint64_t generation;
	const uint8_t *ca, *leaf, *manifest; /* borrowed */
	size_t ca_len, leaf_len, manifest_len;
};

int lz_pin_encode(const struct lz_pin *p, uint8_t *buf, size_t cap, size_t *ret_len);
/* -EBADMSG for anything but the canonical encoding within the limits. */
int lz_pin_decode(const uint8_t *buf, size_t len, struct lz_pin *ret);

/* Replaces the pin beneath the runtime Domain directory dirfd (0600,
 * written aside and renamed over, so a reader sees one whole pin). */
int lz_pin_write(int dirfd, const struct lz_pin *p, struct lz_err *err);
void lz_pin_remove(int dirfd);

/* Reads and checks the pin beneath dirfd for the Domain domain_id (see
 * above): *ret borrows *ret_buf, which the caller frees. -ENOENT when
 * there is none (no generation is published), -EPERM for a pin that
 * fails a check, -EBADMSG, or the errors of lz_file_read_owned. */
int lz_pin_read(int dirfd, const uint8_t domain_id[32], uint8_t **ret_buf, struct lz_pin *ret, struct lz_err *err);

#endif
