#!/usr/bin/env bash
# End-to-end tests of `lazaret qualify` (issue 10, spec OR-4): the built-in
# suites launch real sandboxes of a prepared profile in the scratch
# workspace; user suites run in a restricted environment. Runs as the
# unprivileged test user with its own HOME, runtime directory and Storage
# Root per test. The host-not-ready cases (no subordinate IDs, no runsc)
# need root to arrange and run in scripts/test.sh's qualify-host suite.
# Needs: LAZARET, E2E_ROOT, python3, umoci.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${LAZARET:?set LAZARET to the lazaret binary}"
: "${E2E_ROOT:?set E2E_ROOT to the e2e directory}"
FIX=$E2E_ROOT/fixtures
EXAMPLES=$E2E_ROOT/../examples

# One prepared image, and one that each test leaves unprepared.
IMG=$(mktemp -d "${TMPDIR:-/tmp}/lz-qualify-img.XXXXXX")
{ python3 "$FIX/make_test_image.py" "$IMG/img" latest >/dev/null &&
	python3 "$FIX/make_test_image.py" "$IMG/other" latest --with-git >/dev/null; } || {
	echo "Bail out! cannot build the test images"
	exit 1
}

t_setup() {
	mkdir -m 0700 "$T/home" "$T/run"
	CFG=$T/config.toml
	printf 'version = 1\n[storage]\ndata_root = "%s"\n[profiles.default]\nimage = "oci:%s/img:latest"\n[profiles.unprepared]\nimage = "oci:%s/other:latest"\n' \
		"$T/data" "$IMG" "$IMG" >"$CFG"
	chmod 0600 "$CFG"
	LZ_ENV=("HOME=$T/home" "USER=$(id -un)" "PATH=/usr/local/bin:/usr/bin:/bin"
		"XDG_RUNTIME_DIR=$T/run")
	[ -z "${LZ_TEST_RUN:-}" ] || LZ_ENV+=("LZ_TEST_RUN=$LZ_TEST_RUN")
	capture lz image prepare "oci:$IMG/img:latest"
	[ "$STATUS" = 0 ] || fail "image prepare: $ERR"
	SCRATCH=$T/home/.cache/lazaret/qualify-workspace
}

lz() {
	(cd "$T" && timeout -k 5 600 env -i "${LZ_ENV[@]}" "$LAZARET" "$@" --config "$CFG")
}

# Every Domain the run started stops again (its HC tears down after the
# last session's CLI returned: bounded wait).
assert_domains_stopped() {
	local i
	for i in $(seq 150); do
		pgrep -u "$(id -u)" -f "$T/" >/dev/null || break
		sleep 0.1
	done
	if pgrep -u "$(id -u)" -af "$T/"; then
		fail "processes left behind: $(pgrep -u "$(id -u)" -af "$T/")"
	fi
	assert_not_contains "$(cat /proc/self/mountinfo)" "$T/" "mounts left behind"
	assert_eq "" "$(ls -A "$T/run/lazaret/domains/"*/ 2>/dev/null | grep -v -e '^hc.lock$' -e '^hc.log$' -e '^$' -e ':$')" \
		"runtime state left behind"
}

# After every test: the trees with subordinate-owned files go through the
# ID map.
t_teardown() {
	pkill -9 -u "$(id -u)" -f "$T/" 2>/dev/null
	in_ns rm -rf "$T/data" "$T/run" 2>/dev/null
	return 0
}

test_passes_on_a_prepared_host() {
	capture lz qualify
	assert_eq 0 "$STATUS" "qualify (stdout: $OUT; stderr: $ERR)"
	local c
	for c in kernel subuid runsc configuration "runsc launch" "workspace filesystem" \
		"rootless network" "Git Sentry" terminal; do
		assert_match "$OUT" "^  ok   $c \\([0-9]+ ms\\)$"
	done
	assert_contains "$OUT" "qualify: 23 passed, 0 failed, 0 skipped"
	assert_domains_stopped
	# The sandbox's attempt on the host repository left it as it was.
	assert_eq 0 "$(find "$SCRATCH/.git/hooks" -type f | wc -l)" "hooks on the host"
	assert_not_contains "$(cat "$SCRATCH/.git/config")" "fsmonitor"
}

test_json_names_every_check() {
	capture lz qualify --json
	assert_eq 0 "$STATUS" "qualify --json (stderr: $ERR)"
	local summary
	summary=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
assert isinstance(d["ok"], bool)
for s in d["suites"]:
    for c in s["checks"]:
        assert isinstance(c["ms"], int) and c["ms"] >= 0, c
        print(s["name"], c["name"], c["status"], c["reason"])
print("totals", d["ok"], d["passed"], d["failed"], d["skipped"])
' <<<"$OUT") || fail "not the documented JSON: $OUT"
	assert_contains "$summary" "sandbox runsc launch pass None"
	assert_contains "$summary" "sandbox terminal pass None"
	assert_contains "$summary" "totals True 23 0 0"
}

test_unprepared_profile_fails_with_the_reason() {
	capture lz qualify --profile unprepared
	assert_eq 1 "$STATUS" "qualify of an unprepared image"
	assert_match "$OUT" "^  FAIL runsc launch: .*not prepared.*lazaret image prepare"
	assert_contains "$OUT" "qualify: 18 passed, 5 failed, 0 skipped"
	assert_domains_stopped
}

test_unknown_profile_blocks_the_launches() {
	capture lz qualify --profile nosuch
	assert_eq 1 "$STATUS"
	assert_match "$OUT" "^  FAIL configuration: profile 'nosuch': "
	assert_match "$OUT" "^  skip runsc launch: the profile does not resolve"
	assert_contains "$OUT" "qualify: 17 passed, 1 failed, 5 skipped"
}

test_refuses_arguments_it_does_not_know() {
	capture lz qualify --bogus
	assert_eq 64 "$STATUS"
	assert_contains "$ERR" "unknown option '--bogus'"
	capture lz qualify -- /bin/sh
	assert_eq 64 "$STATUS"
}

test_a_planted_symlink_is_not_followed() {
	# A check that reads back what the sandbox made a link to a host file.
	cat >"$T/suite.lua" <<-'EOF'
		check("link", function(t)
		  local r = t:run({ "/bin/sh", "-c", "ln -s /etc/passwd /workspace/planted-link" })
		  t:expect(r.status == 0, "ln failed: " .. tostring(r.output))
		  t:read("planted-link")
		end)
	EOF
	capture lz qualify "$T/suite.lua"
	assert_eq 1 "$STATUS"
	assert_match "$OUT" "^  FAIL link: 'planted-link': "
	assert_not_contains "$OUT" "root:x:0:0"
}

test_the_example_suite_runs() {
	capture lz qualify "$EXAMPLES/qualify.lua"
	assert_eq 0 "$STATUS" "qualify examples/qualify.lua (stdout: $OUT; stderr: $ERR)"
	assert_match "$OUT" "^example$"
	assert_match "$OUT" "^  ok   the image has a POSIX shell \([0-9]+ ms\)$"
	assert_match "$OUT" "^  ok   a terminal session sees its window size "
	assert_contains "$OUT" "qualify: 27 passed, 0 failed, 0 skipped"
}

test_a_failing_user_check_names_its_reason() {
	cat >"$T/suite.lua" <<-'EOF'
		suite("mine")
		check("needs node", function(t)
		  local r = t:run({ "/bin/sh", "-c", "command -v node" })
		  t:expect(r.status == 0, "node is not in the image")
		end)
		check("skipped on purpose", function(t) t:skip("not today") end)
		check("raises", function(t) error("boom") end)
	EOF
	capture lz qualify --json "$T/suite.lua"
	assert_eq 1 "$STATUS"
	local got
	got=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["suites"][2]
print(s["name"], [(c["name"], c["status"], c["reason"]) for c in s["checks"]])' <<<"$OUT") || fail "JSON: $OUT"
	assert_contains "$got" "mine [('needs node', 'fail', 'node is not in the image'), ('skipped on purpose', 'skip', 'not today'), ('raises', 'fail', 'error: "
	assert_contains "$got" "boom"
}

test_a_suite_cannot_reach_the_host() {
	cat >"$T/exec.lua" <<-EOF
		check("exec", function(t) os.execute("touch $T/pwned") end)
		check("popen", function(t) io.popen("touch $T/pwned") end)
		check("open", function(t) io.open("$T/pwned", "w") end)
		check("C module", function(t) require("lazaret.core.probe") end)
		check("load", function(t) load("return 1") end)
	EOF
	capture lz qualify "$T/exec.lua"
	assert_eq 1 "$STATUS"
	assert_match "$OUT" "^  FAIL exec: .*os\.execute.*not available"
	assert_match "$OUT" "^  FAIL popen: .*io\.popen.*not available"
	assert_match "$OUT" "^  FAIL open: .*io\.open.*not available"
	assert_match "$OUT" "^  FAIL C module: .*C modules.*lazaret\.core\.probe"
	assert_match "$OUT" "^  FAIL load: .*load.*not available"
	[ ! -e "$T/pwned" ] || fail "the suite reached the host"
}

test_a_broken_suite_file_is_refused_first() {
	capture lz qualify "$T/missing.lua"
	assert_eq 66 "$STATUS"
	assert_contains "$ERR" "suite $T/missing.lua: "
	assert_not_contains "$OUT" "runsc launch"
	printf 'check("x", function(t) end\n' >"$T/syntax.lua"
	capture lz qualify "$T/syntax.lua"
	assert_eq 66 "$STATUS"
	assert_contains "$ERR" "syntax.lua"
	mkfifo "$T/fifo.lua"
	capture lz qualify "$T/fifo.lua"
	assert_eq 66 "$STATUS"
}

t_run "passes on a prepared host" test_passes_on_a_prepared_host
t_run "the example suite in examples/ runs" test_the_example_suite_runs
t_run "a failing user check names its reason" test_a_failing_user_check_names_its_reason
t_run "a suite cannot run commands, open files or load C modules" test_a_suite_cannot_reach_the_host
t_run "a missing, broken or special suite file is refused before any launch" test_a_broken_suite_file_is_refused_first
t_run "--json names every check with its duration" test_json_names_every_check
t_run "an unprepared image fails the launches with the reason" test_unprepared_profile_fails_with_the_reason
t_run "an unknown profile fails once and skips the launches" test_unknown_profile_blocks_the_launches
t_run "refuses unknown options" test_refuses_arguments_it_does_not_know
t_run "a symlink the sandbox planted is not followed" test_a_planted_symlink_is_not_followed
rm -rf "$IMG"
t_done
