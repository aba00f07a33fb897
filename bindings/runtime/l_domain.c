/* lazaret.core.domain: the Domain runtime (issue 4) for Lua orchestration.
 *
 *   domain.run(cfg, {config=, argv={...}, terminal=})  [-0, +1|3, e]
 *       -> exit status | nil, msg, errno
 *       The Client CLI side: reach (or start) the Host Coordinator and run
 *       argv there (client.h).
 *   domain.coordinator(cfg)                    [-0, +1|3, e]
 *       -> hc | nil, msg, errno: Domain flock, Domain Store, new generation
 *   hc:acquire_lower()  hc:start()  hc:publish()  hc:serve()
 *   hc:stop()  hc:release_lower()              [-0, +1|3, e]
 *       -> true | nil, msg, errno (coordinator.h: each step keeps its checks)
 *   hc:generation()                            [-0, +1, e] -> integer
 *   hc:close(ok)                               [-0, +0, -] idempotent; also
 *       __gc and __close (which record a failed generation)
 *   domain.notify(line)                        [-0, +0, e]
 *       The HC's startup report to the CLI that started it: writes line to
 *       standard output, then points standard output at /dev/null.
 *   domain.detach()                            [-0, +1, -] -> true
 *   domain.interactive()                       [-0, +1, -] -> boolean
 *       standard input and output are both terminals
 *       The HC's own session, so it outlives the terminal.
 */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "session/client.h"
#include "runtime/coordinator.h"
#include "l_util.h"
#include "modules.h"

#define HC_MT "lazaret.hc"

struct hc_ud {
	lz_hc *hc; /* NULL when closed */
};

static lz_hc *check_hc(lua_State *L)
{
	struct hc_ud *ud = luaL_checkudata(L, 1, HC_MT);
	if (ud->hc == NULL)
		luaL_error(L, "attempt to use a closed coordinator");
	return ud->hc;
}

static int hc_close(lua_State *L)
{
	struct hc_ud *ud = luaL_checkudata(L, 1, HC_MT);
	bool ok = lua_toboolean(L, 2);
	lz_hc_close(ud->hc, ok);
	ud->hc = NULL;
	return 0;
}

static int hc_gc(lua_State *L)
{
	struct hc_ud *ud = luaL_checkudata(L, 1, HC_MT);
	lz_hc_close(ud->hc, false);
	ud->hc = NULL;
	return 0;
}

static int hc_tostring(lua_State *L)
{
	struct hc_ud *ud = luaL_checkudata(L, 1, HC_MT);
	if (ud->hc == NULL)
		lua_pushliteral(L, "lazaret.hc (closed)");
	else
		lua_pushfstring(L, "lazaret.hc (generation %d)", (int)lz_hc_generation(ud->hc));
	return 1;
}

#define STEP(name, fn)                                   \
	static int name(lua_State *L)                    \
	{                                                \
		lz_hc *hc = check_hc(L);                 \
		struct lz_err err = { 0, "" };           \
		int r = fn(hc, &err);                    \
		if (r < 0)                               \
			return lz_l_fail(L, r, &err);    \
		lua_pushboolean(L, 1);                   \
		return 1;                                \
	}

STEP(hc_acquire_lower, lz_hc_acquire_lower)
STEP(hc_start, lz_hc_start)
STEP(hc_publish, lz_hc_publish)
STEP(hc_serve, lz_hc_serve)
STEP(hc_stop, lz_hc_stop)
STEP(hc_release_lower, lz_hc_release_lower)

static int hc_generation(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)lz_hc_generation(check_hc(L)));
	return 1;
}

static int domain_coordinator(lua_State *L)
{
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	struct hc_ud *ud = lua_newuserdatauv(L, sizeof(*ud), 1);
	ud->hc = NULL;
	luaL_setmetatable(L, HC_MT);
	/* The configuration must outlive the coordinator. */
	lua_pushvalue(L, 1);
	lua_setiuservalue(L, -2, 1);
	struct lz_err err = { 0, "" };
	int r = lz_hc_open(cfg, &ud->hc, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	return 1;
}

static int domain_run(lua_State *L)
{
	static const char *const keys[] = { "config", "argv", "terminal", NULL };
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	lz_l_check_options(L, 2, keys);
	const char *config_arg = lz_l_opt_string(L, 2, "config");
	if (lua_getfield(L, 2, "argv") != LUA_TTABLE)
		return luaL_error(L, "option 'argv' must be a table");
	lua_Integer argc = luaL_len(L, -1);
	if (argc < 1 || argc > 4096)
		return luaL_error(L, "option 'argv' needs 1 to 4096 strings");
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

static int domain_notify(lua_State *L)
{
	size_t len;
	const char *line = luaL_checklstring(L, 1, &len);
	(void)!write(STDOUT_FILENO, line, len);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDOUT_FILENO);
		close(null);
	}
	return 0;
}

static int domain_interactive(lua_State *L)
{
	lua_pushboolean(L, isatty(STDIN_FILENO) && isatty(STDOUT_FILENO));
	return 1;
}

static int domain_detach(lua_State *L)
{
	(void)setsid();
	lua_pushboolean(L, 1);
	return 1;
}

static const luaL_Reg functions[] = {
	{ "run", domain_run },
	{ "coordinator", domain_coordinator },
	{ "notify", domain_notify },
	{ "detach", domain_detach },
	{ "interactive", domain_interactive },
	{ NULL, NULL },
};

static const luaL_Reg methods[] = {
	{ "acquire_lower", hc_acquire_lower },
	{ "start", hc_start },
	{ "publish", hc_publish },
	{ "serve", hc_serve },
	{ "stop", hc_stop },
	{ "release_lower", hc_release_lower },
	{ "generation", hc_generation },
	{ "close", hc_close },
	{ NULL, NULL },
};

static const luaL_Reg metamethods[] = {
	{ "__gc", hc_gc },
	{ "__close", hc_gc },
	{ "__tostring", hc_tostring },
	{ NULL, NULL },
};

int luaopen_lazaret_domain(lua_State *L)
{
	lz_l_new_type(L, HC_MT, methods, metamethods);
	luaL_newlib(L, functions);
	return 1;
}
