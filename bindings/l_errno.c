/* lazaret.core.errno: errno names for Lua, so Lua compares names, never
 * numbers (STYLE.md "Bindings"). Shared by every binding that returns
 * nil, msg, errno.
 *
 *   errno.EBUSY, errno.ENOENT, ...   integers
 *   errno.EBUSYY                     raises: an unknown name is a mistake,
 *                                    not nil that compares unequal
 *   errno.name(n)   [-1, +1, v]      "EBUSY", or nil for a number not listed
 * The table is read-only (assignment raises); pairs() lists the names.
 */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>

#include "l_util.h"
#include "modules.h"

#define E(x) { #x, x }
static const struct {
	const char *name;
	int value;
} errnos[] = {
	E(EPERM),     E(ENOENT),    E(ESRCH),	    E(EINTR),	   E(EIO),	   E(ENXIO),
	E(E2BIG),     E(EBADF),	    E(ECHILD),	    E(EAGAIN),	   E(ENOMEM),	   E(EACCES),
	E(EBUSY),     E(EEXIST),    E(EXDEV),	    E(ENODEV),	   E(ENOTDIR),	   E(EISDIR),
	E(EINVAL),    E(ENFILE),    E(EMFILE),	    E(ETXTBSY),	   E(EFBIG),	   E(ENOSPC),
	E(EROFS),     E(EMLINK),    E(EPIPE),	    E(ERANGE),	   E(ENAMETOOLONG), E(ENOSYS),
	E(ELOOP),     E(ENODATA),   E(EPROTO),	    E(EBADMSG),	   E(EOVERFLOW),   E(EUSERS),
	E(ENOTSOCK),  E(EOPNOTSUPP), E(ECONNREFUSED), E(ECONNRESET), E(ENOTCONN),  E(ETIMEDOUT),
	E(ESTALE),    E(EDQUOT),    E(ECANCELED),   E(EHOSTUNREACH), E(ENETUNREACH),
};
#undef E

static int errno_name(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].value == n) {
			lua_pushstring(L, errnos[i].name);
			return 1;
		}
	lua_pushnil(L);
	return 1;
}

/* The names live in a hidden table (upvalue 1); the module is a read-only
 * proxy over it, so no Lua code can renumber EBUSY for everyone else. */
static int errno_index(lua_State *L)
{
	lua_pushvalue(L, 2);
	if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL)
		return 1;
	return luaL_error(L, "lazaret.core.errno has no '%s'", luaL_tolstring(L, 2, NULL));
}

static int errno_readonly(lua_State *L)
{
	return luaL_error(L, "lazaret.core.errno is read-only (assigning '%s')", luaL_tolstring(L, 2, NULL));
}

static int errno_next(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 2);
	if (lua_next(L, 1))
		return 2;
	lua_pushnil(L);
	return 1;
}

static int errno_pairs(lua_State *L)
{
	lua_pushcfunction(L, errno_next);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_pushnil(L);
	return 3;
}

int luaopen_lazaret_errno(lua_State *L)
{
	lua_newuserdatauv(L, 0, 0); /* the proxy: a userdata, so not even rawset reaches it */
	lua_createtable(L, 0, (int)(sizeof(errnos) / sizeof(errnos[0])) + 1);
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
		lua_pushinteger(L, errnos[i].value);
		lua_setfield(L, -2, errnos[i].name);
	}
	lua_pushcfunction(L, errno_name);
	lua_setfield(L, -2, "name");
	int names = lua_gettop(L);
	lua_createtable(L, 0, 4);
	lua_pushvalue(L, names);
	lua_pushcclosure(L, errno_index, 1);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, errno_readonly);
	lua_setfield(L, -2, "__newindex");
	lua_pushvalue(L, names);
	lua_pushcclosure(L, errno_pairs, 1);
	lua_setfield(L, -2, "__pairs");
	lua_pushboolean(L, 0);
	lua_setfield(L, -2, "__metatable");
	lua_setmetatable(L, -3);
	lua_pop(L, 1); /* the names: reachable only through the closures */
	return 1;
}

void lz_l_push_errno(lua_State *L)
{
	luaL_requiref(L, "lazaret.core.errno", luaopen_lazaret_errno, 0);
}
