// attn-instantiate-x86-template, materialized bias form: one score-bias pe
// op (pe.alibi, pe.t5_bias) becomes templates/x86/score_bias.mlir's kernel
// (docs/standalone-kernels.md "Materialized biases"):
//   out[b, h, i, j] = score_mod(0, b, h, i, j)
// the encoding's own score hook on zero scores, 8 keys per vector and the
// rest one by one; one output row per item.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// ALiBi's BLOOM form: bias = slope_h * j, an FMA of the key index (as f32)
// and the head's slope (picked by selects on the head).
// CHECK: module attributes {pejit.kernel = {arguments = "materialized_bias"
// CHECK-LABEL: func.func @pejit_bias_item
// CHECK-SAME: (%{{.*}}: memref<1x8x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, %{{.*}}: memref<1xf32>, %{{.*}}: index)
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
// off), h], gathered per lane.
// CHECK: arguments = "materialized_bias encoding_operand=t5_table:f32:32x4"
// CHECK-SAME: items = 200 : i64
// CHECK-LABEL: func.func @pejit_bias_item
// CHECK-SAME: %{{.*}}: memref<32x4xf32>
// CHECK-NOT: attn.score_mod
func.func @t5(%t: tensor<32x4xf32>) -> tensor<1x4x50x70xf32> {
  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128> : tensor<32x4xf32> -> tensor<1x4x50x70xf32>
  return %b : tensor<1x4x50x70xf32>
}
