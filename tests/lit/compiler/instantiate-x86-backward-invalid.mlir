// What the x86 backward does not take yet, each with a message naming it
// (docs/status.md lists what it takes).
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template --verify-diagnostics

func.func @bias_gradient_key_lengths(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x?x64xf32>, %v: tensor<1x4x?x64xf32>, %o: tensor<1x4x8x64xf32>, %do: tensor<1x4x8x64xf32>, %bias: tensor<1x4x8x?xf32>, %lens: tensor<1xi32>) -> (tensor<1x4x8x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x8x?xf32>) {
  // expected-error @+1 {{the gradient of bias with segments or key_lengths is not built yet}}
  %dq, %dk, %dv, %db = attn.attention_backward %q, %k, %v, %o, %do key_lengths(%lens : tensor<1xi32>) encodings([#pe.bias_tensor]) encoding_operands(%bias : tensor<1x4x8x?xf32>) grad_operands([0]) : tensor<1x4x8x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x8x?xf32>
  return %dq, %dk, %dv, %db : tensor<1x4x8x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x?x64xf32>, tensor<1x4x8x?xf32>
}

// -----

func.func @mixed_element_types(%q: tensor<1x4x8x64xbf16>, %k: tensor<1x4x8x64xbf16>, %v: tensor<1x4x8x64xbf16>, %o: tensor<1x4x8x64xf16>, %do: tensor<1x4x8x64xf16>) -> (tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>) {
  // expected-error @+1 {{the x86 backward takes o and dO of one element type, q's ('bf16') or f32, got 'f16' and 'f16'}}
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do : tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xf16>, tensor<1x4x8x64xf16> -> tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>
  return %dq, %dk, %dv : tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>
}

// -----

// expected-error @+1 {{the function must return dq, dk and dv of the attn.attention_backward, in that order: they are the kernel's outputs}}
func.func @partial_return(%q: tensor<1x4x8x64xf32>) -> tensor<1x4x8x64xf32> {
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return %dq : tensor<1x4x8x64xf32>
}

// -----

func.func @one_argument_twice(%q: tensor<1x4x8x64xf32>, %o: tensor<1x4x8x64xf32>, %do: tensor<1x4x8x64xf32>) -> (tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'key' and 'query' are one argument: the backward writes a gradient for each, so each needs an argument of its own}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %o, %do : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return %dq, %dk, %dv : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
}
