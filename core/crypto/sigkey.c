/* Ed25519 through OpenSSL 3's EVP interface (sigkey.h). */
#include "crypto/sigkey.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

struct lz_sigkey {
	EVP_PKEY *pkey;
	uint8_t public_key[LZ_SIGKEY_PUBLIC_LEN];
};

static int adopt(EVP_PKEY *pkey, struct lz_sigkey **ret)
{
	size_t n = LZ_SIGKEY_PUBLIC_LEN;
	if (pkey == NULL)
		return -EIO;
	struct lz_sigkey *k = calloc(1, sizeof(*k));
	if (k == NULL) {
		EVP_PKEY_free(pkey);
		return -ENOMEM;
	}
	k->pkey = pkey;
	if (EVP_PKEY_get_raw_public_key(pkey, k->public_key, &n) != 1 || n != LZ_SIGKEY_PUBLIC_LEN) {
		lz_sigkey_free(k);
		return -EIO;
	}
	*ret = k;
	return 0;
}

int lz_sigkey_from_seed(const uint8_t seed[LZ_SIGKEY_SEED_LEN], struct lz_sigkey **ret)
{
	return adopt(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, LZ_SIGKEY_SEED_LEN), ret);
}

int lz_sigkey_generate(struct lz_sigkey **ret)
{
	uint8_t seed[LZ_SIGKEY_SEED_LEN];
	if (RAND_priv_bytes(seed, sizeof(seed)) != 1)
		return -EIO;
	int r = lz_sigkey_from_seed(seed, ret);
	OPENSSL_cleanse(seed, sizeof(seed));
	return r;
}

int lz_sigkey_seed(const struct lz_sigkey *key, uint8_t out[LZ_SIGKEY_SEED_LEN])
{
	size_t n = LZ_SIGKEY_SEED_LEN;
	if (EVP_PKEY_get_raw_private_key(key->pkey, out, &n) != 1 || n != LZ_SIGKEY_SEED_LEN)
		return -EIO;
	return 0;
}

EVP_PKEY *lz_sigkey_evp(const struct lz_sigkey *key)
{
	return EVP_PKEY_up_ref(key->pkey) == 1 ? key->pkey : NULL;
}

void lz_sigkey_public(const struct lz_sigkey *key, uint8_t out[LZ_SIGKEY_PUBLIC_LEN])
{
	memcpy(out, key->public_key, LZ_SIGKEY_PUBLIC_LEN);
}

int lz_sigkey_sign(const struct lz_sigkey *key, const void *msg, size_t len, uint8_t sig[LZ_SIGKEY_SIG_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t n = LZ_SIGKEY_SIG_LEN;
	int ok = ctx != NULL && EVP_DigestSignInit(ctx, NULL, NULL, NULL, key->pkey) == 1 &&
		 EVP_DigestSign(ctx, sig, &n, msg, len) == 1 && n == LZ_SIGKEY_SIG_LEN;
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

bool lz_sig_verify(const uint8_t pub[LZ_SIGKEY_PUBLIC_LEN], const void *msg, size_t len,
		   const uint8_t sig[LZ_SIGKEY_SIG_LEN])
{
	EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, LZ_SIGKEY_PUBLIC_LEN);
	EVP_MD_CTX *ctx = pkey ? EVP_MD_CTX_new() : NULL;
	bool ok = ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1 &&
		  EVP_DigestVerify(ctx, sig, LZ_SIGKEY_SIG_LEN, msg, len) == 1;
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pkey);
	return ok;
}

int lz_sha256(const void *data, size_t len, uint8_t out[32])
{
	return SHA256(data, len, out) ? 0 : -EIO;
}

void lz_sigkey_free(struct lz_sigkey *key)
{
	if (key == NULL)
		return;
	EVP_PKEY_free(key->pkey); /* OpenSSL clears the private key it frees */
	OPENSSL_cleanse(key, sizeof(*key));
	free(key);
}
