// What the nvidia backward does not take yet, each with a message naming it
// (docs/status.md lists what each target takes).
// RUN: pejit-opt %s --split-input-file --attn-instantiate-nvidia-template --verify-diagnostics

func.func @f32_inputs(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>, %o: tensor<1x4x8x64xf32>, %do: tensor<1x4x8x64xf32>) -> (tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{query element type 'f32' is not supported by the nvidia backward (f16 or bf16 inputs, f32 accumulation)}}
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return %dq, %dk, %dv : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
}

// -----

func.func @head_dim_256(%q: tensor<1x4x8x256xf16>, %k: tensor<1x4x8x256xf16>, %v: tensor<1x4x8x256xf16>, %o: tensor<1x4x8x256xf16>, %do: tensor<1x4x8x256xf16>) -> (tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>) {
  // expected-error @+1 {{the nvidia backward needs d and dv multiples of 16 up to 128, got d = 256, dv = 256}}
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do : tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16> -> tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>
  return %dq, %dk, %dv : tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>, tensor<1x4x8x256xf16>
}

// -----

func.func @key_lengths(%q: tensor<2x4x8x64xf16>, %k: tensor<2x4x?x64xf16>, %v: tensor<2x4x?x64xf16>, %o: tensor<2x4x8x64xf16>, %do: tensor<2x4x8x64xf16>, %lens: tensor<2xi32>) -> (tensor<2x4x8x64xf16>, tensor<2x4x?x64xf16>, tensor<2x4x?x64xf16>) {
  // expected-error @+1 {{the nvidia backward does not take segments or key_lengths yet}}
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do key_lengths(%lens : tensor<2xi32>) : tensor<2x4x8x64xf16>, tensor<2x4x?x64xf16>, tensor<2x4x?x64xf16>, tensor<2x4x8x64xf16>, tensor<2x4x8x64xf16> -> tensor<2x4x8x64xf16>, tensor<2x4x?x64xf16>, tensor<2x4x?x64xf16>
  return %dq, %dk, %dv : tensor<2x4x8x64xf16>, tensor<2x4x?x64xf16>, tensor<2x4x?x64xf16>
}
