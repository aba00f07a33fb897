#!/usr/bin/env bash
# Lazaret's test command (README): every suite in one go.
#
#   sudo scripts/test.sh [--quick]
#
# Runs as root, because it prepares the machine: the unprivileged test user
# `lazaret-test` with one subordinate UID and GID range of 65536 and its
# XDG_RUNTIME_DIR. The product itself refuses root, so the end-to-end tests
# and the busted specs run as that user, from copies in /tmp (the repository
# may live under /root, which the user cannot read). The cmocka unit tests
# run as root from the build directories, the normal build's once more as
# the test user (from a copy); the fuzzers run as root.
#
# Suites: build (build, build-asan, build-release, build-minsizerel,
# build-fuzz; all with warnings as errors), root refusal, cmocka (normal
# build as root and as the test user, ASan+UBSan build), busted (spec/),
# e2e (tests/e2e/test_*.sh), fuzz (each libFuzzer target for
# LZ_FUZZ_SECONDS, default 20). --quick skips the ASan,
# Release and MinSizeRel builds and the fuzzers. The Release, MinSizeRel and
# fuzzing builds, the protocol models and the fuzzers run in a background
# lane at the lowest priority (see lane_start). Around the e2e suite it builds, and then
# removes, the test network of tests/e2e/test_network.sh (namespace
# lztest-net; see "the test network" below).
#
# Counting: a suite that cannot run (build failure, missing tool, crash, no
# tests found) counts as a failure, never as zero. The last line of output is
# the only one of the form
#     N passed, N failed[, N skipped]
# and the exit status is 1 if anything failed.
set -uo pipefail # no -e: a failing suite is counted, the run goes on

readonly TEST_USER=lazaret-test
readonly SUBID_COUNT=65536
readonly USER_PATH=/usr/local/bin:/usr/bin:/bin
readonly CMOCKA_TIMEOUT=600 # seconds per test executable
# Unit tests that need the machine to themselves: test_router waits for
# the file system to reuse a removed inode number, which another test's
# files may take first.
readonly CMOCKA_ALONE="test_router"
readonly BUSTED_TIMEOUT=600 # per spec file
readonly E2E_TIMEOUT=1200   # per e2e file

usage() {
	cat <<-'EOF'
		Usage: sudo scripts/test.sh [--quick]

		Builds Lazaret and runs every test suite: cmocka (normal and
		ASan+UBSan builds), busted specs, libFuzzer targets and the
		end-to-end tests (as the unprivileged user lazaret-test).

		  --quick   skip the ASan+UBSan build and the fuzzers
		  --help    show this help

		Environment: LZ_FUZZ_SECONDS (default 20) bounds each fuzz target;
		LZ_E2E_FILES="test_a.sh test_b.sh" runs only those end-to-end files
		(and LZ_E2E_ONLY=REGEX only their tests whose function matches)
		(for development: the summary then counts only those).
	EOF
}

quick=0
for arg in "$@"; do
	case $arg in
	--quick) quick=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "test.sh: unknown option '$arg'" >&2; usage >&2; exit 64 ;;
	esac
done

fuzz_seconds=${LZ_FUZZ_SECONDS:-20}
case $fuzz_seconds in '' | *[!0-9]*) echo "test.sh: LZ_FUZZ_SECONDS must be a number" >&2; exit 64 ;; esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
jobs=$(nproc 2>/dev/null || echo 2)
started=$(date +%s)

# --- counting ----------------------------------------------------------------

declare -A S_PASS=() S_FAIL=() S_SKIP=()
suites=()

# record SUITE PASSED FAILED [SKIPPED]
record() {
	local s=$1
	if [ -z "${S_PASS[$s]+x}" ]; then
		suites+=("$s")
		S_PASS[$s]=0 S_FAIL[$s]=0 S_SKIP[$s]=0
	fi
	S_PASS[$s]=$((S_PASS[$s] + $2))
	S_FAIL[$s]=$((S_FAIL[$s] + $3))
	S_SKIP[$s]=$((S_SKIP[$s] + ${4:-0}))
}
pass() { record "$1" 1 0; echo "PASS [$1] $2"; }
bad() { record "$1" 0 1; echo "FAIL [$1] $2"; }

skipped() { [ "$1" -eq 0 ] || printf ', %d skipped' "$1"; }
say() { printf '\n==> %s (at %ds)\n' "$*" "$SECONDS"; }
indent() { sed 's/^/    /'; }
# Last lines of a log, indented, for a failure.
tail_of() { tail -n "${2:-60}" -- "$1" | indent; }

finish() {
	local s p=0 f=0 k=0 elapsed
	printf '\n==> summary\n'
	for s in "${suites[@]}"; do
		printf '%-14s %d passed, %d failed' "$s:" "${S_PASS[$s]}" "${S_FAIL[$s]}"
		[ "${S_SKIP[$s]}" -eq 0 ] || printf ', %d skipped' "${S_SKIP[$s]}"
		printf '\n'
		p=$((p + S_PASS[$s])) f=$((f + S_FAIL[$s])) k=$((k + S_SKIP[$s]))
	done
	elapsed=$(($(date +%s) - started))
	printf 'elapsed: %dm%02ds\n' $((elapsed / 60)) $((elapsed % 60))
	if [ "$k" -gt 0 ]; then
		printf '%d passed, %d failed, %d skipped\n' "$p" "$f" "$k"
	else
		printf '%d passed, %d failed\n' "$p" "$f"
	fi
	[ "$f" -eq 0 ]
}

# --- cleanup -----------------------------------------------------------------

work=
e2e_stage=
spec_stage=
cmocka_stage=
run_token=
uid=
gid=
home=
runtime_dir=
fuzz_targets=()
lane_log=    # the background lane (see lane_start): its report, and its process
lane_pid=
net_owned=0 # 1 while this run owns the test network (see test_network_setup)
small_fs=   # the small tmpfs of the disk-full tests, while mounted
small_env=()
net_env=()  # the test network's variables for the end-to-end tests

# reap_user_processes SUITE: kills, one PID at a time, every process of the
# test user that still carries this run's LZ_TEST_RUN token in its
# environment, and counts such a leak as a failure of SUITE (tests must leave
# no process behind). Processes without the token (another run, a user
# session) are left alone.
reap_user_processes() {
	[ -n "$uid" ] && [ -n "$run_token" ] || return 0
	local pid round found=0 before
	# Up to three rounds: a killed parent's children may still be starting.
	for round in 1 2 3; do
		before=$found
		for pid in $(ps -o pid= -u "$uid" 2>/dev/null); do
			tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qxF "LZ_TEST_RUN=$run_token" || continue
			found=$((found + 1))
			echo "    left behind: pid $pid ($(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-120))"
			kill -KILL "$pid" 2>/dev/null
		done
		[ "$found" -gt "$before" ] || break
		[ "$round" -eq 3 ] || sleep 0.2
	done
	[ "$found" -eq 0 ] || [ -z "${1:-}" ] || bad "$1" "$found process(es) of $TEST_USER left behind"
}

cleanup() {
	[ -z "$lane_pid" ] || { pkill -TERM -P "$lane_pid"; kill -TERM "$lane_pid"; } >/dev/null 2>&1
	reap_user_processes "" >/dev/null 2>&1
	[ "$net_owned" -eq 0 ] || test_network_teardown >/dev/null 2>&1
	[ -z "$small_fs" ] || { umount "$small_fs" && rmdir "$small_fs"; } >/dev/null 2>&1
	local d
	for d in "$work" "$e2e_stage" "$spec_stage" "$cmocka_stage"; do
		[ -n "$d" ] && [ -d "$d" ] && rm -rf -- "$d"
	done
}
trap cleanup EXIT
trap 'echo "test.sh: interrupted" >&2; exit 130' INT TERM HUP

# --- refusal when not root -----------------------------------------------------

if [ "$(id -u)" -ne 0 ]; then
	echo "test.sh: run as root (sudo scripts/test.sh): it creates the test user $TEST_USER" >&2
	bad setup "not running as root"
	finish
	exit 1
fi

work=$(mktemp -d /tmp/lazaret-test.XXXXXX) || { echo "test.sh: mktemp failed" >&2; exit 1; }
run_token=${work##*/}

# --- (a) the test user -----------------------------------------------------------

# ensure_subids FILE ADD_OPT DEL_OPT: the test user has exactly one range of
# SUBID_COUNT IDs in FILE that overlaps no other entry; otherwise its entries
# are replaced by one range starting above every other range.
ensure_subids() {
	local file=$1 add=$2 del=$3 ours n start count s c
	[ -e "$file" ] || install -m 0644 /dev/null "$file"
	ours=$(awk -F: -v n="$TEST_USER" -v u="$uid" '$1 == n || $1 == u' "$file")
	n=$(printf '%s' "$ours" | grep -c .)
	if [ "$n" -eq 1 ]; then
		IFS=: read -r _ start count <<<"$ours"
		if [ "$count" = "$SUBID_COUNT" ] && ! awk -F: -v n="$TEST_USER" -v u="$uid" \
			-v s="$start" -v c="$count" \
			'$1 != n && $1 != u && NF >= 3 && $2 < s + c && s < $2 + $3 { hit = 1 } END { exit !hit }' \
			"$file"; then
			return 0
		fi
	fi
	if [ "$n" -gt 0 ]; then
		while IFS=: read -r _ s c; do
			usermod "$del" "$s-$((s + c - 1))" "$TEST_USER" || return 1
		done <<<"$ours"
	fi
	start=$(awk -F: -v n="$TEST_USER" -v u="$uid" 'BEGIN { m = 100000 }
		$1 != n && $1 != u && NF >= 3 && $2 + $3 > m { m = $2 + $3 } END { printf "%d\n", m }' "$file")
	echo "    $file: $TEST_USER gets $start-$((start + SUBID_COUNT - 1))"
	usermod "$add" "$start-$((start + SUBID_COUNT - 1))" "$TEST_USER" || return 1
	n=$(awk -F: -v n="$TEST_USER" -v u="$uid" -v c="$SUBID_COUNT" '($1 == n || $1 == u) && $3 == c' "$file" | grep -c .)
	[ "$n" -eq 1 ]
}

prepare_user() {
	if ! id -u "$TEST_USER" >/dev/null 2>&1; then
		useradd -m -s /bin/bash "$TEST_USER" || return 1
	fi
	uid=$(id -u "$TEST_USER") gid=$(id -g "$TEST_USER")
	home=$(getent passwd "$TEST_USER" | cut -d: -f6)
	if [ ! -d "$home" ]; then
		install -d -m 0700 -o "$uid" -g "$gid" "$home" || return 1
	fi
	ensure_subids /etc/subuid --add-subuids --del-subuids || return 1
	ensure_subids /etc/subgid --add-subgids --del-subgids || return 1
	runtime_dir=/run/user/$uid
	mkdir -p /run/user && chmod 0755 /run/user &&
		mkdir -p "$runtime_dir" && chown "$uid:$gid" "$runtime_dir" && chmod 0700 "$runtime_dir"
}

say "test user"
if prepare_user; then
	pass setup "$TEST_USER (uid $uid): $(grep -E "^($TEST_USER|$uid):" /etc/subuid | head -n 1) in /etc/subuid, XDG_RUNTIME_DIR $runtime_dir"
else
	bad setup "could not prepare $TEST_USER (useradd/usermod failed)"
	id -u "$TEST_USER" >/dev/null 2>&1 || uid=
fi

# "${as_user[@]}" [NAME=VALUE...] CMD...: runs CMD as the test user with a
# minimal environment (usable under timeout, unlike a shell function).
as_user=(runuser -u "$TEST_USER" -- env -i HOME="$home" USER="$TEST_USER" LOGNAME="$TEST_USER"
	PATH="$USER_PATH" XDG_RUNTIME_DIR="$runtime_dir" LZ_TEST_RUN="$run_token")

# --- (b) builds ------------------------------------------------------------------

# build NAME DIR [CMAKE_ARGS...] [-- TARGETS...]: configure and build; keeps
# going past errors so that whatever builds is tested. Final artifacts are
# removed first, so no stale executable from an earlier build is tested.
build() {
	local name=$1 dir=$2 log gen args=() targets=() t
	log=$work/build-$name.log
	shift 2
	while [ $# -gt 0 ]; do
		[ "$1" = -- ] && { shift; targets=("$@"); break; }
		args+=("$1")
		shift
	done
	say "build $name ($dir)"
	if ! command -v cmake >/dev/null; then
		bad build "$name: cmake is not installed"
		return 1
	fi
	[ -d "$dir" ] && find "$dir" -maxdepth 1 -type f \
		\( -name lazaret -o -name lazaret-faults -o -name lazaret_spec.so -o -name 'test_*' -o -name 'fuzz_*' \
		-o -name escforge -o -name ctlforge -o -name lazaret-escalate -o -name lazaret-init \) -delete
	if ! cmake -S "$repo" -B "$dir" "${args[@]}" >"$log" 2>&1; then
		tail_of "$log"
		bad build "$name: cmake configure failed"
		return 1
	fi
	gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt")
	local keep=()
	case $gen in
	Ninja*) keep=(-- -k 0) ;;
	*Makefiles) keep=(-- -k) ;;
	esac
	local tflags=()
	for t in "${targets[@]}"; do tflags+=(--target "$t"); done
	if cmake --build "$dir" -j"$jobs" "${tflags[@]}" "${keep[@]}" >>"$log" 2>&1; then
		pass build "$name"
		return 0
	fi
	grep -E -B2 -A8 'error:|Error [0-9]|undefined reference|CMake Error' "$log" | head -n 120 | indent
	bad build "$name: build failed (continuing with what was built)"
	return 1
}

# Warnings are errors in every build of ours (LZ_WERROR); a user's build
# leaves that off (CMakeLists.txt).
# Protocol models (protocol/*.pml): spin's exhaustive safety search
# (assertions, invalid end states) and each named ltl property under weak
# fairness; every deliberately broken variant (protocol/broken/*.pml) must
# be rejected by one of those runs, or its model can no longer fail.
# spin_model MODEL DIR: runs them in DIR; prints one line per run
# ("safety" or the property, errors, states stored, depth reached).
spin_model() {
	local model=$1 dir=$2 prop out
	mkdir -p "$dir"
	(cd "$dir" && spin -a "$model" >spin.log 2>&1 && cc -w -O0 -DNOCLAIM -o safety pan.c >>spin.log 2>&1 &&
		cc -w -O0 -DNFAIR=8 -o live pan.c >>spin.log 2>&1) || return 1
	out=$(cd "$dir" && ./safety -m2000000 2>&1)
	printf '%s\n' "$out" >>"$dir/runs.log"
	printf 'safety %s %s %s\n' "$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' <<<"$out")" \
		"$(sed -nE 's/^ *([0-9.e+]+) states, stored.*/\1/p' <<<"$out" | head -n 1)" \
		"$(sed -nE 's/.*depth reached ([0-9]+).*/\1/p' <<<"$out")"
	for prop in $(sed -nE 's/^ltl ([A-Za-z0-9_]+):.*/\1/p' "$dir/spin.log"); do
		out=$(cd "$dir" && ./live -m2000000 -a -f -N "$prop" 2>&1)
		printf '%s\n' "$out" >>"$dir/runs.log"
		printf '%s %s %s %s\n' "$prop" "$(sed -nE 's/.*errors: ([0-9]+).*/\1/p' <<<"$out")" \
			"$(sed -nE 's/^ *([0-9.e+]+) states, stored.*/\1/p' <<<"$out" | head -n 1)" \
			"$(sed -nE 's/.*depth reached ([0-9]+).*/\1/p' <<<"$out")"
	done
}

protocol_suite() {
	local model name dir runs summary
	say "protocol models (spin)"
	for model in "$repo"/protocol/*.pml; do
		[ -e "$model" ] || { bad protocol "no models in protocol/"; return; }
		name=$(basename "$model" .pml)
		dir=$work/spin-$name
		if ! runs=$(spin_model "$model" "$dir"); then
			tail_of "$dir/spin.log" 30
			bad protocol "$name: spin could not check the model"
			continue
		fi
		summary=$(awk '{ printf "%s%s: %s states, depth %s", (NR > 1 ? "; " : ""), $1, $3, $4 }' <<<"$runs")
		if [ -n "$runs" ] && awk '$2 != "0" || $2 == "" { bad = 1 } END { exit bad }' <<<"$runs"; then
			pass protocol "$name: $summary"
		else
			tail_of "$dir/runs.log" 30
			bad protocol "$name: a property is violated ($summary)"
		fi
	done
	for model in "$repo"/protocol/broken/*.pml; do
		[ -e "$model" ] || { bad protocol "no broken variants in protocol/broken/"; return; }
		name=broken/$(basename "$model" .pml)
		dir=$work/spin-${name//\//-}
		if ! runs=$(spin_model "$model" "$dir"); then
			tail_of "$dir/spin.log" 30
			bad protocol "$name: spin could not check the model"
		elif awk '$2 != "0" && $2 != "" { found = 1 } END { exit !found }' <<<"$runs"; then
			pass protocol "$name: rejected ($(awk '$2 != "0" { printf "%s%s", (n++ ? ", " : ""), $1 }' <<<"$runs"))"
		else
			bad protocol "$name: spin found no violation: its model can no longer fail"
		fi
	done
}

# --- (e) fuzz -------------------------------------------------------------------------------

# fuzz_one NAME DIR: one target for fuzz_seconds in DIR (its corpus and
# artifacts there); its exit status goes to DIR/rc.
fuzz_one() {
	local rc=0
	(cd "$2" && timeout -k 10 $((fuzz_seconds + 120)) "$repo/build-fuzz/$1" \
		-max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=2048 \
		-artifact_prefix="$2/artifacts/" -print_final_stats=1 corpus) \
		</dev/null >"$2/log" 2>&1 || rc=$?
	echo "$rc" >"$2/rc"
}

fuzz_suite() {
	local name dir corpus_src rc log crashes ran=() pids=()
	# Two targets at a time, one per core of these machines, in the
	# background lane: at the lowest priority they take what the suites
	# beside them leave (the end-to-end tests mostly wait on sandboxes).
	say "fuzz (${fuzz_seconds}s per target, two at a time)"
	if [ "${#fuzz_targets[@]}" -eq 0 ]; then
		bad fuzz "no fuzz targets found (tests/fuzz/fuzz_*.c)"
		return
	fi
	for name in "${fuzz_targets[@]}"; do
		if [ ! -x "$repo/build-fuzz/$name" ]; then
			bad fuzz "$name: not built"
			continue
		fi
		dir=$work/fuzz-$name
		mkdir -p "$dir/corpus" "$dir/artifacts"
		corpus_src=$repo/tests/fuzz/corpus/${name#fuzz_}
		if [ -d "$corpus_src" ]; then
			cp -R "$corpus_src/." "$dir/corpus/"
		else
			echo "    note: no seed corpus at tests/fuzz/corpus/${name#fuzz_}/"
		fi
		# Only this suite's own jobs are waited for (the shell may hold
		# others, such as the test network's servers).
		[ "${#pids[@]}" -lt 2 ] || { wait "${pids[0]}"; pids=("${pids[@]:1}"); }
		fuzz_one "$name" "$dir" &
		pids+=("$!")
		ran+=("$name")
	done
	for rc in "${pids[@]}"; do wait "$rc"; done
	for name in "${ran[@]}"; do
		dir=$work/fuzz-$name
		log=$dir/log
		rc=$(cat "$dir/rc" 2>/dev/null || echo 1)
		if [ "$rc" -eq 0 ]; then
			pass fuzz "$name: $(grep -E '^Done [0-9]+ runs' "$log" | tail -n 1)"
			continue
		fi
		tail_of "$log" 80
		crashes=$repo/build-fuzz/crashes/$name
		if compgen -G "$dir/artifacts/*" >/dev/null; then
			mkdir -p "$crashes" && cp "$dir"/artifacts/* "$crashes/"
			echo "    reproducer(s) kept in $crashes"
		fi
		bad fuzz "$name: exited $rc (crash, leak, timeout or out of memory)"
	done
}
# --- the background lane ---------------------------------------------------------------
#
# Work that needs only the CPU and nothing of the machine's state (the
# optimised and fuzzing builds, the protocol models, the fuzzers) runs at
# the lowest priority beside the unit and end-to-end suites, which spend
# most of their time waiting; its report is replayed into the counts by
# lane_join. This keeps the whole run under 25 minutes.
lane_start() {
	lane_log=$work/lane.log
	(
		renice -n 19 -p "$BASHPID" >/dev/null
		if [ "$quick" -eq 0 ]; then
			# The optimised builds a packager makes: -O3 and -Os see other warnings.
			build release "$repo/build-release" -DCMAKE_BUILD_TYPE=Release -DLZ_TESTS=OFF -DLZ_WERROR=ON
			build minsizerel "$repo/build-minsizerel" -DCMAKE_BUILD_TYPE=MinSizeRel -DLZ_TESTS=OFF -DLZ_WERROR=ON
			if [ "${#fuzz_targets[@]}" -gt 0 ]; then
				build fuzz "$repo/build-fuzz" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
					-DLZ_FUZZ=ON -DLZ_TESTS=OFF -DLZ_SANITIZE=OFF -DLZ_WERROR=ON -- "${fuzz_targets[@]}"
			fi
		fi
		protocol_suite
		[ "$quick" -eq 1 ] || fuzz_suite
	) >"$lane_log" 2>&1 </dev/null &
	lane_pid=$!
}
# lane_join: waits for the lane, prints its report and counts its results.
lane_join() {
	local line suite
	[ -n "$lane_pid" ] || return 0
	wait "$lane_pid"
	lane_pid=
	say "background lane (builds and protocol models, run beside the suites above)"
	indent <"$lane_log"
	while IFS= read -r line; do
		case $line in
		'PASS ['*'] '* | 'FAIL ['*'] '*)
			suite=${line#* [}
			suite=${suite%%]*}
			if [ "${line:0:4}" = PASS ]; then record "$suite" 1 0; else record "$suite" 0 1; fi
			;;
		esac
	done <"$lane_log"
}

build normal "$repo/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLZ_TESTS=ON -DLZ_SANITIZE=OFF -DLZ_WERROR=ON
if [ "$quick" -eq 0 ]; then
	for f in "$repo"/tests/fuzz/fuzz_*.c; do
		[ -e "$f" ] && fuzz_targets+=("$(basename "$f" .c)")
	done
fi
lane_start
[ "$quick" -eq 1 ] || build asan "$repo/build-asan" -DCMAKE_BUILD_TYPE=Debug -DLZ_TESTS=ON -DLZ_SANITIZE=ON -DLZ_WERROR=ON

# --- root refusal ------------------------------------------------------------------

say "root refusal"
if [ -x "$repo/build/lazaret" ]; then
	status=0
	env -i PATH="$USER_PATH" HOME=/root timeout -k 5 30 "$repo/build/lazaret" --version \
		>"$work/root.out" 2>"$work/root.err" </dev/null || status=$?
	if [ "$status" -eq 77 ] && grep -q root "$work/root.err"; then
		pass root-refusal "lazaret as root exits 77 and names root"
	else
		cat "$work/root.out" "$work/root.err" | indent
		bad root-refusal "lazaret as root exited $status (expected 77 with 'root' on stderr)"
	fi
else
	bad root-refusal "build/lazaret was not built"
fi

# --- (c) cmocka ----------------------------------------------------------------------

# cmocka_one DIR LOG NAME: runs DIR/NAME (as runner, with src_env, of the
# caller) into LOG, and its exit status into LOG.rc.
cmocka_one() {
	local rc=0
	(cd "$1" && timeout -k 10 "$CMOCKA_TIMEOUT" "${runner[@]}" "${src_env[@]}" \
		CMOCKA_MESSAGE_OUTPUT=stdout ASAN_OPTIONS=abort_on_error=0 \
		UBSAN_OPTIONS=print_stacktrace=1 "./$3") </dev/null >"$2" 2>&1 || rc=$?
	echo "$rc" >"$2.rc"
}

# cmocka SUITE DIR [user]: every test_* executable in DIR, and every
# tests/<subsystem>/test_*.c; with "user", as the test user (the product
# never runs as root, and some checks differ for root: an nsfs handle opens,
# permissions do not refuse), from a copy in /tmp with the source files the
# suites read (LZ_TEST_SOURCE_DIR, tests/lz_test.h). The tests that need
# root for their fixtures (giving a file away, a mount, a network
# namespace) skip there and are not counted: the root pass of the same
# build runs them.
cmocka() {
	local suite=$1 dir=$2 as=${3:-} names=() f name log rc p f_ k k_note seen runner=(env) src_env=()
	say "$suite ($dir${as:+, as $TEST_USER})"
	if [ -n "$as" ]; then
		[ -n "$uid" ] || { bad "$suite" "no test user to run the unit tests as"; return; }
		cmocka_stage=$(mktemp -d /tmp/lazaret-cmocka.XXXXXX) || { bad "$suite" "mktemp failed"; return; }
		mkdir -p "$cmocka_stage/build" "$cmocka_stage/src/examples"
		[ -d "$dir" ] && find "$dir" -maxdepth 1 -type f -name 'test_*' -perm -u+x \
			-exec cp {} "$cmocka_stage/build/" \;
		cp "$repo/CMakeLists.txt" "$cmocka_stage/src/"
		cp "$repo/examples/config.toml" "$cmocka_stage/src/examples/"
		chown -R "$uid:$gid" "$cmocka_stage"
		chmod 0755 "$cmocka_stage"
		dir=$cmocka_stage/build
		runner=("${as_user[@]}")
		src_env=(LZ_TEST_SOURCE_DIR="$cmocka_stage/src")
	fi
	for f in "$repo"/tests/*/test_*.c; do
		[ -e "$f" ] && names+=("$(basename "$f" .c)")
	done
	if [ -d "$dir" ]; then
		while IFS= read -r f; do names+=("$(basename "$f")"); done \
			< <(find "$dir" -maxdepth 1 -type f -name 'test_*' -perm -u+x)
	fi
	mapfile -t names < <(printf '%s\n' "${names[@]}" | sed '/^$/d' | sort -u)
	if [ "${#names[@]}" -eq 0 ]; then
		bad "$suite" "no cmocka tests found (tests/*/test_*.c)"
		return
	fi
	# About half of a suite's time is spent waiting (sleeps, fsync, child
	# processes): the executables run $jobs at a time, each into its own
	# log, then those in CMOCKA_ALONE one by one; all are judged afterwards
	# in name order.
	# Only this suite's own jobs are waited for: the background lane runs
	# beside it.
	local running=() kept=() alone=() done_pid= pid
	for name in "${names[@]}"; do
		[ -x "$dir/$name" ] || continue
		if [[ " $CMOCKA_ALONE " == *" $name "* ]]; then
			alone+=("$name")
			continue
		fi
		if [ "${#running[@]}" -ge "$jobs" ]; then
			wait -n -p done_pid "${running[@]}" || true
			kept=()
			for pid in "${running[@]}"; do [ "$pid" = "$done_pid" ] || kept+=("$pid"); done
			running=("${kept[@]}")
		fi
		cmocka_one "$dir" "$work/$suite-$name.log" "$name" &
		running+=("$!")
	done
	for done_pid in "${running[@]}"; do wait "$done_pid"; done
	for name in "${alone[@]}"; do
		cmocka_one "$dir" "$work/$suite-$name.log" "$name"
	done
	for name in "${names[@]}"; do
		if [ ! -x "$dir/$name" ]; then
			bad "$suite" "$name: not built"
			continue
		fi
		log=$work/$suite-$name.log
		rc=$(cat "$log.rc" 2>/dev/null || echo 125)
		p=$(sed -n 's/^\[  PASSED  \] \([0-9]\+\) test(s)\..*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
		f_=$(sed -n 's/^\[  FAILED  \] \([0-9]\+\) test(s), listed below:.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
		k=$(sed -n 's/^\[  SKIPPED \] \([0-9]\+\) test(s), listed below:.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
		seen=$(grep -cE '^\[  (PASSED|FAILED)  \] [0-9]+ test\(s\)' "$log")
		if [ "$seen" -eq 0 ]; then
			indent <"$log"
			record "$suite" "$p" 1 "$k"
			echo "FAIL [$suite] $name: exited $rc without a cmocka summary (crash or timeout)"
			continue
		fi
		if [ "$rc" -ne 0 ] && [ "$f_" -eq 0 ]; then
			indent <"$log"
			record "$suite" "$p" 1 "$k"
			echo "FAIL [$suite] $name: all tests passed but it exited $rc (sanitizer report or leak?)"
			continue
		fi
		k_note=
		if [ -n "$as" ]; then
			record "$suite" "$p" "$f_" 0
			[ "$k" -eq 0 ] || k_note=" ($k need root: run by the root pass)"
		else
			record "$suite" "$p" "$f_" "$k"
			k_note=$(skipped "$k")
		fi
		if [ "$f_" -gt 0 ]; then
			indent <"$log"
			echo "FAIL [$suite] $name: $p passed, $f_ failed"
		else
			echo "PASS [$suite] $name: $p passed$k_note"
		fi
	done
}

cmocka cmocka "$repo/build"
cmocka cmocka-user "$repo/build" user
reap_user_processes cmocka-user
[ "$quick" -eq 1 ] || cmocka cmocka-asan "$repo/build-asan"

# --- (d) busted ------------------------------------------------------------------------

# Specs run as the test user from a copy of the tree (without .git and build
# directories) plus build/lazaret_spec.so; as root only if there is no user.
busted_suite() {
	local busted src specs=() f rel log rc p fl k plan runner
	say "busted"
	busted=$(command -v busted) || { bad busted "busted is not installed (lua-busted)"; return; }
	command -v lua5.4 >/dev/null || { bad busted "lua5.4 is not installed"; return; }
	while IFS= read -r f; do specs+=("${f#"$repo"/}"); done < <(find "$repo/spec" -name '*_spec.lua' | sort)
	if [ "${#specs[@]}" -eq 0 ]; then
		bad busted "no spec files found (spec/**/*_spec.lua)"
		return
	fi
	[ -e "$repo/build/lazaret_spec.so" ] || echo "    note: build/lazaret_spec.so was not built; specs that need it will fail"
	spec_stage=$(mktemp -d /tmp/lazaret-spec.XXXXXX) || { bad busted "mktemp failed"; return; }
	src=$spec_stage/src
	mkdir "$src" "$spec_stage/build"
	tar -C "$repo" --exclude=./.git --exclude='./build*' -cf - . | tar -C "$src" -xf - || {
		bad busted "could not copy the tree"
		return
	}
	mkdir -p "$src/build"
	[ -e "$repo/build/lazaret_spec.so" ] && cp "$repo/build/lazaret_spec.so" "$src/build/"
	chmod 0755 "$spec_stage"
	if [ -n "$uid" ]; then
		chown -R "$uid:$gid" "$src"
		runner=("${as_user[@]}")
		echo "    running as $TEST_USER from $src"
	else
		runner=(env -i HOME=/root PATH="$USER_PATH")
		echo "    running as root (no test user) from $src"
	fi
	for rel in "${specs[@]}"; do
		log=$work/busted-$(tr / - <<<"$rel").log
		rc=0
		(cd "$src" && timeout -k 10 "$BUSTED_TIMEOUT" "${runner[@]}" \
			LZ_SOURCE_DIR="$src" LZ_BUILD_DIR="$src/build" \
			lua5.4 "$busted" -o TAP --lpath="$src/lua/?.lua;$src/lua/?/init.lua" \
			--cpath="$src/build/?.so" "$rel") </dev/null >"$log" 2>&1 || rc=$?
		indent <"$log"
		p=$(grep -cE '^ok [0-9]+' "$log")
		k=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log")
		p=$((p - k))
		fl=$(grep -cE '^not ok [0-9]+' "$log")
		plan=$(grep -cE '^1\.\.[0-9]+' "$log")
		if [ "$plan" -eq 0 ] || { [ "$rc" -ne 0 ] && [ "$fl" -eq 0 ]; }; then
			fl=$((fl + 1))
			echo "FAIL [busted] $rel: busted exited $rc without finishing (crash, error or timeout)"
		fi
		record busted "$p" "$fl" "$k"
		if [ "$fl" -gt 0 ]; then
			echo "FAIL [busted] $rel: $p passed, $fl failed$(skipped "$k")"
		else
			echo "PASS [busted] $rel: $p passed$(skipped "$k")"
		fi
	done
	reap_user_processes busted
}
busted_suite

# --- the test network (for tests/e2e/test_network.sh) -----------------------------------

# A network namespace lztest-net holds the test hosts: a documentation address
# and a private-range address on its lo, reached from the host namespace (where
# slirp4netns makes the sandbox's outbound connections) over the veth pair
# lzt-host/lzt-ns by two /32 routes. The link uses TEST-NET-3 (203.0.113.0/30),
# not 192.0.2.0/24, which hosts like CI runners use for their own uplink. An
# HTTP server in the namespace answers on port NET_PORT with "hello from
# <local address>"; one on the host's 127.0.0.1:NET_LOOPBACK_PORT answers
# "host-loopback" (the sandbox must not reach it). No probe is sent before the
# routes are in place, so nothing leaves the machine. State, owner and server
# PIDs live in NET_STATE; a network whose owner run is gone is stale and is
# rebuilt, one whose owner is alive is left alone (this run counts a failure).
readonly NET_NS=lztest-net NET_HOST_IF=lzt-host NET_NS_IF=lzt-ns
readonly NET_HOST_ADDR=203.0.113.1 NET_NS_ADDR=203.0.113.2 NET_LINK=203.0.113.0/30
readonly NET_DOC=198.51.100.10 NET_PRIV=10.250.0.10 NET_PORT=8080 NET_LOOPBACK_PORT=8081
# One test host in each special range denied by default (link-local, CGNAT,
# IETF protocol assignments, benchmarking); link-local is not the metadata
# address, which a cloud host may route. NET_HOST_PORT: a server on the
# host's 0.0.0.0 answering "host-service" (the sandbox must not reach the
# host's own addresses).
readonly NET_SPECIAL="169.254.10.10 100.64.0.10 192.0.0.10 198.18.0.10" NET_HOST_PORT=8082
readonly NET_STATE=/run/lazaret-test-net
# Egress by name (tests/e2e/test_egress.sh): a DNS server on NET_DOC:53 in
# the namespace for the names of *.lazaret.test (net_dns_script), and a
# server on NET_BANNER_PORT that speaks first (a protocol that is not HTTP).
readonly NET_BANNER_PORT=2525

# proc_start PID: the process's start time (field 22 of /proc/PID/stat).
proc_start() {
	sed -E 's/^.*\) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# proc_alive PID: PID runs (a zombie does not).
proc_alive() {
	case $(sed -E 's/^.*\) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) in '' | Z) return 1 ;; esac
}

# net_routed ADDR: the host namespace routes ADDR over lzt-host.
net_routed() {
	ip -4 route get "$1" 2>/dev/null | grep -q " dev $NET_HOST_IF "
}

# net_fetch ADDR PORT: GET / from ADDR:PORT (bash /dev/tcp, bounded).
net_fetch() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout -k 1 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
		net_fetch "$1" "$2" 2>/dev/null
}

# net_check: every server answers with its body through the intended path.
net_check() {
	local a
	# shellcheck disable=SC2086 # NET_SPECIAL is a list
	for a in "$NET_DOC" "$NET_PRIV" $NET_SPECIAL; do
		net_routed "$a" && net_fetch "$a" "$NET_PORT" | grep -qx "hello from $a" || return 1
	done
	net_fetch 127.0.0.1 "$NET_LOOPBACK_PORT" | grep -qx host-loopback &&
		net_fetch "$NET_HOST_ADDR" "$NET_HOST_PORT" | grep -qx host-service
}

# test_network_teardown: stops the servers (by their recorded PIDs, checked
# against their command lines) and removes the veth (with its routes), the
# namespace and the state directory. Idempotent; prints what it left behind.
test_network_teardown() {
	local pid left=()
	if [ -f "$NET_STATE/pids" ]; then
		while read -r pid; do
			case $pid in '' | *[!0-9]*) continue ;; esac
			tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$NET_STATE/server" || continue
			kill -TERM "$pid" 2>/dev/null
			for _ in $(seq 20); do proc_alive "$pid" || break; sleep 0.1; done
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null # reaps it if it is this shell's child
		done <"$NET_STATE/pids"
	fi
	ip link del "$NET_HOST_IF" 2>/dev/null
	ip netns del "$NET_NS" 2>/dev/null
	rm -rf -- "$NET_STATE"
	net_owned=0
	net_env=()
	ip netns list 2>/dev/null | grep -qw "$NET_NS" && left+=("namespace $NET_NS")
	ip link show "$NET_HOST_IF" >/dev/null 2>&1 && left+=("link $NET_HOST_IF")
	ip -4 route show 2>/dev/null | grep -qE "^($NET_DOC|$NET_PRIV|${NET_SPECIAL// /|}) " && left+=("routes")
	pgrep -f "$NET_STATE/server" >/dev/null && left+=("server processes $(pgrep -f "$NET_STATE/server" | tr '\n' ' ')")
	[ "${#left[@]}" -eq 0 ] || { echo "left behind: ${left[*]}"; return 1; }
}

net_server_script() {
	cat <<-'PY'
		# test.sh's test host: answers any request with one line of text.
		import socketserver, sys
		ADDR, PORT, BODY = sys.argv[1], int(sys.argv[2]), sys.argv[3]
		class Handler(socketserver.BaseRequestHandler):
		    def handle(self):
		        self.request.settimeout(5)
		        data = b""
		        try:
		            while b"\r\n\r\n" not in data and b"\n\n" not in data and len(data) < 65536:
		                chunk = self.request.recv(4096)
		                if not chunk:
		                    break
		                data += chunk
		        except OSError:
		            pass
		        body = (BODY or "hello from " + self.request.getsockname()[0]) + "\n"
		        head = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n" \
		               "Connection: close\r\n\r\n" % len(body)
		        try:
		            self.request.sendall((head + body).encode())
		        except OSError:
		            pass
		class Server(socketserver.ThreadingTCPServer):
		    allow_reuse_address = True
		    daemon_threads = True
		Server((ADDR, PORT), Handler).serve_forever()
	PY
}

net_dns_script() {
	cat <<-'PY'
		# test.sh's resolver for test_egress.sh: A records of *.lazaret.test.
		# rebind-*: the first answer for a name is DOC, every later one PRIV.
		import socket, struct, sys
		ADDR, DOC, PRIV = sys.argv[1], sys.argv[2], sys.argv[3]
		FIXED = {"allowed.lazaret.test": DOC, "other.lazaret.test": DOC,
		         "api.wild.lazaret.test": DOC, "private.lazaret.test": PRIV}
		seen = set()
		s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
		s.bind((ADDR, 53))
		while True:
		    q, peer = s.recvfrom(512)
		    if len(q) < 12:
		        continue
		    qid, flags, qd = struct.unpack(">HHH", q[:6])
		    i, labels = 12, []
		    while i < len(q) and q[i] != 0:
		        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace").lower())
		        i += 1 + q[i]
		    question = q[12:i + 5]
		    name = ".".join(labels)
		    addr = FIXED.get(name)
		    if name.startswith("rebind-") and name.endswith(".lazaret.test"):
		        addr = PRIV if name in seen else DOC
		        seen.add(name)
		    if addr is None:
		        s.sendto(struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question, peer)
		        continue
		    rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + socket.inet_aton(addr)
		    s.sendto(struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0) + question + rr, peer)
	PY
}

net_banner_script() {
	cat <<-'PY'
		# test.sh's speak-first server: a banner, then one line echoed.
		import socketserver, sys
		class Handler(socketserver.StreamRequestHandler):
		    def handle(self):
		        self.request.settimeout(5)
		        try:
		            self.wfile.write(b"220 lazaret-test banner\r\n")
		            line = self.rfile.readline(512)
		            self.wfile.write(b"250 " + line)
		        except OSError:
		            pass
		class Server(socketserver.ThreadingTCPServer):
		    allow_reuse_address = True
		    daemon_threads = True
		Server((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
	PY
}

# test_network_setup: builds the test network; on success sets net_owned and
# net_env. Prints the reason on failure.
test_network_setup() {
	local py owner opid ostart a pid
	for a in ip python3 timeout; do
		command -v "$a" >/dev/null || { echo "$a is not installed"; return 1; }
	done
	py=$(python3 -c 'import sys; print(sys.executable)')
	[ -x "$py" ] || { echo "cannot find the python3 interpreter"; return 1; }
	if [ -d "$NET_STATE" ] || ip netns list 2>/dev/null | grep -qw "$NET_NS" ||
		ip link show "$NET_HOST_IF" >/dev/null 2>&1; then
		owner=$(cat "$NET_STATE/owner" 2>/dev/null)
		read -r opid ostart <<<"$owner"
		if [ -n "$opid" ] && [ "$opid" != $$ ] && [ -n "$ostart" ] &&
			[ "$(proc_start "$opid")" = "$ostart" ]; then
			echo "the test network is in use by another test.sh run (pid $opid)"
			return 1
		fi
		echo "removing a stale test network${opid:+ (of pid $opid)}"
		test_network_teardown || return 1
	fi
	# Nothing of the host's may overlap the test addresses.
	if [ -n "$(ip -4 -o addr show to "$NET_LINK")" ]; then
		echo "the host already has an address in $NET_LINK"
		return 1
	fi
	# shellcheck disable=SC2086 # NET_SPECIAL is a list
	for a in "$NET_DOC" "$NET_PRIV" $NET_SPECIAL "$NET_HOST_ADDR" "$NET_NS_ADDR"; do
		if ip -4 route show match "$a" | grep -qv '^default '; then
			echo "the host already routes $a: $(ip -4 route show match "$a" | grep -v '^default ' | head -n 1)"
			return 1
		fi
	done
	install -d -m 0700 "$NET_STATE" || return 1
	echo "$$ $(proc_start $$)" >"$NET_STATE/owner"
	net_owned=1
	net_server_script >"$NET_STATE/server.py" || return 1
	net_dns_script >"$NET_STATE/server-dns.py" || return 1
	net_banner_script >"$NET_STATE/server-banner.py" || return 1
	: >"$NET_STATE/pids"
	if ! { ip netns add "$NET_NS" &&
		ip link add "$NET_HOST_IF" type veth peer name "$NET_NS_IF" &&
		ip link set "$NET_NS_IF" netns "$NET_NS" &&
		{ sysctl -qw "net.ipv6.conf.$NET_HOST_IF.disable_ipv6=1" || true; } &&
		ip addr add "$NET_HOST_ADDR/30" dev "$NET_HOST_IF" &&
		ip link set "$NET_HOST_IF" up &&
		ip -n "$NET_NS" link set lo up &&
		ip -n "$NET_NS" addr add "$NET_DOC/32" dev lo &&
		ip -n "$NET_NS" addr add "$NET_PRIV/32" dev lo &&
		ip -n "$NET_NS" addr add "$NET_NS_ADDR/30" dev "$NET_NS_IF" &&
		ip -n "$NET_NS" link set "$NET_NS_IF" up &&
		ip -n "$NET_NS" route add default via "$NET_HOST_ADDR" dev "$NET_NS_IF" &&
		ip route add "$NET_DOC/32" via "$NET_NS_ADDR" dev "$NET_HOST_IF" &&
		ip route add "$NET_PRIV/32" via "$NET_NS_ADDR" dev "$NET_HOST_IF"; }; then
		echo "could not build the namespace, veth or routes"
		return 1
	fi
	# shellcheck disable=SC2086 # NET_SPECIAL is a list
	for a in $NET_SPECIAL; do
		if ! { ip -n "$NET_NS" addr add "$a/32" dev lo &&
			ip route add "$a/32" via "$NET_NS_ADDR" dev "$NET_HOST_IF"; }; then
			echo "could not add the test host $a"
			return 1
		fi
	done
	if ! net_routed "$NET_DOC" || ! net_routed "$NET_PRIV"; then
		echo "the host does not route the test hosts over $NET_HOST_IF"
		return 1
	fi
	# ip netns exec and the interpreter exec in place: $! is the server.
	ip netns exec "$NET_NS" "$py" -I "$NET_STATE/server.py" 0.0.0.0 "$NET_PORT" "" \
		</dev/null >"$NET_STATE/ns-server.log" 2>&1 &
	echo $! >>"$NET_STATE/pids"
	ip netns exec "$NET_NS" "$py" -I "$NET_STATE/server-dns.py" "$NET_DOC" "$NET_DOC" "$NET_PRIV" \
		</dev/null >"$NET_STATE/dns-server.log" 2>&1 &
	echo $! >>"$NET_STATE/pids"
	ip netns exec "$NET_NS" "$py" -I "$NET_STATE/server-banner.py" 0.0.0.0 "$NET_BANNER_PORT" \
		</dev/null >"$NET_STATE/banner-server.log" 2>&1 &
	echo $! >>"$NET_STATE/pids"
	"$py" -I "$NET_STATE/server.py" 127.0.0.1 "$NET_LOOPBACK_PORT" host-loopback \
		</dev/null >"$NET_STATE/loopback-server.log" 2>&1 &
	echo $! >>"$NET_STATE/pids"
	"$py" -I "$NET_STATE/server.py" 0.0.0.0 "$NET_HOST_PORT" host-service \
		</dev/null >"$NET_STATE/host-server.log" 2>&1 &
	echo $! >>"$NET_STATE/pids"
	for _ in $(seq 50); do
		net_check && break
		# A server that exited (port taken, say) will not answer.
		while read -r pid; do proc_alive "$pid" || break 2; done <"$NET_STATE/pids"
		sleep 0.2
	done
	if ! net_check; then
		echo "the test servers do not answer:"
		cat "$NET_STATE"/*-server.log 2>/dev/null | tail -n 20 | indent
		return 1
	fi
	# the host's own non-loopback addresses, where the host service answers too
	local own
	own=$(ip -4 -o addr show | awk '$2 != "lo" { split($4, a, "/"); printf "%s ", a[1] }')
	net_env=(LZ_TEST_NET=1 "LZ_TEST_HOST_DOC=$NET_DOC" "LZ_TEST_HOST_PRIV=$NET_PRIV"
		"LZ_TEST_PORT=$NET_PORT" "LZ_TEST_LOOPBACK_PORT=$NET_LOOPBACK_PORT"
		"LZ_TEST_HOST_SPECIAL=$NET_SPECIAL" "LZ_TEST_HOST_PORT=$NET_HOST_PORT"
		"LZ_TEST_HOST_OWN=${own% }" "LZ_TEST_DNS=$NET_DOC" "LZ_TEST_BANNER_PORT=$NET_BANNER_PORT")
}

# --- (f) end-to-end ------------------------------------------------------------------------

e2e_suite() {
	local files=() f log rc p fl k summary
	say "e2e"
	for f in "$repo"/tests/e2e/test_*.sh; do
		[ -e "$f" ] || continue
		# LZ_E2E_FILES (developer use): only these files, by name.
		[ -z "${LZ_E2E_FILES:-}" ] || [[ " $LZ_E2E_FILES " == *" $(basename "$f") "* ]] || continue
		files+=("$(basename "$f")")
	done
	if [ "${#files[@]}" -eq 0 ]; then
		bad e2e "no end-to-end tests found (tests/e2e/test_*.sh)"
		return
	fi
	if [ -z "$uid" ]; then
		bad e2e "the test user $TEST_USER is missing; cannot run the end-to-end tests"
		return
	fi
	if [ ! -x "$repo/build/lazaret" ]; then
		bad e2e "build/lazaret was not built; cannot run the end-to-end tests"
		return
	fi
	e2e_stage=$(mktemp -d /tmp/lazaret-e2e.XXXXXX) || { bad e2e "mktemp failed"; return; }
	install -m 0755 "$repo/build/lazaret" "$e2e_stage/lazaret"
	# The test-only build with the fault switch (CMakeLists.txt).
	[ -x "$repo/build/lazaret-faults" ] && install -m 0755 "$repo/build/lazaret-faults" "$e2e_stage/lazaret-faults"
	# The attacker inside the sandbox for test_escalation.sh (CMakeLists.txt).
	[ -x "$repo/build/escforge" ] && install -m 0755 "$repo/build/escforge" "$e2e_stage/escforge"
	# The attacker at the control socket for test_control.sh (CMakeLists.txt).
	[ -x "$repo/build/ctlforge" ] && install -m 0755 "$repo/build/ctlforge" "$e2e_stage/ctlforge"
	cp -R "$repo/tests/e2e" "$e2e_stage/e2e"
	if [ -d "$repo/examples" ]; then cp -R "$repo/examples" "$e2e_stage/examples"; else mkdir "$e2e_stage/examples"; fi
	chown -R root:root "$e2e_stage"
	chmod -R a+rX,go-w "$e2e_stage"
	chmod 0755 "$e2e_stage"
	for f in "${files[@]}"; do
		echo "--- $f"
		log=$work/e2e-$f.log
		rc=0
		file_started=$SECONDS
		(cd "$e2e_stage" && timeout -k 15 "$E2E_TIMEOUT" "${as_user[@]}" \
			LAZARET="$e2e_stage/lazaret" LAZARET_FAULTS="$e2e_stage/lazaret-faults" LZ_ESCFORGE="$e2e_stage/escforge" \
			LZ_CTLFORGE="$e2e_stage/ctlforge" \
			E2E_ROOT="$e2e_stage/e2e" EXAMPLES="$e2e_stage/examples" \
			${LAZARET_TEST_NETWORK_IMAGE:+"LAZARET_TEST_NETWORK_IMAGE=$LAZARET_TEST_NETWORK_IMAGE"} \
			${LZ_E2E_ONLY:+"LZ_E2E_ONLY=$LZ_E2E_ONLY"} \
			"${net_env[@]}" "${small_env[@]}" \
			bash "$e2e_stage/e2e/$f") </dev/null >"$log" 2>&1 || rc=$?
		indent <"$log"
		summary=$(grep -E '^# e2e: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
		if [ -n "$summary" ]; then
			read -r p fl k < <(sed -E 's/^# e2e: ([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*/\1 \2 \4/' <<<"$summary")
			k=${k:-0}
			if [ "$rc" -ne 0 ] && [ "$fl" -eq 0 ]; then
				fl=1
				echo "FAIL [e2e] $f: exited $rc although no test failed"
			fi
		else
			p=$(grep -cE '^ok [0-9]+' "$log")
			k=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log")
			p=$((p - k))
			fl=$(($(grep -cE '^not ok [0-9]+' "$log") + 1))
			echo "FAIL [e2e] $f: exited $rc without its summary line (crash or timeout)"
		fi
		record e2e "$p" "$fl" "$k"
		if [ "$fl" -gt 0 ]; then
			echo "FAIL [e2e] $f: $p passed, $fl failed$(skipped "$k") ($((SECONDS - file_started)) s)"
		else
			echo "PASS [e2e] $f: $p passed$(skipped "$k") ($((SECONDS - file_started)) s)"
		fi
		reap_user_processes e2e
	done
	# Where the suite's time goes (each test's "# took" line follows its
	# result line): the twelve slowest tests.
	echo "--- the slowest end-to-end tests (s)"
	for f in "${files[@]}"; do
		awk -v f="$f" '/^(not )?ok [0-9]+ - / { sub(/^(not )?ok [0-9]+ - /, ""); name = $0 }
			/^# took [0-9.]+ s$/ { print $3 "\t" f ": " name }' "$work/e2e-$f.log"
	done | sort -rn | head -n 12 | indent
}
# Not in a subshell: test_network_setup sets net_owned and net_env.
say "test network"
if test_network_setup >"$work/net.log" 2>&1; then
	indent <"$work/net.log"
	pass test-network "$NET_NS: $NET_DOC and $NET_PRIV port $NET_PORT, 127.0.0.1:$NET_LOOPBACK_PORT"
else
	indent <"$work/net.log"
	bad test-network "could not create the test network (tests/e2e/test_network.sh will fail)"
	[ "$net_owned" -eq 0 ] || test_network_teardown 2>&1 | indent
	net_owned=0 net_env=()
fi
# A 64 MiB file system the test user owns, for the disk-full test
# (tests/e2e/test_launch.sh): a Storage Root that fills up.
if [ -n "$uid" ] && small_fs=$(mktemp -d /tmp/lazaret-small.XXXXXX) &&
	mount -t tmpfs -o "size=64m,mode=0700,uid=$uid,gid=$gid" lazaret-small "$small_fs"; then
	small_env=("LZ_TEST_SMALL_FS=$small_fs")
else
	bad small-fs "could not mount the small tmpfs (the disk-full test will fail)"
	[ -z "$small_fs" ] || rmdir "$small_fs" 2>/dev/null
	small_fs=
fi
e2e_suite
if [ -n "$small_fs" ]; then
	umount "$small_fs" && rmdir "$small_fs" && small_fs= || bad small-fs "could not unmount $small_fs"
fi

# --- qualify on a host that is not ready (issue 10) -----------------------------------------
# Needs root to arrange, so it is not an e2e file: a user without
# subordinate IDs, and the test user on a host whose runsc is hidden (a
# private mount namespace whose /usr/bin overlay whites runsc out). Either
# way `lazaret qualify` must fail, name the reason and skip every launch.

# qualify_unready NAME WHY REASON_RE -- CMD...: runs CMD (a qualify --json
# run), expects exit 1, a failed host check WHY whose reason matches
# REASON_RE and every sandbox check skipped.
qualify_unready() {
	local name=$1 why=$2 re=$3 rc=0 out
	shift 4
	out=$work/qualify-$name
	timeout -k 5 120 "$@" </dev/null >"$out.json" 2>"$out.err" || rc=$?
	if [ "$rc" -ne 1 ]; then
		cat "$out.json" "$out.err" | indent
		bad qualify-host "$name: exited $rc, expected 1"
		return
	fi
	if python3 - "$why" "$re" "$out.json" <<-'PY' 2>"$out.py"; then
		import json, re, sys
		why, reason_re, path = sys.argv[1], sys.argv[2], sys.argv[3]
		d = json.load(open(path))
		assert d["ok"] is False, "ok is not false"
		host = {c["name"]: c for c in d["suites"][0]["checks"]}
		assert host[why]["status"] == "fail", host[why]
		assert re.search(reason_re, host[why]["reason"]), host[why]["reason"]
		sandbox = d["suites"][1]["checks"]
		assert sandbox and all(c["status"] == "skip" and why in c["reason"] for c in sandbox), sandbox
	PY
		pass qualify-host "$name: fails on '$why' and skips the launches"
	else
		indent <"$out.py"
		indent <"$out.json"
		bad qualify-host "$name: not the expected report"
	fi
}

qualify_host_suite() {
	local nosub=lazaret-nosub stage home
	say "qualify on an unready host"
	if [ ! -x "$repo/build/lazaret" ] || [ -z "$uid" ]; then
		bad qualify-host "build/lazaret or the test user is missing"
		return
	fi
	stage=$(mktemp -d /tmp/lazaret-qualify.XXXXXX) && chmod 0755 "$stage" &&
		install -m 0755 "$repo/build/lazaret" "$stage/lazaret" || { bad qualify-host "staging failed"; return; }
	if ! id -u "$nosub" >/dev/null 2>&1; then
		useradd -M -s /usr/sbin/nologin -K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0 "$nosub" ||
			{ bad qualify-host "useradd $nosub failed"; rm -rf "$stage"; return; }
	fi
	usermod --del-subuids 0-4294967294 --del-subgids 0-4294967294 "$nosub" 2>/dev/null || true
	home=$stage/home-nosub
	install -d -m 0700 -o "$nosub" "$home" "$home/run"
	qualify_unready no-subids subuid "no allocation for" -- \
		runuser -u "$nosub" -- env -i HOME="$home" PATH="$USER_PATH" XDG_RUNTIME_DIR="$home/run" \
		"$stage/lazaret" qualify --json
	# runsc hidden by an overlay whiteout in a private mount namespace.
	mkdir -p "$stage/upper" "$stage/work" && mknod "$stage/upper/runsc" c 0 0 ||
		{ bad qualify-host "no whiteout for runsc"; rm -rf "$stage"; return; }
	qualify_unready no-runsc runsc "not found" -- \
		unshare -m --propagation private -- sh -c 'mount -t overlay overlay -o "lowerdir=/usr/bin,upperdir=$1/upper,workdir=$1/work" /usr/bin && shift && exec "$@"' \
		sh "$stage" "${as_user[@]}" "$stage/lazaret" qualify --json
	rm -rf "$stage"
}
qualify_host_suite

if [ "$net_owned" -eq 1 ]; then
	say "test network teardown"
	if test_network_teardown >"$work/net.log" 2>&1; then
		pass test-network "removed (servers, routes, veth, namespace)"
	else
		indent <"$work/net.log"
		bad test-network "teardown left something behind"
	fi
fi

lane_join


# docs/requirements.md names, for every requirement, tests that exist.
requirements_suite() {
	local log=$work/requirements.log
	say "requirements (docs/requirements.md)"
	if python3 "$repo/scripts/check_requirements.py" >"$log" 2>&1; then
		pass requirements "$(tail -n 1 "$log")"
	else
		tail_of "$log" 40
		bad requirements "$(tail -n 1 "$log")"
	fi
}
requirements_suite

finish
