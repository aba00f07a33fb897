#include "l_util.h"

#include <errno.h>
#include <string.h>

int lz_l_fail(lua_State *L, int ret, const struct lz_err *err)
{
	int code = ret < 0 ? -ret : ret;
	lua_pushnil(L);
	if (err && err->msg[0])
		lua_pushstring(L, err->msg);
	else
		lua_pushstring(L, strerror(code));
	lua_pushinteger(L, code);
	return 3;
}

void lz_l_check_options(lua_State *L, int idx, const char *const *names)
{
	luaL_checktype(L, idx, LUA_TTABLE);
	lua_pushnil(L);
	while (lua_next(L, idx) != 0) {
		lua_pop(L, 1);
		const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
		const char *const *n = names;
		while (key && *n && strcmp(*n, key) != 0)
			n++;
		if (key == NULL || *n == NULL)
			luaL_error(L, "unknown option '%s'", key ? key : luaL_typename(L, -1));
	}
}

const char *lz_l_opt_string(lua_State *L, int idx, const char *key)
{
	const char *s = NULL;
	int t = lua_getfield(L, idx, key);
	if (t == LUA_TSTRING)
		s = lua_tostring(L, -1);
	else if (t != LUA_TNIL)
		luaL_error(L, "option '%s' must be a string", key);
	lua_pop(L, 1);
	return s; /* anchored by the options table */
}

void lz_l_new_type(lua_State *L, const char *name, const luaL_Reg *methods,
		   const luaL_Reg *metamethods)
{
	luaL_newmetatable(L, name);
	luaL_setfuncs(L, metamethods, 0);
	lua_newtable(L); /* luaL_newlib sizes from an array, not a pointer */
	luaL_setfuncs(L, methods, 0);
	lua_setfield(L, -2, "__index");
	lua_pushboolean(L, 0);
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);
}
