/* A Domain's recorded identity (identity.h). JSON: {"lazaret_domain":1,
 * "profile":..., "workspace":...}; its volumes: {"lazaret_volumes":1,
 * "sources":[...]}. */
#include "store/identity.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config/domain.h"
#include "fs/file.h"
#include "util/cleanup.h"
#include "util/sys.h"

static int parse(const char *text, size_t len, struct lz_domain_identity *ret, struct lz_err *err)
{
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	const char *profile = NULL, *workspace = NULL;
	json_int_t version = 0;
	int r = 0;
	if (doc == NULL || json_unpack(doc, "{s:I, s:s, s:s !}", "lazaret_domain", &version, "profile", &profile,
				       "workspace", &workspace) != 0 ||
	    version != 1 || strlen(profile) >= sizeof(ret->profile) || strlen(workspace) >= sizeof(ret->workspace))
		r = lz_err_set(err, EPROTO, "the Domain's identity file is malformed");
	else {
		snprintf(ret->profile, sizeof(ret->profile), "%s", profile);
		snprintf(ret->workspace, sizeof(ret->workspace), "%s", workspace);
	}
	json_decref(doc);
	return r;
}

int lz_identity_read(int domain_fd, const char *domain_hex, struct lz_domain_identity *ret, struct lz_err *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	struct lz_domain_identity id;
	uint8_t derived[LZ_DOMAIN_ID_LEN];
	char hex[LZ_DOMAIN_ID_HEX_LEN + 1];
	int r = lz_file_read_owned(domain_fd, LZ_IDENTITY_FILE, LZ_IDENTITY_MAX, &text, &len, err);
	if (r < 0 || (r = parse(text, len, &id, err)) < 0)
		return r;
	if (lz_domain_id(id.profile, strlen(id.profile), id.workspace, strlen(id.workspace), derived) < 0)
		return lz_err_set(err, EPROTO, "the Domain's identity file is malformed");
	lz_hex(derived, sizeof(derived), hex);
	if (strcmp(hex, domain_hex) != 0)
		return lz_err_set(err, EPROTO,
				  "the Domain's identity file names another Domain (profile and workspace derive "
				  "%.12s..., not %.12s...)",
				  hex, domain_hex);
	*ret = id;
	return 0;
}

/* Replaces name with text, durable before and after the rename: a crash
 * leaves the old record or the whole new one. */
static int replace_durable(int domain_fd, const char *name, const char *text, struct lz_err *err)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s", name);
	(void)unlinkat(domain_fd, tmp, 0);
	int r = lz_file_create_durable(domain_fd, tmp, text, strlen(text), 0600, LZ_RESOLVE_OWNED, err);
	if (r >= 0 && renameat(domain_fd, tmp, domain_fd, name) < 0)
		r = lz_err_set(err, errno, "record the Domain's %s: %s", name, strerror(errno));
	if (r >= 0)
		r = lz_dir_sync(domain_fd, err);
	if (r < 0)
		(void)unlinkat(domain_fd, tmp, 0);
	return r;
}

int lz_identity_ensure(int domain_fd, const char *profile, const char *workspace, struct lz_err *err)
{
	uint8_t derived[LZ_DOMAIN_ID_LEN];
	char hex[LZ_DOMAIN_ID_HEX_LEN + 1];
	struct lz_domain_identity found;
	struct lz_err read_err;
	if (lz_domain_id(profile, strlen(profile), workspace, strlen(workspace), derived) < 0)
		return lz_err_set(err, EINVAL, "profile or workspace too long");
	lz_hex(derived, sizeof(derived), hex);
	int r = lz_identity_read(domain_fd, hex, &found, &read_err);
	if (r == 0)
		return 0; /* the same Domain ID: the same profile and workspace */
	if (r != -ENOENT)
		return lz_err_set(err, -r, "%s", read_err.msg);
	json_t *doc = json_pack("{s:i, s:s, s:s}", "lazaret_domain", 1, "profile", profile, "workspace", workspace);
	char *text = doc ? json_dumps(doc, JSON_SORT_KEYS) : NULL;
	json_decref(doc);
	if (text == NULL)
		return lz_err_set(err, EINVAL, "cannot record the Domain's identity: the profile name or the "
					       "workspace path is not UTF-8");
	/* Never one cut short, which would refuse every launch and removal
	 * of the Domain. */
	r = replace_durable(domain_fd, LZ_IDENTITY_FILE, text, err);
	free(text);
	return r;
}

/* The record's sources array (borrowed from *doc, which the caller
 * frees): an empty one when there is no record. */
static int volumes_load(int domain_fd, json_t **doc, json_t **sources, struct lz_err *err)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	*doc = NULL;
	int r = lz_file_read_owned(domain_fd, LZ_VOLUMES_FILE, LZ_VOLUMES_MAX_BYTES, &text, &len, err);
	if (r == -ENOENT) {
		*doc = json_pack("{s:i, s:[]}", "lazaret_volumes", 1, "sources");
		if (*doc == NULL)
			return lz_err_set(err, ENOMEM, "out of memory");
		*sources = json_object_get(*doc, "sources");
		return 0;
	}
	if (r < 0)
		return r;
	json_error_t je;
	json_int_t version = 0;
	*doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	bool ok = *doc != NULL &&
		  json_unpack(*doc, "{s:I, s:o !}", "lazaret_volumes", &version, "sources", sources) == 0 &&
		  version == 1 && json_is_array(*sources);
	for (size_t i = 0; ok && i < json_array_size(*sources); i++) {
		const char *v = json_string_value(json_array_get(*sources, i));
		ok = v != NULL && v[0] == '/' && strlen(v) < 4096;
	}
	if (!ok) {
		json_decref(*doc);
		*doc = NULL;
		return lz_err_set(err, EPROTO, "the Domain's volume record is malformed");
	}
	return 0;
}

static bool recorded(json_t *sources, const char *source)
{
	for (size_t i = 0; i < json_array_size(sources); i++)
		if (strcmp(json_string_value(json_array_get(sources, i)), source) == 0)
			return true;
	return false;
}

int lz_identity_record_volumes(int domain_fd, const char *const *sources, size_t n, struct lz_err *err)
{
	json_t *doc, *have;
	int r = volumes_load(domain_fd, &doc, &have, err);
	if (r < 0)
		return r;
	bool added = false;
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (recorded(have, sources[i]))
			continue;
		if (json_array_append_new(have, json_string(sources[i])) < 0)
			r = lz_err_set(err, EINVAL, "cannot record volume source '%s': not UTF-8", sources[i]);
		added = true;
	}
	char *text = r == 0 && added ? json_dumps(doc, JSON_SORT_KEYS) : NULL;
	json_decref(doc);
	if (r < 0 || !added)
		return r;
	if (text == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if (strlen(text) > LZ_VOLUMES_MAX_BYTES)
		r = lz_err_set(err, E2BIG,
			       "the Domain has recorded more volume sources than fit in %d bytes; it cannot record "
			       "more",
			       LZ_VOLUMES_MAX_BYTES);
	else
		r = replace_durable(domain_fd, LZ_VOLUMES_FILE, text, err);
	free(text);
	return r;
}

int lz_identity_volumes_each(int domain_fd, int (*each)(void *ctx, const char *source), void *ctx,
			     struct lz_err *err)
{
	json_t *doc, *sources;
	int r = volumes_load(domain_fd, &doc, &sources, err);
	for (size_t i = 0; r == 0 && i < json_array_size(sources); i++)
		r = each(ctx, json_string_value(json_array_get(sources, i)));
	json_decref(doc);
	return r;
}
