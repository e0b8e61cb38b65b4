// attn-instantiate-nvidia-template, linear attention form: one
// attn.linear_attention becomes templates/nvidia/linear_attention.mlir's
// gpu.module (docs/linear-attention.md, "How it runs (NVIDIA)"): a block per
// (b, hq) scans the rows; thread (p, c) keeps S[p KS + e, c], e < KS, in a
// private array the unrolled loops turn into registers. Adding keys [from,
// to): z[t] += sum_j k^_jt (softmax_keys: m' = max(m, k), a = exp(m - m'),
// w = exp(k - m'), z = z a + sum w), then S[k, c] = S[k, c] a[k] +
// sum_j w_jk v_jc. A row: sum_k coef(k) S[k, c] over the P slices, divided
// by q^ . z (elu + 1, relu).
// RUN: pejit-opt %s --split-input-file --attn-instantiate-nvidia-template | FileCheck %s

// softmax_keys with a state, f16 in, f32 out, d = dv = 64, GQA 8/2: KS =
// 16 rows of S per thread, P = 4 slices, 256 threads; tiles of 16 rows
// (num and den: 32 rows, keys then queries, of 64 + 1 floats).
// CHECK: module attributes {gpu.container_module, pejit.kernel = {arguments = "query:f16:1x8x?x64 key:f16:1x2x?x64 value:f16:1x2x?x64 linear_state:f32:1x8x64x66", block = [256, 1, 1], dtype = "f16", function = "lin", kernel = "pejit_linear"
// CHECK-SAME: shape = [1, 8, 2, -1, -1, 64, 64]
// CHECK-SAME: table_floats_per_key_position = 64 : i64, table_floats_per_query_position = 64 : i64
// CHECK-LABEL: gpu.func @pejit_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: gpu.func @pejit_linear
// CHECK-SAME: workgroup(%[[NUM:.*]] : memref<32x65xf32, #gpu.address_space<workgroup>> {{.*}}, %[[DEN:.*]] : memref<32x65xf32, #gpu.address_space<workgroup>> {{.*}}, %[[VT:.*]] : memref<16x64xf32, #gpu.address_space<workgroup>> {{.*}}, %[[PART:.*]] : memref<4x64xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: attn.qk_transform
// CHECK: %[[S:.*]] = memref.alloca() : memref<16xf32>
// The state's S, z and m come in from the state tensor.
// CHECK: memref.load %{{.*}} : memref<1x8x64x66xf32>
// CHECK: gpu.barrier
// The weights exp(k - m') and the rescale exp(m - m').
// CHECK: math.exp
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[DEN]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[S]]
// CHECK: math.fma
// CHECK: memref.store %{{.*}}, %[[S]]
// CHECK: gpu.barrier
// A row: q / z (0 where z = 0) times S, summed over the slices.
// CHECK: arith.divf
// CHECK: math.fma
// CHECK: memref.store %{{.*}}, %[[PART]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[PART]]
// And S, z and m go back to the state.
// CHECK: memref.store %{{.*}} : memref<1x8x64x66xf32>
func.func @lin(%q: tensor<1x8x?x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>, %st: tensor<1x8x64x66xf32>) -> tensor<1x8x?x64xf32> {
  %o = attn.linear_attention %q, %k, %v feature_map(softmax_keys) causal state(%st : tensor<1x8x64x66xf32>) encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_before_feature_map) : tensor<1x8x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16> -> tensor<1x8x?x64xf32>
  return %o : tensor<1x8x?x64xf32>
}

// -----

// elu + 1, RoPE on the numerator, static: grid [1, hq, b]; d = dv = 128
// gives KS = 64 (2 slices, 256 threads). phi(x) = x + 1 for x > 0, else
// e^x.
// CHECK: module attributes {gpu.container_module, pejit.kernel = {
// CHECK-SAME: block = [256, 1, 1]
// CHECK-SAME: grid = [1, 4, 2]
// CHECK-LABEL: func.func private @phi
// CHECK: arith.cmpf ogt
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.select
// CHECK-LABEL: gpu.func @pejit_linear
// CHECK: memref.alloca() : memref<64xf32>
func.func @elu(%q: tensor<2x4x300x128xbf16>, %k: tensor<2x4x300x128xbf16>, %v: tensor<2x4x300x128xbf16>) -> tensor<2x4x300x128xbf16> {
  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<2x4x300x128xbf16>, tensor<2x4x300x128xbf16>, tensor<2x4x300x128xbf16> -> tensor<2x4x300x128xbf16>
  return %o : tensor<2x4x300x128xbf16>
}
