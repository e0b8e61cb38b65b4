// Blocks of the NVIDIA attention backward (templates/nvidia/
// mma_attention_backward.mlir), put in place of its `// @pejit-blocks`
// line with mma_math.mlir's before parameter substitution: the types and
// parameters are the ones that file defines.
//
// Every phase keeps two shared tiles of T rows, SD (width D) and SV (width
// DV), each [64 + W] rows: rows [0, 64) are the block's own (its 64 keys,
// or 64 query rows, one warp per 16), rows [64, 64 + W) the other side's
// current step (W query rows, or W keys). So every product is one of two
// forms, for this warp's 16 own rows and the step's W rows:
//   @mma_nt_*  C[16, W] += Own[16, 0:C] . Step[W, 0:C]^T    (scores, dP)
//   @mma_pv_*  C[16, C] += P[16, W] . Step[W, 0:C]          (dV, dK', dQ')
// with P the C fragments of an @mma_nt_* result (rounded to T, as the
// forward rounds P for P . V).
//   @stage_d, @stage_v, @stage_o  rows of a tensor into SD or SV (T, or
//                                 the output type OT for dO), 0 past the end
//   @score_at                     one score: scale, softcap, the fused score
//                                 biases (attn.score_mod) and the mask

// C[16, W] += SD[a_row + 0:16, 0:D] . SD[64 + 0:W, 0:D]^T
func.func private @mma_nt_d(%acc: !SACC, %s: !SD, %a_row: index, %lane: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %za = arith.constant dense<0.0> : !A
  %zb = arith.constant dense<0.0> : !BF
  %nK = arith.constant ${D16} : index
  %nN = arith.constant ${W8} : index
  %quad_row = arith.divui %lane, %c4 : index
  %lane4 = arith.remui %lane, %c4 : index
  %quad_col = arith.muli %lane4, %c2 : index
  %r_lo = arith.addi %a_row, %quad_row : index
  %r_hi = arith.addi %r_lo, %c8 : index
  scf.for %ks = %c0 to %nK step %c1 {
    %kc = arith.muli %ks, %c16 : index
    %col = arith.addi %kc, %quad_col : index
    %col8 = arith.addi %col, %c8 : index
    %a0 = vector.load %s[%r_lo, %col] : !SD, vector<2x${T}>
    %a1 = vector.load %s[%r_hi, %col] : !SD, vector<2x${T}>
    %a2 = vector.load %s[%r_lo, %col8] : !SD, vector<2x${T}>
    %a3 = vector.load %s[%r_hi, %col8] : !SD, vector<2x${T}>
    %fa0 = vector.insert %a0, %za [0] : vector<2x${T}> into !A
    %fa1 = vector.insert %a1, %fa0 [1] : vector<2x${T}> into !A
    %fa2 = vector.insert %a2, %fa1 [2] : vector<2x${T}> into !A
    %fa = vector.insert %a3, %fa2 [3] : vector<2x${T}> into !A
    scf.for %n = %c0 to %nN step %c1 {
      %n8 = arith.muli %n, %c8 : index
      %r0 = arith.addi %c64, %n8 : index
      %row = arith.addi %r0, %quad_row : index
      %b0 = vector.load %s[%row, %col] : !SD, vector<2x${T}>
      %b1 = vector.load %s[%row, %col8] : !SD, vector<2x${T}>
      %fb0 = vector.insert %b0, %zb [0] : vector<2x${T}> into !BF
      %fb = vector.insert %b1, %fb0 [1] : vector<2x${T}> into !BF
      func.call @mma_acc_s(%acc, %n, %fa, %fb) : (!SACC, index, !A, !BF) -> ()
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

// C[16, W] += SV[a_row + 0:16, 0:DV] . SV[64 + 0:W, 0:DV]^T
func.func private @mma_nt_v(%acc: !SACC, %s: !SV, %a_row: index, %lane: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %za = arith.constant dense<0.0> : !A
  %zb = arith.constant dense<0.0> : !BF
  %nK = arith.constant ${DV16} : index
  %nN = arith.constant ${W8} : index
  %quad_row = arith.divui %lane, %c4 : index
  %lane4 = arith.remui %lane, %c4 : index
  %quad_col = arith.muli %lane4, %c2 : index
  %r_lo = arith.addi %a_row, %quad_row : index
  %r_hi = arith.addi %r_lo, %c8 : index
  scf.for %ks = %c0 to %nK step %c1 {
    %kc = arith.muli %ks, %c16 : index
    %col = arith.addi %kc, %quad_col : index
    %col8 = arith.addi %col, %c8 : index
    %a0 = vector.load %s[%r_lo, %col] : !SV, vector<2x${T}>
    %a1 = vector.load %s[%r_hi, %col] : !SV, vector<2x${T}>
    %a2 = vector.load %s[%r_lo, %col8] : !SV, vector<2x${T}>
    %a3 = vector.load %s[%r_hi, %col8] : !SV, vector<2x${T}>
    %fa0 = vector.insert %a0, %za [0] : vector<2x${T}> into !A
    %fa1 = vector.insert %a1, %fa0 [1] : vector<2x${T}> into !A
    %fa2 = vector.insert %a2, %fa1 [2] : vector<2x${T}> into !A
    %fa = vector.insert %a3, %fa2 [3] : vector<2x${T}> into !A
    scf.for %n = %c0 to %nN step %c1 {
      %n8 = arith.muli %n, %c8 : index
      %r0 = arith.addi %c64, %n8 : index
      %row = arith.addi %r0, %quad_row : index
      %b0 = vector.load %s[%row, %col] : !SV, vector<2x${T}>
      %b1 = vector.load %s[%row, %col8] : !SV, vector<2x${T}>
      %fb0 = vector.insert %b0, %zb [0] : vector<2x${T}> into !BF
      %fb = vector.insert %b1, %fb0 [1] : vector<2x${T}> into !BF
      func.call @mma_acc_s(%acc, %n, %fa, %fb) : (!SACC, index, !A, !BF) -> ()
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

// acc[n] = A B + acc[n]: one m16n8k16 step on n-tile n of a score tile.
func.func private @mma_acc_s(%acc: !SACC, %n: index, %fa: !A, %fb: !BF) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %s0 = memref.load %acc[%n, %c0] : !SACC
  %s1 = memref.load %acc[%n, %c1] : !SACC
  %s2 = memref.load %acc[%n, %c2] : !SACC
  %s3 = memref.load %acc[%n, %c3] : !SACC
  %c = vector.from_elements %s0, %s1, %s2, %s3 : !C
  %d = func.call @${MMA}(%fa, %fb, %c) : (!A, !BF, !C) -> !C
  %d0 = vector.extract %d[0, 0] : f32 from !C
  %d1 = vector.extract %d[0, 1] : f32 from !C
  %d2 = vector.extract %d[1, 0] : f32 from !C
  %d3 = vector.extract %d[1, 1] : f32 from !C
  memref.store %d0, %acc[%n, %c0] : !SACC
  memref.store %d1, %acc[%n, %c1] : !SACC
  memref.store %d2, %acc[%n, %c2] : !SACC
  memref.store %d3, %acc[%n, %c3] : !SACC
  return
}

// The A fragment of columns [16 kk, 16 kk + 16) of a score tile's C
// fragments (n-tiles 2 kk and 2 kk + 1: same lanes, same rows), in T.
func.func private @p_fragment(%p: !SACC, %kk: index) -> !A {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %n_a = arith.muli %kk, %c2 : index
  %n_b = arith.addi %n_a, %c1 : index
  %p00 = memref.load %p[%n_a, %c0] : !SACC
  %p01 = memref.load %p[%n_a, %c1] : !SACC
  %p02 = memref.load %p[%n_a, %c2] : !SACC
  %p03 = memref.load %p[%n_a, %c3] : !SACC
  %p10 = memref.load %p[%n_b, %c0] : !SACC
  %p11 = memref.load %p[%n_b, %c1] : !SACC
  %p12 = memref.load %p[%n_b, %c2] : !SACC
  %p13 = memref.load %p[%n_b, %c3] : !SACC
  %pv = vector.from_elements %p00, %p01, %p02, %p03, %p10, %p11, %p12, %p13 : vector<4x2xf32>
  %pa = arith.truncf %pv : vector<4x2xf32> to !A
  return %pa : !A
}

// C[16, D] += P[16, W] . SD[64 + 0:W, 0:D]: B fragments gather two step
// rows per register (k = step row, n = channel).
func.func private @mma_pv_d(%acc: !DACC, %p: !SACC, %s: !SD, %lane: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %nK = arith.constant ${W16} : index
  %nN = arith.constant ${D8} : index
  %quad_row = arith.divui %lane, %c4 : index
  %lane4 = arith.remui %lane, %c4 : index
  %quad_col = arith.muli %lane4, %c2 : index
  scf.for %kk = %c0 to %nK step %c1 {
    %pa = func.call @p_fragment(%p, %kk) : (!SACC, index) -> !A
    %k0 = arith.muli %kk, %c16 : index
    %k1 = arith.addi %k0, %c64 : index
    %key0 = arith.addi %k1, %quad_col : index
    %key1 = arith.addi %key0, %c1 : index
    %key8 = arith.addi %key0, %c8 : index
    %key9 = arith.addi %key0, %c9 : index
    scf.for %n = %c0 to %nN step %c1 {
      %n8 = arith.muli %n, %c8 : index
      %vc = arith.addi %n8, %quad_row : index
      %v0 = memref.load %s[%key0, %vc] : !SD
      %v1 = memref.load %s[%key1, %vc] : !SD
      %v8 = memref.load %s[%key8, %vc] : !SD
      %v9 = memref.load %s[%key9, %vc] : !SD
      %fb = vector.from_elements %v0, %v1, %v8, %v9 : !BF
      %o0 = memref.load %acc[%n, %c0] : !DACC
      %o1 = memref.load %acc[%n, %c1] : !DACC
      %o2 = memref.load %acc[%n, %c2] : !DACC
      %o3 = memref.load %acc[%n, %c3] : !DACC
      %c = vector.from_elements %o0, %o1, %o2, %o3 : !C
      %d = func.call @${MMA}(%pa, %fb, %c) : (!A, !BF, !C) -> !C
      %d0 = vector.extract %d[0, 0] : f32 from !C
      %d1 = vector.extract %d[0, 1] : f32 from !C
      %d2 = vector.extract %d[1, 0] : f32 from !C
      %d3 = vector.extract %d[1, 1] : f32 from !C
      memref.store %d0, %acc[%n, %c0] : !DACC
      memref.store %d1, %acc[%n, %c1] : !DACC
      memref.store %d2, %acc[%n, %c2] : !DACC
      memref.store %d3, %acc[%n, %c3] : !DACC
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

// C[16, DV] += P[16, W] . SV[64 + 0:W, 0:DV]
func.func private @mma_pv_v(%acc: !VACC, %p: !SACC, %s: !SV, %lane: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %nK = arith.constant ${W16} : index
  %nN = arith.constant ${DV8} : index
  %quad_row = arith.divui %lane, %c4 : index
  %lane4 = arith.remui %lane, %c4 : index
  %quad_col = arith.muli %lane4, %c2 : index
  scf.for %kk = %c0 to %nK step %c1 {
    %pa = func.call @p_fragment(%p, %kk) : (!SACC, index) -> !A
    %k0 = arith.muli %kk, %c16 : index
    %k1 = arith.addi %k0, %c64 : index
    %key0 = arith.addi %k1, %quad_col : index
    %key1 = arith.addi %key0, %c1 : index
    %key8 = arith.addi %key0, %c8 : index
    %key9 = arith.addi %key0, %c9 : index
    scf.for %n = %c0 to %nN step %c1 {
      %n8 = arith.muli %n, %c8 : index
      %vc = arith.addi %n8, %quad_row : index
      %v0 = memref.load %s[%key0, %vc] : !SV
      %v1 = memref.load %s[%key1, %vc] : !SV
      %v8 = memref.load %s[%key8, %vc] : !SV
      %v9 = memref.load %s[%key9, %vc] : !SV
      %fb = vector.from_elements %v0, %v1, %v8, %v9 : !BF
      %o0 = memref.load %acc[%n, %c0] : !VACC
      %o1 = memref.load %acc[%n, %c1] : !VACC
      %o2 = memref.load %acc[%n, %c2] : !VACC
      %o3 = memref.load %acc[%n, %c3] : !VACC
      %c = vector.from_elements %o0, %o1, %o2, %o3 : !C
      %d = func.call @${MMA}(%pa, %fb, %c) : (!A, !BF, !C) -> !C
      %d0 = vector.extract %d[0, 0] : f32 from !C
      %d1 = vector.extract %d[0, 1] : f32 from !C
      %d2 = vector.extract %d[1, 0] : f32 from !C
      %d3 = vector.extract %d[1, 1] : f32 from !C
      memref.store %d0, %acc[%n, %c0] : !VACC
      memref.store %d1, %acc[%n, %c1] : !VACC
      memref.store %d2, %acc[%n, %c2] : !VACC
      memref.store %d3, %acc[%n, %c3] : !VACC
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

// SD[row0 + r, c] = src[first + r D + c] for r < valid, 0 for valid <= r <
// rows: the block's threads split the pairs (c, c + 1).
func.func private @stage_d(%dst: !SD, %row0: index, %src_arg: !PT, %first: index, %valid: index,
                           %rows: index, %tid: index) {
  %c2 = arith.constant 2 : index
  %C = arith.constant ${D} : index
  %THREADS = arith.constant ${THREADS} : index
  %zero2 = arith.constant dense<0.0> : vector<2x${T}>
  %half = arith.divui %C, %c2 : index
  %pairs = arith.muli %half, %rows : index
  %span0 = arith.muli %valid, %C : index
  %span = arith.addi %first, %span0 : index
  %src = memref.reinterpret_cast %src_arg to offset: [0], sizes: [%span], strides: [1]
      : !PT to memref<?x${T}>
  scf.for %e = %tid to %pairs step %THREADS {
    %r = arith.divui %e, %half : index
    %cp = arith.remui %e, %half : index
    %c = arith.muli %cp, %c2 : index
    %in = arith.cmpi ult, %r, %valid : index
    %x = scf.if %in -> vector<2x${T}> {
      %rc = arith.muli %r, %C : index
      %at0 = arith.addi %first, %rc : index
      %at = arith.addi %at0, %c : index
      %l = vector.load %src[%at] : memref<?x${T}>, vector<2x${T}>
      scf.yield %l : vector<2x${T}>
    } else {
      scf.yield %zero2 : vector<2x${T}>
    }
    %row = arith.addi %row0, %r : index
    vector.store %x, %dst[%row, %c] : !SD, vector<2x${T}>
  }
  return
}

// The same for SV from a T tensor (V).
func.func private @stage_v(%dst: !SV, %row0: index, %src_arg: !PT, %first: index, %valid: index,
                           %rows: index, %tid: index) {
  %c2 = arith.constant 2 : index
  %C = arith.constant ${DV} : index
  %THREADS = arith.constant ${THREADS} : index
  %zero2 = arith.constant dense<0.0> : vector<2x${T}>
  %half = arith.divui %C, %c2 : index
  %pairs = arith.muli %half, %rows : index
  %span0 = arith.muli %valid, %C : index
  %span = arith.addi %first, %span0 : index
  %src = memref.reinterpret_cast %src_arg to offset: [0], sizes: [%span], strides: [1]
      : !PT to memref<?x${T}>
  scf.for %e = %tid to %pairs step %THREADS {
    %r = arith.divui %e, %half : index
    %cp = arith.remui %e, %half : index
    %c = arith.muli %cp, %c2 : index
    %in = arith.cmpi ult, %r, %valid : index
    %x = scf.if %in -> vector<2x${T}> {
      %rc = arith.muli %r, %C : index
      %at0 = arith.addi %first, %rc : index
      %at = arith.addi %at0, %c : index
      %l = vector.load %src[%at] : memref<?x${T}>, vector<2x${T}>
      scf.yield %l : vector<2x${T}>
    } else {
      scf.yield %zero2 : vector<2x${T}>
    }
    %row = arith.addi %row0, %r : index
    vector.store %x, %dst[%row, %c] : !SV, vector<2x${T}>
  }
  return
}

// The same for SV from dO, of the output's type OT (rounded to T).
func.func private @stage_o(%dst: !SV, %row0: index, %src_arg: !POT, %first: index,
                           %valid: index, %rows: index, %tid: index) {
  %c1 = arith.constant 1 : index
  %C = arith.constant ${DV} : index
  %THREADS = arith.constant ${THREADS} : index
  %zero = arith.constant 0.0 : ${T}
  %cells = arith.muli %C, %rows : index
  %span0 = arith.muli %valid, %C : index
  %span = arith.addi %first, %span0 : index
  %src = memref.reinterpret_cast %src_arg to offset: [0], sizes: [%span], strides: [1]
      : !POT to memref<?x${OT}>
  scf.for %e = %tid to %cells step %THREADS {
    %r = arith.divui %e, %C : index
    %c = arith.remui %e, %C : index
    %in = arith.cmpi ult, %r, %valid : index
    %x = scf.if %in -> ${T} {
      %rc = arith.muli %r, %C : index
      %at0 = arith.addi %first, %rc : index
      %at = arith.addi %at0, %c : index
      %l = memref.load %src[%at] : memref<?x${OT}>
      %t = func.call @o_to_t(%l) : (${OT}) -> ${T}
      scf.yield %t : ${T}
    } else {
      scf.yield %zero : ${T}
    }
    %row = arith.addi %row0, %r : index
    memref.store %x, %dst[%row, %c] : !SV
  }
  return
}

func.func private @o_to_t(%x: ${OT}) -> ${T} {
  ${O_TO_T}
}

func.func private @o_to_f32(%x: ${OT}) -> f32 {
  ${O_TO_F32}
}

// One score of row i and key j from its dot product q'_i . k'_j (and a key
// term's q_i . a^K):
//   s = softcap(scale dot) + biases (attn.score_mod),  -inf where masked
// (j >= SKV, i >= SQ, causal j > i + OFF, windows), and the factor
// dE / dS = scale softcap' (softcap' = 1 - tanh^2, or 1).
func.func private @score_at(%dot0: f32, %b: index, %h: index, %i: index, %j: index,
                            %qpos_arg: !PI, %kpos_arg: !PI, %terms_arg: !PF, %B: index,
                            %SQ: index, %SKV: index${ENCODING_ARGS}) -> (f32, f32) {
${POSITION_VIEWS}
  // A key term (Shaw's q_i . a^K[mk]) joins q'_i . k'_j before the scale.
  %kt = func.call @key_term_at(%b, %h, %i, %j, %qpos_arg, %kpos_arg, %terms_arg, %B, %SQ,
                               %SKV${ENCODING_CALL_ARGS})
      : (index, index, index, index, !PI, !PI, !PF, index, index, index${ENCODING_CALL_TYPES})
      -> f32
  %dot = arith.addf %dot0, %kt : f32
  %true = arith.constant true
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant ${SCALE} : f32
  %has_softcap = arith.constant ${HAS_SOFTCAP}
  %causal = arith.constant ${CAUSAL}
  %has_window = arith.constant ${HAS_WINDOW}
  %has_right = arith.constant ${HAS_RIGHT}
  %WINDOW = arith.constant ${WINDOW} : index
  %RIGHT = arith.constant ${RIGHT} : index
  %s0 = arith.mulf %dot, %scale : f32
  %r:2 = scf.if %has_softcap -> (f32, f32) {
    %cap = arith.constant ${SOFTCAP} : f32
    %x = arith.divf %s0, %cap : f32
    %t = math.tanh %x : f32
    %s = arith.mulf %t, %cap : f32
    %tt = arith.mulf %t, %t : f32
    %f0 = arith.subf %one, %tt : f32
    %f = arith.mulf %f0, %scale : f32
    scf.yield %s, %f : f32, f32
  } else {
    scf.yield %s0, %scale : f32, f32
  }
  %i_i = arith.index_cast %i : index to i32
  %j_i = arith.index_cast %j : index to i32
  %s = attn.score_mod %r#0, batch %b, head %h, query %i_i, key %j_i${ENCODING_OPERANDS}
      positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV) : f32, i32
  // key j is visible to row i iff i < SQ, j < SKV, (causal) j <= i + OFF,
  // (window) j >= i + OFF - WINDOW and (right) j <= i + OFF + RIGHT.
  %OFF = arith.subi %SKV, %SQ : index
  %diag = arith.addi %i, %OFF : index
  %row_in = arith.cmpi ult, %i, %SQ : index
  %key_in = arith.cmpi ult, %j, %SKV : index
  %after = arith.cmpi sgt, %j, %diag : index
  %hidden_c = arith.andi %causal, %after : i1
  %win_lo = arith.subi %diag, %WINDOW : index
  %before = arith.cmpi slt, %j, %win_lo : index
  %hidden_w = arith.andi %has_window, %before : i1
  %right_hi = arith.addi %diag, %RIGHT : index
  %past_right = arith.cmpi sgt, %j, %right_hi : index
  %hidden_r = arith.andi %has_right, %past_right : i1
  %hidden_cr = arith.ori %hidden_c, %hidden_r : i1
  %hidden0 = arith.ori %hidden_cr, %hidden_w : i1
  %visible0 = arith.xori %hidden0, %true : i1
  %visible1 = arith.andi %visible0, %key_in : i1
  %visible = arith.andi %visible1, %row_in : i1
  %sm = arith.select %visible, %s, %ninf : f32
  return %sm, %r#1 : f32, f32
}
