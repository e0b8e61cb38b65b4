#!/usr/bin/env bash
# clang-format (22, LLVM style: .clang-format) over pejit's C++ sources.
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   list files that differ; exit 1 if any
set -uo pipefail
cd "$(dirname "$0")/.."
FORMAT=${CLANG_FORMAT:-clang-format-22}
command -v "$FORMAT" >/dev/null || { echo "format: $FORMAT not found (apt install clang-format-22)"; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' | grep -v '^tests/lit/')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1; then
      echo "format: $f differs from clang-format (scripts/format.sh fixes it)"; bad=1
    fi
  done
  [ $bad -eq 0 ] && echo "format: ${#files[@]} files clean"
  exit $bad
fi
"$FORMAT" -i "${files[@]}"
