/* Sealing of the Lua state that runs trusted code (issue 2, docs/
 * architecture.md): only preloaded modules, no code from LUA_PATH/LUA_CPATH,
 * the working directory or any writable path, and no library function that
 * gives ambient authority (shell, files by name, environment, loading,
 * function bytecode). load stays, for source text only: a binary chunk is
 * bytecode, which the Lua VM does not verify (any string's bytes could be
 * made one). The debug library goes: its registry and metatable access
 * would undo __metatable = false and the handles' uservalue links. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "host_seal.h"
#include "lua_bundle.h"
#include "modules.h"

static const luaL_Reg binding_modules[] = {
	LZ_BINDING_MODULES
	{ NULL, NULL },
};

static int load_bundled(lua_State *L)
{
	const struct lz_lua_module *m = lua_touserdata(L, lua_upvalueindex(1));
	if (luaL_loadbufferx(L, m->source, m->len, m->chunk, "t") != LUA_OK)
		return lua_error(L);
	lua_pushvalue(L, 1); /* module name, as require passes it */
	lua_call(L, 1, 1);
	return 1;
}

/* load(chunk [, chunkname [, mode [, env]]]) with mode forced to "t":
 * the original load (upvalue 1) refuses a binary chunk then ("attempt to
 * load a binary chunk"), whatever mode the caller asked for. */
static int load_text(lua_State *L)
{
	int n = lua_gettop(L);
	if (n < 3)
		lua_settop(L, n = 3); /* nil chunkname is the default; no env stays none */
	lua_pushliteral(L, "t");
	lua_replace(L, 3);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, n, LUA_MULTRET);
	return lua_gettop(L);
}

/* Removes t[name] for each name from the table on top of the stack. */
static void strip(lua_State *L, const char *const *names)
{
	for (; *names; names++) {
		lua_pushnil(L);
		lua_setfield(L, -2, *names);
	}
}

void lz_host_seal(lua_State *L)
{
	static const char *const base[] = { "dofile", "loadfile", NULL };
	static const char *const os[] = { "execute", "exit", "getenv", "remove", "rename",
					  "tmpname", "setlocale", NULL };
	static const char *const io[] = { "popen", "open", "lines", "input", "output",
					  "read", "tmpfile", "close", NULL };
	static const char *const pkg[] = { "loadlib", "searchpath", NULL };
	/* Bytecode of a function: nothing needs it, and it is reachable from
	 * any string ("").dump, including in a user file's environment. */
	static const char *const str[] = { "dump", NULL };

	lua_pushglobaltable(L);
	strip(L, base);
	lua_getfield(L, -1, "load");
	lua_pushcclosure(L, load_text, 1);
	lua_setfield(L, -2, "load");
	lua_pushnil(L);
	lua_setfield(L, -2, "debug");
	lua_pop(L, 1);
	lua_getglobal(L, "os");
	strip(L, os);
	lua_pop(L, 1);
	lua_getglobal(L, "io");
	strip(L, io);
	lua_pop(L, 1);
	lua_getglobal(L, "string");
	strip(L, str);
	lua_pop(L, 1);

	lua_getglobal(L, "package");
	strip(L, pkg);
	lua_getfield(L, -1, "loaded");
	lua_pushnil(L);
	lua_setfield(L, -2, "debug"); /* require("debug") finds nothing either */
	lua_pop(L, 1);
	lua_pushliteral(L, "");
	lua_setfield(L, -2, "path");
	lua_pushliteral(L, "");
	lua_setfield(L, -2, "cpath");
	/* Keep only the preload searcher (searchers[1]). */
	lua_getfield(L, -1, "searchers");
	for (lua_Integer i = luaL_len(L, -1); i > 1; i--) {
		lua_pushnil(L);
		lua_seti(L, -2, i);
	}
	lua_pop(L, 1);

	lua_getfield(L, -1, "preload");
	for (const luaL_Reg *r = binding_modules; r->name; r++) {
		lua_pushcfunction(L, r->func);
		lua_setfield(L, -2, r->name);
	}
	for (const struct lz_lua_module *m = lz_lua_modules; m->name; m++) {
		lua_pushlightuserdata(L, (void *)m);
		lua_pushcclosure(L, load_bundled, 1);
		lua_setfield(L, -2, m->name);
	}
	lua_pop(L, 2);
}

