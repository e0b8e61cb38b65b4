// attn.attention_backward (docs/backward.md): the gradients of a fused
// attn.attention. Included by AttnOps.td (one dialect, one generated op
// list).
#ifndef PEJIT_ATTN_ATTENTION_BACKWARD_TD
#define PEJIT_ATTN_ATTENTION_BACKWARD_TD

def Attn_AttentionBackwardOp
    : Attn_Op<"attention_backward", [Pure, AttrSizedOperandSegments]> {
  let summary = "dq, dk, dv (and encoding operand gradients) of attn.attention";
  let description = [{
    The backward of the fused `attn.attention` with the same operands and
    attributes (mask, window, scale, softcap, `encodings`,
    `encoding_operands`): given its output `o` ([b, hq, sq, dv]) and the
    output's gradient `dO` (the same shape), the results are dq, dk and dv
    (the types of q, k and v), then one gradient per index in
    `grad_operands` (the encoding operands asked for, each of that
    operand's shape, f32). With P the forward's probabilities and s its
    final scores (FlashAttention-2's algorithm, docs/backward.md):

    ```
    D_i = sum_c dO_ic O_ic;    dP_ij = dO_i . v_j;    dS_ij = P_ij (dP_ij - D_i)
    dE_ij = scale * (1 - tanh^2(s'_ij / softcap)) * dS_ij   (no softcap: scale * dS_ij)
    dq_i = sum_j dE_ij k_j;    dk_j = sum_i dE_ij q_i;    dv_j = sum_i P_ij dO_i
    ```
    GQA sums dk and dv over each KV head's query heads. Masked keys and rows
    that see no key contribute nothing (zero gradients, never NaN).
    `segments(%cu_q, %cu_k)` and `key_lengths(%lens)` are the forward's
    packed sequences and per-row key lengths (each sequence or row is its
    own attention; keys past a row's length get zero gradients).
    `lse(%lse)` is the training forward's row log-sum-exp (f32 [b, hq, sq]);
    without it the kernel recomputes it. Users write the forward; the
    compiler derives this op (attn-derive-backward).

    ```mlir
    %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do causal
        : tensor<1x8x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>,
          tensor<1x8x64x64xf32>, tensor<1x8x64x64xf32>
        -> tensor<1x8x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>
    ```
  }];
  let arguments = (ins
    Attn_FloatTensor:$query, Attn_FloatTensor:$key, Attn_FloatTensor:$value,
    Attn_FloatTensor:$output, Attn_FloatTensor:$output_grad,
    Optional<TensorRankOf<[F32], [3]>>:$lse,
    Optional<AnyRankedTensor>:$query_positions,
    Optional<AnyRankedTensor>:$key_positions,
    Optional<TensorRankOf<[I32], [1]>>:$query_segments,
    Optional<TensorRankOf<[I32], [1]>>:$key_segments,
    Optional<TensorRankOf<[I32], [1]>>:$key_lengths,
    OptionalAttr<F64Attr>:$scale,
    UnitAttr:$causal,
    OptionalAttr<I64Attr>:$window,
    OptionalAttr<I64Attr>:$window_right,
    OptionalAttr<F64Attr>:$softcap,
    OptionalAttr<ArrayAttr>:$encodings,
    Variadic<Attn_FloatTensor>:$encoding_operands,
    OptionalAttr<DenseI64ArrayAttr>:$grad_operands);
  let results = (outs Attn_FloatTensor:$query_grad, Attn_FloatTensor:$key_grad,
                      Attn_FloatTensor:$value_grad,
                      Variadic<Attn_FloatTensor>:$operand_grads);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $output_grad
    (`lse` `(` $lse^ `:` type($lse) `)`)?
    (`query_positions` `(` $query_positions^ `:` type($query_positions) `)`)?
    (`key_positions` `(` $key_positions^ `:` type($key_positions) `)`)?
    (`segments` `(` $query_segments^ `,` $key_segments `:` type($query_segments) `,`
       type($key_segments) `)`)?
    (`key_lengths` `(` $key_lengths^ `:` type($key_lengths) `)`)?
    (`causal` $causal^)?
    (`window` `(` $window^ `)`)?
    (`window_right` `(` $window_right^ `)`)?
    (`softcap` `(` $softcap^ `)`)?
    (`scale` `(` $scale^ `)`)?
    (`encodings` `(` $encodings^ `)`)?
    (`encoding_operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    (`grad_operands` `(` $grad_operands^ `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,` type($output) `,`
    type($output_grad) `->` type($query_grad) `,` type($key_grad) `,` type($value_grad)
    (`,` type($operand_grads)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `scale` if given, else 1/sqrt(d).
    double getEffectiveScale();
    /// The fused QK transform among `encodings` (at most one), or null.
    ::pejit::pe::PositionalEncodingAttrInterface getFusedQKTransform();
    /// The encoding that reads encoding operand `index`, and the operand's
    /// index among that encoding's own (null when out of range).
    std::pair<::pejit::pe::PositionalEncodingAttrInterface, unsigned>
    encodingOfOperand(unsigned index);
  }];
}

#endif // PEJIT_ATTN_ATTENTION_BACKWARD_TD
