# tests/e2e/lib.sh: a small TAP-style framework for Lazaret's end-to-end tests.
#
# Sourced by each tests/e2e/test_*.sh, which scripts/test.sh runs as the
# unprivileged test user. Output, parsed by scripts/test.sh:
#     ok 1 - name
#     not ok 2 - name
#     # <diagnostics of the failed test>
#     ok 3 - name # SKIP reason
#     1..3
#     # e2e: 1 passed, 1 failed, 1 skipped
# The file exits 0 only if no test failed; a file that ends without calling
# t_done, or that ran no test, counts as one more failure.
#
# Isolation: each test runs in a subshell whose working directory is a fresh
# private directory $T (mktemp -d under $HOME, else /tmp), removed afterwards,
# so no test sees another's files. Inside a test, `set -eE -u` holds: a failing
# command, an unset variable, or a failed assertion ends the test as failed,
# and a test that made no assertion fails too (a test must be able to fail).
# Call assertions at the top level of the test (not inside $(...) or a
# pipeline), where fail's `exit` ends the test.
#
# API
#   t_run NAME FUNCTION [ARGS...]   run FUNCTION ARGS as one test
#   t_setup                         if the file defines it, runs first in each test
#   t_teardown                      if the file defines it, runs after each test,
#                                   passed or failed (in a subshell, T set)
#   t_skip REASON                   end the current test as skipped
#   t_cleanup PATH                  remove PATH (outside $T) after the test
#   t_done                          end the file: plan, summary, exit status
#   in_ns CMD [ARGS...]             run CMD in a user namespace with Lazaret's ID
#                                   map (0 -> you, 1..65536 -> your subordinate
#                                   range), where subordinate-owned trees can be
#                                   read and removed
#   fail MESSAGE
#   assert_eq EXPECTED ACTUAL [WHAT]
#   assert_contains HAYSTACK NEEDLE [WHAT]
#   assert_not_contains HAYSTACK NEEDLE [WHAT]
#   assert_match HAYSTACK ERE [WHAT]         some line of HAYSTACK matches ERE
#   assert_status EXPECTED CMD [ARGS...]    run CMD; STATUS, OUT, ERR are set
#   capture CMD [ARGS...]                   same without asserting anything
# CMD may be a shell function; its stdin is /dev/null.

# T and the assertion counter live in each test's subshell by design.
# shellcheck disable=SC2030,SC2031,SC2034

set -uo pipefail

_t_count=0
_t_passed=0
_t_failed=0
_t_skipped=0
_t_finished=0
readonly _T_SKIP_STATUS=200

_t_base=${HOME:-}
if [ -z "$_t_base" ] || [ ! -d "$_t_base" ] || [ ! -w "$_t_base" ]; then
	_t_base=${TMPDIR:-/tmp}
fi
if ! _t_aux=$(mktemp -d "${TMPDIR:-/tmp}/lz-e2e-aux.XXXXXX"); then
	echo "Bail out! mktemp failed"
	echo "# e2e: 0 passed, 1 failed, 0 skipped"
	exit 1
fi

# Removes a tree even if a test left read-only directories in it.
_t_rmtree() {
	[ -e "$1" ] || [ -L "$1" ] || return 0
	chmod -R u+rwX -- "$1" 2>/dev/null
	rm -rf -- "$1"
}

_t_diag() {
	sed -e 's/^/# /' -e '200q' -- "$1"
	local n
	n=$(wc -l <"$1")
	[ "$n" -le 200 ] || echo "# ... ($((n - 200)) more lines)"
}

_t_finish() {
	local status=$?
	if [ "$_t_finished" -ne 1 ]; then
		_t_count=$((_t_count + 1))
		_t_failed=$((_t_failed + 1))
		echo "not ok $_t_count - ${0##*/} ended before t_done (exit status $status)"
	elif [ "$_t_count" -eq 0 ]; then
		_t_count=1
		_t_failed=1
		echo "not ok 1 - ${0##*/} ran no test"
	fi
	echo "1..$_t_count"
	echo "# e2e: $_t_passed passed, $_t_failed failed, $_t_skipped skipped"
	rm -rf -- "$_t_aux"
	if [ "$_t_failed" -eq 0 ]; then exit 0; else exit 1; fi
}
trap _t_finish EXIT

t_done() {
	_t_finished=1
	exit 0
}

_t_on_err() {
	echo "command failed with status $1 at ${BASH_SOURCE[1]##*/}:$2: $3" >&2
}

t_run() {
	local name=$1 fn=$2 dir rc
	shift 2
	# LZ_E2E_ONLY (developer use, scripts/test.sh passes it): only the
	# tests whose function name matches this extended regular expression.
	if [ -n "${LZ_E2E_ONLY:-}" ] && [[ ! $fn =~ $LZ_E2E_ONLY ]]; then
		return 0
	fi
	_t_count=$((_t_count + 1))
	: >"$_t_aux/cleanup"
	: >"$_t_aux/skip"
	local started=$EPOCHREALTIME
	if ! dir=$(mktemp -d "$_t_base/lz-e2e.XXXXXX"); then
		_t_failed=$((_t_failed + 1))
		echo "not ok $_t_count - $name"
		echo "# mktemp -d under $_t_base failed"
		return 0
	fi
	(
		cd "$dir" || exit 1
		T=$dir
		_t_asserts=0
		set -eEu
		trap '_t_on_err $? "$LINENO" "$BASH_COMMAND"' ERR
		if declare -F t_setup >/dev/null; then t_setup; fi
		"$fn" "$@"
		trap - ERR
		[ "$_t_asserts" -gt 0 ] || fail "the test made no assertion"
	) </dev/null >"$_t_aux/log" 2>&1
	rc=$?
	if declare -F t_teardown >/dev/null; then
		(cd "$dir" && T=$dir && t_teardown) </dev/null >>"$_t_aux/log" 2>&1
	fi
	local p
	while IFS= read -r p; do _t_rmtree "$p"; done <"$_t_aux/cleanup"
	_t_rmtree "$dir"
	if [ "$rc" -eq 0 ]; then
		_t_passed=$((_t_passed + 1))
		echo "ok $_t_count - $name"
	elif [ "$rc" -eq "$_T_SKIP_STATUS" ]; then
		_t_skipped=$((_t_skipped + 1))
		echo "ok $_t_count - $name # SKIP $(head -n 1 "$_t_aux/skip")"
	else
		_t_failed=$((_t_failed + 1))
		echo "not ok $_t_count - $name"
		_t_diag "$_t_aux/log"
	fi
	# What the test cost, teardown included (scripts/test.sh lists the
	# slowest): a TAP comment, after the result it belongs to.
	echo "# took $(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
	return 0
}

t_skip() {
	printf '%s\n' "$*" >"$_t_aux/skip"
	exit "$_T_SKIP_STATUS"
}

t_cleanup() {
	printf '%s\n' "$1" >>"$_t_aux/cleanup"
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# need_faults: the test breaks a step on purpose through the test-only
# build lazaret-faults (core/util/testfault.h), which LAZARET_FAULTS names.
need_faults() {
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS must name the test-only build lazaret-faults" \
		"(got '${LAZARET_FAULTS:-}')"
}

# slots_locked FILE: how many slots of a slots file (core/proc/lockslots.h:
# one locked byte each) are held now, from the ranges /proc/locks lists
# (the kernel merges a holder's adjacent bytes into one range).
slots_locked() {
	local ino
	ino=$(stat -c %i "$1") || return 1
	awk -v ino="$ino" '$2 == "OFDLCK" && $6 ~ (":" ino "$") { n += $8 - $7 + 1 } END { print n + 0 }' /proc/locks
}

# await_slots FILE N WHAT: waits up to 15 s for N held slots of FILE, then
# asserts that many are.
await_slots() {
	for _ in $(seq 150); do
		[ "$(slots_locked "$1" 2>/dev/null)" != "$2" ] || break
		sleep 0.1
	done
	assert_eq "$2" "$(slots_locked "$1")" "$3"
}

_t_assert() {
	_t_asserts=$((${_t_asserts:-0} + 1))
}

# Shows a possibly long value in a failure message.
_t_show() {
	local v=$1
	[ "${#v}" -le 2000 ] || v="${v:0:2000}... (${#v} bytes)"
	printf '%s' "$v"
}

assert_eq() {
	_t_assert
	[ "$1" = "$2" ] && return 0
	fail "${3:-value}: expected [$(_t_show "$1")], got [$(_t_show "$2")]"
}

assert_contains() {
	_t_assert
	case $1 in *"$2"*) return 0 ;; esac
	fail "${3:-output} does not contain [$2]:
$(_t_show "$1")"
}

assert_not_contains() {
	_t_assert
	case $1 in *"$2"*) fail "${3:-output} contains [$2]:
$(_t_show "$1")" ;; esac
	return 0
}

assert_match() {
	_t_assert
	grep -Eq -- "$2" <<<"$1" && return 0
	fail "${3:-output} has no line matching /$2/:
$(_t_show "$1")"
}

capture() {
	STATUS=0
	"$@" </dev/null >"$_t_aux/out" 2>"$_t_aux/err" || STATUS=$?
	OUT=$(cat -- "$_t_aux/out")
	ERR=$(cat -- "$_t_aux/err")
}

assert_status() {
	local expected=$1
	shift
	capture "$@"
	_t_assert
	[ "$STATUS" = "$expected" ] && return 0
	fail "$* exited $STATUS, expected $expected
--- stdout:
$(_t_show "$OUT")
--- stderr:
$(_t_show "$ERR")"
}

# The lowest subordinate range of at least 65536 IDs for this user in FILE.
_t_subid_start() {
	awk -F: -v u="$(id -un)" -v n="$(id -u)" '($1==u||$1==n) && $3>=65536 {print $2}' "$1" |
		sort -n | head -n 1
}

# end_domain [SECONDS]: after a test that ran a Domain, its processes end
# (within SECONDS, default 15, then killed) and the trees with
# subordinate-owned files go through the ID map. Always succeeds.
end_domain() {
	local _
	for _ in $(seq $((${1:-15} * 10))); do
		pgrep -u "$(id -u)" -f "$T/" >/dev/null || break
		sleep 0.1
	done
	pkill -9 -u "$(id -u)" -f "$T/" 2>/dev/null
	in_ns rm -rf "$T/data" "$T/run" 2>/dev/null
	return 0
}

in_ns() {
	unshare --map-root-user --map-users="$(_t_subid_start /etc/subuid),1,65536" \
		--map-groups="$(_t_subid_start /etc/subgid),1,65536" "$@"
}
