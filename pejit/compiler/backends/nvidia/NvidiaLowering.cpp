// The nvidia lowering (NvidiaLowering.h). The pipeline options follow
// pejit's toolchain notes: +ptx80 (the default +ptx60 aborts for sm_90),
// format=isa (PTX text, no external tool), bare pointers for kernel memrefs
// (static shapes: one pointer per tensor argument), opt-level 3.
#include "pejit/compiler/backends/nvidia/NvidiaLowering.h"
#include "pejit/compiler/passes/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/TargetSelect.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

using namespace mlir;

namespace pejit {

bool isSupportedNvidiaChip(const std::string &chip) {
  return chip == "sm_80" || chip == "sm_86" || chip == "sm_89" || chip == "sm_90";
}

LogicalResult unrollNvidiaRegisterLoops(ModuleOp module) {
  PassManager unroll(module.getContext());
  unroll.addPass(createCanonicalizerPass());
  unroll.addPass(createUnrollAnnotatedLoops());
  unroll.addPass(createCanonicalizerPass());
  unroll.addPass(createCSEPass());
  unroll.addPass(createSymbolDCEPass());
  return unroll.run(module);
}

FailureOr<std::string> lowerNvidiaToPtx(ModuleOp module, const std::string &chip,
                                        const std::string &cudaToolkit) {
  static std::once_flag nvptx;
  std::call_once(nvptx, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  PassManager lower(module.getContext());
  gpu::GPUToNVVMPipelineOptions options;
  options.cubinChip = chip;
  options.cubinFeatures = "+ptx80";
  options.cubinFormat = "isa";
  options.optLevel = 3;
  options.kernelUseBarePtrCallConv = true;
  gpu::buildLowerToNVVMPassPipeline(lower, options);
  if (!cudaToolkit.empty()) {
    // The pipeline's options have no toolkit path: set it on its
    // gpu-module-to-binary pass, which then links <toolkit>/nvvm/libdevice.
    for (Pass &pass : lower.getPasses())
      if (pass.getArgument() == "gpu-module-to-binary" &&
          failed(pass.initializeOptions("toolkit=" + cudaToolkit,
                                        [](const llvm::Twine &) { return failure(); })))
        return module.emitError("cannot set the CUDA toolkit path '" + cudaToolkit +
                                "' on gpu-module-to-binary"),
               failure();
  }
  if (failed(lower.run(module)))
    return failure();
  std::string ptx;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects())
      if (auto gpuObject = dyn_cast<gpu::ObjectAttr>(object))
        ptx = gpuObject.getObject().str();
  });
  if (ptx.empty())
    return module.emitError("the nvidia lowering produced no PTX"), failure();
  // LLVM 19's isa payload ended with a NUL that ptxas rejects; strip any.
  while (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  // An unresolved libdevice call would only fail later, in ptxas or at load.
  // Every declared-only __nv_ function, named (sorted) in the error.
  std::set<std::string> missing;
  for (size_t at = ptx.find(".extern .func"); at != std::string::npos;
       at = ptx.find(".extern .func", at + 1)) {
    // The name may be on the declaration's next line (after the result).
    size_t name = ptx.find("__nv_", at);
    if (name != std::string::npos && name < ptx.find(';', at))
      missing.insert(ptx.substr(name, ptx.find_first_of("( \n", name) - name));
  }
  if (ptx.find(".extern .func") != std::string::npos) {
    std::string functions;
    for (const std::string &name : missing)
      functions += (functions.empty() ? "" : ", ") + name;
    return module.emitError("the kernel calls " +
                            (functions.empty() ? std::string("a libdevice function") : functions) +
                            " from libdevice, but no CUDA toolkit with nvvm/libdevice was "
                            "found: set CUDA_HOME (or CUDA_ROOT) to the toolkit"),
           failure();
  }
  return ptx;
}

std::string findCudaToolkit(const std::string &ptxas) {
  std::vector<std::string> candidates;
  for (const char *name : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *value = std::getenv(name))
      candidates.push_back(value);
  if (candidates.empty()) { // a toolkit the user named is the only one tried
    if (!ptxas.empty())     // <toolkit>/bin/ptxas
      candidates.push_back(llvm::sys::path::parent_path(llvm::sys::path::parent_path(ptxas)).str());
    candidates.push_back("/usr/local/cuda");
  }
  for (const std::string &candidate : candidates)
    if (!candidate.empty() && llvm::sys::fs::is_directory(candidate + "/nvvm/libdevice"))
      return candidate;
  return "";
}

} // namespace pejit
