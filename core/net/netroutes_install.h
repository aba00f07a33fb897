/* Installing the route policy in the enforcement network namespace over
 * rtnetlink: the plan's routes (netroutes.h), the loopback-address denies,
 * and the deletion of one route a configurator added (spec 3.7 "Default
 * policy and deny representation", "Linux policy state"; SR-6).
 *
 * Everything here acts on the CURRENT network namespace: the Runtime
 * Supervisor calls it after entering its own namespaces, while it still holds
 * network-administration capability there.
 *
 * Preconditions of install: lo and dev are up, dev holds the sandbox address,
 * and table main holds no route of the plan except that connected route
 * (netroutes_observe.h: the kernel's connected route for the tap0 address
 * has the projection of the HELPER on-link /24 and stands for it).
 * slirp4netns --configure adds "default via <gateway> dev tap0"; delete it
 * with lz_netroutes_delete before installing a plan that contains 0.0.0.0/0.
 *
 * Nothing here checks its own result: the caller observes
 * (netroutes_observe.h) and matches the observation against the plan
 * (netroutes.h) after the last link change.
 *
 * Threat: a route the policy did not ask for, or a deny that silently became
 * something else; either would let the sandbox reach a denied destination.
 * Hence exclusive creates (an existing route is refused, never replaced) and
 * a delete that refuses to guess between routes. */
#ifndef LZ_NETROUTES_INSTALL_H
#define LZ_NETROUTES_INSTALL_H

#include <stddef.h>
#include <stdint.h>

#include "net/netroutes.h"
#include "util/err.h"

/* Creates the plan's routes with NLM_F_CREATE|NLM_F_EXCL: on-link routes
 * first (they make the gateway reachable), then denies, then allows. The
 * first refusal stops and is returned as -errno with the route and the
 * kernel's extended-ack reason in err (EEXIST for a route already there,
 * ENODEV for a missing device, ENETDOWN when lo or dev is down, EPERM without
 * capability). Not transactional: routes created before a failure stay; the
 * caller discards the namespace. */
int lz_netroutes_install(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			 struct lz_err *err);

/* The same with the deny representation chosen. With
 * LZ_NETROUTES_DENY_AS_ADDRESS the deny step adds loopback addresses as
 * lz_netroutes_install_loopback_denies does (after the on-link routes, before
 * the allows). */
int lz_netroutes_install_as(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			    enum lz_netroutes_deny_as deny_as, struct lz_err *err);

/* Adds, for every DENY and CANARY_DENY entry (other kinds are ignored, equal
 * prefixes once), the loopback address described in netroutes.h with
 * NLM_F_CREATE|NLM_F_EXCL. Refuses with EINVAL a deny of 0.0.0.0/0 or a
 * prefix with host bits (before touching the kernel), ENODEV/ENETDOWN when lo
 * is missing or down, and otherwise the kernel's errno naming the prefix
 * (EEXIST when the address is already there). Not transactional. */
int lz_netroutes_install_loopback_denies(const struct lz_netroutes_entry *entries, size_t n, struct lz_err *err);

/* Whether every deny of a prefix in 0.0.0.0/8 or 224.0.0.0/4 shorter than
 * /32 (the ones no route in Linux stands for, netroutes.h) has its
 * loopback address on lo: 0, or EPROTO naming the first missing. */
int lz_netroutes_check_unrouted_denies(const struct lz_netroutes_entry *routes, size_t n,
				       struct lz_err *err);

/* Deletes the one route with exactly this projection (table, destination,
 * TOS, metric, type, scope, device, gateway); any protocol. -ESRCH when there
 * is none, -EINVAL for a projection with extra bits, -ENOTUNIQ when another
 * route shares its table, destination and TOS (the kernel's delete treats
 * metric 0 and a missing gateway as wildcards, so it could pick that one).
 * For removing what a configurator added (slirp4netns's default route) and
 * for tests. */
int lz_netroutes_delete(const struct lz_kroute *route, struct lz_err *err);

#endif
