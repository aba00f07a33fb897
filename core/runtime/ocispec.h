/* The OCI runtime documents the Runtime Supervisor hands to runsc (issue 4):
 * the bundle's config.json for the attached `runsc run`, and the process
 * JSON for `runsc exec --process`.
 *
 * What the documents always say, whatever the caller passes (SR-1, SR-5,
 * SR-12, spec 3.1 and 3.7):
 * - private pid, ipc, uts and mount namespaces; the network namespace is
 *   joined by the caller's netns_path, the only namespace path present;
 * - no user namespace and no uidMappings/gidMappings: the Runtime
 *   Supervisor's verified user namespace is the only ID mapping;
 * - process user 0/0, noNewPrivileges, and the Docker default capability
 *   set without CAP_NET_ADMIN and CAP_NET_RAW (inheritable and ambient
 *   empty);
 * - no hooks (they would run on the host), no annotations, no seccomp
 *   (gVisor is the boundary).
 * Input is validated before anything is built: a refusal is -EINVAL with
 * err naming the field. Output is deterministic (sorted keys) and owned by
 * the caller (free()). */
#ifndef LZ_OCISPEC_H
#define LZ_OCISPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define LZ_OCISPEC_MAX_MOUNTS 256
#define LZ_OCISPEC_MAX_ARGS 4096   /* argv entries */
#define LZ_OCISPEC_MAX_ENV 4096    /* env entries */
#define LZ_OCISPEC_MAX_STRING 131072 /* one argument or env entry (MAX_ARG_STRLEN) */
#define LZ_OCISPEC_MAX_PATH 4095   /* any path, without its NUL */

struct lz_oci_mount {
	const char *destination; /* canonical absolute path in the guest */
	const char *type;        /* "bind" or "tmpfs" */
	const char *source;      /* canonical absolute host path for bind; NULL for tmpfs */
	bool read_only;          /* bind only: a read-only tmpfs is refused */
};

struct lz_oci_process {
	char *const *argv; /* NULL-terminated, at least one non-empty entry */
	char *const *env;  /* NULL-terminated "NAME=value" entries; NULL for none */
	const char *cwd;   /* canonical absolute path; NULL for "/" */
	bool terminal;
};

struct lz_ocispec {
	const char *root_path;  /* canonical absolute host path, not "/" */
	const char *hostname;   /* RFC 1123 label characters, at most 64; NULL to omit */
	const char *netns_path; /* required: the verified enforcement namespace */
	const struct lz_oci_process *process;
	const struct lz_oci_mount *mounts; /* after the default mounts, in order */
	size_t n_mounts;                   /* at most LZ_OCISPEC_MAX_MOUNTS */
};

/* Builds config.json for `runsc run`. Caller mounts may not shadow the
 * default mounts (/proc, /sys and beneath them; /dev, /dev/pts, /dev/shm),
 * "/" or each other. */
int lz_ocispec_config_json(const struct lz_ocispec *spec, char **ret_json, struct lz_err *err);

/* Whether path is a default mount's destination, or lies above or beneath
 * one (an absolute path without "." or ".." components). */
bool lz_ocispec_meets_default_mount(const char *path);

/* Builds the process JSON for `runsc exec --process`. */
int lz_ocispec_process_json(const struct lz_oci_process *p, char **ret_json, struct lz_err *err);

#endif
