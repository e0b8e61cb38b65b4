// Splitting a kernel module into the parts its machine code is compiled in.
//
// LLVM's backend works on one function at a time and is the largest share of
// a cold compile (instruction selection, strength reduction, register
// allocation). A kernel module holds a few big functions (the template's
// item, S tile and P.V tile, and the once-per-call prologue and prepare), so
// it is split by function into parts that are lowered, translated, optimized
// and emitted on separate threads (ParallelCodegen.h). The objects are linked
// together when loaded (LoadedObject::load).
//
// The split works on the tiled stage (func.func, before lowering: each part
// is then lowered on its own thread too) and on the llvm stage (llvm.func:
// the asm stage compiles it the same way).
#ifndef PEJIT_RUNTIME_CODEGENPARTS_H
#define PEJIT_RUNTIME_CODEGENPARTS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace pejit {

/// The attribute a template puts on a function that is not on the kernel's
/// hot path: it runs once per call (pejit_prologue, pejit_prepare) or once
/// per item (pejit_query_tile), not once per KV tile. Its part
/// is compiled without loop strength reduction, which costs ~20 ms of
/// backend time on such a function and nothing measurable at run time.
inline constexpr const char *kColdFunctionAttr = "pejit.cold";

/// One module of a kernel's codegen.
struct CodegenPart {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Defines only functions marked kColdFunctionAttr.
  bool cold = false;
  /// The estimate of its codegen time: the operations in the functions and
  /// helpers it defines; compileParts counts blocks too, once lowered.
  int64_t size = 0;
  /// Public functions it defines that only their C-interface wrapper calls
  /// (see internalizeForLinking).
  llvm::StringSet<> wrappedOnly;
};

/// Splits a module of functions (func.func or llvm.func) into parts, largest
/// first. Every public function with a body is defined in exactly one part
/// and declared (private) in the others: each unmarked function in a part of
/// its own (together with its C-interface wrapper `_mlir_ciface_<name>`, if
/// lowered already), all functions marked kColdFunctionAttr (and their
/// wrappers) in one part. A private helper is defined in each part that
/// calls it.
/// Orders `items` by their `size` member, largest first, equal sizes in
/// their original order (std::stable_sort's result, without libstdc++'s
/// deprecated temporary buffer).
template <typename T> void sortLargestFirst(std::vector<T> &items) {
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return items[a].size != items[b].size ? items[a].size > items[b].size : a < b;
  });
  std::vector<T> sorted;
  sorted.reserve(items.size());
  for (size_t index : order)
    sorted.push_back(std::move(items[index]));
  items = std::move(sorted);
}

std::vector<CodegenPart> partitionForCodegen(mlir::ModuleOp module);

/// Linkage for a lowered part (llvm.func) before it is translated: its
/// helpers become internal, so the copies of the parts do not clash when
/// their objects are linked together; so do the functions only their
/// wrapper calls (the runtime calls the wrappers), so that one the inliner
/// folds into its wrapper (as the prologue) is not compiled twice.
void internalizeForLinking(mlir::ModuleOp part, const llvm::StringSet<> &wrappedOnly);

} // namespace pejit

#endif // PEJIT_RUNTIME_CODEGENPARTS_H
