/* Host Escalation on the Host Coordinator's side (escalation.h). */
#include "escalation/escalation.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/domain.h"
#include "fs/pathauth.h"
#include "proc/spawn.h"
#include "util/cleanup.h"
#include "util/escape.h"

/* JOB_STARTING: approved, its host process opening the executable (which
 * may wait on a mount) until it execs or fails; the decision is posted
 * then. */
enum job_state { JOB_FREE, JOB_ROUTING, JOB_PROMPT, JOB_STARTING, JOB_RUNNING, JOB_ENDED };

/* A sealed record the inbox did not take (its file system full): kept, in
 * order, and posted again; the client reads a request's records in
 * sequence, so a later one waits behind it. */
struct unposted {
	struct unposted *next;
	char name[LZ_MAILBOX_NAME_MAX];
	size_t len;
	uint8_t rec[];
};

/* How long a killed host process that has exec'd is waited for before it
 * is left to end on its own (kill_and_reap). */
#define KILL_WAIT_MS 100

struct job {
	enum job_state state;
	uint8_t id[LZ_ESC_ID_LEN];
	char hex[2 * LZ_ESC_ID_LEN + 1];
	uint8_t session_id[LZ_ESC_ID_LEN];
	int session; /* the coordinator's slot once routed, else -1 */
	char **argv; /* argc + 1, NULL-terminated; owned */
	size_t argc;
	char *cwd, *why;
	int pidfd;
	pid_t pid;
	int status_fd; /* lz_spawn_start's, while JOB_STARTING */
	uint32_t verdict;
	int pipes[2]; /* stdout, stderr read ends; -1 at end of file */
	bool exited;
	int64_t exited_at; /* when it was reaped (lz_now_ms) */
	int status; /* waitid's si_code and si_status, once exited */
	int code;
	uint64_t sent, acked;
	bool result_posted;
	bool recorded;  /* the hooks' launching accepted it */
	int64_t deadline; /* acknowledgement timeout; 0: none */
	struct unposted *unposted, **unposted_tail;
	bool no_retry; /* an answer to a request there is no room for */
};

#define REFUSALS_KEPT 16

struct lz_escalation {
	struct lz_trust_anchor *ta;
	struct lz_mailbox mb;
	struct job jobs[LZ_ESC_MAX_JOBS];
	uint8_t (*seen)[LZ_ESC_ID_LEN];
	size_t n_seen;
	/* The last answers to requests no job was made for (answer_refusal):
	 * older ones leave the inbox, so a sandbox asking on and on past the
	 * limits does not fill it with the coordinator's files. */
	char answered[REFUSALS_KEPT][2 * LZ_ESC_ID_LEN + 1];
	size_t n_answered;
	struct lz_esc_hooks hooks;
	uint64_t withdrawn; /* bit per session slot: a prompt there was cancelled */
	/* Killed host processes not gone at once: a lookup or any file
	 * operation may hold one past SIGKILL (a FUSE request its daemon has
	 * read waits for the answer), so it is reaped once its pidfd says it
	 * ended, never waited for (kill_and_reap); its record ends then. */
	struct {
		int pidfd;
		bool recorded; /* its record ends once it is reaped */
		char hex[2 * LZ_ESC_ID_LEN + 1];
	} dying[LZ_ESC_MAX_JOBS];
	int ack_timeout_ms; /* LZ_ESC_ACK_TIMEOUT_MS; shorter in tests */
	int keeper_fd;      /* the program each host command runs under (proc/keeper.h) */
	uint8_t *buf;   /* one record, in or out */
	uint8_t *chunk; /* one chunk's output bytes */
	bool more;      /* the outbox was not emptied at the last wake */
	int64_t take_again_at; /* an entry could not be read for now: when to try; 0: none */
	bool short_logged;     /* that shortage was logged (once until a take succeeds) */
	uint64_t refusals;
	uint64_t request_lines;
};

#define TAKE_PER_WAKE 32 /* mailbox entries per wake, so a flood cannot starve the rest */
#define RETRY_MS 250     /* a record the inbox did not take is posted again */
/* After the keeper is reaped, everything below it is gone and what it
 * wrote is in the pipes; a pipe still open after this long is held by a
 * process outside the command (one running as another user, one handed
 * the descriptor), and is closed once what it holds is read. */
#define OUTPUT_GRACE_MS 250
/* What the sandbox sends that is refused is logged up to this many times
 * a generation, then counted: hc.log lies in the runtime directory, which
 * every launch needs room in. */
#define LOGGED_REFUSALS 64

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "escalation: %s\n", line);
}

/* A line the sandbox causes: logged while *count stays within limit (the
 * last one says what follows), then only counted. */
static void budgeted_line(uint64_t *count, uint64_t limit, const char *what, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
static void budgeted_line(uint64_t *count, uint64_t limit, const char *what, const char *fmt, va_list ap)
{
	char line[1024];
	if (++*count > limit)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (*count == limit)
		log_line("%s (further %s are counted, not logged)", line, what);
	else
		log_line("%s", line);
}

static void refused(struct lz_escalation *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refused(struct lz_escalation *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	budgeted_line(&e->refusals, LOGGED_REFUSALS, "refusals of sandbox records", fmt, ap);
	va_end(ap);
}

/* Lines about the sandbox's requests (received, decided, started,
 * ended) likewise: 4,096 requests a generation, each denied, would write
 * megabytes. */
#define LOGGED_REQUEST_LINES 256

static void request_line(struct lz_escalation *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void request_line(struct lz_escalation *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	budgeted_line(&e->request_lines, LOGGED_REQUEST_LINES, "lines about requests", fmt, ap);
	va_end(ap);
}

static void job_init(struct job *j)
{
	memset(j, 0, sizeof(*j));
	j->state = JOB_FREE;
	j->session = -1;
	j->pidfd = j->status_fd = j->pipes[0] = j->pipes[1] = -EBADF;
	j->unposted_tail = &j->unposted;
}

static void strv_free(char **v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- create and free ------------------------------------------------------- */

int lz_escalation_create(int gen_fd, const uint8_t domain_id[LZ_ESC_DOMAIN_ID_LEN], uint64_t generation,
			 int keeper_fd, struct lz_escalation **ret, struct lz_err *err)
{
	struct lz_escalation *e = calloc(1, sizeof(*e));
	int r;
	if (e == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	e->mb = (struct lz_mailbox)LZ_MAILBOX_INIT;
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++) {
		job_init(&e->jobs[i]);
		e->dying[i].pidfd = -EBADF;
	}
	if ((e->keeper_fd = fcntl(keeper_fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		r = lz_err_set(err, errno, "the host commands' keeper: %s", strerror(errno));
		goto fail;
	}
	e->ack_timeout_ms = LZ_ESC_ACK_TIMEOUT_MS;
	e->seen = calloc(LZ_ESC_SEEN_MAX, LZ_ESC_ID_LEN);
	e->buf = malloc(LZ_ESC_RECORD_MAX);
	e->chunk = malloc(LZ_ESC_CHUNK_MAX);
	if (e->seen == NULL || e->buf == NULL || e->chunk == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if ((r = lz_mailbox_create(gen_fd, &e->mb, err)) < 0 ||
	    (r = lz_trust_anchor_create(domain_id, generation, &e->ta, err)) < 0 ||
	    (r = lz_trust_anchor_write_credentials(e->ta, e->mb.credential, e->mb.key, err)) < 0)
		goto fail;
	*ret = e;
	return 0;
fail:
	lz_escalation_free(e);
	return r;
}

const struct lz_trust_anchor *lz_escalation_anchor(const struct lz_escalation *e)
{
	return e->ta;
}

void lz_escalation_set_hooks(struct lz_escalation *e, const struct lz_esc_hooks *hooks)
{
	e->hooks = *hooks;
}

static int argv_digest(const struct job *j, uint8_t out[32])
{
	size_t len = 0, off = 0;
	for (size_t i = 0; i < j->argc; i++)
		len += 4 + strlen(j->argv[i]);
	_cleanup_free_ uint8_t *framed = malloc(len ? len : 1);
	if (framed == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < j->argc; i++) {
		uint32_t n = (uint32_t)strlen(j->argv[i]);
		framed[off++] = (uint8_t)(n >> 24);
		framed[off++] = (uint8_t)(n >> 16);
		framed[off++] = (uint8_t)(n >> 8);
		framed[off++] = (uint8_t)n;
		memcpy(framed + off, j->argv[i], n);
		off += n;
	}
	return lz_sha256(framed, len, out);
}

/* The durable record before the launch (spec 3.8). */
static int record_launch(struct lz_escalation *e, struct job *j, bool automatic, struct lz_err *err)
{
	uint8_t digest[32];
	char session[2 * LZ_ESC_ID_LEN + 1];
	if (e->hooks.launching == NULL)
		return 0;
	if (argv_digest(j, digest) < 0)
		return lz_err_set(err, ENOMEM, "out of memory");
	lz_hex(j->session_id, LZ_ESC_ID_LEN, session);
	int r = e->hooks.launching(e->hooks.ctx, j->hex, session, digest, automatic, err);
	j->recorded = r >= 0;
	return r;
}

void lz_escalation_sandbox_started(struct lz_escalation *e)
{
	lz_trust_anchor_drop_sandbox_key(e->ta, e->mb.key);
}

int lz_escalation_capability_hex(const struct lz_escalation *e, const uint8_t session_id[LZ_ESC_ID_LEN], char *out,
				 size_t cap)
{
	uint8_t sealed[LZ_ESC_CAPABILITY_MAX];
	size_t len;
	int r = lz_trust_anchor_capability(e->ta, session_id, sealed, &len);
	if (r < 0)
		return r;
	if (cap < 2 * len + 1)
		return -ENAMETOOLONG;
	lz_hex(sealed, len, out);
	return 0;
}

/* ---- posting ------------------------------------------------------------------ */

static void arm_deadline(const struct lz_escalation *e, struct job *j);

/* Whether the job's acknowledgement time runs: armed, and no record of it
 * waits for the full inbox (its time begins at the delivery). */
static bool deadline_runs(const struct job *j)
{
	return j->deadline > 0 && j->unposted == NULL;
}

/* Posts what the inbox did not take before, in order, until it refuses
 * again. The client's time to acknowledge runs from the delivery, when
 * there is anything to acknowledge: a chunk or the result, never a
 * decision alone (the client acknowledges none). */
static void flush_unposted(struct lz_escalation *e, struct job *j)
{
	struct lz_err err;
	while (j->unposted != NULL) {
		struct unposted *u = j->unposted;
		if (lz_mailbox_post(&e->mb, u->name, u->rec, u->len, &err) < 0)
			return;
		if ((j->unposted = u->next) == NULL)
			j->unposted_tail = &j->unposted;
		free(u);
		if (j->sent > j->acked || j->result_posted)
			arm_deadline(e, j);
	}
}

static void drop_unposted(struct job *j)
{
	while (j->unposted != NULL) {
		struct unposted *u = j->unposted;
		j->unposted = u->next;
		free(u);
	}
	j->unposted_tail = &j->unposted;
}

static void post(struct lz_escalation *e, struct job *j, const struct lz_esc_record *rec, const char *suffix)
{
	char name[LZ_MAILBOX_NAME_MAX];
	size_t len;
	struct lz_err err;
	snprintf(name, sizeof(name), "%s.%s", j->hex, suffix);
	if (lz_esc_seal(rec, e->ta->coordinator, e->buf, LZ_ESC_RECORD_MAX, &len) < 0) {
		request_line(e, "request %s: sealing its %s failed", j->hex, suffix);
		return;
	}
	bool behind = j->unposted != NULL;
	if (!behind && lz_mailbox_post(&e->mb, name, e->buf, len, &err) == 0)
		return;
	struct unposted *u = j->no_retry ? NULL : malloc(sizeof(*u) + len);
	if (!behind)
		request_line(e, "request %s: %s%s", j->hex, err.msg,
			 u != NULL ? "; kept and posted again when there is room" : "; dropped");
	if (u == NULL)
		return;
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->len = len;
	memcpy(u->rec, e->buf, len);
	u->next = NULL;
	*j->unposted_tail = u;
	j->unposted_tail = &u->next;
}

static void post_decision(struct lz_escalation *e, struct job *j, uint32_t verdict, const char *message)
{
	struct lz_esc_record rec = { .kind = LZ_ESC_DECISION, .scope = e->ta->scope };
	memcpy(rec.decision.request_id, j->id, LZ_ESC_ID_LEN);
	rec.decision.verdict = verdict;
	rec.decision.message = (struct lz_esc_bytes){ (const uint8_t *)message, strlen(message) };
	post(e, j, &rec, "decision");
}

static void arm_deadline(const struct lz_escalation *e, struct job *j)
{
	j->deadline = lz_now_ms() + e->ack_timeout_ms;
}

/* The terminal result; the job then waits for the client's last
 * acknowledgement. */
static void record_end(struct lz_escalation *e, struct job *j);

static void post_result(struct lz_escalation *e, struct job *j, uint32_t outcome, int32_t value, const char *message)
{
	if (j->pidfd < 0)
		record_end(e, j); /* the process is gone (or never ran) */
	struct lz_esc_record rec = { .kind = LZ_ESC_TERMINAL_RESULT, .scope = e->ta->scope };
	memcpy(rec.result.request_id, j->id, LZ_ESC_ID_LEN);
	rec.result.chunks = j->sent;
	rec.result.outcome = outcome;
	rec.result.value = value;
	rec.result.message = (struct lz_esc_bytes){ (const uint8_t *)message, strlen(message) };
	post(e, j, &rec, "result");
	j->result_posted = true;
	j->state = JOB_ENDED;
	arm_deadline(e, j);
}

/* ---- the host process ---------------------------------------------------------- */

static void close_pipes(struct job *j)
{
	lz_close_fdp(&j->status_fd);
	lz_close_fdp(&j->pipes[0]);
	lz_close_fdp(&j->pipes[1]);
}

/* Ends the host process and all it started, and reaps it (spec 3.8:
 * before its files go). The process is the command's keeper
 * (proc/keeper.h), told through its pidfd (spec 3.3), never by number:
 * SIGTERM, on which it kills the command, its group and everything below
 * it, detached daemons too, and then ends (before it runs its program,
 * SIGTERM ends it as SIGKILL would). Once told, nothing of the request's
 * runs any more: the keeper is reaped now if it is gone (one that has
 * exec'd gets KILL_WAIT_MS), else when its pidfd says it ended
 * (e->dying). One held in the kernel (a FUSE request its daemon does not
 * answer, or a descendant so held the keeper waits for) must not hold the
 * coordinator, and with it every other request and terminal. With no
 * place left in e->dying it stays a zombie until the coordinator ends. */
static void kill_and_reap(struct lz_escalation *e, struct job *j)
{
	if (j->pidfd >= 0 && !j->exited) {
		(void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGTERM, NULL, 0);
		(void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGCONT, NULL, 0); /* one stopped from outside */
		struct pollfd ended = { .fd = j->pidfd, .events = POLLIN };
		if (j->status_fd < 0)
			(void)poll(&ended, 1, KILL_WAIT_MS);
		siginfo_t si = { 0 };
		if (waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0) {
			/* not gone: its record ends when it is reaped, or stays
			 * open (not proved gone) when it cannot be watched */
			for (size_t i = 0; i < LZ_ESC_MAX_JOBS && j->pidfd >= 0; i++)
				if (e->dying[i].pidfd < 0) {
					e->dying[i].pidfd = TAKE_FD(j->pidfd);
					e->dying[i].recorded = j->recorded;
					memcpy(e->dying[i].hex, j->hex, sizeof(j->hex));
				}
			if (j->pidfd >= 0)
				request_line(e, "request %s: host process held past its end; not reaped while the "
						"coordinator runs", j->hex);
			j->recorded = false;
		}
		j->exited = true;
	}
	lz_close_fdp(&j->pidfd);
	close_pipes(j);
}

/* The record of a launched request ends with its process. */
static void record_end(struct lz_escalation *e, struct job *j)
{
	if (j->recorded && e->hooks.ended != NULL)
		e->hooks.ended(e->hooks.ctx, j->hex);
	j->recorded = false;
}

/* Removes the job's files from the inbox and frees the slot. */
static void job_end(struct lz_escalation *e, struct job *j)
{
	char name[LZ_MAILBOX_NAME_MAX];
	kill_and_reap(e, j);
	record_end(e, j);
	for (uint64_t s = j->acked + 1; s <= j->sent; s++) {
		snprintf(name, sizeof(name), "%s.%llu", j->hex, (unsigned long long)s);
		lz_mailbox_withdraw(&e->mb, name);
	}
	snprintf(name, sizeof(name), "%s.decision", j->hex);
	lz_mailbox_withdraw(&e->mb, name);
	snprintf(name, sizeof(name), "%s.result", j->hex);
	lz_mailbox_withdraw(&e->mb, name);
	drop_unposted(j);
	strv_free(j->argv, j->argc);
	free(j->cwd);
	free(j->why);
	job_init(j);
}

int lz_escalation_rule_match(const struct lz_esc_rule *rules, size_t n_rules, char *const *argv, size_t argc)
{
	for (size_t i = 0; i < n_rules; i++) {
		const struct lz_esc_rule *r = &rules[i];
		if (argc != r->n_args + 1 || strcmp(argv[0], r->executable) != 0)
			continue;
		size_t k = 0;
		while (k < r->n_args && strcmp(argv[k + 1], r->args[k]) == 0)
			k++;
		if (k == r->n_args)
			return (int)i;
	}
	return -1;
}

/* The executable, opened in the host process before it execs: a lookup
 * there may wait on a mount that does not answer, never the coordinator. */
struct opening {
	const struct lz_path *rule_exe; /* an auto_approve rule's, or NULL */
	const char *path;               /* else argv[0], opened as written */
};

static int open_executable(void *ctx, struct lz_err *err)
{
	const struct opening *o = ctx;
	struct lz_path opened = LZ_PATH_INIT;
	int r;
	if (o->rule_exe != NULL) {
		r = lz_path_revalidate(o->rule_exe, err);
		if (r >= 0)
			r = lz_path_check_executable(o->rule_exe, err);
		return r < 0 ? r : o->rule_exe->fd;
	}
	r = lz_path_open(o->path, &opened, err);
	if (r >= 0)
		r = lz_path_check_executable(&opened, err);
	return r < 0 ? r : opened.fd; /* the process execs or exits */
}

static int start_host_process(const struct lz_escalation *e, struct job *j, const struct lz_path *rule_exe,
			      int workspace_fd, char *const *env, struct lz_err *err)
{
	int out[2] = { -EBADF, -EBADF }, errp[2] = { -EBADF, -EBADF };
	int r;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		r = lz_err_set(err, errno, "pipe: %s", strerror(errno));
		goto done;
	}
	struct lz_spawn spec = { .label = j->argv[0], .exe_fd = -1, .argv = j->argv, .envp = env,
				 .stdin_fd = -1, .stdout_fd = out[1], .stderr_fd = errp[1], .cwd_fd = workspace_fd,
				 .has_cwd = true, .own_group = true, .keeper_fd = &e->keeper_fd };
	struct opening o = { rule_exe, j->argv[0] };
	const int keep = rule_exe != NULL ? rule_exe->fd : -1;
	if ((r = lz_spawn_start(&spec, open_executable, &o, &keep, 1, &j->pidfd, &j->pid, &j->status_fd, err)) < 0)
		goto done;
	j->pipes[0] = TAKE_FD(out[0]);
	j->pipes[1] = TAKE_FD(errp[0]);
	(void)fcntl(j->pipes[0], F_SETFL, O_NONBLOCK);
	(void)fcntl(j->pipes[1], F_SETFL, O_NONBLOCK);
done:
	for (int i = 0; i < 2; i++) {
		lz_close_fdp(&out[i]);
		lz_close_fdp(&errp[i]);
	}
	return r;
}

static const char *approval(uint32_t verdict)
{
	return verdict == LZ_ESC_AUTO_APPROVED ? "approved by an auto_approve rule" : "approved by the developer";
}

/* The host process of j did not start (err says why): refused when its
 * executable could not be opened or is not one to run (opening), failed
 * when the exec did. */
static void not_started(struct lz_escalation *e, struct job *j, bool opening, const struct lz_err *err)
{
	/* err names argv[0], the sandbox's bytes, which need not be UTF-8: the
	 * records' messages are (record.h), and the log's are escaped. */
	char why[LZ_ERR_MSG_MAX + 64], safe_err[LZ_ESC_TEXT_MAX + 1], safe_why[LZ_ESC_TEXT_MAX + 1];
	lz_escape(err->msg, strlen(err->msg), safe_err, sizeof(safe_err));
	if (j->state != JOB_RUNNING)
		post_decision(e, j, opening ? LZ_ESC_DENIED : j->verdict, opening ? safe_err : approval(j->verdict));
	snprintf(why, sizeof(why), "the host command did not start: %s", err->msg);
	lz_escape(why, strlen(why), safe_why, sizeof(safe_why));
	request_line(e, "request %s: %s", j->hex, safe_why);
	if (e->hooks.not_started != NULL && j->session >= 0)
		e->hooks.not_started(e->hooks.ctx, j->session, err->msg);
	post_result(e, j, opening ? LZ_ESC_REFUSED : LZ_ESC_FAILED, 0, safe_why);
}

/* The host process of a starting job exec'd, or failed before. */
static void on_start_status(struct lz_escalation *e, struct job *j)
{
	struct lz_err err = { 0, "" };
	bool opening = false;
	int r = lz_spawn_status(j->status_fd, j->pidfd, j->argv[0], &opening, &err);
	if (r > 0)
		return;
	lz_close_fdp(&j->status_fd);
	if (r == 0) {
		post_decision(e, j, j->verdict, approval(j->verdict));
		j->state = JOB_RUNNING;
		request_line(e, "request %s: host process %d started", j->hex, (int)j->pid);
		return;
	}
	kill_and_reap(e, j); /* it exited; its record ends with the result */
	not_started(e, j, opening, &err);
}

int lz_escalation_approve(struct lz_escalation *e, size_t job, uint32_t verdict, const struct lz_path *rule_exe,
			  int workspace_fd, char *const *env, int session, struct lz_err *err)
{
	/* Only the request that waits for this decision: an auto_approve
	 * one being routed, or the one whose prompt the developer answered. */
	if (job >= LZ_ESC_MAX_JOBS || e->jobs[job].state != (rule_exe != NULL ? JOB_ROUTING : JOB_PROMPT) ||
	    e->jobs[job].argv == NULL)
		return lz_err_set(err, ESTALE, "no request waits for this decision");
	struct job *j = &e->jobs[job];
	j->session = session;
	j->verdict = verdict;
	int r = record_launch(e, j, verdict == LZ_ESC_AUTO_APPROVED, err);
	if (r < 0) {
		not_started(e, j, true, err);
		return r;
	}
	if ((r = start_host_process(e, j, rule_exe, workspace_fd, env, err)) < 0) {
		not_started(e, j, false, err);
		return r;
	}
	j->state = JOB_STARTING;
	return 0;
}

void lz_escalation_deny(struct lz_escalation *e, size_t job, const char *message)
{
	if (job >= LZ_ESC_MAX_JOBS || (e->jobs[job].state != JOB_ROUTING && e->jobs[job].state != JOB_PROMPT))
		return; /* decided already (cancelled, or ended) */
	struct job *j = &e->jobs[job];
	char safe[LZ_ESC_TEXT_MAX];
	/* The message is the coordinator's; escaping keeps it UTF-8. */
	lz_escape(message, strlen(message), safe, sizeof(safe));
	request_line(e, "request %s: denied (%s)", j->hex, safe);
	post_decision(e, j, LZ_ESC_DENIED, safe);
	post_result(e, j, LZ_ESC_REFUSED, 0, safe);
}

const char *lz_escalation_executable(const struct lz_escalation *e, size_t job)
{
	if (job >= LZ_ESC_MAX_JOBS || (e->jobs[job].state != JOB_ROUTING && e->jobs[job].state != JOB_PROMPT) ||
	    e->jobs[job].argv == NULL)
		return NULL;
	return e->jobs[job].argv[0];
}

void lz_escalation_prompting(struct lz_escalation *e, size_t job, int session)
{
	e->jobs[job].state = JOB_PROMPT;
	e->jobs[job].session = session;
}

size_t lz_escalation_session_gone(struct lz_escalation *e, int session)
{
	size_t n = 0;
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++) {
		struct job *j = &e->jobs[i];
		if (j->state == JOB_FREE || j->session != session)
			continue;
		request_line(e, "request %s: its session ended; cancelled", j->hex);
		job_end(e, j);
		n++;
	}
	return n;
}

int lz_escalation_next_withdrawn(struct lz_escalation *e)
{
	if (e->withdrawn == 0)
		return -1;
	int session = __builtin_ctzll(e->withdrawn);
	e->withdrawn &= e->withdrawn - 1;
	return session;
}

bool lz_escalation_prompt_is(const struct lz_escalation *e, size_t job, int session)
{
	return job < LZ_ESC_MAX_JOBS && e->jobs[job].state == JOB_PROMPT && e->jobs[job].session == session;
}

bool lz_escalation_next_route(struct lz_escalation *e, struct lz_esc_route *ret)
{
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++) {
		struct job *j = &e->jobs[i];
		if (j->state != JOB_ROUTING || j->session != -1)
			continue;
		j->session = -2; /* handed out once */
		*ret = (struct lz_esc_route){ .job = i, .argv = j->argv, .argc = j->argc, .cwd = j->cwd, .why = j->why };
		memcpy(ret->session_id, j->session_id, LZ_ESC_ID_LEN);
		return true;
	}
	return false;
}

void lz_escalation_route_later(struct lz_escalation *e, size_t job)
{
	if (job < LZ_ESC_MAX_JOBS && e->jobs[job].state == JOB_ROUTING && e->jobs[job].session == -2)
		e->jobs[job].session = -1;
}

/* ---- records from the sandbox ---------------------------------------------------- */

static struct job *find_job(struct lz_escalation *e, const uint8_t id[LZ_ESC_ID_LEN])
{
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++)
		if (e->jobs[i].state != JOB_FREE && memcmp(e->jobs[i].id, id, LZ_ESC_ID_LEN) == 0)
			return &e->jobs[i];
	return NULL;
}

static bool seen_before(struct lz_escalation *e, const uint8_t id[LZ_ESC_ID_LEN])
{
	for (size_t i = 0; i < e->n_seen; i++)
		if (memcmp(e->seen[i], id, LZ_ESC_ID_LEN) == 0)
			return true;
	return false;
}

static char *dup_bytes(struct lz_esc_bytes b)
{
	char *s = malloc(b.n + 1);
	if (s != NULL) {
		memcpy(s, b.p, b.n);
		s[b.n] = '\0';
	}
	return s;
}

/* Answers a request no job is made for (denied, then refused), so its
 * client ends instead of waiting: nothing is kept of it, and an answer the
 * full inbox cannot take is not posted again. */
static void answer_refusal(struct lz_escalation *e, const uint8_t id[LZ_ESC_ID_LEN], const char *hex,
			   const char *why)
{
	struct job over;
	job_init(&over);
	over.no_retry = true;
	memcpy(over.id, id, LZ_ESC_ID_LEN);
	memcpy(over.hex, hex, sizeof(over.hex));
	char *slot = e->answered[e->n_answered++ % REFUSALS_KEPT];
	if (slot[0] != '\0') { /* its client has had REFUSALS_KEPT answers' time to read it */
		char name[LZ_MAILBOX_NAME_MAX];
		snprintf(name, sizeof(name), "%s.decision", slot);
		lz_mailbox_withdraw(&e->mb, name);
		snprintf(name, sizeof(name), "%s.result", slot);
		lz_mailbox_withdraw(&e->mb, name);
	}
	memcpy(slot, hex, sizeof(over.hex));
	post_decision(e, &over, LZ_ESC_DENIED, why);
	post_result(e, &over, LZ_ESC_REFUSED, 0, why);
}

static void on_request(struct lz_escalation *e, const struct lz_esc_request *q)
{
	char hex[2 * LZ_ESC_ID_LEN + 1];
	uint8_t session_id[LZ_ESC_ID_LEN];
	lz_hex(q->request_id, LZ_ESC_ID_LEN, hex);
	if (seen_before(e, q->request_id)) {
		refused(e, "request %s refused: replayed", hex);
		return; /* the original's files are its answer */
	}
	/* The justification is shown as a C string: a NUL would hide the
	 * rest of it from the developer. */
	if (memchr(q->why.p, '\0', q->why.n) != NULL) {
		refused(e, "request %s refused: a NUL in its justification", hex);
		return;
	}
	/* A request of no session of this generation takes no place below. */
	int r = lz_trust_anchor_check_capability(e->ta, q->capability.p, q->capability.n, session_id);
	if (r < 0) {
		refused(e, "request %s refused: its session capability %s", hex,
			 r == -ESTALE ? "is of another Domain or generation" : "is not the coordinator's");
		return;
	}
	if (e->n_seen == LZ_ESC_SEEN_MAX) {
		answer_refusal(e, q->request_id, hex, "too many host commands in this generation; start a new one");
		refused(e, "request %s refused: %d requests in this generation already", hex, LZ_ESC_SEEN_MAX);
		return;
	}
	memcpy(e->seen[e->n_seen++], q->request_id, LZ_ESC_ID_LEN);
	struct job *j = NULL;
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS && j == NULL; i++)
		if (e->jobs[i].state == JOB_FREE)
			j = &e->jobs[i];
	if (j == NULL) {
		answer_refusal(e, q->request_id, hex, "too many host commands at once; try again");
		refused(e, "request %s refused: %d requests at once already", hex, LZ_ESC_MAX_JOBS);
		return;
	}
	memcpy(j->id, q->request_id, LZ_ESC_ID_LEN);
	memcpy(j->hex, hex, sizeof(hex));
	memcpy(j->session_id, session_id, LZ_ESC_ID_LEN);
	j->argv = calloc(q->argc + 1, sizeof(char *));
	bool ok = j->argv != NULL;
	for (size_t i = 0; ok && i < q->argc; i++)
		ok = (j->argv[i] = dup_bytes(q->argv[i])) != NULL;
	j->argc = q->argc;
	ok = ok && (j->cwd = dup_bytes(q->cwd)) != NULL && (j->why = dup_bytes(q->why)) != NULL;
	j->state = JOB_ROUTING;
	if (!ok) {
		j->state = JOB_ENDED;
		log_line("request %s refused: out of memory", hex);
		post_result(e, j, LZ_ESC_FAILED, 0, "the coordinator ran out of memory");
		return;
	}
	request_line(e, "request %s received", hex);
}

static void on_cancellation(struct lz_escalation *e, struct job *j)
{
	if (j->state == JOB_STARTING)
		on_start_status(e, j); /* exec'd meanwhile: it ran, and says so */
	if (j->state == JOB_ENDED)
		return;
	request_line(e, "request %s: cancelled by the sandbox", j->hex);
	/* Its prompt goes down at the coordinator's next turn; kept apart
	 * from the job, which may end (and its slot serve another request)
	 * before then. A request cancelled before its decision is never
	 * approved. */
	if (j->state == JOB_PROMPT && j->session >= 0 && j->session < 64)
		e->withdrawn |= UINT64_C(1) << j->session;
	/* Approved and starting (its exec not yet known): the approval
	 * stands, as the host's record says, and the result says cancelled;
	 * only a request not yet decided is denied. */
	if (j->state == JOB_STARTING)
		post_decision(e, j, j->verdict, approval(j->verdict));
	else if (j->state != JOB_RUNNING)
		post_decision(e, j, LZ_ESC_DENIED, "cancelled");
	if (j->state != JOB_RUNNING)
		j->state = JOB_ENDED;
	kill_and_reap(e, j);
	post_result(e, j, LZ_ESC_CANCELLED, 0, "cancelled");
}

/* Spec 3.8: the highest contiguous sequence the client took. Chunks are
 * 1..sent; the terminal result counts as sent + 1, so only an
 * acknowledgement of it (sent after the client read it) ends the job. */
static void on_acknowledgement(struct lz_escalation *e, struct job *j, uint64_t seq)
{
	char name[LZ_MAILBOX_NAME_MAX];
	if (j->result_posted && seq == j->sent + 1) {
		job_end(e, j); /* the client has everything */
		return;
	}
	if (seq > j->sent || seq < j->acked)
		return;
	for (uint64_t s = j->acked + 1; s <= seq; s++) {
		snprintf(name, sizeof(name), "%s.%llu", j->hex, (unsigned long long)s);
		lz_mailbox_withdraw(&e->mb, name);
	}
	j->acked = seq;
	if (!j->result_posted)
		j->deadline = j->sent > j->acked ? lz_now_ms() + e->ack_timeout_ms : 0;
}

static void receive(struct lz_escalation *e)
{
	struct lz_err err;
	size_t len;
	e->more = true; /* unless the outbox is emptied below */
	for (int k = 0; k < TAKE_PER_WAKE; k++) {
		int r = lz_mailbox_take(&e->mb, e->buf, &len, &err);
		if (r == 0) {
			e->more = lz_mailbox_pending(&e->mb);
			return;
		}
		if (r == -EAGAIN) { /* this process's shortage, not the entry's */
			if (!e->short_logged)
				request_line(e, "%s; read again every %d ms", err.msg, RETRY_MS);
			e->short_logged = true;
			e->more = false;
			e->take_again_at = lz_now_ms() + RETRY_MS;
			return;
		}
		e->short_logged = false;
		if (r < 0) {
			refused(e, "%s; refused", err.msg);
			continue;
		}
		struct lz_esc_record rec;
		r = lz_esc_open(e->buf, len,
				LZ_ESC_KIND_BIT(LZ_ESC_REQUEST) | LZ_ESC_KIND_BIT(LZ_ESC_CANCELLATION) |
					LZ_ESC_KIND_BIT(LZ_ESC_ACKNOWLEDGEMENT),
				e->ta->sandbox_public, &rec, NULL);
		if (r < 0) {
			refused(e, "a record of %zu bytes refused: %s", len,
				 r == -EPERM	? "not signed by this generation's sandbox key"
				 : r == -EPROTO ? "a kind the sandbox does not send"
						: "malformed");
			continue;
		}
		if (memcmp(rec.scope.domain_id, e->ta->scope.domain_id, LZ_ESC_DOMAIN_ID_LEN) != 0 ||
		    rec.scope.generation != e->ta->scope.generation) {
			refused(e, "a %s refused: of another Domain or generation", lz_esc_kind_name(rec.kind));
			continue;
		}
		if (rec.kind == LZ_ESC_REQUEST) {
			on_request(e, &rec.request);
			continue;
		}
		const uint8_t *id = rec.kind == LZ_ESC_CANCELLATION ? rec.cancellation.request_id
								    : rec.acknowledgement.request_id;
		struct job *j = find_job(e, id);
		if (j == NULL)
			continue; /* a request already over */
		if (rec.kind == LZ_ESC_CANCELLATION)
			on_cancellation(e, j);
		else
			on_acknowledgement(e, j, rec.acknowledgement.sequence);
	}
}

/* ---- polling ------------------------------------------------------------------------ */

size_t lz_escalation_pollfds(const struct lz_escalation *e, struct pollfd *pf, int *timeout_ms)
{
	size_t n = 0;
	pf[n++] = (struct pollfd){ .fd = e->mb.watch, .events = POLLIN };
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++)
		if (e->dying[i].pidfd >= 0)
			pf[n++] = (struct pollfd){ .fd = e->dying[i].pidfd, .events = POLLIN };
	if (e->more) /* the rest of the outbox, at once */
		*timeout_ms = 0;
	int64_t now = lz_now_ms();
	if (e->take_again_at > 0) {
		int wait = e->take_again_at > now ? (int)(e->take_again_at - now) : 0;
		if (*timeout_ms < 0 || wait < *timeout_ms)
			*timeout_ms = wait;
	}
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++) {
		const struct job *j = &e->jobs[i];
		if (j->unposted != NULL && (*timeout_ms < 0 || *timeout_ms > RETRY_MS))
			*timeout_ms = RETRY_MS;
		if (j->state == JOB_STARTING)
			pf[n++] = (struct pollfd){ .fd = j->status_fd, .events = POLLIN };
		if (j->state == JOB_RUNNING) {
			if (j->pidfd >= 0 && !j->exited)
				pf[n++] = (struct pollfd){ .fd = j->pidfd, .events = POLLIN };
			/* Spec 3.8: the pipes pause at the window, and while the
			 * inbox takes nothing. */
			bool room = j->sent - j->acked < LZ_ESC_WINDOW && j->unposted == NULL;
			for (int s = 0; s < 2; s++)
				if (j->pipes[s] >= 0 && room)
					pf[n++] = (struct pollfd){ .fd = j->pipes[s], .events = POLLIN };
			/* A pipe a process outside the command holds open says
			 * nothing when the grace ends: wake then (later, what
			 * is read or acknowledged wakes the check). */
			int64_t end = j->exited_at + OUTPUT_GRACE_MS;
			if (j->exited && (j->pipes[0] >= 0 || j->pipes[1] >= 0) && end > now &&
			    (*timeout_ms < 0 || end - now < *timeout_ms))
				*timeout_ms = (int)(end - now);
		}
		/* The retry of a record waiting for the inbox has its own pace. */
		if (deadline_runs(j)) {
			int left = j->deadline > now ? (int)(j->deadline - now) : 0;
			if (*timeout_ms < 0 || left < *timeout_ms)
				*timeout_ms = left;
		}
	}
	return n;
}

/* One read of stream s into one chunk, while the window has room: both
 * streams can be ready in one wake (spec 3.8: at most LZ_ESC_WINDOW
 * unacknowledged). */
static void pump(struct lz_escalation *e, struct job *j, int s)
{
	if (j->sent - j->acked >= LZ_ESC_WINDOW || j->unposted != NULL)
		return;
	uint8_t *data = e->chunk;
	ssize_t n = read(j->pipes[s], data, LZ_ESC_CHUNK_MAX);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		lz_close_fdp(&j->pipes[s]);
		return;
	}
	struct lz_esc_record rec = { .kind = LZ_ESC_CHUNK, .scope = e->ta->scope };
	memcpy(rec.chunk.request_id, j->id, LZ_ESC_ID_LEN);
	rec.chunk.sequence = ++j->sent;
	rec.chunk.stream = s == 0 ? LZ_ESC_STDOUT : LZ_ESC_STDERR;
	rec.chunk.data = (struct lz_esc_bytes){ data, (size_t)n };
	char suffix[24];
	snprintf(suffix, sizeof(suffix), "%llu", (unsigned long long)j->sent);
	post(e, j, &rec, suffix);
	if (j->deadline == 0)
		arm_deadline(e, j);
}

static void reap(struct job *j)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
		return;
	j->exited = true;
	j->exited_at = lz_now_ms();
	j->code = si.si_code;
	j->status = si.si_status;
}

/* Whether the pipes of a reaped command may be closed: past the grace, and
 * nothing unread in them (ioctl FIONREAD). */
static bool output_abandoned(const struct job *j, int64_t now)
{
	if (now < j->exited_at + OUTPUT_GRACE_MS)
		return false;
	for (int s = 0; s < 2; s++) {
		int unread = 0;
		if (j->pipes[s] >= 0 && (ioctl(j->pipes[s], FIONREAD, &unread) < 0 || unread > 0))
			return false;
	}
	return true;
}

static void finish_if_done(struct lz_escalation *e, struct job *j, int64_t now)
{
	if (j->state != JOB_RUNNING || !j->exited)
		return;
	if (j->pipes[0] >= 0 || j->pipes[1] >= 0) {
		if (!output_abandoned(j, now))
			return;
		request_line(e, "request %s: its output was held open by a process outside it; closed", j->hex);
		close_pipes(j);
	}
	lz_close_fdp(&j->pidfd);
	if (j->code == CLD_EXITED) {
		request_line(e, "request %s: host process exited %d", j->hex, j->status);
		post_result(e, j, LZ_ESC_EXITED, j->status, "");
	} else {
		request_line(e, "request %s: host process killed by signal %d", j->hex, j->status);
		post_result(e, j, LZ_ESC_SIGNALED, j->status, "");
	}
}

void lz_escalation_handle(struct lz_escalation *e, const struct pollfd *pf, size_t n)
{
	bool again = e->take_again_at > 0 && lz_now_ms() >= e->take_again_at;
	if (n > 0 && (pf[0].revents || e->more || again)) {
		if (pf[0].revents)
			lz_mailbox_drain_watch(&e->mb);
		e->take_again_at = 0;
		receive(e);
	}
	for (size_t k = 0; k < LZ_ESC_MAX_JOBS; k++)
		flush_unposted(e, &e->jobs[k]);
	for (size_t i = 1; i < n; i++) {
		if (!pf[i].revents)
			continue;
		for (size_t k = 0; k < LZ_ESC_MAX_JOBS; k++)
			if (pf[i].fd == e->dying[k].pidfd) {
				siginfo_t si = { 0 };
				if (waitid(P_PIDFD, (id_t)e->dying[k].pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
					continue;
				lz_close_fdp(&e->dying[k].pidfd);
				if (e->dying[k].recorded && e->hooks.ended != NULL)
					e->hooks.ended(e->hooks.ctx, e->dying[k].hex);
				e->dying[k].recorded = false;
			}
		for (size_t k = 0; k < LZ_ESC_MAX_JOBS; k++) {
			struct job *j = &e->jobs[k];
			if (j->state == JOB_STARTING && pf[i].fd == j->status_fd)
				on_start_status(e, j);
			if (j->state != JOB_RUNNING)
				continue;
			if (pf[i].fd == j->pidfd)
				reap(j);
			for (int s = 0; s < 2; s++)
				if (pf[i].fd == j->pipes[s])
					pump(e, j, s);
		}
	}
	int64_t now = lz_now_ms();
	for (size_t k = 0; k < LZ_ESC_MAX_JOBS; k++) {
		struct job *j = &e->jobs[k];
		finish_if_done(e, j, now);
		if (!deadline_runs(j) || j->deadline > now)
			continue;
		request_line(e, "request %s: no acknowledgement for %d s; ended", j->hex, e->ack_timeout_ms / 1000);
		if (j->state == JOB_RUNNING) {
			/* The client may only be stopped: it gets a result that
			 * says so, after what it has not taken yet. */
			kill_and_reap(e, j);
			post_result(e, j, LZ_ESC_TIMED_OUT, 0, "no acknowledgement from the client");
		} else {
			job_end(e, j);
		}
	}
}

void lz_escalation_forget_keys(struct lz_escalation *e)
{
	if (e == NULL)
		return;
	lz_trust_anchor_free(e->ta);
	e->ta = NULL;
}

void lz_escalation_set_ack_timeout(struct lz_escalation *e, int ms)
{
	e->ack_timeout_ms = ms;
}

void lz_escalation_free(struct lz_escalation *e)
{
	if (e == NULL)
		return;
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++)
		if (e->jobs[i].state != JOB_FREE)
			job_end(e, &e->jobs[i]);
	for (size_t i = 0; i < LZ_ESC_MAX_JOBS; i++)
		lz_close_fdp(&e->dying[i].pidfd); /* killed: their zombies go with the coordinator, their
						   * records stay open (not proved gone) */
	if (e->refusals > LOGGED_REFUSALS)
		log_line("%llu records from the sandbox refused in all", (unsigned long long)e->refusals);
	if (e->request_lines > LOGGED_REQUEST_LINES)
		log_line("%llu lines about requests in all", (unsigned long long)e->request_lines);
	lz_mailbox_close(&e->mb);
	lz_close_fdp(&e->keeper_fd);
	lz_trust_anchor_free(e->ta);
	free(e->seen);
	free(e->buf);
	free(e->chunk);
	free(e);
}
