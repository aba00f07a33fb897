#include "net/egressname.h"

#include <errno.h>
#include <string.h>

#define LABEL_MAX 63

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f');
}

/* Whether the (lowercased) last label could be read as a number by an
 * address parser: decimal, or "0x" hex (inet_aton accepts both). */
static bool numeric_label(const char *s, size_t n)
{
	size_t i = 0;
	if (n > 2 && s[0] == '0' && s[1] == 'x') {
		for (i = 2; i < n && is_hex(s[i]); i++)
			;
		if (i == n)
			return true;
	}
	for (i = 0; i < n && is_digit(s[i]); i++)
		;
	return i == n;
}

int lz_egress_name_normalize(const char *in, size_t len, char out[LZ_EGRESS_NAME_MAX + 1], struct lz_err *err)
{
	char buf[LZ_EGRESS_NAME_MAX + 1];
	size_t label = 0; /* start of the current label in buf */

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0)
		return lz_err_set(err, EINVAL, "host name is empty");
	if (len > LZ_EGRESS_NAME_MAX)
		return lz_err_set(err, EINVAL, "host name longer than %d bytes", LZ_EGRESS_NAME_MAX);
	for (size_t i = 0; i <= len; i++) {
		char c = i < len ? in[i] : '.';
		if (c == '.') {
			size_t n = i - label;
			if (n == 0)
				return lz_err_set(err, EINVAL, "host name has an empty label");
			if (n > LABEL_MAX)
				return lz_err_set(err, EINVAL, "host name label longer than %d bytes", LABEL_MAX);
			if (buf[label] == '-' || buf[i - 1] == '-')
				return lz_err_set(err, EINVAL, "host name label starts or ends with '-'");
			buf[i] = '.';
			label = i + 1;
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-'))
			return lz_err_set(err, EINVAL, "host name has a byte 0x%02x outside letters, digits, '-'",
					  (unsigned char)c);
		buf[i] = c;
	}
	size_t last = len;
	while (last > 0 && buf[last - 1] != '.')
		last--;
	if (numeric_label(buf + last, len - last))
		return lz_err_set(err, EINVAL, "host name has a numeric last label (an address, not a name)");
	buf[len] = '\0';
	memcpy(out, buf, len + 1);
	return 0;
}

int lz_egress_pattern_check(const char *pattern, struct lz_err *err)
{
	char norm[LZ_EGRESS_NAME_MAX + 1];
	const char *name = pattern;
	bool wild = pattern[0] == '*' && pattern[1] == '.';

	if (wild)
		name += 2;
	size_t n = strnlen(name, LZ_EGRESS_NAME_MAX + 2);
	int r = lz_egress_name_normalize(name, n, norm, err);
	if (r < 0)
		return lz_err_prefix(err, r, "pattern '%.*s': ", LZ_EGRESS_NAME_MAX + 2, pattern);
	if (strcmp(norm, name) != 0)
		return lz_err_set(err, EINVAL, "pattern '%s' is not in normalized form '%s%s'", pattern,
				  wild ? "*." : "", norm);
	if (wild && strchr(name, '.') == NULL)
		return lz_err_set(err, EINVAL, "pattern '%s' covers a whole top-level domain", pattern);
	return 0;
}

bool lz_egress_pattern_match(const char *pattern, const char *name)
{
	if (pattern[0] == '*' && pattern[1] == '.') {
		const char *suffix = pattern + 1; /* ".example.com" */
		size_t ns = strlen(suffix), nn = strlen(name);
		return nn > ns && memcmp(name + nn - ns, suffix, ns) == 0;
	}
	return strcmp(pattern, name) == 0;
}

bool lz_egress_names_admit(const char *const *allow, size_t n_allow, const char *const *deny, size_t n_deny,
			   const char *name)
{
	bool allowed = false;
	for (size_t i = 0; i < n_allow && !allowed; i++)
		allowed = lz_egress_pattern_match(allow[i], name);
	for (size_t i = 0; i < n_deny && allowed; i++)
		allowed = !lz_egress_pattern_match(deny[i], name);
	return allowed;
}
