#!/usr/bin/env bash
# A real terminal for end-to-end tests: one tmux server per test, a bash
# in the workspace with a known prompt, and the keys and screen of a pane
# (PANE, default main). Sourced after lib.sh; needs T, WS, CFG, LAZARET and
# ENVV (the environment the shell and lazaret run with).
# shellcheck disable=SC2031,SC2317

# tmux_start COLS ROWS: the server and its first pane.
tmux_start() {
	SOCK=$T/tmux.sock
	printf 'PS1="$ "\ncd %s\n' "$WS" >"$T/rc"
	tmux -S "$SOCK" -f /dev/null new-session -d -s main -x "$1" -y "$2" \
		"${ENVV[@]}" bash --rcfile "$T/rc" -i
	tmux -S "$SOCK" set-option -g -t main remain-on-exit on >/dev/null
}

# tmux_split: a second pane (main.1) beside the first, with the same shell.
tmux_split() {
	tmux -S "$SOCK" split-window -h -t main "${ENVV[@]}" bash --rcfile "$T/rc" -i
	sleep 0.5
}

tmux_stop() {
	[ -S "$T/tmux.sock" ] && tmux -S "$T/tmux.sock" kill-server 2>/dev/null
	return 0
}

keys() { tmux -S "$SOCK" send-keys -t "${PANE:-main}" "$@"; }
screen() { tmux -S "$SOCK" capture-pane -p -t "${PANE:-main}" -S -200; }

# wait_for TEXT [SECONDS]: until the pane shows TEXT.
wait_for() {
	local _ limit=$((${2:-20} * 10))
	for _ in $(seq "$limit"); do
		screen | grep -qF -- "$1" && return 0
		sleep 0.1
	done
	fail "the pane never showed [$1]:
$(screen | grep -v "^$" | tail -n 20)"
}

# wait_count TEXT N: until the pane shows TEXT on N lines (20 s).
wait_count() {
	local _
	for _ in $(seq 200); do
		[ "$(screen | grep -cF -- "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "the pane never showed [$1] $2 times:
$(screen | grep -v "^$" | tail -n 20)"
}

# Starts `lazaret test` in the pane and waits for the guest's bash.
start_guest() {
	keys "$LAZARET test --config $CFG" Enter
	wait_for "bash-" 60
	keys 'PS1="guest\$ "' Enter
	wait_for 'guest$' # capture-pane drops trailing blanks
}
