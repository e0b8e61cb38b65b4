// x86 attention backward template (f32, docs/backward.md): FlashAttention-2's
// gradients in three phases, each parallel over work items that write
// disjoint outputs, so no atomics and no reduction whose order depends on
// the thread count (bitwise-identical gradients at any thread count).
//
//   rows  item (b, h, query tile of BM rows), 8 rows per vector:
//           D_i = dO_i . O_i;  lse_i = log sum_j exp(s_ij) over the keys i sees
//           (-inf when none), both into scratch [D | lse], B HQ SQ floats each
//   kv    item (b, hk, key tile of BN keys), 8 keys per vector: for each
//         query head h of the group and each row i that sees a key of them:
//             p = exp(s_ij - lse_i); dP = dO_i . v_j; dS = p (dP - D_i)
//             dE = scale * softcap' * dS
//             dv_j += p dO_i;  dk_j += dE q_i
//             partial += the score biases' adjoints of dS (a T5 table's)
//   q     item (b, h, query tile), 8 rows per vector, for each key j they see:
//           dq_i += dE_ij k_j      (P, dP and dS recomputed)
// with s_ij = softcap(scale q_i . k_j) + bias_ij and softcap' = 1 - tanh^2
// (or 1). The fused score biases (ALiBi, T5, a bias tensor) enter through
// attn.score_mod, as in the forward; an additive bias passes dS through
// unchanged. Rows that see no key get dq = 0 and add nothing to dk, dv.
//
// The vectors run along the rows (rows, q) or the keys (kv) of a tile kept
// transposed on the item's stack ([D, 8]), so a score, dP and each
// accumulator update are D (or DV) FMAs of 8 lanes with no horizontal sum,
// and exp is @exp2_v8. Lanes a mask hides, or past the tile's end, take
// P = 0 (a select, so no inf or NaN of theirs reaches a gradient).
//
// Parameters, substituted as text before parsing (attn-instantiate-x86-template):
//   ${B} ${HQ} ${HKV} ${GROUP}=HQ/HKV ${D} ${DV} (D, DV multiples of 8)
//   ${SQ} ${SKV}: the lengths, or `?` for a shape class (read with memref.dim)
//   ${BM} query rows per rows/q item, ${BN} keys per kv item (multiples of 8)
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
!I8 = vector<8xi32>
!TD = memref<${D}x8xf32>
!TV = memref<${DV}x8xf32>
// A chunk's weights (P or dE) of up to 64 rows or keys, 8 lanes each.
!W = memref<64x8xf32>
!E0 = ${E0}
!E1 = ${E1}
!E2 = ${E2}
!E3 = ${E3}

// Whether row i sees key j (bottom-right aligned, docs/semantics.md), on 8
// lanes of (i, j) pairs: causal j <= i + OFF, a right window
// j <= i + OFF + RIGHT, a left window j >= i + OFF - WINDOW; and `valid`
// (lanes inside the tile).
func.func private @visible8(%i: !I8, %j: !I8, %OFF: index, %valid: vector<8xi1>)
    -> vector<8xi1> {
  %causal = arith.constant ${CAUSAL}
  %has_right = arith.constant ${HAS_RIGHT}
  %has_window = arith.constant ${HAS_WINDOW}
  %RIGHT = arith.constant ${RIGHT} : i32
  %WINDOW = arith.constant ${WINDOW} : i32
  %off = arith.index_cast %OFF : index to i32
  %offv = vector.broadcast %off : i32 to !I8
  %aligned = arith.addi %i, %offv : !I8
  %before = arith.cmpi sle, %j, %aligned : !I8
  %rightv = vector.broadcast %RIGHT : i32 to !I8
  %right_end = arith.addi %aligned, %rightv : !I8
  %in_right = arith.cmpi sle, %j, %right_end : !I8
  %windowv = vector.broadcast %WINDOW : i32 to !I8
  %left_end = arith.subi %aligned, %windowv : !I8
  %in_left = arith.cmpi sge, %j, %left_end : !I8
  %true = arith.constant dense<true> : vector<8xi1>
  %c_ok = arith.select %causal, %before, %true : vector<8xi1>
  %r_ok = arith.select %has_right, %in_right, %true : vector<8xi1>
  %w_ok = arith.select %has_window, %in_left, %true : vector<8xi1>
  %a = arith.andi %c_ok, %r_ok : vector<8xi1>
  %b = arith.andi %a, %w_ok : vector<8xi1>
  %v = arith.andi %b, %valid : vector<8xi1>
  return %v : vector<8xi1>
}

// exp(x) on 8 lanes through @exp2_v8 (x <= 0 here: s - lse, s - max).
func.func private @exp_v8(%x: !V8) -> !V8 {
  %log2e = arith.constant dense<1.44269504088896> : !V8
  %y = arith.mulf %x, %log2e : !V8
  %e = func.call @exp2_v8(%y) : (!V8) -> !V8
  return %e : !V8
}

// The scores of 8 lanes from their dot products: s = softcap(scale dot) +
// bias (the fused score biases, attn.score_mod), and softcap' = 1 - tanh^2
// (1 without a softcap).
func.func private @score8(%dot: !V8, %b: index, %h: index, %qi: !I8, %kj: !I8, %SQ: index,
                          %SKV: index, %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3)
    -> (!V8, !V8) {
  %scale = arith.constant dense<${SCALE}> : !V8
  %one = arith.constant dense<1.0> : !V8
  %s0 = arith.mulf %dot, %scale : !V8
  %has_softcap = arith.constant ${HAS_SOFTCAP}
  %r:2 = scf.if %has_softcap -> (!V8, !V8) {
    %cap = arith.constant dense<${SOFTCAP}> : !V8
    %x = arith.divf %s0, %cap : !V8
    %t = math.tanh %x : !V8
    %s = arith.mulf %t, %cap : !V8
    %tt = arith.mulf %t, %t : !V8
    %f = arith.subf %one, %tt : !V8
    scf.yield %s, %f : !V8, !V8
  } else {
    scf.yield %s0, %one : !V8, !V8
  }
  %biased = attn.score_mod %r#0, batch %b, head %h, query %qi, key %kj
      operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) lengths(%SQ, %SKV) : !V8, !I8
  return %biased, %r#1 : !V8, !V8
}

// The keys [lo, hi) row i sees (the mask of @visible8 solved for j).
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

// The rows [lo, hi) that see key j (the same mask solved for i).
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

// 8 rows r0 .. r0 + 7 of Q (rows past `end` as zeros), transposed: T[c, l].
func.func private @rows_t_q(%x: !Q, %t: !TD, %b: index, %h: index, %r0: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %zero = arith.constant 0.0 : f32
  scf.for %l = %c0 to %c8 step %c1 {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    scf.for %c = %c0 to %D step %c1 {
      %v = scf.if %in -> f32 {
        %x1 = memref.load %x[%b, %h, %r, %c] : !Q
        scf.yield %x1 : f32
      } else {
        scf.yield %zero : f32
      }
      memref.store %v, %t[%c, %l] : !TD
    }
  }
  return
}

// The same for 8 rows of an [b, h, s, DV] tensor (dO, or V's keys).
func.func private @rows_t_o(%x: !O, %t: !TV, %b: index, %h: index, %r0: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %DV = arith.constant ${DV} : index
  %zero = arith.constant 0.0 : f32
  scf.for %l = %c0 to %c8 step %c1 {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    scf.for %c = %c0 to %DV step %c1 {
      %v = scf.if %in -> f32 {
        %x1 = memref.load %x[%b, %h, %r, %c] : !O
        scf.yield %x1 : f32
      } else {
        scf.yield %zero : f32
      }
      memref.store %v, %t[%c, %l] : !TV
    }
  }
  return
}

func.func private @rows_t_k(%x: !K, %t: !TD, %b: index, %h: index, %r0: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %zero = arith.constant 0.0 : f32
  scf.for %l = %c0 to %c8 step %c1 {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    scf.for %c = %c0 to %D step %c1 {
      %v = scf.if %in -> f32 {
        %x1 = memref.load %x[%b, %h, %r, %c] : !K
        scf.yield %x1 : f32
      } else {
        scf.yield %zero : f32
      }
      memref.store %v, %t[%c, %l] : !TD
    }
  }
  return
}

func.func private @rows_t_v(%x: !V, %t: !TV, %b: index, %h: index, %r0: index, %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %DV = arith.constant ${DV} : index
  %zero = arith.constant 0.0 : f32
  scf.for %l = %c0 to %c8 step %c1 {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    scf.for %c = %c0 to %DV step %c1 {
      %v = scf.if %in -> f32 {
        %x1 = memref.load %x[%b, %h, %r, %c] : !V
        scf.yield %x1 : f32
      } else {
        scf.yield %zero : f32
      }
      memref.store %v, %t[%c, %l] : !TV
    }
  }
  return
}

// sum_c T[c, :] * x[c] on 8 lanes: 8 rows (or keys) of a transposed tile
// against one row of Q (or K, dO, V) broadcast. Eight accumulators, summed
// in a fixed tree at the end: one chain of FMAs would wait on each FMA's
// latency (4 cycles) and run at a quarter of the FMA ports' rate.
func.func private @tile_dot_k(%t: !TD, %x: !K, %b: index, %h: index, %r: index) -> !V8 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %N = arith.constant ${D} : index
  %zv = arith.constant dense<0.0> : !V8
  %acc:8 = scf.for %c = %c0 to %N step %c8 iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv) -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
    %i0 = arith.addi %c, %c0 : index
    %col0 = vector.load %t[%i0, %c0] : !TD, !V8
    %x0 = memref.load %x[%b, %h, %r, %i0] : !K
    %xv0 = vector.broadcast %x0 : f32 to !V8
    %n0 = math.fma %col0, %xv0, %a0 : !V8
    %i1 = arith.addi %c, %c1 : index
    %col1 = vector.load %t[%i1, %c0] : !TD, !V8
    %x1 = memref.load %x[%b, %h, %r, %i1] : !K
    %xv1 = vector.broadcast %x1 : f32 to !V8
    %n1 = math.fma %col1, %xv1, %a1 : !V8
    %i2 = arith.addi %c, %c2 : index
    %col2 = vector.load %t[%i2, %c0] : !TD, !V8
    %x2 = memref.load %x[%b, %h, %r, %i2] : !K
    %xv2 = vector.broadcast %x2 : f32 to !V8
    %n2 = math.fma %col2, %xv2, %a2 : !V8
    %i3 = arith.addi %c, %c3 : index
    %col3 = vector.load %t[%i3, %c0] : !TD, !V8
    %x3 = memref.load %x[%b, %h, %r, %i3] : !K
    %xv3 = vector.broadcast %x3 : f32 to !V8
    %n3 = math.fma %col3, %xv3, %a3 : !V8
    %i4 = arith.addi %c, %c4 : index
    %col4 = vector.load %t[%i4, %c0] : !TD, !V8
    %x4 = memref.load %x[%b, %h, %r, %i4] : !K
    %xv4 = vector.broadcast %x4 : f32 to !V8
    %n4 = math.fma %col4, %xv4, %a4 : !V8
    %i5 = arith.addi %c, %c5 : index
    %col5 = vector.load %t[%i5, %c0] : !TD, !V8
    %x5 = memref.load %x[%b, %h, %r, %i5] : !K
    %xv5 = vector.broadcast %x5 : f32 to !V8
    %n5 = math.fma %col5, %xv5, %a5 : !V8
    %i6 = arith.addi %c, %c6 : index
    %col6 = vector.load %t[%i6, %c0] : !TD, !V8
    %x6 = memref.load %x[%b, %h, %r, %i6] : !K
    %xv6 = vector.broadcast %x6 : f32 to !V8
    %n6 = math.fma %col6, %xv6, %a6 : !V8
    %i7 = arith.addi %c, %c7 : index
    %col7 = vector.load %t[%i7, %c0] : !TD, !V8
    %x7 = memref.load %x[%b, %h, %r, %i7] : !K
    %xv7 = vector.broadcast %x7 : f32 to !V8
    %n7 = math.fma %col7, %xv7, %a7 : !V8
    scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
  }
  %s01 = arith.addf %acc#0, %acc#1 : !V8
  %s23 = arith.addf %acc#2, %acc#3 : !V8
  %s45 = arith.addf %acc#4, %acc#5 : !V8
  %s67 = arith.addf %acc#6, %acc#7 : !V8
  %s03 = arith.addf %s01, %s23 : !V8
  %s47 = arith.addf %s45, %s67 : !V8
  %s = arith.addf %s03, %s47 : !V8
  return %s : !V8
}

func.func private @tile_dot_v(%t: !TV, %x: !V, %b: index, %h: index, %r: index) -> !V8 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %N = arith.constant ${DV} : index
  %zv = arith.constant dense<0.0> : !V8
  %acc:8 = scf.for %c = %c0 to %N step %c8 iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv) -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
    %i0 = arith.addi %c, %c0 : index
    %col0 = vector.load %t[%i0, %c0] : !TV, !V8
    %x0 = memref.load %x[%b, %h, %r, %i0] : !V
    %xv0 = vector.broadcast %x0 : f32 to !V8
    %n0 = math.fma %col0, %xv0, %a0 : !V8
    %i1 = arith.addi %c, %c1 : index
    %col1 = vector.load %t[%i1, %c0] : !TV, !V8
    %x1 = memref.load %x[%b, %h, %r, %i1] : !V
    %xv1 = vector.broadcast %x1 : f32 to !V8
    %n1 = math.fma %col1, %xv1, %a1 : !V8
    %i2 = arith.addi %c, %c2 : index
    %col2 = vector.load %t[%i2, %c0] : !TV, !V8
    %x2 = memref.load %x[%b, %h, %r, %i2] : !V
    %xv2 = vector.broadcast %x2 : f32 to !V8
    %n2 = math.fma %col2, %xv2, %a2 : !V8
    %i3 = arith.addi %c, %c3 : index
    %col3 = vector.load %t[%i3, %c0] : !TV, !V8
    %x3 = memref.load %x[%b, %h, %r, %i3] : !V
    %xv3 = vector.broadcast %x3 : f32 to !V8
    %n3 = math.fma %col3, %xv3, %a3 : !V8
    %i4 = arith.addi %c, %c4 : index
    %col4 = vector.load %t[%i4, %c0] : !TV, !V8
    %x4 = memref.load %x[%b, %h, %r, %i4] : !V
    %xv4 = vector.broadcast %x4 : f32 to !V8
    %n4 = math.fma %col4, %xv4, %a4 : !V8
    %i5 = arith.addi %c, %c5 : index
    %col5 = vector.load %t[%i5, %c0] : !TV, !V8
    %x5 = memref.load %x[%b, %h, %r, %i5] : !V
    %xv5 = vector.broadcast %x5 : f32 to !V8
    %n5 = math.fma %col5, %xv5, %a5 : !V8
    %i6 = arith.addi %c, %c6 : index
    %col6 = vector.load %t[%i6, %c0] : !TV, !V8
    %x6 = memref.load %x[%b, %h, %r, %i6] : !V
    %xv6 = vector.broadcast %x6 : f32 to !V8
    %n6 = math.fma %col6, %xv6, %a6 : !V8
    %i7 = arith.addi %c, %c7 : index
    %col7 = vector.load %t[%i7, %c0] : !TV, !V8
    %x7 = memref.load %x[%b, %h, %r, %i7] : !V
    %xv7 = vector.broadcast %x7 : f32 to !V8
    %n7 = math.fma %col7, %xv7, %a7 : !V8
    scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
  }
  %s01 = arith.addf %acc#0, %acc#1 : !V8
  %s23 = arith.addf %acc#2, %acc#3 : !V8
  %s45 = arith.addf %acc#4, %acc#5 : !V8
  %s67 = arith.addf %acc#6, %acc#7 : !V8
  %s03 = arith.addf %s01, %s23 : !V8
  %s47 = arith.addf %s45, %s67 : !V8
  %s = arith.addf %s03, %s47 : !V8
  return %s : !V8
}

func.func private @tile_dot_q(%t: !TD, %x: !Q, %b: index, %h: index, %r: index) -> !V8 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %N = arith.constant ${D} : index
  %zv = arith.constant dense<0.0> : !V8
  %acc:8 = scf.for %c = %c0 to %N step %c8 iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv) -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
    %i0 = arith.addi %c, %c0 : index
    %col0 = vector.load %t[%i0, %c0] : !TD, !V8
    %x0 = memref.load %x[%b, %h, %r, %i0] : !Q
    %xv0 = vector.broadcast %x0 : f32 to !V8
    %n0 = math.fma %col0, %xv0, %a0 : !V8
    %i1 = arith.addi %c, %c1 : index
    %col1 = vector.load %t[%i1, %c0] : !TD, !V8
    %x1 = memref.load %x[%b, %h, %r, %i1] : !Q
    %xv1 = vector.broadcast %x1 : f32 to !V8
    %n1 = math.fma %col1, %xv1, %a1 : !V8
    %i2 = arith.addi %c, %c2 : index
    %col2 = vector.load %t[%i2, %c0] : !TD, !V8
    %x2 = memref.load %x[%b, %h, %r, %i2] : !Q
    %xv2 = vector.broadcast %x2 : f32 to !V8
    %n2 = math.fma %col2, %xv2, %a2 : !V8
    %i3 = arith.addi %c, %c3 : index
    %col3 = vector.load %t[%i3, %c0] : !TD, !V8
    %x3 = memref.load %x[%b, %h, %r, %i3] : !Q
    %xv3 = vector.broadcast %x3 : f32 to !V8
    %n3 = math.fma %col3, %xv3, %a3 : !V8
    %i4 = arith.addi %c, %c4 : index
    %col4 = vector.load %t[%i4, %c0] : !TD, !V8
    %x4 = memref.load %x[%b, %h, %r, %i4] : !Q
    %xv4 = vector.broadcast %x4 : f32 to !V8
    %n4 = math.fma %col4, %xv4, %a4 : !V8
    %i5 = arith.addi %c, %c5 : index
    %col5 = vector.load %t[%i5, %c0] : !TD, !V8
    %x5 = memref.load %x[%b, %h, %r, %i5] : !Q
    %xv5 = vector.broadcast %x5 : f32 to !V8
    %n5 = math.fma %col5, %xv5, %a5 : !V8
    %i6 = arith.addi %c, %c6 : index
    %col6 = vector.load %t[%i6, %c0] : !TD, !V8
    %x6 = memref.load %x[%b, %h, %r, %i6] : !Q
    %xv6 = vector.broadcast %x6 : f32 to !V8
    %n6 = math.fma %col6, %xv6, %a6 : !V8
    %i7 = arith.addi %c, %c7 : index
    %col7 = vector.load %t[%i7, %c0] : !TD, !V8
    %x7 = memref.load %x[%b, %h, %r, %i7] : !Q
    %xv7 = vector.broadcast %x7 : f32 to !V8
    %n7 = math.fma %col7, %xv7, %a7 : !V8
    scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
  }
  %s01 = arith.addf %acc#0, %acc#1 : !V8
  %s23 = arith.addf %acc#2, %acc#3 : !V8
  %s45 = arith.addf %acc#4, %acc#5 : !V8
  %s67 = arith.addf %acc#6, %acc#7 : !V8
  %s03 = arith.addf %s01, %s23 : !V8
  %s47 = arith.addf %s45, %s67 : !V8
  %s = arith.addf %s03, %s47 : !V8
  return %s : !V8
}

func.func private @tile_dot_o(%t: !TV, %x: !O, %b: index, %h: index, %r: index) -> !V8 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %N = arith.constant ${DV} : index
  %zv = arith.constant dense<0.0> : !V8
  %acc:8 = scf.for %c = %c0 to %N step %c8 iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv) -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
    %i0 = arith.addi %c, %c0 : index
    %col0 = vector.load %t[%i0, %c0] : !TV, !V8
    %x0 = memref.load %x[%b, %h, %r, %i0] : !O
    %xv0 = vector.broadcast %x0 : f32 to !V8
    %n0 = math.fma %col0, %xv0, %a0 : !V8
    %i1 = arith.addi %c, %c1 : index
    %col1 = vector.load %t[%i1, %c0] : !TV, !V8
    %x1 = memref.load %x[%b, %h, %r, %i1] : !O
    %xv1 = vector.broadcast %x1 : f32 to !V8
    %n1 = math.fma %col1, %xv1, %a1 : !V8
    %i2 = arith.addi %c, %c2 : index
    %col2 = vector.load %t[%i2, %c0] : !TV, !V8
    %x2 = memref.load %x[%b, %h, %r, %i2] : !O
    %xv2 = vector.broadcast %x2 : f32 to !V8
    %n2 = math.fma %col2, %xv2, %a2 : !V8
    %i3 = arith.addi %c, %c3 : index
    %col3 = vector.load %t[%i3, %c0] : !TV, !V8
    %x3 = memref.load %x[%b, %h, %r, %i3] : !O
    %xv3 = vector.broadcast %x3 : f32 to !V8
    %n3 = math.fma %col3, %xv3, %a3 : !V8
    %i4 = arith.addi %c, %c4 : index
    %col4 = vector.load %t[%i4, %c0] : !TV, !V8
    %x4 = memref.load %x[%b, %h, %r, %i4] : !O
    %xv4 = vector.broadcast %x4 : f32 to !V8
    %n4 = math.fma %col4, %xv4, %a4 : !V8
    %i5 = arith.addi %c, %c5 : index
    %col5 = vector.load %t[%i5, %c0] : !TV, !V8
    %x5 = memref.load %x[%b, %h, %r, %i5] : !O
    %xv5 = vector.broadcast %x5 : f32 to !V8
    %n5 = math.fma %col5, %xv5, %a5 : !V8
    %i6 = arith.addi %c, %c6 : index
    %col6 = vector.load %t[%i6, %c0] : !TV, !V8
    %x6 = memref.load %x[%b, %h, %r, %i6] : !O
    %xv6 = vector.broadcast %x6 : f32 to !V8
    %n6 = math.fma %col6, %xv6, %a6 : !V8
    %i7 = arith.addi %c, %c7 : index
    %col7 = vector.load %t[%i7, %c0] : !TV, !V8
    %x7 = memref.load %x[%b, %h, %r, %i7] : !O
    %xv7 = vector.broadcast %x7 : f32 to !V8
    %n7 = math.fma %col7, %xv7, %a7 : !V8
    scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
  }
  %s01 = arith.addf %acc#0, %acc#1 : !V8
  %s23 = arith.addf %acc#2, %acc#3 : !V8
  %s45 = arith.addf %acc#4, %acc#5 : !V8
  %s67 = arith.addf %acc#6, %acc#7 : !V8
  %s03 = arith.addf %s01, %s23 : !V8
  %s47 = arith.addf %s45, %s67 : !V8
  %s = arith.addf %s03, %s47 : !V8
  return %s : !V8
}

// acc[c, :] += sum_{r < n} w[r, :] x[r0 + r, c]: a chunk's weights (P or
// dE, 8 lanes per row) times its rows of Q, K or dO, 8 channels at a time
// in registers: per row, one load of w and 8 broadcasts for 8 FMAs, and
// the accumulator tile read and written once per chunk.
func.func private @accumulate_k(%acc: !TD, %w: !W, %n: index, %x: !K, %b: index, %h: index,
                %r0: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %N = arith.constant ${D} : index
  scf.for %cb = %c0 to %N step %c8 {
    %a0 = vector.load %acc[%cb, %c0] : !TD, !V8
    %cb1 = arith.addi %cb, %c1 : index
    %a1 = vector.load %acc[%cb1, %c0] : !TD, !V8
    %cb2 = arith.addi %cb, %c2 : index
    %a2 = vector.load %acc[%cb2, %c0] : !TD, !V8
    %cb3 = arith.addi %cb, %c3 : index
    %a3 = vector.load %acc[%cb3, %c0] : !TD, !V8
    %cb4 = arith.addi %cb, %c4 : index
    %a4 = vector.load %acc[%cb4, %c0] : !TD, !V8
    %cb5 = arith.addi %cb, %c5 : index
    %a5 = vector.load %acc[%cb5, %c0] : !TD, !V8
    %cb6 = arith.addi %cb, %c6 : index
    %a6 = vector.load %acc[%cb6, %c0] : !TD, !V8
    %cb7 = arith.addi %cb, %c7 : index
    %a7 = vector.load %acc[%cb7, %c0] : !TD, !V8
    %r:8 = scf.for %rr = %c0 to %n step %c1 iter_args(%s0 = %a0, %s1 = %a1, %s2 = %a2, %s3 = %a3, %s4 = %a4, %s5 = %a5, %s6 = %a6, %s7 = %a7) -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
      %wv = vector.load %w[%rr, %c0] : !W, !V8
      %row = arith.addi %r0, %rr : index
      %x0 = memref.load %x[%b, %h, %row, %cb] : !K
      %xv0 = vector.broadcast %x0 : f32 to !V8
      %n0 = math.fma %wv, %xv0, %s0 : !V8
      %x1 = memref.load %x[%b, %h, %row, %cb1] : !K
      %xv1 = vector.broadcast %x1 : f32 to !V8
      %n1 = math.fma %wv, %xv1, %s1 : !V8
      %x2 = memref.load %x[%b, %h, %row, %cb2] : !K
      %xv2 = vector.broadcast %x2 : f32 to !V8
      %n2 = math.fma %wv, %xv2, %s2 : !V8
      %x3 = memref.load %x[%b, %h, %row, %cb3] : !K
      %xv3 = vector.broadcast %x3 : f32 to !V8
      %n3 = math.fma %wv, %xv3, %s3 : !V8
      %x4 = memref.load %x[%b, %h, %row, %cb4] : !K
      %xv4 = vector.broadcast %x4 : f32 to !V8
      %n4 = math.fma %wv, %xv4, %s4 : !V8
      %x5 = memref.load %x[%b, %h, %row, %cb5] : !K
      %xv5 = vector.broadcast %x5 : f32 to !V8
      %n5 = math.fma %wv, %xv5, %s5 : !V8
      %x6 = memref.load %x[%b, %h, %row, %cb6] : !K
      %xv6 = vector.broadcast %x6 : f32 to !V8
      %n6 = math.fma %wv, %xv6, %s6 : !V8
      %x7 = memref.load %x[%b, %h, %row, %cb7] : !K
      %xv7 = vector.broadcast %x7 : f32 to !V8
      %n7 = math.fma %wv, %xv7, %s7 : !V8
      scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    }
    vector.store %r#0, %acc[%cb, %c0] : !TD, !V8
    vector.store %r#1, %acc[%cb1, %c0] : !TD, !V8
    vector.store %r#2, %acc[%cb2, %c0] : !TD, !V8
    vector.store %r#3, %acc[%cb3, %c0] : !TD, !V8
    vector.store %r#4, %acc[%cb4, %c0] : !TD, !V8
    vector.store %r#5, %acc[%cb5, %c0] : !TD, !V8
    vector.store %r#6, %acc[%cb6, %c0] : !TD, !V8
    vector.store %r#7, %acc[%cb7, %c0] : !TD, !V8
  }
  return
}

func.func private @accumulate_q(%acc: !TD, %w: !W, %n: index, %x: !Q, %b: index, %h: index,
                %r0: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %N = arith.constant ${D} : index
  scf.for %cb = %c0 to %N step %c8 {
    %a0 = vector.load %acc[%cb, %c0] : !TD, !V8
    %cb1 = arith.addi %cb, %c1 : index
    %a1 = vector.load %acc[%cb1, %c0] : !TD, !V8
    %cb2 = arith.addi %cb, %c2 : index
    %a2 = vector.load %acc[%cb2, %c0] : !TD, !V8
    %cb3 = arith.addi %cb, %c3 : index
    %a3 = vector.load %acc[%cb3, %c0] : !TD, !V8
    %cb4 = arith.addi %cb, %c4 : index
    %a4 = vector.load %acc[%cb4, %c0] : !TD, !V8
    %cb5 = arith.addi %cb, %c5 : index
    %a5 = vector.load %acc[%cb5, %c0] : !TD, !V8
    %cb6 = arith.addi %cb, %c6 : index
    %a6 = vector.load %acc[%cb6, %c0] : !TD, !V8
    %cb7 = arith.addi %cb, %c7 : index
    %a7 = vector.load %acc[%cb7, %c0] : !TD, !V8
    %r:8 = scf.for %rr = %c0 to %n step %c1 iter_args(%s0 = %a0, %s1 = %a1, %s2 = %a2, %s3 = %a3, %s4 = %a4, %s5 = %a5, %s6 = %a6, %s7 = %a7) -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
      %wv = vector.load %w[%rr, %c0] : !W, !V8
      %row = arith.addi %r0, %rr : index
      %x0 = memref.load %x[%b, %h, %row, %cb] : !Q
      %xv0 = vector.broadcast %x0 : f32 to !V8
      %n0 = math.fma %wv, %xv0, %s0 : !V8
      %x1 = memref.load %x[%b, %h, %row, %cb1] : !Q
      %xv1 = vector.broadcast %x1 : f32 to !V8
      %n1 = math.fma %wv, %xv1, %s1 : !V8
      %x2 = memref.load %x[%b, %h, %row, %cb2] : !Q
      %xv2 = vector.broadcast %x2 : f32 to !V8
      %n2 = math.fma %wv, %xv2, %s2 : !V8
      %x3 = memref.load %x[%b, %h, %row, %cb3] : !Q
      %xv3 = vector.broadcast %x3 : f32 to !V8
      %n3 = math.fma %wv, %xv3, %s3 : !V8
      %x4 = memref.load %x[%b, %h, %row, %cb4] : !Q
      %xv4 = vector.broadcast %x4 : f32 to !V8
      %n4 = math.fma %wv, %xv4, %s4 : !V8
      %x5 = memref.load %x[%b, %h, %row, %cb5] : !Q
      %xv5 = vector.broadcast %x5 : f32 to !V8
      %n5 = math.fma %wv, %xv5, %s5 : !V8
      %x6 = memref.load %x[%b, %h, %row, %cb6] : !Q
      %xv6 = vector.broadcast %x6 : f32 to !V8
      %n6 = math.fma %wv, %xv6, %s6 : !V8
      %x7 = memref.load %x[%b, %h, %row, %cb7] : !Q
      %xv7 = vector.broadcast %x7 : f32 to !V8
      %n7 = math.fma %wv, %xv7, %s7 : !V8
      scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    }
    vector.store %r#0, %acc[%cb, %c0] : !TD, !V8
    vector.store %r#1, %acc[%cb1, %c0] : !TD, !V8
    vector.store %r#2, %acc[%cb2, %c0] : !TD, !V8
    vector.store %r#3, %acc[%cb3, %c0] : !TD, !V8
    vector.store %r#4, %acc[%cb4, %c0] : !TD, !V8
    vector.store %r#5, %acc[%cb5, %c0] : !TD, !V8
    vector.store %r#6, %acc[%cb6, %c0] : !TD, !V8
    vector.store %r#7, %acc[%cb7, %c0] : !TD, !V8
  }
  return
}

func.func private @accumulate_o(%acc: !TV, %w: !W, %n: index, %x: !O, %b: index, %h: index,
                %r0: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %N = arith.constant ${DV} : index
  scf.for %cb = %c0 to %N step %c8 {
    %a0 = vector.load %acc[%cb, %c0] : !TV, !V8
    %cb1 = arith.addi %cb, %c1 : index
    %a1 = vector.load %acc[%cb1, %c0] : !TV, !V8
    %cb2 = arith.addi %cb, %c2 : index
    %a2 = vector.load %acc[%cb2, %c0] : !TV, !V8
    %cb3 = arith.addi %cb, %c3 : index
    %a3 = vector.load %acc[%cb3, %c0] : !TV, !V8
    %cb4 = arith.addi %cb, %c4 : index
    %a4 = vector.load %acc[%cb4, %c0] : !TV, !V8
    %cb5 = arith.addi %cb, %c5 : index
    %a5 = vector.load %acc[%cb5, %c0] : !TV, !V8
    %cb6 = arith.addi %cb, %c6 : index
    %a6 = vector.load %acc[%cb6, %c0] : !TV, !V8
    %cb7 = arith.addi %cb, %c7 : index
    %a7 = vector.load %acc[%cb7, %c0] : !TV, !V8
    %r:8 = scf.for %rr = %c0 to %n step %c1 iter_args(%s0 = %a0, %s1 = %a1, %s2 = %a2, %s3 = %a3, %s4 = %a4, %s5 = %a5, %s6 = %a6, %s7 = %a7) -> (!V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8) {
      %wv = vector.load %w[%rr, %c0] : !W, !V8
      %row = arith.addi %r0, %rr : index
      %x0 = memref.load %x[%b, %h, %row, %cb] : !O
      %xv0 = vector.broadcast %x0 : f32 to !V8
      %n0 = math.fma %wv, %xv0, %s0 : !V8
      %x1 = memref.load %x[%b, %h, %row, %cb1] : !O
      %xv1 = vector.broadcast %x1 : f32 to !V8
      %n1 = math.fma %wv, %xv1, %s1 : !V8
      %x2 = memref.load %x[%b, %h, %row, %cb2] : !O
      %xv2 = vector.broadcast %x2 : f32 to !V8
      %n2 = math.fma %wv, %xv2, %s2 : !V8
      %x3 = memref.load %x[%b, %h, %row, %cb3] : !O
      %xv3 = vector.broadcast %x3 : f32 to !V8
      %n3 = math.fma %wv, %xv3, %s3 : !V8
      %x4 = memref.load %x[%b, %h, %row, %cb4] : !O
      %xv4 = vector.broadcast %x4 : f32 to !V8
      %n4 = math.fma %wv, %xv4, %s4 : !V8
      %x5 = memref.load %x[%b, %h, %row, %cb5] : !O
      %xv5 = vector.broadcast %x5 : f32 to !V8
      %n5 = math.fma %wv, %xv5, %s5 : !V8
      %x6 = memref.load %x[%b, %h, %row, %cb6] : !O
      %xv6 = vector.broadcast %x6 : f32 to !V8
      %n6 = math.fma %wv, %xv6, %s6 : !V8
      %x7 = memref.load %x[%b, %h, %row, %cb7] : !O
      %xv7 = vector.broadcast %x7 : f32 to !V8
      %n7 = math.fma %wv, %xv7, %s7 : !V8
      scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !V8, !V8, !V8, !V8, !V8, !V8, !V8, !V8
    }
    vector.store %r#0, %acc[%cb, %c0] : !TV, !V8
    vector.store %r#1, %acc[%cb1, %c0] : !TV, !V8
    vector.store %r#2, %acc[%cb2, %c0] : !TV, !V8
    vector.store %r#3, %acc[%cb3, %c0] : !TV, !V8
    vector.store %r#4, %acc[%cb4, %c0] : !TV, !V8
    vector.store %r#5, %acc[%cb5, %c0] : !TV, !V8
    vector.store %r#6, %acc[%cb6, %c0] : !TV, !V8
    vector.store %r#7, %acc[%cb7, %c0] : !TV, !V8
  }
  return
}

// 8 lanes of the scratch's [D | lse] rows (b, h, r0 + l), rows past `end`
// read as `pad`.
func.func private @row_values(%scratch: !SCRATCH, %first: index, %r0: index, %end: index,
                              %pad: f32) -> !V8 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %init = vector.broadcast %pad : f32 to !V8
  %v = scf.for %l = %c0 to %c8 step %c1 iter_args(%acc = %init) -> (!V8) {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    %next = scf.if %in -> !V8 {
      %at = arith.addi %first, %r : index
      %x = memref.load %scratch[%at] : !SCRATCH
      %w = vector.insert %x, %acc[%l] : f32 into !V8
      scf.yield %w : !V8
    } else {
      scf.yield %acc : !V8
    }
    scf.yield %next : !V8
  }
  return %v : !V8
}

func.func @pejit_backward_rows(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %scratch: !SCRATCH,
                               %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %GROUP = arith.constant ${GROUP} : index
  %HQ = arith.constant ${HQ} : index
  %DV = arith.constant ${DV} : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninfv = arith.constant dense<0xFF800000> : !V8
  %zv = arith.constant dense<0.0> : !V8
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : !I8
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  %b, %h, %i0, %i1 = func.call @query_item(%item, %SQ)
      : (index, index) -> (index, index, index, index)
  %hk = arith.divui %h, %GROUP : index
  %head = func.call @row_index(%b, %h, %c0, %SQ) : (index, index, index, index) -> index
  // D_i = dO_i . O_i, one row at a time.
  scf.for %i = %i0 to %i1 step %c1 {
    %acc = scf.for %c = %c0 to %DV step %c8 iter_args(%a = %zv) -> (!V8) {
      %x = vector.load %do[%b, %h, %i, %c] : !O, !V8
      %y = vector.load %o[%b, %h, %i, %c] : !O, !V8
      %n = math.fma %x, %y, %a : !V8
      scf.yield %n : !V8
    }
    %d = vector.reduction <add>, %acc : !V8 into f32
    %row = arith.addi %head, %i : index
    memref.store %d, %scratch[%row] : !SCRATCH
  }
  // lse of 8 rows per vector, by the online rule over the keys any of them
  // sees: m' = max(m, s), l' = l e^(m - m') + e^(s - m').
  %Qt = memref.alloca() {alignment = 64 : i64} : !TD
  scf.for %r0 = %i0 to %i1 step %c8 {
    func.call @rows_t_q(%q, %Qt, %b, %h, %r0, %i1) : (!Q, !TD, index, index, index, index) -> ()
    %last0 = arith.addi %r0, %c7 : index
    %i1m = arith.subi %i1, %c1 : index
    %last = arith.minui %last0, %i1m : index
    %lo, %unused = func.call @key_range(%r0, %SQ, %SKV) : (index, index, index) -> (index, index)
    %unused2, %hi = func.call @key_range(%last, %SQ, %SKV) : (index, index, index) -> (index, index)
    %r0i = arith.index_cast %r0 : index to i32
    %r0v = vector.broadcast %r0i : i32 to !I8
    %qi = arith.addi %r0v, %iota : !I8
    %i1i = arith.index_cast %i1 : index to i32
    %i1v = vector.broadcast %i1i : i32 to !I8
    %valid = arith.cmpi slt, %qi, %i1v : !I8
    %ml:2 = scf.for %j = %lo to %hi step %c1 iter_args(%m = %ninfv, %l = %zv) -> (!V8, !V8) {
      %dot = func.call @tile_dot_k(%Qt, %k, %b, %hk, %j) : (!TD, !K, index, index, index) -> !V8
      %ji = arith.index_cast %j : index to i32
      %kj = vector.broadcast %ji : i32 to !I8
      %s0, %f = func.call @score8(%dot, %b, %h, %qi, %kj, %SQ, %SKV, %e0, %e1, %e2, %e3)
          : (!V8, index, index, !I8, !I8, index, index, !E0, !E1, !E2, !E3) -> (!V8, !V8)
      %vis = func.call @visible8(%qi, %kj, %OFF, %valid)
          : (!I8, !I8, index, vector<8xi1>) -> vector<8xi1>
      %s = arith.select %vis, %s0, %ninfv : vector<8xi1>, !V8
      %mn = arith.maximumf %m, %s : !V8
      // A lane with no score yet (mn = -inf) keeps l = 0.
      %none = arith.cmpf oeq, %mn, %ninfv : !V8
      %d1 = arith.subf %m, %mn : !V8
      %d1s = arith.select %none, %zv, %d1 : vector<8xi1>, !V8
      %x1 = func.call @exp_v8(%d1s) : (!V8) -> !V8
      %l1 = arith.mulf %l, %x1 : !V8
      %d2 = arith.subf %s, %mn : !V8
      %d2s = arith.select %none, %ninfv, %d2 : vector<8xi1>, !V8
      %x2 = func.call @exp_v8(%d2s) : (!V8) -> !V8
      %l2 = arith.addf %l1, %x2 : !V8
      scf.yield %mn, %l2 : !V8, !V8
    }
    %log = math.log %ml#1 : !V8
    %lse0 = arith.addf %ml#0, %log : !V8
    %empty = arith.cmpf oeq, %ml#1, %zv : !V8
    %lse = arith.select %empty, %ninfv, %lse0 : vector<8xi1>, !V8
    scf.for %l = %c0 to %c8 step %c1 {
      %r = arith.addi %r0, %l : index
      %in = arith.cmpi ult, %r, %i1 : index
      scf.if %in {
        %x = vector.extract %lse[%l] : f32 from !V8
        %row = arith.addi %head, %r : index
        %lrow = arith.addi %ROWS, %row : index
        memref.store %x, %scratch[%lrow] : !SCRATCH
      }
    }
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
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %BN = arith.constant ${BN} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %GROUP = arith.constant ${GROUP} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %scale = arith.constant dense<${SCALE}> : !V8
  %zv = arith.constant dense<0.0> : !V8
  %ninf = arith.constant 0xFF800000 : f32
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : !I8
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
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
  %Kt = memref.alloca() {alignment = 64 : i64} : !TD
  %Vt = memref.alloca() {alignment = 64 : i64} : !TV
  %dKt = memref.alloca() {alignment = 64 : i64} : !TD
  %dVt = memref.alloca() {alignment = 64 : i64} : !TV
  %Pw = memref.alloca() {alignment = 64 : i64} : !W
  %DEw = memref.alloca() {alignment = 64 : i64} : !W
  %c64 = arith.constant 64 : index
  // 8 keys per vector: keys g0 .. g0 + 7 of the tile, transposed.
  scf.for %g0 = %j0 to %j1 step %c8 {
    func.call @rows_t_k(%k, %Kt, %b, %hk, %g0, %j1) : (!K, !TD, index, index, index, index) -> ()
    func.call @rows_t_v(%v, %Vt, %b, %hk, %g0, %j1) : (!V, !TV, index, index, index, index) -> ()
    scf.for %c = %c0 to %D step %c1 {
      vector.store %zv, %dKt[%c, %c0] : !TD, !V8
    }
    scf.for %c = %c0 to %DV step %c1 {
      vector.store %zv, %dVt[%c, %c0] : !TV, !V8
    }
    %last0 = arith.addi %g0, %c7 : index
    %j1m = arith.subi %j1, %c1 : index
    %last = arith.minui %last0, %j1m : index
    %ilo, %unused = func.call @query_range(%g0, %SQ, %SKV) : (index, index, index) -> (index, index)
    %unused2, %ihi = func.call @query_range(%last, %SQ, %SKV)
        : (index, index, index) -> (index, index)
    %g0i = arith.index_cast %g0 : index to i32
    %g0v = vector.broadcast %g0i : i32 to !I8
    %kj = arith.addi %g0v, %iota : !I8
    %j1i = arith.index_cast %j1 : index to i32
    %j1v = vector.broadcast %j1i : i32 to !I8
    %valid = arith.cmpi slt, %kj, %j1v : !I8
    scf.for %g = %c0 to %GROUP step %c1 {
      %h = arith.addi %h0, %g : index
      %head = func.call @row_index(%b, %h, %c0, %SQ) : (index, index, index, index) -> index
      // Rows in chunks of 64: P and dE of the chunk first, then
      // dV^T += P^T dO and dK^T += dE^T Q.
      scf.for %ic = %ilo to %ihi step %c64 {
        %ic_end0 = arith.addi %ic, %c64 : index
        %ic_end = arith.minui %ic_end0, %ihi : index
        %ni = arith.subi %ic_end, %ic : index
        scf.for %ii0 = %c0 to %ni step %c1 {
          %i = arith.addi %ic, %ii0 : index
          %row = arith.addi %head, %i : index
          %lrow = arith.addi %ROWS, %row : index
          %dr = memref.load %scratch[%row] : !SCRATCH
          %lse = memref.load %scratch[%lrow] : !SCRATCH
          %ii = arith.index_cast %i : index to i32
          %qi = vector.broadcast %ii : i32 to !I8
          %dot = func.call @tile_dot_q(%Kt, %q, %b, %h, %i) : (!TD, !Q, index, index, index) -> !V8
          %s, %f = func.call @score8(%dot, %b, %h, %qi, %kj, %SQ, %SKV, %e0, %e1, %e2, %e3)
              : (!V8, index, index, !I8, !I8, index, index, !E0, !E1, !E2, !E3) -> (!V8, !V8)
          %vis0 = func.call @visible8(%qi, %kj, %OFF, %valid)
              : (!I8, !I8, index, vector<8xi1>) -> vector<8xi1>
          // A row whose every score is -inf (a -inf bias) has lse = -inf: P 0.
          %seen = arith.cmpf one, %lse, %ninf : f32
          %seenv = vector.broadcast %seen : i1 to vector<8xi1>
          %vis = arith.andi %vis0, %seenv : vector<8xi1>
          %lsev = vector.broadcast %lse : f32 to !V8
          %sl = arith.subf %s, %lsev : !V8
          %p0 = func.call @exp_v8(%sl) : (!V8) -> !V8
          %p = arith.select %vis, %p0, %zv : vector<8xi1>, !V8
          %dp = func.call @tile_dot_o(%Vt, %do, %b, %h, %i) : (!TV, !O, index, index, index) -> !V8
          %drv = vector.broadcast %dr : f32 to !V8
          %dpd = arith.subf %dp, %drv : !V8
          %ds = arith.mulf %p, %dpd : !V8
          %dsf = arith.mulf %ds, %f : !V8
          %de = arith.mulf %dsf, %scale : !V8
          scf.if %has_grads {
            scf.for %l = %c0 to %c8 step %c1 {
              %jl = arith.addi %g0, %l : index
              %in = arith.cmpi ult, %jl, %j1 : index
              scf.if %in {
                %dsl = vector.extract %ds[%l] : f32 from !V8
                %kji = arith.index_cast %jl : index to i32
                attn.score_grad %dsl, batch %b, head %h, query %ii, key %kji
                    operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
                    partial(%scratch : !SCRATCH, %pbase) offsets ${GRAD_OFFSETS}
                    lengths(%SQ, %SKV)
              }
            }
          }
          vector.store %p, %Pw[%ii0, %c0] : !W, !V8
          vector.store %de, %DEw[%ii0, %c0] : !W, !V8
        }
        func.call @accumulate_o(%dVt, %Pw, %ni, %do, %b, %h, %ic)
            : (!TV, !W, index, !O, index, index, index) -> ()
        func.call @accumulate_q(%dKt, %DEw, %ni, %q, %b, %h, %ic)
            : (!TD, !W, index, !Q, index, index, index) -> ()
      }
    }
    // The keys' rows of dk and dv, back from the transposed accumulators.
    scf.for %l = %c0 to %c8 step %c1 {
      %jl = arith.addi %g0, %l : index
      %in = arith.cmpi ult, %jl, %j1 : index
      scf.if %in {
        scf.for %c = %c0 to %D step %c1 {
          %x = memref.load %dKt[%c, %l] : !TD
          memref.store %x, %dk[%b, %hk, %jl, %c] : !K
        }
        scf.for %c = %c0 to %DV step %c1 {
          %x = memref.load %dVt[%c, %l] : !TV
          memref.store %x, %dv[%b, %hk, %jl, %c] : !V
        }
      }
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
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %HQ = arith.constant ${HQ} : index
  %GROUP = arith.constant ${GROUP} : index
  %D = arith.constant ${D} : index
  %scale = arith.constant dense<${SCALE}> : !V8
  %zv = arith.constant dense<0.0> : !V8
  %ninfv = arith.constant dense<0xFF800000> : !V8
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : !I8
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  %b, %h, %i0, %i1 = func.call @query_item(%item, %SQ)
      : (index, index) -> (index, index, index, index)
  %hk = arith.divui %h, %GROUP : index
  %head = func.call @row_index(%b, %h, %c0, %SQ) : (index, index, index, index) -> index
  %lhead = arith.addi %ROWS, %head : index
  %Qt = memref.alloca() {alignment = 64 : i64} : !TD
  %dOt = memref.alloca() {alignment = 64 : i64} : !TV
  %dQt = memref.alloca() {alignment = 64 : i64} : !TD
  %DEw = memref.alloca() {alignment = 64 : i64} : !W
  %c64 = arith.constant 64 : index
  // 8 rows per vector: rows r0 .. r0 + 7, transposed.
  scf.for %r0 = %i0 to %i1 step %c8 {
    func.call @rows_t_q(%q, %Qt, %b, %h, %r0, %i1) : (!Q, !TD, index, index, index, index) -> ()
    func.call @rows_t_o(%do, %dOt, %b, %h, %r0, %i1)
        : (!O, !TV, index, index, index, index) -> ()
    scf.for %c = %c0 to %D step %c1 {
      vector.store %zv, %dQt[%c, %c0] : !TD, !V8
    }
    %dr = func.call @row_values(%scratch, %head, %r0, %i1, %zero)
        : (!SCRATCH, index, index, index, f32) -> !V8
    %lse = func.call @row_values(%scratch, %lhead, %r0, %i1, %ninf)
        : (!SCRATCH, index, index, index, f32) -> !V8
    %seen = arith.cmpf one, %lse, %ninfv : !V8
    %last0 = arith.addi %r0, %c7 : index
    %i1m = arith.subi %i1, %c1 : index
    %last = arith.minui %last0, %i1m : index
    %lo, %unused = func.call @key_range(%r0, %SQ, %SKV) : (index, index, index) -> (index, index)
    %unused2, %hi = func.call @key_range(%last, %SQ, %SKV) : (index, index, index) -> (index, index)
    %r0i = arith.index_cast %r0 : index to i32
    %r0v = vector.broadcast %r0i : i32 to !I8
    %qi = arith.addi %r0v, %iota : !I8
    %i1i = arith.index_cast %i1 : index to i32
    %i1v = vector.broadcast %i1i : i32 to !I8
    %valid0 = arith.cmpi slt, %qi, %i1v : !I8
    %valid = arith.andi %valid0, %seen : vector<8xi1>
    // Keys in chunks of 64: dE of the chunk first, then dQ^T += dE^T K.
    scf.for %jc = %lo to %hi step %c64 {
      %jc_end0 = arith.addi %jc, %c64 : index
      %jc_end = arith.minui %jc_end0, %hi : index
      %nj = arith.subi %jc_end, %jc : index
      scf.for %jj = %c0 to %nj step %c1 {
        %j = arith.addi %jc, %jj : index
        %dot = func.call @tile_dot_k(%Qt, %k, %b, %hk, %j) : (!TD, !K, index, index, index) -> !V8
        %ji = arith.index_cast %j : index to i32
        %kj = vector.broadcast %ji : i32 to !I8
        %s, %f = func.call @score8(%dot, %b, %h, %qi, %kj, %SQ, %SKV, %e0, %e1, %e2, %e3)
            : (!V8, index, index, !I8, !I8, index, index, !E0, !E1, !E2, !E3) -> (!V8, !V8)
        %vis = func.call @visible8(%qi, %kj, %OFF, %valid)
            : (!I8, !I8, index, vector<8xi1>) -> vector<8xi1>
        %sl = arith.subf %s, %lse : !V8
        %p0 = func.call @exp_v8(%sl) : (!V8) -> !V8
        %p = arith.select %vis, %p0, %zv : vector<8xi1>, !V8
        %dp = func.call @tile_dot_v(%dOt, %v, %b, %hk, %j) : (!TV, !V, index, index, index) -> !V8
        %dpd = arith.subf %dp, %dr : !V8
        %ds = arith.mulf %p, %dpd : !V8
        %dsf = arith.mulf %ds, %f : !V8
        %de = arith.mulf %dsf, %scale : !V8
        vector.store %de, %DEw[%jj, %c0] : !W, !V8
      }
      func.call @accumulate_k(%dQt, %DEw, %nj, %k, %b, %hk, %jc)
          : (!TD, !W, index, !K, index, index, index) -> ()
    }
    scf.for %l = %c0 to %c8 step %c1 {
      %r = arith.addi %r0, %l : index
      %in = arith.cmpi ult, %r, %i1 : index
      scf.if %in {
        scf.for %c = %c0 to %D step %c1 {
          %x = memref.load %dQt[%c, %l] : !TD
          memref.store %x, %dq[%b, %h, %r, %c] : !Q
        }
      }
    }
  }
  return
}
