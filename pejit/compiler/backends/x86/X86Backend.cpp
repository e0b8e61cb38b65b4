// The x86 stage table (X86Backend.h).
#include "pejit/compiler/backends/x86/X86Backend.h"

#include "pejit/compiler/Pipelines.h"
#include "pejit/compiler/backends/x86/HostIsa.h"
#include "pejit/compiler/backends/x86/ObjectCode.h"
#include "pejit/compiler/backends/x86/ParallelCodegen.h"
#include "pejit/compiler/passes/Instantiate.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>

namespace pejit {

namespace {

Stage tiledStage(X86TileConfig tiles) {
  Stage stage;
  stage.name = "tiled";
  stage.summary = "attn-instantiate-x86-template: the kernel of the ISA family, hooks expanded";
  stage.run = [tiles](CompileState &state) {
    if (mlir::failed(instantiateX86Template(*state.module, tiles)))
      return mlir::failure();
    readKernelInfo(*state.module, state.artifact);
    // The kernel's memref types carry the static shape. A standalone
    // transform's x [b, h, s, d] is Q's and K's: Shape{b, h, h, s, s, d, d}.
    if (auto item = state.module->lookupSymbol<mlir::func::FuncOp>("pejit_item")) {
      state.artifact.shape = kernelShape(item.getArgumentTypes());
    } else if (auto backward = state.module->lookupSymbol<mlir::func::FuncOp>("pejit_backward_q")) {
      state.artifact.shape = kernelShape(backward.getArgumentTypes()); // (q, k, v, ...)
    } else if (auto linear =
                   state.module->lookupSymbol<mlir::func::FuncOp>("pejit_linear_backward_item")) {
      state.artifact.shape = kernelShape(linear.getArgumentTypes()); // (q, k, v, ...)
    } else if (auto bias = state.module->lookupSymbol<mlir::func::FuncOp>("pejit_bias_item")) {
      // A materialized term's O [o0, o1, o2, o3] ([b, h, sq, skv] or a value
      // term's [1|h, sq, skv, dv]): Shape{o0, o1, o1, o2, o3, d, o3}, so
      // [batch, queryHeads, querySeq, valueDim] is the output's shape as for
      // attention; d is a key term's Q's (else o3).
      auto o = mlir::cast<mlir::MemRefType>(bias.getArgumentTypes()[0]);
      auto q = mlir::cast<mlir::MemRefType>(bias.getArgumentTypes()[1]);
      auto dim = [](mlir::MemRefType type, unsigned d) {
        return mlir::ShapedType::isDynamic(type.getDimSize(d)) ? kDynamicDim : type.getDimSize(d);
      };
      const std::vector<KernelArgument> &args = state.artifact.signature.arguments;
      bool readsQuery = std::any_of(args.begin(), args.end(), [](const KernelArgument &a) {
        return a.role == ArgumentRole::Query;
      });
      int64_t headDim = readsQuery ? dim(q, 3) : dim(o, 3);
      state.artifact.shape =
          Shape{dim(o, 0), dim(o, 1), dim(o, 1), dim(o, 2), dim(o, 3), headDim, dim(o, 3)};
    } else if (auto scaleGrad =
                   state.module->lookupSymbol<mlir::func::FuncOp>("pejit_scale_grad_item")) {
      mlir::Type x = scaleGrad.getArgumentTypes()[0]; // x [b, h, s, d], as the forward's
      state.artifact.shape = kernelShape({x, x, x});
    } else if (auto biasGrad =
                   state.module->lookupSymbol<mlir::func::FuncOp>("pejit_bias_grad_item")) {
      // dBias [o0, o1, o2, o3]: Shape{o0, o1, o1, o2, o3, 8, 8}, as the
      // materialized bias's.
      auto db = mlir::cast<mlir::MemRefType>(biasGrad.getArgumentTypes()[0]);
      auto dim = [&](unsigned d) {
        return mlir::ShapedType::isDynamic(db.getDimSize(d)) ? kDynamicDim : db.getDimSize(d);
      };
      state.artifact.shape = Shape{dim(0), dim(1), dim(1), dim(2), dim(3), 8, 8};
    } else if (auto keyTerm =
                   state.module->lookupSymbol<mlir::func::FuncOp>("pejit_key_term_grad_item")) {
      // dE [b, h, sq, skv] and q [b, h, sq, d]: Shape{b, h, h, sq, skv, d, d}.
      auto de = mlir::cast<mlir::MemRefType>(keyTerm.getArgumentTypes()[0]);
      auto q = mlir::cast<mlir::MemRefType>(keyTerm.getArgumentTypes()[1]);
      auto dim = [](mlir::MemRefType type, unsigned d) {
        return mlir::ShapedType::isDynamic(type.getDimSize(d)) ? kDynamicDim : type.getDimSize(d);
      };
      state.artifact.shape =
          Shape{dim(de, 0), dim(de, 1), dim(de, 1), dim(de, 2), dim(de, 3), dim(q, 3), dim(q, 3)};
    } else if (auto valueTerm =
                   state.module->lookupSymbol<mlir::func::FuncOp>("pejit_value_term_grad_item")) {
      // dR [1|h, sq, skv, dv]: Shape{1, h, h, sq, skv, dv, dv}.
      auto dr = mlir::cast<mlir::MemRefType>(valueTerm.getArgumentTypes()[0]);
      auto dim = [&](unsigned d) {
        return mlir::ShapedType::isDynamic(dr.getDimSize(d)) ? kDynamicDim : dr.getDimSize(d);
      };
      state.artifact.shape = Shape{1, dim(0), dim(0), dim(1), dim(2), dim(3), dim(3)};
    } else if (auto grad =
                   state.module->lookupSymbol<mlir::func::FuncOp>("pejit_embed_grad_item")) {
      mlir::Type rows = grad.getArgumentTypes()[0]; // grad [b, 1, s, d]
      state.artifact.shape = kernelShape({rows, rows, rows});
    } else if (auto embed = state.module->lookupSymbol<mlir::func::FuncOp>("pejit_embed_item")) {
      mlir::Type o = embed.getArgumentTypes()[2]; // [b, 1, s, d], the gathered rows' shape
      state.artifact.shape = kernelShape({o, o, o});
    } else {
      auto transform = state.module->lookupSymbol<mlir::func::FuncOp>("pejit_transform_item");
      mlir::Type x = transform.getArgumentTypes()[0];
      state.artifact.shape = kernelShape({x, x, x});
    }
    return mlir::success();
  };
  return stage;
}

Stage codegenStage() {
  Stage stage;
  stage.name = "codegen";
  stage.summary = "host objects: codegen parts lowered, optimized and compiled in parallel";
  stage.kind = StageKind::Binary;
  stage.run = [](CompileState &state) {
    // The description is for the runtime; LLVM translation has no use for it.
    (*state.module)->removeAttr(kKernelInfoAttr);
    Expected<std::vector<CodegenPart>> parts = lowerForCodegen(*state.module);
    if (!parts)
      return mlir::LogicalResult(mlir::emitError(state.module->getLoc()) << parts.error());
    Expected<std::vector<std::string>> objects = compileParts(std::move(*parts), compilerThreads());
    if (!objects)
      return mlir::LogicalResult(mlir::emitError(state.module->getLoc()) << objects.error());
    state.artifact.objects = std::move(*objects);
    return mlir::success();
  };
  return stage;
}

/// The llvm stage of a tiled stage's text: the module lowered whole by
/// pejit-lower-to-llvm, as the kernel's codegen parts each were.
Expected<std::string> lowerTiledStage(const std::string &tiled) {
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeCompilerContext(/*parallelPasses=*/true);
  DiagnosticCollector diagnostics(*context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(tiled, context.get());
  if (!module)
    return Expected<std::string>::error(diagnostics.take("llvm"));
  (*module)->removeAttr(kKernelInfoAttr); // as when the kernel was compiled
  mlir::PassManager lower(context.get());
  if (failed(mlir::parsePassPipeline(lowerToLLVMPipeline(), lower)) || failed(lower.run(*module)))
    return Expected<std::string>::error(diagnostics.take("llvm"));
  return printOperation(*module);
}

/// Optimized LLVM IR, or host assembly, of an LLVM-dialect module's text.
Expected<std::string> translateLLVMDialect(const std::string &llvmDialect, bool assembly) {
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeCompilerContext(/*parallelPasses=*/true);
  DiagnosticCollector diagnostics(*context);
  const char *stage = assembly ? "asm" : "llvm-ir";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(llvmDialect, context.get());
  if (!module)
    return Expected<std::string>::error(diagnostics.take(stage));
  if (assembly) {
    // The parts the kernel's objects were compiled as, each as it was
    // compiled (a cold part without loop strength reduction).
    Expected<std::vector<std::string>> parts =
        compileParts(partitionForCodegen(*module), compilerThreads(), CodeKind::Assembly);
    if (!parts)
      return Expected<std::string>::error("asm: " + parts.error());
    std::string text;
    for (size_t i = 0; i < parts->size(); ++i)
      text += "# ---- codegen part " + std::to_string(i) + " ----\n" + (*parts)[i];
    return text;
  }
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(*module, llvmContext);
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine();
  if (!llvmModule || !machine)
    return Expected<std::string>::error(diagnostics.take(stage));
  applyX86Isa(*module, *llvmModule, *machine);
  if (Status status = optimizeKernel(*llvmModule, *machine); !status)
    return Expected<std::string>::error("llvm-ir: " + status.message());
  std::string text;
  llvm::raw_string_ostream os(text);
  llvmModule->print(os, nullptr);
  return text;
}

Stage derivedStage(std::string name, std::string summary,
                   std::function<Expected<std::string>(const StageTextFn &)> derive,
                   bool dumped = false) {
  Stage stage;
  stage.name = std::move(name);
  stage.summary = std::move(summary);
  stage.kind = StageKind::Derived;
  stage.derive = std::move(derive);
  stage.dumped = dumped;
  return stage;
}

/// A derived stage computed from `from`'s text by `fn`.
template <typename Fn> auto from(const char *stage, Fn fn) {
  return [stage, fn](const StageTextFn &textOf) -> Expected<std::string> {
    Expected<std::string> input = textOf(stage);
    if (!input)
      return input;
    return fn(*input);
  };
}

} // namespace

StageTable x86Stages(const X86TileConfig &tiles) {
  StageTable table;
  table.target = "x86";
  table.parallelPasses = true;
  table.stages = {
      sourceStage(),
      fusedStage(),
      tiledStage(tiles),
      codegenStage(),
      derivedStage("llvm", "the tiled stage lowered whole to the LLVM dialect",
                   from("tiled", lowerTiledStage), /*dumped=*/true),
      derivedStage("llvm-ir", "optimized LLVM IR of the llvm stage",
                   from("llvm",
                        [](const std::string &text) {
                          return translateLLVMDialect(text, /*assembly=*/false);
                        })),
      derivedStage("asm", "host assembly, codegen part by part",
                   from("llvm",
                        [](const std::string &text) {
                          return translateLLVMDialect(text, /*assembly=*/true);
                        })),
  };
  return table;
}

} // namespace pejit
