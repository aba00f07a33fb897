/* Escalation protocol records, v1 (spec 3.8, spec 3.3 "Protocol
 * cryptography refinement"): Postcard payloads (util/postcard.h) in a
 * signed envelope.
 *
 * Envelope, the complete bytes of one mailbox file, at most
 * LZ_ESC_RECORD_MAX bytes:
 *     kind       enum discriminant (enum lz_esc_kind)
 *     payload    bytes (varint length, then the encoded record)
 *     signature  [u8; 64], Ed25519 over the signed message
 * Signed message (spec 3.8):
 *     "lazaret/v1/" || kebab name of the kind || 0x00 ||
 *     payload length as u32 big-endian || payload
 * The NUL ends the name, so no name can pass for another followed by
 * length bytes.
 *
 * Every record starts with its scope: the Domain ID and the generation it
 * belongs to. Who signs what (spec 3.3):
 *     request, cancellation, acknowledgement       the Agent Sandbox key
 *     decision, chunk, terminal-result,
 *       session-request-capability                 the coordinator's key
 *     credential, trust-manifest                   the protocol issuer
 *
 * Threat: the sandbox writes request, cancellation and acknowledgement
 * bytes, and a compromised sandbox may write anything. lz_esc_open
 * verifies the signature over the exact owned bytes before it parses any
 * of the payload, refuses a kind the caller did not ask for, and accepts
 * only the canonical encoding with no trailing byte; decoded byte strings
 * borrow from the caller's buffer and are never NUL-terminated. */
#ifndef LZ_ESCALATION_RECORD_H
#define LZ_ESCALATION_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crypto/sigkey.h"

#define LZ_ESC_RECORD_MAX 65536u /* a complete record (spec 3.8) */
#define LZ_ESC_CHUNK_MAX 49152u  /* output bytes in one chunk (spec 3.8) */
#define LZ_ESC_DOMAIN_ID_LEN 32
#define LZ_ESC_ID_LEN 16         /* request and session IDs */
#define LZ_ESC_CREDENTIAL_ID_LEN 32 /* SHA-256 of a credential's signed claims */
#define LZ_ESC_ARGV_MAX 256      /* elements of a request's argument vector */
#define LZ_ESC_ARG_MAX 4096      /* bytes of one element, of the working directory */
#define LZ_ESC_TEXT_MAX 1024     /* justification, denial and failure messages */
#define LZ_ESC_CAPABILITY_MAX 1024 /* a sealed Session Request Capability */

enum lz_esc_kind {
	LZ_ESC_REQUEST = 0,
	LZ_ESC_CANCELLATION = 1,
	LZ_ESC_ACKNOWLEDGEMENT = 2,
	LZ_ESC_DECISION = 3,
	LZ_ESC_CHUNK = 4,
	LZ_ESC_TERMINAL_RESULT = 5,
	LZ_ESC_SESSION_CAPABILITY = 6,
	LZ_ESC_CREDENTIAL = 7,
	LZ_ESC_TRUST_MANIFEST = 8,
	LZ_ESC_KIND_COUNT
};

/* Bit of kind in the kinds mask of lz_esc_open. */
#define LZ_ESC_KIND_BIT(k) (1u << (k))

/* "request", "cancellation", "acknowledgement", "decision", "chunk",
 * "terminal-result", "session-request-capability", "credential",
 * "trust-manifest"; NULL for anything else. */
const char *lz_esc_kind_name(uint32_t kind);

/* Borrowed bytes (p is never NULL when n > 0). */
struct lz_esc_bytes {
	const uint8_t *p;
	size_t n;
};

struct lz_esc_scope {
	uint8_t domain_id[LZ_ESC_DOMAIN_ID_LEN];
	uint64_t generation;
};

/* The sandbox asks the host to run argv (spec 3.8). capability is the
 * sealed Session Request Capability the requesting session was given. */
struct lz_esc_request {
	uint8_t request_id[LZ_ESC_ID_LEN];
	struct lz_esc_bytes capability; /* at most LZ_ESC_CAPABILITY_MAX */
	size_t argc;                    /* 1..LZ_ESC_ARGV_MAX */
	struct lz_esc_bytes argv[LZ_ESC_ARGV_MAX]; /* each 1..LZ_ESC_ARG_MAX bytes, no NUL */
	struct lz_esc_bytes cwd;        /* the requester's directory, 0..LZ_ESC_ARG_MAX */
	struct lz_esc_bytes why;        /* UTF-8, 0..LZ_ESC_TEXT_MAX */
};

struct lz_esc_cancellation {
	uint8_t request_id[LZ_ESC_ID_LEN];
};

/* The highest contiguous sequence the client has taken: chunks are 1..N,
 * and the terminal result of a request with N chunks is N + 1. */
struct lz_esc_acknowledgement {
	uint8_t request_id[LZ_ESC_ID_LEN];
	uint64_t sequence;
};

enum lz_esc_verdict {
	LZ_ESC_APPROVED = 0,      /* by the developer at the prompt */
	LZ_ESC_AUTO_APPROVED = 1, /* by the profile's auto_approve rule */
	LZ_ESC_DENIED = 2,
};

struct lz_esc_decision {
	uint8_t request_id[LZ_ESC_ID_LEN];
	uint32_t verdict;          /* enum lz_esc_verdict; decoding refuses others */
	struct lz_esc_bytes message; /* UTF-8, 0..LZ_ESC_TEXT_MAX */
};

enum lz_esc_stream {
	LZ_ESC_STDOUT = 1,
	LZ_ESC_STDERR = 2,
};

struct lz_esc_chunk {
	uint8_t request_id[LZ_ESC_ID_LEN];
	uint64_t sequence; /* 1, 2, ... per request */
	uint8_t stream;    /* enum lz_esc_stream; decoding refuses others */
	struct lz_esc_bytes data; /* 1..LZ_ESC_CHUNK_MAX */
};

enum lz_esc_outcome {
	LZ_ESC_EXITED = 0,    /* value: the exit status, 0..255 */
	LZ_ESC_SIGNALED = 1,  /* value: the signal number, 1..64 */
	LZ_ESC_REFUSED = 2,   /* denied, or never started; message says why */
	LZ_ESC_CANCELLED = 3,
	LZ_ESC_TIMED_OUT = 4,
	LZ_ESC_FAILED = 5,    /* message says why */
};

/* The request's end, after its last chunk. */
struct lz_esc_terminal_result {
	uint8_t request_id[LZ_ESC_ID_LEN];
	uint64_t chunks;  /* how many chunks the request produced */
	uint32_t outcome; /* enum lz_esc_outcome; decoding refuses others */
	int32_t value;    /* EXITED and SIGNALED only, 0 otherwise */
	struct lz_esc_bytes message; /* UTF-8, 0..LZ_ESC_TEXT_MAX */
};

/* Given with a session's guest command: names the session a request
 * comes from (spec 3.3 Session Request Capability). */
struct lz_esc_session_capability {
	uint8_t session_id[LZ_ESC_ID_LEN];
	uint8_t sandbox_credential_id[LZ_ESC_CREDENTIAL_ID_LEN];
};

enum lz_esc_role {
	LZ_ESC_ROLE_COORDINATOR = 0,
	LZ_ESC_ROLE_SANDBOX = 1,
};

/* A protocol credential: the public key of a role, issued by the protocol
 * issuer. Its ID is the SHA-256 of its sealed payload (spec 3.3). */
struct lz_esc_credential {
	uint32_t role; /* enum lz_esc_role; decoding refuses others */
	uint8_t public_key[LZ_SIGKEY_PUBLIC_LEN];
};

/* Binds the generation's two roots to its identity (spec 3.3). */
struct lz_esc_trust_manifest {
	uint8_t tls_ca_public[LZ_SIGKEY_PUBLIC_LEN];
	uint8_t issuer_public[LZ_SIGKEY_PUBLIC_LEN];
};

struct lz_esc_record {
	uint32_t kind; /* enum lz_esc_kind */
	struct lz_esc_scope scope;
	union {
		struct lz_esc_request request;
		struct lz_esc_cancellation cancellation;
		struct lz_esc_acknowledgement acknowledgement;
		struct lz_esc_decision decision;
		struct lz_esc_chunk chunk;
		struct lz_esc_terminal_result result;
		struct lz_esc_session_capability capability;
		struct lz_esc_credential credential;
		struct lz_esc_trust_manifest manifest;
	};
};

/* The payload of rec (scope, then the kind's fields in the order above)
 * into buf[0..cap). -EINVAL for a value outside the limits above (checked
 * before writing, so encoding is as strict as decoding), -EMSGSIZE. */
int lz_esc_encode(const struct lz_esc_record *rec, uint8_t *buf, size_t cap, size_t *ret_len);

/* The payload of a record of kind. -EBADMSG for anything but the
 * canonical encoding of a value within the limits, or trailing bytes.
 * Borrows from payload. On failure *ret is unspecified. */
int lz_esc_decode(uint32_t kind, const uint8_t *payload, size_t len, struct lz_esc_record *ret);

/* The signed message of kind over payload into out[0..cap). -EINVAL for
 * an unknown kind or a payload over LZ_ESC_RECORD_MAX, -EMSGSIZE. */
int lz_esc_signed_message(uint32_t kind, const uint8_t *payload, size_t len, uint8_t *out, size_t cap,
			  size_t *ret_len);

/* Encodes rec, signs it with key and writes the envelope into out[0..cap)
 * (cap of LZ_ESC_RECORD_MAX always suffices). -EINVAL, -EMSGSIZE (the
 * envelope would exceed LZ_ESC_RECORD_MAX or cap), -ENOMEM, -EIO. */
int lz_esc_seal(const struct lz_esc_record *rec, const struct lz_sigkey *key, uint8_t *out, size_t cap,
		size_t *ret_len);

/* The framing of an envelope only: its kind and payload span, nothing
 * verified. For a self-signed record whose signer its payload names (the
 * Trust Manifest), which the caller then opens with lz_esc_open. -E2BIG,
 * -EBADMSG as lz_esc_open. */
int lz_esc_frame(const uint8_t *env, size_t len, uint32_t *ret_kind, struct lz_esc_bytes *ret_payload);

/* Opens an envelope of at most LZ_ESC_RECORD_MAX bytes: its kind must be
 * in kinds (a mask of LZ_ESC_KIND_BIT), its signature must be signer's
 * over the exact payload bytes (checked before the payload is parsed),
 * and the payload must decode. *ret_payload (may be NULL) gets the
 * payload span, for credential IDs. -EBADMSG for a malformed envelope or
 * payload, -EPROTO for a kind not asked for, -EPERM for a bad signature,
 * -E2BIG for more than LZ_ESC_RECORD_MAX bytes, -ENOMEM. Borrows from env. */
int lz_esc_open(const uint8_t *env, size_t len, uint32_t kinds, const uint8_t signer[LZ_SIGKEY_PUBLIC_LEN],
		struct lz_esc_record *ret, struct lz_esc_bytes *ret_payload);

#endif
