// The x86 backward's helpers for bucketed terms (Shaw's a^K and a^V,
// docs/backward.md "How the x86 backward runs Shaw"): the rows phase's
// per-row table, its gathers by bucket, the q phase's per-bucket sums and
// the tables' gradients. Uses templates/x86/attention_backward.mlir's type
// aliases and parameters; put in place of its `// @pejit-blocks` line, as
// attention_backward_blocks.mlir is. Without a term every call sits in an
// scf.if on a false constant, and folds away.

// 8 lanes of the rows phase's term table (docs/backward.md): entry m of rows
// i of (b, h) is scratch[2 ROWS + (head + i) TF + first + m], with head =
// row_index(b, h, 0) and TF floats a row (the key term's buckets, then the
// value term's). Rows past the sequence (padding lanes, masked later) read
// its last row.
func.func private @row_terms8(%scratch: !SCRATCH, %ROWS: index, %head: index, %qi: !I8, %m: !I8,
                              %first: index, %SQ: index) -> !V8 {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %TF = arith.constant ${TERM_FLOATS} : index
  %TFi = arith.constant ${TERM_FLOATS} : i32
  %zi = arith.constant dense<0> : !I8
  %rows2 = arith.muli %ROWS, %c2 : index
  %hb = arith.muli %head, %TF : index
  %base0 = arith.addi %rows2, %hb : index
  %base = arith.addi %base0, %first : index
  %last = arith.subi %SQ, %c1 : index
  %lasti = arith.index_cast %last : index to i32
  %lastv = vector.broadcast %lasti : i32 to !I8
  %q0 = arith.maxsi %qi, %zi : !I8
  %q1 = arith.minsi %q0, %lastv : !I8
  %tfv = vector.broadcast %TFi : i32 to !I8
  %o0 = arith.muli %q1, %tfv : !I8
  %off = arith.addi %o0, %m : !I8
  %all = arith.constant dense<true> : vector<8xi1>
  %pass = arith.constant dense<0.0> : !V8
  %x = vector.gather %scratch[%base] [%off], %all, %pass
      : !SCRATCH, !I8, vector<8xi1>, !V8 into !V8
  return %x : !V8
}

// The bucketed terms of 8 scores (Shaw, docs/backward.md): the key term
// q_i . a^K[mk] added to the dot product before the scale, the value term
// dO_i . a^V[mv] added to dP, and their buckets mk, mv. Without a term,
// -0.0 (x + -0.0 folds to x) and bucket 0.
func.func private @terms8(%scratch: !SCRATCH, %ROWS: index, %head: index, %b: index, %h: index,
                          %qi: !I8, %kj: !I8, %SQ: index, %SKV: index, %e0: !E0, %e1: !E1,
                          %e2: !E2, %e3: !E3, %qpos: !QPOS, %kpos: !KPOS)
    -> (!V8, !V8, !I8, !I8) {
  %c0 = arith.constant 0 : index
  %NK = arith.constant ${KEY_TERMS} : index
  %nz = arith.constant dense<-0.0> : !V8
  %zi = arith.constant dense<0> : !I8
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %kt:2 = scf.if %has_key -> (!V8, !I8) {
    %m = attn.value_term_bucket key batch %b, head %h, query %qi, key %kj
        operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) positions(%qpos, %kpos : !QPOS, !KPOS)
        lengths(%SQ, %SKV) : !I8
    %x = func.call @row_terms8(%scratch, %ROWS, %head, %qi, %m, %c0, %SQ)
        : (!SCRATCH, index, index, !I8, !I8, index, index) -> !V8
    scf.yield %x, %m : !V8, !I8
  } else {
    scf.yield %nz, %zi : !V8, !I8
  }
  %vt:2 = scf.if %has_value -> (!V8, !I8) {
    %m = attn.value_term_bucket batch %b, head %h, query %qi, key %kj
        operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) positions(%qpos, %kpos : !QPOS, !KPOS)
        lengths(%SQ, %SKV) : !I8
    %x = func.call @row_terms8(%scratch, %ROWS, %head, %qi, %m, %NK, %SQ)
        : (!SCRATCH, index, index, !I8, !I8, index, index) -> !V8
    scf.yield %x, %m : !V8, !I8
  } else {
    scf.yield %nz, %zi : !V8, !I8
  }
  return %kt#0, %vt#0, %kt#1, %vt#1 : !V8, !V8, !I8, !I8
}

// The rows phase's term table for rows [i0, i1) of (b, h) (docs/backward.md):
// QaK[i, m] = q_i . a^K[m] and dOaV[i, m] = dO_i . a^V[m] (rows of the
// key and value terms, attn.value_term_row), 8 channels per FMA.
func.func private @fill_row_terms(%q: !ROWS, %do: !ROWS, %scratch: !SCRATCH, %ROWS: index,
                                  %head: index, %b: index, %h: index, %i0: index, %i1: index,
                                  %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %TF = arith.constant ${TERM_FLOATS} : index
  %NK = arith.constant ${KEY_TERMS} : index
  %NV = arith.constant ${VALUE_TERMS} : index
  %zv = arith.constant dense<0.0> : !V8
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %rows2 = arith.muli %ROWS, %c2 : index
  scf.for %i = %i0 to %i1 step %c1 {
    %row = arith.addi %head, %i : index
    %rt0 = arith.muli %row, %TF : index
    %rt = arith.addi %rows2, %rt0 : index
    scf.if %has_key {
      scf.for %m = %c0 to %NK step %c1 {
        %acc = scf.for %c = %c0 to %D step %c8 iter_args(%a = %zv) -> (!V8) {
          %x = vector.load %q[%b, %h, %i, %c] : !ROWS, !V8
          %y = attn.value_term_row key batch %b, head %h, bucket %m, channel %c
              operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : !V8
          %n = math.fma %x, %y, %a : !V8
          scf.yield %n : !V8
        }
        %d = vector.reduction <add>, %acc : !V8 into f32
        %at = arith.addi %rt, %m : index
        memref.store %d, %scratch[%at] : !SCRATCH
      }
    }
    scf.if %has_value {
      scf.for %m = %c0 to %NV step %c1 {
        %acc = scf.for %c = %c0 to %DV step %c8 iter_args(%a = %zv) -> (!V8) {
          %x = vector.load %do[%b, %h, %i, %c] : !ROWS, !V8
          %y = attn.value_term_row batch %b, head %h, bucket %m, channel %c
              operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : !V8
          %n = math.fma %x, %y, %a : !V8
          scf.yield %n : !V8
        }
        %d = vector.reduction <add>, %acc : !V8 into f32
        %at0 = arith.addi %rt, %NK : index
        %at = arith.addi %at0, %m : index
        memref.store %d, %scratch[%at] : !SCRATCH
      }
    }
  }
  return
}

// Adds w (8 lanes, one per row) into acc[m[l], l]: a q phase's per-bucket
// sums S (dE by key bucket) and T (P by value bucket). Lanes write distinct
// elements (their own column).
func.func private @bucket_add8(%acc: !TD, %m: !I8, %w: !V8) {
  %c0 = arith.constant 0 : index
  %eight = arith.constant dense<8> : !I8
  %iota = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : !I8
  %all = arith.constant dense<true> : vector<8xi1>
  %pass = arith.constant dense<0.0> : !V8
  %o0 = arith.muli %m, %eight : !I8
  %off = arith.addi %o0, %iota : !I8
  %old = vector.gather %acc[%c0, %c0] [%off], %all, %pass : !TD, !I8, vector<8xi1>, !V8 into !V8
  %new = arith.addf %old, %w : !V8
  vector.scatter %acc[%c0, %c0] [%off], %all, %new : !TD, !I8, vector<8xi1>, !V8
  return
}

// A q item's contributions to the bucketed terms' tables for rows r0 ..
// r0 + 7 (< end): d a^K[m] += S[m, l] q_r and d a^V[m] += T[m, l] dO_r, 8
// channels at a time (attn.term_row_grad; nothing for a table whose
// gradient is not asked for).
func.func private @term_row_grads(%q: !ROWS, %do: !ROWS, %S: !TD, %T: !TD, %scratch: !SCRATCH,
                                  %pbase: index, %b: index, %h: index, %r0: index, %end: index,
                                  %e0: !E0, %e1: !E1, %e2: !E2, %e3: !E3) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %NK = arith.constant ${KEY_TERMS} : index
  %NV = arith.constant ${VALUE_TERMS} : index
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  scf.for %l = %c0 to %c8 step %c1 {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    scf.if %in {
      scf.if %has_key {
        scf.for %m = %c0 to %NK step %c1 {
          %s = memref.load %S[%m, %l] : !TD
          %sv = vector.broadcast %s : f32 to !V8
          scf.for %c = %c0 to %D step %c8 {
            %x = vector.load %q[%b, %h, %r, %c] : !ROWS, !V8
            %g = arith.mulf %x, %sv : !V8
            attn.term_row_grad key %g, batch %b, head %h, bucket %m, channel %c
                operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
                partial(%scratch : !SCRATCH, %pbase) offsets ${GRAD_OFFSETS} : !V8
          }
        }
      }
      scf.if %has_value {
        scf.for %m = %c0 to %NV step %c1 {
          %t = memref.load %T[%m, %l] : !TD
          %tv = vector.broadcast %t : f32 to !V8
          scf.for %c = %c0 to %DV step %c8 {
            %x = vector.load %do[%b, %h, %r, %c] : !ROWS, !V8
            %g = arith.mulf %x, %tv : !V8
            attn.term_row_grad %g, batch %b, head %h, bucket %m, channel %c
                operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
                partial(%scratch : !SCRATCH, %pbase) offsets ${GRAD_OFFSETS} : !V8
          }
        }
      }
    }
  }
  return
}
