/* Shared conventions of the binding modules (docs/architecture.md):
 * environment failures return nil, message, errno; misuse raises. */
#ifndef LZ_BINDINGS_UTIL_H
#define LZ_BINDINGS_UTIL_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/* [-0, +3, -] pushes nil, err->msg (or strerror), errno; returns 3. */
int lz_l_fail(lua_State *L, int ret, const struct lz_err *err);

/* Tables Lua hands to C (options, lists of strings) must be plain: no
 * metatable, read raw, so no Lua code runs while C reads them. A string C
 * keeps is kept on the stack (or in a copy only C holds) for as long as C
 * uses it: Lua code that runs meanwhile (a callback, a finalizer) could
 * otherwise drop the last reference to it. */

/* [-0, +0, e] raises unless the value at idx is a table without a
 * metatable; what names it in the message. */
void lz_l_check_plain(lua_State *L, int idx, const char *what);

/* [-0, +0, e] raises unless the options table at idx is plain and every key
 * is one of the NULL-terminated names. */
void lz_l_check_options(lua_State *L, int idx, const char *const *names);

/* [-0, +1, e] optional string field of the (checked) options table, read
 * raw and left on the stack (nil when absent) so it stays alive; NULL when
 * absent. A string with a NUL byte raises. lz_l_opt_lstring also gives
 * the length and accepts NUL bytes. */
const char *lz_l_opt_string(lua_State *L, int idx, const char *key);
const char *lz_l_opt_lstring(lua_State *L, int idx, const char *key, size_t *len);

/* [-0, +0, e] the string argument at idx, which may not hold a NUL byte: C
 * would read a shorter string than Lua passed. */
const char *lz_l_check_cstring(lua_State *L, int idx);

/* [-0, +0, e] the raw length of the list at idx after lz_l_check_plain. */
lua_Integer lz_l_list_len(lua_State *L, int idx, const char *what);

/* [-0, +1, e] elements 1..n of the (checked) list at idx, each a string
 * without NUL bytes (else raises "<elem> must be a string", elem a format
 * with one %d such as "argv[%d]"), into v[0..n-1]. Pushes a copy of the
 * list that only C holds: those strings stay alive while it is on the
 * stack, whatever Lua runs meanwhile. */
void lz_l_list_strings(lua_State *L, int idx, lua_Integer n, const char *elem, const char **v);

/* Owns a C resource while Lua code that may raise (a memory error, while
 * results are pushed) runs: pushed before the resource exists, then given
 * it; released by lz_l_box_release, __gc or __close, whichever comes
 * first, once. */
struct lz_l_box {
	void *p;
	size_t n;
	void (*release)(void *p, size_t n); /* called with p, n when p != NULL */
};
/* [-0, +1, m] an empty box. */
struct lz_l_box *lz_l_box_new(lua_State *L);
/* [-0, +0, -] releases what the box holds, now. */
void lz_l_box_release(struct lz_l_box *b);
/* A release for a single malloc'd block. */
void lz_l_box_free(void *p, size_t n);

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
/* [-0, +0, e] counts a C call that uses the hc at idx across Lua code (delta
 * +1 before, -1 after: store:batch's fn, session.serve's route): hc:close()
 * raises meanwhile, so the hc is not freed under C. exclusive (serve):
 * every other use of the hc, and of its views, raises as well. */
void lz_l_hc_busy(lua_State *L, int idx, int delta, bool exclusive);
void lz_l_new_view(lua_State *L, int hc_idx, const char *mt);
struct lz_hc *lz_l_view_hc(lua_State *L, int idx, const char *mt);

/* The Runtime Supervisor's body (l_supervisor.c): the broker's fn target
 * that runs lua/lazaret/runtime/supervisor.lua over the plan. */
int lz_l_supervisor_main(void *plan, struct lz_err *err);

#endif
