#!/usr/bin/env bash
# The fault-injection matrix of issue 13: real processes killed with
# SIGKILL, then a new launch of the Domain must succeed, with no process
# or runtime tree left behind, both stores passing PRAGMA integrity_check,
# no image lease left (no generation is live) and `image gc` reclaiming
# what is unleased.
#   - each role while a session is served: the Host Coordinator, the
#     Runtime Supervisor, the attached runsc, its gofer and sandbox,
#     slirp4netns, the session's exec client (and its runsc exec), the
#     workspace router;
#   - the Host Coordinator at each step of a launch, of a session's
#     acquisition (session-intent, -stage, -commit) and in its teardown,
#     through lazaret-faults (LAZARET_TEST_FAULT=hc-kill-<step>);
#   - each of those roles with the coordinator stopped right after a step
#     (hc-stop-<step>), then continued. A role that does not exist yet at
#     that step is noted and the coordinator alone continues;
#   - a namespace of the lost generation held by a process it never
#     recorded: the next launch refuses and keeps the lease until the
#     holder lets go (spec 3.6: refuse on ambiguity, never adopt).
# Needs: LAZARET, LAZARET_FAULTS, E2E_ROOT, python3, umoci, unshare.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/launch_lib.sh"

# What every cell must leave: a Domain that launches again, cleanly.
assert_recovered() {
	assert_no_processes
	capture launch echo again
	assert_eq 0 "$STATUS" "the launch after the fault (stderr: $ERR; hc.log: $(tail -n 8 "$T"/run/lazaret/domains/*/hc.log | tr "\n" "|"))"
	assert_eq again "$OUT"
	assert_no_leftovers
	assert_eq ok "$(sql -readonly "$DATA"/domains/*/domain.sqlite 'pragma integrity_check')" "Domain Store"
	assert_eq ok "$(sql -readonly "$DATA/catalog.sqlite" 'pragma integrity_check')" "Storage Catalog"
	assert_eq 0 "$(sql -readonly "$DATA/catalog.sqlite" 'select count(*) from leases')" "leases left"
	# Every generation's records say what recovery proved: clean.
	assert_eq 0 "$(sql -readonly "$DATA"/domains/*/domain.sqlite \
		"select count(*) from participants where phase <> 'clean'")" "participant records not clean"
	assert_eq 0 "$(sql -readonly "$DATA"/domains/*/domain.sqlite \
		"select count(*) from sessions where state <> 'clean'")" "session records not clean"
	capture lz image gc --dry-run
	assert_contains "$OUT" "would remove unleased artifact"
	assert_not_contains "$OUT" "kept leased"
}

# The Domain's hc.log once it says the generation ended (at most 30 s).
log_once_ended() {
	for _ in $(seq 300); do
		grep -q "generation ended" "$T"/run/lazaret/domains/*/hc.log 2>/dev/null && break
		sleep 0.1
	done
	cat "$T"/run/lazaret/domains/*/hc.log
}

# pid_of ROLE: the PID of that process of this test's Domain (empty if none).
pid_of() {
	local rs
	rs=$(ps -ww -u "$(id -u)" -o pid=,comm=,args= | awk -v ws="--workspace $WS" '$2 == "lz-supervisor" && index($0, ws) {print $1; exit}')
	case $1 in
	hc) ps -ww -u "$(id -u)" -o pid=,comm=,args= | awk -v ws="--workspace $WS" -v comm="$COMM" \
		'($2 == comm || $2 == "lazaret-faults") && index($0, "__hc") && index($0, ws) {print $1; exit}' ;;
	supervisor) echo "$rs" ;;
	router) ps -u "$(id -u)" -o pid=,ppid=,comm= | awk -v rs="${rs:-none}" '$2 == rs && $3 == "lazaret-router" {print $1; exit}' ;;
	slirp4netns) ps -u "$(id -u)" -o pid=,ppid=,comm= | awk -v rs="${rs:-none}" '$2 == rs && $3 == "slirp4netns" {print $1; exit}' ;;
	runsc) ps -ww -u "$(id -u)" -o pid=,ppid=,args= | awk -v rs="${rs:-none}" '$2 == rs && $3 == "runsc" && !index($0, " exec ") {print $1; exit}' ;;
	gofer) ps -ww -u "$(id -u)" -o pid=,args= | awk -v t="$T/" '$2 == "runsc-gofer" && index($0, t) {print $1; exit}' ;;
	sandbox) ps -ww -u "$(id -u)" -o pid=,args= | awk -v t="$T/" '$2 == "runsc-sandbox" && index($0, t) {print $1; exit}' ;;
	exec-client) ps -ww -u "$(id -u)" -o pid=,comm=,args= | awk -v ws="--workspace $WS" '$2 == "lz-exec-client" && index($0, ws) {print $1; exit}' ;;
	runsc-exec) ps -ww -u "$(id -u)" -o pid=,args= | awk -v t="$T/" '$2 == "runsc" && index($0, " exec ") && index($0, t) {print $1; exit}' ;;
	esac
}

# SIGTERM to the coordinator's whole process group, as a host shutdown
# signals every process: the RS, runsc and slirp4netns may end with it,
# but the coordinator lives to tear the generation down, so nothing is
# left to the next launch's recovery.
test_sigterm_to_the_process_group_leaves_nothing_to_recover() {
	local st=0
	serving hc
	kill -TERM -- "-$(ps -o pgid= -p "$PID" | tr -d ' ')"
	wait_for_cli "$CLI" || st=$?
	assert_eq 69 "$st" "the session's exit status"
	assert_match "$(cat "$T/serve.err")" "told to stop \(SIGTERM\)|the sandbox is gone" "what the session heard"
	assert_match "$(log_once_ended)" "generation ended (cleanly|with errors)" "the coordinator's teardown"
	assert_recovered
	assert_not_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "lost generation"
	assert_not_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "left by a lost coordinator"
}

# wait_for_cli PID: its exit status, or a failure after 30 s.
wait_for_cli() {
	for _ in $(seq 300); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		kill -9 "$1"
		fail "the CLI did not end within 30 s"
	fi
	wait "$1"
}

# serving ROLE: `sleep 60` in a session (its stderr in $T/serve.err),
# until it is served (its runsc exec runs) and ROLE has a process: CLI is
# the session's client, PID that process.
serving() {
	(launch sleep 60 >/dev/null 2>"$T/serve.err") &
	CLI=$!
	PID=""
	for _ in $(seq 300); do
		[ -n "$(pid_of runsc-exec)" ] && PID=$(pid_of "$1") && [ -n "$PID" ] && break
		sleep 0.1
	done
	[ -n "$PID" ] || fail "no $1 process while serving"
}

kill_role_during_serve() {
	local role=$1
	serving "$role"
	kill -9 "$PID"
	wait_for_cli "$CLI" || true
	# A loss of the generation's own processes ends it failed, and hc.log
	# says which (a lost session process ends only its session).
	local why=""
	case $role in
	runsc | gofer | sandbox) why="the Runtime Supervisor failed: the sandbox ended on its own" ;;
	router) why="the Runtime Supervisor failed: the workspace router ended" ;;
	slirp4netns) why="the Runtime Supervisor failed: the network helper (slirp4netns) ended" ;;
	supervisor) why="the Runtime Supervisor ended" ;;
	esac
	if [ -n "$why" ]; then
		local log
		log=$(log_once_ended)
		assert_contains "$log" "$why"
		assert_contains "$log" "generation ended with errors"
		assert_not_contains "$log" "generation ended cleanly"
	fi
	# The session's client hears that reason too: the RS reports the loss
	# of what it owns before it stops the sandbox, and a sandbox's loss
	# fails runsc exec (128) a moment before the RS reports it (the exit
	# is held for that). A lost gofer may end the guest first instead:
	# the session then ends with the guest's status.
	case $role in
	runsc | sandbox | router | slirp4netns)
		assert_contains "$(cat "$T/serve.err")" "lazaret: error: the sandbox is gone: ${why#*failed: }" ;;
	esac
	assert_recovered
}

# A stop signal (SIGTERM, SIGINT, SIGHUP: a host shutdown, `kill`) is an
# orderly end, not a loss: the session's client is told why, the sandbox
# is torn down, the generation is recorded stopped, and the next launch
# has nothing to recover.
stop_coordinator_during_serve() {
	local sig=$1 st=0
	serving hc
	kill -"$sig" "$PID"
	wait_for_cli "$CLI" || st=$?
	assert_eq 69 "$st" "the session's exit status once its coordinator was stopped"
	assert_contains "$(cat "$T/serve.err")" "the Domain's Host Coordinator was told to stop (SIG$sig); the sandbox was stopped"
	local log
	log=$(log_once_ended)
	assert_contains "$log" "generation ended cleanly"
	assert_eq stopped "$(sql -readonly "$DATA"/domains/*/domain.sqlite \
		"select state from generations order by generation desc limit 1")" "the generation's record"
	assert_recovered
	assert_not_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "lost generation"
	assert_not_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "left by a lost coordinator"
}

# stopped_at STEP: `echo served` launched by lazaret-faults, whose
# coordinator stops itself (SIGSTOP) right after STEP; its output in
# $T/start.out and $T/start.err. CLI is the launch's client, HC the
# stopped coordinator.
stopped_at() {
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS is not built"
	(cd "$WS" && exec env -i "${LZ_ENV[@]}" "LAZARET_TEST_FAULT=hc-stop-$1" "$LAZARET_FAULTS" test \
		--config "$CFG" -- echo served >"$T/start.out" 2>"$T/start.err") &
	CLI=$!
	HC=""
	for _ in $(seq 300); do
		HC=$(pid_of hc)
		[ -n "$HC" ] && [ "$(awk '{print $3}' "/proc/$HC/stat" 2>/dev/null)" = T ] && return 0
		sleep 0.1
	done
	fail "the coordinator never stopped after $1 (processes: $(ps -ww -u "$(id -u)" -o pid=,stat=,comm=,args= |
		cut -c1-160 | tr "\n" "|"); hc.log: $(tail -n 12 "$T"/run/lazaret/domains/*/hc.log 2>&1 | tr "\n" "|"))"
}

# The same signal while the launch is under way: it stops after the phase
# it is in, takes back what was built, and says why.
test_sigterm_while_starting_ends_the_launch_in_order() {
	stopped_at after-spawn
	[ -n "$(pid_of supervisor)" ] || fail "no supervisor after the spawn"
	kill -TERM "$HC"
	kill -CONT "$HC"
	local st=0
	wait_for_cli "$CLI" || st=$?
	assert_eq 69 "$st" "the launch's exit status once its coordinator was told to stop"
	assert_not_contains "$(cat "$T/start.out")" "served"
	assert_contains "$(cat "$T/start.err")" "the Domain's Host Coordinator was told to stop (SIGTERM) while starting the sandbox"
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "launch stopped after supervisor: the Domain's Host Coordinator was told to stop (SIGTERM)"
	# The RS, stopped while it waited for an acknowledgement, says so.
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" \
		"the Runtime Supervisor failed: start_helper: the Host Coordinator stopped the launch before slirp4netns was released"
	# A launch that did not complete ends failed, whatever stopped it.
	assert_eq failed "$(sql -readonly "$DATA"/domains/*/domain.sqlite \
		"select state from generations order by generation desc limit 1")" \
		"the stopped launch's generation (hc.log: $(tail -n 12 "$T"/run/lazaret/domains/*/hc.log | tr "\n" "|"))"
	assert_recovered
	assert_not_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "lost generation"
	assert_not_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "left by a lost coordinator"
}

# Spec 3.3: every recorded identity is the host's PID of that very process
# (its start time in the host's /proc equals the recorded one), the
# Runtime Supervisor's children included: they live in its PID namespace,
# where they have other numbers, and recovery looks them up on the host.
test_recorded_identities_are_host_pids() {
	local cli ready="" role pid start
	# The session ends when told (killing the subshell would leave the CLI
	# and its sandbox to end_domain's wait).
	(launch sh -c 'while [ ! -e /workspace/stop ]; do sleep 0.1; done' >/dev/null 2>&1) &
	cli=$!
	for _ in $(seq 300); do
		[ -n "$(pid_of runsc-exec)" ] && ready=1 && break
		sleep 0.1
	done
	[ -n "$ready" ] || { kill "$cli"; fail "the session did not start"; }
	for role in runtime_supervisor attached_runsc connectivity_helper; do
		read -r pid start < <(sql -readonly -separator ' ' "$DATA"/domains/*/domain.sqlite \
			"select proc_pid, proc_start_time from participants where role = '$role' and proc_slot = 'committed' order by generation desc limit 1")
		[ -n "$pid" ] || fail "no committed $role identity"
		assert_eq "$start" "$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$pid/stat" 2>/dev/null)" \
			"start time of the recorded $role (PID $pid)"
	done
	assert_eq "$(pid_of runsc)" "$(sql -readonly "$DATA"/domains/*/domain.sqlite \
		"select proc_pid from participants where role = 'attached_runsc' and proc_slot = 'committed' order by generation desc limit 1")" \
		"the recorded attached runsc is the RS's runsc"
	touch "$WS/stop"
	wait "$cli" || fail "the session did not end cleanly"
}

kill_hc_at() {
	local step=$1
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS is not built"
	# shellcheck disable=SC2016 # expanded by that bash
	capture bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" env -i "${LZ_ENV[@]}" \
		"LAZARET_TEST_FAULT=hc-kill-$step" "$LAZARET_FAULTS" test --config "$CFG" -- echo served
	case $step in
	in-teardown) ;;
	session-*)
		# The coordinator had read the command: it may have run, and the
		# CLI says so rather than running it again.
		[ "$STATUS" != 0 ] || fail "the launch succeeded although its coordinator was killed after $step"
		assert_contains "$ERR" "the command may have run, and is not run again"
		assert_eq 1 "$(grep -c "generation .* starting" "$T"/run/lazaret/domains/*/hc.log)" "generations started" ;;
	*)
		[ "$STATUS" != 0 ] || fail "the launch succeeded although its coordinator was killed after $step"
		assert_not_contains "$OUT" "served" ;;
	esac
	assert_recovered
	# The next coordinator recorded the lost generation and proved it gone.
	local log
	log=$(cat "$T"/run/lazaret/domains/*/hc.log)
	case $step in
	after-begin | after-intent | after-spawn | after-stage | after-commit | after-publish | session-*)
		assert_contains "$log" "was left by a lost coordinator; recording it as failed" ;;
	esac
}

# Another role killed while the coordinator is stopped right after a step
# of its launch (or in its teardown); then the coordinator continues.
kill_role_at() {
	local role=$1 step=$2 cli hc pid=""
	stopped_at "$step"
	cli=$CLI hc=$HC
	pid=$(pid_of "$role")
	if [ -n "$pid" ]; then
		# A role whose work is done (runsc exec of `echo served`) may end
		# by itself between the lookup and the kill: recovery then has
		# one process fewer to prove gone, and must still pass.
		kill -9 "$pid" 2>/dev/null || echo "# $role $pid had ended by itself after $step"
	else
		echo "# no $role after $step: the coordinator alone continues"
	fi
	kill -CONT "$hc"
	# The CLI may start another coordinator after losing this one; it
	# stops at the same step and is continued too.
	for _ in $(seq 300); do
		kill -0 "$cli" 2>/dev/null || break
		ps -ww -u "$(id -u)" -o pid=,stat=,args= | awk -v ws="--workspace $WS" \
			'$2 ~ /^T/ && index($0, "__hc") && index($0, ws) {print $1}' | xargs -r kill -CONT
		sleep 0.1
	done
	if kill -0 "$cli" 2>/dev/null; then
		kill -9 "$cli"
		fail "the launch did not end after its $role was killed ($step)"
	fi
	wait "$cli" || true
	assert_recovered
}

# A process outside the generation holds a namespace of the RS (an open
# /proc/PID/ns/NS) after the coordinator died: the launches that follow
# refuse, saying so, and keep the lease; once it lets go they recover.
# test_held_namespace_refuses_until_released NS EXPECTED-REASON
test_held_namespace_refuses_until_released() {
	local cli rs holder ready=""
	serving supervisor
	cli=$CLI rs=$PID
	python3 -c 'import os, sys, time
fd = os.open("/proc/%s/ns/%s" % (sys.argv[1], sys.argv[2]), os.O_RDONLY)
print("held", flush=True)
time.sleep(600)' "$rs" "$1" >"$T/holder.out" 2>&1 &
	holder=$!
	t_cleanup "kill $holder"
	for _ in $(seq 100); do
		ready=$(cat "$T/holder.out") && [ -n "$ready" ] && break
		sleep 0.1
	done
	[ "$ready" = held ] || { kill "$holder"; fail "the holder could not open the namespace: $ready"; }
	kill -9 "$(pid_of hc)"
	wait "$cli" || true
	capture launch echo refused
	local launch_status=$STATUS launch_out=$OUT launch_err=$ERR
	# Verification reports the residue recovery could not prove gone.
	capture lz state verify --profile test
	kill "$holder"
	wait "$holder" 2>/dev/null || true
	assert_eq 1 "$STATUS" "state verify while held: $OUT $ERR"
	assert_contains "$OUT" "FAIL recovery      generation 1 of this Domain may still be running (its image lease is kept: see hc.log)"
	assert_not_contains "$OUT" "nothing was started"
	[ "$launch_status" != 0 ] || fail "a launch succeeded while the lost generation's namespace was held: $launch_out"
	assert_not_contains "$launch_out" "refused"
	assert_contains "$launch_err" "may still be running (its image lease is kept: see hc.log); nothing was started"
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "$2"
	# The network namespace's holder is named (the mount namespace's
	# mount is found first).
	[ "$1" != net ] || assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "process $holder (python3) holds it"
	assert_eq 1 "$(sql -readonly "$DATA/catalog.sqlite" 'select count(*) from leases')" "the held generation's lease"
	assert_recovered
}
# The mount namespace keeps its mounts: the first one found is the reason.
test_held_mount_namespace() { test_held_namespace_refuses_until_released mnt "its mount of / (mount ID "; }
test_held_network_namespace() { test_held_namespace_refuses_until_released net "its network namespace (namespace ID "; }
# The Domain flock is a file in the runtime directory: a second lazaret
# with another XDG_RUNTIME_DIR (or after the directory was removed and made
# again) takes a lock of its own. The generation the first coordinator
# still serves is not recorded lost, and its session ends cleanly.
test_a_second_lock_file_does_not_fail_a_live_generation() {
	local cli gen other=()
	(launch sh -c 'sleep 6; echo served') >"$T/first.out" 2>"$T/first.err" &
	cli=$!
	for _ in $(seq 300); do
		[ -n "$(pid_of runsc-exec)" ] && break
		sleep 0.1
	done
	[ -n "$(pid_of runsc-exec)" ] || fail "the first session never ran"
	gen=$(sql -readonly "$DATA"/domains/*/domain.sqlite 'select max(generation) from generations')
	mkdir -m 0700 "$T/run2"
	other=("${LZ_ENV[@]/#XDG_RUNTIME_DIR=*/XDG_RUNTIME_DIR=$T/run2}")
	capture env -C "$WS" -i "${other[@]}" "$LAZARET" state verify --profile test --config "$CFG"
	assert_eq 1 "$STATUS" "state verify beside the live generation: $OUT $ERR"
	assert_contains "$OUT" "FAIL recovery      generation $gen is still served by its coordinator (process $(pid_of hc))"
	capture env -C "$WS" -i "${other[@]}" "$LAZARET" test --config "$CFG" -- echo second
	assert_contains "$ERR" "still served by its coordinator"
	assert_eq published "$(sql -readonly "$DATA"/domains/*/domain.sqlite \
		"select state from generations where generation = $gen")" "the live generation beside the second lock file"
	wait "$cli" || fail "the first session did not end cleanly: $(cat "$T/first.out" "$T/first.err")"
	assert_eq served "$(cat "$T/first.out")"
	assert_no_processes # its coordinator's teardown ends after the CLI
	assert_eq stopped "$(sql -readonly "$DATA"/domains/*/domain.sqlite \
		"select state from generations where generation = $gen")" "the first generation once ended"
	assert_recovered
}

# Nothing of the host bounds a sandbox's memory (runsc ignores cgroups):
# the Runtime Supervisor watches the sandbox's memory file and ends the
# generation past runtime.max_memory_mib, saying so to the session and in
# hc.log, before the host's OOM killer would pick one of the developer's
# processes. Its in-memory /tmp is that memory too.
test_memory_past_its_limit_ends_the_generation() {
	EXTRA=$'[runtime]\nmax_memory_mib = 256\n' write_profile
	capture launch sh -c 'dd if=/dev/zero of=/tmp/small bs=1M count=64 2>/dev/null && echo small ok
		dd if=/dev/zero of=/tmp/big bs=1M count=2048 2>/dev/null; echo big done'
	assert_eq "small ok" "$OUT" "what ran before the limit"
	[ "$STATUS" != 0 ] || fail "the session ended 0 past the memory limit"
	assert_contains "$ERR" "lazaret: error: the sandbox is gone: the sandbox's memory passed its limit ("
	assert_contains "$ERR" "the limit is 256 MiB: runtime.max_memory_mib"
	local log
	log=$(log_once_ended)
	assert_contains "$log" "the Runtime Supervisor failed: the sandbox's memory passed its limit"
	assert_contains "$log" "generation ended with errors"
	assert_recovered
}

# The memory of every sandbox together is one budget (half of the host's
# memory; 640 MiB in chunks of 32 with the test fault): the Runtime
# Supervisors hold chunks of the Storage Root's memory.slots as their
# sandboxes' memory files fill them; a sandbox's share is the budget
# divided by the sandboxes running. One that needs more than is left ends
# when it holds its share or more; below it, the one holding more than its
# share ends instead. A launch that finds nothing left is refused.
test_the_memory_budget_is_shared_by_every_sandbox() {
	need_faults
	cat >>"$CFG" <<-EOF
		[profiles.other]
		image = "oci:$IMG/img:latest"
	EOF
	local faults=(env -C "$WS" -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=memory-least-host "$LAZARET_FAULTS")
	# other_start SCRIPT: the other Domain's session in the background
	# (its output in $T/other.out and .err, its PID in $other_pid); await()
	# waits for a file the test makes in the workspace.
	other_start() {
		# shellcheck disable=SC2016 # expanded inside
		timeout -k 5 300 "${faults[@]}" other --config "$CFG" -- sh -c \
			'await() { while [ ! -e "$1" ]; do sleep 0.1; done; }; '"$1" >"$T/other.out" 2>"$T/other.err" &
		other_pid=$!
	}
	await_line() {
		for _ in $(seq 300); do
			grep -qx "$1" "$T/other.out" && return
			sleep 0.1
		done
		fail "the other Domain's sandbox never said '$1': $(cat "$T/other.out" "$T/other.err")"
	}
	local other_pid held
	other_start 'dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>/dev/null && echo filled
		await /workspace/go && dd if=/dev/zero of=/tmp/more bs=1M count=310 2>/dev/null && echo full
		await /workspace/end && echo still here'
	await_line filled
	# 300 MiB and the idle sandbox in 32 MiB chunks, and a presence slot,
	# once the watch has looked (every 100 ms)
	for _ in $(seq 30); do
		held=$(slots_locked "$DATA/memory.slots")
		[ "$held" -lt 11 ] || break
		sleep 0.1
	done
	if [ "$held" -lt 11 ] || [ "$held" -gt 12 ]; then
		fail "300 MiB in /tmp: $held slots held"
	fi
	capture "${faults[@]}" test --config "$CFG" -- sh -c \
		'dd if=/dev/zero of=/tmp/big bs=1M count=400 2>/dev/null; sleep 5; echo big done'
	[ "$STATUS" != 0 ] || fail "the session past its share ended 0 ($OUT)"
	assert_eq "" "$OUT" "what ran past the budget"
	assert_contains "$ERR" "lazaret: error: the sandbox is gone: the sandboxes of this host together passed their memory budget (640 MiB for all of them"
	assert_contains "$ERR" ", at least its share (320 MiB with 2 sandboxes running); it was stopped"
	assert_contains "$(log_once_ended)" "the Runtime Supervisor failed: the sandboxes of this host together passed their memory budget"
	assert_eq "$held" "$(slots_locked "$DATA/memory.slots")" "slots held once the stopped sandbox ended"

	touch "$WS/go"
	await_line full
	await_slots "$DATA/memory.slots" 21 "slots held by a sandbox with 610 MiB in /tmp"
	capture "${faults[@]}" test --config "$CFG" -- echo started
	[ "$STATUS" != 0 ] || fail "a launch with no memory left ran: $OUT"
	assert_contains "$ERR" "no memory left for another sandbox: this one holds "
	assert_contains "$ERR" "the 640 MiB every sandbox together may hold"
	assert_eq "" "$OUT" "what ran with no memory left"
	touch "$WS/end"
	wait "$other_pid" || fail "the other Domain's session: $(cat "$T/other.out" "$T/other.err")"
	assert_eq $'filled\nfull\nstill here' "$(cat "$T/other.out")" "the sandbox holding its share ran on"
	await_slots "$DATA/memory.slots" 0 "slots held once both Domains ended"

	# Past its share while another is short below its own: it ends.
	other_start 'dd if=/dev/zero of=/tmp/fill bs=1M count=400 2>/dev/null && echo filled && sleep 60'
	await_line filled
	await_slots "$DATA/memory.slots" 14 "slots held by a sandbox with 400 MiB in /tmp"
	capture "${faults[@]}" test --config "$CFG" -- sh -c \
		'dd if=/dev/zero of=/tmp/some bs=1M count=250 2>/dev/null; sleep 2; echo some done'
	assert_eq 0 "$STATUS" "the session within its share (stderr: $ERR)"
	assert_eq "some done" "$OUT"
	! wait "$other_pid" || fail "the other Domain's session past its share ended 0"
	assert_contains "$(cat "$T/other.err")" "another needed memory within its share, and this one held "
	assert_contains "$(cat "$T/other.err")" "more than its share (320 MiB with 2 sandboxes running); it was stopped"
	await_slots "$DATA/memory.slots" 0 "slots held once both Domains ended"
}

t_run "recorded identities are the host's PIDs of their processes" test_recorded_identities_are_host_pids
t_run "a sandbox past its memory limit ends its generation, saying so" test_memory_past_its_limit_ends_the_generation
t_run "the sandboxes' memory is one budget for every Domain" test_the_memory_budget_is_shared_by_every_sandbox
t_run "a second lock file beside a live generation does not record it lost" test_a_second_lock_file_does_not_fail_a_live_generation
t_run "a mount namespace of a lost generation held outside it: refused until released" test_held_mount_namespace
t_run "a network namespace of a lost generation held outside it: refused until released" test_held_network_namespace

# A session's own processes at the steps where they exist: the exec
# client staged (not yet released) and committed, its runsc exec running.
# (The other roles at these steps are the serving cells above.)
for cell in exec-client:session-stage exec-client:session-commit runsc-exec:session-commit; do
	role=${cell%%:*} step=${cell#*:}
	eval "test_kill_${role//-/_}_${step//-/_}() { kill_role_at $role $step; }"
	t_run "kill -9 of the $role with the coordinator stopped at $step; the Domain recovers" \
		"test_kill_${role//-/_}_${step//-/_}"
done
for step in after-intent after-spawn after-stage after-commit after-publish in-teardown; do
	for role in supervisor runsc sandbox gofer slirp4netns router; do
		eval "test_kill_${role}_${step//-/_}() { kill_role_at $role $step; }"
		t_run "kill -9 of the $role with the coordinator stopped $step; the Domain recovers" \
			"test_kill_${role}_${step//-/_}"
	done
done
for sig in TERM INT HUP; do
	eval "test_sig${sig,,}_during_serve_ends_the_generation_in_order() { stop_coordinator_during_serve $sig; }"
	t_run "SIG$sig to the coordinator while a session is served: told, torn down, recorded stopped" \
		"test_sig${sig,,}_during_serve_ends_the_generation_in_order"
done
t_run "SIGTERM to the coordinator while it starts: the launch ends in order, saying why" \
	test_sigterm_while_starting_ends_the_launch_in_order
t_run "SIGTERM to the coordinator's process group while serving: nothing is left to recovery" \
	test_sigterm_to_the_process_group_leaves_nothing_to_recover
for role in hc supervisor runsc gofer sandbox slirp4netns exec-client runsc-exec router; do
	eval "test_kill_${role//-/_}_during_serve() { kill_role_during_serve $role; }"
	t_run "kill -9 of the $role while a session is served; the Domain recovers" "test_kill_${role//-/_}_during_serve"
done
for step in after-begin after-intent after-spawn after-stage after-commit after-publish session-intent \
	session-stage session-commit in-teardown; do
	eval "test_kill_hc_${step//-/_}() { kill_hc_at $step; }"
	t_run "kill -9 of the coordinator $step; the Domain recovers" "test_kill_hc_${step//-/_}"
done
rm -rf "$IMG"
t_done
