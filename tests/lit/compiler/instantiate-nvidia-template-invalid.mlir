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

// -----

// A materialized bias (pe.alibi or pe.t5_bias on its own) is x86's only.
func.func @alibi_bias() -> tensor<1x8x16x16xf32> {
  // expected-error @+1 {{the nvidia backend has no materialized bias kernel: compile it for x86 (docs/standalone-kernels.md)}}
  %b = pe.alibi <num_heads = 8, form = bloom> : tensor<1x8x16x16xf32>
  return %b : tensor<1x8x16x16xf32>
}

// -----

// A standalone kernel with ids per batch row needs a static batch, as the
// attention kernel does.
func.func @per_row_ids_class(%x: tensor<?x2x?x64xf16>, %pos: tensor<?x?xi64>) -> tensor<?x2x?x64xf16> {
  // expected-error @+1 {{position ids per batch row ([b, s]) with a `?` batch are not built yet: pass ids shared by the batch ([s]) or a static batch}}
  %r = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<?x2x?x64xf16>, tensor<?x?xi64>
  return %r : tensor<?x2x?x64xf16>
}

// -----

// Linear attention's state lives in one block's registers: d x dv at most
// 32768 (256 threads of at most 128 floats of S).
func.func @linear_state_too_big(%q: tensor<1x2x8x256xf32>, %k: tensor<1x2x8x256xf32>, %v: tensor<1x2x8x256xf32>) -> tensor<1x2x8x256xf32> {
  // expected-error @+1 {{the state d x dv = 256 x 256 needs more than 256 threads of at most 128 floats of S each: the nvidia kernel takes d x dv up to 32768 with dv <= 256 (docs/limits.md)}}
  %o = attn.linear_attention %q, %k, %v feature_map(relu) : tensor<1x2x8x256xf32>, tensor<1x2x8x256xf32>, tensor<1x2x8x256xf32> -> tensor<1x2x8x256xf32>
  return %o : tensor<1x2x8x256xf32>
}

// -----

func.func @training(%q: tensor<1x4x16x64xf16>, %k: tensor<1x4x16x64xf16>, %v: tensor<1x4x16x64xf16>) -> (tensor<1x4x16x64xf16>, tensor<1x4x16xf32>) {
  // expected-error @+1 {{the nvidia kernel does not write lse yet (a training forward): compile it for x86, or drop the lse result}}
  %o, %lse = attn.attention %q, %k, %v causal : tensor<1x4x16x64xf16>, tensor<1x4x16x64xf16>, tensor<1x4x16x64xf16> -> tensor<1x4x16x64xf16>, tensor<1x4x16xf32>
  return %o, %lse : tensor<1x4x16x64xf16>, tensor<1x4x16xf32>
}

// -----

// expected-error @+1 {{pe.embed_grad (a table's gradient) compiles for x86 only so far}}
module {
  func.func @table_grad(%dy: tensor<?x?x64xbf16>, %pos: tensor<?xi64>) -> tensor<512x64xf32> {
    %g = pe.embed_grad %dy, %pos : tensor<?x?x64xbf16>, tensor<?xi64> -> tensor<512x64xf32>
    return %g : tensor<512x64xf32>
  }
}
