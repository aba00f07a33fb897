/* lazaret.core.session: Client Sessions (spec 3.4) from both ends.
 *
 *   session.run(cfg, {config=, argv={...}, terminal=})  [-2, +1|3, e]
 *       -> exit status | nil, msg, errno
 *       The Client CLI side: reach (or start) the Host Coordinator and run
 *       argv there (core/session/client.h).
 *   session.interactive()           [-0, +1, -] -> boolean
 *       standard input and output are both terminals
 *   session.serve(hc, route)        [-2, +1|3, e] -> true | nil, msg, errno
 *       The HC side: Client Sessions until the last one ended (or none
 *       came within the idle grace); EPIPE when the RS was lost
 *       (core/runtime/coordinator.h lz_hc_serve). route(q) decides each
 *       escalation request: q = {profile=, session=, terminal=,
 *       prompt_busy=, rows=, cols= (the developer's terminal), rule=
 *       (1-based, or nil), argv={...}, cwd=, why=};
 *       it returns "auto" | "prompt" | "deny" and the prompt's or the
 *       denial's text. An error in route denies the request.
 *   session.capture(args, {terminal=, timeout_ms=, max_output=})
 *                                   [-2, +1|3, e]
 *       -> {status=, output=, timed_out=, truncated=} | nil, msg, errno
 *       Runs this lazaret executable itself with args (its argv[1..]) and
 *       this process's environment, output captured and bounded
 *       (core/session/capture.h): the qualification suite's real launch.
 *       Nothing but lazaret can be run this way.
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "l_util.h"
#include "modules.h"
#include "runtime/coordinator.h"
#include "session/capture.h"
#include "session/client.h"

extern char **environ;

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

/* Calls the Lua route function (at stack index 2 of the serve call)
 * protected: a Lua error must not unwind through the serve loop. */
static void route_in_lua(void *ctx, const struct lz_hc_route_query *q, struct lz_hc_route *ret)
{
	lua_State *L = ctx;
	int top = lua_gettop(L);
	lua_pushvalue(L, 2);
	lua_createtable(L, 0, 8);
	lua_pushstring(L, q->profile);
	lua_setfield(L, -2, "profile");
	lua_pushstring(L, q->session_id);
	lua_setfield(L, -2, "session");
	lua_pushboolean(L, q->terminal);
	lua_setfield(L, -2, "terminal");
	lua_pushboolean(L, q->prompt_busy);
	lua_setfield(L, -2, "prompt_busy");
	lua_pushinteger(L, q->rows);
	lua_setfield(L, -2, "rows");
	lua_pushinteger(L, q->cols);
	lua_setfield(L, -2, "cols");
	if (q->rule >= 0) {
		lua_pushinteger(L, q->rule + 1);
		lua_setfield(L, -2, "rule");
	}
	lua_createtable(L, (int)q->argc, 0);
	for (size_t i = 0; i < q->argc; i++) {
		lua_pushstring(L, q->argv[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "argv");
	lua_pushstring(L, q->cwd);
	lua_setfield(L, -2, "cwd");
	lua_pushstring(L, q->why);
	lua_setfield(L, -2, "why");
	ret->action = LZ_HC_ROUTE_DENY;
	if (lua_pcall(L, 1, 2, 0) != LUA_OK) {
		snprintf(ret->text, sizeof(ret->text), "the coordinator could not route the request");
		fprintf(stderr, "escalation: route failed: %s\n", lua_tostring(L, -1));
	} else {
		const char *action = lua_tostring(L, -2);
		const char *text = lua_tostring(L, -1);
		if (action != NULL && strcmp(action, "auto") == 0)
			ret->action = LZ_HC_ROUTE_AUTO;
		else if (action != NULL && strcmp(action, "prompt") == 0 && text != NULL && text[0] != '\0')
			ret->action = LZ_HC_ROUTE_PROMPT; /* never a prompt that shows nothing */
		/* A prompt is shown whole or not at all: a cut one would hide
		 * arguments that still run. */
		if (snprintf(ret->text, sizeof(ret->text), "%s", text ? text : "denied") >= (int)sizeof(ret->text) &&
		    ret->action == LZ_HC_ROUTE_PROMPT) {
			ret->action = LZ_HC_ROUTE_DENY;
			snprintf(ret->text, sizeof(ret->text),
				 "the request is too long to show the developer in full (%zu bytes of prompt, at "
				 "most %zu)",
				 strlen(text), sizeof(ret->text) - 1);
		}
	}
	lua_settop(L, top);
}

static int session_serve(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	luaL_checktype(L, 2, LUA_TFUNCTION);
	struct lz_err err = { 0, "" };
	int r = lz_hc_serve(hc, route_in_lua, L, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int session_capture(lua_State *L)
{
	static const char *const keys[] = { "terminal", "timeout_ms", "max_output", NULL };
	luaL_checktype(L, 1, LUA_TTABLE);
	lz_l_check_options(L, 2, keys);
	lua_Integer argc = luaL_len(L, 1);
	luaL_argcheck(L, argc >= 1 && argc < LZ_SESSION_MAX_ARGV, 1, "needs 1 to 4095 arguments");
	char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(argc + 2), 0);
	argv[0] = "lazaret";
	for (lua_Integer i = 1; i <= argc; i++) {
		if (lua_geti(L, 1, i) != LUA_TSTRING)
			return luaL_error(L, "argument %d must be a string", (int)i);
		argv[i] = (char *)lua_tostring(L, -1);
		lua_pop(L, 1); /* still anchored by the table */
	}
	argv[argc + 1] = NULL;
	lua_getfield(L, 2, "terminal");
	bool terminal = lua_toboolean(L, -1);
	lua_getfield(L, 2, "timeout_ms");
	lua_Integer timeout = luaL_optinteger(L, -1, 60000);
	lua_getfield(L, 2, "max_output");
	lua_Integer max = luaL_optinteger(L, -1, 65536);
	lua_pop(L, 3);
	luaL_argcheck(L, timeout > 0 && timeout <= 3600000, 2, "timeout_ms must be 1 to 3600000");
	luaL_argcheck(L, max >= 0 && max <= LZ_CAPTURE_MAX_OUTPUT, 2, "max_output must be 0 to 1 MiB");
	struct lz_capture_request req = { .path = "/proc/self/exe", .argv = argv, .envp = environ,
					  .terminal = terminal, .timeout_ms = (int)timeout,
					  .max_output = (size_t)max };
	struct lz_capture_result res;
	struct lz_err err = { 0, "" };
	int r = lz_capture_run(&req, &res, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 4);
	lua_pushlstring(L, res.output, res.len);
	lz_capture_result_free(&res);
	lua_setfield(L, -2, "output");
	if (res.timed_out)
		lua_pushboolean(L, 0);
	else
		lua_pushinteger(L, res.status);
	lua_setfield(L, -2, "status");
	lua_pushboolean(L, res.timed_out);
	lua_setfield(L, -2, "timed_out");
	lua_pushboolean(L, res.truncated);
	lua_setfield(L, -2, "truncated");
	return 1;
}

int luaopen_lazaret_session(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "run", session_run },
		{ "interactive", session_interactive },
		{ "serve", session_serve },
		{ "capture", session_capture },
		{ NULL, NULL },
	};
	luaL_newlib(L, functions);
	return 1;
}
