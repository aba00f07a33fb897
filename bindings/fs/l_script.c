/* lazaret.core.script: compiles a user's Lua file (a `lazaret diag
 * --report` report, a `lazaret qualify` suite) into a function whose only
 * environment is the table the caller built (lua/lazaret/userenv.lua).
 *
 * The file is read by core/fs/userfile.h (no symbolic link as its last
 * component, a regular file, at most script.MAX bytes) and compiled as
 * text only: a precompiled (binary) chunk is refused before the loader sees
 * it, and the loader runs in mode "t" as well, so bytecode, which the Lua
 * VM does not verify, never runs. The chunk's only upvalue, _ENV, is set to
 * env, so the chunk cannot name the host's global table. A first line
 * starting with '#' (a "#!" line) is skipped as lua(1) does, keeping line
 * numbers. Translation only: what env contains is userenv.lua's policy.
 *
 *   script.load(path, chunkname, env)  [-3, +1|2|3, v]
 *       -> function
 *        | nil, msg, errno  the file cannot be read (msg names the path)
 *        | nil, msg         it is not Lua source text: a syntax error
 *                           ("<file>:<line>: ...") or a precompiled chunk
 *       path: string without NUL; chunkname: string ("@" .. path gives
 *       tracebacks "path:line:"); env: table. Anything else raises.
 *   script.MAX                          integer, the largest file (bytes)
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "fs/userfile.h"
#include "l_util.h"
#include "modules.h"

/* Owns the file's bytes while Lua code that may raise (a memory error)
 * runs: created empty, freed by close or __gc, whichever comes first. */
#define SCRIPT_BUF_MT "lazaret.script.buffer"

struct script_buf {
	char *data;
};

static int buf_close(lua_State *L)
{
	struct script_buf *b = luaL_checkudata(L, 1, SCRIPT_BUF_MT);
	free(b->data);
	b->data = NULL;
	return 0;
}

static int script_load(lua_State *L)
{
	size_t plen;
	luaL_checktype(L, 1, LUA_TSTRING); /* a number is not a path */
	luaL_checktype(L, 2, LUA_TSTRING);
	const char *path = lua_tolstring(L, 1, &plen);
	luaL_argcheck(L, strlen(path) == plen, 1, "path contains a NUL byte");
	const char *chunkname = lua_tostring(L, 2);
	luaL_checktype(L, 3, LUA_TTABLE);
	if (lua_gettop(L) > 3)
		luaL_argerror(L, 4, "no value expected");

	struct script_buf *b = lua_newuserdatauv(L, sizeof(*b), 0); /* idx 4 */
	b->data = NULL;
	luaL_setmetatable(L, SCRIPT_BUF_MT);
	struct lz_err err = { 0, "" };
	size_t len = 0;
	int r = lz_userfile_read(path, LZ_USERFILE_MAX, &b->data, &len, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	if (len > 0 && b->data[0] == LUA_SIGNATURE[0]) {
		lua_pushnil(L);
		lua_pushfstring(L, "'%s' is a precompiled Lua chunk: only Lua source text is loaded",
				path);
		return 2;
	}
	const char *text = b->data;
	if (len > 0 && text[0] == '#') { /* skip a "#!" line, keep its newline */
		const char *nl = memchr(text, '\n', len);
		size_t skip = nl ? (size_t)(nl - text) : len;
		text += skip;
		len -= skip;
	}
	int status = luaL_loadbufferx(L, text, len, chunkname, "t");
	free(b->data); /* now, not at the next collection */
	b->data = NULL;
	if (status == LUA_ERRMEM)
		return lua_error(L);
	if (status != LUA_OK) {
		lua_pushnil(L);
		lua_insert(L, -2);
		return 2;
	}
	lua_pushvalue(L, 3);
	if (lua_setupvalue(L, -2, 1) == NULL) /* a main chunk always has _ENV */
		return luaL_error(L, "script.load: the chunk has no _ENV upvalue");
	return 1;
}

int luaopen_lazaret_script(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "load", script_load },
		{ NULL, NULL },
	};
	static const luaL_Reg buf_meta[] = {
		{ "__gc", buf_close },
		{ "__close", buf_close },
		{ NULL, NULL },
	};
	static const luaL_Reg no_methods[] = { { NULL, NULL } };

	lz_l_new_type(L, SCRIPT_BUF_MT, no_methods, buf_meta);
	luaL_newlib(L, functions);
	lua_pushinteger(L, (lua_Integer)LZ_USERFILE_MAX);
	lua_setfield(L, -2, "MAX");
	return 1;
}
