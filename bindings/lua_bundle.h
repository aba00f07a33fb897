/* The Lua modules compiled into the binary (generated table). */
#ifndef LZ_LUA_BUNDLE_H
#define LZ_LUA_BUNDLE_H

#include <stddef.h>

struct lz_lua_module {
	const char *name;  /* "lazaret.cli" */
	const char *chunk; /* "@lazaret/cli.lua", for tracebacks */
	const char *source;
	size_t len;
};

/* Terminated by an entry whose name is NULL. */
extern const struct lz_lua_module lz_lua_modules[];

#endif
