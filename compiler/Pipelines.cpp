#include "compiler/Pipelines.h"
#include "compiler/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void pejit::registerPipelines() {
  registerPejitPasses();
  mlir::PassPipelineRegistration<>(
      "pejit-simplify", "canonicalize and cse pejit IR",
      [](mlir::OpPassManager &pm) {
        pm.addPass(mlir::createCanonicalizerPass());
        pm.addPass(mlir::createCSEPass());
      });
}
