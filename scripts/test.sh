#!/usr/bin/env bash
# Set everything up, then run the whole test suite twice: on the normal build and on the
# ASan+UBSan build. Each pass runs the C suites (unit, wire: ctest), the contract suite
# (pytest against the built binary over real HTTP) and the OpenSandbox SDK tier (node --test
# driving the binary through OpenSandbox's npm SDK); then the VM suite and the fuzz tier
# (clang's libFuzzer, build-fuzz/) once. Ends with one summary line
# "N passed, N failed, N skipped". Exit 0 only when nothing failed. Debian's own python3 runs
# pytest (python3-pytest), whatever other python3 comes first on PATH.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --asan || { echo "0 passed, 1 failed"; exit 1; }
npm ci --prefix tests/k8s --no-audit --no-fund >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
# OpenSandbox's own JavaScript SDK, pinned (tests/opensandbox/package-lock.json)
npm ci --prefix tests/opensandbox --no-audit --no-fund >/dev/null || { echo "0 passed, 1 failed"; exit 1; }

out=build/test-results
rm -rf "$out"
mkdir -p "$out"
status=0

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

for b in build build-asan; do
    echo "=== C suites ($b) ==="
    ctest --test-dir "$b" --output-on-failure --timeout 600 \
        --output-junit "$PWD/$out/ctest-$b.xml" || status=1
    echo "=== contract suite ($b) ==="
    SH_BIN="$PWD/$b/sandbox-host" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/contract \
        --junitxml="$out/pytest-$b.xml" || status=1
    if [ "$b" = build ]; then
        # the image tests' own fixtures (real registry, images, hostile servers): no daemon
        echo "=== image fixtures ==="
        /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/images \
            --junitxml="$out/pytest-images.xml" || status=1
        # the code interpreter's drivers run as the daemon runs them: no daemon (~30 s)
        echo "=== code drivers ==="
        /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/code \
            --junitxml="$out/pytest-code.xml" || status=1
        echo "=== bench smoke ($b) ==="
        SH_BIN="$PWD/$b/sandbox-host" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
            tests/bench/test_bench_smoke.py tests/bench/test_release_build.py \
            tests/bench/test_benchtool.py \
            --junitxml="$out/pytest-bench-$b.xml" || status=1
    fi
    echo "=== OpenSandbox SDK tier ($b) ==="
    # node's own runner; junit for summarize.py, spec on the console
    SH_BIN="$PWD/$b/sandbox-host" node --test --test-timeout=120000 \
        --test-reporter=spec --test-reporter-destination=stdout \
        --test-reporter=junit --test-reporter-destination="$out/node-opensandbox-$b.xml" \
        tests/opensandbox/*.test.mjs || status=1
    if [ "$b" = build ]; then
        # Issue 23: the same tier through a Service of three pods (tests/opensandbox/harness.mjs,
        # SH_SDK_CLUSTER=1: three daemons with static peers behind HAProxy balancing every
        # request round robin), then the calls that reach execd again with the SDK's server
        # proxy on. Release build only, to keep the suite's time bounded.
        echo "=== OpenSandbox SDK tier through a cluster of three ($b) ==="
        SH_SDK_CLUSTER=1 SH_BIN="$PWD/$b/sandbox-host" node --test --test-timeout=120000 \
            --test-reporter=spec --test-reporter-destination=stdout \
            --test-reporter=junit --test-reporter-destination="$out/node-opensandbox-cluster-$b.xml" \
            tests/opensandbox/*.test.mjs || status=1
        echo "=== OpenSandbox SDK tier through a cluster of three, server proxy on ($b) ==="
        SH_SDK_CLUSTER=1 SH_SDK_SERVER_PROXY=1 SH_BIN="$PWD/$b/sandbox-host" node --test \
            --test-timeout=120000 --test-reporter=spec --test-reporter-destination=stdout \
            --test-reporter=junit \
            --test-reporter-destination="$out/node-opensandbox-cluster-proxy-$b.xml" \
            tests/opensandbox/lifecycle.test.mjs tests/opensandbox/commands.test.mjs \
            tests/opensandbox/files.test.mjs || status=1
        # Issue 24: the egress tests through the SDK, the daemon inside a pod network namespace
        # that egresslib.py's runner makes (a test internet beside it: dnsmasq, HTTP, TEST-NET
        # addresses) and removes afterwards; the file skips, with the runner's printed reason,
        # when this is not root or namespaces, dnsmasq or nftables are missing.
        echo "=== OpenSandbox SDK tier, egress inside a test pod ($b) ==="
        SH_BIN="$PWD/$b/sandbox-host" /usr/bin/python3 tests/contract/egresslib.py run-in-pod -- \
            node --test --test-timeout=120000 \
            --test-reporter=spec --test-reporter-destination=stdout \
            --test-reporter=junit \
            --test-reporter-destination="$out/node-opensandbox-egress-$b.xml" \
            tests/opensandbox/egress.test.mjs || status=1
    fi
    echo "=== k8s suite ($b) ==="
    SH_BIN="$PWD/$b/sandbox-host" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/k8s \
        --junitxml="$out/pytest-k8s-$b.xml" || status=1
done

echo "=== cgroup v2 VM suite (qemu) ==="
/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/vm --junitxml="$out/pytest-vm.xml" \
    || status=1

echo "=== fuzz tier (libFuzzer, build-fuzz) ==="
# Each target's seeds, then a few seconds of new inputs (scripts/fuzz.sh runs them longer);
# skipped with its reason where clang cannot build them.
bash scripts/fuzz.sh --ci "$out/ctest-fuzz.xml" "${SH_FUZZ_SECONDS:-5}" || status=1

/usr/bin/python3 scripts/summarize.py "$out"/*.xml || status=1
exit $status
