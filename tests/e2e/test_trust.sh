#!/usr/bin/env bash
# End-to-end tests of the trusted Lua host (issue 2, "The Lua host"): the
# binary runs only the Lua compiled into it. LUA_PATH, LUA_CPATH, LUA_INIT,
# the working directory and writable paths never supply code, and the
# configuration never leaves the trusted process as code.
# Needs: LAZARET, cc. Runs as the unprivileged test user.
# shellcheck disable=SC2031,SC2317

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${LAZARET:?set LAZARET to the lazaret binary}"

# A module tree that would take over `lazaret --version` if it were loaded.
# Every module the binary requires is in its bundle, which Lua's preload
# searcher finds first: these runs check the binary as shipped (no other
# name is ever required, no LUA_INIT runs); that the seal itself refuses a
# path or C module when a name is not bundled is spec/host_seal_spec.lua's.
plant_modules() {
	mkdir -p "$1/lazaret" "$1/lazaret/core"
	for m in main cli lazaret/main lazaret/cli; do
		mkdir -p "$1/$(dirname "$m")"
		printf 'io.write("HIJACKED\\n") os.exit(42)\n' >"$1/$m.lua"
	done
	cp "$1/lazaret/main.lua" "$1/lazaret/core/platform.lua"
	printf '#include <stdio.h>\n#include <unistd.h>\nint luaopen_lazaret_main(void){puts("HIJACKED");_exit(42);}\n' >"$1/src.c"
}

run_version() {
	assert_status 0 "$@" --version
	assert_contains "$OUT" "lazaret "
	assert_not_contains "$OUT$ERR" "HIJACKED"
}

test_lua_path_is_ignored() {
	plant_modules "$T/mods"
	run_version env LUA_PATH="$T/mods/?.lua;$T/mods/?/init.lua" \
		LUA_PATH_5_4="$T/mods/?.lua" "$LAZARET"
}

test_lua_cpath_is_ignored() {
	plant_modules "$T/mods"
	cc -shared -fPIC -o "$T/mods/lazaret.so" "$T/mods/src.c" || fail "cannot build the planted C module"
	run_version env LUA_CPATH="$T/mods/?.so" LUA_CPATH_5_4="$T/mods/?.so" "$LAZARET"
}

test_lua_init_is_ignored() {
	printf 'io.write("HIJACKED\\n")\n' >"$T/init.lua"
	run_version env LUA_INIT="@$T/init.lua" LUA_INIT_5_4='io.write("HIJACKED\n")' "$LAZARET"
}

test_working_directory_modules_are_ignored() {
	plant_modules "$T"
	cd "$T" || fail "cd"
	run_version "$LAZARET"
}

test_help_works_from_unreadable_directory() {
	mkdir -m 0300 "$T/blind"
	cd "$T/blind" || fail "cd"
	assert_status 0 "$LAZARET" --help
	assert_contains "$OUT" "Usage: lazaret"
}

test_binary_has_no_lua_source_search_strings() {
	# The host clears package.path; the default search templates must not
	# be what Lua uses (they remain in liblua, so check the live values).
	assert_status 0 "$LAZARET" --version
	# A binding-free way to prove the searchers: a profile named after a
	# planted module is just a profile name, refused as undefined config.
	plant_modules "$T/mods"
	printf 'version = 1\n' >"$T/c.toml"
	chmod 0600 "$T/c.toml"
	assert_status 78 env LUA_PATH="$T/mods/?.lua" "$LAZARET" config check --config "$T/c.toml" \
		--profile main
	assert_contains "$ERR" "profile 'main' is not defined"
	assert_not_contains "$OUT$ERR" "HIJACKED"
}

t_run "LUA_PATH does not supply modules" test_lua_path_is_ignored
t_run "LUA_CPATH does not supply modules" test_lua_cpath_is_ignored
t_run "LUA_INIT is not run" test_lua_init_is_ignored
t_run "modules in the working directory are not loaded" test_working_directory_modules_are_ignored
t_run "help works from an unreadable working directory" test_help_works_from_unreadable_directory
t_run "a planted module name is only a profile name" test_binary_has_no_lua_source_search_strings
t_done
