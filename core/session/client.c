#include "session/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/rundir.h"
#include "config/domain.h"
#include "fs/file.h"
#include "proc/spawn.h"
#include "util/cleanup.h"
#include "util/sys.h"
#include "session/clientauth.h"
#include "session/termreset.h"
#include "session/wire.h"

extern char **environ;

/* Starts `lazaret __hc` as its own session with the CLI's environment
 * (the HC resolves the same configuration, including env references) and
 * reads its startup report: "ready", "busy" or "error <errno> <message>". */
static int start_hc(const struct lz_client_request *req, struct lz_err *err)
{
	struct lz_config_summary s;
	lz_config_summarize(req->cfg, &s);
	const struct lz_path *rd = lz_config_runtime_domain(req->cfg);
	_cleanup_close_ int self = open("/proc/self/exe", O_PATH | O_CLOEXEC);
	_cleanup_close_ int log = lz_openat2_create(rd->fd, LZ_RUNDIR_LOG,
						    O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600,
						    LZ_RESOLVE_OWNED);
	if (self < 0 || log < 0)
		return lz_err_set(err, errno, "start the Host Coordinator: %s", strerror(errno));
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	char *argv[] = { "lazaret", "__hc", "--config", (char *)s.source, "--profile",
			 (char *)s.profile, "--workspace", (char *)s.workspace, "--expect-domain",
			 (char *)s.domain_id, "--expect-fingerprint", (char *)s.fingerprint, NULL };
	struct lz_spawn spec = { .label = "Host Coordinator", .exe_fd = self, .argv = argv,
				 .envp = environ, .stdin_fd = -1, .stdout_fd = p[1],
				 .stderr_fd = log, .detach = true };
	int pidfd = -1;
	int r = lz_spawn(&spec, &pidfd, NULL, err);
	close(p[1]);
	if (r < 0) {
		close(p[0]);
		return r;
	}
	close(pidfd); /* not ours to wait for: it outlives this CLI */
	lz_tlschan_warm_client(); /* while the coordinator launches (issue 15) */
	char line[LZ_ERR_MSG_MAX + 32] = "";
	size_t used = 0;
	ssize_t n;
	/* One line: the HC's children may hold the pipe open long after. */
	while (used + 1 < sizeof(line) && memchr(line, '\n', used) == NULL &&
	       ((n = read(p[0], line + used, sizeof(line) - 1 - used)) > 0 || (n < 0 && errno == EINTR)))
		if (n > 0)
			used += (size_t)n;
	close(p[0]);
	line[used] = '\0';
	if (strncmp(line, "ready", 5) == 0)
		return 0;
	if (strncmp(line, "busy", 4) == 0)
		return -EAGAIN;
	int code = 0, off = 0;
	if (sscanf(line, "error %d %n", &code, &off) == 1 && code > 0) {
		line[strcspn(line, "\n")] = '\0';
		return lz_err_set(err, code, "%s", line + off);
	}
	return lz_err_set(err, EIO, "the Host Coordinator did not start; see %s/%s", rd->canonical,
			  LZ_RUNDIR_LOG);
}

static int refusal(struct lz_tlschan *ch, struct lz_err *err);

/* The Domain and configuration this CLI expects. */
static int identity(const lz_config *cfg, uint8_t domain_id[32], uint8_t fingerprint[32], struct lz_err *err)
{
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	if (lz_unhex(s.domain_id, domain_id, 32) < 0 || lz_unhex(s.fingerprint, fingerprint, 32) < 0)
		return lz_err_set(err, EINVAL, "malformed Domain identity");
	return 0;
}

/* Greets the HC; a Refused answer comes back as its errno and message. */
static int hello(struct lz_tlschan *ch, const uint8_t domain_id[32], const uint8_t fingerprint[32],
		 struct lz_err *err)
{
	struct lz_wire_msg m = { .type = LZ_WIRE_HELLO,
				 .hello = { .protocol = LZ_WIRE_PROTOCOL, .client_pid = (uint32_t)getpid() } };
	memcpy(m.hello.domain_id, domain_id, 32);
	memcpy(m.hello.fingerprint, fingerprint, 32);
	int r = lz_wire_send(ch, &m, NULL, 0, LZ_TLSCHAN_FOREVER, NULL);
	if (r == 0)
		return 0;
	/* The coordinator may have refused us already (a TLS alert over our
	 * certificate, or a Refused): say what it said. */
	int e = refusal(ch, err);
	return e < 0 ? e : lz_err_set(err, -r, "greet the Host Coordinator: %s", strerror(-r));
}

/* Connects, starting the HC when nobody answers. A coordinator that is
 * still tearing down the previous generation answers "busy" or drops the
 * connection: wait for it and try again (bounded). */
static int reach_hc(const struct lz_client_request *req, int *ret, struct lz_err *err)
{
	const struct lz_path *rd = lz_config_runtime_domain(req->cfg);
	int64_t deadline = lz_now_ms() + LZ_CLIENT_START_TIMEOUT_MS;
	useconds_t pause = 50 * 1000; /* doubling to 1 s: a long wait asks rarely */
	for (;;) {
		int r = lz_clientauth_connect(rd, ret);
		if (r == 0)
			return 0;
		if (r != -ENOENT && r != -ECONNREFUSED)
			return lz_err_set(err, -r, "connect to the Host Coordinator: %s", strerror(-r));
		r = start_hc(req, err);
		if (r < 0 && r != -EAGAIN)
			return r;
		if (lz_remaining_ms(deadline) == 0)
			return lz_err_set(err, ETIMEDOUT, "the Domain's Host Coordinator did not become "
							  "ready; see %s/%s",
					  rd->canonical, LZ_RUNDIR_LOG);
		if (r == -EAGAIN) {
			usleep(pause);
			pause = pause >= 500 * 1000 ? 1000 * 1000 : pause * 2;
		}
	}
}

/* DX-5: what a guest can leave the developer's terminal in that would
 * outlive its session (a TUI killed with the generation, or one that
 * meant to): an open control string, VT52 mode and another decoding than
 * UTF-8, reports and key modes (session/termreset.h), the alternate screen
 * (without restoring a cursor the guest may have saved), left/right
 * margins and a scroll region (reset between saving and restoring the
 * cursor, which the region's reset would home), insert mode, line wrap, a
 * hidden cursor, character sets, 8-bit replies (S7C1T), colours and text
 * attributes. Not RIS or DECSTR: they clear the screen on some terminals.
 *
 * Origin mode is reset only after a guest that may have set it: leaving
 * it homes the cursor, and the restore of the saved cursor (DECRC) brings
 * it back, so it cannot be reset where the cursor is kept. The shell then
 * starts on a fresh last line (as the prompt's reset, session.h), never
 * over the guest's screen. */
#define TERMINAL_RESET_HEAD                                                                            \
	LZ_TERM_RESET_STRING LZ_TERM_RESET_DECODING LZ_TERM_RESET_REPORTS LZ_TERM_RESET_KEYS              \
	"\x1b[?1047l\x1b[?69l\x1b" "7\x1b[r\x1b" "8"
#define TERMINAL_RESET_ORIGIN "\x1b[?6l\x1b[999;1H\n"
#define TERMINAL_RESET_TAIL                                                                            \
	"\x1b[4l\x1b[?7h\x1b[?25h\x0f\x1b(B\x1b F\x1b]104\x1b\\\x1b]110\x1b\\\x1b]111\x1b\\\x1b[0m"

/* What output to a terminal may have changed there (DX-5). drove: any
 * mode, as ESC, SO, SI or an 8-bit CSI, OSC, DCS, SOS, PM or APC shows
 * (raw, or the second byte of the C1 control in UTF-8, C2 9B and the like;
 * a UTF-8 continuation byte may look like one: that only costs the reset).
 * origin: a DEC private mode set naming 6 (CSI ? ... 6 ... h, ESC [ or
 * 8-bit CSI). The scan goes on across records. */
struct drive {
	bool drove, origin;
	uint8_t state;  /* DRIVE_GROUND .. DRIVE_PRIVATE */
	bool six;       /* the private mode sequence named 6 so far */
	uint16_t param; /* the parameter being read, capped */
};

enum { DRIVE_GROUND, DRIVE_ESC, DRIVE_CSI, DRIVE_PRIVATE };

static bool drives_terminal(uint8_t c)
{
	return c == 0x1b || c == 0x0e || c == 0x0f || c == 0x90 || c == 0x98 || c == 0x9b || c == 0x9d ||
	       c == 0x9e || c == 0x9f;
}

static void drive_scan(struct drive *d, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		d->drove = d->drove || drives_terminal(c);
		if (c == 0x1b || c == 0x9b || c == 0x18 || c == 0x1a) { /* ESC, CSI; CAN and SUB cancel */
			d->state = c == 0x1b ? DRIVE_ESC : c == 0x9b ? DRIVE_CSI : DRIVE_GROUND;
			continue;
		}
		if (c < 0x20 && d->state != DRIVE_GROUND)
			continue; /* a C0 control inside a sequence is executed, not an end */
		if (d->state == DRIVE_ESC) {
			d->state = c == '[' ? DRIVE_CSI : DRIVE_GROUND;
		} else if (d->state == DRIVE_CSI) {
			d->state = c == '?' ? DRIVE_PRIVATE : DRIVE_GROUND;
			d->six = false;
			d->param = 0;
		} else if (d->state == DRIVE_PRIVATE) {
			if (c >= '0' && c <= '9') {
				d->param = d->param < 1000 ? (uint16_t)(d->param * 10 + (c - '0')) : d->param;
			} else if (c == ';' || c == ':') {
				d->six = d->six || d->param == 6;
				d->param = 0;
			} else if (c >= 0x40 && c <= 0x7e) {
				d->origin = d->origin || (c == 'h' && (d->six || d->param == 6));
				d->state = DRIVE_GROUND;
			}
		}
	}
}

/* After a session whose guest drove the terminal: its modes back. Keys
 * typed meanwhile stay for the shell (a terminal's answer to a query the
 * guest sent as it ended can reach the shell too, as after any program). */
static void reset_terminal(int fd, const struct drive *d)
{
	if (!d->drove || !isatty(fd))
		return;
	static const char reset[] = TERMINAL_RESET_HEAD TERMINAL_RESET_TAIL,
			  reset_origin[] = TERMINAL_RESET_HEAD TERMINAL_RESET_ORIGIN TERMINAL_RESET_TAIL;
	int flags = fcntl(fd, F_GETFL);
	if (flags >= 0 && (flags & O_NONBLOCK))
		(void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	if (d->origin)
		(void)lz_write_all(fd, reset_origin, sizeof(reset_origin) - 1);
	else
		(void)lz_write_all(fd, reset, sizeof(reset) - 1);
	if (flags >= 0 && (flags & O_NONBLOCK))
		(void)fcntl(fd, F_SETFL, flags);
}

/* A stream that is a terminal is relayed through a pipe (see client.h). */
/* Input is relayed into a non-blocking pipe of ours with one pending
 * buffer, so a guest that stops reading cannot block the output relays
 * (the deadlock of `cat < big > out`); output relays write to the
 * developer's terminal or file as it takes it. */
struct relay {
	int from; /* our end */
	int to;   /* the terminal */
	bool active;
	bool input;
	struct drive drive; /* what output relayed to a terminal could have changed */
	char buf[16384];
	size_t len, off;
};

static int stream_for(int fd, bool input, struct relay *rl, int *ret_fd)
{
	rl->from = rl->to = -1;
	rl->active = rl->input = false;
	rl->drive = (struct drive){ .drove = false };
	rl->len = rl->off = 0;
	/* A terminal is never handed to the sandbox; nor a regular file, whose
	 * offset the sandbox would not share (it would write from 0). */
	struct stat st;
	bool relay = isatty(fd) || (fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	if (!relay) {
		*ret_fd = fd;
		return 0;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (input) {
		rl->from = fd;
		rl->to = p[1];
		rl->input = true;
		(void)fcntl(p[1], F_SETFL, O_NONBLOCK); /* our private end only */
		*ret_fd = p[0];
	} else {
		rl->from = p[0];
		rl->to = fd;
		*ret_fd = p[1];
	}
	rl->active = true;
	return 1;
}

/* Writes buf[*off..len) to fd until it would block: 0 (*off advanced, to
 * len unless fd is non-blocking and full: the caller waits for POLLOUT) or
 * -errno. The developer's terminal may be non-blocking too (another program
 * on it set O_NONBLOCK): a flood then waits for it, never ends early. */
static int write_some(int fd, const void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t w = write(fd, (const char *)buf + *off, len - *off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		*off += (size_t)w;
	}
	return 0;
}

static bool pump(struct relay *rl)
{
	if (rl->off == rl->len) {
		ssize_t n = read(rl->from, rl->buf, sizeof(rl->buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return true;
		if (n <= 0)
			return false;
		rl->len = (size_t)n;
		rl->off = 0;
		if (!rl->input)
			drive_scan(&rl->drive, (const uint8_t *)rl->buf, rl->len);
	}
	return write_some(rl->to, rl->buf, rl->len, &rl->off) == 0;
}

/* A Refused record as our -errno, its message in err. -EAGAIN is this
 * client's own "the command was never taken: try again"
 * (lost_before_welcome; session/clientauth.h's coordinator gone before
 * anything was asked of it). The coordinator's EAGAIN (its store busy)
 * says nothing of the kind and may come after the guest started
 * (lz_dstore_session_commit_running): taken for a retry it would run the
 * command twice (issue 13), so it is EIO here. */
static int refused(const struct lz_wire_msg *m, struct lz_err *err)
{
	int code = m->refused.code ? (int)m->refused.code : EIO;
	return lz_err_set(err, code == EAGAIN ? EIO : code, "%.*s", (int)m->refused.message_len,
			  m->refused.message);
}

/* After a failed send: the Refused the HC sent before closing, if any.
 * Returns its -errno (message in err), or 0 when there is none. */
static int refusal(struct lz_tlschan *ch, struct lz_err *err)
{
	uint8_t *buf = malloc(LZ_WIRE_MAX);
	if (buf == NULL)
		return 0;
	int code = 0;
	for (int attempt = 0; attempt < 2 && code == 0; attempt++) {
		struct lz_wire_msg m;
		int fds[LZ_WIRE_MAX_FDS];
		size_t nf = 0;
		struct lz_err why = { 0, "" };
		int r = lz_wire_recv(ch, buf, LZ_WIRE_MAX, &m, fds, LZ_WIRE_MAX_FDS, &nf, &why);
		for (size_t i = 0; i < nf; i++)
			close(fds[i]);
		if (r == -ECONNRESET)
			continue;
		if (r == -EPERM) /* the coordinator refused our certificate */
			code = -lz_err_set(err, EPERM, "%s", why.msg);
		if (r < 0)
			break;
		if (m.type == LZ_WIRE_REFUSED)
			code = -refused(&m, err);
		lz_wire_msg_release(&m);
	}
	free(buf);
	return code == 0 ? 0 : -code;
}

/* ---- interactive sessions ------------------------------------------------ */

/* A terminal session's signals are ours only while run_terminal relays:
 * the caller's actions and mask come back on every way out, so that a ^C,
 * SIGTERM or SIGHUP between attempts (lz_client_run) does what it does
 * outside a session (by default: ends the CLI before the command is sent
 * again), and nothing noted in one attempt acts in the next. In between
 * they are blocked except in the wait (ppoll): one that comes while the
 * loop is busy ends the next wait at once rather than being noted just
 * after the checks and waited past. */
static const int session_signals[] = { SIGWINCH, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGTSTP };
#define N_SESSION_SIGNALS (sizeof(session_signals) / sizeof(session_signals[0]))

static volatile sig_atomic_t got_winch, got_int, got_quit, got_end, got_tstp;

/* The caller's signal state, for release_signals. */
struct caught {
	struct sigaction old[N_SESSION_SIGNALS];
	sigset_t mask; /* the caller's mask: the wait's */
};

static void on_signal(int sig)
{
	switch (sig) {
	case SIGWINCH: got_winch = 1; break;
	case SIGINT: got_int = 1; break;
	case SIGQUIT: got_quit = 1; break;
	case SIGTSTP: got_tstp = 1; break;
	default: got_end = sig; break;
	}
}

static void catch_signals(struct caught *c)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < N_SESSION_SIGNALS; i++)
		sigaddset(&set, session_signals[i]);
	(void)sigprocmask(SIG_BLOCK, &set, &c->mask);
	got_winch = got_int = got_quit = got_end = got_tstp = 0;
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: ppoll wakes */
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N_SESSION_SIGNALS; i++)
		(void)sigaction(session_signals[i], &sa, &c->old[i]);
}

/* The caller's actions, then its mask: a signal that came after the last
 * wait is the caller's to handle (the terminal is restored by then). */
static void release_signals(const struct caught *c)
{
	for (size_t i = 0; i < N_SESSION_SIGNALS; i++)
		(void)sigaction(session_signals[i], &c->old[i], NULL);
	(void)sigprocmask(SIG_SETMASK, &c->mask, NULL);
	got_winch = got_int = got_quit = got_end = got_tstp = 0;
}

static void window(uint16_t *rows, uint16_t *cols)
{
	struct winsize ws = { 0 };
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
		ws = (struct winsize){ .ws_row = 24, .ws_col = 80 };
	*rows = ws.ws_row;
	*cols = ws.ws_col;
}

/* The coordinator went away before Welcome. Spec 3.4 releases the exec
 * client before Welcome, so the command may already have run unless the
 * coordinator never read it: the kernel reports ECONNRESET when a peer
 * closes with our records unread. Only then is trying again safe; a
 * command is never run twice (issue 13). */
static int lost_before_welcome(bool ours_unread, const struct lz_client_request *req, struct lz_err *err)
{
	if (ours_unread)
		return -EAGAIN;
	return lz_err_set(err, EPIPE,
			  "lost the Host Coordinator after it took the command and before it confirmed the "
			  "start: the command may have run, and is not run again; see %s/%s",
			  lz_config_runtime_domain(req->cfg)->canonical, LZ_RUNDIR_LOG);
}

/* A terminal session's record after its command, waiting at most
 * timeout_ms for the socket (a record that does not fit waits in the
 * channel: lz_tlschan_send); *sent remembers that one went, so that an
 * ECONNRESET no longer proves the command unread. */
static int send_after_run(struct lz_tlschan *ch, const struct lz_wire_msg *m, bool *sent, int timeout_ms)
{
	*sent = true;
	return lz_wire_send(ch, m, NULL, 0, timeout_ms, NULL);
}

/* How long a CLI told to end (SIGTERM, SIGHUP) tries to tell the
 * coordinator: one that stopped reading cannot keep it, or the terminal
 * raw. */
#define DETACH_MS 1000

/* One record from the coordinator; descriptors are never expected and are
 * closed. A peer that closed with our record unread reports ECONNRESET
 * once, and what it sent before is still queued: *unread notes it. A
 * failure's reason is in err (-EPERM: the coordinator's TLS alert). */
static int recv_noting_unread(struct lz_tlschan *ch, uint8_t *buf, struct lz_wire_msg *m, bool *unread,
			      struct lz_err *err)
{
	int fds[LZ_WIRE_MAX_FDS];
	size_t nf = 0;
	int r = lz_wire_recv(ch, buf, LZ_WIRE_MAX, m, fds, LZ_WIRE_MAX_FDS, &nf, err);
	if (r == -ECONNRESET) {
		*unread = true;
		r = lz_wire_recv(ch, buf, LZ_WIRE_MAX, m, fds, LZ_WIRE_MAX_FDS, &nf, err);
	}
	for (size_t i = 0; i < nf; i++)
		close(fds[i]);
	return r;
}

/* Local suspension (spec 3.4): the terminal back as the session found it,
 * the modes the guest drove included, then stop until SIGCONT, and raw
 * again. What the guest set stays unset: it hears the window size on
 * resume (the caller's Resize), which a full-screen program redraws on. */
/* Stops this process as SIGTSTP would, SIGTSTP being caught and blocked
 * outside the wait (catch_signals); returns after SIGCONT. */
static void stop_here(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, ours;
	sigemptyset(&dfl.sa_mask);
	sigset_t tstp;
	sigemptyset(&tstp);
	sigaddset(&tstp, SIGTSTP);
	(void)sigaction(SIGTSTP, &dfl, &ours);
	(void)raise(SIGTSTP);                        /* pending: blocked outside the wait */
	(void)sigprocmask(SIG_UNBLOCK, &tstp, NULL); /* stopped here */
	(void)sigprocmask(SIG_BLOCK, &tstp, NULL);
	(void)sigaction(SIGTSTP, &ours, NULL);
}

static void suspend(const struct termios *saved, const struct termios *raw, const struct drive *d)
{
	reset_terminal(STDOUT_FILENO, d);
	(void)tcsetattr(STDIN_FILENO, TCSADRAIN, saved);
	stop_here();
	(void)tcsetattr(STDIN_FILENO, TCSADRAIN, raw);
}

static int run_terminal(int sock, struct lz_tlschan *ch, const struct lz_client_request *req, int *ret_status,
			struct lz_err *err)
{
	struct termios saved, raw;
	if (tcgetattr(STDIN_FILENO, &saved) < 0)
		return lz_err_set(err, errno, "read the terminal mode: %s", strerror(errno));
	size_t argc = 0;
	while (req->argv[argc])
		argc++;
	struct lz_wire_bytes *args = calloc(argc, sizeof(*args));
	if (args == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < argc; i++)
		args[i] = (struct lz_wire_bytes){ (const uint8_t *)req->argv[i], strlen(req->argv[i]) };
	const char *term = getenv("TERM");
	struct lz_wire_env env = { { (const uint8_t *)"TERM", 4 },
				   { (const uint8_t *)(term ? term : "xterm"), strlen(term ? term : "xterm") } };
	struct lz_wire_msg run = { .type = LZ_WIRE_RUN_COMMAND,
				   .run = { .argv = args, .argc = argc, .env = &env, .n_env = 1,
					    .terminal = true } };
	window(&run.run.rows, &run.run.cols);
	int r = lz_wire_send(ch, &run, NULL, 0, LZ_TLSCHAN_FOREVER, NULL);
	free(args);
	if (r < 0) {
		int e = refusal(ch, err);
		return e < 0 ? e : lz_err_set(err, -r, "send the command: %s", strerror(-r));
	}

	/* pend: output not yet written to a terminal that said EAGAIN (it is
	 * non-blocking and full); the socket is not read until it is, so the
	 * coordinator, and the guest, wait for the terminal. */
	uint8_t *buf = malloc(LZ_WIRE_MAX), *pend = malloc(LZ_WIRE_MAX_DATA);
	size_t pend_len = 0, pend_off = 0;
	if (buf == NULL || pend == NULL) {
		free(buf);
		free(pend);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	struct caught caught;
	catch_signals(&caught);
	raw = saved;
	cfmakeraw(&raw);
	(void)tcsetattr(STDIN_FILENO, TCSADRAIN, &raw);
	bool stdin_open = true, welcomed = false, unread = false, sent_after_run = false;
	struct drive drive = { .drove = false };
	r = 0;
	/* Never blocked on the coordinator: what it has not taken waits in the
	 * channel (backlog), the developer's keys wait in the terminal until
	 * it has, and signals stay noted until a record can carry them. */
	for (;;) {
		bool backlog = lz_tlschan_pending(ch);
		if (got_end) {
			struct lz_wire_msg m = { .type = LZ_WIRE_DETACH };
			if (lz_tlschan_flush(ch, DETACH_MS, NULL) == 0)
				(void)send_after_run(ch, &m, &sent_after_run, DETACH_MS);
			*ret_status = 128 + got_end;
			break;
		}
		if (got_winch && !backlog) {
			got_winch = 0;
			struct lz_wire_msg m = { .type = LZ_WIRE_RESIZE };
			window(&m.resize.rows, &m.resize.cols);
			(void)send_after_run(ch, &m, &sent_after_run, 0);
			backlog = lz_tlschan_pending(ch);
		}
		if ((got_int || got_quit) && !backlog) {
			struct lz_wire_msg m = { .type = LZ_WIRE_SIGNAL,
						 .sig = got_int ? LZ_WIRE_SIG_INTERRUPT : LZ_WIRE_SIG_QUIT };
			got_int = got_quit = 0;
			(void)send_after_run(ch, &m, &sent_after_run, 0);
			backlog = lz_tlschan_pending(ch);
		}
		if (got_tstp) {
			got_tstp = 0;
			suspend(&saved, &raw, &drive);
			got_winch = 1;
			continue;
		}
		/* Output the terminal has not taken holds the socket, both ways. */
		bool out_held = pend_off < pend_len;
		struct pollfd pf[3] = { { .fd = out_held ? -1 : sock, .events = (short)(POLLIN | (backlog ? POLLOUT : 0)) },
					{ .fd = stdin_open && !backlog ? STDIN_FILENO : -1, .events = POLLIN },
					{ .fd = out_held ? STDOUT_FILENO : -1, .events = POLLOUT } };
		if (ppoll(pf, 3, NULL, &caught.mask) < 0) {
			if (errno == EINTR)
				continue;
			r = lz_err_set(err, errno, "poll: %s", strerror(errno));
			break;
		}
		if (pf[2].revents && write_some(STDOUT_FILENO, pend, pend_len, &pend_off) < 0)
			pend_off = pend_len; /* the terminal is gone: drop it */
		if (backlog && (pf[0].revents & POLLOUT))
			(void)lz_tlschan_flush(ch, 0, NULL); /* a broken channel shows on the next read */
		if (pf[1].revents) {
			ssize_t n = read(STDIN_FILENO, buf, LZ_WIRE_MAX_DATA);
			if (n > 0) {
				struct lz_wire_msg m = { .type = LZ_WIRE_INPUT,
							 .input = { buf, (size_t)n } };
				(void)send_after_run(ch, &m, &sent_after_run, 0);
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				stdin_open = false;
			}
		}
		if (pf[0].revents & ~POLLOUT) {
			struct lz_wire_msg m;
			int k = recv_noting_unread(ch, buf, &m, &unread, err);
			if (k == -EPERM) { /* the coordinator refused our certificate */
				r = k;
				break;
			}
			if (k < 0) {
				/* Input sent after the command may be what was
				 * unread: only the command alone proves it unread. */
				r = welcomed ? lz_err_set(err, EPIPE,
							  "lost the Host Coordinator; the session is "
							  "gone (see %s/%s)",
							  lz_config_runtime_domain(req->cfg)->canonical,
							  LZ_RUNDIR_LOG)
					     : lost_before_welcome(unread && !sent_after_run, req, err);
				break;
			}
			bool done = false;
			if (m.type == LZ_WIRE_WELCOME)
				welcomed = true;
			if (m.type == LZ_WIRE_OUTPUT) {
				size_t off = 0;
				drive_scan(&drive, m.output.ptr, m.output.len);
				if (write_some(STDOUT_FILENO, m.output.ptr, m.output.len, &off) == 0 &&
				    off < m.output.len) {
					pend_len = m.output.len - off;
					pend_off = 0;
					memcpy(pend, m.output.ptr + off, pend_len);
				}
			} else if (m.type == LZ_WIRE_SESSION_EXIT) {
				*ret_status = m.exit.kind == LZ_WIRE_EXITED ? m.exit.value : 128 + m.exit.value;
				done = true;
			} else if (m.type == LZ_WIRE_REFUSED) {
				r = refused(&m, err);
				done = true;
			}
			lz_wire_msg_release(&m);
			if (done)
				break;
		}
	}
	/* DX-5: whatever the guest did, the developer's terminal mode is
	 * ours to put back. */
	reset_terminal(STDOUT_FILENO, &drive);
	(void)tcsetattr(STDIN_FILENO, TCSADRAIN, &saved);
	release_signals(&caught);
	free(buf);
	free(pend);
	return r;
}

/* A command with this process's standard streams (no terminal session). */
static int run_streams(int sock, struct lz_tlschan *ch, const struct lz_client_request *req, int *ret_status,
		       struct lz_err *err)
{
	struct relay rl[3];
	rl[0].active = rl[1].active = rl[2].active = false; /* until stream_for */
	int fds[3] = { -1, -1, -1 };
	bool made[3] = { false, false, false };
	uint8_t *buf = NULL;
	struct caught caught;
	bool catching = false;
	int end_sig = 0;
	int r;

	for (int i = 0; i < 3; i++) {
		r = stream_for(i, i == 0, &rl[i], &fds[i]);
		if (r < 0) {
			lz_err_set(err, -r, "pipe: %s", strerror(-r));
			goto out;
		}
		made[i] = r == 1;
	}
	size_t argc = 0;
	while (req->argv[argc])
		argc++;
	struct lz_wire_bytes *args = calloc(argc, sizeof(*args));
	if (args == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < argc; i++)
		args[i] = (struct lz_wire_bytes){ (const uint8_t *)req->argv[i], strlen(req->argv[i]) };
	struct lz_wire_msg run = { .type = LZ_WIRE_RUN_COMMAND,
				   .run = { .argv = args, .argc = argc, .terminal = false } };
	r = lz_wire_send(ch, &run, fds, 3, LZ_TLSCHAN_FOREVER, NULL);
	free(args);
	if (r < 0) {
		/* A refusal of our Hello may already wait in the queue. */
		int e = refusal(ch, err);
		if (e == 0)
			lz_err_set(err, -r, "send the command: %s", strerror(-r));
		r = e < 0 ? e : r;
		goto out;
	}
	/* The HC holds the pipe ends it was sent; ours go away so EOF works. */
	for (int i = 0; i < 3; i++)
		if (made[i])
			lz_close_fdp(&fds[i]);

	buf = malloc(LZ_WIRE_MAX);
	if (buf == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	bool exited = false, welcomed = false, unread = false;
	int status = 0;
	/* DX-5: the relayed terminal is reset on the way out whatever ends
	 * the CLI: the signals that would end or stop it are caught while it
	 * relays, and acted on once the terminal is put back. */
	catch_signals(&caught);
	catching = true;
	for (;;) {
		if (got_int || got_quit || got_end) {
			end_sig = got_int ? SIGINT : got_quit ? SIGQUIT : got_end;
			break;
		}
		if (got_tstp) {
			got_tstp = 0;
			for (int i = 1; i < 3; i++)
				if (made[i])
					reset_terminal(i, &rl[i].drive);
			stop_here();
		}
		struct pollfd pf[4];
		size_t n = 0;
		if (!exited)
			pf[n++] = (struct pollfd){ .fd = sock, .events = POLLIN };
		/* Standard input is read only once the coordinator confirmed the
		 * start: before, a coordinator lost with the command unread is
		 * tried again (lost_before_welcome), which must find every byte
		 * still there. */
		for (int i = 0; i < 3; i++)
			if (rl[i].active && (i > 0 || welcomed))
				pf[n++] = rl[i].off < rl[i].len
						  ? (struct pollfd){ .fd = rl[i].to, .events = POLLOUT }
						  : (struct pollfd){ .fd = rl[i].from, .events = POLLIN };
		if (n == 0)
			break;
		if (exited && !rl[1].active && !rl[2].active)
			break;
		if (ppoll(pf, n, NULL, &caught.mask) < 0) {
			if (errno == EINTR)
				continue;
			r = lz_err_set(err, errno, "poll: %s", strerror(errno));
			goto out;
		}
		for (size_t k = 0; k < n; k++) {
			if (!pf[k].revents)
				continue;
			if (pf[k].fd == sock) {
				struct lz_wire_msg m;
				r = recv_noting_unread(ch, buf, &m, &unread, err);
				if (r == -EPERM) /* the coordinator refused our certificate */
					goto out;
				if (r < 0) {
					r = welcomed ? lz_err_set(err, EPIPE,
								  "lost the Host Coordinator before the "
								  "command finished; see %s/%s",
								  lz_config_runtime_domain(req->cfg)->canonical,
								  LZ_RUNDIR_LOG)
						     : lost_before_welcome(unread, req, err);
					goto out;
				}
				if (m.type == LZ_WIRE_REFUSED) {
					r = refused(&m, err);
					lz_wire_msg_release(&m);
					goto out;
				}
				if (m.type == LZ_WIRE_WELCOME)
					welcomed = true;
				if (m.type == LZ_WIRE_SESSION_EXIT) {
					exited = true;
					status = m.exit.kind == LZ_WIRE_EXITED ? m.exit.value
									      : 128 + m.exit.value;
				}
				lz_wire_msg_release(&m);
			} else {
				for (int i = 0; i < 3; i++)
					if (rl[i].active &&
					    (pf[k].fd == rl[i].from || pf[k].fd == rl[i].to) &&
					    !pump(&rl[i])) {
						rl[i].active = false;
						if (i == 0)
							close(rl[i].to); /* stdin EOF reaches the guest */
						else
							close(rl[i].from);
					}
			}
		}
		/* stdin relay ends with the session, not before output. */
		if (exited && rl[0].active) {
			rl[0].active = false;
			close(rl[0].to);
		}
	}
	*ret_status = end_sig ? 128 + end_sig : status;
	r = 0;
out:
	for (int i = 0; i < 3; i++) {
		if (made[i])
			lz_close_fdp(&fds[i]); /* not sent */
		if (rl[i].active) {
			if (i == 0)
				close(rl[i].to);
			else
				close(rl[i].from);
		}
	}
	/* DX-5: output relayed to the developer's terminal, not only a
	 * terminal session's, leaves it as it was. */
	for (int i = 1; i < 3; i++)
		if (made[i])
			reset_terminal(i, &rl[i].drive);
	free(buf);
	if (catching)
		release_signals(&caught);
	/* Ended by a signal: now that the terminal is back, as it would have
	 * (the caller's action, by default the end of the CLI; the
	 * coordinator then releases the session). */
	if (end_sig)
		(void)raise(end_sig);
	return r;
}

static int client_attempt(const struct lz_client_request *req, int *ret_status, struct lz_err *err)
{
	_cleanup_close_ int sock = -EBADF;
	int first = -1;
	struct lz_tlschan *ch = NULL;
	uint8_t domain_id[32], fingerprint[32];
	int r;

	signal(SIGPIPE, SIG_IGN);
	if ((r = identity(req->cfg, domain_id, fingerprint, err)) < 0 || (r = reach_hc(req, &first, err)) < 0)
		return r;
	/* Spec 3.3: enrolled on the first connection, then mutual TLS. */
	if ((r = lz_clientauth_open(lz_config_runtime_domain(req->cfg), first, domain_id, fingerprint, &sock, &ch,
				    err)) < 0)
		return r;
	if ((r = hello(ch, domain_id, fingerprint, err)) == 0)
		r = req->terminal ? run_terminal(sock, ch, req, ret_status, err)
				  : run_streams(sock, ch, req, ret_status, err);
	lz_tlschan_free(ch);
	return r;
}

int lz_client_run(const struct lz_client_request *req, int *ret_status, struct lz_err *err)
{
	int64_t deadline = lz_now_ms() + LZ_CLIENT_START_TIMEOUT_MS;
	for (;;) {
		int r = client_attempt(req, ret_status, err);
		if (r != -EAGAIN)
			return r;
		if (lz_remaining_ms(deadline) == 0)
			return lz_err_set(err, ETIMEDOUT, "the Domain kept ending before our command could "
							  "start; try again");
		usleep(100 * 1000);
	}
}
