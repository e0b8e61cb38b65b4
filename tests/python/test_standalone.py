"""pejit.rope and pejit.embed against float64 NumPy references: fresh random
inputs, outputs poisoned with NaN; f32 tolerance 1e-5 relative (max-norm),
16-bit 1e-2."""
import numpy as np
import pytest

import pejit
import reference as ref


def rel(got, want):
    got = np.asarray(got, dtype=np.float64)
    return np.max(np.abs(got - want)) / np.max(np.abs(want))


def rotated(x, positions, theta=10000.0):
    """x [b, h, s, d] rotated (half layout) at ids [s] or [b, s], in float64."""
    return ref.rope(x.astype(np.float64), positions, x.shape[3], theta=theta)


@pytest.mark.parametrize("s", [1, 7, 65, 300])
def test_rope_shared_and_per_row_ids(rng, s):
    x = rng.standard_normal((2, 4, s, 64)).astype(np.float32)
    ids = rng.integers(0, 5000, s)
    out = np.full_like(x, np.nan)
    assert pejit.rope(x, ids, True, out=out) is out
    assert rel(out, rotated(x, ids)) < 1e-5
    per_row = rng.integers(0, 5000, (2, s)).astype(np.int32)
    assert rel(pejit.rope(x, per_row, {"rope_theta": 500000.0}), rotated(x, per_row, 500000.0)) < 1e-5


def test_rope_in_place_and_into_a_cache(rng):
    x = rng.standard_normal((1, 4, 9, 64)).astype(np.float32)
    ids = np.arange(100, 109)
    want = rotated(x, ids)
    y = x.copy()
    pejit.rope(y, ids, True, out=y)  # in place
    assert rel(y, want) < 1e-5
    # KV-append: rows [20, 29) of a cache, the rest untouched.
    cache = np.full((1, 4, 64, 64), 7.0, np.float32)
    pejit.rope(x, ids, True, out=cache[:, :, 20:29])
    assert rel(cache[:, :, 20:29], want) < 1e-5
    assert np.all(cache[:, :, :20] == 7.0) and np.all(cache[:, :, 29:] == 7.0)


def test_rope_errors_name_the_argument(rng):
    x = rng.standard_normal((1, 4, 9, 64)).astype(np.float32)
    with pytest.raises(pejit.Error, match="rope: give the RoPE"):
        pejit.rope(x, np.arange(9), None)
    with pytest.raises(pejit.Error, match="positions: expected ids of rank 1"):
        pejit.rope(x, np.zeros((1, 1, 9), np.int64))
    with pytest.raises(pejit.Error, match="x: expected rank 4"):
        pejit.rope(x[0], np.arange(9))
    # An output one row past the input in the same buffer: it would
    # overwrite rows the kernel still reads (in place needs the same view).
    buffer = rng.standard_normal((1, 4, 10, 64)).astype(np.float32)
    with pytest.raises(pejit.Error, match="overlaps"):
        pejit.rope(buffer[:, :, :9], np.arange(9), out=buffer[:, :, 1:])


def test_embed_with_learned_and_sinusoidal_positions(rng):
    tokens = rng.integers(0, 100, (2, 13))
    table = rng.standard_normal((100, 64)).astype(np.float32)
    positions_table = rng.standard_normal((32, 64)).astype(np.float32)
    plain = pejit.embed(tokens, table, scale=2.0)
    assert rel(plain, 2.0 * table[tokens].astype(np.float64)) < 1e-6
    bert = pejit.embed(tokens, table, position_table=positions_table)
    want = table[tokens].astype(np.float64) + positions_table[np.arange(13)]
    assert rel(bert, want) < 1e-6
    ids = np.arange(5, 18)
    sin = pejit.embed(tokens, table, positions=ids, sinusoidal_base=10000.0)
    freq = 10000.0 ** (-np.arange(0, 64, 2) / 64.0)
    pe = np.zeros((13, 64))
    pe[:, 0::2] = np.sin(ids[:, None] * freq)
    pe[:, 1::2] = np.cos(ids[:, None] * freq)
    assert rel(sin, table[tokens].astype(np.float64) + pe) < 1e-5


def test_embed_errors_name_the_argument(rng):
    table = rng.standard_normal((100, 64)).astype(np.float32)
    with pytest.raises(pejit.Error, match="token"):
        pejit.embed(np.array([[1, 100]]), table)
    with pytest.raises(pejit.Error, match="positions: only a positional encoding"):
        pejit.embed(np.array([[1, 2]]), table, positions=np.arange(2))
    with pytest.raises(pejit.Error, match="give one positional encoding"):
        pejit.embed(np.array([[1, 2]]), table, position_table=table[:8],
                    sinusoidal_base=10000.0)
    with pytest.raises(pejit.Error, match="position"):
        pejit.embed(np.array([[1, 2]]), table, positions=np.array([0, 40]),
                    position_table=table[:8])
