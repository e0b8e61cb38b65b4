"""Python buffers (NumPy arrays, torch CPU tensors) as the extension reads them.

The extension takes any DLPack buffer. Two kinds need a word first:
- ml_dtypes.bfloat16 NumPy arrays have no DLPack type, so they are passed
  as a uint16 view of the same memory with a flag saying "bf16";
- torch tensors that require grad refuse DLPack export, so they are
  detached (a view; nothing is copied).
"""
from __future__ import annotations

import numpy as np

from ._pejit import Error

_NUMPY_NAMES = {"float32", "float16", "bfloat16", "int32", "int64"}
# NumPy dtypes DLPack carries as they are (dtype.name is slow: a Python
# property; a set lookup is not).
_PLAIN_NUMPY = frozenset(np.dtype(n) for n in ("float32", "float16", "int32", "int64"))


def is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def dtype_name(x, what: str) -> str:
    """'float32', 'float16', 'bfloat16', 'int32' or 'int64'; Error otherwise."""
    if is_torch(x):
        name = str(x.dtype).removeprefix("torch.")
    elif isinstance(x, np.ndarray):
        name = x.dtype.name
    else:
        raise Error(f"{what}: expected a NumPy array or a torch tensor, got {type(x).__name__}")
    if name not in _NUMPY_NAMES:
        raise Error(f"{what}: dtype {name} is not one pejit reads "
                    "(float32, float16, bfloat16, int32, int64)")
    return name


def buffer(x, what, written: bool = False):
    """(object the extension reads, whether it holds bf16 bits). `what`
    names x in errors: a string, or a function that returns one. A
    `written` buffer (an output, a carried state) must be writable."""
    if type(x) is np.ndarray and x.dtype in _PLAIN_NUMPY and (not written or x.flags.writeable):
        return x, False
    if callable(what):
        what = what()
    if written and isinstance(x, np.ndarray) and not x.flags.writeable:
        raise Error(f"{what}: the array is read-only (e.g. np.load(..., mmap_mode='r')), and the "
                    "run writes it; pass a writable copy")
    if is_torch(x):
        if x.device.type != "cpu":
            raise Error(f"{what}: tensor is on {x.device}; pejit.attention reads CPU tensors")
        if x.is_neg() or x.is_conj():
            if written:
                raise Error(f"{what}: a negated or conjugated view (its memory holds other "
                            "values); pass a plain tensor")
            x = x.resolve_neg().resolve_conj()
        return (x.detach() if x.requires_grad else x), False
    if not isinstance(x, np.ndarray):
        raise Error(f"{what}: expected a NumPy array or a torch tensor, got {type(x).__name__}")
    if x.dtype.name == "bfloat16":
        return x.view(np.uint16), True
    return x, False


def empty_like_kind(like, shape, dtype: str):
    """A new uninitialized array (or tensor, when `like` is one) of `dtype`."""
    if is_torch(like):
        import torch
        return torch.empty(shape, dtype=getattr(torch, dtype))
    if dtype == "bfloat16":
        import ml_dtypes
        return np.empty(shape, dtype=ml_dtypes.bfloat16)
    return np.empty(shape, dtype=dtype)
