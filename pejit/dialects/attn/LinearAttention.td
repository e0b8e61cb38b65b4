// attn.linear_attention (docs/linear-attention.md): its feature maps, its
// RoPE placements, the op and its backward. Included by AttnOps.td (one dialect, one
// generated op list).
#ifndef PEJIT_ATTN_LINEAR_ATTENTION_TD
#define PEJIT_ATTN_LINEAR_ATTENTION_TD

def Attn_FeatureMap : I32EnumAttr<"FeatureMap", "linear attention's feature map", [
    I32EnumAttrCase<"EluPlusOne", 0, "elu_plus_one">,
    I32EnumAttrCase<"Relu", 1, "relu">,
    I32EnumAttrCase<"Identity", 2, "identity">,
    I32EnumAttrCase<"SoftmaxKeys", 3, "softmax_keys">]> {
  let cppNamespace = "::pejit::attn";
}

def Attn_RopePlacement : I32EnumAttr<"RopePlacement",
    "where linear attention's fused RoPE rotates", [
    I32EnumAttrCase<"BeforeFeatureMap", 0, "rope_before_feature_map">,
    I32EnumAttrCase<"OnNumerator", 1, "rope_on_numerator">]> {
  let cppNamespace = "::pejit::attn";
}

def Attn_LinearAttentionOp : Attn_Op<"linear_attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "phi(Q) (phi(K)^T V), normalised: attention in O(n) of the length";
  let description = [{
    Q is [b, hq, sq, d], K is [b, hkv, skv, d], V is [b, hkv, skv, dv], the
    result [b, hq, sq, dv]; hq is a multiple of hkv (query head h reads KV
    head h / (hq / hkv)). Key j is visible to query row i unless `causal`
    and j > i + skv - sq (bottom-right aligned, as attn.attention). With
    the feature map phi (`feature_map`):

    ```
    elu_plus_one: phi(x) = x + 1 if x > 0 else exp(x)   (Katharopoulos et al. 2020)
    relu:         phi(x) = max(x, 0)
    identity:     phi(x) = x
    out_i = sum_j (phi(q_i) . phi(k_j)) v_j / sum_j phi(q_i) . phi(k_j)   over visible j
    ```

    `identity` has no denominator: out_i = sum_j (q_i . k_j) v_j. A zero
    denominator gives a zero row (no epsilon), as does a row that sees no
    key. `softmax_keys` (the seed's code) softmaxes K over the visible keys
    per channel and uses Q as it is:
    out_i = sum_c q_ic sum_j softmax_j(k_jc) v_j; it has no denominator.

    A fused RoPE (`encodings([#pe.rope<...>])`, at `query_positions` and
    `key_positions`, defaults as attn.attention's) says where it rotates
    with `rope_placement`, required with it:
    - `rope_before_feature_map`: phi(R q), phi(R k) in numerator and
      denominator (the seed's code);
    - `rope_on_numerator` (RoFormer sec. 3.3): the numerator
      sum_j ((R_i phi(q_i)) . (R_j phi(k_j))) v_j, the denominator without
      rotation, so it stays positive.
    With `identity` the two are the same; `softmax_keys` has no
    denominator, so it takes only `rope_before_feature_map`. A RoPE that
    reads a tensor (`runtime_scale = true`) takes it from
    `encoding_operands(...)`, as attn.attention's.

    No scale: phi takes q and k as they are (fold one into Q or K).

    `state(%st)` carries the keys of earlier calls (decode, or a prefill in
    chunks): f32 [b, hq, d, dv + 2], per query head h, the summary of the
    keys before this call: [.., :dv] = S[c, e], [.., dv] = z[c], and for
    `softmax_keys` [.., dv + 1] = m[c], the running max S and z are
    relative to (S = sum_j w_jc v_j, z = sum_j w_jc with w_jc = phi(k~)_jc,
    or exp(k_jc - m_c)). Every row sees the state's keys before its own
    visible keys; the call then writes the state after all of its keys
    back into %st, in place. A zero tensor is the state of no keys. With a
    state, pass explicit position ids: the defaults restart at 0.

    ```mlir
    %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal
        encodings([#pe.rope<layout = half, theta = 10000.0>])
        rope_placement(rope_on_numerator)
        : tensor<1x8x1024x64xf32>, tensor<1x8x1024x64xf32>, tensor<1x8x1024x64xf32>
        -> tensor<1x8x1024x64xf32>
    ```
  }];
  let arguments = (ins
    Attn_FloatTensor:$query, Attn_FloatTensor:$key, Attn_FloatTensor:$value,
    Optional<AnyRankedTensor>:$query_positions,
    Optional<AnyRankedTensor>:$key_positions,
    Optional<Attn_FloatTensor>:$state,
    Variadic<Attn_FloatTensor>:$encoding_operands,
    Attn_FeatureMap:$feature_map,
    UnitAttr:$causal,
    OptionalAttr<ArrayAttr>:$encodings,
    OptionalAttr<Attn_RopePlacement>:$rope_placement);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `feature_map` `(` $feature_map `)`
    (`query_positions` `(` $query_positions^ `:` type($query_positions) `)`)?
    (`key_positions` `(` $key_positions^ `:` type($key_positions) `)`)?
    (`causal` $causal^)?
    (`state` `(` $state^ `:` type($state) `)`)?
    (`encodings` `(` $encodings^ `)`)?
    (`encoding_operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    (`rope_placement` `(` $rope_placement^ `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The fused RoPE (`encodings`, at most one QK transform), or null.
    ::pejit::pe::PositionalEncodingAttrInterface getFusedQKTransform();
  }];
}

def Attn_LinearAttentionBackwardOp
    : Attn_Op<"linear_attention_backward", [Pure, AttrSizedOperandSegments]> {
  let summary = "dq, dk, dv of attn.linear_attention";
  let description = [{
    The backward of `attn.linear_attention` with the same operands and
    attributes (feature map, causal, the fused RoPE and its placement):
    given the forward's output `o` and its gradient `dO` ([b, hq, sq, dv]
    both), the results are dq, dk and dv, the types of q, k and v
    (docs/backward.md, "Linear attention"). With q~ / k~ the numerator's
    feature rows, q^ / k^ the denominator's and S_i, z_i the state of the
    keys row i sees:

    ```
    g_i = dO_i / den_i       dden_i = -(g_i . o_i)    (identity: den 1, dden 0)
    dq~_i = S_i g_i          dq^_i = dden_i z_i
    dk~_j = sum_{i sees j} q~_i (g_i . v_j)    dk^_j = sum_{i sees j} dden_i q^_i
    dv_j  = sum_{i sees j} (q~_i . k~_j) g_i
    ```
    then the chain through the feature map's derivative and the RoPE's
    adjoint. `softmax_keys` differentiates K's per-channel softmax. GQA
    sums dk and dv over each KV head's query heads. A carried state has no
    backward: the forward must not take one. Users write the forward; the
    compiler derives this op (attn-derive-backward).

    ```mlir
    %dq, %dk, %dv = attn.linear_attention_backward %q, %k, %v, %o, %do
        feature_map(elu_plus_one) causal
        : tensor<1x4x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>,
          tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>
        -> tensor<1x4x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>
    ```
  }];
  let arguments = (ins
    Attn_FloatTensor:$query, Attn_FloatTensor:$key, Attn_FloatTensor:$value,
    Attn_FloatTensor:$output, Attn_FloatTensor:$output_grad,
    Optional<AnyRankedTensor>:$query_positions,
    Optional<AnyRankedTensor>:$key_positions,
    Variadic<Attn_FloatTensor>:$encoding_operands,
    Attn_FeatureMap:$feature_map,
    UnitAttr:$causal,
    OptionalAttr<ArrayAttr>:$encodings,
    OptionalAttr<Attn_RopePlacement>:$rope_placement);
  let results = (outs Attn_FloatTensor:$query_grad, Attn_FloatTensor:$key_grad,
                      Attn_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $output_grad
    `feature_map` `(` $feature_map `)`
    (`query_positions` `(` $query_positions^ `:` type($query_positions) `)`)?
    (`key_positions` `(` $key_positions^ `:` type($key_positions) `)`)?
    (`causal` $causal^)?
    (`encodings` `(` $encodings^ `)`)?
    (`encoding_operands` `(` $encoding_operands^ `:` type($encoding_operands) `)`)?
    (`rope_placement` `(` $rope_placement^ `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,` type($output) `,`
    type($output_grad) `->` type($query_grad) `,` type($key_grad) `,` type($value_grad)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The fused RoPE (`encodings`, at most one QK transform), or null.
    ::pejit::pe::PositionalEncodingAttrInterface getFusedQKTransform();
  }];
}

#endif // PEJIT_ATTN_LINEAR_ATTENTION_TD
