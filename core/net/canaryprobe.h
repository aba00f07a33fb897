/* The client side of the canary challenge (spec 3.7 "Known-live control",
 * "Imported behavior").
 *
 * A canary endpoint listens on TCP port LZ_CANARY_PORT; a prober connects,
 * sends a 32-byte challenge and reads a 32-byte answer, which only a
 * responder holding the generation's canary key can compute (canary.h).
 * The prober does not judge the answer: whoever holds the key does.
 *
 * Kept apart from canary.c (no OpenSSL, no libnl) because the statically
 * linked sandbox init probes with it too. */
#ifndef LZ_CANARYPROBE_H
#define LZ_CANARYPROBE_H

#include <stdbool.h>
#include <stdint.h>

#define LZ_CANARY_PORT 7
#define LZ_CANARY_CHALLENGE_LEN 32
#define LZ_CANARY_PROBE_MS 2000 /* a whole exchange, connect to answer */

/* Connects to addr (host byte order) on LZ_CANARY_PORT, bound to device
 * bind_dev when not NULL (on-link without a route: the kernel assumes the
 * destination is on the bound link), sends challenge and reads the answer,
 * all within timeout_ms. 0 when a full answer arrived; otherwise -errno
 * (-ETIMEDOUT, -ECONNREFUSED, -ENETUNREACH, -EPROTO for a short answer). */
int lz_canary_probe(uint32_t addr, const char *bind_dev, const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN],
		    uint8_t answer[LZ_CANARY_CHALLENGE_LEN], int timeout_ms);

/* Whether a probe's result r shows that no answer came: the network's
 * silence or refusal (-ETIMEDOUT, -ECONNREFUSED, -ENETUNREACH,
 * -EHOSTUNREACH, -ECONNRESET, a filter's -EACCES or -EPERM). Not a full
 * answer (0) nor a short one (-EPROTO), and not any other failure, such as
 * this process running out of descriptors, memory or local ports, which
 * shows nothing about the network (spec 3.7: an unreachable predicate is
 * proved, never assumed). */
bool lz_canary_no_answer(int r);

/* The same exchange on another port (the egress proxy's, egress.h). */
int lz_canary_probe_port(uint32_t addr, uint16_t port, const char *bind_dev,
			 const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], uint8_t answer[LZ_CANARY_CHALLENGE_LEN],
			 int timeout_ms);

#endif
