// attn.attention in all its forms parses, prints, and parses back.
// RUN: pejit-opt %s | pejit-opt | FileCheck %s
// RUN: pejit-opt %s --mlir-print-op-generic | pejit-opt | FileCheck %s

// CHECK-LABEL: func.func @plain
func.func @plain(%q: tensor<2x8x64x64xf32>, %k: tensor<2x8x80x64xf32>, %v: tensor<2x8x80x32xf32>) -> tensor<2x8x64x32xf32> {
  // CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x64x64xf32>, tensor<2x8x80x64xf32>, tensor<2x8x80x32xf32> -> tensor<2x8x64x32xf32>
  %o = attn.attention %q, %k, %v : tensor<2x8x64x64xf32>, tensor<2x8x80x64xf32>, tensor<2x8x80x32xf32> -> tensor<2x8x64x32xf32>
  return %o : tensor<2x8x64x32xf32>
}

// GQA 32/8, causal with sq < skv (bottom-right aligned), explicit scale.
// CHECK-LABEL: func.func @gqa_causal
func.func @gqa_causal(%q: tensor<1x32x16x128xbf16>, %k: tensor<1x8x1024x128xbf16>, %v: tensor<1x8x1024x128xbf16>) -> tensor<1x32x16x128xbf16> {
  // CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale(1.250000e-01) : tensor<1x32x16x128xbf16>
  %o = attn.attention %q, %k, %v causal scale(1.250000e-01) : tensor<1x32x16x128xbf16>, tensor<1x8x1024x128xbf16>, tensor<1x8x1024x128xbf16> -> tensor<1x32x16x128xbf16>
  return %o : tensor<1x32x16x128xbf16>
}

// MQA, sliding window, softcap, positions (as the fused form will carry them).
// CHECK-LABEL: func.func @mqa_window_softcap_positions
func.func @mqa_window_softcap_positions(%q: tensor<2x8x1x64xf16>, %k: tensor<2x1x100x64xf16>, %v: tensor<2x1x100x64xf16>, %qp: tensor<2x1xi64>, %kp: tensor<100xi32>) -> tensor<2x8x1x64xf16> {
  // CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} query_positions(%{{.*}} : tensor<2x1xi64>) key_positions(%{{.*}} : tensor<100xi32>) causal window(32) softcap(5.000000e+01) :
  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<2x1xi64>) key_positions(%kp : tensor<100xi32>) causal window(32) softcap(50.0) : tensor<2x8x1x64xf16>, tensor<2x1x100x64xf16>, tensor<2x1x100x64xf16> -> tensor<2x8x1x64xf16>
  return %o : tensor<2x8x1x64xf16>
}

// Score bias broadcast over batch, Shaw key and value terms.
// CHECK-LABEL: func.func @terms
func.func @terms(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x24x32xf32>, %v: tensor<2x4x24x48xf32>, %b: tensor<1x4x16x24xf32>, %kt: tensor<2x4x16x24xf32>, %vt: tensor<16x24x48xf32>) -> tensor<2x4x16x48xf32> {
  // CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<1x4x16x24xf32>) key_term(%{{.*}} : tensor<2x4x16x24xf32>) value_term(%{{.*}} : tensor<16x24x48xf32>) :
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x16x24xf32>) key_term(%kt : tensor<2x4x16x24xf32>) value_term(%vt : tensor<16x24x48xf32>) : tensor<2x4x16x32xf32>, tensor<2x4x24x32xf32>, tensor<2x4x24x48xf32> -> tensor<2x4x16x48xf32>
  return %o : tensor<2x4x16x48xf32>
}

// Dynamic sequence lengths (the JIT specializes per shape).
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%q: tensor<1x4x?x64xf32>, %k: tensor<1x4x?x64xf32>, %v: tensor<1x4x?x64xf32>) -> tensor<1x4x?x64xf32> {
  // CHECK: attn.attention {{.*}} : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  %o = attn.attention %q, %k, %v : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  return %o : tensor<1x4x?x64xf32>
}

// The whole unfused source of a RoPE + ALiBi model layer.
// CHECK-LABEL: func.func @rope_alibi_source
func.func @rope_alibi_source(%q: tensor<1x12x64x64xf32>, %k: tensor<1x12x64x64xf32>, %v: tensor<1x12x64x64xf32>, %pos: tensor<64xi32>) -> tensor<1x12x64x64xf32> {
  // CHECK: %[[QR:.*]] = pe.rope
  // CHECK: %[[KR:.*]] = pe.rope
  // CHECK: %[[B:.*]] = pe.alibi
  // CHECK: attn.attention %[[QR]], %[[KR]], %{{.*}} bias(%[[B]] : tensor<1x12x64x64xf32>) causal
  %qr = pe.rope %q, %pos <layout = half, theta = 10000.0> : tensor<1x12x64x64xf32>, tensor<64xi32>
  %kr = pe.rope %k, %pos <layout = half, theta = 10000.0> : tensor<1x12x64x64xf32>, tensor<64xi32>
  %b = pe.alibi <num_heads = 12, form = causal> : tensor<1x12x64x64xf32>
  %o = attn.attention %qr, %kr, %v bias(%b : tensor<1x12x64x64xf32>) causal : tensor<1x12x64x64xf32>, tensor<1x12x64x64xf32>, tensor<1x12x64x64xf32> -> tensor<1x12x64x64xf32>
  return %o : tensor<1x12x64x64xf32>
}

// The fused form: encodings applied by the attention itself.
// CHECK-LABEL: func.func @fused
func.func @fused(%q: tensor<1x4x16x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %p: tensor<16xi32>) -> tensor<1x4x16x64xf32> {
  // CHECK: attn.attention {{.*}} query_positions({{.*}}) key_positions({{.*}}) causal scale(1.250000e-01) encodings([#pe.rope<layout = half, theta = 10000.0, scaling = #pe.linear<factor = 2.0>>, #pe.alibi<num_heads = 8, head_offset = 4, form = symmetric>])
  %o = attn.attention %q, %k, %v query_positions(%p : tensor<16xi32>) key_positions(%p : tensor<16xi32>) causal scale(0.125) encodings([#pe.rope<layout = half, theta = 10000.0, scaling = #pe.linear<factor = 2.0>>, #pe.alibi<num_heads = 8, head_offset = 4, form = symmetric>]) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// ALiBi with learned slopes: the slopes are the attention's encoding operand.
// CHECK-LABEL: func.func @alibi_learned_slopes
// CHECK: encodings([#pe.alibi<num_heads = 8, head_offset = 4, form = causal, learned_slopes = true>]) encoding_operands(%{{.*}} : tensor<4xf32>)
func.func @alibi_learned_slopes(%q: tensor<1x4x16x64xf32>, %s: tensor<4xf32>) -> tensor<1x4x16x64xf32> {
  %o = attn.attention %q, %q, %q causal encodings([#pe.alibi<num_heads = 8, head_offset = 4, form = causal, learned_slopes = true>]) encoding_operands(%s : tensor<4xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// RoPE with learned inverse frequencies and a runtime scale: two operands.
// CHECK-LABEL: func.func @rope_learned_inv_freq
// CHECK: encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true, learned_inv_freq = true>]) encoding_operands(%{{.*}}, %{{.*}} : tensor<1xf32>, tensor<32xf32>)
func.func @rope_learned_inv_freq(%q: tensor<1x4x16x64xf32>, %s: tensor<1xf32>, %w: tensor<32xf32>) -> tensor<1x4x16x64xf32> {
  %o = attn.attention %q, %q, %q causal encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true, learned_inv_freq = true>]) encoding_operands(%s, %w : tensor<1xf32>, tensor<32xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// The template hook ops, as kernel templates write them: the prologue (all
// rows, or a GPU thread's share), the QK transform in place and from the Q/K
// rows themselves (f16 rows into an f32 tile), and the score modifier.
// CHECK-LABEL: func.func @hooks
func.func @hooks(%qpos: memref<1x16xi64>, %kpos: memref<1x16xi64>, %scratch: memref<?xf32>, %tile: memref<16x64xf32>, %rows: memref<?x64xf16, strided<[?, 1], offset: ?>>, %score8: vector<8xf32>, %qi8: vector<8xi32>, %kj8: vector<8xi32>, %score: f32, %qi: i32, %kj: i32, %table: memref<32x8xf32>, %ts: memref<64xf32>, %n: index, %first: index, %step: index) {
  // CHECK: attn.qk_prologue %{{.*}}, %{{.*}}, %{{.*}} : memref<1x16xi64>, memref<1x16xi64>, memref<?xf32>
  attn.qk_prologue %qpos, %kpos, %scratch : memref<1x16xi64>, memref<1x16xi64>, memref<?xf32>
  // CHECK: attn.qk_prologue %{{.*}}, %{{.*}}, %{{.*}} rows(%{{.*}}, %{{.*}}) : memref<1x16xi64>, memref<1x16xi64>, memref<?xf32>
  attn.qk_prologue %qpos, %kpos, %scratch rows(%first, %step) : memref<1x16xi64>, memref<1x16xi64>, memref<?xf32>
  // A prologue that reads the encoding's own tensor (a standalone kernel's learned table).
  // CHECK: attn.qk_prologue %{{.*}}, %{{.*}}, %{{.*}} rows(%{{.*}}, %{{.*}}) operands(%{{.*}} : memref<32x8xf32>) : memref<1x16xi64>, memref<1x16xi64>, memref<?xf32>
  attn.qk_prologue %qpos, %kpos, %scratch rows(%first, %step) operands(%table : memref<32x8xf32>) : memref<1x16xi64>, memref<1x16xi64>, memref<?xf32>
  // CHECK: attn.qk_transform %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<16x64xf32>, memref<?xf32>
  attn.qk_transform %tile, %n, %first, %first, %scratch : memref<16x64xf32>, memref<?xf32>
  // CHECK: attn.qk_transform %{{.*}} from %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} key : memref<16x64xf32> from memref<?x64xf16, strided<[?, 1], offset: ?>>, memref<?xf32>
  attn.qk_transform %tile from %rows, %n, %first, %first, %scratch key : memref<16x64xf32> from memref<?x64xf16, strided<[?, 1], offset: ?>>, memref<?xf32>
  // The adjoint (a backward's dQ'/dK' rows, in place).
  // CHECK: attn.qk_transform adjoint %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} key : memref<16x64xf32>, memref<?xf32>
  attn.qk_transform adjoint %tile, %n, %first, %first, %scratch key : memref<16x64xf32>, memref<?xf32>
  // The adjoint from gradient rows (a standalone backward: copied, then turned back).
  // CHECK: attn.qk_transform adjoint %{{.*}} from %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<16x64xf32> from memref<?x64xf16, strided<[?, 1], offset: ?>>, memref<?xf32>
  attn.qk_transform adjoint %tile from %rows, %n, %first, %first, %scratch : memref<16x64xf32> from memref<?x64xf16, strided<[?, 1], offset: ?>>, memref<?xf32>
  // A QK transform's operand gradients from dK' and K' rows.
  // CHECK: attn.qk_transform_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} key positions(%{{.*}} : memref<1x16xi64>) partial(%{{.*}} : memref<?xf32>, %{{.*}}) offsets [0] : memref<16x64xf32>, memref<16x64xf32>
  attn.qk_transform_grad %tile, %tile, %n, %first, %first key positions(%kpos : memref<1x16xi64>) partial(%scratch : memref<?xf32>, %first) offsets [0] : memref<16x64xf32>, memref<16x64xf32>
  // CHECK: attn.score_mod %{{.*}}, batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} : vector<8xf32>, vector<8xi32>
  %s8 = attn.score_mod %score8, batch %n, head %first, query %qi8, key %kj8 : vector<8xf32>, vector<8xi32>
  // CHECK: attn.score_mod %{{.*}}, batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} operands(%{{.*}} : memref<32x8xf32>) : f32, i32
  %s1 = attn.score_mod %score, batch %n, head %first, query %qi, key %kj operands(%table : memref<32x8xf32>) : f32, i32
  // With the query tile's scratch, lanes of consecutive queries.
  // CHECK: attn.score_mod %{{.*}}, batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} consecutive_queries operands(%{{.*}} : memref<32x8xf32>) tile(%{{.*}} : memref<64xf32>, %{{.*}}) : vector<8xf32>, vector<8xi32>
  %s2 = attn.score_mod %score8, batch %n, head %first, query %qi8, key %kj8 consecutive_queries operands(%table : memref<32x8xf32>) tile(%ts : memref<64xf32>, %n) : vector<8xf32>, vector<8xi32>
  // Position ids, for encodings with relative_to = position.
  // CHECK: attn.score_mod %{{.*}}, batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} positions(%{{.*}}, %{{.*}} : memref<1x16xi64>, memref<1x16xi64>) : vector<8xf32>, vector<8xi32>
  %s3 = attn.score_mod %score8, batch %n, head %first, query %qi8, key %kj8 positions(%qpos, %qpos : memref<1x16xi64>, memref<1x16xi64>) : vector<8xf32>, vector<8xi32>
  // A value term's bucket (lanes as score_mod) and one row's channels.
  // CHECK: attn.value_term_bucket batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} operands(%{{.*}} : memref<32x8xf32>) : vector<8xi32>
  %m8 = attn.value_term_bucket batch %n, head %first, query %qi8, key %kj8 operands(%table : memref<32x8xf32>) : vector<8xi32>
  // CHECK: attn.value_term_bucket batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} : i32
  %m1 = attn.value_term_bucket batch %n, head %first, query %qi, key %kj : i32
  // CHECK: attn.value_term_row batch %{{.*}}, head %{{.*}}, bucket %{{.*}}, channel %{{.*}} operands(%{{.*}} : memref<32x8xf32>) : vector<8xf32>
  %row8 = attn.value_term_row batch %n, head %first, bucket %n, channel %step operands(%table : memref<32x8xf32>) : vector<8xf32>
  // CHECK: attn.value_term_row batch %{{.*}}, head %{{.*}}, bucket %{{.*}}, channel %{{.*}} : f32
  %row1 = attn.value_term_row batch %n, head %first, bucket %n, channel %step : f32
  // A backward's key term (Shaw's a^K as q_i . row(bucket)): its bucket and rows.
  // CHECK: attn.value_term_bucket key batch %{{.*}}, head %{{.*}}, query %{{.*}}, key %{{.*}} operands(%{{.*}} : memref<32x8xf32>) : vector<8xi32>
  %mk8 = attn.value_term_bucket key batch %n, head %first, query %qi8, key %kj8 operands(%table : memref<32x8xf32>) : vector<8xi32>
  // CHECK: attn.value_term_row key batch %{{.*}}, head %{{.*}}, bucket %{{.*}}, channel %{{.*}} operands(%{{.*}} : memref<32x8xf32>) : vector<8xf32>
  %rowk = attn.value_term_row key batch %n, head %first, bucket %n, channel %step operands(%table : memref<32x8xf32>) : vector<8xf32>
  // A bucketed term's row gradient, into a partial buffer (key and value).
  // CHECK: attn.term_row_grad key %{{.*}}, batch %{{.*}}, head %{{.*}}, bucket %{{.*}}, channel %{{.*}} operands(%{{.*}} : memref<32x8xf32>) partial(%{{.*}} : memref<?xf32>, %{{.*}}) offsets [0] : vector<8xf32>
  attn.term_row_grad key %rowk, batch %n, head %first, bucket %n, channel %step operands(%table : memref<32x8xf32>) partial(%scratch : memref<?xf32>, %first) offsets [0] : vector<8xf32>
  // CHECK: attn.term_row_grad %{{.*}}, batch %{{.*}}, head %{{.*}}, bucket %{{.*}}, channel %{{.*}} partial(%{{.*}} : memref<?xf32>, %{{.*}}) offsets [-1] : f32
  attn.term_row_grad %row1, batch %n, head %first, bucket %n, channel %step partial(%scratch : memref<?xf32>, %first) offsets [-1] : f32
  // CHECK: attn.query_tile_prologue %{{.*}}, batch %{{.*}}, head %{{.*}}, start %{{.*}}, rows %{{.*}} operands(%{{.*}} : memref<32x8xf32>) : memref<64xf32>
  attn.query_tile_prologue %ts, batch %n, head %first, start %n, rows %step operands(%table : memref<32x8xf32>) : memref<64xf32>
  // A GPU thread's share of the rows, from 16-bit Q rows.
  // CHECK: attn.query_tile_prologue %{{.*}}, batch %{{.*}}, head %{{.*}}, start %{{.*}}, rows %{{.*}} share(%{{.*}}, %{{.*}}) operands(%{{.*}} : memref<32x8xf32>) query(%{{.*}} : memref<?x64xf16, strided<[?, 1], offset: ?>>) : memref<64xf32>
  attn.query_tile_prologue %ts, batch %n, head %first, start %n, rows %step share(%first, %step) operands(%table : memref<32x8xf32>) query(%rows : memref<?x64xf16, strided<[?, 1], offset: ?>>) : memref<64xf32>
  return
}

// The fused T5 bias reads its table as an encoding operand.
// CHECK-LABEL: func.func @fused_t5
// CHECK: attn.attention {{.*}} encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>]) encoding_operands(%{{.*}} : tensor<32x4xf32>)
func.func @fused_t5(%q: tensor<1x4x16x64xf32>, %t: tensor<32x4xf32>) -> tensor<1x4x16x64xf32> {
  %o = attn.attention %q, %q, %q causal encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>]) encoding_operands(%t : tensor<32x4xf32>) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// A bidirectional local window: keys within 16 before and 8 after.
// CHECK-LABEL: func.func @two_sided_window
// CHECK: attn.attention {{.*}} window(16) window_right(8)
func.func @two_sided_window(%q: tensor<1x4x16x64xf32>) -> tensor<1x4x16x64xf32> {
  %o = attn.attention %q, %q, %q window(16) window_right(8) : tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x16x64xf32>
  return %o : tensor<1x4x16x64xf32>
}

// A packed batch: FlashAttention's cu_seqlens as segments, lengths `?`.
// CHECK-LABEL: func.func @packed_segments
// CHECK: attn.attention {{.*}} segments(%{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?xi32>) causal
func.func @packed_segments(%q: tensor<1x8x?x64xf32>, %k: tensor<1x2x?x64xf32>, %cu_q: tensor<?xi32>, %cu_k: tensor<?xi32>) -> tensor<1x8x?x64xf32> {
  %o = attn.attention %q, %k, %k segments(%cu_q, %cu_k : tensor<?xi32>, tensor<?xi32>) causal : tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x8x?x64xf32>
  return %o : tensor<1x8x?x64xf32>
}

// Per-row key lengths over a KV cache with room to grow.
// CHECK-LABEL: func.func @key_lengths
// CHECK: attn.attention {{.*}} key_lengths(%{{.*}} : tensor<?xi32>) causal
func.func @key_lengths(%q: tensor<?x8x1x64xf32>, %k: tensor<?x2x?x64xf32>, %lens: tensor<?xi32>) -> tensor<?x8x1x64xf32> {
  %o = attn.attention %q, %k, %k key_lengths(%lens : tensor<?xi32>) causal : tensor<?x8x1x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32> -> tensor<?x8x1x64xf32>
  return %o : tensor<?x8x1x64xf32>
}

// A paged KV cache: the logical K and V gathered from pages by a block table.
// CHECK-LABEL: func.func @paged_kv
// CHECK: attn.paged_kv %{{.*}}, %{{.*}} : tensor<?x16x2x64xf32>, tensor<?x?xi32> -> tensor<?x2x?x64xf32>
// CHECK: attn.attention {{.*}} key_lengths
func.func @paged_kv(%q: tensor<?x8x1x64xf32>, %kp: tensor<?x16x2x64xf32>, %vp: tensor<?x16x2x64xf32>, %t: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x8x1x64xf32> {
  %k = attn.paged_kv %kp, %t : tensor<?x16x2x64xf32>, tensor<?x?xi32> -> tensor<?x2x?x64xf32>
  %v = attn.paged_kv %vp, %t : tensor<?x16x2x64xf32>, tensor<?x?xi32> -> tensor<?x2x?x64xf32>
  %o = attn.attention %q, %k, %v key_lengths(%lens : tensor<?xi32>) : tensor<?x8x1x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32> -> tensor<?x8x1x64xf32>
  return %o : tensor<?x8x1x64xf32>
}

// attn.linear_attention: every feature map; causal; a fused RoPE with its
// placement; GQA (4 query heads on 2 KV heads).
// CHECK-LABEL: func.func @linear_attention
func.func @linear_attention(%q: tensor<1x4x9x16xf32>, %k: tensor<1x2x9x16xf32>, %v: tensor<1x2x9x8xf32>, %p: tensor<9xi64>) {
  // CHECK: attn.linear_attention %{{.*}}, %{{.*}}, %{{.*}} feature_map(elu_plus_one) : tensor<1x4x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x8xf32> -> tensor<1x4x9x8xf32>
  %0 = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) : tensor<1x4x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x8xf32> -> tensor<1x4x9x8xf32>
  // CHECK: attn.linear_attention %{{.*}}, %{{.*}}, %{{.*}} feature_map(relu) causal : tensor<1x4x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x8xf32> -> tensor<1x4x9x8xf32>
  %1 = attn.linear_attention %q, %k, %v feature_map(relu) causal : tensor<1x4x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x8xf32> -> tensor<1x4x9x8xf32>
  // CHECK: attn.linear_attention %{{.*}}, %{{.*}}, %{{.*}} feature_map(identity) query_positions(%{{.*}} : tensor<9xi64>) key_positions(%{{.*}} : tensor<9xi64>) encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator)
  %2 = attn.linear_attention %q, %k, %v feature_map(identity) query_positions(%p : tensor<9xi64>) key_positions(%p : tensor<9xi64>) encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<1x4x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x8xf32> -> tensor<1x4x9x8xf32>
  // CHECK: attn.linear_attention %{{.*}}, %{{.*}}, %{{.*}} feature_map(softmax_keys) causal encodings([#pe.rope<layout = interleaved, theta = 500.0>]) rope_placement(rope_before_feature_map)
  %3 = attn.linear_attention %q, %k, %v feature_map(softmax_keys) causal encodings([#pe.rope<layout = interleaved, theta = 500.0>]) rope_placement(rope_before_feature_map) : tensor<1x4x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x8xf32> -> tensor<1x4x9x8xf32>
  return
}

// A RoPE with a runtime position scale: its scale in encoding_operands.
// CHECK-LABEL: func.func @linear_attention_rope_scale
func.func @linear_attention_rope_scale(%q: tensor<1x4x9x16xf32>, %k: tensor<1x2x9x16xf32>, %v: tensor<1x2x9x8xf32>, %p: tensor<9xi64>, %s: tensor<1xf32>) {
  // CHECK: encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>]) encoding_operands(%{{.*}} : tensor<1xf32>) rope_placement(rope_before_feature_map)
  %0 = attn.linear_attention %q, %k, %v feature_map(relu) query_positions(%p : tensor<9xi64>) key_positions(%p : tensor<9xi64>) encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>]) encoding_operands(%s : tensor<1xf32>) rope_placement(rope_before_feature_map) : tensor<1x4x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x8xf32> -> tensor<1x4x9x8xf32>
  return
}

// A carried state [b, hq, d, dv + 2] (decode, chunked prefill).
// CHECK-LABEL: func.func @linear_attention_state
func.func @linear_attention_state(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>, %v: tensor<1x2x1x8xf32>, %p: tensor<1xi64>, %st: tensor<1x4x16x10xf32>) {
  // CHECK: attn.linear_attention %{{.*}}, %{{.*}}, %{{.*}} feature_map(elu_plus_one) query_positions(%{{.*}} : tensor<1xi64>) key_positions(%{{.*}} : tensor<1xi64>) causal state(%{{.*}} : tensor<1x4x16x10xf32>) encodings
  %0 = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) query_positions(%p : tensor<1xi64>) key_positions(%p : tensor<1xi64>) causal state(%st : tensor<1x4x16x10xf32>) encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x8xf32> -> tensor<1x4x1x8xf32>
  return
}

// The training forward: a second result, each row's lse.
// CHECK-LABEL: func.func @training
// CHECK: %{{.*}}, %{{.*}} = attn.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x4x?x32xf32>, tensor<2x2x?x32xf32>, tensor<2x2x?x32xf32> -> tensor<2x4x?x32xf32>, tensor<2x4x?xf32>
func.func @training(%q: tensor<2x4x?x32xf32>, %k: tensor<2x2x?x32xf32>, %v: tensor<2x2x?x32xf32>) -> (tensor<2x4x?x32xf32>, tensor<2x4x?xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal : tensor<2x4x?x32xf32>, tensor<2x2x?x32xf32>, tensor<2x2x?x32xf32> -> tensor<2x4x?x32xf32>, tensor<2x4x?xf32>
  return %o, %lse : tensor<2x4x?x32xf32>, tensor<2x4x?xf32>
}
