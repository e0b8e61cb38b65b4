"""The lab's outputs: results.json (every number), table.md (the seed's
§6.1 comparison, measured) and perplexity.png (perplexity against evaluation
length, one curve per encoding, the training length marked)."""
from __future__ import annotations

import json
from pathlib import Path

from .encodings import ENCODINGS


def _ppl(entry: dict, multiple: int, mode: str) -> float:
    # JSON turns the multiples into strings; results fresh from run() have ints.
    evaluations = entry["evaluations"]
    return (evaluations.get(multiple) or evaluations[str(multiple)])[mode]


def _ordered(results: dict):
    return [(name, results["encodings"][name]) for name in ENCODINGS
            if name in results["encodings"]]


def reference_agreement(results: dict) -> dict:
    """The reference encoding's pejit and plain-torch loss curves: the
    largest relative difference over the first 5 steps, and the mean
    absolute difference over the last tenth of training."""
    entry = results["encodings"].get(results["reference"])
    if not entry or "torch" not in entry or len(entry["torch"]["train"]["losses"]) < len(
            entry["train"]["losses"]):
        return {}
    a, b = entry["train"]["losses"], entry["torch"]["train"]["losses"]
    tail = max(1, len(a) // 10)
    return {"encoding": results["reference"],
            "first_steps_max_relative": max(abs(x - y) / abs(y) for x, y in zip(a[:5], b[:5])),
            "last_tenth_mean_abs": sum(abs(x - y) for x, y in zip(a[-tail:], b[-tail:])) / tail,
            "final_pejit": a[-1], "final_torch": b[-1]}


def table(results: dict) -> str:
    """The Markdown table: one row per encoding."""
    context = results["model"]["context"]
    lines = [f"| encoding | PE parameters | ppl at {context} (1x) | ppl 4x / 1x | ppl 16x / 1x "
             f"| sliding 16x / 1x | train bytes/s, pejit | torch | pejit / torch "
             f"| train memory MB, pejit | torch |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, entry in _ordered(results):
        base = _ppl(entry, 1, "nonoverlapping")
        sliding_base = _ppl(entry, 1, "sliding")
        cells = [entry["label"], "", f"{base:.3f}", f"{_ppl(entry, 4, 'nonoverlapping') / base:.2f}",
                 f"{_ppl(entry, 16, 'nonoverlapping') / base:.2f}",
                 f"{_ppl(entry, 16, 'sliding') / sliding_base:.2f}", "", "", "", "", ""]
        if "train" in entry:
            ours, theirs = entry["train"], entry["torch"]["train"]
            cells[1] = f"{entry['positional_parameters']:,}"
            cells[6] = f"{ours['tokens_per_s']:,.0f}"
            cells[7] = f"{theirs['tokens_per_s']:,.0f}"
            cells[8] = f"{ours['tokens_per_s'] / theirs['tokens_per_s']:.2f}x"
            cells[9] = f"{ours['train_memory_mb']:.0f}"
            cells[10] = f"{theirs['train_memory_mb']:.0f}"
        else:
            cells[1] = f"(the {entry['trained_as']} model)"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def perplexity_table(results: dict) -> str:
    """Every perplexity: both modes at every multiple."""
    multiples = results["multiples"]
    context = results["model"]["context"]
    head = " | ".join(f"{m * context}" for m in multiples)
    lines = [f"| encoding | mode | {head} |", "|---|---|" + "---:|" * len(multiples)]
    for name, entry in _ordered(results):
        for mode in ("nonoverlapping", "sliding"):
            values = " | ".join(f"{_ppl(entry, m, mode):.3f}" for m in multiples)
            lines.append(f"| {entry['label']} | {mode} | {values} |")
    return "\n".join(lines) + "\n"


def markdown(results: dict) -> str:
    m, t, c = results["machine"], results["training"], results["model"]
    agreement = reference_agreement(results)
    parts = [
        f"# pejit lab: train at {c['context']} bytes, evaluate to {16 * c['context']}\n",
        f"- command: `{results['command']}`",
        f"- machine: {m['cpu']} ({m['flags']}), {m['cores']} cores; torch {m['torch']}, "
        f"{m['torch_threads']} threads; date {results['date']}; commit {results['commit']}",
        f"- model: {c['layers']} layers, d_model {c['d_model']}, {c['heads']} heads, "
        f"byte vocabulary; {t['steps']} steps of {t['batch']} x {c['context']} bytes, "
        f"AdamW lr {t['lr']}, seed {t['seed']}",
        f"- corpus: {results['corpus']['name']} ({results['corpus']['bytes']:,} bytes; "
        f"{results['corpus']['licence']}); {results['corpus']['test_bytes']:,} test bytes, "
        f"the same for every encoding and length",
        "- perplexity is per byte; a ratio is perplexity at that length over "
        "perplexity at the training length (1.00: no loss from the longer context; "
        "below 1: the longer context helps)",
        "- bytes/s and memory: training, through pejit's kernels and through plain torch "
        "(SDPA, the encoding the HF way) in the same run; memory is the training process's "
        "peak RSS above its RSS before the first step",
        "", table(results), "", "Perplexity at each evaluation length:", "",
        perplexity_table(results)]
    if agreement:
        parts += ["", f"Reference ({agreement['encoding']}, the same model through pejit and "
                  f"plain torch, same initialisation and batches): first 5 steps' losses agree "
                  f"to {agreement['first_steps_max_relative']:.1e} (relative); the last tenth "
                  f"of training differs by {agreement['last_tenth_mean_abs']:.4f} nats on "
                  f"average (final {agreement['final_pejit']:.4f} against "
                  f"{agreement['final_torch']:.4f})."]
    return "\n".join(parts) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    context = results["model"]["context"]
    multiples = results["multiples"]
    lengths = [m * context for m in multiples]
    entries = _ordered(results)
    colours = plt.get_cmap("tab20")
    every = [_ppl(e, m, mode) for _, e in entries for m in multiples
             for mode in ("nonoverlapping", "sliding")]
    spread = max(every) / min(every)
    figure, axes = plt.subplots(1, 2, figsize=(14, 6.5), sharey=True)
    for axis, mode in zip(axes, ("nonoverlapping", "sliding")):
        for i, (name, entry) in enumerate(entries):
            values = [_ppl(entry, m, mode) for m in multiples]
            axis.plot(lengths, values, "--" if "train" not in entry else "-",
                      marker="os^vD<>p"[i % 8], color=colours(i % 20), label=entry["label"])
        axis.axvline(context, color="grey", linestyle=":", label=f"training length {context}")
        axis.set_xscale("log", base=2)
        axis.set_xticks(lengths, [str(n) for n in lengths])
        if spread > 4:  # a wide range reads better in log scale, with plain numbers
            axis.set_yscale("log")
            axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
            axis.yaxis.set_major_formatter(ScalarFormatter())
            axis.yaxis.set_minor_formatter(NullFormatter())
        axis.grid(True, which="major", alpha=0.3)
        axis.set_xlabel("evaluation length (bytes)")
        axis.set_title(f"{mode} windows")
    axes[0].set_ylabel("perplexity per byte" + (" (log scale)" if spread > 4 else ""))
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    figure.suptitle(f"pejit lab: {results['corpus']['name']}, trained at {context} bytes; "
                    f"{results['machine']['cpu']}, {results['date']}, {results['commit']}")
    figure.tight_layout(rect=(0, 0.13, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _replace(path: Path, text: str) -> None:
    """Writes `path` whole or not at all (a failed run leaves the old file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def write(results: dict, out: Path) -> dict:
    """Writes the three outputs into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "table": out / "table.md",
             "plot": out / "perplexity.png"}
    text = json.dumps(results, indent=1, allow_nan=True)
    json.loads(text)  # readable back
    _replace(paths["json"], text)
    _replace(paths["table"], markdown(results))
    partial = out / "perplexity.partial.png"
    plot(results, partial)
    partial.replace(paths["plot"])
    return paths
