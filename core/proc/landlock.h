/* Landlock for the helpers that parse what the sandbox sends (the
 * workspace router, the egress proxy, the canary responder): what a bug
 * there could still do with the developer's files, sockets and signals
 * (spec 3.7: each process holds only the authority its step needs;
 * docs/threat-model.md). A layer under the checks, not one of them: each
 * helper already refuses what it must by its own code.
 *
 * The restriction is the kernel's, for the calling thread and whatever it
 * starts later, and cannot be undone: call it before the first thread. */
#ifndef LZ_PROC_LANDLOCK_H
#define LZ_PROC_LANDLOCK_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

struct lz_landlock {
	/* Opening files and listing directories anywhere (the router reads
	 * the developer's Git configuration and excludes file); false: none. */
	bool read_files;
	/* Directories beneath which files may be written, truncated, made,
	 * removed, renamed and linked. Everywhere else: none of that. */
	const int *write_dirs;
	size_t n_write_dirs;
	/* Connecting TCP sockets (the egress proxy's upstream connections). */
	bool connect_tcp;
};

/* Sets no_new_privs and restricts the calling thread: executing any
 * file, any file access l does not grant, binding TCP sockets and, unless
 * l grants it, connecting them (from ABI 4: the helpers' listeners are
 * made before), connecting
 * to abstract Unix sockets and signalling processes outside the
 * restriction (from ABI 6). Rights the running kernel's ABI lacks are
 * not restricted.
 *
 * Returns the ABI applied (>= 1); 0 with nothing changed when the kernel
 * has no Landlock (not built, or not enabled at boot: lz_landlock_abi);
 * -errno with a message otherwise. */
int lz_landlock_restrict(const struct lz_landlock *l, struct lz_err *err);

/* The running kernel's Landlock ABI version, 0 when it has none. */
int lz_landlock_abi(void);

#endif
