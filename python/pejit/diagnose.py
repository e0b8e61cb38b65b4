"""pejit diagnose: a readable report on a model's positional encoding.

What convention its config.json asks for, what the scaling does to the
frequencies, how wrong the angles get when computed in f32 or bf16 at the
longest position (against pejit's float64 angles), what rotating in the
model's dtype costs, and what pejit fuses for it.
"""
from __future__ import annotations

import math
import os
from typing import List, Optional

import numpy as np

from . import _pejit
from .hf import AttentionConfig, from_hf_config
from ._rope import RopeConfig


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to float32, float16 or bfloat16 (nearest even),
    returned as float64."""
    if dtype == "float32":
        return x.astype(np.float32).astype(np.float64)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float64)
    bits = x.astype(np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(np.float64)


def _frequencies(rope: RopeConfig, head_dim: int, seq_len: int):
    inv, factor = _pejit.rope_frequencies(rope.native(head_dim), head_dim, seq_len)
    return np.array(inv), factor


def angle_errors(inv_freq: np.ndarray, position: int, dtype: str) -> np.ndarray:
    """|angle in dtype - exact angle| per frequency, at `position`: inv_freq
    and the position rounded to dtype, their product rounded again (how
    HF-style code computes it when autocast runs the product in dtype)."""
    exact = position * inv_freq
    approx = round_to(round_to(np.float64(position), dtype) * round_to(inv_freq, dtype), dtype)
    return np.abs(approx - exact)


def rotation_error(inv_freq: np.ndarray, position: int, dtype: str, interleaved: bool,
                   rng: np.random.Generator) -> float:
    """Max relative error of rotated Q rows when the rotation runs in `dtype`
    (cos and sin cast to it, each product and the sum rounded to it), as
    HF's apply_rotary_pos_emb does in the model dtype, against float64. The
    input is already in `dtype`; pejit rotates it in f32."""
    half = inv_freq.size
    x = round_to(rng.standard_normal((256, 2 * half)), dtype)
    angle = position * inv_freq
    cos, sin = np.cos(angle), np.sin(angle)
    a, b = (x[:, 0::2], x[:, 1::2]) if interleaved else (x[:, :half], x[:, half:])
    exact = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=1)
    c, s = round_to(cos, dtype), round_to(sin, dtype)
    low = np.concatenate([round_to(round_to(a * c, dtype) - round_to(b * s, dtype), dtype),
                          round_to(round_to(b * c, dtype) + round_to(a * s, dtype), dtype)], axis=1)
    return float(np.max(np.abs(low - exact)) / np.max(np.abs(exact)))


def _fmt(x: float) -> str:
    return f"{x:.4g}" if 1e-3 <= abs(x) < 1e5 or x == 0 else f"{x:.3e}"


def _scaling_text(rope: RopeConfig) -> str:
    if rope.scaling == "none":
        return "none"
    fields = {"linear": ["factor"], "ntk": ["factor"],
              "dynamic_ntk": ["factor", "original_max_position"],
              "yarn": ["factor", "original_max_position", "beta_fast", "beta_slow", "mscale",
                       "mscale_all_dim", "attention_factor", "truncate"],
              "llama3": ["factor", "low_freq_factor", "high_freq_factor",
                         "original_max_position"],
              "longrope": ["factor", "original_max_position", "attention_factor"]}
    parts = [f"{name} {getattr(rope, name)}" for name in fields[rope.scaling]
             if getattr(rope, name) is not None]
    if rope.scaling == "longrope":
        parts.append(f"short_factor {_fmt(min(rope.short_factor))}..{_fmt(max(rope.short_factor))}")
        parts.append(f"long_factor {_fmt(min(rope.long_factor))}..{_fmt(max(rope.long_factor))}")
    return f"{rope.scaling} ({', '.join(parts)})"


def report(cfg: AttentionConfig, source: str, longest: int = 4095,
           dtype: str = "bfloat16", layer: int = 0) -> str:
    lines: List[str] = [f"pejit diagnose: {source} ({cfg.model_type}, layer {layer})", ""]
    group = cfg.num_heads // max(cfg.num_kv_heads, 1)
    kind = "MHA" if group == 1 else ("MQA" if cfg.num_kv_heads == 1 else f"GQA {group}:1")
    scale = cfg.scale if cfg.scale is not None else cfg.head_dim ** -0.5
    lines += ["Attention",
              f"  heads: {cfg.num_heads} query, {cfg.num_kv_heads} key/value ({kind}); "
              f"head dim {cfg.head_dim}, value dim {cfg.value_dim}",
              f"  mask: {'causal' if cfg.causal else 'none (bidirectional)'}"
              + (f", left window {cfg.window} (a query sees {cfg.window + 1} keys)"
                 if cfg.window is not None else ""),
              f"  softcap: {cfg.softcap if cfg.softcap is not None else 'none'}; "
              f"scale {_fmt(scale)}" + ("" if cfg.scale is not None else " (1/sqrt(d))")]
    for note in cfg.notes:
        lines.append(f"  note: {note}")
    lines.append("")
    rope = cfg.rope
    if rope is None:
        lines += ["Positional encoding", "  " + (
            "ALiBi: a per-head linear bias, slopes from the ALiBi paper" if cfg.alibi else
            "T5 buckets: " f"{cfg.t5.num_buckets} buckets, max distance {cfg.t5.max_distance}"
            if cfg.t5 else f"learned absolute positions ({cfg.learned_positions} rows)"
            if cfg.learned_positions else "none"), ""]
    else:
        rd = rope.rotary_dim_for(cfg.head_dim) or cfg.head_dim
        pairing = (f"channel 2c pairs with 2c+1 (interleaved, GPT-J)" if rope.interleaved
                   else f"channel c pairs with c+{rd // 2} (rotate_half, NeoX/Llama)")
        inv, attention_factor = _frequencies(rope, cfg.head_dim, longest + 1)
        plain = RopeConfig(theta=rope.theta, rotary_dim=rope.rotary_dim,
                           partial_rotary_factor=rope.partial_rotary_factor,
                           interleaved=rope.interleaved, sections=rope.sections,
                           interleaved_sections=rope.interleaved_sections, axial=rope.axial)
        inv0, _ = _frequencies(plain, cfg.head_dim, longest + 1)
        lines += ["RoPE convention",
                  f"  layout: {pairing}",
                  f"  rotary dims: {rd} of {cfg.head_dim}; theta {rope.theta:g}",
                  f"  scaling: {_scaling_text(rope)}",
                  f"  attention factor on cos and sin: {_fmt(attention_factor)}"]
        if rope.sections:
            lines.append(f"  M-RoPE sections: {list(rope.sections)} (position ids [3, s])")
        lines.append("")
        wave0, wave = 2 * math.pi / inv0, 2 * math.pi / inv
        ratio = inv0 / inv
        changed = np.flatnonzero(np.abs(ratio - 1) > 1e-12)
        lines += [f"Frequencies ({inv.size}; at positions up to {longest})",
                  f"  wavelength, unscaled: {_fmt(wave0.min())} .. {_fmt(wave0.max())} positions",
                  f"  wavelength, scaled:   {_fmt(wave.min())} .. {_fmt(wave.max())} positions"]
        if changed.size:
            lines.append(f"  scaling changes {changed.size} of {inv.size} frequencies (indices "
                         f"{changed.min()}..{changed.max()}), wavelengths x{_fmt(ratio.min())} "
                         f"to x{_fmt(ratio.max())}")
        else:
            lines.append("  scaling changes no frequency at this length")
        lines.append("")
        lines.append(f"Angle error at position {longest}, against pejit's float64 angles")
        for name in ("float32", "bfloat16"):
            err = angle_errors(inv, longest, name)
            verdict = ("negligible" if err.max() < 1e-4 else
                       "measurable (above 1e-4 rad)" if err.max() < 1e-2 else
                       "large (above 1e-2 rad)" if err.max() < 0.5 else "wrong rotations")
            lines.append(f"  angles computed in {name}: up to {_fmt(err.max())} rad "
                         f"(frequency {int(err.argmax())}): {verdict}")
        lines.append("  pejit: the angle, cos and sin in float64 once per call, kept as f32 "
                     "(error below 1e-7)")
        lines.append("")
        rng = np.random.default_rng(0)
        err_low = rotation_error(inv, longest, dtype, rope.interleaved, rng)
        err_f32 = rotation_error(inv, longest, "float32", rope.interleaved, rng)
        lines += [f"Rotation in {dtype}",
                  f"  rotating Q/K in {dtype} (cos, sin and each product rounded): relative "
                  f"error up to {_fmt(err_low)}",
                  f"  pejit reads {dtype} Q/K and rotates in f32: {_fmt(err_f32)}"
                  + (" (the inputs' own rounding is all that remains)"
                     if dtype != "float32" else ""), ""]
    lines.append("What pejit fuses")
    fused = []
    if rope is not None:
        fused.append(f"RoPE ({rope.scaling}) on Q and K: in the attention tile, x86 and NVIDIA")
    if cfg.alibi is not None:
        fused.append("ALiBi: computed per score in the tile, no bias tensor (x86, NVIDIA)")
    if cfg.t5 is not None:
        fused.append("T5 buckets: per tile from the [buckets, heads] table (x86, NVIDIA)")
    if cfg.causal or cfg.window is not None:
        masks = " and ".join(m for m, on in (("causal mask", cfg.causal),
                                              ("window", cfg.window is not None)) if on)
        fused.append(f"{masks}: tiles outside it skipped (x86, NVIDIA)")
    if cfg.softcap is not None:
        fused.append("softcap: in the score hook (x86, NVIDIA)")
    if cfg.learned_positions:
        fused.append("learned absolute positions: pe.embed / pe.learned, a standalone "
                     "kernel on the embeddings (x86); attention itself has none")
    lines += [f"  {item}" for item in fused] + ["  falls back: nothing"]
    return "\n".join(lines) + "\n"


def plot(cfg: AttentionConfig, path: str, longest: int) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from ._pejit import Error
        raise Error("--plot needs matplotlib (pip install matplotlib)") from None
    rope = cfg.rope
    inv, _ = _frequencies(rope, cfg.head_dim, longest + 1)
    plain = RopeConfig(theta=rope.theta, rotary_dim=rope.rotary_dim,
                       partial_rotary_factor=rope.partial_rotary_factor)
    inv0, _ = _frequencies(plain, cfg.head_dim, longest + 1)
    lengths = np.unique(np.geomspace(16, max(longest + 1, 32), 64).astype(int))
    factors = [_frequencies(rope, cfg.head_dim, int(n))[1] for n in lengths]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.semilogy(inv0, label="unscaled")
    a.semilogy(inv, label=f"{rope.scaling} (positions up to {longest})")
    a.set_xlabel("frequency index")
    a.set_ylabel("inv_freq")
    a.legend()
    b.semilogx(lengths, factors)
    b.set_xlabel("longest position + 1")
    b.set_ylabel("attention factor")
    fig.suptitle(f"{cfg.model_type}: RoPE frequencies")
    fig.tight_layout()
    fig.savefig(path)


def longest_position(values, max_position: Optional[int] = None) -> int:
    """--max-position, else the config's max_position_embeddings - 1, else 4095."""
    if max_position is not None:
        return max_position
    hint = int(values.get("max_position_embeddings") or
               (values.get("text_config") or {}).get("max_position_embeddings") or 0)
    return hint - 1 if hint > 1 else 4095


def diagnose(config, layer: int = 0, max_position: Optional[int] = None,
             dtype: str = "bfloat16", plot_path: Optional[str] = None) -> str:
    """The report for a config.json (path, model directory or dict); with
    plot_path, also the frequency plot (matplotlib)."""
    from .hf import _load
    values = _load(config)
    cfg = from_hf_config(values, layer=layer)
    longest = longest_position(values, max_position)
    source = os.fspath(config) if not isinstance(config, dict) else "<dict>"
    text = report(cfg, source, longest, dtype, layer)
    if plot_path:
        if cfg.rope is None:
            from ._pejit import Error
            raise Error("--plot: this model has no RoPE to draw")
        plot(cfg, plot_path, longest)
        text += f"plot: {plot_path}\n"
    return text
