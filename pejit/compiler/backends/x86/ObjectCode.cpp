// Object code for template kernels: optimize, emit an ELF object, load it.
#include "pejit/compiler/backends/x86/ObjectCode.h"

#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/OptBisect.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdlib>

namespace pejit {

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
  // Every loop starts on a 64-byte line. The kernels' inner loops (~120
  // bytes, 24 instructions per 12 FMAs) run near the front end's limit, and
  // with the default 16-byte alignment their speed moved by up to ~10% with
  // wherever an unrelated change happened to put them (bench/RESULTS.md).
  (*machine)->Options.LoopAlignment = 64;
  return std::move(*machine);
}

/// The LLVM passes a template kernel needs. Its loops, blocking and vector
/// code are already what they should be, so the full O3 pipeline (which
/// costs ~150 ms here) buys nothing: inline the small helpers (exp2), clean
/// up the memref descriptor traffic, hoist invariants, and let the backend
/// do instruction selection, register allocation and strength reduction.
/// GVN and a second instcombine took ~10 ms of a cold compile and changed
/// none of the P.V tile's and item's instructions (2 of the S tile's 180);
/// kernel speed unchanged in paired runs (bench/RESULTS.md, session 6).
Status optimizeKernel(llvm::Module &module, llvm::TargetMachine &machine) {
  module.setDataLayout(machine.createDataLayout());
  module.setTargetTriple(machine.getTargetTriple());
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder(&machine);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  llvm::ModulePassManager passes;
  if (llvm::Error error = builder.parsePassPipeline(
          passes, "cgscc(inline),function(sroa,early-cse,instcombine<no-verify-fixpoint>,"
                  "simplifycfg,loop-mssa(licm),simplifycfg,dce)"))
    return Status::error("llvm passes: " + llvm::toString(std::move(error)));
  passes.run(module, modules);
  return Status();
}

namespace {

/// Lets every pass run but loop strength reduction. The backend's pass
/// list is fixed by the target (LSR is a global -disable-lsr option), but
/// each optional pass asks its module's context whether to run: a gate on
/// the part's own context turns LSR off for that part alone.
class SkipLoopStrengthReduction : public llvm::OptPassGate {
public:
  bool isEnabled() const override { return true; }
  bool shouldRunPass(llvm::StringRef pass, llvm::StringRef) const override {
    return pass != "Loop Strength Reduction";
  }
};

} // namespace

Expected<std::string> emitCode(llvm::Module &module, llvm::TargetMachine &machine,
                               LoopStrengthReduction lsr, CodeKind kind) {
  static SkipLoopStrengthReduction skipLsr; // no state: shared by all threads
  llvm::LLVMContext &context = module.getContext();
  llvm::OptPassGate &previousGate = context.getOptPassGate();
  if (lsr == LoopStrengthReduction::Skip)
    context.setOptPassGate(skipLsr);
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream stream(buffer);
  llvm::legacy::PassManager passes;
  bool object = kind == CodeKind::Object;
  if (machine.addPassesToEmitFile(passes, stream, nullptr,
                                  object ? llvm::CodeGenFileType::ObjectFile
                                         : llvm::CodeGenFileType::AssemblyFile)) {
    context.setOptPassGate(previousGate);
    return Expected<std::string>::error(object ? "jit: the host target cannot emit object files"
                                               : "asm: the host target cannot emit assembly");
  }
  passes.run(module);
  context.setOptPassGate(previousGate);
  return std::string(buffer.str());
}

LoadedObject::~LoadedObject() = default;

Expected<std::unique_ptr<LoadedObject>>
LoadedObject::load(const std::vector<std::string> &objects) {
  using Result = Expected<std::unique_ptr<LoadedObject>>;
  // PEJIT_PERF=1: jitdump records for `perf record -k 1` + `perf inject --jit`.
  llvm::JITEventListener *perf =
      std::getenv("PEJIT_PERF") ? llvm::JITEventListener::createPerfJITEventListener() : nullptr;
  auto jit = llvm::orc::LLJITBuilder()
                 .setObjectLinkingLayerCreator(
                     [perf](llvm::orc::ExecutionSession &session)
                         -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                       auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                           session, [](const llvm::MemoryBuffer &) {
                             return std::make_unique<llvm::SectionMemoryManager>();
                           });
                       if (perf)
                         layer->registerJITEventListener(*perf);
                       return std::unique_ptr<llvm::orc::ObjectLayer>(std::move(layer));
                     })
                 .create();
  if (!jit)
    return Result::error("jit: " + llvm::toString(jit.takeError()));
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process)
    return Result::error("jit: " + llvm::toString(process.takeError()));
  (*jit)->getMainJITDylib().addGenerator(std::move(*process));
  if (objects.empty())
    return Result::error("jit: the kernel has no object code");
  for (size_t i = 0; i < objects.size(); ++i)
    if (llvm::Error error = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(
            objects[i], "pejit-kernel-" + std::to_string(i) + ".o")))
      return Result::error("jit: kernel object " + std::to_string(i) +
                           " does not load: " + llvm::toString(std::move(error)));
  std::unique_ptr<LoadedObject> loaded(new LoadedObject());
  loaded->jit_ = std::move(*jit);
  return Result(std::move(loaded));
}

Expected<void *> LoadedObject::lookup(const std::string &symbol) const {
  auto address = jit_->lookup(symbol);
  if (!address)
    return Expected<void *>::error("jit: symbol '" + symbol +
                                   "' not found: " + llvm::toString(address.takeError()));
  return address->toPtr<void *>();
}

} // namespace pejit
