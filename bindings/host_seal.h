/* Seals a Lua state for trusted code; see host_seal.c. */
#ifndef LZ_HOST_SEAL_H
#define LZ_HOST_SEAL_H

#include <lua.h>

/* [-0, +0, e] After luaL_openlibs: strips ambient-authority functions and
 * the debug library, makes load accept source text only, empties
 * package.path/cpath, keeps only the preload searcher and preloads the
 * binding modules and the compiled-in Lua bundle. */
void lz_host_seal(lua_State *L);

#endif
