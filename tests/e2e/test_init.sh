#!/usr/bin/env bash
# End-to-end tests of `lazaret init` (issue 3, "The default image"): the first
# configuration, with one profile `default` whose image is the default image's
# OCI layout under the Storage Root. The file must pass the same checks as a
# hand-written one (owner, mode 0600, one link, strict v1), it is never
# replaced, and it lands where `config check` looks for it (XDG rules, spec
# 3.2). Runs as the unprivileged test user with a private HOME,
# XDG_RUNTIME_DIR and workspace under the test's directory $T; needs no
# network and no image (init only names the image).
# Needs: LAZARET, python3.
# Test functions are called indirectly through t_run; $T is set per test.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${LAZARET:?set LAZARET to the lazaret binary}"

t_setup() {
	mkdir -m 0700 "$T/home" "$T/run" "$T/ws"
	WS=$(realpath "$T/ws")
	LZ_ENV=("HOME=$T/home" "USER=$(id -un)" "PATH=/usr/local/bin:/usr/bin:/bin"
		"XDG_RUNTIME_DIR=$T/run")
	# scripts/test.sh finds processes left behind by this token.
	[ -z "${LZ_TEST_RUN:-}" ] || LZ_ENV+=("LZ_TEST_RUN=$LZ_TEST_RUN")
}

# lz ARGS...: runs lazaret with exactly the environment in LZ_ENV.
lz() {
	timeout -k 5 120 env -i "${LZ_ENV[@]}" "$LAZARET" "$@"
}

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

# assert_refused STATUS NEEDLE...: the last command failed with STATUS and an
# error on stderr that contains every NEEDLE.
assert_refused() {
	local status=$1 n
	shift
	assert_eq "$status" "$STATUS" "exit status (stderr: $ERR)"
	assert_contains "$ERR" "lazaret: error:" "stderr"
	for n; do assert_contains "$ERR" "$n" "stderr"; done
}

# image_of FILE: the value of the `image` key in FILE.
image_of() {
	sed -n 's/^image = "\(.*\)"$/\1/p' "$1"
}

# json_get KEY: the value of KEY in the JSON object in $OUT.
json_get() {
	python3 -c 'import json, sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1" <<<"$OUT"
}

# check_default_profile [--config FILE]: `config check --json` of profile
# default for $WS.
check_default_profile() {
	lz config check --json --profile default --workspace "$WS" "$@"
}

# --- the file init writes --------------------------------------------------------

test_init_writes_a_config_that_checks() {
	assert_status 0 lz init --config "$T/c.toml"
	assert_contains "$OUT" "wrote $T/c.toml"
	assert_contains "$OUT" "lazaret image build-default"
	[ -f "$T/c.toml" ] || fail "no file at $T/c.toml"
	assert_eq 600 "$(stat -c %a "$T/c.toml")" "mode"
	assert_eq "$(id -u)" "$(stat -c %u "$T/c.toml")" "owner"
	assert_eq 1 "$(stat -c %h "$T/c.toml")" "link count"
	assert_status 0 check_default_profile --config "$T/c.toml"
	assert_eq default "$(json_get profile)" "profile"
	assert_eq "$WS" "$(json_get workspace)" "workspace"
	local storage
	storage=$(json_get storage_root)
	assert_eq "$T/home/.local/share/lazaret" "$storage" "storage root"
	assert_eq "oci:$storage/images/default:latest" "$(image_of "$T/c.toml")" "image"
	assert_eq 1 "$(grep -c '^\[profiles\.' "$T/c.toml")" "profiles in the file"
	assert_contains "$(cat "$T/c.toml")" "version = 1"
}

test_init_image_follows_xdg_data_home() {
	mkdir -m 0700 "$T/data"
	env_set "XDG_DATA_HOME=$T/data"
	assert_status 0 lz init --config "$T/c.toml"
	assert_eq "oci:$T/data/lazaret/images/default:latest" "$(image_of "$T/c.toml")" "image"
	assert_status 0 check_default_profile --config "$T/c.toml"
	assert_eq "$T/data/lazaret" "$(json_get storage_root)" "storage root"
}

test_init_relative_config_from_cwd() {
	cd "$T" || fail "cd $T"
	assert_status 0 lz init --config rel.toml
	assert_contains "$OUT" "wrote $T/rel.toml"
	assert_eq 600 "$(stat -c %a "$T/rel.toml")" "mode"
	assert_status 0 check_default_profile --config "$T/rel.toml"
}

# A working directory whose name holds an escape sequence (one a sandbox
# made in the workspace, say): the path init prints is escaped.
test_init_prints_the_path_escaped() {
	local evil
	evil=$T/$(printf 'ev\033]0;PWNED\007il')
	mkdir "$evil"
	cd "$evil" || fail "cd"
	assert_status 0 lz init --config rel.toml
	assert_contains "$OUT" 'wrote '"$T"'/ev\e]0;PWNED\x07il/rel.toml'
	[[ "$OUT" != *$'\033'* ]] || fail "an escape byte reached the terminal: $(od -c <<<"$OUT" | head -3)"
}

# From a working directory that was removed, a relative --config names no
# file: the message says so (it said "out of memory").
test_init_relative_config_from_a_removed_cwd() {
	mkdir "$T/gone"
	cd "$T/gone" || fail "cd $T/gone"
	rmdir "$T/gone"
	capture lz init --config rel.toml
	cd "$T" || fail "cd $T"
	assert_refused 78 "--config 'rel.toml' is relative and the current directory is unavailable"
	assert_not_contains "$ERR" "out of memory"
}

# --- never replaces ------------------------------------------------------------------

test_second_init_refuses_and_keeps_the_file() {
	assert_status 0 lz init --config "$T/c.toml"
	local before
	before=$(sha256sum <"$T/c.toml")
	capture lz init --config "$T/c.toml"
	assert_refused 78 "already exists" "$T/c.toml"
	assert_eq "$before" "$(sha256sum <"$T/c.toml")" "file content"
	assert_eq 600 "$(stat -c %a "$T/c.toml")" "mode"
}

test_init_refuses_to_replace_a_hand_written_file() {
	printf 'version = 1\n# mine\n' >"$T/c.toml"
	chmod 0644 "$T/c.toml"
	capture lz init --config "$T/c.toml"
	assert_refused 78 "already exists"
	assert_eq "$(printf 'version = 1\n# mine')" "$(cat "$T/c.toml")" "file content"
	assert_eq 644 "$(stat -c %a "$T/c.toml")" "mode"
}

test_init_refuses_a_symlink_and_leaves_its_target() {
	ln -s "$T/target.toml" "$T/c.toml"
	capture lz init --config "$T/c.toml"
	assert_refused 78 "already exists"
	[ ! -e "$T/target.toml" ] || fail "init wrote through the symlink"
	[ -L "$T/c.toml" ] || fail "the symlink was replaced"
}

# --- where it writes without --config ----------------------------------------------

test_init_uses_xdg_config_home() {
	mkdir "$T/xdg"
	env_set "XDG_CONFIG_HOME=$T/xdg"
	assert_status 0 lz init
	assert_contains "$OUT" "wrote $T/xdg/lazaret/config.toml"
	[ -d "$T/xdg/lazaret" ] || fail "lazaret directory not created"
	assert_eq 700 "$(stat -c %a "$T/xdg/lazaret")" "mode of the lazaret directory"
	assert_eq 600 "$(stat -c %a "$T/xdg/lazaret/config.toml")" "mode of the file"
	[ ! -e "$T/home/.config" ] || fail "\$HOME/.config was created"
	# config check finds it by the same rules, without --config.
	assert_status 0 check_default_profile
	assert_eq "$T/xdg/lazaret/config.toml" "$(json_get config)" "config path"
}

test_init_creates_missing_xdg_config_home() {
	env_set "XDG_CONFIG_HOME=$T/cfg/nested"
	assert_status 0 lz init
	assert_eq 700 "$(stat -c %a "$T/cfg/nested")" "mode of a created XDG_CONFIG_HOME"
	assert_eq 700 "$(stat -c %a "$T/cfg/nested/lazaret")" "mode of the lazaret directory"
	assert_status 0 check_default_profile
	assert_eq "$T/cfg/nested/lazaret/config.toml" "$(json_get config)" "config path"
}

test_init_uses_home_config_when_xdg_unset() {
	env_unset XDG_CONFIG_HOME
	assert_status 0 lz init
	assert_contains "$OUT" "wrote $T/home/.config/lazaret/config.toml"
	assert_eq 700 "$(stat -c %a "$T/home/.config/lazaret")" "mode of the lazaret directory"
	assert_eq 600 "$(stat -c %a "$T/home/.config/lazaret/config.toml")" "mode of the file"
	assert_status 0 check_default_profile
	assert_eq "$T/home/.config/lazaret/config.toml" "$(json_get config)" "config path"
}

test_init_refuses_without_home() {
	env_unset HOME
	env_unset XDG_CONFIG_HOME
	capture lz init
	assert_refused 78 "HOME is not set" "--config"
	assert_eq "" "$OUT" "stdout"
	assert_eq "" "$(find "$T" -name config.toml)" "files written"
}

test_init_refuses_extra_arguments() {
	capture lz init extra
	assert_refused 64 "init takes no arguments"
	assert_eq "" "$(find "$T" -name config.toml)" "files written"
}

# --- init --agent NAME (issue 18, docs/agents.md) ----------------------------------

# without_network FILE OUT: FILE without its [profiles.*.network] table, 0600.
without_network() {
	sed '/^\[profiles\.[a-z0-9_-]*\.network\]$/,/^\]$/d' "$1" >"$2"
	chmod 0600 "$2"
}

# check_agent_profile NAME FILE: `config check` of profile NAME in FILE for $WS.
check_agent_profile() {
	lz config check --profile "$1" --workspace "$WS" --config "$2"
}

# test_init_agent_writes NAME VARIABLE PACKAGE DOMAIN...: the file for agent
# NAME, with VARIABLE set to a secret in init's environment.
test_init_agent_writes() {
	local name=$1 var=$2 package=$3 text d
	shift 3
	env_set "$var=secret-value"
	assert_status 0 lz init --agent "$name" --config "$T/c.toml"
	assert_contains "$OUT" "wrote $T/c.toml"
	assert_contains "$OUT" "lazaret image build-default"
	assert_contains "$OUT" "lazaret $name"
	assert_contains "$OUT" "npm install -g $package"
	assert_contains "$OUT" "$var"
	[ -f "$T/c.toml" ] || fail "no file at $T/c.toml"
	assert_eq 600 "$(stat -c %a "$T/c.toml")" "mode"
	assert_eq "$(id -u)" "$(stat -c %u "$T/c.toml")" "owner"
	assert_eq 1 "$(stat -c %h "$T/c.toml")" "link count"
	text=$(cat "$T/c.toml")
	assert_contains "$text" "version = 1"
	assert_eq 1 "$(grep -c '^\[profiles\.[a-z0-9_-]*\]$' "$T/c.toml")" "profiles in the file"
	assert_match "$text" "^\\[profiles\\.$name\\]$"
	assert_match "$text" "^\\[profiles\\.$name\\.network\\]$"
	assert_match "$text" "^allow_domains = \\[$"
	for d; do assert_match "$text" "^  \"$d\", +# [a-z]" "domain $d with its reason"; done
	assert_eq "oci:$T/home/.local/share/lazaret/images/default:latest" "$(image_of "$T/c.toml")" \
		"image (the default image, as plain init writes)"
	assert_contains "$text" "npm install -g $package"
	# The variable by name only, and commented out: an unset one would refuse
	# every launch of the profile.
	assert_match "$text" "^# $var = \"$var\"$"
	assert_not_contains "$text" "secret-value" "the file (a variable's value)"
	assert_not_contains "$OUT$ERR" "secret-value" "init's output"
}

# test_init_agent_config_checks NAME: config check accepts the file; the
# network table is checked only where network.allow_domains is known, the
# rest always.
test_init_agent_config_checks() {
	local name=$1
	assert_status 0 lz init --agent "$name" --config "$T/c.toml"
	without_network "$T/c.toml" "$T/n.toml"
	assert_not_contains "$(cat "$T/n.toml")" "allow_domains" "the file without its network table"
	assert_status 0 check_agent_profile "$name" "$T/n.toml"
	assert_eq "$name" "$(lz config check --json --profile "$name" --workspace "$WS" \
		--config "$T/n.toml" | python3 -c 'import json, sys; print(json.load(sys.stdin)["profile"])')" \
		"profile"
	capture check_agent_profile "$name" "$T/c.toml"
	if [ "$STATUS" -ne 0 ] && [[ "$ERR" == *allow_domains* ]]; then
		fail "network.allow_domains not implemented yet: $ERR"
	fi
	assert_eq 0 "$STATUS" "config check of the whole file (stderr: $ERR)"
	assert_contains "$OUT" "configuration is valid"
}

test_init_agent_env_lines_work_uncommented() {
	assert_status 0 lz init --agent claude --config "$T/c.toml"
	without_network "$T/c.toml" "$T/n.toml"
	sed -i -e 's/^# \(\[profiles\.claude\.env\]\)$/\1/' \
		-e 's/^# \(ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"\)$/\1/' "$T/n.toml"
	assert_match "$(cat "$T/n.toml")" '^ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"$'
	env_unset ANTHROPIC_API_KEY
	capture check_agent_profile claude "$T/n.toml"
	assert_refused 78 "ANTHROPIC_API_KEY" "is not set"
	env_set "ANTHROPIC_API_KEY=secret-value"
	assert_status 0 check_agent_profile claude "$T/n.toml"
	assert_not_contains "$OUT$ERR" "secret-value" "config check's output"
}

test_init_agent_uses_xdg_config_home() {
	env_set "XDG_CONFIG_HOME=$T/xdg"
	assert_status 0 lz init --agent=codex
	assert_contains "$OUT" "wrote $T/xdg/lazaret/config.toml"
	assert_eq 700 "$(stat -c %a "$T/xdg/lazaret")" "mode of the lazaret directory"
	assert_eq 600 "$(stat -c %a "$T/xdg/lazaret/config.toml")" "mode of the file"
	assert_contains "$(cat "$T/xdg/lazaret/config.toml")" "[profiles.codex]"
}

test_init_agent_refuses_without_home() {
	env_unset HOME
	env_unset XDG_CONFIG_HOME
	capture lz init --agent claude
	assert_refused 78 "HOME is not set"
	assert_eq "" "$OUT" "stdout"
	assert_eq "" "$(find "$T" -name config.toml)" "files written"
}

test_init_refuses_an_unknown_agent() {
	capture lz init --agent gemini --config "$T/c.toml"
	assert_refused 64 "unknown agent 'gemini'" "known: claude, codex"
	assert_eq "" "$OUT" "stdout"
	[ ! -e "$T/c.toml" ] || fail "a file was written for an unknown agent"
	capture lz init --agent Claude
	assert_refused 64 "unknown agent 'Claude'" "known: claude, codex"
	assert_eq "" "$(find "$T" -name '*.toml')" "files written"
}

test_init_agent_needs_a_value() {
	capture lz init --config "$T/c.toml" --agent
	assert_refused 64 "option '--agent' needs a value"
	capture lz init --agent= --config "$T/c.toml"
	assert_refused 64 "option '--agent' needs a non-empty value"
	capture lz init --agent claude --agent codex --config "$T/c.toml"
	assert_refused 64 "option '--agent' given twice"
	assert_eq "" "$(find "$T" -name '*.toml')" "files written"
}

test_init_agent_keeps_an_existing_file() {
	assert_status 0 lz init --config "$T/c.toml"
	local before
	before=$(sha256sum <"$T/c.toml")
	capture lz init --agent claude --config "$T/c.toml"
	assert_refused 78 "already exists" "$T/c.toml"
	assert_eq "" "$OUT" "stdout"
	assert_eq "$before" "$(sha256sum <"$T/c.toml")" "file content"
	assert_eq 600 "$(stat -c %a "$T/c.toml")" "mode"
	# and a file of its own kind
	assert_status 0 lz init --agent codex --config "$T/a.toml"
	before=$(sha256sum <"$T/a.toml")
	capture lz init --agent codex --config "$T/a.toml"
	assert_refused 78 "already exists"
	assert_eq "$before" "$(sha256sum <"$T/a.toml")" "file content"
}

t_run "init writes a 0600 config that config check accepts" test_init_writes_a_config_that_checks
t_run "init names the default image under XDG_DATA_HOME" test_init_image_follows_xdg_data_home
t_run "init --config takes a relative path from the working directory" test_init_relative_config_from_cwd
t_run "init prints the path it wrote escaped" test_init_prints_the_path_escaped
t_run "init --config relative from a removed working directory says so" test_init_relative_config_from_a_removed_cwd
t_run "a second init refuses and leaves the file unchanged" test_second_init_refuses_and_keeps_the_file
t_run "init refuses to replace a hand-written file" test_init_refuses_to_replace_a_hand_written_file
t_run "init refuses a symlink and does not write its target" test_init_refuses_a_symlink_and_leaves_its_target
t_run "init without --config writes \$XDG_CONFIG_HOME/lazaret/config.toml, dir 0700" test_init_uses_xdg_config_home
t_run "init creates a missing XDG_CONFIG_HOME 0700" test_init_creates_missing_xdg_config_home
t_run "init without XDG_CONFIG_HOME writes \$HOME/.config/lazaret/config.toml" test_init_uses_home_config_when_xdg_unset
t_run "init with HOME unset and no --config refuses" test_init_refuses_without_home
t_run "init refuses extra arguments" test_init_refuses_extra_arguments
t_run "init --agent claude writes a 0600 profile with its domains and no secret" \
	test_init_agent_writes claude ANTHROPIC_API_KEY @anthropic-ai/claude-code \
	api.anthropic.com platform.claude.com claude.ai registry.npmjs.org
t_run "init --agent codex writes a 0600 profile with its domains and no secret" \
	test_init_agent_writes codex OPENAI_API_KEY @openai/codex \
	api.openai.com chatgpt.com auth.openai.com registry.npmjs.org
t_run "config check accepts the file init --agent claude writes" test_init_agent_config_checks claude
t_run "config check accepts the file init --agent codex writes" test_init_agent_config_checks codex
t_run "the commented env lines of init --agent work once uncommented" \
	test_init_agent_env_lines_work_uncommented
t_run "init --agent without --config writes \$XDG_CONFIG_HOME/lazaret/config.toml" \
	test_init_agent_uses_xdg_config_home
t_run "init --agent with HOME unset and no --config refuses" test_init_agent_refuses_without_home
t_run "init refuses an unknown agent with the known ones and writes nothing" \
	test_init_refuses_an_unknown_agent
t_run "init refuses --agent without a value" test_init_agent_needs_a_value
t_run "init --agent refuses and keeps an existing file" test_init_agent_keeps_an_existing_file
t_done
