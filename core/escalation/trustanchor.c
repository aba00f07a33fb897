/* The Trust Anchor package of one generation (trustanchor.h). */
#include "escalation/trustanchor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "fs/file.h"
#include "fs/pathauth.h"
#include "util/sys.h"

static int seal(const struct lz_esc_record *rec, const struct lz_sigkey *key, uint8_t *out, size_t *ret_len)
{
	return lz_esc_seal(rec, key, out, LZ_TA_SEALED_MAX, ret_len);
}

static int issue_credential(struct lz_trust_anchor *ta, uint32_t role, const uint8_t public_key[32], uint8_t *out,
			    size_t *ret_len)
{
	struct lz_esc_record rec = { .kind = LZ_ESC_CREDENTIAL, .scope = ta->scope };
	rec.credential.role = role;
	memcpy(rec.credential.public_key, public_key, LZ_SIGKEY_PUBLIC_LEN);
	return seal(&rec, ta->issuer, out, ret_len);
}

int lz_trust_anchor_create(const uint8_t domain_id[LZ_ESC_DOMAIN_ID_LEN], uint64_t generation,
			   struct lz_trust_anchor **ret, struct lz_err *err)
{
	struct lz_trust_anchor *ta = calloc(1, sizeof(*ta));
	if (ta == NULL)
		return lz_err_set(err, ENOMEM, "Trust Anchor: out of memory");
	memcpy(ta->scope.domain_id, domain_id, LZ_ESC_DOMAIN_ID_LEN);
	ta->scope.generation = generation;
	int r;
	if ((r = lz_sigkey_generate(&ta->tls_ca)) < 0 || (r = lz_sigkey_generate(&ta->issuer)) < 0 ||
	    (r = lz_sigkey_generate(&ta->coordinator)) < 0 || (r = lz_sigkey_generate(&ta->sandbox)) < 0)
		goto fail;
	lz_sigkey_public(ta->issuer, ta->issuer_public);
	lz_sigkey_public(ta->coordinator, ta->coordinator_public);
	lz_sigkey_public(ta->sandbox, ta->sandbox_public);
	struct lz_esc_record manifest = { .kind = LZ_ESC_TRUST_MANIFEST, .scope = ta->scope };
	lz_sigkey_public(ta->tls_ca, manifest.manifest.tls_ca_public);
	memcpy(manifest.manifest.issuer_public, ta->issuer_public, LZ_SIGKEY_PUBLIC_LEN);
	struct lz_esc_bytes payload;
	struct lz_esc_record opened;
	if ((r = seal(&manifest, ta->issuer, ta->manifest, &ta->manifest_len)) < 0 ||
	    (r = issue_credential(ta, LZ_ESC_ROLE_COORDINATOR, ta->coordinator_public, ta->coordinator_credential,
				  &ta->coordinator_credential_len)) < 0 ||
	    (r = issue_credential(ta, LZ_ESC_ROLE_SANDBOX, ta->sandbox_public, ta->sandbox_credential,
				  &ta->sandbox_credential_len)) < 0)
		goto fail;
	/* Spec 3.3: a credential's ID is the digest of its signed claims. */
	if ((r = lz_esc_open(ta->sandbox_credential, ta->sandbox_credential_len, LZ_ESC_KIND_BIT(LZ_ESC_CREDENTIAL),
			     ta->issuer_public, &opened, &payload)) < 0 ||
	    (r = lz_sha256(payload.p, payload.n, ta->sandbox_credential_id)) < 0)
		goto fail;
	*ret = ta;
	return 0;
fail:
	lz_trust_anchor_free(ta);
	return lz_err_set(err, -r, "Trust Anchor: creating the generation's keys failed (%s)", strerror(-r));
}

int lz_trust_anchor_write_credentials(const struct lz_trust_anchor *ta, int dir_fd, int key_dir_fd,
				      struct lz_err *err)
{
	uint8_t seed[LZ_SIGKEY_SEED_LEN];
	int r;
	if (ta->sandbox == NULL)
		return lz_err_set(err, EINVAL, "the sandbox key was already handed over");
	if ((r = lz_sigkey_seed(ta->sandbox, seed)) < 0)
		return lz_err_set(err, EIO, "Trust Anchor: exporting the sandbox key failed");
	r = lz_file_create(key_dir_fd, LZ_TA_KEY_FILE, seed, sizeof(seed), 0444, LZ_RESOLVE_OWNED, err);
	OPENSSL_cleanse(seed, sizeof(seed));
	if (r < 0 || (r = lz_file_create(dir_fd, LZ_TA_KEY_FILE, "", 0, 0444, LZ_RESOLVE_OWNED, err)) < 0 ||
	    (r = lz_file_create(dir_fd, LZ_TA_MANIFEST_FILE, ta->manifest, ta->manifest_len, 0444, LZ_RESOLVE_OWNED,
				err)) < 0 ||
	    (r = lz_file_create(dir_fd, LZ_TA_COORDINATOR_FILE, ta->coordinator_credential,
				ta->coordinator_credential_len, 0444, LZ_RESOLVE_OWNED, err)) < 0)
		return r;
	return lz_file_create(dir_fd, LZ_TA_SANDBOX_FILE, ta->sandbox_credential, ta->sandbox_credential_len, 0444,
			      LZ_RESOLVE_OWNED, err);
}

void lz_trust_anchor_drop_sandbox_key(struct lz_trust_anchor *ta, int key_dir_fd)
{
	if (key_dir_fd >= 0)
		(void)unlinkat(key_dir_fd, LZ_TA_KEY_FILE, 0);
	lz_sigkey_free(ta->sandbox);
	ta->sandbox = NULL;
}

int lz_trust_anchor_capability(const struct lz_trust_anchor *ta, const uint8_t session_id[LZ_ESC_ID_LEN],
			       uint8_t *out, size_t *ret_len)
{
	struct lz_esc_record rec = { .kind = LZ_ESC_SESSION_CAPABILITY, .scope = ta->scope };
	memcpy(rec.capability.session_id, session_id, LZ_ESC_ID_LEN);
	memcpy(rec.capability.sandbox_credential_id, ta->sandbox_credential_id, LZ_ESC_CREDENTIAL_ID_LEN);
	return lz_esc_seal(&rec, ta->coordinator, out, LZ_ESC_CAPABILITY_MAX, ret_len);
}

int lz_trust_anchor_check_capability(const struct lz_trust_anchor *ta, const uint8_t *sealed, size_t len,
				     uint8_t session_id[LZ_ESC_ID_LEN])
{
	struct lz_esc_record rec;
	int r = lz_esc_open(sealed, len, LZ_ESC_KIND_BIT(LZ_ESC_SESSION_CAPABILITY), ta->coordinator_public, &rec,
			    NULL);
	if (r < 0)
		return r;
	if (memcmp(&rec.scope.domain_id, ta->scope.domain_id, LZ_ESC_DOMAIN_ID_LEN) != 0 ||
	    rec.scope.generation != ta->scope.generation ||
	    memcmp(rec.capability.sandbox_credential_id, ta->sandbox_credential_id, LZ_ESC_CREDENTIAL_ID_LEN) != 0)
		return -ESTALE;
	memcpy(session_id, rec.capability.session_id, LZ_ESC_ID_LEN);
	return 0;
}

void lz_trust_anchor_free(struct lz_trust_anchor *ta)
{
	if (ta == NULL)
		return;
	lz_sigkey_free(ta->tls_ca);
	lz_sigkey_free(ta->issuer);
	lz_sigkey_free(ta->coordinator);
	lz_sigkey_free(ta->sandbox);
	OPENSSL_cleanse(ta, sizeof(*ta));
	free(ta);
}
