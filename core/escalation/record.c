/* Escalation protocol records (see record.h for the format, the limits and
 * the threat).
 *
 * One validator (record_valid) states the value rules; the encoder applies
 * it before writing and the decoder after reading, so both sides agree on
 * what a record is. The Postcard reader bounds every length by the limit
 * first, so no length prefix drives a read past the payload. lz_esc_open
 * works in a fixed order: size and envelope framing (lz_esc_frame), kind
 * mask, signature over the exact payload bytes, and only then the payload;
 * a record that fails leaves the caller's *ret untouched. */
#include "escalation/record.h"

#include <errno.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/postcard.h"

static const char *const kind_names[LZ_ESC_KIND_COUNT] = {
	[LZ_ESC_REQUEST] = "request",
	[LZ_ESC_CANCELLATION] = "cancellation",
	[LZ_ESC_ACKNOWLEDGEMENT] = "acknowledgement",
	[LZ_ESC_DECISION] = "decision",
	[LZ_ESC_CHUNK] = "chunk",
	[LZ_ESC_TERMINAL_RESULT] = "terminal-result",
	[LZ_ESC_SESSION_CAPABILITY] = "session-request-capability",
	[LZ_ESC_CREDENTIAL] = "credential",
	[LZ_ESC_TRUST_MANIFEST] = "trust-manifest",
};

#define SIGNED_PREFIX "lazaret/v1/"
/* "lazaret/v1/" || longest name || NUL || u32 length. */
#define SIGNED_HEADER_MAX (sizeof(SIGNED_PREFIX) - 1 + sizeof("session-request-capability") + 4)

const char *lz_esc_kind_name(uint32_t kind)
{
	return kind < LZ_ESC_KIND_COUNT ? kind_names[kind] : NULL;
}

/* ---- Value rules -------------------------------------------------------- */

static bool span_ok(const struct lz_esc_bytes *b, size_t min, size_t max)
{
	return (b->p != NULL || b->n == 0) && b->n >= min && b->n <= max;
}

static bool has_nul(const struct lz_esc_bytes *b)
{
	return b->n > 0 && memchr(b->p, '\0', b->n) != NULL;
}

static bool text_ok(const struct lz_esc_bytes *b)
{
	return span_ok(b, 0, LZ_ESC_TEXT_MAX) && lz_pc_utf8_valid(b->p, b->n);
}

/* The working directory is a path: a NUL would cut it short where it is
 * used as a C string, so it is refused like one in an argument. */
static bool request_valid(const struct lz_esc_request *q)
{
	if (!span_ok(&q->capability, 0, LZ_ESC_CAPABILITY_MAX) || q->argc < 1 || q->argc > LZ_ESC_ARGV_MAX)
		return false;
	for (size_t i = 0; i < q->argc; i++)
		if (!span_ok(&q->argv[i], 1, LZ_ESC_ARG_MAX) || has_nul(&q->argv[i]))
			return false;
	return span_ok(&q->cwd, 0, LZ_ESC_ARG_MAX) && !has_nul(&q->cwd) && text_ok(&q->why);
}

static bool result_valid(const struct lz_esc_terminal_result *t)
{
	switch (t->outcome) {
	case LZ_ESC_EXITED:
		if (t->value < 0 || t->value > 255)
			return false;
		break;
	case LZ_ESC_SIGNALED:
		if (t->value < 1 || t->value > 64)
			return false;
		break;
	case LZ_ESC_REFUSED:
	case LZ_ESC_CANCELLED:
	case LZ_ESC_TIMED_OUT:
	case LZ_ESC_FAILED:
		if (t->value != 0)
			return false;
		break;
	default:
		return false;
	}
	return text_ok(&t->message);
}

static bool record_valid(const struct lz_esc_record *rec)
{
	switch (rec->kind) {
	case LZ_ESC_REQUEST:
		return request_valid(&rec->request);
	case LZ_ESC_CANCELLATION:
	case LZ_ESC_ACKNOWLEDGEMENT:
	case LZ_ESC_SESSION_CAPABILITY:
	case LZ_ESC_TRUST_MANIFEST:
		return true;
	case LZ_ESC_DECISION:
		return rec->decision.verdict <= LZ_ESC_DENIED && text_ok(&rec->decision.message);
	case LZ_ESC_CHUNK:
		return rec->chunk.sequence >= 1 &&
		       (rec->chunk.stream == LZ_ESC_STDOUT || rec->chunk.stream == LZ_ESC_STDERR) &&
		       span_ok(&rec->chunk.data, 1, LZ_ESC_CHUNK_MAX);
	case LZ_ESC_TERMINAL_RESULT:
		return result_valid(&rec->result);
	case LZ_ESC_CREDENTIAL:
		return rec->credential.role <= LZ_ESC_ROLE_SANDBOX;
	default:
		return false;
	}
}

/* ---- Encoding ----------------------------------------------------------- */

static void put_span(struct lz_pc_writer *w, const struct lz_esc_bytes *b)
{
	lz_pc_put_bytes(w, b->p, b->n);
}

static void put_text(struct lz_pc_writer *w, const struct lz_esc_bytes *b)
{
	lz_pc_put_str(w, (const char *)b->p, b->n);
}

static void put_request(struct lz_pc_writer *w, const struct lz_esc_request *q)
{
	lz_pc_put_fixed(w, q->request_id, LZ_ESC_ID_LEN);
	put_span(w, &q->capability);
	lz_pc_put_seq_len(w, q->argc);
	for (size_t i = 0; i < q->argc; i++)
		put_span(w, &q->argv[i]);
	put_span(w, &q->cwd);
	put_text(w, &q->why);
}

static void put_chunk(struct lz_pc_writer *w, const struct lz_esc_chunk *c)
{
	lz_pc_put_fixed(w, c->request_id, LZ_ESC_ID_LEN);
	lz_pc_put_u64(w, c->sequence);
	lz_pc_put_u8(w, c->stream);
	put_span(w, &c->data);
}

static void put_result(struct lz_pc_writer *w, const struct lz_esc_terminal_result *t)
{
	lz_pc_put_fixed(w, t->request_id, LZ_ESC_ID_LEN);
	lz_pc_put_u64(w, t->chunks);
	lz_pc_put_discriminant(w, t->outcome);
	lz_pc_put_i32(w, t->value);
	put_text(w, &t->message);
}

/* Writer errors are sticky: the caller checks once with finish. */
static void put_record(struct lz_pc_writer *w, const struct lz_esc_record *rec)
{
	lz_pc_put_fixed(w, rec->scope.domain_id, LZ_ESC_DOMAIN_ID_LEN);
	lz_pc_put_u64(w, rec->scope.generation);
	switch (rec->kind) {
	case LZ_ESC_REQUEST:
		put_request(w, &rec->request);
		break;
	case LZ_ESC_CANCELLATION:
		lz_pc_put_fixed(w, rec->cancellation.request_id, LZ_ESC_ID_LEN);
		break;
	case LZ_ESC_ACKNOWLEDGEMENT:
		lz_pc_put_fixed(w, rec->acknowledgement.request_id, LZ_ESC_ID_LEN);
		lz_pc_put_u64(w, rec->acknowledgement.sequence);
		break;
	case LZ_ESC_DECISION:
		lz_pc_put_fixed(w, rec->decision.request_id, LZ_ESC_ID_LEN);
		lz_pc_put_discriminant(w, rec->decision.verdict);
		put_text(w, &rec->decision.message);
		break;
	case LZ_ESC_CHUNK:
		put_chunk(w, &rec->chunk);
		break;
	case LZ_ESC_TERMINAL_RESULT:
		put_result(w, &rec->result);
		break;
	case LZ_ESC_SESSION_CAPABILITY:
		lz_pc_put_fixed(w, rec->capability.session_id, LZ_ESC_ID_LEN);
		lz_pc_put_fixed(w, rec->capability.sandbox_credential_id, LZ_ESC_CREDENTIAL_ID_LEN);
		break;
	case LZ_ESC_CREDENTIAL:
		lz_pc_put_discriminant(w, rec->credential.role);
		lz_pc_put_fixed(w, rec->credential.public_key, LZ_SIGKEY_PUBLIC_LEN);
		break;
	case LZ_ESC_TRUST_MANIFEST:
		lz_pc_put_fixed(w, rec->manifest.tls_ca_public, LZ_SIGKEY_PUBLIC_LEN);
		lz_pc_put_fixed(w, rec->manifest.issuer_public, LZ_SIGKEY_PUBLIC_LEN);
		break;
	}
}

int lz_esc_encode(const struct lz_esc_record *rec, uint8_t *buf, size_t cap, size_t *ret_len)
{
	if (!record_valid(rec))
		return -EINVAL;
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, cap);
	put_record(&w, rec);
	return lz_pc_writer_finish(&w, ret_len);
}

/* ---- Decoding ----------------------------------------------------------- */

/* Each get_* returns 0 or -EBADMSG; the reader's limits only bound the
 * lengths, record_valid applies the rest. */
static int get_span(struct lz_pc_reader *r, size_t max, struct lz_esc_bytes *ret)
{
	return lz_pc_get_bytes(r, max, &ret->p, &ret->n);
}

static int get_text(struct lz_pc_reader *r, struct lz_esc_bytes *ret)
{
	const char *s;
	int e = lz_pc_get_str(r, LZ_ESC_TEXT_MAX, &s, &ret->n);
	if (e < 0)
		return e;
	ret->p = (const uint8_t *)s;
	return 0;
}

static int get_request(struct lz_pc_reader *r, struct lz_esc_request *q)
{
	int e;
	if ((e = lz_pc_get_fixed(r, q->request_id, LZ_ESC_ID_LEN)) < 0 ||
	    (e = get_span(r, LZ_ESC_CAPABILITY_MAX, &q->capability)) < 0 ||
	    (e = lz_pc_get_seq_len(r, LZ_ESC_ARGV_MAX, &q->argc)) < 0)
		return e;
	for (size_t i = 0; i < q->argc; i++)
		if ((e = get_span(r, LZ_ESC_ARG_MAX, &q->argv[i])) < 0)
			return e;
	if ((e = get_span(r, LZ_ESC_ARG_MAX, &q->cwd)) < 0)
		return e;
	return get_text(r, &q->why);
}

static int get_chunk(struct lz_pc_reader *r, struct lz_esc_chunk *c)
{
	int e;
	if ((e = lz_pc_get_fixed(r, c->request_id, LZ_ESC_ID_LEN)) < 0 || (e = lz_pc_get_u64(r, &c->sequence)) < 0 ||
	    (e = lz_pc_get_u8(r, &c->stream)) < 0)
		return e;
	return get_span(r, LZ_ESC_CHUNK_MAX, &c->data);
}

static int get_result(struct lz_pc_reader *r, struct lz_esc_terminal_result *t)
{
	int e;
	if ((e = lz_pc_get_fixed(r, t->request_id, LZ_ESC_ID_LEN)) < 0 || (e = lz_pc_get_u64(r, &t->chunks)) < 0 ||
	    (e = lz_pc_get_discriminant(r, &t->outcome)) < 0 || (e = lz_pc_get_i32(r, &t->value)) < 0)
		return e;
	return get_text(r, &t->message);
}

static int get_record(struct lz_pc_reader *r, struct lz_esc_record *rec)
{
	int e;
	if ((e = lz_pc_get_fixed(r, rec->scope.domain_id, LZ_ESC_DOMAIN_ID_LEN)) < 0 ||
	    (e = lz_pc_get_u64(r, &rec->scope.generation)) < 0)
		return e;
	switch (rec->kind) {
	case LZ_ESC_REQUEST:
		return get_request(r, &rec->request);
	case LZ_ESC_CANCELLATION:
		return lz_pc_get_fixed(r, rec->cancellation.request_id, LZ_ESC_ID_LEN);
	case LZ_ESC_ACKNOWLEDGEMENT:
		if ((e = lz_pc_get_fixed(r, rec->acknowledgement.request_id, LZ_ESC_ID_LEN)) < 0)
			return e;
		return lz_pc_get_u64(r, &rec->acknowledgement.sequence);
	case LZ_ESC_DECISION:
		if ((e = lz_pc_get_fixed(r, rec->decision.request_id, LZ_ESC_ID_LEN)) < 0 ||
		    (e = lz_pc_get_discriminant(r, &rec->decision.verdict)) < 0)
			return e;
		return get_text(r, &rec->decision.message);
	case LZ_ESC_CHUNK:
		return get_chunk(r, &rec->chunk);
	case LZ_ESC_TERMINAL_RESULT:
		return get_result(r, &rec->result);
	case LZ_ESC_SESSION_CAPABILITY:
		if ((e = lz_pc_get_fixed(r, rec->capability.session_id, LZ_ESC_ID_LEN)) < 0)
			return e;
		return lz_pc_get_fixed(r, rec->capability.sandbox_credential_id, LZ_ESC_CREDENTIAL_ID_LEN);
	case LZ_ESC_CREDENTIAL:
		if ((e = lz_pc_get_discriminant(r, &rec->credential.role)) < 0)
			return e;
		return lz_pc_get_fixed(r, rec->credential.public_key, LZ_SIGKEY_PUBLIC_LEN);
	case LZ_ESC_TRUST_MANIFEST:
		if ((e = lz_pc_get_fixed(r, rec->manifest.tls_ca_public, LZ_SIGKEY_PUBLIC_LEN)) < 0)
			return e;
		return lz_pc_get_fixed(r, rec->manifest.issuer_public, LZ_SIGKEY_PUBLIC_LEN);
	default:
		return -EBADMSG;
	}
}

int lz_esc_decode(uint32_t kind, const uint8_t *payload, size_t len, struct lz_esc_record *ret)
{
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, payload, len);
	memset(ret, 0, sizeof(*ret));
	ret->kind = kind;
	if (kind >= LZ_ESC_KIND_COUNT || get_record(&r, ret) < 0 || lz_pc_reader_end(&r) < 0 ||
	    !record_valid(ret))
		return -EBADMSG;
	return 0;
}

/* ---- Signing ------------------------------------------------------------ */

int lz_esc_signed_message(uint32_t kind, const uint8_t *payload, size_t len, uint8_t *out, size_t cap,
			  size_t *ret_len)
{
	const char *name = lz_esc_kind_name(kind);
	if (name == NULL || len > LZ_ESC_RECORD_MAX)
		return -EINVAL;
	size_t name_len = strlen(name);
	uint8_t be[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len };
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, out, cap);
	lz_pc_put_fixed(&w, SIGNED_PREFIX, sizeof(SIGNED_PREFIX) - 1);
	lz_pc_put_fixed(&w, name, name_len + 1); /* with its NUL */
	lz_pc_put_fixed(&w, be, sizeof(be));
	lz_pc_put_fixed(&w, payload, len);
	return lz_pc_writer_finish(&w, ret_len);
}

/* The signed message of kind over payload, built in a heap buffer (the
 * payload can be close to 64 KiB); *ret is the caller's to free. */
static int signed_message_alloc(uint32_t kind, const uint8_t *payload, size_t len, uint8_t **ret,
				size_t *ret_len)
{
	size_t cap = SIGNED_HEADER_MAX + len;
	_cleanup_free_ uint8_t *msg = malloc(cap);
	if (msg == NULL)
		return -ENOMEM;
	int e = lz_esc_signed_message(kind, payload, len, msg, cap, ret_len);
	if (e < 0)
		return e;
	*ret = TAKE_PTR(msg);
	return 0;
}

int lz_esc_seal(const struct lz_esc_record *rec, const struct lz_sigkey *key, uint8_t *out, size_t cap,
		size_t *ret_len)
{
	_cleanup_free_ uint8_t *payload = malloc(LZ_ESC_RECORD_MAX);
	if (payload == NULL)
		return -ENOMEM;
	size_t len;
	int e = lz_esc_encode(rec, payload, LZ_ESC_RECORD_MAX, &len);
	if (e < 0)
		return e;

	/* Frame first, so an envelope that cannot fit is refused unsigned. */
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, out, cap < LZ_ESC_RECORD_MAX ? cap : LZ_ESC_RECORD_MAX);
	lz_pc_put_discriminant(&w, rec->kind);
	lz_pc_put_bytes(&w, payload, len);
	if (w.err < 0 || w.cap - w.len < LZ_SIGKEY_SIG_LEN)
		return -EMSGSIZE;

	_cleanup_free_ uint8_t *msg = NULL;
	size_t msg_len;
	uint8_t sig[LZ_SIGKEY_SIG_LEN];
	if ((e = signed_message_alloc(rec->kind, payload, len, &msg, &msg_len)) < 0 ||
	    (e = lz_sigkey_sign(key, msg, msg_len, sig)) < 0)
		return e;
	lz_pc_put_fixed(&w, sig, sizeof(sig));
	return lz_pc_writer_finish(&w, ret_len);
}

int lz_esc_frame(const uint8_t *env, size_t len, uint32_t *ret_kind, struct lz_esc_bytes *ret_payload)
{
	struct lz_pc_reader r;
	uint32_t kind;
	struct lz_esc_bytes payload;
	if (len > LZ_ESC_RECORD_MAX)
		return -E2BIG;
	lz_pc_reader_init(&r, env, len);
	if (lz_pc_get_discriminant(&r, &kind) < 0 || kind >= LZ_ESC_KIND_COUNT ||
	    get_span(&r, LZ_ESC_RECORD_MAX, &payload) < 0 || r.len - r.pos != LZ_SIGKEY_SIG_LEN)
		return -EBADMSG;
	*ret_kind = kind;
	*ret_payload = payload;
	return 0;
}

int lz_esc_open(const uint8_t *env, size_t len, uint32_t kinds, const uint8_t signer[LZ_SIGKEY_PUBLIC_LEN],
		struct lz_esc_record *ret, struct lz_esc_bytes *ret_payload)
{
	uint32_t kind;
	struct lz_esc_bytes payload;
	int e = lz_esc_frame(env, len, &kind, &payload);
	if (e < 0)
		return e;
	if (!(kinds & LZ_ESC_KIND_BIT(kind)))
		return -EPROTO;

	/* The signature is the envelope's last bytes. */
	_cleanup_free_ uint8_t *msg = NULL;
	size_t msg_len;
	if ((e = signed_message_alloc(kind, payload.p, payload.n, &msg, &msg_len)) < 0)
		return e;
	if (!lz_sig_verify(signer, msg, msg_len, env + len - LZ_SIGKEY_SIG_LEN))
		return -EPERM;

	/* Decoded aside, so a refused payload leaves *ret untouched. */
	struct lz_esc_record rec;
	if (lz_esc_decode(kind, payload.p, payload.n, &rec) < 0)
		return -EBADMSG;
	*ret = rec;
	if (ret_payload != NULL)
		*ret_payload = payload;
	return 0;
}
