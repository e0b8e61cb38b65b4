// NVIDIA attention backward template (docs/backward.md, "NVIDIA"): f16 or
// bf16 inputs, f32 accumulation on tensor cores (mma.sync m16n8k16), the
// x86 backward's phases and its determinism rule: every block writes
// outputs no other block writes, so there are no atomics and no reduction
// whose order depends on scheduling. Kernels, launched in this order:
//   pejit_prologue             the QK transform's tables (the forward's)
//   pejit_backward_transform   Q' = R q, K' = R k into tq, tk (T); without a
//                              transform the runtime passes q, k as tq, tk
//                              and skips it
//   pejit_backward_rows        D_i = dO_i . O_i and lse_i = log sum_j e^s_ij
//                              (or the training forward's lse) into rows
//                              [2, B, HQ, SQ] f32
//   pejit_backward_kv          block (64 keys, KV head, batch): for the
//                              group's heads and each W-row step of the
//                              query rows that see its keys,
//                                S^T = K' Q'^T, P^T = exp(S^T - lse),
//                                dP^T = V dO^T, dS = P (dP - D),
//                                dE = scale softcap' dS,
//                                dV += P^T dO,  dK' += dE^T Q'
//                              dV written in T, dK' in f32 (gk)
//   pejit_backward_q           block (64 rows, head, batch): per W-key step,
//                              S, P, dP, dE recomputed, dQ' += dE K' (gq)
//   pejit_backward_finish      dq = adjoint(dQ'), dk = adjoint(dK') (RoPE:
//                              the inverse rotation), rounded to T
// with s_ij = softcap(scale q'_i . k'_j) + the fused score biases
// (attn.score_mod, as the forward's). Masked scores are -inf, so their P
// is 0; a row that sees no key has lse = -inf, P = 0 everywhere, dq = 0.
//
// Layout: the 4 warps of a block own 16 of its 64 rows (keys in kv, query
// rows in rows and q): the MMA's rows. The row-wise kernels (transform,
// finish) are mma_backward_rowwise.mlir's. The shared tiles SD (width D) and SV
// (width DV) hold those 64 rows in [0, 64) and the step's W rows of the
// other side in [64, 64 + W); mma_backward_blocks.mlir's products read
// them. Fragment layouts are mma_attention.mlir's.
//
// Parameters (attn-instantiate-nvidia-template, backward form:
// pejit/compiler/passes/InstantiateNvidiaBackward.cpp): HQ HKV
// GROUP D DV (multiples of 16, at most 128) DP=D+8 DVP=DV+8
// D8 DV8 D16 DV16 W (16 or 64) W8 W16 ROWS=64+W
// THREADS=128 T (f16|bf16) MMA OT (o and dO: f32, f16, bf16)
// O_TO_T O_TO_F32 (bodies) CAUSAL HAS_WINDOW WINDOW
// HAS_RIGHT RIGHT SCALE HAS_SOFTCAP SOFTCAP HAS_LSE
// QPB KPB SCRATCHD HAS_SCORE_GRADS HAS_TRANSFORM_GRADS HAS_TERM_GRADS
// HAS_FINISH_GRADS KEEP_F32 GRAD_FLOATS GRAD_OFFSETS (mma_backward_steps.mlir:
// the operand gradients) HAS_TERMS HAS_KEY_TERM HAS_VALUE_TERM NK NV NK2 TW
// (mma_backward_terms.mlir: Shaw's terms) HAS_SCORE_GRAD (a bias tensor's
// gradient: dS [B, HQ, SQ, SKV] f32, written by the q kernel); LENGTH_ARGS, PROLOGUE_VIEWS, BACKWARD_VIEWS,
// POSITION_VIEWS, ENCODING_ARGS, ENCODING_OPERANDS, ENCODING_CALL_ARGS and
// ENCODING_CALL_TYPES as the forward's (mma_attention.mlir).

!PT = memref<1x${T}>
!POT = memref<1x${OT}>
!PF = memref<1xf32>
!PI = memref<1xi64>
!A = vector<4x2x${T}>
!BF = vector<2x2x${T}>
!C = vector<2x2xf32>
!SD = memref<${ROWS}x${DP}x${T}, #gpu.address_space<workgroup>>
!SV = memref<${ROWS}x${DVP}x${T}, #gpu.address_space<workgroup>>
!FT = memref<64x${DP}xf32, #gpu.address_space<workgroup>>
!ROW = memref<1x${D}x${T}, strided<[${DP}, 1], offset: ?>, #gpu.address_space<workgroup>>
!FROW = memref<1x${D}xf32, strided<[${DP}, 1], offset: ?>, #gpu.address_space<workgroup>>
!GROW = memref<1x${D}xf32, strided<[${D}, 1], offset: ?>>
!SACC = memref<${W8}x4xf32>
!DACC = memref<${D8}x4xf32>
!VACC = memref<${DV8}x4xf32>
!QPOS = memref<${QPB}x${SQD}xi64>
!KPOS = memref<${KPB}x${SKVD}xi64>
!SCRATCH = memref<${SCRATCHD}xf32>
!OD = memref<${BD}x${HQ}x${SQD}x${DV}x${OT}>
!RS = memref<2x${BD}x${HQ}x${SQD}xf32>
!LSE = memref<${LSE_SHAPE}xf32>
!GQ = memref<${BD}x${HQ}x${SQD}x${D}xf32>
!GK = memref<${BD}x${HKV}x${SKVD}x${D}xf32>
!DVT = memref<${BD}x${HKV}x${SKVD}x${DV}x${T}>

module attributes {gpu.container_module} {
gpu.module @pejit_nvidia {

// @pejit-blocks

// The QK transform's tables, spread over all threads of the grid.
gpu.func @pejit_prologue(%qpos_arg: !PI, %kpos_arg: !PI, %scratch_arg: !PF,
                         ${LENGTH_ARGS}${ENCODING_ARGS}) kernel {
${PROLOGUE_VIEWS}
  %tid = gpu.thread_id x
  %bid = gpu.block_id x
  %bdim = gpu.block_dim x
  %gdim = gpu.grid_dim x
  %first0 = arith.muli %bid, %bdim : index
  %first = arith.addi %first0, %tid : index
  %step = arith.muli %gdim, %bdim : index
  attn.qk_prologue %qpos, %kpos, %scratch rows(%first, %step)${ENCODING_OPERANDS}
      : !QPOS, !KPOS, !SCRATCH
  gpu.return
}

// Block (64-row tile x, head y, batch z): D_i, then lse_i (copied from the
// training forward's, or by the forward's online max and sum over the
// keys row i sees, W at a time).
gpu.func @pejit_backward_rows(${BACKWARD_ARGS})
    workgroup(%SDs: !SD {llvm.align = 16 : i64}) kernel {
${BACKWARD_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %i1c = arith.constant 1 : i32
  %i2c = arith.constant 2 : i32
  %i32c = arith.constant 32 : i32
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %log2e = arith.constant 1.44269504088896 : f32
  %THREADS = arith.constant ${THREADS} : index
  %W = arith.constant ${W} : index
  %nS = arith.constant ${W8} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %GROUP = arith.constant ${GROUP} : index
  %has_lse = arith.constant ${HAS_LSE}
  %Sacc = memref.alloca() : !SACC
  %tid = gpu.thread_id x
  %bx = gpu.block_id x
  %h = gpu.block_id y
  %b = gpu.block_id z
  %hk = arith.divui %h, %GROUP : index
  %i0 = arith.muli %bx, %c64 : index
  %left = arith.subi %SQ, %i0 : index
  %valid = arith.minui %left, %c64 : index
  // D_i = dO_i . O_i in f32, one row per thread.
  scf.for %r = %tid to %valid step %THREADS {
    %i = arith.addi %i0, %r : index
    %dsum = scf.for %c = %c0 to %DV step %c1 iter_args(%acc = %zero) -> (f32) {
      %x = memref.load %do[%b, %h, %i, %c] : !OD
      %y = memref.load %o[%b, %h, %i, %c] : !OD
      %xf = func.call @o_to_f32(%x) : (${OT}) -> f32
      %yf = func.call @o_to_f32(%y) : (${OT}) -> f32
      %acc1 = math.fma %xf, %yf, %acc : f32
      scf.yield %acc1 : f32
    }
    memref.store %dsum, %rows[%c0, %b, %h, %i] : !RS
    scf.if %has_lse {
      %l = memref.load %lse[%b, %h, %i] : !LSE
      memref.store %l, %rows[%c1, %b, %h, %i] : !RS
    }
  }
  // Bucketed terms (Shaw): each row's QaK and dOaV before any score.
  %has_terms = arith.constant ${HAS_TERMS}
  scf.if %has_terms {
    scf.for %r = %tid to %valid step %THREADS {
      %i = arith.addi %i0, %r : index
      func.call @fill_row_terms(%b, %h, %i, %tq_arg, %do_arg, %terms_arg, %B,
                                %SQ${ENCODING_CALL_ARGS})
          : (index, index, index, !PT, !POT, !PF, index, index${ENCODING_CALL_TYPES}) -> ()
    }
    gpu.barrier
  }
  %true_c = arith.constant true
  %recompute = arith.xori %has_lse, %true_c : i1
  scf.if %recompute {
    %warp = arith.divui %tid, %c32 : index
    %lane = arith.remui %tid, %c32 : index
    %quad_row = arith.divui %lane, %c4 : index
    %lane4 = arith.remui %lane, %c4 : index
    %quad_col = arith.muli %lane4, %c2 : index
    %own = arith.muli %warp, %c16 : index
    %r_lo = arith.addi %own, %quad_row : index
    %i_lo = arith.addi %i0, %r_lo : index
    %i_hi = arith.addi %i_lo, %c8 : index
    %qbh0 = arith.muli %b, %HQ : index
    %qbh = arith.addi %qbh0, %h : index
    %qr0 = arith.muli %qbh, %SQ : index
    %qr1 = arith.addi %qr0, %i0 : index
    %qfirst = arith.muli %qr1, %D : index
    func.call @stage_d(%SDs, %c0, %tq_arg, %qfirst, %valid, %c64, %tid)
        : (!SD, index, !PT, index, index, index, index) -> ()
    %range:2 = func.call @key_steps(%i0, %SQ, %SKV) : (index, index, index) -> (index, index)
    %kbh0 = arith.muli %b, %HKV : index
    %kbh = arith.addi %kbh0, %hk : index
    %kr0 = arith.muli %kbh, %SKV : index
    %final:4 = scf.for %jt = %range#0 to %range#1 step %c1
        iter_args(%m_lo = %ninf, %m_hi = %ninf, %l_lo = %zero, %l_hi = %zero)
        -> (f32, f32, f32, f32) {
      %j0 = arith.muli %jt, %W : index
      %kleft = arith.subi %SKV, %j0 : index
      %kvalid = arith.minui %kleft, %W : index
      %kr1 = arith.addi %kr0, %j0 : index
      %kfirst = arith.muli %kr1, %D : index
      gpu.barrier
      func.call @stage_d(%SDs, %c64, %tk_arg, %kfirst, %kvalid, %W, %tid)
          : (!SD, index, !PT, index, index, index, index) -> ()
      gpu.barrier
      func.call @zero_s(%Sacc) : (!SACC) -> ()
      func.call @mma_nt_d(%Sacc, %SDs, %own, %lane) : (!SACC, !SD, index, index) -> ()
      // Scores in place; this lane's max of each row.
      %tile_max:2 = scf.for %n = %c0 to %nS step %c1 iter_args(%mx_lo = %ninf, %mx_hi = %ninf)
          -> (f32, f32) {
        %mxs:2 = scf.for %e = %c0 to %c4 step %c1 iter_args(%ml = %mx_lo, %mh = %mx_hi)
            -> (f32, f32) {
          %hi = arith.cmpi uge, %e, %c2 : index
          %i = arith.select %hi, %i_hi, %i_lo : index
          %j = func.call @step_column(%j0, %n, %e, %quad_col) : (index, index, index, index) -> index
          %dot = memref.load %Sacc[%n, %e] : !SACC
          %s:2 = func.call @score_at(%dot, %b, %h, %i, %j, %qpos_arg, %kpos_arg, %terms_arg, %B, %SQ,
                                     %SKV${ENCODING_CALL_ARGS})
              : (f32, index, index, index, index, !PI, !PI, !PF, index, index,
                 index${ENCODING_CALL_TYPES})
              -> (f32, f32)
          memref.store %s#0, %Sacc[%n, %e] : !SACC
          %ml1 = arith.maximumf %ml, %s#0 : f32
          %mh1 = arith.maximumf %mh, %s#0 : f32
          %ml2 = arith.select %hi, %ml, %ml1 : f32
          %mh2 = arith.select %hi, %mh1, %mh : f32
          scf.yield %ml2, %mh2 : f32, f32
        } {pejit.unroll}
        scf.yield %mxs#0, %mxs#1 : f32, f32
      } {pejit.unroll}
      %mt_lo = func.call @quad_max(%tile_max#0) : (f32) -> f32
      %mt_hi = func.call @quad_max(%tile_max#1) : (f32) -> f32
      %mn_lo = arith.maximumf %m_lo, %mt_lo : f32
      %mn_hi = arith.maximumf %m_hi, %mt_hi : f32
      // All keys masked so far: subtract 0 instead of -inf (no NaN).
      %none_lo = arith.cmpf oeq, %mn_lo, %ninf : f32
      %none_hi = arith.cmpf oeq, %mn_hi, %ninf : f32
      %ms_lo = arith.select %none_lo, %zero, %mn_lo : f32
      %ms_hi = arith.select %none_hi, %zero, %mn_hi : f32
      %aarg_lo0 = arith.subf %m_lo, %ms_lo : f32
      %aarg_lo = arith.mulf %aarg_lo0, %log2e : f32
      %aarg_hi0 = arith.subf %m_hi, %ms_hi : f32
      %aarg_hi = arith.mulf %aarg_hi0, %log2e : f32
      %alpha_lo = func.call @exp2(%aarg_lo) : (f32) -> f32
      %alpha_hi = func.call @exp2(%aarg_hi) : (f32) -> f32
      %psum:2 = scf.for %n = %c0 to %nS step %c1 iter_args(%pl = %zero, %ph = %zero)
          -> (f32, f32) {
        %ps:2 = scf.for %e = %c0 to %c4 step %c1 iter_args(%sl = %pl, %sh = %ph) -> (f32, f32) {
          %hi = arith.cmpi uge, %e, %c2 : index
          %ms = arith.select %hi, %ms_hi, %ms_lo : f32
          %s = memref.load %Sacc[%n, %e] : !SACC
          %sd = arith.subf %s, %ms : f32
          %arg = arith.mulf %sd, %log2e : f32
          %p = func.call @exp2(%arg) : (f32) -> f32
          %sl1 = arith.addf %sl, %p : f32
          %sh1 = arith.addf %sh, %p : f32
          %sl2 = arith.select %hi, %sl, %sl1 : f32
          %sh2 = arith.select %hi, %sh1, %sh : f32
          scf.yield %sl2, %sh2 : f32, f32
        } {pejit.unroll}
        scf.yield %ps#0, %ps#1 : f32, f32
      } {pejit.unroll}
      %ln_lo0 = arith.mulf %l_lo, %alpha_lo : f32
      %ln_lo = arith.addf %ln_lo0, %psum#0 : f32
      %ln_hi0 = arith.mulf %l_hi, %alpha_hi : f32
      %ln_hi = arith.addf %ln_hi0, %psum#1 : f32
      scf.yield %mn_lo, %mn_hi, %ln_lo, %ln_hi : f32, f32, f32, f32
    }
    // lse = m + log l with l summed over the quad; -inf where l = 0.
    %lt_lo = func.call @quad_sum(%final#2) : (f32) -> f32
    %lt_hi = func.call @quad_sum(%final#3) : (f32) -> f32
    %lse_lo = func.call @log_sum(%final#0, %lt_lo) : (f32, f32) -> f32
    %lse_hi = func.call @log_sum(%final#1, %lt_hi) : (f32, f32) -> f32
    %lead = arith.cmpi eq, %lane4, %c0 : index
    %in_lo = arith.cmpi ult, %i_lo, %SQ : index
    %in_hi = arith.cmpi ult, %i_hi, %SQ : index
    %w_lo = arith.andi %lead, %in_lo : i1
    %w_hi = arith.andi %lead, %in_hi : i1
    scf.if %w_lo {
      memref.store %lse_lo, %rows[%c1, %b, %h, %i_lo] : !RS
    }
    scf.if %w_hi {
      memref.store %lse_hi, %rows[%c1, %b, %h, %i_hi] : !RS
    }
  }
  gpu.return
}

// Block (64 keys x, KV head y, batch z): dV and dK' of its keys over the
// group's query heads, W query rows a step.
gpu.func @pejit_backward_kv(${BACKWARD_ARGS})
    workgroup(%SDs: !SD {llvm.align = 16 : i64}, %SVs: !SV {llvm.align = 16 : i64}) kernel {
${BACKWARD_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %W = arith.constant ${W} : index
  %nS = arith.constant ${W8} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %GROUP = arith.constant ${GROUP} : index
  %Sacc = memref.alloca() : !SACC
  %Pacc = memref.alloca() : !SACC
  %dK = memref.alloca() : !DACC
  %dV = memref.alloca() : !VACC
  %tid = gpu.thread_id x
  %bx = gpu.block_id x
  %hk = gpu.block_id y
  %b = gpu.block_id z
  %warp = arith.divui %tid, %c32 : index
  %lane = arith.remui %tid, %c32 : index
  %quad_row = arith.divui %lane, %c4 : index
  %lane4 = arith.remui %lane, %c4 : index
  %quad_col = arith.muli %lane4, %c2 : index
  %own = arith.muli %warp, %c16 : index
  %j0 = arith.muli %bx, %c64 : index
  %k_lo0 = arith.addi %j0, %own : index
  %k_lo = arith.addi %k_lo0, %quad_row : index
  %k_hi = arith.addi %k_lo, %c8 : index
  %kleft = arith.subi %SKV, %j0 : index
  %kvalid = arith.minui %kleft, %c64 : index
  %kbh0 = arith.muli %b, %HKV : index
  %kbh = arith.addi %kbh0, %hk : index
  %kr0 = arith.muli %kbh, %SKV : index
  %kr1 = arith.addi %kr0, %j0 : index
  %kfirst = arith.muli %kr1, %D : index
  %vfirst = arith.muli %kr1, %DV : index
  func.call @stage_d(%SDs, %c0, %tk_arg, %kfirst, %kvalid, %c64, %tid)
      : (!SD, index, !PT, index, index, index, index) -> ()
  func.call @stage_v(%SVs, %c0, %v_arg, %vfirst, %kvalid, %c64, %tid)
      : (!SV, index, !PT, index, index, index, index) -> ()
  func.call @zero_d(%dK) : (!DACC) -> ()
  func.call @zero_v(%dV) : (!VACC) -> ()
  %range:2 = func.call @query_steps(%j0, %SQ, %SKV) : (index, index, index) -> (index, index)
  scf.for %g = %c0 to %GROUP step %c1 {
    %hg = arith.muli %hk, %GROUP : index
    %h = arith.addi %hg, %g : index
    %qbh0 = arith.muli %b, %HQ : index
    %qbh = arith.addi %qbh0, %h : index
    %qr0 = arith.muli %qbh, %SQ : index
    scf.for %it = %range#0 to %range#1 step %c1 {
      %i0 = arith.muli %it, %W : index
      %qleft = arith.subi %SQ, %i0 : index
      %qvalid = arith.minui %qleft, %W : index
      %qr1 = arith.addi %qr0, %i0 : index
      %qfirst = arith.muli %qr1, %D : index
      %ofirst = arith.muli %qr1, %DV : index
      gpu.barrier
      func.call @stage_d(%SDs, %c64, %tq_arg, %qfirst, %qvalid, %W, %tid)
          : (!SD, index, !PT, index, index, index, index) -> ()
      func.call @stage_o(%SVs, %c64, %do_arg, %ofirst, %qvalid, %W, %tid)
          : (!SV, index, !POT, index, index, index, index) -> ()
      gpu.barrier
      // S^T = K' Q'^T and dP^T = V dO^T: this warp's 16 keys x W rows.
      func.call @zero_s(%Sacc) : (!SACC) -> ()
      func.call @zero_s(%Pacc) : (!SACC) -> ()
      func.call @mma_nt_d(%Sacc, %SDs, %own, %lane) : (!SACC, !SD, index, index) -> ()
      func.call @mma_nt_v(%Pacc, %SVs, %own, %lane) : (!SACC, !SV, index, index) -> ()
      // Element e of n-tile n: key (e < 2 ? k_lo : k_hi), row i0 + 8n +
      // quad_col + e % 2. P^T replaces S^T, dE^T replaces dP^T.
      scf.for %n = %c0 to %nS step %c1 {
        scf.for %e = %c0 to %c4 step %c1 {
          %hi = arith.cmpi uge, %e, %c2 : index
          %j = arith.select %hi, %k_hi, %k_lo : index
          %i = func.call @step_column(%i0, %n, %e, %quad_col)
              : (index, index, index, index) -> index
          %dot = memref.load %Sacc[%n, %e] : !SACC
          %dp0 = memref.load %Pacc[%n, %e] : !SACC
          %dp = func.call @value_dp(%dp0, %b, %h, %i, %j, %qpos_arg, %kpos_arg, %terms_arg, %B,
                                    %SQ, %SKV${ENCODING_CALL_ARGS})
              : (f32, index, index, index, index, !PI, !PI, !PF, index, index,
                 index${ENCODING_CALL_TYPES}) -> f32
          %s:2 = func.call @score_at(%dot, %b, %h, %i, %j, %qpos_arg, %kpos_arg, %terms_arg, %B, %SQ,
                                     %SKV${ENCODING_CALL_ARGS})
              : (f32, index, index, index, index, !PI, !PI, !PF, index, index,
                 index${ENCODING_CALL_TYPES})
              -> (f32, f32)
          %w:3 = func.call @weights(%s#0, %s#1, %dp, %b, %h, %i, %rows_arg, %SQ, %B)
              : (f32, f32, f32, index, index, index, !PF, index, index) -> (f32, f32, f32)
          memref.store %w#0, %Sacc[%n, %e] : !SACC
          memref.store %w#1, %Pacc[%n, %e] : !SACC
        } {pejit.unroll}
      } {pejit.unroll}
      // dV += P^T dO, dK' += dE^T Q' (the step's rows in SV, SD [64, 64 + W)).
      func.call @mma_pv_v(%dV, %Sacc, %SVs, %lane) : (!VACC, !SACC, !SV, index) -> ()
      func.call @mma_pv_d(%dK, %Pacc, %SDs, %lane) : (!DACC, !SACC, !SD, index) -> ()
    }
  }
  // dK' in f32 (its adjoint is pejit_backward_finish's), dV in T.
  %in_lo = arith.cmpi ult, %k_lo, %SKV : index
  %in_hi = arith.cmpi ult, %k_hi, %SKV : index
  %nD = arith.constant ${D8} : index
  %nV = arith.constant ${DV8} : index
  scf.for %n = %c0 to %nD step %c1 {
    %n8 = arith.muli %n, %c8 : index
    %col = arith.addi %n8, %quad_col : index
    %col1 = arith.addi %col, %c1 : index
    scf.if %in_lo {
      %x0 = memref.load %dK[%n, %c0] : !DACC
      %x1 = memref.load %dK[%n, %c1] : !DACC
      memref.store %x0, %gk[%b, %hk, %k_lo, %col] : !GK
      memref.store %x1, %gk[%b, %hk, %k_lo, %col1] : !GK
    }
    scf.if %in_hi {
      %x2 = memref.load %dK[%n, %c2] : !DACC
      %x3 = memref.load %dK[%n, %c3] : !DACC
      memref.store %x2, %gk[%b, %hk, %k_hi, %col] : !GK
      memref.store %x3, %gk[%b, %hk, %k_hi, %col1] : !GK
    }
  } {pejit.unroll}
  scf.for %n = %c0 to %nV step %c1 {
    %n8 = arith.muli %n, %c8 : index
    %col = arith.addi %n8, %quad_col : index
    scf.if %in_lo {
      %x0 = memref.load %dV[%n, %c0] : !VACC
      %x1 = memref.load %dV[%n, %c1] : !VACC
      %pair = vector.from_elements %x0, %x1 : vector<2xf32>
      %out = func.call @out_${T}(%pair) : (vector<2xf32>) -> vector<2x${T}>
      vector.store %out, %dv[%b, %hk, %k_lo, %col] : !DVT, vector<2x${T}>
    }
    scf.if %in_hi {
      %x2 = memref.load %dV[%n, %c2] : !VACC
      %x3 = memref.load %dV[%n, %c3] : !VACC
      %pair = vector.from_elements %x2, %x3 : vector<2xf32>
      %out = func.call @out_${T}(%pair) : (vector<2xf32>) -> vector<2x${T}>
      vector.store %out, %dv[%b, %hk, %k_hi, %col] : !DVT, vector<2x${T}>
    }
  } {pejit.unroll}
  gpu.return
}

// Block (64 rows x, head y, batch z): dQ' of its rows, W keys a step.
gpu.func @pejit_backward_q(${BACKWARD_ARGS})
    workgroup(%SDs: !SD {llvm.align = 16 : i64}, %SVs: !SV {llvm.align = 16 : i64}) kernel {
${BACKWARD_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %W = arith.constant ${W} : index
  %nS = arith.constant ${W8} : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %GROUP = arith.constant ${GROUP} : index
  %Sacc = memref.alloca() : !SACC
  %Pacc = memref.alloca() : !SACC
  %dQ = memref.alloca() : !DACC
  %tid = gpu.thread_id x
  %bx = gpu.block_id x
  %h = gpu.block_id y
  %b = gpu.block_id z
  %hk = arith.divui %h, %GROUP : index
  %warp = arith.divui %tid, %c32 : index
  %lane = arith.remui %tid, %c32 : index
  %quad_row = arith.divui %lane, %c4 : index
  %lane4 = arith.remui %lane, %c4 : index
  %quad_col = arith.muli %lane4, %c2 : index
  %own = arith.muli %warp, %c16 : index
  %i0 = arith.muli %bx, %c64 : index
  %i_lo0 = arith.addi %i0, %own : index
  %i_lo = arith.addi %i_lo0, %quad_row : index
  %i_hi = arith.addi %i_lo, %c8 : index
  %qleft = arith.subi %SQ, %i0 : index
  %qvalid = arith.minui %qleft, %c64 : index
  %qbh0 = arith.muli %b, %HQ : index
  %qbh = arith.addi %qbh0, %h : index
  %qr0 = arith.muli %qbh, %SQ : index
  %qr1 = arith.addi %qr0, %i0 : index
  %qfirst = arith.muli %qr1, %D : index
  %ofirst = arith.muli %qr1, %DV : index
  func.call @stage_d(%SDs, %c0, %tq_arg, %qfirst, %qvalid, %c64, %tid)
      : (!SD, index, !PT, index, index, index, index) -> ()
  func.call @stage_o(%SVs, %c0, %do_arg, %ofirst, %qvalid, %c64, %tid)
      : (!SV, index, !POT, index, index, index, index) -> ()
  func.call @zero_d(%dQ) : (!DACC) -> ()
  // The score biases' operand gradients: this warp's own partial (slot),
  // set to 0 here; the step loop's first barrier orders it before any add.
  // Each score (b, h, i, j) is this phase's once, as each is the kv
  // phase's; here the registers have room for the lanes' adds.
  %has_grads = arith.constant ${HAS_SCORE_GRADS}
  %has_terms = arith.constant ${HAS_TERMS}
  %has_dscore = arith.constant ${HAS_SCORE_GRAD}
  %parts:2 = func.call @partial_slots(%SQ, %SKV, %B) : (index, index, index) -> (index, index)
  %q_tiles0 = arith.addi %SQ, %c64 : index
  %q_tiles1 = arith.subi %q_tiles0, %c1 : index
  %q_tiles = arith.divui %q_tiles1, %c64 : index
  %blk0 = arith.muli %b, %HQ : index
  %blk1 = arith.addi %blk0, %h : index
  %blk2 = arith.muli %blk1, %q_tiles : index
  %blk = arith.addi %blk2, %bx : index
  %pbase = func.call @slot_base(%blk, %warp) : (index, index) -> index
  scf.if %has_grads {
    func.call @zero_slot(%part_arg, %parts#1, %pbase, %lane) : (!PF, index, index, index) -> ()
  }
  %range:2 = func.call @key_steps(%i0, %SQ, %SKV) : (index, index, index) -> (index, index)
  %kbh0 = arith.muli %b, %HKV : index
  %kbh = arith.addi %kbh0, %hk : index
  %kr0 = arith.muli %kbh, %SKV : index
  scf.for %jt = %range#0 to %range#1 step %c1 {
    %j0 = arith.muli %jt, %W : index
    %kleft = arith.subi %SKV, %j0 : index
    %kvalid = arith.minui %kleft, %W : index
    %kr1 = arith.addi %kr0, %j0 : index
    %kfirst = arith.muli %kr1, %D : index
    %vfirst = arith.muli %kr1, %DV : index
    gpu.barrier
    func.call @stage_d(%SDs, %c64, %tk_arg, %kfirst, %kvalid, %W, %tid)
        : (!SD, index, !PT, index, index, index, index) -> ()
    func.call @stage_v(%SVs, %c64, %v_arg, %vfirst, %kvalid, %W, %tid)
        : (!SV, index, !PT, index, index, index, index) -> ()
    gpu.barrier
    // S = Q' K'^T and dP = dO V^T: this warp's 16 rows x W keys.
    func.call @zero_s(%Sacc) : (!SACC) -> ()
    func.call @zero_s(%Pacc) : (!SACC) -> ()
    func.call @mma_nt_d(%Sacc, %SDs, %own, %lane) : (!SACC, !SD, index, index) -> ()
    func.call @mma_nt_v(%Pacc, %SVs, %own, %lane) : (!SACC, !SV, index, index) -> ()
    scf.for %n = %c0 to %nS step %c1 {
      scf.for %e = %c0 to %c4 step %c1 {
        %hi = arith.cmpi uge, %e, %c2 : index
        %i = arith.select %hi, %i_hi, %i_lo : index
        %j = func.call @step_column(%j0, %n, %e, %quad_col) : (index, index, index, index) -> index
        %dot = memref.load %Sacc[%n, %e] : !SACC
        %dp0 = memref.load %Pacc[%n, %e] : !SACC
        %dp = func.call @value_dp(%dp0, %b, %h, %i, %j, %qpos_arg, %kpos_arg, %terms_arg, %B,
                                  %SQ, %SKV${ENCODING_CALL_ARGS})
            : (f32, index, index, index, index, !PI, !PI, !PF, index, index,
               index${ENCODING_CALL_TYPES}) -> f32
        %s:2 = func.call @score_at(%dot, %b, %h, %i, %j, %qpos_arg, %kpos_arg, %terms_arg, %B, %SQ,
                                   %SKV${ENCODING_CALL_ARGS})
            : (f32, index, index, index, index, !PI, !PI, !PF, index, index,
                 index${ENCODING_CALL_TYPES})
            -> (f32, f32)
        %w:3 = func.call @weights(%s#0, %s#1, %dp, %b, %h, %i, %rows_arg, %SQ, %B)
            : (f32, f32, f32, index, index, index, !PF, index, index) -> (f32, f32, f32)
        memref.store %w#1, %Pacc[%n, %e] : !SACC
        scf.if %has_dscore {
          func.call @store_dscore(%w#2, %b, %h, %i, %j, %ds_arg, %B, %SQ, %SKV)
              : (f32, index, index, index, index, !PF, index, index, index) -> ()
        }
        scf.if %has_terms {
          func.call @term_sums(%w#1, %w#0, %b, %h, %i, %j, %lane4, %qpos_arg, %kpos_arg,
                               %terms_arg, %B, %SQ, %SKV${ENCODING_CALL_ARGS})
              : (f32, f32, index, index, index, index, index, !PI, !PI, !PF, index, index,
                 index${ENCODING_CALL_TYPES}) -> ()
        }
        scf.if %has_grads {
          func.call @score_grads(%w#2, %b, %h, %i, %j, %lane, %part_arg, %parts#1, %pbase,
                                 %qpos_arg, %kpos_arg, %SQ, %SKV${ENCODING_CALL_ARGS})
              : (f32, index, index, index, index, index, !PF, index, index, !PI, !PI, index,
                 index${ENCODING_CALL_TYPES}) -> ()
        }
      } {pejit.unroll}
    } {pejit.unroll}
    // dQ' += dE K' (the step's keys in SD [64, 64 + W)).
    func.call @mma_pv_d(%dQ, %Pacc, %SDs, %lane) : (!DACC, !SACC, !SD, index) -> ()
  }
  %in_lo = arith.cmpi ult, %i_lo, %SQ : index
  %in_hi = arith.cmpi ult, %i_hi, %SQ : index
  %nD = arith.constant ${D8} : index
  scf.for %n = %c0 to %nD step %c1 {
    %n8 = arith.muli %n, %c8 : index
    %col = arith.addi %n8, %quad_col : index
    %col1 = arith.addi %col, %c1 : index
    scf.if %in_lo {
      %x0 = memref.load %dQ[%n, %c0] : !DACC
      %x1 = memref.load %dQ[%n, %c1] : !DACC
      memref.store %x0, %gq[%b, %h, %i_lo, %col] : !GQ
      memref.store %x1, %gq[%b, %h, %i_lo, %col1] : !GQ
    }
    scf.if %in_hi {
      %x2 = memref.load %dQ[%n, %c2] : !DACC
      %x3 = memref.load %dQ[%n, %c3] : !DACC
      memref.store %x2, %gq[%b, %h, %i_hi, %col] : !GQ
      memref.store %x3, %gq[%b, %h, %i_hi, %col1] : !GQ
    }
  } {pejit.unroll}
  gpu.return
}

}
}
