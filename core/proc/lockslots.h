/* Slots shared by every process that opens one file: a budget for the
 * whole host (the egress proxies' connections, egressproxy.h), not one per
 * process. Slot i is an open file description's write lock on byte i of
 * the file (F_OFD_SETLK). The kernel drops a description's locks when its
 * last descriptor closes, so a holder that crashes or is killed leaks no
 * slot, and nothing is ever written to the file.
 *
 * The locks of one description never conflict with each other: the
 * process's own slots are kept here, under a mutex, so its threads share
 * one lz_lockslots. */
#ifndef LZ_PROC_LOCKSLOTS_H
#define LZ_PROC_LOCKSLOTS_H

#include <pthread.h>
#include <stdint.h>

#define LZ_LOCKSLOTS_MAX 4096

struct lz_lockslots {
	int fd;
	unsigned base; /* slot i is byte base + i */
	unsigned n;    /* slots 0..n-1 */
	unsigned held; /* by this process */
	unsigned next; /* where the next search starts */
	pthread_mutex_t lock;
	uint64_t mine[LZ_LOCKSLOTS_MAX / 64];
};

/* fd: a regular file open for writing, which the caller keeps open (and
 * shares with no other description's owner it means to count apart).
 * -EINVAL when n is 0 or over LZ_LOCKSLOTS_MAX or fd is not a regular
 * file opened for writing. */
int lz_lockslots_init(struct lz_lockslots *s, int fd, unsigned n);

/* The same with slot i at byte base + i: several sets of slots in one
 * file, none overlapping another. */
int lz_lockslots_init_at(struct lz_lockslots *s, int fd, unsigned base, unsigned n);

/* A free slot, now held: its number. -EAGAIN when all n are held (by this
 * process and others together); another -errno when the kernel refuses a
 * lock (ENOLCK: its own limit). */
int lz_lockslots_take(struct lz_lockslots *s);

/* Gives back a slot lz_lockslots_take returned. */
void lz_lockslots_give(struct lz_lockslots *s, int slot);

/* Gives back the highest slot this process holds, if any (a holder that
 * counts its slots, not which). */
void lz_lockslots_give_one(struct lz_lockslots *s);

/* How many slots this process holds. */
unsigned lz_lockslots_held(struct lz_lockslots *s);

/* How many slots other processes hold now (a walk of F_OFD_GETLK, about
 * one call per holder), or -errno. */
int lz_lockslots_others(struct lz_lockslots *s);

/* Gives back every slot this process holds; s is not used again. The
 * descriptor stays the caller's. */
void lz_lockslots_destroy(struct lz_lockslots *s);

#endif
