#!/usr/bin/env bash
# The one benchmark command (issue 7). Builds the release binary (CMake, Release, into
# build-release/) unless SH_BIN names one, builds the C client/peers (benchtool.c), installs
# the peer tools from Debian when missing (wrk, hyperfine, bubblewrap, nginx, rsync, curl),
# then runs every figure and prints one table: figure | ours | peer or limit | ratio.
#
#   bash tests/bench/run.sh            # the full run: several minutes, needs root
#   bash tests/bench/run.sh --smoke    # tiny sizes, < 60 s: proves the script still works
#   SH_BIN=build/sandbox-host bash tests/bench/run.sh --smoke
#
# Extra arguments go to bench_all.py (e.g. --json out.json). Not a test: nothing about time
# is asserted. Run nothing else heavy meanwhile: the figures share the machine's cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" != 0 ]; then
    echo "run.sh: needs root (namespaces, cgroups, a tmpfs mount)" >&2
    exit 1
fi

need=()
for t in wrk:wrk hyperfine:hyperfine bwrap:bubblewrap nginx:nginx rsync:rsync curl:curl \
         cc:gcc cmake:cmake; do
    command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "run.sh: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    # policy-rc.d: installing nginx must not start a system nginx on port 80
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    status=0
    apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null || status=$?
    [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
    [ "$status" = 0 ] || { echo "run.sh: apt-get install failed" >&2; exit 1; }
fi

if [ -n "${SH_BIN:-}" ]; then
    bin=$(realpath "$SH_BIN")
    tooldir=$(mktemp -d /tmp/sh-benchtool.XXXXXX)
    trap 'rm -rf "$tooldir"' EXIT
else
    cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DSH_TESTS=OFF >/dev/null
    cmake --build build-release -j"$(nproc)" --target sandbox-host >/dev/null
    bin=$PWD/build-release/sandbox-host
    tooldir=$PWD/build-release
fi
cc -O2 -std=gnu17 -Wall -Wextra -o "$tooldir/benchtool" tests/bench/benchtool.c

/usr/bin/python3 tests/bench/bench_all.py --bin "$bin" --tool "$tooldir/benchtool" "$@"
