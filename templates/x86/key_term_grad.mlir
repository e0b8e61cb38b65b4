// x86 template of a materialized Shaw key term's gradients
// (pe.relative_term_grad with #pe.relative_key, docs/backward.md). With
// E[b, h, i, j] = q_i . a^K[(h,) r(i, j)], per query row i the item first
// sums dE by bucket (attn.value_term_bucket key),
//   S[m] = sum over j with r(i, j) = m of dE[b, h, i, j]
// then, 8 channels a vector,
//   dq[b, h, i, c]  = sum_m S[m] a^K[(h,) m, c]        (attn.value_term_row key)
//   d a^K[(h,) m, c] += S[m] q[b, h, i, c]            (attn.term_row_grad key)
// the table's part into the item's partial table (PF floats at item PF of
// %partial, zeroed first). The runtime sums the partials in item order in
// f64; dq rows are the item's own.
//
// One work item = (batch b, head h, rows [i0, i0 + R)).
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86RelativeTermGrad.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?`; ${H}; ${D} (a multiple of 8); ${T}
//   dE's element type, ${TQ} q's and dq's; ${E0} the table's memref type;
//   ${PF} its floats; ${NB} buckets (2k + 1); ${R} rows per item;
//   WIDEN1, WIDEN8Q, NARROW8Q: the bodies of @widen1, @widen8q, @narrow8q.

!DE = memref<${B}x${H}x${SQ}x${SKV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!Q = memref<${B}x${H}x${SQ}x${D}x${TQ}, strided<[?, ?, ?, 1], offset: ?>>
!E0 = ${E0}
!SCRATCH = memref<?xf32>
!S = memref<${NB}xf32>
!V8 = vector<8xf32>
!Q8 = vector<8x${TQ}>

// Item = (b H + h) NT + t, NT = ceil(SQ / R).
func.func @pejit_key_term_grad_item(%de: !DE, %q: !Q, %dq: !Q, %e0: !E0, %partial: !SCRATCH,
                                    %item: index) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %H = arith.constant ${H} : index
  %D = arith.constant ${D} : index
  %NB = arith.constant ${NB} : index
  %PF = arith.constant ${PF} : index
  %zero = arith.constant 0.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %de, %c2 : !DE
  %SKV = memref.dim %de, %c3 : !DE
  %up0 = arith.addi %SQ, %R : index
  %up = arith.subi %up0, %c1 : index
  %NT = arith.divui %up, %R : index
  %t = arith.remui %item, %NT : index
  %bh = arith.divui %item, %NT : index
  %h = arith.remui %bh, %H : index
  %b = arith.divui %bh, %H : index
  %i0 = arith.muli %t, %R : index
  %i1a = arith.addi %i0, %R : index
  %i1 = arith.minui %i1a, %SQ : index
  %pbase = arith.muli %item, %PF : index
  %pend = arith.addi %pbase, %PF : index
  scf.for %e = %pbase to %pend step %c1 {
    memref.store %zero, %partial[%e] : !SCRATCH
  }
  %sums = memref.alloca() : !S
  scf.for %i = %i0 to %i1 step %c1 {
    scf.for %m = %c0 to %NB step %c1 {
      memref.store %zero, %sums[%m] : !S
    }
    %i32 = arith.index_cast %i : index to i32
    scf.for %j = %c0 to %SKV step %c1 {
      %j32 = arith.index_cast %j : index to i32
      %m32 = attn.value_term_bucket key batch %b, head %h, query %i32, key %j32
          operands(%e0 : !E0) lengths(%SQ, %SKV) : i32
      %m = arith.index_cast %m32 : i32 to index
      %x = memref.load %de[%b, %h, %i, %j] : !DE
      %w = func.call @widen1(%x) : (${T}) -> f32
      %s = memref.load %sums[%m] : !S
      %s1 = arith.addf %s, %w : f32
      memref.store %s1, %sums[%m] : !S
    }
    scf.for %c = %c0 to %D step %c8 {
      %qx = vector.load %q[%b, %h, %i, %c] : !Q, !Q8
      %qw = func.call @widen8q(%qx) : (!Q8) -> !V8
      %acc = scf.for %m = %c0 to %NB step %c1 iter_args(%a = %zero8) -> (!V8) {
        %s = memref.load %sums[%m] : !S
        %sv = vector.broadcast %s : f32 to !V8
        %row = attn.value_term_row key batch %b, head %h, bucket %m, channel %c
            operands(%e0 : !E0) : !V8
        %a1 = math.fma %sv, %row, %a : !V8
        %g = arith.mulf %sv, %qw : !V8
        attn.term_row_grad key %g, batch %b, head %h, bucket %m, channel %c
            operands(%e0 : !E0) partial(%partial : !SCRATCH, %pbase) offsets [0] : !V8
        scf.yield %a1 : !V8
      }
      %out = func.call @narrow8q(%acc) : (!V8) -> !Q8
      vector.store %out, %dq[%b, %h, %i, %c] : !Q, !Q8
    }
  }
  return
}

// One element of dE as f32.
func.func private @widen1(%x: ${T}) -> f32 {
  ${WIDEN1}
}

// 8 elements of q as f32, and back to q's type.
func.func private @widen8q(%x: !Q8) -> !V8 {
  ${WIDEN8Q}
}

func.func private @narrow8q(%x: !V8) -> !Q8 {
  ${NARROW8Q}
}
