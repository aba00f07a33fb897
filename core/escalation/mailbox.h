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
 * with '.') is opened once beneath the retained outbox descriptor (no
 * symlink, no other mount, non-blocking so a FIFO cannot stall the HC),
 * must be a regular file with one link and at most LZ_ESC_RECORD_MAX
 * bytes, is read once, and is unlinked whatever it held. Names, owners
 * and times are never evidence.
 *
 * Posting writes a '.'-prefixed file and renames it into place, so the
 * sandbox never sees a partial record. */
#ifndef LZ_ESCALATION_MAILBOX_H
#define LZ_ESCALATION_MAILBOX_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_MAILBOX_DIR "escalation"
#define LZ_MAILBOX_NAME_MAX 64

struct lz_mailbox {
	int dir, outbox, inbox, credential, key; /* owned directory descriptors */
	int watch;                          /* inotify on outbox, non-blocking */
	unsigned refused;                   /* entries moved aside */
};

#define LZ_MAILBOX_INIT { .dir = -EBADF, .outbox = -EBADF, .inbox = -EBADF, .credential = -EBADF, .key = -EBADF, \
				 .watch = -EBADF }

/* Creates escalation/ and its four children beneath gen_fd (an owned
 * directory descriptor) and the outbox watch. */
int lz_mailbox_create(int gen_fd, struct lz_mailbox *ret, struct lz_err *err);

/* Drains the watch (call when it polls readable). */
void lz_mailbox_drain_watch(struct lz_mailbox *mb);

/* Takes the next ready outbox entry into buf[0..LZ_ESC_RECORD_MAX): 1
 * with *ret_len set, 0 when none is ready, -errno for an entry refused
 * (err names it; it is removed too, so the next call moves on). */
int lz_mailbox_take(struct lz_mailbox *mb, uint8_t *buf, size_t *ret_len, struct lz_err *err);

/* Posts rec[0..len) as inbox/name (replacing one of that name). */
int lz_mailbox_post(struct lz_mailbox *mb, const char *name, const uint8_t *rec, size_t len, struct lz_err *err);

/* Removes inbox/name; a missing name is not an error. */
void lz_mailbox_withdraw(struct lz_mailbox *mb, const char *name);

void lz_mailbox_close(struct lz_mailbox *mb);

#endif
