// The x86 backward's helpers for bucketed terms (Shaw's a^K and a^V,
// docs/backward.md "How the x86 backward runs Shaw"): the rows phase's
// per-row table, its gathers by bucket, the q phase's per-bucket sums and
// the tables' gradients. Uses templates/x86/attention_backward.mlir's type
// aliases and parameters; put in place of its `// @pejit-blocks` line, as
// attention_backward_blocks.mlir is. Without a term every call sits in an
// scf.if on a false constant, and folds away.

// L lanes of the rows phase's term table (docs/backward.md): entry m of rows
// i of (b, h) is scratch[2 ROWS + (head + i) TF + first + m], with head =
// row_index(b, h, 0) and TF floats a row (the key term's buckets, then the
// value term's). Rows past the sequence (padding lanes, masked later) read
// its last row.
func.func private @row_terms(%scratch: !SCRATCH, %ROWS: index, %head: index, %qi: !VI, %m: !VI,
                              %first: index, %SQ: index) -> !VF {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %TF = arith.constant ${TERM_FLOATS} : index
  %TFi = arith.constant ${TERM_FLOATS} : i32
  %zi = arith.constant dense<0> : !VI
  %rows2 = arith.muli %ROWS, %c2 : index
  %hb = arith.muli %head, %TF : index
  %base0 = arith.addi %rows2, %hb : index
  %base = arith.addi %base0, %first : index
  %last = arith.subi %SQ, %c1 : index
  %lasti = arith.index_cast %last : index to i32
  %lastv = vector.broadcast %lasti : i32 to !VI
  %q0 = arith.maxsi %qi, %zi : !VI
  %q1 = arith.minsi %q0, %lastv : !VI
  %tfv = vector.broadcast %TFi : i32 to !VI
  %o0 = arith.muli %q1, %tfv : !VI
  %off = arith.addi %o0, %m : !VI
  %all = arith.constant dense<true> : vector<${L}xi1>
  %pass = arith.constant dense<0.0> : !VF
  %x = vector.gather %scratch[%base] [%off], %all, %pass
      : !SCRATCH, !VI, vector<${L}xi1>, !VF into !VF
  return %x : !VF
}

// The bucketed terms of 8 scores (Shaw, docs/backward.md): the key term
// q_i . a^K[mk] added to the dot product before the scale, the value term
// dO_i . a^V[mv] added to dP, and their buckets mk, mv. Without a term,
// -0.0 (x + -0.0 folds to x) and bucket 0.
func.func private @terms8(%scratch: !SCRATCH, %ROWS: index, %head: index, %b: index, %h: index,
                          %qi: !VI, %kj: !VI, %SQ: index, %SKV: index, %e0: !E0, %e1: !E1,
                          %e2: !E2, %e3: !E3, %qpos: !QPOS, %kpos: !KPOS)
    -> (!VF, !VF, !VI, !VI) {
  %c0 = arith.constant 0 : index
  %NK = arith.constant ${KEY_TERMS} : index
  %nz = arith.constant dense<-0.0> : !VF
  %zi = arith.constant dense<0> : !VI
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %kt:2 = scf.if %has_key -> (!VF, !VI) {
    %m = attn.value_term_bucket key batch %b, head %h, query %qi, key %kj
        operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) positions(%qpos, %kpos : !QPOS, !KPOS)
        lengths(%SQ, %SKV) : !VI
    %x = func.call @row_terms(%scratch, %ROWS, %head, %qi, %m, %c0, %SQ)
        : (!SCRATCH, index, index, !VI, !VI, index, index) -> !VF
    scf.yield %x, %m : !VF, !VI
  } else {
    scf.yield %nz, %zi : !VF, !VI
  }
  %vt:2 = scf.if %has_value -> (!VF, !VI) {
    %m = attn.value_term_bucket batch %b, head %h, query %qi, key %kj
        operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) positions(%qpos, %kpos : !QPOS, !KPOS)
        lengths(%SQ, %SKV) : !VI
    %x = func.call @row_terms(%scratch, %ROWS, %head, %qi, %m, %NK, %SQ)
        : (!SCRATCH, index, index, !VI, !VI, index, index) -> !VF
    scf.yield %x, %m : !VF, !VI
  } else {
    scf.yield %nz, %zi : !VF, !VI
  }
  return %kt#0, %vt#0, %kt#1, %vt#1 : !VF, !VF, !VI, !VI
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
  %cL = arith.constant ${L} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %TF = arith.constant ${TERM_FLOATS} : index
  %NK = arith.constant ${KEY_TERMS} : index
  %NV = arith.constant ${VALUE_TERMS} : index
  %zv = arith.constant dense<0.0> : !VF
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  %rows2 = arith.muli %ROWS, %c2 : index
  scf.for %i = %i0 to %i1 step %c1 {
    %row = arith.addi %head, %i : index
    %rt0 = arith.muli %row, %TF : index
    %rt = arith.addi %rows2, %rt0 : index
    scf.if %has_key {
      scf.for %m = %c0 to %NK step %c1 {
        %acc = scf.for %c = %c0 to %D step %cL iter_args(%a = %zv) -> (!VF) {
          %x = vector.load %q[%b, %h, %i, %c] : !ROWS, !VF
          %y = attn.value_term_row key batch %b, head %h, bucket %m, channel %c
              operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : !VF
          %n = math.fma %x, %y, %a : !VF
          scf.yield %n : !VF
        }
        %d = vector.reduction <add>, %acc : !VF into f32
        %at = arith.addi %rt, %m : index
        memref.store %d, %scratch[%at] : !SCRATCH
      }
    }
    scf.if %has_value {
      scf.for %m = %c0 to %NV step %c1 {
        %acc = scf.for %c = %c0 to %DV step %cL iter_args(%a = %zv) -> (!VF) {
          %x = vector.load %do[%b, %h, %i, %c] : !ROWS, !VF
          %y = attn.value_term_row batch %b, head %h, bucket %m, channel %c
              operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3) : !VF
          %n = math.fma %x, %y, %a : !VF
          scf.yield %n : !VF
        }
        %d = vector.reduction <add>, %acc : !VF into f32
        %at0 = arith.addi %rt, %NK : index
        %at = arith.addi %at0, %m : index
        memref.store %d, %scratch[%at] : !SCRATCH
      }
    }
  }
  return
}

// Adds w (L lanes, one per row) into acc[m[l], l]: a q phase's per-bucket
// sums S (dE by key bucket) and T (P by value bucket). Lanes write distinct
// elements (their own column).
func.func private @bucket_add(%acc: !TD, %m: !VI, %w: !VF) {
  %c0 = arith.constant 0 : index
  %lanes = arith.constant dense<${L}> : !VI
  %iota = arith.constant dense<${IOTA}> : !VI
  %all = arith.constant dense<true> : vector<${L}xi1>
  %pass = arith.constant dense<0.0> : !VF
  %o0 = arith.muli %m, %lanes : !VI
  %off = arith.addi %o0, %iota : !VI
  %old = vector.gather %acc[%c0, %c0] [%off], %all, %pass : !TD, !VI, vector<${L}xi1>, !VF into !VF
  %new = arith.addf %old, %w : !VF
  vector.scatter %acc[%c0, %c0] [%off], %all, %new : !TD, !VI, vector<${L}xi1>, !VF
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
  %cL = arith.constant ${L} : index
  %D = arith.constant ${D} : index
  %DV = arith.constant ${DV} : index
  %NK = arith.constant ${KEY_TERMS} : index
  %NV = arith.constant ${VALUE_TERMS} : index
  %has_key = arith.constant ${HAS_KEY_TERM}
  %has_value = arith.constant ${HAS_VALUE_TERM}
  scf.for %l = %c0 to %cL step %c1 {
    %r = arith.addi %r0, %l : index
    %in = arith.cmpi ult, %r, %end : index
    scf.if %in {
      scf.if %has_key {
        scf.for %m = %c0 to %NK step %c1 {
          %s = memref.load %S[%m, %l] : !TD
          %sv = vector.broadcast %s : f32 to !VF
          scf.for %c = %c0 to %D step %cL {
            %x = vector.load %q[%b, %h, %r, %c] : !ROWS, !VF
            %g = arith.mulf %x, %sv : !VF
            attn.term_row_grad key %g, batch %b, head %h, bucket %m, channel %c
                operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
                partial(%scratch : !SCRATCH, %pbase) offsets ${GRAD_OFFSETS} : !VF
          }
        }
      }
      scf.if %has_value {
        scf.for %m = %c0 to %NV step %c1 {
          %t = memref.load %T[%m, %l] : !TD
          %tv = vector.broadcast %t : f32 to !VF
          scf.for %c = %c0 to %DV step %cL {
            %x = vector.load %do[%b, %h, %r, %c] : !ROWS, !VF
            %g = arith.mulf %x, %tv : !VF
            attn.term_row_grad %g, batch %b, head %h, bucket %m, channel %c
                operands(%e0, %e1, %e2, %e3 : !E0, !E1, !E2, !E3)
                partial(%scratch : !SCRATCH, %pbase) offsets ${GRAD_OFFSETS} : !VF
          }
        }
      }
    }
  }
  return
}
