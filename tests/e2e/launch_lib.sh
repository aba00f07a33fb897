#!/usr/bin/env bash
# Shared by the end-to-end files that launch sandboxes of one offline test
# image (test_launch.sh, test_router.sh): real runsc, real user/PID/mount/
# network namespaces through newuidmap, real overlayfs State Anchors, the
# real sqlite3 stores. Every test has its own Storage Root, runtime
# directory, workspace and image preparation; EXTRA adds profile lines.
# Needs: LAZARET, E2E_ROOT, python3, umoci, git, unshare.
declare -p IMAGE_EXTRA >/dev/null 2>&1 || IMAGE_EXTRA=()
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${LAZARET:?set LAZARET to the lazaret binary}"
: "${E2E_ROOT:?set E2E_ROOT to the e2e directory}"
FIX=$E2E_ROOT/fixtures
COMM=$(basename "$LAZARET" | cut -c1-15) # the coordinator's process name

# One offline image with busybox and git for the whole file; a file adds
# host tools and trees with IMAGE_EXTRA (make_test_image.py options).
IMG=$(mktemp -d "${TMPDIR:-/tmp}/lz-launch-img.XXXXXX")
python3 "$FIX/make_test_image.py" "$IMG/img" latest --with-git "${IMAGE_EXTRA[@]}" >/dev/null || {
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
	LZ_ENV=("HOME=$T/home" "USER=$(id -un)" "PATH=/usr/local/bin:/usr/bin:/bin"
		"XDG_RUNTIME_DIR=$T/run")
	[ -z "${LZ_TEST_RUN:-}" ] || LZ_ENV+=("LZ_TEST_RUN=$LZ_TEST_RUN")
	capture lz image prepare "oci:$IMG/img:latest"
	[ "$STATUS" = 0 ] || fail "image prepare: $ERR"
}

write_profile() {
	printf 'version = 1\n[storage]\ndata_root = "%s"\n[profiles.test]\nimage = "oci:%s/img:latest"\n%s' \
		"$DATA" "$IMG" "${EXTRA:-}" >"$CFG"
	chmod 0600 "$CFG"
}

lz() {
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" "$@" --config "$CFG")
}

# sql ARGS...: sqlite3 that waits for the coordinator's write lock instead
# of failing with "database is locked" while it is still recording.
sql() {
	sqlite3 -cmd '.timeout 5000' "$@"
}

# launch ARGS...: `lazaret test -- ARGS` in the workspace.
launch() {
	(cd "$WS" && timeout -k 5 300 env -i "${LZ_ENV[@]}" "$LAZARET" test --config "$CFG" -- "$@")
}


# Everything a Domain leaves must be gone: no coordinator, supervisor or
# runsc process for this test's runtime directory, and no mount under $T.
assert_no_leftovers() {
	assert_no_processes
	assert_eq "" "$(ls -A "$T/run/lazaret/domains/"*/ 2>/dev/null | grep -v -e '^hc.lock$' -e '^hc.log$' -e '^$' -e ':$')" \
		"runtime directory left behind"
}

assert_no_processes() {
	local i
	for i in $(seq 100); do
		pgrep -u "$(id -u)" -f "$T/" >/dev/null || break
		sleep 0.1
	done
	if pgrep -u "$(id -u)" -af "$T/"; then
		fail "processes left behind: $(pgrep -u "$(id -u)" -af "$T/")"
	fi
	assert_not_contains "$(cat /proc/self/mountinfo)" "$T/" "mounts left behind"
}

cleanup_data() {
	return 0
}

# After every test: the Domain's processes end (bounded), then the trees
# with subordinate-owned files go through the ID map.
t_teardown() {
	end_domain
}
