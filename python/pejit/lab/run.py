"""The lab's run: each encoding's model trained in its own process through
pejit, then evaluated at 1x .. 16x the training length (with its
evaluation-time scalings, for RoPE); the same model with plain-torch
attention trained beside it for speed (a few steps) and, for one encoding,
for the whole run (its loss curve against pejit's)."""
from __future__ import annotations

import json
import multiprocessing
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List

import numpy as np
import torch

from . import corpus as corpus_module
from .encodings import ENCODINGS, Encoding
from .evaluate import perplexities
from .model import LanguageModel, ModelConfig
from .train import Progress, TrainConfig, train, valid_loss

MULTIPLES = (1, 2, 4, 8, 16)


@dataclass
class LabConfig:
    encodings: List[str]
    model: ModelConfig
    training: TrainConfig
    corpus: str = "kjv"
    out: str = "lab-out"
    torch_steps: int = 20  # plain-torch steps timed per encoding
    reference: str = "rope"  # the encoding also trained fully in plain torch
    eval_windows: int = 8  # windows of 16x per evaluation (sets the test bytes)
    command: str = ""


def _job(kind: str, lab: dict, name: str, result_path: str) -> None:
    """One process's work: train `name` (through pejit, or plain torch when
    kind is "torch" or "torch-full"), then for "pejit" evaluate it."""
    model_config = ModelConfig(**{**lab["model"], "encoding": name})
    train_config = TrainConfig(**lab["training"])
    if kind == "torch":
        train_config.steps = lab["torch_steps"]
        train_config.warmup = min(train_config.warmup, train_config.steps)
    data = corpus_module.load(lab["corpus"])
    torch.manual_seed(train_config.seed)
    model = LanguageModel(model_config).set_backend("pejit" if kind == "pejit" else "torch")
    label = f"{name} ({'pejit' if kind == 'pejit' else 'torch'})"
    result = {"parameters": sum(p.numel() for p in model.parameters()),
              "positional_parameters": model.positional_parameters(),
              "train": train(model, data.train, train_config, label)}
    if kind == "pejit":
        result["valid_loss"] = valid_loss(model, data.valid, model_config.context)
        checkpoint = Path(lab["out"]) / "checkpoints" / f"{name}.pt"
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"pejit_lab": 1, "model": model_config.as_dict(),
                    "state_dict": model.state_dict()}, checkpoint)
        result["checkpoint"] = str(checkpoint)
        result["evaluations"] = _evaluate(model, lab, data.test, name)
    Path(result_path).write_text(json.dumps(result))


def _evaluate(model: LanguageModel, lab: dict, test: np.ndarray, name: str) -> dict:
    """{encoding: {multiple: perplexities}} for `name` and each requested
    evaluation-time scaling of it."""
    context = model.config.context
    tokens = test[:16 * context * lab["eval_windows"] + 1]
    variants = [e for e in ENCODINGS.values()
                if e.name == name or (e.eval_scaling and e.eval_scaling[1] == name and
                                      e.name in lab["encodings"])]
    progress = Progress(f"{name} (eval)", 2 * len(MULTIPLES) * len(variants))
    out = {}
    model.eval()
    for variant in variants:
        out[variant.name] = {}
        for multiple in MULTIPLES:
            model.set_eval_encoding(variant, context * multiple)
            out[variant.name][multiple] = perplexities(
                model, tokens, context * multiple, tick=lambda: progress.step(variant.name))
    model.set_eval_encoding(ENCODINGS[name], context)
    return out


def _spawn(kind: str, lab: dict, name: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "result.json")
        process = multiprocessing.get_context("spawn").Process(
            target=_job, args=(kind, lab, name, path))
        process.start()
        process.join()
        if process.exitcode != 0 or not os.path.exists(path):
            raise RuntimeError(f"the lab's {kind} run of '{name}' failed (exit code "
                               f"{process.exitcode}); its error is above")
        return json.loads(Path(path).read_text())


def machine() -> dict:
    cpu, flags = platform.processor(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not cpu.strip():
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                wanted = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
                flags = " ".join(f for f in line.split(":", 1)[1].split() if f in wanted)
    except OSError:
        pass
    return {"cpu": cpu, "flags": flags, "cores": os.cpu_count(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}


def _commit() -> str:
    """The pejit checkout's commit: the package's folder when it runs from
    a clone, else the working directory's (an installed package has none)."""
    for folder in (Path(__file__).resolve().parent, Path.cwd()):
        try:
            return subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
                                  capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            continue
    return "unknown"


def run(lab: LabConfig, encodings: List[Encoding]) -> dict:
    """Runs the lab; returns every number (report.py writes them out)."""
    data = corpus_module.load(lab.corpus)  # fails early, before any training
    lab.encodings = [e.name for e in encodings]
    shared = {"model": lab.model.as_dict(), "training": lab.training.as_dict(),
              "corpus": lab.corpus, "out": lab.out, "torch_steps": lab.torch_steps,
              "eval_windows": lab.eval_windows, "encodings": lab.encodings}
    results = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "commit": _commit(),
               "command": lab.command, "model": shared["model"], "training": shared["training"],
               "corpus": {"name": data.name, "licence": data.licence, "sha256": data.sha256,
                          "bytes": data.size, "test_bytes": 16 * lab.model.context *
                          lab.eval_windows},
               "multiples": list(MULTIPLES), "reference": lab.reference, "encodings": {}}
    for encoding in encodings:
        if not encoding.trains:
            continue
        trained = _spawn("pejit", shared, encoding.name)
        evaluations = trained.pop("evaluations")
        torch_run = _spawn("torch-full" if encoding.name == lab.reference else "torch",
                           shared, encoding.name)
        for variant, ppl in evaluations.items():
            entry = {"label": ENCODINGS[variant].label, "evaluations": ppl,
                     "trained_as": encoding.name}
            if variant == encoding.name:
                entry.update(trained)
                entry["torch"] = torch_run
            results["encodings"][variant] = entry
    return results
