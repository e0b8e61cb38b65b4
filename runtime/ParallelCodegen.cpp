// Splitting a kernel module by function and compiling the parts at once; see
// ParallelCodegen.h.
#include "runtime/ParallelCodegen.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <thread>

namespace pejit {
namespace {

using mlir::LLVM::LLVMFuncOp;

bool isHelper(LLVMFuncOp fn) { return fn.isPrivate(); }

int64_t operationCount(LLVMFuncOp fn) {
  int64_t count = 0;
  fn.walk([&](mlir::Operation *) { ++count; });
  return count;
}

/// The function a public function belongs with: itself, or for the
/// C-interface wrapper func-to-llvm emits, the function it wraps.
llvm::StringRef groupName(LLVMFuncOp fn) {
  llvm::StringRef name = fn.getName();
  name.consume_front("_mlir_ciface_");
  return name;
}

/// The symbols each top-level operation of a module refers to (calls,
/// addressof), by the operation's symbol name; "" collects the references
/// of operations without one.
using SymbolReferences = llvm::StringMap<llvm::StringSet<>>;

SymbolReferences symbolReferences(mlir::ModuleOp module) {
  SymbolReferences references;
  for (mlir::Operation &top : module.getBody()->getOperations()) {
    auto name = top.getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName());
    llvm::StringSet<> &refs = references[name ? name.getValue() : ""];
    top.walk([&](mlir::Operation *op) {
      op->getAttrDictionary().walk([&](mlir::SymbolRefAttr ref) {
        refs.insert(ref.getRootReference().getValue());
      });
    });
  }
  return references;
}

/// The public functions only their C-interface wrapper refers to. The
/// runtime calls the wrappers, so such a function can be internal to its
/// part: then the inliner either folds it into the wrapper and drops it, or
/// keeps one copy, where a public function inlined into its wrapper (as the
/// prologue is) would be compiled twice.
llvm::StringSet<> wrappedOnly(mlir::ModuleOp module, const SymbolReferences &references) {
  llvm::StringMap<int> referrers; // symbol -> how many top-level ops refer to it
  for (const auto &entry : references)
    for (const auto &symbol : entry.getValue())
      ++referrers[symbol.getKey()];
  llvm::StringSet<> result;
  for (LLVMFuncOp fn : module.getOps<LLVMFuncOp>()) {
    if (fn.isExternal() || isHelper(fn) || groupName(fn) != fn.getName())
      continue;
    auto wrapper = references.find("_mlir_ciface_" + fn.getName().str());
    if (wrapper != references.end() && wrapper->getValue().contains(fn.getName()) &&
        referrers.lookup(fn.getName()) == 1)
      result.insert(fn.getName());
  }
  return result;
}

/// The private helpers the functions `defines` names call, directly or
/// through other helpers, and those any non-function operation refers to.
llvm::StringSet<> helpersNeeded(mlir::ModuleOp module, const SymbolReferences &references,
                                const llvm::StringSet<> &defines) {
  llvm::StringSet<> helpers;
  for (LLVMFuncOp fn : module.getOps<LLVMFuncOp>())
    if (isHelper(fn))
      helpers.insert(fn.getName());
  llvm::StringSet<> needed;
  std::vector<std::string> pending{""};
  for (const auto &name : defines)
    pending.push_back(name.getKey().str());
  while (!pending.empty()) {
    std::string name = std::move(pending.back());
    pending.pop_back();
    auto refs = references.find(name);
    if (refs == references.end())
      continue;
    for (const auto &symbol : refs->getValue())
      if (helpers.contains(symbol.getKey()) && needed.insert(symbol.getKey()).second)
        pending.push_back(symbol.getKey().str());
  }
  return needed;
}

/// A module that defines the public functions `defines` names (internal
/// when in `internal`) and the helpers they need, and declares the other
/// public functions. Only what it defines is copied.
mlir::OwningOpRef<mlir::ModuleOp> partModule(mlir::ModuleOp module,
                                             const SymbolReferences &references,
                                             const llvm::StringSet<> &defines,
                                             const llvm::StringSet<> &internal) {
  llvm::StringSet<> helpers = helpersNeeded(module, references, defines);
  mlir::OwningOpRef<mlir::ModuleOp> part =
      mlir::cast<mlir::ModuleOp>(module->cloneWithoutRegions());
  mlir::Block *body = &part->getBodyRegion().emplaceBlock();
  for (mlir::Operation &op : module.getBody()->getOperations()) {
    auto fn = mlir::dyn_cast<LLVMFuncOp>(op);
    if (!fn) {
      body->push_back(op.clone());
      continue;
    }
    if (isHelper(fn)) {
      if (!helpers.contains(fn.getName()))
        continue;
      auto copy = mlir::cast<LLVMFuncOp>(op.clone());
      // One copy per part that calls it: internal, so the copies of the
      // parts do not clash when their objects are linked together.
      copy.setLinkage(mlir::LLVM::Linkage::Internal);
      body->push_back(copy);
    } else if (fn.isExternal() || defines.contains(fn.getName())) {
      auto copy = mlir::cast<LLVMFuncOp>(op.clone());
      if (internal.contains(fn.getName()))
        copy.setLinkage(mlir::LLVM::Linkage::Internal);
      body->push_back(copy);
    } else {
      body->push_back(op.cloneWithoutRegions()); // a declaration: another part defines it
    }
  }
  return part;
}

} // namespace

std::vector<CodegenPart> partitionForCodegen(mlir::ModuleOp module) {
  struct Group {
    llvm::StringSet<> functions;
    bool cold = false;
    int64_t size = 0;
  };
  llvm::MapVector<llvm::StringRef, Group> groups; // in module order
  for (LLVMFuncOp fn : module.getOps<LLVMFuncOp>()) {
    if (fn.isExternal() || isHelper(fn))
      continue;
    Group &group = groups[groupName(fn)];
    group.functions.insert(fn.getName());
    group.cold |= fn->hasAttr(kColdFunctionAttr);
    group.size += operationCount(fn);
  }

  std::vector<Group> partGroups;
  Group cold;
  cold.cold = true;
  for (auto &[name, group] : groups) {
    if (!group.cold) {
      partGroups.push_back(std::move(group));
      continue;
    }
    for (const auto &function : group.functions)
      cold.functions.insert(function.getKey());
    cold.size += group.size;
  }
  if (!cold.functions.empty())
    partGroups.push_back(std::move(cold));
  std::stable_sort(partGroups.begin(), partGroups.end(),
                   [](const Group &a, const Group &b) { return a.size > b.size; });

  SymbolReferences references = symbolReferences(module);
  llvm::StringSet<> internal = wrappedOnly(module, references);
  std::vector<CodegenPart> parts;
  for (const Group &group : partGroups)
    parts.push_back(
        {partModule(module, references, group.functions, internal), group.cold, group.size});
  return parts;
}

Expected<std::vector<std::string>> compileParts(mlir::ModuleOp module, int threads,
                                                CodeKind kind) {
  using Result = Expected<std::vector<std::string>>;
  // PEJIT_TIMING=1: when each part's steps end, in ms since the split began.
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  std::vector<CodegenPart> parts = partitionForCodegen(module);
  double split = elapsed();
  std::vector<Expected<std::string>> objects(parts.size(),
                                             Expected<std::string>::error("not compiled"));
  // Each part is translated, optimized and compiled on one thread, in its
  // own LLVMContext (contexts are not shared across threads). The parts
  // share the MLIR context, which has threads (Compile.cpp) and so locks
  // what translation uniques in it.
  std::vector<std::string> timings(parts.size());
  auto compilePart = [&](size_t i) {
    double began = elapsed();
    llvm::LLVMContext context;
    std::unique_ptr<llvm::Module> llvmModule =
        mlir::translateModuleToLLVMIR(*parts[i].module, context);
    if (!llvmModule) {
      objects[i] = Expected<std::string>::error(
          "jit: part " + std::to_string(i) + " of the kernel does not translate to LLVM IR");
      return;
    }
    std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine();
    if (!machine) {
      objects[i] = Expected<std::string>::error(
          "jit: cannot create a target machine for the host CPU");
      return;
    }
    double translated = elapsed();
    if (Status status = optimizeKernel(*llvmModule, *machine); !status) {
      objects[i] = Expected<std::string>::error(status.message());
      return;
    }
    double optimized = elapsed();
    objects[i] = emitCode(*llvmModule, *machine,
                          parts[i].cold ? LoopStrengthReduction::Skip : LoopStrengthReduction::Run,
                          kind);
    char line[160];
    std::snprintf(line, sizeof(line),
                  "  part %zu (%s, %lld ops): began %.1f translated %.1f optimized %.1f "
                  "emitted %.1f\n",
                  i, parts[i].cold ? "cold" : "hot", static_cast<long long>(parts[i].size),
                  began, translated, optimized, elapsed());
    timings[i] = line;
  };
  // Parts come largest first, so each thread taking the next one balances
  // the threads about as well as the estimate allows.
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
  if (std::getenv("PEJIT_TIMING")) {
    std::fprintf(stderr, "  codegen parts split in %.1f ms\n", split);
    for (const std::string &line : timings)
      std::fputs(line.c_str(), stderr);
  }

  std::vector<std::string> result;
  for (Expected<std::string> &object : objects) {
    if (!object)
      return Result::error(object.error());
    result.push_back(std::move(*object));
  }
  return result;
}

} // namespace pejit
