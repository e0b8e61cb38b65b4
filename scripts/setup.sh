#!/usr/bin/env bash
# Idempotent setup: installs the Debian packages pejit builds with (when
# missing), configures with CMake + Ninja, and builds. Safe to run again.
# Usage: scripts/setup.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# bible-kjv: the PE lab's corpus, the public-domain King James text (docs/lab.md).
PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22
          clang-format-22 libfmt-dev libgtest-dev ccache ninja-build cmake python3 python3-venv python3-dev
          bible-kjv)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${PEJIT_BUILD_DIR:-build}
JOBS=${PEJIT_JOBS:-2}
# ccache hits across clones in other folders (CI's fresh clone of main):
# paths under the clone are hashed relative to it.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
# The installed tree the Python package links against (python/CMakeLists.txt).
cmake --install "$BUILD_DIR" --prefix "$BUILD_DIR/prefix" >/dev/null
