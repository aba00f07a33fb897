/* Observing the routes of the enforcement network namespace over rtnetlink:
 * every IPv4 route as its policy-semantic projection (struct lz_kroute,
 * netroutes.h), and the kernel's choice for one destination (spec 3.7
 * "Linux policy state"; SR-6).
 *
 * Everything here acts on the CURRENT network namespace: the Runtime
 * Supervisor calls it after entering its own namespaces, while it still holds
 * network-administration capability there.
 *
 * All tables are observed, so a route in table local or default that would
 * take precedence over table main is seen.
 * The only routes left out are the ones the kernel derives from interface
 * addresses in table local (protocol kernel): "local <address>" on the
 * address's device, "local <prefix>" of an address in 127.0.0.0/8 on a
 * loopback device, and "broadcast <broadcast|network address>" of an address
 * on the same device. They deliver to this host and forward nothing. The
 * "local <prefix>" route of any other address on a loopback device is
 * observed: it is a loopback-address deny (netroutes.h); for a /32 address it is
 * also its "local <address>", which is then observed too. The connected route the
 * kernel adds to table main for the tap0 address IS observed: it has exactly
 * the projection of the HELPER on-link /24, and install treats it as that
 * route (an exclusive create of the same key would fail with EEXIST).
 * runsc moves tap0's address into its netstack and the kernel then drops
 * that /24: observe before runsc starts (netroutes.h "What the sandbox
 * sees").
 *
 * Threat: a route the policy did not ask for (left by a configurator, added by
 * a bug, shadowing from another table) that the observation would not show,
 * so the match (netroutes.h) would pass while the sandbox could reach a
 * denied destination. */
#ifndef LZ_NETROUTES_OBSERVE_H
#define LZ_NETROUTES_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "net/netroutes.h"
#include "net/rtnl.h"
#include "util/err.h"

/* Reads every IPv4 route of the current namespace as projections sorted by
 * lz_kroute_compare, without the address-derived table-local entries
 * described above. *ret is malloc'ed (NULL when *ret_n is 0); both untouched
 * on failure. E2BIG beyond LZ_NETROUTES_MAX entries; EAGAIN when the dump
 * kept being interrupted by concurrent changes. */
int lz_netroutes_observe(struct lz_kroute **ret, size_t *ret_n, struct lz_err *err);

/* The same on the open socket nl, for a caller that goes on to change the
 * namespace through it (netroutes_install.h). The projections keep their
 * protocol (install recognizes the kernel's connected route by it). *links
 * (zero-initialized or freed) receives the links of the same consistent
 * dump, against which the devices were resolved; it is left empty on
 * failure and the caller frees it with lz_rtnl_links_free on success. */
int lz_netroutes_observe_on(struct lz_rtnl *nl, struct lz_rtnl_links *links, struct lz_kroute **ret,
			    size_t *ret_n, struct lz_err *err);

/* The route the kernel picks for output to dst (host byte order), as
 * RTM_GETROUTE ("ip route get") reports it: dst is dst/32, dev and gateway are
 * the chosen next hop. -ENETUNREACH (or what the kernel says) when none. */
int lz_netroutes_lookup(uint32_t dst, struct lz_kroute *ret, struct lz_err *err);

#endif
