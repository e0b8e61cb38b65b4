"""The lab's positional encodings: one entry per model the lab trains, and
the RoPE scalings it applies to a trained RoPE model at evaluation only.

An entry says where position enters the model: added to the token
embeddings (`absolute`), inside the attention (`attention`), or both (the
hybrid). model.py builds the layers from these fields alone."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Encoding:
    name: str
    label: str  # the table's row name
    absolute: Optional[str] = None  # "sinusoidal" | "learned" at the input
    attention: str = "plain"  # plain | rope | rope_scale | alibi | t5 | shaw | linear
    linear_placement: Optional[str] = None  # linear attention's rope_placement
    # Evaluation-time RoPE scaling of a trained RoPE model: (pejit scaling
    # name, the model it is applied to); factor = evaluation / training length.
    eval_scaling: Optional[Tuple[str, str]] = None

    @property
    def trains(self) -> bool:
        return self.eval_scaling is None

    @property
    def rope(self) -> bool:
        return self.attention in ("rope", "rope_scale", "linear")


ENCODINGS: Dict[str, Encoding] = {e.name: e for e in (
    Encoding("nope", "NoPE (none)"),
    Encoding("sinusoidal", "sinusoidal (absolute)", absolute="sinusoidal"),
    Encoding("learned", "learned (absolute)", absolute="learned"),
    Encoding("t5", "T5 relative buckets", attention="t5"),
    Encoding("shaw", "Shaw relative (k = 16)", attention="shaw"),
    Encoding("rope", "RoPE", attention="rope"),
    Encoding("rope_linear", "RoPE + linear scaling at eval", attention="rope",
             eval_scaling=("linear", "rope")),
    Encoding("rope_ntk", "RoPE + NTK scaling at eval", attention="rope",
             eval_scaling=("ntk", "rope")),
    Encoding("rope_yarn", "RoPE + YaRN at eval", attention="rope",
             eval_scaling=("yarn", "rope")),
    Encoding("alibi", "ALiBi", attention="alibi"),
    Encoding("hybrid", "learned + RoPE (hybrid)", absolute="learned", attention="rope"),
    Encoding("rope_scale", "RoPE, learned position scale", attention="rope_scale"),
    Encoding("linear_rope", "linear attention, RoPE before φ", attention="linear",
             linear_placement="rope_before_feature_map"),
    Encoding("linear_rope_numerator", "linear attention, RoPE on numerator",
             attention="linear", linear_placement="rope_on_numerator"),
)}

# --quick's subset: one of each mechanism (absolute, relative table, bias,
# rotation, eval-time scaling, linear attention).
QUICK = ("nope", "sinusoidal", "learned", "t5", "shaw", "rope", "rope_yarn", "alibi",
         "rope_scale", "linear_rope")


def parse(names: str):
    """The encodings a comma-separated list names ("all" for every one), in
    the registry's order; an evaluation-only variant brings the model it is
    applied to. Unknown names are an error naming them."""
    if names == "all":
        wanted = list(ENCODINGS)
    elif names == "quick":
        wanted = list(QUICK)
    else:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in ENCODINGS]
    if unknown:
        raise ValueError(f"--encodings: unknown encoding '{unknown[0]}' (one of "
                         f"{', '.join(ENCODINGS)}, or all, quick)")
    for n in list(wanted):
        scaling = ENCODINGS[n].eval_scaling
        if scaling and scaling[1] not in wanted:
            wanted.append(scaling[1])
    return [ENCODINGS[n] for n in ENCODINGS if n in wanted]


def rope_config(encoding: Encoding, eval_length: int, train_length: int, theta: float) -> dict:
    """pejit's rope option for `encoding` at an evaluation length: plain
    RoPE, or its evaluation-time scaling with factor eval / train length (no
    scaling at or below the training length)."""
    config = {"theta": theta}
    factor = eval_length / train_length
    if encoding.eval_scaling and factor > 1:
        config["scaling"] = encoding.eval_scaling[0]
        config["factor"] = factor
        if encoding.eval_scaling[0] == "yarn":
            config["original_max_position"] = train_length
    return config
