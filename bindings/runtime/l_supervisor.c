/* lazaret.core.supervisor: the Runtime Supervisor's own steps
 * (core/runtime/supervisor.h), for lua/lazaret/runtime/supervisor.lua.
 *
 * The handle exists only inside an RS: lz_l_supervisor_main, the broker's
 * fn target, creates a fresh Lua state sealed like the executable's
 * (host_seal.c), wraps the plan in the one handle and calls
 * require("lazaret.runtime.supervisor").main(rs). Lua cannot make another
 * handle, and each step refuses to run out of order (supervisor.h).
 *
 *   rs:mount()  rs:start_router()  rs:start_egress()  rs:start_helper()  rs:prove_canary()
 *   rs:attach_egress()  rs:install_policy()  rs:attach_router()
 *   rs:start_runsc()  rs:await_running()  rs:read_init_report()
 *   rs:finish_network()  rs:report_ready()
 *                        [-1, +1|3, e] -> true | nil, msg, errno
 *   rs:serve()           [-1, +1|3, e] -> "stop" | "hc-lost" | "runsc-ended"
 *                                            | "router-ended" | "network-helper-ended"
 *                                            | "egress-proxy-ended"
 *                                         | nil, msg, errno
 *   rs:stop()            [-1, +1|3, e] -> true | nil, msg, errno
 *   rs:abort(why)        [-2, +0, e]  the failure path (supervisor.h)
 *   rs:reached()         [-1, +1, e]  -> the last step done, by name
 */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>

#include "host_seal.h"
#include "l_util.h"
#include "modules.h"
#include "runtime/supervisor.h"

#define SUP_MT "lazaret.supervisor"

struct sup_ud {
	lz_rs *rs;
};

static lz_rs *check_rs(lua_State *L)
{
	struct sup_ud *ud = luaL_checkudata(L, 1, SUP_MT);
	if (ud->rs == NULL)
		luaL_error(L, "attempt to use a released supervisor");
	return ud->rs;
}

#define RS_STEP(name, fn)                                \
	static int name(lua_State *L)                    \
	{                                                \
		lz_rs *rs = check_rs(L);                 \
		struct lz_err err = { 0, "" };           \
		int r = fn(rs, &err);                    \
		if (r < 0)                               \
			return lz_l_fail(L, r, &err);    \
		lua_pushboolean(L, 1);                   \
		return 1;                                \
	}

RS_STEP(sup_mount, lz_rs_mount)
RS_STEP(sup_start_router, lz_rs_start_router)
RS_STEP(sup_start_egress, lz_rs_start_egress)
RS_STEP(sup_start_helper, lz_rs_start_helper)
RS_STEP(sup_prove_canary, lz_rs_prove_canary)
RS_STEP(sup_attach_egress, lz_rs_attach_egress)
RS_STEP(sup_install_policy, lz_rs_install_policy)
RS_STEP(sup_attach_router, lz_rs_attach_router)
RS_STEP(sup_start_runsc, lz_rs_start_runsc)
RS_STEP(sup_await_running, lz_rs_await_running)
RS_STEP(sup_read_init_report, lz_rs_read_init_report)
RS_STEP(sup_finish_network, lz_rs_finish_network)
RS_STEP(sup_report_ready, lz_rs_report_ready)
RS_STEP(sup_stop, lz_rs_stop)

static int sup_serve(lua_State *L)
{
	static const char *const ends[] = { [LZ_RS_END_STOP] = "stop", [LZ_RS_END_HC_LOST] = "hc-lost",
					    [LZ_RS_END_ROUTER] = "router-ended",
					    [LZ_RS_END_HELPER] = "network-helper-ended",
					    [LZ_RS_END_EGRESS] = "egress-proxy-ended",
					    [LZ_RS_END_RUNSC] = "runsc-ended",
					    [LZ_RS_END_MEMORY] = "memory-exceeded" };
	lz_rs *rs = check_rs(L);
	enum lz_rs_end end;
	struct lz_err err = { 0, "" };
	int r = lz_rs_serve(rs, &end, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushstring(L, ends[end]);
	lua_pushstring(L, lz_rs_end_reason(rs));
	return 2;
}

static int sup_abort(lua_State *L)
{
	lz_rs *rs = check_rs(L);
	lz_rs_abort(rs, lz_l_check_cstring(L, 2));
	return 0;
}

static int sup_reached(lua_State *L)
{
	enum lz_rs_step step = lz_rs_reached(check_rs(L));
	lua_pushstring(L, step == LZ_RS_STEP_NONE ? "none" : lz_rs_step_name(step));
	return 1;
}

static int sup_tostring(lua_State *L)
{
	struct sup_ud *ud = luaL_checkudata(L, 1, SUP_MT);
	lua_pushstring(L, ud->rs ? "lazaret.supervisor" : "lazaret.supervisor (released)");
	return 1;
}

int luaopen_lazaret_supervisor(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "mount", sup_mount },
		{ "start_router", sup_start_router },
		{ "start_egress", sup_start_egress },
		{ "start_helper", sup_start_helper },
		{ "prove_canary", sup_prove_canary },
		{ "attach_egress", sup_attach_egress },
		{ "install_policy", sup_install_policy },
		{ "attach_router", sup_attach_router },
		{ "start_runsc", sup_start_runsc },
		{ "await_running", sup_await_running },
		{ "read_init_report", sup_read_init_report },
		{ "finish_network", sup_finish_network },
		{ "report_ready", sup_report_ready },
		{ "serve", sup_serve },
		{ "stop", sup_stop },
		{ "abort", sup_abort },
		{ "reached", sup_reached },
		{ NULL, NULL },
	};
	static const luaL_Reg metamethods[] = {
		{ "__tostring", sup_tostring },
		{ NULL, NULL },
	};
	lz_l_new_type(L, SUP_MT, methods, metamethods);
	lua_newtable(L);
	return 1;
}

static int traceback(lua_State *L)
{
	luaL_traceback(L, L, luaL_tolstring(L, 1, NULL), 1);
	return 1;
}

int lz_l_supervisor_main(void *plan, struct lz_err *err)
{
	lz_rs *rs = NULL;
	int r = lz_rs_new(plan, &rs, err);
	if (r < 0)
		return r;
	lua_State *L = luaL_newstate();
	if (L == NULL) {
		lz_rs_abort(rs, "out of memory");
		lz_rs_free(rs);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	luaL_openlibs(L);
	lz_host_seal(L);
	lua_pushcfunction(L, traceback);
	int handler = lua_gettop(L);
	luaL_requiref(L, "lazaret.core.supervisor", luaopen_lazaret_supervisor, 0);
	lua_pop(L, 1);
	lua_getglobal(L, "require");
	lua_pushliteral(L, "lazaret.runtime.supervisor");
	int status = lua_pcall(L, 1, 1, handler);
	if (status == LUA_OK) {
		lua_getfield(L, -1, "main");
		struct sup_ud *ud = lua_newuserdatauv(L, sizeof(*ud), 0);
		ud->rs = rs;
		luaL_setmetatable(L, SUP_MT);
		status = lua_pcall(L, 1, 1, handler);
	}
	if (status != LUA_OK) {
		r = lz_err_set(err, EIO, "supervisor: %s", lua_tostring(L, -1));
		lz_rs_abort(rs, err->msg);
	} else if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) != 0) {
		r = lz_err_set(err, EIO, "the supervisor ended with errors");
	}
	lua_close(L);
	lz_rs_free(rs);
	return r;
}
