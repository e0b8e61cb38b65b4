#!/usr/bin/env bash
# Sets up (installs, configures, builds) and runs every pejit test: the lit
# suite (FileCheck, verify-diagnostics, the install + find_package test),
# the clang-format check, every GoogleTest binary and the Python package's
# pytest suite (tests/python, in the venv scripts/python.sh makes). Prints
# one summary line "tests: N passed, N failed, N skipped" and exits non-zero
# on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh || { echo "tests: 0 passed, 1 failed (build failed)"; exit 1; }
BUILD_DIR=${PEJIT_BUILD_DIR:-build}
# The suite's kernels go to a disk cache of its own, never the user's.
PEJIT_CACHE_DIR=$(mktemp -d)
export PEJIT_CACHE_DIR
trap 'rm -rf "$PEJIT_CACHE_DIR"' EXIT
passed=0; failed=0; skipped=0

# lit: count from its summary ("Passed: N", "Failed: N", "Unsupported: N").
lit_log=$(mktemp)
/usr/lib/llvm-22/bin/lit -v "$BUILD_DIR/tests/lit" 2>&1 | tee "$lit_log" | grep -E "^(FAIL|XPASS|UNRESOLVED)|^  (Passed|Failed|Unsupported|Unresolved)"
count() { grep -E "^  $1: " "$lit_log" | awk '{print $2}' | head -1; }
lp=$(count Passed); lf=$(count Failed); lu=$(count Unresolved); ls_=$(count Unsupported)
passed=$((passed + ${lp:-0})); failed=$((failed + ${lf:-0} + ${lu:-0})); skipped=$((skipped + ${ls_:-0}))
[ -z "$lp" ] && [ -z "$lf" ] && { echo "lit did not run"; failed=$((failed + 1)); }
rm -f "$lit_log"

# Formatting: every C++ file as clang-format 22 writes it (.clang-format).
if bash scripts/format.sh --check; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# Docs: docs/status.md is the one status table, and each test it names
# exists (scripts/check_docs.py).
if python3 scripts/check_docs.py; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# GoogleTest binaries: every executable named *-tests under the build dir.
# Each runs as PEJIT_TEST_SHARDS (default 2, one per core of the CI
# machine) GoogleTest shards at once: its float64 references are
# single-threaded, so the shards share the cores. PEJIT_TEST_TIMEOUT bounds
# each shard (seconds). Each binary's wall time is printed.
shards=${PEJIT_TEST_SHARDS:-2}
limit=${PEJIT_TEST_TIMEOUT:-1200}
sum() { awk '{s += $1} END {print s + 0}'; }
run_binary() { # BINARY [LABEL]: its shards, counted into the totals
  local binary=$1 label=${2:-$(basename "$1")}
  logs=(); pids=(); started=$SECONDS
  for ((i = 0; i < shards; i++)); do
    logs+=("$(mktemp)")
    # Each shard its own disk cache: tests count their compiles.
    local cache="$PEJIT_CACHE_DIR/${label//[^a-zA-Z0-9]/_}.shard$i"
    mkdir -p "$cache"
    # A hung binary fails the run instead of blocking it.
    PEJIT_CACHE_DIR="$cache" GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
      timeout "$limit" "$binary" --gtest_brief=1 >"${logs[$i]}" 2>&1 &
    pids+=($!)
  done
  rc=0
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  cat "${logs[@]}" | grep -E "^\[  (FAILED|SKIPPED) |Failure|error|^fuzz: " | head -40
  p=$(cat "${logs[@]}" | grep -E "^\[  PASSED  \] [0-9]+ test" | awk '{print $4}' | sum)
  # --gtest_brief prints one "[  FAILED  ] Suite.Test (N ms)" line per
  # failed test and no "N tests failed" total.
  f=$(cat "${logs[@]}" | grep -cE "^\[  FAILED  \] [A-Za-z0-9_/]+\.[^ ]+ \(")
  s=$(cat "${logs[@]}" | grep -E "^\[  SKIPPED \] [0-9]+ test" | awk '{print $4}' | sum)
  echo "$label: $p passed, $f failed, $s skipped ($((SECONDS - started)) s)"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "$label exited $rc"; tail -n 5 "${logs[@]}"; failed=$((failed + 1))
  fi
  rm -f "${logs[@]}"
}
while IFS= read -r binary; do
  run_binary "$binary"
done < <(find "$BUILD_DIR" -type f -name '*-tests' -perm -u+x | sort)
# The runtime's numerics once more in the avx2 family where the host's best
# is wider (docs/isa.md): every family the host has is tested.
# PEJIT_SKIP_ISA_RERUNS=1 (the sanitizer lane: the family changes the JIT
# code, which ASan does not see, not the host code it checks) skips both.
isa_reruns=$([ "${PEJIT_SKIP_ISA_RERUNS:-0}" = 1 ] && echo 0 || echo 1)
if [ "$isa_reruns" = 1 ] && grep -qw avx512f /proc/cpuinfo; then
  PEJIT_X86_ISA=avx2 run_binary "$BUILD_DIR/tests/runtime/pejit-runtime-tests" \
    "pejit-runtime-tests (PEJIT_X86_ISA=avx2)"
fi
# avx512_bf16 differs from avx512 in 16-bit kernels only (bf16 products):
# their suites once more in it, whichever family the host prefers.
if [ "$isa_reruns" = 1 ] && grep -qw avx512_bf16 /proc/cpuinfo; then
  PEJIT_X86_ISA=avx512_bf16 GTEST_FILTER='*Half*:*Bf16*:*bf16*:*Sixteen*:X86Isa.*' \
    run_binary "$BUILD_DIR/tests/runtime/pejit-runtime-tests" \
    "pejit-runtime-tests 16-bit suites (PEJIT_X86_ISA=avx512_bf16)"
fi

# Python: the pejit package installed into its venv (scripts/python.sh),
# then pytest on tests/python. PEJIT_SKIP_PYTHON=1 (the sanitizer lane: an
# ASan extension would need the ASan runtime preloaded into python) skips it.
if [ "${PEJIT_SKIP_PYTHON:-0}" != 1 ]; then
  py_log=$(mktemp)
  if python=$(scripts/python.sh 2>"$py_log" | tail -1) && [ -x "$python" ]; then
    "$python" -m pytest -q -rfEs -p no:cacheprovider tests/python >"$py_log" 2>&1
    grep -E "^(FAILED|ERROR|SKIPPED)" "$py_log" | head -40
    # The summary line: "3 passed, 1 skipped in 4.2s" (-q drops the ='s).
    tally() { grep -E "[0-9]+ (passed|failed|skipped|errors?).* in [0-9.]+s" "$py_log" | tail -1 |
                grep -oE "[0-9]+ $1" | awk '{print $1}' | sum; }
    p=$(tally passed); f=$(tally failed); e=$(tally error); s=$(tally skipped)
    echo "pytest: $p passed, $((f + e)) failed, $s skipped"
    passed=$((passed + p)); failed=$((failed + f + e)); skipped=$((skipped + s))
    if [ "$p" -eq 0 ] && [ "$((f + e))" -eq 0 ]; then
      echo "pytest did not run"; tail -20 "$py_log"; failed=$((failed + 1))
    fi
  else
    echo "python: the package did not build or install"; tail -20 "$py_log"; failed=$((failed + 1))
  fi
  rm -f "$py_log"
fi

echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
