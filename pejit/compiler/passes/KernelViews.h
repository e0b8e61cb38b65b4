// Bare-pointer kernel arguments viewed as memrefs: the text a template
// splices in to turn `%NAME_arg: memref<1xT>` (one pointer, as the nvidia
// kernels take every tensor) into `%NAME`, a row-major memref whose sizes
// are numbers (fixed by the shape class) or index values (the call's
// lengths). docs/shape-classes.md, "Lengths at run time".
#ifndef PEJIT_COMPILER_PASSES_KERNELVIEWS_H
#define PEJIT_COMPILER_PASSES_KERNELVIEWS_H

#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace pejit {

struct KernelView {
  std::string name;    ///< "q": views %q_arg as %q
  std::string element; ///< "f16", "f32", "i64"
  /// Per dim, a number ("128") or an SSA index value ("%SQ").
  std::vector<std::string> sizes;
};

/// One of a kernel's lengths: %NAME, the number `value`, or (value
/// mlir::ShapedType::kDynamic) the call's i64 argument %ARG as an index.
struct KernelLength {
  const char *name;
  int64_t value;
  const char *arg;
};

/// The definitions of `lengths`, one line each: `%NAME = arith.constant N`
/// or `%NAME = arith.index_cast %ARG : i64 to index`.
std::string lengthsText(llvm::ArrayRef<KernelLength> lengths);

/// "?x32x?x128": the dims of the view's memref type, a value size as `?`.
std::string viewDimsText(const KernelView &view);

/// "memref<?x32x?x128xf16>".
std::string viewTypeText(const KernelView &view);

/// One memref.reinterpret_cast per view, after the index arithmetic of the
/// strides that are not numbers (stride i is a number iff every size after
/// dim i is: the strides MLIR gives the identity layout).
std::string viewsText(llvm::ArrayRef<KernelView> views);

} // namespace pejit

#endif // PEJIT_COMPILER_PASSES_KERNELVIEWS_H
