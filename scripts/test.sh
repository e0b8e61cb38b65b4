#!/usr/bin/env bash
# Sets up (installs, configures, builds) and runs every pejit test: the lit
# suite (FileCheck, verify-diagnostics, the install + find_package test),
# the clang-format check and every GoogleTest binary. Prints
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

# GoogleTest binaries: every executable named *-tests under the build dir.
while IFS= read -r binary; do
  log=$(mktemp)
  # A hung binary fails the run instead of blocking it.
  timeout 1200 "$binary" --gtest_brief=1 >"$log" 2>&1; rc=$?
  grep -E "^\[  (FAILED|SKIPPED) |Failure|error|^fuzz: " "$log" | head -40
  p=$(grep -E "^\[  PASSED  \] [0-9]+ test" "$log" | awk '{print $4}')
  f=$(grep -E "^\[  FAILED  \] [0-9]+ test" "$log" | awk '{print $4}')
  s=$(grep -E "^\[  SKIPPED \] [0-9]+ test" "$log" | awk '{print $4}')
  echo "$(basename "$binary"): ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
  if [ $rc -ne 0 ] && [ -z "$f" ]; then echo "$(basename "$binary") exited $rc"; tail -5 "$log"; failed=$((failed + 1)); fi
  rm -f "$log"
done < <(find "$BUILD_DIR" -type f -name '*-tests' -perm -u+x | sort)

echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
