"""python -m pejit.lab [--quick] [--encodings all|quick|a,b,...] [--out DIR] ...

The PE lab (docs/lab.md): trains a small byte-level decoder per positional
encoding on the CPU through pejit's fused kernels, evaluates each at 1x to
16x its training length, and writes results.json, table.md and
perplexity.png into --out. `pejit lab` runs the same."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .encodings import parse
from .model import ModelConfig
from .run import LabConfig, run
from .train import TrainConfig

# --quick: a pipeline check that finishes in a few minutes, not a measurement.
QUICK_MODEL = dict(layers=2, d_model=64, heads=2, context=32)
QUICK_TRAINING = dict(steps=40, batch=8, warmup=5)


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[1])
    p.add_argument("--quick", action="store_true",
                   help="a small model, 10 encodings, 40 steps: checks the pipeline in minutes")
    p.add_argument("--encodings", default=None,
                   help="all (default), quick, or a comma-separated list")
    p.add_argument("--out", default="lab-out", help="where the outputs go (default lab-out)")
    p.add_argument("--corpus", default="kjv", help="kjv (default) or a file's bytes")
    p.add_argument("--layers", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--context", type=int, help="the training length (default 128)")
    p.add_argument("--steps", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--torch-steps", type=int, default=None,
                   help="plain-torch steps timed per encoding (default 20, quick 5)")
    p.add_argument("--reference", default="rope",
                   help="the encoding also trained fully in plain torch (default rope)")
    p.add_argument("--eval-windows", type=int, default=None,
                   help="test windows of 16x the training length (default 8, quick 2)")
    p.add_argument("--render", metavar="RESULTS.json", default=None,
                   help="train nothing: write table.md and perplexity.png again from a run's "
                   "results.json, into its folder")
    return p


def config_from(args, argv) -> LabConfig:
    model = ModelConfig(**(QUICK_MODEL if args.quick else {}))
    training = TrainConfig(**(QUICK_TRAINING if args.quick else {}))
    for name, target in (("layers", model), ("d_model", model), ("heads", model),
                         ("context", model), ("steps", training), ("batch", training),
                         ("lr", training), ("seed", training)):
        value = getattr(args, name)
        if value is not None:
            if value <= 0 and name != "seed":
                raise ValueError(f"--{name.replace('_', '-')}: expected a positive number, "
                                 f"got {value}")
            setattr(target, name, value)
    if model.d_model % model.heads or model.head_dim % 2:
        raise ValueError(f"--d-model, --heads: expected d_model a multiple of heads with an even "
                         f"head dim, got {model.d_model} and {model.heads}")
    if model.context % 2:
        raise ValueError(f"--context: expected an even length, got {model.context}")
    for name in ("torch_steps", "eval_windows"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ValueError(f"--{name.replace('_', '-')}: expected a positive count, got {value}")
    model.max_eval = 16 * model.context
    training.warmup = min(training.warmup, training.steps)
    return LabConfig(
        encodings=[], model=model, training=training, corpus=args.corpus, out=args.out,
        torch_steps=args.torch_steps or (5 if args.quick else 20), reference=args.reference,
        eval_windows=args.eval_windows or (2 if args.quick else 8),
        command=" ".join(["python -m pejit.lab"] + [shlex.quote(a) for a in argv]))


def main(argv=None, prog: str = "python -m pejit.lab") -> int:
    from .report import markdown, write
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(prog).parse_args(argv)
    if args.render:
        return _render(Path(args.render))
    try:
        lab = config_from(args, argv)
        encodings = parse(args.encodings or ("quick" if args.quick else "all"))
        if lab.reference not in [e.name for e in encodings if e.trains]:
            raise ValueError(f"--reference: '{lab.reference}' is not among the trained "
                             f"encodings")
        results = run(lab, encodings)
        paths = write(results, Path(lab.out))
    except (ValueError, RuntimeError) as e:
        print(f"pejit lab: error: {e}", file=sys.stderr)
        return 1
    print(markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _render(path: Path) -> int:
    import json
    from .report import markdown, write
    try:
        results = json.loads(path.read_text())
        paths = write(results, path.parent)
    except (OSError, ValueError, KeyError) as e:
        print(f"pejit lab: error: --render {path}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
