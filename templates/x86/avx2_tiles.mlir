// The tile functions of the x86 AVX2 attention template
// (templates/x86/avx2_attention.mlir), put after its blocks
// (avx2_blocks.mlir) in place of its `// @pejit-blocks` line before
// parameter substitution and parsing: the types and parameters are the
// ones that file defines. Each is public and never inlined, so the backend
// compiles it as a codegen part of its own (pejit/compiler/backends/x86/CodegenParts.h):
//   @pejit_query_tile  an item's Q tile, rotated and transposed (once per item)
//   @pejit_s_tile      St = Ks . Qt for one KV tile
//   @pejit_pv_tile     Os = Os * alpha + P^T . V for one KV tile

// The Q tile of an item: its nq rows of Q[b, h] read and transformed in one
// pass (RoPE once per Q tile) into Qs, the rows past SQ zero, then
// Qt = transpose(Qs) * scale (@transpose_scaled). Once per item, not per KV
// tile: pejit.cold, so the backend compiles it (never inlined) with the
// once-per-call functions, without strength reduction.
func.func @pejit_query_tile(%q: !Q, %Qs: memref<${BM}x${D}xf32>, %Qt: memref<${D}x${BM}xf32>,
                            %scratch: !SCRATCH, %b: index, %h: index, %i0: index, %nq: index,
                            %skv: index)
    attributes {passthrough = ["noinline"], pejit.cold} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %BM = arith.constant ${BM} : index
  %D = arith.constant ${D} : index
  %zv = arith.constant dense<0.0> : !VF
  %q_rows = memref.subview %q[%b, %h, %i0, 0] [1, 1, %nq, ${D}] [1, 1, 1, 1]
      : !Q to !QROWS
  %c2 = arith.constant 2 : index
  %sq = memref.dim %q, %c2 : !Q
  attn.qk_transform %Qs from %q_rows, %nq, %i0, %b, %scratch lengths(%sq, %skv)
      : memref<${BM}x${D}xf32> from !QROWS, !SCRATCH
  scf.for %r = %nq to %BM step %c1 {
    scf.for %d = %c0 to %D step %cL {
      vector.store %zv, %Qs[%r, %d] : memref<${BM}x${D}xf32>, !VF
    }
  }
  func.call @transpose_scaled(%Qs, %Qt) : (memref<${BM}x${D}xf32>, memref<${D}x${BM}xf32>) -> ()
  return
}

// St = Ks . Qt for one KV tile (Kt: Ks or a key cache tile), in blocks of
// 6 keys x 2 vectors of queries: 12 accumulators, 2 loads of Qt and 6
// broadcasts of Kt per step of d, 4 steps per loop trip (unrolled by
// pejit-unroll-annotated-loops: 5-9% faster than 1 or 2 steps per trip on
// Zen 3, bench/RESULTS.md session 5). The 2-vector column block of Qt
// (8 KB for D = 128 at 8 lanes) stays in L1 while all key rows stream past
// it. Columns [0, nql) of the tile (nql a whole number of vectors; an odd
// last vector takes blocks of 6 keys x 1 vector); under a causal mask,
// column r sees key row jr iff jr <= r + diag_row, and key rows past the
// last one a column block sees are skipped (the item's mask sets them to
// -inf). A function of its own (never inlined) so the backend compiles it
// in parallel with the rest of the kernel
// (pejit/compiler/backends/x86/ParallelCodegen.cpp).
// (QtP, KB and pack_q are the bf16 tile's, @pejit_s_tile_bf16: the item calls
// either one with the same arguments.)
func.func @pejit_s_tile(%St: memref<${BN}x${BM}xf32>, %Qt: memref<${D}x${BM}xf32>, %QtP: !QTP,
                        %Kt: !KTILE, %KB: !KB, %nql: index, %diag_row: index, %pack_q: i1)
    attributes {passthrough = ["noinline"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %cL = arith.constant ${L} : index
  %c2L = arith.constant ${L2} : index
  %D = arith.constant ${D} : index
  %zv = arith.constant dense<0.0> : !VF
  %npair0 = arith.divui %nql, %c2L : index
  %npair = arith.muli %npair0, %c2L : index
  scf.for %ic = %c0 to %npair step %c2L {
    %ic1 = arith.addi %ic, %cL : index
    %jr_end = func.call @s_rows_seen(%diag_row, %ic, %c2L) : (index, index, index) -> index
    scf.for %jr = %c0 to %jr_end step %c6 {
      %jr1 = arith.addi %jr, %c1 : index
      %jr2 = arith.addi %jr, %c2 : index
      %jr3 = arith.addi %jr, %c3 : index
      %jr4 = arith.addi %jr, %c4 : index
      %jr5 = arith.addi %jr, %c5 : index
      %acc:12 = scf.for %d = %c0 to %D step %c1
          iter_args(%a00 = %zv, %a01 = %zv, %a10 = %zv, %a11 = %zv, %a20 = %zv, %a21 = %zv,
                    %a30 = %zv, %a31 = %zv, %a40 = %zv, %a41 = %zv, %a50 = %zv, %a51 = %zv)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
        %q0 = vector.load %Qt[%d, %ic] : memref<${D}x${BM}xf32>, !VF
        %q1 = vector.load %Qt[%d, %ic1] : memref<${D}x${BM}xf32>, !VF
        %k0s = memref.load %Kt[%jr, %d] : !KTILE
        %k1s = memref.load %Kt[%jr1, %d] : !KTILE
        %k2s = memref.load %Kt[%jr2, %d] : !KTILE
        %k3s = memref.load %Kt[%jr3, %d] : !KTILE
        %k4s = memref.load %Kt[%jr4, %d] : !KTILE
        %k5s = memref.load %Kt[%jr5, %d] : !KTILE
        %k0 = vector.broadcast %k0s : f32 to !VF
        %k1 = vector.broadcast %k1s : f32 to !VF
        %k2 = vector.broadcast %k2s : f32 to !VF
        %k3 = vector.broadcast %k3s : f32 to !VF
        %k4 = vector.broadcast %k4s : f32 to !VF
        %k5 = vector.broadcast %k5s : f32 to !VF
        %b00 = vector.fma %k0, %q0, %a00 : !VF
        %b01 = vector.fma %k0, %q1, %a01 : !VF
        %b10 = vector.fma %k1, %q0, %a10 : !VF
        %b11 = vector.fma %k1, %q1, %a11 : !VF
        %b20 = vector.fma %k2, %q0, %a20 : !VF
        %b21 = vector.fma %k2, %q1, %a21 : !VF
        %b30 = vector.fma %k3, %q0, %a30 : !VF
        %b31 = vector.fma %k3, %q1, %a31 : !VF
        %b40 = vector.fma %k4, %q0, %a40 : !VF
        %b41 = vector.fma %k4, %q1, %a41 : !VF
        %b50 = vector.fma %k5, %q0, %a50 : !VF
        %b51 = vector.fma %k5, %q1, %a51 : !VF
        scf.yield %b00, %b01, %b10, %b11, %b20, %b21, %b30, %b31, %b40, %b41, %b50, %b51
            : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
      } {pejit.unroll_factor = 4 : i64}
      vector.store %acc#0, %St[%jr, %ic] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#1, %St[%jr, %ic1] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#2, %St[%jr1, %ic] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#3, %St[%jr1, %ic1] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#4, %St[%jr2, %ic] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#5, %St[%jr2, %ic1] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#6, %St[%jr3, %ic] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#7, %St[%jr3, %ic1] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#8, %St[%jr4, %ic] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#9, %St[%jr4, %ic1] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#10, %St[%jr5, %ic] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#11, %St[%jr5, %ic1] : memref<${BN}x${BM}xf32>, !VF
    }
  }
  %odd = arith.cmpi ult, %npair, %nql : index
  scf.if %odd {
    %jr_end = func.call @s_rows_seen(%diag_row, %npair, %cL) : (index, index, index) -> index
    scf.for %jr = %c0 to %jr_end step %c6 {
      %jr1 = arith.addi %jr, %c1 : index
      %jr2 = arith.addi %jr, %c2 : index
      %jr3 = arith.addi %jr, %c3 : index
      %jr4 = arith.addi %jr, %c4 : index
      %jr5 = arith.addi %jr, %c5 : index
      %acc:6 = scf.for %d = %c0 to %D step %c1
          iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv, %a4 = %zv, %a5 = %zv)
          -> (!VF, !VF, !VF, !VF, !VF, !VF) {
        %q = vector.load %Qt[%d, %npair] : memref<${D}x${BM}xf32>, !VF
        %k0s = memref.load %Kt[%jr, %d] : !KTILE
        %k1s = memref.load %Kt[%jr1, %d] : !KTILE
        %k2s = memref.load %Kt[%jr2, %d] : !KTILE
        %k3s = memref.load %Kt[%jr3, %d] : !KTILE
        %k4s = memref.load %Kt[%jr4, %d] : !KTILE
        %k5s = memref.load %Kt[%jr5, %d] : !KTILE
        %k0 = vector.broadcast %k0s : f32 to !VF
        %k1 = vector.broadcast %k1s : f32 to !VF
        %k2 = vector.broadcast %k2s : f32 to !VF
        %k3 = vector.broadcast %k3s : f32 to !VF
        %k4 = vector.broadcast %k4s : f32 to !VF
        %k5 = vector.broadcast %k5s : f32 to !VF
        %b0 = vector.fma %k0, %q, %a0 : !VF
        %b1 = vector.fma %k1, %q, %a1 : !VF
        %b2 = vector.fma %k2, %q, %a2 : !VF
        %b3 = vector.fma %k3, %q, %a3 : !VF
        %b4 = vector.fma %k4, %q, %a4 : !VF
        %b5 = vector.fma %k5, %q, %a5 : !VF
        scf.yield %b0, %b1, %b2, %b3, %b4, %b5 : !VF, !VF, !VF, !VF, !VF, !VF
      } {pejit.unroll_factor = 4 : i64}
      vector.store %acc#0, %St[%jr, %npair] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#1, %St[%jr1, %npair] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#2, %St[%jr2, %npair] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#3, %St[%jr3, %npair] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#4, %St[%jr4, %npair] : memref<${BN}x${BM}xf32>, !VF
      vector.store %acc#5, %St[%jr5, %npair] : memref<${BN}x${BM}xf32>, !VF
    }
  }
  return
}

// Key rows [0, end) of the tile that a block of `width` query columns from
// column ic sees, rounded up to the 6-row blocks: under a causal mask, the
// rows up to the block's last column's diagonal (ic + width - 1 + diag_row),
// else all BN.
func.func private @s_rows_seen(%diag_row: index, %ic: index, %width: index) -> index {
  %c0 = arith.constant 0 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %BN = arith.constant ${BN} : index
  %causal = arith.constant ${CAUSAL}
  %seen0 = arith.addi %diag_row, %ic : index
  %seen = arith.addi %seen0, %width : index
  %seen_up0 = arith.addi %seen, %c5 : index
  %seen_up1 = arith.divsi %seen_up0, %c6 : index
  %seen_up = arith.muli %seen_up1, %c6 : index
  %seen_lo = arith.maxsi %seen_up, %c0 : index
  %seen_hi = arith.minsi %seen_lo, %BN : index
  %jr_end = arith.select %causal, %seen_hi, %BN : index
  return %jr_end : index
}

// Os = Os * alpha + P^T . V for one KV tile, in 6 x 16 blocks: the tile's
// P^T . V is summed from 0 in registers, then one FMA per vector adds it to
// Os * alpha (blocked summation); 2 loads of V and 6 broadcasts of P per
// key, 4 keys per loop trip (like S's loop over d). Rows [0, nq6) of the
// tile; row r sees key j of the tile as @pv_key_ranges says (under a causal
// mask alone: j <= r + pv_base, pv_base = i0 + OFF - j0). The next KV tile
// (rows from jn) is prefetched a few rows per block.
// A function of its own (never inlined) so the backend compiles it in
// parallel with the rest of the kernel (pejit/compiler/backends/x86/ParallelCodegen.cpp).
func.func @pejit_pv_tile(%Os: memref<${BM}x${DV}xf32>, %St: memref<${BN}x${BM}xf32>,
                         %Vr: !VROWS, %VP: !VP, %PP: !PP, %A: memref<${BM}xf32>, %k: !K, %v: !V,
                         %kcache: !KCACHE, %nq6: index, %nk: index, %pv_base: index, %jn: index, %b: index,
                         %hk: index)
    attributes {passthrough = ["noinline"]} {
  func.call @${PV_PACK}(%St, %Vr, %VP, %PP, %nk)
      : (memref<${BN}x${BM}xf32>, !VROWS, !VP, !PP, index) -> ()
  %zv8 = arith.constant dense<0.0> : !VF
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %cL = arith.constant ${L} : index
  %c2L = arith.constant ${L2} : index
  %cline = arith.constant 16 : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %SKV = memref.dim %k, %c2 : !K
  %konce = func.call @key_cache_used(%kcache) : (!KCACHE) -> i1
  scf.for %ir = %c0 to %nq6 step %c6 {
    %ir1 = arith.addi %ir, %c1 : index
    %ir2 = arith.addi %ir, %c2 : index
    %ir3 = arith.addi %ir, %c3 : index
    %ir4 = arith.addi %ir, %c4 : index
    %ir5 = arith.addi %ir, %c5 : index
    // The keys these 6 rows see: row ir + t sees key j of the tile iff
    // lo0 + t <= j <= hi0 + t (and j < nk), with lo0, hi0 row ir's bounds
    // (@pv_key_ranges). Keys no row sees are skipped (P is exactly 0
    // there); keys only some rows see (the causal diagonal, a window's
    // edges: at most 5 each) go through @pv_edge_keys, which adds P V only
    // where the row sees the key, so a NaN or inf in a V row a query cannot
    // see never reaches it (0 * inf is NaN); the keys all 6 rows see take
    // the plain FMA loop.
    %row_base = arith.addi %pv_base, %ir : index
    %lo0, %hi0, %ja, %jb, %jc, %jd = func.call @pv_key_ranges(%row_base, %nk)
        : (index, index) -> (index, index, index, index, index, index)
    scf.for %dc = %c0 to %DV step %c2L {
      %dc1 = arith.addi %dc, %cL : index
      // Rows [r0, r1) of the next KV tile: spread over all P . V blocks
      // (one prefetch per 64-byte line), overlapping the FMAs.
      %blocks_r = arith.divui %nq6, %c6 : index
      %blocks_c = arith.divui %DV, %c2L : index
      %blocks = arith.muli %blocks_r, %blocks_c : index
      %rows_per0 = arith.addi %BN, %blocks : index
      %rows_per1 = arith.subi %rows_per0, %c1 : index
      %rows_per = arith.divui %rows_per1, %blocks : index
      %blk_r = arith.divui %ir, %c6 : index
      %blk_c = arith.divui %dc, %c2L : index
      %blk0 = arith.muli %blk_r, %blocks_c : index
      %blk = arith.addi %blk0, %blk_c : index
      %pr0a = arith.muli %blk, %rows_per : index
      %pr1a = arith.addi %pr0a, %rows_per : index
      %pf_end0 = arith.subi %SKV, %jn : index
      %pf_end1 = arith.maxsi %pf_end0, %c0 : index
      %pf_end = arith.minsi %pf_end1, %BN : index
      %pr0 = arith.minsi %pr0a, %pf_end : index
      %pr1 = arith.minsi %pr1a, %pf_end : index
      scf.if %konce {
        %jtn = arith.divui %jn, %BN : index
        %nkt = func.call @key_tiles(%k) : (!K) -> index
        %kn = func.call @key_cache_tile(%kcache, %b, %hk, %jtn, %nkt)
            : (!KCACHE, index, index, index, index) -> !KTILE
        scf.for %pr = %pr0 to %pr1 step %c1 {
          scf.for %d = %c0 to %D step %cline {
            memref.prefetch %kn[%pr, %d], read, locality<2>, data : !KTILE
          }
        }
      } else {
        scf.for %pr = %pr0 to %pr1 step %c1 {
          %pj = arith.addi %jn, %pr : index
          scf.for %d = %c0 to %D step %cline {
            memref.prefetch %k[%b, %hk, %pj, %d], read, locality<2>, data : !K
          }
        }
      }
      scf.for %pr = %pr0 to %pr1 step %c1 {
        %pj = arith.addi %jn, %pr : index
        scf.for %d = %c0 to %DV step %cline {
          memref.prefetch %v[%b, %hk, %pj, %d], read, locality<2>, data : !V
        }
      }
      // This tile's sum of P V starts from 0 and joins Os * alpha once at
      // the end (blocked summation: the running output takes one rounding
      // per tile, not one per key; docs/limits.md states the bound).
      %e:12 = func.call @pv_edge_keys(%St, %Vr, %ir, %dc, %ja, %jb, %lo0, %hi0, %zv8, %zv8, %zv8,
                                      %zv8, %zv8, %zv8, %zv8, %zv8, %zv8, %zv8, %zv8, %zv8)
          : (memref<${BN}x${BM}xf32>, !VROWS, index, index, index, index, index, index, !VF, !VF,
             !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
      %acc:12 = func.call @${PV_PLAIN}(%St, %Vr, %VP, %PP, %ir, %dc, %jb, %jc, %lo0, %hi0, %e#0,
                                       %e#1, %e#2, %e#3, %e#4, %e#5, %e#6, %e#7, %e#8, %e#9,
                                       %e#10, %e#11)
          : (memref<${BN}x${BM}xf32>, !VROWS, !VP, !PP, index, index, index, index, index, index,
             !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
      %f:12 = func.call @pv_edge_keys(%St, %Vr, %ir, %dc, %jc, %jd, %lo0, %hi0, %acc#0, %acc#1,
                                      %acc#2, %acc#3, %acc#4, %acc#5, %acc#6, %acc#7, %acc#8,
                                      %acc#9, %acc#10, %acc#11)
          : (memref<${BN}x${BM}xf32>, !VROWS, index, index, index, index, index, index, !VF, !VF,
             !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
      // Os = Os * alpha + this tile's P V, row by row.
      %al0s = memref.load %A[%ir] : memref<${BM}xf32>
      %al0 = vector.broadcast %al0s : f32 to !VF
      %o00 = vector.load %Os[%ir, %dc] : memref<${BM}x${DV}xf32>, !VF
      %w00 = vector.fma %o00, %al0, %f#0 : !VF
      vector.store %w00, %Os[%ir, %dc] : memref<${BM}x${DV}xf32>, !VF
      %o01 = vector.load %Os[%ir, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %w01 = vector.fma %o01, %al0, %f#1 : !VF
      vector.store %w01, %Os[%ir, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %al1s = memref.load %A[%ir1] : memref<${BM}xf32>
      %al1 = vector.broadcast %al1s : f32 to !VF
      %o10 = vector.load %Os[%ir1, %dc] : memref<${BM}x${DV}xf32>, !VF
      %w10 = vector.fma %o10, %al1, %f#2 : !VF
      vector.store %w10, %Os[%ir1, %dc] : memref<${BM}x${DV}xf32>, !VF
      %o11 = vector.load %Os[%ir1, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %w11 = vector.fma %o11, %al1, %f#3 : !VF
      vector.store %w11, %Os[%ir1, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %al2s = memref.load %A[%ir2] : memref<${BM}xf32>
      %al2 = vector.broadcast %al2s : f32 to !VF
      %o20 = vector.load %Os[%ir2, %dc] : memref<${BM}x${DV}xf32>, !VF
      %w20 = vector.fma %o20, %al2, %f#4 : !VF
      vector.store %w20, %Os[%ir2, %dc] : memref<${BM}x${DV}xf32>, !VF
      %o21 = vector.load %Os[%ir2, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %w21 = vector.fma %o21, %al2, %f#5 : !VF
      vector.store %w21, %Os[%ir2, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %al3s = memref.load %A[%ir3] : memref<${BM}xf32>
      %al3 = vector.broadcast %al3s : f32 to !VF
      %o30 = vector.load %Os[%ir3, %dc] : memref<${BM}x${DV}xf32>, !VF
      %w30 = vector.fma %o30, %al3, %f#6 : !VF
      vector.store %w30, %Os[%ir3, %dc] : memref<${BM}x${DV}xf32>, !VF
      %o31 = vector.load %Os[%ir3, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %w31 = vector.fma %o31, %al3, %f#7 : !VF
      vector.store %w31, %Os[%ir3, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %al4s = memref.load %A[%ir4] : memref<${BM}xf32>
      %al4 = vector.broadcast %al4s : f32 to !VF
      %o40 = vector.load %Os[%ir4, %dc] : memref<${BM}x${DV}xf32>, !VF
      %w40 = vector.fma %o40, %al4, %f#8 : !VF
      vector.store %w40, %Os[%ir4, %dc] : memref<${BM}x${DV}xf32>, !VF
      %o41 = vector.load %Os[%ir4, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %w41 = vector.fma %o41, %al4, %f#9 : !VF
      vector.store %w41, %Os[%ir4, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %al5s = memref.load %A[%ir5] : memref<${BM}xf32>
      %al5 = vector.broadcast %al5s : f32 to !VF
      %o50 = vector.load %Os[%ir5, %dc] : memref<${BM}x${DV}xf32>, !VF
      %w50 = vector.fma %o50, %al5, %f#10 : !VF
      vector.store %w50, %Os[%ir5, %dc] : memref<${BM}x${DV}xf32>, !VF
      %o51 = vector.load %Os[%ir5, %dc1] : memref<${BM}x${DV}xf32>, !VF
      %w51 = vector.fma %o51, %al5, %f#11 : !VF
      vector.store %w51, %Os[%ir5, %dc1] : memref<${BM}x${DV}xf32>, !VF
    }
  }
  return
}

// The key ranges of a 6-row block of P . V (@pejit_pv_tile), for its first
// row at tile-relative diagonal `row_base` (i0 + ir + OFF - j0): row t of
// the block sees key j of the tile iff lo0 + t <= j <= hi0 + t and j < nk,
// where lo0 = row_base - WINDOW (window; else far below 0) and hi0 =
// row_base (causal), row_base + RIGHT (right window), else far above nk.
// Returns lo0, hi0 and the bounds a <= b <= c <= d of: [a, b) keys only
// some rows see (a window's first), [b, c) keys every row sees, [c, d) keys
// only some rows see (the diagonal); keys outside [a, d) no row sees.
// Windows are capped at 2^40 (lengths are below 2^31) so nothing overflows.
func.func private @pv_key_ranges(%row_base: index, %nk: index)
    -> (index, index, index, index, index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %far = arith.constant 1099511627776 : index
  %causal = arith.constant ${CAUSAL}
  %has_window = arith.constant ${HAS_WINDOW}
  %has_right = arith.constant ${HAS_RIGHT}
  %window0 = arith.constant ${WINDOW} : index
  %right0 = arith.constant ${RIGHT} : index
  %window = arith.minui %window0, %far : index
  %right = arith.minui %right0, %far : index
  %lo_off = arith.select %has_window, %window, %far : index
  %hi_right = arith.select %has_right, %right, %far : index
  %hi_off = arith.select %causal, %c0, %hi_right : index
  %lo0 = arith.subi %row_base, %lo_off : index
  %hi0 = arith.addi %row_base, %hi_off : index
  // a = clamp(lo0, 0, nk): the first key row 0 sees; b: the first key row
  // 5 sees (or d); c: one past the last key row 0 sees; d: row 5's.
  %a0 = arith.maxsi %lo0, %c0 : index
  %a = arith.minsi %a0, %nk : index
  %lo5 = arith.addi %lo0, %c5 : index
  %lo5c = arith.maxsi %lo5, %c0 : index
  %lo_all = arith.minsi %lo5c, %nk : index
  %hi1 = arith.addi %hi0, %c1 : index
  %hi1c = arith.maxsi %hi1, %c0 : index
  %hi_all = arith.minsi %hi1c, %nk : index
  %hi6 = arith.addi %hi0, %c6 : index
  %hi6c = arith.maxsi %hi6, %c0 : index
  %hi_any = arith.minsi %hi6c, %nk : index
  %b0 = arith.minsi %lo_all, %hi_any : index
  %b = arith.maxsi %a, %b0 : index
  %c = arith.maxsi %b, %hi_all : index
  %d = arith.maxsi %c, %hi_any : index
  return %lo0, %hi0, %a, %b, %c, %d : index, index, index, index, index, index
}

// Keys [jb, jc) of a 6-row block of P . V that all its rows see:
// acc_t += P[j, ir + t] V[j], 2 loads of V and 6 broadcasts of P per key,
// 4 keys per loop trip (like S's loop over d). (VP, PP, lo0 and hi0 are
// the bf16 form's, @pv_plain_keys_bf16.)
func.func private @pv_plain_keys(%St: memref<${BN}x${BM}xf32>, %Vr: !VROWS, %VP: !VP, %PP: !PP,
                                 %ir: index, %dc: index, %jb: index, %jc: index, %lo0: index,
                                 %hi0: index, %s00: !VF, %s01: !VF, %s10: !VF, %s11: !VF,
                                 %s20: !VF, %s21: !VF, %s30: !VF, %s31: !VF, %s40: !VF,
                                 %s41: !VF, %s50: !VF, %s51: !VF)
    -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %dc1 = arith.addi %dc, %cL : index
  %ir1 = arith.addi %ir, %c1 : index
  %ir2 = arith.addi %ir1, %c1 : index
  %ir3 = arith.addi %ir2, %c1 : index
  %ir4 = arith.addi %ir3, %c1 : index
  %ir5 = arith.addi %ir4, %c1 : index
  %acc:12 = scf.for %j = %jb to %jc step %c1
  iter_args(%a00 = %s00, %a01 = %s01, %a10 = %s10, %a11 = %s11, %a20 = %s20, %a21 = %s21,
            %a30 = %s30, %a31 = %s31, %a40 = %s40, %a41 = %s41, %a50 = %s50, %a51 = %s51)
      -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
    %v0 = vector.load %Vr[%j, %dc] : !VROWS, !VF
    %v1 = vector.load %Vr[%j, %dc1] : !VROWS, !VF
    %p0s = memref.load %St[%j, %ir] : memref<${BN}x${BM}xf32>
    %p1s = memref.load %St[%j, %ir1] : memref<${BN}x${BM}xf32>
    %p2s = memref.load %St[%j, %ir2] : memref<${BN}x${BM}xf32>
    %p3s = memref.load %St[%j, %ir3] : memref<${BN}x${BM}xf32>
    %p4s = memref.load %St[%j, %ir4] : memref<${BN}x${BM}xf32>
    %p5s = memref.load %St[%j, %ir5] : memref<${BN}x${BM}xf32>
    %p0 = vector.broadcast %p0s : f32 to !VF
    %p1 = vector.broadcast %p1s : f32 to !VF
    %p2 = vector.broadcast %p2s : f32 to !VF
    %p3 = vector.broadcast %p3s : f32 to !VF
    %p4 = vector.broadcast %p4s : f32 to !VF
    %p5 = vector.broadcast %p5s : f32 to !VF
    %b00 = vector.fma %p0, %v0, %a00 : !VF
    %b01 = vector.fma %p0, %v1, %a01 : !VF
    %b10 = vector.fma %p1, %v0, %a10 : !VF
    %b11 = vector.fma %p1, %v1, %a11 : !VF
    %b20 = vector.fma %p2, %v0, %a20 : !VF
    %b21 = vector.fma %p2, %v1, %a21 : !VF
    %b30 = vector.fma %p3, %v0, %a30 : !VF
    %b31 = vector.fma %p3, %v1, %a31 : !VF
    %b40 = vector.fma %p4, %v0, %a40 : !VF
    %b41 = vector.fma %p4, %v1, %a41 : !VF
    %b50 = vector.fma %p5, %v0, %a50 : !VF
    %b51 = vector.fma %p5, %v1, %a51 : !VF
    scf.yield %b00, %b01, %b10, %b11, %b20, %b21, %b30, %b31, %b40, %b41, %b50, %b51
        : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
  } {pejit.unroll_factor = 4 : i64}
  return %acc#0, %acc#1, %acc#2, %acc#3, %acc#4, %acc#5, %acc#6, %acc#7, %acc#8, %acc#9,
         %acc#10, %acc#11 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
}

// The bf16 packing of P and V before the tile's P . V: nothing in the f32
// form (@pv_pack_bf16 is the bf16 one).
func.func private @pv_pack_none(%St: memref<${BN}x${BM}xf32>, %Vr: !VROWS, %VP: !VP, %PP: !PP,
                                %nk: index) {
  return
}

// Keys [ja, jb) of a 6-row block of P . V that only some of its rows see:
// acc_t += P[j, ir + t] V[j] where lo0 + t <= j <= hi0 + t, else acc_t as
// it was (a select, not a multiply by P = 0: V may hold NaN or inf there).
func.func private @pv_edge_keys(%St: memref<${BN}x${BM}xf32>, %Vr: !VROWS, %ir: index,
                                %dc: index, %ja: index, %jb: index, %lo0: index, %hi0: index,
                                %s00: !VF, %s01: !VF, %s10: !VF, %s11: !VF, %s20: !VF,
                                %s21: !VF, %s30: !VF, %s31: !VF, %s40: !VF, %s41: !VF,
                                %s50: !VF, %s51: !VF)
    -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %t0 = arith.constant 0 : index
  %t1 = arith.constant 1 : index
  %t2 = arith.constant 2 : index
  %t3 = arith.constant 3 : index
  %t4 = arith.constant 4 : index
  %t5 = arith.constant 5 : index
  %dc1 = arith.addi %dc, %cL : index
  %acc:12 = scf.for %j = %ja to %jb step %c1
      iter_args(%a00 = %s00, %a01 = %s01, %a10 = %s10, %a11 = %s11, %a20 = %s20, %a21 = %s21,
                %a30 = %s30, %a31 = %s31, %a40 = %s40, %a41 = %s41, %a50 = %s50, %a51 = %s51)
      -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
    %v0 = vector.load %Vr[%j, %dc] : !VROWS, !VF
    %v1 = vector.load %Vr[%j, %dc1] : !VROWS, !VF
    // Row t sees key j iff lo0 <= j - t <= hi0.
    %r0:2 = func.call @pv_edge_row(%St, %j, %ir, %t0, %lo0, %hi0, %v0, %v1, %a00, %a01)
        : (memref<${BN}x${BM}xf32>, index, index, index, index, index, !VF, !VF, !VF, !VF)
        -> (!VF, !VF)
    %r1:2 = func.call @pv_edge_row(%St, %j, %ir, %t1, %lo0, %hi0, %v0, %v1, %a10, %a11)
        : (memref<${BN}x${BM}xf32>, index, index, index, index, index, !VF, !VF, !VF, !VF)
        -> (!VF, !VF)
    %r2:2 = func.call @pv_edge_row(%St, %j, %ir, %t2, %lo0, %hi0, %v0, %v1, %a20, %a21)
        : (memref<${BN}x${BM}xf32>, index, index, index, index, index, !VF, !VF, !VF, !VF)
        -> (!VF, !VF)
    %r3:2 = func.call @pv_edge_row(%St, %j, %ir, %t3, %lo0, %hi0, %v0, %v1, %a30, %a31)
        : (memref<${BN}x${BM}xf32>, index, index, index, index, index, !VF, !VF, !VF, !VF)
        -> (!VF, !VF)
    %r4:2 = func.call @pv_edge_row(%St, %j, %ir, %t4, %lo0, %hi0, %v0, %v1, %a40, %a41)
        : (memref<${BN}x${BM}xf32>, index, index, index, index, index, !VF, !VF, !VF, !VF)
        -> (!VF, !VF)
    %r5:2 = func.call @pv_edge_row(%St, %j, %ir, %t5, %lo0, %hi0, %v0, %v1, %a50, %a51)
        : (memref<${BN}x${BM}xf32>, index, index, index, index, index, !VF, !VF, !VF, !VF)
        -> (!VF, !VF)
    scf.yield %r0#0, %r0#1, %r1#0, %r1#1, %r2#0, %r2#1, %r3#0, %r3#1, %r4#0, %r4#1, %r5#0, %r5#1
        : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
  }
  return %acc#0, %acc#1, %acc#2, %acc#3, %acc#4, %acc#5, %acc#6, %acc#7, %acc#8, %acc#9,
         %acc#10, %acc#11 : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
}

// One row of @pv_edge_keys: (acc0, acc1) + P[j, ir + t] (v0, v1) if row
// ir + t sees key j (lo0 <= j - t <= hi0), else (acc0, acc1).
func.func private @pv_edge_row(%St: memref<${BN}x${BM}xf32>, %j: index, %ir: index, %t: index,
                               %lo0: index, %hi0: index, %v0: !VF, %v1: !VF, %a0: !VF,
                               %a1: !VF) -> (!VF, !VF) {
  %row = arith.addi %ir, %t : index
  %ps = memref.load %St[%j, %row] : memref<${BN}x${BM}xf32>
  %p = vector.broadcast %ps : f32 to !VF
  %b0 = vector.fma %p, %v0, %a0 : !VF
  %b1 = vector.fma %p, %v1, %a1 : !VF
  %jt = arith.subi %j, %t : index
  %after = arith.cmpi sge, %jt, %lo0 : index
  %before = arith.cmpi sle, %jt, %hi0 : index
  %sees = arith.andi %after, %before : i1
  %o0 = arith.select %sees, %b0, %a0 : !VF
  %o1 = arith.select %sees, %b1, %a1 : !VF
  return %o0, %o1 : !VF, !VF
}

