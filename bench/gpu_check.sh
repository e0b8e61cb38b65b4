#!/usr/bin/env bash
# The GPU check of pejit's nvidia kernels, in two halves.
#
#   bench/gpu_check.sh prepare   (here: compiler, no GPU) builds the light
#       runner and compiles every case of bench/gpu/GpuCheckCases.h,
#       GpuSourceCases.h and GpuBackwardCases.h for sm_90 into a kernel
#       bundle (cubin + PTX + meta; a source or backward case adds fresh
#       random inputs and its float64 reference or gradients) under
#       build/gpu_check/ (about 35 MiB; carry that folder to the GPU
#       machine).
#   bench/gpu_check.sh run       (GPU machine: CUDA driver, no LLVM) checks
#       every bundled kernel against the float64 reference (bf16/f16
#       tolerance 1e-2 relative; T5, Shaw a^K + a^V, bias tensors, M-RoPE,
#       axial RoPE, relative_to = position among them; the backward
#       cases' dq, dk, dv at 2e-2 of each one's max), times fused RoPE +
#       causal attention (bf16, b=4, h=32, d=128, s=1024/4096/8192), then
#       times the PyTorch peer (RoPE + SDPA, and flash-attn if importable)
#       in the same run. Under 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=build/gpu_check

case "${1:-}" in
  prepare)
    scripts/setup.sh >/dev/null || { echo "gpu_check: the build failed"; exit 1; }
    cmake --build build -j2 --target prepare_gpu_check gpu_check_runner || exit 1
    rm -rf "$OUT" && mkdir -p "$OUT/bundle"
    build/bench/prepare_gpu_check "$OUT/bundle" sm_90 || exit 1
    cp build/bench/gpu_check_runner "$OUT/"
    du -sh "$OUT"
    ;;
  run)
    runner="$OUT/gpu_check_runner"
    # The prebuilt runner needs glibc >= 2.35; else build it here from the
    # light sources (no LLVM): the CUDA driver wrapper and the reference.
    "$runner" >/dev/null 2>&1
    if [ $? -ne 2 ]; then # no usage message: the binary cannot start here
      echo "gpu_check: building the runner on this machine"
      mkdir -p /tmp/pejit-runner
      c++ -O2 -std=c++17 -I. bench/gpu/gpu_check_runner.cpp pejit/runtime/cuda/*.cpp pejit/core/*.cpp \
          pejit/reference/*.cpp -ldl -lpthread -o /tmp/pejit-runner/gpu_check_runner || exit 1
      runner=/tmp/pejit-runner/gpu_check_runner
    fi
    timeout 420 "$runner" "$OUT/bundle" 20; rc=$?
    echo
    timeout 120 python3 bench/gpu/torch_peer.py
    exit $rc
    ;;
  *)
    echo "usage: bench/gpu_check.sh prepare|run"; exit 2 ;;
esac
