// The x86 backend's stage table (Stages.h):
//   source    the user's IR (pe + attn on tensors)
//   fused     after pe-fuse-into-attention
//   tiled     after attn-instantiate-x86-template (the AVX2 template)
//   codegen   ELF objects for the host CPU: one per codegen part of the
//             tiled module (CodegenParts.h), each lowered by
//             pejit-lower-to-llvm, optimized (optimizeKernel) and compiled at
//             O3 on its own thread (ParallelCodegen.h); no text
//   llvm      derived: the tiled module lowered whole by the same pipeline
//   llvm-ir   derived: optimized LLVM IR of the llvm stage
//   asm       derived: host assembly, part by part as the objects were built
// Deriving llvm at every compile would cost ~6 ms, so it waits for a request.
// The runtime loads the objects with LLVM ORC (ObjectCode.h).
#ifndef PEJIT_COMPILER_BACKENDS_X86_X86BACKEND_H
#define PEJIT_COMPILER_BACKENDS_X86_X86BACKEND_H

#include "pejit/compiler/Stages.h"
#include "pejit/compiler/Target.h"

namespace pejit {

/// The table, with the tiles its tiled stage instantiates.
StageTable x86Stages(const X86TileConfig &tiles = {});

} // namespace pejit

#endif // PEJIT_COMPILER_BACKENDS_X86_X86BACKEND_H
