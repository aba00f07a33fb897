/* The Client CLI's side of a session (core/session/client.c; spec 3.3-3.4):
 * its signals, its answer to a Refused, its suspension and its terminal
 * reset, without a Domain.
 *
 * This file includes client.c itself, so its static pieces (run_terminal,
 * run_streams, refusal, drive_scan, reset_terminal) are tested directly;
 * the linker then takes lz_client_run from here and never pulls client.o
 * out of the core library. The client of a test runs in a child process
 * (its own process group, its standard streams a PTY's slave or
 * /dev/null) over a TLS-connected SOCK_SEQPACKET pair (tls_pair.h); this
 * process plays the Host Coordinator and the developer's terminal (the PTY
 * master). A child never asserts: it reports an outcome over a pipe and
 * _exits.
 *
 * One seam: client.c's poll and ppoll go through race_poll/race_ppoll,
 * which raise race_signal once just before waiting, as a signal that comes
 * between the loop's checks and its wait.
 *
 * Root or not: every test passes both as root and as an unprivileged
 * user. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "tls_pair.h"

static volatile sig_atomic_t race_signal;

__attribute__((unused)) static int race_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	int sig = race_signal;
	race_signal = 0;
	if (sig)
		raise(sig);
	return poll(fds, n, timeout);
}

__attribute__((unused)) static int race_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout, const sigset_t *mask)
{
	int sig = race_signal;
	race_signal = 0;
	if (sig)
		raise(sig);
	return ppoll(fds, n, timeout, mask);
}

#define poll(...) race_poll(__VA_ARGS__)
#define ppoll(...) race_ppoll(__VA_ARGS__)
#include "session/client.c"
#undef poll
#undef ppoll

#define WAIT_MS 5000
#define QUIET_MS 300

/* What a child reports. */
struct outcome {
	int r, status, code;
	char msg[LZ_ERR_MSG_MAX];
	int extra[4];
};

struct peer {
	struct gen g;
	int sv[2]; /* the coordinator's end, the client's */
	struct lz_tlschan *hc, *cli;
	int master, slave; /* the developer's terminal */
	int result;        /* the child's outcome, read end */
	pid_t pid;
	char seen[65536]; /* what the terminal showed */
	size_t seen_len;
	uint8_t buf[LZ_WIRE_MAX];
};

static int setup(void **state)
{
	struct peer *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -1;
	gen_make(&p->g);
	tls_pair_connect(&p->g, SOCK_NONBLOCK, p->sv, &p->hc, &p->cli);
	/* The CLI's socket blocks, as lz_clientauth_connect's does. */
	assert_int_equal(fcntl(p->sv[1], F_SETFL, 0), 0);
	p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(p->master >= 0);
	assert_int_equal(grantpt(p->master), 0);
	assert_int_equal(unlockpt(p->master), 0);
	p->slave = open(ptsname(p->master), O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(p->slave >= 0);
	assert_int_equal(fcntl(p->master, F_SETFL, O_NONBLOCK), 0);
	struct winsize ws = { .ws_row = 30, .ws_col = 100 };
	assert_int_equal(ioctl(p->slave, TIOCSWINSZ, &ws), 0);
	p->result = -1;
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct peer *p = *state;
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		(void)waitpid(p->pid, NULL, 0);
	}
	lz_tlschan_free(p->hc);
	lz_tlschan_free(p->cli);
	gen_free(&p->g);
	for (int i = 0; i < 2; i++)
		if (p->sv[i] >= 0)
			close(p->sv[i]);
	close(p->master);
	close(p->slave);
	if (p->result >= 0)
		close(p->result);
	free(p);
	return 0;
}

/* ---- the client, in a child ---------------------------------------------- */

typedef void client_fn(struct peer *p, struct outcome *o);

/* Starts fn in a child: its own process group (so that a stop signal
 * stops it), stdin and stdout the PTY's slave when terminal, else
 * /dev/null like stderr. */
static void start(struct peer *p, client_fn *fn, bool terminal)
{
	int out[2];
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		close(out[0]);
		close(p->sv[0]); /* the coordinator's end is not the client's */
		close(p->master);
		(void)setpgid(0, 0);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		int std = terminal ? p->slave : null;
		if (null < 0 || dup2(std, 0) < 0 || dup2(std, 1) < 0 || (!terminal && dup2(null, 2) < 0))
			_exit(3);
		struct outcome o;
		memset(&o, 0, sizeof(o));
		fn(p, &o);
		(void)lz_write_all(out[1], &o, sizeof(o));
		_exit(0);
	}
	close(out[1]);
	p->result = out[0];
}

static char *const ARGV[] = { "tui", NULL };

static void run(struct peer *p, struct outcome *o)
{
	struct lz_client_request req = { .argv = ARGV, .terminal = true };
	struct lz_err err = { 0, "" };
	o->r = run_terminal(p->sv[1], p->cli, &req, &o->status, &err);
	o->code = err.code;
	snprintf(o->msg, sizeof(o->msg), "%s", err.msg);
}

/* The child's wait status within WAIT_MS (WUNTRACED: a stop counts), or
 * -1. */
static int child_status(struct peer *p, int flags)
{
	for (int waited = 0; waited < WAIT_MS; waited += 10) {
		int st;
		if (waitpid(p->pid, &st, WNOHANG | flags) == p->pid)
			return st;
		usleep(10 * 1000);
	}
	return -1;
}

/* The child's outcome once it exited. */
static struct outcome ended(struct peer *p)
{
	int st = child_status(p, 0);
	assert_true(st != -1);
	p->pid = 0;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	struct outcome o;
	assert_int_equal(read(p->result, &o, sizeof(o)), sizeof(o));
	return o;
}

/* ---- the coordinator ----------------------------------------------------- */

/* The client's next record within ms: 0 or -errno (-ETIMEDOUT). */
static int hc_next(struct peer *p, struct lz_wire_msg *m, int ms)
{
	int64_t deadline = lz_now_ms() + ms;
	for (;;) {
		int fds[LZ_WIRE_MAX_FDS];
		size_t nf = 0;
		int r = lz_wire_recv(p->hc, p->buf, sizeof(p->buf), m, fds, LZ_WIRE_MAX_FDS, &nf, NULL);
		for (size_t i = 0; i < nf; i++)
			close(fds[i]);
		if (r != -EAGAIN)
			return r;
		struct pollfd pf = { .fd = p->sv[0], .events = POLLIN };
		int left = lz_remaining_ms(deadline);
		if (left == 0 || poll(&pf, 1, left) <= 0)
			return -ETIMEDOUT;
	}
}

static void hc_expect(struct peer *p, enum lz_wire_type type)
{
	struct lz_wire_msg m;
	assert_int_equal(hc_next(p, &m, WAIT_MS), 0);
	assert_int_equal(m.type, type);
	lz_wire_msg_release(&m);
}

static void hc_send(struct peer *p, const struct lz_wire_msg *m)
{
	assert_int_equal(lz_wire_send(p->hc, m, NULL, 0, WAIT_MS, NULL), 0);
}

static void hc_welcome(struct peer *p)
{
	hc_send(p, &(struct lz_wire_msg){ .type = LZ_WIRE_WELCOME,
					  .welcome = { .protocol = LZ_WIRE_PROTOCOL, .generation = 1 } });
}

static void hc_output(struct peer *p, const char *text)
{
	hc_send(p, &(struct lz_wire_msg){ .type = LZ_WIRE_OUTPUT,
					  .output = { (const uint8_t *)text, strlen(text) } });
}

static void hc_exit(struct peer *p, uint8_t value)
{
	hc_send(p, &(struct lz_wire_msg){ .type = LZ_WIRE_SESSION_EXIT,
					  .exit = { .kind = LZ_WIRE_EXITED, .value = value } });
}

static void hc_refuse(struct peer *p, int code, const char *why)
{
	hc_send(p, &(struct lz_wire_msg){ .type = LZ_WIRE_REFUSED,
					  .refused = { .code = (uint32_t)code, .message = why,
						       .message_len = strlen(why) } });
}

/* Whether the terminal shows needle (since the start) within ms. */
static bool shows(struct peer *p, const char *needle, int ms)
{
	int64_t deadline = lz_now_ms() + ms;
	for (;;) {
		if (memmem(p->seen, p->seen_len, needle, strlen(needle)) != NULL)
			return true;
		ssize_t n = read(p->master, p->seen + p->seen_len, sizeof(p->seen) - p->seen_len);
		if (n > 0) {
			p->seen_len += (size_t)n;
			continue;
		}
		struct pollfd pf = { .fd = p->master, .events = POLLIN };
		int left = lz_remaining_ms(deadline);
		if (left == 0 || poll(&pf, 1, left) < 0)
			return false;
	}
}

static bool canonical(struct peer *p)
{
	struct termios t;
	assert_int_equal(tcgetattr(p->slave, &t), 0);
	return (t.c_lflag & ICANON) != 0;
}

/* ---- finding 1: signals are the session's only while it runs ------------- */

static void marker(int sig)
{
	(void)sig;
}

static void client_with_own_signals(struct peer *p, struct outcome *o)
{
	struct sigaction sa = { .sa_handler = marker };
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N_SESSION_SIGNALS; i++)
		(void)sigaction(session_signals[i], &sa, NULL);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	(void)sigprocmask(SIG_SETMASK, &mask, NULL);
	run(p, o);
	for (size_t i = 0; i < N_SESSION_SIGNALS; i++) {
		struct sigaction now;
		if (sigaction(session_signals[i], NULL, &now) < 0 || now.sa_handler != marker)
			o->extra[0]++;
	}
	sigset_t now;
	(void)sigprocmask(SIG_SETMASK, NULL, &now);
	o->extra[1] = sigismember(&now, SIGUSR1);
	for (size_t i = 0; i < N_SESSION_SIGNALS; i++)
		o->extra[2] += sigismember(&now, session_signals[i]);
}

static void test_run_terminal__gives_back_the_callers_signal_actions_and_mask(void **state)
{
	struct peer *p = *state;
	start(p, client_with_own_signals, true);
	hc_expect(p, LZ_WIRE_RUN_COMMAND);
	hc_welcome(p);
	hc_exit(p, 7);
	struct outcome o = ended(p);
	assert_int_equal(o.r, 0);
	assert_int_equal(o.status, 7);
	assert_int_equal(o.extra[0], 0); /* every action the caller's */
	assert_int_equal(o.extra[1], 1); /* its mask */
	assert_int_equal(o.extra[2], 0);
}

static void client_with_stale_flags(struct peer *p, struct outcome *o)
{
	/* Noted in an earlier attempt (or a signal between attempts). */
	got_int = 1;
	got_quit = 1;
	got_end = SIGHUP;
	run(p, o);
}

static void test_run_terminal__acts_on_no_signal_noted_before_it(void **state)
{
	struct peer *p = *state;
	start(p, client_with_stale_flags, true);
	hc_expect(p, LZ_WIRE_RUN_COMMAND);
	hc_welcome(p);
	struct lz_wire_msg m;
	int r = hc_next(p, &m, QUIET_MS);
	if (r == 0) {
		lz_wire_msg_release(&m);
		fail_msg("the client sent record type %d after its command", (int)m.type);
	}
	assert_int_equal(r, -ETIMEDOUT);
	hc_exit(p, 0);
	struct outcome o = ended(p);
	assert_int_equal(o.r, 0);
	assert_int_equal(o.status, 0);
}

static void client_interrupted_before_a_retry(struct peer *p, struct outcome *o)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigemptyset(&dfl.sa_mask);
	(void)sigaction(SIGINT, &dfl, NULL);
	run(p, o);
	/* lz_client_run would wait and send the command again: the developer's
	 * ^C comes now. */
	raise(SIGINT);
	o->extra[0] = 1; /* survived it */
}

static void test_run_terminal__an_interrupt_after_a_lost_start_ends_the_cli(void **state)
{
	struct peer *p = *state;
	start(p, client_interrupted_before_a_retry, true);
	/* The coordinator goes away with the command unread: a retry is safe,
	 * and the client would make one. */
	struct pollfd pf = { .fd = p->sv[0], .events = POLLIN };
	assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
	close(p->sv[0]);
	p->sv[0] = -1;
	int st = child_status(p, 0);
	assert_true(st != -1);
	p->pid = 0;
	if (WIFEXITED(st)) {
		struct outcome o;
		assert_int_equal(read(p->result, &o, sizeof(o)), sizeof(o));
		fail_msg("the CLI survived ^C after run_terminal returned %d", o.r);
	}
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGINT);
}

/* ---- finding 4: a signal just before the wait ends it ---------------------- */

static void client_signalled_before_the_wait(struct peer *p, struct outcome *o)
{
	race_signal = SIGTERM;
	run(p, o);
}

static void test_run_terminal__a_signal_just_before_the_wait_ends_it(void **state)
{
	struct peer *p = *state;
	start(p, client_signalled_before_the_wait, true);
	hc_expect(p, LZ_WIRE_RUN_COMMAND);
	hc_expect(p, LZ_WIRE_DETACH);
	struct outcome o = ended(p);
	assert_int_equal(o.r, 0);
	assert_int_equal(o.status, 128 + SIGTERM);
}

/* ---- finding 2: a coordinator's EAGAIN is no retry ----------------------- */

static void test_refusal__a_coordinators_eagain_is_no_retry(void **state)
{
	struct peer *p = *state;
	hc_refuse(p, EAGAIN, "database is locked");
	struct lz_err err = { 0, "" };
	assert_int_equal(refusal(p->cli, &err), -EIO);
	assert_int_equal(err.code, EIO);
	assert_string_equal(err.msg, "database is locked");
	/* Other codes pass as they are. */
	hc_refuse(p, ESTALE, "another configuration");
	assert_int_equal(refusal(p->cli, &err), -ESTALE);
}

static void test_run_terminal__a_coordinators_eagain_is_no_retry(void **state)
{
	struct peer *p = *state;
	start(p, run, true);
	hc_expect(p, LZ_WIRE_RUN_COMMAND);
	/* The guest ran; recording it failed (SQLITE_BUSY). */
	hc_refuse(p, EAGAIN, "database is locked");
	struct outcome o = ended(p);
	assert_int_equal(o.r, -EIO);
	assert_int_equal(o.code, EIO);
	assert_string_equal(o.msg, "database is locked");
}

static void run_with_streams(struct peer *p, struct outcome *o)
{
	struct lz_client_request req = { .argv = ARGV };
	struct lz_err err = { 0, "" };
	o->r = run_streams(p->sv[1], p->cli, &req, &o->status, &err);
	o->code = err.code;
	snprintf(o->msg, sizeof(o->msg), "%s", err.msg);
}

static void test_run_streams__a_coordinators_eagain_is_no_retry(void **state)
{
	struct peer *p = *state;
	start(p, run_with_streams, false);
	hc_expect(p, LZ_WIRE_RUN_COMMAND);
	hc_refuse(p, EAGAIN, "database is locked");
	struct outcome o = ended(p);
	assert_int_equal(o.r, -EIO);
	assert_int_equal(o.code, EIO);
}

/* A coordinator lost with the command unread is tried again (EAGAIN):
 * standard input, a file here, is then still whole, as nothing of it is
 * read before the coordinator confirms the start. */
static int file_stdin = -1;

static void run_streams_from_file(struct peer *p, struct outcome *o)
{
	(void)dup2(file_stdin, STDIN_FILENO);
	run_with_streams(p, o);
	o->extra[0] = (int)lseek(STDIN_FILENO, 0, SEEK_CUR);
}

static void test_run_streams__a_retry_finds_standard_input_whole(void **state)
{
	struct peer *p = *state;
	char path[] = "/tmp/lz-test-client-stdin.XXXXXX";
	file_stdin = mkstemp(path);
	assert_true(file_stdin >= 0);
	unlink(path);
	static char data[40000];
	memset(data, 'a', sizeof(data));
	assert_int_equal(write(file_stdin, data, sizeof(data)), sizeof(data));
	assert_int_equal(lseek(file_stdin, 0, SEEK_SET), 0);
	start(p, run_streams_from_file, false);
	struct pollfd pf = { .fd = p->sv[0], .events = POLLIN };
	assert_int_equal(poll(&pf, 1, WAIT_MS), 1); /* the command waits, unread */
	usleep(200 * 1000);
	close(p->sv[0]); /* the coordinator is lost before it reads it */
	p->sv[0] = -1;
	struct outcome o = ended(p);
	close(file_stdin);
	assert_int_equal(o.r, -EAGAIN);
	assert_int_equal(o.extra[0], 0);
}

/* The RunCommand of a streams session and the descriptors it carries (the
 * caller closes them). */
static void hc_expect_streams(struct peer *p, int fds[3])
{
	struct lz_wire_msg m;
	size_t nf = 0;
	int64_t deadline = lz_now_ms() + WAIT_MS;
	int r;
	while ((r = lz_wire_recv(p->hc, p->buf, sizeof(p->buf), &m, fds, 3, &nf, NULL)) == -EAGAIN &&
	       lz_remaining_ms(deadline) > 0) {
		struct pollfd pf = { .fd = p->sv[0], .events = POLLIN };
		(void)poll(&pf, 1, 10);
	}
	assert_int_equal(r, 0);
	assert_int_equal(m.type, LZ_WIRE_RUN_COMMAND);
	assert_int_equal(nf, 3);
	lz_wire_msg_release(&m);
}

/* A streams session relaying to the developer's terminal, ended by a
 * signal (Ctrl-C, a closed terminal, kill), resets what the guest drove
 * before the CLI ends by that signal. */
static void streams_end_by(struct peer *p, int sig)
{
	start(p, run_with_streams, true);
	int fds[3];
	hc_expect_streams(p, fds);
	hc_welcome(p);
	static const char drove[] = "\x1b[?1000h\x1b[?1049hguest";
	assert_true(lz_write_all(fds[1], drove, sizeof(drove) - 1) == 0);
	assert_true(shows(p, "guest", WAIT_MS));
	assert_false(shows(p, "\x1b[?1000l", 0));
	kill(p->pid, sig);
	int st = child_status(p, 0);
	p->pid = 0;
	assert_true(st != -1 && WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), sig);
	assert_true(shows(p, "\x1b[?1000l", WAIT_MS));
	assert_true(shows(p, "\x1b[?1047l", 0)); /* the reset leaves the alternate screen */
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

static void test_run_streams__a_signal_that_ends_it_resets_the_terminal_first(void **state)
{
	struct peer *p = *state;
	streams_end_by(p, SIGINT);
}

static void test_run_streams__sigterm_resets_the_terminal_first(void **state)
{
	struct peer *p = *state;
	streams_end_by(p, SIGTERM);
}

/* ---- finding 3: suspension resets the modes the guest drove ---------------- */

static void test_run_terminal__suspension_resets_what_the_guest_drove(void **state)
{
	struct peer *p = *state;
	start(p, run, true);
	hc_expect(p, LZ_WIRE_RUN_COMMAND);
	hc_welcome(p);
	hc_output(p, "\x1b[?1000h\x1b[=1;1uguest");
	assert_true(shows(p, "guest", WAIT_MS));
	assert_false(canonical(p));
	assert_false(shows(p, "\x1b[?1000l", 0));

	kill(p->pid, SIGTSTP);
	int st = child_status(p, WUNTRACED);
	assert_true(st != -1 && WIFSTOPPED(st));
	/* Stopped: the shell gets a terminal in its own modes. */
	assert_true(shows(p, "\x1b[?1000l", 0));
	assert_true(shows(p, LZ_TERM_RESET_KEYS, 0));
	assert_true(canonical(p));

	kill(p->pid, SIGCONT);
	hc_expect(p, LZ_WIRE_RESIZE); /* after raw again */
	assert_false(canonical(p));
	hc_exit(p, 0);
	struct outcome o = ended(p);
	assert_int_equal(o.r, 0);
	assert_true(canonical(p));
}

/* ---- finding 5: the reset and what calls for it ---------------------------- */

static bool drives(const char *bytes)
{
	struct drive d = { .drove = false };
	drive_scan(&d, (const uint8_t *)bytes, strlen(bytes));
	return d.drove;
}

static void test_drive_scan__sos_pm_and_apc_raw_and_in_utf8(void **state)
{
	(void)state;
	assert_false(drives("plain text\r\n\t"));
	assert_false(drives("caf\xc3\xa9"));
	assert_true(drives("\x1b"));
	assert_true(drives("\x9b"));
	assert_true(drives("\x98sos\x9c"));
	assert_true(drives("\x9epm\x9c"));
	assert_true(drives("\x9f" "apc\x9c"));
	assert_true(drives("\xc2\x98sos\xc2\x9c"));
	assert_true(drives("\xc2\x9epm\xc2\x9c"));
	assert_true(drives("\xc2\x9f" "apc\xc2\x9c"));
}

static bool origin(const char *const *parts)
{
	struct drive d = { .drove = false };
	for (; *parts; parts++)
		drive_scan(&d, (const uint8_t *)*parts, strlen(*parts));
	return d.origin;
}

#define ORIGIN(...) origin((const char *const[]){ __VA_ARGS__, NULL })

static void test_drive_scan__origin_mode_set(void **state)
{
	(void)state;
	assert_true(ORIGIN("\x1b[?6h"));
	assert_true(ORIGIN("\x1b[?1;6h"));
	assert_true(ORIGIN("\x1b[?6;1049h"));
	assert_true(ORIGIN("\x1b[?006h"));
	assert_true(ORIGIN("\x9b?6h"));
	assert_true(ORIGIN("\xc2\x9b?6h"));
	assert_true(ORIGIN("x\x1b", "[", "?", "6", "h"));
	assert_true(ORIGIN("\x1b[?\a6h")); /* BEL is executed, the sequence goes on */
	assert_false(ORIGIN("\x1b[?6l"));
	assert_false(ORIGIN("\x1b[6h"));
	assert_false(ORIGIN("\x1b[?1006h"));
	assert_false(ORIGIN("\x1b[?16h\x1b[?60h\x1b[?65536h"));
	assert_false(ORIGIN("\x1b[?6\x18h"));   /* cancelled */
	assert_false(ORIGIN("\x1b[?6", "\x1bh")); /* another sequence */
	assert_false(ORIGIN("?6h"));
}

/* What reset_terminal writes to a terminal after d. */
static size_t reset_bytes(struct peer *p, const struct drive *d)
{
	p->seen_len = 0;
	reset_terminal(p->slave, d);
	usleep(50 * 1000);
	ssize_t n = read(p->master, p->seen, sizeof(p->seen));
	p->seen_len = n > 0 ? (size_t)n : 0;
	return p->seen_len;
}

static const char *find(struct peer *p, const char *needle)
{
	return memmem(p->seen, p->seen_len, needle, strlen(needle));
}

static void test_reset_terminal__margins_origin_mode_and_8bit_replies(void **state)
{
	struct peer *p = *state;
	assert_int_equal(reset_bytes(p, &(struct drive){ .drove = false }), 0);

	assert_true(reset_bytes(p, &(struct drive){ .drove = true }) > 0);
	assert_non_null(find(p, LZ_TERM_RESET_REPORTS));
	assert_non_null(find(p, "\x1b[?69l"));
	assert_non_null(find(p, "\x1b F"));
	/* The cursor stays where the guest left it. */
	assert_null(find(p, "\x1b[?6l"));
	assert_null(find(p, "\x1b[999;1H"));

	assert_true(reset_bytes(p, &(struct drive){ .drove = true, .origin = true }) > 0);
	const char *restored = find(p, "\x1b" "8");
	const char *off = find(p, "\x1b[?6l");
	assert_non_null(restored);
	assert_non_null(off);
	assert_true(off > restored); /* DECRC would bring it back */
	assert_non_null(find(p, "\x1b[?69l"));
	assert_non_null(find(p, "\x1b[999;1H"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_run_terminal__gives_back_the_callers_signal_actions_and_mask, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_terminal__acts_on_no_signal_noted_before_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_run_terminal__an_interrupt_after_a_lost_start_ends_the_cli,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_terminal__a_signal_just_before_the_wait_ends_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refusal__a_coordinators_eagain_is_no_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_terminal__a_coordinators_eagain_is_no_retry, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_run_streams__a_coordinators_eagain_is_no_retry, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_run_streams__a_retry_finds_standard_input_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_streams__a_signal_that_ends_it_resets_the_terminal_first, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_run_streams__sigterm_resets_the_terminal_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_terminal__suspension_resets_what_the_guest_drove, setup,
						teardown),
		cmocka_unit_test(test_drive_scan__sos_pm_and_apc_raw_and_in_utf8),
		cmocka_unit_test(test_drive_scan__origin_mode_set),
		cmocka_unit_test_setup_teardown(test_reset_terminal__margins_origin_mode_and_8bit_replies, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
