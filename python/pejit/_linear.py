"""pejit.linear_attention and pejit.linear_attention_backward
(docs/linear-attention.md; docs/backward.md, "Linear attention"): one
cached kernel per kind of call, the lengths (and, with ids shared by the
batch, the batch) `?`."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import _pejit
from ._attention import _shape
from ._backward import _contiguous_rows, _raw_any
from ._checks import boolean
from ._kernel import Kernel, runtime
from ._pejit import Error
from ._rope import as_rope
from ._tensors import dtype_name, empty_like_kind, is_torch

FEATURE_MAPS = ("elu_plus_one", "relu", "identity", "softmax_keys")
PLACEMENTS = ("rope_before_feature_map", "rope_on_numerator")

_kernels: dict = {}


def _call(q, k, v, feature_map, causal, rope, rope_placement, q_positions, k_positions,
          backward: bool):
    """The cached kernel (the forward, or the backward the compiler derives
    from it) and the position ids to pass (none without a RoPE)."""
    if feature_map not in FEATURE_MAPS:
        raise Error(f"feature_map: expected one of {', '.join(FEATURE_MAPS)}, got "
                    f"{feature_map!r}")
    boolean(causal, "causal")
    config = as_rope(rope)
    if config is None and rope_placement is not None:
        raise Error("rope_placement: give rope= too (the placement says where it rotates)")
    if config is not None:
        if rope_placement is None:
            rope_placement = "rope_before_feature_map"
        if rope_placement not in PLACEMENTS:
            raise Error(f"rope_placement: expected one of {', '.join(PLACEMENTS)}, got "
                        f"{rope_placement!r}")
        if feature_map == "softmax_keys" and rope_placement == "rope_on_numerator":
            raise Error("rope_placement: softmax_keys has no denominator, so only "
                        "rope_before_feature_map applies")
    elif q_positions is not None or k_positions is not None:
        raise Error("q_positions, k_positions: only a RoPE reads position ids; give rope=")
    qs, ks, vs = _shape(q, 4, "q"), _shape(k, 4, "k"), _shape(v, 4, "v")
    dtype = dtype_name(q, "q")
    if dtype not in ("float32", "float16", "bfloat16"):
        raise Error(f"q: expected float32, float16 or bfloat16, got {dtype}")
    for x, what in ((k, "k"), (v, "v")):
        if dtype_name(x, what) != dtype:
            raise Error(f"{what}: expected {dtype} (as q), got {dtype_name(x, what)}")
    axes = config.position_axes() if config is not None else 0
    per_batch = False
    ids = []
    if config is not None:
        b, sq, skv = qs[0], qs[2], ks[2]
        given = [p for p in (q_positions, k_positions) if p is not None]
        per_batch = bool(given) and np.ndim(given[0]) == (axes + 2 if axes else 2)
        for seq, start, p in ((sq, skv - sq, q_positions), (skv, 0, k_positions)):
            if p is None:  # the defaults: keys 0 .. skv-1, queries skv-sq .. skv-1
                p = np.arange(start, start + seq, dtype=np.int64)
                if per_batch:
                    p = np.broadcast_to(p, (b, seq))
                if axes:
                    p = np.broadcast_to(p, (axes,) + p.shape)
                p = np.ascontiguousarray(p)
                if is_torch(q):
                    import torch
                    p = torch.from_numpy(p)
            ids.append(_contiguous_rows(p))
    key = ("linear_backward" if backward else "linear", dtype, qs[0] if per_batch else None,
           qs[1], ks[1], qs[3], vs[3], feature_map, bool(causal), config, rope_placement,
           per_batch)
    kernel = _kernels.get(key)
    if kernel is None:
        shape = [qs[0] if per_batch else None, qs[1], ks[1], None, None, qs[3], vs[3]]
        source = _pejit.linear_attention_source(
            feature_map, bool(causal), None if config is None else config.native(qs[3]),
            rope_placement or "", shape, dtype, per_batch)
        name = "<pejit.linear_attention>"
        native = (runtime().get_backward(source, name) if backward else
                  runtime().get(source, name, "host"))
        kernel = Kernel(native, source)
        _kernels[key] = kernel
    return kernel, ids


def linear_attention(q, k, v, *, feature_map: str = "elu_plus_one", causal: bool = False,
                     rope=None, rope_placement: Optional[str] = None, q_positions=None,
                     k_positions=None, out=None):
    """Linear attention (docs/linear-attention.md): q [b, hq, sq, d], k [b,
    hkv, skv, d], v [b, hkv, skv, dv] (NumPy arrays or torch CPU tensors,
    float32, float16 or bfloat16, computed in f32), out [b, hq, sq, dv].

    feature_map: "elu_plus_one", "relu" (normalized by the denominator),
    "identity" (none), or "softmax_keys" (the seed's: K softmaxed over the
    visible keys per channel, q as it is). causal: row i sees keys
    j <= i + skv - sq. rope: a RopeConfig, a dict or True, rotating q and k
    at q_positions, k_positions (defaults as pejit.attention's) where
    rope_placement says: "rope_before_feature_map" (the default, the seed's)
    or "rope_on_numerator" (RoFormer's). No scale: fold one into q."""
    kernel, ids = _call(q, k, v, feature_map, causal, rope, rope_placement, q_positions,
                        k_positions, backward=False)
    q, k, v = (_contiguous_rows(x) for x in (q, k, v))
    if out is None:
        b, hq, sq, _ = (int(n) for n in q.shape)
        out = empty_like_kind(q, (b, hq, sq, int(v.shape[3])), dtype_name(q, "q"))
    return kernel.run(q, k, v, *ids, out=out)


def linear_attention_backward(q, k, v, o, do, *, feature_map: str = "elu_plus_one",
                              causal: bool = False, rope=None,
                              rope_placement: Optional[str] = None, q_positions=None,
                              k_positions=None) -> Tuple:
    """dq, dk, dv of o = pejit.linear_attention(q, k, v, ...) for the
    output's gradient `do` (the same options; o is its output, of q's
    dtype). New arrays of the kind, shapes and dtypes of q, k, v; through the
    kernel the compiler derives from the forward (docs/backward.md, "Linear
    attention"): one item per (batch, KV head), the same bits at any thread
    count."""
    kernel, ids = _call(q, k, v, feature_map, causal, rope, rope_placement, q_positions,
                        k_positions, backward=True)
    dtype = dtype_name(q, "q")
    b, hq, sq, _ = (int(n) for n in q.shape)
    for x, what in ((o, "o"), (do, "do")):
        if dtype_name(x, what) != dtype or tuple(int(n) for n in x.shape) != \
                (b, hq, sq, int(v.shape[3])):
            raise Error(f"{what}: expected {dtype} [b, hq, sq, dv] = "
                        f"{[b, hq, sq, int(v.shape[3])]}, got {dtype_name(x, what)} "
                        f"{list(x.shape)}")
    if any(is_torch(x) != is_torch(q) for x in (k, v, o, do)):
        raise Error("q, k, v, o, do: mix NumPy arrays and torch tensors")
    q, k, v, o, do = (_contiguous_rows(x) for x in (q, k, v, o, do))
    if is_torch(q):
        import torch
        grads = tuple(torch.empty(tuple(x.shape), dtype=x.dtype) for x in (q, k, v))
    else:
        grads = tuple(np.empty(x.shape, dtype=x.dtype) for x in (q, k, v))
    kernel._native.run_backward_raw([_raw_any(x, "input") for x in [q, k, v, o, do] + ids],
                                    [_raw_any(g, "gradient") for g in grads])
    return grads
