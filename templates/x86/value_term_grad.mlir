// x86 template of a materialized Shaw value term's table gradient
// (pe.relative_term_grad with #pe.relative_value, docs/backward.md). The
// term R[(h,) i, j] = a^V[(h,) r(i, j)] depends on the distance j - i
// alone, so each diagonal's gradient is summed first, 8 channels a vector,
//   g[c] = sum_i dR[h, i, i + delta, c]
// and handed, with the diagonal's bucket (attn.value_term_bucket at one of
// its points), to the encoding's table adjoint (attn.term_row_grad) into
// the item's partial table (PF floats at item PF of %partial, zeroed
// first). The runtime sums the partials in item order in f64.
//
// One work item = (head h, G diagonals); the diagonals delta = u - (SQ - 1)
// for u in [0, SQ + SKV - 1).
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86RelativeTermGrad.cpp):
//   ${HR} heads of dR (1: a shared table, dR [SQ, SKV, DV] viewed with a
//   head dim of 1); ${SQ} ${SKV}: sizes or `?`; ${DV} (a multiple of 8);
//   ${T} dR's element type; ${E0} the table's memref type; ${PF} its
//   floats; ${G} diagonals per item; WIDEN8: the body of @widen8.

!DR = memref<${HR}x${SQ}x${SKV}x${DV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!E0 = ${E0}
!SCRATCH = memref<?xf32>
!V8 = vector<8xf32>
!IN8 = vector<8x${T}>

// Item = h NC + t, NC = ceil((SQ + SKV - 1) / G).
func.func @pejit_value_term_grad_item(%dr: !DR, %e0: !E0, %partial: !SCRATCH, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %G = arith.constant ${G} : index
  %PF = arith.constant ${PF} : index
  %DV = arith.constant ${DV} : index
  %zero = arith.constant 0.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %dr, %c1 : !DR
  %SKV = memref.dim %dr, %c2 : !DR
  %nd0 = arith.addi %SQ, %SKV : index
  %ND = arith.subi %nd0, %c1 : index
  %nc0 = arith.addi %ND, %G : index
  %nc1 = arith.subi %nc0, %c1 : index
  %NC = arith.divui %nc1, %G : index
  %t = arith.remui %item, %NC : index
  %h = arith.divui %item, %NC : index
  %pbase = arith.muli %item, %PF : index
  %pend = arith.addi %pbase, %PF : index
  scf.for %e = %pbase to %pend step %c1 {
    memref.store %zero, %partial[%e] : !SCRATCH
  }
  %u0 = arith.muli %t, %G : index
  %u1a = arith.addi %u0, %G : index
  %u1 = arith.minui %u1a, %ND : index
  %sq1 = arith.subi %SQ, %c1 : index
  scf.for %u = %u0 to %u1 step %c1 {
    // Diagonal j = i + delta, delta = u - (SQ - 1): rows [i_first, i_end).
    %i_first = arith.subi %sq1, %u : index
    %i_first0 = arith.maxsi %i_first, %c0 : index
    %j_first = arith.subi %u, %sq1 : index
    %j_first0 = arith.maxsi %j_first, %c0 : index
    %left_q = arith.subi %SQ, %i_first0 : index
    %left_k = arith.subi %SKV, %j_first0 : index
    %n = arith.minui %left_q, %left_k : index
    %i32 = arith.index_cast %i_first0 : index to i32
    %j32 = arith.index_cast %j_first0 : index to i32
    %m32 = attn.value_term_bucket batch %c0, head %h, query %i32, key %j32
        operands(%e0 : !E0) lengths(%SQ, %SKV) : i32
    %m = arith.index_cast %m32 : i32 to index
    scf.for %c = %c0 to %DV step %c8 {
      %g = scf.for %s = %c0 to %n step %c1 iter_args(%acc = %zero8) -> (!V8) {
        %i = arith.addi %i_first0, %s : index
        %j = arith.addi %j_first0, %s : index
        %x = vector.load %dr[%h, %i, %j, %c] : !DR, !IN8
        %w = func.call @widen8(%x) : (!IN8) -> !V8
        %acc1 = arith.addf %acc, %w : !V8
        scf.yield %acc1 : !V8
      }
      attn.term_row_grad %g, batch %c0, head %h, bucket %m, channel %c operands(%e0 : !E0)
          partial(%partial : !SCRATCH, %pbase) offsets [0] : !V8
    }
  }
  return
}

// 8 elements of dR as f32.
func.func private @widen8(%x: !IN8) -> !V8 {
  ${WIDEN8}
}
