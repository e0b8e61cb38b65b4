#!/usr/bin/env bash
# Sets up the Python side: a virtualenv outside the clone (reused across
# clones and runs; PEJIT_VENV, default ~/.cache/pejit/venv) with numpy,
# pytest, ml_dtypes, matplotlib (diagnose --plot) and the build tools from
# PyPI, then `pip install ./python` (the pejit package, linked against
# build/prefix, which scripts/setup.sh installs). Prints the venv's python on the last line.
# Usage: scripts/python.sh   (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${PEJIT_VENV:-$HOME/.cache/pejit/venv}
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q)
"$venv/bin/python" -c "import numpy, pytest, ml_dtypes, matplotlib, nanobind, scikit_build_core" \
  2>/dev/null ||
  "${pip[@]}" numpy pytest ml_dtypes matplotlib "nanobind>=2.0" "scikit-build-core>=0.10" >&2
# torch (about 3 GB from PyPI, CUDA wheels included) only when asked for,
# and within PEJIT_TORCH_INSTALL_TIMEOUT seconds (default 900): without it
# tests/python/test_torch.py skips, saying so.
if [ "${PEJIT_TEST_TORCH:-0}" = 1 ] && ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  timeout "${PEJIT_TORCH_INSTALL_TIMEOUT:-900}" "${pip[@]}" --no-cache-dir "torch>=2.4,<3" >&2 ||
    echo "python.sh: torch did not install; the torch tests will skip" >&2
fi
# No build isolation: the venv's nanobind and scikit-build-core build it,
# with no download per install.
PEJIT_PREFIX="$PWD/${PEJIT_BUILD_DIR:-build}/prefix" "${pip[@]}" --no-build-isolation ./python >&2
echo "$venv/bin/python"
