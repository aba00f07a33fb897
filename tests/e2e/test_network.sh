#!/usr/bin/env bash
# End-to-end tests of the sandbox network (issue 6): real slirp4netns and
# runsc against the test network that scripts/test.sh builds as root (network
# namespace lztest-net behind the veth lzt-host, routed from the host
# namespace): an HTTP server on $LZ_TEST_HOST_DOC and $LZ_TEST_HOST_PRIV port
# $LZ_TEST_PORT answering "hello from <address>", and one on the host's
# 127.0.0.1:$LZ_TEST_LOOPBACK_PORT answering "host-loopback".
#
# The sandbox sees tap0 10.137.54.100/24, gateway 10.137.54.2, DNS
# 10.137.54.3; IPv4 is allowed except RFC 1918; [profiles.test.network]
# allow/deny add to that; IPv6 is off; the host's loopback is unreachable; the
# agent cannot change routes or links.
#
# The network tests need LZ_TEST_NET=1 and FAIL without it (the network is
# required, never skipped); each first checks that the host routes the test
# hosts over lzt-host, so no probe can leave the machine. The configuration
# refusal tests need no network.
# Inside the sandbox the probes use bash's /dev/tcp and busybox nc (which
# parses the decimal, hexadecimal and octal spellings of an address), each
# bounded by busybox timeout.
# The attestation tests need no test network; the fault test needs
# LAZARET_FAULTS, the test-only build with the fault switch.
# Needs: LAZARET, LAZARET_FAULTS, E2E_ROOT, python3, umoci, unshare, sqlite3.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net_lib.sh"

# --- policy ---------------------------------------------------------------------

test_default_profile() {
	need_net
	capture host_fetch "$PRIV" "$PORT"
	assert_contains "$OUT" "hello from $PRIV" "the private host from the host namespace"
	probe "section addr busybox ip -4 addr; section route busybox ip -4 route;
		section doc http $DOC $PORT; section priv http $PRIV $PORT"
	assert_match "$(iface_inet addr tap0)" '^10\.137\.54\.100/24$' "tap0's address"
	assert_match "$(section route)" '^default via 10\.137\.54\.2 ' "the default route"
	answers doc "$DOC"
	refused priv "hello from"
}

test_allow_private_prefix() {
	need_net
	network_profile "\"${PRIV%.*}.0/24\"" ""
	probe "section priv http $PRIV $PORT; section doc http $DOC $PORT"
	answers priv "$PRIV"
	answers doc "$DOC"
}

test_deny_documentation_prefix() {
	need_net
	network_profile "" "\"${DOC%.*}.0/24\""
	probe "section addr busybox ip -4 addr; section doc http $DOC $PORT"
	assert_match "$(iface_inet addr tap0)" '^10\.137\.54\.100/24$' "tap0's address"
	refused doc "hello from"
	# With the private host allowed too: that one answers, the denied one not.
	network_profile "\"${PRIV%.*}.0/24\"" "\"${DOC%.*}.0/24\""
	probe "section priv http $PRIV $PORT; section doc http $DOC $PORT"
	answers priv "$PRIV"
	refused doc "hello from"
}

test_host_loopback_unreachable() {
	need_net
	capture host_fetch 127.0.0.1 "$LOOPBACK_PORT"
	assert_contains "$OUT" "host-loopback" "the loopback server from the host namespace"
	probe "section loop http $GATEWAY $LOOPBACK_PORT; section loopnc nc_http $GATEWAY $LOOPBACK_PORT;
		section doc http $DOC $PORT"
	refused loop "host-loopback"
	refused loopnc "host-loopback"
	answers doc "$DOC"
}

test_other_spellings_of_a_denied_address() {
	need_net
	local s probes="" spellings=()
	spellings=("$(dotted_to_int "$PRIV")" "$(spell_hex "$PRIV")" "$(spell_oct "$PRIV")")
	# The same spellings of the allowed host reach it: nc parses them.
	for s in "$(dotted_to_int "$DOC")" "$(spell_hex "$DOC")" "$(spell_oct "$DOC")" "$DOC"; do
		probes+="section doc-$s nc_http $s $PORT; "
	done
	for s in "${spellings[@]}" "$PRIV"; do
		probes+="section priv-$s nc_http $s $PORT; "
	done
	probe "$probes"
	for s in "$(dotted_to_int "$DOC")" "$(spell_hex "$DOC")" "$(spell_oct "$DOC")" "$DOC"; do
		answers "doc-$s" "$DOC"
	done
	for s in "${spellings[@]}" "$PRIV"; do
		refused "priv-$s" "hello from"
	done
}

# No implicit host authority: the ranges that are not globally routable
# are denied by default, an explicit allow opens one, and the host's own
# addresses (a service on 0.0.0.0) are not reachable.
test_special_ranges_are_denied_by_default() {
	need_net
	local a probes=""
	for a in $SPECIAL; do
		capture host_fetch "$a" "$PORT"
		assert_contains "$OUT" "hello from $a" "$a from the host namespace"
		probes+="section s-$a http $a $PORT; "
	done
	probe "$probes section doc http $DOC $PORT; section route busybox ip -4 route"
	for a in $SPECIAL; do
		refused "s-$a" "hello from"
	done
	answers doc "$DOC"
	# every default deny is in the sandbox's own routing, into lo
	local p
	for p in 0.0.0.0/8 100.64.0.0/10 169.254.0.0/16 192.0.0.0/24 198.18.0.0/15 224.0.0.0/4 240.0.0.0/4; do
		assert_contains "$(section route)" "$p dev lo " "the sandbox's route of $p"
	done
}

test_an_explicit_allow_opens_a_special_range() {
	need_net
	local link cgnat ietf
	read -r link cgnat ietf _ <<<"$SPECIAL"
	network_profile "\"${link%%.*}.254.0.0/16\", \"$cgnat/32\"" ""
	probe "section link http $link $PORT; section cgnat http $cgnat $PORT; section ietf http $ietf $PORT"
	answers link "$link"
	answers cgnat "$cgnat"
	refused ietf "hello from"
}

# 0.0.0.0/8, 224.0.0.0/4 and 240.0.0.0/4: no test host can live there;
# nothing on the host answers through them.
test_unroutable_ranges_reach_no_host_service() {
	need_net
	capture host_fetch 127.0.0.1 "$LOOPBACK_PORT"
	assert_contains "$OUT" host-loopback
	probe "section zero http 0.0.0.0 $LOOPBACK_PORT; section zero5 http 0.0.0.5 $LOOPBACK_PORT;
		section zerohost http 0.0.0.5 $HOST_PORT; section mcast http 224.0.0.251 $HOST_PORT;
		section reserved http 240.0.0.1 $HOST_PORT"
	local s
	for s in zero zero5; do
		assert_not_contains "$(section "$s")" host-loopback "$s"
	done
	for s in zerohost mcast reserved; do
		assert_not_contains "$(section "$s")" host-service "$s"
	done
}

test_the_hosts_own_addresses_are_unreachable() {
	need_net
	[ -n "$HOST_OWN" ] || fail "LZ_TEST_HOST_OWN names none of the host's addresses"
	local a probes="" allow=""
	for a in $HOST_OWN; do
		capture host_fetch "$a" "$HOST_PORT"
		assert_contains "$OUT" host-service "the host service at $a from the host"
		probes+="section own-$a http $a $HOST_PORT; "
		allow+="${allow:+, }\"$a/32\""
	done
	probe "$probes section doc http $DOC $PORT"
	for a in $HOST_OWN; do
		refused "own-$a" host-service
	done
	answers doc "$DOC"
	# an explicit allow of an address opens it
	network_profile "$allow" ""
	probe "$probes"
	for a in $HOST_OWN; do
		assert_contains "$(section "own-$a")" host-service "own-$a with an explicit allow"
	done
}

# gVisor picks a route by the socket's device and source address as well
# as by its destination: a socket bound to tap0 (SO_BINDTODEVICE) or to
# tap0's address meets the same denies as any other (review, 2026-12-06).
# The documentation host, allowed, answers the same bound socket.
test_a_socket_bound_to_tap0_meets_the_denies() {
	need_net
	cc -static -O1 -o "$WS/bindconnect" "$FIX/bindconnect.c" || fail "cannot build the probe (cc -static)"
	local a probes=""
	for a in $SPECIAL $PRIV; do
		probes+="section dev-$a busybox timeout 4 /workspace/bindconnect $a $PORT -dev tap0; "
		probes+="section src-$a busybox timeout 4 /workspace/bindconnect $a $PORT 10.137.54.100; "
	done
	probe "$probes section doc-dev busybox timeout 4 /workspace/bindconnect $DOC $PORT -dev tap0;
		section doc-src busybox timeout 4 /workspace/bindconnect $DOC $PORT 10.137.54.100"
	for a in $SPECIAL $PRIV; do
		refused "dev-$a" "hello from"
		refused "src-$a" "hello from"
	done
	answers doc-dev "$DOC"
	answers doc-src "$DOC"
}

# --- inside the sandbox -------------------------------------------------------------

test_ipv6_is_off() {
	need_net
	probe "section addr busybox ip -4 addr; section route4 busybox ip -4 route;
		section addr6 busybox ip -6 addr; section route6 busybox ip -6 route"
	assert_match "$(iface_inet addr tap0)" '^10\.137\.54\.100/24$' "tap0's address (ip works)"
	assert_match "$(section route4)" '^default via 10\.137\.54\.2 ' "the IPv4 default route (ip works)"
	local name
	for name in addr6 route6; do
		assert_not_contains "$(section_err "$name")" "applet not found" "$name"
		# an error listing reads as nothing listed: it must have listed
		assert_eq 0 "$(section_status "$name")" "$name (stderr: $(section_err "$name"))"
	done
	# ip -6 addr prints addresses of the family only: ::1 is the one allowed.
	assert_eq "" "$(section addr6 | grep -E 'inet6? ' | grep -vE 'inet6 ::1/128( |$)' || true)" \
		"IPv6 addresses besides ::1"
	# ip -6 route: gVisor's route dump ignores the family, so IPv4 routes show
	# up too. A line is an IPv6 route if it has an IPv6 literal, or if `ip -4
	# route` lacks it; no such route may leave lo.
	assert_eq "" "$(v6_routes | grep -vE '(^|[[:space:]])dev lo([[:space:]]|$)' || true)" \
		"IPv6 routes besides loopback"
}

# v6_routes: the IPv6 routes of the sections route6 and route4 (see above).
v6_routes() {
	local line v4
	v4=$(section route4)
	while IFS= read -r line; do
		[ -n "${line//[[:space:]]/}" ] || continue
		if [[ $line =~ (^|[[:space:]])[0-9a-fA-F]*:[0-9a-fA-F:.]*(/[0-9]+)?([[:space:]]|$) ]] ||
			! grep -qxF -- "$line" <<<"$v4"; then
			printf '%s\n' "$line"
		fi
	done < <(section route6)
}

test_route_and_link_changes_fail() {
	need_net
	probe "section add busybox ip route add 1.2.3.0/24 dev tap0;
		section del busybox ip route del default;
		section down busybox ip link set tap0 down;
		section route busybox ip -4 route; section link busybox ip link show tap0;
		section doc http $DOC $PORT"
	local name
	for name in add del down; do
		section_failed "$name"
	done
	assert_match "$(section route)" '^default via 10\.137\.54\.2 ' "the default route after the attempts"
	assert_not_contains "$(section route)" "1.2.3.0" "routes after the attempts"
	assert_match "$(section link)" '<([^>]*,)?UP[,>]' "tap0 after the attempts"
	answers doc "$DOC"
}

# --- configuration refusals (no network needed) ------------------------------------

test_allow_inside_the_topology_is_refused() {
	local p
	for p in 10.137.55.0/24 10.137.54.0/24 10.137.54.100/32 10.137.0.0/16; do
		network_profile "\"$p\"" ""
		assert_status 78 lz config check --profile test --workspace "$WS"
		assert_contains "$ERR" "$p" "config check's message"
		assert_contains "$ERR" "10.137.54.0/23" "config check's message"
		assert_status 78 launch true
		assert_contains "$ERR" "$p" "the launch's message"
		assert_nothing_started
	done
}

test_equal_allow_and_deny_is_refused() {
	local allow deny
	for allow in "\"${PRIV%.*}.0/24\"" "\"${DOC%.*}.0/24\"" '"10.0.0.0/8"'; do
		deny=$allow
		[ "$allow" != '"10.0.0.0/8"' ] || deny="" # equal to the default RFC 1918 deny
		network_profile "$allow" "$deny"
		assert_status 78 lz config check --profile test --workspace "$WS"
		assert_contains "$ERR" "$(tr -d '"' <<<"$allow")" "config check's message"
		assert_status 78 launch true
		assert_contains "$ERR" "$(tr -d '"' <<<"$allow")" "the launch's message"
		assert_nothing_started
	done
}

# --- readiness attestation (spec 3.7; no test network needed) ------------------------

test_broken_predicate_refuses_readiness() {
	need_faults
	local case fault pred
	# Three predicates the init observes inside the sandbox, one of the RS.
	for case in "canary-open:denied canary unreachable" "ipv6-on:no non-loopback IPv6 address or route" \
		"sandbox-netadmin:empty network-admin capability" "keep-netadmin:RS capability dropped"; do
		fault=${case%%:*}
		pred=${case#*:}
		capture faulty_launch "$fault"
		assert_eq 69 "$STATUS" "status with fault $fault (stderr: $ERR)"
		assert_contains "$ERR" "network readiness refused: predicate '$pred' failed" "fault $fault"
		assert_start_undone
		assert_match "$(generation_row)" '^(failed|stopped)\|(intent|release|clean)\|$' \
			"the generation after fault $fault: no network readiness was recorded"
		assert_no_foreign_netns
	done
	# The switch is not in the production binary: the same setting changes nothing.
	LZ_ENV+=(LAZARET_TEST_FAULT=canary-open)
	capture launch true
	unset 'LZ_ENV[-1]'
	assert_eq 0 "$STATUS" "the production binary with LAZARET_TEST_FAULT set (stderr: $ERR)"
}

test_readiness_recorded_and_canary_gone() {
	# While a session runs: published, the network participant active with
	# its readiness fingerprint.
	(cd "$WS" && timeout -k 5 60 env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- sleep 4) \
		>"$T/bg.out" 2>&1 &
	local bg=$! row="" _
	for _ in $(seq 100); do
		row=$(generation_row 2>/dev/null) || row=""
		case $row in published*) break ;; esac
		sleep 0.1
	done
	assert_match "$row" '^published\|active\|[0-9a-f]{64}$' "the network participant while published"
	wait "$bg" || fail "the background session failed: $(cat "$T/bg.out")"
	assert_start_undone
	# After the stop the participant is clean (its evidence cleared).
	assert_match "$(generation_row)" '^stopped\|clean\|$' "the network participant after the stop"
	probe "section allowed busybox timeout 5 nc -w 2 10.137.55.2 7 </dev/null;
		section denied busybox timeout 5 nc -w 2 10.137.55.3 7 </dev/null;
		section caps grep CapBnd /proc/1/status"
	# The canary was removed before readiness: neither endpoint answers now.
	section_failed allowed # the formerly allowed canary did not answer
	section_failed denied
	local bnd
	bnd=$(section caps | awk '{ print $2 }')
	[ -n "$bnd" ] && [ $((0x$bnd & (1 << 12))) -eq 0 ] || fail "the init holds CAP_NET_ADMIN: $(section caps)"
	assert_start_undone
	assert_no_foreign_netns
}

t_run "default profile: the documentation host answers, the private one does not" test_default_profile
t_run "a socket bound to tap0 or its address meets the same denies" test_a_socket_bound_to_tap0_meets_the_denies
t_run "allow ${PRIV%.*}.0/24 reaches the private host" test_allow_private_prefix
t_run "deny ${DOC%.*}.0/24 blocks the documentation host" test_deny_documentation_prefix
t_run "the host's 127.0.0.1 is not reachable at the gateway" test_host_loopback_unreachable
t_run "decimal, hexadecimal and octal spellings of a denied address are denied" test_other_spellings_of_a_denied_address
t_run "link-local, CGNAT, IETF and benchmarking ranges are denied by default" test_special_ranges_are_denied_by_default
t_run "an explicit allow opens a special range" test_an_explicit_allow_opens_a_special_range
t_run "0.0.0.0/8, multicast and 240/4 reach no host service" test_unroutable_ranges_reach_no_host_service
t_run "the host's own addresses are unreachable unless allowed" test_the_hosts_own_addresses_are_unreachable
t_run "IPv6 is off: ip -6 addr and ip -6 route show only loopback" test_ipv6_is_off
t_run "ip route add/del and ip link set fail inside" test_route_and_link_changes_fail
t_run "a broken attestation predicate refuses readiness and leaves nothing" test_broken_predicate_refuses_readiness
t_run "readiness is recorded; the canary is gone before the agent runs" test_readiness_recorded_and_canary_gone
t_run "an allow inside 10.137.54.0/23 is refused before anything starts" test_allow_inside_the_topology_is_refused
t_run "an equal-prefix allow and deny is refused before anything starts" test_equal_allow_and_deny_is_refused
rm -rf "$IMG"
t_done
