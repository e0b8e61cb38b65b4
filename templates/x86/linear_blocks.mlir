// The blocks of the x86 linear attention template
// (templates/x86/linear_attention.mlir), put in place of its
// `// @pejit-blocks` line before parameter substitution and parsing: the
// types and parameters are the ones that file defines.
//   @prepare_keys  a key chunk as Kt (softmax_keys: weights, S rescaled)
//   @add_keys      S += Kt . V, z += the chunk's denominator rows
//   @row_factors   per query row: the running z, its 1 / (q^ . z), and for
//                  softmax_keys the coefficients q_ic / z_i[c]
//   @mask_scores   causal mask of a chunk against its own keys
//   @emit_rows     O rows times their factors, as the output type
// The matmul every step uses, @gemm, is templates/x86/linear_gemm.mlir.

// Every tile zero (once per item).
func.func private @zero_tiles(%t0: !TILE, %t1: !TILE, %t2: !TILE, %t3: !TILE, %t4: !TILE,
                              %kt: !KT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %zv = arith.constant dense<0.0> : !V8
  scf.for %r = %c0 to %R step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      vector.store %zv, %t0[%r, %c] : !TILE, !V8
      vector.store %zv, %t1[%r, %c] : !TILE, !V8
      vector.store %zv, %t2[%r, %c] : !TILE, !V8
      vector.store %zv, %t3[%r, %c] : !TILE, !V8
      vector.store %zv, %t4[%r, %c] : !TILE, !V8
    }
  }
  scf.for %c = %c0 to %D step %c1 {
    scf.for %r = %c0 to %R step %c8 {
      vector.store %zv, %kt[%c, %r] : !KT, !V8
    }
  }
  return
}

// Rows [start, start + n) of Q (isKey false) or K, batch b, as the
// numerator tile (num) and the denominator tile (den): phi(R x) in both, or
// R phi(x) in num and phi(x) in den.
func.func private @load_query_rows(%rows: !ROWS, %n: index, %start: index, %b: index,
                                   %scratch: !SCRATCH, %sq: index, %skv: index, %num: !TILE,
                                   %den: !TILE) {
  %on_numerator = arith.constant ${ON_NUMERATOR}
  scf.if %on_numerator {
    func.call @phi_rows_from(%rows, %n, %num, %den) : (!ROWS, index, !TILE, !TILE) -> ()
    attn.qk_transform %num, %n, %start, %b, %scratch lengths(%sq, %skv) : !TILE, !SCRATCH
  } else {
    attn.qk_transform %num from %rows, %n, %start, %b, %scratch lengths(%sq, %skv)
        : !TILE from !ROWS, !SCRATCH
    func.call @phi_rows(%num, %n, %den) : (!TILE, index, !TILE) -> ()
  }
  return
}

func.func private @load_key_rows(%rows: !ROWS, %n: index, %start: index, %b: index,
                                 %scratch: !SCRATCH, %sq: index, %skv: index, %num: !TILE,
                                 %den: !TILE) {
  %on_numerator = arith.constant ${ON_NUMERATOR}
  scf.if %on_numerator {
    func.call @phi_rows_from(%rows, %n, %num, %den) : (!ROWS, index, !TILE, !TILE) -> ()
    attn.qk_transform %num, %n, %start, %b, %scratch key lengths(%sq, %skv) : !TILE, !SCRATCH
  } else {
    attn.qk_transform %num from %rows, %n, %start, %b, %scratch key lengths(%sq, %skv)
        : !TILE from !ROWS, !SCRATCH
    func.call @phi_rows(%num, %n, %den) : (!TILE, index, !TILE) -> ()
  }
  return
}

// num[r] = den[r] = phi(rows[r]) widened to f32, r < n (one pass).
func.func private @phi_rows_from(%rows: !ROWS, %n: index, %num: !TILE, %den: !TILE) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  scf.for %r = %c0 to %n step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      %x = vector.load %rows[%r, %c] : !ROWS, !IN8
      %w = func.call @widen8(%x) : (!IN8) -> !V8
      %y = func.call @phi8(%w) : (!V8) -> !V8
      vector.store %y, %num[%r, %c] : !TILE, !V8
      vector.store %y, %den[%r, %c] : !TILE, !V8
    }
  }
  return
}

// tile[r] = phi(tile[r]) and copy[r] = tile[r], r < n.
func.func private @phi_rows(%tile: !TILE, %n: index, %copy: !TILE) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  scf.for %r = %c0 to %n step %c1 {
    scf.for %c = %c0 to %D step %c8 {
      %x = vector.load %tile[%r, %c] : !TILE, !V8
      %y = func.call @phi8(%x) : (!V8) -> !V8
      vector.store %y, %tile[%r, %c] : !TILE, !V8
      vector.store %y, %copy[%r, %c] : !TILE, !V8
    }
  }
  return
}

// V rows [j0, j0 + n) of KV head kh as f32.
func.func private @load_values(%v: !V, %b: index, %kh: index, %j0: index, %n: index, %vt: !VT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %DV = arith.constant ${DV} : index
  scf.for %j = %c0 to %n step %c1 {
    %jv = arith.addi %j0, %j : index
    scf.for %e = %c0 to %DV step %c8 {
      %x = vector.load %v[%b, %kh, %jv, %e] : !V, !IN8
      %w = func.call @widen8(%x) : (!IN8) -> !V8
      vector.store %w, %vt[%j, %e] : !VT, !V8
    }
  }
  return
}

// A key chunk's n rows as Kt[c, j]: the numerator rows k~, or for
// softmax_keys their weights. Per channel the new max over the old m and
// the chunk, the old terms' factor a = exp(m_old - m_new) applied to S and
// z, and the weights w = exp(k - m_new), also kept in den (z's rows);
// e^x as 2^(x log2 e), both arguments <= 0.
func.func private @prepare_keys(%num: !TILE, %den: !TILE, %n: index, %S: !STATE, %z: !VEC,
                                %m: !VEC, %a: !VEC, %kt: !KT) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %ninf8 = arith.constant dense<0xFF800000> : !V8
  %zero8 = arith.constant dense<0.0> : !V8
  %log2e = arith.constant dense<1.44269504088896341> : !V8
  %source = scf.if %softmax_keys -> !TILE {
    scf.for %c = %c0 to %D step %c8 {
      // z = 0: the channel has seen no key, so its m (0 in a fresh state)
      // does not count.
      %z_old = vector.load %z[%c] : !VEC, !V8
      %m_kept = vector.load %m[%c] : !VEC, !V8
      %empty = arith.cmpf oeq, %z_old, %zero8 : !V8
      %m_old = arith.select %empty, %ninf8, %m_kept : vector<8xi1>, !V8
      %m_new = scf.for %j = %c0 to %n step %c1 iter_args(%mx = %m_old) -> !V8 {
        %k8 = vector.load %num[%j, %c] : !TILE, !V8
        %next = arith.maximumf %mx, %k8 : !V8
        scf.yield %next : !V8
      }
      %d_old = arith.subf %m_old, %m_new : !V8
      %d_old2 = arith.mulf %d_old, %log2e : !V8
      %a8 = func.call @exp2_vec(%d_old2) : (!V8) -> !V8
      %z_new = arith.mulf %z_old, %a8 : !V8
      vector.store %z_new, %z[%c] : !VEC, !V8
      vector.store %m_new, %m[%c] : !VEC, !V8
      vector.store %a8, %a[%c] : !VEC, !V8
      scf.for %j = %c0 to %n step %c1 {
        %k8 = vector.load %num[%j, %c] : !TILE, !V8
        %d_key = arith.subf %k8, %m_new : !V8
        %d_key2 = arith.mulf %d_key, %log2e : !V8
        %w8 = func.call @exp2_vec(%d_key2) : (!V8) -> !V8
        vector.store %w8, %den[%j, %c] : !TILE, !V8
      }
    }
    scf.for %c = %c0 to %D step %c1 {
      %as = memref.load %a[%c] : !VEC
      %a8 = vector.broadcast %as : f32 to !V8
      scf.for %e = %c0 to %DV step %c8 {
        %s = vector.load %S[%c, %e] : !STATE, !V8
        %scaled = arith.mulf %s, %a8 : !V8
        vector.store %scaled, %S[%c, %e] : !STATE, !V8
      }
    }
    scf.yield %den : !TILE
  } else {
    scf.yield %num : !TILE
  }
  func.call @transpose_tile(%source, %kt) : (!TILE, !KT) -> ()
  return
}

// kt[c, j] = src[j, c] for every row of the tile (R and D are multiples of
// 8), in 8 x 8 blocks: unpack pairs of rows, shuffle pairs of pairs, swap
// 128-bit halves (24 shuffles per block: out_k = column k of the block).
// Rows past a short chunk's last are stale finite values: the columns of kt
// they fill are masked or never read.
func.func private @transpose_tile(%src: !TILE, %kt: !KT) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %k1 = arith.constant 1 : index
  %k2 = arith.constant 2 : index
  %k3 = arith.constant 3 : index
  %k4 = arith.constant 4 : index
  %k5 = arith.constant 5 : index
  %k6 = arith.constant 6 : index
  %k7 = arith.constant 7 : index
  scf.for %j0 = %c0 to %R step %c8 {
    scf.for %col = %c0 to %D step %c8 {
      %x0 = vector.load %src[%j0, %col] : !TILE, !V8
      %j1 = arith.addi %j0, %k1 : index
      %x1 = vector.load %src[%j1, %col] : !TILE, !V8
      %j2 = arith.addi %j0, %k2 : index
      %x2 = vector.load %src[%j2, %col] : !TILE, !V8
      %j3 = arith.addi %j0, %k3 : index
      %x3 = vector.load %src[%j3, %col] : !TILE, !V8
      %j4 = arith.addi %j0, %k4 : index
      %x4 = vector.load %src[%j4, %col] : !TILE, !V8
      %j5 = arith.addi %j0, %k5 : index
      %x5 = vector.load %src[%j5, %col] : !TILE, !V8
      %j6 = arith.addi %j0, %k6 : index
      %x6 = vector.load %src[%j6, %col] : !TILE, !V8
      %j7 = arith.addi %j0, %k7 : index
      %x7 = vector.load %src[%j7, %col] : !TILE, !V8
      %u0 = vector.shuffle %x0, %x1 [0, 8, 1, 9, 4, 12, 5, 13] : !V8, !V8
      %u1 = vector.shuffle %x0, %x1 [2, 10, 3, 11, 6, 14, 7, 15] : !V8, !V8
      %u2 = vector.shuffle %x2, %x3 [0, 8, 1, 9, 4, 12, 5, 13] : !V8, !V8
      %u3 = vector.shuffle %x2, %x3 [2, 10, 3, 11, 6, 14, 7, 15] : !V8, !V8
      %u4 = vector.shuffle %x4, %x5 [0, 8, 1, 9, 4, 12, 5, 13] : !V8, !V8
      %u5 = vector.shuffle %x4, %x5 [2, 10, 3, 11, 6, 14, 7, 15] : !V8, !V8
      %u6 = vector.shuffle %x6, %x7 [0, 8, 1, 9, 4, 12, 5, 13] : !V8, !V8
      %u7 = vector.shuffle %x6, %x7 [2, 10, 3, 11, 6, 14, 7, 15] : !V8, !V8
      %v0 = vector.shuffle %u0, %u2 [0, 1, 8, 9, 4, 5, 12, 13] : !V8, !V8
      %v1 = vector.shuffle %u0, %u2 [2, 3, 10, 11, 6, 7, 14, 15] : !V8, !V8
      %v2 = vector.shuffle %u1, %u3 [0, 1, 8, 9, 4, 5, 12, 13] : !V8, !V8
      %v3 = vector.shuffle %u1, %u3 [2, 3, 10, 11, 6, 7, 14, 15] : !V8, !V8
      %v4 = vector.shuffle %u4, %u6 [0, 1, 8, 9, 4, 5, 12, 13] : !V8, !V8
      %v5 = vector.shuffle %u4, %u6 [2, 3, 10, 11, 6, 7, 14, 15] : !V8, !V8
      %v6 = vector.shuffle %u5, %u7 [0, 1, 8, 9, 4, 5, 12, 13] : !V8, !V8
      %v7 = vector.shuffle %u5, %u7 [2, 3, 10, 11, 6, 7, 14, 15] : !V8, !V8
      %y0 = vector.shuffle %v0, %v4 [0, 1, 2, 3, 8, 9, 10, 11] : !V8, !V8
      %y4 = vector.shuffle %v0, %v4 [4, 5, 6, 7, 12, 13, 14, 15] : !V8, !V8
      %y1 = vector.shuffle %v1, %v5 [0, 1, 2, 3, 8, 9, 10, 11] : !V8, !V8
      %y5 = vector.shuffle %v1, %v5 [4, 5, 6, 7, 12, 13, 14, 15] : !V8, !V8
      %y2 = vector.shuffle %v2, %v6 [0, 1, 2, 3, 8, 9, 10, 11] : !V8, !V8
      %y6 = vector.shuffle %v2, %v6 [4, 5, 6, 7, 12, 13, 14, 15] : !V8, !V8
      %y3 = vector.shuffle %v3, %v7 [0, 1, 2, 3, 8, 9, 10, 11] : !V8, !V8
      %y7 = vector.shuffle %v3, %v7 [4, 5, 6, 7, 12, 13, 14, 15] : !V8, !V8
      vector.store %y0, %kt[%col, %j0] : !KT, !V8
      %c1r = arith.addi %col, %k1 : index
      vector.store %y1, %kt[%c1r, %j0] : !KT, !V8
      %c2r = arith.addi %col, %k2 : index
      vector.store %y2, %kt[%c2r, %j0] : !KT, !V8
      %c3r = arith.addi %col, %k3 : index
      vector.store %y3, %kt[%c3r, %j0] : !KT, !V8
      %c4r = arith.addi %col, %k4 : index
      vector.store %y4, %kt[%c4r, %j0] : !KT, !V8
      %c5r = arith.addi %col, %k5 : index
      vector.store %y5, %kt[%c5r, %j0] : !KT, !V8
      %c6r = arith.addi %col, %k6 : index
      vector.store %y6, %kt[%c6r, %j0] : !KT, !V8
      %c7r = arith.addi %col, %k7 : index
      vector.store %y7, %kt[%c7r, %j0] : !KT, !V8
    }
  }
  return
}

// The chunk's n keys into the state: S += Kt[:, :n] . V[:n], z += den rows.
func.func private @add_keys(%kt: !KT, %den: !TILE, %vt: !VT, %n: index, %S: !STATE, %z: !VEC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %true = arith.constant true
  %ktm = memref.cast %kt : !KT to !MAT
  %vtm = memref.cast %vt : !VT to !MAT
  %Sm = memref.cast %S : !STATE to !MAT
  func.call @gemm(%ktm, %vtm, %Sm, %D, %DV, %n, %true)
      : (!MAT, !MAT, !MAT, index, index, index, i1) -> ()
  scf.for %c = %c0 to %D step %c8 {
    %z0 = vector.load %z[%c] : !VEC, !V8
    %zs = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %z0) -> !V8 {
      %k8 = vector.load %den[%j, %c] : !TILE, !V8
      %next = arith.addf %acc, %k8 : !V8
      scf.yield %next : !V8
    }
    vector.store %zs, %z[%c] : !VEC, !V8
  }
  return
}

// Per query row r < nq of the chunk at i0 (keys [lo, hi) its own): lim[r]
// = upto(i0 + r) - lo of those keys it sees; zrun = z plus their den rows;
// factor[r] = 1 / (q^_r . zrun) (1 without a denominator) and zero_row[r]
// when that dot is 0 or the row sees no key (and no state); for
// softmax_keys coef[r, c] = q_rc / zrun[c] (0 where zrun[c] = 0: no key).
func.func private @row_factors(%qnum: !TILE, %qden: !TILE, %kden: !TILE, %nq: index,
                               %i0: index, %lo: index, %off: index, %skv: index, %z: !VEC,
                               %zrun: !VEC, %coef: !TILE, %factor: !RF, %zero_row: !RB,
                               %lim: !RI) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %true = arith.constant true
  %softmax_keys = arith.constant ${SOFTMAX_KEYS}
  %normalize = arith.constant ${NORMALIZE}
  %has_state = arith.constant ${HAS_STATE}
  %no_state = arith.xori %has_state, %true : i1
  scf.for %c = %c0 to %D step %c8 {
    %z8 = vector.load %z[%c] : !VEC, !V8
    vector.store %z8, %zrun[%c] : !VEC, !V8
  }
  %end = scf.for %r = %c0 to %nq step %c1 iter_args(%prev = %c0) -> index {
    %i = arith.addi %i0, %r : index
    %upto = func.call @upto(%i, %off, %skv) : (index, index, index) -> index
    %l = arith.subi %upto, %lo : index
    memref.store %l, %lim[%r] : !RI
    scf.for %j = %prev to %l step %c1 {
      scf.for %c = %c0 to %D step %c8 {
        %k8 = vector.load %kden[%j, %c] : !TILE, !V8
        %z8 = vector.load %zrun[%c] : !VEC, !V8
        %sum = arith.addf %z8, %k8 : !V8
        vector.store %sum, %zrun[%c] : !VEC, !V8
      }
    }
    scf.if %softmax_keys {
      scf.for %c = %c0 to %D step %c8 {
        %q8 = vector.load %qnum[%r, %c] : !TILE, !V8
        %z8 = vector.load %zrun[%c] : !VEC, !V8
        %d8 = arith.divf %q8, %z8 : !V8
        %no_key = arith.cmpf oeq, %z8, %zero8 : !V8
        %k8 = arith.select %no_key, %zero8, %d8 : vector<8xi1>, !V8
        vector.store %k8, %coef[%r, %c] : !TILE, !V8
      }
    }
    %den_sum = scf.if %normalize -> f32 {
      %acc = scf.for %c = %c0 to %D step %c8 iter_args(%acc = %zero8) -> !V8 {
        %q8 = vector.load %qden[%r, %c] : !TILE, !V8
        %z8 = vector.load %zrun[%c] : !VEC, !V8
        %next = math.fma %q8, %z8, %acc : !V8
        scf.yield %next : !V8
      }
      %sum = vector.reduction <add>, %acc : !V8 into f32
      scf.yield %sum : f32
    } else {
      scf.yield %one : f32
    }
    // No key seen (in this call and, with a state, before it), or a zero
    // denominator: a zero row (no epsilon). A state's keys are in S and z.
    %none_here = arith.cmpi eq, %upto, %c0 : index
    %none = arith.andi %none_here, %no_state : i1
    %zero_den = arith.cmpf oeq, %den_sum, %zero : f32
    %zero_r = arith.ori %none, %zero_den : i1
    %recip = arith.divf %one, %den_sum : f32
    %f = arith.select %zero_r, %zero, %recip : f32
    memref.store %f, %factor[%r] : !RF
    memref.store %zero_r, %zero_row[%r] : !RB
    scf.yield %l : index
  }
  return
}

// Row r < nq keeps its scores against the chunk's keys j < lim[r].
func.func private @mask_scores(%sc: !SC, %nq: index, %lim: !RI) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %R = arith.constant ${R} : index
  %zero = arith.constant 0.0 : f32
  scf.for %r = %c0 to %nq step %c1 {
    %l = memref.load %lim[%r] : !RI
    scf.for %j = %l to %R step %c1 {
      memref.store %zero, %sc[%r, %j] : !SC
    }
  }
  return
}

// Output rows i0 + r, r < nq: O[r] times factor[r], narrowed; a zero row
// stays zero even where the state holds inf or NaN.
func.func private @emit_rows(%oacc: !OACC, %nq: index, %factor: !RF, %zero_row: !RB, %o: !O,
                             %b: index, %h: index, %i0: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %DV = arith.constant ${DV} : index
  %zero8 = arith.constant dense<0.0> : !V8
  scf.for %r = %c0 to %nq step %c1 {
    %i = arith.addi %i0, %r : index
    %f = memref.load %factor[%r] : !RF
    %zr = memref.load %zero_row[%r] : !RB
    %f8 = vector.broadcast %f : f32 to !V8
    %zr8 = vector.broadcast %zr : i1 to vector<8xi1>
    scf.for %e = %c0 to %DV step %c8 {
      %x = vector.load %oacc[%r, %e] : !OACC, !V8
      %y = arith.mulf %x, %f8 : !V8
      %clean = arith.select %zr8, %zero8, %y : vector<8xi1>, !V8
      %n = func.call @narrow8(%clean) : (!V8) -> !OUT8
      vector.store %n, %o[%b, %h, %i, %e] : !O, !OUT8
    }
  }
  return
}
