// x86 materialized score bias template: a score-bias pe op on its own
// (pe.alibi, pe.t5_bias, pe.relative_key; docs/standalone-kernels.md
// "Materialized biases"), for users who need the [b, h, sq, skv] tensor.
//
// One work item = (batch b, head h, query row i) of O [B, H, SQ, SKV]:
//   O[b, h, i, j] = score_mod(0, b, h, i, j)   8 keys per vector, then one
// The encoding's pointwise score hook (attn.score_mod) on a zero score is
// its bias: the same hook fused attention calls, so the materialized
// tensor is exactly what the kernels add. A key term (Shaw's q_i . a^K)
// first fills its query-tile scratch from a one-row tile, Q[b, h, i, :]
// (attn.query_tile_prologue), and the score hook reads it at scale 1.
//
// Parameters, substituted as text before parsing
// (compiler/passes/InstantiateX86ScoreBias.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?` (the output view's at run); ${H}
//   ${OT} the output's element type; ${E0} the encoding's table (T5's) or
//   memref<1xf32>; OPERANDS: the score_mod's operands(...) clause
//   ${Q} Q's memref type (a key term) or memref<1x1x1x8xf32>, unread
//   QUERY_TILE: the one-row tile's prologue (a key term) or nothing
//   TILE: the score_mod's tile(...) clause or nothing
//   NARROW8, NARROW1: the bodies of @narrow8 and @narrow1

!O = memref<${B}x${H}x${SQ}x${SKV}x${OT}, strided<[?, ?, ?, 1], offset: ?>>
!E0 = ${E0}
!Q = ${Q}
!V8 = vector<8xf32>
!I8 = vector<8xi32>
!OUT8 = vector<8x${OT}>

// Item = (b H + h) SQ + i.
func.func @pejit_bias_item(%o: !O, %q: !Q, %e0: !E0, %item: index) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %H = arith.constant ${H} : index
  %SQ = memref.dim %o, %c2 : !O
  %SKV = memref.dim %o, %c3 : !O
  %i = arith.remui %item, %SQ : index
  %bh = arith.divui %item, %SQ : index
  %h = arith.remui %bh, %H : index
  %b = arith.divui %bh, %H : index
  %i32 = arith.index_cast %i : index to i32
  %query = vector.broadcast %i32 : i32 to !I8
  %lanes = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : !I8
  %zero8 = arith.constant dense<0.0> : !V8
  %zero = arith.constant 0.0 : f32
  ${QUERY_TILE}
  %whole0 = arith.divui %SKV, %c8 : index
  %whole = arith.muli %whole0, %c8 : index
  scf.for %j = %c0 to %whole step %c8 {
    %j32 = arith.index_cast %j : index to i32
    %first = vector.broadcast %j32 : i32 to !I8
    %keys = arith.addi %first, %lanes : !I8
    %bias = attn.score_mod %zero8, batch %b, head %h, query %query, key %keys
        ${OPERANDS} ${TILE} lengths(%SQ, %SKV) : !V8, !I8
    %n = func.call @narrow8(%bias) : (!V8) -> !OUT8
    vector.store %n, %o[%b, %h, %i, %j] : !O, !OUT8
  }
  scf.for %j = %whole to %SKV step %c1 {
    %j32 = arith.index_cast %j : index to i32
    %bias = attn.score_mod %zero, batch %b, head %h, query %i32, key %j32
        ${OPERANDS} ${TILE} lengths(%SQ, %SKV) : f32, i32
    %n = func.call @narrow1(%bias) : (f32) -> ${OT}
    memref.store %n, %o[%b, %h, %i, %j] : !O
  }
  return
}

// 8 f32 lanes as the output type.
func.func private @narrow8(%x: !V8) -> !OUT8 {
  ${NARROW8}
}

// One f32 as the output type.
func.func private @narrow1(%x: f32) -> ${OT} {
  ${NARROW1}
}
