// The x86 backward's helpers (templates/x86/attention_backward.mlir, whose
// type aliases and parameters they use): the mask on L lanes, the key and
// row ranges a mask leaves, an item's rows, 8-lane exp, scores with the
// score hooks, tiles transposed on the stack, their dot products and the
// chunked accumulation of dQ, dK, dV. Put in place of the kernel's
// `// @pejit-blocks` line before substitution.

// Whether row i sees key j (bottom-right aligned, docs/semantics.md), on 8
// lanes of (i, j) pairs: causal j <= i + OFF, a right window
// j <= i + OFF + RIGHT, a left window j >= i + OFF - WINDOW; and `valid`
// (lanes inside the tile).
func.func private @visible(%i: !VI, %j: !VI, %OFF: index, %valid: vector<${L}xi1>)
    -> vector<${L}xi1> {
  %causal = arith.constant ${CAUSAL}
  %has_right = arith.constant ${HAS_RIGHT}
  %has_window = arith.constant ${HAS_WINDOW}
  %RIGHT = arith.constant ${RIGHT} : i32
  %WINDOW = arith.constant ${WINDOW} : i32
  %off = arith.index_cast %OFF : index to i32
  %offv = vector.broadcast %off : i32 to !VI
  %aligned = arith.addi %i, %offv : !VI
  %before = arith.cmpi sle, %j, %aligned : !VI
  %rightv = vector.broadcast %RIGHT : i32 to !VI
  %right_end = arith.addi %aligned, %rightv : !VI
  %in_right = arith.cmpi sle, %j, %right_end : !VI
  %windowv = vector.broadcast %WINDOW : i32 to !VI
  %left_end = arith.subi %aligned, %windowv : !VI
  %in_left = arith.cmpi sge, %j, %left_end : !VI
  %true = arith.constant dense<true> : vector<${L}xi1>
  %c_ok = arith.select %causal, %before, %true : vector<${L}xi1>
  %r_ok = arith.select %has_right, %in_right, %true : vector<${L}xi1>
  %w_ok = arith.select %has_window, %in_left, %true : vector<${L}xi1>
  %a = arith.andi %c_ok, %r_ok : vector<${L}xi1>
  %b = arith.andi %a, %w_ok : vector<${L}xi1>
  %v = arith.andi %b, %valid : vector<${L}xi1>
  return %v : vector<${L}xi1>
}

// exp(x) on L lanes through @exp2_vec (x <= 0 here: s - lse, s - max).
func.func private @exp_lanes(%x: !VF) -> !VF {
  %log2e = arith.constant dense<1.44269504088896> : !VF
  %y = arith.mulf %x, %log2e : !VF
  %e = func.call @exp2_vec(%y) : (!VF) -> !VF
  return %e : !VF
}

// The scores of L lanes from their dot products: s = softcap(scale dot) +
// bias (the fused score biases, attn.score_mod), and softcap' = 1 - tanh^2
// (1 without a softcap).
func.func private @score(%dot: !VF, %b: index, %h: index, %qi: !VI, %kj: !VI, %SQ: index,
                          %SKV: index, %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3, %qpos: !QPOS,
                          %kpos: !KPOS)
    -> (!VF, !VF) {
  %scale = arith.constant dense<${SCALE}> : !VF
  %one = arith.constant dense<1.0> : !VF
  %s0 = arith.mulf %dot, %scale : !VF
  %has_softcap = arith.constant ${HAS_SOFTCAP}
  %r:2 = scf.if %has_softcap -> (!VF, !VF) {
    %cap = arith.constant dense<${SOFTCAP}> : !VF
    %x = arith.divf %s0, %cap : !VF
    %t = math.tanh %x : !VF
    %s = arith.mulf %t, %cap : !VF
    %tt = arith.mulf %t, %t : !VF
    %f = arith.subf %one, %tt : !VF
    scf.yield %s, %f : !VF, !VF
  } else {
    scf.yield %s0, %one : !VF, !VF
  }
  %biased = attn.score_mod %r#0, batch %b, head %h, query %qi, key %kj
      operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) positions(%qpos, %kpos : !QPOS, !KPOS)
      lengths(%SQ, %SKV) : !VF, !VI
  return %biased, %r#1 : !VF, !VF
}

// The keys [lo, hi) row i sees (the mask of @visible solved for j).
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

// L rows r0 .. r0 + L - 1 of x (Q, K, V or dO; rows past `end` as zeros), its
// channels [0, n), transposed: T[c, l].
func.func private @rows_t(%x: !ROWS, %t: !TD, %n: index, %b: index, %h: index, %r0: index,
                          %end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %zero = arith.constant 0.0 : f32
  scf.for %l = %c0 to %cL step %c1 {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    scf.for %c = %c0 to %n step %c1 {
      %v = scf.if %in -> f32 {
        %x1 = memref.load %x[%b, %h, %r, %c] : !ROWS
        scf.yield %x1 : f32
      } else {
        scf.yield %zero : f32
      }
      memref.store %v, %t[%c, %l] : !TD
    }
  }
  return
}

// sum_c T[c, :] * x[c] on L lanes: L rows (or keys) of a transposed tile
// against channels [0, N) of one row of x (Q, K, V or dO), broadcast. Eight accumulators, summed
// in a fixed tree at the end: one chain of FMAs would wait on each FMA's
// latency (4 cycles) and run at a quarter of the FMA ports' rate.
func.func private @tile_dot(%t: !TD, %x: !ROWS, %N: index, %b: index, %h: index, %r: index) -> !VF {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %zv = arith.constant dense<0.0> : !VF
  %acc:8 = scf.for %c = %c0 to %N step %c8 iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv) -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
    %i0 = arith.addi %c, %c0 : index
    %col0 = vector.load %t[%i0, %c0] : !TD, !VF
    %x0 = memref.load %x[%b, %h, %r, %i0] : !ROWS
    %xv0 = vector.broadcast %x0 : f32 to !VF
    %n0 = math.fma %col0, %xv0, %a0 : !VF
    %i1 = arith.addi %c, %c1 : index
    %col1 = vector.load %t[%i1, %c0] : !TD, !VF
    %x1 = memref.load %x[%b, %h, %r, %i1] : !ROWS
    %xv1 = vector.broadcast %x1 : f32 to !VF
    %n1 = math.fma %col1, %xv1, %a1 : !VF
    %i2 = arith.addi %c, %c2 : index
    %col2 = vector.load %t[%i2, %c0] : !TD, !VF
    %x2 = memref.load %x[%b, %h, %r, %i2] : !ROWS
    %xv2 = vector.broadcast %x2 : f32 to !VF
    %n2 = math.fma %col2, %xv2, %a2 : !VF
    %i3 = arith.addi %c, %c3 : index
    %col3 = vector.load %t[%i3, %c0] : !TD, !VF
    %x3 = memref.load %x[%b, %h, %r, %i3] : !ROWS
    %xv3 = vector.broadcast %x3 : f32 to !VF
    %n3 = math.fma %col3, %xv3, %a3 : !VF
    %i4 = arith.addi %c, %c4 : index
    %col4 = vector.load %t[%i4, %c0] : !TD, !VF
    %x4 = memref.load %x[%b, %h, %r, %i4] : !ROWS
    %xv4 = vector.broadcast %x4 : f32 to !VF
    %n4 = math.fma %col4, %xv4, %a4 : !VF
    %i5 = arith.addi %c, %c5 : index
    %col5 = vector.load %t[%i5, %c0] : !TD, !VF
    %x5 = memref.load %x[%b, %h, %r, %i5] : !ROWS
    %xv5 = vector.broadcast %x5 : f32 to !VF
    %n5 = math.fma %col5, %xv5, %a5 : !VF
    %i6 = arith.addi %c, %c6 : index
    %col6 = vector.load %t[%i6, %c0] : !TD, !VF
    %x6 = memref.load %x[%b, %h, %r, %i6] : !ROWS
    %xv6 = vector.broadcast %x6 : f32 to !VF
    %n6 = math.fma %col6, %xv6, %a6 : !VF
    %i7 = arith.addi %c, %c7 : index
    %col7 = vector.load %t[%i7, %c0] : !TD, !VF
    %x7 = memref.load %x[%b, %h, %r, %i7] : !ROWS
    %xv7 = vector.broadcast %x7 : f32 to !VF
    %n7 = math.fma %col7, %xv7, %a7 : !VF
    scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
  }
  %s01 = arith.addf %acc#0, %acc#1 : !VF
  %s23 = arith.addf %acc#2, %acc#3 : !VF
  %s45 = arith.addf %acc#4, %acc#5 : !VF
  %s67 = arith.addf %acc#6, %acc#7 : !VF
  %s03 = arith.addf %s01, %s23 : !VF
  %s47 = arith.addf %s45, %s67 : !VF
  %s = arith.addf %s03, %s47 : !VF
  return %s : !VF
}

// acc[c, :] += sum_{r < n} w[r, :] x[r0 + r, c]: a chunk's weights (P or
// dE, L lanes per row) times its rows of x (Q, K or dO; channels [0, N)), 8 channels at a time
// in registers: per row, one load of w and 8 broadcasts for 8 FMAs, and
// the accumulator tile read and written once per chunk.
func.func private @accumulate(%acc: !TD, %w: !W, %n: index, %x: !ROWS, %N: index, %b: index,
                             %h: index, %r0: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  scf.for %cb = %c0 to %N step %c8 {
    %a0 = vector.load %acc[%cb, %c0] : !TD, !VF
    %cb1 = arith.addi %cb, %c1 : index
    %a1 = vector.load %acc[%cb1, %c0] : !TD, !VF
    %cb2 = arith.addi %cb, %c2 : index
    %a2 = vector.load %acc[%cb2, %c0] : !TD, !VF
    %cb3 = arith.addi %cb, %c3 : index
    %a3 = vector.load %acc[%cb3, %c0] : !TD, !VF
    %cb4 = arith.addi %cb, %c4 : index
    %a4 = vector.load %acc[%cb4, %c0] : !TD, !VF
    %cb5 = arith.addi %cb, %c5 : index
    %a5 = vector.load %acc[%cb5, %c0] : !TD, !VF
    %cb6 = arith.addi %cb, %c6 : index
    %a6 = vector.load %acc[%cb6, %c0] : !TD, !VF
    %cb7 = arith.addi %cb, %c7 : index
    %a7 = vector.load %acc[%cb7, %c0] : !TD, !VF
    %r:8 = scf.for %rr = %c0 to %n step %c1 iter_args(%s0 = %a0, %s1 = %a1, %s2 = %a2, %s3 = %a3, %s4 = %a4, %s5 = %a5, %s6 = %a6, %s7 = %a7) -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
      %wv = vector.load %w[%rr, %c0] : !W, !VF
      %row = arith.addi %r0, %rr : index
      %x0 = memref.load %x[%b, %h, %row, %cb] : !ROWS
      %xv0 = vector.broadcast %x0 : f32 to !VF
      %n0 = math.fma %wv, %xv0, %s0 : !VF
      %x1 = memref.load %x[%b, %h, %row, %cb1] : !ROWS
      %xv1 = vector.broadcast %x1 : f32 to !VF
      %n1 = math.fma %wv, %xv1, %s1 : !VF
      %x2 = memref.load %x[%b, %h, %row, %cb2] : !ROWS
      %xv2 = vector.broadcast %x2 : f32 to !VF
      %n2 = math.fma %wv, %xv2, %s2 : !VF
      %x3 = memref.load %x[%b, %h, %row, %cb3] : !ROWS
      %xv3 = vector.broadcast %x3 : f32 to !VF
      %n3 = math.fma %wv, %xv3, %s3 : !VF
      %x4 = memref.load %x[%b, %h, %row, %cb4] : !ROWS
      %xv4 = vector.broadcast %x4 : f32 to !VF
      %n4 = math.fma %wv, %xv4, %s4 : !VF
      %x5 = memref.load %x[%b, %h, %row, %cb5] : !ROWS
      %xv5 = vector.broadcast %x5 : f32 to !VF
      %n5 = math.fma %wv, %xv5, %s5 : !VF
      %x6 = memref.load %x[%b, %h, %row, %cb6] : !ROWS
      %xv6 = vector.broadcast %x6 : f32 to !VF
      %n6 = math.fma %wv, %xv6, %s6 : !VF
      %x7 = memref.load %x[%b, %h, %row, %cb7] : !ROWS
      %xv7 = vector.broadcast %x7 : f32 to !VF
      %n7 = math.fma %wv, %xv7, %s7 : !VF
      scf.yield %n0, %n1, %n2, %n3, %n4, %n5, %n6, %n7 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
    }
    vector.store %r#0, %acc[%cb, %c0] : !TD, !VF
    vector.store %r#1, %acc[%cb1, %c0] : !TD, !VF
    vector.store %r#2, %acc[%cb2, %c0] : !TD, !VF
    vector.store %r#3, %acc[%cb3, %c0] : !TD, !VF
    vector.store %r#4, %acc[%cb4, %c0] : !TD, !VF
    vector.store %r#5, %acc[%cb5, %c0] : !TD, !VF
    vector.store %r#6, %acc[%cb6, %c0] : !TD, !VF
    vector.store %r#7, %acc[%cb7, %c0] : !TD, !VF
  }
  return
}

// L lanes of the scratch's [D | lse] rows (b, h, r0 + l), rows past `end`
// read as `pad`.
func.func private @row_values(%scratch: !SCRATCH, %first: index, %r0: index, %end: index,
                              %pad: f32) -> !VF {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %init = vector.broadcast %pad : f32 to !VF
  %v = scf.for %l = %c0 to %cL step %c1 iter_args(%acc = %init) -> (!VF) {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    %next = scf.if %in -> !VF {
      %at = arith.addi %first, %r : index
      %x = memref.load %scratch[%at] : !SCRATCH
      %w = vector.insert %x, %acc[%l] : f32 into !VF
      scf.yield %w : !VF
    } else {
      scf.yield %acc : !VF
    }
    scf.yield %next : !VF
  }
  return %v : !VF
}
