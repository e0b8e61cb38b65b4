"""Kernels from MLIR source: compile, run, read each stage's IR, tune; the cache."""
from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _pejit
from ._pejit import Error
from ._tensors import buffer, empty_like_kind

_runtime: Optional[_pejit.Runtime] = None
_runtime_lock = threading.Lock()


def runtime() -> _pejit.Runtime:
    """The process's pejit Runtime: its thread pool and its kernel caches
    (in memory, and on disk under PEJIT_CACHE_DIR or ~/.cache/pejit)."""
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = _pejit.Runtime()
    return _runtime


@atexit.register
def _release_runtime() -> None:
    """Drops the runtime and the kept kernels before the interpreter tears
    the extension down (their threads and JIT code go with them)."""
    global _runtime
    from . import _attention, _backward, _linear, _standalone
    _attention._kernels.clear()
    _linear._kernels.clear()
    _backward._kernels.clear()
    _standalone._kernels.clear()
    _attention._plans.clear()
    _runtime = None


class Kernel:
    """A kernel JIT-compiled for one spec, shape class, target and tile config."""

    def __init__(self, native: _pejit.Kernel, source: str):
        self._native = native
        self.source = source

    def run(self, *inputs, out=None):
        """Runs on `inputs` (in the order of the source function's arguments;
        trailing position ids may be left out) and returns `out`, which is
        written in place. Without `out`, an attention kernel allocates its
        output [b, hq, sq, dv] like the query; other kernels need `out`."""
        views, flags = [], []
        roles = [a["role"] for a in self._native.arguments]
        for i, x in enumerate(inputs):
            # A linear attention's carried state is written back in place.
            written = i < len(roles) and roles[i] == "linear_state"
            view, bf16 = buffer(x, lambda: self._label(i), written)
            views.append(view)
            flags.append(bf16)
        if out is None:
            out = self._allocate(inputs, views, flags)
        out_view, out_bf16 = buffer(out, "out", written=True)
        self._native.run(views, out_view, flags + [out_bf16])
        return out

    def _label(self, i: int) -> str:
        args = self._native.arguments
        return args[i]["name"] if i < len(args) else f"input {i}"

    def _allocate(self, inputs, views, flags):
        """The output a call on these inputs (and their views) writes."""
        roles = [a["role"] for a in self._native.arguments]
        if not inputs:
            raise Error("run: no inputs given")
        if "query" in roles:
            b, hq, _, sq, _, _, dv = self._native.call_shape(views, flags)
            return empty_like_kind(inputs[0], (b, hq, sq, dv), self._native.output_dtype)
        if roles and roles[0] == "transform_input":
            return empty_like_kind(inputs[0], tuple(inputs[0].shape), self._native.output_dtype)
        raise Error("run: this kernel's output shape is not implied by its inputs; pass out=")

    def ir(self, stage: str) -> str:
        """The IR of one stage (see .stages): 'source', 'fused', 'tiled', ..."""
        return self._native.ir(stage)

    @property
    def stages(self) -> List[str]:
        return list(self._native.stages)

    @property
    def arguments(self) -> List[Dict[str, Any]]:
        """Each argument's role, name, shape (None: given per call) and dtype."""
        return self._native.arguments

    @property
    def target(self) -> str:
        return self._native.target

    @property
    def compile_ms(self) -> float:
        """Milliseconds spent compiling it, or loading it from the disk cache."""
        return self._native.compile_ms

    @property
    def from_disk(self) -> bool:
        """Whether it came from the disk cache (nothing was compiled)."""
        return self._native.from_disk

    @property
    def ptx(self) -> str:
        """The PTX of an NVIDIA kernel ('' for the host)."""
        return self._native.ptx

    @property
    def ptxas_log(self) -> str:
        """ptxas's report for an NVIDIA kernel (registers, spills); '' without ptxas."""
        return self._native.ptxas_log

    def __repr__(self) -> str:
        return f"<pejit.Kernel {self.target} compile_ms={self.compile_ms:.1f} from_disk={self.from_disk}>"


def _read_source(source: Union[str, os.PathLike]):
    if not isinstance(source, (str, os.PathLike)):
        raise Error(f"source: expected MLIR text or a path, got {type(source).__name__}")
    if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and source.endswith(".mlir")):
        path = Path(source)
        try:
            return path.read_text(), str(path)
        except OSError as e:
            raise Error(f"{path}: cannot read: {e.strerror}") from None
    return source, "<text>"


def compile(source: Union[str, os.PathLike], target: str = "host", *,
            query_tile: Optional[int] = None, key_tile: Optional[int] = None) -> Kernel:
    """Compiles MLIR (text, or the path of a .mlir file) in the pe and attn
    dialects for `target` ("host", or "nvidia:sm_80" ... "nvidia:sm_90").
    The kernel comes from the runtime's caches when it is there."""
    text, name = _read_source(source)
    if not isinstance(target, str):
        raise Error(f"target: expected a string ('host', 'nvidia:sm_90'), got {target!r}")
    return Kernel(runtime().get(text, name, target, query_tile, key_tile), text)


def tune(source: Union[str, os.PathLike], *, repeats: int = 5, progress: bool = True,
         lengths: Optional[List[Tuple[int, int]]] = None) -> List[Dict[str, Any]]:
    """Times every candidate tile config of a source on this host and
    stores the fastest, which later compiles of it use (pejit.attention's
    kernels included: pejit.attention_source gives their source). A shape
    class (`?` lengths) is timed at `lengths`, (sq, skv) pairs, or by
    default at a prefill of 512 and of 2048 and a decode step over 2048
    keys (printed with progress=True). Shows a progress bar on a terminal.
    Returns one dict per candidate."""
    text, name = _read_source(source)
    pairs = []
    for item in lengths or []:
        if (not isinstance(item, (tuple, list)) or len(item) != 2 or
                any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in item)):
            raise Error(f"lengths: expected (sq, skv) pairs of positive integers, got {item!r}")
        pairs.append((int(item[0]), int(item[1])))
    return runtime().tune(text, name, repeats, progress, pairs)


def stats() -> Dict[str, int]:
    """Compiles, disk-cache hits and memory hits of this process's runtime."""
    return runtime().stats()


class _Cache:
    """The disk cache of compiled kernels (PEJIT_CACHE_DIR, else
    $XDG_CACHE_HOME/pejit or ~/.cache/pejit)."""

    def stats(self) -> Dict[str, Any]:
        return _pejit.cache_stats()

    def ls(self) -> List[Dict[str, Any]]:
        return _pejit.cache_list(False)

    def verify(self) -> List[Dict[str, Any]]:
        """Every entry with its checksum checked; 'problem' is '' when whole."""
        return _pejit.cache_list(True)

    def clear(self) -> int:
        """Removes every entry and tuned config; returns the entries removed."""
        return _pejit.cache_clear()


cache = _Cache()
