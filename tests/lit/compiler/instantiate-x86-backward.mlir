// attn-instantiate-x86-template, backward form: one attn.attention_backward
// becomes templates/x86/attention_backward.mlir's three phases
// (docs/backward.md), each item writing outputs no other item writes:
//   rows: D_i = dO_i . O_i, lse_i = log sum_j exp(s_ij)  (scratch [D | lse])
//   kv:   dv_j = sum_i P_ij dO_i, dk_j = sum_i dE_ij q_i  (P = exp(s - lse))
//   q:    dq_i = sum_j dE_ij k_j    (dE = scale softcap' P (dO_i . v_j - D_i))
// RUN: pejit-opt %s --split-input-file --attn-instantiate-x86-template | FileCheck %s

// GQA 4/2, causal, softcap: the signature names o and dO; the scratch is
// D and lse, b hq sq floats each (2 x 4 x 40); 3 rows items per head.
// CHECK: module attributes {pejit.kernel = {arguments = "query:f32:1x4x40x16 key:f32:1x2x40x16 value:f32:1x2x40x8 output:f32:1x4x40x8 output_grad:f32:1x4x40x8"
// CHECK-SAME: items = 12 : i64
// CHECK-SAME: scratch_floats = 320 : i64
// CHECK-SAME: tile_m = 16 : i64, tile_n = 16 : i64
// CHECK-LABEL: func.func private @score
// CHECK: math.tanh %{{.*}} : vector<8xf32>
// CHECK-LABEL: func.func private @exp2_vec
// CHECK-LABEL: func.func @pejit_backward_rows
// CHECK: math.log %{{.*}} : vector<8xf32>
// CHECK-LABEL: func.func @pejit_backward_kv
// CHECK: func.call @exp_lanes
// CHECK: func.call @accumulate(
// CHECK: func.call @accumulate(
// CHECK-LABEL: func.func @pejit_backward_q
// CHECK: func.call @accumulate(
// CHECK-NOT: attn.attention_backward
func.func @causal_gqa_softcap(%q: tensor<1x4x40x16xf32>, %k: tensor<1x2x40x16xf32>, %v: tensor<1x2x40x8xf32>,
                              %o: tensor<1x4x40x8xf32>, %do: tensor<1x4x40x8xf32>)
    -> (tensor<1x4x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x8xf32>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do causal softcap(30.0)
      : tensor<1x4x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x8xf32>, tensor<1x4x40x8xf32>, tensor<1x4x40x8xf32>
      -> tensor<1x4x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x8xf32>
  return %dq, %dk, %dv : tensor<1x4x40x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x8xf32>
}

// -----

// A shape class: the call plans items and scratch (0 here). The batch is
// the call's in every kernel (`?`): a packed batch's sequence or a
// key-lengths row runs as a call of one row.
// CHECK: module attributes {pejit.kernel = {arguments = "query:f32:1x2x?x16 key:f32:1x2x?x16 value:f32:1x2x?x16 output:f32:1x2x?x16 output_grad:f32:1x2x?x16"
// CHECK-SAME: items = 0 : i64
// CHECK-SAME: scratch_floats = 0 : i64
// CHECK-LABEL: func.func @pejit_backward_rows
// CHECK-SAME: memref<?x2x?x16xf32
func.func @shape_class(%q: tensor<1x2x?x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
                       %o: tensor<1x2x?x16xf32>, %do: tensor<1x2x?x16xf32>)
    -> (tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do window(8)
      : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
      -> tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
  return %dq, %dk, %dv : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>
}

// -----

// A fused score bias (T5, its table an encoding operand): the score hook
// is expanded in @score, L lanes at a time (the per-score bucket, the
// table read by a gather), after the softcap; dS passes through the
// additive bias unchanged.
// CHECK: module attributes {pejit.kernel = {arguments = "query:f32:1x4x16x16 key:f32:1x4x16x16 value:f32:1x4x16x16 encoding_operand=t5_table:f32:32x4 output:f32:1x4x16x16 output_grad:f32:1x4x16x16"
// CHECK-LABEL: func.func private @score
// CHECK-SAME: memref<32x4xf32>
// CHECK-NOT: attn.score_mod
// CHECK: vector.gather %{{.*}} : memref<32x4xf32>
// CHECK-LABEL: func.func @pejit_backward_rows
func.func @t5(%q: tensor<1x4x16x16xf32>, %k: tensor<1x4x16x16xf32>, %v: tensor<1x4x16x16xf32>, %t: tensor<32x4xf32>,
              %o: tensor<1x4x16x16xf32>, %do: tensor<1x4x16x16xf32>)
    -> (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do softcap(2.0)
      encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = true>])
      encoding_operands(%t : tensor<32x4xf32>)
      : tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>
      -> tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>
  return %dq, %dk, %dv : tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>
}

// -----

// Fused RoPE (half layout, d = 16: 8 cos and 8 sin per position) with
// position ids: the ids trail the signature; @pejit_backward_prologue fills
// the tables and @pejit_backward_transform writes Q' = R q and K' = R k,
// which the phases read; each phase's dQ' / dK' rows go through the
// adjoint as written: dx_a = g_a cos + g_b sin, dx_b = g_b cos - g_a sin
// (the rotation's tables with sin negated).
// CHECK: module attributes {pejit.kernel = {arguments = "query:f32:1x2x24x16 key:f32:1x2x24x16 value:f32:1x2x24x16 output:f32:1x2x24x16 output_grad:f32:1x2x24x16 query_positions:i64:24 key_positions:i64:24"
// CHECK-SAME: table_floats_per_key_position = 16 : i64, table_floats_per_query_position = 16 : i64
// CHECK-LABEL: func.func @pejit_backward_prologue
// CHECK-NOT: attn.qk_prologue
// CHECK-LABEL: func.func @pejit_backward_transform
// CHECK-NOT: attn.qk_transform
// CHECK: vector.fma
// CHECK-LABEL: func.func @pejit_backward_kv
// CHECK: func.call @accumulate(
// CHECK: vector.load %{{.*}} : memref<?xf32>, vector<8xf32>
// CHECK-NEXT: %[[SIN:.*]] = vector.load %{{.*}} : memref<?xf32>, vector<8xf32>
// CHECK-NEXT: arith.negf %[[SIN]] : vector<8xf32>
// CHECK-LABEL: func.func @pejit_backward_q
// CHECK: func.call @accumulate(
// CHECK: arith.negf %{{.*}} : vector<8xf32>
// CHECK-NOT: attn.qk_transform
func.func @rope(%q: tensor<1x2x24x16xf32>, %k: tensor<1x2x24x16xf32>, %v: tensor<1x2x24x16xf32>,
                %o: tensor<1x2x24x16xf32>, %do: tensor<1x2x24x16xf32>, %qp: tensor<24xi64>, %kp: tensor<24xi64>)
    -> (tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do query_positions(%qp : tensor<24xi64>)
      key_positions(%kp : tensor<24xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0>])
      : tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>
      -> tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>
  return %dq, %dk, %dv : tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>
}

// -----

// RoPE's runtime position scale with its gradient (grad_operands([0])):
// each kv and q item zeroes a partial buffer of its own and adds one
// contribution per written tile (attn.qk_transform_grad), in f64 over the
// tile's rows and pairs:
//   ds += pos * inv_freq[c] * (g_b x'_a - g_a x'_b)
// read from the ids (sitofp) and the dK' / dQ' rows before their adjoint.
// CHECK: module attributes {pejit.kernel = {arguments = "operand_grads=0 query:f32:1x2x24x16 key:f32:1x2x24x16 value:f32:1x2x24x16 encoding_operand=rope_position_scale:f32:1 output:f32:1x2x24x16 output_grad:f32:1x2x24x16 query_positions:i64:24 key_positions:i64:24"
// CHECK-SAME: scratch_floats = 104 : i64
// CHECK-LABEL: func.func @pejit_backward_kv
// CHECK: func.call @accumulate(
// CHECK: arith.sitofp %{{.*}} : i64 to f64
// CHECK: arith.extf %{{.*}} : f32 to f64
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK: arith.negf
// CHECK-LABEL: func.func @pejit_backward_q
// CHECK: arith.sitofp %{{.*}} : i64 to f64
// CHECK-NOT: attn.qk_transform_grad
func.func @rope_scale(%q: tensor<1x2x24x16xf32>, %k: tensor<1x2x24x16xf32>, %v: tensor<1x2x24x16xf32>, %s: tensor<1xf32>,
                      %o: tensor<1x2x24x16xf32>, %do: tensor<1x2x24x16xf32>, %qp: tensor<24xi64>, %kp: tensor<24xi64>)
    -> (tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1xf32>) {
  %dq, %dk, %dv, %ds = attn.attention_backward %q, %k, %v, %o, %do query_positions(%qp : tensor<24xi64>)
      key_positions(%kp : tensor<24xi64>) causal encodings([#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>])
      encoding_operands(%s : tensor<1xf32>) grad_operands([0])
      : tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>
      -> tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1xf32>
  return %dq, %dk, %dv, %ds : tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1xf32>
}

// -----

// ALiBi with learned slopes and their gradient (grad_operands([0])): the
// score hook reads slope_h from the operand (one load, one FMA); its
// adjoint adds dS * distance to slope_h's entry of the kv item's partial
// buffer:  d slope_h += dS_ij ((j) - (i + skv - sq)).
// CHECK: module attributes {pejit.kernel = {arguments = "operand_grads=0 query:f32:1x4x16x16 key:f32:1x4x16x16 value:f32:1x4x16x16 encoding_operand=alibi_slopes:f32:4 output:f32:1x4x16x16 output_grad:f32:1x4x16x16"
// CHECK-LABEL: func.func private @score
// CHECK: memref.load %{{.*}} : memref<4xf32>
// CHECK: math.fma
// CHECK-LABEL: func.func @pejit_backward_kv
// CHECK: arith.sitofp %{{.*}} : i32 to f32
// CHECK: %[[CONTRIBUTION:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[OLD:.*]] = memref.load %{{.*}} : memref<?xf32>
// CHECK: arith.addf %[[OLD]], %[[CONTRIBUTION]] : f32
// CHECK-NOT: attn.score_grad
func.func @alibi_slopes(%q: tensor<1x4x16x16xf32>, %k: tensor<1x4x16x16xf32>, %v: tensor<1x4x16x16xf32>, %s: tensor<4xf32>,
                        %o: tensor<1x4x16x16xf32>, %do: tensor<1x4x16x16xf32>)
    -> (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<4xf32>) {
  %dq, %dk, %dv, %ds = attn.attention_backward %q, %k, %v, %o, %do causal
      encodings([#pe.alibi<num_heads = 4, form = causal, learned_slopes = true>])
      encoding_operands(%s : tensor<4xf32>) grad_operands([0])
      : tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>
      -> tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<4xf32>
  return %dq, %dk, %dv, %ds : tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<4xf32>
}

// -----

// bf16 tensors: @pejit_backward_widen turns 8 bf16 lanes into f32 (a
// shift into the high half), the phases run in f32, and
// @pejit_backward_narrow rounds dq, dk, dv to nearest even.
// CHECK: module attributes {pejit.kernel = {arguments = "query:bf16:1x2x16x16 key:bf16:1x2x16x16 value:bf16:1x2x16x16 output:bf16:1x2x16x16 output_grad:bf16:1x2x16x16"
// CHECK-SAME: dtype = "bf16"
// CHECK-LABEL: func.func private @narrow8
// CHECK: arith.shrui
// CHECK-LABEL: func.func @pejit_backward_widen
// CHECK: vector.load %{{.*}} : memref<?x?x?x?xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<8xbf16>
// CHECK: vector.store %{{.*}} : memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, vector<8xf32>
// CHECK-LABEL: func.func @pejit_backward_narrow
// CHECK: func.call @narrow8
// CHECK: vector.store %{{.*}} : memref<?x?x?x?xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<8xbf16>
func.func @bf16(%q: tensor<1x2x16x16xbf16>, %k: tensor<1x2x16x16xbf16>, %v: tensor<1x2x16x16xbf16>,
                %o: tensor<1x2x16x16xbf16>, %do: tensor<1x2x16x16xbf16>)
    -> (tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do causal
      : tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>
      -> tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>
  return %dq, %dk, %dv : tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>, tensor<1x2x16x16xbf16>
}

// -----

// Shaw's key and value terms (shared a^K, per-head a^V), both tables'
// gradients (docs/backward.md): the rows phase keeps, per row, QaK[i, m] =
// q_i . a^K[m] and dOaV[i, m] = dO_i . a^V[m] after [D | lse] (2 + 9 + 9
// floats a row, 4 x 8 rows); every score gathers its entries by bucket;
// the q phase sums dE and P per bucket and adds S_i[m] q_i and T_i[m] dO_i
// to the tables' partials, 8 channels at a time. Scratch: 640 + 8 items x
// (576 + 2304) partial floats.
// CHECK-LABEL: module attributes {pejit.kernel = {arguments = "operand_grads=0,1
// CHECK-SAME: row_scratch_floats = 20 : i64, scratch_floats = 23680 : i64
// CHECK-LABEL: func.func private @row_terms
// CHECK: vector.gather %{{.*}} : memref<?xf32>, vector<8xi32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHECK-LABEL: func.func private @terms8
// CHECK: call @row_terms
// CHECK: call @row_terms
// CHECK-LABEL: func.func private @fill_row_terms
// CHECK: vector.load %{{.*}} : memref<9x64xf32>, vector<8xf32>
// CHECK: vector.load %{{.*}} : memref<4x9x64xf32>, vector<8xf32>
// CHECK-LABEL: func.func private @bucket_add
// CHECK: vector.scatter
// CHECK-LABEL: func.func private @term_row_grads
// CHECK: vector.load %{{.*}} : memref<?xf32>, vector<8xf32>
// CHECK-NEXT: arith.addf
// CHECK-NEXT: vector.store %{{.*}} : memref<?xf32>, vector<8xf32>
// CHECK-LABEL: func.func @pejit_backward_rows
// CHECK: call @fill_row_terms
// CHECK: call @terms8
// CHECK-LABEL: func.func @pejit_backward_kv
// CHECK: call @terms8
// CHECK-LABEL: func.func @pejit_backward_q
// CHECK: call @terms8
// CHECK: call @bucket_add
// CHECK: call @bucket_add
// CHECK: call @term_row_grads
func.func @shaw_key_value(%q: tensor<1x4x8x64xf32>, %k: tensor<1x4x8x64xf32>, %v: tensor<1x4x8x64xf32>, %o: tensor<1x4x8x64xf32>, %do: tensor<1x4x8x64xf32>, %ak: tensor<9x64xf32>, %av: tensor<4x9x64xf32>) -> (tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<9x64xf32>, tensor<4x9x64xf32>) {
  %dq, %dk, %dv, %dak, %dav = attn.attention_backward %q, %k, %v, %o, %do causal
      encodings([#pe.relative_key<clip = 4>, #pe.relative_value<clip = 4>])
      encoding_operands(%ak, %av : tensor<9x64xf32>, tensor<4x9x64xf32>) grad_operands([0, 1])
      : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>
      -> tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<9x64xf32>, tensor<4x9x64xf32>
  return %dq, %dk, %dv, %dak, %dav : tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<1x4x8x64xf32>, tensor<9x64xf32>, tensor<4x9x64xf32>
}

// -----

// A backward reading the training forward's lse (role `lse`): the rows
// phase copies it into scratch (its recomputing loop runs no rows: folded
// away later).
// CHECK-LABEL: module attributes {pejit.kernel = {arguments = "query:f32:1x2x16x16 key:f32:1x2x16x16 value:f32:1x2x16x16 output:f32:1x2x16x16 output_grad:f32:1x2x16x16 lse:f32:1x2x16"
// CHECK-LABEL: func.func @pejit_backward_rows
// CHECK-SAME: %arg5: memref<?x2x?x1xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: memref.load %arg5[
// CHECK-LABEL: func.func @pejit_backward_kv
func.func @given_lse(%q: tensor<1x2x16x16xf32>, %k: tensor<1x2x16x16xf32>, %v: tensor<1x2x16x16xf32>,
                     %o: tensor<1x2x16x16xf32>, %do: tensor<1x2x16x16xf32>, %lse: tensor<1x2x16xf32>)
    -> (tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) {
  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do lse(%lse : tensor<1x2x16xf32>) causal
      : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>
      -> tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>
  return %dq, %dk, %dv : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>
}

// -----

// A bias tensor's gradient (score_grad=0 in the signature): the kv phase
// writes dS of each row's 8 keys into %dscore with a masked store (lanes
// past the tile write nothing); the runtime sums it over the bias's
// broadcast dims. No partial buffer for it: scratch is [D | lse] only.
// CHECK-LABEL: module attributes {pejit.kernel = {arguments = "score_grad=0 operand_grads=0
// CHECK-SAME: scratch_floats = 64 : i64
// CHECK-LABEL: func.func @pejit_backward_kv
// CHECK-SAME: %arg6: memref<?x2x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: vector.maskedstore %arg6[
func.func @bias_gradient(%q: tensor<1x2x16x16xf32>, %k: tensor<1x2x16x16xf32>, %v: tensor<1x2x16x16xf32>,
                         %o: tensor<1x2x16x16xf32>, %do: tensor<1x2x16x16xf32>, %bias: tensor<1x1x16x16xf32>)
    -> (tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x1x16x16xf32>) {
  %dq, %dk, %dv, %db = attn.attention_backward %q, %k, %v, %o, %do causal
      encodings([#pe.bias_tensor]) encoding_operands(%bias : tensor<1x1x16x16xf32>) grad_operands([0])
      : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>
      -> tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x1x16x16xf32>
  return %dq, %dk, %dv, %db : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x1x16x16xf32>
}
