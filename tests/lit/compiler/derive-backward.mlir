// attn-derive-backward: each function computing one fused attn.attention
// on its arguments gains @<name>_backward (docs/backward.md):
//   func @f(q, k, v, ops..., ids...) -> o
//   func @f_backward(q, k, v, ops..., o, dO, ids...) -> (dq, dk, dv, d ops...)
// (o and dO before the trailing position ids, which stay optional at a run)
// with the forward's operands and attributes; grad_operands are the
// encoding operands their encoding differentiates.
// RUN: pejit-opt %s --split-input-file --attn-derive-backward | FileCheck %s
// RUN: pejit-opt %s --split-input-file --attn-derive-backward=score-shaped-gradients=false | FileCheck %s --check-prefix=MASK

// CHECK-LABEL: func.func @plain(
// CHECK-LABEL: func.func @plain_backward(
// CHECK-SAME: %[[Q:.*]]: tensor<1x8x32x64xf32>, %[[K:.*]]: tensor<1x2x32x64xf32>, %[[V:.*]]: tensor<1x2x32x16xf32>, %[[O:.*]]: tensor<1x8x32x16xf32>, %[[DO:.*]]: tensor<1x8x32x16xf32>)
// CHECK-SAME: -> (tensor<1x8x32x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x16xf32>)
// CHECK: %[[DQ:[a-z_]+]], %[[DK:[a-z_]+]], %[[DV:[a-z_]+]] = attn.attention_backward %[[Q]], %[[K]], %[[V]], %[[O]], %[[DO]] causal window(8) softcap(3.000000e+01) scale(1.250000e-01)
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
func.func @plain(%q: tensor<1x8x32x64xf32>, %k: tensor<1x2x32x64xf32>, %v: tensor<1x2x32x16xf32>) -> tensor<1x8x32x16xf32> {
  %o = attn.attention %q, %k, %v causal window(8) softcap(30.0) scale(0.125) : tensor<1x8x32x64xf32>, tensor<1x2x32x64xf32>, tensor<1x2x32x16xf32> -> tensor<1x8x32x16xf32>
  return %o : tensor<1x8x32x16xf32>
}

// -----

// Fused RoPE with explicit ids and a T5 table: the ids pass through, the
// table gets its f32 gradient.
// CHECK-LABEL: func.func @rope_t5_backward(
// CHECK-SAME: %{{.*}}: tensor<32x4xbf16>, %{{.*}}: tensor<1x4x16x64xbf16>, %{{.*}}: tensor<1x4x16x64xbf16>)
// CHECK-SAME: -> (tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<32x4xf32>)
// CHECK: attn.attention_backward {{.*}} query_positions(%{{.*}} : tensor<16xi64>) key_positions(%{{.*}} : tensor<16xi64>) {{.*}} encoding_operands(%{{.*}} : tensor<32x4xbf16>) grad_operands([0])
func.func @rope_t5(%q: tensor<1x4x16x64xbf16>, %k: tensor<1x4x16x64xbf16>, %v: tensor<1x4x16x64xbf16>, %ids: tensor<16xi64>, %t: tensor<32x4xbf16>) -> tensor<1x4x16x64xbf16> {
  %o = attn.attention %q, %k, %v query_positions(%ids : tensor<16xi64>) key_positions(%ids : tensor<16xi64>) causal scale(0.125)
      encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>])
      encoding_operands(%t : tensor<32x4xbf16>) : tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16>, tensor<1x4x16x64xbf16> -> tensor<1x4x16x64xbf16>
  return %o : tensor<1x4x16x64xbf16>
}

// -----

// Trailing position ids stay trailing: o and dO go before them.
// CHECK-LABEL: func.func @rope_trailing_ids_backward(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %[[K:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %[[V:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %[[O:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %[[DO:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %[[QP:[a-z0-9]+]]: tensor<16xi64>, %[[KP:[a-z0-9]+]]: tensor<16xi64>)
// CHECK: attn.attention_backward %[[Q]], %[[K]], %[[V]], %[[O]], %[[DO]] query_positions(%[[QP]] : tensor<16xi64>) key_positions(%[[KP]] : tensor<16xi64>)
func.func @rope_trailing_ids(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %qp: tensor<16xi64>, %kp: tensor<16xi64>) -> tensor<1x4x16x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<16xi64>) key_positions(%kp : tensor<16xi64>) causal
      encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// A packed batch: the segments pass through, before o and dO's place
// (only position ids trail).
// CHECK-LABEL: func.func @packed_backward(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x?x64xf32>, %{{[a-z0-9]+}}: tensor<1x4x?x64xf32>, %{{[a-z0-9]+}}: tensor<1x4x?x64xf32>, %[[CU:[a-z0-9]+]]: tensor<3xi32>, %[[O:[a-z0-9]+]]: tensor<1x4x?x64xf32>, %[[DO:[a-z0-9]+]]: tensor<1x4x?x64xf32>)
// CHECK: attn.attention_backward %[[Q]], %{{.*}}, %{{.*}}, %[[O]], %[[DO]] segments(%[[CU]], %[[CU]] : tensor<3xi32>, tensor<3xi32>) causal
func.func @packed(%q: tensor<1x4x?x64xf32>, %k: tensor<1x4x?x64xf32>, %v: tensor<1x4x?x64xf32>, %cu: tensor<3xi32>) -> tensor<1x4x?x64xf32> {
  %o = attn.attention %q, %k, %v segments(%cu, %cu : tensor<3xi32>, tensor<3xi32>) causal : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  return %o : tensor<1x4x?x64xf32>
}

// -----

// A training forward returns its lse: the backward takes it after o and dO
// (before trailing ids) and reads it instead of recomputing it.
// CHECK-LABEL: func.func @training_backward(
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %{{[a-z0-9]+}}: tensor<1x4x16x64xf32>, %{{[a-z0-9]+}}: tensor<1x4x16x64xf32>, %[[O:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %[[DO:[a-z0-9]+]]: tensor<1x4x16x64xf32>, %[[LSE:[a-z0-9]+]]: tensor<1x4x16xf32>, %[[IDS:[a-z0-9]+]]: tensor<16xi64>)
// CHECK: attn.attention_backward %[[Q]], %{{.*}}, %{{.*}}, %[[O]], %[[DO]] lse(%[[LSE]] : tensor<1x4x16xf32>) query_positions(%[[IDS]]
func.func @training(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %ids: tensor<16xi64>) -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>) {
  %o, %lse = attn.attention %q, %k, %v query_positions(%ids : tensor<16xi64>) key_positions(%ids : tensor<16xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>, tensor<1x4x16xf32>
  return %o, %lse : tensor<1x4x16x64xf32>, tensor<1x4x16xf32>
}

// -----

// A bias tensor's gradient is asked for by default (grad_operands [0]); with
// score-shaped-gradients=false the bias is a fixed mask: dq, dk, dv only.
// CHECK-LABEL: func.func @biased_backward(
// CHECK: attn.attention_backward {{.*}} grad_operands([0])
// MASK-LABEL: func.func @biased_backward(
// MASK-SAME: -> (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
// MASK-NOT: grad_operands
func.func @biased(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %bias: tensor<1x1x8x8xf32>) -> tensor<1x2x8x16xf32> {
  %o = attn.attention %q, %k, %v encodings([#pe.bias_tensor]) encoding_operands(%bias : tensor<1x1x8x8xf32>) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}

// -----

// A function without attention is left alone.
// CHECK-LABEL: func.func @no_attention
// CHECK-NOT: no_attention_backward
func.func @no_attention(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A standalone pe.rope (docs/standalone-kernels.md): the backward is its
// adjoint on dy, the forward's other arguments (ids, scale) as they were:
//   dx = R(theta)^T dy = (g_a cos + g_b sin, g_b cos - g_a sin)
// CHECK-LABEL: func.func @standalone_rope(
// CHECK-LABEL: func.func @standalone_rope_backward(
// CHECK-SAME: %[[DY:.*]]: tensor<?x4x?x64xbf16>, %[[IDS:.*]]: tensor<?xi64>, %[[S:.*]]: tensor<1xf32>) -> tensor<?x4x?x64xbf16>
// CHECK: %[[DX:.*]] = pe.rope adjoint %[[DY]], %[[IDS]] scale(%[[S]] : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true>
// CHECK: return %[[DX]]
func.func @standalone_rope(%x: tensor<?x4x?x64xbf16>, %ids: tensor<?xi64>, %s: tensor<1xf32>) -> tensor<?x4x?x64xbf16> {
  %y = pe.rope %x, %ids scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<?x4x?x64xbf16>, tensor<?xi64>
  return %y : tensor<?x4x?x64xbf16>
}

// -----

// A chain of two rotations: their adjoints in reverse order.
// CHECK-LABEL: func.func @rope_chain_backward(
// CHECK: %[[G1:.*]] = pe.rope adjoint %{{.*}}, %{{.*}} <layout = interleaved, theta = 500000.0>
// CHECK: %[[G0:.*]] = pe.rope adjoint %[[G1]], %{{.*}} <layout = half, theta = 10000.0>
// CHECK: return %[[G0]]
func.func @rope_chain(%x: tensor<1x2x8x32xf32>, %ids: tensor<8xi64>) -> tensor<1x2x8x32xf32> {
  %a = pe.rope %x, %ids <layout = half, theta = 10000.0> : tensor<1x2x8x32xf32>, tensor<8xi64>
  %b = pe.rope %a, %ids <layout = interleaved, theta = 500000.0> : tensor<1x2x8x32xf32>, tensor<8xi64>
  return %b : tensor<1x2x8x32xf32>
}

// -----

// The backward of an adjoint is the forward again.
// CHECK-LABEL: func.func @adjoint_backward(
// CHECK: pe.rope %{{.*}}, %{{.*}} <layout = half
// CHECK-NOT: adjoint
// CHECK: return
func.func @adjoint(%g: tensor<1x2x8x32xf32>, %ids: tensor<8xi64>) -> tensor<1x2x8x32xf32> {
  %a = pe.rope adjoint %g, %ids <layout = half, theta = 10000.0> : tensor<1x2x8x32xf32>, tensor<8xi64>
  return %a : tensor<1x2x8x32xf32>
}

// -----

// Additive embeddings alone: dx = dy, no backward function.
// CHECK-LABEL: func.func @sinusoidal(
// CHECK-NOT: func.func @sinusoidal_backward
func.func @sinusoidal(%x: tensor<?x?x64xf32>, %ids: tensor<?xi64>) -> tensor<?x?x64xf32> {
  %e = pe.sinusoidal %x, %ids <base = 10000.0> : tensor<?x?x64xf32>, tensor<?xi64>
  return %e : tensor<?x?x64xf32>
}

// -----

// Linear attention: attn.linear_attention_backward with the forward's
// feature map, mask, RoPE and placement; o and dO before the trailing ids.
// CHECK-LABEL: func.func @linear_backward(
// CHECK-SAME: %[[Q:.*]]: tensor<1x4x32x16xf32>, %[[K:.*]]: tensor<1x2x32x16xf32>, %[[V:.*]]: tensor<1x2x32x8xf32>, %[[O:.*]]: tensor<1x4x32x8xf32>, %[[DO:.*]]: tensor<1x4x32x8xf32>, %[[IDS:.*]]: tensor<32xi64>)
// CHECK-SAME: -> (tensor<1x4x32x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32>)
// CHECK: attn.linear_attention_backward %[[Q]], %[[K]], %[[V]], %[[O]], %[[DO]] feature_map(elu_plus_one) query_positions(%[[IDS]] : tensor<32xi64>) key_positions(%[[IDS]] : tensor<32xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator)
func.func @linear(%q: tensor<1x4x32x16xf32>, %k: tensor<1x2x32x16xf32>, %v: tensor<1x2x32x8xf32>, %ids: tensor<32xi64>) -> tensor<1x4x32x8xf32> {
  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) query_positions(%ids : tensor<32xi64>) key_positions(%ids : tensor<32xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<1x4x32x16xf32>, tensor<1x2x32x16xf32>, tensor<1x2x32x8xf32> -> tensor<1x4x32x8xf32>
  return %o : tensor<1x4x32x8xf32>
}

// -----

// A materialized T5 bias: its table's gradient from dBias (the bias's
// type), d table[n, h] = sum over bucket(j - i) = n of dBias[b, h, i, j].
// CHECK-LABEL: func.func @t5_bias_backward(
// CHECK-SAME: %[[T:.*]]: tensor<32x8xf32>, %[[DB:.*]]: tensor<1x8x?x?xf32>) -> tensor<32x8xf32>
// CHECK: pe.score_bias_grad %[[DB]] operands(%[[T]] : tensor<32x8xf32>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128>)
func.func @t5_bias(%t: tensor<32x8xf32>) -> tensor<1x8x?x?xf32> {
  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128> : tensor<32x8xf32> -> tensor<1x8x?x?xf32>
  return %b : tensor<1x8x?x?xf32>
}

// -----

// A materialized Shaw term: the key term's query and table gradients, the
// value term's table gradient (pe.relative_term_grad, the term's gradient
// after the forward's arguments).
// CHECK-LABEL: func.func @shaw_key_backward(
// CHECK-SAME: %[[Q:.*]]: tensor<1x4x20x32xbf16>, %[[T:.*]]: tensor<9x32xbf16>, %[[DE:.*]]: tensor<1x4x20x24xbf16>)
// CHECK-SAME: -> (tensor<1x4x20x32xbf16>, tensor<9x32xf32>)
// CHECK: pe.relative_term_grad %[[DE]] query(%[[Q]] : tensor<1x4x20x32xbf16>) table(%[[T]] : tensor<9x32xbf16>) encoding(#pe.relative_key<clip = 4>)
func.func @shaw_key(%q: tensor<1x4x20x32xbf16>, %t: tensor<9x32xbf16>) -> tensor<1x4x20x24xbf16> {
  %e = pe.relative_key %q, %t <clip = 4> : tensor<1x4x20x32xbf16>, tensor<9x32xbf16> -> tensor<1x4x20x24xbf16>
  return %e : tensor<1x4x20x24xbf16>
}

// CHECK-LABEL: func.func @shaw_value_backward(
// CHECK-SAME: %[[T:.*]]: tensor<4x9x16xf32>, %[[DR:.*]]: tensor<4x20x24x16xf32>) -> tensor<4x9x16xf32>
// CHECK: pe.relative_term_grad %[[DR]] table(%[[T]] : tensor<4x9x16xf32>) encoding(#pe.relative_value<clip = 4>)
func.func @shaw_value(%t: tensor<4x9x16xf32>) -> tensor<4x20x24x16xf32> {
  %r = pe.relative_value %t <clip = 4> : tensor<4x9x16xf32> -> tensor<4x20x24x16xf32>
  return %r : tensor<4x20x24x16xf32>
}
