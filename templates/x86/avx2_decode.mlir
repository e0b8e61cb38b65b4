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
// term, no per-query-tile tables; pejit/core/CallPlan.h).
//   Qs[g] = qk_transform(Q[b, hk GROUP + g, 0])      g < GROUP
//   for each KV tile: St[j, g] = scale Kt[j] . Qs[g]  (@pejit_s_heads)
//     score_mod per (j, g) as scalars (head hk GROUP + g), then the mask:
//     the one query row sees keys j < skv, from skv - 1 - WINDOW on
//     (causal and a right window hide none of them)
//     the online softmax, lanes = heads; Os[g] = Os[g] alpha + P[:, g]^T V
//   O[b, hk GROUP + g, 0] = Os[g] / l
// Split-KV (%parts > 1, when b hkv items would leave cores idle): item
// (b, hk, part) takes the part-th of the key tiles and leaves Os[g], m and l
// in %partials ([b hkv, parts, GROUP, DV + 2]); @pejit_decode_combine then
// merges the parts: O = sum_p 2^(m_p - M) Os_p / sum_p 2^(m_p - M) l_p (the
// maxima in score units, as the softmax keeps them: 2^((m_p - M) log2 e)).

func.func @pejit_decode_item(%q: !Q, %k: !K, %v: !V, %o: !O, %scratch: !SCRATCH,
                             %partials: !SCRATCH, %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3,
                             %qpos: !QPOS, %kpos: !KPOS, %item: index, %parts: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cL = arith.constant ${L} : index
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
  %zv = arith.constant dense<0.0> : !VF
  %ninf = arith.constant dense<0xFF800000> : !VF
  %log2e = arith.constant dense<1.44269504088896> : !VF
  %zero_i = arith.constant 0 : i32
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %OFF = arith.subi %SKV, %SQ : index
  %part = arith.remui %item, %parts : index
  %bhk = arith.divui %item, %parts : index
  %hk = arith.remui %bhk, %HKV : index
  %b = arith.divui %bhk, %HKV : index
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
    scf.for %d = %c0 to %DV step %cL {
      vector.store %zv, %Os[%g, %d] : memref<${BM}x${DV}xf32>, !VF
    }
  }

  // The keys the one row sees: [skv - 1 - WINDOW (window), skv).
  %win_begin0 = arith.subi %OFF, %WINDOW : index
  %win_begin = arith.maxsi %win_begin0, %c0 : index
  %kv_begin = arith.select %has_window, %win_begin, %c0 : index
  %jt_first = arith.divui %kv_begin, %BN : index
  %jt_all = func.call @key_tiles(%k) : (!K) -> index
  // This part's key tiles: the part-th of ceil(tiles / parts) (maybe none).
  %tiles = arith.subi %jt_all, %jt_first : index
  %tiles_up0 = arith.addi %tiles, %parts : index
  %tiles_up = arith.subi %tiles_up0, %c1 : index
  %chunk = arith.divui %tiles_up, %parts : index
  %skip = arith.muli %part, %chunk : index
  %jt_begin0 = arith.addi %jt_first, %skip : index
  %jt_begin = arith.minui %jt_begin0, %jt_all : index
  %jt_end0 = arith.addi %jt_begin, %chunk : index
  %jt_end = arith.minui %jt_end0, %jt_all : index
  %k_in_place_allowed = arith.constant ${K_IN_PLACE}
  %k_row_stride = func.call @key_row_stride(%k) : (!K) -> index
  %k_rows_dense = arith.cmpi eq, %k_row_stride, %D : index
  %k_in_place_ok = arith.andi %k_in_place_allowed, %k_rows_dense : i1
  %true = arith.constant true

  // bf16 products (avx512_bf16_decode.mlir) read K and V as they are.
  %decode_bf16 = arith.constant ${DECODE_BF16}
  %stats:2 = scf.for %jt = %jt_begin to %jt_end step %c1 iter_args(%m = %ninf, %l = %zv)
      -> (!VF, !VF) {
    %j0 = arith.muli %jt, %BN : index
    %k_left = arith.subi %SKV, %j0 : index
    %nk = arith.minui %k_left, %BN : index
    // P . V starts at the window's first key (P is 0 before it, and 0 *
    // a NaN or inf in V would still reach the row).
    %seen_from0 = arith.subi %kv_begin, %j0 : index
    %seen_from1 = arith.maxsi %seen_from0, %c0 : index
    %seen_from = arith.minsi %seen_from1, %nk : index
    %tile_stats:2 = scf.if %decode_bf16 -> (!VF, !VF) {
      %r:2 = func.call @${DECODE_TILE}(%k, %v, %Qs, %Os, %e0, %e1, %e2, %e3, %qpos, %kpos, %b,
                                       %hk, %j0, %nk, %seen_from, %SQ, %m, %l)
          : (!K, !V, memref<${BM}x${D}xf32>, memref<${BM}x${DV}xf32>, !E0, !E1, !E2, !E3, !QPOS,
             !KPOS, index, index, index, index, index, index, !VF, !VF) -> (!VF, !VF)
      scf.yield %r#0, %r#1 : !VF, !VF
    } else {
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
          vector.store %ninf, %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !VF
        }
      }
      // The online softmax down the keys, the heads in lanes (as @pejit_item).
      %m_tile = scf.for %jr = %c0 to %BN step %c1 iter_args(%mx = %ninf) -> (!VF) {
        %s = vector.load %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !VF
        %grows = arith.cmpf olt, %mx, %s : !VF
        %mx1 = arith.select %grows, %s, %mx : vector<${L}xi1>, !VF
        scf.yield %mx1 : !VF
      }
      %m_grows = arith.cmpf olt, %m, %m_tile : !VF
      %m_new = arith.select %m_grows, %m_tile, %m : vector<${L}xi1>, !VF
      %none = arith.cmpf oeq, %m_new, %ninf : !VF
      %m_safe = arith.select %none, %zv, %m_new : vector<${L}xi1>, !VF
      %m_step = arith.subf %m, %m_safe : !VF
      %alpha_arg = arith.mulf %m_step, %log2e : !VF
      %alpha = func.call @exp2_vec(%alpha_arg) : (!VF) -> !VF
      %l_tile = scf.for %jr = %c0 to %BN step %c1 iter_args(%sum = %zv) -> (!VF) {
        %s = vector.load %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !VF
        %sd = arith.subf %s, %m_safe : !VF
        %e = arith.mulf %sd, %log2e : !VF
        %p = func.call @exp2_vec(%e) : (!VF) -> !VF
        vector.store %p, %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !VF
        %sum1 = arith.addf %sum, %p : !VF
        scf.yield %sum1 : !VF
      }
      %l_new = math.fma %l, %alpha, %l_tile : !VF
      vector.store %alpha, %A[%c0] : memref<${BM}xf32>, !VF
      // P . V over the keys the row sees, from seen_from on.
      func.call @pejit_pv_heads(%Os, %St, %v_rows, %A, %seen_from, %nk)
          : (memref<${BM}x${DV}xf32>, memref<${BN}x${BM}xf32>, !VROWS, memref<${BM}xf32>,
             index, index) -> ()
      scf.yield %m_new, %l_new : !VF, !VF
    }
    scf.yield %tile_stats#0, %tile_stats#1 : !VF, !VF
  }

  %L = memref.alloca() {alignment = 64 : i64} : memref<${L}xf32>
  vector.store %stats#1, %L[%c0] : memref<${L}xf32>, !VF
  %split = arith.cmpi ugt, %parts, %c1 : index
  scf.if %split {
    // Os[g], m and l of this part, for @pejit_decode_combine.
    %M = memref.alloca() {alignment = 64 : i64} : memref<${L}xf32>
    vector.store %stats#0, %M[%c0] : memref<${L}xf32>, !VF
    %row_floats = arith.addi %DV, %c2 : index
    %bp0 = arith.muli %bhk, %parts : index
    %bp = arith.addi %bp0, %part : index
    %first_row = arith.muli %bp, %GROUP : index
    scf.for %g = %c0 to %GROUP step %c1 {
      %r = arith.addi %first_row, %g : index
      %at = arith.muli %r, %row_floats : index
      scf.for %d = %c0 to %DV step %cL {
        %x = vector.load %Os[%g, %d] : memref<${BM}x${DV}xf32>, !VF
        %at_d = arith.addi %at, %d : index
        vector.store %x, %partials[%at_d] : !SCRATCH, !VF
      }
      %mg = memref.load %M[%g] : memref<${L}xf32>
      %lg = memref.load %L[%g] : memref<${L}xf32>
      %at_m = arith.addi %at, %DV : index
      %at_l = arith.addi %at_m, %c1 : index
      memref.store %mg, %partials[%at_m] : !SCRATCH
      memref.store %lg, %partials[%at_l] : !SCRATCH
    }
  } else {
  // O = Os / l per head; a head that saw no key (l = 0) is 0.
  scf.for %g = %c0 to %GROUP step %c1 {
    %h = arith.addi %h0, %g : index
    %lg = memref.load %L[%g] : memref<${L}xf32>
    %empty = arith.cmpf oeq, %lg, %zero : f32
    %inv0 = arith.divf %one, %lg : f32
    %inv = arith.select %empty, %zero, %inv0 : f32
    %invv = vector.broadcast %inv : f32 to !VF
    scf.for %d = %c0 to %DV step %cL {
      %x = vector.load %Os[%g, %d] : memref<${BM}x${DV}xf32>, !VF
      %y = arith.mulf %x, %invv : !VF
      %yt = func.call @narrow_lanes(%y) : (!VF) -> !VOUT
      vector.store %yt, %o[%b, %h, %c0, %d] : !O, !VOUT
    }
  }
  }
  return
}

// The parts of a split decode step, merged: item (b, hk) writes its GROUP
// heads' rows O[b, hk GROUP + g, 0] from %partials (@pejit_decode_item).
// A part that saw no key has m = -inf and l = 0: weight 0; a head no part
// saw is 0.
func.func @pejit_decode_combine(%o: !O, %partials: !SCRATCH, %item: index, %parts: index)
    attributes {llvm.emit_c_interface, pejit.cold} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cL = arith.constant ${L} : index
  %DV = arith.constant ${DV} : index
  %HKV = arith.constant ${HKV} : index
  %GROUP = arith.constant ${GROUP} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %log2e = arith.constant 1.44269504088896 : f32
  %zv = arith.constant dense<0.0> : !VF
  %hk = arith.remui %item, %HKV : index
  %b = arith.divui %item, %HKV : index
  %row_floats = arith.addi %DV, %c2 : index
  %first_part = arith.muli %item, %parts : index
  %acc = memref.alloca() {alignment = 64 : i64} : memref<${DV}xf32>
  scf.for %g = %c0 to %GROUP step %c1 {
    // The largest m over the parts.
    %mmax = scf.for %p = %c0 to %parts step %c1 iter_args(%mx = %ninf) -> (f32) {
      %bp = arith.addi %first_part, %p : index
      %r0 = arith.muli %bp, %GROUP : index
      %r = arith.addi %r0, %g : index
      %at = arith.muli %r, %row_floats : index
      %at_m = arith.addi %at, %DV : index
      %m = memref.load %partials[%at_m] : !SCRATCH
      %mx1 = arith.maximumf %mx, %m : f32
      scf.yield %mx1 : f32
    }
    scf.for %d = %c0 to %DV step %cL {
      vector.store %zv, %acc[%d] : memref<${DV}xf32>, !VF
    }
    %lsum = scf.for %p = %c0 to %parts step %c1 iter_args(%ls = %zero) -> (f32) {
      %bp = arith.addi %first_part, %p : index
      %r0 = arith.muli %bp, %GROUP : index
      %r = arith.addi %r0, %g : index
      %at = arith.muli %r, %row_floats : index
      %at_m = arith.addi %at, %DV : index
      %at_l = arith.addi %at_m, %c1 : index
      %m = memref.load %partials[%at_m] : !SCRATCH
      %l = memref.load %partials[%at_l] : !SCRATCH
      %empty = arith.cmpf oeq, %m, %ninf : f32
      %diff = arith.subf %m, %mmax : f32
      %arg = arith.mulf %diff, %log2e : f32
      %w0 = math.exp2 %arg : f32
      %w = arith.select %empty, %zero, %w0 : f32
      %wv = vector.broadcast %w : f32 to !VF
      scf.for %d = %c0 to %DV step %cL {
        %at_d = arith.addi %at, %d : index
        %x = vector.load %partials[%at_d] : !SCRATCH, !VF
        %a = vector.load %acc[%d] : memref<${DV}xf32>, !VF
        %a1 = vector.fma %wv, %x, %a : !VF
        vector.store %a1, %acc[%d] : memref<${DV}xf32>, !VF
      }
      %lw = arith.mulf %l, %w : f32
      %ls1 = arith.addf %ls, %lw : f32
      scf.yield %ls1 : f32
    }
    %none = arith.cmpf oeq, %lsum, %zero : f32
    %inv0 = arith.divf %one, %lsum : f32
    %inv = arith.select %none, %zero, %inv0 : f32
    %invv = vector.broadcast %inv : f32 to !VF
    %h0 = arith.muli %hk, %GROUP : index
    %h = arith.addi %h0, %g : index
    scf.for %d = %c0 to %DV step %cL {
      %a = vector.load %acc[%d] : memref<${DV}xf32>, !VF
      %y = arith.mulf %a, %invv : !VF
      %yt = func.call @narrow_lanes(%y) : (!VF) -> !VOUT
      vector.store %yt, %o[%b, %h, %c0, %d] : !O, !VOUT
    }
  }
  return
}

// The bf16 products' decode tile (@pejit_decode_tile_bf16 in
// avx512_bf16_decode.mlir) where the kernel multiplies in f32: never called.
func.func private @pejit_decode_tile_none(%k: !K, %v: !V, %Qs: memref<${BM}x${D}xf32>,
                                          %Os: memref<${BM}x${DV}xf32>, %e0: !E0, %e1: !E1,
                                          %e2: !E2, %e3: !E3, %qpos: !QPOS, %kpos: !KPOS,
                                          %b: index, %hk: index, %j0: index, %nk: index,
                                          %seen_from: index, %sq: index, %m: !VF, %l: !VF)
    -> (!VF, !VF) {
  return %m, %l : !VF, !VF
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
  %cL = arith.constant ${L} : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %GROUP = arith.constant ${GROUP} : index
  %zv = arith.constant dense<0.0> : !VF
  %scale = arith.constant ${SCALE} : f32
  scf.for %jr = %c0 to %BN step %c1 {
    vector.store %zv, %St[%jr, %c0] : memref<${BN}x${BM}xf32>, !VF
  }
  %BN4 = arith.divui %BN, %c4 : index
  %jr_4end = arith.muli %BN4, %c4 : index
  scf.for %g = %c0 to %GROUP step %c1 {
    scf.for %jr = %c0 to %jr_4end step %c4 {
      %jr1 = arith.addi %jr, %c1 : index
      %jr2 = arith.addi %jr, %c2 : index
      %jr3 = arith.addi %jr, %c3 : index
      %acc:4 = scf.for %d = %c0 to %D step %cL
          iter_args(%a0 = %zv, %a1 = %zv, %a2 = %zv, %a3 = %zv) -> (!VF, !VF, !VF, !VF) {
        %q = vector.load %Qs[%g, %d] : memref<${BM}x${D}xf32>, !VF
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
      func.call @pejit_store_head_score(%St, %jr, %g, %acc#0, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !VF, f32) -> ()
      func.call @pejit_store_head_score(%St, %jr1, %g, %acc#1, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !VF, f32) -> ()
      func.call @pejit_store_head_score(%St, %jr2, %g, %acc#2, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !VF, f32) -> ()
      func.call @pejit_store_head_score(%St, %jr3, %g, %acc#3, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !VF, f32) -> ()
    }
    scf.for %jr = %jr_4end to %BN step %c1 {
      %acc = scf.for %d = %c0 to %D step %cL iter_args(%a = %zv) -> (!VF) {
        %q = vector.load %Qs[%g, %d] : memref<${BM}x${D}xf32>, !VF
        %k = vector.load %Kt[%jr, %d] : !KTILE, !VF
        %b = vector.fma %k, %q, %a : !VF
        scf.yield %b : !VF
      }
      func.call @pejit_store_head_score(%St, %jr, %g, %acc, %scale)
          : (memref<${BN}x${BM}xf32>, index, index, !VF, f32) -> ()
    }
  }
  return
}

// St[jr, g] = scale * sum(partial).
func.func private @pejit_store_head_score(%St: memref<${BN}x${BM}xf32>, %jr: index, %g: index,
                                          %partial: !VF, %scale: f32) {
  %dot = vector.reduction <add>, %partial fastmath<reassoc> : !VF into f32
  %s = arith.mulf %dot, %scale : f32
  memref.store %s, %St[%jr, %g] : memref<${BN}x${BM}xf32>
  return
}

// Os[g] = Os[g] A[g] + sum over the tile's keys [j_begin, nk) of P[j, g]
// V[j], g < GROUP: each V row is read from memory once, for all the heads;
// the sum starts from 0 and joins Os[g] A[g] once (blocked summation).
func.func @pejit_pv_heads(%Os: memref<${BM}x${DV}xf32>, %St: memref<${BN}x${BM}xf32>,
                          %Vr: !VROWS, %A: memref<${BM}xf32>, %j_begin: index, %nk: index)
    attributes {passthrough = ["noinline"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cL = arith.constant ${L} : index
  %DV = arith.constant ${DV} : index
  %GROUP = arith.constant ${GROUP} : index
  %zv = arith.constant dense<0.0> : !VF
  // The tile's sums from 0 in Ts, added to Os * alpha once at the end
  // (blocked summation: one rounding of the running output per tile).
  %Ts = memref.alloca() {alignment = 64 : i64} : memref<${GROUP}x${DV}xf32>
  scf.for %g = %c0 to %GROUP step %c1 {
    scf.for %dc = %c0 to %DV step %cL {
      vector.store %zv, %Ts[%g, %dc] : memref<${GROUP}x${DV}xf32>, !VF
    }
  }
  // Per key and head: P broadcast once, then its row of V (L1 after the
  // first head) into the head's sum.
  scf.for %j = %j_begin to %nk step %c1 {
    scf.for %g = %c0 to %GROUP step %c1 {
      %ps = memref.load %St[%j, %g] : memref<${BN}x${BM}xf32>
      %p = vector.broadcast %ps : f32 to !VF
      scf.for %dc = %c0 to %DV step %cL {
        %v = vector.load %Vr[%j, %dc] : !VROWS, !VF
        %t = vector.load %Ts[%g, %dc] : memref<${GROUP}x${DV}xf32>, !VF
        %t_new = vector.fma %p, %v, %t : !VF
        vector.store %t_new, %Ts[%g, %dc] : memref<${GROUP}x${DV}xf32>, !VF
      }
    }
  }
  scf.for %g = %c0 to %GROUP step %c1 {
    %alpha_s = memref.load %A[%g] : memref<${BM}xf32>
    %alpha = vector.broadcast %alpha_s : f32 to !VF
    scf.for %dc = %c0 to %DV step %cL {
      %o = vector.load %Os[%g, %dc] : memref<${BM}x${DV}xf32>, !VF
      %t = vector.load %Ts[%g, %dc] : memref<${GROUP}x${DV}xf32>, !VF
      %o_new = vector.fma %o, %alpha, %t : !VF
      vector.store %o_new, %Os[%g, %dc] : memref<${BM}x${DV}xf32>, !VF
    }
  }
  return
}
