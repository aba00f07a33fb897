/* The Client CLI's side of a launch (issue 4): reach the Domain's Host
 * Coordinator over its host-private socket, starting one (as its own
 * session, so it outlives the terminal) when none answers, then run one
 * command there. The standard streams travel to the HC as descriptors
 * (SCM_RIGHTS) so stdin EOF and every byte reach the guest unmodified; a
 * stream that is a terminal is relayed through a pipe instead, so the
 * sandbox never holds the developer's terminal (DX-5).
 *
 * An interactive session (spec 3.4) puts the local terminal in raw mode and
 * relays bytes both ways as Input and Output records; the guest's terminal
 * is a PTY the HC owns. Window size changes are sent as Resize; SIGINT and
 * SIGQUIT sent to this process become Interrupt and Quit, SIGTERM and SIGHUP
 * close the session; SIGTSTP suspends only this CLI (terminal restored
 * first, the modes the guest set included; size re-sent on resume). The
 * terminal is restored on every path this process survives, and so are
 * the caller's signal actions and mask: between attempts (a coordinator
 * lost before it read the command) a signal does what it does outside a
 * session. A retry happens only when the command was provably never read:
 * a Refused record, whatever its errno, is not a reason to retry. */
#ifndef LZ_CLIENT_H
#define LZ_CLIENT_H

#include <stdbool.h>

#include "config/config.h"
#include "util/err.h"

#define LZ_CLIENT_START_TIMEOUT_MS 120000

struct lz_client_request {
	const lz_config *cfg;   /* resolved, with the selected profile */
	const char *config_arg; /* the --config given, or NULL */
	char *const *argv;      /* the exact command */
	bool terminal;          /* an interactive session on this terminal (issue 5) */
};

/* Runs the command; *ret_status is its exit status (128+N for signal N).
 * Failures to reach or start the HC come back as -errno with a message. */
int lz_client_run(const struct lz_client_request *req, int *ret_status, struct lz_err *err);

#endif
