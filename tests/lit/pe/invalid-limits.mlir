// The pe verifiers' bounds (pejit/dialects/Limits.h): sizes the compiler turns into
// memory or code, and f64 parameters the kernels hold as f32 constants or
// turn into RoPE frequencies. Each reproducer of the hardening campaign
// (issue 13) gives this error instead of a crash, a hang or NaN output.
// RUN: pejit-opt %s --split-input-file --verify-diagnostics

// theta = +inf, written as its bits; printed the same way in the message.
func.func @rope_infinite_theta(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope theta must be positive and finite, got 0x7FF0000000000000}}
  %0 = pe.rope %x, %pos <layout = half, theta = 0x7FF0000000000000> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

// inv_freq[c] = theta^(-2c/d): at theta 1e-40 the largest is ~1e39, and
// index 2 is the first beyond 32.
func.func @rope_tiny_theta(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope inverse frequency 2 is 316.22776601}}
  %0 = pe.rope %x, %pos <layout = half, theta = 1.0e-40> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_theta_1e_minus_300(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{it must be at most 32.0, so that angles (|position| < 2^31) stay below 2^36}}
  %0 = pe.rope %x, %pos <layout = half, theta = 1.0e-300> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

// linear: inv_freq / factor = 1e300.
func.func @linear_tiny_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op rope inverse frequency 0 is 9.99999999999}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.linear<factor = 1.0e-300>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

// The bound itself: factor 1/32 makes inv_freq[0] exactly 32 (accepted);
// 0.03 makes it 33.3.
func.func @linear_factor_at_the_bound(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.linear<factor = 0.03125>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @linear_factor_past_the_bound(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope inverse frequency 0 is 33.333333333333336}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.linear<factor = 0.03>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

// ntk: base = theta * factor^(d/(d-2)) underflows.
func.func @ntk_tiny_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op rope inverse frequency 1 is}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.ntk<factor = 1.0e-300>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @linear_infinite_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{linear scaling factor must be positive and finite, got 0x7FF0000000000000}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.linear<factor = 0x7FF0000000000000>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @yarn_infinite_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{yarn factor must be positive and finite, got 0x7FF0000000000000}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 0x7FF0000000000000, original_max_position = 4096>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @yarn_nan_mscale(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+2 {{yarn mscale must be finite, got 0x7FF8000000000000}}
  // expected-error @+1 {{failed to parse PE_RopeAttr parameter 'scaling'}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, mscale = 0x7FF8000000000000>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

// get_mscale(4, m) / get_mscale(4, 1) = 8.8e299 for m = 7.2e300: the
// attention factor multiplies the f32 cos/sin tables.
func.func @yarn_huge_attention_factor(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope attention factor 8.766082347340}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, mscale = 7.2e300, mscale_all_dim = 1.0>> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_rotary_dim_limit(%x: tensor<1x4x8x64xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{rope rotary_dim (1048576) exceeds pejit's limit of 1024}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, rotary_dim = 1048576> : tensor<1x4x8x64xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_head_dim_limit(%x: tensor<1x4x8x1048576xf32>, %pos: tensor<8xi32>) {
  // expected-error @+1 {{'pe.rope' op input d (dim 3) is 1048576, beyond pejit's limit of 1024}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x4x8x1048576xf32>, tensor<8xi32>
  return
}

// -----

func.func @rope_zero_sequence(%x: tensor<1x4x0x64xf32>, %pos: tensor<0xi32>) {
  // expected-error @+1 {{'pe.rope' op input s (dim 2) is 0: every dimension must be at least 1}}
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x4x0x64xf32>, tensor<0xi32>
  return
}

// -----

// The slope table was allocated at compile time (bad_alloc at 2^31 - 1).
func.func @alibi_heads_2_31(%q: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{alibi num_heads (2147483647) exceeds pejit's limit of 1024 (the most heads an attention has)}}
  %0 = pe.alibi <num_heads = 2147483647, form = causal> : tensor<1x4x8x8xf32>
  return
}

// -----

func.func @alibi_heads_2_40(%q: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{alibi num_heads (1099511627776) exceeds pejit's limit of 1024}}
  %0 = pe.alibi <num_heads = 1099511627776, form = causal> : tensor<1x4x8x8xf32>
  return
}

// -----

// INT64_MAX looped forever in the slope computation.
func.func @alibi_heads_int64_max(%q: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{alibi num_heads (9223372036854775807) exceeds pejit's limit of 1024}}
  %0 = pe.alibi <num_heads = 9223372036854775807, form = causal> : tensor<1x4x8x8xf32>
  return
}

// -----

func.func @alibi_nan_slope(%q: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{alibi slopes[1] (0x7FF8000000000000) is NaN: the kernels use it as an f32}}
  %0 = pe.alibi <num_heads = 2, form = causal, slopes = [0.5, 0x7FF8000000000000]> : tensor<1x2x8x8xf32>
  return
}

// -----

func.func @alibi_huge_slope(%q: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{alibi slopes[0] (1.0e+39) is above f32's largest value 3.4028235e38}}
  %0 = pe.alibi <num_heads = 2, form = causal, slopes = [1.0e39, 0.5]> : tensor<1x2x8x8xf32>
  return
}

// -----

func.func @alibi_zero_keys(%q: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{'pe.alibi' op result skv (dim 3) is 0: every dimension must be at least 1}}
  %0 = pe.alibi <num_heads = 2, form = causal> : tensor<1x2x8x0xf32>
  return
}

// -----

func.func @t5_buckets_limit(%table: tensor<32x4xf32>) {
  // expected-error @+1 {{t5_bias num_buckets (33554432) exceeds pejit's limit of 16777216 (rows of the bias table)}}
  %0 = pe.t5_bias %table <num_buckets = 33554432, max_distance = 128> : tensor<32x4xf32> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @relative_key_clip_limit(%q: tensor<1x4x8x64xf32>, %table: tensor<9x64xf32>) {
  // expected-error @+1 {{relative_key clip (9223372036854775807) exceeds pejit's limit of 8388607 (the table has 2 clip + 1 rows)}}
  %0 = pe.relative_key %q, %table <clip = 9223372036854775807> : tensor<1x4x8x64xf32>, tensor<9x64xf32> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @learned_positions_limit(%x: tensor<2x16x64xf32>, %pos: tensor<16xi64>, %table: tensor<512x64xf32>) {
  // expected-error @+1 {{learned max_positions (4294967296) exceeds pejit's limit of 16777216 (rows of the embedding table)}}
  %0 = pe.learned %x, %pos, %table <max_positions = 4294967296> : tensor<2x16x64xf32>, tensor<16xi64>, tensor<512x64xf32>
  return
}
