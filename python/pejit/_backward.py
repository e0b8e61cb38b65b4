"""pejit.attention_backward: the gradients of pejit.attention (docs/backward.md),
from the backward kernel the compiler derives from the forward's source."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ._attention import (ShawConfig, T5Config, _as_alibi, _as_bias, _raw, _shape, _window,
                         attention_source)
from ._checks import boolean, optional_number
from ._kernel import Kernel, runtime
from ._pejit import Error
from ._rope import as_rope
from ._tensors import dtype_name, is_torch

_kernels: dict = {}

_NUMPY_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 3,
                np.dtype(np.int64): 4}
try:  # NumPy's bfloat16 arrays (ml_dtypes), where installed
    import ml_dtypes
    _NUMPY_CODES[np.dtype(ml_dtypes.bfloat16)] = 2
except ImportError:
    pass


def _raw_any(x, what):
    """(pointer, dtype code, shape, strides in elements) of a torch tensor
    or a NumPy array."""
    if is_torch(x):
        return _raw(x, what)
    if not isinstance(x, np.ndarray) or x.dtype not in _NUMPY_CODES:
        raise Error(f"{what}: expected a NumPy array (float32, float16, bfloat16; int32 or "
                    "int64 position ids) or a torch CPU tensor")
    return (x.ctypes.data, _NUMPY_CODES[x.dtype], x.shape,
            tuple(s // x.itemsize for s in x.strides))


def _contiguous_rows(x):
    """x with a contiguous last dim (the kernels read rows of it)."""
    if is_torch(x):
        return x if x.stride(-1) == 1 and 0 not in x.stride() else x.contiguous()
    return x if x.strides[-1] == x.itemsize and 0 not in x.strides else np.ascontiguousarray(x)


def attention_backward(q, k, v, o, do, *, rope=None, alibi=None, t5: Optional[T5Config] = None,
                       t5_table=None, shaw: Optional[ShawConfig] = None, shaw_key=None,
                       shaw_value=None, causal: bool = False, window=None,
                       softcap: Optional[float] = None, scale: Optional[float] = None,
                       q_positions=None, k_positions=None, rope_scale=None,
                       alibi_slopes=None, rope_inv_freq=None, cu_seqlens_q=None,
                       cu_seqlens_k=None, key_lengths=None, lse=None, bias=None,
                       bias_grad: bool = True) -> Tuple:
    """dq, dk, dv of o = pejit.attention(q, k, v, ...) for the output's
    gradient `do` (the same options as the forward; `o` is its output), and
    with t5 and its float32 t5_table, the table's gradient as a fourth;
    with shaw and its float32 tables shaw_key, shaw_value (either or both,
    shared or per head, as for the forward), their gradients; with a float32
    bias ([sq, skv] or [b|1, hq|1, sq, skv]), its gradient: dS summed over
    its broadcast dims, of the bias's shape (s x s: with bias_grad=False the
    bias is a fixed mask and gets none).
    NumPy arrays or torch CPU tensors (q, k, v, o, do of one dtype: float32,
    float16, or torch bfloat16, computed in f32; the encodings' tensors
    float32); returns new arrays of the kind, shapes and dtypes of q, k, v
    (and float32 ones for the table, slopes, scale). With rope, dq and dk are
    rotated back inside the kernel; q_positions, k_positions as for the
    forward (defaults: keys 0..skv-1, queries skv-sq..skv-1); with
    rope_scale (float32 [1] or [b]), alibi_slopes (float32 [hq], with
    alibi=) and rope_inv_freq (float32 [rotary_dim / 2]), their gradients
    follow, in the order t5_table, shaw_key, shaw_value, bias, alibi_slopes,
    rope_scale, rope_inv_freq.
    cu_seqlens_q, cu_seqlens_k (a packed batch) and key_lengths (int32) as
    for the forward: each sequence or row is its own attention, keys past a
    row's length get zero gradients. lse: the training forward's (float32
    [b, hq, sq], pejit.attention(..., return_lse=True)), read instead of
    recomputed. Deterministic: the same inputs give the same bits at any
    thread count."""
    rope = as_rope(rope)
    positions = [p for p in (q_positions, k_positions) if p is not None]
    if positions and rope is None:
        raise Error("q_positions, k_positions: only an encoding reads position ids; "
                    "give rope= (masks compare sequence indices)")
    axes = rope.position_axes() if rope is not None else 0
    per_batch = bool(positions) and np.ndim(positions[0]) == (axes + 2 if axes else 2)
    alibi = _as_alibi(alibi)
    if (t5 is None) != (t5_table is None):
        raise Error("t5, t5_table: give both (the config and its [num_buckets, hq] table)")
    if t5 is not None and not isinstance(t5, T5Config):
        raise Error(f"t5: expected a pejit.T5Config, got {type(t5).__name__}")
    if shaw is not None and not isinstance(shaw, ShawConfig):
        raise Error(f"shaw: expected a pejit.ShawConfig, got {type(shaw).__name__}")
    if shaw is not None and shaw_key is None and shaw_value is None:
        raise Error("shaw: give shaw_key, shaw_value or both (the tables)")
    if shaw is None and (shaw_key is not None or shaw_value is not None):
        raise Error("shaw_key, shaw_value: give shaw= (its clip) too")
    boolean(causal, "causal")
    optional_number(scale, "scale")
    optional_number(softcap, "softcap", positive=True)
    qs, ks, vs = _shape(q, 4, "q"), _shape(k, 4, "k"), _shape(v, 4, "v")
    tensors = [(q, "q"), (k, "k"), (v, "v"), (o, "o"), (do, "do")]
    if t5_table is not None:
        tensors.append((t5_table, "t5_table"))
    for table, what in ((shaw_key, "shaw_key"), (shaw_value, "shaw_value")):
        if table is not None:
            tensors.append((table, what))
    bias_shape = None if bias is None else tuple(int(n) for n in bias.shape)
    if bias is not None:
        bias = _as_bias(bias)
        tensors.append((bias, "bias"))
    if rope_scale is not None:
        if rope is None:
            raise Error("rope_scale: give rope= too (the scale multiplies RoPE's positions)")
        if len(rope_scale.shape) != 1 or int(rope_scale.shape[0]) not in (1, qs[0]):
            raise Error(f"rope_scale: expected [1] or [b] = [{qs[0]}], got "
                        f"{list(rope_scale.shape)}")
        tensors.append((rope_scale, "rope_scale"))
    if alibi_slopes is not None:
        if alibi is None:
            raise Error("alibi_slopes: give alibi= too (its form and heads)")
        if tuple(int(n) for n in alibi_slopes.shape) != (qs[1],):
            raise Error(f"alibi_slopes: expected [hq] = [{qs[1]}], got "
                        f"{list(alibi_slopes.shape)}")
        tensors.append((alibi_slopes, "alibi_slopes"))
    if rope_inv_freq is not None:
        if rope is None:
            raise Error("rope_inv_freq: give rope= too (its layout and scaling)")
        tensors.append((rope_inv_freq, "rope_inv_freq"))
    # q, k, v, o, do of one dtype (16-bit ones give 16-bit gradients,
    # computed in f32); the encodings' tensors float32.
    dtype = dtype_name(q, "q")
    if dtype not in ("float32", "float16", "bfloat16"):
        raise Error(f"q: the backward takes float32, float16 or bfloat16, got {dtype}")
    for x, what in tensors:
        wanted = dtype if what in ("q", "k", "v", "o", "do") else "float32"
        if dtype_name(x, what) != wanted:
            raise Error(f"{what}: expected {wanted} (as q), got {dtype_name(x, what)}"
                        if wanted == dtype else
                        f"{what}: expected float32, got {dtype_name(x, what)}")
    packed = cu_seqlens_q is not None or cu_seqlens_k is not None
    if packed and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise Error("cu_seqlens_q, cu_seqlens_k: give both (a packed batch's offsets)")
    if packed and key_lengths is not None:
        raise Error("cu_seqlens_q: a packed batch takes no key_lengths")
    if packed and qs[0] != 1:
        raise Error(f"cu_seqlens_q: a packed batch is q [1, hq, total, d], got b = {qs[0]}")
    for x, what in ((cu_seqlens_q, "cu_seqlens_q"), (cu_seqlens_k, "cu_seqlens_k"),
                    (key_lengths, "key_lengths")):
        if x is not None and dtype_name(x, what) != "int32":
            raise Error(f"{what}: expected int32, got {dtype_name(x, what)}")
    if (packed or key_lengths is not None) and k_positions is not None and q_positions is None:
        raise Error("q_positions: give them with k_positions in a packed or key_lengths call "
                    "(their defaults follow each sequence's lengths)")
    if lse is not None:
        if dtype_name(lse, "lse") != "float32" or tuple(int(n) for n in lse.shape) != \
                (qs[0], qs[1], qs[2]):
            raise Error(f"lse: expected float32 [b, hq, sq] = [{qs[0]}, {qs[1]}, {qs[2]}], got "
                        f"{dtype_name(lse, 'lse')} {list(lse.shape)}")
    torch_inputs = is_torch(q)
    if any(is_torch(x) != torch_inputs for x in (k, v, o, do)):
        raise Error("q, k, v, o, do: mix NumPy arrays and torch tensors")
    key_table = None if shaw_key is None else (len(shaw_key.shape), "float32")
    value_table = None if shaw_value is None else (len(shaw_value.shape), "float32")
    bias_type = None if bias is None else (tuple(int(n) for n in bias.shape), "float32")
    boolean(bias_grad, "bias_grad")
    key = (qs[0], qs[1], ks[1], qs[3], vs[3], rope, alibi, t5, shaw, key_table, value_table,
           bias_type, bool(bias_grad),
           bool(causal), _window(window),
           softcap, scale, per_batch, None if rope_scale is None else int(rope_scale.shape[0]),
           alibi_slopes is not None, rope_inv_freq is not None, dtype, packed,
           key_lengths is not None, lse is not None)
    kernel = _kernels.get(key)
    if kernel is None:
        source = attention_source(qs, (ks[0], ks[1], None, ks[3]), vs, dtype, rope=rope,
                                  alibi=alibi, t5=t5, shaw=shaw, shaw_key_table=key_table,
                                  shaw_value_table=value_table, bias=bias_type, causal=causal,
                                  window=window,
                                  softcap=softcap, scale=scale, positions_per_batch=per_batch,
                                  rope_scale=None if rope_scale is None else int(rope_scale.shape[0]),
                                  alibi_slopes=alibi_slopes is not None,
                                  rope_inv_freq=rope_inv_freq is not None, packed=packed,
                                  key_lengths=key_lengths is not None, training=lse is not None)
        kernel = Kernel(runtime().get_backward(source, "<pejit.attention_backward>",
                                               bias_gradient=bool(bias_grad)), source)
        _kernels[key] = kernel
    q, k, v, o, do = (_contiguous_rows(x) for x in (q, k, v, o, do))
    # The derived backward's arguments: the forward's (q, k, v, the table),
    # then o and dO, then the position ids (trailing, as in the forward);
    # its gradients dq, dk, dv, then the table's.
    operands = [_contiguous_rows(x)
                for x in (t5_table, shaw_key, shaw_value, bias, alibi_slopes, rope_scale,
                          rope_inv_freq)
                if x is not None]
    operands += [x for x in (cu_seqlens_q, cu_seqlens_k, key_lengths) if x is not None]
    if k_positions is not None and q_positions is None:
        q_positions = np.arange(ks[2] - qs[2], ks[2], dtype=np.int64)
        if per_batch:
            q_positions = np.broadcast_to(q_positions, (qs[0], qs[2]))
        if axes:
            q_positions = np.broadcast_to(q_positions, (axes,) + q_positions.shape)
        q_positions = np.ascontiguousarray(q_positions)
    ids = [_contiguous_rows(p) for p in (q_positions, k_positions) if p is not None]
    # The operand gradients come in the kernel's order; returned as the
    # table's, then the scale's.
    by_name = {"t5_table": t5_table, "shaw_key_table": shaw_key, "shaw_value_table": shaw_value,
               "bias": bias, "alibi_slopes": alibi_slopes,
               "rope_position_scale": rope_scale, "rope_inv_freq": rope_inv_freq}
    names = list(kernel._native.operand_gradients)
    like = [q, k, v] + [by_name[name] for name in names]
    if torch_inputs:
        import torch
        grads = tuple(torch.empty(tuple(x.shape), dtype=x.dtype if n < 3 else torch.float32)
                      for n, x in enumerate(like))
    else:
        grads = tuple(np.empty(x.shape, dtype=x.dtype if n < 3 else np.float32)
                      for n, x in enumerate(like))
    kernel._native.run_backward_raw(
        [_raw_any(x, "input")
         for x in [q, k, v] + operands + [o, do] + ([] if lse is None else [lse]) + ids],
        [_raw_any(g, "gradient") for g in grads])
    order = [names.index(name)
             for name in ("t5_table", "shaw_key_table", "shaw_value_table", "bias",
                          "alibi_slopes", "rope_position_scale", "rope_inv_freq")
             if name in names]
    # The bias's gradient in the shape it was given ([sq, skv] or 4-D).
    out = [grads[3 + n].reshape(bias_shape) if names[n] == "bias" else grads[3 + n]
           for n in order]
    return tuple(grads[:3]) + tuple(out)
