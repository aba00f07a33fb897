#!/usr/bin/env bash
# End-to-end tests of the control socket's TLS (issue 14; spec 3.3
# "Protocol cryptography refinement"): a real coordinator of a real
# sandbox, and ctlforge (tests/session/ctlforge.c), a process of the
# developer's UID that reads the published pin and tries what the
# coordinator must refuse. Each refusal has its line in hc.log and leaves
# the Domain Store as it was; the held session and the next launch still
# work.
# Needs: LAZARET, LAZARET_FAULTS, LZ_CTLFORGE, E2E_ROOT, python3, umoci,
# unshare, sqlite3.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/launch_lib.sh"

: "${LZ_CTLFORGE:?set LZ_CTLFORGE to the ctlforge test binary}"

HOLD_PID=""

# The Domain's IDs and runtime directory, from `config check`.
domain_ids() {
	capture lz config check --profile test --workspace "$WS"
	[ "$STATUS" = 0 ] || fail "config check: $ERR"
	DOMAIN=$(printf '%s\n' "$OUT" | sed -n 's/^ *domain id: *\([0-9a-f]\{64\}\) *$/\1/p')
	FPR=$(printf '%s\n' "$OUT" | sed -n 's/^ *fingerprint: *\([0-9a-f]\{64\}\) *$/\1/p')
	[ -n "$DOMAIN" ] && [ -n "$FPR" ] || fail "no domain id or fingerprint in: $OUT"
	RD=$T/run/lazaret/domains/$DOMAIN
	DB=$DATA/domains/$DOMAIN/domain.sqlite
}

# A session that holds the Domain published while the forger works.
hold() {
	# exec: $! is the CLI itself, which SIGTERM detaches (spec 3.4).
	(cd "$WS" && exec env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- sleep 300) >"$T/hold.out" 2>&1 &
	HOLD_PID=$!
	local i
	for i in $(seq 600); do
		[ -S "$RD/hc.sock" ] && [ -f "$RD/hc.pin" ] &&
			[ "$(sql -readonly "$DB" "SELECT count(*) FROM sessions WHERE state = 'running'" 2>/dev/null)" = 1 ] &&
			return 0
		sleep 0.1
	done
	fail "the holding session did not start: $(cat "$T/hold.out")"
}

release() {
	[ -n "$HOLD_PID" ] || return 0
	kill -TERM "$HOLD_PID" 2>/dev/null || true
	wait "$HOLD_PID" 2>/dev/null || true
	HOLD_PID=""
	local i
	for i in $(seq 300); do
		[ -S "$RD/hc.sock" ] || return 0
		sleep 0.1
	done
	fail "the coordinator did not withdraw its socket: $(tail -20 "$RD/hc.log")"
}

t_teardown() {
	release 2>/dev/null
	end_domain
}

# What the store holds: sessions and generations, with their states.
store_state() {
	sql -readonly "$DB" "SELECT 'g', generation, state FROM generations ORDER BY generation;
		SELECT 's', session_id, state FROM sessions ORDER BY session_id"
}

forge() {
	capture "$LZ_CTLFORGE" "$RD" "$DOMAIN" "$FPR" "$@"
	[ "$STATUS" = 0 ] || fail "ctlforge $*: $ERR"
}

# forge_refused REASON CASE...: refused, hc.log says why, the store is as
# it was, and the held session still answers to nobody else.
forge_refused() {
	local reason=$1 before log_before
	shift
	before=$(store_state)
	log_before=$(wc -l <"$RD/hc.log")
	forge "$@"
	assert_match "$OUT" '^refused' "ctlforge $* was not refused"
	local i
	for i in $(seq 50); do
		tail -n +"$((log_before + 1))" "$RD/hc.log" | grep -q "control connection refused: .*$reason" && break
		sleep 0.1
	done
	assert_contains "$(tail -n +"$((log_before + 1))" "$RD/hc.log")" "control connection refused:" "no reason in hc.log"
	assert_match "$(tail -n +"$((log_before + 1))" "$RD/hc.log")" "$reason" "hc.log's reason"
	assert_eq "$before" "$(store_state)" "the Domain Store changed"
}

# One generation: an honest enrollment is admitted, and every forgery is
# refused; then the next generation refuses the first one's leaf.
test_enrolled_admitted_and_forgeries_refused() {
	domain_ids
	hold
	# The pin holds certificates and the manifest, never a private key.
	[ "$(stat -c %a "$RD/hc.pin")" = 600 ] || fail "hc.pin mode $(stat -c %a "$RD/hc.pin")"
	forge enroll "$T/cred"
	assert_eq issued "$OUT"
	forge use "$T/cred"
	assert_eq admitted "$OUT" "an enrolled client's leaf"
	forge_refused "not admitted within" silent
	forge_refused "TLS handshake" plain
	forge_refused "TLS handshake" tls12
	forge_refused "certificate" wrong-ca
	forge_refused "replayed enrollment" replay
	forge_refused "an enrollment of 8193 bytes" oversize
	forge_refused "an operation on an enrollment connection" enroll-then-op
	# The CLI itself, beside the held session, after all that.
	capture launch echo over-tls
	assert_eq 0 "$STATUS" "a launch beside the held session (stderr: $ERR)"
	assert_eq over-tls "$OUT"
	local gen1
	gen1=$(sql -readonly "$DB" "SELECT max(generation) FROM generations")
	release
	[ ! -e "$RD/hc.pin" ] || fail "the pin outlived the publication"
	hold
	[ "$(sql -readonly "$DB" "SELECT max(generation) FROM generations")" -gt "$gen1" ] ||
		fail "no new generation"
	forge_refused "certificate" use "$T/cred"
}

# refused_with_fault FAULT CLI_SAYS LOG_SAYS: a launch through
# lazaret-faults whose coordinator has LAZARET_TEST_FAULT=FAULT fails: the
# CLI says CLI_SAYS, hc.log's refusal says LOG_SAYS, the command did not
# run and no session is recorded.
refused_with_fault() {
	need_faults
	domain_ids
	capture bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" env -i "${LZ_ENV[@]}" \
		LAZARET_TEST_FAULT="$1" timeout -k 5 120 "$LAZARET_FAULTS" test --config "$CFG" -- echo ran
	[ "$STATUS" != 0 ] || fail "a launch with fault $1 succeeded"
	assert_not_contains "$OUT" "ran"
	assert_contains "$ERR" "$2"
	assert_contains "$(cat "$RD/hc.log")" "control connection refused:"
	assert_match "$(grep 'control connection refused:' "$RD/hc.log")" "$3"
	assert_eq 0 "$(sql -readonly "$DB" 'SELECT count(*) FROM sessions')" "sessions recorded"
	# Its coordinator serves on, up to 30 s, for a session that will not
	# come (LZ_HC_IDLE_GRACE_MS): ended now.
	end_domain 0
}

# This coordinator issues leaves that ended an hour ago.
test_expired_leaf_refused() {
	refused_with_fault enroll-expired expired expired
}

# This coordinator's CA issues client leaves for the server purpose only.
test_server_purpose_leaf_refused() {
	refused_with_fault enroll-server-purpose refused purpose
}

t_run "an enrolled client is admitted; a silent connection, plain, TLS 1.2, another CA, a replayed, an oversized (8,193-byte) enrollment, an operation on an enrollment connection and another generation's leaf are refused" test_enrolled_admitted_and_forgeries_refused
t_run "an expired leaf is refused" test_expired_leaf_refused
t_run "a client leaf for the server purpose only is refused" test_server_purpose_leaf_refused
t_done
