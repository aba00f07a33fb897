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
 *   state.inspect(cfg, {paths=, max=})  [-2, +1|3, e] -> result | nil, msg, errno
 *       The changes each State Anchor of cfg's Domain holds over the
 *       profile's prepared lower (paths: persistent directories, default
 *       all of the profile's; one not absolute is nil, msg, EINVAL; max
 *       listed per anchor, default 200):
 *       { artifact= (nil: the image is not prepared; all counts as added),
 *         anchors = { {path=, has_lower=, total=, incomplete=, limit=,
 *           changes = { {kind="added"|"changed"|"deleted"|"opaque",
 *             path=, mode=, size=}... } }... } }
 *   state.remove_check(cfg, id)    [-2, +1|3, e] -> {profile=, workspace=, never_launched=,
 *                                                      interrupted=}
 *                                                   | nil, msg, errno
 *   state.remove(cfg, id)          [-2, +1|3, e] -> true | nil, msg, errno
 *       A Domain whose workspace is gone (core/runtime/domainremove.h).
 */
#include <lauxlib.h>
#include <lua.h>
#include <errno.h>
#include <unistd.h>

#include "net/egressproxy.h"
#include "l_util.h"
#include "modules.h"
#include "config/config.h"
#include "image/prepare.h"
#include "runtime/domainremove.h"
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

static void domain_state_free(void *v, size_t n)
{
	lz_domain_state_free(v, n);
}

static void anchor_changes_free(void *v, size_t n)
{
	lz_anchor_changes_free(v, n);
}

static void push_domain(lua_State *L, const struct lz_domain_state *d)
{
	lua_createtable(L, 0, 13);
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
	lua_pushboolean(L, d->removal_interrupted);
	lua_setfield(L, -2, "removal_interrupted");
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
		lua_pushliteral(L, "sizes");
		lua_rawget(L, 2);
		sizes = lua_isnil(L, -1) || lua_toboolean(L, -1);
		lua_pop(L, 1);
	}
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	struct lz_domain_state *v = NULL;
	size_t n = 0;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns v while the result is built */
	int r = lz_domain_state_list(lz_config_storage_root(cfg), s.runtime_root, sizes, &v, &n, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ v, n, domain_state_free };
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		push_domain(L, &v[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lz_l_box_release(box);
	return 1;
}

/* Every persistent directory a profile may list, or as many named. */
#define INSPECT_PATHS_MAX LZ_CONFIG_LIST_MAX

static int state_inspect(lua_State *L)
{
	static const char *const keys[] = { "paths", "max", NULL };
	static const char *const kinds[] = { [LZ_TREE_ADDED] = "added", [LZ_TREE_CHANGED] = "changed",
					     [LZ_TREE_DELETED] = "deleted", [LZ_TREE_OPAQUE] = "opaque" };
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	const struct lz_config_profile *p = lz_config_selected(cfg);
	const char *paths[INSPECT_PATHS_MAX];
	size_t n = 0;
	lua_Integer max = 200;
	if (p == NULL)
		return luaL_error(L, "state.inspect needs a configuration with a profile");
	if (!lua_isnoneornil(L, 2)) {
		lz_l_check_options(L, 2, keys);
		lua_pushliteral(L, "max");
		if (lua_rawget(L, 2) != LUA_TNIL)
			max = luaL_checkinteger(L, -1);
		lua_pop(L, 1);
		lua_pushliteral(L, "paths");
		int t = lua_rawget(L, 2);
		if (t == LUA_TTABLE) {
			int list = lua_gettop(L);
			lua_Integer k = lz_l_list_len(L, list, "option 'paths'");
			luaL_argcheck(L, k >= 0 && k <= INSPECT_PATHS_MAX, 2, "too many paths");
			lz_l_list_strings(L, list, k, "path %d", paths); /* the copy stays on the stack */
			n = (size_t)k;
			for (size_t i = 0; i < n; i++)
				/* Spec 3.9: a persistent directory, never a relative path. */
				if (paths[i][0] != '/') {
					struct lz_err e = { 0, "" };
					lz_err_set(&e, EINVAL, "state inspect '%.256s': not an absolute path", paths[i]);
					return lz_l_fail(L, -EINVAL, &e);
				}
		} else if (t != LUA_TNIL) {
			return luaL_error(L, "option 'paths' must be a table");
		}
	}
	luaL_argcheck(L, max >= 0 && max <= 100000, 2, "max must be 0 to 100000");
	if (n == 0)
		for (size_t i = 0; i < p->n_persistent_dirs && n < INSPECT_PATHS_MAX; i++)
			paths[n++] = p->persistent_dirs[i];
	char artifact[LZ_DOMAIN_ID_HEX_LEN + 1] = "";
	int rootfs = -1;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns v while the result is built */
	int r = lz_prepare_lookup(lz_config_storage_root(cfg), p->image, artifact, &rootfs, &err);
	if (r < 0 && r != -ENOENT)
		return lz_l_fail(L, r, &err);
	struct lz_anchor_changes *v = NULL;
	size_t k = 0;
	r = lz_domain_inspect(lz_config_storage_domain(cfg)->fd, r < 0 ? -1 : rootfs, paths, n, (size_t)max, &v,
			      &k, &err);
	if (rootfs >= 0)
		close(rootfs);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ v, k, anchor_changes_free };
	lua_createtable(L, 0, 2);
	if (artifact[0]) {
		lua_pushstring(L, artifact);
		lua_setfield(L, -2, "artifact");
	}
	lua_createtable(L, (int)k, 0);
	for (size_t i = 0; i < k; i++) {
		const struct lz_anchor_changes *c = &v[i];
		lua_createtable(L, 0, 5);
		lua_pushstring(L, c->path);
		lua_setfield(L, -2, "path");
		lua_pushboolean(L, c->has_lower);
		lua_setfield(L, -2, "has_lower");
		lua_pushinteger(L, (lua_Integer)c->count.total);
		lua_setfield(L, -2, "total");
		lua_pushboolean(L, c->count.incomplete);
		lua_setfield(L, -2, "incomplete");
		static const char *const limits[] = { [LZ_TREE_LIMIT_DEPTH] = "depth",
						      [LZ_TREE_LIMIT_ENTRIES] = "entries",
						      [LZ_TREE_LIMIT_HELD] = "held",
						      [LZ_TREE_LIMIT_PATH] = "path" };
		if ((size_t)c->count.limit < sizeof(limits) / sizeof(limits[0]) && limits[c->count.limit]) {
			lua_pushstring(L, limits[c->count.limit]);
			lua_setfield(L, -2, "limit");
		}
		lua_createtable(L, (int)c->count.listed, 0);
		for (size_t j = 0; j < c->count.listed; j++) {
			const struct lz_tree_change *x = &c->v[j];
			lua_createtable(L, 0, 4);
			lua_pushstring(L, kinds[x->kind]);
			lua_setfield(L, -2, "kind");
			lua_pushstring(L, x->path);
			lua_setfield(L, -2, "path");
			lua_pushinteger(L, (lua_Integer)x->mode);
			lua_setfield(L, -2, "mode");
			lua_pushinteger(L, (lua_Integer)x->size);
			lua_setfield(L, -2, "size");
			lua_rawseti(L, -2, (lua_Integer)j + 1);
		}
		lua_setfield(L, -2, "changes");
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "anchors");
	lz_l_box_release(box);
	/* Egress by name: the last launch's proxy counters (egressproxy.h). */
	uint64_t allowed, refused;
	r = lz_egress_stats_read(lz_config_storage_domain(cfg)->fd, &allowed, &refused, &err);
	if (r < 0 && r != -ENOENT)
		return lz_l_fail(L, r, &err);
	if (r == 0) {
		lua_createtable(L, 0, 2);
		lua_pushinteger(L, (lua_Integer)allowed);
		lua_setfield(L, -2, "allowed");
		lua_pushinteger(L, (lua_Integer)refused);
		lua_setfield(L, -2, "refused");
		lua_setfield(L, -2, "egress");
	}
	return 1;
}

static struct lz_domain_remove remove_of(lua_State *L, struct lz_config_summary *s)
{
	const struct lz_config *cfg = lz_l_check_config(L, 1);
	const char *id = lz_l_check_cstring(L, 2);
	lz_config_summarize(cfg, s);
	return (struct lz_domain_remove){ .storage_root = lz_config_storage_root(cfg),
					  .runtime_root = s->runtime_root,
					  .domain_hex = id };
}

static int state_remove_check(lua_State *L)
{
	struct lz_config_summary s;
	struct lz_domain_remove r = remove_of(L, &s);
	struct lz_domain_identity id;
	struct lz_err err = { 0, "" };
	int rc = lz_domain_remove_check(&r, &id, &err);
	if (rc < 0)
		return lz_l_fail(L, rc, &err);
	lua_createtable(L, 0, 3);
	lua_pushstring(L, id.profile);
	lua_setfield(L, -2, "profile");
	lua_pushstring(L, id.workspace);
	lua_setfield(L, -2, "workspace");
	lua_pushboolean(L, rc == 1);
	lua_setfield(L, -2, "never_launched");
	lua_pushboolean(L, rc == 2);
	lua_setfield(L, -2, "interrupted");
	return 1;
}

static int state_remove(lua_State *L)
{
	struct lz_config_summary s;
	struct lz_domain_remove r = remove_of(L, &s);
	struct lz_err err = { 0, "" };
	int rc = lz_domain_remove_run(&r, &err);
	if (rc < 0)
		return lz_l_fail(L, rc, &err);
	lua_pushboolean(L, 1);
	return 1;
}

int luaopen_lazaret_state(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "list", state_list },
		{ "inspect", state_inspect },
		{ "remove_check", state_remove_check },
		{ "remove", state_remove },
		{ NULL, NULL },
	};
	luaL_newlib(L, fns);
	return 1;
}
