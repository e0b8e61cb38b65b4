// x86 linear attention template (attn.linear_attention,
// docs/linear-attention.md): one work item = (batch b, query head h), its
// query rows in chunks of R with the state of the keys they see.
//
// State after keys [0, n) of KV head kh = h / GROUP:
//   S[c, :] = sum_j k~_jc v_j      (d x dv, f32)   k~: phi(R k), or R phi(k)
//   z[c]    = sum_j k^_jc          (d)             k^: phi(R k), or phi(k)
// softmax_keys keeps, per channel, the running max m[c] and rescales:
//   S[c, :] = sum_j exp(k_jc - m_c) v_j, z[c] = sum_j exp(k_jc - m_c).
// Row i sees the keys j < upto(i) = skv, or clamp(i + skv - sq + 1, 0, skv)
// when causal (the prefix sum of a causal row), and
//   out_i = (q~_i . S_i) / (q^_i . z_i)   elu_plus_one, relu (0 if q^.z == 0)
//   out_i = q~_i . S_i                    identity
//   out_i = sum_c q_ic S_i[c, :] / z_i[c] softmax_keys
// with S_i, z_i the state of those keys; no key gives a zero row (unless a
// carried state holds earlier keys).
//
// Chunked (matmul) form. A chunk of query rows [i0, i0 + nq) first brings
// the state up to lo, R keys per step: S += Kt . V (one matmul). Causal, lo
// = max(seen, hi - R) <= upto(i0), the keys before the last R of hi =
// upto(i0 + nq - 1), so the one key since the last chunk (sq = skv) is not
// a pass over S of its own; not causal, lo = upto(i0) = skv. The chunk's
// own keys [lo, hi) (at most R: upto grows by at most 1 per row) then enter
// as a masked matmul:
//   O = Qc . S + mask(Qc . Kt) . V,  mask: row r keeps keys j < upto(i) - lo
// where Qc is q~ (or, for softmax_keys, q_ic / z_i[c]) and Kt the chunk's
// keys transposed (k~, or the weights exp(k - m) with m over those keys
// too). The denominators are dot products with a running z per row, O(R
// d). Then the chunk's keys join S. Not causal: lo = hi = skv, so the first
// chunk adds every key and each chunk is O = Qc . S.
// With a state (op state(...), slot %e3: [b, hq, d, dv + 2] f32 = S, z,
// m), S is updated in place in the state's columns [0, dv); z and m are
// read from columns dv, dv + 1 and written back after every key of the
// call. A channel whose z is 0 has seen no key: its m is ignored, so a zero
// tensor is the state of no keys. Q and K rows are read into f32 tiles: the
// fused RoPE's hooks rotate them (attn.qk_transform) before phi
// (rope_before_feature_map) or after it, on the numerator side only
// (rope_on_numerator, the tile's unrotated copy kept for the denominator).
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86LinearAttention.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?`; ${HQ} ${HKV} ${GROUP} ${D} ${DV} ${R}
//   ${T} ${OT} element types of Q/K/V and O; ${QPB} ${KPB} id rows
//   ${CAUSAL} ${ON_NUMERATOR} ${SOFTMAX_KEYS} ${NORMALIZE} ${HAS_STATE}: true
//   or false; ${E0} the RoPE's operand (its runtime scale) or !UNUSED,
//   ${E3} the state's memref type or !UNUSED; ${DVS} = DV + 2
//   STATE_VIEW: defines %S (the state's columns, or a zeroed stack matrix)
//   STATE_IN, STATE_OUT, PHI8, WIDEN8, NARROW8: function bodies
// The chunk's blocks (matmul, key preparation, row factors) are
// templates/x86/linear_blocks.mlir, put in place of `// @pejit-blocks`.

!Q = memref<${B}x${HQ}x${SQ}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!K = memref<${B}x${HKV}x${SKV}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!V = memref<${B}x${HKV}x${SKV}x${DV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!O = memref<${B}x${HQ}x${SQ}x${DV}x${OT}, strided<[?, ?, ?, 1], offset: ?>>
!QPOS = memref<${QPB}x${SQ}xi64>
!KPOS = memref<${KPB}x${SKV}xi64>
!SCRATCH = memref<?xf32>
!UNUSED = memref<1xf32>
!LSE = memref<?x?x?x1xf32, strided<[?, ?, ?, 1], offset: ?>>
!E0 = ${E0}
!E3 = ${E3}
!ROWS = memref<?x${D}x${T}, strided<[?, 1], offset: ?>>
!TILE = memref<${R}x${D}xf32>
!KT = memref<${D}x${R}xf32>
!VT = memref<${R}x${DV}xf32>
!SC = memref<${R}x${R}xf32>
!OACC = memref<${R}x${DV}xf32>
!STATE = memref<${D}x${DV}xf32, strided<[?, 1], offset: ?>>
!MAT = memref<?x?xf32, strided<[?, 1], offset: ?>>
!VEC = memref<${D}xf32>
!RF = memref<${R}xf32>
!RI = memref<${R}xindex>
!RB = memref<${R}xi1>
!V8 = vector<8xf32>
!IN8 = vector<8x${T}>
!OUT8 = vector<8x${OT}>

// Once per call, before any item: the RoPE's cos/sin tables for the Q and
// K ids (nothing without a RoPE).
// The four operand slots are the attention template's (one entry point
// convention): slot 0 is the RoPE's runtime scale, slot 3 the state.
func.func @pejit_prologue(%qpos: !QPOS, %kpos: !KPOS, %scratch: !SCRATCH, %first: index,
                          %step: index, %e0: !E0, %e1: !UNUSED, %e2: !UNUSED, %e3: !E3)
    attributes {llvm.emit_c_interface, pejit.cold} {
  attn.qk_prologue %qpos, %kpos, %scratch rows(%first, %step) operands(%e0 : !E0)
      : !QPOS, !KPOS, !SCRATCH
  return
}

// The keys row i sees: j < upto(i).
func.func private @upto(%i: index, %off: index, %skv: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %causal = arith.constant ${CAUSAL}
  %last = arith.addi %i, %off : index
  %end0 = arith.addi %last, %c1 : index
  %end1 = arith.maxsi %end0, %c0 : index
  %end2 = arith.minsi %end1, %skv : index
  %end = arith.select %causal, %end2, %skv : index
  return %end : index
}

// Keys [from, to) of KV head kh into the state, R at a time.
func.func private @add_key_range(%k: !K, %v: !V, %b: index, %kh: index, %from: index,
                                 %to: index, %scratch: !SCRATCH, %sq: index, %skv: index,
                                 %knum: !TILE, %kden: !TILE, %kt: !KT, %vt: !VT, %S: !STATE,
                                 %z: !VEC, %m: !VEC, %a: !VEC) {
  %R = arith.constant ${R} : index
  scf.for %j0 = %from to %to step %R {
    %left = arith.subi %to, %j0 : index
    %nk = arith.minui %left, %R : index
    func.call @load_key_chunk(%k, %v, %b, %kh, %j0, %nk, %scratch, %sq, %skv, %knum, %kden, %kt,
                              %vt, %S, %z, %m, %a)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !TILE, !TILE, !KT, !VT,
           !STATE, !VEC, !VEC, !VEC) -> ()
    func.call @add_keys(%kt, %kden, %vt, %nk, %S, %z)
        : (!KT, !TILE, !VT, index, !STATE, !VEC) -> ()
  }
  return
}

// Keys [j0, j0 + nk) as Kt (and their denominator rows in kden) and V as
// f32 rows; for softmax_keys, S and z rescaled to the new maxima first.
func.func private @load_key_chunk(%k: !K, %v: !V, %b: index, %kh: index, %j0: index, %nk: index,
                                  %scratch: !SCRATCH, %sq: index, %skv: index, %knum: !TILE,
                                  %kden: !TILE, %kt: !KT, %vt: !VT, %S: !STATE, %z: !VEC,
                                  %m: !VEC, %a: !VEC) {
  %krows = memref.subview %k[%b, %kh, %j0, 0] [1, 1, %nk, ${D}] [1, 1, 1, 1] : !K to !ROWS
  func.call @load_key_rows(%krows, %nk, %j0, %b, %scratch, %sq, %skv, %knum, %kden)
      : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
  func.call @prepare_keys(%knum, %kden, %nk, %S, %z, %m, %a, %kt)
      : (!TILE, !TILE, index, !STATE, !VEC, !VEC, !VEC, !KT) -> ()
  func.call @load_values(%v, %b, %kh, %j0, %nk, %vt) : (!V, index, index, index, index, !VT) -> ()
  return
}

// Item = b HQ + h.
func.func @pejit_item(%q: !Q, %k: !K, %v: !V, %o: !O, %unused_lse: !LSE, %scratch: !SCRATCH,
                      %kcache: !UNUSED,
                      %e0: !E0, %e1: !UNUSED, %e2: !UNUSED, %e3: !E3, %qpos: !QPOS,
                      %kpos: !KPOS, %item: index) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %HQ = arith.constant ${HQ} : index
  %GROUP = arith.constant ${GROUP} : index
  %true = arith.constant true
  %false = arith.constant false
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %zero8 = arith.constant dense<0.0> : !V8
  %ninf8 = arith.constant dense<0xFF800000> : !V8
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  %h = arith.remui %item, %HQ : index
  %b = arith.divui %item, %HQ : index
  %kh = arith.divui %h, %GROUP : index
  ${STATE_VIEW}
  %z = memref.alloca() {alignment = 64 : i64} : !VEC
  %m = memref.alloca() {alignment = 64 : i64} : !VEC
  %a = memref.alloca() {alignment = 64 : i64} : !VEC
  %zrun = memref.alloca() {alignment = 64 : i64} : !VEC
  %qnum = memref.alloca() {alignment = 64 : i64} : !TILE
  %qden = memref.alloca() {alignment = 64 : i64} : !TILE
  %coef = memref.alloca() {alignment = 64 : i64} : !TILE
  %knum = memref.alloca() {alignment = 64 : i64} : !TILE
  %kden = memref.alloca() {alignment = 64 : i64} : !TILE
  %kt = memref.alloca() {alignment = 64 : i64} : !KT
  %vt = memref.alloca() {alignment = 64 : i64} : !VT
  %sc = memref.alloca() {alignment = 64 : i64} : !SC
  %oacc = memref.alloca() {alignment = 64 : i64} : !OACC
  %factor = memref.alloca() {alignment = 64 : i64} : !RF
  %zero_row = memref.alloca() : !RB
  %lim = memref.alloca() : !RI
  // Rows past a short chunk's last feed the matmuls (their results are
  // dropped): zeros, never stale stack bytes.
  func.call @zero_tiles(%qnum, %qden, %coef, %knum, %kden, %kt)
      : (!TILE, !TILE, !TILE, !TILE, !TILE, !KT) -> ()
  scf.for %c = %c0 to %D step %c8 {
    vector.store %zero8, %z[%c] : !VEC, !V8
    vector.store %ninf8, %m[%c] : !VEC, !V8
  }
  %has_state = arith.constant ${HAS_STATE}
  scf.if %has_state {
    func.call @state_in(%e3, %b, %h, %z, %m) : (!E3, index, index, !VEC, !VEC) -> ()
  }
  %Sm = memref.cast %S : !STATE to !MAT
  %ktm = memref.cast %kt : !KT to !MAT
  %vtm = memref.cast %vt : !VT to !MAT
  %scm = memref.cast %sc : !SC to !MAT
  %om = memref.cast %oacc : !OACC to !MAT
  %qa0 = memref.cast %qnum : !TILE to !MAT
  %ca0 = memref.cast %coef : !TILE to !MAT
  %qa = scf.if %softmax_keys -> !MAT {
    scf.yield %ca0 : !MAT
  } else {
    scf.yield %qa0 : !MAT
  }
  %sq_up0 = arith.addi %SQ, %R : index
  %sq_up = arith.subi %sq_up0, %c1 : index
  %NQT = arith.divui %sq_up, %R : index
  %done = scf.for %t = %c0 to %NQT step %c1 iter_args(%seen = %c0) -> index {
    %i0 = arith.muli %t, %R : index
    %left = arith.subi %SQ, %i0 : index
    %nq = arith.minui %left, %R : index
    // The matmuls' rows: nq rounded up to even (@gemm's blocks).
    %nq1 = arith.addi %nq, %c1 : index
    %nq2d = arith.divui %nq1, %c2 : index
    %M2 = arith.muli %nq2d, %c2 : index
    %last_row0 = arith.addi %i0, %nq : index
    %last_row = arith.subi %last_row0, %c1 : index
    %lo0 = func.call @upto(%i0, %OFF, %SKV) : (index, index, index) -> index
    %hi = func.call @upto(%last_row, %OFF, %SKV) : (index, index, index) -> index
    // Causal: the chunk's own keys start at max(seen, hi - R) (<= upto(i0)),
    // so the keys since the last chunk (one, for sq = skv) enter with the
    // own keys, not as a pass over S of their own.
    %causal = arith.constant ${CAUSAL}
    %hi_r = arith.subi %hi, %R : index
    %own_first = arith.maxsi %seen, %hi_r : index
    %lo = arith.select %causal, %own_first, %lo0 : index
    func.call @add_key_range(%k, %v, %b, %kh, %seen, %lo, %scratch, %SQ, %SKV, %knum, %kden, %kt,
                             %vt, %S, %z, %m, %a)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !TILE, !TILE, !KT, !VT,
           !STATE, !VEC, !VEC, !VEC) -> ()
    %qrows = memref.subview %q[%b, %h, %i0, 0] [1, 1, %nq, ${D}] [1, 1, 1, 1] : !Q to !ROWS
    func.call @load_query_rows(%qrows, %nq, %i0, %b, %scratch, %SQ, %SKV, %qnum, %qden)
        : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
    %nk = arith.subi %hi, %lo : index
    %own = arith.cmpi sgt, %nk, %c0 : index
    scf.if %own {
      func.call @load_key_chunk(%k, %v, %b, %kh, %lo, %nk, %scratch, %SQ, %SKV, %knum, %kden,
                                %kt, %vt, %S, %z, %m, %a)
          : (!K, !V, index, index, index, index, !SCRATCH, index, index, !TILE, !TILE, !KT, !VT,
             !STATE, !VEC, !VEC, !VEC) -> ()
    }
    func.call @row_factors(%qnum, %qden, %kden, %nq, %i0, %lo, %OFF, %SKV, %z, %zrun, %coef,
                           %factor, %zero_row, %lim)
        : (!TILE, !TILE, !TILE, index, index, index, index, index, !VEC, !VEC, !TILE, !RF, !RB,
           !RI) -> ()
    // O = Qc . S, then + mask(Qc . Kt) . V for the chunk's own keys.
    func.call @gemm(%qa, %Sm, %om, %M2, %DV, %D, %false)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    scf.if %own {
      func.call @gemm(%qa, %ktm, %scm, %M2, %R, %D, %false)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
      func.call @mask_scores(%sc, %nq, %lim) : (!SC, index, !RI) -> ()
      func.call @gemm(%scm, %vtm, %om, %M2, %DV, %nk, %true)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    }
    func.call @emit_rows(%oacc, %nq, %factor, %zero_row, %o, %b, %h, %i0)
        : (!OACC, index, !RF, !RB, !O, index, index, index) -> ()
    scf.if %own {
      func.call @add_keys(%kt, %kden, %vt, %nk, %S, %z)
          : (!KT, !TILE, !VT, index, !STATE, !VEC) -> ()
    }
    scf.yield %hi : index
  }
  scf.if %has_state {
    // Every key of the call joins the state (sq = 0 rows saw none), and z
    // and m go back to the caller (S is updated in place).
    func.call @add_key_range(%k, %v, %b, %kh, %done, %SKV, %scratch, %SQ, %SKV, %knum, %kden,
                             %kt, %vt, %S, %z, %m, %a)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !TILE, !TILE, !KT, !VT,
           !STATE, !VEC, !VEC, !VEC) -> ()
    func.call @state_out(%e3, %b, %h, %z, %m) : (!E3, index, index, !VEC, !VEC) -> ()
  }
  return
}

// The carried z and m of (b, h): columns DV and DV + 1 of the state.
func.func private @state_in(%st: !E3, %b: index, %h: index, %z: !VEC, %m: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %DV1 = arith.constant ${DVS} : index
  %DVM = arith.subi %DV1, %c1 : index
  ${STATE_IN}
  return
}

// z and m back into the carried state of (b, h).
func.func private @state_out(%st: !E3, %b: index, %h: index, %z: !VEC, %m: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %DV1 = arith.constant ${DVS} : index
  %DVM = arith.subi %DV1, %c1 : index
  ${STATE_OUT}
  return
}

// phi of 8 lanes (the feature map; identity for softmax_keys).
func.func private @phi8(%x: !V8) -> !V8 {
  ${PHI8}
}

// 8 elements of Q/K/V as f32.
func.func private @widen8(%x: !IN8) -> !V8 {
  ${WIDEN8}
}

// 8 f32 lanes as the output type.
func.func private @narrow8(%x: !V8) -> !OUT8 {
  ${NARROW8}
}

// @pejit-blocks
