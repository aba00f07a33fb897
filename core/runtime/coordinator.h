/* The Host Coordinator's mechanisms (spec 3.1, 3.3, 3.6; issue 4).
 *
 * The HC is the Domain's protocol face and lifetime authority. Lua
 * (lua/lazaret/hc.lua) sequences these steps; each one keeps its own checks:
 *   open            Domain flock (non-blocking: a second HC refuses), the
 *                   Domain Store, a new generation and its runtime directory
 *   acquire_lower   prepared-lower intent, catalog lease, lease held
 *   start           State Anchor intent, Runtime Supervisor through the
 *                   broker in a verified user namespace, mounts and the
 *                   attached runsc committed, sandbox active
 *   publish         the host-private socket (SR-10) and generation published
 *   serve           Client Sessions until the last one ends or the RS is lost
 *   stop            State Anchor release intent, stop, exact unmount proved,
 *                   RS reaped
 *   release_lower   prepared-lower release intent, catalog lease removed
 *                   under the lock after rechecking, clean
 *   close           generation stopped (or failed), runtime directory removed
 * Every child is acquired through the broker; every signal and wait uses a
 * retained pidfd. */
#ifndef LZ_COORDINATOR_H
#define LZ_COORDINATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "util/err.h"

#define LZ_HC_MAX_SESSIONS 64
#define LZ_HC_SOCKET "hc.sock"
#define LZ_HC_LOCK "hc.lock"
#define LZ_HC_LOG "hc.log"

typedef struct lz_hc lz_hc;

struct sockaddr_un;

/* The HC's socket address beneath the retained runtime Domain directory
 * (through its descriptor, never a re-resolved name); -ENAMETOOLONG. */
int lz_hc_socket_addr(const struct lz_path *runtime_domain, struct sockaddr_un *ret);

/* cfg must outlive the handle. -EBUSY: another HC holds the Domain. */
int lz_hc_open(const lz_config *cfg, lz_hc **ret, struct lz_err *err);
int lz_hc_acquire_lower(lz_hc *hc, struct lz_err *err);
int lz_hc_start(lz_hc *hc, struct lz_err *err);
int lz_hc_publish(lz_hc *hc, struct lz_err *err);
/* Returns 0 when the last session ended, -EPIPE when the RS was lost. */
int lz_hc_serve(lz_hc *hc, struct lz_err *err);
int lz_hc_stop(lz_hc *hc, struct lz_err *err);
int lz_hc_release_lower(lz_hc *hc, struct lz_err *err);
/* Records the generation stopped (ok) or failed, removes the runtime
 * directory and the socket, releases everything; accepts NULL. */
void lz_hc_close(lz_hc *hc, bool ok);

/* The generation of an open HC. */
uint64_t lz_hc_generation(const lz_hc *hc);

#endif
