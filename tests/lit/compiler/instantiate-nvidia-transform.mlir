// attn-instantiate-nvidia-template, standalone form: a function of pe ops
// and no attention becomes templates/nvidia/transform.mlir's gpu.module,
// or embed.mlir's when it starts with pe.embed (docs/standalone-kernels.md):
//   out[b, h, i, :] = op_n(... op_0(x[b, h, i, :], ids[., i]) ...)
//   out[b, i, :] = op_n(... op_0(table[tokens[b, i]] * scale, ids[., i]) ...)
// A block = R rows of one head (grid [ceil(s / R), h, b]): the rows are
// read coalesced into a shared f32 tile (row stride d + 1), transformed one
// row per thread by the same hooks as x86 (vector width 1), then narrowed
// into out. RoPE's pair (a, b): out_a = a cos - b sin, out_b = b cos + a sin.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-nvidia-template | FileCheck %s

// A shape class (bf16, d = 64): R = 64 rows of 64 + 1 floats; the launch
// is the call's (no grid); a cos and a sin per frequency per position.
// CHECK: module attributes {gpu.container_module, pejit.kernel = {arguments = "transform_input:bf16:?x8x?x64 transform_positions:i64:?", block = [128, 1, 1], dtype = "bf16", function = "rotate", kernel = "pejit_transform", key_position_rows = 1 : i64, out_dtype = "bf16", position_axes = 1 : i64, position_limit = 0 : i64, query_position_rows = 1 : i64, scratch_floats = 0 : i64, shape = [-1, 8, 8, -1, -1, 64, 64], splits = 1 : i64, table_floats_per_key_position = 0 : i64, table_floats_per_query_position = 64 : i64, target = "nvidia", tile_m = 64 : i64, tile_n = 64 : i64}}
// CHECK-LABEL: gpu.func @pejit_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK: math.roundeven {{.*}} : vector<4xf64>
// CHECK-LABEL: gpu.func @pejit_transform
// CHECK-SAME: workgroup(%[[TILES:.*]] : memref<64x65xf32, #gpu.address_space<workgroup>>
// CHECK-NOT: attn.qk_transform
// CHECK: %[[X:.*]] = memref.reinterpret_cast %arg0 {{.*}} : memref<1xbf16> to memref<?x8x?x64xbf16>
// CHECK: %[[O:.*]] = memref.reinterpret_cast %arg1 {{.*}} : memref<1xbf16> to memref<?x8x?x64xbf16>
// CHECK: memref.load %[[X]]
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK: memref.store {{.*}}, %[[TILES]]
// CHECK: gpu.barrier
// CHECK: %[[ROW:.*]] = memref.subview %[[TILES]]{{.*}} to memref<1x64xf32, strided<[65, 1], offset: ?>, #gpu.address_space<workgroup>>
// CHECK: vector.fma
// CHECK: vector.fma
// CHECK: vector.store {{.*}}, %[[ROW]]
// CHECK: gpu.barrier
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: memref.store {{.*}}, %[[O]]
func.func @rotate(%x: tensor<?x8x?x64xbf16>, %pos: tensor<?xi64>) -> tensor<?x8x?x64xbf16> {
  %r = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<?x8x?x64xbf16>, tensor<?xi64>
  return %r : tensor<?x8x?x64xbf16>
}

// -----

// A static shape: the grid is fixed (ceil(300 / 32), 4, 2) for d = 128
// (R = 32), and so are the tables: the interleaved layout keeps 256 floats
// per position (a cos and a sin per channel), x 300 positions.
// CHECK: module attributes {gpu.container_module, pejit.kernel = {
// CHECK-SAME: grid = [10, 4, 2]
// CHECK-SAME: kernel = "pejit_transform"
// CHECK-SAME: scratch_floats = 76800 : i64
// CHECK-SAME: tile_m = 32 : i64
// CHECK-LABEL: gpu.func @pejit_transform
// CHECK-SAME: memref<32x129xf32, #gpu.address_space<workgroup>>
// CHECK: memref.reinterpret_cast %arg0 to offset: [0], sizes: [2, 4, 300, 128]
// CHECK: arith.bitcast {{.*}} : f32 to f32
func.func @rotate_static(%x: tensor<2x4x300x128xf32>, %pos: tensor<300xi32>) -> tensor<2x4x300x128xf32> {
  %r = pe.rope %x, %pos <layout = interleaved, theta = 10000.0> : tensor<2x4x300x128xf32>, tensor<300xi32>
  return %r : tensor<2x4x300x128xf32>
}

// -----

// An embedding, then a learned and a sinusoidal table, in one pass: the
// gather (clamped to the table's rows) times the scale fills the tile, then
// each op adds its table row (its part of the scratch), x + PE.
// CHECK: module attributes {gpu.container_module, pejit.kernel = {arguments = "tokens:i64:2x? token_table:bf16:100x64 transform_positions:i64:? encoding_operand=learned_table:bf16:32x64"
// CHECK-SAME: kernel = "pejit_embed"
// CHECK-SAME: position_limit = 32 : i64
// CHECK-SAME: table_floats_per_query_position = 128 : i64
// CHECK-LABEL: gpu.func @pejit_prologue
// CHECK-SAME: %{{.*}}: memref<32x64xbf16>) kernel
// CHECK-LABEL: gpu.func @pejit_embed
// CHECK: %[[TOKENS:.*]] = memref.reinterpret_cast %arg0 {{.*}} to memref<2x?xi64>
// CHECK: %[[TABLE:.*]] = memref.reinterpret_cast %arg1 {{.*}} to memref<100x64xbf16>
// CHECK: %[[TOKEN:.*]] = memref.load %[[TOKENS]]
// CHECK: %[[LOW:.*]] = arith.maxsi %[[TOKEN]]
// CHECK: arith.minsi %[[LOW]]
// CHECK: memref.load %[[TABLE]]
// CHECK: arith.mulf {{.*}} : f32
// CHECK: gpu.barrier
// CHECK: arith.addf {{.*}} : vector<1xf32>
// CHECK: arith.addf {{.*}} : vector<1xf32>
// CHECK: gpu.barrier
// CHECK: arith.truncf {{.*}} : f32 to bf16
func.func @bert(%tokens: tensor<2x?xi64>, %words: tensor<100x64xbf16>, %pos: tensor<?xi64>, %table: tensor<32x64xbf16>) -> tensor<2x?x64xbf16> {
  %t = pe.embed %tokens, %words {scale = 2.0 : f64} : tensor<2x?xi64>, tensor<100x64xbf16> -> tensor<2x?x64xbf16>
  %x = pe.learned %t, %pos, %table <max_positions = 32> : tensor<2x?x64xbf16>, tensor<?xi64>, tensor<32x64xbf16>
  %y = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<2x?x64xbf16>, tensor<?xi64>
  return %y : tensor<2x?x64xbf16>
}
