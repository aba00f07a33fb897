/* The production classifier: an lz_ignoreclass snapshot behind the
 * router's classification interface (router.h). A snapshot is immutable,
 * so route() needs no lock; the router holds the reference it was given
 * until a publish replaces it, and pathname operations never outlive it
 * (they run under the router's snapshot lock), so no per-operation
 * reference is taken. */
#include "router/router.h"

static int ic_route(void *ctx, const char *path, size_t len, bool is_dir, enum lz_route *ret)
{
	return lz_ignoreclass_route(ctx, path, len, is_dir, ret);
}

static int ic_guard(void *ctx, const char *path, size_t len, bool is_dir, enum lz_guard *ret)
{
	return lz_ignoreclass_guard(ctx, path, len, is_dir, ret);
}

static int ic_index_root(void *ctx, const char *gitdir, size_t len, char *root, size_t cap, size_t *ret_len)
{
	return lz_ignoreclass_index_root(ctx, gitdir, len, root, cap, ret_len);
}

static void ic_release(void *ctx)
{
	lz_ignoreclass_unref(ctx);
}

struct lz_router_classifier lz_router_classifier_ignoreclass(lz_ignoreclass *snap)
{
	return (struct lz_router_classifier){ .route = ic_route,
					      .guard = ic_guard,
					      .index_root = ic_index_root,
					      .release = ic_release,
					      .ctx = snap };
}
