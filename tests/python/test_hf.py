"""pejit.from_hf_config on the shipped configs (tests/data/hf_configs: the
attention fields of each model's published config.json), checked against
an independent reading of the same fields; each spec compiles; errors name
the field."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import pejit
import reference as ref

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "data", "hf_configs")


def load(name):
    with open(os.path.join(CONFIGS, name)) as f:
        return json.load(f)


def test_every_shipped_config_maps_and_compiles():
    names = sorted(n for n in os.listdir(CONFIGS) if n.endswith(".json"))
    assert len(names) >= 13
    for name in names:
        cfg = pejit.from_hf_config(os.path.join(CONFIGS, name))
        kernel = pejit.compile(cfg.source())
        assert "attn.attention" in kernel.ir("source"), name


def test_llama31():
    raw = load("llama-3.1-8b.json")
    cfg = pejit.from_hf_config(raw)
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (
        raw["num_attention_heads"], raw["num_key_value_heads"],
        raw["hidden_size"] // raw["num_attention_heads"])
    s = raw["rope_scaling"]
    assert cfg.rope.scaling == "llama3" and cfg.rope.theta == raw["rope_theta"]
    assert (cfg.rope.factor, cfg.rope.low_freq_factor, cfg.rope.high_freq_factor,
            cfg.rope.original_max_position) == (
        s["factor"], s["low_freq_factor"], s["high_freq_factor"],
        s["original_max_position_embeddings"])
    assert cfg.causal and cfg.window is None


def test_llama31_numerics(rng):
    # The imported RoPE through pejit.attention against the float64 reference.
    cfg = pejit.from_hf_config(load("llama-3.1-8b.json"))
    q = rng.standard_normal((1, 4, 24, 128)).astype(np.float32)
    k = rng.standard_normal((1, 1, 40, 128)).astype(np.float32)
    v = rng.standard_normal((1, 1, 40, 128)).astype(np.float32)
    qp = rng.integers(0, 60000, size=24)
    kp = rng.integers(0, 60000, size=40)
    out = pejit.attention(q, k, v, q_positions=qp, k_positions=kp, **cfg.attention_kwargs())
    freq = dict(theta=500000.0, scaling="llama3", factor=8.0, original_max_position=8192)
    expected = ref.attention(ref.rope(q.astype(np.float64), qp, 128, **freq),
                             ref.rope(k.astype(np.float64), kp, 128, **freq),
                             v.astype(np.float64), causal=True)
    assert ref.rel_error(out, expected) < 1e-4


def test_mistral_window():
    raw = load("mistral-7b-v0.1.json")
    assert pejit.from_hf_config(raw).window == raw["sliding_window"] - 1


def test_qwen25_yarn_and_qwen2vl_mrope():
    raw = load("qwen2.5-7b-instruct-yarn.json")
    cfg = pejit.from_hf_config(raw)
    assert cfg.rope.scaling == "yarn" and cfg.rope.factor == raw["rope_scaling"]["factor"]
    assert cfg.rope.original_max_position == raw["rope_scaling"][
        "original_max_position_embeddings"]
    assert cfg.window is None  # use_sliding_window is false
    vl = load("qwen2-vl-7b-instruct.json")
    cfg = pejit.from_hf_config(vl)
    assert cfg.rope.sections == tuple(vl["rope_scaling"]["mrope_section"])
    assert cfg.rope.scaling == "none"


def test_phi35_longrope_derived_factor():
    raw = load("phi-3.5-mini-instruct.json")
    cfg = pejit.from_hf_config(raw)
    assert cfg.rope.scaling == "longrope"
    # No factor in rope_scaling: HF derives max / original positions.
    assert cfg.rope.factor == raw["max_position_embeddings"] / raw[
        "original_max_position_embeddings"]
    assert cfg.rope.long_factor == tuple(raw["rope_scaling"]["long_factor"])
    assert len(cfg.rope.short_factor) == cfg.head_dim // 2


def test_gemma2_alternating_window_softcap_scale():
    raw = load("gemma-2-9b.json")
    even, odd = pejit.from_hf_config(raw, layer=0), pejit.from_hf_config(raw, layer=1)
    assert even.window == raw["sliding_window"] - 1 and odd.window is None
    assert even.softcap == raw["attn_logit_softcapping"]
    assert even.head_dim == raw["head_dim"] == 256
    assert math.isclose(even.scale, raw["query_pre_attn_scalar"] ** -0.5)


def test_neox_gptj_partial_rotary():
    neox = load("gpt-neox-20b.json")
    cfg = pejit.from_hf_config(neox)
    d = neox["hidden_size"] // neox["num_attention_heads"]
    assert cfg.rope.rotary_dim == int(d * neox["rotary_pct"]) and not cfg.rope.interleaved
    gptj = pejit.from_hf_config(load("gpt-j-6b.json"))
    assert gptj.rope.rotary_dim == 64 and gptj.rope.interleaved


def test_alibi_t5_bert_deepseek():
    bloom = pejit.from_hf_config(load("bloom-560m.json"))
    assert bloom.alibi.num_heads == 16 and bloom.rope is None
    mpt = pejit.from_hf_config(load("mpt-7b.json"))
    assert mpt.alibi.num_heads == 32
    t5 = pejit.from_hf_config(load("t5-small.json"))
    assert (t5.t5.num_buckets, t5.t5.max_distance, t5.t5.bidirectional) == (32, 128, True)
    assert t5.scale == 1.0 and not t5.causal
    assert not pejit.from_hf_config(load("t5-small.json"), stack="decoder").t5.bidirectional
    bert = pejit.from_hf_config(load("bert-base-uncased.json"))
    assert bert.learned_positions == 512 and bert.rope is None and not bert.causal
    raw = load("deepseek-v2-lite.json")
    ds = pejit.from_hf_config(raw)
    assert (ds.head_dim, ds.value_dim) == (192, 128) and ds.rope.rotary_dim == 64
    mscale = 0.1 * 0.707 * math.log(40) + 1.0
    assert math.isclose(ds.scale, 192 ** -0.5 * mscale ** 2)


@pytest.mark.parametrize("change, message", [
    ({"rope_scaling": {"rope_type": "wobbly", "factor": 2.0}}, "rope_type 'wobbly'"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "short_mscale": 1.2}},
     "rope_scaling.short_mscale"),
    ({"rope_scaling": {"rope_type": "linear"}}, "rope_scaling.factor is missing"),
    ({"model_type": "rwkv"}, "model_type 'rwkv'"),
    ({"num_attention_heads": None}, "field 'num_attention_heads' is missing"),
])
def test_errors_name_the_field(change, message):
    raw = {**load("llama-3.1-8b.json"), **change}
    with pytest.raises(pejit.Error, match=message):
        pejit.from_hf_config(raw)


def test_mpt_slopes_it_cannot_honour():
    raw = load("mpt-7b.json")
    raw["attn_config"] = {**raw["attn_config"], "alibi_bias_max": 16}
    with pytest.raises(pejit.Error, match="alibi_bias_max"):
        pejit.from_hf_config(raw)


def test_import_hf_command(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "pejit", "import-hf", *a],  # noqa
                                    capture_output=True, text=True)
    done = run(os.path.join(CONFIGS, "llama-3.1-8b.json"), "--dtype", "bfloat16")
    assert done.returncode == 0
    assert "#pe.llama3<factor = 8.0" in done.stdout and "xbf16>" in done.stdout
    path = tmp_path / "kernel.mlir"
    path.write_text(done.stdout)
    assert pejit.compile(path).arguments[0]["dtype"] == "bfloat16"
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "rwkv"}))
    failed = run(str(bad))
    assert failed.returncode == 1 and "model_type 'rwkv'" in failed.stderr


def test_pejit_cli_runs_the_python_commands(tmp_path):
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    binary = os.path.join(root, os.environ.get("PEJIT_BUILD_DIR", "build"), "tools", "pejit",
                          "pejit")
    env = {**os.environ, "PEJIT_PYTHON": sys.executable}
    done = subprocess.run([binary, "import-hf", os.path.join(CONFIGS, "gpt-j-6b.json")],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "layout = interleaved" in done.stdout and "rotary_dim = 64" in done.stdout
    missing = subprocess.run([binary, "diagnose", "x.json"], capture_output=True, text=True,
                             env={**env, "PEJIT_PYTHON": str(tmp_path / "no-python")})
    assert missing.returncode == 1 and "cannot run" in missing.stderr
