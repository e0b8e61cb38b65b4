#!/usr/bin/env bash
# Sets up pejit (installs, configures, builds) and runs the main demo: a
# LLaMA-style prefill (RoPE theta 500000 fused into causal GQA 32/8
# attention, d = 128, 2048 tokens) JIT-compiled for this CPU, with its time,
# GFLOP/s and a float64 check; then the fused IR of the same layer written in
# MLIR (examples/llama_rope_gqa.mlir).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
BUILD_DIR=${PEJIT_BUILD_DIR:-build}
"$BUILD_DIR/examples/llama_prefill" "${1:-2048}"
echo
echo "== pejit compile examples/llama_rope_gqa.mlir --emit=fused =="
"$BUILD_DIR/tools/pejit/pejit" compile examples/llama_rope_gqa.mlir --emit=fused
