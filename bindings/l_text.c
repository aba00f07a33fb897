/* lazaret.core.text: foreign text for terminals and logs.
 *
 *   text.escape(s)   [-0, +1, v] -> string
 *       s with control characters, escape sequences, invalid UTF-8 and
 *       bidirectional controls escaped (core/util/escape.h). Every string
 *       from an image, a sandbox or the network goes through it before it
 *       reaches a terminal or a log; the message sinks apply it to whole
 *       messages.
 */
#include <lauxlib.h>
#include <lua.h>

#include "modules.h"
#include "util/escape.h"

static int text_escape(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	if (n > ((size_t)1 << 24))
		return luaL_error(L, "text.escape: string of %zu bytes", n);
	size_t cap = LZ_ESCAPE_MAX(n) + 1;
	luaL_Buffer b; /* Lua's memory: a memory error while it is pushed leaks nothing */
	char *out = luaL_buffinitsize(L, &b, cap);
	size_t w = lz_escape(s, n, out, cap);
	luaL_pushresultsize(&b, w);
	return 1;
}

static const luaL_Reg functions[] = {
	{ "escape", text_escape },
	{ NULL, NULL },
};

int luaopen_lazaret_text(lua_State *L)
{
	luaL_newlib(L, functions);
	return 1;
}
