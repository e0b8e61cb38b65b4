"""pejit.attention: fused attention with its positional encoding, on NumPy
arrays and torch CPU tensors, through one cached kernel per shape class."""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple, Union

import numpy as np

from . import _pejit
from ._kernel import Kernel, runtime
from ._checks import boolean, integer, optional_number, text
from ._pejit import Error
from ._rope import RopeConfig, as_config, as_rope
from ._tensors import buffer, dtype_name, empty_like_kind, is_torch


@dataclass(frozen=True)
class AlibiConfig:
    """ALiBi over num_heads heads in all (0: this call's query heads), of
    which this attention has [head_offset, head_offset + hq). symmetric:
    -slope * |i - j| (FlashAttention's) instead of the causal form."""
    num_heads: int = 0
    head_offset: int = 0
    symmetric: bool = False

    def __post_init__(self):
        integer(self.num_heads, "alibi: num_heads", minimum=0)
        integer(self.head_offset, "alibi: head_offset", minimum=0)
        boolean(self.symmetric, "alibi: symmetric")


@dataclass(frozen=True)
class T5Config:
    """T5's bucketed relative bias. Its table [num_buckets, hq] (the model's
    weight, float32) is given at run time: pejit.attention's t5_table."""
    num_buckets: int = 32
    max_distance: int = 128
    bidirectional: bool = True

    def __post_init__(self):
        integer(self.num_buckets, "t5: num_buckets", minimum=1)
        integer(self.max_distance, "t5: max_distance", minimum=1)
        boolean(self.bidirectional, "t5: bidirectional")


@dataclass(frozen=True)
class ShawConfig:
    """Shaw's relative key and value terms, distances clipped to
    [-clip, clip]. The tables are given at run time: pejit.attention's
    shaw_key [2 clip + 1, d] and shaw_value [2 clip + 1, dv] (or per query
    head: [hq, 2 clip + 1, ...]); either may be left out."""
    clip: int

    def __post_init__(self):
        integer(self.clip, "shaw: clip", minimum=0)


def _alibi_from_dict(values: Mapping[str, Any]) -> AlibiConfig:
    unknown = set(values) - {"num_heads", "head_offset", "symmetric"}
    if unknown:
        raise Error(f"alibi: unknown field '{sorted(unknown)[0]}'")
    return AlibiConfig(**values)


def _as_alibi(alibi) -> Optional[AlibiConfig]:
    return as_config(alibi, AlibiConfig, "alibi", _alibi_from_dict)


def _window(window) -> Tuple[Optional[int], Optional[int]]:
    """window: w (left only) or (left, right), None or -1 for unbounded.
    Each side an integer >= 0 (NumPy integers too); a bool or anything else
    is an Error (True would read as 1)."""
    if window is None:
        return None, None
    def side(v, what):
        if v is None:
            return None
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise Error(f"window: {what} must be an integer >= 0, or None / -1 for unbounded, "
                        f"got {v!r}")
        if v < -1:
            raise Error(f"window: {what} = {int(v)} is negative (-1 means unbounded)")
        return None if v == -1 else int(v)
    if isinstance(window, (tuple, list)):
        if len(window) != 2:
            raise Error(f"window: expected w or (left, right), got {len(window)} values")
        return side(window[0], "left"), side(window[1], "right")
    return side(window, "w"), None


def _shape(x, rank: int, what: str) -> Tuple[int, ...]:
    shape = tuple(x.shape)
    if len(shape) != rank:
        raise Error(f"{what}: expected rank {rank} [b, h, s, d], got shape {list(shape)}")
    return shape


_kernels: dict = {}


def _kernel(key, build) -> Kernel:
    kernel = _kernels.get(key)
    if kernel is None:
        source = build()
        kernel = Kernel(runtime().get(source, "<pejit.attention>", key[0]), source)
        _kernels[key] = kernel
    return kernel


def attention_source(q_shape, k_shape, v_shape, dtype: str = "float32", *, rope=None,
                     alibi=None, t5: Optional[T5Config] = None,
                     shaw: Optional[ShawConfig] = None, shaw_key_table=None,
                     shaw_value_table=None, causal: bool = False, window=None, softcap=None, scale=None,
                     positions_per_batch: bool = False, bias=None, packed: bool = False,
                     key_lengths: bool = False, page_size: Optional[int] = None,
                     rope_scale: Optional[int] = None, alibi_slopes: bool = False,
                     rope_inv_freq: bool = False, training: bool = False) -> str:
    """The MLIR pejit.attention compiles for these shapes (lengths as `?`).
    shaw_key_table, shaw_value_table: (rank, dtype) of the Shaw tables.
    bias: (shape [b|1, hq|1, sq, skv], dtype) of a bias or mask tensor the
    kernel reads; the lengths are then sq and skv, not `?`. packed: the
    call takes cu_seqlens_q and cu_seqlens_k; key_lengths: per-row key
    counts; page_size: K and V are a paged cache (k_shape is then the
    pages' [num_pages, page_size, hkv, d]). rope_scale: n of RoPE's runtime
    position scale [n] (1, or b per batch row), an argument after the
    encodings' tensors. alibi_slopes: ALiBi's slopes are an input (f32 [hq],
    after the bias), learned_slopes. rope_inv_freq: RoPE's inverse
    frequencies are an input (f32 [rotary_dim / 2], after the scale),
    learned_inv_freq. training: a training forward, which also returns each
    row's lse [b, hq, sq] (docs/backward.md)."""
    b, hq, _, d = q_shape
    hkv = k_shape[2] if page_size else k_shape[1]
    dv = v_shape[3]
    if shaw is not None and shaw_key_table is None and shaw_value_table is None:
        raise Error("shaw: give shaw_key_table, shaw_value_table or both ((rank, dtype) of "
                    "the tables the kernel reads); without them there is no Shaw term")
    if shaw is None and (shaw_key_table is not None or shaw_value_table is not None):
        raise Error("shaw_key_table, shaw_value_table: give shaw= (its clip) too")
    spec = _pejit.AttentionSpec()
    spec.dtype = dtype
    rope = as_rope(rope)
    if rope is not None:
        spec.rope = rope.native(d)
        spec.rope_position_scale = rope_scale
        spec.rope_learned_inv_freq = bool(rope_inv_freq)
    elif rope_scale is not None or rope_inv_freq:
        raise Error("rope_scale: give rope= too (the scale multiplies RoPE's positions)")
    alibi = _as_alibi(alibi)
    if alibi_slopes and alibi is None:
        raise Error("alibi_slopes: give alibi= too (its form and heads)")
    if alibi is not None and not alibi_slopes:
        spec.set_alibi(alibi.num_heads or hq, alibi.head_offset, alibi.symmetric)
    encodings = []
    if t5 is not None:
        encodings.append(_pejit.t5_encoding(t5.num_buckets, t5.max_distance, t5.bidirectional,
                                            hq, "float32"))
    if shaw is not None and shaw_key_table is not None:
        rank, table_dtype = shaw_key_table
        encodings.append(_pejit.shaw_key_encoding(shaw.clip, d, table_dtype,
                                                  hq if rank == 3 else 0))
    if shaw is not None and shaw_value_table is not None:
        rank, table_dtype = shaw_value_table
        encodings.append(_pejit.shaw_value_encoding(shaw.clip, dv, table_dtype,
                                                    hq if rank == 3 else 0))
    lengths = [None, None]
    if bias is not None:
        bias_shape, bias_dtype = bias
        encodings.append(_pejit.bias_encoding([int(n) for n in bias_shape], bias_dtype))
        lengths = [int(bias_shape[2]), int(bias_shape[3])]
    if alibi is not None and alibi_slopes:
        encodings.append(_pejit.alibi_learned_encoding(alibi.num_heads or hq, alibi.head_offset,
                                                        alibi.symmetric, hq))
    spec.encodings = encodings
    spec.causal = bool(causal)
    spec.window, spec.window_right = _window(window)
    spec.softcap = None if softcap is None else float(softcap)
    spec.scale = None if scale is None else float(scale)
    spec.positions_per_batch = positions_per_batch
    spec.packed = bool(packed)
    spec.key_lengths = bool(key_lengths)
    spec.page_size = page_size
    spec.training = bool(training)
    return _pejit.attention_source(spec, [b, hq, hkv, lengths[0], lengths[1], d, dv])


def attention(q, k, v, *, rope: Union[RopeConfig, Mapping[str, Any], bool, None] = None,
              alibi=None, t5: Optional[T5Config] = None, t5_table=None,
              shaw: Optional[ShawConfig] = None, shaw_key=None, shaw_value=None,
              causal: bool = False,
              window=None, softcap: Optional[float] = None, scale: Optional[float] = None,
              q_positions=None, k_positions=None, bias=None, cu_seqlens_q=None,
              cu_seqlens_k=None, key_lengths=None, block_table=None, out=None,
              target: str = "host", rope_scale=None, alibi_slopes=None, rope_inv_freq=None,
              return_lse: bool = False):
    """Attention with its positional encoding fused into the kernel.

    q [b, hq, sq, d], k [b, hkv, skv, d], v [b, hkv, skv, dv]: NumPy arrays
    or torch CPU tensors of one dtype (float32, float16, bfloat16), read in
    place (strided views too; the last dim must be contiguous).
    rope: RopeConfig, a dict (the dialect's names or HF's) or True.
    alibi: AlibiConfig, a dict or True. t5: T5Config, with its float32
    table t5_table [num_buckets, hq]. shaw: ShawConfig, with its tables
    shaw_key [2 clip + 1, d] and/or shaw_value [2 clip + 1, dv] ([hq, ...]
    per head). causal: bottom-right aligned.
    window: w or (left, right). softcap, scale: floats (scale default
    1/sqrt(d)). q_positions, k_positions: ids [s] or [b, s] (int32/int64;
    M-RoPE's [A, s]); defaults: keys 0..skv-1, queries skv-sq..skv-1.
    bias: an additive float mask [sq, skv] or [b|1, hq|1, sq, skv] (-inf
    hides a key; a bool mask is read as True = attend, False = -inf, like
    SDPA's attn_mask), added after scale and softcap; the kernel reads it
    tile by tile (one kernel per sq, skv with a bias).
    cu_seqlens_q, cu_seqlens_k: int32 [n + 1] offsets of a packed batch of
    n sequences (q [1, hq, total_q, d], k and v [1, hkv, total_k, d]):
    every mask and default position applies per sequence (FlashAttention's
    varlen). key_lengths: int32 [b], row n attends to its first
    key_lengths[n] keys (a KV cache with room to grow). block_table: int32
    [b, max_pages], with k and v a paged cache [num_pages, page_size, hkv,
    d] (vLLM's layout): row n's keys p * page_size ... are in page
    block_table[n, p]; usually with key_lengths (docs/shape-classes.md).
    rope_scale: float32 [1] or [b], RoPE's position scale s (angle =
    position * s * inv_freq), read at run time: a new s compiles nothing.
    alibi_slopes: float32 [hq], ALiBi's slopes as an input (with alibi=,
    which gives the form): head h's at h, read at run time, so trainable.
    rope_inv_freq: float32 [rotary_dim / 2], RoPE's inverse frequencies as
    an input (with rope=; its scaling's attention factor still applies).
    out: [b, hq, sq, dv] of q's dtype, written in place; else allocated.
    return_lse: also return each row's log-sum-exp (float32 [b, hq, sq],
    -inf for a row that sees no key), the training forward's, which
    pejit.attention_backward(..., lse=) reads instead of recomputing.
    Returns the output (and lse). Raises pejit.Error with pejit's message.
    """
    if bias is not None:
        bias = _as_bias(bias)
    # The fast path: a call like an earlier one (same kinds, dtypes, heads,
    # head dims and options) reuses its plan, with no validation or kernel
    # lookup in Python (the C++ run still checks every input).
    try:
        key = (target, type(q), q.dtype, q.shape[0], q.shape[1], q.shape[3], k.shape[1],
               v.shape[3], _freeze(rope), _freeze(alibi), t5, causal, _freeze(window), softcap,
               scale, None if q_positions is None else len(q_positions.shape),
               None if k_positions is None else len(k_positions.shape),
               None if t5_table is None else t5_table.shape[0], shaw,
               None if shaw_key is None else (len(shaw_key.shape), shaw_key.dtype),
               None if shaw_value is None else (len(shaw_value.shape), shaw_value.dtype),
               None if bias is None else (tuple(bias.shape), bias.dtype),
               cu_seqlens_q is not None, cu_seqlens_k is not None, key_lengths is not None,
               None if block_table is None else k.shape[1],
               None if rope_scale is None else tuple(rope_scale.shape),
               None if alibi_slopes is None else tuple(alibi_slopes.shape),
               None if rope_inv_freq is None else tuple(rope_inv_freq.shape), bool(return_lse))
        plan = _plans.get(key)
    except (AttributeError, IndexError, TypeError):
        key, plan = None, None
    if (plan is None or type(k) is not type(q) or type(v) is not type(q)
            or k.dtype != q.dtype or v.dtype != q.dtype
            or len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4):
        plan = _plan(q, k, v, rope, alibi, t5, t5_table, shaw, shaw_key, shaw_value, causal,
                     window, softcap, scale, q_positions, k_positions, target, bias,
                     cu_seqlens_q, cu_seqlens_k, key_lengths, block_table, rope_scale,
                     alibi_slopes, rope_inv_freq, bool(return_lse))
        if key is not None and plan.cacheable:
            _plans[key] = plan
    # The kernel's inputs after Q, K and V, in its argument order (the
    # builder's source): the block table, the encodings' tensors (ALiBi's
    # slopes last), RoPE's position scale, the segments, the key lengths.
    extra = [x for x in (block_table, t5_table, shaw_key, shaw_value, bias, alibi_slopes,
                         rope_scale, rope_inv_freq, cu_seqlens_q, cu_seqlens_k, key_lengths)
             if x is not None]
    return plan.run(q, k, v, extra, q_positions, k_positions, out, bool(return_lse))


class _Plan:
    """How calls of one kind run: the kernel, and what their buffers need."""

    def __init__(self, kernel: Kernel, dtype: str, torch: bool, axes: int, per_batch: bool,
                 cacheable: bool, default_query_ids: bool = True):
        self.native, self.dtype, self.torch = kernel._native, dtype, torch
        self.axes, self.per_batch, self.cacheable = axes, per_batch, cacheable
        self.default_query_ids = default_query_ids

    def run(self, q, k, v, extra, q_positions, k_positions, out, lse=False):
        b, hq, sq, _ = q.shape
        if out is None:
            out = empty_like_kind(q, (b, hq, sq, v.shape[3]), self.dtype)
        inputs = [q, k, v] + extra  # block table, tables, segments, lengths
        if k_positions is not None and q_positions is None:
            if not self.default_query_ids:
                raise Error("q_positions: give them with k_positions in a packed or paged call "
                            "(their defaults follow each sequence's lengths)")
            q_positions = self._default_query_positions(b, sq, k.shape[2])
        if q_positions is not None:
            inputs.append(q_positions)
        if k_positions is not None:
            inputs.append(k_positions)
        if lse:  # the training forward: o and each row's lse
            from ._backward import _raw_any
            rows = empty_like_kind(q, (b, hq, sq), "float32")
            self.native.run_training_raw([_raw_any(x, "input") for x in inputs],
                                         _raw_any(out, "out"), _raw_any(rows, "lse"))
            return out, rows
        if self.torch and is_torch(out) and all(is_torch(x) for x in inputs):
            # Pointers, shapes and strides straight from the tensors (their
            # DLPack export costs microseconds each). A resolved copy (_raw)
            # lives until the run returns.
            keep = []
            raws = [_raw(x, "input", keep) for x in inputs]
            self.native.run_raw(raws, _raw(out, "out"))
            return out
        # NumPy arrays (bf16 ones as uint16 views), or NumPy ids beside
        # torch tensors: every buffer through DLPack.
        views = [buffer(x, "input") for x in inputs]
        out_view, out_bf16 = buffer(out, "out", written=True)
        self.native.run([view for view, _ in views], out_view,
                        [bf16 for _, bf16 in views] + [out_bf16])
        return out

    def _default_query_positions(self, b, sq, skv):
        """The default query ids, so that explicit key ids can follow."""
        ids = np.arange(skv - sq, skv, dtype=np.int64)
        if self.per_batch:
            ids = np.broadcast_to(ids, (b, sq))
        if self.axes:
            ids = np.broadcast_to(ids, (self.axes,) + ids.shape)
        return np.ascontiguousarray(ids)


class _TorchCodes(dict):
    """torch dtype -> the extension's DType code (F32, F16, BF16, I32, I64);
    any other dtype is an Error naming it."""

    def __missing__(self, dtype):
        import torch
        codes = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int32: 3,
                 torch.int64: 4}
        if dtype not in codes:
            raise Error(f"dtype {dtype} is not one pejit reads "
                        "(float32, float16, bfloat16, int32, int64)")
        self[dtype] = codes[dtype]
        return codes[dtype]


_TORCH_CODES = _TorchCodes()


def _raw(x, what, keep=None):
    """A CPU torch tensor as (pointer, dtype code, shape, strides). A lazily
    negated or conjugated view (torch._neg_view) holds other values than
    its memory: an input is resolved into a copy, an `out` is an Error."""
    if x.device.type != "cpu":
        raise Error(f"{what}: tensor is on {x.device}; pejit.attention reads CPU tensors")
    if x.is_neg() or x.is_conj():
        if what == "out":
            raise Error("out: a negated or conjugated view (its memory holds other values); "
                        "pass a plain tensor")
        x = x.resolve_neg().resolve_conj()
        if keep is not None:
            keep.append(x)  # the copy must outlive the run
    return (x.data_ptr(), _TORCH_CODES[x.dtype], x.shape, x.stride())


def _as_bias(bias):
    """A bias or mask as the kernel reads it: rank 4 ([sq, skv] gets two
    leading 1s), a float dtype (a bool mask becomes 0 where True, -inf where
    False), contiguous (a broadcast view is copied)."""
    if is_torch(bias):
        import torch
        if bias.dtype == torch.bool:
            bias = torch.zeros(bias.shape, dtype=torch.float32).masked_fill(~bias, float("-inf"))
        if bias.dim() == 2:
            bias = bias[None, None]
        if bias.dim() != 4:
            raise Error(f"bias: expected [sq, skv] or [b|1, hq|1, sq, skv], got shape "
                        f"{list(bias.shape)}")
        return bias.contiguous()
    if not isinstance(bias, np.ndarray):
        raise Error(f"bias: expected a NumPy array or a torch tensor, got {type(bias).__name__}")
    if bias.dtype == np.bool_:
        bias = np.where(bias, np.float32(0), np.float32(-np.inf))
    if bias.ndim == 2:
        bias = bias[None, None]
    if bias.ndim != 4:
        raise Error(f"bias: expected [sq, skv] or [b|1, hq|1, sq, skv], got shape "
                    f"{list(bias.shape)}")
    return np.ascontiguousarray(bias)


def _freeze(x):
    """A hashable form of an option (dicts and lists become tuples)."""
    if isinstance(x, dict):
        return tuple(sorted((key, _freeze(value)) for key, value in x.items()))
    if isinstance(x, list):
        return tuple(_freeze(value) for value in x)
    return x


_plans: dict = {}


def _plan(q, k, v, rope, alibi, t5, t5_table, shaw, shaw_key, shaw_value, causal, window,
          softcap, scale, q_positions, k_positions, target, bias=None, cu_seqlens_q=None,
          cu_seqlens_k=None, key_lengths=None, block_table=None, rope_scale=None,
          alibi_slopes=None, rope_inv_freq=None, training=False) -> _Plan:
    """Checks a call and gets its kernel: the slow path, once per kind."""
    for x, what in ((q, "q"), (k, "k"), (v, "v")):
        dtype_name(x, what)  # a NumPy array or torch tensor of a dtype pejit reads
    boolean(causal, "causal")
    optional_number(scale, "scale")  # its range: docs/limits.md, checked by the compiler
    optional_number(softcap, "softcap", positive=True)
    text(target, "target")
    paged = block_table is not None
    qs = _shape(q, 4, "q")
    ks = _shape(k, 4, "k pages [num_pages, page_size, hkv, d]" if paged else "k")
    vs = _shape(v, 4, "v pages [num_pages, page_size, hkv, dv]" if paged else "v")
    packed = cu_seqlens_q is not None or cu_seqlens_k is not None
    if packed and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise Error("cu_seqlens_q, cu_seqlens_k: give both (a packed batch's offsets)")
    if packed and qs[0] != 1:
        raise Error(f"cu_seqlens_q: a packed batch is q [1, hq, total, d], got b = {qs[0]}")
    if packed and (key_lengths is not None or paged):
        raise Error("cu_seqlens_q: a packed batch takes no key_lengths or block_table")
    if bias is not None and (packed or key_lengths is not None or paged):
        raise Error("bias: not with a packed batch, key_lengths or a paged cache (its lengths "
                    "vary per row); fuse the encoding that computes it instead")
    for x, what in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"),
                    (key_lengths, "key_lengths"), (block_table, "block_table")):
        if x is not None and dtype_name(x, what) != "int32":
            raise Error(f"{what}: expected int32, got {dtype_name(x, what)}")
    if paged:
        if vs[:3] != ks[:3]:
            raise Error(f"v: pages {list(vs)} differ from k's {list(ks)} in [num_pages, "
                        "page_size, hkv]")
        # The kernel's K and V are [b, hkv, skv, d]: as the source sees them.
        ks = (qs[0], ks[2], ks[0] * ks[1], ks[3])
        vs = (qs[0], vs[2], vs[0] * vs[1], vs[3])
    dtype = dtype_name(q, "q")
    for x, what in ((k, "k"), (v, "v")):
        other = dtype_name(x, what)
        if other != dtype:
            raise Error(f"{what}: dtype {other} differs from q's {dtype}")
    if is_torch(q) != is_torch(k) or is_torch(q) != is_torch(v):
        raise Error("q, k, v: mix NumPy arrays and torch tensors")
    rope = as_rope(rope)
    alibi = _as_alibi(alibi)
    positions = [p for p in (q_positions, k_positions) if p is not None]
    axes = rope.position_axes() if rope is not None else 0
    per_batch = bool(positions) and np.ndim(positions[0]) == (axes + 2 if axes else 2)
    if positions and rope is None:
        raise Error("q_positions, k_positions: only an encoding reads position ids; "
                    "give rope= (masks compare sequence indices)")
    if (t5 is None) != (t5_table is None):
        raise Error("t5, t5_table: give both (the config and its [num_buckets, hq] table)")
    if shaw is not None and shaw_key is None and shaw_value is None:
        raise Error("shaw: give shaw_key, shaw_value or both (the tables)")
    if shaw is None and (shaw_key is not None or shaw_value is not None):
        raise Error("shaw_key, shaw_value: give shaw= (its clip) too")
    key_table = None if shaw_key is None else (len(shaw_key.shape),
                                                dtype_name(shaw_key, "shaw_key"))
    value_table = None if shaw_value is None else (len(shaw_value.shape),
                                                    dtype_name(shaw_value, "shaw_value"))
    bias_type = None
    if bias is not None:
        bs = tuple(int(n) for n in bias.shape)
        if bs[0] not in (1, qs[0]) or bs[1] not in (1, qs[1]) or bs[2:] != (qs[2], ks[2]):
            raise Error(f"bias: shape {list(bs)} is not [b or 1, hq or 1, sq, skv] = "
                        f"[{qs[0]} or 1, {qs[1]} or 1, {qs[2]}, {ks[2]}]")
        bias_type = (bs, dtype_name(bias, "bias"))
    page_size = int(k.shape[1]) if paged else None
    scale_rows = None
    if rope_scale is not None:
        if rope is None:
            raise Error("rope_scale: give rope= too (the scale multiplies RoPE's positions)")
        if dtype_name(rope_scale, "rope_scale") != "float32" or len(rope_scale.shape) != 1 \
                or int(rope_scale.shape[0]) not in (1, qs[0]):
            raise Error(f"rope_scale: expected float32 [1] or [b] = [{qs[0]}], got "
                        f"{dtype_name(rope_scale, 'rope_scale')} {list(rope_scale.shape)}")
        scale_rows = int(rope_scale.shape[0])
    if rope_inv_freq is not None:
        if rope is None:
            raise Error("rope_inv_freq: give rope= too (its layout and scaling)")
        half = (rope.rotary_dim_for(qs[3]) or qs[3]) // 2
        if dtype_name(rope_inv_freq, "rope_inv_freq") != "float32" \
                or tuple(int(n) for n in rope_inv_freq.shape) != (half,):
            raise Error(f"rope_inv_freq: expected float32 [rotary_dim / 2] = [{half}], got "
                        f"{dtype_name(rope_inv_freq, 'rope_inv_freq')} "
                        f"{list(rope_inv_freq.shape)}")
    if alibi_slopes is not None:
        if alibi is None:
            raise Error("alibi_slopes: give alibi= too (its form and heads)")
        if dtype_name(alibi_slopes, "alibi_slopes") != "float32" \
                or tuple(int(n) for n in alibi_slopes.shape) != (qs[1],):
            raise Error(f"alibi_slopes: expected float32 [hq] = [{qs[1]}], got "
                        f"{dtype_name(alibi_slopes, 'alibi_slopes')} {list(alibi_slopes.shape)}")
    key = (target, dtype, qs[0], qs[1], ks[1], qs[3], vs[3], rope, alibi, t5, shaw, key_table,
           value_table, bool(causal), _window(window), softcap, scale, per_batch, bias_type,
           packed, key_lengths is not None, page_size, scale_rows, alibi_slopes is not None,
           rope_inv_freq is not None, training)
    kernel = _kernel(key, lambda: attention_source(
        qs, (ks[0], ks[1], None, ks[3]) if not paged else tuple(k.shape), vs, dtype, rope=rope,
        alibi=alibi, t5=t5, shaw=shaw, shaw_key_table=key_table,
        shaw_value_table=value_table, causal=causal, window=window, softcap=softcap,
        scale=scale, positions_per_batch=per_batch, bias=bias_type, packed=packed,
        key_lengths=key_lengths is not None, page_size=page_size, rope_scale=scale_rows,
        alibi_slopes=alibi_slopes is not None, rope_inv_freq=rope_inv_freq is not None,
        training=training))
    for x, what in ((t5_table, "t5_table"), (q_positions, "q_positions"),
                    (k_positions, "k_positions")):
        if x is not None:
            dtype_name(x, what)  # a NumPy array or torch tensor of a dtype pejit reads
    return _Plan(kernel, dtype, is_torch(q), axes, per_batch, cacheable=True,
                 default_query_ids=not (packed or key_lengths is not None or paged))
