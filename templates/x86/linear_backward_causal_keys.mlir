// The reverse half of the causal matmul form of the x86 linear attention
// backward (templates/x86/linear_backward_causal.mlir has the other half and
// the math), put with its blocks in place of the template's
// `// @pejit-blocks` line: keys from the last chunk [lo, hi), T and w
// holding the rows that see all of it (every head of the group), the rows
// that see part of it (fewer than R per head) masked:
//   dK~ = V T^T + mask(V G_part^T) P_part     dV = K~ T + mask(K~ P_part^T) G_part
//   dK^ = w + the W of the partial rows that see each key
// P, W and 1/den come from the rows scratch the query half wrote.

// The rows scratch's offset of row i of head h: ((b HQ + h) SQ + i) RW.
func.func private @row_at(%b: index, %h: index, %i: index, %SQ: index) -> index {
  %HQ = arith.constant ${HQ} : index
  %RW = arith.constant ${RW} : index
  %bh = arith.muli %b, %HQ : index
  %bhh = arith.addi %bh, %h : index
  %row0 = arith.muli %bhh, %SQ : index
  %row = arith.addi %row0, %i : index
  %at = arith.muli %row, %RW : index
  return %at : index
}

// Rows [i0, i0 + n) of head h's P (q~ or a) in the rows scratch, as a
// matrix [n, D] (rows RW floats apart).
func.func private @p_rows(%rows: !SCRATCH, %b: index, %h: index, %i0: index, %n: index,
                          %SQ: index) -> !MAT {
  %at = func.call @row_at(%b, %h, %i0, %SQ) : (index, index, index, index) -> index
  %view = memref.reinterpret_cast %rows to offset: [%at], sizes: [%n, ${D}], strides: [${RW}, 1]
      : !SCRATCH to memref<?x${D}xf32, strided<[${RW}, 1], offset: ?>>
  %m = memref.cast %view : memref<?x${D}xf32, strided<[${RW}, 1], offset: ?>> to !MAT
  return %m : !MAT
}

// g = dO / den of rows [i0, i0 + n) of head h into gt's first n rows.
func.func private @g_rows(%do: !O, %rows: !SCRATCH, %b: index, %h: index, %i0: index,
                          %n: index, %SQ: index, %gt: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  scf.for %p = %c0 to %n step %c1 {
    %i = arith.addi %i0, %p : index
    %at = func.call @row_at(%b, %h, %i, %SQ) : (index, index, index, index) -> index
    %D2 = arith.addi %D, %D : index
    %ra = arith.addi %at, %D2 : index
    %rden = memref.load %rows[%ra] : !SCRATCH
    %rden8 = vector.broadcast %rden : f32 to !V8
    scf.for %e = %c0 to %DV step %c8 {
      %do8 = vector.load %do[%b, %h, %i, %e] : !O, !IN8
      %dow = func.call @widen8(%do8) : (!IN8) -> !V8
      %g8 = arith.mulf %dow, %rden8 : !V8
      vector.store %g8, %gt[%p, %e] : !VT, !V8
    }
  }
  return
}

// Rows [from, to) of every head of the group join T (+= P^T G) and w (+= W),
// R rows at a time.
func.func private @join_rows(%do: !O, %rows: !SCRATCH, %b: index, %kh: index, %from: index,
                             %to: index, %SQ: index, %T: !STATE, %w: !VEC, %gt: !VT,
                             %ptt: !KT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %GROUP = arith.constant ${GROUP} : index
  %true = arith.constant true
  %Tm = memref.cast %T : !STATE to !MAT
  %gtm = memref.cast %gt : !VT to !MAT
  %pttm = memref.cast %ptt : !KT to !MAT
  scf.for %g = %c0 to %GROUP step %c1 {
    %hg = arith.muli %kh, %GROUP : index
    %h = arith.addi %hg, %g : index
    scf.for %i0 = %from to %to step %R {
      %left = arith.subi %to, %i0 : index
      %n = arith.minui %left, %R : index
      func.call @g_rows(%do, %rows, %b, %h, %i0, %n, %SQ, %gt)
          : (!O, !SCRATCH, index, index, index, index, index, !VT) -> ()
      %pv = func.call @p_rows(%rows, %b, %h, %i0, %n, %SQ)
          : (!SCRATCH, index, index, index, index, index) -> !MAT
      func.call @transpose_mat(%pv, %pttm, %n, %D) : (!MAT, !MAT, index, index) -> ()
      func.call @gemm(%pttm, %gtm, %Tm, %D, %DV, %n, %true)
          : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
      scf.for %p = %c0 to %n step %c1 {
        %i = arith.addi %i0, %p : index
        %at = func.call @row_at(%b, %h, %i, %SQ) : (index, index, index, index) -> index
        %DW = arith.addi %at, %D : index
        scf.for %c = %c0 to %D step %c8 {
          %wa = arith.addi %DW, %c : index
          %x8 = vector.load %rows[%wa] : !SCRATCH, !V8
          %w8 = vector.load %w[%c] : !VEC, !V8
          %s8 = arith.addf %w8, %x8 : !V8
          vector.store %s8, %w[%c] : !VEC, !V8
        }
      }
    }
  }
  return
}

// sc[t, p] = 0 where partial row ipart + p does not see key lo + t
// (t < R, p < np): row i sees keys j < u(i).
func.func private @mask_partial(%sc: !SC, %np: index, %lo: index, %ipart: index, %off: index,
                                %skv: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %R = arith.constant ${R} : index
  %zero = arith.constant 0.0 : f32
  scf.for %p = %c0 to %np step %c1 {
    %i = arith.addi %ipart, %p : index
    %u = func.call @upto(%i, %off, %skv) : (index, index, index) -> index
    %sees = arith.subi %u, %lo : index
    scf.for %t = %sees to %R step %c1 {
      memref.store %zero, %sc[%t, %p] : !SC
    }
  }
  return
}

// The reverse part: keys from the last chunk; T, w from zero.
func.func private @causal_keys(%q: !Q, %k: !K, %v: !V, %do: !O, %dk: !K, %dv: !V,
                               %tables: !SCRATCH, %rows: !SCRATCH, %b: index, %kh: index,
                               %M: !VEC, %w: !VEC, %T: !STATE, %Tt: !STATE_T, %knum: !TILE,
                               %kden: !TILE, %dkt: !TILE, %dkh: !TILE, %vt: !VT, %gt: !VT,
                               %unused: !TILE, %dvt: !VT, %ptt: !KT, %gtt: !VTT, %sc: !SC) {
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
  %OFF = arith.subi %SKV, %SQ : index
  scf.for %c = %c0 to %D step %c1 {
    scf.for %e = %c0 to %DV step %c8 {
      vector.store %zero8, %T[%c, %e] : !STATE, !V8
    }
  }
  scf.for %c = %c0 to %D step %c8 {
    vector.store %zero8, %w[%c] : !VEC, !V8
  }
  %Tm = memref.cast %T : !STATE to !MAT
  %Ttm = memref.cast %Tt : !STATE_T to !MAT
  %vtm = memref.cast %vt : !VT to !MAT
  %gtm = memref.cast %gt : !VT to !MAT
  %gttm = memref.cast %gtt : !VTT to !MAT
  %pttm = memref.cast %ptt : !KT to !MAT
  %knm = memref.cast %knum : !TILE to !MAT
  %dkm = memref.cast %dkt : !TILE to !MAT
  %dvm = memref.cast %dvt : !VT to !MAT
  %scm = memref.cast %sc : !SC to !MAT
  %R1 = arith.subi %R, %c1 : index
  %skv_up = arith.addi %SKV, %R1 : index
  %chunks = arith.divui %skv_up, %R : index
  %final = scf.for %t = %c0 to %chunks step %c1 iter_args(%pending = %SQ) -> index {
    %back = arith.muli %t, %R : index
    %hi = arith.subi %SKV, %back : index
    %lo0 = arith.subi %hi, %R : index
    %neg = arith.cmpi slt, %lo0, %c0 : index
    %lo = arith.select %neg, %c0, %lo0 : index
    %n = arith.subi %hi, %lo : index
    %n1 = arith.addi %n, %c1 : index
    %n2 = arith.divui %n1, %c2 : index
    %N2 = arith.muli %n2, %c2 : index
    // Rows that see the whole chunk (u(i) >= hi: i >= hi - OFF - 1) join.
    %full0 = arith.subi %hi, %OFF : index
    %full1 = arith.subi %full0, %c1 : index
    %full2 = arith.maxsi %full1, %c0 : index
    %full3 = arith.minsi %full2, %SQ : index
    %ifull = arith.minsi %full3, %pending : index
    func.call @join_rows(%do, %rows, %b, %kh, %ifull, %pending, %SQ, %T, %w, %gt, %ptt)
        : (!O, !SCRATCH, index, index, index, index, index, !STATE, !VEC, !VT, !KT) -> ()
    // Rows that see part of it: u(i) > lo, i.e. i >= lo - OFF.
    %part0 = arith.subi %lo, %OFF : index
    %part1 = arith.maxsi %part0, %c0 : index
    %ipart = arith.minsi %part1, %ifull : index
    %np = arith.subi %ifull, %ipart : index
    func.call @load_keys(%k, %v, %b, %kh, %lo, %n, %tables, %SQ, %SKV, %M, %knum, %kden, %vt)
        : (!K, !V, index, index, index, index, !SCRATCH, index, index, !VEC, !TILE, !TILE, !VT)
          -> ()
    func.call @transpose_state(%T, %Tt) : (!STATE, !STATE_T) -> ()
    func.call @gemm(%vtm, %Ttm, %dkm, %N2, %D, %DV, %false)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    func.call @gemm(%knm, %Tm, %dvm, %N2, %DV, %D, %false)
        : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
    scf.for %r = %c0 to %n step %c1 {
      scf.for %c = %c0 to %D step %c8 {
        %w8 = vector.load %w[%c] : !VEC, !V8
        vector.store %w8, %dkh[%r, %c] : !TILE, !V8
      }
    }
    %any_part = arith.cmpi ugt, %np, %c0 : index
    scf.if %any_part {
      scf.for %g = %c0 to %GROUP step %c1 {
        %hg = arith.muli %kh, %GROUP : index
        %h = arith.addi %hg, %g : index
        func.call @g_rows(%do, %rows, %b, %h, %ipart, %np, %SQ, %gt)
            : (!O, !SCRATCH, index, index, index, index, index, !VT) -> ()
        %pv = func.call @p_rows(%rows, %b, %h, %ipart, %np, %SQ)
            : (!SCRATCH, index, index, index, index, index) -> !MAT
        // dK~ += mask(V G^T) P
        func.call @transpose_mat(%gtm, %gttm, %np, %DV) : (!MAT, !MAT, index, index) -> ()
        func.call @gemm(%vtm, %gttm, %scm, %N2, %R, %DV, %false)
            : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
        func.call @mask_partial(%sc, %np, %lo, %ipart, %OFF, %SKV)
            : (!SC, index, index, index, index, index) -> ()
        func.call @gemm(%scm, %pv, %dkm, %N2, %D, %np, %true)
            : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
        // dV += mask(K~ P^T) G
        func.call @transpose_mat(%pv, %pttm, %np, %D) : (!MAT, !MAT, index, index) -> ()
        func.call @gemm(%knm, %pttm, %scm, %N2, %R, %D, %false)
            : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
        func.call @mask_partial(%sc, %np, %lo, %ipart, %OFF, %SKV)
            : (!SC, index, index, index, index, index) -> ()
        func.call @gemm(%scm, %gtm, %dvm, %N2, %DV, %np, %true)
            : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
        // dK^ += the W of the partial rows that see each key.
        scf.for %p = %c0 to %np step %c1 {
          %i = arith.addi %ipart, %p : index
          %u = func.call @upto(%i, %OFF, %SKV) : (index, index, index) -> index
          %sees0 = arith.subi %u, %lo : index
          %sees = arith.minui %sees0, %n : index
          %at = func.call @row_at(%b, %h, %i, %SQ) : (index, index, index, index) -> index
          %DW = arith.addi %at, %D : index
          scf.for %r = %c0 to %sees step %c1 {
            scf.for %c = %c0 to %D step %c8 {
              %wa = arith.addi %DW, %c : index
              %x8 = vector.load %rows[%wa] : !SCRATCH, !V8
              %h8 = vector.load %dkh[%r, %c] : !TILE, !V8
              %s8 = arith.addf %h8, %x8 : !V8
              vector.store %s8, %dkh[%r, %c] : !TILE, !V8
            }
          }
        }
      }
    }
    func.call @finish_key_rows(%kden, %dkt, %dkh, %dvt, %n, %lo, %b, %kh, %tables, %SQ, %SKV,
                               %dk, %dv)
        : (!TILE, !TILE, !TILE, !VT, index, index, index, index, !SCRATCH, index, index, !K, !V)
          -> ()
    scf.yield %ifull : index
  }
  return
}
