#!/usr/bin/env bash
# End-to-end tests of prepared lowers (issue 3): `lazaret image prepare|list|gc`
# with real user namespaces (newuidmap/newgidmap), real OCI layouts made
# offline by umoci, and the real sqlite3 Storage Catalog. Runs as the
# unprivileged test user. The prepared tree is read back inside the same kind
# of user namespace (`unshare --map-users`), since its files belong to
# subordinate IDs.
# Needs: LAZARET, LAZARET_FAULTS, E2E_ROOT, python3, umoci, skopeo, sqlite3,
# unshare.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${LAZARET:?set LAZARET to the lazaret binary}"
: "${E2E_ROOT:?set E2E_ROOT to the e2e directory}"
FIX=$E2E_ROOT/fixtures

t_setup() {
	mkdir -m 0700 "$T/home" "$T/run"
	DATA=$T/data
	CFG=$T/config.toml
	printf 'version = 1\n[storage]\ndata_root = "%s"\n' "$DATA" >"$CFG"
	chmod 0600 "$CFG"
	LZ_ENV=("HOME=$T/home" "USER=$(id -un)" "PATH=/usr/local/bin:/usr/bin:/bin"
		"XDG_RUNTIME_DIR=$T/run")
	[ -z "${LZ_TEST_RUN:-}" ] || LZ_ENV+=("LZ_TEST_RUN=$LZ_TEST_RUN")
	t_cleanup_ns "$DATA"
}

lz() {
	timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" "$@" --config "$CFG"
}

# Runs a command inside a user namespace with Lazaret's ID map, so files of
# subordinate IDs are readable and removable.

# Trees with subordinate-owned files must be removed from inside the map.
t_cleanup_ns() {
	_ns_cleanup=$1
}
trap_cleanup() {
	[ -n "${_ns_cleanup:-}" ] && [ -e "$_ns_cleanup" ] && in_ns rm -rf "$_ns_cleanup"
	return 0
}

make_image() {
	python3 "$FIX/make_test_image.py" "$1" >/dev/null
}

catalog_rows() {
	sqlite3 -readonly -cmd '.timeout 5000' "$DATA/catalog.sqlite" \
		"select 'artifact', id, state from artifacts; select 'op', id, state from prepare_ops; select 'lease', artifact_id, domain_id, generation from leases;" 2>&1
}

artifact_of() {
	sed -n 's/^artifact:[[:space:]]*//p' <<<"$1"
}

# --- preparation ---------------------------------------------------------------

test_prepared_tree_matches_umoci() {
	make_image "$T/img"
	assert_status 0 lz image prepare "oci:$T/img:latest"
	assert_contains "$OUT" "prepared: oci:$T/img:latest"
	local id
	id=$(artifact_of "$OUT")
	assert_match "$id" '^[0-9a-f]{64}$'
	assert_status 0 umoci unpack --rootless --image "$T/img:latest" "$T/umoci"
	python3 "$FIX/tree_manifest.py" "$T/umoci/rootfs" >"$T/want"
	in_ns python3 "$FIX/tree_manifest.py" "$DATA/prepared/$id/rootfs" >"$T/got" || fail "manifest"
	assert_status 0 diff -u "$T/want" "$T/got"
	# Spot checks that the comparison covers what the issue names.
	assert_contains "$(cat "$T/got")" "usr/bin/setuid-tool	f	4755"
	assert_contains "$(cat "$T/got")" "data/b	f	0640	"
	assert_not_contains "$(cat "$T/got")" "etc/removeme"
	assert_not_contains "$(cat "$T/got")" "opt/old/a"
	trap_cleanup
}

test_image_ownership_lands_on_subordinate_ids() {
	make_image "$T/img"
	assert_status 0 lz image prepare "oci:$T/img"
	local id sub
	id=$(artifact_of "$OUT")
	sub=$(_t_subid_start /etc/subuid)
	# Image uid 1000 is namespace uid 1000, host uid sub + 999.
	assert_eq "$((sub + 999))" "$(stat -c %u "$DATA/prepared/$id/rootfs/home/user/private")"
	# Image root is the invoking user.
	assert_eq "$(id -u)" "$(stat -c %u "$DATA/prepared/$id/rootfs/etc/passwd")"
	trap_cleanup
}

test_preparing_twice_reports_existing_artifact() {
	make_image "$T/img"
	assert_status 0 lz image prepare "oci:$T/img"
	local first
	first=$(artifact_of "$OUT")
	assert_status 0 lz image prepare "oci:$T/img:latest"
	assert_contains "$OUT" "already prepared"
	assert_eq "$first" "$(artifact_of "$OUT")"
	assert_status 0 lz image list --json
	assert_eq 1 "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["images"]))' <<<"$OUT")"
	trap_cleanup
}

# A catalog that refuses the publication leaves nothing published: the
# tree goes back to staging and is discarded, so the next preparation
# prepares it (it was stuck before: the tree in prepared/ without a row).
test_a_refused_publication_leaves_nothing_published() {
	need_faults
	make_image "$T/img"
	capture timeout -k 5 300 env -i "${LZ_ENV[@]}" LAZARET_TEST_FAULT=catalog-refuses-publish "$LAZARET_FAULTS" \
		image prepare "oci:$T/img:latest" --config "$CFG"
	assert_eq 1 "$STATUS" "$ERR"
	assert_contains "$ERR" "nothing was published"
	assert_eq "" "$(ls -A "$DATA/prepared")" "trees in prepared/"
	assert_eq "" "$(ls -A "$DATA/staging")" "trees in staging/"
	assert_status 0 lz image prepare "oci:$T/img:latest"
	assert_not_contains "$OUT" "already prepared"
	assert_status 0 lz image list --json
	assert_eq 1 "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["images"]))' <<<"$OUT")"
	trap_cleanup
}

test_list_shows_artifact_source_size_leases_state() {
	make_image "$T/img"
	assert_status 0 lz image prepare "oci:$T/img"
	local id
	id=$(artifact_of "$OUT")
	assert_status 0 lz image list --json
	local check='import json, sys
img = json.load(open(sys.argv[3]))["images"][0]
assert img["artifact_id"] == sys.argv[1], img
assert img["source"] == sys.argv[2], img
assert img["leases"] == 0 and img["state"] == "published", img
assert img["size"] > 1000000, img
assert img["manifest_digest"].startswith("sha256:"), img'
	printf '%s' "$OUT" >"$T/list.json"
	assert_status 0 python3 -c "$check" "$id" "oci:$T/img" "$T/list.json"
	assert_status 0 lz image list
	assert_contains "$OUT" "${id:0:16}"
	assert_contains "$OUT" "published"
	trap_cleanup
}

test_docker_archive_goes_through_skopeo() {
	make_image "$T/img"
	assert_status 0 skopeo copy --quiet "oci:$T/img:latest" "docker-archive:$T/img.tar"
	assert_status 0 lz image prepare "docker-archive:$T/img.tar"
	local id
	id=$(artifact_of "$OUT")
	in_ns python3 "$FIX/tree_manifest.py" "$DATA/prepared/$id/rootfs" >"$T/got" || fail "manifest"
	assert_contains "$(cat "$T/got")" "usr/bin/setuid-tool	f	4755"
	# The transport layout is Lazaret's and is gone afterwards.
	assert_eq "" "$(ls -A "$DATA/images")"
	trap_cleanup
}

# A blob larger than the room the Storage Root's file system has beyond a
# twentieth of it, read from a local archive faster than the transport's
# watch looks: skopeo is refused the write past the room ("file too
# large"), never by a full disk, and nothing of the copy stays. Which of
# the two stops come first is a race: the other files of the copy take a
# little of the room, so the watch may see it gone before the blob meets
# its limit, or between that and skopeo's exit (seen on a slower
# machine). Either is the right stop; test_transport's "burst" proves the
# limit alone holds.
test_a_blob_larger_than_the_room_stops_at_it() {
	[ -n "${LZ_TEST_SMALL_FS:-}" ] ||
		fail "LZ_TEST_SMALL_FS is unset: run through scripts/test.sh, which mounts a small tmpfs"
	local small
	small=$(mktemp -d "$LZ_TEST_SMALL_FS/t.XXXXXX")
	DATA=$small/data
	printf 'version = 1\n[storage]\ndata_root = "%s"\n' "$DATA" >"$CFG"
	python3 "$FIX/make_big_archive.py" "$T/big.tar" 80
	capture lz image prepare "docker-archive:$T/big.tar"
	rm -f "$T/big.tar"
	assert_eq 1 "$STATUS" "exit status (stderr: $ERR)"
	assert_not_contains "$ERR" "no space left"
	case $ERR in
	*"file too large"*)
		assert_contains "$ERR" "the room the Storage Root's file system has beyond a twentieth of it" ;;
	*)
		assert_contains "$ERR" "stopped: the Storage Root's file system has no more than a twentieth of it free" ;;
	esac
	assert_eq "" "$(ls -A "$DATA/images")"
	rm -rf "$small"
}

# --- refusals: nothing published, catalog unchanged -----------------------------

# refuse_image SETUP NEEDLE: prepares an image after SETUP and requires a
# refusal naming NEEDLE, no published tree, no staging tree and no new rows.
refuse_image() {
	"$1"
	capture lz image list
	local before
	before=$(catalog_rows)
	capture lz image prepare "oci:$T/bad:latest"
	assert_eq 1 "$STATUS" "exit status (stderr: $ERR)"
	assert_contains "$ERR" "$2"
	assert_contains "$ERR" "nothing was published"
	assert_eq "" "$(ls -A "$DATA/prepared" 2>/dev/null)" "prepared/"
	assert_eq "" "$(ls -A "$DATA/staging" 2>/dev/null)" "staging/"
	assert_eq "$before" "$(catalog_rows)" "catalog rows"
	[ ! -e "$T/escape" ] || fail "a file was written outside the tree"
	[ ! -e "$T/outside/pwned" ] || fail "a file was written through the symlink"
	trap_cleanup
}

bad_layer() {
	mkdir -p "$T/outside"
	python3 "$FIX/make_bad_image.py" "$T/bad" "$1" "$T/outside" >/dev/null
}

corrupt_layer() {
	make_image "$T/bad"
	local blob
	blob=$(python3 -c 'import json,sys
m=json.load(open(sys.argv[1]+"/index.json"))["manifests"][0]["digest"].split(":")[1]
man=json.load(open(sys.argv[1]+"/blobs/sha256/"+m))
print(man["layers"][-1]["digest"].split(":")[1])' "$T/bad")
	BLOB=$T/bad/blobs/sha256/$blob
	chmod u+w "$BLOB"
}

setup_digest_mismatch() {
	corrupt_layer
	printf 'X' | dd of="$BLOB" bs=1 seek=100 conv=notrunc status=none
}
setup_truncated_layer() {
	corrupt_layer
	truncate -s 100 "$BLOB"
}
setup_dotdot() { bad_layer dotdot; }
setup_escapes() { bad_layer escapes; }
setup_absolute() { bad_layer absolute; }
setup_symlink_escape() { bad_layer symlink-escape; }
setup_symlink_relative() { bad_layer symlink-relative; }
setup_hardlink_outside() { bad_layer hardlink-outside; }
setup_hardlink_absolute() { bad_layer hardlink-absolute; }

test_refuses_layer_digest_mismatch() { refuse_image setup_digest_mismatch "sha256:"; }
test_refuses_truncated_layer() { refuse_image setup_truncated_layer "sha256:"; }
test_refuses_dotdot_entry() { refuse_image setup_dotdot ".."; }
test_refuses_absolute_entry() { refuse_image setup_absolute "escape"; }
test_refuses_symlink_then_write() { refuse_image setup_symlink_escape "link"; }
test_refuses_relative_symlink_then_write() { refuse_image setup_symlink_relative "up"; }
test_refuses_hardlink_outside() { refuse_image setup_hardlink_outside "hl"; }
test_refuses_hardlink_absolute() { refuse_image setup_hardlink_absolute "hl"; }

# The refusal names the hostile entry, escaped: no raw ESC, BEL, 8-bit CSI
# or invalid UTF-8 reaches the terminal (no implicit host authority).
test_refusal_escapes_a_hostile_entry_name() {
	refuse_image setup_escapes ".."
	assert_contains "$ERR" '\e]52;c;cHduZWQ=\x07\e[2J\x9b31m\xffname' "the name, escaped"
	if LC_ALL=C grep -q $'[\x1b\x07\x9b\xff]' <<<"$ERR"; then
		fail "raw control bytes in the refusal: $(od -c <<<"$ERR" | head -5)"
	fi
}

test_refuses_unknown_catalog_version() {
	make_image "$T/img"
	assert_status 0 lz image list
	sqlite3 "$DATA/catalog.sqlite" "update meta set value = 3 where key = 'version';" ||
		fail "could not edit the catalog"
	local before
	before=$(sha256sum <"$DATA/catalog.sqlite")
	capture lz image prepare "oci:$T/img"
	assert_eq 1 "$STATUS" "exit status (stderr: $ERR)"
	assert_contains "$ERR" "version"
	assert_eq "$before" "$(sha256sum <"$DATA/catalog.sqlite")" "catalog bytes"
	assert_eq "" "$(ls -A "$DATA/prepared" 2>/dev/null)" "prepared/"
	capture lz image gc
	assert_eq 1 "$STATUS" "gc on an unknown catalog version"
	trap_cleanup
}

# --- gc ------------------------------------------------------------------------------

test_gc_keeps_leased_removes_unleased_keeps_foreign() {
	make_image "$T/img"
	python3 "$FIX/make_bad_image.py" "$T/small" dotdot >/dev/null 2>&1 || true
	assert_status 0 lz image prepare "oci:$T/img"
	local leased
	leased=$(artifact_of "$OUT")
	# A second, unleased artifact: the same image under another config.
	assert_status 0 umoci config --image "$T/img:latest" --config.cmd /bin/true
	assert_status 0 lz image prepare "oci:$T/img"
	local unleased
	unleased=$(artifact_of "$OUT")
	[ "$leased" != "$unleased" ] || fail "expected two artifacts"
	# A Domain's lease (the launch issue takes these through the catalog API).
	sqlite3 "$DATA/catalog.sqlite" "insert into leases (artifact_id, domain_id, generation) values ('$leased', '$(printf 'd%.0s' {1..64})', 1);" ||
		fail "could not insert a lease"
	mkdir "$DATA/prepared/foreign-tree"
	assert_status 0 lz image gc --dry-run
	assert_contains "$OUT" "would remove unleased artifact: prepared/$unleased"
	[ -d "$DATA/prepared/$unleased" ] || fail "dry run removed something"
	assert_status 0 lz image gc
	assert_contains "$OUT" "kept leased artifact: prepared/$leased (1 leases)"
	assert_contains "$OUT" "removed unleased artifact: prepared/$unleased"
	assert_contains "$OUT" "kept unknown tree (not in the catalog): prepared/foreign-tree"
	[ -d "$DATA/prepared/$leased/rootfs/bin" ] || fail "leased tree removed"
	[ ! -e "$DATA/prepared/$unleased" ] || fail "unleased tree kept"
	[ -d "$DATA/prepared/foreign-tree" ] || fail "foreign tree removed"
	assert_status 0 lz image list --json
	assert_contains "$OUT" "$leased"
	assert_not_contains "$OUT" "$unleased"
	trap_cleanup
}

test_prepare_refuses_bad_reference() {
	capture lz image prepare "/not/a/reference"
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "expected oci:PATH"
	capture lz image prepare "oci:$T/missing"
	assert_eq 1 "$STATUS"
	assert_contains "$ERR" "No such file"
	trap_cleanup
}

# An archive's manifest names a file with an escape sequence in it; skopeo
# quotes it in its error, raw when its stderr is a terminal. Lazaret
# relays skopeo's messages escaped: run on a terminal (script(1)), the
# output holds no ESC or BEL byte.
test_skopeo_messages_cannot_drive_the_terminal() {
	mkdir -p "$T/hostile"
	printf '[{"Config":"\\u001b]0;PWNED\\u0007x.json","RepoTags":["a:b"],"Layers":[]}]' \
		>"$T/hostile/manifest.json"
	tar -C "$T/hostile" -cf "$T/hostile.tar" manifest.json
	local cmd out
	cmd=$(printf '%q ' timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" image prepare \
		"docker-archive:$T/hostile.tar" --config "$CFG")
	out=$(script -qec "$cmd" /dev/null | cat -v || true) # the prepare fails
	assert_contains "$out" "PWNED" "skopeo's message"
	assert_not_contains "$out" "^[" "an ESC byte"
	assert_not_contains "$out" "^G" "a BEL byte"
	assert_contains "$out" "skopeo: " "skopeo's message, marked"
}

t_run "prepared tree matches umoci unpack --rootless" test_prepared_tree_matches_umoci
t_run "image ownership lands on subordinate IDs" test_image_ownership_lands_on_subordinate_ids
t_run "preparing twice reports the existing artifact" test_preparing_twice_reports_existing_artifact
t_run "a refused publication leaves nothing published" test_a_refused_publication_leaves_nothing_published
t_run "image list shows artifact, source, size, leases, state" test_list_shows_artifact_source_size_leases_state
t_run "docker-archive images go through skopeo" test_docker_archive_goes_through_skopeo
t_run "skopeo's messages cannot drive the terminal" test_skopeo_messages_cannot_drive_the_terminal
t_run "a blob larger than the room stops at it, never at a full disk" test_a_blob_larger_than_the_room_stops_at_it
t_run "refuses a layer digest mismatch" test_refuses_layer_digest_mismatch
t_run "refuses a truncated layer" test_refuses_truncated_layer
t_run "refuses a ../ entry" test_refuses_dotdot_entry
t_run "refuses an absolute-path entry" test_refuses_absolute_entry
t_run "a refusal escapes the hostile entry's name" test_refusal_escapes_a_hostile_entry_name
t_run "refuses a symlink-then-write escape" test_refuses_symlink_then_write
t_run "refuses a relative symlink-then-write escape" test_refuses_relative_symlink_then_write
t_run "refuses a hard link pointing outside" test_refuses_hardlink_outside
t_run "refuses an absolute hard link" test_refuses_hardlink_absolute
t_run "refuses an unknown catalog version" test_refuses_unknown_catalog_version
t_run "gc keeps leased, removes unleased, keeps foreign" test_gc_keeps_leased_removes_unleased_keeps_foreign
t_run "prepare refuses a bad reference" test_prepare_refuses_bad_reference
t_done
