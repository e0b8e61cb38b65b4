// NVIDIA token-embedding template: pe.embed, then the pe ops on its result
// (docs/standalone-kernels.md "pe.embed"), in one pass over the output; the
// GPU form of templates/x86/embed.mlir, with the same hooks expanded per
// element (vector width 1).
//
// One thread block = (row tile t, batch b) of O [B, S, D] (read as
// [B, 1, S, D]):
//   tile[r, c] = table[tokens[b, i0 + r], c] * scale   coalesced gather, f32
//   tile[r] = add_k(tile[r])   for each pe op k, one row per thread (x + PE)
//   O[b, 0, i0 + r, c] = tile[r, c]                     narrowed to O's type
// Tokens were checked against the table's rows by `run`; the gather still
// clamps, so no token reads past it.
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateNvidiaTransform.cpp): those of transform.mlir,
// and ${V} ${LAST_ROW} the table's rows and V - 1, ${TT} its element type,
// ${SCALE} the embedding scale as an f32 literal, EMBED_VIEWS the views of
// %tokens, %table, %o and %scratch.

!PT = memref<1x${TT}>
!POT = memref<1x${OT}>
!PF = memref<1xf32>
!PI = memref<1xi64>
!TOK = memref<${BD}x${SD}xi64>
!TABLE = memref<${V}x${D}x${TT}>
!O = memref<${BD}x1x${SD}x${D}x${OT}>
!POS = memref<${PB}x${SD}xi64>
!NOPOS = memref<${PB}x0xi64>
!SCRATCH = memref<${SCRATCHD}xf32>
!PART = memref<?xf32, strided<[1], offset: ?>>
!E0 = ${E0}
!TILES = memref<${R}x${DP}xf32, #gpu.address_space<workgroup>>
!TILE = memref<1x${D}xf32, strided<[${DP}, 1], offset: ?>, #gpu.address_space<workgroup>>

module attributes {gpu.container_module} {
gpu.module @pejit_nvidia {

// @pejit-blocks

// Block = (t, b): grid [ceil(S / R), 1, B].
gpu.func @pejit_embed(%tokens_arg: !PI, %table_arg: !PT, %o_arg: !POT, %scratch_arg: !PF,
                      ${LENGTH_ARGS}, %e0: !E0)
    workgroup(%tiles: !TILES {llvm.align = 16 : i64}) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %THREADS = arith.constant ${THREADS} : index
  %zero = arith.constant 0 : i64
  %last = arith.constant ${LAST_ROW} : i64
  %scale = arith.constant ${SCALE} : f32
${EMBED_VIEWS}
  %tid = gpu.thread_id x
  %t = gpu.block_id x
  %b = gpu.block_id z
  %row0 = arith.muli %t, %R : index
  %left = arith.subi %S, %row0 : index
  %rows = arith.minui %left, %R : index
  %elements = arith.muli %rows, %D : index
  scf.for %e = %tid to %elements step %THREADS {
    %r = arith.divui %e, %D : index
    %c = arith.remui %e, %D : index
    %i = arith.addi %row0, %r : index
    %token = memref.load %tokens[%b, %i] : !TOK
    %low = arith.maxsi %token, %zero : i64
    %row64 = arith.minsi %low, %last : i64
    %row = arith.index_cast %row64 : i64 to index
    %v = memref.load %table[%row, %c] : !TABLE
    ${WIDEN}
    %scaled = arith.mulf %w, %scale : f32
    memref.store %scaled, %tiles[%r, %c] : !TILES
  }
  gpu.barrier
${PARTS}
  scf.for %r = %tid to %rows step %THREADS {
    %tile = memref.subview %tiles[%r, 0] [1, ${D}] [1, 1] : !TILES to !TILE
    %nr = arith.constant 1 : index
    %i0 = arith.addi %row0, %r : index
${TRANSFORMS}  }
  gpu.barrier
  scf.for %e = %tid to %elements step %THREADS {
    %r = arith.divui %e, %D : index
    %c = arith.remui %e, %D : index
    %i = arith.addi %row0, %r : index
    %v = memref.load %tiles[%r, %c] : !TILES
    ${NARROW}
    memref.store %w, %o[%b, %c0, %i, %c] : !O
  }
  gpu.return
}

}
}
