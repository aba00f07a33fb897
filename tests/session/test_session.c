/* One Client Session on the HC's side (core/session/session.h), with real
 * PTYs, SOCK_SEQPACKET client sockets and exec clients spawned through the
 * broker: the PTY pair, what the session polls for (backpressure), the
 * events a running session admits, bounded output (one record of at most
 * LZ_WIRE_MAX_DATA in flight), client loss, the release stages, the drain
 * and the single SessionExit, refusals and reset. */
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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/broker.h"
#include "proc/spawn.h"
#include "session/session.h"
#include "session/wire.h"
#include "tls_pair.h"

struct fx {
	struct lz_session s;
	struct gen g;
	int peer;  /* the client's end of the session's socket */
	struct lz_tlschan *peer_tls;
	int slave; /* the PTY slave, or -1 */
	uint8_t buf[LZ_WIRE_MAX];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	int sv[2];
	struct lz_tlschan *srv = NULL;
	if (f == NULL)
		return -1;
	gen_make(&f->g);
	tls_pair_connect(&f->g, SOCK_NONBLOCK, sv, &srv, &f->peer_tls);
	lz_session_init(&f->s);
	lz_session_connected(&f->s, sv[0], srv);
	f->s.phase = LZ_SESSION_ADMITTED;
	f->peer = sv[1];
	f->slave = -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_session_reset(&f->s);
	lz_tlschan_free(f->peer_tls);
	gen_free(&f->g);
	if (f->peer >= 0)
		close(f->peer);
	if (f->slave >= 0)
		close(f->slave);
	free(f);
	return 0;
}

static void open_pty(struct fx *f)
{
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_session_open_pty(&f->s, 24, 80, &f->slave, &err), 0);
	/* Raw: bytes pass unchanged, no echo into the output. */
	struct termios t;
	assert_int_equal(tcgetattr(f->slave, &t), 0);
	cfmakeraw(&t);
	assert_int_equal(tcsetattr(f->slave, TCSANOW, &t), 0);
}

/* Spawns sh -c script through the broker with the given streams. */
static void spawn_sh(struct fx *f, const char *script, int in, int out)
{
	struct lz_err err = { 0, "" };
	char *const argv[] = { "sh", "-c", (char *)script, NULL };
	struct lz_spawn exec = { .exe_fd = -1, .path = "/bin/sh", .argv = argv, .stdin_fd = in,
				 .stdout_fd = out, .stderr_fd = out };
	struct lz_broker_spec spec = { .label = "exec-client", .join_pidfd = -1, .exec = &exec };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	if (lz_broker_spawn(&spec, &child, &err) != 0)
		fail_msg("spawn: %s", err.msg);
	lz_session_started(&f->s, &child);
}

/* The next record the client receives, waiting up to ms. */
static int next(struct fx *f, struct lz_wire_msg *m, int ms)
{
	struct pollfd p = { .fd = f->peer, .events = POLLIN };
	if (poll(&p, 1, ms) <= 0)
		return -ETIMEDOUT;
	size_t n_fds = 0;
	return lz_wire_recv(f->peer_tls, f->buf, sizeof(f->buf), m, NULL, 0, &n_fds, NULL);
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* lz_session_finish's precondition: the exec client ended (its pidfd is
 * readable), as the coordinator sees it. */
static void wait_ended(struct fx *f)
{
	assert_true(readable(f->s.exec.pidfd, 10000));
}

/* ---- slot and PTY ----------------------------------------------------------- */

static void test_lz_session_init__free_slot(void **state)
{
	(void)state;
	struct lz_session s;
	memset(&s, 0x5a, sizeof(s));
	lz_session_init(&s);
	assert_int_equal(s.client, -1);
	assert_int_equal(s.master, -1);
	assert_true(s.exec.pidfd < 0);
	assert_false(s.running);
	assert_int_equal(s.release, LZ_SESSION_LIVE);
	assert_false(lz_session_busy(&s));
	s.client = 0;
	assert_true(lz_session_busy(&s));
	lz_session_reset(&(struct lz_session){ .client = -1, .master = -1, .exec = LZ_BROKER_CHILD_INIT });
}

static void test_lz_session_open_pty__pair_and_window(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	int slave = 4242;
	assert_int_equal(lz_session_open_pty(&f->s, 0, 80, &slave, &err), -EINVAL);
	assert_int_equal(lz_session_open_pty(&f->s, 24, 0, &slave, &err), -EINVAL);
	assert_int_equal(slave, 4242);
	assert_int_equal(f->s.master, -1);
	assert_int_equal(lz_session_open_pty(&f->s, 33, 101, &f->slave, &err), 0);
	assert_true(f->s.tty);
	assert_true(isatty(f->slave));
	assert_true(fcntl(f->s.master, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(f->s.master, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(f->slave, F_GETFD) & FD_CLOEXEC);
	struct winsize ws;
	assert_int_equal(ioctl(f->slave, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_row, 33);
	assert_int_equal(ws.ws_col, 101);
	/* The pair: slave to master. */
	assert_int_equal(write(f->slave, "x", 1), 1);
	assert_true(readable(f->s.master, 1000));
}

/* ---- polling and backpressure ------------------------------------------------ */

static void test_lz_session_pollfds__backpressure(void **state)
{
	struct fx *f = *state;
	struct pollfd pf[LZ_SESSION_POLLFDS];
	int timeout = -1;
	/* A client only, nothing pending: read it. */
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 1);
	assert_int_equal(pf[0].fd, f->s.client);
	assert_int_equal(pf[0].events, POLLIN);
	assert_int_equal(timeout, -1);
	open_pty(f);
	/* Not running: the master is not polled. */
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 1);
	spawn_sh(f, "sleep 30", -1, -1);
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 3);
	assert_int_equal(pf[1].fd, f->s.exec.pidfd);
	assert_int_equal(pf[2].fd, f->s.master);
	assert_int_equal(pf[2].events, POLLIN);
	/* An Output pending: the client for writing, the master not read. */
	f->s.out_len = 1;
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 3);
	assert_int_equal(pf[0].events, POLLIN | POLLOUT);
	assert_int_equal(pf[2].events, 0);
	f->s.out_len = 0;
	/* An Input pending: the client not read, the master for writing. */
	f->s.in_len = 1;
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 3);
	assert_int_equal(pf[0].events, 0);
	assert_int_equal(pf[2].events, POLLIN | POLLOUT);
	f->s.in_len = 0;
	/* Nobody to take output: the master is not read either. */
	int client = f->s.client;
	f->s.client = -1;
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 2);
	assert_int_equal(pf[1].events, 0);
	f->s.client = client;
	/* A release stage due lowers the timeout. */
	assert_int_equal(timeout, -1);
	lz_session_start_release(&f->s);
	timeout = -1;
	lz_session_pollfds(&f->s, pf, &timeout);
	assert_true(timeout > 0 && timeout <= LZ_SESSION_GRACE_MS);
	timeout = 5;
	lz_session_pollfds(&f->s, pf, &timeout);
	assert_int_equal(timeout, 5); /* an earlier one is kept */
}

/* A held exit: the exec pidfd is left out, the timeout lowered until it
 * is due, and the exit stays unreaped for lz_session_finish. */
static void test_lz_session_hold_exit__pidfd_left_out_until_due(void **state)
{
	struct fx *f = *state;
	struct pollfd pf[LZ_SESSION_POLLFDS];
	int timeout = -1;
	spawn_sh(f, "exit 128", -1, -1);
	wait_ended(f);
	assert_int_equal(f->s.exit_held_until, 0);
	assert_false(lz_session_exit_due(&f->s));
	lz_session_hold_exit(&f->s, 200);
	assert_true(f->s.exit_held_until > 0);
	assert_false(lz_session_exit_due(&f->s));
	size_t n = lz_session_pollfds(&f->s, pf, &timeout);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(pf[i].fd, f->s.exec.pidfd);
	assert_true(timeout > 0 && timeout <= 200);
	assert_int_equal(poll(NULL, 0, timeout + 5), 0);
	assert_true(lz_session_exit_due(&f->s));
	assert_int_equal(lz_session_finish(&f->s), 128);
}

/* A terminal session's exit held (status 128, perhaps runsc's own): its
 * master, whose slave is gone, would report POLLHUP at once, and the
 * loop would spin for the whole hold. It is left out until then. */
static void test_lz_session_hold_exit__a_hung_up_master_does_not_spin_the_loop(void **state)
{
	struct fx *f = *state;
	struct pollfd pf[LZ_SESSION_POLLFDS];
	int timeout = -1;
	open_pty(f);
	spawn_sh(f, "exit 128", f->slave, f->slave);
	wait_ended(f);
	close(f->slave);
	f->slave = -1;
	lz_session_hold_exit(&f->s, 200);
	size_t n = lz_session_pollfds(&f->s, pf, &timeout);
	assert_true(timeout > 0 && timeout <= 200);
	assert_int_equal(poll(pf, n, timeout), 0); /* nothing ready: the loop sleeps */
	assert_true(lz_session_exit_due(&f->s));
}

/* ---- events -------------------------------------------------------------------- */

static void test_lz_session_event__input_resize_and_refusals(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	struct lz_wire_msg in = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)"ls\r", 3 } };
	/* Before the exec client runs, nothing is admitted. */
	assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_UNEXPECTED);
	struct lz_wire_msg close_in = { .type = LZ_WIRE_CLOSE_INPUT };
	assert_int_equal(lz_session_event(&f->s, &close_in), LZ_SESSION_UNEXPECTED);
	spawn_sh(f, "sleep 30", -1, -1);
	assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_HANDLED);
	assert_int_equal(f->s.in_len, 0); /* written through */
	char got[8] = "";
	assert_true(readable(f->slave, 1000));
	assert_int_equal(read(f->slave, got, sizeof(got)), 3);
	assert_memory_equal(got, "ls\r", 3);
	/* One Input in flight: a second is refused. */
	f->s.in_len = 1;
	assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_UNEXPECTED);
	f->s.in_len = 0;
	struct lz_wire_msg rs = { .type = LZ_WIRE_RESIZE, .resize = { .rows = 50, .cols = 132 } };
	assert_int_equal(lz_session_event(&f->s, &rs), LZ_SESSION_HANDLED);
	struct winsize ws;
	assert_int_equal(ioctl(f->slave, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_row, 50);
	assert_int_equal(ws.ws_col, 132);
	assert_int_equal(lz_session_event(&f->s, &close_in), LZ_SESSION_HANDLED);
	/* Records a client never sends mid-session. */
	struct lz_wire_msg hello = { .type = LZ_WIRE_HELLO };
	assert_int_equal(lz_session_event(&f->s, &hello), LZ_SESSION_UNEXPECTED);
	struct lz_wire_msg out = { .type = LZ_WIRE_OUTPUT };
	assert_int_equal(lz_session_event(&f->s, &out), LZ_SESSION_UNEXPECTED);
	/* After release began, terminal events are refused. */
	struct lz_wire_msg detach = { .type = LZ_WIRE_DETACH };
	assert_int_equal(lz_session_event(&f->s, &detach), LZ_SESSION_HANDLED);
	assert_int_equal(f->s.release, LZ_SESSION_HUP_SENT);
	assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_UNEXPECTED);
	assert_int_equal(lz_session_event(&f->s, &rs), LZ_SESSION_UNEXPECTED);
	struct lz_wire_msg sig = { .type = LZ_WIRE_SIGNAL, .sig = LZ_WIRE_SIG_INTERRUPT };
	assert_int_equal(lz_session_event(&f->s, &sig), LZ_SESSION_UNEXPECTED);
}

static void test_lz_session_event__input_without_terminal_refused(void **state)
{
	struct fx *f = *state;
	spawn_sh(f, "sleep 30", -1, -1);
	struct lz_wire_msg in = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)"x", 1 } };
	assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_UNEXPECTED);
	struct lz_wire_msg rs = { .type = LZ_WIRE_RESIZE, .resize = { .rows = 5, .cols = 5 } };
	assert_int_equal(lz_session_event(&f->s, &rs), LZ_SESSION_UNEXPECTED);
	/* Detach without a terminal: handled, no release. */
	struct lz_wire_msg detach = { .type = LZ_WIRE_DETACH };
	assert_int_equal(lz_session_event(&f->s, &detach), LZ_SESSION_HANDLED);
	assert_int_equal(f->s.release, LZ_SESSION_LIVE);
}

static void test_lz_session_event__signals_reach_the_exec_client(void **state)
{
	struct fx *f = *state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	spawn_sh(f, "trap 'echo INT' INT; trap 'echo QUIT' QUIT; echo ready; "
		    "while :; do sleep 0.05; done", -1, p[1]);
	close(p[1]);
	char buf[64] = "";
	assert_true(readable(p[0], 5000));
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6); /* "ready\n" */
	struct lz_wire_msg sig = { .type = LZ_WIRE_SIGNAL, .sig = LZ_WIRE_SIG_INTERRUPT };
	assert_int_equal(lz_session_event(&f->s, &sig), LZ_SESSION_HANDLED);
	assert_true(readable(p[0], 5000));
	memset(buf, 0, sizeof(buf));
	assert_true(read(p[0], buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "INT\n");
	sig.sig = LZ_WIRE_SIG_QUIT;
	assert_int_equal(lz_session_event(&f->s, &sig), LZ_SESSION_HANDLED);
	assert_true(readable(p[0], 5000));
	memset(buf, 0, sizeof(buf));
	assert_true(read(p[0], buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "QUIT\n");
	close(p[0]);
}

/* ---- output: bounded, one record in flight ----------------------------------- */

static void test_lz_session_read_master__bounded_output_records(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	/* More than one record's worth, written as the PTY takes it. */
	assert_int_equal(fcntl(f->slave, F_SETFL, O_NONBLOCK), 0);
	size_t total = LZ_WIRE_MAX_DATA + 1000;
	char *data = malloc(total);
	assert_non_null(data);
	for (size_t i = 0; i < total; i++)
		data[i] = (char)('a' + i % 26);
	size_t put = 0, got = 0;
	char *seen = malloc(total);
	assert_non_null(seen);
	int rounds = 0;
	while (got < total && rounds++ < 1000) {
		ssize_t w = put < total ? write(f->slave, data + put, total - put) : 0;
		if (w > 0)
			put += (size_t)w;
		if (readable(f->s.master, 100))
			lz_session_read_master(&f->s);
		assert_int_equal(f->s.out_len, 0); /* sent at once */
		struct lz_wire_msg m;
		while (next(f, &m, 0) == 0) {
			assert_int_equal(m.type, LZ_WIRE_OUTPUT);
			assert_true(m.output.len > 0 && m.output.len <= LZ_WIRE_MAX_DATA);
			memcpy(seen + got, m.output.ptr, m.output.len);
			got += m.output.len;
			lz_wire_msg_release(&m);
		}
	}
	assert_int_equal(got, total);
	assert_memory_equal(seen, data, total);
	free(data);
	free(seen);
}

#define FILL_LEN 1000

/* Fills the session's socket (a small send buffer) until a record waits
 * in its channel; returns how many records were taken. */
static int fill_client(struct fx *f)
{
	int sndbuf = 4096;
	assert_int_equal(setsockopt(f->s.client, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
	uint8_t fill[FILL_LEN];
	memset(fill, 'f', sizeof(fill));
	struct lz_wire_msg m = { .type = LZ_WIRE_OUTPUT, .output = { fill, sizeof(fill) } };
	int n = 0;
	while (lz_wire_send(f->s.tls, &m, NULL, 0, 0, NULL) == 0)
		assert_true(++n < 100000);
	return n;
}

static void test_lz_session_read_master__full_client_keeps_one_pending(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	int n = fill_client(f);
	assert_int_equal(write(f->slave, "pending", 7), 7);
	assert_true(readable(f->s.master, 1000));
	lz_session_read_master(&f->s);
	assert_int_equal(f->s.out_len, 7); /* kept, not dropped, not grown */
	assert_memory_equal(f->s.out, "pending", 7);
	/* While pending, the master is not read again. */
	assert_int_equal(write(f->slave, "more", 4), 4);
	lz_session_read_master(&f->s);
	assert_int_equal(f->s.out_len, 7);
	assert_memory_equal(f->s.out, "pending", 7);
	/* The last fill record the channel took waits in it, not in the
	 * socket: one record's ciphertext, the bound of the TLS channel. */
	assert_true(lz_tlschan_pending(f->s.tls));
	/* The client drains: the waiting records go, in order. */
	struct lz_wire_msg r;
	for (int i = 0; i < n - 1; i++) {
		assert_int_equal(next(f, &r, 1000), 0);
		lz_wire_msg_release(&r);
	}
	lz_session_flush_output(&f->s);
	assert_int_equal(f->s.out_len, 0);
	assert_int_equal(next(f, &r, 1000), 0);
	assert_int_equal(r.output.len, FILL_LEN);
	lz_wire_msg_release(&r);
	assert_int_equal(next(f, &r, 1000), 0);
	assert_int_equal(r.type, LZ_WIRE_OUTPUT);
	assert_int_equal(r.output.len, 7);
	assert_memory_equal(r.output.ptr, "pending", 7);
	lz_wire_msg_release(&r);
	lz_session_read_master(&f->s);
	assert_int_equal(next(f, &r, 1000), 0);
	assert_int_equal(r.output.len, 4);
	assert_memory_equal(r.output.ptr, "more", 4);
	lz_wire_msg_release(&r);
}

static void test_lz_session_flush_output__client_gone_starts_release(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	close(f->peer);
	f->peer = -1;
	memcpy(f->s.out, "x", 1);
	f->s.out_len = 1;
	lz_session_flush_output(&f->s);
	assert_int_equal(f->s.client, -1);
	assert_int_equal(f->s.release, LZ_SESSION_HUP_SENT);
	/* Nothing to send to: no-ops. */
	lz_session_flush_output(&f->s);
	assert_false(lz_session_busy(&(struct lz_session){ .client = -1, .exec = LZ_BROKER_CHILD_INIT }));
}

/* ---- release and end ------------------------------------------------------------ */

static void test_lz_session_advance_release__hup_term_kill(void **state)
{
	struct fx *f = *state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	open_pty(f);
	spawn_sh(f, "trap 'echo HUP' HUP; trap 'echo TERM' TERM; echo ready; "
		    "while :; do sleep 0.05; done", -1, p[1]);
	close(p[1]);
	char buf[64] = "";
	assert_true(readable(p[0], 5000));
	assert_int_equal(read(p[0], buf, sizeof(buf)), 6);
	/* Advancing a live session does nothing. */
	lz_session_advance_release(&f->s);
	assert_int_equal(f->s.release, LZ_SESSION_LIVE);
	lz_session_client_gone(&f->s);
	assert_int_equal(f->s.client, -1);
	assert_int_equal(f->s.release, LZ_SESSION_HUP_SENT);
	assert_true(readable(p[0], 5000));
	memset(buf, 0, sizeof(buf));
	assert_true(read(p[0], buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "HUP\n");
	lz_session_start_release(&f->s); /* idempotent: no second HUP */
	assert_int_equal(f->s.release, LZ_SESSION_HUP_SENT);
	/* Not due yet. */
	lz_session_advance_release(&f->s);
	assert_int_equal(f->s.release, LZ_SESSION_HUP_SENT);
	assert_false(readable(p[0], 200));
	f->s.release_at = lz_now_ms() - 1;
	lz_session_advance_release(&f->s);
	assert_int_equal(f->s.release, LZ_SESSION_TERM_SENT);
	assert_true(f->s.release_at > lz_now_ms());
	assert_true(readable(p[0], 5000));
	memset(buf, 0, sizeof(buf));
	assert_true(read(p[0], buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "TERM\n");
	f->s.release_at = lz_now_ms() - 1;
	lz_session_advance_release(&f->s);
	assert_int_equal(f->s.release, LZ_SESSION_KILL_SENT);
	f->s.release_at = lz_now_ms() - 1;
	lz_session_advance_release(&f->s); /* the last stage */
	assert_int_equal(f->s.release, LZ_SESSION_KILL_SENT);
	wait_ended(f);
	assert_int_equal(lz_session_finish(&f->s), 128 + SIGKILL);
	assert_false(f->s.running);
	close(p[0]);
}

static void test_lz_session_client_gone__without_terminal_sends_term(void **state)
{
	struct fx *f = *state;
	spawn_sh(f, "sleep 30", -1, -1);
	lz_session_client_gone(&f->s);
	assert_int_equal(f->s.client, -1);
	assert_int_equal(f->s.release, LZ_SESSION_TERM_SENT);
	wait_ended(f);
	assert_int_equal(lz_session_finish(&f->s), 128 + SIGTERM);
}

/* A guest without a terminal that ignores SIGTERM is killed after the
 * grace: it would otherwise keep the session, and the Domain, running
 * with nobody attached. */
static void test_lz_session_client_gone__without_terminal_kills_after_the_grace(void **state)
{
	struct fx *f = *state;
	spawn_sh(f, "trap '' TERM; while :; do sleep 0.05; done", -1, -1);
	usleep(200000); /* the trap is set */
	lz_session_client_gone(&f->s);
	struct pollfd p = { .fd = f->s.exec.pidfd, .events = POLLIN };
	int64_t until = lz_now_ms() + 3 * LZ_SESSION_GRACE_MS;
	while (poll(&p, 1, 50) == 0 && lz_now_ms() < until)
		lz_session_advance_release(&f->s);
	assert_true(p.revents != 0);
	assert_int_equal(f->s.release, LZ_SESSION_KILL_SENT);
	assert_int_equal(lz_session_finish(&f->s), 128 + SIGKILL);
}

static void test_lz_session_finish__drains_in_order_then_one_exit(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	/* More than one record of output, then the status. */
	spawn_sh(f, "i=0; while [ $i -lt 400 ]; do printf '%050d\\n' $i; i=$((i+1)); done; exit 7", f->slave,
		 f->slave);
	close(f->slave); /* the exec client holds the only slave: EIO after it */
	f->slave = -1;
	struct pollfd p = { .fd = f->s.exec.pidfd, .events = POLLIN };
	/* The guest blocks on a full PTY until someone reads: read as the HC
	 * would, a record at a time, until the exec client ended. */
	size_t got = 0;
	char *seen = calloc(1, 400 * 51 + 1);
	assert_non_null(seen);
	struct lz_wire_msg m;
	while (poll(&p, 1, 0) == 0) {
		if (readable(f->s.master, 50))
			lz_session_read_master(&f->s);
		while (next(f, &m, 0) == 0) {
			assert_int_equal(m.type, LZ_WIRE_OUTPUT);
			memcpy(seen + got, m.output.ptr, m.output.len);
			got += m.output.len;
			lz_wire_msg_release(&m);
		}
	}
	assert_int_equal(lz_session_finish(&f->s), 7);
	int exits = 0;
	while (next(f, &m, 500) == 0) {
		if (m.type == LZ_WIRE_OUTPUT) {
			assert_int_equal(exits, 0); /* every Output before the exit */
			memcpy(seen + got, m.output.ptr, m.output.len);
			got += m.output.len;
		} else {
			assert_int_equal(m.type, LZ_WIRE_SESSION_EXIT);
			assert_int_equal(m.exit.kind, LZ_WIRE_EXITED);
			assert_int_equal(m.exit.value, 7);
			exits++;
		}
		lz_wire_msg_release(&m);
	}
	assert_int_equal(exits, 1);
	assert_int_equal(got, 400 * 51);
	for (int i = 0; i < 400; i++) {
		char line[64];
		snprintf(line, sizeof(line), "%050d\n", i);
		assert_memory_equal(seen + (size_t)i * 51, line, 51);
	}
	free(seen);
}

static void test_lz_session_finish__pending_output_first_and_no_client(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	spawn_sh(f, "exit 0", -1, -1);
	memcpy(f->s.out, "held", 4);
	f->s.out_len = 4;
	wait_ended(f);
	assert_int_equal(lz_session_finish(&f->s), 0);
	struct lz_wire_msg m;
	assert_int_equal(next(f, &m, 1000), 0);
	assert_int_equal(m.type, LZ_WIRE_OUTPUT);
	assert_memory_equal(m.output.ptr, "held", 4);
	lz_wire_msg_release(&m);
	assert_int_equal(next(f, &m, 1000), 0);
	assert_int_equal(m.type, LZ_WIRE_SESSION_EXIT);
	lz_wire_msg_release(&m);
	/* The slot returns to free. */
	lz_session_reset(&f->s);
	assert_false(lz_session_busy(&f->s));
	assert_int_equal(f->s.master, -1);
	assert_true(next(f, &m, 100) == -EPIPE); /* the client's socket was closed */
}

/* Goes on with the session's end as the coordinator does (what it polls
 * for, then lz_session_drain) while the client reads, until it is over;
 * the client's Outputs after the first skip records go to seen. Returns
 * the SessionExits received, and the last one's status in *status. */
static int read_the_end(struct fx *f, int skip, char *seen, size_t cap, size_t *got, int *status)
{
	int exits = 0;
	for (int round = 0; round < 10000; round++) {
		struct lz_wire_msg m;
		while (next(f, &m, 0) == 0) {
			if (m.type == LZ_WIRE_SESSION_EXIT) {
				exits++;
				*status = m.exit.value;
			} else if (skip > 0) {
				skip--;
			} else {
				assert_int_equal(m.type, LZ_WIRE_OUTPUT);
				assert_int_equal(exits, 0); /* every Output before the exit */
				assert_true(*got + m.output.len <= cap);
				memcpy(seen + *got, m.output.ptr, m.output.len);
				*got += m.output.len;
			}
			lz_wire_msg_release(&m);
		}
		if (lz_session_drained(&f->s) && !readable(f->peer, 0))
			return exits;
		struct pollfd pf[LZ_SESSION_POLLFDS];
		int timeout = 50;
		size_t k = lz_session_pollfds(&f->s, pf, &timeout);
		if (poll(pf, k, timeout < 0 || timeout > 50 ? 50 : timeout) > 0)
			lz_session_drain(&f->s);
	}
	fail_msg("the end never finished");
	return -1;
}

/* A client that does not read when its guest ends (slow, or stopped)
 * holds up nobody: lz_session_finish returns at once, and once the
 * client reads it gets every byte in order and the one exit. */
static void test_lz_session_finish__a_client_not_reading_loses_nothing_and_holds_up_nobody(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	int filled = fill_client(f);
	spawn_sh(f, "i=0; while [ $i -lt 120 ]; do printf '%049d\\n' $i; i=$((i+1)); done; exit 5", f->slave,
		 f->slave);
	close(f->slave);
	f->slave = -1;
	wait_ended(f);
	assert_int_equal(lz_session_finish(&f->s), 5);
	assert_false(lz_session_drained(&f->s)); /* it waits for the client, not the caller */
	/* and asks for nothing until the client reads (no busy loop: a
	 * master without its slave is always ready) */
	struct pollfd pf[LZ_SESSION_POLLFDS];
	int timeout = -1;
	size_t k = lz_session_pollfds(&f->s, pf, &timeout);
	assert_int_equal(poll(pf, k, 200), 0);
	/* a notice (a prompt's outcome) no longer reaches an ending session */
	lz_session_notice(&f->s, "late", 4);
	assert_int_equal(f->s.notice_len, 0);
	char seen[120 * 50];
	size_t got = 0;
	int status = -1;
	/* the fill's records first (one of them waited in the channel) */
	assert_int_equal(read_the_end(f, filled, seen, sizeof(seen), &got, &status), 1);
	assert_int_equal(status, 5);
	assert_int_equal(got, sizeof(seen));
	for (int i = 0; i < 120; i++) {
		char line[64];
		snprintf(line, sizeof(line), "%049d\n", i);
		assert_memory_equal(seen + (size_t)i * 50, line, 50);
	}
}

/* A guest's background process that goes on writing to the terminal
 * after the session's command ended cannot keep the end going: the
 * master is read until it has nothing at hand or LZ_SESSION_END_BYTES
 * came, then the exit. */
static void test_lz_session_finish__output_after_the_end_is_bounded(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	spawn_sh(f, "yes endless & sleep 0.2; exit 0", f->slave, f->slave);
	close(f->slave);
	f->slave = -1;
	wait_ended(f);
	assert_int_equal(lz_session_finish(&f->s), 0);
	static char seen[LZ_SESSION_END_BYTES + LZ_WIRE_MAX_DATA];
	size_t got = 0;
	int status = -1;
	assert_int_equal(read_the_end(f, 0, seen, sizeof(seen), &got, &status), 1);
	assert_int_equal(status, 0);
	assert_true(got > 0 && got <= LZ_SESSION_END_BYTES + LZ_WIRE_MAX_DATA);
	assert_memory_equal(seen, "endless\n", 8);
}

static void test_lz_session_reset__kills_a_running_exec_client(void **state)
{
	struct fx *f = *state;
	spawn_sh(f, "sleep 30", -1, -1);
	int64_t t0 = lz_now_ms();
	lz_session_reset(&f->s);
	assert_true(lz_now_ms() - t0 < 5000);
	assert_false(lz_session_busy(&f->s));
	assert_true(f->s.exec.pidfd < 0);
}

/* ---- admission deadline ---------------------------------------------------------- */

static void test_lz_session_admission_overdue__only_before_admission(void **state)
{
	struct fx *f = *state;
	f->s.phase = LZ_SESSION_HANDSHAKE;
	f->s.admit_by = lz_now_ms() + 60000;
	struct pollfd pf[LZ_SESSION_POLLFDS];
	int timeout = -1;
	(void)lz_session_pollfds(&f->s, pf, &timeout);
	assert_true(timeout > 50000 && timeout <= 60000); /* the poll wakes for it */
	assert_false(lz_session_admission_overdue(&f->s));
	f->s.admit_by = lz_now_ms() - 1;
	assert_true(lz_session_admission_overdue(&f->s));
	f->s.phase = LZ_SESSION_ENROLLED;
	assert_true(lz_session_admission_overdue(&f->s));
	/* Admitted: no deadline any more. */
	f->s.phase = LZ_SESSION_ADMITTED;
	assert_false(lz_session_admission_overdue(&f->s));
	timeout = -1;
	(void)lz_session_pollfds(&f->s, pf, &timeout);
	assert_int_equal(timeout, -1);
}

/* ---- refusal ----------------------------------------------------------------------- */

static void test_lz_session_refuse__printable_text_and_code_bounds(void **state)
{
	struct fx *f = *state;
	struct lz_wire_msg m;
	lz_session_refuse(&f->s, ENOENT, "bad \xff path\n");
	assert_int_equal(next(f, &m, 1000), 0);
	assert_int_equal(m.type, LZ_WIRE_REFUSED);
	assert_int_equal(m.refused.code, ENOENT);
	assert_int_equal(m.refused.message_len, 11);
	assert_memory_equal(m.refused.message, "bad ? path?", 11);
	lz_wire_msg_release(&m);
	const int codes[] = { 0, -1, (int)LZ_WIRE_MAX_ERRNO + 1 };
	for (size_t i = 0; i < 3; i++) {
		lz_session_refuse(&f->s, codes[i], "x");
		assert_int_equal(next(f, &m, 1000), 0);
		assert_int_equal(m.refused.code, EIO);
		lz_wire_msg_release(&m);
	}
	/* A long message is cut to the error buffer. */
	char big[2 * LZ_ERR_MSG_MAX];
	memset(big, 'm', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	lz_session_refuse(&f->s, EPERM, big);
	assert_int_equal(next(f, &m, 1000), 0);
	assert_int_equal(m.refused.message_len, LZ_ERR_MSG_MAX - 1);
	lz_wire_msg_release(&m);
	struct lz_session nobody;
	lz_session_init(&nobody);
	lz_session_refuse(&nobody, EPERM, "nobody"); /* ignored */
}

/* A client that stopped reading gets its refusal only if its socket takes
 * it at once: the coordinator does not wait for it (REFUSE_MS, 1 s). */
static void test_lz_session_refuse__waits_for_no_stalled_client(void **state)
{
	struct fx *f = *state;
	(void)fill_client(f);
	assert_true(lz_tlschan_pending(f->s.tls));
	int64_t t0 = lz_now_ms();
	lz_session_refuse(&f->s, EPERM, "stalled");
	assert_in_range(lz_now_ms() - t0, 0, 500);
}


/* ---- the coordinator's prompt (spec 3.4, 3.8) ------------------------------------ */

/* Collects Output records into out until len bytes arrived. */
static void expect_output(struct fx *f, const char *want)
{
	size_t want_len = strlen(want), got = 0;
	char *buf = calloc(1, want_len + 1);
	assert_non_null(buf);
	while (got < want_len) {
		struct lz_wire_msg m;
		lz_session_flush_output(&f->s);
		assert_int_equal(next(f, &m, 2000), 0);
		assert_int_equal(m.type, LZ_WIRE_OUTPUT);
		assert_true(got + m.output.len <= want_len);
		memcpy(buf + got, m.output.ptr, m.output.len);
		got += m.output.len;
		lz_wire_msg_release(&m);
	}
	assert_string_equal(buf, want);
	free(buf);
}

static void test_lz_session_prompt__pauses_the_guest_and_takes_the_answer(void **state)
{
	struct fx *f = *state;
	struct pollfd pf[LZ_SESSION_POLLFDS];
	int timeout = -1;
	open_pty(f);
	/* Not running yet: no prompt. */
	assert_int_equal(lz_session_prompt(&f->s, "q? ", 3), -EINVAL);
	spawn_sh(f, "sleep 30", -1, -1);
	/* The guest has output waiting in the PTY. */
	assert_int_equal(write(f->slave, "guest", 5), 5);
	assert_int_equal(lz_session_prompt(&f->s, "Approve? [y/N] ", 15), 0);
	assert_int_equal(lz_session_prompt(&f->s, "again", 5), -EBUSY);
	/* The reset first: no control string or attribute the guest left
	 * open hides the prompt. */
	expect_output(f, LZ_SESSION_PROMPT_RESET "Approve? [y/N] ");
	/* While it waits, the master is not read: the guest's bytes stay in
	 * the kernel's buffer. */
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 3);
	assert_int_equal(pf[2].fd, f->s.master);
	assert_int_equal(pf[2].events & POLLIN, 0);
	/* Keys typed before the prompt could be read answer nothing (a 'y'
	 * meant for the guest's own question), and never reach the guest. */
	struct lz_wire_msg early = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)"y", 1 } };
	assert_int_equal(lz_session_event(&f->s, &early), LZ_SESSION_HANDLED);
	assert_true(f->s.prompting);
	assert_int_equal(lz_session_take_answer(&f->s), 0);
	usleep((LZ_SESSION_PROMPT_SETTLE_MS + 50) * 1000);
	/* Typed input is the answer, never the guest's: other keys are
	 * ignored, 'y' decides. */
	struct lz_wire_msg in = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)"xqy\r", 4 } };
	assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_HANDLED);
	assert_false(readable(f->slave, 100));
	assert_false(f->s.prompting);
	assert_int_equal(lz_session_take_answer(&f->s), 1);
	assert_int_equal(lz_session_take_answer(&f->s), 0);
	/* The outcome line, then the guest's output resumes in order. */
	lz_session_notice(&f->s, "approved\r\n", 10);
	expect_output(f, "approved\r\n");
	assert_int_equal(lz_session_pollfds(&f->s, pf, &timeout), 3);
	assert_int_equal(pf[2].events & POLLIN, POLLIN);
	lz_session_read_master(&f->s);
	expect_output(f, "guest");
}

/* The settle time counts from when the prompt has left for the client:
 * queued behind output a stalled client has not taken, it is not on the
 * developer's screen, and a 'y' typed at the guest's own question must
 * not approve it, however long it waits there. */
static void test_lz_session_prompt__settles_only_once_sent(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	int n = fill_client(f);
	assert_int_equal(lz_session_prompt(&f->s, "Approve? [y/N] ", 15), 0);
	assert_true(f->s.notice_off < f->s.notice_len || f->s.out_len > 0 || lz_tlschan_pending(f->s.tls));
	usleep((LZ_SESSION_PROMPT_SETTLE_MS + 50) * 1000);
	struct lz_wire_msg y = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)"y", 1 } };
	assert_int_equal(lz_session_event(&f->s, &y), LZ_SESSION_HANDLED);
	assert_true(f->s.prompting);
	assert_int_equal(lz_session_take_answer(&f->s), 0);
	/* The client takes what waited; the prompt goes out after it. */
	struct lz_wire_msg r;
	for (int i = 0; i < n - 1; i++) {
		assert_int_equal(next(f, &r, 1000), 0);
		lz_wire_msg_release(&r);
	}
	const char *want = LZ_SESSION_PROMPT_RESET "Approve? [y/N] ";
	size_t got = 0;
	char seen[4096];
	while (got < strlen(want) + FILL_LEN) {
		lz_session_flush_output(&f->s);
		assert_int_equal(next(f, &r, 1000), 0);
		assert_true(got + r.output.len <= sizeof(seen));
		memcpy(seen + got, r.output.ptr, r.output.len);
		got += r.output.len;
		lz_wire_msg_release(&r);
	}
	assert_memory_equal(seen + FILL_LEN, want, strlen(want));
	lz_session_flush_output(&f->s);
	/* Sent now: a key at once is still early, one after the settle time
	 * answers. */
	assert_int_equal(lz_session_event(&f->s, &y), LZ_SESSION_HANDLED);
	assert_int_equal(lz_session_take_answer(&f->s), 0);
	usleep((LZ_SESSION_PROMPT_SETTLE_MS + 50) * 1000);
	assert_int_equal(lz_session_event(&f->s, &y), LZ_SESSION_HANDLED);
	assert_int_equal(lz_session_take_answer(&f->s), 1);
}

/* The prompt has left this process but waits unread in the socket behind
 * the guest's output (the default send buffer holds a few hundred KB): a
 * key after the settle time is still early; once the client has read it
 * all, the settle time starts. */
static void test_lz_session_prompt__settles_only_once_the_client_read_it(void **state)
{
	struct fx *f = *state;
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	static char junk[4096];
	memset(junk, 'g', sizeof(junk));
	/* 64 KB relayed, none of it read by the client. The slave does not
	 * block: the kernel hands a PTY's bytes to the master in a worker of
	 * its own, so a read may find none yet, and a blocking write would
	 * wait for a read only this thread makes (a loaded CI hung here). */
	int fl = fcntl(f->slave, F_GETFL);
	assert_int_equal(fcntl(f->slave, F_SETFL, fl | O_NONBLOCK), 0);
	size_t sent = 0;
	int64_t until = lz_now_ms() + 10000;
	for (int quiet = 0; sent < 16 * sizeof(junk) || quiet < 20;) {
		ssize_t n = sent < 16 * sizeof(junk) ? write(f->slave, junk, sizeof(junk)) : 0;
		assert_true(n >= 0 || errno == EAGAIN);
		sent += n > 0 ? (size_t)n : 0;
		struct pollfd pf = { .fd = f->s.master, .events = POLLIN };
		quiet = poll(&pf, 1, n > 0 ? 0 : 5) == 0 ? quiet + 1 : 0;
		lz_session_read_master(&f->s);
		lz_session_flush_output(&f->s);
		if (f->s.out_len > 0 || lz_tlschan_pending(f->s.tls))
			fail_msg("the socket took only %zu bytes", sent);
		assert_true(lz_now_ms() < until);
	}
	assert_int_equal(fcntl(f->slave, F_SETFL, fl), 0);
	assert_int_equal(f->s.out_len, 0);
	assert_false(lz_tlschan_pending(f->s.tls));
	assert_int_equal(lz_session_prompt(&f->s, "Approve? [y/N] ", 15), 0);
	usleep((LZ_SESSION_PROMPT_SETTLE_MS + 50) * 1000);
	struct lz_wire_msg y = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)"y", 1 } };
	assert_int_equal(lz_session_event(&f->s, &y), LZ_SESSION_HANDLED);
	assert_int_equal(lz_session_take_answer(&f->s), 0);
	/* The client reads everything, the prompt last. */
	const char *want = "Approve? [y/N] ";
	struct lz_wire_msg r;
	bool prompt_seen = false;
	while (!prompt_seen) {
		assert_int_equal(next(f, &r, 1000), 0);
		prompt_seen = r.type == LZ_WIRE_OUTPUT && r.output.len >= strlen(want) &&
			      memcmp(r.output.ptr + r.output.len - strlen(want), want, strlen(want)) == 0;
		lz_wire_msg_release(&r);
	}
	assert_int_equal(lz_session_take_answer(&f->s), 0); /* sees it read: the settle time starts */
	assert_int_equal(lz_session_event(&f->s, &y), LZ_SESSION_HANDLED);
	assert_int_equal(lz_session_take_answer(&f->s), 0);
	usleep((LZ_SESSION_PROMPT_SETTLE_MS + 50) * 1000);
	assert_int_equal(lz_session_event(&f->s, &y), LZ_SESSION_HANDLED);
	assert_int_equal(lz_session_take_answer(&f->s), 1);
}

/* A prompt is shown whole or not at all, in the terminal the developer's
 * client reported (24 x 80 here, then resized), never the size the guest
 * gave its PTY: no line as wide as it, no more lines than its rows, no
 * control character but CR LF (a bare CR would let a field overwrite the
 * prompt's own line). A character beyond ASCII counts as two columns. */
static void test_lz_session_prompt__only_what_fits_the_developers_terminal(void **state)
{
	struct fx *f = *state;
	char text[4096];
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	/* The guest sets its own PTY far wider: it changes nothing. */
	struct winsize wide = { .ws_row = 500, .ws_col = 1000 };
	assert_int_equal(ioctl(f->slave, TIOCSWINSZ, &wide), 0);
	/* Nothing shown is nothing to approve. */
	assert_int_equal(lz_session_prompt(&f->s, "", 0), -EINVAL);
	memset(text, 'x', 80);
	assert_int_equal(lz_session_prompt(&f->s, text, 80), -E2BIG);
	assert_int_equal(lz_session_prompt(&f->s, text, 79), 0);
	char want[sizeof(LZ_SESSION_PROMPT_RESET) + 80];
	snprintf(want, sizeof(want), "%s%.79s", LZ_SESSION_PROMPT_RESET, text);
	expect_output(f, want);
	lz_session_notice(&f->s, "", 0);
	/* 40 two-byte characters count as 80 columns. */
	for (int i = 0; i < 40; i++)
		memcpy(text + 2 * i, "\xc3\xa9", 2);
	assert_int_equal(lz_session_prompt(&f->s, text, 80), -E2BIG);
	/* 25 lines in 24 rows; a bare CR; an escape. */
	size_t n = 0;
	for (int i = 0; i < 25; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%sl%d", i ? "\r\n" : "", i);
	assert_int_equal(lz_session_prompt(&f->s, text, n), -E2BIG);
	assert_int_equal(lz_session_prompt(&f->s, "a\rb", 3), -E2BIG);
	assert_int_equal(lz_session_prompt(&f->s, "a\x1b[2Jb", 6), -E2BIG);
	/* C1 controls: CSI as UTF-8 (U+009B), as a byte of its own, and
	 * other bytes that are no UTF-8. */
	assert_int_equal(lz_session_prompt(&f->s, "a\xc2\x9b" "2Jb", 6), -E2BIG);
	assert_int_equal(lz_session_prompt(&f->s, "a\x9b" "2Jb", 5), -E2BIG);
	assert_int_equal(lz_session_prompt(&f->s, "a\xc3", 2), -E2BIG);
	assert_int_equal(lz_session_prompt(&f->s, "a\xc0\xaf", 3), -E2BIG);
	/* The developer's terminal grew: the 25 lines fit. */
	struct lz_wire_msg grow = { .type = LZ_WIRE_RESIZE, .resize = { .rows = 30, .cols = 100 } };
	assert_int_equal(lz_session_event(&f->s, &grow), LZ_SESSION_HANDLED);
	assert_int_equal(lz_session_prompt(&f->s, text, n), 0);
}

static int answer_to(struct fx *f, const char *bytes)
{
	struct lz_wire_msg in = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)bytes, strlen(bytes) } };
	assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_HANDLED);
	return lz_session_take_answer(&f->s);
}

/* A terminal's reports (the guest asks for them: DECRQM's reply ends in
 * 'y') and function keys are control sequences: no byte of one answers,
 * in 7- or 8-bit form, split across records or not. ^C denies inside
 * one. */
static void test_lz_session_prompt__control_sequences_never_answer(void **state)
{
	struct fx *f = *state;
	static const char *const reports[] = {
		"\x1b[?2004;2$y",	       /* DECRPM */
		"\x9b?1;2$y",		       /* the same, 8-bit */
		"\x1bP1$ry\x1b\\",	       /* DECRPSS */
		"\x1b]11;rgb:yyyy/0000/0000\x07", /* OSC colour */
		"\x9d\x31\x31;y\x9c",	       /* OSC, 8-bit ("11;y") */
		"\x1bOy",		       /* SS3 (keypad) */
		"\x1by",		       /* Alt+y */
		"\x1b#y",		       /* ESC with an intermediate */
		"\x1b[M yy",		       /* X10 mouse report, column 89 */
		"\x1b[M \xc2\x80y",	       /* mode 1005: column 96 in UTF-8, row 89 */
		"\x1b[M\xc2\x80\xc2\x80y",      /* and a button past 95 */
		"\x9bM#yY",		       /* the same, 8-bit CSI */
		"\x1b[tyY",		       /* highlight tracking */
		"\x1b[TyYyYyY",
	};
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	assert_int_equal(lz_session_prompt(&f->s, "? ", 2), 0);
	expect_output(f, LZ_SESSION_PROMPT_RESET "? ");
	f->s.answer_after = 0; /* as if the settle time had passed */
	for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++)
		if (answer_to(f, reports[i]) != 0)
			fail_msg("report %zu answered the prompt", i);
	/* split: the sequence goes on in the next record */
	assert_int_equal(answer_to(f, "\x1b[?20"), 0);
	assert_int_equal(answer_to(f, "04;2$y"), 0);
	assert_int_equal(answer_to(f, "\x1b[M"), 0);
	assert_int_equal(answer_to(f, " y"), 0);
	assert_int_equal(answer_to(f, "y"), 0);
	/* with parameters, M ends the sequence (urxvt's and SGR's reports) */
	assert_int_equal(answer_to(f, "\x1b[0;89;1M"), 0);
	assert_true(f->s.prompting);
	assert_int_equal(answer_to(f, "y"), 1);
	lz_session_notice(&f->s, "", 0);
	/* ^C inside an unterminated string still denies. */
	assert_int_equal(lz_session_prompt(&f->s, "? ", 2), 0);
	expect_output(f, LZ_SESSION_PROMPT_RESET "? ");
	f->s.answer_after = 0;
	assert_int_equal(answer_to(f, "\x1b]0;y"), 0);
	assert_int_equal(answer_to(f, "\x03"), -1);
	lz_session_notice(&f->s, "", 0);
}

/* What the guest may have turned on that would make the terminal answer
 * for the developer, or show the prompt otherwise than it reads, is off
 * before the prompt's first byte. */
static void test_lz_session_prompt__reset_turns_off_reports_and_decodings(void **state)
{
	(void)state;
	static const char *const off[] = {
		"\x1b[?9l", "\x1b[?1000l", "\x1b[?1001l", "\x1b[?1002l", "\x1b[?1003l", /* mouse */
		"\x1b[?1004l", "\x1b[?2004l",				      /* focus, paste */
		"\x1b[=0;1u", "\x1b[>4m",					      /* key modes */
		"\x1b<", "\x1b%G",						      /* VT52, UTF-8 */
	};
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		if (strstr(LZ_SESSION_PROMPT_RESET, off[i]) == NULL)
			fail_msg("the prompt's reset lacks sequence %zu", i);
}

/* The guest stops reading its terminal, so one Input waits for the
 * master: without a prompt the client is not read (backpressure), but
 * with one it is, so the keys and reports held back before the prompt
 * are read in its settle time and dropped, never taken after it. */
static void test_lz_session_prompt__held_input_is_read_and_dropped(void **state)
{
	struct fx *f = *state;
	struct pollfd pf[LZ_SESSION_POLLFDS];
	int timeout = -1;
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	f->s.in_len = 1; /* an Input the master has not taken */
	assert_true(lz_session_pollfds(&f->s, pf, &timeout) >= 1);
	assert_int_equal(pf[0].fd, f->s.client);
	assert_int_equal(pf[0].events & POLLIN, 0);
	assert_int_equal(lz_session_prompt(&f->s, "? ", 2), 0);
	expect_output(f, LZ_SESSION_PROMPT_RESET "? ");
	assert_true(lz_session_pollfds(&f->s, pf, &timeout) >= 1);
	assert_int_equal(pf[0].events & POLLIN, POLLIN);
	assert_int_equal(answer_to(f, "yyy"), 0);
	assert_true(f->s.prompting);
	f->s.in_len = 0;
	lz_session_notice(&f->s, "", 0);
}

static void test_lz_session_prompt__deny_keys_and_no_terminal(void **state)
{
	struct fx *f = *state;
	static const char *const deny[] = { "n", "N", "\r", "\n", "\x03", "\x04" };
	open_pty(f);
	spawn_sh(f, "sleep 30", -1, -1);
	for (size_t i = 0; i < sizeof(deny) / sizeof(deny[0]); i++) {
		assert_int_equal(lz_session_prompt(&f->s, "? ", 2), 0);
		expect_output(f, LZ_SESSION_PROMPT_RESET "? ");
		f->s.answer_after = 0; /* as if the settle time had passed */
		struct lz_wire_msg in = { .type = LZ_WIRE_INPUT, .input = { (const uint8_t *)deny[i], 1 } };
		assert_int_equal(lz_session_event(&f->s, &in), LZ_SESSION_HANDLED);
		assert_int_equal(lz_session_take_answer(&f->s), -1);
		lz_session_notice(&f->s, "", 0);
	}
	/* A long prompt goes out whole, in record-sized pieces (lines of 60
	 * columns, in a terminal tall enough for all of them). */
	struct lz_wire_msg tall = { .type = LZ_WIRE_RESIZE, .resize = { .rows = 4000, .cols = 100 } };
	assert_int_equal(lz_session_event(&f->s, &tall), LZ_SESSION_HANDLED);
	size_t big = 3 * LZ_WIRE_MAX_DATA + 7, reset = sizeof(LZ_SESSION_PROMPT_RESET) - 1;
	char *text = malloc(reset + big + 1);
	assert_non_null(text);
	memcpy(text, LZ_SESSION_PROMPT_RESET, reset);
	for (size_t i = 0; i < big; i++)
		text[reset + i] = i % 62 == 60 ? '\r' : i % 62 == 61 ? '\n' : (char)('a' + i % 26);
	text[reset + big] = '\0';
	assert_int_equal(lz_session_prompt(&f->s, text + reset, big), 0);
	expect_output(f, text);
	free(text);
	lz_session_notice(&f->s, "", 0);
	/* A session without a terminal is never prompted. */
	struct fx g = { .peer = -1, .slave = -1 };
	lz_session_init(&g.s);
	g.s.running = true;
	assert_int_equal(lz_session_prompt(&g.s, "? ", 2), -EINVAL);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_session_admission_overdue__only_before_admission),
		cmocka_unit_test(test_lz_session_init__free_slot),
		T(test_lz_session_prompt__pauses_the_guest_and_takes_the_answer),
		T(test_lz_session_prompt__settles_only_once_sent),
		T(test_lz_session_prompt__settles_only_once_the_client_read_it),
		T(test_lz_session_prompt__only_what_fits_the_developers_terminal),
		T(test_lz_session_prompt__deny_keys_and_no_terminal),
		T(test_lz_session_prompt__control_sequences_never_answer),
		T(test_lz_session_prompt__reset_turns_off_reports_and_decodings),
		T(test_lz_session_prompt__held_input_is_read_and_dropped),
		T(test_lz_session_open_pty__pair_and_window),
		T(test_lz_session_pollfds__backpressure),
		T(test_lz_session_hold_exit__pidfd_left_out_until_due),
		T(test_lz_session_hold_exit__a_hung_up_master_does_not_spin_the_loop),
		T(test_lz_session_event__input_resize_and_refusals),
		T(test_lz_session_event__input_without_terminal_refused),
		T(test_lz_session_event__signals_reach_the_exec_client),
		T(test_lz_session_read_master__bounded_output_records),
		T(test_lz_session_read_master__full_client_keeps_one_pending),
		T(test_lz_session_flush_output__client_gone_starts_release),
		T(test_lz_session_advance_release__hup_term_kill),
		T(test_lz_session_client_gone__without_terminal_sends_term),
		T(test_lz_session_client_gone__without_terminal_kills_after_the_grace),
		T(test_lz_session_finish__drains_in_order_then_one_exit),
		T(test_lz_session_finish__pending_output_first_and_no_client),
		T(test_lz_session_finish__a_client_not_reading_loses_nothing_and_holds_up_nobody),
		T(test_lz_session_finish__output_after_the_end_is_bounded),
		T(test_lz_session_reset__kills_a_running_exec_client),
		T(test_lz_session_refuse__printable_text_and_code_bounds),
		T(test_lz_session_refuse__waits_for_no_stalled_client),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
