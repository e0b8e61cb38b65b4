#ifndef PEJIT_PE_ATTRS_TD
#define PEJIT_PE_ATTRS_TD

include "pejit/dialects/pe/PEDialect.td"
include "pejit/dialects/pe/PEInterfaces.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def PE_RopeLayout : I32EnumAttr<"RopeLayout", "which channels RoPE pairs", [
    I32EnumAttrCase<"Half", 0, "half">,
    I32EnumAttrCase<"Interleaved", 1, "interleaved">]> {
  let cppNamespace = "::pejit::pe";
  let genSpecializedAttr = 0;
}

def PE_RopeSides : I32EnumAttr<"RopeSides", "which of Q and K a fused RoPE rotates", [
    I32EnumAttrCase<"Both", 0, "both">,
    I32EnumAttrCase<"Query", 1, "query">,
    I32EnumAttrCase<"Key", 2, "key">]> {
  let cppNamespace = "::pejit::pe";
  let genSpecializedAttr = 0;
}

def PE_RelativeTo : I32EnumAttr<"RelativeTo", "what a score bias measures distance by", [
    I32EnumAttrCase<"Index", 0, "index">,
    I32EnumAttrCase<"Position", 1, "position">]> {
  let cppNamespace = "::pejit::pe";
  let genSpecializedAttr = 0;
}
def PE_RelativeToParameter
    : PE_DefaultEnumParameter<PE_RelativeTo, "::pejit::pe::RelativeTo::Index",
                              "distances by sequence index or by position id">;

def PE_AlibiForm : I32EnumAttr<"AlibiForm", "ALiBi distance form", [
    I32EnumAttrCase<"Causal", 0, "causal">,
    I32EnumAttrCase<"Symmetric", 1, "symmetric">,
    I32EnumAttrCase<"Bloom", 2, "bloom">]> {
  let cppNamespace = "::pejit::pe";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// RoPE scalings (HF transformers' rope utilities; docs/semantics.md "RoPE")
//===----------------------------------------------------------------------===//

class PE_ScalingAttr<string name, string mnemonic, list<string> overrides = []>
    : PE_Attr<name, mnemonic,
              [DeclareAttrInterfaceMethods<PE_RopeScalingAttrInterface, overrides>]> {
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def PE_LinearScalingAttr : PE_ScalingAttr<"LinearScaling", "linear"> {
  let summary = "position interpolation: inv_freq / factor";
  let parameters = (ins PE_F64Parameter<"interpolation factor">:$factor);
}

def PE_NtkScalingAttr : PE_ScalingAttr<"NtkScaling", "ntk", ["verifyRotaryDim"]> {
  let summary = "static NTK-aware: base = theta * factor^(rd / (rd - 2))";
  let parameters = (ins PE_F64Parameter<"context extension factor">:$factor);
}

def PE_DynamicNtkScalingAttr : PE_ScalingAttr<"DynamicNtkScaling", "dynamic_ntk",
                                                 ["verifyRotaryDim", "followsCallLength"]> {
  let summary = "dynamic NTK (HF _compute_dynamic_ntk_parameters)";
  let description = [{
    Stateless: seq_len = max(position) + 1 over the call. When seq_len >
    original_max_position, base = theta * ((factor * seq_len / original) -
    (factor - 1))^(rd / (rd - 2)); otherwise frequencies are unscaled.
  }];
  let parameters = (ins PE_F64Parameter<"scaling factor">:$factor,
                        "int64_t":$original_max_position);
}

def PE_YarnScalingAttr : PE_ScalingAttr<"YarnScaling", "yarn"> {
  let summary = "YaRN (HF _compute_yarn_parameters)";
  let description = [{
    Blends interpolated (inv_freq / factor) and extrapolated frequencies with a
    linear ramp over the correction range derived from beta_fast/beta_slow and
    original_max_position (floor/ceil of the range when `truncate`). cos and
    sin of rotated channels are multiplied by the attention factor:
    `attention_factor` if given, else get_mscale(factor, mscale) /
    get_mscale(factor, mscale_all_dim) when both are given, else
    get_mscale(factor), where get_mscale(s, m) = 0.1 m ln(s) + 1 (1 if s <= 1).
  }];
  let parameters = (ins
    PE_F64Parameter<"scaling factor">:$factor,
    "int64_t":$original_max_position,
    PE_DefaultF64Parameter<"fast rotation boundary", "32.0">:$beta_fast,
    PE_DefaultF64Parameter<"slow rotation boundary", "1.0">:$beta_slow,
    PE_OptionalF64Parameter<"mscale">:$mscale,
    PE_OptionalF64Parameter<"mscale_all_dim">:$mscale_all_dim,
    PE_OptionalF64Parameter<"explicit attention factor">:$attention_factor,
    PE_BoolParameter<"floor/ceil the correction range", "true">:$truncate);
}

def PE_Llama3ScalingAttr : PE_ScalingAttr<"Llama3Scaling", "llama3"> {
  let summary = "Llama 3.1 (HF _compute_llama3_parameters)";
  let description = [{
    Wavelengths longer than original_max_position / low_freq_factor are
    divided by factor, shorter than original_max_position / high_freq_factor
    are kept, and the ones between are interpolated smoothly.
  }];
  let parameters = (ins
    PE_F64Parameter<"scaling factor">:$factor,
    PE_F64Parameter<"low frequency factor">:$low_freq_factor,
    PE_F64Parameter<"high frequency factor">:$high_freq_factor,
    "int64_t":$original_max_position);
}

def PE_LongRopeScalingAttr : PE_ScalingAttr<"LongRopeScaling", "longrope",
                                             ["verifyRotaryDim", "followsCallLength"]> {
  let summary = "LongRoPE / Phi-3 (HF _compute_longrope_parameters)";
  let description = [{
    inv_freq[c] = 1 / (ext[c] * theta^(2c/rd)) with ext = long_factor when
    max(position) + 1 > original_max_position, else short_factor. cos and sin
    are multiplied by `attention_factor` if given, else
    sqrt(1 + ln(factor) / ln(original_max_position)) (1 when factor <= 1).
  }];
  let parameters = (ins
    PE_F64ArrayParameter<"per-frequency factors for short contexts">:$short_factor,
    PE_F64ArrayParameter<"per-frequency factors for long contexts">:$long_factor,
    "int64_t":$original_max_position,
    PE_DefaultF64Parameter<"context extension factor", "1.0">:$factor,
    PE_OptionalF64Parameter<"explicit attention factor">:$attention_factor);
}

//===----------------------------------------------------------------------===//
// Positional encodings
//===----------------------------------------------------------------------===//

class PE_EncodingAttr<string name, string mnemonic, list<string> overrides = []>
    : PE_Attr<name, mnemonic,
              [DeclareAttrInterfaceMethods<PE_PositionalEncodingAttrInterface,
                                           overrides>]> {
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def PE_RopeAttr : PE_EncodingAttr<"Rope", "rope", ["verifyForAttention", "isFusable",
    "getScratchFloatsPerPosition", "emitQKPrologue", "emitQKTileTransform",
    "hasQKTransformAdjoint", "emitQKTileTransformAdjoint", "emitQKTransformOperandAdjoint",
    "hasOperandAdjoint", "applyReferenceQKTransform",
    "transformsQuery", "transformsKey", "onOneSide",
    "getPositionAxes", "hasStandaloneKernel", "getNumEncodingOperands", "getEncodingOperandName", "isDifferentiableOperand",
    "verifyEncodingOperand"]> {
  let summary = "rotary position embedding (Su et al. 2021)";
  let description = [{
    Rotates channel pairs by angle = position * inv_freq[c], inv_freq[c] =
    1 / theta^(2c / rotary_dim), c in [0, rotary_dim/2). `half` pairs c with
    c + rotary_dim/2 (NeoX/LLaMA rotate_half); `interleaved` pairs 2c with 2c+1
    (GPT-J/RoFormer). Channels >= rotary_dim pass through; rotary_dim defaults
    to the head dim. `sections` (M-RoPE, Qwen2-VL) splits the frequency
    indices into consecutive groups, group a using position ids of axis a;
    its entries sum to rotary_dim/2. `interleaved_sections = true`
    (Qwen3-VL, three sections [t, h, w]) assigns them round robin instead:
    index c takes axis 1 if c % 3 = 1 and c < 3 h, axis 2 if c % 3 = 2 and
    c < 3 w, else axis 0. `axial = true` (2-D axial RoPE, SAM 2) takes [2, s]
    positions (x, y): rotary_dim/4 frequencies per axis, inv_freq[i] =
    1 / theta^(4i / rotary_dim); the first rotary_dim/4 channel pairs rotate
    by x, the next by y. It takes no scaling and no sections.

    `apply_to` (fused form only): `both` (the default) rotates Q and K;
    `query` or `key` rotates one side, the other being already rotated
    (e.g. a KV cache written with RoPE applied). Fusion sets it when only
    one of Q and K comes from a pe.rope. A scaling whose frequencies follow
    the call's length (dynamic_ntk, longrope) takes only `both`: a side
    rotated in an earlier, shorter call used other frequencies.

    `runtime_scale = true` multiplies every position by a runtime f32 s
    before the rotation: angle = (position * s) * inv_freq. s is the
    encoding's one operand (`rope_position_scale`), [1] or [b] (per batch
    row, with [b, s] position ids); the cos/sin tables are recomputed each
    call, so a new s compiles nothing. A scaling whose frequencies follow
    the call's length (dynamic_ntk, longrope) does not take it.

    `learned_inv_freq = true` (fused form only) reads the rotary_dim/2
    inverse frequencies from an operand (`rope_inv_freq`, f32, after the
    operand `rope_position_scale` if any) instead of computing them from
    theta and the scaling, so that training can move them (seed 001 §8,
    "learnable frequencies"); the scaling's attention factor still applies.
    Not with dynamic_ntk or longrope (their frequencies follow the call).
  }];
  let parameters = (ins
    EnumParameter<PE_RopeLayout>:$layout,
    PE_F64Parameter<"frequency base">:$theta,
    OptionalParameter<"std::optional<int64_t>", "rotated channels">:$rotary_dim,
    OptionalParameter<"::pejit::pe::RopeScalingAttrInterface",
                      "frequency scaling">:$scaling,
    PE_OptionalI64ArrayParameter<"M-RoPE sections">:$sections,
    PE_BoolParameter<"Qwen3-VL interleaved sections", "false">:$interleaved_sections,
    PE_BoolParameter<"2-D axial RoPE, [2, s] positions", "false">:$axial,
    PE_DefaultEnumParameter<PE_RopeSides, "::pejit::pe::RopeSides::Both",
                            "sides a fused RoPE rotates">:$apply_to,
    PE_BoolParameter<"positions times a runtime f32 scale", "false">:$runtime_scale,
    PE_BoolParameter<"inverse frequencies from the operand rope_inv_freq", "false">:$learned_inv_freq);
  let extraClassDeclaration = [{
    /// Where the operands rope_position_scale and rope_inv_freq are among
    /// the encoding's own (none: not an operand of this RoPE).
    std::optional<unsigned> scaleOperand() const;
    std::optional<unsigned> invFreqOperand() const;
  }];
}

def PE_AlibiAttr : PE_EncodingAttr<"Alibi", "alibi", ["verifyForAttention", "isFusable",
    "emitScoreMod", "referenceScoreBias", "readsPositions", "isDistanceOnly",
    "getNumEncodingOperands", "getEncodingOperandName", "isDifferentiableOperand",
    "hasOperandAdjoint", "emitScoreModAdjoint", "verifyEncodingOperand"]> {
  let summary = "attention with linear biases (Press et al. 2022)";
  let description = [{
    bias(h, i, j) = -slope[head_offset + h] * d with d = (i + skv - sq) - j
    (causal) or |i + skv - sq - j| (symmetric); `bloom` is BLOOM's
    +slope * j (the causal form plus a constant per row, so attention is
    the same; only the materialized bias differs). Slopes follow the paper's
    get_slopes(num_heads) over the full head count (non-powers of two
    included) unless `slopes` lists them.
    `relative_to = position` (fused form only) measures the distance by the
    attention's position ids instead, key_pos[j] - query_pos[i] (packed or
    left-padded batches, HF position_ids); the default is the index.
    `learned_slopes = true` (fused form only) reads this attention's hq
    slopes from its encoding operand `alibi_slopes` (f32 [hq], head h's at
    h) instead of constants, so that they can be trained: the backward
    gives d slope_h = sum of dS times the form's distance (docs/backward.md).
  }];
  let parameters = (ins
    "int64_t":$num_heads,
    DefaultValuedParameter<"int64_t", "0", "first head of this shard">:$head_offset,
    EnumParameter<PE_AlibiForm>:$form,
    PE_OptionalF64ArrayParameter<"explicit slopes, one per head">:$slopes,
    PE_RelativeToParameter:$relative_to,
    DefaultValuedParameter<"bool", "false", "slopes from the operand alibi_slopes">:$learned_slopes);
}

def PE_T5BiasAttr : PE_EncodingAttr<"T5Bias", "t5_bias", ["isFusable", "readsPositions",
    "isDistanceOnly",
    "getNumEncodingOperands", "getEncodingOperandName", "isDifferentiableOperand", "hasOperandAdjoint", "emitScoreModAdjoint", "verifyEncodingOperand",
    "getQueryTileScratchFloats", "emitQueryTilePrologue", "emitScoreMod",
    "referenceScoreBias", "referenceScoreBiasGradient"]> {
  let summary = "T5 bucketed relative position bias (Raffel et al. 2020)";
  let description = [{
    bias(h, i, j) = table[bucket(j - (i + skv - sq)), h], with T5's
    _relative_position_bucket: `bidirectional` halves the buckets by the sign
    of the relative position; causal (bidirectional = false) maps every
    future key to bucket 0 before the mask. Of the buckets per sign, the
    first half are exact distances and the rest grow logarithmically up to
    max_distance (truncated toward zero, as T5's .to(long)); farther
    distances share the last bucket. The learned table is [num_buckets, hq]
    (HF's relative_attention_bias.weight) and is the fused attention's one
    encoding operand. T5 models use scale 1.0.
    `relative_to = position` (fused form only) measures the distance by the
    attention's position ids instead, key_pos[j] - query_pos[i] (packed or
    left-padded batches, HF position_ids); the default is the index.
  }];
  let parameters = (ins "int64_t":$num_buckets, "int64_t":$max_distance,
                        PE_BoolParameter<"buckets on both signs", "true">:$bidirectional,
                        PE_RelativeToParameter:$relative_to);
}

def PE_BiasTensorAttr : PE_EncodingAttr<"BiasTensor", "bias_tensor", ["isFusable",
    "getNumEncodingOperands", "getEncodingOperandName", "isDifferentiableOperand", "verifyEncodingOperand",
    "emitScoreMod", "referenceScoreBias", "hasOperandAdjoint", "hasScoreShapedGradient"]> {
  let summary = "a user's additive bias or mask tensor, read by the kernel";
  let description = [{
    bias(b, h, i, j) = bias_tensor[b or 0, h or 0, i, j]: the attention's one
    encoding operand, [1|b, 1|hq, sq, skv] (a dimension of 1 is shared),
    added where docs/semantics.md adds score biases. -inf masks keys; a row
    that sees no key outputs zeros. This is the general fallback: fusion
    turns an attn.attention `bias` operand that no fusable encoding
    produces into this encoding, so any bias runs in the fused kernel, at
    the cost of reading it.
  }];
  // No parameters: the mnemonic alone (#pe.bias_tensor).
  let assemblyFormat = ?;
}

def PE_RelativeKeyAttr : PE_EncodingAttr<"RelativeKey", "relative_key", ["isFusable",
    "readsPositions",
    "getNumEncodingOperands", "getEncodingOperandName", "isDifferentiableOperand", "verifyEncodingOperand", "isKeyTerm",
    "requiresQueryTileScratch", "getQueryTileScratchFloats", "emitQueryTilePrologue",
    "emitScoreMod", "referenceKeyTerm", "getKeyTermBuckets", "emitKeyTermBucket",
    "emitKeyTermRow", "emitTermRowAdjoint", "hasOperandAdjoint"]> {
  let summary = "Shaw et al. 2018 key term q_i . a^K[clip(j - i) + k]";
  let description = [{
    e_ij = scale * (q_i . k_j + q_i . a^K[rel + k]), rel = clip(j - (i + skv -
    sq), -k, k), with a^K [2k+1, d] shared by the heads (the fused
    attention's encoding operand). Fused on x86: once per query tile the
    kernel forms Q_tile . a^K^T ([rows, 2k+1]) and each score reads its
    entry; the term enters before the softcap, as the scale does.
    `relative_to = position` (fused form only) measures the distance by the
    attention's position ids instead, key_pos[j] - query_pos[i] (packed or
    left-padded batches, HF position_ids); the default is the index.
  }];
  let parameters = (ins "int64_t":$clip, PE_RelativeToParameter:$relative_to);
}

def PE_RelativeValueAttr : PE_EncodingAttr<"RelativeValue", "relative_value", ["isFusable",
    "readsPositions",
    "getNumEncodingOperands", "getEncodingOperandName", "isDifferentiableOperand", "verifyEncodingOperand",
    "getValueTermBuckets", "emitValueTermBucket", "emitValueTermRow", "referenceValueTerm",
    "emitTermRowAdjoint", "hasOperandAdjoint"]> {
  let summary = "Shaw et al. 2018 value term sum_j p_ij a^V[clip(j - i) + k]";
  let description = [{
    z_i = sum_j p_ij (v_j + a^V[rel + k]), rel = clip(j - (i + skv - sq), -k,
    k), with a^V [2k+1, dv] shared by the heads (the fused attention's
    encoding operand). Fused on x86 as a value term with 2k+1 buckets: the
    kernel sums each row's probabilities per bucket, rescaled by the online
    softmax as the output is, and adds sum_m acc[m] a^V[m] once per query
    tile, so no [sq, skv, dv] tensor exists.
    `relative_to = position` (fused form only) measures the distance by the
    attention's position ids instead, key_pos[j] - query_pos[i] (packed or
    left-padded batches, HF position_ids); the default is the index.
  }];
  let parameters = (ins "int64_t":$clip, PE_RelativeToParameter:$relative_to);
}

def PE_SinusoidalAttr : PE_EncodingAttr<"Sinusoidal", "sinusoidal", ["hasStandaloneKernel",
    "getScratchFloatsPerPosition", "transformsKey", "emitQKPrologue", "emitQKTileTransform"]> {
  let summary = "absolute sinusoidal embedding (Vaswani et al. 2017)";
  let parameters = (ins PE_DefaultF64Parameter<"frequency base", "10000.0">:$base);
}

def PE_LearnedAttr : PE_EncodingAttr<"Learned", "learned", ["hasStandaloneKernel",
    "getScratchFloatsPerPosition", "transformsKey", "emitQKPrologue", "emitQKTileTransform",
    "getNumEncodingOperands", "getEncodingOperandName", "isDifferentiableOperand", "getPositionLimit"]> {
  let summary = "learned absolute position embedding table";
  let parameters = (ins "int64_t":$max_positions);
}

#endif // PEJIT_PE_ATTRS_TD
