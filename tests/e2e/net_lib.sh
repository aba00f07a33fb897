# The sandbox-network helpers of tests/e2e/test_network.sh and
# test_egress.sh: one offline test image, the profile and probe library, the
# probe sections and their checks, and the start and attestation checks.
# Sourced after lib.sh; the test network itself is scripts/test.sh's.
# shellcheck shell=bash disable=SC2031,SC2317,SC2034

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
	section_failed "$1"
	assert_not_contains "$(section "$1")" "$2" "$1"
}

# section_failed NAME: section NAME ran, its command was there, and it
# exited non-zero (a missing section or applet is no refusal).
section_failed() {
	local st
	st=$(section_status "$1")
	[ -n "$st" ] || fail "no section $1 in the probe output:
$OUT"
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

# faulty_launch FAULT [ARGS...]: `lazaret test -- ARGS` (default `true`) with
# the test-only build (lazaret-faults, CMakeLists.txt) and its fault switch
# set to FAULT.
faulty_launch() {
	local fault=$1
	shift
	[ $# -gt 0 ] || set -- true
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT="$fault" "$LAZARET_FAULTS" test \
		--config "$CFG" -- "$@")
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

