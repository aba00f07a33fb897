/* lazaret-router-suffix: the Ignored Workspace State router
 * (core/router/router.h) as a stand-alone process with a fixed rule, for
 * tests and benchmarks (the product's is bindings/router_proc.c).
 *
 *   lazaret-router-suffix --host DIR --isolated DIR [options] MOUNTPOINT
 *
 * Routing uses a fixed rule instead of Git's (the production router wraps
 * lz_ignoreclass): a path routes ISOLATED when its last component ends
 * with one of the --isolate-suffix values or any component equals one of
 * the --isolate-dir names; everything else routes HOST. Runs until
 * unmounted or sent SIGINT/SIGTERM/SIGHUP. Mounting needs (namespace)
 * root or fusermount3. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "router/router.h"

#define MAX_RULES 16

struct rules {
	const char *suffix[MAX_RULES];
	size_t nsuffix;
	const char *dir[MAX_RULES];
	size_t ndir;
};

static int rules_route(void *ctx, const char *path, size_t len, bool is_dir, enum lz_route *ret)
{
	(void)is_dir;
	const struct rules *r = ctx;
	size_t start = 0;
	for (size_t k = 0; k <= len; k++) {
		if (k < len && path[k] != '/')
			continue;
		size_t cl = k - start;
		for (size_t d = 0; d < r->ndir; d++)
			if (strlen(r->dir[d]) == cl && memcmp(path + start, r->dir[d], cl) == 0) {
				*ret = LZ_ROUTE_ISOLATED;
				return 0;
			}
		if (k == len)
			for (size_t s = 0; s < r->nsuffix; s++) {
				size_t sl = strlen(r->suffix[s]);
				if (cl >= sl && memcmp(path + k - sl, r->suffix[s], sl) == 0) {
					*ret = LZ_ROUTE_ISOLATED;
					return 0;
				}
			}
		start = k + 1;
	}
	*ret = LZ_ROUTE_HOST;
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: lazaret-router-suffix --host DIR --isolated DIR [--isolate-suffix S]...\n"
	      "         [--isolate-dir NAME]... [--timeout SECONDS] [--threads N]\n"
	      "         [--writeback] [--no-keep-cache] [--allow-other] [--debug] MOUNTPOINT\n",
	      f);
}

int main(int argc, char **argv)
{
	const char *host = NULL, *isolated = NULL, *mountpoint = NULL;
	static struct rules rules;
	struct lz_router_options opt;
	lz_router_options_default(&opt);
	opt.handle_signals = true;
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];
		bool more = k + 1 < argc;
		if (strcmp(a, "--host") == 0 && more)
			host = argv[++k];
		else if (strcmp(a, "--isolated") == 0 && more)
			isolated = argv[++k];
		else if (strcmp(a, "--isolate-suffix") == 0 && more && rules.nsuffix < MAX_RULES)
			rules.suffix[rules.nsuffix++] = argv[++k];
		else if (strcmp(a, "--isolate-dir") == 0 && more && rules.ndir < MAX_RULES)
			rules.dir[rules.ndir++] = argv[++k];
		else if (strcmp(a, "--timeout") == 0 && more)
			opt.entry_timeout = opt.attr_timeout = opt.negative_timeout = atof(argv[++k]);
		else if (strcmp(a, "--threads") == 0 && more)
			opt.max_threads = (unsigned)atoi(argv[++k]);
		else if (strcmp(a, "--writeback") == 0)
			opt.writeback_cache = true;
		else if (strcmp(a, "--no-keep-cache") == 0)
			opt.keep_cache = false;
		else if (strcmp(a, "--allow-other") == 0)
			opt.allow_other = true;
		else if (strcmp(a, "--debug") == 0)
			opt.debug = true;
		else if (strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (a[0] != '-' && mountpoint == NULL)
			mountpoint = a;
		else {
			usage(stderr);
			return 2;
		}
	}
	if (host == NULL || isolated == NULL || mountpoint == NULL) {
		usage(stderr);
		return 2;
	}
	int hfd = open(host, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int ifd = open(isolated, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (hfd < 0 || ifd < 0) {
		fprintf(stderr, "lazaret-router-suffix: open '%s': %s\n", hfd < 0 ? host : isolated,
			strerror(errno));
		return 1;
	}
	struct lz_err err = { 0, "" };
	lz_router *r = NULL;
	struct lz_router_classifier cls = { .route = rules_route, .ctx = &rules };
	if (lz_router_new(hfd, ifd, cls, &opt, &r, &err) < 0 ||
	    lz_router_serve(r, mountpoint, -1, &err) < 0) {
		fprintf(stderr, "lazaret-router-suffix: %s\n", err.msg);
		lz_router_free(r);
		return 1;
	}
	lz_router_free(r);
	close(hfd);
	close(ifd);
	return 0;
}
