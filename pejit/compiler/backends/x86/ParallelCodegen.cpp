// Lowering and compiling a kernel's codegen parts at once; see
// ParallelCodegen.h.
#include "pejit/compiler/backends/x86/ParallelCodegen.h"
#include "pejit/compiler/backends/x86/HostIsa.h"

#include "pejit/compiler/Pipelines.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace pejit {
namespace {

/// What a lowered part costs the backend, roughly: its operations, and 8
/// per block. Instruction selection works block by block, and strength
/// reduction and register allocation on the loops the blocks form: at
/// causal 2048, the item's part (393 ops, 47 blocks) takes longer than the
/// P.V tile's (553 ops, 27 blocks), the S tile's (345, 11) half as long.
int64_t backendCostEstimate(mlir::ModuleOp part) {
  int64_t operations = 0, blocks = 0;
  part->walk([&](mlir::Operation *) { ++operations; });
  part->walk([&](mlir::Block *) { ++blocks; });
  return operations + 8 * blocks;
}

/// PEJIT_TIMING=1: milliseconds since the object was made.
struct Stopwatch {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double elapsed() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }
};

bool timingRequested() { return std::getenv("PEJIT_TIMING") != nullptr; }

} // namespace

Expected<std::vector<CodegenPart>> lowerForCodegen(mlir::ModuleOp tiled) {
  using Result = Expected<std::vector<CodegenPart>>;
  Stopwatch watch;
  std::vector<CodegenPart> parts = partitionForCodegen(tiled);
  double split = watch.elapsed();
  if (parts.empty())
    return Result::error("llvm: the kernel defines no public function");
  // The parts are nested modules of one container, under one pass manager
  // that lowers each on the context's threads. (Pass managers of our own
  // threads running at once on one context crash in pass initialization.)
  mlir::MLIRContext *context = tiled.getContext();
  mlir::OwningOpRef<mlir::ModuleOp> container =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(context));
  for (CodegenPart &part : parts)
    container->push_back(part.module.release());
  mlir::PassManager manager(context);
  // Verifying after every pass doubled the lowering's time (~15 ms of ~30).
  // The parts are verified once, lowered, by compileParts instead; the
  // passes themselves are verified after each step by the lit tests.
  manager.enableVerifier(false);
  mlir::OpPassManager &lower = manager.nest<mlir::ModuleOp>();
  bool ok = succeeded(mlir::parsePassPipeline(lowerToLLVMPipeline(), lower));
  // A helper the lowering folded away (load_key_tile where K is rotated
  // once per call) would still be compiled.
  lower.addPass(mlir::createSymbolDCEPass());
  ok = ok && succeeded(manager.run(*container));
  size_t next = 0;
  for (mlir::ModuleOp part :
       llvm::make_early_inc_range(container->getBody()->getOps<mlir::ModuleOp>())) {
    part->remove();
    parts[next++].module = part;
  }
  if (!ok)
    return Result::error("llvm: the kernel's codegen parts do not lower to the LLVM dialect");
  if (timingRequested())
    std::fprintf(stderr, "  codegen parts split in %.1f ms, lowered in %.1f ms\n", split,
                 watch.elapsed() - split);
  return Result(std::move(parts));
}

Expected<std::vector<std::string>> compileParts(std::vector<CodegenPart> parts, int threads,
                                                CodeKind kind) {
  using Result = Expected<std::vector<std::string>>;
  Stopwatch watch;
  // Largest first by what the backend will do (before lowering, sizes miss
  // the unrolled loops), so each thread taking the next part balances them.
  for (CodegenPart &part : parts)
    part.size = backendCostEstimate(*part.module);
  sortLargestFirst(parts);
  std::vector<Expected<std::string>> objects(parts.size(),
                                             Expected<std::string>::error("not compiled"));
  // Each part is translated, optimized and compiled on one thread, in its
  // own LLVMContext (contexts are not shared across threads). The parts
  // share the MLIR context, which has threads (Compile.cpp) and so locks
  // what translation uniques in it.
  std::vector<std::string> timings(parts.size());
  auto compilePart = [&](size_t i) {
    auto fail = [&](const std::string &message) {
      objects[i] = Expected<std::string>::error(message);
    };
    double began = watch.elapsed();
    mlir::ModuleOp part = *parts[i].module;
    if (failed(mlir::verify(part)))
      return fail("llvm: part " + std::to_string(i) + " of the kernel is not valid IR");
    internalizeForLinking(part, parts[i].wrappedOnly);
    llvm::LLVMContext context;
    std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(part, context);
    if (!llvmModule)
      return fail("jit: part " + std::to_string(i) +
                  " of the kernel does not translate to LLVM IR");
    std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine();
    if (!machine)
      return fail("jit: cannot create a target machine for the host CPU");
    applyX86Isa(part, *llvmModule, *machine);
    double translated = watch.elapsed();
    if (Status status = optimizeKernel(*llvmModule, *machine); !status)
      return fail(status.message());
    double optimized = watch.elapsed();
    objects[i] =
        emitCode(*llvmModule, *machine,
                 parts[i].cold ? LoopStrengthReduction::Skip : LoopStrengthReduction::Run, kind);
    char line[160];
    std::snprintf(line, sizeof(line),
                  "  part %zu (%s, %lld ops): began %.1f translated %.1f optimized %.1f "
                  "emitted %.1f\n",
                  i, parts[i].cold ? "cold" : "hot", static_cast<long long>(parts[i].size), began,
                  translated, optimized, watch.elapsed());
    timings[i] = line;
  };
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < parts.size(); i = next++)
      compilePart(i);
  };
  int extraThreads = std::min<int>(threads, static_cast<int>(parts.size())) - 1;
  std::vector<std::thread> pool;
  for (int t = 0; t < extraThreads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &thread : pool)
    thread.join();
  if (timingRequested())
    for (const std::string &line : timings)
      std::fputs(line.c_str(), stderr);

  std::vector<std::string> result;
  for (Expected<std::string> &object : objects) {
    if (!object)
      return Result::error(object.error());
    result.push_back(std::move(*object));
  }
  return result;
}

} // namespace pejit
