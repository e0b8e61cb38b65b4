// Steps of the NVIDIA attention backward (templates/nvidia/
// mma_attention_backward.mlir), put in place of its `// @pejit-blocks`
// line with mma_math.mlir's and mma_backward_blocks.mlir's: the ranges a
// block walks, the gradient weights of one score, register tiles set to 0,
// quad reductions and the f32 row tiles of pejit_backward_finish.

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
//   P = exp(s - lse_i) (0 where s = -inf),  dE = f P (dP - D_i)
// with D_i and lse_i from the rows phase ([2, B, HQ, SQ]; a row past SQ
// reads row SQ - 1, and its s is -inf). A row that sees no key has lse =
// -inf: it is taken as 0, so its P is exp(-inf) = 0, never NaN.
func.func private @weights(%s: f32, %f: f32, %dp: f32, %b: index, %h: index, %i: index,
                           %rows_arg: !PF, %SQ: index, %B: index) -> (f32, f32) {
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
  return %p, %de : f32, f32
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

// dst[first + r D + c] = SD[r, c] for r < valid (Q' or K' rows).
func.func private @unstage_d(%src: !SD, %dst_arg: !PT, %first: index, %valid: index,
                             %tid: index) {
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
    %x = vector.load %src[%r, %c] : !SD, vector<2x${T}>
    %rc = arith.muli %r, %C : index
    %at0 = arith.addi %first, %rc : index
    %at = arith.addi %at0, %c : index
    vector.store %x, %dst[%at] : memref<?x${T}>, vector<2x${T}>
  }
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
