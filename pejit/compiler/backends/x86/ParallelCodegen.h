// Machine code for a kernel module in parts compiled at once
// (CodegenParts.h): each part on one thread, lowered to the LLVM dialect
// when it is not yet, then translated to LLVM IR in its own context,
// optimized and emitted.
#ifndef PEJIT_RUNTIME_PARALLELCODEGEN_H
#define PEJIT_RUNTIME_PARALLELCODEGEN_H

#include "pejit/compiler/backends/x86/CodegenParts.h"
#include "pejit/compiler/backends/x86/ObjectCode.h"
#include "pejit/core/Types.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace pejit {

/// The codegen parts of the tiled stage (func.func and the dialects it
/// uses), each lowered to the LLVM dialect by pejit-lower-to-llvm: all at
/// once, on the MLIR context's threads. The public functions they define
/// are those of the llvm stage: the whole module lowered the same way.
Expected<std::vector<CodegenPart>> lowerForCodegen(mlir::ModuleOp tiled);

/// The machine code of parts in the LLVM dialect (lowerForCodegen's, or
/// partitionForCodegen's of the llvm stage), one ELF object (or its
/// assembly) per part. The parts are ordered largest first by an estimate of
/// their backend time (each part's `size` is set to it), and the results come
/// in that order. Up to `threads` threads each take the next part, verify it
/// and compile it. An error names the failing part's step.
Expected<std::vector<std::string>> compileParts(std::vector<CodegenPart> parts, int threads,
                                                CodeKind kind = CodeKind::Object);

} // namespace pejit

#endif // PEJIT_RUNTIME_PARALLELCODEGEN_H
