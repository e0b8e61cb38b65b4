#!/usr/bin/env bash
# Creates bench/.venv with torch 2.x + numpy (bench/compare_torch*.py) and
# onnxruntime + onnx (bench/compare_decode.py).
# Benchmark-only: the build and the tests never need it. Idempotent: a venv
# whose torch already imports and runs SDPA is left as it is.
#
# Only the default PyPI index is reachable, and on Linux x86-64 PyPI's torch
# wheel pulls ~2.5 GB of nvidia-*/triton CUDA wheels (venv ~3.2 GB in all);
# PyPI has no official CPU-only torch under another name. A lean
# `torch --no-deps` does not import on these machines (libcufile.so.0 missing),
# so we take the full install: the CUDA parts are never used, the benchmark
# runs on the CPU.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"
torch_spec='torch>=2,<3'

smoke_test() {
  "$venv/bin/python" - <<'EOF'
import torch, numpy, onnx, onnxruntime
q = torch.randn(1, 2, 8, 16)
torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
print(f"torch {torch.__version__} (cuda build: {torch.version.cuda}), numpy {numpy.__version__}, "
      f"onnxruntime {onnxruntime.__version__}, onnx {onnx.__version__}: ok")
EOF
}

if [[ ! -x "$venv/bin/python" ]]; then
  echo "creating $venv"
  "$python" -m venv "$venv"
fi
if smoke_test 2>/dev/null; then
  echo "$venv is ready"
  exit 0
fi

# onnxruntime + onnx: the ONNX Runtime peer of bench/compare_decode.py.
"$venv/bin/python" -m pip install --disable-pip-version-check "$torch_spec" numpy onnxruntime onnx
smoke_test
echo "$venv is ready"
