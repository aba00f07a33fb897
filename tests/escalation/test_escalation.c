/* Host Escalation jobs (spec 3.8) through a real mailbox and real signed
 * records: the developer's answer applies only to the request its prompt
 * shows. A cancellation and the acknowledgement that ends the request
 * may arrive in one batch, and the freed slot may take another request
 * before the coordinator's next turn. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#define FUSE_USE_VERSION 31
#include <fuse3/fuse.h>

#include "lz_test.h"

#include "escalation/escalation.h"
#include "escalation/record.h"
#include "escalation/trustanchor.h"
#include "config/domain.h"

struct fx {
	char dir[64];
	int dir_fd;
	struct lz_escalation *esc;
	const struct lz_trust_anchor *ta;
	uint8_t cap[LZ_ESC_CAPABILITY_MAX];
	size_t cap_len;
	char marker[128]; /* made by the host command the sandbox wants run */
};

static const uint8_t session_id[LZ_ESC_ID_LEN] = { 0x5e, 0x55 };

static void put(struct fx *f, const char *name, const struct lz_esc_record *rec)
{
	static uint8_t buf[LZ_ESC_RECORD_MAX];
	size_t len;
	assert_int_equal(lz_esc_seal(rec, f->ta->sandbox, buf, sizeof(buf), &len), 0);
	char path[256];
	snprintf(path, sizeof(path), "%s/escalation/outbox/%s", f->dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void put_request(struct fx *f, const char *name, uint8_t id, char *const *argv, size_t argc)
{
	struct lz_esc_record rec = { .kind = LZ_ESC_REQUEST, .scope = f->ta->scope };
	rec.request.request_id[0] = id;
	rec.request.capability = (struct lz_esc_bytes){ f->cap, f->cap_len };
	rec.request.argc = argc;
	for (size_t i = 0; i < argc; i++)
		rec.request.argv[i] = (struct lz_esc_bytes){ (const uint8_t *)argv[i], strlen(argv[i]) };
	rec.request.cwd = (struct lz_esc_bytes){ (const uint8_t *)"/workspace", 10 };
	put(f, name, &rec);
}

/* The sandbox cancels request id and acknowledges its terminal result
 * (sequence 1: no chunks), all in one batch; several acknowledgements,
 * so that one follows the cancellation whatever the directory's order. */
static void cancel_and_ack(struct fx *f, uint8_t id)
{
	static const char *const names[] = { "a1", "a2", "c", "z9" };
	for (size_t i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%s-%02x", names[i], id);
		struct lz_esc_record rec = { .scope = f->ta->scope };
		if (names[i][0] == 'c') {
			rec.kind = LZ_ESC_CANCELLATION;
			rec.cancellation.request_id[0] = id;
		} else {
			rec.kind = LZ_ESC_ACKNOWLEDGEMENT;
			rec.acknowledgement.request_id[0] = id;
			rec.acknowledgement.sequence = 1;
		}
		put(f, name, &rec);
	}
}

/* One wake of the coordinator's loop for the mailbox: one batch. */
static void wake(struct fx *f)
{
	struct pollfd pf[LZ_ESC_POLLFDS];
	int timeout = -1;
	size_t n = lz_escalation_pollfds(f->esc, pf, &timeout);
	for (size_t i = 0; i < n; i++)
		pf[i].revents = 0;
	pf[0].revents = POLLIN;
	lz_escalation_handle(f->esc, pf, n);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/lz-test-esc.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->dir_fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dir_fd >= 0);
	uint8_t domain[LZ_ESC_DOMAIN_ID_LEN] = { 1 };
	struct lz_err err = { 0, "" };
	int keeper = open(LZ_KEEPER_PATH, O_PATH | O_CLOEXEC);
	assert_true(keeper >= 0);
	assert_int_equal(lz_escalation_create(f->dir_fd, domain, 7, keeper, &f->esc, &err), 0);
	close(keeper);
	f->ta = lz_escalation_anchor(f->esc);
	assert_int_equal(lz_trust_anchor_capability(f->ta, session_id, f->cap, &f->cap_len), 0);
	snprintf(f->marker, sizeof(f->marker), "%s/ran", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_escalation_free(f->esc);
	close(f->dir_fd);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

/* A request of argv, routed and shown to session slot: its job. */
static size_t prompted(struct fx *f, const char *name, uint8_t id, char *const *argv, size_t argc, int slot)
{
	struct lz_esc_route rq;
	put_request(f, name, id, argv, argc);
	wake(f);
	assert_true(lz_escalation_next_route(f->esc, &rq));
	lz_escalation_prompting(f->esc, rq.job, slot);
	return rq.job;
}

static int approve(struct fx *f, size_t job)
{
	char *env[] = { "PATH=/usr/bin:/bin", NULL };
	struct lz_err err = { 0, "" };
	return lz_escalation_approve(f->esc, job, LZ_ESC_APPROVED, NULL, f->dir_fd, env, 0, &err);
}

/* stderr (where the escalation logs) into <dir>/stderr until
 * stderr_restore(saved); the log's path in log. */
static int stderr_to_file(struct fx *f, char log[128])
{
	snprintf(log, 128, "%s/stderr", f->dir);
	fflush(stderr);
	int saved = dup(2), out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(saved >= 0 && out >= 0);
	assert_int_equal(dup2(out, 2), 2);
	close(out);
	return saved;
}

static void stderr_restore(int saved)
{
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
}

/* How many lines of the log hold needle. */
static int lines_with(const char *log, const char *needle)
{
	FILE *in = fopen(log, "r");
	assert_non_null(in);
	char line[1200];
	int n = 0;
	while (fgets(line, sizeof(line), in) != NULL)
		n += strstr(line, needle) != NULL;
	fclose(in);
	return n;
}

/* The prompt of a request the sandbox cancels goes down even when its
 * job ended in the same batch, and an answer to it approves nothing: not
 * the request that took its slot since. */
static void test_lz_escalation__an_answer_applies_only_to_the_request_shown(void **state)
{
	struct fx *f = *state;
	struct lz_esc_route rq;
	char *shown_argv[] = { "/usr/bin/true", "status" };
	size_t shown = prompted(f, "r1", 0xa1, shown_argv, 2, 0);
	assert_true(lz_escalation_prompt_is(f->esc, shown, 0));
	assert_false(lz_escalation_prompt_is(f->esc, shown, 1));
	assert_int_equal(lz_escalation_next_withdrawn(f->esc), -1);

	cancel_and_ack(f, 0xa1);
	wake(f);
	assert_int_equal(lz_escalation_next_withdrawn(f->esc), 0);
	assert_int_equal(lz_escalation_next_withdrawn(f->esc), -1);
	assert_false(lz_escalation_prompt_is(f->esc, shown, 0));

	char *other_argv[] = { "/usr/bin/touch", f->marker };
	put_request(f, "r2", 0xb2, other_argv, 2);
	wake(f);
	assert_true(lz_escalation_next_route(f->esc, &rq));
	assert_int_equal(rq.job, shown); /* the freed slot */
	assert_false(lz_escalation_prompt_is(f->esc, shown, 0));
	assert_int_equal(approve(f, shown), -ESTALE);
	usleep(100 * 1000);
	assert_int_equal(access(f->marker, F_OK), -1);
	lz_escalation_deny(f->esc, rq.job, "another request of this session is waiting");
	assert_int_equal(approve(f, rq.job), -ESTALE);
}

/* An answer that comes after the request ended and nothing took its
 * slot is refused, not run from an empty slot. */
static void test_lz_escalation__an_answer_to_an_ended_request_runs_nothing(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/touch", f->marker };
	size_t job = prompted(f, "r3", 0xc3, argv, 2, 3);
	cancel_and_ack(f, 0xc3);
	wake(f);
	assert_int_equal(lz_escalation_next_withdrawn(f->esc), 3);
	assert_int_equal(approve(f, job), -ESTALE);
	lz_escalation_deny(f->esc, job, "late"); /* a no-op */
	usleep(100 * 1000);
	assert_int_equal(access(f->marker, F_OK), -1);
}

/* The request shown, answered: it runs. */
static void test_lz_escalation__the_request_shown_runs_when_approved(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/touch", f->marker };
	size_t job = prompted(f, "r4", 0xd4, argv, 2, 0);
	assert_true(lz_escalation_prompt_is(f->esc, job, 0));
	assert_int_equal(approve(f, job), 0);
	for (int i = 0; i < 300 && access(f->marker, F_OK) != 0; i++)
		usleep(10 * 1000);
	assert_int_equal(access(f->marker, F_OK), 0);
}

/* The coordinator's loop, for ms milliseconds. */
static void spin(struct fx *f, int ms)
{
	for (int waited = 0; waited < ms; waited += 10) {
		struct pollfd pf[LZ_ESC_POLLFDS];
		int timeout = -1;
		size_t n = lz_escalation_pollfds(f->esc, pf, &timeout);
		(void)poll(pf, n, timeout < 0 || timeout > 10 ? 10 : timeout);
		lz_escalation_handle(f->esc, pf, n);
	}
}

static void inbox_path(const struct fx *f, char *out, size_t cap, const char *name)
{
	assert_true((size_t)snprintf(out, cap, "%s/escalation/inbox/%s", f->dir, name) < cap);
}


static bool in_inbox(struct fx *f, const char *hex, const char *suffix)
{
	char name[160], p[256];
	snprintf(name, sizeof(name), "%s.%s", hex, suffix);
	inbox_path(f, p, sizeof(p), name);
	return access(p, F_OK) == 0;
}

/* Reads inbox/<hex>.<suffix>, a record of kind, into *rec (its bytes in
 * a static buffer). */
static void open_posted(struct fx *f, const char *hex, const char *suffix, enum lz_esc_kind kind,
			struct lz_esc_record *rec)
{
	char name[160], p[256];
	static uint8_t buf[LZ_ESC_RECORD_MAX];
	snprintf(name, sizeof(name), "%s.%s", hex, suffix);
	assert_true((size_t)snprintf(p, sizeof(p), "%s/escalation/inbox/%s", f->dir, name) < sizeof(p));
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail_msg("no %s", name);
	ssize_t len = read(fd, buf, sizeof(buf));
	close(fd);
	assert_true(len > 0);
	assert_int_equal(lz_esc_open(buf, (size_t)len, LZ_ESC_KIND_BIT(kind), f->ta->coordinator_public, rec, NULL), 0);
}

/* Opens inbox/<hex>.<seq> as a chunk and checks its sequence and bytes. */
static void assert_chunk(struct fx *f, const char *hex, uint64_t seq, const char *data)
{
	char suffix[24];
	struct lz_esc_record rec;
	snprintf(suffix, sizeof(suffix), "%llu", (unsigned long long)seq);
	open_posted(f, hex, suffix, LZ_ESC_CHUNK, &rec);
	assert_int_equal(rec.chunk.sequence, seq);
	assert_int_equal(rec.chunk.data.n, strlen(data));
	assert_memory_equal(rec.chunk.data.p, data, strlen(data));
}

/* The one-argument request id_byte (its hex in hex) prompted and approved
 * with the escalation's log kept off the test's output, until its result
 * is posted (at most 3 s). */
static void approved_until_its_result(struct fx *f, const char *name, uint8_t id_byte, char **argv,
				      char hex[static 2 * LZ_ESC_ID_LEN + 1])
{
	uint8_t id[LZ_ESC_ID_LEN] = { id_byte };
	lz_hex(id, sizeof(id), hex);
	size_t job = prompted(f, name, id_byte, argv, 1, 0);
	char log[128];
	int saved = stderr_to_file(f, log);
	(void)approve(f, job);
	for (int i = 0; i < 300 && !in_inbox(f, hex, "result"); i++)
		spin(f, 10);
	stderr_restore(saved);
}

/* An approved command whose executable cannot be opened is refused, and
 * the requester hears so: the decision and the result say why, escaped
 * (its name is the sandbox's bytes, here not UTF-8, which a record's
 * message must be). */
static void test_lz_escalation__a_command_that_cannot_start_is_answered(void **state)
{
	struct fx *f = *state;
	char exe[] = "/nonexistent\xff\x1b[2J", hex[2 * LZ_ESC_ID_LEN + 1];
	char *argv[] = { exe };
	approved_until_its_result(f, "r5", 0xd5, argv, hex);
	struct lz_esc_record rec;
	open_posted(f, hex, "decision", LZ_ESC_DECISION, &rec);
	assert_int_equal(rec.decision.verdict, LZ_ESC_DENIED);
	assert_non_null(memmem(rec.decision.message.p, rec.decision.message.n, "\\xff\\e[2J", 9));
	open_posted(f, hex, "result", LZ_ESC_TERMINAL_RESULT, &rec);
	assert_int_equal(rec.result.outcome, LZ_ESC_REFUSED);
	assert_non_null(memmem(rec.result.message.p, rec.result.message.n, "did not start", 13));
}

/* An executable the kernel will not run (no format it knows) fails at its
 * exec, below the keeper: the result says it did not start, with the
 * exec's own reason, not that it started and exited 127. */
static void test_lz_escalation__an_exec_failure_below_the_keeper_is_not_a_start(void **state)
{
	struct fx *f = *state;
	char exe[160], hex[2 * LZ_ESC_ID_LEN + 1];
	snprintf(exe, sizeof(exe), "%s/not-a-program", f->dir);
	int fd = open(exe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "plain text\n", 11), 11);
	close(fd);
	char *argv[] = { exe };
	approved_until_its_result(f, "r4", 0xd4, argv, hex);
	struct lz_esc_record rec;
	open_posted(f, hex, "result", LZ_ESC_TERMINAL_RESULT, &rec);
	assert_int_equal(rec.result.outcome, LZ_ESC_FAILED);
	assert_non_null(memmem(rec.result.message.p, rec.result.message.n, "did not start", 13));
	assert_non_null(memmem(rec.result.message.p, rec.result.message.n, "Exec format error", 17));
}

/* Request id (its hex in hex), routed to a prompt and approved, with the
 * posting of its first chunk blocked by a directory where the posting's
 * temporary file goes (as a full file system would); the blocker's path
 * in blocker. */
static void approved_with_chunk_1_blocked(struct fx *f, uint8_t id_byte, char *const *argv, size_t argc,
					  char hex[static 2 * LZ_ESC_ID_LEN + 1], char blocker[static 256])
{
	char name[160], request[16];
	uint8_t id[LZ_ESC_ID_LEN] = { id_byte };
	snprintf(request, sizeof(request), "r%02x", id_byte);
	size_t job = prompted(f, request, id_byte, argv, argc, 0);
	lz_hex(id, sizeof(id), hex);
	snprintf(name, sizeof(name), ".%s.1", hex);
	inbox_path(f, blocker, 256, name);
	assert_int_equal(mkdir(blocker, 0700), 0);
	assert_int_equal(approve(f, job), 0);
}

/* A record the inbox does not take (its file system full; here a
 * directory where the posting's temporary file goes) is kept and posted
 * again: the client reads a request's records in sequence, so nothing
 * after it is posted first (the command goes on writing meanwhile), and
 * no output is lost. */
static void test_lz_escalation__a_record_the_inbox_does_not_take_is_posted_again(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/dash", "-c", "echo a; sleep 0.3; echo b" };
	char hex[2 * LZ_ESC_ID_LEN + 1], blocker[256];
	approved_with_chunk_1_blocked(f, 0xe5, argv, 3, hex, blocker);
	spin(f, 1000);
	assert_false(in_inbox(f, hex, "1"));
	if (in_inbox(f, hex, "2") || in_inbox(f, hex, "result"))
		fail_msg("a record was posted before the chunk it follows");
	assert_int_equal(rmdir(blocker), 0);
	spin(f, 1000);
	assert_chunk(f, hex, 1, "a\n");
	assert_chunk(f, hex, 2, "b\n");
	assert_true(in_inbox(f, hex, "result"));
}

/* The sandbox cancels while a chunk waits for the inbox: the result
 * "cancelled" goes behind it, never before. */
static void test_lz_escalation__a_result_waits_behind_a_record_the_inbox_did_not_take(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/dash", "-c", "echo a; sleep 5" };
	char hex[2 * LZ_ESC_ID_LEN + 1], blocker[256];
	approved_with_chunk_1_blocked(f, 0xe7, argv, 3, hex, blocker);
	spin(f, 500);
	struct lz_esc_record rec = { .kind = LZ_ESC_CANCELLATION, .scope = f->ta->scope };
	rec.cancellation.request_id[0] = 0xe7;
	put(f, "cancel", &rec);
	wake(f);
	spin(f, 300);
	if (in_inbox(f, hex, "result"))
		fail_msg("the result was posted before the chunk it follows");
	assert_int_equal(rmdir(blocker), 0);
	spin(f, 500);
	assert_chunk(f, hex, 1, "a\n");
	assert_true(in_inbox(f, hex, "result"));
}

/* Wakes the loop and turns it (3 s at most) until a request is routed,
 * with stderr in log. */
static bool routed_after_wake(struct fx *f, char log[128])
{
	int saved = stderr_to_file(f, log);
	wake(f);
	struct lz_esc_route rq;
	bool routed = false;
	for (int i = 0; i < 300 && !(routed = lz_escalation_next_route(f->esc, &rq)); i++)
		spin(f, 10);
	stderr_restore(saved);
	return routed;
}

/* An outbox holding more than one wake takes is read to its end without
 * another write to it (a request behind 2,000 junk entries is routed),
 * and what is refused is logged a bounded number of times: hc.log lies
 * in the runtime directory every launch needs room in. */
static void test_lz_escalation__a_flooded_outbox_is_read_to_its_end_and_logged_in_bounds(void **state)
{
	struct fx *f = *state;
	char p[256], log[128];
	for (int i = 0; i < 2000; i++) {
		snprintf(p, sizeof(p), "%s/escalation/outbox/junk%04d", f->dir, i);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, "x", 1), 1);
		close(fd);
	}
	char *argv[] = { "/usr/bin/true" };
	put_request(f, "request", 0xf6, argv, 1);
	assert_true(routed_after_wake(f, log));
	int refused = lines_with(log, "refused");
	if (refused < 1 || refused > 64)
		fail_msg("%d refusal lines for 2,000 junk entries", refused);
}

/* Spec 3.8: no more than LZ_ESC_WINDOW chunks wait for acknowledgement,
 * even when stdout and stderr are both ready in every wake (both kept
 * full here, after one chunk alone: 1, 3, 5, 7, then one more only). */
static void test_lz_escalation__the_window_holds_with_both_streams_ready(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/dash", "-c",
			 "printf x; sleep 1; head -c 400000 /dev/zero >&2 & head -c 400000 /dev/zero; wait" };
	char hex[2 * LZ_ESC_ID_LEN + 1];
	uint8_t id[LZ_ESC_ID_LEN] = { 0xd6 };
	lz_hex(id, sizeof(id), hex);
	size_t job = prompted(f, "r6", 0xd6, argv, 3, 0);
	assert_int_equal(approve(f, job), 0);
	for (int i = 0; i < 100 && !in_inbox(f, hex, "1"); i++)
		spin(f, 10);
	assert_true(in_inbox(f, hex, "1"));
	for (int i = 0; i < 12; i++) {
		usleep(i == 0 ? 1500 * 1000 : 50 * 1000); /* the writers fill both pipes */
		struct pollfd pf[LZ_ESC_POLLFDS];
		int timeout = -1;
		size_t n = lz_escalation_pollfds(f->esc, pf, &timeout);
		(void)poll(pf, n, 0);
		lz_escalation_handle(f->esc, pf, n);
	}
	assert_true(in_inbox(f, hex, "8"));
	assert_false(in_inbox(f, hex, "9"));
}

/* Request id_byte runs "sleep 30" in the background of a shell that
 * prints its own PID and the sleep's, then does what then says (it
 * sleeps too, or waits for the test to say go and exits). detached: the sleep
 * leaves the shell's group and session (setsid) and its parent (the
 * subshell that started it ends), as a daemon does. Returns the shell's
 * PID once both run, and the sleep's pidfd in *sleeper. */
static pid_t running_sleep_in_background(struct fx *f, uint8_t id_byte, bool detached, const char *then,
					 int *sleeper)
{
	char script[512], request[16], hex[2 * LZ_ESC_ID_LEN + 1];
	uint8_t id[LZ_ESC_ID_LEN] = { id_byte };
	if (detached)
		snprintf(script, sizeof(script),
			 "s=$(/usr/bin/setsid /usr/bin/sleep 30 </dev/null >/dev/null 2>&1 & echo $!); echo $$ $s; %s",
			 then);
	else
		snprintf(script, sizeof(script), "/usr/bin/sleep 30 & echo $$ $!; %s", then);
	snprintf(request, sizeof(request), "r%02x", id_byte);
	char *argv[] = { "/usr/bin/dash", "-c", script };
	lz_hex(id, sizeof(id), hex);
	size_t job = prompted(f, request, id_byte, argv, 3, 0);
	assert_int_equal(approve(f, job), 0);
	for (int i = 0; i < 300 && !in_inbox(f, hex, "1"); i++)
		spin(f, 10);
	struct lz_esc_record rec;
	char text[64] = "";
	open_posted(f, hex, "1", LZ_ESC_CHUNK, &rec);
	memcpy(text, rec.chunk.data.p, rec.chunk.data.n < sizeof(text) - 1 ? rec.chunk.data.n : sizeof(text) - 1);
	int shell = 0, sleep = 0;
	assert_int_equal(sscanf(text, "%d %d", &shell, &sleep), 2);
	*sleeper = (int)syscall(SYS_pidfd_open, sleep, 0);
	if (*sleeper < 0)
		fail_msg("the background sleep %d is gone already: %s", sleep, strerror(errno));
	if (detached) {
		/* a session of its own, once its setsid has run */
		for (int i = 0; i < 200 && getsid(sleep) != sleep; i++)
			usleep(10 * 1000);
		assert_int_equal(getsid(sleep), sleep);
	} else
		assert_int_equal(getpgid(sleep), shell); /* the shell's own group, not the coordinator's */
	return shell;
}

/* The sleep ends (it would run 30 s by itself), the loop turning
 * meanwhile. */
static void assert_sleep_ended(struct fx *f, int sleeper)
{
	struct pollfd p = { .fd = sleeper, .events = POLLIN };
	for (int i = 0; i < 200 && poll(&p, 1, 0) == 0; i++)
		spin(f, 10);
	if (poll(&p, 1, 0) != 1)
		fail_msg("what the host command started still runs 2 s after the end of its request");
	close(sleeper);
}

/* The request's terminal result, once posted: its outcome and value. */
static void assert_result(struct fx *f, uint8_t id_byte, uint32_t outcome, int32_t value)
{
	char hex[2 * LZ_ESC_ID_LEN + 1];
	uint8_t id[LZ_ESC_ID_LEN] = { id_byte };
	struct lz_esc_record rec;
	lz_hex(id, sizeof(id), hex);
	for (int i = 0; i < 300 && !in_inbox(f, hex, "result"); i++)
		spin(f, 10);
	open_posted(f, hex, "result", LZ_ESC_TERMINAL_RESULT, &rec);
	if (rec.result.outcome != outcome || rec.result.value != value)
		fail_msg("result %u/%d, not %u/%d", rec.result.outcome, rec.result.value, outcome, value);
}

static void cancel(struct fx *f, uint8_t id_byte)
{
	struct lz_esc_record rec = { .kind = LZ_ESC_CANCELLATION, .scope = f->ta->scope };
	rec.cancellation.request_id[0] = id_byte;
	put(f, "cancel", &rec);
	wake(f);
}

/* Cancelling a running host command kills what it started too (its
 * process group: a make's compilers, both sides of a pipeline, a
 * background job), before "cancelled" is posted. */
static void test_lz_escalation__cancelling_kills_what_the_command_started(void **state)
{
	struct fx *f = *state;
	int sleeper;
	(void)running_sleep_in_background(f, 0xd7, false, "/usr/bin/sleep 30", &sleeper);
	cancel(f, 0xd7);
	assert_result(f, 0xd7, LZ_ESC_CANCELLED, 0);
	assert_sleep_ended(f, sleeper);
}

/* ... and a daemon it detached (its own session, its parent gone). */
static void test_lz_escalation__cancelling_kills_a_daemon_the_command_detached(void **state)
{
	struct fx *f = *state;
	int sleeper;
	(void)running_sleep_in_background(f, 0xd9, true, "/usr/bin/sleep 30", &sleeper);
	cancel(f, 0xd9);
	assert_result(f, 0xd9, LZ_ESC_CANCELLED, 0);
	assert_sleep_ended(f, sleeper);
}

/* A command that exits ends what it left running, in its group or
 * detached, and its result is its own exit status, not its keeper's. */
static void test_lz_escalation__what_a_command_leaves_ends_with_it(void **state)
{
	struct fx *f = *state;
	int in_group, detached;
	char then[256], go[160];
	snprintf(go, sizeof(go), "%s/go", f->dir);
	snprintf(then, sizeof(then), "while [ ! -e %s ]; do /usr/bin/sleep 0.01; done; exit $?", go);
	(void)running_sleep_in_background(f, 0xd8, false, then, &in_group);
	assert_int_equal(mknod(go, S_IFREG | 0600, 0), 0);
	assert_result(f, 0xd8, LZ_ESC_EXITED, 0);
	assert_sleep_ended(f, in_group);
	assert_int_equal(unlink(go), 0);
	snprintf(then, sizeof(then), "while [ ! -e %s ]; do /usr/bin/sleep 0.01; done; exit 3", go);
	(void)running_sleep_in_background(f, 0xda, true, then, &detached);
	assert_int_equal(mknod(go, S_IFREG | 0600, 0), 0);
	assert_result(f, 0xda, LZ_ESC_EXITED, 3);
	assert_sleep_ended(f, detached);
}

/* A process outside the command (one the keeper cannot end: another
 * user's, an agent already running) handed the command's output holds the
 * pipes open: the result comes once the command is reaped and what it
 * wrote is read, not when that process lets go. */
static void test_lz_escalation__output_held_outside_the_command_does_not_hold_its_result(void **state)
{
	struct fx *f = *state;
	char script[512];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *sock = a.sun_path;
	assert_true((size_t)snprintf(a.sun_path, sizeof(a.sun_path), "%s/holder", f->dir) < sizeof(a.sun_path));
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(ls, 1), 0);
	pid_t holder = fork();
	assert_true(holder >= 0);
	if (holder == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		(void)dup2(null, STDOUT_FILENO);
		(void)dup2(null, STDERR_FILENO);
		int c = accept(ls, NULL, NULL);
		char b, cb[CMSG_SPACE(2 * sizeof(int))];
		struct iovec io = { &b, 1 };
		struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cb, .msg_controllen = sizeof(cb) };
		(void)recvmsg(c, &m, 0);
		sleep(30);
		_exit(0);
	}
	close(ls);
	snprintf(script, sizeof(script),
		 "import socket, sys; sys.stdout.write('before'); sys.stdout.flush(); "
		 "s = socket.socket(socket.AF_UNIX); s.connect('%s'); socket.send_fds(s, [b'x'], [1, 2])",
		 sock);
	char python[PATH_MAX]; /* a symlink is never run: the file it names */
	assert_non_null(realpath("/usr/bin/python3", python));
	char *argv[] = { python, "-c", script };
	size_t job = prompted(f, "rho", 0xdc, argv, 3, 0);
	assert_int_equal(approve(f, job), 0);
	assert_result(f, 0xdc, LZ_ESC_EXITED, 0);
	char hex[2 * LZ_ESC_ID_LEN + 1];
	uint8_t id[LZ_ESC_ID_LEN] = { 0xdc };
	lz_hex(id, sizeof(id), hex);
	assert_true(in_inbox(f, hex, "1")); /* what it wrote came first */
	assert_int_equal(waitpid(holder, NULL, WNOHANG), 0); /* still holding */
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
}

/* A command a signal ended is reported with that signal. */
static void test_lz_escalation__a_command_ended_by_a_signal_is_reported_so(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/dash", "-c", "kill -USR1 $$" };
	size_t job = prompted(f, "rdb", 0xdb, argv, 3, 0);
	assert_int_equal(approve(f, job), 0);
	assert_result(f, 0xdb, LZ_ESC_SIGNALED, SIGUSR1);
}

/* A host command that looks for processes by their command line (pgrep
 * -f, pkill -f) does not find its keeper: the keeper's own is not the
 * command's (which pkill would have killed it by). */
static void test_lz_escalation__pkill_of_the_commands_own_line_leaves_its_keeper(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/pgrep", "-f", "lz-no-such-process-7d1a" };
	size_t job = prompted(f, "rde", 0xde, argv, 3, 0);
	assert_int_equal(approve(f, job), 0);
	assert_result(f, 0xde, LZ_ESC_EXITED, 1); /* nothing matched */
}

/* The command queues its keeper a SIGTERM that names the coordinator as
 * its sender (sigqueue lets any process of the user put any pid there):
 * the keeper takes it for what it is, and the command runs on. */
static void test_lz_escalation__a_forged_end_from_the_coordinator_is_ignored(void **state)
{
	struct fx *f = *state;
	char script[600];
	snprintf(script, sizeof(script),
		 "import ctypes, os, struct, time\n"
		 "info = struct.pack('iiiiii', 15, 0, -1, 0, %d, os.getuid()) + bytes(104)\n"
		 "r = ctypes.CDLL(None).syscall(129, os.getppid(), 15, ctypes.c_char_p(info))\n"
		 "time.sleep(0.5)\n"
		 "raise SystemExit(0 if r == 0 else 3)\n",
		 (int)getpid());
	char python[PATH_MAX];
	assert_non_null(realpath("/usr/bin/python3", python)); /* a prompted path has no symlink */
	char *argv[] = { python, "-c", script };
	size_t job = prompted(f, "rdf", 0xdf, argv, 3, 0);
	assert_int_equal(approve(f, job), 0);
	assert_result(f, 0xdf, LZ_ESC_EXITED, 0);
}

/* A decision the inbox took late starts no acknowledgement time: the
 * client acknowledges chunks and the result, never a decision, so a
 * command silent for longer than the timeout runs to its end. */
static void test_lz_escalation__a_late_decision_starts_no_acknowledgement_time(void **state)
{
	struct fx *f = *state;
	lz_escalation_set_ack_timeout(f->esc, 300);
	char *argv[] = { "/usr/bin/dash", "-c", "sleep 1; echo done" };
	char hex[2 * LZ_ESC_ID_LEN + 1], blocker[256], name[160];
	uint8_t id[LZ_ESC_ID_LEN] = { 0xdd };
	lz_hex(id, sizeof(id), hex);
	size_t job = prompted(f, "rdd", 0xdd, argv, 3, 0);
	snprintf(name, sizeof(name), ".%s.decision", hex);
	inbox_path(f, blocker, sizeof(blocker), name);
	assert_int_equal(mkdir(blocker, 0700), 0);
	assert_int_equal(approve(f, job), 0);
	spin(f, 200);
	assert_false(in_inbox(f, hex, "decision"));
	assert_int_equal(rmdir(blocker), 0);
	spin(f, 100);
	assert_true(in_inbox(f, hex, "decision"));
	assert_result(f, 0xdd, LZ_ESC_EXITED, 0);
	assert_chunk(f, hex, 1, "done\n");
}

/* The end of the session does the same to what a running command
 * started. */
static void test_lz_escalation__a_session_that_ends_kills_what_its_command_started(void **state)
{
	struct fx *f = *state;
	int sleeper;
	(void)running_sleep_in_background(f, 0xdc, true, "/usr/bin/sleep 30", &sleeper);
	assert_int_equal(lz_escalation_session_gone(f->esc, 0), 1);
	assert_sleep_ended(f, sleeper);
}

/* A request behind thousands of names being written ('.') and more
 * entries than the watch's queue holds is found by a listing that reads
 * a bounded number of names per turn and goes on at the next turn,
 * without another write to the outbox. */
static void test_lz_escalation__a_request_behind_names_being_written_is_routed(void **state)
{
	struct fx *f = *state;
	char p[256], log[128];
	for (int i = 0; i < 3000 + 2 * LZ_MAILBOX_READY_MAX; i++) {
		snprintf(p, sizeof(p), "%s/escalation/outbox/%s%04d", f->dir, i < 3000 ? ".partial" : "junk", i);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	char *argv[] = { "/usr/bin/true" };
	put_request(f, "request", 0xf7, argv, 1);
	assert_true(routed_after_wake(f, log));
}

/* 200 requests, each received and denied: the lines about them stop at
 * the budget, which the last one logged says. */
static void test_lz_escalation__lines_about_requests_are_logged_in_bounds(void **state)
{
	struct fx *f = *state;
	char log[128];
	int saved = stderr_to_file(f, log);
	char *argv[] = { "/usr/bin/true" };
	int routed = 0;
	for (int i = 0; i < 200; i++) {
		char name[16];
		snprintf(name, sizeof(name), "r%03d", i);
		put_request(f, name, (uint8_t)i, argv, 1);
		wake(f);
		struct lz_esc_route rq;
		if (lz_escalation_next_route(f->esc, &rq)) {
			routed++;
			lz_escalation_deny(f->esc, rq.job, "denied by the test");
		}
		cancel_and_ack(f, (uint8_t)i);
		wake(f);
	}
	stderr_restore(saved);
	assert_int_equal(routed, 200);
	FILE *in = fopen(log, "r");
	assert_non_null(in);
	char line[1200];
	int about = 0, last_says = 0;
	while (fgets(line, sizeof(line), in) != NULL)
		if (strstr(line, "escalation: request ") != NULL) {
			about++;
			last_says = strstr(line, "further lines about requests are counted") != NULL;
		}
	fclose(in);
	if (about != 256 || !last_says)
		fail_msg("%d lines about 200 denied requests (want 256, the last saying so: %d)", about, last_says);
}

/* ---- the coordinator is never held ------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Turns of the coordinator's loop in ms, each polling as long as
 * lz_escalation_pollfds says. */
static int turns_in(struct fx *f, int ms)
{
	int turns = 0;
	for (int64_t end = now_ms() + ms; now_ms() < end; turns++) {
		struct pollfd pf[LZ_ESC_POLLFDS];
		int timeout = -1;
		size_t n = lz_escalation_pollfds(f->esc, pf, &timeout);
		int left = (int)(end - now_ms());
		(void)poll(pf, n, timeout < 0 || timeout > left ? left : timeout);
		lz_escalation_handle(f->esc, pf, n);
	}
	return turns;
}

/* A record waiting for the full inbox holds the acknowledgement deadline
 * (its time has not begun): past it, the loop still waits the retry's
 * pace instead of spinning at a zero timeout. */
static void test_lz_escalation__a_record_waiting_for_the_inbox_does_not_spin_the_loop(void **state)
{
	struct fx *f = *state;
	lz_escalation_set_ack_timeout(f->esc, 100);
	char *argv[] = { "/usr/bin/dash", "-c", "echo a; sleep 5" };
	char hex[2 * LZ_ESC_ID_LEN + 1], blocker[256];
	approved_with_chunk_1_blocked(f, 0xe9, argv, 3, hex, blocker);
	spin(f, 300); /* chunk 1 waits; the deadline passes */
	assert_false(in_inbox(f, hex, "1"));
	int turns = turns_in(f, 1000);
	if (turns > 40)
		fail_msg("%d turns of the loop in 1 s while a record waited for the inbox", turns);
	/* Posted once there is room, and its time begins then. */
	lz_escalation_set_ack_timeout(f->esc, LZ_ESC_ACK_TIMEOUT_MS);
	assert_int_equal(rmdir(blocker), 0);
	spin(f, 500);
	assert_chunk(f, hex, 1, "a\n");
}

/* The 4,097th request of a generation is answered (denied, then
 * refused), so its client ends instead of waiting for ever; requests of
 * no session take no place. */
static void test_lz_escalation__a_request_past_the_generations_limit_is_answered(void **state)
{
	struct fx *f = *state;
	char log[128];
	int saved = stderr_to_file(f, log);
	char *argv[] = { "/usr/bin/true" };
	for (int i = 0; i < 64; i++) { /* no capability: refused, no place taken */
		struct lz_esc_record rec = { .kind = LZ_ESC_REQUEST, .scope = f->ta->scope };
		rec.request.request_id[0] = 0x70;
		rec.request.request_id[1] = (uint8_t)i;
		rec.request.argc = 1;
		rec.request.argv[0] = (struct lz_esc_bytes){ (const uint8_t *)argv[0], strlen(argv[0]) };
		char name[32];
		snprintf(name, sizeof(name), "nocap%03d", i);
		put(f, name, &rec);
	}
	wake(f);
	wake(f);
	for (int i = 0; i < LZ_ESC_SEEN_MAX; i++) {
		struct lz_esc_record rec = { .kind = LZ_ESC_REQUEST, .scope = f->ta->scope };
		rec.request.request_id[0] = 0x77;
		rec.request.request_id[1] = (uint8_t)(i >> 8);
		rec.request.request_id[2] = (uint8_t)i;
		rec.request.capability = (struct lz_esc_bytes){ f->cap, f->cap_len };
		rec.request.argc = 1;
		rec.request.argv[0] = (struct lz_esc_bytes){ (const uint8_t *)argv[0], strlen(argv[0]) };
		char name[32];
		snprintf(name, sizeof(name), "r%05d", i);
		put(f, name, &rec);
		if (i % 32 == 31)
			wake(f);
	}
	wake(f);
	uint8_t id[LZ_ESC_ID_LEN] = { 0xa3 };
	char hex[2 * LZ_ESC_ID_LEN + 1];
	lz_hex(id, sizeof(id), hex);
	put_request(f, "last", 0xa3, argv, 1);
	wake(f);
	stderr_restore(saved);
	assert_true(in_inbox(f, hex, "decision"));
	struct lz_esc_record rec;
	open_posted(f, hex, "result", LZ_ESC_TERMINAL_RESULT, &rec);
	assert_int_equal(rec.result.outcome, LZ_ESC_REFUSED);
	/* Asking on past the limit does not fill the inbox with answers:
	 * after 16 more, the first one's files are gone, the last's there. */
	saved = stderr_to_file(f, log);
	char last_hex[2 * LZ_ESC_ID_LEN + 1];
	for (int i = 0; i < 16; i++) {
		uint8_t more[LZ_ESC_ID_LEN] = { 0xb0, (uint8_t)i };
		lz_hex(more, sizeof(more), last_hex);
		char name[16];
		snprintf(name, sizeof(name), "more%02d", i);
		struct lz_esc_record q = { .kind = LZ_ESC_REQUEST, .scope = f->ta->scope };
		memcpy(q.request.request_id, more, sizeof(more));
		q.request.capability = (struct lz_esc_bytes){ f->cap, f->cap_len };
		q.request.argc = 1;
		q.request.argv[0] = (struct lz_esc_bytes){ (const uint8_t *)argv[0], strlen(argv[0]) };
		put(f, name, &q);
	}
	wake(f);
	wake(f);
	stderr_restore(saved);
	assert_false(in_inbox(f, hex, "decision"));
	assert_false(in_inbox(f, hex, "result"));
	assert_true(in_inbox(f, last_hex, "result"));
}

/* A killed host process held in the kernel (here: a FUSE lookup its
 * daemon answers after 3 s) does not hold the coordinator's turn. */
static const char *hang_name = "/hang";
static int hang_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(path, hang_name) == 0) {
		sleep(3);
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		return 0;
	}
	return -ENOENT;
}

static int hang_fs(const char *mnt)
{
	static const struct fuse_operations ops = { .getattr = hang_getattr };
	char *argv[] = { "hangfs", "-f", "-s", (char *)mnt, NULL };
	return fuse_main(4, argv, &ops, NULL);
}

/* hang_fs mounted at <dir>/mnt by a child (returned); target is its
 * file whose lookup waits. */
static pid_t mount_hang_fs(struct fx *f, char mnt[128], char target[160])
{
	snprintf(mnt, 128, "%s/mnt", f->dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	pid_t fs = fork();
	assert_true(fs >= 0);
	if (fs == 0) {
		execl("/proc/self/exe", "hangfs", mnt, (char *)NULL);
		_exit(127);
	}
	struct stat a, b;
	bool mounted = false;
	for (int i = 0; i < 300 && !mounted; i++) {
		mounted = stat(f->dir, &a) == 0 && stat(mnt, &b) == 0 && a.st_dev != b.st_dev;
		if (!mounted)
			usleep(10000);
	}
	if (!mounted)
		fail_msg("the FUSE file system was not mounted at %s", mnt);
	snprintf(target, 160, "%s%s", mnt, hang_name);
	return fs;
}

static void unmount_hang_fs(const char *mnt, pid_t fs)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "fusermount3 -u -z '%s' 2>/dev/null || umount -l '%s'", mnt, mnt);
	(void)!system(cmd);
	int status;
	(void)waitpid(fs, &status, 0);
}

/* The Domain Store's record of a host process, as the hooks see it. */
static int launched_records, ended_records;

static int count_launching(void *ctx, const char *hex, const char *session, const uint8_t digest[32], bool automatic,
			   struct lz_err *err)
{
	(void)ctx, (void)hex, (void)session, (void)digest, (void)automatic, (void)err;
	launched_records++;
	return 0;
}

static void count_ended(void *ctx, const char *hex)
{
	(void)ctx, (void)hex;
	ended_records++;
}

/* A killed host process the kernel holds (its lookup waits on a FUSE
 * daemon that does not answer) holds neither the loop nor its record:
 * the record ends only once the process is reaped. */
static void test_lz_escalation__a_killed_process_held_in_the_kernel_does_not_hold_the_loop(void **state)
{
	struct fx *f = *state;
	launched_records = ended_records = 0;
	lz_escalation_set_hooks(f->esc, &(struct lz_esc_hooks){ .launching = count_launching, .ended = count_ended });
	char mnt[128], target[160];
	pid_t fs = mount_hang_fs(f, mnt, target);
	char *argv[] = { "/usr/bin/stat", target };
	uint8_t id[LZ_ESC_ID_LEN] = { 0xa2 };
	char hex[2 * LZ_ESC_ID_LEN + 1];
	lz_hex(id, sizeof(id), hex);
	size_t job = prompted(f, "r", 0xa2, argv, 2, 0);
	assert_int_equal(approve(f, job), 0);
	spin(f, 500); /* stat is in its lookup now */
	struct lz_esc_record rec = { .kind = LZ_ESC_CANCELLATION, .scope = f->ta->scope };
	rec.cancellation.request_id[0] = 0xa2;
	put(f, "cancel", &rec);
	int64_t t0 = now_ms();
	wake(f);
	int64_t took = now_ms() - t0;
	int ended_while_held = ended_records;
	unmount_hang_fs(mnt, fs);
	if (took > 1000)
		fail_msg("the turn with the cancellation took %lld ms", (long long)took);
	assert_true(in_inbox(f, hex, "result"));
	assert_int_equal(launched_records, 1);
	assert_int_equal(ended_while_held, 0); /* it still ran, held */
	for (int i = 0; i < 300 && ended_records == 0; i++)
		spin(f, 10);
	assert_int_equal(ended_records, 1); /* reaped once the lookup let go */
}

/* A request the coordinator cannot read for now (out of descriptors, here
 * for 600 ms: across retries, when even the outbox cannot be listed) is
 * neither refused nor lost: it is read again every 250 ms and routed once
 * descriptors come back; the shortage is logged once. */
static void test_lz_escalation__a_request_unreadable_for_now_is_read_again(void **state)
{
	struct fx *f = *state;
	char *argv[] = { "/usr/bin/true" };
	char hex[2 * LZ_ESC_ID_LEN + 1], log[128];
	uint8_t id[LZ_ESC_ID_LEN] = { 0xa4 };
	lz_hex(id, sizeof(id), hex);
	put_request(f, "r", 0xa4, argv, 1);
	int saved = stderr_to_file(f, log);
	struct lz_test_fds fds;
	assert_int_equal(lz_test_fds_fill(&fds), 0);
	wake(f);
	spin(f, 600);
	struct lz_esc_route rq;
	bool routed_while_short = lz_escalation_next_route(f->esc, &rq);
	assert_int_equal(lz_test_fds_release(&fds), 0);
	assert_false(routed_while_short);
	assert_false(in_inbox(f, hex, "decision"));
	assert_false(in_inbox(f, hex, "result"));
	spin(f, 400);
	stderr_restore(saved);
	assert_true(lz_escalation_next_route(f->esc, &rq));
	assert_int_equal(lines_with(log, "read again every 250 ms"), 1);
}

/* Approved, then cancelled while its host process still opens the
 * executable (a lookup on a mount that waits): the approval stands, as
 * the host's record of the launch says, and the result says cancelled. */
static void test_lz_escalation__a_request_cancelled_while_starting_keeps_its_approval(void **state)
{
	struct fx *f = *state;
	launched_records = 0;
	lz_escalation_set_hooks(f->esc, &(struct lz_esc_hooks){ .launching = count_launching });
	char mnt[128], target[160], hex[2 * LZ_ESC_ID_LEN + 1];
	pid_t fs = mount_hang_fs(f, mnt, target);
	char *argv[] = { target };
	uint8_t id[LZ_ESC_ID_LEN] = { 0xa3 };
	lz_hex(id, sizeof(id), hex);
	size_t job = prompted(f, "r", 0xa3, argv, 1, 0);
	assert_int_equal(approve(f, job), 0);
	spin(f, 300); /* its host process waits in the executable's lookup */
	bool decided_while_starting = in_inbox(f, hex, "decision");
	cancel(f, 0xa3);
	unmount_hang_fs(mnt, fs);
	assert_false(decided_while_starting);
	assert_int_equal(launched_records, 1);
	struct lz_esc_record rec;
	open_posted(f, hex, "decision", LZ_ESC_DECISION, &rec);
	assert_int_equal(rec.decision.verdict, LZ_ESC_APPROVED);
	assert_result(f, 0xa3, LZ_ESC_CANCELLED, 0);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[0], "hangfs") == 0)
		return hang_fs(argv[1]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_escalation__an_answer_applies_only_to_the_request_shown, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__an_answer_to_an_ended_request_runs_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__the_request_shown_runs_when_approved, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_command_that_cannot_start_is_answered, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_record_the_inbox_does_not_take_is_posted_again,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_escalation__a_result_waits_behind_a_record_the_inbox_did_not_take, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_escalation__a_flooded_outbox_is_read_to_its_end_and_logged_in_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__lines_about_requests_are_logged_in_bounds, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__the_window_holds_with_both_streams_ready, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_request_cancelled_while_starting_keeps_its_approval,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_request_unreadable_for_now_is_read_again, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__cancelling_kills_what_the_command_started, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__an_exec_failure_below_the_keeper_is_not_a_start, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__output_held_outside_the_command_does_not_hold_its_result,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__cancelling_kills_a_daemon_the_command_detached,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__what_a_command_leaves_ends_with_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_command_ended_by_a_signal_is_reported_so,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_escalation__a_late_decision_starts_no_acknowledgement_time, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_escalation__pkill_of_the_commands_own_line_leaves_its_keeper, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_forged_end_from_the_coordinator_is_ignored, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_escalation__a_session_that_ends_kills_what_its_command_started, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_request_behind_names_being_written_is_routed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_escalation__a_record_waiting_for_the_inbox_does_not_spin_the_loop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_escalation__a_request_past_the_generations_limit_is_answered,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_lz_escalation__a_killed_process_held_in_the_kernel_does_not_hold_the_loop, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
