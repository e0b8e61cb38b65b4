"""Perplexity at evaluation lengths past the training length, on the same
test bytes for every encoding and length.

- non-overlapping: the test bytes cut into windows of `length` inputs, each
  predicting its next bytes; early bytes of a window see little context.
- sliding: windows of `length` moved by length / 2; the first window scores
  every byte, each later one only its last half, so every scored byte but
  the first window's sees at least length / 2 bytes of context (the ALiBi
  paper's sliding evaluation moves by 1; half a window keeps the cost at
  about twice the non-overlapping one).

With len(tokens) - 1 a multiple of every length, both modes score exactly
bytes 1 .. len(tokens) - 1 at every length."""
from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F


def window_losses(model, windows: np.ndarray, batch_tokens: int) -> torch.Tensor:
    """Per-byte NLL [n, length] of windows [n, length + 1]."""
    length = windows.shape[1] - 1
    per_batch = max(1, batch_tokens // length)
    out = []
    with torch.no_grad():
        for start in range(0, windows.shape[0], per_batch):
            chunk = torch.from_numpy(windows[start:start + per_batch].astype(np.int64))
            logits = model(chunk[:, :-1])
            out.append(F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:], reduction="none"))
    return torch.cat(out)


def perplexities(model, tokens: np.ndarray, length: int, batch_tokens: int = 8192,
                 tick: Optional[Callable[[], None]] = None) -> dict:
    """{"nonoverlapping": ppl, "sliding": ppl} at windows of `length`."""
    n = (tokens.size - 1) // length
    if n < 1:
        raise ValueError(f"the test split has {tokens.size} bytes, fewer than one window of "
                         f"{length}")
    starts = np.arange(n) * length
    windows = np.stack([tokens[s:s + length + 1] for s in starts])
    losses = window_losses(model, windows, batch_tokens)
    if tick:
        tick()
    stride = max(1, length // 2)
    last = n * length - length
    slide_starts = np.arange(0, last + 1, stride)
    slide = window_losses(model, np.stack([tokens[s:s + length + 1] for s in slide_starts]),
                           batch_tokens)
    scored = torch.cat([slide[0], slide[1:, length - stride:].reshape(-1)])
    if tick:
        tick()
    return {"nonoverlapping": math.exp(losses.mean().item()),
            "sliding": math.exp(scored.mean().item())}
