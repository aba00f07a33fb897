/* The bytes of lazaret-init (core/init/sandbox_init.c), the statically
 * linked root init of the Agent Sandbox (spec 3.7), embedded at build time
 * by scripts/embed_binary.cmake so the product writes out exactly the init
 * it was built with and never takes one from a writable path. */
#ifndef LZ_INIT_SANDBOX_INIT_BLOB_H
#define LZ_INIT_SANDBOX_INIT_BLOB_H

#include <stddef.h>

extern const unsigned char lz_sandbox_init[];
extern const size_t lz_sandbox_init_len;

#endif
