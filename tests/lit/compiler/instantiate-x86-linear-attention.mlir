// attn-instantiate-x86-template, linear attention form: one
// attn.linear_attention becomes templates/x86/linear_attention.mlir's
// kernel (docs/linear-attention.md). One item per (b, hq) walks its query
// rows in order, adding to the state the keys each row sees:
//   S[c, :] += k~_jc v_j,  z[c] += k^_jc
//   out_i = (q~_i . S) / (q^_i . z)    (0 when q^_i . z == 0)
// k~ = R phi(k), k^ = phi(k) with rope_on_numerator (phi(R k) for both
// with rope_before_feature_map).
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// elu_plus_one, causal, RoPE on the numerator: tile_m is the largest length
// (one item per head covers every row), the RoPE's tables per Q and K
// position (a cos and a sin per frequency: 16 floats at d = 16).
// CHECK: module attributes {pejit.kernel = {arguments = "query:f32:1x4x?x16 key:f32:1x2x?x16 value:f32:1x2x?x8"
// CHECK-SAME: table_floats_per_key_position = 16 : i64, table_floats_per_query_position = 16 : i64
// CHECK-SAME: tile_m = 2147483647 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: func.func private @load_query_rows
// CHECK-NOT: attn.qk_transform
// CHECK-LABEL: func.func private @add_key
// CHECK: math.fma
// CHECK-LABEL: func.func private @emit_row
// CHECK: vector.reduction <add>
// CHECK: arith.cmpf oeq
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %{{.*}}: memref<1x4x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<16x8xf32>
// CHECK-LABEL: func.func private @phi8
// CHECK: math.exp
// CHECK: arith.select
func.func @linear_rope(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x8xf32>) -> tensor<1x4x?x8xf32> {
  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32> -> tensor<1x4x?x8xf32>
  return %o : tensor<1x4x?x8xf32>
}

// -----

// softmax_keys: per channel a running max; the old terms scaled by
// exp(m_old - m_new), the key weighted by exp(k - m_new); out_i = sum_c
// q_ic S[c, :] / z[c]. No RoPE: no tables.
// CHECK: table_floats_per_key_position = 0 : i64, table_floats_per_query_position = 0 : i64
// CHECK-LABEL: func.func private @add_key
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: math.exp
// CHECK-LABEL: func.func private @emit_row
// CHECK: arith.divf
func.func @linear_softmax_keys(%q: tensor<2x2x64x16xbf16>, %k: tensor<2x2x64x16xbf16>, %v: tensor<2x2x64x16xbf16>) -> tensor<2x2x64x16xbf16> {
  %o = attn.linear_attention %q, %k, %v feature_map(softmax_keys) : tensor<2x2x64x16xbf16>, tensor<2x2x64x16xbf16>, tensor<2x2x64x16xbf16> -> tensor<2x2x64x16xbf16>
  return %o : tensor<2x2x64x16xbf16>
}

// -----

// A carried state: the item reads S, z and m of (b, h) from slot %e0 ([b,
// hq, d, dv + 2], strided) before its rows, adds the keys no row reached,
// and writes them back after.
// CHECK: arguments = "query:f32:1x4x?x16 key:f32:1x2x?x16 value:f32:1x2x?x8 query_positions:i64:? key_positions:i64:? linear_state:f32:1x4x16x10"
// CHECK-LABEL: func.func private @add_key
// CHECK: arith.cmpf oeq
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %{{.*}}: memref<1x4x16x10xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: call @state_in
// CHECK: call @state_out
// CHECK-LABEL: func.func private @state_in
// CHECK: vector.load {{.*}} : memref<1x4x16x10xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<8xf32>
// CHECK-LABEL: func.func private @state_out
// CHECK: vector.store {{.*}} : memref<1x4x16x10xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<8xf32>
func.func @linear_state(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x8xf32>, %qp: tensor<?xi64>, %kp: tensor<?xi64>, %st: tensor<1x4x16x10xf32>) -> tensor<1x4x?x8xf32> {
  %o = attn.linear_attention %q, %k, %v feature_map(softmax_keys) query_positions(%qp : tensor<?xi64>) key_positions(%kp : tensor<?xi64>) causal state(%st : tensor<1x4x16x10xf32>) : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32> -> tensor<1x4x?x8xf32>
  return %o : tensor<1x4x?x8xf32>
}
