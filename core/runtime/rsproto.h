/* The control records between the Host Coordinator and its Runtime
 * Supervisor (spec 3.3 steps 6-7, 3.6, 3.7 "Evidence transport").
 *
 * One fixed-size record per SOCK_SEQPACKET packet on the private socketpair
 * the HC creates before the RS exists; both ends are the same trusted
 * binary, no descriptor travels. A record names the Domain and generation
 * it belongs to, and the receiver refuses one that names another
 * (lz_rs_msg_for). Sizes are bounded on receipt: a truncated, oversized or
 * unknown record is -EBADMSG, never partly read.
 *
 *   RS -> HC   MOUNTS         root and State Anchor mount identities
 *              HELPER_STAGED  slirp4netns's staged identity (FR-16)
 *              STAGED         the attached runsc's staged identity
 *              READY          runsc running; the network attestation record
 *              STOPPED        runsc gone, mounts proved absent
 *              FAILED         text says why
 *   HC -> RS   ACK            a staged identity is durably staged (echoed)
 *              STOP           stop the generation */
#ifndef LZ_RSPROTO_H
#define LZ_RSPROTO_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/mountns.h"
#include "net/netattest.h"
#include "proc/pidref.h"
#include "util/err.h"

#define LZ_RS_MAX_ANCHORS 64
#define LZ_RS_TEXT_MAX LZ_ERR_MSG_MAX
/* How long either end waits for the other during a start. */
#define LZ_RS_START_TIMEOUT_MS 60000

enum lz_rs_msg_type {
	LZ_RS_MOUNTS = 1,
	LZ_RS_STAGED = 2,
	LZ_RS_READY = 3,
	LZ_RS_STOPPED = 4,
	LZ_RS_FAILED = 5,
	LZ_RS_HELPER_STAGED = 6,
	LZ_HC_ACK = 10,
	LZ_HC_STOP = 11,
};

struct lz_rs_msg {
	uint32_t type;
	uint32_t n_mounts;
	uint64_t generation;
	char domain_id[65];
	struct lz_pidref id;
	struct lz_mount_id mounts[LZ_RS_MAX_ANCHORS + 1]; /* [0] is the root */
	/* LZ_RS_FAILED: why; LZ_RS_READY: what each step took (only for the
	 * log, never judged). */
	char text[LZ_RS_TEXT_MAX];
	/* LZ_RS_READY: the attestation record (spec 3.7), encoded. */
	uint32_t attest_len;
	uint8_t attest[LZ_NETATTEST_ENCODED_MAX];
};

/* Zeroes m and sets its type, generation and Domain ID (64 hex). */
void lz_rs_msg_init(struct lz_rs_msg *m, uint32_t type, uint64_t generation, const char *domain_id);

/* Whole records, no descriptors. send: -EPIPE when the peer is gone.
 * recv (timeout_ms < 0 waits without limit): -ETIMEDOUT, -EPIPE at EOF,
 * -EBADMSG for a record of another size, an unknown type, bounds out of
 * range or a Domain ID that is not 64 lowercase hex (m is left as it
 * was); strings arrive NUL-terminated. */
int lz_rs_send(int fd, const struct lz_rs_msg *m);
int lz_rs_recv(int fd, struct lz_rs_msg *m, int timeout_ms);

/* Whether m belongs to this Domain and generation. */
bool lz_rs_msg_for(const struct lz_rs_msg *m, uint64_t generation, const char *domain_id);

/* Spec 3.3 step 6: an acknowledgement echoes the staged record exactly
 * (Domain, generation and process identity); anything else, a duplicate
 * included, is never success. */
bool lz_rs_ack_echoes(const struct lz_rs_msg *ack, const struct lz_rs_msg *staged);

/* The lowercase name of a type ("helper-staged"), or NULL. */
const char *lz_rs_msg_name(uint32_t type);

#endif
