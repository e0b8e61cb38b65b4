"""Bad input raises pejit.Error (a ValueError) naming what is wrong."""
import numpy as np
import pytest

import pejit


def arrays(b=1, hq=4, hkv=2, s=8, d=64, dtype=np.float32):
    return (np.zeros((b, hq, s, d), dtype), np.zeros((b, hkv, s, d), dtype),
            np.zeros((b, hkv, s, d), dtype))


def test_wrong_dtype():
    q, k, v = arrays(dtype=np.float64)
    with pytest.raises(pejit.Error, match="q: dtype float64"):
        pejit.attention(q, k, v)


def test_mixed_dtypes():
    q, k, v = arrays()
    with pytest.raises(pejit.Error, match="k: dtype float16 differs"):
        pejit.attention(q, k.astype(np.float16), v)


def test_wrong_rank():
    q, k, v = arrays()
    with pytest.raises(pejit.Error, match=r"q: expected rank 4"):
        pejit.attention(q[0], k, v)


def test_non_contiguous_last_dim():
    q, k, v = arrays(d=128)
    with pytest.raises(pejit.Error, match="query"):
        pejit.attention(q[..., ::2], k[..., ::2], v)


def test_mismatched_heads():
    q, k, v = arrays(hq=3, hkv=2)
    with pytest.raises(pejit.Error, match=r"hq \(3\) is not a multiple of hkv \(2\)"):
        pejit.attention(q, k, v)


def test_unknown_rope_field():
    q, k, v = arrays()
    with pytest.raises(pejit.Error, match="rope: unknown field 'rope_thetta'"):
        pejit.attention(q, k, v, rope={"rope_thetta": 10000.0})


def test_out_of_wrong_shape():
    q, k, v = arrays()
    with pytest.raises(pejit.Error, match="out"):
        pejit.attention(q, k, v, out=np.zeros((1, 4, 8, 32), np.float32))


def test_bad_mlir():
    with pytest.raises(pejit.Error):
        pejit.compile("func.func @f(%x: tensor<4xf32>) {")


def test_missing_file():
    with pytest.raises(pejit.Error, match="nope.mlir"):
        pejit.compile("nope.mlir")


def test_error_is_a_value_error():
    assert issubclass(pejit.Error, ValueError)


def test_options_of_the_wrong_type():
    q, k, v = arrays()
    with pytest.raises(pejit.Error, match="rope: expected RopeConfig, a dict or True, got int"):
        pejit.attention(q, k, v, rope=3)
    with pytest.raises(pejit.Error, match="alibi: unknown field 'slope'"):
        pejit.attention(q, k, v, alibi={"slope": 1.0})
    with pytest.raises(pejit.Error, match="alibi: expected AlibiConfig"):
        pejit.attention(q, k, v, alibi="yes")


# Silent modes that are errors now (issue 36): each names its argument.

def test_window_rejects_bools_and_accepts_numpy_integers():
    q, k, v = arrays()
    with pytest.raises(pejit.Error, match="window: w must be an integer"):
        pejit.attention(q, k, v, causal=True, window=True)
    with pytest.raises(pejit.Error, match="window: right"):
        pejit.attention(q, k, v, window=(3, 2.5))
    with pytest.raises(pejit.Error, match="window: expected w or"):
        pejit.attention(q, k, v, window=(1, 2, 3))
    with pytest.raises(pejit.Error, match="window: w = -2 is negative"):
        pejit.attention(q, k, v, window=-2)
    # A NumPy integer is an integer: the same output as a Python int.
    q, k, v = (np.random.default_rng().standard_normal(x.shape).astype(np.float32)
               for x in (q, k, v))
    np.testing.assert_array_equal(pejit.attention(q, k, v, causal=True, window=np.int64(3)),
                                  pejit.attention(q, k, v, causal=True, window=3))


def test_rope_scaling_without_factor_is_an_error():
    q, k, v = arrays()
    with pytest.raises(pejit.Error, match="scaling 'linear' needs its factor"):
        pejit.attention(q, k, v, rope={"rope_type": "linear"})
    with pytest.raises(pejit.Error, match="factor = 4.0 without a scaling"):
        pejit.RopeConfig(factor=4.0)
    with pytest.raises(pejit.Error, match="rope: theta must be a number"):
        pejit.RopeConfig(theta="10000")
    with pytest.raises(pejit.Error, match="rope: interleaved must be True or False"):
        pejit.RopeConfig(interleaved=1)
    with pytest.raises(pejit.Error, match="rope: expected RopeConfig, a dict or True"):
        pejit.attention(q, k, v, rope="yes")


def test_rope_layout_names_of_the_dialect():
    half = pejit.RopeConfig.from_dict({"layout": "half"})
    assert not half.interleaved
    assert pejit.RopeConfig.from_dict({"layout": "interleaved"}).interleaved
    with pytest.raises(pejit.Error, match="layout 'pairs' is not 'half' or 'interleaved'"):
        pejit.RopeConfig.from_dict({"layout": "pairs"})


def test_shaw_source_without_tables_is_an_error():
    shape = (1, 4, 8, 64)
    with pytest.raises(pejit.Error, match="shaw: give shaw_key_table"):
        pejit.attention_source(shape, shape, shape, shaw=pejit.ShawConfig(4))


def test_read_only_out_and_state_are_errors():
    q, k, v = arrays()
    out = np.zeros((1, 4, 8, 64), np.float32)
    out.flags.writeable = False
    with pytest.raises(pejit.Error, match="out: the array is read-only"):
        pejit.attention(q, k, v, out=out)
    source = """func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                             %v: tensor<1x2x8x16xf32>, %s: tensor<1x2x16x18xf32>)
        -> tensor<1x2x8x16xf32> {
      %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal state(%s :
          tensor<1x2x16x18xf32>) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>,
          tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
      return %o : tensor<1x2x8x16xf32>
    }"""
    kernel = pejit.compile(source)
    x = np.random.default_rng().standard_normal((1, 2, 8, 16)).astype(np.float32)
    state = np.zeros((1, 2, 16, 18), np.float32)
    state.flags.writeable = False
    with pytest.raises(pejit.Error, match="linear_state.*read-only"):
        kernel.run(x, x, x, state)
    assert not state.any()  # untouched
    # A broadcast (stride-0) state would be written through aliased rows.
    row = np.zeros((1, 1, 16, 18), np.float32)
    with pytest.raises(pejit.Error, match="stride 0"):
        kernel.run(x, x, x, _stride0(row))


def _stride0(row):
    """A writable [1, 2, 16, 18] view whose two heads are one row of memory."""
    return np.lib.stride_tricks.as_strided(row, (1, 2, 16, 18),
                                           (row.strides[0], 0) + row.strides[2:])


def test_out_overlapping_an_input_is_an_error():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 4, 600, 64)).astype(np.float32) for _ in range(3))
    for target, name in ((k, "key"), (v, "value"), (q, "query")):
        with pytest.raises(pejit.Error, match=f"output overlaps input .* \\({name}\\)"):
            pejit.attention(q, k, v, out=target)
    packed = np.zeros((1, 4, 601, 64), np.float32)
    packed[:, :, :600] = q
    with pytest.raises(pejit.Error, match="output overlaps"):
        pejit.attention(packed[:, :, :600], k, v, out=packed[:, :, 1:])


def test_hf_config_counts_layers_and_windows():
    base = {"model_type": "llama", "num_attention_heads": 8, "hidden_size": 512,
            "num_hidden_layers": 4, "rope_theta": 10000.0}
    with pytest.raises(pejit.Error, match="num_attention_heads' = 0 must be a positive"):
        pejit.from_hf_config({**base, "num_attention_heads": 0})
    with pytest.raises(pejit.Error, match="layer: 4 is outside the model's 4 layers"):
        pejit.from_hf_config(base, layer=4)
    with pytest.raises(pejit.Error, match="layer: expected a layer index >= 0, got -1"):
        pejit.from_hf_config(base, layer=-1)
    with pytest.raises(pejit.Error, match="sliding_window = 0 must be a positive"):
        pejit.from_hf_config({**base, "model_type": "mistral", "sliding_window": 0})
    with pytest.raises(pejit.Error, match="stack: 'decoder' applies to T5"):
        pejit.from_hf_config(base, stack="decoder")
    assert pejit.from_hf_config(base, layer=3).num_heads == 8


def test_hf_longrope_factor_lists_of_the_wrong_length():
    phi3 = {"model_type": "phi3", "num_attention_heads": 4, "hidden_size": 256,
            "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 31,
                             "long_factor": [2.0] * 32}}
    with pytest.raises(pejit.Error, match="short_factor has 31 entries.*32"):
        pejit.from_hf_config(phi3)


def _bad_calls():
    """Calls with one wrong argument each: every one a pejit.Error."""
    q, k, v = arrays()
    llama = {"model_type": "llama", "num_attention_heads": 8, "hidden_size": 512}
    return {
        "alibi num_heads": lambda: pejit.attention(q, k, v, alibi={"num_heads": "x"}),
        "alibi head_offset": lambda: pejit.attention(q, k, v, alibi={"head_offset": -1}),
        "t5 num_buckets": lambda: pejit.T5Config(num_buckets="a"),
        "shaw clip": lambda: pejit.ShawConfig("a"),
        "scale": lambda: pejit.attention(q, k, v, scale="x"),
        "scale nan": lambda: pejit.attention(q, k, v, scale=float("nan")),
        "softcap": lambda: pejit.attention(q, k, v, softcap=-1.0),
        "causal": lambda: pejit.attention(q, k, v, causal="yes"),
        "q": lambda: pejit.attention([[1.0]], k, v),
        "target": lambda: pejit.attention(q, k, v, target=3),
        "compile source": lambda: pejit.compile(3),
        "hf config": lambda: pejit.from_hf_config(None),
        "hf rope_scaling": lambda: pejit.from_hf_config({**llama, "rope_scaling": [1]}),
        "hf rope_theta": lambda: pejit.from_hf_config({**llama, "rope_theta": "x"}),
        "hf factor": lambda: pejit.from_hf_config(
            {**llama, "rope_scaling": {"rope_type": "linear", "factor": "x"}}),
        "hf softcap": lambda: pejit.from_hf_config(
            {**llama, "model_type": "gemma2", "attn_logit_softcapping": "x"}),
        "hf attn_config": lambda: pejit.from_hf_config(
            {"model_type": "mpt", "n_heads": 8, "d_model": 512, "attn_config": [1]}),
        "rope x": lambda: pejit.rope([1.0], np.arange(3)),
        "rope_backward grad": lambda: pejit.rope_backward([1.0], np.arange(3)),
        "embedding_backward rows": lambda: pejit.embedding_backward(
            np.zeros((1, 2, 8), np.float32), np.zeros(2, np.int64), 0),
        "embedding_backward id": lambda: pejit.embedding_backward(
            np.zeros((1, 2, 8), np.float32), np.array([0, 9]), 4),
        "add_positions both": lambda: pejit.add_positions(
            np.zeros((1, 2, 8), np.float32), np.arange(2),
            position_table=np.zeros((4, 8), np.float32), sinusoidal_base=10000.0),
        "embed scale": lambda: pejit.embed(np.zeros((1, 2), np.int64),
                                           np.zeros((4, 8), np.float32), scale=float("nan")),
    }


@pytest.mark.parametrize("name", list(_bad_calls()))
def test_bad_arguments_raise_pejit_error(name):
    with pytest.raises(pejit.Error):
        _bad_calls()[name]()
