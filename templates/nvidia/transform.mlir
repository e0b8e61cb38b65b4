// NVIDIA standalone QK transform template: pe.rope (and the pe ops after
// it) on its own (docs/standalone-kernels.md), the GPU form of
// templates/x86/qk_transform.mlir. The hooks are the same ones, expanded
// per element (vector width 1).
//
// One thread block = (row tile t, head h, batch b) of X [B, H, S, D]:
//   tile[r, c] = X[b, h, i0 + r, c]        coalesced, widened to f32 (shared)
//   tile[r]    = op_n(... op_0(tile[r]))   one row per thread, in place
//   O[b, h, i0 + r, c] = tile[r, c]        coalesced, narrowed to O's type
// A block reads all its rows before it writes any, and blocks own disjoint
// rows, so the runtime may pass the same buffer as X and O.
// The tables (RoPE's cos/sin per position) are the attention's:
// @pejit_prologue (launched first, over all positions) fills them for the
// ids as Q's; the key side has no ids.
//
// Parameters, substituted as text before parsing
// (pejit/compiler/passes/InstantiateNvidiaTransform.cpp):
//   ${BD} ${SD}: the batch and length as the memref types write them (a
//     number, or `?` for the call's); ${H} ${D} ${R} rows per block
//   ${T} ${OT}: element types of X and O (f32, f16, bf16); the tile is f32
//   ${THREADS}: threads per block; ${PB}: rows of the ids (axes x 1 or B)
//   ${SCRATCHD}: the tables' floats (a number, or `?`)
//   ${E0}: the pe ops' own table (a learned one), memref<1xf32> if none
//   LENGTH_ARGS, PROLOGUE_VIEWS, TRANSFORM_VIEWS: the call's lengths (i64)
//     and the views of the bare-pointer arguments (%B, %S, %x, %o,
//     %pos, %none, %scratch), generated
//   PARTS, PROLOGUES, TRANSFORMS: the chain's hook ops, generated
//     (pejit/compiler/passes/StandaloneChain.cpp)
//   WIDEN, NARROW: `%w = ...` from `%v`, one element (an extf, a truncf,
//     or a copy for f32)

!PT = memref<1x${T}>
!POT = memref<1x${OT}>
!PF = memref<1xf32>
!PI = memref<1xi64>
!X = memref<${BD}x${H}x${SD}x${D}x${T}>
!O = memref<${BD}x${H}x${SD}x${D}x${OT}>
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

// Block = (t, h, b): grid [ceil(S / R), H, B].
gpu.func @pejit_transform(%x_arg: !PT, %o_arg: !POT, %scratch_arg: !PF, ${LENGTH_ARGS},
                          %e0: !E0)
    workgroup(%tiles: !TILES {llvm.align = 16 : i64}) kernel {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %R = arith.constant ${R} : index
  %D = arith.constant ${D} : index
  %THREADS = arith.constant ${THREADS} : index
${TRANSFORM_VIEWS}
  %tid = gpu.thread_id x
  %t = gpu.block_id x
  %h = gpu.block_id y
  %b = gpu.block_id z
  %row0 = arith.muli %t, %R : index
  %left = arith.subi %S, %row0 : index
  %rows = arith.minui %left, %R : index
  %elements = arith.muli %rows, %D : index
  scf.for %e = %tid to %elements step %THREADS {
    %r = arith.divui %e, %D : index
    %c = arith.remui %e, %D : index
    %i = arith.addi %row0, %r : index
    %v = memref.load %x[%b, %h, %i, %c] : !X
    ${WIDEN}
    memref.store %w, %tiles[%r, %c] : !TILES
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
    memref.store %w, %o[%b, %h, %i, %c] : !O
  }
  gpu.return
}

}
}
