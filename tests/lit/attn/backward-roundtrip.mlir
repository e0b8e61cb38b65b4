// attn.attention_backward in its forms parses, prints, and parses back
// (docs/backward.md).
// RUN: pejit-opt %s | pejit-opt | FileCheck %s
// RUN: pejit-opt %s --mlir-print-op-generic | pejit-opt | FileCheck %s

// GQA 8/2, causal, sq < skv: dq, dk, dv of the types of q, k, v.
// CHECK-LABEL: func.func @plain
func.func @plain(%q: tensor<1x8x48x64xf32>, %k: tensor<1x2x64x64xf32>, %v: tensor<1x2x64x32xf32>,
                 %o: tensor<1x8x48x32xf32>, %do: tensor<1x8x48x32xf32>)
    -> (tensor<1x8x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x32xf32>) {
  // CHECK: attn.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} causal scale(1.250000e-01) : tensor<1x8x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x32xf32>, tensor<1x8x48x32xf32>, tensor<1x8x48x32xf32> -> tensor<1x8x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x32xf32>
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do causal scale(0.125)
      : tensor<1x8x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x32xf32>, tensor<1x8x48x32xf32>, tensor<1x8x48x32xf32>
      -> tensor<1x8x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x32xf32>
  return %dq, %dk, %dv : tensor<1x8x48x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x32xf32>
}

// The training forward's lse, windows, softcap, a shape class's lengths.
// CHECK-LABEL: func.func @lse_window_softcap
func.func @lse_window_softcap(%q: tensor<1x4x?x64xf32>, %k: tensor<1x4x?x64xf32>, %v: tensor<1x4x?x64xf32>,
                              %o: tensor<1x4x?x64xf32>, %do: tensor<1x4x?x64xf32>, %lse: tensor<1x4x?xf32>)
    -> tensor<1x4x?x64xf32> {
  // CHECK: attn.attention_backward {{.*}} lse(%{{.*}} : tensor<1x4x?xf32>) window(16) window_right(4) softcap(3.000000e+01)
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do lse(%lse : tensor<1x4x?xf32>)
      window(16) window_right(4) softcap(30.0)
      : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>
      -> tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>
  return %dq : tensor<1x4x?x64xf32>
}

// Fused encodings with the T5 table's gradient asked for (f32, its shape).
// CHECK-LABEL: func.func @t5_table_gradient
func.func @t5_table_gradient(%q: tensor<1x4x16x64xbf16>, %o: tensor<1x4x16x64xbf16>,
                             %do: tensor<1x4x16x64xbf16>, %t: tensor<32x4xf32>) -> tensor<32x4xf32> {
  // CHECK: attn.attention_backward {{.*}} encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>]) encoding_operands(%{{.*}} : tensor<32x4xf32>) grad_operands([0]) : {{.*}} -> tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<32x4xf32>
  %dq, %dk, %dv, %dt = attn.attention_backward %q, %q, %q, %o, %do causal
      encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>])
      encoding_operands(%t : tensor<32x4xf32>) grad_operands([0])
      : tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>
      -> tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<32x4xf32>
  return %dt : tensor<32x4xf32>
}

// A packed batch (segments) and per-row key lengths, as the forward's.
// CHECK-LABEL: func.func @packed_and_key_lengths
// CHECK: attn.attention_backward {{.*}} segments(%{{.*}}, %{{.*}} : tensor<3xi32>, tensor<3xi32>) causal
// CHECK: attn.attention_backward {{.*}} key_lengths(%{{.*}} : tensor<2xi32>) :
func.func @packed_and_key_lengths(%q: tensor<1x4x?x64xf32>, %cu: tensor<3xi32>, %q2: tensor<2x4x8x64xf32>,
                                  %k2: tensor<2x4x?x64xf32>, %lens: tensor<2xi32>) {
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q segments(%cu, %cu : tensor<3xi32>, tensor<3xi32>) causal
      : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>
      -> tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>
  %dq2, %dk2, %dv2 = attn.attention_backward %q2, %k2, %k2, %q2, %q2 key_lengths(%lens : tensor<2xi32>)
      : tensor<2x4x8x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>
      -> tensor<2x4x8x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>
  return
}

// The template hook attn.score_grad (the score biases' adjoint into a
// partial buffer at each operand's offset).
// CHECK-LABEL: func.func @score_grad_hook
// CHECK: attn.score_grad %{{.*}}, batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} operands(%{{.*}} : memref<32x4xf32>) partial(%{{.*}} : memref<?xf32>, %{{.*}}) offsets [0] lengths(%{{.*}}, %{{.*}})
func.func @score_grad_hook(%ds: f32, %n: index, %i: i32, %t: memref<32x4xf32>, %p: memref<?xf32>) {
  attn.score_grad %ds, batch %n, head %n, query %i, key %i operands(%t : memref<32x4xf32>)
      partial(%p : memref<?xf32>, %n) offsets [0] lengths(%n, %n)
  return
}

// attn.linear_attention_backward: the forward's feature map, mask and RoPE
// with its placement and ids; dq, dk, dv of the types of q, k, v.
// CHECK-LABEL: func.func @linear
func.func @linear(%q: tensor<1x4x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x16xf32>,
                  %o: tensor<1x4x64x16xf32>, %do: tensor<1x4x64x16xf32>, %ids: tensor<64xi64>)
    -> (tensor<1x4x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>) {
  // CHECK: attn.linear_attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} feature_map(softmax_keys) query_positions(%{{.*}} : tensor<64xi64>) key_positions(%{{.*}} : tensor<64xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_before_feature_map)
  %dq, %dk, %dv = attn.linear_attention_backward %q, %k, %v, %o, %do feature_map(softmax_keys)
      query_positions(%ids : tensor<64xi64>) key_positions(%ids : tensor<64xi64>) causal
      encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_before_feature_map)
      : tensor<1x4x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>, tensor<1x4x64x16xf32>, tensor<1x4x64x16xf32>
      -> tensor<1x4x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>
  return %dq, %dk, %dv : tensor<1x4x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x16xf32>
}
