// Steps of the NVIDIA attention backward (templates/nvidia/
// mma_attention_backward.mlir), put in place of its `// @pejit-blocks`
// line with mma_math.mlir's and mma_backward_blocks.mlir's: the ranges a
// block walks, the gradient weights of one score, register tiles set to 0,
// quad reductions, the f32 row tiles of the transform and finish kernels,
// and the encodings' operand gradients.
//
// Operand gradients (T5's table, ALiBi's slopes, the RoPE's scale and
// frequencies) without atomics: each warp of the q and finish kernels
// owns a partial of GRAD_FLOATS floats in global memory (its slot), and
// its 32 lanes add their contributions to it one lane at a time
// (bar.warp.sync between lanes), so every sum has one order. The runtime
// sums the slots in slot order, in f64: q blocks first, then finish
// blocks, each block's warps in order.

// The W-key steps [begin, end) rows [i0, i0 + 64) see (the forward's rule:
// causal ends at the last row's diagonal, a right window past it, a left
// window starts at the first row's first key).
func.func private @key_steps(%i0: index, %SQ: index, %SKV: index) -> (index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %W = arith.constant ${W} : index
  %causal = arith.constant ${CAUSAL}
  %has_window = arith.constant ${HAS_WINDOW}
  %has_right = arith.constant ${HAS_RIGHT}
  %WINDOW = arith.constant ${WINDOW} : index
  %RIGHT = arith.constant ${RIGHT} : index
  %OFF = arith.subi %SKV, %SQ : index
  %last_row0 = arith.addi %i0, %c64 : index
  %last_row = arith.minui %last_row0, %SQ : index
  %end0 = arith.addi %last_row, %OFF : index
  %end1 = arith.minsi %end0, %SKV : index
  %end2 = arith.maxsi %end1, %c0 : index
  %right0 = arith.addi %end0, %RIGHT : index
  %right1 = arith.minsi %right0, %SKV : index
  %right = arith.maxsi %right1, %c0 : index
  %end3 = arith.select %has_right, %right, %SKV : index
  %end = arith.select %causal, %end2, %end3 : index
  %win0 = arith.addi %i0, %OFF : index
  %win1 = arith.subi %win0, %WINDOW : index
  %win = arith.maxsi %win1, %c0 : index
  %begin = arith.select %has_window, %win, %c0 : index
  %first = arith.divui %begin, %W : index
  %up0 = arith.addi %end, %W : index
  %up = arith.subi %up0, %c1 : index
  %last0 = arith.divsi %up, %W : index
  %last = arith.maxsi %last0, %first : index
  return %first, %last : index, index
}

// The W-row steps [begin, end) of the query rows that see a key of
// [j0, j0 + 64): the mask solved for i (causal i >= j - OFF, right window
// i >= j - OFF - RIGHT, left window i <= j - OFF + WINDOW).
func.func private @query_steps(%j0: index, %SQ: index, %SKV: index) -> (index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %W = arith.constant ${W} : index
  %causal = arith.constant ${CAUSAL}
  %has_window = arith.constant ${HAS_WINDOW}
  %has_right = arith.constant ${HAS_RIGHT}
  %WINDOW = arith.constant ${WINDOW} : index
  %RIGHT = arith.constant ${RIGHT} : index
  %OFF = arith.subi %SKV, %SQ : index
  %from_c0 = arith.subi %j0, %OFF : index
  %from_c = arith.maxsi %from_c0, %c0 : index
  %from_r0 = arith.subi %from_c0, %RIGHT : index
  %from_r = arith.maxsi %from_r0, %c0 : index
  %begin0 = arith.select %has_right, %from_r, %c0 : index
  %begin = arith.select %causal, %from_c, %begin0 : index
  %j1a = arith.addi %j0, %c64 : index
  %j1 = arith.minui %j1a, %SKV : index
  %to0 = arith.subi %j1, %OFF : index
  %to1 = arith.addi %to0, %WINDOW : index
  %to2 = arith.minsi %to1, %SQ : index
  %to = arith.maxsi %to2, %c0 : index
  %end = arith.select %has_window, %to, %SQ : index
  %first = arith.divui %begin, %W : index
  %up0 = arith.addi %end, %W : index
  %up = arith.subi %up0, %c1 : index
  %last0 = arith.divsi %up, %W : index
  %last = arith.maxsi %last0, %first : index
  return %first, %last : index, index
}

// base + 8 n + quad_col + e % 2: the column of element e of n-tile n.
func.func private @step_column(%base: index, %n: index, %e: index, %quad_col: index) -> index {
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %n8 = arith.muli %n, %c8 : index
  %e2 = arith.remui %e, %c2 : index
  %x0 = arith.addi %base, %n8 : index
  %x1 = arith.addi %x0, %quad_col : index
  %x = arith.addi %x1, %e2 : index
  return %x : index
}

// One score's weights from its masked score s, dE/dS factor f and dP:
//   P = exp(s - lse_i) (0 where s = -inf),  dS = P (dP - D_i),  dE = f dS
// with D_i and lse_i from the rows phase ([2, B, HQ, SQ]; a row past SQ
// reads row SQ - 1, and its s is -inf). A row that sees no key has lse =
// -inf: it is taken as 0, so its P is exp(-inf) = 0, never NaN.
func.func private @weights(%s: f32, %f: f32, %dp: f32, %b: index, %h: index, %i: index,
                           %rows_arg: !PF, %SQ: index, %B: index) -> (f32, f32, f32) {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %log2e = arith.constant 1.44269504088896 : f32
  %HQ = arith.constant ${HQ} : index
  %bh = arith.muli %B, %HQ : index
  %plane = arith.muli %bh, %SQ : index
  %size = arith.addi %plane, %plane : index
  %rows = memref.reinterpret_cast %rows_arg to offset: [0], sizes: [%size], strides: [1]
      : !PF to memref<?xf32>
  %last = arith.subi %SQ, %c1 : index
  %row = arith.minui %i, %last : index
  %at0 = arith.muli %b, %HQ : index
  %at1 = arith.addi %at0, %h : index
  %at2 = arith.muli %at1, %SQ : index
  %at = arith.addi %at2, %row : index
  %at_lse = arith.addi %at, %plane : index
  %d = memref.load %rows[%at] : memref<?xf32>
  %lse = memref.load %rows[%at_lse] : memref<?xf32>
  %none = arith.cmpf oeq, %lse, %ninf : f32
  %lse_s = arith.select %none, %zero, %lse : f32
  %sd = arith.subf %s, %lse_s : f32
  %arg = arith.mulf %sd, %log2e : f32
  %p = func.call @exp2(%arg) : (f32) -> f32
  %g = arith.subf %dp, %d : f32
  %ds = arith.mulf %p, %g : f32
  %de = arith.mulf %ds, %f : f32
  return %p, %de, %ds : f32, f32, f32
}

// Max and sum over the 4 lanes of a quad (the lanes sharing an MMA row).
func.func private @quad_max(%x: f32) -> f32 {
  %i1c = arith.constant 1 : i32
  %i2c = arith.constant 2 : i32
  %i32c = arith.constant 32 : i32
  %y1, %v1 = gpu.shuffle xor %x, %i1c, %i32c : f32
  %m1 = arith.maximumf %x, %y1 : f32
  %y2, %v2 = gpu.shuffle xor %m1, %i2c, %i32c : f32
  %m2 = arith.maximumf %m1, %y2 : f32
  return %m2 : f32
}

func.func private @quad_sum(%x: f32) -> f32 {
  %i1c = arith.constant 1 : i32
  %i2c = arith.constant 2 : i32
  %i32c = arith.constant 32 : i32
  %y1, %v1 = gpu.shuffle xor %x, %i1c, %i32c : f32
  %s1 = arith.addf %x, %y1 : f32
  %y2, %v2 = gpu.shuffle xor %s1, %i2c, %i32c : f32
  %s2 = arith.addf %s1, %y2 : f32
  return %s2 : f32
}

// lse = m + log l; -inf where the row saw no key (l = 0).
func.func private @log_sum(%m: f32, %l: f32) -> f32 {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %empty = arith.cmpf oeq, %l, %zero : f32
  %lg = math.log %l : f32
  %x = arith.addf %m, %lg : f32
  %r = arith.select %empty, %ninf, %x : f32
  return %r : f32
}

func.func private @zero_s(%acc: !SACC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n_end = arith.constant ${W8} : index
  %zero = arith.constant 0.0 : f32
  scf.for %n = %c0 to %n_end step %c1 {
    scf.for %e = %c0 to %c4 step %c1 {
      memref.store %zero, %acc[%n, %e] : !SACC
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

func.func private @zero_d(%acc: !DACC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n_end = arith.constant ${D8} : index
  %zero = arith.constant 0.0 : f32
  scf.for %n = %c0 to %n_end step %c1 {
    scf.for %e = %c0 to %c4 step %c1 {
      memref.store %zero, %acc[%n, %e] : !DACC
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

func.func private @zero_v(%acc: !VACC) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %n_end = arith.constant ${DV8} : index
  %zero = arith.constant 0.0 : f32
  scf.for %n = %c0 to %n_end step %c1 {
    scf.for %e = %c0 to %c4 step %c1 {
      memref.store %zero, %acc[%n, %e] : !VACC
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

// FT[r, c] = src[first + r D + c] (f32) for r < valid.
func.func private @stage_f(%dst: !FT, %src_arg: !PF, %first: index, %valid: index, %tid: index) {
  %C = arith.constant ${D} : index
  %THREADS = arith.constant ${THREADS} : index
  %cells = arith.muli %C, %valid : index
  %span = arith.addi %first, %cells : index
  %src = memref.reinterpret_cast %src_arg to offset: [0], sizes: [%span], strides: [1]
      : !PF to memref<?xf32>
  scf.for %e = %tid to %cells step %THREADS {
    %r = arith.divui %e, %C : index
    %c = arith.remui %e, %C : index
    %at = arith.addi %first, %e : index
    %x = memref.load %src[%at] : memref<?xf32>
    memref.store %x, %dst[%r, %c] : !FT
  }
  return
}

// dst[first + r D + c] = FT[r, c] rounded to T, for r < valid.
func.func private @unstage_f(%src: !FT, %dst_arg: !PT, %first: index, %valid: index,
                             %tid: index) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %C = arith.constant ${D} : index
  %THREADS = arith.constant ${THREADS} : index
  %half = arith.divui %C, %c2 : index
  %pairs = arith.muli %half, %valid : index
  %span0 = arith.muli %valid, %C : index
  %span = arith.addi %first, %span0 : index
  %dst = memref.reinterpret_cast %dst_arg to offset: [0], sizes: [%span], strides: [1]
      : !PT to memref<?x${T}>
  scf.for %e = %tid to %pairs step %THREADS {
    %r = arith.divui %e, %half : index
    %cp = arith.remui %e, %half : index
    %c = arith.muli %cp, %c2 : index
    %c_1 = arith.addi %c, %c1 : index
    %x0 = memref.load %src[%r, %c] : !FT
    %x1 = memref.load %src[%r, %c_1] : !FT
    %pair = vector.from_elements %x0, %x1 : vector<2xf32>
    %out = func.call @out_${T}(%pair) : (vector<2xf32>) -> vector<2x${T}>
    %rc = arith.muli %r, %C : index
    %at0 = arith.addi %first, %rc : index
    %at = arith.addi %at0, %c : index
    vector.store %out, %dst[%at] : memref<?x${T}>, vector<2x${T}>
  }
  return
}

// The q blocks and the floats of all partials: [q blocks, 4 warps] then
// [finish blocks, 4 warps], GRAD_FLOATS each (the runtime's plan, too).
func.func private @partial_slots(%SQ: index, %SKV: index, %B: index) -> (index, index) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %HQ = arith.constant ${HQ} : index
  %HKV = arith.constant ${HKV} : index
  %GF = arith.constant ${GRAD_FLOATS} : index
  %q0 = arith.addi %SQ, %c64 : index
  %q1 = arith.subi %q0, %c1 : index
  %q_tiles = arith.divui %q1, %c64 : index
  %qb0 = arith.muli %q_tiles, %HQ : index
  %qb = arith.muli %qb0, %B : index
  %longest = arith.maxui %SQ, %SKV : index
  %f0 = arith.addi %longest, %c64 : index
  %f1 = arith.subi %f0, %c1 : index
  %f_tiles = arith.divui %f1, %c64 : index
  %sides = arith.addi %HQ, %HKV : index
  %fin0 = arith.muli %f_tiles, %sides : index
  %fin = arith.muli %fin0, %B : index
  %blocks = arith.addi %qb, %fin : index
  %warps = arith.muli %blocks, %c4 : index
  %floats = arith.muli %warps, %GF : index
  return %qb, %floats : index, index
}

// The first float of warp `warp`'s slot in block `blk` (numbered as in
// @partial_slots).
func.func private @slot_base(%blk: index, %warp: index) -> index {
  %c4 = arith.constant 4 : index
  %GF = arith.constant ${GRAD_FLOATS} : index
  %w0 = arith.muli %blk, %c4 : index
  %w = arith.addi %w0, %warp : index
  %at = arith.muli %w, %GF : index
  return %at : index
}

func.func private @zero_slot(%part_arg: !PF, %floats: index, %base: index, %lane: index) {
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  %GF = arith.constant ${GRAD_FLOATS} : index
  %part = memref.reinterpret_cast %part_arg to offset: [0], sizes: [%floats], strides: [1]
      : !PF to memref<?xf32>
  scf.for %o = %lane to %GF step %c32 {
    %at = arith.addi %base, %o : index
    memref.store %zero, %part[%at] : memref<?xf32>
  }
  return
}

// One score's gradient dS into the score biases' operand gradients
// (attn.score_grad: T5's table, ALiBi's slopes), lane by lane into this
// warp's slot. Scores past the lengths add nothing.
func.func private @score_grads(%ds: f32, %b: index, %h: index, %i: index, %j: index,
                               %lane: index, %part_arg: !PF, %floats: index, %pbase: index,
                               %qpos_arg: !PI, %kpos_arg: !PI, %SQ: index,
                               %SKV: index${ENCODING_ARGS}) {
${POSITION_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %all = arith.constant -1 : i32
  %part = memref.reinterpret_cast %part_arg to offset: [0], sizes: [%floats], strides: [1]
      : !PF to memref<?xf32>
  %row_in = arith.cmpi ult, %i, %SQ : index
  %key_in = arith.cmpi ult, %j, %SKV : index
  %in = arith.andi %row_in, %key_in : i1
  %i_i = arith.index_cast %i : index to i32
  %j_i = arith.index_cast %j : index to i32
  scf.for %l = %c0 to %c32 step %c1 {
    %mine = arith.cmpi eq, %lane, %l : index
    %go = arith.andi %mine, %in : i1
    scf.if %go {
      attn.score_grad %ds, batch %b, head %h, query %i_i, key %j_i${ENCODING_OPERANDS}
          partial(%part : memref<?xf32>, %pbase) offsets ${GRAD_OFFSETS}
          positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV)
    }
    nvvm.bar.warp.sync %all : i32
  }
  return
}

// The QK transform's operand gradients (attn.qk_transform_grad: the RoPE's
// scale and frequencies) from this thread's row of dQ' or dK' (FT, before
// the adjoint) and of Q' or K' in f32 (tqf, tkf), lane by lane into this
// warp's slot. Threads past the block's rows add nothing.
func.func private @transform_grads(%FTs: !FT, %tid: index, %valid: index, %i0: index,
                                   %first: index, %b: index, %key: i1, %lane: index,
                                   %tqf_arg: !PF, %tkf_arg: !PF, %part_arg: !PF, %floats: index,
                                   %pbase: index, %qpos_arg: !PI, %kpos_arg: !PI, %SQ: index,
                                   %SKV: index${ENCODING_ARGS}) {
${POSITION_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %c63 = arith.constant 63 : index
  %D = arith.constant ${D} : index
  %all = arith.constant -1 : i32
  %part = memref.reinterpret_cast %part_arg to offset: [0], sizes: [%floats], strides: [1]
      : !PF to memref<?xf32>
  %has_row = arith.cmpi ult, %tid, %valid : index
  %r = arith.minui %tid, %c63 : index
  %i = arith.addi %i0, %r : index
  %grad = memref.subview %FTs[%r, 0] [1, ${D}] [1, 1] : !FT to !FROW
  %rd = arith.muli %r, %D : index
  %at = arith.addi %first, %rd : index
  %q_row = memref.reinterpret_cast %tqf_arg to offset: [%at], sizes: [1, ${D}], strides: [${D}, 1]
      : !PF to !GROW
  %k_row = memref.reinterpret_cast %tkf_arg to offset: [%at], sizes: [1, ${D}], strides: [${D}, 1]
      : !PF to !GROW
  scf.for %l = %c0 to %c32 step %c1 {
    %mine = arith.cmpi eq, %lane, %l : index
    %go = arith.andi %mine, %has_row : i1
    scf.if %go {
      scf.if %key {
        attn.qk_transform_grad %grad, %k_row, %c1, %i, %b key positions(%kpos : !KPOS)${ENCODING_OPERANDS}
            partial(%part : memref<?xf32>, %pbase) offsets ${GRAD_OFFSETS} lengths(%SQ, %SKV)
            : !FROW, !GROW
      } else {
        attn.qk_transform_grad %grad, %q_row, %c1, %i, %b positions(%qpos : !QPOS)${ENCODING_OPERANDS}
            partial(%part : memref<?xf32>, %pbase) offsets ${GRAD_OFFSETS} lengths(%SQ, %SKV)
            : !FROW, !GROW
      }
    }
    nvvm.bar.warp.sync %all : i32
  }
  return
}

// T rows into FT, widened: FT[r, c] = src[first + r D + c] for r < valid.
func.func private @stage_t(%dst: !FT, %src_arg: !PT, %first: index, %valid: index, %tid: index) {
  %C = arith.constant ${D} : index
  %THREADS = arith.constant ${THREADS} : index
  %cells = arith.muli %C, %valid : index
  %span = arith.addi %first, %cells : index
  %src = memref.reinterpret_cast %src_arg to offset: [0], sizes: [%span], strides: [1]
      : !PT to memref<?x${T}>
  scf.for %e = %tid to %cells step %THREADS {
    %r = arith.divui %e, %C : index
    %c = arith.remui %e, %C : index
    %at = arith.addi %first, %e : index
    %x = memref.load %src[%at] : memref<?x${T}>
    %w = arith.extf %x : ${T} to f32
    memref.store %w, %dst[%r, %c] : !FT
  }
  return
}

// dst[first + r D + c] = FT[r, c] in f32, for r < valid.
func.func private @unstage_ff(%src: !FT, %dst_arg: !PF, %first: index, %valid: index,
                              %tid: index) {
  %C = arith.constant ${D} : index
  %THREADS = arith.constant ${THREADS} : index
  %cells = arith.muli %C, %valid : index
  %span = arith.addi %first, %cells : index
  %dst = memref.reinterpret_cast %dst_arg to offset: [0], sizes: [%span], strides: [1]
      : !PF to memref<?xf32>
  scf.for %e = %tid to %cells step %THREADS {
    %r = arith.divui %e, %C : index
    %c = arith.remui %e, %C : index
    %x = memref.load %src[%r, %c] : !FT
    %at = arith.addi %first, %e : index
    memref.store %x, %dst[%at] : memref<?xf32>
  }
  return
}

// A bias tensor's gradient: dS [B, HQ, SQ, SKV] f32, one score each (this
// score's block and lane write it once; the runtime sums its broadcast
// dims). Scores past the lengths are not written.
func.func private @store_dscore(%ds: f32, %b: index, %h: index, %i: index, %j: index,
                                %ds_arg: !PF, %B: index, %SQ: index, %SKV: index) {
  %HQ = arith.constant ${HQ} : index
  %row_in = arith.cmpi ult, %i, %SQ : index
  %key_in = arith.cmpi ult, %j, %SKV : index
  %in = arith.andi %row_in, %key_in : i1
  scf.if %in {
    %n0 = arith.muli %B, %HQ : index
    %n1 = arith.muli %n0, %SQ : index
    %n = arith.muli %n1, %SKV : index
    %dscore = memref.reinterpret_cast %ds_arg to offset: [0], sizes: [%n], strides: [1]
        : !PF to memref<?xf32>
    %a0 = arith.muli %b, %HQ : index
    %a1 = arith.addi %a0, %h : index
    %a2 = arith.muli %a1, %SQ : index
    %a3 = arith.addi %a2, %i : index
    %a4 = arith.muli %a3, %SKV : index
    %at = arith.addi %a4, %j : index
    memref.store %ds, %dscore[%at] : memref<?xf32>
  }
  return
}
