"""python -m pejit import-hf config.json [--layer N] [--stack encoder|decoder]
                                        [--dtype float32|float16|bfloat16]
python -m pejit diagnose config.json [--layer N] [--max-position N]
                                     [--dtype bfloat16] [--plot out.png]
python -m pejit diagnose CHECKPOINT.pt [--steps N]   (a lab checkpoint)
python -m pejit lab [--quick] ...                    (python -m pejit.lab --help)

import-hf prints the .mlir of the model's attention layer (pe + attn
dialects, `?` lengths), ready for `pejit compile` or pejit.compile.
diagnose prints a report on its positional encoding (pejit.diagnose), or
on a model the lab trained (pejit.lab.diagnose). lab runs the PE lab.
The `pejit` CLI runs both through this module.
"""
import argparse
import sys

from . import Error, from_hf_config


def main(argv=None, prog: str = "python -m pejit") -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["lab"]:
        from .lab.__main__ import main as lab_main
        return lab_main(argv[1:], prog=f"{prog} lab")
    parser = argparse.ArgumentParser(prog=prog)
    commands = parser.add_subparsers(dest="command", required=True)
    hf = commands.add_parser("import-hf", help="a model's attention from its HF config.json")
    hf.add_argument("config", help="config.json, or a model directory holding one")
    hf.add_argument("--layer", type=int, default=0)
    hf.add_argument("--stack", default=None, choices=["encoder", "decoder"],
                    help="T5: which self-attention (default encoder); only T5 has two")
    hf.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    diag = commands.add_parser("diagnose", help="a report on a model's positional encoding")
    diag.add_argument("config", help="config.json, a model directory holding one, or a lab "
                      "checkpoint (.pt)")
    diag.add_argument("--layer", type=int, default=0)
    diag.add_argument("--max-position", type=int, default=None,
                      help="the longest position (default: max_position_embeddings - 1)")
    diag.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    diag.add_argument("--plot", default=None, help="draw the frequencies into this PNG")
    diag.add_argument("--steps", type=int, default=1000,
                      help="a lab checkpoint: KV-cached decoding steps (default 1000)")
    args = parser.parse_args(argv)
    if args.command == "diagnose":
        return _diagnose(args)
    try:
        cfg = from_hf_config(args.config, layer=args.layer, stack=args.stack)
        text = cfg.source(dtype=args.dtype)
    except Error as e:
        print(f"pejit: error: {e}", file=sys.stderr)
        return 1
    header = [f"// {cfg.model_type}, layer {args.layer}: from {args.config} (pejit import-hf)"]
    header += [f"// note: {note}" for note in cfg.notes]
    print("\n".join(header))
    print(text, end="")
    return 0


def _diagnose(args) -> int:
    from .diagnose import diagnose
    if args.config.endswith(".pt"):
        return _diagnose_checkpoint(args)
    try:
        print(diagnose(args.config, args.layer, args.max_position, args.dtype, args.plot),
              end="")
    except Error as e:
        print(f"pejit: error: {e}", file=sys.stderr)
        return 1
    return 0


def _diagnose_checkpoint(args) -> int:
    try:
        from .lab.diagnose import diagnose_checkpoint
    except ImportError as e:
        print(f"pejit: error: a lab checkpoint needs torch ({e})", file=sys.stderr)
        return 1
    if args.steps <= 0:
        print(f"pejit: error: --steps: expected a positive count, got {args.steps}",
              file=sys.stderr)
        return 1
    try:
        print(diagnose_checkpoint(args.config, args.steps), end="")
    except (ValueError, RuntimeError) as e:
        print(f"pejit: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
