// Every verifier rule of attn.attention, each with the message it gives.
// RUN: pejit-opt %s --split-input-file --verify-diagnostics

func.func @gqa_not_multiple(%q: tensor<1x12x8x64xf32>, %k: tensor<1x5x8x64xf32>, %v: tensor<1x5x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op hq (12) is not a multiple of hkv (5)}}
  %o = attn.attention %q, %k, %v : tensor<1x12x8x64xf32>, tensor<1x5x8x64xf32>, tensor<1x5x8x64xf32> -> tensor<1x12x8x64xf32>
  return
}

// -----

func.func @query_rank(%q: tensor<12x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query must be [b, hq, sq, d] (rank 4), got 'tensor<12x8x64xf32>'}}
  %o = attn.attention %q, %k, %v : tensor<12x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x12x8x64xf32>
  return
}

// -----

func.func @head_dim(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x128xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op key d (dim 3) is 128 but the query's d is 64}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x64xf32>, tensor<1x4x8x128xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @batch(%q: tensor<2x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op key b (dim 0) is 1 but the query's b is 2}}
  %o = attn.attention %q, %k, %v : tensor<2x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<2x4x8x64xf32>
  return
}

// -----

func.func @value_length(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x15x64xf32>) {
  // expected-error @+1 {{'attn.attention' op value skv (dim 2) is 15 but the key's skv is 16}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x15x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @value_heads(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x2x16x64xf32>) {
  // expected-error @+1 {{'attn.attention' op value hkv (dim 1) is 2 but the key's hkv is 4}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @element_types(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf16>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op key element type 'f16' does not match query element type 'f32'}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf16>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @result_dv(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x32xf32>) {
  // expected-error @+1 {{'attn.attention' op result dv (dim 3) is 64 but the value's dv is 32}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x32xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @result_heads(%q: tensor<1x8x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op result hq (dim 1) is 4 but the query's hq is 8}}
  %o = attn.attention %q, %k, %v : tensor<1x8x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @query_positions_length(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %qp: tensor<16xi32>) {
  // expected-error @+1 {{'attn.attention' op query_positions s (dim 0) is 16 but the sequence length is 8}}
  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<16xi32>) : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @key_positions_type(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %kp: tensor<16xf32>) {
  // expected-error @+1 {{'attn.attention' op key_positions must have element type i32 or i64, got 'f32'}}
  %o = attn.attention %q, %k, %v key_positions(%kp : tensor<16xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @key_positions_rank(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %kp: tensor<1x1x16xi32>) {
  // expected-error @+1 {{'attn.attention' op key_positions must be [s] or [b, s] (rank 1 or 2), got 'tensor<1x1x16xi32>'}}
  %o = attn.attention %q, %k, %v key_positions(%kp : tensor<1x1x16xi32>) : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @bias_heads(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %b: tensor<1x3x8x16xf32>) {
  // expected-error @+1 {{'attn.attention' op bias h (dim 1) is 3 but the query's hq (or 1) is 4}}
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x3x8x16xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @bias_keys(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %b: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'attn.attention' op bias skv (dim 3) is 8 but the key's skv is 16}}
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x8x8xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @bias_for_dynamic_lengths(%q: tensor<1x4x?x64xf32>, %k: tensor<1x4x?x64xf32>, %v: tensor<1x4x?x64xf32>, %b: tensor<1x4x8x?xf32>) {
  // expected-error @+1 {{'attn.attention' op bias sq (dim 2) is 8 but the attention's sq is ? (each call's): write ? there too}}
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x8x?xf32>) : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  return
}

// -----

func.func @key_term_shape(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %t: tensor<1x1x8x16xf32>) {
  // expected-error @+1 {{'attn.attention' op key_term hq (dim 1) is 1 but the attention's is 4}}
  %o = attn.attention %q, %k, %v key_term(%t : tensor<1x1x8x16xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @value_term_shape(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x16x64xf32>, %v: tensor<1x4x16x64xf32>, %t: tensor<8x16x32xf32>) {
  // expected-error @+1 {{'attn.attention' op value_term dv (dim 2) is 32 but the value's dv is 64}}
  %o = attn.attention %q, %k, %v value_term(%t : tensor<8x16x32xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @scale(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op scale must be positive and an f32}}
  %o = attn.attention %q, %k, %v scale(-1.0) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @scale_needed(%q: tensor<1x4x8x?xf32>, %k: tensor<1x4x8x?xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op scale is required when the head dim d is dynamic}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x?xf32>, tensor<1x4x8x?xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @window(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op window must be non-negative, got -4}}
  %o = attn.attention %q, %k, %v causal window(-4) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @softcap(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op softcap must be positive and an f32}}
  %o = attn.attention %q, %k, %v softcap(0.0) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @integer_query(%q: tensor<1x4x8x64xi32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op operand #0 must be ranked tensor of floating-point values}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x64xi32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @encoding_not_pe(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encodings[0] (1 : i64) is not a positional encoding attribute}}
  %o = attn.attention %q, %k, %v encodings([1]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @encoding_additive(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encodings[0] (#pe.sinusoidal<>) is additive: it applies to embeddings, not attention}}
  %o = attn.attention %q, %k, %v encodings([#pe.sinusoidal<>]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @two_qk_transforms(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encodings[1] is a second QK transform; at most one is allowed}}
  %o = attn.attention %q, %k, %v encodings([#pe.rope<layout = half, theta = 10000.0>, #pe.rope<layout = interleaved, theta = 10000.0>]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @fused_rope_rotary_dim(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encodings[0]: rotary_dim (96) exceeds head_dim (64) of input}}
  %o = attn.attention %q, %k, %v encodings([#pe.rope<layout = half, theta = 10000.0, rotary_dim = 96>]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @fused_alibi_heads(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encodings[0]: head_offset (6) + heads (4) exceeds num_heads (8)}}
  %o = attn.attention %q, %k, %v encodings([#pe.alibi<num_heads = 8, head_offset = 6, form = causal>]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @qk_transform_tile_rank(%tile: memref<16xf32>, %scratch: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'attn.qk_transform' op tile must be a 2-D memref [rows, d], got 'memref<16xf32>'}}
  attn.qk_transform %tile, %n, %n, %n, %scratch : memref<16xf32>, memref<?xf32>
  return
}

// -----

func.func @qk_transform_source_rank(%tile: memref<16x64xf32>, %rows: memref<1x16x64xf32>, %scratch: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'attn.qk_transform' op source must be a 2-D memref [rows, d], got 'memref<1x16x64xf32>'}}
  attn.qk_transform %tile from %rows, %n, %n, %n, %scratch : memref<16x64xf32> from memref<1x16x64xf32>, memref<?xf32>
  return
}

// -----

func.func @qk_transform_grad_f16(%tile: memref<16x64xf16>, %rows: memref<16x64xf32>, %ids: memref<1x16xi64>, %scratch: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'attn.qk_transform_grad' op grad must be a 2-D f32 memref [rows, d], got 'memref<16x64xf16>'}}
  attn.qk_transform_grad %tile, %rows, %n, %n, %n positions(%ids : memref<1x16xi64>) partial(%scratch : memref<?xf32>, %n) offsets [0] : memref<16x64xf16>, memref<16x64xf32>
  return
}

// -----

func.func @qk_transform_source_width(%tile: memref<16x64xf32>, %rows: memref<?x32xf32>, %scratch: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'attn.qk_transform' op source rows have 32 elements but tile rows 64}}
  attn.qk_transform %tile from %rows, %n, %n, %n, %scratch : memref<16x64xf32> from memref<?x32xf32>, memref<?xf32>
  return
}

// -----

func.func @qk_transform_source_ints(%tile: memref<16x64xf32>, %rows: memref<?x64xi32>, %scratch: memref<?xf32>, %n: index) {
  // expected-error @+1 {{'attn.qk_transform' op source and tile must hold floats}}
  attn.qk_transform %tile from %rows, %n, %n, %n, %scratch : memref<16x64xf32> from memref<?x64xi32>, memref<?xf32>
  return
}

// -----

func.func @qk_prologue_half_rows(%pos: memref<1x16xi64>, %scratch: memref<?xf32>, %first: index) {
  // expected-error @+1 {{'attn.qk_prologue' op rows(begin, step) needs both operands}}
  "attn.qk_prologue"(%pos, %pos, %scratch, %first) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0>}> : (memref<1x16xi64>, memref<1x16xi64>, memref<?xf32>, index) -> ()
  return
}

// -----

func.func @score_mod_lanes(%s: vector<8xf32>, %i: i32, %n: index) {
  // expected-error @+1 {{'attn.score_mod' op query_index and key_index ('i32') must have the lanes of score ('vector<8xf32>')}}
  %r = "attn.score_mod"(%s, %n, %n, %i, %i) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0>}> : (vector<8xf32>, index, index, i32, i32) -> vector<8xf32>
  return
}

// -----

func.func @score_mod_index_types(%s: f32, %i: i32, %j: vector<8xi32>, %n: index) {
  // expected-error @+1 {{'attn.score_mod' op failed to verify that all of {query_index, key_index} have same type}}
  %r = "attn.score_mod"(%s, %n, %n, %i, %j) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0>}> : (f32, index, index, i32, vector<8xi32>) -> f32
  return
}

// -----

func.func @encoding_operands_without_encodings(%q: tensor<1x4x8x64xf32>, %t: tensor<32x4xf32>) {
  // expected-error @+1 {{'attn.attention' op has 1 encoding_operands but no encodings that read them}}
  %o = attn.attention %q, %q, %q encoding_operands(%t : tensor<32x4xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @t5_missing_table(%q: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encodings[0] (#pe.t5_bias<num_buckets = 32, max_distance = 128>) reads 1 encoding operand(s), but encoding_operands has only 0 in all}}
  %o = attn.attention %q, %q, %q encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128>]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @t5_table_heads(%q: tensor<1x4x8x64xf32>, %t: tensor<32x8xf32>) {
  // expected-error @+1 {{'attn.attention' op encoding_operands #0 (t5_table of encodings[0]): the T5 table must be [num_buckets = 32, hq = 4], got 'tensor<32x8xf32>'}}
  %o = attn.attention %q, %q, %q encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128>]) encoding_operands(%t : tensor<32x8xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @alibi_slopes_shape(%q: tensor<1x4x8x64xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'attn.attention' op encoding_operands #0 (alibi_slopes of encodings[0]): alibi_slopes must be f32 [hq = 4], got 'tensor<8xf32>'}}
  %o = attn.attention %q, %q, %q encodings([#pe.alibi<num_heads = 8, form = causal, learned_slopes = true>]) encoding_operands(%s : tensor<8xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @rope_inv_freq_shape(%q: tensor<1x4x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'attn.attention' op encoding_operands #0 (rope_inv_freq of encodings[0]): rope_inv_freq must be f32 [rotary_dim / 2 = 32], got 'tensor<64xf32>'}}
  %o = attn.attention %q, %q, %q encodings([#pe.rope<layout = half, theta = 10000.0, learned_inv_freq = true>]) encoding_operands(%w : tensor<64xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @extra_encoding_operand(%q: tensor<1x4x8x64xf32>, %t: tensor<32x4xf32>) {
  // expected-error @+1 {{'attn.attention' op has 2 encoding_operands but its encodings read 1}}
  %o = attn.attention %q, %q, %q encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128>]) encoding_operands(%t, %t : tensor<32x4xf32>, tensor<32x4xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @score_mod_tile_half(%s: f32, %i: i32, %n: index, %ts: memref<64xf32>) {
  // expected-error @+1 {{'attn.score_mod' op tile(scratch, start) needs both operands}}
  %r = "attn.score_mod"(%s, %n, %n, %i, %i, %ts) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0>}> : (f32, index, index, i32, i32, memref<64xf32>) -> f32
  return
}

// -----

func.func @negative_right_window(%q: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op window_right must be non-negative, got -1 (leave it out for no right bound)}}
  %o = attn.attention %q, %q, %q window_right(-1) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @value_term_bucket_types(%i: i32, %j: vector<8xi32>, %n: index) {
  // expected-error @+1 {{'attn.value_term_bucket' op failed to verify that all of {query_index, key_index, result} have same type}}
  %m = "attn.value_term_bucket"(%n, %n, %i, %j) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 0, 0, 0, 0>}> : (index, index, i32, vector<8xi32>) -> i32
  return
}

// -----

func.func @value_term_row_type(%n: index) {
  // expected-error @+1 {{'attn.value_term_row' op result #0 must be 32-bit float or vector of 32-bit float values of ranks 1, but got 'vector<8xf16>'}}
  %r = attn.value_term_row batch %n, head %n, bucket %n, channel %n : vector<8xf16>
  return
}

// -----

func.func @shaw_value_table_width(%q: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x32xf32>, %t: tensor<9x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encoding_operands #0 (shaw_value_table of encodings[0]): the Shaw value table must be [2 clip + 1 = 9, dv = 32] (shared) or [hq = 4, 9, 32] (per head), got 'tensor<9x64xf32>'}}
  %o = attn.attention %q, %q, %v encodings([#pe.relative_value<clip = 4>]) encoding_operands(%t : tensor<9x64xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x32xf32> -> tensor<1x4x8x32xf32>
  return
}

// -----

func.func @two_value_terms(%q: tensor<1x4x8x64xf32>, %t: tensor<9x64xf32>, %u: tensor<5x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encodings[1] is a second value term; at most one is allowed}}
  %o = attn.attention %q, %q, %q encodings([#pe.relative_value<clip = 4>, #pe.relative_value<clip = 2>]) encoding_operands(%t, %u : tensor<9x64xf32>, tensor<5x64xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @value_term_heads(%q: tensor<1x4x8x64xf32>, %t: tensor<2x8x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op value_term hq (dim 0) is 2 but the query's heads is 4}}
  %o = attn.attention %q, %q, %q value_term(%t : tensor<2x8x8x64xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @shaw_key_table_heads(%q: tensor<1x4x8x64xf32>, %t: tensor<2x9x64xf32>) {
  // expected-error @+1 {{'attn.attention' op encoding_operands #0 (shaw_key_table of encodings[0]): the Shaw key table must be [2 clip + 1 = 9, d = 64] (shared) or [hq = 4, 9, 64] (per head), got 'tensor<2x9x64xf32>'}}
  %o = attn.attention %q, %q, %q encodings([#pe.relative_key<clip = 4>]) encoding_operands(%t : tensor<2x9x64xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @by_position_with_mrope(%q: tensor<1x4x8x64xf32>, %p: tensor<3x8xi64>) {
  // expected-error @+1 {{'attn.attention' op encodings[1] (#pe.alibi<num_heads = 4, form = causal, relative_to = position>) measures distance by position, but the position ids have 3 axes (from #pe.rope<layout = half, theta = 10000.0, sections = [8, 12, 12]>): relative_to = position needs [s] or [b, s] ids}}
  %o = attn.attention %q, %q, %q query_positions(%p : tensor<3x8xi64>) key_positions(%p : tensor<3x8xi64>) encodings([#pe.rope<layout = half, theta = 10000.0, sections = [8, 12, 12]>, #pe.alibi<num_heads = 4, form = causal, relative_to = position>]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @score_mod_one_position(%s: f32, %i: i32, %n: index, %p: memref<1x8xi64>) {
  // expected-error @+1 {{'attn.score_mod' op positions(query, key) needs both operands}}
  %r = "attn.score_mod"(%s, %n, %n, %i, %i, %p) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0>}> : (f32, index, index, i32, i32, memref<1x8xi64>) -> f32
  return
}

// -----

// The query-tile prologue reads Q rows of a float type only.
func.func @query_tile_of_integers(%ts: memref<64xf32>, %n: index, %rows: memref<16x64xi32>) {
  // expected-error @+1 {{operand #5 must be 2D memref of 32-bit float or 16-bit float or bfloat16 type values}}
  attn.query_tile_prologue %ts, batch %n, head %n, start %n, rows %n query(%rows : memref<16x64xi32>) : memref<64xf32>
  return
}

// -----

func.func @score_mod_one_length(%s: f32, %n: index, %i: i32) -> f32 {
  // expected-error @+1 {{'attn.score_mod' op lengths(query, key) needs both operands}}
  %r = "attn.score_mod"(%s, %n, %n, %i, %i, %n) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0>}> : (f32, index, index, i32, i32, index) -> f32
  return %r : f32
}

// -----

func.func @segments_batch(%q: tensor<2x4x?x64xf32>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.attention' op segments pack the sequences into one batch row: the query's b (dim 0) must be 1, got 2}}
  %o = attn.attention %q, %q, %q segments(%cu, %cu : tensor<?xi32>, tensor<?xi32>) : tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x4x?x64xf32>
  return
}

// -----

func.func @segments_static_length(%q: tensor<1x4x64x64xf32>, %k: tensor<1x4x?x64xf32>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.attention' op segments: the query's sq (dim 2) must be ? (each sequence's length is its own), got 64}}
  %o = attn.attention %q, %k, %k segments(%cu, %cu : tensor<?xi32>, tensor<?xi32>) : tensor<1x4x64x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x64x64xf32>
  return
}

// -----

func.func @segments_count(%q: tensor<1x4x?x64xf32>, %cu_q: tensor<3xi32>, %cu_k: tensor<4xi32>) {
  // expected-error @+1 {{'attn.attention' op segments: 3 query offsets but 4 key offsets (both are n + 1 for n sequences)}}
  %o = attn.attention %q, %q, %q segments(%cu_q, %cu_k : tensor<3xi32>, tensor<4xi32>) : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  return
}

// -----

func.func @segments_one_entry(%q: tensor<1x4x?x64xf32>, %cu: tensor<1xi32>) {
  // expected-error @+1 {{'attn.attention' op segments: the query offsets must have n + 1 >= 2 entries (one sequence at least), got 1}}
  %o = attn.attention %q, %q, %q segments(%cu, %cu : tensor<1xi32>, tensor<1xi32>) : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  return
}

// -----

func.func @segments_dtype(%q: tensor<1x4x?x64xf32>, %cu: tensor<?xi64>) {
  // expected-error @+1 {{operand #3 must be 1D tensor of 32-bit signless integer values}}
  %o = attn.attention %q, %q, %q segments(%cu, %cu : tensor<?xi64>, tensor<?xi64>) : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  return
}

// -----

func.func @key_lengths_count(%q: tensor<3x4x1x64xf32>, %k: tensor<3x4x?x64xf32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'attn.attention' op key_lengths has 2 entries but the batch b is 3: one per batch row}}
  %o = attn.attention %q, %k, %k key_lengths(%lens : tensor<2xi32>) : tensor<3x4x1x64xf32>, tensor<3x4x?x64xf32>, tensor<3x4x?x64xf32> -> tensor<3x4x1x64xf32>
  return
}

// -----

func.func @key_lengths_and_segments(%q: tensor<1x4x?x64xf32>, %cu: tensor<?xi32>, %lens: tensor<1xi32>) {
  // expected-error @+1 {{'attn.attention' op takes segments or key_lengths, not both: a packed sequence's key length is already its segment's}}
  %o = attn.attention %q, %q, %q segments(%cu, %cu : tensor<?xi32>, tensor<?xi32>) key_lengths(%lens : tensor<1xi32>) : tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32> -> tensor<1x4x?x64xf32>
  return
}

// -----

func.func @key_lengths_per_row_ids(%q: tensor<2x4x1x64xf32>, %k: tensor<2x4x?x64xf32>, %lens: tensor<2xi32>, %qp: tensor<2x1xi64>, %kp: tensor<2x?xi64>) {
  // expected-error @+1 {{'attn.attention' op with key_lengths, query_positions must be shared by the batch (per-row ids are not supported yet), got 'tensor<2x1xi64>'}}
  %o = attn.attention %q, %k, %k query_positions(%qp : tensor<2x1xi64>) key_positions(%kp : tensor<2x?xi64>) key_lengths(%lens : tensor<2xi32>) encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<2x4x1x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x4x1x64xf32>
  return
}

// -----

func.func @paged_heads(%kp: tensor<?x16x2x64xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{'attn.paged_kv' op result h (dim 1) is 4 but the pages' heads (dim 2) is 2}}
  %k = attn.paged_kv %kp, %t : tensor<?x16x2x64xf32>, tensor<?x?xi32> -> tensor<?x4x?x64xf32>
  return
}

// -----

func.func @paged_rows(%kp: tensor<?x16x2x64xf32>, %t: tensor<3x4xi32>) {
  // expected-error @+1 {{'attn.paged_kv' op result dim 2 must be max_pages * page_size (64), got 'tensor<3x2x32x64xf32>'}}
  %k = attn.paged_kv %kp, %t : tensor<?x16x2x64xf32>, tensor<3x4xi32> -> tensor<3x2x32x64xf32>
  return
}

// -----

func.func @paged_rank(%kp: tensor<16x2x64xf32>, %t: tensor<?x?xi32>) {
  // expected-error @+1 {{'attn.paged_kv' op pages must be [num_pages, page_size, h, d] (rank 4), got 'tensor<16x2x64xf32>'}}
  %k = attn.paged_kv %kp, %t : tensor<16x2x64xf32>, tensor<?x?xi32> -> tensor<?x2x?x64xf32>
  return
}

// -----

func.func @paged_other_user(%kp: tensor<?x16x2x64xf32>, %t: tensor<?x?xi32>) -> tensor<?x2x?x64xf32> {
  // expected-error @+1 {{'attn.paged_kv' op feeds 'func.return': a paged K or V is read only as attn.attention's key or value (or rotated on the way, by a QK transform that fuses)}}
  %k = attn.paged_kv %kp, %t : tensor<?x16x2x64xf32>, tensor<?x?xi32> -> tensor<?x2x?x64xf32>
  return %k : tensor<?x2x?x64xf32>
}

// -----

func.func @key_lengths_static_capacity(%q: tensor<2x4x1x64xf32>, %k: tensor<2x4x64x64xf32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'attn.attention' op key_lengths: the key's skv (dim 2) must be ? (each row's length is its own, at most the capacity the call's K has), got 64}}
  %o = attn.attention %q, %k, %k key_lengths(%lens : tensor<2xi32>) : tensor<2x4x1x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32> -> tensor<2x4x1x64xf32>
  return
}

// -----

func.func @paged_per_row_ids(%q: tensor<2x4x1x64xf32>, %kp: tensor<?x16x4x64xf32>, %t: tensor<2x?xi32>, %qp: tensor<2x1xi64>, %kpos: tensor<2x?xi64>) {
  %k = attn.paged_kv %kp, %t : tensor<?x16x4x64xf32>, tensor<2x?xi32> -> tensor<2x4x?x64xf32>
  // expected-error @+1 {{'attn.attention' op with a paged K or V, query_positions must be shared by the batch (per-row ids are not supported yet), got 'tensor<2x1xi64>'}}
  %o = attn.attention %q, %k, %k query_positions(%qp : tensor<2x1xi64>) key_positions(%kpos : tensor<2x?xi64>) encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<2x4x1x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x4x1x64xf32>
  return
}

// -----

func.func @linear_softmax_keys_on_numerator(%q: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'attn.linear_attention' op softmax_keys has no denominator, so rope_on_numerator does not apply: use rope_before_feature_map}}
  %o = attn.linear_attention %q, %q, %q feature_map(softmax_keys) encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return
}

// -----

func.func @linear_rope_without_placement(%q: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'attn.linear_attention' op a fused RoPE needs rope_placement(rope_before_feature_map) or rope_placement(rope_on_numerator): where it rotates changes the result, so it is never implied}}
  %o = attn.linear_attention %q, %q, %q feature_map(elu_plus_one) encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return
}

// -----

func.func @linear_placement_without_rope(%q: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'attn.linear_attention' op rope_placement without a RoPE in encodings(...)}}
  %o = attn.linear_attention %q, %q, %q feature_map(relu) rope_placement(rope_on_numerator) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return
}

// -----

func.func @linear_alibi(%q: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'attn.linear_attention' op encodings: #pe.alibi<num_heads = 2, form = causal> cannot fuse into linear attention: it has no scores, so only a QK transform (#pe.rope) can}}
  %o = attn.linear_attention %q, %q, %q feature_map(relu) encodings([#pe.alibi<num_heads = 2, form = causal>]) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return
}

// -----

func.func @linear_gqa(%q: tensor<1x3x8x16xf32>, %k: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{'attn.linear_attention' op hq (3) is not a multiple of hkv (2)}}
  %o = attn.linear_attention %q, %k, %k feature_map(relu) : tensor<1x3x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x3x8x16xf32>
  return
}

// -----

func.func @linear_unknown_map(%q: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{expected}}
  %o = attn.linear_attention %q, %q, %q feature_map(cosformer) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return
}

// -----

func.func @linear_state_shape(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x8xf32>, %st: tensor<1x2x16x10xf32>) {
  // expected-error @+1 {{'attn.linear_attention' op state must be f32 [b, hq, d, dv + 2] = 'tensor<1x4x16x10xf32>' (S, then z, then softmax_keys' running max), got 'tensor<1x2x16x10xf32>'}}
  %o = attn.linear_attention %q, %k, %v feature_map(relu) state(%st : tensor<1x2x16x10xf32>) : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @linear_rope_scale_missing(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{'attn.linear_attention' op has 0 encoding_operands but its encodings read 1}}
  %o = attn.linear_attention %q, %k, %v feature_map(relu) encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>]) rope_placement(rope_before_feature_map) : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @term_row_grad_type(%n: index, %g: vector<8xf16>, %p: memref<?xf32>) {
  // expected-error @+1 {{'attn.term_row_grad' op operand #0 must be 32-bit float or vector of 32-bit float values of ranks 1, but got 'vector<8xf16>'}}
  attn.term_row_grad key %g, batch %n, head %n, bucket %n, channel %n partial(%p : memref<?xf32>, %n) offsets [0] : vector<8xf16>
  return
}

// -----

func.func @term_row_grad_partial(%n: index, %g: vector<8xf32>, %p: memref<?x8xf32>) {
  // expected-error @+1 {{'attn.term_row_grad' op operand #5 must be 1D memref of 32-bit float values, but got 'memref<?x8xf32>'}}
  "attn.term_row_grad"(%g, %n, %n, %n, %n, %p, %n) <{offsets = array<i64: 0>}> : (vector<8xf32>, index, index, index, index, memref<?x8xf32>, index) -> ()
  return
}

// -----

func.func @lse_shape(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x7xf32> {
  // expected-error @+1 {{lse}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>, tensor<1x4x7xf32>
  return %lse : tensor<1x4x7xf32>
}

// -----

func.func @lse_type(%q: tensor<1x4x8x16xf32>) -> tensor<1x4x8xf16> {
  // expected-error @+1 {{result #1 must be tensor of 32-bit float values, but got 'tensor<1x4x8xf16>'}}
  %o, %lse = attn.attention %q, %q, %q : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>, tensor<1x4x8xf16>
  return %lse : tensor<1x4x8xf16>
}
