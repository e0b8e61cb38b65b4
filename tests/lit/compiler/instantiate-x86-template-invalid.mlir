// What attn-instantiate-x86-template refuses, each with a message naming it.
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template --verify-diagnostics

func.func @unfused_op(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>, %t: tensor<32x2xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{'pe.t5_bias' cannot be compiled into the kernel: only a fused attn.attention can (no fused kernel hook for it yet)}}
  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128> : tensor<32x2xf32> -> tensor<1x2x8x8xf32>
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x2x8x8xf32>) : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

func.func @bias_tensor(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>, %b: tensor<1x2x8x8xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{the kernel reads a bias tensor as an encoding operand: run pe-fuse-into-attention first (it makes it #pe.bias_tensor)}}
  %o = attn.attention %q, %k, %v bias(%b : tensor<1x2x8x8xf32>) : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

// A shape class takes `?` for the batch and the lengths, not for heads.
func.func @dynamic_heads(%q: tensor<1x?x8x64xf32>, %k: tensor<1x?x8x64xf32>, %v: tensor<1x?x8x64xf32>) -> tensor<1x?x8x64xf32> {
  // expected-error @+1 {{query 'tensor<1x?x8x64xf32>' has a dynamic dim 1: the x86 kernel takes `?` only for the batch (dim 0) and the lengths (dim 2)}}
  %o = attn.attention %q, %k, %v : tensor<1x?x8x64xf32>, tensor<1x?x8x64xf32>, tensor<1x?x8x64xf32> -> tensor<1x?x8x64xf32>
  return %o : tensor<1x?x8x64xf32>
}

// -----

// Ids per batch row with a `?` batch: not built yet.
func.func @per_batch_ids_dynamic_batch(%q: tensor<?x2x?x64xf32>, %k: tensor<?x2x?x64xf32>, %v: tensor<?x2x?x64xf32>, %p: tensor<?x?xi64>) -> tensor<?x2x?x64xf32> {
  // expected-error @+1 {{position ids per batch row ([b, s]) with a `?` batch are not built yet: pass ids shared by the batch ([s]) or a static batch}}
  %o = attn.attention %q, %k, %v query_positions(%p : tensor<?x?xi64>) key_positions(%p : tensor<?x?xi64>) encodings([#pe.rope<layout = half, theta = 10000.0>]) : tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32> -> tensor<?x2x?x64xf32>
  return %o : tensor<?x2x?x64xf32>
}

// -----

func.func @double_precision(%q: tensor<1x2x8x64xf64>, %k: tensor<1x2x8x64xf64>, %v: tensor<1x2x8x64xf64>) -> tensor<1x2x8x64xf64> {
  // expected-error @+1 {{query element type 'f64' is not supported by the x86 kernel (f32, f16 or bf16)}}
  %o = attn.attention %q, %k, %v : tensor<1x2x8x64xf64>, tensor<1x2x8x64xf64>, tensor<1x2x8x64xf64> -> tensor<1x2x8x64xf64>
  return %o : tensor<1x2x8x64xf64>
}

// -----

func.func @head_dim(%q: tensor<1x2x8x36xf32>, %k: tensor<1x2x8x36xf32>, %v: tensor<1x2x8x36xf32>) -> tensor<1x2x8x36xf32> {
  // expected-error @+1 {{the x86 kernel needs d % 8 == 0 and dv % 16 == 0, got d = 36, dv = 36}}
  %o = attn.attention %q, %k, %v : tensor<1x2x8x36xf32>, tensor<1x2x8x36xf32>, tensor<1x2x8x36xf32> -> tensor<1x2x8x36xf32>
  return %o : tensor<1x2x8x36xf32>
}

// -----

// Found by the fuzz lane: a function that drops the attention's result
// compiled into a kernel writing an output nobody asked for.
// expected-error @+1 {{the function must return the attn.attention's result (and its lse, if it has one; nothing else): that is the kernel's output}}
func.func @result_not_returned(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>) {
  %o = attn.attention %q, %k, %v : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return
}

// -----

func.func @shaw_value_accumulator(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>, %aV: tensor<2001x64xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{the value term's accumulator (2001 buckets x 144 query rows) exceeds the item's stack bound of 65536 floats (docs/limits.md): use a smaller clip or query tile}}
  %o = attn.attention %q, %k, %v encodings([#pe.relative_value<clip = 1000>]) encoding_operands(%aV : tensor<2001x64xf32>) : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

func.func @one_tensor_as_query_and_key(%x: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>) -> tensor<1x2x8x64xf32> {
  // expected-error @+1 {{the kernel takes query, key and value as three arguments, but this attention reads one tensor as more than one of them: pass it as separate arguments (the same buffer may be given for each)}}
  %o = attn.attention %x, %x, %v : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
  return %o : tensor<1x2x8x64xf32>
}

// -----

// A bias of fixed lengths cannot serve `?` lengths: it would be read past
// its end at longer ones.
func.func @bias_for_dynamic_lengths(%q: tensor<1x2x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>, %b: tensor<1x2x8x8xf32>) -> tensor<1x2x?x64xf32> {
  // expected-error @+1 {{the bias must be [1|b, 1|hq, sq, skv] = [1|1, 1|2, ?, ?], got 'tensor<1x2x8x8xf32>'}}
  %o = attn.attention %q, %k, %v encodings([#pe.bias_tensor]) encoding_operands(%b : tensor<1x2x8x8xf32>) : tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x2x?x64xf32>
  return %o : tensor<1x2x?x64xf32>
}

// -----

func.func @paged_key_only(%q: tensor<?x2x1x64xf32>, %kp: tensor<?x16x2x64xf32>, %t: tensor<?x?xi32>, %v: tensor<?x2x?x64xf32>) -> tensor<?x2x1x64xf32> {
  %k = attn.paged_kv %kp, %t : tensor<?x16x2x64xf32>, tensor<?x?xi32> -> tensor<?x2x?x64xf32>
  // expected-error @+1 {{the key is paged (attn.paged_kv) but the value is not: the kernel reads both from pages or neither}}
  %o = attn.attention %q, %k, %v : tensor<?x2x1x64xf32>, tensor<?x2x?x64xf32>, tensor<?x2x?x64xf32> -> tensor<?x2x1x64xf32>
  return %o : tensor<?x2x1x64xf32>
}

// -----

// Standalone kernels: pe.rope, pe.sinusoidal, pe.learned (and pe.embed)
// chain in one pass; a materialized term (a score bias, Shaw's terms) is a
// function of its own.
func.func @chained_relative_key(%x: tensor<1x2x8x16xf32>, %p: tensor<8xi64>, %t: tensor<9x16xf32>)
    -> tensor<1x2x8x8xf32> {
  %r = pe.rope %x, %p <layout = half, theta = 10000.0> : tensor<1x2x8x16xf32>, tensor<8xi64>
  // expected-error @+1 {{'pe.relative_key' does not chain with other pe ops in one kernel: only pe.rope, pe.sinusoidal and pe.learned do; a score bias or Shaw term compiles as a function of its own (docs/standalone-kernels.md)}}
  %b = pe.relative_key %r, %t <clip = 4> : tensor<1x2x8x16xf32>, tensor<9x16xf32> -> tensor<1x2x8x8xf32>
  return %b : tensor<1x2x8x8xf32>
}

// -----

// Several pe ops compile to one pass when each reads the one before it,
// all at the same ids.
func.func @standalone_chain_branches(%x: tensor<1x8x64xf32>, %pos: tensor<8xi32>) -> tensor<1x8x64xf32> {
  %a = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<1x8x64xf32>, tensor<8xi32>
  // expected-error @+1 {{each pe op of a standalone kernel must read the result of the one before it: they run in one pass over the rows}}
  %b = pe.sinusoidal %x, %pos <base = 500.0> : tensor<1x8x64xf32>, tensor<8xi32>
  return %b : tensor<1x8x64xf32>
}

// -----

func.func @standalone_chain_two_ids(%x: tensor<1x8x64xf32>, %pos: tensor<8xi32>, %other: tensor<8xi32>) -> tensor<1x8x64xf32> {
  %a = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<1x8x64xf32>, tensor<8xi32>
  // expected-error @+1 {{the pe ops of one standalone kernel must read the same position ids (one argument)}}
  %b = pe.sinusoidal %a, %other <base = 500.0> : tensor<1x8x64xf32>, tensor<8xi32>
  return %b : tensor<1x8x64xf32>
}

// -----

func.func @standalone_embed_second(%x: tensor<1x8x64xf32>, %pos: tensor<8xi32>, %tok: tensor<1x8xi32>, %words: tensor<50x64xf32>) -> tensor<1x8x64xf32> {
  %a = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<1x8x64xf32>, tensor<8xi32>
  // expected-error @+1 {{a standalone kernel has one pe.embed, first: the pe ops add to its result}}
  %t = pe.embed %tok, %words : tensor<1x8xi32>, tensor<50x64xf32> -> tensor<1x8x64xf32>
  return %t : tensor<1x8x64xf32>
}

// -----

func.func @standalone_chain_two_tables(%x: tensor<1x8x64xf32>, %pos: tensor<8xi32>, %t1: tensor<16x64xf32>, %t2: tensor<16x64xf32>) -> tensor<1x8x64xf32> {
  %a = pe.learned %x, %pos, %t1 <max_positions = 16> : tensor<1x8x64xf32>, tensor<8xi32>, tensor<16x64xf32>
  // expected-error @+1 {{a standalone kernel reads at most one table of its pe ops, found 2}}
  %b = pe.learned %a, %pos, %t2 <max_positions = 16> : tensor<1x8x64xf32>, tensor<8xi32>, tensor<16x64xf32>
  return %b : tensor<1x8x64xf32>
}

// -----

func.func @standalone_dynamic_heads(%x: tensor<1x?x8x64xf32>, %pos: tensor<8xi32>) -> tensor<1x?x8x64xf32> {
  // expected-error @+1 {{input 'tensor<1x?x8x64xf32>' has a dynamic dim 1: the kernel takes `?` only for the batch (dim 0) and the length (dim 2)}}
  %r = pe.rope %x, %pos <layout = half, theta = 10000.0> : tensor<1x?x8x64xf32>, tensor<8xi32>
  return %r : tensor<1x?x8x64xf32>
}

// -----

// An embedding's model dim is static: the kernel's row width.
func.func @standalone_sinusoidal_dynamic_width(%x: tensor<1x8x?xf32>, %pos: tensor<8xi32>) -> tensor<1x8x?xf32> {
  // expected-error @+1 {{input 'tensor<1x8x?xf32>' has a dynamic dim 2: the kernel takes `?` only for the batch (dim 0) and the length (dim 1)}}
  %e = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<1x8x?xf32>, tensor<8xi32>
  return %e : tensor<1x8x?xf32>
}

// -----

// Linear attention's x86 kernel keeps its d x dv state on the item's stack.
func.func @linear_state_too_big(%q: tensor<1x1x8x512xf32>, %v: tensor<1x1x8x256xf32>) -> tensor<1x1x8x256xf32> {
  // expected-error @+1 {{the state d x dv = 131072 floats exceeds the item's stack bound of 65536 (docs/limits.md)}}
  %o = attn.linear_attention %q, %q, %v feature_map(relu) : tensor<1x1x8x512xf32>, tensor<1x1x8x512xf32>, tensor<1x1x8x256xf32> -> tensor<1x1x8x256xf32>
  return %o : tensor<1x1x8x256xf32>
}

// -----

// Only a fused RoPE: a pe.rope on Q before the op is not fused into it yet.
func.func @linear_unfused_rope(%q: tensor<1x2x8x16xf32>, %p: tensor<8xi64>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{'pe.rope' cannot be compiled with attn.linear_attention: fuse a RoPE into it with encodings(...) and rope_placement(...)}}
  %r = pe.rope %q, %p <layout = half, theta = 10000.0> : tensor<1x2x8x16xf32>, tensor<8xi64>
  %o = attn.linear_attention %r, %q, %q feature_map(relu) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  return %o : tensor<1x2x8x16xf32>
}
