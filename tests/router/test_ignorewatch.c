/* Unit tests for core/router/ignorewatch.c: which changes of a real Git
 * workspace publish a new classification to a (not serving) router, and
 * that the published snapshot routes by the new rules. No FUSE mount:
 * lz_router_publish works without a session; the routes are read back
 * through a probe classifier built by the same lz_ignoreclass_build. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_slots.h"

#include "router/ignorewatch.h"
#include "util/cleanup.h"

struct fx {
	char dir[64];
	char ws[128], iso[128], global[160];
	int ws_fd, iso_fd;
	lz_router *router;
	lz_ignorewatch *watch;
};

#define FMT(buf, ...) assert_true((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__) < sizeof(buf))

static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_true(n > 0 && (size_t)n < sizeof(cmd));
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

static void put(struct fx *f, const char *rel, const char *text)
{
	char p[256];
	FMT(p, "%s/%s", f->ws, rel);
	FILE *o = fopen(p, "w");
	assert_non_null(o);
	fputs(text, o);
	assert_int_equal(fclose(o), 0);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/lz-ignorewatch.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	FMT(f->ws, "%s/ws", f->dir);
	FMT(f->iso, "%s/iso", f->dir);
	FMT(f->global, "%s/ignore", f->dir);
	assert_int_equal(mkdir(f->ws, 0755), 0);
	assert_int_equal(mkdir(f->iso, 0700), 0);
	sh("cd '%s' && GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git init -q && printf '*.log\\n' > .gitignore &&"
	   " echo t > tracked.txt && GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git add .gitignore tracked.txt",
	   f->ws);
	f->ws_fd = open(f->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	f->iso_fd = open(f->iso, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->ws_fd >= 0 && f->iso_fd >= 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_ignorewatch_stop(f->watch);
	lz_router_free(f->router);
	close(f->ws_fd);
	close(f->iso_fd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

/* Builds the first snapshot, the router and the watch of at most
 * max_dirs directories (0: the default), with the policy flags of flags
 * (hide_editor_config, share_ignored), and the shared budget of slots_fd
 * (-1: none). */
static void start_shared(struct fx *f, const char *global, size_t max_dirs, struct lz_ignoreclass_inputs flags,
			 int slots_fd)
{
	struct lz_ignoreclass_inputs in = flags;
	in.workspace_fd = f->ws_fd;
	in.isolated_fd = f->iso_fd;
	in.global_excludes = global;
	lz_ignoreclass *snap = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_ignoreclass_build(&in, &snap, &err), 0);
	assert_int_equal(lz_router_new(f->ws_fd, f->iso_fd, lz_router_classifier_ignoreclass(snap), NULL,
				       &f->router, &err),
			 0);
	if (lz_ignorewatch_start(f->router, &in, snap, max_dirs, slots_fd, &f->watch, &err) < 0)
		fail_msg("%s", err.msg);
}

static void start_with(struct fx *f, const char *global, size_t max_dirs, struct lz_ignoreclass_inputs flags)
{
	start_shared(f, global, max_dirs, flags, -1);
}

static void start_watching(struct fx *f, const char *global, size_t max_dirs)
{
	start_with(f, global, max_dirs, (struct lz_ignoreclass_inputs){ 0 });
}

static void start(struct fx *f, const char *global)
{
	start_watching(f, global, 0);
}

/* The route the router's published classification gives path. */
static enum lz_route route_published(struct fx *f, const char *path)
{
	enum lz_route r;
	assert_int_equal(lz_router_route(f->router, path, strlen(path), false, &r), 0);
	return r;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Waits (at most 5 s) for more than `before` publications. */
static bool published_after(struct fx *f, unsigned long before)
{
	for (int i = 0; i < 500; i++) {
		if (lz_ignorewatch_published(f->watch) > before)
			return true;
		sleep_ms(10);
	}
	return false;
}

/* The route a fresh build gives now (what the watch's snapshot holds). */
static enum lz_route route_now(struct fx *f, const char *path, const char *global)
{
	struct lz_ignoreclass_inputs in = { .workspace_fd = f->ws_fd, .isolated_fd = f->iso_fd,
					    .global_excludes = global };
	lz_ignoreclass *snap = NULL;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_ignoreclass_build(&in, &snap, &err), 0);
	enum lz_route r;
	assert_int_equal(lz_ignoreclass_route(snap, path, strlen(path), false, &r), 0);
	lz_ignoreclass_unref(snap);
	return r;
}

static void test_root_gitignore_edit_publishes(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	assert_int_equal(route_now(f, "a.tmp", NULL), LZ_ROUTE_HOST);
	put(f, ".gitignore", "*.log\n*.tmp\n");
	assert_true(published_after(f, 0));
	assert_int_equal(route_now(f, "a.tmp", NULL), LZ_ROUTE_ISOLATED);
}

/* A .gitignore whose rules take more than the build's steps (4,000). */
static void put_costly_rules(struct fx *f)
{
	char costly[64 * 210 + 16];
	size_t k = 0;
	for (int l = 0; l < 64; l++) {
		costly[k++] = '*';
		costly[k++] = '[';
		for (int i = 0; i < 100; i++) {
			costly[k++] = '[';
			costly[k++] = ':';
		}
		memcpy(costly + k, "x]\n", 3);
		k += 3;
	}
	memcpy(costly + k, "*.log\n", 7);
	put(f, ".gitignore", costly);
	for (int i = 0; i < 500 && lz_ignorewatch_failed(f->watch) == 0; i++)
		sleep_ms(10);
	assert_int_equal(lz_ignorewatch_failed(f->watch), 1);
}

/* Rules past the build's steps: the previous classification stays, and
 * while the watch sees every change the watch does not try again until
 * one comes (each attempt would spend its whole budget for the same
 * answer); cheap rules publish again. */
static void test_rules_too_costly_keep_the_old_snapshot_without_quick_retries(void **state)
{
	struct fx *f = *state;
	sh("mkdir '%s/sub-directory-with-a-long-enough-name'", f->ws);
	start_with(f, NULL, 0, (struct lz_ignoreclass_inputs){ .build_steps = 4000 });
	put_costly_rules(f);
	sleep_ms(3500); /* quick retries would have made 16 more, the slow ones 2 */
	assert_int_equal(lz_ignorewatch_failed(f->watch), 1);
	assert_int_equal(lz_ignorewatch_published(f->watch), 0);
	assert_int_equal(route_published(f, "a.log"), LZ_ROUTE_ISOLATED);
	put(f, ".gitignore", "*.log\n*.tmp\n");
	assert_true(published_after(f, 0));
	assert_int_equal(route_published(f, "a.tmp"), LZ_ROUTE_ISOLATED);
}

/* A watch that cannot see every change tries such rules again, slowly: a
 * change it missed may have made them cheap. */
static void test_rules_too_costly_are_retried_when_the_watch_is_incomplete(void **state)
{
	struct fx *f = *state;
	sh("mkdir '%s/sub-directory-with-a-long-enough-name' '%s/a' '%s/b' '%s/c'", f->ws, f->ws, f->ws, f->ws);
	start_with(f, NULL, 2, (struct lz_ignoreclass_inputs){ .build_steps = 4000 });
	put_costly_rules(f);
	sleep_ms(1500);
	assert_in_range(lz_ignorewatch_failed(f->watch), 2, 3);
	assert_int_equal(lz_ignorewatch_published(f->watch), 0);
}

/* The kernel gives every new watch a new descriptor: directories made and
 * removed over and over (each watched, then dropped) leave the watch's
 * table the size of what it watches, not of every descriptor it was
 * ever given. */
static void test_directories_made_and_removed_leave_the_table_small(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	size_t before = lz_ignorewatch_slots(f->watch);
	char d[256];
	FMT(d, "%s/churn", f->ws);
	for (int i = 0; i < 4000; i++) {
		assert_int_equal(mkdir(d, 0755), 0);
		if (i % 200 == 0)
			sleep_ms(20); /* let the watch take it (and drop it) */
		assert_int_equal(rmdir(d), 0);
	}
	sleep_ms(300);
	assert_true(before > 0);
	assert_true(lz_ignorewatch_slots(f->watch) <= 4 * before);
}

static void test_ordinary_files_do_not_publish(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	put(f, "tracked.txt", "edited\n");
	put(f, "new.c", "int x;\n");
	sh("mkdir -p '%s/src/deep' && echo x > '%s/src/deep/f.c'", f->ws, f->ws);
	sleep_ms(400);
	assert_int_equal(lz_ignorewatch_published(f->watch), 0);
}

static void test_new_directory_with_gitignore_publishes(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	/* A directory created after the watch started, then its .gitignore. */
	sh("mkdir -p '%s/pkg/sub'", f->ws);
	sleep_ms(200);
	unsigned long before = lz_ignorewatch_published(f->watch);
	put(f, "pkg/sub/.gitignore", "out/\n");
	assert_true(published_after(f, before));
}

static void test_tree_moved_in_publishes(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	/* A tree that arrives whole (mv, tar) with a .gitignore inside. */
	char outside[160];
	FMT(outside, "%s/staged", f->dir);
	sh("mkdir -p '%s/lib' && printf 'gen/\\n' > '%s/lib/.gitignore' && mv '%s' '%s/vendor'", outside, outside,
	   outside, f->ws);
	assert_true(published_after(f, 0));
}

static void test_index_change_publishes(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	put(f, "forced.log", "x\n");
	sleep_ms(200);
	unsigned long before = lz_ignorewatch_published(f->watch);
	/* Git replaces .git/index by renaming index.lock over it. */
	sh("cd '%s' && GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git add -f forced.log", f->ws);
	assert_true(published_after(f, before));
	assert_int_equal(route_now(f, "forced.log", NULL), LZ_ROUTE_HOST);
}

static void test_info_exclude_publishes(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	put(f, ".git/info/exclude", "secret/\n");
	assert_true(published_after(f, 0));
}

static void test_global_excludes_publishes(void **state)
{
	struct fx *f = *state;
	start(f, f->global); /* absent at start */
	FILE *o = fopen(f->global, "w");
	assert_non_null(o);
	fputs("*.swp\n", o);
	assert_int_equal(fclose(o), 0);
	assert_true(published_after(f, 0));
	assert_int_equal(route_now(f, "x.swp", f->global), LZ_ROUTE_ISOLATED);
}

/* A global excludes file inside the workspace: its directory is both a
 * workspace directory and the global file's, and stays both. */
static void test_global_excludes_inside_the_workspace(void **state)
{
	struct fx *f = *state;
	char global[192];
	FMT(global, "%s/cfg/ignore", f->ws);
	sh("mkdir -p '%s/cfg'", f->ws);
	start(f, global);
	put(f, "cfg/ignore", "*.swp\n");
	assert_true(published_after(f, 0));
	assert_int_equal(route_now(f, "x.swp", global), LZ_ROUTE_ISOLATED);
	unsigned long before = lz_ignorewatch_published(f->watch);
	put(f, "cfg/.gitignore", "*.tmp\n");
	assert_true(published_after(f, before));
	assert_int_equal(route_now(f, "cfg/x.tmp", global), LZ_ROUTE_ISOLATED);
}

static void test_renamed_directory_keeps_watching(void **state)
{
	struct fx *f = *state;
	sh("mkdir -p '%s/a/b'", f->ws);
	start(f, NULL);
	sh("mv '%s/a' '%s/c'", f->ws, f->ws);
	sleep_ms(200);
	unsigned long before = lz_ignorewatch_published(f->watch);
	/* A directory created below the renamed one is found by its new path. */
	sh("mkdir '%s/c/b/d'", f->ws);
	sleep_ms(200);
	put(f, "c/b/d/.gitignore", "*.o\n");
	assert_true(published_after(f, before));
}

/* A chain of directories `depth` levels deep below top/name, with a
 * .gitignore at its bottom; returns a descriptor of the bottom. */
static int make_chain(const char *top, const char *name, int depth)
{
	int fd = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int i = 0; i < depth; i++) {
		const char *n = i == 0 ? name : "a";
		assert_int_equal(mkdirat(fd, n, 0755), 0);
		int next = openat(fd, n, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	int g = openat(fd, ".gitignore", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(g >= 0);
	assert_int_equal(write(g, "gen/\n", 5), 5);
	close(g);
	return fd;
}

/* As deep as a workspace path may be (the router refuses longer ones):
 * the watch walks it without using the thread's stack per level (a
 * sandbox's `mkdir a; cd a` loop once crashed the router, at start and
 * when the chain was moved in whole). */
#define CHAIN_DEPTH 2030

static void test_a_chain_as_deep_as_paths_allow_at_start(void **state)
{
	struct fx *f = *state;
	int bottom = make_chain(f->ws, "deep", CHAIN_DEPTH);
	start(f, NULL);
	/* The bottom is watched: its .gitignore edited publishes. */
	int g = openat(bottom, ".gitignore", O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(g >= 0);
	assert_int_equal(write(g, "out/\n", 5), 5);
	close(g);
	close(bottom);
	assert_true(published_after(f, 0));
}

static void test_a_chain_as_deep_as_paths_allow_moved_in(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	char staged[160];
	FMT(staged, "%s/staged", f->dir);
	assert_int_equal(mkdir(staged, 0755), 0);
	close(make_chain(staged, "deep", CHAIN_DEPTH));
	char from[200], to[200];
	FMT(from, "%s/deep", staged);
	FMT(to, "%s/deep", f->ws);
	assert_int_equal(rename(from, to), 0);
	assert_true(published_after(f, 0));
}

/* A quarter of the developer's inotify watches, at most 65,536: the rest
 * stays for other routers and the host's editors. */
static void test_budget_is_a_quarter_of_the_users_watches(void **state)
{
	(void)state;
	assert_int_equal(lz_ignorewatch_budget(192543), 48135);
	assert_int_equal(lz_ignorewatch_budget(8192), 2048);
	assert_int_equal(lz_ignorewatch_budget(1u << 20), LZ_IGNOREWATCH_MAX_DIRS);
	assert_int_equal(lz_ignorewatch_budget(3), 1);
}

/* Past its budget the watch stops taking directories: a .gitignore made
 * in one it did not take publishes nothing (the documented fallback). */
static void test_watch_stops_at_its_budget(void **state)
{
	struct fx *f = *state;
	sh("mkdir -p '%s/a' '%s/b' '%s/c'", f->ws, f->ws, f->ws);
	start_watching(f, NULL, 1); /* the root only */
	put(f, "a/.gitignore", "x\n");
	put(f, "b/.gitignore", "x\n");
	put(f, "c/.gitignore", "x\n");
	sleep_ms(400);
	assert_int_equal(lz_ignorewatch_published(f->watch), 0);
}

/* The budget is every Domain's together: while another router (a child
 * here, with its own open of the file) holds both chunks of a 512-watch
 * budget, this watch takes no directory and a .gitignore change publishes
 * nothing; once it ended, the same watch takes a chunk, publishes, and
 * gives its chunk back when it stops. */
static void test_watch_shares_its_budget_with_other_domains(void **state)
{
	struct fx *f = *state;
	char path[256];
	FMT(path, "%s/%s", f->dir, LZ_IGNOREWATCH_SLOTS);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600), probe = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0 && probe >= 0);
	sh("mkdir -p '%s/a' '%s/b'", f->ws, f->ws);
	struct slot_holder other = slot_holder_start(path, 2, 2);
	start_shared(f, NULL, 512, (struct lz_ignoreclass_inputs){ 0 }, fd);
	put(f, "a/.gitignore", "x\n");
	sleep_ms(400);
	assert_int_equal(lz_ignorewatch_published(f->watch), 0);
	lz_ignorewatch_stop(f->watch);
	lz_router_free(f->router);
	f->watch = NULL;
	f->router = NULL;
	slot_holder_end(&other);
	assert_int_equal(slots_locked(probe, 2), 0);
	start_shared(f, NULL, 512, (struct lz_ignoreclass_inputs){ 0 }, fd);
	assert_int_equal(slots_locked(probe, 2), 1);
	put(f, "b/.gitignore", "y\n");
	for (int i = 0; i < 50 && lz_ignorewatch_published(f->watch) == 0; i++)
		sleep_ms(100);
	assert_true(lz_ignorewatch_published(f->watch) >= 1);
	lz_ignorewatch_stop(f->watch);
	f->watch = NULL;
	assert_int_equal(slots_locked(probe, 2), 0);
	close(fd);
	close(probe);
}

/* A rebuild that fails for want of descriptors for longer than the quick
 * retries (25 x 200 ms) is tried again later, and publishes once the
 * descriptors are back, with no further change to the ignore rules. */
static void test_a_rebuild_out_of_descriptors_is_tried_again(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	char p[256];
	FMT(p, "%s/.gitignore", f->ws);
	int gi = open(p, O_WRONLY | O_CLOEXEC); /* closed last: its close is a change */
	assert_true(gi >= 0);
	struct rlimit was, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
	low = (struct rlimit){ 64, was.rlim_max };
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	int held[64], n = 0;
	while (n < 64 && (held[n] = dup(0)) >= 0)
		n++;
	assert_true(n < 64);
	static const char rules[] = "*.log\n*.tmp\n";
	assert_int_equal(pwrite(gi, rules, sizeof(rules) - 1, 0), (ssize_t)(sizeof(rules) - 1));
	sleep_ms(6500); /* past the quick retries */
	unsigned long seen = lz_ignorewatch_published(f->watch);
	for (int k = 0; k < n; k++)
		close(held[k]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_int_equal(seen, 0);
	assert_true(published_after(f, 0));
	assert_int_equal(route_published(f, "a.tmp"), LZ_ROUTE_ISOLATED);
	close(gi);
}

/* A rebuild classifies with the policy the first build had: editor
 * configuration stays hidden, and with isolate_ignored = false nothing
 * ignored is isolated. */
static void test_a_rebuild_keeps_the_policy(void **state)
{
	struct fx *f = *state;
	start_with(f, NULL, 0, (struct lz_ignoreclass_inputs){ .hide_editor_config = true });
	assert_int_equal(route_published(f, ".vscode/tasks.json"), LZ_ROUTE_ISOLATED);
	put(f, ".gitignore", "*.log\n*.tmp\n");
	assert_true(published_after(f, 0));
	assert_int_equal(route_published(f, "a.tmp"), LZ_ROUTE_ISOLATED);
	assert_int_equal(route_published(f, ".vscode/tasks.json"), LZ_ROUTE_ISOLATED);
}

static void test_a_rebuild_keeps_sharing_ignored_paths(void **state)
{
	struct fx *f = *state;
	start_with(f, NULL, 0, (struct lz_ignoreclass_inputs){ .share_ignored = true });
	assert_int_equal(route_published(f, "a.log"), LZ_ROUTE_HOST);
	put(f, ".gitignore", "*.log\n*.tmp\n");
	assert_true(published_after(f, 0));
	assert_int_equal(route_published(f, "a.log"), LZ_ROUTE_HOST);
	assert_int_equal(route_published(f, "a.tmp"), LZ_ROUTE_HOST);
}

static void test_stop_without_changes(void **state)
{
	struct fx *f = *state;
	start(f, NULL);
	lz_ignorewatch_stop(f->watch);
	f->watch = NULL;
	lz_ignorewatch_stop(NULL);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_root_gitignore_edit_publishes),
		T(test_rules_too_costly_keep_the_old_snapshot_without_quick_retries),
		T(test_rules_too_costly_are_retried_when_the_watch_is_incomplete),
		T(test_directories_made_and_removed_leave_the_table_small),
		T(test_ordinary_files_do_not_publish),
		T(test_new_directory_with_gitignore_publishes),
		T(test_tree_moved_in_publishes),
		T(test_index_change_publishes),
		T(test_info_exclude_publishes),
		T(test_global_excludes_publishes),
		T(test_global_excludes_inside_the_workspace),
		T(test_renamed_directory_keeps_watching),
		T(test_a_chain_as_deep_as_paths_allow_at_start),
		T(test_a_chain_as_deep_as_paths_allow_moved_in),
		T(test_watch_stops_at_its_budget),
		T(test_watch_shares_its_budget_with_other_domains),
		T(test_a_rebuild_out_of_descriptors_is_tried_again),
		T(test_a_rebuild_keeps_the_policy),
		T(test_a_rebuild_keeps_sharing_ignored_paths),
		cmocka_unit_test(test_budget_is_a_quarter_of_the_users_watches),
		T(test_stop_without_changes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
