// x86 linear attention backward template (attn.linear_attention_backward,
// docs/backward.md "Linear attention"): one work item = (batch b, KV head
// kh), its group's query heads in order, so dk and dv are written once per
// key, with no atomics and a fixed order of sums.
//
// With q~ / k~ the numerator's feature rows, q^ / k^ the denominator's, and
// row i seeing the keys j < upto(i) (all, or the causal prefix):
//   S_i = sum_j k~_j v_j^T (d x dv)   z_i = sum_j k^_j   den_i = q^_i . z_i
//   g_i = dO_i / den_i   dden_i = -(g_i . o_i)   (identity: den 1, dden 0)
//   dq~_i = S_i g_i      dq^_i = dden_i z_i
//   T_j = sum_{i sees j} q~_i g_i^T   w_j = sum_{i sees j} dden_i q^_i
//   dk~_j = T_j v_j      dk^_j = w_j   dv_j = T_j^T k~_j
// then the chain: dx = phi'(x^) (dx~ + dx^), with the RoPE's adjoint hook
// before it (rope_on_numerator: on dx~ only) or after it. phi' is read from
// phi's value (elu + 1: min(phi, 1); relu: phi > 0; identity: 1).
// softmax_keys (Q as it is, K softmaxed per channel over the visible keys):
// e_jc = exp(k_jc - M_c) with M_c the channel's max over the item's keys,
// Z_i = sum_j e_j, a_i = q_i / Z_i; then q~ = a, k~ = k^ = e, g = dO and
//   dq_i = (S_i dO_i) / Z_i   and the row's "dden" vector dZ_i = -a_i dq_i,
// so dk_j = e_j (T_j v_j + w_j) with w_j = sum_{i sees j} dZ_i.
//
// Not causal, every row sees every key: five matmuls per chunk
// (templates/x86/linear_backward_blocks.mlir). Causal, the masked matmul
// form (linear_backward_causal.mlir, _causal_keys.mlir): per query head the
// rows in chunks, S grown chunk by chunk, each row's dq written and its P_i
// (q~ or a), W_i (dden q^ or dZ) and 1 / den_i kept in the rows scratch
// (2 D + 8 floats a row); then keys from the last chunk, the rows that see
// them joining T and w. O((sq + skv) d dv) per head; S and T live on the
// item's stack.

// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86LinearBackward.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?`; ${HQ} ${HKV} ${GROUP} ${D} ${DV} ${R}
//   ${T} the element type of every tensor; ${QPB} ${KPB} id rows
//   ${CAUSAL} ${ON_NUMERATOR} ${SOFTMAX_KEYS} ${NORMALIZE}: true or false
//   ${E0} the RoPE's operand (its runtime scale) or !UNUSED; ${RW} = 2 D + 8
//   PHI8, QUERY_FACTOR8, KEY_FACTOR8, WIDEN8, NARROW8: function bodies
// Those forms' blocks, the forward's row loading
// (templates/x86/linear_blocks.mlir), its @gemm and 2^x are put in place of
// `// @pejit-blocks`.

!Q = memref<${B}x${HQ}x${SQ}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!K = memref<${B}x${HKV}x${SKV}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!V = memref<${B}x${HKV}x${SKV}x${DV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!O = memref<${B}x${HQ}x${SQ}x${DV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!QPOS = memref<${QPB}x${SQ}xi64>
!KPOS = memref<${KPB}x${SKV}xi64>
!SCRATCH = memref<?xf32>
!UNUSED = memref<1xf32>
!E0 = ${E0}
!ROWS = memref<?x${D}x${T}, strided<[?, 1], offset: ?>>
!TILE = memref<${R}x${D}xf32>
!KT = memref<${D}x${R}xf32>
!VT = memref<${R}x${DV}xf32>
!SC = memref<${R}x${R}xf32>
!OACC = memref<${R}x${DV}xf32>
!STATE = memref<${D}x${DV}xf32>
!STATE_T = memref<${DV}x${D}xf32>
!VTT = memref<${DV}x${R}xf32>
!MAT = memref<?x?xf32, strided<[?, 1], offset: ?>>
!VEC = memref<${D}xf32>
!RF = memref<${R}xf32>
!RI = memref<${R}xindex>
!RB = memref<${R}xi1>
!V8 = vector<8xf32>
!IN8 = vector<8x${T}>
!OUT8 = vector<8x${T}>

// Once per call, before any item: the RoPE's cos/sin tables for the Q and
// K ids (nothing without a RoPE), as the forward's.
func.func @pejit_prologue(%qpos: !QPOS, %kpos: !KPOS, %scratch: !SCRATCH, %first: index,
                          %step: index, %e0: !E0, %e1: !UNUSED, %e2: !UNUSED, %e3: !UNUSED)
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

// Item = b HKV + kh.
func.func @pejit_linear_backward_item(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %dq: !Q,
                                      %dk: !K, %dv: !V, %tables: !SCRATCH, %rows: !SCRATCH,
                                      %e0: !E0, %qpos: !QPOS, %kpos: !KPOS, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %HKV = arith.constant ${HKV} : index
  %GROUP = arith.constant ${GROUP} : index
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %zero8 = arith.constant dense<0.0> : !V8
  %ninf8 = arith.constant dense<0xFF800000> : !V8
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %kh = arith.remui %item, %HKV : index
  %b = arith.divui %item, %HKV : index
  %S = memref.alloca() {alignment = 64 : i64} : !STATE
  %z = memref.alloca() {alignment = 64 : i64} : !VEC
  %M = memref.alloca() {alignment = 64 : i64} : !VEC
  %qnum = memref.alloca() {alignment = 64 : i64} : !TILE
  %qden = memref.alloca() {alignment = 64 : i64} : !TILE
  %knum = memref.alloca() {alignment = 64 : i64} : !TILE
  %kden = memref.alloca() {alignment = 64 : i64} : !TILE
  %dxt = memref.alloca() {alignment = 64 : i64} : !TILE
  %dxh = memref.alloca() {alignment = 64 : i64} : !TILE
  %vt = memref.alloca() {alignment = 64 : i64} : !VT
  %gt = memref.alloca() {alignment = 64 : i64} : !VT
  // softmax_keys: each channel's max over the item's keys (the shift of
  // every e; the products a e do not depend on it).
  scf.for %c = %c0 to %D step %c8 {
    vector.store %ninf8, %M[%c] : !VEC, !V8
  }
  scf.if %softmax_keys {
    scf.for %j0 = %c0 to %SKV step %R {
      %left = arith.subi %SKV, %j0 : index
      %n = arith.minui %left, %R : index
      %krows = memref.subview %k[%b, %kh, %j0, 0] [1, 1, %n, ${D}] [1, 1, 1, 1] : !K to !ROWS
      func.call @load_key_rows(%krows, %n, %j0, %b, %tables, %SQ, %SKV, %knum, %kden)
          : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
      scf.for %c = %c0 to %D step %c8 {
        %m0 = vector.load %M[%c] : !VEC, !V8
        %m1 = scf.for %j = %c0 to %n step %c1 iter_args(%mx = %m0) -> !V8 {
          %k8 = vector.load %knum[%j, %c] : !TILE, !V8
          %next = arith.maximumf %mx, %k8 : !V8
          scf.yield %next : !V8
        }
        vector.store %m1, %M[%c] : !VEC, !V8
      }
    }
  }
  %causal = arith.constant ${CAUSAL}
  %true = arith.constant true
  %full = arith.xori %causal, %true : i1
  scf.if %full { // every row sees every key: the matmul form (linear_backward_blocks.mlir)
    func.call @full_backward(%q, %k, %v, %o, %do, %dq, %dk, %dv, %tables, %b, %kh, %S, %z, %M,
                             %qnum, %qden, %knum, %kden, %dxt, %dxh, %vt, %gt)
        : (!Q, !K, !V, !O, !O, !Q, !K, !V, !SCRATCH, index, index, !STATE, !VEC, !VEC, !TILE,
           !TILE, !TILE, !TILE, !TILE, !TILE, !VT, !VT) -> ()
  } else { // causal: the masked matmul form (linear_backward_causal.mlir)
    func.call @causal_backward(%q, %k, %v, %o, %do, %dq, %dk, %dv, %tables, %rows, %b, %kh, %M,
                               %qnum, %qden, %knum, %kden, %dxt, %dxh, %vt, %gt)
        : (!Q, !K, !V, !O, !O, !Q, !K, !V, !SCRATCH, !SCRATCH, index, index, !VEC, !TILE,
           !TILE, !TILE, !TILE, !TILE, !TILE, !VT, !VT) -> ()
  }
  return
}

// Keys [j0, j0 + n) of KV head kh: their numerator rows (k~, or for
// softmax_keys e = exp(k - M)) in knum, denominator rows (k^, or e) in
// kden, values in vt (f32).
func.func private @load_keys(%k: !K, %v: !V, %b: index, %kh: index, %j0: index, %n: index,
                             %tables: !SCRATCH, %sq: index, %skv: index, %M: !VEC, %knum: !TILE,
                             %kden: !TILE, %vt: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %log2e = arith.constant dense<1.44269504088896341> : !V8
  %krows = memref.subview %k[%b, %kh, %j0, 0] [1, 1, %n, ${D}] [1, 1, 1, 1] : !K to !ROWS
  func.call @load_key_rows(%krows, %n, %j0, %b, %tables, %sq, %skv, %knum, %kden)
      : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
  scf.if %softmax_keys {
    scf.for %j = %c0 to %n step %c1 {
      scf.for %c = %c0 to %D step %c8 {
        %k8 = vector.load %knum[%j, %c] : !TILE, !V8
        %m8 = vector.load %M[%c] : !VEC, !V8
        %d8 = arith.subf %k8, %m8 : !V8
        %x8 = arith.mulf %d8, %log2e : !V8
        %e8 = func.call @exp2_vec(%x8) : (!V8) -> !V8
        vector.store %e8, %knum[%j, %c] : !TILE, !V8
        vector.store %e8, %kden[%j, %c] : !TILE, !V8
      }
    }
  }
  func.call @load_values(%v, %b, %kh, %j0, %n, %vt) : (!V, index, index, index, index, !VT) -> ()
  return
}

// The query tile's nq rows to dq: dx = f(x^) (dx~ + dx^) (f = phi', or 1
// for softmax_keys), the RoPE's adjoint on dx~ first (rope_on_numerator)
// or on dx after (nothing without a RoPE), narrowed into dq[b, h].
func.func private @finish_query_rows(%qden: !TILE, %dqt: !TILE, %dqh: !TILE, %nq: index,
                                     %i0: index, %b: index, %h: index, %tables: !SCRATCH,
                                     %sq: index, %skv: index, %dq: !Q) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %on_numerator = arith.constant ${ON_NUMERATOR}
  scf.if %on_numerator {
    attn.qk_transform adjoint %dqt, %nq, %i0, %b, %tables lengths(%sq, %skv) : !TILE, !SCRATCH
  }
  scf.for %r = %c0 to %nq step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      %y8 = vector.load %qden[%r, %c] : !TILE, !V8
      %f8 = func.call @query_factor8(%y8) : (!V8) -> !V8
      %t8 = vector.load %dqt[%r, %c] : !TILE, !V8
      %h8 = vector.load %dqh[%r, %c] : !TILE, !V8
      %s8 = arith.addf %t8, %h8 : !V8
      %d8 = arith.mulf %s8, %f8 : !V8
      vector.store %d8, %dqt[%r, %c] : !TILE, !V8
    }
  }
  %true = arith.constant true
  %before_map = arith.xori %on_numerator, %true : i1
  scf.if %before_map {
    attn.qk_transform adjoint %dqt, %nq, %i0, %b, %tables lengths(%sq, %skv) : !TILE, !SCRATCH
  }
  scf.for %r = %c0 to %nq step %c1 {
    %i = arith.addi %i0, %r : index
    scf.for %c = %c0 to %D step %c8 {
      %d8 = vector.load %dqt[%r, %c] : !TILE, !V8
      %n8 = func.call @narrow8(%d8) : (!V8) -> !OUT8
      vector.store %n8, %dq[%b, %h, %i, %c] : !Q, !OUT8
    }
  }
  return
}

// A key tile's n rows to dk and dv: dk = f(k^) (dk~ + dk^) (f = phi', or e
// for softmax_keys), the RoPE's adjoint as for the queries; dv as it is.
func.func private @finish_key_rows(%kden: !TILE, %dkt: !TILE, %dkh: !TILE, %dvt: !VT, %n: index,
                                   %j0: index, %b: index, %kh: index, %tables: !SCRATCH,
                                   %sq: index, %skv: index, %dk: !K, %dv: !V) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %on_numerator = arith.constant ${ON_NUMERATOR}
  scf.if %on_numerator {
    attn.qk_transform adjoint %dkt, %n, %j0, %b, %tables key lengths(%sq, %skv) : !TILE, !SCRATCH
  }
  scf.for %r = %c0 to %n step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      %y8 = vector.load %kden[%r, %c] : !TILE, !V8
      %f8 = func.call @key_factor8(%y8) : (!V8) -> !V8
      %t8 = vector.load %dkt[%r, %c] : !TILE, !V8
      %h8 = vector.load %dkh[%r, %c] : !TILE, !V8
      %s8 = arith.addf %t8, %h8 : !V8
      %d8 = arith.mulf %s8, %f8 : !V8
      vector.store %d8, %dkt[%r, %c] : !TILE, !V8
    }
  }
  %true = arith.constant true
  %before_map = arith.xori %on_numerator, %true : i1
  scf.if %before_map {
    attn.qk_transform adjoint %dkt, %n, %j0, %b, %tables key lengths(%sq, %skv) : !TILE, !SCRATCH
  }
  scf.for %r = %c0 to %n step %c1 {
    %j = arith.addi %j0, %r : index
    scf.for %c = %c0 to %D step %c8 {
      %d8 = vector.load %dkt[%r, %c] : !TILE, !V8
      %n8 = func.call @narrow8(%d8) : (!V8) -> !OUT8
      vector.store %n8, %dk[%b, %kh, %j, %c] : !K, !OUT8
    }
    scf.for %e = %c0 to %DV step %c8 {
      %d8 = vector.load %dvt[%r, %e] : !VT, !V8
      %n8 = func.call @narrow8(%d8) : (!V8) -> !OUT8
      vector.store %n8, %dv[%b, %kh, %j, %e] : !V, !OUT8
    }
  }
  return
}

// phi of 8 lanes (identity for softmax_keys).
func.func private @phi8(%x: !V8) -> !V8 {
  ${PHI8}
}

// The query side's factor from phi's value y: phi'(x) (1 for softmax_keys).
func.func private @query_factor8(%y: !V8) -> !V8 {
  ${QUERY_FACTOR8}
}

// The key side's factor from its denominator row y: phi'(x), or for
// softmax_keys the weight e itself.
func.func private @key_factor8(%y: !V8) -> !V8 {
  ${KEY_FACTOR8}
}

// 8 elements of a tensor as f32.
func.func private @widen8(%x: !IN8) -> !V8 {
  ${WIDEN8}
}

// 8 f32 lanes as the tensors' type.
func.func private @narrow8(%x: !V8) -> !OUT8 {
  ${NARROW8}
}

// @pejit-blocks
