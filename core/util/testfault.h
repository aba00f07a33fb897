/* Test builds only: lazaret-faults (CMakeLists.txt) compiles the modules
 * that use this with LZ_TEST_FAULTS, and LAZARET_TEST_FAULT=<name> breaks
 * one step of network readiness on purpose so an end-to-end test can watch
 * the attestation refuse it by name, (bind-workspace) binds the
 * workspace without the router, the baseline of bench/workspace, or
 * (reset-before-rename, reset-after-rename) kills a State Anchor reset at
 * that step, or (reset-second-rename-fails) fails its second one, or (helper-joins-late) holds slirp4netns until the RS waits
 * for it and then steps the RS into a throwaway network namespace, or
 * (egress-silence-2s) ends the egress proxy's wait for a tunnel's first
 * bytes after 2 s instead of 30, or (egress-least-host) sizes its
 * connections as on the smallest host, or (egress-opens-a-file) has the egress
 * proxy try to open a file once it is restricted and log what happened,
 * or (router-reaches-outside) has the router, whose program
 * lazaret-faults embeds with the switch, list the home directory, read
 * ~/.gitconfig, change its mode, that of ../beside-the-workspace and
 * that of its standard error, and touch its standard output once
 * restricted, and log what happened, or (rm-workspace-returns) makes the
 * workspace of a Domain `state rm` found gone again before it locks, or
 * (rm-after-rename) kills `state rm` once it set the Domain aside, or
 * (memory-least-host) gives the sandboxes' shared memory budget 640 MiB.
 * In the production build the switch does
 * not exist: lz_test_fault is constant false and reads nothing. */
#ifndef LZ_UTIL_TESTFAULT_H
#define LZ_UTIL_TESTFAULT_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool lz_test_fault(const char *name)
{
#ifdef LZ_TEST_FAULTS
	const char *f = getenv("LAZARET_TEST_FAULT");
	return f != NULL && strcmp(f, name) == 0;
#else
	(void)name;
	return false;
#endif
}

#endif
