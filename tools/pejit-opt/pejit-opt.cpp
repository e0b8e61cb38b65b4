// pejit-opt: mlir-opt with pejit's dialects, passes and pipelines. Used by
// the lit tests and to read or transform any stage's IR by hand.
#include "compiler/Pipelines.h"
#include "dialects/attn/AttnDialect.h"
#include "dialects/pe/PEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<pejit::pe::PEDialect, pejit::attn::AttnDialect,
                  mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  pejit::registerPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pejit optimizer driver\n", registry));
}
