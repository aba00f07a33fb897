/* One Client Session on the HC's side; see session.h. */
#include "session/session.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <termios.h>
#include <unistd.h>

#include "proc/spawn.h"
#include "util/cleanup.h"
#include "util/postcard.h"

static_assert(offsetof(struct lz_session, in) == offsetof(struct lz_session, out) + LZ_WIRE_MAX_DATA &&
		      sizeof(struct lz_session) == offsetof(struct lz_session, in) + LZ_WIRE_MAX_DATA,
	      "the relay buffers are the last members");

/* Zeroing all of a slot's 33 KB wrote every page of every free slot (the
 * coordinator's 64 at its start, each a page fault here: 6 ms). */
void lz_session_init(struct lz_session *s)
{
	memset(s, 0, offsetof(struct lz_session, out));
	s->client = -1;
	s->master = -1;
	s->exec = (struct lz_broker_child)LZ_BROKER_CHILD_INIT;
}

void lz_session_connected(struct lz_session *s, int fd, struct lz_tlschan *tls)
{
	s->client = fd;
	s->tls = tls;
	s->phase = LZ_SESSION_HANDSHAKE;
	s->admit_by = lz_now_ms() + LZ_SESSION_ADMIT_MS;
}

bool lz_session_admission_overdue(const struct lz_session *s)
{
	return s->client >= 0 && s->phase != LZ_SESSION_ADMITTED && lz_remaining_ms(s->admit_by) == 0;
}

/* The connection goes: its channel, then its socket. */
static void drop_client(struct lz_session *s)
{
	lz_tlschan_free(s->tls);
	s->tls = NULL;
	lz_close_fdp(&s->client);
	s->client = -1;
}

bool lz_session_busy(const struct lz_session *s)
{
	return s->client >= 0 || s->exec.pidfd >= 0;
}

int lz_session_open_pty(struct lz_session *s, uint16_t rows, uint16_t cols, int *ret_slave,
			struct lz_err *err)
{
	if (rows == 0 || cols == 0)
		return lz_err_set(err, EINVAL, "a terminal needs non-zero rows and columns");
	_cleanup_close_ int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return lz_err_set(err, errno, "open a PTY: %s", strerror(errno));
	struct winsize ws = { .ws_row = rows, .ws_col = cols };
	if (grantpt(master) < 0 || unlockpt(master) < 0 || ioctl(master, TIOCSWINSZ, &ws) < 0 ||
	    fcntl(master, F_SETFL, O_NONBLOCK) < 0)
		return lz_err_set(err, errno, "set up the PTY: %s", strerror(errno));
	int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		return lz_err_set(err, errno, "open the PTY's slave: %s", strerror(errno));
	s->master = TAKE_FD(master);
	s->tty = true;
	s->rows = rows;
	s->cols = cols;
	*ret_slave = slave;
	return 0;
}

void lz_session_started(struct lz_session *s, const struct lz_broker_child *exec)
{
	s->exec = *exec;
	s->running = true;
}

#define PROMPT_READ_LOOK_MS 20

/* Whether the client has read everything sent to it: its socket's queue
 * (SIOCOUTQ, what the peer has not taken) is empty. Unknown is unread. */
static bool client_read_all(const struct lz_session *s)
{
	int queued = 0;
	return ioctl(s->client, SIOCOUTQ, &queued) == 0 && queued == 0;
}

/* Whether a prompt waits for its settle time to start. */
static bool settle_pending(const struct lz_session *s)
{
	return s->prompting && s->answer_after == INT64_MAX && s->client >= 0;
}

size_t lz_session_pollfds(const struct lz_session *s, struct pollfd *pf, int *timeout_ms)
{
	size_t n = 0;
	if (s->leader_by) {
		int left = lz_remaining_ms(s->leader_by);
		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
	} else if (s->client >= 0) {
		bool queued = s->out_len > 0 || (s->tls != NULL && lz_tlschan_pending(s->tls));
		/* Ending, nothing more is read from the client (its hangup
		 * still shows). */
		bool reading = !s->end_by && (s->in_len == 0 || s->prompting);
		pf[n++] = (struct pollfd){ .fd = s->client,
					   .events = (short)((reading ? POLLIN : 0) | (queued ? POLLOUT : 0)) };
	}
	if (s->end_by) {
		/* Only while what was read is all sent: a master without its
		 * slave reports POLLHUP at once, whether drain can take more
		 * or not. */
		if (s->master >= 0 && s->out_len == 0 && s->client >= 0 && !lz_tlschan_pending(s->tls))
			pf[n++] = (struct pollfd){ .fd = s->master, .events = POLLIN };
		int left = lz_remaining_ms(s->end_by);
		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
		return n;
	}
	if (s->exec.pidfd >= 0 && !s->exit_held_until)
		pf[n++] = (struct pollfd){ .fd = s->exec.pidfd, .events = POLLIN };
	/* Backpressure: no read while an Output is pending or nobody is there
	 * to take it. */
	bool paused = s->prompting || s->notice_off < s->notice_len;
	/* Not while an ended exec client's status is held: without its slave
	 * the master reports POLLHUP at once, and the loop would spin; the
	 * end drains it (lz_session_finish). */
	if (s->master >= 0 && s->running && !s->exit_held_until)
		pf[n++] = (struct pollfd){ .fd = s->master,
					   .events = (short)((s->out_len == 0 && s->client >= 0 && !paused ? POLLIN : 0) |
							     (s->in_len > 0 ? POLLOUT : 0)) };
	if (s->client >= 0 && s->phase != LZ_SESSION_ADMITTED) {
		int left = lz_remaining_ms(s->admit_by);
		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
	}
	if (s->release != LZ_SESSION_LIVE && s->exec.pidfd >= 0) {
		int left = lz_remaining_ms(s->release_at);
		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
	}
	if (s->exit_held_until) {
		int left = lz_remaining_ms(s->exit_held_until);
		if (*timeout_ms < 0 || left < *timeout_ms)
			*timeout_ms = left;
	}
	/* Nothing wakes the loop when the client reads what it was sent:
	 * look again soon while a prompt waits for that. */
	if (settle_pending(s) && (*timeout_ms < 0 || *timeout_ms > PROMPT_READ_LOOK_MS))
		*timeout_ms = PROMPT_READ_LOOK_MS;
	return n;
}

void lz_session_hold_exit(struct lz_session *s, int ms)
{
	s->exit_held_until = lz_now_ms() + (ms > 0 ? ms : 1);
}

bool lz_session_exit_due(const struct lz_session *s)
{
	return s->exit_held_until != 0 && lz_remaining_ms(s->exit_held_until) == 0;
}

void lz_session_flush_input(struct lz_session *s)
{
	while (s->in_off < s->in_len) {
		ssize_t n = write(s->master, s->in + s->in_off, s->in_len - s->in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		s->in_off += (size_t)n;
	}
	if (s->in_off == s->in_len)
		s->in_len = s->in_off = 0;
}

/* Spec 3.8: the settle time counts from when the client has read the whole
 * prompt, not from when it was queued behind the guest's output (a
 * stalled client, a slow link) or left this process (the socket holds as
 * much as its buffer): a key typed at what the guest drew before it, its
 * own "[y/N]" included, must not answer a prompt not yet shown. */
static void settle_from_sent(struct lz_session *s)
{
	if (settle_pending(s) && s->notice_off == s->notice_len && s->out_len == 0 &&
	    !lz_tlschan_pending(s->tls) && client_read_all(s))
		s->answer_after = lz_now_ms() + LZ_SESSION_PROMPT_SETTLE_MS;
}

static void flush_output(struct lz_session *s);

void lz_session_flush_output(struct lz_session *s)
{
	flush_output(s);
	settle_from_sent(s);
}

static void flush_output(struct lz_session *s)
{
	if (s->client >= 0 && lz_tlschan_pending(s->tls)) {
		int r = lz_tlschan_flush(s->tls, 0, NULL);
		if (r == -EAGAIN)
			return;
		if (r < 0) {
			lz_session_client_gone(s);
			return;
		}
	}
	for (;;) {
		/* The notice goes out in record-sized pieces, after the guest's
		 * output already taken and before any more of it. */
		if (s->out_len == 0 && s->notice_off < s->notice_len) {
			size_t n = s->notice_len - s->notice_off;
			if (n > sizeof(s->out))
				n = sizeof(s->out);
			memcpy(s->out, s->notice + s->notice_off, n);
			s->notice_off += n;
			s->out_len = n;
		}
		if (s->out_len == 0 || s->client < 0)
			return;
		struct lz_wire_msg m = { .type = LZ_WIRE_OUTPUT, .output = { s->out, s->out_len } };
		int r = lz_wire_send(s->tls, &m, NULL, 0, 0, NULL);
		if (r == 0)
			s->out_len = 0;
		else if (r != -EAGAIN)
			lz_session_client_gone(s);
		if (r != 0 || s->notice_off == s->notice_len)
			return;
	}
}

/* The notice is prefix (a C string) then text. */
static int set_notice(struct lz_session *s, const char *prefix, const char *text, size_t len)
{
	size_t n = strlen(prefix);
	char *copy = malloc(n + len ? n + len : 1);
	if (copy == NULL)
		return -ENOMEM;
	memcpy(copy, prefix, n);
	memcpy(copy + n, text, len);
	free(s->notice);
	s->notice = copy;
	s->notice_len = n + len;
	s->notice_off = 0;
	lz_session_flush_output(s);
	return 0;
}

/* Spec 3.8: the developer sees the whole prompt at once. No line as wide
 * as the terminal (a line that wraps could draw rows that start like the
 * prompt's own), no more lines than it has rows (the first ones would
 * scroll away), and no control character but the line ends (CR LF): none
 * of C0, DEL, and none of C1 either, as UTF-8 (U+0080 to U+009F, which
 * a terminal may take for CSI and the like) or as a byte of its own
 * (invalid UTF-8, which a terminal that ignored the reset's return to
 * UTF-8 reads as 8-bit controls). A character beyond ASCII counts as two
 * columns, the most a terminal gives one. The text is escaped already
 * (escalation.h): this is the second line of defence. */
static bool prompt_fits(const char *text, size_t len, uint16_t rows, uint16_t cols)
{
	size_t lines = 1, width = 0;
	if (!lz_pc_utf8_valid((const uint8_t *)text, len))
		return false;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)text[i];
		if (c == '\r' && i + 1 < len && text[i + 1] == '\n') {
			lines++;
			width = 0;
			i++;
			continue;
		}
		if (c < 0x20 || c == 0x7f || (c == 0xc2 && i + 1 < len && (uint8_t)text[i + 1] <= 0x9f))
			return false;
		if ((c & 0xc0) != 0x80 && (width += c < 0x80 ? 1 : 2) >= cols)
			return false;
	}
	return lines <= rows;
}

int lz_session_prompt(struct lz_session *s, const char *text, size_t len)
{
	if (!s->tty || !s->running || s->release != LZ_SESSION_LIVE || len == 0)
		return -EINVAL; /* an empty prompt would take a 'y' for nothing shown */
	if (s->prompting || s->notice_off < s->notice_len)
		return -EBUSY;
	if (!prompt_fits(text, len, s->rows, s->cols))
		return -E2BIG;
	int r = set_notice(s, LZ_SESSION_PROMPT_RESET, text, len);
	if (r == 0) {
		s->prompting = true;
		s->answer = 0;
		s->answer_seq = 0;
		s->answer_after = INT64_MAX; /* until all of it is sent */
		settle_from_sent(s);
	}
	return r;
}

int lz_session_take_answer(struct lz_session *s)
{
	settle_from_sent(s); /* the client may have read the prompt since */
	int a = s->answer;
	s->answer = 0;
	return a;
}

void lz_session_notice(struct lz_session *s, const char *text, size_t len)
{
	s->prompting = false;
	s->answer = 0;
	if (s->tty && s->client >= 0 && !s->end_by) /* nothing follows the SessionExit */
		(void)set_notice(s, "", text, len);
}

/* Where the answer's reader is in a control sequence (ECMA-48): after
 * CSI, in its parameters, or SEQ_SKIP + n: n raw bytes of a mouse report
 * still to come; SEQ_UTF8_CONT on any of these: the byte before was a
 * UTF-8 lead byte in a report, whose continuation byte comes first. */
enum { SEQ_NONE, SEQ_ESC, SEQ_ESC_INTER, SEQ_CSI, SEQ_CSI_PARAMS, SEQ_SS3, SEQ_STRING, SEQ_STRING_ESC, SEQ_SKIP };
#define SEQ_UTF8_CONT 0x80

/* The raw bytes after a CSI final byte with no parameters: xterm's mouse
 * reports CSI M Cb Cx Cy (X10 and normal tracking), CSI t Cx Cy and CSI T
 * and six (highlight tracking). Their coordinates are 32 + column or row,
 * any printable byte: 'y' in column 89. The prompt's reset turns these
 * reports off; a report already on its way is still no key. */
static uint8_t csi_raw_bytes(uint8_t final)
{
	return final == 'M' ? 3 : final == 't' ? 2 : final == 'T' ? 6 : 0;
}

/* One byte of input while a prompt waits: the state after it; *key is
 * set when the byte is a key typed on its own (outside any sequence). */
static uint8_t answer_seq_step(uint8_t seq, uint8_t c, bool *key)
{
	*key = false;
	if (seq & SEQ_UTF8_CONT) {
		seq &= (uint8_t)~SEQ_UTF8_CONT;
		if ((c & 0xc0) == 0x80)
			return seq;
		/* no continuation: the lead byte was a coordinate of its own */
	}
	if (seq > SEQ_SKIP) {
		/* a report's raw byte, whatever its value; in xterm's mode 1005 a
		 * coordinate past 95 is a UTF-8 sequence of two bytes (in the
		 * other modes a coordinate byte followed by a byte 0x80 to 0xbf
		 * is taken the same way: the byte after the report is dropped,
		 * never taken for a key) */
		uint8_t rest = seq - 1 > SEQ_SKIP ? seq - 1 : SEQ_NONE;
		return c >= 0xc2 && c <= 0xdf ? (uint8_t)(rest | SEQ_UTF8_CONT) : rest;
	}
	if (c == 0x18 || c == 0x1a)
		return SEQ_NONE; /* CAN, SUB: end any sequence */
	switch (seq) {
	case SEQ_ESC:
	case SEQ_ESC_INTER:
		if (c == '[')
			return seq == SEQ_ESC ? SEQ_CSI : SEQ_NONE;
		if (seq == SEQ_ESC && (c == 'P' || c == ']' || c == 'X' || c == '^' || c == '_'))
			return SEQ_STRING;
		if (seq == SEQ_ESC && c == 'O')
			return SEQ_SS3;
		if (c >= 0x20 && c <= 0x2f)
			return SEQ_ESC_INTER;
		return c == 0x1b ? SEQ_ESC : SEQ_NONE; /* the final byte (Alt+key too) */
	case SEQ_CSI:
	case SEQ_CSI_PARAMS:
		if (c == 0x1b)
			return SEQ_ESC;
		if (c < 0x40 || c > 0x7e)
			return SEQ_CSI_PARAMS;
		return seq == SEQ_CSI && csi_raw_bytes(c) ? (uint8_t)(SEQ_SKIP + csi_raw_bytes(c)) : SEQ_NONE;
	case SEQ_SS3:
		return SEQ_NONE;
	case SEQ_STRING:
		if (c == 0x07 || c == 0x9c)
			return SEQ_NONE; /* BEL, ST */
		return c == 0x1b ? SEQ_STRING_ESC : SEQ_STRING;
	case SEQ_STRING_ESC:
		return c == '\\' ? SEQ_NONE : c == 0x1b ? SEQ_STRING_ESC : SEQ_STRING;
	default:
		break;
	}
	if (c == 0x1b)
		return SEQ_ESC;
	if (c == 0x9b)
		return SEQ_CSI; /* 8-bit replies (S8C1T) */
	if (c == 0x8f)
		return SEQ_SS3;
	if (c == 0x90 || c == 0x9d || c == 0x98 || c == 0x9e || c == 0x9f)
		return SEQ_STRING;
	*key = true;
	return SEQ_NONE;
}

/* Input while a prompt waits: the first answer key decides; the rest of
 * the record is dropped, never passed to the guest. */
static void answer_from(struct lz_session *s, const uint8_t *in, size_t len)
{
	bool settled = lz_now_ms() >= s->answer_after; /* else typed before the prompt could be read */
	for (size_t i = 0; i < len && s->answer == 0; i++) {
		uint8_t c = in[i];
		bool key;
		s->answer_seq = answer_seq_step(s->answer_seq, c, &key);
		if (!settled)
			continue;
		if (c == 0x03 || c == 0x04)
			s->answer = -1; /* ^C, ^D: deny, whatever came before */
		else if (key && (c == 'y' || c == 'Y'))
			s->answer = 1;
		else if (key && (c == 'n' || c == 'N' || c == '\r' || c == '\n'))
			s->answer = -1;
	}
	if (s->answer != 0)
		s->prompting = false;
}

void lz_session_read_master(struct lz_session *s)
{
	if (s->out_len > 0 || s->master < 0)
		return;
	ssize_t n = read(s->master, s->out, sizeof(s->out));
	if (n > 0) {
		s->out_len = (size_t)n;
		lz_session_flush_output(s);
	}
}

void lz_session_start_release(struct lz_session *s)
{
	if (s->release != LZ_SESSION_LIVE || s->exec.pidfd < 0)
		return;
	(void)lz_broker_signal(&s->exec, SIGHUP);
	s->release = LZ_SESSION_HUP_SENT;
	s->release_at = lz_now_ms() + LZ_SESSION_GRACE_MS;
}

void lz_session_advance_release(struct lz_session *s)
{
	if (s->release == LZ_SESSION_LIVE || s->release == LZ_SESSION_KILL_SENT || s->exec.pidfd < 0 ||
	    lz_remaining_ms(s->release_at) > 0)
		return;
	(void)lz_broker_signal(&s->exec, s->release == LZ_SESSION_HUP_SENT ? SIGTERM : SIGKILL);
	s->release++;
	s->release_at = lz_now_ms() + LZ_SESSION_GRACE_MS;
}

void lz_session_client_gone(struct lz_session *s)
{
	drop_client(s);
	if (s->tty) {
		lz_session_start_release(s);
	} else if (s->exec.pidfd >= 0 && s->release == LZ_SESSION_LIVE) {
		/* SIGTERM, then SIGKILL after the grace: a guest that ignores
		 * the first would keep the session, and the Domain, running with
		 * nobody attached (found by review). */
		(void)lz_broker_signal(&s->exec, SIGTERM);
		s->release = LZ_SESSION_TERM_SENT;
		s->release_at = lz_now_ms() + LZ_SESSION_GRACE_MS;
	}
}

enum lz_session_verdict lz_session_event(struct lz_session *s, const struct lz_wire_msg *m)
{
	/* Spec 3.4: Interrupt, Quit and Suspend for the guest's group; the
	 * exec client forwards them through runsc exec. */
	static const int sigs[] = { [LZ_WIRE_SIG_INTERRUPT] = SIGINT, [LZ_WIRE_SIG_QUIT] = SIGQUIT,
				    [LZ_WIRE_SIG_SUSPEND] = SIGTSTP, [LZ_WIRE_SIG_HANGUP] = SIGHUP,
				    [LZ_WIRE_SIG_TERMINATE] = SIGTERM };
	bool live = s->running && s->release == LZ_SESSION_LIVE;
	switch (m->type) {
	case LZ_WIRE_SIGNAL:
		if (!live)
			break;
		(void)lz_broker_signal(&s->exec, sigs[m->sig]);
		return LZ_SESSION_HANDLED;
	case LZ_WIRE_INPUT:
		if (!live || !s->tty)
			break;
		if (s->prompting) {
			answer_from(s, m->input.ptr, m->input.len);
			return LZ_SESSION_HANDLED;
		}
		if (s->in_len > 0)
			break;
		memcpy(s->in, m->input.ptr, m->input.len);
		s->in_len = m->input.len;
		s->in_off = 0;
		lz_session_flush_input(s);
		return LZ_SESSION_HANDLED;
	case LZ_WIRE_RESIZE: {
		if (!live || !s->tty)
			break;
		/* The kernel sends SIGWINCH to the PTY's foreground group (runsc
		 * exec), which forwards it to the guest's. */
		struct winsize ws = { .ws_row = m->resize.rows, .ws_col = m->resize.cols };
		(void)ioctl(s->master, TIOCSWINSZ, &ws);
		if (m->resize.rows > 0 && m->resize.cols > 0) {
			s->rows = m->resize.rows;
			s->cols = m->resize.cols;
		}
		return LZ_SESSION_HANDLED;
	}
	case LZ_WIRE_DETACH:
		if (!s->running)
			break;
		if (s->tty)
			lz_session_start_release(s);
		return LZ_SESSION_HANDLED;
	case LZ_WIRE_CLOSE_INPUT:
		/* End of input on a terminal is the ^D byte; without one the
		 * command holds the client's own stdin. */
		if (!s->running)
			break;
		return LZ_SESSION_HANDLED;
	default:
		break;
	}
	return LZ_SESSION_UNEXPECTED;
}

/* Sends one record and what the channel holds, waiting (bounded) while
 * the client's socket is full. */
static void send_bounded(struct lz_session *s, const struct lz_wire_msg *m, int64_t deadline)
{
	if (lz_wire_send(s->tls, m, NULL, 0, lz_remaining_ms(deadline), NULL) == 0)
		(void)lz_tlschan_flush(s->tls, lz_remaining_ms(deadline), NULL);
}

int lz_session_finish(struct lz_session *s)
{
	int status = 255;
	struct lz_err ignored;
	(void)lz_broker_wait(&s->exec, 0, &status, &ignored);
	s->running = false;
	s->exit_held_until = 0;
	s->end_status = status;
	s->end_by = lz_now_ms() + LZ_SESSION_END_MS;
	lz_session_drain(s);
	return status;
}

void lz_session_drain(struct lz_session *s)
{
	if (!s->end_by)
		return;
	for (;;) {
		lz_session_flush_output(s); /* what waits, the notice included */
		if (s->client < 0 || s->out_len > 0 || lz_tlschan_pending(s->tls))
			return; /* gone, or until the socket takes more */
		if (s->end_read >= LZ_SESSION_END_BYTES)
			lz_close_fdp(&s->master);
		if (s->master < 0)
			break;
		ssize_t n = read(s->master, s->out, sizeof(s->out));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* EIO: no slave left; EAGAIN: drained, a background
			 * process may hold the slave yet */
			lz_close_fdp(&s->master);
			break;
		}
		s->end_read += (size_t)n;
		s->out_len = (size_t)n;
	}
	if (s->end_sent)
		return;
	struct lz_wire_msg m = { .type = LZ_WIRE_SESSION_EXIT,
				 .exit = { .kind = LZ_WIRE_EXITED, .value = (uint8_t)s->end_status } };
	int r = lz_wire_send(s->tls, &m, NULL, 0, 0, NULL);
	if (r == 0)
		s->end_sent = true;
	else if (r != -EAGAIN)
		drop_client(s);
}

bool lz_session_drained(const struct lz_session *s)
{
	return s->end_by &&
	       (s->client < 0 || (s->end_sent && !lz_tlschan_pending(s->tls)) || lz_remaining_ms(s->end_by) == 0);
}

/* A refusal is a small record into an idle socket; into one that holds
 * unsent records already (the client stopped reading) it is not waited
 * for: the coordinator serves everyone else meanwhile. */
#define REFUSE_MS 1000

void lz_session_refuse(struct lz_session *s, int code, const char *msg)
{
	if (s->client < 0 || s->phase != LZ_SESSION_ADMITTED)
		return;
	char text[LZ_ERR_MSG_MAX];
	size_t n = strnlen(msg, sizeof(text) - 1);
	/* Refused carries UTF-8: a non-UTF-8 path in a message must not keep
	 * the refusal from reaching the client. */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)msg[i];
		text[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	text[n] = '\0';
	if (code <= 0 || code > (int)LZ_WIRE_MAX_ERRNO)
		code = EIO;
	struct lz_wire_msg m = { .type = LZ_WIRE_REFUSED,
				 .refused = { .code = (uint32_t)code, .message = text, .message_len = n } };
	bool stalled = s->out_len > 0 || lz_tlschan_pending(s->tls);
	send_bounded(s, &m, lz_now_ms() + (stalled ? 0 : REFUSE_MS));
}

void lz_session_reset(struct lz_session *s)
{
	lz_broker_kill(&s->exec);
	drop_client(s);
	lz_close_fdp(&s->master);
	free(s->notice);
	lz_session_init(s);
}
