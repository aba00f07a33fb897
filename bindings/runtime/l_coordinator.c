/* lazaret.core.coordinator: the Host Coordinator (core/runtime/
 * coordinator.h) for lua/lazaret/runtime/hc.lua. Translation only: every
 * check is in C. The store transitions and the RS channel are views of the
 * same handle (l_dstore.c, l_rs.c).
 *
 *   coordinator.open(cfg)          [-1, +1|3, e] -> hc | nil, msg, errno
 *       Domain flock (EBUSY: another HC holds it), the Domain Store, a
 *       generation a lost HC left recorded failed, runsc located. The
 *       handle keeps cfg alive, and cfg:close() raises while it is open.
 *   coordinator.notify(line)       [-1, +0, e]
 *       The HC's startup report to the CLI that started it: writes line to
 *       standard output, then points standard output at /dev/null.
 *   coordinator.detach()           [-0, +1, -] -> true
 *       The HC's own session, so it outlives the terminal.
 *   coordinator.usage()            [-0, +2, -] -> page faults, CPU ms
 *       This process's so far (getrusage): hc.log's account of a launch.
 *   hc:begin()                     [-0, +1|3, e] -> true | nil, msg, errno
 *   hc:generation()                [-0, +1, e] -> integer (0 before begin)
 *   hc:lower_lookup()  hc:lease_acquire()  hc:lease_release()
 *   hc:attest_network()  hc:publish()
 *                                  [-0, +1|3, e] -> true | nil, msg, errno
 *   hc:readiness()                 [-0, +1, e] -> 64 hex | nil
 *   hc:artifact()                  [-0, +1, e] -> the prepared lower's ID | nil
 *   hc:lost_generation()           [-0, +1|3, e] -> integer (0: none) | nil, msg, errno
 *   hc:record_lost(gen)            [-1, +1|3, e] -> true | nil, msg, errno
 *   hc:release_lost_leases()  hc:clean_runtime()  hc:retire_lost()
 *                                  [-0, +1|3, e] -> {line...} | nil, msg, errno
 *   hc:recovered()                 [-0, +1|3, e] -> true | nil, msg, errno
 *       Bootstrap recovery's steps (core/runtime/coordinator.h).
 *   hc:reset_plan({path...})       [-0, +1|3, e] -> {path...} | nil, msg, errno
 *       The persistent directories a State Anchor reset of those paths
 *       ({}: all) would discard (core/runtime/anchorreset.h).
 *   hc:reset({path...})            [-0, +1|3, e] -> true | nil, msg, errno
 *       Discards exactly those, as planned.
 *   hc:verify()                    [-0, +1|3, e] -> {{check=, ok=, detail=}...} | nil, msg, errno
 *       Structural verification (core/runtime/domainverify.h).
 *   hc:close()                     [-0, +0, -] idempotent; also __gc and
 *       __close: ends sessions, kills a remaining RS, records a live
 *       generation failed, removes the runtime tree, drops the flock.
 */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "l_util.h"
#include "modules.h"
#include "runtime/coordinator.h"

#define HC_MT "lazaret.hc"

struct hc_ud {
	lz_hc *hc; /* NULL when closed */
};

lz_hc *lz_l_check_hc(lua_State *L, int idx)
{
	struct hc_ud *ud = luaL_checkudata(L, idx, HC_MT);
	if (ud->hc == NULL)
		luaL_error(L, "attempt to use a closed coordinator");
	return ud->hc;
}

void lz_l_new_view(lua_State *L, int hc_idx, const char *mt)
{
	hc_idx = lua_absindex(L, hc_idx);
	(void)lz_l_check_hc(L, hc_idx);
	lua_newuserdatauv(L, 1, 1);
	luaL_setmetatable(L, mt);
	lua_pushvalue(L, hc_idx);
	lua_setiuservalue(L, -2, 1);
}

lz_hc *lz_l_view_hc(lua_State *L, int idx, const char *mt)
{
	luaL_checkudata(L, idx, mt);
	lua_getiuservalue(L, idx, 1);
	lz_hc *hc = lz_l_check_hc(L, -1);
	lua_pop(L, 1);
	return hc;
}

static int hc_close(lua_State *L)
{
	struct hc_ud *ud = luaL_checkudata(L, 1, HC_MT);
	if (ud->hc == NULL)
		return 0;
	lz_hc_close(ud->hc);
	ud->hc = NULL;
	lua_getiuservalue(L, 1, 1);
	lz_l_config_pin(L, -1, -1);
	return 0;
}

static int hc_tostring(lua_State *L)
{
	struct hc_ud *ud = luaL_checkudata(L, 1, HC_MT);
	if (ud->hc == NULL)
		lua_pushliteral(L, "lazaret.hc (closed)");
	else
		lua_pushfstring(L, "lazaret.hc (generation %I)", (lua_Integer)lz_hc_generation(ud->hc));
	return 1;
}

#define STEP(name, fn)                                   \
	static int name(lua_State *L)                    \
	{                                                \
		lz_hc *hc = lz_l_check_hc(L, 1);         \
		struct lz_err err = { 0, "" };           \
		int r = fn(hc, &err);                    \
		if (r < 0)                               \
			return lz_l_fail(L, r, &err);    \
		lua_pushboolean(L, 1);                   \
		return 1;                                \
	}

STEP(hc_begin, lz_hc_begin)
STEP(hc_lower_lookup, lz_hc_lower_lookup)
STEP(hc_lease_acquire, lz_hc_lease_acquire)
STEP(hc_lease_release, lz_hc_lease_release)
STEP(hc_attest_network, lz_hc_attest_network)
STEP(hc_publish, lz_hc_publish)

static int hc_generation(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)lz_hc_generation(lz_l_check_hc(L, 1)));
	return 1;
}

static int hc_lost_generation(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	struct lz_err err = { 0, "" };
	uint64_t g = 0;
	int r = lz_hc_lost_generation(hc, &g, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushinteger(L, (lua_Integer)g);
	return 1;
}

static int hc_record_lost(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	lua_Integer g = luaL_checkinteger(L, 2);
	struct lz_err err = { 0, "" };
	int r = lz_hc_record_lost(hc, (uint64_t)g, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static void append_line(void *ctx, const char *line)
{
	lua_State *L = ctx;
	lua_pushstring(L, line);
	lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
}

#define REPORTING(name, fn)                                      \
	static int name(lua_State *L)                            \
	{                                                        \
		lz_hc *hc = lz_l_check_hc(L, 1);                 \
		struct lz_err err = { 0, "" };                   \
		lua_newtable(L);                                 \
		int r = fn(hc, append_line, L, &err);            \
		if (r < 0)                                       \
			return lz_l_fail(L, r, &err);            \
		return 1;                                        \
	}

REPORTING(hc_release_lost_leases, lz_hc_release_lost_leases)
REPORTING(hc_clean_runtime, lz_hc_clean_runtime)
REPORTING(hc_retire_lost, lz_hc_retire_lost)
STEP(hc_recovered, lz_hc_recovered)

static int hc_artifact(lua_State *L)
{
	const char *a = lz_hc_artifact(lz_l_check_hc(L, 1));
	if (a)
		lua_pushstring(L, a);
	else
		lua_pushnil(L);
	return 1;
}

static int hc_readiness(lua_State *L)
{
	const char *fp = lz_hc_readiness(lz_l_check_hc(L, 1));
	if (fp)
		lua_pushstring(L, fp);
	else
		lua_pushnil(L);
	return 1;
}

#define RESET_MAX 64

/* The strings of table idx (at most RESET_MAX) into v; returns n. */
static size_t string_list(lua_State *L, int idx, const char **v)
{
	luaL_checktype(L, idx, LUA_TTABLE);
	lua_Integer n = luaL_len(L, idx);
	luaL_argcheck(L, n >= 0 && n <= RESET_MAX, idx, "at most 64 paths");
	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_geti(L, idx, i) != LUA_TSTRING)
			luaL_error(L, "path %d must be a string", (int)i);
		v[i - 1] = lua_tostring(L, -1);
		lua_pop(L, 1); /* anchored by the table */
	}
	return (size_t)n;
}

static int hc_reset_plan(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	const char *paths[RESET_MAX];
	size_t n = string_list(L, 2, paths);
	char **v = NULL;
	size_t k = 0;
	struct lz_err err = { 0, "" };
	int r = lz_hc_reset_plan(hc, paths, n, &v, &k, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, (int)k, 0);
	for (size_t i = 0; i < k; i++) {
		lua_pushstring(L, v[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
		free(v[i]);
	}
	free(v);
	return 1;
}

static int hc_reset(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	const char *paths[RESET_MAX];
	size_t n = string_list(L, 2, paths);
	struct lz_err err = { 0, "" };
	int r = lz_hc_reset(hc, paths, n, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static void verify_row(void *ctx, const char *check, bool ok, const char *detail)
{
	lua_State *L = ctx;
	lua_createtable(L, 0, 3);
	lua_pushstring(L, check);
	lua_setfield(L, -2, "check");
	lua_pushboolean(L, ok);
	lua_setfield(L, -2, "ok");
	lua_pushstring(L, detail);
	lua_setfield(L, -2, "detail");
	lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
}

static int hc_verify(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	struct lz_err err = { 0, "" };
	lua_newtable(L);
	int r = lz_hc_verify(hc, verify_row, L, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	return 1;
}

static int coordinator_open(lua_State *L)
{
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	struct hc_ud *ud = lua_newuserdatauv(L, sizeof(*ud), 1);
	ud->hc = NULL;
	luaL_setmetatable(L, HC_MT);
	/* The configuration must outlive the coordinator. */
	lua_pushvalue(L, 1);
	lua_setiuservalue(L, -2, 1);
	struct lz_err err = { 0, "" };
	int r = lz_hc_open(cfg, &ud->hc, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lz_l_config_pin(L, 1, 1);
	return 1;
}

static int coordinator_notify(lua_State *L)
{
	size_t len;
	const char *line = luaL_checklstring(L, 1, &len);
	(void)!write(STDOUT_FILENO, line, len);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDOUT_FILENO);
		close(null);
	}
	return 0;
}

static int coordinator_usage(lua_State *L)
{
	struct rusage ru = { 0 };
	(void)getrusage(RUSAGE_SELF, &ru);
	lua_pushinteger(L, (lua_Integer)ru.ru_minflt + ru.ru_majflt);
	lua_pushnumber(L, (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
				  (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
	return 2;
}

static int coordinator_detach(lua_State *L)
{
	(void)setsid();
	lua_pushboolean(L, 1);
	return 1;
}

int luaopen_lazaret_coordinator(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "open", coordinator_open },
		{ "notify", coordinator_notify },
		{ "detach", coordinator_detach },
		{ "usage", coordinator_usage },
		{ NULL, NULL },
	};
	static const luaL_Reg methods[] = {
		{ "begin", hc_begin },
		{ "generation", hc_generation },
		{ "lower_lookup", hc_lower_lookup },
		{ "lease_acquire", hc_lease_acquire },
		{ "lease_release", hc_lease_release },
		{ "attest_network", hc_attest_network },
		{ "readiness", hc_readiness },
		{ "artifact", hc_artifact },
		{ "lost_generation", hc_lost_generation },
		{ "record_lost", hc_record_lost },
		{ "release_lost_leases", hc_release_lost_leases },
		{ "clean_runtime", hc_clean_runtime },
		{ "retire_lost", hc_retire_lost },
		{ "recovered", hc_recovered },
		{ "reset_plan", hc_reset_plan },
		{ "reset", hc_reset },
		{ "verify", hc_verify },
		{ "publish", hc_publish },
		{ "close", hc_close },
		{ NULL, NULL },
	};
	static const luaL_Reg metamethods[] = {
		{ "__gc", hc_close },
		{ "__close", hc_close },
		{ "__tostring", hc_tostring },
		{ NULL, NULL },
	};
	lz_l_new_type(L, HC_MT, methods, metamethods);
	luaL_newlib(L, functions);
	return 1;
}
