/* Capability confinement of a helper process (spec 3.7: each process holds
 * only the authority its step needs). Capabilities are per thread: call
 * before the process starts any thread. */
#ifndef LZ_PROC_CAPS_H
#define LZ_PROC_CAPS_H

#include <stdint.h>

/* The mask of capability c, for lz_caps_limit. */
#define LZ_CAP(c) (UINT64_C(1) << (c))

/* Keeps only the capabilities in keep (permitted and effective; the
 * bounding set drops every other one, the inheritable and ambient sets
 * empty) and sets no_new_privs, so no later exec can gain one. Returns 0,
 * or -errno with the sets possibly partly dropped. */
int lz_caps_limit(uint64_t keep);

#endif
