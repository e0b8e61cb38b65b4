// Grouped decode for the x86 AVX2 attention template
// (templates/x86/avx2_attention.mlir), put after its other blocks in place
// of its `// @pejit-blocks` line before substitution and parsing.
//
// A decode step (sq = 1) under GQA reads each KV head's K and V for GROUP
// query heads. One item per (b, hk) serves them all: the GROUP query rows
// (one per head) are the lanes of the score vectors, so K and V stream
// from memory once per KV head instead of once per query head, and every
// K and V row loaded is used GROUP times. The runtime calls
// @pejit_decode_item instead of @pejit_item for calls with sq = 1 when the
// kernel allows it (pejit.kernel's decode_group > 0: 1 < GROUP <= 8, no value
// term, no per-query-tile tables; runtime/core/CallPlan.h).
//   Qs[g] = qk_transform(Q[b, hk GROUP + g, 0])      g < GROUP
//   for each KV tile: St[j, g] = scale Kt[j] . Qs[g]  (@pejit_s_heads)
//     score_mod per (j, g) as scalars (head hk GROUP + g), then the mask:
//     the one query row sees keys j < skv, from skv - 1 - WINDOW on
//     (causal and a right window hide none of them)
//     the online softmax, lanes = heads; Os[g] = Os[g] alpha + P[:, g]^T V
//   O[b, hk GROUP + g, 0] = Os[g] / l

func.func @pejit_decode_item(%q: !Q, %k: !K, %v: !V, %o: !O, %scratch: !SCRATCH,
                             %kcache: !KCACHE, %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3,
                             %qpos: !QPOS, %kpos: !KPOS, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %HKV = arith.constant ${HKV} : index
  %GROUP = arith.constant ${GROUP} : index
  %WINDOW = arith.constant ${WINDOW} : index
  %has_window = arith.constant ${HAS_WINDOW}
  %score_mod = arith.constant ${SCORE_MOD}
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %zv = arith.constant dense<0.0> : !V8
  %ninf = arith.constant dense<0xFF800000> : !V8
  %log2e = arith.constant dense<1.44269504088896> : !V8
  %zero_i = arith.constant 0 : i32
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  %hk = arith.remui %item, %HKV : index
  %b = arith.divui %item, %HKV : index
  %h0 = arith.muli %hk, %GROUP : index

  %Qs = memref.alloca() {alignment = 64 : i64} : memref<${BM}x${D}xf32>
  %Ks = memref.alloca() {alignment = 64 : i64} : memref<${BN}x${D}xf32>
  %Vs = memref.alloca() {alignment = 64 : i64} : memref<${BN}x${DV}xf32>
  %St = memref.alloca() {alignment = 64 : i64} : memref<${BN}x${BM}xf32>
  %Os = memref.alloca() {alignment = 64 : i64} : memref<${BM}x${DV}xf32>
  %A = memref.alloca() {alignment = 64 : i64} : memref<${BM}xf32>

  // Head g's one query row, transformed (RoPE), into Qs[g].
  scf.for %g = %c0 to %GROUP step %c1 {
    %h = arith.addi %h0, %g : index
    %q_row1 = memref.subview %q[%b, %h, 0, 0] [1, 1, 1, ${D}] [1, 1, 1, 1]
        : !Q to memref<1x${D}x${T}, strided<[?, 1], offset: ?>>
    %q_row = memref.cast %q_row1 : memref<1x${D}x${T}, strided<[?, 1], offset: ?>> to !QROWS
    %q_tile = memref.subview %Qs[%g, 0] [1, ${D}] [1, 1]
        : memref<${BM}x${D}xf32> to memref<1x${D}xf32, strided<[${D}, 1], offset: ?>>
    attn.qk_transform %q_tile from %q_row, %c1, %c0, %b, %scratch lengths(%SQ, %SKV)
        : memref<1x${D}xf32, strided<[${D}, 1], offset: ?>> from !QROWS, !SCRATCH
    scf.for %d = %c0 to %DV step %c8 {
      vector.store %zv, %Os[%g, %d] : memref<${BM}x${DV}xf32>, !V8
    }
  }

  // The keys the one row sees: [skv - 1 - WINDOW (window), skv).
  %win_begin0 = arith.subi %OFF, %WINDOW : index
  %win_begin = arith.maxsi %win_begin0, %c0 : index
  %kv_begin = arith.select %has_window, %win_begin, %c0 : index
  %jt_begin = arith.divui %kv_begin, %BN : index
  %jt_end = func.call @key_tiles(%k) : (!K) -> index
  %k_in_place_allowed = arith.constant ${K_IN_PLACE}
  %k_row_stride = func.call @key_row_stride(%k) : (!K) -> index
  %k_rows_dense = arith.cmpi eq, %k_row_stride, %D : index
  %k_in_place_ok = arith.andi %k_in_place_allowed, %k_rows_dense : i1
  %true = arith.constant true

  %stats:2 = scf.for %jt = %jt_begin to %jt_end step %c1 iter_args(%m = %ninf, %l = %zv)
      -> (!V8, !V8) {
    %j0 = arith.muli %jt, %BN : index
    %k_left = arith.subi %SKV, %j0 : index
    %nk = arith.minui %k_left, %BN : index
    %tile = memref.cast %Ks : memref<${BN}x${D}xf32> to !KTILE
    %full_k = arith.cmpi eq, %nk, %BN : index
    %in_place = arith.andi %k_in_place_ok, %full_k : i1
    %Kt = scf.if %in_place -> !KTILE {
      %view = func.call @key_rows_in_place(%k, %tile, %b, %hk, %j0)
          : (!K, !KTILE, index, index, index) -> !KTILE
      scf.yield %view : !KTILE
    } else {
      func.call @load_key_tile(%k, %tile, %scratch, %b, %hk, %jt, %SQ)
          : (!K, !KTILE, !SCRATCH, index, index, index, index) -> ()
      scf.yield %tile : !KTILE
    }
    %v_rows = func.call @kv_value_rows(%v, %Vs, %b, %hk, %j0, %nk, %true)
        : (!V, memref<${BN}x${DV}xf32>, index, index, index, index, i1) -> !VROWS
    func.call @pejit_s_heads(%St, %Qs, %Kt)
        : (memref<${BN}x${BM}xf32>, memref<${BM}x${D}xf32>, !KTILE) -> ()

    // score_mod per (key, head), as scalars: each lane is another head.
    scf.if %score_mod {
      scf.for %jr = %c0 to %nk step %c1 {
        %j = arith.addi %j0, %jr : index
        %j_i = arith.index_cast %j : index to i32
        scf.for %g = %c0 to %GROUP step %c1 {
          %h = arith.addi %h0, %g : index
          %s = memref.load %St[%jr, %g] : memref<${BN}x${BM}xf32>
          %s_mod = attn.score_mod %s, batch %b, head %h, query %zero_i, key %j_i
              operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
              positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV) : f32, i32
          memref.store %s_mod, %St[%jr, %g] : memref<${BN}x${BM}xf32>
        }
      }
    }
    // Mask: keys past skv (tile padding) and before the window.
    scf.for %jr = %c0 to %BN step %c1 {
      %j = arith.addi %j0, %jr : index
      %inside = arith.cmpi ult, %j, %SKV : index
      %after = arith.cmpi sge, %j, %kv_begin : index
      %seen = arith.andi %inside, %after : i1
      %hidden = arith.xori %seen, %true : i1
      scf.if %hidden {
        vector.store %ninf, %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !V8
      }
    }
    // The online softmax down the keys, the heads in lanes (as @pejit_item).
    %m_tile = scf.for %jr = %c0 to %BN step %c1 iter_args(%mx = %ninf) -> (!V8) {
      %s = vector.load %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !V8
      %grows = arith.cmpf olt, %mx, %s : !V8
      %mx1 = arith.select %grows, %s, %mx : vector<8xi1>, !V8
      scf.yield %mx1 : !V8
    }
    %m_grows = arith.cmpf olt, %m, %m_tile : !V8
    %m_new = arith.select %m_grows, %m_tile, %m : vector<8xi1>, !V8
    %none = arith.cmpf oeq, %m_new, %ninf : !V8
    %m_safe = arith.select %none, %zv, %m_new : vector<8xi1>, !V8
    %m_step = arith.subf %m, %m_safe : !V8
    %alpha_arg = arith.mulf %m_step, %log2e : !V8
    %alpha = func.call @exp2_v8(%alpha_arg) : (!V8) -> !V8
    %l_tile = scf.for %jr = %c0 to %BN step %c1 iter_args(%sum = %zv) -> (!V8) {
      %s = vector.load %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !V8
      %sd = arith.subf %s, %m_safe : !V8
      %e = arith.mulf %sd, %log2e : !V8
      %p = func.call @exp2_v8(%e) : (!V8) -> !V8
      vector.store %p, %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !V8
      %sum1 = arith.addf %sum, %p : !V8
      scf.yield %sum1 : !V8
    }
    %l_new = math.fma %l, %alpha, %l_tile : !V8
    vector.store %alpha, %A[%c0] : memref<${BM}xf32>, !V8
    func.call @pejit_pv_heads(%Os, %St, %v_rows, %A, %nk)
        : (memref<${BM}x${DV}xf32>, memref<${BN}x${BM}xf32>, !VROWS, memref<${BM}xf32>,
           index) -> ()
    scf.yield %m_new, %l_new : !V8, !V8
  }

  // O = Os / l per head; a head that saw no key (l = 0) is 0.
  %L = memref.alloca() {alignment = 64 : i64} : memref<8xf32>
  vector.store %stats#1, %L[%c0] : memref<8xf32>, !V8
  scf.for %g = %c0 to %GROUP step %c1 {
    %h = arith.addi %h0, %g : index
    %lg = memref.load %L[%g] : memref<8xf32>
    %empty = arith.cmpf oeq, %lg, %zero : f32
    %inv0 = arith.divf %one, %lg : f32
    %inv = arith.select %empty, %zero, %inv0 : f32
    %invv = vector.broadcast %inv : f32 to !V8
    scf.for %d = %c0 to %DV step %c8 {
      %x = vector.load %Os[%g, %d] : memref<${BM}x${DV}xf32>, !V8
      %y = arith.mulf %x, %invv : !V8
      %yt = func.call @narrow8(%y) : (!V8) -> !OUT8
      vector.store %yt, %o[%b, %h, %c0, %d] : !O, !OUT8
    }
  }
  return
}

// St[jr, 0 : 8] = (scale Kt[jr] . Qs[g] for g < GROUP, then 0): per head,
// 4 key rows at a time down d (4 independent FMA chains: one chain per row
// would wait on the FMA latency), then one horizontal sum per row.
func.func @pejit_s_heads(%St: memref<${BN}x${BM}xf32>, %Qs: memref<${BM}x${D}xf32>, %Kt: !KTILE)
    attributes {passthrough = ["noinline"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %GROUP = arith.constant ${GROUP} : index
  %zv = arith.constant dense<0.0> : !V8
  %scale = arith.constant ${SCALE} : f32
  scf.for %jr = %c0 to %BN step %c1 {
    vector.store %zv, %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !V8
  }
  %BN4 = arith.divui %BN, %c4 : index
  %jr_4end = arith.muli %BN4, %c4 : index
  scf.for %g = %c0 to %GROUP step %c1 {
    scf.for %jr = %c0 to %jr_4end step %c4 {
      %jr1 = arith.addi %jr, %c1 : index
      %jr2 = arith.addi %jr, %c2 : index
      %jr3 = arith.addi %jr, %c3 : index
      %acc:4 = scf.for %d = %c0 to %D step %c8
          iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv) -> (!V8, !V8, !V8, !V8) {
        %q = vector.load %Qs[%g, %d] : memref<${BM}x${D}xf32>, !V8
        %k0 = vector.load %Kt[%jr, %d] : !KTILE, !V8
        %k1 = vector.load %Kt[%jr1, %d] : !KTILE, !V8
        %k2 = vector.load %Kt[%jr2, %d] : !KTILE, !V8
        %k3 = vector.load %Kt[%jr3, %d] : !KTILE, !V8
        %b0 = vector.fma %k0, %q, %a0 : !V8
        %b1 = vector.fma %k1, %q, %a1 : !V8
        %b2 = vector.fma %k2, %q, %a2 : !V8
        %b3 = vector.fma %k3, %q, %a3 : !V8
        scf.yield %b0, %b1, %b2, %b3 : !V8, !V8, !V8, !V8
      }
      func.call @pejit_store_head_score(%St, %jr, %g, %acc#0, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !V8, f32) -> ()
      func.call @pejit_store_head_score(%St, %jr1, %g, %acc#1, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !V8, f32) -> ()
      func.call @pejit_store_head_score(%St, %jr2, %g, %acc#2, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !V8, f32) -> ()
      func.call @pejit_store_head_score(%St, %jr3, %g, %acc#3, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !V8, f32) -> ()
    }
    scf.for %jr = %jr_4end to %BN step %c1 {
      %acc = scf.for %d = %c0 to %D step %c8 iter_args(%a = %zv) -> (!V8) {
        %q = vector.load %Qs[%g, %d] : memref<${BM}x${D}xf32>, !V8
        %k = vector.load %Kt[%jr, %d] : !KTILE, !V8
        %b = vector.fma %k, %q, %a : !V8
        scf.yield %b : !V8
      }
      func.call @pejit_store_head_score(%St, %jr, %g, %acc, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !V8, f32) -> ()
    }
  }
  return
}

// St[jr, g] = scale * sum(partial).
func.func private @pejit_store_head_score(%St: memref<${BN}x${BM}xf32>, %jr: index, %g: index,
                                          %partial: !V8, %scale: f32) {
  %dot = vector.reduction <add>, %partial fastmath<reassoc> : !V8 into f32
  %s = arith.mulf %dot, %scale : f32
  memref.store %s, %St[%jr, %g] : memref<${BN}x${BM}xf32>
  return
}

// Os[g] = Os[g] A[g] + sum over the tile's nk keys of P[j, g] V[j], g <
// GROUP: each V row is loaded once, in 8-channel pieces, for all the heads.
func.func @pejit_pv_heads(%Os: memref<${BM}x${DV}xf32>, %St: memref<${BN}x${BM}xf32>,
                          %Vr: !VROWS, %A: memref<${BM}xf32>, %nk: index)
    attributes {passthrough = ["noinline"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %DV = arith.constant ${DV} : index
  %GROUP = arith.constant ${GROUP} : index
  scf.for %g = %c0 to %GROUP step %c1 {
    %alpha_s = memref.load %A[%g] : memref<${BM}xf32>
    %alpha = vector.broadcast %alpha_s : f32 to !V8
    scf.for %dc = %c0 to %DV step %c8 {
      %o = vector.load %Os[%g, %dc] : memref<${BM}x${DV}xf32>, !V8
      %o_scaled = arith.mulf %o, %alpha : !V8
      vector.store %o_scaled, %Os[%g, %dc] : memref<${BM}x${DV}xf32>, !V8
    }
  }
  scf.for %j = %c0 to %nk step %c1 {
    scf.for %dc = %c0 to %DV step %c8 {
      %v = vector.load %Vr[%j, %dc] : !VROWS, !V8
      scf.for %g = %c0 to %GROUP step %c1 {
        %ps = memref.load %St[%j, %g] : memref<${BN}x${BM}xf32>
        %p = vector.broadcast %ps : f32 to !V8
        %o = vector.load %Os[%g, %dc] : memref<${BM}x${DV}xf32>, !V8
        %o_new = vector.fma %p, %v, %o : !V8
        vector.store %o_new, %Os[%g, %dc] : memref<${BM}x${DV}xf32>, !V8
      }
    }
  }
  return
}
