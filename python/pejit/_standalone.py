"""pejit.rope and pejit.embed: the standalone kernels (docs/standalone-kernels.md)
from Python, one cached kernel per kind of call (lengths are `?`)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import _pejit
from ._kernel import Kernel, runtime
from ._checks import optional_number
from ._pejit import Error
from ._rope import as_rope
from ._tensors import dtype_name, empty_like_kind

_kernels: dict = {}


def _kernel(key, build, backward: bool = False) -> Kernel:
    """The cached kernel of `key`: the source build() returns, or (backward)
    the backward the compiler derives from it (pe.rope adjoint)."""
    kernel = _kernels.get(key)
    if kernel is None:
        source = build()
        name = "<pejit." + key[0] + ">"
        native = (runtime().get_backward(source, name) if backward else
                  runtime().get(source, name, key[1]))
        kernel = Kernel(native, source)
        _kernels[key] = kernel
    return kernel


def rope(x, positions, rope=True, *, scale=None, out=None, target: str = "host"):
    """x [b, h, s, d] rotated by RoPE at `positions`: ids [s] shared by the
    batch or [b, s] per row (M-RoPE / axial: [A, s] or [A, b, s]), int32 or
    int64. rope: RopeConfig, a dict or True, as pejit.attention's.

    out: None (a new array), x itself (in place), or any [b, h, s, d] view
    of x's dtype, e.g. rows [t, t + s) of a K cache: the KV-append step of a
    decode loop, which rotates new K rows as it writes them into the cache.
    scale: a runtime position scale, float32 [1] (or [b] with ids per row):
    angle = (position * scale) * inv_freq; a new value compiles nothing.
    Returns out. Raises pejit.Error naming what is wrong."""
    return _rope(x, positions, rope, scale, out, target, backward=False)


def rope_backward(grad, positions, rope=True, *, scale=None, out=None):
    """The gradient of pejit.rope's input from its output's: grad [b, h, s,
    d] rotated back (the transpose of the rotation, with the scaling's
    attention factor), at the forward's positions and RoPE. One fused pass,
    the kernel the compiler derives from the forward (pe.rope adjoint;
    docs/backward.md). scale and out as for pejit.rope (grad itself: in
    place). x86 only so far."""
    return _rope(grad, positions, rope, scale, out, "host", backward=True)


def rope_scale_gradient(grad, x, positions, scale, rope=True):
    """The gradient of pejit.rope's runtime position scale: grad is the
    gradient of pejit.rope(x, positions, rope, scale=scale)'s output.
    Returns float32 of the scale's shape ([1] or [b]): the sum over the
    rotated rows and pairs of position * inv_freq * (g_b y_a - g_a y_b),
    y the rotated x, in one pass over grad and x (pe.rope_scale_grad,
    docs/backward.md), summed in a fixed order. x86 only so far."""
    config = as_rope(rope)
    if config is None:
        raise Error("rope: give the RoPE to apply (a RopeConfig, a dict or True)")
    dtype = dtype_name(grad, "grad")
    if dtype_name(x, "x") != dtype or tuple(x.shape) != tuple(grad.shape):
        raise Error(f"x: expected grad's shape {list(grad.shape)} and dtype {dtype}, got "
                    f"{list(x.shape)} {dtype_name(x, 'x')}")
    if len(tuple(grad.shape)) != 4:
        raise Error(f"grad: expected rank 4 [b, h, s, d], got shape {list(grad.shape)}")
    b, h, _, d = (int(n) for n in grad.shape)
    by_row, rows = _rope_ids(config, positions, scale)
    key = ("rope_scale_grad", "host", dtype, h, d, config, by_row, b if by_row else None, rows)
    kernel = _kernel(key, lambda: _pejit.rope_scale_grad_source(
        config.native(d), b if by_row else None, h, None, d, dtype, by_row, rows))
    out = empty_like_kind(grad, (rows,), "float32")
    return kernel.run(grad, x, positions, scale, out=out)


def _rope_ids(config, positions, scale):
    """(ids per batch row, the scale's length or 0): positions' rank checked
    against the RoPE's axes, the scale's shape and dtype."""
    dtype_name(positions, "positions")
    axes = config.position_axes()
    rank = np.ndim(positions) if not hasattr(positions, "dim") else positions.dim()
    shared, per_batch = (2, 3) if axes else (1, 2)
    if rank not in (shared, per_batch):
        raise Error(f"positions: expected ids of rank {shared} ({'[A, s]' if axes else '[s]'}) "
                    f"or {per_batch} ({'[A, b, s]' if axes else '[b, s]'}), got rank {rank}")
    rows = 0
    if scale is not None:
        if dtype_name(scale, "scale") != "float32" or len(tuple(scale.shape)) != 1:
            raise Error(f"scale: expected float32 [1] or [b], got {list(scale.shape)} "
                        f"{dtype_name(scale, 'scale')}")
        rows = int(scale.shape[0])
    return rank == per_batch, rows


def _rope(x, positions, rope, scale, out, target: str, backward: bool):
    what = "grad" if backward else "x"
    config = as_rope(rope)
    if config is None:
        raise Error("rope: give the RoPE to apply (a RopeConfig, a dict or True)")
    dtype = dtype_name(x, what)
    shape = tuple(x.shape)
    if len(shape) != 4:
        raise Error(f"{what}: expected rank 4 [b, h, s, d], got shape {list(shape)}")
    by_row, rows = _rope_ids(config, positions, scale)
    b, h, _, d = shape
    key = ("rope_backward" if backward else "rope", target, dtype, h, d, config, by_row,
           b if by_row else None, rows)
    kernel = _kernel(key, lambda: _pejit.rope_source(config.native(d), b if by_row else None, h,
                                                     None, d, dtype, by_row, rows), backward)
    if out is None:
        out = empty_like_kind(x, shape, dtype)
    inputs = [x, positions] + ([] if scale is None else [scale])
    return kernel.run(*inputs, out=out)


_ELEMENT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def _positions_op(rows: str, x: str, d: int, element: str, learned: int,
                  sinusoidal: Optional[float]):
    """(its arguments, the op) of the absolute embedding added to `rows` (an
    SSA name of type x): pe.learned with a table of `learned` rows, or
    pe.sinusoidal."""
    if learned:
        table = f"tensor<{learned}x{d}x{element}>"
        return (["%positions: tensor<?xi64>", f"%position_table: {table}"],
                f"pe.learned {rows}, %positions, %position_table <max_positions = {learned}> : "
                f"{x}, tensor<?xi64>, {table}")
    return (["%positions: tensor<?xi64>"],
            f"pe.sinusoidal {rows}, %positions <base = {float(sinusoidal)!r}> : {x}, "
            "tensor<?xi64>")


def _position_table_rows(position_table, d: int, dtype: str, owner: str) -> int:
    """A learned position table's rows (0 without one), checked: [rows, d] of
    `owner`'s dtype."""
    if position_table is None:
        return 0
    if len(tuple(position_table.shape)) != 2 or int(position_table.shape[1]) != d:
        raise Error(f"position_table: expected [max_positions, {d}], got "
                    f"{list(position_table.shape)}")
    if dtype_name(position_table, "position_table") != dtype:
        raise Error(f"position_table: dtype differs from {owner}'s {dtype}")
    return int(position_table.shape[0])


def _source_embed(vocab: int, d: int, dtype: str, scale: Optional[float], learned: int,
                  sinusoidal: Optional[float]) -> str:
    element = _ELEMENT[dtype]
    table = f"tensor<{vocab}x{d}x{element}>"
    x = f"tensor<?x?x{d}x{element}>"
    args = [f"%tokens: tensor<?x?xi64>", f"%table: {table}"]
    attr = "" if scale is None else f" {{scale = {float(scale)!r} : f64}}"
    body = [f"  %x0 = pe.embed %tokens, %table{attr} : tensor<?x?xi64>, {table} -> {x}"]
    result = "%x0"
    if learned or sinusoidal is not None:
        more, op = _positions_op("%x0", x, d, element, learned, sinusoidal)
        args += more
        body.append(f"  %x1 = {op}")
        result = "%x1"
    return (f"func.func @embed({', '.join(args)}) -> {x} {{\n" + "\n".join(body) +
            f"\n  return {result} : {x}\n}}\n")


def embed(tokens, table, *, scale: Optional[float] = None, positions=None,
          position_table=None, sinusoidal_base: Optional[float] = None, out=None,
          target: str = "host"):
    """Token embedding with its absolute positional encoding in one kernel:
    out[b, s] = table[tokens[b, s]] * scale (+ position_table[positions[s]],
    BERT's learned positions, or + the sinusoidal encoding of positions[s]
    with sinusoidal_base, the Transformer's 10000).

    tokens: int32/int64 [b, s]; table [vocab, d] (float32, float16 or
    bfloat16); positions: int [s] (default 0 .. s-1 when a positional
    encoding is asked for). A token or position outside its table is an
    error naming it. Returns out [b, s, d] of the table's dtype."""
    if position_table is not None and sinusoidal_base is not None:
        raise Error("position_table, sinusoidal_base: give one positional encoding, not both")
    dtype_name(tokens, "tokens")
    dtype_name(table, "table")
    if len(tuple(tokens.shape)) != 2:
        raise Error(f"tokens: expected rank 2 [b, s], got shape {list(tokens.shape)}")
    if len(tuple(table.shape)) != 2:
        raise Error(f"table: expected rank 2 [vocab, d], got shape {list(table.shape)}")
    dtype_name(tokens, "tokens")
    dtype = dtype_name(table, "table")
    optional_number(scale, "scale")
    vocab, d = (int(n) for n in table.shape)
    learned = _position_table_rows(position_table, d, dtype, "table")
    optional_number(sinusoidal_base, "sinusoidal_base", positive=True)
    encoded = learned or sinusoidal_base is not None
    if positions is not None and not encoded:
        raise Error("positions: only a positional encoding reads them; give position_table or "
                    "sinusoidal_base")
    b, s = (int(n) for n in tokens.shape)
    if encoded and positions is None:
        positions = np.arange(s, dtype=np.int64)
    key = ("embed", target, dtype, vocab, d, None if scale is None else float(scale), learned,
           None if sinusoidal_base is None else float(sinusoidal_base))
    kernel = _kernel(key, lambda: _source_embed(vocab, d, dtype, scale, learned,
                                                sinusoidal_base))
    if out is None:
        out = empty_like_kind(table, (b, s, d), dtype)
    inputs = [tokens, table]
    if encoded:
        inputs.append(positions)
    if learned:
        inputs.append(position_table)
    return kernel.run(*inputs, out=out)


def _source_embed_grad(rows: int, d: int, dtype: str, out_dtype: str, scale: float,
                       per_row: bool) -> str:
    grad = f"tensor<?x?x{d}x{_ELEMENT[dtype]}>"
    ids = "tensor<?x?xi64>" if per_row else "tensor<?xi64>"
    out = f"tensor<{rows}x{d}x{_ELEMENT[out_dtype]}>"
    return (f"func.func @table_grad(%dy: {grad}, %ids: {ids}) -> {out} {{\n"
            f"  %g = pe.embed_grad %dy, %ids {{scale = {float(scale)!r} : f64}} : {grad}, {ids} "
            f"-> {out}\n  return %g : {out}\n}}\n")


def embedding_backward(grad, ids, rows: int, *, scale: float = 1.0, dtype: Optional[str] = None,
                       out=None):
    """The gradient of a table read by rows at `ids` (nn.Embedding's
    backward; pejit.embed's token table with its scale, or a learned
    position table): out[v] = scale * sum of grad[b, t] over ids[b, t] = v.
    grad [b, s, d] (float32, float16 or bfloat16); ids int32/int64 [b, s],
    or [s] shared by the batch; rows the table's. Returns [rows, d] of
    `dtype`: grad's (the default: a 16-bit table's gradient is 16-bit,
    accumulated in float32 and rounded once) or "float32".
    No atomics: each row sums its entries in ascending (b, t) order, the
    same bits at any thread count (pe.embed_grad, docs/backward.md). An id
    outside [0, rows) is an error naming it."""
    grad_dtype = dtype_name(grad, "grad")
    dtype_name(ids, "ids")
    out_dtype = grad_dtype if dtype is None else dtype
    if out_dtype not in ("float32", grad_dtype):
        raise Error(f"dtype: expected None, 'float32' or grad's '{grad_dtype}', got {dtype!r}")
    if len(tuple(grad.shape)) != 3:
        raise Error(f"grad: expected rank 3 [b, s, d], got shape {list(grad.shape)}")
    rank = len(tuple(ids.shape))
    if rank not in (1, 2):
        raise Error(f"ids: expected [s] or [b, s], got shape {list(ids.shape)}")
    if not isinstance(rows, int) or isinstance(rows, bool) or rows <= 0:
        raise Error(f"rows: expected a positive int (the table's rows), got {rows!r}")
    optional_number(scale, "scale")
    d = int(grad.shape[2])
    key = ("embed_grad", "host", grad_dtype, out_dtype, d, rows, float(scale), rank == 2)
    kernel = _kernel(key, lambda: _source_embed_grad(rows, d, grad_dtype, out_dtype, scale,
                                                     rank == 2))
    if out is None:
        out = empty_like_kind(grad, (rows, d), out_dtype)
    return kernel.run(grad, ids, out=out)


def _source_positions(d: int, dtype: str, learned: int, sinusoidal: Optional[float]) -> str:
    element = _ELEMENT[dtype]
    x = f"tensor<?x?x{d}x{element}>"
    args, op = _positions_op("%x", x, d, element, learned, sinusoidal)
    return (f"func.func @positions({', '.join([f'%x: {x}'] + args)}) -> {x} {{\n  %e = {op}\n"
            f"  return %e : {x}\n}}\n")


def add_positions(x, positions, *, position_table=None, sinusoidal_base: Optional[float] = None,
                  out=None):
    """x [b, s, d] plus its absolute position embedding in one pass:
    position_table[positions[t]] (a learned table [max_positions, d] of x's
    dtype) or the sinusoidal encoding with sinusoidal_base (the
    Transformer's 10000). positions int [s], shared by the batch. Returns
    out [b, s, d] of x's dtype (x itself: in place)."""
    if (position_table is None) == (sinusoidal_base is None):
        raise Error("position_table, sinusoidal_base: give one positional encoding")
    dtype = dtype_name(x, "x")
    dtype_name(positions, "positions")
    if len(tuple(x.shape)) != 3:
        raise Error(f"x: expected rank 3 [b, s, d], got shape {list(x.shape)}")
    d = int(x.shape[2])
    learned = _position_table_rows(position_table, d, dtype, "x")
    optional_number(sinusoidal_base, "sinusoidal_base", positive=True)
    key = ("positions", "host", dtype, d, learned,
           None if sinusoidal_base is None else float(sinusoidal_base))
    kernel = _kernel(key, lambda: _source_positions(d, dtype, learned, sinusoidal_base))
    if out is None:
        out = empty_like_kind(x, tuple(x.shape), dtype)
    inputs = [x, positions] + ([position_table] if learned else [])
    return kernel.run(*inputs, out=out)
