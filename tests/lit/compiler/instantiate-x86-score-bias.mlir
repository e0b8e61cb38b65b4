// attn-instantiate-x86-template, materialized form: one score-bias pe op
// (pe.alibi, pe.t5_bias, pe.relative_key) becomes templates/x86/
// score_bias.mlir's kernel, one value-term pe op (pe.relative_value)
// value_term.mlir's (docs/standalone-kernels.md "Materialized biases"):
//   out[b, h, i, j] = score_mod(0, b, h, i, j)
//   key term:   the same at scale 1 from a one-row tile Q[b, h, i, :]
//   value term: out[a, i, j, :] = row(bucket(a, i, j))
// the encoding's own hooks, 8 lanes per vector and the rest one by one;
// one output row per item.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// ALiBi's BLOOM form: bias = slope_h * j, an FMA of the key index (as f32)
// and the head's slope (picked by selects on the head).
// CHECK: module attributes {pejit.kernel = {arguments = "materialized_bias"
// CHECK-LABEL: func.func @pejit_bias_item
// CHECK-SAME: (%{{.*}}: memref<1x8x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %{{.*}}: memref<1x1x1x8xf32>, %{{.*}}: memref<1xf32>, %{{.*}}: index)
// CHECK-NOT: attn.score_mod
// CHECK: arith.sitofp {{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: math.fma {{.*}} : vector<8xf32>
// CHECK: arith.sitofp {{.*}} : i32 to f32
// CHECK: math.fma {{.*}} : f32
func.func @bloom() -> tensor<1x8x?x?xf32> {
  %b = pe.alibi <num_heads = 8, form = bloom> : tensor<1x8x?x?xf32>
  return %b : tensor<1x8x?x?xf32>
}

// -----

// T5: the table is the kernel's one input; bias = table[bucket(j - i -
// off), h], gathered per lane. It depends on the distance alone: items of
// 64 rows (4 heads x 1 block), each key chunk one row of distances at the
// block's last row q, diag[t] = bias(q, j0 + t), copied per row r from
// diag[c + nr - 1 - r].
// CHECK: arguments = "materialized_bias encoding_operand=t5_table:f32:32x4"
// CHECK-SAME: items = 4 : i64
// CHECK-SAME: tile_m = 64 : i64
// CHECK-LABEL: func.func @pejit_bias_item
// CHECK-SAME: %{{.*}}: memref<32x4xf32>
// CHECK-NOT: attn.score_mod
// CHECK: %[[DIAG:.*]] = memref.alloca() {alignment = 64 : i64} : memref<583xf32>
// CHECK: vector.gather %{{.*}} : memref<32x4xf32>
// CHECK: vector.store %{{.*}}, %[[DIAG]]
// CHECK: vector.load %[[DIAG]]
// CHECK: vector.store
func.func @t5(%t: tensor<32x4xf32>) -> tensor<1x4x50x70xf32> {
  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128> : tensor<32x4xf32> -> tensor<1x4x50x70xf32>
  return %b : tensor<1x4x50x70xf32>
}

// -----

// Shaw's key term: q_i . a^K[clip(j - i - off) + k] with off = skv - sq.
// The query-tile prologue forms the 2k + 1 dot products of row i (8
// channels per FMA, then a sum) into the scratch; each score gathers its
// bucket's entry and adds it at scale 1.
// CHECK: arguments = "materialized_bias query:f32:2x3x13x16 encoding_operand=shaw_key_table:f32:9x16"
// CHECK-SAME: items = 78 : i64
// CHECK-LABEL: func.func @pejit_bias_item
// CHECK-SAME: %{{.*}}: memref<2x3x13x16xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: memref.subview
// CHECK: vector.fma
// CHECK: vector.reduction <add>
// CHECK: vector.gather
// CHECK-NOT: attn.score_mod
// CHECK-NOT: attn.query_tile_prologue
func.func @key(%q: tensor<2x3x13x16xf32>, %t: tensor<9x16xf32>) -> tensor<2x3x13x21xf32> {
  %r = pe.relative_key %q, %t <clip = 4> : tensor<2x3x13x16xf32>, tensor<9x16xf32> -> tensor<2x3x13x21xf32>
  return %r : tensor<2x3x13x21xf32>
}

// -----

// Shaw's value term, a table shared by the heads: [sq, skv, dv] as [1, sq,
// skv, dv]; each item (i, j) copies row clip(j - i - off) + k of a^V,
// 8 channels per vector, then the dv % 8 tail.
// CHECK: arguments = "materialized_bias encoding_operand=shaw_value_table:f32:9x12"
// CHECK-SAME: items = 273 : i64
// CHECK-LABEL: func.func @pejit_bias_item
// CHECK-SAME: (%{{.*}}: memref<1x13x21x12xf32, strided<[?, ?, ?, 1], offset: ?>>, %{{.*}}: memref<1x1x1x8xf32>, %{{.*}}: memref<9x12xf32>, %{{.*}}: index)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: vector.load {{.*}} : memref<9x12xf32>, vector<8xf32>
// CHECK: memref.load {{.*}} : memref<9x12xf32>
// CHECK-NOT: attn.value_term
func.func @value(%t: tensor<9x12xf32>) -> tensor<13x21x12xf32> {
  %r = pe.relative_value %t <clip = 4> : tensor<9x12xf32> -> tensor<13x21x12xf32>
  return %r : tensor<13x21x12xf32>
}

// -----

// pe.score_bias_grad (a materialized T5's table gradient): items of 64
// rows sum dBias along diagonals, each diagonal's sum through T5's score
// adjoint into the item's partial table:
//   diag[c + nr - 1 - r] += dBias[b, h, i0 + r, j0 + c];  d table[bucket(j0 + t - q), h] += diag[t]
// CHECK-LABEL: module attributes {pejit.kernel = {arguments = "output_grad:f32:1x4x?x?
// CHECK-SAME: tile_m = 64 : i64
// CHECK-LABEL: func.func @pejit_bias_grad_item
// CHECK-NOT: attn.score_grad
// CHECK: vector.load
// CHECK: arith.addf
// CHECK: memref.store
func.func @t5_grad(%db: tensor<1x4x?x?xf32>, %t: tensor<32x4xf32>) -> tensor<32x4xf32> {
  %0 = pe.score_bias_grad %db operands(%t : tensor<32x4xf32>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128>) : tensor<1x4x?x?xf32> -> tensor<32x4xf32>
  return %0 : tensor<32x4xf32>
}
