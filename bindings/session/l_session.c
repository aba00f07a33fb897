/* lazaret.core.session: Client Sessions (spec 3.4) from both ends.
 *
 *   session.run(cfg, {config=, argv={...}, terminal=})  [-2, +1|3, e]
 *       -> exit status | nil, msg, errno
 *       The Client CLI side: reach (or start) the Host Coordinator and run
 *       argv there (core/session/client.h).
 *   session.interactive()           [-0, +1, -] -> boolean
 *       standard input and output are both terminals
 *   session.serve(hc)               [-1, +1|3, e] -> true | nil, msg, errno
 *       The HC side: Client Sessions until the last one ended (or none
 *       came within the idle grace); EPIPE when the RS was lost
 *       (core/runtime/coordinator.h lz_hc_serve).
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <unistd.h>

#include "l_util.h"
#include "modules.h"
#include "runtime/coordinator.h"
#include "session/client.h"

#define LZ_SESSION_MAX_ARGV 4096

static int session_run(lua_State *L)
{
	static const char *const keys[] = { "config", "argv", "terminal", NULL };
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	lz_l_check_options(L, 2, keys);
	const char *config_arg = lz_l_opt_string(L, 2, "config");
	if (lua_getfield(L, 2, "argv") != LUA_TTABLE)
		return luaL_error(L, "option 'argv' must be a table");
	lua_Integer argc = luaL_len(L, -1);
	if (argc < 1 || argc > LZ_SESSION_MAX_ARGV)
		return luaL_error(L, "option 'argv' needs 1 to %d strings", LZ_SESSION_MAX_ARGV);
	char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(argc + 1), 0);
	for (lua_Integer i = 1; i <= argc; i++) {
		lua_geti(L, -2, i);
		if (lua_type(L, -1) != LUA_TSTRING)
			return luaL_error(L, "argv[%d] must be a string", (int)i);
		argv[i - 1] = (char *)lua_tostring(L, -1);
		lua_pop(L, 1); /* still anchored by the argv table */
	}
	argv[argc] = NULL;
	lua_getfield(L, 2, "terminal");
	bool terminal = lua_toboolean(L, -1);
	lua_pop(L, 1);
	struct lz_client_request req = { .cfg = cfg, .config_arg = config_arg, .argv = argv,
					 .terminal = terminal };
	struct lz_err err = { 0, "" };
	int status = 0;
	int r = lz_client_run(&req, &status, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushinteger(L, status);
	return 1;
}

static int session_interactive(lua_State *L)
{
	lua_pushboolean(L, isatty(STDIN_FILENO) && isatty(STDOUT_FILENO));
	return 1;
}

static int session_serve(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	struct lz_err err = { 0, "" };
	int r = lz_hc_serve(hc, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

int luaopen_lazaret_session(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "run", session_run },
		{ "interactive", session_interactive },
		{ "serve", session_serve },
		{ NULL, NULL },
	};
	luaL_newlib(L, functions);
	return 1;
}
