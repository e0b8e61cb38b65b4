#!/usr/bin/env bash
# Sets up pejit (installs, configures, builds) and runs the main demo: a
# LLaMA-style prefill (RoPE theta 500000 fused into causal GQA 32/8
# attention, d = 128, 2048 tokens) JIT-compiled for this CPU, with its time,
# GFLOP/s, the CPU's measured FMA peak and a float64 check; then the fused
# IR of that layer's attention written in MLIR at 512 tokens
# (examples/llama_rope_gqa.mlir), and where to go next.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${PEJIT_BUILD_DIR:-build}
if [ ! -x "$BUILD_DIR/examples/llama_prefill" ]; then
  echo "demo: setting up pejit (Debian packages, then a build: about 5 minutes on 2 cores" \
       "the first time; the build's progress follows)" >&2
fi
scripts/setup.sh >&2
"$BUILD_DIR/examples/llama_prefill" "${1:-2048}"
# The GFLOP/s above against what this CPU can do: its measured fp32 FMA
# peak on all cores, with its widest vectors and with AVX2 (the ISA of
# pejit's x86 template today).
peak() { "$BUILD_DIR/bench/pejit-peak-fma" "$(nproc)" --json "$@" 2>/dev/null |
         sed -n 's/.*"isa": "\([a-z0-9]*\)".*"gflops_nthreads": \([0-9.]*\).*/\2 GFLOP\/s (\1)/p'; }
echo "  this CPU's fp32 FMA peak on $(nproc) threads: $(peak), $(peak --isa=avx2)"
echo
echo "== pejit compile examples/llama_rope_gqa.mlir --emit=fused (the same attention at 512 tokens) =="
"$BUILD_DIR/tools/pejit/pejit" compile examples/llama_rope_gqa.mlir --emit=fused
echo
echo "next: '$BUILD_DIR/tools/pejit/pejit compile examples/llama_rope_gqa.mlir --emit=all' shows every"
echo "stage; '$BUILD_DIR/tools/pejit/pejit bench' times pejit against the measured FMA peak of this"
echo "CPU; scripts/python.sh installs the Python package (docs/python.md)."
