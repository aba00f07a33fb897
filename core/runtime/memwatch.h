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

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc/lockslots.h"
#include "util/err.h"

/* How often the memory file is looked at: what a guest can overshoot the
 * limit by is what it allocates in this time. */
#define LZ_MEMWATCH_INTERVAL_MS 100

/* The Storage Root's file whose slots (proc/lockslots.h) are the memory
 * every sandbox of the host may hold together: each watch holds as many
 * chunks as its sandbox's memory file fills, rounded up, taking them as
 * it grows and giving them back as it shrinks or ends. Its share is the
 * budget divided by the sandboxes running (each holds a presence slot).
 * One that needs more than is left ends when it needs its share or more;
 * needing less, it runs on and says so (a want slot), and the first one
 * holding more than its share to see it ends instead (taking the one
 * yield slot, so that one ends at a time). Four sets of slots in the
 * file: chunks from byte 0, presence and want slots from these bases,
 * and the yield slot. */
#define LZ_MEMWATCH_SLOTS "memory.slots"
#define LZ_MEMWATCH_PRESENT_BASE LZ_LOCKSLOTS_MAX
#define LZ_MEMWATCH_WANT_BASE (2 * LZ_LOCKSLOTS_MAX)
#define LZ_MEMWATCH_YIELD_BASE (3 * LZ_LOCKSLOTS_MAX)

/* The least chunk: a budget of more than LZ_LOCKSLOTS_MAX of them takes
 * larger ones. What a sandbox may hold beyond what it uses is one chunk. */
#define LZ_MEMWATCH_CHUNK_MIN (32ull << 20)

struct lz_memwatch_limits {
	uint64_t own;  /* bytes: this sandbox alone (runtime.max_memory_mib) */
	uint64_t host; /* bytes: every sandbox together (lz_memwatch_host_budget) */
	int slots_fd;  /* LZ_MEMWATCH_SLOTS open for writing, kept by the caller;
			* -1: no shared budget (tests) */
};

struct lz_memwatch {
	int pid_dir;  /* /proc/<runsc-sandbox>: pins that process, not its number */
	char fd[16];  /* the memory file's descriptor number in it */
	dev_t dev;    /* the memory file's identity, checked at every look */
	ino_t ino;
	uint64_t limit, seen; /* bytes */
	uint64_t host, chunk; /* bytes: the shared budget and one slot of it */
	unsigned running;     /* sandboxes holding a presence slot, at the last count */
	bool shared;          /* the four sets are initialised, a presence slot held */
	bool looked;          /* a first look was made */
	struct lz_lockslots slots, present, want, yield;
};

#define LZ_MEMWATCH_INIT { .pid_dir = -1 }

/* What lz_memwatch_check found. */
enum {
	LZ_MEMWATCH_WITHIN = 0,
	LZ_MEMWATCH_PAST_OWN = 1,  /* past lim->own */
	LZ_MEMWATCH_PAST_HOST = 2, /* more than the shared budget has left, and
				    * at least its share (the first look: any) */
	LZ_MEMWATCH_YIELD = 3,     /* more than its share while another is short */
};

/* Finds runsc-sandbox among the children of runsc run (host PID
 * runsc_pid, in the /proc at proc_fd; -1: "/proc") and its memory file.
 * Refuses when either is missing: a sandbox whose memory cannot be
 * watched does not run. w must be LZ_MEMWATCH_INIT; closed on failure. */
int lz_memwatch_open(int proc_fd, pid_t runsc_pid, const struct lz_memwatch_limits *lim, struct lz_memwatch *w,
		     struct lz_err *err);

/* One look: LZ_MEMWATCH_WITHIN, _PAST_OWN, _PAST_HOST or _YIELD (w->seen
 * says how much the sandbox holds, lz_memwatch_held what it holds of the
 * shared budget, w->running among how many), -ESRCH when the sandbox
 * process is gone, another negative errno otherwise. Takes or gives back
 * chunks of the shared budget; WITHIN while short of it below its share. */
int lz_memwatch_check(struct lz_memwatch *w, struct lz_err *err);

/* Bytes of the shared budget this watch holds. */
uint64_t lz_memwatch_held(struct lz_memwatch *w);

/* Gives back what the watch holds of the shared budget. */
void lz_memwatch_close(struct lz_memwatch *w);

/* The memory every sandbox of the host may hold together, and one alone
 * when runtime.max_memory_mib is not set: half of the host's memory;
 * UINT64_MAX when the host's memory cannot be read. */
uint64_t lz_memwatch_host_budget(void);

/* The chunk of a budget of host bytes: LZ_MEMWATCH_CHUNK_MIN, or more so
 * that there are at most LZ_LOCKSLOTS_MAX. */
uint64_t lz_memwatch_chunk(uint64_t host);

#endif
