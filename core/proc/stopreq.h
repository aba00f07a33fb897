/* A request to stop, by signal, for a process that must end in order (the
 * Host Coordinator: its sessions told, its sandbox torn down and recorded
 * stopped, rather than left to the next launch's recovery as a crash).
 *
 * SIGTERM, SIGINT and SIGHUP are blocked and read from a signalfd, never
 * taken by a handler: a child forked without exec (the broker's) would
 * share a handler and the descriptor it writes to. Children unblock them
 * (lz_spawn, the broker) and so keep the default actions. */
#ifndef LZ_PROC_STOPREQ_H
#define LZ_PROC_STOPREQ_H

#include "util/err.h"

/* Blocks the three signals in the calling thread (call it before any
 * thread is started) and opens the descriptor lz_stopreq_fd returns.
 * Idempotent. 0 or -errno. */
int lz_stopreq_catch(struct lz_err *err);

/* The descriptor to poll for POLLIN (close-on-exec, non-blocking), or -1
 * before lz_stopreq_catch. */
int lz_stopreq_fd(void);

/* The first stop signal received (SIGTERM, SIGINT or SIGHUP), or 0: reads
 * what is pending, so a later poll of lz_stopreq_fd does not wake for the
 * same signal. Once one came, it is the answer for the process's life. */
int lz_stopreq_signal(void);

/* In a child, before it execs or runs a program of its own: no signal
 * blocked, whatever its parent holds, so the stop signals keep their
 * default actions there. Async-signal-safe. */
void lz_stopreq_unblock_all(void);

#endif
