// The compilation stages of a kernel, in order, each kept as text:
//   source  the user's IR (pe + attn on tensors)
//   fused   after pe-fuse-into-attention
//   tiled   after attn-instantiate-template (x86 AVX2 template)
// then ELF objects for the host CPU, one per codegen part of the tiled
// module (CodegenParts.h), each lowered by pejit-lower-to-llvm, optimized
// (optimizeKernel) and compiled at O3 on its own thread (ParallelCodegen.h),
// and loaded together with LLVM ORC (ObjectCode.h). The stages and the
// objects form a KernelArtifact: what the disk cache stores and loads back
// without compiling. The llvm stage (the tiled module lowered whole by the
// same pipeline), llvm-ir and asm are derived from the tiled stage on
// request: printing the llvm stage at every compile would cost it ~6 ms.
#include "compiler/passes/Instantiate.h"
#include "compiler/passes/Passes.h"
#include "compiler/Pipelines.h"
#include "compiler/Registration.h"
#include "runtime/X86KernelImpl.h"
#include "compiler/backends/x86/ObjectCode.h"
#include "compiler/backends/x86/ParallelCodegen.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace pejit {

std::string printOperation(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

DType kernelInfoDtype(mlir::StringAttr name) {
  if (name && name.getValue() == "f16")
    return DType::F16;
  if (name && name.getValue() == "bf16")
    return DType::BF16;
  return DType::F32;
}

std::optional<DType> floatDtypeNamed(const std::string &name) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

void initializeCompilerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    registerPipelines();
  });
}

namespace {

/// Codegen parts compiled at once (ParallelCodegen.h): one per core, at most
/// 4, since a kernel has only a few big functions.
int codegenThreads() {
  return std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
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

/// Worker threads for MLIR's function-level passes, shared by every
/// kernel's context: a pool per context would start threads for each compile.
llvm::ThreadPoolInterface &passThreads() {
  static llvm::DefaultThreadPool pool(llvm::hardware_concurrency(codegenThreads()));
  return pool;
}

std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  // The lowering's function-level passes run on the kernel's functions at
  // once (pejit_item and pejit_pv_tile are about the same size).
  auto context = std::make_unique<mlir::MLIRContext>(
      registry, mlir::MLIRContext::Threading::DISABLED);
  context->setThreadPool(passThreads());
  context->loadAllAvailableDialects();
  return context;
}

int64_t intField(mlir::DictionaryAttr dict, llvm::StringRef name) {
  auto attr = dict.getAs<mlir::IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

} // namespace

CompiledKernel::~CompiledKernel() = default;

Expected<KernelArtifact> CompiledKernel::build(const Spec &spec, const TileConfig &tiles) {
  using Result = Expected<KernelArtifact>;
  auto lap = std::chrono::steady_clock::now();
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
  KernelArtifact artifact;

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(spec.source(), context.get(), spec.name());
  if (!module)
    return Result::error(diagnostics.take("source"));
  artifact.stages["source"] = printOperation(*module);
  mark("source");

  mlir::PassManager fuse(context.get());
  fuse.addNestedPass<mlir::func::FuncOp>(createFuseIntoAttention());
  if (failed(fuse.run(*module)))
    return Result::error(diagnostics.take("fused"));
  artifact.stages["fused"] = printOperation(*module);
  mark("fused");

  if (failed(instantiateX86Template(*module, {tiles.queryTile, tiles.keyTile})))
    return Result::error(diagnostics.take("tiled"));
  artifact.stages["tiled"] = printOperation(*module);
  mark("tiled");
  auto info = (*module)->getAttrOfType<mlir::DictionaryAttr>(kKernelInfoAttr);
  artifact.items = intField(info, "items");
  artifact.scratchFloats = intField(info, "scratch_floats");
  artifact.prepareJobs = intField(info, "prepare_jobs");
  artifact.queryPositionRows = intField(info, "query_position_rows");
  artifact.keyPositionRows = intField(info, "key_position_rows");
  artifact.inputDtype = kernelInfoDtype(info.getAs<mlir::StringAttr>("dtype"));
  artifact.outputDtype = kernelInfoDtype(info.getAs<mlir::StringAttr>("out_dtype"));
  for (mlir::Attribute role : info.getAs<mlir::ArrayAttr>("arguments"))
    artifact.arguments.push_back(mlir::cast<mlir::StringAttr>(role).str());
  // The description is for the runtime; LLVM translation has no use for it.
  (*module)->removeAttr(kKernelInfoAttr);

  // The kernel's memref types carry the static shape.
  auto itemFn = module->lookupSymbol<mlir::func::FuncOp>("pejit_item");
  auto dims = [&](unsigned arg) {
    return mlir::cast<mlir::MemRefType>(itemFn.getArgumentTypes()[arg]).getShape();
  };
  Shape &s = artifact.shape;
  s.batch = dims(0)[0];
  s.queryHeads = dims(0)[1];
  s.querySeq = dims(0)[2];
  s.headDim = dims(0)[3];
  s.kvHeads = dims(1)[1];
  s.keySeq = dims(1)[2];
  s.valueDim = dims(2)[3];

  Expected<std::vector<CodegenPart>> parts = lowerForCodegen(*module);
  if (!parts)
    return Result::error(diagnostics.messages.empty() ? parts.error()
                                                      : parts.error() + "\n" +
                                                            diagnostics.messages);
  mark("lowered");
  Expected<std::vector<std::string>> objects =
      compileParts(std::move(*parts), codegenThreads());
  if (!objects)
    return Result::error(diagnostics.messages.empty()
                             ? objects.error()
                             : objects.error() + "\n" + diagnostics.messages);
  artifact.objects = std::move(*objects);
  mark("codegen");
  if (std::getenv("PEJIT_TIMING"))
    std::fprintf(stderr, "pejit timing (ms):%s\n", timing.c_str());
  return artifact;
}

Expected<std::shared_ptr<CompiledKernel>>
CompiledKernel::load(KernelArtifact artifact, std::shared_ptr<ThreadPool> pool) {
  using Result = Expected<std::shared_ptr<CompiledKernel>>;
  Expected<std::unique_ptr<LoadedObject>> object = LoadedObject::load(artifact.objects);
  if (!object)
    return Result::error(object.error());
  Expected<void *> prologue = (*object)->lookup("_mlir_ciface_pejit_prologue");
  if (!prologue)
    return Result::error(prologue.error());
  Expected<void *> item = (*object)->lookup("_mlir_ciface_pejit_item");
  if (!item)
    return Result::error(item.error());
  void *prepare = nullptr;
  if (artifact.prepareJobs > 0) {
    Expected<void *> found = (*object)->lookup("_mlir_ciface_pejit_prepare");
    if (!found)
      return Result::error(found.error());
    prepare = *found;
  }
  std::shared_ptr<CompiledKernel> kernel(new CompiledKernel());
  kernel->prepare_ = reinterpret_cast<PrepareFn>(prepare);
  kernel->pool_ = std::move(pool);
  kernel->object_ = std::move(*object);
  kernel->prologue_ = reinterpret_cast<PrologueFn>(*prologue);
  kernel->item_ = reinterpret_cast<ItemFn>(*item);
  static_cast<KernelDescription &>(*kernel) = artifact;
  kernel->stages_ = std::move(artifact.stages);
  return Result(std::move(kernel));
}

Expected<std::string> CompiledKernel::stage(const std::string &name) const {
  if (auto it = stages_.find(name); it != stages_.end())
    return it->second;
  if (name != "llvm" && name != "llvm-ir" && name != "asm") {
    std::string known;
    for (const std::string &stage : Kernel::stageNames())
      known += (known.empty() ? "" : ", ") + stage;
    return Expected<std::string>::error("unknown stage '" + name + "' (stages: " + known + ")");
  }
  std::lock_guard<std::mutex> lock(derivedMutex_);
  auto derived = [&](const std::string &stage, auto derive) -> Expected<std::string> {
    if (auto it = derivedStages_.find(stage); it != derivedStages_.end())
      return it->second;
    Expected<std::string> text = derive();
    if (text)
      derivedStages_[stage] = *text;
    return text;
  };
  Expected<std::string> llvmDialect =
      derived("llvm", [&] { return lowerTiledStage(stages_.at("tiled")); });
  if (name == "llvm" || !llvmDialect)
    return llvmDialect;
  return derived(name, [&] { return translateLLVMDialect(*llvmDialect, name == "asm"); });
}

Expected<std::string> lowerTiledStage(const std::string &tiled) {
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeContext();
  DiagnosticCollector diagnostics(*context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(tiled, context.get());
  if (!module)
    return Expected<std::string>::error(diagnostics.take("llvm"));
  (*module)->removeAttr(kKernelInfoAttr); // as when the kernel was compiled
  mlir::PassManager lower(context.get());
  if (failed(mlir::parsePassPipeline(lowerToLLVMPipeline(), lower)) ||
      failed(lower.run(*module)))
    return Expected<std::string>::error(diagnostics.take("llvm"));
  return printOperation(*module);
}

Expected<std::string> translateLLVMDialect(const std::string &llvmDialect, bool assembly) {
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeContext();
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
        compileParts(partitionForCodegen(*module), codegenThreads(), CodeKind::Assembly);
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
  if (Status status = optimizeKernel(*llvmModule, *machine); !status)
    return Expected<std::string>::error("llvm-ir: " + status.message());
  std::string text;
  llvm::raw_string_ostream os(text);
  llvmModule->print(os, nullptr);
  return text;
}

} // namespace pejit
