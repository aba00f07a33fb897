/* lazaret.core.state: what `lazaret state` reads (core/store/domainstate.h).
 *
 *   state.list(cfg, {sizes=})      [-2, +1|3, e] -> {domain...} | nil, msg, errno
 *       Every Domain under cfg's Storage Root, ordered by ID:
 *       { id=, profile=, workspace= (nil when the identity is not ok),
 *         problem= (why not; nil when ok), active=, workspace_gone=,
 *         last_use= (seconds since the epoch, 0 unknown), leases=,
 *         anchors = { {path=, bytes=, files=, incomplete=}... },
 *         ignored = {bytes=, files=, incomplete=} | nil }
 *       bytes and files are nil when not measured (sizes=false).
 */
#include <lauxlib.h>
#include <lua.h>

#include "l_util.h"
#include "modules.h"
#include "config/config.h"
#include "store/domainstate.h"

static void push_usage(lua_State *L, const struct lz_tree_usage *u)
{
	lua_createtable(L, 0, 3);
	lua_pushinteger(L, (lua_Integer)u->bytes);
	lua_setfield(L, -2, "bytes");
	lua_pushinteger(L, (lua_Integer)u->files);
	lua_setfield(L, -2, "files");
	lua_pushboolean(L, u->incomplete);
	lua_setfield(L, -2, "incomplete");
}

static void push_domain(lua_State *L, const struct lz_domain_state *d)
{
	lua_createtable(L, 0, 12);
	lua_pushstring(L, d->id);
	lua_setfield(L, -2, "id");
	if (d->identity_ok) {
		lua_pushstring(L, d->identity.profile);
		lua_setfield(L, -2, "profile");
		lua_pushstring(L, d->identity.workspace);
		lua_setfield(L, -2, "workspace");
	}
	if (d->problem[0]) {
		lua_pushstring(L, d->problem);
		lua_setfield(L, -2, "problem");
	}
	lua_pushboolean(L, d->active);
	lua_setfield(L, -2, "active");
	lua_pushboolean(L, d->workspace_gone);
	lua_setfield(L, -2, "workspace_gone");
	lua_pushinteger(L, (lua_Integer)d->last_use);
	lua_setfield(L, -2, "last_use");
	lua_pushinteger(L, (lua_Integer)d->leases);
	lua_setfield(L, -2, "leases");
	lua_createtable(L, (int)d->n_anchors, 0);
	for (size_t i = 0; i < d->n_anchors; i++) {
		const struct lz_domain_anchor *a = &d->anchors[i];
		if (a->measured)
			push_usage(L, &a->upper);
		else
			lua_createtable(L, 0, 1);
		lua_pushstring(L, a->path);
		lua_setfield(L, -2, "path");
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "anchors");
	if (d->has_ignored) {
		push_usage(L, &d->ignored);
		lua_setfield(L, -2, "ignored");
	}
}

static int state_list(lua_State *L)
{
	static const char *const keys[] = { "sizes", NULL };
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	lz_l_check_options(L, 2, keys);
	bool sizes = true;
	if (lua_istable(L, 2)) {
		lua_getfield(L, 2, "sizes");
		sizes = lua_isnil(L, -1) || lua_toboolean(L, -1);
		lua_pop(L, 1);
	}
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	struct lz_domain_state *v = NULL;
	size_t n = 0;
	struct lz_err err = { 0, "" };
	int r = lz_domain_state_list(lz_config_storage_root(cfg), s.runtime_root, sizes, &v, &n, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		push_domain(L, &v[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lz_domain_state_free(v, n);
	return 1;
}

int luaopen_lazaret_state(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "list", state_list },
		{ NULL, NULL },
	};
	luaL_newlib(L, fns);
	return 1;
}
