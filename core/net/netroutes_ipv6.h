/* IPv6 off in the enforcement network namespace, and its check (spec 3.7
 * "Linux policy state": "IPv6 is disabled, with no non-loopback IPv6 address
 * or route"; "Default policy and deny representation": disabled before
 * helper and canary setup).
 *
 * Everything here acts on the CURRENT network namespace: the Runtime
 * Supervisor calls it after entering its own namespaces, while it still holds
 * network-administration capability there.
 *
 * Threat: the route policy (netroutes.h) is IPv4 only; an IPv6 address or
 * route would be a path out that no policy entry governs. */
#ifndef LZ_NETROUTES_IPV6_H
#define LZ_NETROUTES_IPV6_H

#include <stdbool.h>

#include "util/err.h"

/* Writes "1" to /proc/sys/net/ipv6/conf/{default,all}/disable_ipv6 (opened
 * beneath /proc, which must be procfs, without following symlinks or
 * crossing mounts) and reads both back. Returns 0, or 1 when the kernel has
 * no IPv6 at all (no conf directory): then there is nothing to disable and
 * lz_netroutes_ipv6_clean is the check that matters. */
int lz_netroutes_disable_ipv6(struct lz_err *err);

/* *ret = true when the namespace has no IPv6 address other than ::1/128 on a
 * loopback device and no IPv6 route other than ::1/128 through a loopback
 * device (cache entries aside). Untouched on failure. */
int lz_netroutes_ipv6_clean(bool *ret, struct lz_err *err);

#endif
