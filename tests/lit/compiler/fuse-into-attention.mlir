// pe-fuse-into-attention moves pe.rope (on Q and K) and index-only score
// biases (pe.alibi) into attn.attention, and makes the scale explicit.
//   rope(Q, qp), rope(K, kp), alibi -> attention(Q, K) positions(qp, kp)
//                                      encodings([rope, alibi]) scale(1/sqrt(d))
// RUN: pejit-opt %s --pe-fuse-into-attention --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @rope_and_alibi
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x16x64xf32>, %[[K:.*]]: tensor<1x4x16x64xf32>, %[[V:.*]]: tensor<1x4x16x64xf32>, %[[P:.*]]: tensor<16xi32>)
// CHECK-NOT: pe.
// CHECK: attn.attention %[[Q]], %[[K]], %[[V]] query_positions(%[[P]] : tensor<16xi32>) key_positions(%[[P]] : tensor<16xi32>) causal scale(1.250000e-01) encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.alibi<num_heads = 4, form = causal>])
// CHECK-NOT: bias(
func.func @rope_and_alibi(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %b = pe.alibi <num_heads = 4, form = causal> : tensor<1x4x16x16xf32>
  %o = attn.attention %qr, %kr, %v bias(%b : tensor<1x4x16x16xf32>) causal : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// Decode with GQA: one query at position 99, keys 0..99 (separate positions).
// CHECK-LABEL: func.func @decode_gqa
// CHECK: attn.attention %arg0, %arg1, %arg2 query_positions(%arg3 : tensor<1xi64>) key_positions(%arg4 : tensor<100xi64>) scale(3.000000e-01) encodings([#pe.rope<layout = interleaved, theta = 500000.0, rotary_dim = 32, scaling = #pe.yarn<factor = 4.0, original_max_position = 64>>])
func.func @decode_gqa(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x100x64xf32>, %v: tensor<1x2x100x64xf32>, %qp: tensor<1xi64>, %kp: tensor<100xi64>) -> tensor<1x8x1x64xf32> {
  %qr = pe.rope %q, %qp <layout = interleaved, theta = 500000.0, rotary_dim = 32, scaling = #pe.yarn<factor = 4.0, original_max_position = 64>> : tensor<1x8x1x64xf32>, tensor<1xi64>
  %kr = pe.rope %k, %kp <layout = interleaved, theta = 500000.0, rotary_dim = 32, scaling = #pe.yarn<factor = 4.0, original_max_position = 64>> : tensor<1x2x100x64xf32>, tensor<100xi64>
  %o = attn.attention %qr, %kr, %v scale(0.3) : tensor<1x8x1x64xf32>, tensor<1x2x100x64xf32>, tensor<1x2x100x64xf32> -> tensor<1x8x1x64xf32>
  return %o : tensor<1x8x1x64xf32>
}

// -----

// The rotated K is also returned: it is materialized anyway, so neither
// rope fuses (Q and K must share the fused transform) and the IR is unchanged
// apart from the explicit scale.
// CHECK-LABEL: func.func @rotated_key_has_another_user
// CHECK: %[[QR:.*]] = pe.rope
// CHECK: %[[KR:.*]] = pe.rope
// CHECK: attn.attention %[[QR]], %[[KR]], %{{.*}} scale(1.250000e-01) :
// CHECK-NOT: encodings
// CHECK: return %{{.*}}, %[[KR]]
func.func @rotated_key_has_another_user(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>) -> (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>) {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o, %kr : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>
}

// -----

// Q and K rotated with different encodings: not one QK transform, no fusion.
// CHECK-LABEL: func.func @different_encodings
// CHECK-COUNT-2: pe.rope
// CHECK: attn.attention
// CHECK-NOT: encodings
func.func @different_encodings(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = interleaved, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// Only K is rotated (Q arrives rotated): the rope fuses on K alone
// (apply_to = key), its positions becoming the key positions.
// CHECK-LABEL: func.func @only_key_rotated
// CHECK-NOT: pe.rope
// CHECK: attn.attention %arg0, %arg1, %arg2 key_positions(%arg3 : tensor<16xi32>) scale(1.250000e-01) encodings([#pe.rope<layout = half, theta = 10000.0, apply_to = key>])
func.func @only_key_rotated(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>) -> tensor<1x4x16x64xf32> {
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %q, %kr, %v : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// An adjoint rotation (a backward's pe.rope adjoint) is not an encoding of
// Q and K: it stays a pe op of its own.
// CHECK-LABEL: func.func @adjoint_does_not_fuse
// CHECK: pe.rope adjoint
// CHECK: pe.rope adjoint
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} :
func.func @adjoint_does_not_fuse(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope adjoint %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope adjoint %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// The ALiBi bias is also returned: it stays a tensor, which the kernel
// reads (#pe.bias_tensor, the fallback); the rope still fuses.
// CHECK-LABEL: func.func @bias_has_another_user
// CHECK: %[[B:.*]] = pe.alibi
// CHECK: attn.attention {{.*}} encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.bias_tensor]) encoding_operands(%[[B]] : tensor<1x4x16x16xf32>)
func.func @bias_has_another_user(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>) -> (tensor<1x4x16x64xf32>, tensor<1x4x16x16xf32>) {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %b = pe.alibi <num_heads = 4, form = causal> : tensor<1x4x16x16xf32>
  %o = attn.attention %qr, %kr, %v bias(%b : tensor<1x4x16x16xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o, %b : tensor<1x4x16x64xf32>, tensor<1x4x16x16xf32>
}

// -----

// M-RoPE: [3, s] position ids (an axis per section) become the attention's
// positions; the bias argument becomes the fallback #pe.bias_tensor.
// CHECK-LABEL: func.func @mrope_and_bias
// CHECK-NOT: pe.rope
// CHECK: attn.attention %arg0, %arg1, %arg2 query_positions(%arg3 : tensor<3x16xi32>) key_positions(%arg3 : tensor<3x16xi32>) scale(1.250000e-01) encodings([#pe.rope<layout = half, theta = 10000.0, sections = [8, 12, 12]>, #pe.bias_tensor]) encoding_operands(%arg4 : tensor<1x4x16x16xf32>)
func.func @mrope_and_bias(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<3x16xi32>, %bias: tensor<1x4x16x16xf32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0, sections = [8, 12, 12]> : tensor<1x4x16x64xf32>, tensor<3x16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0, sections = [8, 12, 12]> : tensor<1x4x16x64xf32>, tensor<3x16xi32>
  %o = attn.attention %qr, %kr, %v bias(%bias : tensor<1x4x16x16xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// T5: the bias op's table becomes the attention's encoding operand
// (bias(h, i, j) = table[bucket(j - (i + skv - sq)), h], applied in the
// kernel); with a RoPE, the rope's encoding follows T5's in the list.
// CHECK-LABEL: func.func @t5_and_rope
// CHECK-SAME: %[[Q:[^:]*]]: tensor<1x4x16x64xf32>, %[[K:[^:]*]]: tensor<1x4x16x64xf32>, %[[V:[^:]*]]: tensor<1x4x16x64xf32>, %[[P:[^:]*]]: tensor<16xi32>, %[[T:[^:]*]]: tensor<32x4xf32>
// CHECK-NOT: pe.t5_bias
// CHECK: attn.attention %[[Q]], %[[K]], %[[V]] query_positions(%[[P]] : tensor<16xi32>) key_positions(%[[P]] : tensor<16xi32>) scale(1.000000e+00) encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.t5_bias<num_buckets = 32, max_distance = 128>]) encoding_operands(%[[T]] : tensor<32x4xf32>)
func.func @t5_and_rope(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>, %table: tensor<32x4xf32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %b = pe.t5_bias %table <num_buckets = 32, max_distance = 128> : tensor<32x4xf32> -> tensor<1x4x16x16xf32>
  %o = attn.attention %qr, %kr, %v bias(%b : tensor<1x4x16x16xf32>) scale(1.0) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// A T5 bias with another user stays a tensor (it is materialized anyway),
// which the kernel reads through the fallback.
// CHECK-LABEL: func.func @t5_bias_has_another_user
// CHECK: %[[B:.*]] = pe.t5_bias
// CHECK: attn.attention {{.*}} encodings([#pe.bias_tensor]) encoding_operands(%[[B]] : tensor<1x4x16x16xf32>)
func.func @t5_bias_has_another_user(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %table: tensor<32x4xf32>) -> (tensor<1x4x16x64xf32>, tensor<1x4x16x16xf32>) {
  %b = pe.t5_bias %table <num_buckets = 32, max_distance = 128> : tensor<32x4xf32> -> tensor<1x4x16x16xf32>
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x16x16xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o, %b : tensor<1x4x16x64xf32>, tensor<1x4x16x16xf32>
}

// -----

// Only Q is rotated (a KV cache written with RoPE): apply_to = query.
// CHECK-LABEL: func.func @only_query_rotated
// CHECK-NOT: pe.rope
// CHECK: attn.attention %arg0, %arg1, %arg2 query_positions(%arg3 : tensor<1xi64>) causal scale(1.250000e-01) encodings([#pe.rope<layout = interleaved, theta = 500000.0, apply_to = query>])
func.func @only_query_rotated(%q: tensor<1x4x1x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %qpos: tensor<1xi64>) -> tensor<1x4x1x64xf32> {
  %qr = pe.rope %q, %qpos <layout = interleaved, theta = 500000.0> : tensor<1x4x1x64xf32>, tensor<1xi64>
  %o = attn.attention %qr, %k, %v causal : tensor<1x4x1x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x1x64xf32>
  return %o : tensor<1x4x1x64xf32>
}

// -----

// A user's bias or mask tensor (the general fallback): bias(i, j) =
// bias_tensor[0, h, i, j], read by the kernel; a shared [1, 1, sq, skv]
// mask the same way.
// CHECK-LABEL: func.func @user_bias
// CHECK-NOT: bias(
// CHECK: attn.attention %arg0, %arg1, %arg2 causal scale(1.250000e-01) encodings([#pe.bias_tensor]) encoding_operands(%arg3 : tensor<1x1x16x16xf32>)
func.func @user_bias(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %mask: tensor<1x1x16x16xf32>) -> tensor<1x4x16x64xf32> {
  %o = attn.attention %q, %k, %v bias(%mask : tensor<1x1x16x16xf32>) causal : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// Shaw's key term on the attention's own Q: s = scale (q.k + q.aK[rel + k]),
// fused, its table an encoding operand.
// CHECK-LABEL: func.func @shaw_key
// CHECK-NOT: pe.relative_key
// CHECK: attn.attention %arg0, %arg1, %arg2 scale(1.250000e-01) encodings([#pe.relative_key<clip = 4>]) encoding_operands(%arg3 : tensor<9x64xf32>)
func.func @shaw_key(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %aK: tensor<9x64xf32>) -> tensor<1x4x16x64xf32> {
  %t = pe.relative_key %q, %aK <clip = 4> : tensor<1x4x16x64xf32>, tensor<9x64xf32> -> tensor<1x4x16x16xf32>
  %o = attn.attention %q, %k, %v key_term(%t : tensor<1x4x16x16xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// Shaw's value term: z_i = sum_j p_ij (v_j + aV[rel + k]), fused with its
// table as an encoding operand after the key term's; RoPE does not stop it
// (the value term reads no Q or K).
// CHECK-LABEL: func.func @shaw_key_and_value
// CHECK-NOT: pe.relative_
// CHECK: attn.attention %arg0, %arg1, %arg2 {{.*}}encodings([#pe.relative_key<clip = 4>, #pe.relative_value<clip = 4>]) encoding_operands(%arg3, %arg4 : tensor<9x64xf32>, tensor<9x32xf32>)
func.func @shaw_key_and_value(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x32xf32>, %aK: tensor<9x64xf32>, %aV: tensor<9x32xf32>) -> tensor<1x4x16x32xf32> {
  %t = pe.relative_key %q, %aK <clip = 4> : tensor<1x4x16x64xf32>, tensor<9x64xf32> -> tensor<1x4x16x16xf32>
  %u = pe.relative_value %aV <clip = 4> : tensor<9x32xf32> -> tensor<16x16x32xf32>
  %o = attn.attention %q, %k, %v key_term(%t : tensor<1x4x16x16xf32>) value_term(%u : tensor<16x16x32xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x32xf32> -> tensor<1x4x16x32xf32>
  return %o : tensor<1x4x16x32xf32>
}

// -----

// CHECK-LABEL: func.func @shaw_value_with_rope
// CHECK-NOT: pe.relative_value
// CHECK: attn.attention %arg0, %arg1, %arg2 {{.*}}encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.relative_value<clip = 2>]) encoding_operands(%arg4 : tensor<5x64xf32>)
func.func @shaw_value_with_rope(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>, %aV: tensor<5x64xf32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %u = pe.relative_value %aV <clip = 2> : tensor<5x64xf32> -> tensor<16x16x64xf32>
  %o = attn.attention %qr, %kr, %v value_term(%u : tensor<16x16x64xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// A value term with a second user stays materialised (the other user reads it).
// CHECK-LABEL: func.func @shaw_value_two_users
// CHECK: pe.relative_value
// CHECK: attn.attention {{.*}} value_term(
func.func @shaw_value_two_users(%q: tensor<1x4x16x64xf32>, %aV: tensor<5x64xf32>) -> (tensor<1x4x16x64xf32>, tensor<16x16x64xf32>) {
  %u = pe.relative_value %aV <clip = 2> : tensor<5x64xf32> -> tensor<16x16x64xf32>
  %o = attn.attention %q, %q, %q value_term(%u : tensor<16x16x64xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o, %u : tensor<1x4x16x64xf32>, tensor<16x16x64xf32>
}

// -----

// An attention whose bias measures by position already holds the ids; a
// RoPE on the same ids still fuses, one on other ids does not.
// CHECK-LABEL: func.func @rope_with_bias_by_position
// CHECK-NOT: pe.rope
// CHECK: attn.attention %arg0, %arg1, %arg2 query_positions(%arg3 : tensor<16xi32>) key_positions(%arg3 : tensor<16xi32>) {{.*}}encodings([#pe.alibi<num_heads = 4, form = causal, relative_to = position>, #pe.rope<layout = half, theta = 10000.0>])
func.func @rope_with_bias_by_position(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v query_positions(%pos : tensor<16xi32>) key_positions(%pos : tensor<16xi32>) causal encodings([#pe.alibi<num_heads = 4, form = causal, relative_to = position>]) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// CHECK-LABEL: func.func @rope_other_ids_than_bias
// CHECK: pe.rope
// CHECK: pe.rope
// CHECK: attn.attention
func.func @rope_other_ids_than_bias(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>, %other: tensor<16xi32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %other <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %other <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v query_positions(%pos : tensor<16xi32>) key_positions(%pos : tensor<16xi32>) encodings([#pe.alibi<num_heads = 4, form = causal, relative_to = position>]) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// With RoPE on Q the kernel would see rotated rows, the op the unrotated
// ones: the key term stays (and the kernel refuses it, naming the op).
// CHECK-LABEL: func.func @shaw_key_with_rope
// CHECK: pe.relative_key
// CHECK: attn.attention {{.*}} key_term(
func.func @shaw_key_with_rope(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>, %aK: tensor<9x64xf32>) -> tensor<1x4x16x64xf32> {
  %t = pe.relative_key %q, %aK <clip = 4> : tensor<1x4x16x64xf32>, tensor<9x64xf32> -> tensor<1x4x16x16xf32>
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v key_term(%t : tensor<1x4x16x16xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// A runtime position scale: Q's and K's RoPE read the same scale, which
// becomes the fused RoPE's encoding operand (angle = (p * s) * inv_freq).
// CHECK-LABEL: func.func @rope_runtime_scale
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<1xf32>
// CHECK-NOT: pe.rope
// CHECK: attn.attention {{.*}} encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>]) encoding_operands(%[[S]] : tensor<1xf32>)
func.func @rope_runtime_scale(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>, %s: tensor<1xf32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// Two different scales: Q and K would rotate differently, so nothing fuses.
// CHECK-LABEL: func.func @rope_two_scales
// CHECK: pe.rope
// CHECK: pe.rope
// CHECK: attn.attention
func.func @rope_two_scales(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %pos: tensor<16xi32>, %s: tensor<1xf32>, %t: tensor<1xf32>) -> tensor<1x4x16x64xf32> {
  %qr = pe.rope %q, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %kr = pe.rope %k, %pos scale(%t : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<1x4x16x64xf32>, tensor<16xi32>
  %o = attn.attention %qr, %kr, %v : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}
