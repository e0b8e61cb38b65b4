// pejit-simplify = canonicalize + cse. pe and attn ops are pure: unused ones
// are erased and identical ones merged.
// RUN: pejit-opt %s --pejit-simplify | FileCheck %s

// CHECK-LABEL: func.func @dead_encoding_erased
func.func @dead_encoding_erased(%q: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) -> tensor<1x4x8x64xf32> {
  // CHECK-NOT: pe.alibi
  // CHECK-NOT: pe.rope
  // CHECK: return %arg0
  %b = pe.alibi <num_heads = 4, form = causal> : tensor<1x4x8x8xf32>
  %r = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return %q : tensor<1x4x8x64xf32>
}

// The same rotation of the same tensor twice becomes one op.
// CHECK-LABEL: func.func @identical_rotations_merged
func.func @identical_rotations_merged(%q: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) -> (tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>) {
  // CHECK: %[[R:.*]] = pe.rope
  // CHECK-NOT: pe.rope
  // CHECK: return %[[R]], %[[R]]
  %a = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  %b = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return %a, %b : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
}

// Different layouts are different encodings: nothing merges.
// CHECK-LABEL: func.func @different_layouts_kept
func.func @different_layouts_kept(%q: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) -> (tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>) {
  // CHECK: pe.rope {{.*}} <layout = half
  // CHECK: pe.rope {{.*}} <layout = interleaved
  %a = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  %b = pe.rope %q, %pos <layout = interleaved, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return %a, %b : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
}
