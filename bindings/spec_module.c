/* Test-only Lua module for busted specs; never installed.
 *
 *   require("lazaret_spec")        preloads the binding modules (as the
 *                                  executable does) into the busted state
 *   lazaret_spec.run_sealed(code)  [-0, +2, -] -> ok, result|message
 *       runs code in a fresh Lua state sealed exactly like the executable's
 *       (host_seal.c) and returns its first result as a string.
 *   lazaret_spec.with_alloc_limit(k, f, ...)  [-(2+n), +(1+r), -]
 *       -> pcall's results: calls f(...) with every Lua allocation after
 *       the first k refused, as when memory runs out (a memory error where
 *       a binding allocates), then restores the allocator.
 *   lazaret_spec.as_serving(hc, f) [-2, +(1+r), e] -> pcall's results:
 *       calls f() with the coordinator hc held exactly as session.serve
 *       holds it while its route runs (lz_l_hc_busy, exclusive), without
 *       the published generation and the request a real serve needs.
 *   lazaret_spec.heap_in_use()     [-0, +1, -] -> bytes glibc's malloc
 *       holds now (mallinfo2), to see C memory a binding leaked; under a
 *       sanitizer, whose allocator replaces it, the count does not move. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <malloc.h>

#include "host_seal.h"
#include "l_util.h"
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

struct alloc_limit {
	lua_Alloc f;
	void *ud;
	lua_Integer left; /* allocations still allowed */
};

/* Frees and shrinks always pass; a new block or a larger one only while
 * the budget lasts. */
static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct alloc_limit *a = ud;
	if (nsize > 0 && (ptr == NULL || nsize > osize)) {
		if (a->left <= 0)
			return NULL;
		a->left--;
	}
	return a->f(a->ud, ptr, osize, nsize);
}

static int with_alloc_limit(lua_State *L)
{
	struct alloc_limit a;
	a.left = luaL_checkinteger(L, 1);
	luaL_checktype(L, 2, LUA_TFUNCTION);
	lua_remove(L, 1);
	a.f = lua_getallocf(L, &a.ud);
	lua_setallocf(L, limited_alloc, &a);
	int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
	lua_setallocf(L, a.f, a.ud);
	luaL_checkstack(L, 1, NULL);
	lua_pushboolean(L, status == LUA_OK);
	lua_insert(L, 1);
	return lua_gettop(L);
}

static int as_serving(lua_State *L)
{
	(void)lz_l_check_hc(L, 1);
	luaL_checktype(L, 2, LUA_TFUNCTION);
	lua_settop(L, 2);
	lz_l_hc_busy(L, 1, 1, true);
	lua_pushvalue(L, 2);
	int ok = lua_pcall(L, 0, LUA_MULTRET, 0) == LUA_OK;
	lz_l_hc_busy(L, 1, -1, true);
	lua_pushboolean(L, ok);
	lua_insert(L, 3);
	return lua_gettop(L) - 2;
}

static int heap_in_use(lua_State *L)
{
	struct mallinfo2 mi = mallinfo2();
	lua_pushinteger(L, (lua_Integer)(mi.uordblks + mi.hblkhd));
	return 1;
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
	lua_pushcfunction(L, with_alloc_limit);
	lua_setfield(L, -2, "with_alloc_limit");
	lua_pushcfunction(L, as_serving);
	lua_setfield(L, -2, "as_serving");
	lua_pushcfunction(L, heap_in_use);
	lua_setfield(L, -2, "heap_in_use");
	return 1;
}
