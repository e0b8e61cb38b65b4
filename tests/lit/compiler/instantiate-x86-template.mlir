// attn-instantiate-x86-template: the fused attention function becomes the x86
// AVX2 template's kernel, with the encodings' hooks expanded in place of
// attn.qk_prologue / attn.qk_transform / attn.score_mod.
//   RoPE:  prologue tables cos/sin(pos * inv_freq) (vector sin/cos in f64),
//          tile rotation out = x cos + partner(x) sin (FMA on 8 lanes), read
//          from the Q / K rows themselves and written to the tile in one pass
//          (out_a = x_a cos - x_b sin, out_b = x_b cos + x_a sin)
//   V:     read in place by P . V when f32 with full Q tiles (a view), else
//          copied (widened) into a tile
//   ALiBi: St[jr, ir] += -slope[h] * ((i0 + ir + off) - (j0 + jr))
//   RoPE's runtime scale: the prologue reads s (its encoding operand) and
//          forms angle = (pos * s) * inv_freq in f64
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// items = b * hq * ceil(sq / 144); scratch = cos and sin tables of Q and K:
// 2 * (100 + 100) positions * 32 frequencies. One Q tile: each K row is
// rotated once anyway, as the K tiles are loaded (no key cache, no prepare).
// The call plan's rule (pejit/core/CallPlan.h): 64 table floats (a cos
// and a sin per frequency) per position of Q and of K; K tiles of 96 rows
// may be cached.
// CHECK: module attributes {pejit.kernel = {arguments = "query:f32:1x4x100x64 key:f32:1x4x100x64 value:f32:1x4x100x64 positions:i64:100", decode_group = 0 : i64, dtype = "f32", function = "rope_alibi", isa = "avx2", items = 4 : i64, key_cache_tile = 96 : i64, key_position_rows = 1 : i64, lanes = 8 : i64, out_dtype = "f32", position_axes = 1 : i64, prepare_jobs = 0 : i64, products = "f32", query_position_rows = 1 : i64, scratch_floats = 12800 : i64, table_floats_per_key_position = 64 : i64, table_floats_per_query_position = 64 : i64, target = "x86-avx2", tile_m = 144 : i64, tile_n = 96 : i64}, pejit.x86_isa = "avx2"}
// The prologue runs once per call (pejit.cold: compiled without loop
// strength reduction); the items run per (b, h, Q tile).
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-SAME: attributes {llvm.emit_c_interface, pejit.cold}
// CHECK-NOT: attn.qk_prologue
// The f64 angle and its exact range reduction (round(x * 2/pi)).
// CHECK: arith.mulf {{.*}} : vector<4xf64>
// CHECK: math.roundeven {{.*}} : vector<4xf64>
// CHECK: math.fma {{.*}} : vector<4xf64>
// CHECK: arith.truncf {{.*}} : vector<4xf64> to vector<4xf32>
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: attributes {llvm.emit_c_interface} {
// CHECK-NOT: attn.qk_transform
// CHECK-NOT: attn.score_mod
// Q tile: a function of its own, off the hot path (below).
// CHECK: call @pejit_query_tile(%arg0,
// K tile: the same from K[b, h / GROUP] (@load_key_tile, below), into Ks.
// CHECK: %[[KS:.*]] = memref.cast %{{.*}} : memref<96x64xf32> to memref<96x64xf32, strided<[64, 1], offset: ?>>
// CHECK: func.call @load_key_tile(%arg1, %[[KS]], %arg5,
// CHECK: %[[VROWS:.*]] = func.call @kv_value_rows(%arg2,
// S = Ks . Qt in a function of its own (below).
// CHECK: func.call @pejit_s_tile(
// ALiBi slopes of 4 heads (2^-2, 2^-4, 2^-6, 2^-8: causal, they multiply
// the key - query distance), chosen by the head index with a chain of
// selects.
// CHECK-DAG: arith.constant 3.906250e-03 : f32
// CHECK-DAG: arith.constant 1.562500e-02 : f32
// CHECK-DAG: arith.constant 6.250000e-02 : f32
// CHECK-DAG: arith.constant 2.500000e-01 : f32
// CHECK: arith.select {{.*}} : f32
// Pointwise on 8 query rows: d = j - (i + off) in i32 lanes, then one FMA
// (causal: s + slope d = s - slope ((i + off) - j)).
// CHECK: %[[D:.*]] = arith.subi {{.*}} : vector<8xi32>
// CHECK: %[[DF:.*]] = arith.sitofp %[[D]] : vector<8xi32> to vector<8xf32>
// CHECK: math.fma %[[DF]], {{.*}} : vector<8xf32>
// The blocks (templates/x86/avx2_blocks.mlir) follow the kernel.
// Less than a full Q tile (sq = 100 < 144): V rows are copied into the Vs
// tile (decode-like items are bound by reading K and V row by row).
// CHECK-LABEL: func.func private @kv_value_rows
// CHECK: %[[V8:.*]] = vector.load %arg0[{{.*}}] : memref<1x4x100x64xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<8xf32>
// CHECK-NEXT: vector.store %[[V8]], %arg1[{{.*}}] : memref<96x64xf32>, vector<8xf32>
// CHECK: memref.cast %arg1 : memref<96x64xf32> to memref<?x64xf32, strided<[?, 1], offset: ?>>
// CHECK-LABEL: func.func private @load_key_tile
// CHECK: %[[KROWS:.*]] = memref.subview %arg0[{{.*}}] [1, 1, %{{.*}}, 64] [1, 1, 1, 1]
// CHECK: vector.load %[[KROWS]][{{.*}}] : memref<?x64xf32, strided<[?, 1], offset: ?>>, vector<8xf32>
// CHECK: vector.store {{.*}}, %arg1[{{.*}}] : memref<96x64xf32, strided<[64, 1], offset: ?>>, vector<8xf32>
// The tile functions (templates/x86/avx2_tiles.mlir) come last.
// CHECK-LABEL: func.func @pejit_query_tile
// CHECK-SAME: attributes {passthrough = ["noinline"], pejit.cold}
// Q tile: rows of Q[b, h] rotated straight into the f32 tile (half layout:
// channels c and c + 32).
// CHECK: %[[QROWS:.*]] = memref.subview %arg0[{{.*}}] [1, 1, %{{.*}}, 64] [1, 1, 1, 1] : memref<1x4x100x64xf32, strided<[?, ?, ?, 1], offset: ?>> to memref<?x64xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[XA:.*]] = vector.load %[[QROWS]][{{.*}}] : memref<?x64xf32, strided<[?, 1], offset: ?>>, vector<8xf32>
// CHECK: %[[XB:.*]] = vector.load %[[QROWS]][{{.*}}] : memref<?x64xf32, strided<[?, 1], offset: ?>>, vector<8xf32>
// CHECK: %[[XBS:.*]] = arith.mulf %[[XB]], %{{.*}} : vector<8xf32>
// CHECK: %[[NXBS:.*]] = arith.negf %[[XBS]]
// CHECK: %[[OUTA:.*]] = vector.fma %[[XA]], %{{.*}}, %[[NXBS]] : vector<8xf32>
// CHECK: vector.store %[[OUTA]], %{{.*}} : memref<144x64xf32>, vector<8xf32>
// S's register-blocked loop over d: 4 steps per trip once lowered.
// CHECK-LABEL: func.func @pejit_s_tile
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: vector.fma {{.*}} : vector<8xf32>
// CHECK: } {pejit.unroll_factor = 4 : i64}
// P . V per 6-row block: keys only some rows see (the causal diagonal, a
// window's edges) through @pv_edge_keys, which selects instead of adding
// P V where a row does not see the key (0 * a NaN in V would be NaN); the
// keys every row sees through the unrolled FMA loop.
// CHECK-LABEL: func.func @pejit_pv_tile
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: call @pv_key_ranges
// CHECK: call @pv_edge_keys
// CHECK: call @pv_plain_keys
// CHECK: call @pv_edge_keys
// CHECK-LABEL: func.func private @pv_plain_keys
// CHECK: vector.fma {{.*}} : vector<8xf32>
// CHECK: } {pejit.unroll_factor = 4 : i64}
// CHECK-LABEL: func.func private @pv_edge_row
// CHECK: %[[SEES:.*]] = arith.andi
// CHECK: arith.select %[[SEES]], {{.*}} : vector<8xf32>
func.func @rope_alibi(%q: tensor<1x4x100x64xf32>, %k: tensor<1x4x100x64xf32>, %v: tensor<1x4x100x64xf32>, %pos: tensor<100xi64>) -> tensor<1x4x100x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%pos : tensor<100xi64>) key_positions(%pos : tensor<100xi64>) causal scale(0.125) encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.alibi<num_heads = 4, form = causal>]) : tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32> -> tensor<1x4x100x64xf32>
  return %o : tensor<1x4x100x64xf32>
}

// -----

// Three Q tiles (sq = 300, tile_m = 144): K is rotated once per call into a
// key cache instead of once per Q tile. @pejit_prepare has one job per
// (b, hk, key tile): b * hkv * ceil(300 / 96) = 4. The tables take
// 2 * (300 + 300) * 32 = 38400 floats of scratch; the cache is a buffer of
// its own (the item's %arg6) of 4 tiles of 96 x 64 floats = 24576, tile
// ((b hkv + hk) nkt + jt) at that times 6144. Items read the cached tile.
// CHECK: pejit.kernel = {{{.*}}prepare_jobs = 4 : i64, {{.*}}scratch_floats = 38400 : i64
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %arg6: memref<24576xf32>
// CHECK: %[[KT:.*]] = scf.if %{{.*}} -> (memref<96x64xf32, strided<[64, 1], offset: ?>>)
// CHECK-NEXT: func.call @key_cache_tile(%arg6,
// CHECK: func.call @pejit_s_tile(%{{.*}}, %{{.*}}, %[[KT]],
// CHECK-LABEL: func.func private @key_cache_tile
// CHECK: %[[OFF:.*]] = arith.muli %{{.*}}, %c6144 : index
// CHECK: memref.reinterpret_cast %arg0 to offset: [%[[OFF]]], sizes: [96, 64], strides: [64, 1]
// Full Q tiles of f32: P . V reads V where it is (a view, no copy).
// CHECK-LABEL: func.func private @kv_value_rows
// CHECK-NEXT: %[[VIEW:.*]] = memref.subview %arg0[%arg2, %arg3, %arg4, 0] [1, 1, %arg5, 64] [1, 1, 1, 1]
// CHECK-NEXT: return %[[VIEW]] : memref<?x64xf32, strided<[?, 1], offset: ?>>
// CHECK-LABEL: func.func @pejit_prepare
// CHECK-SAME: attributes {llvm.emit_c_interface, pejit.cold}
// CHECK: scf.for %{{.*}} = %arg4 to %{{.*}} step %arg5
// CHECK: %[[TILE:.*]] = func.call @key_cache_tile(%arg1,
// CHECK-NEXT: func.call @load_key_tile(%arg0, %[[TILE]], %arg2,
func.func @rope_long(%q: tensor<1x2x300x64xf32>, %k: tensor<1x1x300x64xf32>, %v: tensor<1x1x300x64xf32>) -> tensor<1x2x300x64xf32> {
  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<1x2x300x64xf32>, tensor<1x1x300x64xf32>, tensor<1x1x300x64xf32> -> tensor<1x2x300x64xf32>
  return %o : tensor<1x2x300x64xf32>
}

// -----

// No encodings: the hooks expand to nothing; softcap becomes tanh on the
// score tile. Interleaved RoPE would swap pairs; here there is none.
// CHECK: pejit.kernel = {arguments = "query:f32:1x2x10x64 key:f32:1x1x20x64 value:f32:1x1x20x64", decode_group = 2 : i64, dtype = "f32", function = "plain", isa = "avx2", items = 2 : i64, {{.*}}scratch_floats = 0 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-NEXT: return
// CHECK-LABEL: func.func @pejit_item
// CHECK: math.tanh {{.*}} : vector<8xf32>
// CHECK-NOT: vector.shuffle
// CHECK-LABEL: func.func private @key_cache_tile
func.func @plain(%q: tensor<1x2x10x64xf32>, %k: tensor<1x1x20x64xf32>, %v: tensor<1x1x20x64xf32>) -> tensor<1x2x10x64xf32> {
  %o = attn.attention %q, %k, %v softcap(30.0) : tensor<1x2x10x64xf32>, tensor<1x1x20x64xf32>, tensor<1x1x20x64xf32> -> tensor<1x2x10x64xf32>
  return %o : tensor<1x2x10x64xf32>
}

// -----

// Interleaved RoPE: the prologue duplicates table entries per channel pair
// (cos, cos; -sin, +sin), eight frequencies at a time (angles reduced in
// float64, the polynomials in f32); the tile rotation swaps adjacent
// channels.
// CHECK-LABEL: func.func @pejit_prologue
// CHECK: math.roundeven {{.*}} : vector<4xf64>
// CHECK: vector.shuffle {{.*}} [0, 8, 1, 9, 2, 10, 3, 11] : vector<8xf32>, vector<8xf32>
// CHECK: vector.shuffle {{.*}} [4, 12, 5, 13, 6, 14, 7, 15] : vector<8xf32>, vector<8xf32>
// CHECK-LABEL: func.func @pejit_item
// CHECK: vector.shuffle {{.*}} [1, 0, 3, 2, 5, 4, 7, 6] : vector<8xf32>, vector<8xf32>
func.func @interleaved(%q: tensor<1x1x8x64xf32>, %k: tensor<1x1x8x64xf32>, %v: tensor<1x1x8x64xf32>, %qp: tensor<8xi32>, %kp: tensor<8xi32>) -> tensor<1x1x8x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<8xi32>) key_positions(%kp : tensor<8xi32>) encodings([#pe.rope<layout = interleaved, theta = 10000.0>]) : tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32> -> tensor<1x1x8x64xf32>
  return %o : tensor<1x1x8x64xf32>
}

// -----

// bf16 in, bf16 out: tiles stay f32. Without a QK transform the Q and K rows
// are only copied, widened (extf); @kv_value_rows widens V into its tile;
// @narrow8 rounds to nearest even by hand,
// (bits + 0x7fff + ((bits >> 16) & 1)) >> 16, with NaN kept quiet (0x7fc00000).
// CHECK: pejit.kernel = {arguments = "query:bf16:1x2x40x64 key:bf16:1x2x40x64 value:bf16:1x2x40x64", decode_group = 0 : i64, dtype = "bf16", {{.*}}out_dtype = "bf16"
// CHECK-LABEL: func.func @pejit_item
// CHECK: call @pejit_query_tile(%arg0,
// CHECK: func.call @load_key_tile(%arg1,
// CHECK: call @narrow_lanes({{.*}}) : (vector<8xf32>) -> vector<8xbf16>
// CHECK-LABEL: func.func private @kv_value_rows
// CHECK: vector.load %arg0[{{.*}}] : memref<1x2x40x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<8xbf16>
// CHECK: arith.extf {{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK: vector.store {{.*}} : memref<96x64xf32>, vector<8xf32>
// CHECK: memref.cast %arg1 : memref<96x64xf32> to memref<?x64xf32, strided<[?, 1], offset: ?>>
// Narrowing to bf16: a NaN becomes the quiet NaN as f32 (a select on f32
// lanes, which LLVM keeps vectorized), then (bits + 0x7fff + lsb) >> 16.
// CHECK-LABEL: func.func private @narrow_lanes
// CHECK: %[[QNAN:.*]] = arith.constant dense<0x7FC00000> : vector<8xf32>
// CHECK: %[[NAN:.*]] = arith.cmpf uno
// CHECK: arith.select %[[NAN]], %[[QNAN]], %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK: arith.constant dense<32767> : vector<8xi32>
// CHECK: arith.trunci {{.*}} : vector<8xi32> to vector<8xi16>
// CHECK: arith.bitcast {{.*}} : vector<8xi16> to vector<8xbf16>
// CHECK-LABEL: func.func private @load_key_tile
// CHECK: %[[KROWS:.*]] = memref.subview %arg0{{.*}} to memref<?x64xbf16, strided<[?, 1], offset: ?>>
// CHECK: vector.load %[[KROWS]]
// CHECK: arith.extf {{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK-LABEL: func.func @pejit_query_tile
// CHECK: %[[QROWS:.*]] = memref.subview %arg0{{.*}} to memref<?x64xbf16, strided<[?, 1], offset: ?>>
// CHECK: %[[Q8:.*]] = vector.load %[[QROWS]][{{.*}}] : memref<?x64xbf16, strided<[?, 1], offset: ?>>, vector<8xbf16>
// CHECK: %[[Q8F:.*]] = arith.extf %[[Q8]] : vector<8xbf16> to vector<8xf32>
// CHECK: vector.store %[[Q8F]], %{{.*}} : memref<144x64xf32>, vector<8xf32>
func.func @bf16_io(%q: tensor<1x2x40x64xbf16>, %k: tensor<1x2x40x64xbf16>, %v: tensor<1x2x40x64xbf16>) -> tensor<1x2x40x64xbf16> {
  %o = attn.attention %q, %k, %v causal : tensor<1x2x40x64xbf16>, tensor<1x2x40x64xbf16>, tensor<1x2x40x64xbf16> -> tensor<1x2x40x64xbf16>
  return %o : tensor<1x2x40x64xbf16>
}

// -----

// T5 (bidirectional, 32 buckets, max_distance 128). Once per query tile,
// the bias by d = i + off - j is tabulated in the tile's scratch (rows +
// skv - 1 = 243 entries, rounded up to 248): rel = -d, n = |rel|, bucket =
// (rel > 0) 16 + (n < 8 ? n : 8 + #{t : n >= t}) over the 7 thresholds
// where T5's log bucket steps up (12, 16, 23, 32, 46, 64, 91), a gather of
// table[bucket, h]. The score hook then reads 8 consecutive entries per 8
// query rows: e = (i - i0) + (skv - 1) - j, one load and one add. The
// table is an encoding operand slot of @pejit_item.
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %{{[^:]*}}: memref<32x4xf32>, %{{[^:]*}}: memref<1xf32>, %{{[^:]*}}: memref<1xf32>, %{{[^:]*}}: memref<1xf32>, %{{[^:]*}}: memref<1x{{[0-9]+}}xi64>, %{{[^:]*}}: memref<1x{{[0-9]+}}xi64>, %{{[^:]*}}: index)
// CHECK: %[[TS:.*]] = memref.alloca() {alignment = 64 : i64} : memref<248xf32>
// CHECK: math.absi {{.*}} : vector<8xi32>
// CHECK-DAG: arith.constant dense<12> : vector<8xi32>
// CHECK-DAG: arith.constant dense<91> : vector<8xi32>
// CHECK: vector.gather %{{.*}}[%{{.*}}, %{{.*}}] [%{{.*}}], %{{.*}}, %{{.*}} : memref<32x4xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<248xf32, strided<[1]>>, vector<8xf32>
// CHECK: %[[E:.*]] = arith.maxsi %{{.*}}, %{{.*}} : i32
// CHECK: %[[AT:.*]] = arith.index_cast %[[E]] : i32 to index
// CHECK: %[[BIAS:.*]] = vector.load %{{.*}}[%[[AT]]] : memref<248xf32, strided<[1]>>, vector<8xf32>
// CHECK: arith.addf %{{.*}}, %[[BIAS]] : vector<8xf32>
// CHECK-NOT: attn.score_mod
// CHECK-NOT: attn.query_tile_prologue
func.func @t5(%q: tensor<1x4x100x64xf32>, %k: tensor<1x4x100x64xf32>, %v: tensor<1x4x100x64xf32>, %t: tensor<32x4xf32>) -> tensor<1x4x100x64xf32> {
  %o = attn.attention %q, %k, %v scale(1.0) encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128>]) encoding_operands(%t : tensor<32x4xf32>) : tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32> -> tensor<1x4x100x64xf32>
  return %o : tensor<1x4x100x64xf32>
}

// -----

// M-RoPE with sections [8, 12, 12] over [3, s] ids: the prologue's position
// memrefs hold one block of rows per axis ([3, s]); each section's
// frequencies read their axis's row (axis a: row a * rows + r).
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-SAME: memref<3x40xi64>
// CHECK-COUNT-3: memref.load %arg0[%{{.*}}, %{{.*}}] : memref<3x40xi64>
// CHECK-LABEL: func.func @pejit_item
func.func @mrope(%q: tensor<1x4x40x64xf32>, %k: tensor<1x4x40x64xf32>, %v: tensor<1x4x40x64xf32>, %p: tensor<3x40xi64>) -> tensor<1x4x40x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%p : tensor<3x40xi64>) key_positions(%p : tensor<3x40xi64>) causal encodings([#pe.rope<layout = half, theta = 1000000.0, sections = [8, 12, 12]>]) : tensor<1x4x40x64xf32>, tensor<1x4x40x64xf32>, tensor<1x4x40x64xf32> -> tensor<1x4x40x64xf32>
  return %o : tensor<1x4x40x64xf32>
}

// -----

// 2-D axial RoPE: [2, s] ids (x, y); frequency pairs [0, 16) take axis x
// (row r), [16, 32) axis y (row rows + r): two loads per position.
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-SAME: memref<2x40xi64>
// CHECK-COUNT-2: memref.load %arg0[%{{.*}}, %{{.*}}] : memref<2x40xi64>
// CHECK-NOT: memref.load %arg0[%{{.*}}, %{{.*}}] : memref<2x40xi64>
// CHECK-LABEL: func.func @pejit_item
func.func @axial(%q: tensor<1x4x40x64xf32>, %k: tensor<1x4x40x64xf32>, %v: tensor<1x4x40x64xf32>, %p: tensor<2x40xi64>) -> tensor<1x4x40x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x40xi64>) key_positions(%p : tensor<2x40xi64>) encodings([#pe.rope<layout = interleaved, theta = 100.0, axial = true>]) : tensor<1x4x40x64xf32>, tensor<1x4x40x64xf32>, tensor<1x4x40x64xf32> -> tensor<1x4x40x64xf32>
  return %o : tensor<1x4x40x64xf32>
}

// -----

// Shaw's key term (clip 4): once per query tile QaK[m, r] = q_r . aK[m]
// (8 channels per FMA, then a sum) into the tile's scratch (9 x 144 rows);
// per 8 scores QaK[clamp(j - i - off, -4, 4) + 4, i - i0]: one load when
// the 8 rows share a bucket, else a gather; s + scale * term, before any
// score bias.
// CHECK-LABEL: func.func @pejit_item
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<1296xf32>
// CHECK: vector.fma {{.*}} : vector<8xf32>
// CHECK: vector.reduction <add>, {{.*}} : vector<8xf32> into f32
// CHECK: vector.reduction <and>, {{.*}} : vector<8xi1> into i1
// CHECK: vector.load {{.*}} : memref<1296xf32, strided<[1]>>, vector<8xf32>
// CHECK: vector.gather {{.*}} : memref<1296xf32, strided<[1]>>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK: math.fma {{.*}} : vector<8xf32>
// CHECK-NOT: attn.score_mod
func.func @shaw(%q: tensor<1x4x100x64xf32>, %k: tensor<1x4x100x64xf32>, %v: tensor<1x4x100x64xf32>, %aK: tensor<9x64xf32>) -> tensor<1x4x100x64xf32> {
  %o = attn.attention %q, %k, %v scale(0.125) encodings([#pe.relative_key<clip = 4>]) encoding_operands(%aK : tensor<9x64xf32>) : tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32> -> tensor<1x4x100x64xf32>
  return %o : tensor<1x4x100x64xf32>
}

// -----

// Shaw's value term (clip 4, 9 buckets): the item keeps VT [9, 144] for its
// query tile; per KV tile VT[m, r] *= alpha[r] and each probability is added
// into VT[clamp(j - i - off, -4, 4) + 4, r] (a gather and a scatter of 8
// query rows, or one load and store when the 8 rows share a bucket); once
// per tile Os[r] += sum_m VT[m, r] aV[m] before / l.
// CHECK-LABEL: func.func @pejit_item
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<1296xf32>
// CHECK: call @pejit_value_term_tile
// CHECK: call @pejit_value_term_finish
// CHECK-LABEL: func.func @pejit_value_term_tile
// CHECK-NOT: attn.value_term_bucket
// CHECK: arith.maxsi {{.*}} : vector<8xi32>
// CHECK: arith.minsi {{.*}} : vector<8xi32>
// CHECK: vector.reduction <and>, {{.*}} : vector<8xi1> into i1
// CHECK: vector.store {{.*}} : memref<1296xf32>, vector<8xf32>
// CHECK: vector.gather {{.*}} : memref<1296xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK: vector.scatter {{.*}} : memref<1296xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32>
// CHECK-LABEL: func.func @pejit_value_term_finish
// CHECK-NOT: attn.value_term_row
// CHECK: vector.load %arg5[{{.*}}] : memref<9x64xf32>, vector<8xf32>
// CHECK: vector.fma {{.*}} : vector<8xf32>
func.func @shaw_value(%q: tensor<1x4x100x64xf32>, %k: tensor<1x4x100x64xf32>, %v: tensor<1x4x100x64xf32>, %aV: tensor<9x64xf32>) -> tensor<1x4x100x64xf32> {
  %o = attn.attention %q, %k, %v scale(0.125) encodings([#pe.relative_value<clip = 4>]) encoding_operands(%aV : tensor<9x64xf32>) : tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32> -> tensor<1x4x100x64xf32>
  return %o : tensor<1x4x100x64xf32>
}

// -----

// ALiBi by position: per 8 scores the expansion reads the 8 consecutive
// query rows' ids with one load when they lie inside [0, s) (else a gather
// of clamped indices), and the key's id with one scalar load, broadcast;
// the bias uses d = key_pos - query_pos as f32, converted as
// 65536 f32(d >> 16) + f32(d & 0xffff) (i32 conversions, exact parts).
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: memref<1x64xi64>
// CHECK: scf.if
// CHECK: vector.load %{{.*}} : memref<1x64xi64>, vector<8xi64>
// CHECK: } else {
// CHECK: vector.gather %{{.*}} : memref<1x64xi64>, vector<8xi32>, vector<8xi1>, vector<8xi64> into vector<8xi64>
// CHECK: memref.load %{{.*}} : memref<1x64xi64>
// CHECK: vector.broadcast {{.*}} : i64 to vector<8xi64>
// CHECK: arith.subi {{.*}} : vector<8xi64>
// CHECK: arith.shrsi {{.*}} : vector<8xi64>
// CHECK: arith.andi {{.*}} : vector<8xi64>
// CHECK: arith.sitofp {{.*}} : vector<8xi32> to vector<8xf32>
// CHECK: arith.sitofp {{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NOT: vector<8xi64> to vector<8xf32>
func.func @alibi_by_position(%q: tensor<1x4x64x64xf32>, %k: tensor<1x4x64x64xf32>, %v: tensor<1x4x64x64xf32>, %qp: tensor<64xi64>, %kp: tensor<64xi64>) -> tensor<1x4x64x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<64xi64>) key_positions(%kp : tensor<64xi64>) causal scale(0.125) encodings([#pe.alibi<num_heads = 4, form = causal, relative_to = position>]) : tensor<1x4x64x64xf32>, tensor<1x4x64x64xf32>, tensor<1x4x64x64xf32> -> tensor<1x4x64x64xf32>
  return %o : tensor<1x4x64x64xf32>
}

// -----

// A shape class: `?` lengths (docs/shape-classes.md). The memrefs carry
// them, the item reads them (memref.dim) and derives NQT = ceil(sq / 144)
// and OFF = skv - sq; nothing is planned at compile time (items,
// scratch_floats and prepare_jobs 0: the runtime plans each call with the
// rule in key_cache_tile, tile_m and table_floats_per_*), and the key cache
// is `?` floats: the runtime passes 0 when a call does not use it. f32 V is
// viewed for full Q tiles and copied for partial ones, per call.
// CHECK: pejit.kernel = {arguments = "query:f32:1x2x?x64 key:f32:1x1x?x64 value:f32:1x1x?x64", {{.*}}items = 0 : i64, key_cache_tile = 96 : i64, {{.*}}prepare_jobs = 0 : i64, {{.*}}scratch_floats = 0 : i64, table_floats_per_key_position = 64 : i64, table_floats_per_query_position = 64 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-SAME: %arg0: memref<1x?xi64>, %arg1: memref<1x?xi64>
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %arg0: memref<1x2x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK-SAME: %arg5: memref<?xf32>
// CHECK: %[[SQ:.*]] = memref.dim %arg0, %c2
// CHECK: %[[SKV:.*]] = memref.dim %arg1, %c2
// CHECK: %[[UP:.*]] = arith.addi %[[SQ]], %c144
// CHECK: %[[UP1:.*]] = arith.subi %[[UP]], %c1
// CHECK: arith.divui %[[UP1]], %c144
// CHECK: arith.subi %[[SKV]], %[[SQ]]
// One query row (a decode step) takes the row functions: S by dot
// products, P . V one row (templates/x86/avx2_rows.mlir).
// CHECK: func.call @pejit_s_row(
// CHECK-NEXT: } else {
// CHECK: func.call @pejit_s_tile(
// CHECK-NOT: attn.score_mod
// CHECK: func.call @pejit_pv_row(
// CHECK-NEXT: } else {
// CHECK-NEXT: func.call @pejit_pv_tile(
// CHECK-LABEL: func.func private @key_cache_used
// CHECK: %[[FLOATS:.*]] = memref.dim %arg0, %c0 : memref<?xf32>
// CHECK: arith.cmpi ugt, %[[FLOATS]], %c0
// CHECK-LABEL: func.func private @kv_value_rows
// CHECK: scf.if %arg6 -> (memref<?x64xf32, strided<[?, 1], offset: ?>>)
// CHECK: memref.subview %arg0
// CHECK: } else {
// CHECK: memref.cast %arg1
// CHECK-LABEL: func.func @pejit_query_tile
// CHECK-NOT: attn.qk_transform
// CHECK-LABEL: func.func @pejit_s_tile
func.func @shape_class(%q: tensor<1x2x?x64xf32>, %k: tensor<1x1x?x64xf32>, %v: tensor<1x1x?x64xf32>) -> tensor<1x2x?x64xf32> {
  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<1x2x?x64xf32>, tensor<1x1x?x64xf32>, tensor<1x1x?x64xf32> -> tensor<1x2x?x64xf32>
  return %o : tensor<1x2x?x64xf32>
}

// -----

// A runtime position scale: the prologue takes the encoding operand slots
// and multiplies each position (as f64) by s[0] before the frequencies.
// CHECK: arguments = "query:f32:1x4x16x64 key:f32:1x4x16x64 value:f32:1x4x16x64 positions:i64:16 encoding_operand=rope_position_scale:f32:1"
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<1xf32>
// CHECK-NOT: attn.qk_prologue
// CHECK: %[[SV:.*]] = memref.load %[[S]]
// CHECK: %[[S64:.*]] = arith.extf %[[SV]] : f32 to f64
// CHECK: %[[POS:.*]] = arith.sitofp {{.*}} : i64 to f64
// CHECK: arith.mulf %[[POS]], %[[S64]] : f64
// CHECK-LABEL: func.func @pejit_item
func.func @runtime_scale(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %p: tensor<16xi64>, %s: tensor<1xf32>) -> tensor<1x4x16x64xf32> {
  %o = attn.attention %q, %k, %v query_positions(%p : tensor<16xi64>) key_positions(%p : tensor<16xi64>) encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>]) encoding_operands(%s : tensor<1xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// -----

// A training forward (an lse result): the signature says `lse`, there is no
// grouped decode item, and @pejit_item writes lse_i = m_i + log l_i (-inf
// for a row that saw no key) when the run passes rows of it.
// CHECK: pejit.kernel = {arguments = "lse query:f32:1x4x?x64
// CHECK-SAME: decode_group = 0 : i64
// CHECK-LABEL: func.func @pejit_item
// CHECK-SAME: %arg4: memref<?x4x?x1xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: memref.dim %arg4, %{{.*}} : memref<?x4x?x1xf32
// CHECK: math.log %{{.*}} : f32
// CHECK: memref.store %{{.*}}, %arg4[
func.func @training(%q: tensor<1x4x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>) -> (tensor<1x4x?x64xf32>, tensor<1x4x?xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x4x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x4x?x64xf32>, tensor<1x4x?xf32>
  return %o, %lse : tensor<1x4x?x64xf32>, tensor<1x4x?xf32>
}
