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
 *   coordinator.detach()           [-0, +1|3, -] -> true | nil, msg, errno
 *       The HC's own session, so it outlives the terminal; from then on
 *       SIGTERM, SIGINT and SIGHUP ask it to stop (core/proc/stopreq.h).
 *   coordinator.stop_requested()   [-0, +1, -] -> "SIGTERM" | ... | nil
 *       The stop signal that came, if one did: the launch stops at its
 *       next step (hc.lua); session.serve ends by itself.
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
 *       ({}: all) would discard (core/runtime/anchorreset.h). The handle
 *       keeps that plan.
 *   hc:reset({path...})            [-0, +1|3, e] -> true | nil, msg, errno
 *       Discards exactly those, as planned: the list must be the one the
 *       last hc:reset_plan returned (else raises), and the reset is of the
 *       plan the handle kept, which it uses up.
 *   hc:verify()                    [-0, +1|3, e] -> {{check=, ok=, detail=}...} | nil, msg, errno
 *       Structural verification (core/runtime/domainverify.h).
 *   hc:close()                     [-0, +0, e] idempotent; also __gc and
 *       __close: ends sessions, kills a remaining RS, records a live
 *       generation failed, removes the runtime tree, drops the flock.
 *       Raises inside store:batch's fn or session.serve's route, while C
 *       still uses the coordinator.
 * Tables passed in must be plain (no metatable); they are read raw.
 */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "l_util.h"
#include "modules.h"
#include "proc/stopreq.h"
#include "runtime/anchorreset.h"
#include "runtime/coordinator.h"

#define HC_MT "lazaret.hc"

struct hc_ud {
	lz_hc *hc; /* NULL when closed */
	int busy;    /* C calls using hc across Lua code (lz_l_hc_busy) */
	int serving; /* session.serve: every use raises */
	/* The paths the last hc:reset_plan named, until hc:reset takes them:
	 * a reset discards what a plan showed, never a list Lua made. */
	bool planned;
	char **plan;
	size_t plan_n;
};

static void drop_plan(struct hc_ud *ud)
{
	lz_anchor_reset_free(ud->plan, ud->plan_n);
	ud->plan = NULL;
	ud->plan_n = 0;
	ud->planned = false;
}

static struct hc_ud *check_ud(lua_State *L, int idx)
{
	struct hc_ud *ud = luaL_checkudata(L, idx, HC_MT);
	if (ud->hc == NULL)
		luaL_error(L, "attempt to use a closed coordinator");
	if (ud->serving)
		luaL_error(L, "attempt to use the coordinator while session.serve runs (from its route function)");
	return ud;
}

lz_hc *lz_l_check_hc(lua_State *L, int idx)
{
	return check_ud(L, idx)->hc;
}

void lz_l_hc_busy(lua_State *L, int idx, int delta, bool exclusive)
{
	struct hc_ud *ud = luaL_checkudata(L, idx, HC_MT);
	ud->busy += delta;
	if (exclusive)
		ud->serving += delta;
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
	/* C holds the hc across the Lua code that calls this; __gc cannot
	 * come then (the handle is on C's stack), only close or __close. */
	if (ud->busy > 0)
		return luaL_error(L, "the coordinator is in use (inside store:batch or session.serve): close it "
				     "after that returns");
	drop_plan(ud);
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

/* The core calls these report callbacks in the middle of its work: a Lua
 * error (memory) must not unwind through it, so each row is added under
 * lua_pcall, and a row that could not be is raised once the core returned. */
struct rows {
	lua_State *L;
	int table; /* absolute index of the result list */
	bool lost;
};

static int append_line_protected(lua_State *L)
{
	lua_pushstring(L, lua_touserdata(L, 2));
	lua_rawseti(L, 1, (lua_Integer)lua_rawlen(L, 1) + 1);
	return 0;
}

static void append_line(void *ctx, const char *line)
{
	struct rows *rows = ctx;
	lua_State *L = rows->L;
	lua_pushcfunction(L, append_line_protected);
	lua_pushvalue(L, rows->table);
	lua_pushlightuserdata(L, (void *)line);
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		lua_pop(L, 1);
		rows->lost = true;
	}
}

/* [-0, +1, e] pushes the result list of a reporting call. */
static struct rows new_rows(lua_State *L)
{
	lua_newtable(L);
	return (struct rows){ L, lua_gettop(L), false };
}

static int rows_done(lua_State *L, const struct rows *rows, int r, const struct lz_err *err)
{
	if (rows->lost)
		return luaL_error(L, "not enough memory for the report (the step itself %s)",
				  r < 0 ? "failed" : "was done");
	if (r < 0)
		return lz_l_fail(L, r, err);
	return 1;
}

#define REPORTING(name, fn)                                      \
	static int name(lua_State *L)                            \
	{                                                        \
		lz_hc *hc = lz_l_check_hc(L, 1);                 \
		struct lz_err err = { 0, "" };                   \
		struct rows rows = new_rows(L);                  \
		int r = fn(hc, append_line, &rows, &err);        \
		return rows_done(L, &rows, r, &err);             \
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

#define RESET_MAX LZ_ANCHOR_RESET_MAX

/* [-0, +2, e] the paths of the list at idx (at most RESET_MAX) in an
 * array pushed as userdata, then the copy that keeps them alive; returns
 * the array, n in *ret_n. */
static const char **path_list(lua_State *L, int idx, size_t *ret_n)
{
	luaL_checktype(L, idx, LUA_TTABLE);
	lua_Integer n = lz_l_list_len(L, idx, "the list of paths");
	luaL_argcheck(L, n >= 0 && n <= RESET_MAX, idx, "at most 65536 paths");
	const char **v = lua_newuserdatauv(L, ((size_t)n + 1) * sizeof(*v), 0);
	lz_l_list_strings(L, idx, n, "path %d", v);
	*ret_n = (size_t)n;
	return v;
}

static int hc_reset_plan(lua_State *L)
{
	struct hc_ud *ud = check_ud(L, 1);
	size_t n;
	const char **paths = path_list(L, 2, &n);
	char **v = NULL;
	size_t k = 0;
	struct lz_err err = { 0, "" };
	drop_plan(ud); /* a failed plan leaves none to reset by */
	int r = lz_hc_reset_plan(ud->hc, paths, n, &v, &k, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	if (k > RESET_MAX) { /* hc:reset could not be handed it back */
		lz_anchor_reset_free(v, k);
		return luaL_error(L, "the reset plan has more than %d entries", RESET_MAX);
	}
	ud->plan = v; /* owned by the handle from here */
	ud->plan_n = k;
	ud->planned = true;
	lua_createtable(L, (int)k, 0);
	for (size_t i = 0; i < k; i++) {
		lua_pushstring(L, v[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

/* Lua passes the list it showed the developer; the reset is of the plan C
 * kept, and only if the two are the same. The plan is used up either way. */
static int hc_reset(lua_State *L)
{
	struct hc_ud *ud = check_ud(L, 1);
	size_t n;
	const char **paths = path_list(L, 2, &n);
	if (!ud->planned)
		return luaL_error(L, "hc:reset takes the list the last hc:reset_plan returned: there is none");
	bool same = n == ud->plan_n;
	for (size_t i = 0; same && i < n; i++)
		same = strcmp(paths[i], ud->plan[i]) == 0;
	if (!same) {
		drop_plan(ud);
		return luaL_error(L, "hc:reset takes exactly the list the last hc:reset_plan returned; nothing "
				     "was reset");
	}
	struct lz_err err = { 0, "" };
	int r = lz_hc_reset(ud->hc, (const char *const *)ud->plan, ud->plan_n, &err);
	drop_plan(ud);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

struct verify_row_args {
	const char *check, *detail;
	bool ok;
};

static int verify_row_protected(lua_State *L)
{
	const struct verify_row_args *a = lua_touserdata(L, 2);
	lua_createtable(L, 0, 3);
	lua_pushstring(L, a->check);
	lua_setfield(L, -2, "check");
	lua_pushboolean(L, a->ok);
	lua_setfield(L, -2, "ok");
	lua_pushstring(L, a->detail);
	lua_setfield(L, -2, "detail");
	lua_rawseti(L, 1, (lua_Integer)lua_rawlen(L, 1) + 1);
	return 0;
}

static void verify_row(void *ctx, const char *check, bool ok, const char *detail)
{
	struct rows *rows = ctx;
	lua_State *L = rows->L;
	struct verify_row_args a = { check, detail, ok };
	lua_pushcfunction(L, verify_row_protected);
	lua_pushvalue(L, rows->table);
	lua_pushlightuserdata(L, &a);
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		lua_pop(L, 1);
		rows->lost = true;
	}
}

static int hc_verify(lua_State *L)
{
	lz_hc *hc = lz_l_check_hc(L, 1);
	struct lz_err err = { 0, "" };
	struct rows rows = new_rows(L);
	int r = lz_hc_verify(hc, verify_row, &rows, &err);
	return rows_done(L, &rows, r, &err);
}

static int coordinator_open(lua_State *L)
{
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	struct hc_ud *ud = lua_newuserdatauv(L, sizeof(*ud), 1);
	*ud = (struct hc_ud){ .hc = NULL };
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
	struct lz_err err = { 0, "" };
	(void)setsid();
	int r = lz_stopreq_catch(&err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int coordinator_stop_requested(lua_State *L)
{
	int sig = lz_stopreq_signal();
	if (sig == 0)
		lua_pushnil(L);
	else
		lua_pushfstring(L, "SIG%s", sigabbrev_np(sig));
	return 1;
}

int luaopen_lazaret_coordinator(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "open", coordinator_open },
		{ "notify", coordinator_notify },
		{ "detach", coordinator_detach },
		{ "usage", coordinator_usage },
		{ "stop_requested", coordinator_stop_requested },
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
