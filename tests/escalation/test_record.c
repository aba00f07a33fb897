/* Escalation protocol records (core/escalation/record.h; spec 3.8, 3.3):
 * fixed payload vectors written by hand from the Postcard rules, the signed
 * message layout, a fixed Ed25519 envelope (its signature checked with the
 * openssl CLI, see ENVELOPE_ACK), round trips of every kind, and every
 * refusal of encode, decode and open. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "escalation/record.h"

/* Runs of consecutive byte values, to keep the IDs and keys readable. */
#define RUN4(b) (b), (b) + 1, (b) + 2, (b) + 3
#define RUN16(b) RUN4(b), RUN4((b) + 4), RUN4((b) + 8), RUN4((b) + 12)
#define RUN32(b) RUN16(b), RUN16((b) + 16)

#define SCOPE RUN32(0x00), 0xac, 0x02 /* domain_id 00..1f, generation 300 */
#define RID RUN16(0xa0)               /* request_id a0..af */

#define SPAN(s) ((struct lz_esc_bytes){ .p = (const uint8_t *)(s), .n = sizeof(s) - 1 })

/* ---- Fixed vectors ------------------------------------------------------ */

/* Request { capability "cap", argv ["git", "push"], cwd "/w", why "ship ✓" } */
static const uint8_t REQUEST[] = {
	SCOPE, RID,
	0x03, 'c', 'a', 'p',                             /* capability */
	0x02,                                            /* argv: 2 elements */
	0x03, 'g', 'i', 't',
	0x04, 'p', 'u', 's', 'h',
	0x02, '/', 'w',                                  /* cwd */
	0x08, 's', 'h', 'i', 'p', ' ', 0xe2, 0x9c, 0x93, /* why */
};

static const uint8_t CANCELLATION[] = { SCOPE, RID };

/* Acknowledgement { sequence 128 } */
#define ACK_PAYLOAD SCOPE, RID, 0x80, 0x01
static const uint8_t ACK[] = { ACK_PAYLOAD };

/* Decision { verdict Denied, message "no" } */
static const uint8_t DECISION[] = { SCOPE, RID, 0x02, 0x02, 'n', 'o' };

/* Chunk { sequence 1, stream stderr, data "ok\n" } */
static const uint8_t CHUNK[] = { SCOPE, RID, 0x01, 0x02, 0x03, 'o', 'k', '\n' };

/* TerminalResult { chunks 3, Exited, value 255 (zigzag 510), message "" } */
static const uint8_t RESULT_EXITED[] = { SCOPE, RID, 0x03, 0x00, 0xfe, 0x03, 0x00 };
/* TerminalResult { chunks 0, Signaled, value 9 (zigzag 18), message "" } */
static const uint8_t RESULT_SIGNALED[] = { SCOPE, RID, 0x00, 0x01, 0x12, 0x00 };
/* TerminalResult { chunks 1, Failed, value 0, message "boom" } */
static const uint8_t RESULT_FAILED[] = { SCOPE, RID, 0x01, 0x05, 0x00, 0x04, 'b', 'o', 'o', 'm' };

/* SessionRequestCapability { session_id 10..1f, sandbox_credential_id c0..df } */
static const uint8_t SESSION_CAP[] = { SCOPE, RUN16(0x10), RUN32(0xc0) };

/* Credential { role Sandbox, public_key 40..5f } */
static const uint8_t CREDENTIAL[] = { SCOPE, 0x01, RUN32(0x40) };

/* TrustManifest { tls_ca_public 60..7f, issuer_public 80..9f } */
static const uint8_t MANIFEST[] = { SCOPE, RUN32(0x60), RUN32(0x80) };

/* The signed message of ACK (spec 3.8). */
static const uint8_t SIGNED_ACK[] = {
	'l', 'a', 'z', 'a', 'r', 'e', 't', '/', 'v', '1', '/',
	'a', 'c', 'k', 'n', 'o', 'w', 'l', 'e', 'd', 'g', 'e', 'm', 'e', 'n', 't', 0x00,
	0x00, 0x00, 0x00, 0x34, /* 52 bytes, big-endian */
	ACK_PAYLOAD,
};

/* The public key of seed 01..20 (RFC 8032 private key). */
static const uint8_t PUB[LZ_SIGKEY_PUBLIC_LEN] = {
	0x79, 0xb5, 0x56, 0x2e, 0x8f, 0xe6, 0x54, 0xf9, 0x40, 0x78, 0xb1, 0x12, 0xe8, 0xa9, 0x8b, 0xa7,
	0x90, 0x1f, 0x85, 0x3a, 0xe6, 0x95, 0xbe, 0xd7, 0xe0, 0xe3, 0x91, 0x0b, 0xad, 0x04, 0x96, 0x64,
};

/* ACK sealed with seed 01..20. The signature was made independently with
 * `openssl pkeyutl -sign -rawin` over SIGNED_ACK with that seed's key. */
static const uint8_t ENVELOPE_ACK[] = {
	0x02,       /* kind Acknowledgement */
	0x34,       /* payload: 52 bytes */
	ACK_PAYLOAD,
	0x7b, 0x3b, 0x67, 0xa4, 0xab, 0x4d, 0x83, 0xb6, 0x8e, 0xd9, 0x5c, 0x68, 0xdb, 0xba, 0x48, 0xe6,
	0xe1, 0x48, 0x51, 0x90, 0x71, 0xfd, 0x5f, 0x22, 0xbb, 0x71, 0xf1, 0xc8, 0x47, 0x9e, 0xbe, 0x30,
	0x8c, 0x6f, 0x48, 0x78, 0xaf, 0x8c, 0x7d, 0xab, 0x5a, 0x52, 0x27, 0x6a, 0x48, 0x1a, 0xca, 0xed,
	0x67, 0x27, 0x41, 0x3e, 0x03, 0x60, 0x34, 0x18, 0xa7, 0xdf, 0x04, 0xc3, 0xeb, 0xd6, 0x8d, 0x0d,
};

static const uint8_t rid[LZ_ESC_ID_LEN] = { RID };

static struct lz_esc_record base(uint32_t kind)
{
	struct lz_esc_record rec = { .kind = kind, .scope.generation = 300 };
	for (int i = 0; i < LZ_ESC_DOMAIN_ID_LEN; i++)
		rec.scope.domain_id[i] = (uint8_t)i;
	return rec;
}

static void fill(uint8_t *p, size_t n, uint8_t first)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(first + i);
}

static struct lz_esc_record request_rec(void)
{
	struct lz_esc_record rec = base(LZ_ESC_REQUEST);
	memcpy(rec.request.request_id, rid, sizeof(rid));
	rec.request.capability = SPAN("cap");
	rec.request.argc = 2;
	rec.request.argv[0] = SPAN("git");
	rec.request.argv[1] = SPAN("push");
	rec.request.cwd = SPAN("/w");
	rec.request.why = SPAN("ship \xe2\x9c\x93");
	return rec;
}

static struct lz_esc_record ack_rec(void)
{
	struct lz_esc_record rec = base(LZ_ESC_ACKNOWLEDGEMENT);
	memcpy(rec.acknowledgement.request_id, rid, sizeof(rid));
	rec.acknowledgement.sequence = 128;
	return rec;
}

static struct lz_esc_record chunk_rec(void)
{
	struct lz_esc_record rec = base(LZ_ESC_CHUNK);
	memcpy(rec.chunk.request_id, rid, sizeof(rid));
	rec.chunk.sequence = 1;
	rec.chunk.stream = LZ_ESC_STDERR;
	rec.chunk.data = SPAN("ok\n");
	return rec;
}

static struct lz_esc_record result_rec(uint64_t chunks, uint32_t outcome, int32_t value, struct lz_esc_bytes msg)
{
	struct lz_esc_record rec = base(LZ_ESC_TERMINAL_RESULT);
	memcpy(rec.result.request_id, rid, sizeof(rid));
	rec.result.chunks = chunks;
	rec.result.outcome = outcome;
	rec.result.value = value;
	rec.result.message = msg;
	return rec;
}

struct vector {
	const char *name;
	const uint8_t *bytes;
	size_t len;
	struct lz_esc_record rec;
};

#define VEC(arr, r) { #arr, arr, sizeof(arr), r }

static const struct vector *vectors(size_t *ret_n)
{
	static struct vector v[11];
	struct lz_esc_record cancel = base(LZ_ESC_CANCELLATION), decision = base(LZ_ESC_DECISION),
			     cap = base(LZ_ESC_SESSION_CAPABILITY), cred = base(LZ_ESC_CREDENTIAL),
			     manifest = base(LZ_ESC_TRUST_MANIFEST);
	memcpy(cancel.cancellation.request_id, rid, sizeof(rid));
	memcpy(decision.decision.request_id, rid, sizeof(rid));
	decision.decision.verdict = LZ_ESC_DENIED;
	decision.decision.message = SPAN("no");
	fill(cap.capability.session_id, LZ_ESC_ID_LEN, 0x10);
	fill(cap.capability.sandbox_credential_id, LZ_ESC_CREDENTIAL_ID_LEN, 0xc0);
	cred.credential.role = LZ_ESC_ROLE_SANDBOX;
	fill(cred.credential.public_key, LZ_SIGKEY_PUBLIC_LEN, 0x40);
	fill(manifest.manifest.tls_ca_public, LZ_SIGKEY_PUBLIC_LEN, 0x60);
	fill(manifest.manifest.issuer_public, LZ_SIGKEY_PUBLIC_LEN, 0x80);
	struct vector all[] = {
		VEC(REQUEST, request_rec()),
		VEC(CANCELLATION, cancel),
		VEC(ACK, ack_rec()),
		VEC(DECISION, decision),
		VEC(CHUNK, chunk_rec()),
		VEC(RESULT_EXITED, result_rec(3, LZ_ESC_EXITED, 255, (struct lz_esc_bytes){ 0 })),
		VEC(RESULT_SIGNALED, result_rec(0, LZ_ESC_SIGNALED, 9, (struct lz_esc_bytes){ 0 })),
		VEC(RESULT_FAILED, result_rec(1, LZ_ESC_FAILED, 0, SPAN("boom"))),
		VEC(SESSION_CAP, cap),
		VEC(CREDENTIAL, cred),
		VEC(MANIFEST, manifest),
	};
	_Static_assert(sizeof(all) == sizeof(v), "vector table");
	memcpy(v, all, sizeof(all));
	*ret_n = sizeof(all) / sizeof(all[0]);
	return v;
}

static void assert_span_equal(struct lz_esc_bytes a, struct lz_esc_bytes b)
{
	assert_int_equal(a.n, b.n);
	if (a.n > 0)
		assert_memory_equal(a.p, b.p, a.n);
}

static void assert_record_equal(const struct lz_esc_record *a, const struct lz_esc_record *b)
{
	assert_int_equal(a->kind, b->kind);
	assert_memory_equal(a->scope.domain_id, b->scope.domain_id, LZ_ESC_DOMAIN_ID_LEN);
	assert_true(a->scope.generation == b->scope.generation);
	switch (a->kind) {
	case LZ_ESC_REQUEST:
		assert_memory_equal(a->request.request_id, b->request.request_id, LZ_ESC_ID_LEN);
		assert_span_equal(a->request.capability, b->request.capability);
		assert_int_equal(a->request.argc, b->request.argc);
		for (size_t i = 0; i < a->request.argc; i++)
			assert_span_equal(a->request.argv[i], b->request.argv[i]);
		assert_span_equal(a->request.cwd, b->request.cwd);
		assert_span_equal(a->request.why, b->request.why);
		break;
	case LZ_ESC_CANCELLATION:
		assert_memory_equal(a->cancellation.request_id, b->cancellation.request_id, LZ_ESC_ID_LEN);
		break;
	case LZ_ESC_ACKNOWLEDGEMENT:
		assert_memory_equal(a->acknowledgement.request_id, b->acknowledgement.request_id, LZ_ESC_ID_LEN);
		assert_true(a->acknowledgement.sequence == b->acknowledgement.sequence);
		break;
	case LZ_ESC_DECISION:
		assert_memory_equal(a->decision.request_id, b->decision.request_id, LZ_ESC_ID_LEN);
		assert_int_equal(a->decision.verdict, b->decision.verdict);
		assert_span_equal(a->decision.message, b->decision.message);
		break;
	case LZ_ESC_CHUNK:
		assert_memory_equal(a->chunk.request_id, b->chunk.request_id, LZ_ESC_ID_LEN);
		assert_true(a->chunk.sequence == b->chunk.sequence);
		assert_int_equal(a->chunk.stream, b->chunk.stream);
		assert_span_equal(a->chunk.data, b->chunk.data);
		break;
	case LZ_ESC_TERMINAL_RESULT:
		assert_memory_equal(a->result.request_id, b->result.request_id, LZ_ESC_ID_LEN);
		assert_true(a->result.chunks == b->result.chunks);
		assert_int_equal(a->result.outcome, b->result.outcome);
		assert_int_equal(a->result.value, b->result.value);
		assert_span_equal(a->result.message, b->result.message);
		break;
	case LZ_ESC_SESSION_CAPABILITY:
		assert_memory_equal(a->capability.session_id, b->capability.session_id, LZ_ESC_ID_LEN);
		assert_memory_equal(a->capability.sandbox_credential_id, b->capability.sandbox_credential_id,
				    LZ_ESC_CREDENTIAL_ID_LEN);
		break;
	case LZ_ESC_CREDENTIAL:
		assert_int_equal(a->credential.role, b->credential.role);
		assert_memory_equal(a->credential.public_key, b->credential.public_key, LZ_SIGKEY_PUBLIC_LEN);
		break;
	case LZ_ESC_TRUST_MANIFEST:
		assert_memory_equal(a->manifest.tls_ca_public, b->manifest.tls_ca_public, LZ_SIGKEY_PUBLIC_LEN);
		assert_memory_equal(a->manifest.issuer_public, b->manifest.issuer_public, LZ_SIGKEY_PUBLIC_LEN);
		break;
	default:
		fail();
	}
}

/* ---- Helpers ------------------------------------------------------------ */

static struct lz_sigkey *key_from(uint8_t first)
{
	uint8_t seed[LZ_SIGKEY_SEED_LEN];
	fill(seed, sizeof(seed), first);
	struct lz_sigkey *key = NULL;
	assert_int_equal(lz_sigkey_from_seed(seed, &key), 0);
	return key;
}

#define ALL_KINDS (LZ_ESC_KIND_BIT(LZ_ESC_KIND_COUNT) - 1)

/* decode of kind refuses bytes[0..len) with -EBADMSG. */
static void assert_decode_refused(uint32_t kind, const uint8_t *bytes, size_t len)
{
	struct lz_esc_record rec;
	assert_int_equal(lz_esc_decode(kind, bytes, len, &rec), -EBADMSG);
}

#define DECODE_REFUSED(kind, ...)                                                                  \
	assert_decode_refused(kind, (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }))

static void assert_decodes(uint32_t kind, const uint8_t *bytes, size_t len)
{
	struct lz_esc_record rec;
	assert_int_equal(lz_esc_decode(kind, bytes, len, &rec), 0);
}

#define DECODES(kind, ...)                                                                         \
	assert_decodes(kind, (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }))

/* encode refuses rec with -EINVAL, writes nothing and leaves *ret_len. */
static void assert_encode_invalid(const struct lz_esc_record *rec)
{
	uint8_t buf[256];
	memset(buf, 0x5a, sizeof(buf));
	size_t len = 4321;
	assert_int_equal(lz_esc_encode(rec, buf, sizeof(buf), &len), -EINVAL);
	assert_int_equal(len, 4321);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0x5a);
}

/* open refuses env with err and leaves *ret and *ret_payload untouched. */
static void assert_open_refused(const uint8_t *env, size_t len, uint32_t kinds, const uint8_t *pub, int err)
{
	struct lz_esc_record rec, before;
	struct lz_esc_bytes payload = { (const uint8_t *)"x", 1 };
	memset(&rec, 0x5a, sizeof(rec));
	memcpy(&before, &rec, sizeof(rec));
	assert_int_equal(lz_esc_open(env, len, kinds, pub, &rec, &payload), err);
	assert_memory_equal(&rec, &before, sizeof(rec));
	assert_int_equal(payload.n, 1);
}

/* A growable byte builder for records the encoder refuses to write. */
struct builder {
	uint8_t *buf;
	size_t len;
};

static void put(struct builder *b, const void *p, size_t n)
{
	b->buf = realloc(b->buf, b->len + n + 1);
	assert_non_null(b->buf);
	if (n > 0)
		memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void put_byte(struct builder *b, uint8_t v)
{
	put(b, &v, 1);
}

static void put_varint(struct builder *b, uint64_t v)
{
	do {
		put_byte(b, (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
		v >>= 7;
	} while (v);
}

static void put_run(struct builder *b, size_t n, uint8_t c)
{
	for (size_t i = 0; i < n; i++)
		put_byte(b, c);
}

/* A request payload with argc arguments of arg_len 'a's, an empty
 * capability, a cwd of cwd_len '/'s and an empty why. */
static void build_request(struct builder *b, size_t argc, size_t arg_len, size_t cwd_len)
{
	static const uint8_t head[] = { SCOPE, RID, 0x00 };
	put(b, head, sizeof(head));
	put_varint(b, argc);
	for (size_t i = 0; i < argc; i++) {
		put_varint(b, arg_len);
		put_run(b, arg_len, 'a');
	}
	put_varint(b, cwd_len);
	put_run(b, cwd_len, '/');
	put_byte(b, 0x00);
}

/* An envelope of kind over payload signed by key, bypassing the encoder. */
static void build_envelope(struct builder *b, uint32_t kind, const uint8_t *payload, size_t len,
			   const struct lz_sigkey *key)
{
	uint8_t *msg = malloc(len + 64);
	size_t msg_len = 0;
	uint8_t sig[LZ_SIGKEY_SIG_LEN];
	assert_non_null(msg);
	assert_int_equal(lz_esc_signed_message(kind, payload, len, msg, len + 64, &msg_len), 0);
	assert_int_equal(lz_sigkey_sign(key, msg, msg_len, sig), 0);
	free(msg);
	put_varint(b, kind);
	put_varint(b, len);
	put(b, payload, len);
	put(b, sig, sizeof(sig));
}

/* ---- Names and vectors -------------------------------------------------- */

static void test_lz_esc_kind_name__every_kind_and_unknown(void **state)
{
	(void)state;
	static const char *const names[] = { "request",    "cancellation",    "acknowledgement",
					     "decision",   "chunk",           "terminal-result",
					     "session-request-capability", "credential", "trust-manifest" };
	_Static_assert(sizeof(names) / sizeof(names[0]) == LZ_ESC_KIND_COUNT, "one name per kind");
	for (uint32_t k = 0; k < LZ_ESC_KIND_COUNT; k++)
		assert_string_equal(lz_esc_kind_name(k), names[k]);
	assert_null(lz_esc_kind_name(LZ_ESC_KIND_COUNT));
	assert_null(lz_esc_kind_name(UINT32_MAX));
}

static void test_lz_esc_encode__fixed_vectors(void **state)
{
	(void)state;
	size_t n;
	const struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		uint8_t buf[512];
		size_t len = 0;
		print_message("%s\n", v[i].name);
		assert_int_equal(lz_esc_encode(&v[i].rec, buf, sizeof(buf), &len), 0);
		assert_int_equal(len, v[i].len);
		assert_memory_equal(buf, v[i].bytes, len);
		/* Exactly enough room is enough; any less is -EMSGSIZE. */
		assert_int_equal(lz_esc_encode(&v[i].rec, buf, v[i].len, &len), 0);
		for (size_t cap = 0; cap < v[i].len; cap++) {
			size_t unchanged = 4321;
			assert_int_equal(lz_esc_encode(&v[i].rec, buf, cap, &unchanged), -EMSGSIZE);
			assert_int_equal(unchanged, 4321);
		}
	}
}

static void test_lz_esc_decode__fixed_vectors(void **state)
{
	(void)state;
	size_t n;
	const struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		struct lz_esc_record rec;
		print_message("%s\n", v[i].name);
		memset(&rec, 0x5a, sizeof(rec));
		assert_int_equal(lz_esc_decode(v[i].rec.kind, v[i].bytes, v[i].len, &rec), 0);
		assert_record_equal(&rec, &v[i].rec);
		uint8_t buf[512];
		size_t len = 0;
		assert_int_equal(lz_esc_encode(&rec, buf, sizeof(buf), &len), 0);
		assert_int_equal(len, v[i].len);
		assert_memory_equal(buf, v[i].bytes, len);
	}
}

static void test_lz_esc_decode__borrows_the_payload(void **state)
{
	(void)state;
	struct lz_esc_record rec;
	assert_int_equal(lz_esc_decode(LZ_ESC_REQUEST, REQUEST, sizeof(REQUEST), &rec), 0);
	assert_ptr_equal(rec.request.capability.p, REQUEST + 51);
	assert_ptr_equal(rec.request.argv[0].p, REQUEST + 56);
	assert_ptr_equal(rec.request.argv[1].p, REQUEST + 60);
	assert_ptr_equal(rec.request.cwd.p, REQUEST + 65);
	assert_ptr_equal(rec.request.why.p, REQUEST + 68);
	assert_int_equal(lz_esc_decode(LZ_ESC_CHUNK, CHUNK, sizeof(CHUNK), &rec), 0);
	assert_ptr_equal(rec.chunk.data.p, CHUNK + 53);
}

static void test_lz_esc_decode__truncated_or_trailing(void **state)
{
	(void)state;
	size_t n;
	const struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		print_message("%s\n", v[i].name);
		for (size_t len = 0; len < v[i].len; len++)
			assert_decode_refused(v[i].rec.kind, v[i].bytes, len);
		uint8_t buf[512];
		memcpy(buf, v[i].bytes, v[i].len);
		buf[v[i].len] = 0x00;
		assert_decode_refused(v[i].rec.kind, buf, v[i].len + 1);
	}
}

static void test_lz_esc_decode__wrong_or_unknown_kind(void **state)
{
	(void)state;
	/* An acknowledgement read as a cancellation leaves the sequence over. */
	assert_decode_refused(LZ_ESC_CANCELLATION, ACK, sizeof(ACK));
	assert_decode_refused(LZ_ESC_ACKNOWLEDGEMENT, CANCELLATION, sizeof(CANCELLATION));
	assert_decode_refused(LZ_ESC_KIND_COUNT, CANCELLATION, sizeof(CANCELLATION));
	assert_decode_refused(UINT32_MAX, CANCELLATION, sizeof(CANCELLATION));
	assert_decode_refused(LZ_ESC_CANCELLATION, NULL, 0);
}

/* ---- Value rules (encode -EINVAL, decode -EBADMSG) ---------------------- */

static void test_lz_esc_decode__overlong_varint(void **state)
{
	(void)state;
	/* generation 300 as three bytes, 0 as two */
	DECODE_REFUSED(LZ_ESC_CANCELLATION, RUN32(0x00), 0xac, 0x82, 0x00, RID);
	DECODE_REFUSED(LZ_ESC_CANCELLATION, RUN32(0x00), 0x80, 0x00, RID);
	DECODES(LZ_ESC_CANCELLATION, RUN32(0x00), 0x00, RID);
	/* generation of 11 bytes; 2^64 in 10 */
	DECODE_REFUSED(LZ_ESC_CANCELLATION, RUN32(0x00), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		       0x80, 0x01, RID);
	DECODE_REFUSED(LZ_ESC_CANCELLATION, RUN32(0x00), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		       0x02, RID);
	DECODES(LZ_ESC_CANCELLATION, RUN32(0x00), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, RID);
	/* sequence 128 as three bytes; verdict 2 as two; argc 2 as two */
	DECODE_REFUSED(LZ_ESC_ACKNOWLEDGEMENT, SCOPE, RID, 0x80, 0x81, 0x00);
	DECODE_REFUSED(LZ_ESC_DECISION, SCOPE, RID, 0x82, 0x00, 0x00);
	DECODE_REFUSED(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x82, 0x00, 0x01, 'a', 0x01, 'b', 0x00, 0x00);
	DECODES(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x02, 0x01, 'a', 0x01, 'b', 0x00, 0x00);
	/* a length of 3 as two bytes */
	DECODE_REFUSED(LZ_ESC_CHUNK, SCOPE, RID, 0x01, 0x01, 0x83, 0x00, 'o', 'k', '\n');
	/* value 9 as zigzag 18 in two bytes */
	DECODE_REFUSED(LZ_ESC_TERMINAL_RESULT, SCOPE, RID, 0x00, 0x01, 0x92, 0x00, 0x00);
}

static void test_lz_esc__invalid_utf8_text(void **state)
{
	(void)state;
	/* why: overlong NUL; decision message: a surrogate; result: truncated */
	DECODE_REFUSED(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x01, 0x01, 'a', 0x00, 0x02, 0xc0, 0x80);
	DECODES(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x01, 0x01, 'a', 0x00, 0x02, 0xc3, 0xa9);
	DECODE_REFUSED(LZ_ESC_DECISION, SCOPE, RID, 0x02, 0x03, 0xed, 0xa0, 0x80);
	DECODE_REFUSED(LZ_ESC_TERMINAL_RESULT, SCOPE, RID, 0x00, 0x05, 0x00, 0x02, 'x', 0xe2);

	struct lz_esc_record rec = request_rec();
	rec.request.why = SPAN("\xc0\x80");
	assert_encode_invalid(&rec);
	rec = base(LZ_ESC_DECISION);
	rec.decision.message = SPAN("\xed\xa0\x80");
	assert_encode_invalid(&rec);
	rec = result_rec(0, LZ_ESC_FAILED, 0, SPAN("x\xe2"));
	assert_encode_invalid(&rec);
}

static void test_lz_esc__nul_in_argv_or_cwd(void **state)
{
	(void)state;
	DECODE_REFUSED(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x01, 0x03, 'a', 0x00, 'b', 0x00, 0x00);
	DECODE_REFUSED(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00);
	DECODE_REFUSED(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x01, 0x01, 'a', 0x03, '/', 0x00, 'w', 0x00);
	DECODES(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x01, 0x03, 'a', 'x', 'b', 0x03, '/', 'x', 'w', 0x00);
	/* NUL is a valid UTF-8 scalar, so why may hold one. */
	DECODES(LZ_ESC_REQUEST, SCOPE, RID, 0x00, 0x01, 0x01, 'a', 0x00, 0x01, 0x00);

	struct lz_esc_record rec = request_rec();
	rec.request.argv[1] = SPAN("pu\0sh");
	assert_encode_invalid(&rec);
	rec = request_rec();
	rec.request.cwd = SPAN("/\0");
	assert_encode_invalid(&rec);
}

static void test_lz_esc__request_lengths(void **state)
{
	(void)state;
	static const struct {
		size_t argc, arg_len, cwd_len;
		int decode;
	} cases[] = {
		{ 0, 1, 0, -EBADMSG },
		{ 1, 1, 0, 0 },
		{ 256, 1, 0, 0 },
		{ 257, 1, 0, -EBADMSG },
		{ 1, 0, 0, -EBADMSG },
		{ 1, 4096, 0, 0 },
		{ 1, 4097, 0, -EBADMSG },
		{ 1, 1, 4096, 0 },
		{ 1, 1, 4097, -EBADMSG },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct builder b = { 0 };
		struct lz_esc_record rec;
		print_message("argc %zu, arg %zu, cwd %zu\n", cases[i].argc, cases[i].arg_len, cases[i].cwd_len);
		build_request(&b, cases[i].argc, cases[i].arg_len, cases[i].cwd_len);
		assert_int_equal(lz_esc_decode(LZ_ESC_REQUEST, b.buf, b.len, &rec), cases[i].decode);
		free(b.buf);
	}

	static const uint8_t big[LZ_ESC_ARG_MAX + 1] = { [0 ... LZ_ESC_ARG_MAX] = 'a' };
	struct lz_esc_record rec = request_rec();
	rec.request.argc = 0;
	assert_encode_invalid(&rec);
	rec.request.argc = LZ_ESC_ARGV_MAX + 1;
	for (size_t i = 0; i < LZ_ESC_ARGV_MAX; i++)
		rec.request.argv[i] = SPAN("a");
	assert_encode_invalid(&rec);
	rec = request_rec();
	rec.request.argv[0] = (struct lz_esc_bytes){ big, 0 };
	assert_encode_invalid(&rec);
	rec.request.argv[0] = (struct lz_esc_bytes){ big, LZ_ESC_ARG_MAX + 1 };
	assert_encode_invalid(&rec);
	rec = request_rec();
	rec.request.cwd = (struct lz_esc_bytes){ big, LZ_ESC_ARG_MAX + 1 };
	assert_encode_invalid(&rec);
	rec = request_rec();
	rec.request.capability = (struct lz_esc_bytes){ big, LZ_ESC_CAPABILITY_MAX + 1 };
	assert_encode_invalid(&rec);
	rec = request_rec();
	rec.request.why = (struct lz_esc_bytes){ big, LZ_ESC_TEXT_MAX + 1 };
	assert_encode_invalid(&rec);
	/* A span without bytes behind it. */
	rec = request_rec();
	rec.request.argv[0] = (struct lz_esc_bytes){ NULL, 1 };
	assert_encode_invalid(&rec);
}

static void test_lz_esc__text_and_capability_lengths(void **state)
{
	(void)state;
	static const uint8_t none[] = { 0 }, one_arg[] = { 0x01, 0x01, 'a', 0x00, 0x00 },
			     cap_args[] = { 0x00, 0x01, 0x01, 'a', 0x00 }, failed[] = { 0x00, LZ_ESC_FAILED, 0x00 };
	/* The field of n 'x's sits between pre and post. */
	static const struct {
		const char *name;
		uint32_t kind;
		const uint8_t *pre, *post;
		size_t pre_n, post_n, max;
	} fields[] = {
		{ "capability", LZ_ESC_REQUEST, NULL, one_arg, 0, sizeof(one_arg), LZ_ESC_CAPABILITY_MAX },
		{ "why", LZ_ESC_REQUEST, cap_args, NULL, sizeof(cap_args), 0, LZ_ESC_TEXT_MAX },
		{ "decision message", LZ_ESC_DECISION, none, NULL, sizeof(none), 0, LZ_ESC_TEXT_MAX },
		{ "result message", LZ_ESC_TERMINAL_RESULT, failed, NULL, sizeof(failed), 0, LZ_ESC_TEXT_MAX },
	};
	static const uint8_t head[] = { SCOPE, RID };
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		for (size_t n = fields[i].max; n <= fields[i].max + 1; n++) {
			struct builder b = { 0 };
			struct lz_esc_record rec;
			print_message("%s of %zu bytes\n", fields[i].name, n);
			put(&b, head, sizeof(head));
			put(&b, fields[i].pre, fields[i].pre_n);
			put_varint(&b, n);
			put_run(&b, n, 'x');
			put(&b, fields[i].post, fields[i].post_n);
			assert_int_equal(lz_esc_decode(fields[i].kind, b.buf, b.len, &rec),
					 n <= fields[i].max ? 0 : -EBADMSG);
			free(b.buf);
		}
	}
}

static void test_lz_esc__chunk_limits(void **state)
{
	(void)state;
	static const uint8_t head[] = { SCOPE, RID };
	static const struct {
		uint64_t sequence;
		uint8_t stream;
		size_t len;
		int decode;
	} cases[] = {
		{ 1, 1, 1, 0 },	       { 1, 2, LZ_ESC_CHUNK_MAX, 0 }, { 1, 1, LZ_ESC_CHUNK_MAX + 1, -EBADMSG },
		{ 1, 1, 0, -EBADMSG }, { 1, 0, 1, -EBADMSG },	      { 1, 3, 1, -EBADMSG },
		{ 0, 1, 1, -EBADMSG }, { UINT64_MAX, 1, 1, 0 },
	};
	static uint8_t data[LZ_ESC_CHUNK_MAX + 1];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct builder b = { 0 };
		struct lz_esc_record rec = chunk_rec();
		print_message("sequence %llu, stream %u, %zu bytes\n", (unsigned long long)cases[i].sequence,
			      cases[i].stream, cases[i].len);
		put(&b, head, sizeof(head));
		put_varint(&b, cases[i].sequence);
		put_byte(&b, cases[i].stream);
		put_varint(&b, cases[i].len);
		put(&b, data, cases[i].len);
		assert_int_equal(lz_esc_decode(LZ_ESC_CHUNK, b.buf, b.len, &rec), cases[i].decode);

		/* The encoder draws the same line. */
		uint8_t *out = malloc(LZ_ESC_RECORD_MAX);
		size_t len = 0;
		assert_non_null(out);
		rec = chunk_rec();
		rec.chunk.sequence = cases[i].sequence;
		rec.chunk.stream = cases[i].stream;
		rec.chunk.data = (struct lz_esc_bytes){ data, cases[i].len };
		if (cases[i].decode == 0) {
			assert_int_equal(lz_esc_encode(&rec, out, LZ_ESC_RECORD_MAX, &len), 0);
			assert_int_equal(len, b.len);
			assert_memory_equal(out, b.buf, len);
		} else {
			assert_encode_invalid(&rec);
		}
		free(out);
		free(b.buf);
	}
}

static void test_lz_esc__enum_values(void **state)
{
	(void)state;
	/* verdict 0..2 */
	DECODES(LZ_ESC_DECISION, SCOPE, RID, 0x00, 0x00);
	DECODES(LZ_ESC_DECISION, SCOPE, RID, 0x01, 0x00);
	DECODE_REFUSED(LZ_ESC_DECISION, SCOPE, RID, 0x03, 0x00);
	/* role 0..1 */
	DECODES(LZ_ESC_CREDENTIAL, SCOPE, 0x00, RUN32(0x40));
	DECODE_REFUSED(LZ_ESC_CREDENTIAL, SCOPE, 0x02, RUN32(0x40));
	/* outcome 0..5 (value 0 for these two) */
	DECODES(LZ_ESC_TERMINAL_RESULT, SCOPE, RID, 0x01, 0x02, 0x00, 0x00);
	DECODE_REFUSED(LZ_ESC_TERMINAL_RESULT, SCOPE, RID, 0x01, 0x06, 0x00, 0x00);

	struct lz_esc_record rec = base(LZ_ESC_DECISION);
	rec.decision.verdict = 3;
	assert_encode_invalid(&rec);
	rec = base(LZ_ESC_CREDENTIAL);
	rec.credential.role = 2;
	assert_encode_invalid(&rec);
	rec = result_rec(1, 6, 0, (struct lz_esc_bytes){ 0 });
	assert_encode_invalid(&rec);
	rec = base(LZ_ESC_KIND_COUNT);
	assert_encode_invalid(&rec);
}

static void test_lz_esc__outcome_values(void **state)
{
	(void)state;
	static const struct {
		uint32_t outcome;
		int32_t value;
		bool valid;
	} cases[] = {
		{ LZ_ESC_EXITED, 0, true },	   { LZ_ESC_EXITED, 255, true },    { LZ_ESC_EXITED, 256, false },
		{ LZ_ESC_EXITED, -1, false },	   { LZ_ESC_SIGNALED, 1, true },    { LZ_ESC_SIGNALED, 64, true },
		{ LZ_ESC_SIGNALED, 0, false },	   { LZ_ESC_SIGNALED, 65, false },  { LZ_ESC_REFUSED, 0, true },
		{ LZ_ESC_REFUSED, 1, false },	   { LZ_ESC_CANCELLED, -1, false }, { LZ_ESC_TIMED_OUT, 0, true },
		{ LZ_ESC_TIMED_OUT, INT32_MIN, false }, { LZ_ESC_FAILED, 2, false },
	};
	static const uint8_t head[] = { SCOPE, RID, 0x07 }; /* chunks 7 */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct builder b = { 0 };
		struct lz_esc_record rec = result_rec(7, cases[i].outcome, cases[i].value, (struct lz_esc_bytes){ 0 });
		print_message("outcome %u, value %d\n", cases[i].outcome, cases[i].value);
		put(&b, head, sizeof(head));
		put_varint(&b, cases[i].outcome);
		int64_t v = cases[i].value; /* zigzag by hand */
		put_varint(&b, v >= 0 ? (uint64_t)v * 2 : (uint64_t)(-(v + 1)) * 2 + 1);
		put_byte(&b, 0x00);
		assert_int_equal(lz_esc_decode(LZ_ESC_TERMINAL_RESULT, b.buf, b.len, &rec),
				 cases[i].valid ? 0 : -EBADMSG);
		rec = result_rec(7, cases[i].outcome, cases[i].value, (struct lz_esc_bytes){ 0 });
		if (cases[i].valid) {
			uint8_t out[128];
			size_t len = 0;
			assert_int_equal(lz_esc_encode(&rec, out, sizeof(out), &len), 0);
			assert_int_equal(len, b.len);
			assert_memory_equal(out, b.buf, len);
		} else {
			assert_encode_invalid(&rec);
		}
		free(b.buf);
	}
	/* EXITED 256 by hand: zigzag 512. */
	DECODE_REFUSED(LZ_ESC_TERMINAL_RESULT, SCOPE, RID, 0x03, 0x00, 0x80, 0x04, 0x00);
}

/* ---- Signed message ----------------------------------------------------- */

static void test_lz_esc_signed_message__layout(void **state)
{
	(void)state;
	uint8_t out[128];
	size_t len = 0;
	assert_int_equal(lz_esc_signed_message(LZ_ESC_ACKNOWLEDGEMENT, ACK, sizeof(ACK), out, sizeof(out), &len), 0);
	assert_int_equal(len, sizeof(SIGNED_ACK));
	assert_memory_equal(out, SIGNED_ACK, len);
	/* Exactly enough room; one byte less. */
	assert_int_equal(lz_esc_signed_message(LZ_ESC_ACKNOWLEDGEMENT, ACK, sizeof(ACK), out, sizeof(SIGNED_ACK), &len),
			 0);
	size_t unchanged = 4321;
	assert_int_equal(lz_esc_signed_message(LZ_ESC_ACKNOWLEDGEMENT, ACK, sizeof(ACK), out, sizeof(SIGNED_ACK) - 1,
					       &unchanged),
			 -EMSGSIZE);
	assert_int_equal(unchanged, 4321);

	/* Every name; an empty payload. */
	for (uint32_t k = 0; k < LZ_ESC_KIND_COUNT; k++) {
		const char *name = lz_esc_kind_name(k);
		size_t n = strlen(name);
		assert_int_equal(lz_esc_signed_message(k, NULL, 0, out, sizeof(out), &len), 0);
		assert_int_equal(len, 11 + n + 1 + 4);
		assert_memory_equal(out, "lazaret/v1/", 11);
		assert_memory_equal(out + 11, name, n + 1);
		assert_memory_equal(out + 11 + n + 1, ((const uint8_t[]){ 0, 0, 0, 0 }), 4);
	}

	/* The length is big-endian: 65,536 is 00 01 00 00. */
	uint8_t *payload = calloc(1, LZ_ESC_RECORD_MAX + 1);
	uint8_t *big = malloc(LZ_ESC_RECORD_MAX + 64);
	assert_non_null(payload);
	assert_non_null(big);
	payload[LZ_ESC_RECORD_MAX - 1] = 0x77;
	static const uint8_t head[] = { 'l', 'a', 'z', 'a', 'r', 'e', 't', '/', 'v', '1', '/',
					'c', 'h', 'u', 'n', 'k', 0x00, 0x00, 0x01, 0x00, 0x00 };
	assert_int_equal(lz_esc_signed_message(LZ_ESC_CHUNK, payload, LZ_ESC_RECORD_MAX, big, LZ_ESC_RECORD_MAX + 64,
					       &len),
			 0);
	assert_int_equal(len, sizeof(head) + LZ_ESC_RECORD_MAX);
	assert_memory_equal(big, head, sizeof(head));
	assert_int_equal(big[len - 1], 0x77);
	/* 300 is 00 00 01 2c. */
	assert_int_equal(lz_esc_signed_message(LZ_ESC_CHUNK, payload, 300, big, LZ_ESC_RECORD_MAX + 64, &len), 0);
	assert_memory_equal(big + 17, ((const uint8_t[]){ 0x00, 0x00, 0x01, 0x2c }), 4);

	unchanged = 4321;
	assert_int_equal(lz_esc_signed_message(LZ_ESC_CHUNK, payload, LZ_ESC_RECORD_MAX + 1, big,
					       LZ_ESC_RECORD_MAX + 64, &unchanged),
			 -EINVAL);
	assert_int_equal(lz_esc_signed_message(LZ_ESC_KIND_COUNT, ACK, sizeof(ACK), out, sizeof(out), &unchanged),
			 -EINVAL);
	assert_int_equal(lz_esc_signed_message(UINT32_MAX, ACK, sizeof(ACK), out, sizeof(out), &unchanged), -EINVAL);
	assert_int_equal(unchanged, 4321);
	free(big);
	free(payload);
}

/* ---- Seal and open ------------------------------------------------------ */

static void test_lz_esc_seal__ed25519_vector(void **state)
{
	(void)state;
	struct lz_sigkey *key = key_from(0x01);
	uint8_t pub[LZ_SIGKEY_PUBLIC_LEN];
	lz_sigkey_public(key, pub);
	assert_memory_equal(pub, PUB, sizeof(PUB));

	struct lz_esc_record rec = ack_rec();
	uint8_t out[LZ_ESC_RECORD_MAX];
	size_t len = 0;
	assert_int_equal(lz_esc_seal(&rec, key, out, sizeof(out), &len), 0);
	assert_int_equal(len, sizeof(ENVELOPE_ACK));
	assert_memory_equal(out, ENVELOPE_ACK, len);
	/* The signature verifies over the hand-written signed message. */
	assert_true(lz_sig_verify(PUB, SIGNED_ACK, sizeof(SIGNED_ACK), ENVELOPE_ACK + 2 + sizeof(ACK)));

	/* Exactly enough room; any less. */
	assert_int_equal(lz_esc_seal(&rec, key, out, sizeof(ENVELOPE_ACK), &len), 0);
	for (size_t cap = 0; cap < sizeof(ENVELOPE_ACK); cap++) {
		size_t unchanged = 4321;
		assert_int_equal(lz_esc_seal(&rec, key, out, cap, &unchanged), -EMSGSIZE);
		assert_int_equal(unchanged, 4321);
	}
	rec.kind = LZ_ESC_KIND_COUNT;
	assert_int_equal(lz_esc_seal(&rec, key, out, sizeof(out), &len), -EINVAL);
	lz_sigkey_free(key);
}

static void test_lz_esc_frame__verifies_nothing(void **state)
{
	(void)state;
	uint32_t kind = 77;
	struct lz_esc_bytes payload = { 0 };
	assert_int_equal(lz_esc_frame(ENVELOPE_ACK, sizeof(ENVELOPE_ACK), &kind, &payload), 0);
	assert_int_equal(kind, LZ_ESC_ACKNOWLEDGEMENT);
	assert_ptr_equal(payload.p, ENVELOPE_ACK + 2);
	assert_int_equal(payload.n, sizeof(ACK));
	/* No signature check, no payload parse: a zero signature over garbage. */
	uint8_t garbage[2 + 3 + LZ_SIGKEY_SIG_LEN] = { LZ_ESC_REQUEST, 0x03, 0xff, 0xff, 0xff };
	assert_int_equal(lz_esc_frame(garbage, sizeof(garbage), &kind, &payload), 0);
	assert_int_equal(kind, LZ_ESC_REQUEST);
	assert_ptr_equal(payload.p, garbage + 2);
	assert_int_equal(payload.n, 3);

	/* Refusals leave the outputs untouched. */
	uint8_t *big = calloc(1, LZ_ESC_RECORD_MAX + 1);
	assert_non_null(big);
	memcpy(big, ENVELOPE_ACK, sizeof(ENVELOPE_ACK));
	kind = 77;
	payload = (struct lz_esc_bytes){ 0 };
	assert_int_equal(lz_esc_frame(big, LZ_ESC_RECORD_MAX + 1, &kind, &payload), -E2BIG);
	assert_int_equal(lz_esc_frame(big, sizeof(ENVELOPE_ACK) + 1, &kind, &payload), -EBADMSG);
	for (size_t len = 0; len < sizeof(ENVELOPE_ACK); len++)
		assert_int_equal(lz_esc_frame(ENVELOPE_ACK, len, &kind, &payload), -EBADMSG);
	big[0] = LZ_ESC_KIND_COUNT;
	assert_int_equal(lz_esc_frame(big, sizeof(ENVELOPE_ACK), &kind, &payload), -EBADMSG);
	assert_int_equal(kind, 77);
	assert_null(payload.p);
	free(big);
}

static void test_lz_esc_open__ed25519_vector(void **state)
{
	(void)state;
	struct lz_esc_record rec, want = ack_rec();
	struct lz_esc_bytes payload = { 0 };
	assert_int_equal(lz_esc_open(ENVELOPE_ACK, sizeof(ENVELOPE_ACK), LZ_ESC_KIND_BIT(LZ_ESC_ACKNOWLEDGEMENT), PUB,
				     &rec, &payload),
			 0);
	assert_record_equal(&rec, &want);
	assert_ptr_equal(payload.p, ENVELOPE_ACK + 2);
	assert_int_equal(payload.n, sizeof(ACK));
	/* ret_payload may be NULL. */
	assert_int_equal(lz_esc_open(ENVELOPE_ACK, sizeof(ENVELOPE_ACK), ALL_KINDS, PUB, &rec, NULL), 0);
}

static void test_lz_esc_open__round_trip_every_kind(void **state)
{
	(void)state;
	struct lz_sigkey *key = key_from(0x01);
	size_t n;
	const struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		uint8_t env[1024];
		size_t len = 0;
		struct lz_esc_record rec;
		struct lz_esc_bytes payload = { 0 };
		print_message("%s\n", v[i].name);
		assert_int_equal(lz_esc_seal(&v[i].rec, key, env, sizeof(env), &len), 0);
		assert_int_equal(len, 1 + (v[i].len < 128 ? 1 : 2) + v[i].len + LZ_SIGKEY_SIG_LEN);
		assert_int_equal(env[0], v[i].rec.kind);
		assert_int_equal(lz_esc_open(env, len, LZ_ESC_KIND_BIT(v[i].rec.kind), PUB, &rec, &payload), 0);
		assert_record_equal(&rec, &v[i].rec);
		assert_int_equal(payload.n, v[i].len);
		assert_memory_equal(payload.p, v[i].bytes, v[i].len);
		assert_true(payload.p > env && payload.p + payload.n <= env + len);
		/* The only kind not asked for. */
		assert_open_refused(env, len, ALL_KINDS & ~LZ_ESC_KIND_BIT(v[i].rec.kind), PUB, -EPROTO);
	}
	lz_sigkey_free(key);
}

static void test_lz_esc_open__wrong_key(void **state)
{
	(void)state;
	struct lz_sigkey *other = key_from(0x02);
	uint8_t pub[LZ_SIGKEY_PUBLIC_LEN];
	lz_sigkey_public(other, pub);
	assert_open_refused(ENVELOPE_ACK, sizeof(ENVELOPE_ACK), ALL_KINDS, pub, -EPERM);
	/* Sealed by the other key, opened with PUB. */
	struct lz_esc_record rec = ack_rec();
	uint8_t env[256];
	size_t len = 0;
	assert_int_equal(lz_esc_seal(&rec, other, env, sizeof(env), &len), 0);
	assert_open_refused(env, len, ALL_KINDS, PUB, -EPERM);
	/* An all-zero public key is no key. */
	static const uint8_t zero_pub[LZ_SIGKEY_PUBLIC_LEN];
	assert_open_refused(ENVELOPE_ACK, sizeof(ENVELOPE_ACK), ALL_KINDS, zero_pub, -EPERM);
	lz_sigkey_free(other);
}

static void test_lz_esc_open__zero_signature(void **state)
{
	(void)state;
	uint8_t env[sizeof(ENVELOPE_ACK)];
	memcpy(env, ENVELOPE_ACK, sizeof(env));
	memset(env + 2 + sizeof(ACK), 0, LZ_SIGKEY_SIG_LEN);
	assert_open_refused(env, sizeof(env), ALL_KINDS, PUB, -EPERM);
}

static void test_lz_esc_open__any_flipped_byte(void **state)
{
	(void)state;
	/* Every payload and signature byte: the framing stays valid, the
	 * signature does not. */
	for (size_t i = 2; i < sizeof(ENVELOPE_ACK); i++) {
		uint8_t env[sizeof(ENVELOPE_ACK)];
		memcpy(env, ENVELOPE_ACK, sizeof(env));
		env[i] ^= 0x01;
		assert_open_refused(env, sizeof(env), ALL_KINDS, PUB, -EPERM);
	}
	/* Another kind over the same payload: the name is signed. */
	for (uint32_t k = 0; k < LZ_ESC_KIND_COUNT; k++) {
		uint8_t env[sizeof(ENVELOPE_ACK)];
		if (k == LZ_ESC_ACKNOWLEDGEMENT)
			continue;
		memcpy(env, ENVELOPE_ACK, sizeof(env));
		env[0] = (uint8_t)k;
		assert_open_refused(env, sizeof(env), ALL_KINDS, PUB, -EPERM);
	}
}

static void test_lz_esc_open__order_of_checks(void **state)
{
	(void)state;
	/* The mask is checked before the signature. */
	uint8_t env[sizeof(ENVELOPE_ACK)];
	memcpy(env, ENVELOPE_ACK, sizeof(env));
	memset(env + 2 + sizeof(ACK), 0, LZ_SIGKEY_SIG_LEN);
	assert_open_refused(env, sizeof(env), 0, PUB, -EPROTO);
	assert_open_refused(ENVELOPE_ACK, sizeof(ENVELOPE_ACK), 0, PUB, -EPROTO);
	assert_open_refused(ENVELOPE_ACK, sizeof(ENVELOPE_ACK), LZ_ESC_KIND_BIT(LZ_ESC_REQUEST), PUB, -EPROTO);
	/* The signature before the payload: garbage under a bad signature. */
	uint8_t garbage[2 + 3 + LZ_SIGKEY_SIG_LEN] = { LZ_ESC_REQUEST, 0x03, 0xff, 0xff, 0xff };
	assert_open_refused(garbage, sizeof(garbage), ALL_KINDS, PUB, -EPERM);
	assert_open_refused(garbage, sizeof(garbage), LZ_ESC_KIND_BIT(LZ_ESC_CHUNK), PUB, -EPROTO);
}

static void test_lz_esc_open__malformed_envelope(void **state)
{
	(void)state;
	uint8_t env[sizeof(ENVELOPE_ACK) + 1];
	/* Unknown kinds: 9, 127, 2^32 - 1; an overlong kind 2. */
	static const uint8_t kinds[][5] = { { 0x09 }, { 0x7f }, { 0xff, 0xff, 0xff, 0xff, 0x0f }, { 0x82, 0x00 } };
	static const size_t kind_len[] = { 1, 1, 5, 2 };
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		uint8_t buf[sizeof(ENVELOPE_ACK) + 4];
		memcpy(buf, kinds[i], kind_len[i]);
		memcpy(buf + kind_len[i], ENVELOPE_ACK + 1, sizeof(ENVELOPE_ACK) - 1);
		assert_open_refused(buf, kind_len[i] + sizeof(ENVELOPE_ACK) - 1, ALL_KINDS, PUB, -EBADMSG);
		assert_open_refused(buf, kind_len[i] + sizeof(ENVELOPE_ACK) - 1, 0xffffffffu, PUB, -EBADMSG);
	}
	/* A trailing byte after the signature. */
	memcpy(env, ENVELOPE_ACK, sizeof(ENVELOPE_ACK));
	env[sizeof(ENVELOPE_ACK)] = 0x00;
	assert_open_refused(env, sizeof(env), ALL_KINDS, PUB, -EBADMSG);
	/* Truncated at every length, down to nothing (and no buffer). */
	for (size_t len = 0; len < sizeof(ENVELOPE_ACK); len++)
		assert_open_refused(ENVELOPE_ACK, len, ALL_KINDS, PUB, -EBADMSG);
	assert_open_refused(NULL, 0, ALL_KINDS, PUB, -EBADMSG);
	/* The payload length as an overlong varint (52 in two bytes). */
	uint8_t over[sizeof(ENVELOPE_ACK) + 1] = { 0x02, 0xb4, 0x00 };
	memcpy(over + 3, ENVELOPE_ACK + 2, sizeof(ENVELOPE_ACK) - 2);
	assert_open_refused(over, sizeof(over), ALL_KINDS, PUB, -EBADMSG);
}

static void test_lz_esc_open__over_record_max(void **state)
{
	(void)state;
	uint8_t *env = calloc(1, LZ_ESC_RECORD_MAX + 1);
	assert_non_null(env);
	memcpy(env, ENVELOPE_ACK, sizeof(ENVELOPE_ACK));
	assert_open_refused(env, LZ_ESC_RECORD_MAX + 1, ALL_KINDS, PUB, -E2BIG);
	assert_open_refused(env, LZ_ESC_RECORD_MAX + 1, 0, PUB, -E2BIG);
	/* At the limit it is read, and refused for its trailing bytes. */
	assert_open_refused(env, LZ_ESC_RECORD_MAX, ALL_KINDS, PUB, -EBADMSG);
	free(env);
}

static void test_lz_esc_open__signed_malformed_payload(void **state)
{
	(void)state;
	struct lz_sigkey *key = key_from(0x01);
	static const uint8_t overlong[] = { RUN32(0x00), 0xac, 0x82, 0x00, RID };
	static const uint8_t trailing[] = { SCOPE, RID, 0x00 };
	static const uint8_t bad_why[] = { SCOPE, RID, 0x00, 0x01, 0x01, 'a', 0x00, 0x02, 0xc0, 0x80 };
	static const uint8_t nul_arg[] = { SCOPE, RID, 0x00, 0x01, 0x03, 'a', 0x00, 'b', 0x00, 0x00 };
	static const uint8_t stream3[] = { SCOPE, RID, 0x01, 0x03, 0x01, 'x' };
	static const uint8_t outcome6[] = { SCOPE, RID, 0x01, 0x06, 0x00, 0x00 };
	static const struct {
		uint32_t kind;
		const uint8_t *p;
		size_t n;
	} cases[] = {
		{ LZ_ESC_CANCELLATION, overlong, sizeof(overlong) }, { LZ_ESC_CANCELLATION, trailing, sizeof(trailing) },
		{ LZ_ESC_REQUEST, bad_why, sizeof(bad_why) },	     { LZ_ESC_REQUEST, nul_arg, sizeof(nul_arg) },
		{ LZ_ESC_CHUNK, stream3, sizeof(stream3) },	     { LZ_ESC_TERMINAL_RESULT, outcome6, sizeof(outcome6) },
		{ LZ_ESC_CANCELLATION, NULL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct builder b = { 0 };
		build_envelope(&b, cases[i].kind, cases[i].p, cases[i].n, key);
		assert_open_refused(b.buf, b.len, ALL_KINDS, PUB, -EBADMSG);
		free(b.buf);
	}
	/* The builder makes what seal makes. */
	struct builder b = { 0 };
	build_envelope(&b, LZ_ESC_ACKNOWLEDGEMENT, ACK, sizeof(ACK), key);
	assert_int_equal(b.len, sizeof(ENVELOPE_ACK));
	assert_memory_equal(b.buf, ENVELOPE_ACK, b.len);
	free(b.buf);
	lz_sigkey_free(key);
}

/* A request whose last argument has last_len bytes: 15 arguments of 4,096
 * bytes and one more make a payload of 61,526 + last_len bytes. */
static struct lz_esc_record near_max_request(const uint8_t *arg, size_t last_len)
{
	struct lz_esc_record rec = request_rec();
	rec.request.capability = (struct lz_esc_bytes){ 0 };
	rec.request.cwd = (struct lz_esc_bytes){ 0 };
	rec.request.why = (struct lz_esc_bytes){ 0 };
	rec.request.argc = 16;
	for (size_t i = 0; i < 15; i++)
		rec.request.argv[i] = (struct lz_esc_bytes){ arg, LZ_ESC_ARG_MAX };
	rec.request.argv[15] = (struct lz_esc_bytes){ arg, last_len };
	return rec;
}

static void test_lz_esc_seal__near_record_max(void **state)
{
	(void)state;
	static const uint8_t arg[LZ_ESC_ARG_MAX] = { [0 ... LZ_ESC_ARG_MAX - 1] = 'a' };
	struct lz_sigkey *key = key_from(0x01);
	uint8_t *out = malloc(2 * LZ_ESC_RECORD_MAX);
	size_t len = 0;
	assert_non_null(out);

	/* 65,468 bytes of payload: 1 + 3 + 65,468 + 64 = 65,536. */
	struct lz_esc_record rec = near_max_request(arg, 3942);
	assert_int_equal(lz_esc_encode(&rec, out, 2 * LZ_ESC_RECORD_MAX, &len), 0);
	assert_int_equal(len, 65468);
	assert_int_equal(lz_esc_seal(&rec, key, out, 2 * LZ_ESC_RECORD_MAX, &len), 0);
	assert_int_equal(len, LZ_ESC_RECORD_MAX);
	struct lz_esc_record got;
	struct lz_esc_bytes payload;
	assert_int_equal(lz_esc_open(out, len, LZ_ESC_KIND_BIT(LZ_ESC_REQUEST), PUB, &got, &payload), 0);
	assert_record_equal(&got, &rec);
	assert_int_equal(payload.n, 65468);
	assert_open_refused(out, len - 1, ALL_KINDS, PUB, -EBADMSG);

	/* One byte more encodes, but does not fit an envelope. */
	rec = near_max_request(arg, 3943);
	assert_int_equal(lz_esc_encode(&rec, out, 2 * LZ_ESC_RECORD_MAX, &len), 0);
	assert_int_equal(len, 65469);
	size_t unchanged = 4321;
	assert_int_equal(lz_esc_seal(&rec, key, out, 2 * LZ_ESC_RECORD_MAX, &unchanged), -EMSGSIZE);
	assert_int_equal(unchanged, 4321);
	/* A payload over the limit on its own. */
	rec = near_max_request(arg, 4096);
	rec.request.argc = 17;
	rec.request.argv[16] = (struct lz_esc_bytes){ arg, LZ_ESC_ARG_MAX };
	assert_int_equal(lz_esc_seal(&rec, key, out, 2 * LZ_ESC_RECORD_MAX, &unchanged), -EMSGSIZE);
	assert_int_equal(unchanged, 4321);
	free(out);
	lz_sigkey_free(key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_esc_kind_name__every_kind_and_unknown),
		cmocka_unit_test(test_lz_esc_encode__fixed_vectors),
		cmocka_unit_test(test_lz_esc_decode__fixed_vectors),
		cmocka_unit_test(test_lz_esc_decode__borrows_the_payload),
		cmocka_unit_test(test_lz_esc_decode__truncated_or_trailing),
		cmocka_unit_test(test_lz_esc_decode__wrong_or_unknown_kind),
		cmocka_unit_test(test_lz_esc_decode__overlong_varint),
		cmocka_unit_test(test_lz_esc__invalid_utf8_text),
		cmocka_unit_test(test_lz_esc__nul_in_argv_or_cwd),
		cmocka_unit_test(test_lz_esc__request_lengths),
		cmocka_unit_test(test_lz_esc__text_and_capability_lengths),
		cmocka_unit_test(test_lz_esc__chunk_limits),
		cmocka_unit_test(test_lz_esc__enum_values),
		cmocka_unit_test(test_lz_esc__outcome_values),
		cmocka_unit_test(test_lz_esc_signed_message__layout),
		cmocka_unit_test(test_lz_esc_seal__ed25519_vector),
		cmocka_unit_test(test_lz_esc_frame__verifies_nothing),
		cmocka_unit_test(test_lz_esc_open__ed25519_vector),
		cmocka_unit_test(test_lz_esc_open__round_trip_every_kind),
		cmocka_unit_test(test_lz_esc_open__wrong_key),
		cmocka_unit_test(test_lz_esc_open__zero_signature),
		cmocka_unit_test(test_lz_esc_open__any_flipped_byte),
		cmocka_unit_test(test_lz_esc_open__order_of_checks),
		cmocka_unit_test(test_lz_esc_open__malformed_envelope),
		cmocka_unit_test(test_lz_esc_open__over_record_max),
		cmocka_unit_test(test_lz_esc_open__signed_malformed_payload),
		cmocka_unit_test(test_lz_esc_seal__near_record_max),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
