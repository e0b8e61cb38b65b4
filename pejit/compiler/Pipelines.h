// Named pass pipelines of pejit, registered with pejit-opt (and later used by
// the runtime's stage list).
#ifndef PEJIT_COMPILER_PIPELINES_H
#define PEJIT_COMPILER_PIPELINES_H

namespace pejit {

/// Registers pejit's passes and named pipelines:
///  - `pejit-simplify`: canonicalize, then cse (clean-up between stages);
///  - `pejit-lower-to-llvm`: the tiled stage (scf/vector/memref/arith/math)
///    down to the LLVM dialect.
void registerPipelines();

/// The `pejit-lower-to-llvm` pipeline as text (upstream passes only, to run
/// on a builtin.module; no anchor op in the text).
const char *lowerToLLVMPipeline();

} // namespace pejit

#endif // PEJIT_COMPILER_PIPELINES_H
