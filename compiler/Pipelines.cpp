#include "compiler/Pipelines.h"
#include "compiler/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

// Upstream lowering of the tiled stage. full-unroll turns the few n-D
// vector ops into 1-D ones; expand-strided-metadata before
// finalize-memref-to-llvm handles the strided user buffers; ub-to-llvm
// catches the ub.poison that vector lowering can leave.
const char *pejit::lowerToLLVMPipeline() {
  return "canonicalize,cse,"
         "convert-vector-to-scf{full-unroll=true},convert-scf-to-cf,"
         "convert-vector-to-llvm,convert-math-to-llvm,expand-strided-metadata,lower-affine,"
         "finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
         "convert-func-to-llvm,convert-cf-to-llvm,convert-ub-to-llvm,"
         "reconcile-unrealized-casts,canonicalize";
}

void pejit::registerPipelines() {
  // Everything the pipelines name, so their text parses anywhere.
  registerPejitPasses();
  mlir::registerTransformsPasses();
  mlir::registerConversionPasses();
  mlir::memref::registerMemRefPasses();
  mlir::PassPipelineRegistration<>(
      "pejit-simplify", "canonicalize and cse pejit IR",
      [](mlir::OpPassManager &pm) {
        pm.addPass(mlir::createCanonicalizerPass());
        pm.addPass(mlir::createCSEPass());
      });
  mlir::PassPipelineRegistration<>(
      "pejit-lower-to-llvm", "lower pejit's tiled stage to the LLVM dialect",
      [](mlir::OpPassManager &pm) {
        if (failed(mlir::parsePassPipeline(lowerToLLVMPipeline(), pm)))
          llvm::errs() << "pejit-lower-to-llvm: bad pipeline text\n";
      });
}
