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

/* The bounds of the environment block the kernel put on the stack at
 * exec (/proc/self/stat fields 50 and 51): /proc/<pid>/environ shows it
 * whatever environ points to later. A forked child has its parent's: a
 * parent reads them for a child that cannot (one that joined a mount
 * namespace whose /proc is another PID namespace's). 0 or -errno. */
int lz_env_block(uintptr_t *start, uintptr_t *end);

/* lz_env_limit with the block's bounds read before (lz_env_block). */
int lz_env_limit_block(const char *const *keep, uintptr_t start, uintptr_t end);

#endif
