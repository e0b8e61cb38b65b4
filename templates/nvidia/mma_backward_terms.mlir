// Bucketed terms of the NVIDIA attention backward (Shaw's a^K and a^V,
// docs/backward.md), put in place of mma_attention_backward.mlir's
// `// @pejit-blocks` line with the other blocks. The x86 backward's plan
// (attention_backward_terms.mlir) on the GPU's layout:
//
//   rows    per row i: QaK[i, m] = q'_i . a^K[m], dOaV[i, m] = dO_i . a^V[m]
//   every score:  dot += QaK[i, mk(i, j)] (before the scale);
//                 dP  += dOaV[i, mv(i, j)]
//   q       per row and bucket: S[i, m] += dE_ij (keys with mk = m),
//           T[i, m] += P_ij (mv = m); the 4 lanes of a row's quad add in
//           turn (bar.warp.sync), so each sum has one order
//   finish  dQ'_i += sum_m S[i, m] a^K[m] (before the transform's adjoint);
//           d a^K[m] += S[i, m] q'_i and d a^V[m] += T[i, m] dO_i into the
//           warp's partial slot, lane by lane
//
// One row's floats in the terms buffer ([B, HQ, SQ, TW], f32): QaK [NK],
// S [NK], dOaV [NV], T [NV]; TW = 2 NK + 2 NV. NK (NV) is 0 without a key
// (value) term; the buckets are the encodings' hooks
// (attn.value_term_bucket, attn.value_term_row, attn.term_row_grad).

// The first float of row i of head h, batch b in the terms buffer.
func.func private @term_row(%b: index, %h: index, %i: index, %SQ: index) -> index {
  %HQ = arith.constant ${HQ} : index
  %TW = arith.constant ${TW} : index
  %c1 = arith.constant 1 : index
  %last = arith.subi %SQ, %c1 : index
  %row = arith.minui %i, %last : index
  %r0 = arith.muli %b, %HQ : index
  %r1 = arith.addi %r0, %h : index
  %r2 = arith.muli %r1, %SQ : index
  %r3 = arith.addi %r2, %row : index
  %at = arith.muli %r3, %TW : index
  return %at : index
}

func.func private @terms_view(%terms_arg: !PF, %B: index, %SQ: index) -> memref<?xf32> {
  %HQ = arith.constant ${HQ} : index
  %TW = arith.constant ${TW} : index
  %n0 = arith.muli %B, %HQ : index
  %n1 = arith.muli %n0, %SQ : index
  %n = arith.muli %n1, %TW : index
  %terms = memref.reinterpret_cast %terms_arg to offset: [0], sizes: [%n], strides: [1]
      : !PF to memref<?xf32>
  return %terms : memref<?xf32>
}

// The buckets of (i, j): the key term's and the value term's (0 without
// one); rows and keys past the lengths are clamped (their scores are
// masked; the hooks may read position ids).
func.func private @term_buckets(%b: index, %h: index, %i: index, %j: index, %qpos_arg: !PI,
                                %kpos_arg: !PI, %SQ: index,
                                %SKV: index${ENCODING_ARGS}) -> (index, index) {
${POSITION_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %sq1 = arith.subi %SQ, %c1 : index
  %skv1 = arith.subi %SKV, %c1 : index
  %ic = arith.minui %i, %sq1 : index
  %jc = arith.minui %j, %skv1 : index
  %i32 = arith.index_cast %ic : index to i32
  %j32 = arith.index_cast %jc : index to i32
  %mk = scf.if %has_key -> index {
    %m = attn.value_term_bucket key batch %b, head %h, query %i32, key %j32${ENCODING_OPERANDS}
        positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV) : i32
    %mi = arith.index_cast %m : i32 to index
    scf.yield %mi : index
  } else {
    scf.yield %c0 : index
  }
  %mv = scf.if %has_value -> index {
    %m = attn.value_term_bucket batch %b, head %h, query %i32, key %j32${ENCODING_OPERANDS}
        positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV) : i32
    %mi = arith.index_cast %m : i32 to index
    scf.yield %mi : index
  } else {
    scf.yield %c0 : index
  }
  return %mk, %mv : index, index
}

// The key term of (i, j): QaK[i, mk(i, j)] (0 without a key term).
func.func private @key_term_at(%b: index, %h: index, %i: index, %j: index, %qpos_arg: !PI,
                               %kpos_arg: !PI, %terms_arg: !PF, %B: index, %SQ: index,
                               %SKV: index${ENCODING_ARGS}) -> f32 {
  %zero = arith.constant 0.0 : f32
  %has_key = arith.constant ${HAS_KEY_TERM}
  %x = scf.if %has_key -> f32 {
    %m:2 = func.call @term_buckets(%b, %h, %i, %j, %qpos_arg, %kpos_arg, %SQ,
                                   %SKV${ENCODING_CALL_ARGS})
        : (index, index, index, index, !PI, !PI, index, index${ENCODING_CALL_TYPES})
        -> (index, index)
    %terms = func.call @terms_view(%terms_arg, %B, %SQ) : (!PF, index, index) -> memref<?xf32>
    %row = func.call @term_row(%b, %h, %i, %SQ) : (index, index, index, index) -> index
    %at = arith.addi %row, %m#0 : index
    %qak = memref.load %terms[%at] : memref<?xf32>
    scf.yield %qak : f32
  } else {
    scf.yield %zero : f32
  }
  return %x : f32
}

// dP_ij with the value term: dO_i . v_j + dOaV[i, mv(i, j)].
func.func private @value_dp(%dp: f32, %b: index, %h: index, %i: index, %j: index,
                            %qpos_arg: !PI, %kpos_arg: !PI, %terms_arg: !PF, %B: index,
                            %SQ: index, %SKV: index${ENCODING_ARGS}) -> f32 {
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %NK2 = arith.constant ${NK2} : index
  %x = scf.if %has_value -> f32 {
    %m:2 = func.call @term_buckets(%b, %h, %i, %j, %qpos_arg, %kpos_arg, %SQ,
                                   %SKV${ENCODING_CALL_ARGS})
        : (index, index, index, index, !PI, !PI, index, index${ENCODING_CALL_TYPES})
        -> (index, index)
    %terms = func.call @terms_view(%terms_arg, %B, %SQ) : (!PF, index, index) -> memref<?xf32>
    %row = func.call @term_row(%b, %h, %i, %SQ) : (index, index, index, index) -> index
    %at0 = arith.addi %row, %NK2 : index
    %at = arith.addi %at0, %m#1 : index
    %doav = memref.load %terms[%at] : memref<?xf32>
    %sum = arith.addf %dp, %doav : f32
    scf.yield %sum : f32
  } else {
    scf.yield %dp : f32
  }
  return %x : f32
}

// Row i's QaK and dOaV (2 channels a step, the tables' rows by the hooks),
// and its S and T set to 0: one thread per row.
func.func private @fill_row_terms(%b: index, %h: index, %i: index, %tq_arg: !PT, %do_arg: !POT,
                                  %terms_arg: !PF, %B: index, %SQ: index${ENCODING_ARGS}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  %zero2 = arith.constant dense<0.0> : vector<2xf32>
  %HQ = arith.constant ${HQ} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %NK = arith.constant ${NK} : index
  %NV = arith.constant ${NV} : index
  %NK2 = arith.constant ${NK2} : index
  %TW = arith.constant ${TW} : index
  %terms = func.call @terms_view(%terms_arg, %B, %SQ) : (!PF, index, index) -> memref<?xf32>
  %row = func.call @term_row(%b, %h, %i, %SQ) : (index, index, index, index) -> index
  %r0 = arith.muli %b, %HQ : index
  %r1 = arith.addi %r0, %h : index
  %r2 = arith.muli %r1, %SQ : index
  %r3 = arith.addi %r2, %i : index
  %q_first = arith.muli %r3, %D : index
  %o_first = arith.muli %r3, %DV : index
  %q_span = arith.addi %q_first, %D : index
  %o_span = arith.addi %o_first, %DV : index
  %q = memref.reinterpret_cast %tq_arg to offset: [0], sizes: [%q_span], strides: [1]
      : !PT to memref<?x${T}>
  %do = memref.reinterpret_cast %do_arg to offset: [0], sizes: [%o_span], strides: [1]
      : !POT to memref<?x${OT}>
  scf.for %m = %c0 to %NK step %c1 {
    %acc = scf.for %c = %c0 to %D step %c2 iter_args(%a = %zero2) -> (vector<2xf32>) {
      %at = arith.addi %q_first, %c : index
      %x = vector.load %q[%at] : memref<?x${T}>, vector<2x${T}>
      %xf = arith.extf %x : vector<2x${T}> to vector<2xf32>
      %y = attn.value_term_row key batch %b, head %h, bucket %m, channel %c${ENCODING_OPERANDS}
          : vector<2xf32>
      %a1 = math.fma %xf, %y, %a : vector<2xf32>
      scf.yield %a1 : vector<2xf32>
    }
    %s = vector.reduction <add>, %acc : vector<2xf32> into f32
    %at = arith.addi %row, %m : index
    memref.store %s, %terms[%at] : memref<?xf32>
    %at_s = arith.addi %at, %NK : index
    memref.store %zero, %terms[%at_s] : memref<?xf32>
  }
  scf.for %m = %c0 to %NV step %c1 {
    %acc2 = scf.for %c = %c0 to %DV step %c2 iter_args(%a = %zero2) -> (vector<2xf32>) {
      %at = arith.addi %o_first, %c : index
      %at1 = arith.addi %at, %c1 : index
      %x0 = memref.load %do[%at] : memref<?x${OT}>
      %x1 = memref.load %do[%at1] : memref<?x${OT}>
      %f0 = func.call @o_to_f32(%x0) : (${OT}) -> f32
      %f1 = func.call @o_to_f32(%x1) : (${OT}) -> f32
      %xf = vector.from_elements %f0, %f1 : vector<2xf32>
      %y = attn.value_term_row batch %b, head %h, bucket %m, channel %c${ENCODING_OPERANDS}
          : vector<2xf32>
      %a1 = math.fma %xf, %y, %a : vector<2xf32>
      scf.yield %a1 : vector<2xf32>
    }
    %acc = vector.reduction <add>, %acc2 : vector<2xf32> into f32
    %at0 = arith.addi %row, %NK2 : index
    %at = arith.addi %at0, %m : index
    memref.store %acc, %terms[%at] : memref<?xf32>
    %at_t = arith.addi %at, %NV : index
    memref.store %zero, %terms[%at_t] : memref<?xf32>
  }
  return
}

// S[i, mk] += dE_ij and T[i, mv] += P_ij, the 4 lanes of row i's quad in
// turn. Scores past the lengths add nothing.
func.func private @term_sums(%de: f32, %p: f32, %b: index, %h: index, %i: index, %j: index,
                             %lane4: index, %qpos_arg: !PI, %kpos_arg: !PI, %terms_arg: !PF,
                             %B: index, %SQ: index, %SKV: index${ENCODING_ARGS}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %all = arith.constant -1 : i32
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %NK = arith.constant ${NK} : index
  %NK2 = arith.constant ${NK2} : index
  %NV = arith.constant ${NV} : index
  %m:2 = func.call @term_buckets(%b, %h, %i, %j, %qpos_arg, %kpos_arg, %SQ,
                                 %SKV${ENCODING_CALL_ARGS})
      : (index, index, index, index, !PI, !PI, index, index${ENCODING_CALL_TYPES})
      -> (index, index)
  %terms = func.call @terms_view(%terms_arg, %B, %SQ) : (!PF, index, index) -> memref<?xf32>
  %row = func.call @term_row(%b, %h, %i, %SQ) : (index, index, index, index) -> index
  %row_in = arith.cmpi ult, %i, %SQ : index
  %key_in = arith.cmpi ult, %j, %SKV : index
  %in = arith.andi %row_in, %key_in : i1
  scf.for %t = %c0 to %c4 step %c1 {
    %mine = arith.cmpi eq, %lane4, %t : index
    %go = arith.andi %mine, %in : i1
    scf.if %go {
      scf.if %has_key {
        %at0 = arith.addi %row, %NK : index
        %at = arith.addi %at0, %m#0 : index
        %s = memref.load %terms[%at] : memref<?xf32>
        %s1 = arith.addf %s, %de : f32
        memref.store %s1, %terms[%at] : memref<?xf32>
      }
      scf.if %has_value {
        %at0 = arith.addi %row, %NK2 : index
        %at1 = arith.addi %at0, %NV : index
        %at = arith.addi %at1, %m#1 : index
        %s = memref.load %terms[%at] : memref<?xf32>
        %s1 = arith.addf %s, %p : f32
        memref.store %s1, %terms[%at] : memref<?xf32>
      }
    }
    nvvm.bar.warp.sync %all : i32
  }
  return
}

// dQ'_i += sum_m S[i, m] a^K[m]: row r of FT (this thread's).
func.func private @key_term_dq(%FTs: !FT, %r: index, %b: index, %h: index, %i: index,
                               %terms_arg: !PF, %B: index, %SQ: index${ENCODING_ARGS}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %D = arith.constant ${D} : index
  %NK = arith.constant ${NK} : index
  %terms = func.call @terms_view(%terms_arg, %B, %SQ) : (!PF, index, index) -> memref<?xf32>
  %row = func.call @term_row(%b, %h, %i, %SQ) : (index, index, index, index) -> index
  %srow = arith.addi %row, %NK : index
  scf.for %c = %c0 to %D step %c2 {
    %x = vector.load %FTs[%r, %c] : !FT, vector<2xf32>
    %acc = scf.for %m = %c0 to %NK step %c1 iter_args(%a = %x) -> (vector<2xf32>) {
      %at = arith.addi %srow, %m : index
      %s = memref.load %terms[%at] : memref<?xf32>
      %sv = vector.broadcast %s : f32 to vector<2xf32>
      %y = attn.value_term_row key batch %b, head %h, bucket %m, channel %c${ENCODING_OPERANDS}
          : vector<2xf32>
      %a1 = math.fma %sv, %y, %a : vector<2xf32>
      scf.yield %a1 : vector<2xf32>
    }
    vector.store %acc, %FTs[%r, %c] : !FT, vector<2xf32>
  }
  return
}

// The terms' table gradients of this thread's row (threads past the
// block's rows add nothing), lane by lane into the warp's slot:
//   d a^K[m] += S[i, m] q'_i (q' in f32, tqf),  d a^V[m] += T[i, m] dO_i.
func.func private @term_grads(%tid: index, %valid: index, %i0: index, %b: index, %h: index,
                              %lane: index, %tqf_arg: !PF, %do_arg: !POT, %terms_arg: !PF,
                              %B: index, %SQ: index, %part_arg: !PF, %floats: index,
                              %pbase: index${ENCODING_ARGS}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c63 = arith.constant 63 : index
  %all = arith.constant -1 : i32
  %HQ = arith.constant ${HQ} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %NK = arith.constant ${NK} : index
  %NK2 = arith.constant ${NK2} : index
  %NV = arith.constant ${NV} : index
  %part = memref.reinterpret_cast %part_arg to offset: [0], sizes: [%floats], strides: [1]
      : !PF to memref<?xf32>
  %terms = func.call @terms_view(%terms_arg, %B, %SQ) : (!PF, index, index) -> memref<?xf32>
  %has_row = arith.cmpi ult, %tid, %valid : index
  %r = arith.minui %tid, %c63 : index
  %i = arith.addi %i0, %r : index
  %row = func.call @term_row(%b, %h, %i, %SQ) : (index, index, index, index) -> index
  %r0 = arith.muli %b, %HQ : index
  %r1 = arith.addi %r0, %h : index
  %r2 = arith.muli %r1, %SQ : index
  %r3 = arith.addi %r2, %i : index
  %q_first = arith.muli %r3, %D : index
  %o_first = arith.muli %r3, %DV : index
  %q_span = arith.addi %q_first, %D : index
  %o_span = arith.addi %o_first, %DV : index
  %q = memref.reinterpret_cast %tqf_arg to offset: [0], sizes: [%q_span], strides: [1]
      : !PF to memref<?xf32>
  %do = memref.reinterpret_cast %do_arg to offset: [0], sizes: [%o_span], strides: [1]
      : !POT to memref<?x${OT}>
  scf.for %l = %c0 to %c32 step %c1 {
    %mine = arith.cmpi eq, %lane, %l : index
    %go = arith.andi %mine, %has_row : i1
    scf.if %go {
      scf.for %m = %c0 to %NK step %c1 {
        %at0 = arith.addi %row, %NK : index
        %at = arith.addi %at0, %m : index
        %s = memref.load %terms[%at] : memref<?xf32>
        %sv = vector.broadcast %s : f32 to vector<2xf32>
        scf.for %c = %c0 to %D step %c2 {
          %qa = arith.addi %q_first, %c : index
          %x = vector.load %q[%qa] : memref<?xf32>, vector<2xf32>
          %g = arith.mulf %sv, %x : vector<2xf32>
          attn.term_row_grad key %g, batch %b, head %h, bucket %m, channel %c${ENCODING_OPERANDS}
              partial(%part : memref<?xf32>, %pbase) offsets ${GRAD_OFFSETS} : vector<2xf32>
        }
      }
      scf.for %m = %c0 to %NV step %c1 {
        %at0 = arith.addi %row, %NK2 : index
        %at1 = arith.addi %at0, %NV : index
        %at = arith.addi %at1, %m : index
        %t = memref.load %terms[%at] : memref<?xf32>
        scf.for %c = %c0 to %DV step %c2 {
          %oa = arith.addi %o_first, %c : index
          %oa1 = arith.addi %oa, %c1 : index
          %x0 = memref.load %do[%oa] : memref<?x${OT}>
          %x1 = memref.load %do[%oa1] : memref<?x${OT}>
          %f0 = func.call @o_to_f32(%x0) : (${OT}) -> f32
          %f1 = func.call @o_to_f32(%x1) : (${OT}) -> f32
          %g0 = arith.mulf %t, %f0 : f32
          %g1 = arith.mulf %t, %f1 : f32
          %g = vector.from_elements %g0, %g1 : vector<2xf32>
          attn.term_row_grad %g, batch %b, head %h, bucket %m, channel %c${ENCODING_OPERANDS}
              partial(%part : memref<?xf32>, %pbase) offsets ${GRAD_OFFSETS} : vector<2xf32>
        }
      }
    }
    nvvm.bar.warp.sync %all : i32
  }
  return
}
