/* lz_ignoreclass (spec 3.5, "Ignored Workspace State routing contract"):
 * which backing each workspace path routes to, byte-exact with Git.
 *
 * Every test builds repositories with the real git binary (argv through
 * fork + execvp, no shell) in a fresh mkdtemp directory D that is also
 * HOME, with GIT_CONFIG_NOSYSTEM=1, so neither the host's system nor its
 * global configuration leaks in. Unit cases assert the rule they are named
 * after and then run the parity check on the same tree: for every path in
 * the workspace (and proposed new names in each directory) the snapshot's
 * route is compared with Git's own answer, taken from
 * `git status --ignored --porcelain=v1 -z --untracked-files=all`,
 * `git ls-files -z` and `git check-ignore -z --stdin` in the repository
 * that owns the path. The first mismatch is printed with the path escaped.
 * Tests skip when git is missing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include <git2.h>

#include "router/gitlib.h"
#include "router/ignoreclass.h"
#include "util/cleanup.h"

/* snprintf that must fit: a truncated test path is a broken test. */
#define FMT(buf, ...) assert_true((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__) < sizeof(buf))

static bool have_git;
static size_t parity_total; /* paths compared across the whole run */

struct fx {
	char dir[256]; /* canonical D (also HOME) */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/lz-test-ignoreclass-XXXXXX", canon[PATH_MAX];
	if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, canon) == NULL ||
	    strlen(canon) >= sizeof(f->dir)) {
		free(f);
		return -1;
	}
	memcpy(f->dir, canon, strlen(canon) + 1);
	setenv("HOME", f->dir, 1);
	char cfg[PATH_MAX];
	FMT(cfg, "%s/.gitconfig", f->dir);
	FILE *c = fopen(cfg, "w");
	if (c == NULL)
		return -1;
	fputs("[user]\n\tname = t\n\temail = t@example.invalid\n[init]\n\tdefaultBranch = main\n"
	      "[advice]\n\taddEmbeddedRepo = false\n\tdetachedHead = false\n",
	      c);
	fclose(c);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	if (getenv("LZ_TEST_KEEP") == NULL)
		lz_test_rmtree(f->dir);
	else
		print_message("kept %s\n", f->dir);
	free(f);
	return 0;
}

/* ---- running git ------------------------------------------------------------ */

struct buf {
	char *p;
	size_t n;
};

/* Runs git with argv (NULL-terminated, without "git") in D/rel; stdin from
 * in (NULL: /dev/null); stdout into *out when non-NULL. Returns the exit
 * status (-1 when it did not exit). */
static int run_gitv(const struct fx *f, const char *rel, const char *in, size_t in_len,
		    struct buf *out, const char *const *argv)
{
	char cwd[PATH_MAX], inpath[PATH_MAX];
	FMT(cwd, "%s/%s", f->dir, rel);
	FMT(inpath, "%s/.stdin", f->dir);
	if (in) {
		int fd = open(inpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, in, in_len), (ssize_t)in_len);
		close(fd);
	}
	const char *full[64] = { "git" };
	size_t k = 1;
	for (; argv[k - 1] != NULL; k++) {
		assert_true(k < LZ_ARRAY_SIZE(full) - 1);
		full[k] = argv[k - 1];
	}
	full[k] = NULL;
	int pfd[2];
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int ifd = open(in ? inpath : "/dev/null", O_RDONLY);
		int nfd = open("/dev/null", O_WRONLY);
		if (ifd < 0 || nfd < 0 || chdir(cwd) < 0 || dup2(ifd, 0) < 0 ||
		    dup2(out ? pfd[1] : nfd, 1) < 0)
			_exit(126);
		if (getenv("LZ_TEST_VERBOSE") == NULL)
			dup2(nfd, 2);
		execvp("git", (char *const *)full);
		_exit(127);
	}
	close(pfd[1]);
	size_t cap = 0;
	char chunk[65536];
	ssize_t r;
	while ((r = read(pfd[0], chunk, sizeof(chunk))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		assert_true(r > 0);
		if (out) {
			if (out->n + (size_t)r + 1 > cap) {
				cap = (out->n + (size_t)r + 1) * 2;
				out->p = realloc(out->p, cap);
				assert_non_null(out->p);
			}
			memcpy(out->p + out->n, chunk, (size_t)r);
			out->n += (size_t)r;
			out->p[out->n] = '\0';
		}
	}
	close(pfd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define GIT_ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
/* git ... in D/rel, which must succeed. */
#define GIT(f, rel, ...)                                                                      \
	do {                                                                                  \
		int st_ = run_gitv((f), (rel), NULL, 0, NULL, GIT_ARGS(__VA_ARGS__));          \
		if (st_ != 0)                                                                 \
			fail_msg("git %s in %s exited %d", GIT_ARGS(__VA_ARGS__)[0], (rel), st_); \
	} while (0)

static void need_git(void)
{
	if (!have_git)
		skip();
}

/* ---- files --------------------------------------------------------------------- */

static void mkdirs(const struct fx *f, const char *rel)
{
	char p[PATH_MAX];
	int k = snprintf(p, sizeof(p), "%s/%s", f->dir, rel);
	assert_true(k > 0 && (size_t)k < sizeof(p));
	for (char *s = p + strlen(f->dir) + 1; *s; s++) {
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0700) < 0)
				assert_int_equal(errno, EEXIST);
			*s = '/';
		}
	}
	if (mkdir(p, 0700) < 0)
		assert_int_equal(errno, EEXIST);
}

/* Writes D/rel (parents created), replacing it. */
static void put(const struct fx *f, const char *rel, const char *s)
{
	char p[PATH_MAX];
	FMT(p, "%s", rel);
	char *slash = strrchr(p, '/');
	if (slash) {
		*slash = '\0';
		mkdirs(f, p);
	}
	FMT(p, "%s/%s", f->dir, rel);
	unlink(p);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
	close(fd);
}

static void repo(const struct fx *f, const char *rel)
{
	mkdirs(f, rel);
	GIT(f, rel, "init", "-q");
}

/* ---- snapshots ------------------------------------------------------------------- */

static bool snap_hide_editor; /* hide_editor_config of the next snap_at */

static lz_ignoreclass *snap_at(const struct fx *f, const char *ws_rel, const char *global,
			       int iso_fd)
{
	char p[PATH_MAX], g[PATH_MAX];
	FMT(p, "%s/%s", f->dir, ws_rel);
	int wsfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(wsfd >= 0);
	if (global)
		FMT(g, "%s/%s", f->dir, global);
	struct lz_ignoreclass_inputs in = { .workspace_fd = wsfd, .isolated_fd = iso_fd,
					    .global_excludes = global ? g : NULL,
					    .hide_editor_config = snap_hide_editor };
	struct lz_err err = { 0 };
	lz_ignoreclass *s = NULL;
	int r = lz_ignoreclass_build(&in, &s, &err);
	close(wsfd);
	if (r < 0)
		fail_msg("build: %d %s", r, err.msg);
	return s;
}

static const char *route_name(int r)
{
	return r == LZ_ROUTE_HOST ? "HOST" : r == LZ_ROUTE_ISOLATED ? "ISOLATED" :
	       r == LZ_ROUTE_INCONSISTENT ? "INCONSISTENT" : "?";
}

static void esc(const char *p, size_t n, char *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 5 < cap; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c < 0x20 || c >= 0x7f || c == '\\')
			k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c);
		else
			out[k++] = (char)c;
	}
	out[k] = '\0';
}

static enum lz_route route(const lz_ignoreclass *s, const char *path, bool is_dir)
{
	enum lz_route r = (enum lz_route)-1;
	int e = lz_ignoreclass_route(s, path, strlen(path), is_dir, &r);
	if (e < 0) {
		char q[1024];
		esc(path, strlen(path), q, sizeof(q));
		fail_msg("route '%s': %d", q, e);
	}
	return r;
}

#define ASSERT_ROUTE(s, path, is_dir, want)                                                   \
	do {                                                                                  \
		enum lz_route got_ = route((s), (path), (is_dir));                            \
		if (got_ != (want)) {                                                         \
			char q_[1024];                                                        \
			esc((path), strlen(path), q_, sizeof(q_));                            \
			fail_msg("'%s'%s: got %s, want %s", q_, (is_dir) ? "/" : "",         \
				 route_name(got_), route_name(want));                          \
		}                                                                             \
	} while (0)

/* ---- parity with git ----------------------------------------------------------- */

/* A NUL-separated list of byte strings. */
struct strs {
	char **v;
	size_t n, cap;
};

static void strs_add(struct strs *s, const char *p, size_t n)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		assert_non_null(s->v);
	}
	s->v[s->n] = malloc(n + 1);
	assert_non_null(s->v[s->n]);
	memcpy(s->v[s->n], p, n);
	s->v[s->n][n] = '\0';
	s->n++;
}

static void strs_free(struct strs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	*s = (struct strs){ 0 };
}

static bool strs_has(const struct strs *s, const char *p, bool icase)
{
	for (size_t i = 0; i < s->n; i++)
		if ((icase ? strcasecmp(s->v[i], p) : strcmp(s->v[i], p)) == 0)
			return true;
	return false;
}

/* Git's view of one repository (workspace-relative root, "" for the top). */
struct gview {
	char root[PATH_MAX];
	bool icase; /* core.ignoreCase: the index is looked up folded */
	struct strs tracked, ignored, untracked, ck_in, ck_out;
};

static bool starts_with(const char *s, const char *pre)
{
	return strncmp(s, pre, strlen(pre)) == 0;
}

/* Paths under test: workspace-relative, is_dir, proposed (non-existent). */
struct probe {
	char *path;
	bool is_dir, proposed;
};

struct probes {
	struct probe *v;
	size_t n, cap;
};

static void probe_add(struct probes *ps, const char *p, bool is_dir, bool proposed)
{
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? ps->cap * 2 : 256;
		ps->v = realloc(ps->v, ps->cap * sizeof(*ps->v));
		assert_non_null(ps->v);
	}
	ps->v[ps->n++] = (struct probe){ .path = strdup(p), .is_dir = is_dir, .proposed = proposed };
}

static const char *const proposals[] = { "zz new.log", "ZZ.LOG", "zz-keep.txt", "zz.o", "tmp",
					 "Build", "zz\xfe" };

static void walk(const char *abs, const char *rel, struct probes *ps)
{
	DIR *d = opendir(abs);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, ".git"))
			continue;
		char a[PATH_MAX], r[PATH_MAX];
		FMT(a, "%s/%s", abs, de->d_name);
		FMT(r, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		struct stat st;
		assert_int_equal(lstat(a, &st), 0);
		probe_add(ps, r, S_ISDIR(st.st_mode), false);
		if (S_ISDIR(st.st_mode))
			walk(a, r, ps);
	}
	closedir(d);
}

/* The innermost repository (index into views) that owns rel: the path is
 * strictly below its root. */
static size_t owner(struct gview *views, size_t nv, const char *rel)
{
	size_t best = 0, bestlen = 0;
	for (size_t i = 1; i < nv; i++) {
		size_t l = strlen(views[i].root);
		if (l > bestlen && strncmp(rel, views[i].root, l) == 0 && rel[l] == '/') {
			best = i;
			bestlen = l;
		}
	}
	return best;
}

static const char *rel_in(const struct gview *v, const char *rel)
{
	return *v->root ? rel + strlen(v->root) + 1 : rel;
}

static void parse_z(struct strs *s, const struct buf *b, bool status, struct strs *ign)
{
	size_t i = 0;
	while (i < b->n) {
		size_t l = strlen(b->p + i);
		const char *e = b->p + i;
		if (!status) {
			strs_add(s, e, l);
		} else {
			assert_true(l > 3);
			if (!strncmp(e, "!! ", 3))
				strs_add(ign, e + 3, l - 3);
			else if (!strncmp(e, "?? ", 3))
				strs_add(s, e + 3, l - 3);
			/* staged and modified entries are tracked: ls-files has them */
			if (e[0] == 'R' || e[0] == 'C')
				i += l + 1 + strlen(b->p + i + l + 1);
		}
		i += l + 1;
	}
}

enum { T_HOST, T_ISOLATED, T_UNKNOWN };

static int verdict(const struct gview *v, const char *rel, bool is_dir, bool proposed)
{
	char slash[PATH_MAX + 2];
	FMT(slash, "%s/", rel);
	/* Tracked, folded under core.ignoreCase as status and add look it up
	 * (check-ignore alone compares exactly, so it would disagree). */
	if (strs_has(&v->tracked, rel, v->icase))
		return T_HOST;
	for (size_t i = 0; i < v->ignored.n; i++) {
		const char *e = v->ignored.v[i];
		if (!strcmp(e, rel) || !strcmp(e, slash) ||
		    (e[strlen(e) - 1] == '/' && starts_with(slash, e)))
			return T_ISOLATED;
	}
	if (!proposed) {
		for (size_t i = 0; i < v->untracked.n; i++) {
			const char *u = v->untracked.v[i];
			if (!strcmp(u, rel) || !strcmp(u, slash) ||
			    (u[strlen(u) - 1] == '/' && starts_with(slash, u)))
				return T_HOST;
			if (is_dir && starts_with(u, slash))
				return T_HOST;
		}
		if (!is_dir)
			return T_UNKNOWN;
		for (size_t i = 0; i < v->tracked.n; i++)
			if (starts_with(v->tracked.v[i], slash))
				return T_HOST;
	}
	return strs_has(&v->ck_out, rel, false) ? T_ISOLATED : T_HOST;
}

/* Compares every path of the workspace at D/ws_rel (plus proposed names)
 * with git. nested: workspace-relative roots of nested repositories.
 * Returns the number of paths compared. */
static size_t parity(const struct fx *f, const char *ws_rel, const char *const *nested,
		     const char *global)
{
	lz_ignoreclass *s = snap_at(f, ws_rel, global, -1);
	struct probes ps = { 0 };
	char abs[PATH_MAX];
	FMT(abs, "%s/%s", f->dir, ws_rel);
	walk(abs, "", &ps);
	size_t existing = ps.n;
	for (size_t i = 0; i <= existing; i++) {
		if (i < existing && !ps.v[i].is_dir)
			continue;
		for (size_t j = 0; j < LZ_ARRAY_SIZE(proposals); j++) {
			char p[PATH_MAX];
			if (i == existing)
				FMT(p, "%s", proposals[j]);
			else
				FMT(p, "%s/%s", ps.v[i].path, proposals[j]);
			struct stat st;
			char a[PATH_MAX * 2];
			FMT(a, "%s/%s", abs, p);
			if (lstat(a, &st) < 0)
				probe_add(&ps, p, false, true);
		}
	}

	struct gview views[16];
	size_t nv = 1;
	memset(views, 0, sizeof(views));
	for (size_t i = 0; nested && nested[i]; i++, nv++)
		snprintf(views[nv].root, sizeof(views[nv].root), "%s", nested[i]);
	for (size_t i = 0; i < ps.n; i++) {
		struct gview *v = &views[owner(views, nv, ps.v[i].path)];
		const char *r = rel_in(v, ps.v[i].path);
		strs_add(&v->ck_in, r, strlen(r) + 1); /* with its NUL */
	}
	for (size_t k = 0; k < nv; k++) {
		struct gview *v = &views[k];
		char dir[PATH_MAX * 2];
		FMT(dir, "%s%s%s", ws_rel, *v->root ? "/" : "", v->root);
		struct buf b = { 0 };
		assert_int_equal(run_gitv(f, dir, NULL, 0, &b, GIT_ARGS("ls-files", "-z")), 0);
		parse_z(&v->tracked, &b, false, NULL);
		free(b.p);
		b = (struct buf){ 0 };
		run_gitv(f, dir, NULL, 0, &b, GIT_ARGS("config", "--bool", "core.ignoreCase"));
		v->icase = b.p && !strncmp(b.p, "true", 4);
		free(b.p);
		b = (struct buf){ 0 };
		assert_int_equal(run_gitv(f, dir, NULL, 0, &b,
					  GIT_ARGS("status", "--ignored", "--porcelain=v1", "-z",
						   "--untracked-files=all")),
				 0);
		parse_z(&v->untracked, &b, true, &v->ignored);
		free(b.p);
		size_t in_len = 0;
		for (size_t i = 0; i < v->ck_in.n; i++)
			in_len += strlen(v->ck_in.v[i]) + 1;
		char *in = malloc(in_len + 1);
		assert_non_null(in);
		in_len = 0;
		for (size_t i = 0; i < v->ck_in.n; i++) {
			size_t l = strlen(v->ck_in.v[i]) + 1;
			memcpy(in + in_len, v->ck_in.v[i], l);
			in_len += l;
		}
		b = (struct buf){ 0 };
		int st = run_gitv(f, dir, in, in_len, &b,
				  GIT_ARGS("check-ignore", "-z", "--stdin"));
		assert_true(st == 0 || st == 1);
		parse_z(&v->ck_out, &b, false, NULL);
		free(b.p);
		free(in);
	}

	for (size_t i = 0; i < ps.n; i++) {
		const struct probe *pr = &ps.v[i];
		/* Outer repositories first: an ignored nested root hides it all. */
		int want = T_HOST;
		for (size_t k = 1; k < nv; k++) {
			size_t l = strlen(views[k].root);
			if (strncmp(pr->path, views[k].root, l) != 0 || pr->path[l] != '/')
				continue;
			const struct gview *outer = &views[owner(views, nv, views[k].root)];
			if (verdict(outer, rel_in(outer, views[k].root), true, false) == T_ISOLATED)
				want = T_ISOLATED;
		}
		if (want == T_HOST) {
			const struct gview *v = &views[owner(views, nv, pr->path)];
			want = verdict(v, rel_in(v, pr->path), pr->is_dir, pr->proposed);
		}
		enum lz_route got = route(s, pr->path, pr->is_dir);
		char q[2048];
		esc(pr->path, strlen(pr->path), q, sizeof(q));
		if (want == T_UNKNOWN)
			fail_msg("parity: git reports nothing for '%s' (in %s)", q, ws_rel);
		if ((want == T_ISOLATED) != (got == LZ_ROUTE_ISOLATED))
			fail_msg("parity mismatch in %s at '%s'%s%s: lazaret %s, git %s", ws_rel, q,
				 pr->is_dir ? " (directory)" : "", pr->proposed ? " (proposed)" : "",
				 route_name(got), want == T_ISOLATED ? "ISOLATED" : "HOST");
	}
	ASSERT_ROUTE(s, ".git", true, LZ_ROUTE_HOST);
	for (size_t k = 0; k < nv; k++) {
		strs_free(&views[k].tracked);
		strs_free(&views[k].ignored);
		strs_free(&views[k].untracked);
		strs_free(&views[k].ck_in);
		strs_free(&views[k].ck_out);
	}
	size_t n = ps.n;
	for (size_t i = 0; i < ps.n; i++)
		free(ps.v[i].path);
	free(ps.v);
	lz_ignoreclass_unref(s);
	parity_total += n;
	return n;
}

/* ---- unit cases ------------------------------------------------------------------ */

static void test_route__nested_gitignore_negation_and_precedence(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "*.log\n!keep.log\nout/\n");
	put(f, "ws/a.log", "");
	put(f, "ws/keep.log", "");
	put(f, "ws/sub/.gitignore", "keep.log\n!b.log\n");
	put(f, "ws/sub/keep.log", "");
	put(f, "ws/sub/b.log", "");
	put(f, "ws/sub/c.log", "");
	put(f, "ws/out/.gitignore", "!x.log\n"); /* inside an ignored directory: never read */
	put(f, "ws/out/x.log", "");
	put(f, "ws/sub/deep/.gitignore", "!c.log\n");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "a.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "keep.log", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "sub/keep.log", false, LZ_ROUTE_ISOLATED); /* deeper file wins */
	ASSERT_ROUTE(s, "sub/b.log", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "sub/c.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "sub/deep/c.log", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "sub/deep/new/c.log", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "out", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "out", false, LZ_ROUTE_HOST); /* "out/" is directory-only */
	ASSERT_ROUTE(s, "out/x.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "", true, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

static void test_route__directory_only_and_anchoring(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "/top\nmid/end\nbuild/\nd/*.o\n/x/y/\n");
	put(f, "ws/top", "");
	put(f, "ws/a/top", "");
	put(f, "ws/mid/end", "");
	put(f, "ws/a/mid/end", "");
	put(f, "ws/build/o", "");
	put(f, "ws/a/build", ""); /* a file: "build/" does not match */
	put(f, "ws/d/k.o", "");
	put(f, "ws/d/e/k.o", "");
	put(f, "ws/x/y/z", "");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "top", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "a/top", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "mid/end", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "a/mid/end", false, LZ_ROUTE_HOST); /* a slash anchors */
	ASSERT_ROUTE(s, "build", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "a/build", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "a/build", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "d/k.o", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "d/e/k.o", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "x/y", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "x/y/z", false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

static void test_route__double_star(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "**/cache\na/**/b\nlogs/**\n!logs/keep\nfoo**/bar\nq**z\n");
	put(f, "ws/cache", "");
	put(f, "ws/p/q/cache", "");
	put(f, "ws/a/b", "");
	put(f, "ws/a/x/y/b", "");
	put(f, "ws/logs/keep", "");
	put(f, "ws/logs/other", "");
	put(f, "ws/foo/bar", "");
	put(f, "ws/fooz/m/bar", "");
	put(f, "ws/qz", "");
	put(f, "ws/q/z", "");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "cache", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "p/q/cache", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "a/b", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "a/x/y/b", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "logs/keep", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "logs/other", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "logs", true, LZ_ROUTE_HOST);
	/* Git matches the literal prefix "foo" first; the rest "**" + "/bar" is
	 * then a leading "**": fooz/m/bar is ignored too. */
	ASSERT_ROUTE(s, "fooz/m/bar", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "qz", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "q/z", false, LZ_ROUTE_HOST); /* "q**z" is "q*z" */
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

static void test_route__escapes_and_trailing_spaces(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore",
	    "\\#hash\n#comment\n\\!bang\nsp\\ \ntrail   \nst\\*r\n[[]b]\nback\\\\slash\r\n\xef\xbb\xbfnobom\n");
	put(f, "ws/#hash", "");
	put(f, "ws/#comment", "");
	put(f, "ws/!bang", "");
	put(f, "ws/sp ", "");
	put(f, "ws/sp", "");
	put(f, "ws/trail", "");
	put(f, "ws/trail   ", "");
	put(f, "ws/st*r", "");
	put(f, "ws/stXr", "");
	put(f, "ws/[b]", "");
	put(f, "ws/back\\slash", "");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "#hash", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "#comment", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "!bang", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "sp ", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "sp", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "trail", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "trail   ", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "st*r", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "stXr", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "back\\slash", false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

static void test_route__info_exclude_and_global_excludes(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	char g[PATH_MAX];
	FMT(g, "%s/global-ignore", f->dir);
	GIT(f, "", "config", "--global", "core.excludesFile", g);
	put(f, "global-ignore", "*.g\n*.both\n!*.info\nglobal-only\n");
	put(f, "ws/.git/info/exclude", "*.info\n!*.both\n*.ex\n");
	put(f, "ws/.gitignore", "!x.ex\n");
	put(f, "ws/a.g", "");
	put(f, "ws/a.both", "");
	put(f, "ws/a.info", "");
	put(f, "ws/a.ex", "");
	put(f, "ws/x.ex", "");
	put(f, "ws/global-only", "");
	lz_ignoreclass *s = snap_at(f, "ws", "global-ignore", -1);
	ASSERT_ROUTE(s, "a.g", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "a.both", false, LZ_ROUTE_HOST);   /* info/exclude beats global */
	ASSERT_ROUTE(s, "a.info", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "x.ex", false, LZ_ROUTE_HOST);     /* .gitignore beats info/exclude */
	ASSERT_ROUTE(s, "a.ex", false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, "global-ignore");
}

static void test_route__tracked_never_ignored(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "build/\n*.o\n");
	put(f, "ws/build/keep.c", "");
	put(f, "ws/build/out.bin", "");
	put(f, "ws/build/.gitignore", "!out.bin\n");
	put(f, "ws/t.o", "");
	put(f, "ws/u.o", "");
	GIT(f, "ws", "add", "-f", "build/keep.c", "t.o");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "t.o", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "u.o", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "build", true, LZ_ROUTE_HOST); /* holds a tracked path */
	ASSERT_ROUTE(s, "build/keep.c", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "build/out.bin", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "build/new", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "build/new/x", false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

static void test_route__linked_worktree(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "main");
	put(f, "main/.gitignore", "*.tmp\n");
	put(f, "main/f.txt", "");
	GIT(f, "main", "add", ".");
	GIT(f, "main", "commit", "-q", "-m", "init");
	GIT(f, "main", "worktree", "add", "-q", "../wt");
	put(f, "main/.git/info/exclude", "*.common\n");
	put(f, "wt/a.common", "");
	put(f, "wt/a.tmp", "");
	put(f, "wt/b.txt", "");
	put(f, "wt/x.o", "");
	GIT(f, "wt", "add", "-f", "x.o");
	lz_ignoreclass *s = snap_at(f, "wt", NULL, -1);
	ASSERT_ROUTE(s, "a.common", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "a.tmp", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "f.txt", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".git", false, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
	parity(f, "wt", NULL, NULL);
	parity(f, "main", NULL, NULL);
}

static void test_route__nested_repository(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "*.log\nignored-repo/\n");
	repo(f, "ws/inner");
	put(f, "ws/inner/.gitignore", "*.tmp\n");
	put(f, "ws/inner/.git/info/exclude", "*.inx\n");
	put(f, "ws/inner/a.log", ""); /* the outer rule does not reach in */
	put(f, "ws/inner/a.tmp", "");
	put(f, "ws/inner/a.inx", "");
	put(f, "ws/inner/t.tmp", "");
	GIT(f, "ws/inner", "add", "-f", "t.tmp");
	repo(f, "ws/sub");
	put(f, "ws/sub/s.tmp", "");
	put(f, "ws/sub/.gitignore", "*.tmp\n");
	GIT(f, "ws/sub", "add", ".gitignore");
	GIT(f, "ws/sub", "commit", "-q", "-m", "s");
	GIT(f, "ws", "add", "sub"); /* a gitlink */
	repo(f, "ws/ignored-repo");
	put(f, "ws/ignored-repo/x", "");
	GIT(f, "ws/ignored-repo", "add", "x");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "inner", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "inner/a.log", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "inner/a.tmp", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "inner/a.inx", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "inner/t.tmp", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "inner/.git", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "inner/.git/index", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "sub", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "sub/s.tmp", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "sub/n.log", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "ignored-repo", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "ignored-repo/x", false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
	parity(f, "ws", (const char *const[]){ "inner", "sub", NULL }, NULL);
}

/* A gitlink with nothing checked out (an unpopulated submodule): Git
 * looks away from its paths, so they are host-backed, but never a .git
 * in them, which would make it a repository host Git enters with a
 * configuration the sandbox wrote. */
static void test_route__unpopulated_gitlink_has_no_host_dotgit(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	GIT(f, "ws", "update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,gl");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "gl/file", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "gl/.git", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "gl/.git", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "gl/x/.git", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "gl/x/.git/config", false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
}

/* A nested .git file that points outside the workspace is not followed
 * (a documented divergence from Git): the directory is an ordinary one. */
static void test_route__nested_repository_outside_workspace_not_read(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "*.log\n");
	repo(f, "host-repo");
	put(f, "host-repo/.git/info/exclude", "*.secret\n");
	char gitfile[PATH_MAX + 16];
	FMT(gitfile, "gitdir: %s/host-repo/.git\n", f->dir);
	put(f, "ws/n/.git", gitfile);
	put(f, "ws/n/a.secret", "");
	put(f, "ws/n/a.log", "");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "n/a.secret", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "n/a.log", false, LZ_ROUTE_ISOLATED); /* the outer rules */
	lz_ignoreclass_unref(s);
}

static void test_route__ignore_case(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	GIT(f, "ws", "config", "core.ignoreCase", "true");
	put(f, "ws/.gitignore", "*.LOG\nBuild/\n[a-c]x\n\\Esc\n[[:upper:]]U\n");
	put(f, "ws/a.log", "");
	put(f, "ws/A.Log", "");
	put(f, "ws/build/x", "");
	put(f, "ws/Bx", "");
	put(f, "ws/esc", "");
	put(f, "ws/Esc", "");
	put(f, "ws/uU", "");
	put(f, "ws/Tracked.LOG", "");
	GIT(f, "ws", "add", "-f", "Tracked.LOG");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "a.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "A.Log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "BUILD", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "Bx", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "tracked.log", false, LZ_ROUTE_HOST); /* the index, folded */
	ASSERT_ROUTE(s, ".GIT", true, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

static void test_route__non_utf8_names(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "*.log\n\xff*\n!\xfe\xfe.log\n");
	put(f, "ws/\xff\xfe.log", "");
	put(f, "ws/\xfe\xfe.log", "");
	put(f, "ws/\xff-dir/x", "");
	put(f, "ws/ok\xe9", "");
	put(f, "ws/t\xfa.log", "");
	GIT(f, "ws", "add", "-f", "t\xfa.log");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "\xff\xfe.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "\xfe\xfe.log", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "\xff-dir/x", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "ok\xe9", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "t\xfa.log", false, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

static void test_build__symlinks_not_followed(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "outside/.gitignore", "*.txt\n");
	put(f, "outside/exclude", "*.md\n");
	char p[PATH_MAX], t[PATH_MAX];
	FMT(t, "%s/outside/.gitignore", f->dir);
	FMT(p, "%s/ws/.gitignore", f->dir);
	assert_int_equal(symlink(t, p), 0);
	FMT(t, "%s/outside", f->dir);
	FMT(p, "%s/ws/linked", f->dir);
	assert_int_equal(symlink(t, p), 0);
	mkdirs(f, "ws/real");
	FMT(t, "../../outside/.gitignore");
	FMT(p, "%s/ws/real/.gitignore", f->dir);
	assert_int_equal(symlink(t, p), 0);
	put(f, "ws/a.txt", "");
	put(f, "ws/real/b.txt", "");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, "a.txt", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "real/b.txt", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "linked", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "linked/c.txt", false, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

/* A FIFO or a socket where an ignore file would be (the sandbox can make
 * both) is no file: the build neither blocks on the FIFO's open (which
 * wedged the router's watch and every later launch) nor fails. */
static void test_build__fifos_and_sockets_are_no_file(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "*.log\n");
	mkdirs(f, "ws/fifo");
	mkdirs(f, "ws/sock");
	put(f, "ws/fifo/a.log", "");
	put(f, "ws/sock/a.log", "");
	char p[PATH_MAX];
	FMT(p, "%s/ws/fifo/.gitignore", f->dir);
	assert_int_equal(mkfifo(p, 0644), 0);
	FMT(p, "%s/global", f->dir);
	assert_int_equal(mkfifo(p, 0644), 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	FMT(p, "%s/ws/sock/.gitignore", f->dir);
	assert_true(strlen(p) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, p, strlen(p) + 1);
	int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(sk >= 0);
	assert_int_equal(bind(sk, (struct sockaddr *)&sa, sizeof(sa)), 0);
	alarm(30); /* a blocked open fails the test instead of hanging it */
	lz_ignoreclass *s = snap_at(f, "ws", "global", -1);
	alarm(0);
	close(sk);
	ASSERT_ROUTE(s, "fifo/a.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "sock/a.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "fifo/b.txt", false, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
}

/* A sandbox-written pathological pattern neither recurses without bound
 * nor takes long: over LZ_PATH_MAX bytes it is dropped, below that the
 * backtracking is pruned. */
static void test_route__pathological_patterns(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	static char text[3 * 8192 + 16];
	size_t k = 0;
	for (size_t i = 0; i < 8000; i += 2) {
		text[k++] = '*';
		text[k++] = 'a';
	}
	text[k++] = 'b';
	text[k++] = '\n';
	for (size_t i = 0; i < 2000; i += 2) {
		text[k++] = '*';
		text[k++] = 'a';
	}
	text[k++] = 'b';
	text[k++] = '\n';
	for (size_t i = 0; i < 2000; i += 2) {
		text[k++] = '*';
		text[k++] = 'a';
	}
	memcpy(text + k, "/x\n", 3); /* one component, then a slash */
	k += 3;
	text[k] = '\0';
	put(f, "ws/.gitignore", text);
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	char name[256];
	memset(name, 'a', 250);
	name[250] = '\0';
	ASSERT_ROUTE(s, name, false, LZ_ROUTE_HOST);
	name[249] = 'b';
	ASSERT_ROUTE(s, name, false, LZ_ROUTE_HOST); /* 1000 'a's needed */
	name[249] = 'a';
	strcat(name, "/x");
	ASSERT_ROUTE(s, name, false, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
}

/* Writes at text + k the line '*[' + pairs "[:" + 'x]' (a bracket whose
 * "[:" name no class: members '[', ':' and 'x') and returns the new end. */
static size_t costly_bracket_line(char *text, size_t k, int pairs)
{
	text[k++] = '*';
	text[k++] = '[';
	for (int i = 0; i < pairs; i++) {
		text[k++] = '[';
		text[k++] = ':';
	}
	memcpy(text + k, "x]\n", 3);
	return k + 3;
}

/* Patterns whose matching Git does in exponential or quadratic time (a
 * line the sandbox writes would stall every lookup that reaches it): a
 * chain of "**" + "/" against a deep path, and a bracket of many "[:"
 * that name no class. Without the pruning in wildmatch.c the first takes
 * about 2^40 steps and this test does not end. */
static void test_route__pathological_double_star_and_classes(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	static char text[8192];
	size_t k = 0;
	for (int i = 0; i < 40; i++) {
		memcpy(text + k, "**/", 3);
		k += 3;
	}
	memcpy(text + k, "b\n", 2);
	k = costly_bracket_line(text, k + 2, 1500);
	text[k] = '\0';
	put(f, "ws/.gitignore", text);
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	char deep[2 * 100 + 2];
	for (int i = 0; i < 100; i++)
		memcpy(deep + 2 * i, "a/", 2);
	deep[2 * 100 - 1] = '\0'; /* a/a/.../a */
	ASSERT_ROUTE(s, deep, false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, deep, true, LZ_ROUTE_HOST);
	deep[2 * 100 - 2] = 'b'; /* a/.../a/b: the chain matches */
	ASSERT_ROUTE(s, deep, false, LZ_ROUTE_ISOLATED);
	char name[256];
	memset(name, 'c', 250);
	name[250] = '\0';
	ASSERT_ROUTE(s, name, false, LZ_ROUTE_HOST);
	name[249] = ':'; /* a member of the bracket: "[", ":" and "x" */
	ASSERT_ROUTE(s, name, false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
}

/* Rules written to be slow within every size bound: a query refuses
 * (-E2BIG, the same each time) once its matching would take more than
 * LZ_IGNORECLASS_QUERY_STEPS, while cheap queries of the same snapshot
 * answer; a build past its steps fails saying where, and changes nothing. */
static void test_route__matching_budgets(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	mkdirs(f, "ws/sub/deeper");
	/* 1,024 lines of '*[' + 1,000 "[:" + 'x]': each costs about 2,000
	 * steps per byte of a name (the bracket is scanned at every start). */
	size_t line = 2 + 2000 + 3, n_lines = 1024;
	char *text = malloc(n_lines * line + 16);
	assert_non_null(text);
	size_t k = 0;
	memcpy(text + k, "*.o\n", 4);
	k += 4;
	for (size_t l = 0; l < n_lines; l++)
		k = costly_bracket_line(text, k, 1000);
	text[k] = '\0';
	put(f, "ws/.gitignore", text);
	free(text);
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	char name[256];
	memset(name, 'c', 250);
	name[250] = '\0';
	for (int i = 0; i < 2; i++) {
		enum lz_route r = LZ_ROUTE_HOST;
		assert_int_equal(lz_ignoreclass_route(s, name, strlen(name), false, &r), -E2BIG);
	}
	/* Short names stay within the steps; known directories were decided
	 * at build. */
	ASSERT_ROUTE(s, "a.o", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "ab", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "x", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "sub/deeper", true, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);

	char p[PATH_MAX];
	FMT(p, "%s/ws", f->dir);
	int wsfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(wsfd >= 0);
	struct lz_ignoreclass_inputs in = { .workspace_fd = wsfd, .isolated_fd = -1, .build_steps = 100000 };
	struct lz_err err = { 0 };
	lz_ignoreclass *none = NULL;
	assert_int_equal(lz_ignoreclass_build(&in, &none, &err), -E2BIG);
	assert_null(none);
	assert_non_null(strstr(err.msg, "ignore rules take too long to match (stopped at 'sub"));
	in.build_steps = 0; /* the default: this tree is well within it */
	assert_int_equal(lz_ignoreclass_build(&in, &none, &err), 0);
	assert_non_null(none);
	lz_ignoreclass_unref(none);
	close(wsfd);
}

static void test_route__malformed_paths(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	static const char *const bad[] = { "/a", "a//b", "a/", "..", "a/../b", ".", "a/./b", "/",
					   "a/.." };
	enum lz_route r = LZ_ROUTE_INCONSISTENT;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
		if (lz_ignoreclass_route(s, bad[i], strlen(bad[i]), false, &r) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
	}
	assert_int_equal(lz_ignoreclass_route(s, "a\0b", 3, false, &r), -EINVAL);
	assert_int_equal(lz_ignoreclass_route(s, NULL, 1, false, &r), -EINVAL);
	assert_int_equal(r, LZ_ROUTE_INCONSISTENT); /* untouched on failure */
	char longname[300];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(lz_ignoreclass_route(s, longname, strlen(longname), false, &r),
			 -ENAMETOOLONG);
	assert_int_equal(lz_ignoreclass_route(s, "", 0, true, &r), 0);
	assert_int_equal(r, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
}

static void test_route__inconsistent_tracked_isolated_only(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.gitignore", "*.o\n");
	put(f, "ws/gone.c", "");
	put(f, "ws/both.c", "");
	put(f, "ws/d/gone.o", "");
	GIT(f, "ws", "add", "-f", "gone.c", "both.c", "d/gone.o");
	char p[PATH_MAX];
	FMT(p, "%s/ws/gone.c", f->dir);
	assert_int_equal(unlink(p), 0);
	FMT(p, "%s/ws/d/gone.o", f->dir);
	assert_int_equal(unlink(p), 0);
	put(f, "iso/gone.c", "");
	put(f, "iso/both.c", "");
	put(f, "iso/d/gone.o", "");
	put(f, "iso/new.o", "");
	FMT(p, "%s/iso", f->dir);
	int iso = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(iso >= 0);
	lz_ignoreclass *s = snap_at(f, "ws", NULL, iso);
	close(iso);
	ASSERT_ROUTE(s, "gone.c", false, LZ_ROUTE_INCONSISTENT);
	ASSERT_ROUTE(s, "d/gone.o", false, LZ_ROUTE_INCONSISTENT);
	ASSERT_ROUTE(s, "d", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "both.c", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "new.o", false, LZ_ROUTE_ISOLATED);
	lz_ignoreclass_unref(s);
}

static void test_build__not_a_repository(void **state)
{
	struct fx *f = *state;
	mkdirs(f, "plain");
	put(f, "plain/.gitignore", "*\n");
	lz_ignoreclass *s = snap_at(f, "plain", NULL, -1);
	ASSERT_ROUTE(s, "x", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".gitignore", false, LZ_ROUTE_HOST);
	/* ref/unref keep it alive; unref(NULL) is a no-op */
	assert_ptr_equal(lz_ignoreclass_ref(s), s);
	lz_ignoreclass_unref(s);
	ASSERT_ROUTE(s, "x", true, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
	lz_ignoreclass_unref(NULL);
	struct lz_err err = { 0 };
	struct lz_ignoreclass_inputs in = { .workspace_fd = -1, .isolated_fd = -1 };
	assert_int_equal(lz_ignoreclass_build(&in, &s, &err), -EINVAL);
}

/* ---- Git control files (no implicit host authority) ------------------------------ */

static const char *guard_name(enum lz_guard g)
{
	return g == LZ_GUARD_CONTROL ? "CONTROL" : g == LZ_GUARD_HOLDS ? "HOLDS" : g == LZ_GUARD_GITDATA ? "GITDATA" : "NONE";
}

#define ASSERT_GUARD(s, path, is_dir, want)                                                   \
	do {                                                                                  \
		enum lz_guard g_ = LZ_GUARD_NONE;                                             \
		assert_int_equal(lz_ignoreclass_guard((s), (path), strlen(path), (is_dir), &g_), 0); \
		if (g_ != (want))                                                             \
			fail_msg("guard of '%s'%s: %s, want %s", (path), (is_dir) ? " (dir)" : "", \
				 guard_name(g_), guard_name(want));                           \
	} while (0)

/* A host repository with a populated submodule, a linked worktree of its
 * own, a nested repository, a bare one and configuration that names
 * workspace files. */
/* ws: a repository with one commit and a populated submodule "mod". */
static void repo_with_submodule(struct fx *f)
{
	repo(f, "src-sub");
	put(f, "src-sub/s.txt", "s");
	GIT(f, "src-sub", "add", ".");
	GIT(f, "src-sub", "commit", "-q", "-m", "s");
	repo(f, "ws");
	put(f, "ws/f.txt", "f");
	GIT(f, "ws", "add", ".");
	GIT(f, "ws", "commit", "-q", "-m", "f");
	char url[PATH_MAX];
	FMT(url, "%s/src-sub", f->dir);
	GIT(f, "ws", "-c", "protocol.file.allow=always", "submodule", "add", "-q", url, "mod");
}

static lz_ignoreclass *control_fixture(struct fx *f)
{
	repo_with_submodule(f);
	GIT(f, "ws", "worktree", "add", "-q", "../wt");
	repo(f, "ws/inner");
	GIT(f, "ws", "init", "-q", "--bare", "fixtures/bare.git");
	GIT(f, "ws", "config", "include.path", "../conf/extra.inc");
	GIT(f, "ws", "config", "core.hooksPath", ".husky");
	GIT(f, "ws", "config", "core.fsmonitor", "./tools/fsmon.sh");
	GIT(f, "ws", "config", "alias.x", "!sh ./scripts/x.sh arg");
	GIT(f, "ws", "config", "--add", "include.path", "~/outside.inc");
	put(f, "ws/conf/extra.inc", "");
	return snap_at(f, "ws", NULL, -1);
}

static void test_guard__git_control_files(void **state)
{
	struct fx *f = *state;
	need_git();
	lz_ignoreclass *s = control_fixture(f);
	/* the top-level Git directory */
	ASSERT_GUARD(s, ".git", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".git/config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/config.worktree", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/commondir", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/hooks", true, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/hooks/pre-commit", false, LZ_GUARD_CONTROL);
	/* the rest of a Git directory: written as usual, never a link */
	ASSERT_GUARD(s, ".git/HEAD", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/logs/HEAD", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/COMMIT_EDITMSG", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/index", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/index.lock", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/refs/heads/config", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/objects/ab", true, LZ_GUARD_GITDATA);
	/* what points host Git at other object stores, and the way there */
	ASSERT_GUARD(s, ".git/objects/info/alternates", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/objects/info/http-alternates", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/info/grafts", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/objects/info", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".git/objects", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".git/info", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".git/info/exclude", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/objects/info/packs", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/objects/info/alternates2", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/objects/inf", true, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/modules/mod/objects/info/alternates", false, LZ_GUARD_CONTROL);
	/* the submodule: its Git directory, and its .git file */
	ASSERT_GUARD(s, ".git/modules", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".git/modules/mod", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".git/modules/mod/config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/modules/mod/hooks/post-checkout", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/modules/mod/HEAD", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".git/modules/other", true, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "mod/.git", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "mod", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "mod/s.txt", false, LZ_GUARD_NONE);
	/* the linked worktree's administrative directory */
	ASSERT_GUARD(s, ".git/worktrees/wt", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".git/worktrees/wt/commondir", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/worktrees/wt/gitdir", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git/worktrees/wt/HEAD", false, LZ_GUARD_GITDATA);
	/* a nested repository and a bare one */
	ASSERT_GUARD(s, "inner", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "inner/.git/config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "inner/.git/hooks", true, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "inner/x.c", false, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "fixtures", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "fixtures/bare.git/config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "fixtures/bare.git/hooks/update", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "fixtures/bare.git/objects/pack", true, LZ_GUARD_GITDATA);
	/* what the configuration names */
	ASSERT_GUARD(s, "conf/extra.inc", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "conf", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "conf/other", false, LZ_GUARD_NONE);
	ASSERT_GUARD(s, ".husky", true, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".husky/pre-commit", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "tools/fsmon.sh", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "tools", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "scripts/x.sh", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "arg", false, LZ_GUARD_NONE);
	/* ordinary paths */
	ASSERT_GUARD(s, "f.txt", false, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "src", true, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "config", false, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "hooks", true, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "", true, LZ_GUARD_HOLDS);
	enum lz_guard g;
	assert_int_equal(lz_ignoreclass_guard(s, "a//b", 4, false, &g), -EINVAL);
	assert_int_equal(lz_ignoreclass_guard(s, ".git/../x", 9, false, &g), -EINVAL);
	lz_ignoreclass_unref(s);
}

/* Every configuration key whose value host Git runs as a command guards
 * the workspace programs it names (each of these was written through the
 * router before they were listed). */
static void test_guard__every_key_git_runs(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	static const char *const keys[][2] = {
		{ "difftool.x.cmd", "t/difftool-cmd.sh $LOCAL" },
		{ "difftool.x.path", "t/difftool-path.sh" },
		{ "mergetool.x.cmd", "t/mergetool-cmd.sh" },
		{ "mergetool.x.path", "t/mergetool-path.sh" },
		{ "pager.log", "t/pager-log.sh" },
		{ "interactive.diffFilter", "t/difffilter.sh" },
		{ "remote.origin.uploadpack", "t/uploadpack.sh" },
		{ "remote.origin.receivepack", "t/receivepack.sh" },
		{ "core.alternateRefsCommand", "t/altrefs.sh" },
		{ "gpg.ssh.defaultKeyCommand", "t/keycmd.sh" },
		{ "submodule.m.update", "!t/subupdate.sh" },
		{ "trailer.sign.cmd", "t/trailer-cmd.sh" },
		{ "trailer.sign.command", "t/trailer-command.sh" },
		{ "sendemail.sendmailCmd", "t/sendmail.sh" },
		{ "sendemail.toCmd", "t/tocmd.sh" },
		{ "sendemail.ccCmd", "t/cccmd.sh" },
		{ "sendemail.work.toCmd", "t/work-tocmd.sh" },
		{ "imap.tunnel", "t/tunnel.sh" },
		{ "man.x.cmd", "t/man-cmd.sh" },
		{ "man.x.path", "t/man-path.sh" },
		{ "browser.x.cmd", "t/browser-cmd.sh" },
		{ "browser.x.path", "t/browser-path.sh" },
		{ "guitool.x.cmd", "t/guitool.sh" },
		{ "uploadpack.packObjectsHook", "t/packobjects.sh" },
		{ "tar.tgz.command", "t/tar-command.sh" },
	};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		GIT(f, "ws", "config", keys[k][0], keys[k][1]);
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		char path[128];
		const char *v = keys[k][1] + (keys[k][1][0] == '!');
		snprintf(path, sizeof(path), "%.*s", (int)strcspn(v, " "), v);
		enum lz_guard g;
		assert_int_equal(lz_ignoreclass_guard(s, path, strlen(path), false, &g), 0);
		if (g != LZ_GUARD_CONTROL)
			fail_msg("%s = %s: %s is not guarded", keys[k][0], keys[k][1], path);
	}
	ASSERT_GUARD(s, "t/other.sh", false, LZ_GUARD_NONE);
	lz_ignoreclass_unref(s);
}

/* What host Git reads when it runs, not when the snapshot is built: the
 * worktree's config.worktree (libgit2 1.5 reads none), an include whose
 * condition libgit2 1.5 does not evaluate (hasconfig:) or evaluates
 * against a HEAD the sandbox writes (onbranch:). Their keys are guarded
 * whatever the condition. */
static void test_guard__keys_git_reads_when_it_runs(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	GIT(f, "ws", "config", "extensions.worktreeConfig", "true");
	GIT(f, "ws", "config", "--worktree", "core.hooksPath", ".githooks");
	put(f, ".gitconfig",
	    "[user]\n\tname = t\n\temail = t@example.invalid\n[init]\n\tdefaultBranch = main\n"
	    "[includeIf \"onbranch:release\"]\n\tpath = ~/release.inc\n"
	    "[includeIf \"hasconfig:remote.*.url:https://example.invalid/**\"]\n\tpath = work.inc\n");
	put(f, "release.inc", "[core]\n\tfsmonitor = ./tools/fsmon.sh\n");
	put(f, "work.inc", "[alias]\n\tw = !./tools/work.sh\n");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_GUARD(s, ".githooks/pre-commit", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "tools/fsmon.sh", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "tools/work.sh", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "tools/other.sh", false, LZ_GUARD_NONE);
	lz_ignoreclass_unref(s);
}

/* A bare workspace is a known Git directory like any other (host Git
 * opens it from anywhere inside): the workspace that is a bare repository
 * (its Git directory is the root), and the "bare + worktrees" container
 * (.bare, a .git file pointing to it, a linked worktree beside it), whose
 * worktree is classified by its own rules. */
static void test_guard__bare_workspaces(void **state)
{
	struct fx *f = *state;
	need_git();
	GIT(f, "", "init", "-q", "--bare", "bare");
	lz_ignoreclass *s = snap_at(f, "bare", NULL, -1);
	ASSERT_GUARD(s, "", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "commondir", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "hooks", true, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "hooks/pre-receive", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "objects/info/alternates", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "objects/info", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "worktrees/new", true, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "modules/new/config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "HEAD", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, "refs/heads/main", false, LZ_GUARD_GITDATA);
	ASSERT_ROUTE(s, "config", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "objects", true, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);

	repo(f, "src");
	put(f, "src/.gitignore", "*.o\n");
	put(f, "src/a.c", "a");
	GIT(f, "src", "add", ".");
	GIT(f, "src", "commit", "-q", "-m", "a");
	/* A bare clone with a linked worktree inside it: beside Git's own
	 * names, the worktree is a worktree, not Git data (symlinks and
	 * FIFOs can be made there). */
	GIT(f, "", "clone", "-q", "--bare", "src", "bare2");
	GIT(f, "bare2", "worktree", "add", "-q", "main");
	s = snap_at(f, "bare2", NULL, -1);
	ASSERT_GUARD(s, "HEAD", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, "packed-refs", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, "ORIG_HEAD", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, "config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "main/a.c", false, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "main/sub", true, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "main/.git", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "notes.txt", false, LZ_GUARD_NONE);
	ASSERT_ROUTE(s, "main/a.c", false, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);

	mkdirs(f, "box");
	GIT(f, "box", "clone", "-q", "--bare", "../src", ".bare");
	put(f, "box/.git", "gitdir: ./.bare\n");
	GIT(f, "box", "worktree", "add", "-q", "main");
	s = snap_at(f, "box", NULL, -1);
	ASSERT_GUARD(s, ".bare", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".bare/config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".bare/commondir", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".bare/hooks/post-checkout", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".bare/objects/info/alternates", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".bare/worktrees/main", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".bare/worktrees/main/commondir", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".bare/worktrees/main/gitdir", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".bare/worktrees/main/HEAD", false, LZ_GUARD_GITDATA);
	ASSERT_GUARD(s, ".bare/worktrees/other", true, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".git", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "main", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, "main/.git", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "main/a.c", false, LZ_GUARD_NONE);
	ASSERT_ROUTE(s, "main/a.c", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "main/x.o", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "main/.git", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".bare/config", false, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);
	parity(f, "box/main", NULL, NULL);
}

static void test_route__repositories_made_inside_stay_inside(void **state)
{
	struct fx *f = *state;
	need_git();
	lz_ignoreclass *s = control_fixture(f);
	ASSERT_ROUTE(s, ".git", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".git/config", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "inner/.git", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "mod/.git", false, LZ_ROUTE_HOST);
	/* new repositories, anywhere, as directories or .git files */
	ASSERT_ROUTE(s, "scratch/.git", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "scratch/.git/config", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "scratch/.git", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "inner/deeper/.git", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "f.txt/.git", true, LZ_ROUTE_ISOLATED);
	/* new submodule and worktree Git directories */
	ASSERT_ROUTE(s, ".git/modules", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".git/modules/mod", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".git/modules/mod/config", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".git/modules/new", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".git/modules/new/config", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".git/worktrees/wt/HEAD", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".git/worktrees/wt2", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".git/worktrees", true, LZ_ROUTE_HOST);
	lz_ignoreclass_unref(s);

	/* A workspace that is not a repository: its own .git is made inside;
	 * a nested repository keeps its .git and its ignore rules; the
	 * workspace's .gitignore is nobody's. */
	mkdirs(f, "plain");
	put(f, "plain/.gitignore", "*.o\n");
	repo(f, "plain/r");
	put(f, "plain/r/.gitignore", "*.tmp\n");
	s = snap_at(f, "plain", NULL, -1);
	ASSERT_ROUTE(s, ".git", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".git/config", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "x.o", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "r/.git", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "r/a.tmp", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "r/a.o", false, LZ_ROUTE_HOST);
	ASSERT_GUARD(s, "r/.git/config", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, "r", true, LZ_GUARD_HOLDS);
	lz_ignoreclass_unref(s);
	parity(f, "plain/r", NULL, NULL);
}

/* Editor configuration: tracked files stay on the host, read-only; the
 * rest is the sandbox's own; off, everything is as Git says. */
/* The worktree each index governs (lz_ignoreclass_index_root): the
 * repository's own, a linked worktree's inside the workspace, a
 * submodule's, a nested repository's; none for a worktree outside. */
#define ASSERT_INDEX_ROOT(s, gitdir, want)                                                       \
	do {                                                                                     \
		char root_[PATH_MAX];                                                            \
		size_t n_ = 99;                                                                  \
		int r_ = lz_ignoreclass_index_root((s), (gitdir), strlen(gitdir), root_, sizeof(root_), &n_); \
		if (r_ != 0 || n_ != strlen(want) || strcmp(root_, (want)) != 0)                \
			fail_msg("index root of '%s': %d '%s', want '%s'", (gitdir), r_, r_ ? "" : root_, (want)); \
	} while (0)

static void test_index_root__the_worktree_each_index_governs(void **state)
{
	struct fx *f = *state;
	need_git();
	repo_with_submodule(f);
	GIT(f, "ws", "worktree", "add", "-q", "lw/in");
	GIT(f, "ws", "worktree", "add", "-q", "../out");
	repo(f, "ws/inner");
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	ASSERT_INDEX_ROOT(s, ".git", "");
	ASSERT_INDEX_ROOT(s, ".git/worktrees/in", "lw/in");
	ASSERT_INDEX_ROOT(s, ".git/modules/mod", "mod");
	ASSERT_INDEX_ROOT(s, "inner/.git", "inner");
	char root[PATH_MAX];
	size_t n = 0;
	static const char *const none[] = { ".git/worktrees/out", "lw/in/.git", ".git/worktrees", "mod/.git", "f.txt" };
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		if (lz_ignoreclass_index_root(s, none[i], strlen(none[i]), root, sizeof(root), &n) != -ENOENT)
			fail_msg("'%s' governs a worktree", none[i]);
	assert_int_equal(lz_ignoreclass_index_root(s, ".git/worktrees/in", 17, root, 5, &n), -ENAMETOOLONG);
	assert_int_equal(lz_ignoreclass_index_root(s, ".git/worktrees/in", 17, root, 6, &n), 0);
	lz_ignoreclass_unref(s);
}

static void test_route__editor_configuration(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	put(f, "ws/.vscode/settings.json", "{}");
	put(f, "ws/.gitignore", "*.log\n");
	GIT(f, "ws", "add", ".");
	GIT(f, "ws", "commit", "-q", "-m", "init");
	put(f, "ws/.vscode/launch.json", "secret");
	put(f, "ws/.idea/workspace.xml", "");
	snap_hide_editor = true;
	lz_ignoreclass *s = snap_at(f, "ws", NULL, -1);
	snap_hide_editor = false;
	ASSERT_ROUTE(s, ".vscode", true, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".vscode/settings.json", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".vscode/launch.json", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".vscode/tasks.json", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".vscode/sub", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".vscode", false, LZ_ROUTE_ISOLATED); /* not the tracked directory */
	ASSERT_ROUTE(s, ".idea", true, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".idea/workspace.xml", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "pkg/.devcontainer/devcontainer.json", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, ".devcontainer.json", false, LZ_ROUTE_ISOLATED); /* its one-file form */
	ASSERT_ROUTE(s, ".nvim.lua", false, LZ_ROUTE_ISOLATED);
	ASSERT_ROUTE(s, "src/main.c", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, "x.log", false, LZ_ROUTE_ISOLATED);
	ASSERT_GUARD(s, ".vscode/settings.json", false, LZ_GUARD_CONTROL);
	ASSERT_GUARD(s, ".vscode", true, LZ_GUARD_HOLDS);
	ASSERT_GUARD(s, ".vscode/launch.json", false, LZ_GUARD_NONE);
	ASSERT_GUARD(s, "src/main.c", false, LZ_GUARD_NONE);
	lz_ignoreclass_unref(s);

	s = snap_at(f, "ws", NULL, -1);
	ASSERT_ROUTE(s, ".vscode/launch.json", false, LZ_ROUTE_HOST);
	ASSERT_ROUTE(s, ".idea", true, LZ_ROUTE_HOST);
	ASSERT_GUARD(s, ".vscode/settings.json", false, LZ_GUARD_NONE);
	lz_ignoreclass_unref(s);
	parity(f, "ws", NULL, NULL);
}

/* ---- randomized parity ---------------------------------------------------------- */

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static const char *const dir_names[] = { "d1", "d2", "build", "tmp", "Sub", "node_modules",
					 "x y", "\xfe", "a", "keep" };
static const char *const file_names[] = {
	"a", "b", "A", "foo", "Foo", "x.log", "X.LOG", "tmp", "build", "keep.log", "\xff\xfe",
	"sp ace", "#h", "!b", "[x]", "a b ", "e\\s", "q?", "st*r", "d.o", "\xc3\xb6", "k1",
	"node_modules", "Keep", "z.o", "b.LOG", "\xff.log",
};
static const char *const pat_tokens[] = {
	"*.log", "!*.log", "!keep*", "/build", "build/", "**/tmp", "tmp/**", "a/**/b", "d1/*",
	"[ab]*", "[!a]?", "*[[:upper:]]*", "foo\\ ", "x.log   ", "\\#h", "\\!b", "*\\[x\\]*",
	"sp\\ ace", "?", "d*/x*", "**/d2/**", "[a-c]", "\xff*", "*.LOG", "Foo", "/d1/foo",
	"!/build", "!d1/", "d2/", "*.o", "\\*", "st\\*r", "e\\\\s", "q\\?", "*/", "!*/", "**",
	"!**/keep", "[[:space:]]*", "*[[:digit:]]", "#comment", "", "  ", "node_modules/", "!tmp",
	"x y/", "*b", "a*", "[^ab]*", "**/*.LOG", "d1/**/*.log", "/*.log", "!/a", "Sub/", "!Sub/a",
	"[[:alpha:]][[:punct:]]*", "*[!.]?", "keep/**/", "a**b", "d2**/k*", "!\xfe/",
	"*a*b", "*[ab]*x*", "**/a*b*", "a*/*b", "*/b*/", "[a-]*", "[]a]*", "[!]]*", "[a-c-e]*",
	"*\\", "\\", "[", "[[:bogus:]]", "[z-a]*", "*o*o*g", "d?/**/?", "*/*/*", "[[:lower:]]",
	"![[:upper:]]*", "\\[x]", "[\\]]*", "*.[lL][oO][gG]", "**/", "/**/k*", "d1/**", "*.*.*",
};

/* Random patterns, one a line (CRLF now and then). */
static void random_patterns(char *text, size_t cap, size_t n)
{
	text[0] = '\0';
	for (size_t k = 0; k < n; k++) {
		strncat(text, pat_tokens[rnd(LZ_ARRAY_SIZE(pat_tokens))], cap - strlen(text) - 3);
		strcat(text, rnd(6) == 0 ? "\r\n" : "\n");
	}
}

/* A random tree in D/ws; *nested receives the root of a nested
 * repository (or "" for none). */
static void random_tree(const struct fx *f, const char *ws, uint64_t seed, bool icase, char *nested)
{
	rng = seed * 0x9e3779b97f4a7c15ull + 1;
	repo(f, ws);
	if (icase)
		GIT(f, ws, "config", "core.ignoreCase", "true");
	char dirs[24][PATH_MAX];
	size_t nd = 1;
	dirs[0][0] = '\0';
	for (size_t i = 0; i < 14; i++) {
		char parent[PATH_MAX];
		FMT(parent, "%s", dirs[rnd((uint32_t)nd)]);
		if (strlen(parent) > 40)
			continue;
		snprintf(dirs[nd], PATH_MAX, "%.64s%s%.64s", parent, *parent ? "/" : "",
			 dir_names[rnd(LZ_ARRAY_SIZE(dir_names))]);
		char p[PATH_MAX * 2];
		FMT(p, "%s/%s", ws, dirs[nd]);
		mkdirs(f, p);
		nd++;
	}
	struct strs add = { 0 };
	for (size_t i = 0; i < nd; i++) {
		size_t nf = 3 + rnd(6);
		for (size_t j = 0; j < nf; j++) {
			char rel[PATH_MAX], p[PATH_MAX * 2];
			FMT(rel, "%s%s%s", dirs[i], *dirs[i] ? "/" : "",
				 file_names[rnd(LZ_ARRAY_SIZE(file_names))]);
			FMT(p, "%s/%s/%s", f->dir, ws, rel);
			struct stat st;
			if (lstat(p, &st) == 0)
				continue;
			FMT(p, "%s/%s", ws, rel);
			put(f, p, "");
			if (rnd(5) == 0)
				strs_add(&add, rel, strlen(rel));
		}
		if (i == 0 || rnd(10) < 5) {
			char text[4096], p[PATH_MAX * 2];
			random_patterns(text, sizeof(text), 2 + rnd(5));
			FMT(p, "%s/%s%s.gitignore", ws, dirs[i], *dirs[i] ? "/" : "");
			put(f, p, text);
		}
		char p[PATH_MAX * 2], t[PATH_MAX * 2];
		if (rnd(6) == 0) { /* an empty directory */
			FMT(p, "%s/%s%s%s", ws, dirs[i], *dirs[i] ? "/" : "",
				 dir_names[rnd(LZ_ARRAY_SIZE(dir_names))]);
			mkdirs(f, p);
		}
		if (rnd(6) == 0) { /* a symlink to the parent directory */
			FMT(p, "%s/%s/%s%s%s", f->dir, ws, dirs[i], *dirs[i] ? "/" : "",
				 file_names[rnd(LZ_ARRAY_SIZE(file_names))]);
			struct stat st;
			if (lstat(p, &st) < 0)
				assert_int_equal(symlink("..", p), 0);
		}
		(void)t;
	}
	nested[0] = '\0';
	if (rnd(2) == 0) {
		char text[4096], p[PATH_MAX * 2], rel[PATH_MAX + 8];
		const char *d = dirs[rnd((uint32_t)nd)];
		FMT(rel, "%s%snest", d, *d ? "/" : "");
		FMT(p, "%s/%s", ws, rel);
		repo(f, p);
		if (icase && rnd(2) == 0)
			GIT(f, p, "config", "core.ignoreCase", "true");
		for (size_t j = 0; j < 6; j++) {
			FMT(p, "%s/%s/%s%s", ws, rel, j < 3 ? "d1/" : "",
				 file_names[rnd(LZ_ARRAY_SIZE(file_names))]);
			put(f, p, "");
		}
		random_patterns(text, sizeof(text), 3 + rnd(3));
		FMT(p, "%s/%s/.gitignore", ws, rel);
		put(f, p, text);
		random_patterns(text, sizeof(text), 2);
		FMT(p, "%s/%s/d1/.gitignore", ws, rel);
		put(f, p, text);
		FMT(p, "%s/%s", ws, rel);
		GIT(f, p, "add", "-f", "d1");
		memcpy(nested, rel, strlen(rel) + 1);
	}
	char text[1024] = "", p[PATH_MAX];
	for (size_t k = 0; k < 3; k++) {
		strcat(text, pat_tokens[rnd(LZ_ARRAY_SIZE(pat_tokens))]);
		strcat(text, "\n");
	}
	FMT(p, "%s/.git/info/exclude", ws);
	put(f, p, text);
	text[0] = '\0';
	for (size_t k = 0; k < 2; k++) {
		strcat(text, pat_tokens[rnd(LZ_ARRAY_SIZE(pat_tokens))]);
		strcat(text, "\n");
	}
	put(f, "global-ignore", text);
	for (size_t i = 0; i < add.n; i++) {
		char dir[PATH_MAX];
		FMT(dir, "%s", ws);
		if (run_gitv(f, dir, NULL, 0, NULL,
			     GIT_ARGS("--literal-pathspecs", "add", "-f", "--", add.v[i])) != 0)
			fail_msg("git add -f failed");
	}
	strs_free(&add);
}

static void test_parity__randomized(void **state)
{
	struct fx *f = *state;
	need_git();
	char g[PATH_MAX];
	FMT(g, "%s/global-ignore", f->dir);
	GIT(f, "", "config", "--global", "core.excludesFile", g);
	size_t before = parity_total;
	/* LZ_TEST_PARITY_SEEDS=N widens the search (default 12 seeds). */
	const char *env = getenv("LZ_TEST_PARITY_SEEDS");
	uint64_t seeds = env ? strtoull(env, NULL, 10) : 12;
	for (uint64_t seed = 1; seed <= seeds; seed++) {
		char ws[32];
		FMT(ws, "r%llu", (unsigned long long)seed);
		char nested[PATH_MAX + 8];
		random_tree(f, ws, seed, seed % 4 == 0, nested);
		parity(f, ws, (const char *const[]){ *nested ? nested : NULL, NULL }, "global-ignore");
	}
	print_message("randomized parity: %zu paths compared\n", parity_total - before);
	assert_true(seeds < 12 || parity_total - before >= 500);
}

/* The global excludes file as the developer's Git finds it: the XDG
 * default, core.excludesFile with "~/" expanded, and a relative value
 * refused (it would name a file relative to wherever the HC runs). */
static void test_global_excludes__resolution(void **state)
{
	struct fx *f = *state;
	char buf[PATH_MAX], want[PATH_MAX], cfg[PATH_MAX];
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_ignoreclass_global_excludes(f->dir, NULL, buf, sizeof(buf), &err), 0);
	FMT(want, "%s/.config/git/ignore", f->dir);
	assert_string_equal(buf, want);
	assert_int_equal(lz_ignoreclass_global_excludes(f->dir, "/xdg", buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "/xdg/git/ignore");
	FMT(cfg, "%s/.gitconfig", f->dir);
	FILE *c = fopen(cfg, "a");
	assert_non_null(c);
	fputs("[core]\n\texcludesFile = ~/my-ignore\n", c);
	assert_int_equal(fclose(c), 0);
	assert_int_equal(lz_ignoreclass_global_excludes(f->dir, "/xdg", buf, sizeof(buf), &err), 0);
	FMT(want, "%s/my-ignore", f->dir);
	assert_string_equal(buf, want);
	c = fopen(cfg, "a");
	assert_non_null(c);
	fputs("[core]\n\texcludesFile = relative/ignore\n", c);
	assert_int_equal(fclose(c), 0);
	assert_int_equal(lz_ignoreclass_global_excludes(f->dir, NULL, buf, sizeof(buf), &err), -EINVAL);
	assert_string_equal(buf, "");
	assert_non_null(strstr(err.msg, "absolute"));
	/* Git reads no file for an empty value; another user's home and a
	 * value-less key are refused, never replaced by the default. */
	c = fopen(cfg, "a");
	assert_non_null(c);
	fputs("[core]\n\texcludesFile =\n", c);
	assert_int_equal(fclose(c), 0);
	assert_int_equal(lz_ignoreclass_global_excludes(f->dir, "/xdg", buf, sizeof(buf), &err), 0);
	assert_string_equal(buf, "");
	static const char *const refused[] = { "~root/ignore", NULL };
	for (size_t i = 0; i < 2; i++) {
		c = fopen(cfg, "a");
		assert_non_null(c);
		if (refused[i])
			fprintf(c, "[core]\n\texcludesFile = %s\n", refused[i]);
		else
			fputs("[core]\n\texcludesFile\n", c);
		assert_int_equal(fclose(c), 0);
		strcpy(buf, "unchanged");
		assert_int_equal(lz_ignoreclass_global_excludes(f->dir, "/xdg", buf, sizeof(buf), &err), -EINVAL);
		assert_string_equal(buf, "");
		assert_non_null(strstr(err.msg, "core.excludesFile in your Git configuration"));
	}
}

/* lz_gitlib_load holds one initialisation for the process: a later
 * init/shutdown pair is a count, never the whole setup again. In a child:
 * the held one keeps the HOME it saw, and the other tests set their own. */
static void test_gitlib_load__holds_one_initialisation(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lz_err err = { 0, "" };
		if (lz_gitlib_load(&err) != 0 || lz_gitlib_load(&err) != 0)
			_exit(10);
		int up = git_libgit2_init(), down = git_libgit2_shutdown();
		_exit(up == 2 && down == 1 ? 0 : 11);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	/* No host configuration for git or libgit2 (HOME is set per test). */
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	unsetenv("XDG_CONFIG_HOME");
	unsetenv("GIT_DIR");
	unsetenv("GIT_WORK_TREE");
	unsetenv("GIT_INDEX_FILE");
	unsetenv("GIT_COMMON_DIR");
	have_git = system("git --version >/dev/null 2>&1") == 0;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_route__nested_gitignore_negation_and_precedence,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__directory_only_and_anchoring, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_route__double_star, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__escapes_and_trailing_spaces, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_route__info_exclude_and_global_excludes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_route__tracked_never_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__linked_worktree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__nested_repository, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__unpopulated_gitlink_has_no_host_dotgit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__nested_repository_outside_workspace_not_read,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__ignore_case, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__non_utf8_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_build__symlinks_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_build__fifos_and_sockets_are_no_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__pathological_patterns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__pathological_double_star_and_classes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__matching_budgets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__malformed_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__inconsistent_tracked_isolated_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_build__not_a_repository, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guard__git_control_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guard__every_key_git_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guard__keys_git_reads_when_it_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guard__bare_workspaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index_root__the_worktree_each_index_governs, setup, teardown),
		cmocka_unit_test(test_gitlib_load__holds_one_initialisation),
		cmocka_unit_test_setup_teardown(test_route__editor_configuration, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route__repositories_made_inside_stay_inside,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_parity__randomized, setup, teardown),
		cmocka_unit_test_setup_teardown(test_global_excludes__resolution, setup, teardown),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	print_message("parity: %zu paths compared in total\n", parity_total);
	return r;
}
