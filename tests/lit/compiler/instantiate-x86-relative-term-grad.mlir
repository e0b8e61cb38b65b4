// attn-instantiate-x86-template, materialized Shaw term gradient form
// (pe.relative_term_grad, docs/backward.md):
//   key:   S_i[m] = sum_{j: r(i,j) = m} dE_ij;  dq_i = sum_m S_i[m] a^K[m];
//          d a^K[m] += S_i[m] q_i       (items b h ceil(sq / 16))
//   value: d a^V[m] += sum over the diagonals delta with r = m of
//          sum_i dR[i, i + delta]       (items heads ceil((sq + skv - 1) / 64))
// each item into its own partial table, summed by the runtime in item order.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// The key term, bf16 q and dE, a shared table: 2 x 4 x ceil(20 / 16) items.
// CHECK: arguments = "shaw_term_grad query:bf16:2x4x20x32 encoding_operand=shaw_key_table:bf16:9x32 output_grad:bf16:2x4x20x24"
// CHECK-SAME: items = 16 : i64
// CHECK-SAME: out_dtype = "bf16"
// CHECK-LABEL: func.func @pejit_key_term_grad_item
// CHECK: memref.alloca() : memref<9xf32>
// CHECK: arith.addf
// CHECK: math.fma %{{.*}} : vector<8xf32>
// CHECK-NOT: attn.
func.func @key_backward(%q: tensor<2x4x20x32xbf16>, %t: tensor<9x32xbf16>, %de: tensor<2x4x20x24xbf16>)
    -> (tensor<2x4x20x32xbf16>, tensor<9x32xf32>) {
  %dq, %dt = pe.relative_term_grad %de query(%q : tensor<2x4x20x32xbf16>) table(%t : tensor<9x32xbf16>)
      encoding(#pe.relative_key<clip = 4>) : tensor<2x4x20x24xbf16> -> tensor<2x4x20x32xbf16>, tensor<9x32xf32>
  return %dq, %dt : tensor<2x4x20x32xbf16>, tensor<9x32xf32>
}

// -----

// The value term, per-head tables: 4 heads x ceil(43 / 64) items.
// CHECK: arguments = "shaw_term_grad encoding_operand=shaw_value_table:f16:4x9x16 output_grad:f16:4x20x24x16"
// CHECK-SAME: items = 4 : i64
// CHECK-SAME: out_dtype = "f32"
// CHECK-LABEL: func.func @pejit_value_term_grad_item
// CHECK: arith.extf %{{.*}} : vector<8xf16> to vector<8xf32>
// CHECK-NOT: attn.
func.func @value_backward(%t: tensor<4x9x16xf16>, %dr: tensor<4x20x24x16xf16>) -> tensor<4x9x16xf32> {
  %dt = pe.relative_term_grad %dr table(%t : tensor<4x9x16xf16>) encoding(#pe.relative_value<clip = 4>)
      : tensor<4x20x24x16xf16> -> tensor<4x9x16xf32>
  return %dt : tensor<4x9x16xf32>
}
