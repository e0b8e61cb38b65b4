// Machine code for a kernel module in several parts compiled at once.
//
// LLVM's backend works on one function at a time and is the largest share of
// a cold compile (instruction selection, strength reduction, register
// allocation). A kernel module holds a few big functions (the template's
// item and P.V tile, and the once-per-call prologue and prepare), so it is
// split by function into parts, each part translated to its own LLVM module
// and context, and the parts are optimized and emitted on separate threads.
// The objects are linked together when loaded (LoadedObject::load).
#ifndef PEJIT_RUNTIME_PARALLELCODEGEN_H
#define PEJIT_RUNTIME_PARALLELCODEGEN_H

#include "runtime/ObjectCode.h"
#include "runtime/Pejit.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pejit {

/// The attribute a template puts on a function that runs once per call
/// rather than once per work item (pejit_prologue, pejit_prepare). Its part
/// is compiled without loop strength reduction, which costs ~20 ms of
/// backend time on such a function and nothing measurable at run time.
inline constexpr const char *kColdFunctionAttr = "pejit.cold";

/// One module of a kernel's codegen.
struct CodegenPart {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// Defines only functions marked kColdFunctionAttr.
  bool cold = false;
  /// Operations in the functions it defines: the estimate of its codegen time.
  int64_t size = 0;
};

/// Splits a module in the LLVM dialect into parts, largest first. Every
/// public function with a body is defined in exactly one part and declared in
/// the others: each unmarked function in a part of its own (together with
/// its C-interface wrapper `_mlir_ciface_<name>`), all functions marked
/// kColdFunctionAttr (and their wrappers) in one part. A function only its
/// wrapper calls is internal to its part (the runtime calls the wrappers), so
/// it is not compiled twice when the inliner folds it into the wrapper. A
/// private helper is defined, with internal linkage, in each part that calls
/// it.
std::vector<CodegenPart> partitionForCodegen(mlir::ModuleOp module);

/// partitionForCodegen, then the machine code of each part (an ELF object,
/// or its assembly), in that order. Up to `threads` threads each take the
/// next part (largest first) and translate, optimize and emit it. An error
/// names the failing part's step.
Expected<std::vector<std::string>> compileParts(mlir::ModuleOp module, int threads,
                                                CodeKind kind = CodeKind::Object);

} // namespace pejit

#endif // PEJIT_RUNTIME_PARALLELCODEGEN_H
