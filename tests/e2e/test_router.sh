#!/usr/bin/env bash
# End-to-end tests of the workspace router (issue 11; spec 3.5, SR-13,
# FR-3, FR-4, FR-9, DX-2): real launches whose /workspace is the router's
# FUSE mount, with the Domain's Ignored Workspace State under the Domain
# Root. Runs as the unprivileged test user; see launch_lib.sh.
# shellcheck disable=SC2031,SC2317

# node and npm from the host, for DX-2's offline install.
NPM_DIR=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
# coreutils' install for the setuid test (busybox here has no install).
IMAGE_EXTRA=(--with-tool="$(readlink -f "$(command -v node)")" --with-tree="$NPM_DIR"
	--with-tool="$(command -v install)")
. "$(dirname "${BASH_SOURCE[0]}")/launch_lib.sh"

# A repository with ignore rules, one tracked-but-ignored file and one
# ignored host file holding a secret.
make_repo() {
	git -C "$WS" init -q
	printf 'node_modules/\n*.log\n!keep.log\n' >"$WS/.gitignore"
	echo tracked >"$WS/tracked.txt"
	echo forced >"$WS/forced.log"
	git -C "$WS" add .gitignore tracked.txt
	git -C "$WS" add -f forced.log
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q -m host
	echo host-secret >"$WS/secret.log"
	mkdir -p "$WS/node_modules/hostpkg"
	echo host-module >"$WS/node_modules/hostpkg/index.js"
}

ignored_root() { echo "$DATA"/domains/*/ignored; }

# No setuid or setgid bit and no foreign owner on host-backed objects
# (spec 3.5 router policy; SR-13): chmod, install -m, tar xpf and cp -a.
test_host_objects_get_no_setid_bits_or_foreign_owners() {
	make_repo
	mkdir "$T/src"
	echo payload >"$T/src/suid"
	chmod 4755 "$T/src/suid"
	tar cf "$WS/suid.tar" -C "$T/src" suid
	# (runsc itself does not pass a chown to an ID outside its map on to
	# the router; the router's EPERM is in the unit tests. What counts is
	# the owner on the host.)
	capture launch sh -c 'cd /workspace && echo x > a && chmod 4755 a && install -m 6755 a b &&
		busybox tar xpf suid.tar && mkdir d && chmod 2775 d && echo y > /tmp/s && chmod 4755 /tmp/s &&
		cp -a /tmp/s c && echo made; busybox chown 1000:1000 a b;
		echo z > x.log && chmod 4755 x.log && stat -c %a x.log'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_contains "$OUT" made
	local f mode
	for f in a b suid d c; do
		mode=$(stat -c %a "$WS/$f")
		[ $((8#$mode & 8#6000)) = 0 ] || fail "host $f has mode $mode"
		assert_eq "$(id -u)" "$(stat -c %u "$WS/$f")" "owner of host $f"
	done
	assert_eq 755 "$(stat -c %a "$WS/a")" "the other mode bits stay"
	# the Domain's private isolated state keeps what the sandbox set
	assert_contains "$OUT" 4755
}

# A workspace name the sandbox could have made reaches the terminal and
# hc.log escaped (no implicit host authority).
test_messages_naming_workspace_paths_are_escaped() {
	make_repo
	local evil=$'d\e]52;c;cHduZWQ=\a\e[2J\xff'
	mkdir "$WS/$evil"
	head -c $((4 * 1024 * 1024 + 1)) /dev/zero | tr '\0' x >"$WS/$evil/.gitignore"
	capture launch true
	[ "$STATUS" != 0 ] || fail "a launch with an oversized ignore file succeeded"
	local logs
	logs=$(cat "$T"/run/lazaret/domains/*/hc.log 2>/dev/null)
	assert_contains "$ERR
$logs" 'd\e]52;c;cHduZWQ=\x07\e[2J\xff/.gitignore' "the path, escaped"
	if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f\xff]' <<<"$ERR$logs"; then
		fail "raw control bytes in the messages: $(LC_ALL=C grep -a $'[\x1b\x07\xff]' <<<"$ERR$logs" | od -c | head -5)"
	fi
}

# Issue 15: with the host's descriptor limit far below runsc's default
# dentry cache (50,000), a walk over more files than that limit allows is
# answered right, not with EMFILE turned into wrong answers (a 20k-file
# status printed every file as added): the cache is sized from the limit.
test_more_files_than_descriptors_are_answered_right() {
	make_repo
	python3 - "$WS/many" <<'PY'
import os, sys
for d in range(15):
    os.makedirs("%s/d%d" % (sys.argv[1], d))
    for i in range(100):
        with open("%s/d%d/f%d" % (sys.argv[1], d, i), "w") as f:
            f.write("%d.%d\n" % (d, i))
PY
	tar cf "$WS/many.tar" -C "$WS" many
	git -C "$WS" add many many.tar
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q -m many
	# 1,500 files (runsc holds two descriptors for each it has read)
	# under 1,024 descriptors for the whole Domain.
	limited_launch() { (ulimit -n 1024 && launch "$@"); }
	capture limited_launch sh -c 'cd /workspace && git status --porcelain && echo status=$? &&
		mkdir -p node_modules/x && tar xf many.tar -C node_modules/x && echo tar=$? &&
		find node_modules/x -type f | wc -l && cat node_modules/x/many/d14/f99'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_eq "status=0
tar=0
1500
14.99" "$OUT" "git status of a clean tree and tar x of 1,500 files"
}

# A directory a program holds open while another fills it lists the new
# names: gVisor reads a directory through the one descriptor it opened
# first (here by the shell's redirection), rewound for each listing.
test_a_directory_held_open_lists_what_was_made_in_it() {
	make_repo
	mkdir -p "$WS/src/many"
	for i in 0 1 2; do echo "$i" >"$WS/src/many/f$i"; done
	tar cf "$WS/small.tar" -C "$WS/src" many
	rm -r "$WS/src"
	capture launch sh -c 'cd /workspace && for d in node_modules/held held; do
		mkdir -p $d && exec 3<$d && tar xf small.tar -C $d && echo "$d: $(ls $d) $(ls $d/many | wc -l)" &&
		exec 3<&- && rm -r $d && echo removed; done'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_eq "node_modules/held: many 3
removed
held: many 3
removed" "$OUT" "names made under a held-open directory, in both backings"
	[ ! -e "$WS/held" ] && [ ! -e "$(ignored_root)/node_modules/held" ] ||
		fail "rm -r left the directory behind"
}

# Issue 15: Git inside and on the host agree on the index's stat data, so
# neither re-hashes the tree after the other wrote the index: a status
# inside leaves the host's index as it was, and after an add inside, a
# host status with the documented settings leaves that index as it was.
test_git_status_does_not_rehash_across_the_boundary() {
	make_repo
	mkdir "$WS/src"
	for i in $(seq 50); do echo "$i" >"$WS/src/f$i"; done
	touch -d '2020-01-01' "$WS"/src/* "$WS/tracked.txt" "$WS/.gitignore" "$WS/forced.log"
	git -C "$WS" add src
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q -m src
	sleep 1.1 # no entry is as new as the index (Git's racy-clean rule)
	local before after
	before=$(sha256sum <"$WS/.git/index")
	capture launch sh -c 'cd /workspace && git status --porcelain && echo clean'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_eq "clean" "$OUT" "status inside"
	after=$(sha256sum <"$WS/.git/index")
	assert_eq "$before" "$after" "the index after a status inside (re-hashed and rewritten)"
	# The other way: inside adds a file and writes the index ...
	capture launch sh -c 'cd /workspace && echo new >new.txt && touch -d 2020-01-01 new.txt && git add new.txt && echo added'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	sleep 1.1
	before=$(sha256sum <"$WS/.git/index")
	# ... and the host, with the settings docs/configuration.md gives, reads it as is.
	assert_eq "A  new.txt" "$(git -C "$WS" -c core.checkStat=minimal -c core.trustctime=false status --porcelain)"
	after=$(sha256sum <"$WS/.git/index")
	assert_eq "$before" "$after" "the index after a host status (re-hashed and rewritten)"
}

test_ignored_paths_are_isolated_and_persist() {
	make_repo
	capture launch sh -c 'mkdir -p /workspace/node_modules/pkg && echo dep > /workspace/node_modules/pkg/index.js && echo out > /workspace/build.log && echo kept > /workspace/keep.log'
	assert_eq 0 "$STATUS" "first launch (stderr: $ERR)"
	[ ! -e "$WS/node_modules/pkg" ] || fail "an ignored directory reached the host workspace"
	[ ! -e "$WS/build.log" ] || fail "an ignored file reached the host workspace"
	assert_eq kept "$(cat "$WS/keep.log")" "a negated (not ignored) file is host-backed"
	capture launch sh -c 'cat /workspace/node_modules/pkg/index.js /workspace/build.log'
	assert_eq 0 "$STATUS" "second launch (stderr: $ERR)"
	assert_eq "dep
out" "$OUT" "Ignored Workspace State persists across launches (DX-2)"
	assert_no_leftovers
}

test_host_ignored_content_is_hidden() {
	make_repo
	capture launch sh -c 'cat /workspace/secret.log'
	[ "$STATUS" != 0 ] || fail "the sandbox read an ignored host file: $OUT"
	assert_not_contains "$OUT" host-secret
	assert_contains "$ERR" "No such file or directory" "absent, not refused for another reason"
	capture launch sh -c 'ls -a /workspace && echo listed; ls /workspace/node_modules 2>&1'
	assert_contains "$OUT" listed "listing (stderr: $ERR)"
	assert_contains "$OUT" tracked.txt "the listing lists the workspace"
	assert_not_contains "$OUT" secret.log "listing shows the hidden host file"
	assert_not_contains "$OUT" hostpkg "listing shows host node_modules content"
	# Writing the same name creates the isolated object, the host's stays.
	capture launch sh -c 'echo guest > /workspace/secret.log && cat /workspace/secret.log'
	assert_eq guest "$OUT"
	assert_eq host-secret "$(cat "$WS/secret.log")" "the host's ignored file changed"
}

test_tracked_paths_stay_on_the_host() {
	make_repo
	capture launch sh -c 'cat /workspace/forced.log && echo changed > /workspace/forced.log && echo edit >> /workspace/tracked.txt'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_eq forced "$OUT" "a tracked, ignored-pattern file is host-backed"
	assert_eq changed "$(cat "$WS/forced.log")"
	assert_eq "tracked
edit" "$(cat "$WS/tracked.txt")"
}

test_git_works_through_the_router() {
	make_repo
	capture launch sh -c 'cd /workspace && echo new > new.txt && echo x > y.log && git add new.txt && git -c user.name=a -c user.email=a@a commit -q -m inside && git status --porcelain --ignored'
	assert_eq 0 "$STATUS" "git inside (stderr: $ERR)"
	assert_eq inside "$(git -C "$WS" log -1 --format=%s)"
	assert_contains "$OUT" "!! y.log" "git inside sees the isolated file as ignored"
	assert_not_contains "$OUT" "secret.log" "git inside sees the host's hidden file"
	assert_eq "" "$(git -C "$WS" status --porcelain)" "host status after the inside commit"
}

test_gitignore_change_inside_moves_the_route() {
	make_repo
	echo host-a >"$WS/a.txt"
	# The router publishes the new classification once the change settles
	# (ignorewatch.h); the sandbox waits for a.txt to vanish, at most 5 s.
	capture launch sh -c 'cd /workspace && cat a.txt && echo a.txt >> .gitignore &&
		i=0; while [ -e a.txt ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done;
		[ -e a.txt ] && echo still-visible; echo guest-a > a.txt; cat a.txt'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_eq "host-a
guest-a" "$OUT" "the host file shows, is hidden once ignored, and a new isolated file is written"
	assert_eq host-a "$(cat "$WS/a.txt")" "the host's file was neither changed nor deleted"
	assert_eq "guest-a" "$(cat "$(ignored_root)/a.txt")" "the new file lives in the Ignored Workspace State"
	# Un-ignoring it from the host moves it back: the host file shows again.
	sed -i '/^a.txt$/d' "$WS/.gitignore"
	capture launch cat /workspace/a.txt
	assert_eq host-a "$OUT" "after the rule is removed the host file is back"
}

# The router reads what the sandbox writes: it runs with no network of the
# host's, only the capabilities that serve files (chown, dac_override,
# dac_read_search, fowner, fsetid: 0x1f), none to gain by exec, of the
# developer's environment only what Git reads for the global excludes
# file, and its own program: nothing of the coordinator's memory (the
# generation's keys, the control socket's CA and TLS, the stores) is
# mapped in it.
test_the_router_is_confined() {
	make_repo
	# read once the sandbox runs: the router confines itself before it
	# serves, and the sandbox starts only after that
	launch sh -c 'touch /workspace/up; sleep 4' >/dev/null 2>&1 &
	local bg=$! pid="" k
	for k in $(seq 300); do
		[ -e "$WS/up" ] && break
		sleep 0.05
	done
	[ -e "$WS/up" ] || fail "the sandbox did not start"
	pid=$(pgrep -n -u "$(id -u)" -x lazaret-router || true)
	[ -n "$pid" ] || fail "no lazaret-router process seen"
	local st
	st=$(cat "/proc/$pid/status")
	assert_match "$st" $'CapEff:\t000000000000001f' "effective capabilities"
	assert_match "$st" $'CapPrm:\t000000000000001f' "permitted capabilities"
	assert_match "$st" $'CapBnd:\t000000000000001f' "bounding set"
	assert_match "$st" $'NoNewPrivs:\t1' "no_new_privs"
	[ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/self/ns/net)" ] ||
		fail "the router is in the host's network namespace"
	local env maps
	env=$(tr '\0' '\n' <"/proc/$pid/environ") || fail "cannot read the router's environment"
	assert_eq "HOME=$T/home" "$env" "the router's environment"
	maps=$(cat "/proc/$pid/maps") || fail "cannot read the router's memory map"
	assert_contains "$maps" "/memfd:lazaret-router" "the router runs its own program"
	assert_not_contains "$maps" "$(readlink -f "$LAZARET")" "the coordinator's program in the router"
	assert_not_contains "$maps" "libssl" "the control socket's TLS in the router"
	assert_not_contains "$maps" "libsqlite3" "SQLite in the router"
	assert_eq "lazaret-router" "$(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -d' ' -f1)" "the router's argv[0]"
	wait "$bg" || fail "the launch failed"
}

# The router parses what the sandbox writes; a bug there must not copy
# the developer's files into the workspace, nor change them where they
# are. Once confined it reads only what Git reads and changes only the
# trees it serves: the fault has the real router list the home directory,
# read the Git configuration there, and change the mode of that file and
# of one beside the workspace (by "..", from the workspace's descriptor),
# and log what happened.
test_the_router_reads_only_what_git_reads() {
	need_faults
	make_repo
	printf '[include]\n\tpath = more.inc\n' >"$T/home/.gitconfig"
	printf '*.tmp\n' >"$T/home/global-ignore"
	printf '[core]\n\texcludesFile = ~/global-ignore\n' >"$T/home/more.inc"
	echo temporary >"$WS/x.tmp"
	echo beside >"$WS/../beside-the-workspace"
	chmod 0644 "$T/home/.gitconfig" "$WS/../beside-the-workspace"
	capture env -C "$WS" -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=router-reaches-outside "$LAZARET_FAULTS" test \
		--config "$CFG" -- sh -c 'cat /workspace/x.tmp 2>&1; echo done'
	assert_eq 0 "$STATUS" "the launch's status (stderr: $ERR)"
	local log
	log=$(cat "$T"/run/lazaret/domains/*/hc.log)
	assert_contains "$log" "test fault: opening $T/home: Permission denied" "hc.log"
	assert_contains "$log" "test fault: opening $T/home/.gitconfig: opened" "hc.log"
	assert_not_contains "$log" "reads files anywhere" "hc.log"
	assert_contains "$log" "test fault: changing the mode of $T/home/.gitconfig: Read-only file system" "hc.log"
	assert_contains "$log" "test fault: changing the mode of ../beside-the-workspace: Read-only file system" \
		"hc.log"
	assert_eq 644 "$(stat -c %a "$T/home/.gitconfig")" "the mode of ~/.gitconfig"
	assert_eq 644 "$(stat -c %a "$WS/../beside-the-workspace")" "the mode of the file beside the workspace"
	# its standard error is a pipe the RS relays to hc.log, not hc.log
	assert_contains "$log" "test fault: touching its standard output: Read-only file system" "hc.log"
	assert_eq 600 "$(stat -c %a "$T"/run/lazaret/domains/*/hc.log)" "the mode of hc.log"
	# the excludes file an include names still classifies: x.tmp is
	# ignored, so the sandbox does not see the host's
	assert_contains "$OUT" "No such file" "x.tmp inside"
	assert_contains "$OUT" "done" "the command ran"
}

# A router that cannot start says why, through the report pipe the RS
# placed for its program: a corrupt index stops the launch with the
# router's own message, changes nothing and leaves nothing running.
test_a_router_that_cannot_classify_says_why() {
	make_repo
	cp "$WS/.git/index" "$T/index.good"
	printf 'DIRC\0\0\0\2not an index' >"$WS/.git/index"
	capture launch true
	assert_eq 69 "$STATUS" "launch over a corrupt index (stderr: $ERR)"
	assert_contains "$ERR" "attach_router: workspace router: classifying the workspace: " "the router's own message"
	assert_eq "$(printf 'DIRC\0\0\0\2not an index' | od -c)" "$(od -c <"$WS/.git/index")" "the index is untouched"
	cp "$T/index.good" "$WS/.git/index"
	capture launch cat /workspace/tracked.txt
	assert_eq tracked "$OUT" "a launch once the index is whole (stderr: $ERR)"
	assert_no_leftovers
}

# Ignore rules written to be slow, within every size bound (a .gitignore
# of 4 MB: 1,000 lines of '*[' and 2,000 "[:", three directories with
# 255-byte names): the first classification took about 40 s of one core
# per launch before its matching was counted. Now the launch is refused
# after 2^32 steps (seconds), saying what and where, before the router's
# start times out; without the rules it launches.
test_ignore_rules_too_costly_refuse_the_launch() {
	make_repo
	python3 -c 'import sys; sys.stdout.write(("*[" + "[:" * 1998 + "x]\n") * 1000)' >>"$WS/.gitignore"
	local d
	for d in a b c; do mkdir "$WS/$(printf "$d%.0s" $(seq 255))"; done
	capture launch true
	assert_eq 69 "$STATUS" "launch over costly ignore rules (stderr: $ERR)"
	assert_contains "$ERR" "the workspace's ignore rules take too long to match (stopped at '"
	assert_contains "$ERR" "look for a .gitignore with many long wildcard patterns"
	git -C "$WS" checkout -q .gitignore
	capture launch cat /workspace/tracked.txt
	assert_eq tracked "$OUT" "a launch once the rules are Git's usual (stderr: $ERR)"
	assert_no_leftovers
}

# A FIFO where Git reads a file: one the host has (put there by another
# program) is no ignore file and blocks no launch (the router's first
# build used to wait on it forever). FIFOs made inside never reach the host:
# gVisor keeps them in its own memory, and the router refuses one under
# such a name anyway (test_router).
test_a_fifo_where_git_reads_a_file() {
	make_repo
	mkdir "$WS/sub"
	mkfifo "$WS/sub/.gitignore"
	echo x >"$WS/sub/a.txt"
	capture launch sh -c 'cd /workspace && cat sub/a.txt && mkfifo .gitattributes && mkfifo sub/p &&
		mv sub/p .gitmodules && echo made-inside'
	assert_eq 0 "$STATUS" "launch with a FIFO .gitignore on the host (stderr: $ERR)"
	assert_eq "x
made-inside" "$OUT"
	[ ! -e "$WS/.gitattributes" ] && [ ! -e "$WS/.gitmodules" ] && [ ! -e "$WS/sub/p" ] ||
		fail "a FIFO made inside reached the host"
	rm -f "$WS/sub/.gitignore"
}

# FR-9 turns off the ignore rules only: ignored files are shared with the
# host, while the router's policy (setuid bits, Git control files,
# repositories made inside) holds all the same.
test_isolation_off_shares_ignored_files_and_keeps_the_policy() {
	make_repo
	EXTRA='isolate_ignored = false
' write_profile
	capture launch sh -c 'cd /workspace && cat secret.log; echo g > built.log; echo s > tool &&
		chmod 4755 tool; echo "[x]" >> .git/config || echo config-refused;
		git init -q scratch && echo scratch-made'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_contains "$OUT" host-secret "FR-9: the host's ignored file is visible"
	assert_eq g "$(cat "$WS/built.log")" "FR-9: ignored writes go to the host"
	assert_eq 755 "$(stat -c %a "$WS/tool")" "no setuid bit on the host"
	assert_contains "$OUT" config-refused
	assert_contains "$OUT" scratch-made
	[ ! -e "$WS/scratch/.git" ] || fail "the repository made inside reached the host"
}

test_router_loss_ends_the_generation() {
	make_repo
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- \
		sh -c 'echo before > /workspace/x.log; sleep 5; cat /workspace/x.log') >"$T/out" 2>"$T/err" &
	local job=$! i pid=""
	for i in $(seq 100); do
		# This test's router: its command line names the workspace.
		local p
		for p in $(pgrep -u "$(id -u)" -x lazaret-router || true); do
			tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "--workspace $WS " && pid=$p
		done
		[ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ] || fail "no lazaret-router process: $(ps -u "$(id -u)" -o pid,comm,args)"
	# Once the sandbox's write has landed in the isolated backing.
	for i in $(seq 300); do
		[ -e "$DATA"/domains/*/ignored/x.log ] && break
		sleep 0.1
	done
	assert_eq before "$(cat "$DATA"/domains/*/ignored/x.log)" "the write before the loss"
	kill -9 "$pid"
	local st=0
	wait "$job" || st=$?
	[ "$st" != 0 ] || fail "the command succeeded after router loss"
	capture launch cat /workspace/x.log
	assert_eq before "$OUT" "what was written before the loss survives (stderr: $ERR)"
	[ ! -e "$WS/x.log" ] || fail "router loss copied an isolated file to the host"
	assert_no_leftovers
}

# The routers' inotify watches are one budget for all running Domains: with
# the test build's 512 watches (two chunks of 256), another Domain of this
# workspace (a second profile) watching its 300 directories holds both
# chunks; this Domain's router then watches none and says so in hc.log,
# and its launch still works. Once both ended, no chunk is held.
test_the_watch_budget_is_shared_by_every_domain() {
	need_faults
	mkdir -p "$WS/d"
	# shellcheck disable=SC2046 # 300 names
	(cd "$WS/d" && mkdir $(seq 300))
	cat >>"$CFG" <<-EOF
		[profiles.other]
		image = "oci:$IMG/img:latest"
	EOF
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=watch-least-host "$LAZARET_FAULTS" \
		other --config "$CFG" -- sleep 20) >/dev/null 2>&1 &
	local bg=$!
	await_slots "$DATA/watch.slots" 2 "chunks the other Domain's router holds"
	capture env -C "$WS" -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=watch-least-host "$LAZARET_FAULTS" test \
		--config "$CFG" -- ls -d /workspace/d/7
	assert_eq 0 "$STATUS" "the launch beside it (stderr: $ERR)"
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" \
		"watching 0 workspace directories, no more (a quarter of the user's inotify watches for all Domains" \
		"hc.log"
	wait "$bg" || fail "the other Domain's launch failed"
	await_slots "$DATA/watch.slots" 0 "chunks held once both Domains ended"
}

# DX-2: npm install from a local tarball, offline, into the ignored
# node_modules; it persists across launches and never reaches the host.
test_npm_install_lands_in_isolated_state() {
	make_repo
	mkdir -p "$T/src/package"
	printf '{"name":"localdep","version":"1.0.0","main":"index.js"}\n' >"$T/src/package/package.json"
	echo 'module.exports = "from-localdep";' >"$T/src/package/index.js"
	tar czf "$WS/localdep-1.0.0.tgz" -C "$T/src" package
	printf '{"name":"app","version":"1.0.0","dependencies":{"localdep":"file:localdep-1.0.0.tgz"}}\n' >"$WS/package.json"
	git -C "$WS" add package.json localdep-1.0.0.tgz
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q -m deps
	capture launch sh -c 'cd /workspace && HOME=/tmp npm_config_cache=/tmp/npmcache node '"$NPM_DIR"'/bin/npm-cli.js install --offline --no-audit --no-fund --ignore-scripts'
	assert_eq 0 "$STATUS" "npm install (stdout: $OUT stderr: $ERR)"
	[ ! -e "$WS/node_modules/localdep" ] || fail "npm's node_modules reached the host workspace"
	assert_eq "host-module" "$(cat "$WS/node_modules/hostpkg/index.js")" "the host's node_modules is untouched"
	[ -f "$WS/package-lock.json" ] || fail "package-lock.json (not ignored) should be on the host"
	capture launch sh -c 'cd /workspace && node -e "console.log(require(\"localdep\"))" && ls node_modules'
	assert_eq 0 "$STATUS" "second launch (stderr: $ERR)"
	assert_contains "$OUT" from-localdep "the install persists across launches"
	assert_not_contains "$OUT" hostpkg "host node_modules content is visible inside"
	[ -f "$(ignored_root)/node_modules/localdep/index.js" ] || fail "the install is not in the Ignored Workspace State"
}

# Classification parity (spec 3.5): with nested .gitignore files,
# negations, info/exclude, the global excludes file, a tracked-but-ignored
# file, a nested repository and non-UTF-8 names, the files visible inside
# are exactly the host's files Git does not report ignored (git ls-files
# -o -i, in the outer and the nested repository), byte for byte.
test_the_view_inside_matches_git() {
	local g=(git -C "$WS" -c user.name=h -c user.email=h@h)
	"${g[@]}" init -q
	mkdir -p "$WS/a/b" "$WS/build" "$WS/c/deep" "$WS/c/d" "$WS/vendor/nested" "$T/home/.config/git"
	printf '*.o\n!keep.o\nbuild/\n/top-only.txt\n**/deep/**\n' >"$WS/.gitignore"
	printf '*.tmp\n!important.tmp\n' >"$WS/a/.gitignore"
	printf '!*.o\n' >"$WS/a/b/.gitignore"
	printf 'excluded-by-info.txt\n' >"$WS/.git/info/exclude"
	printf '*.swp\n' >"$T/home/.config/git/ignore"
	local f
	for f in x.o keep.o a/y.o a/b/z.o a/t.tmp a/important.tmp build/out.txt top-only.txt \
		a/top-only.txt c/deep/f.txt c/d/g.txt excluded-by-info.txt editor.swp normal.txt \
		$'caf\xe9.o' $'na\xefve.txt'; do
		echo "$f" >"$WS/$f"
	done
	"${g[@]}" add .gitignore a/.gitignore a/b/.gitignore normal.txt
	"${g[@]}" add -f a/t.tmp
	"${g[@]}" commit -q -m host
	git -C "$WS/vendor/nested" init -q
	printf '*.log\n' >"$WS/vendor/nested/.gitignore"
	echo n >"$WS/vendor/nested/n.log"
	echo n >"$WS/vendor/nested/n.txt"
	echo s >"$WS/vendor/nested/s.swp"
	local host_git=(env HOME="$T/home" XDG_CONFIG_HOME= git)
	{
		"${host_git[@]}" -C "$WS" ls-files -z -o -i --exclude-standard
		"${host_git[@]}" -C "$WS/vendor/nested" ls-files -z -o -i --exclude-standard | sed -z 's,^,vendor/nested/,'
	} | tr '\0' '\n' | LC_ALL=C sort >"$T/ignored"
	(cd "$WS" && find . \( -name .git -prune \) -o -type f -print | sed 's,^\./,,' | LC_ALL=C sort) >"$T/all"
	LC_ALL=C comm -23 "$T/all" "$T/ignored" >"$T/want"
	grep -q 'a/t.tmp' "$T/want" || fail "fixture: the tracked-but-ignored file should be visible"
	grep -q 'vendor/nested/n.txt' "$T/want" || fail "fixture: the nested repository's file should be visible"
	[ "$(wc -l <"$T/ignored")" -ge 9 ] || fail "fixture: too few ignored files: $(cat "$T/ignored")"
	capture launch sh -c 'cd /workspace && find . \( -name .git -prune \) -o -type f -print'
	assert_eq 0 "$STATUS" "find inside (stderr: $ERR)"
	printf '%s\n' "$OUT" | sed 's,^\./,,' | LC_ALL=C sort >"$T/got"
	if ! cmp -s "$T/want" "$T/got"; then
		fail "the view inside differs from Git's: $({ diff "$T/want" "$T/got" || true; } | cat -v)"
	fi
	assert_eq "$(wc -l <"$T/want")" "$(wc -l <"$T/got")" "visible file count"
}

# Spec 3.5: tracking an isolated-only file would leave the host index
# naming a path the host does not have; Git's index-lock rename is refused
# with EBUSY, git add fails, and nothing changes on the host.
# The workspace is a linked worktree (its common directory and its
# info/exclude live elsewhere) with core.ignoreCase=true: the view inside
# still equals Git's, path by path.
test_the_view_of_a_linked_worktree_matches_git() {
	local main=$T/main
	local g=(git -C "$main" -c user.name=h -c user.email=h@h)
	mkdir "$main"
	"${g[@]}" init -q
	"${g[@]}" config core.ignoreCase true
	printf '*.LOG\nBuild/\n' >"$main/.gitignore"
	echo n >"$main/normal.txt"
	"${g[@]}" add .gitignore normal.txt
	"${g[@]}" commit -q -m main
	printf 'from-common-exclude.txt\n' >"$main/.git/info/exclude"
	rmdir "$WS"
	"${g[@]}" worktree add -q "$WS"
	mkdir -p "$WS/build" "$WS/sub"
	local f
	for f in a.log B.Log sub/c.LOG build/out.txt from-common-exclude.txt sub/keep.txt; do
		echo "$f" >"$WS/$f"
	done
	(env HOME="$T/home" XDG_CONFIG_HOME= git -C "$WS" ls-files -z -o -i --exclude-standard |
		tr '\0' '\n' | LC_ALL=C sort) >"$T/ignored"
	[ "$(wc -l <"$T/ignored")" -ge 5 ] || fail "fixture: too few ignored files: $(cat "$T/ignored")"
	(cd "$WS" && find . -name .git -prune -o -type f -print | sed 's,^\./,,' | LC_ALL=C sort) >"$T/all"
	LC_ALL=C comm -23 "$T/all" "$T/ignored" >"$T/want"
	capture launch sh -c 'cd /workspace && find . -name .git -prune -o -type f -print'
	assert_eq 0 "$STATUS" "find inside (stderr: $ERR)"
	printf '%s\n' "$OUT" | sed 's,^\./,,' | LC_ALL=C sort >"$T/got"
	if ! cmp -s "$T/want" "$T/got"; then
		fail "the view inside differs from Git's: $({ diff "$T/want" "$T/got" || true; } | cat -v)"
	fi
}

test_git_add_of_an_isolated_file_is_refused() {
	make_repo
	local before
	before=$(git -C "$WS" ls-files --stage | sha256sum)
	capture launch sh -c 'cd /workspace && echo x > z.log && git add -f z.log; echo "rc=$?"; cat z.log'
	assert_contains "$OUT" "x" "the isolated file stays readable"
	assert_not_contains "$OUT" "rc=0" "git add -f of an isolated-only file succeeded"
	assert_contains "$OUT$ERR" "index" "git names the index it could not write"
	assert_eq "$before" "$(git -C "$WS" ls-files --stage | sha256sum)" "the host index changed"
	[ ! -e "$WS/.git/index.lock" ] || fail "an index.lock was left on the host"
	[ ! -e "$WS/z.log" ] || fail "the isolated file reached the host"
}

# What else in a new index host Git trusts (spec 3.5 index guard): Git
# inside writes no extension the guard refuses even where the repository
# asks for an untracked cache and threaded index reads, so add and commit
# work; an index whose cache tree names a tree other than its entries'
# (one more file, which host `git commit` would commit unseen), or that
# marks a file assume-unchanged, is refused and the host's index stays as
# it was.
test_a_forged_cache_tree_is_refused_and_git_inside_passes() {
	make_repo
	# The forgery, made on the host from a staged change: the root's
	# cache-tree id replaced by a tree with a backdoor.
	echo more >>"$WS/tracked.txt"
	git -C "$WS" add tracked.txt
	git -C "$WS" write-tree >/dev/null
	local evil
	evil=$(printf '100644 blob %s\tbackdoor\n' "$(echo evil | git -C "$WS" hash-object -w --stdin)" |
		git -C "$WS" mktree)
	python3 - "$WS/.git/index" "$WS/forged.idx" "$evil" <<'PY'
import hashlib, sys
b = bytearray(open(sys.argv[1], 'rb').read()[:-20])
t = b.index(b'TREE') + 8
nl = b.index(b'\n', t)
assert b[t] == 0 and b[t + 1] != ord('-'), 'the root is valid'
b[nl + 1:nl + 21] = bytes.fromhex(sys.argv[3])
open(sys.argv[2], 'wb').write(b + hashlib.sha1(b).digest())
PY
	git -C "$WS" reset -q
	git -C "$WS" checkout -q tracked.txt
	git -C "$WS" config core.untrackedCache true
	git -C "$WS" config index.threads 2
	git -C "$WS" status --porcelain >/dev/null
	grep -q UNTR "$WS/.git/index" && grep -q EOIE "$WS/.git/index" || fail "the host's Git wrote no UNTR or EOIE"
	capture launch sh -c 'cd /workspace && echo n >n.txt && git add n.txt &&
		git -c user.name=s -c user.email=s@s commit -q -m inside && echo committed
		before=$(sha256sum <.git/index)
		cp forged.idx .git/index.lock && mv .git/index.lock .git/index; echo "mv=$?"
		rm -f .git/index.lock; [ "$(sha256sum <.git/index)" = "$before" ] && echo unchanged
		git update-index --assume-unchanged tracked.txt; echo "marked=$?"'
	assert_contains "$OUT" "committed" "add and commit inside (stderr: $ERR)"
	assert_eq "n.txt" "$(git -C "$WS" show --name-only --format= HEAD)" "the commit made inside"
	assert_contains "$OUT" "mv=" "the forged index step ran (stderr: $ERR)"
	assert_not_contains "$OUT" "mv=0" "the forged index replaced the index"
	assert_contains "$OUT" "unchanged" "the index after the refused rename"
	assert_contains "$(cat "$T"/run/lazaret/domains/*/hc.log)" "names trees other than its entries" "hc.log"
	# Nor may Git inside mark a file so that host Git skips its changes.
	assert_contains "$OUT" "marked=" "the assume-unchanged step ran (stderr: $ERR)"
	assert_not_contains "$OUT" "marked=0" "git update-index --assume-unchanged inside succeeded"
	assert_eq "H tracked.txt" "$(git -C "$WS" ls-files -v tracked.txt)" "the host's index entry"
	# The host's own Git commits what it staged, not the backdoor.
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q --allow-empty -m host
	assert_not_contains "$(git -C "$WS" ls-tree --name-only HEAD)" "backdoor" "the host's commit"
}

# The same refusal for the indexes of a linked worktree inside the
# workspace (.git/worktrees/<name>/index) and of a submodule
# (.git/modules/<name>/index): each governs its own worktree's paths.
test_git_add_in_a_linked_worktree_or_submodule_is_refused() {
	make_repo
	local g=(git -C "$WS" -c user.name=h -c user.email=h@h)
	mkdir "$T/src-sub"
	git -C "$T/src-sub" init -q
	echo s >"$T/src-sub/s.txt"
	echo '*.log' >"$T/src-sub/.gitignore"
	git -C "$T/src-sub" add s.txt .gitignore
	git -C "$T/src-sub" -c user.name=h -c user.email=h@h commit -q -m s
	"${g[@]}" -c protocol.file.allow=always submodule add -q "$T/src-sub" mod
	"${g[@]}" commit -q -m mod
	"${g[@]}" worktree add -q lw
	local wt_before sub_before
	wt_before=$(sha256sum <"$WS/.git/worktrees/lw/index")
	sub_before=$(sha256sum <"$WS/.git/modules/mod/index")
	# The worktree's .git file names its host path, which leads to
	# /workspace inside (the init's link).
	capture launch sh -c 'cd /workspace/lw && git rev-parse --git-dir && echo x > z.log &&
		git add -f z.log; echo "wt=$?"
		cd /workspace/mod && echo y > z.log && git add -f z.log; echo "sub=$?"
		cat /workspace/lw/z.log /workspace/mod/z.log'
	assert_contains "$OUT" "/workspace/.git/worktrees/lw" "Git inside found the worktree's Git directory (stderr: $ERR)"
	assert_contains "$OUT" "wt=" "the worktree step ran (stderr: $ERR)"
	assert_not_contains "$OUT" "wt=0" "git add -f in the linked worktree succeeded"
	assert_contains "$OUT" "sub=" "the submodule step ran (stderr: $ERR)"
	assert_not_contains "$OUT" "sub=0" "git add -f in the submodule succeeded"
	assert_eq "$wt_before" "$(sha256sum <"$WS/.git/worktrees/lw/index")" "the worktree's index changed"
	assert_eq "$sub_before" "$(sha256sum <"$WS/.git/modules/mod/index")" "the submodule's index changed"
	[ ! -e "$WS/.git/worktrees/lw/index.lock" ] || fail "an index.lock was left in the worktree's Git directory"
	[ ! -e "$WS/.git/modules/mod/index.lock" ] || fail "an index.lock was left in the submodule's Git directory"
	[ ! -e "$WS/lw/z.log" ] && [ ! -e "$WS/mod/z.log" ] || fail "an isolated file reached the host"
}

# Spec 3.5's Git contract: a linked worktree made on the host works inside
# (its .git file names the host path, which the init links to /workspace),
# and what is committed there is the host's.
test_git_works_in_a_linked_worktree() {
	make_repo
	git -C "$WS" worktree add -q lw
	capture launch sh -c 'readlink "$1" && cd /workspace/lw && echo wt >wt.txt && git add wt.txt &&
		git -c user.name=s -c user.email=s@s commit -q -m in-worktree && git status --porcelain &&
		echo "rc=$?"' sh "$WS"
	assert_contains "$OUT" "rc=0" "Git in the linked worktree (stderr: $ERR)"
	assert_eq "/workspace" "$(head -n 1 <<<"$OUT")" "the workspace's host path inside"
	assert_eq "in-worktree" "$(git -C "$WS/lw" log -1 --format=%s)" "the worktree's commit on the host"
	assert_eq "" "$(git -C "$WS/lw" status --porcelain)" "the worktree's status on the host"
}

# The operation contract (spec 3.5) inside a real sandbox: node runs
# fixtures/router_corpus.js on /workspace, then the host checks where
# every object landed.
test_operation_corpus_inside_the_sandbox() {
	git -C "$WS" init -q
	printf '*.ign\niso/\n' >"$WS/.gitignore"
	cp "$FIX/router_corpus.js" "$WS/corpus.js"
	git -C "$WS" add .gitignore corpus.js
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q -m corpus
	capture launch node /workspace/corpus.js
	assert_eq 0 "$STATUS" "corpus inside: $OUT $ERR"
	assert_contains "$OUT" "corpus: all passed"
	local iso
	iso=$(ignored_root)
	assert_eq "host bytes" "$(cat "$WS/c-host.txt")" "host-routed file on the host"
	assert_eq "isolated bytes" "$(cat "$iso/c-iso.ign")" "isolated file in ignored/"
	[ ! -e "$WS/c-iso.ign" ] || fail "an isolated file reached the host"
	[ ! -e "$iso/c-host.txt" ] || fail "a host file was written to ignored/"
	[ -f "$iso/iso/deep/er/f" ] && [ ! -e "$WS/iso" ] || fail "the ignored directory is not isolated"
	[ -f "$WS/dir/sub/g.txt" ] && [ -f "$iso/dir/sub/g.ign" ] && [ ! -e "$WS/dir/sub/g.ign" ] ||
		fail "mixed directory split wrongly"
	assert_eq stay "$(cat "$WS/x-host.txt")" "EXDEV rename left the host source"
	assert_eq stay "$(cat "$iso/x-iso.ign")" "EXDEV rename left the isolated source"
	[ ! -e "$iso/x-moved.ign" ] && [ ! -e "$WS/x-moved.txt" ] || fail "a cross-backing rename happened"
	assert_eq /etc/hostname "$(readlink "$WS/s.txt")" "host symlink stored as written"
	assert_eq target-does-not-exist "$(readlink "$iso/s.ign")" "isolated symlink stored as written"
	assert_eq "copy me" "$(cat "$iso/cp.ign")"
	[ ! -e "$WS/both" ] || fail "rmdir left the directory"
}

# Concurrent mutation: the host edits a tracked file while the sandbox
# polls it, and reads what the sandbox writes while it runs.
test_host_and_sandbox_mutate_concurrently() {
	git -C "$WS" init -q
	echo v1 >"$WS/live.txt"
	git -C "$WS" add live.txt
	git -C "$WS" -c user.name=h -c user.email=h@h commit -q -m live
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- sh -c '
		echo started > /workspace/from-sandbox.txt
		i=0; while [ $i -lt 150 ]; do grep -q v2 /workspace/live.txt && { echo seen-v2; break; }; sleep 0.1; i=$((i+1)); done
		echo done >> /workspace/from-sandbox.txt') >"$T/out" 2>"$T/err" &
	local job=$! i
	for i in $(seq 300); do
		[ -s "$WS/from-sandbox.txt" ] && break
		sleep 0.1
	done
	assert_eq started "$(cat "$WS/from-sandbox.txt")" "the host sees the sandbox's write while it runs"
	echo v2 >"$WS/live.txt"
	local st=0
	wait "$job" || st=$?
	assert_eq 0 "$st" "launch: $(cat "$T/err")"
	assert_eq seen-v2 "$(cat "$T/out")" "the sandbox sees the host's edit"
	assert_eq "started
done" "$(cat "$WS/from-sandbox.txt")"
}

t_run "host-backed objects get no setuid or setgid bit and no foreign owner" test_host_objects_get_no_setid_bits_or_foreign_owners
t_run "the routers' inotify watches are one budget for every Domain" test_the_watch_budget_is_shared_by_every_domain
t_run "more files than descriptors are answered right" test_more_files_than_descriptors_are_answered_right
t_run "git status does not re-hash across the boundary" test_git_status_does_not_rehash_across_the_boundary
t_run "a directory held open lists what was made in it, and rm -r empties it" test_a_directory_held_open_lists_what_was_made_in_it
t_run "ignored paths are isolated and persist across launches" test_ignored_paths_are_isolated_and_persist
t_run "messages naming workspace paths are escaped" test_messages_naming_workspace_paths_are_escaped
t_run "ignored host content is hidden from the sandbox" test_host_ignored_content_is_hidden
t_run "tracked paths stay on the host" test_tracked_paths_stay_on_the_host
t_run "git works through the router" test_git_works_through_the_router
t_run "a .gitignore change inside moves the route without copying" test_gitignore_change_inside_moves_the_route
t_run "the router runs confined: no host network, file capabilities only" test_the_router_is_confined
t_run "the router reads only what Git reads" test_the_router_reads_only_what_git_reads
t_run "a router that cannot classify says why, and nothing changes" test_a_router_that_cannot_classify_says_why
t_run "ignore rules too costly to match refuse the launch, saying where" test_ignore_rules_too_costly_refuse_the_launch
t_run "a FIFO where Git reads a file blocks no launch and cannot be made inside" test_a_fifo_where_git_reads_a_file
t_run "isolate_ignored = false shares ignored files and keeps the policy" test_isolation_off_shares_ignored_files_and_keeps_the_policy
t_run "router loss ends the generation and loses nothing" test_router_loss_ends_the_generation
t_run "npm install offline lands in the Ignored Workspace State (DX-2)" test_npm_install_lands_in_isolated_state
t_run "the view inside matches Git's classification, byte for byte" test_the_view_inside_matches_git
t_run "the view of a linked worktree with core.ignoreCase matches Git's" test_the_view_of_a_linked_worktree_matches_git
t_run "git add -f of an isolated-only file is refused (EBUSY), nothing changes" test_git_add_of_an_isolated_file_is_refused
t_run "git add -f in a linked worktree or a submodule is refused the same way" test_git_add_in_a_linked_worktree_or_submodule_is_refused
t_run "a forged cache tree is refused; Git inside writes what the index guard reads" test_a_forged_cache_tree_is_refused_and_git_inside_passes
t_run "Git works in a linked worktree made on the host" test_git_works_in_a_linked_worktree
t_run "the operation corpus inside a sandbox lands in the routed backings" test_operation_corpus_inside_the_sandbox
t_run "host and sandbox mutate the workspace concurrently" test_host_and_sandbox_mutate_concurrently
t_done
