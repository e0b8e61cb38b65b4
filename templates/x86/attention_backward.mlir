// x86 attention backward template (f32, docs/backward.md): FlashAttention-2's
// gradients in three phases, each parallel over work items that write
// disjoint outputs, so no atomics and no reduction whose order depends on
// the thread count (bitwise-identical gradients at any thread count).
//
//   rows  item (b, h, query tile of BM rows), L rows per vector:
//           D_i = dO_i . O_i;  lse_i = log sum_j exp(s_ij) over the keys i sees
//           (-inf when none), both into scratch [D | lse], B HQ SQ floats each;
//           a training forward's lse, when given, is copied instead
//   kv    item (b, hk, key tile of BN keys), L keys per vector: for each
//         query head h of the group and each row i that sees a key of them:
//             p = exp(s_ij - lse_i); dP = dO_i . v_j; dS = p (dP - D_i)
//             dE = scale * softcap' * dS
//             dv_j += p dO_i;  dk_j += dE q_i
//             partial += the score biases' adjoints of dS (a T5 table's)
//             dscore[b, h, i, j] = dS (a bias tensor's gradient, when asked)
//   q     item (b, h, query tile), L rows per vector, for each key j they see:
//           dq_i += dE_ij k_j      (P, dP and dS recomputed)
// with s_ij = softcap(scale q_i . k_j) + bias_ij and softcap' = 1 - tanh^2
// (or 1). The fused score biases (ALiBi, T5, a bias tensor) enter through
// attn.score_mod, as in the forward; an additive bias passes dS through
// unchanged. Rows that see no key get dq = 0 and add nothing to dk, dv.
//
// Bucketed terms (Shaw's a^K and a^V, docs/backward.md): the rows phase
// first keeps QaK[i, m] = q_i . a^K[m] and dOaV[i, m] = dO_i . a^V[m] per
// row in scratch; every phase adds QaK[i, mk_ij] to q_i . k_j (before the
// scale) and dOaV[i, mv_ij] to dP_ij. The q phase sums, per row and bucket,
// S_i[m] = sum dE_ij and T_i[m] = sum P_ij over the keys in bucket m; then
// dq_i += sum_m S_i[m] a^K[m], d a^K[m] += S_i[m] q_i, d a^V[m] += T_i[m] dO_i.
//
// The vectors run along the rows (rows, q) or the keys (kv) of a tile kept
// transposed on the item's stack ([D, L]), so a score, dP and each
// accumulator update are D (or DV) FMAs of L lanes with no horizontal sum,
// and exp is @exp2_vec. Lanes a mask hides, or past the tile's end, take
// P = 0 (a select, so no inf or NaN of theirs reaches a gradient).
//
// Parameters, substituted as text before parsing (attn-instantiate-x86-template):
//   ${B} ${HQ} ${HKV} ${GROUP}=HQ/HKV ${D} ${DV} (D, DV multiples of 8)
//   ${SQ} ${SKV}: the lengths, or `?` for a shape class (read with memref.dim)
//   ${BM} query rows per rows/q item, ${BN} keys per kv item (multiples of L)
//   L (8, or 16 where D and DV are multiples of 16), LM1 = L - 1, IOTA =
//   [0, ..., L - 1]: the lanes (docs/isa.md)
//   ${CAUSAL} ${HAS_WINDOW} ${WINDOW} ${HAS_RIGHT} ${RIGHT}: the mask
//   ${SCALE} ${HAS_SOFTCAP} ${SOFTCAP}
//   ${E0} .. ${E3}: the memref types of the encoding operand slots (an
//   unused slot is memref<1xf32>)
//   ${QPB} ${KPB}: rows of the position ids (axes x batch rows, or 1)
//   ${T}: the element type of q, k, v, o, dO and of dq, dk, dv (f32, f16,
//   bf16); WIDEN8 and NARROW8 (each a $-brace parameter): the bodies of
//   @widen8 and @narrow8
//   ${HAS_GRADS} ${GRAD_FLOATS} ${GRAD_OFFSETS}: the encoding operand
//   gradients asked for. Each kv item, then each q item, adds its
//   contributions (attn.score_grad, attn.qk_transform_grad) into a partial
//   buffer of its own, GRAD_FLOATS floats each after the rows' 2 B HQ SQ in
//   scratch (kv items' first), each operand at its offset; the runtime sums
//   the buffers in that order.
//   ${HAS_SCORE_GRAD}: a bias tensor's gradient is asked: the kv phase
//   writes dS into %dscore ([b, hq, sq, skv], zeroed by the runtime, which
//   then sums it over the bias's broadcast dims).
//   ${HAS_LSE}: the backward takes the training forward's lse (its rows
//   phase copies it instead of recomputing it).
//   ${HAS_KEY_TERM} ${KEY_TERMS} ${HAS_VALUE_TERM} ${VALUE_TERMS}: the
//   bucketed terms and their buckets (0 without); ${TERM_FLOATS} their sum,
//   floats a row keeps after [D | lse], and ${ROW_FLOATS} = 2 + TERM_FLOATS.

// The batch is read from the call (memref.dim): a packed batch's or a
// key-lengths row's call is one row of a kernel compiled for b.
!Q = memref<?x${HQ}x${SQ}x${D}xf32, strided<[?, ?, ?, 1], offset: ?>>
!K = memref<?x${HKV}x${SKV}x${D}xf32, strided<[?, ?, ?, 1], offset: ?>>
!V = memref<?x${HKV}x${SKV}x${DV}xf32, strided<[?, ?, ?, 1], offset: ?>>
!O = memref<?x${HQ}x${SQ}x${DV}xf32, strided<[?, ?, ?, 1], offset: ?>>
// A training forward's lse [b, hq, sq] as [b, hq, sq, 1] (0 rows: none).
!LSE = memref<?x${HQ}x?x1xf32, strided<[?, ?, ?, 1], offset: ?>>
// The scores' gradient dS [b, hq, sq, skv] (0 rows: not asked for).
!DS = memref<?x${HQ}x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>
!SCRATCH = memref<?xf32>
// Vectors of L lanes (8 in avx2, 16 in the AVX-512 families), and the
// 8-lane ones of the 16-bit widening and narrowing (attention_backward_prepare.mlir).
!VF = vector<${L}xf32>
!VI = vector<${L}xi32>
!V8 = vector<8xf32>
// Tiles transposed on the item's stack, [D, 8] or [DV, 8]: 8 rows (or
// keys) per vector; and any [b, h, s, c] tensor as the helpers read it.
!TD = memref<?x${L}xf32>
!TV = memref<?x${L}xf32>
!ROWS = memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>
// A chunk's weights (P or dE) of up to 64 rows or keys, 8 lanes each.
!W = memref<64x${L}xf32>
!E0 = ${E0}
!E1 = ${E1}
!E2 = ${E2}
!E3 = ${E3}
// Position ids as the QK transform's prologue reads them ([axes * rows, s]),
// and rows of a [b, h, s, c] tensor as the transform and its adjoint see them.
!QPOS = memref<${QPB}x${SQ}xi64>
!KPOS = memref<${KPB}x${SKV}xi64>
!TILE = memref<?x${D}xf32, strided<[?, 1], offset: ?>>
// A [b, h, s, c] tensor of the caller's element type (16-bit: widened to
// f32 scratch before the phases, the gradients narrowed after).
!IN = memref<?x?x?x?x${T}, strided<[?, ?, ?, 1], offset: ?>>
!V8T = vector<8x${T}>

// The helpers (mask, ranges, transposed tiles, dot products, chunked
// accumulation) live in attention_backward_blocks.mlir, the bucketed
// terms' in attention_backward_terms.mlir, and the steps
// before the phases (16-bit widening and narrowing, a QK transform's tables
// and Q', K') in attention_backward_prepare.mlir, put in place of this line
// before substitution:
// @pejit-blocks

// With a QK transform (RoPE), two steps come first (in
// attention_backward_prepare.mlir), and the phases read
// the transformed Q' and K' (scratch, [b, h, s, d]) in place of q and k:
//   prologue   the transform's tables, as the forward's (position rows
//              first, first + step, ... on each core)
//   transform  item < b hq ceil(sq / BM): Q' of a query tile; the rest: K'
//              of a key tile
// and the phases hand dQ' and dK' rows to the transform's adjoint as they
// write them (RoPE: dq = m R(-angle) dQ', the inverse rotation), 8 rows at
// a time while they are in cache: no pass of its own.
func.func @pejit_backward_rows(%q: !Q, %k: !K, %v: !V, %o: !O, %do: !O, %lse_in: !LSE,
                               %scratch: !SCRATCH, %qpos: !QPOS, %kpos: !KPOS, %e0: !E0,
                               %e1: !E1, %e2: !E2, %e3: !E3, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cLm1 = arith.constant ${LM1} : index
  %cL = arith.constant ${L} : index
  %GROUP = arith.constant ${GROUP} : index
  %HQ = arith.constant ${HQ} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninfv = arith.constant dense<0xFF800000> : !VF
  %zv = arith.constant dense<0.0> : !VF
  %iota = arith.constant dense<${IOTA}> : !VI
  %true = arith.constant true
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %qa = memref.cast %q : !Q to !ROWS
  %ka = memref.cast %k : !K to !ROWS
  %va = memref.cast %v : !V to !ROWS
  %doa = memref.cast %do : !O to !ROWS
  %OFF = arith.subi %SKV, %SQ : index
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  %b, %h, %i0, %i1 = func.call @query_item(%item, %SQ)
      : (index, index) -> (index, index, index, index)
  %hk = arith.divui %h, %GROUP : index
  %head = func.call @row_index(%b, %h, %c0, %SQ) : (index, index, index, index) -> index
  func.call @fill_row_terms(%qa, %doa, %scratch, %ROWS, %head, %b, %h, %i0, %i1, %e0, %e1, %e2,
                            %e3)
      : (!ROWS, !ROWS, !SCRATCH, index, index, index, index, index, index, !E0, !E1, !E2, !E3)
      -> ()
  // D_i = dO_i . O_i, one row at a time.
  scf.for %i = %i0 to %i1 step %c1 {
    %acc = scf.for %c = %c0 to %DV step %cL iter_args(%a = %zv) -> (!VF) {
      %x = vector.load %do[%b, %h, %i, %c] : !O, !VF
      %y = vector.load %o[%b, %h, %i, %c] : !O, !VF
      %n = math.fma %x, %y, %a : !VF
      scf.yield %n : !VF
    }
    %d = vector.reduction <add>, %acc : !VF into f32
    %row = arith.addi %head, %i : index
    memref.store %d, %scratch[%row] : !SCRATCH
  }
  // A training forward's lse, given: copied (the phases read scratch).
  %has_lse = arith.constant ${HAS_LSE}
  scf.if %has_lse {
    scf.for %i = %i0 to %i1 step %c1 {
      %x = memref.load %lse_in[%b, %h, %i, %c0] : !LSE
      %row = arith.addi %head, %i : index
      %lrow = arith.addi %ROWS, %row : index
      memref.store %x, %scratch[%lrow] : !SCRATCH
    }
  }
  %recompute = arith.xori %has_lse, %true : i1
  // lse of 8 rows per vector, by the online rule over the keys any of them
  // sees: m' = max(m, s), l' = l e^(m - m') + e^(s - m').
  %Qt = memref.alloca(%D) {alignment = 64 : i64} : !TD
  %r_end = arith.select %recompute, %i1, %i0 : index
  scf.for %r0 = %i0 to %r_end step %cL {
    func.call @rows_t(%qa, %Qt, %D, %b, %h, %r0, %i1)
        : (!ROWS, !TD, index, index, index, index, index) -> ()
    %last0 = arith.addi %r0, %cLm1 : index
    %i1m = arith.subi %i1, %c1 : index
    %last = arith.minui %last0, %i1m : index
    %lo, %unused = func.call @key_range(%r0, %SQ, %SKV) : (index, index, index) -> (index, index)
    %unused2, %hi = func.call @key_range(%last, %SQ, %SKV) : (index, index, index) -> (index, index)
    %r0i = arith.index_cast %r0 : index to i32
    %r0v = vector.broadcast %r0i : i32 to !VI
    %qi = arith.addi %r0v, %iota : !VI
    %i1i = arith.index_cast %i1 : index to i32
    %i1v = vector.broadcast %i1i : i32 to !VI
    %valid = arith.cmpi slt, %qi, %i1v : !VI
    %ml:2 = scf.for %j = %lo to %hi step %c1 iter_args(%m = %ninfv, %l = %zv) -> (!VF, !VF) {
      %dot = func.call @tile_dot(%Qt, %ka, %D, %b, %hk, %j)
          : (!TD, !ROWS, index, index, index, index) -> !VF
      %ji = arith.index_cast %j : index to i32
      %kj = vector.broadcast %ji : i32 to !VI
      %kterm, %vterm, %mk, %mv = func.call @terms8(%scratch, %ROWS, %head, %b, %h, %qi, %kj, %SQ, %SKV,
                                             %e0, %e1, %e2, %e3, %qpos, %kpos)
          : (!SCRATCH, index, index, index, index, !VI, !VI, index, index, !E0, !E1, !E2, !E3,
             !QPOS, !KPOS) -> (!VF, !VF, !VI, !VI)
      %dotk = arith.addf %dot, %kterm : !VF
      %s0, %f = func.call @score(%dotk, %b, %h, %qi, %kj, %SQ, %SKV, %e0, %e1, %e2, %e3, %qpos,
                                  %kpos)
          : (!VF, index, index, !VI, !VI, index, index, !E0, !E1, !E2, !E3, !QPOS, !KPOS)
          -> (!VF, !VF)
      %vis = func.call @visible(%qi, %kj, %OFF, %valid)
          : (!VI, !VI, index, vector<${L}xi1>) -> vector<${L}xi1>
      %s = arith.select %vis, %s0, %ninfv : vector<${L}xi1>, !VF
      %mn = arith.maximumf %m, %s : !VF
      // A lane with no score yet (mn = -inf) keeps l = 0.
      %none = arith.cmpf oeq, %mn, %ninfv : !VF
      %d1 = arith.subf %m, %mn : !VF
      %d1s = arith.select %none, %zv, %d1 : vector<${L}xi1>, !VF
      %x1 = func.call @exp_lanes(%d1s) : (!VF) -> !VF
      %l1 = arith.mulf %l, %x1 : !VF
      %d2 = arith.subf %s, %mn : !VF
      %d2s = arith.select %none, %ninfv, %d2 : vector<${L}xi1>, !VF
      %x2 = func.call @exp_lanes(%d2s) : (!VF) -> !VF
      %l2 = arith.addf %l1, %x2 : !VF
      scf.yield %mn, %l2 : !VF, !VF
    }
    %log = math.log %ml#1 : !VF
    %lse0 = arith.addf %ml#0, %log : !VF
    %empty = arith.cmpf oeq, %ml#1, %zv : !VF
    %lse = arith.select %empty, %ninfv, %lse0 : vector<${L}xi1>, !VF
    scf.for %l = %c0 to %cL step %c1 {
      %r = arith.addi %r0, %l : index
      %in = arith.cmpi ult, %r, %i1 : index
      scf.if %in {
        %x = vector.extract %lse[%l] : f32 from !VF
        %row = arith.addi %head, %r : index
        %lrow = arith.addi %ROWS, %row : index
        memref.store %x, %scratch[%lrow] : !SCRATCH
      }
    }
  }
  return
}

func.func @pejit_backward_kv(%q: !Q, %k: !K, %v: !V, %do: !O, %dk: !K, %dv: !V, %dscore: !DS,
                             %scratch: !SCRATCH, %tables: !SCRATCH, %qpos: !QPOS, %kpos: !KPOS,
                             %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cLm1 = arith.constant ${LM1} : index
  %cL = arith.constant ${L} : index
  %BN = arith.constant ${BN} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %GROUP = arith.constant ${GROUP} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %scale = arith.constant dense<${SCALE}> : !VF
  %zv = arith.constant dense<0.0> : !VF
  %ninf = arith.constant 0xFF800000 : f32
  %iota = arith.constant dense<${IOTA}> : !VI
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %qa = memref.cast %q : !Q to !ROWS
  %ka = memref.cast %k : !K to !ROWS
  %va = memref.cast %v : !V to !ROWS
  %doa = memref.cast %do : !O to !ROWS
  %OFF = arith.subi %SKV, %SQ : index
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  // item -> (b, hk, kt): keys [j0, j1).
  %up0 = arith.addi %SKV, %BN : index
  %up = arith.subi %up0, %c1 : index
  %NKT = arith.divui %up, %BN : index
  %kt = arith.remui %item, %NKT : index
  %bk = arith.divui %item, %NKT : index
  %hk = arith.remui %bk, %HKV : index
  %b = arith.divui %bk, %HKV : index
  %j0 = arith.muli %kt, %BN : index
  %j1a = arith.addi %j0, %BN : index
  %j1 = arith.minui %j1a, %SKV : index
  %h0 = arith.muli %hk, %GROUP : index
  // This item's partial gradient buffer, zeroed.
  %has_grads = arith.constant ${HAS_GRADS}
  %has_score_grad = arith.constant ${HAS_SCORE_GRAD}
  %PF = arith.constant ${GRAD_FLOATS} : index
  %RF = arith.constant ${ROW_FLOATS} : index
  %rowsf = arith.muli %ROWS, %RF : index
  %pitem = arith.muli %item, %PF : index
  %pbase = arith.addi %rowsf, %pitem : index
  %pend = arith.addi %pbase, %PF : index
  %zero = arith.constant 0.0 : f32
  scf.for %e = %pbase to %pend step %c1 {
    memref.store %zero, %scratch[%e] : !SCRATCH
  }
  %Kt = memref.alloca(%D) {alignment = 64 : i64} : !TD
  %Vt = memref.alloca(%DV) {alignment = 64 : i64} : !TV
  %dKt = memref.alloca(%D) {alignment = 64 : i64} : !TD
  %dVt = memref.alloca(%DV) {alignment = 64 : i64} : !TV
  %Pw = memref.alloca() {alignment = 64 : i64} : !W
  %DEw = memref.alloca() {alignment = 64 : i64} : !W
  %c64 = arith.constant 64 : index
  // 8 keys per vector: keys g0 .. g0 + 7 of the tile, transposed.
  scf.for %g0 = %j0 to %j1 step %cL {
    func.call @rows_t(%ka, %Kt, %D, %b, %hk, %g0, %j1)
        : (!ROWS, !TD, index, index, index, index, index) -> ()
    func.call @rows_t(%va, %Vt, %DV, %b, %hk, %g0, %j1)
        : (!ROWS, !TV, index, index, index, index, index) -> ()
    scf.for %c = %c0 to %D step %c1 {
      vector.store %zv, %dKt[%c, %c0] : !TD, !VF
    }
    scf.for %c = %c0 to %DV step %c1 {
      vector.store %zv, %dVt[%c, %c0] : !TV, !VF
    }
    %last0 = arith.addi %g0, %cLm1 : index
    %j1m = arith.subi %j1, %c1 : index
    %last = arith.minui %last0, %j1m : index
    %ilo, %unused = func.call @query_range(%g0, %SQ, %SKV) : (index, index, index) -> (index, index)
    %unused2, %ihi = func.call @query_range(%last, %SQ, %SKV)
        : (index, index, index) -> (index, index)
    %g0i = arith.index_cast %g0 : index to i32
    %g0v = vector.broadcast %g0i : i32 to !VI
    %kj = arith.addi %g0v, %iota : !VI
    %j1i = arith.index_cast %j1 : index to i32
    %j1v = vector.broadcast %j1i : i32 to !VI
    %valid = arith.cmpi slt, %kj, %j1v : !VI
    scf.for %g = %c0 to %GROUP step %c1 {
      %h = arith.addi %h0, %g : index
      %head = func.call @row_index(%b, %h, %c0, %SQ) : (index, index, index, index) -> index
      // Rows in chunks of 64: P and dE of the chunk first, then
      // dV^T += P^T dO and dK^T += dE^T Q.
      scf.for %ic = %ilo to %ihi step %c64 {
        %ic_end0 = arith.addi %ic, %c64 : index
        %ic_end = arith.minui %ic_end0, %ihi : index
        %ni = arith.subi %ic_end, %ic : index
        scf.for %ii0 = %c0 to %ni step %c1 {
          %i = arith.addi %ic, %ii0 : index
          %row = arith.addi %head, %i : index
          %lrow = arith.addi %ROWS, %row : index
          %dr = memref.load %scratch[%row] : !SCRATCH
          %lse = memref.load %scratch[%lrow] : !SCRATCH
          %ii = arith.index_cast %i : index to i32
          %qi = vector.broadcast %ii : i32 to !VI
          %dot = func.call @tile_dot(%Kt, %qa, %D, %b, %h, %i)
          : (!TD, !ROWS, index, index, index, index) -> !VF
          %kterm, %vterm, %mk, %mv = func.call @terms8(%scratch, %ROWS, %head, %b, %h, %qi, %kj, %SQ,
                                                 %SKV, %e0, %e1, %e2, %e3, %qpos, %kpos)
              : (!SCRATCH, index, index, index, index, !VI, !VI, index, index, !E0, !E1, !E2,
                 !E3, !QPOS, !KPOS) -> (!VF, !VF, !VI, !VI)
          %dotk = arith.addf %dot, %kterm : !VF
          %s, %f = func.call @score(%dotk, %b, %h, %qi, %kj, %SQ, %SKV, %e0, %e1, %e2, %e3,
                                     %qpos, %kpos)
              : (!VF, index, index, !VI, !VI, index, index, !E0, !E1, !E2, !E3, !QPOS, !KPOS)
              -> (!VF, !VF)
          %vis0 = func.call @visible(%qi, %kj, %OFF, %valid)
              : (!VI, !VI, index, vector<${L}xi1>) -> vector<${L}xi1>
          // A row whose every score is -inf (a -inf bias) has lse = -inf: P 0.
          %seen = arith.cmpf one, %lse, %ninf : f32
          %seenv = vector.broadcast %seen : i1 to vector<${L}xi1>
          %vis = arith.andi %vis0, %seenv : vector<${L}xi1>
          %lsev = vector.broadcast %lse : f32 to !VF
          %sl = arith.subf %s, %lsev : !VF
          %p0 = func.call @exp_lanes(%sl) : (!VF) -> !VF
          %p = arith.select %vis, %p0, %zv : vector<${L}xi1>, !VF
          %dp0 = func.call @tile_dot(%Vt, %doa, %DV, %b, %h, %i)
          : (!TV, !ROWS, index, index, index, index) -> !VF
          %dp = arith.addf %dp0, %vterm : !VF
          %drv = vector.broadcast %dr : f32 to !VF
          %dpd = arith.subf %dp, %drv : !VF
          %ds = arith.mulf %p, %dpd : !VF
          %dsf = arith.mulf %ds, %f : !VF
          %de = arith.mulf %dsf, %scale : !VF
          // A bias tensor's gradient: dS of the tile's keys of row i.
          scf.if %has_score_grad {
            vector.maskedstore %dscore[%b, %h, %i, %g0], %valid, %ds
                : !DS, vector<${L}xi1>, !VF
          }
          scf.if %has_grads {
            scf.for %l = %c0 to %cL step %c1 {
              %jl = arith.addi %g0, %l : index
              %in = arith.cmpi ult, %jl, %j1 : index
              scf.if %in {
                %dsl = vector.extract %ds[%l] : f32 from !VF
                %kji = arith.index_cast %jl : index to i32
                attn.score_grad %dsl, batch %b, head %h, query %ii, key %kji
                    operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
                    partial(%scratch : !SCRATCH, %pbase) offsets ${GRAD_OFFSETS}
                    positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV)
              }
            }
          }
          vector.store %p, %Pw[%ii0, %c0] : !W, !VF
          vector.store %de, %DEw[%ii0, %c0] : !W, !VF
        }
        func.call @accumulate(%dVt, %Pw, %ni, %doa, %DV, %b, %h, %ic)
            : (!TV, !W, index, !ROWS, index, index, index, index) -> ()
        func.call @accumulate(%dKt, %DEw, %ni, %qa, %D, %b, %h, %ic)
            : (!TD, !W, index, !ROWS, index, index, index, index) -> ()
      }
    }
    // The keys' rows of dk and dv, back from the transposed accumulators.
    scf.for %l = %c0 to %cL step %c1 {
      %jl = arith.addi %g0, %l : index
      %in = arith.cmpi ult, %jl, %j1 : index
      scf.if %in {
        scf.for %c = %c0 to %D step %c1 {
          %x = memref.load %dKt[%c, %l] : !TD
          memref.store %x, %dk[%b, %hk, %jl, %c] : !K
        }
        scf.for %c = %c0 to %DV step %c1 {
          %x = memref.load %dVt[%c, %l] : !TV
          memref.store %x, %dv[%b, %hk, %jl, %c] : !V
        }
      }
    }
    // dK' -> dk through the QK transform's adjoint (nothing without one),
    // its operand gradients (RoPE's position scale) from dK' and K' first.
    %gn0 = arith.subi %j1, %g0 : index
    %gn = arith.minui %gn0, %cL : index
    %dk_rows = memref.subview %dk[%b, %hk, %g0, 0] [1, 1, %gn, ${D}] [1, 1, 1, 1] : !K to !TILE
    %k_rows = memref.subview %k[%b, %hk, %g0, 0] [1, 1, %gn, ${D}] [1, 1, 1, 1] : !K to !TILE
    attn.qk_transform_grad %dk_rows, %k_rows, %gn, %g0, %b key positions(%kpos : !KPOS)
        operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) partial(%scratch : !SCRATCH, %pbase)
        offsets ${GRAD_OFFSETS} lengths(%SQ, %SKV) : !TILE, !TILE
    attn.qk_transform adjoint %dk_rows, %gn, %g0, %b, %tables key lengths(%SQ, %SKV)
        : !TILE, !SCRATCH
  }
  return
}

func.func @pejit_backward_q(%q: !Q, %k: !K, %v: !V, %do: !O, %dq: !Q, %scratch: !SCRATCH,
                            %tables: !SCRATCH, %qpos: !QPOS, %kpos: !KPOS, %e0: !E0,
                            %e1: !E1, %e2: !E2, %e3: !E3, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %cLm1 = arith.constant ${LM1} : index
  %cL = arith.constant ${L} : index
  %HQ = arith.constant ${HQ} : index
  %GROUP = arith.constant ${GROUP} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %scale = arith.constant dense<${SCALE}> : !VF
  %zv = arith.constant dense<0.0> : !VF
  %ninfv = arith.constant dense<0xFF800000> : !VF
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %iota = arith.constant dense<${IOTA}> : !VI
  %B = memref.dim %q, %c0 : !Q
  %SQ = memref.dim %q, %c2 : !Q
  %SKV = memref.dim %k, %c2 : !K
  %qa = memref.cast %q : !Q to !ROWS
  %ka = memref.cast %k : !K to !ROWS
  %va = memref.cast %v : !V to !ROWS
  %doa = memref.cast %do : !O to !ROWS
  %OFF = arith.subi %SKV, %SQ : index
  %bhq = arith.muli %B, %HQ : index
  %ROWS = arith.muli %bhq, %SQ : index
  %b, %h, %i0, %i1 = func.call @query_item(%item, %SQ)
      : (index, index) -> (index, index, index, index)
  %hk = arith.divui %h, %GROUP : index
  %head = func.call @row_index(%b, %h, %c0, %SQ) : (index, index, index, index) -> index
  %lhead = arith.addi %ROWS, %head : index
  // This item's partial gradient buffer (after the kv items'), zeroed.
  %BN = arith.constant ${BN} : index
  %HKV = arith.constant ${HKV} : index
  %upk0 = arith.addi %SKV, %BN : index
  %upk = arith.subi %upk0, %c1 : index
  %NKT = arith.divui %upk, %BN : index
  %bhkv = arith.muli %B, %HKV : index
  %KITEMS = arith.muli %bhkv, %NKT : index
  %PF = arith.constant ${GRAD_FLOATS} : index
  %RF = arith.constant ${ROW_FLOATS} : index
  %rowsf = arith.muli %ROWS, %RF : index
  %pslot = arith.addi %KITEMS, %item : index
  %pitem = arith.muli %pslot, %PF : index
  %pbase = arith.addi %rowsf, %pitem : index
  %pend = arith.addi %pbase, %PF : index
  scf.for %e = %pbase to %pend step %c1 {
    memref.store %zero, %scratch[%e] : !SCRATCH
  }
  %Qt = memref.alloca(%D) {alignment = 64 : i64} : !TD
  %dOt = memref.alloca(%DV) {alignment = 64 : i64} : !TV
  %dQt = memref.alloca(%D) {alignment = 64 : i64} : !TD
  %DEw = memref.alloca() {alignment = 64 : i64} : !W
  %c64 = arith.constant 64 : index
  // The bucketed terms' per-row sums S (dE by key bucket) and T (P by value
  // bucket), [buckets, 8 rows].
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %has_grads = arith.constant ${HAS_GRADS}
  %NK = arith.constant ${KEY_TERMS} : index
  %NV = arith.constant ${VALUE_TERMS} : index
  %NK1 = arith.maxui %NK, %c1 : index
  %NV1 = arith.maxui %NV, %c1 : index
  %Sk = memref.alloca(%NK1) {alignment = 64 : i64} : !TD
  %Tv = memref.alloca(%NV1) {alignment = 64 : i64} : !TD
  // 8 rows per vector: rows r0 .. r0 + 7, transposed.
  scf.for %r0 = %i0 to %i1 step %cL {
    func.call @rows_t(%qa, %Qt, %D, %b, %h, %r0, %i1)
        : (!ROWS, !TD, index, index, index, index, index) -> ()
    func.call @rows_t(%doa, %dOt, %DV, %b, %h, %r0, %i1)
        : (!ROWS, !TV, index, index, index, index, index) -> ()
    scf.for %c = %c0 to %D step %c1 {
      vector.store %zv, %dQt[%c, %c0] : !TD, !VF
    }
    scf.for %m = %c0 to %NK1 step %c1 {
      vector.store %zv, %Sk[%m, %c0] : !TD, !VF
    }
    scf.for %m = %c0 to %NV1 step %c1 {
      vector.store %zv, %Tv[%m, %c0] : !TD, !VF
    }
    %dr = func.call @row_values(%scratch, %head, %r0, %i1, %zero)
        : (!SCRATCH, index, index, index, f32) -> !VF
    %lse = func.call @row_values(%scratch, %lhead, %r0, %i1, %ninf)
        : (!SCRATCH, index, index, index, f32) -> !VF
    %seen = arith.cmpf one, %lse, %ninfv : !VF
    %last0 = arith.addi %r0, %cLm1 : index
    %i1m = arith.subi %i1, %c1 : index
    %last = arith.minui %last0, %i1m : index
    %lo, %unused = func.call @key_range(%r0, %SQ, %SKV) : (index, index, index) -> (index, index)
    %unused2, %hi = func.call @key_range(%last, %SQ, %SKV) : (index, index, index) -> (index, index)
    %r0i = arith.index_cast %r0 : index to i32
    %r0v = vector.broadcast %r0i : i32 to !VI
    %qi = arith.addi %r0v, %iota : !VI
    %i1i = arith.index_cast %i1 : index to i32
    %i1v = vector.broadcast %i1i : i32 to !VI
    %valid0 = arith.cmpi slt, %qi, %i1v : !VI
    %valid = arith.andi %valid0, %seen : vector<${L}xi1>
    // Keys in chunks of 64: dE of the chunk first, then dQ^T += dE^T K.
    scf.for %jc = %lo to %hi step %c64 {
      %jc_end0 = arith.addi %jc, %c64 : index
      %jc_end = arith.minui %jc_end0, %hi : index
      %nj = arith.subi %jc_end, %jc : index
      scf.for %jj = %c0 to %nj step %c1 {
        %j = arith.addi %jc, %jj : index
        %dot = func.call @tile_dot(%Qt, %ka, %D, %b, %hk, %j)
          : (!TD, !ROWS, index, index, index, index) -> !VF
        %ji = arith.index_cast %j : index to i32
        %kj = vector.broadcast %ji : i32 to !VI
        %kterm, %vterm, %mk, %mv = func.call @terms8(%scratch, %ROWS, %head, %b, %h, %qi, %kj, %SQ,
                                               %SKV, %e0, %e1, %e2, %e3, %qpos, %kpos)
            : (!SCRATCH, index, index, index, index, !VI, !VI, index, index, !E0, !E1, !E2, !E3,
               !QPOS, !KPOS) -> (!VF, !VF, !VI, !VI)
        %dotk = arith.addf %dot, %kterm : !VF
        %s, %f = func.call @score(%dotk, %b, %h, %qi, %kj, %SQ, %SKV, %e0, %e1, %e2, %e3, %qpos,
                                   %kpos)
            : (!VF, index, index, !VI, !VI, index, index, !E0, !E1, !E2, !E3, !QPOS, !KPOS)
            -> (!VF, !VF)
        %vis = func.call @visible(%qi, %kj, %OFF, %valid)
            : (!VI, !VI, index, vector<${L}xi1>) -> vector<${L}xi1>
        %sl = arith.subf %s, %lse : !VF
        %p0 = func.call @exp_lanes(%sl) : (!VF) -> !VF
        %p = arith.select %vis, %p0, %zv : vector<${L}xi1>, !VF
        %dp0 = func.call @tile_dot(%dOt, %va, %DV, %b, %hk, %j)
          : (!TV, !ROWS, index, index, index, index) -> !VF
        %dp = arith.addf %dp0, %vterm : !VF
        %dpd = arith.subf %dp, %dr : !VF
        %ds = arith.mulf %p, %dpd : !VF
        %dsf = arith.mulf %ds, %f : !VF
        %de = arith.mulf %dsf, %scale : !VF
        vector.store %de, %DEw[%jj, %c0] : !W, !VF
        scf.if %has_key {
          func.call @bucket_add(%Sk, %mk, %de) : (!TD, !VI, !VF) -> ()
        }
        scf.if %has_value {
          func.call @bucket_add(%Tv, %mv, %p) : (!TD, !VI, !VF) -> ()
        }
      }
      func.call @accumulate(%dQt, %DEw, %nj, %ka, %D, %b, %hk, %jc)
          : (!TD, !W, index, !ROWS, index, index, index, index) -> ()
    }
    // The key term's part of dQ': dQ'^T[c, :] += S[m, :] a^K[m, c].
    scf.if %has_key {
      scf.for %m = %c0 to %NK step %c1 {
        %sv = vector.load %Sk[%m, %c0] : !TD, !VF
        scf.for %c = %c0 to %D step %c1 {
          %a = attn.value_term_row key batch %b, head %h, bucket %m, channel %c
              operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : f32
          %av = vector.broadcast %a : f32 to !VF
          %old = vector.load %dQt[%c, %c0] : !TD, !VF
          %new = math.fma %sv, %av, %old : !VF
          vector.store %new, %dQt[%c, %c0] : !TD, !VF
        }
      }
    }
    // The tables' gradients: d a^K[m] += S_i[m] q_i, d a^V[m] += T_i[m] dO_i.
    scf.if %has_grads {
      func.call @term_row_grads(%qa, %doa, %Sk, %Tv, %scratch, %pbase, %b, %h, %r0, %i1, %e0, %e1,
                                %e2, %e3)
          : (!ROWS, !ROWS, !TD, !TD, !SCRATCH, index, index, index, index, index, !E0, !E1, !E2,
             !E3) -> ()
    }
    scf.for %l = %c0 to %cL step %c1 {
      %r = arith.addi %r0, %l : index
      %in = arith.cmpi ult, %r, %i1 : index
      scf.if %in {
        scf.for %c = %c0 to %D step %c1 {
          %x = memref.load %dQt[%c, %l] : !TD
          memref.store %x, %dq[%b, %h, %r, %c] : !Q
        }
      }
    }
    // dQ' -> dq through the QK transform's adjoint (nothing without one),
    // its operand gradients (RoPE's position scale) from dQ' and Q' first.
    %rn0 = arith.subi %i1, %r0 : index
    %rn = arith.minui %rn0, %cL : index
    %dq_rows = memref.subview %dq[%b, %h, %r0, 0] [1, 1, %rn, ${D}] [1, 1, 1, 1] : !Q to !TILE
    %q_rows = memref.subview %q[%b, %h, %r0, 0] [1, 1, %rn, ${D}] [1, 1, 1, 1] : !Q to !TILE
    attn.qk_transform_grad %dq_rows, %q_rows, %rn, %r0, %b positions(%qpos : !QPOS)
        operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) partial(%scratch : !SCRATCH, %pbase)
        offsets ${GRAD_OFFSETS} lengths(%SQ, %SKV) : !TILE, !TILE
    attn.qk_transform adjoint %dq_rows, %rn, %r0, %b, %tables lengths(%SQ, %SKV)
        : !TILE, !SCRATCH
  }
  return
}
