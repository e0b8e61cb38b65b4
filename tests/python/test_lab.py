"""The PE lab (docs/lab.md): its model agrees with the same model in plain
torch for every encoding (one batch's loss and gradients, fresh random
bytes, relative error 1e-4 on the loss, 1e-3 on the gradients), and
`python -m pejit.lab --quick` runs the whole pipeline: every encoding
trains (its loss falls), every evaluation length gives a finite perplexity,
the table, plot and JSON are written and read back, and the reference
encoding's pejit and plain-torch runs agree on their first steps to 1e-4.
`pejit diagnose` reads a checkpoint it wrote. No test asserts which
encoding extrapolates best: that is the measurement. Skipped when the
test venv has no torch, or no corpus (Debian's bible-kjv)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

try:
    import torch
except Exception as e:  # not installed, or an install cut short (scripts/python.sh)
    pytest.skip(f"torch does not import in the test venv: {e}", allow_module_level=True)

import pejit.torch  # noqa: E402,F401
from pejit.lab.encodings import ENCODINGS, parse  # noqa: E402
from pejit.lab.model import LanguageModel, ModelConfig, loss_of  # noqa: E402

needs_corpus = pytest.mark.skipif(shutil.which("bible") is None,
                                  reason="no corpus: Debian's bible-kjv (scripts/setup.sh "
                                  "installs it) is not installed")
TRAINED = [e.name for e in ENCODINGS.values() if e.trains]


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item()


@pytest.mark.parametrize("name", TRAINED)
def test_pejit_and_plain_torch_models_agree(name):
    config = ModelConfig(encoding=name, layers=2, d_model=64, heads=2, context=48,
                         max_eval=96)
    seed = int(np.random.default_rng().integers(1 << 31))
    print(f"seed {seed}")
    torch.manual_seed(seed)
    model = LanguageModel(config)
    tokens = torch.randint(0, 256, (3, config.context + 1))
    losses, grads = {}, {}
    for backend in ("torch", "pejit"):
        model.set_backend(backend)
        model.zero_grad(set_to_none=True)
        loss = loss_of(model, tokens)
        loss.backward()
        losses[backend] = loss.detach()
        grads[backend] = {n: p.grad.clone() for n, p in model.named_parameters()
                          if p.grad is not None}
    assert _relative(losses["pejit"], losses["torch"]) < 1e-4, (name, losses)
    assert grads["pejit"].keys() == grads["torch"].keys()
    for parameter, reference in grads["torch"].items():
        error = _relative(grads["pejit"][parameter], reference)
        assert error < 1e-3, f"{name}: d {parameter}: relative error {error:.2e}"


def test_encoding_names_are_checked():
    with pytest.raises(ValueError, match="unknown encoding 'ropee'"):
        parse("rope,ropee")
    # An evaluation-time scaling brings the model it is applied to.
    assert [e.name for e in parse("rope_yarn")] == ["rope", "rope_yarn"]


def _lab(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "pejit", *args], capture_output=True,
                          text=True, **kwargs)


def test_bad_options_are_errors_naming_them(tmp_path):
    result = _lab("lab", "--context", "33", "--out", str(tmp_path))
    assert result.returncode == 1 and "--context: expected an even length" in result.stderr
    result = _lab("lab", "--eval-windows", "0", "--out", str(tmp_path))
    assert result.returncode == 1 and "--eval-windows: expected a positive count" in result.stderr
    result = _lab("lab", "--encodings", "alibi", "--out", str(tmp_path))
    assert result.returncode == 1 and "--reference: 'rope'" in result.stderr
    bogus = tmp_path / "bogus.pt"
    bogus.write_bytes(b"not a checkpoint")
    result = _lab("diagnose", str(bogus))
    assert result.returncode == 1 and "not a lab checkpoint" in result.stderr


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    if shutil.which("bible") is None:
        pytest.skip("no corpus: Debian's bible-kjv is not installed")
    out = tmp_path_factory.mktemp("lab")
    result = _lab("lab", "--quick", "--out", str(out), timeout=1200)
    assert result.returncode == 0, result.stderr[-4000:]
    return out, result


@needs_corpus
def test_quick_lab_trains_evaluates_and_writes_its_outputs(quick_run):
    out, result = quick_run
    results = json.loads((out / "results.json").read_text())
    expected = [e.name for e in parse("quick")]
    assert sorted(results["encodings"]) == sorted(expected)
    for name, entry in results["encodings"].items():
        if ENCODINGS[name].trains:
            losses = entry["train"]["losses"]
            assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.1, (name, losses)
            assert entry["train"]["tokens_per_s"] > 0 and entry["torch"]["train"]["tokens_per_s"] > 0
            assert os.path.exists(entry["checkpoint"])
        for multiple in results["multiples"]:
            for mode in ("nonoverlapping", "sliding"):
                ppl = entry["evaluations"][str(multiple)][mode]
                assert np.isfinite(ppl) and 1.0 <= ppl <= 256.0 * 4, (name, multiple, mode, ppl)
    table = (out / "table.md").read_text()
    for name in expected:
        assert f"| {ENCODINGS[name].label} |" in table
    assert table in result.stdout
    import matplotlib.image
    image = matplotlib.image.imread(out / "perplexity.png")
    assert image.shape[0] > 200 and image.shape[1] > 200
    # --render writes the table and plot again from results.json alone.
    (out / "table.md").unlink()
    (out / "perplexity.png").unlink()
    rendered = _lab("lab", "--render", str(out / "results.json"))
    assert rendered.returncode == 0, rendered.stderr
    assert (out / "table.md").read_text() == table and (out / "perplexity.png").exists()
    reference = json.loads((out / "results.json").read_text())["encodings"]["rope"]
    a, b = reference["train"]["losses"], reference["torch"]["train"]["losses"]
    assert len(a) == len(b)
    first = max(abs(x - y) / y for x, y in zip(a[:3], b[:3]))
    assert first < 1e-4, (a[:3], b[:3])


@needs_corpus
def test_diagnose_reads_a_lab_checkpoint(quick_run):
    out, _ = quick_run
    result = _lab("diagnose", str(out / "checkpoints" / "rope.pt"), "--steps", "40")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "perplexity by position" in text
    assert "float32   max angle error" in text and "bfloat16  max angle error" in text
    assert "float32   cache:" in text and "bfloat16  cache:" in text
    result = _lab("diagnose", str(out / "checkpoints" / "alibi.pt"), "--steps", "10")
    assert result.returncode == 0 and "not measured" in result.stdout
