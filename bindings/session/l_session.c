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
 *       denial's text. An error in route denies the request. While serve
 *       runs, every use of hc and its views raises, hc:close() and another
 *       serve included: the loop holds the coordinator.
 *   session.capture(args, {terminal=, timeout_ms=, max_output=})
 *                                   [-2, +1|3, e]
 *       -> {status=, output=, timed_out=, truncated=} | nil, msg, errno
 *       Runs this lazaret executable itself with args (its argv[1..]) and
 *       this process's environment, output captured and bounded
 *       (core/session/capture.h): the qualification suite's real launch.
 *       Nothing but lazaret can be run this way.
 * Tables passed in must be plain (no metatable), strings without NUL bytes.
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
	lua_pushliteral(L, "argv");
	if (lua_rawget(L, 2) != LUA_TTABLE)
		return luaL_error(L, "option 'argv' must be a table");
	int list = lua_gettop(L);
	lua_Integer argc = lz_l_list_len(L, list, "option 'argv'");
	if (argc < 1 || argc > LZ_SESSION_MAX_ARGV)
		return luaL_error(L, "option 'argv' needs 1 to %d strings", LZ_SESSION_MAX_ARGV);
	char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(argc + 1), 0);
	lz_l_list_strings(L, list, argc, "argv[%d]", (const char **)argv);
	argv[argc] = NULL;
	lua_pushliteral(L, "terminal");
	lua_rawget(L, 2);
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

/* [-3, +0, e] route_call(route, q, ret): builds the query table from q,
 * calls route with it and fills ret from its answer. Runs under lua_pcall
 * (route_in_lua), so nothing of it, not even a memory error while the
 * sandbox's argv is copied, unwinds through the serve loop. */
static int route_call(lua_State *L)
{
	const struct lz_hc_route_query *q = lua_touserdata(L, 2);
	struct lz_hc_route *ret = lua_touserdata(L, 3);
	/* A prompt shows every byte of the request at least once (escaping
	 * never shortens), so one whose own bytes leave no room is denied
	 * before Lua escapes and folds them: that work, up to 64 KiB a
	 * request, ran in the serve loop for a denial anyway. */
	size_t raw = strlen(q->cwd) + strlen(q->why);
	for (size_t i = 0; i < q->argc; i++)
		raw += strlen(q->argv[i]);
	if (q->rule < 0 && raw >= sizeof(ret->text)) {
		ret->action = LZ_HC_ROUTE_DENY;
		snprintf(ret->text, sizeof(ret->text),
			 "the request is too long to show the developer in full (%zu bytes, at most %zu)", raw,
			 sizeof(ret->text) - 1);
		return 0;
	}
	lua_settop(L, 1);
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
	lua_call(L, 1, 2);
	size_t len = 0;
	const char *action = lua_tostring(L, -2);
	const char *text = lua_tolstring(L, -1, &len);
	enum lz_hc_route_action act = LZ_HC_ROUTE_DENY;
	if (action != NULL && strcmp(action, "auto") == 0)
		act = LZ_HC_ROUTE_AUTO;
	else if (action != NULL && strcmp(action, "prompt") == 0 && text != NULL && text[0] != '\0' &&
		 strlen(text) == len)
		act = LZ_HC_ROUTE_PROMPT; /* never a prompt that shows nothing, or less than it says */
	/* A prompt is shown whole or not at all: a cut one would hide
	 * arguments that still run. */
	if (snprintf(ret->text, sizeof(ret->text), "%s", text ? text : "denied") >= (int)sizeof(ret->text) &&
	    act == LZ_HC_ROUTE_PROMPT) {
		act = LZ_HC_ROUTE_DENY;
		snprintf(ret->text, sizeof(ret->text),
			 "the request is too long to show the developer in full (%zu bytes of prompt, at most %zu)",
			 strlen(text), sizeof(ret->text) - 1);
	}
	ret->action = act;
	return 0;
}

/* The serve loop's router: the Lua route function (stack index 2 of the
 * serve call) through route_call, protected. An error in it denies. */
static void route_in_lua(void *ctx, const struct lz_hc_route_query *q, struct lz_hc_route *ret)
{
	lua_State *L = ctx;
	int top = lua_gettop(L);
	ret->action = LZ_HC_ROUTE_DENY;
	lua_pushcfunction(L, route_call);
	lua_pushvalue(L, 2);
	lua_pushlightuserdata(L, (void *)q);
	lua_pushlightuserdata(L, ret);
	if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
		ret->action = LZ_HC_ROUTE_DENY;
		snprintf(ret->text, sizeof(ret->text), "the coordinator could not route the request");
		fprintf(stderr, "escalation: route failed: %s\n",
			lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(not a string)");
	}
	lua_settop(L, top);
}

static int session_serve(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1); /* raises inside a serve: no nested one */
	luaL_checktype(L, 2, LUA_TFUNCTION);
	lua_settop(L, 2);
	struct lz_err err = { 0, "" };
	/* route runs Lua in the middle of the serve loop: meanwhile the hc
	 * can be neither closed nor used (nor served again). */
	lz_l_hc_busy(L, 1, 1, true);
	int r = lz_hc_serve(hc, route_in_lua, L, &err);
	lz_l_hc_busy(L, 1, -1, true);
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
	lua_Integer argc = lz_l_list_len(L, 1, "the arguments");
	luaL_argcheck(L, argc >= 1 && argc < LZ_SESSION_MAX_ARGV, 1, "needs 1 to 4095 arguments");
	char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(argc + 2), 0);
	argv[0] = "lazaret";
	lz_l_list_strings(L, 1, argc, "argument %d", (const char **)argv + 1);
	argv[argc + 1] = NULL;
	lua_pushliteral(L, "terminal");
	lua_rawget(L, 2);
	bool terminal = lua_toboolean(L, -1);
	lua_pushliteral(L, "timeout_ms");
	lua_rawget(L, 2);
	lua_Integer timeout = luaL_optinteger(L, -1, 60000);
	lua_pushliteral(L, "max_output");
	lua_rawget(L, 2);
	lua_Integer max = luaL_optinteger(L, -1, 65536);
	lua_pop(L, 3);
	luaL_argcheck(L, timeout > 0 && timeout <= 3600000, 2, "timeout_ms must be 1 to 3600000");
	luaL_argcheck(L, max >= 0 && max <= LZ_CAPTURE_MAX_OUTPUT, 2, "max_output must be 0 to 1 MiB");
	struct lz_capture_request req = { .path = "/proc/self/exe", .argv = argv, .envp = environ,
					  .terminal = terminal, .timeout_ms = (int)timeout,
					  .max_output = (size_t)max };
	struct lz_capture_result res;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns res.output while it is pushed */
	int r = lz_capture_run(&req, &res, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	box->p = res.output;
	box->release = lz_l_box_free;
	lua_createtable(L, 0, 4);
	lua_pushlstring(L, res.output, res.len);
	lz_l_box_release(box);
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
