#ifndef PEJIT_COMPILER_PASSES_TD
#define PEJIT_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseIntoAttention : Pass<"pe-fuse-into-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuse positional encodings into attn.attention";
  let description = [{
    Moves positional encodings from their tensor ops into the attention that
    consumes them, so the kernel applies them per tile:
    - `pe.rope` on Q and on K (the same encoding, each result used only by
      this attention) becomes the attention's QK transform; the rope inputs
      become Q and K and the ropes' positions its query/key positions.
    - a score-bias op that needs no tensor operands (e.g. `pe.alibi`) feeding
      `bias`, used only there, becomes a fused score bias; `bias` goes away.
    Only encodings whose attribute says `isFusable()` move. A rotated K (or Q)
    with another user stays unfused, since it is materialized anyway; the IR
    stays correct either way. The pass also makes `scale` explicit
    (1/sqrt(d) when absent), as the fused form always carries it.
  }];
  let dependentDialects = ["::pejit::attn::AttnDialect", "::pejit::pe::PEDialect"];
}

#endif // PEJIT_COMPILER_PASSES_TD
