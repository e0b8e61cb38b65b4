// The blocks of the grouped decode's bf16 key tile (@pejit_decode_tile_bf16,
// avx512_bf16_decode.mlir): the row copies, the 16 x 16 transpose and S's
// dot per 4 heads, and P . V with pairs of keys in each f32 lane (one
// vdpbf16ps per pair, head and 16 columns). Put with avx512_bf16_decode.mlir.

// Os[hb + g] = Os[hb + g] alpha_g + P[hb + g] . Vc over the pairs of keys
// [p_lo, p_hi), g < 4: per pair, Vc's two rows interleaved (pairs along
// keys). 64 columns per pass (16 sums), then 32 where DV % 64 == 32. The
// tile's sum starts from 0 and joins Os once (blocked summation, as the f32
// tile). Vc's rows that no head sees are zeros.
func.func private @pv_heads_bf16(%Vc: memref<${BN32}x${DV}xbf16>, %PP: memref<8x${BN32}xi32>,
                                 %Ab: memref<16xf32>, %Os: memref<${BM}x${DV}xf32>,
                                 %p_lo: index, %p_hi: index, %hb: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c48 = arith.constant 48 : index
  %c64 = arith.constant 64 : index
  %DV = arith.constant ${DV} : index
  %zv = arith.constant dense<0.0> : !VF
  %z = arith.constant dense<0.0> : vector<32xbf16>
  %hb1 = arith.addi %hb, %c1 : index
  %hb2 = arith.addi %hb, %c2 : index
  %hb3 = arith.addi %hb, %c3 : index
  %DV64_0 = arith.divui %DV, %c64 : index
  %DV64 = arith.muli %DV64_0, %c64 : index
  scf.for %cb = %c0 to %DV64 step %c64 {
    %cb16 = arith.addi %cb, %c16 : index
    %cb32 = arith.addi %cb, %c32 : index
    %cb48 = arith.addi %cb, %c48 : index
    %acc:16 = scf.for %p = %p_lo to %p_hi step %c1
        iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv, %a8 = %zv, %a9 = %zv, %a10 = %zv, %a11 = %zv, %a12 = %zv, %a13 = %zv, %a14 = %zv, %a15 = %zv)
        -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
      %x0:2 = func.call @value_pairs(%Vc, %p, %cb)
          : (memref<${BN32}x${DV}xbf16>, index, index) -> (vector<32xbf16>, vector<32xbf16>)
      %x1:2 = func.call @value_pairs(%Vc, %p, %cb32)
          : (memref<${BN32}x${DV}xbf16>, index, index) -> (vector<32xbf16>, vector<32xbf16>)
      %r:16 = func.call @pv_pair_step(%PP, %hb, %p, %x0#0, %x0#1, %x1#0, %x1#1, %a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7, %a8, %a9, %a10, %a11, %a12, %a13, %a14, %a15)
          : (memref<8x${BN32}xi32>, index, index, vector<32xbf16>, vector<32xbf16>,
             vector<32xbf16>, vector<32xbf16>, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
      scf.yield %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6, %r#7, %r#8, %r#9, %r#10, %r#11, %r#12, %r#13, %r#14, %r#15 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
    } {pejit.unroll_factor = 2 : i64}
    func.call @os_add(%Os, %Ab, %hb, %cb, %acc#0) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb, %cb16, %acc#1) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb, %cb32, %acc#2) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb, %cb48, %acc#3) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb1, %cb, %acc#4) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb1, %cb16, %acc#5) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb1, %cb32, %acc#6) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb1, %cb48, %acc#7) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb2, %cb, %acc#8) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb2, %cb16, %acc#9) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb2, %cb32, %acc#10) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb2, %cb48, %acc#11) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb3, %cb, %acc#12) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb3, %cb16, %acc#13) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb3, %cb32, %acc#14) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb3, %cb48, %acc#15) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
  }
  // The last 32 columns where DV % 64 == 32.
  scf.for %cb = %DV64 to %DV step %c32 {
    %cb16 = arith.addi %cb, %c16 : index
    %tail:8 = scf.for %p = %p_lo to %p_hi step %c1
        iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv)
        -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
      %x:2 = func.call @value_pairs(%Vc, %p, %cb)
          : (memref<${BN32}x${DV}xbf16>, index, index) -> (vector<32xbf16>, vector<32xbf16>)
      %r:16 = func.call @pv_pair_step(%PP, %hb, %p, %x#0, %x#1, %z, %z, %a0, %a1, %zv, %zv, %a2, %a3, %zv, %zv, %a4, %a5, %zv, %zv, %a6, %a7, %zv, %zv)
          : (memref<8x${BN32}xi32>, index, index, vector<32xbf16>, vector<32xbf16>,
             vector<32xbf16>, vector<32xbf16>, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
      scf.yield %r#0, %r#1, %r#4, %r#5, %r#8, %r#9, %r#12, %r#13 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
    }
    func.call @os_add(%Os, %Ab, %hb, %cb, %tail#0) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb, %cb16, %tail#1) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb1, %cb, %tail#2) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb1, %cb16, %tail#3) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb2, %cb, %tail#4) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb2, %cb16, %tail#5) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb3, %cb, %tail#6) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
    func.call @os_add(%Os, %Ab, %hb3, %cb16, %tail#7) : (memref<${BM}x${DV}xf32>, memref<16xf32>, index, index, !VF) -> ()
  }
  return
}

// acc[4g + c] += PP[hb + g, p] . x_c (g, c < 4): one pair of keys for 4
// heads and 64 columns, 16 vdpbf16ps.
func.func private @pv_pair_step(%PP: memref<8x${BN32}xi32>, %hb: index, %p: index,
                                %x0: vector<32xbf16>, %x1: vector<32xbf16>,
                                %x2: vector<32xbf16>, %x3: vector<32xbf16>,
                                %a0: !VF, %a1: !VF, %a2: !VF, %a3: !VF, %a4: !VF, %a5: !VF, %a6: !VF, %a7: !VF, %a8: !VF, %a9: !VF, %a10: !VF, %a11: !VF, %a12: !VF, %a13: !VF, %a14: !VF, %a15: !VF)
    -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
  %c1 = arith.constant 1 : index
  %w0 = func.call @broadcast_pair_pp(%PP, %hb, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
  %r0 = func.call @dot_bf16(%a0, %w0, %x0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r1 = func.call @dot_bf16(%a1, %w0, %x1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r2 = func.call @dot_bf16(%a2, %w0, %x2) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r3 = func.call @dot_bf16(%a3, %w0, %x3) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %h1 = arith.addi %hb, %c1 : index
  %w1 = func.call @broadcast_pair_pp(%PP, %h1, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
  %r4 = func.call @dot_bf16(%a4, %w1, %x0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r5 = func.call @dot_bf16(%a5, %w1, %x1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r6 = func.call @dot_bf16(%a6, %w1, %x2) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r7 = func.call @dot_bf16(%a7, %w1, %x3) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %h2 = arith.addi %h1, %c1 : index
  %w2 = func.call @broadcast_pair_pp(%PP, %h2, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
  %r8 = func.call @dot_bf16(%a8, %w2, %x0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r9 = func.call @dot_bf16(%a9, %w2, %x1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r10 = func.call @dot_bf16(%a10, %w2, %x2) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r11 = func.call @dot_bf16(%a11, %w2, %x3) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %h3 = arith.addi %h2, %c1 : index
  %w3 = func.call @broadcast_pair_pp(%PP, %h3, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
  %r12 = func.call @dot_bf16(%a12, %w3, %x0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r13 = func.call @dot_bf16(%a13, %w3, %x1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r14 = func.call @dot_bf16(%a14, %w3, %x2) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r15 = func.call @dot_bf16(%a15, %w3, %x3) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  return %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11, %r12, %r13, %r14, %r15 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
}

// Os[row, cb .. cb + 15] = Os[...] alpha_row + sum.
func.func private @os_add(%Os: memref<${BM}x${DV}xf32>, %Ab: memref<16xf32>, %row: index,
                          %cb: index, %sum: !VF) {
  %al_s = memref.load %Ab[%row] : memref<16xf32>
  %al = vector.broadcast %al_s : f32 to !VF
  %o = vector.load %Os[%row, %cb] : memref<${BM}x${DV}xf32>, !VF
  %n = vector.fma %o, %al, %sum : !VF
  vector.store %n, %Os[%row, %cb] : memref<${BM}x${DV}xf32>, !VF
  return
}

// PP[g, p]: one pair of keys' probabilities, in every lane.
func.func private @broadcast_pair_pp(%PP: memref<8x${BN32}xi32>, %g: index, %p: index)
    -> vector<32xbf16> {
  %w = memref.load %PP[%g, %p] : memref<8x${BN32}xi32>
  %v = vector.broadcast %w : i32 to vector<16xi32>
  %x = vector.bitcast %v : vector<16xi32> to vector<32xbf16>
  return %x : vector<32xbf16>
}

// Vc's rows 2p and 2p + 1, columns cb .. cb + 31, interleaved into pairs of
// keys: (V[2p, c], V[2p + 1, c]) for c < cb + 16, then the next 16 columns.
func.func private @value_pairs(%Vc: memref<${BN32}x${DV}xbf16>, %p: index, %cb: index)
    -> (vector<32xbf16>, vector<32xbf16>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %ja = arith.muli %p, %c2 : index
  %jb = arith.addi %ja, %c1 : index
  %va0 = vector.load %Vc[%ja, %cb] : memref<${BN32}x${DV}xbf16>, vector<32xbf16>
  %vb0 = vector.load %Vc[%jb, %cb] : memref<${BN32}x${DV}xbf16>, vector<32xbf16>
  %va = vector.bitcast %va0 : vector<32xbf16> to vector<32xi16>
  %vb = vector.bitcast %vb0 : vector<32xbf16> to vector<32xi16>
  %x0 = vector.shuffle %va, %vb [0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47] : vector<32xi16>, vector<32xi16>
  %x1 = vector.shuffle %va, %vb [16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63] : vector<32xi16>, vector<32xi16>
  %y0 = vector.bitcast %x0 : vector<32xi16> to vector<32xbf16>
  %y1 = vector.bitcast %x1 : vector<32xi16> to vector<32xbf16>
  return %y0, %y1 : vector<32xbf16>, vector<32xbf16>
}

// Kc[r] = K[b, hk, j0 + r] for r in [copy_begin, copy_end), row by row;
// rows [zero_begin, copy_begin) and [copy_end, zero_end) are zeros.
func.func private @copy_rows_k(%x: !K, %xc: memref<${BN32}x${D}xbf16>, %b: index, %hk: index,
    %j0: index, %copy_begin: index, %copy_end: index, %zero_end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %W = arith.constant ${D} : index
  %z = arith.constant dense<0.0> : vector<32xbf16>
  scf.for %r = %copy_begin to %copy_end step %c1 {
    %j = arith.addi %j0, %r : index
    scf.for %d = %c0 to %W step %c32 {
      %row = vector.load %x[%b, %hk, %j, %d] : !K, vector<32xbf16>
      vector.store %row, %xc[%r, %d] : memref<${BN32}x${D}xbf16>, vector<32xbf16>
    }
  }
  scf.for %r = %copy_end to %zero_end step %c1 {
    scf.for %d = %c0 to %W step %c32 {
      vector.store %z, %xc[%r, %d] : memref<${BN32}x${D}xbf16>, vector<32xbf16>
    }
  }
  return
}

// Vc[r] = V[b, hk, j0 + r] for r in [copy_begin, copy_end), row by row;
// rows [zero_begin, copy_begin) and [copy_end, zero_end) are zeros.
func.func private @copy_rows_v(%x: !V, %xc: memref<${BN32}x${DV}xbf16>, %b: index, %hk: index,
    %j0: index, %zero_begin: index, %copy_begin: index, %copy_end: index, %zero_end: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %W = arith.constant ${DV} : index
  %z = arith.constant dense<0.0> : vector<32xbf16>
  scf.for %r = %zero_begin to %copy_begin step %c1 {
    scf.for %d = %c0 to %W step %c32 {
      vector.store %z, %xc[%r, %d] : memref<${BN32}x${DV}xbf16>, vector<32xbf16>
    }
  }
  scf.for %r = %copy_begin to %copy_end step %c1 {
    %j = arith.addi %j0, %r : index
    scf.for %d = %c0 to %W step %c32 {
      %row = vector.load %x[%b, %hk, %j, %d] : !V, vector<32xbf16>
      vector.store %row, %xc[%r, %d] : memref<${BN32}x${DV}xbf16>, vector<32xbf16>
    }
  }
  scf.for %r = %copy_end to %zero_end step %c1 {
    scf.for %d = %c0 to %W step %c32 {
      vector.store %z, %xc[%r, %d] : memref<${BN32}x${DV}xbf16>, vector<32xbf16>
    }
  }
  return
}

// acc_g + t . QP[hb + g, p] for the 4 heads of block hb: t holds pair p of
// 16 keys, one key per lane.
func.func private @heads_dot_bf16(%QP: memref<8x${D}xi32>, %hb: index, %p: index,
                                  %t: vector<16xi32>, %a0: !VF, %a1: !VF, %a2: !VF, %a3: !VF)
    -> (!VF, !VF, !VF, !VF) {
  %c1 = arith.constant 1 : index
  %x = vector.bitcast %t : vector<16xi32> to vector<32xbf16>
  %h1 = arith.addi %hb, %c1 : index
  %h2 = arith.addi %h1, %c1 : index
  %h3 = arith.addi %h2, %c1 : index
  %w0 = func.call @broadcast_pair_qp(%QP, %hb, %p) : (memref<8x${D}xi32>, index, index) -> vector<32xbf16>
  %w1 = func.call @broadcast_pair_qp(%QP, %h1, %p) : (memref<8x${D}xi32>, index, index) -> vector<32xbf16>
  %w2 = func.call @broadcast_pair_qp(%QP, %h2, %p) : (memref<8x${D}xi32>, index, index) -> vector<32xbf16>
  %w3 = func.call @broadcast_pair_qp(%QP, %h3, %p) : (memref<8x${D}xi32>, index, index) -> vector<32xbf16>
  %r0 = func.call @dot_bf16(%a0, %x, %w0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r1 = func.call @dot_bf16(%a1, %x, %w1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r2 = func.call @dot_bf16(%a2, %x, %w2) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  %r3 = func.call @dot_bf16(%a3, %x, %w3) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  return %r0, %r1, %r2, %r3 : !VF, !VF, !VF, !VF
}

// QP[g, p]: one pair, in every lane.
func.func private @broadcast_pair_qp(%QP: memref<8x${D}xi32>, %g: index, %p: index)
    -> vector<32xbf16> {
  %w = memref.load %QP[%g, %p] : memref<8x${D}xi32>
  %v = vector.broadcast %w : i32 to vector<16xi32>
  %x = vector.bitcast %v : vector<16xi32> to vector<32xbf16>
  return %x : vector<32xbf16>
}

// Kc's row r, pairs pc .. pc + 15.
func.func private @key_pairs(%Kc: memref<${BN32}x${D}xbf16>, %r: index, %pc: index)
    -> vector<16xi32> {
  %c2 = arith.constant 2 : index
  %d = arith.muli %pc, %c2 : index
  %x = vector.load %Kc[%r, %d] : memref<${BN32}x${D}xbf16>, vector<32xbf16>
  %w = vector.bitcast %x : vector<32xbf16> to vector<16xi32>
  return %w : vector<16xi32>
}

// A 16 x 16 block of i32 transposed in registers: y_c[r] = x_r[c]. Unpacks
// of 32 and 64 bits within 128-bit blocks, then two exchanges of blocks
// (64 shuffles).
func.func private @transpose16x16_i32(%x0: vector<16xi32>, %x1: vector<16xi32>, %x2: vector<16xi32>, %x3: vector<16xi32>, %x4: vector<16xi32>, %x5: vector<16xi32>, %x6: vector<16xi32>, %x7: vector<16xi32>, %x8: vector<16xi32>, %x9: vector<16xi32>, %x10: vector<16xi32>, %x11: vector<16xi32>, %x12: vector<16xi32>, %x13: vector<16xi32>, %x14: vector<16xi32>, %x15: vector<16xi32>)
    -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>) {
  %a0 = vector.shuffle %x0, %x1 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a1 = vector.shuffle %x0, %x1 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %a2 = vector.shuffle %x2, %x3 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a3 = vector.shuffle %x2, %x3 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %a4 = vector.shuffle %x4, %x5 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a5 = vector.shuffle %x4, %x5 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %a6 = vector.shuffle %x6, %x7 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a7 = vector.shuffle %x6, %x7 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %a8 = vector.shuffle %x8, %x9 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a9 = vector.shuffle %x8, %x9 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %a10 = vector.shuffle %x10, %x11 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a11 = vector.shuffle %x10, %x11 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %a12 = vector.shuffle %x12, %x13 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a13 = vector.shuffle %x12, %x13 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %a14 = vector.shuffle %x14, %x15 [0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29] : vector<16xi32>, vector<16xi32>
  %a15 = vector.shuffle %x14, %x15 [2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31] : vector<16xi32>, vector<16xi32>
  %b0 = vector.shuffle %a0, %a2 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b1 = vector.shuffle %a0, %a2 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %b2 = vector.shuffle %a1, %a3 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b3 = vector.shuffle %a1, %a3 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %b4 = vector.shuffle %a4, %a6 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b5 = vector.shuffle %a4, %a6 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %b6 = vector.shuffle %a5, %a7 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b7 = vector.shuffle %a5, %a7 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %b8 = vector.shuffle %a8, %a10 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b9 = vector.shuffle %a8, %a10 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %b10 = vector.shuffle %a9, %a11 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b11 = vector.shuffle %a9, %a11 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %b12 = vector.shuffle %a12, %a14 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b13 = vector.shuffle %a12, %a14 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %b14 = vector.shuffle %a13, %a15 [0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29] : vector<16xi32>, vector<16xi32>
  %b15 = vector.shuffle %a13, %a15 [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31] : vector<16xi32>, vector<16xi32>
  %e0 = vector.shuffle %b0, %b4 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %f0 = vector.shuffle %b0, %b4 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %g0 = vector.shuffle %b8, %b12 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %h0 = vector.shuffle %b8, %b12 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %e1 = vector.shuffle %b1, %b5 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %f1 = vector.shuffle %b1, %b5 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %g1 = vector.shuffle %b9, %b13 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %h1 = vector.shuffle %b9, %b13 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %e2 = vector.shuffle %b2, %b6 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %f2 = vector.shuffle %b2, %b6 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %g2 = vector.shuffle %b10, %b14 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %h2 = vector.shuffle %b10, %b14 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %e3 = vector.shuffle %b3, %b7 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %f3 = vector.shuffle %b3, %b7 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %g3 = vector.shuffle %b11, %b15 [0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27] : vector<16xi32>, vector<16xi32>
  %h3 = vector.shuffle %b11, %b15 [4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y0 = vector.shuffle %e0, %g0 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y1 = vector.shuffle %e1, %g1 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y2 = vector.shuffle %e2, %g2 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y3 = vector.shuffle %e3, %g3 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y4 = vector.shuffle %f0, %h0 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y5 = vector.shuffle %f1, %h1 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y6 = vector.shuffle %f2, %h2 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y7 = vector.shuffle %f3, %h3 [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
  %y8 = vector.shuffle %e0, %g0 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y9 = vector.shuffle %e1, %g1 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y10 = vector.shuffle %e2, %g2 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y11 = vector.shuffle %e3, %g3 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y12 = vector.shuffle %f0, %h0 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y13 = vector.shuffle %f1, %h1 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y14 = vector.shuffle %f2, %h2 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  %y15 = vector.shuffle %f3, %h3 [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi32>, vector<16xi32>
  return %y0, %y1, %y2, %y3, %y4, %y5, %y6, %y7, %y8, %y9, %y10, %y11, %y12, %y13, %y14, %y15 : vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>
}
