/* Keeps the router's classification current (spec 3.5: "a changed index
 * or ignore input publishes a complete new snapshot atomically or leaves
 * the old one").
 *
 * A thread watches the canonical workspace with inotify: every directory
 * (Git directories and everything in them included) and the global
 * excludes file's directory. Writes through the router land in
 * the host backing too, so one watch sees the sandbox's and the
 * developer's changes alike. When a .gitignore, an index, an info/exclude
 * (every one the snapshot read: a linked worktree's, a submodule's, a
 * bare workspace's, a Git directory outside the workspace), a `.git` file
 * or the global excludes file changes (or inotify overflows), it waits for
 * 50 ms of quiet, builds a new lz_ignoreclass snapshot and publishes it;
 * a build that fails (an index caught mid-write) is retried, and the old
 * snapshot stays until one succeeds; one past a bound (ignore rules too
 * costly to match: ignoreclass.h) is retried at 1 s doubling to 32 s
 * only, the same tree giving the same answer.
 *
 * Every event under the host backing also goes to lz_router_host_changed,
 * so the router can let the kernel cache host-backed entries long
 * (lz_router_host_watched is on while every directory is watched,
 * subdirectories of Git directories included).
 *
 * Limits: directories past the watch's budget (lz_ignorewatch_budget), or
 * past the host's inotify watch limit, are not watched (a message on
 * stderr says so);
 * ignore changes there are seen at the next change elsewhere or the next
 * launch, and the router's host caches go back to short timeouts, as
 * they do for good after an inotify queue overflow. An ignored .gitignore
 * living in the isolated backing is not watched. */
#ifndef LZ_ROUTER_IGNOREWATCH_H
#define LZ_ROUTER_IGNOREWATCH_H

#include "router/ignoreclass.h"
#include "router/router.h"
#include "util/err.h"

#define LZ_IGNOREWATCH_MAX_DIRS 65536u

typedef struct lz_ignorewatch lz_ignorewatch;

/* The most directories the watches of all Domains' routers take together
 * when the developer's inotify budget is max_user_watches
 * (fs.inotify.max_user_watches, read in the initial user namespace: a
 * namespace of the developer's own reports no limit but is charged to it):
 * a quarter of it, at most LZ_IGNOREWATCH_MAX_DIRS. The rest is the
 * developer's editors', which sandboxes making directories must not
 * starve. */
size_t lz_ignorewatch_budget(unsigned long max_user_watches);

/* The Storage Root's file whose slots (proc/lockslots.h) are that budget in
 * chunks of 256 watches: every Domain's router takes its chunks there as
 * its watch grows and gives them back as it shrinks or ends. */
#define LZ_IGNOREWATCH_SLOTS "watch.slots"

/* Starts watching at most max_dirs directories (0: LZ_IGNOREWATCH_MAX_DIRS),
 * and, with slots_fd (LZ_IGNOREWATCH_SLOTS open for writing, duplicated:
 * a watch holds its slots through that open file, so two watches of one
 * process need two opens; -1: none, for tests), only as many as the
 * chunks it can take there allow;
 * in's descriptors are duplicated and its path copied. snap (borrowed for
 * the call; NULL: none) is the snapshot r serves, built from in: what it
 * read (lz_ignoreclass_read_dirs) is watched until a rebuild replaces it.
 * r must outlive the watch. */
int lz_ignorewatch_start(lz_router *r, const struct lz_ignoreclass_inputs *in, const lz_ignoreclass *snap,
			 size_t max_dirs, int slots_fd, lz_ignorewatch **ret, struct lz_err *err);

/* How many snapshots the watch has published so far, how many rebuilds
 * failed, and how many directory records its table has room for (tests). */
unsigned long lz_ignorewatch_published(const lz_ignorewatch *w);
unsigned long lz_ignorewatch_failed(const lz_ignorewatch *w);
size_t lz_ignorewatch_slots(const lz_ignorewatch *w);

/* Stops and joins the thread; accepts NULL. */
void lz_ignorewatch_stop(lz_ignorewatch *w);

#endif
