// Splitting a kernel module by function and compiling the parts at once; see
// ParallelCodegen.h.
#include "runtime/ParallelCodegen.h"

#include "runtime/ObjectCode.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <algorithm>
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

} // namespace

std::vector<mlir::OwningOpRef<mlir::ModuleOp>> partitionByFunction(mlir::ModuleOp module,
                                                                   int parts) {
  std::vector<std::pair<int64_t, std::string>> entries; // (size, name) of public bodies
  for (LLVMFuncOp fn : module.getOps<LLVMFuncOp>())
    if (!fn.isExternal() && !isHelper(fn))
      entries.emplace_back(operationCount(fn), fn.getName().str());
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto &a, const auto &b) { return a.first > b.first; });
  int used = std::max(1, std::min<int>(parts, static_cast<int>(entries.size())));
  std::vector<int64_t> load(used, 0);
  llvm::StringMap<int> owner;
  for (const auto &[size, name] : entries) {
    int lightest = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[name] = lightest;
    load[lightest] += size;
  }

  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> result;
  for (int part = 0; part < used; ++part) {
    mlir::OwningOpRef<mlir::ModuleOp> clone = module.clone();
    for (LLVMFuncOp fn : clone->getOps<LLVMFuncOp>()) {
      if (isHelper(fn)) {
        // One copy per part that calls it: internal, so the copies of the
        // parts do not clash when their objects are linked together.
        fn.setLinkage(mlir::LLVM::Linkage::Internal);
      } else if (!fn.isExternal() && owner.lookup(fn.getName()) != part) {
        fn.getBody().dropAllReferences();
        fn.getBody().getBlocks().clear(); // a declaration: another part defines it
      }
    }
    eraseUncalledHelpers(*clone);
    result.push_back(std::move(clone));
  }
  return result;
}

Expected<std::vector<std::string>> compileObjects(mlir::ModuleOp module, int parts) {
  using Result = Expected<std::vector<std::string>>;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> split = partitionByFunction(module, parts);
  std::vector<Expected<std::string>> objects(split.size(),
                                             Expected<std::string>::error("not compiled"));
  // Each part is translated, optimized and compiled on its own thread, in
  // its own LLVMContext (contexts are not shared across threads). The parts
  // share the MLIR context, which has threads (Compile.cpp) and so locks
  // what translation uniques in it.
  auto compilePart = [&](size_t i) {
    llvm::LLVMContext context;
    std::unique_ptr<llvm::Module> module = mlir::translateModuleToLLVMIR(*split[i], context);
    if (!module) {
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
    if (Status status = optimizeKernel(*module, *machine); !status) {
      objects[i] = Expected<std::string>::error(status.message());
      return;
    }
    objects[i] = emitObject(*module, *machine);
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < split.size(); ++i)
    threads.emplace_back(compilePart, i);
  compilePart(0);
  for (std::thread &thread : threads)
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
