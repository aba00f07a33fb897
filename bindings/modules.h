/* Every C binding module, by the name Lua requires it under. host.c and the
 * test module (spec_module.c) preload exactly this list. */
#ifndef LZ_BINDINGS_MODULES_H
#define LZ_BINDINGS_MODULES_H

#include <lua.h>

int luaopen_lazaret_errno(lua_State *L);
int luaopen_lazaret_config(lua_State *L);
int luaopen_lazaret_platform(lua_State *L);
int luaopen_lazaret_probe(lua_State *L);
int luaopen_lazaret_image(lua_State *L);
int luaopen_lazaret_coordinator(lua_State *L);
int luaopen_lazaret_dstore(lua_State *L);
int luaopen_lazaret_rs(lua_State *L);
int luaopen_lazaret_supervisor(lua_State *L);
int luaopen_lazaret_session(lua_State *L);
int luaopen_lazaret_scratch(lua_State *L);
int luaopen_lazaret_script(lua_State *L);
int luaopen_lazaret_text(lua_State *L);
int luaopen_lazaret_state(lua_State *L);

#define LZ_BINDING_MODULES                                  \
	{ "lazaret.core.errno", luaopen_lazaret_errno },       \
	{ "lazaret.core.config", luaopen_lazaret_config },     \
	{ "lazaret.core.platform", luaopen_lazaret_platform }, \
	{ "lazaret.core.probe", luaopen_lazaret_probe },       \
	{ "lazaret.core.image", luaopen_lazaret_image },       \
	{ "lazaret.core.coordinator", luaopen_lazaret_coordinator }, \
	{ "lazaret.core.dstore", luaopen_lazaret_dstore },     \
	{ "lazaret.core.rs", luaopen_lazaret_rs },             \
	{ "lazaret.core.supervisor", luaopen_lazaret_supervisor }, \
	{ "lazaret.core.session", luaopen_lazaret_session },   \
	{ "lazaret.core.scratch", luaopen_lazaret_scratch },   \
	{ "lazaret.core.script", luaopen_lazaret_script },     \
	{ "lazaret.core.text", luaopen_lazaret_text },         \
	{ "lazaret.core.state", luaopen_lazaret_state },

#endif
