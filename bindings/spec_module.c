/* Test-only Lua module for busted specs; never installed.
 *
 *   require("lazaret_spec")        preloads the binding modules (as the
 *                                  executable does) into the busted state
 *   lazaret_spec.run_sealed(code)  [-0, +2, -] -> ok, result|message
 *       runs code in a fresh Lua state sealed exactly like the executable's
 *       (host_seal.c) and returns its first result as a string. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "host_seal.h"
#include "modules.h"

int luaopen_lazaret_spec(lua_State *L);

static int run_sealed(lua_State *L)
{
	size_t len;
	const char *code = luaL_checklstring(L, 1, &len);
	lua_State *S = luaL_newstate();
	if (S == NULL)
		return luaL_error(L, "out of memory");
	luaL_openlibs(S);
	lz_host_seal(S);
	int ok = luaL_loadbufferx(S, code, len, "=sealed", "t") == LUA_OK &&
		 lua_pcall(S, 0, 1, 0) == LUA_OK;
	lua_pushboolean(L, ok);
	const char *result = luaL_tolstring(S, -1, &len);
	lua_pushlstring(L, result, len);
	lua_close(S);
	return 2;
}

int luaopen_lazaret_spec(lua_State *L)
{
	static const luaL_Reg modules[] = { LZ_BINDING_MODULES{ NULL, NULL } };
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "preload");
	for (const luaL_Reg *r = modules; r->name; r++) {
		lua_pushcfunction(L, r->func);
		lua_setfield(L, -2, r->name);
	}
	lua_pop(L, 2);
	lua_newtable(L);
	lua_pushcfunction(L, run_sealed);
	lua_setfield(L, -2, "run_sealed");
	return 1;
}
