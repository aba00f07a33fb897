/* v1 pidfs process identity (spec 3.3 "Host process identity").
 *
 * The boot ID plus the pidfs device and inode of a retained pidfd is the only
 * positive durable host-process authority; the host PID is a lookup locator
 * and the /proc start time is negative evidence only. */
#ifndef LZ_PIDREF_H
#define LZ_PIDREF_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define LZ_PIDFS_MAGIC 0x50494446u /* PID_FS_MAGIC */

struct lz_pidref {
	uint8_t boot_id[16]; /* UUID bytes in canonical field order */
	uint64_t pidfs_dev;
	uint64_t pidfs_ino;
	uint32_t pid;        /* locator in the host PID namespace */
	uint64_t start_time; /* /proc/<pid>/stat field 22: negative evidence */
};

/* Field by field (never the struct's padding): boot ID, pidfs device and
 * inode, PID and start time all equal. */
bool lz_pidref_equal(const struct lz_pidref *a, const struct lz_pidref *b);

/* Reads the boot ID from /proc/sys/kernel/random/boot_id. */
int lz_boot_id(uint8_t ret[16], struct lz_err *err);

/* Parses "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lowercase or uppercase). */
int lz_boot_id_parse(const char *text, uint8_t ret[16]);

/* Forms the identity of the child behind pidfd: fstatfs must report
 * PID_FS_MAGIC, fstat gives the pidfs device and inode (spec 3.3 step 5),
 * its fdinfo the PID /proc (the host's) numbers it by, never the caller's
 * own number for it (a process in a PID namespace of its own, as the
 * Runtime Supervisor is, gets another from clone3). */
int lz_pidref_from_pidfd(int pidfd, struct lz_pidref *ret, struct lz_err *err);

/* A process about to mount a /proc of its own PID namespace over the
 * host's (the Runtime Supervisor) keeps a descriptor of the host's /proc
 * here first: identities it forms are read there. Not closed here. */
void lz_pidref_use_proc(int proc_fd);
/* That descriptor, or -1 when none was kept ("/proc" is the host's). */
int lz_pidref_proc(void);

/* Exact pidfs recovery matching (spec 3.3): *ret_alive is true only when
 * the boot ID matches, a pidfd opened for ref->pid has exactly the
 * recorded pidfs device and inode, and that process has not exited. A
 * different boot, ESRCH, an unequal identity or an exited process not yet
 * reaped (a zombie) mean the recorded process is gone. Other errors
 * refuse. */
int lz_pidref_alive(const struct lz_pidref *ref, bool *ret_alive, struct lz_err *err);

/* lz_pidref_alive, waiting up to timeout_ms for the exact process to
 * finish exiting (a PID namespace's init ends only once every process in
 * it is gone, which can take seconds). */
int lz_pidref_await_gone(const struct lz_pidref *ref, int timeout_ms, bool *ret_alive, struct lz_err *err);

/* Parses numeric field (4 or later) of /proc/<pid>/stat text. */
#define LZ_PROC_STAT_PPID 4        /* the parent's PID */
#define LZ_PROC_STAT_FLAGS 9       /* the task's PF_* flags */
#define LZ_PROC_STAT_START_TIME 22 /* starttime */
int lz_proc_stat_field(const char *text, int field, uint64_t *ret);
/* include/linux/sched.h: "forked but didn't exec", in the flags field; the
 * kernel clears it before it closes the close-on-exec descriptors. */
#define LZ_PF_FORKNOEXEC 0x40u

#endif
