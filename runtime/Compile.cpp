// The compilation stages of a kernel, in order, each kept as text:
//   source  the user's IR (pe + attn on tensors)
//   fused   after pe-fuse-into-attention
//   tiled   after attn-instantiate-template (x86 AVX2 template)
//   llvm    after pejit-lower-to-llvm (LLVM dialect)
// then LLVM ORC JIT for the host CPU (optimizeKernel's passes, codegen at
// O3). llvm-ir and asm are derived from the llvm stage on request.
#include "compiler/InstantiateTemplate.h"
#include "compiler/Passes.h"
#include "compiler/Pipelines.h"
#include "compiler/Registration.h"
#include "runtime/CompiledKernel.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace pejit {

void initializeCompilerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    registerPipelines();
  });
}

namespace {

std::string print(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

/// Collects the diagnostics of one stage into a message.
struct DiagnosticCollector {
  explicit DiagnosticCollector(mlir::MLIRContext &context)
      : handler(&context, [this](mlir::Diagnostic &diag) {
          std::string text;
          llvm::raw_string_ostream os(text);
          os << diag.getLocation() << ": " << diag;
          for (mlir::Diagnostic &note : diag.getNotes())
            os << "\n  note: " << note;
          messages += (messages.empty() ? "" : "\n") + text;
          return mlir::success();
        }) {}
  std::string take(const std::string &stage) {
    std::string text = stage + ": " + (messages.empty() ? "failed" : messages);
    messages.clear();
    return text;
  }
  std::string messages;
  mlir::ScopedDiagnosticHandler handler;
};

std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  // One small module per context: MLIR's own worker threads cost more to
  // start than they save (the runtime parallelizes across kernels instead).
  auto context = std::make_unique<mlir::MLIRContext>(
      registry, mlir::MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  return context;
}

std::unique_ptr<llvm::TargetMachine> hostTargetMachine() {
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    llvm::consumeError(builder.takeError());
    return nullptr;
  }
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto machine = builder->createTargetMachine();
  if (!machine) {
    llvm::consumeError(machine.takeError());
    return nullptr;
  }
  return std::move(*machine);
}

int64_t intField(mlir::DictionaryAttr dict, llvm::StringRef name) {
  auto attr = dict.getAs<mlir::IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

/// The LLVM passes a template kernel needs. Its loops, blocking and vector
/// code are already what they should be, so the full O3 pipeline (which
/// costs ~150 ms here) buys nothing: inline the small helpers (exp2), clean
/// up the memref descriptor traffic, hoist invariants, and let the backend
/// do instruction selection, register allocation and strength reduction.
llvm::Error optimizeKernel(llvm::Module &module, llvm::TargetMachine *machine) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(machine);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  llvm::ModulePassManager passes;
  if (llvm::Error error = builder.parsePassPipeline(
          passes, "cgscc(inline),function(sroa,early-cse,instcombine<no-verify-fixpoint>,"
                  "simplifycfg,loop-mssa(licm),gvn,instcombine<no-verify-fixpoint>,"
                  "simplifycfg,dce)"))
    return error;
  passes.run(module, modules);
  return llvm::Error::success();
}

} // namespace

CompiledKernel::~CompiledKernel() = default;

Expected<std::shared_ptr<const CompiledKernel>>
CompiledKernel::compile(const Spec &spec, const TileConfig &tiles,
                        std::shared_ptr<ThreadPool> pool) {
  using Result = Expected<std::shared_ptr<const CompiledKernel>>;
  auto start = std::chrono::steady_clock::now();
  auto lap = start;
  std::string timing;
  auto mark = [&](const char *what) {
    auto now = std::chrono::steady_clock::now();
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), " %s %.1f", what,
                  std::chrono::duration<double, std::milli>(now - lap).count());
    timing += buffer;
    lap = now;
  };
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeContext();
  DiagnosticCollector diagnostics(*context);
  std::shared_ptr<CompiledKernel> kernel(new CompiledKernel());
  kernel->pool_ = std::move(pool);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(spec.source(), context.get(), spec.name());
  if (!module)
    return Result::error(diagnostics.take("source"));
  kernel->stages_["source"] = print(*module);
  mark("source");

  mlir::PassManager fuse(context.get());
  fuse.addNestedPass<mlir::func::FuncOp>(createFuseIntoAttention());
  if (failed(fuse.run(*module)))
    return Result::error(diagnostics.take("fused"));
  kernel->stages_["fused"] = print(*module);
  mark("fused");

  if (failed(instantiateX86Template(*module, {tiles.queryTile, tiles.keyTile})))
    return Result::error(diagnostics.take("tiled"));
  kernel->stages_["tiled"] = print(*module);
  mark("tiled");
  auto info = (*module)->getAttrOfType<mlir::DictionaryAttr>(kKernelInfoAttr);
  kernel->items = intField(info, "items");
  kernel->scratchFloats = intField(info, "scratch_floats");
  kernel->queryPositionRows = intField(info, "query_position_rows");
  kernel->keyPositionRows = intField(info, "key_position_rows");
  for (mlir::Attribute role : info.getAs<mlir::ArrayAttr>("arguments"))
    kernel->arguments.push_back(mlir::cast<mlir::StringAttr>(role).str());
  // The description is for the runtime; LLVM translation has no use for it.
  (*module)->removeAttr(kKernelInfoAttr);

  // The kernel's memref types carry the static shape.
  auto itemFn = module->lookupSymbol<mlir::func::FuncOp>("pejit_item");
  auto dims = [&](unsigned arg) {
    return mlir::cast<mlir::MemRefType>(itemFn.getArgumentTypes()[arg]).getShape();
  };
  Shape &s = kernel->shape;
  s.batch = dims(0)[0];
  s.queryHeads = dims(0)[1];
  s.querySeq = dims(0)[2];
  s.headDim = dims(0)[3];
  s.kvHeads = dims(1)[1];
  s.keySeq = dims(1)[2];
  s.valueDim = dims(2)[3];

  mlir::PassManager lower(context.get());
  if (failed(mlir::parsePassPipeline(lowerToLLVMPipeline(), lower)) ||
      failed(lower.run(*module)))
    return Result::error(diagnostics.take("llvm"));
  kernel->stages_["llvm"] = print(*module);
  mark("llvm");

  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine();
  if (!machine)
    return Result::error("jit: cannot create a target machine for the host CPU");
  // ExecutionEngineOptions::transformer is a function_ref: the optimizer
  // must outlive create() (TOOLCHAIN.md: a temporary is silently dropped).
  llvm::TargetMachine *tm = machine.get();
  std::function<llvm::Error(llvm::Module *)> optimizer = [tm](llvm::Module *module) {
    return optimizeKernel(*module, tm);
  };
  mlir::ExecutionEngineOptions options;
  options.transformer = optimizer;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  // PEJIT_PERF=1: jitdump records for `perf record -k 1` + `perf inject --jit`.
  options.enablePerfNotificationListener = std::getenv("PEJIT_PERF") != nullptr;
  auto engine = mlir::ExecutionEngine::create(*module, options, std::move(machine));
  if (!engine) {
    std::string message = llvm::toString(engine.takeError());
    return Result::error("jit: " + message +
                         (diagnostics.messages.empty() ? "" : "\n" + diagnostics.messages));
  }
  kernel->engine_ = std::move(*engine);
  auto prologue = kernel->engine_->lookup("_mlir_ciface_pejit_prologue");
  auto item = kernel->engine_->lookup("_mlir_ciface_pejit_item");
  if (!prologue || !item) {
    if (!prologue)
      llvm::consumeError(prologue.takeError());
    if (!item)
      llvm::consumeError(item.takeError());
    return Result::error("jit: the kernel's entry points were not found");
  }
  kernel->prologue_ = reinterpret_cast<PrologueFn>(*prologue);
  kernel->item_ = reinterpret_cast<ItemFn>(*item);
  mark("jit");
  if (std::getenv("PEJIT_TIMING"))
    std::fprintf(stderr, "pejit timing (ms):%s\n", timing.c_str());
  kernel->compileMs = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  return std::shared_ptr<const CompiledKernel>(std::move(kernel));
}

Expected<std::string> CompiledKernel::stage(const std::string &name) const {
  if (auto it = stages_.find(name); it != stages_.end())
    return it->second;
  if (name != "llvm-ir" && name != "asm") {
    std::string known;
    for (const std::string &stage : Kernel::stageNames())
      known += (known.empty() ? "" : ", ") + stage;
    return Expected<std::string>::error("unknown stage '" + name + "' (stages: " + known + ")");
  }
  std::lock_guard<std::mutex> lock(derivedMutex_);
  if (auto it = derivedStages_.find(name); it != derivedStages_.end())
    return it->second;
  Expected<std::string> text = translateLLVMDialect(stages_.at("llvm"), name == "asm");
  if (text)
    derivedStages_[name] = *text;
  return text;
}

Expected<std::string> translateLLVMDialect(const std::string &llvmDialect, bool assembly) {
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeContext();
  DiagnosticCollector diagnostics(*context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(llvmDialect, context.get());
  if (!module)
    return Expected<std::string>::error(diagnostics.take("llvm-ir"));
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(*module, llvmContext);
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine();
  if (!llvmModule || !machine)
    return Expected<std::string>::error(diagnostics.take("llvm-ir"));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (llvm::Error error = optimizeKernel(*llvmModule, machine.get()))
    return Expected<std::string>::error("llvm-ir: " + llvm::toString(std::move(error)));
  std::string text;
  llvm::raw_string_ostream os(text);
  if (!assembly) {
    llvmModule->print(os, nullptr);
    return text;
  }
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream asmStream(buffer);
  llvm::legacy::PassManager passes;
  if (machine->addPassesToEmitFile(passes, asmStream, nullptr, llvm::CodeGenFileType::AssemblyFile))
    return Expected<std::string>::error("asm: the host target cannot emit assembly");
  passes.run(*llvmModule);
  return std::string(buffer.str());
}

} // namespace pejit
