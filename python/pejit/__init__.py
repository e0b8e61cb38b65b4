"""pejit: JIT-compiled attention kernels with the positional encoding fused in.

    import numpy as np, pejit
    out = pejit.attention(q, k, v, rope={"rope_theta": 500000.0}, causal=True)

NumPy arrays and torch CPU tensors, float32, float16 and bfloat16. Every
error is a pejit.Error (a ValueError) carrying pejit's message. See
docs/python.md.
"""
from ._pejit import Error, host_target
from ._rope import RopeConfig
from ._attention import AlibiConfig, ShawConfig, T5Config, attention, attention_source
from ._backward import attention_backward
from ._kernel import Kernel, cache, compile, stats, tune
from ._standalone import (add_positions, embed, embedding_backward, rope, rope_backward,
                          rope_scale_gradient)
from ._linear import linear_attention, linear_attention_backward
from .hf import AttentionConfig, from_hf_config

Error.__module__ = "pejit"  # shown as pejit.Error in tracebacks

__version__ = "0.3.0"
__all__ = ["Error", "RopeConfig", "AlibiConfig", "T5Config", "ShawConfig", "AttentionConfig", "from_hf_config", "Kernel", "attention", "attention_source", "attention_backward",
           "compile", "tune", "stats", "cache", "host_target", "rope", "rope_backward", "rope_scale_gradient", "embed", "embedding_backward",
           "add_positions", "linear_attention", "linear_attention_backward"]
