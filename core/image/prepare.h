/* Prepared lowers (spec 3.6 "Prepared lower", FR-22, SR-15, OR-7).
 *
 * An OCI image layout is verified (oci.h) and materialised by a short-lived
 * preparation worker inside the verified user namespace (userns.h), which
 * applies the layers (layer.h) beneath a staging tree, so image ownership
 * lands on subordinate host IDs. The durable prepare intent (catalog.h) is
 * written before the staging tree exists and names the worker's pidfs
 * identity before the worker is released. A finished tree is published by
 * one atomic rename and never written again; a failed one is removed and its
 * intent withdrawn, so nothing is published and the catalog is unchanged.
 *
 * Storage Root layout (all directories 0700, owned by the user):
 *   catalog.lock, catalog.sqlite      Storage Catalog
 *   prepared/<artifact-id>/rootfs     published prepared lowers
 *   staging/<operation-id>/rootfs     trees being prepared
 *   quarantine/<artifact-id>          artifacts being reclaimed
 *   images/                           Lazaret-owned OCI layouts (transport)
 *
 * Prepared-artifact ID: SHA-256 over "lazaret-prepared-artifact-v1", the
 * manifest digest and the preparer format version, each length-framed. */
#ifndef LZ_PREPARE_H
#define LZ_PREPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "store/catalog.h"
#include "fs/pathauth.h"
#include "util/err.h"

/* 2: each layer's stream is checked against the image's rootfs.diff_ids and
 * its media type's compression, within the byte budget (earlier artifacts
 * are not used again, lz_prepare_lookup). */
#define LZ_PREPARE_FORMAT_VERSION 2
#define LZ_ARTIFACT_ID_HEX 64

/* What an image may still write on the file system of dir_fd (the
 * Storage Root's): what it has free beyond a twentieth of its size, in
 * bytes and in inodes (UINT64_MAX of either on a file system that counts
 * none). Each entry also costs a block of the bytes: directories, symbolic
 * links and small files take one. Measured before the first layer: an
 * image's content, a decompression bomb's too, fails the preparation
 * rather than fill the developer's file system. */
struct lz_prepare_budget {
	uint64_t bytes, entries;
	uint64_t block; /* what each entry is charged to bytes, at least */
};
int lz_prepare_budget(int dir_fd, struct lz_prepare_budget *ret, struct lz_err *err);
/* -ENOSPC, saying so, when the budget of dir_fd's file system is spent
 * (bytes or entries): a tool writing there (a download, an image build)
 * is stopped at the same reserve (proc/spawn.h lz_spawn_run_watched).
 * ret, when not NULL, gets the budget. */
int lz_prepare_reserve_check(int dir_fd, struct lz_prepare_budget *ret, struct lz_err *err);

struct lz_prepare_progress {
	uint32_t layer;    /* 1-based layer being applied; 0 before the first */
	uint32_t n_layers;
	uint64_t bytes_done; /* compressed layer bytes consumed over all layers */
	uint64_t bytes_total;
	bool waiting_for_gc; /* reported once, before waiting for an image gc */
};

typedef void (*lz_prepare_progress_fn)(void *ctx, const struct lz_prepare_progress *p);

/* The preparation worker (a fork of the caller in the verified user
 * namespace, with a network namespace of its own) applies what a registry
 * or an archive supplied through libarchive, gzip and zstd: before it
 * reads a byte of the image it keeps only the descriptors it works with
 * (the layout, the staging tree, its progress pipe and the broker's report
 * pipe; standard input and output on /dev/null), may grow its data
 * (RLIMIT_DATA: heap and private writable mappings) by at most
 * LZ_PREPARE_WORKER_MEMORY beyond what it inherited, and confines itself
 * (proc/confine.h): no new socket, namespace, mount or key call, and where
 * the kernel has Landlock, reading only beneath the layout and writing only
 * beneath the staging tree, executing nothing. It is killed when it runs
 * longer than LZ_PREPARE_WORKER_TIMEOUT_MS.
 *
 * The memory bound: preparing the e2e test image grew the worker's data by
 * under 1 MiB, an image of 858 MiB in 80,000 files (/usr/share) by under
 * 9 MiB (14 MiB resident at its peak): a layer of a million files of such
 * paths needs some 150 MiB. Only the extreme of a layer's own bounds (its
 * 256 MiB of path bookkeeping spent on millions of short paths, with
 * zstd's 128 MiB window) comes near it, and fails with this bound's
 * message instead of the bookkeeping's. What it stops is a library's
 * memory growing with its input: libarchive keeps a GNU sparse map whole
 * while it reads the header (about 12 bytes per byte of stream), before
 * the entry can be refused. */
#define LZ_PREPARE_WORKER_MEMORY (UINT64_C(1) << 30)
#define LZ_PREPARE_WORKER_TIMEOUT_MS (30u * 60u * 1000u)

struct lz_prepare_request {
	const struct lz_path *storage_root;
	int layout_fd;          /* OCI image layout directory; not closed */
	const char *tag;        /* NULL: the layout's only manifest */
	const char *source_ref; /* the reference as the user gave it */
	lz_prepare_progress_fn progress;
	void *progress_ctx;
	/* For tests; zero in production. The worker's memory bound (bytes;
	 * 0: LZ_PREPARE_WORKER_MEMORY) and time bound (ms; 0:
	 * LZ_PREPARE_WORKER_TIMEOUT_MS), and a check that runs inside the
	 * worker once it is confined, before the first layer: its failure
	 * fails the preparation with its message. */
	uint64_t worker_memory;
	uint32_t worker_timeout_ms;
	int (*worker_check)(void *ctx, struct lz_err *err);
	void *worker_check_ctx;
};

struct lz_prepare_result {
	char artifact_id[LZ_ARTIFACT_ID_HEX + 1];
	char manifest_digest[72];
	char config_digest[72];
	uint64_t size; /* regular-file bytes in the tree */
	uint64_t skipped_devices;
	bool existed; /* already prepared: only the reference was recorded */
};

/* Computes the prepared-artifact ID for a manifest digest. */
int lz_prepare_artifact_id(const char *manifest_digest, char ret[LZ_ARTIFACT_ID_HEX + 1]);

int lz_prepare_image(const struct lz_prepare_request *req, struct lz_prepare_result *ret,
		     struct lz_err *err);

/* Finds the published prepared lower for a profile's image reference (the
 * same text `image prepare` was given): an oci: layout is verified again to
 * compute its artifact ID; other kinds are matched by their recorded source
 * references (every reference `image prepare` was given for an artifact,
 * lz_catalog_artifact_name; the artifact it named last wins). On success ret_id holds the artifact ID and
 * *ret_rootfs the retained rootfs directory (O_PATH). -ENOENT says the
 * image is not prepared and names the command that prepares it. */
int lz_prepare_lookup(const struct lz_path *storage_root, const char *image,
		      char ret_id[LZ_ARTIFACT_ID_HEX + 1], int *ret_rootfs, struct lz_err *err);

enum lz_gc_action {
	LZ_GC_REMOVED,         /* unleased artifact reclaimed */
	LZ_GC_WOULD_REMOVE,    /* --dry-run */
	LZ_GC_KEPT_LEASED,     /* artifact with leases */
	LZ_GC_KEPT_FOREIGN,    /* a tree the catalog does not know */
	LZ_GC_KEPT_PREPARING,  /* prepare in progress (worker alive or unknown) */
	LZ_GC_REMOVED_STAGING, /* abandoned prepare tree of ours, worker gone */
	LZ_GC_WOULD_REMOVE_STAGING,
	LZ_GC_KEPT_POLICY, /* unleased, among the newest the policy keeps */
};

struct lz_gc_item {
	enum lz_gc_action action;
	char where[16]; /* "prepared", "staging", "quarantine" */
	char name[256];
	uint64_t leases;
};

/* Reclaims unleased artifacts and abandoned prepare trees (OR-7), keeping
 * the keep most recently prepared unleased artifacts (0: keep none; the
 * automatic policy, storage.keep_unused_images, passes its value) and the
 * artifact spare (NULL: none; the policy spares the one the ending launch
 * used). *ret is a malloc'd array (free it) describing every decision. */
int lz_prepare_gc(const struct lz_path *storage_root, bool dry_run, size_t keep, const char *spare,
		  struct lz_gc_item **ret, size_t *ret_n, struct lz_err *err);

#endif
