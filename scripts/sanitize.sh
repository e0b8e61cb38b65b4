#!/usr/bin/env bash
# The sanitizer lane: an ASan + UBSan build of pejit in its own build
# directory (build-sanitize, or $PEJIT_SANITIZE_BUILD_DIR), then the whole
# test suite on it (scripts/test.sh), fuzz test included. Any sanitizer
# report fails the run (UBSan halts on its first error).
#
# Debian's LLVM/MLIR are not instrumented, so: -fno-sanitize=function (the
# JIT calls kernels through pointers UBSan cannot type) and
# allow_user_poisoning=0 (LLVM's allocators poison memory for their own
# checks). libclang-rt-22-dev has the sanitizer runtimes.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg-query -W -f='${Status}' libclang-rt-22-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "sanitize: installing libclang-rt-22-dev"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libclang-rt-22-dev
fi

BUILD_DIR=${PEJIT_SANITIZE_BUILD_DIR:-build-sanitize}
# ccache hits across clones (as scripts/setup.sh); -g1 would otherwise hash
# the build's folder too.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
FLAGS="-fsanitize=address,undefined -fno-sanitize=function -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g1"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_CXX_FLAGS="$FLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS="-fuse-ld=lld -fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fuse-ld=lld -fsanitize=address,undefined" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp}
# Instrumented code runs the suite's float64 references several times
# slower: two shards of each binary at once, and a longer bound per shard.
export PEJIT_TEST_SHARDS=${PEJIT_TEST_SHARDS:-2}
# The numerics matrices (tests/runtime, sampledCase()) run a random third
# of their cases here, the seed printed: the plain lane runs them all, and
# every runtime check they reach, their other cases reach too.
export PEJIT_TEST_SAMPLE=${PEJIT_TEST_SAMPLE:-0.34}
export PEJIT_SKIP_ISA_RERUNS=${PEJIT_SKIP_ISA_RERUNS:-1}
export PEJIT_TEST_TIMEOUT=${PEJIT_TEST_TIMEOUT:-2700}
# The Python lane runs in the plain lane only: an ASan-built extension
# would need the ASan runtime preloaded into the interpreter.
export PEJIT_SKIP_PYTHON=1
PEJIT_BUILD_DIR="$BUILD_DIR" exec bash scripts/test.sh
