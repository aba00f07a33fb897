/* A resolved configuration for runtime suites (bundle, rsplan): a fresh
 * mkdtemp directory D holding
 *   cfg/config.toml  the configuration, from a template where "@" stands
 *                    for D
 *   home/, data/ (Storage Root data/lazaret), run/ (Runtime Root
 *   run/lazaret), ws/ (the Agent Workspace)
 * loaded with lz_config_load for profile "dev", plus a generation tree in
 * its runtime Domain directory. Environment references are read from a
 * small stub (cfg_fx_setenv). Header-only: each suite is its own
 * executable. */
#ifndef LZ_CFG_FIXTURE_H
#define LZ_CFG_FIXTURE_H

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lz_test.h"

#include "config/config.h"
#include "runtime/rundir.h"

#define CFG_FX_BASE "version = 1\n[profiles.dev]\nimage = \"docker://debian:bookworm\"\n"

struct cfg_fx {
	char dir[64]; /* canonical D */
	char ws[PATH_MAX];
	lz_config *cfg;
	struct lz_gendir gen;
	struct lz_err err;
};

static struct {
	const char *name, *value;
} cfg_fx_env[8];
static size_t cfg_fx_n_env;

static inline void cfg_fx_setenv(const char *name, const char *value)
{
	if (cfg_fx_n_env < sizeof(cfg_fx_env) / sizeof(cfg_fx_env[0]))
		cfg_fx_env[cfg_fx_n_env++] = (__typeof__(cfg_fx_env[0])){ name, value };
}

static inline const char *cfg_fx_getenv(const char *name)
{
	for (size_t i = 0; i < cfg_fx_n_env; i++)
		if (cfg_fx_env[i].name != NULL && strcmp(cfg_fx_env[i].name, name) == 0)
			return cfg_fx_env[i].value;
	return NULL;
}

/* D/rel into out (PATH_MAX). */
static inline char *cfg_fx_path(const struct cfg_fx *f, const char *rel, char *out)
{
	snprintf(out, PATH_MAX, "%s/%s", f->dir, rel);
	return out;
}

/* Creates D and its directories; NULL on failure. */
static inline struct cfg_fx *cfg_fx_new(void)
{
	struct cfg_fx *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/lz-test-runtime-XXXXXX", p[PATH_MAX];
	if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, f->dir) == NULL) {
		free(f);
		return NULL;
	}
	f->gen = (struct lz_gendir)LZ_GENDIR_INIT;
	cfg_fx_path(f, "ws", f->ws);
	if (mkdir(cfg_fx_path(f, "cfg", p), 0755) < 0 || mkdir(cfg_fx_path(f, "home", p), 0755) < 0 ||
	    mkdir(cfg_fx_path(f, "run", p), 0700) < 0 || mkdir(f->ws, 0755) < 0) {
		lz_test_rmtree(f->dir);
		free(f);
		return NULL;
	}
	cfg_fx_n_env = 0;
	return f;
}

/* Writes the template (with "@" replaced by D) to D/rel, mode 0600. */
static inline int cfg_fx_write(const struct cfg_fx *f, const char *rel, const char *tmpl)
{
	char p[PATH_MAX];
	FILE *out = fopen(cfg_fx_path(f, rel, p), "we");
	if (out == NULL)
		return -errno;
	for (const char *s = tmpl; *s; s++)
		if (*s == '@')
			fputs(f->dir, out);
		else
			fputc(*s, out);
	fclose(out);
	return chmod(p, 0600) < 0 ? -errno : 0;
}

/* Writes the configuration and loads profile "dev"; on failure f->err
 * says why. */
static inline int cfg_fx_load(struct cfg_fx *f, const char *tmpl)
{
	char cfg[PATH_MAX], home[PATH_MAX], data[PATH_MAX], run[PATH_MAX];
	int r = cfg_fx_write(f, "cfg/config.toml", tmpl);
	if (r < 0)
		return r;
	struct lz_config_request req = {
		.config_path = cfg_fx_path(f, "cfg/config.toml", cfg),
		.profile = "dev",
		.workspace = f->ws,
		.cwd = f->dir,
		.env = { .home = cfg_fx_path(f, "home", home), .xdg_data_home = cfg_fx_path(f, "data", data),
			 .xdg_runtime_dir = cfg_fx_path(f, "run", run) },
		.getenv = cfg_fx_getenv,
	};
	f->err = (struct lz_err){ 0, "" };
	return lz_config_load(&req, &f->cfg, &f->err);
}

/* Creates generation n's tree in the runtime Domain directory. */
static inline int cfg_fx_gen(struct cfg_fx *f, uint64_t n)
{
	f->err = (struct lz_err){ 0, "" };
	return lz_gendir_create(lz_config_runtime_domain(f->cfg), n, "init", 4, "nameserver 10.137.54.3\n",
				&f->gen, &f->err);
}

static inline void cfg_fx_free(struct cfg_fx *f)
{
	if (f == NULL)
		return;
	lz_gendir_remove(&f->gen);
	lz_config_free(f->cfg);
	lz_test_rmtree(f->dir);
	free(f);
}

#endif
