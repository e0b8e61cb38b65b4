// x86 template of a materialized score bias's tensor gradient
// (pe.score_bias_grad, docs/backward.md): the backward of a score-bias pe
// op written out on its own (a materialized pe.t5_bias).
//
// One work item = (batch b, head h, rows [i0, i0 + nr)) of dBias [B, H, SQ,
// SKV], R rows per item. The bias depends on the distance j - i alone, so
// per chunk of C keys [j0, j0 + nc) the item first sums its rows along the
// diagonals,
//   diag[c + nr - 1 - r] += dBias[b, h, i0 + r, j0 + c]     (8 keys a vector)
// then hands each diagonal's sum to the encoding's score adjoint at the
// item's last row q = i0 + nr - 1, key j0 + t (distance j0 + t - q, the
// key may pass skv: the hook only forms distances):
//   attn.score_grad diag[t], batch b, head h, query q, key j0 + t
// which adds it into the item's partial gradient (its tensor's size, PF
// floats at item PF of %partial, zeroed first). The runtime sums the
// partials in item order in f64.
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86ScoreBiasGrad.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?`; ${H}; ${T} dBias's element type;
//   ${E0} the encoding's tensor's memref type; ${PF} its floats;
//   ${R} rows per item, ${C} keys per chunk, ${DIAG} = C + R + 8;
//   WIDEN8, WIDEN1: the bodies of @widen8 and @widen1

!DB = memref<${B}x${H}x${SQ}x${SKV}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!E0 = ${E0}
!SCRATCH = memref<?xf32>
!DIAG = memref<${DIAG}xf32>
!V8 = vector<8xf32>
!IN8 = vector<8x${T}>

// Item = (b H + h) NT + t, NT = ceil(SQ / R).
func.func @pejit_bias_grad_item(%db: !DB, %e0: !E0, %partial: !SCRATCH, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %C = arith.constant ${C} : index
  %H = arith.constant ${H} : index
  %PF = arith.constant ${PF} : index
  %zero = arith.constant 0.0 : f32
  %zero8 = arith.constant dense<0.0> : !V8
  %SQ = memref.dim %db, %c2 : !DB
  %SKV = memref.dim %db, %c3 : !DB
  %sq_up0 = arith.addi %SQ, %R : index
  %sq_up = arith.subi %sq_up0, %c1 : index
  %NT = arith.divui %sq_up, %R : index
  %t = arith.remui %item, %NT : index
  %bh = arith.divui %item, %NT : index
  %h = arith.remui %bh, %H : index
  %b = arith.divui %bh, %H : index
  %i0 = arith.muli %t, %R : index
  %rows_left = arith.subi %SQ, %i0 : index
  %nr = arith.minui %rows_left, %R : index
  %nr1 = arith.subi %nr, %c1 : index
  %q = arith.addi %i0, %nr1 : index
  %q32 = arith.index_cast %q : index to i32
  %pbase = arith.muli %item, %PF : index
  %pend = arith.addi %pbase, %PF : index
  scf.for %e = %pbase to %pend step %c1 {
    memref.store %zero, %partial[%e] : !SCRATCH
  }
  %diag = memref.alloca() {alignment = 64 : i64} : !DIAG
  scf.for %j0 = %c0 to %SKV step %C {
    %keys_left = arith.subi %SKV, %j0 : index
    %nc = arith.minui %keys_left, %C : index
    %width = arith.addi %nc, %nr1 : index
    scf.for %x = %c0 to %width step %c8 {
      vector.store %zero8, %diag[%x] : !DIAG, !V8
    }
    %full = arith.divui %nc, %c8 : index
    %full8 = arith.muli %full, %c8 : index
    scf.for %r = %c0 to %nr step %c1 {
      %i = arith.addi %i0, %r : index
      %off = arith.subi %nr1, %r : index
      scf.for %c = %c0 to %full8 step %c8 {
        %j = arith.addi %j0, %c : index
        %x8 = vector.load %db[%b, %h, %i, %j] : !DB, !IN8
        %w8 = func.call @widen8(%x8) : (!IN8) -> !V8
        %at = arith.addi %off, %c : index
        %d8 = vector.load %diag[%at] : !DIAG, !V8
        %s8 = arith.addf %d8, %w8 : !V8
        vector.store %s8, %diag[%at] : !DIAG, !V8
      }
      scf.for %c = %full8 to %nc step %c1 {
        %j = arith.addi %j0, %c : index
        %x = memref.load %db[%b, %h, %i, %j] : !DB
        %w = func.call @widen1(%x) : (${T}) -> f32
        %at = arith.addi %off, %c : index
        %d = memref.load %diag[%at] : !DIAG
        %s = arith.addf %d, %w : f32
        memref.store %s, %diag[%at] : !DIAG
      }
    }
    scf.for %u = %c0 to %width step %c1 {
      %ds = memref.load %diag[%u] : !DIAG
      %key = arith.addi %j0, %u : index
      %key32 = arith.index_cast %key : index to i32
      attn.score_grad %ds, batch %b, head %h, query %q32, key %key32
          operands(%e0 : !E0) partial(%partial : !SCRATCH, %pbase) offsets [0]
          lengths(%SQ, %SKV)
    }
  }
  return
}

// 8 elements of dBias as f32.
func.func private @widen8(%x: !IN8) -> !V8 {
  ${WIDEN8}
}

// One element of dBias as f32.
func.func private @widen1(%x: ${T}) -> f32 {
  ${WIDEN1}
}
