"""`pejit diagnose CHECKPOINT.pt`: what the seed articles warn about,
measured on a model the lab trained (docs/lab.md).

1. Where perplexity starts to climb past the training length: the mean
   next-byte loss at each position of 16x-long test windows, in bins of
   one training length, against the loss at the training length's second
   half.
2. For a RoPE model: the angle error of f32 and bf16 angles at the longest
   evaluated position (pejit.diagnose's measure, on the model's own
   frequencies and learned position scale).
3. For a RoPE model with a KV cache: greedy decoding over `steps` steps
   with a pre-rotated cache (keys rotated once, when appended, then stored)
   against rotate-at-read (raw keys stored, rotated inside the fused
   attention at every step), the cache in f32 and in bf16: the first step
   where the two disagree, if any."""
from __future__ import annotations

import math
from typing import List

import numpy as np
import torch

from ..diagnose import angle_errors
from . import corpus as corpus_module
from .evaluate import window_losses
from .model import THETA, LanguageModel, ModelConfig, inverse_frequencies

CLIMB = 0.05  # a bin's loss this far above the in-range loss is a climb


def load(path: str) -> LanguageModel:
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several kinds for a file that is no checkpoint
        raise ValueError(f"{path}: not a lab checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(saved, dict) or saved.get("pejit_lab") != 1:
        raise ValueError(f"{path}: not a lab checkpoint (no 'pejit_lab' marker; pejit lab "
                         f"writes them under OUT/checkpoints)")
    model = LanguageModel(ModelConfig(**saved["model"]))
    model.load_state_dict(saved["state_dict"])
    return model.eval()


def climb(model: LanguageModel, test: np.ndarray, windows: int = 32) -> List[str]:
    """The loss by position over windows of 16x the training length, in
    bins of one training length. A climb is the first bin that, with the
    bin after it, stays more than CLIMB above the reference loss (one bin
    alone can be noise)."""
    context = model.config.context
    length = min(16 * context, model.config.max_eval)
    n = min(windows, (test.size - 1) // length)
    if n < 1:
        return [f"perplexity: the test split is shorter than one window of {length}"]
    rows = np.stack([test[j * length:j * length + length + 1] for j in range(n)])
    nll = window_losses(model, rows, batch_tokens=8 * length).mean(0)
    half = max(1, context // 2)
    reference = nll[context - half:context].mean().item()
    lines = [f"perplexity by position ({n} test windows of {length} bytes; reference: positions "
             f"{context - half}-{context - 1}, ppl {math.exp(reference):.3f}):"]
    changes = []
    for start in range(context, length, context):
        value = nll[start:start + context].mean().item()
        changes.append((start, value / reference - 1))
        lines.append(f"  positions {start:5d}-{start + context - 1:5d} ({start // context:2d}x): "
                     f"ppl {math.exp(value):8.3f} (loss {changes[-1][1]:+.1%})")
    first = next((start for i, (start, change) in enumerate(changes)
                  if change > CLIMB and (i + 1 == len(changes) or changes[i + 1][1] > CLIMB)),
                 None)
    if first is None:
        lines.append(f"  no climb: up to {length // context}x the training length, no two "
                     f"neighbouring bins are {CLIMB:.0%} above the reference loss")
    else:
        lines.append(f"  perplexity climbs from position {first} ({first // context}x the "
                     f"training length of {context})")
    return lines


def _frequencies(model: LanguageModel) -> np.ndarray:
    inv = inverse_frequencies(model.config.head_dim).numpy()
    scale = getattr(model.blocks[0].attn, "rope_scale", None)
    return inv * (1.0 if scale is None else float(scale.detach()[0]))


def angles(model: LanguageModel) -> List[str]:
    position = 16 * model.config.context - 1
    inv = _frequencies(model)
    lines = [f"RoPE angles at position {position} (the longest evaluated; layer 0's "
             f"frequencies{', times its learned scale' if model.encoding.attention == 'rope_scale' else ''}):"]
    for dtype in ("float32", "bfloat16"):
        err = angle_errors(inv, position, dtype)
        lines.append(f"  {dtype:9s} max angle error {err.max():.3e} rad (channel pair "
                     f"{int(err.argmax())}), mean {err.mean():.3e}")
    return lines


def _decode(model: LanguageModel, prompt: np.ndarray, steps: int, pre_rotated: bool,
            dtype: torch.dtype) -> List[int]:
    """Greedy bytes after `prompt`, one token per step through a KV cache."""
    from pejit.torch import attention, options, rope_options
    cfg = model.config
    rope = {"theta": THETA}
    plain, rotating = options(), options(rope=rope)
    rotate = rope_options(rope)
    caches = [([], []) for _ in model.blocks]
    tokens = [int(t) for t in prompt]
    out: List[int] = []
    with torch.no_grad():
        for step in range(len(prompt) + steps - 1):
            position = torch.tensor([step])
            x = model.embed(torch.tensor([[tokens[step]]]))
            if model.encoding.absolute == "learned":
                x = x + model.position_table[step]
            for block, (keys, values) in zip(model.blocks, caches):
                attn = block.attn
                h = block.ln1(x)
                q, k, v = (t.view(1, 1, cfg.heads, cfg.head_dim).transpose(1, 2)
                           for t in attn.qkv(h).chunk(3, -1))
                scale = getattr(attn, "rope_scale", None)
                if pre_rotated:
                    q = torch.ops.pejit.rope(q, position, rotate, scale)
                    k = torch.ops.pejit.rope(k, position, rotate, scale)
                keys.append(k.to(dtype))
                values.append(v.to(dtype))
                kk, vv = torch.cat(keys, 2), torch.cat(values, 2)
                if pre_rotated:
                    o = attention(q.to(dtype), kk, vv, plain)
                else:
                    o = attention(q.to(dtype), kk, vv, rotating, position,
                                  torch.arange(step + 1), rope_scale=scale)
                x = x + attn.out(o.float().transpose(1, 2).reshape(1, 1, cfg.d_model))
                x = x + block.mlp(block.ln2(x))
            if step + 1 >= len(prompt):
                token = int(model.head(model.ln_f(x))[0, -1].argmax())
                out.append(token)
                tokens.append(token)
    return out


def kv_cache(model: LanguageModel, test: np.ndarray, steps: int) -> List[str]:
    prompt = test[:model.config.context]
    lines = [f"KV-cached greedy decoding, {steps} steps after a {prompt.size}-byte prompt "
             f"(to position {prompt.size + steps - 1}): pre-rotated cache against "
             f"rotate-at-read"]
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        a = _decode(model, prompt, steps, True, dtype)
        b = _decode(model, prompt, steps, False, dtype)
        differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if not differ:
            lines.append(f"  {name:9s} cache: the same {steps} tokens")
        else:
            lines.append(f"  {name:9s} cache: first different token at step {differ[0]} "
                         f"({len(differ)} of {steps} differ)")
    return lines


def diagnose_checkpoint(path: str, steps: int = 1000, corpus: str = "kjv") -> str:
    model = load(path)
    cfg = model.config
    lines = [f"lab checkpoint {path}: encoding {cfg.encoding} ({model.encoding.label}), "
             f"{cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads, trained at "
             f"{cfg.context} bytes", ""]
    test = corpus_module.load(corpus).test
    lines += climb(model, test) + [""]
    if model.encoding.attention in ("rope", "rope_scale"):
        lines += angles(model) + [""] + kv_cache(model, test, steps)
    else:
        lines.append(f"angles and KV cache: not measured ({model.encoding.label} is no "
                     f"rotary softmax attention)")
    return "\n".join(lines) + "\n"
