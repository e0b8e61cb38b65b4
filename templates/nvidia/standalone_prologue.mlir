// The standalone kernels' @pejit_prologue (templates/nvidia/transform.mlir,
// embed.mlir): each pe op's per-position table (RoPE's cos/sin, a
// sinusoidal or learned row), spread over all threads of the grid: thread
// `first` fills the position rows first, first + step, ...
// Uses the including template's types (!PI, !PF, !POS, !NOPOS, !SCRATCH,
// !PART, !E0) and parameters (LENGTH_ARGS, PROLOGUE_VIEWS, PARTS,
// PROLOGUES).
gpu.func @pejit_prologue(%pos_arg: !PI, %none_arg: !PI, %scratch_arg: !PF, ${LENGTH_ARGS},
                         %e0: !E0) kernel {
${PROLOGUE_VIEWS}
  %tid = gpu.thread_id x
  %bid = gpu.block_id x
  %bdim = gpu.block_dim x
  %gdim = gpu.grid_dim x
  %first0 = arith.muli %bid, %bdim : index
  %first = arith.addi %first0, %tid : index
  %step = arith.muli %gdim, %bdim : index
${PARTS}
${PROLOGUES}
  gpu.return
}
