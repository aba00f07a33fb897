/* The guest command of a Client Session (spec 3.4, SR-2): the argument
 * vector exactly as the client sent it, and an environment that is the
 * profile's guest environment plus, for a terminal session, the client's
 * TERM when it is a plain terminal name (unless the profile sets TERM). Nothing else of the client's
 * environment enters the sandbox. */
#ifndef LZ_GUESTCMD_H
#define LZ_GUESTCMD_H

#include "session/wire.h"
#include "util/err.h"

#define LZ_GUESTCMD_TERM_MAX 64
#define LZ_GUESTCMD_TERM_DEFAULT "xterm"

/* Builds argv (one allocation, NUL-terminated strings; free with free())
 * and env (base_env taken over, grown by TERM for a terminal session; free
 * with lz_guestcmd_env_free) from run. argv[0] must be non-empty; no
 * argument may contain NUL (-EINVAL). base_env is consumed on every path. */
int lz_guestcmd_build(const struct lz_wire_run_command *run, char **base_env, char ***ret_argv, char ***ret_env,
		      struct lz_err *err);

/* Zeroes and frees a NULL-terminated vector of strings and the vector;
 * accepts NULL. */
void lz_guestcmd_env_free(char **env);

#endif
