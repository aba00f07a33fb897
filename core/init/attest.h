/* The imported-behaviour half of network readiness, observed by the
 * sandbox's root init from inside gVisor (spec 3.7 "Imported behavior").
 *
 * Fills exactly the init's fields of the record (netattest.h): tap0 and
 * its index, the allowed canary's answer to challenge, the denied canary
 * unreachable, no non-loopback IPv6 address or route, empty
 * network-administration capability sets, and a route addition and
 * deletion refused for want of authority (EPERM or EACCES: any other error
 * proves nothing). Every observation is made, whatever an earlier one found; the
 * judgement is the Host Coordinator's. Uses raw rtnetlink: the init is
 * static and links nothing beyond libc. */
#ifndef LZ_INIT_ATTEST_H
#define LZ_INIT_ATTEST_H

#include <stdint.h>

#include "net/canaryprobe.h"
#include "net/netattest.h"

void lz_init_attest(const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], struct lz_netattest *ret);

#endif
