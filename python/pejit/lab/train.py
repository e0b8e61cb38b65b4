"""Training one encoding's model, and measuring it: the loss curve, training
throughput (bytes/s, after the first steps, which JIT-compile the kernels)
and the process's peak memory during training. Each model trains in a
fresh process (run.py), so the peak is that model's alone."""
from __future__ import annotations

import math
import resource
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .model import LanguageModel, loss_of

WARMUP_STEPS_UNTIMED = 3  # the first steps compile kernels; not timed


@dataclass
class TrainConfig:
    steps: int = 600
    batch: int = 16
    lr: float = 2e-3
    warmup: int = 30
    weight_decay: float = 0.01
    clip: float = 1.0
    seed: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


class Progress:
    """A progress bar on stderr: redrawn in place on a terminal, a line per
    10% elsewhere (CI logs)."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.done, self.shown = label, max(1, total), 0, -1
        self.tty = sys.stderr.isatty()
        self.start = time.perf_counter()

    def step(self, note: str = "") -> None:
        self.done += 1
        tenth = 10 * self.done // self.total
        if not self.tty and tenth == self.shown and self.done < self.total:
            return
        self.shown = tenth
        filled = 30 * self.done // self.total
        bar = "#" * filled + "." * (30 - filled)
        line = (f"{self.label:<24} [{bar}] {self.done}/{self.total} "
                f"{time.perf_counter() - self.start:6.1f} s {note}")
        sys.stderr.write(("\r" + line) if self.tty else line + "\n")
        if self.tty and self.done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def batches(tokens: np.ndarray, context: int, batch: int, steps: int, seed: int):
    """The training batches [batch, context + 1], the same for every
    encoding (they depend on the seed and the split only)."""
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, tokens.size - context - 1, size=(steps, batch))
    index = offsets[:, :, None] + np.arange(context + 1)[None, None, :]
    for step in range(steps):
        yield torch.from_numpy(tokens[index[step]].astype(np.int64))


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    t = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def train(model: LanguageModel, tokens: np.ndarray, config: TrainConfig,
          label: str) -> dict:
    """Trains in place; returns the loss curve and the measurements."""
    torch.manual_seed(config.seed)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}], lr=config.lr,
                                  betas=(0.9, 0.95))
    baseline_rss = current_rss_mb()
    progress = Progress(label, config.steps)
    losses, timed, timed_tokens = [], 0.0, 0
    for step, batch in enumerate(batches(tokens, model.config.context, config.batch,
                                         config.steps, config.seed)):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        start = time.perf_counter()
        loss = loss_of(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
        optimizer.step()
        elapsed = time.perf_counter() - start
        if step >= WARMUP_STEPS_UNTIMED:
            timed += elapsed
            timed_tokens += batch.shape[0] * (batch.shape[1] - 1)
        losses.append(loss.item())
        if not math.isfinite(losses[-1]):
            raise RuntimeError(f"{label}: the loss is {losses[-1]} at step {step}")
        progress.step(f"loss {losses[-1]:.3f}")
    peak = peak_rss_mb()
    return {"losses": losses,
            "tokens_per_s": timed_tokens / timed if timed > 0 else float("nan"),
            "seconds": timed, "peak_rss_mb": peak, "train_memory_mb": peak - baseline_rss}


def valid_loss(model: LanguageModel, tokens: np.ndarray, context: int, windows: int = 64) -> float:
    """Mean NLL (nats) on `windows` evenly spaced validation windows."""
    starts = np.linspace(0, tokens.size - context - 1, windows).astype(np.int64)
    batch = torch.from_numpy(np.stack([tokens[s:s + context + 1] for s in starts]).astype(np.int64))
    with torch.no_grad():
        return loss_of(model, batch).item()
