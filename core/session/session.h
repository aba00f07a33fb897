/* One Client Session on the Host Coordinator's side (spec 3.4, FR-14,
 * FR-15): its client connection, its exec client, and for a terminal
 * session the PTY pair and the byte relay.
 *
 * The HC owns the PTY master; the slave, opened through the master with
 * TIOCGPTPEER (never by name), becomes the exec client's standard streams
 * and controlling terminal. A session holds at most one record in flight
 * each way (and one Output's ciphertext in its TLS channel): an Output the client has not taken stops reading the master
 * (the guest then blocks in the kernel's PTY buffer, never in HC memory),
 * and an Input not yet written to the master stops reading the client, so
 * one session can neither grow the HC nor delay another session's events.
 *
 * Release (client loss or Detach): SIGHUP to the exec client, which runsc
 * exec forwards to the guest's foreground group; then SIGTERM and SIGKILL,
 * each after LZ_SESSION_GRACE_MS. The end: the exec client reaped, the
 * master drained in order until EOF (at most LZ_SESSION_END_BYTES: the
 * guest's background processes may go on writing), then exactly one
 * SessionExit, delivered as the client takes it within LZ_SESSION_END_MS
 * while the HC serves everything else: a client slow to read, or
 * stopped, loses nothing of its session's end and holds up no other
 * session. Every signal and wait goes through the exec client's retained
 * pidfd.
 *
 * This module knows no store and no runsc: the coordinator starts the exec
 * client (lz_session_start's caller) and records the session's lifecycle.
 * A session is a plain struct the HC keeps in a fixed table; free slots
 * have client < 0 and no exec client. */
#ifndef LZ_SESSION_H
#define LZ_SESSION_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc/broker.h"
#include "session/termreset.h"
#include "session/wire.h"
#include "util/err.h"

#define LZ_SESSION_ID_HEX 32
#define LZ_SESSION_GRACE_MS 2000
#define LZ_SESSION_DRAIN_MS 2000 /* a record into an idle socket */
#define LZ_SESSION_END_MS 30000
#define LZ_SESSION_END_BYTES (256 * 1024) /* the PTY's buffer holds 64 KiB at most */
#define LZ_SESSION_POLLFDS 3 /* client, exec pidfd, master */
#define LZ_SESSION_ADMIT_MS 5000 /* handshake and enrollment, from connect */
#define LZ_SESSION_ADMIT_TEXT "5 s"

enum lz_session_release {
	LZ_SESSION_LIVE = 0,
	LZ_SESSION_HUP_SENT = 1,
	LZ_SESSION_TERM_SENT = 2,
	LZ_SESSION_KILL_SENT = 3,
};

/* A connection's standing (session/admission.h): the TLS handshake,
 * then either an enrollment (one record, then nothing) or an admitted
 * client whose records are the wire protocol's. */
enum lz_session_phase {
	LZ_SESSION_HANDSHAKE = 0,
	LZ_SESSION_ENROLLING = 1,
	LZ_SESSION_ENROLLED = 2,
	LZ_SESSION_ADMITTED = 3,
};

struct lz_session {
	int client; /* owned; -1: no client (free slot, or the client left) */
	struct lz_tlschan *tls; /* owned, on client; NULL without a client */
	enum lz_session_phase phase;
	int64_t admit_by; /* CLOCK_MONOTONIC ms: admitted, or dropped, by then */
	bool greeted;
	bool running; /* the exec client runs; terminal events are admitted */
	/* CLOCK_MONOTONIC ms by which a starting terminal session's guest
	 * leader must be known (spec 3.4 steps 3-4); 0 when none is awaited.
	 * Meanwhile the client is not read: its records wait in the socket. */
	int64_t leader_by;
	bool tty;
	int master; /* owned PTY master, non-blocking; -1 without a terminal */
	/* The developer's terminal as its client reported it (never the PTY's,
	 * which the guest can set): what a prompt must fit in. */
	uint16_t rows, cols;
	struct lz_broker_child exec;
	char id[LZ_SESSION_ID_HEX + 1]; /* "" until the store minted one */
	size_t out_len; /* an Output not yet sent (in out, below) */
	size_t in_len, in_off; /* an Input not yet written to the master (in in) */
	enum lz_session_release release;
	int64_t release_at; /* CLOCK_MONOTONIC ms when the next stage is due */
	int64_t exit_held_until; /* CLOCK_MONOTONIC ms; 0: an exit is handled at once */
	/* Spec 3.4, 3.8: the coordinator's own text in this terminal (a host
	 * escalation prompt and its outcome). While any is unsent or a prompt
	 * waits for its answer, the master is not read: the guest blocks in
	 * the kernel's PTY buffer, and its input goes to the prompt. */
	char *notice; /* owned */
	size_t notice_len, notice_off;
	/* The end (lz_session_finish): delivered until end_by (CLOCK_MONOTONIC
	 * ms; 0 while the exec client runs). */
	int64_t end_by;
	int end_status;
	size_t end_read; /* master bytes read since the exec client ended */
	bool end_sent;   /* the SessionExit is taken */
	bool prompting;
	uint8_t answer_seq; /* where answer_from is in a control sequence */
	int answer; /* 1 approve, -1 deny, 0 none yet */
	int64_t answer_after; /* CLOCK_MONOTONIC ms; keys before it are dropped (INT64_MAX: prompt not sent) */
	/* The relay buffers stay last: lz_session_init clears what comes
	 * before them only (their bytes count up to out_len and in_len), so
	 * a free slot costs no memory written (issue 15). */
	uint8_t out[LZ_WIRE_MAX_DATA];
	uint8_t in[LZ_WIRE_MAX_DATA];
};

/* A free slot. */
void lz_session_init(struct lz_session *s);

/* Whether the slot is in use (a client or an exec client). */
bool lz_session_busy(const struct lz_session *s);

/* Opens the PTY pair for a terminal session: the master stays in s (window
 * size rows x cols, non-zero), the slave comes back for the exec client. */
int lz_session_open_pty(struct lz_session *s, uint16_t rows, uint16_t cols, int *ret_slave,
			struct lz_err *err);

/* The exec client runs: terminal events are admitted from here on. */
void lz_session_started(struct lz_session *s, const struct lz_broker_child *exec);

/* Fills up to LZ_SESSION_POLLFDS entries of pf (returns how many) with
 * what s waits for, honouring the backpressure above. *timeout_ms is
 * lowered to the next release stage when one is due, and to leader_by. */
size_t lz_session_pollfds(const struct lz_session *s, struct pollfd *pf, int *timeout_ms);

/* What a client record asks of a running session. */
enum lz_session_verdict {
	LZ_SESSION_HANDLED,    /* applied (or ignored: CloseInput) */
	LZ_SESSION_UNEXPECTED, /* the caller refuses it and the client is lost */
};

/* Applies a record of a running session's client: Signal, Input, Resize,
 * Detach, CloseInput. Terminal events are refused once release began. */
enum lz_session_verdict lz_session_event(struct lz_session *s, const struct lz_wire_msg *m);

/* The client became writable, or the master readable or writable. */
void lz_session_flush_output(struct lz_session *s);
void lz_session_flush_input(struct lz_session *s);
void lz_session_read_master(struct lz_session *s);

/* The client is gone: a terminal session starts its release, a session
 * without a terminal sends SIGTERM to its exec client. */
void lz_session_client_gone(struct lz_session *s);

/* Client loss or Detach of a terminal session: SIGHUP now, then the later
 * stages from lz_session_advance_release. Idempotent. */
void lz_session_start_release(struct lz_session *s);
void lz_session_advance_release(struct lz_session *s);

/* The exec client ended and its owner waits up to ms for word of why
 * before lz_session_finish (its exit stays unreaped and out of
 * lz_session_pollfds, whose timeout it lowers; the rest is served). */
void lz_session_hold_exit(struct lz_session *s, int ms);

/* Whether a held exit's time ran out (lz_session_hold_exit). */
bool lz_session_exit_due(const struct lz_session *s);

/* The exec client ended: reaps it, starts the end (the master's last
 * output in order, then one SessionExit with its status) and returns that
 * status, never waiting for the client. lz_session_pollfds then asks for
 * what the end waits on; lz_session_drain goes on with it when any of
 * those is ready. */
int lz_session_finish(struct lz_session *s);
void lz_session_drain(struct lz_session *s);

/* Whether the end is over: the SessionExit sent in full, the client gone,
 * or LZ_SESSION_END_MS passed. The session is then ready for
 * lz_session_reset. */
bool lz_session_drained(const struct lz_session *s);

/* Before a prompt: cancels a control string or sequence the guest left
 * open, turns off what would make the terminal answer for the developer
 * or read the prompt otherwise (VT52 mode, a decoding other than UTF-8,
 * mouse, focus and paste reports, key modes: session/termreset.h), and
 * undoes what the guest may have set to hide or
 * rewrite it: character sets (SI, G0 ASCII), 8-bit replies (S7C1T),
 * left/right margins, origin mode and the scroll region (which home the
 * cursor), insert mode off, autowrap on (a long argument wraps, never runs
 * off the edge), a visible cursor, the palette and default colours, text
 * attributes (SGR 0); then a fresh last line, so the prompt scrolls the
 * guest's screen up and never overwrites it. Not DECSTR: some terminals
 * (tmux) clear the screen on it. */
#define LZ_SESSION_PROMPT_RESET                                                                               \
	LZ_TERM_RESET_STRING LZ_TERM_RESET_DECODING LZ_TERM_RESET_REPORTS LZ_TERM_RESET_KEYS                        \
	"\x0f\x1b(B\x1b F\x1b[?69l\x1b[?6l\x1b[r\x1b[4l\x1b[?7h\x1b[?25h\x1b]104\x1b\\\x1b]110\x1b\\"  \
	"\x1b]111\x1b\\\x1b[0m\x1b[999;1H\n"
/* Keys read this soon after a prompt appears are dropped: they answer
 * what the guest printed before it, not the prompt. While the prompt is
 * up the client is read whatever the guest left unread, so keys and
 * terminal reports held back before it are read (and dropped) in this
 * time, not taken for an answer after it. */
#define LZ_SESSION_PROMPT_SETTLE_MS 500

/* Shows text (the caller's, already escaped) after LZ_SESSION_PROMPT_RESET
 * in a running terminal session and takes the next y (approve) or n,
 * Enter, ^C or ^D (deny) the developer types LZ_SESSION_PROMPT_SETTLE_MS
 * after the whole prompt was sent to the client (not when it was queued
 * behind the guest's output). Bytes inside control sequences (a
 * terminal's reports, function keys: CSI, SS3, DCS, OSC, SOS, PM, APC, in
 * 7- or 8-bit form) never answer; ^C and ^D deny anywhere. -EBUSY while
 * another notice or prompt is up, -EINVAL without a terminal or text, -E2BIG when
 * the text does not fit the developer's terminal whole (a line as wide as
 * it, more lines than its rows, a control character but CR LF), -ENOMEM. */
int lz_session_prompt(struct lz_session *s, const char *text, size_t len);

/* The prompt's answer once typed (1 approve, -1 deny), then 0. */
int lz_session_take_answer(struct lz_session *s);

/* Ends a prompt without an answer (or after one) and shows text; the
 * guest's output resumes after it. Ignored without a terminal. */
void lz_session_notice(struct lz_session *s, const char *text, size_t len);

/* A new connection: s takes fd and its TLS channel. Until it is admitted
 * it has LZ_SESSION_ADMIT_MS (a silent peer cannot hold a slot). */
void lz_session_connected(struct lz_session *s, int fd, struct lz_tlschan *tls);

/* Whether a connection still not admitted ran out of time. */
bool lz_session_admission_overdue(const struct lz_session *s);

/* Sends Refused (code errno, message with non-printable bytes as '?') to
 * an admitted client and ignores a failure: the connection is being
 * dropped anyway. */
void lz_session_refuse(struct lz_session *s, int code, const char *msg);

/* Kills a remaining exec client, closes the client and the master, and
 * returns the slot to free. */
void lz_session_reset(struct lz_session *s);

#endif
