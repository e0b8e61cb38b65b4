// attn.attention's bounds (pejit/dialects/Limits.h): zero and oversized dims,
// element counts, and scale/softcap that the kernels hold as f32 constants.
// Reproducers of the hardening campaign (issue 13).
// RUN: pejit-opt %s --split-input-file --verify-diagnostics

func.func @zero_queries(%q: tensor<1x4x0x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query sq (dim 2) is 0: every dimension must be at least 1}}
  %o = attn.attention %q, %k, %v : tensor<1x4x0x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x0x64xf32>
  return
}

// -----

func.func @zero_batch(%q: tensor<0x4x8x64xf32>, %k: tensor<0x4x8x64xf32>, %v: tensor<0x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query b (dim 0) is 0: every dimension must be at least 1}}
  %o = attn.attention %q, %k, %v : tensor<0x4x8x64xf32>, tensor<0x4x8x64xf32>, tensor<0x4x8x64xf32> -> tensor<0x4x8x64xf32>
  return
}

// -----

func.func @zero_heads(%q: tensor<1x0x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query hq (dim 1) is 0: every dimension must be at least 1}}
  %o = attn.attention %q, %k, %v : tensor<1x0x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x0x8x64xf32>
  return
}

// -----

func.func @zero_keys(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x0x64xf32>, %v: tensor<1x4x0x64xf32>) {
  // expected-error @+1 {{'attn.attention' op key skv (dim 2) is 0: every dimension must be at least 1}}
  %o = attn.attention %q, %k, %v : tensor<1x4x8x64xf32>, tensor<1x4x0x64xf32>, tensor<1x4x0x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

// d = 0 failed inside the template ("offset 3 is out-of-bounds").
func.func @zero_head_dim(%q: tensor<1x4x8x0xf32>, %k: tensor<1x4x8x0xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query d (dim 3) is 0: every dimension must be at least 1}}
  %o = attn.attention %q, %k, %v scale(1.0) : tensor<1x4x8x0xf32>, tensor<1x4x8x0xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

// d = 2^20 reached SelectionDAG and aborted.
func.func @head_dim_2_20(%q: tensor<1x1x8x1048576xf32>, %k: tensor<1x1x8x1048576xf32>, %v: tensor<1x1x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query d (dim 3) is 1048576, beyond pejit's limit of 1024}}
  %o = attn.attention %q, %k, %v : tensor<1x1x8x1048576xf32>, tensor<1x1x8x1048576xf32>, tensor<1x1x8x64xf32> -> tensor<1x1x8x64xf32>
  return
}

// -----

func.func @value_dim_limit(%q: tensor<1x1x8x64xf32>, %k: tensor<1x1x8x64xf32>, %v: tensor<1x1x8x2048xf32>) {
  // expected-error @+1 {{'attn.attention' op value dv (dim 3) is 2048, beyond pejit's limit of 1024}}
  %o = attn.attention %q, %k, %v : tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x2048xf32> -> tensor<1x1x8x2048xf32>
  return
}

// -----

func.func @heads_limit(%q: tensor<1x2048x8x64xf32>, %k: tensor<1x1x8x64xf32>, %v: tensor<1x1x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query hq (dim 1) is 2048, beyond pejit's limit of 1024}}
  %o = attn.attention %q, %k, %v : tensor<1x2048x8x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32> -> tensor<1x2048x8x64xf32>
  return
}

// -----

func.func @sequence_limit(%q: tensor<1x1x4294967296x64xf32>, %k: tensor<1x1x8x64xf32>, %v: tensor<1x1x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query sq (dim 2) is 4294967296, beyond pejit's limit of 2147483647}}
  %o = attn.attention %q, %k, %v : tensor<1x1x4294967296x64xf32>, tensor<1x1x8x64xf32>, tensor<1x1x8x64xf32> -> tensor<1x1x4294967296x64xf32>
  return
}

// -----

// Each dim is within its limit, the product (2^41) is not.
func.func @element_limit(%q: tensor<2048x1024x1024x1024xf32>, %k: tensor<2048x1x8x1024xf32>, %v: tensor<2048x1x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op query 'tensor<2048x1024x1024x1024xf32>' has more than 2^40 elements, beyond pejit's limit for one tensor}}
  %o = attn.attention %q, %k, %v : tensor<2048x1024x1024x1024xf32>, tensor<2048x1x8x1024xf32>, tensor<2048x1x8x64xf32> -> tensor<2048x1024x1024x64xf32>
  return
}

// -----

func.func @bias_element_limit(%q: tensor<1x1x2097152x64xf32>, %k: tensor<1x1x2097152x64xf32>, %v: tensor<1x1x2097152x64xf32>, %b: tensor<1x1x2097152x2097152xf32>) {
  // expected-error @+1 {{'attn.attention' op bias 'tensor<1x1x2097152x2097152xf32>' has more than 2^40 elements}}
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x1x2097152x2097152xf32>) : tensor<1x1x2097152x64xf32>, tensor<1x1x2097152x64xf32>, tensor<1x1x2097152x64xf32> -> tensor<1x1x2097152x64xf32>
  return
}

// -----

func.func @scale_above_f32(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op scale must be positive and an f32, got 1.0e+39 (above f32's largest value 3.4028235e38)}}
  %o = attn.attention %q, %k, %v scale(1.0e39) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @scale_infinite(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op scale must be positive and an f32, got 0x7FF0000000000000 (not finite)}}
  %o = attn.attention %q, %k, %v scale(0x7FF0000000000000) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

func.func @softcap_above_f32(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op softcap must be positive and an f32, got 1.0e+300 (above f32's largest value 3.4028235e38)}}
  %o = attn.attention %q, %k, %v softcap(1.0e300) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}

// -----

// softcap * tanh(s / softcap) with softcap 0 in f32 divides by zero.
func.func @softcap_below_f32(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention' op softcap must be positive and an f32, got 1.0e-40 (below f32's smallest normal value 1.1754944e-38)}}
  %o = attn.attention %q, %k, %v softcap(1.0e-40) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>
  return
}
