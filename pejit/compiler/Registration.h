// The dialects every pejit stage uses, registered in one place for pejit-opt,
// the runtime's compiler and the tests.
#ifndef PEJIT_COMPILER_REGISTRATION_H
#define PEJIT_COMPILER_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"

namespace pejit {

/// pe, attn and the upstream dialects of the tiled and lowered stages (func,
/// arith, math, vector, scf, cf, memref, tensor, index, ub, llvm; gpu, nvgpu,
/// nvvm for the nvidia stages), with the
/// interfaces that lowering to LLVM and translating to LLVM IR need.
void registerDialects(mlir::DialectRegistry &registry);

} // namespace pejit

#endif // PEJIT_COMPILER_REGISTRATION_H
