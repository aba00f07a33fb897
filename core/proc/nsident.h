/* Namespace and mount identity for bootstrap recovery (spec 3.3 "exact
 * matching", 3.6 bootstrap recovery; issue 13).
 *
 * Linux 6.18 gives every namespace a 64-bit ID that is never reused
 * within a boot, and opens a namespace from its ID (an nsfs file handle)
 * only while it exists. A mount namespace gone takes its mounts with it,
 * a network namespace its devices and addresses (the canary veth of spec
 * 3.7 included). A process that exited holds neither, even unreaped (a
 * zombie keeps only its credentials, hence its user namespace, which is
 * why that one is no evidence). A mount in a namespace named here is
 * looked up with lz_mountns_present_in (fs/mountns.h). */
#ifndef LZ_NSIDENT_H
#define LZ_NSIDENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

struct lz_nsident {
	int type;      /* CLONE_NEWUSER, CLONE_NEWNS or CLONE_NEWNET */
	uint64_t id;   /* NS_GET_ID */
	uint32_t inum; /* the nsfs inode number */
};

/* Whether this kernel names namespaces by ID and opens them by handle
 * (Linux 6.18); without it nothing is recorded and recovery rests on
 * the processes alone (docs/threat-model.md). */
bool lz_nsident_supported(void);

/* The identity of the namespace of that type the process behind pidfd is
 * in (PIDFD_GET_*_NAMESPACE). */
int lz_nsident_of_pidfd(int pidfd, int type, struct lz_nsident *ret, struct lz_err *err);

/* Whether a process this caller can inspect in /proc has a thread in ns
 * or holds a descriptor of it: 1 and *ret_pid (its PID), 0, or -errno.
 * Processes /proc does not show to this user (another user's, one that
 * made itself non-dumpable) are not seen; nor are sockets of the
 * namespace, or bind mounts of it in other mount namespaces. */
int lz_nsident_find_holder(const struct lz_nsident *ns, pid_t *ret_pid, struct lz_err *err);

/* *ret_alive is false only when the kernel does not open the namespace
 * by its ID (ESTALE) and lz_nsident_find_holder finds no holder; waits up
 * to timeout_ms for it to be freed (namespaces are torn down
 * asynchronously after their last process). Other errors refuse. */
int lz_nsident_await_gone(const struct lz_nsident *ns, int timeout_ms, bool *ret_alive, struct lz_err *err);

#endif
