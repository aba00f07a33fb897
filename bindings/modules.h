/* Every C binding module, by the name Lua requires it under. host.c and the
 * test module (spec_module.c) preload exactly this list. */
#ifndef LZ_BINDINGS_MODULES_H
#define LZ_BINDINGS_MODULES_H

#include <lua.h>

int luaopen_lazaret_config(lua_State *L);
int luaopen_lazaret_platform(lua_State *L);
int luaopen_lazaret_probe(lua_State *L);
int luaopen_lazaret_image(lua_State *L);
int luaopen_lazaret_domain(lua_State *L);

#define LZ_BINDING_MODULES                                  \
	{ "lazaret.core.config", luaopen_lazaret_config },     \
	{ "lazaret.core.platform", luaopen_lazaret_platform }, \
	{ "lazaret.core.probe", luaopen_lazaret_probe },       \
	{ "lazaret.core.image", luaopen_lazaret_image },       \
	{ "lazaret.core.domain", luaopen_lazaret_domain },

#endif
