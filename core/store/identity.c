/* A Domain's recorded identity (identity.h). JSON: {"lazaret_domain":1,
 * "profile":..., "workspace":...}. */
#include "store/identity.h"

#include <errno.h>
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
	(void)unlinkat(domain_fd, ".identity", 0);
	/* Durable before and after its rename: a crash leaves no identity
	 * or the whole one, never one cut short, which would refuse every
	 * launch and removal of the Domain. */
	r = lz_file_create_durable(domain_fd, ".identity", text, strlen(text), 0600, LZ_RESOLVE_OWNED, err);
	free(text);
	if (r >= 0 && renameat(domain_fd, ".identity", domain_fd, LZ_IDENTITY_FILE) < 0)
		r = lz_err_set(err, errno, "record the Domain's identity: %s", strerror(errno));
	if (r >= 0)
		r = lz_dir_sync(domain_fd, err);
	if (r < 0)
		(void)unlinkat(domain_fd, ".identity", 0);
	return r;
}
