// The grouped decode's key tile with bf16 products (avx512_bf16, docs/isa.md):
// @pejit_decode_item calls @pejit_decode_tile_bf16 for each key tile in
// place of its f32 tile when the inputs are bf16 and no QK transform
// changes K (the cache holds K as the products read it). Put after
// avx512_bf16_tiles.mlir (@dot_bf16), with avx512_bf16_decode_blocks.mlir.
//
// Keys, not heads, are the lanes, and K and V stay bf16, never widened:
//   Kc, Vc = the tile's rows of K and V, copied in row order; rows no head
//     sees are zeros (0 times an inf or NaN there would reach the row)
//   S[g, j] = bf16(scale Q'[g]) . Kc[j]     16 keys per vector: a 16 x 16
//     block of Kc's (d, d+1) pairs is transposed in registers, then one
//     vdpbf16ps per pair of d and head against Q's pair, broadcast
//   score_mod per (head, key) as scalars; keys outside [seen_from, nk) -inf
//   the online softmax per head down its keys (m, l, alpha per head)
//   Os[g] = Os[g] alpha_g + sum_j bf16(P[g, j]) Vc[j]   (@pv_heads_bf16)
// Its blocks (the copies, the transpose, P . V) are avx512_bf16_decode_blocks.mlir.
// The rounding is the prefill's (docs/semantics.md): Q' scaled, and P, are
// rounded to bf16; K and V are the input's own bf16 values.
// Why the copy: the products read K and V in 64-byte pieces of 16 or 32
// rows at a time; from memory those reads ran at a third of the read
// bandwidth (bench/RESULTS.md, session 31). Read in row order, the
// hardware prefetcher follows them, and the products then read the copies
// from L1.

// One key tile [j0, j0 + nk) of the grouped decode (@pejit_decode_item),
// keys seen from seen_from on (tile-relative): updates Os and returns the
// heads' running max and sum (heads in lanes, as the item keeps them).
func.func @pejit_decode_tile_bf16(%k: !K, %v: !V, %Qs: memref<${BM}x${D}xf32>,
                                  %Os: memref<${BM}x${DV}xf32>, %e0: !E0, %e1: !E1, %e2: !E2,
                                  %e3: !E3, %qpos: !QPOS, %kpos: !KPOS, %b: index, %hk: index,
                                  %j0: index, %nk: index, %seen_from: index, %sq: index,
                                  %m: !VF, %l: !VF) -> (!VF, !VF)
    attributes {passthrough = ["noinline"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %c10 = arith.constant 10 : index
  %c11 = arith.constant 11 : index
  %c12 = arith.constant 12 : index
  %c13 = arith.constant 13 : index
  %c14 = arith.constant 14 : index
  %c15 = arith.constant 15 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %D = arith.constant ${D} : index
  %DH = arith.constant ${DH} : index
  %GROUP = arith.constant ${GROUP} : index
  %BN32 = arith.constant ${BN32} : index
  %score_mod = arith.constant ${SCORE_MOD}
  %scale = arith.constant ${SCALE} : f32
  %zero = arith.constant 0.0 : f32
  %ninf_s = arith.constant 0xFF800000 : f32
  %log2e_s = arith.constant 1.44269504088896 : f32
  %zero_i = arith.constant 0 : i32
  %zv = arith.constant dense<0.0> : !VF
  %ninf = arith.constant dense<0xFF800000> : !VF
  %log2e = arith.constant dense<1.44269504088896> : !VF
  %zi = arith.constant dense<0> : vector<16xi32>
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : vector<16xi32>
  %scale32 = vector.broadcast %scale : f32 to vector<32xf32>
  %SKV = memref.dim %k, %c2 : !K
  %h0 = arith.muli %hk, %GROUP : index
  %Kc = memref.alloca() {alignment = 64 : i64} : memref<${BN32}x${D}xbf16>
  %Vc = memref.alloca() {alignment = 64 : i64} : memref<${BN32}x${DV}xbf16>
  %QP = memref.alloca() {alignment = 64 : i64} : memref<8x${D}xi32>
  %S2 = memref.alloca() {alignment = 64 : i64} : memref<8x${BN32}xf32>
  %PP = memref.alloca() {alignment = 64 : i64} : memref<8x${BN32}xi32>
  %Mb = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
  %Lb = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
  %Ab = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
  vector.store %m, %Mb[%c0] : memref<16xf32>, !VF
  vector.store %l, %Lb[%c0] : memref<16xf32>, !VF
  vector.store %zv, %Ab[%c0] : memref<16xf32>, !VF

  // Kc: rows [kb_begin, nk) (the 16-key blocks S reads, from the one
  // seen_from is in), zeros up to the next block. Vc: rows [seen_from, nk),
  // zeros in the pairs P . V reads around them.
  %kb_first = arith.divui %seen_from, %c16 : index
  %kb_begin = arith.muli %kb_first, %c16 : index
  %nk15 = arith.addi %nk, %c15 : index
  %nk16_0 = arith.divui %nk15, %c16 : index
  %nk16 = arith.muli %nk16_0, %c16 : index
  %p_lo = arith.divui %seen_from, %c2 : index
  %nk1 = arith.addi %nk, %c1 : index
  %p_hi = arith.divui %nk1, %c2 : index
  %v_lo = arith.muli %p_lo, %c2 : index
  %v_hi = arith.muli %p_hi, %c2 : index
  func.call @copy_rows_k(%k, %Kc, %b, %hk, %j0, %kb_begin, %nk, %nk16)
      : (!K, memref<${BN32}x${D}xbf16>, index, index, index, index, index, index) -> ()
  func.call @copy_rows_v(%v, %Vc, %b, %hk, %j0, %v_lo, %seen_from, %nk, %v_hi)
      : (!V, memref<${BN32}x${DV}xbf16>, index, index, index, index, index, index, index) -> ()

  // QP[g] = bf16(scale Q'[g]) in pairs along d; heads past GROUP are 0.
  scf.for %g = %c0 to %c8 step %c1 {
    %real = arith.cmpi ult, %g, %GROUP : index
    scf.for %d = %c0 to %D step %c32 {
      %p = arith.divui %d, %c2 : index
      %w = scf.if %real -> (vector<16xi32>) {
        %x = vector.load %Qs[%g, %d] : memref<${BM}x${D}xf32>, vector<32xf32>
        %xs = arith.mulf %x, %scale32 : vector<32xf32>
        %h = arith.truncf %xs : vector<32xf32> to vector<32xbf16>
        %wi = vector.bitcast %h : vector<32xbf16> to vector<16xi32>
        scf.yield %wi : vector<16xi32>
      } else {
        scf.yield %zi : vector<16xi32>
      }
      vector.store %w, %QP[%g, %p] : memref<8x${D}xi32>, vector<16xi32>
    }
  }

  // S2[g, kb .. kb + 15] per 16-key block: per 16 pairs of d, the block's
  // rows transposed (pair p of key kb + r in lane r of t_p), then 4 heads x
  // 16 vdpbf16ps, even and odd pairs in separate sums (8 chains hide the
  // instruction's latency).
  scf.for %hb = %c0 to %GROUP step %c4 {
    scf.for %kb = %kb_begin to %nk step %c16 {
      %acc:8 = scf.for %pc = %c0 to %DH step %c16
          iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
        %r0 = arith.addi %kb, %c0 : index
        %x0 = func.call @key_pairs(%Kc, %r0, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r1 = arith.addi %kb, %c1 : index
        %x1 = func.call @key_pairs(%Kc, %r1, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r2 = arith.addi %kb, %c2 : index
        %x2 = func.call @key_pairs(%Kc, %r2, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r3 = arith.addi %kb, %c3 : index
        %x3 = func.call @key_pairs(%Kc, %r3, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r4 = arith.addi %kb, %c4 : index
        %x4 = func.call @key_pairs(%Kc, %r4, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r5 = arith.addi %kb, %c5 : index
        %x5 = func.call @key_pairs(%Kc, %r5, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r6 = arith.addi %kb, %c6 : index
        %x6 = func.call @key_pairs(%Kc, %r6, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r7 = arith.addi %kb, %c7 : index
        %x7 = func.call @key_pairs(%Kc, %r7, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r8 = arith.addi %kb, %c8 : index
        %x8 = func.call @key_pairs(%Kc, %r8, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r9 = arith.addi %kb, %c9 : index
        %x9 = func.call @key_pairs(%Kc, %r9, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r10 = arith.addi %kb, %c10 : index
        %x10 = func.call @key_pairs(%Kc, %r10, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r11 = arith.addi %kb, %c11 : index
        %x11 = func.call @key_pairs(%Kc, %r11, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r12 = arith.addi %kb, %c12 : index
        %x12 = func.call @key_pairs(%Kc, %r12, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r13 = arith.addi %kb, %c13 : index
        %x13 = func.call @key_pairs(%Kc, %r13, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r14 = arith.addi %kb, %c14 : index
        %x14 = func.call @key_pairs(%Kc, %r14, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %r15 = arith.addi %kb, %c15 : index
        %x15 = func.call @key_pairs(%Kc, %r15, %pc) : (memref<${BN32}x${D}xbf16>, index, index) -> vector<16xi32>
        %t:16 = func.call @transpose16x16_i32(%x0, %x1, %x2, %x3, %x4, %x5, %x6, %x7, %x8, %x9, %x10, %x11, %x12, %x13, %x14, %x15)
            : (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>)
            -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>)
        %pc1 = arith.addi %pc, %c1 : index
        %pc2 = arith.addi %pc, %c2 : index
        %pc3 = arith.addi %pc, %c3 : index
        %pc4 = arith.addi %pc, %c4 : index
        %pc5 = arith.addi %pc, %c5 : index
        %pc6 = arith.addi %pc, %c6 : index
        %pc7 = arith.addi %pc, %c7 : index
        %pc8 = arith.addi %pc, %c8 : index
        %pc9 = arith.addi %pc, %c9 : index
        %pc10 = arith.addi %pc, %c10 : index
        %pc11 = arith.addi %pc, %c11 : index
        %pc12 = arith.addi %pc, %c12 : index
        %pc13 = arith.addi %pc, %c13 : index
        %pc14 = arith.addi %pc, %c14 : index
        %pc15 = arith.addi %pc, %c15 : index
        %s0:4 = func.call @heads_dot_bf16(%QP, %hb, %pc, %t#0, %a0, %a1, %a2, %a3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s1:4 = func.call @heads_dot_bf16(%QP, %hb, %pc1, %t#1, %a4, %a5, %a6, %a7)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s2:4 = func.call @heads_dot_bf16(%QP, %hb, %pc2, %t#2, %s0#0, %s0#1, %s0#2, %s0#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s3:4 = func.call @heads_dot_bf16(%QP, %hb, %pc3, %t#3, %s1#0, %s1#1, %s1#2, %s1#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s4:4 = func.call @heads_dot_bf16(%QP, %hb, %pc4, %t#4, %s2#0, %s2#1, %s2#2, %s2#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s5:4 = func.call @heads_dot_bf16(%QP, %hb, %pc5, %t#5, %s3#0, %s3#1, %s3#2, %s3#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s6:4 = func.call @heads_dot_bf16(%QP, %hb, %pc6, %t#6, %s4#0, %s4#1, %s4#2, %s4#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s7:4 = func.call @heads_dot_bf16(%QP, %hb, %pc7, %t#7, %s5#0, %s5#1, %s5#2, %s5#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s8:4 = func.call @heads_dot_bf16(%QP, %hb, %pc8, %t#8, %s6#0, %s6#1, %s6#2, %s6#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s9:4 = func.call @heads_dot_bf16(%QP, %hb, %pc9, %t#9, %s7#0, %s7#1, %s7#2, %s7#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s10:4 = func.call @heads_dot_bf16(%QP, %hb, %pc10, %t#10, %s8#0, %s8#1, %s8#2, %s8#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s11:4 = func.call @heads_dot_bf16(%QP, %hb, %pc11, %t#11, %s9#0, %s9#1, %s9#2, %s9#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s12:4 = func.call @heads_dot_bf16(%QP, %hb, %pc12, %t#12, %s10#0, %s10#1, %s10#2, %s10#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s13:4 = func.call @heads_dot_bf16(%QP, %hb, %pc13, %t#13, %s11#0, %s11#1, %s11#2, %s11#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s14:4 = func.call @heads_dot_bf16(%QP, %hb, %pc14, %t#14, %s12#0, %s12#1, %s12#2, %s12#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        %s15:4 = func.call @heads_dot_bf16(%QP, %hb, %pc15, %t#15, %s13#0, %s13#1, %s13#2, %s13#3)
            : (memref<8x${D}xi32>, index, index, vector<16xi32>, !VF, !VF, !VF, !VF)
            -> (!VF, !VF, !VF, !VF)
        scf.yield %s14#0, %s14#1, %s14#2, %s14#3, %s15#0, %s15#1, %s15#2, %s15#3
            : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
      }
      %sum0 = arith.addf %acc#0, %acc#4 : !VF
      vector.store %sum0, %S2[%hb, %kb] : memref<8x${BN32}xf32>, !VF
      %hg1 = arith.addi %hb, %c1 : index
      %sum1 = arith.addf %acc#1, %acc#5 : !VF
      vector.store %sum1, %S2[%hg1, %kb] : memref<8x${BN32}xf32>, !VF
      %hg2 = arith.addi %hb, %c2 : index
      %sum2 = arith.addf %acc#2, %acc#6 : !VF
      vector.store %sum2, %S2[%hg2, %kb] : memref<8x${BN32}xf32>, !VF
      %hg3 = arith.addi %hb, %c3 : index
      %sum3 = arith.addf %acc#3, %acc#7 : !VF
      vector.store %sum3, %S2[%hg3, %kb] : memref<8x${BN32}xf32>, !VF
    }
  }

  // Per head: score_mod, the mask (keys outside [seen_from, nk), the
  // block padding included, are -inf), then the online softmax.
  %from_i = arith.index_cast %seen_from : index to i32
  %from_v = vector.broadcast %from_i : i32 to vector<16xi32>
  %nk_i = arith.index_cast %nk : index to i32
  %nk_v = vector.broadcast %nk_i : i32 to vector<16xi32>
  scf.for %g = %c0 to %GROUP step %c1 {
    %h = arith.addi %h0, %g : index
    scf.if %score_mod {
      scf.for %jr = %seen_from to %nk step %c1 {
        %j = arith.addi %j0, %jr : index
        %j_i = arith.index_cast %j : index to i32
        %s = memref.load %S2[%g, %jr] : memref<8x${BN32}xf32>
        %s_mod = attn.score_mod %s, batch %b, head %h, query %zero_i, key %j_i
            operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
            positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%sq, %SKV) : f32, i32
        memref.store %s_mod, %S2[%g, %jr] : memref<8x${BN32}xf32>
      }
    }
    %mx = scf.for %jv = %c0 to %BN32 step %c16 iter_args(%mx0 = %ninf) -> (!VF) {
      %jv_i = arith.index_cast %jv : index to i32
      %jv_v = vector.broadcast %jv_i : i32 to vector<16xi32>
      %idx = arith.addi %iota, %jv_v : vector<16xi32>
      %after = arith.cmpi sge, %idx, %from_v : vector<16xi32>
      %inside = arith.cmpi slt, %idx, %nk_v : vector<16xi32>
      %seen = arith.andi %after, %inside : vector<16xi1>
      %s0 = vector.load %S2[%g, %jv] : memref<8x${BN32}xf32>, !VF
      %s = arith.select %seen, %s0, %ninf : vector<16xi1>, !VF
      vector.store %s, %S2[%g, %jv] : memref<8x${BN32}xf32>, !VF
      %grows = arith.cmpf olt, %mx0, %s : !VF
      %mx1 = arith.select %grows, %s, %mx0 : vector<16xi1>, !VF
      scf.yield %mx1 : !VF
    }
    %m_tile = vector.reduction <maxnumf>, %mx : !VF into f32
    %m_old = memref.load %Mb[%g] : memref<16xf32>
    %m_new = arith.maxnumf %m_old, %m_tile : f32
    %none = arith.cmpf oeq, %m_new, %ninf_s : f32
    %m_safe = arith.select %none, %zero, %m_new : f32
    %m_step = arith.subf %m_old, %m_safe : f32
    %alpha_arg = arith.mulf %m_step, %log2e_s : f32
    %alpha = math.exp2 %alpha_arg : f32
    %m_safe_v = vector.broadcast %m_safe : f32 to !VF
    %lsum = scf.for %jv = %c0 to %BN32 step %c16 iter_args(%acc = %zv) -> (!VF) {
      %s = vector.load %S2[%g, %jv] : memref<8x${BN32}xf32>, !VF
      %sd = arith.subf %s, %m_safe_v : !VF
      %e = arith.mulf %sd, %log2e : !VF
      %p = func.call @exp2_vec(%e) : (!VF) -> !VF
      vector.store %p, %S2[%g, %jv] : memref<8x${BN32}xf32>, !VF
      %acc1 = arith.addf %acc, %p : !VF
      scf.yield %acc1 : !VF
    }
    %l_tile = vector.reduction <add>, %lsum : !VF into f32
    %l_old = memref.load %Lb[%g] : memref<16xf32>
    %l_scaled = arith.mulf %l_old, %alpha : f32
    %l_new = arith.addf %l_scaled, %l_tile : f32
    memref.store %m_new, %Mb[%g] : memref<16xf32>
    memref.store %l_new, %Lb[%g] : memref<16xf32>
    memref.store %alpha, %Ab[%g] : memref<16xf32>
  }

  // PP[g, p] = bf16 (P[g, 2p], P[g, 2p + 1]); heads past GROUP are 0.
  scf.for %g = %c0 to %c8 step %c1 {
    %real = arith.cmpi ult, %g, %GROUP : index
    scf.for %jv = %c0 to %BN32 step %c32 {
      %p = arith.divui %jv, %c2 : index
      %w = scf.if %real -> (vector<16xi32>) {
        %x = vector.load %S2[%g, %jv] : memref<8x${BN32}xf32>, vector<32xf32>
        %h = arith.truncf %x : vector<32xf32> to vector<32xbf16>
        %wi = vector.bitcast %h : vector<32xbf16> to vector<16xi32>
        scf.yield %wi : vector<16xi32>
      } else {
        scf.yield %zi : vector<16xi32>
      }
      vector.store %w, %PP[%g, %p] : memref<8x${BN32}xi32>, vector<16xi32>
    }
  }

  // Os[g] = Os[g] alpha_g + P[g] . V (@pv_heads_bf16), per 4 heads.
  scf.for %hb = %c0 to %GROUP step %c4 {
    func.call @pv_heads_bf16(%Vc, %PP, %Ab, %Os, %p_lo, %p_hi, %hb)
        : (memref<${BN32}x${DV}xbf16>, memref<8x${BN32}xi32>, memref<16xf32>,
           memref<${BM}x${DV}xf32>, index, index, index) -> ()
  }
  %m_out = vector.load %Mb[%c0] : memref<16xf32>, !VF
  %l_out = vector.load %Lb[%c0] : memref<16xf32>, !VF
  return %m_out, %l_out : !VF, !VF
}
