/* Micro-benchmark of the classification snapshot (core/router/ignoreclass):
 * builds a generated 20,000-file repository in a temporary directory with
 * the real git (argv, no shell; HOME is the temporary directory and
 * GIT_CONFIG_NOSYSTEM=1), times lz_ignoreclass_build, then times 1,000,000
 * lz_ignoreclass_route queries over a fixed mix of tracked, ignored,
 * proposed and deep-under-ignored paths, and prints ns/query per kind.
 *
 *   bench_ignoreclass [files] [queries]
 *
 * Not a test: it asserts nothing but that the calls succeed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs/tree.h"
#include "router/ignoreclass.h"

static char root[PATH_MAX];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_ignoreclass: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void git(char *const argv[])
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (chdir(root) < 0)
			_exit(126);
		int nfd = open("/dev/null", O_WRONLY);
		dup2(nfd, 1);
		execvp("git", argv);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "bench_ignoreclass: git %s failed\n", argv[1]);
		exit(1);
	}
}

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die(p);
	close(fd);
}

static void mkd(const char *rel)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		die(p);
}

enum { Q_TRACKED, Q_IGNORED, Q_PROPOSED, Q_DEEP, Q_KINDS };
static const char *const kind_name[] = { "tracked file", "ignored untracked file",
					 "new name in a known directory",
					 "deep path under an ignored directory" };

struct query {
	char path[256];
	bool is_dir;
	int kind;
};

int main(int argc, char **argv)
{
	long files = argc > 1 ? atol(argv[1]) : 20000;
	long queries = argc > 2 ? atol(argv[2]) : 1000000;
	char tmpl[] = "/tmp/lz-bench-ignoreclass-XXXXXX";
	if (mkdtemp(tmpl) == NULL || realpath(tmpl, root) == NULL)
		die("mkdtemp");
	setenv("HOME", root, 1);
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);

	double t0 = now();
	git((char *[]){ "git", "init", "-q", NULL });
	put(".gitignore", "*.o\n*.log\n!important.log\nbuild/\nnode_modules/\n**/cache/\n/dist\n"
			  "*.tmp\n*~\n.venv/\n__pycache__/\n*.py[cod]\ncoverage/\n.DS_Store\n");
	/* 200 directories of 100 files, two levels; every tenth directory has
	 * its own .gitignore; a third of the files are build products. */
	const long per_dir = 100;
	long ndirs = (files + per_dir - 1) / per_dir;
	for (long d = 0; d < ndirs; d++) {
		char dir[64], rel[128];
		snprintf(dir, sizeof(dir), "src%02ld", d / 10);
		mkd(dir);
		snprintf(dir, sizeof(dir), "src%02ld/mod%03ld", d / 10, d);
		mkd(dir);
		if (d % 10 == 0) {
			snprintf(rel, sizeof(rel), "%s/.gitignore", dir);
			put(rel, "*.gen.c\n!keep.gen.c\ngenerated/\n");
		}
		for (long i = 0; i < per_dir && d * per_dir + i < files; i++) {
			snprintf(rel, sizeof(rel), "%s/file%03ld.%s", dir, i, i % 3 == 0 ? "o" : "c");
			put(rel, "");
		}
	}
	mkd("build");
	put("build/out.bin", "");
	git((char *[]){ "git", "add", "-A", NULL });
	double t1 = now();

	int wsfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (wsfd < 0)
		die(root);
	struct lz_ignoreclass_inputs in = { .workspace_fd = wsfd, .isolated_fd = -1 };
	struct lz_err err = { 0 };
	lz_ignoreclass *s = NULL;
	const int builds = 5;
	double best = 1e9;
	for (int b = 0; b < builds; b++) {
		lz_ignoreclass *t = NULL;
		double b0 = now();
		if (lz_ignoreclass_build(&in, &t, &err) < 0) {
			fprintf(stderr, "bench_ignoreclass: build: %s\n", err.msg);
			return 1;
		}
		double b1 = now();
		if (b1 - b0 < best)
			best = b1 - b0;
		lz_ignoreclass_unref(s);
		s = t;
	}

	enum { NQ = 4096 };
	static struct query q[NQ];
	for (int i = 0; i < NQ; i++) {
		long d = (i * 7919L) % ndirs, f = (i * 104729L) % per_dir;
		q[i].kind = i % Q_KINDS;
		switch (q[i].kind) {
		case Q_TRACKED:
			snprintf(q[i].path, sizeof(q[i].path), "src%02ld/mod%03ld/file%03ld.c", d / 10, d,
				 f - f % 3 + 1);
			break;
		case Q_IGNORED:
			snprintf(q[i].path, sizeof(q[i].path), "src%02ld/mod%03ld/file%03ld.o", d / 10, d,
				 f - f % 3);
			break;
		case Q_PROPOSED:
			snprintf(q[i].path, sizeof(q[i].path), "src%02ld/mod%03ld/new%04d.%s", d / 10, d,
				 i, i % 2 ? "log" : "rs");
			break;
		default:
			snprintf(q[i].path, sizeof(q[i].path),
				 "src%02ld/mod%03ld/node_modules/pkg%d/lib/index.js", d / 10, d, i);
		}
	}
	/* Sanity: the expected routes. */
	static const int expect[Q_KINDS] = { LZ_ROUTE_HOST, LZ_ROUTE_ISOLATED, -1, LZ_ROUTE_ISOLATED };
	for (int i = 0; i < Q_KINDS; i++) {
		enum lz_route r;
		if (lz_ignoreclass_route(s, q[i].path, strlen(q[i].path), false, &r) < 0 ||
		    (expect[i] >= 0 && (int)r != expect[i])) {
			fprintf(stderr, "bench_ignoreclass: unexpected route for %s\n", q[i].path);
			return 1;
		}
	}
	size_t lens[NQ];
	for (int i = 0; i < NQ; i++)
		lens[i] = strlen(q[i].path);

	printf("repository: %ld files in %ld directories, generated in %.2f s\n", files, ndirs,
	       t1 - t0);
	printf("build: %.2f ms (best of %d)\n", best * 1e3, builds);
	unsigned long sink = 0;
	double all0 = now();
	for (long i = 0; i < queries; i++) {
		const struct query *x = &q[i & (NQ - 1)];
		enum lz_route r;
		lz_ignoreclass_route(s, x->path, lens[i & (NQ - 1)], x->is_dir, &r);
		sink += (unsigned)r;
	}
	double all1 = now();
	printf("route: %.1f ns/query over %ld mixed queries\n", (all1 - all0) * 1e9 / (double)queries,
	       queries);
	for (int k = 0; k < Q_KINDS; k++) {
		long n = queries / Q_KINDS;
		double k0 = now();
		for (long i = 0; i < n; i++) {
			int j = (int)((i * Q_KINDS + k) & (NQ - 1));
			enum lz_route r;
			lz_ignoreclass_route(s, q[j].path, lens[j], false, &r);
			sink += (unsigned)r;
		}
		double k1 = now();
		printf("  %-38s %.1f ns/query\n", kind_name[k], (k1 - k0) * 1e9 / (double)n);
	}
	if (sink == 42)
		puts("");
	lz_ignoreclass_unref(s);
	close(wsfd);
	int parent = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	lz_tree_remove(parent, strrchr(root, '/') + 1, NULL);
	close(parent);
	return 0;
}
