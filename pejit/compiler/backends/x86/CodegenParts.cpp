// Splitting a kernel module into codegen parts; see CodegenParts.h.
#include "pejit/compiler/backends/x86/CodegenParts.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <string>

namespace pejit {
namespace {

using mlir::FunctionOpInterface;

/// A private function with a body: each part that calls it gets a copy.
bool isHelper(FunctionOpInterface fn) { return fn.isPrivate() && !fn.isExternal(); }

int64_t operationCount(mlir::Operation *op) {
  int64_t count = 0;
  op->walk([&](mlir::Operation *) { ++count; });
  return count;
}

constexpr llvm::StringLiteral kWrapperPrefix = "_mlir_ciface_";
constexpr llvm::StringLiteral kEmitWrapperAttr = "llvm.emit_c_interface";

/// The function a public function belongs with: itself, or for the
/// C-interface wrapper func-to-llvm emits, the function it wraps.
llvm::StringRef groupName(FunctionOpInterface fn) {
  llvm::StringRef name = fn.getName();
  name.consume_front(kWrapperPrefix);
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
      op->getAttrDictionary().walk(
          [&](mlir::SymbolRefAttr ref) { refs.insert(ref.getRootReference().getValue()); });
    });
  }
  return references;
}

/// The public functions only their C-interface wrapper calls: once lowered,
/// the wrapper is their one referrer; before, they ask for a wrapper
/// (llvm.emit_c_interface) and nothing refers to them.
llvm::StringSet<> wrappedOnly(mlir::ModuleOp module, const SymbolReferences &references) {
  llvm::StringMap<int> referrers; // symbol -> how many top-level ops refer to it
  for (const auto &entry : references)
    for (const auto &symbol : entry.getValue())
      ++referrers[symbol.getKey()];
  llvm::StringSet<> result;
  for (FunctionOpInterface fn : module.getOps<FunctionOpInterface>()) {
    if (fn.isExternal() || fn.isPrivate() || groupName(fn) != fn.getName() ||
        !fn->hasAttr(kEmitWrapperAttr))
      continue;
    auto wrapper = references.find((kWrapperPrefix + fn.getName()).str());
    bool lowered = wrapper != references.end();
    int expected = lowered ? 1 : 0;
    if ((!lowered || wrapper->getValue().contains(fn.getName())) &&
        referrers.lookup(fn.getName()) == expected)
      result.insert(fn.getName());
  }
  return result;
}

/// The helpers (of `helpers`, every helper's name) the functions `defines`
/// names call, directly or through other helpers, and those any operation
/// without a symbol refers to.
llvm::StringSet<> helpersNeeded(const SymbolReferences &references,
                                const llvm::StringSet<> &helpers,
                                const llvm::StringSet<> &defines) {
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

/// A module that defines the public functions `defines` names and the
/// helpers in `helpers` (those they need), and declares the other public
/// functions. Only what it defines is copied.
mlir::OwningOpRef<mlir::ModuleOp> partModule(mlir::ModuleOp module,
                                             const llvm::StringSet<> &defines,
                                             const llvm::StringSet<> &helpers) {
  mlir::OwningOpRef<mlir::ModuleOp> part =
      mlir::cast<mlir::ModuleOp>(module->cloneWithoutRegions());
  mlir::Block *body = &part->getBodyRegion().emplaceBlock();
  for (mlir::Operation &op : module.getBody()->getOperations()) {
    auto fn = mlir::dyn_cast<FunctionOpInterface>(op);
    if (!fn || fn.isExternal() || defines.contains(fn.getName()) ||
        (isHelper(fn) && helpers.contains(fn.getName()))) {
      body->push_back(op.clone());
    } else if (!isHelper(fn)) {
      // A declaration: another part defines it. Private (func.func requires
      // it of declarations), and without a wrapper of its own.
      mlir::Operation *declaration = op.cloneWithoutRegions();
      mlir::SymbolTable::setSymbolVisibility(declaration, mlir::SymbolTable::Visibility::Private);
      declaration->removeAttr(kEmitWrapperAttr);
      body->push_back(declaration);
    }
  }
  return part;
}

} // namespace

std::vector<CodegenPart> partitionForCodegen(mlir::ModuleOp module) {
  struct Group {
    llvm::StringSet<> functions;
    llvm::StringSet<> helpers; // the helpers its functions need
    bool cold = false;
    int64_t size = 0;
  };
  llvm::MapVector<llvm::StringRef, Group> groups; // in module order
  llvm::StringMap<int64_t> sizes;                 // operations of every function
  llvm::StringSet<> helperNames;
  for (FunctionOpInterface fn : module.getOps<FunctionOpInterface>()) {
    sizes[fn.getName()] = operationCount(fn);
    if (isHelper(fn))
      helperNames.insert(fn.getName());
    if (fn.isExternal() || fn.isPrivate())
      continue;
    Group &group = groups[groupName(fn)];
    group.functions.insert(fn.getName());
    group.cold |= fn->hasAttr(kColdFunctionAttr);
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
  }
  if (!cold.functions.empty())
    partGroups.push_back(std::move(cold));

  // A part's size counts the helpers it defines too: they are inlined into
  // its functions and compiled with them.
  SymbolReferences references = symbolReferences(module);
  for (Group &group : partGroups) {
    group.helpers = helpersNeeded(references, helperNames, group.functions);
    for (const auto &function : group.functions)
      group.size += sizes.lookup(function.getKey());
    for (const auto &helper : group.helpers)
      group.size += sizes.lookup(helper.getKey());
  }
  sortLargestFirst(partGroups);

  llvm::StringSet<> internal = wrappedOnly(module, references);
  std::vector<CodegenPart> parts;
  for (const Group &group : partGroups) {
    CodegenPart part{
        partModule(module, group.functions, group.helpers), group.cold, group.size, {}};
    for (const auto &function : group.functions)
      if (internal.contains(function.getKey()))
        part.wrappedOnly.insert(function.getKey());
    parts.push_back(std::move(part));
  }
  return parts;
}

void internalizeForLinking(mlir::ModuleOp part, const llvm::StringSet<> &wrappedOnly) {
  for (auto fn : part.getOps<mlir::LLVM::LLVMFuncOp>())
    if (!fn.isExternal() && (fn.isPrivate() || wrappedOnly.contains(fn.getName())))
      fn.setLinkage(mlir::LLVM::Linkage::Internal);
}

} // namespace pejit
