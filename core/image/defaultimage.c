#include "image/defaultimage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/domain.h"
#include "image/ociwrite.h"
#include "image/prepare.h"
#include "proc/spawn.h"
#include "fs/tree.h"
#include "util/cleanup.h"
#include "util/logrelay.h"
#include "util/sys.h"

int lz_default_image_ref(const char *storage_root, char **ret_ref, struct lz_err *err)
{
	char *s = NULL;
	if (asprintf(&s, "oci:%s/images/default:latest", storage_root) < 0)
		return lz_err_set(err, ENOMEM, "out of memory");
	*ret_ref = s;
	return 0;
}

static int random_name(const char *prefix, char *out, size_t size, struct lz_err *err)
{
	uint8_t rnd[8];
	char hex[17];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return lz_err_set(err, EIO, "getrandom failed");
	lz_hex(rnd, sizeof(rnd), hex);
	snprintf(out, size, "%s%s", prefix, hex);
	return 0;
}

/* mmdebstrap's output carries text from the network and from packages'
 * maintainer scripts (a mirror's error reason, anything a script prints):
 * relayed to the developer's terminal line by line, escaped, at most
 * this much. */
#define MMDEBSTRAP_OUTPUT_MAX (4u << 20)
/* Read at each look (every 250 ms) at most, so the reserve check and the
 * timeout are never held up; the pipe holds as much meanwhile. */
#define MMDEBSTRAP_PIPE_BYTES (1 << 20)

struct build_watch {
	const struct lz_path *build;
	int output; /* read end of mmdebstrap's standard output and error */
	struct lz_logrelay relay;
};

/* The image's tar fills the Storage Root no further than the preparer
 * would (mmdebstrap's own tree is under /tmp); what it wrote meanwhile
 * is relayed. */
static int reserve_check(void *ctx, struct lz_err *err)
{
	struct build_watch *w = ctx;
	(void)lz_logrelay_pump(&w->relay, w->output, MMDEBSTRAP_PIPE_BYTES);
	int r = lz_prepare_reserve_check(w->build->fd, NULL, err);
	return r < 0 ? lz_err_prefix(err, r, "stopped: ") : 0;
}

static int run_mmdebstrap(const struct lz_path *tool, const struct lz_path *build, struct lz_err *err)
{
	/* Pathname handoff to a trusted tool, after revalidation (spec 3.2). */
	int r;
	if ((r = lz_path_revalidate(build, err)) < 0)
		return r;
	char out[LZ_PATH_MAX + 16], home[LZ_PATH_MAX + 8];
	snprintf(out, sizeof(out), "%s/rootfs.tar", build->canonical);
	snprintf(home, sizeof(home), "HOME=%s", build->canonical);
	char *const argv[] = { "mmdebstrap", "--mode=unshare", "--variant=minbase",
			       "--format=tar", "--include=" LZ_DEFAULT_IMAGE_PACKAGES,
			       LZ_DEFAULT_IMAGE_SUITE, out, NULL };
	/* No TMPDIR here: mmdebstrap's namespace root (a subordinate ID) could
	 * not enter the 0700 build directory; it uses its own under /tmp. */
	char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", home, "LC_ALL=C.UTF-8", NULL };
	/* By its canonical path, not the checked descriptor: mmdebstrap is a
	 * Perl script, and the kernel would hand perl a /dev/fd name of a
	 * close-on-exec descriptor, closed by the time perl opens it. The
	 * path has no symbolic link, and every directory on it is root's or
	 * yours and writable by no one else (lz_hostprobe_tool_locate), so no
	 * one else can put another file there between the check and the exec. */
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	_cleanup_close_ int out_r = pipefd[0], out_w = pipefd[1];
	if (fcntl(out_r, F_SETFL, O_NONBLOCK) < 0)
		return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	(void)fcntl(out_r, F_SETPIPE_SZ, MMDEBSTRAP_PIPE_BYTES); /* a smaller pipe only slows it */
	struct build_watch w = { .build = build, .output = out_r };
	lz_logrelay_init(&w.relay, STDERR_FILENO, MMDEBSTRAP_OUTPUT_MAX, "mmdebstrap: ", "mmdebstrap");
	struct lz_spawn spec = { .label = "mmdebstrap", .exe_fd = -1, .path = tool->canonical, .argv = argv,
				 .envp = envp, .stdin_fd = -1, .stdout_fd = out_w, .stderr_fd = out_w };
	const struct lz_spawn_watch watch = { 250, reserve_check, &w };
	r = lz_spawn_run_watched(&spec, "mmdebstrap", LZ_DEFAULT_IMAGE_TIMEOUT_MS, &watch, err);
	lz_close_fdp(&out_w);
	while (lz_logrelay_pump(&w.relay, out_r, SIZE_MAX) > 0)
		;
	lz_logrelay_finish(&w.relay);
	return r;
}

int lz_default_image_build(const struct lz_path *storage_root, const struct lz_path *mmdebstrap, char **ret_ref,
			   struct lz_err *err)
{
	struct lz_path images = LZ_PATH_INIT, build = LZ_PATH_INIT, layout = LZ_PATH_INIT;
	char build_name[64], new_name[64], old_name[64];
	bool have_build = false, have_new = false;
	int tar = -EBADF;
	int r;

	if ((r = lz_path_owned_child(storage_root, "images", true, &images, err)) < 0)
		return r;
	if ((r = random_name(".build-", build_name, sizeof(build_name), err)) < 0 ||
	    (r = random_name(".default-", new_name, sizeof(new_name), err)) < 0 ||
	    (r = random_name(".old-", old_name, sizeof(old_name), err)) < 0)
		goto out;
	if ((r = lz_path_owned_child(&images, build_name, true, &build, err)) < 0)
		goto out;
	have_build = true;
	if ((r = run_mmdebstrap(mmdebstrap, &build, err)) < 0)
		goto out;
	if ((r = lz_path_owned_child(&images, new_name, true, &layout, err)) < 0)
		goto out;
	have_new = true;
	tar = lz_openat2(build.fd, "rootfs.tar", O_RDONLY | O_CLOEXEC | O_NOFOLLOW, LZ_RESOLVE_OWNED);
	if (tar < 0) {
		r = lz_err_set(err, errno, "open the built rootfs.tar: %s", strerror(errno));
		goto out;
	}
	const char *const cmd[] = { "/bin/bash", NULL };
	const char *const env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				    "LANG=C.UTF-8", NULL };
	if ((r = lz_ociwrite_single_layer(layout.fd, tar, "latest", cmd, env, err)) < 0)
		goto out;
	/* Swap in the complete layout; an older one is removed afterwards. */
	bool had_old = renameat(images.fd, "default", images.fd, old_name) == 0;
	if (!had_old && errno != ENOENT) {
		r = lz_err_set(err, errno, "replace images/default: %s", strerror(errno));
		goto out;
	}
	if (renameat2(images.fd, new_name, images.fd, "default", RENAME_NOREPLACE) < 0) {
		r = lz_err_set(err, errno, "install images/default: %s", strerror(errno));
		goto out;
	}
	have_new = false;
	if (had_old)
		(void)lz_tree_remove(images.fd, old_name, NULL);
	char label[LZ_PATH_MAX + 1];
	snprintf(label, sizeof(label), "%s", storage_root->canonical);
	r = lz_default_image_ref(label, ret_ref, err);
out:
	lz_close_fdp(&tar);
	if (have_build)
		(void)lz_tree_remove(images.fd, build_name, NULL);
	if (have_new)
		(void)lz_tree_remove(images.fd, new_name, NULL);
	lz_path_release(&layout);
	lz_path_release(&build);
	lz_path_release(&images);
	return r;
}

int lz_default_image_ref_for_env(const struct lz_host_env *env, char **ret_ref,
				 struct lz_err *err)
{
	_cleanup_free_ char *storage = NULL;
	int r = lz_cfgsource_storage_root(env, NULL, &storage, err);
	if (r < 0)
		return r;
	return lz_default_image_ref(storage, ret_ref, err);
}

int lz_default_config_write(const struct lz_host_env *env, const char *explicit_path,
			    const char *cwd, const char *text, char **ret_path,
			    struct lz_err *err)
{
	_cleanup_free_ char *path = NULL, *ref = NULL, *dir = NULL, *body = NULL;
	int r;
	if (text && strlen(text) > LZ_DEFAULT_CONFIG_TEXT_MAX)
		return lz_err_set(err, E2BIG, "configuration text over %d bytes",
				  LZ_DEFAULT_CONFIG_TEXT_MAX);
	if ((r = lz_cfgsource_declared(env, explicit_path, cwd, &path, err)) < 0)
		return r;
	if ((r = lz_path_grammar(path, strlen(path), err)) < 0)
		return lz_err_prefix(err, r, "'%s': ", path);
	/* Computed for the caller's text too: the same refusals (no HOME, no
	 * XDG_DATA_HOME) hold for every form of init. */
	if ((r = lz_default_image_ref_for_env(env, &ref, err)) < 0)
		return r;
	if (text == NULL) {
		if (asprintf(&body,
			     "# Lazaret configuration, v1 (docs/configuration.md).\n"
			     "# Written by `lazaret init`. Build the default Debian 12 image with\n"
			     "# `lazaret image build-default`; then `lazaret default` opens a shell.\n"
			     "version = 1\n\n[profiles.default]\nimage = \"%s\"\n",
			     ref) < 0)
			return lz_err_set(err, ENOMEM, "out of memory");
		text = body;
	}

	/* The directory holding the file: created 0700 where missing. */
	dir = strdup(path);
	if (dir == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	char *slash = strrchr(dir, '/');
	const char *name = slash + 1;
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	name = path + (name - dir);
	struct lz_path parent = LZ_PATH_INIT;
	if (access(dir, F_OK) == 0)
		r = lz_path_open(dir, &parent, err);
	else
		r = lz_path_open_owned_root(dir, &parent, err);
	if (r < 0)
		return lz_err_prefix(err, r, "configuration directory: ");
	int fd = lz_openat2_create(parent.fd, name, O_WRONLY | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600,
				   LZ_RESOLVE_CONFINED);
	int e = errno;
	lz_path_release(&parent);
	if (fd < 0)
		return lz_err_set(err, e, "create '%s': %s%s", path, strerror(e),
				  e == EEXIST ? " (it already exists; Lazaret does not replace a "
						"configuration: edit it, or pass --config FILE "
						"to write another)" : "");
	size_t n = strlen(text);
	errno = 0; /* a short write sets none: reported as EIO */
	bool ok = fchmod(fd, 0600) == 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
	e = errno;
	close(fd);
	if (!ok)
		return lz_err_set(err, e ? e : EIO, "write '%s': %s", path, strerror(e ? e : EIO));
	*ret_path = TAKE_PTR(path);
	return 0;
}
