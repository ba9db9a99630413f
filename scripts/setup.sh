#!/usr/bin/env bash
# Install every dependency from Debian's archive and build the daemon (build/) and, with
# --asan, the sanitizer build too (build-asan/). Idempotent: re-running only rebuilds what
# changed. Needs root for apt-get (a non-root user gets sudo when it is there).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config git libmicrohttpd-dev libcjson-dev libseccomp-dev
      libcap-dev libsodium-dev libssl-dev check libcurl4-openssl-dev libarchive-dev rsync python3 python3-pytest
      python3-pytest-timeout python3-yaml python3-jsonschema
      clang clang-format cppcheck qemu-system-x86 cpio busybox-static e2fsprogs xfsprogs acl bubblewrap
      haproxy libc-ares-dev dnsmasq-base libnftables-dev libnftnl-dev libmnl-dev
      docker-registry skopeo umoci zstd mmdebstrap python3-bcrypt python3-jwt python3-cryptography
      python3-matplotlib)
# Node.js and npm for tests/k8s (manifest validation, `npm ci --prefix tests/k8s`). Any node
# >= 18 with its npm does; a NodeSource nodejs (bundles npm, conflicts with Debian's npm
# package) is left as it is.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    PKGS+=(nodejs npm)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# libFuzzer and the sanitizer runtimes of that clang, for the fuzz tier (scripts/fuzz.sh):
# libclang-rt-<its major version>-dev (Debian 12: 14). Without them that tier skips.
rt="libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
if ! dpkg-query -W -f='${Status}' "$rt" 2>/dev/null | grep -q "install ok installed"; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$rt" ||
        echo "setup: $rt could not be installed: the fuzz tier will skip" >&2
fi

# The npm packages of the test tiers, exactly as their lockfiles pin them: tests/k8s (manifest
# validation) and tests/opensandbox (OpenSandbox's JavaScript SDK, which docs/opensandbox.md
# and the README point at the daemon). Without the registry the daemon still builds.
for dir in tests/k8s tests/opensandbox; do
    npm ci --prefix "$dir" --no-audit --no-fund >/dev/null ||
        echo "setup: 'npm ci --prefix $dir' failed: that test tier cannot run" >&2
done

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
if [ "${1:-}" = "--asan" ]; then
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSH_SANITIZE=ON >/dev/null
    cmake --build build-asan -j"$jobs"
fi
