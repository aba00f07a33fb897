/* lazaret.core.scratch: the qualification suite's scratch workspace
 * (core/fs/scratch.h). Translation only.
 *
 *   scratch.open(name)        [-1, +1|3, e] -> ws | nil, msg, errno
 *       $XDG_CACHE_HOME/lazaret/<name> (or ~/.cache/lazaret/<name>),
 *       0700, emptied. name is one component. Names and rel below
 *       are strings without NUL bytes (else raises).
 *   ws:path()                 [-1, +1, e] -> its canonical path (a label)
 *   ws:write(rel, data)       [-3, +1|3, e] -> true | nil, msg, errno
 *   ws:mkdir(rel)             [-2, +1|3, e] -> true | nil, msg, errno
 *   ws:read(rel [, max])      [-3, +1|3, e] -> string | nil, msg, errno
 *       a regular file, no symlink anywhere, at most max (default and
 *       limit 1 MiB) bytes
 *   ws:close()                [-1, +0, -] idempotent; also __gc, __close
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>

#include "fs/scratch.h"
#include "l_util.h"
#include "modules.h"

#define SCRATCH_MT "lazaret.scratch"

static struct lz_path *check_ws(lua_State *L)
{
	struct lz_path *p = luaL_checkudata(L, 1, SCRATCH_MT);
	if (p->fd < 0)
		luaL_error(L, "attempt to use a closed scratch workspace");
	return p;
}

static int done(lua_State *L, int r, const struct lz_err *err)
{
	if (r < 0)
		return lz_l_fail(L, r, err);
	lua_pushboolean(L, 1);
	return 1;
}

static int scratch_open(lua_State *L)
{
	const char *name = lz_l_check_cstring(L, 1);
	/* Created closed, so a failure below leaks nothing. */
	struct lz_path *p = lua_newuserdatauv(L, sizeof(*p), 0);
	*p = (struct lz_path){ .fd = -1 };
	luaL_setmetatable(L, SCRATCH_MT);
	struct lz_err err = { 0, "" };
	int r = lz_scratch_open(name, p, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	return 1;
}

static int ws_path(lua_State *L)
{
	lua_pushstring(L, check_ws(L)->canonical);
	return 1;
}

static int ws_write(lua_State *L)
{
	struct lz_path *p = check_ws(L);
	const char *rel = lz_l_check_cstring(L, 2);
	size_t len;
	const char *data = luaL_checklstring(L, 3, &len);
	struct lz_err err = { 0, "" };
	return done(L, lz_scratch_write(p, rel, data, len, &err), &err);
}

static int ws_mkdir(lua_State *L)
{
	struct lz_path *p = check_ws(L);
	struct lz_err err = { 0, "" };
	return done(L, lz_scratch_mkdir(p, lz_l_check_cstring(L, 2), &err), &err);
}

static int ws_read(lua_State *L)
{
	struct lz_path *p = check_ws(L);
	const char *rel = lz_l_check_cstring(L, 2);
	lua_Integer max = luaL_optinteger(L, 3, LZ_SCRATCH_READ_MAX);
	luaL_argcheck(L, max >= 0 && max <= LZ_SCRATCH_READ_MAX, 3, "max must be 0 to 1 MiB");
	char *buf = NULL;
	size_t len = 0;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns buf while it is pushed */
	int r = lz_scratch_read(p, rel, (size_t)max, &buf, &len, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ buf, len, lz_l_box_free };
	lua_pushlstring(L, buf, len);
	lz_l_box_release(box);
	return 1;
}

static int ws_close(lua_State *L)
{
	lz_path_release(luaL_checkudata(L, 1, SCRATCH_MT));
	return 0;
}

static int ws_tostring(lua_State *L)
{
	struct lz_path *p = luaL_checkudata(L, 1, SCRATCH_MT);
	if (p->fd < 0)
		lua_pushliteral(L, "lazaret.scratch (closed)");
	else
		lua_pushfstring(L, "lazaret.scratch (%s)", p->canonical);
	return 1;
}

int luaopen_lazaret_scratch(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "open", scratch_open },
		{ NULL, NULL },
	};
	static const luaL_Reg methods[] = {
		{ "path", ws_path },
		{ "write", ws_write },
		{ "mkdir", ws_mkdir },
		{ "read", ws_read },
		{ "close", ws_close },
		{ NULL, NULL },
	};
	static const luaL_Reg metamethods[] = {
		{ "__gc", ws_close },
		{ "__close", ws_close },
		{ "__tostring", ws_tostring },
		{ NULL, NULL },
	};
	lz_l_new_type(L, SCRATCH_MT, methods, metamethods);
	luaL_newlib(L, functions);
	return 1;
}
