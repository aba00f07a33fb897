#!/usr/bin/env bash
# End-to-end tests of "no implicit host authority" for Git (issue 16, item
# 1; rule in docs/threat-model.md "Git control files"): each attack runs in
# a real sandbox whose /workspace is the router's FUSE mount, then the
# developer's ordinary Git commands run on the host with the real git. An
# attack that worked would run `touch $T/pwned-*` as the developer; the
# marker files under the test's own directory prove that nothing ran.
# Runs as the unprivileged test user; see launch_lib.sh.
# shellcheck disable=SC2031,SC2317

# git submodule is a shell script of git's (the image has git itself).
IMAGE_EXTRA=()
for f in git-submodule git-sh-setup git-sh-i18n git-sh-i18n--envsubst; do
	IMAGE_EXTRA+=(--with-tool="$(git --exec-path)/$f")
done
. "$(dirname "${BASH_SOURCE[0]}")/launch_lib.sh"

hgit() { git -c user.name=h -c user.email=h@h -c protocol.file.allow=always "$@"; }

# A committed host repository at $WS.
make_repo() {
	git -C "$WS" init -q
	echo tracked >"$WS/tracked.txt"
	git -C "$WS" add tracked.txt
	hgit -C "$WS" commit -q -m host
}

# The developer's everyday commands in every repository the host has.
host_git_everywhere() {
	local d
	for d in "$@"; do
		hgit -C "$d" status >/dev/null 2>&1 || true
		hgit -C "$d" commit -q --allow-empty -m host-after >/dev/null 2>&1 || true
	done
}

# (An append goes through cat: busybox's printf does not report a write
# error, the router's refusal of an append to a Git control file.)
# refused_inside WHAT SCRIPT [WHY]: SCRIPT (sh) ran inside the sandbox and
# failed there, saying WHY (default: the router's EPERM), not for any
# other reason (a launch that failed, a command missing from the image).
refused_inside() {
	capture launch sh -c "echo started; $2"
	[ "$STATUS" != 0 ] || fail "$1 succeeded"
	assert_contains "$OUT" started "$1: the sandbox did not run it (status $STATUS, stderr: $ERR)"
	assert_contains "$ERR" "${3:-Operation not permitted}" "$1: refused for another reason (status $STATUS)"
}

assert_nothing_ran() {
	local m
	m=$(ls "$T" | grep '^pwned' || true)
	assert_eq "" "$m" "host Git ran what the sandbox wrote"
}

# sandbox-side snippet: a config that runs the marker for name $1
evil_cfg() { printf '[core]\\n\\tfsmonitor = touch %s/pwned-%s\\n' "$T" "$1"; }
evil_hook() { printf '#!/bin/sh\\ntouch %s/pwned-%s\\n' "$T" "$1"; }

test_a_repository_made_inside_stays_inside() {
	make_repo
	capture launch sh -c "cd /workspace && mkdir -p nested/deep && cd nested && git init -q &&
		git config core.fsmonitor 'touch $T/pwned-nested' && echo n > n.txt && git add n.txt &&
		git -c user.name=a -c user.email=a@a commit -q -m inside && git log --format=%s &&
		mkdir -p .git/hooks && printf '$(evil_hook hook)' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit &&
		cd deep && printf 'gitdir: /workspace/fake\\n' > .git && echo made"
	assert_eq 0 "$STATUS" "git init inside (stderr: $ERR)"
	assert_contains "$OUT" inside
	[ ! -e "$WS/nested/.git" ] || fail "the nested repository reached the host"
	[ ! -e "$WS/nested/deep/.git" ] || fail "a .git file reached the host"
	assert_eq n "$(cat "$WS/nested/n.txt")" "its files are ordinary workspace files"
	host_git_everywhere "$WS" "$WS/nested" "$WS/nested/deep"
	assert_nothing_ran
	# the sandbox-only repository persists across launches
	capture launch git -C /workspace/nested log --format=%s
	assert_eq inside "$OUT" "the nested repository inside persists (stderr: $ERR)"
}

test_a_workspace_without_git_gets_no_host_repository() {
	echo plain >"$WS/file"
	capture launch sh -c "cd /workspace && git init -q && git config core.fsmonitor 'touch $T/pwned-root' &&
		git add file && git -c user.name=a -c user.email=a@a commit -q -m inside && echo made"
	assert_eq 0 "$STATUS" "git init at the root inside (stderr: $ERR)"
	[ ! -e "$WS/.git" ] || fail "the workspace root became a host repository"
	host_git_everywhere "$WS"
	assert_nothing_ran
}

test_no_bare_repository_is_made_on_the_host() {
	make_repo
	refused_inside "git init --bare in the host workspace" "cd /workspace && git init -q --bare evil.git"
	refused_inside "completing a bare repository" "cd /workspace && mkdir -p b/objects b/refs && printf '$(evil_cfg bare)' > b/config &&
		git config -f b/config core.worktree /workspace && echo 'ref: refs/heads/main' > b/HEAD"
	[ ! -e "$WS/b/HEAD" ] || fail "the host has b/HEAD"
	host_git_everywhere "$WS" "$WS/b" "$WS/b/objects" "$WS/evil.git"
	assert_nothing_ran
}

test_existing_nested_repository_config_and_hooks_are_refused() {
	make_repo
	git -C "$WS" init -q inner
	hgit -C "$WS/inner" commit -q --allow-empty -m inner
	local before
	before=$(cat "$WS/inner/.git/config")
	refused_inside "appending to inner/.git/config" "cd /workspace/inner && printf '$(evil_cfg inner)' > /tmp/evil && cat /tmp/evil >> .git/config"
	refused_inside "writing an inner hook" "cd /workspace/inner && printf '$(evil_hook inner-hook)' > .git/hooks/pre-commit"
	refused_inside "moving inner/.git aside" "cd /workspace && mv inner/.git inner/g && mkdir inner/.git"
	refused_inside "moving the nested repository" "cd /workspace && mv inner moved"
	# Nor what points host Git at object stores elsewhere on the host (an
	# automount or a hung mount there would stall it), or at grafts.
	refused_inside "writing alternates" "cd /workspace/inner && mkdir -p .git/objects/info &&
		echo /net/elsewhere/objects > .git/objects/info/alternates"
	refused_inside "removing objects/info" "cd /workspace/inner && rm -rf .git/objects/info"
	refused_inside "moving alternates in" "cd /workspace/inner && mkdir -p x && echo /net/x > x/alternates &&
		mv x/alternates .git/objects/info/alternates"
	refused_inside "writing grafts" "cd /workspace && mkdir -p .git/info && echo > .git/info/grafts"
	# Nothing in a Git directory becomes a link host Git would follow out
	# of the repository (a reflog linked to a shell's startup file), nor a
	# FIFO it would block on.
	refused_inside "linking the reflog" "cd /workspace && mkdir -p .git/logs && ln -sf ../../../.bashrc .git/logs/HEAD"
	refused_inside "linking the inner index" "cd /workspace/inner && rm -f .git/index && ln -s /etc/x .git/index"
	# (gVisor may keep a FIFO to itself: what counts is the host's side)
	capture launch sh -c "cd /workspace && rm -f .git/COMMIT_EDITMSG; mkfifo .git/COMMIT_EDITMSG"
	[ ! -L "$WS/.git/logs/HEAD" ] && [ ! -L "$WS/inner/.git/index" ] && [ ! -p "$WS/.git/COMMIT_EDITMSG" ] ||
		fail "a link or FIFO reached a host Git directory"
	assert_eq "$before" "$(cat "$WS/inner/.git/config")" "inner/.git/config changed"
	[ ! -e "$WS/inner/.git/hooks/pre-commit" ] || fail "the inner hook reached the host"
	[ ! -e "$WS/inner/.git/objects/info/alternates" ] && [ ! -e "$WS/.git/info/grafts" ] ||
		fail "alternates or grafts reached the host"
	[ -d "$WS/inner/.git/objects/info" ] || fail "the inner objects/info directory was removed"
	# and Git inside the nested repository works
	capture launch sh -c "cd /workspace/inner && echo i > i.txt && git add i.txt &&
		git -c user.name=a -c user.email=a@a commit -q -m inner-inside"
	assert_eq 0 "$STATUS" "commit in the nested repository inside (stderr: $ERR)"
	assert_eq inner-inside "$(git -C "$WS/inner" log -1 --format=%s)"
	host_git_everywhere "$WS" "$WS/inner"
	assert_nothing_ran
}

test_commondir_redirection_is_refused() {
	make_repo
	refused_inside "writing .git/commondir" "cd /workspace && mkdir fake && printf '$(evil_cfg commondir)' > fake/config &&
		echo ../fake > .git/commondir"
	[ ! -e "$WS/.git/commondir" ] || fail "the host has .git/commondir"
	host_git_everywhere "$WS"
	assert_nothing_ran
}

test_submodule_config_is_refused_and_update_works() {
	git init -q "$T/src"
	local v
	for v in s1 s2; do
		echo $v >"$T/src/s.txt"
		git -C "$T/src" add s.txt
		hgit -C "$T/src" commit -q -m $v
	done
	make_repo
	hgit -C "$WS" submodule add -q "$T/src" mod
	hgit -C "$WS" commit -q -m sub
	# behind the recorded commit, which is already in its object store
	# (the sandbox cannot reach $T/src)
	git -C "$WS/mod" checkout -q HEAD~1
	refused_inside "appending to .git/modules/mod/config" "cd /workspace && printf '$(evil_cfg module)' > /tmp/evil && cat /tmp/evil >> .git/modules/mod/config"
	refused_inside "writing a submodule hook" "cd /workspace && printf '$(evil_hook module-hook)' > .git/modules/mod/hooks/post-checkout"
	[ ! -e "$WS/.git/modules/mod/hooks/post-checkout" ] || fail "the submodule hook reached the host"
	assert_not_contains "$(cat "$WS/.git/modules/mod/config")" pwned ".git/modules/mod/config changed"
	capture launch sh -c "cd /workspace && git submodule update -q && cat mod/s.txt"
	assert_eq 0 "$STATUS" "submodule update inside (stderr: $ERR)"
	assert_eq s2 "$OUT"
	host_git_everywhere "$WS" "$WS/mod"
	assert_nothing_ran
}

test_worktree_commondir_is_refused() {
	make_repo
	hgit -C "$WS" worktree add -q "$T/wt"
	local before
	before=$(cat "$WS/.git/worktrees/wt/commondir")
	refused_inside "rewriting a linked worktree's commondir" "cd /workspace && mkdir fake && printf '$(evil_cfg worktree)' > fake/config &&
		echo /workspace/fake > .git/worktrees/wt/commondir"
	refused_inside "writing a linked worktree's config.worktree" "cd /workspace && printf '$(evil_cfg worktree-cfg)' > .git/worktrees/wt/config.worktree"
	assert_eq "$before" "$(cat "$WS/.git/worktrees/wt/commondir")" "the worktree's commondir changed"
	[ ! -e "$WS/.git/worktrees/wt/config.worktree" ] || fail "config.worktree reached the host"
	host_git_everywhere "$WS" "$T/wt"
	assert_nothing_ran
}

test_included_and_named_files_are_refused() {
	make_repo
	echo '[user]' >"$WS/shared.gitconfig"
	mkdir "$WS/.husky"
	git -C "$WS" config include.path ../shared.gitconfig
	git -C "$WS" config core.hooksPath .husky
	refused_inside "appending to the included file" "cd /workspace && printf '$(evil_cfg include)' > /tmp/evil && cat /tmp/evil >> shared.gitconfig"
	refused_inside "replacing the included file" "cd /workspace && printf '$(evil_cfg include2)' > other && mv other shared.gitconfig"
	refused_inside "writing a hook under core.hooksPath" "cd /workspace && printf '$(evil_hook husky)' > .husky/pre-commit && chmod +x .husky/pre-commit"
	refused_inside "replacing the core.hooksPath directory" "cd /workspace && mkdir h2 && printf '$(evil_hook husky2)' > h2/pre-commit &&
		chmod +x h2/pre-commit && rmdir .husky && mv h2 .husky"
	assert_eq '[user]' "$(cat "$WS/shared.gitconfig")"
	[ ! -e "$WS/.husky/pre-commit" ] || fail "a hook reached core.hooksPath"
	host_git_everywhere "$WS"
	assert_nothing_ran
}

# Editor configuration (hide_editor_config, default on): tracked files are
# read inside but not written; untracked ones are hidden, and what the
# sandbox writes there stays in the sandbox. Off, the workspace is plain.
test_editor_configuration_is_hidden() {
	make_repo
	mkdir "$WS/.vscode"
	echo '{"tracked": 1}' >"$WS/.vscode/settings.json"
	git -C "$WS" add .vscode/settings.json
	hgit -C "$WS" commit -q -m editor
	echo '{"secret": "host-only"}' >"$WS/.vscode/launch.json"
	capture launch sh -c 'cd /workspace && cat .vscode/settings.json && ls -a .vscode &&
		echo "{\"tasks\": [{\"runOn\": \"folderOpen\"}]}" > .vscode/tasks.json && mkdir -p .idea &&
		echo x > .idea/workspace.xml && git status --porcelain && echo done'
	assert_eq 0 "$STATUS" "launch (stderr: $ERR)"
	assert_contains "$OUT" '"tracked": 1'
	assert_not_contains "$OUT" launch.json "the host's untracked editor file is hidden"
	assert_not_contains "$OUT" " D " "git inside sees no deletion"
	assert_contains "$OUT" done
	[ ! -e "$WS/.vscode/tasks.json" ] && [ ! -e "$WS/.idea" ] || fail "editor configuration reached the host"
	refused_inside "writing a tracked editor file" 'echo "{}" > /workspace/.vscode/settings.json'
	assert_eq '{"tracked": 1}' "$(cat "$WS/.vscode/settings.json")"
	capture launch cat /workspace/.vscode/tasks.json
	assert_contains "$OUT" folderOpen "the sandbox's own editor file persists inside"
	# After the index changes (the router classifies again), the same holds.
	capture launch sh -c 'cd /workspace && echo more >> .gitignore && git add .gitignore && sleep 1 &&
		echo "{\"runOn\": \"folderOpen\"}" > .vscode/extensions.json && echo x > .exrc &&
		! echo "{}" > .vscode/settings.json && echo done'
	assert_eq 0 "$STATUS" "editor files after a rebuild (stderr: $ERR)"
	assert_contains "$OUT" done
	[ ! -e "$WS/.vscode/extensions.json" ] && [ ! -e "$WS/.exrc" ] ||
		fail "editor configuration reached the host after the index changed"
	assert_eq '{"tracked": 1}' "$(cat "$WS/.vscode/settings.json")"
	EXTRA='hide_editor_config = false
' write_profile
	capture launch sh -c 'cat /workspace/.vscode/launch.json && echo mine > /workspace/.vscode/extensions.json'
	assert_eq 0 "$STATUS" "with hide_editor_config = false (stderr: $ERR)"
	assert_contains "$OUT" host-only
	assert_eq mine "$(cat "$WS/.vscode/extensions.json")"
}

# status, add, commit, branch, merge, rebase, stash and a scratch
# repository keep working inside; the host sees the history.
test_normal_git_work_inside_keeps_working() {
	make_repo
	capture launch sh -c 'cd /workspace && g() { git -c user.name=a -c user.email=a@a "$@"; } &&
		git status --short && g checkout -q -b topic && echo t > t.txt && g add t.txt && g commit -q -m topic &&
		g checkout -q - && echo m > m.txt && g add m.txt && g commit -q -m main-2 &&
		g merge -q --no-edit topic && g checkout -q -b other HEAD~1 && echo o > o.txt && g add o.txt &&
		g commit -q -m other && g rebase -q topic && echo dirty >> tracked.txt && g stash -q &&
		g stash pop -q && g checkout -q tracked.txt && g branch --list &&
		git init -q /workspace/scratch && cd /workspace/scratch && echo s > s && g add s && g commit -q -m scratch &&
		git log --format=%s'
	assert_eq 0 "$STATUS" "git work inside (stdout: $OUT, stderr: $ERR)"
	assert_contains "$OUT" "scratch"
	assert_eq other "$(git -C "$WS" log -1 --format=%s other)"
	assert_contains "$(git -C "$WS" log --all --format=%s)" "Merge branch 'topic'"
	[ ! -e "$WS/scratch/.git" ] || fail "the scratch repository reached the host"
	assert_eq "" "$(git -C "$WS" status --porcelain --untracked-files=no)" "host status after work inside"
}

t_run "a repository made inside stays inside" test_a_repository_made_inside_stays_inside
t_run "a workspace without .git gets no host repository" test_a_workspace_without_git_gets_no_host_repository
t_run "no bare repository is made on the host" test_no_bare_repository_is_made_on_the_host
t_run "a nested repository's config and hooks are refused" test_existing_nested_repository_config_and_hooks_are_refused
t_run ".git/commondir redirection is refused" test_commondir_redirection_is_refused
t_run "a submodule's config is refused; submodule update works" test_submodule_config_is_refused_and_update_works
t_run "a linked worktree's commondir is refused" test_worktree_commondir_is_refused
t_run "included files and core.hooksPath are refused" test_included_and_named_files_are_refused
t_run "editor configuration is hidden unless switched off" test_editor_configuration_is_hidden
t_run "normal Git work inside keeps working" test_normal_git_work_inside_keeps_working
t_done
