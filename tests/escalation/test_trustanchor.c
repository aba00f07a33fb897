/* One generation's Trust Anchor package (core/escalation/trustanchor.h;
 * spec 3.3 "Protocol cryptography refinement"): the sealed Trust Manifest
 * and the two credentials open under the issuer and say what the struct
 * holds; the sandbox credential's ID is the digest of its payload; the
 * credential files are written exclusively, 0444, with the key seed apart
 * and an empty placeholder in its place; dropping the sandbox key; and
 * Session Request Capabilities refused for every other signer, scope and
 * credential.
 *
 * Credential directories are mkdtemp directories under /tmp, opened O_PATH. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "crypto/sigkey.h"
#include "escalation/record.h"
#include "escalation/trustanchor.h"

#define GENERATION 300u

static const uint8_t DOMAIN[LZ_ESC_DOMAIN_ID_LEN] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
};

static const uint8_t SESSION[LZ_ESC_ID_LEN] = {
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
};

struct fx {
	struct lz_trust_anchor *ta;
	char cred_dir[64], key_dir[64];
	int cred, key; /* O_PATH */
};

static int make_dir(char path[64], int *ret_fd)
{
	char tmpl[] = "/tmp/lz-test-trustanchor-XXXXXX";
	if (mkdtemp(tmpl) == NULL || realpath(tmpl, path) == NULL)
		return -1;
	*ret_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return *ret_fd < 0 ? -1 : 0;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct lz_err err = { 0, "" };
	if (f == NULL || make_dir(f->cred_dir, &f->cred) < 0 || make_dir(f->key_dir, &f->key) < 0)
		return -1;
	if (lz_trust_anchor_create(DOMAIN, GENERATION, &f->ta, &err) < 0) {
		fprintf(stderr, "lz_trust_anchor_create: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_trust_anchor_free(f->ta);
	close(f->cred);
	close(f->key);
	lz_test_rmtree(f->cred_dir);
	lz_test_rmtree(f->key_dir);
	free(f);
	return 0;
}

/* Reads dfd/name whole into buf[0..size), requiring mode 0444 and a
 * regular file; the byte count. */
static size_t read_0444(int dfd, const char *name, void *buf, size_t size)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fail_msg("stat %s: %s", name, strerror(errno));
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0444);
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	size_t n = 0;
	ssize_t r;
	while (n < size && (r = read(fd, (uint8_t *)buf + n, size - n)) > 0)
		n += (size_t)r;
	close(fd);
	return n;
}

static bool exists(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void assert_scope(const struct lz_esc_scope *s)
{
	assert_memory_equal(s->domain_id, DOMAIN, LZ_ESC_DOMAIN_ID_LEN);
	assert_int_equal(s->generation, GENERATION);
}

/* A capability of session SESSION with ta's fields, scope and credential
 * ID as given, sealed by key. */
static size_t forge_capability(const struct lz_esc_scope *scope, const uint8_t cred_id[LZ_ESC_CREDENTIAL_ID_LEN],
			       const struct lz_sigkey *key, uint8_t out[LZ_ESC_CAPABILITY_MAX])
{
	struct lz_esc_record rec = { .kind = LZ_ESC_SESSION_CAPABILITY, .scope = *scope };
	memcpy(rec.capability.session_id, SESSION, LZ_ESC_ID_LEN);
	memcpy(rec.capability.sandbox_credential_id, cred_id, LZ_ESC_CREDENTIAL_ID_LEN);
	size_t len = 0;
	assert_int_equal(lz_esc_seal(&rec, key, out, LZ_ESC_CAPABILITY_MAX, &len), 0);
	return len;
}

/* ---- lz_trust_anchor_create ---------------------------------------------- */

static void test_lz_trust_anchor_create__manifest_opens_under_issuer(void **state)
{
	struct fx *f = *state;
	const struct lz_trust_anchor *ta = f->ta;
	assert_scope(&ta->scope);
	assert_true(ta->manifest_len > 0 && ta->manifest_len <= LZ_TA_SEALED_MAX);
	struct lz_esc_record rec;
	struct lz_esc_bytes payload = { NULL, 0 };
	assert_int_equal(lz_esc_open(ta->manifest, ta->manifest_len, LZ_ESC_KIND_BIT(LZ_ESC_TRUST_MANIFEST),
				     ta->issuer_public, &rec, &payload),
			 0);
	assert_int_equal(rec.kind, LZ_ESC_TRUST_MANIFEST);
	assert_scope(&rec.scope);
	assert_memory_equal(rec.manifest.issuer_public, ta->issuer_public, LZ_SIGKEY_PUBLIC_LEN);
	uint8_t tls_ca[LZ_SIGKEY_PUBLIC_LEN];
	lz_sigkey_public(ta->tls_ca, tls_ca);
	assert_memory_equal(rec.manifest.tls_ca_public, tls_ca, LZ_SIGKEY_PUBLIC_LEN);
	assert_memory_not_equal(tls_ca, ta->issuer_public, LZ_SIGKEY_PUBLIC_LEN);
	/* Self-describing: the framing names the kind before anything is
	 * verified. */
	uint32_t kind = 99;
	struct lz_esc_bytes framed;
	assert_int_equal(lz_esc_frame(ta->manifest, ta->manifest_len, &kind, &framed), 0);
	assert_int_equal(kind, LZ_ESC_TRUST_MANIFEST);
	assert_int_equal(framed.n, payload.n);
	/* Under any other key it does not open. */
	assert_int_equal(lz_esc_open(ta->manifest, ta->manifest_len, LZ_ESC_KIND_BIT(LZ_ESC_TRUST_MANIFEST),
				     ta->coordinator_public, &rec, NULL),
			 -EPERM);
}

static void test_lz_trust_anchor_create__coordinator_credential(void **state)
{
	struct fx *f = *state;
	const struct lz_trust_anchor *ta = f->ta;
	assert_true(ta->coordinator_credential_len > 0 && ta->coordinator_credential_len <= LZ_TA_SEALED_MAX);
	struct lz_esc_record rec;
	assert_int_equal(lz_esc_open(ta->coordinator_credential, ta->coordinator_credential_len,
				     LZ_ESC_KIND_BIT(LZ_ESC_CREDENTIAL), ta->issuer_public, &rec, NULL),
			 0);
	assert_int_equal(rec.kind, LZ_ESC_CREDENTIAL);
	assert_scope(&rec.scope);
	assert_int_equal(rec.credential.role, LZ_ESC_ROLE_COORDINATOR);
	assert_memory_equal(rec.credential.public_key, ta->coordinator_public, LZ_SIGKEY_PUBLIC_LEN);
	uint8_t pub[LZ_SIGKEY_PUBLIC_LEN];
	lz_sigkey_public(ta->coordinator, pub);
	assert_memory_equal(pub, ta->coordinator_public, LZ_SIGKEY_PUBLIC_LEN);
	/* Not self-signed. */
	assert_int_equal(lz_esc_open(ta->coordinator_credential, ta->coordinator_credential_len,
				     LZ_ESC_KIND_BIT(LZ_ESC_CREDENTIAL), ta->coordinator_public, &rec, NULL),
			 -EPERM);
}

static void test_lz_trust_anchor_create__sandbox_credential_and_its_id(void **state)
{
	struct fx *f = *state;
	const struct lz_trust_anchor *ta = f->ta;
	struct lz_esc_record rec;
	struct lz_esc_bytes payload = { NULL, 0 };
	assert_int_equal(lz_esc_open(ta->sandbox_credential, ta->sandbox_credential_len,
				     LZ_ESC_KIND_BIT(LZ_ESC_CREDENTIAL), ta->issuer_public, &rec, &payload),
			 0);
	assert_scope(&rec.scope);
	assert_int_equal(rec.credential.role, LZ_ESC_ROLE_SANDBOX);
	assert_memory_equal(rec.credential.public_key, ta->sandbox_public, LZ_SIGKEY_PUBLIC_LEN);
	uint8_t pub[LZ_SIGKEY_PUBLIC_LEN];
	lz_sigkey_public(ta->sandbox, pub);
	assert_memory_equal(pub, ta->sandbox_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_non_null(payload.p);
	assert_true(payload.n > 0);
	uint8_t id[32];
	assert_int_equal(lz_sha256(payload.p, payload.n, id), 0);
	assert_memory_equal(id, ta->sandbox_credential_id, LZ_ESC_CREDENTIAL_ID_LEN);
	/* The digest of the payload, not of the whole envelope. */
	assert_int_equal(lz_sha256(ta->sandbox_credential, ta->sandbox_credential_len, id), 0);
	assert_memory_not_equal(id, ta->sandbox_credential_id, LZ_ESC_CREDENTIAL_ID_LEN);
	/* Three distinct roles, three distinct keys. */
	assert_memory_not_equal(ta->issuer_public, ta->coordinator_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_memory_not_equal(ta->issuer_public, ta->sandbox_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_memory_not_equal(ta->coordinator_public, ta->sandbox_public, LZ_SIGKEY_PUBLIC_LEN);
}

static void test_lz_trust_anchor_create__fresh_keys_not_derived_from_inputs(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_trust_anchor *other = NULL;
	assert_int_equal(lz_trust_anchor_create(DOMAIN, GENERATION, &other, &err), 0);
	assert_non_null(other);
	assert_memory_equal(&other->scope, &f->ta->scope, sizeof(other->scope));
	assert_memory_not_equal(other->issuer_public, f->ta->issuer_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_memory_not_equal(other->coordinator_public, f->ta->coordinator_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_memory_not_equal(other->sandbox_public, f->ta->sandbox_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_memory_not_equal(other->sandbox_credential_id, f->ta->sandbox_credential_id,
				LZ_ESC_CREDENTIAL_ID_LEN);
	uint8_t a[LZ_SIGKEY_PUBLIC_LEN], b[LZ_SIGKEY_PUBLIC_LEN];
	lz_sigkey_public(other->tls_ca, a);
	lz_sigkey_public(f->ta->tls_ca, b);
	assert_memory_not_equal(a, b, LZ_SIGKEY_PUBLIC_LEN);
	lz_trust_anchor_free(other);
}

static void test_lz_trust_anchor_free__accepts_null(void **state)
{
	(void)state;
	lz_trust_anchor_free(NULL);
}

/* ---- lz_trust_anchor_write_credentials, drop_sandbox_key ----------------- */

static void test_lz_trust_anchor_write_credentials__files_modes_and_key(void **state)
{
	struct fx *f = *state;
	const struct lz_trust_anchor *ta = f->ta;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_trust_anchor_write_credentials(ta, f->cred, f->key, &err), 0);

	uint8_t got[LZ_TA_SEALED_MAX + 1];
	assert_int_equal(read_0444(f->cred, LZ_TA_MANIFEST_FILE, got, sizeof(got)), ta->manifest_len);
	assert_memory_equal(got, ta->manifest, ta->manifest_len);
	assert_int_equal(read_0444(f->cred, LZ_TA_COORDINATOR_FILE, got, sizeof(got)),
			 ta->coordinator_credential_len);
	assert_memory_equal(got, ta->coordinator_credential, ta->coordinator_credential_len);
	assert_int_equal(read_0444(f->cred, LZ_TA_SANDBOX_FILE, got, sizeof(got)), ta->sandbox_credential_len);
	assert_memory_equal(got, ta->sandbox_credential, ta->sandbox_credential_len);
	/* The placeholder the key is mounted over: empty. */
	assert_int_equal(read_0444(f->cred, LZ_TA_KEY_FILE, got, sizeof(got)), 0);

	/* The seed, apart, and nothing else there. */
	assert_int_equal(read_0444(f->key, LZ_TA_KEY_FILE, got, sizeof(got)), LZ_SIGKEY_SEED_LEN);
	struct lz_sigkey *k = NULL;
	assert_int_equal(lz_sigkey_from_seed(got, &k), 0);
	uint8_t pub[LZ_SIGKEY_PUBLIC_LEN];
	lz_sigkey_public(k, pub);
	lz_sigkey_free(k);
	assert_memory_equal(pub, ta->sandbox_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_false(exists(f->key, LZ_TA_MANIFEST_FILE));
	assert_false(exists(f->key, LZ_TA_SANDBOX_FILE));
	assert_false(exists(f->key, LZ_TA_COORDINATOR_FILE));
}

static void test_lz_trust_anchor_write_credentials__twice_is_eexist(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_trust_anchor_write_credentials(f->ta, f->cred, f->key, &err), 0);
	assert_int_equal(lz_trust_anchor_write_credentials(f->ta, f->cred, f->key, &err), -EEXIST);
	assert_int_equal(err.code, EEXIST);

	/* A fresh key directory, the credential directory already written:
	 * refused at the first credential file. */
	char other_dir[64];
	int other = -1;
	assert_int_equal(make_dir(other_dir, &other), 0);
	assert_int_equal(lz_trust_anchor_write_credentials(f->ta, f->cred, other, &err), -EEXIST);
	close(other);
	lz_test_rmtree(other_dir);
}

static void test_lz_trust_anchor_drop_sandbox_key__unlinks_forgets_idempotent(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_trust_anchor_write_credentials(f->ta, f->cred, f->key, &err), 0);
	assert_true(exists(f->key, LZ_TA_KEY_FILE));
	uint8_t sandbox_public[LZ_SIGKEY_PUBLIC_LEN];
	memcpy(sandbox_public, f->ta->sandbox_public, sizeof(sandbox_public));

	lz_trust_anchor_drop_sandbox_key(f->ta, f->key);
	assert_false(exists(f->key, LZ_TA_KEY_FILE));
	assert_null(f->ta->sandbox);
	/* The public half and the credentials stay; the placeholder too. */
	assert_memory_equal(f->ta->sandbox_public, sandbox_public, LZ_SIGKEY_PUBLIC_LEN);
	assert_true(exists(f->cred, LZ_TA_KEY_FILE));
	assert_true(exists(f->cred, LZ_TA_SANDBOX_FILE));

	lz_trust_anchor_drop_sandbox_key(f->ta, f->key);
	lz_trust_anchor_drop_sandbox_key(f->ta, -1);
	assert_null(f->ta->sandbox);

	/* Nothing left to hand over, even into fresh directories. */
	char d1[64], d2[64];
	int fd1 = -1, fd2 = -1;
	assert_int_equal(make_dir(d1, &fd1), 0);
	assert_int_equal(make_dir(d2, &fd2), 0);
	err.code = 0;
	assert_int_equal(lz_trust_anchor_write_credentials(f->ta, fd1, fd2, &err), -EINVAL);
	assert_int_equal(err.code, EINVAL);
	assert_false(exists(fd2, LZ_TA_KEY_FILE));
	assert_false(exists(fd1, LZ_TA_MANIFEST_FILE));
	close(fd1);
	close(fd2);
	lz_test_rmtree(d1);
	lz_test_rmtree(d2);

	/* Capabilities need only the coordinator's key. */
	uint8_t cap[LZ_ESC_CAPABILITY_MAX], sid[LZ_ESC_ID_LEN];
	size_t len = 0;
	assert_int_equal(lz_trust_anchor_capability(f->ta, SESSION, cap, &len), 0);
	assert_int_equal(lz_trust_anchor_check_capability(f->ta, cap, len, sid), 0);
}

/* ---- Session Request Capabilities ---------------------------------------- */

static void test_lz_trust_anchor_capability__round_trips_session_id(void **state)
{
	struct fx *f = *state;
	uint8_t cap[LZ_ESC_CAPABILITY_MAX], sid[LZ_ESC_ID_LEN] = { 0 };
	size_t len = 0;
	assert_int_equal(lz_trust_anchor_capability(f->ta, SESSION, cap, &len), 0);
	assert_true(len > 0 && len <= LZ_ESC_CAPABILITY_MAX);
	assert_int_equal(lz_trust_anchor_check_capability(f->ta, cap, len, sid), 0);
	assert_memory_equal(sid, SESSION, LZ_ESC_ID_LEN);
	/* It is what it claims to be: a coordinator-signed capability naming
	 * this generation's sandbox credential. */
	struct lz_esc_record rec;
	assert_int_equal(lz_esc_open(cap, len, LZ_ESC_KIND_BIT(LZ_ESC_SESSION_CAPABILITY), f->ta->coordinator_public,
				     &rec, NULL),
			 0);
	assert_scope(&rec.scope);
	assert_memory_equal(rec.capability.sandbox_credential_id, f->ta->sandbox_credential_id,
			    LZ_ESC_CREDENTIAL_ID_LEN);
}

static void test_lz_trust_anchor_check_capability__another_anchor_is_eperm(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_trust_anchor *other = NULL;
	assert_int_equal(lz_trust_anchor_create(DOMAIN, GENERATION, &other, &err), 0);
	uint8_t cap[LZ_ESC_CAPABILITY_MAX], sid[LZ_ESC_ID_LEN];
	memset(sid, 0x5a, sizeof(sid));
	size_t len = 0;
	assert_int_equal(lz_trust_anchor_capability(other, SESSION, cap, &len), 0);
	assert_int_equal(lz_trust_anchor_check_capability(f->ta, cap, len, sid), -EPERM);
	/* session_id untouched on failure */
	for (size_t i = 0; i < sizeof(sid); i++)
		assert_int_equal(sid[i], 0x5a);
	assert_int_equal(lz_trust_anchor_check_capability(other, cap, len, sid), 0);
	lz_trust_anchor_free(other);
}

static void test_lz_trust_anchor_check_capability__other_scope_or_credential_is_estale(void **state)
{
	struct fx *f = *state;
	const struct lz_trust_anchor *ta = f->ta;
	uint8_t cap[LZ_ESC_CAPABILITY_MAX], sid[LZ_ESC_ID_LEN];
	memset(sid, 0x5a, sizeof(sid));

	/* The control: forged the same way with this anchor's fields, accepted. */
	size_t len = forge_capability(&ta->scope, ta->sandbox_credential_id, ta->coordinator, cap);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), 0);
	assert_memory_equal(sid, SESSION, LZ_ESC_ID_LEN);

	memset(sid, 0x5a, sizeof(sid));
	struct lz_esc_scope scope = ta->scope;
	scope.generation = GENERATION + 1;
	len = forge_capability(&scope, ta->sandbox_credential_id, ta->coordinator, cap);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), -ESTALE);
	scope.generation = GENERATION - 1;
	len = forge_capability(&scope, ta->sandbox_credential_id, ta->coordinator, cap);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), -ESTALE);

	scope = ta->scope;
	scope.domain_id[LZ_ESC_DOMAIN_ID_LEN - 1] ^= 0x01;
	len = forge_capability(&scope, ta->sandbox_credential_id, ta->coordinator, cap);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), -ESTALE);

	uint8_t cred_id[LZ_ESC_CREDENTIAL_ID_LEN];
	memcpy(cred_id, ta->sandbox_credential_id, sizeof(cred_id));
	cred_id[0] ^= 0x80;
	len = forge_capability(&ta->scope, cred_id, ta->coordinator, cap);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), -ESTALE);

	for (size_t i = 0; i < sizeof(sid); i++)
		assert_int_equal(sid[i], 0x5a);
}

static void test_lz_trust_anchor_check_capability__wrong_signer_or_kind(void **state)
{
	struct fx *f = *state;
	const struct lz_trust_anchor *ta = f->ta;
	uint8_t cap[LZ_ESC_CAPABILITY_MAX], sid[LZ_ESC_ID_LEN];

	/* The sandbox cannot mint its own. */
	size_t len = forge_capability(&ta->scope, ta->sandbox_credential_id, ta->sandbox, cap);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), -EPERM);
	/* Nor does the issuer's signature stand for the coordinator's. */
	len = forge_capability(&ta->scope, ta->sandbox_credential_id, ta->issuer, cap);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), -EPERM);

	/* Another kind, coordinator-signed and of this scope: not a capability. */
	struct lz_esc_record rec = { .kind = LZ_ESC_CANCELLATION, .scope = ta->scope };
	memcpy(rec.cancellation.request_id, SESSION, LZ_ESC_ID_LEN);
	assert_int_equal(lz_esc_seal(&rec, ta->coordinator, cap, sizeof(cap), &len), 0);
	assert_int_equal(lz_trust_anchor_check_capability(ta, cap, len, sid), -EPROTO);
	/* The credentials are issuer-signed, of another kind as well. */
	assert_true(lz_trust_anchor_check_capability(ta, ta->sandbox_credential, ta->sandbox_credential_len, sid) <
		    0);
}

static void test_lz_trust_anchor_check_capability__truncated_or_altered_refused(void **state)
{
	struct fx *f = *state;
	uint8_t cap[LZ_ESC_CAPABILITY_MAX], sid[LZ_ESC_ID_LEN];
	size_t len = 0;
	assert_int_equal(lz_trust_anchor_capability(f->ta, SESSION, cap, &len), 0);
	for (size_t n = 0; n < len; n++) {
		int r = lz_trust_anchor_check_capability(f->ta, cap, n, sid);
		if (r >= 0)
			fail_msg("a capability cut to %zu of %zu bytes was accepted", n, len);
	}
	/* One more byte: trailing garbage. */
	cap[len] = 0;
	assert_true(lz_trust_anchor_check_capability(f->ta, cap, len + 1, sid) < 0);
	/* Any flipped byte. */
	for (size_t i = 0; i < len; i++) {
		cap[i] ^= 0x01;
		if (lz_trust_anchor_check_capability(f->ta, cap, len, sid) >= 0)
			fail_msg("a capability with byte %zu flipped was accepted", i);
		cap[i] ^= 0x01;
	}
	assert_int_equal(lz_trust_anchor_check_capability(f->ta, cap, len, sid), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lz_trust_anchor_create__manifest_opens_under_issuer),
		T(test_lz_trust_anchor_create__coordinator_credential),
		T(test_lz_trust_anchor_create__sandbox_credential_and_its_id),
		T(test_lz_trust_anchor_create__fresh_keys_not_derived_from_inputs),
		T(test_lz_trust_anchor_free__accepts_null),
		T(test_lz_trust_anchor_write_credentials__files_modes_and_key),
		T(test_lz_trust_anchor_write_credentials__twice_is_eexist),
		T(test_lz_trust_anchor_drop_sandbox_key__unlinks_forgets_idempotent),
		T(test_lz_trust_anchor_capability__round_trips_session_id),
		T(test_lz_trust_anchor_check_capability__another_anchor_is_eperm),
		T(test_lz_trust_anchor_check_capability__other_scope_or_credential_is_estale),
		T(test_lz_trust_anchor_check_capability__wrong_signer_or_kind),
		T(test_lz_trust_anchor_check_capability__truncated_or_altered_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
