// Machine code for a kernel module in several parts compiled at once.
//
// LLVM's backend works on one function at a time and is the largest share of
// a cold compile (instruction selection, strength reduction, register
// allocation). A kernel module holds a few big functions (the template's
// prologue, item and P.V tile), so it is split by function into parts of
// about equal size, each part translated to its own LLVM module and context,
// and the parts are optimized and emitted on separate threads. The objects
// are linked together when loaded (LoadedObject::load).
#ifndef PEJIT_RUNTIME_PARALLELCODEGEN_H
#define PEJIT_RUNTIME_PARALLELCODEGEN_H

#include "runtime/Pejit.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace pejit {

/// Splits a module in the LLVM dialect into at most `parts` modules. Every
/// public function with a body is defined in exactly one part (largest first,
/// into the part with the fewest operations) and declared in the others;
/// a private helper is defined, with internal linkage, in each part that
/// calls it. Parts that would define nothing are left out.
std::vector<mlir::OwningOpRef<mlir::ModuleOp>> partitionByFunction(mlir::ModuleOp module,
                                                                   int parts);

/// partitionByFunction, then one ELF object per part: translated one after
/// the other (the MLIR context is single-threaded), optimized and emitted
/// concurrently. An error names the failing part's step.
Expected<std::vector<std::string>> compileObjects(mlir::ModuleOp module, int parts);

} // namespace pejit

#endif // PEJIT_RUNTIME_PARALLELCODEGEN_H
