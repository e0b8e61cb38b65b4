"""A model's attention from its HF config.json: from_hf_config.

Each supported family maps its config fields onto pejit's attention: the
RoPE convention and scaling, heads, head dims, windows, softcap, scale,
ALiBi or T5 buckets. A field pejit cannot honour is an Error naming it;
nothing is silently defaulted.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ._attention import AlibiConfig, T5Config, attention_source
from ._pejit import Error
from ._rope import RopeConfig


@dataclass(frozen=True)
class AttentionConfig:
    """One attention layer of a model, in pejit's terms."""
    model_type: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    value_dim: int
    rope: Optional[RopeConfig] = None
    alibi: Optional[AlibiConfig] = None
    t5: Optional[T5Config] = None
    causal: bool = True
    window: Optional[int] = None  # pejit's left window w: keys i - w .. i
    softcap: Optional[float] = None
    scale: Optional[float] = None  # None: 1/sqrt(head_dim)
    # BERT-style learned absolute positions: rows of the position table,
    # added to the embeddings (pe.learned / pe.embed), not in attention.
    learned_positions: Optional[int] = None
    notes: Tuple[str, ...] = field(default=())

    def attention_kwargs(self) -> Dict[str, Any]:
        """pejit.attention's keyword arguments for this layer."""
        if self.t5 is not None:
            raise Error(f"{self.model_type}: T5's bias reads its table; use source() "
                        "and pejit.compile")
        return {"rope": self.rope, "alibi": self.alibi, "causal": self.causal,
                "window": self.window, "softcap": self.softcap, "scale": self.scale}

    def source(self, batch: int = 1, dtype: str = "float32") -> str:
        """The layer's attention as MLIR (pe + attn dialects), lengths `?`."""
        q = (batch, self.num_heads, 1, self.head_dim)
        k = (batch, self.num_kv_heads, 1, self.head_dim)
        v = (batch, self.num_kv_heads, 1, self.value_dim)
        return attention_source(q, k, v, dtype, rope=self.rope, alibi=self.alibi,
                                t5=self.t5, causal=self.causal, window=self.window,
                                softcap=self.softcap, scale=self.scale)


def _load(config: Union[str, os.PathLike, Mapping[str, Any]]) -> Dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if not isinstance(config, (str, os.PathLike)):
        raise Error(f"config: expected a config.json path, a model directory or a dict, got "
                    f"{type(config).__name__}")
    path = os.fspath(config)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise Error(f"{path}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise Error(f"{path}: not JSON: {e}") from None


class _Fields:
    """A config's fields, read by name; `require` names a missing one."""

    def __init__(self, values: Mapping[str, Any], where: str):
        self.values, self.where = values, where

    def get(self, *names, default=None):
        for name in names:
            if self.values.get(name) is not None:
                return self.values[name]
        return default

    def require(self, *names):
        value = self.get(*names)
        if value is None:
            raise Error(f"{self.where}: field '{names[0]}' is missing")
        return value

    def number(self, *names, default=None) -> Optional[float]:
        """A real-number field (None when absent and no default)."""
        value = self.get(*names, default=default)
        if value is None:
            return None
        name = next((n for n in names if self.values.get(n) is not None), names[0])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Error(f"{self.where}: field '{name}' = {value!r} must be a number")
        return float(value)

    def mapping(self, *names) -> Dict[str, Any]:
        """A dict field ({} when absent)."""
        value = self.get(*names, default={}) or {}
        if not isinstance(value, Mapping):
            raise Error(f"{self.where}: field '{names[0]}' must be an object, got "
                        f"{type(value).__name__}")
        return dict(value)

    def count(self, *names, default=None) -> int:
        """A positive integer field (a head count, a size): 0, a negative,
        a bool or a non-integer is an Error naming the field."""
        value = self.get(*names) if default is not None else self.require(*names)
        if value is None:
            value = default
        name = next((n for n in names if self.values.get(n) is not None), names[0])
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise Error(f"{self.where}: field '{name}' = {value!r} must be a positive integer")
        return value


# rope_scaling keys each rope_type reads (besides rope_type/type/rope_theta).
_SCALING_KEYS = {
    "none": {"mrope_section", "mrope_interleaved"},
    "linear": {"factor"},
    "dynamic_ntk": {"factor", "original_max_position_embeddings"},
    "yarn": {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
             "mscale_all_dim", "attention_factor", "truncate"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings"},
    "longrope": {"short_factor", "long_factor", "factor", "original_max_position_embeddings",
                 "attention_factor"},
}
_ROPE_TYPES = {"default": "none", "mrope": "none", "linear": "linear", "dynamic": "dynamic_ntk",
               "yarn": "yarn", "llama3": "llama3", "longrope": "longrope", "su": "longrope"}


def _rope(f: _Fields, head_dim: int, *, theta_names=("rope_theta",), rotary_dim=0,
          interleaved=False) -> RopeConfig:
    scaling = f.mapping("rope_scaling", "rope_parameters")
    theta = scaling.pop("rope_theta", None) or f.number(*theta_names, default=10000.0)
    kind_name = scaling.pop("rope_type", None) or scaling.pop("type", None) or "default"
    scaling.pop("type", None)
    if kind_name not in _ROPE_TYPES:
        raise Error(f"{f.where}: rope_scaling.rope_type '{kind_name}' is not one pejit knows "
                    f"({', '.join(sorted(_ROPE_TYPES))})")
    kind = _ROPE_TYPES[kind_name]
    for key in scaling:
        if key not in _SCALING_KEYS[kind]:
            raise Error(f"{f.where}: rope_scaling.{key} is not a parameter pejit honours for "
                        f"rope_type '{kind_name}'")
    partial = f.get("partial_rotary_factor")
    if partial is not None and not rotary_dim:
        rotary_dim = int(head_dim * partial)
    kwargs: Dict[str, Any] = {"theta": float(theta), "rotary_dim": rotary_dim,
                              "interleaved": interleaved, "scaling": kind}
    if "mrope_section" in scaling:
        kwargs["sections"] = tuple(scaling["mrope_section"])
        kwargs["interleaved_sections"] = bool(scaling.get("mrope_interleaved", False))
    max_positions = f.get("max_position_embeddings")
    original = scaling.get("original_max_position_embeddings",
                           f.get("original_max_position_embeddings"))
    if kind in ("linear", "dynamic_ntk", "yarn", "llama3"):
        kwargs["factor"] = _real(f, scaling.get("factor") or 0.0, "rope_scaling.factor")
        if not kwargs["factor"]:
            raise Error(f"{f.where}: rope_scaling.factor is missing")
    if kind in ("dynamic_ntk", "yarn"):
        original = original or max_positions
    if kind in ("dynamic_ntk", "yarn", "llama3", "longrope"):
        if not original:
            raise Error(f"{f.where}: rope_scaling.original_max_position_embeddings is missing")
        kwargs["original_max_position"] = int(original)
    if kind == "yarn":
        for key in ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor"):
            if key in scaling:
                kwargs[key] = _real(f, scaling[key], "rope_scaling." + key)
        if "truncate" in scaling:
            kwargs["truncate"] = bool(scaling["truncate"])
    if kind == "llama3":
        for key in ("low_freq_factor", "high_freq_factor"):
            if key in scaling:
                kwargs[key] = _real(f, scaling[key], "rope_scaling." + key)
    if kind == "longrope":
        kwargs["short_factor"] = tuple(float(x) for x in scaling.get("short_factor") or ())
        kwargs["long_factor"] = tuple(float(x) for x in scaling.get("long_factor") or ())
        # One factor per rotated frequency: a list of another length is an
        # error here, not at compile.
        frequencies = (rotary_dim or head_dim) // 2
        for key in ("short_factor", "long_factor"):
            if len(kwargs[key]) != frequencies:
                raise Error(f"{f.where}: rope_scaling.{key} has {len(kwargs[key])} entries; "
                            f"longrope needs one per rotated frequency, {frequencies} "
                            f"(rotary dim {rotary_dim or head_dim} / 2)")
        # HF: without an explicit factor, the context extension ratio.
        factor = scaling.get("factor")
        if factor is None:
            if not max_positions:
                raise Error(f"{f.where}: max_position_embeddings is missing (longrope's factor)")
            factor = max_positions / int(original)
        kwargs["factor"] = float(factor)
        if "attention_factor" in scaling:
            kwargs["attention_factor"] = _real(f, scaling["attention_factor"],
                                               "rope_scaling.attention_factor")
    return RopeConfig(**kwargs)


def _decoder(f: _Fields, model_type: str, layer: int, **rope_kwargs) -> AttentionConfig:
    heads = f.count("num_attention_heads", "n_head")
    hidden = f.count("hidden_size", "n_embd", "d_model")
    head_dim = f.count("head_dim", default=hidden // heads)
    kv_heads = f.count("num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise Error(f"{f.where}: num_attention_heads = {heads} is not a multiple of "
                    f"num_key_value_heads = {kv_heads}")
    return AttentionConfig(model_type, heads, kv_heads, head_dim, head_dim,
                           rope=_rope(f, head_dim, **rope_kwargs))


def _sliding(f: _Fields, layer: int) -> Optional[int]:
    """HF's sliding window W (a query sees its last W keys, itself included)
    as pejit's left window w = W - 1, for layer `layer`."""
    window = f.get("sliding_window")
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise Error(f"{f.where}: sliding_window = {window!r} must be a positive integer (a query "
                    "sees its last sliding_window keys; null means no window)")
    layer_types = f.get("layer_types")
    if layer_types is not None:
        if layer >= len(layer_types):
            raise Error(f"{f.where}: layer {layer} is outside layer_types ({len(layer_types)})")
        return int(window) - 1 if layer_types[layer] == "sliding_attention" else None
    return int(window) - 1


def from_hf_config(config: Union[str, os.PathLike, Mapping[str, Any]], layer: int = 0,
                   stack: Optional[str] = None) -> AttentionConfig:
    """The attention of layer `layer` of the model whose config.json (a path,
    a model directory or a dict) is given. `stack`: T5's "encoder" or
    "decoder" self-attention. Raises pejit.Error naming a field pejit cannot
    honour, or a model type it does not know."""
    values = _load(config)
    if "text_config" in values and "num_attention_heads" not in values:
        values = {**values["text_config"], "model_type": values.get("model_type")}
    model_type = values.get("model_type")
    f = _Fields(values, f"config.json ({model_type})")
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
        raise Error(f"layer: expected a layer index >= 0, got {layer!r}")
    layers = f.get("num_hidden_layers", "n_layer", "num_layers")
    if isinstance(layers, int) and layer >= layers:
        raise Error(f"layer: {layer} is outside the model's {layers} layers [0, {layers})")
    if stack is not None and model_type != "t5":
        raise Error(f"stack: '{stack}' applies to T5 (an encoder and a decoder stack); "
                    f"{model_type} has one")
    if stack is None:
        stack = "encoder"
    if model_type in ("llama", "mistral", "mixtral", "qwen2", "qwen2_vl", "phi3"):
        cfg = _decoder(f, model_type, layer)
        window = _sliding(f, layer)
        if model_type in ("qwen2", "qwen2_vl") and f.get("layer_types") is None:
            # Qwen2: layers from max_window_layers on slide, only with use_sliding_window.
            window = None
            if f.get("use_sliding_window", default=False) and layer >= int(
                    f.get("max_window_layers", default=0)):
                window = f.count("sliding_window") - 1
        if model_type == "phi3" and window is not None:
            max_positions = f.get("max_position_embeddings", default=0)
            window = None if window + 1 >= max_positions else window
        return _replace(cfg, window=window)
    if model_type == "gemma2":
        cfg = _decoder(f, model_type, layer)
        window = _sliding(f, layer)
        if f.get("layer_types") is None:  # HF Gemma-2: even layers slide
            window = window if layer % 2 == 0 else None
        scalar = f.get("query_pre_attn_scalar")
        return _replace(cfg, window=window, softcap=f.number("attn_logit_softcapping"),
                        scale=None if scalar is None else _real(f, scalar,
                                                                "query_pre_attn_scalar") ** -0.5)
    if model_type == "gpt_neox":
        heads = f.count("num_attention_heads")
        head_dim = f.count("hidden_size") // heads
        rotary = int(head_dim * float(f.get("rotary_pct", default=1.0)))
        return AttentionConfig(model_type, heads, heads, head_dim, head_dim,
                               rope=_rope(f, head_dim, theta_names=("rotary_emb_base", "rope_theta"),
                                          rotary_dim=rotary))
    if model_type == "gptj":
        heads = f.count("n_head")
        head_dim = f.count("n_embd") // heads
        return AttentionConfig(model_type, heads, heads, head_dim, head_dim,
                               rope=_rope(f, head_dim, rotary_dim=int(f.get("rotary_dim") or 0),
                                          interleaved=True))
    if model_type in ("deepseek_v2", "deepseek_v3"):
        return _deepseek(f, model_type)
    if model_type == "bloom":
        heads = f.count("n_head", "num_attention_heads")
        head_dim = f.count("hidden_size", "n_embed") // heads
        return AttentionConfig(model_type, heads, heads, head_dim, head_dim,
                               alibi=AlibiConfig(num_heads=heads))
    if model_type == "mpt":
        return _mpt(f)
    if model_type == "t5":
        if stack not in ("encoder", "decoder"):
            raise Error(f"stack: expected 'encoder' or 'decoder', got '{stack}'")
        heads, d = f.count("num_heads"), f.count("d_kv")
        t5 = T5Config(f.count("relative_attention_num_buckets"),
                      int(f.get("relative_attention_max_distance", default=128)),
                      bidirectional=stack == "encoder")
        return AttentionConfig(model_type, heads, heads, d, d, t5=t5, causal=stack == "decoder",
                               scale=1.0)
    if model_type == "bert":
        kind = f.get("position_embedding_type", default="absolute")
        if kind != "absolute":
            raise Error(f"{f.where}: position_embedding_type '{kind}' is not supported "
                        "(pejit maps 'absolute')")
        heads = f.count("num_attention_heads")
        head_dim = f.count("hidden_size") // heads
        return AttentionConfig(model_type, heads, heads, head_dim, head_dim, causal=False,
                               learned_positions=f.count("max_position_embeddings"),
                               notes=("learned absolute positions: added to the embeddings "
                                      "(pe.learned), none in attention",))
    raise Error(f"config.json: model_type '{model_type}' is not one pejit maps (llama, mistral, "
                "mixtral, qwen2, qwen2_vl, phi3, gemma2, gpt_neox, gptj, deepseek_v2, "
                "deepseek_v3, bloom, mpt, t5, bert)")


def _real(f: _Fields, value, name: str) -> float:
    """A number read from the config, or an Error naming its field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Error(f"{f.where}: {name} = {value!r} must be a number")
    return float(value)


def _replace(cfg: AttentionConfig, **changes) -> AttentionConfig:
    return replace(cfg, **changes)


def _yarn_mscale(factor: float, mscale: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _deepseek(f: _Fields, model_type: str) -> AttentionConfig:
    heads = f.count("num_attention_heads")
    nope, rope_dim = f.count("qk_nope_head_dim"), f.count("qk_rope_head_dim")
    head_dim, value_dim = nope + rope_dim, f.count("v_head_dim")
    rope = _rope(f, head_dim, rotary_dim=rope_dim, interleaved=True)
    scale = head_dim ** -0.5
    if rope.scaling == "yarn" and rope.mscale_all_dim:
        scale *= _yarn_mscale(rope.factor, rope.mscale_all_dim) ** 2
    return AttentionConfig(
        model_type, heads, heads, head_dim, value_dim, rope=rope, scale=scale,
        notes=(f"MLA: pejit rotates the first {rope_dim} channels, so lay Q and K out as "
               f"[rope {rope_dim} | nope {nope}] (a dot product does not see the order)",
               "the yarn mscale_all_dim factor, squared, is folded into scale"))


def _mpt(f: _Fields) -> AttentionConfig:
    heads = f.count("n_heads")
    head_dim = f.count("d_model") // heads
    attn = f.mapping("attn_config")
    if not attn.get("alibi", False):
        raise Error(f"{f.where}: attn_config.alibi is false; MPT without ALiBi uses learned "
                    "positions, which pejit does not map")
    bias_max = attn.get("alibi_bias_max", 8)
    if bias_max != 8:
        raise Error(f"{f.where}: attn_config.alibi_bias_max = {bias_max}: pejit's slopes are "
                    "the ALiBi paper's (alibi_bias_max 8)")
    if heads & (heads - 1):
        raise Error(f"{f.where}: n_heads = {heads} is not a power of two: MPT then orders "
                    "its slopes differently from the ALiBi paper's, which pejit computes")
    scale = attn.get("softmax_scale")
    return AttentionConfig("mpt", heads, heads, head_dim, head_dim,
                           alibi=AlibiConfig(num_heads=heads),
                           scale=None if scale is None else float(scale))
