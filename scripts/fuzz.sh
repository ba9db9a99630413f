#!/usr/bin/env bash
# The fuzz tier (docs/hacking.md): build the libFuzzer targets of tests/fuzz with clang in
# build-fuzz/ (-DSH_FUZZ=ON) and run each one: first its committed seeds
# (tests/fuzz/corpus/<name>/), then new inputs for SECONDS. What a run finds is kept in
# build-fuzz/corpus/<name>/, never in the seeds (the next run starts from both); a crash or a
# broken property leaves its input in build-fuzz/fuzz-artifacts/ (rerun it with
# `build-fuzz/fuzz_<name> FILE`). The targets run one after another (ctest, label fuzz).
#
#   scripts/fuzz.sh [SECONDS] [NAME...]   each target (or the NAMEs) SECONDS, default 300
#   scripts/fuzz.sh --ci JUNIT [SECONDS]  CI's short run (scripts/test.sh), default 10 s each,
#                                         its JUnit report in JUNIT
#
# Without clang or its fuzzer runtime the tier is skipped with its reason (exit 0; with --ci a
# skipped test case in JUNIT), never failed. Exit 1 when a build or a target failed.
set -uo pipefail
cd "$(dirname "$0")/.."

junit=""
if [ "${1:-}" = "--ci" ]; then
    junit=${2:?usage: scripts/fuzz.sh --ci JUNIT [SECONDS]}
    case "$junit" in /*) ;; *) junit=$PWD/$junit ;; esac
    seconds=${3:-10}
    names=()
else
    seconds=${1:-300}
    names=("${@:2}")
fi
case "$seconds" in
    '' | *[!0-9]*) echo "fuzz: SECONDS must be a number, not '$seconds'" >&2; exit 2 ;;
esac

# A JUnit report of one test case (scripts/summarize.py counts it): skipped or failed.
report() { # kind (skipped|failure) message
    [ -n "$junit" ] || return 0
    local msg=${2//&/&amp;}
    msg=${msg//</&lt;}
    msg=${msg//\"/&quot;}
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="fuzz" tests="1">\n' >"$junit"
    printf '<testcase name="fuzz" classname="fuzz"><%s message="%s"/></testcase>\n' "$1" "$msg" >>"$junit"
    printf '</testsuite>\n' >>"$junit"
}

skip() {
    echo "fuzz: skipped: $1"
    report skipped "$1"
    exit 0
}

# Can clang build and link a libFuzzer target with the sanitizers? (Debian: clang and
# libclang-rt-<version>-dev, scripts/setup.sh.)
command -v clang >/dev/null 2>&1 || skip "clang is not installed (scripts/setup.sh installs it)"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return (int)(d && n) * 0; }\n' >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
    skip "clang cannot link a libFuzzer target ($(head -c 200 "$probe/log" | tr '\n' ' ')): install libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
fi

jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p build-fuzz
if ! CC=clang cmake -S . -B build-fuzz -DSH_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSH_FUZZ_SECONDS="$seconds" >build-fuzz/build.log 2>&1 ||
    ! cmake --build build-fuzz -j"$jobs" >>build-fuzz/build.log 2>&1; then
    tail -n 30 build-fuzz/build.log
    echo "fuzz: the build failed (build-fuzz/build.log)"
    report failure "the fuzz build failed (build-fuzz/build.log)"
    exit 1
fi
touch "$probe/start"

args=(--test-dir build-fuzz -L fuzz --output-on-failure)
if [ ${#names[@]} -gt 0 ]; then
    args+=(-R "^fuzz_($(IFS='|'; echo "${names[*]}"))\$")
fi
[ -n "$junit" ] && args+=(--output-junit "$junit")
status=0
ctest "${args[@]}" || status=1

# What the run left: the inputs found beside the seeds, and any crash.
for d in build-fuzz/corpus/*/; do
    name=$(basename "$d")
    printf 'fuzz_%-10s seeds %4d  found %6d\n' "$name" \
        "$(find "tests/fuzz/corpus/$name" -type f 2>/dev/null | wc -l)" "$(find "$d" -type f | wc -l)"
done
new=$(find build-fuzz/fuzz-artifacts -type f -newer "$probe/start" 2>/dev/null)
if [ -n "$new" ]; then
    echo "fuzz: inputs that failed this run:"
    echo "$new"
fi
exit $status
