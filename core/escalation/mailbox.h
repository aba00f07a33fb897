/* The Escalation Mailbox, the Host Coordinator's side (spec 3.8).
 *
 *   gen-<N>/escalation/        0700
 *     outbox/     the sandbox writes requests, cancellations and
 *                 acknowledgements here (mounted read-write)
 *     inbox/      the HC posts decisions, chunks and results here
 *                 (mounted read-only)
 *     credential/ the sandbox's credentials (read-only)
 *     key/        the sandbox's key seed, mounted as a file (read-only)
 *                 and unlinked here once the sandbox runs
 *
 * The mailbox is not an authentication boundary: an entry counts only
 * for the signature the caller verifies over the bytes lz_mailbox_take
 * returns. Those bytes are owned: each ready entry (a name not starting
 * with '.'), taken when the watch reports it (created, renamed in, or
 * closed after writing: one written in place may be read before it is
 * whole, and is refused), is opened once beneath the retained outbox
 * descriptor (no symlink, no other mount, non-blocking so a FIFO cannot
 * stall the HC), must be a regular file with one link and at most LZ_ESC_RECORD_MAX
 * bytes, is read once, and is unlinked whatever it held. Names, owners
 * and times are never evidence.
 *
 * Posting writes a '.'-prefixed file and renames it into place, so the
 * sandbox never sees a partial record. */
#ifndef LZ_ESCALATION_MAILBOX_H
#define LZ_ESCALATION_MAILBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/inotify.h>

#include "util/err.h"

#define LZ_MAILBOX_DIR "escalation"
#define LZ_MAILBOX_NAME_MAX 64

#define LZ_MAILBOX_READY_MAX 128

struct lz_mailbox {
	int dir, outbox, inbox, credential, key; /* owned directory descriptors */
	int watch;                          /* inotify on outbox, non-blocking */
	unsigned refused;                   /* entries moved aside */
	/* The names the watch reported, not yet taken: entries are found by
	 * their events, never by listing the outbox per take (the sandbox
	 * can fill it with names being written). When the kernel's queue
	 * overflowed (or at the first take), one listing of the outbox
	 * (scan, read on across takes, LZ_MAILBOX_SCAN_PER_TAKE entries at
	 * most per take) finds what the events did not say. */
	char ready[LZ_MAILBOX_READY_MAX][LZ_MAILBOX_NAME_MAX];
	unsigned ready_first, ready_n;
	/* Events read from the watch and not yet queued: past a full ready
	 * queue they wait here, then in the kernel's queue (the watch is
	 * read no further), never in a listing: a burst of names made and
	 * removed at once would otherwise set off a listing of every '.'
	 * name the sandbox left. */
	_Alignas(struct inotify_event) char events[4096];
	size_t events_len, events_at;
	bool rescan, lost_in_scan; /* a listing is due; names were lost during one */
	bool list_failed;          /* the last listing could not start */
	int list_errno;            /* why */
	void *scan;        /* DIR *: the listing under way */
	unsigned listings; /* how many were started (tests read it) */
	unsigned long scanned; /* directory entries the listings read (tests read it) */
};

#define LZ_MAILBOX_INIT { .dir = -EBADF, .outbox = -EBADF, .inbox = -EBADF, .credential = -EBADF, .key = -EBADF, \
				 .watch = -EBADF, .rescan = true }

/* Creates escalation/ and its four children beneath gen_fd (an owned
 * directory descriptor) and the outbox watch. */
int lz_mailbox_create(int gen_fd, struct lz_mailbox *ret, struct lz_err *err);

/* Drains the watch into the ready names (call when it polls readable;
 * lz_mailbox_take drains it too). */
void lz_mailbox_drain_watch(struct lz_mailbox *mb);

/* Takes the next ready outbox entry into buf[0..LZ_ESC_RECORD_MAX): 1
 * with *ret_len set, 0 when none is ready (or LZ_MAILBOX_GONE_PER_TAKE
 * reported names were gone, or a listing read LZ_MAILBOX_SCAN_PER_TAKE
 * entries, '.' names included: lz_mailbox_pending says more may be, and
 * the listing reads on at the next call), -EAGAIN when this process
 * could not read an entry or list the outbox for now (out of descriptors
 * or memory: err names it; the entry stays, and a later take reads it;
 * the caller takes again later, as nothing else will wake it), -errno for an
 * entry refused (err names it; it is removed too, so the next call moves
 * on). */
#define LZ_MAILBOX_GONE_PER_TAKE 64
#define LZ_MAILBOX_SCAN_PER_TAKE 1024
int lz_mailbox_take(struct lz_mailbox *mb, uint8_t *buf, size_t *ret_len, struct lz_err *err);

/* Whether names are known that a take has not looked at yet (reported,
 * or a listing due or under way): the caller takes again without waiting
 * for the watch. A listing that could not start waits for the next wake. */
bool lz_mailbox_pending(const struct lz_mailbox *mb);

/* Posts rec[0..len) as inbox/name (replacing one of that name). */
int lz_mailbox_post(struct lz_mailbox *mb, const char *name, const uint8_t *rec, size_t len, struct lz_err *err);

/* Removes inbox/name; a missing name is not an error. */
void lz_mailbox_withdraw(struct lz_mailbox *mb, const char *name);

void lz_mailbox_close(struct lz_mailbox *mb);

#endif
