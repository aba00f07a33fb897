#!/usr/bin/env bash
# End-to-end tests of `lazaret <profile> -- <command>` (issue 4): real runsc,
# real user/PID/mount/network namespaces through newuidmap, real overlayfs
# State Anchors, the real sqlite3 Domain Store and Storage Catalog. Runs as
# the unprivileged test user; every test has its own Storage Root, runtime
# directory, workspace and image.
# Needs: LAZARET, E2E_ROOT, python3, umoci, git, unshare.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/launch_lib.sh"

test_runs_command_and_returns_status() {
	capture launch sh -c 'echo hi > /workspace/out; exit 7'
	assert_eq 7 "$STATUS" "exit status (stderr: $ERR)"
	assert_eq hi "$(cat "$WS/out")"
	assert_eq "$(id -u)" "$(stat -c %u "$WS/out")" "owner of out"
	assert_no_leftovers
	cleanup_data
}

# docs/performance.md: hc.log accounts for every launch phase and every
# step the Runtime Supervisor ran, each with a time, and for what the
# coordinator itself cost.
test_hc_log_names_what_each_launch_step_took() {
	capture launch true
	assert_eq 0 "$STATUS" "exit status (stderr: $ERR)"
	local log n='[0-9]+' f='[0-9]+[.][0-9]'
	log=$(cat "$T"/run/lazaret/domains/*/hc.log)
	assert_match "$log" "generation $n published in $n ms \\(configuration $n, store $n, recovery $n, generation begun $n, lease $n, supervisor $n, mounts and router $n, network helper $n, canary and policy $n, sandbox start $n, commit and publish $n\\)$" "the phases"
	assert_match "$log" "generation $n coordinator at publication: page faults $n, CPU $f$" "the coordinator's own cost"
	assert_match "$log" "generation $n supervisor steps \\(ms\\): mount $f, start_router $f, start_egress $f, start_helper $f, prove_canary $f, attach_egress $f, install_policy $f, attach_router $f, start_runsc $f, await_running $f, read_init_report $f, finish_network $f$" "the supervisor's steps"
	# and the teardown: every exact unmount succeeded (the workspace
	# mount's once failed unseen, the RS's namespace hiding it).
	local _
	for _ in $(seq 100); do
		grep -q "generation ended" "$T"/run/lazaret/domains/*/hc.log && break
		sleep 0.1
	done
	log=$(cat "$T"/run/lazaret/domains/*/hc.log)
	assert_match "$log" "generation ended cleanly \\(teardown $n ms: stopping $n, supervisor stop $n, retire $n, lease $n, ended $n\\)$" "the teardown"
	assert_not_contains "$log" "failed" "a normal launch and teardown"
	cleanup_data
}

# hc.log lives in XDG_RUNTIME_DIR (often a small tmpfs) across every
# generation of the Domain: past 1 MiB the next coordinator moves it to
# hc.log.1 (one kept) and logs to a new one.
test_hc_log_is_kept_to_two_files() {
	capture launch true
	assert_eq 0 "$STATUS" "first launch (stderr: $ERR)"
	assert_no_processes
	local dir
	dir=$(echo "$T"/run/lazaret/domains/*)
	python3 -c 'import sys; open(sys.argv[1], "a").write("filler line\n" * 100000)' "$dir/hc.log"
	printf 'an older log\n' >"$dir/hc.log.1"
	capture launch true
	assert_eq 0 "$STATUS" "second launch (stderr: $ERR)"
	assert_no_processes
	[ "$(stat -c %s "$dir/hc.log.1")" -gt 1048576 ] || fail "hc.log.1 is not the full old log"
	assert_eq 100000 "$(grep -c '^filler line$' "$dir/hc.log.1")" "the old log's lines in hc.log.1"
	assert_eq 0 "$(grep -c 'filler line' "$dir/hc.log")" "old lines in the new hc.log"
	assert_contains "$(cat "$dir/hc.log")" "published in" "the new generation's lines"
	assert_eq 600 "$(stat -c %a "$dir/hc.log")" "the new log's mode"
	[ "$(stat -c %s "$dir/hc.log")" -lt 65536 ] || fail "the new hc.log is not small"
	cleanup_data
}

# The init's standard streams were runsc's log on the host (runsc.log, in
# the runtime directory, often a small tmpfs): root inside could write it
# without bound through /proc/1/fd. Once it has reported, the init's
# streams are /dev/null: the bytes go nowhere on the host.
test_the_init_streams_reach_no_host_file() {
	launch sh -c 'for f in 0 1 2; do head -c 4000000 /dev/zero | tr "\0" x >/proc/1/fd/$f; done
		printf "\033]0;from-the-sandbox\a\n" >/proc/1/fd/2; touch /workspace/written; sleep 3' >/dev/null 2>&1 &
	local bg=$! k log
	for k in $(seq 300); do
		[ -e "$WS/written" ] && break
		sleep 0.05
	done
	[ -e "$WS/written" ] || fail "the writes inside did not finish"
	log=$(ls "$T"/run/lazaret/domains/*/gen-*/runsc.log) || fail "no runsc.log while the generation runs"
	[ "$(stat -c %s "$log")" -lt 100000 ] || fail "runsc.log grew to $(stat -c %s "$log") bytes"
	assert_not_contains "$(cat "$log")" "from-the-sandbox" "runsc.log"
	assert_not_contains "$(cat "$log")" "xxxxxxxx" "runsc.log"
	wait "$bg" || fail "the launch failed"
}

test_exact_argv_and_streams() {
	capture launch sh -c 'printf "[%s]" "$@"; echo err >&2' x 'a b' '*' '$HOME' ''
	assert_eq 0 "$STATUS" "exit status (stderr: $ERR)"
	assert_eq '[a b][*][$HOME][]' "$OUT"
	assert_eq err "$ERR"
	cleanup_data
}

# A profile's env naming a variable Lazaret sets replaces it: one entry of
# each name inside, the profile's value (the default used to come first,
# and getenv takes the first).
test_profile_env_replaces_what_lazaret_sets() {
	EXTRA=$'[profiles.test.env]\nLANG = "LZ_TEST_LANG"\nPATH = "LZ_TEST_PATH"\nLZ_TOKEN = "LZ_TEST_LANG"\n'
	write_profile
	LZ_ENV+=("LZ_TEST_LANG=C" "LZ_TEST_PATH=/usr/local/bin:/bin:/usr/bin")
	capture launch /bin/sh -c 'env | grep -c -e ^LANG= -e ^PATH=; printf "%s|%s|%s\n" "$LANG" "$PATH" "$LZ_TOKEN"'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_eq "2
C|/usr/local/bin:/bin:/usr/bin|C" "$OUT"
	cleanup_data
}

test_output_to_a_file_keeps_its_offset() {
	{
		echo header
		launch echo from-guest
		echo footer
	} >"$T/out"
	assert_eq "header
from-guest
footer" "$(cat "$T/out")"
	cleanup_data
}

test_signal_status_is_128_plus_n() {
	capture launch sh -c 'kill -9 $$'
	assert_eq 137 "$STATUS"
	cleanup_data
}

test_stdin_and_stdout_are_byte_exact() {
	head -c $((100 * 1024 * 1024)) /dev/urandom >"$T/big"
	(cd "$WS" && env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- cat <"$T/big" >"$T/out")
	assert_eq 0 "$?" "cat exit status"
	assert_status 0 cmp "$T/big" "$T/out"
	printf 'line1\nline2' >"$T/small"
	(cd "$WS" && env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- wc -l <"$T/small" >"$T/count")
	assert_eq 1 "$(tr -d ' ' <"$T/count")" "stdin EOF reached the guest"
	cleanup_data
}

# A standard stream the CLI was started without is /dev/null: before, the
# control socket took its number and the guest got that socket as the
# stream (a host socket inside the sandbox).
test_a_closed_stream_is_not_the_control_socket() {
	(cd "$WS" && env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- \
		sh -c 'ls -l /proc/self/fd/0; cat; echo "read to the end"' <&- >"$T/out" 2>"$T/err")
	assert_eq 0 "$?" "exit status (stderr: $(cat "$T/err"))"
	assert_not_contains "$(cat "$T/out")" "socket" "the guest's standard input"
	assert_contains "$(cat "$T/out")" "read to the end"
	cleanup_data
}

# Issue 15: a terminal another program left non-blocking (Node.js does
# that to its terminal) answers a flood with EAGAIN when full. The whole
# output still arrives, once the reader catches up, and the guest's status
# is its own: with the terminal as standard output only (the CLI relays
# the stream) and as a whole session (the coordinator's PTY). A session's
# terminal output is gVisor's pace, about 85 KB/s here with raw runsc exec
# too (bench/terminal, "output throughput"): its flood is 1 MB, still far
# more than the terminal holds when the reader starts, 2 s in.
flood_to_nonblocking_terminal() { # relay|terminal BYTES
	python3 - "$1" "$WS" env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- \
		sh -c "yes | head -c $2" <<'PY'
import fcntl, os, pty, select, subprocess, sys, time, tty
mode, ws, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
m, s = pty.openpty()
tty.setraw(s)
fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) | os.O_NONBLOCK)
p = subprocess.Popen(cmd, cwd=ws, stdin=s if mode == "terminal" else subprocess.DEVNULL, stdout=s,
                     stderr=subprocess.DEVNULL)
os.close(s)
time.sleep(2)  # nobody reads: the terminal fills and says EAGAIN
ys = 0
while True:
    if not select.select([m], [], [], 60)[0]:
        break
    try:
        d = os.read(m, 65536)
    except OSError:  # EIO: every slave descriptor is closed
        break
    if not d:
        break
    ys += d.count(b"y")
print(ys, p.wait())
PY
}

test_flood_to_a_nonblocking_terminal_arrives_whole() {
	capture flood_to_nonblocking_terminal relay 4000000
	assert_eq "2000000 0" "$OUT" "y lines and status, the CLI relaying standard output (stderr: $ERR)"
	capture flood_to_nonblocking_terminal terminal 1000000
	assert_eq "500000 0" "$OUT" "y lines and status, a terminal session (stderr: $ERR)"
	cleanup_data
}

test_persistent_dirs_survive_and_tmp_does_not() {
	capture launch sh -c 'mkdir -p /usr/local/bin && echo tool > /usr/local/bin/mytool && echo gone > /tmp/x'
	assert_eq 0 "$STATUS" "first launch (stderr: $ERR)"
	capture launch cat /usr/local/bin/mytool
	assert_eq 0 "$STATUS" "second launch (stderr: $ERR)"
	assert_eq tool "$OUT"
	capture launch cat /tmp/x
	assert_eq 1 "$STATUS" "/tmp must not persist"
	# The image content still shows through where untouched.
	capture launch cat /etc/passwd
	assert_contains "$OUT" "root:x:0:0"
	cleanup_data
}

test_git_sentry_and_git_inside() {
	git -C "$WS" init -q
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q --allow-empty -m host
	local before
	before=$(cat "$WS/.git/config")
	capture launch sh -c 'echo "[evil]" >> /workspace/.git/config'
	[ "$STATUS" != 0 ] || fail "appending to .git/config succeeded"
	assert_eq "$before" "$(cat "$WS/.git/config")" ".git/config changed"
	capture launch sh -c 'echo evil > /workspace/.git/hooks/pre-commit && cat /workspace/.git/hooks/pre-commit'
	assert_eq 0 "$STATUS" "hooks are writable as transient storage (stderr: $ERR)"
	[ ! -e "$WS/.git/hooks/pre-commit" ] || fail "the host's hooks changed"
	capture launch sh -c 'mv /workspace/.git /workspace/moved'
	[ "$STATUS" != 0 ] || fail "moving .git aside succeeded"
	[ -d "$WS/.git" ] && [ ! -e "$WS/moved" ] || fail ".git was moved on the host"
	echo content >"$WS/file"
	capture launch git -C /workspace -c user.name=agent -c user.email=a@a add file
	assert_eq 0 "$STATUS" "git add (stderr: $ERR)"
	capture launch git -C /workspace -c user.name=agent -c user.email=a@a commit -q -m inside
	assert_eq 0 "$STATUS" "git commit (stderr: $ERR)"
	assert_eq inside "$(git -C "$WS" log -1 --format=%s)"
	capture launch git -C /workspace status --short
	assert_eq 0 "$STATUS" "git status (stderr: $ERR)"
	cleanup_data
}

test_host_outside_workspace_is_invisible() {
	echo secret >"$T/home/secret"
	capture launch sh -c "cat $T/home/secret; ls $HOME; ls /run/lazaret"
	assert_not_contains "$OUT" "secret"
	assert_not_contains "$OUT$ERR" "config.toml"
	capture launch sh -c "test -e $DATA || test -e $CFG || test -e $T/run/lazaret"
	assert_eq 1 "$STATUS" "Lazaret state or configuration visible inside"
	cleanup_data
}

test_concurrent_launches_share_one_sandbox() {
	(launch sh -c 'echo started > /workspace/ready; sleep 4; echo done > /workspace/first') &
	local first=$!
	local i
	for i in $(seq 200); do [ -e "$WS/ready" ] && break; sleep 0.1; done
	[ -e "$WS/ready" ] || fail "first session did not start"
	capture launch ps
	assert_eq 0 "$STATUS" "second launch (stderr: $ERR)"
	assert_contains "$OUT" "sleep 4"
	# The coordinator keeps its name; its supervisor and exec clients are
	# renamed (lz-supervisor, lz-exec-client).
	assert_eq 1 "$(ps -ww -u "$(id -u)" -o comm=,args= | grep -c "^$COMM .*__hc.*$WS")" \
		"one coordinator for the Domain"
	wait "$first"
	assert_eq done "$(cat "$WS/first")"
	assert_no_leftovers
	cleanup_data
}

test_changed_configuration_refuses_to_join() {
	(launch sh -c 'touch /workspace/ready; sleep 4') &
	local first=$!
	local i
	for i in $(seq 200); do [ -e "$WS/ready" ] && break; sleep 0.1; done
	EXTRA='isolate_ignored = false
' write_profile
	capture launch true
	assert_eq 69 "$STATUS"
	assert_contains "$ERR" "different configuration"
	wait "$first"
	cleanup_data
}

test_killing_the_coordinator_stops_the_sandbox() {
	(launch sleep 100) &
	local cli=$!
	local hc="" i
	for i in $(seq 200); do
		hc=$(ps -ww -u "$(id -u)" -o pid=,comm=,args= | awk -v ws="$WS" -v comm="$COMM" '$2 == comm && index($0, "__hc") && index($0, ws) {print $1; exit}')
		[ -n "$hc" ] && pgrep -u "$(id -u)" -f "runsc.*exec" >/dev/null && break
		sleep 0.1
	done
	[ -n "$hc" ] || fail "no coordinator"
	local rs
	rs=$(ps -u "$(id -u)" -o pid=,ppid=,comm= | awk -v hc="$hc" '$2 == hc && $3 == "lz-supervisor" {print $1}')
	[ -n "$rs" ] || fail "no supervisor under the coordinator"
	kill -9 "$hc"
	local st=0
	wait "$cli" || st=$?
	[ "$st" != 0 ] || fail "the CLI did not report the lost coordinator"
	# The supervisor ends on its own (the lease-loss path); until it has
	# exited (a zombie or gone), its lease is rightly kept.
	for i in $(seq 300); do
		[ -e "/proc/$rs" ] && [ "$(awk '{print $3}' "/proc/$rs/stat" 2>/dev/null)" != Z ] || break
		sleep 0.1
	done
	# The supervisor, runsc and the sandbox die with the coordinator; its
	# runtime directory waits for the next coordinator of the Domain.
	assert_no_processes
	capture launch echo again
	assert_eq 0 "$STATUS" "a launch after the loss (stderr: $ERR; hc.log: $(tail -n 6 "$T"/run/lazaret/domains/*/hc.log | tr "\n" "|"))"
	assert_eq again "$OUT"
	assert_no_leftovers
	# Issue 13: the lost generation's lease was released by the next
	# coordinator (every process it recorded proved gone), so nothing
	# keeps the image: each kill -9 used to leak one lease for good.
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" \
		"released the catalog lease of lost generation 1 on artifact"
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" \
		"removed the runtime tree of lost generation 1: every process, mount and namespace it recorded is gone"
	capture lz image gc --dry-run
	assert_contains "$OUT" "would remove unleased artifact"
	assert_not_contains "$OUT" "kept leased"
	cleanup_data
}

# Refuse on ambiguity (issue 13): a runtime tree no recorded generation
# accounts for is not proved ours and gone, so nothing is started beside
# it, and nothing of it is touched.
test_an_unaccounted_runtime_tree_refuses_the_launch() {
	capture launch true
	assert_eq 0 "$STATUS" "$ERR"
	assert_no_processes
	local dom
	dom=$(echo "$T"/run/lazaret/domains/*)
	mkdir -m 0700 "$dom/gen-77"
	echo keep >"$dom/gen-77/file"
	capture launch true
	assert_eq 69 "$STATUS"
	assert_contains "$ERR" "generation 77 of this Domain may still be running"
	assert_contains "$(cat "$dom/hc.log")" "kept the runtime tree of generation 77: the Domain Store has no record of it"
	assert_eq keep "$(cat "$dom/gen-77/file")"
	rm -r "$dom/gen-77"
	capture launch echo again
	assert_eq 0 "$STATUS" "$ERR"
	assert_eq again "$OUT"
}

# libgit2 is opened when used (docs/performance.md): without it, diag
# names it and a launch refuses before its generation exists, saying what
# to install. An unloadable file of its name first on the loader's path
# stands in for the missing package.
test_a_missing_libgit2_refuses_the_launch_naming_it() {
	local f
	mkdir "$T/nolib"
	for f in /usr/lib/*/libgit2.so.*; do : >"$T/nolib/${f##*/}"; done
	LZ_ENV+=("LD_LIBRARY_PATH=$T/nolib")
	capture env -i "${LZ_ENV[@]}" "$LAZARET" diag
	assert_match "$OUT" "^problem +libgit2 +cannot load libgit2" "diag's libgit2 check (stderr: $ERR)"
	assert_contains "$OUT" "apt install libgit2"
	capture launch true
	assert_eq 69 "$STATUS" "exit status (stderr: $ERR)"
	assert_contains "$ERR" "cannot load libgit2"
	assert_contains "$ERR" "install the distribution's package"
	assert_not_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "starting" "a generation began"
	assert_no_leftovers
	# With the library back, the same Domain launches.
	unset 'LZ_ENV[-1]'
	capture launch true
	assert_eq 0 "$STATUS" "a launch with libgit2 (stderr: $ERR)"
	assert_no_leftovers
	cleanup_data
}

test_unprepared_image_says_what_to_do() {
	printf 'version = 1\n[storage]\ndata_root = "%s"\n[profiles.test]\nimage = "oci:%s/none"\n' \
		"$DATA" "$T" >"$CFG"
	umoci init --layout "$T/none" >/dev/null && umoci new --image "$T/none:latest" >/dev/null
	capture launch true
	assert_eq 69 "$STATUS"
	assert_contains "$ERR" "is not prepared"
	assert_contains "$ERR" "lazaret image prepare"
	assert_no_leftovers
	cleanup_data
	# The image `lazaret init` configures, before `image build-default` ran:
	# its layout does not exist yet, and the command that makes it is named.
	printf 'version = 1\n[storage]\ndata_root = "%s"\n[profiles.test]\nimage = "oci:%s/images/default:latest"\n' \
		"$DATA" "$DATA" >"$CFG"
	capture launch true
	assert_eq 69 "$STATUS"
	assert_contains "$ERR" "image 'oci:$DATA/images/default:latest' is not prepared: run 'lazaret image build-default'"
	assert_no_leftovers
	cleanup_data
}

# An artifact prepared by an earlier preparer format (format 1 did not check
# layer streams against the image's diff_ids) is never launched: the
# launch says what to do, and preparing again makes a new artifact.
test_an_artifact_of_an_earlier_format_is_not_used() {
	local id old
	id=$(sql -readonly "$DATA/catalog.sqlite" "select id from artifacts")
	old=$(sql -readonly "$DATA/catalog.sqlite" "select manifest_digest from artifacts" | python3 -c '
import hashlib, struct, sys
d = sys.stdin.read().strip().encode()
print(hashlib.sha256(b"lazaret-prepared-artifact-v1" + struct.pack(">I", len(d)) + d
                     + struct.pack(">II", 4, 1)).hexdigest())')
	[ "$id" != "$old" ] || fail "the artifact ID did not change with the format"
	sql "$DATA/catalog.sqlite" "update artifacts set id = '$old'; update prepare_ops set artifact_id = '$old'"
	mv "$DATA/prepared/$id" "$DATA/prepared/$old"
	capture launch true
	assert_eq 69 "$STATUS"
	assert_contains "$ERR" "image 'oci:$IMG/img:latest' was prepared by an earlier Lazaret, whose preparation checked less of the image: run 'lazaret image prepare oci:$IMG/img:latest'"
	assert_no_leftovers
	capture lz image prepare "oci:$IMG/img:latest"
	assert_eq 0 "$STATUS" "prepare again (stderr: $ERR)"
	assert_not_contains "$OUT" "already prepared"
	assert_contains "$OUT" "$id"
	capture launch true
	assert_eq 0 "$STATUS" "launch after preparing again (stderr: $ERR)"
	assert_no_leftovers
}

test_volumes_are_mounted_as_configured() {
	mkdir "$T/vol-ro" "$T/vol-rw"
	echo "from host" >"$T/vol-ro/in"
	EXTRA="[[profiles.test.volumes]]
source = \"$T/vol-ro\"
destination = \"/data/ro\"
read_only = true
[[profiles.test.volumes]]
source = \"$T/vol-rw\"
destination = \"/data/rw\"
[[profiles.test.volumes]]
profile_dir = \"cache\"
destination = \"/root/.cache\"
" write_profile
	capture launch sh -c 'cat /data/ro/in; echo x > /data/ro/new || echo ro-refused; echo out > /data/rw/out; echo kept > /root/.cache/c'
	assert_eq 0 "$STATUS" "launch with volumes (stderr: $ERR)"
	assert_contains "$OUT" "from host"
	assert_contains "$OUT" "ro-refused"
	[ ! -e "$T/vol-ro/new" ] || fail "wrote through a read-only volume"
	assert_eq out "$(cat "$T/vol-rw/out")"
	capture launch cat /root/.cache/c
	assert_eq kept "$OUT" "profile directory volume persists"
}

# Starts the test-only build (lazaret-faults) with LAZARET_TEST_FAULT set
# to $1 and the command in the rest, in the background (its CLI's PID in
# HELD_CLI, its streams in $T/held.out and $T/held.err), and waits until
# its coordinator stopped at that point (its PID in HELD_HC).
launch_held() {
	need_faults
	local fault=$1 _
	shift
	(cd "$WS" && exec env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT="$fault" "$LAZARET_FAULTS" test \
		--config "$CFG" -- "$@" >"$T/held.out" 2>"$T/held.err") &
	HELD_CLI=$!
	HELD_HC=""
	for _ in $(seq 300); do
		HELD_HC=$(ps -ww -u "$(id -u)" -o pid=,stat=,args= | awk -v ws="--workspace $WS" \
			'$2 ~ /^T/ && index($0, "__hc") && index($0, ws) {print $1; exit}')
		[ -n "$HELD_HC" ] && return 0
		sleep 0.1
	done
	fail "the coordinator never stopped at $fault"
}

# Continues the held coordinator after a swap ($1 names what was swapped):
# the start must refuse on the changed identity, the sandbox must never
# have read the secret, and nothing may be left running.
expect_swap_refused() {
	local status=0
	kill -CONT "$HELD_HC"
	wait "$HELD_CLI" || status=$?
	assert_not_contains "$(cat "$T/held.out")" secret "what the sandbox read"
	[ "$status" != 0 ] || fail "the launch ran with a swapped $1"
	assert_contains "$(cat "$T/held.err")" "changed identity" "the refusal"
	assert_no_processes
}

# A volume source replaced by a symlink after the configuration was
# loaded (a sandbox of another Domain may write where a source lies): the
# start refuses, and the sandbox never sees what the link names. The
# coordinator is held right after it began for the swap.
test_a_volume_source_swapped_after_loading_is_refused() {
	mkdir "$T/vol" "$T/secret"
	echo volume >"$T/vol/in"
	echo secret >"$T/secret/in"
	EXTRA="[[profiles.test.volumes]]
source = \"$T/vol\"
destination = \"/data\"
" write_profile
	launch_held hc-stop-after-begin cat /data/in
	mv "$T/vol" "$T/vol.orig"
	ln -s "$T/secret" "$T/vol"
	expect_swap_refused "volume source"
}

# The same for Git Sentry's read-only files (SR-4): .git/config replaced
# by a symlink after the sentry checked it (the coordinator is held once
# the plan and the bundle are written). The sandbox never reads what the
# link names; once restored, the Domain launches again.
test_a_git_sentry_file_swapped_after_planning_is_refused() {
	git -C "$WS" init -q
	echo secret >"$T/secret"
	launch_held hc-stop-after-plan cat /workspace/.git/config
	mv "$WS/.git/config" "$T/config.orig"
	ln -s "$T/secret" "$WS/.git/config"
	expect_swap_refused .git/config
	rm "$WS/.git/config"
	mv "$T/config.orig" "$WS/.git/config"
	capture launch cat /workspace/.git/config
	assert_eq 0 "$STATUS" "the launch after the restore (stderr: $ERR)"
	assert_contains "$OUT" "[core]"
	cleanup_data
}

# small_storage_root: the Storage Root ($DATA) on the small tmpfs that
# scripts/test.sh mounts (LZ_TEST_SMALL_FS), the test image prepared
# there; sets the caller's small to its directory.
small_storage_root() {
	[ -n "${LZ_TEST_SMALL_FS:-}" ] ||
		fail "LZ_TEST_SMALL_FS is unset: run through scripts/test.sh, which mounts a small tmpfs"
	small=$(mktemp -d "$LZ_TEST_SMALL_FS/t.XXXXXX")
	DATA=$small/data
	write_profile
	capture lz image prepare "oci:$IMG/img:latest"
	assert_eq 0 "$STATUS" "prepare on the small file system (stderr: $ERR)"
}

# A full Storage Root (issue 16): the next launch is refused at once, saying
# what is full and what to do, the log grows by a few lines, nothing
# recorded is lost, and once space is freed the Domain launches again.
# scripts/test.sh mounts the small tmpfs (LZ_TEST_SMALL_FS).
test_a_full_storage_root_refuses_clearly() {
	local small lines start
	small_storage_root
	capture launch sh -c 'dd if=/dev/zero of=/root/fill bs=1M 2>/dev/null; echo filled'
	assert_contains "$OUT" filled
	assert_no_processes # its coordinator has torn down (failing to record it)
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "its end was not fully recorded" \
		"the session's end the full disk refused, in hc.log"
	lines=$(cat "$T"/run/lazaret/domains/*/hc.log | wc -l)
	start=$SECONDS
	capture launch true
	assert_eq 69 "$STATUS" "launch on a full Storage Root (stderr: $ERR)"
	[ $((SECONDS - start)) -lt 60 ] || fail "the refusal took $((SECONDS - start)) s"
	assert_contains "$ERR" "$small/data/domains/"
	assert_contains "$ERR" "is full"
	assert_contains "$ERR" "free space on that file system"
	[ $(($(cat "$T"/run/lazaret/domains/*/hc.log | wc -l) - lines)) -lt 5 ] ||
		fail "hc.log grew by $(($(cat "$T"/run/lazaret/domains/*/hc.log | wc -l) - lines)) lines"
	assert_eq ok "$(sql "$DATA"/domains/*/domain.sqlite 'pragma integrity_check')" "Domain Store"
	assert_eq ok "$(sql "$DATA"/catalog.sqlite 'pragma integrity_check')" "Storage Catalog"
	rm -f "$DATA"/domains/*/anchor/root/upper/fill
	capture launch sh -c 'test ! -e /root/fill && echo launched'
	assert_eq 0 "$STATUS" "launch after freeing space (stderr: $ERR)"
	assert_eq launched "$OUT"
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "recording it as failed"
	in_ns rm -rf "$small"
}

# A join while the Storage Root is full (the sandbox filled it) is refused
# as a launch is, saying what is full and what to do, before it records
# anything; the running session goes on, and a join works once space is
# freed.
test_a_join_on_a_full_storage_root_refuses_clearly() {
	local small first i
	small_storage_root
	(launch sh -c 'dd if=/dev/zero of=/root/fill bs=1M 2>/dev/null; touch /workspace/ready
		while [ ! -e /workspace/free ]; do sleep 0.1; done; rm /root/fill; touch /workspace/freed
		while [ ! -e /workspace/go ]; do sleep 0.1; done; echo first done' >"$T/first.out") &
	first=$!
	for i in $(seq 300); do [ -e "$WS/ready" ] && break; sleep 0.1; done
	[ -e "$WS/ready" ] || fail "the first session did not fill the disk"
	capture launch echo joined
	assert_eq 69 "$STATUS" "join on a full Storage Root (stderr: $ERR)"
	assert_contains "$ERR" "the Domain's storage $small/data/domains/"
	assert_contains "$ERR" "is full"
	assert_contains "$ERR" "free space on that file system"
	assert_not_contains "$ERR" "database or disk is full"
	touch "$WS/free" # the sandbox frees it (its overlay's upper layer)
	for i in $(seq 100); do [ -e "$WS/freed" ] && break; sleep 0.1; done
	capture launch echo joined
	assert_eq 0 "$STATUS" "join after freeing space (stderr: $ERR)"
	assert_eq joined "$OUT"
	touch "$WS/go"
	wait "$first" || fail "the first session ended $?"
	assert_eq "first done" "$(cat "$T/first.out")"
	assert_no_processes
	in_ns rm -rf "$small"
}

# The same for the runtime directory (each running sandbox's /tmp lives
# there).
test_a_full_runtime_directory_refuses_clearly() {
	[ -n "${LZ_TEST_SMALL_FS:-}" ] ||
		fail "LZ_TEST_SMALL_FS is unset: run through scripts/test.sh, which mounts a small tmpfs"
	local run
	run=$(mktemp -d "$LZ_TEST_SMALL_FS/run.XXXXXX")
	chmod 0700 "$run"
	LZ_ENV=("${LZ_ENV[@]/#XDG_RUNTIME_DIR=*/XDG_RUNTIME_DIR=$run}")
	dd if=/dev/zero of="$run/fill" bs=1M 2>/dev/null || true
	capture launch true
	assert_eq 69 "$STATUS" "launch with a full runtime directory (stderr: $ERR)"
	assert_contains "$ERR" "the runtime directory $run/lazaret/domains/"
	assert_contains "$ERR" "is full"
	rm -f "$run/fill"
	capture launch sh -c 'echo launched'
	assert_eq 0 "$STATUS" "launch after freeing space (stderr: $ERR)"
	assert_eq launched "$OUT"
	assert_no_processes
	rm -rf "$run"
}

test_failed_start_releases_the_lease() {
	git -C "$WS" init -q
	mv "$WS/.git/config" "$WS/real-config"
	ln -s ../real-config "$WS/.git/config"
	capture launch true
	assert_eq 69 "$STATUS"
	assert_contains "$ERR" "Git Sentry"
	assert_no_leftovers
	capture lz image gc --dry-run
	assert_contains "$OUT" "would remove unleased artifact"
	assert_not_contains "$OUT" "kept leased"
}


# descendant NAME PID: the pid of PID's newest descendant named NAME.
descendant() {
	local pid kid found=""
	for pid in $(pgrep -P "$2" || true); do
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$1" ] || found=$pid
		kid=$(descendant "$1" "$pid")
		[ -z "$kid" ] || found=$kid
	done
	echo "$found"
}

# await_exec_clients N: waits (10 s at most) until N sessions' exec
# clients run.
await_exec_clients() {
	local k
	for k in $(seq 200); do
		[ "$(pgrep -c -u "$(id -u)" -x lz-exec-client)" != "$1" ] || return 0
		sleep 0.05
	done
	return 1
}

# A session whose client is killed ends without a trace in the running
# Domain: its runsc exec (ended by its parent-death signal) is reaped by
# its exec client's own PID namespace, never left a zombie under the
# supervisor; and a session's exec client holds nothing of the
# coordinator's (its listening socket, other sessions' connections).
test_a_killed_client_leaves_no_zombie() {
	launch sleep 12 >/dev/null 2>&1 &
	local keep=$!
	await_exec_clients 1 || fail "the first session never ran"
	launch sleep 30 >/dev/null 2>&1 &
	local bg=$! rs cli wrapper nfd zombies st
	await_exec_clients 2 || fail "the second session never ran"
	rs=$(pgrep -n -u "$(id -u)" -x lz-supervisor) || fail "no supervisor"
	cli=$(descendant lazaret "$bg")
	[ -n "$cli" ] || fail "no client of the second session"
	for wrapper in $(pgrep -u "$(id -u)" -x lz-exec-client); do
		nfd=$(ls "/proc/$wrapper/fd" | wc -l)
		[ "$nfd" -le 5 ] || fail "an exec client holds $nfd descriptors: $(ls -l "/proc/$wrapper/fd")"
	done
	kill -KILL "$cli"
	wait "$bg" 2>/dev/null || true
	await_exec_clients 1 || fail "the killed client's session never ended"
	sleep 1
	zombies=$(for st in /proc/[0-9]*/stat; do
		awk -v rs="$rs" '$4 == rs && $3 == "Z" { print $2 }' "$st" 2>/dev/null
	done)
	assert_eq "" "$zombies" "children of the supervisor left as zombies"
	kill -0 "$keep" 2>/dev/null || fail "the other session ended"
	wait "$keep" || fail "the other session failed"
	assert_no_leftovers
}

# A coordinator out of descriptors leaves a joining client queued, without
# spinning on the listener it cannot accept from, and serves it once it
# has descriptors again. (The limit is set to the coordinator's lowest
# free descriptor number, so its next accept4 fails with EMFILE.)
test_a_coordinator_out_of_descriptors_lets_a_join_wait() {
	launch sleep 20 >/dev/null 2>&1 &
	local keep=$! hc="" k lowest was cpu0 cpu1 st
	await_exec_clients 1 || fail "the first session never ran"
	hc=$(ps -ww -u "$(id -u)" -o pid=,comm=,args= | awk -v ws="--workspace $WS" -v comm="$COMM" \
		'$2 == comm && index($0, "__hc") && index($0, ws) {print $1; exit}')
	[ -n "$hc" ] || fail "no coordinator"
	lowest=0
	while [ -e "/proc/$hc/fd/$lowest" ]; do lowest=$((lowest + 1)); done
	was=$(prlimit --pid "$hc" --nofile --output SOFT --noheadings | tr -d ' ')
	prlimit --pid "$hc" --nofile="$lowest:" || fail "cannot lower the coordinator's descriptor limit"
	launch echo joined >"$T/join.out" 2>"$T/join.err" &
	local join=$!
	sleep 1
	cpu0=$(awk '{print $14 + $15}' "/proc/$hc/stat")
	sleep 1.5
	cpu1=$(awk '{print $14 + $15}' "/proc/$hc/stat")
	prlimit --pid "$hc" --nofile="$was:" || fail "cannot restore the coordinator's descriptor limit"
	st=0
	wait "$join" || st=$?
	assert_eq 0 "$st" "the join's status once the coordinator had descriptors (stderr: $(cat "$T/join.err"))"
	assert_eq joined "$(cat "$T/join.out")"
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "control connections wait: Too many open files"
	# clock ticks (1/100 s) in 1.5 s: a loop on the listener takes them all
	[ $((cpu1 - cpu0)) -lt 50 ] || fail "the coordinator spun: $((cpu1 - cpu0)) ticks of CPU in 1.5 s"
	# The first session's client (its coordinator, started by it, is a
	# descendant too): the lazaret whose parent is launch's timeout.
	local cli="" p
	for p in $(descendants_of "$keep"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$COMM" ] || continue
		[ "$(ps -o comm= -p "$(ps -o ppid= -p "$p" | tr -d ' ')")" = timeout ] && cli=$p
	done
	[ -n "$cli" ] || fail "no client of the first session"
	kill -TERM "$cli" # ends its session (cli.md, "Interrupting")
	wait "$keep" 2>/dev/null || true
	assert_no_leftovers
}

# descendants_of PID: every process below PID.
descendants_of() {
	local kid
	for kid in $(pgrep -P "$1" || true); do
		echo "$kid"
		descendants_of "$kid"
	done
}

t_run "runs the command and returns its exit status" test_runs_command_and_returns_status
t_run "hc.log names what each launch phase and supervisor step took" test_hc_log_names_what_each_launch_step_took
t_run "hc.log is kept to two files of about 1 MiB" test_hc_log_is_kept_to_two_files
t_run "the init's streams reach no host file" test_the_init_streams_reach_no_host_file
t_run "passes the exact argv and separate streams" test_exact_argv_and_streams
t_run "a profile's env replaces a variable Lazaret sets" test_profile_env_replaces_what_lazaret_sets
t_run "a standard stream the CLI lacks is not its control socket" test_a_closed_stream_is_not_the_control_socket
t_run "a signal gives status 128+N" test_signal_status_is_128_plus_n
t_run "a flood to a non-blocking terminal arrives whole" test_flood_to_a_nonblocking_terminal_arrives_whole
t_run "output to a file keeps its offset" test_output_to_a_file_keeps_its_offset
t_run "stdin and stdout are byte-exact for 100 MiB" test_stdin_and_stdout_are_byte_exact
t_run "persistent directories survive, /tmp does not" test_persistent_dirs_survive_and_tmp_does_not
t_run "Git Sentry protects config and hooks; git works inside" test_git_sentry_and_git_inside
t_run "host paths outside the workspace are invisible" test_host_outside_workspace_is_invisible
t_run "concurrent launches share one sandbox and leave nothing" test_concurrent_launches_share_one_sandbox
t_run "a changed configuration refuses to join" test_changed_configuration_refuses_to_join
t_run "killing the coordinator stops the sandbox" test_killing_the_coordinator_stops_the_sandbox
t_run "a runtime tree no generation accounts for refuses the launch (refuse on ambiguity)" test_an_unaccounted_runtime_tree_refuses_the_launch
t_run "an unprepared image says what to do" test_unprepared_image_says_what_to_do
t_run "an artifact of an earlier preparer format is not used" test_an_artifact_of_an_earlier_format_is_not_used
t_run "a missing libgit2 refuses the launch, naming it" test_a_missing_libgit2_refuses_the_launch_naming_it
t_run "a failed start releases the image lease" test_failed_start_releases_the_lease
t_run "a full Storage Root refuses the launch at once, saying what to do" test_a_full_storage_root_refuses_clearly
t_run "a join on a full Storage Root is refused at once, saying what to do" test_a_join_on_a_full_storage_root_refuses_clearly
t_run "a full runtime directory refuses the launch at once, saying what to do" test_a_full_runtime_directory_refuses_clearly
t_run "volumes are mounted as configured" test_volumes_are_mounted_as_configured
t_run "a volume source swapped after loading is refused, never mounted" test_a_volume_source_swapped_after_loading_is_refused
t_run "a killed client leaves no zombie, and its exec client holds nothing of the coordinator" test_a_killed_client_leaves_no_zombie
t_run "a Git Sentry file swapped after planning is refused, never mounted" test_a_git_sentry_file_swapped_after_planning_is_refused
t_run "a coordinator out of descriptors lets a join wait, and serves it" test_a_coordinator_out_of_descriptors_lets_a_join_wait
rm -rf "$IMG"
t_done
