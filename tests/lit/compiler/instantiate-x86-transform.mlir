// attn-instantiate-x86-template, standalone form: a function whose body is
// one pe op with a standalone kernel (pe.rope, pe.sinusoidal, pe.learned) becomes templates/x86/qk_transform.mlir's kernel
// (docs/standalone-kernels.md):
//   out[b, h, i, :] = qk_transform(x[b, h, i, :], ids[., i])
//   pair (a, b): out_a = x_a cos - x_b sin, out_b = x_b cos + x_a sin,
//   the cos/sin tables filled by the prologue for the ids as Q's (the key
//   side's ids are empty), the rows read from x into an f32 tile, rotated
//   on the way, then narrowed into out.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// A shape class: items = b h ceil(s / 16), planned per call (0 here); a
// cos and a sin per frequency (2 x 32) per position.
// CHECK: module attributes {pejit.kernel = {arguments = "transform_input:f32:?x8x?x64 transform_positions:i64:?", dtype = "f32", function = "rotate", isa = "avx2", items = 0 : i64, key_position_rows = 1 : i64, lanes = 8 : i64, out_dtype = "f32", position_axes = 1 : i64, position_limit = 0 : i64, query_position_rows = 1 : i64, scratch_floats = 0 : i64, table_floats_per_query_position = 64 : i64, target = "x86-avx2", tile_m = 16 : i64, tile_n = 16 : i64}, pejit.x86_isa = "avx2"}
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-SAME: (%{{.*}}: memref<1x?xi64>, %{{.*}}: memref<1x0xi64>, %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<1xf32>)
// CHECK-NOT: attn.qk_prologue
// CHECK: math.roundeven {{.*}} : vector<4xf64>
// CHECK-LABEL: func.func @pejit_transform_item
// CHECK-SAME: (%[[X:.*]]: memref<?x8x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>, %[[O:.*]]: memref<?x8x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>, %{{.*}}: memref<?xf32>, %{{.*}}: index)
// CHECK-NOT: attn.qk_transform
// CHECK: %[[TILE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
// CHECK: memref.subview %[[X]]
// The rotation: two FMAs per 8 lanes of a pair of half-rows.
// CHECK: vector.fma
// CHECK: vector.fma
// Out of place and over STREAM_MIN (2^22) elements, the stores are
// non-temporal; in place (same base and offset) or smaller, plain.
// CHECK: %[[LARGE:.*]] = arith.cmpi ugt, %{{.*}}, %c4194304
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// CHECK: memref.extract_aligned_pointer_as_index %[[O]]
// CHECK: %[[STREAM:.*]] = arith.andi %[[LARGE]]
// CHECK: scf.if %[[STREAM]]
// CHECK: vector.load %[[TILE]]
// CHECK: vector.store %{{.*}}, %[[O]]{{.*}} {nontemporal = true}
// CHECK: } else {
// CHECK: vector.load %[[TILE]]
// CHECK: vector.store %{{.*}}, %[[O]]
// CHECK-NOT: nontemporal
func.func @rotate(%x: tensor<?x8x?x64xf32>, %pos: tensor<?xi64>) -> tensor<?x8x?x64xf32> {
  %r = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<?x8x?x64xf32>, tensor<?xi64>
  return %r : tensor<?x8x?x64xf32>
}

// -----

// bf16 in and out: rows widened as they are read, the tile narrowed
// (round to nearest even) as it is stored; a static shape plans its items
// (1 x 2 x ceil(20 / 16) = 4) and tables (2 x 32 x 20 floats).
// CHECK: items = 4 : i64
// CHECK-SAME: scratch_floats = 1280 : i64
// 16-bit rows: the next item's rows are prefetched first.
// CHECK-LABEL: func.func @pejit_transform_item
// CHECK: %[[PREFETCH:.*]] = arith.constant true
// CHECK: %[[NEXT:.*]] = arith.andi %[[PREFETCH]]
// CHECK: scf.if %[[NEXT]]
// CHECK: memref.prefetch {{.*}}, read, locality<3>, data : memref<1x2x20x64xbf16
// CHECK: arith.extf {{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK: call @narrow8
// CHECK: vector.store {{.*}} : memref<1x2x20x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<8xbf16>
func.func @rotate_bf16(%x: tensor<1x2x20x64xbf16>, %pos: tensor<20xi32>) -> tensor<1x2x20x64xbf16> {
  %r = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x2x20x64xbf16>, tensor<20xi32>
  return %r : tensor<1x2x20x64xbf16>
}

// -----

// pe.sinusoidal on its own: x [b, s, d] read as [b, 1, s, d];
//   out[b, t, 2i] = x + sin(p / base^(2i/d)), out[b, t, 2i+1] = x + cos(...)
// The prologue fills d floats per position ([sin, cos] per pair): eight
// pairs at a time, the angles p / base^(2i/d) formed and reduced mod pi/2
// in float64 (two halves of four), the polynomials on the reduced angle in
// f32 (8 lanes), then interleaved sin, cos; the tile transform adds a
// table row to each row of x.
// CHECK: arguments = "transform_input:f32:?x?x64 transform_positions:i64:?"
// CHECK-SAME: table_floats_per_query_position = 64 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK: arith.mulf {{.*}} : vector<4xf64>
// CHECK: math.roundeven {{.*}} : vector<4xf64>
// CHECK: arith.truncf {{.*}} : vector<4xf64> to vector<4xf32>
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf32>, vector<4xf32>
// CHECK: math.fma {{.*}} : vector<8xf32>
// CHECK: vector.shuffle {{.*}} [0, 8, 1, 9, 2, 10, 3, 11] : vector<8xf32>, vector<8xf32>
// CHECK: vector.shuffle {{.*}} [4, 12, 5, 13, 6, 14, 7, 15] : vector<8xf32>, vector<8xf32>
// CHECK-LABEL: func.func @pejit_transform_item
// CHECK-SAME: (%[[X:.*]]: memref<?x1x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>, %[[O:.*]]: memref<?x1x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: %[[TILE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<16x64xf32>
// CHECK: arith.addf {{.*}} : vector<8xf32>
// CHECK: vector.store %{{.*}}, %[[TILE]]
// CHECK: vector.store %{{.*}}, %[[O]]
func.func @embed(%x: tensor<?x?x64xf32>, %pos: tensor<?xi64>) -> tensor<?x?x64xf32> {
  %e = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<?x?x64xf32>, tensor<?xi64>
  return %e : tensor<?x?x64xf32>
}

// -----

// pe.learned on its own (BERT's position embeddings): x [b, s, d] read as
// [b, 1, s, d];
//   out[b, t, :] = x[b, t, :] + table[p, :]
// The table is the kernel's encoding operand; the prologue copies row
// clamp(p, 0, max_positions - 1) of it per position (run refuses ids
// outside [0, max_positions): position_limit), widened to f32; the tile
// transform adds it to each row of x.
// CHECK: arguments = "transform_input:bf16:2x?x64 transform_positions:i64:? encoding_operand=learned_table:bf16:512x64"
// CHECK-SAME: position_limit = 512 : i64
// CHECK-SAME: table_floats_per_query_position = 64 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-SAME: %[[TABLE:[^:]*]]: memref<512x64xbf16>)
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: vector.load %[[TABLE]]{{.*}} : memref<512x64xbf16>, vector<8xbf16>
// CHECK: arith.extf {{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK-LABEL: func.func @pejit_transform_item
// CHECK: arith.addf {{.*}} : vector<8xf32>
func.func @bert_positions(%x: tensor<2x?x64xbf16>, %pos: tensor<?xi64>, %table: tensor<512x64xbf16>) -> tensor<2x?x64xbf16> {
  %e = pe.learned %x, %pos, %table <max_positions = 512> : tensor<2x?x64xbf16>, tensor<?xi64>, tensor<512x64xbf16>
  return %e : tensor<2x?x64xbf16>
}

// -----

// pe.embed, then the absolute embeddings on its result, in one pass:
//   out[b, t, :] = words[tokens[b, t]] * scale + PE_sin(p) + table[p]
// The gather fills the f32 tile (the token clamped into the table; run
// refuses others), then each pe op transforms it in place, each with its
// own part of the scratch: sinusoidal's at the start, learned's after it
// (64 floats per position each, 128 in all).
// CHECK: arguments = "tokens:i64:?x? token_table:f32:100x64 transform_positions:i64:? encoding_operand=learned_table:f32:16x64"
// CHECK-SAME: position_limit = 16 : i64
// CHECK-SAME: table_floats_per_query_position = 128 : i64
// CHECK-LABEL: func.func @pejit_prologue
// CHECK: memref.subview %{{.*}}[%{{.*}}] [%{{.*}}] [1] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK: math.roundeven {{.*}} : vector<4xf64>
// CHECK: arith.minsi
// CHECK-LABEL: func.func @pejit_embed_item
// CHECK-SAME: (%[[TOK:[^:]*]]: memref<?x?xi64>, %[[WORDS:[^:]*]]: memref<100x64xf32>
// The table rows of the first 4 tokens prefetched, then per row the one 4
// rows ahead before the gather.
// CHECK: call @prefetch_token_row(%[[TOK]], %[[WORDS]]
// CHECK: scf.for
// CHECK: scf.if
// CHECK: call @prefetch_token_row(%[[TOK]], %[[WORDS]]
// CHECK: memref.load %[[TOK]]
// CHECK: arith.minsi
// CHECK: vector.load %[[WORDS]]
// CHECK: arith.mulf
// CHECK: arith.addf {{.*}} : vector<8xf32>
// CHECK: arith.addf {{.*}} : vector<8xf32>
// CHECK-LABEL: func.func private @prefetch_token_row
// CHECK: arith.maxsi
// CHECK: arith.minsi {{.*}}, %c99_i64
// CHECK: memref.prefetch {{.*}} : memref<100x64xf32>
func.func @bert_embeddings(%tok: tensor<?x?xi64>, %words: tensor<100x64xf32>, %pos: tensor<?xi64>, %table: tensor<16x64xf32>) -> tensor<?x?x64xf32> {
  %t = pe.embed %tok, %words {scale = 8.0} : tensor<?x?xi64>, tensor<100x64xf32> -> tensor<?x?x64xf32>
  %s = pe.sinusoidal %t, %pos <base = 10000.0> : tensor<?x?x64xf32>, tensor<?xi64>
  %e = pe.learned %s, %pos, %table <max_positions = 16> : tensor<?x?x64xf32>, tensor<?xi64>, tensor<16x64xf32>
  return %e : tensor<?x?x64xf32>
}

// -----

// The standalone backward, pe.rope adjoint (attn-derive-backward's): the
// same kernel with the rotation transposed, read from the dy rows:
//   pair (a, b): dx_a = g_a cos + g_b sin, dx_b = g_b cos - g_a sin
// i.e. the forward's formula with sin negated.
// CHECK: module attributes {pejit.kernel = {arguments = "transform_input:bf16:?x8x?x64 transform_positions:i64:?", dtype = "bf16", function = "rotate_back"
// CHECK-LABEL: func.func @pejit_transform_item
// CHECK-SAME: (%[[DY:[a-z0-9]+]]: memref<?x8x?x64xbf16
// CHECK: %[[ROWS:[a-z0-9_]+]] = memref.subview %[[DY]]
// CHECK: %[[SIN:.*]] = arith.negf %{{.*}} : vector<8xf32>
// CHECK: vector.load %[[ROWS]]
// CHECK: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
// CHECK: vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<8xf32>
func.func @rotate_back(%dy: tensor<?x8x?x64xbf16>, %pos: tensor<?xi64>) -> tensor<?x8x?x64xbf16> {
  %r = pe.rope adjoint %dy, %pos <layout = half, theta = 10000.0> : tensor<?x8x?x64xbf16>, tensor<?xi64>
  return %r : tensor<?x8x?x64xbf16>
}

// -----

// A table's gradient, pe.embed_grad: one item per 16 table rows, each row
// summed over its entries (the rows the runtime sorted by id) in order:
//   out[v, :] = scale * sum over (b, t) with id(b, t) = v of dy[b, t, :]
// CHECK: module attributes {pejit.kernel = {arguments = "grad_rows:bf16:?x?x64 grad_ids:i64:?", dtype = "bf16", function = "table_grad", isa = "avx2", items = 32 : i64, lanes = 8 : i64, out_dtype = "f32", position_limit = 512 : i64
// CHECK-LABEL: func.func @pejit_embed_grad_item
// CHECK-SAME: memref<?x1x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<?xi64>, %{{.*}}: memref<512x64xf32, strided<[?, 1], offset: ?>>
// CHECK: scf.for
// CHECK: scf.for
// CHECK: func.call @widen8
// CHECK: arith.addf %{{.*}} : vector<8xf32>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-LABEL: func.func private @widen8
// CHECK: arith.extf %{{.*}} : vector<8xbf16> to vector<8xf32>
func.func @table_grad(%dy: tensor<?x?x64xbf16>, %pos: tensor<?xi64>) -> tensor<512x64xf32> {
  %g = pe.embed_grad %dy, %pos {scale = 2.0} : tensor<?x?x64xbf16>, tensor<?xi64> -> tensor<512x64xf32>
  return %g : tensor<512x64xf32>
}

// -----

// A bf16 token table's gradient in bf16 (summed in f32, rounded once at the
// store); plain stores even past 2^22 elements (the gradient's tensor is
// freshly mapped in training, where non-temporal stores are slower).
// CHECK: module attributes {pejit.kernel = {arguments = "grad_rows:bf16:?x?x768 grad_ids:i64:?x?", dtype = "bf16", function = "token_grad", isa = "avx2", items = 2000 : i64, lanes = 8 : i64, out_dtype = "bf16"
// CHECK-LABEL: func.func @pejit_embed_grad_item
// CHECK: %[[N:.*]] = func.call @narrow8(%{{.*}}) : (vector<8xf32>) -> vector<8xbf16>
// CHECK-NOT: nontemporal
// CHECK: vector.store %[[N]], %{{.*}} : memref<32000x768xbf16, strided<[?, 1], offset: ?>>, vector<8xbf16>
func.func @token_grad(%dy: tensor<?x?x768xbf16>, %tokens: tensor<?x?xi64>) -> tensor<32000x768xbf16> {
  %g = pe.embed_grad %dy, %tokens : tensor<?x?x768xbf16>, tensor<?x?xi64> -> tensor<32000x768xbf16>
  return %g : tensor<32000x768xbf16>
}

// -----

// A standalone RoPE's position scale gradient, pe.rope_scale_grad: the
// forward's prologue (cos/sin of s * pos * inv_freq) and items; each item
// rotates its x rows (y), widens its dy rows (g) and adds
//   sum over rows and pairs of pos * inv_freq[c] * (g_b y_a - g_a y_b)
// (summed in f64 within the tile) to its own entry of the partial buffer.
// CHECK: module attributes {pejit.kernel = {arguments = "output_grad:f32:2x4x?x64 transform_input:f32:2x4x?x64 transform_positions:i64:? encoding_operand=rope_position_scale:f32:1", dtype = "f32", function = "scale_grad"
// CHECK-LABEL: func.func @pejit_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: func.func @pejit_scale_grad_item
// CHECK-NOT: attn.qk_transform
// CHECK: vector.fma
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (f64)
// CHECK: arith.mulf {{.*}} : f64
// CHECK: arith.truncf {{.*}} : f64 to f32
// CHECK: memref.store {{.*}} : memref<?xf32>
func.func @scale_grad(%dy: tensor<2x4x?x64xf32>, %x: tensor<2x4x?x64xf32>, %pos: tensor<?xi64>, %s: tensor<1xf32>) -> tensor<1xf32> {
  %g = pe.rope_scale_grad %dy, %x, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x4x?x64xf32>, tensor<?xi64> -> tensor<1xf32>
  return %g : tensor<1xf32>
}
