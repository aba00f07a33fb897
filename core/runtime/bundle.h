/* The OCI bundle of a generation (SR-3, SR-4, SR-12, spec 3.5, 3.7): what
 * the sandbox sees, decided from the trusted configuration and the fixed
 * product layout, and written as <gen>/bundle/config.json through
 * ocispec.h, which fixes the security fields.
 *
 * Mounts, in order (after ocispec's defaults): each State Anchor at its
 * persistent directory; the volumes (read-only where configured);
 * /workspace, a read-write bind of the canonical workspace; .git pinned as
 * a mount point of its own, and Git Sentry's mounts on top of it
 * (gitsentry.h; its files from where the RS bound them, rsplan.h); the
 * init at /run/lazaret/init and the product's /etc/resolv.conf, both
 * read-only; the Escalation Client, its mailbox
 * and credentials (escalation/sandbox.h). A workspace whose Git layout Git
 * Sentry refuses refuses the plan, before the bundle.
 *
 * The guest environment of a session: PATH, HOME=/root, LANG=C.UTF-8, with
 * network.allow_domains the proxy variables (HTTP_PROXY and kin, naming
 * the egress proxy), and the profile's environment references (values the
 * loader resolved, spec 3.2); nothing else of the host's. */
#ifndef LZ_BUNDLE_H
#define LZ_BUNDLE_H

#include <stdint.h>

#include "config/config.h"
#include "fs/gitsentry.h"
#include "net/canary.h"
#include "runtime/rundir.h"
#include "util/err.h"

#define LZ_BUNDLE_INIT_PATH "/run/lazaret/init"
#define LZ_BUNDLE_GUEST_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/run/lazaret/bin"
#define LZ_BUNDLE_RESOLV_CONF "nameserver 10.137.54.3\n" /* slirp4netns's synthetic DNS (spec 3.7) */

/* Git Sentry's plan for the generation (the RS plan's: its files are
 * bound under <gen>/sentry/ by index). */
struct lz_bundle_git {
	const struct lz_gitsentry_mount *v;
	size_t n;
};

/* Writes config.json into g's bundle directory; the init runs with
 * `--attest <challenge in hex>` (spec 3.7). */
int lz_bundle_write(const lz_config *cfg, const struct lz_gendir *g, const struct lz_bundle_git *git,
		    const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], struct lz_err *err);

/* The guest environment, NULL-terminated; free with lz_bundle_env_free,
 * which wipes the values. NULL when out of memory. */
char **lz_bundle_guest_env(const lz_config *cfg);
void lz_bundle_env_free(char **env);

#endif
