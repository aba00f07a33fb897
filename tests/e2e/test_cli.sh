#!/usr/bin/env bash
# End-to-end tests of the lazaret command line: help and usage errors, exit
# statuses, `config check` (text and JSON), strict configuration refusals,
# secrecy of environment values, the Domain ID derivation, XDG path
# resolution, diag and diag --report. Each test runs the real binary ($LAZARET) as the
# unprivileged test user in a private environment: HOME, XDG_RUNTIME_DIR and
# the workspace live in the test's own directory $T.
#
# Needs: LAZARET (the binary), EXAMPLES (the examples directory), python3.
# Exit statuses (sysexits): 64 usage, 69 platform refusal / unavailable,
# 77 running as root (checked by scripts/test.sh, which runs as root),
# 78 configuration refusal.
# Test functions are called indirectly through t_run; $T is set per test.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${LAZARET:?set LAZARET to the lazaret binary}"

readonly SECRET=s3cr3t-value

# --- helpers ---------------------------------------------------------------

# Runs before every test: a private HOME, XDG_RUNTIME_DIR and workspace.
t_setup() {
	mkdir -m 0700 "$T/home" "$T/run" "$T/ws"
	WS=$(realpath "$T/ws")
	CFG=$T/config.toml
	LZ_ENV=("HOME=$T/home" "USER=${USER:-lazaret-test}" "LOGNAME=${LOGNAME:-lazaret-test}"
		"PATH=/usr/local/bin:/usr/bin:/bin" "XDG_RUNTIME_DIR=$T/run")
	# scripts/test.sh finds processes left behind by this token.
	[ -z "${LZ_TEST_RUN:-}" ] || LZ_ENV+=("LZ_TEST_RUN=$LZ_TEST_RUN")
}

# lz ARGS...: runs lazaret with exactly the environment in LZ_ENV.
lz() {
	timeout -k 5 120 env -i "${LZ_ENV[@]}" "$LAZARET" "$@"
}

# env_set NAME=VALUE / env_unset NAME: edit LZ_ENV.
env_unset() {
	local kept=() e
	for e in "${LZ_ENV[@]}"; do
		[ "${e%%=*}" = "$1" ] || kept+=("$e")
	done
	LZ_ENV=("${kept[@]}")
}
env_set() {
	env_unset "${1%%=*}"
	LZ_ENV+=("$1")
}

# write_config FILE: writes stdin to FILE, mode 0600, one link, ours.
write_config() {
	(umask 077 && cat >"$1")
	chmod 0600 "$1"
}

# valid_config FILE [PROFILE]: the minimal valid v1 document.
valid_config() {
	write_config "$1" <<-EOF
		version = 1

		[profiles.${2:-dev}]
		image = "oci:/srv/images/dev:latest"
	EOF
}

# check ARGS...: `config check` of $CFG for profile dev in $WS.
check() {
	lz config check --config "$CFG" --profile dev --workspace "$WS" "$@"
}

# field NAME: the value printed after "NAME:" in $OUT (text output).
field() {
	sed -n "s/^[[:space:]]*$1:[[:space:]]*//p" <<<"$OUT" | head -n 1
}

# json_get KEY: the value of KEY in the JSON object in $OUT.
json_get() {
	python3 -c 'import json, sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1" <<<"$OUT"
}

# expected_domain_id PROFILE WORKSPACE: computed independently of lazaret.
# SHA-256("lazaret-domain-id-v1" || u32be(len P) || P || u32be(len W) || W),
# where W is the canonical workspace path; the context is not length-prefixed.
expected_domain_id() {
	python3 - "$1" "$2" <<-'PY'
		import hashlib, os, struct, sys
		p = os.fsencode(sys.argv[1])
		w = os.fsencode(os.path.realpath(sys.argv[2]))
		h = hashlib.sha256()
		h.update(b"lazaret-domain-id-v1")
		h.update(struct.pack(">I", len(p)) + p)
		h.update(struct.pack(">I", len(w)) + w)
		print(h.hexdigest())
	PY
}

# assert_refused STATUS NEEDLE...: the last command failed with STATUS and an
# error on stderr ("lazaret: error: ...") that contains every NEEDLE.
assert_refused() {
	local status=$1 n
	shift
	assert_eq "$status" "$STATUS" "exit status (stderr: $ERR)"
	assert_contains "$ERR" "lazaret: error:" "stderr"
	assert_not_contains "$OUT" "lazaret: error:" "stdout"
	for n; do assert_contains "$ERR" "$n" "stderr"; done
}

# Regex-quotes a path for assert_match.
re_quote() {
	sed 's/[][\.*^$+?(){}|]/\\&/g' <<<"$1"
}

# --- version, help, usage errors ---------------------------------------------

# Output that cannot be written (a full disk, here /dev/full) fails the
# command (74) and says so, never an exit 0 with nothing written.
test_unwritable_output_fails() {
	local st=0
	lz --help >/dev/full 2>"$T/err" || st=$?
	assert_eq 74 "$st" "--help to /dev/full"
	assert_contains "$(cat "$T/err")" "lazaret: error: standard output: No space left on device"
	st=0
	lz --version >/dev/full 2>"$T/err" || st=$?
	assert_eq 74 "$st" "--version to /dev/full (stderr: $(cat "$T/err"))"
}

test_version() {
	assert_status 0 lz --version
	assert_match "$OUT" '^lazaret [0-9]+\.[0-9]+'
}

test_help() {
	assert_status 0 lz "$@"
	assert_contains "$OUT" "Usage:"
}

test_usage_error() {
	capture lz "$@"
	assert_refused 64
}

# --- config check ------------------------------------------------------------

test_check_prints_ids_and_roots() {
	valid_config "$CFG"
	assert_status 0 check
	assert_match "$OUT" '^[[:space:]]*domain id:[[:space:]]*[0-9a-f]{64}[[:space:]]*$'
	assert_match "$OUT" '^[[:space:]]*fingerprint:[[:space:]]*[0-9a-fA-F]{64}[[:space:]]*$'
	assert_match "$OUT" '^[[:space:]]*storage root:[[:space:]]*/'
	assert_match "$OUT" '^[[:space:]]*runtime root:[[:space:]]*/'
}

test_domain_id_matches_reference() {
	local ws expected
	ws=$(mktemp -d /tmp/w-XXXXXX)
	t_cleanup "$ws"
	valid_config "$CFG"
	assert_status 0 lz config check --config "$CFG" --profile dev --workspace "$ws"
	expected=$(expected_domain_id dev "$ws")
	assert_eq "$expected" "$(field 'domain id')" "domain id"
}

test_domain_id_uses_canonical_workspace() {
	local ws expected
	ws=$(mktemp -d /tmp/w-XXXXXX)
	t_cleanup "$ws"
	ln -s "$ws" "$T/link"
	valid_config "$CFG"
	assert_status 0 lz config check --config "$CFG" --profile dev --workspace "$T/link"
	expected=$(expected_domain_id dev "$ws")
	assert_eq "$expected" "$(field 'domain id')" "domain id through a symlink"
}

test_domain_id_depends_on_profile() {
	write_config "$CFG" <<-EOF
		version = 1

		[profiles.dev]
		image = "oci:/srv/images/dev:latest"

		[profiles.other]
		image = "oci:/srv/images/dev:latest"
	EOF
	assert_status 0 lz config check --config "$CFG" --profile other --workspace "$WS"
	assert_eq "$(expected_domain_id other "$WS")" "$(field 'domain id')" "domain id of profile other"
}

test_check_json() {
	local text_id text_fp text_storage text_runtime
	valid_config "$CFG"
	assert_status 0 check
	text_id=$(field 'domain id')
	text_fp=$(field fingerprint)
	text_storage=$(field 'storage root')
	text_runtime=$(field 'runtime root')
	assert_status 0 check --json
	local json=$OUT
	assert_status 0 python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert isinstance(d, dict), "not a JSON object"
keys = {"config", "storage_root", "runtime_root", "profile", "workspace", "domain_id", "fingerprint"}
missing = keys - d.keys()
assert not missing, "missing keys: %s" % sorted(missing)
' <(printf '%s' "$json")
	OUT=$json
	assert_eq dev "$(json_get profile)" "profile"
	assert_eq "$WS" "$(json_get workspace)" "workspace"
	assert_eq "$(realpath "$CFG")" "$(realpath "$(json_get config)")" "config"
	assert_eq "$(expected_domain_id dev "$WS")" "$(json_get domain_id)" "domain_id"
	assert_eq "$text_id" "$(json_get domain_id)" "domain_id (text vs JSON)"
	assert_eq "$text_fp" "$(json_get fingerprint)" "fingerprint (text vs JSON)"
	assert_eq "$text_storage" "$(json_get storage_root)" "storage_root (text vs JSON)"
	assert_eq "$text_runtime" "$(json_get runtime_root)" "runtime_root (text vs JSON)"
}

test_full_schema_accepted() {
	mkdir "$T/vol"
	write_config "$CFG" <<-EOF
		version = 1

		[storage]
		data_root = "$T/data-root"

		[runtime]
		runsc_dcache = 1000

		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
		persistent_dirs = ["/home/dev/.cache"]
		isolate_ignored = true

		[profiles.dev.env]
		TOKEN = "LZ_E2E_SECRET"

		[[profiles.dev.volumes]]
		source = "$T/vol"
		destination = "/data"
		read_only = true

		[profiles.dev.network]
		allow = ["198.51.100.0/24"]
		deny = ["203.0.113.0/24"]

		[[profiles.dev.escalation.auto_approve]]
		executable = "/usr/bin/apt-get"
		args = ["update"]
	EOF
	env_set "LZ_E2E_SECRET=$SECRET"
	assert_status 0 check
}

test_runsc_dcache_bounds() {
	local value=$1 status=$2
	write_config "$CFG" <<-EOF
		version = 1

		[runtime]
		runsc_dcache = $value

		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
	EOF
	capture check
	if [ "$status" = 0 ]; then
		assert_eq 0 "$STATUS" "exit status (stderr: $ERR)"
	else
		assert_refused "$status" "runsc_dcache"
	fi
}

test_example_config_checks() {
	[ -n "${EXAMPLES:-}" ] || fail "EXAMPLES is not set"
	[ -f "$EXAMPLES/config.toml" ] || fail "$EXAMPLES/config.toml does not exist"
	write_config "$CFG" <"$EXAMPLES/config.toml"
	assert_status 0 check
}

# --- configuration refusals --------------------------------------------------

test_refuses_writable_config() {
	valid_config "$CFG"
	chmod "$1" "$CFG"
	capture check
	assert_refused 78 "group or other write"
}

test_refuses_hard_linked_config() {
	valid_config "$T/real.toml"
	ln "$T/real.toml" "$T/second.toml"
	capture lz config check --config "$T/real.toml" --profile dev --workspace "$WS"
	assert_refused 78 "hard link"
}

test_refuses_symlink_to_hard_linked_config() {
	valid_config "$T/real.toml"
	ln "$T/real.toml" "$T/second.toml"
	ln -s real.toml "$CFG"
	capture check
	assert_refused 78 "hard link"
}

test_refuses_duplicate_key_with_position() {
	write_config "$CFG" <<-EOF
		version = 1
		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
		image = "oci:/srv/images/dev:latest"
	EOF
	capture check
	assert_refused 78 "duplicate key"
	assert_match "$ERR" "$(re_quote "$CFG"):4:[0-9]+:"
}

test_refuses_unknown_key() {
	write_config "$CFG" <<-EOF
		version = 1
		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
		imag = "x"
	EOF
	capture check
	assert_refused 78 "unknown key"
}

test_refuses_unsupported_version() {
	write_config "$CFG" <<-EOF
		version = 2
		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
	EOF
	capture check
	assert_refused 78 "unsupported version"
}

test_refuses_unset_env_reference() {
	write_config "$CFG" <<-EOF
		version = 1
		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
		[profiles.dev.env]
		TOKEN = "LZ_E2E_UNSET_VAR"
	EOF
	env_unset LZ_E2E_UNSET_VAR
	capture check
	assert_refused 78 "LZ_E2E_UNSET_VAR" "not set"
}

test_refuses_missing_profile() {
	valid_config "$CFG"
	capture lz config check --config "$CFG" --profile nosuchprofile --workspace "$WS"
	assert_refused 78 "nosuchprofile"
}

# The value of a referenced host variable is a secret: never printed, in
# either output format, on success or on refusal, and never written to the
# storage or runtime roots.
test_env_value_never_printed() {
	write_config "$CFG" <<-EOF
		version = 1
		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
		[profiles.dev.env]
		TOKEN = "LZ_E2E_SECRET"
	EOF
	env_set "LZ_E2E_SECRET=$SECRET"
	local args
	for args in "" "--json"; do
		# shellcheck disable=SC2086 # args is one optional word
		assert_status 0 check $args
		assert_not_contains "$OUT" "$SECRET" "stdout of config check $args"
		assert_not_contains "$ERR" "$SECRET" "stderr of config check $args"
	done
	assert_status 1 grep -rqF -- "$SECRET" "$T/home" "$T/run"
}

test_env_value_never_printed_on_refusal() {
	write_config "$CFG" <<-EOF
		version = 1
		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
		[profiles.dev.env]
		TOKEN = "LZ_E2E_SECRET"
		OTHER = "LZ_E2E_UNSET_VAR"
	EOF
	env_set "LZ_E2E_SECRET=$SECRET"
	local args
	for args in "" "--json"; do
		# shellcheck disable=SC2086
		capture check $args
		assert_refused 78 "LZ_E2E_UNSET_VAR"
		assert_not_contains "$OUT" "$SECRET" "stdout of config check $args"
		assert_not_contains "$ERR" "$SECRET" "stderr of config check $args"
	done
}

# --- XDG resolution ----------------------------------------------------------

# home_config PROFILE: a valid config at $HOME/.config/lazaret/config.toml.
home_config() {
	(umask 077 && mkdir -p "$T/home/.config/lazaret")
	valid_config "$T/home/.config/lazaret/config.toml" "$1"
}

# check_default PROFILE: `config check --json` without --config.
check_default() {
	lz config check --json --profile "$1" --workspace "$WS"
}

test_config_in_home_when_xdg_config_home_unset() {
	home_config fromhome
	env_unset XDG_CONFIG_HOME
	assert_status 0 check_default fromhome
	assert_eq "$T/home/.config/lazaret/config.toml" "$(json_get config)" "config path"
}

test_config_in_home_when_xdg_config_home_empty() {
	home_config fromhome
	env_set "XDG_CONFIG_HOME="
	assert_status 0 check_default fromhome
	assert_eq "$T/home/.config/lazaret/config.toml" "$(json_get config)" "config path"
}

test_relative_xdg_config_home_ignored() {
	home_config fromhome
	(umask 077 && mkdir -p "$T/rel/lazaret")
	valid_config "$T/rel/lazaret/config.toml" decoy
	env_set "XDG_CONFIG_HOME=rel"
	assert_status 0 check_default fromhome
	assert_eq "$T/home/.config/lazaret/config.toml" "$(json_get config)" "config path"
	capture check_default decoy
	assert_refused 78 decoy
}

test_absolute_xdg_config_home_used() {
	home_config fromhome
	(umask 077 && mkdir -p "$T/xdg/lazaret")
	valid_config "$T/xdg/lazaret/config.toml" fromxdg
	env_set "XDG_CONFIG_HOME=$T/xdg"
	assert_status 0 check_default fromxdg
	assert_eq "$T/xdg/lazaret/config.toml" "$(json_get config)" "config path"
	capture check_default fromhome
	assert_refused 78 fromhome
}

test_refuses_bad_xdg_runtime_dir() {
	valid_config "$CFG"
	if [ "$1" = unset ]; then
		env_unset XDG_RUNTIME_DIR
	else
		env_set "XDG_RUNTIME_DIR=$1"
	fi
	capture check
	assert_refused 78 "XDG_RUNTIME_DIR"
}

test_default_storage_root() {
	valid_config "$CFG"
	env_unset XDG_DATA_HOME
	assert_status 0 check
	assert_eq "$T/home/.local/share/lazaret" "$(field 'storage root')" "storage root"
	assert_eq "$T/run/lazaret" "$(field 'runtime root')" "runtime root"
	[ -d "$T/home/.local/share/lazaret" ] || fail "storage root was not created"
	assert_eq 700 "$(stat -c %a "$T/home/.local/share/lazaret")" "storage root mode"
}

test_xdg_data_home_storage_root() {
	valid_config "$CFG"
	mkdir -m 0700 "$T/data"
	env_set "XDG_DATA_HOME=$T/data"
	assert_status 0 check
	assert_eq "$T/data/lazaret" "$(field 'storage root')" "storage root"
	[ -d "$T/data/lazaret" ] || fail "storage root was not created"
	assert_eq 700 "$(stat -c %a "$T/data/lazaret")" "storage root mode"
	[ ! -e "$T/home/.local/share/lazaret" ] || fail "\$HOME/.local/share/lazaret was created"
	assert_status 0 check --json
	assert_eq "$T/data/lazaret" "$(json_get storage_root)" "storage_root"
}

# --- launch ------------------------------------------------------------------

# An invalid configuration is refused (78) before anything else happens.
test_launch_refuses_invalid_config() {
	write_config "$CFG" <<-EOF
		version = 2
		[profiles.dev]
		image = "oci:/srv/images/dev:latest"
	EOF
	cd "$WS"
	capture lz "$@" --config "$CFG"
	assert_refused 78 "unsupported version"
}

# Both launch forms reach the runtime, which refuses an image that does not
# exist before anything starts (test_launch.sh launches real sandboxes).
test_launch_needs_the_image() {
	valid_config "$CFG"
	cd "$WS"
	capture lz "$@" --config "$CFG"
	assert_refused 69 "/srv/images/dev"
	assert_eq "" "$(ls -A "$T/run/lazaret/domains/"*/ 2>/dev/null | grep -v -e '^hc.lock$' -e '^hc.log$' -e '^$' -e ':$')" \
		"runtime state left behind"
}

# --- diag --------------------------------------------------------------------

test_diag_reports_kernel() {
	capture lz diag
	assert_match "$STATUS" '^[01]$' "exit status of diag (stderr: $ERR)"
	assert_match "$OUT" '[Kk]ernel'
}

# The Runtime Root a launch would use: fine before the first launch, a
# problem naming the fix when XDG_RUNTIME_DIR is unset or the root is not
# private; diag itself makes nothing.
test_diag_runtime_root() {
	capture lz diag
	assert_match "$OUT" "ok +runtime root +$T/run/lazaret \(made 0700 at the first launch\)"
	[ ! -e "$T/run/lazaret" ] || fail "diag made the Runtime Root"
	mkdir -m 0755 "$T/run/lazaret"
	capture lz diag
	assert_eq 1 "$STATUS" "diag with a Runtime Root of mode 0755"
	assert_match "$OUT" "problem +runtime root +$T/run/lazaret is not a directory of yours with mode 0700"
	assert_contains "$OUT" "chmod 0700 $T/run/lazaret"
	rmdir "$T/run/lazaret"
	env_set XDG_RUNTIME_DIR=/proc/lz-none
	capture lz diag
	assert_eq 1 "$STATUS" "diag with an XDG_RUNTIME_DIR nothing can make"
	assert_match "$OUT" "problem +runtime root +/proc/lz-none/lazaret does not exist and cannot be made"
	env_unset XDG_RUNTIME_DIR
	capture lz diag
	assert_eq 1 "$STATUS" "diag without XDG_RUNTIME_DIR"
	assert_match "$OUT" "problem +runtime root +XDG_RUNTIME_DIR is not set"
	assert_contains "$OUT" "set XDG_RUNTIME_DIR to a private directory of yours"
}

test_diag_json() {
	capture lz diag --json
	assert_match "$STATUS" '^[01]$' "exit status of diag --json (stderr: $ERR)"
	assert_status 0 python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert isinstance(d, dict)' \
		<(printf '%s' "$OUT")
}

# --- diag --report ---------------------------------------------------------
# A user's report runs over diag's facts in a restricted environment
# (docs/reports.md). Exit statuses: 0 it returned true or nothing, 1 it
# returned false, 65 it failed while running (including a name that is not
# available to reports), 66 the file was refused before running.

test_report_example_runs() {
	[ -f "${EXAMPLES:-}/report.lua" ] || fail "$EXAMPLES/report.lua does not exist"
	capture lz diag --report "$EXAMPLES/report.lua"
	assert_match "$STATUS" '^[01]$' "exit status of the example report (stderr: $ERR)"
	assert_match "$OUT" '^lazaret [0-9.]+: .+@[^ ]+: (ready|not ready \(.+\); first: .+)$'
	assert_eq 1 "$(printf '%s\n' "$OUT" | wc -l)" "lines of output"
	assert_eq "" "$ERR" "stderr"
	# Its verdict agrees with diag's.
	local verdict=$STATUS
	capture lz diag
	assert_eq "$STATUS" "$verdict" "exit status of diag vs the example report"
}

test_report_verdict_is_the_exit_status() {
	printf 'print(#lazaret.checks())\nreturn false\n' >"$T/no.lua"
	assert_status 1 lz diag --report "$T/no.lua"
	assert_eq 17 "$OUT" "number of checks"
	printf 'local lz = ...\nprint(lz.json({ kernel = lz.probe.kernel().release }))\n' >"$T/yes.lua"
	assert_status 0 lz diag --report "$T/yes.lua"
	assert_eq "{\"kernel\":\"$(uname -r)\"}" "$OUT"
}

test_report_cannot_run_commands() {
	printf 'os.execute("touch %s/pwned")\n' "$T" >"$T/exec.lua"
	assert_status 65 lz diag --report "$T/exec.lua"
	assert_contains "$ERR" "lazaret: error: report $T/exec.lua: $T/exec.lua:1: os.execute is not available to diag reports"
	printf 'io.popen("touch %s/pwned")\n' "$T" >"$T/popen.lua"
	assert_status 65 lz diag --report "$T/popen.lua"
	assert_contains "$ERR" "io.popen is not available to diag reports"
	printf 'io.open("%s/pwned", "w")\n' "$T" >"$T/open.lua"
	assert_status 65 lz diag --report "$T/open.lua"
	assert_contains "$ERR" "io.open is not available to diag reports"
	printf 'load("return 1")()\n' >"$T/load.lua"
	assert_status 65 lz diag --report "$T/load.lua"
	assert_contains "$ERR" "load is not available to diag reports"
	[ ! -e "$T/pwned" ] || fail "the report reached the host"
}

test_report_cannot_load_c_modules() {
	printf 'local probe = require("lazaret.core.probe")\nprint(probe)\n' >"$T/cmod.lua"
	assert_status 65 lz diag --report "$T/cmod.lua"
	assert_contains "$ERR" "C modules cannot be loaded by diag reports (lazaret.core.probe)"
	assert_eq "" "$OUT" "stdout"
	printf 'require("lazaret.json")\n' >"$T/mod.lua"
	assert_status 65 lz diag --report "$T/mod.lua"
	assert_contains "$ERR" "modules cannot be loaded by diag reports (lazaret.json)"
	printf 'print(pcall(function() return package.loaded end))\nprint(string.dump, ("").dump, getmetatable(""))\n' >"$T/reach.lua"
	assert_status 0 lz diag --report "$T/reach.lua"
	assert_contains "$OUT" "package.loaded is not available to diag reports"
	assert_contains "$OUT" "nil	nil	false"
}

test_report_symlink_is_refused() {
	printf 'print("followed")\n' >"$T/real.lua"
	ln -s "$T/real.lua" "$T/link.lua"
	assert_status 66 lz diag --report "$T/link.lua"
	assert_contains "$ERR" "lazaret: error: report $T/link.lua: '$T/link.lua' is a symbolic link"
	assert_not_contains "$OUT" "followed"
}

test_report_unreadable_or_malformed_is_refused() {
	assert_status 66 lz diag --report "$T/missing.lua"
	assert_contains "$ERR" "'$T/missing.lua': No such file or directory"
	printf 'return true\n' >"$T/secret.lua"
	chmod 0000 "$T/secret.lua"
	assert_status 66 lz diag --report "$T/secret.lua"
	assert_contains "$ERR" "Permission denied"
	assert_status 66 lz diag --report "$T"
	assert_contains "$ERR" "is not a regular file"
	mkfifo "$T/fifo.lua"
	assert_status 66 lz diag --report "$T/fifo.lua"
	assert_contains "$ERR" "is not a regular file"
	printf 'print("partial")\nreturn 1 +\n' >"$T/syntax.lua"
	assert_status 66 lz diag --report "$T/syntax.lua"
	assert_contains "$ERR" "$T/syntax.lua:3: "
	assert_not_contains "$OUT" "partial"
	printf '\033LuaT\000' >"$T/bytecode.lua"
	assert_status 66 lz diag --report "$T/bytecode.lua"
	assert_contains "$ERR" "precompiled Lua chunk"
	head -c 1048577 /dev/zero | tr '\0' ' ' >"$T/big.lua"
	assert_status 66 lz diag --report "$T/big.lua"
	assert_contains "$ERR" "larger than 1048576 bytes"
}

test_report_errors_and_usage() {
	printf 'error("broken on purpose")\n' >"$T/err.lua"
	assert_status 65 lz diag --report "$T/err.lua"
	assert_contains "$ERR" "$T/err.lua:1: broken on purpose"
	printf 'return "ready"\n' >"$T/str.lua"
	assert_status 65 lz diag --report "$T/str.lua"
	assert_contains "$ERR" "returned a string"
	assert_status 64 lz diag --report
	assert_status 64 lz diag --report "$T/err.lua" --json
	assert_contains "$ERR" "exclude each other"
}

# no_raw_controls TEXT: no ESC, BEL, 8-bit CSI, C1 or invalid UTF-8 byte.
no_raw_controls() {
	if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f\x9b\xff]' <<<"$1"; then
		fail "raw control bytes reached the terminal: $(od -c <<<"$1" | head -5)"
	fi
}

# Strings from outside reach the terminal escaped, in every message that
# names them (no implicit host authority): a profile name, a report's
# path and the message its error raises.
test_messages_escape_terminal_controls() {
	valid_config "$CFG"
	local evil=$'x\e]52;c;cHduZWQ=\a\e[2J\xff'
	capture lz config check --config "$CFG" --profile "$evil" --workspace "$WS"
	assert_refused 78 'x\e]52;c;cHduZWQ=\x07\e[2J\xff'
	no_raw_controls "$ERR"
	printf 'error("boom \\27]52;c;eA==\\7 \\155")\n' >"$T/r.lua"
	assert_status 65 lz diag --report "$T/r.lua"
	assert_contains "$ERR" 'boom \e]52;c;eA==\x07 \x9b'
	no_raw_controls "$ERR"
	assert_status 66 lz diag --report "$T/$evil.lua"
	assert_contains "$ERR" "$T/"'x\e]52;c;cHduZWQ=\x07\e[2J\xff.lua'
	no_raw_controls "$ERR"
}

# --- run ---------------------------------------------------------------------

t_run "--version prints the version" test_version
t_run "output that cannot be written fails the command (74)" test_unwritable_output_fails
t_run "messages escape control characters and invalid UTF-8" test_messages_escape_terminal_controls
t_run "--help prints usage" test_help --help
t_run "config --help prints usage" test_help config --help
t_run "config check --help prints usage" test_help config check --help
t_run "diag --help prints usage" test_help diag --help
t_run "run --help prints usage" test_help run --help
t_run "unknown option exits 64" test_usage_error --no-such-option
t_run "unknown config subcommand exits 64" test_usage_error config no-such-command
t_run "unknown config check option exits 64" test_usage_error config check --no-such-option
t_run "option without its value exits 64" test_usage_error config check --profile
t_run "unknown diag option exits 64" test_usage_error diag --no-such-option

t_run "config check prints domain id, fingerprint and roots" test_check_prints_ids_and_roots
t_run "domain id matches the reference derivation" test_domain_id_matches_reference
t_run "domain id uses the canonical workspace path" test_domain_id_uses_canonical_workspace
t_run "domain id depends on the profile name" test_domain_id_depends_on_profile
t_run "config check --json prints one object with every key" test_check_json
t_run "every v1 setting is accepted" test_full_schema_accepted
t_run "runsc_dcache 0 is accepted" test_runsc_dcache_bounds 0 0
t_run "runsc_dcache 262144 is accepted" test_runsc_dcache_bounds 262144 0
t_run "runsc_dcache 262145 is refused" test_runsc_dcache_bounds 262145 78
t_run "runsc_dcache -1 is refused" test_runsc_dcache_bounds -1 78
t_run "examples/config.toml passes config check" test_example_config_checks

t_run "group-writable config is refused" test_refuses_writable_config 0620
t_run "other-writable config is refused" test_refuses_writable_config 0602
t_run "config with two hard links is refused" test_refuses_hard_linked_config
t_run "symlink to a config with two hard links is refused" test_refuses_symlink_to_hard_linked_config
t_run "duplicate key is refused with FILE:LINE:COLUMN" test_refuses_duplicate_key_with_position
t_run "unknown key is refused" test_refuses_unknown_key
t_run "version 2 is refused" test_refuses_unsupported_version
t_run "reference to an unset host variable is refused" test_refuses_unset_env_reference
t_run "missing profile is refused with its name" test_refuses_missing_profile
t_run "env value never appears in output" test_env_value_never_printed
t_run "env value never appears in a refusal" test_env_value_never_printed_on_refusal

t_run "config from \$HOME/.config when XDG_CONFIG_HOME is unset" test_config_in_home_when_xdg_config_home_unset
t_run "config from \$HOME/.config when XDG_CONFIG_HOME is empty" test_config_in_home_when_xdg_config_home_empty
t_run "relative XDG_CONFIG_HOME is ignored" test_relative_xdg_config_home_ignored
t_run "absolute XDG_CONFIG_HOME is used" test_absolute_xdg_config_home_used
t_run "unset XDG_RUNTIME_DIR is refused" test_refuses_bad_xdg_runtime_dir unset
t_run "relative XDG_RUNTIME_DIR is refused" test_refuses_bad_xdg_runtime_dir run
t_run "storage root defaults to \$HOME/.local/share/lazaret, mode 0700" test_default_storage_root
t_run "storage root follows XDG_DATA_HOME, mode 0700" test_xdg_data_home_storage_root

t_run "profile launch refuses an invalid config first" test_launch_refuses_invalid_config dev
t_run "run refuses an invalid config first" test_launch_refuses_invalid_config run --profile dev
t_run "a profile launch needs its image" test_launch_needs_the_image dev
t_run "run --profile is the same launch" test_launch_needs_the_image run --profile dev

t_run "diag reports the kernel" test_diag_reports_kernel
t_run "diag --json prints a JSON object" test_diag_json
t_run "diag checks the Runtime Root a launch would use" test_diag_runtime_root

t_run "diag --report runs examples/report.lua (one line, diag's verdict)" test_report_example_runs
t_run "a report's verdict is diag's exit status" test_report_verdict_is_the_exit_status
t_run "a report cannot run commands, open files or load code (65)" test_report_cannot_run_commands
t_run "a report cannot load C modules or reach the host's tables (65)" test_report_cannot_load_c_modules
t_run "a symlinked report file is refused (66)" test_report_symlink_is_refused
t_run "an unreadable or malformed report file is refused (66)" test_report_unreadable_or_malformed_is_refused
t_run "a report that raises or returns a non-boolean exits 65; usage errors 64" test_report_errors_and_usage

t_done
