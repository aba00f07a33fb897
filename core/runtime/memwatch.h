/* The sandbox's memory, watched from the host (docs/threat-model.md).
 *
 * runsc runs with --ignore-cgroups (C-REFINEMENT fact 12), so nothing of
 * the host bounds what a sandbox takes: its guest memory, its in-memory
 * /tmp and its page cache all live in one memory file of runsc-sandbox
 * (a memfd named "runsc-memory"), which grows as the guest uses memory.
 * The Runtime Supervisor finds that file once the container runs and
 * reads its allocated size on a timer; past the limit, the generation is
 * stopped and says why, before the host's OOM killer picks one of the
 * developer's processes instead. */
#ifndef LZ_MEMWATCH_H
#define LZ_MEMWATCH_H

#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* How often the memory file is looked at: what a guest can overshoot the
 * limit by is what it allocates in this time. */
#define LZ_MEMWATCH_INTERVAL_MS 100

struct lz_memwatch {
	int pid_dir;  /* /proc/<runsc-sandbox>: pins that process, not its number */
	char fd[16];  /* the memory file's descriptor number in it */
	dev_t dev;    /* the memory file's identity, checked at every look */
	ino_t ino;
	uint64_t limit, seen; /* bytes */
};

#define LZ_MEMWATCH_INIT { .pid_dir = -1 }

/* Finds runsc-sandbox among the children of runsc run (host PID
 * runsc_pid, in the /proc at proc_fd; -1: "/proc") and its memory file.
 * Refuses when either is missing: a sandbox whose memory cannot be
 * watched does not run. */
int lz_memwatch_open(int proc_fd, pid_t runsc_pid, uint64_t limit, struct lz_memwatch *ret,
		     struct lz_err *err);

/* 0 within the limit, 1 past it (w->seen says how far), -ESRCH when the
 * sandbox process is gone, another negative errno otherwise. */
int lz_memwatch_check(struct lz_memwatch *w, struct lz_err *err);

void lz_memwatch_close(struct lz_memwatch *w);

/* The limit when none is configured: half of the host's memory. */
uint64_t lz_memwatch_default_limit(void);

#endif
