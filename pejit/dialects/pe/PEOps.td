#ifndef PEJIT_PE_OPS_TD
#define PEJIT_PE_OPS_TD

include "pejit/dialects/pe/PEAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Position ids: i32 or i64; the ranks allowed depend on the op (verifier).
// Position ids are checked by the verifiers (i32 or i64, rank per op) so the
// message can name the operand.
def PE_PositionTensor : RankedTensorOf<[AnyType]>;
def PE_FloatTensor : RankedTensorOf<[AnyFloat]>;

class PE_EncodingOp<string mnemonic, list<Trait> traits = [],
                    list<string> overrides = []>
    : PE_Op<mnemonic, !listconcat(traits,
        [Pure, DeclareOpInterfaceMethods<PE_PositionalEncodingOpInterface,
                                         overrides>])> {
  let hasVerifier = 1;
}

def PE_RopeOp : PE_EncodingOp<"rope", [AllTypesMatch<["input", "result"]>],
                              ["getTransformedInput", "getPositionIds", "getEncodingOperands",
                               "getOperandRoleName", "isAdjoint", "makeAdjoint"]> {
  let summary = "rotate Q or K by position (RoPE)";
  let description = [{
    `input` is [b, h, s, d]; `positions` is [s] or [b, s] (or [A, s] /
    [A, b, s] with A = number of M-RoPE sections). Each channel pair (x_a, x_b)
    becomes (x_a cos - x_b sin, x_b cos + x_a sin) with angle = position *
    inv_freq[c], cos and sin scaled by the scaling's attention factor.

    With `runtime_scale = true` the positions are multiplied by `s`, the
    `scale(...)` operand (f32 [1], or [b] with [b, s] position ids), before
    the rotation: a runtime value (a learned or per-call scale), so a new
    s compiles nothing.

    `adjoint` (the backward of pe.rope, docs/backward.md): `input` is the
    gradient of a rotated tensor and the result the gradient of the tensor
    before the rotation, the transpose: (g_a cos + g_b sin,
    g_b cos - g_a sin), cos and sin as the forward's (with its attention
    factor). The derived backward of a standalone pe.rope is this op; it
    does not fuse into attn.attention.

    ```mlir
    %q_rot = pe.rope %q, %pos <layout = half, theta = 500000.0>
        : tensor<1x32x128x128xf32>, tensor<128xi32>
    %k_rot = pe.rope %k, %pos scale(%s : tensor<1xf32>)
        <layout = half, theta = 10000.0, runtime_scale = true>
        : tensor<1x8x128x128xf32>, tensor<128xi32>
    %dq = pe.rope adjoint %dq_rot, %pos <layout = half, theta = 500000.0>
        : tensor<1x32x128x128xf32>, tensor<128xi32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$input, PE_PositionTensor:$positions,
                       Optional<RankedTensorOf<[F32]>>:$position_scale,
                       PE_RopeAttr:$encoding, UnitAttr:$adjoint);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    (`adjoint` $adjoint^)? $input `,` $positions (`scale` `(` $position_scale^ `:` type($position_scale) `)`)?
    $encoding attr-dict `:` type($input) `,` type($positions)
  }];
}

def PE_AlibiOp : PE_EncodingOp<"alibi"> {
  let summary = "ALiBi score bias [1|b, h, sq, skv]";
  let description = [{
    ```mlir
    %bias = pe.alibi <num_heads = 12, form = causal> : tensor<1x12x128x128xf32>
    ```
  }];
  let arguments = (ins PE_AlibiAttr:$encoding);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = "$encoding attr-dict `:` type($result)";
}

def PE_T5BiasOp : PE_EncodingOp<"t5_bias", [], ["getEncodingOperands", "getOperandRoleName"]> {
  let summary = "T5 relative bias [1|b, h, sq, skv] from a [num_buckets, h] table";
  let description = [{
    ```mlir
    %bias = pe.t5_bias %table <num_buckets = 32, max_distance = 128>
        : tensor<32x8xf32> -> tensor<1x8x64x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$table, PE_T5BiasAttr:$encoding);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $table $encoding attr-dict `:` type($table) `->` type($result)
  }];
}

def PE_RelativeKeyOp : PE_EncodingOp<"relative_key", [],
                                     ["getEncodingOperands", "getOperandRoleName"]> {
  let summary = "Shaw key term [b, h, sq, skv] = q_i . a^K[clip(j - i) + k]";
  let description = [{
    `query` is [b, h, sq, d], `table` a^K is [2k+1, d] (shared by heads) or
    [h, 2k+1, d]. The result is added to q . k before the scale
    (attn.attention `key_term`). On its own it compiles to a kernel that
    writes the term (docs/standalone-kernels.md).

    ```mlir
    %t = pe.relative_key %q, %aK <clip = 4>
        : tensor<1x8x64x64xf32>, tensor<9x64xf32> -> tensor<1x8x64x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$query, PE_FloatTensor:$table,
                       PE_RelativeKeyAttr:$encoding);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $table $encoding attr-dict `:` type($query) `,` type($table)
    `->` type($result)
  }];
}

def PE_RelativeValueOp : PE_EncodingOp<"relative_value", [],
                                       ["getEncodingOperands", "getOperandRoleName"]> {
  let summary = "Shaw value term [sq, skv, dv] = a^V[clip(j - i) + k]";
  let description = [{
    `table` a^V is [2k+1, dv] (the result [sq, skv, dv]) or [h, 2k+1, dv]
    (the result [h, sq, skv, dv]). Attention adds sum_j p_ij * result[i, j,
    :] to its output (attn.attention `value_term`). On its own it compiles
    to a kernel that writes the term (docs/standalone-kernels.md).

    ```mlir
    %t = pe.relative_value %aV <clip = 4> : tensor<9x64xf32> -> tensor<64x64x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$table, PE_RelativeValueAttr:$encoding);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $table $encoding attr-dict `:` type($table) `->` type($result)
  }];
}

def PE_SinusoidalOp : PE_EncodingOp<"sinusoidal", [AllTypesMatch<["input", "result"]>],
                                    ["getPositionIds", "getOperandRoleName"]> {
  let summary = "add the sinusoidal embedding to [b, s, d] embeddings";
  let description = [{
    PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)).

    ```mlir
    %e = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<2x16x64xf32>, tensor<16xi64>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$input, PE_PositionTensor:$positions,
                       PE_SinusoidalAttr:$encoding);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions $encoding attr-dict `:` type($input) `,` type($positions)
  }];
}

def PE_LearnedOp : PE_EncodingOp<"learned", [AllTypesMatch<["input", "result"]>],
                                 ["getPositionIds", "getEncodingOperands",
                                  "getOperandRoleName"]> {
  let summary = "add rows of a learned [max_positions, d] table to [b, s, d]";
  let description = [{
    ```mlir
    %e = pe.learned %x, %pos, %table <max_positions = 512>
        : tensor<2x16x64xf32>, tensor<16xi64>, tensor<512x64xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$input, PE_PositionTensor:$positions,
                       PE_FloatTensor:$table, PE_LearnedAttr:$encoding);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions `,` $table $encoding attr-dict `:` type($input) `,`
    type($positions) `,` type($table)
  }];
}

def PE_EmbedOp : PE_Op<"embed", [Pure]> {
  let summary = "token embeddings: rows of a [vocab, d] table at token ids, scaled";
  let description = [{
    `out[b, t, :] = table[tokens[b, t], :] * scale`: the gather that starts
    every Transformer. Absolute position embeddings are the pe ops on its
    result (`pe.sinusoidal`, `pe.learned`, or both): a function of pe.embed
    and those ops compiles to one standalone kernel that gathers, scales
    and adds in one pass (docs/standalone-kernels.md). `scale` is 1 by
    default; sqrt(d) in the original Transformer and Gemma. tokens are i32
    or i64 [b, s]; a token outside [0, vocab) is an error at run.

    ```mlir
    %t = pe.embed %tokens, %table {scale = 27.7128} : tensor<?x?xi64>, tensor<32000x768xf32>
        -> tensor<?x?x768xf32>
    ```
  }];
  let arguments = (ins PE_PositionTensor:$tokens, PE_FloatTensor:$table,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $tokens `,` $table attr-dict `:` type($tokens) `,` type($table) `->` type($result)
  }];
  let hasVerifier = 1;
}

def PE_RopeScaleGradOp : PE_Op<"rope_scale_grad", [Pure, AllTypesMatch<["grad", "input"]>,
                                                    AllTypesMatch<["position_scale", "result"]>]> {
  let summary = "the position scale's gradient of a standalone pe.rope";
  let description = [{
    For `y = pe.rope %x, %positions scale(%s) <rope>` (runtime_scale) and
    the gradient `grad` of y: dL/ds, summed over the rows the scale rotates
    (a [1] scale: every row; [b] with [b, s] ids: batch row n's into entry
    n). With angle = (position * s) * inv_freq[c] and, per rotated pair
    (a, b) of frequency c, t_c = g_b y_a - g_a y_b:

      dL/ds = sum over rows and pairs of pos_axis(c) * inv_freq[c] * t_c

    (docs/backward.md, "Standalone kernels"). `grad` and `input` are the
    forward's [b, h, s, d] type; the result has the scale's type.

    ```mlir
    %ds = pe.rope_scale_grad %dy, %x, %pos scale(%s : tensor<1xf32>)
        <layout = half, theta = 10000.0, runtime_scale = true>
        : tensor<2x8x?x64xf32>, tensor<?xi64> -> tensor<1xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$grad, PE_FloatTensor:$input,
                       PE_PositionTensor:$positions, RankedTensorOf<[F32]>:$position_scale,
                       PE_RopeAttr:$encoding);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $grad `,` $input `,` $positions `scale` `(` $position_scale `:` type($position_scale) `)`
    $encoding attr-dict `:` type($input) `,` type($positions) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The float64 reference (ref::applyRopeBackward's scale gradient).
    bool evaluateReference(const ::pejit::ref::Tensor &grad, const ::pejit::ref::Tensor &input,
                           const ::pejit::ref::PositionIds &positions,
                           const ::pejit::ref::Tensor &scale, int64_t seqLen,
                           ::pejit::ref::Tensor &result, std::string &error);
  }];
}

def PE_EmbedGradOp : PE_Op<"embed_grad", [Pure]> {
  let summary = "a table's gradient: rows of dy summed by id (pe.embed's, pe.learned's backward)";
  let description = [{
    `out[v, :] = scale * sum over (b, t) with ids[b, t] = v of grad[b, t, :]`
    (ids [s] shared by the batch: ids[t]): nn.Embedding's backward, the
    gradient of a token table (pe.embed, `scale` its embed scale) or of a
    learned position table (pe.learned, scale 1). Rows no id reaches are 0.
    `grad` is [b, s, d] (f32, f16 or bf16), `ids` i32 or i64 [b, s] or [s];
    the result is the table's [rows, d], in f32 or grad's element type (a
    16-bit table's gradient is 16-bit, accumulated in f32). An id outside
    [0, rows) is an error at run naming it. Deterministic: each row sums
    its entries in ascending (b, t) order, in f32, then scales and rounds
    once (docs/backward.md).

    ```mlir
    %dtable = pe.embed_grad %dy, %tokens {scale = 27.7128}
        : tensor<?x?x768xf32>, tensor<?x?xi64> -> tensor<32000x768xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$grad, PE_PositionTensor:$ids,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids attr-dict `:` type($grad) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def PE_ScoreBiasGradOp : PE_Op<"score_bias_grad", [Pure]> {
  let summary = "a materialized score bias's table gradient from the bias's gradient";
  let description = [{
    The backward of a score-bias pe op written out on its own (a
    materialized `pe.t5_bias`, docs/backward.md): given dBias, the gradient
    of its output [1|b, h, sq, skv] (f32, f16 or bf16), and the op's own
    tensor (`operands(...)`, e.g. T5's [num_buckets, h] table), the result
    is that tensor's gradient (its shape, f32), by the encoding's score
    adjoint hook at every score. For T5:

    ```
    d table[n, h] = sum over (b, i, j) with bucket(j - i) = n of dBias[b, h, i, j]
    ```
    The encoding must depend on the distance j - i alone (isDistanceOnly:
    the kernel sums dBias along each diagonal first) and have one tensor
    with an adjoint. Deterministic: partial tables per work item, summed in
    item order in f64.

    ```mlir
    %dtable = pe.score_bias_grad %dbias operands(%table : tensor<32x8xf32>)
        encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128>)
        : tensor<1x8x?x?xf32> -> tensor<32x8xf32>
    ```
  }];
  let arguments = (ins PE_FloatTensor:$bias_grad, Variadic<PE_FloatTensor>:$encoding_operands,
                       AnyAttr:$encoding);
  let results = (outs PE_FloatTensor:$result);
  let assemblyFormat = [{
    $bias_grad (`operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    `encoding` `(` $encoding `)` attr-dict `:` type($bias_grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

include "pejit/dialects/pe/RelativeTermGrad.td"

#endif // PEJIT_PE_OPS_TD
