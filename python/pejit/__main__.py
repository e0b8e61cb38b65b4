"""python -m pejit import-hf config.json [--layer N] [--stack encoder|decoder]
                                        [--dtype float32|float16|bfloat16]
python -m pejit diagnose config.json [--layer N] [--max-position N]
                                     [--dtype bfloat16] [--plot out.png]

import-hf prints the .mlir of the model's attention layer (pe + attn
dialects, `?` lengths), ready for `pejit compile` or pejit.compile.
diagnose prints a report on its positional encoding (pejit.diagnose).
The `pejit` CLI runs both through this module.
"""
import argparse
import sys

from . import Error, from_hf_config


def main(argv=None, prog: str = "python -m pejit") -> int:
    parser = argparse.ArgumentParser(prog=prog)
    commands = parser.add_subparsers(dest="command", required=True)
    hf = commands.add_parser("import-hf", help="a model's attention from its HF config.json")
    hf.add_argument("config", help="config.json, or a model directory holding one")
    hf.add_argument("--layer", type=int, default=0)
    hf.add_argument("--stack", default=None, choices=["encoder", "decoder"],
                    help="T5: which self-attention (default encoder); only T5 has two")
    hf.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    diag = commands.add_parser("diagnose", help="a report on a model's positional encoding")
    diag.add_argument("config", help="config.json, or a model directory holding one")
    diag.add_argument("--layer", type=int, default=0)
    diag.add_argument("--max-position", type=int, default=None,
                      help="the longest position (default: max_position_embeddings - 1)")
    diag.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    diag.add_argument("--plot", default=None, help="draw the frequencies into this PNG")
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
    try:
        print(diagnose(args.config, args.layer, args.max_position, args.dtype, args.plot),
              end="")
    except Error as e:
        print(f"pejit: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
