/* libFuzzer target for core/session/guestcmd.c: the guest command a Client
 * Session runs (spec 3.4, SR-2), from the RunCommand a possibly hostile
 * Client CLI sends, on to the process JSON runsc exec is given
 * (runtime/ocispec.c), the way the coordinator's session_start uses them.
 *
 * 1. Decodes the input as one v1 record (lz_wire_decode). An accepted
 *    RunCommand must have the shape wire.h promises (argc, env and cwd
 *    bounds, no NUL, rows/cols against terminal) and is then built.
 * 2. Reads the input as a RunCommand laid out directly (no wire rules:
 *    argc 0, an empty argv[0], NUL inside arguments, odd env names), so the
 *    refusals are reached too; see raw_run below.
 *
 * Each RunCommand is built with lz_guestcmd_build twice, over a profile
 * environment without TERM and over one that sets TERM itself (a profile
 * may: config.c accepts any env name). For every build:
 *   - the return is 0, or -EINVAL exactly when argc is 0, argv[0] is empty
 *     or an argument holds NUL, or -ENOMEM; a refusal sets err (code and a
 *     message) and leaves *ret_argv and *ret_env untouched; base_env is
 *     consumed on every path (LeakSanitizer sees the rest);
 *   - an accepted argv is ONE allocation (freed with free() alone) holding
 *     argc NUL-terminated copies of the arguments, byte for byte, packed
 *     after the NULL-terminated vector;
 *   - an accepted env is the profile environment, entry for entry and in
 *     order, then, for a terminal only and unless the profile sets TERM,
 *     exactly one TERM=: the value of one of the client's TERM entries that
 *     is a plain terminal name (1..=64 bytes of [A-Za-z0-9.+_-]), or
 *     TERM=xterm when none is. Nothing else of the client's environment
 *     appears, and no name appears twice;
 *   - the built argv/env then go through lz_ocispec_process_json (cwd
 *     /workspace, as session_start): it accepts exactly when every argument
 *     and env entry is valid UTF-8, and the JSON it makes parses back to the
 *     same args, env, cwd and terminal.
 * raw_run gives an empty span a NULL pointer, which wire.h allows ("ptr may
 * be NULL only when len == 0"; UBSan reports a memcpy from it). Any
 * violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "runtime/ocispec.h"
#include "session/guestcmd.h"
#include "session/wire.h"
#include "util/err.h"
#include "util/postcard.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* Two profile environments, as lz_bundle_guest_env makes them. */
static const char *const base_plain[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"GIT_CONFIG_NOSYSTEM=1",
	"SECRET=s3cr3t",
	NULL,
};
static const char *const base_term[] = {
	"PATH=/usr/bin:/bin",
	"HOME=/root",
	"TERM=vt100",
	"LANG=C.UTF-8",
	NULL,
};

static size_t count(const char *const *v)
{
	size_t n = 0;
	while (v[n] != NULL)
		n++;
	return n;
}

static char **copy_env(const char *const *base)
{
	size_t n = count(base);
	char **env = calloc(n + 1, sizeof(char *));
	check(env != NULL);
	for (size_t i = 0; i < n; i++) {
		env[i] = strdup(base[i]);
		check(env[i] != NULL);
	}
	return env;
}

/* An independent reading of guestcmd.h's "a plain terminal name". */
static bool plain_term(const struct lz_wire_bytes *v)
{
	if (v->len == 0 || v->len > LZ_GUESTCMD_TERM_MAX)
		return false;
	static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._+";
	for (size_t i = 0; i < v->len; i++)
		if (v->ptr[i] == 0 || strchr(ok, v->ptr[i]) == NULL)
			return false;
	return true;
}

static bool is_term_name(const struct lz_wire_bytes *n)
{
	return n->len == 4 && memcmp(n->ptr, "TERM", 4) == 0;
}

/* Whether entry is "TERM=" followed by a plain TERM value the client sent;
 * *any_plain says whether it sent one at all. */
static bool client_term_entry(const struct lz_wire_run_command *run, const char *entry, bool *any_plain)
{
	bool match = false;
	*any_plain = false;
	if (strncmp(entry, "TERM=", 5) != 0)
		return false;
	const char *v = entry + 5;
	size_t vlen = strlen(v);
	for (size_t i = 0; i < run->n_env; i++) {
		const struct lz_wire_env *e = &run->env[i];
		if (!is_term_name(&e->name) || !plain_term(&e->value))
			continue;
		*any_plain = true;
		if (e->value.len == vlen && memcmp(e->value.ptr, v, vlen) == 0)
			match = true;
	}
	return match;
}

static bool names_unique(char *const *env, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t li = strcspn(env[i], "=");
		for (size_t j = i + 1; j < n; j++) {
			size_t lj = strcspn(env[j], "=");
			if (li == lj && memcmp(env[i], env[j], li) == 0)
				return false;
		}
	}
	return true;
}

static bool json_string_is(const json_t *s, const char *want)
{
	return json_is_string(s) && json_string_length(s) == strlen(want) &&
	       memcmp(json_string_value(s), want, strlen(want)) == 0;
}

static bool json_vector_is(const json_t *a, char *const *v, size_t n)
{
	if (!json_is_array(a) || json_array_size(a) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!json_string_is(json_array_get(a, i), v[i]))
			return false;
	return true;
}

/* The next stage of session_start: the process JSON for runsc exec. */
static void check_process_json(char **argv, size_t argc, char **env, size_t n_env, bool terminal)
{
	bool utf8 = true;
	for (size_t i = 0; i < argc; i++)
		utf8 = utf8 && lz_pc_utf8_valid((const uint8_t *)argv[i], strlen(argv[i]));
	for (size_t i = 0; i < n_env; i++)
		utf8 = utf8 && lz_pc_utf8_valid((const uint8_t *)env[i], strlen(env[i]));

	struct lz_oci_process proc = { .argv = argv, .env = env, .cwd = "/workspace", .terminal = terminal };
	struct lz_err err = { 0 };
	char *json = NULL;
	int r = lz_ocispec_process_json(&proc, &json, &err);
	if (r < 0) {
		check(json == NULL && err.code == -r && err.msg[0] != '\0');
		check(r == -ENOMEM || (r == -EINVAL && !utf8));
		return;
	}
	check(r == 0 && json != NULL && utf8);
	json_error_t jerr;
	json_t *doc = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
	check(doc != NULL && json_is_object(doc));
	check(json_vector_is(json_object_get(doc, "args"), argv, argc));
	check(json_vector_is(json_object_get(doc, "env"), env, n_env));
	check(json_string_is(json_object_get(doc, "cwd"), "/workspace"));
	check(json_is_boolean(json_object_get(doc, "terminal")) &&
	      json_is_true(json_object_get(doc, "terminal")) == terminal);
	json_decref(doc);
	explicit_bzero(json, strlen(json));
	free(json);
}

static void build_one(const struct lz_wire_run_command *run, const char *const *base)
{
	bool want_einval = run->argc == 0 || run->argv[0].len == 0;
	for (size_t i = 0; i < run->argc && !want_einval; i++)
		want_einval = run->argv[i].len > 0 && memchr(run->argv[i].ptr, 0, run->argv[i].len) != NULL;

	char *sentinel_a[1] = { NULL }, *sentinel_e[1] = { NULL };
	char **argv = sentinel_a, **env = sentinel_e;
	struct lz_err err = { 0 };
	int r = lz_guestcmd_build(run, copy_env(base), &argv, &env, &err);
	if (r < 0) {
		check(r == -EINVAL || r == -ENOMEM);
		check(r == -ENOMEM || want_einval);
		check(err.code == -r && err.msg[0] != '\0' && memchr(err.msg, 0, sizeof(err.msg)) != NULL);
		check(argv == sentinel_a && env == sentinel_e);
		return;
	}
	check(r == 0 && !want_einval);

	/* argv: one allocation, the vector then the strings, packed. */
	check(argv != NULL && argv != sentinel_a && argv[run->argc] == NULL);
	char *p = (char *)(argv + run->argc + 1);
	for (size_t i = 0; i < run->argc; i++) {
		size_t len = run->argv[i].len;
		check(argv[i] == p);
		check(len == 0 || memcmp(argv[i], run->argv[i].ptr, len) == 0);
		check(argv[i][len] == '\0' && strlen(argv[i]) == len);
		p += len + 1;
	}

	/* env: the profile's, then TERM for a terminal, nothing else. */
	size_t nbase = count(base), n = 0;
	check(env != NULL && env != sentinel_e);
	while (env[n] != NULL)
		n++;
	bool base_term = false;
	for (size_t i = 0; i < nbase; i++)
		base_term = base_term || strncmp(base[i], "TERM=", 5) == 0;
	bool appended = run->terminal && !base_term;
	check(n == nbase + (appended ? 1 : 0));
	for (size_t i = 0; i < nbase; i++)
		check(strcmp(env[i], base[i]) == 0);
	if (appended) {
		bool any_plain = false;
		bool from_client = client_term_entry(run, env[nbase], &any_plain);
		check(from_client || (!any_plain && strcmp(env[nbase], "TERM=" LZ_GUESTCMD_TERM_DEFAULT) == 0));
		check(strlen(env[nbase]) <= 5 + LZ_GUESTCMD_TERM_MAX);
	}
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(env[i], '=');
		check(eq != NULL && eq != env[i]);
	}
	check(names_unique(env, n));

	check_process_json(argv, run->argc, env, n, run->terminal);

	free(argv); /* one allocation: LeakSanitizer would see more */
	lz_guestcmd_env_free(env);
}

static void build_all(const struct lz_wire_run_command *run)
{
	build_one(run, base_plain);
	build_one(run, base_term);
}

static void check_inside(const uint8_t *data, size_t size, const struct lz_wire_bytes *b)
{
	if (b->len == 0)
		return;
	check(b->ptr >= data && b->ptr <= data + size && b->len <= (size_t)(data + size - b->ptr));
}

static void fuzz_wire_run(const uint8_t *data, size_t size)
{
	struct lz_wire_msg m;
	if (lz_wire_decode(data, size, &m) < 0)
		return;
	if (m.type == LZ_WIRE_RUN_COMMAND) {
		const struct lz_wire_run_command *run = &m.run;
		check(lz_wire_from_client(m.type) && m.owned != NULL);
		check(run->argc >= 1 && run->argc <= LZ_WIRE_MAX_ARGV && run->n_env <= LZ_WIRE_MAX_ENV);
		for (size_t i = 0; i < run->argc; i++) {
			check_inside(data, size, &run->argv[i]);
			check(run->argv[i].len == 0 || !memchr(run->argv[i].ptr, 0, run->argv[i].len));
		}
		for (size_t i = 0; i < run->n_env; i++) {
			const struct lz_wire_env *e = &run->env[i];
			check_inside(data, size, &e->name);
			check_inside(data, size, &e->value);
			check(e->name.len > 0 && !memchr(e->name.ptr, 0, e->name.len) &&
			      !memchr(e->name.ptr, '=', e->name.len));
			check(e->value.len == 0 || !memchr(e->value.ptr, 0, e->value.len));
		}
		if (run->has_cwd) {
			check_inside(data, size, &run->cwd);
			check(run->cwd.len >= 1 && run->cwd.len <= LZ_WIRE_MAX_CWD &&
			      !memchr(run->cwd.ptr, 0, run->cwd.len));
		}
		check(run->terminal ? (run->rows && run->cols) : (!run->rows && !run->cols));
		check(lz_wire_expected_fds(&m) == (run->terminal ? 0 : LZ_WIRE_STDIO_FDS));
		build_all(run);
	}
	lz_wire_msg_release(&m);
}

/* A RunCommand laid out without the wire's rules:
 *   flags u8 (bit 0 terminal), argc u8 (mod 17), n_env u8 (mod 9),
 *   then argc times (len u8, bytes), then n_env times (name len u8, name,
 *   value len u8, value); a field cut short takes what is left. */
struct raw_reader {
	const uint8_t *p;
	size_t left;
};

static uint8_t raw_u8(struct raw_reader *r)
{
	if (r->left == 0)
		return 0;
	r->left--;
	return *r->p++;
}

static struct lz_wire_bytes raw_span(struct raw_reader *r)
{
	size_t n = raw_u8(r);
	if (n > r->left)
		n = r->left;
	struct lz_wire_bytes b = { n ? r->p : NULL, n };
	r->p += n;
	r->left -= n;
	return b;
}

static void fuzz_raw_run(const uint8_t *data, size_t size)
{
	struct raw_reader r = { data, size };
	struct lz_wire_bytes argv[16];
	struct lz_wire_env env[8];
	uint8_t flags = raw_u8(&r);
	size_t argc = raw_u8(&r) % 17, n_env = raw_u8(&r) % 9;
	for (size_t i = 0; i < argc; i++)
		argv[i] = raw_span(&r);
	for (size_t i = 0; i < n_env; i++) {
		env[i].name = raw_span(&r);
		env[i].value = raw_span(&r);
	}
	struct lz_wire_run_command run = { .argv = argc ? argv : NULL, .argc = argc, .env = n_env ? env : NULL,
					   .n_env = n_env, .terminal = flags & 1, .rows = 24, .cols = 80 };
	build_all(&run);

	/* No profile environment (lz_bundle_guest_env out of memory). */
	char *sentinel[1] = { NULL };
	char **a = sentinel, **e = sentinel;
	struct lz_err err = { 0 };
	check(lz_guestcmd_build(&run, NULL, &a, &e, &err) == -ENOMEM && a == sentinel && e == sentinel &&
	      err.code == ENOMEM);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_wire_run(data, size);
	fuzz_raw_run(data, size);
	return 0;
}
