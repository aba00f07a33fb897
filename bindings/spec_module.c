/* Test-only Lua module for busted specs: require("lazaret_spec") preloads
 * the same binding modules the executable preloads. Never installed. */
#include <lauxlib.h>
#include <lua.h>

#include "modules.h"

int luaopen_lazaret_spec(lua_State *L);

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
	lua_pushboolean(L, 1);
	return 1;
}
