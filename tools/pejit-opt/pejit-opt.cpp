// pejit-opt: mlir-opt with pejit's dialects, passes and pipelines. Used by
// the lit tests and to read or transform any stage's IR by hand. The input
// is read here, so that its nesting is checked before MLIR's recursive
// parser sees it (pejit/compiler/SourceNesting.h); a crash still prints LLVM's
// stack dump (InitLLVM).
#include "pejit/compiler/Pipelines.h"
#include "pejit/compiler/Registration.h"
#include "pejit/compiler/SourceNesting.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  pejit::registerDialects(registry);
  pejit::registerPipelines();
  auto [inputFilename, outputFilename] =
      mlir::registerAndParseCLIOptions(argc, argv, "pejit optimizer driver\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (std::optional<std::string> problem =
          pejit::sourceNestingProblem(input->getBuffer(), input->getBufferIdentifier())) {
    llvm::errs() << *problem << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
