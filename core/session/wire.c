/* v1 Client CLI <-> Host Coordinator records (see wire.h for the format,
 * the value rules and ownership).
 *
 * One validator (msg_valid) states the value rules; the encoder applies it
 * before writing and the decoder after reading, so both sides agree on what
 * is a record. Threat: the HC decodes records from any process that reaches
 * its socket, so decoding allocates only what the record's own bytes bound
 * (at most LZ_WIRE_MAX_ARGV + LZ_WIRE_MAX_ENV spans) and the receive helper
 * never leaks a descriptor the peer pushed at it. */
#include "session/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/postcard.h"
#include "util/cleanup.h"


bool lz_wire_from_client(enum lz_wire_type type)
{
	return (unsigned)type <= LZ_WIRE_DETACH;
}

size_t lz_wire_expected_fds(const struct lz_wire_msg *m)
{
	return m->type == LZ_WIRE_RUN_COMMAND && !m->run.terminal ? LZ_WIRE_STDIO_FDS : 0;
}

static bool span_ok(const struct lz_wire_bytes *b)
{
	return b->ptr != NULL || b->len == 0;
}

static bool has_byte(const void *p, size_t len, int c)
{
	return len > 0 && memchr(p, c, len) != NULL;
}

static bool run_valid(const struct lz_wire_run_command *c)
{
	if (c->argc == 0 || c->argc > LZ_WIRE_MAX_ARGV || c->argv == NULL)
		return false;
	for (size_t i = 0; i < c->argc; i++) {
		const struct lz_wire_bytes *a = &c->argv[i];
		if (!span_ok(a) || has_byte(a->ptr, a->len, '\0'))
			return false;
	}
	if (c->n_env > LZ_WIRE_MAX_ENV || (c->n_env > 0 && c->env == NULL))
		return false;
	for (size_t i = 0; i < c->n_env; i++) {
		const struct lz_wire_env *e = &c->env[i];
		if (!span_ok(&e->name) || !span_ok(&e->value) || e->name.len == 0 ||
		    has_byte(e->name.ptr, e->name.len, '\0') || has_byte(e->name.ptr, e->name.len, '=') ||
		    has_byte(e->value.ptr, e->value.len, '\0'))
			return false;
	}
	if (c->has_cwd && (!span_ok(&c->cwd) || c->cwd.len == 0 || c->cwd.len > LZ_WIRE_MAX_CWD ||
			   has_byte(c->cwd.ptr, c->cwd.len, '\0')))
		return false;
	/* Spec 3.4: window sizes are non-zero; without a terminal there is none. */
	if (c->terminal)
		return c->rows != 0 && c->cols != 0;
	return c->rows == 0 && c->cols == 0;
}

static bool data_valid(const struct lz_wire_bytes *d)
{
	return span_ok(d) && d->len >= 1 && d->len <= LZ_WIRE_MAX_DATA;
}

static bool msg_valid(const struct lz_wire_msg *m)
{
	switch (m->type) {
	case LZ_WIRE_HELLO:
		return m->hello.client_pid != 0;
	case LZ_WIRE_RUN_COMMAND:
		return run_valid(&m->run);
	case LZ_WIRE_INPUT:
		return data_valid(&m->input);
	case LZ_WIRE_RESIZE:
		return m->resize.rows != 0 && m->resize.cols != 0;
	case LZ_WIRE_SIGNAL:
		return (unsigned)m->sig <= LZ_WIRE_SIG_TERMINATE;
	case LZ_WIRE_CLOSE_INPUT:
	case LZ_WIRE_DETACH:
	case LZ_WIRE_WELCOME:
		return true;
	case LZ_WIRE_REFUSED: {
		const struct lz_wire_refused *f = &m->refused;
		return f->code >= 1 && f->code <= LZ_WIRE_MAX_ERRNO && f->message_len <= LZ_WIRE_MAX_MESSAGE &&
		       (f->message != NULL || f->message_len == 0) &&
		       !has_byte(f->message, f->message_len, '\0') &&
		       lz_pc_utf8_valid((const uint8_t *)f->message, f->message_len);
	}
	case LZ_WIRE_OUTPUT:
		return data_valid(&m->output);
	case LZ_WIRE_SESSION_EXIT:
		if (m->exit.kind == LZ_WIRE_EXITED)
			return true;
		return m->exit.kind == LZ_WIRE_SIGNALED && m->exit.value >= 1 &&
		       m->exit.value <= LZ_WIRE_MAX_SIGNAL;
	}
	return false; /* unknown type */
}

static void put_span(struct lz_pc_writer *w, const struct lz_wire_bytes *b)
{
	lz_pc_put_bytes(w, b->ptr, b->len);
}

/* The writer's error is sticky, so the puts below are checked once, in
 * lz_wire_encode. */
static void put_run(struct lz_pc_writer *w, const struct lz_wire_run_command *c)
{
	lz_pc_put_seq_len(w, c->argc);
	for (size_t i = 0; i < c->argc; i++)
		put_span(w, &c->argv[i]);
	lz_pc_put_seq_len(w, c->n_env);
	for (size_t i = 0; i < c->n_env; i++) {
		put_span(w, &c->env[i].name);
		put_span(w, &c->env[i].value);
	}
	lz_pc_put_option(w, c->has_cwd);
	if (c->has_cwd)
		put_span(w, &c->cwd);
	lz_pc_put_bool(w, c->terminal);
	lz_pc_put_u16(w, c->rows);
	lz_pc_put_u16(w, c->cols);
}

int lz_wire_encode(const struct lz_wire_msg *m, uint8_t *buf, size_t cap, size_t *ret_len)
{
	if (!msg_valid(m))
		return -EINVAL;
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, cap < LZ_WIRE_MAX ? cap : LZ_WIRE_MAX);
	lz_pc_put_discriminant(&w, (uint32_t)m->type);
	switch (m->type) {
	case LZ_WIRE_HELLO:
		lz_pc_put_u32(&w, m->hello.protocol);
		lz_pc_put_fixed(&w, m->hello.domain_id, sizeof(m->hello.domain_id));
		lz_pc_put_fixed(&w, m->hello.fingerprint, sizeof(m->hello.fingerprint));
		lz_pc_put_u32(&w, m->hello.client_pid);
		break;
	case LZ_WIRE_RUN_COMMAND:
		put_run(&w, &m->run);
		break;
	case LZ_WIRE_INPUT:
		put_span(&w, &m->input);
		break;
	case LZ_WIRE_RESIZE:
		lz_pc_put_u16(&w, m->resize.rows);
		lz_pc_put_u16(&w, m->resize.cols);
		break;
	case LZ_WIRE_SIGNAL:
		lz_pc_put_discriminant(&w, (uint32_t)m->sig);
		break;
	case LZ_WIRE_CLOSE_INPUT:
	case LZ_WIRE_DETACH:
		break;
	case LZ_WIRE_WELCOME:
		lz_pc_put_u32(&w, m->welcome.protocol);
		lz_pc_put_u64(&w, m->welcome.generation);
		lz_pc_put_fixed(&w, m->welcome.session_id, sizeof(m->welcome.session_id));
		break;
	case LZ_WIRE_REFUSED:
		lz_pc_put_u32(&w, m->refused.code);
		lz_pc_put_str(&w, m->refused.message, m->refused.message_len);
		break;
	case LZ_WIRE_OUTPUT:
		put_span(&w, &m->output);
		break;
	case LZ_WIRE_SESSION_EXIT:
		lz_pc_put_discriminant(&w, (uint32_t)m->exit.kind);
		lz_pc_put_u8(&w, m->exit.value);
		break;
	}
	size_t len;
	int r = lz_pc_writer_finish(&w, &len);
	/* msg_valid checked every value, so -EINVAL here can only be an argv or
	 * env span longer than LZ_PC_MAX_LEN: a record too large either way. */
	if (r == -EINVAL)
		r = -EMSGSIZE;
	if (r < 0)
		return r;
	*ret_len = len;
	return 0;
}

static int get_span(struct lz_pc_reader *r, size_t max, struct lz_wire_bytes *ret)
{
	return lz_pc_get_bytes(r, max, &ret->ptr, &ret->len);
}

/* Reads argc spans into out, or only skips them when out is NULL. */
static int get_spans(struct lz_pc_reader *r, size_t n, struct lz_wire_bytes *out)
{
	for (size_t i = 0; i < n; i++) {
		struct lz_wire_bytes b;
		int e = get_span(r, LZ_WIRE_MAX, &b);
		if (e < 0)
			return e;
		if (out)
			out[i] = b;
	}
	return 0;
}

/* Decodes a RunCommand into *c and its arrays into *ret_owned. argv is read
 * twice: once to reach the env count (so the single allocation is sized
 * exactly), once to fill it. Both counts are bounded by the record's bytes. */
static int get_run(struct lz_pc_reader *r, struct lz_wire_run_command *c, void **ret_owned)
{
	size_t argc, n_env;
	int e = lz_pc_get_seq_len(r, LZ_WIRE_MAX_ARGV, &argc);
	if (e < 0)
		return e;
	if (argc == 0)
		return -EBADMSG;
	struct lz_pc_reader argv_at = *r;
	e = get_spans(r, argc, NULL);
	if (e < 0)
		return e;
	e = lz_pc_get_seq_len(r, LZ_WIRE_MAX_ENV, &n_env);
	if (e < 0)
		return e;

	size_t argv_size = argc * sizeof(struct lz_wire_bytes);
	_cleanup_free_ void *owned = malloc(argv_size + n_env * sizeof(struct lz_wire_env));
	if (!owned)
		return -ENOMEM;
	struct lz_wire_bytes *argv = owned;
	struct lz_wire_env *env = n_env > 0 ? (struct lz_wire_env *)((uint8_t *)owned + argv_size) : NULL;

	e = get_spans(&argv_at, argc, argv);
	if (e < 0)
		return e;
	for (size_t i = 0; i < n_env; i++) {
		e = get_span(r, LZ_WIRE_MAX, &env[i].name);
		if (e < 0)
			return e;
		e = get_span(r, LZ_WIRE_MAX, &env[i].value);
		if (e < 0)
			return e;
	}
	*c = (struct lz_wire_run_command){ .argv = argv, .argc = argc, .env = env, .n_env = n_env };
	e = lz_pc_get_option(r, &c->has_cwd);
	if (e < 0)
		return e;
	if (c->has_cwd) {
		e = get_span(r, LZ_WIRE_MAX_CWD, &c->cwd);
		if (e < 0)
			return e;
	}
	e = lz_pc_get_bool(r, &c->terminal);
	if (e < 0)
		return e;
	e = lz_pc_get_u16(r, &c->rows);
	if (e < 0)
		return e;
	e = lz_pc_get_u16(r, &c->cols);
	if (e < 0)
		return e;
	*ret_owned = TAKE_PTR(owned);
	return 0;
}

static int get_body(struct lz_pc_reader *r, struct lz_wire_msg *m)
{
	uint32_t d;
	int e;
	switch (m->type) {
	case LZ_WIRE_HELLO:
		if ((e = lz_pc_get_u32(r, &m->hello.protocol)) < 0 ||
		    (e = lz_pc_get_fixed(r, m->hello.domain_id, sizeof(m->hello.domain_id))) < 0 ||
		    (e = lz_pc_get_fixed(r, m->hello.fingerprint, sizeof(m->hello.fingerprint))) < 0)
			return e;
		return lz_pc_get_u32(r, &m->hello.client_pid);
	case LZ_WIRE_RUN_COMMAND:
		return get_run(r, &m->run, &m->owned);
	case LZ_WIRE_INPUT:
		return get_span(r, LZ_WIRE_MAX_DATA, &m->input);
	case LZ_WIRE_RESIZE:
		if ((e = lz_pc_get_u16(r, &m->resize.rows)) < 0)
			return e;
		return lz_pc_get_u16(r, &m->resize.cols);
	case LZ_WIRE_SIGNAL:
		if ((e = lz_pc_get_discriminant(r, &d)) < 0)
			return e;
		if (d > LZ_WIRE_SIG_TERMINATE)
			return -EBADMSG;
		m->sig = (enum lz_wire_signal)d;
		return 0;
	case LZ_WIRE_CLOSE_INPUT:
	case LZ_WIRE_DETACH:
		return 0;
	case LZ_WIRE_WELCOME:
		if ((e = lz_pc_get_u32(r, &m->welcome.protocol)) < 0 ||
		    (e = lz_pc_get_u64(r, &m->welcome.generation)) < 0)
			return e;
		return lz_pc_get_fixed(r, m->welcome.session_id, sizeof(m->welcome.session_id));
	case LZ_WIRE_REFUSED:
		if ((e = lz_pc_get_u32(r, &m->refused.code)) < 0)
			return e;
		return lz_pc_get_str(r, LZ_WIRE_MAX_MESSAGE, &m->refused.message, &m->refused.message_len);
	case LZ_WIRE_OUTPUT:
		return get_span(r, LZ_WIRE_MAX_DATA, &m->output);
	case LZ_WIRE_SESSION_EXIT:
		if ((e = lz_pc_get_discriminant(r, &d)) < 0)
			return e;
		if (d > LZ_WIRE_SIGNALED)
			return -EBADMSG;
		m->exit.kind = (enum lz_wire_exit_kind)d;
		return lz_pc_get_u8(r, &m->exit.value);
	}
	return -EBADMSG;
}

int lz_wire_decode(const uint8_t *buf, size_t len, struct lz_wire_msg *ret)
{
	if (len > LZ_WIRE_MAX)
		return -EBADMSG;
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, buf, len);
	uint32_t type;
	int e = lz_pc_get_discriminant(&r, &type);
	if (e < 0)
		return e;
	if (type > LZ_WIRE_SESSION_EXIT)
		return -EBADMSG;
	struct lz_wire_msg m = { .type = (enum lz_wire_type)type };
	e = get_body(&r, &m);
	if (e >= 0 && (lz_pc_reader_end(&r) < 0 || !msg_valid(&m)))
		e = -EBADMSG;
	if (e < 0) {
		lz_wire_msg_release(&m);
		return e;
	}
	*ret = m;
	return 0;
}

void lz_wire_msg_release(struct lz_wire_msg *m)
{
	if (!m || !m->owned)
		return;
	free(m->owned);
	m->owned = NULL;
	if (m->type == LZ_WIRE_RUN_COMMAND) {
		m->run.argv = NULL;
		m->run.argc = 0;
		m->run.env = NULL;
		m->run.n_env = 0;
	}
}

int lz_wire_send(struct lz_tlschan *ch, const struct lz_wire_msg *m, const int *fds, size_t n_fds, int timeout_ms,
		 struct lz_err *err)
{
	if (n_fds > LZ_WIRE_MAX_FDS)
		return lz_err_set(err, EINVAL, "%zu descriptors with one record", n_fds);
	for (size_t i = 0; i < n_fds; i++)
		if (fds[i] < 0)
			return lz_err_set(err, EBADF, "a record with a closed descriptor");
	_cleanup_free_ uint8_t *buf = malloc(LZ_WIRE_MAX);
	if (!buf)
		return lz_err_set(err, ENOMEM, "out of memory");
	size_t len;
	int e = lz_wire_encode(m, buf, LZ_WIRE_MAX, &len);
	if (e < 0)
		return lz_err_set(err, -e, "a record that breaks the protocol's value rules");
	return lz_tlschan_send(ch, buf, len, fds, n_fds, timeout_ms, err);
}

int lz_wire_recv(struct lz_tlschan *ch, uint8_t *buf, size_t cap, struct lz_wire_msg *ret, int *fds, size_t max_fds,
		 size_t *ret_n_fds, struct lz_err *err)
{
	if (max_fds > LZ_WIRE_MAX_FDS)
		return lz_err_set(err, EINVAL, "more than %u descriptors", LZ_WIRE_MAX_FDS);
	int got[LZ_WIRE_MAX_FDS];
	size_t n_got = 0;
	ssize_t n = lz_tlschan_recv(ch, buf, cap, got, max_fds, &n_got, err);
	if (n < 0)
		return (int)n;
	struct lz_wire_msg m;
	int e = lz_wire_decode(buf, (size_t)n, &m);
	if (e < 0) {
		for (size_t i = 0; i < n_got; i++)
			lz_close_fdp(&got[i]);
		return lz_err_set(err, -e, "a malformed record");
	}
	if (n_got > 0)
		memcpy(fds, got, n_got * sizeof(int));
	*ret_n_fds = n_got;
	*ret = m;
	return 0;
}
