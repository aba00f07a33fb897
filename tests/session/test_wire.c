/* v1 Client CLI <-> Host Coordinator records (core/wire.h; spec 3.3, 3.4):
 * fixed byte vectors written by hand from the Postcard rules, round trips,
 * every refusal, and the SOCK_SEQPACKET helpers with SCM_RIGHTS. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "session/wire.h"
#include "tls_pair.h"

#define BYTES(s) ((struct lz_wire_bytes){ .ptr = (const uint8_t *)(s), .len = sizeof(s) - 1 })

/* ---- Fixed vectors ---------------------------------------------------- */

/* Hello { protocol 1, domain_id 00..1f, fingerprint a0..bf, client_pid 300 } */
static const uint8_t HELLO[] = {
	0x00,                                           /* discriminant Hello */
	0x01,                                           /* protocol 1 */
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, /* domain_id */
	0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, /* fingerprint */
	0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
	0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7,
	0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
	0xac, 0x02,                                     /* client_pid 300 */
};

/* RunCommand { argv ["sh", "-c", "echo hi"], env [("TERM", "xterm")],
 * cwd Some("/w"), terminal true, rows 24, cols 200 } */
static const uint8_t RUN_TTY[] = {
	0x01,                                           /* discriminant RunCommand */
	0x03,                                           /* argv: 3 elements */
	0x02, 's', 'h',
	0x02, '-', 'c',
	0x07, 'e', 'c', 'h', 'o', ' ', 'h', 'i',
	0x01,                                           /* env: 1 pair */
	0x04, 'T', 'E', 'R', 'M',
	0x05, 'x', 't', 'e', 'r', 'm',
	0x01, 0x02, '/', 'w',                           /* cwd Some("/w") */
	0x01,                                           /* terminal true */
	0x18,                                           /* rows 24 */
	0xc8, 0x01,                                     /* cols 200 */
};

/* RunCommand { argv ["true", ""], env [], cwd None, terminal false, 0, 0 } */
static const uint8_t RUN_PIPES[] = {
	0x01, 0x02, 0x04, 't', 'r', 'u', 'e', 0x00, /* argv */
	0x00,                                        /* env: none */
	0x00,                                        /* cwd None */
	0x00, 0x00, 0x00,                            /* terminal false, rows 0, cols 0 */
};

static const uint8_t INPUT[] = { 0x02, 0x02, 'a', 'b' };
static const uint8_t RESIZE[] = { 0x03, 0x18, 0x50 };   /* 24 x 80 */
static const uint8_t SIGNAL[] = { 0x04, 0x02 };         /* Suspend */
static const uint8_t CLOSE_INPUT[] = { 0x05 };
static const uint8_t DETACH[] = { 0x06 };

/* Welcome { protocol 1, generation 2^32, session_id 10..1f } */
static const uint8_t WELCOME[] = {
	0x07, 0x01, 0x80, 0x80, 0x80, 0x80, 0x10,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
};

/* Refused { code 13 (EACCES), message "nope ✓" } */
static const uint8_t REFUSED[] = { 0x08, 0x0d, 0x08, 'n', 'o', 'p', 'e', ' ', 0xe2, 0x9c, 0x93 };
static const uint8_t OUTPUT[] = { 0x09, 0x03, 'o', 'k', '\n' };
static const uint8_t EXITED[] = { 0x0a, 0x00, 0x03 };   /* Exited(3) */
static const uint8_t SIGNALED[] = { 0x0a, 0x01, 0x09 }; /* Signaled(9) */

static const struct lz_wire_bytes run_tty_argv[] = { BYTES("sh"), BYTES("-c"), BYTES("echo hi") };
static const struct lz_wire_env run_tty_env[] = { { BYTES("TERM"), BYTES("xterm") } };
static const struct lz_wire_bytes run_pipes_argv[] = { BYTES("true"), { NULL, 0 } };

static struct lz_wire_msg hello_msg(void)
{
	struct lz_wire_msg m = { .type = LZ_WIRE_HELLO };
	m.hello.protocol = LZ_WIRE_PROTOCOL;
	for (int i = 0; i < 32; i++) {
		m.hello.domain_id[i] = (uint8_t)i;
		m.hello.fingerprint[i] = (uint8_t)(0xa0 + i);
	}
	m.hello.client_pid = 300;
	return m;
}

static struct lz_wire_msg run_tty_msg(void)
{
	return (struct lz_wire_msg){
		.type = LZ_WIRE_RUN_COMMAND,
		.run = { .argv = run_tty_argv, .argc = 3, .env = run_tty_env, .n_env = 1,
			 .has_cwd = true, .cwd = BYTES("/w"), .terminal = true, .rows = 24, .cols = 200 },
	};
}

static struct lz_wire_msg welcome_msg(void)
{
	struct lz_wire_msg m = { .type = LZ_WIRE_WELCOME };
	m.welcome.protocol = 1;
	m.welcome.generation = 1ull << 32;
	for (int i = 0; i < 16; i++)
		m.welcome.session_id[i] = (uint8_t)(0x10 + i);
	return m;
}

struct vector {
	const char *name;
	const uint8_t *bytes;
	size_t len;
	struct lz_wire_msg msg;
};

#define VEC(arr, m) { #arr, arr, sizeof(arr), m }

static struct vector *vectors(size_t *ret_n)
{
	static struct vector v[14];
	struct vector all[] = {
		VEC(HELLO, hello_msg()),
		VEC(RUN_TTY, run_tty_msg()),
		VEC(RUN_PIPES, ((struct lz_wire_msg){ .type = LZ_WIRE_RUN_COMMAND,
						      .run = { .argv = run_pipes_argv, .argc = 2 } })),
		VEC(INPUT, ((struct lz_wire_msg){ .type = LZ_WIRE_INPUT, .input = BYTES("ab") })),
		VEC(RESIZE, ((struct lz_wire_msg){ .type = LZ_WIRE_RESIZE, .resize = { 24, 80 } })),
		VEC(SIGNAL, ((struct lz_wire_msg){ .type = LZ_WIRE_SIGNAL, .sig = LZ_WIRE_SIG_SUSPEND })),
		VEC(CLOSE_INPUT, ((struct lz_wire_msg){ .type = LZ_WIRE_CLOSE_INPUT })),
		VEC(DETACH, ((struct lz_wire_msg){ .type = LZ_WIRE_DETACH })),
		VEC(WELCOME, welcome_msg()),
		VEC(REFUSED, ((struct lz_wire_msg){ .type = LZ_WIRE_REFUSED,
						    .refused = { 13, "nope \xe2\x9c\x93", 8 } })),
		VEC(OUTPUT, ((struct lz_wire_msg){ .type = LZ_WIRE_OUTPUT, .output = BYTES("ok\n") })),
		VEC(EXITED, ((struct lz_wire_msg){ .type = LZ_WIRE_SESSION_EXIT,
						   .exit = { LZ_WIRE_EXITED, 3 } })),
		VEC(SIGNALED, ((struct lz_wire_msg){ .type = LZ_WIRE_SESSION_EXIT,
						     .exit = { LZ_WIRE_SIGNALED, 9 } })),
	};
	_Static_assert(sizeof(all) / sizeof(all[0]) <= sizeof(v) / sizeof(v[0]), "vector table");
	memcpy(v, all, sizeof(all));
	*ret_n = sizeof(all) / sizeof(all[0]);
	return v;
}

static bool span_eq(struct lz_wire_bytes a, struct lz_wire_bytes b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static void assert_msg_equal(const struct lz_wire_msg *a, const struct lz_wire_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case LZ_WIRE_HELLO:
		assert_int_equal(a->hello.protocol, b->hello.protocol);
		assert_memory_equal(a->hello.domain_id, b->hello.domain_id, 32);
		assert_memory_equal(a->hello.fingerprint, b->hello.fingerprint, 32);
		assert_int_equal(a->hello.client_pid, b->hello.client_pid);
		break;
	case LZ_WIRE_RUN_COMMAND:
		assert_int_equal(a->run.argc, b->run.argc);
		for (size_t i = 0; i < a->run.argc; i++)
			assert_true(span_eq(a->run.argv[i], b->run.argv[i]));
		assert_int_equal(a->run.n_env, b->run.n_env);
		for (size_t i = 0; i < a->run.n_env; i++) {
			assert_true(span_eq(a->run.env[i].name, b->run.env[i].name));
			assert_true(span_eq(a->run.env[i].value, b->run.env[i].value));
		}
		assert_int_equal(a->run.has_cwd, b->run.has_cwd);
		if (a->run.has_cwd)
			assert_true(span_eq(a->run.cwd, b->run.cwd));
		assert_int_equal(a->run.terminal, b->run.terminal);
		assert_int_equal(a->run.rows, b->run.rows);
		assert_int_equal(a->run.cols, b->run.cols);
		break;
	case LZ_WIRE_INPUT:
		assert_true(span_eq(a->input, b->input));
		break;
	case LZ_WIRE_RESIZE:
		assert_int_equal(a->resize.rows, b->resize.rows);
		assert_int_equal(a->resize.cols, b->resize.cols);
		break;
	case LZ_WIRE_SIGNAL:
		assert_int_equal(a->sig, b->sig);
		break;
	case LZ_WIRE_CLOSE_INPUT:
	case LZ_WIRE_DETACH:
		break;
	case LZ_WIRE_WELCOME:
		assert_int_equal(a->welcome.protocol, b->welcome.protocol);
		assert_true(a->welcome.generation == b->welcome.generation);
		assert_memory_equal(a->welcome.session_id, b->welcome.session_id, 16);
		break;
	case LZ_WIRE_REFUSED:
		assert_int_equal(a->refused.code, b->refused.code);
		assert_int_equal(a->refused.message_len, b->refused.message_len);
		assert_memory_equal(a->refused.message, b->refused.message, a->refused.message_len);
		break;
	case LZ_WIRE_OUTPUT:
		assert_true(span_eq(a->output, b->output));
		break;
	case LZ_WIRE_SESSION_EXIT:
		assert_int_equal(a->exit.kind, b->exit.kind);
		assert_int_equal(a->exit.value, b->exit.value);
		break;
	default:
		fail();
	}
}

/* decode refuses buf with -EBADMSG and leaves *ret untouched. */
static void assert_refused(const uint8_t *buf, size_t len)
{
	struct lz_wire_msg m, before;
	memset(&m, 0x5a, sizeof(m));
	memcpy(&before, &m, sizeof(m));
	assert_int_equal(lz_wire_decode(buf, len, &m), -EBADMSG);
	assert_memory_equal(&m, &before, sizeof(m));
}

#define REFUSED_VEC(...)                                                           \
	assert_refused((const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }))

/* encode refuses m with err and leaves *ret_len untouched. */
static void assert_encode_refused(const struct lz_wire_msg *m, int err)
{
	uint8_t buf[256];
	size_t len = 4321;
	assert_int_equal(lz_wire_encode(m, buf, sizeof(buf), &len), err);
	assert_int_equal(len, 4321);
}

/* A growable byte builder for the over-limit records. */
struct builder {
	uint8_t *buf;
	size_t len;
};

static void put(struct builder *b, const void *p, size_t n)
{
	b->buf = realloc(b->buf, b->len + n + 1);
	assert_non_null(b->buf);
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

/* ---- Codec ------------------------------------------------------------ */

static void test_lz_wire_encode__fixed_vectors(void **state)
{
	(void)state;
	size_t n;
	struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		uint8_t buf[LZ_WIRE_MAX];
		size_t len = 0;
		print_message("%s\n", v[i].name);
		assert_int_equal(lz_wire_encode(&v[i].msg, buf, sizeof(buf), &len), 0);
		assert_int_equal(len, v[i].len);
		assert_memory_equal(buf, v[i].bytes, len);
		/* Exactly enough room is enough. */
		assert_int_equal(lz_wire_encode(&v[i].msg, buf, v[i].len, &len), 0);
		assert_int_equal(len, v[i].len);
	}
}

static void test_lz_wire_decode__fixed_vectors(void **state)
{
	(void)state;
	size_t n;
	struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		struct lz_wire_msg m;
		print_message("%s\n", v[i].name);
		assert_int_equal(lz_wire_decode(v[i].bytes, v[i].len, &m), 0);
		assert_msg_equal(&m, &v[i].msg);
		/* Round trip: the decoded message encodes to the same bytes. */
		uint8_t buf[LZ_WIRE_MAX];
		size_t len = 0;
		assert_int_equal(lz_wire_encode(&m, buf, sizeof(buf), &len), 0);
		assert_int_equal(len, v[i].len);
		assert_memory_equal(buf, v[i].bytes, len);
		lz_wire_msg_release(&m);
		lz_wire_msg_release(&m);
		assert_null(m.owned);
	}
}

static void test_lz_wire_decode__borrows_the_buffer(void **state)
{
	(void)state;
	struct lz_wire_msg m;
	assert_int_equal(lz_wire_decode(RUN_TTY, sizeof(RUN_TTY), &m), 0);
	assert_non_null(m.owned);
	assert_ptr_equal(m.run.argv[0].ptr, RUN_TTY + 3);
	assert_ptr_equal(m.run.argv[2].ptr, RUN_TTY + 9);
	assert_ptr_equal(m.run.env[0].name.ptr, RUN_TTY + 18);
	assert_ptr_equal(m.run.env[0].value.ptr, RUN_TTY + 23);
	assert_ptr_equal(m.run.cwd.ptr, RUN_TTY + 30);
	lz_wire_msg_release(&m);
	assert_null(m.owned);
	assert_null(m.run.argv);
	assert_int_equal(m.run.argc, 0);
	lz_wire_msg_release(NULL);

	assert_int_equal(lz_wire_decode(REFUSED, sizeof(REFUSED), &m), 0);
	assert_null(m.owned);
	assert_ptr_equal(m.refused.message, REFUSED + 3);
	assert_int_equal(lz_wire_decode(OUTPUT, sizeof(OUTPUT), &m), 0);
	assert_ptr_equal(m.output.ptr, OUTPUT + 2);
}

static void test_lz_wire_decode__truncated_at_every_offset(void **state)
{
	(void)state;
	size_t n;
	struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		/* A copy of exactly k bytes, so ASan sees any read past the end. */
		for (size_t k = 0; k < v[i].len; k++) {
			uint8_t *cut = malloc(k ? k : 1);
			assert_non_null(cut);
			memcpy(cut, v[i].bytes, k);
			assert_refused(cut, k);
			free(cut);
		}
	}
	assert_refused(NULL, 0);
}

static void test_lz_wire_decode__trailing_byte(void **state)
{
	(void)state;
	size_t n;
	struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		uint8_t buf[128];
		memcpy(buf, v[i].bytes, v[i].len);
		buf[v[i].len] = 0x00;
		assert_refused(buf, v[i].len + 1);
	}
}

static void test_lz_wire_decode__unknown_discriminants(void **state)
{
	(void)state;
	REFUSED_VEC(0x0b);                   /* message type 11 */
	REFUSED_VEC(0x7f);
	REFUSED_VEC(0x80, 0x01);             /* 128 */
	REFUSED_VEC(0xff, 0xff, 0xff, 0xff, 0x0f);
	REFUSED_VEC(0x85, 0x00);             /* overlong CloseInput */
	REFUSED_VEC(0x80, 0x80, 0x80, 0x80, 0x80, 0x00); /* overlong Hello prefix */
	REFUSED_VEC(0x04, 0x05);             /* Signal kind 5 */
	REFUSED_VEC(0x04, 0x80, 0x00);       /* Signal kind overlong 0 */
	REFUSED_VEC(0x0a, 0x02, 0x00);       /* SessionExit status 2 */
	REFUSED_VEC(0x0a, 0x80, 0x01, 0x00); /* SessionExit status 128 */
}

static void test_lz_wire_decode__non_canonical_values(void **state)
{
	(void)state;
	REFUSED_VEC(0x03, 0x98, 0x00, 0x50);       /* rows 24 in two bytes */
	REFUSED_VEC(0x03, 0x80, 0x80, 0x04, 0x50); /* rows 65536 */
	REFUSED_VEC(0x02, 0x82, 0x00, 'a', 'b');   /* Input length overlong */
	REFUSED_VEC(0x08, 0x8d, 0x00, 0x00);       /* Refused code overlong */
	/* Bool 2 for terminal, Option tag 2 for cwd. */
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x00, 0x02, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x02, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x00, 0xff, 0x01, 0x01);
}

static void test_lz_wire_decode__zero_rows_or_cols(void **state)
{
	(void)state;
	REFUSED_VEC(0x03, 0x00, 0x50);
	REFUSED_VEC(0x03, 0x18, 0x00);
	REFUSED_VEC(0x03, 0x00, 0x00);
	/* RunCommand with terminal: both non-zero; without: both zero. */
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x00, 0x01, 0x00, 0x50);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x00, 0x01, 0x18, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x00, 0x00, 0x18, 0x50);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x00, 0x00, 0x00, 0x01);
	struct lz_wire_msg m;
	const uint8_t ok[] = { 0x01, 0x01, 0x01, 'x', 0x00, 0x00, 0x01, 0x01, 0x01 };
	assert_int_equal(lz_wire_decode(ok, sizeof(ok), &m), 0);
	lz_wire_msg_release(&m);
}

static void test_lz_wire_decode__out_of_range_values(void **state)
{
	(void)state;
	REFUSED_VEC(0x08, 0x00, 0x00);             /* Refused code 0 */
	REFUSED_VEC(0x08, 0x80, 0x20, 0x00);       /* Refused code 4096 */
	REFUSED_VEC(0x08, 0x0d, 0x02, 0xc3, 0x28); /* invalid UTF-8 */
	REFUSED_VEC(0x08, 0x0d, 0x02, 0xed, 0xa0); /* truncated surrogate */
	REFUSED_VEC(0x08, 0x0d, 0x03, 'a', 0x00, 'b'); /* NUL in message */
	REFUSED_VEC(0x0a, 0x01, 0x00);             /* Signaled(0) */
	REFUSED_VEC(0x0a, 0x01, 0x41);             /* Signaled(65) */
	REFUSED_VEC(0x02, 0x00);                   /* empty Input */
	REFUSED_VEC(0x09, 0x00);                   /* empty Output */
	/* Hello with client_pid 0. */
	uint8_t hello[sizeof(HELLO)];
	memcpy(hello, HELLO, sizeof(HELLO));
	hello[sizeof(HELLO) - 2] = 0x00;
	assert_refused(hello, sizeof(HELLO) - 1);
	/* RunCommand: no argv, NUL in argv, env name empty, with '=' or NUL,
	 * NUL in the value, empty cwd, NUL in cwd. */
	REFUSED_VEC(0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x02, 'a', 0x00, 0x00, 0x00, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x01, 0x00, 0x01, 'v', 0x00, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x01, 0x02, 'A', '=', 0x01, 'v', 0x00, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x01, 0x02, 'A', 0x00, 0x01, 'v', 0x00, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x01, 0x01, 'A', 0x02, 'v', 0x00, 0x00, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x01, 0x00, 0x00, 0x00, 0x00);
	REFUSED_VEC(0x01, 0x01, 0x01, 'x', 0x00, 0x01, 0x02, '/', 0x00, 0x00, 0x00, 0x00);
	/* Hello and Welcome decode any protocol number (the receiver answers
	 * EPROTONOSUPPORT). */
	memcpy(hello, HELLO, sizeof(HELLO));
	hello[1] = 0x02;
	struct lz_wire_msg m;
	assert_int_equal(lz_wire_decode(hello, sizeof(hello), &m), 0);
	assert_int_equal(m.hello.protocol, 2);
}

static void test_lz_wire_decode__over_limit_lengths(void **state)
{
	(void)state;
	struct lz_wire_msg m;
	struct builder b = { 0 };
	uint8_t *data = calloc(1, LZ_WIRE_MAX + 1);
	assert_non_null(data);
	memset(data, 'x', LZ_WIRE_MAX + 1);

	/* Input and Output: LZ_WIRE_MAX_DATA is accepted, one more refused. */
	for (uint8_t type = LZ_WIRE_INPUT; type <= LZ_WIRE_OUTPUT; type += LZ_WIRE_OUTPUT - LZ_WIRE_INPUT) {
		for (size_t n = LZ_WIRE_MAX_DATA; n <= LZ_WIRE_MAX_DATA + 1; n++) {
			b.len = 0;
			put_byte(&b, type);
			put_varint(&b, n);
			put(&b, data, n);
			if (n == LZ_WIRE_MAX_DATA) {
				assert_int_equal(lz_wire_decode(b.buf, b.len, &m), 0);
				assert_int_equal(m.input.len, n);
			} else {
				assert_refused(b.buf, b.len);
			}
		}
	}

	/* Refused message: LZ_WIRE_MAX_MESSAGE accepted, one more refused. */
	for (size_t n = LZ_WIRE_MAX_MESSAGE; n <= LZ_WIRE_MAX_MESSAGE + 1; n++) {
		b.len = 0;
		put_byte(&b, LZ_WIRE_REFUSED);
		put_byte(&b, 0x01);
		put_varint(&b, n);
		put(&b, data, n);
		if (n == LZ_WIRE_MAX_MESSAGE)
			assert_int_equal(lz_wire_decode(b.buf, b.len, &m), 0);
		else
			assert_refused(b.buf, b.len);
	}

	/* argv: LZ_WIRE_MAX_ARGV empty elements accepted, one more refused. */
	for (size_t n = LZ_WIRE_MAX_ARGV; n <= LZ_WIRE_MAX_ARGV + 1; n++) {
		b.len = 0;
		put_byte(&b, LZ_WIRE_RUN_COMMAND);
		put_varint(&b, n);
		for (size_t i = 0; i < n; i++)
			put_byte(&b, 0x00);
		put(&b, "\x00\x00\x00\x00\x00", 5);
		if (n == LZ_WIRE_MAX_ARGV) {
			assert_int_equal(lz_wire_decode(b.buf, b.len, &m), 0);
			assert_int_equal(m.run.argc, n);
			uint8_t *again = malloc(LZ_WIRE_MAX);
			size_t len;
			assert_int_equal(lz_wire_encode(&m, again, LZ_WIRE_MAX, &len), 0);
			assert_int_equal(len, b.len);
			assert_memory_equal(again, b.buf, len);
			free(again);
			lz_wire_msg_release(&m);
		} else {
			assert_refused(b.buf, b.len);
		}
	}

	/* env: LZ_WIRE_MAX_ENV pairs accepted, one more refused. */
	for (size_t n = LZ_WIRE_MAX_ENV; n <= LZ_WIRE_MAX_ENV + 1; n++) {
		b.len = 0;
		put(&b, "\x01\x01\x01x", 4);
		put_varint(&b, n);
		for (size_t i = 0; i < n; i++)
			put(&b, "\x01" "A\x00", 3);
		put(&b, "\x00\x00\x00\x00", 4);
		if (n == LZ_WIRE_MAX_ENV) {
			assert_int_equal(lz_wire_decode(b.buf, b.len, &m), 0);
			assert_int_equal(m.run.n_env, n);
			lz_wire_msg_release(&m);
		} else {
			assert_refused(b.buf, b.len);
		}
	}

	/* cwd: LZ_WIRE_MAX_CWD bytes accepted, one more refused. */
	for (size_t n = LZ_WIRE_MAX_CWD; n <= LZ_WIRE_MAX_CWD + 1; n++) {
		b.len = 0;
		put(&b, "\x01\x01\x01x\x00\x01", 6);
		put_varint(&b, n);
		put(&b, data, n);
		put(&b, "\x00\x00\x00", 3);
		if (n == LZ_WIRE_MAX_CWD) {
			assert_int_equal(lz_wire_decode(b.buf, b.len, &m), 0);
			lz_wire_msg_release(&m);
		} else {
			assert_refused(b.buf, b.len);
		}
	}

	/* A record over LZ_WIRE_MAX is refused before it is read; one argv
	 * element may fill a record up to exactly LZ_WIRE_MAX. */
	size_t elem = LZ_WIRE_MAX - 1 - 1 - 3 - 5;
	b.len = 0;
	put(&b, "\x01\x01", 2);
	put_varint(&b, elem);
	put(&b, data, elem);
	put(&b, "\x00\x00\x00\x00\x00", 5);
	assert_int_equal(b.len, LZ_WIRE_MAX);
	assert_int_equal(lz_wire_decode(b.buf, b.len, &m), 0);
	lz_wire_msg_release(&m);
	put_byte(&b, 0x00);
	assert_refused(b.buf, b.len);
	/* Length prefixes past LZ_PC_MAX_LEN or the record's end. */
	REFUSED_VEC(0x01, 0x01, 0x81, 0x80, 0x04, 'x');
	REFUSED_VEC(0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'x');
	REFUSED_VEC(0x01, 0xff, 0xff, 0x03, 0x00);

	free(b.buf);
	free(data);
}

static void test_lz_wire_encode__refuses_invalid_values(void **state)
{
	(void)state;
	struct lz_wire_msg m = hello_msg();
	m.hello.client_pid = 0;
	assert_encode_refused(&m, -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = (enum lz_wire_type)11 }, -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_RESIZE, .resize = { 0, 80 } }, -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_RESIZE, .resize = { 24, 0 } }, -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_SIGNAL, .sig = (enum lz_wire_signal)5 },
			      -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_INPUT }, -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_OUTPUT, .output = { NULL, 3 } }, -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_REFUSED, .refused = { 0, "x", 1 } },
			      -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_REFUSED, .refused = { 4096, "x", 1 } },
			      -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_REFUSED, .refused = { 1, "\xc3", 1 } },
			      -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_REFUSED, .refused = { 1, "a\0b", 3 } },
			      -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_SESSION_EXIT, .exit = { LZ_WIRE_SIGNALED, 0 } },
			      -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_SESSION_EXIT, .exit = { LZ_WIRE_SIGNALED, 65 } },
			      -EINVAL);
	assert_encode_refused(&(struct lz_wire_msg){ .type = LZ_WIRE_SESSION_EXIT,
						     .exit = { (enum lz_wire_exit_kind)2, 1 } },
			      -EINVAL);

	/* RunCommand rules. */
	const struct lz_wire_bytes nul_arg[] = { { (const uint8_t *)"a\0b", 3 } };
	const struct lz_wire_env bad_env[][1] = {
		{ { { NULL, 0 }, BYTES("v") } },
		{ { BYTES("A=B"), BYTES("v") } },
		{ { { (const uint8_t *)"A\0", 2 }, BYTES("v") } },
		{ { BYTES("A"), { (const uint8_t *)"v\0", 2 } } },
	};
	m = run_tty_msg();
	m.run.argc = 0;
	assert_encode_refused(&m, -EINVAL);
	m = run_tty_msg();
	m.run.argv = NULL;
	assert_encode_refused(&m, -EINVAL);
	m = run_tty_msg();
	m.run.argv = nul_arg;
	m.run.argc = 1;
	assert_encode_refused(&m, -EINVAL);
	m = run_tty_msg();
	m.run.argc = LZ_WIRE_MAX_ARGV + 1;
	assert_encode_refused(&m, -EINVAL);
	for (size_t i = 0; i < sizeof(bad_env) / sizeof(bad_env[0]); i++) {
		m = run_tty_msg();
		m.run.env = bad_env[i];
		assert_encode_refused(&m, -EINVAL);
	}
	m = run_tty_msg();
	m.run.env = NULL;
	assert_encode_refused(&m, -EINVAL);
	m = run_tty_msg();
	m.run.n_env = LZ_WIRE_MAX_ENV + 1;
	assert_encode_refused(&m, -EINVAL);
	m = run_tty_msg();
	m.run.cwd = (struct lz_wire_bytes){ NULL, 0 };
	assert_encode_refused(&m, -EINVAL);
	m.run.cwd = (struct lz_wire_bytes){ (const uint8_t *)"/\0", 2 };
	assert_encode_refused(&m, -EINVAL);
	m.run.has_cwd = false; /* cwd ignored when absent */
	uint8_t buf[64];
	size_t len;
	assert_int_equal(lz_wire_encode(&m, buf, sizeof(buf), &len), 0);
	m = run_tty_msg();
	m.run.rows = 0;
	assert_encode_refused(&m, -EINVAL);
	m = run_tty_msg();
	m.run.terminal = false;
	assert_encode_refused(&m, -EINVAL);
	m.run.rows = m.run.cols = 0;
	assert_int_equal(lz_wire_encode(&m, buf, sizeof(buf), &len), 0);
}

static void test_lz_wire_encode__too_small_at_every_capacity(void **state)
{
	(void)state;
	size_t n;
	struct vector *v = vectors(&n);
	for (size_t i = 0; i < n; i++) {
		for (size_t cap = 0; cap < v[i].len; cap++) {
			uint8_t buf[128];
			memset(buf, 0xEE, sizeof(buf));
			size_t len = 4321;
			assert_int_equal(lz_wire_encode(&v[i].msg, buf, cap, &len), -EMSGSIZE);
			assert_int_equal(len, 4321);
			for (size_t j = cap; j < sizeof(buf); j++)
				assert_int_equal(buf[j], 0xEE);
		}
	}
}

static void test_lz_wire_encode__record_over_max(void **state)
{
	(void)state;
	uint8_t *data = calloc(1, 2 * LZ_WIRE_MAX);
	uint8_t *buf = malloc(2 * LZ_WIRE_MAX);
	assert_non_null(data);
	assert_non_null(buf);
	memset(data, 'x', 2 * LZ_WIRE_MAX);
	size_t len = 4321;
	/* One element past LZ_PC_MAX_LEN. */
	struct lz_wire_bytes one[] = { { data, LZ_WIRE_MAX + 1 } };
	struct lz_wire_msg m = { .type = LZ_WIRE_RUN_COMMAND, .run = { .argv = one, .argc = 1 } };
	assert_int_equal(lz_wire_encode(&m, buf, 2 * LZ_WIRE_MAX, &len), -EMSGSIZE);
	/* Elements each fine, together past LZ_WIRE_MAX even with a larger cap. */
	struct lz_wire_bytes two[] = { { data, 40000 }, { data, 40000 } };
	m.run.argv = two;
	m.run.argc = 2;
	assert_int_equal(lz_wire_encode(&m, buf, 2 * LZ_WIRE_MAX, &len), -EMSGSIZE);
	assert_int_equal(len, 4321);
	/* Exactly LZ_WIRE_MAX fits. */
	one[0].len = LZ_WIRE_MAX - 1 - 1 - 3 - 5;
	m.run.argv = one;
	m.run.argc = 1;
	assert_int_equal(lz_wire_encode(&m, buf, 2 * LZ_WIRE_MAX, &len), 0);
	assert_int_equal(len, LZ_WIRE_MAX);
	free(data);
	free(buf);
}

static void test_lz_wire_from_client__directions(void **state)
{
	(void)state;
	for (int t = LZ_WIRE_HELLO; t <= LZ_WIRE_DETACH; t++)
		assert_true(lz_wire_from_client((enum lz_wire_type)t));
	for (int t = LZ_WIRE_WELCOME; t <= LZ_WIRE_SESSION_EXIT + 1; t++)
		assert_false(lz_wire_from_client((enum lz_wire_type)t));
	struct lz_wire_msg m = run_tty_msg();
	assert_int_equal(lz_wire_expected_fds(&m), 0);
	m.run.terminal = false;
	assert_int_equal(lz_wire_expected_fds(&m), LZ_WIRE_STDIO_FDS);
	m = hello_msg();
	assert_int_equal(lz_wire_expected_fds(&m), 0);
}

/* ---- Inside the control connection's TLS ------------------------------ */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

struct pair {
	struct gen g;
	int sv[2];
	struct lz_tlschan *srv, *cli;
};

static void pair_open(struct pair *p, int flags)
{
	gen_make(&p->g);
	(void)tls_pair_connect(&p->g, flags, p->sv, &p->srv, &p->cli);
}

static void pair_close(struct pair *p)
{
	lz_tlschan_free(p->srv);
	lz_tlschan_free(p->cli);
	if (p->sv[0] >= 0)
		close(p->sv[0]);
	close(p->sv[1]);
	gen_free(&p->g);
}

static void test_lz_wire_send__records_and_fds_inside_tls(void **state)
{
	(void)state;
	struct pair t;
	int p[2];
	pair_open(&t, 0);
	assert_int_equal(pipe(p), 0); /* deliberately without O_CLOEXEC */
	int before = count_fds();

	struct lz_wire_msg m = hello_msg();
	assert_int_equal(lz_wire_send(t.cli, &m, p, 2, 1000, NULL), 0);
	uint8_t *buf = malloc(LZ_WIRE_MAX);
	assert_non_null(buf);
	struct lz_wire_msg got;
	int fds[LZ_WIRE_MAX_FDS] = { -1, -1, -1, -1, -1, -1, -1, -1 };
	size_t n_fds = 99;
	assert_int_equal(lz_wire_recv(t.srv, buf, LZ_WIRE_MAX, &got, fds, 4, &n_fds, NULL), 0);
	assert_msg_equal(&got, &m);
	assert_int_equal(n_fds, 2);
	assert_int_equal(fds[2], -1);
	assert_int_equal(count_fds(), before + 2);
	for (int i = 0; i < 2; i++)
		assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(fds[1], "z", 1), 1);
	char c = 0;
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(c, 'z');
	close(fds[0]);
	close(fds[1]);

	/* A RunCommand with its three stdio fds, and records without fds. */
	const int stdio[3] = { p[0], p[1], p[1] };
	m = run_tty_msg();
	m.run.terminal = false;
	m.run.rows = m.run.cols = 0;
	assert_int_equal(lz_wire_send(t.cli, &m, stdio, lz_wire_expected_fds(&m), 1000, NULL), 0);
	assert_int_equal(lz_wire_recv(t.srv, buf, LZ_WIRE_MAX, &got, fds, LZ_WIRE_MAX_FDS, &n_fds, NULL), 0);
	assert_msg_equal(&got, &m);
	assert_int_equal(n_fds, lz_wire_expected_fds(&got));
	lz_wire_msg_release(&got);
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);

	m = (struct lz_wire_msg){ .type = LZ_WIRE_OUTPUT, .output = BYTES("out") };
	assert_int_equal(lz_wire_send(t.srv, &m, NULL, 0, 1000, NULL), 0);
	assert_int_equal(lz_wire_recv(t.cli, buf, LZ_WIRE_MAX, &got, NULL, 0, &n_fds, NULL), 0);
	assert_msg_equal(&got, &m);
	assert_int_equal(n_fds, 0);
	assert_ptr_equal(got.output.ptr, buf + 2); /* borrowed from the caller's buffer */
	assert_int_equal(count_fds(), before);

	/* Argument checks, before anything is sent. */
	struct lz_wire_msg d = { .type = LZ_WIRE_DETACH }, bad = { .type = LZ_WIRE_RESIZE };
	int many[LZ_WIRE_MAX_FDS + 1] = { 0 };
	const int negative[2] = { p[0], -1 };
	assert_int_equal(lz_wire_recv(t.srv, buf, LZ_WIRE_MAX, &got, fds, LZ_WIRE_MAX_FDS + 1, &n_fds, NULL), -EINVAL);
	assert_int_equal(lz_wire_send(t.cli, &d, many, LZ_WIRE_MAX_FDS + 1, 1000, NULL), -EINVAL);
	assert_int_equal(lz_wire_send(t.cli, &d, negative, 2, 1000, NULL), -EBADF);
	assert_int_equal(lz_wire_send(t.cli, &bad, NULL, 0, 1000, NULL), -EINVAL);
	free(buf);
	close(p[0]);
	close(p[1]);
	pair_close(&t);
}

static void test_lz_wire_recv__peer_end_is_epipe(void **state)
{
	(void)state;
	struct pair t;
	pair_open(&t, 0);
	lz_tlschan_free(t.srv);
	t.srv = NULL;
	close(t.sv[0]);
	t.sv[0] = -1;
	uint8_t *buf = malloc(LZ_WIRE_MAX);
	struct lz_wire_msg m;
	size_t n = 7;
	assert_int_equal(lz_wire_recv(t.cli, buf, LZ_WIRE_MAX, &m, NULL, 0, &n, NULL), -EPIPE);
	assert_int_equal(n, 7);
	/* Sending to a closed peer is -EPIPE, without SIGPIPE. */
	struct lz_wire_msg d = { .type = LZ_WIRE_DETACH };
	assert_int_equal(lz_wire_send(t.cli, &d, NULL, 0, 1000, NULL), -EPIPE);
	free(buf);
	pair_close(&t);
}

static void test_lz_wire_recv__surplus_or_malformed_closes_fds(void **state)
{
	(void)state;
	struct pair t;
	int p[2];
	pair_open(&t, 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int before = count_fds();
	uint8_t *buf = malloc(LZ_WIRE_MAX);
	struct lz_wire_msg got, sentinel;
	memset(&got, 0x5a, sizeof(got));
	memcpy(&sentinel, &got, sizeof(got));
	int fds[4] = { -1, -1, -1, -1 };
	size_t n = 7;
	/* Records the encoder never makes, with fds beside them. */
	static const struct {
		const char *bytes;
		size_t len;
	} bad[] = { { "\x0b", 1 }, { "\x03\x00\x50", 3 }, { "\x05\x00", 2 } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(lz_tlschan_send(t.cli, bad[i].bytes, bad[i].len, p, 2, 1000, NULL), 0);
		assert_int_equal(lz_wire_recv(t.srv, buf, LZ_WIRE_MAX, &got, fds, 4, &n, NULL), -EBADMSG);
		assert_int_equal(count_fds(), before);
	}
	/* Three fds where the caller takes two: the datagram is refused
	 * whole, and with it the TLS record: the channel is done. */
	struct lz_wire_msg d = { .type = LZ_WIRE_DETACH };
	const int three[3] = { p[0], p[1], p[0] };
	assert_int_equal(lz_wire_send(t.cli, &d, three, 3, 1000, NULL), 0);
	assert_int_equal(lz_wire_recv(t.srv, buf, LZ_WIRE_MAX, &got, fds, 2, &n, NULL), -EBADMSG);
	assert_int_equal(count_fds(), before);
	assert_memory_equal(&got, &sentinel, sizeof(got));
	assert_int_equal(n, 7);
	assert_int_equal(fds[0], -1);
	free(buf);
	close(p[0]);
	close(p[1]);
	pair_close(&t);
}

static void test_lz_wire_recv__nonblocking_empty_is_eagain(void **state)
{
	(void)state;
	struct pair t;
	pair_open(&t, SOCK_NONBLOCK);
	uint8_t *buf = malloc(LZ_WIRE_MAX);
	struct lz_wire_msg m;
	size_t n;
	assert_int_equal(lz_wire_recv(t.srv, buf, LZ_WIRE_MAX, &m, NULL, 0, &n, NULL), -EAGAIN);
	free(buf);
	pair_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_wire_encode__fixed_vectors),
		cmocka_unit_test(test_lz_wire_decode__fixed_vectors),
		cmocka_unit_test(test_lz_wire_decode__borrows_the_buffer),
		cmocka_unit_test(test_lz_wire_decode__truncated_at_every_offset),
		cmocka_unit_test(test_lz_wire_decode__trailing_byte),
		cmocka_unit_test(test_lz_wire_decode__unknown_discriminants),
		cmocka_unit_test(test_lz_wire_decode__non_canonical_values),
		cmocka_unit_test(test_lz_wire_decode__zero_rows_or_cols),
		cmocka_unit_test(test_lz_wire_decode__out_of_range_values),
		cmocka_unit_test(test_lz_wire_decode__over_limit_lengths),
		cmocka_unit_test(test_lz_wire_encode__refuses_invalid_values),
		cmocka_unit_test(test_lz_wire_encode__too_small_at_every_capacity),
		cmocka_unit_test(test_lz_wire_encode__record_over_max),
		cmocka_unit_test(test_lz_wire_from_client__directions),
		cmocka_unit_test(test_lz_wire_send__records_and_fds_inside_tls),
		cmocka_unit_test(test_lz_wire_recv__peer_end_is_epipe),
		cmocka_unit_test(test_lz_wire_recv__surplus_or_malformed_closes_fds),
		cmocka_unit_test(test_lz_wire_recv__nonblocking_empty_is_eagain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
