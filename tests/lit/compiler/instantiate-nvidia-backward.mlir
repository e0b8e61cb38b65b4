// attn-instantiate-nvidia-template, backward form: one attn.attention_backward
// becomes templates/nvidia/mma_attention_backward.mlir's kernels
// (docs/backward.md, "NVIDIA"), each block writing outputs no other block
// writes:
//   rows:   D_i = dO_i . O_i, lse_i = log sum_j exp(s_ij)     ([2, b, hq, sq])
//   kv:     dV = P^T dO, dK' = dE^T Q'  (P = exp(s - lse), dE = scale softcap' P (dP - D))
//   q:      dQ' = dE K'
//   finish: dq, dk = the QK transform's adjoint of dQ', dK', rounded to T
// RUN: pejit-opt %s --split-input-file --attn-instantiate-nvidia-template | FileCheck %s

// GQA 4/2, causal, softcap, RoPE, d = 64: W = 64-row steps; o and dO keep
// the forward's f32 output type; the static grid is the rows phase's.
// CHECK: module attributes {gpu.container_module, pejit.kernel = {arguments = "query:f16:1x4x100x64 key:f16:1x2x100x64 value:f16:1x2x100x64 output:f32:1x4x100x64 output_grad:f32:1x4x100x64"
// CHECK-SAME: block = [128, 1, 1]
// CHECK-SAME: grid = [2, 4, 1]
// CHECK-SAME: kernel = "pejit_backward"
// CHECK-SAME: tile_m = 64 : i64, tile_n = 64 : i64
// CHECK-LABEL: func.func private @score_at
// CHECK: math.tanh
// CHECK-LABEL: gpu.func @pejit_backward_transform
// CHECK-LABEL: gpu.func @pejit_backward_finish
// CHECK-LABEL: gpu.func @pejit_prologue
// CHECK-LABEL: gpu.func @pejit_backward_rows
// CHECK: call @mma_nt_d
// CHECK: call @score_at
// CHECK: call @log_sum
// CHECK-LABEL: gpu.func @pejit_backward_kv
// CHECK: call @mma_nt_d
// CHECK: call @mma_nt_v
// CHECK: call @weights
// CHECK: call @mma_pv_v
// CHECK: call @mma_pv_d
// CHECK-LABEL: gpu.func @pejit_backward_q
// CHECK: call @mma_pv_d
// CHECK-NOT: attn.
// CHECK-NOT: func.func @causal_gqa_softcap_rope
func.func @causal_gqa_softcap_rope(%q: tensor<1x4x100x64xf16>, %k: tensor<1x2x100x64xf16>, %v: tensor<1x2x100x64xf16>,
                                   %o: tensor<1x4x100x64xf32>, %do: tensor<1x4x100x64xf32>)
    -> (tensor<1x4x100x64xf16>, tensor<1x2x100x64xf16>, tensor<1x2x100x64xf16>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do causal softcap(30.0)
      encodings([#pe.rope<layout = half, theta = 10000.0>])
      : tensor<1x4x100x64xf16>, tensor<1x2x100x64xf16>, tensor<1x2x100x64xf16>, tensor<1x4x100x64xf32>, tensor<1x4x100x64xf32>
      -> tensor<1x4x100x64xf16>, tensor<1x2x100x64xf16>, tensor<1x2x100x64xf16>
  return %dq, %dk, %dv : tensor<1x4x100x64xf16>, tensor<1x2x100x64xf16>, tensor<1x2x100x64xf16>
}

// -----

// A shape class at d = 128 with ALiBi: W = 16-row steps (the shared tiles
// of 64 + 16 rows, 80 x 136, fit 48 KiB), no grid (the call plans it), the lengths
// read from the i64 arguments.
// CHECK: kernel = "pejit_backward"
// CHECK-NOT: grid =
// CHECK-SAME: tile_m = 64 : i64, tile_n = 16 : i64
// CHECK-LABEL: gpu.func @pejit_backward_kv
// CHECK-SAME: workgroup({{.*}}: memref<80x136xbf16, #gpu.address_space<workgroup>>
// CHECK: arith.index_cast %{{.*}} : i64 to index
func.func @alibi_class(%q: tensor<?x8x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %v: tensor<?x8x?x128xbf16>,
                       %o: tensor<?x8x?x128xbf16>, %do: tensor<?x8x?x128xbf16>)
    -> (tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do causal
      encodings([#pe.alibi<num_heads = 8, form = causal>])
      : tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
      -> tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  return %dq, %dk, %dv : tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
}

// -----

// T5's table and the RoPE's position scale with their gradients: the q
// phase hands each score's dS to T5's adjoint, the finish phase each dQ'
// and dK' row to the RoPE's, lane by lane into the warp's partial slot
// (bar.warp.sync between lanes: one order, no atomics). An operand
// gradient makes W = 16. The signature lists the gradients' slots.
// CHECK: arguments = "operand_grads=0,1
// CHECK-SAME: tile_m = 64 : i64, tile_n = 16 : i64
// CHECK-LABEL: func.func private @score_grads
// CHECK: scf.for
// CHECK: memref.load
// CHECK: arith.addf
// CHECK: memref.store
// CHECK: nvvm.bar.warp.sync
// CHECK-LABEL: func.func private @transform_grads
// CHECK: nvvm.bar.warp.sync
// CHECK-LABEL: gpu.func @pejit_backward_finish
// CHECK: call @transform_grads
// CHECK-LABEL: gpu.func @pejit_backward_kv
// CHECK-NOT: call @score_grads
// CHECK-LABEL: gpu.func @pejit_backward_q
// CHECK: call @zero_slot
// CHECK: call @score_grads
// CHECK-NOT: attn.
func.func @t5_rope_scale_grads(%q: tensor<1x4x40x64xbf16>, %k: tensor<1x4x40x64xbf16>, %v: tensor<1x4x40x64xbf16>,
                               %o: tensor<1x4x40x64xbf16>, %do: tensor<1x4x40x64xbf16>,
                               %s: tensor<1xf32>, %t: tensor<32x4xf32>)
    -> (tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1xf32>, tensor<32x4xf32>) {
  %dq, %dk, %dv, %ds, %dt = attn.attention_backward %q, %k, %v, %o, %do causal
      encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>,
                 #pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>])
      encoding_operands(%s, %t : tensor<1xf32>, tensor<32x4xf32>) grad_operands([0, 1])
      : tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>
      -> tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1xf32>, tensor<32x4xf32>
  return %dq, %dk, %dv, %ds, %dt : tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1xf32>, tensor<32x4xf32>
}

// -----

// Shaw's key and value terms with both tables' gradients: the rows phase
// writes each row's QaK and dOaV (row_scratch: D, lse, then QaK, S, dOaV,
// T: 2 + 4 x 9 floats), every score reads them, the q phase sums S and T
// per row (a quad's 4 lanes in turn), the finish phase adds sum_m S a^K
// to dQ' and the tables' gradients to the warp's slot.
// CHECK: arguments = "operand_grads=0,1
// CHECK-SAME: row_scratch_floats = 38 : i64
// CHECK-LABEL: func.func private @fill_row_terms
// CHECK-LABEL: func.func private @term_sums
// CHECK: nvvm.bar.warp.sync
// CHECK-LABEL: func.func private @term_grads
// CHECK: nvvm.bar.warp.sync
// CHECK-LABEL: gpu.func @pejit_backward_finish
// CHECK: call @key_term_dq
// CHECK: call @term_grads
// CHECK-LABEL: gpu.func @pejit_backward_rows
// CHECK: call @fill_row_terms
// CHECK-LABEL: gpu.func @pejit_backward_q
// CHECK: call @value_dp
// CHECK: call @term_sums
// CHECK-NOT: attn.
func.func @shaw_key_value(%q: tensor<1x4x40x64xbf16>, %k: tensor<1x4x40x64xbf16>, %v: tensor<1x4x40x64xbf16>,
                          %o: tensor<1x4x40x64xbf16>, %do: tensor<1x4x40x64xbf16>,
                          %ak: tensor<9x64xbf16>, %av: tensor<9x64xbf16>)
    -> (tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<9x64xf32>, tensor<9x64xf32>) {
  %dq, %dk, %dv, %dak, %dav = attn.attention_backward %q, %k, %v, %o, %do causal
      encodings([#pe.relative_key<clip = 4>, #pe.relative_value<clip = 4>])
      encoding_operands(%ak, %av : tensor<9x64xbf16>, tensor<9x64xbf16>) grad_operands([0, 1])
      : tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>
      -> tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<9x64xf32>, tensor<9x64xf32>
  return %dq, %dk, %dv, %dak, %dav : tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<1x4x40x64xbf16>, tensor<9x64xf32>, tensor<9x64xf32>
}

// -----

// A bias tensor with its gradient: the q phase writes dS per score (each
// once, no partial), the runtime sums it over the bias's broadcast dims.
// CHECK: arguments = "score_grad=0 operand_grads=0
// CHECK-LABEL: func.func private @store_dscore
// CHECK: memref.store
// CHECK-LABEL: gpu.func @pejit_backward_q
// CHECK: call @store_dscore
func.func @bias_gradient(%q: tensor<1x4x8x64xbf16>, %k: tensor<1x4x8x64xbf16>, %v: tensor<1x4x8x64xbf16>,
                         %o: tensor<1x4x8x64xbf16>, %do: tensor<1x4x8x64xbf16>, %bias: tensor<1x4x8x8xf32>)
    -> (tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x8xf32>) {
  %dq, %dk, %dv, %db = attn.attention_backward %q, %k, %v, %o, %do encodings([#pe.bias_tensor])
      encoding_operands(%bias : tensor<1x4x8x8xf32>) grad_operands([0])
      : tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>
      -> tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x8xf32>
  return %dq, %dk, %dv, %db : tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x64xbf16>, tensor<1x4x8x8xf32>
}
