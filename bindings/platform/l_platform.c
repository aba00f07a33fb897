/* lazaret.core.platform: the platform floor and build facts.
 *
 *   platform.check()   [-0, +1|3, -] -> true | nil, msg, errno
 *       x86-64 Linux >= 6.9 (spec 3.3), checked before anything is created.
 *   platform.stderr_is_tty()  [-0, +1, -] -> boolean (progress display)
 *   platform.monotonic_ms()   [-0, +1, -] -> integer, CLOCK_MONOTONIC in ms
 *       (durations: the sealed host has no wall clock finer than os.time)
 *   platform.version   string, the Lazaret version
 */
#include <lauxlib.h>
#include <lua.h>
#include <unistd.h>

#include "l_util.h"
#include "modules.h"
#include "platform/platform.h"
#include "proc/spawn.h"

static int platform_check(lua_State *L)
{
	struct lz_err err = { 0, "" };
	int r = lz_platform_check(&err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int stderr_is_tty(lua_State *L)
{
	lua_pushboolean(L, isatty(STDERR_FILENO));
	return 1;
}

static int monotonic_ms(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)lz_now_ms());
	return 1;
}

static const luaL_Reg functions[] = {
	{ "check", platform_check },
	{ "monotonic_ms", monotonic_ms },
	{ "stderr_is_tty", stderr_is_tty },
	{ NULL, NULL },
};

int luaopen_lazaret_platform(lua_State *L)
{
	luaL_newlib(L, functions);
	lua_pushliteral(L, LZ_VERSION);
	lua_setfield(L, -2, "version");
	return 1;
}
