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
    - a score-bias op feeding `bias`, used only there, whose operands are
      all the encoding's own tensors (`pe.alibi` has none, `pe.t5_bias` its
      table) becomes a fused score bias; `bias` goes away and those tensors
      become the attention's `encoding_operands`.
    - `pe.relative_key` on the attention's own Q feeding `key_term` (Shaw's
      a^K), when no fused QK transform rotates Q, becomes a fused key term;
      its table becomes an encoding operand.
    - any other `bias` (a function argument, or a bias op that cannot move)
      becomes `#pe.bias_tensor` with the tensor as its encoding operand: the
      kernel reads it tile by tile, the general fallback.
    Only encodings whose attribute says `isFusable()` move. A rotated K (or Q)
    with another user stays unfused, since it is materialized anyway; the IR
    stays correct either way. The pass also makes `scale` explicit
    (1/sqrt(d) when absent), as the fused form always carries it.
  }];
  let dependentDialects = ["::pejit::attn::AttnDialect", "::pejit::pe::PEDialect"];
}

def DeriveBackward : Pass<"attn-derive-backward", "::mlir::ModuleOp"> {
  let summary = "Derive the backward function of a fused attention (docs/backward.md)";
  let description = [{
    For each function whose body is one fused attn.attention on its
    arguments, returned, adds `@<name>_backward` beside it:

    ```
    func @f(q, k, v, ids..., ops...) -> o
    func @f_backward(q, k, v, ids..., ops..., o, dO) -> (dq, dk, dv, d ops...)
      = attn.attention_backward with the forward's operands and attributes
    ```
    The gradients after dv are those of the encoding operands that are
    function arguments and that their encoding can differentiate
    (`isDifferentiableOperand`), in argument order (`grad_operands`).
    Position ids get none. Run it after pe-fuse-into-attention: the
    backward of an unfused pe op on Q or K would need its own adjoint
    kernel. With score-shaped-gradients=false, a bias tensor (an operand
    whose gradient is score-shaped, s x s) is held fixed: a mask.

    A function that is a standalone chain of pe ops with a QK transform
    (pe.rope on an argument, docs/standalone-kernels.md) gets its input
    gradient, the chain reversed with each QK transform's adjoint:

    ```
    func @f(x, ids, ops...) -> y = pe.rope x, ids
    func @f_backward(dy, ids, ops...) -> dx = pe.rope adjoint dy, ids
    ```
    Additive ops (pe.sinusoidal, pe.learned) pass the gradient through;
    a chain of those alone gets no backward (dx = dy).

    A function that writes out one score bias with a tensor (a
    materialized pe.t5_bias) gets that tensor's gradient from dBias:
    `func @f_backward(table, dBias) -> d table` (pe.score_bias_grad).

    A function whose body is one attn.linear_attention gets
    `attn.linear_attention_backward` (o and dO before the ids, results dq,
    dk, dv); a carried `state(...)` is an error (it has no backward).
  }];
  let options = [
    Option<"operandGradients", "operand-gradients", "bool", /*default=*/"true",
           "also return the differentiable encoding operands' gradients">,
    Option<"scoreShapedGradients", "score-shaped-gradients", "bool", /*default=*/"true",
           "with operand-gradients, also those of score-shaped operands (a bias "
           "tensor's, s x s by nature)">,
  ];
  let dependentDialects = ["::pejit::attn::AttnDialect", "::mlir::func::FuncDialect"];
}

def InstantiateX86Template : Pass<"attn-instantiate-x86-template", "::mlir::ModuleOp"> {
  let summary = "Instantiate the x86 AVX2 template for the fused attention";
  let description = [{
    The module's one function (a fused attn.attention on its arguments, static
    shapes, f32, f16 or bf16) is replaced by the kernel functions of the x86 AVX2 template
    (templates/x86/avx2_attention.mlir): @pejit_prologue, run once per call,
    and @pejit_item, run once per (batch, query head, query tile). Shapes,
    tiles, mask flags and the scale are substituted into the template; its
    hook ops (attn.qk_prologue, attn.qk_transform, attn.score_mod) are
    expanded by the fused encodings' PositionalEncodingAttrInterface hooks
    (and the softcap). The module attribute `pejit.kernel` describes the
    kernel to the runtime.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"144",
           "query rows per work item (multiple of 48)">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"96",
           "keys per KV tile (multiple of 6)">,
    Option<"isa", "isa", "std::string", /*default=*/"\"\"",
           "x86 ISA family (avx2, avx512, avx512_bf16, amx); empty: "
           "PEJIT_X86_ISA, else the host's best (docs/isa.md)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::func::FuncDialect"];
}

def InstantiateNvidiaTemplate : Pass<"attn-instantiate-nvidia-template", "::mlir::ModuleOp"> {
  let summary = "Instantiate the NVIDIA tensor-core template for the fused attention";
  let description = [{
    The module's one function (a fused attn.attention on f16 or bf16 tensors
    of static shape) is replaced by a gpu.module holding the kernel of
    templates/nvidia/mma_attention.mlir: one thread block of tile-m / 16
    warps per (query tile, query head, batch), S and P.V on tensor cores
    (mma.sync m16n8k16, f32 accumulation), online softmax on the accumulator
    fragments. attn.score_mod, one score per thread and fragment entry, is
    expanded by the fused score biases' pointwise hooks (e.g. ALiBi). A
    per-query-tile table (Shaw's Q_tile . a^K^T) and a value term's
    accumulator (Shaw's a^V) live in shared memory. The module attribute
    `pejit.kernel` gives grid, block, dtype and argument roles.
  }];
  let options = [
    Option<"tileM", "tile-m", "int64_t", /*default=*/"0",
           "query rows per thread block: 16 x warps (16, 32, 64, 128); 0: from sq">,
    Option<"tileN", "tile-n", "int64_t", /*default=*/"0",
           "keys per KV tile (multiple of 16, up to 128); 0: 64, halved until shared "
           "memory fits">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::LLVM::LLVMDialect"];
}

def UnrollAnnotatedLoops : Pass<"pejit-unroll-annotated-loops"> {
  let summary = "Unroll scf.for loops marked `pejit.unroll` (fully) or "
                "`pejit.unroll_factor = N` (by N)";
  let description = [{
    GPU templates keep per-thread register arrays (mma accumulators, P
    fragments) in small private memrefs indexed by loop counters. Unrolling
    those loops completely makes every index a constant, so LLVM promotes the
    arrays to registers (no local memory). Loops are unrolled innermost
    first; a marked loop whose trip count is not a constant is an error that
    names it.

    The x86 template marks its register-blocked inner loops with
    `pejit.unroll_factor = 4`: four FMA steps per trip (LLVM's own unroller
    leaves these long bodies alone). A trip count that is not a constant or
    not a multiple of N gets a remainder loop. The factor must be a positive
    integer.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
}

#endif // PEJIT_COMPILER_PASSES_TD
