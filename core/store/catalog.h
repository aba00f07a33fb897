/* Storage Catalog (spec 3.6 "Prepared lower", "Durable generation document
 * refinement"; OR-7; C-REFINEMENT: sqlite3 replaces redb).
 *
 * One sqlite3 database, `catalog.sqlite`, directly beneath the Storage Root.
 * It records prepared artifacts, preparation operations (durable prepare
 * intent) and cross-Domain generation leases `(artifact ID, Domain ID,
 * generation)`. It is not a daemon: every lz_catalog_* call is one section
 *
 *   flock(LOCK_EX) on `catalog.lock` -> open -> BEGIN IMMEDIATE ->
 *   store identity check -> the operation -> COMMIT -> close -> unlock
 *
 * and no process keeps the catalog open between calls. The host-wide lock
 * serializes concurrent Domain coordinators (spec: "The lock covers lease
 * changes, prepare publication, and transition to reclamation").
 *
 * Invariants kept here, inside one transaction each:
 *  - Store identity (`meta`: store 'lazaret-storage-catalog-v1', version 2)
 *    is accepted before any other row is read, and the schema must be
 *    exactly its version's. A v1 catalog gains v2's table in place (in the
 *    same transaction, then reads as v2). A missing identity in a non-empty
 *    database, another store name, or a newer or malformed version refuses
 *    with -EPROTO and leaves the file untouched. Only an empty database (no
 *    schema object) gets the schema, in the same transaction as the
 *    identity rows.
 *  - A lease names a published artifact; a quarantined artifact takes no
 *    new lease. Quarantine and deletion are refused while any lease exists,
 *    and deletion needs quarantine first, so reclamation can never race a
 *    lease (OR-7: reclaim waits until no lease remains).
 *  - Publication inserts the artifact and marks its own preparing operation
 *    published atomically; a prepare intent is removable only once it is
 *    published or abandoned (OR-7: in-progress prepare trees stay).
 *
 * What the caller must do (the catalog cannot see the Domain Store or the
 * mount table): the order of spec 3.6.
 *  - Lease acquisition: commit prepared-lower intent in the Domain Store
 *    BEFORE lz_catalog_lease_acquire, and commit "lease held" after it.
 *  - Lease release: only after the exact State Anchor mount was proven
 *    absent and prepared-lower release intent committed in the Domain Store.
 *    lz_catalog_lease_release takes a recheck callback run under the
 *    catalog lock, inside the transaction, before the exact lease is
 *    removed: that is where the spec's "under the Storage Catalog lock,
 *    recheck the matching Domain release intent and absence of the exact
 *    mount" belongs. A Runtime Supervisor never calls this module.
 *  - Prepare: lz_catalog_prepare_intent_begin BEFORE the staging tree
 *    exists; physical deletion of a staging tree only for an abandoned
 *    intent; lz_catalog_artifact_delete only after the quarantined tree is
 *    gone.
 *
 * Threat: a planted symlink, hard link, foreign-owned or group/world
 * accessible lock or database file redirecting or exposing catalog writes;
 * a foreign or future database being reinterpreted; concurrent coordinators
 * interleaving lease and reclaim decisions. Both files are opened with
 * openat2 beneath the caller's validated Storage Root descriptor
 * (RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV) and must be
 * regular, owned by the invoking user, mode 0600, one link. sqlite reaches
 * the database as "/proc/self/fd/<root_fd>/catalog.sqlite" through a VFS
 * that does not rewrite that name (the stock unix VFS would readlink it back
 * into a pathname and re-resolve it), so the retained descriptor, not a
 * re-resolved name, decides the directory.
 *
 * Conventions: 0 (or a count) on success, -errno on failure with a message
 * in err; ret_ parameters untouched on failure.
 *   -EINVAL   malformed argument (IDs are exactly 64 lowercase hex digits;
 *             strings 1..LZ_CATALOG_STR_MAX bytes; staging names one
 *             component of at most 255 bytes)
 *   -EPROTO   not a v1 or v2 Storage Catalog, or a row it cannot hold
 *   -EPERM, -ELOOP, -ENOTDIR, -EISDIR, -EXDEV  unsafe root, lock, database
 *             or journal file
 *   -ENOENT   no such artifact, operation or exact lease
 *   -EEXIST   duplicate artifact, operation, staging name or lease
 *   -EBUSY    leases exist, or the operation is still preparing
 *   -ESTALE   the record is in a state (or names an artifact) that does not
 *             permit the call
 *   -EDEADLK  called from inside a catalog section (a recheck callback)
 *   -EOVERFLOW a list exceeds LZ_CATALOG_LIST_MAX rows
 *
 * Threads: callable from any thread; sections in one process serialize on
 * the same lock file like sections of different processes (flock is per
 * open file description). The lock is taken blocking. */
#ifndef LZ_CATALOG_H
#define LZ_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_CATALOG_STORE_NAME "lazaret-storage-catalog-v1"
#define LZ_CATALOG_STORE_VERSION 2 /* 2: artifact_refs (a v1 catalog is upgraded in place) */

#define LZ_CATALOG_ID_HEX_LEN 64
#define LZ_CATALOG_STR_MAX 4096
#define LZ_CATALOG_NAME_MAX 255
#define LZ_CATALOG_BOOT_ID_LEN 16
#define LZ_CATALOG_LIST_MAX 100000

/* Names beneath the Storage Root. */
#define LZ_CATALOG_LOCK_NAME "catalog.lock"
#define LZ_CATALOG_DB_NAME "catalog.sqlite"

enum lz_catalog_artifact_state {
	LZ_CATALOG_ARTIFACT_PUBLISHED = 1,   /* leasable */
	LZ_CATALOG_ARTIFACT_QUARANTINED = 2, /* no leases; awaiting physical deletion */
};

enum lz_catalog_prepare_state {
	LZ_CATALOG_PREPARE_PREPARING = 1, /* staging tree may exist; never deleted */
	LZ_CATALOG_PREPARE_PUBLISHED = 2,
	LZ_CATALOG_PREPARE_ABANDONED = 3, /* staging tree reclaimable */
};

/* What publication records about an artifact (input). */
struct lz_catalog_artifact_spec {
	const char *id;              /* prepared-artifact ID, 64 hex */
	const char *source_ref;      /* source image reference */
	const char *manifest_digest; /* e.g. "sha256:<hex>" */
	const char *config_digest;
	uint64_t size; /* bytes */
};

/* A catalog row (output). Strings are owned: lz_catalog_artifact_clear. */
struct lz_catalog_artifact {
	char id[LZ_CATALOG_ID_HEX_LEN + 1];
	char *source_ref;
	char *manifest_digest;
	char *config_digest;
	uint64_t size;
	enum lz_catalog_artifact_state state;
	int64_t created;      /* CLOCK_REALTIME seconds at publication */
	uint64_t lease_count; /* leases at the time of the call */
};

/* A reference an artifact was prepared under besides its own source_ref
 * (output of lz_catalog_artifact_named). */
struct lz_catalog_ref {
	char artifact_id[LZ_CATALOG_ID_HEX_LEN + 1];
	int64_t recorded; /* CLOCK_REALTIME seconds it was last given */
};

/* Exact preparation-worker identity (pidfs, like systemd's PidRef). */
struct lz_catalog_worker {
	uint8_t boot_id[LZ_CATALOG_BOOT_ID_LEN];
	uint64_t pidfs_dev;
	uint64_t pidfs_ino;
	uint32_t pid;        /* host PID */
	uint64_t start_time; /* /proc/<pid>/stat field 22, clock ticks */
};

struct lz_catalog_prepare_op {
	char id[LZ_CATALOG_ID_HEX_LEN + 1];
	char artifact_id[LZ_CATALOG_ID_HEX_LEN + 1];
	char staging_name[LZ_CATALOG_NAME_MAX + 1];
	enum lz_catalog_prepare_state state;
	int64_t created;
	bool has_worker; /* worker is meaningful only when set */
	struct lz_catalog_worker worker;
};

struct lz_catalog_lease {
	char artifact_id[LZ_CATALOG_ID_HEX_LEN + 1];
	char domain_id[LZ_CATALOG_ID_HEX_LEN + 1];
	uint64_t generation;
};

/* Runs under the catalog lock inside the release transaction; returns 0 to
 * let the release proceed or -errno (message in err) to refuse it. It must
 * not call lz_catalog_* (-EDEADLK). */
typedef int (*lz_catalog_recheck_fn)(void *ctx, struct lz_err *err);

/* root_fd: the validated Storage Root (O_PATH|O_DIRECTORY is enough): a
 * directory owned by the invoking user with mode 0700. Never taken over. */

/* Creates the catalog when absent (schema and identity) and verifies it. */
int lz_catalog_check(int root_fd, struct lz_err *err);

/* Durable prepare intent, before the staging directory staging_name exists.
 * op_id is minted by the caller (64 hex). A duplicate op_id or staging name,
 * or an artifact already in the catalog, refuses with -EEXIST; another
 * operation still preparing the same artifact with -EBUSY. */
int lz_catalog_prepare_intent_begin(int root_fd, const char *op_id, const char *artifact_id,
				    const char *staging_name, struct lz_err *err);

/* Records the worker of a preparing operation once; setting the same
 * identity again is a no-op, a different one refuses with -EEXIST. */
int lz_catalog_prepare_intent_set_worker(int root_fd, const char *op_id,
					 const struct lz_catalog_worker *worker, struct lz_err *err);

/* preparing -> abandoned (idempotent for abandoned; published -> -ESTALE). */
int lz_catalog_prepare_intent_abandon(int root_fd, const char *op_id, struct lz_err *err);

/* Forgets a published or abandoned operation (its staging tree already
 * gone); a preparing one refuses with -EBUSY. */
int lz_catalog_prepare_intent_remove(int root_fd, const char *op_id, struct lz_err *err);

/* All operations ordered by ID; *ret_ops is NULL when *ret_n is 0. Free
 * with free(). */
int lz_catalog_prepare_list(int root_fd, struct lz_catalog_prepare_op **ret_ops, size_t *ret_n,
			    struct lz_err *err);

/* Inserts the artifact as published and marks operation op_id (preparing,
 * same artifact ID) published, in one transaction. */
int lz_catalog_artifact_publish(int root_fd, const char *op_id,
				const struct lz_catalog_artifact_spec *spec, struct lz_err *err);

/* On success the caller owns *ret (lz_catalog_artifact_clear). */
int lz_catalog_artifact_get(int root_fd, const char *artifact_id, struct lz_catalog_artifact *ret,
			    struct lz_err *err);

/* All artifacts ordered by ID with their lease counts; free with
 * lz_catalog_artifact_list_free. */
int lz_catalog_artifact_list(int root_fd, struct lz_catalog_artifact **ret_v, size_t *ret_n,
			     struct lz_err *err);

/* Records that source_ref (as `image prepare` was given it) names the
 * published artifact: preparing an image already prepared under another
 * reference (docker://debian:12 then docker://debian:bookworm). Given
 * again, its time is renewed. -ENOENT unknown artifact, -ESTALE
 * quarantined. The rows go with the artifact's (lz_catalog_artifact_delete). */
int lz_catalog_artifact_name(int root_fd, const char *artifact_id, const char *source_ref, struct lz_err *err);

/* The artifacts source_ref was recorded for by lz_catalog_artifact_name
 * (not those whose own source_ref it is), ordered by ID. Free with free(). */
int lz_catalog_artifact_named(int root_fd, const char *source_ref, struct lz_catalog_ref **ret_v, size_t *ret_n,
			      struct lz_err *err);

/* published -> quarantined; refused with -EBUSY while any lease exists.
 * Idempotent for a quarantined artifact. */
int lz_catalog_artifact_mark_quarantined(int root_fd, const char *artifact_id, struct lz_err *err);

/* Removes a quarantined artifact's row and its references; -EBUSY while
 * any lease exists, -ESTALE when still published. */
int lz_catalog_artifact_delete(int root_fd, const char *artifact_id, struct lz_err *err);

/* Inserts the exact lease. Unknown artifact -ENOENT, not published
 * -ESTALE, the same triple already held -EEXIST. */
int lz_catalog_lease_acquire(int root_fd, const char *artifact_id, const char *domain_id,
			     uint64_t generation, struct lz_err *err);

/* Removes exactly this triple (absent: -ENOENT). recheck, when non-NULL, is
 * called with ctx under the lock after the lease was found and before it is
 * removed; a failure keeps the lease and is returned. */
int lz_catalog_lease_release(int root_fd, const char *artifact_id, const char *domain_id,
			     uint64_t generation, lz_catalog_recheck_fn recheck, void *ctx,
			     struct lz_err *err);

/* Leases held on a known artifact (unknown: -ENOENT). */
int lz_catalog_lease_count(int root_fd, const char *artifact_id, uint64_t *ret_count,
			   struct lz_err *err);

/* Leases ordered by artifact, Domain, generation (unsigned order); all of
 * them when artifact_id is NULL. Free with free(). */
int lz_catalog_lease_list(int root_fd, const char *artifact_id, struct lz_catalog_lease **ret_v,
			  size_t *ret_n, struct lz_err *err);

/* How many leases name domain_id, and the generation of the last one
 * listed (0 when none). */
int lz_catalog_domain_leases(int root_fd, const char *domain_id, size_t *ret_n, uint64_t *ret_generation,
			     struct lz_err *err);

/* Frees the strings of *a and resets them to NULL; accepts NULL. */
void lz_catalog_artifact_clear(struct lz_catalog_artifact *a);

/* Clears n artifacts and frees the array; accepts NULL. */
void lz_catalog_artifact_list_free(struct lz_catalog_artifact *v, size_t n);

#endif
