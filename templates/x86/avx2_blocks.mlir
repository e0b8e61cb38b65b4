// Blocks of the x86 AVX2 attention template (templates/x86/avx2_attention.mlir),
// put in place of its `// @pejit-blocks` line before parameter substitution
// and parsing: the types !K,
// !V and !V8 and the parameters are the ones that file defines.
//   @kv_value_rows  the f32 rows of a V tile that P . V reads
//   @key_cache_tile a tile of the key cache (K rotated once per call)
//   @transpose_scaled  Qt = transpose(Qs) * scale
//   @pejit_prepare  K rotated once per call into the key cache
//   @load_key_tile  one K tile read and transformed (RoPE) into a tile
//   @narrow8        8 f32 results to the output type
// The item's tile functions are in avx2_tiles.mlir.

// Key tile jt of K'[b, hk] in the key cache ([B, HKV, nkt, BN, D], nkt =
// ceil(skv / BN)): floats from ((b HKV + hk) nkt + jt) BN D, BN rows of D.
func.func private @key_cache_tile(%kcache: !KCACHE, %b: index, %hk: index, %jt: index,
                                  %nkt: index) -> !KTILE {
  %HKV = arith.constant ${HKV} : index
  %tile_floats = arith.constant ${KTILE_FLOATS} : index
  %bh0 = arith.muli %b, %HKV : index
  %bh = arith.addi %bh0, %hk : index
  %t0 = arith.muli %bh, %nkt : index
  %t = arith.addi %t0, %jt : index
  %off = arith.muli %t, %tile_floats : index
  %tile = memref.reinterpret_cast %kcache to offset: [%off], sizes: [${BN}, ${D}],
      strides: [${D}, 1] : !KCACHE to !KTILE
  return %tile : !KTILE
}

// Whether K is rotated once per call: ${KONCE} (K is transformed, and at a
// static shape the plan chose it) and a key cache the runtime passed (of 0
// floats when a call's plan does not use one).
func.func private @key_cache_used(%kcache: !KCACHE) -> i1 {
  %c0 = arith.constant 0 : index
  %allowed = arith.constant ${KONCE}
  %floats = memref.dim %kcache, %c0 : !KCACHE
  %some = arith.cmpi ugt, %floats, %c0 : index
  %used = arith.andi %allowed, %some : i1
  return %used : i1
}

// ceil(skv / BN): the key tiles of K (and of the key cache).
func.func private @key_tiles(%k: !K) -> index {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %BN = arith.constant ${BN} : index
  %skv = memref.dim %k, %c2 : !K
  %up0 = arith.addi %skv, %BN : index
  %up = arith.subi %up0, %c1 : index
  %nkt = arith.divui %up, %BN : index
  return %nkt : index
}

// Rows [j0, j0 + nk) of V[b, hk] as f32 rows: a view of V itself (f32, full
// Q tiles or one row: %view_v) or those rows copied (widened) into Vs
// (InstantiateX86Template.cpp).
func.func private @kv_value_rows(%v: !V, %Vs: memref<${BN}x${DV}xf32>, %b: index, %hk: index,
                                 %j0: index, %nk: index, %view_v: i1) -> !VROWS {
  ${VALUE_ROWS}
}

func.func private @narrow_lanes(%x: !VF) -> !VOUT {
  ${NARROW8}
}

// Qt = transpose(Qs) * scale in 8 x 8 register blocks: unpack, shufps and
// 128-bit permutes, 24 shuffles per block (scalar code took 2% of the kernel).
func.func private @transpose_scaled(%Qs: memref<${BM}x${D}xf32>, %Qt: memref<${D}x${BM}xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %BM = arith.constant ${BM} : index
  %D = arith.constant ${D} : index
  %scale = arith.constant ${SCALE} : f32
  %scale_v = vector.broadcast %scale : f32 to vector<8xf32>
  scf.for %r = %c0 to %BM step %c8 {
    scf.for %d = %c0 to %D step %c8 {
      %x0 = vector.load %Qs[%r, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %r1 = arith.addi %r, %c1 : index
      %x1 = vector.load %Qs[%r1, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %r2 = arith.addi %r, %c2 : index
      %x2 = vector.load %Qs[%r2, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %r3 = arith.addi %r, %c3 : index
      %x3 = vector.load %Qs[%r3, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %r4 = arith.addi %r, %c4 : index
      %x4 = vector.load %Qs[%r4, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %r5 = arith.addi %r, %c5 : index
      %x5 = vector.load %Qs[%r5, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %r6 = arith.addi %r, %c6 : index
      %x6 = vector.load %Qs[%r6, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %r7 = arith.addi %r, %c7 : index
      %x7 = vector.load %Qs[%r7, %d] : memref<${BM}x${D}xf32>, vector<8xf32>
      %t0 = vector.shuffle %x0, %x1 [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xf32>, vector<8xf32>
      %t1 = vector.shuffle %x0, %x1 [2, 10, 3, 11, 6, 14, 7, 15] : vector<8xf32>, vector<8xf32>
      %t2 = vector.shuffle %x2, %x3 [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xf32>, vector<8xf32>
      %t3 = vector.shuffle %x2, %x3 [2, 10, 3, 11, 6, 14, 7, 15] : vector<8xf32>, vector<8xf32>
      %t4 = vector.shuffle %x4, %x5 [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xf32>, vector<8xf32>
      %t5 = vector.shuffle %x4, %x5 [2, 10, 3, 11, 6, 14, 7, 15] : vector<8xf32>, vector<8xf32>
      %t6 = vector.shuffle %x6, %x7 [0, 8, 1, 9, 4, 12, 5, 13] : vector<8xf32>, vector<8xf32>
      %t7 = vector.shuffle %x6, %x7 [2, 10, 3, 11, 6, 14, 7, 15] : vector<8xf32>, vector<8xf32>
      %u0 = vector.shuffle %t0, %t2 [0, 1, 8, 9, 4, 5, 12, 13] : vector<8xf32>, vector<8xf32>
      %u1 = vector.shuffle %t0, %t2 [2, 3, 10, 11, 6, 7, 14, 15] : vector<8xf32>, vector<8xf32>
      %u2 = vector.shuffle %t1, %t3 [0, 1, 8, 9, 4, 5, 12, 13] : vector<8xf32>, vector<8xf32>
      %u3 = vector.shuffle %t1, %t3 [2, 3, 10, 11, 6, 7, 14, 15] : vector<8xf32>, vector<8xf32>
      %u4 = vector.shuffle %t4, %t6 [0, 1, 8, 9, 4, 5, 12, 13] : vector<8xf32>, vector<8xf32>
      %u5 = vector.shuffle %t4, %t6 [2, 3, 10, 11, 6, 7, 14, 15] : vector<8xf32>, vector<8xf32>
      %u6 = vector.shuffle %t5, %t7 [0, 1, 8, 9, 4, 5, 12, 13] : vector<8xf32>, vector<8xf32>
      %u7 = vector.shuffle %t5, %t7 [2, 3, 10, 11, 6, 7, 14, 15] : vector<8xf32>, vector<8xf32>
      %y0 = vector.shuffle %u0, %u4 [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
      %y4 = vector.shuffle %u0, %u4 [4, 5, 6, 7, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
      %y1 = vector.shuffle %u1, %u5 [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
      %y5 = vector.shuffle %u1, %u5 [4, 5, 6, 7, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
      %y2 = vector.shuffle %u2, %u6 [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
      %y6 = vector.shuffle %u2, %u6 [4, 5, 6, 7, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
      %y3 = vector.shuffle %u3, %u7 [0, 1, 2, 3, 8, 9, 10, 11] : vector<8xf32>, vector<8xf32>
      %y7 = vector.shuffle %u3, %u7 [4, 5, 6, 7, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
      %z0 = arith.mulf %y0, %scale_v : vector<8xf32>
      vector.store %z0, %Qt[%d, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
      %z1 = arith.mulf %y1, %scale_v : vector<8xf32>
      %d1 = arith.addi %d, %c1 : index
      vector.store %z1, %Qt[%d1, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
      %z2 = arith.mulf %y2, %scale_v : vector<8xf32>
      %d2 = arith.addi %d, %c2 : index
      vector.store %z2, %Qt[%d2, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
      %z3 = arith.mulf %y3, %scale_v : vector<8xf32>
      %d3 = arith.addi %d, %c3 : index
      vector.store %z3, %Qt[%d3, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
      %z4 = arith.mulf %y4, %scale_v : vector<8xf32>
      %d4 = arith.addi %d, %c4 : index
      vector.store %z4, %Qt[%d4, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
      %z5 = arith.mulf %y5, %scale_v : vector<8xf32>
      %d5 = arith.addi %d, %c5 : index
      vector.store %z5, %Qt[%d5, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
      %z6 = arith.mulf %y6, %scale_v : vector<8xf32>
      %d6 = arith.addi %d, %c6 : index
      vector.store %z6, %Qt[%d6, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
      %z7 = arith.mulf %y7, %scale_v : vector<8xf32>
      %d7 = arith.addi %d, %c7 : index
      vector.store %z7, %Qt[%d7, %r] : memref<${D}x${BM}xf32>, vector<8xf32>
    }
  }
  return
}

// After the prologue, as `step` calls on all cores, when K is rotated once
// per call (the runtime passes a key cache): job t = (b, hk, key tile jt),
// t = first, first + step, ..., transforms K rows [jt BN, jt BN + nk) into
// the key cache tile K'[b, hk, jt] (rows past skv zero); %sq is the call's
// query length (the tables' layout). Items then read rotated K
// tiles where they are instead of rotating each K tile once per Q tile
// (ceil(SQ / BM) times per call). pejit.cold: strength reduction on this
// loop nest costs ~20 ms of backend time and buys nothing measurable.
func.func @pejit_prepare(%k: !K, %kcache: !KCACHE, %scratch: !SCRATCH, %sq: index,
                         %first: index, %step: index)
    attributes {llvm.emit_c_interface, pejit.cold} {
  %c0 = arith.constant 0 : index
  %HKV = arith.constant ${HKV} : index
  %nkt = func.call @key_tiles(%k) : (!K) -> index
  %batch = memref.dim %k, %c0 : !K
  %bh_all = arith.muli %batch, %HKV : index
  %jobs = arith.muli %bh_all, %nkt : index
  scf.for %t = %first to %jobs step %step {
    %jt = arith.remui %t, %nkt : index
    %bh = arith.divui %t, %nkt : index
    %hk = arith.remui %bh, %HKV : index
    %b = arith.divui %bh, %HKV : index
    %kt = func.call @key_cache_tile(%kcache, %b, %hk, %jt, %nkt)
        : (!KCACHE, index, index, index, index) -> !KTILE
    func.call @load_key_tile(%k, %kt, %scratch, %b, %hk, %jt, %sq)
        : (!K, !KTILE, !SCRATCH, index, index, index, index) -> ()
  }
  return
}

// Key tile jt of K[b, hk] into kt (the Ks tile or a key cache tile): its nk
// rows read from K and transformed in one pass (RoPE), the rows past SKV
// zero. The items (per tile) and @pejit_prepare (once per call) both load
// K tiles this way.
func.func private @load_key_tile(%k: !K, %kt: !KTILE, %scratch: !SCRATCH, %b: index,
                                 %hk: index, %jt: index, %sq: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %c2 = arith.constant 2 : index
  %SKV = memref.dim %k, %c2 : !K
  %zv = arith.constant dense<0.0> : !VF
  %j0 = arith.muli %jt, %BN : index
  %k_left = arith.subi %SKV, %j0 : index
  %nk = arith.minui %k_left, %BN : index
  %k_rows = memref.subview %k[%b, %hk, %j0, 0] [1, 1, %nk, ${D}] [1, 1, 1, 1]
      : !K to !KROWS
  attn.qk_transform %kt from %k_rows, %nk, %j0, %b, %scratch key lengths(%sq, %SKV)
      : !KTILE from !KROWS, !SCRATCH
  scf.for %r = %nk to %BN step %c1 {
    scf.for %d = %c0 to %D step %cL {
      vector.store %zv, %kt[%r, %d] : !KTILE, !VF
    }
  }
  return
}

// A fused value term (Shaw's a^V; docs/hooks.md "Value term"). VT[m BM + r]
// is the sum of query row i0 + r's probabilities over the keys of bucket m,
// rescaled by the online softmax exactly as Os is. Per KV tile, with P in St
// and alpha in A:
//   VT[m, r] = VT[m, r] * alpha[r];   VT[bucket(i0 + r, j0 + jr), r] += P[jr, r]
// Lanes are 8 query rows, so a gather/scatter never has two lanes on one
// address; when all 8 share a bucket (keys farther than the buckets reach,
// most of a long sequence), their sums are adjacent: one load and store.
func.func @pejit_value_term_tile(%VT: memref<${VT_FLOATS}xf32>, %St: memref<${BN}x${BM}xf32>,
                                 %A: memref<${BM}xf32>, %b: index, %h: index, %i0: index,
                                 %j0: index, %nql: index, %e0: !E0, %e1: !E1, %e2: !E2,
                                 %e3: !E3, %qpos: !QPOS, %kpos: !KPOS, %sq: index,
                                 %skv: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %BM = arith.constant ${BM} : index
  %BN = arith.constant ${BN} : index
  %NB = arith.constant ${VT_BUCKETS} : index
  %BM_i = arith.constant ${BM} : i32
  %iota32 = arith.constant dense<${IOTA}> : vector<${L}xi32>
  %all = arith.constant dense<true> : vector<${L}xi1>
  %zv = arith.constant dense<0.0> : vector<${L}xf32>
  %i0_i = arith.index_cast %i0 : index to i32
  %i0_v = vector.broadcast %i0_i : i32 to vector<${L}xi32>
  %bm_v = vector.broadcast %BM_i : i32 to vector<${L}xi32>
  scf.for %iv = %c0 to %nql step %cL {
    %alpha = vector.load %A[%iv] : memref<${BM}xf32>, vector<${L}xf32>
    scf.for %m = %c0 to %NB step %c1 {
      %m_row = arith.muli %m, %BM : index
      %at = arith.addi %m_row, %iv : index
      %acc = vector.load %VT[%at] : memref<${VT_FLOATS}xf32>, vector<${L}xf32>
      %scaled = arith.mulf %acc, %alpha : vector<${L}xf32>
      vector.store %scaled, %VT[%at] : memref<${VT_FLOATS}xf32>, vector<${L}xf32>
    }
    %iv_i = arith.index_cast %iv : index to i32
    %iv_v = vector.broadcast %iv_i : i32 to vector<${L}xi32>
    %rows = arith.addi %iv_v, %iota32 : vector<${L}xi32>
    %q_idx = arith.addi %i0_v, %rows : vector<${L}xi32>
    scf.for %jr = %c0 to %BN step %c1 {
      %j = arith.addi %j0, %jr : index
      %j_i = arith.index_cast %j : index to i32
      %k_idx = vector.broadcast %j_i : i32 to vector<${L}xi32>
      %bucket = attn.value_term_bucket batch %b, head %h, query %q_idx, key %k_idx
          operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) positions(%qpos, %kpos : !QPOS, !KPOS)
          lengths(%sq, %skv) : vector<${L}xi32>
      %p = vector.load %St[%jr, %iv] : memref<${BN}x${BM}xf32>, vector<${L}xf32>
      %m0 = vector.extract %bucket[0] : i32 from vector<${L}xi32>
      %m0_v = vector.broadcast %m0 : i32 to vector<${L}xi32>
      %same = arith.cmpi eq, %bucket, %m0_v : vector<${L}xi32>
      %one_bucket = vector.reduction <and>, %same : vector<${L}xi1> into i1
      scf.if %one_bucket {
        %m0_idx = arith.index_cast %m0 : i32 to index
        %row0 = arith.muli %m0_idx, %BM : index
        %at0 = arith.addi %row0, %iv : index
        %old = vector.load %VT[%at0] : memref<${VT_FLOATS}xf32>, vector<${L}xf32>
        %new = arith.addf %old, %p : vector<${L}xf32>
        vector.store %new, %VT[%at0] : memref<${VT_FLOATS}xf32>, vector<${L}xf32>
      } else {
        %base = arith.muli %bucket, %bm_v : vector<${L}xi32>
        %at = arith.addi %base, %rows : vector<${L}xi32>
        %old = vector.gather %VT[%c0][%at], %all, %zv
            : memref<${VT_FLOATS}xf32>, vector<${L}xi32>, vector<${L}xi1>, vector<${L}xf32> into vector<${L}xf32>
        %new = arith.addf %old, %p : vector<${L}xf32>
        vector.scatter %VT[%c0][%at], %all, %new
            : memref<${VT_FLOATS}xf32>, vector<${L}xi32>, vector<${L}xi1>, vector<${L}xf32>
      }
    }
  }
  return
}

// Once per query tile, before the division by l:
//   Os[r, :] += sum_m VT[m, r] * row(m)      (row(m) = a^V[m] for Shaw)
func.func @pejit_value_term_finish(%Os: memref<${BM}x${DV}xf32>, %VT: memref<${VT_FLOATS}xf32>,
                                   %b: index, %h: index, %nq: index, %e0: !E0, %e1: !E1,
                                   %e2: !E2, %e3: !E3) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %BM = arith.constant ${BM} : index
  %DV = arith.constant ${DV} : index
  %NB = arith.constant ${VT_BUCKETS} : index
  scf.for %m = %c0 to %NB step %c1 {
    %m_row = arith.muli %m, %BM : index
    scf.for %d = %c0 to %DV step %cL {
      %row = attn.value_term_row batch %b, head %h, bucket %m, channel %d
          operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : vector<${L}xf32>
      scf.for %r = %c0 to %nq step %c1 {
        %at = arith.addi %m_row, %r : index
        %w = memref.load %VT[%at] : memref<${VT_FLOATS}xf32>
        %wv = vector.broadcast %w : f32 to vector<${L}xf32>
        %o = vector.load %Os[%r, %d] : memref<${BM}x${DV}xf32>, vector<${L}xf32>
        %o1 = vector.fma %wv, %row, %o : vector<${L}xf32>
        vector.store %o1, %Os[%r, %d] : memref<${BM}x${DV}xf32>, vector<${L}xf32>
      }
    }
  }
  return
}
