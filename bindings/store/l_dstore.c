/* lazaret.core.dstore: the Domain Store transitions of one Host
 * Coordinator's generation (core/runtime/coordinator.h, core/store/
 * domainstore.h). Lua names a role; the evidence (artifact, lease, mount
 * identities, process identities, readiness fingerprint) comes from what
 * the coordinator holds, and every illegal move is refused in C.
 *
 *   dstore.of(hc)             [-1, +1, e] -> store: a view of hc's generation
 *   dstore.roles              table       the role names, in store order
 *   store:intent(role)  store:stage(role)  store:commit(role)
 *   store:enter(role)   store:activate(role)  store:release(role)
 *   store:clean(role)         [-2, +1|3, e] -> true | nil, msg, errno
 *   store:record(evidence)    [-2, +1|3, e] evidence: "artifact", "lease",
 *                             "mounts" or "readiness"
 *   store:anchor_unmounted()  [-1, +1|3, e] State Anchor clean and
 *                             prepared-lower release intent, atomically
 *   store:generation(state)   [-2, +1|3, e] "stopping", "stopped" or
 *                             "failed" (publication is hc:publish)
 *   store:phase(role)         [-2, +1|3, e] -> "intent" | "acquiring" |
 *                             "active" | "release" | "clean" | false (no row)
 *   store:batch(fn)           [-2, +1|3, e] runs fn() with its transitions
 *                             in one transaction (lz_hc_batch_begin), then
 *                             commits what succeeded; an error fn raises is
 *                             raised again after the commit. The handle's
 *                             actions refuse inside fn, and hc:close()
 *                             raises there.
 * Role names: prepared_lower, state_anchor, sandbox, runtime_supervisor,
 * attached_runsc, host_coordinator, connectivity_helper, network. An
 * unknown name, or a closed coordinator, raises. */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "l_util.h"
#include "modules.h"
#include "runtime/coordinator.h"

#define STORE_MT "lazaret.dstore"

static enum lz_dstore_role check_role(lua_State *L, int idx)
{
	const char *name = lz_l_check_cstring(L, idx);
	for (int r = 1; r <= LZ_DSTORE_ROLE_COUNT; r++)
		if (strcmp(lz_dstore_role_name((enum lz_dstore_role)r), name) == 0)
			return (enum lz_dstore_role)r;
	return (enum lz_dstore_role)luaL_argerror(L, idx, lua_pushfstring(L, "unknown role '%s'", name));
}

#define ROLE_STEP(name, fn)                                      \
	static int name(lua_State *L)                            \
	{                                                        \
		lz_hc *hc = lz_l_view_hc(L, 1, STORE_MT);        \
		enum lz_dstore_role role = check_role(L, 2);     \
		struct lz_err err = { 0, "" };                   \
		int r = fn(hc, role, &err);                      \
		if (r < 0)                                       \
			return lz_l_fail(L, r, &err);            \
		lua_pushboolean(L, 1);                           \
		return 1;                                        \
	}

ROLE_STEP(store_intent, lz_hc_intent)
ROLE_STEP(store_stage, lz_hc_stage)
ROLE_STEP(store_commit, lz_hc_commit)
ROLE_STEP(store_enter, lz_hc_enter)
ROLE_STEP(store_activate, lz_hc_activate)
ROLE_STEP(store_release, lz_hc_release)
ROLE_STEP(store_clean, lz_hc_clean)

static int done(lua_State *L, int r, const struct lz_err *err)
{
	if (r < 0)
		return lz_l_fail(L, r, err);
	lua_pushboolean(L, 1);
	return 1;
}

static int store_record(lua_State *L)
{
	static const char *const names[] = { "artifact", "lease", "mounts", "readiness", NULL };
	static const enum lz_hc_evidence what[] = { LZ_HC_EVIDENCE_ARTIFACT, LZ_HC_EVIDENCE_LEASE,
						    LZ_HC_EVIDENCE_MOUNTS, LZ_HC_EVIDENCE_READINESS };
	lz_hc *hc = lz_l_view_hc(L, 1, STORE_MT);
	int i = luaL_checkoption(L, 2, NULL, names);
	struct lz_err err = { 0, "" };
	return done(L, lz_hc_record(hc, what[i], &err), &err);
}

static int store_anchor_unmounted(lua_State *L)
{
	lz_hc *hc = lz_l_view_hc(L, 1, STORE_MT);
	struct lz_err err = { 0, "" };
	return done(L, lz_hc_anchor_unmounted(hc, &err), &err);
}

static int store_generation(lua_State *L)
{
	static const char *const names[] = { "stopping", "stopped", "failed", NULL };
	static const enum lz_dstore_gen_state states[] = { LZ_DSTORE_GEN_STOPPING, LZ_DSTORE_GEN_STOPPED,
							   LZ_DSTORE_GEN_FAILED };
	lz_hc *hc = lz_l_view_hc(L, 1, STORE_MT);
	int i = luaL_checkoption(L, 2, NULL, names);
	struct lz_err err = { 0, "" };
	return done(L, lz_hc_set_state(hc, states[i], &err), &err);
}

static int store_phase(lua_State *L)
{
	lz_hc *hc = lz_l_view_hc(L, 1, STORE_MT);
	enum lz_dstore_role role = check_role(L, 2);
	enum lz_dstore_phase phase;
	struct lz_err err = { 0, "" };
	int r = lz_hc_phase(hc, role, &phase, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	if (phase == 0)
		lua_pushboolean(L, 0);
	else
		lua_pushstring(L, lz_dstore_phase_name(phase));
	return 1;
}

static int store_batch(lua_State *L)
{
	lz_hc *hc = lz_l_view_hc(L, 1, STORE_MT);
	luaL_checktype(L, 2, LUA_TFUNCTION);
	lua_settop(L, 2);
	lua_getiuservalue(L, 1, 1); /* 3: the hc handle, which fn cannot close */
	struct lz_err err = { 0, "" };
	int r = lz_hc_batch_begin(hc, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushvalue(L, 2);
	lz_l_hc_busy(L, 3, 1, false);
	int status = lua_pcall(L, 0, 0, 0);
	lz_l_hc_busy(L, 3, -1, false);
	/* What fn's transitions did is committed either way: exactly the
	 * document they would have left one transaction at a time. */
	r = lz_hc_batch_end(hc, &err);
	if (status != LUA_OK)
		return lua_error(L);
	return done(L, r, &err);
}

static int store_tostring(lua_State *L)
{
	luaL_checkudata(L, 1, STORE_MT);
	lua_pushliteral(L, "lazaret.dstore");
	return 1;
}

static int dstore_of(lua_State *L)
{
	lz_l_new_view(L, 1, STORE_MT);
	return 1;
}

int luaopen_lazaret_dstore(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "of", dstore_of },
		{ NULL, NULL },
	};
	static const luaL_Reg methods[] = {
		{ "intent", store_intent },
		{ "record", store_record },
		{ "stage", store_stage },
		{ "commit", store_commit },
		{ "enter", store_enter },
		{ "activate", store_activate },
		{ "release", store_release },
		{ "clean", store_clean },
		{ "anchor_unmounted", store_anchor_unmounted },
		{ "generation", store_generation },
		{ "phase", store_phase },
		{ "batch", store_batch },
		{ NULL, NULL },
	};
	static const luaL_Reg metamethods[] = {
		{ "__tostring", store_tostring },
		{ NULL, NULL },
	};
	lz_l_new_type(L, STORE_MT, methods, metamethods);
	luaL_newlib(L, functions);
	lua_createtable(L, LZ_DSTORE_ROLE_COUNT, 0);
	for (int r = 1; r <= LZ_DSTORE_ROLE_COUNT; r++) {
		lua_pushstring(L, lz_dstore_role_name((enum lz_dstore_role)r));
		lua_rawseti(L, -2, r);
	}
	lua_setfield(L, -2, "roles");
	return 1;
}
