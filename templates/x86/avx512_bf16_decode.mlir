// The grouped decode's key tile with bf16 products (avx512_bf16, docs/isa.md):
// @pejit_decode_item calls @pejit_decode_tile_bf16 for each key tile in
// place of its f32 tile when the inputs are bf16 and no QK transform
// changes K (the cache holds K as the products read it). Put after
// avx512_bf16_tiles.mlir, whose @dot_bf16 it uses.
//
// Keys, not heads, are the lanes, and K and V are read where they are, as
// bf16, never widened:
//   S[g, j] = bf16(scale Q'[g]) . K[j]      16 keys per vector: a 16 x 16
//     block of K's (d, d+1) pairs is transposed in registers, then one
//     vdpbf16ps per pair of d and head against Q's pair, broadcast
//   score_mod per (head, key) as scalars; keys outside [seen_from, nk) -inf
//   the online softmax per head down its keys (m, l, alpha per head)
//   Os[g] = Os[g] alpha_g + sum_j bf16(P[g, j]) V[j]   pairs of keys: one
//     vdpbf16ps per (pair, head, 16 columns) against V's rows interleaved
// The rounding is the prefill's (docs/semantics.md): Q' scaled, and P, are
// rounded to bf16; K and V are the input's own bf16 values.
// Rows past the last key are never read: a key block's rows are clamped to
// skv - 1 (their scores are masked), and V rows of keys no head sees enter
// P . V as zeros (0 times an inf or NaN there would reach the row).

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

// Row r of a 16-key block of K, pairs pc .. pc + 15: key j0 + r, clamped to
// the last key (a clamped row's scores are masked).
func.func private @key_pairs(%k: !K, %b: index, %hk: index, %j0: index, %r: index,
                             %last: index, %pc: index) -> vector<16xi32> {
  %c2 = arith.constant 2 : index
  %j1 = arith.addi %j0, %r : index
  %j = arith.minui %j1, %last : index
  %d = arith.muli %pc, %c2 : index
  %x = vector.load %k[%b, %hk, %j, %d] : !K, vector<32xbf16>
  %w = vector.bitcast %x : vector<32xbf16> to vector<16xi32>
  return %w : vector<16xi32>
}

// One key tile [j0, j0 + nk) of the grouped decode (@pejit_decode_item),
// keys seen from seen_from on (tile-relative), with bf16 products: updates
// Os and returns the heads' running max and sum (heads in lanes, as the
// item keeps them).
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
  %DV = arith.constant ${DV} : index
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
  %last = arith.subi %SKV, %c1 : index
  %h0 = arith.muli %hk, %GROUP : index
  %QP = memref.alloca() {alignment = 64 : i64} : memref<8x${D}xi32>
  %S2 = memref.alloca() {alignment = 64 : i64} : memref<8x${BN32}xf32>
  %PP = memref.alloca() {alignment = 64 : i64} : memref<8x${BN32}xi32>
  %Mb = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
  %Lb = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
  %Ab = memref.alloca() {alignment = 64 : i64} : memref<16xf32>
  vector.store %m, %Mb[%c0] : memref<16xf32>, !VF
  vector.store %l, %Lb[%c0] : memref<16xf32>, !VF
  vector.store %zv, %Ab[%c0] : memref<16xf32>, !VF

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

  // S2[g, kb .. kb + 15] for the 16-key blocks from the one seen_from is in:
  // per 16 pairs of d, the block's rows transposed (pair p of key kb + r in
  // lane r of t_p), then 4 heads x 16 vdpbf16ps, even and odd pairs in
  // separate sums (8 chains hide the instruction's latency).
  %kb_first = arith.divui %seen_from, %c16 : index
  %kb_begin = arith.muli %kb_first, %c16 : index
  scf.for %hb = %c0 to %GROUP step %c4 {
    scf.for %kb = %kb_begin to %nk step %c16 {
      %jb = arith.addi %j0, %kb : index
      %acc:8 = scf.for %pc = %c0 to %DH step %c16
          iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
        %x0 = func.call @key_pairs(%k, %b, %hk, %jb, %c0, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x1 = func.call @key_pairs(%k, %b, %hk, %jb, %c1, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x2 = func.call @key_pairs(%k, %b, %hk, %jb, %c2, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x3 = func.call @key_pairs(%k, %b, %hk, %jb, %c3, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x4 = func.call @key_pairs(%k, %b, %hk, %jb, %c4, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x5 = func.call @key_pairs(%k, %b, %hk, %jb, %c5, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x6 = func.call @key_pairs(%k, %b, %hk, %jb, %c6, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x7 = func.call @key_pairs(%k, %b, %hk, %jb, %c7, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x8 = func.call @key_pairs(%k, %b, %hk, %jb, %c8, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x9 = func.call @key_pairs(%k, %b, %hk, %jb, %c9, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x10 = func.call @key_pairs(%k, %b, %hk, %jb, %c10, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x11 = func.call @key_pairs(%k, %b, %hk, %jb, %c11, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x12 = func.call @key_pairs(%k, %b, %hk, %jb, %c12, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x13 = func.call @key_pairs(%k, %b, %hk, %jb, %c13, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x14 = func.call @key_pairs(%k, %b, %hk, %jb, %c14, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
        %x15 = func.call @key_pairs(%k, %b, %hk, %jb, %c15, %last, %pc)
            : (!K, index, index, index, index, index, index) -> vector<16xi32>
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

  // Os[g] = Os[g] alpha_g + P[g] . V, per 4 heads and 32 columns of V: per
  // pair of keys, their two rows interleaved (pairs along keys), 8
  // vdpbf16ps. The tile's sum starts from 0 and joins Os once (blocked
  // summation, as the f32 tile).
  %p_lo = arith.divui %seen_from, %c2 : index
  %nk1 = arith.addi %nk, %c1 : index
  %p_hi = arith.divui %nk1, %c2 : index
  scf.for %hb = %c0 to %GROUP step %c4 {
    %hb1 = arith.addi %hb, %c1 : index
    %hb2 = arith.addi %hb, %c2 : index
    %hb3 = arith.addi %hb, %c3 : index
    scf.for %cb = %c0 to %DV step %c32 {
      %acc:8 = scf.for %p = %p_lo to %p_hi step %c1
          iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv, %a6 = %zv, %a7 = %zv)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
        %x:2 = func.call @value_pairs(%v, %b, %hk, %j0, %p, %seen_from, %nk, %last, %cb)
            : (!V, index, index, index, index, index, index, index, index)
            -> (vector<32xbf16>, vector<32xbf16>)
        %w0 = func.call @broadcast_pair_pp(%PP, %hb, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
        %w1 = func.call @broadcast_pair_pp(%PP, %hb1, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
        %w2 = func.call @broadcast_pair_pp(%PP, %hb2, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
        %w3 = func.call @broadcast_pair_pp(%PP, %hb3, %p) : (memref<8x${BN32}xi32>, index, index) -> vector<32xbf16>
        %b0 = func.call @dot_bf16(%a0, %w0, %x#0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b1 = func.call @dot_bf16(%a1, %w0, %x#1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b2 = func.call @dot_bf16(%a2, %w1, %x#0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b3 = func.call @dot_bf16(%a3, %w1, %x#1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b4 = func.call @dot_bf16(%a4, %w2, %x#0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b5 = func.call @dot_bf16(%a5, %w2, %x#1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b6 = func.call @dot_bf16(%a6, %w3, %x#0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b7 = func.call @dot_bf16(%a7, %w3, %x#1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        scf.yield %b0, %b1, %b2, %b3, %b4, %b5, %b6, %b7 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
      } {pejit.unroll_factor = 2 : i64}
      %cb16 = arith.addi %cb, %c16 : index
      %al0s = memref.load %Ab[%hb] : memref<16xf32>
      %al0 = vector.broadcast %al0s : f32 to !VF
      %o00 = vector.load %Os[%hb, %cb] : memref<${BM}x${DV}xf32>, !VF
      %n00 = vector.fma %o00, %al0, %acc#0 : !VF
      vector.store %n00, %Os[%hb, %cb] : memref<${BM}x${DV}xf32>, !VF
      %o01 = vector.load %Os[%hb, %cb16] : memref<${BM}x${DV}xf32>, !VF
      %n01 = vector.fma %o01, %al0, %acc#1 : !VF
      vector.store %n01, %Os[%hb, %cb16] : memref<${BM}x${DV}xf32>, !VF
      %al1s = memref.load %Ab[%hb1] : memref<16xf32>
      %al1 = vector.broadcast %al1s : f32 to !VF
      %o10 = vector.load %Os[%hb1, %cb] : memref<${BM}x${DV}xf32>, !VF
      %n10 = vector.fma %o10, %al1, %acc#2 : !VF
      vector.store %n10, %Os[%hb1, %cb] : memref<${BM}x${DV}xf32>, !VF
      %o11 = vector.load %Os[%hb1, %cb16] : memref<${BM}x${DV}xf32>, !VF
      %n11 = vector.fma %o11, %al1, %acc#3 : !VF
      vector.store %n11, %Os[%hb1, %cb16] : memref<${BM}x${DV}xf32>, !VF
      %al2s = memref.load %Ab[%hb2] : memref<16xf32>
      %al2 = vector.broadcast %al2s : f32 to !VF
      %o20 = vector.load %Os[%hb2, %cb] : memref<${BM}x${DV}xf32>, !VF
      %n20 = vector.fma %o20, %al2, %acc#4 : !VF
      vector.store %n20, %Os[%hb2, %cb] : memref<${BM}x${DV}xf32>, !VF
      %o21 = vector.load %Os[%hb2, %cb16] : memref<${BM}x${DV}xf32>, !VF
      %n21 = vector.fma %o21, %al2, %acc#5 : !VF
      vector.store %n21, %Os[%hb2, %cb16] : memref<${BM}x${DV}xf32>, !VF
      %al3s = memref.load %Ab[%hb3] : memref<16xf32>
      %al3 = vector.broadcast %al3s : f32 to !VF
      %o30 = vector.load %Os[%hb3, %cb] : memref<${BM}x${DV}xf32>, !VF
      %n30 = vector.fma %o30, %al3, %acc#6 : !VF
      vector.store %n30, %Os[%hb3, %cb] : memref<${BM}x${DV}xf32>, !VF
      %o31 = vector.load %Os[%hb3, %cb16] : memref<${BM}x${DV}xf32>, !VF
      %n31 = vector.fma %o31, %al3, %acc#7 : !VF
      vector.store %n31, %Os[%hb3, %cb16] : memref<${BM}x${DV}xf32>, !VF
    }
  }
  %m_out = vector.load %Mb[%c0] : memref<16xf32>, !VF
  %l_out = vector.load %Lb[%c0] : memref<16xf32>, !VF
  return %m_out, %l_out : !VF, !VF
}

// PP[g, p]: one pair of keys' probabilities, in every lane.
func.func private @broadcast_pair_pp(%PP: memref<8x${BN32}xi32>, %g: index, %p: index)
    -> vector<32xbf16> {
  %w = memref.load %PP[%g, %p] : memref<8x${BN32}xi32>
  %v = vector.broadcast %w : i32 to vector<16xi32>
  %x = vector.bitcast %v : vector<16xi32> to vector<32xbf16>
  return %x : vector<32xbf16>
}

// Keys j0 + 2p and j0 + 2p + 1's rows of V, columns cb .. cb + 31,
// interleaved into pairs of keys: (V[2p, c], V[2p + 1, c]) for c < cb + 16,
// then for the next 16 columns. A key outside [seen_from, nk) is zeros.
func.func private @value_pairs(%v: !V, %b: index, %hk: index, %j0: index, %p: index,
                               %seen_from: index, %nk: index, %last: index, %cb: index)
    -> (vector<32xbf16>, vector<32xbf16>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zh = arith.constant dense<0> : vector<32xi16>
  %ja0 = arith.muli %p, %c2 : index
  %jb0 = arith.addi %ja0, %c1 : index
  %ja1 = arith.addi %j0, %ja0 : index
  %jb1 = arith.addi %ja1, %c1 : index
  %ja = arith.minui %ja1, %last : index
  %jb = arith.minui %jb1, %last : index
  %va0 = vector.load %v[%b, %hk, %ja, %cb] : !V, vector<32xbf16>
  %vb0 = vector.load %v[%b, %hk, %jb, %cb] : !V, vector<32xbf16>
  %va1 = vector.bitcast %va0 : vector<32xbf16> to vector<32xi16>
  %vb1 = vector.bitcast %vb0 : vector<32xbf16> to vector<32xi16>
  %a_seen = arith.cmpi uge, %ja0, %seen_from : index
  %b_seen = arith.cmpi ult, %jb0, %nk : index
  %va = arith.select %a_seen, %va1, %zh : vector<32xi16>
  %vb = arith.select %b_seen, %vb1, %zh : vector<32xi16>
  %x0 = vector.shuffle %va, %vb [0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47] : vector<32xi16>, vector<32xi16>
  %x1 = vector.shuffle %va, %vb [16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63] : vector<32xi16>, vector<32xi16>
  %y0 = vector.bitcast %x0 : vector<32xi16> to vector<32xbf16>
  %y1 = vector.bitcast %x1 : vector<32xi16> to vector<32xbf16>
  return %y0, %y1 : vector<32xbf16>, vector<32xbf16>
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
