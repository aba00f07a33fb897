/* Verified user namespaces for the preparation worker and the Runtime
 * Supervisor (spec 3.1, SR-12).
 *
 * The child is created directly in a new user namespace by the broker
 * (broker.h: clone3 with CLONE_NEWUSER|CLONE_PIDFD) and blocks on its launch
 * barrier. The parent writes its maps with the setuid newuidmap/newgidmap
 * helpers:
 *     0 -> the invoking uid/gid (count 1)
 *     1..65536 -> the lowest contiguous subordinate allocation of >= 65536
 * then reads /proc/<pid>/{uid,gid}_map back and compares them exactly before
 * it releases the child. The child is never reaped before that check, so its
 * PID cannot be reused under the parent; every signal goes through the pidfd.
 * A child whose barrier closes without the release byte exits at once.
 *
 * Threat: a namespace whose maps grant more (or other) host IDs than the
 * product expects, e.g. through a tampered helper or a racing writer. */
#ifndef LZ_USERNS_H
#define LZ_USERNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define LZ_USERNS_SUBID_COUNT 65536u /* LZ_HOSTPROBE_SUBID_COUNT */

struct lz_idmap {
	uid_t uid;
	gid_t gid;
	uint32_t subuid_start;
	uint32_t subgid_start;
};

/* Chooses the lowest-starting subordinate range of >= 65536 IDs for the
 * invoking user from /etc/subuid and /etc/subgid, and refuses (-EPERM,
 * naming the file) one that holds host ID 0, starts below 1000 or holds
 * your own uid or gid (lz_hostprobe_subid_choose, which diag shares). */
int lz_idmap_for_invoking_user(struct lz_idmap *ret, struct lz_err *err);

/* Compares the text of a uid_map/gid_map file with the expected two lines
 * "0 <host> 1" and "1 <sub_start> 65536" (any whitespace). */
int lz_idmap_verify_text(const char *text, uint32_t host_id, uint32_t sub_start,
			 struct lz_err *err);

/* Writes the maps of the (blocked, unreaped) child pid with newuidmap and
 * newgidmap and reads them back through /proc; any difference refuses. */
int lz_idmap_write_and_verify(const struct lz_idmap *map, pid_t pid, int pidfd,
			      struct lz_err *err);

#endif
