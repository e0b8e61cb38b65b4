// Blocks of the NVIDIA attention template (templates/nvidia/mma_attention.mlir),
// put in place of its `// @pejit-blocks` line (inside the gpu.module) before
// parameter substitution: the types and parameters are the ones that file
// defines (the tensor-core and float helpers are mma_math.mlir's).
//   @pejit_value_term_tile, @pejit_value_term_finish  a value term's
//                        accumulator (Shaw's a^V), per KV tile and at the end
//   @pejit_combine       the split-KV merge kernel

// Value term, once per KV tile (the quad's 4 lanes split the buckets of
// their two rows; a row belongs to one warp, and the barrier orders the
// rescale before any lane's adds; lanes of one row may share a bucket,
// hence the atomics):
//   VT[m, r] *= alpha(r);  VT[bucket(i, j), r] += P[r, j]
func.func private @pejit_value_term_tile(%VTs: !VT, %Sacc: memref<${BN8}x4xf32>, %alpha_lo: f32,
                                         %alpha_hi: f32, %b: index, %h: index, %j0: index,
                                         %i_lo: index, %i_hi: index, %r_lo: index, %r_hi: index,
                                         %lane4: index, %quad_col: index, %qpos_arg: !PI,
                                         %kpos_arg: !PI, %SQ: index,
                                         %SKV: index${ENCODING_ARGS}) {
  // The position ids as the kernel views them: a private function takes
  // no memref of `?` dims (bare-pointer calling convention).
${POSITION_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %BM = arith.constant ${BM} : index
  %NB = arith.constant ${VT_BUCKETS} : index
  %nS = arith.constant ${BN8} : index
  scf.for %m = %lane4 to %NB step %c4 {
    %m_row = arith.muli %m, %BM : index
    %at_lo = arith.addi %m_row, %r_lo : index
    %at_hi = arith.addi %m_row, %r_hi : index
    %w_lo = memref.load %VTs[%at_lo] : !VT
    %w_hi = memref.load %VTs[%at_hi] : !VT
    %x_lo = arith.mulf %w_lo, %alpha_lo : f32
    %x_hi = arith.mulf %w_hi, %alpha_hi : f32
    memref.store %x_lo, %VTs[%at_lo] : !VT
    memref.store %x_hi, %VTs[%at_hi] : !VT
  }
  gpu.barrier
  scf.for %n = %c0 to %nS step %c1 {
    scf.for %e = %c0 to %c4 step %c1 {
      %hi = arith.cmpi uge, %e, %c2 : index
      %i = arith.select %hi, %i_hi, %i_lo : index
      %r = arith.select %hi, %r_hi, %r_lo : index
      %e2 = arith.remui %e, %c2 : index
      %n8 = arith.muli %n, %c8 : index
      %jl0 = arith.addi %n8, %quad_col : index
      %jl = arith.addi %jl0, %e2 : index
      %j = arith.addi %j0, %jl : index
      %i_i = arith.index_cast %i : index to i32
      %j_i = arith.index_cast %j : index to i32
      %bucket = attn.value_term_bucket batch %b, head %h, query %i_i, key %j_i${ENCODING_OPERANDS}
          positions(%qpos, %kpos : !QPOS, !KPOS) lengths(%SQ, %SKV) : i32
      %m = arith.index_cast %bucket : i32 to index
      %m_row = arith.muli %m, %BM : index
      %at = arith.addi %m_row, %r : index
      %p = memref.load %Sacc[%n, %e] : memref<${BN8}x4xf32>
      %old = memref.atomic_rmw addf %p, %VTs[%at] : (f32, !VT) -> f32
    } {pejit.unroll}
  } {pejit.unroll}
  return
}

// Value term, once per query tile before the division by l: this lane's
// two rows and column pairs,
//   O[r, c] += sum_m VT[m, r] row(m)[c]
func.func private @pejit_value_term_finish(%VTs: !VT, %Oacc: memref<${DV8}x4xf32>, %b: index,
                                           %h: index, %r_lo: index, %r_hi: index,
                                           %quad_col: index${ENCODING_ARGS}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %BM = arith.constant ${BM} : index
  %NB = arith.constant ${VT_BUCKETS} : index
  %nO = arith.constant ${DV8} : index
  gpu.barrier
  scf.for %m = %c0 to %NB step %c1 {
    %m_row = arith.muli %m, %BM : index
    %at_lo = arith.addi %m_row, %r_lo : index
    %at_hi = arith.addi %m_row, %r_hi : index
    %w_lo = memref.load %VTs[%at_lo] : !VT
    %w_hi = memref.load %VTs[%at_hi] : !VT
    scf.for %n = %c0 to %nO step %c1 {
      %n8 = arith.muli %n, %c8 : index
      %col = arith.addi %n8, %quad_col : index
      %row = attn.value_term_row batch %b, head %h, bucket %m, channel %col${ENCODING_OPERANDS}
          : vector<2xf32>
      %v0 = vector.extract %row[0] : f32 from vector<2xf32>
      %v1 = vector.extract %row[1] : f32 from vector<2xf32>
      %o0 = memref.load %Oacc[%n, %c0] : memref<${DV8}x4xf32>
      %o1 = memref.load %Oacc[%n, %c1] : memref<${DV8}x4xf32>
      %o2 = memref.load %Oacc[%n, %c2] : memref<${DV8}x4xf32>
      %o3 = memref.load %Oacc[%n, %c3] : memref<${DV8}x4xf32>
      %y0 = math.fma %w_lo, %v0, %o0 : f32
      %y1 = math.fma %w_lo, %v1, %o1 : f32
      %y2 = math.fma %w_hi, %v0, %o2 : f32
      %y3 = math.fma %w_hi, %v1, %o3 : f32
      memref.store %y0, %Oacc[%n, %c0] : memref<${DV8}x4xf32>
      memref.store %y1, %Oacc[%n, %c1] : memref<${DV8}x4xf32>
      memref.store %y2, %Oacc[%n, %c2] : memref<${DV8}x4xf32>
      memref.store %y3, %Oacc[%n, %c3] : memref<${DV8}x4xf32>
    } {pejit.unroll}
  }
  return
}

// Split-KV: O[b, h, i] = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s with
// M = max_s m_s (log2 e folded in); no visible key at all -> 0.
gpu.func @pejit_combine(%o_arg: !POT, %wo_arg: !PF, %wm_arg: !PF, %wl_arg: !PF,
                        ${LENGTH_ARGS}) kernel {
${COMBINE_VIEWS}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %log2e = arith.constant 1.44269504088896 : f32
  %DV = arith.constant ${DV} : index
  %BM = arith.constant ${BM} : index
  %THREADS = arith.constant ${THREADS} : index
  %tid = gpu.thread_id x
  %qt = gpu.block_id x
  %h = gpu.block_id y
  %b = gpu.block_id z
  %i0 = arith.muli %qt, %BM : index
  %cells = arith.muli %BM, %DV : index
  scf.for %e = %tid to %cells step %THREADS {
    %r = arith.divui %e, %DV : index
    %c = arith.remui %e, %DV : index
    %i = arith.addi %i0, %r : index
    %row_in = arith.cmpi ult, %i, %SQ : index
    scf.if %row_in {
      %mmax = scf.for %s = %c0 to %SPLITS step %c1 iter_args(%mx = %ninf) -> (f32) {
        %ms = memref.load %wm[%b, %h, %s, %i] : !WML
        %mx1 = arith.maximumf %mx, %ms : f32
        scf.yield %mx1 : f32
      }
      %none = arith.cmpf oeq, %mmax, %ninf : f32
      %msafe = arith.select %none, %zero, %mmax : f32
      %sums:2 = scf.for %s = %c0 to %SPLITS step %c1 iter_args(%lo = %zero, %ls = %zero) -> (f32, f32) {
        %ms = memref.load %wm[%b, %h, %s, %i] : !WML
        %d = arith.subf %ms, %msafe : f32
        %dl = arith.mulf %d, %log2e : f32
        %w = func.call @exp2(%dl) : (f32) -> f32
        %os = memref.load %wo[%b, %h, %s, %i, %c] : !WO
        %lsplit = memref.load %wl[%b, %h, %s, %i] : !WML
        %lo1 = math.fma %w, %os, %lo : f32
        %ls1 = math.fma %w, %lsplit, %ls : f32
        scf.yield %lo1, %ls1 : f32, f32
      }
      %empty = arith.cmpf oeq, %sums#1, %zero : f32
      %inv0 = arith.divf %one, %sums#1 : f32
      %inv = arith.select %empty, %zero, %inv0 : f32
      %x = arith.mulf %sums#0, %inv : f32
      %pair = vector.broadcast %x : f32 to vector<2xf32>
      %out = func.call @${CVT}(%pair) : (vector<2xf32>) -> vector<2x${OT}>
      %x_out = vector.extract %out[0] : ${OT} from vector<2x${OT}>
      memref.store %x_out, %o[%b, %h, %i, %c] : !O
    }
  }
  gpu.return
}
