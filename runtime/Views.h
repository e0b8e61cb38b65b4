// Checking user buffers (TensorView) against a kernel's shapes, and the
// position tables kernels take. Shared by the x86 and nvidia runs.
#ifndef PEJIT_RUNTIME_VIEWS_H
#define PEJIT_RUNTIME_VIEWS_H

#include "runtime/core/Types.h"

#include <string>
#include <vector>

namespace pejit {

/// "[2, 8, 64]".
std::string dimsText(const std::vector<int64_t> &shape);

/// The view's strides, or the row-major strides of its shape.
std::vector<int64_t> stridesOf(const TensorView &view);

/// Checks a view's pointer, dtype (one of `dtypes`), shape and strides
/// (last dimension contiguous, none negative); `what` names it.
Status checkView(const TensorView &view, const std::string &what,
                 const std::vector<int64_t> &expected, std::vector<DType> dtypes);

/// Position ids as kernels take them: i64 [rows, seq], from the user's
/// i32/i64 view ([seq], [1, seq] or [batch, seq]), or the docs/semantics.md
/// default (first + index) when null. Positions outside [-2^31, 2^31) are an
/// error naming the index (docs/limits.md).
Status buildPositionTable(const TensorView *view, const std::string &what, int64_t rows,
                          int64_t seq, int64_t batch, int64_t first, std::vector<int64_t> &table);

} // namespace pejit

#endif // PEJIT_RUNTIME_VIEWS_H
