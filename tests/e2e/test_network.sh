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

: "${LAZARET:?set LAZARET to the lazaret binary}"
: "${E2E_ROOT:?set E2E_ROOT to the e2e directory}"
FIX=$E2E_ROOT/fixtures

DOC=${LZ_TEST_HOST_DOC:-198.51.100.10}
PRIV=${LZ_TEST_HOST_PRIV:-10.250.0.10}
PORT=${LZ_TEST_PORT:-8080}
LOOPBACK_PORT=${LZ_TEST_LOOPBACK_PORT:-8081}
# one test host per special range denied by default, and a server on the
# host's 0.0.0.0:HOST_PORT ("host-service") reachable at each of the host's
# own addresses HOST_OWN
SPECIAL=${LZ_TEST_HOST_SPECIAL:-169.254.10.10 100.64.0.10 192.0.0.10 198.18.0.10}
HOST_PORT=${LZ_TEST_HOST_PORT:-8082}
HOST_OWN=${LZ_TEST_HOST_OWN:-}
GATEWAY=10.137.54.2
HOST_IF=lzt-host
if [ "${LZ_TEST_NET:-}" != 1 ]; then
	echo "# LZ_TEST_NET is not 1: the test network is missing, so the network tests fail."
	echo "# Run the suite as root through scripts/test.sh, which builds it."
fi

# One offline image with busybox (nc, ip, timeout) and bash for the whole file.
IMG=$(mktemp -d "${TMPDIR:-/tmp}/lz-net-img.XXXXXX")
python3 "$FIX/make_test_image.py" "$IMG/img" latest --with-git >/dev/null || {
	echo "Bail out! cannot build the test image"
	exit 1
}

t_setup() {
	mkdir -m 0700 "$T/home" "$T/run"
	mkdir "$T/ws"
	WS=$(realpath "$T/ws")
	DATA=$T/data
	CFG=$T/config.toml
	write_profile
	write_probe
	LZ_ENV=("HOME=$T/home" "USER=$(id -un)" "PATH=/usr/local/bin:/usr/bin:/bin"
		"XDG_RUNTIME_DIR=$T/run")
	[ -z "${LZ_TEST_RUN:-}" ] || LZ_ENV+=("LZ_TEST_RUN=$LZ_TEST_RUN")
	capture lz image prepare "oci:$IMG/img:latest"
	[ "$STATUS" = 0 ] || fail "image prepare: $ERR"
}

# EXTRA: more TOML after [profiles.test] (for example its network table).
write_profile() {
	printf 'version = 1\n[storage]\ndata_root = "%s"\n[profiles.test]\nimage = "oci:%s/img:latest"\n%s' \
		"$DATA" "$IMG" "${EXTRA:-}" >"$CFG"
	chmod 0600 "$CFG"
}

# network_profile ALLOW DENY: the profile with [profiles.test.network]; each
# argument is the inside of a TOML array, for example '"10.250.0.0/24"'.
network_profile() {
	EXTRA="[profiles.test.network]
allow = [$1]
deny = [$2]
" write_profile
}

# The probe library, seen inside at /workspace/probe.sh. `section NAME CMD...`
# prints "== NAME", CMD's stdout, its stderr as "!! " lines and
# "-- status N".
write_probe() {
	cat >"$WS/probe.sh" <<-'EOF'
		section() {
			local name=$1 st=0 line
			shift
			echo "== $name"
			"$@" 2>/tmp/probe.err || st=$?
			while IFS= read -r line; do echo "!! $line"; done </tmp/probe.err
			echo "-- status $st"
		}
		# http ADDR PORT: GET / over bash's /dev/tcp.
		http() {
			busybox timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
				http "$1" "$2"
		}
		# nc_http ADDR PORT: GET / with busybox nc, which accepts any inet_aton spelling.
		nc_http() {
			printf 'GET / HTTP/1.0\r\n\r\n' | busybox timeout 5 nc -w 2 "$1" "$2"
		}
	EOF
}

lz() {
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" "$@" --config "$CFG")
}

# launch ARGS...: `lazaret test -- ARGS` in the workspace.
launch() {
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- "$@")
}

# probe SCRIPT: runs SCRIPT (bash, with probe.sh's functions) inside; the
# sections are in $OUT.
probe() {
	capture launch bash -c ". /workspace/probe.sh; $1"
	assert_eq 0 "$STATUS" "the probe launch's status (stderr: $ERR)"
	assert_contains "$OUT" "-- status" "probe output"
}

# section NAME: that section's stdout (without stderr lines) in $OUT.
section() {
	awk -v n="== $1" '$0 == n { on = 1; next } on && /^-- status / { exit } on && !/^!! / { print }' <<<"$OUT"
}

# section_err NAME: that section's stderr.
section_err() {
	awk -v n="== $1" '$0 == n { on = 1; next } on && /^-- status / { exit } on && /^!! / { print }' <<<"$OUT"
}

# section_status NAME: that section's exit status ("" if the section is missing).
section_status() {
	awk -v n="== $1" '$0 == n { on = 1; next } on && /^-- status / { print $3; exit }' <<<"$OUT"
}

# iface_inet NAME IFACE: the IPv4 addresses listed under IFACE in the `ip addr`
# output of section NAME (gVisor prints no label after the address).
iface_inet() {
	section "$1" | awk -v want="$2" '
		/^[0-9]+: / { cur = $2; sub(/:$/, "", cur); sub(/@.*/, "", cur); next }
		cur == want && $1 == "inet" { print $2 }'
}

# answers NAME ADDR: the section reached the test host at ADDR.
answers() {
	assert_eq 0 "$(section_status "$1")" "status of $1 (stderr: $(section_err "$1"))"
	assert_contains "$(section "$1")" "hello from $2" "$1"
}

# refused NAME WHAT: the section got no answer from any test host.
refused() {
	local st
	st=$(section_status "$1")
	[ -n "$st" ] || fail "no section $1 in the probe output:
$OUT"
	assert_not_contains "$(section "$1")" "$2" "$1"
	assert_not_contains "$(section_err "$1")" "applet not found" "$1"
	[ "$st" != 0 ] || fail "$1 exited 0 (output: $(section "$1"))"
}

# The network is required: fail (never skip) without it, and refuse to probe
# unless the host routes the test hosts over the test veth, so nothing sent to
# them can leave the machine.
need_net() {
	[ "${LZ_TEST_NET:-}" = 1 ] || fail "the test network is required (LZ_TEST_NET='${LZ_TEST_NET:-}'):" \
		"run the suite as root through scripts/test.sh, which builds lztest-net and sets LZ_TEST_NET=1"
	local ip a
	ip=$(PATH=$PATH:/usr/sbin:/sbin command -v ip) || fail "ip (iproute2) is not installed"
	for a in "$DOC" "$PRIV"; do
		"$ip" -4 route get "$a" 2>/dev/null | grep -q " dev $HOST_IF " ||
			fail "the host does not route $a over $HOST_IF: $("$ip" -4 route get "$a" 2>&1)"
	done
}

# host_fetch ADDR PORT: GET / from this (host) namespace.
host_fetch() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout -k 1 5 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
		host_fetch "$1" "$2"
}

# dotted_to_int ADDR; spell_hex ADDR; spell_oct ADDR.
dotted_to_int() {
	local a b c d
	IFS=. read -r a b c d <<<"$1"
	echo $(((a << 24) | (b << 16) | (c << 8) | d))
}
spell_hex() { printf '0x%08x' "$(dotted_to_int "$1")"; }
spell_oct() {
	local a b c d
	IFS=. read -r a b c d <<<"$1"
	printf '0%o.0%o.0%o.0%o' "$a" "$b" "$c" "$d"
}

# No Domain was started: no process under $T, no mount, no runtime directory.
assert_nothing_started() {
	assert_no_processes_or_mounts 50
	assert_eq "" "$(ls -A "$T/run/lazaret/domains" 2>/dev/null)" "runtime directory left behind"
}

# assert_no_processes_or_mounts N: within N tenths of a second no process
# under $T is left, and then no mount under $T either.
assert_no_processes_or_mounts() {
	local _
	for _ in $(seq "$1"); do
		pgrep -u "$(id -u)" -f "$T/" >/dev/null || break
		sleep 0.1
	done
	assert_eq "" "$(pgrep -u "$(id -u)" -af "$T/")" "processes left behind"
	assert_not_contains "$(cat /proc/self/mountinfo)" "$T/" "mounts left behind"
}

# After every test: the Domain's processes end (bounded), then the trees
# with subordinate-owned files go through the ID map.
t_teardown() {
	end_domain
}

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
		assert_not_contains "$(section_err "$name")" "applet not found" "$name"
		[ "$(section_status "$name")" != 0 ] || fail "$name succeeded:
$OUT"
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

# faulty_launch FAULT: `lazaret test -- true` with the test-only build
# (lazaret-faults, CMakeLists.txt) and its fault switch set to FAULT.
faulty_launch() {
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT="$1" "$LAZARET_FAULTS" test \
		--config "$CFG" -- true)
}

# generation_row: "state|network phase|readiness fingerprint" of the Domain's
# newest generation (its network participant, spec 3.6 and FR-19).
generation_row() {
	local db
	for db in "$DATA"/domains/*/domain.sqlite; do break; done
	[ -f "$db" ] || fail "no domain.sqlite under $DATA/domains"
	sqlite3 -readonly -cmd '.timeout 2000' "$db" "select g.state, ifnull(p.phase, ''), ifnull(p.network_ready, '')
		from generations g left join participants p on p.generation = g.generation and p.role = 'network'
		order by g.generation desc limit 1;"
}

# A refused start, or a Domain after its last session, leaves no process,
# no mount, and nothing in the runtime directory but its lock and log.
assert_start_undone() {
	assert_no_processes_or_mounts 100
	assert_eq "" "$(ls -A "$T/run/lazaret/domains/"*/ 2>/dev/null | grep -v -e '^hc.lock$' -e '^hc.log$' -e '^$' -e ':$')" \
		"runtime directory left behind"
}

# No process of this user is in a network namespace other than ours: the
# RS's enforcement namespace and the canary's peer namespace are gone.
assert_no_foreign_netns() {
	local mine p ns
	mine=$(readlink /proc/self/ns/net)
	for p in $(pgrep -u "$(id -u)"); do
		ns=$(readlink "/proc/$p/ns/net" 2>/dev/null) || continue
		[ "$ns" = "$mine" ] || fail "process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)) is in $ns"
	done
	assert_not_contains "$(ip -o link 2>&1)" "lzcanary" "canary links in the host namespace"
}

test_broken_predicate_refuses_readiness() {
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS must name the test-only build lazaret-faults" \
		"(got '${LAZARET_FAULTS:-}')"
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
	[ "$(section_status allowed)" != 0 ] || fail "the formerly allowed canary answered: $OUT"
	[ "$(section_status denied)" != 0 ] || fail "the denied canary answered: $OUT"
	local bnd
	bnd=$(section caps | awk '{ print $2 }')
	[ -n "$bnd" ] && [ $((0x$bnd & (1 << 12))) -eq 0 ] || fail "the init holds CAP_NET_ADMIN: $(section caps)"
	assert_start_undone
	assert_no_foreign_netns
}

t_run "default profile: the documentation host answers, the private one does not" test_default_profile
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
