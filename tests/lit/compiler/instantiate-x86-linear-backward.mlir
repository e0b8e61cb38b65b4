// attn-instantiate-x86-template, linear attention backward form: one
// attn.linear_attention_backward becomes templates/x86/linear_attention_backward.mlir's
// kernel (docs/backward.md, "Linear attention"). One item per (b, hkv), in
// chunks of 64 rows or keys, each step a matmul. Causal: per query head
//   dQ~ = G St + mask(G V_own^T) K~_own,  dq = phi'(q^) (dq~ + dden z) through the RoPE's adjoint
// (G the rows' dO / den, St the keys before the chunk), then keys from the last chunk
//   dK~ = V T^T + mask(V G_part^T) P_part,  dV = K~ T + mask(K~ P_part^T) G_part
// (T the rows that see the whole chunk). Not causal: no masks.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// elu_plus_one, causal, RoPE on the numerator, GQA 4/2: two items, the
// RoPE's tables per position, the description's linear_backward token.
// CHECK: module attributes {pejit.kernel = {arguments = "linear_backward query:f32:1x4x?x16 key:f32:1x2x?x16 value:f32:1x2x?x8 output:f32:1x4x?x8 output_grad:f32:1x4x?x8 positions:i64:?"
// CHECK-SAME: table_floats_per_key_position = 16 : i64, table_floats_per_query_position = 16 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: func.func @pejit_linear_backward_item
// CHECK: call @full_backward
// CHECK: call @causal_backward
// CHECK-LABEL: func.func private @finish_query_rows
// CHECK-NOT: attn.qk_transform
// CHECK: call @query_factor8
// elu + 1's derivative read from its value: min(phi, 1).
// CHECK-LABEL: func.func private @query_factor8
// CHECK: arith.minimumf
// CHECK-LABEL: func.func private @causal_queries
// CHECK: call @join_keys
// CHECK: call @causal_row
// CHECK: call @gemm
// CHECK: call @mask_scores
// CHECK: call @gemm
// CHECK: call @finish_query_rows
// CHECK-LABEL: func.func private @causal_keys
// CHECK: call @join_rows
// CHECK: call @gemm
// CHECK: call @mask_partial
// CHECK: call @finish_key_rows
func.func @f(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x8xf32>,
             %o: tensor<1x4x?x8xf32>, %do: tensor<1x4x?x8xf32>, %ids: tensor<?xi64>)
    -> (tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>) {
  %dq, %dk, %dv = attn.linear_attention_backward %q, %k, %v, %o, %do feature_map(elu_plus_one)
      query_positions(%ids : tensor<?xi64>) key_positions(%ids : tensor<?xi64>) causal
      encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator)
      : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>, tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>
      -> tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>
  return %dq, %dk, %dv : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32>
}

// -----

// softmax_keys, bf16: the key side's factor is the weight e itself.
// CHECK-LABEL: module attributes {pejit.kernel = {arguments = "linear_backward query:bf16
// CHECK-LABEL: func.func private @key_factor8
// CHECK-NEXT: return %{{.*}} : vector<8xf32>
func.func @softmax(%q: tensor<1x2x8x16xbf16>, %o: tensor<1x2x8x16xbf16>)
    -> (tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>) {
  %dq, %dk, %dv = attn.linear_attention_backward %q, %q, %q, %o, %o feature_map(softmax_keys)
      : tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>
      -> tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>
  return %dq, %dk, %dv : tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>
}
