// x86 materialized score bias template: a score-bias pe op on its own
// (pe.alibi, pe.t5_bias, pe.relative_key; docs/standalone-kernels.md
// "Materialized biases"), for users who need the [b, h, sq, skv] tensor.
//
// One work item = (batch b, head h, rows [i0, i0 + nr)) of O [B, H, SQ, SKV],
// R rows per item:
//   O[b, h, i, j] = score_mod(0, b, h, i, j)   8 keys per vector, then one
// The encoding's pointwise score hook (attn.score_mod) on a zero score is
// its bias: the same hook fused attention calls, so the materialized
// tensor is exactly what the kernels add. A key term (Shaw's q_i . a^K)
// first fills its query-tile scratch from a one-row tile, Q[b, h, i, :]
// (attn.query_tile_prologue), and the score hook reads it at scale 1.
//
// A bias of the distance alone (isDistanceOnly: T5, ALiBi's causal and
// symmetric forms) depends on j - i only, so each chunk of C keys [j0, j0 +
// nc) takes one row of nc + nr - 1 distances, the hook at the item's last
// row q = i0 + nr - 1:
//   diag[t] = score_mod(0, b, h, q, j0 + t),   t < nc + nr - 1
//   O[b, h, i0 + r, j0 + c] = diag[c + nr - 1 - r]      (a copy per row)
// (the key j0 + t may pass skv: the hook only forms distances). An output
// of more than STREAM_MIN elements is stored non-temporally.
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateX86ScoreBias.cpp):
//   ${B} ${SQ} ${SKV}: sizes or `?` (the output view's at run); ${H}
//   ${OT} the output's element type; ${E0} the encoding's table (T5's) or
//   memref<1xf32>; OPERANDS: the score_mod's operands(...) clause
//   ${Q} Q's memref type (a key term) or memref<1x1x1x8xf32>, unread
//   QUERY_TILE: the one-row tile's prologue (a key term) or nothing
//   TILE: the score_mod's tile(...) clause or nothing
//   ${R} rows per item (1 unless the bias is of the distance alone),
//   ${DISTANCE_ONLY} true or false, ${C} keys per chunk, ${DIAG} = C + R + 7,
//   ${STREAM_MIN} the output size past which stores are non-temporal
//   NARROW8, NARROW1: the bodies of @narrow8 and @narrow1

!O = memref<${B}x${H}x${SQ}x${SKV}x${OT}, strided<[?, ?, ?, 1], offset: ?>>
!E0 = ${E0}
!Q = ${Q}
!V8 = vector<8xf32>
!I8 = vector<8xi32>
!OUT8 = vector<8x${OT}>
!DIAG = memref<${DIAG}xf32>

// Item = (b H + h) NT + t, NT = ceil(SQ / R).
func.func @pejit_bias_item(%o: !O, %q: !Q, %e0: !E0, %item: index) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %C = arith.constant ${C} : index
  %H = arith.constant ${H} : index
  %distance_only = arith.constant ${DISTANCE_ONLY}
  %SQ = memref.dim %o, %c2 : !O
  %SKV = memref.dim %o, %c3 : !O
  %sq_up0 = arith.addi %SQ, %R : index
  %sq_up = arith.subi %sq_up0, %c1 : index
  %NT = arith.divui %sq_up, %R : index
  %t = arith.remui %item, %NT : index
  %bh = arith.divui %item, %NT : index
  %h = arith.remui %bh, %H : index
  %b = arith.divui %bh, %H : index
  %i0 = arith.muli %t, %R : index
  %left = arith.subi %SQ, %i0 : index
  %nr = arith.minui %left, %R : index
  %lanes = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : !I8
  %zero8 = arith.constant dense<0.0> : !V8
  %zero = arith.constant 0.0 : f32
  %whole0 = arith.divui %SKV, %c8 : index
  %whole = arith.muli %whole0, %c8 : index
  scf.if %distance_only {
    // An output past the caches (over STREAM_MIN elements) is written with
    // non-temporal stores: no read for ownership of lines it overwrites.
    %B = memref.dim %o, %c0 : !O
    %rows_all0 = arith.muli %B, %H : index
    %rows_all = arith.muli %rows_all0, %SQ : index
    %elements = arith.muli %rows_all, %SKV : index
    %stream_min = arith.constant ${STREAM_MIN} : index
    %streaming = arith.cmpi ugt, %elements, %stream_min : index
    %diag = memref.alloca() {alignment = 64 : i64} : !DIAG
    %nr1 = arith.subi %nr, %c1 : index
    %last = arith.addi %i0, %nr1 : index
    %last32 = arith.index_cast %last : index to i32
    %query = vector.broadcast %last32 : i32 to !I8
    scf.for %j0 = %c0 to %SKV step %C {
      %keys_left = arith.subi %SKV, %j0 : index
      %nc = arith.minui %keys_left, %C : index
      %span = arith.addi %nc, %nr1 : index
      scf.for %d = %c0 to %span step %c8 {
        %jd = arith.addi %j0, %d : index
        %jd32 = arith.index_cast %jd : index to i32
        %first = vector.broadcast %jd32 : i32 to !I8
        %keys = arith.addi %first, %lanes : !I8
        %bias = attn.score_mod %zero8, batch %b, head %h, query %query, key %keys
            ${OPERANDS} lengths(%SQ, %SKV) : !V8, !I8
        vector.store %bias, %diag[%d] : !DIAG, !V8
      }
      %nc_whole0 = arith.divui %nc, %c8 : index
      %nc_whole = arith.muli %nc_whole0, %c8 : index
      scf.for %r = %c0 to %nr step %c1 {
        %i = arith.addi %i0, %r : index
        %shift = arith.subi %nr1, %r : index
        scf.if %streaming {
          scf.for %c = %c0 to %nc_whole step %c8 {
            %at = arith.addi %c, %shift : index
            %v = vector.load %diag[%at] : !DIAG, !V8
            %n = func.call @narrow8(%v) : (!V8) -> !OUT8
            %j = arith.addi %j0, %c : index
            vector.store %n, %o[%b, %h, %i, %j] {nontemporal = true} : !O, !OUT8
          }
        } else {
          scf.for %c = %c0 to %nc_whole step %c8 {
            %at = arith.addi %c, %shift : index
            %v = vector.load %diag[%at] : !DIAG, !V8
            %n = func.call @narrow8(%v) : (!V8) -> !OUT8
            %j = arith.addi %j0, %c : index
            vector.store %n, %o[%b, %h, %i, %j] : !O, !OUT8
          }
        }
        scf.for %c = %nc_whole to %nc step %c1 {
          %at = arith.addi %c, %shift : index
          %v = memref.load %diag[%at] : !DIAG
          %n = func.call @narrow1(%v) : (f32) -> ${OT}
          %j = arith.addi %j0, %c : index
          memref.store %n, %o[%b, %h, %i, %j] : !O
        }
      }
    }
  } else {
    scf.for %r = %c0 to %nr step %c1 {
      %i = arith.addi %i0, %r : index
      %i32 = arith.index_cast %i : index to i32
      %query = vector.broadcast %i32 : i32 to !I8
      ${QUERY_TILE}
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
    }
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
