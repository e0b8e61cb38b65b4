// The bf16 products of the x86 attention template in the avx512_bf16 ISA
// family (docs/isa.md): S = K' Q'^T and P V with vdpbf16ps, each
// instruction two bf16 products per f32 lane, accumulated in f32. Put after
// avx2_tiles.mlir (whose types and parameters these use) when the kernel
// multiplies in bf16: bf16 inputs, 16 lanes, D % 32 == 0. The item calls
// @pejit_s_tile_bf16 in place of @pejit_s_tile, and @pejit_pv_tile calls
// @pv_pack_bf16 and @pv_plain_keys_bf16 in place of the f32 forms.
// What is rounded to bf16 (docs/semantics.md states the error): Q' times
// the scale, K' (both after the QK transform, which runs in f32) and P
// (after the softmax's exp, as GPU flash attention does). V is the
// input's own bf16. The softmax, the running sums and O stay f32.
//
// Pairs: a vector<32xbf16> holds, for each of 16 f32 lanes, two bf16
// values a product pairs up: vdpbf16ps(acc, x, y)[l] = acc[l] +
// x[2l] y[2l] + x[2l+1] y[2l+1]. S pairs along d; P V along keys.

// acc + x . y by pairs (vdpbf16ps).
func.func private @dot_bf16(%acc: !VF, %x: vector<32xbf16>, %y: vector<32xbf16>) -> !VF {
  %r = llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%acc, %x, %y)
      : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
  return %r : !VF
}

// Lanes l of a and b, interleaved (a[l], b[l]) and rounded to bf16 pairs.
func.func private @bf16_pairs(%a: !VF, %b: !VF) -> vector<16xi32> {
  %ab = vector.shuffle %a, %b [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31] : !VF, !VF
  %h = arith.truncf %ab : vector<32xf32> to vector<32xbf16>
  %w = vector.bitcast %h : vector<32xbf16> to vector<16xi32>
  return %w : vector<16xi32>
}

// KB[j, p]: one pair, in every lane.
func.func private @broadcast_pair(%KB: !KB, %j: index, %p: index) -> vector<32xbf16> {
  %w = memref.load %KB[%j, %p] : !KB
  %v = vector.broadcast %w : i32 to vector<16xi32>
  %x = vector.bitcast %v : vector<16xi32> to vector<32xbf16>
  return %x : vector<32xbf16>
}

// PP[p, i]: one pair, in every lane.
func.func private @broadcast_pair_t(%PP: !PP, %p: index, %i: index) -> vector<32xbf16> {
  %w = memref.load %PP[%p, %i] : !PP
  %v = vector.broadcast %w : i32 to vector<16xi32>
  %x = vector.bitcast %v : vector<16xi32> to vector<32xbf16>
  return %x : vector<32xbf16>
}

// St = K' . Q'^T for one KV tile, as @pejit_s_tile computes it (the same
// blocks, column ranges and causal skips), with bf16 pairs: per pair of d,
// 2 loads of QtP, 6 broadcasts of KB and 12 vdpbf16ps. QtP is packed from
// Qt on the item's first tile (pack_q), KB from the tile's rows each tile.
func.func @pejit_s_tile_bf16(%St: memref<${BN}x${BM}xf32>, %Qt: memref<${D}x${BM}xf32>,
                             %QtP: !QTP, %Kt: !KTILE, %KB: !KB, %nql: index, %diag_row: index,
                             %pack_q: i1)
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
  %c32 = arith.constant 32 : index
  %BM = arith.constant ${BM} : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %DH = arith.divui %D, %c2 : index
  %zv = arith.constant dense<0.0> : !VF
  scf.if %pack_q {
    scf.for %p = %c0 to %DH step %c1 {
      %d0 = arith.muli %p, %c2 : index
      %d1 = arith.addi %d0, %c1 : index
      scf.for %i = %c0 to %BM step %cL {
        %a = vector.load %Qt[%d0, %i] : memref<${D}x${BM}xf32>, !VF
        %b = vector.load %Qt[%d1, %i] : memref<${D}x${BM}xf32>, !VF
        %w = func.call @bf16_pairs(%a, %b) : (!VF, !VF) -> vector<16xi32>
        vector.store %w, %QtP[%p, %i] : !QTP, vector<16xi32>
      }
    }
  }
  scf.for %j = %c0 to %BN step %c1 {
    scf.for %d = %c0 to %D step %c32 {
      %x = vector.load %Kt[%j, %d] : !KTILE, vector<32xf32>
      %h = arith.truncf %x : vector<32xf32> to vector<32xbf16>
      %w = vector.bitcast %h : vector<32xbf16> to vector<16xi32>
      %p = arith.divui %d, %c2 : index
      vector.store %w, %KB[%j, %p] : !KB, vector<16xi32>
    }
  }
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
      %acc:12 = scf.for %p = %c0 to %DH step %c1
          iter_args(%a00 = %zv, %a01 = %zv, %a10 = %zv, %a11 = %zv, %a20 = %zv, %a21 = %zv, %a30 = %zv, %a31 = %zv, %a40 = %zv, %a41 = %zv, %a50 = %zv, %a51 = %zv)
          -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
        %q0w = vector.load %QtP[%p, %ic] : !QTP, vector<16xi32>
        %q0 = vector.bitcast %q0w : vector<16xi32> to vector<32xbf16>
        %q1w = vector.load %QtP[%p, %ic1] : !QTP, vector<16xi32>
        %q1 = vector.bitcast %q1w : vector<16xi32> to vector<32xbf16>
        %k0 = func.call @broadcast_pair(%KB, %jr, %p) : (!KB, index, index) -> vector<32xbf16>
        %k1 = func.call @broadcast_pair(%KB, %jr1, %p) : (!KB, index, index) -> vector<32xbf16>
        %k2 = func.call @broadcast_pair(%KB, %jr2, %p) : (!KB, index, index) -> vector<32xbf16>
        %k3 = func.call @broadcast_pair(%KB, %jr3, %p) : (!KB, index, index) -> vector<32xbf16>
        %k4 = func.call @broadcast_pair(%KB, %jr4, %p) : (!KB, index, index) -> vector<32xbf16>
        %k5 = func.call @broadcast_pair(%KB, %jr5, %p) : (!KB, index, index) -> vector<32xbf16>
        %b00 = func.call @dot_bf16(%a00, %k0, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b01 = func.call @dot_bf16(%a01, %k0, %q1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b10 = func.call @dot_bf16(%a10, %k1, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b11 = func.call @dot_bf16(%a11, %k1, %q1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b20 = func.call @dot_bf16(%a20, %k2, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b21 = func.call @dot_bf16(%a21, %k2, %q1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b30 = func.call @dot_bf16(%a30, %k3, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b31 = func.call @dot_bf16(%a31, %k3, %q1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b40 = func.call @dot_bf16(%a40, %k4, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b41 = func.call @dot_bf16(%a41, %k4, %q1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b50 = func.call @dot_bf16(%a50, %k5, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b51 = func.call @dot_bf16(%a51, %k5, %q1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
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
      %acc:6 = scf.for %p = %c0 to %DH step %c1
          iter_args(%a00 = %zv, %a10 = %zv, %a20 = %zv, %a30 = %zv, %a40 = %zv, %a50 = %zv)
          -> (!VF, !VF, !VF, !VF, !VF, !VF) {
        %q0w = vector.load %QtP[%p, %npair] : !QTP, vector<16xi32>
        %q0 = vector.bitcast %q0w : vector<16xi32> to vector<32xbf16>
        %k0 = func.call @broadcast_pair(%KB, %jr, %p) : (!KB, index, index) -> vector<32xbf16>
        %k1 = func.call @broadcast_pair(%KB, %jr1, %p) : (!KB, index, index) -> vector<32xbf16>
        %k2 = func.call @broadcast_pair(%KB, %jr2, %p) : (!KB, index, index) -> vector<32xbf16>
        %k3 = func.call @broadcast_pair(%KB, %jr3, %p) : (!KB, index, index) -> vector<32xbf16>
        %k4 = func.call @broadcast_pair(%KB, %jr4, %p) : (!KB, index, index) -> vector<32xbf16>
        %k5 = func.call @broadcast_pair(%KB, %jr5, %p) : (!KB, index, index) -> vector<32xbf16>
        %b00 = func.call @dot_bf16(%a00, %k0, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b10 = func.call @dot_bf16(%a10, %k1, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b20 = func.call @dot_bf16(%a20, %k2, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b30 = func.call @dot_bf16(%a30, %k3, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b40 = func.call @dot_bf16(%a40, %k4, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        %b50 = func.call @dot_bf16(%a50, %k5, %q0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
        scf.yield %b00, %b10, %b20, %b30, %b40, %b50
            : !VF, !VF, !VF, !VF, !VF, !VF
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

// The tile's bf16 pairs of V and P, before its P . V: VP[p, c] = (V[2p, c],
// V[2p+1, c]) for the nk / 2 whole pairs of keys (Vr holds the input's
// bf16 values widened: exact), PP[p, i] = (P[2p, i], P[2p+1, i]) for every
// column of St (columns past the item's rows are never read back).
func.func private @pv_pack_bf16(%St: memref<${BN}x${BM}xf32>, %Vr: !VROWS, %VP: !VP, %PP: !PP,
                                %nk: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cL = arith.constant ${L} : index
  %BM = arith.constant ${BM} : index
  %DV = arith.constant ${DV} : index
  %np = arith.divui %nk, %c2 : index
  scf.for %p = %c0 to %np step %c1 {
    %j0 = arith.muli %p, %c2 : index
    %j1 = arith.addi %j0, %c1 : index
    scf.for %c = %c0 to %DV step %cL {
      %a = vector.load %Vr[%j0, %c] : !VROWS, !VF
      %b = vector.load %Vr[%j1, %c] : !VROWS, !VF
      %w = func.call @bf16_pairs(%a, %b) : (!VF, !VF) -> vector<16xi32>
      vector.store %w, %VP[%p, %c] : !VP, vector<16xi32>
    }
    scf.for %i = %c0 to %BM step %cL {
      %a = vector.load %St[%j0, %i] : memref<${BN}x${BM}xf32>, !VF
      %b = vector.load %St[%j1, %i] : memref<${BN}x${BM}xf32>, !VF
      %w = func.call @bf16_pairs(%a, %b) : (!VF, !VF) -> vector<16xi32>
      vector.store %w, %PP[%p, %i] : !PP, vector<16xi32>
    }
  }
  return
}

// Keys [jb, jc) of a 6-row block of P . V that all its rows see, as
// @pv_plain_keys adds them, with bf16 pairs of keys: per pair, 2 loads of
// VP, 6 broadcasts of PP and 12 vdpbf16ps. Pairs start at even keys: an odd
// first key, and a last key without a partner, take the f32 form
// (@pv_edge_keys, whose selects keep every key all rows see).
func.func private @pv_plain_keys_bf16(%St: memref<${BN}x${BM}xf32>, %Vr: !VROWS, %VP: !VP,
                                      %PP: !PP, %ir: index, %dc: index, %jb: index, %jc: index,
                                      %lo0: index, %hi0: index, %s00: !VF, %s01: !VF, %s10: !VF,
                                      %s11: !VF, %s20: !VF, %s21: !VF, %s30: !VF, %s31: !VF,
                                      %s40: !VF, %s41: !VF, %s50: !VF, %s51: !VF)
    -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cL = arith.constant ${L} : index
  %dc1 = arith.addi %dc, %cL : index
  %ir1 = arith.addi %ir, %c1 : index
  %ir2 = arith.addi %ir1, %c1 : index
  %ir3 = arith.addi %ir2, %c1 : index
  %ir4 = arith.addi %ir3, %c1 : index
  %ir5 = arith.addi %ir4, %c1 : index
  %jb_odd = arith.remui %jb, %c2 : index
  %jb2a = arith.addi %jb, %jb_odd : index
  %jb2 = arith.minui %jb2a, %jc : index
  %span = arith.subi %jc, %jb2 : index
  %p0 = arith.divui %jb2, %c2 : index
  %npairs = arith.divui %span, %c2 : index
  %p1 = arith.addi %p0, %npairs : index
  // Not p1 * 2: jb2 is odd when it was clamped to an odd jc (no pairs).
  %pairs_len = arith.muli %npairs, %c2 : index
  %jc2 = arith.addi %jb2, %pairs_len : index
  %h:12 = func.call @pv_edge_keys(%St, %Vr, %ir, %dc, %jb, %jb2, %lo0, %hi0, %s00, %s01, %s10,
                                  %s11, %s20, %s21, %s30, %s31, %s40, %s41, %s50, %s51)
      : (memref<${BN}x${BM}xf32>, !VROWS, index, index, index, index, index, index, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
      -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
  %acc:12 = scf.for %p = %p0 to %p1 step %c1
      iter_args(%a00 = %h#0, %a01 = %h#1, %a10 = %h#2, %a11 = %h#3, %a20 = %h#4, %a21 = %h#5, %a30 = %h#6, %a31 = %h#7, %a40 = %h#8, %a41 = %h#9, %a50 = %h#10, %a51 = %h#11)
      -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF) {
    %v0w = vector.load %VP[%p, %dc] : !VP, vector<16xi32>
    %v0 = vector.bitcast %v0w : vector<16xi32> to vector<32xbf16>
    %v1w = vector.load %VP[%p, %dc1] : !VP, vector<16xi32>
    %v1 = vector.bitcast %v1w : vector<16xi32> to vector<32xbf16>
    %w0 = func.call @broadcast_pair_t(%PP, %p, %ir) : (!PP, index, index) -> vector<32xbf16>
    %b00 = func.call @dot_bf16(%a00, %w0, %v0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %b01 = func.call @dot_bf16(%a01, %w0, %v1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %w1 = func.call @broadcast_pair_t(%PP, %p, %ir1) : (!PP, index, index) -> vector<32xbf16>
    %b10 = func.call @dot_bf16(%a10, %w1, %v0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %b11 = func.call @dot_bf16(%a11, %w1, %v1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %w2 = func.call @broadcast_pair_t(%PP, %p, %ir2) : (!PP, index, index) -> vector<32xbf16>
    %b20 = func.call @dot_bf16(%a20, %w2, %v0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %b21 = func.call @dot_bf16(%a21, %w2, %v1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %w3 = func.call @broadcast_pair_t(%PP, %p, %ir3) : (!PP, index, index) -> vector<32xbf16>
    %b30 = func.call @dot_bf16(%a30, %w3, %v0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %b31 = func.call @dot_bf16(%a31, %w3, %v1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %w4 = func.call @broadcast_pair_t(%PP, %p, %ir4) : (!PP, index, index) -> vector<32xbf16>
    %b40 = func.call @dot_bf16(%a40, %w4, %v0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %b41 = func.call @dot_bf16(%a41, %w4, %v1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %w5 = func.call @broadcast_pair_t(%PP, %p, %ir5) : (!PP, index, index) -> vector<32xbf16>
    %b50 = func.call @dot_bf16(%a50, %w5, %v0) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    %b51 = func.call @dot_bf16(%a51, %w5, %v1) : (!VF, vector<32xbf16>, vector<32xbf16>) -> !VF
    scf.yield %b00, %b01, %b10, %b11, %b20, %b21, %b30, %b31, %b40, %b41, %b50, %b51
        : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
  } {pejit.unroll_factor = 4 : i64}
  %f:12 = func.call @pv_edge_keys(%St, %Vr, %ir, %dc, %jc2, %jc, %lo0, %hi0, %acc#0, %acc#1,
                                  %acc#2, %acc#3, %acc#4, %acc#5, %acc#6, %acc#7, %acc#8, %acc#9,
                                  %acc#10, %acc#11)
      : (memref<${BN}x${BM}xf32>, !VROWS, index, index, index, index, index, index, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
      -> (!VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF)
  return %f#0, %f#1, %f#2, %f#3, %f#4, %f#5, %f#6, %f#7, %f#8, %f#9, %f#10, %f#11
      : !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF, !VF
}
