/* Bootstrap recovery of the catalog leases of lost generations (spec 3.6
 * "bootstrap recovery" and the lease rules, FR-17; issue 13).
 *
 * A Host Coordinator that died (kill -9, a crash) leaves its generation's
 * exact lease (artifact, Domain, generation) in the Storage Catalog, and
 * `lazaret image gc` keeps a leased artifact forever. The next coordinator
 * of the Domain, holding the Domain flock and before it begins a
 * generation, releases each lease of its Domain whose generation is proved
 * dead from the Domain Store's evidence alone, by exact pidfs identity
 * (lz_pidref_alive): every recorded process of the generation (the
 * Runtime Supervisor, which is PID 1 of the namespaces every sandbox
 * process and mount lived in, the attached runsc, slirp4netns, each
 * session's exec client) is gone, and so are its recorded mounts and
 * namespaces. It does so in the spec's order: prepared-lower release
 * intent in the Domain Store (with clean State Anchor state, one
 * transaction), the exact catalog lease removed after a recheck of that
 * intent under the catalog lock, then the prepared_lower record clean.
 * Nothing is adopted; a lease whose generation is unknown to the store,
 * still live, or has a process that is alive or cannot be checked, or
 * whose prepared_lower record is missing, unreadable, not release intent
 * (or able to take it) or names another artifact, is kept and reported. */
#ifndef LZ_LEASERECOVERY_H
#define LZ_LEASERECOVERY_H

#include <stddef.h>

#include "store/domainstore.h"
#include "util/err.h"

/* Why generation may still be running, or "" (why[0] == 0) when it is
 * stopped or failed and every process it recorded (the Runtime Supervisor,
 * which is PID 1 of the namespaces every sandbox process and mount lived
 * in, the attached runsc, slirp4netns, each session's exec client) is
 * proved gone by exact pidfs identity. Processes still exiting get until
 * deadline (lz_now_ms's clock) to finish before they count as running. */
void lz_leaserecovery_judge(lz_dstore *store, uint64_t generation, int64_t deadline, char *why, size_t cap);

/* Spec 3.3: records generation, left starting, published or stopping,
 * failed, as a lost coordinator's. Holding the Domain flock proves that
 * only while the lock file is the one every coordinator takes: a runtime
 * directory removed and made again (logind at the last logout), or
 * another XDG_RUNTIME_DIR, gives a second one. So the coordinator the
 * generation recorded must be gone too (exact pidfs identity); -EBUSY
 * while it runs, changing nothing. */
int lz_leaserecovery_record_lost(lz_dstore *store, uint64_t generation, struct lz_err *err);

/* How long the processes of ended generations get to finish exiting
 * before they count as running: one wait for a whole recovery, however
 * many generations, leases and steps it judges. */
#define LZ_RECOVERY_EXIT_WAIT_MS 10000

/* One line for the coordinator's log per lease released or kept. */
typedef void lz_leaserecovery_report_fn(void *ctx, const char *line);

/* Over the leases of domain_hex in the catalog beneath storage_root_fd;
 * *ret_released (optional) counts the released ones (not one found
 * already absent, whose record still becomes clean). A lease that cannot
 * be judged, or whose recheck refuses, is kept and reported, not an
 * error; -errno only when the catalog cannot be listed or a release
 * fails. Processes get until deadline to finish (lz_leaserecovery_judge). */
int lz_leaserecovery_run(lz_dstore *store, int storage_root_fd, const char *domain_hex, int64_t deadline,
			 lz_leaserecovery_report_fn *report, void *ctx, size_t *ret_released,
			 struct lz_err *err);

/* Spec 3.6 "Domain clean" of an ended generation's prepared_lower record,
 * once the generation is proved gone: through release intent to clean,
 * but only while no catalog lease of (domain_hex, generation) exists
 * (-EBUSY naming it; a kept lease keeps its Domain evidence). 0 when the
 * record is clean or absent. */
int lz_leaserecovery_retire_lower(lz_dstore *store, int storage_root_fd, const char *domain_hex,
				  uint64_t generation, struct lz_err *err);

#endif
