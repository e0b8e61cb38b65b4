// x86 attention backward template (f32, docs/backward.md): FlashAttention-2's
// gradients in three phases, each parallel over work items that write
// disjoint outputs, so no atomics and no reduction whose order depends on
// the thread count (bitwise-identical gradients at any thread count).
//
//   rows  item (b, h, query tile of BM rows):
//           D_i = dO_i . O_i;  lse_i = log sum_j exp(s_ij) over the keys i sees
//           (-inf when none), both into scratch [D | lse], B HQ SQ floats each
//   kv    item (b, hk, key tile of BN keys), for each key j of the tile:
//           for each query head h of the group, for each row i that sees j:
//             p = exp(s_ij - lse_i); dP = dO_i . v_j; dS = p (dP - D_i)
//             dE = scale * softcap' * dS
//             dv_j += p dO_i;  dk_j += dE q_i
//             partial += the score biases' adjoints of dS (a T5 table's)
//   q     item (b, h, query tile), for each row i and key j it sees:
//           dq_i += dE_ij k_j      (P, dP and dS recomputed)
// with s_ij = softcap(scale q_i . k_j) + bias_ij and softcap' = 1 - tanh^2
// (or 1). The fused score biases (ALiBi, T5, a bias tensor) enter through
// attn.score_mod, as in the forward; an additive bias passes dS through
// unchanged. Rows that see no key get dq = 0 and add nothing to dk, dv.
//
// This first form keeps one (query row, key) pair per step with the head
// dim in 8-lane vectors; the register-blocked form comes with the
// benchmarks (bench/RESULTS.md).
//
// Parameters, substituted as text before parsing (attn-instantiate-x86-template):
//   ${B} ${HQ} ${HKV} ${GROUP}=HQ/HKV ${D} ${DV} (D, DV multiples of 8)
//   ${SQ} ${SKV}: the lengths, or `?` for a shape class (read with memref.dim)
//   ${BM} query rows per rows/q item, ${BN} keys per kv item
//   ${CAUSAL} ${HAS_WINDOW} ${WINDOW} ${HAS_RIGHT} ${RIGHT}: the mask
//   ${SCALE} ${HAS_SOFTCAP} ${SOFTCAP}
//   ${E0} .. ${E3}: the memref types of the encoding operand slots (an
//   unused slot is memref<1xf32>)
//   ${HAS_GRADS} ${GRAD_FLOATS} ${GRAD_OFFSETS}: the encoding operand
//   gradients asked for. Each kv item adds its contributions
//   (attn.score_grad) into a partial buffer of its own, GRAD_FLOATS floats
//   after the rows' 2 B HQ SQ in scratch, each operand at its offset; the
//   runtime sums the items' buffers in item order.

!Q = memref<${B}x${HQ}x${SQ}x${D}xf32, strided<[?, ?, ?, 1], offset: ?>>
!K = memref<${B}x${HKV}x${SKV}x${D}xf32, strided<[?, ?, ?, 1], offset: ?>>
!V = memref<${B}x${HKV}x${SKV}x${DV}xf32, strided<[?, ?, ?, 1], offset: ?>>
!O = memref<${B}x${HQ}x${SQ}x${DV}xf32, strided<[?, ?, ?, 1], offset: ?>>
!SCRATCH = memref<?xf32>
!V8 = vector<8xf32>
!E0 = ${E0}
!E1 = ${E1}
!E2 = ${E2}
!E3 = ${E3}

// q_i . k_j over the head dim.
func.func private @dot_qk(%q: !Q, %k: !K, %b: index, %h: index, %hk: index, %i: index,
                          %j: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %zv = arith.constant dense<0.0> : !V8
  %acc = scf.for %c = %c0 to %D step %c8 iter_args(%a = %zv) -> (!V8) {
    %x = vector.load %q[%b, %h, %i, %c] : !Q, !V8
    %y = vector.load %k[%b, %hk, %j, %c] : !K, !V8
    %n = math.fma %x, %y, %a : !V8
    scf.yield %n : !V8
  }
  %s = vector.reduction <add>, %acc : !V8 into f32
  return %s : f32
}

// dO_i . v_j over the value dim.
func.func private @dot_ov(%do: !O, %v: !V, %b: index, %h: index, %hk: index, %i: index,
                          %j: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %DV = arith.constant ${DV} : index
  %zv = arith.constant dense<0.0> : !V8
  %acc = scf.for %c = %c0 to %DV step %c8 iter_args(%a = %zv) -> (!V8) {
    %x = vector.load %do[%b, %h, %i, %c] : !O, !V8
    %y = vector.load %v[%b, %hk, %j, %c] : !V, !V8
    %n = math.fma %x, %y, %a : !V8
    scf.yield %n : !V8
  }
  %s = vector.reduction <add>, %acc : !V8 into f32
  return %s : f32
}

// The score s_ij = softcap(scale q_i . k_j) + bias_ij (the fused score
// biases, attn.score_mod) and softcap'(.) = 1 - tanh^2 (1 without a softcap).
func.func private @score(%q: !Q, %k: !K, %b: index, %h: index, %hk: index, %i: index,
                         %j: index, %SQ: index, %SKV: index, %e0: !E0, %e1: !E1, %e2: !E2,
                         %e3: !E3) -> (f32, f32) {
  %dot = func.call @dot_qk(%q, %k, %b, %h, %hk, %i, %j)
      : (!Q, !K, index, index, index, index, index) -> f32
  %scale = arith.constant ${SCALE} : f32
  %one = arith.constant 1.0 : f32
  %s0 = arith.mulf %dot, %scale : f32
  %has_softcap = arith.constant ${HAS_SOFTCAP}
  %r:2 = scf.if %has_softcap -> (f32, f32) {
    %cap = arith.constant ${SOFTCAP} : f32
    %x = arith.divf %s0, %cap : f32
    %t = math.tanh %x : f32
    %s = arith.mulf %t, %cap : f32
    %tt = arith.mulf %t, %t : f32
    %f = arith.subf %one, %tt : f32
    scf.yield %s, %f : f32, f32
  } else {
    scf.yield %s0, %one : f32, f32
  }
  %qi = arith.index_cast %i : index to i32
  %kj = arith.index_cast %j : index to i32
  %biased = attn.score_mod %r#0, batch %b, head %h, query %qi, key %kj
      operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) lengths(%SQ, %SKV) : f32, i32
  return %biased, %r#1 : f32, f32
}

// The keys [lo, hi) row i sees (bottom-right aligned, docs/semantics.md):
// causal j <= i + OFF, a right window j <= i + OFF + RIGHT, a left window
// j >= i + OFF - WINDOW.
func.func private @key_range(%i: index, %SQ: index, %SKV: index) -> (index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %causal = arith.constant ${CAUSAL}
  %has_right = arith.constant ${HAS_RIGHT}
  %has_window = arith.constant ${HAS_WINDOW}
  %RIGHT = arith.constant ${RIGHT} : index
  %WINDOW = arith.constant ${WINDOW} : index
  %OFF = arith.subi %SKV, %SQ : index
  %aligned = arith.addi %i, %OFF : index
  %a1 = arith.addi %aligned, %c1 : index
  %r1 = arith.addi %a1, %RIGHT : index
  %hi_r = arith.select %has_right, %r1, %SKV : index
  %hi0 = arith.select %causal, %a1, %hi_r : index
  %hi1 = arith.maxsi %hi0, %c0 : index
  %hi = arith.minsi %hi1, %SKV : index
  %w = arith.subi %aligned, %WINDOW : index
  %lo0 = arith.select %has_window, %w, %c0 : index
  %lo1 = arith.maxsi %lo0, %c0 : index
  %lo = arith.minsi %lo1, %hi : index
  return %lo, %hi : index, index
}

// The rows [lo, hi) that see key j: the same mask solved for i.
func.func private @query_range(%j: index, %SQ: index, %SKV: index) -> (index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %causal = arith.constant ${CAUSAL}
  %has_right = arith.constant ${HAS_RIGHT}
  %has_window = arith.constant ${HAS_WINDOW}
  %RIGHT = arith.constant ${RIGHT} : index
  %WINDOW = arith.constant ${WINDOW} : index
  %OFF = arith.subi %SKV, %SQ : index
  %jo = arith.subi %j, %OFF : index
  %jor = arith.subi %jo, %RIGHT : index
  %lo_r = arith.select %has_right, %jor, %c0 : index
  %lo0 = arith.select %causal, %jo, %lo_r : index
  %lo1 = arith.maxsi %lo0, %c0 : index
  %lo = arith.minsi %lo1, %SQ : index
  %jw = arith.addi %jo, %WINDOW : index
  %jw1 = arith.addi %jw, %c1 : index
  %hi0 = arith.select %has_window, %jw1, %SQ : index
  %hi1 = arith.maxsi %hi0, %c0 : index
  %hi2 = arith.minsi %hi1, %SQ : index
  %hi = arith.maxsi %hi2, %lo : index
  return %lo, %hi : index, index
}

// An item's query rows: item -> (b, h, qt), rows [i0, i1).
func.func private @query_item(%item: index, %SQ: index) -> (index, index, index, index) {
  %c1 = arith.constant 1 : index
  %BM = arith.constant ${BM} : index
  %HQ = arith.constant ${HQ} : index
  %up0 = arith.addi %SQ, %BM : index
  %up = arith.subi %up0, %c1 : index
  %NQT = arith.divui %up, %BM : index
  %qt = arith.remui %item, %NQT : index
  %bh = arith.divui %item, %NQT : index
  %h = arith.remui %bh, %HQ : index
  %b = arith.divui %bh, %HQ : index
  %i0 = arith.muli %qt, %BM : index
  %i1a = arith.addi %i0, %BM : index
  %i1 = arith.minui %i1a, %SQ : index
  return %b, %h, %i0, %i1 : index, index, index, index
}

// Row (b, h, i)'s place in each half of the scratch: [D | lse].
func.func private @row_index(%b: index, %h: index, %i: index, %SQ: index) -> index {
  %HQ = arith.constant ${HQ} : index
  %bh0 = arith.muli %b, %HQ : index
  %bh = arith.addi %bh0, %h : index
  %r0 = arith.muli %bh, %SQ : index
  %r = arith.addi %r0, %i : index
  return %r : index
}

func.func @pejit_backward_rows(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %scratch: !SCRATCH,
                               %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %GROUP = arith.constant ${GROUP} : index
  %HQ = arith.constant ${HQ} : index
  %DV = arith.constant ${DV} : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %zv = arith.constant dense<0.0> : !V8
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  %b, %h, %i0, %i1 = func.call @query_item(%item, %SQ)
      : (index, index) -> (index, index, index, index)
  %hk = arith.divui %h, %GROUP : index
  scf.for %i = %i0 to %i1 step %c1 {
    // D_i = dO_i . O_i
    %acc = scf.for %c = %c0 to %DV step %c8 iter_args(%a = %zv) -> (!V8) {
      %x = vector.load %do[%b, %h, %i, %c] : !O, !V8
      %y = vector.load %o[%b, %h, %i, %c] : !O, !V8
      %n = math.fma %x, %y, %a : !V8
      scf.yield %n : !V8
    }
    %d = vector.reduction <add>, %acc : !V8 into f32
    // lse_i by the online rule: m' = max(m, s), l' = l e^(m - m') + e^(s - m').
    %lo, %hi = func.call @key_range(%i, %SQ, %SKV) : (index, index, index) -> (index, index)
    %ml:2 = scf.for %j = %lo to %hi step %c1 iter_args(%m = %ninf, %l = %zero) -> (f32, f32) {
      %s, %f = func.call @score(%q, %k, %b, %h, %hk, %i, %j, %SQ, %SKV, %e0, %e1, %e2, %e3)
          : (!Q, !K, index, index, index, index, index, index, index, !E0, !E1, !E2, !E3)
          -> (f32, f32)
      %mn = arith.maxnumf %m, %s : f32
      %d1 = arith.subf %m, %mn : f32
      %x1 = math.exp %d1 : f32
      %l1 = arith.mulf %l, %x1 : f32
      %d2 = arith.subf %s, %mn : f32
      %x2 = math.exp %d2 : f32
      %l2 = arith.addf %l1, %x2 : f32
      scf.yield %mn, %l2 : f32, f32
    }
    %log = math.log %ml#1 : f32
    %lse0 = arith.addf %ml#0, %log : f32
    %empty = arith.cmpi sle, %hi, %lo : index
    %lse = arith.select %empty, %ninf, %lse0 : f32
    %row = func.call @row_index(%b, %h, %i, %SQ) : (index, index, index, index) -> index
    memref.store %d, %scratch[%row] : !SCRATCH
    %lrow = arith.addi %ROWS, %row : index
    memref.store %lse, %scratch[%lrow] : !SCRATCH
  }
  return
}

func.func @pejit_backward_kv(%q: !Q, %k: !K, %v: !V, %do: !O, %dk: !K, %dv: !V,
                             %scratch: !SCRATCH, %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3,
                             %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %BN = arith.constant ${BN} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %GROUP = arith.constant ${GROUP} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %scale = arith.constant ${SCALE} : f32
  %zv = arith.constant dense<0.0> : !V8
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  // item -> (b, hk, kt): keys [j0, j1).
  %up0 = arith.addi %SKV, %BN : index
  %up = arith.subi %up0, %c1 : index
  %NKT = arith.divui %up, %BN : index
  %kt = arith.remui %item, %NKT : index
  %bk = arith.divui %item, %NKT : index
  %hk = arith.remui %bk, %HKV : index
  %b = arith.divui %bk, %HKV : index
  %j0 = arith.muli %kt, %BN : index
  %j1a = arith.addi %j0, %BN : index
  %j1 = arith.minui %j1a, %SKV : index
  %h0 = arith.muli %hk, %GROUP : index
  // This item's partial gradient buffer, zeroed.
  %has_grads = arith.constant ${HAS_GRADS}
  %PF = arith.constant ${GRAD_FLOATS} : index
  %rows2 = arith.muli %ROWS, %c2 : index
  %pitem = arith.muli %item, %PF : index
  %pbase = arith.addi %rows2, %pitem : index
  %pend = arith.addi %pbase, %PF : index
  %zero = arith.constant 0.0 : f32
  scf.for %e = %pbase to %pend step %c1 {
    memref.store %zero, %scratch[%e] : !SCRATCH
  }
  %DKs = memref.alloca() {alignment = 64 : i64} : memref<${D}xf32>
  %DVs = memref.alloca() {alignment = 64 : i64} : memref<${DV}xf32>
  scf.for %j = %j0 to %j1 step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      vector.store %zv, %DKs[%c] : memref<${D}xf32>, !V8
    }
    scf.for %c = %c0 to %DV step %c8 {
      vector.store %zv, %DVs[%c] : memref<${DV}xf32>, !V8
    }
    %ilo, %ihi = func.call @query_range(%j, %SQ, %SKV) : (index, index, index) -> (index, index)
    scf.for %g = %c0 to %GROUP step %c1 {
      %h = arith.addi %h0, %g : index
      scf.for %i = %ilo to %ihi step %c1 {
        %row = func.call @row_index(%b, %h, %i, %SQ) : (index, index, index, index) -> index
        %lrow = arith.addi %ROWS, %row : index
        %dr = memref.load %scratch[%row] : !SCRATCH
        %lse = memref.load %scratch[%lrow] : !SCRATCH
        %s, %f = func.call @score(%q, %k, %b, %h, %hk, %i, %j, %SQ, %SKV, %e0, %e1, %e2, %e3)
            : (!Q, !K, index, index, index, index, index, index, index, !E0, !E1, !E2, !E3)
            -> (f32, f32)
        %sl = arith.subf %s, %lse : f32
        %p = math.exp %sl : f32
        %dp = func.call @dot_ov(%do, %v, %b, %h, %hk, %i, %j)
            : (!O, !V, index, index, index, index, index) -> f32
        %dpd = arith.subf %dp, %dr : f32
        %ds = arith.mulf %p, %dpd : f32
        %dsf = arith.mulf %ds, %f : f32
        %de = arith.mulf %dsf, %scale : f32
        scf.if %has_grads {
          %qi = arith.index_cast %i : index to i32
          %kj = arith.index_cast %j : index to i32
          attn.score_grad %ds, batch %b, head %h, query %qi, key %kj
              operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
              partial(%scratch : !SCRATCH, %pbase) offsets ${GRAD_OFFSETS} lengths(%SQ, %SKV)
        }
        %pv = vector.broadcast %p : f32 to !V8
        %ev = vector.broadcast %de : f32 to !V8
        scf.for %c = %c0 to %DV step %c8 {
          %a = vector.load %DVs[%c] : memref<${DV}xf32>, !V8
          %x = vector.load %do[%b, %h, %i, %c] : !O, !V8
          %n = math.fma %pv, %x, %a : !V8
          vector.store %n, %DVs[%c] : memref<${DV}xf32>, !V8
        }
        scf.for %c = %c0 to %D step %c8 {
          %a = vector.load %DKs[%c] : memref<${D}xf32>, !V8
          %x = vector.load %q[%b, %h, %i, %c] : !Q, !V8
          %n = math.fma %ev, %x, %a : !V8
          vector.store %n, %DKs[%c] : memref<${D}xf32>, !V8
        }
      }
    }
    scf.for %c = %c0 to %D step %c8 {
      %a = vector.load %DKs[%c] : memref<${D}xf32>, !V8
      vector.store %a, %dk[%b, %hk, %j, %c] : !K, !V8
    }
    scf.for %c = %c0 to %DV step %c8 {
      %a = vector.load %DVs[%c] : memref<${DV}xf32>, !V8
      vector.store %a, %dv[%b, %hk, %j, %c] : !V, !V8
    }
  }
  return
}

func.func @pejit_backward_q(%q: !Q, %k: !K, %v: !V, %do: !O, %dq: !Q, %scratch: !SCRATCH,
                            %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %HQ = arith.constant ${HQ} : index
  %GROUP = arith.constant ${GROUP} : index
  %D = arith.constant ${D} : index
  %scale = arith.constant ${SCALE} : f32
  %zv = arith.constant dense<0.0> : !V8
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  %b, %h, %i0, %i1 = func.call @query_item(%item, %SQ)
      : (index, index) -> (index, index, index, index)
  %hk = arith.divui %h, %GROUP : index
  %DQs = memref.alloca() {alignment = 64 : i64} : memref<${D}xf32>
  scf.for %i = %i0 to %i1 step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      vector.store %zv, %DQs[%c] : memref<${D}xf32>, !V8
    }
    %row = func.call @row_index(%b, %h, %i, %SQ) : (index, index, index, index) -> index
    %lrow = arith.addi %ROWS, %row : index
    %dr = memref.load %scratch[%row] : !SCRATCH
    %lse = memref.load %scratch[%lrow] : !SCRATCH
    %lo, %hi = func.call @key_range(%i, %SQ, %SKV) : (index, index, index) -> (index, index)
    scf.for %j = %lo to %hi step %c1 {
      %s, %f = func.call @score(%q, %k, %b, %h, %hk, %i, %j, %SQ, %SKV, %e0, %e1, %e2, %e3)
          : (!Q, !K, index, index, index, index, index, index, index, !E0, !E1, !E2, !E3)
          -> (f32, f32)
      %sl = arith.subf %s, %lse : f32
      %p = math.exp %sl : f32
      %dp = func.call @dot_ov(%do, %v, %b, %h, %hk, %i, %j)
          : (!O, !V, index, index, index, index, index) -> f32
      %dpd = arith.subf %dp, %dr : f32
      %ds = arith.mulf %p, %dpd : f32
      %dsf = arith.mulf %ds, %f : f32
      %de = arith.mulf %dsf, %scale : f32
      %ev = vector.broadcast %de : f32 to !V8
      scf.for %c = %c0 to %D step %c8 {
        %a = vector.load %DQs[%c] : memref<${D}xf32>, !V8
        %x = vector.load %k[%b, %hk, %j, %c] : !K, !V8
        %n = math.fma %ev, %x, %a : !V8
        vector.store %n, %DQs[%c] : memref<${D}xf32>, !V8
      }
    }
    scf.for %c = %c0 to %D step %c8 {
      %a = vector.load %DQs[%c] : memref<${D}xf32>, !V8
      vector.store %a, %dq[%b, %h, %i, %c] : !Q, !V8
    }
  }
  return
}
