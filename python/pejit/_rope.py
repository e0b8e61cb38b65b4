"""RopeConfig: the pe.rope attribute's parameters, with HF's names accepted."""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple

from . import _pejit
from ._pejit import Error

SCALINGS = ("none", "linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope")
# Scalings whose factor must be given: none is assumed (a missing factor
# would run unscaled, silently).
_NEEDS_FACTOR = ("linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope")
_LAYOUTS = {"half": False, "interleaved": True}

# HF config / rope_scaling names -> RopeConfig fields.
_HF_NAMES = {
    "rope_type": "scaling",
    "type": "scaling",
    "rope_theta": "theta",
    "base": "theta",
    "original_max_position_embeddings": "original_max_position",
    "mrope_section": "sections",
    "mrope_interleaved": "interleaved_sections",
    "rotary_dim": "rotary_dim",
}
# HF's rope_type values -> pejit's scaling names.
_HF_SCALINGS = {"default": "none", "dynamic": "dynamic_ntk", "su": "longrope", "mrope": "none"}


@dataclass(frozen=True)
class RopeConfig:
    """Rotary position embedding, as docs/semantics.md defines it.

    theta: the base. rotary_dim: rotated channels (0: the whole head);
    partial_rotary_factor: the same as a fraction of the head dim.
    interleaved: pairs (2c, 2c+1) (GPT-J) instead of (c, c + rd/2) (NeoX).
    scaling: one of SCALINGS, with its parameters below. sections: M-RoPE.
    """
    theta: float = 10000.0
    rotary_dim: int = 0
    partial_rotary_factor: Optional[float] = None
    interleaved: bool = False
    scaling: str = "none"
    factor: Optional[float] = None
    original_max_position: int = 0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: Optional[float] = None
    mscale_all_dim: Optional[float] = None
    attention_factor: Optional[float] = None
    truncate: bool = True
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    short_factor: Tuple[float, ...] = ()
    long_factor: Tuple[float, ...] = ()
    sections: Tuple[int, ...] = ()
    interleaved_sections: bool = False
    axial: bool = False

    def __post_init__(self):
        if not isinstance(self.scaling, str) or self.scaling not in SCALINGS:
            raise Error(f"rope: unknown scaling {self.scaling!r} (one of {', '.join(SCALINGS)})")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("short_factor", "long_factor", "sections"):
                if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                    raise Error(f"rope: {f.name} must be a list of numbers, got "
                                f"{type(value).__name__}")
                items = tuple(value)
                integral = f.name == "sections"
                for item in items:
                    _check_number(item, f"{f.name} entry", integral)
                object.__setattr__(self, f.name, items)
            elif f.name in ("interleaved", "truncate", "interleaved_sections", "axial"):
                if not isinstance(value, bool):
                    raise Error(f"rope: {f.name} must be True or False, got {value!r}")
            elif f.name in ("rotary_dim", "original_max_position"):
                _check_number(value, f.name, integral=True)
            elif f.name != "scaling" and value is not None:
                _check_number(value, f.name)
        if self.scaling in _NEEDS_FACTOR and self.factor is None:
            raise Error(f"rope: scaling '{self.scaling}' needs its factor (none given; it "
                        "would run unscaled)")
        if self.scaling == "none" and self.factor not in (None, 1, 1.0):
            raise Error(f"rope: factor = {self.factor} without a scaling: give scaling= too")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "RopeConfig":
        """From the dialect's names or HF's (rope_type, rope_theta, factor,
        original_max_position_embeddings, ...). An unknown key is an Error."""
        if not isinstance(values, Mapping):
            raise Error(f"rope: expected a dict, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} | {"layout"}
        kwargs = {}
        for key, value in values.items():
            name = _HF_NAMES.get(key, key)
            if name not in known:
                raise Error(f"rope: unknown field '{key}'")
            if key == "layout":
                if value not in _LAYOUTS:
                    raise Error(f"rope: layout {value!r} is not 'half' or 'interleaved'")
                name, value = "interleaved", _LAYOUTS[value]
            if name == "scaling":
                value = _HF_SCALINGS.get(value, value)
            if name in kwargs and kwargs[name] != value:
                raise Error(f"rope: '{key}' gives {name} twice, with different values")
            kwargs[name] = value
        return cls(**kwargs)

    def rotary_dim_for(self, head_dim: int) -> int:
        if self.partial_rotary_factor is not None:
            if self.rotary_dim:
                raise Error("rope: give rotary_dim or partial_rotary_factor, not both")
            return int(head_dim * self.partial_rotary_factor)
        return self.rotary_dim

    def native(self, head_dim: int) -> "_pejit.RopeConfig":
        """The C++ builder's RopeConfig for a head dim of `head_dim`."""
        config = _pejit.RopeConfig()
        config.theta = float(self.theta)
        config.rotary_dim = self.rotary_dim_for(head_dim)
        config.interleaved = self.interleaved
        config.sections = list(self.sections)
        config.interleaved_sections = self.interleaved_sections
        config.axial = self.axial
        s = _pejit.RopeScaling()
        s.kind = getattr(_pejit.RopeScalingKind, self.scaling)
        s.factor = 1.0 if self.factor is None else float(self.factor)
        s.original_max_position = int(self.original_max_position)
        s.beta_fast, s.beta_slow = float(self.beta_fast), float(self.beta_slow)
        s.mscale, s.mscale_all_dim = self.mscale, self.mscale_all_dim
        s.attention_factor = self.attention_factor
        s.truncate = self.truncate
        s.low_freq_factor = float(self.low_freq_factor)
        s.high_freq_factor = float(self.high_freq_factor)
        s.short_factor = [float(x) for x in self.short_factor]
        s.long_factor = [float(x) for x in self.long_factor]
        config.scaling = s
        return config

    def position_axes(self) -> int:
        """0 for 1-D RoPE; M-RoPE's and axial RoPE's ids have this many axes."""
        if self.axial:
            return 2
        return len(self.sections)


def _check_number(value, what: str, integral: bool = False) -> None:
    """A real number (an integer with `integral`); bools are not numbers
    here (True would read as 1 silently). Error names `what`."""
    kinds = (numbers.Integral,) if integral else (numbers.Real,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise Error(f"rope: {what} must be {'an integer' if integral else 'a number'}, got "
                    f"{value!r}")


def as_config(value, cls, what: str, from_mapping):
    """An encoding option as its config class: None or False is none, True
    the defaults, a `cls` itself, a mapping through `from_mapping`."""
    if value is None or value is False:
        return None
    if value is True:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        return from_mapping(value)
    raise Error(f"{what}: expected {cls.__name__}, a dict or True, got {type(value).__name__}")


def as_rope(rope) -> Optional[RopeConfig]:
    return as_config(rope, RopeConfig, "rope", RopeConfig.from_dict)
