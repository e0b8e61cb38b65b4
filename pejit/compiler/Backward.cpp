// deriveBackwardSource (Backward.h): pe-fuse-into-attention, then
// attn-derive-backward, and the backward function alone printed.
#include "pejit/compiler/Backward.h"
#include "pejit/compiler/Stages.h"
#include "pejit/compiler/passes/Passes.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

namespace pejit {

Expected<std::string> deriveBackwardSource(const std::string &source, const std::string &name,
                                           bool operandGradients, bool scoreShapedGradients) {
  using Result = Expected<std::string>;
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeCompilerContext(/*parallelPasses=*/false);
  DiagnosticCollector diagnostics(*context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, context.get(), name);
  if (!module)
    return Result::error(diagnostics.take("source"));
  mlir::PassManager passes(context.get());
  passes.addNestedPass<mlir::func::FuncOp>(createFuseIntoAttention());
  DeriveBackwardOptions options;
  options.operandGradients = operandGradients;
  options.scoreShapedGradients = scoreShapedGradients;
  passes.addPass(createDeriveBackward(options));
  if (mlir::failed(passes.run(*module)))
    return Result::error(diagnostics.take("backward"));
  // Keep the one derived function: a backward kernel is compiled alone.
  std::vector<mlir::func::FuncOp> forwards, backwards;
  for (mlir::func::FuncOp func : module->getOps<mlir::func::FuncOp>())
    (func.getSymName().ends_with("_backward") ? backwards : forwards).push_back(func);
  if (backwards.size() != 1)
    return Result::error(name +
                         ": expected one function computing one attn.attention, or a chain "
                         "of pe ops with a pe.rope on an argument, to derive a backward from, "
                         "found " +
                         std::to_string(backwards.size()) +
                         " (pe.sinusoidal and pe.learned alone need none: their input "
                         "gradient is the output gradient)");
  for (mlir::func::FuncOp func : forwards)
    func.erase();
  return Result(printOperation(*module));
}

} // namespace pejit
