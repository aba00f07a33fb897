#!/usr/bin/env bash
# End-to-end tests of `lazaret state list` and `lazaret state reset`
# (issue 13, spec 3.9, FR-11, DX-6, OR-5): real sandboxes write into their
# State Anchors, the CLI lists and resets them, and a reset killed midway
# (lazaret-faults, LAZARET_TEST_FAULT=reset-after-rename) leaves either the
# old state or a new empty one.
# Needs: LAZARET, LAZARET_FAULTS, E2E_ROOT, python3, umoci, unshare.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/launch_lib.sh"

# Marks in two persistent directories; returns once the Domain has ended.
mark_state() {
	capture launch sh -c 'mkdir -p /usr/local/lz && echo usr > /usr/local/lz/mark &&
		echo etc > /etc/lz-mark && head -c 1048576 /dev/zero > /usr/local/lz/big'
	assert_eq 0 "$STATUS" "writing state: $ERR"
	assert_no_processes
}

marks() {
	capture launch sh -c 'cat /usr/local/lz/mark /etc/lz-mark 2>/dev/null; true'
	printf '%s' "$OUT"
}

domain_dir() { echo "$DATA"/domains/*; }
# The trees an interrupted reset set aside in the Domain's anchor/.
set_aside() { find "$(domain_dir)/anchor" -mindepth 1 -maxdepth 1 -name '.reset-*'; }
capture_in_ws() { local here=$PWD; cd "$WS" && capture "$@"; cd "$here" || return; }

test_list_shows_the_domain_and_its_sizes() {
	capture lz state list
	assert_eq 0 "$STATUS"
	assert_contains "$OUT" "no Domains yet"
	mark_state
	capture lz state list
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$OUT" "Domain $(basename "$(domain_dir)")"
	assert_contains "$OUT" "profile    test"
	assert_contains "$OUT" "workspace  $WS"
	assert_contains "$OUT" "leases     0"
	assert_match "$OUT" "anchor +/usr +1\\.[0-9] MiB"
	assert_match "$OUT" "anchor +/etc +[0-9.]+ (B|KiB)"
	assert_not_contains "$OUT" "(in use)"
	capture lz state list --json
	assert_eq 0 "$STATUS"
	python3 -c '
import json, sys
d = json.load(sys.stdin)["domains"][0]
assert d["profile"] == "test", d
usr = [a for a in d["anchors"] if a["path"] == "/usr"][0]
assert usr["upper"]["bytes"] >= 1048576, usr
assert d["active"] is False and d["leases"] == 0
' <<<"$OUT" || fail "state list --json: $OUT"
}

test_list_marks_a_domain_in_use_and_a_foreign_one() {
	mark_state
	(launch sleep 6) &
	local cli=$!
	sleep 3
	capture lz state list --no-sizes
	assert_contains "$OUT" "(in use)"
	assert_contains "$OUT" "leases     1"
	wait "$cli"
	# An identity that does not derive its Domain Root's name: listed as
	# foreign, nothing else read from it.
	local other
	other=$DATA/domains/$(printf '%064d' 7)
	mkdir -m 0700 "$other"
	cp "$(domain_dir | tr ' ' '\n' | grep -v "$other" | head -n 1)/identity" "$other/identity"
	capture lz state list --no-sizes
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$OUT" "Domain $(printf '%064d' 7)"
	assert_contains "$OUT" "names another Domain"
}

test_inspect_shows_changes_not_contents() {
	capture lz state inspect --profile test
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$OUT" "no kept state"
	capture launch sh -c 'mkdir -p /usr/local/lz && echo secret-content > /usr/local/lz/mark &&
		echo more >> /etc/passwd && rm /etc/group && mkdir -p /opt/d && ln -s /etc/passwd /root/link'
	assert_eq 0 "$STATUS" "$ERR"
	assert_no_processes
	capture lz state inspect --profile test
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$OUT" "compared with prepared image"
	assert_contains "$OUT" "  added    /usr/local/lz/mark  (15 B)"
	assert_contains "$OUT" "  changed  /etc/passwd"
	assert_contains "$OUT" "  deleted  /etc/group"
	assert_contains "$OUT" "  added    /opt/d  (directory)"
	assert_contains "$OUT" "  added    /root/link  (symlink)"
	assert_not_contains "$OUT" "secret-content"
	# One directory, bounded, as JSON.
	capture lz state inspect --profile test /usr --max 1 --json
	assert_eq 0 "$STATUS" "$ERR"
	python3 -c '
import json, sys
d = json.load(sys.stdin)
[a] = d["anchors"]
assert a["path"] == "/usr" and a["total"] == 3 and len(a["changes"]) == 1, a
assert a["changes"][0]["path"] == "/usr/local", a
' <<<"$OUT" || fail "state inspect --json: $OUT"
	capture lz state inspect --profile test /usr --max 1
	assert_contains "$OUT" "... and 2 more"
}

test_verify_passes_then_finds_each_problem() {
	mark_state
	capture lz state verify --profile test
	assert_eq 0 "$STATUS" "$OUT $ERR"
	assert_contains "$OUT" "verified: no problem found"
	assert_contains "$OUT" "ok   identity      profile test, workspace $WS"
	assert_contains "$OUT" "ok   domain store  intact"
	assert_contains "$OUT" "ok   leases        none held"
	assert_match "$OUT" "ok   anchor +/usr: 2 files"
	# In use: refused, not verified.
	(launch sleep 6) &
	local cli=$!
	sleep 3
	capture lz state verify --profile test
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "the Domain is in use"
	wait "$cli"
	assert_no_processes
	# A symlinked upper layer, and a foreign identity: each found and named.
	local dom upper
	dom=$(domain_dir)
	upper=$dom/anchor/usr/upper
	in_ns mv "$upper" "$upper.moved"
	ln -s /etc "$upper"
	capture lz state verify --profile test --json
	assert_eq 1 "$STATUS"
	python3 -c '
import json, sys
d = json.load(sys.stdin)
bad = [c for c in d["checks"] if not c["ok"]]
assert len(bad) == 1 and bad[0]["check"] == "anchor" and "/usr: its upper layer is not a directory" in bad[0]["detail"], bad
' <<<"$OUT" || fail "state verify --json: $OUT"
	rm "$upper"
	in_ns mv "$upper.moved" "$upper"
	cp "$dom/identity" "$T/identity.saved"
	python3 -c '
import json, sys
p = sys.argv[1]; d = json.load(open(p)); d["profile"] = "other"; open(p, "w").write(json.dumps(d))
' "$dom/identity"
	# Verification names it; a launch refuses the Domain.
	capture lz state verify --profile test
	assert_eq 1 "$STATUS"
	assert_contains "$OUT" "FAIL identity"
	assert_contains "$OUT" "names another Domain"
	capture launch true
	assert_eq 69 "$STATUS"
	assert_contains "$ERR" "names another Domain"
	cp "$T/identity.saved" "$dom/identity"
	capture lz state verify --profile test
	assert_eq 0 "$STATUS" "$OUT $ERR"
	assert_contains "$OUT" "ok   volume record 0 writable volume sources recorded"
	# A damaged volume record is named.
	printf '{"lazaret_volumes":1,"sources":["relative"]}' >"$dom/volumes"
	chmod 0600 "$dom/volumes"
	capture lz state verify --profile test
	assert_eq 1 "$STATUS"
	assert_contains "$OUT" "FAIL volume record the Domain's volume record is malformed"
	rm "$dom/volumes"
	capture lz state verify --profile test
	assert_eq 0 "$STATUS" "$OUT $ERR"
}

test_reset_one_directory_keeps_the_others() {
	mark_state
	assert_eq "usr
etc" "$(marks)"
	# Named twice (the second with a trailing slash): reset once.
	capture lz state reset --profile test /usr /usr/ --yes
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$ERR" "Domain     $(basename "$(domain_dir)")"
	assert_contains "$ERR" "    /usr"
	assert_not_contains "$ERR" "    /etc"
	assert_contains "$ERR" "reset 1 State Anchor"
	assert_eq "etc" "$(marks)"
	assert_eq "" "$(set_aside)" "set-aside trees left"
}

test_reset_all() {
	mark_state
	# A tree 1,200 directories deep in a State Anchor (one mkdir -p of
	# d/d/..., 2,400 bytes) is removed whole: removal used to stop at
	# 1,024 levels, and every later reset refused on the tree it had set
	# aside.
	local deep
	deep=$(printf 'd/%.0s' $(seq 1200))
	capture launch mkdir -p "/usr/local/$deep"
	assert_eq 0 "$STATUS" "the deep tree (stderr: $ERR)"
	capture lz state reset --profile test --all --yes
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$ERR" "    /etc"
	assert_contains "$ERR" "    /usr"
	assert_eq "" "$(set_aside)" "set-aside trees left"
	assert_eq "" "$(marks)"
}

test_reset_refusals_change_nothing() {
	mark_state
	# Not a persistent directory of the profile.
	capture lz state reset --profile test /srv --yes
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "/srv is not a persistent directory of this profile"
	# No terminal to ask and no --yes.
	capture lz state reset --profile test /usr </dev/null
	assert_eq 64 "$STATUS"
	assert_contains "$ERR" "confirm with --yes"
	# In use.
	(launch sleep 6) &
	local cli=$!
	sleep 3
	capture lz state reset --profile test --all --yes
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "the Domain is in use"
	wait "$cli"
	assert_eq "usr
etc" "$(marks)"
	# A State Anchor replaced by a symlink to a tree outside: refused, and
	# the tree it points to is untouched.
	local anchor
	anchor=$(domain_dir)/anchor/usr
	mkdir "$T/outside"
	echo keep >"$T/outside/file"
	in_ns mv "$anchor" "$anchor.moved"
	ln -s "$T/outside" "$anchor"
	capture lz state reset --profile test /usr --yes
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "not a directory"
	assert_eq keep "$(cat "$T/outside/file")"
	rm "$anchor"
	in_ns mv "$anchor.moved" "$anchor"
	assert_eq "usr
etc" "$(marks)"
}

test_a_reset_killed_midway_leaves_new_empty_state() {
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS is not built"
	mark_state
	# Killed before its rename: the state is as it was.
	capture_in_ws env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=reset-before-rename \
		"$LAZARET_FAULTS" state reset --profile test /usr --yes --config "$CFG"
	assert_eq 137 "$STATUS" "the reset was not killed at the fault: $ERR"
	assert_eq "usr
etc" "$(marks)"
	assert_no_processes
	# Killed after it: the anchor is set aside whole.
	capture_in_ws env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=reset-after-rename \
		"$LAZARET_FAULTS" state reset --profile test /usr --yes --config "$CFG"
	assert_eq 137 "$STATUS" "the reset was not killed at the fault: $ERR"
	# OR-5: the anchor is gone, not half-removed; the next launch starts
	# it empty.
	[ -n "$(set_aside)" ] || fail "nothing was set aside"
	assert_eq "etc" "$(marks)"
	# The next reset removes what the killed one set aside.
	capture lz state reset --profile test /etc --yes
	assert_eq 0 "$STATUS" "$ERR"
	assert_eq "" "$(set_aside)" "set-aside trees left"
	assert_eq "" "$(marks)"
}

# A reset of two anchors (done in sorted order) whose second cannot be
# set aside says which was reset and which was not, and that is what the
# next launch sees.
test_a_reset_failing_midway_says_what_it_reset() {
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS is not built"
	mark_state
	capture_in_ws env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=reset-second-rename-fails \
		"$LAZARET_FAULTS" state reset --profile test /usr /etc --yes --config "$CFG"
	assert_eq 1 "$STATUS" "$ERR"
	assert_contains "$ERR" "set aside the State Anchor of /usr: Input/output error; reset: /etc; not reset: /usr"
	assert_eq "usr" "$(marks)"
	assert_eq "" "$(set_aside)" "set-aside trees left"
}

test_rm_removes_a_domain_whose_workspace_is_gone() {
	mark_state
	local id
	id=$(basename "$(domain_dir)")
	# The workspace still exists: refused.
	capture lz state rm "$id" --yes
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "still exists"
	# Not an ID, and no such Domain.
	capture lz state rm ../x --yes
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "is not a Domain ID"
	capture lz state rm "$(printf '%064d' 5)" --yes
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "no such Domain"
	# The workspace goes; without --yes and a terminal, nothing happens.
	mv "$WS" "$T/ws.moved"
	mkdir "$T/elsewhere"
	local here=$PWD
	cd "$T/elsewhere" || return
	# A dangling link left at its path: not gone, for the list as for rm.
	ln -s "$T/nowhere" "$WS"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state list --config "$CFG"
	assert_contains "$OUT" "workspace  $WS"
	assert_not_contains "$OUT" "(gone)"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state rm "$id" --yes --config "$CFG"
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "still exists"
	rm "$WS"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state rm "$id" --config "$CFG" </dev/null
	assert_eq 64 "$STATUS"
	assert_contains "$ERR" "workspace  $WS  (gone)"
	[ -d "$DATA/domains/$id" ] || fail "removed without confirmation"
	# The workspace made again between the check and the Domain lock
	# (lazaret-faults does it there): checked again under the lock.
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS is not built"
	capture env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=rm-workspace-returns "$LAZARET_FAULTS" state rm "$id" \
		--yes --config "$CFG"
	assert_eq 1 "$STATUS" "state rm while the workspace came back: $ERR"
	assert_contains "$ERR" "still exists"
	[ -d "$DATA/domains/$id" ] || fail "removed although its workspace came back"
	rmdir "$WS"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state rm "$id" --yes --config "$CFG"
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$ERR" "removed Domain $id"
	[ ! -e "$DATA/domains/$id" ] || fail "the Domain Root is still there"
	assert_eq "" "$(ls -A "$DATA/domains")" "left in domains/"
	[ ! -e "$T/run/lazaret/domains/$id" ] || fail "its runtime directory is still there"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state list --config "$CFG"
	assert_contains "$OUT" "no Domains yet"
	cd "$here" || return
	mv "$T/ws.moved" "$WS"
}

# A removal killed once the Domain is set aside leaves it gone from the
# list; state rm of it again deletes what was set aside and its runtime
# directory.
test_rm_finishes_an_interrupted_removal() {
	mark_state
	local id
	id=$(basename "$(domain_dir)")
	mv "$WS" "$T/ws.moved"
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS is not built"
	capture env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=rm-after-rename "$LAZARET_FAULTS" state rm "$id" \
		--yes --config "$CFG"
	assert_eq 137 "$STATUS" "the removal was not killed at the fault: $ERR"
	[ -d "$DATA/domains/.rm-$id" ] || fail "nothing was set aside: $(ls -A "$DATA/domains")"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state list --config "$CFG"
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$OUT" "Domain $id
  an earlier removal of it was interrupted: \`lazaret state rm $id\` finishes it"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state rm "$id" --config "$CFG" </dev/null
	assert_eq 64 "$STATUS"
	assert_contains "$ERR" "an earlier removal of it was interrupted"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state rm "$id" --yes --config "$CFG"
	mv "$T/ws.moved" "$WS"
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$ERR" "removed Domain $id"
	assert_eq "" "$(ls -A "$DATA/domains")" "left in domains/"
	[ ! -e "$T/run/lazaret/domains/$id" ] || fail "its runtime directory is still there"
}

# A lost coordinator leaves its generation's runtime tree, whose transient
# layer holds files of the sandbox's other users (subordinate IDs on the
# host): state rm removes it all, or says it could not.
# lose_generation SCRIPT: a session running SCRIPT (which touches
# /workspace/ready, then waits), its coordinator killed: the generation is
# lost, its runtime tree left.
lose_generation() {
	(cd "$WS" && exec env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- sh -c "$1" >/dev/null 2>&1) &
	local cli=$! hc
	for _ in $(seq 300); do [ -e "$WS/ready" ] && break; sleep 0.1; done
	[ -e "$WS/ready" ] || fail "the session never got ready"
	rm "$WS/ready"
	hc=$(ps -ww -u "$(id -u)" -o pid=,args= | awk -v ws="--workspace $WS" 'index($0, "__hc") && index($0, ws) {print $1; exit}')
	[ -n "$hc" ] || fail "no coordinator"
	kill -9 "$hc"
	wait "$cli" || true
	assert_no_processes
}

test_rm_removes_what_a_lost_generation_left() {
	lose_generation 'mkdir -p /srv/lz/in && touch /srv/lz/in/f && chown -R 1000 /srv/lz && touch /workspace/ready; sleep 120'
	local id
	id=$(basename "$(domain_dir)")
	[ -n "$(find "$T/run/lazaret/domains/$id" -path '*/srv/lz/in/f' 2>/dev/null)" ] || fail "the lost generation left no transient layer: $(find "$T" -path '*lz/in*' 2>/dev/null)"
	mv "$WS" "$T/ws.moved"
	capture env -i "${LZ_ENV[@]}" "$LAZARET" state rm "$id" --yes --config "$CFG"
	mv "$T/ws.moved" "$WS"
	assert_eq 0 "$STATUS" "$ERR"
	[ ! -e "$T/run/lazaret/domains/$id" ] || fail "its runtime directory is still there: $(find "$T/run/lazaret/domains/$id" | head)"
}

# A removal killed once the Domain is set aside has already deleted a lost
# generation's runtime tree: no later command could (the Domain is gone),
# and the Domain made anew in the same workspace (the same ID) would be
# refused as possibly still running.
test_an_interrupted_removal_leaves_no_runtime_tree_behind() {
	lose_generation 'touch /workspace/ready; sleep 120'
	local id
	id=$(basename "$(domain_dir)")
	[ -n "$(ls -d "$T/run/lazaret/domains/$id"/gen-* 2>/dev/null)" ] || fail "the lost generation left no runtime tree"
	mv "$WS" "$T/ws.moved"
	[ -x "${LAZARET_FAULTS:-}" ] || fail "LAZARET_FAULTS is not built"
	capture env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=rm-after-rename "$LAZARET_FAULTS" state rm "$id" \
		--yes --config "$CFG"
	mv "$T/ws.moved" "$WS"
	assert_eq 137 "$STATUS" "the removal was not killed at the fault: $ERR"
	assert_eq "" "$(ls -d "$T/run/lazaret/domains/$id"/gen-* 2>/dev/null)" "runtime trees left"
	capture launch true
	assert_eq 0 "$STATUS" "the Domain made anew does not launch: $ERR"
}

# `config check --profile` resolves the profile in a workspace, which makes
# its Domain's directory: a Domain never launched is listed as such and
# state rm removes its empty directory, nothing else.
test_a_domain_never_launched_is_listed_and_removable() {
	capture lz config check --profile test
	assert_eq 0 "$STATUS" "$ERR"
	local id
	id=$(sed -n 's/^domain id: *//p' <<<"$OUT")
	assert_match "$id" '^[0-9a-f]{64}$' "the Domain ID config check printed"
	[ -d "$DATA/domains/$id" ] || fail "config check made no Domain directory"
	capture lz state list
	assert_contains "$OUT$ERR" "never launched, nothing kept"
	capture lz state rm "$id" --yes
	assert_eq 0 "$STATUS" "$ERR"
	assert_contains "$ERR" "never launched"
	[ ! -e "$DATA/domains/$id" ] || fail "the empty Domain directory is still there"
	# One that holds a file is not removed this way.
	capture lz config check --profile test
	mkdir "$DATA/domains/$id/kept" && chmod 0700 "$DATA/domains/$id/kept"
	capture lz state rm "$id" --yes
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "no recorded identity and holds files"
	[ -d "$DATA/domains/$id/kept" ] || fail "a Domain holding files was removed"
	rmdir "$DATA/domains/$id/kept" "$DATA/domains/$id"
	# state verify holds the Domain (its Domain Store): it records the
	# identity first, so the Domain is named and, once its workspace is
	# gone, removable.
	capture lz state verify --profile test
	capture lz state list
	assert_not_contains "$OUT$ERR" "no recorded identity"
	assert_not_contains "$OUT$ERR" "never launched"
	assert_contains "$OUT" "$WS"
}

# OR-7: with storage.keep_unused_images, a launch's end reclaims the
# unleased prepared images beyond the newest N, never the one it used.
test_automatic_image_gc_after_a_launch() {
	local img=$T/img2 ids=() out
	cp -R "$IMG/img" "$img"
	for cmd in /bin/true /bin/false; do
		assert_status 0 umoci config --image "$img:latest" --config.cmd "$cmd"
		capture lz image prepare "oci:$img"
		assert_eq 0 "$STATUS" "$ERR"
		ids+=("$(sed -n 's/^artifact: *//p' <<<"$OUT")")
		sleep 1 # distinct preparation times
	done
	[ -n "${ids[0]}" ] && [ -n "${ids[1]}" ] && [ "${ids[0]}" != "${ids[1]}" ] || fail "expected two artifacts: ${ids[*]}"
	local used
	used=$(ls "$DATA/prepared" | grep -v -e "${ids[0]}" -e "${ids[1]}")
	printf 'version = 1\n[storage]\ndata_root = "%s"\nkeep_unused_images = 1\n[profiles.test]\nimage = "oci:%s/img:latest"\n' \
		"$DATA" "$IMG" >"$CFG"
	capture launch true
	assert_eq 0 "$STATUS" "$ERR"
	assert_no_processes
	out=$(cat "$T/run/lazaret/domains/"*/hc.log)
	assert_contains "$out" "automatic image gc (storage.keep_unused_images = 1): removed prepared ${ids[0]}"
	[ ! -e "$DATA/prepared/${ids[0]}" ] || fail "the oldest unused image was kept"
	[ -d "$DATA/prepared/${ids[1]}" ] || fail "the newest unused image was reclaimed"
	[ -d "$DATA/prepared/$used" ] || fail "the image the launch used was reclaimed"
	capture launch true
	assert_eq 0 "$STATUS" "the profile's image must still launch: $ERR"
}

# A persistent directory's root belongs to the sandbox once made: its
# owner and mode, changed inside, persist, and the next launch neither
# resets them nor refuses (the host could not chmod a root the sandbox gave
# a subordinate owner).
test_a_persistent_root_keeps_the_owner_and_mode_the_sandbox_gave_it() {
	capture launch sh -c 'chown 1000:1000 /etc && chmod 0750 /etc && stat -c "%u %a" /etc'
	assert_eq 0 "$STATUS" "chown inside: $ERR"
	assert_eq "1000 750" "$OUT"
	capture launch stat -c "%u %a" /etc
	assert_eq 0 "$STATUS" "the launch after: $ERR"
	assert_eq "1000 750" "$OUT"
	capture lz state verify --profile test
	assert_eq 0 "$STATUS" "$OUT $ERR"
}

t_run "state list shows the Domain, its identity and sizes (text and JSON)" test_list_shows_the_domain_and_its_sizes
t_run "state list marks a Domain in use and a foreign identity" test_list_marks_a_domain_in_use_and_a_foreign_one
t_run "state inspect shows added, changed and deleted entries, never contents" test_inspect_shows_changes_not_contents
t_run "state verify passes, refuses an active Domain, finds a symlinked upper and a foreign identity" test_verify_passes_then_finds_each_problem
t_run "a persistent directory's root keeps the owner and mode the sandbox gave it" test_a_persistent_root_keeps_the_owner_and_mode_the_sandbox_gave_it
t_run "state reset of one directory keeps the others" test_reset_one_directory_keeps_the_others
t_run "state reset --all" test_reset_all
t_run "state reset refusals change nothing (not persistent, no --yes, in use, symlink)" test_reset_refusals_change_nothing
t_run "a reset killed before its rename changes nothing, after it leaves new empty state" test_a_reset_killed_midway_leaves_new_empty_state
t_run "a reset failing midway says which anchors it reset" test_a_reset_failing_midway_says_what_it_reset
t_run "storage.keep_unused_images reclaims older unused images after a launch, never its own" test_automatic_image_gc_after_a_launch
t_run "state rm removes a Domain whose workspace is gone, and refuses others" test_rm_removes_a_domain_whose_workspace_is_gone
t_run "a Domain never launched is listed as such, and state rm removes its empty directory" test_a_domain_never_launched_is_listed_and_removable
t_run "state rm removes what a lost generation left in the runtime directory" test_rm_removes_what_a_lost_generation_left
t_run "state rm finishes a removal that was interrupted" test_rm_finishes_an_interrupted_removal
t_run "a removal interrupted after setting the Domain aside leaves no runtime tree behind" test_an_interrupted_removal_leaves_no_runtime_tree_behind
rm -rf "$IMG"
t_done
