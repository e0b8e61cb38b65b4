// attn-instantiate-nvidia-template: a fused f16/bf16 attention becomes the
// gpu.module of templates/nvidia/mma_attention.mlir, hooks expanded.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-nvidia-template | FileCheck %s

// RoPE (LLaMA-style, GQA 4/2) + causal, f16 in, f32 out. The prologue
// fills the tables over the grid (rows(first, step) -> a strided loop); Q
// and K rows are widened to f32, rotated, narrowed back (half layout:
// out_a = a cos - b sin, out_b = b cos + a sin).
// CHECK: module attributes {gpu.container_module, pejit.kernel = {
// CHECK-SAME: block = [128, 1, 1]
// CHECK-SAME: dtype = "f16"
// CHECK-SAME: grid = [2, 4, 1]
// CHECK-SAME: out_dtype = "f32"
// CHECK-LABEL: func.func private @mma_f16
// CHECK: nvgpu.mma.sync
// CHECK-LABEL: gpu.func @pejit_prologue
// CHECK: scf.for {{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: gpu.func @pejit_attention
// CHECK-SAME: workgroup(
// CHECK: memref.subview
// CHECK: arith.extf {{.*}} : vector<1xf16> to vector<1xf32>
// CHECK: vector.fma
// CHECK: arith.truncf {{.*}} : vector<1xf32> to vector<1xf16>
// CHECK-NOT: attn.qk_transform
// CHECK: func.call @mma_f16
// CHECK: gpu.shuffle xor
func.func @rope(%q: tensor<1x4x100x64xf16>, %k: tensor<1x2x100x64xf16>, %v: tensor<1x2x100x64xf16>, %pos: tensor<100xi64>) -> tensor<1x4x100x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%pos : tensor<100xi64>) key_positions(%pos : tensor<100xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<1x4x100x64xf16>, tensor<1x2x100x64xf16>, tensor<1x2x100x64xf16> -> tensor<1x4x100x64xf32>
  return %o : tensor<1x4x100x64xf32>
}

// -----

// ALiBi (4 heads), bf16 in and out: the pointwise score hook runs on one
// score per lane, d = i + off - j in i32, then bias = fma(|d|, -slope, s)
// (symmetric); bf16 mma goes through nvvm.mma.sync on packed i32 fragments.
// CHECK-LABEL: func.func private @mma_bf16
// CHECK: nvvm.mma.sync
// CHECK-SAME: multiplicandAPtxType = #nvvm.mma_type<bf16>
// CHECK-LABEL: gpu.func @pejit_attention
// CHECK: memref.reinterpret_cast {{.*}} : memref<1xbf16> to memref<1x4x70x128xbf16>
// CHECK: arith.select {{.*}} : f32
// CHECK: %[[D:.*]] = arith.subi {{.*}} : i32
// CHECK: %[[DF:.*]] = arith.sitofp %[[D]] : i32 to f32
// CHECK: %[[ABS:.*]] = math.absf %[[DF]] : f32
// CHECK: math.fma %[[ABS]], {{.*}} : f32
// CHECK-NOT: attn.score_mod
// CHECK: func.call @out_bf16
func.func @alibi(%q: tensor<1x4x70x128xbf16>, %k: tensor<1x4x70x128xbf16>, %v: tensor<1x4x70x128xbf16>) -> tensor<1x4x70x128xbf16> {
  %o = attn.attention %q, %k, %v encodings([#pe.alibi<num_heads = 4, form = symmetric>]) : tensor<1x4x70x128xbf16>, tensor<1x4x70x128xbf16>, tensor<1x4x70x128xbf16> -> tensor<1x4x70x128xbf16>
  return %o : tensor<1x4x70x128xbf16>
}

// -----

// T5 (one-sided, for a causal decoder), f16 with an f16 table: one score
// per lane, n = max(-rel, 0), the bucket in i32, and one load of
// table[bucket, h], widened to f32. The table is a bare pointer argument
// after the fixed ones.
// CHECK-LABEL: gpu.func @pejit_attention
// CHECK-SAME: %{{[^:]*}}: memref<32x4xf16>) workgroup
// CHECK: arith.maxsi {{.*}} : i32
// CHECK: %[[T:.*]] = memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<32x4xf16>
// CHECK: arith.extf %[[T]] : f16 to f32
// CHECK-NOT: attn.score_mod
func.func @t5_causal(%q: tensor<1x4x70x64xf16>, %k: tensor<1x4x70x64xf16>, %v: tensor<1x4x70x64xf16>, %t: tensor<32x4xf16>) -> tensor<1x4x70x64xf16> {
  %o = attn.attention %q, %k, %v causal scale(1.0) encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>]) encoding_operands(%t : tensor<32x4xf16>) : tensor<1x4x70x64xf16>, tensor<1x4x70x64xf16>, tensor<1x4x70x64xf16> -> tensor<1x4x70x64xf16>
  return %o : tensor<1x4x70x64xf16>
}

// -----

// Softcap (Gemma 2), pointwise per score before the biases:
// s = 30 tanh(s / 30), then ALiBi.
// CHECK-LABEL: gpu.func @pejit_attention
// CHECK: %[[T:.*]] = math.tanh %{{.*}} : f32
// CHECK: arith.mulf %[[T]], %{{.*}} : f32
// CHECK: math.fma
// CHECK-NOT: attn.score_mod
func.func @softcap_alibi(%q: tensor<1x4x40x64xf16>, %k: tensor<1x4x40x64xf16>, %v: tensor<1x4x40x64xf16>) -> tensor<1x4x40x64xf32> {
  %o = attn.attention %q, %k, %v causal softcap(30.0) encodings([#pe.alibi<num_heads = 4, form = causal>]) : tensor<1x4x40x64xf16>, tensor<1x4x40x64xf16>, tensor<1x4x40x64xf16> -> tensor<1x4x40x64xf32>
  return %o : tensor<1x4x40x64xf32>
}

// -----

// Shaw a^K and a^V (clip 2, 5 buckets), f16 a^K and f32 a^V tables, in
// shared memory beside the K and V tiles:
//   QaK[m, r] = q_(i0 + r) . aK[m]      once per query tile, threads split
//                                        the rows (8 channels per FMA)
//   s += scale QaK[clamp(j - i, -2, 2) + 2, i - i0]           per score
//   VT[m, r] *= alpha(r);  VT[bucket(i, j), r] += p   (per KV tile; atomics)
//   O[r, c] += sum_m VT[m, r] aV[m, c]              before the division by l
// CHECK-LABEL: func.func private @pejit_value_term_tile
// CHECK: gpu.barrier
// CHECK: arith.maxsi {{.*}} : i32
// CHECK: memref.atomic_rmw addf
// CHECK-NOT: attn.value_term_bucket
// CHECK-LABEL: func.func private @pejit_value_term_finish
// CHECK: vector.load {{.*}} : memref<5x64xf32>, vector<2xf32>
// CHECK: math.fma
// CHECK-NOT: attn.value_term_row
// CHECK-LABEL: gpu.func @pejit_attention
// CHECK-SAME: workgroup(%{{.*}} : memref<64x72xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<64x72xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[TS:.*]] : memref<320xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[VT:.*]] : memref<320xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[PART:.*]] = memref.subview %[[TS]][0] [320] [1]
// CHECK: scf.for %{{.*}} = %[[TID]] to %{{.*}} step %{{.*}} {
// CHECK: vector.load {{.*}} : memref<64x72xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: vector.load {{.*}} : memref<5x64xf16>, vector<8xf16>
// CHECK: vector.fma
// CHECK: vector.reduction <add>
// CHECK: memref.store {{.*}}, %[[PART]]
// CHECK-NOT: attn.query_tile_prologue
// CHECK: memref.store {{.*}}, %[[VT]]
// CHECK: scf.for
// CHECK: memref.subview %[[TS]]
// CHECK: math.fma
// CHECK-NOT: attn.score_mod
// CHECK: func.call @pejit_value_term_tile(%[[VT]],
// CHECK: func.call @pejit_value_term_finish(%[[VT]],
// CHECK: func.call @out_f32
func.func @shaw(%q: tensor<1x2x40x64xf16>, %k: tensor<1x2x40x64xf16>, %v: tensor<1x2x40x64xf16>, %aK: tensor<5x64xf16>, %aV: tensor<5x64xf32>) -> tensor<1x2x40x64xf32> {
  %o = attn.attention %q, %k, %v causal encodings([#pe.relative_key<clip = 2>, #pe.relative_value<clip = 2>]) encoding_operands(%aK, %aV : tensor<5x64xf16>, tensor<5x64xf32>) : tensor<1x2x40x64xf16>, tensor<1x2x40x64xf16>, tensor<1x2x40x64xf16> -> tensor<1x2x40x64xf32>
  return %o : tensor<1x2x40x64xf32>
}

// -----

// A shape class (docs/shape-classes.md): `?` batch and lengths. The kernels
// take bare pointers and the call's lengths (i64: b, sq, skv, splits, table
// floats) and view each pointer with them:
//   Q = reinterpret_cast(q) : [b, hq, sq, d], strides [hq sq d, sq d, d, 1]
// The launch (grid, splits) is the runtime's, per call: no grid in the
// meta, splits = 0 (the rule's), and the combine kernel is always there.
// RoPE's tables are laid out by the call's lengths (lengths(%sq, %skv)).
// CHECK: module attributes {gpu.container_module, pejit.kernel = {
// CHECK-NOT: grid =
// CHECK-SAME: shape = [-1, 4, 2, -1, -1, 64, 64]
// CHECK-SAME: splits = 0
// CHECK-SAME: table_floats_per_key_position = 64
// CHECK-LABEL: gpu.func @pejit_combine
// CHECK: memref.reinterpret_cast {{.*}} : memref<1xf32> to memref<?x4x?x?x64xf32>
// CHECK-LABEL: gpu.func @pejit_prologue
// CHECK-SAME: %{{.*}}: memref<1xi64>, %{{.*}}: memref<1xi64>, %{{.*}}: memref<1xf32>, %{{.*}}: i64, %[[NSQ:.*]]: i64, %[[NSKV:.*]]: i64, %{{.*}}: i64, %[[NS:.*]]: i64)
// CHECK-DAG: arith.index_cast %[[NS]] : i64 to index
// CHECK-DAG: arith.index_cast %[[NSQ]] : i64 to index
// CHECK: memref.reinterpret_cast {{.*}} : memref<1xf32> to memref<?xf32>
// CHECK-LABEL: gpu.func @pejit_attention
// CHECK-SAME: %[[NB:[^:]*]]: i64, %[[NSQ:[^:]*]]: i64, %[[NSKV:[^:]*]]: i64, %[[NSPLIT:[^:]*]]: i64, %{{[^:]*}}: i64) workgroup
// CHECK-DAG: %[[B:.*]] = arith.index_cast %[[NB]] : i64 to index
// CHECK-DAG: %[[SQ:.*]] = arith.index_cast %[[NSQ]] : i64 to index
// CHECK-DAG: %[[SKV:.*]] = arith.index_cast %[[NSKV]] : i64 to index
// CHECK: %[[Q:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [%[[B]], 4, %[[SQ]], 64], strides: [%{{.*}}, %{{.*}}, 64, 1] : memref<1xf16> to memref<?x4x?x64xf16>
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [%[[B]], 2, %[[SKV]], 64], strides: [%{{.*}}, %{{.*}}, 64, 1] : memref<1xf16> to memref<?x2x?x64xf16>
// CHECK: arith.subi %[[SKV]], %[[SQ]] : index
// CHECK-NOT: attn.qk_transform
// CHECK-NOT: attn.score_mod
func.func @shape_class(%q: tensor<?x4x?x64xf16>, %k: tensor<?x2x?x64xf16>, %v: tensor<?x2x?x64xf16>) -> tensor<?x4x?x64xf32> {
  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, theta = 500000.0>]) : tensor<?x4x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16> -> tensor<?x4x?x64xf32>
  return %o : tensor<?x4x?x64xf32>
}

// -----

// A RoPE's runtime position scale on NVIDIA: the prologue kernel takes the
// encoding operands after the lengths and scales each position by s[0]
// (as f64) before the frequencies: angle = (pos * s) * inv_freq.
// CHECK-LABEL: gpu.func @pejit_prologue
// CHECK-SAME: %{{.*}}: i64, %[[S:[a-z0-9_]+]]: memref<1xf32>) kernel
// CHECK-NOT: attn.qk_prologue
// CHECK: %[[SV:.*]] = memref.load %[[S]]
// CHECK: %[[S64:.*]] = arith.extf %[[SV]] : f32 to f64
// CHECK: arith.mulf %{{.*}}, %[[S64]] : f64
// CHECK-LABEL: gpu.func @pejit_attention
func.func @runtime_scale(%q: tensor<1x4x64x64xf16>, %k: tensor<1x4x64x64xf16>, %v: tensor<1x4x64x64xf16>, %p: tensor<64xi64>, %s: tensor<1xf32>) -> tensor<1x4x64x64xf16> {
  %o = attn.attention %q, %k, %v query_positions(%p : tensor<64xi64>) key_positions(%p : tensor<64xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>]) encoding_operands(%s : tensor<1xf32>) : tensor<1x4x64x64xf16>, tensor<1x4x64x64xf16>, tensor<1x4x64x64xf16> -> tensor<1x4x64x64xf16>
  return %o : tensor<1x4x64x64xf16>
}
