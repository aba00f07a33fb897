#!/usr/bin/env bash
# End-to-end tests of Host Escalation (issue 12, spec 3.8): the agent asks
# with lazaret-escalate inside a real sandbox, the developer answers in a
# real terminal (tmux), the host runs exactly that argument vector as the
# test user. escforge (tests/escalation/escforge.c) plays the compromised
# sandbox: it holds the request key and writes what it likes.
# Needs: LAZARET, LZ_ESCFORGE, E2E_ROOT, tmux, python3, umoci, unshare.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/tmux_lib.sh"

: "${LAZARET:?set LAZARET to the lazaret binary}"
: "${LZ_ESCFORGE:?set LZ_ESCFORGE to the escforge test binary}"
: "${E2E_ROOT:?set E2E_ROOT to the e2e directory}"
FIX=$E2E_ROOT/fixtures

IMG=$(mktemp -d "${TMPDIR:-/tmp}/lz-esc-img.XXXXXX")
python3 "$FIX/make_test_image.py" "$IMG/img" latest --with-git >/dev/null || {
	echo "Bail out! cannot build the test image"
	exit 1
}

t_setup() {
	mkdir -m 0700 "$T/home" "$T/run" "$T/runs" "$T/runt"
	mkdir "$T/ws"
	WS=$(realpath "$T/ws")
	RUNS=$T/runs # where auto-approved host commands leave their mark
	DAEMON=$((500 + RANDOM % 100)) # the seconds of a detached host sleep
	DATA=$T/data
	CFG=$T/config.toml
	cat >"$CFG" <<-EOT
		version = 1
		[storage]
		data_root = "$DATA"
		[profiles.test]
		image = "oci:$IMG/img:latest"
		[[profiles.test.escalation.auto_approve]]
		executable = "/usr/bin/mktemp"
		args = ["-p", "$RUNS"]
		[[profiles.test.escalation.auto_approve]]
		executable = "/usr/bin/mktemp"
		args = ["-p", "$T/runt"]
		[[profiles.test.escalation.auto_approve]]
		executable = "/usr/bin/ls"
		args = ["$T/absent"]
		[[profiles.test.escalation.auto_approve]]
		executable = "/usr/bin/head"
		args = ["-c", "10485760", "/dev/zero"]
		[[profiles.test.escalation.auto_approve]]
		executable = "/usr/bin/sleep"
		args = ["$((300 + RANDOM % 100))"]
		[[profiles.test.escalation.auto_approve]]
		executable = "/usr/bin/prlimit"
		args = ["--nofile", "--output", "SOFT", "--noheadings"]
		[[profiles.test.escalation.auto_approve]]
		executable = "/usr/bin/setsid"
		args = ["-f", "/usr/bin/sleep", "$DAEMON"]
		[profiles.test.env]
		LZ_E2E_PASSED = "LZ_E2E_PASSED"
	EOT
	chmod 0600 "$CFG"
	SLEEP=$(sed -n 's/^args = \["\([0-9]*\)"\]$/\1/p' "$CFG")
	cp "$LZ_ESCFORGE" "$WS/escforge"
	ENVV=(env -i "HOME=$T/home" "USER=$(id -un)" "PATH=/usr/local/bin:/usr/bin:/bin"
		"XDG_RUNTIME_DIR=$T/run" "TERM=screen")
	# Two secrets of the developer's: one the profile passes in, one it
	# does not (test_the_supervisor_keeps_no_developer_secret).
	PASSED=passed-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
	UNUSED=unused-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
	ENVV+=("LZ_E2E_PASSED=$PASSED" "LZ_E2E_UNUSED=$UNUSED")
	[ -z "${LZ_TEST_RUN:-}" ] || ENVV+=("LZ_TEST_RUN=$LZ_TEST_RUN")
	capture "${ENVV[@]}" "$LAZARET" image prepare "oci:$IMG/img:latest" --config "$CFG"
	[ "$STATUS" = 0 ] || fail "image prepare: $ERR"
}

t_teardown() {
	tmux_stop
	end_domain # ends hang_fuse.py too (its argument is beneath $T)
	fusermount3 -uz "$T/hung" 2>/dev/null || true
}

# guest SCRIPT: runs sh -c SCRIPT in a session without a terminal.
guest() {
	(cd "$WS" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" test --config "$CFG" -- sh -c "$1")
}

hclog() { cat "$T/run/lazaret/domains/"*/hc.log; }
runs() { find "$RUNS" -type f | wc -l; }

# Host processes of this test still running: their command lines name $T.
assert_no_host_process() {
	local _
	for _ in $(seq 50); do
		pgrep -u "$(id -u)" -f "^/usr/bin/sleep $SLEEP\$" >/dev/null || return 0
		sleep 0.1
	done
	fail "a host command outlived its request: $(pgrep -u "$(id -u)" -af "sleep $SLEEP")"
}

# Spec 3.3: the sandbox holds its request key through a file mount whose
# host name is gone once it runs; credentials, inbox and client are
# read-only; no other private key is there.
test_the_sandbox_key_lives_only_in_the_sandbox() {
	# shellcheck disable=SC2016 # expanded by the sandbox's shell
	(cd "$WS" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" test --config "$CFG" -- sh -c '
		wc -c < /run/lazaret/credential/request-key > /workspace/keysize
		ls /run/lazaret/credential > /workspace/credentials
		for p in /run/lazaret/credential/x /run/lazaret/escalation/inbox/x /run/lazaret/credential/request-key; do
			touch $p 2>/dev/null && echo "wrote $p"
		done > /workspace/writes
		rm -f /run/lazaret/bin/lazaret-escalate 2>/dev/null && echo removed >> /workspace/writes
		tr "\\000-\\377" "\\001-\\377\\000" < /run/lazaret/credential/request-key > /workspace/key
		touch /workspace/ready
		for i in $(seq 300); do [ -e /workspace/scanned ] && break; sleep 0.1; done') &
	local cli=$!
	for _ in $(seq 100); do [ -e "$WS/ready" ] && break; sleep 0.1; done
	[ -e "$WS/ready" ] || fail "the session never got ready"
	# Spec 3.3: once the sandbox holds its key, no host process of
	# Lazaret's does (the coordinator dropped it; the Runtime Supervisor,
	# a fork of the coordinator, forgot every key before it ran). runsc's
	# processes hold the sandbox's memory, which is where the key lives.
	# The key crosses /workspace shifted by one (mod 256), so that the
	# router's buffers do not hold it.
	local pids scan
	pids=$(pgrep -u "$(id -u)" '^(lazaret.*|lz-.*)$' | tr '\n' ' ')
	# shellcheck disable=SC2086 # one argument per PID
	scan=$(python3 "$FIX/memscan.py" "$(tr '\001-\377\000' '\000-\377' <"$WS/key" | od -An -v -tx1 | tr -d ' \n')" $pids)
	touch "$WS/scanned"
	echo "# $scan" | tr '\n' ' '; echo
	assert_contains "$scan" "lz-supervisor clean"
	[ "$(grep -c ' lazaret clean$' <<<"$scan")" -ge 2 ] || fail "the CLI and the coordinator were not both read: $scan"
	assert_eq "" "$(grep -v -e ' clean$' -e ' exited$' <<<"$scan")" "processes holding the sandbox's key"
	local keydir
	keydir=$(echo "$T/run/lazaret/domains/"*/gen-*/escalation/key)
	[ -d "$keydir" ] || fail "no key directory at $keydir"
	assert_eq "" "$(ls -A "$keydir")" "the key's host name after start"
	wait "$cli" || fail "the session failed"
	assert_eq 32 "$(tr -d ' ' <"$WS/keysize")" "key size inside"
	assert_eq "coordinator
request-key
sandbox
trust-manifest" "$(cat "$WS/credentials")"
	assert_eq "" "$(cat "$WS/writes")" "writes to read-only escalation paths"
	# Nothing of the generation's keys outlives it.
	for _ in $(seq 100); do pgrep -u "$(id -u)" -f "$T/" >/dev/null || break; sleep 0.1; done
	assert_eq "" "$(ls -d "$T/run/lazaret/domains/"*/gen-* 2>/dev/null)" "generation tree after the end"
}

# Spec 3.3: the Runtime Supervisor (in the sandbox's user namespace) and a
# session's exec client are forks of the coordinator; they keep nothing of
# the developer's environment but what they use, and none of the profile's
# environment values (those reach the sandbox in the session's own process
# spec, which the exec client holds for its session).
test_the_supervisor_keeps_no_developer_secret() {
	# shellcheck disable=SC2016 # expanded by the sandbox's shell
	(cd "$WS" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" test --config "$CFG" -- sh -c '
		printf %s "$LZ_E2E_PASSED" > /workspace/passed
		touch /workspace/ready
		for i in $(seq 300); do [ -e /workspace/scanned ] && break; sleep 0.1; done') &
	local cli=$!
	for _ in $(seq 100); do [ -e "$WS/ready" ] && break; sleep 0.1; done
	[ -e "$WS/ready" ] || fail "the session never got ready"
	local pids unused passed
	pids=$(pgrep -u "$(id -u)" '^(lazaret.*|lz-.*)$' | tr '\n' ' ')
	# What they keep stays where /proc shows it: the harness finds a
	# leaked process by its LZ_TEST_RUN (scripts/test.sh).
	local rs
	rs=$(pgrep -u "$(id -u)" '^lz-supervisor$' | head -n 1)
	if [ -n "${LZ_TEST_RUN:-}" ]; then
		tr '\0' '\n' <"/proc/$rs/environ" | grep -qxF "LZ_TEST_RUN=$LZ_TEST_RUN" ||
			fail "the supervisor's /proc/$rs/environ lost LZ_TEST_RUN"
	fi
	# shellcheck disable=SC2086 # one argument per PID
	unused=$(python3 "$FIX/memscan.py" --text "$UNUSED" $pids)
	# shellcheck disable=SC2086
	passed=$(python3 "$FIX/memscan.py" --text "$PASSED" $pids)
	# Spec 3.3: the session's process document (its environment values)
	# is gone once the guest runs, not kept until the session ends.
	local kept=
	for _ in $(seq 30); do
		kept=$(grep -rlF -- "$PASSED" "$T/run" 2>/dev/null) || break
		sleep 0.1
	done
	touch "$WS/scanned"
	assert_eq "" "$kept" "runtime files holding the profile's variable while the session runs"
	echo "# unused: $unused" | tr '\n' ' '; echo
	echo "# passed: $passed" | tr '\n' ' '; echo
	wait "$cli" || fail "the session failed"
	assert_eq "$PASSED" "$(cat "$WS/passed")" "the profile's variable in the sandbox"
	# The scan finds what is there: the CLI holds its own environment.
	grep -q ' lazaret holds$' <<<"$unused" || fail "no process holds the unused secret: $unused"
	assert_contains "$unused" "lz-supervisor clean"
	assert_contains "$passed" "lz-supervisor clean"
	assert_eq "" "$(grep -E ' lz-[^ ]+ (holds|unreadable)$' <<<"$unused")" "forks of the coordinator holding the developer's environment"
}

test_auto_approve_runs_exactly_the_rule() {
	capture guest "lazaret-escalate --why 'make a file' -- /usr/bin/mktemp -p $RUNS; echo status=\$?"
	assert_contains "$OUT" "status=0"
	assert_eq 1 "$(runs)" "host runs"
	# The host command's own stdout reached the guest: the host path it made.
	assert_contains "$OUT" "$(find "$RUNS" -type f)"
	# Its stderr and exit status too.
	capture guest "lazaret-escalate -- /usr/bin/ls $T/absent; echo status=\$?"
	assert_contains "$OUT" "status=2"
	assert_contains "$ERR" "No such file or directory"
	assert_contains "$(hclog)" "host process exited 2"
	# Spec 3.8: each ran only after the Domain Store recorded it; both
	# records ended with their processes.
	local db
	db=$(echo "$DATA"/domains/*/domain.sqlite)
	assert_eq "auto_approved ended
auto_approved ended" "$(sqlite3 -readonly -cmd '.timeout 5000' "$db" 'SELECT verdict, state FROM escalations ORDER BY created' | tr '|' ' ')" \
		"escalation records"
}

test_near_misses_are_not_auto_approved() {
	local variant
	mkdir "$T/links"
	ln -s /usr/bin/mktemp "$T/links/mktemp"
	for variant in "/usr/bin/mktemp -p $RUNS -u" "/usr/bin/mktemp -p $RUNS/" "/usr/bin/../bin/mktemp -p $RUNS" \
		"/bin/mktemp -p $RUNS" "$T/links/mktemp -p $RUNS" "//usr/bin/mktemp -p $RUNS" "/usr/bin/mktemp"; do
		capture guest "lazaret-escalate -- $variant; echo status=\$?"
		assert_contains "$OUT" "status=77" "$variant"
		assert_contains "$ERR" "no auto_approve rule matches the command exactly" "$variant"
	done
	assert_eq 0 "$(runs)" "host runs after near misses"
}

test_forged_and_malformed_records_are_refused() {
	# All at once in one session: each forger waits 5 s for an answer.
	local modes="zero-sig wrong-key other-gen forged-cap trailing oversize" mode
	capture guest "for m in $modes; do /workspace/escforge \$m -- /usr/bin/mktemp -p $RUNS >/tmp/\$m 2>&1 & done
		wait; for m in $modes; do echo \"\$m: \$(cat /tmp/\$m)\"; done"
	for mode in $modes; do
		assert_contains "$OUT" "$mode: no answer" "$mode"
	done
	assert_not_contains "$OUT" "decision"
	assert_eq 0 "$(runs)" "host runs after forgeries"
	local log
	log=$(hclog)
	assert_contains "$log" "not signed by this generation's sandbox key"
	assert_contains "$log" "of another Domain or generation"
	assert_contains "$log" "its session capability is not the coordinator's"
	assert_contains "$log" "malformed"
	assert_contains "$log" "more than 65536"
	# The same tool, signing honestly, is answered: the refusals above are
	# the coordinator's checks, not a broken forger.
	capture guest "/workspace/escforge genuine -- /usr/bin/mktemp -p $RUNS"
	assert_contains "$OUT" "decision: auto-approved"
	assert_eq 1 "$(runs)" "host runs after the genuine request"
}

test_a_replayed_request_runs_once() {
	capture guest "/workspace/escforge replay -- /usr/bin/mktemp -p $RUNS"
	assert_contains "$OUT" "decision: auto-approved"
	assert_contains "$OUT" "replayed"
	assert_eq 1 "$(runs)" "host runs after a replay"
	assert_contains "$(hclog)" "refused: replayed"
	local db
	db=$(echo "$DATA"/domains/*/domain.sqlite)
	assert_eq 1 "$(sqlite3 -readonly -cmd '.timeout 5000' "$db" 'SELECT count(*) FROM escalations')" "escalation records after a replay"
}

# The bytes the coordinator verifies are the bytes it acts on: a request
# rewritten in place after its rename (through a descriptor the sandbox
# kept) is either the genuine one or refused, never the rewritten one.
test_a_request_rewritten_after_its_rename_never_runs_rewritten() {
	capture guest "/workspace/escforge swap -- /usr/bin/mktemp -p $RUNS"
	assert_eq "swapped 50" "$OUT"
	assert_eq 0 "$(find "$T/runt" -type f | wc -l)" "rewritten requests that ran"
	[ "$(runs)" -le 50 ] || fail "more runs than requests: $(runs)"
	echo "# $(runs) of 50 read before the rewrite, the rest refused"
}

test_junk_in_the_outbox_is_refused() {
	local out=/run/lazaret/escalation/outbox
	capture guest "ln -s /etc/passwd $out/symlink; mkfifo $out/fifo; echo x > $out/.h; ln $out/.h $out/hardlink;
		mkdir $out/dir; head -c 70000 /dev/zero > $out/.big; mv $out/.big $out/big; sleep 1;
		lazaret-escalate -- /usr/bin/mktemp -p $RUNS >/dev/null; echo status=\$?"
	assert_contains "$OUT" "status=0"
	assert_eq 1 "$(runs)" "the genuine request after the junk"
	local log
	log=$(hclog)
	assert_contains "$log" "escalation entry symlink: a symlink"
	# gVisor keeps a FIFO made inside in its own memory: the host never
	# sees it (tests/escalation/test_mailbox.c covers a host FIFO); it
	# must not stall the mailbox either, which the request above shows.
	assert_not_contains "$log" "escalation entry fifo"
	assert_contains "$log" "escalation entry hardlink: has 2 links"
	assert_contains "$log" "escalation entry dir: not a regular file"
	assert_contains "$log" "escalation entry big: 70000 bytes"
}

# Peak resident memory of this test's coordinator, in kB.
hc_hwm() {
	local pid
	pid=$(pgrep -u "$(id -u)" -f "__hc.*$CFG" | head -n 1)
	[ -n "$pid" ] || pid=$(pgrep -u "$(id -u)" -x "$(basename "$LAZARET" | cut -c1-15)" | head -n 1)
	awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status"
}

test_ten_mib_stream_with_bounded_coordinator_memory() {
	(cd "$WS" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" test --config "$CFG" -- \
		sh -c "sleep 2; lazaret-escalate -- /usr/bin/head -c 10485760 /dev/zero | wc -c > /workspace/count; sleep 2") &
	local cli=$! before after
	sleep 1.5
	before=$(hc_hwm)
	sleep 2
	for _ in $(seq 100); do [ -s "$WS/count" ] && break; sleep 0.1; done
	after=$(hc_hwm)
	wait "$cli" || fail "the session failed"
	assert_eq 10485760 "$(tr -d ' ' <"$WS/count")" "bytes streamed"
	echo "# coordinator peak RSS ${before} kB before, ${after} kB after 10 MiB"
	if [ -z "$before" ] || [ -z "$after" ]; then fail "no coordinator RSS read"; fi
	# At most LZ_ESC_WINDOW chunks of 48 KiB are in flight; 10 MiB held
	# anywhere in the coordinator would show here.
	[ $((after - before)) -lt 4096 ] || fail "the coordinator grew by $((after - before)) kB streaming 10 MiB"
}

test_cancel_from_the_sandbox_kills_the_host_command() {
	capture guest "lazaret-escalate -- /usr/bin/sleep $SLEEP & pid=\$!; sleep 2; kill -INT \$pid; wait \$pid; echo status=\$?"
	assert_contains "$OUT" "status=130"
	assert_contains "$ERR" "cancelled"
	assert_no_host_process
	assert_contains "$(hclog)" "cancelled by the sandbox"
}

# A daemon the host command detaches (setsid -f: its own session, its
# parent gone at once) ends with the request: the keeper it runs under
# is its subreaper (docs/escalation.md).
test_a_daemon_the_host_command_detaches_ends_with_it() {
	capture guest "lazaret-escalate -- /usr/bin/setsid -f /usr/bin/sleep $DAEMON; echo status=\$?"
	assert_contains "$OUT" "status=0"
	local _
	for _ in $(seq 50); do
		pgrep -u "$(id -u)" -f "^/usr/bin/sleep $DAEMON\$" >/dev/null || break
		sleep 0.1
	done
	pgrep -u "$(id -u)" -f "^/usr/bin/sleep $DAEMON\$" >/dev/null &&
		fail "the daemon outlived its request: $(pgrep -u "$(id -u)" -af "sleep $DAEMON")"
	assert_contains "$(hclog)" "host process exited 0"
}

# A host command runs with the developer's descriptor limit, not the
# one the sandbox's runtime raises itself to (rsplan.c).
test_a_host_command_keeps_the_developers_descriptor_limit() {
	local soft
	soft=$(($(ulimit -Hn) / 2))
	capture bash -c "ulimit -Sn $soft && cd '$WS' && exec \"\$@\"" - "${ENVV[@]}" "$LAZARET" test --config "$CFG" -- \
		lazaret-escalate -- /usr/bin/prlimit --nofile --output SOFT --noheadings
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_eq "$soft" "$(tr -d ' ' <<<"$OUT")" "the host command's soft descriptor limit"
}

test_session_loss_kills_the_host_command() {
	(cd "$WS" && exec "${ENVV[@]}" "$LAZARET" test --config "$CFG" -- lazaret-escalate -- /usr/bin/sleep "$SLEEP") &
	local cli=$!
	for _ in $(seq 100); do pgrep -u "$(id -u)" -f "^/usr/bin/sleep $SLEEP\$" >/dev/null && break; sleep 0.1; done
	pgrep -u "$(id -u)" -f "^/usr/bin/sleep $SLEEP\$" >/dev/null || fail "the host command never started"
	kill -KILL "$cli"
	assert_no_host_process
	for _ in $(seq 100); do pgrep -u "$(id -u)" -f "$T/" >/dev/null || break; sleep 0.1; done
	assert_contains "$(hclog)" "its session ended; cancelled"
	local f left=()
	for f in "$T/run/lazaret/domains/"*/*; do
		case ${f##*/} in hc.lock | hc.log) ;; *) left+=("$f") ;; esac
	done
	assert_eq "" "${left[*]}" "runtime files left"
}

# ---- in a terminal ------------------------------------------------------------------

# answer KEYS...: types at a prompt once keys count there (keys typed in
# its first LZ_SESSION_PROMPT_SETTLE_MS are dropped).
answer() {
	sleep 0.7
	keys "$@"
}

test_the_developer_approves_in_the_terminal() {
	tmux_start 150 40
	start_guest
	# An argument with an escape sequence: the prompt must show it escaped.
	keys "lazaret-escalate --why 'needs the host' -- /usr/bin/touch $T/approved \$'\\e[31mred'; echo status=\$?" Enter
	wait_for "? [y/N]"
	local s
	s=$(screen)
	assert_contains "$s" "argv[0]    /usr/bin/touch"
	assert_contains "$s" "argv[1]    $T/approved"
	assert_contains "$s" 'argv[2]    \e[31mred'
	assert_contains "$s" "why        needs the host"
	assert_contains "$s" "profile    test"
	[ ! -e "$T/approved" ] || fail "the command ran before the answer"
	answer y
	wait_for "status=0"
	[ -e "$T/approved" ] || fail "the approved command did not run"
	[ -e "$WS/$(printf '\e[31mred')" ] || fail "the argument did not arrive byte for byte (touch runs in the workspace)"
	assert_contains "$(screen)" "lazaret: approved"
}

# volume_profile DIR MARK: DIR holds tool.sh, which touches $T/MARK; the
# profile "vols" mounts DIR writable at /vol.
volume_profile() {
	mkdir -p "$1"
	printf '#!/bin/sh\ntouch %s/%s\n' "$T" "$2" >"$1/tool.sh"
	chmod 0755 "$1/tool.sh"
	cat >>"$CFG" <<-EOT
		[profiles.vols]
		image = "oci:$IMG/img:latest"
		[[profiles.vols.volumes]]
		source = "$1"
		destination = "/vol"
	EOT
}

# A prompt for an executable in a directory that, while the prompt waits,
# becomes a volume another Domain's sandbox can write: the answer runs
# nothing (the rules the prompt was held to are checked again then).
test_a_prompted_executable_made_writable_meanwhile_is_not_run() {
	local tools=$T/tools
	mkdir -p "$T/ws2"
	volume_profile "$tools" tools-ran
	tmux_start 250 40
	start_guest
	keys "lazaret-escalate -- $tools/tool.sh; echo status=\$?" Enter
	wait_for "? [y/N]" 20
	(cd "$T/ws2" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" vols --config "$CFG" -- true) ||
		fail "the Domain with the volume did not launch"
	answer y
	wait_for "status=77" 20
	assert_contains "$(screen)" "lazaret: not run: executable '$tools/tool.sh' lies inside '$tools', a volume source"
	[ ! -e "$T/tools-ran" ] || fail "an executable another sandbox could write meanwhile ran"
}

test_the_developer_denies_in_the_terminal() {
	tmux_start 150 40
	start_guest
	keys "lazaret-escalate -- /usr/bin/touch $T/denied; echo status=\$?" Enter
	wait_for "? [y/N]"
	answer n
	wait_for "status=77"
	[ ! -e "$T/denied" ] || fail "a denied command ran"
	assert_contains "$(screen)" "denied by the developer"
	# Ctrl-C at the prompt denies too, and the guest's shell is unharmed.
	keys "lazaret-escalate -- /usr/bin/touch $T/denied; echo status=\$?" Enter
	wait_count "? [y/N]" 2
	answer C-c
	wait_count "status=77" 2
	[ ! -e "$T/denied" ] || fail "a denied command ran"
}

# A sandbox that asks again each time its prompt is refused does not keep
# the developer's terminal in prompts: after a second refusal in a row
# the session's requests are denied unseen for 2 s (doubling), and an
# approval ends that.
test_prompts_refused_in_a_row_pause_the_sessions_requests() {
	tmux_start 150 40
	start_guest
	keys "lazaret-escalate -- /usr/bin/touch $T/r1; echo status1=\$?" Enter
	wait_for "? [y/N]"
	answer n
	wait_for "status1=77"
	keys "lazaret-escalate -- /usr/bin/touch $T/r2; echo status2=\$?" Enter
	wait_count "? [y/N]" 2
	answer n
	wait_for "status2=77"
	keys "lazaret-escalate -- /usr/bin/touch $T/r3; echo status3=\$?" Enter
	wait_for "status3=77"
	assert_eq 2 "$(screen | grep -cF '? [y/N]')" "prompts shown"
	assert_contains "$(screen)" "the developer is not asked again for 2 s"
	sleep 2.2
	keys "clear; lazaret-escalate -- /usr/bin/touch $T/r4; echo status4=\$?" Enter
	wait_for "? [y/N]"
	answer y
	wait_for "status4=0"
	[ -e "$T/r4" ] || fail "the approved command did not run"
	[ ! -e "$T/r1" ] && [ ! -e "$T/r2" ] && [ ! -e "$T/r3" ] || fail "a refused command ran"
}

# Nothing on the host is looked up for the sandbox before the developer
# answers: a path beneath a mount that never answers (a hung network file
# system; an automounter would be asked the same way) is shown at once,
# and the coordinator goes on serving the other session's terminal.
# hung_mount_and_two_guests: $T/hung is a mount that never answers (its
# process in $hang, the caller's local), and panes main.0 and main.1 each
# run a guest; main.0 asks to run $T/hung/bin/tool and is prompted.
hung_mount_and_two_guests() {
	mkdir "$T/hung"
	python3 "$FIX/hang_fuse.py" "$T/hung" >"$T/hang.out" 2>&1 &
	hang=$!
	for _ in $(seq 50); do grep -q mounted "$T/hang.out" && break; sleep 0.1; done
	grep -q mounted "$T/hang.out" || fail "the hanging mount: $(cat "$T/hang.out")"
	tmux_start 150 40
	tmux_split
	PANE=main.0 start_guest
	PANE=main.1 start_guest
	PANE=main.0 keys "lazaret-escalate -- $T/hung/bin/tool; echo status=\$?" Enter
	PANE=main.0 wait_for "? [y/N]" 10
}

test_a_prompt_looks_up_nothing_on_the_host() {
	local hang
	hung_mount_and_two_guests
	assert_contains "$(PANE=main.0 screen)" "argv[0]    $T/hung/bin/tool"
	PANE=main.1 keys 'echo "oth""er"' Enter
	PANE=main.1 wait_for "other" 10
	PANE=main.0 answer n
	PANE=main.0 wait_for "status=77"
	kill "$hang"
	wait "$hang" 2>/dev/null || true
	fusermount3 -u "$T/hung" || fail "unmount the hanging mount"
}

# A guest may ask before the coordinator has seen its session run (the
# test build shows the guest leader 3 s late): the request waits for the
# session's start and is prompted then, never denied as from a session
# that ended.
test_a_request_before_the_session_runs_is_prompted() {
	need_faults
	tmux_start 150 40
	keys "LAZARET_TEST_FAULT=guest-leader-late $LAZARET_FAULTS test --config $CFG -- \
lazaret-escalate -- /usr/bin/touch $T/early; echo status=\$?" Enter
	wait_for "? [y/N]" 30
	answer y
	wait_for "status=0" 20
	assert_not_contains "$(screen)" "the requesting session has ended"
	assert_contains "$(screen)" "lazaret: approved"
	[ -e "$T/early" ] || fail "the approved command did not run"
}

# What the approval opens is the authority: an executable that is not
# there when the developer approves starts nothing, and says why.
# The path approved is opened by the host process before it execs: a
# mount that does not answer holds that request alone, the coordinator
# goes on serving the other session, Ctrl-C cancels it, and approved
# again it fails once the mount goes (its lookup gets ENOTCONN).
test_an_approved_path_on_a_hung_mount_holds_only_its_request() {
	local hang
	hung_mount_and_two_guests
	PANE=main.0 answer y
	sleep 0.5
	PANE=main.1 keys 'echo "oth""er"' Enter
	PANE=main.1 wait_for "other" 10
	# Ctrl-C cancels it: the coordinator kills the process waiting on
	# the mount and goes on serving
	PANE=main.0 keys C-c
	PANE=main.0 wait_for "status=130" 20
	PANE=main.1 keys 'echo "aft""er"' Enter
	PANE=main.1 wait_for "after" 10
	# approved again, it fails once the mount goes
	PANE=main.0 keys "lazaret-escalate -- $T/hung/bin/tool; echo status=\$?" Enter
	PANE=main.0 wait_count "? [y/N]" 2
	PANE=main.0 answer y
	sleep 0.5
	assert_not_contains "$(PANE=main.0 screen)" "did not start"
	kill "$hang"
	wait "$hang" 2>/dev/null || true
	PANE=main.0 wait_for "status=77" 20
	assert_contains "$(PANE=main.0 screen)" "the host command did not start"
	fusermount3 -u "$T/hung" 2>/dev/null || fusermount3 -uz "$T/hung" || fail "unmount the hanging mount"
}

test_an_approved_missing_executable_starts_nothing() {
	tmux_start 150 40
	start_guest
	keys "lazaret-escalate -- /usr/bin/lazaret-no-such-tool $T/ran; echo status=\$?" Enter
	wait_for "? [y/N]"
	answer y
	# Not "status=" alone: the typed command shows it already.
	wait_for "the host command did not start" 20
	wait_count "status=" 2
	assert_not_contains "$(screen)" "status=0"
	[ ! -e "$T/ran" ] || fail "something ran"
}

test_a_prompt_touches_no_other_session() {
	tmux_start 150 40
	tmux_split
	PANE=main.0 start_guest
	PANE=main.1 start_guest
	# shellcheck disable=SC2016 # expanded by the guest's shell
	PANE=main.1 keys 'i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo tick$i; sleep 0.2; done' Enter
	PANE=main.0 keys "lazaret-escalate -- /usr/bin/touch $T/other; echo status=\$?" Enter
	PANE=main.0 wait_for "? [y/N]"
	PANE=main.1 wait_for "tick40" 30
	local right
	right=$(PANE=main.1 screen)
	assert_not_contains "$right" "Approve running"
	assert_not_contains "$right" "lazaret: the sandbox asks"
	PANE=main.0 answer n
	PANE=main.0 wait_for "status=77"
}

# An executable in the workspace holds the sandbox's bytes: approving its
# path would run them as the developer. Denied before any prompt.
test_a_workspace_executable_is_never_prompted() {
	printf '#!/bin/sh\ntouch %s/ran\n' "$T" >"$WS/tool.sh"
	chmod 0755 "$WS/tool.sh"
	tmux_start 150 40
	start_guest
	keys "lazaret-escalate -- $WS/tool.sh; echo status=\$?" Enter
	wait_for "status=77" 20
	assert_contains "$(screen)" "lies inside"
	assert_not_contains "$(screen)" "? [y/N]"
	[ ! -e "$T/ran" ] || fail "a workspace executable ran"
	# One that does not exist yet (the sandbox would write it while the
	# prompt is up), and one reached through a workspace symlink to
	# /usr/bin (swapped for a directory of its own while the prompt is
	# up): both denied, never prompted.
	keys "clear; lazaret-escalate -- $WS/later.sh; echo missing=\$?" Enter
	wait_for "missing=77" 20
	assert_contains "$(screen)" "lies inside"
	keys "clear; ln -s /usr/bin $WS/bin && lazaret-escalate -- $WS/bin/touch $T/ran; echo linked=\$?" Enter
	wait_for "linked=77" 20
	assert_contains "$(screen)" "lies inside"
	assert_not_contains "$(screen)" "? [y/N]"
	[ ! -e "$T/ran" ] || fail "an executable through a workspace symlink ran"
}

# Another Domain's workspace holds its sandbox's bytes as much: an
# executable there is denied too, once that Domain has launched.
test_another_domains_workspace_executable_is_never_prompted() {
	local other=$T/other-project
	mkdir -p "$other"
	printf '#!/bin/sh\ntouch %s/ran\n' "$T" >"$other/tool.sh"
	chmod 0755 "$other/tool.sh"
	(cd "$other" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" test --config "$CFG" -- true) ||
		fail "the other Domain did not launch"
	tmux_start 150 40
	start_guest
	keys "lazaret-escalate -- $other/tool.sh; echo status=\$?" Enter
	wait_for "status=77" 20
	assert_contains "$(screen)" "the workspace of a Domain"
	assert_not_contains "$(screen)" "? [y/N]"
	[ ! -e "$T/ran" ] || fail "another Domain's workspace executable ran"
}

# A writable volume's source holds its sandbox's bytes as much, and stays
# so (recorded in that Domain) once the volume leaves the configuration:
# another profile's volume, launched once, makes an executable there
# denied, never prompted.
test_an_executable_in_a_domains_volume_is_never_prompted() {
	local shared=$T/shared
	volume_profile "$shared" ran
	(cd "$WS" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" vols --config "$CFG" -- true) ||
		fail "the Domain with the volume did not launch"
	local rec
	rec=$(cat "$DATA"/domains/*/volumes 2>/dev/null)
	assert_contains "$rec" "\"$shared\""
	tmux_start 250 40 # the denial on one line
	start_guest
	keys "lazaret-escalate -- $shared/tool.sh; echo status=\$?" Enter
	wait_for "status=77" 20
	assert_contains "$(screen)" "a volume source of a Domain"
	assert_not_contains "$(screen)" "? [y/N]"
	[ ! -e "$T/ran" ] || fail "an executable in a volume another sandbox can write ran"
}

# An auto-approved executable in a directory that becomes another Domain's
# workspace while the generation runs: that sandbox can write it now, so
# the rule no longer runs it (the launch's check saw no Domain there).
test_an_auto_approved_executable_in_a_later_domains_workspace_is_denied() {
	local late=$T/late-ws wsa=$T/ws-a cfg=$T/late.toml
	mkdir -p "$late" "$wsa"
	printf '#!/bin/sh\ntouch %s/late-ran\n' "$T" >"$late/tool.sh"
	chmod 0755 "$late/tool.sh"
	cat >"$cfg" <<-EOT
		version = 1
		[storage]
		data_root = "$T/data-late"
		[profiles.rules]
		image = "oci:$IMG/img:latest"
		[[profiles.rules.escalation.auto_approve]]
		executable = "$late/tool.sh"
		args = ["x"]
		[profiles.plain]
		image = "oci:$IMG/img:latest"
	EOT
	chmod 0600 "$cfg"
	capture "${ENVV[@]}" "$LAZARET" image prepare "oci:$IMG/img:latest" --config "$cfg"
	assert_eq 0 "$STATUS" "image prepare: $ERR"
	(cd "$wsa" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" rules --config "$cfg" -- sh -c \
		"touch /workspace/ready; while [ ! -e /workspace/go ]; do sleep 0.1; done;
		 lazaret-escalate -- $late/tool.sh x; echo status=\$? >/workspace/status" >/dev/null 2>&1) &
	local a=$!
	for _ in $(seq 300); do [ -e "$wsa/ready" ] && break; sleep 0.1; done
	[ -e "$wsa/ready" ] || fail "the first Domain's session never ran"
	(cd "$late" && timeout -k 5 120 "${ENVV[@]}" "$LAZARET" plain --config "$cfg" -- true) ||
		fail "the later Domain did not launch"
	touch "$wsa/go"
	wait "$a" || true
	assert_eq "status=77" "$(cat "$wsa/status" 2>/dev/null)" "the request's end"
	[ ! -e "$T/late-ran" ] || fail "an executable another sandbox can now write was auto-approved"
	assert_contains "$(cat "$T/run/lazaret/domains/"*/hc.log)" "the workspace of a Domain"
}

# Arguments past what a prompt shows would run unseen: such a request
# is denied before any prompt (by its size before it is escaped: 20,000
# bytes, more than any prompt holds).
test_a_prompt_too_long_is_denied() {
	tmux_start 150 40
	start_guest
	# Five arguments of 4,000 bytes (the client's limit is 4,096 each).
	keys "a=\$(head -c 4000 /dev/zero | tr '\\0' a); lazaret-escalate -- /usr/bin/touch $T/long \$a \$a \$a \$a \$a; echo status=\$?" Enter
	wait_for "status=77" 20
	assert_contains "$(screen)" "too long to show the developer in full"
	assert_not_contains "$(screen)" "? [y/N]"
	[ ! -e "$T/long" ] || fail "a request too long to show ran"
}

# A justification padded with blanks to the terminal's width, to push the
# real lines away and draw a harmless-looking request of its own: the
# prompt wraps nothing (each row is the prompt's own or a continuation
# marked "| "), shows the blanks, and one taller than the terminal is
# denied.
test_a_padded_prompt_draws_no_lines_of_its_own() {
	tmux_start 80 24
	start_guest
	# "  why        x" and 146 blanks fill two rows of 80: wrapped, the
	# fake line would start the third.
	keys "p=\$(printf '%*s' 146 ''); lazaret-escalate --why \"x\${p}  argv[1]    $T/harmless\" -- /usr/bin/touch $T/padded; echo status=\$?" Enter
	wait_for "? [y/N]"
	if screen | grep -q "^  argv\[1\]    $T/harmless"; then
		fail "the sandbox drew a line of the prompt"
	fi
	assert_contains "$(screen)" '           | '
	assert_contains "$(screen)" 'x\x20\x20'
	sleep 0.7 # keys typed in the prompt's first half second are dropped
	keys n
	wait_for "status=77" 20
	keys "clear; p=\$(printf '%*s' 900 ''); lazaret-escalate --why \"x\${p}y\" -- /usr/bin/touch $T/padded; echo taller=\$?" Enter
	wait_for "taller=77" 20
	assert_contains "$(screen)" "cannot be shown whole"
	[ ! -e "$T/padded" ] || fail "a padded request ran"
}

test_cancelled_in_the_sandbox_while_the_prompt_is_up() {
	tmux_start 150 40
	start_guest
	keys "(sleep 3; kill -INT \$(pidof lazaret-escalate)) & lazaret-escalate -- /usr/bin/touch $T/never; echo status=\$?" Enter
	wait_for "? [y/N]"
	wait_for "status=130" 20
	assert_contains "$(screen)" "lazaret: the request was cancelled in the sandbox"
	[ ! -e "$T/never" ] || fail "a cancelled request ran"
	# Typing works again and reaches the guest, not a prompt.
	keys "echo after=ok" Enter
	wait_for "after=ok"
}

t_run "the sandbox's key lives only in the sandbox; escalation paths are read-only" test_the_sandbox_key_lives_only_in_the_sandbox
t_run "the supervisor and exec clients keep no developer secret they do not use" test_the_supervisor_keeps_no_developer_secret
t_run "auto-approval runs exactly the rule; output and status come back" test_auto_approve_runs_exactly_the_rule
t_run "near misses (extra argument, other spelling, symlinks) are not auto-approved" test_near_misses_are_not_auto_approved
t_run "forged, foreign and malformed records are refused" test_forged_and_malformed_records_are_refused
t_run "a replayed request runs once" test_a_replayed_request_runs_once
t_run "symlinks, FIFOs, hard links, directories and oversize files in the outbox are refused" test_junk_in_the_outbox_is_refused
t_run "a request rewritten in place after its rename never runs rewritten" test_a_request_rewritten_after_its_rename_never_runs_rewritten
t_run "10 MiB streams back with bounded coordinator memory" test_ten_mib_stream_with_bounded_coordinator_memory
t_run "Ctrl-C in the sandbox cancels the host command" test_cancel_from_the_sandbox_kills_the_host_command
t_run "losing the session kills the host command" test_session_loss_kills_the_host_command
t_run "a daemon the host command detaches ends with it" test_a_daemon_the_host_command_detaches_ends_with_it
t_run "a host command keeps the developer's descriptor limit" test_a_host_command_keeps_the_developers_descriptor_limit
t_run "the developer approves at the prompt; argv shown escaped, run byte for byte" test_the_developer_approves_in_the_terminal
t_run "the developer denies (n, Ctrl-C) at the prompt" test_the_developer_denies_in_the_terminal
t_run "prompts refused in a row pause the session's requests; an approval ends it" test_prompts_refused_in_a_row_pause_the_sessions_requests
t_run "a prompt looks up nothing on the host before the answer" test_a_prompt_looks_up_nothing_on_the_host
t_run "an approved executable that is not there starts nothing" test_an_approved_missing_executable_starts_nothing
t_run "an approved path on a mount that does not answer holds only its request" test_an_approved_path_on_a_hung_mount_holds_only_its_request
t_run "a request sent before its session runs is prompted" test_a_request_before_the_session_runs_is_prompted
t_run "a prompt in one session leaves another session's terminal untouched" test_a_prompt_touches_no_other_session
t_run "a request cancelled while its prompt is up takes the prompt down" test_cancelled_in_the_sandbox_while_the_prompt_is_up
t_run "a request too long to show whole is denied, never shown cut" test_a_prompt_too_long_is_denied
t_run "a prompt padded with blanks draws no lines of its own" test_a_padded_prompt_draws_no_lines_of_its_own
t_run "an executable in the workspace is denied, never prompted" test_a_workspace_executable_is_never_prompted
t_run "an executable in another Domain's workspace is denied, never prompted" test_another_domains_workspace_executable_is_never_prompted
t_run "an executable in a volume a Domain was given is denied, never prompted" test_an_executable_in_a_domains_volume_is_never_prompted
t_run "a prompted executable another sandbox can write by the answer is not run" test_a_prompted_executable_made_writable_meanwhile_is_not_run
t_run "an auto-approved executable in a workspace a Domain took later is denied" test_an_auto_approved_executable_in_a_later_domains_workspace_is_denied
rm -rf "$IMG"
t_done
