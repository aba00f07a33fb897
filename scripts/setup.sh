#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine for Lazaret, build it and install it.
# Run as root from the repository root:  sudo scripts/setup.sh
# Idempotent. See docs/install.md.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
	echo "setup.sh: run as root (it installs packages and sets device modes)" >&2
	exit 1
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
export DEBIAN_FRONTEND=noninteractive

# runsc 2024-07 comes from bookworm-backports (C-REFINEMENT.md, runtime deps).
backports=/etc/apt/sources.list.d/lazaret-bookworm-backports.sources
if [ ! -e "$backports" ]; then
	cat >"$backports" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi

# A third-party source that cannot be reached must not stop the setup; the
# install below fails loudly if a package we need is missing.
apt-get update || echo "setup.sh: apt-get update reported errors; continuing" >&2

runtime_pkgs=(uidmap slirp4netns fuse3 skopeo mmdebstrap iproute2 git ca-certificates)
build_pkgs=(build-essential cmake pkg-config liblua5.4-dev lua5.4 libssl-dev
	libsqlite3-dev sqlite3 libfuse3-dev libnl-3-dev libnl-route-3-dev libgit2-dev
	libarchive-dev libzstd-dev zlib1g-dev libjansson-dev)
# tcc: the offline C build of bench/workspace (a compiler small enough to
# put in the test image).
test_pkgs=(libcmocka-dev lua-busted clang spin umoci tmux python3 busybox-static tcc
	libclang-rt-14-dev)
apt-get install -y --no-install-recommends "${runtime_pkgs[@]}" "${build_pkgs[@]}" "${test_pkgs[@]}"
apt-get install -y --no-install-recommends -t bookworm-backports runsc
# node and npm for DX-2's offline install test and bench/workspace; a
# machine that has them (NodeSource's nodejs bundles npm) keeps its own.
command -v npm >/dev/null || apt-get install -y --no-install-recommends nodejs npm

# C-REFINEMENT.md fact 4: rootless FUSE and slirp4netns need these modes.
chmod 0666 /dev/fuse /dev/net/tun

cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$repo/build" -j"$(nproc)"
cmake --install "$repo/build"
echo "setup.sh: lazaret installed as $(command -v lazaret)"

# Lazaret needs Linux 6.9 (pidfd and pidfs process identity); Debian 12
# ships 6.1. Install the backports kernel and stop, so that a chained
# quick start does not go on to fail on the old one.
IFS=. read -r kmajor kminor _ <<<"$(uname -r)"
if [ "$kmajor" -lt 6 ] || { [ "$kmajor" -eq 6 ] && [ "${kminor%%[!0-9]*}" -lt 9 ]; }; then
	apt-get install -y --no-install-recommends -t bookworm-backports linux-image-amd64
	echo "setup.sh: kernel $(uname -r) is too old for Lazaret (it needs 6.9 or newer);" \
		"the kernel from bookworm-backports is installed: reboot into it, then run the" \
		"command again" >&2
	exit 1
fi
