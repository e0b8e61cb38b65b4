// What attn-derive-backward refuses, each with a message naming it.
// RUN: pejit-opt %s --split-input-file --attn-derive-backward --verify-diagnostics

func.func @unfused(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>, %ids: tensor<8xi64>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{'pe.rope' is not fused into the attention: the backward needs every operand of attn.attention to be a function argument (run pe-fuse-into-attention first)}}
  %qr = pe.rope %q, %ids <layout = half, theta = 10000.0> : tensor<1x2x8x64xf32>, tensor<8xi64>
  %o = attn.attention %qr, %k, %v scale(0.125) : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

func.func @bias_operand(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>, %b: tensor<1x2x8x8xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{the backward takes fused encodings, not a bias, key_term or value_term operand (run pe-fuse-into-attention first)}}
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x2x8x8xf32>) scale(0.125) : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

func.func @self_attention(%x: tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{query, key and value are not three arguments: the backward writes a gradient for each}}
  %o = attn.attention %x, %x, %x scale(0.125) : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

func.func @linear_state(%q: tensor<1x2x8x16xf32>, %st: tensor<1x2x16x18xf32>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{a carried state(...) has no backward: train with the whole sequence in one call (docs/backward.md)}}
  %o = attn.linear_attention %q, %q, %q feature_map(relu) causal state(%st : tensor<1x2x16x18xf32>) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}
