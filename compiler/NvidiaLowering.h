// From the instantiated nvidia template (a gpu.module) to PTX text, through
// MLIR's gpu-lower-to-nvvm-pipeline and LLVM's NVPTX backend, in process (no
// CUDA toolkit needed). ptxas, when present, is run by the runtime.
#ifndef PEJIT_COMPILER_NVIDIALOWERING_H
#define PEJIT_COMPILER_NVIDIALOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace pejit {

/// gpu, nvgpu, nvvm and the interfaces their lowering and serialization need.
void registerNvidiaDialects(mlir::DialectRegistry &registry);

/// Architectures pejit emits PTX for ("sm_80", "sm_90").
bool isSupportedNvidiaChip(const std::string &chip);

/// Unrolls the template's register loops, lowers the gpu.module to NVVM and
/// serializes it to PTX for `chip` (PTX ISA 8.0). `nvvmStage` receives the
/// module after the unrolling (the last MLIR stage before LLVM). Fails with
/// the diagnostics on the module's context.
mlir::FailureOr<std::string> lowerNvidiaToPtx(mlir::ModuleOp module, const std::string &chip,
                                              std::string *unrolledStage);

} // namespace pejit

#endif // PEJIT_COMPILER_NVIDIALOWERING_H
