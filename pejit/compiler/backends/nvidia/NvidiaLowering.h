// From the instantiated nvidia template (a gpu.module) to PTX text, through
// MLIR's gpu-lower-to-nvvm-pipeline and LLVM's NVPTX backend, in process.
// That lowering turns math ops (exp2, fma, roundeven, pow, ...) into calls
// to the CUDA toolkit's libdevice, which is linked into every kernel (its
// nvvm/libdevice/libdevice.10.bc is the only toolkit file needed); ptxas,
// when present, is run by the nvidia backend's last stage (Ptxas.h).
#ifndef PEJIT_COMPILER_BACKENDS_NVIDIA_NVIDIALOWERING_H
#define PEJIT_COMPILER_BACKENDS_NVIDIA_NVIDIALOWERING_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace pejit {

/// Architectures pejit emits PTX for ("sm_80", "sm_90").
bool isSupportedNvidiaChip(const std::string &chip);

/// Unrolls the template's register loops (pejit-unroll-annotated-loops,
/// then canonicalize, cse, symbol-dce): the last MLIR stage before NVVM.
mlir::LogicalResult unrollNvidiaRegisterLoops(mlir::ModuleOp module);

/// Lowers the unrolled gpu.module to NVVM and serializes it to PTX for
/// `chip` (PTX ISA 8.0). `cudaToolkit` is the toolkit whose nvvm/libdevice is linked (empty: MLIR's
/// own search, CUDA_ROOT / CUDA_HOME / CUDA_PATH). A kernel that still calls
/// a libdevice function (none found) is an error naming it. Fails with the
/// diagnostics on the module's context.
mlir::FailureOr<std::string> lowerNvidiaToPtx(mlir::ModuleOp module, const std::string &chip,
                                              const std::string &cudaToolkit = "");

/// The CUDA toolkit to take libdevice from: the first of $CUDA_ROOT,
/// $CUDA_HOME, $CUDA_PATH that has nvvm/libdevice; when none of them is set,
/// the toolkit of `ptxas` (<toolkit>/bin/ptxas) or /usr/local/cuda. Empty if
/// none has it.
std::string findCudaToolkit(const std::string &ptxas = "");

} // namespace pejit

#endif // PEJIT_COMPILER_BACKENDS_NVIDIA_NVIDIALOWERING_H
