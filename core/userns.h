/* Verified user namespaces for the preparation worker and the Runtime
 * Supervisor (spec 3.1, SR-12).
 *
 * The child is created directly in a new user namespace (clone3 with
 * CLONE_NEWUSER|CLONE_PIDFD) and blocks on a launch barrier. The parent
 * writes its maps with the setuid newuidmap/newgidmap helpers:
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

#define LZ_USERNS_SUBID_COUNT 65536u

struct lz_idmap {
	uid_t uid;
	gid_t gid;
	uint32_t subuid_start;
	uint32_t subgid_start;
};

/* Chooses the lowest-starting subordinate range of >= 65536 IDs for the
 * invoking user from /etc/subuid and /etc/subgid. */
int lz_idmap_for_invoking_user(struct lz_idmap *ret, struct lz_err *err);

/* Compares the text of a uid_map/gid_map file with the expected two lines
 * "0 <host> 1" and "1 <sub_start> 65536" (any whitespace). */
int lz_idmap_verify_text(const char *text, uint32_t host_id, uint32_t sub_start,
			 struct lz_err *err);

/* Runs in the child after the maps are verified; err->msg is sent to the
 * parent when it returns < 0. The return value becomes the exit status
 * (0 on success, 1 on failure). */
typedef int (*lz_userns_fn)(void *arg, struct lz_err *err);

struct lz_userns_child {
	int pidfd;     /* owned */
	pid_t pid;     /* host PID: locator only, for newuidmap */
	int report_fd; /* owned: read end of the child's error channel */
};

#define LZ_USERNS_CHILD_INIT { .pidfd = -EBADF, .pid = 0, .report_fd = -EBADF }

/* Runs after the maps are verified and before the child is released, so the
 * caller can persist the child's identity first (spec 3.3 steps 6-7). A
 * negative return aborts: the child is killed and never runs fn. */
typedef int (*lz_userns_hook)(void *ctx, int pidfd, pid_t pid, struct lz_err *err);

/* Creates the child, maps and verifies it, runs hook (may be NULL), then
 * releases it into fn(arg). On failure the child is killed and reaped and
 * *ret is untouched. */
int lz_userns_spawn(const struct lz_idmap *map, lz_userns_fn fn, void *arg, lz_userns_hook hook,
		    void *hook_ctx, struct lz_userns_child *ret, struct lz_err *err);

/* Waits for the child to exit and reaps it; a failure of fn comes back as
 * -EIO with the child's message in err. Releases the child's resources. */
int lz_userns_wait(struct lz_userns_child *child, struct lz_err *err);

/* Kills (through the pidfd), reaps and releases; accepts an empty child. */
void lz_userns_kill(struct lz_userns_child *child);

#endif
