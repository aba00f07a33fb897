/* The egress proxy's decisions and its counters record (issue 18). The
 * proxy's serving, against real runsc and a real resolver, is
 * tests/e2e/test_egress.sh. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/egressproxy.h"

static struct lz_netpolicy *policy(void)
{
	static const char *const allow[] = { "api.example.com", "*.cdn.example.com" };
	static const char *const deny[] = { "bad.cdn.example.com" };
	struct lz_netpolicy *p = calloc(1, sizeof(*p));
	assert_non_null(p);
	assert_int_equal(lz_netpolicy_derive(NULL, 0, NULL, 0, NULL, 0, p, NULL), 0);
	assert_int_equal(lz_netpolicy_set_names(p, allow, 2, deny, 1, NULL, 0, NULL), 0);
	return p;
}

static int check(const struct lz_netpolicy *p, const char *target, struct lz_err *why)
{
	char head[512];
	struct lz_http_request req;
	int n = snprintf(head, sizeof(head), "CONNECT %s HTTP/1.1\r\n\r\n", target);
	assert_int_equal(lz_http_parse_head((const uint8_t *)head, (size_t)n, &req, NULL), 0);
	return lz_egress_check_name(p, &req, why);
}

static void test_lz_egress_check_name__allow_deny_and_addresses(void **state)
{
	(void)state;
	struct lz_netpolicy *p = policy();
	struct lz_err why = { 0 };
	assert_int_equal(check(p, "api.example.com:443", NULL), 0);
	assert_int_equal(check(p, "API.Example.COM.:443", NULL), 0); /* normalized by the parser */
	assert_int_equal(check(p, "img.cdn.example.com:443", NULL), 0);
	assert_int_equal(check(p, "a.b.cdn.example.com:8443", NULL), 0);
	assert_int_equal(check(p, "cdn.example.com:443", &why), -EACCES);
	assert_string_equal(why.msg, "not in allow_domains");
	assert_int_equal(check(p, "example.com:443", NULL), -EACCES);
	assert_int_equal(check(p, "api.example.com.evil.org:443", NULL), -EACCES);
	assert_int_equal(check(p, "bad.cdn.example.com:443", &why), -EACCES);
	assert_string_equal(why.msg, "in deny_domains");
	assert_int_equal(check(p, "93.184.216.34:443", &why), -EACCES);
	assert_string_equal(why.msg, "an address, not a name (allow_domains admits names only)");
	free(p);
}

static void test_lz_egress_check_addrs__any_denied_address_refuses(void **state)
{
	(void)state;
	struct lz_netpolicy *p = policy();
	struct lz_err why = { 0 };
	const uint32_t public[] = { 0xcb007105u, 0xc6336401u };
	const uint32_t mixed[] = { 0xcb007105u, 0x0a000001u };
	const uint32_t loopback[] = { 0x7f000001u };
	assert_int_equal(lz_egress_check_addrs(p, public, 2, NULL), 0);
	assert_int_equal(lz_egress_check_addrs(p, mixed, 2, &why), -EACCES);
	assert_string_equal(why.msg, "resolves to 10.0.0.1, which the address policy denies");
	assert_int_equal(lz_egress_check_addrs(p, loopback, 1, NULL), -EACCES);
	free(p);
}

static void test_lz_egress_stats__format_and_strict_read(void **state)
{
	(void)state;
	char dir[] = "/tmp/lz-egress-stats.XXXXXX";
	assert_non_null(mkdtemp(dir));
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	uint64_t a = 7, r = 9;
	assert_int_equal(lz_egress_stats_read(dfd, &a, &r, NULL), -ENOENT);
	char rec[LZ_EGRESS_STATS_LEN + 1];
	lz_egress_stats_format(12, 18446744073709551615ull, rec);
	assert_int_equal(strlen(rec), LZ_EGRESS_STATS_LEN);
	int fd = openat(dfd, LZ_EGRESS_STATS, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, rec, LZ_EGRESS_STATS_LEN, 0), LZ_EGRESS_STATS_LEN);
	assert_int_equal(lz_egress_stats_read(dfd, &a, &r, NULL), 0);
	assert_int_equal(a, 12);
	assert_true(r == 18446744073709551615ull);
	/* Anything but the exact form: refused, outputs untouched. */
	const char *forged[] = { "allowed 1\nrefused 2\n",
				 "allowed                   -1\nrefused                    2\n",
				 "allowed                    1\nrefused                    2\nX" };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(ftruncate(fd, 0), 0);
		assert_int_equal(pwrite(fd, forged[i], strlen(forged[i]), 0), (ssize_t)strlen(forged[i]));
		a = r = 5;
		assert_int_equal(lz_egress_stats_read(dfd, &a, &r, NULL), -EBADMSG);
		assert_int_equal(a, 5);
		assert_int_equal(r, 5);
	}
	close(fd);
	/* A symlink in its place is not followed. */
	assert_int_equal(unlinkat(dfd, LZ_EGRESS_STATS, 0), 0);
	assert_int_equal(symlinkat("/etc/hostname", dfd, LZ_EGRESS_STATS), 0);
	assert_true(lz_egress_stats_read(dfd, &a, &r, NULL) < 0);
	assert_int_equal(a, 5);
	assert_int_equal(unlinkat(dfd, LZ_EGRESS_STATS, 0), 0);
	close(dfd);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_egress_check_name__allow_deny_and_addresses),
		cmocka_unit_test(test_lz_egress_check_addrs__any_denied_address_refuses),
		cmocka_unit_test(test_lz_egress_stats__format_and_strict_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
