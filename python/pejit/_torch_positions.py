"""pejit.torch's position-encoding modules (docs/python.md, "The seed's
modules"): the positional encodings of the seed articles' code as
nn.Modules with the same constructor arguments, each computing the seed's
formula through a pejit kernel, forward and backward."""
from __future__ import annotations

from typing import Optional

import torch

from ._pejit import Error
from ._torch_standalone import rope_options


def _positions(positions: Optional[torch.Tensor], length: int) -> torch.Tensor:
    if positions is None:
        return torch.arange(length, dtype=torch.int64)
    return positions


class RotaryPositionEmbedding(torch.nn.Module):
    """The seed's RotaryPositionEmbedding: x rotated by RoPE,

        inv_freq = 1 / base^(2i / dim),  angle = position * inv_freq,
        out = x * cos(cat(angle, angle)) + rotate_half(x) * sin(cat(angle, angle))

    (the NeoX/LLaMA half layout). forward(x, positions=None): x [b, h, s,
    dim] or [b, s, dim]; positions int64 [s] or [b, s], default 0 .. s-1.
    One fused pejit kernel each way (torch.ops.pejit.rope; its backward the
    rotation transposed). The angles are computed per call, so max_seq_len
    is kept for the seed's signature only: any position works. No
    parameters."""

    def __init__(self, dim: int, max_seq_len: int = 2048, base: float = 10000.0):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise Error(f"dim: expected a positive even head dim, got {dim}")
        self.dim, self.max_seq_len, self.base = dim, max_seq_len, float(base)
        self.options = rope_options({"rope_theta": self.base})

    def forward(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None):
        if x.shape[-1] != self.dim:
            raise Error(f"x: expected last dim {self.dim} (the module's dim), got "
                        f"{list(x.shape)}")
        heads = x.dim() == 4
        rows = x if heads else x.unsqueeze(1)
        out = torch.ops.pejit.rope(rows, _positions(positions, rows.shape[2]), self.options)
        return out if heads else out.squeeze(1)
