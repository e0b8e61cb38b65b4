// pejit-opt: mlir-opt with pejit's dialects, passes and pipelines. Used by
// the lit tests and to read or transform any stage's IR by hand.
#include "compiler/Pipelines.h"
#include "compiler/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  pejit::registerDialects(registry);
  pejit::registerPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pejit optimizer driver\n", registry));
}
