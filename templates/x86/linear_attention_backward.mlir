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
// Forward sweep, per head: rows in order, the state S, z grown key by key
// up to each row's upto(i); each row writes its dq and keeps P_i (q~ or a),
// W_i (dden q^ or dZ) and 1 / den_i in the rows scratch (2 D + 8 floats a
// row). Reverse sweep, once per item: keys from the last, the rows that
// see key j joining T and w (every head of the group, rows from the last)
// before key j's dk and dv are formed. O((sq + skv) d dv) per head; S and
// T live on the item's stack.
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86LinearBackward.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?`; ${HQ} ${HKV} ${GROUP} ${D} ${DV} ${R}
//   ${T} the element type of every tensor; ${QPB} ${KPB} id rows
//   ${CAUSAL} ${ON_NUMERATOR} ${SOFTMAX_KEYS} ${NORMALIZE}: true or false
//   ${E0} the RoPE's operand (its runtime scale) or !UNUSED; ${RW} = 2 D + 8
//   PHI8, QUERY_FACTOR8, KEY_FACTOR8, WIDEN8, NARROW8: function bodies
// The forward's row loading (templates/x86/linear_blocks.mlir) and 2^x are
// put in place of `// @pejit-blocks`.

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
  } else {
    scf.for %g = %c0 to %GROUP step %c1 {
      %hg = arith.muli %kh, %GROUP : index
      %h = arith.addi %hg, %g : index
      func.call @forward_sweep(%q, %k, %v, %o, %do, %dq, %tables, %rows, %b, %kh, %h, %S, %z,
                               %M, %qnum, %qden, %knum, %kden, %dxt, %dxh, %vt, %gt)
          : (!Q, !K, !V, !O, !O, !Q, !SCRATCH, !SCRATCH, index, index, index, !STATE, !VEC,
             !VEC, !TILE, !TILE, !TILE, !TILE, !TILE, !TILE, !VT, !VT) -> ()
    }
    // The reverse sweep reuses S as T and z as w.
    func.call @reverse_sweep(%k, %v, %do, %dk, %dv, %tables, %rows, %b, %kh, %SQ, %S, %z, %M,
                             %knum, %kden, %dxt, %dxh, %vt, %gt)
        : (!K, !V, !O, !K, !V, !SCRATCH, !SCRATCH, index, index, index, !STATE, !VEC, !VEC,
           !TILE, !TILE, !TILE, !TILE, !VT, !VT) -> ()
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
        %e8 = func.call @exp2_v8(%x8) : (!V8) -> !V8
        vector.store %e8, %knum[%j, %c] : !TILE, !V8
        vector.store %e8, %kden[%j, %c] : !TILE, !V8
      }
    }
  }
  func.call @load_values(%v, %b, %kh, %j0, %n, %vt) : (!V, index, index, index, index, !VT) -> ()
  return
}

// One head's forward sweep: S, z from zero, rows in order; each row's dq
// (a tile of R rows at a time, chained and written) and its P, W, 1/den.
func.func private @forward_sweep(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %dq: !Q,
                                 %tables: !SCRATCH, %rows: !SCRATCH, %b: index, %kh: index,
                                 %h: index, %S: !STATE, %z: !VEC, %M: !VEC, %qnum: !TILE,
                                 %qden: !TILE, %knum: !TILE, %kden: !TILE, %dqt: !TILE,
                                 %dqh: !TILE, %vt: !VT, %gt: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  scf.for %c = %c0 to %D step %c1 {
    scf.for %e = %c0 to %DV step %c8 {
      vector.store %zero8, %S[%c, %e] : !STATE, !V8
    }
  }
  scf.for %c = %c0 to %D step %c8 {
    vector.store %zero8, %z[%c] : !VEC, !V8
  }
  // The key tile holds keys [kc, kc + R); kc = SKV + R: none yet.
  %none = arith.addi %SKV, %R : index
  %state:2 = scf.for %i0 = %c0 to %SQ step %R iter_args(%seen0 = %c0, %kc0 = %none)
      -> (index, index) {
    %left = arith.subi %SQ, %i0 : index
    %nq = arith.minui %left, %R : index
    %qrows = memref.subview %q[%b, %h, %i0, 0] [1, 1, %nq, ${D}] [1, 1, 1, 1] : !Q to !ROWS
    func.call @load_query_rows(%qrows, %nq, %i0, %b, %tables, %SQ, %SKV, %qnum, %qden)
        : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
    %after:2 = scf.for %r = %c0 to %nq step %c1 iter_args(%seen = %seen0, %kc = %kc0)
        -> (index, index) {
      %i = arith.addi %i0, %r : index
      %u = func.call @upto(%i, %OFF, %SKV) : (index, index, index) -> index
      %kc_next = scf.for %j = %seen to %u step %c1 iter_args(%kcj = %kc) -> index {
        %below = arith.cmpi ult, %j, %kcj : index
        %end = arith.addi %kcj, %R : index
        %past = arith.cmpi uge, %j, %end : index
        %reload = arith.ori %below, %past : i1
        %kcl = scf.if %reload -> index {
          %kleft = arith.subi %SKV, %j : index
          %kn = arith.minui %kleft, %R : index
          func.call @load_keys(%k, %v, %b, %kh, %j, %kn, %tables, %SQ, %SKV, %M, %knum, %kden,
                               %vt)
              : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !TILE, !TILE,
                 !VT) -> ()
          scf.yield %j : index
        } else {
          scf.yield %kcj : index
        }
        %jj = arith.subi %j, %kcl : index
        func.call @add_outer(%S, %knum, %jj, %vt, %jj) : (!STATE, !TILE, index, !VT, index) -> ()
        scf.for %c = %c0 to %D step %c8 {
          %z8 = vector.load %z[%c] : !VEC, !V8
          %k8 = vector.load %kden[%jj, %c] : !TILE, !V8
          %s8 = arith.addf %z8, %k8 : !V8
          vector.store %s8, %z[%c] : !VEC, !V8
        }
        scf.yield %kcl : index
      }
      %visible = arith.cmpi ugt, %u, %c0 : index
      func.call @query_row(%qnum, %qden, %r, %visible, %S, %z, %o, %do, %b, %h, %i, %gt, %dqt,
                           %dqh, %rows)
          : (!TILE, !TILE, index, i1, !STATE, !VEC, !O, !O, index, index, index, !VT, !TILE,
             !TILE, !SCRATCH) -> ()
      scf.yield %u, %kc_next : index, index
    }
    func.call @finish_query_rows(%qden, %dqt, %dqh, %nq, %i0, %b, %h, %tables, %SQ, %SKV, %dq)
        : (!TILE, !TILE, !TILE, index, index, index, index, !SCRATCH, index, index, !Q) -> ()
    scf.yield %after#0, %after#1 : index, index
  }
  return
}

// Row r of the query tile (row i of head h): dq~ into dqt[r], dq^ into
// dqh[r], and its P, W, 1/den into the rows scratch.
func.func private @query_row(%qnum: !TILE, %qden: !TILE, %r: index, %visible: i1, %S: !STATE,
                             %z: !VEC, %o: !O, %do: !O, %b: index, %h: index, %i: index,
                             %gt: !VT, %dqt: !TILE, %dqh: !TILE, %rows: !SCRATCH) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c2 = arith.constant 2 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %HQ = arith.constant ${HQ} : index
  %RW = arith.constant ${RW} : index
  %normalize = arith.constant ${NORMALIZE}
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %o, %c2 : !O
  %bh = arith.muli %b, %HQ : index
  %bhh = arith.addi %bh, %h : index
  %row0 = arith.muli %bhh, %SQ : index
  %row = arith.addi %row0, %i : index
  %at = arith.muli %row, %RW : index
  // den = q^ . z (1 without a denominator)
  %den_acc = scf.for %c = %c0 to %D step %c8 iter_args(%acc = %zero8) -> !V8 {
    %q8 = vector.load %qden[%r, %c] : !TILE, !V8
    %z8 = vector.load %z[%c] : !VEC, !V8
    %next = vector.fma %q8, %z8, %acc : !V8
    scf.yield %next : !V8
  }
  %den_sum = vector.reduction <add>, %den_acc : !V8 into f32
  %den = arith.select %normalize, %den_sum, %one : f32
  %nonzero = arith.cmpf one, %den, %zero : f32
  %valid = arith.andi %visible, %nonzero : i1
  %inv = arith.divf %one, %den : f32
  %rden = arith.select %valid, %inv, %zero : f32
  %rden8 = vector.broadcast %rden : f32 to !V8
  // g = dO / den into gt[r]; dden = -(g . o)
  %go_acc = scf.for %e = %c0 to %DV step %c8 iter_args(%acc = %zero8) -> !V8 {
    %do8 = vector.load %do[%b, %h, %i, %e] : !O, !IN8
    %dow = func.call @widen8(%do8) : (!IN8) -> !V8
    %g8 = arith.mulf %dow, %rden8 : !V8
    vector.store %g8, %gt[%r, %e] : !VT, !V8
    %o8 = vector.load %o[%b, %h, %i, %e] : !O, !IN8
    %ow = func.call @widen8(%o8) : (!IN8) -> !V8
    %next = vector.fma %g8, %ow, %acc : !V8
    scf.yield %next : !V8
  }
  %go = vector.reduction <add>, %go_acc : !V8 into f32
  %mgo = arith.negf %go : f32
  %dden = arith.select %normalize, %mgo, %zero : f32
  %dden8 = vector.broadcast %dden : f32 to !V8
  func.call @state_dot(%S, %gt, %r, %dqt, %r) : (!STATE, !VT, index, !TILE, index) -> ()
  %DW = arith.addi %at, %D : index
  scf.for %c = %c0 to %D step %c8 {
    %q8 = vector.load %qnum[%r, %c] : !TILE, !V8
    %qh8 = vector.load %qden[%r, %c] : !TILE, !V8
    %z8 = vector.load %z[%c] : !VEC, !V8
    %t8 = vector.load %dqt[%r, %c] : !TILE, !V8
    // softmax_keys: a = q / Z and dq = dq~ / Z where Z > 0, dZ = -a dq.
    %some = arith.cmpf ogt, %z8, %zero8 : !V8
    %qz = arith.divf %q8, %z8 : !V8
    %a8 = arith.select %some, %qz, %zero8 : vector<8xi1>, !V8
    %tz = arith.divf %t8, %z8 : !V8
    %dqs = arith.select %some, %tz, %zero8 : vector<8xi1>, !V8
    %ma = arith.negf %a8 : !V8
    %dz8 = arith.mulf %ma, %dqs : !V8
    // else: dq^ = dden z, P = q~, W = dden q^.
    %dh8 = arith.mulf %dden8, %z8 : !V8
    %w8 = arith.mulf %dden8, %qh8 : !V8
    %t_out = arith.select %softmax_keys, %dqs, %t8 : !V8
    %h_out = arith.select %softmax_keys, %zero8, %dh8 : !V8
    %p_out = arith.select %softmax_keys, %a8, %q8 : !V8
    %w_out = arith.select %softmax_keys, %dz8, %w8 : !V8
    vector.store %t_out, %dqt[%r, %c] : !TILE, !V8
    vector.store %h_out, %dqh[%r, %c] : !TILE, !V8
    %pa = arith.addi %at, %c : index
    vector.store %p_out, %rows[%pa] : !SCRATCH, !V8
    %wa = arith.addi %DW, %c : index
    vector.store %w_out, %rows[%wa] : !SCRATCH, !V8
  }
  %ra = arith.addi %DW, %D : index
  memref.store %rden, %rows[%ra] : !SCRATCH
  return
}

// out[r, c] = S[c, :] . x[xr, :] for every c: 8 channels at a time (8
// independent sums, then one reduction each).
func.func private @state_dot(%S: !STATE, %x: !VT, %xr: index, %out: !TILE, %r: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %zero8 = arith.constant dense<0.0> : !V8
  scf.for %c0b = %c0 to %D step %c8 {
    %c1b = arith.addi %c0b, %c1 : index
    %c2b = arith.addi %c1b, %c1 : index
    %c3b = arith.addi %c2b, %c1 : index
    %c4b = arith.addi %c3b, %c1 : index
    %c5b = arith.addi %c4b, %c1 : index
    %c6b = arith.addi %c5b, %c1 : index
    %c7b = arith.addi %c6b, %c1 : index
    %acc:8 = scf.for %e = %c0 to %DV step %c8
        iter_args(%a0 = %zero8, %a1 = %zero8, %a2 = %zero8, %a3 = %zero8, %a4 = %zero8,
                  %a5 = %zero8, %a6 = %zero8, %a7 = %zero8) -> (!V8, !V8, !V8, !V8, !V8, !V8,
                                                                !V8, !V8) {
      %x8 = vector.load %x[%xr, %e] : !VT, !V8
      %s0 = vector.load %S[%c0b, %e] : !STATE, !V8
      %s1 = vector.load %S[%c1b, %e] : !STATE, !V8
      %s2 = vector.load %S[%c2b, %e] : !STATE, !V8
      %s3 = vector.load %S[%c3b, %e] : !STATE, !V8
      %s4 = vector.load %S[%c4b, %e] : !STATE, !V8
      %s5 = vector.load %S[%c5b, %e] : !STATE, !V8
      %s6 = vector.load %S[%c6b, %e] : !STATE, !V8
      %s7 = vector.load %S[%c7b, %e] : !STATE, !V8
      %n0 = vector.fma %s0, %x8, %a0 : !V8
      %n1 = vector.fma %s1, %x8, %a1 : !V8
      %n2 = vector.fma %s2, %x8, %a2 : !V8
      %n3 = vector.fma %s3, %x8, %a3 : !V8
      %n4 = vector.fma %s4, %x8, %a4 : !V8
      %n5 = vector.fma %s5, %x8, %a5 : !V8
      %n6 = vector.fma %s6, %x8, %a6 : !V8
      %n7 = vector.fma %s7, %x8, %a7 : !V8
      scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    }
    %r0 = vector.reduction <add>, %acc#0 : !V8 into f32
    %r1 = vector.reduction <add>, %acc#1 : !V8 into f32
    %r2 = vector.reduction <add>, %acc#2 : !V8 into f32
    %r3 = vector.reduction <add>, %acc#3 : !V8 into f32
    %r4 = vector.reduction <add>, %acc#4 : !V8 into f32
    %r5 = vector.reduction <add>, %acc#5 : !V8 into f32
    %r6 = vector.reduction <add>, %acc#6 : !V8 into f32
    %r7 = vector.reduction <add>, %acc#7 : !V8 into f32
    %v0 = vector.from_elements %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7 : !V8
    vector.store %v0, %out[%r, %c0b] : !TILE, !V8
  }
  return
}

// S[c, :] += x[xr, c] y[yr, :] for every c (a rank-1 update).
func.func private @add_outer(%S: !STATE, %x: !TILE, %xr: index, %y: !VT, %yr: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  scf.for %c = %c0 to %D step %c1 {
    %xs = memref.load %x[%xr, %c] : !TILE
    %x8 = vector.broadcast %xs : f32 to !V8
    scf.for %e = %c0 to %DV step %c8 {
      %s8 = vector.load %S[%c, %e] : !STATE, !V8
      %y8 = vector.load %y[%yr, %e] : !VT, !V8
      %n8 = vector.fma %x8, %y8, %s8 : !V8
      vector.store %n8, %S[%c, %e] : !STATE, !V8
    }
  }
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

// The reverse sweep: T (in S) and w (in z) from zero, keys from the last,
// R at a time; before key j, every row of the group that sees it and has
// not joined yet joins (rows from the last, heads in order).
func.func private @reverse_sweep(%k: !K, %v: !V, %do: !O, %dk: !K, %dv: !V, %tables: !SCRATCH,
                                 %rows: !SCRATCH, %b: index, %kh: index, %SQ: index,
                                 %T: !STATE, %w: !VEC, %M: !VEC, %knum: !TILE, %kden: !TILE,
                                 %dkt: !TILE, %dkh: !TILE, %vt: !VT, %dvt: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %zero8 = arith.constant dense<0.0> : !V8
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  scf.for %c = %c0 to %D step %c1 {
    scf.for %e = %c0 to %DV step %c8 {
      vector.store %zero8, %T[%c, %e] : !STATE, !V8
    }
  }
  scf.for %c = %c0 to %D step %c8 {
    vector.store %zero8, %w[%c] : !VEC, !V8
  }
  %R1 = arith.subi %R, %c1 : index
  %skv_up = arith.addi %SKV, %R1 : index
  %chunks = arith.divui %skv_up, %R : index
  // Rows [0, pending) have not joined yet.
  %final = scf.for %t = %c0 to %chunks step %c1 iter_args(%pending0 = %SQ) -> index {
    %hi1 = arith.muli %t, %R : index
    %hi = arith.subi %SKV, %hi1 : index
    %lo0 = arith.subi %hi, %R : index
    %neg = arith.cmpi slt, %lo0, %c0 : index
    %lo = arith.select %neg, %c0, %lo0 : index
    %n = arith.subi %hi, %lo : index
    func.call @load_keys(%k, %v, %b, %kh, %lo, %n, %tables, %SQ, %SKV, %M, %knum, %kden, %vt)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !TILE, !TILE, !VT)
          -> ()
    %pending_out = scf.for %s = %c0 to %n step %c1 iter_args(%pending = %pending0) -> index {
      %n1 = arith.subi %n, %c1 : index
      %jj = arith.subi %n1, %s : index
      %j = arith.addi %lo, %jj : index
      %joined = scf.while (%p = %pending) : (index) -> index {
        %any = arith.cmpi ugt, %p, %c0 : index
        %last = arith.subi %p, %c1 : index
        %u = func.call @upto(%last, %OFF, %SKV) : (index, index, index) -> index
        %sees = arith.cmpi ugt, %u, %j : index
        %go = arith.andi %any, %sees : i1
        scf.condition(%go) %p : index
      } do {
      ^bb0(%p: index):
        %i = arith.subi %p, %c1 : index
        func.call @join_row(%do, %rows, %b, %kh, %i, %SQ, %T, %w)
            : (!O, !SCRATCH, index, index, index, index, !STATE, !VEC) -> ()
        scf.yield %i : index
      }
      func.call @state_dot(%T, %vt, %jj, %dkt, %jj) : (!STATE, !VT, index, !TILE, index) -> ()
      scf.for %c = %c0 to %D step %c8 {
        %w8 = vector.load %w[%c] : !VEC, !V8
        vector.store %w8, %dkh[%jj, %c] : !TILE, !V8
      }
      func.call @state_t_dot(%T, %knum, %jj, %dvt, %jj) : (!STATE, !TILE, index, !VT, index) -> ()
      scf.yield %joined : index
    }
    func.call @finish_key_rows(%kden, %dkt, %dkh, %dvt, %n, %lo, %b, %kh, %tables, %SQ, %SKV,
                               %dk, %dv)
        : (!TILE, !TILE, !TILE, !VT, index, index, index, index, !SCRATCH, index, index, !K, !V)
          -> ()
    scf.yield %pending_out : index
  }
  return
}

// Row i of every head of KV head kh's group joins T and w:
// T += P_i g_i^T (g_i = dO_i / den_i), w += W_i.
func.func private @join_row(%do: !O, %rows: !SCRATCH, %b: index, %kh: index, %i: index,
                            %SQ: index, %T: !STATE, %w: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %HQ = arith.constant ${HQ} : index
  %GROUP = arith.constant ${GROUP} : index
  %RW = arith.constant ${RW} : index
  %zero = arith.constant 0.0 : f32
  %g_row = memref.alloca() {alignment = 64 : i64} : memref<${DV}xf32>
  scf.for %g = %c0 to %GROUP step %c1 {
    %hg = arith.muli %kh, %GROUP : index
    %h = arith.addi %hg, %g : index
    %bh = arith.muli %b, %HQ : index
    %bhh = arith.addi %bh, %h : index
    %row0 = arith.muli %bhh, %SQ : index
    %row = arith.addi %row0, %i : index
    %at = arith.muli %row, %RW : index
    %DW = arith.addi %at, %D : index
    %ra = arith.addi %DW, %D : index
    %rden = memref.load %rows[%ra] : !SCRATCH
    %live = arith.cmpf one, %rden, %zero : f32
    scf.if %live {
      %rden8 = vector.broadcast %rden : f32 to !V8
      scf.for %e = %c0 to %DV step %c8 {
        %do8 = vector.load %do[%b, %h, %i, %e] : !O, !IN8
        %dow = func.call @widen8(%do8) : (!IN8) -> !V8
        %g8 = arith.mulf %dow, %rden8 : !V8
        vector.store %g8, %g_row[%e] : memref<${DV}xf32>, !V8
      }
      scf.for %c = %c0 to %D step %c1 {
        %pa = arith.addi %at, %c : index
        %ps = memref.load %rows[%pa] : !SCRATCH
        %p8 = vector.broadcast %ps : f32 to !V8
        scf.for %e = %c0 to %DV step %c8 {
          %t8 = vector.load %T[%c, %e] : !STATE, !V8
          %g8 = vector.load %g_row[%e] : memref<${DV}xf32>, !V8
          %n8 = vector.fma %p8, %g8, %t8 : !V8
          vector.store %n8, %T[%c, %e] : !STATE, !V8
        }
      }
      scf.for %c = %c0 to %D step %c8 {
        %wa = arith.addi %DW, %c : index
        %x8 = vector.load %rows[%wa] : !SCRATCH, !V8
        %w8 = vector.load %w[%c] : !VEC, !V8
        %s8 = arith.addf %w8, %x8 : !V8
        vector.store %s8, %w[%c] : !VEC, !V8
      }
    }
  }
  return
}

// out[r, :] = sum_c x[xr, c] T[c, :] (T^T x), 32 columns at a time.
func.func private @state_t_dot(%T: !STATE, %x: !TILE, %xr: index, %out: !VT, %r: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %zero8 = arith.constant dense<0.0> : !V8
  scf.for %e = %c0 to %DV step %c8 {
    %acc = scf.for %c = %c0 to %D step %c1 iter_args(%a = %zero8) -> !V8 {
      %xs = memref.load %x[%xr, %c] : !TILE
      %x8 = vector.broadcast %xs : f32 to !V8
      %t8 = vector.load %T[%c, %e] : !STATE, !V8
      %n8 = vector.fma %x8, %t8, %a : !V8
      scf.yield %n8 : !V8
    }
    vector.store %acc, %out[%r, %e] : !VT, !V8
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
