// What attn-instantiate-nvidia-template refuses, each with a message naming it.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-nvidia-template --verify-diagnostics

func.func @f32_inputs(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{query element type 'f32' is not supported by the nvidia kernel (f16 or bf16 inputs, f32 accumulation)}}
  %o = attn.attention %q, %k, %v : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

func.func @head_dim(%q: tensor<1x2x8x72xf16>, %k: tensor<1x2x8x72xf16>, %v: tensor<1x2x8x72xf16>) -> tensor<1x2x8x72xf32> {
  // expected-error @+1 {{the nvidia kernel needs d and dv multiples of 16 up to 256, got d = 72, dv = 72}}
  %o = attn.attention %q, %k, %v : tensor<1x2x8x72xf16>, tensor<1x2x8x72xf16>, tensor<1x2x8x72xf16> -> tensor<1x2x8x72xf32>
  return %o : tensor<1x2x8x72xf32>
}



// -----

func.func @shaw_value_too_big(%q: tensor<1x2x8x64xf16>, %k: tensor<1x2x8x64xf16>, %v: tensor<1x2x8x64xf16>, %aV: tensor<801x64xf16>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{nvidia tile config (16, 16) needs 55872 bytes of shared memory for d = 64 (51264 of them the encodings' per-tile tables), more than the 49152 a block has statically}}
  %o = attn.attention %q, %k, %v encodings([#pe.relative_value<clip = 400>]) encoding_operands(%aV : tensor<801x64xf16>) : tensor<1x2x8x64xf16>, tensor<1x2x8x64xf16>, tensor<1x2x8x64xf16> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

// A shape class leaves the batch to the call, and ids per batch row
// ([b, s]) take their row count from it, which the hooks need fixed.
func.func @ids_per_row_dynamic_batch(%q: tensor<?x2x?x64xf16>, %k: tensor<?x2x?x64xf16>, %v: tensor<?x2x?x64xf16>, %pos: tensor<?x?xi32>) -> tensor<?x2x?x64xf32> {
  // expected-error @+1 {{position ids per batch row ([b, s]) with a `?` batch are not built yet: pass ids shared by the batch ([s]) or a static batch}}
  %o = attn.attention %q, %k, %v query_positions(%pos : tensor<?x?xi32>) key_positions(%pos : tensor<?x?xi32>) causal encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16>, tensor<?x2x?x64xf16> -> tensor<?x2x?x64xf32>
  return %o : tensor<?x2x?x64xf32>
}
