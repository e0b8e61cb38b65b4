// Every pe op and attribute parses, prints, and parses back to the same text,
// in both the custom and the generic form.
// RUN: pejit-opt %s | pejit-opt | FileCheck %s
// RUN: pejit-opt %s --mlir-print-op-generic | pejit-opt | FileCheck %s

// CHECK-LABEL: func.func @rope_half
func.func @rope_half(%x: tensor<1x32x128x128xf32>, %pos: tensor<128xi32>) -> tensor<1x32x128x128xf32> {
  // CHECK: pe.rope %{{.*}}, %{{.*}} <layout = half, theta = 500000.0> : tensor<1x32x128x128xf32>, tensor<128xi32>
  %0 = pe.rope %x, %pos <layout = half, theta = 500000.0> : tensor<1x32x128x128xf32>, tensor<128xi32>
  return %0 : tensor<1x32x128x128xf32>
}

// The adjoint (pe.rope's backward: the rotation transposed).
// CHECK-LABEL: func.func @rope_adjoint
func.func @rope_adjoint(%dy: tensor<1x32x128x128xf32>, %pos: tensor<128xi32>) -> tensor<1x32x128x128xf32> {
  // CHECK: pe.rope adjoint %{{.*}}, %{{.*}} <layout = half, theta = 500000.0> : tensor<1x32x128x128xf32>, tensor<128xi32>
  %0 = pe.rope adjoint %dy, %pos <layout = half, theta = 500000.0> : tensor<1x32x128x128xf32>, tensor<128xi32>
  return %0 : tensor<1x32x128x128xf32>
}

// CHECK-LABEL: func.func @rope_interleaved_partial_batched_positions
func.func @rope_interleaved_partial_batched_positions(%x: tensor<2x8x16x64xbf16>, %pos: tensor<2x16xi64>) -> tensor<2x8x16x64xbf16> {
  // CHECK: pe.rope %{{.*}}, %{{.*}} <layout = interleaved, theta = 10000.0, rotary_dim = 32> : tensor<2x8x16x64xbf16>, tensor<2x16xi64>
  %0 = pe.rope %x, %pos <layout = interleaved, theta = 1.0e4, rotary_dim = 32> : tensor<2x8x16x64xbf16>, tensor<2x16xi64>
  return %0 : tensor<2x8x16x64xbf16>
}

// A runtime position scale: positions times s, an f32 [1] (or [b]) operand.
// CHECK-LABEL: func.func @rope_runtime_scale
func.func @rope_runtime_scale(%x: tensor<2x8x16x64xf32>, %pos: tensor<2x16xi64>, %s: tensor<2xf32>) -> tensor<2x8x16x64xf32> {
  // CHECK: pe.rope %{{.*}}, %{{.*}} scale(%{{.*}} : tensor<2xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x8x16x64xf32>, tensor<2x16xi64>
  %0 = pe.rope %x, %pos scale(%s : tensor<2xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x8x16x64xf32>, tensor<2x16xi64>
  return %0 : tensor<2x8x16x64xf32>
}

// CHECK-LABEL: func.func @rope_dynamic_shapes
func.func @rope_dynamic_shapes(%x: tensor<?x?x?x128xf16>, %pos: tensor<?xi32>) -> tensor<?x?x?x128xf16> {
  // CHECK: pe.rope {{.*}} <layout = half, theta = 10000.0> : tensor<?x?x?x128xf16>, tensor<?xi32>
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<?x?x?x128xf16>, tensor<?xi32>
  return %0 : tensor<?x?x?x128xf16>
}

// CHECK-LABEL: func.func @rope_scalings
func.func @rope_scalings(%x: tensor<1x4x8x8xf32>, %pos: tensor<8xi32>) {
  // CHECK: scaling = #pe.linear<factor = 2.0>
  %0 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.linear<factor = 2.0>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  // CHECK: scaling = #pe.ntk<factor = 4.0>
  %1 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.ntk<factor = 4.0>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  // CHECK: scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 2048>
  %2 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 2048>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  // Defaults (beta_fast = 32, beta_slow = 1, truncate = true) are not printed.
  // CHECK: scaling = #pe.yarn<factor = 4.0, original_max_position = 4096>>
  %3 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, beta_fast = 32.0, beta_slow = 1.0, truncate = true>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  // CHECK: scaling = #pe.yarn<factor = 40.0, original_max_position = 4096, beta_fast = 16.0, beta_slow = 0.5, mscale = 1.0, mscale_all_dim = 0.707, truncate = false>
  %4 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 40.0, original_max_position = 4096, beta_fast = 16.0, beta_slow = 0.5, mscale = 1.0, mscale_all_dim = 0.707, truncate = false>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  // CHECK: scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, attention_factor = 1.25>
  %5 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 4096, attention_factor = 1.25>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  // CHECK: scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>
  %6 = pe.rope %x, %pos <layout = half, theta = 500000.0, scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  // CHECK: scaling = #pe.longrope<short_factor = [1.0, 1.5, 2.0, 3.25], long_factor = [1.0, 4.0, 8.0, 16.0], original_max_position = 4096, factor = 32.0>
  %7 = pe.rope %x, %pos <layout = half, theta = 10000.0, scaling = #pe.longrope<short_factor = [1.0, 1.5, 2.0, 3.25], long_factor = [1.0, 4.0, 8.0, 16.0], original_max_position = 4096, factor = 32.0>> : tensor<1x4x8x8xf32>, tensor<8xi32>
  return
}

// M-RoPE (Qwen2-VL): three position axes (t, h, w), sections over the
// rotary_dim/2 = 64 frequency indices.
// CHECK-LABEL: func.func @rope_mrope_sections
func.func @rope_mrope_sections(%x: tensor<1x4x16x128xf32>, %pos: tensor<3x16xi64>, %bpos: tensor<3x1x16xi32>) {
  // CHECK: pe.rope {{.*}} <layout = half, theta = 1000000.0, sections = [16, 24, 24]> : tensor<1x4x16x128xf32>, tensor<3x16xi64>
  %0 = pe.rope %x, %pos <layout = half, theta = 1000000.0, sections = [16, 24, 24]> : tensor<1x4x16x128xf32>, tensor<3x16xi64>
  // CHECK: pe.rope {{.*}} <layout = half, theta = 10000.0, rotary_dim = 64, sections = [8, 12, 12]> : tensor<1x4x16x128xf32>, tensor<3x1x16xi32>
  %1 = pe.rope %x, %bpos <layout = half, theta = 10000.0, rotary_dim = 64, sections = [8, 12, 12]> : tensor<1x4x16x128xf32>, tensor<3x1x16xi32>
  return
}

// Qwen3-VL's interleaved sections, and SAM 2's 2-D axial RoPE on [2, s]
// positions (x, y).
// CHECK-LABEL: func.func @rope_interleaved_sections_and_axial
func.func @rope_interleaved_sections_and_axial(%x: tensor<1x4x16x128xf32>, %pos: tensor<3x16xi64>, %xy: tensor<2x16xi32>) {
  // CHECK: pe.rope {{.*}} <layout = half, theta = 5000000.0, sections = [24, 20, 20], interleaved_sections = true> : tensor<1x4x16x128xf32>, tensor<3x16xi64>
  %0 = pe.rope %x, %pos <layout = half, theta = 5000000.0, sections = [24, 20, 20], interleaved_sections = true> : tensor<1x4x16x128xf32>, tensor<3x16xi64>
  // CHECK: pe.rope {{.*}} <layout = interleaved, theta = 100.0, axial = true> : tensor<1x4x16x128xf32>, tensor<2x16xi32>
  %1 = pe.rope %x, %xy <layout = interleaved, theta = 100.0, axial = true> : tensor<1x4x16x128xf32>, tensor<2x16xi32>
  return
}

// CHECK-LABEL: func.func @alibi
func.func @alibi() {
  // CHECK: pe.alibi <num_heads = 12, form = causal> : tensor<1x12x64x80xf32>
  %0 = pe.alibi <num_heads = 12, form = causal> : tensor<1x12x64x80xf32>
  // A tensor-parallel shard: heads [8, 12) of 12.
  // CHECK: pe.alibi <num_heads = 12, head_offset = 8, form = symmetric> : tensor<2x4x64x64xf16>
  %1 = pe.alibi <num_heads = 12, head_offset = 8, form = symmetric> : tensor<2x4x64x64xf16>
  // CHECK: pe.alibi <num_heads = 2, form = causal, slopes = [0.5, 0.25]> : tensor<1x2x8x8xf32>
  %2 = pe.alibi <num_heads = 2, form = causal, slopes = [0.5, 0.25]> : tensor<1x2x8x8xf32>
  return
}

// Shaw tables per query head: a^K [h, 2k+1, d], a^V [h, 2k+1, dv] with a
// [h, sq, skv, dv] term.
// CHECK-LABEL: func.func @shaw_per_head
func.func @shaw_per_head(%q: tensor<1x4x16x32xf32>, %ak: tensor<4x9x32xf32>, %av: tensor<4x9x48xf32>) {
  // CHECK: pe.relative_key %{{.*}}, %{{.*}} <clip = 4> : tensor<1x4x16x32xf32>, tensor<4x9x32xf32> -> tensor<1x4x16x20xf32>
  %0 = pe.relative_key %q, %ak <clip = 4> : tensor<1x4x16x32xf32>, tensor<4x9x32xf32> -> tensor<1x4x16x20xf32>
  // CHECK: pe.relative_value %{{.*}} <clip = 4> : tensor<4x9x48xf32> -> tensor<4x16x20x48xf32>
  %1 = pe.relative_value %av <clip = 4> : tensor<4x9x48xf32> -> tensor<4x16x20x48xf32>
  return
}

// CHECK-LABEL: func.func @t5_bias
func.func @t5_bias(%table: tensor<32x8xf32>) {
  // CHECK: pe.t5_bias %{{.*}} <num_buckets = 32, max_distance = 128> : tensor<32x8xf32> -> tensor<1x8x64x64xf32>
  %0 = pe.t5_bias %table <num_buckets = 32, max_distance = 128, bidirectional = true> : tensor<32x8xf32> -> tensor<1x8x64x64xf32>
  // CHECK: pe.t5_bias %{{.*}} <num_buckets = 32, max_distance = 128, bidirectional = false> : tensor<32x8xf32> -> tensor<1x8x1x64xf32>
  %1 = pe.t5_bias %table <num_buckets = 32, max_distance = 128, bidirectional = false> : tensor<32x8xf32> -> tensor<1x8x1x64xf32>
  return
}

// CHECK-LABEL: func.func @shaw
func.func @shaw(%q: tensor<1x8x64x32xf32>, %ak: tensor<9x32xf32>, %av: tensor<9x48xf32>) {
  // CHECK: pe.relative_key %{{.*}}, %{{.*}} <clip = 4> : tensor<1x8x64x32xf32>, tensor<9x32xf32> -> tensor<1x8x64x80xf32>
  %0 = pe.relative_key %q, %ak <clip = 4> : tensor<1x8x64x32xf32>, tensor<9x32xf32> -> tensor<1x8x64x80xf32>
  // CHECK: pe.relative_value %{{.*}} <clip = 4> : tensor<9x48xf32> -> tensor<64x80x48xf32>
  %1 = pe.relative_value %av <clip = 4> : tensor<9x48xf32> -> tensor<64x80x48xf32>
  return
}

// CHECK-LABEL: func.func @absolute
func.func @absolute(%x: tensor<2x16x64xf32>, %pos: tensor<16xi64>, %table: tensor<512x64xf32>) {
  // CHECK: pe.sinusoidal %{{.*}}, %{{.*}} <> : tensor<2x16x64xf32>, tensor<16xi64>
  %0 = pe.sinusoidal %x, %pos <> : tensor<2x16x64xf32>, tensor<16xi64>
  // CHECK: pe.sinusoidal %{{.*}}, %{{.*}} <base = 500.0> : tensor<2x16x64xf32>, tensor<16xi64>
  %1 = pe.sinusoidal %x, %pos <base = 500.0> : tensor<2x16x64xf32>, tensor<16xi64>
  // CHECK: pe.learned %{{.*}}, %{{.*}}, %{{.*}} <max_positions = 512> : tensor<2x16x64xf32>, tensor<16xi64>, tensor<512x64xf32>
  %2 = pe.learned %x, %pos, %table <max_positions = 512> : tensor<2x16x64xf32>, tensor<16xi64>, tensor<512x64xf32>
  return
}

// pe.embed: out[b, t] = table[tokens[b, t]] * scale; scale 1 is not printed.
// CHECK-LABEL: func.func @token_embedding
func.func @token_embedding(%tok: tensor<?x?xi64>, %words: tensor<32000x64xbf16>, %tok32: tensor<2x16xi32>) {
  // CHECK: pe.embed %{{.*}}, %{{.*}} {scale = 8.000000e+00 : f64} : tensor<?x?xi64>, tensor<32000x64xbf16> -> tensor<?x?x64xbf16>
  %0 = pe.embed %tok, %words {scale = 8.0} : tensor<?x?xi64>, tensor<32000x64xbf16> -> tensor<?x?x64xbf16>
  // CHECK: pe.embed %{{.*}}, %{{.*}} : tensor<2x16xi32>, tensor<32000x64xbf16> -> tensor<2x16x64xbf16>
  %1 = pe.embed %tok32, %words : tensor<2x16xi32>, tensor<32000x64xbf16> -> tensor<2x16x64xbf16>
  return
}

// Small decimals round-trip exactly.
// CHECK-LABEL: func.func @float_printing
func.func @float_printing(%x: tensor<1x1x4x4xf32>, %pos: tensor<4xi32>) {
  // CHECK: theta = 0.1, scaling = #pe.yarn<factor = 2.0, original_max_position = 64, attention_factor = 1.0e-06>
  %0 = pe.rope %x, %pos <layout = half, theta = 0.1, scaling = #pe.yarn<factor = 2.0, original_max_position = 64, attention_factor = 0.000001>> : tensor<1x1x4x4xf32>, tensor<4xi32>
  return
}

// ALiBi's BLOOM form (+slope * j).
// CHECK-LABEL: func.func @alibi_bloom
func.func @alibi_bloom() {
  // CHECK: pe.alibi <num_heads = 8, form = bloom> : tensor<1x8x16x16xf32>
  %0 = pe.alibi <num_heads = 8, form = bloom> : tensor<1x8x16x16xf32>
  return
}

// A table's gradient (pe.embed's and pe.learned's backward): rows summed by id.
// CHECK-LABEL: func.func @embed_grad
func.func @embed_grad(%dy: tensor<?x?x64xbf16>, %tok: tensor<?x?xi64>, %pos: tensor<?xi32>) -> (tensor<32000x64xf32>, tensor<512x64xf32>) {
  // CHECK: pe.embed_grad %{{.*}}, %{{.*}} {scale = 8.000000e+00 : f64} : tensor<?x?x64xbf16>, tensor<?x?xi64> -> tensor<32000x64xf32>
  %0 = pe.embed_grad %dy, %tok {scale = 8.0} : tensor<?x?x64xbf16>, tensor<?x?xi64> -> tensor<32000x64xf32>
  // CHECK: pe.embed_grad %{{.*}}, %{{.*}} : tensor<?x?x64xbf16>, tensor<?xi32> -> tensor<512x64xf32>
  %1 = pe.embed_grad %dy, %pos : tensor<?x?x64xbf16>, tensor<?xi32> -> tensor<512x64xf32>
  // A 16-bit table's gradient in its own type (accumulated in f32).
  // CHECK: pe.embed_grad %{{.*}}, %{{.*}} : tensor<?x?x64xbf16>, tensor<?xi32> -> tensor<512x64xbf16>
  %2 = pe.embed_grad %dy, %pos : tensor<?x?x64xbf16>, tensor<?xi32> -> tensor<512x64xbf16>
  return %0, %1 : tensor<32000x64xf32>, tensor<512x64xf32>
}

// A standalone RoPE's position scale gradient, from dy and x.
// CHECK-LABEL: func.func @rope_scale_grad
func.func @rope_scale_grad(%dy: tensor<2x8x?x64xf32>, %x: tensor<2x8x?x64xf32>, %pos: tensor<2x?xi64>, %s: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: pe.rope_scale_grad %{{.*}}, %{{.*}}, %{{.*}} scale(%{{.*}} : tensor<2xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x8x?x64xf32>, tensor<2x?xi64> -> tensor<2xf32>
  %0 = pe.rope_scale_grad %dy, %x, %pos scale(%s : tensor<2xf32>) <layout = half, theta = 10000.0, runtime_scale = true> : tensor<2x8x?x64xf32>, tensor<2x?xi64> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// A materialized T5 bias's table gradient from dBias.
// CHECK-LABEL: func.func @score_bias_grad
func.func @score_bias_grad(%db: tensor<1x8x?x?xbf16>, %t: tensor<32x8xbf16>) -> tensor<32x8xf32> {
  // CHECK: pe.score_bias_grad %{{.*}} operands(%{{.*}} : tensor<32x8xbf16>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>) : tensor<1x8x?x?xbf16> -> tensor<32x8xf32>
  %0 = pe.score_bias_grad %db operands(%t : tensor<32x8xbf16>) encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>) : tensor<1x8x?x?xbf16> -> tensor<32x8xf32>
  return %0 : tensor<32x8xf32>
}

// CHECK-LABEL: func.func @relative_term_grad
func.func @relative_term_grad(%de: tensor<2x8x?x?xf32>, %q: tensor<2x8x?x64xbf16>, %ak: tensor<9x64xf32>,
                              %dr: tensor<8x16x20x32xf16>, %av: tensor<8x9x32xf16>)
    -> (tensor<2x8x?x64xbf16>, tensor<9x64xf32>, tensor<8x9x32xf32>) {
  // CHECK: pe.relative_term_grad %{{.*}} query(%{{.*}} : tensor<2x8x?x64xbf16>) table(%{{.*}} : tensor<9x64xf32>) encoding(#pe.relative_key<clip = 4>) : tensor<2x8x?x?xf32> -> tensor<2x8x?x64xbf16>, tensor<9x64xf32>
  %dq, %dk = pe.relative_term_grad %de query(%q : tensor<2x8x?x64xbf16>) table(%ak : tensor<9x64xf32>) encoding(#pe.relative_key<clip = 4>) : tensor<2x8x?x?xf32> -> tensor<2x8x?x64xbf16>, tensor<9x64xf32>
  // CHECK: pe.relative_term_grad %{{.*}} table(%{{.*}} : tensor<8x9x32xf16>) encoding(#pe.relative_value<clip = 4>) : tensor<8x16x20x32xf16> -> tensor<8x9x32xf32>
  %dv = pe.relative_term_grad %dr table(%av : tensor<8x9x32xf16>) encoding(#pe.relative_value<clip = 4>) : tensor<8x16x20x32xf16> -> tensor<8x9x32xf32>
  return %dq, %dk, %dv : tensor<2x8x?x64xbf16>, tensor<9x64xf32>, tensor<8x9x32xf32>
}
