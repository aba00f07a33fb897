#include "config/domain.h"

#include <errno.h>
#include <openssl/evp.h>

static int digest_framed(EVP_MD_CTX *ctx, const char *bytes, size_t len)
{
	if (len > UINT32_MAX)
		return -EOVERFLOW;
	uint8_t be[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
			  (uint8_t)len };
	if (EVP_DigestUpdate(ctx, be, sizeof(be)) != 1 || EVP_DigestUpdate(ctx, bytes, len) != 1)
		return -EIO;
	return 0;
}

int lz_domain_id(const char *profile, size_t profile_len, const char *workspace,
		 size_t workspace_len, uint8_t ret_id[LZ_DOMAIN_ID_LEN])
{
	static const char context[] = "lazaret-domain-id-v1";
	uint8_t id[LZ_DOMAIN_ID_LEN];
	unsigned int n = 0;
	int r = -EIO;

	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx == NULL)
		return -ENOMEM;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, context, sizeof(context) - 1) != 1)
		goto out;
	if ((r = digest_framed(ctx, profile, profile_len)) < 0 ||
	    (r = digest_framed(ctx, workspace, workspace_len)) < 0)
		goto out;
	r = -EIO;
	if (EVP_DigestFinal_ex(ctx, id, &n) != 1 || n != sizeof(id))
		goto out;
	for (size_t i = 0; i < sizeof(id); i++)
		ret_id[i] = id[i];
	r = 0;
out:
	EVP_MD_CTX_free(ctx);
	return r;
}

void lz_hex(const uint8_t *bytes, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 0xf];
	}
	out[2 * n] = '\0';
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int lz_unhex(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hex_digit(hex[2 * i]);
		int lo = hi < 0 ? -1 : hex_digit(hex[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return hex[2 * n] == '\0' ? 0 : -EINVAL;
}
