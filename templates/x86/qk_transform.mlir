// x86 standalone QK transform template: pe.rope on its own
// (docs/standalone-kernels.md), e.g. the KV-append kernel that rotates
// new K rows as it writes them into a cache; an embedding plus its
// absolute position embeddings (several pe ops, one pass).
//
// One work item = (batch b, head h, row tile t) of X [B, H, S, D]:
//   tile = qk_transform(X[b, h, i0 : i0 + nr])   read and rotated in one pass
//   O[b, h, i0 : i0 + nr] = tile                 narrowed to O's type
// An output of more than STREAM_MIN elements that is not X itself is
// stored non-temporally.
// The item reads its rows into the tile before it writes any of O, and
// items own disjoint rows, so O may be X itself (in place) or any strided
// view of X's shape: rows [t, t + s) of a [b, h, capacity, d] cache, or
// one page row of a paged cache.
// The tables (RoPE's cos/sin per position) are the attention's: the
// prologue fills them for the ids as Q's, the key side empty (0 ids).
//
// Parameters, substituted as text before parsing
// (attn-instantiate-x86-template, pejit/compiler/passes/InstantiateX86Transform.cpp):
//   ${B} ${S}: the batch and length, or `?` where the call gives them
//   ${H} ${D} (D % 8 == 0) ${R} rows per item
//   ${STREAM_MIN} the output size past which stores are non-temporal
//   ${PREFETCH_NEXT} true to prefetch the next item's rows (16-bit X)
//   ${T} ${OT} element types of X and O (f32, f16, bf16); the tile is f32
//   ${PB} rows of the position ids: axes x (1 or B)
//   ${E0} the encoding's own tensor (a learned table), memref<1xf32> if none
//   PARTS, PROLOGUES, TRANSFORMS: the hook ops of the chain of pe ops, op 0
//     reading the rows of X, the others in place, each with its part of
//     the scratch (pejit/compiler/passes/StandaloneChain.cpp)
//   NARROW8: the body of @narrow8 (a plain return for f32)

!X = memref<${B}x${H}x${S}x${D}x${T}, strided<[?, ?, ?, 1], offset: ?>>
!O = memref<${B}x${H}x${S}x${D}x${OT}, strided<[?, ?, ?, 1], offset: ?>>
!POS = memref<${PB}x${S}xi64>
!NOPOS = memref<${PB}x0xi64>
!SCRATCH = memref<?xf32>
!PART = memref<?xf32, strided<[1], offset: ?>>
!E0 = ${E0}
!ROWS = memref<?x${D}x${T}, strided<[?, 1], offset: ?>>
!TILE = memref<${R}x${D}xf32>
!V8 = vector<8xf32>
!OUT8 = vector<8x${OT}>

// Once per call, before any item, as `step` calls on all cores: call
// `first` fills the position rows first, first + step, ... (from %e0 for
// an encoding with a table of its own).
func.func @pejit_prologue(%pos: !POS, %none: !NOPOS, %scratch: !SCRATCH, %first: index,
                          %step: index, %e0: !E0) attributes {llvm.emit_c_interface, pejit.cold} {
  %c1 = arith.constant 1 : index
  %S = memref.dim %pos, %c1 : !POS
${PARTS}
${PROLOGUES}
  return
}

// Item = (b H + h) NT + t, NT = ceil(S / R).
func.func @pejit_transform_item(%x: !X, %o: !O, %scratch: !SCRATCH, %item: index)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %R = arith.constant ${R} : index
  %H = arith.constant ${H} : index
  %D = arith.constant ${D} : index
  %S = memref.dim %x, %c2 : !X
  %s_up0 = arith.addi %S, %R : index
  %s_up = arith.subi %s_up0, %c1 : index
  %NT = arith.divui %s_up, %R : index
  %t = arith.remui %item, %NT : index
  %bh = arith.divui %item, %NT : index
  %h = arith.remui %bh, %H : index
  %b = arith.divui %bh, %H : index
  %i0 = arith.muli %t, %R : index
  %left = arith.subi %S, %i0 : index
  %nr = arith.minui %left, %R : index
  // 16-bit X: the next item's rows (the one this worker most likely runs
  // next: runs of items are consecutive) into cache while this one runs,
  // two prefetches per 64-byte line. At d = 128 a 16-bit item is one 4 KiB
  // page, where the hardware prefetchers stop (session 21, bf16 [1, 32,
  // 4096, 128]: 9-12% faster with 4 KiB pages, no change with huge
  // pages; for f32, whose item is twice the bytes, 7-19% slower).
  %prefetch = arith.constant ${PREFETCH_NEXT}
  %next = arith.addi %item, %c1 : index
  %next_t = arith.remui %next, %NT : index
  %next_bh = arith.divui %next, %NT : index
  %next_h = arith.remui %next_bh, %H : index
  %next_b = arith.divui %next_bh, %H : index
  %B = memref.dim %x, %c0 : !X
  %next_in = arith.cmpi ult, %next_b, %B : index
  %prefetch_next = arith.andi %prefetch, %next_in : i1
  scf.if %prefetch_next {
    %c16 = arith.constant 16 : index
    %next_i0 = arith.muli %next_t, %R : index
    %next_left = arith.subi %S, %next_i0 : index
    %next_nr = arith.minui %next_left, %R : index
    scf.for %r = %c0 to %next_nr step %c1 {
      %i = arith.addi %next_i0, %r : index
      scf.for %d = %c0 to %D step %c16 {
        memref.prefetch %x[%next_b, %next_h, %i, %d], read, locality<3>, data : !X
      }
    }
  }
  %tile = memref.alloca() {alignment = 64 : i64} : !TILE
  %rows = memref.subview %x[%b, %h, %i0, 0] [1, 1, %nr, ${D}] [1, 1, 1, 1] : !X to !ROWS
${PARTS}
${TRANSFORMS}  // A large output that is not X itself is written with non-temporal
  // stores: no read for ownership of lines nothing will read soon. In
  // place, X's lines are in cache already and stay there.
  %rows_all0 = arith.muli %B, %H : index
  %rows_all = arith.muli %rows_all0, %S : index
  %elements = arith.muli %rows_all, %D : index
  %stream_min = arith.constant ${STREAM_MIN} : index
  %large = arith.cmpi ugt, %elements, %stream_min : index
  %x_base = memref.extract_aligned_pointer_as_index %x : !X -> index
  %o_base = memref.extract_aligned_pointer_as_index %o : !O -> index
  %x_meta:10 = memref.extract_strided_metadata %x : !X -> memref<${T}>, index, index, index, index, index, index, index, index, index
  %o_meta:10 = memref.extract_strided_metadata %o : !O -> memref<${OT}>, index, index, index, index, index, index, index, index, index
  %same_base = arith.cmpi eq, %x_base, %o_base : index
  %same_offset = arith.cmpi eq, %x_meta#1, %o_meta#1 : index
  %in_place = arith.andi %same_base, %same_offset : i1
  %true = arith.constant true
  %apart = arith.xori %in_place, %true : i1
  %streaming = arith.andi %large, %apart : i1
  scf.if %streaming {
    scf.for %r = %c0 to %nr step %c1 {
      %i = arith.addi %i0, %r : index
      scf.for %d = %c0 to %D step %c8 {
        %v = vector.load %tile[%r, %d] : !TILE, !V8
        %n = func.call @narrow8(%v) : (!V8) -> !OUT8
        vector.store %n, %o[%b, %h, %i, %d] {nontemporal = true} : !O, !OUT8
      }
    }
  } else {
    scf.for %r = %c0 to %nr step %c1 {
      %i = arith.addi %i0, %r : index
      scf.for %d = %c0 to %D step %c8 {
        %v = vector.load %tile[%r, %d] : !TILE, !V8
        %n = func.call @narrow8(%v) : (!V8) -> !OUT8
        vector.store %n, %o[%b, %h, %i, %d] : !O, !OUT8
      }
    }
  }
  return
}

// 8 f32 lanes as the output type.
func.func private @narrow8(%x: !V8) -> !OUT8 {
  ${NARROW8}
}
