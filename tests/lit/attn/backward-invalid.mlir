// Every verifier rule attn.attention_backward adds to attn.attention's, each
// with the message it gives (the forward's rules: invalid.mlir).
// RUN: pejit-opt %s --split-input-file --verify-diagnostics

func.func @output_grad_type(%q: tensor<1x4x8x64xf32>, %o: tensor<1x4x8x64xf32>, %do: tensor<1x4x9x64xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op output_grad (dO) must have the output's type 'tensor<1x4x8x64xf32>', got 'tensor<1x4x9x64xf32>'}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %o, %do : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x9x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}

// -----

func.func @output_shape(%q: tensor<1x4x8x64xf32>, %o: tensor<1x4x7x64xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op output sq (dim 2) is 7 but the query's sq is 8}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %o, %o : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x7x64xf32>, tensor<1x4x7x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}

// -----

func.func @lse_shape(%q: tensor<1x4x8x64xf32>, %lse: tensor<1x4x9xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op lse sq (dim 2) is 9 but the query's sq is 8}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q lse(%lse : tensor<1x4x9xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}

// -----

func.func @key_grad_type(%q: tensor<1x4x8x64xf32>, %k: tensor<1x2x8x64xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op key_grad must have the type of what it differentiates, 'tensor<1x2x8x64xf32>', got 'tensor<1x4x8x64xf32>'}}
  %dq, %dk, %dv = attn.attention_backward %q, %k, %k, %q, %q : tensor<1x4x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x2x8x64xf32>
  return
}

// -----

func.func @grad_count(%q: tensor<1x4x8x64xf32>, %t: tensor<32x4xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op grad_operands asks for 1 encoding operand gradient(s), but the op has 0 result(s) after dq, dk, dv}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = true>]) encoding_operands(%t : tensor<32x4xf32>) grad_operands([0]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}

// -----

func.func @grad_index(%q: tensor<1x4x8x64xf32>, %t: tensor<32x4xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op grad_operands[0] = 1 is not an encoding operand (it has 1)}}
  %dq, %dk, %dv, %dt = attn.attention_backward %q, %q, %q, %q, %q encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = true>]) encoding_operands(%t : tensor<32x4xf32>) grad_operands([1]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<32x4xf32>
  return
}

// -----

func.func @grad_shape(%q: tensor<1x4x8x64xf32>, %t: tensor<32x4xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op the gradient of encoding operand #0 must be 'tensor<32x4xf32>' (its shape, f32), got 'tensor<32x4xbf16>'}}
  %dq, %dk, %dv, %dt = attn.attention_backward %q, %q, %q, %q, %q encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = true>]) encoding_operands(%t : tensor<32x4xf32>) grad_operands([0]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<32x4xbf16>
  return
}

// -----

func.func @grad_increasing(%q: tensor<1x4x8x64xf32>, %ak: tensor<9x64xf32>, %av: tensor<9x64xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op grad_operands must be increasing, got 0 after 1}}
  %dq, %dk, %dv, %da, %db = attn.attention_backward %q, %q, %q, %q, %q encodings([#pe.relative_key<clip = 4>, #pe.relative_value<clip = 4>]) encoding_operands(%ak, %av : tensor<9x64xf32>, tensor<9x64xf32>) grad_operands([1, 0]) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<9x64xf32>, tensor<9x64xf32>
  return
}

// -----

// The forward's rules hold too: an encoding operand the encodings do not read.
func.func @stray_operand(%q: tensor<1x4x8x64xf32>, %t: tensor<32x4xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op has 1 encoding_operands but no encodings that read them}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q encoding_operands(%t : tensor<32x4xf32>) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}

// -----

func.func @negative_window(%q: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.attention_backward' op window must be non-negative, got -1}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q window(-1) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}

// -----

func.func @score_grad_partial_type(%ds: f32, %n: index, %i: i32, %p: memref<?xi32>) {
  // expected-error @+1 {{'attn.score_grad' op operand #5 must be 1D memref of 32-bit float values, but got 'memref<?xi32>'}}
  "attn.score_grad"(%ds, %n, %n, %i, %i, %p, %n) <{offsets = array<i64>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0>}> : (f32, index, index, i32, i32, memref<?xi32>, index) -> ()
  return
}

// -----

func.func @key_lengths_static_skv(%q: tensor<2x4x8x64xf32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'attn.attention_backward' op key_lengths: the key's skv (dim 2) must be ? (each row's length is its own, at most the capacity the call's K has), got 8}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q key_lengths(%lens : tensor<2xi32>) : tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32> -> tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>
  return
}

// -----

func.func @segments_batch(%q: tensor<2x4x?x64xf32>, %cu: tensor<3xi32>) {
  // expected-error @+1 {{'attn.attention_backward' op segments pack the sequences into one batch row: the query's b (dim 0) must be 1, got 2}}
  %dq, %dk, %dv = attn.attention_backward %q, %q, %q, %q, %q segments(%cu, %cu : tensor<3xi32>, tensor<3xi32>) : tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32> -> tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>
  return
}

// -----

func.func @linear_output_grad_type(%q: tensor<1x4x8x64xf32>, %o: tensor<1x4x8x64xf32>, %do: tensor<1x4x8x32xf32>) {
  // expected-error @+1 {{'attn.linear_attention_backward' op output_grad must have the output's type 'tensor<1x4x8x64xf32>', got 'tensor<1x4x8x32xf32>'}}
  %dq, %dk, %dv = attn.linear_attention_backward %q, %q, %q, %o, %do feature_map(relu) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x32xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}

// -----

func.func @linear_key_grad_type(%q: tensor<1x4x8x64xf32>, %k: tensor<1x2x8x64xf32>) {
  // expected-error @+1 {{'attn.linear_attention_backward' op the key gradient must have the key's type 'tensor<1x2x8x64xf32>', got 'tensor<1x4x8x64xf32>'}}
  %dq, %dk, %dv = attn.linear_attention_backward %q, %k, %k, %q, %q feature_map(relu) : tensor<1x4x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x2x8x64xf32>
  return
}

// -----

func.func @linear_softmax_on_numerator(%q: tensor<1x4x8x64xf32>) {
  // expected-error @+1 {{'attn.linear_attention_backward' op softmax_keys has no denominator, so rope_on_numerator does not apply: use rope_before_feature_map}}
  %dq, %dk, %dv = attn.linear_attention_backward %q, %q, %q, %q, %q feature_map(softmax_keys) encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32> -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
  return
}
