#include "pejit/compiler/Pipelines.h"

#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "pejit/compiler/passes/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

// Lowering of the tiled stage: the template's annotated loops unrolled
// (pejit-unroll-annotated-loops), then upstream passes. full-unroll turns
// the few n-D vector ops into 1-D ones; expand-strided-metadata (+
// lower-affine for the index math it emits) handles the strided user
// buffers; convert-to-llvm then lowers every dialect (vector, math, memref,
// arith, index, func, cf, ub) in one conversion through their ConvertToLLVM
// interfaces, which is ~25% faster than one pass per dialect. The passes
// before it are nested on func.func, so a context with threads runs them on
// the kernel's functions in parallel (~10 ms of a cold compile).
const char *pejit::lowerToLLVMPipeline() {
  return "func.func(pejit-unroll-annotated-loops,canonicalize,cse,"
         "convert-vector-to-scf{full-unroll=true},convert-scf-to-cf,"
         "expand-strided-metadata,lower-affine),"
         "convert-to-llvm,reconcile-unrealized-casts,llvm.func(canonicalize)";
}

void pejit::registerPipelines() {
  // Everything the pipelines name, so their text parses anywhere.
  registerPejitPasses();
  mlir::gpu::registerGPUToNVVMPipeline();
  mlir::registerTransformsPasses();
  mlir::registerConversionPasses();
  mlir::memref::registerMemRefPasses();
  mlir::PassPipelineRegistration<>("pejit-simplify", "canonicalize and cse pejit IR",
                                   [](mlir::OpPassManager &pm) {
                                     pm.addPass(mlir::createCanonicalizerPass());
                                     pm.addPass(mlir::createCSEPass());
                                   });
  mlir::PassPipelineRegistration<>("pejit-lower-to-llvm",
                                   "lower pejit's tiled stage to the LLVM dialect",
                                   [](mlir::OpPassManager &pm) {
                                     if (failed(mlir::parsePassPipeline(lowerToLLVMPipeline(), pm)))
                                       llvm::errs() << "pejit-lower-to-llvm: bad pipeline text\n";
                                   });
}
