/* lazaret.core.image: prepared lowers (issue 3, spec 3.6).
 *
 *   image.prepare(cfg, {image=, progress=})   [-0, +1|3, e]
 *       -> { artifact_id, manifest_digest, config_digest, size,
 *            skipped_devices, existed } | nil, msg, errno
 *       cfg is a lazaret.config handle (its Storage Root is used); image is
 *       an oci:/docker-archive:/docker:// reference; progress, optional, is
 *       called as progress(layer, n_layers, bytes_done, bytes_total,
 *       waiting_for_gc) (waiting_for_gc: once, before waiting for an image
 *       gc of the Storage Root to end);
 *       cfg:close() raises while it runs.
 *   image.list(cfg)                           [-0, +1|3, e]
 *       -> { {id, source, manifest_digest, config_digest, size, leases,
 *             state, created}, ... } | nil, msg, errno
 *   image.build_default(cfg)                  [-0, +1|3, e]
 *       -> "oci:<Storage Root>/images/default:latest" | nil, msg, errno
 *   image.gc(cfg, {dry_run=, keep=, spare=})  [-0, +1|3, e]
 *       -> { {action, where, name, leases}, ... } | nil, msg, errno
 *       keep: the most recently prepared unleased artifacts kept (the
 *       automatic policy, storage.keep_unused_images; default 0), and
 *       spare, one artifact ID never reclaimed (the ending launch's).
 */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "store/catalog.h"
#include "config/config.h"
#include "image/defaultimage.h"
#include "image/imageref.h"
#include "l_util.h"
#include "modules.h"
#include "image/prepare.h"
#include "image/transport.h"

static const struct lz_path *storage_root(lua_State *L)
{
	const lz_config *cfg = lz_l_check_config(L, 1);
	return lz_config_storage_root(cfg);
}

struct progress_ctx {
	lua_State *L;
	int fn; /* stack index of the callback, or 0 */
};

static void on_progress(void *ctxp, const struct lz_prepare_progress *p)
{
	struct progress_ctx *ctx = ctxp;
	if (ctx->fn == 0)
		return;
	lua_pushvalue(ctx->L, ctx->fn);
	lua_pushinteger(ctx->L, p->layer);
	lua_pushinteger(ctx->L, p->n_layers);
	lua_pushinteger(ctx->L, (lua_Integer)p->bytes_done);
	lua_pushinteger(ctx->L, (lua_Integer)p->bytes_total);
	lua_pushboolean(ctx->L, p->waiting_for_gc);
	/* Progress is cosmetic: a failing renderer must not abort the work. */
	if (lua_pcall(ctx->L, 5, 0, 0) != LUA_OK)
		lua_pop(ctx->L, 1);
}

static void artifact_list_free(void *v, size_t n)
{
	lz_catalog_artifact_list_free(v, n);
}

static void set_str(lua_State *L, const char *k, const char *v)
{
	lua_pushstring(L, v);
	lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, uint64_t v)
{
	lua_pushinteger(L, (lua_Integer)v);
	lua_setfield(L, -2, k);
}

static int image_prepare(lua_State *L)
{
	static const char *const keys[] = { "image", "progress", NULL };
	const struct lz_path *root = storage_root(L);
	lz_l_check_options(L, 2, keys);
	const char *text = lz_l_opt_string(L, 2, "image"); /* kept on the stack */
	if (text == NULL)
		return luaL_error(L, "option 'image' is required");
	struct progress_ctx ctx = { L, 0 };
	lua_pushliteral(L, "progress");
	if (lua_rawget(L, 2) == LUA_TFUNCTION)
		ctx.fn = lua_gettop(L);
	else if (!lua_isnil(L, -1))
		return luaL_error(L, "option 'progress' must be a function");

	struct lz_err err = { 0, "" };
	struct lz_image_ref ref;
	struct lz_transport transport = LZ_TRANSPORT_INIT;
	struct lz_path layout = LZ_PATH_INIT, skopeo = LZ_PATH_INIT;
	struct lz_prepare_result res;
	int r = lz_image_ref_parse(text, &ref, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	if (ref.kind == LZ_IMAGE_OCI) {
		char *canonical = realpath(ref.path, NULL);
		if (canonical == NULL)
			return lz_l_fail(L, lz_err_set(&err, errno, "image layout '%s': %s", ref.path,
						       strerror(errno)), &err);
		r = lz_path_open(canonical, &layout, &err);
		free(canonical);
	} else if ((r = lz_config_host_tool(lz_l_check_config(L, 1), "skopeo", "image transport", "skopeo", &skopeo,
					       &err)) >= 0) {
		r = lz_transport_fetch(root, &skopeo, &ref, &transport, &err);
		lz_path_release(&skopeo);
	}
	if (r >= 0) {
		struct lz_prepare_request req = {
			.storage_root = root,
			.layout_fd = layout.fd >= 0 ? layout.fd : transport.layout.fd,
			.tag = ref.kind != LZ_IMAGE_OCI ? "latest" : ref.tag[0] ? ref.tag : NULL,
			.source_ref = text,
			.progress = on_progress,
			.progress_ctx = &ctx,
		};
		/* The progress callback runs Lua while root (cfg's Storage Root)
		 * is in use: cfg:close() raises meanwhile. on_progress is
		 * protected, so nothing unwinds between the two. */
		lz_l_config_pin(L, 1, 1);
		r = lz_prepare_image(&req, &res, &err);
		lz_l_config_pin(L, 1, -1);
	}
	lz_path_release(&layout);
	lz_transport_discard(&transport);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 6);
	set_str(L, "artifact_id", res.artifact_id);
	set_str(L, "manifest_digest", res.manifest_digest);
	set_str(L, "config_digest", res.config_digest);
	set_int(L, "size", res.size);
	set_int(L, "skipped_devices", res.skipped_devices);
	lua_pushboolean(L, res.existed);
	lua_setfield(L, -2, "existed");
	return 1;
}

static int image_list(lua_State *L)
{
	const struct lz_path *root = storage_root(L);
	struct lz_catalog_artifact *v = NULL;
	size_t n = 0;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns v while the result is built */
	int r = lz_catalog_artifact_list(root->fd, &v, &n, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ v, n, artifact_list_free };
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_createtable(L, 0, 8);
		set_str(L, "id", v[i].id);
		set_str(L, "source", v[i].source_ref);
		set_str(L, "manifest_digest", v[i].manifest_digest);
		set_str(L, "config_digest", v[i].config_digest);
		set_int(L, "size", v[i].size);
		set_int(L, "leases", v[i].lease_count);
		set_str(L, "state", v[i].state == LZ_CATALOG_ARTIFACT_PUBLISHED ? "published"
											: "quarantined");
		lua_pushinteger(L, v[i].created);
		lua_setfield(L, -2, "created");
		lua_seti(L, -2, (lua_Integer)i + 1);
	}
	lz_l_box_release(box);
	return 1;
}

static const char *const gc_actions[] = {
	[LZ_GC_REMOVED] = "removed",
	[LZ_GC_WOULD_REMOVE] = "would-remove",
	[LZ_GC_KEPT_LEASED] = "kept-leased",
	[LZ_GC_KEPT_FOREIGN] = "kept-foreign",
	[LZ_GC_KEPT_PREPARING] = "kept-preparing",
	[LZ_GC_REMOVED_STAGING] = "removed-abandoned",
	[LZ_GC_WOULD_REMOVE_STAGING] = "would-remove-abandoned",
	[LZ_GC_KEPT_POLICY] = "kept-policy",
};

static int image_gc(lua_State *L)
{
	static const char *const keys[] = { "dry_run", "keep", "spare", NULL };
	const char *spare = NULL;
	const struct lz_path *root = storage_root(L);
	bool dry_run = false;
	lua_Integer keep = 0;
	if (!lua_isnoneornil(L, 2)) {
		lz_l_check_options(L, 2, keys);
		lua_pushliteral(L, "dry_run");
		lua_rawget(L, 2);
		dry_run = lua_toboolean(L, -1);
		lua_pop(L, 1);
		lua_pushliteral(L, "keep");
		if (lua_rawget(L, 2) != LUA_TNIL)
			keep = luaL_checkinteger(L, -1);
		lua_pop(L, 1);
		luaL_argcheck(L, keep >= 0 && keep <= LZ_KEEP_IMAGES_MAX, 2, "keep must be 0 to 1000");
		spare = lz_l_opt_string(L, 2, "spare"); /* kept on the stack */
	}
	struct lz_gc_item *items = NULL;
	size_t n = 0;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns items while the result is built */
	int r = lz_prepare_gc(root, dry_run, (size_t)keep, spare, &items, &n, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ items, n, lz_l_box_free };
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_createtable(L, 0, 4);
		set_str(L, "action", gc_actions[items[i].action]);
		set_str(L, "where", items[i].where);
		set_str(L, "name", items[i].name);
		set_int(L, "leases", items[i].leases);
		lua_seti(L, -2, (lua_Integer)i + 1);
	}
	lz_l_box_release(box);
	return 1;
}

static int image_build_default(lua_State *L)
{
	const struct lz_path *root = storage_root(L);
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns ref while it is pushed */
	char *ref = NULL;
	struct lz_path mmdebstrap = LZ_PATH_INIT;
	int r = lz_config_host_tool(lz_l_check_config(L, 1), "mmdebstrap", "building the default image",
				    "mmdebstrap", &mmdebstrap, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	r = lz_default_image_build(root, &mmdebstrap, &ref, &err);
	lz_path_release(&mmdebstrap);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ ref, 0, lz_l_box_free };
	lua_pushstring(L, ref);
	lz_l_box_release(box);
	return 1;
}

static const luaL_Reg functions[] = {
	{ "prepare", image_prepare },
	{ "build_default", image_build_default },
	{ "list", image_list },
	{ "gc", image_gc },
	{ NULL, NULL },
};

int luaopen_lazaret_image(lua_State *L)
{
	luaL_newlib(L, functions);
	return 1;
}
