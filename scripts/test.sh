#!/usr/bin/env bash
# test.sh — Kiln's whole test suite: the README's test command, run by .ci/run.
#
#   bash scripts/test.sh [--quick] [--no-asan] [--no-release]
#
# 1. Release build in build/ and every ctest test there: unit (cmocka), golden
#    and numeric tests, and the model tests (tests/models: Kiln vs ONNX Runtime
#    on the exported models, artifact checks, bad-input checks), and the cross
#    tests (label "cross": aarch64 artifacts run under qemu-aarch64; skipped,
#    not failed, without qemu-user or the aarch64 cross compiler), and the
#    Python package's tests (label "python"; python_install pip-installs
#    python/ into a fresh venv and runs them from there).
# 2. ASan+UBSan build in build-asan/ (-DKILN_SANITIZE=ON) and the tests there
#    except the large models, the artifact harness, the cross tests and the
#    slow tests, whose smaller siblings do run there (label filter
#    KILN_ASAN_EXCLUDE, default "models-large|artifact|cross|slow"): unit tests
#    plus the tiny models and the bad-input cases under the sanitizers.
# --quick skips the large models in the Release run too. Assumes
# scripts/setup.sh has run (packages installed). JOBS (default 2) sets the
# build and ctest parallelism; KILN_BUILD_DIR / KILN_ASAN_BUILD_DIR move the
# build folders; KILN_ASAN_BUILD_TYPE (default Debug) is the sanitizer build's
# type. Exit status: 0 only if both builds and both
# test runs pass. The last line sums up both runs: "tests: N passed, N failed".
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

JOBS="${JOBS:-2}"
ASAN_EXCLUDE="${KILN_ASAN_EXCLUDE:-models-large|artifact|cross|slow}"
do_release=1 do_asan=1 quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-asan) do_asan=0 ;;
    --no-release) do_release=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "test.sh: error: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

step() { printf '\n==> %s\n' "$*"; }
LOGDIR="$(mktemp -d /tmp/kiln-test-logs.XXXXXX)"
trap 'rm -rf "$LOGDIR"' EXIT
total_pass=0 total_fail=0 status=0

# Adds the counts of a ctest log to the totals (skipped tests are not counted).
count() {
  local log="$1" line total failed skipped
  line="$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)"
  if [ -z "$line" ]; then
    return
  fi
  failed="$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")"
  total="$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")"
  skipped="$(grep -c '(Skipped)' "$log" || true)"
  total_pass=$((total_pass + total - failed - skipped))
  total_fail=$((total_fail + failed))
}

# build_and_test DIR NAME [cmake -D options...] -- [ctest options...]
build_and_test() {
  local dir="$1" name="$2"
  shift 2
  local cmake_args=() ctest_args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmake_args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  ctest_args=("$@")

  step "$name: configure and build ($dir)"
  if ! cmake -S . -B "$dir" "${cmake_args[@]}" || ! cmake --build "$dir" -j"$JOBS"; then
    echo "test.sh: $name build failed" >&2
    status=1
    total_fail=$((total_fail + 1))
    return
  fi
  step "$name: ctest ${ctest_args[*]}"
  local log="$LOGDIR/$name.log"
  (cd "$dir" && ctest --output-on-failure --no-tests=error -j"$JOBS" "${ctest_args[@]}") 2>&1 | tee "$log"
  local rc="${PIPESTATUS[0]}"
  count "$log"
  if [ "$rc" != 0 ]; then
    status=1
    grep -q 'tests passed' "$log" || total_fail=$((total_fail + 1))  # ctest itself failed
  fi
}

if [ "$do_release" = 1 ]; then
  release_filter=()
  [ "$quick" = 1 ] && release_filter=(-LE models-large)
  build_and_test "${KILN_BUILD_DIR:-build}" release -DCMAKE_BUILD_TYPE=Release -- "${release_filter[@]}"
fi

if [ "$do_asan" = 1 ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  build_and_test "${KILN_ASAN_BUILD_DIR:-build-asan}" asan \
    -DCMAKE_BUILD_TYPE="${KILN_ASAN_BUILD_TYPE:-Debug}" -DKILN_SANITIZE=ON -- -LE "$ASAN_EXCLUDE"
fi

echo
echo "tests: $total_pass passed, $total_fail failed"
exit "$status"
