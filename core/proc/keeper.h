/* lazaret-keeper: the parent of an escalated host command (spec 3.8),
 * which ends with the command everything the command started.
 *
 * A host command runs as the developer. Its process group is not enough
 * to hold what it starts: a daemon that detaches (setsid, a double fork)
 * leaves the group, and nothing here has a cgroup to put around it
 * (C-REFINEMENT 12). The keeper is the command's parent and the
 * subreaper of all it starts, so whatever detaches stays its descendant:
 *
 *   lazaret-keeper EXE_FD STATUS_FD ARGS_FD
 *
 * execs the command from EXE_FD (the argument vector in the memory file
 * ARGS_FD, each string NUL-terminated: not in the keeper's own command
 * line, which a `pkill -f` of the command's would match; the keeper's
 * own environment) in a child of its own process group, and reports an
 * exec failure on STATUS_FD as lz_spawn_start's child does (its errno),
 * or a keeper that cannot do its work as an lz_spawn_failure record. Once
 * the command exits, or its parent sends it SIGTERM, SIGHUP or SIGINT
 * (the coordinator's cancellation, and its parent-death signal; the same
 * from anyone else is ignored), it kills every process below it, reaps
 * them all, and exits as the command did (its code, or the signal that
 * ended it; SIGKILL when it was stopped from outside first). A
 * descendant held in the kernel past SIGKILL (a FUSE request) is waited
 * for; one of another user (a daemon sudo started) is left.
 *
 * What it cannot hold: a process the command has another program start
 * (a service manager, an agent already running), and anything after the
 * keeper itself is killed with SIGKILL (the command runs as the same
 * user, and may). The coordinator signals it with SIGTERM only. */
#ifndef LZ_KEEPER_H
#define LZ_KEEPER_H

#include <stddef.h>

/* The program's bytes, embedded into lazaret (CMakeLists.txt) and exec'd
 * from a sealed memory file. */
extern const unsigned char lz_keeper_program[];
extern const size_t lz_keeper_program_len;

/* argv[0] the keeper is given (what `ps` shows for it). */
#define LZ_KEEPER_NAME "lazaret-keeper"

/* The most bytes of the command's argument vector it takes (ARG_MAX's
 * usual 2 MiB, and more). */
#define LZ_KEEPER_ARGS_MAX (4 << 20)

#endif
