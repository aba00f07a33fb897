/* The lazaret executable: a C host that embeds Lua 5.4.
 *
 * Trust boundary (issue 2, C-REFINEMENT.md): the only Lua this process runs
 * is the bundle compiled into it. package.path/cpath are cleared and the
 * searchers reduced to package.preload, so LUA_PATH, the working directory
 * and writable paths are never consulted. Library functions that would give
 * Lua ambient authority (a shell, files by name, the environment, loading
 * code from disk or shared objects) are removed before any module runs; Lua
 * reaches the system only through the narrow binding modules.
 *
 * The process refuses to run as root before anything else happens. */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/fdutil.h"

#include "host_seal.h"

static int traceback(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	if (msg == NULL) {
		if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
			return 1;
		msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	}
	luaL_traceback(L, L, msg, 1);
	return 1;
}

/* Runs require("lazaret.main").main(argv) and returns its integer status. */
static int run_main(lua_State *L, int argc, char **argv)
{
	lua_pushcfunction(L, traceback);
	int handler = lua_gettop(L);
	lua_getglobal(L, "require");
	lua_pushliteral(L, "lazaret.main");
	if (lua_pcall(L, 1, 1, handler) != LUA_OK)
		goto fail;
	lua_getfield(L, -1, "main");
	lua_createtable(L, argc, 0);
	for (int i = 1; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_seti(L, -2, i);
	}
	if (lua_pcall(L, 1, 1, handler) != LUA_OK)
		goto fail;
	return lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 70;
fail:
	fprintf(stderr, "lazaret: internal error: %s\n", lua_tostring(L, -1));
	return 70; /* EX_SOFTWARE */
}

int main(int argc, char **argv)
{
	if (geteuid() == 0 || getuid() == 0) {
		fputs("lazaret: refusing to run as root: the sandbox must not hold host root "
		      "authority (spec SR-1); run lazaret as your normal user\n",
		      stderr);
		return 77; /* EX_NOPERM */
	}
	/* A closed standard stream would give its number to the control
	 * socket, which a session then passes to the guest as that stream. */
	if (lz_fds_std_open() < 0) {
		fputs("lazaret: cannot open /dev/null for a closed standard stream\n", stderr);
		return 71; /* EX_OSERR */
	}
	lua_State *L = luaL_newstate();
	if (L == NULL) {
		fputs("lazaret: out of memory\n", stderr);
		return 71;
	}
	luaL_openlibs(L);
	lz_host_seal(L);
	int status = run_main(L, argc, argv);
	/* What was to be printed and was not (a full disk, /dev/full, a closed
	 * pipe) is a failure, never an exit 0 with the output missing. */
	if ((fflush(stdout) != 0 || ferror(stdout)) && status == 0) {
		fprintf(stderr, "lazaret: error: standard output: %s\n", strerror(errno ? errno : EIO));
		status = 74; /* EX_IOERR */
	}
	lua_close(L);
	return status;
}
