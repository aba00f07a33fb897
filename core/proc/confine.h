/* Confinement of the helpers that parse what the sandbox sends (the
 * workspace router, the egress proxy, the canary responder): what a bug
 * there could still do with the developer's files, sockets and signals
 * (spec 3.7: each process holds only the authority its step needs;
 * docs/threat-model.md). A layer under the checks, not one of them: each
 * helper already refuses what it must by its own code.
 *
 * Two of the kernel's mechanisms: Landlock (files, TCP, abstract sockets,
 * signals) and a seccomp filter on the sockets a helper may make
 * (Landlock does not cover connecting to a named Unix socket, where the
 * developer's session bus would run what it is asked, or the SSH agent
 * sign for it). Both are for the calling thread and whatever it starts
 * later, and cannot be undone: call lz_confine before the first thread. */
#ifndef LZ_PROC_CONFINE_H
#define LZ_PROC_CONFINE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

struct lz_confine {
	/* Files that may be opened, and directories listed and read beneath
	 * (the router: the developer's Git configuration, router/gitreads.h),
	 * besides the write_dirs; anywhere with read_anywhere. Elsewhere:
	 * none. */
	const int *read_paths;
	size_t n_read_paths;
	bool read_anywhere;
	/* Directories beneath which files may be written, truncated, made,
	 * removed, renamed and linked. Everywhere else: none of that. */
	const int *write_dirs;
	size_t n_write_dirs;
	/* Making IPv4 sockets and connecting TCP ones (the egress proxy's
	 * upstream connections and DNS queries). Without it: no new socket
	 * of any family. */
	bool inet;
};

/* Sets no_new_privs and restricts the calling thread for good: no new
 * socket but IPv4 ones (c->inet), no io_uring (its operations would pass
 * the filter), no new namespace (unshare, setns, clone with CLONE_NEW*;
 * clone3 answers ENOSYS), no mount call and no key management call
 * (keyctl, add_key, request_key), and through Landlock: executing no
 * file, no file access c does not grant, no TCP bind and, without
 * c->inet, no TCP connect (ABI 4; the helpers' listeners are made
 * before), no connection to abstract Unix sockets and no signal to
 * processes outside the restriction (ABI 6). Landlock rights the running kernel's ABI lacks are not restricted.
 * glibc's unwinder (libgcc_s, which pthread_cancel loads on first use, as
 * libfuse's worker loop does at its end) is loaded first: confined, it
 * could no longer be read, and glibc would abort the helper.
 *
 * Returns the Landlock ABI applied (>= 1), or 0 when the kernel has no
 * Landlock (not built, or not enabled at boot: lz_confine_landlock_abi;
 * the socket filter is applied all the same); -errno with a message when
 * a descriptor or the kernel refuses (the helper must not go on). */
int lz_confine(const struct lz_confine *c, struct lz_err *err);

/* The running kernel's Landlock ABI version, 0 when it has none. */
int lz_confine_landlock_abi(void);

#endif
