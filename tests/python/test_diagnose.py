"""pejit diagnose: the report on three configs, its numbers checked
against an independent computation, and the CLI."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import pejit
from pejit.diagnose import angle_errors, diagnose, round_to

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "data", "hf_configs")


def config(name):
    return os.path.join(CONFIGS, name)


def test_llama31_report():
    text = diagnose(config("llama-3.1-8b.json"))
    assert "32 query, 8 key/value (GQA 4:1)" in text
    assert "rotate_half" in text and "rotary dims: 128 of 128" in text
    assert "llama3 (factor 8.0" in text
    # llama3 scales the low frequencies by 8: the longest wavelength grows 8x.
    inv = 500000.0 ** (-np.arange(0, 128, 2) / 128)
    assert f"{2 * math.pi / inv.min():.4g}" in text or f"{2 * math.pi / inv.min():.3e}" in text
    assert "wavelengths x1 to x8" in text
    assert "at positions up to 131071" in text
    assert "angles computed in bfloat16" in text and "wrong rotations" in text


def test_qwen_yarn_and_phi3_reports():
    qwen = diagnose(config("qwen2.5-7b-instruct-yarn.json"), max_position=131071)
    assert "yarn (factor 4.0, original_max_position 32768" in qwen
    assert "attention factor on cos and sin: 1.139" in qwen  # 0.1 ln 4 + 1
    phi = diagnose(config("phi-3.5-mini-instruct.json"), dtype="float16")
    assert "longrope (factor 32.0, original_max_position 4096" in phi
    assert "Rotation in float16" in phi


def test_no_rope_models():
    assert "ALiBi" in diagnose(config("bloom-560m.json"))
    assert "learned absolute positions (512 rows)" in diagnose(config("bert-base-uncased.json"))


def test_angle_error_is_the_f32_product_error():
    inv = np.array([1.0, 1e-3])
    err = angle_errors(inv, 1_000_000, "float32")
    exact = 1_000_000 * inv
    approx = np.float32(np.float32(1_000_000) * np.float32(inv)).astype(np.float64)
    assert np.allclose(err, np.abs(approx - exact))
    assert round_to(np.array([1.0 + 2 ** -9]), "bfloat16")[0] == 1.0  # ties to even


def test_diagnose_command(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pejit", "diagnose", config("gemma-2-9b.json"),
                          "--max-position", "8191", "--dtype", "bfloat16"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "left window 4095" in run.stdout and "softcap: 50.0" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "pejit", "diagnose", str(tmp_path / "none.json")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "cannot read" in bad.stderr


def test_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed in the test venv")
    path = tmp_path / "phi.png"
    text = diagnose(config("phi-3.5-mini-instruct.json"), plot_path=str(path))
    assert f"plot: {path}" in text
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10000
    with pytest.raises(pejit.Error, match="no RoPE"):
        diagnose(config("bloom-560m.json"), plot_path=str(tmp_path / "bloom.png"))
