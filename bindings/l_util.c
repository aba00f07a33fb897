#include "l_util.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
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

void lz_l_check_plain(lua_State *L, int idx, const char *what)
{
	if (lua_type(L, idx) != LUA_TTABLE)
		luaL_error(L, "%s must be a table", what);
	if (lua_getmetatable(L, idx))
		luaL_error(L, "%s must be a plain table (it has a metatable)", what);
}

void lz_l_check_options(lua_State *L, int idx, const char *const *names)
{
	luaL_checktype(L, idx, LUA_TTABLE);
	lz_l_check_plain(L, idx, "the options");
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

const char *lz_l_opt_lstring(lua_State *L, int idx, const char *key, size_t *len)
{
	idx = lua_absindex(L, idx);
	lua_pushstring(L, key);
	int t = lua_rawget(L, idx);
	if (t == LUA_TNIL) {
		*len = 0;
		return NULL;
	}
	if (t != LUA_TSTRING)
		luaL_error(L, "option '%s' must be a string", key);
	return lua_tolstring(L, -1, len); /* left on the stack: kept alive */
}

const char *lz_l_opt_string(lua_State *L, int idx, const char *key)
{
	size_t len;
	const char *s = lz_l_opt_lstring(L, idx, key, &len);
	if (s && strlen(s) != len)
		luaL_error(L, "option '%s' contains a NUL byte", key);
	return s;
}

const char *lz_l_check_cstring(lua_State *L, int idx)
{
	size_t len;
	const char *s = luaL_checklstring(L, idx, &len);
	if (strlen(s) != len)
		luaL_argerror(L, idx, "contains a NUL byte");
	return s;
}

lua_Integer lz_l_list_len(lua_State *L, int idx, const char *what)
{
	lz_l_check_plain(L, idx, what);
	return (lua_Integer)lua_rawlen(L, idx);
}

void lz_l_list_strings(lua_State *L, int idx, lua_Integer n, const char *elem, const char **v)
{
	idx = lua_absindex(L, idx);
	lua_createtable(L, n > 0 && n < INT_MAX ? (int)n : 0, 0);
	for (lua_Integer i = 1; i <= n; i++) {
		size_t len;
		const char *s = lua_rawgeti(L, idx, i) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
		if (s == NULL || strlen(s) != len) {
			const char *name = lua_pushfstring(L, elem, (int)i);
			luaL_error(L, "%s must be a string%s", name, s ? " without NUL bytes" : "");
		}
		lua_rawseti(L, -2, i); /* the copy holds it */
		v[i - 1] = s;
	}
}

#define BOX_MT "lazaret.box"

void lz_l_box_release(struct lz_l_box *b)
{
	void *p = b->p;
	b->p = NULL;
	if (p && b->release)
		b->release(p, b->n);
}

void lz_l_box_free(void *p, size_t n)
{
	(void)n;
	free(p);
}

static int box_close(lua_State *L)
{
	lz_l_box_release(luaL_checkudata(L, 1, BOX_MT));
	return 0;
}

struct lz_l_box *lz_l_box_new(lua_State *L)
{
	struct lz_l_box *b = lua_newuserdatauv(L, sizeof(*b), 0);
	*b = (struct lz_l_box){ NULL, 0, NULL };
	if (luaL_newmetatable(L, BOX_MT)) {
		lua_pushcfunction(L, box_close);
		lua_setfield(L, -2, "__gc");
		lua_pushcfunction(L, box_close);
		lua_setfield(L, -2, "__close");
		lua_pushboolean(L, 0);
		lua_setfield(L, -2, "__metatable");
	}
	lua_setmetatable(L, -2);
	return b;
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
