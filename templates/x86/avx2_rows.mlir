// The one-query-row functions of the x86 AVX2 attention template
// (templates/x86/avx2_attention.mlir), put after its tile functions in place
// of its `// @pejit-blocks` line before substitution and parsing. An item
// whose query tile has one row (a decode step, sq = 1, or the last row of a
// prefill) takes these instead of the 6 x 16 register blocks, which compute
// 16 query columns and 6 output rows whatever the tile holds: for one row
// that is 16x the FMAs of S and 6x those of P . V.
//   @pejit_s_row   St[:, 0] = scale (Ks . q) for one KV tile, dot products
//   @pejit_pv_row  Os[0] = Os[0] * alpha + P[:, 0]^T . V for one KV tile (the
//                  tile's sum from 0, then added: blocked summation)
//   @key_rows_in_place, @key_row_stride  K tile rows read where they are

// St[jr, 0 : 8] = (scale Kt[jr] . Qs[0], 0, ..., 0) for the tile's BN key
// rows: the dot product in 8-lane pieces down d, 4 key rows at a time (4
// independent chains), then one horizontal sum per row. Lanes 1 .. 7 are
// rows past the tile's one (0 here, never stored). Rows past nk (K rows
// past skv, zero in Kt) get scores the item's mask hides.
func.func @pejit_s_row(%St: memref<${BN}x${BM}xf32>, %Qs: memref<${BM}x${D}xf32>, %Kt: !KTILE)
    attributes {passthrough = ["noinline"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %cL = arith.constant ${L} : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %zv = arith.constant dense<0.0> : !VF
  %scale = arith.constant ${SCALE} : f32
  // 4 key rows per trip, the rest (BN % 4, BN being a multiple of 6) one by one.
  %BN4 = arith.divui %BN, %c4 : index
  %jr_4end = arith.muli %BN4, %c4 : index
  scf.for %jr = %c0 to %jr_4end step %c4 {
    %jr1 = arith.addi %jr, %c1 : index
    %jr2 = arith.addi %jr, %c2 : index
    %jr3 = arith.addi %jr, %c3 : index
    %acc:4 = scf.for %d = %c0 to %D step %cL
        iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv) -> (!VF, !VF, !VF, !VF) {
      %q = vector.load %Qs[%c0, %d] : memref<${BM}x${D}xf32>, !VF
      %k0 = vector.load %Kt[%jr, %d] : !KTILE, !VF
      %k1 = vector.load %Kt[%jr1, %d] : !KTILE, !VF
      %k2 = vector.load %Kt[%jr2, %d] : !KTILE, !VF
      %k3 = vector.load %Kt[%jr3, %d] : !KTILE, !VF
      %b0 = vector.fma %k0, %q, %a0 : !VF
      %b1 = vector.fma %k1, %q, %a1 : !VF
      %b2 = vector.fma %k2, %q, %a2 : !VF
      %b3 = vector.fma %k3, %q, %a3 : !VF
      scf.yield %b0, %b1, %b2, %b3 : !VF, !VF, !VF, !VF
    }
    func.call @pejit_store_score(%St, %jr, %acc#0, %scale)
        : (memref<${BN}x${BM}xf32>, index, !VF, f32) -> ()
    func.call @pejit_store_score(%St, %jr1, %acc#1, %scale)
        : (memref<${BN}x${BM}xf32>, index, !VF, f32) -> ()
    func.call @pejit_store_score(%St, %jr2, %acc#2, %scale)
        : (memref<${BN}x${BM}xf32>, index, !VF, f32) -> ()
    func.call @pejit_store_score(%St, %jr3, %acc#3, %scale)
        : (memref<${BN}x${BM}xf32>, index, !VF, f32) -> ()
  }
  scf.for %jr = %jr_4end to %BN step %c1 {
    %acc = scf.for %d = %c0 to %D step %cL iter_args(%a = %zv) -> (!VF) {
      %q = vector.load %Qs[%c0, %d] : memref<${BM}x${D}xf32>, !VF
      %k = vector.load %Kt[%jr, %d] : !KTILE, !VF
      %b = vector.fma %k, %q, %a : !VF
      scf.yield %b : !VF
    }
    func.call @pejit_store_score(%St, %jr, %acc, %scale)
        : (memref<${BN}x${BM}xf32>, index, !VF, f32) -> ()
  }
  return
}

// St[jr, 0 : 8] = (scale * sum(partial), 0, ..., 0).
func.func private @pejit_store_score(%St: memref<${BN}x${BM}xf32>, %jr: index, %partial: !VF,
                                     %scale: f32) {
  %zv = arith.constant dense<0.0> : !VF
  %c0 = arith.constant 0 : index
  %dot = vector.reduction <add>, %partial fastmath<reassoc> : !VF into f32
  %s = arith.mulf %dot, %scale : f32
  %row = vector.insert %s, %zv [0] : f32 into !VF
  vector.store %row, %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !VF
  return
}

// Os[0] = Os[0] * A[0] + sum over the tile's nk keys of P[j, 0] V[j]: the
// row rescaled once, then per key 1 load of V, 1 FMA and 1 store per 8
// channels (the row stays in L1; its d_v / 8 chains are independent, so the
// FMAs are not latency-bound as one accumulator down the keys would be).
// Masked keys have P = 0 exactly, so no key is skipped by the mask here.
func.func @pejit_pv_row(%Os: memref<${BM}x${DV}xf32>, %St: memref<${BN}x${BM}xf32>,
                        %Vr: !VROWS, %A: memref<${BM}xf32>, %nk: index, %pv_base: index)
    attributes {passthrough = ["noinline"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %DV = arith.constant ${DV} : index
  // Only the keys the row sees (@pv_key_ranges' lo0 <= j <= hi0): P is 0
  // at the others, and 0 * a NaN or inf in V would still reach the row.
  %lo0, %hi0, %ra, %rb, %rc, %rd = func.call @pv_key_ranges(%pv_base, %nk)
      : (index, index) -> (index, index, index, index, index, index)
  %j_begin = arith.minsi %ra, %nk : index
  %hi1 = arith.addi %hi0, %c1 : index
  %j_end0 = arith.minsi %hi1, %nk : index
  %j_end = arith.maxsi %j_end0, %j_begin : index
  // The tile's P V summed from 0 in Ts, then Os = Os * alpha + Ts once
  // (blocked summation: one rounding of the running output per tile).
  %Ts = memref.alloca() {alignment = 64 : i64} : memref<${DV}xf32>
  %zv = arith.constant dense<0.0> : !VF
  scf.for %dc = %c0 to %DV step %cL {
    vector.store %zv, %Ts[%dc] : memref<${DV}xf32>, !VF
  }
  scf.for %j = %j_begin to %j_end step %c1 {
    %ps = memref.load %St[%j, %c0] : memref<${BN}x${BM}xf32>
    %p = vector.broadcast %ps : f32 to !VF
    scf.for %dc = %c0 to %DV step %cL {
      %v = vector.load %Vr[%j, %dc] : !VROWS, !VF
      %t = vector.load %Ts[%dc] : memref<${DV}xf32>, !VF
      %t_new = vector.fma %p, %v, %t : !VF
      vector.store %t_new, %Ts[%dc] : memref<${DV}xf32>, !VF
    }
  }
  %alpha_s = memref.load %A[%c0] : memref<${BM}xf32>
  %alpha = vector.broadcast %alpha_s : f32 to !VF
  scf.for %dc = %c0 to %DV step %cL {
    %o = vector.load %Os[%c0, %dc] : memref<${BM}x${DV}xf32>, !VF
    %t = vector.load %Ts[%dc] : memref<${DV}xf32>, !VF
    %o_new = vector.fma %o, %alpha, %t : !VF
    vector.store %o_new, %Os[%c0, %dc] : memref<${BM}x${DV}xf32>, !VF
  }
  return
}

// Rows [j0, j0 + BN) of K[b, hk] as a tile, where they are (f32 K whose
// rows are D floats apart; the item checks). The body is a parameter: that
// view, or, for K the kernel never reads in place, %fallback.
func.func private @key_rows_in_place(%k: !K, %fallback: !KTILE, %b: index, %hk: index,
                                     %j0: index) -> !KTILE {
  ${KEY_ROWS_IN_PLACE}
}

// K's stride between rows (dim 2), in elements.
func.func private @key_row_stride(%k: !K) -> index {
  %base, %offset, %sizes:4, %strides:4 = memref.extract_strided_metadata %k
      : !K -> memref<${T}>, index, index, index, index, index, index, index, index, index
  return %strides#2 : index
}
