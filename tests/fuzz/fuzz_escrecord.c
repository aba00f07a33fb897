/* libFuzzer target for core/escalation/record.c.
 *
 * 1. Frames the input (lz_esc_frame), then opens it as an envelope with a
 *    fixed public key (that of seed 01..20, which the seed corpus's
 *    envelopes are sealed with): with no kind asked for, the signature is
 *    never reached; with every kind, a refusal must be one of the
 *    documented codes, agree with the framing and leave the outputs
 *    untouched, and an accepted envelope must borrow its payload from the
 *    input and re-encode it exactly.
 * 2. Decodes the input as the payload of each kind directly, so the
 *    decoder is reachable without a signature: an accepted payload must
 *    borrow only bytes inside the input, hold values within the limits and
 *    re-encode to exactly the input bytes (canonical form), and one byte
 *    less room must be -EMSGSIZE.
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "escalation/record.h"
#include "util/postcard.h"

#define ALL_KINDS (LZ_ESC_KIND_BIT(LZ_ESC_KIND_COUNT) - 1)

static const uint8_t PUB[LZ_SIGKEY_PUBLIC_LEN] = {
	0x79, 0xb5, 0x56, 0x2e, 0x8f, 0xe6, 0x54, 0xf9, 0x40, 0x78, 0xb1, 0x12, 0xe8, 0xa9, 0x8b, 0xa7,
	0x90, 0x1f, 0x85, 0x3a, 0xe6, 0x95, 0xbe, 0xd7, 0xe0, 0xe3, 0x91, 0x0b, 0xad, 0x04, 0x96, 0x64,
};

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void check_inside(const uint8_t *data, size_t size, struct lz_esc_bytes b)
{
	if (b.n == 0)
		return;
	check(b.p >= data && b.p <= data + size && b.n <= (size_t)(data + size - b.p));
}

static void check_text(const uint8_t *data, size_t size, struct lz_esc_bytes b)
{
	check_inside(data, size, b);
	check(b.n <= LZ_ESC_TEXT_MAX && lz_pc_utf8_valid(b.p, b.n));
}

static void check_record(const uint8_t *data, size_t size, const struct lz_esc_record *rec)
{
	switch (rec->kind) {
	case LZ_ESC_REQUEST:
		check(rec->request.argc >= 1 && rec->request.argc <= LZ_ESC_ARGV_MAX);
		check(rec->request.capability.n <= LZ_ESC_CAPABILITY_MAX);
		check_inside(data, size, rec->request.capability);
		for (size_t i = 0; i < rec->request.argc; i++) {
			struct lz_esc_bytes a = rec->request.argv[i];
			check(a.n >= 1 && a.n <= LZ_ESC_ARG_MAX && !memchr(a.p, 0, a.n));
			check_inside(data, size, a);
		}
		check(rec->request.cwd.n <= LZ_ESC_ARG_MAX);
		check_inside(data, size, rec->request.cwd);
		check_text(data, size, rec->request.why);
		break;
	case LZ_ESC_DECISION:
		check(rec->decision.verdict <= LZ_ESC_DENIED);
		check_text(data, size, rec->decision.message);
		break;
	case LZ_ESC_CHUNK:
		check(rec->chunk.stream == LZ_ESC_STDOUT || rec->chunk.stream == LZ_ESC_STDERR);
		check(rec->chunk.data.n >= 1 && rec->chunk.data.n <= LZ_ESC_CHUNK_MAX);
		check_inside(data, size, rec->chunk.data);
		break;
	case LZ_ESC_TERMINAL_RESULT:
		check(rec->result.outcome <= LZ_ESC_FAILED);
		check_text(data, size, rec->result.message);
		break;
	case LZ_ESC_CREDENTIAL:
		check(rec->credential.role <= LZ_ESC_ROLE_SANDBOX);
		break;
	default:
		check(rec->kind < LZ_ESC_KIND_COUNT);
		break;
	}
}

/* rec re-encodes to exactly payload[0..len), and not into one byte less. */
static void check_reencode(const struct lz_esc_record *rec, const uint8_t *payload, size_t len)
{
	uint8_t *buf = malloc(len + 1);
	check(buf != NULL);
	size_t n = 0;
	check(lz_esc_encode(rec, buf, len, &n) == 0);
	check(n == len && memcmp(buf, payload, len) == 0);
	size_t unchanged = 12345;
	check(len == 0 || (lz_esc_encode(rec, buf, len - 1, &unchanged) == -EMSGSIZE && unchanged == 12345));
	free(buf);
}

static void fuzz_open(const uint8_t *data, size_t size)
{
	struct lz_esc_record rec, sentinel;
	struct lz_esc_bytes payload = { NULL, 0 }, framed = { NULL, 0 };
	uint32_t kind = UINT32_MAX;
	memset(&rec, 0x5a, sizeof(rec));
	memcpy(&sentinel, &rec, sizeof(rec));

	/* The framing alone: the signature is exactly the last 64 bytes. */
	int f = lz_esc_frame(data, size, &kind, &framed);
	if (f == 0) {
		check(kind < LZ_ESC_KIND_COUNT);
		check_inside(data, size, framed);
		check(size - (size_t)(framed.p - data) - framed.n == LZ_SIGKEY_SIG_LEN);
	} else {
		check((f == -EBADMSG || f == -E2BIG) && kind == UINT32_MAX && framed.p == NULL);
	}

	int r = lz_esc_open(data, size, 0, PUB, &rec, &payload);
	check(r == (f == 0 ? -EPROTO : f));

	r = lz_esc_open(data, size, ALL_KINDS, PUB, &rec, &payload);
	if (r < 0) {
		check(r == -EPERM || r == -EBADMSG || r == -E2BIG || r == -ENOMEM);
		check(f == 0 || r == f);
		check(memcmp(&rec, &sentinel, sizeof(rec)) == 0 && payload.p == NULL);
		return;
	}
	check(f == 0 && rec.kind == kind && payload.p == framed.p && payload.n == framed.n);
	check(r == 0 && size <= LZ_ESC_RECORD_MAX);
	check_inside(data, size, payload);
	check_record(data, size, &rec);
	check_reencode(&rec, payload.p, payload.n);
}

static void fuzz_decode(const uint8_t *data, size_t size)
{
	for (uint32_t kind = 0; kind < LZ_ESC_KIND_COUNT; kind++) {
		struct lz_esc_record rec;
		int r = lz_esc_decode(kind, data, size, &rec);
		if (r < 0) {
			check(r == -EBADMSG);
			continue;
		}
		check(r == 0 && rec.kind == kind);
		check_record(data, size, &rec);
		check_reencode(&rec, data, size);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_open(data, size);
	fuzz_decode(data, size);
	return 0;
}
