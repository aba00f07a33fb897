/* Host names and name patterns of the egress allowlist (spec 3.7).
 *
 * Every name the sandbox hands the egress proxy (request target, Host
 * header, TLS server_name, DNS question) goes through
 * lz_egress_name_normalize before it is compared with anything, so one
 * host has exactly one spelling: lowercase LDH labels, no trailing dot. An
 * all-numeric last label is refused, as is a "0x" hex last label, so an
 * IPv4 literal in any spelling (dotted, 2130706433, 1.0x1) is never a
 * name and cannot slip past an allowlist of names into an address parser.
 *
 * Patterns are configuration: a normalized name ("example.com") matches
 * itself only; "*.example.com" matches every name strictly below
 * example.com. A wildcard needs at least two labels after "*.", so no
 * pattern admits a whole top-level domain. Deny patterns win over allow. */
#ifndef LZ_EGRESSNAME_H
#define LZ_EGRESSNAME_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define LZ_EGRESS_NAME_MAX 253

/* Normalizes in[0..len) into out (NUL-terminated): ASCII lowercased, one
 * trailing dot stripped; labels 1..63 bytes of letters, digits, '-' (not
 * first or last), total <= 253. -EINVAL for anything else; out untouched
 * on failure. */
int lz_egress_name_normalize(const char *in, size_t len, char out[LZ_EGRESS_NAME_MAX + 1], struct lz_err *err);

/* 0 when pattern is a normalized name or "*." and a normalized name of at
 * least two labels; -EINVAL otherwise (uppercase, trailing dot, "*",
 * "*.com", "*foo.com", "a.*.com"). */
int lz_egress_pattern_check(const char *pattern, struct lz_err *err);

/* Whether a checked pattern matches a normalized name (bytewise). */
bool lz_egress_pattern_match(const char *pattern, const char *name);

/* True iff some allow pattern matches name and no deny pattern does. */
bool lz_egress_names_admit(const char *const *allow, size_t n_allow, const char *const *deny, size_t n_deny,
			   const char *name);

#endif
