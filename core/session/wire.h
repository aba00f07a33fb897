/* v1 records between the Client CLI and the Host Coordinator (spec 3.3
 * "Client CLIs reach the Host Coordinator through its host-private protocol
 * face", spec 3.4 session terminal events).
 *
 * A record is a Postcard enum (core/postcard.h): the message type as a varint
 * discriminant, then its payload; a whole record is at most LZ_WIRE_MAX bytes.
 * Transport is one record per TLS datagram of the control connection
 * (session/tlschan.h, spec 3.3); file descriptors travel as SCM_RIGHTS
 * ancillary data beside the record, never inside it.
 *
 *   type  record           direction      payload
 *   0     Hello            client -> HC   protocol u32, domain_id [u8;32],
 *                                         fingerprint [u8;32], client_pid u32
 *   1     RunCommand       client -> HC   argv Vec<bytes>, env Vec<(bytes,
 *                                         bytes)>, cwd Option<bytes>,
 *                                         terminal bool, rows u16, cols u16
 *   2     Input            client -> HC   data bytes
 *   3     Resize           client -> HC   rows u16, cols u16
 *   4     Signal           client -> HC   kind enum (see lz_wire_signal)
 *   5     CloseInput       client -> HC   (none)
 *   6     Detach           client -> HC   (none)
 *   7     Welcome          HC -> client   protocol u32, generation u64,
 *                                         session_id [u8;16]
 *   8     Refused          HC -> client   code u32 (errno), message string
 *   9     Output           HC -> client   data bytes
 *   10    SessionExit      HC -> client   status enum { Exited(u8),
 *                                         Signaled(u8) }
 *
 * Value rules, enforced identically by encode (-EINVAL) and decode
 * (-EBADMSG), so that nothing the encoder produces is refused by the peer and
 * every accepted record re-encodes to the same bytes:
 *   - RunCommand: 1..=LZ_WIRE_MAX_ARGV argv elements, none containing NUL
 *     (an element may be empty); at most LZ_WIRE_MAX_ENV env pairs, the name
 *     non-empty without '=' or NUL, the value without NUL; cwd, when present,
 *     1..=LZ_WIRE_MAX_CWD bytes without NUL. terminal true: the HC allocates
 *     the PTY (spec 3.4) and rows and cols are both non-zero; terminal false:
 *     the three stdio fds travel beside the record and rows == cols == 0.
 *   - Input, Output: 1..=LZ_WIRE_MAX_DATA bytes (end of input is CloseInput,
 *     never an empty Input).
 *   - Resize: rows and cols non-zero (spec 3.4).
 *   - Refused: code in 1..=4095; message valid UTF-8 without NUL, at most
 *     LZ_WIRE_MAX_MESSAGE bytes.
 *   - SessionExit: Signaled carries a signal number in 1..=64.
 *   - Hello: client_pid non-zero (diagnostic only: spec 3.3, PIDs are not
 *     protocol identity evidence).
 *   - Hello and Welcome decode any protocol number: the receiver compares it
 *     with LZ_WIRE_PROTOCOL and answers a mismatch with Refused
 *     EPROTONOSUPPORT rather than a malformed-record error.
 * Unknown discriminants, trailing bytes and non-canonical encodings refuse.
 *
 * Ownership: a decoded message BORROWS the buffer it was decoded from (every
 * byte span and the Refused message point into it) and, for RunCommand only,
 * owns the argv and env arrays (one allocation in `owned`). Release every
 * decoded message with lz_wire_msg_release before reusing or freeing the
 * buffer; it is a no-op for the other types and for messages the caller built
 * (owned == NULL). Byte spans are not NUL-terminated. */
#ifndef LZ_WIRE_H
#define LZ_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "session/tlschan.h"
#include "util/err.h"

#define LZ_WIRE_PROTOCOL 1u
#define LZ_WIRE_MAX 65536u         /* whole record */
#define LZ_WIRE_MAX_ARGV 4096u     /* argv elements */
#define LZ_WIRE_MAX_ENV 1024u      /* env pairs */
#define LZ_WIRE_MAX_CWD 4095u      /* cwd bytes (PATH_MAX with its NUL) */
#define LZ_WIRE_MAX_DATA 16384u    /* Input and Output bytes */
#define LZ_WIRE_MAX_MESSAGE 4096u  /* Refused message bytes */
#define LZ_WIRE_MAX_ERRNO 4095u    /* Refused code */
#define LZ_WIRE_MAX_SIGNAL 64u     /* SessionExit Signaled */
#define LZ_WIRE_STDIO_FDS 3u       /* fds beside a RunCommand without terminal */
#define LZ_WIRE_MAX_FDS 8u         /* fds one packet may carry */

enum lz_wire_type {
	LZ_WIRE_HELLO = 0,
	LZ_WIRE_RUN_COMMAND = 1,
	LZ_WIRE_INPUT = 2,
	LZ_WIRE_RESIZE = 3,
	LZ_WIRE_SIGNAL = 4,
	LZ_WIRE_CLOSE_INPUT = 5,
	LZ_WIRE_DETACH = 6,
	LZ_WIRE_WELCOME = 7,
	LZ_WIRE_REFUSED = 8,
	LZ_WIRE_OUTPUT = 9,
	LZ_WIRE_SESSION_EXIT = 10,
};

/* Client terminal events (spec 3.4): Interrupt, Quit and Suspend become
 * SIGINT, SIGQUIT and SIGTSTP for the guest process group. */
enum lz_wire_signal {
	LZ_WIRE_SIG_INTERRUPT = 0,
	LZ_WIRE_SIG_QUIT = 1,
	LZ_WIRE_SIG_SUSPEND = 2,
	LZ_WIRE_SIG_HANGUP = 3,
	LZ_WIRE_SIG_TERMINATE = 4,
};

enum lz_wire_exit_kind {
	LZ_WIRE_EXITED = 0,   /* value: exit status */
	LZ_WIRE_SIGNALED = 1, /* value: signal number */
};

/* A byte span; ptr may be NULL only when len == 0. */
struct lz_wire_bytes {
	const uint8_t *ptr;
	size_t len;
};

struct lz_wire_env {
	struct lz_wire_bytes name;
	struct lz_wire_bytes value;
};

struct lz_wire_hello {
	uint32_t protocol;
	uint8_t domain_id[32];
	uint8_t fingerprint[32];
	uint32_t client_pid;
};

struct lz_wire_run_command {
	const struct lz_wire_bytes *argv;
	size_t argc;
	const struct lz_wire_env *env;
	size_t n_env;
	bool has_cwd;
	struct lz_wire_bytes cwd;
	bool terminal;
	uint16_t rows;
	uint16_t cols;
};

struct lz_wire_winsize {
	uint16_t rows;
	uint16_t cols;
};

struct lz_wire_welcome {
	uint32_t protocol;
	uint64_t generation;
	uint8_t session_id[16];
};

struct lz_wire_refused {
	uint32_t code;       /* positive errno */
	const char *message; /* UTF-8, message_len bytes, not NUL-terminated */
	size_t message_len;
};

struct lz_wire_session_exit {
	enum lz_wire_exit_kind kind;
	uint8_t value;
};

struct lz_wire_msg {
	enum lz_wire_type type;
	union {
		struct lz_wire_hello hello;             /* LZ_WIRE_HELLO */
		struct lz_wire_run_command run;         /* LZ_WIRE_RUN_COMMAND */
		struct lz_wire_bytes input;             /* LZ_WIRE_INPUT */
		struct lz_wire_winsize resize;          /* LZ_WIRE_RESIZE */
		enum lz_wire_signal sig;                /* LZ_WIRE_SIGNAL */
		struct lz_wire_welcome welcome;         /* LZ_WIRE_WELCOME */
		struct lz_wire_refused refused;         /* LZ_WIRE_REFUSED */
		struct lz_wire_bytes output;            /* LZ_WIRE_OUTPUT */
		struct lz_wire_session_exit exit;       /* LZ_WIRE_SESSION_EXIT */
	};                                              /* nothing for CloseInput, Detach */
	void *owned; /* decoder's allocation; NULL in messages the caller builds */
};

/* True for the records a Client CLI sends (Hello..Detach). */
bool lz_wire_from_client(enum lz_wire_type type);

/* How many fds must travel beside m: LZ_WIRE_STDIO_FDS for a RunCommand
 * without terminal, 0 otherwise. lz_wire_send/recv move whatever fds they
 * are given; the caller checks this count. */
size_t lz_wire_expected_fds(const struct lz_wire_msg *m);

/* Encodes m into buf[0..cap). Returns 0 and the length in *ret_len;
 * -EINVAL when m breaks a value rule, -EMSGSIZE when the record exceeds cap
 * or LZ_WIRE_MAX. On failure *ret_len is untouched and buf unspecified. */
int lz_wire_encode(const struct lz_wire_msg *m, uint8_t *buf, size_t cap, size_t *ret_len);

/* Decodes exactly one record from buf[0..len). Returns 0 and fills *ret,
 * which then borrows buf (see the ownership note above); -EBADMSG for any
 * malformed, truncated, trailing or out-of-range input or len > LZ_WIRE_MAX;
 * -ENOMEM when the RunCommand arrays cannot be allocated. On failure *ret is
 * untouched. */
int lz_wire_decode(const uint8_t *buf, size_t len, struct lz_wire_msg *ret);

/* Frees what a decoded message owns and clears `owned`; accepts NULL and is
 * idempotent. The RunCommand arrays are gone afterwards. */
void lz_wire_msg_release(struct lz_wire_msg *m);

/* Sends m as one record inside the control connection's TLS
 * (session/tlschan.h) with fds[0..n_fds) beside it, which stay the
 * caller's. Returns 0 (taken: see lz_tlschan_send for a full socket);
 * -EINVAL/-EMSGSIZE from encoding, -EINVAL for n_fds > LZ_WIRE_MAX_FDS,
 * -EBADF for a negative fd, -EAGAIN when an earlier record still waits for
 * the socket (nothing taken), other -errno from the channel. */
int lz_wire_send(struct lz_tlschan *ch, const struct lz_wire_msg *m, const int *fds, size_t n_fds, int timeout_ms,
		 struct lz_err *err);
/* Receives one record into buf[0..cap) (cap at least LZ_WIRE_MAX) and
 * decodes it into *ret, which borrows buf (release it as above). Received
 * fds are O_CLOEXEC and move to the caller in fds[0..*ret_n_fds) only on
 * success; on every failure each received fd is closed. Returns 0;
 *   -EPIPE   the peer closed;
 *   -EBADMSG a malformed datagram (session/packet.h) or record;
 *   -EINVAL  max_fds > LZ_WIRE_MAX_FDS;
 *   -ECONNRESET the peer closed with our records unread (once; what it
 *            sent before is still queued);
 *   -EAGAIN (non-blocking socket), other -errno from the channel.
 * *ret, fds and *ret_n_fds are untouched on failure. */
int lz_wire_recv(struct lz_tlschan *ch, uint8_t *buf, size_t cap, struct lz_wire_msg *ret, int *fds, size_t max_fds,
		 size_t *ret_n_fds, struct lz_err *err);
#endif
