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
