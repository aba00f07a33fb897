/* Shared conventions of the binding modules (docs/architecture.md):
 * environment failures return nil, message, errno; misuse raises. */
#ifndef LZ_BINDINGS_UTIL_H
#define LZ_BINDINGS_UTIL_H

#include <lauxlib.h>
#include <lua.h>

#include "util/err.h"

/* [-0, +3, -] pushes nil, err->msg (or strerror), errno; returns 3. */
int lz_l_fail(lua_State *L, int ret, const struct lz_err *err);

/* [-0, +0, e] raises unless every key of the options table at idx is one
 * of the NULL-terminated names. */
void lz_l_check_options(lua_State *L, int idx, const char *const *names);

/* [-0, +0, e] optional string field of the options table; NULL when absent. */
const char *lz_l_opt_string(lua_State *L, int idx, const char *key);

/* [-0, +0, e] registers the metatable of a handle type: metamethods, the
 * methods as __index, and __metatable = false so Lua cannot reach it. */
void lz_l_new_type(lua_State *L, const char *name, const luaL_Reg *methods,
		   const luaL_Reg *metamethods);

/* [-0, +1, e] the lazaret.core.errno table (loaded once, l_errno.c). */
void lz_l_push_errno(lua_State *L);

/* [-0, +0, e] the open lazaret.config handle at idx (l_config.c). */
struct lz_config;
const struct lz_config *lz_l_check_config(lua_State *L, int idx);
/* [-0, +0, e] counts a borrower of the configuration at idx (delta +1 or
 * -1); config:close() raises while one remains. */
void lz_l_config_pin(lua_State *L, int idx, int delta);

/* The Host Coordinator handle (l_coordinator.c) and its views: a view is
 * a userdata of type mt whose only uservalue is the hc handle.
 * lz_l_check_hc [-0, +0, e] raises on a closed or foreign handle;
 * lz_l_new_view [-0, +1, e] pushes a new view of the hc at hc_idx;
 * lz_l_view_hc [-0, +0, e] the open hc behind the view at idx. */
struct lz_hc;
struct lz_hc *lz_l_check_hc(lua_State *L, int idx);
void lz_l_new_view(lua_State *L, int hc_idx, const char *mt);
struct lz_hc *lz_l_view_hc(lua_State *L, int idx, const char *mt);

/* The Runtime Supervisor's body (l_supervisor.c): the broker's fn target
 * that runs lua/lazaret/runtime/supervisor.lua over the plan. */
int lz_l_supervisor_main(void *plan, struct lz_err *err);

#endif
