// The matmul form of the x86 linear attention backward
// (templates/x86/linear_attention_backward.mlir) when it is not causal,
// put with its blocks in place of its `// @pejit-blocks` line: the types
// and parameters are the ones that file defines.
//
// Not causal, every row sees every key: S, z are one state per item (its
// KV head's keys), and T, w collect every row of the group before any key
// needs them, so no row scratch. In chunks of R rows or keys, each step a
// matmul (@gemm, templates/x86/linear_gemm.mlir):
//   S = K~^T V    (Kt . V per key chunk)          z = sum_j k^_j
//   dQ~ = G S^T   (G the chunk's rows g_i)        T += P^T G   (P: q~, or a)
//   dK~ = V T^T                                   dV = K~ T
// and per row the same factors as the row-by-row form (den, dden, the
// softmax_keys quotients), the chain by @finish_query_rows and
// @finish_key_rows.

// The whole backward of item (b, kh) in the matmul form.
func.func private @full_backward(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %dq: !Q, %dk: !K,
                                 %dv: !V, %tables: !SCRATCH, %b: index, %kh: index,
                                 %S: !STATE, %z: !VEC, %M: !VEC, %qnum: !TILE, %qden: !TILE,
                                 %knum: !TILE, %kden: !TILE, %dxt: !TILE, %dxh: !TILE,
                                 %vt: !VT, %gt: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %GROUP = arith.constant ${GROUP} : index
  %true = arith.constant true
  %false = arith.constant false
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %St = memref.alloca() {alignment = 64 : i64} : !STATE_T
  %T = memref.alloca() {alignment = 64 : i64} : !STATE
  %Tt = memref.alloca() {alignment = 64 : i64} : !STATE_T
  %w = memref.alloca() {alignment = 64 : i64} : !VEC
  %kt = memref.alloca() {alignment = 64 : i64} : !KT
  %pt = memref.alloca() {alignment = 64 : i64} : !TILE
  %ptt = memref.alloca() {alignment = 64 : i64} : !KT
  // Rows past a short chunk's last feed the matmuls (their results are
  // dropped): zeros, never stale stack bytes.
  func.call @zero_tiles(%qnum, %qden, %knum, %kden, %dxt, %kt)
      : (!TILE, !TILE, !TILE, !TILE, !TILE, !KT) -> ()
  func.call @zero_tiles(%dxh, %pt, %pt, %pt, %pt, %ptt)
      : (!TILE, !TILE, !TILE, !TILE, !TILE, !KT) -> ()
  scf.for %r = %c0 to %R step %c1 {
    scf.for %e = %c0 to %DV step %c8 {
      vector.store %zero8, %vt[%r, %e] : !VT, !V8
      vector.store %zero8, %gt[%r, %e] : !VT, !V8
    }
  }
  scf.for %c = %c0 to %D step %c8 {
    vector.store %zero8, %z[%c] : !VEC, !V8
    vector.store %zero8, %w[%c] : !VEC, !V8
  }
  %Sm = memref.cast %S : !STATE to !MAT
  %Stm = memref.cast %St : !STATE_T to !MAT
  %Tm = memref.cast %T : !STATE to !MAT
  %Ttm = memref.cast %Tt : !STATE_T to !MAT
  %ktm = memref.cast %kt : !KT to !MAT
  %pttm = memref.cast %ptt : !KT to !MAT
  %vtm = memref.cast %vt : !VT to !MAT
  %gtm = memref.cast %gt : !VT to !MAT
  %knm = memref.cast %knum : !TILE to !MAT
  %dxm = memref.cast %dxt : !TILE to !MAT
  // S = K~^T V, z = sum of k^ over every key (S stays 0 without keys).
  scf.for %c = %c0 to %D step %c1 {
    scf.for %e = %c0 to %DV step %c8 {
      vector.store %zero8, %S[%c, %e] : !STATE, !V8
    }
  }
  scf.for %j0 = %c0 to %SKV step %R {
    %left = arith.subi %SKV, %j0 : index
    %n = arith.minui %left, %R : index
    func.call @load_keys(%k, %v, %b, %kh, %j0, %n, %tables, %SQ, %SKV, %M, %knum, %kden, %vt)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !TILE, !TILE, !VT)
          -> ()
    func.call @transpose_tile(%knum, %kt) : (!TILE, !KT) -> ()
    %first = arith.cmpi eq, %j0, %c0 : index
    %acc = arith.xori %first, %true : i1
    func.call @gemm(%ktm, %vtm, %Sm, %D, %DV, %n, %acc)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    func.call @sum_rows(%kden, %n, %z) : (!TILE, index, !VEC) -> ()
  }
  func.call @transpose_state(%S, %St) : (!STATE, !STATE_T) -> ()
  // Per query head and chunk: G, dQ~ = G S^T, the chain, T += P^T G.
  %any_key = arith.cmpi ugt, %SKV, %c0 : index
  scf.for %g = %c0 to %GROUP step %c1 {
    %hg = arith.muli %kh, %GROUP : index
    %h = arith.addi %hg, %g : index
    scf.for %i0 = %c0 to %SQ step %R {
      %left = arith.subi %SQ, %i0 : index
      %nq = arith.minui %left, %R : index
      %nq1 = arith.addi %nq, %c1 : index
      %nq2 = arith.divui %nq1, %c2 : index
      %M2 = arith.muli %nq2, %c2 : index
      %qrows = memref.subview %q[%b, %h, %i0, 0] [1, 1, %nq, ${D}] [1, 1, 1, 1] : !Q to !ROWS
      func.call @load_query_rows(%qrows, %nq, %i0, %b, %tables, %SQ, %SKV, %qnum, %qden)
          : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
      scf.for %r = %c0 to %nq step %c1 {
        %i = arith.addi %i0, %r : index
        func.call @row_gradient(%qden, %r, %any_key, %z, %o, %do, %b, %h, %i, %gt, %dxh, %w)
            : (!TILE, index, i1, !VEC, !O, !O, index, index, index, !VT, !TILE, !VEC) -> ()
      }
      func.call @gemm(%gtm, %Stm, %dxm, %M2, %D, %DV, %false)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
      %p = func.call @row_factors_after(%qnum, %nq, %z, %dxt, %pt, %w)
          : (!TILE, index, !VEC, !TILE, !TILE, !VEC) -> !TILE
      func.call @transpose_tile(%p, %ptt) : (!TILE, !KT) -> ()
      %first = arith.cmpi eq, %i0, %c0 : index
      %first_head = arith.cmpi eq, %g, %c0 : index
      %start = arith.andi %first, %first_head : i1
      %acc = arith.xori %start, %true : i1
      func.call @gemm(%pttm, %gtm, %Tm, %D, %DV, %nq, %acc)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
      func.call @finish_query_rows(%qden, %dxt, %dxh, %nq, %i0, %b, %h, %tables, %SQ, %SKV, %dq)
          : (!TILE, !TILE, !TILE, index, index, index, index, !SCRATCH, index, index, !Q) -> ()
    }
  }
  %no_rows = arith.cmpi eq, %SQ, %c0 : index
  scf.if %no_rows { // no row: T = 0 (the gemm above never ran)
    scf.for %c = %c0 to %D step %c1 {
      scf.for %e = %c0 to %DV step %c8 {
        vector.store %zero8, %T[%c, %e] : !STATE, !V8
      }
    }
  }
  func.call @transpose_state(%T, %Tt) : (!STATE, !STATE_T) -> ()
  // Per key chunk: dK~ = V T^T, dV = K~ T, dK^ = w; the chain.
  scf.for %j0 = %c0 to %SKV step %R {
    %left = arith.subi %SKV, %j0 : index
    %n = arith.minui %left, %R : index
    %n1 = arith.addi %n, %c1 : index
    %n2 = arith.divui %n1, %c2 : index
    %N2 = arith.muli %n2, %c2 : index
    func.call @load_keys(%k, %v, %b, %kh, %j0, %n, %tables, %SQ, %SKV, %M, %knum, %kden, %vt)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !TILE, !TILE, !VT)
          -> ()
    func.call @gemm(%vtm, %Ttm, %dxm, %N2, %D, %DV, %false)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    func.call @gemm(%knm, %Tm, %gtm, %N2, %DV, %D, %false)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    scf.for %r = %c0 to %n step %c1 {
      scf.for %c = %c0 to %D step %c8 {
        %w8 = vector.load %w[%c] : !VEC, !V8
        vector.store %w8, %dxh[%r, %c] : !TILE, !V8
      }
    }
    func.call @finish_key_rows(%kden, %dxt, %dxh, %gt, %n, %j0, %b, %kh, %tables, %SQ, %SKV,
                               %dk, %dv)
        : (!TILE, !TILE, !TILE, !VT, index, index, index, index, !SCRATCH, index, index, !K, !V)
          -> ()
  }
  return
}

// z += rows [0, n) of tile.
func.func private @sum_rows(%tile: !TILE, %n: index, %z: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  scf.for %c = %c0 to %D step %c8 {
    %z0 = vector.load %z[%c] : !VEC, !V8
    %z1 = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %z0) -> !V8 {
      %x8 = vector.load %tile[%j, %c] : !TILE, !V8
      %s8 = arith.addf %acc, %x8 : !V8
      scf.yield %s8 : !V8
    }
    vector.store %z1, %z[%c] : !VEC, !V8
  }
  return
}

// St[e, c] = S[c, e].
func.func private @transpose_state(%S: !STATE, %St: !STATE_T) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  scf.for %c = %c0 to %D step %c1 {
    scf.for %e = %c0 to %DV step %c1 {
      %x = memref.load %S[%c, %e] : !STATE
      memref.store %x, %St[%e, %c] : !STATE_T
    }
  }
  return
}

// Row r before the matmul: g = dO / den into gt[r] (softmax_keys, identity:
// den 1), and without softmax_keys dq^ = dden z into dxh[r] and w +=
// dden q^ (dden = -(g . o), 0 for identity). No key: g = 0.
func.func private @row_gradient(%qden: !TILE, %r: index, %any_key: i1, %z: !VEC, %o: !O,
                                %do: !O, %b: index, %h: index, %i: index, %gt: !VT, %dxh: !TILE,
                                %w: !VEC) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %normalize = arith.constant ${NORMALIZE}
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %den_acc = scf.for %c = %c0 to %D step %c8 iter_args(%acc = %zero8) -> !V8 {
    %q8 = vector.load %qden[%r, %c] : !TILE, !V8
    %z8 = vector.load %z[%c] : !VEC, !V8
    %next = vector.fma %q8, %z8, %acc : !V8
    scf.yield %next : !V8
  }
  %den_sum = vector.reduction <add>, %den_acc : !V8 into f32
  %den = arith.select %normalize, %den_sum, %one : f32
  %nonzero = arith.cmpf one, %den, %zero : f32
  %valid = arith.andi %any_key, %nonzero : i1
  %inv = arith.divf %one, %den : f32
  %rden = arith.select %valid, %inv, %zero : f32
  %rden8 = vector.broadcast %rden : f32 to !V8
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
  %true = arith.constant true
  %normalized_rows = arith.xori %softmax_keys, %true : i1
  scf.if %normalized_rows {
    scf.for %c = %c0 to %D step %c8 {
      %z8 = vector.load %z[%c] : !VEC, !V8
      %h8 = arith.mulf %dden8, %z8 : !V8
      vector.store %h8, %dxh[%r, %c] : !TILE, !V8
      %qh8 = vector.load %qden[%r, %c] : !TILE, !V8
      %w8 = vector.load %w[%c] : !VEC, !V8
      %n8 = vector.fma %dden8, %qh8, %w8 : !V8
      vector.store %n8, %w[%c] : !VEC, !V8
    }
  }
  return
}

// After dQ~ = G S^T: the chunk's P (q~ itself, or for softmax_keys a = q / Z
// in pt, with dq = dq~ / Z in dqt, dq^ = 0 and w += -a dq where Z > 0).
func.func private @row_factors_after(%qnum: !TILE, %nq: index, %z: !VEC, %dqt: !TILE,
                                     %pt: !TILE, %w: !VEC) -> !TILE {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %zero8 = arith.constant dense<0.0> : !V8
  %p = scf.if %softmax_keys -> !TILE {
    scf.for %r = %c0 to %nq step %c1 {
      scf.for %c = %c0 to %D step %c8 {
        %z8 = vector.load %z[%c] : !VEC, !V8
        %q8 = vector.load %qnum[%r, %c] : !TILE, !V8
        %t8 = vector.load %dqt[%r, %c] : !TILE, !V8
        %some = arith.cmpf ogt, %z8, %zero8 : !V8
        %qz = arith.divf %q8, %z8 : !V8
        %a8 = arith.select %some, %qz, %zero8 : vector<8xi1>, !V8
        %tz = arith.divf %t8, %z8 : !V8
        %dq8 = arith.select %some, %tz, %zero8 : vector<8xi1>, !V8
        vector.store %a8, %pt[%r, %c] : !TILE, !V8
        vector.store %dq8, %dqt[%r, %c] : !TILE, !V8
        %w8 = vector.load %w[%c] : !VEC, !V8
        %adq = arith.mulf %a8, %dq8 : !V8
        %n8 = arith.subf %w8, %adq : !V8
        vector.store %n8, %w[%c] : !VEC, !V8
      }
    }
    scf.yield %pt : !TILE
  } else {
    scf.yield %qnum : !TILE
  }
  return %p : !TILE
}
