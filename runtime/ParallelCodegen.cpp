// Splitting a kernel module by function and compiling the parts at once; see
// ParallelCodegen.h.
#include "runtime/ParallelCodegen.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
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

/// A copy of `module` that defines the public functions `defines` names and
/// declares the other public functions.
mlir::OwningOpRef<mlir::ModuleOp> partModule(mlir::ModuleOp module,
                                             const llvm::StringSet<> &defines) {
  mlir::OwningOpRef<mlir::ModuleOp> clone = module.clone();
  for (LLVMFuncOp fn : clone->getOps<LLVMFuncOp>()) {
    if (isHelper(fn)) {
      // One copy per part that calls it: internal, so the copies of the
      // parts do not clash when their objects are linked together.
      fn.setLinkage(mlir::LLVM::Linkage::Internal);
    } else if (!fn.isExternal() && !defines.contains(fn.getName())) {
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

  std::vector<CodegenPart> parts;
  for (const Group &group : partGroups)
    parts.push_back({partModule(module, group.functions), group.cold, group.size});
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
  auto compilePart = [&](size_t i) {
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
    if (Status status = optimizeKernel(*llvmModule, *machine); !status) {
      objects[i] = Expected<std::string>::error(status.message());
      return;
    }
    objects[i] = emitCode(*llvmModule, *machine,
                          parts[i].cold ? LoopStrengthReduction::Skip : LoopStrengthReduction::Run,
                          kind);
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
