// attn-instantiate-x86-template, linear attention backward form: one
// attn.linear_attention_backward becomes templates/x86/linear_attention_backward.mlir's
// kernel (docs/backward.md, "Linear attention"). One item per (b, hkv):
// per query head a forward sweep (S, z grown key by key, each row's
//   dq~_i = S_i g_i, dq^_i = dden_i z_i, g_i = dO_i / den_i, dden_i = -(g_i . o_i)
// written as dq = phi'(q^) (dq~ + dq^) through the RoPE's adjoint), then
// one reverse sweep over the keys from the last (T += q~_i g_i^T, w +=
// dden_i q^_i for the rows that see key j; dk~_j = T v_j, dv_j = T^T k~_j).
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// elu_plus_one, causal, RoPE on the numerator, GQA 4/2: two items, the
// RoPE's tables per position, the description's linear_backward token.
// CHECK: module attributes {pejit.kernel = {arguments = "linear_backward query:f32:1x4x?x16 key:f32:1x2x?x16 value:f32:1x2x?x8 output:f32:1x4x?x8 output_grad:f32:1x4x?x8 positions:i64:?"
// CHECK-SAME: table_floats_per_key_position = 16 : i64, table_floats_per_query_position = 16 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: func.func @pejit_linear_backward_item
// CHECK: call @forward_sweep
// CHECK: call @reverse_sweep
// CHECK-LABEL: func.func private @forward_sweep
// CHECK: call @add_outer
// CHECK: call @query_row
// CHECK: call @finish_query_rows
// CHECK-LABEL: func.func private @finish_query_rows
// CHECK-NOT: attn.qk_transform
// CHECK: call @query_factor8
// CHECK-LABEL: func.func private @reverse_sweep
// CHECK: scf.while
// CHECK: call @join_row
// CHECK: call @state_dot
// CHECK: call @state_t_dot
// CHECK: call @finish_key_rows
// elu + 1's derivative read from its value: min(phi, 1).
// CHECK-LABEL: func.func private @query_factor8
// CHECK: arith.minimumf
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
