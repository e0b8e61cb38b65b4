// The causal matmul form of the x86 linear attention backward
// (templates/x86/linear_attention_backward.mlir), put with its blocks in
// place of its `// @pejit-blocks` line: the types and parameters are the
// ones that file defines.
//
// Row i sees keys j < u(i), u(i) = clamp(i + skv - sq + 1, 0, skv), which
// grows by at most one key per row. In chunks of R rows or keys, each step
// a matmul (@gemm):
//
// Per query head, rows in order (St = S^T, the keys before the chunk):
//   hi = u(i0 + nq - 1), lo = max(seen, hi - R) <= u(i0): keys [seen, lo)
//   join St first, the chunk's own keys [lo, hi) (at most R) are masked
//   per row:
//   dQ~ = G St + mask(G V_own^T) K~_own      row r keeps own keys t < u(i0 + r) - lo
//   z_i = z_lo + sum of the own k^ the row sees (a running sum)
// and each row's P, W, 1/den into the rows scratch, as the row-by-row form.
// Per item, keys from the last chunk [j0, j1) (T: the rows that see all of
// it, every head of the group; the rows that see part of it, fewer than R
// per head, masked):
//   dK~ = V T^T + mask(V G_part^T) P_part     key t kept for rows p >= first(t)
//   dV  = K~ T + mask(K~ P_part^T) G_part      dK^ = w + the partial rows' W
// then those partial rows join T and w for the chunks before.

// Causal: the whole backward of item (b, kh).
func.func private @causal_backward(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %dq: !Q, %dk: !K,
                                   %dv: !V, %tables: !SCRATCH, %rows: !SCRATCH, %b: index,
                                   %kh: index, %M: !VEC, %qnum: !TILE, %qden: !TILE,
                                   %knum: !TILE, %kden: !TILE, %dxt: !TILE, %dxh: !TILE,
                                   %vt: !VT, %gt: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %GROUP = arith.constant ${GROUP} : index
  %zero8 = arith.constant dense<0.0> : !V8
  %z = memref.alloca() {alignment = 64 : i64} : !VEC
  %St = memref.alloca() {alignment = 64 : i64} : !STATE_T
  %T = memref.alloca() {alignment = 64 : i64} : !STATE
  %zt = memref.alloca() {alignment = 64 : i64} : !TILE
  %vtt = memref.alloca() {alignment = 64 : i64} : !VTT
  %sc = memref.alloca() {alignment = 64 : i64} : !SC
  %dvt = memref.alloca() {alignment = 64 : i64} : !VT
  %ptt = memref.alloca() {alignment = 64 : i64} : !KT
  %lim = memref.alloca() : !RI
  // Rows past a short chunk's last feed the matmuls (their results are
  // dropped): zeros, never stale stack bytes.
  func.call @zero_tiles(%qnum, %qden, %knum, %kden, %dxt, %ptt)
      : (!TILE, !TILE, !TILE, !TILE, !TILE, !KT) -> ()
  func.call @zero_tiles(%dxh, %zt, %zt, %zt, %zt, %ptt)
      : (!TILE, !TILE, !TILE, !TILE, !TILE, !KT) -> ()
  func.call @zero_vt(%vt) : (!VT) -> ()
  func.call @zero_vt(%gt) : (!VT) -> ()
  func.call @zero_vt(%dvt) : (!VT) -> ()
  func.call @zero_mat(%vtt, %sc) : (!VTT, !SC) -> ()
  scf.for %g = %c0 to %GROUP step %c1 {
    %hg = arith.muli %kh, %GROUP : index
    %h = arith.addi %hg, %g : index
    func.call @causal_queries(%q, %k, %v, %o, %do, %dq, %tables, %rows, %b, %kh, %h, %M, %z,
                              %St, %qnum, %qden, %knum, %kden, %dxt, %dxh, %vt, %gt, %zt, %vtt,
                              %sc, %lim)
        : (!Q, !K, !V, !O, !O, !Q, !SCRATCH, !SCRATCH, index, index, index, !VEC, !VEC,
           !STATE_T, !TILE, !TILE, !TILE, !TILE, !TILE, !TILE, !VT, !VT, !TILE, !VTT, !SC,
           !RI) -> ()
  }
  func.call @causal_keys(%q, %k, %v, %do, %dk, %dv, %tables, %rows, %b, %kh, %M, %z, %T, %St,
                         %knum, %kden, %dxt, %dxh, %vt, %gt, %zt, %dvt, %ptt, %vtt, %sc)
      : (!Q, !K, !V, !O, !K, !V, !SCRATCH, !SCRATCH, index, index, !VEC, !VEC, !STATE,
         !STATE_T, !TILE, !TILE, !TILE, !TILE, !VT, !VT, !TILE, !VT, !KT, !VTT, !SC) -> ()
  return
}

func.func private @zero_vt(%t: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %DV = arith.constant ${DV} : index
  %zero8 = arith.constant dense<0.0> : !V8
  scf.for %r = %c0 to %R step %c1 {
    scf.for %e = %c0 to %DV step %c8 {
      vector.store %zero8, %t[%r, %e] : !VT, !V8
    }
  }
  return
}

func.func private @zero_mat(%vtt: !VTT, %sc: !SC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %DV = arith.constant ${DV} : index
  %zero8 = arith.constant dense<0.0> : !V8
  scf.for %e = %c0 to %DV step %c1 {
    scf.for %r = %c0 to %R step %c8 {
      vector.store %zero8, %vtt[%e, %r] : !VTT, !V8
    }
  }
  scf.for %a = %c0 to %R step %c1 {
    scf.for %r = %c0 to %R step %c8 {
      vector.store %zero8, %sc[%a, %r] : !SC, !V8
    }
  }
  return
}

// dst[c, r] = src[r, c] for r < rows, c < cols.
func.func private @transpose_mat(%src: !MAT, %dst: !MAT, %rows: index, %cols: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %r = %c0 to %rows step %c1 {
    scf.for %c = %c0 to %cols step %c1 {
      %x = memref.load %src[%r, %c] : !MAT
      memref.store %x, %dst[%c, %r] : !MAT
    }
  }
  return
}

// Keys [from, to) join St (+= V^T K~) and z, R at a time.
func.func private @join_keys(%k: !K, %v: !V, %b: index, %kh: index, %from: index, %to: index,
                             %tables: !SCRATCH, %sq: index, %skv: index, %M: !VEC, %z: !VEC,
                             %St: !STATE_T, %knum: !TILE, %kden: !TILE, %vt: !VT,
                             %vtt: !VTT) {
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %true = arith.constant true
  %Stm = memref.cast %St : !STATE_T to !MAT
  %vtm = memref.cast %vt : !VT to !MAT
  %vttm = memref.cast %vtt : !VTT to !MAT
  %knm = memref.cast %knum : !TILE to !MAT
  scf.for %j0 = %from to %to step %R {
    %left = arith.subi %to, %j0 : index
    %n = arith.minui %left, %R : index
    func.call @load_keys(%k, %v, %b, %kh, %j0, %n, %tables, %sq, %skv, %M, %knum, %kden, %vt)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !TILE, !TILE, !VT)
          -> ()
    func.call @transpose_mat(%vtm, %vttm, %n, %DV) : (!MAT, !MAT, index, index) -> ()
    func.call @gemm(%vttm, %knm, %Stm, %DV, %D, %n, %true)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    func.call @sum_rows(%kden, %n, %z) : (!TILE, index, !VEC) -> ()
  }
  return
}

// One query head's rows in chunks: dq, and each row's P, W, 1/den.
func.func private @causal_queries(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %dq: !Q,
                                  %tables: !SCRATCH, %rows: !SCRATCH, %b: index, %kh: index,
                                  %h: index, %M: !VEC, %z: !VEC, %St: !STATE_T, %qnum: !TILE,
                                  %qden: !TILE, %knum: !TILE, %kden: !TILE, %dxt: !TILE,
                                  %dxh: !TILE, %vt: !VT, %gt: !VT, %zt: !TILE, %vtt: !VTT,
                                  %sc: !SC, %lim: !RI) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %true = arith.constant true
  %false = arith.constant false
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  scf.for %e = %c0 to %DV step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      vector.store %zero8, %St[%e, %c] : !STATE_T, !V8
    }
  }
  scf.for %c = %c0 to %D step %c8 {
    vector.store %zero8, %z[%c] : !VEC, !V8
  }
  %Stm = memref.cast %St : !STATE_T to !MAT
  %gtm = memref.cast %gt : !VT to !MAT
  %vtm = memref.cast %vt : !VT to !MAT
  %vttm = memref.cast %vtt : !VTT to !MAT
  %scm = memref.cast %sc : !SC to !MAT
  %knm = memref.cast %knum : !TILE to !MAT
  %dxm = memref.cast %dxt : !TILE to !MAT
  %last = scf.for %i0 = %c0 to %SQ step %R iter_args(%seen = %c0) -> index {
    %left = arith.subi %SQ, %i0 : index
    %nq = arith.minui %left, %R : index
    %nq1 = arith.addi %nq, %c1 : index
    %nq2 = arith.divui %nq1, %c2 : index
    %M2 = arith.muli %nq2, %c2 : index
    %last_row0 = arith.addi %i0, %nq : index
    %last_row = arith.subi %last_row0, %c1 : index
    %hi = func.call @upto(%last_row, %OFF, %SKV) : (index, index, index) -> index
    // The chunk's own keys start at lo = max(seen, hi - R) <= u(i0): the
    // keys since the last chunk (one, when sq = skv) join the masked part
    // instead of a pass of their own, and there are at most R of them.
    %hi_r = arith.subi %hi, %R : index
    %lo = arith.maxsi %seen, %hi_r : index
    func.call @join_keys(%k, %v, %b, %kh, %seen, %lo, %tables, %SQ, %SKV, %M, %z, %St, %knum,
                         %kden, %vt, %vtt)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !VEC, !STATE_T,
           !TILE, !TILE, !VT, !VTT) -> ()
    %qrows = memref.subview %q[%b, %h, %i0, 0] [1, 1, %nq, ${D}] [1, 1, 1, 1] : !Q to !ROWS
    func.call @load_query_rows(%qrows, %nq, %i0, %b, %tables, %SQ, %SKV, %qnum, %qden)
        : (!ROWS, index, index, index, !SCRATCH, index, index, !TILE, !TILE) -> ()
    %own = arith.subi %hi, %lo : index
    %any_own = arith.cmpi ugt, %own, %c0 : index
    scf.if %any_own {
      func.call @load_keys(%k, %v, %b, %kh, %lo, %own, %tables, %SQ, %SKV, %M, %knum, %kden,
                           %vt)
          : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !TILE, !TILE,
             !VT) -> ()
      func.call @transpose_mat(%vtm, %vttm, %own, %DV) : (!MAT, !MAT, index, index) -> ()
    }
    // Per row: its z (the running sum over the own keys it sees), then g,
    // dden, dq^, and P, W, 1/den into the rows scratch.
    scf.for %r = %c0 to %nq step %c1 {
      %i = arith.addi %i0, %r : index
      %u = func.call @upto(%i, %OFF, %SKV) : (index, index, index) -> index
      %sees = arith.subi %u, %lo : index
      memref.store %sees, %lim[%r] : !RI
      scf.for %c = %c0 to %D step %c8 {
        %z8 = vector.load %z[%c] : !VEC, !V8
        %s8 = scf.for %t = %c0 to %sees step %c1 iter_args(%acc = %z8) -> !V8 {
          %k8 = vector.load %kden[%t, %c] : !TILE, !V8
          %n8 = arith.addf %acc, %k8 : !V8
          scf.yield %n8 : !V8
        }
        vector.store %s8, %zt[%r, %c] : !TILE, !V8
      }
      %visible = arith.cmpi ugt, %u, %c0 : index
      func.call @causal_row(%qnum, %qden, %r, %visible, %zt, %o, %do, %b, %h, %i, %gt, %dxh,
                            %rows)
          : (!TILE, !TILE, index, i1, !TILE, !O, !O, index, index, index, !VT, !TILE,
             !SCRATCH) -> ()
    }
    // dQ~ = G St + mask(G V_own^T) K~_own
    func.call @gemm(%gtm, %Stm, %dxm, %M2, %D, %DV, %false)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    scf.if %any_own {
      func.call @gemm(%gtm, %vttm, %scm, %M2, %R, %DV, %false)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
      func.call @mask_scores(%sc, %nq, %lim) : (!SC, index, !RI) -> ()
      func.call @gemm(%scm, %knm, %dxm, %M2, %D, %own, %true)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    }
    func.call @causal_softmax_rows(%qnum, %nq, %zt, %dxt, %i0, %b, %h, %SQ, %rows)
        : (!TILE, index, !TILE, !TILE, index, index, index, index, !SCRATCH) -> ()
    func.call @finish_query_rows(%qden, %dxt, %dxh, %nq, %i0, %b, %h, %tables, %SQ, %SKV, %dq)
        : (!TILE, !TILE, !TILE, index, index, index, index, !SCRATCH, index, index, !Q) -> ()
    // The own keys join St and z.
    scf.if %any_own {
      func.call @gemm(%vttm, %knm, %Stm, %DV, %D, %own, %true)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
      func.call @sum_rows(%kden, %own, %z) : (!TILE, index, !VEC) -> ()
    }
    scf.yield %hi : index
  }
  return
}

// Row r (row i of head h) before the matmuls: den = q^ . z_i (zt[r]), g =
// dO / den into gt[r], dden = -(g . o), dq^ = dden z_i into dxh[r]; its P
// (q~), W (dden q^) and 1/den into the rows scratch (softmax_keys: a and
// dZ come after the matmuls, @causal_softmax_rows).
func.func private @causal_row(%qnum: !TILE, %qden: !TILE, %r: index, %visible: i1, %zt: !TILE,
                              %o: !O, %do: !O, %b: index, %h: index, %i: index, %gt: !VT,
                              %dxh: !TILE, %rows: !SCRATCH) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %HQ = arith.constant ${HQ} : index
  %RW = arith.constant ${RW} : index
  %normalize = arith.constant ${NORMALIZE}
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %o, %c2 : !O
  %at = func.call @row_at(%b, %h, %i, %SQ) : (index, index, index, index) -> index
  %DW = arith.addi %at, %D : index
  %den_acc = scf.for %c = %c0 to %D step %c8 iter_args(%acc = %zero8) -> !V8 {
    %q8 = vector.load %qden[%r, %c] : !TILE, !V8
    %z8 = vector.load %zt[%r, %c] : !TILE, !V8
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
  scf.for %c = %c0 to %D step %c8 {
    %z8 = vector.load %zt[%r, %c] : !TILE, !V8
    %h8 = arith.mulf %dden8, %z8 : !V8
    vector.store %h8, %dxh[%r, %c] : !TILE, !V8
    %q8 = vector.load %qnum[%r, %c] : !TILE, !V8
    %pa = arith.addi %at, %c : index
    vector.store %q8, %rows[%pa] : !SCRATCH, !V8
    %qh8 = vector.load %qden[%r, %c] : !TILE, !V8
    %w8 = arith.mulf %dden8, %qh8 : !V8
    %wa = arith.addi %DW, %c : index
    vector.store %w8, %rows[%wa] : !SCRATCH, !V8
  }
  %ra = arith.addi %DW, %D : index
  memref.store %rden, %rows[%ra] : !SCRATCH
  return
}

// softmax_keys, after dQ~: a = q / Z_i and dq = dq~ / Z_i where Z_i > 0 (dq
// into dqt), dZ = -a dq; P = a and W = dZ into the rows scratch.
func.func private @causal_softmax_rows(%qnum: !TILE, %nq: index, %zt: !TILE, %dqt: !TILE,
                                       %i0: index, %b: index, %h: index, %SQ: index,
                                       %rows: !SCRATCH) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %HQ = arith.constant ${HQ} : index
  %RW = arith.constant ${RW} : index
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %zero8 = arith.constant dense<0.0> : !V8
  scf.if %softmax_keys {
    scf.for %r = %c0 to %nq step %c1 {
      %i = arith.addi %i0, %r : index
      %at = func.call @row_at(%b, %h, %i, %SQ) : (index, index, index, index) -> index
      %DW = arith.addi %at, %D : index
      scf.for %c = %c0 to %D step %c8 {
        %z8 = vector.load %zt[%r, %c] : !TILE, !V8
        %q8 = vector.load %qnum[%r, %c] : !TILE, !V8
        %t8 = vector.load %dqt[%r, %c] : !TILE, !V8
        %some = arith.cmpf ogt, %z8, %zero8 : !V8
        %qz = arith.divf %q8, %z8 : !V8
        %a8 = arith.select %some, %qz, %zero8 : vector<8xi1>, !V8
        %tz = arith.divf %t8, %z8 : !V8
        %dq8 = arith.select %some, %tz, %zero8 : vector<8xi1>, !V8
        vector.store %dq8, %dqt[%r, %c] : !TILE, !V8
        %adq = arith.mulf %a8, %dq8 : !V8
        %dz8 = arith.negf %adq : !V8
        %pa = arith.addi %at, %c : index
        vector.store %a8, %rows[%pa] : !SCRATCH, !V8
        %wa = arith.addi %DW, %c : index
        vector.store %dz8, %rows[%wa] : !SCRATCH, !V8
      }
    }
  }
  return
}
