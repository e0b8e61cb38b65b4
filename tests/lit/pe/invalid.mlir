// Every verifier rule of the pe dialect, each with the message it gives.
// RUN: pejit-opt %s --split-input-file --verify-diagnostics

func.func @rope_odd_rotary_dim(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope rotary_dim must be even, got 63}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, rotary_dim = 63> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_rotary_dim_exceeds_head_dim(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op rotary_dim (128) exceeds head_dim (64) of input}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, rotary_dim = 128> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_odd_head_dim(%x: tensor<1x4x8x63xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op head_dim (63) must be even when rotary_dim is absent}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x63xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_zero_theta(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope theta must be positive and finite, got 0.0}}
  %0 = pe.rope %x, %pos <layout = half, theta = 0.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_negative_theta(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope theta must be positive and finite, got -10000.0}}
  %0 = pe.rope %x, %pos <layout = half, theta = -10000.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_unknown_layout(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{expected ::pejit::pe::RopeLayout to be one of: half, interleaved}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'layout'}}
  %0 = pe.rope %x, %pos <layout = neox, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_input_rank(%x: tensor<4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op input must be [b, h, s, d] (rank 4), got 'tensor<4x8x64xf32>'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_positions_float(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xf32>) {
  // expected-error @+1 {{'pe.rope' op positions must have element type i32 or i64, got 'f32'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xf32>
  return
}

// -----

func.func @rope_positions_rank(%x: tensor<1x4x8x64xf32>, %pos: tensor<1x1x8xi32>) {
  // expected-error @+1 {{'pe.rope' op positions must be [s] or [b, s] (rank 1 or 2), got 'tensor<1x1x8xi32>'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<1x1x8xi32>
  return
}

// -----

func.func @rope_positions_length(%x: tensor<1x4x8x64xf32>, %pos: tensor<9xi32>) {
  // expected-error @+1 {{'pe.rope' op positions s (dim 0) is 9 but the sequence length is 8}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<9xi32>
  return
}

// -----

func.func @rope_positions_batch(%x: tensor<2x4x8x64xf32>, %pos: tensor<3x8xi64>) {
  // expected-error @+1 {{'pe.rope' op positions b (dim 0) is 3 but the batch size is 2}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<2x4x8x64xf32>, tensor<3x8xi64>
  return
}

// -----

func.func @rope_sections_axes(%x: tensor<1x4x8x64xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{'pe.rope' op positions has 2 axes (dim 0) but the encoding reads 3 (its sections, or 2 for axial RoPE)}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, sections = [8, 12, 12]> : tensor<1x4x8x64xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @rope_sections_sum(%x: tensor<1x4x8x64xf32>, %pos: tensor<3x8xi32>) {
  // expected-error @+1 {{'pe.rope' op sections sum to 30 but rotary_dim/2 is 32}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, sections = [8, 10, 12]> : tensor<1x4x8x64xf32>, tensor<3x8xi32>
  return
}

// -----

func.func @rope_sections_sum_explicit(%x: tensor<1x4x8x64xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{rope sections sum to 32 but rotary_dim/2 is 16}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, rotary_dim = 32, sections = [16, 16]> : tensor<1x4x8x64xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @linear_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{linear scaling factor must be positive and finite, got 0.0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.linear<factor = 0.0>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @ntk_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{ntk scaling factor must be positive and finite, got -2.0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.ntk<factor = -2.0>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @dynamic_ntk_original(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{dynamic_ntk original_max_position must be positive, got 0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 0>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @dynamic_ntk_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{dynamic_ntk factor must be positive and finite, got -1.0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.dynamic_ntk<factor = -1.0, original_max_position = 2048>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @yarn_betas(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{yarn beta_fast (1.0) must be greater than beta_slow (32.0)}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, beta_fast = 1.0, beta_slow = 32.0>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @yarn_betas_equal(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{yarn beta_fast (2.0) must be greater than beta_slow (2.0)}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, beta_fast = 2.0, beta_slow = 2.0>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @yarn_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{yarn factor must be positive and finite, got 0.0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 0.0, original_max_position = 4096>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @yarn_attention_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{yarn attention_factor must be positive and finite, got -1.0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, attention_factor = -1.0>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @llama3_freq_factors(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{llama3 high_freq_factor (1.0) must be greater than low_freq_factor (4.0)}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 500000.0, scaling = #pe.llama3<factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_position = 8192>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @llama3_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{llama3 factor must be positive and finite, got -8.0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 500000.0, scaling = #pe.llama3<factor = -8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @longrope_length_vs_head_dim(%x: tensor<1x4x8x8xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op longrope factor lists have 3 entries but rotary_dim/2 is 4}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.longrope<short_factor = [1.0, 1.0, 1.0], long_factor = [2.0, 2.0, 2.0], original_max_position = 4096>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  return
}

// -----

func.func @longrope_length_vs_rotary_dim(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{longrope factor lists have 4 entries but rotary_dim/2 is 2}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, rotary_dim = 4, scaling = #pe.longrope<short_factor = [1.0, 1.0, 1.0, 1.0], long_factor = [2.0, 2.0, 2.0, 2.0], original_max_position = 4096>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @longrope_lists_differ(%x: tensor<1x4x8x8xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{longrope short_factor has 4 entries but long_factor has 3}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.longrope<short_factor = [1.0, 1.0, 1.0, 1.0], long_factor = [2.0, 2.0, 2.0], original_max_position = 4096>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  return
}

// -----

func.func @longrope_entry(%x: tensor<1x4x8x4xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{longrope long_factor entry must be positive and finite, got 0.0}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.longrope<short_factor = [1.0, 1.0], long_factor = [2.0, 0.0], original_max_position = 4096>> : tensor<1x4x8x4xf32>, tensor<8xi32>
  return
}

// -----

func.func @alibi_num_heads() {
  // expected-error @+1 {{alibi num_heads must be positive, got 0}}
  %0 = pe.alibi <num_heads = 0, form = causal> : tensor<1x1x8x8xf32>
  return
}

// -----

func.func @alibi_head_offset() {
  // expected-error @+1 {{alibi head_offset (12) must be in [0, num_heads = 12)}}
  %0 = pe.alibi <num_heads = 12, head_offset = 12, form = causal> : tensor<1x1x8x8xf32>
  return
}

// -----

func.func @alibi_learned_and_constant_slopes() {
  // expected-error @+1 {{alibi learned_slopes reads the slopes from its operand alibi_slopes: leave `slopes` out}}
  %0 = pe.alibi <num_heads = 2, form = causal, slopes = [0.5, 0.25], learned_slopes = true> : tensor<1x2x8x8xf32>
  return
}

// -----

func.func @alibi_learned_slopes_materialized() {
  // expected-error @+1 {{'pe.alibi' op learned_slopes is for ALiBi fused into attn.attention (its slopes are an encoding operand there); pe.alibi takes constant slopes}}
  %0 = pe.alibi <num_heads = 8, form = causal, learned_slopes = true> : tensor<1x8x8x8xf32>
  return
}

// -----

func.func @alibi_shard_overflow() {
  // expected-error @+1 {{'pe.alibi' op head_offset (8) + heads (8) exceeds num_heads (12)}}
  %0 = pe.alibi <num_heads = 12, head_offset = 8, form = causal> : tensor<1x8x8x8xf32>
  return
}

// -----

func.func @alibi_slopes_count() {
  // expected-error @+1 {{alibi slopes has 3 entries but num_heads is 2}}
  %0 = pe.alibi <num_heads = 2, form = causal, slopes = [0.5, 0.25, 0.125]> : tensor<1x2x8x8xf32>
  return
}

// -----

func.func @alibi_rank() {
  // expected-error @+1 {{'pe.alibi' op result must be [b, h, sq, skv] (rank 4), got 'tensor<2x8x8xf32>'}}
  %0 = pe.alibi <num_heads = 2, form = causal> : tensor<2x8x8xf32>
  return
}

// -----

func.func @t5_buckets_vs_table(%table: tensor<16x8xf32>) {
  // expected-error @+1 {{'pe.t5_bias' op table num_buckets (dim 0) is 16 but num_buckets is 32}}
  %0 = pe.t5_bias %table <num_buckets = 32, max_distance = 128> : tensor<16x8xf32> -> tensor<1x8x4x4xf32>
  return
}

// -----

func.func @t5_heads_vs_table(%table: tensor<32x8xf32>) {
  // expected-error @+1 {{'pe.t5_bias' op table h (dim 1) is 8 but the heads of the result is 12}}
  %0 = pe.t5_bias %table <num_buckets = 32, max_distance = 128> : tensor<32x8xf32> -> tensor<1x12x4x4xf32>
  return
}

// -----

func.func @t5_odd_buckets(%table: tensor<31x8xf32>) {
  // expected-error @+1 {{t5_bias num_buckets (31) must be even and >= 4 when bidirectional}}
  %0 = pe.t5_bias %table <num_buckets = 31, max_distance = 128> : tensor<31x8xf32> -> tensor<1x8x4x4xf32>
  return
}

// -----

func.func @t5_max_distance(%table: tensor<32x8xf32>) {
  // expected-error @+1 {{t5_bias max_distance (8) must exceed the exact bucket range (8)}}
  %0 = pe.t5_bias %table <num_buckets = 32, max_distance = 8> : tensor<32x8xf32> -> tensor<1x8x4x4xf32>
  return
}

// -----

func.func @t5_element_type(%table: tensor<32x8xf16>) {
  // expected-error @+1 {{'pe.t5_bias' op table element type 'f16' does not match result element type 'f32'}}
  %0 = pe.t5_bias %table <num_buckets = 32, max_distance = 128> : tensor<32x8xf16> -> tensor<1x8x4x4xf32>
  return
}

// -----

func.func @relative_key_rows(%q: tensor<1x8x16x32xf32>, %table: tensor<8x32xf32>) {
  // expected-error @+1 {{'pe.relative_key' op table rows (dim 0) is 8 but 2 * clip + 1 is 9}}
  %0 = pe.relative_key %q, %table <clip = 4> : tensor<1x8x16x32xf32>, tensor<8x32xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @relative_key_width(%q: tensor<1x8x16x32xf32>, %table: tensor<9x64xf32>) {
  // expected-error @+1 {{'pe.relative_key' op table d (dim 1) is 64 but the query's head_dim is 32}}
  %0 = pe.relative_key %q, %table <clip = 4> : tensor<1x8x16x32xf32>, tensor<9x64xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @relative_key_result(%q: tensor<1x8x16x32xf32>, %table: tensor<9x32xf32>) {
  // expected-error @+1 {{'pe.relative_key' op result sq (dim 2) is 15 but the query's is 16}}
  %0 = pe.relative_key %q, %table <clip = 4> : tensor<1x8x16x32xf32>, tensor<9x32xf32> -> tensor<1x8x15x16xf32>
  return
}

// -----

func.func @relative_key_clip(%q: tensor<1x8x16x32xf32>, %table: tensor<9x32xf32>) {
  // expected-error @+1 {{relative_key clip must be non-negative, got -1}}
  %0 = pe.relative_key %q, %table <clip = -1> : tensor<1x8x16x32xf32>, tensor<9x32xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @relative_value_rows(%table: tensor<5x32xf32>) {
  // expected-error @+1 {{'pe.relative_value' op table rows (dim 0) is 5 but 2 * clip + 1 is 9}}
  %0 = pe.relative_value %table <clip = 4> : tensor<5x32xf32> -> tensor<16x16x32xf32>
  return
}

// -----

func.func @relative_value_width(%table: tensor<9x32xf32>) {
  // expected-error @+1 {{'pe.relative_value' op table dv (dim 1) is 32 but the result's dv is 16}}
  %0 = pe.relative_value %table <clip = 4> : tensor<9x32xf32> -> tensor<16x16x16xf32>
  return
}

// -----

func.func @relative_key_table_heads(%q: tensor<1x8x16x32xf32>, %table: tensor<4x9x32xf32>) {
  // expected-error @+1 {{'pe.relative_key' op table h (dim 0) is 4 but the query's heads is 8}}
  %0 = pe.relative_key %q, %table <clip = 4> : tensor<1x8x16x32xf32>, tensor<4x9x32xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @relative_key_table_rank(%q: tensor<1x8x16x32xf32>, %table: tensor<9xf32>) {
  // expected-error @+1 {{'pe.relative_key' op table must be [2 * clip + 1, d] (shared by the heads) or [h, 2 * clip + 1, d] (per head), got 'tensor<9xf32>'}}
  %0 = pe.relative_key %q, %table <clip = 4> : tensor<1x8x16x32xf32>, tensor<9xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @relative_value_per_head_result(%table: tensor<4x9x32xf32>) {
  // expected-error @+1 {{'pe.relative_value' op result must be [h, sq, skv, dv] (a per-head table) (rank 4), got 'tensor<16x16x32xf32>'}}
  %0 = pe.relative_value %table <clip = 4> : tensor<4x9x32xf32> -> tensor<16x16x32xf32>
  return
}

// -----

func.func @relative_value_per_head_heads(%table: tensor<4x9x32xf32>) {
  // expected-error @+1 {{'pe.relative_value' op table h (dim 0) is 4 but the query's heads is 2}}
  %0 = pe.relative_value %table <clip = 4> : tensor<4x9x32xf32> -> tensor<2x16x16x32xf32>
  return
}

// -----

func.func @sinusoidal_odd(%x: tensor<2x16x63xf32>, %pos: tensor<16xi32>) {
  // expected-error @+1 {{'pe.sinusoidal' op input d (63) must be even: channels pair as (sin, cos)}}
  %0 = pe.sinusoidal %x, %pos <> : tensor<2x16x63xf32>, tensor<16xi32>
  return
}

// -----

func.func @sinusoidal_base(%x: tensor<2x16x64xf32>, %pos: tensor<16xi32>) {
  // expected-error @+1 {{sinusoidal base must be positive and finite, got 0.0}}
  %0 = pe.sinusoidal %x, %pos <base = 0.0> : tensor<2x16x64xf32>, tensor<16xi32>
  return
}

// -----

func.func @sinusoidal_positions(%x: tensor<2x16x64xf32>, %pos: tensor<16xi16>) {
  // expected-error @+1 {{'pe.sinusoidal' op positions must have element type i32 or i64, got 'i16'}}
  %0 = pe.sinusoidal %x, %pos <> : tensor<2x16x64xf32>, tensor<16xi16>
  return
}

// -----

func.func @learned_rows(%x: tensor<2x16x64xf32>, %pos: tensor<16xi32>, %table: tensor<256x64xf32>) {
  // expected-error @+1 {{'pe.learned' op table rows (dim 0) is 256 but max_positions is 512}}
  %0 = pe.learned %x, %pos, %table <max_positions = 512> : tensor<2x16x64xf32>, tensor<16xi32>, tensor<256x64xf32>
  return
}

// -----

func.func @learned_width(%x: tensor<2x16x64xf32>, %pos: tensor<16xi32>, %table: tensor<512x32xf32>) {
  // expected-error @+1 {{'pe.learned' op table d (dim 1) is 32 but the input's d is 64}}
  %0 = pe.learned %x, %pos, %table <max_positions = 512> : tensor<2x16x64xf32>, tensor<16xi32>, tensor<512x32xf32>
  return
}

// -----

func.func @learned_max_positions(%x: tensor<2x16x64xf32>, %pos: tensor<16xi32>, %table: tensor<512x64xf32>) {
  // expected-error @+1 {{learned max_positions must be positive, got 0}}
  %0 = pe.learned %x, %pos, %table <max_positions = 0> : tensor<2x16x64xf32>, tensor<16xi32>, tensor<512x64xf32>
  return
}

// -----

func.func @ntk_rotary_dim(%x: tensor<1x4x8x2xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op ntk scaling needs rotary_dim > 2 (base exponent rd/(rd-2)), got 2}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.ntk<factor = 2.0>> : tensor<1x4x8x2xf32>, tensor<8xi32>
  return
}

// -----

func.func @dynamic_ntk_rotary_dim(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{dynamic_ntk scaling needs rotary_dim > 2 (base exponent rd/(rd-2)), got 2}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, rotary_dim = 2, scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 16>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_op_apply_to(%x: tensor<1x4x16x64xf32>, %p: tensor<16xi64>) {
  // expected-error @+1 {{'pe.rope' op apply_to = query is for a RoPE fused into attn.attention; pe.rope rotates its input, so leave apply_to out}}
  %r = pe.rope %x, %p <layout = half, theta = 10000.0, apply_to = query> : tensor<1x4x16x64xf32>, tensor<16xi64>
  return
}

// -----

func.func @rope_interleaved_sections_count(%x: tensor<1x4x8x64xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{rope interleaved_sections needs three sections (t, h, w), got 2}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, sections = [16, 16], interleaved_sections = true> : tensor<1x4x8x64xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @rope_axial_with_sections(%x: tensor<1x4x8x64xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{rope axial (2-D, [2, s] positions) takes no sections and no scaling}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, sections = [16, 16], axial = true> : tensor<1x4x8x64xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @rope_axial_rotary_dim(%x: tensor<1x4x8x64xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{rope axial needs rotary_dim % 4 == 0 (rotary_dim/4 frequencies per axis), got 30}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, rotary_dim = 30, axial = true> : tensor<1x4x8x64xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @rope_axial_head_dim(%x: tensor<1x4x8x66xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{'pe.rope' op rope axial needs rotary_dim % 4 == 0 (rotary_dim/4 frequencies per axis), got 66}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, axial = true> : tensor<1x4x8x66xf32>, tensor<2x8xi32>
  return
}

// -----

func.func @rope_axial_positions(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op positions must be [axes, s] or [axes, b, s] (rank 2 or 3), got 'tensor<8xi32>'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, axial = true> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @alibi_by_position_unfused() {
  // expected-error @+1 {{'pe.alibi' op relative_to = position is for an encoding fused into attn.attention (it reads the attention's position ids); this op has no position operands, so leave relative_to out}}
  %0 = pe.alibi <num_heads = 4, form = causal, relative_to = position> : tensor<1x4x8x8xf32>
  return
}

// -----

func.func @relative_to_bad_value() {
  // expected-error @+2 {{expected ::pejit::pe::RelativeTo to be one of: index, position}}
  // expected-error @+1 {{failed to parse PE_AlibiAttr parameter 'relative_to' which is to be a `::pejit::pe::RelativeTo`}}
  %0 = pe.alibi <num_heads = 4, form = causal, relative_to = token> : tensor<1x4x8x8xf32>
  return
}

// -----

// A pre-rotated K cache with dynamic NTK: rotated at an earlier length.
func.func @pre_rotated_dynamic_ntk(%q: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{rope apply_to = query with #pe.dynamic_ntk<factor = 2.0, original_max_position = 4096>: its frequencies follow each call's length (max(position) + 1), so a side rotated in an earlier call (a pre-rotated K cache) was rotated with other frequencies once the length passes original_max_position; keep that side unrotated and rotate both at read time (apply_to = both)}}
  %o = attn.attention %q, %q, %q encodings([#pe.rope<layout = half, theta = 10000.0, scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 4096>, apply_to = query>]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @embed_float_tokens(%tok: tensor<2x16xf32>, %words: tensor<100x64xf32>) {
  // expected-error @+1 {{'pe.embed' op tokens must be i32 or i64, got 'tensor<2x16xf32>'}}
  %0 = pe.embed %tok, %words : tensor<2x16xf32>, tensor<100x64xf32> -> tensor<2x16x64xf32>
  return
}

// -----

func.func @embed_tokens_rank(%tok: tensor<16xi64>, %words: tensor<100x64xf32>) {
  // expected-error @+1 {{'pe.embed' op tokens must be [b, s] (rank 2), got 'tensor<16xi64>'}}
  %0 = pe.embed %tok, %words : tensor<16xi64>, tensor<100x64xf32> -> tensor<2x16x64xf32>
  return
}

// -----

func.func @embed_width(%tok: tensor<2x16xi64>, %words: tensor<100x64xf32>) {
  // expected-error @+1 {{'pe.embed' op result d (dim 2) is 32 but the table's d is 64}}
  %0 = pe.embed %tok, %words : tensor<2x16xi64>, tensor<100x64xf32> -> tensor<2x16x32xf32>
  return
}

// -----

func.func @embed_length(%tok: tensor<2x16xi64>, %words: tensor<100x64xf32>) {
  // expected-error @+1 {{'pe.embed' op result s (dim 1) is 8 but the tokens' s is 16}}
  %0 = pe.embed %tok, %words : tensor<2x16xi64>, tensor<100x64xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embed_element_type(%tok: tensor<2x16xi64>, %words: tensor<100x64xbf16>) {
  // expected-error @+1 {{'pe.embed' op result element type 'f32' does not match table element type 'bf16'}}
  %0 = pe.embed %tok, %words : tensor<2x16xi64>, tensor<100x64xbf16> -> tensor<2x16x64xf32>
  return
}

// -----

func.func @embed_scale(%tok: tensor<2x16xi64>, %words: tensor<100x64xf32>) {
  // expected-error @+1 {{'pe.embed' op scale must be finite, got INF}}
  %0 = pe.embed %tok, %words {scale = 0x7FF0000000000000 : f64} : tensor<2x16xi64>, tensor<100x64xf32> -> tensor<2x16x64xf32>
  return
}

// -----

func.func @rope_scale_without_flag(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi64>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'pe.rope' op has a scale(...) operand but its encoding lacks runtime_scale = true}}
  %0 = pe.rope %x, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0> : tensor<1x4x8x64xf32>, tensor<8xi64>
  return
}

// -----

func.func @rope_flag_without_scale(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi64>) {
  // expected-error @+1 {{'pe.rope' op has runtime_scale = true but no scale(%s : tensor<1xf32>) operand}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, runtime_scale = true> : tensor<1x4x8x64xf32>, tensor<8xi64>
  return
}

// -----

func.func @rope_scale_with_dynamic_ntk(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi64>, %s: tensor<1xf32>) {
  // expected-error @+1 {{rope runtime_scale with #pe.dynamic_ntk<factor = 2.0, original_max_position = 4>: its frequencies follow the call's length}}
  %0 = pe.rope %x, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0, scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 4>, runtime_scale = true> : tensor<1x4x8x64xf32>, tensor<8xi64>
  return
}

// -----

func.func @rope_scale_per_batch_with_shared_ids(%x: tensor<2x4x8x64xf32>, %pos: tensor<8xi64>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'pe.rope' op scale: a per-batch RoPE position scale [2] needs per-batch position ids ([b, s]) on every side it rotates: the cos/sin tables are per id row}}
  %0 = pe.rope %x, %pos scale(%s : tensor<2xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x4x8x64xf32>, tensor<8xi64>
  return
}

// -----

func.func @rope_scale_wrong_type(%x: tensor<2x4x8x64xf32>, %pos: tensor<2x8xi64>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'pe.rope' op scale: the RoPE position scale is [3]: it must be [1] or [b = 2] (a per-batch scale needs a static b)}}
  %0 = pe.rope %x, %pos scale(%s : tensor<3xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x4x8x64xf32>, tensor<2x8xi64>
  return
}

// -----

func.func @rope_learned_inv_freq_standalone(%x: tensor<1x4x8x64xf32>, %p: tensor<8xi64>) {
  // expected-error @+1 {{'pe.rope' op learned_inv_freq is for a RoPE fused into attn.attention (its frequencies are an encoding operand there); pe.rope computes them from theta}}
  %r = pe.rope %x, %p <layout = half, theta = 10000.0, learned_inv_freq = true> : tensor<1x4x8x64xf32>, tensor<8xi64>
  return
}

// -----

func.func @rope_learned_inv_freq_dynamic_ntk(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope learned_inv_freq with #pe.dynamic_ntk<factor = 2.0, original_max_position = 64>: its frequencies follow the call's length}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 64>, learned_inv_freq = true> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @embed_grad_float_ids(%dy: tensor<2x16x64xf32>, %ids: tensor<16xf32>) {
  // expected-error @+1 {{'pe.embed_grad' op ids must be i32 or i64, got 'tensor<16xf32>'}}
  %0 = pe.embed_grad %dy, %ids : tensor<2x16x64xf32>, tensor<16xf32> -> tensor<100x64xf32>
  return
}

// -----

func.func @embed_grad_rank(%dy: tensor<16x64xf32>, %ids: tensor<16xi64>) {
  // expected-error @+1 {{'pe.embed_grad' op grad must be [b, s, d] (rank 3), got 'tensor<16x64xf32>'}}
  %0 = pe.embed_grad %dy, %ids : tensor<16x64xf32>, tensor<16xi64> -> tensor<100x64xf32>
  return
}

// -----

func.func @embed_grad_ids_length(%dy: tensor<2x16x64xf32>, %ids: tensor<2x15xi64>) {
  // expected-error @+1 {{'pe.embed_grad' op ids s (dim 1) is 15 but grad's s is 16}}
  %0 = pe.embed_grad %dy, %ids : tensor<2x16x64xf32>, tensor<2x15xi64> -> tensor<100x64xf32>
  return
}

// -----

func.func @embed_grad_width(%dy: tensor<2x16x64xf32>, %ids: tensor<16xi64>) {
  // expected-error @+1 {{'pe.embed_grad' op result d (dim 1) is 32 but grad's d is 64}}
  %0 = pe.embed_grad %dy, %ids : tensor<2x16x64xf32>, tensor<16xi64> -> tensor<100x32xf32>
  return
}

// -----

func.func @embed_grad_dynamic_rows(%dy: tensor<2x16x64xf32>, %ids: tensor<16xi64>) {
  // expected-error @+1 {{'pe.embed_grad' op the result's rows (the table's) must be static, got 'tensor<?x64xf32>'}}
  %0 = pe.embed_grad %dy, %ids : tensor<2x16x64xf32>, tensor<16xi64> -> tensor<?x64xf32>
  return
}

// -----

func.func @embed_grad_result_bf16(%dy: tensor<2x16x64xf16>, %ids: tensor<16xi64>) {
  // expected-error @+1 {{'pe.embed_grad' op the result's element type must be f32 or grad's, got 'bf16'}}
  %0 = pe.embed_grad %dy, %ids : tensor<2x16x64xf16>, tensor<16xi64> -> tensor<100x64xbf16>
  return
}

// -----

func.func @rope_scale_grad_without_runtime_scale(%dy: tensor<1x2x8x64xf32>, %x: tensor<1x2x8x64xf32>, %pos: tensor<8xi64>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'pe.rope_scale_grad' op has a scale(...) operand but its encoding lacks runtime_scale = true}}
  %0 = pe.rope_scale_grad %dy, %x, %pos scale(%s : tensor<1xf32>) <layout = half, theta = 10000.0> : tensor<1x2x8x64xf32>, tensor<8xi64> -> tensor<1xf32>
  return
}

// -----

func.func @rope_scale_grad_per_row_scale_shared_ids(%dy: tensor<2x2x8x64xf32>, %x: tensor<2x2x8x64xf32>, %pos: tensor<8xi64>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'pe.rope_scale_grad' op scale:}}
  %0 = pe.rope_scale_grad %dy, %x, %pos scale(%s : tensor<2xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x2x8x64xf32>, tensor<8xi64> -> tensor<2xf32>
  return
}

// -----

func.func @score_bias_grad_not_a_bias(%db: tensor<1x8x4x4xf32>, %t: tensor<32x8xf32>) {
  // expected-error @+1 {{'pe.score_bias_grad' op encoding #pe.rope<layout = half, theta = 10000.0> is not a score bias (pe.t5_bias's #pe.t5_bias<...>)}}
  %0 = pe.score_bias_grad %db operands(%t : tensor<32x8xf32>) encoding(#pe.rope<layout = half, theta = 10000.0>) : tensor<1x8x4x4xf32> -> tensor<32x8xf32>
  return
}

// -----

func.func @score_bias_grad_result(%db: tensor<1x8x4x4xf32>, %t: tensor<32x8xf32>) {
  // expected-error @+1 {{'pe.score_bias_grad' op result must be f32 of the operand's shape 'tensor<32x8xf32>', got 'tensor<32x4xf32>'}}
  %0 = pe.score_bias_grad %db operands(%t : tensor<32x8xf32>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128>) : tensor<1x8x4x4xf32> -> tensor<32x4xf32>
  return
}

// -----

func.func @score_bias_grad_heads(%db: tensor<1x4x4x4xf32>, %t: tensor<32x8xf32>) {
  // expected-error @+1 {{'pe.score_bias_grad' op operands #0 (t5_table): the T5 table must be [num_buckets = 32, hq = 4], got 'tensor<32x8xf32>'}}
  %0 = pe.score_bias_grad %db operands(%t : tensor<32x8xf32>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128>) : tensor<1x4x4x4xf32> -> tensor<32x8xf32>
  return
}

// -----

func.func @score_bias_grad_rank(%db: tensor<4x4x4xf32>, %t: tensor<32x8xf32>) {
  // expected-error @+1 {{'pe.score_bias_grad' op bias_grad must be [b, h, sq, skv] (rank 4), got 'tensor<4x4x4xf32>'}}
  %0 = pe.score_bias_grad %db operands(%t : tensor<32x8xf32>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128>) : tensor<4x4x4xf32> -> tensor<32x8xf32>
  return
}

// -----

func.func @relative_term_grad_not_a_term(%de: tensor<1x8x4x4xf32>, %t: tensor<32x8xf32>) {
  // expected-error @+1 {{'pe.relative_term_grad' op encoding #pe.t5_bias<num_buckets = 32, max_distance = 128> is not a Shaw term (#pe.relative_key or #pe.relative_value)}}
  %0 = pe.relative_term_grad %de table(%t : tensor<32x8xf32>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128>) : tensor<1x8x4x4xf32> -> tensor<32x8xf32>
  return
}

// -----

func.func @relative_key_grad_without_query(%de: tensor<1x8x4x4xf32>, %ak: tensor<9x64xf32>) {
  // expected-error @+1 {{'pe.relative_term_grad' op the key term's backward takes query(...): dq needs q}}
  %0 = pe.relative_term_grad %de table(%ak : tensor<9x64xf32>) encoding(#pe.relative_key<clip = 4>) : tensor<1x8x4x4xf32> -> tensor<9x64xf32>
  return
}

// -----

func.func @relative_key_grad_rows(%de: tensor<1x8x4x4xf32>, %q: tensor<1x8x5x64xf32>, %ak: tensor<9x64xf32>) {
  // expected-error @+1 {{'pe.relative_term_grad' op query sq (dim 2) is 5 but term_grad's is 4}}
  %0:2 = pe.relative_term_grad %de query(%q : tensor<1x8x5x64xf32>) table(%ak : tensor<9x64xf32>) encoding(#pe.relative_key<clip = 4>) : tensor<1x8x4x4xf32> -> tensor<1x8x5x64xf32>, tensor<9x64xf32>
  return
}

// -----

func.func @relative_value_grad_results(%dr: tensor<4x4x32xf32>, %av: tensor<9x32xf32>) {
  // expected-error @+1 {{'pe.relative_term_grad' op results must be 'tensor<9x32xf32>' (the table's gradient in f32)}}
  %0 = pe.relative_term_grad %dr table(%av : tensor<9x32xf32>) encoding(#pe.relative_value<clip = 4>) : tensor<4x4x32xf32> -> tensor<9x32xf16>
  return
}

// -----

func.func @relative_value_grad_table(%dr: tensor<4x4x32xf32>, %av: tensor<7x32xf32>) {
  // expected-error @+1 {{'pe.relative_term_grad' op table (shaw_value_table): }}
  %0 = pe.relative_term_grad %dr table(%av : tensor<7x32xf32>) encoding(#pe.relative_value<clip = 4>) : tensor<4x4x32xf32> -> tensor<7x32xf32>
  return
}
