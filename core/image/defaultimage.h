/* The embedded default (issue 3): a Debian 12 base image built with
 * mmdebstrap in unshare mode as the invoking user, stored as an OCI layout
 * at <Storage Root>/images/default, and a first configuration whose
 * profile `default` uses it. mmdebstrap is only the builder; the image is
 * then prepared through the same verified path as any other. */
#ifndef LZ_DEFAULTIMAGE_H
#define LZ_DEFAULTIMAGE_H

#include "config/cfgsource.h"
#include "fs/pathauth.h"
#include "util/err.h"

#define LZ_DEFAULT_IMAGE_SUITE "bookworm"
#define LZ_DEFAULT_IMAGE_PACKAGES "bash,coreutils,git,ca-certificates,curl,procps,less,vim-tiny"
#define LZ_DEFAULT_IMAGE_TIMEOUT_MS (60 * 60 * 1000)

/* Builds the image with mmdebstrap (its checked path: located and checked
 * by the caller, as lz_transport_fetch's skopeo) and installs it as
 * images/default (replacing an older one only after the new one is
 * complete). *ret_ref receives the "oci:<layout>:latest" reference
 * (malloc'd). */
int lz_default_image_build(const struct lz_path *storage_root, const struct lz_path *mmdebstrap, char **ret_ref,
			   struct lz_err *err);

/* The image reference the first configuration uses for a Storage Root. */
int lz_default_image_ref(const char *storage_root, char **ret_ref, struct lz_err *err);

/* The most a caller-supplied first configuration may hold: far below the
 * loader's 1 MiB, since it is a template, not a user's file. */
#define LZ_DEFAULT_CONFIG_TEXT_MAX (64 * 1024)

/* Writes the first configuration file (the XDG config location, or
 * explicit_path); refuses to replace an existing file. text is the file's
 * content (at most LZ_DEFAULT_CONFIG_TEXT_MAX bytes; `lazaret init --agent`
 * renders it in lua/lazaret/config/agents.lua), or NULL for the built-in one
 * with profile `default`. *ret_path receives the path written (malloc'd). */
int lz_default_config_write(const struct lz_host_env *env, const char *explicit_path,
			    const char *cwd, const char *text, char **ret_path,
			    struct lz_err *err);

/* The image reference the first configuration names, for the Storage Root
 * the host environment selects (no configuration file is read). */
int lz_default_image_ref_for_env(const struct lz_host_env *env, char **ret_ref,
				 struct lz_err *err);

#endif
