/* Confinement of a helper (the router, the egress proxy; spec 3.7: each
 * process holds only the authority its step needs): its capabilities and,
 * for one forked without exec, the developer's environment it inherited.
 * Both are per process only before it starts a thread: call them first. */
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

/* Keeps only the environment variables named in keep (NULL-terminated);
 * the rest of the developer's environment (tokens, agents' sockets) goes,
 * the strings of the block the process was started with zeroed too (what
 * /proc/<pid>/environ shows). Returns 0 or -errno. */
int lz_env_limit(const char *const *keep);

#endif
