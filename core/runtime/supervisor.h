/* The Runtime Supervisor (spec 3.1, 3.3, 3.6, 3.7).
 *
 * The Host Coordinator's broker creates the RS in fresh user, PID and mount
 * namespaces (the user namespace with the verified map); the RS starts in
 * the host's network namespace. As PID 1 of its PID namespace, the RS takes
 * every runsc and slirp4netns process with it when it ends; its
 * parent-death signal ends it when the HC is lost. The RS:
 *   1. makes its mounts private and mounts its own /proc, mounts the root
 *      overlay at <gen>/root and one overlay per persistent directory
 *      (State Anchor) at <gen>/anchor/<n>, and reports their identities;
 *   2. clones slirp4netns through its broker while still in the host
 *      network namespace (the helper keeps it for its sockets), reports the
 *      staged identity and, once the HC echoes it, moves itself into a new
 *      enforcement network namespace and prepares it (the /proc/sys/net/core
 *      shim of C-REFINEMENT fact 3, lo up, IPv6 disabled) before releasing
 *      the helper, which attaches to it (FR-16, spec 3.7);
 *   3. builds the known-live canary (canary.h), waits for slirp4netns's
 *      tap0, installs exactly the derived policy (verified seals and digest)
 *      and checks the installed routes against it;
 *   4. launches a non-detached `runsc run` through its broker, reports the
 *      staged identity and releases it only after the HC's commit
 *      acknowledgement echoes it (spec 3.3 steps 6-7);
 *   5. reads the sandbox init's observations from the init's standard
 *      output, removes the canary by its creation record, observes the
 *      result, drops network administration irreversibly, and reports
 *      readiness with the whole attestation record (netattest.h); the HC
 *      judges it;
 *   6. on STOP, on loss of the HC (control socket EOF: the lease-loss path),
 *      or when runsc ends: stops the container and the helper, unmounts
 *      exactly what it mounted, proves the mounts absent, reports, and
 *      exits.
 * The RS never opens the Domain Store or the Storage Catalog. */
#ifndef LZ_SUPERVISOR_H
#define LZ_SUPERVISOR_H

#include <stdint.h>

#include "net/canary.h"
#include "fs/mountns.h"
#include "net/netattest.h"
#include "proc/pidref.h"
#include "util/err.h"

#define LZ_RS_MAX_ANCHORS 64
#define LZ_RS_TEXT_MAX LZ_ERR_MSG_MAX
#define LZ_RS_START_TIMEOUT_MS 60000
#define LZ_RS_STOP_TIMEOUT_MS 10000
#define LZ_RS_TAP_TIMEOUT_MS 20000
#define LZ_RS_INIT_REPORT_TIMEOUT_MS 20000

enum lz_rs_msg_type {
	LZ_RS_MOUNTS = 1,  /* RS -> HC: root + anchor mount identities */
	LZ_RS_STAGED = 2,  /* RS -> HC: attached runsc staged identity */
	LZ_RS_READY = 3,   /* RS -> HC: container running, network attested */
	LZ_RS_STOPPED = 4, /* RS -> HC: runsc gone, mounts proved absent */
	LZ_RS_FAILED = 5,  /* RS -> HC: text says why */
	LZ_RS_HELPER_STAGED = 6, /* RS -> HC: slirp4netns staged identity */
	LZ_HC_ACK = 10,    /* HC -> RS: staged identity committed (echoed) */
	LZ_HC_STOP = 11,   /* HC -> RS: stop the generation */
};

struct lz_rs_msg {
	uint32_t type;
	uint32_t n_mounts;
	uint64_t generation;
	char domain_id[65];
	struct lz_pidref id;
	struct lz_mount_id mounts[LZ_RS_MAX_ANCHORS + 1]; /* [0] is the root */
	char text[LZ_RS_TEXT_MAX];
	/* LZ_RS_READY: the attestation record (spec 3.7), encoded. */
	uint32_t attest_len;
	uint8_t attest[LZ_NETATTEST_ENCODED_MAX];
};

struct lz_rs_anchor {
	int lower_fd;
	int upper_fd;
	int work_fd;
	int target_fd;
	char target[4096]; /* label of target_fd, for the exact unmount */
	char lower[4096];  /* labels of the layers, reopened in the RS */
	char upper[4096];
	char work[4096];
};

struct lz_rs_plan {
	int control_fd; /* SOCK_SEQPACKET to the HC */
	int hc_fd;      /* the HC's end: closed first thing in the RS */
	int log_fd;     /* runsc's stdout/stderr */
	uint64_t generation;
	char domain_id[65];
	int prepared_fd;    /* the prepared lower's rootfs */
	char prepared[4096]; /* its label: reopened in the RS's namespace */
	int root_target_fd; /* <gen>/root */
	char root_target[4096];
	/* The transient writable layer of the root: an overlay over the
	 * prepared lower, discarded with the generation (spec 3.6). */
	int root_upper_fd;
	int root_work_fd;
	char root_upper[4096];
	char root_work[4096];
	struct lz_rs_anchor anchors[LZ_RS_MAX_ANCHORS];
	size_t n_anchors;
	char runsc_path[64];
	char runsc_root[4096]; /* --root */
	char bundle[4096];
	char container_id[80];
	uint32_t dcache;
	/* Spec 3.7: the derived policy, canonical bytes in a write-sealed
	 * memfd, and the digest the HC computed over them. */
	int policy_fd;
	uint8_t policy_digest[32];
	/* FR-16: slirp4netns, located by the HC, and its log. */
	char slirp_path[64];
	int slirp_log_fd;
	/* The generation's canary key (canary.h); the HC keeps a copy. */
	uint8_t canary_key[LZ_CANARY_KEY_LEN];
};

/* The RS process body (a broker fn target). */
int lz_rs_main(void *plan, struct lz_err *err);

/* Message I/O on the control socket (whole records, no fds). */
int lz_rs_send(int fd, const struct lz_rs_msg *m);
int lz_rs_recv(int fd, struct lz_rs_msg *m, int timeout_ms);

#endif
