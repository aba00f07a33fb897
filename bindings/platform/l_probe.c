/* lazaret.core.probe: the host readiness probes of core/hostprobe.h in Lua.
 *
 * Translation only: the judgement (which kernel is new enough, how many
 * subordinate IDs suffice, what to tell the user) lives in
 * lua/lazaret/diag.lua. Misuse (wrong argument type, extra arguments, a
 * relative path, a tool name outside the allow-list) raises; environment
 * failures return nil, "<op> '<path>': <reason>", errno. No descriptor
 * reaches Lua. Stack effects as in the Lua manual ([-pop, +push, x]; x = v:
 * raises on misuse, m: only on memory errors):
 *
 *   probe.kernel()        [-0, +1, m]      {release=, machine=, major=, minor=}
 *                                          (major, minor absent when the
 *                                          release does not parse)
 *   probe.identity()      [-0, +1, m]      {uid=, gid=, user=} (user absent
 *                                          without a passwd entry)
 *   probe.subids(kind)    [-1, +(1|3), v]  kind "uid"|"gid": the invoking
 *                                          user's ranges {{start=, count=}, ...}
 *                                          in file order (possibly empty), or
 *                                          nil, msg, errno
 *   probe.subid_range(kind) [-1, +(1|3), v] kind "uid"|"gid": the range a
 *                                          launch maps, judged as the launch
 *                                          judges it (lz_hostprobe_subid_range:
 *                                          the lowest of >= 65536 IDs, none
 *                                          holding ID 0, a system ID or yours):
 *                                          {start=, count=}, or nil, msg, errno
 *                                          (ENOENT none, EPERM unsafe)
 *   probe.file(path)      [-1, +(1|3), v]  {type=, mode=, uid=, gid=, size=,
 *                                          setuid=, setgid=} (follows no
 *                                          symlink and enters no automount
 *                                          directory: lz_hostprobe_file; mode =
 *                                          permission bits incl. setuid/setgid/
 *                                          sticky; type "file"|"directory"|
 *                                          "char"|"block"|"fifo"|"socket"|
 *                                          "other"), or nil, msg, errno
 *   probe.device_rw(path) [-1, +(1|3), v]  path one of probe.devices: true,
 *                                          or nil, msg, errno
 *   probe.userns()        [-0, +(1|3), v]  true, or nil, msg, errno
 *   probe.locate(name)    [-1, +(1|3), v]  the canonical path of the checked
 *                                          tool (lz_hostprobe_tool_locate), or
 *                                          nil, msg, errno
 *   probe.tool(name)      [-1, +(1|3), v]  {path=, version=} (first line of
 *                                          `<path> --version`), or nil, msg,
 *                                          errno
 *   probe.descriptors()   [-0, +1, m]      {soft=, hard=, dcache_cap=}: this
 *                                          process's RLIMIT_NOFILE (-1 for
 *                                          unlimited) and the runsc dentry
 *                                          cache a launch would allow under
 *                                          the hard limit (rsplan.h)
 *   probe.egress()        [-0, +(1|3), m]  {tcp_pressure=, max_connections=,
 *                                          upstream_rcvbuf=}: the host's TCP
 *                                          memory pressure threshold (bytes)
 *                                          and what the egress proxy would
 *                                          allow under it (egressproxy.h), or
 *                                          nil, msg, errno
 *   probe.memory()        [-0, +(1|3), m]  {budget=, chunk=}: the memory every
 *                                          sandbox of the host may hold
 *                                          together and its chunk, bytes
 *                                          (runtime/memwatch.h), or nil, msg,
 *                                          errno
 *   probe.library(name)   [-1, +(1|3), v]  name "libgit2"|"libarchive": loads
 *                                          the library Lazaret opens when first
 *                                          used (util/lazylib.h): {soname=}, or
 *                                          nil, msg, errno
 *   probe.landlock()      [-0, +1, -]      the running kernel's Landlock ABI
 *                                          version, 0 without Landlock
 *                                          (proc/confine.h)
 *   probe.runtime_root()  [-0, +(1|3), m]  {path=, exists=, creatable=, type=,
 *                                          uid=, mode=}: the Runtime Root a
 *                                          launch would use ($XDG_RUNTIME_DIR/
 *                                          lazaret; type, uid, mode when it
 *                                          exists, reached with no symlink;
 *                                          creatable when it does not: its
 *                                          closest existing ancestor is a
 *                                          directory you may write), or nil,
 *                                          msg, errno
 *   probe.tools           table            the allowed tool names, in order
 *   probe.devices         table            the devices device_rw probes
 *   probe.trusted_dirs    table            the directories tools come from
 *   probe.errno           table            lazaret.core.errno (l_errno.c) */
#include <errno.h>
#include <lauxlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfgsource.h"
#include "fs/pathauth.h"
#include "image/archivelib.h"
#include "net/egressproxy.h"
#include "platform/hostprobe.h"
#include "proc/confine.h"
#include "router/gitlib.h"
#include "runtime/memwatch.h"
#include "runtime/rsplan.h"
#include "l_util.h"
#include "modules.h"

/* Raises when more than n arguments were passed. */
static void check_nargs(lua_State *L, int n)
{
	if (lua_gettop(L) > n)
		luaL_argerror(L, n + 1, "no value expected");
}

/* An absolute path without NUL bytes. */
static const char *check_path(lua_State *L, int arg)
{
	size_t len;
	const char *path = luaL_checklstring(L, arg, &len);
	luaL_argcheck(L, strlen(path) == len, arg, "path contains a NUL byte");
	luaL_argcheck(L, path[0] == '/', arg, "path must be absolute");
	return path;
}

static void set_int(lua_State *L, const char *key, lua_Integer v)
{
	lua_pushinteger(L, v);
	lua_setfield(L, -2, key);
}

static void set_str(lua_State *L, const char *key, const char *v)
{
	lua_pushstring(L, v);
	lua_setfield(L, -2, key);
}

static void set_bool(lua_State *L, const char *key, int v)
{
	lua_pushboolean(L, v);
	lua_setfield(L, -2, key);
}

static int l_kernel(lua_State *L)
{
	struct lz_err err = { 0 };
	struct lz_hostprobe_kernel k;
	check_nargs(L, 0);
	int r = lz_hostprobe_kernel(&err, &k);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 4);
	set_str(L, "release", k.release);
	set_str(L, "machine", k.machine);
	if (k.version_known) {
		set_int(L, "major", k.major);
		set_int(L, "minor", k.minor);
	}
	return 1;
}

static int l_identity(lua_State *L)
{
	struct lz_err err = { 0 };
	struct lz_hostprobe_identity id;
	check_nargs(L, 0);
	int r = lz_hostprobe_identity(&err, &id);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 3);
	set_int(L, "uid", id.uid);
	set_int(L, "gid", id.gid);
	if (id.has_user)
		set_str(L, "user", id.user);
	return 1;
}

static int l_subids(lua_State *L)
{
	static const char *const kinds[] = { "uid", "gid", NULL };
	struct lz_err err = { 0 };
	struct lz_hostprobe_identity id;
	struct lz_hostprobe_subids ids;
	int kind = luaL_checkoption(L, 1, NULL, kinds);
	check_nargs(L, 1);
	int r = lz_hostprobe_identity(&err, &id);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	r = lz_hostprobe_subids(kind == 0 ? LZ_HOSTPROBE_SUBUID : LZ_HOSTPROBE_SUBGID,
				id.has_user ? id.user : NULL, id.uid, &err, &ids);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, (int)ids.n, 0);
	for (size_t i = 0; i < ids.n; i++) {
		lua_createtable(L, 0, 2);
		set_int(L, "start", ids.ranges[i].start);
		set_int(L, "count", ids.ranges[i].count);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

static int l_subid_range(lua_State *L)
{
	static const char *const kinds[] = { "uid", "gid", NULL };
	struct lz_err err = { 0 };
	struct lz_hostprobe_identity id;
	struct lz_hostprobe_subid_range range;
	int kind = luaL_checkoption(L, 1, NULL, kinds);
	check_nargs(L, 1);
	int r = lz_hostprobe_identity(&err, &id);
	if (r == 0)
		r = lz_hostprobe_subid_range(kind == 0 ? LZ_HOSTPROBE_SUBUID : LZ_HOSTPROBE_SUBGID, &id, &err,
					     &range);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 2);
	set_int(L, "start", range.start);
	set_int(L, "count", range.count);
	return 1;
}

static const char *file_type(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "directory";
	case S_IFCHR:
		return "char";
	case S_IFBLK:
		return "block";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	default:
		return "other";
	}
}

static int l_file(lua_State *L)
{
	struct lz_err err = { 0 };
	struct lz_hostprobe_file f;
	const char *path = check_path(L, 1);
	check_nargs(L, 1);
	int r = lz_hostprobe_file(path, &err, &f);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 7);
	set_str(L, "type", file_type(f.mode));
	set_int(L, "mode", f.mode & 07777);
	set_int(L, "uid", f.uid);
	set_int(L, "gid", f.gid);
	set_int(L, "size", f.size);
	set_bool(L, "setuid", (f.mode & S_ISUID) != 0);
	set_bool(L, "setgid", (f.mode & S_ISGID) != 0);
	return 1;
}

static int l_device_rw(lua_State *L)
{
	struct lz_err err = { 0 };
	/* Only the devices Lazaret needs: opening another can be an action
	 * (a serial port's DTR resets a board), and reports choose the path. */
	(void)check_path(L, 1); /* no NUL byte that checkoption's strcmp would stop at */
	const char *path = lz_hostprobe_devices[luaL_checkoption(L, 1, NULL, lz_hostprobe_devices)];
	check_nargs(L, 1);
	int r = lz_hostprobe_device_rw(path, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_userns(lua_State *L)
{
	struct lz_err err = { 0 };
	check_nargs(L, 0);
	int r = lz_hostprobe_userns(&err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_locate(lua_State *L)
{
	struct lz_err err = { 0 };
	struct lz_path tool = LZ_PATH_INIT;
	char path[LZ_HOSTPROBE_PATH_MAX];
	const char *name = lz_hostprobe_tool_names[luaL_checkoption(L, 1, NULL,
								     lz_hostprobe_tool_names)];
	check_nargs(L, 1);
	int r = lz_hostprobe_tool_locate(name, &err, &tool);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	/* Released before any Lua call that could raise. */
	snprintf(path, sizeof(path), "%s", tool.canonical);
	lz_path_release(&tool);
	lua_pushstring(L, path);
	return 1;
}

static int l_tool(lua_State *L)
{
	struct lz_err err = { 0 };
	struct lz_hostprobe_tool *t;
	const char *name = lz_hostprobe_tool_names[luaL_checkoption(L, 1, NULL,
								     lz_hostprobe_tool_names)];
	check_nargs(L, 1);
	/* ~4 KiB result: keep it off the C stack, owned by Lua (no leak if a
	 * push below raises a memory error). */
	t = lua_newuserdatauv(L, sizeof(*t), 0);
	int r = lz_hostprobe_tool_version(name, &err, t);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 2);
	set_str(L, "path", t->path);
	set_str(L, "version", t->version);
	return 1;
}

static lua_Integer limit_value(rlim_t v)
{
	return v == RLIM_INFINITY || v > (rlim_t)LUA_MAXINTEGER ? -1 : (lua_Integer)v;
}

static int l_descriptors(lua_State *L)
{
	struct rlimit rl;
	check_nargs(L, 0);
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		struct lz_err err = { 0 };
		return lz_l_fail(L, lz_err_set(&err, errno, "getrlimit: %s", strerror(errno)), &err);
	}
	lua_createtable(L, 0, 3);
	lua_pushinteger(L, limit_value(rl.rlim_cur));
	lua_setfield(L, -2, "soft");
	lua_pushinteger(L, limit_value(rl.rlim_max));
	lua_setfield(L, -2, "hard");
	lua_pushinteger(L, (lua_Integer)lz_rsplan_dcache_cap(rl.rlim_max));
	lua_setfield(L, -2, "dcache_cap");
	return 1;
}

static int l_egress(lua_State *L)
{
	struct lz_err err = { 0 };
	struct lz_egress_limits lim;
	uint64_t pressure;
	check_nargs(L, 0);
	int r = lz_egress_tcp_pressure(&pressure, &err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lz_egress_limits_for(pressure, &lim);
	lua_createtable(L, 0, 3);
	lua_pushinteger(L, pressure > (uint64_t)LUA_MAXINTEGER ? LUA_MAXINTEGER : (lua_Integer)pressure);
	lua_setfield(L, -2, "tcp_pressure");
	lua_pushinteger(L, (lua_Integer)lim.max_connections);
	lua_setfield(L, -2, "max_connections");
	lua_pushinteger(L, lim.upstream_rcvbuf);
	lua_setfield(L, -2, "upstream_rcvbuf");
	return 1;
}

static int l_memory(lua_State *L)
{
	struct lz_err err = { 0 };
	check_nargs(L, 0);
	uint64_t budget = lz_memwatch_host_budget();
	if (budget == UINT64_MAX)
		return lz_l_fail(L, lz_err_set(&err, EIO, "the host's memory cannot be read (sysinfo)"), &err);
	lua_createtable(L, 0, 2);
	lua_pushinteger(L, budget > (uint64_t)LUA_MAXINTEGER ? LUA_MAXINTEGER : (lua_Integer)budget);
	lua_setfield(L, -2, "budget");
	lua_pushinteger(L, (lua_Integer)lz_memwatch_chunk(budget));
	lua_setfield(L, -2, "chunk");
	return 1;
}

static int l_landlock(lua_State *L)
{
	check_nargs(L, 0);
	lua_pushinteger(L, lz_confine_landlock_abi());
	return 1;
}

static int l_library(lua_State *L)
{
	static const char *const names[] = { "libgit2", "libarchive", NULL };
	int which = luaL_checkoption(L, 1, NULL, names);
	check_nargs(L, 1);
	struct lz_err err = { 0, "" };
	int r = which == 0 ? lz_gitlib_load(&err) : lz_archivelib_load(&err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_createtable(L, 0, 1);
	lua_pushstring(L, which == 0 ? lz_gitlib_soname : lz_archivelib_soname);
	lua_setfield(L, -2, "soname");
	return 1;
}

/* Whether a launch could make path: its closest existing ancestor is a
 * directory the invoking user may write (lz_path_open_owned_root makes
 * the rest). */
static bool creatable(const char *path)
{
	char buf[LZ_PATH_MAX + 1];
	if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
		return false;
	for (char *slash = strrchr(buf, '/'); slash != NULL; slash = strrchr(buf, '/')) {
		slash[slash == buf] = '\0'; /* "/x" leaves "/" */
		struct stat st;
		if (lstat(buf, &st) == 0)
			return S_ISDIR(st.st_mode) && access(buf, W_OK | X_OK) == 0;
		if (errno != ENOENT || slash == buf)
			return false;
	}
	return false;
}

static int l_runtime_root(lua_State *L)
{
	struct lz_err err = { 0, "" };
	struct lz_host_env env;
	char *path = NULL;
	check_nargs(L, 0);
	struct lz_l_box *box = lz_l_box_new(L); /* owns path while the result is built */
	lz_host_env_from_process(&env);
	int r = lz_cfgsource_runtime_root(&env, &path, &err);
	*box = (struct lz_l_box){ path, 0, lz_l_box_free };
	if (r == 0)
		r = lz_path_grammar(path, strlen(path), &err);
	/* What Lua is told about the directory, taken before any Lua runs:
	 * the descriptor is closed by then. */
	struct lz_path root = LZ_PATH_INIT;
	int opened = r == 0 ? lz_path_open(path, &root, &err) : 0;
	mode_t mode = root.mode;
	uid_t uid = root.uid;
	lz_path_release(&root);
	if (r < 0 || (opened < 0 && opened != -ENOENT)) {
		lz_l_box_release(box);
		return lz_l_fail(L, r < 0 ? r : opened, &err);
	}
	lua_createtable(L, 0, 5);
	set_str(L, "path", path);
	set_bool(L, "exists", opened == 0);
	if (opened != 0)
		set_bool(L, "creatable", creatable(path));
	lz_l_box_release(box);
	if (opened == 0) {
		set_str(L, "type", file_type(mode));
		set_int(L, "uid", uid);
		set_int(L, "mode", mode & 07777);
	}
	return 1;
}

static void push_string_list(lua_State *L, const char *const *list)
{
	lua_newtable(L);
	for (lua_Integer i = 0; list[i]; i++) {
		lua_pushstring(L, list[i]);
		lua_rawseti(L, -2, i + 1);
	}
}

int luaopen_lazaret_probe(lua_State *L)
{
	static const luaL_Reg functions[] = {
		{ "kernel", l_kernel },
		{ "identity", l_identity },
		{ "subids", l_subids },
		{ "subid_range", l_subid_range },
		{ "file", l_file },
		{ "device_rw", l_device_rw },
		{ "userns", l_userns },
		{ "locate", l_locate },
		{ "tool", l_tool },
		{ "descriptors", l_descriptors },
		{ "egress", l_egress },
		{ "memory", l_memory },
		{ "library", l_library },
		{ "landlock", l_landlock },
		{ "runtime_root", l_runtime_root },
		{ NULL, NULL },
	};

	luaL_newlib(L, functions);
	push_string_list(L, lz_hostprobe_tool_names);
	lua_setfield(L, -2, "tools");
	push_string_list(L, lz_hostprobe_trusted_dirs);
	lua_setfield(L, -2, "trusted_dirs");
	push_string_list(L, lz_hostprobe_devices);
	lua_setfield(L, -2, "devices");
	lz_l_push_errno(L);
	lua_setfield(L, -2, "errno");
	return 1;
}
