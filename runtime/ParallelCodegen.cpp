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

/// Erases the helpers nothing in `module` calls any more (a helper may only
/// be called by another helper, hence the loop).
void eraseUncalledHelpers(mlir::ModuleOp module) {
  for (bool erased = true; erased;) {
    erased = false;
    llvm::StringSet<> called; // every symbol any attribute refers to (calls, addressof)
    module.walk([&](mlir::Operation *op) {
      op->getAttrDictionary().walk([&](mlir::SymbolRefAttr ref) {
        called.insert(ref.getRootReference().getValue());
      });
    });
    for (LLVMFuncOp fn : llvm::make_early_inc_range(module.getOps<LLVMFuncOp>())) {
      if (isHelper(fn) && !called.contains(fn.getName())) {
        fn.erase();
        erased = true;
      }
    }
  }
}

/// The public functions only their C-interface wrapper refers to. The
/// runtime calls the wrappers, so such a function can be internal to its
/// part: then the inliner either folds it into the wrapper and drops it, or
/// keeps one copy, where a public function inlined into its wrapper (as the
/// prologue is) would be compiled twice.
llvm::StringSet<> wrappedOnly(mlir::ModuleOp module) {
  llvm::StringMap<llvm::StringSet<>> referrers; // symbol -> functions referring to it
  for (LLVMFuncOp fn : module.getOps<LLVMFuncOp>())
    fn.walk([&](mlir::Operation *op) {
      op->getAttrDictionary().walk([&](mlir::SymbolRefAttr ref) {
        referrers[ref.getRootReference().getValue()].insert(fn.getName());
      });
    });
  llvm::StringSet<> result;
  for (LLVMFuncOp fn : module.getOps<LLVMFuncOp>()) {
    if (fn.isExternal() || isHelper(fn) || groupName(fn) != fn.getName())
      continue;
    std::string wrapper = "_mlir_ciface_" + fn.getName().str();
    const llvm::StringSet<> &callers = referrers[fn.getName()];
    if (module.lookupSymbol<LLVMFuncOp>(wrapper) && callers.size() == 1 &&
        callers.contains(wrapper))
      result.insert(fn.getName());
  }
  return result;
}

/// A copy of `module` that defines the public functions `defines` names and
/// declares the other public functions; of those it defines, the ones in
/// `internal` get internal linkage.
mlir::OwningOpRef<mlir::ModuleOp> partModule(mlir::ModuleOp module,
                                             const llvm::StringSet<> &defines,
                                             const llvm::StringSet<> &internal) {
  mlir::OwningOpRef<mlir::ModuleOp> clone = module.clone();
  for (LLVMFuncOp fn : clone->getOps<LLVMFuncOp>()) {
    if (isHelper(fn)) {
      // One copy per part that calls it: internal, so the copies of the
      // parts do not clash when their objects are linked together.
      fn.setLinkage(mlir::LLVM::Linkage::Internal);
    } else if (defines.contains(fn.getName())) {
      if (internal.contains(fn.getName()))
        fn.setLinkage(mlir::LLVM::Linkage::Internal);
    } else if (!fn.isExternal()) {
      fn.getBody().dropAllReferences();
      fn.getBody().getBlocks().clear(); // a declaration: another part defines it
    }
  }
  eraseUncalledHelpers(*clone);
  return clone;
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

  llvm::StringSet<> internal = wrappedOnly(module);
  std::vector<CodegenPart> parts;
  for (const Group &group : partGroups)
    parts.push_back({partModule(module, group.functions, internal), group.cold, group.size});
  return parts;
}

Expected<std::vector<std::string>> compileParts(mlir::ModuleOp module, int threads,
                                                CodeKind kind) {
  using Result = Expected<std::vector<std::string>>;
  std::vector<CodegenPart> parts = partitionForCodegen(module);
  std::vector<Expected<std::string>> objects(parts.size(),
                                             Expected<std::string>::error("not compiled"));
  // Each part is translated, optimized and compiled on one thread, in its
  // own LLVMContext (contexts are not shared across threads). The parts
  // share the MLIR context, which has threads (Compile.cpp) and so locks
  // what translation uniques in it.
  auto T0 = std::chrono::steady_clock::now();
  auto now = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - T0).count(); };
  auto compilePart = [&](size_t i) {
    double a = now();
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
    double b = now();
    if (Status status = optimizeKernel(*llvmModule, *machine); !status) {
      objects[i] = Expected<std::string>::error(status.message());
      return;
    }
    double c = now();
    objects[i] = emitCode(*llvmModule, *machine,
                          parts[i].cold ? LoopStrengthReduction::Skip : LoopStrengthReduction::Run,
                          kind);
    if (std::getenv("PEJIT_TIMING")) std::fprintf(stderr, "  part %zu size %ld cold %d: start %.1f translated %.1f optimized %.1f emitted %.1f\n", i, (long)parts[i].size, (int)parts[i].cold, a, b, c, now());
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

  std::vector<std::string> result;
  for (Expected<std::string> &object : objects) {
    if (!object)
      return Result::error(object.error());
    result.push_back(std::move(*object));
  }
  return result;
}

} // namespace pejit
