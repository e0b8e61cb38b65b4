// attn-instantiate-x86-template, linear attention form: one
// attn.linear_attention becomes templates/x86/linear_attention.mlir's
// kernel (docs/linear-attention.md). One item per (b, hq) walks its query
// rows in chunks; a chunk at i0 first brings the state up to the keys its
// first row sees (S += Kt . V, z += k^), then, with its own keys masked:
//   O = Qc . S + mask(Qc . Kt) . V,  mask: row r keeps keys j < upto(i0 + r) - lo
//   out_r = O_r / (q^_r . z_r)    (0 when q^_r . z_r == 0)
// k~ = R phi(k), k^ = phi(k) with rope_on_numerator (phi(R k) for both
// with rope_before_feature_map).
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// elu_plus_one, causal, RoPE on the numerator: tile_m is the largest length
// (one item per head covers every row), the RoPE's tables per Q and K
// position (a cos and a sin per frequency: 16 floats at d = 16).
// CHECK: module attributes {pejit.kernel = {arguments = "query:f32:1x4x?x16 key:f32:1x2x?x16 value:f32:1x2x?x8"
// CHECK-SAME: table_floats_per_key_position = 16 : i64, table_floats_per_query_position = 16 : i64
// CHECK-SAME: tile_m = 2147483647 : i64, tile_n = 16 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %{{.*}}: memref<1x4x?x16xf32, strided<[?, ?, ?, 1], offset: ?>>
// The state on the item's stack, zeroed.
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<16x8xf32>
// CHECK: call @add_key_range
// CHECK: call @row_factors
// CHECK: call @gemm
// CHECK: call @mask_scores
// CHECK: call @gemm
// CHECK: call @emit_rows
// CHECK: call @add_keys
// CHECK-LABEL: func.func private @phi8
// CHECK: call @exp2_vec
// CHECK: arith.select
// CHECK-LABEL: func.func private @load_query_rows
// CHECK-NOT: attn.qk_transform
// CHECK-LABEL: func.func private @add_keys
// CHECK: call @gemm
// CHECK-LABEL: func.func private @row_factors
// CHECK: vector.reduction <add>
// CHECK: arith.cmpf oeq
// CHECK-LABEL: func.func private @mask_scores
// CHECK: memref.store
// The matmul: 6-row blocks, then 4 and 2 for M % 6.
// CHECK-LABEL: func.func private @gemm(
// CHECK: call @gemm_rows6
// CHECK: call @gemm_rows4
// CHECK: call @gemm_rows2
// CHECK-LABEL: func.func private @gemm_rows6
// CHECK-COUNT-12: vector.fma
func.func @linear_rope(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x8xf32>) -> tensor<1x4x?x8xf32> {
  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32> -> tensor<1x4x?x8xf32>
  return %o : tensor<1x4x?x8xf32>
}

// -----

// softmax_keys: per channel the chunk's max; the old terms scaled by
// exp(m_old - m_new), the keys weighted by exp(k - m_new); out_i = sum_c
// (q_ic / z_i[c]) S_i[c, :]. No RoPE: no tables. Not causal (no own
// keys to mask) and no state: tiles of 64 rows.
// CHECK: table_floats_per_key_position = 0 : i64, table_floats_per_query_position = 0 : i64
// CHECK-SAME: tile_n = 64 : i64
// CHECK-LABEL: func.func @pejit_item
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<64x16xf32>
// CHECK-LABEL: func.func private @prepare_keys
// CHECK: arith.maximumf
// CHECK: call @exp2_vec
// CHECK: call @exp2_vec
// CHECK-LABEL: func.func private @row_factors
// CHECK: arith.divf
func.func @linear_softmax_keys(%q: tensor<2x2x64x16xbf16>, %k: tensor<2x2x64x16xbf16>, %v: tensor<2x2x64x16xbf16>) -> tensor<2x2x64x16xbf16> {
  %o = attn.linear_attention %q, %k, %v feature_map(softmax_keys) : tensor<2x2x64x16xbf16>, tensor<2x2x64x16xbf16>, tensor<2x2x64x16xbf16> -> tensor<2x2x64x16xbf16>
  return %o : tensor<2x2x64x16xbf16>
}

// -----

// A carried state: S is the state's columns [0, dv) of (b, h) ([b, hq, d,
// dv + 2], strided), updated in place; z and m (columns dv, dv + 1) are
// read before the rows and written back after the keys no row reached.
// CHECK: arguments = "query:f32:1x4x?x16 key:f32:1x2x?x16 value:f32:1x2x?x8 query_positions:i64:? key_positions:i64:? linear_state:f32:1x4x16x10"
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %[[ST:arg[0-9]+]]: memref<1x4x16x10xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: memref.subview %[[ST]]{{.*}} [1, 1, 16, 8] [1, 1, 1, 1] : memref<1x4x16x10xf32, strided<[?, ?, ?, 1], offset: ?>> to memref<16x8xf32, strided<[?, 1], offset: ?>>
// CHECK: call @state_in
// CHECK: call @add_key_range
// CHECK: call @state_out
// CHECK-LABEL: func.func private @state_in
// CHECK: memref.load {{.*}} : memref<1x4x16x10xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK-LABEL: func.func private @state_out
// CHECK: memref.store {{.*}} : memref<1x4x16x10xf32, strided<[?, ?, ?, 1], offset: ?>>
func.func @linear_state(%q: tensor<1x4x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x8xf32>, %qp: tensor<?xi64>, %kp: tensor<?xi64>, %st: tensor<1x4x16x10xf32>) -> tensor<1x4x?x8xf32> {
  %o = attn.linear_attention %q, %k, %v feature_map(softmax_keys) query_positions(%qp : tensor<?xi64>) key_positions(%kp : tensor<?xi64>) causal state(%st : tensor<1x4x16x10xf32>) : tensor<1x4x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x8xf32> -> tensor<1x4x?x8xf32>
  return %o : tensor<1x4x?x8xf32>
}
