/* Host Escalation, the Host Coordinator's side (spec 3.8, DX-4, SR-10):
 * the requests of one generation from the mailbox to a decision, the host
 * process an approved request runs, and its output back as chunks.
 *
 * A job is one request. Its life:
 *   ROUTING   verified (signature, scope, capability, no replay); the
 *             coordinator finds the requesting session and asks its route
 *             (lz_escalation_next_route)
 *   PROMPT    the developer is asked in that session's terminal
 *   RUNNING   approved: the host process runs; its stdout and stderr
 *             become chunks, at most LZ_ESC_WINDOW unacknowledged, the
 *             pipes unread at that bound (the process then blocks in the
 *             kernel, never in HC memory)
 *   ENDED     the terminal result is posted; the job ends when the client
 *             acknowledges it (sequence chunks + 1), or
 *             LZ_ESC_ACK_TIMEOUT_MS after the result was posted
 * Cancellation (from the sandbox), session loss and an acknowledgement
 * timeout kill the exact host process and the process group it leads
 * (what it started and did not move out with setsid or setpgid), both
 * through its pidfd, and reap it before its result files are removed.
 *
 * The host process (lz_escalation_approve): argv[0] must be absolute and
 * is opened by the host process before it execs (a lookup that waits on a
 * mount holds that request, never the coordinator), component by
 * component with no symlink (pathauth.h), must be
 * a regular file with one link, owned by root or the developer, not group-
 * or other-writable and executable; an auto-approved request runs the
 * rule's executable opened at configuration load, revalidated and checked
 * again. It is executed from that descriptor (execveat, no shell, no PATH
 * lookup) with exactly argv, stdin from /dev/null, in the workspace, with
 * the caller's environment, in a process group of its own. Nothing the
 * requester sent but argv reaches it; no descriptor of the sandbox's. */
#ifndef LZ_ESCALATION_H
#define LZ_ESCALATION_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "escalation/mailbox.h"
#include "escalation/trustanchor.h"
#include "util/err.h"

#define LZ_ESC_MAX_JOBS 8         /* requests at once in one generation */
#define LZ_ESC_WINDOW 8           /* unacknowledged chunks per request (spec 3.8) */
#define LZ_ESC_SEEN_MAX 4096      /* request IDs remembered against replay */
#define LZ_ESC_ACK_TIMEOUT_MS 60000
/* the outbox; per request its process and two pipes, or its start, and a
 * killed process not yet ended */
#define LZ_ESC_POLLFDS (1 + 4 * LZ_ESC_MAX_JOBS)

struct lz_escalation;
struct lz_path;

/* A job waiting for its route: what the request asks, owned by the
 * escalation until the job ends. Strings are NUL-terminated (argv and cwd
 * can hold any byte but NUL; why is UTF-8). */
struct lz_esc_route {
	size_t job;
	uint8_t session_id[LZ_ESC_ID_LEN];
	char *const *argv;
	size_t argc;
	const char *cwd, *why;
};

/* Creates the mailbox beneath gen_fd and the generation's Trust Anchor
 * package, and writes the sandbox's credential files. keeper_fd (kept as
 * a duplicate) is the program every host command runs under
 * (proc/keeper.h). */
int lz_escalation_create(int gen_fd, const uint8_t domain_id[LZ_ESC_DOMAIN_ID_LEN], uint64_t generation,
			 int keeper_fd, struct lz_escalation **ret, struct lz_err *err);

const struct lz_trust_anchor *lz_escalation_anchor(const struct lz_escalation *e);

/* Spec 3.8: the durable record of each host process. launching runs after
 * every check and before the process starts (a failure refuses the
 * start); ended once it was reaped. hex is the request ID, session the
 * requesting session's ID (both 32 hex digits), digest the SHA-256 of
 * the argument vector, each element preceded by its length as a 32-bit
 * big-endian integer. */
struct lz_esc_hooks {
	int (*launching)(void *ctx, const char *hex, const char *session, const uint8_t digest[32], bool automatic,
			 struct lz_err *err);
	void (*ended)(void *ctx, const char *hex);
	/* An approved request's host process did not start (why), told to
	 * the session slot that approved it. */
	void (*not_started)(void *ctx, int session, const char *why);
	void *ctx;
};

void lz_escalation_set_hooks(struct lz_escalation *e, const struct lz_esc_hooks *hooks);

/* The sandbox holds its credential mount: the key file goes, and with it
 * the private half (spec 3.3). */
void lz_escalation_sandbox_started(struct lz_escalation *e);

/* The sealed Session Request Capability for a new session, in lowercase
 * hex into out (2 * LZ_ESC_CAPABILITY_MAX + 1 bytes). */
int lz_escalation_capability_hex(const struct lz_escalation *e, const uint8_t session_id[LZ_ESC_ID_LEN], char *out,
				 size_t cap);

/* Up to LZ_ESC_POLLFDS entries; *timeout_ms lowered to the next
 * deadline. */
size_t lz_escalation_pollfds(const struct lz_escalation *e, struct pollfd *pf, int *timeout_ms);

/* Handles the readiness of the entries lz_escalation_pollfds filled (n of
 * them, revents set), then deadlines. */
void lz_escalation_handle(struct lz_escalation *e, const struct pollfd *pf, size_t n);

/* The next job in ROUTING not handed out yet (each is handed out once);
 * false when none. */
bool lz_escalation_next_route(struct lz_escalation *e, struct lz_esc_route *ret);

/* Hands job out again at the next lz_escalation_next_route: its session
 * is still starting (the coordinator routes it once the session runs).
 * Only a job handed out and not yet decided. */
void lz_escalation_route_later(struct lz_escalation *e, size_t job);

/* The auto_approve rule that matches argv exactly (spec 3.2: element zero
 * byte-equal to the rule's canonical executable, the rest equal to its
 * arguments), or -1. rules: canonical executables; args per rule. */
struct lz_esc_rule {
	const char *executable;
	char *const *args;
	size_t n_args;
};
int lz_escalation_rule_match(const struct lz_esc_rule *rules, size_t n_rules, char *const *argv, size_t argc);

/* The job's route was decided: it is shown to session (an opaque slot
 * number the coordinator gives back to lz_escalation_session_gone). */
void lz_escalation_prompting(struct lz_escalation *e, size_t job, int session);

/* Approves the job: verdict LZ_ESC_APPROVED (the developer; the job is
 * in PROMPT) or LZ_ESC_AUTO_APPROVED with the rule's executable (an
 * O_PATH descriptor the configuration holds, revalidated by the host
 * process; the job is being routed); -ESTALE, changing nothing, for a job
 * in another state. Starts the host process in workspace_fd with env; the
 * decision is posted once it has exec'd (lz_escalation_handle). A failure
 * to start ends the job with a REFUSED result (its executable could not
 * be opened or is not one to run) or a FAILED one, saying why, and tells
 * the session through the not_started hook. */
int lz_escalation_approve(struct lz_escalation *e, size_t job, uint32_t verdict, const struct lz_path *rule_exe,
			  int workspace_fd, char *const *env, int session, struct lz_err *err);

/* Denies the job with message (shown to the requester). */
void lz_escalation_deny(struct lz_escalation *e, size_t job, const char *message);

/* The session of that slot ended: its jobs are cancelled (host processes
 * killed and reaped, files removed). Returns how many. */
size_t lz_escalation_session_gone(struct lz_escalation *e, int session);

/* A session slot whose prompt's request was cancelled, for the
 * coordinator to take the prompt down; -1 when none. */
int lz_escalation_next_withdrawn(struct lz_escalation *e);

/* Whether job is the request whose prompt session shows (it waits in
 * PROMPT for that session's answer). An answer applies only then. */
bool lz_escalation_prompt_is(const struct lz_escalation *e, size_t job, int session);

/* The executable path (argv[0], as the sandbox wrote it) of a job that
 * waits for a decision, else NULL. */
const char *lz_escalation_executable(const struct lz_escalation *e, size_t job);

/* In a child of the coordinator that does not exec (proc/broker.h): wipes
 * every key and changes nothing else; e is of no use after it. Accepts
 * NULL. */
void lz_escalation_forget_keys(struct lz_escalation *e);

/* Kills and reaps every host process, removes the mailbox's files
 * (not its directories), drops every key. Accepts NULL. */
void lz_escalation_free(struct lz_escalation *e);
/* Tests: an acknowledgement timeout other than LZ_ESC_ACK_TIMEOUT_MS. */
void lz_escalation_set_ack_timeout(struct lz_escalation *e, int ms);

#endif
