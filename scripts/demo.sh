#!/usr/bin/env bash
# Sets up pejit (installs, configures, builds) and runs the main demo: the
# LLaMA-style RoPE + GQA example parsed, verified and printed back by
# pejit-opt (later stages add fusion and the JIT-compiled kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
BUILD_DIR=${PEJIT_BUILD_DIR:-build}
echo "== examples/llama_rope_gqa.mlir through pejit-opt --pejit-simplify =="
"$BUILD_DIR/tools/pejit-opt/pejit-opt" --pejit-simplify examples/llama_rope_gqa.mlir
