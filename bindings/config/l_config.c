/* lazaret.core.config: load and check the trusted configuration (spec 3.2).
 *
 *   config.load{config=, profile=, workspace=}  [-0, +1|3, e]
 *       -> handle | nil, msg, errno. Reads HOME and XDG_* from the process
 *       environment and the selected profile's env references; values of
 *       those references never cross into Lua.
 *   handle:summary()                            [-0, +1, e]
 *       -> { source, storage_root, runtime_root, runsc_dcache, max_memory_mib, keep_unused_images, profiles,
 *            profile?, workspace?, domain_id?, fingerprint? }
 *   handle:close()                              [-0, +0, -]  idempotent
 *   config.profile_name_valid(name)             [-0, +1, e] -> boolean
 *   config.init{config=, text=}                 [-0, +1|3, e]
 *       -> path written | nil, msg, errno: the first configuration; text is
 *       its content (at most LZ_DEFAULT_CONFIG_TEXT_MAX bytes, no NUL), else
 *       the built-in one whose profile `default` uses the default image
 *       (defaultimage.h)
 *   config.default_image()                      [-0, +1|3, e]
 *       -> "oci:<Storage Root>/images/default:latest" | nil, msg, errno:
 *       the image `init` names, for the Storage Root HOME and XDG_DATA_HOME
 *       select
 *
 * The handle owns the resolved configuration and its retained directory
 * descriptors; __gc and __close release them. */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "image/defaultimage.h"
#include "l_util.h"
#include "modules.h"

#define CONFIG_MT "lazaret.config"

struct config_ud {
	lz_config *cfg; /* NULL when closed */
	int pins;       /* borrowers of cfg: open coordinators, an image.prepare */
};

static struct config_ud *check_open(lua_State *L)
{
	struct config_ud *ud = luaL_checkudata(L, 1, CONFIG_MT);
	if (ud->cfg == NULL)
		luaL_error(L, "attempt to use a closed configuration");
	return ud;
}

const struct lz_config *lz_l_check_config(lua_State *L, int idx)
{
	struct config_ud *ud = luaL_checkudata(L, idx, CONFIG_MT);
	if (ud->cfg == NULL)
		luaL_error(L, "attempt to use a closed configuration");
	return ud->cfg;
}

void lz_l_config_pin(lua_State *L, int idx, int delta)
{
	struct config_ud *ud = luaL_checkudata(L, idx, CONFIG_MT);
	ud->pins += delta;
}

/* A borrower keeps the userdata reachable, and Lua finalizes in reverse
 * order of creation, so __gc never meets a pinned configuration; an
 * explicit close does, and refuses rather than free what is borrowed. */
static int config_close(lua_State *L)
{
	struct config_ud *ud = luaL_checkudata(L, 1, CONFIG_MT);
	if (ud->pins > 0)
		return luaL_error(L, "the configuration is in use (by an open coordinator, or an image.prepare "
				     "under way): close it after that");
	lz_config_free(ud->cfg);
	ud->cfg = NULL;
	return 0;
}

static int config_tostring(lua_State *L)
{
	struct config_ud *ud = luaL_checkudata(L, 1, CONFIG_MT);
	if (ud->cfg == NULL)
		lua_pushliteral(L, "lazaret.config (closed)");
	else
		lua_pushfstring(L, "lazaret.config (%p)", (void *)ud->cfg);
	return 1;
}

static void set_string(lua_State *L, const char *key, const char *value)
{
	if (value) {
		lua_pushstring(L, value);
		lua_setfield(L, -2, key);
	}
}

static int config_summary(lua_State *L)
{
	struct config_ud *ud = check_open(L);
	struct lz_config_summary s;
	lz_config_summarize(ud->cfg, &s);
	lua_createtable(L, 0, 10);
	set_string(L, "source", s.source);
	set_string(L, "storage_root", s.storage_root);
	set_string(L, "runtime_root", s.runtime_root);
	set_string(L, "profile", s.profile);
	set_string(L, "workspace", s.workspace);
	set_string(L, "domain_id", s.domain_id);
	set_string(L, "fingerprint", s.fingerprint);
	lua_pushinteger(L, s.runsc_dcache);
	lua_setfield(L, -2, "runsc_dcache");
	lua_pushinteger(L, s.max_memory_mib);
	lua_setfield(L, -2, "max_memory_mib");
	lua_pushinteger(L, s.keep_unused_images);
	lua_setfield(L, -2, "keep_unused_images");
	lua_pushinteger(L, (lua_Integer)s.n_profiles);
	lua_setfield(L, -2, "profiles");
	return 1;
}

static const char *process_getenv(const char *name)
{
	return getenv(name);
}

static int config_load(lua_State *L)
{
	static const char *const keys[] = { "config", "profile", "workspace", NULL };
	lz_l_check_options(L, 1, keys);
	/* The three strings stay on the stack, below the handle. */
	struct lz_config_request req = {
		.config_path = lz_l_opt_string(L, 1, "config"),
		.profile = lz_l_opt_string(L, 1, "profile"),
		.workspace = lz_l_opt_string(L, 1, "workspace"),
		.getenv = process_getenv,
	};
	lz_host_env_from_process(&req.env);

	/* Created closed, then filled: an allocation failure cannot leak. */
	struct config_ud *ud = lua_newuserdatauv(L, sizeof(*ud), 0);
	*ud = (struct config_ud){ .cfg = NULL, .pins = 0 };
	luaL_setmetatable(L, CONFIG_MT);

	char *cwd = getcwd(NULL, 0);
	req.cwd = cwd;
	struct lz_err err = { 0, "" };
	int r = lz_config_load(&req, &ud->cfg, &err);
	free(cwd);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	return 1;
}

static int profile_name_valid(lua_State *L)
{
	size_t len;
	const char *name = luaL_checklstring(L, 1, &len);
	lua_pushboolean(L, strlen(name) == len && lz_config_profile_name_valid(name));
	return 1;
}

static int config_init(lua_State *L)
{
	static const char *const keys[] = { "config", "text", NULL };
	lz_l_check_options(L, 1, keys);
	const char *explicit_path = lz_l_opt_string(L, 1, "config");
	size_t len;
	const char *text = lz_l_opt_lstring(L, 1, "text", &len);
	if (text && (len != strlen(text) || len > LZ_DEFAULT_CONFIG_TEXT_MAX))
		return luaL_error(L, "option 'text' must be at most %d bytes without NUL", LZ_DEFAULT_CONFIG_TEXT_MAX);
	struct lz_host_env env;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns path while it is pushed */
	char *path = NULL;
	lz_host_env_from_process(&env);
	char *cwd = getcwd(NULL, 0);
	int r = lz_default_config_write(&env, explicit_path, cwd, text, &path, &err);
	free(cwd);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ path, 0, lz_l_box_free };
	lua_pushstring(L, path);
	lz_l_box_release(box);
	return 1;
}

static int config_default_image(lua_State *L)
{
	struct lz_host_env env;
	struct lz_err err = { 0, "" };
	struct lz_l_box *box = lz_l_box_new(L); /* owns ref while it is pushed */
	char *ref = NULL;
	lz_host_env_from_process(&env);
	int r = lz_default_image_ref_for_env(&env, &ref, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	*box = (struct lz_l_box){ ref, 0, lz_l_box_free };
	lua_pushstring(L, ref);
	lz_l_box_release(box);
	return 1;
}

static const luaL_Reg functions[] = {
	{ "load", config_load },
	{ "init", config_init },
	{ "default_image", config_default_image },
	{ "profile_name_valid", profile_name_valid },
	{ NULL, NULL },
};

static const luaL_Reg methods[] = {
	{ "summary", config_summary },
	{ "close", config_close },
	{ NULL, NULL },
};

static const luaL_Reg metamethods[] = {
	{ "__gc", config_close },
	{ "__close", config_close },
	{ "__tostring", config_tostring },
	{ NULL, NULL },
};

int luaopen_lazaret_config(lua_State *L)
{
	lz_l_new_type(L, CONFIG_MT, methods, metamethods);
	luaL_newlib(L, functions);
	return 1;
}
