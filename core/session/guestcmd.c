/* The guest command of a Client Session; see guestcmd.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/guestcmd.h"
#include "util/cleanup.h"

void lz_guestcmd_env_free(char **env)
{
	if (env == NULL)
		return;
	for (char **e = env; *e; e++) {
		explicit_bzero(*e, strlen(*e)); /* environment values may be secrets */
		free(*e);
	}
	free(env);
}

static bool argument_ok(const struct lz_wire_bytes *b, bool first)
{
	if (b->len == 0)
		return !first;
	return memchr(b->ptr, '\0', b->len) == NULL;
}

/* A terminal name: what terminfo names are made of, nothing a shell or a
 * terminal would interpret. */
static bool term_value_ok(const struct lz_wire_bytes *v)
{
	if (v->len == 0 || v->len > LZ_GUESTCMD_TERM_MAX)
		return false;
	for (size_t i = 0; i < v->len; i++) {
		uint8_t c = v->ptr[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		      c == '.' || c == '_' || c == '+'))
			return false;
	}
	return true;
}

static char *client_term(const struct lz_wire_run_command *run)
{
	char *t = NULL;
	for (size_t i = 0; i < run->n_env; i++) {
		const struct lz_wire_env *e = &run->env[i];
		if (e->name.len == 4 && memcmp(e->name.ptr, "TERM", 4) == 0 && term_value_ok(&e->value))
			return asprintf(&t, "TERM=%.*s", (int)e->value.len, (const char *)e->value.ptr) < 0 ? NULL : t;
	}
	return strdup("TERM=" LZ_GUESTCMD_TERM_DEFAULT);
}

static void env_freep(char ***env)
{
	lz_guestcmd_env_free(*env);
}

int lz_guestcmd_build(const struct lz_wire_run_command *run, char **base_env, char ***ret_argv, char ***ret_env,
		      struct lz_err *err)
{
	_cleanup_(env_freep) char **env = base_env;
	if (env == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if (run->argc == 0)
		return lz_err_set(err, EINVAL, "no command");
	size_t total = (run->argc + 1) * sizeof(char *), n = 0;
	for (size_t i = 0; i < run->argc; i++) {
		if (!argument_ok(&run->argv[i], i == 0))
			return lz_err_set(err, EINVAL, "argument %zu is empty or contains NUL", i);
		total += run->argv[i].len + 1;
	}
	_cleanup_free_ char **argv = malloc(total);
	if (argv == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	char *p = (char *)(argv + run->argc + 1);
	for (size_t i = 0; i < run->argc; i++) {
		argv[i] = p;
		if (run->argv[i].len > 0) /* an empty span's pointer may be NULL (wire.h) */
			memcpy(p, run->argv[i].ptr, run->argv[i].len);
		p[run->argv[i].len] = '\0';
		p += run->argv[i].len + 1;
	}
	argv[run->argc] = NULL;
	bool profile_term = false;
	for (; env[n]; n++)
		profile_term = profile_term || strncmp(env[n], "TERM=", 5) == 0;
	/* A profile that sets TERM chose it for every session (one TERM, not
	 * two: see lz_bundle_guest_env). */
	if (run->terminal && !profile_term) {
		char **grown = realloc(env, (n + 2) * sizeof(char *));
		if (grown == NULL)
			return lz_err_set(err, ENOMEM, "out of memory");
		env = grown;
		env[n] = client_term(run);
		env[n + 1] = NULL;
		if (env[n] == NULL)
			return lz_err_set(err, ENOMEM, "out of memory");
	}
	*ret_argv = TAKE_PTR(argv);
	*ret_env = TAKE_PTR(env);
	return 0;
}
