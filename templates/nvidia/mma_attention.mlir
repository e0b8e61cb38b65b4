// NVIDIA flash-attention forward template (FlashAttention-2 structure):
// f16 or bf16 inputs, f32 accumulation on tensor cores (mma.sync m16n8k16).
//
// One thread block = (query tile qt, query head h, batch b): WARPS warps,
// each owning 16 of the tile's BM = 16 WARPS query rows. Per block:
//   Qs = Q[b, h, i0 : i0+BM]                    staged in shared memory
//   for each KV tile of BN keys the causal mask does not hide entirely:
//     Ks, Vs = K, V[b, h / GROUP, j0 : j0+BN]   staged (rows past SKV = 0)
//     S = Qs . Ks^T * scale                     mma.sync, BN/8 n-tiles per warp
//     score_mod(S)  (hooks, per element)        mask (causal, window, tail)
//     m' = max(m, rowmax S); P = 2^((S - m') log2 e); l = l alpha + rowsum P
//     O = O alpha + P . Vs                      P reused from the S fragments
//   O[b, h, i0 : i0+BM] = O / l                 (l = 0: no visible key -> 0)
//
// Fragment layout of m16n8k16 (PTX ISA, "mma.m16n8k16"): lane l holds
//   A (16x16, row major): rows l/4 and l/4 + 8, columns 2(l%4) + {0, 1} and
//     the same + 8, as vector<4x2xT> [(r, c), (r+8, c), (r, c+8), (r+8, c+8)];
//   B (16x8, k x n): k = 2(l%4) + {0, 1} and + 8, n = l/4, as vector<2x2xT>;
//   C (16x8 f32): rows l/4 and l/4 + 8, columns 2(l%4) + {0, 1}.
// So a row's 64 scores live in the 4 lanes of a quad: row max and row sum
// are 16 local values then two xor-shuffles (1, 2).
//
// Register arrays (S accumulators, O accumulators, P) are private allocas
// indexed by loop counters with constant bounds; LLVM unrolls the loops and
// promotes the arrays to registers (ptxas -v: 0 bytes stack frame).
//
// Parameters (text, attn-instantiate-nvidia-template): ${HQ} ${HKV} ${GROUP}
// ${D} ${DV} (multiples of 16) ${DP}=D+8 ${DVP}=DV+8 (padded shared rows: no
// bank conflicts on fragment loads) ${CAUSAL} ${HAS_WINDOW} ${WINDOW}
// ${HAS_RIGHT} ${RIGHT} (right window: keys j <= i + OFF + RIGHT) ${SCALE}
// ${T} (f16|bf16) ${BM}=16 WARPS ${BN} (multiple of 16) ${BN8} ${BN16}
// ${THREADS}=32 WARPS ${KROWS}=max(BM, BN) (the K buffer stages Q first).
//
// Lengths (docs/shape-classes.md): ${BD}, ${SQD}, ${SKVD} and ${SCRATCHD}
// are the batch, sq, skv and the tables' floats as the memref types write
// them: a number, or `?` for a shape class's kernel. Every kernel takes
// bare pointers and the LENGTH_ARGS (%nb, %nsq, %nskv, %nsplits, %nscratch:
// i64, the call's values); the PROLOGUE_VIEWS, ATTENTION_VIEWS and
// COMBINE_VIEWS blocks (generated) define %B, %SQ, %SKV, %SPLITS, %NSCRATCH as
// constants where the class fixes them, else from those arguments, and
// view each pointer as its memref (memref.reinterpret_cast, row major).
// OFF = SKV - SQ (bottom-right causal) and the KV tile range follow.
// ${WO_SHAPE} ${WML_SHAPE}: split-KV partials, [B, HQ, SPLITS, SQ, DV] and
// [B, HQ, SPLITS, SQ] (1x1x1x1[x1] when a static kernel has no split);
// @pejit_combine (mma_blocks.mlir) merges them when SPLITS > 1.
// ${MMA} (mma_f16|mma_bf16) ${DV8}=DV/8 ${D16}=D/16 ${QPB} ${KPB} (axes x batch rows
// of the position ids: 1 or B) ${OT} (output element type: f32, f16 or bf16) ${CVT}
// (out_f32|out_f16|out_bf16). ${ENCODING_ARGS}: the encoding operands
// (", %e0: memref<...>", ...: contiguous, after the fixed arguments and the
// position ids), ${ENCODING_OPERANDS} the score_mod's operands(...) list
// of them, ${ENCODING_CALL_ARGS} and ${ENCODING_CALL_TYPES} the same for a
// func.call (", %e0", ", memref<...>"). The position ids go to the prologue
// and to score_mod (read only by encodings with relative_to = position).
//
// ${TILE_SCRATCH} (at least 1): floats of the encodings' query-tile tables
// (Shaw's Q_tile . a^K^T), filled by attn.query_tile_prologue in shared
// memory (the block's threads split the rows) and read by score_mod.
// ${VALUE_TERM} (true|false), ${VT_BUCKETS}, ${VT_FLOATS} = VT_BUCKETS x BM:
// a fused value term (Shaw's a^V): VT[m, r] in shared memory, per KV tile
//   VT[m, r] *= alpha(r);  VT[bucket(i, j), r] += P[r, j]  (shared atomics)
// and once per query tile, before the division by l,
//   O[r, :] += sum_m VT[m, r] row(m).
//
// A QK transform (RoPE) runs as its hooks say: @pejit_prologue (launched
// first, over all positions) fills its tables; the Q tile and each K tile
// are transformed in shared memory right after staging, one row per thread.

!Q = memref<${BD}x${HQ}x${SQD}x${D}x${T}>
!K = memref<${BD}x${HKV}x${SKVD}x${D}x${T}>
!V = memref<${BD}x${HKV}x${SKVD}x${DV}x${T}>
!O = memref<${BD}x${HQ}x${SQD}x${DV}x${OT}>
!QS = memref<${KROWS}x${DP}x${T}, #gpu.address_space<workgroup>>
!VS = memref<${BN}x${DVP}x${T}, #gpu.address_space<workgroup>>
!A = vector<4x2x${T}>
!BF = vector<2x2x${T}>
!C = vector<2x2xf32>
!QPOS = memref<${QPB}x${SQD}xi64>
!KPOS = memref<${KPB}x${SKVD}xi64>
!SCRATCH = memref<${SCRATCHD}xf32>
!WO = memref<${WO_SHAPE}xf32>
!WML = memref<${WML_SHAPE}xf32>
// Kernel arguments are bare pointers (one per tensor, whatever its shape):
// each kernel views them with the call's lengths (the *_VIEWS blocks).
!PT = memref<1x${T}>
!POT = memref<1x${OT}>
!PF = memref<1xf32>
!PI = memref<1xi64>
!TS = memref<${TILE_SCRATCH}xf32, #gpu.address_space<workgroup>>
!VT = memref<${VT_FLOATS}xf32, #gpu.address_space<workgroup>>
!ROW = memref<1x${D}x${T}, strided<[${DP}, 1], offset: ?>, #gpu.address_space<workgroup>>

module attributes {gpu.container_module} {
gpu.module @pejit_nvidia {

// The helpers and the split-KV combine kernel (mma_blocks.mlir) go here.
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

gpu.func @pejit_attention(%q_arg: !PT, %k_arg: !PT, %v_arg: !PT, %o_arg: !POT,
                          %scratch_arg: !PF, %wo_arg: !PF, %wm_arg: !PF, %wl_arg: !PF,
                          %qpos_arg: !PI, %kpos_arg: !PI, ${LENGTH_ARGS}${ENCODING_ARGS})
    workgroup(%Ks: !QS {llvm.align = 16 : i64}, %Vs: !VS {llvm.align = 16 : i64},
              %TSs: !TS {llvm.align = 16 : i64}, %VTs: !VT {llvm.align = 16 : i64}) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %c9 = arith.constant 9 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %BM = arith.constant ${BM} : index
  %BN = arith.constant ${BN} : index
  %THREADS = arith.constant ${THREADS} : index
  %i1c = arith.constant 1 : i32
  %i2c = arith.constant 2 : i32
  %i32c = arith.constant 32 : i32
  %true = arith.constant true
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %log2e = arith.constant 1.44269504088896 : f32
  %scale = arith.constant ${SCALE} : f32
  %zero2 = arith.constant dense<0.0> : vector<2x${T}>
  %zc = arith.constant dense<0.0> : !C
  %za = arith.constant dense<0.0> : !A
  %zb = arith.constant dense<0.0> : !BF
${ATTENTION_VIEWS}
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %OFF = arith.subi %SKV, %SQ : index
  %GROUP = arith.constant ${GROUP} : index
  %WINDOW = arith.constant ${WINDOW} : index
  %causal = arith.constant ${CAUSAL}
  %has_window = arith.constant ${HAS_WINDOW}
  %RIGHT = arith.constant ${RIGHT} : index
  %has_right = arith.constant ${HAS_RIGHT}
  %value_term = arith.constant ${VALUE_TERM}
  %NB = arith.constant ${VT_BUCKETS} : index
  %VT_FLOATS = arith.constant ${VT_FLOATS} : index

  // Per-thread register arrays: allocas in the entry block, so LLVM can
  // promote them once the loops over them are unrolled.
  %Qf = memref.alloca() : memref<${D16}x4x2x${T}>
  %Oacc = memref.alloca() : memref<${DV8}x4xf32>
  %Sacc = memref.alloca() : memref<${BN8}x4xf32>

  %tid = gpu.thread_id x
  // Split-KV (SPLITS > 1, decode): block x = query tile * SPLITS + split;
  // each split takes a share of the KV tiles and leaves a partial result.
  %bx = gpu.block_id x
  %qt = arith.divui %bx, %SPLITS : index
  %split = arith.remui %bx, %SPLITS : index
  %h = gpu.block_id y
  %b = gpu.block_id z
  %warp = arith.divui %tid, %c32 : index
  %lane = arith.remui %tid, %c32 : index
  %quad_row = arith.divui %lane, %c4 : index
  %lane4 = arith.remui %lane, %c4 : index
  %quad_col = arith.muli %lane4, %c2 : index
  %hk = arith.divui %h, %GROUP : index
  %i0 = arith.muli %qt, %BM : index
  // This lane's two query rows (tile-local) and their global indices.
  %wrow = arith.muli %warp, %c16 : index
  %r_lo = arith.addi %wrow, %quad_row : index
  %r_hi = arith.addi %r_lo, %c8 : index
  %i_lo = arith.addi %i0, %r_lo : index
  %i_hi = arith.addi %i0, %r_hi : index

  // Q tile -> shared memory (the K buffer, free until the first KV tile;
  // rows past SQ are 0) -> this warp's A fragments, kept in registers.
  %half_d = arith.divui %D, %c2 : index
  %q_pairs = arith.muli %half_d, %BM : index
  scf.for %e = %tid to %q_pairs step %THREADS {
    %r = arith.divui %e, %half_d : index
    %cp = arith.remui %e, %half_d : index
    %c = arith.muli %cp, %c2 : index
    %i = arith.addi %i0, %r : index
    %in = arith.cmpi ult, %i, %SQ : index
    %x = scf.if %in -> vector<2x${T}> {
      %l = vector.load %q[%b, %h, %i, %c] : !Q, vector<2x${T}>
      scf.yield %l : vector<2x${T}>
    } else {
      scf.yield %zero2 : vector<2x${T}>
    }
    vector.store %x, %Ks[%r, %c] : !QS, vector<2x${T}>
  }
  gpu.barrier
  // QK transform of the Q tile: one row per thread (strided when the tile
  // has more rows than the block has threads).
  scf.for %row = %tid to %BM step %THREADS {
    %qi = arith.addi %i0, %row : index
    %q_in = arith.cmpi ult, %qi, %SQ : index
    %q_rows = arith.select %q_in, %c1, %c0 : index
    %q_row = memref.subview %Ks[%row, 0] [1, ${D}] [1, 1] : !QS to !ROW
    attn.qk_transform %q_row, %q_rows, %qi, %b, %scratch lengths(%SQ, %SKV) : !ROW, !SCRATCH
  }
  gpu.barrier
  // The encodings' per-tile tables from the transformed Q rows (threads
  // split the rows) and the value term's VT = 0; both are read only after
  // the first KV tile's barrier.
  %q_left = arith.subi %SQ, %i0 : index
  %nq = arith.minui %q_left, %BM : index
  attn.query_tile_prologue %TSs, batch %b, head %h, start %i0, rows %nq share(%tid, %THREADS)
     ${ENCODING_OPERANDS} query(%Ks : !QS) : !TS
  scf.if %value_term {
    scf.for %e = %tid to %VT_FLOATS step %THREADS {
      memref.store %zero, %VTs[%e] : !VT
    }
  }
  %nD16 = arith.divui %D, %c16 : index
  %nS = arith.constant ${BN8} : index
  %nK16 = arith.constant ${BN16} : index
  scf.for %ks = %c0 to %nD16 step %c1 {
    %kc = arith.muli %ks, %c16 : index
    %col = arith.addi %kc, %quad_col : index
    %col8 = arith.addi %col, %c8 : index
    %a0 = vector.load %Ks[%r_lo, %col] : !QS, vector<2x${T}>
    %a1 = vector.load %Ks[%r_hi, %col] : !QS, vector<2x${T}>
    %a2 = vector.load %Ks[%r_lo, %col8] : !QS, vector<2x${T}>
    %a3 = vector.load %Ks[%r_hi, %col8] : !QS, vector<2x${T}>
    vector.store %a0, %Qf[%ks, %c0, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
    vector.store %a1, %Qf[%ks, %c1, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
    vector.store %a2, %Qf[%ks, %c2, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
    vector.store %a3, %Qf[%ks, %c3, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
  } {pejit.unroll}

  // Running max (m), lane-partial row sum (l) of both rows; O accumulators.
  %nO = arith.divui %DV, %c8 : index
  scf.for %n = %c0 to %nO step %c1 {
    scf.for %e = %c0 to %c4 step %c1 {
      memref.store %zero, %Oacc[%n, %e] : memref<${DV8}x4xf32>
    } {pejit.unroll}
  } {pejit.unroll}

  // KV tiles: causal stops after the last key the tile's last row sees; a
  // window starts at the first key its first row sees.
  %last_row0 = arith.addi %i0, %BM : index
  %last_row = arith.minui %last_row0, %SQ : index
  %kv_end0 = arith.addi %last_row, %OFF : index
  %kv_end1 = arith.minsi %kv_end0, %SKV : index
  %kv_end2 = arith.maxsi %kv_end1, %c0 : index
  // A right window ends at the last key the tile's last row sees.
  %right_end0 = arith.addi %kv_end0, %RIGHT : index
  %right_end1 = arith.minsi %right_end0, %SKV : index
  %right_end = arith.maxsi %right_end1, %c0 : index
  %kv_end3 = arith.select %has_right, %right_end, %SKV : index
  %kv_end = arith.select %causal, %kv_end2, %kv_end3 : index
  %win_begin0 = arith.addi %i0, %OFF : index
  %win_begin1 = arith.subi %win_begin0, %WINDOW : index
  %win_begin = arith.maxsi %win_begin1, %c0 : index
  %kv_begin = arith.select %has_window, %win_begin, %c0 : index
  %jt_begin = arith.divui %kv_begin, %BN : index
  %kv_end_up = arith.addi %kv_end, %BN : index
  %kv_end_up1 = arith.subi %kv_end_up, %c1 : index
  %jt_end0 = arith.divsi %kv_end_up1, %BN : index
  %jt_end1 = arith.maxsi %jt_end0, %jt_begin : index
  %n_tiles = arith.subi %jt_end1, %jt_begin : index
  %per_split0 = arith.addi %n_tiles, %SPLITS : index
  %per_split1 = arith.subi %per_split0, %c1 : index
  %per_split = arith.divui %per_split1, %SPLITS : index
  %my_first0 = arith.muli %split, %per_split : index
  %my_first1 = arith.addi %jt_begin, %my_first0 : index
  %my_first = arith.minsi %my_first1, %jt_end1 : index
  %my_end0 = arith.addi %my_first, %per_split : index
  %jt_end = arith.minsi %my_end0, %jt_end1 : index

  %half_dv = arith.divui %DV, %c2 : index
  %k_pairs = arith.muli %half_d, %BN : index
  %v_pairs = arith.muli %half_dv, %BN : index
  %final:4 = scf.for %jt = %my_first to %jt_end step %c1
      iter_args(%m_lo = %ninf, %m_hi = %ninf, %l_lo = %zero, %l_hi = %zero)
      -> (f32, f32, f32, f32) {
    %j0 = arith.muli %jt, %BN : index
    // The previous tile's readers are done before Ks, Vs are overwritten.
    gpu.barrier
    scf.for %e = %tid to %k_pairs step %THREADS {
      %r = arith.divui %e, %half_d : index
      %cp = arith.remui %e, %half_d : index
      %c = arith.muli %cp, %c2 : index
      %j = arith.addi %j0, %r : index
      %in = arith.cmpi ult, %j, %SKV : index
      %x = scf.if %in -> vector<2x${T}> {
        %l = vector.load %k[%b, %hk, %j, %c] : !K, vector<2x${T}>
        scf.yield %l : vector<2x${T}>
      } else {
        scf.yield %zero2 : vector<2x${T}>
      }
      vector.store %x, %Ks[%r, %c] : !QS, vector<2x${T}>
    }
    scf.for %e = %tid to %v_pairs step %THREADS {
      %r = arith.divui %e, %half_dv : index
      %cp = arith.remui %e, %half_dv : index
      %c = arith.muli %cp, %c2 : index
      %j = arith.addi %j0, %r : index
      %in = arith.cmpi ult, %j, %SKV : index
      %x = scf.if %in -> vector<2x${T}> {
        %l = vector.load %v[%b, %hk, %j, %c] : !V, vector<2x${T}>
        scf.yield %l : vector<2x${T}>
      } else {
        scf.yield %zero2 : vector<2x${T}>
      }
      vector.store %x, %Vs[%r, %c] : !VS, vector<2x${T}>
    }
    gpu.barrier
    scf.for %row = %tid to %BN step %THREADS {
      %kj = arith.addi %j0, %row : index
      %k_in = arith.cmpi ult, %kj, %SKV : index
      %k_rows = arith.select %k_in, %c1, %c0 : index
      %k_row = memref.subview %Ks[%row, 0] [1, ${D}] [1, 1] : !QS to !ROW
      attn.qk_transform %k_row, %k_rows, %kj, %b, %scratch key lengths(%SQ, %SKV)
          : !ROW, !SCRATCH
    }
    gpu.barrier

    // S = Qs . Ks^T: per 16-wide step of d, one A fragment (this warp's 16
    // rows) against 8 B fragments (the tile's 64 keys, 8 per n-tile).
    scf.for %n = %c0 to %nS step %c1 {
      scf.for %e = %c0 to %c4 step %c1 {
        memref.store %zero, %Sacc[%n, %e] : memref<${BN8}x4xf32>
      } {pejit.unroll}
    } {pejit.unroll}
    scf.for %ks = %c0 to %nD16 step %c1 {
      %kc = arith.muli %ks, %c16 : index
      %col = arith.addi %kc, %quad_col : index
      %col8 = arith.addi %col, %c8 : index
      %a0 = vector.load %Qf[%ks, %c0, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
      %a1 = vector.load %Qf[%ks, %c1, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
      %a2 = vector.load %Qf[%ks, %c2, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
      %a3 = vector.load %Qf[%ks, %c3, %c0] : memref<${D16}x4x2x${T}>, vector<2x${T}>
      %fa0 = vector.insert %a0, %za [0] : vector<2x${T}> into !A
      %fa1 = vector.insert %a1, %fa0 [1] : vector<2x${T}> into !A
      %fa2 = vector.insert %a2, %fa1 [2] : vector<2x${T}> into !A
      %fa = vector.insert %a3, %fa2 [3] : vector<2x${T}> into !A
      scf.for %n = %c0 to %nS step %c1 {
        %n8 = arith.muli %n, %c8 : index
        %key = arith.addi %n8, %quad_row : index
        %b0 = vector.load %Ks[%key, %col] : !QS, vector<2x${T}>
        %b1 = vector.load %Ks[%key, %col8] : !QS, vector<2x${T}>
        %fb0 = vector.insert %b0, %zb [0] : vector<2x${T}> into !BF
        %fb = vector.insert %b1, %fb0 [1] : vector<2x${T}> into !BF
        %s0 = memref.load %Sacc[%n, %c0] : memref<${BN8}x4xf32>
        %s1 = memref.load %Sacc[%n, %c1] : memref<${BN8}x4xf32>
        %s2 = memref.load %Sacc[%n, %c2] : memref<${BN8}x4xf32>
        %s3 = memref.load %Sacc[%n, %c3] : memref<${BN8}x4xf32>
        %acc = vector.from_elements %s0, %s1, %s2, %s3 : !C
        %d = func.call @${MMA}(%fa, %fb, %acc) : (!A, !BF, !C) -> !C
        %d0 = vector.extract %d[0, 0] : f32 from !C
        %d1 = vector.extract %d[0, 1] : f32 from !C
        %d2 = vector.extract %d[1, 0] : f32 from !C
        %d3 = vector.extract %d[1, 1] : f32 from !C
        memref.store %d0, %Sacc[%n, %c0] : memref<${BN8}x4xf32>
        memref.store %d1, %Sacc[%n, %c1] : memref<${BN8}x4xf32>
        memref.store %d2, %Sacc[%n, %c2] : memref<${BN8}x4xf32>
        memref.store %d3, %Sacc[%n, %c3] : memref<${BN8}x4xf32>
      } {pejit.unroll}
    } {pejit.unroll}

    // Scale, score_mod (pointwise, one score per lane), mask; element e of
    // n-tile n is row (e < 2 ? r_lo : r_hi), key j0 + 8n + quad_col + e % 2.
    %tile_max:2 = scf.for %n = %c0 to %nS step %c1 iter_args(%mx_lo = %ninf, %mx_hi = %ninf)
        -> (f32, f32) {
      %mxs:2 = scf.for %e = %c0 to %c4 step %c1 iter_args(%ml = %mx_lo, %mh = %mx_hi)
          -> (f32, f32) {
        %hi = arith.cmpi uge, %e, %c2 : index
        %i = arith.select %hi, %i_hi, %i_lo : index
        %e2 = arith.remui %e, %c2 : index
        %n8 = arith.muli %n, %c8 : index
        %jl0 = arith.addi %n8, %quad_col : index
        %jl = arith.addi %jl0, %e2 : index
        %j = arith.addi %j0, %jl : index
        %s_raw = memref.load %Sacc[%n, %e] : memref<${BN8}x4xf32>
        %s_scaled = arith.mulf %s_raw, %scale : f32
        %i_i = arith.index_cast %i : index to i32
        %j_i = arith.index_cast %j : index to i32
        %s = attn.score_mod %s_scaled, batch %b, head %h, query %i_i, key %j_i${ENCODING_OPERANDS}
            tile(%TSs : !TS, %i0) positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV)
            : f32, i32
        // key j is visible to row i iff j < SKV, (causal) j <= i + OFF,
        // (window) j >= i + OFF - WINDOW and (right) j <= i + OFF + RIGHT.
        %diag = arith.addi %i, %OFF : index
        %key_in = arith.cmpi ult, %j, %SKV : index
        %after = arith.cmpi sgt, %j, %diag : index
        %hidden_c = arith.andi %causal, %after : i1
        %win_lo = arith.subi %diag, %WINDOW : index
        %before = arith.cmpi slt, %j, %win_lo : index
        %hidden_w = arith.andi %has_window, %before : i1
        %right_hi = arith.addi %diag, %RIGHT : index
        %past_right = arith.cmpi sgt, %j, %right_hi : index
        %hidden_r = arith.andi %has_right, %past_right : i1
        %hidden_cr = arith.ori %hidden_c, %hidden_r : i1
        %hidden0 = arith.ori %hidden_cr, %hidden_w : i1
        %visible0 = arith.xori %hidden0, %true : i1
        %visible = arith.andi %visible0, %key_in : i1
        %sm = arith.select %visible, %s, %ninf : f32
        memref.store %sm, %Sacc[%n, %e] : memref<${BN8}x4xf32>
        %ml1 = arith.maximumf %ml, %sm : f32
        %mh1 = arith.maximumf %mh, %sm : f32
        %ml2 = arith.select %hi, %ml, %ml1 : f32
        %mh2 = arith.select %hi, %mh1, %mh : f32
        scf.yield %ml2, %mh2 : f32, f32
      } {pejit.unroll}
      scf.yield %mxs#0, %mxs#1 : f32, f32
    } {pejit.unroll}
    // Row max over the quad (the 4 lanes sharing a row).
    %x1_lo, %v1_lo = gpu.shuffle xor %tile_max#0, %i1c, %i32c : f32
    %m1_lo = arith.maximumf %tile_max#0, %x1_lo : f32
    %x2_lo, %v2_lo = gpu.shuffle xor %m1_lo, %i2c, %i32c : f32
    %mt_lo = arith.maximumf %m1_lo, %x2_lo : f32
    %x1_hi, %v1_hi = gpu.shuffle xor %tile_max#1, %i1c, %i32c : f32
    %m1_hi = arith.maximumf %tile_max#1, %x1_hi : f32
    %x2_hi, %v2_hi = gpu.shuffle xor %m1_hi, %i2c, %i32c : f32
    %mt_hi = arith.maximumf %m1_hi, %x2_hi : f32
    %mn_lo = arith.maximumf %m_lo, %mt_lo : f32
    %mn_hi = arith.maximumf %m_hi, %mt_hi : f32
    // All keys masked so far: subtract 0 instead of -inf (no NaN).
    %none_lo = arith.cmpf oeq, %mn_lo, %ninf : f32
    %none_hi = arith.cmpf oeq, %mn_hi, %ninf : f32
    %ms_lo = arith.select %none_lo, %zero, %mn_lo : f32
    %ms_hi = arith.select %none_hi, %zero, %mn_hi : f32
    // (x - m') log2 e, the max subtracted first: the max score's exponent is
    // exactly 0 at any magnitude. s log2e - m' log2e, which NVPTX contracts
    // into fma(s, log2e, -m' log2e), loses m' log2e's low bits once |m'| is
    // large (1e9 and up), and whole rows of P underflow to 0.
    %aarg_lo0 = arith.subf %m_lo, %ms_lo : f32
    %aarg_lo = arith.mulf %aarg_lo0, %log2e : f32
    %aarg_hi0 = arith.subf %m_hi, %ms_hi : f32
    %aarg_hi = arith.mulf %aarg_hi0, %log2e : f32
    %alpha_lo = func.call @exp2(%aarg_lo) : (f32) -> f32
    %alpha_hi = func.call @exp2(%aarg_hi) : (f32) -> f32

    // P = 2^((s - m') log2 e) in place of S; lane-partial row sums.
    %psum:2 = scf.for %n = %c0 to %nS step %c1 iter_args(%pl = %zero, %ph = %zero) -> (f32, f32) {
      %ps:2 = scf.for %e = %c0 to %c4 step %c1 iter_args(%sl = %pl, %sh = %ph) -> (f32, f32) {
        %hi = arith.cmpi uge, %e, %c2 : index
        %ms = arith.select %hi, %ms_hi, %ms_lo : f32
        %s = memref.load %Sacc[%n, %e] : memref<${BN8}x4xf32>
        %sd = arith.subf %s, %ms : f32
        %arg = arith.mulf %sd, %log2e : f32
        %p = func.call @exp2(%arg) : (f32) -> f32
        memref.store %p, %Sacc[%n, %e] : memref<${BN8}x4xf32>
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

    // Value term: rescale VT by alpha, add this tile's P by bucket.
    scf.if %value_term {
      func.call @pejit_value_term_tile(%VTs, %Sacc, %alpha_lo, %alpha_hi, %b, %h, %j0, %i_lo,
                                       %i_hi, %r_lo, %r_hi, %lane4, %quad_col, %qpos_arg,
                                       %kpos_arg, %SQ, %SKV${ENCODING_CALL_ARGS})
          : (!VT, memref<${BN8}x4xf32>, f32, f32, index, index, index, index, index, index,
             index, index, index, !PI, !PI, index, index${ENCODING_CALL_TYPES}) -> ()
    }

    // O = O alpha + P . Vs: the A fragment of keys [16kk, 16kk + 16) is
    // n-tiles 2kk and 2kk + 1 of P (same lanes, same rows); B fragments of
    // V gather two keys per register (no ldmatrix.trans yet).
    scf.for %n = %c0 to %nO step %c1 {
      scf.for %e = %c0 to %c4 step %c1 {
        %hi = arith.cmpi uge, %e, %c2 : index
        %alpha = arith.select %hi, %alpha_hi, %alpha_lo : f32
        %x = memref.load %Oacc[%n, %e] : memref<${DV8}x4xf32>
        %y = arith.mulf %x, %alpha : f32
        memref.store %y, %Oacc[%n, %e] : memref<${DV8}x4xf32>
      } {pejit.unroll}
    } {pejit.unroll}
    scf.for %kk = %c0 to %nK16 step %c1 {
      %n_a = arith.muli %kk, %c2 : index
      %n_b = arith.addi %n_a, %c1 : index
      %p00 = memref.load %Sacc[%n_a, %c0] : memref<${BN8}x4xf32>
      %p01 = memref.load %Sacc[%n_a, %c1] : memref<${BN8}x4xf32>
      %p02 = memref.load %Sacc[%n_a, %c2] : memref<${BN8}x4xf32>
      %p03 = memref.load %Sacc[%n_a, %c3] : memref<${BN8}x4xf32>
      %p10 = memref.load %Sacc[%n_b, %c0] : memref<${BN8}x4xf32>
      %p11 = memref.load %Sacc[%n_b, %c1] : memref<${BN8}x4xf32>
      %p12 = memref.load %Sacc[%n_b, %c2] : memref<${BN8}x4xf32>
      %p13 = memref.load %Sacc[%n_b, %c3] : memref<${BN8}x4xf32>
      %pv = vector.from_elements %p00, %p01, %p02, %p03, %p10, %p11, %p12, %p13 : vector<4x2xf32>
      %pa = arith.truncf %pv : vector<4x2xf32> to !A
      %k0 = arith.muli %kk, %c16 : index
      %key0 = arith.addi %k0, %quad_col : index
      %key1 = arith.addi %key0, %c1 : index
      %key8 = arith.addi %key0, %c8 : index
      %key9 = arith.addi %key0, %c9 : index
      scf.for %n = %c0 to %nO step %c1 {
        %n8 = arith.muli %n, %c8 : index
        %vc = arith.addi %n8, %quad_row : index
        %v0 = memref.load %Vs[%key0, %vc] : !VS
        %v1 = memref.load %Vs[%key1, %vc] : !VS
        %v8 = memref.load %Vs[%key8, %vc] : !VS
        %v9 = memref.load %Vs[%key9, %vc] : !VS
        %fb = vector.from_elements %v0, %v1, %v8, %v9 : !BF
        %o0 = memref.load %Oacc[%n, %c0] : memref<${DV8}x4xf32>
        %o1 = memref.load %Oacc[%n, %c1] : memref<${DV8}x4xf32>
        %o2 = memref.load %Oacc[%n, %c2] : memref<${DV8}x4xf32>
        %o3 = memref.load %Oacc[%n, %c3] : memref<${DV8}x4xf32>
        %acc = vector.from_elements %o0, %o1, %o2, %o3 : !C
        %d = func.call @${MMA}(%pa, %fb, %acc) : (!A, !BF, !C) -> !C
        %d0 = vector.extract %d[0, 0] : f32 from !C
        %d1 = vector.extract %d[0, 1] : f32 from !C
        %d2 = vector.extract %d[1, 0] : f32 from !C
        %d3 = vector.extract %d[1, 1] : f32 from !C
        memref.store %d0, %Oacc[%n, %c0] : memref<${DV8}x4xf32>
        memref.store %d1, %Oacc[%n, %c1] : memref<${DV8}x4xf32>
        memref.store %d2, %Oacc[%n, %c2] : memref<${DV8}x4xf32>
        memref.store %d3, %Oacc[%n, %c3] : memref<${DV8}x4xf32>
      } {pejit.unroll}
    } {pejit.unroll}
    scf.yield %mn_lo, %mn_hi, %ln_lo, %ln_hi : f32, f32, f32, f32
  }

  // Value term: O += VT . rows, in the scale of O (before the division).
  scf.if %value_term {
    func.call @pejit_value_term_finish(%VTs, %Oacc, %b, %h, %r_lo, %r_hi,
                                       %quad_col${ENCODING_CALL_ARGS})
        : (!VT, memref<${DV8}x4xf32>, index, index, index, index, index${ENCODING_CALL_TYPES})
        -> ()
  }

  // O = O / l with l summed over the quad; a row that saw no key is 0.
  %y1_lo, %w1_lo = gpu.shuffle xor %final#2, %i1c, %i32c : f32
  %s1_lo = arith.addf %final#2, %y1_lo : f32
  %y2_lo, %w2_lo = gpu.shuffle xor %s1_lo, %i2c, %i32c : f32
  %lt_lo = arith.addf %s1_lo, %y2_lo : f32
  %y1_hi, %w1_hi = gpu.shuffle xor %final#3, %i1c, %i32c : f32
  %s1_hi = arith.addf %final#3, %y1_hi : f32
  %y2_hi, %w2_hi = gpu.shuffle xor %s1_hi, %i2c, %i32c : f32
  %lt_hi = arith.addf %s1_hi, %y2_hi : f32
  %one = arith.constant 1.0 : f32
  %empty_lo = arith.cmpf oeq, %lt_lo, %zero : f32
  %empty_hi = arith.cmpf oeq, %lt_hi, %zero : f32
  %inv_lo0 = arith.divf %one, %lt_lo : f32
  %inv_hi0 = arith.divf %one, %lt_hi : f32
  %inv_lo = arith.select %empty_lo, %zero, %inv_lo0 : f32
  %inv_hi = arith.select %empty_hi, %zero, %inv_hi0 : f32
  %row_in_lo = arith.cmpi ult, %i_lo, %SQ : index
  %row_in_hi = arith.cmpi ult, %i_hi, %SQ : index
  %split_kv = arith.cmpi ugt, %SPLITS, %c1 : index
  scf.if %split_kv {
    // Partial result of this split: unnormalized O, row max m, row sum l.
    scf.for %n = %c0 to %nO step %c1 {
      %n8 = arith.muli %n, %c8 : index
      %col = arith.addi %n8, %quad_col : index
      %col1 = arith.addi %col, %c1 : index
      scf.if %row_in_lo {
        %o0 = memref.load %Oacc[%n, %c0] : memref<${DV8}x4xf32>
        %o1 = memref.load %Oacc[%n, %c1] : memref<${DV8}x4xf32>
        memref.store %o0, %wo[%b, %h, %split, %i_lo, %col] : !WO
        memref.store %o1, %wo[%b, %h, %split, %i_lo, %col1] : !WO
      }
      scf.if %row_in_hi {
        %o2 = memref.load %Oacc[%n, %c2] : memref<${DV8}x4xf32>
        %o3 = memref.load %Oacc[%n, %c3] : memref<${DV8}x4xf32>
        memref.store %o2, %wo[%b, %h, %split, %i_hi, %col] : !WO
        memref.store %o3, %wo[%b, %h, %split, %i_hi, %col1] : !WO
      }
    } {pejit.unroll}
    %quad_lead = arith.cmpi eq, %lane4, %c0 : index
    %write_lo = arith.andi %quad_lead, %row_in_lo : i1
    %write_hi = arith.andi %quad_lead, %row_in_hi : i1
    scf.if %write_lo {
      memref.store %final#0, %wm[%b, %h, %split, %i_lo] : !WML
      memref.store %lt_lo, %wl[%b, %h, %split, %i_lo] : !WML
    }
    scf.if %write_hi {
      memref.store %final#1, %wm[%b, %h, %split, %i_hi] : !WML
      memref.store %lt_hi, %wl[%b, %h, %split, %i_hi] : !WML
    }
  } else {
    scf.for %n = %c0 to %nO step %c1 {
      %n8 = arith.muli %n, %c8 : index
      %col = arith.addi %n8, %quad_col : index
      scf.if %row_in_lo {
        %o0 = memref.load %Oacc[%n, %c0] : memref<${DV8}x4xf32>
        %o1 = memref.load %Oacc[%n, %c1] : memref<${DV8}x4xf32>
        %x0 = arith.mulf %o0, %inv_lo : f32
        %x1 = arith.mulf %o1, %inv_lo : f32
        %pair = vector.from_elements %x0, %x1 : vector<2xf32>
        %out = func.call @${CVT}(%pair) : (vector<2xf32>) -> vector<2x${OT}>
        vector.store %out, %o[%b, %h, %i_lo, %col] : !O, vector<2x${OT}>
      }
      scf.if %row_in_hi {
        %o2 = memref.load %Oacc[%n, %c2] : memref<${DV8}x4xf32>
        %o3 = memref.load %Oacc[%n, %c3] : memref<${DV8}x4xf32>
        %x2 = arith.mulf %o2, %inv_hi : f32
        %x3 = arith.mulf %o3, %inv_hi : f32
        %pair = vector.from_elements %x2, %x3 : vector<2xf32>
        %out = func.call @${CVT}(%pair) : (vector<2xf32>) -> vector<2x${OT}>
        vector.store %out, %o[%b, %h, %i_hi, %col] : !O, vector<2x${OT}>
      }
    } {pejit.unroll}
  }
  gpu.return
}

}
}
