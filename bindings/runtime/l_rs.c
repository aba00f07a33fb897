/* lazaret.core.rs: the Host Coordinator's channel to its Runtime
 * Supervisor (core/runtime/coordinator.h, rsproto.h), a view of the hc.
 *
 *   rs.of(hc)          [-1, +1, e] -> the RS view of hc
 *   rs:spawn()         [-1, +1|3, e] -> true | nil, msg, errno
 *       The plan and bundle, then the RS through the broker; it runs
 *       lua/lazaret/runtime/supervisor.lua in a sealed Lua state of its own
 *       (l_supervisor.c). The broker stages it in the store before release.
 *   rs:expect(kind)    [-2, +1|3, e] kind: "mounts", "helper-staged",
 *       "staged" or "ready": the next record must be that one; its evidence
 *       is held by the hc. A FAILED record is nil, the RS's reason, EIO.
 *   rs:ack(role)       [-2, +1|3, e] role: "connectivity_helper" or
 *       "attached_runsc"; refused unless the store holds that identity
 *       staged.
 *   rs:steps()         [-1, +1, -] -> what the RS's launch steps took, as
 *       its READY record says ("mount 4.1, start_router 12.0, ..." in ms),
 *       or nil before READY.
 *   rs:stop()          [-1, +1|3, e] STOP, then the exact unmount's proof
 *       or the RS's reaping; no RS: true.
 *   rs:failure()       [-1, +1, -] -> the reason the RS gave when it failed
 *       while serving or stopping, or nil. */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "l_util.h"
#include "modules.h"
#include "runtime/coordinator.h"

#define RS_MT "lazaret.rs"

static int done(lua_State *L, int r, const struct lz_err *err)
{
	if (r < 0)
		return lz_l_fail(L, r, err);
	lua_pushboolean(L, 1);
	return 1;
}

static int rs_spawn(lua_State *L)
{
	lz_hc *hc = lz_l_view_hc(L, 1, RS_MT);
	struct lz_err err = { 0, "" };
	return done(L, lz_hc_rs_spawn(hc, lz_l_supervisor_main, &err), &err);
}

static int rs_expect(lua_State *L)
{
	static const char *const names[] = { "mounts", "helper-staged", "staged", "ready", NULL };
	static const enum lz_rs_msg_type types[] = { LZ_RS_MOUNTS, LZ_RS_HELPER_STAGED, LZ_RS_STAGED, LZ_RS_READY };
	lz_hc *hc = lz_l_view_hc(L, 1, RS_MT);
	int i = luaL_checkoption(L, 2, NULL, names);
	struct lz_err err = { 0, "" };
	return done(L, lz_hc_rs_expect(hc, types[i], &err), &err);
}

static int rs_ack(lua_State *L)
{
	static const char *const names[] = { "connectivity_helper", "attached_runsc", NULL };
	static const enum lz_dstore_role roles[] = { LZ_DSTORE_ROLE_CONNECTIVITY_HELPER,
						     LZ_DSTORE_ROLE_ATTACHED_RUNSC };
	lz_hc *hc = lz_l_view_hc(L, 1, RS_MT);
	int i = luaL_checkoption(L, 2, NULL, names);
	struct lz_err err = { 0, "" };
	return done(L, lz_hc_rs_ack(hc, roles[i], &err), &err);
}

/* The text the hc holds (NULL: none), or nil. */
static int text_or_nil(lua_State *L, const char *(*get)(const lz_hc *))
{
	const char *text = get(lz_l_view_hc(L, 1, RS_MT));
	if (text == NULL)
		lua_pushnil(L);
	else
		lua_pushstring(L, text);
	return 1;
}

static int rs_steps(lua_State *L)
{
	return text_or_nil(L, lz_hc_rs_steps);
}

static int rs_failure(lua_State *L)
{
	return text_or_nil(L, lz_hc_rs_failure);
}

static int rs_stop(lua_State *L)
{
	lz_hc *hc = lz_l_view_hc(L, 1, RS_MT);
	struct lz_err err = { 0, "" };
	return done(L, lz_hc_rs_stop(hc, &err), &err);
}

static int rs_tostring(lua_State *L)
{
	luaL_checkudata(L, 1, RS_MT);
	lua_pushliteral(L, "lazaret.rs");
	return 1;
}

static int rs_of(lua_State *L)
{
	lz_l_new_view(L, 1, RS_MT);
	return 1;
}

int luaopen_lazaret_rs(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "of", rs_of },
		{ NULL, NULL },
	};
	static const luaL_Reg methods[] = {
		{ "spawn", rs_spawn },
		{ "expect", rs_expect },
		{ "ack", rs_ack },
		{ "steps", rs_steps },
		{ "stop", rs_stop },
		{ "failure", rs_failure },
		{ NULL, NULL },
	};
	static const luaL_Reg metamethods[] = {
		{ "__tostring", rs_tostring },
		{ NULL, NULL },
	};
	lz_l_new_type(L, RS_MT, methods, metamethods);
	luaL_newlib(L, functions);
	return 1;
}
