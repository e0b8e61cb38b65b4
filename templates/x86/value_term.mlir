// x86 materialized value term template: a value-term pe op on its own
// (pe.relative_value; docs/standalone-kernels.md "Materialized biases"),
// for users who need the [(h,) sq, skv, dv] tensor itself.
//
// One work item = (head a, query row i, key j) of O [A, SQ, SKV, DV]
// (A = 1 for a table the heads share):
//   O[a, i, j, :] = row(bucket(a, i, j))      8 channels per vector, then one
// The bucket and the row are the encoding's value-term hooks
// (attn.value_term_bucket, attn.value_term_row): the ones fused attention
// weights by p_ij, so the tensor is exactly the term the kernels add.
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86ScoreBias.cpp):
//   ${A} ${SQ} ${SKV} ${DV}: sizes (SQ, SKV may be `?`: the output view's)
//   ${DV_WHOLE}: DV rounded down to 8; ${OT} the output's element type;
//   ${E0} the encoding's table; NARROW8, NARROW1: @narrow8's, @narrow1's bodies
// The entry point has the score-bias template's arguments, so the runtime
// calls both alike; Q is unread.

!O = memref<${A}x${SQ}x${SKV}x${DV}x${OT}, strided<[?, ?, ?, 1], offset: ?>>
!E0 = ${E0}
!Q = memref<1x1x1x8xf32>
!OUT8 = vector<8x${OT}>

// Item = (a SQ + i) SKV + j.
func.func @pejit_bias_item(%o: !O, %q: !Q, %e0: !E0, %item: index) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %DV = arith.constant ${DV} : index
  %whole = arith.constant ${DV_WHOLE} : index
  %SQ = memref.dim %o, %c1 : !O
  %SKV = memref.dim %o, %c2 : !O
  %j = arith.remui %item, %SKV : index
  %ai = arith.divui %item, %SKV : index
  %i = arith.remui %ai, %SQ : index
  %a = arith.divui %ai, %SQ : index
  %i32 = arith.index_cast %i : index to i32
  %j32 = arith.index_cast %j : index to i32
  %bucket = attn.value_term_bucket batch %c0, head %a, query %i32, key %j32
      operands(%e0 : !E0) lengths(%SQ, %SKV) : i32
  %m = arith.index_cast %bucket : i32 to index
  scf.for %c = %c0 to %whole step %c8 {
    %row = attn.value_term_row batch %c0, head %a, bucket %m, channel %c
        operands(%e0 : !E0) : vector<8xf32>
    %n = func.call @narrow8(%row) : (vector<8xf32>) -> !OUT8
    vector.store %n, %o[%a, %i, %j, %c] : !O, !OUT8
  }
  scf.for %c = %whole to %DV step %c1 {
    %x = attn.value_term_row batch %c0, head %a, bucket %m, channel %c
        operands(%e0 : !E0) : f32
    %n = func.call @narrow1(%x) : (f32) -> ${OT}
    memref.store %n, %o[%a, %i, %j, %c] : !O
  }
  return
}

// 8 f32 lanes as the output type.
func.func private @narrow8(%x: vector<8xf32>) -> !OUT8 {
  ${NARROW8}
}

// One f32 as the output type.
func.func private @narrow1(%x: f32) -> ${OT} {
  ${NARROW1}
}
