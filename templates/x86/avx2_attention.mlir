// x86 flash-attention forward template (f32 tiles, vectors of L lanes: 8 in
// the avx2 ISA family, 16 in avx512; docs/isa.md).
//
// One work item = (batch b, query head h, query tile qt); the runtime runs
// items on all cores. Per item:
//   Qs = qk_transform(Q[b, h, i0 : i0+BM])  read and rotated in one pass
//   Qt = transpose(Qs) * scale           [D, BM]: L query rows per vector
//   for each KV tile that the causal/window mask does not hide entirely:
//     Ks = qk_transform(K[b, h / GROUP, j0 : j0+BN])   likewise, or a tile
//                                          of the key cache (K rotated once
//                                          per call); V read in place or
//                                          copied to Vs; next tile prefetched
//     St = Ks . Qt                       [BN, BM], 6 x 16 register block
//     St = score_mod(St)                 pointwise: softcap, ALiBi, ... (hooks)
//     mask(St)                           causal, window, key tail -> -inf
//     m' = max(m, max_j St); P = exp(St - m'); l = l*exp(m - m') + sum_j P
//     Os = Os * exp(m - m') + P^T . V    6 x 16 register block (@pejit_pv_tile)
//     VT = VT * exp(m - m') + P by bucket  (a value term, @pejit_value_term_tile)
//   Os += VT . rows                      (a value term, @pejit_value_term_finish)
//   O[b, h, i0 : i0+nq] = Os / l         (l = 0: the row saw no key -> 0)
// Reading the rows once, transformed on the way into the tile, and V in
// place: copying Q/K/V into tiles and rotating them there cost more
// (bench/RESULTS.md, session 4).
// Keeping the score tile transposed makes the softmax reductions plain
// elementwise vector ops, which the backend lowers well.
// @pejit_prepare, @exp2_vec, @pejit_pv_tile, @transpose_scaled, @key_cache_tile,
// @load_key_tile, @kv_value_rows and @narrow8 live in avx2_blocks.mlir, the
// tile functions in avx2_tiles.mlir, the one-row ones in avx2_rows.mlir and
// the grouped decode item (@pejit_decode_item, which the runtime calls for
// sq = 1 under GQA instead of this one) in avx2_decode.mlir, all put in
// place of the `// @pejit-blocks` line at the end before substitution.
//
// Parameters, substituted as text before parsing (attn-instantiate-x86-template):
//   ${B} ${HQ} ${HKV} ${GROUP}=HQ/HKV ${D} ${DV}
//   ${SQ} ${SKV}: the lengths, or `?` for a shape class (docs/shape-classes.md).
//   Either way the code reads them from the memrefs (memref.dim: a constant
//   at a static shape) and derives NQT = ceil(SQ / BM), OFF = SKV - SQ and
//   NKT = ceil(SKV / BN) from them; hook ops get them as lengths(...).
//   ${BM} (multiple of 48) ${BN} (multiple of 6)  D % 8 == 0, DV % 16 == 0
//   L (8 or 16), L2 = 2 L, LM1 = L - 1, IOTA = [0, ..., L - 1]: the lanes;
//   at 16, D % 16 == 0 and DV % 32 == 0
//   ${CAUSAL} ${HAS_WINDOW} (true|false) ${WINDOW}
//   ${HAS_RIGHT} ${RIGHT}: the right window (keys j <= i + OFF + RIGHT;
//   never with CAUSAL, which hides more)
//   ${SCORE_MOD} (true|false): a softcap or a fused score bias exists
//   ${E0} .. ${E3}: the memref types of the encoding operand slots
//   ${TILE_SCRATCH}: floats of the query tile's scratch (>= 8), which the
//   encodings' query-tile prologues fill and their score hooks read
//   ${VALUE_TERM} (true|false): a fused value term (Shaw's a^V) with
//   ${VT_BUCKETS} buckets; its accumulator VT is [VT_BUCKETS, BM] (${VT_FLOATS})
//   ${SCALE} ${QPB} ${KPB} (rows of the position ids: axes x (1 or B); axes
//   > 1 for M-RoPE, one block of rows per section)
//   ${T} ${OT} element types of Q/K/V and of O (f32, f16 or bf16); the
//   tiles are f32 either way: 16-bit Q/K are widened by the QK transform's
//   read, 16-bit V by @kv_value_rows, the output narrowed as it is stored
//   ${KONCE} (true|false): K may be rotated once per call into the key cache
//   (!KCACHE, ${KCACHE} floats or `?`: [B, HKV, NKT, BN, D]) by
//   @pejit_prepare; it is, when the runtime passes a cache of more than 0
//   floats (pejit/core/CallPlan.h decides; ${KTILE_FLOATS} = BN D)
//   VALUE_ROWS and NARROW8 (parameters too): the bodies of @kv_value_rows
//   (a view of V for f32 with full Q tiles, else the (widening) copy into
//   Vs) and @narrow8 (a plain return for f32)

!Q = memref<${B}x${HQ}x${SQ}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!K = memref<${B}x${HKV}x${SKV}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!V = memref<${B}x${HKV}x${SKV}x${DV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!O = memref<${B}x${HQ}x${SQ}x${DV}x${OT}, strided<[?, ?, ?, 1], offset: ?>>
!QPOS = memref<${QPB}x${SQ}xi64>
!KPOS = memref<${KPB}x${SKV}xi64>
!SCRATCH = memref<?xf32>
// A training forward's lse [b, hq, sq] as [b, hq, sq, 1]; a run that does
// not ask for it passes 0 rows.
!LSE = memref<?x${HQ}x?x1xf32, strided<[?, ?, ?, 1], offset: ?>>
// The key cache (K rotated once per call), [B, HKV, ceil(skv / BN), BN, D]
// floats: ${KCACHE} of them, or `?` where the call's lengths size it.
!KCACHE = memref<${KCACHE}xf32>
// The encodings' own tensors (a T5 table, ...), contiguous, in the order of
// the attention's encoding_operands; an unused slot is memref<1xf32>.
!E0 = ${E0}
!E1 = ${E1}
!E2 = ${E2}
!E3 = ${E3}
// Rows of one (batch, head) of Q / K as the QK transform reads them, and the
// f32 V rows P . V reads (V itself for f32 inputs, else the widened Vs tile).
!QROWS = memref<?x${D}x${T}, strided<[?, 1], offset: ?>>
!KROWS = memref<?x${D}x${T}, strided<[?, 1], offset: ?>>
!VROWS = memref<?x${DV}xf32, strided<[?, 1], offset: ?>>
// A rotated K tile as S reads it: the Ks tile, or a tile of the key cache.
!KTILE = memref<${BN}x${D}xf32, strided<[${D}, 1], offset: ?>>
!VF = vector<${L}xf32>
// The bf16 products' packed pairs (avx512_bf16, docs/isa.md), two bf16 in
// each i32: Q' scaled, pairs along d [D/2, BM]; K' pairs along d [BN, D/2];
// V pairs of keys [BN/2, DV]; P pairs of keys [BN/2, BM]. One row or
// column where the kernel multiplies in f32.
!QTP = memref<${QTP_ROWS}x${BM}xi32>
!KB = memref<${BN}x${KB_COLS}xi32>
!VP = memref<${VP_ROWS}x${DV}xi32>
!PP = memref<${VP_ROWS}x${BM}xi32>
!VOUT = vector<${L}x${OT}>

// Once per call, before any item, as `step` calls on all cores: call
// `first` fills the position rows first, first + step, ... (pejit.cold: run
// once per call, so the backend spends no strength reduction on it.) The
// encodings' tensors are there for a QK transform that reads one (a RoPE's
// runtime position scale).
func.func @pejit_prologue(%qpos: !QPOS, %kpos: !KPOS, %scratch: !SCRATCH, %first: index,
                          %step: index, %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3)
    attributes {llvm.emit_c_interface, pejit.cold} {
  attn.qk_prologue %qpos, %kpos, %scratch rows(%first, %step)
      operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : !QPOS, !KPOS, !SCRATCH
  return
}

// The position ids (as the prologue gets them) are for encodings that
// measure distance by position (relative_to = position): the hook
// expansion reads them only for those.
func.func @pejit_item(%q: !Q, %k: !K, %v: !V, %o: !O, %lse: !LSE, %scratch: !SCRATCH,
                      %kcache: !KCACHE,
                      %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3, %qpos: !QPOS, %kpos: !KPOS,
                      %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %cLm1 = arith.constant ${LM1} : index
  %cL = arith.constant ${L} : index
  %c24 = arith.constant 24 : index
  %BM = arith.constant ${BM} : index
  %BN = arith.constant ${BN} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  // The lengths: the memrefs' (constants at a static shape, the call's
  // where the source wrote `?`). NQT = ceil(SQ / BM), OFF = SKV - SQ.
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %HQ = arith.constant ${HQ} : index
  %GROUP = arith.constant ${GROUP} : index
  %sq_up0 = arith.addi %SQ, %BM : index
  %sq_up = arith.subi %sq_up0, %c1 : index
  %NQT = arith.divui %sq_up, %BM : index
  %OFF = arith.subi %SKV, %SQ : index
  %NKT = func.call @key_tiles(%k) : (!K) -> index
  %WINDOW = arith.constant ${WINDOW} : index
  %causal = arith.constant ${CAUSAL}
  %konce = func.call @key_cache_used(%kcache) : (!KCACHE) -> i1
  %has_window = arith.constant ${HAS_WINDOW}
  %RIGHT = arith.constant ${RIGHT} : index
  %has_right = arith.constant ${HAS_RIGHT}
  %score_mod = arith.constant ${SCORE_MOD}
  %value_term = arith.constant ${VALUE_TERM}
  %VT_FLOATS = arith.constant ${VT_FLOATS} : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %zv = arith.constant dense<0.0> : !VF
  %ninf = arith.constant dense<0xFF800000> : !VF
  %log2e = arith.constant dense<1.44269504088896> : !VF
  %iota32 = arith.constant dense<${IOTA}> : vector<${L}xi32>
  %cm1 = arith.constant -1 : index
  %true = arith.constant true

  // item -> (b, h, qt); query rows [i0, i0 + nq) of this tile. Items hand
  // out the last query tile first: under a causal mask it has the most keys,
  // so the big items start early and the small ones fill the end.
  %qt_rev = arith.remui %item, %NQT : index
  %nqt1 = arith.subi %NQT, %c1 : index
  %qt = arith.subi %nqt1, %qt_rev : index
  %bh = arith.divui %item, %NQT : index
  %h = arith.remui %bh, %HQ : index
  %b = arith.divui %bh, %HQ : index
  %hk = arith.divui %h, %GROUP : index
  %i0 = arith.muli %qt, %BM : index
  %q_left = arith.subi %SQ, %i0 : index
  %nq = arith.minui %q_left, %BM : index
  %full_q = arith.cmpi eq, %nq, %BM : index

  // A partial last tile only computes its rows, rounded up to the blocks.
  %nql0 = arith.addi %nq, %cLm1 : index
  %nql_b = arith.divui %nql0, %cL : index
  %nql = arith.muli %nql_b, %cL : index
  %nq5 = arith.addi %nq, %c5 : index
  %nq_b6 = arith.divui %nq5, %c6 : index
  %nq6 = arith.muli %nq_b6, %c6 : index
  // One query row (a decode step): the row functions of avx2_rows.mlir, not
  // the 6 x 16 blocks. Up to 6 rows, the score passes (score_mod, mask,
  // softmax) cover 8 lanes, not 16; P . V's 6-row blocks read no more.
  %one_row = arith.cmpi eq, %nq, %c1 : index
  %few_rows = arith.cmpi ule, %nq, %c6 : index
  %nqv = arith.select %few_rows, %cL, %nql : index
  // V is read where it is for full tiles and single rows (f32).
  %view_v = arith.ori %full_q, %one_row : i1
  // K may be read in place: ${K_IN_PLACE} (f32, not transformed) and rows
  // D floats apart (a contiguous head, or a cache's rows).
  %k_in_place_allowed = arith.constant ${K_IN_PLACE}
  %k_row_stride = func.call @key_row_stride(%k) : (!K) -> index
  %k_rows_dense = arith.cmpi eq, %k_row_stride, %D : index
  %k_in_place_ok = arith.andi %k_in_place_allowed, %k_rows_dense : i1

  %Qs = memref.alloca() {alignment = 64 : i64} : memref<${BM}x${D}xf32>
  %Qt = memref.alloca() {alignment = 64 : i64} : memref<${D}x${BM}xf32>
  %Ks = memref.alloca() {alignment = 64 : i64} : memref<${BN}x${D}xf32>
  %Vs = memref.alloca() {alignment = 64 : i64} : memref<${BN}x${DV}xf32>
  %St = memref.alloca() {alignment = 64 : i64} : memref<${BN}x${BM}xf32>
  %Os = memref.alloca() {alignment = 64 : i64} : memref<${BM}x${DV}xf32>
  %M = memref.alloca() {alignment = 64 : i64} : memref<${BM}xf32>
  %L = memref.alloca() {alignment = 64 : i64} : memref<${BM}xf32>
  %A = memref.alloca() {alignment = 64 : i64} : memref<${BM}xf32>
  %TS = memref.alloca() {alignment = 64 : i64} : memref<${TILE_SCRATCH}xf32>
  %VT = memref.alloca() {alignment = 64 : i64} : memref<${VT_FLOATS}xf32>
  %QtP = memref.alloca() {alignment = 64 : i64} : !QTP
  %KB = memref.alloca() {alignment = 64 : i64} : !KB
  %VP = memref.alloca() {alignment = 64 : i64} : !VP
  %PP = memref.alloca() {alignment = 64 : i64} : !PP

  // Q tile: Qs (rotated) and Qt = transpose(Qs) * scale
  // (@pejit_query_tile); running max -inf, sum 0, output 0.
  func.call @pejit_query_tile(%q, %Qs, %Qt, %scratch, %b, %h, %i0, %nq, %SKV)
      : (!Q, memref<${BM}x${D}xf32>, memref<${D}x${BM}xf32>, !SCRATCH, index, index, index,
         index, index) -> ()
  // The encodings' per-tile tables (e.g. T5's bias by distance), in %TS.
  attn.query_tile_prologue %TS, batch %b, head %h, start %i0, rows %nq
      operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) query(%Qs : memref<${BM}x${D}xf32>)
      : memref<${TILE_SCRATCH}xf32>
  scf.for %r = %c0 to %BM step %cL {
    vector.store %ninf, %M[%r] : memref<${BM}xf32>, !VF
    vector.store %zv, %L[%r] : memref<${BM}xf32>, !VF
  }
  scf.if %value_term {
    scf.for %r = %c0 to %VT_FLOATS step %cL {
      vector.store %zv, %VT[%r] : memref<${VT_FLOATS}xf32>, !VF
    }
  }
  scf.for %r = %c0 to %BM step %c1 {
    scf.for %d = %c0 to %DV step %cL {
      vector.store %zv, %Os[%r, %d] : memref<${BM}x${DV}xf32>, !VF
    }
  }

  // KV tiles: causal stops after the last key the tile's last row sees;
  // a window starts at the first key its first row sees.
  %last_row = arith.addi %i0, %nq : index
  %causal_end0 = arith.addi %last_row, %OFF : index
  %causal_end1 = arith.maxsi %causal_end0, %c0 : index
  %causal_end = arith.minsi %causal_end1, %SKV : index
  // A right window ends at the last key the tile's last row sees.
  %right_end0 = arith.addi %causal_end0, %RIGHT : index
  %right_end1 = arith.maxsi %right_end0, %c0 : index
  %right_end = arith.minsi %right_end1, %SKV : index
  %kv_end0 = arith.select %has_right, %right_end, %SKV : index
  %kv_end = arith.select %causal, %causal_end, %kv_end0 : index
  %win_begin0 = arith.addi %i0, %OFF : index
  %win_begin1 = arith.subi %win_begin0, %WINDOW : index
  %win_begin = arith.maxsi %win_begin1, %c0 : index
  %kv_begin = arith.select %has_window, %win_begin, %c0 : index
  %jt_begin = arith.divui %kv_begin, %BN : index
  %kv_end_up = arith.addi %kv_end, %BN : index
  %kv_end_up1 = arith.subi %kv_end_up, %c1 : index
  %jt_end = arith.divui %kv_end_up1, %BN : index

  scf.for %jt = %jt_begin to %jt_end step %c1 {
    %j0 = arith.muli %jt, %BN : index
    %k_left = arith.subi %SKV, %j0 : index
    %nk = arith.minui %k_left, %BN : index

    // K tile: a tile of the key cache when K is rotated once per call, else
    // its nk rows read from K and transformed in one pass (rows past SKV
    // zero). V rows are read where they are or copied into Vs
    // (@kv_value_rows); P . V reads only the nk rows that exist. The next KV
    // tile is prefetched into L2 during P . V below, a few rows per register
    // block, so these reads do not stall on L3.
    %Kt = scf.if %konce -> !KTILE {
      %cached = func.call @key_cache_tile(%kcache, %b, %hk, %jt, %NKT)
          : (!KCACHE, index, index, index, index) -> !KTILE
      scf.yield %cached : !KTILE
    } else {
      %tile = memref.cast %Ks : memref<${BN}x${D}xf32> to !KTILE
      // One row, f32 K left as it is, a whole tile of rows D apart: read K
      // where it is (@key_rows_in_place) instead of copying it into Ks.
      %full_k = arith.cmpi eq, %nk, %BN : index
      %in_place0 = arith.andi %k_in_place_ok, %full_k : i1
      %in_place = arith.andi %in_place0, %one_row : i1
      %rows = scf.if %in_place -> !KTILE {
        %view = func.call @key_rows_in_place(%k, %tile, %b, %hk, %j0)
            : (!K, !KTILE, index, index, index) -> !KTILE
        scf.yield %view : !KTILE
      } else {
        func.call @load_key_tile(%k, %tile, %scratch, %b, %hk, %jt, %SQ)
            : (!K, !KTILE, !SCRATCH, index, index, index, index) -> ()
        scf.yield %tile : !KTILE
      }
      scf.yield %rows : !KTILE
    }
    %v_rows = func.call @kv_value_rows(%v, %Vs, %b, %hk, %j0, %nk, %view_v)
        : (!V, memref<${BN}x${DV}xf32>, index, index, index, index, i1) -> !VROWS
    %jn = arith.addi %j0, %BN : index

    // St = Ks . Qt (@pejit_s_tile). Under a causal mask, query row i0 + r
    // sees key row jr of the tile iff jr <= r + diag_row.
    %diag_rel = arith.subi %OFF, %j0 : index
    %diag_row = arith.addi %i0, %diag_rel : index
    scf.if %one_row {
      func.call @pejit_s_row(%St, %Qs, %Kt)
          : (memref<${BN}x${BM}xf32>, memref<${BM}x${D}xf32>, !KTILE) -> ()
    } else {
      // The bf16 form packs Q' on its first tile (once per item).
      %pack_q = arith.cmpi eq, %jt, %jt_begin : index
      func.call @${S_TILE}(%St, %Qt, %QtP, %Kt, %KB, %nql, %diag_row, %pack_q)
          : (memref<${BN}x${BM}xf32>, memref<${D}x${BM}xf32>, !QTP, !KTILE, !KB, index, index,
             i1) -> ()
    }

    // score_mod, pointwise on 8 query rows per vector: softcap and the
    // fused score biases (hooks). Skipped when there is neither.
    scf.if %score_mod {
      %i0_i = arith.index_cast %i0 : index to i32
      %i0_v = vector.broadcast %i0_i : i32 to vector<${L}xi32>
      %q_base = arith.addi %i0_v, %iota32 : vector<${L}xi32>
      scf.for %jr = %c0 to %BN step %c1 {
        %j = arith.addi %j0, %jr : index
        %j_i = arith.index_cast %j : index to i32
        %k_idx = vector.broadcast %j_i : i32 to vector<${L}xi32>
        scf.for %iv = %c0 to %nqv step %cL {
          %iv_i = arith.index_cast %iv : index to i32
          %iv_v = vector.broadcast %iv_i : i32 to vector<${L}xi32>
          %q_idx = arith.addi %q_base, %iv_v : vector<${L}xi32>
          %s = vector.load %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
          %s_mod = attn.score_mod %s, batch %b, head %h, query %q_idx, key %k_idx
              consecutive_queries operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
              tile(%TS : memref<${TILE_SCRATCH}xf32>, %i0) positions(%qpos, %kpos : !QPOS, !KPOS)
              lengths(%SQ, %SKV) : !VF, vector<${L}xi32>
          vector.store %s_mod, %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
        }
      }
    }

    // Mask: key j is visible to row i iff j < SKV, (causal) i >= j - OFF,
    // (window) i <= j - OFF + WINDOW and (right window) i >= j - OFF -
    // RIGHT. Only tiles that cross a bound pay.
    %j_last = arith.addi %j0, %BN : index
    %crosses_end = arith.cmpi ugt, %j_last, %SKV : index
    %diag = arith.addi %i0, %OFF : index
    %j_last1 = arith.subi %j_last, %c1 : index
    %crosses_diag0 = arith.cmpi sgt, %j_last1, %diag : index
    %crosses_diag = arith.andi %causal, %crosses_diag0 : i1
    %row_last = arith.addi %diag, %BM : index
    %win_first = arith.subi %row_last, %WINDOW : index
    %crosses_win0 = arith.cmpi slt, %j0, %win_first : index
    %crosses_win = arith.andi %has_window, %crosses_win0 : i1
    %right_diag = arith.addi %diag, %RIGHT : index
    %crosses_right0 = arith.cmpi sgt, %j_last1, %right_diag : index
    %crosses_right = arith.andi %has_right, %crosses_right0 : i1
    %m0 = arith.ori %crosses_end, %crosses_diag : i1
    %m1 = arith.ori %m0, %crosses_right : i1
    %needs_mask = arith.ori %m1, %crosses_win : i1
    // Under a causal mask alone, key rows up to the first query row's
    // diagonal are visible to every row of the tile: start after them.
    %first_hidden0 = arith.subi %diag, %j0 : index
    %first_hidden1 = arith.addi %first_hidden0, %c1 : index
    %first_hidden2 = arith.maxsi %first_hidden1, %c0 : index
    %first_hidden = arith.minsi %first_hidden2, %BN : index
    %no_window = arith.xori %has_window, %true : i1
    %causal_only = arith.andi %causal, %no_window : i1
    %jr_mask_begin = arith.select %causal_only, %first_hidden, %c0 : index
    scf.if %needs_mask {
      scf.for %jr = %jr_mask_begin to %BN step %c1 {
        // Rows [lo, hi] see key j (an empty range past SKV), clamped to
        // [-1, SQ] so the per-vector compares run on 32-bit lanes.
        %j = arith.addi %j0, %jr : index
        %key_in = arith.cmpi ult, %j, %SKV : index
        %row_min = arith.subi %j, %OFF : index
        %row_max = arith.addi %row_min, %WINDOW : index
        // (right window) i >= j - OFF - RIGHT; causal is tighter.
        %row_min_r = arith.subi %row_min, %RIGHT : index
        %lo_r = arith.select %has_right, %row_min_r, %cm1 : index
        %lo0 = arith.select %causal, %row_min, %lo_r : index
        %hi0 = arith.select %has_window, %row_max, %SQ : index
        %lo1 = arith.select %key_in, %lo0, %SQ : index
        %hi1 = arith.select %key_in, %hi0, %cm1 : index
        %lo2 = arith.maxsi %lo1, %cm1 : index
        %lo3 = arith.minsi %lo2, %SQ : index
        %hi2 = arith.maxsi %hi1, %cm1 : index
        %hi3 = arith.minsi %hi2, %SQ : index
        %lo_i = arith.index_cast %lo3 : index to i32
        %hi_i = arith.index_cast %hi3 : index to i32
        %lo_v = vector.broadcast %lo_i : i32 to vector<${L}xi32>
        %hi_v = vector.broadcast %hi_i : i32 to vector<${L}xi32>
        // Per 8 rows: all see key j -> untouched; none does -> a plain store
        // of -inf; only a vector across a bound is blended (LLVM turns that
        // load-select-store into vmaskmovps, slow on AMD: keep it rare).
        scf.for %iv = %c0 to %nqv step %cL {
          %ib = arith.addi %i0, %iv : index
          %ib_last = arith.addi %ib, %cLm1 : index
          %all_after = arith.cmpi sge, %ib, %lo3 : index
          %all_before = arith.cmpi sle, %ib_last, %hi3 : index
          %all_see = arith.andi %all_after, %all_before : i1
          %none_after = arith.cmpi slt, %ib_last, %lo3 : index
          %none_before = arith.cmpi sgt, %ib, %hi3 : index
          %none_sees = arith.ori %none_after, %none_before : i1
          %needs_store = arith.xori %all_see, %true : i1
          scf.if %needs_store {
            scf.if %none_sees {
              vector.store %ninf, %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
            } else {
              %ib_i = arith.index_cast %ib : index to i32
              %ibv = vector.broadcast %ib_i : i32 to vector<${L}xi32>
              %rows = arith.addi %ibv, %iota32 : vector<${L}xi32>
              %after = arith.cmpi sge, %rows, %lo_v : vector<${L}xi32>
              %before = arith.cmpi sle, %rows, %hi_v : vector<${L}xi32>
              %ok = arith.andi %after, %before : vector<${L}xi1>
              %s = vector.load %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
              %sm = arith.select %ok, %s, %ninf : vector<${L}xi1>, !VF
              vector.store %sm, %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
            }
          }
        }
      }
    }

    // Online softmax down the columns of St (8 query rows per vector):
    // St <- P = 2^((s - m') log2 e), A <- alpha = 2^((m - m') log2 e).
    // The max is subtracted before the scaling by log2 e, so the max score's
    // exponent is exactly 0 at any magnitude: fma(s, log2e, -m' log2e) lost
    // m' log2e's low bits once |m'| was large (1e9 and up: whole rows of P
    // underflowed to 0, and the output with them).
    scf.for %iv = %c0 to %nqv step %cL {
      %m_old = vector.load %M[%iv] : memref<${BM}xf32>, !VF
      %m_tile = scf.for %jr = %c0 to %BN step %c1 iter_args(%mx = %ninf) -> (!VF) {
        %s = vector.load %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
        // One vmaxps: a NaN score is left out of the max (it still reaches
        // P, l and O through exp2, which keeps NaN).
        %grows = arith.cmpf olt, %mx, %s : !VF
        %mx1 = arith.select %grows, %s, %mx : vector<${L}xi1>, !VF
        scf.yield %mx1 : !VF
      }
      %m_grows = arith.cmpf olt, %m_old, %m_tile : !VF
      %m_new = arith.select %m_grows, %m_tile, %m_old : vector<${L}xi1>, !VF
      // All keys masked so far: subtract 0 instead of -inf (no NaN).
      %none = arith.cmpf oeq, %m_new, %ninf : !VF
      %m_safe = arith.select %none, %zv, %m_new : vector<${L}xi1>, !VF
      %m_step = arith.subf %m_old, %m_safe : !VF
      %alpha_arg = arith.mulf %m_step, %log2e : !VF
      %alpha = func.call @exp2_vec(%alpha_arg) : (!VF) -> !VF
      %l_tile = scf.for %jr = %c0 to %BN step %c1 iter_args(%sum = %zv) -> (!VF) {
        %s = vector.load %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
        %sd = arith.subf %s, %m_safe : !VF
        %e = arith.mulf %sd, %log2e : !VF
        %p = func.call @exp2_vec(%e) : (!VF) -> !VF
        vector.store %p, %St[%jr, %iv] : memref<${BN}x${BM}xf32>, !VF
        %sum1 = arith.addf %sum, %p : !VF
        scf.yield %sum1 : !VF
      }
      %l_old = vector.load %L[%iv] : memref<${BM}xf32>, !VF
      %l_new = math.fma %l_old, %alpha, %l_tile : !VF
      vector.store %l_new, %L[%iv] : memref<${BM}xf32>, !VF
      vector.store %m_new, %M[%iv] : memref<${BM}xf32>, !VF
      vector.store %alpha, %A[%iv] : memref<${BM}xf32>, !VF
    }

    // The value term's per-bucket sums, rescaled as Os is.
    scf.if %value_term {
      func.call @pejit_value_term_tile(%VT, %St, %A, %b, %h, %i0, %j0, %nqv, %e0, %e1, %e2, %e3,
                                       %qpos, %kpos, %SQ, %SKV)
          : (memref<${VT_FLOATS}xf32>, memref<${BN}x${BM}xf32>, memref<${BM}xf32>, index, index,
             index, index, index, !E0, !E1, !E2, !E3, !QPOS, !KPOS, index, index) -> ()
    }

    // Os = Os * alpha + P^T . V (its own function: see @pejit_pv_tile).
    scf.if %one_row {
      func.call @pejit_pv_row(%Os, %St, %v_rows, %A, %nk, %diag_row)
          : (memref<${BM}x${DV}xf32>, memref<${BN}x${BM}xf32>, !VROWS, memref<${BM}xf32>,
             index, index) -> ()
    } else {
      func.call @pejit_pv_tile(%Os, %St, %v_rows, %VP, %PP, %A, %k, %v, %kcache, %nq6, %nk,
                               %diag_row, %jn, %b, %hk)
          : (memref<${BM}x${DV}xf32>, memref<${BN}x${BM}xf32>, !VROWS, !VP, !PP,
             memref<${BM}xf32>, !K, !V, !KCACHE, index, index, index, index, index, index) -> ()
    }
  }

  scf.if %value_term {
    func.call @pejit_value_term_finish(%Os, %VT, %b, %h, %nq, %e0, %e1, %e2, %e3)
        : (memref<${BM}x${DV}xf32>, memref<${VT_FLOATS}xf32>, index, index, index, !E0, !E1,
           !E2, !E3) -> ()
  }

  // O = Os / l; a row that saw no key (l = 0) is 0.
  scf.for %r = %c0 to %nq step %c1 {
    %l = memref.load %L[%r] : memref<${BM}xf32>
    %empty = arith.cmpf oeq, %l, %zero : f32
    %inv0 = arith.divf %one, %l : f32
    %inv = arith.select %empty, %zero, %inv0 : f32
    %invv = vector.broadcast %inv : f32 to !VF
    %i = arith.addi %i0, %r : index
    scf.for %d = %c0 to %DV step %cL {
      %x = vector.load %Os[%r, %d] : memref<${BM}x${DV}xf32>, !VF
      %y = arith.mulf %x, %invv : !VF
      %yt = func.call @narrow_lanes(%y) : (!VF) -> !VOUT
      vector.store %yt, %o[%b, %h, %i, %d] : !O, !VOUT
    }
  }
  // A training forward's lse_i = m_i + log l_i (-inf for a row that saw no
  // key), when the run asks for it.
  %lse_rows = memref.dim %lse, %c0 : !LSE
  %want_lse = arith.cmpi ugt, %lse_rows, %c0 : index
  scf.if %want_lse {
    %ninf_row = arith.constant 0xFF800000 : f32
    scf.for %r = %c0 to %nq step %c1 {
      %m = memref.load %M[%r] : memref<${BM}xf32>
      %l = memref.load %L[%r] : memref<${BM}xf32>
      %empty = arith.cmpf oeq, %l, %zero : f32
      %log_l = math.log %l : f32
      %sum = arith.addf %m, %log_l : f32
      %x = arith.select %empty, %ninf_row, %sum : f32
      %i = arith.addi %i0, %r : index
      memref.store %x, %lse[%b, %h, %i, %c0] : !LSE
    }
  }
  return
}

// @pejit-blocks
