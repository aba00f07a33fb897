#include "config/cfgsource.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/pathauth.h"
#include "util/cleanup.h"

static bool usable_xdg(const char *v)
{
	return v != NULL && v[0] == '/';
}

static int join(const char *base, const char *suffix, char **ret, struct lz_err *err)
{
	char *s = NULL;
	if (asprintf(&s, "%s%s", strcmp(base, "/") == 0 ? "" : base, suffix) < 0)
		return lz_err_set(err, ENOMEM, "out of memory");
	int r = lz_path_grammar(s, strlen(s), err);
	if (r < 0) {
		lz_err_prefix(err, r, "'%s': ", s);
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

static int require_home(const struct lz_host_env *env, struct lz_err *err)
{
	if (env->home == NULL || env->home[0] == '\0')
		return lz_err_set(err, EINVAL,
				  "HOME is not set; Lazaret needs it to find its configuration (or pass --config FILE)");
	if (lz_path_grammar(env->home, strlen(env->home), err) < 0)
		return lz_err_prefix(err, -EINVAL, "HOME='%s' is not a valid absolute path: ", env->home);
	return 0;
}

int lz_cfgsource_declared(const struct lz_host_env *env, const char *explicit_path, const char *cwd, char **ret,
			  struct lz_err *err)
{
	char *declared = NULL;
	int r;

	if (explicit_path != NULL) {
		if (explicit_path[0] == '\0')
			return lz_err_set(err, EINVAL, "--config needs a path");
		if (explicit_path[0] != '/' && cwd == NULL)
			return lz_err_set(err, EINVAL, "--config '%s' is relative and the current "
						       "directory is unavailable", explicit_path);
		if (explicit_path[0] == '/')
			declared = strdup(explicit_path);
		else if (asprintf(&declared, "%s/%s", cwd, explicit_path) < 0)
			declared = NULL;
		if (declared == NULL)
			return lz_err_set(err, ENOMEM, "out of memory");
	} else if (usable_xdg(env->xdg_config_home)) {
		if ((r = join(env->xdg_config_home, "/lazaret/config.toml", &declared, err)) < 0)
			return lz_err_prefix(err, r, "XDG_CONFIG_HOME: ");
	} else {
		if ((r = require_home(env, err)) < 0 ||
		    (r = join(env->home, "/.config/lazaret/config.toml", &declared, err)) < 0)
			return r;
	}
	*ret = declared;
	return 0;
}

int lz_cfgsource_select(const struct lz_host_env *env, const char *explicit_path, const char *cwd,
			char **ret_path, char **ret_declared, struct lz_err *err)
{
	_cleanup_free_ char *declared = NULL;
	int r = lz_cfgsource_declared(env, explicit_path, cwd, &declared, err);
	if (r < 0)
		return r;

	/* A declared symlink is resolved once to its canonical target; from
	 * here on the path is opened without following any symlink. */
	char *canonical = realpath(declared, NULL);
	if (canonical == NULL)
		return lz_err_set(err, errno, "configuration file '%s': %s%s", declared, strerror(errno),
				  errno == ENOENT ? " (create it or pass --config FILE; see "
						    "docs/configuration.md)"
						  : "");
	r = lz_path_grammar(canonical, strlen(canonical), err);
	if (r < 0) {
		lz_err_prefix(err, r, "configuration file '%s': ", canonical);
		free(canonical);
		return r;
	}
	*ret_path = canonical;
	if (ret_declared != NULL)
		*ret_declared = TAKE_PTR(declared);
	return 0;
}

int lz_cfgsource_storage_root(const struct lz_host_env *env, const char *data_root,
			      char **ret_path, struct lz_err *err)
{
	int r;
	if (data_root != NULL && strcmp(data_root, "/") == 0)
		return lz_err_set(err, EINVAL, "storage.data_root must not be '/'");
	if (data_root != NULL)
		return join(data_root, "", ret_path, err);
	if (usable_xdg(env->xdg_data_home)) {
		if ((r = join(env->xdg_data_home, "/lazaret", ret_path, err)) < 0)
			return lz_err_prefix(err, r, "XDG_DATA_HOME: ");
		return 0;
	}
	if ((r = require_home(env, err)) < 0)
		return r;
	return join(env->home, "/.local/share/lazaret", ret_path, err);
}

int lz_cfgsource_runtime_root(const struct lz_host_env *env, char **ret_path, struct lz_err *err)
{
	const char *v = env->xdg_runtime_dir;
	if (v == NULL || v[0] == '\0')
		return lz_err_set(err, EINVAL,
				  "XDG_RUNTIME_DIR is not set; Lazaret keeps its private runtime state "
				  "there (log in through a session manager, or set it to a private "
				  "0700 directory you own)");
	if (v[0] != '/')
		return lz_err_set(err, EINVAL, "XDG_RUNTIME_DIR='%s' is not an absolute path", v);
	int r = join(v, "/lazaret", ret_path, err);
	if (r < 0)
		return lz_err_prefix(err, r, "XDG_RUNTIME_DIR: ");
	return 0;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Reads exactly size bytes at offset 0; refuses short reads and growth. */
static int read_exact(int fd, char *buf, size_t size, const char *label, struct lz_err *err)
{
	size_t got = 0;
	while (got < size) {
		ssize_t n = pread(fd, buf + got, size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lz_err_set(err, errno, "read '%s': %s", label, strerror(errno));
		if (n == 0)
			return lz_err_set(err, ESTALE, "'%s' shrank while being read", label);
		got += (size_t)n;
	}
	char extra;
	ssize_t n = pread(fd, &extra, 1, (off_t)size);
	if (n != 0)
		return lz_err_set(err, ESTALE, "'%s' grew while being read", label);
	return 0;
}

int lz_cfgfile_read(const char *canonical, struct lz_cfgfile *ret, struct lz_err *err)
{
	struct lz_path path = LZ_PATH_INIT;
	struct stat before, reopened, after;
	int r = lz_path_open(canonical, &path, err);
	if (r < 0)
		return lz_err_prefix(err, r, "configuration file: ");

	_cleanup_close_ int opath = TAKE_FD(path.fd);
	lz_path_release(&path);

	if (fstat(opath, &before) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", canonical, strerror(errno));
	if (!S_ISREG(before.st_mode))
		return lz_err_set(err, EINVAL, "'%s' is not a regular file", canonical);
	if (before.st_uid != 0 && before.st_uid != getuid())
		return lz_err_set(err, EPERM,
				  "'%s' is owned by uid %u; it must be owned by root or by you",
				  canonical, (unsigned)before.st_uid);
	if (before.st_nlink != 1)
		return lz_err_set(err, EPERM,
				  "'%s' has %lu hard links; exactly one hard link is required",
				  canonical, (unsigned long)before.st_nlink);
	if (before.st_mode & (S_IWGRP | S_IWOTH))
		return lz_err_set(err, EPERM,
				  "'%s' has mode %04o: it must not grant group or other write "
				  "(chmod go-w)",
				  canonical, (unsigned)(before.st_mode & 07777));
	if (before.st_size > LZ_CONFIG_MAX_BYTES)
		return lz_err_set(err, EFBIG, "'%s' is larger than %d bytes", canonical,
				  LZ_CONFIG_MAX_BYTES);

	/* Reopen the exact object we validated, never the name. */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", opath);
	_cleanup_close_ int fd = open(proc, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return lz_err_set(err, errno, "reopen '%s': %s", canonical, strerror(errno));
	if (fstat(fd, &reopened) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", canonical, strerror(errno));
	if (!same_stat(&before, &reopened))
		return lz_err_set(err, ESTALE, "'%s' changed while being opened", canonical);

	size_t size = (size_t)before.st_size;
	_cleanup_free_ char *first = malloc(size + 1);
	_cleanup_free_ char *second = malloc(size + 1);
	if (first == NULL || second == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if ((r = read_exact(fd, first, size, canonical, err)) < 0 ||
	    (r = read_exact(fd, second, size, canonical, err)) < 0)
		return r;
	if (fstat(fd, &after) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", canonical, strerror(errno));
	if (!same_stat(&before, &after) || memcmp(first, second, size) != 0)
		return lz_err_set(err, ESTALE, "'%s' changed while being read; not retrying", canonical);
	first[size] = '\0';

	*ret = (struct lz_cfgfile){
		.bytes = TAKE_PTR(first),
		.size = size,
		.dev = before.st_dev,
		.ino = before.st_ino,
		.ctime_sec = before.st_ctim.tv_sec,
		.ctime_nsec = before.st_ctim.tv_nsec,
	};
	return 0;
}

void lz_cfgfile_release(struct lz_cfgfile *f)
{
	if (f) {
		free(f->bytes);
		f->bytes = NULL;
	}
}

void lz_host_env_from_process(struct lz_host_env *env)
{
	*env = (struct lz_host_env){
		.home = getenv("HOME"),
		.xdg_config_home = getenv("XDG_CONFIG_HOME"),
		.xdg_data_home = getenv("XDG_DATA_HOME"),
		.xdg_runtime_dir = getenv("XDG_RUNTIME_DIR"),
	};
}
