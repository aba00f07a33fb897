#!/usr/bin/env bash
# End-to-end tests of egress by name (issue 18): network.allow_domains,
# deny_domains and resolvers, enforced by the egress proxy (core/net/egress.h,
# egressproxy.h) through real runsc, slirp4netns and the test network that
# scripts/test.sh builds as root: the test hosts of test_network.sh, a DNS
# server on $LZ_TEST_DNS:53 for *.lazaret.test (allowed, other and
# api.wild -> the documentation host, private -> the private host,
# rebind-* -> the documentation host once, then the private host), and a
# server on $LZ_TEST_BANNER_PORT that speaks first.
#
# Inside, the probes talk to the proxy at 10.137.55.10:3128 with busybox nc
# (and bash /dev/tcp for the direct path); TLS ClientHellos are made on the
# host with Python's ssl module and read from the workspace.
# Needs: LAZARET, LAZARET_FAULTS, E2E_ROOT, python3, umoci, unshare, sqlite3.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net_lib.sh"

DNS=${LZ_TEST_DNS:-198.51.100.10}
BANNER_PORT=${LZ_TEST_BANNER_PORT:-2525}
PROXY=10.137.55.10

# egress_profile ALLOW [DENY]: allow_domains (and deny_domains), the test's
# resolver; each argument is the inside of a TOML array.
egress_profile() {
	EXTRA="[profiles.test.network]
allow_domains = [$1]
deny_domains = [${2:-}]
resolvers = [\"$DNS\"]
" write_profile
}

# The probe functions for the proxy, appended to probe.sh: `via LINE...`
# sends the request head (CRLF line ends, an empty line last) and prints the
# answer; `tunnel HOST:PORT FILE` sends CONNECT, then FILE's bytes.
write_proxy_probe() {
	cat >>"$WS/probe.sh" <<-EOF
		via() {
			{ for l in "\$@"; do printf '%s\r\n' "\$l"; done; printf '\r\n'; sleep 2; } |
				busybox timeout 8 nc -w 5 $PROXY 3128
		}
		tunnel() {
			{ printf 'CONNECT %s HTTP/1.1\r\n\r\n' "\$1"; sleep 0.5; cat "\$2"; sleep 2; } |
				busybox timeout 8 nc -w 5 $PROXY 3128
		}
		# The CONNECT head, 4 s of silence, then FILE's bytes.
		late_tunnel() {
			{ printf 'CONNECT %s HTTP/1.1\r\n\r\n' "\$1"; sleep 4; cat "\$2"; sleep 2; } |
				busybox timeout 12 nc -w 8 $PROXY 3128
		}
		# FILE holds the CONNECT head and the first bytes, sent in one
		# write; waits past the proxy's 30 s for first bytes.
		at_once() {
			{ cat "\$1"; sleep 2; } | busybox timeout 40 nc -w 36 $PROXY 3128
		}
		# Starts N connections that say nothing for S seconds.
		silent() {
			local i=0
			while [ "\$i" -lt "\$1" ]; do
				sleep "\$2" | busybox timeout \$((\$2 + 2)) nc $PROXY 3128 >/dev/null 2>&1 &
				i=\$((i + 1))
			done
		}
		hold() {
			silent "\$1" "\$2"
			wait
		}
		# N such connections for 6 s, all started before the 2 s that
		# let them connect; then a CONNECT to the test server.
		crowd() {
			silent "\$1" 6
			sleep 2
			via "CONNECT allowed.lazaret.test:$PORT HTTP/1.1"
			wait
		}
	EOF
}

# client_hello NAME FILE: a TLS ClientHello naming NAME, then an empty line
# (the test server answers once it has read one).
client_hello() {
	python3 - "$1" "$2" <<-'PY'
		import ssl, sys
		ctx = ssl.create_default_context()
		inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
		tls = ctx.wrap_bio(inc, out, server_hostname=sys.argv[1])
		try:
		    tls.do_handshake()
		except ssl.SSLWantReadError:
		    pass
		open(sys.argv[2], "wb").write(out.read() + b"\r\n\r\n")
	PY
}

# The HC's log of this Domain (refusals are logged there).
hc_log() {
	cat "$T"/run/lazaret/domains/*/hc.log 2>/dev/null
}

# egress_counts: "allowed refused" from `lazaret state inspect --json`.
egress_counts() {
	capture lz state inspect --profile test --json
	assert_eq 0 "$STATUS" "state inspect (stderr: $ERR)"
	python3 -c 'import json, sys; e = json.load(sys.stdin)["egress"]; print(e["allowed"], e["refused"])' <<<"$OUT"
}

test_allowed_names_reach_their_hosts_and_nothing_else_does() {
	need_net
	egress_profile '"allowed.lazaret.test", "*.wild.lazaret.test"'
	write_proxy_probe
	printf 'GET / HTTP/1.0\r\n\r\n' >"$WS/get.txt"
	probe "section env sh -c 'env | grep -i _proxy | sort';
		section fwd via 'GET http://allowed.lazaret.test:$PORT/ HTTP/1.1' 'Host: allowed.lazaret.test:$PORT';
		section tunnel tunnel allowed.lazaret.test:$PORT /workspace/get.txt;
		section wild via 'GET http://api.wild.lazaret.test:$PORT/x?y=1 HTTP/1.0';
		section direct http $DOC $PORT;
		section dns busybox timeout 5 nslookup allowed.lazaret.test 10.137.54.3"
	assert_contains "$(section env)" "HTTPS_PROXY=http://$PROXY:3128" "the proxy variables"
	assert_contains "$(section env)" "https_proxy=http://$PROXY:3128" "the proxy variables"
	answers fwd "$DOC"
	answers tunnel "$DOC"
	assert_contains "$(section tunnel)" "HTTP/1.1 200 Connection established" "the CONNECT answer"
	answers wild "$DOC"
	# No route leads anywhere but the proxy, and the sandbox's DNS is off.
	refused direct "hello from"
	section_failed dns # the sandbox's own DNS did not answer
	assert_not_contains "$(hc_log)" "egress refused" "hc.log after allowed requests"
	assert_eq "3 0" "$(egress_counts)" "the counters"
}

test_other_names_addresses_and_denied_names_are_refused() {
	need_net
	egress_profile '"allowed.lazaret.test", "*.wild.lazaret.test"' '"api.wild.lazaret.test"'
	write_proxy_probe
	probe "section other via 'GET http://other.lazaret.test:$PORT/ HTTP/1.0';
		section again via 'GET http://other.lazaret.test:$PORT/ HTTP/1.0';
		section addr via 'CONNECT $DOC:$PORT HTTP/1.1';
		section denied via 'GET http://api.wild.lazaret.test:$PORT/ HTTP/1.0';
		section host via 'GET http://allowed.lazaret.test:$PORT/ HTTP/1.1' 'Host: other.lazaret.test'"
	local s
	for s in other again addr denied host; do
		assert_not_contains "$(section "$s")" "hello from" "$s"
	done
	assert_contains "$(section other)" "403 Forbidden" "a name outside allow_domains"
	assert_contains "$(section other)" "not in allow_domains" "the agent's answer"
	assert_contains "$(section addr)" "403 Forbidden" "an address instead of a name"
	assert_contains "$(section denied)" "in deny_domains" "a denied name"
	assert_contains "$(section host)" "400 Bad Request" "a Host header naming another host"
	# One line per destination, however often it is refused.
	assert_eq 1 "$(hc_log | grep -c 'egress refused other.lazaret.test:8080: not in allow_domains')" \
		"hc.log lines for other.lazaret.test"
	assert_contains "$(hc_log)" "egress refused $DOC:$PORT: an address, not a name" "hc.log"
	assert_contains "$(hc_log)" "egress refused api.wild.lazaret.test:$PORT: in deny_domains" "hc.log"
	assert_eq "0 5" "$(egress_counts)" "the counters"
	capture lz state inspect --profile test
	assert_contains "$OUT" "egress by name (the last launch with allow_domains): 0 allowed, 5 refused" \
		"state inspect"
}

test_a_name_resolving_into_a_denied_range_is_refused() {
	need_net
	egress_profile '"private.lazaret.test"'
	write_proxy_probe
	probe "section priv via 'GET http://private.lazaret.test:$PORT/ HTTP/1.0'"
	assert_not_contains "$(section priv)" "hello from" "the private host"
	assert_contains "$(section priv)" "resolves to $PRIV, which the address policy denies" "the answer"
	assert_contains "$(hc_log)" "egress refused private.lazaret.test:$PORT: resolves to $PRIV" "hc.log"
	# An explicit address allow opens it, as for direct egress.
	EXTRA="[profiles.test.network]
allow = [\"${PRIV%.*}.0/24\"]
allow_domains = [\"private.lazaret.test\"]
resolvers = [\"$DNS\"]
" write_profile
	probe "section priv via 'GET http://private.lazaret.test:$PORT/ HTTP/1.0'"
	answers priv "$PRIV"
}

test_rebinding_between_check_and_connect_is_refused() {
	need_net
	egress_profile '"*.lazaret.test"'
	write_proxy_probe
	local name="rebind-$RANDOM$RANDOM.lazaret.test"
	# The resolver's first answer is public, every later one private: the
	# proxy connects to the address it checked, and the next request sees
	# the private answer and is refused.
	probe "section first via 'GET http://$name:$PORT/ HTTP/1.0';
		section second via 'GET http://$name:$PORT/ HTTP/1.0'"
	answers first "$DOC"
	assert_not_contains "$OUT" "hello from $PRIV" "any answer of the private host"
	assert_contains "$(section second)" "403 Forbidden" "the rebound name"
	assert_contains "$(hc_log)" "egress refused $name:$PORT: resolves to $PRIV" "hc.log"
}

test_tls_naming_another_server_is_refused() {
	need_net
	egress_profile '"allowed.lazaret.test"'
	write_proxy_probe
	client_hello allowed.lazaret.test "$WS/hello-same.bin"
	client_hello other.lazaret.test "$WS/hello-other.bin"
	probe "section same tunnel allowed.lazaret.test:$PORT /workspace/hello-same.bin;
		section other tunnel allowed.lazaret.test:$PORT /workspace/hello-other.bin"
	# The test server answers anything that ends in an empty line.
	answers same "$DOC"
	assert_contains "$(section other)" "200 Connection established" "the tunnel was announced"
	assert_not_contains "$(section other)" "hello from" "a ClientHello for another server"
	assert_contains "$(hc_log)" \
		"egress refused allowed.lazaret.test:$PORT: TLS names another server, 'other.lazaret.test'" "hc.log"
	assert_eq "1 1" "$(egress_counts)" "the counters"
}

# A ClientHello that arrives with the CONNECT head (one write) is the
# client's first bytes too: checked at once, never waved through after
# the proxy waited for more.
test_tls_sent_with_the_connect_head_is_checked() {
	need_net
	egress_profile '"allowed.lazaret.test"'
	write_proxy_probe
	client_hello other.lazaret.test "$WS/hello-other.bin"
	{ printf 'CONNECT allowed.lazaret.test:%s HTTP/1.1\r\n\r\n' "$PORT"; cat "$WS/hello-other.bin"; } \
		>"$WS/at-once.bin"
	probe "section other at_once /workspace/at-once.bin"
	assert_not_contains "$(section other)" "hello from" "a ClientHello for another server"
	assert_contains "$(hc_log)" \
		"egress refused allowed.lazaret.test:$PORT: TLS names another server, 'other.lazaret.test'" "hc.log"
}

# A tunnel where nobody speaks is closed when the proxy's wait for first
# bytes ends (30 s; 2 s with the fault): a ClientHello sent later would
# otherwise pass unchecked. The same bytes sent at once are answered.
test_a_silent_tunnel_is_closed() {
	need_faults
	need_net
	egress_profile '"allowed.lazaret.test"'
	write_proxy_probe
	client_hello allowed.lazaret.test "$WS/hello-same.bin"
	capture faulty_launch egress-silence-2s bash -c ". /workspace/probe.sh;
		section prompt tunnel allowed.lazaret.test:$PORT /workspace/hello-same.bin;
		section late late_tunnel allowed.lazaret.test:$PORT /workspace/hello-same.bin"
	assert_eq 0 "$STATUS" "the probe launch's status (stderr: $ERR)"
	answers prompt "$DOC"
	assert_contains "$(section late)" "200 Connection established" "the tunnel was announced"
	assert_not_contains "$(section late)" "hello from" "bytes sent after the silence"
}

# A relayed tunnel where nothing moves for the idle time (15 min; 2 s
# with the fault) ends and gives its connection slot back: the end of a
# request sent after a longer silence reaches no server (the test host
# answers a request once its head is whole, or after 5 s).
test_an_idle_tunnel_ends() {
	need_faults
	need_net
	egress_profile '"allowed.lazaret.test"'
	write_proxy_probe
	cat >>"$WS/probe.sh" <<-EOF
		# The CONNECT head, a request line, 3 s of silence, the head's end.
		quiet_tunnel() {
			{ printf 'CONNECT %s HTTP/1.1\r\n\r\n' "\$1"; sleep 0.5; printf 'GET / HTTP/1.0\r\n'; sleep 3;
			  printf '\r\n'; sleep 2; } | busybox timeout 12 nc -w 9 $PROXY 3128
		}
	EOF
	capture faulty_launch egress-idle-2s bash -c ". /workspace/probe.sh;
		section quiet quiet_tunnel allowed.lazaret.test:$PORT"
	assert_eq 0 "$STATUS" "the probe launch's status (stderr: $ERR)"
	assert_contains "$(section quiet)" "200 Connection established" "the tunnel was announced"
	assert_not_contains "$(section quiet)" "hello from" "an answer after the idle time"
}

# The proxy serves as many connections at once as the host's TCP memory
# allows (lz_egress_limits_for; the fault sizes them as on the smallest
# host: 16): the next is answered 503 naming the limit, and hc.log says
# so once.
test_connections_past_the_host_limit_are_refused() {
	need_faults
	need_net
	egress_profile '"allowed.lazaret.test"'
	write_proxy_probe
	capture faulty_launch egress-least-host bash -c ". /workspace/probe.sh; section crowd crowd 16;
		section alone via 'CONNECT allowed.lazaret.test:$PORT HTTP/1.1'"
	assert_eq 0 "$STATUS" "the probe launch's status (stderr: $ERR)"
	assert_contains "$(section crowd)" "503 Service Unavailable" "the connection past the limit"
	assert_contains "$(section crowd)" \
		"too many connections through the egress proxies on this host: 16 at once, 16 of them this sandbox's" \
		"the connection past the limit"
	assert_contains "$(section alone)" "200 Connection established" "a connection once the crowd left"
	assert_eq 1 "$(hc_log | grep -c 'egress refused (connection limit): too many connections through the egress proxies on this host: 16 at once')" \
		"hc.log lines for the limit"
}

# The connection limit is the host's, not each Domain's: another Domain
# (a second profile of the same workspace and Storage Root) holds 10 of the
# test build's 16 connections while this one asks for its 7th. When both
# have ended, nothing is held.
test_the_connection_limit_is_shared_by_every_domain() {
	need_faults
	need_net
	egress_profile '"allowed.lazaret.test"'
	cat >>"$CFG" <<-EOF
		[profiles.other]
		image = "oci:$IMG/img:latest"
		[profiles.other.network]
		allow_domains = ["allowed.lazaret.test"]
		resolvers = ["$DNS"]
	EOF
	write_proxy_probe
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=egress-least-host "$LAZARET_FAULTS" \
		other --config "$CFG" -- bash -c ". /workspace/probe.sh; hold 10 25") >/dev/null 2>&1 &
	local bg=$!
	await_slots "$DATA/egress.slots" 10 "slots the other Domain's proxy holds"
	capture faulty_launch egress-least-host bash -c ". /workspace/probe.sh; section crowd crowd 6"
	assert_eq 0 "$STATUS" "the probe launch's status (stderr: $ERR)"
	assert_contains "$(section crowd)" "503 Service Unavailable" "the connection past the host's limit"
	assert_contains "$(section crowd)" \
		"too many connections through the egress proxies on this host: 16 at once, 6 of them this sandbox's" \
		"the connection past the host's limit"
	wait "$bg" || fail "the other Domain's launch failed"
	await_slots "$DATA/egress.slots" 0 "slots held once both Domains ended"
}

test_a_server_that_speaks_first_is_relayed() {
	need_net
	egress_profile '"allowed.lazaret.test"'
	write_proxy_probe
	printf 'EHLO lazaret\r\n' >"$WS/ehlo.txt"
	# Documented: inside an admitted CONNECT, bytes that are not TLS are the
	# client's protocol; the name and the address were checked.
	probe "section banner tunnel allowed.lazaret.test:$BANNER_PORT /workspace/ehlo.txt"
	assert_contains "$(section banner)" "220 lazaret-test banner" "the server's banner"
	assert_contains "$(section banner)" "250 EHLO lazaret" "the server's reply"
}

# The proxy is a fork of the coordinator's line: its memory holds what the
# coordinator's did (the generation's keys). Keeping no capability, it is
# not dumpable, or any process of the generation's user namespace keeping
# a superset (the workspace router, compromised) could read it through
# /proc and ptrace. A process entering that namespace with no capability
# reads a dumpable one of its own there (the control), not the proxy.
test_the_proxy_memory_is_closed_to_the_generation() {
	need_net
	egress_profile '"allowed.lazaret.test"'
	launch sleep 8 >/dev/null 2>&1 &
	local bg=$! proxy="" rs k
	for k in $(seq 100); do
		proxy=$(pgrep -n -u "$(id -u)" -x lz-egress || true)
		[ -z "$proxy" ] || break
		sleep 0.1
	done
	[ -n "$proxy" ] || fail "no egress proxy (lz-egress) seen"
	rs=$(ps -o ppid= -p "$proxy" | tr -d ' ')
	local reader=(nsenter --user --target "$rs" -- setpriv --inh-caps=-all --bounding-set=-all --)
	capture "${reader[@]}" sh -c 'sleep 3 & cat /proc/$!/environ >/dev/null && echo readable'
	assert_eq readable "$OUT" "a dumpable process of the generation's user namespace (stderr: $ERR)"
	capture "${reader[@]}" cat "/proc/$proxy/environ"
	[ "$STATUS" != 0 ] || fail "the proxy's memory is readable from the generation's user namespace"
	assert_contains "$ERR" "Permission denied" "the refusal"
	wait "$bg" || fail "the launch failed"
}

# The proxy parses what the sandbox sends; a bug there must not reach the
# developer's files or Unix sockets (the session bus would run what it is
# asked). Once confined it opens no file and makes no Unix socket: the
# fault has the real proxy try both and log what happened.
test_the_proxy_opens_no_file() {
	need_faults
	need_net
	egress_profile '"allowed.lazaret.test"'
	capture faulty_launch egress-opens-a-file true
	assert_eq 0 "$STATUS" "the launch's status (stderr: $ERR)"
	assert_contains "$(hc_log)" "the egress proxy opening /etc/passwd: Permission denied" "hc.log"
	assert_contains "$(hc_log)" "the egress proxy making a Unix socket: Permission denied" "hc.log"
	# its log is a pipe the RS relays: hc.log keeps its mode
	assert_contains "$(hc_log)" "the egress proxy changing its log's mode: changed" "hc.log"
	assert_eq 600 "$(stat -c %a "$T"/run/lazaret/domains/*/hc.log)" "the mode of hc.log"
}

test_unproved_proxy_refuses_readiness() {
	need_faults
	egress_profile '"allowed.lazaret.test"'
	capture faulty_launch egress-unproved
	assert_eq 69 "$STATUS" "status with the proxy unproved (stderr: $ERR)"
	assert_contains "$ERR" "network readiness refused: predicate 'egress proxy live' failed" "the refusal"
	assert_start_undone
	assert_no_foreign_netns
	assert_not_contains "$(ip -o link 2>&1)" "lzegress" "egress links in the host namespace"
}

# The helper (slirp4netns) joins the RS's namespace when it gets to it; the
# RS steps into other namespaces to build the proxy's link. The fault holds
# the helper until the RS waits for it and then detours the RS through a
# throwaway namespace: a launch that did not wait configures tap0 there
# and fails "slirp4netns did not configure tap0" (seen under load).
test_a_helper_slow_to_start_is_waited_for() {
	need_faults
	egress_profile '"allowed.lazaret.test"'
	capture faulty_launch helper-joins-late
	assert_eq 0 "$STATUS" "status with a late helper (stderr: $ERR)"
}

test_bad_name_configuration_is_refused() {
	local case
	for case in '"*.com"' '"Allowed.lazaret.test"' '"a..b"' '"10.1.2.3"' '"*"' '"a.*.test"'; do
		egress_profile "$case"
		assert_status 78 lz config check --profile test --workspace "$WS"
		assert_contains "$ERR" "allow_domains" "config check's message for $case"
	done
	EXTRA="[profiles.test.network]
deny_domains = [\"evil.test\"]
" write_profile
	assert_status 78 lz config check --profile test --workspace "$WS"
	assert_contains "$ERR" "need 'allow_domains'" "a deny list alone"
	egress_profile '"a.test"' '"a.test"'
	assert_status 78 launch true
	assert_contains "$ERR" "both in allow_domains and deny_domains" "the same name in both"
	assert_nothing_started
}

t_run "allowed names reach their hosts through the proxy; no other way out" \
	test_allowed_names_reach_their_hosts_and_nothing_else_does
t_run "other names, addresses and denied names are refused, logged once, counted" \
	test_other_names_addresses_and_denied_names_are_refused
t_run "a name resolving into RFC 1918 is refused" test_a_name_resolving_into_a_denied_range_is_refused
t_run "DNS rebinding between check and connect is refused" test_rebinding_between_check_and_connect_is_refused
t_run "a relayed tunnel idle for its time ends" test_an_idle_tunnel_ends
t_run "CONNECT to an allowed name with another TLS server name is refused" \
	test_tls_naming_another_server_is_refused
t_run "a ClientHello sent with the CONNECT head is checked" test_tls_sent_with_the_connect_head_is_checked
t_run "a tunnel where nobody speaks is closed, never relayed unchecked later" test_a_silent_tunnel_is_closed
t_run "connections past the host's limit are refused with the limit, logged once" test_connections_past_the_host_limit_are_refused
t_run "the connection limit is the host's, shared by every Domain's proxy" test_the_connection_limit_is_shared_by_every_domain
t_run "a server that speaks first (not HTTP) on another port is relayed" test_a_server_that_speaks_first_is_relayed
t_run "the proxy's memory is closed to the generation's other processes" test_the_proxy_memory_is_closed_to_the_generation
t_run "the proxy opens no file and no Unix socket of the developer's" test_the_proxy_opens_no_file
t_run "an unproved proxy refuses readiness and leaves nothing" test_unproved_proxy_refuses_readiness
t_run "a helper slow to start is waited for before the RS leaves its namespace" test_a_helper_slow_to_start_is_waited_for
t_run "malformed name configuration is refused before anything starts" test_bad_name_configuration_is_refused
rm -rf "$IMG"
t_done
