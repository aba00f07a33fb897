/* The bytes of lazaret-router (bindings/router_proc.c, routerproc.h),
 * embedded at build time so each generation's router is exactly the
 * program lazaret was built with, exec'd from a sealed memory file. */
#ifndef LZ_ROUTER_ROUTER_PROGRAM_H
#define LZ_ROUTER_ROUTER_PROGRAM_H

#include <stddef.h>

extern const unsigned char lz_router_program[];
extern const size_t lz_router_program_len;

#endif
