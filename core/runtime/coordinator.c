/* The Host Coordinator's mechanisms; see coordinator.h. */
#include "runtime/coordinator.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "config/domain.h"
#include "escalation/escalate_blob.h"
#include "escalation/escalation.h"
#include "escalation/sandbox.h"
#include "fs/file.h"
#include "image/prepare.h"
#include "init/sandbox_init_blob.h"
#include "router/router_program.h"
#include "net/canary.h"
#include "net/netpolicy.h"
#include "proc/broker.h"
#include "proc/caps.h"
#include "proc/keeper.h"
#include "proc/nsident.h"
#include "proc/stopreq.h"
#include "proc/userns.h"
#include "router/gitlib.h"
#include "runtime/anchorreset.h"
#include "runtime/bundle.h"
#include "runtime/domainverify.h"
#include "runtime/leaserecovery.h"
#include "runtime/ocispec.h"
#include "runtime/rundir.h"
#include "session/admission.h"
#include "session/guestcmd.h"
#include "session/pin.h"
#include "session/session.h"
#include "session/tlschan.h"
#include "store/catalog.h"
#include "store/domainstate.h"
#include "store/identity.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/sys.h"
#include "util/testfault.h"

#define GUEST_LEADER_TIMEOUT_MS 10000

enum rs_state { RS_NONE, RS_RUNNING, RS_GONE };

struct lz_hc {
	const lz_config *cfg;
	const struct lz_config_profile *profile;
	const struct lz_path *runtime_domain;
	char domain_hex[65], fp_hex[65];
	uint8_t domain_id[32], fingerprint[32];
	int lock_fd;
	lz_dstore *store;
	uint64_t gen; /* 0 until lz_hc_begin */
	bool recovered; /* lz_hc_recovered passed: a generation may begin */
	struct lz_gendir gendir;
	/* runsc as located and checked at open (hostprobe.h), run from this
	 * descriptor by the RS and by every session's exec client. */
	struct lz_path runsc;
	char container_id[80];

	/* Evidence held for the store transitions. */
	char artifact[LZ_ARTIFACT_ID_HEX + 1]; /* "" until looked up */
	int rootfs_fd;
	bool lease_held;
	bool have_mounts, have_slirp, have_runsc, have_ready, attested;
	struct lz_rs_msg mounts, ready;
	struct lz_pidref slirp_id, runsc_id;
	/* The enforcement network namespace, read from the RS when it reports
	 * slirp4netns staged and recorded with slirp4netns's staging. */
	struct lz_nsident enforcement_net;
	bool have_enforcement_net;
	char readiness[2 * LZ_NETREADY_FP_LEN + 1];
	uint8_t policy_digest[32];
	uint8_t canary_key[LZ_CANARY_KEY_LEN];
	uint8_t init_challenge[LZ_CANARY_CHALLENGE_LEN];

	/* The Runtime Supervisor. */
	enum rs_state rs_state;
	struct lz_broker_child rs;
	int control_fd;
	char rs_failure[LZ_RS_TEXT_MAX]; /* why the RS failed, as it said; "" */

	/* Sessions (spec 3.4) and who may open them (spec 3.3). */
	struct lz_admission *admission;
	int listen_fd;
	/* accept4 failed for want of descriptors or memory: the listener is
	 * left alone until then (its connection stays queued, so polling it
	 * would spin); 0: not paused. */
	int64_t accept_paused_until;
	bool accept_pause_logged;
	bool ever_served;
	int64_t recovery_by; /* the bootstrap recovery's one wait (recovery_deadline) */
	struct lz_session sessions[LZ_HC_MAX_SESSIONS];
	/* inotify on the generation's sessions directory, where runsc exec
	 * writes a starting session's guest leader: the loop serves the
	 * others meanwhile (made at the first terminal session). */
	int leader_watch;
	/* Host Escalation (spec 3.8): the job each session's prompt is for. */
	struct lz_escalation *esc;
	int prompt_job[LZ_HC_MAX_SESSIONS]; /* -1: no prompt */
	struct prompt_pace {
		unsigned refusals;   /* prompts refused or withdrawn in a row */
		int64_t quiet_until; /* no prompt in this session before */
	} prompt_pace[LZ_HC_MAX_SESSIONS];
	/* A session without a terminal whose process document (its
	 * environment values) waits for runsc exec's PID file to go. */
	bool doc_pending[LZ_HC_MAX_SESSIONS];
	char **host_env;                    /* the host processes' environment */
	uintptr_t env_start, env_end;       /* the environment block (lz_env_block) */
};

uint64_t lz_hc_generation(const lz_hc *hc)
{
	return hc->gen;
}

const char *lz_hc_artifact(const lz_hc *hc)
{
	return hc->artifact[0] ? hc->artifact : NULL;
}

const char *lz_hc_readiness(const lz_hc *hc)
{
	return hc->attested ? hc->readiness : NULL;
}

const char *lz_hc_rs_steps(const lz_hc *hc)
{
	return hc->have_ready ? hc->ready.text : NULL;
}

const char *lz_hc_rs_failure(const lz_hc *hc)
{
	return hc->rs_failure[0] ? hc->rs_failure : NULL;
}

/* Keeps the first reason the RS gave for failing. */
static void note_rs_failure(lz_hc *hc, const struct lz_rs_msg *m)
{
	if (m->type == LZ_RS_FAILED && !hc->rs_failure[0] && lz_rs_msg_for(m, hc->gen, hc->domain_hex))
		snprintf(hc->rs_failure, sizeof(hc->rs_failure), "%s", m->text[0] ? m->text : "no reason given");
}

/* Test builds (lazaret-faults): LAZARET_TEST_FAULT=hc-kill-<stage> kills
 * the coordinator right after that step succeeded, hc-stop-<stage> stops
 * it there (SIGSTOP) for a test to kill another process and continue it:
 * the recovery matrix (tests/e2e/test_recovery.sh). Constant false
 * otherwise. */
static int fault_after(const char *stage, int r)
{
	char kill_name[64], stop_name[64];
	snprintf(kill_name, sizeof(kill_name), "hc-kill-%s", stage);
	snprintf(stop_name, sizeof(stop_name), "hc-stop-%s", stage);
	if (r >= 0 && lz_test_fault(kill_name))
		raise(SIGKILL);
	static bool stopped; /* once: the test continues it past the later ones */
	if (r >= 0 && !stopped && lz_test_fault(stop_name)) {
		stopped = true;
		raise(SIGSTOP);
	}
	return r;
}

static int need_generation(const lz_hc *hc, struct lz_err *err)
{
	return hc->gen ? 0 : lz_err_set(err, EPROTO, "no generation has begun");
}

/* Spec 3.3: each store transition is durable before the action that
 * follows it, so no action runs while a batch's transitions are pending. */
static int no_batch(const lz_hc *hc, const char *action, struct lz_err *err)
{
	return lz_dstore_in_batch(hc->store)
		       ? lz_err_set(err, EBUSY, "%s inside a Domain Store batch: its transitions are not "
						"durable yet", action)
		       : 0;
}

int lz_hc_batch_begin(lz_hc *hc, struct lz_err *err)
{
	return lz_dstore_batch_begin(hc->store, err);
}

int lz_hc_batch_end(lz_hc *hc, struct lz_err *err)
{
	return lz_dstore_batch_end(hc->store, err);
}

/* ---- ownership -------------------------------------------------------------- */

/* A line for hc.log, escaped: an error may name what the sandbox made. */
static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
	char line[LZ_ERR_MSG_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	lz_escape_report_stderr(NULL, line);
}

/* ---- bootstrap recovery (spec 3.3, 3.6; ordered by runtime/recovery.lua) ---- */

/* Bootstrap recovery and reset: before a generation, and never inside a
 * batch, whose transitions are not durable while these commit the
 * catalog's leases and remove trees on the strength of them (spec 3.6's
 * order is Domain record, then catalog, then clean). */
static int before_begin(const lz_hc *hc, const char *what, struct lz_err *err)
{
	if (hc->gen)
		return lz_err_set(err, EPROTO, "%s: only before a generation begins", what);
	return no_batch(hc, what, err);
}

int lz_hc_lost_generation(lz_hc *hc, uint64_t *ret, struct lz_err *err)
{
	_cleanup_free_ struct lz_dstore_generation *v = NULL;
	size_t n = 0;
	int r = before_begin(hc, "lost generation", err);
	if (r < 0 || (r = lz_dstore_generation_list(hc->store, 1, &v, &n, err)) < 0)
		return r;
	*ret = n > 0 && v[0].state != LZ_DSTORE_GEN_STOPPED && v[0].state != LZ_DSTORE_GEN_FAILED ? v[0].generation
												   : 0;
	return 0;
}

/* A generation left starting, published or stopping belongs to a lost
 * coordinator (we hold the Domain flock, and the one it recorded is gone):
 * it is recorded failed, with its evidence kept for the steps after. */
int lz_hc_record_lost(lz_hc *hc, uint64_t generation, struct lz_err *err)
{
	uint64_t lost = 0;
	int r = lz_hc_lost_generation(hc, &lost, err);
	if (r < 0)
		return r;
	if (lost == 0 || lost != generation)
		return lz_err_set(err, EINVAL, "generation %llu is not the lost one", (unsigned long long)generation);
	r = lz_leaserecovery_record_lost(hc->store, generation, err);
	return r < 0 && r != -EBUSY ? lz_err_prefix(err, r, "recording lost generation %llu as failed: ",
						    (unsigned long long)generation)
				    : r;
}

/* The bootstrap recovery's steps (lua/lazaret/runtime/recovery.lua, the
 * lease release first) share one wait for a lost generation's exiting
 * processes, not one per lease, tree and step. */
static int64_t recovery_deadline(lz_hc *hc, bool first)
{
	if (first || hc->recovery_by == 0)
		hc->recovery_by = lz_now_ms() + LZ_RECOVERY_EXIT_WAIT_MS;
	return hc->recovery_by;
}

int lz_hc_release_lost_leases(lz_hc *hc, lz_hc_report *report, void *ctx, struct lz_err *err)
{
	int r = before_begin(hc, "lease recovery", err);
	if (r < 0)
		return r;
	return lz_leaserecovery_run(hc->store, lz_config_storage_root(hc->cfg)->fd, hc->domain_hex,
				    recovery_deadline(hc, true), report, ctx, NULL, err);
}

/* Spec 3.6 "Domain clean": a lost generation's runtime tree (its
 * transient layer, its process documents) goes only once every process it
 * recorded is proved gone; the Runtime Supervisor's death took its mount
 * namespace, and with it every mount. */
int lz_hc_clean_runtime(lz_hc *hc, lz_hc_report *report, void *ctx, struct lz_err *err)
{
	uint64_t gens[64];
	char why[LZ_ERR_MSG_MAX + 256], line[LZ_ERR_MSG_MAX + 512];
	int r = before_begin(hc, "runtime cleanup", err);
	if (r < 0)
		return r;
	int n = lz_rundir_generations(hc->runtime_domain, gens, LZ_ARRAY_SIZE(gens), err);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		lz_leaserecovery_judge(hc->store, gens[i], recovery_deadline(hc, false), why, sizeof(why));
		if (why[0]) {
			snprintf(line, sizeof(line), "kept the runtime tree of generation %llu: %s",
				 (unsigned long long)gens[i], why);
			report(ctx, line);
			continue;
		}
		struct lz_err rm = { 0, "" };
		if (lz_rundir_remove_generation(hc->runtime_domain, gens[i], &rm) < 0)
			snprintf(line, sizeof(line),
				 "could not remove the runtime tree of lost generation %llu (every process, mount and "
				 "namespace it recorded is gone): %s",
				 (unsigned long long)gens[i], rm.msg);
		else
			snprintf(line, sizeof(line),
				 "removed the runtime tree of lost generation %llu: every process, mount and namespace "
				 "it recorded is gone",
				 (unsigned long long)gens[i]);
		report(ctx, line);
	}
	lz_rundir_remove_socket(hc->runtime_domain);
	return 0;
}

/* Spec 3.6 "Domain clean" of the store: a failed generation proved gone
 * has its participants and sessions moved through release intent to
 * clean, in teardown order, so its records say what recovery proved. A
 * transition the store refuses keeps that record (reported). */
static void retire_role(lz_hc *hc, uint64_t gen, enum lz_dstore_role role, lz_hc_report *report, void *ctx)
{
	struct lz_dstore_participant p;
	struct lz_err e = { 0, "" };
	char line[LZ_ERR_MSG_MAX + 128];
	int r = lz_dstore_participant_get(hc->store, gen, role, &p, &e);
	if (r == -ENOENT)
		return;
	enum lz_dstore_phase phase = r < 0 ? 0 : p.phase;
	if (r >= 0)
		lz_dstore_participant_clear(&p);
	if (r >= 0 && phase == LZ_DSTORE_PHASE_CLEAN)
		return;
	/* Spec 3.6: the prepared lower not while a catalog lease of the
	 * generation exists. */
	if (r >= 0 && role == LZ_DSTORE_ROLE_PREPARED_LOWER)
		r = lz_leaserecovery_retire_lower(hc->store, lz_config_storage_root(hc->cfg)->fd, hc->domain_hex,
						  gen, &e);
	else {
		if (r >= 0 && (phase == LZ_DSTORE_PHASE_ACQUIRING || phase == LZ_DSTORE_PHASE_ACTIVE))
			r = lz_dstore_participant_release_intent(hc->store, gen, role, &e);
		if (r >= 0)
			r = lz_dstore_participant_clean(hc->store, gen, role, &e);
	}
	if (r < 0) {
		snprintf(line, sizeof(line), "kept the %s record of generation %llu: %s", lz_dstore_role_name(role),
			 (unsigned long long)gen, e.msg);
		report(ctx, line);
	}
}

int lz_hc_retire_lost(lz_hc *hc, lz_hc_report *report, void *ctx, struct lz_err *err)
{
	static const enum lz_dstore_role order[] = {
		LZ_DSTORE_ROLE_NETWORK,	       LZ_DSTORE_ROLE_CONNECTIVITY_HELPER, LZ_DSTORE_ROLE_SANDBOX,
		LZ_DSTORE_ROLE_ATTACHED_RUNSC,    LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR,  LZ_DSTORE_ROLE_STATE_ANCHOR,
		LZ_DSTORE_ROLE_PREPARED_LOWER,    LZ_DSTORE_ROLE_HOST_COORDINATOR,
	};
	_cleanup_free_ struct lz_dstore_generation *v = NULL;
	char why[LZ_ERR_MSG_MAX + 256];
	size_t n = 0;
	int r = before_begin(hc, "retiring lost generations", err);
	if (r < 0 || (r = lz_dstore_generation_list(hc->store, 8, &v, &n, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		uint64_t gen = v[i].generation;
		if (v[i].state != LZ_DSTORE_GEN_FAILED)
			continue;
		lz_leaserecovery_judge(hc->store, gen, recovery_deadline(hc, false), why, sizeof(why));
		if (why[0])
			continue; /* clean_runtime reported it */
		_cleanup_free_ struct lz_dstore_session *s = NULL;
		size_t k = 0;
		struct lz_err e = { 0, "" };
		if (lz_dstore_session_list(hc->store, gen, &s, &k, &e) >= 0)
			for (size_t j = 0; j < k; j++) {
				if (s[j].state == LZ_DSTORE_SESSION_INTENT || s[j].state == LZ_DSTORE_SESSION_RUNNING)
					(void)lz_dstore_session_release(hc->store, gen, s[j].session_id, &e);
				(void)lz_dstore_session_clean(hc->store, gen, s[j].session_id, &e);
			}
		for (size_t j = 0; j < LZ_ARRAY_SIZE(order); j++)
			retire_role(hc, gen, order[j], report, ctx);
	}
	return 0;
}

/* Refuse on ambiguity (spec 3.3): a new generation begins only when no
 * generation is left live, no image lease of the Domain is held and no
 * runtime tree of an earlier generation is left. */
int lz_hc_recovered(lz_hc *hc, struct lz_err *err)
{
	uint64_t lost = 0, gens[1], held = 0;
	size_t n = 0;
	int r = lz_hc_lost_generation(hc, &lost, err);
	if (r < 0)
		return r;
	if (lost)
		return lz_err_set(err, EBUSY, "generation %llu is not recorded ended", (unsigned long long)lost);
	if ((r = lz_catalog_domain_leases(lz_config_storage_root(hc->cfg)->fd, hc->domain_hex, &n, &held, err)) < 0)
		return r;
	if (n > 0)
		return lz_err_set(err, EBUSY,
				  "generation %llu of this Domain may still be running (its image lease is kept: see "
				  "hc.log)",
				  (unsigned long long)held);
	int kept = lz_rundir_generations(hc->runtime_domain, gens, 1, err);
	if (kept < 0)
		return kept;
	if (kept > 0)
		return lz_err_set(err, EBUSY,
				  "generation %llu of this Domain may still be running (its runtime tree is kept: see "
				  "hc.log)",
				  (unsigned long long)gens[0]);
	hc->recovered = true;
	return 0;
}

/* Below this much free space on the Storage Root's or the runtime
 * directory's file system, a launch is refused before it writes anything:
 * recording its state could fail half-way (and the sandbox's own writes
 * would fail at once). */
#define MIN_FREE_BYTES (8ull << 20)

static int check_space(const struct lz_path *where, const char *what, const char *advice,
		       struct lz_err *err)
{
	struct statvfs sv;
	if (fstatvfs(where->fd, &sv) < 0)
		return lz_err_set(err, errno, "%s %s: %s", what, where->canonical, strerror(errno));
	unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
	if (avail >= MIN_FREE_BYTES && (sv.f_files == 0 || sv.f_favail > 64))
		return 0;
	return lz_err_set(err, ENOSPC,
			  "%s %s is full (%llu KiB and %llu inodes free; a launch needs %llu MiB): %s, then "
			  "launch again",
			  what, where->canonical, avail >> 10, (unsigned long long)sv.f_favail,
			  MIN_FREE_BYTES >> 20, advice);
}

static int check_domain_space(const lz_config *cfg, struct lz_err *err)
{
	return check_space(lz_config_storage_domain(cfg), "the Domain's storage",
			   "free space on that file system (`lazaret image gc` removes images no Domain "
			   "uses; what the sandbox keeps is in the Domain's directory there)",
			   err);
}

static int check_runtime_space(const lz_hc *hc, struct lz_err *err)
{
	return check_space(hc->runtime_domain, "the runtime directory",
			   "free space on that file system (it holds each running sandbox's /tmp)", err);
}

static void hc_closep(lz_hc **hc)
{
	lz_hc_close(*hc);
}

/* The store makes the Domain Root non-empty: a Domain with no identity
 * gets it first, so one only held (state verify, reset) is still one
 * state list can name and state rm remove. One already there stays as it
 * is: a launch refuses a foreign one when its generation begins, and
 * state verify names it. */
static int identity_first(lz_hc *hc, struct lz_err *err)
{
	int fd = lz_config_storage_domain(hc->cfg)->fd;
	struct lz_domain_identity id;
	struct lz_err ignored = { 0, "" };
	if (lz_identity_read(fd, hc->domain_hex, &id, &ignored) != -ENOENT)
		return 0;
	return lz_identity_ensure(fd, hc->profile->name, lz_config_workspace(hc->cfg)->canonical, err);
}

int lz_hc_open(const lz_config *cfg, lz_hc **ret, struct lz_err *err)
{
	_cleanup_(hc_closep) lz_hc *hc = calloc(1, sizeof(*hc));
	struct lz_config_summary s;
	int r;
	if (hc == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	hc->cfg = cfg;
	hc->profile = lz_config_selected(cfg);
	hc->runtime_domain = lz_config_runtime_domain(cfg);
	hc->lock_fd = hc->rootfs_fd = hc->control_fd = hc->listen_fd = hc->leader_watch = -EBADF;
	hc->runsc = (struct lz_path)LZ_PATH_INIT;
	hc->gendir = (struct lz_gendir)LZ_GENDIR_INIT;
	hc->rs = (struct lz_broker_child)LZ_BROKER_CHILD_INIT;
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
		lz_session_init(&hc->sessions[i]);
		hc->prompt_job[i] = -1;
	}
	if (hc->profile == NULL || hc->runtime_domain == NULL)
		return lz_err_set(err, EINVAL, "the Host Coordinator needs a resolved profile");
	lz_config_summarize(cfg, &s);
	snprintf(hc->domain_hex, sizeof(hc->domain_hex), "%s", s.domain_id);
	snprintf(hc->fp_hex, sizeof(hc->fp_hex), "%s", s.fingerprint);
	if (lz_unhex(hc->domain_hex, hc->domain_id, 32) < 0 || lz_unhex(hc->fp_hex, hc->fingerprint, 32) < 0)
		return lz_err_set(err, EINVAL, "malformed Domain identity");

	/* Nothing is written before there is room for it: the store's first
	 * write is bootstrap recovery's. */
	if ((r = lz_rundir_lock(hc->runtime_domain, &hc->lock_fd, err)) < 0)
		return r;
	struct lz_err rotate = { 0, "" };
	if (lz_rundir_rotate_log(hc->runtime_domain, STDERR_FILENO, LZ_RUNDIR_LOG_KEEP, &rotate) < 0)
		log_line("%s", rotate.msg); /* the log grows on; the launch does not stop for it */
	if ((r = check_domain_space(cfg, err)) < 0 ||
	    (r = identity_first(hc, err)) < 0 ||
	    (r = lz_dstore_open(lz_config_storage_domain(cfg)->fd, &hc->store, err)) < 0)
		return r;
	/* A runsc the sandbox could write would run on the host at the next
	 * start or session (hostprobe.h). */
	if ((r = lz_config_host_tool(cfg, "runsc", "gVisor's runsc", "runsc from bookworm-backports", &hc->runsc,
				     err)) < 0)
		return r;
	*ret = TAKE_PTR(hc);
	return 0;
}

/* Spec 3.8: each host command is in the Domain Store before it starts. */
static int escalation_launching(void *ctx, const char *hex, const char *session, const uint8_t digest[32],
				bool automatic, struct lz_err *err)
{
	lz_hc *hc = ctx;
	char digest_hex[65];
	lz_hex(digest, 32, digest_hex);
	struct lz_dstore_escalation x = { .request_id = hex, .session_id = session, .argv_digest = digest_hex,
					  .automatic = automatic };
	return lz_dstore_escalation_launch(hc->store, hc->gen, &x, err);
}

static void escalation_ended(void *ctx, const char *hex)
{
	lz_hc *hc = ctx;
	struct lz_err err;
	if (lz_dstore_escalation_end(hc->store, hc->gen, hex, &err) < 0)
		log_line("%s", err.msg);
}

/* What a child that keeps running the coordinator's image (the RS, a
 * session's exec client) keeps of its environment: the router's Git reads
 * HOME and XDG_CONFIG_HOME (rsrouter.c), the test harness finds a leaked
 * process by LZ_TEST_RUN (scripts/test.sh), a test build reads its fault
 * switch. */
static const char *const child_env_kept[] = { "HOME", "XDG_CONFIG_HOME", "LZ_TEST_RUN",
#ifdef LZ_TEST_FAULTS
					      "LAZARET_TEST_FAULT",
#endif
					      NULL };

/* Spec 3.3: the generation's keys live in the coordinator alone. The
 * children its broker forks (the Runtime Supervisor for the whole
 * generation, in the sandbox's user namespace; a session's exec wrapper
 * for the session) would copy them, and the developer's environment and
 * the profile's environment values with them: each wipes them before it
 * runs (proc/broker.h). Nothing here writes to a descriptor: the child
 * shares the parent's connections. */
static void forget_keys(void *ctx)
{
	lz_hc *hc = ctx;
	lz_config_forget_env_values(hc->cfg);
	for (size_t i = 0; hc->host_env != NULL && hc->host_env[i] != NULL; i++)
		explicit_bzero(hc->host_env[i], strlen(hc->host_env[i]));
	/* a failure leaves the environment as it was: nothing to do about it
	 * in a child that cannot report yet */
	(void)lz_env_limit_block(child_env_kept, hc->env_start, hc->env_end);
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
		lz_tlschan_free(hc->sessions[i].tls); /* its context holds the leaf key */
		hc->sessions[i].tls = NULL;
	}
	lz_admission_free(hc->admission);
	hc->admission = NULL;
	lz_escalation_forget_keys(hc->esc);
}

static void escalation_not_started(void *ctx, int slot, const char *why);

/* Spec 3.8: never bytes another Domain's sandbox can write either (its
 * workspace and the writable volumes it was ever given, recorded in the
 * Storage Root; its ignored state and anchors lie in the Storage Root
 * itself). This Domain's own past volumes are in its record too. */
static int other_domains_executable_allowed(const lz_hc *hc, const char *canonical, struct lz_err *err)
{
	char tree[4096];
	const char *kind = "";
	int r = lz_domain_writable_holding(lz_config_storage_root(hc->cfg), canonical, tree, sizeof(tree), &kind,
					   err);
	if (r < 0)
		return lz_err_prefix(err, r, "executable '%s': ", canonical);
	if (r > 0)
		return lz_err_set(err, EPERM,
				  "executable '%s' lies inside '%s', %s of a Domain, which its sandbox can write",
				  canonical, tree, kind);
	return 0;
}

/* Spec 3.2, 3.8: the writable volumes this launch mounts join the
 * Domain's record before its sandbox can write them. */
static int record_volumes(lz_hc *hc, struct lz_err *err)
{
	const char *sources[LZ_CONFIG_LIST_MAX];
	size_t n = 0;
	for (size_t i = 0; i < hc->profile->n_volumes && n < LZ_CONFIG_LIST_MAX; i++)
		if (!hc->profile->volumes[i].read_only)
			sources[n++] = lz_config_volume_source(hc->cfg, i)->canonical;
	const struct lz_path *dom = lz_config_storage_domain(hc->cfg);
	int r = n == 0 ? 0 : lz_identity_record_volumes(dom->fd, sources, n, err);
	if (r < 0)
		lz_err_prefix(err, r,
			      "%s/" LZ_VOLUMES_FILE " (the record of the volumes this Domain's sandbox could write; "
			      "removing it starts a new one, and executables in the directories it named are then "
			      "no longer refused): ",
			      dom->canonical);
	return r;
}

int lz_hc_begin(lz_hc *hc, struct lz_err *err)
{
	if (no_batch(hc, "begin a generation", err) < 0)
		return -EBUSY;
	int r;
	if (hc->gen)
		return lz_err_set(err, EPROTO, "generation %llu has begun already", (unsigned long long)hc->gen);
	if (!hc->recovered)
		return lz_err_set(err, EPROTO, "a generation begins only after bootstrap recovery");
	/* The router's libgit2, before the generation exists: a missing
	 * library refuses the launch here, not halfway through it (and the
	 * state commands, which open no generation, do not need it). Loaded
	 * only to be sure: the router, a program of its own, loads it. */
	if ((r = lz_gitlib_open(err)) < 0)
		return r;
	/* An auto-approved executable another Domain's sandbox can write
	 * (its workspace may have been recorded since the configuration was
	 * checked) refuses the launch, as one in this workspace does. */
	for (size_t i = 0; i < hc->profile->n_rules; i++)
		if ((r = other_domains_executable_allowed(hc, lz_config_executable(hc->cfg, i)->canonical, err)) < 0)
			return lz_err_prefix(err, r, "auto-approve ");
	/* The runtime directory after recovery removed what a lost generation
	 * left there (its transient layer). */
	if ((r = check_runtime_space(hc, err)) < 0 ||
	    (r = lz_identity_ensure(lz_config_storage_domain(hc->cfg)->fd, hc->profile->name,
				    lz_config_workspace(hc->cfg)->canonical, err)) < 0 ||
	    (r = record_volumes(hc, err)) < 0)
		return r;
	uint64_t gen;
	if ((r = lz_dstore_generation_begin(hc->store, hc->domain_hex, hc->fp_hex, &gen, err)) < 0)
		return r;
	hc->gen = gen;
	snprintf(hc->container_id, sizeof(hc->container_id), "lazaret-%.16s-%llu", hc->domain_hex,
		 (unsigned long long)gen);
	if ((r = lz_gendir_create(hc->runtime_domain, gen, lz_sandbox_init, lz_sandbox_init_len,
				  LZ_BUNDLE_RESOLV_CONF, &hc->gendir, err)) < 0)
		return r;
	/* Spec 3.3, 3.8: the generation's keys and mailbox, and the client
	 * the sandbox asks through. */
	_cleanup_close_ int keeper = -EBADF;
	if ((r = lz_memfd_sealed(LZ_KEEPER_NAME, lz_keeper_program, lz_keeper_program_len, true, &keeper, err)) < 0)
		return lz_err_prefix(err, r, "host escalation: ");
	if ((r = lz_escalation_create(hc->gendir.dir.fd, hc->domain_id, gen, keeper, &hc->esc, err)) < 0)
		return lz_err_prefix(err, r, "host escalation: ");
	lz_escalation_set_hooks(hc->esc, &(struct lz_esc_hooks){ .launching = escalation_launching,
								  .ended = escalation_ended,
								  .not_started = escalation_not_started,
								  .ctx = hc });
	/* Spec 3.3: the control socket's CA and the coordinator's leaf. */
	const struct lz_trust_anchor *ta = lz_escalation_anchor(hc->esc);
	if ((r = lz_admission_new(ta->tls_ca, hc->domain_id, hc->fingerprint, gen, ta->manifest, ta->manifest_len,
				  &hc->admission, err)) < 0)
		return lz_err_prefix(err, r, "control socket TLS: ");
	if ((r = lz_env_block(&hc->env_start, &hc->env_end)) < 0)
		return lz_err_set(err, -r, "read where this process's environment lies: %s", strerror(-r));
	lz_broker_forget_in_children(forget_keys, hc);
	r = lz_file_create(hc->gendir.dir.fd, LZ_GENDIR_ESCALATE, lz_escalate_client, lz_escalate_client_len, 0555,
			   LZ_RESOLVE_OWNED, err);
	return fault_after("after-begin", r);
}

/* ---- prepared lower ---------------------------------------------------------- */

int lz_hc_lower_lookup(lz_hc *hc, struct lz_err *err)
{
	if (hc->artifact[0])
		return lz_err_set(err, EPROTO, "the prepared lower was looked up already");
	return lz_prepare_lookup(lz_config_storage_root(hc->cfg), hc->profile->image, hc->artifact,
				 &hc->rootfs_fd, err);
}

/* The participant row of role (*ret zeroed, phase 0, when there is none). */
static int participant(lz_hc *hc, enum lz_dstore_role role, struct lz_dstore_participant *ret,
		       struct lz_err *err)
{
	struct lz_err e = { 0, "" };
	int r = lz_dstore_participant_get(hc->store, hc->gen, role, ret, &e);
	if (r == -ENOENT) {
		*ret = (struct lz_dstore_participant){ 0 };
		return 0;
	}
	if (r < 0)
		*err = e;
	return r;
}

int lz_hc_lease_acquire(lz_hc *hc, struct lz_err *err)
{
	if (no_batch(hc, "acquire the catalog lease", err) < 0)
		return -EBUSY;
	struct lz_dstore_participant p;
	int r;
	if ((r = need_generation(hc, err)) < 0 || (r = participant(hc, LZ_DSTORE_ROLE_PREPARED_LOWER, &p, err)) < 0)
		return r;
	bool recorded = p.has_artifact && strcmp(p.artifact_id, hc->artifact) == 0;
	lz_dstore_participant_clear(&p);
	/* Spec 3.6 step 1 comes first: the intent names the artifact. */
	if (!recorded || hc->lease_held)
		return lz_err_set(err, EPROTO, "the catalog lease needs prepared-lower intent with its artifact "
					       "recorded first");
	if ((r = lz_catalog_lease_acquire(lz_config_storage_root(hc->cfg)->fd, hc->artifact, hc->domain_hex, hc->gen,
					  err)) < 0)
		return r;
	hc->lease_held = true;
	return 0;
}

/* Step 4's recheck, under the catalog lock: the Domain's own record still
 * says release, and the supervisor that held the mounts is gone. */
static int lease_recheck(void *ctxp, struct lz_err *err)
{
	lz_hc *hc = ctxp;
	enum lz_dstore_phase phase;
	int r = lz_hc_phase(hc, LZ_DSTORE_ROLE_PREPARED_LOWER, &phase, err);
	if (r < 0)
		return r;
	if (phase != LZ_DSTORE_PHASE_RELEASE || hc->rs_state == RS_RUNNING)
		return lz_err_set(err, ESTALE, "prepared lower is not in release, or its mounts may still exist");
	return 0;
}

int lz_hc_lease_release(lz_hc *hc, struct lz_err *err)
{
	if (no_batch(hc, "release the catalog lease", err) < 0)
		return -EBUSY;
	if (!hc->lease_held)
		return 0;
	int r = lz_catalog_lease_release(lz_config_storage_root(hc->cfg)->fd, hc->artifact, hc->domain_hex, hc->gen,
					 lease_recheck, hc, err);
	if (r < 0 && r != -ENOENT)
		return r;
	hc->lease_held = false;
	return 0;
}

/* ---- the Runtime Supervisor ------------------------------------------------- */

/* Spec 3.6: a namespace the process is about to populate is durable in
 * the same transaction as the process's staging, so that bootstrap
 * recovery can prove it gone on its own (nsident.h); without namespace
 * IDs (a kernel before 6.18) the staging alone. */
static int stage_with_namespace(lz_hc *hc, enum lz_dstore_role role, const struct lz_pidref *id,
				enum lz_dstore_ns_kind kind, const struct lz_nsident *ns, struct lz_err *err)
{
	if (ns == NULL)
		return lz_dstore_participant_stage_process(hc->store, hc->gen, role, id, err);
	int r = lz_dstore_batch_begin(hc->store, err);
	if (r < 0)
		return r;
	/* Both or neither: a refused staging leaves no namespace recorded. */
	struct lz_dstore_ns record = { ns->id, ns->inum };
	if ((r = lz_dstore_rs_namespace_record(hc->store, hc->gen, kind, &record, err)) >= 0)
		r = lz_dstore_participant_stage_process(hc->store, hc->gen, role, id, err);
	struct lz_err ignored = { 0, "" };
	if (r < 0) {
		(void)lz_dstore_batch_abort(hc->store, &ignored);
		return r;
	}
	return lz_dstore_batch_end(hc->store, err);
}

/* The RS's mount namespace, before it can mount anything there; a
 * failure kills the RS unreleased. */
static int rs_staged(void *ctxp, const struct lz_pidref *id, int pidfd, struct lz_err *err)
{
	lz_hc *hc = ctxp;
	struct lz_nsident mount;
	bool known = lz_nsident_supported();
	int r = known ? lz_nsident_of_pidfd(pidfd, CLONE_NEWNS, &mount, err) : 0;
	if (r < 0)
		return r;
	return stage_with_namespace(hc, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR, id, LZ_DSTORE_NS_MOUNT,
				    known ? &mount : NULL, err);
}

/* Spec 3.3 step 1 and 3.6 step 4: nothing physical before its intent. */
static int rs_preconditions(lz_hc *hc, struct lz_err *err)
{
	static const enum lz_dstore_role roles[] = { LZ_DSTORE_ROLE_STATE_ANCHOR, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR,
						     LZ_DSTORE_ROLE_ATTACHED_RUNSC, LZ_DSTORE_ROLE_SANDBOX,
						     LZ_DSTORE_ROLE_CONNECTIVITY_HELPER, LZ_DSTORE_ROLE_NETWORK };
	enum lz_dstore_phase phase;
	int r;
	if (hc->rs_state != RS_NONE)
		return lz_err_set(err, EPROTO, "this generation's Runtime Supervisor was started already");
	if ((r = lz_hc_phase(hc, LZ_DSTORE_ROLE_PREPARED_LOWER, &phase, err)) < 0)
		return r;
	if (phase != LZ_DSTORE_PHASE_ACTIVE || !hc->lease_held)
		return lz_err_set(err, EPROTO, "the Runtime Supervisor needs an active, leased prepared lower");
	for (size_t i = 0; i < LZ_ARRAY_SIZE(roles); i++) {
		if ((r = lz_hc_phase(hc, roles[i], &phase, err)) < 0)
			return r;
		if (phase != LZ_DSTORE_PHASE_INTENT)
			return lz_err_set(err, EPROTO, "the Runtime Supervisor needs %s intent first",
					  lz_dstore_role_name(roles[i]));
	}
	return 0;
}

static void plan_freep(struct lz_rs_plan **p)
{
	lz_rsplan_free(*p);
}

int lz_hc_rs_spawn(lz_hc *hc, lz_hc_rs_main *rs_main, struct lz_err *err)
{
	if (no_batch(hc, "start the Runtime Supervisor", err) < 0)
		return -EBUSY;
	_cleanup_(plan_freep) struct lz_rs_plan *plan = NULL;
	_cleanup_close_ int hc_fd = -EBADF;
	struct lz_idmap map;
	int r;
	if ((r = need_generation(hc, err)) < 0 || (r = rs_preconditions(hc, err)) < 0 ||
	    (r = lz_idmap_for_invoking_user(&map, err)) < 0)
		return r;
	if (getrandom(hc->canary_key, sizeof(hc->canary_key), 0) != (ssize_t)sizeof(hc->canary_key) ||
	    getrandom(hc->init_challenge, sizeof(hc->init_challenge), 0) != (ssize_t)sizeof(hc->init_challenge))
		return lz_err_set(err, EIO, "canary key: %s", strerror(errno));
	struct lz_rsplan_input in = { .cfg = hc->cfg, .gen = &hc->gendir, .generation = hc->gen,
				      .domain_id = hc->domain_hex, .artifact = hc->artifact,
				      .rootfs_fd = hc->rootfs_fd, .runsc = &hc->runsc,
				      .container_id = hc->container_id, .canary_key = hc->canary_key,
				      .router_program = lz_router_program,
				      .router_program_len = lz_router_program_len };
	if ((r = lz_rsplan_build(&in, &plan, &hc_fd, err)) < 0 ||
	    (r = lz_bundle_write(hc->cfg, &hc->gendir, &(struct lz_bundle_git){ plan->git, plan->n_git },
				 hc->init_challenge, err)) < 0 ||
	    (r = fault_after("after-plan", 0)) < 0)
		return r;
	memcpy(hc->policy_digest, plan->policy_digest, sizeof(hc->policy_digest));
	struct lz_broker_spec spec = {
		.label = "Runtime Supervisor",
		.comm = "lz-supervisor",
		/* No CLONE_NEWNET: the RS creates the enforcement namespace
		 * after cloning slirp4netns in the host's (supervisor.h). */
		.clone_flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS,
		.map = &map,
		.join_pidfd = -1,
		.fn = rs_main,
		.arg = plan,
		.staged = rs_staged,
		.ctx = hc,
	};
	if ((r = lz_broker_spawn(&spec, &hc->rs, err)) < 0)
		return r;
	hc->rs_state = RS_RUNNING;
	hc->control_fd = TAKE_FD(hc_fd);
	return fault_after("after-spawn", 0);
}

int lz_hc_rs_expect(lz_hc *hc, enum lz_rs_msg_type type, struct lz_err *err)
{
	if (no_batch(hc, "wait for the Runtime Supervisor", err) < 0)
		return -EBUSY;
	struct lz_rs_msg *m = malloc(sizeof(*m));
	if (m == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	int r = hc->rs_state == RS_RUNNING ? lz_rs_recv(hc->control_fd, m, LZ_RS_START_TIMEOUT_MS + 5000) : -ESRCH;
	if (r < 0)
		r = lz_err_set(err, -r, "the Runtime Supervisor %s",
			       r == -EPIPE || r == -ESRCH ? "ended early" : strerror(-r));
	else if (!lz_rs_msg_for(m, hc->gen, hc->domain_hex))
		r = lz_err_set(err, EPROTO, "the Runtime Supervisor reported another generation");
	else if (m->type == LZ_RS_FAILED)
		r = lz_err_set(err, EIO, "the Runtime Supervisor failed: %s", m->text);
	else if (m->type != type)
		r = lz_err_set(err, EPROTO, "expected '%s' from the Runtime Supervisor, got '%s'",
			       lz_rs_msg_name(type), lz_rs_msg_name(m->type));
	else if (type == LZ_RS_MOUNTS && !hc->have_mounts && m->n_mounts == 1 + hc->profile->n_persistent_dirs) {
		hc->mounts = *m;
		hc->have_mounts = true;
	} else if (type == LZ_RS_HELPER_STAGED && !hc->have_slirp) {
		hc->slirp_id = m->id;
		hc->have_slirp = true;
		/* The RS made the enforcement namespace before reporting and
		 * waits for the acknowledgement in it (supervisor.c). */
		if (lz_nsident_supported() &&
		    (r = lz_nsident_of_pidfd(hc->rs.pidfd, CLONE_NEWNET, &hc->enforcement_net, err)) >= 0)
			hc->have_enforcement_net = true;
	} else if (type == LZ_RS_STAGED && !hc->have_runsc) {
		hc->runsc_id = m->id;
		hc->have_runsc = true;
	} else if (type == LZ_RS_READY && hc->have_runsc && !hc->have_ready && lz_pidref_equal(&m->id, &hc->runsc_id)) {
		hc->ready = *m;
		hc->have_ready = true;
	} else {
		r = lz_err_set(err, EPROTO, "unexpected or duplicate '%s' from the Runtime Supervisor",
			       lz_rs_msg_name(m->type));
	}
	free(m);
	return r;
}

static int held_identity(const lz_hc *hc, enum lz_dstore_role role, const struct lz_pidref **ret,
			 struct lz_err *err)
{
	bool have = false;
	switch (role) {
	case LZ_DSTORE_ROLE_CONNECTIVITY_HELPER:
		have = hc->have_slirp;
		*ret = &hc->slirp_id;
		break;
	case LZ_DSTORE_ROLE_ATTACHED_RUNSC:
	case LZ_DSTORE_ROLE_SANDBOX:
		have = hc->have_runsc;
		*ret = &hc->runsc_id;
		break;
	case LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR:
		have = hc->rs_state != RS_NONE;
		*ret = &hc->rs.id;
		break;
	default:
		return lz_err_set(err, EINVAL, "%s has no process this coordinator acquires",
				  lz_dstore_role_name(role));
	}
	return have ? 0 : lz_err_set(err, EPROTO, "no %s identity has been reported", lz_dstore_role_name(role));
}

int lz_hc_rs_ack(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	if (no_batch(hc, "release a child", err) < 0)
		return -EBUSY;
	const struct lz_pidref *id = NULL;
	struct lz_dstore_participant p;
	int r;
	if (role != LZ_DSTORE_ROLE_CONNECTIVITY_HELPER && role != LZ_DSTORE_ROLE_ATTACHED_RUNSC)
		return lz_err_set(err, EINVAL, "the Runtime Supervisor stages no %s", lz_dstore_role_name(role));
	if ((r = held_identity(hc, role, &id, err)) < 0 || (r = participant(hc, role, &p, err)) < 0)
		return r;
	bool staged = p.process.phase == LZ_DSTORE_SLOT_STAGED && lz_pidref_equal(&p.process.id, id);
	lz_dstore_participant_clear(&p);
	if (!staged)
		return lz_err_set(err, EPROTO, "%s is not durably staged with the reported identity; no "
					       "acknowledgement", lz_dstore_role_name(role));
	struct lz_rs_msg ack;
	lz_rs_msg_init(&ack, LZ_HC_ACK, hc->gen, hc->domain_hex);
	ack.id = *id;
	if ((r = lz_rs_send(hc->control_fd, &ack)) < 0)
		return lz_err_set(err, -r, "acknowledge the staged identity: %s", strerror(-r));
	return 0;
}

/* The RS's enforcement network namespace, read by the HC itself (spec 3.7
 * "Independent identity"): through /proc, then the pidfd proves the PID
 * still named the RS when the namespace was opened. */
static int rs_netns(lz_hc *hc, struct stat *ret, struct lz_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%u/ns/net", hc->rs.id.pid);
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0 || fstat(ns, ret) < 0)
		return lz_err_set(err, errno, "the Runtime Supervisor's network namespace: %s", strerror(errno));
	if (syscall(SYS_pidfd_send_signal, hc->rs.pidfd, 0, NULL, 0) < 0)
		return lz_err_set(err, ESRCH, "the Runtime Supervisor ended during network attestation");
	return 0;
}

int lz_hc_attest_network(lz_hc *hc, struct lz_err *err)
{
	struct lz_netattest att;
	uint8_t want[LZ_CANARY_CHALLENGE_LEN], fp[LZ_NETREADY_FP_LEN];
	struct lz_dstore_generation g;
	struct stat ns;
	int r;
	if (!hc->have_ready || hc->attested)
		return lz_err_set(err, EPROTO, "network attestation needs the Runtime Supervisor's readiness report");
	if (lz_netattest_decode(hc->ready.attest, hc->ready.attest_len, &att) < 0)
		return lz_err_set(err, EPROTO, "network readiness: the attestation record does not decode");
	/* Only this generation's responder, holding the key, forms the answer. */
	if (lz_canary_answer(hc->canary_key, hc->gen, LZ_NET_CANARY_ALLOWED, hc->init_challenge, want) < 0)
		return lz_err_set(err, EIO, "network readiness: OpenSSL failed");
	/* Egress by name: the proxy must be live exactly when the profile
	 * names domains (the policy the RS verified carries the same list). */
	bool egress = lz_config_selected(hc->cfg)->n_allow_domains > 0;
	if ((r = lz_netattest_check(&att, want, egress, err)) < 0)
		return lz_err_prefix(err, r, "network readiness refused: ");
	if ((r = rs_netns(hc, &ns, err)) < 0 || (r = lz_dstore_generation_get(hc->store, hc->gen, &g, err)) < 0)
		return r;
	if ((r = lz_netready_fingerprint(hc->domain_id, hc->gen, hc->fingerprint, g.sidecar_id, hc->policy_digest,
					 (uint64_t)ns.st_dev, (uint64_t)ns.st_ino, fp)) < 0)
		return lz_err_set(err, -r, "network readiness fingerprint: %s", strerror(-r));
	lz_hex(fp, sizeof(fp), hc->readiness);
	hc->attested = true;
	return 0;
}

int lz_hc_rs_stop(lz_hc *hc, struct lz_err *err)
{
	(void)fault_after("in-teardown", 0);
	if (no_batch(hc, "stop the Runtime Supervisor", err) < 0)
		return -EBUSY;
	if (hc->rs_state != RS_RUNNING)
		return 0;
	struct lz_rs_msg *m = malloc(sizeof(*m));
	if (m == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	lz_rs_msg_init(m, LZ_HC_STOP, hc->gen, hc->domain_hex);
	(void)lz_rs_send(hc->control_fd, m);
	bool proved = false;
	char why[LZ_RS_TEXT_MAX] = "";
	while (lz_rs_recv(hc->control_fd, m, LZ_HC_STOP_TIMEOUT_MS) == 0) {
		if (m->type == LZ_RS_STOPPED) {
			proved = true;
			break;
		}
		if (m->type == LZ_RS_FAILED) {
			snprintf(why, sizeof(why), "%s", m->text);
			note_rs_failure(hc, m);
			break;
		}
	}
	free(m);
	int status;
	struct lz_err werr = { 0, "" };
	int r = lz_broker_wait(&hc->rs, LZ_HC_STOP_TIMEOUT_MS, &status, &werr);
	lz_close_fdp(&hc->control_fd);
	/* The mounts lived only in the RS's mount namespace, which ended with
	 * the reaped RS and its PID namespace (slirp4netns, runsc and the
	 * sandbox with it): the independent absence proof when the RS could
	 * not report its own. -EIO is a reaped RS whose body failed. */
	if (!proved && r < 0 && r != -EIO)
		return lz_err_set(err, -r, "stopping the Runtime Supervisor: %s%s%s", werr.msg, why[0] ? "; " : "",
				  why);
	hc->rs_state = RS_GONE;
	return 0;
}

/* ---- Domain Store transitions ------------------------------------------------ */

int lz_hc_phase(lz_hc *hc, enum lz_dstore_role role, enum lz_dstore_phase *ret, struct lz_err *err)
{
	struct lz_dstore_participant p;
	int r = need_generation(hc, err);
	if (r < 0 || (r = participant(hc, role, &p, err)) < 0)
		return r;
	*ret = p.phase;
	lz_dstore_participant_clear(&p);
	return 0;
}

int lz_hc_intent(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	int r = need_generation(hc, err);
	return fault_after("after-intent", r < 0 ? r : lz_dstore_participant_intent(hc->store, hc->gen, role, err));
}

int lz_hc_record(lz_hc *hc, enum lz_hc_evidence what, struct lz_err *err)
{
	int r = need_generation(hc, err);
	if (r < 0)
		return r;
	switch (what) {
	case LZ_HC_EVIDENCE_ARTIFACT:
		if (!hc->artifact[0])
			return lz_err_set(err, EPROTO, "no prepared artifact has been looked up");
		return lz_dstore_participant_set_artifact(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER,
							  hc->artifact, err);
	case LZ_HC_EVIDENCE_LEASE:
		if (!hc->lease_held)
			return lz_err_set(err, EPROTO, "no catalog lease is held");
		return lz_dstore_participant_set_lease_held(hc->store, hc->gen, LZ_DSTORE_ROLE_PREPARED_LOWER, err);
	case LZ_HC_EVIDENCE_MOUNTS:
		if (!hc->have_mounts)
			return lz_err_set(err, EPROTO, "the Runtime Supervisor has reported no mounts");
		for (size_t i = 0; i < hc->mounts.n_mounts; i++) {
			const struct lz_mount_id *m = &hc->mounts.mounts[i];
			struct lz_dstore_mount dm = { .mnt_id = m->mnt_id, .dev = m->dev, .ino = m->ino };
			snprintf(dm.path, sizeof(dm.path), "%s", i == 0 ? "/" : hc->profile->persistent_dirs[i - 1]);
			if ((r = lz_dstore_participant_add_mount(hc->store, hc->gen, LZ_DSTORE_ROLE_STATE_ANCHOR, &dm,
								 err)) < 0)
				return r;
		}
		return 0;
	case LZ_HC_EVIDENCE_READINESS:
		if (!hc->attested)
			return lz_err_set(err, EPROTO, "the network is not attested");
		return lz_dstore_participant_set_network_ready(hc->store, hc->gen, hc->readiness, err);
	}
	return lz_err_set(err, EINVAL, "unknown evidence");
}

/* Spec 3.3 step 9: committed (or, for the sandbox, staged at all) only
 * after target readiness, which for this generation is the attested
 * network. */
static int identity_for(const lz_hc *hc, enum lz_dstore_role role, bool need_ready, const struct lz_pidref **ret,
			struct lz_err *err)
{
	int r = held_identity(hc, role, ret, err);
	if (r < 0)
		return r;
	if (need_ready && !hc->attested)
		return lz_err_set(err, EPROTO, "%s is committed only after the network attestation",
				  lz_dstore_role_name(role));
	return 0;
}

int lz_hc_stage(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	const struct lz_pidref *id = NULL;
	int r = need_generation(hc, err);
	if (r < 0)
		return r;
	if (role == LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR)
		return lz_err_set(err, EINVAL, "the broker stages the Runtime Supervisor before its release");
	if ((r = identity_for(hc, role, role == LZ_DSTORE_ROLE_SANDBOX, &id, err)) < 0)
		return r;
	/* The enforcement namespace (and the canary veth in it) is durable
	 * before slirp4netns, the first process beside the RS to enter it,
	 * is released. */
	if (role == LZ_DSTORE_ROLE_CONNECTIVITY_HELPER)
		return fault_after("after-stage", stage_with_namespace(hc, role, id, LZ_DSTORE_NS_NETWORK,
									hc->have_enforcement_net ? &hc->enforcement_net
												 : NULL,
									err));
	return fault_after("after-stage", lz_dstore_participant_stage_process(hc->store, hc->gen, role, id, err));
}

int lz_hc_commit(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	const struct lz_pidref *id = NULL;
	int r = need_generation(hc, err);
	if (r < 0 || (r = identity_for(hc, role, true, &id, err)) < 0)
		return r;
	return fault_after("after-commit", lz_dstore_participant_commit_process(hc->store, hc->gen, role, id, err));
}

int lz_hc_enter(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	struct lz_pidref me;
	const struct lz_pidref *id = &me;
	int r = need_generation(hc, err);
	if (r < 0)
		return r;
	if (role == LZ_DSTORE_ROLE_HOST_COORDINATOR) {
		_cleanup_close_ int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
		if (fd < 0)
			return lz_err_set(err, errno, "pidfd of the Host Coordinator: %s", strerror(errno));
		if ((r = lz_pidref_from_pidfd(fd, &me, err)) < 0)
			return r;
	} else if (role == LZ_DSTORE_ROLE_NETWORK) {
		/* Spec 3.3 "Network RS": the committed supervisor, after the
		 * attestation. */
		if ((r = identity_for(hc, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR, true, &id, err)) < 0)
			return r;
	} else {
		return lz_err_set(err, EINVAL, "%s is not a direct existing-process edge", lz_dstore_role_name(role));
	}
	return lz_dstore_participant_enter_process(hc->store, hc->gen, role, id, err);
}

int lz_hc_activate(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	int r = need_generation(hc, err);
	return r < 0 ? r : lz_dstore_participant_activate(hc->store, hc->gen, role, err);
}

int lz_hc_release(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	int r = need_generation(hc, err);
	return r < 0 ? r : lz_dstore_participant_release_intent(hc->store, hc->gen, role, err);
}

static bool sessions_active(const lz_hc *hc)
{
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
		if (lz_session_busy(&hc->sessions[i]))
			return true;
	return false;
}

/* Spec 3.3: release becomes clean only after absence proof. */
static int absence_proved(const lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	switch (role) {
	case LZ_DSTORE_ROLE_PREPARED_LOWER:
		if (hc->lease_held)
			return lz_err_set(err, EBUSY, "prepared_lower still holds its catalog lease");
		return 0;
	case LZ_DSTORE_ROLE_HOST_COORDINATOR:
		if (hc->listen_fd >= 0 || sessions_active(hc))
			return lz_err_set(err, EBUSY, "the Host Coordinator still serves sessions");
		break;
	default:
		break;
	}
	/* The RS's processes and mounts end with its namespaces. */
	if (hc->rs_state == RS_RUNNING)
		return lz_err_set(err, EBUSY, "%s: the Runtime Supervisor still runs", lz_dstore_role_name(role));
	return 0;
}

int lz_hc_clean(lz_hc *hc, enum lz_dstore_role role, struct lz_err *err)
{
	int r = need_generation(hc, err);
	if (r < 0 || (r = absence_proved(hc, role, err)) < 0)
		return r;
	return lz_dstore_participant_clean(hc->store, hc->gen, role, err);
}

int lz_hc_anchor_unmounted(lz_hc *hc, struct lz_err *err)
{
	int r = need_generation(hc, err);
	if (r < 0 || (r = absence_proved(hc, LZ_DSTORE_ROLE_STATE_ANCHOR, err)) < 0)
		return r;
	return lz_dstore_anchor_unmounted(hc->store, hc->gen, err);
}

int lz_hc_set_state(lz_hc *hc, enum lz_dstore_gen_state state, struct lz_err *err)
{
	int r = need_generation(hc, err);
	if (r < 0)
		return r;
	if (state == LZ_DSTORE_GEN_PUBLISHED)
		return lz_err_set(err, EINVAL, "publication is lz_hc_publish: the socket and the record together");
	return lz_dstore_generation_set_state(hc->store, hc->gen, state, err);
}

/* ---- publication and sessions ---------------------------------------------- */

int lz_hc_publish(lz_hc *hc, struct lz_err *err)
{
	if (no_batch(hc, "publish", err) < 0)
		return -EBUSY;
	struct sockaddr_un addr;
	int r = need_generation(hc, err);
	if (r < 0)
		return r;
	if (hc->listen_fd >= 0)
		return lz_err_set(err, EPROTO, "the generation is published already");
	/* Bind beneath the retained, 0700 runtime Domain directory (SR-10). */
	if (lz_rundir_socket_addr(hc->runtime_domain, &addr) < 0)
		return lz_err_set(err, ENAMETOOLONG, "socket path too long");
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return lz_err_set(err, errno, "socket: %s", strerror(errno));
	(void)unlinkat(hc->runtime_domain->fd, LZ_RUNDIR_SOCKET, 0);
	/* Spec 3.3: the pin is in place before anyone can connect. */
	if ((r = lz_admission_pin(hc->admission, hc->runtime_domain->fd, err)) < 0)
		return r;
	mode_t old = umask(0077);
	r = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
	umask(old);
	if (r < 0 || listen(fd, 16) < 0) {
		r = lz_err_set(err, errno, "listen on %s/%s: %s", hc->runtime_domain->canonical, LZ_RUNDIR_SOCKET,
			       strerror(errno));
		lz_pin_remove(hc->runtime_domain->fd);
		return r;
	}
	/* Sessions are admitted only by a published generation, and the store
	 * publishes only with the network participant active. */
	if ((r = lz_dstore_generation_set_state(hc->store, hc->gen, LZ_DSTORE_GEN_PUBLISHED, err)) < 0) {
		(void)unlinkat(hc->runtime_domain->fd, LZ_RUNDIR_SOCKET, 0);
		lz_pin_remove(hc->runtime_domain->fd);
		return r;
	}
	hc->listen_fd = TAKE_FD(fd);
	/* Spec 3.3: the running sandbox holds its credential mount. */
	lz_escalation_sandbox_started(hc->esc);
	return fault_after("after-publish", 0);
}

static void withdraw(lz_hc *hc)
{
	if (hc->listen_fd < 0)
		return;
	lz_close_fdp(&hc->listen_fd);
	(void)unlinkat(hc->runtime_domain->fd, LZ_RUNDIR_SOCKET, 0);
	lz_pin_remove(hc->runtime_domain->fd);
}

/* A session's files in the generation's sessions directory: its process
 * document (json) and runsc exec's PID file (pid). */
#define SESSION_FILE_MAX (LZ_SESSION_ID_HEX + 8)
static void session_file(char name[SESSION_FILE_MAX], const char *id, const char *ext)
{
	snprintf(name, SESSION_FILE_MAX, "%s.%s", id, ext);
}

/* A session's process document holds its environment values (spec 3.3:
 * ephemeral): gone once runsc exec has read it (its PID file written:
 * leader_arrived, forget_process_doc), and at the session's end with its
 * PID file. */
static void remove_session_files(lz_hc *hc, const char *id)
{
	char name[SESSION_FILE_MAX];
	session_file(name, id, "json");
	(void)unlinkat(hc->gendir.sessions, name, 0);
	session_file(name, id, "pid");
	(void)unlinkat(hc->gendir.sessions, name, 0);
}

/* Spec 3.8: session loss ends its host commands first. */
static void end_session_requests(lz_hc *hc, struct lz_session *s)
{
	size_t slot = (size_t)(s - hc->sessions);
	if (hc->esc != NULL)
		(void)lz_escalation_session_gone(hc->esc, (int)slot);
	hc->prompt_job[slot] = -1;
	hc->prompt_pace[slot] = (struct prompt_pace){ 0 };
}

/* The store's view of a session ends with it: release, then clean. */
static void session_end(lz_hc *hc, struct lz_session *s)
{
	struct lz_err ignored;
	char id[sizeof(s->id)];
	end_session_requests(hc, s);
	hc->doc_pending[s - hc->sessions] = false;
	memcpy(id, s->id, sizeof(id));
	lz_session_reset(s); /* kills and reaps a remaining exec client first */
	if (!id[0])
		return;
	remove_session_files(hc, id);
	/* Nothing happens between the two: one commit. A batch that does not
	 * commit committed nothing, so the moves are made again one by one. */
	struct lz_err why = { 0, "" };
	for (int attempt = 0; attempt < 2; attempt++) {
		bool batch = attempt == 0 && lz_dstore_batch_begin(hc->store, &ignored) == 0;
		(void)lz_dstore_session_release(hc->store, hc->gen, id, &ignored);
		int clean = lz_dstore_session_clean(hc->store, hc->gen, id, &why);
		if (!batch || lz_dstore_batch_end(hc->store, &why) == 0) {
			if (clean == 0)
				return;
			break;
		}
	}
	/* A full disk, most likely: the generation then ends failed (hc.lua),
	 * and the next launch's recovery cleans the record. */
	log_line("session %s: its end was not fully recorded: %s", id, why.msg);
}

/* The exec client ended: the session's host requests end with it (spec
 * 3.8), and its end reaches the client as the client takes it, while
 * every other session is served (session.h); session_end once it has. */
static void session_finish(lz_hc *hc, struct lz_session *s)
{
	(void)lz_session_finish(s);
	end_session_requests(hc, s);
	if (lz_session_drained(s))
		session_end(hc, s);
}

struct session_ctx {
	lz_hc *hc;
	const char *id;
};

static int exec_staged(void *ctxp, const struct lz_pidref *id, int pidfd, struct lz_err *err)
{
	(void)pidfd;
	struct session_ctx *c = ctxp;
	return fault_after("session-stage", lz_dstore_session_stage_exec(c->hc->store, c->hc->gen, c->id, id, err));
}

static void free_vectorp(char ***v)
{
	free(*v);
}

static void free_envp(char ***v)
{
	lz_bundle_env_free(*v);
}

/* Spec 3.3: the session's Session Request Capability joins its guest
 * environment, naming it to the escalation mailbox. */
static int add_capability(lz_hc *hc, const struct lz_session *s, char ***env, struct lz_err *err)
{
	uint8_t session_id[LZ_ESC_ID_LEN];
	size_t n = 0;
	char *var = malloc(sizeof(LZ_ESC_CAPABILITY_ENV) + 1 + 2 * LZ_ESC_CAPABILITY_MAX + 1);
	if (var == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	int r = lz_unhex(s->id, session_id, sizeof(session_id));
	size_t prefix = sizeof(LZ_ESC_CAPABILITY_ENV); /* the name and '=' */
	memcpy(var, LZ_ESC_CAPABILITY_ENV "=", prefix);
	if (r >= 0)
		r = lz_escalation_capability_hex(hc->esc, session_id, var + prefix, 2 * LZ_ESC_CAPABILITY_MAX + 1);
	while ((*env)[n] != NULL)
		n++;
	char **grown = r < 0 ? NULL : realloc(*env, (n + 2) * sizeof(char *));
	if (grown == NULL) {
		free(var);
		return lz_err_set(err, r < 0 ? -r : ENOMEM, "the session's request capability: %s",
				  strerror(r < 0 ? -r : ENOMEM));
	}
	grown[n] = var;
	grown[n + 1] = NULL;
	*env = grown;
	return 0;
}

/* The rest of spec 3.4's acquisition once the exec client runs and, for
 * a terminal (guest non-NULL), its guest leader is known: one transaction
 * commits the exec client and marks the session running, then Welcome. */
static int session_running(lz_hc *hc, struct lz_session *s, const struct lz_dstore_guest *guest,
			   struct lz_err *err)
{
	int r = fault_after("session-commit", lz_dstore_session_commit_running(hc->store, hc->gen, s->id,
									      &s->exec.id, guest, err));
	if (r < 0)
		return r;
	lz_session_started(s, &s->exec);
	hc->ever_served = true;
	struct lz_wire_msg welcome = { .type = LZ_WIRE_WELCOME,
				       .welcome = { .protocol = LZ_WIRE_PROTOCOL, .generation = hc->gen } };
	(void)lz_unhex(s->id, welcome.welcome.session_id, 16);
	(void)lz_wire_send(s->tls, &welcome, NULL, 0, LZ_SESSION_DRAIN_MS, NULL);
	return 0;
}

/* The sessions directory watched for the PID files runsc exec writes
 * once the guest runs (the leader of a terminal session, the end of a
 * process document's life). */
static int watch_sessions(lz_hc *hc, struct lz_err *err)
{
	if (hc->leader_watch >= 0)
		return 0;
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/self/fd/%d", hc->gendir.sessions);
	_cleanup_close_ int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0 || inotify_add_watch(fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO) < 0)
		return lz_err_set(err, errno, "watching for the guest leader: %s", strerror(errno));
	hc->leader_watch = TAKE_FD(fd);
	return 0;
}

/* Spec 3.3: a session without a terminal runs at once; its process
 * document goes once runsc exec's PID file shows the guest ran. */
static void forget_process_doc(lz_hc *hc, struct lz_session *s)
{
	size_t slot = (size_t)(s - hc->sessions);
	char file[SESSION_FILE_MAX];
	struct stat st;
	session_file(file, s->id, "pid");
	if (!hc->doc_pending[slot] || fstatat(hc->gendir.sessions, file, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	session_file(file, s->id, "json");
	(void)unlinkat(hc->gendir.sessions, file, 0);
	hc->doc_pending[slot] = false;
}

/* A starting terminal session whose guest leader runsc exec has written
 * now goes on running (runsc exec with a terminal makes the guest a
 * session and process-group leader, so its group is its PID; runsc
 * exposes no start time: it stays 0, negative evidence only). 0 also
 * while it is still awaited; -ETIMEDOUT past leader_by. */
static int leader_arrived(lz_hc *hc, struct lz_session *s, struct lz_err *err)
{
	char file[SESSION_FILE_MAX], pidfile[SESSION_FILE_MAX];
	session_file(file, s->id, "json");
	session_file(pidfile, s->id, "pid");
	struct lz_dstore_guest guest = { 0 };
	/* Test builds: the leader shows 3 s late (a sandbox too busy to run it). */
	bool held = lz_test_fault("guest-leader-late") &&
		    lz_remaining_ms(s->leader_by - GUEST_LEADER_TIMEOUT_MS + 3000) > 0;
	if (held || lz_gendir_session_pid(&hc->gendir, pidfile, 0, &guest.leader_pid, err) < 0) {
		if (lz_remaining_ms(s->leader_by) > 0)
			return 0;
		s->leader_by = 0;
		return lz_err_set(err, ETIMEDOUT, "the guest process did not start");
	}
	s->leader_by = 0;
	guest.pgid = guest.leader_pid;
	(void)unlinkat(hc->gendir.sessions, file, 0); /* read: the guest runs */
	return session_running(hc, s, &guest, err);
}

/* Spec 3.4 session acquisition: intent, the exec client through the
 * broker (staged before release), the guest leader, one transaction that
 * commits the exec client and marks the session running, then Welcome. A
 * command without a terminal gets the client's own standard streams (bytes
 * and EOF pass unmodified); a terminal session a PTY the HC owns. */
static int session_start(lz_hc *hc, struct lz_session *s, const struct lz_wire_run_command *run, const int fds[3],
			 struct lz_err *err)
{
	_cleanup_(free_vectorp) char **argv = NULL;
	_cleanup_(free_envp) char **env = NULL;
	_cleanup_free_ char *json = NULL;
	_cleanup_close_ int slave = -EBADF;
	char file[SESSION_FILE_MAX], pidfile[SESSION_FILE_MAX], process[4300], root[4300], pidarg[4300], gen[4097];
	struct lz_broker_child exec = LZ_BROKER_CHILD_INIT;
	int r;

	/* A join records its session as a launch records its generation: it
	 * is refused the same way where there is no room for that. */
	if ((r = check_domain_space(hc->cfg, err)) < 0 || (r = check_runtime_space(hc, err)) < 0 ||
	    (r = lz_guestcmd_build(run, lz_bundle_guest_env(hc->cfg), &argv, &env, err)) < 0 ||
	    (r = fault_after("session-intent", lz_dstore_session_begin(hc->store, hc->gen, s->id, err))) < 0 ||
	    (r = add_capability(hc, s, &env, err)) < 0)
		return r;
	if (run->terminal && (r = lz_session_open_pty(s, run->rows, run->cols, &slave, err)) < 0)
		return r;
	struct lz_oci_process proc = { .argv = argv, .env = env, .cwd = "/workspace", .terminal = run->terminal };
	if ((r = lz_ocispec_process_json(&proc, &json, err)) < 0)
		return r;
	session_file(file, s->id, "json");
	session_file(pidfile, s->id, "pid");
	r = lz_file_create(hc->gendir.sessions, file, json, strlen(json), 0600, LZ_RESOLVE_OWNED, err);
	explicit_bzero(json, strlen(json)); /* it holds environment values */
	if (r < 0)
		return r;
	(void)lz_gendir_label(&hc->gendir, "", gen, sizeof(gen));
	snprintf(process, sizeof(process), "--process=%ssessions/%s", gen, file);
	snprintf(pidarg, sizeof(pidarg), "--internal-pid-file=%ssessions/%s", gen, pidfile);
	snprintf(root, sizeof(root), "--root=%srunsc", gen);
	char *exec_argv[] = { "runsc", root, "exec", process, pidarg, hc->container_id, NULL };
	struct lz_spawn spawn = { .label = "runsc exec", .exe_fd = hc->runsc.fd, .argv = exec_argv,
				  .stdin_fd = s->tty ? slave : fds[0],
				  .stdout_fd = s->tty ? slave : fds[1],
				  .stderr_fd = s->tty ? slave : fds[2],
				  /* The PTY is runsc exec's controlling terminal, so the
				   * line discipline's signals reach it and it forwards
				   * them to the guest's foreground group. */
				  .ctty = s->tty };
	struct session_ctx ctx = { hc, s->id };
	/* Fact 6: runsc exec reaches the sandbox only from the RS's
	 * namespaces; it joins them through the RS's pidfd. */
	struct lz_broker_spec spec = { .label = "runsc exec", .comm = "lz-exec-client", .join_pidfd = hc->rs.pidfd,
				       .join_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID,
				       .exec = &spawn, .staged = exec_staged, .ctx = &ctx };
	if ((r = lz_broker_spawn(&spec, &exec, err)) < 0)
		return r;
	s->exec = exec; /* from here the slot's reset kills it */
	lz_close_fdp(&slave);
	if (!s->tty) {
		hc->doc_pending[s - hc->sessions] = true;
		if ((r = watch_sessions(hc, err)) < 0)
			return r;
		forget_process_doc(hc, s);
		return session_running(hc, s, NULL, err);
	}
	/* Spec 3.4 steps 3-4: the guest leader is known before any terminal
	 * event is admitted. runsc exec writes it when the guest runs (tens of
	 * milliseconds, longer in a busy sandbox): the loop serves the other
	 * sessions meanwhile (leader_arrived). */
	if ((r = watch_sessions(hc, err)) < 0)
		return r;
	s->leader_by = lz_now_ms() + GUEST_LEADER_TIMEOUT_MS;
	return leader_arrived(hc, s, err);
}

/* A control connection refused before it is a session (spec 3.3): the
 * reason goes to hc.log, nothing else changes. */
static void refuse_connection(lz_hc *hc, struct lz_session *s, const char *reason)
{
	log_line("control connection refused: %s", reason);
	session_end(hc, s);
}

/* The TLS handshake, then what the peer is (session/admission.h). */
static void admission_step(lz_hc *hc, struct lz_session *s, uint8_t *buf)
{
	struct lz_err err = { 0, "" };
	int r;
	if (s->phase == LZ_SESSION_HANDSHAKE) {
		if ((r = lz_tlschan_handshake_step(s->tls, &err)) == 0)
			return;
		if (r > 0 && (r = lz_admission_admit(hc->admission, s->tls, &err)) < 0) {
			/* The peer speaks the wire protocol from here: tell it why. */
			s->phase = LZ_SESSION_ADMITTED;
			lz_session_refuse(s, -r, err.msg);
		}
		if (r < 0)
			return refuse_connection(hc, s, err.msg);
		s->phase = r == LZ_ADMISSION_CLIENT ? LZ_SESSION_ADMITTED : LZ_SESSION_ENROLLING;
		return;
	}
	if (s->phase == LZ_SESSION_ENROLLING) {
		if ((r = lz_admission_enroll(hc->admission, s->tls, buf, &err)) == -EAGAIN)
			return;
		if (r < 0)
			return refuse_connection(hc, s, err.msg);
		s->phase = LZ_SESSION_ENROLLED;
		return;
	}
	/* Enrolled: the peer's end is all that may follow. */
	size_t n_fds = 0;
	ssize_t n = lz_tlschan_recv(s->tls, buf, LZ_WIRE_MAX, NULL, 0, &n_fds, &err);
	if (n == -EAGAIN)
		return;
	if (n != -EPIPE)
		return refuse_connection(hc, s, n >= 0 ? "an operation on an enrollment connection" : err.msg);
	session_end(hc, s);
}

static void client_message(lz_hc *hc, struct lz_session *s, uint8_t *buf)
{
	if (s->phase != LZ_SESSION_ADMITTED)
		return admission_step(hc, s, buf);
	struct lz_wire_msg m;
	int fds[LZ_WIRE_MAX_FDS];
	size_t n_fds = 0;
	struct lz_err err = { 0, "" };
	int r = lz_wire_recv(s->tls, buf, LZ_WIRE_MAX, &m, fds, LZ_WIRE_MAX_FDS, &n_fds, &err);
	if (r == -EAGAIN)
		return;
	if (r < 0) {
		if (s->running)
			lz_session_client_gone(s);
		else
			session_end(hc, s);
		return;
	}
	if (!s->greeted) {
		if (m.type != LZ_WIRE_HELLO || m.hello.protocol != LZ_WIRE_PROTOCOL ||
		    memcmp(m.hello.domain_id, hc->domain_id, 32) != 0)
			lz_session_refuse(s, EPROTO, "not a client of this Domain");
		else if (memcmp(m.hello.fingerprint, hc->fingerprint, 32) != 0)
			lz_session_refuse(s, ESTALE,
					  "this Domain is running with a different configuration (Configuration "
					  "Fingerprint differs); end its sessions, then launch again");
		else
			s->greeted = true;
		if (!s->greeted)
			session_end(hc, s);
	} else if (!s->running && s->exec.pidfd < 0 && m.type == LZ_WIRE_RUN_COMMAND) {
		if (n_fds != (m.run.terminal ? 0 : LZ_WIRE_STDIO_FDS)) {
			lz_session_refuse(s, EPROTO, "a command needs its three standard streams, or a terminal");
			session_end(hc, s);
		} else if ((r = session_start(hc, s, &m.run, fds, &err)) < 0) {
			lz_session_refuse(s, -r, err.msg);
			session_end(hc, s);
		}
	} else if (lz_session_event(s, &m) == LZ_SESSION_UNEXPECTED) {
		lz_session_refuse(s, EPROTO, "unexpected message");
		if (s->running)
			lz_session_client_gone(s);
		else
			session_end(hc, s);
	}
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	lz_wire_msg_release(&m);
}

#define ACCEPT_PAUSE_MS 100

static void accept_client(lz_hc *hc)
{
	int fd = accept4(hc->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			hc->accept_paused_until = lz_now_ms() + ACCEPT_PAUSE_MS;
			if (!hc->accept_pause_logged)
				log_line("control connections wait: %s (accepted again every %d ms)", strerror(errno),
					 ACCEPT_PAUSE_MS);
			hc->accept_pause_logged = true;
		}
		return;
	}
	/* Spec 3.3: from the developer's UID beneath the host-private
	 * directory; the identity is the TLS's, never the peer's PID. */
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
		log_line("control connection refused: not from the developer's UID");
		close(fd);
		return;
	}
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
		struct lz_session *s = &hc->sessions[i];
		if (lz_session_busy(s))
			continue;
		struct lz_tlschan *tls = NULL;
		struct lz_err err = { 0, "" };
		if (lz_admission_channel(hc->admission, fd, &tls, &err) < 0) {
			log_line("%s", err.msg);
			close(fd);
			return;
		}
		lz_session_connected(s, fd, tls);
		return;
	}
	log_line("control connection refused: too many sessions in this Domain");
	close(fd);
}

/* ---- host escalation (spec 3.8) --------------------------------------------- */

/* The host process's environment (docs/escalation.md): the developer's
 * identity and home from the password database, a fixed PATH and locale,
 * and the profile's environment references; nothing of the HC's own. */
static char **host_env(const lz_config *cfg, const struct lz_config_profile *p)
{
	const struct passwd *pw = getpwuid(getuid());
	size_t n = 0, cap = 6 + p->n_env;
	char **env = calloc(cap, sizeof(char *));
	if (env == NULL || pw == NULL)
		goto fail;
	if (asprintf(&env[n++], "PATH=/usr/local/bin:/usr/bin:/bin") < 0 ||
	    asprintf(&env[n++], "HOME=%s", pw->pw_dir) < 0 || asprintf(&env[n++], "USER=%s", pw->pw_name) < 0 ||
	    asprintf(&env[n++], "LOGNAME=%s", pw->pw_name) < 0 || asprintf(&env[n++], "LANG=C.UTF-8") < 0)
		goto fail;
	for (size_t i = 0; i < p->n_env; i++)
		if (asprintf(&env[n++], "%s=%s", p->env[i].name, lz_config_env_value(cfg, i)) < 0)
			goto fail;
	return env;
fail:
	if (env != NULL) {
		env[n > 0 ? n - 1 : 0] = NULL; /* asprintf leaves a failed slot undefined */
		lz_bundle_env_free(env);
	}
	return NULL;
}

static void notice(struct lz_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(struct lz_session *s, const char *fmt, ...)
{
	char raw[LZ_ERR_MSG_MAX + 128], safe[LZ_ESCAPE_MAX(sizeof(raw)) + 8];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	size_t n = lz_escape(raw, strlen(raw), safe, sizeof(safe) - 4);
	memcpy(safe + n, "\r\n", 3);
	lz_session_notice(s, safe, n + 2);
}

/* The live session of id: its slot, -2 while it is still starting (its
 * guest may ask before the coordinator has seen it run), -1 none. */
static int find_session(lz_hc *hc, const uint8_t id[LZ_ESC_ID_LEN])
{
	char hex[2 * LZ_ESC_ID_LEN + 1];
	lz_hex(id, LZ_ESC_ID_LEN, hex);
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
		const struct lz_session *s = &hc->sessions[i];
		if (s->release != LZ_SESSION_LIVE || strcmp(s->id, hex) != 0)
			continue;
		if (s->running)
			return (int)i;
		if (s->leader_by)
			return -2;
	}
	return -1;
}

static void escalation_not_started(void *ctx, int slot, const char *why)
{
	lz_hc *hc = ctx;
	if (slot < 0 || slot >= LZ_HC_MAX_SESSIONS)
		return;
	struct lz_session *s = &hc->sessions[slot];
	/* A notice would take down a prompt shown since (the requester gets
	 * the reason as its result, and hc.log has it). */
	if (s->release == LZ_SESSION_LIVE && s->tty && !s->prompting && hc->prompt_job[slot] < 0)
		notice(s, "lazaret: the host command did not start: %s", why);
}

static void approve(lz_hc *hc, size_t job, int slot, uint32_t verdict, const struct lz_path *exe)
{
	struct lz_err err = { 0, "" };
	if (hc->host_env == NULL && (hc->host_env = host_env(hc->cfg, hc->profile)) == NULL) {
		lz_escalation_deny(hc->esc, job, "the coordinator could not build the host environment");
		return;
	}
	/* a failure reaches the session's terminal by escalation_not_started */
	(void)lz_escalation_approve(hc->esc, job, verdict, exe, lz_config_workspace(hc->cfg)->fd, hc->host_env, slot,
				    &err);
}

/* Whether a prompted request's executable (NULL: the request no longer
 * waits) is refused, before the prompt and again at the answer (why says
 * why): the path as written, by its text alone. Nothing on the host is
 * looked up for the sandbox before the developer answers: a lookup could
 * wait on a hung mount with every session's terminal, or have an
 * automounter reach a host the sandbox named. The approval then opens
 * that path with no symbolic link in it (escalation.h), so the object run
 * is the one the path names. */
static bool executable_refused(lz_hc *hc, const char *path, struct lz_err *why)
{
	*why = (struct lz_err){ 0, "" };
	if (path == NULL)
		return lz_err_set(why, ESTALE, "the request is no longer waiting") < 0;
	if (lz_path_grammar(path, strlen(path), why) == 0 && lz_config_host_executable_allowed(hc->cfg, path, why) == 0)
		(void)other_domains_executable_allowed(hc, path, why);
	return why->code != 0;
}

/* route->text says why. */
static bool prompted_executable_denied(lz_hc *hc, const char *path, struct lz_hc_route *route)
{
	struct lz_err why;
	if (!executable_refused(hc, path, &why))
		return false;
	snprintf(route->text, sizeof(route->text), "%s", why.msg); /* escaped where it is shown */
	return true;
}

/* Spec 3.8: each verified request to its route; the router decides, the
 * checks here bound what it can decide. */
static void route_requests(lz_hc *hc, lz_hc_router *router, void *ctx)
{
	struct lz_esc_route rq;
	struct lz_esc_rule rules[64];
	size_t n_rules = hc->profile->n_rules < 64 ? hc->profile->n_rules : 64;
	for (size_t i = 0; i < n_rules; i++)
		rules[i] = (struct lz_esc_rule){ .executable = lz_config_executable(hc->cfg, i)->canonical,
						 .args = hc->profile->rules[i].args,
						 .n_args = hc->profile->rules[i].n_args };
	static struct lz_hc_route route;
	size_t later[LZ_ESC_MAX_JOBS], n_later = 0;
	while (lz_escalation_next_route(hc->esc, &rq)) {
		int slot = find_session(hc, rq.session_id);
		if (slot == -2) {
			later[n_later++] = rq.job; /* routed once its session runs */
			continue;
		}
		struct lz_session *s = slot >= 0 ? &hc->sessions[slot] : NULL;
		struct lz_hc_route_query q = {
			.profile = hc->profile->name, .session_id = s ? s->id : "", .terminal = s && s->tty,
			.prompt_busy = s && hc->prompt_job[slot] >= 0, .rows = s ? s->rows : 0, .cols = s ? s->cols : 0,
			.rule = lz_escalation_rule_match(rules, n_rules, rq.argv, rq.argc), .argv = rq.argv,
			.argc = rq.argc, .cwd = rq.cwd, .why = rq.why,
		};
		route = (struct lz_hc_route){ .action = LZ_HC_ROUTE_DENY };
		int shown = 0;
		snprintf(route.text, sizeof(route.text), "denied");
		router(ctx, &q, &route);
		route.text[sizeof(route.text) - 1] = '\0';
		/* A prompted executable the sandbox could have written would run
		 * the sandbox's bytes with the developer's authority, whatever
		 * path they approved (rules are held to this at load). */
		if (route.action == LZ_HC_ROUTE_PROMPT && prompted_executable_denied(hc, rq.argv[0], &route))
			route.action = LZ_HC_ROUTE_DENY;
		/* A rule's executable was checked at launch, but a Domain
		 * launched since may have its workspace around it. */
		struct lz_err why = { 0, "" };
		if (route.action == LZ_HC_ROUTE_AUTO && q.rule >= 0 &&
		    other_domains_executable_allowed(hc, lz_config_executable(hc->cfg, (size_t)q.rule)->canonical,
						     &why) < 0) {
			snprintf(route.text, sizeof(route.text), "auto-approve %s", why.msg);
			route.action = LZ_HC_ROUTE_DENY;
		}
		int64_t quiet = s ? hc->prompt_pace[slot].quiet_until - lz_now_ms() : 0;
		if (route.action == LZ_HC_ROUTE_PROMPT && quiet > 0) {
			route.action = LZ_HC_ROUTE_DENY;
			snprintf(route.text, sizeof(route.text),
				 "this session's last %u prompts were refused or withdrawn: the developer is not "
				 "asked again for %lld s",
				 hc->prompt_pace[slot].refusals, (long long)(quiet + 999) / 1000);
		}
		if (s == NULL)
			lz_escalation_deny(hc->esc, rq.job, "the requesting session has ended");
		else if (route.action == LZ_HC_ROUTE_AUTO && q.rule >= 0)
			approve(hc, rq.job, slot, LZ_ESC_AUTO_APPROVED, lz_config_executable(hc->cfg, (size_t)q.rule));
		else if (route.action == LZ_HC_ROUTE_PROMPT && q.terminal && !q.prompt_busy &&
			 (shown = lz_session_prompt(s, route.text, strlen(route.text))) == 0) {
			lz_escalation_prompting(hc->esc, rq.job, slot);
			hc->prompt_job[slot] = (int)rq.job;
		} else
			lz_escalation_deny(hc->esc, rq.job,
					   route.action == LZ_HC_ROUTE_DENY ? route.text
					   : shown == -E2BIG
						   ? "the request does not fit the developer's terminal whole (too wide "
						     "or too many lines); a larger terminal, or an auto_approve rule"
						   : "the request cannot be shown");
	}
	for (size_t i = 0; i < n_later; i++)
		lz_escalation_route_later(hc->esc, later[i]);
}

/* Spec 3.8, DX-4: the developer's terminal stays theirs. A sandbox could
 * put up prompt after prompt, each the moment the last is refused or
 * withdrawn, holding every key of that terminal for the prompts: after a
 * second refusal in a row a session's requests are denied unseen for 2 s,
 * doubling to 60 s; an approval ends it. */
#define PROMPT_QUIET_MS 2000
#define PROMPT_QUIET_MAX_MS 60000

static void prompt_refused(lz_hc *hc, int slot)
{
	struct prompt_pace *p = &hc->prompt_pace[slot];
	if (p->refusals < 16)
		p->refusals++;
	int64_t quiet = p->refusals < 2 ? 0 : (int64_t)PROMPT_QUIET_MS << (p->refusals - 2);
	p->quiet_until = lz_now_ms() + (quiet < PROMPT_QUIET_MAX_MS ? quiet : PROMPT_QUIET_MAX_MS);
}

/* Prompts answered or withdrawn since the last turn. An approval is held
 * to the prompt's rules again: a Domain launched while it waited may have
 * made the executable's directory its workspace or a volume. */
static void settle_prompts(lz_hc *hc)
{
	size_t job;
	int slot;
	struct lz_err why;
	while ((slot = lz_escalation_next_withdrawn(hc->esc)) >= 0) {
		notice(&hc->sessions[slot], "lazaret: the request was cancelled in the sandbox");
		hc->prompt_job[slot] = -1;
		prompt_refused(hc, slot);
	}
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
		struct lz_session *s = &hc->sessions[i];
		int answer = hc->prompt_job[i] >= 0 ? lz_session_take_answer(s) : 0;
		if (answer == 0)
			continue;
		job = (size_t)hc->prompt_job[i];
		hc->prompt_job[i] = -1;
		if (!lz_escalation_prompt_is(hc->esc, job, (int)i))
			notice(s, "lazaret: that request is no longer waiting; nothing was run");
		else if (answer > 0 && executable_refused(hc, lz_escalation_executable(hc->esc, job), &why)) {
			notice(s, "lazaret: not run: %s", why.msg);
			lz_escalation_deny(hc->esc, job, why.msg);
		} else if (answer > 0) {
			notice(s, "lazaret: approved");
			hc->prompt_pace[i] = (struct prompt_pace){ 0 };
			approve(hc, job, (int)i, LZ_ESC_APPROVED, NULL);
		} else {
			notice(s, "lazaret: denied");
			prompt_refused(hc, (int)i);
			lz_escalation_deny(hc->esc, job, "denied by the developer");
		}
	}
}

/* The RS is gone or going: the reason it reported (its FAILED record, which
 * is all it writes unasked), else that it ended. */
static int rs_ended(lz_hc *hc, struct lz_err *err)
{
	_cleanup_free_ struct lz_rs_msg *m = malloc(sizeof(*m));
	if (m != NULL && lz_rs_recv(hc->control_fd, m, 0) == 0)
		note_rs_failure(hc, m);
	if (hc->rs_failure[0])
		return lz_err_set(err, EPIPE, "the sandbox is gone: %s", hc->rs_failure);
	return lz_err_set(err, EPIPE, "the Runtime Supervisor ended; the sandbox is gone");
}

/* runsc's own fatal errors exit 128. A runsc exec that lost its sandbox
 * fails so a moment before the RS reports the loss: such an exit is held
 * up to RS_LOSS_GRACE_MS (the other sessions served meanwhile), so that
 * the client hears why rather than runsc's message alone. */
#define RUNSC_FATAL_STATUS 128
#define RS_LOSS_GRACE_MS 500

static bool exec_failed_in_runsc(const struct lz_session *s)
{
	int status;
	return lz_broker_exited(&s->exec, &status) == 1 && status == RUNSC_FATAL_STATUS;
}

static void drain_leader_watch(lz_hc *hc)
{
	char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	while (read(hc->leader_watch, events, sizeof(events)) > 0)
		; /* which file closed does not matter: every awaited leader is read */
}

#define EXEC_ENDED_FIRST "the guest process did not start: runsc exec ended first"

static void start_failed(lz_hc *hc, struct lz_session *s, int code, const char *why)
{
	s->leader_by = 0;
	lz_session_refuse(s, code, why);
	session_end(hc, s);
}

/* A starting session's turn (leader_arrived): false when it ended here
 * (refused: its leader never came, or the commit failed). */
static bool start_awaited(lz_hc *hc, struct lz_session *s)
{
	struct lz_err err = { 0, "" };
	int r = leader_arrived(hc, s, &err);
	if (r < 0)
		start_failed(hc, s, -r, err.msg);
	return r >= 0;
}

int lz_hc_serve(lz_hc *hc, lz_hc_router *router, void *ctx, struct lz_err *err)
{
	if (no_batch(hc, "serve sessions", err) < 0)
		return -EBUSY;
	enum { FIXED = 5, MAX_FDS = FIXED + LZ_ESC_POLLFDS + LZ_SESSION_POLLFDS * LZ_HC_MAX_SESSIONS };
	struct pollfd pf[MAX_FDS];
	struct lz_session *owner[MAX_FDS];
	_cleanup_free_ uint8_t *buf = malloc(LZ_WIRE_MAX);
	int64_t started = lz_now_ms();
	int r = 0;
	if (buf == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if (hc->listen_fd < 0 || hc->rs_state != RS_RUNNING)
		return lz_err_set(err, EPROTO, "serving needs a published generation and its Runtime Supervisor");
	const char *refusal = NULL; /* what a session still running is told at the end */
	int stop = lz_stopreq_signal(); /* read again only when its descriptor says so */
	for (;;) {
		if (!sessions_active(hc) && (hc->ever_served || lz_remaining_ms(started + LZ_HC_IDLE_GRACE_MS) == 0))
			break;
		if (stop != 0) {
			/* An orderly end, not a loss: the generation is torn down
			 * and recorded stopped. */
			snprintf(err->msg, sizeof(err->msg),
				 "the Domain's Host Coordinator was told to stop (SIG%s); the sandbox was stopped",
				 sigabbrev_np(stop));
			refusal = err->msg;
			log_line("%s", err->msg);
			break;
		}
		size_t n = 0;
		int timeout = hc->ever_served ? -1 : lz_remaining_ms(started + LZ_HC_IDLE_GRACE_MS);
		int paused = hc->accept_paused_until > 0 ? lz_remaining_ms(hc->accept_paused_until) : 0;
		if (paused == 0)
			hc->accept_paused_until = 0;
		else if (timeout < 0 || paused < timeout)
			timeout = paused;
		pf[n++] = (struct pollfd){ .fd = paused > 0 ? -1 : hc->listen_fd, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = hc->control_fd, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = hc->rs.pidfd, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = hc->leader_watch, .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = lz_stopreq_fd(), .events = POLLIN };
		size_t n_esc = lz_escalation_pollfds(hc->esc, pf + n, &timeout);
		n += n_esc;
		size_t first_session = n;
		for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
			size_t k = lz_session_pollfds(&hc->sessions[i], pf + n, &timeout);
			for (size_t j = 0; j < k; j++)
				owner[n + j] = &hc->sessions[i];
			n += k;
		}
		if (poll(pf, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			r = lz_err_set(err, errno, "poll: %s", strerror(errno));
			refusal = err->msg;
			break;
		}
		/* A stop signal first: a host shutdown signals the RS too. */
		if (pf[4].revents && (stop = lz_stopreq_signal()) != 0)
			continue;
		if (pf[1].revents || pf[2].revents) {
			r = rs_ended(hc, err);
			refusal = err->msg;
			break;
		}
		lz_escalation_handle(hc->esc, pf + FIXED, n_esc);
		if (pf[3].revents) {
			drain_leader_watch(hc);
			for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
				forget_process_doc(hc, &hc->sessions[i]);
		}
		for (size_t i = first_session; i < n; i++) {
			struct lz_session *s = owner[i];
			if (!pf[i].revents)
				continue;
			if (s->end_by) {
				lz_session_drain(s);
				continue;
			}
			if (pf[i].fd == s->exec.pidfd) {
				/* A guest that ran and ended at once wrote its leader. */
				if (s->leader_by && !start_awaited(hc, s))
					continue;
				if (exec_failed_in_runsc(s)) {
					lz_session_hold_exit(s, RS_LOSS_GRACE_MS);
					continue;
				}
				if (s->leader_by) {
					start_failed(hc, s, EIO, EXEC_ENDED_FIRST);
					continue;
				}
				session_finish(hc, s);
			} else if (pf[i].fd == s->client) {
				if (pf[i].revents & POLLOUT)
					lz_session_flush_output(s);
				if (s->client >= 0 && (pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
					client_message(hc, s, buf);
			} else if (pf[i].fd == s->master) {
				if (pf[i].revents & POLLOUT)
					lz_session_flush_input(s);
				if (pf[i].revents & POLLIN)
					lz_session_read_master(s);
			}
		}
		/* Starts first: a request from a guest that just started is
		 * routed in the turn its session runs. */
		for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
			if (hc->sessions[i].leader_by)
				(void)start_awaited(hc, &hc->sessions[i]);
		route_requests(hc, router, ctx);
		settle_prompts(hc);
		for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++) {
			if (lz_session_exit_due(&hc->sessions[i]) && hc->sessions[i].leader_by) {
				start_failed(hc, &hc->sessions[i], EIO, EXEC_ENDED_FIRST);
				continue;
			}
			if (lz_session_exit_due(&hc->sessions[i])) {
				session_finish(hc, &hc->sessions[i]);
				continue;
			}
			if (hc->sessions[i].end_by && lz_session_drained(&hc->sessions[i])) {
				session_end(hc, &hc->sessions[i]);
				continue;
			}
			lz_session_advance_release(&hc->sessions[i]);
			if (lz_session_admission_overdue(&hc->sessions[i]))
				refuse_connection(hc, &hc->sessions[i], "not admitted within " LZ_SESSION_ADMIT_TEXT);
		}
		if (pf[0].revents & POLLIN)
			accept_client(hc);
	}
	/* No new sessions from here on: the socket goes before teardown. */
	withdraw(hc);
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
		if (lz_session_busy(&hc->sessions[i])) {
			if (hc->sessions[i].client >= 0 && refusal != NULL)
				lz_session_refuse(&hc->sessions[i], EPIPE, refusal);
			session_end(hc, &hc->sessions[i]);
		}
	return r;
}

/* ---- State Anchor reset (spec 3.9) ------------------------------------------------ */

static struct lz_anchor_reset anchor_reset_of(const lz_hc *hc)
{
	return (struct lz_anchor_reset){ .storage_root = lz_config_storage_root(hc->cfg),
					 .domain_root = lz_config_storage_domain(hc->cfg),
					 .domain_hex = hc->domain_hex,
					 .persistent = hc->profile->persistent_dirs,
					 .n_persistent = hc->profile->n_persistent_dirs };
}

int lz_hc_reset_plan(lz_hc *hc, const char *const *paths, size_t n, char ***ret_v, size_t *ret_n,
		     struct lz_err *err)
{
	struct lz_anchor_reset a = anchor_reset_of(hc);
	return lz_anchor_reset_plan(&a, paths, n, ret_v, ret_n, err);
}

int lz_hc_reset(lz_hc *hc, const char *const *planned, size_t n, struct lz_err *err)
{
	/* The exclusive lifecycle lock, and no generation of ours running. */
	if (hc->gen != 0)
		return lz_err_set(err, EBUSY, "a reset needs the Domain idle; this coordinator began a generation");
	if (no_batch(hc, "reset", err) < 0)
		return -EBUSY;
	/* Spec 3.3: on ambiguity nothing is touched; a lease or tree recovery
	 * could not prove gone may be a generation that still runs. */
	if (!hc->recovered)
		return lz_err_set(err, EPROTO, "a reset runs only after bootstrap recovery passed; nothing was reset");
	struct lz_anchor_reset a = anchor_reset_of(hc);
	return lz_anchor_reset_run(&a, planned, n, err);
}

int lz_hc_verify(lz_hc *hc, lz_domain_verify_report *report, void *ctx, struct lz_err *err)
{
	if (hc->gen != 0)
		return lz_err_set(err, EBUSY, "verification needs the Domain idle; this coordinator began a generation");
	struct lz_domain_verify v = { .storage_root = lz_config_storage_root(hc->cfg),
				      .domain_root = lz_config_storage_domain(hc->cfg),
				      .domain_hex = hc->domain_hex,
				      .store = hc->store,
				      .persistent = hc->profile->persistent_dirs,
				      .n_persistent = hc->profile->n_persistent_dirs };
	return lz_domain_verify(&v, report, ctx, err);
}

/* ---- end ------------------------------------------------------------------------ */

void lz_hc_close(lz_hc *hc)
{
	struct lz_err ignored;
	if (hc == NULL)
		return;
	for (size_t i = 0; i < LZ_HC_MAX_SESSIONS; i++)
		if (lz_session_busy(&hc->sessions[i]))
			session_end(hc, &hc->sessions[i]);
	withdraw(hc);
	/* A supervisor still running here means a failed start or stop: it
	 * takes its PID namespace (runsc and the sandbox) with it. */
	lz_broker_kill(&hc->rs);
	lz_close_fdp(&hc->control_fd);
	lz_close_fdp(&hc->leader_watch);
	struct lz_dstore_generation g;
	if (hc->store && hc->gen && lz_dstore_generation_get(hc->store, hc->gen, &g, &ignored) == 0) {
		if (g.state != LZ_DSTORE_GEN_STOPPED && g.state != LZ_DSTORE_GEN_FAILED)
			(void)lz_dstore_generation_set_state(hc->store, hc->gen, LZ_DSTORE_GEN_FAILED, &ignored);
		/* The diagnosis of a failed generation survives its tree. */
		if (g.state != LZ_DSTORE_GEN_STOPPED) {
			lz_gendir_salvage_log(&hc->gendir, hc->gen, "runsc.log", STDERR_FILENO);
			lz_gendir_salvage_log(&hc->gendir, hc->gen, "slirp4netns.log", STDERR_FILENO);
		}
	}
	lz_broker_forget_in_children(NULL, NULL);
	lz_escalation_free(hc->esc); /* host processes reaped, keys wiped */
	lz_admission_free(hc->admission); /* after withdraw: publication first (spec 3.3) */
	lz_bundle_env_free(hc->host_env);
	lz_gendir_remove(&hc->gendir);
	lz_close_fdp(&hc->rootfs_fd);
	lz_path_release(&hc->runsc);
	lz_dstore_close(hc->store);
	lz_close_fdp(&hc->lock_fd);
	explicit_bzero(hc->canary_key, sizeof(hc->canary_key));
	free(hc);
}
