/* lazaret.core.platform: the platform floor and build facts.
 *
 *   platform.check()   [-0, +1|3, -] -> true | nil, msg, errno
 *       x86-64 Linux >= 6.9 (spec 3.3), checked before anything is created.
 *   platform.stderr_is_tty()  [-0, +1, -] -> boolean (progress display)
 *   platform.monotonic_ms()   [-0, +1, -] -> integer, CLOCK_MONOTONIC in ms
 *       (durations: the sealed host has no wall clock finer than os.time)
 *   platform.confirm(question)  [-1, +1, e] -> true | false | nil
 *       Asks question on standard error and reads one line from standard
 *       input: true for "y" or "yes", false for anything else; nil (no
 *       question asked) when standard input is not a terminal.
 *   platform.sleep_ms(n)      [-1, +0, e] waits n ms (0..1000)
 *   platform.version   string, the Lazaret version
 */
#include <lauxlib.h>
#include <lua.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "l_util.h"
#include "modules.h"
#include "platform/platform.h"
#include "proc/spawn.h"

static int platform_check(lua_State *L)
{
	struct lz_err err = { 0, "" };
	int r = lz_platform_check(&err);
	if (r < 0)
		return lz_l_fail(L, r, &err);
	lua_pushboolean(L, 1);
	return 1;
}

static int stderr_is_tty(lua_State *L)
{
	lua_pushboolean(L, isatty(STDERR_FILENO));
	return 1;
}

static int platform_confirm(lua_State *L)
{
	size_t len;
	const char *q = luaL_checklstring(L, 1, &len);
	if (!isatty(STDIN_FILENO)) {
		lua_pushnil(L);
		return 1;
	}
	(void)!write(STDERR_FILENO, q, len);
	char line[64];
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t r = read(STDIN_FILENO, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || c == '\n')
			break;
		if (n < sizeof(line) - 1)
			line[n++] = c;
	}
	line[n] = '\0';
	lua_pushboolean(L, strcmp(line, "y") == 0 || strcmp(line, "yes") == 0);
	return 1;
}

static int platform_sleep_ms(lua_State *L)
{
	lua_Integer ms = luaL_checkinteger(L, 1);
	luaL_argcheck(L, ms >= 0 && ms <= 1000, 1, "0 to 1000 ms");
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return 0;
}

static int monotonic_ms(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)lz_now_ms());
	return 1;
}

static const luaL_Reg functions[] = {
	{ "check", platform_check },
	{ "confirm", platform_confirm },
	{ "sleep_ms", platform_sleep_ms },
	{ "monotonic_ms", monotonic_ms },
	{ "stderr_is_tty", stderr_is_tty },
	{ NULL, NULL },
};

int luaopen_lazaret_platform(lua_State *L)
{
	luaL_newlib(L, functions);
	lua_pushliteral(L, LZ_VERSION);
	lua_setfield(L, -2, "version");
	return 1;
}
