// The parts of an nvidia call every kernel kind uses (NvidiaCall.cpp):
// packing a strided [b, h, s, d] view's rows dense and back, the driver
// check, and one launch through the driver or the test launcher.
#ifndef PEJIT_RUNTIME_NVIDIAPARTS_H
#define PEJIT_RUNTIME_NVIDIAPARTS_H

#include "pejit/runtime/NvidiaKernelImpl.h"
#include "pejit/runtime/Views.h"

#include <string>
#include <vector>

namespace pejit::nvidia {

/// Whether rows [first, first + count) of batch row `row` (-1: all) are the
/// whole of a dense view: then the part reads it in place.
bool wholeDense(const TensorView &view, int64_t row, int64_t first, int64_t count);

/// Rows [first, first + count) of batch row `row` (-1: every row) of a
/// [b, h, s, d] view, packed dense: [1 or b, h, count, d].
std::vector<char> packRows(const TensorView &view, int64_t row, int64_t first, int64_t count);

/// The inverse of packRows: `dense` ([1 or b, h, count, d]) into the rows of
/// the view.
void unpackRows(const std::vector<char> &dense, const TensorView &view, int64_t row, int64_t first,
                int64_t count);

/// The driver and a device for `arch`, checked once every input was (a
/// machine without one still reports bad inputs as such); nothing to check
/// under a test launcher.
Status checkDevice(const std::string &arch);

/// A whole call's position tables (i64 [rows, seq]) for `kernel`: the
/// user's ids, or the defaults (keys from 0, queries from skv - sq).
Status callPositionTables(const NvidiaKernelImpl &kernel, const BoundInputs &bound,
                          const Shape &call, std::vector<int64_t> &queryIds,
                          std::vector<int64_t> &keyIds);

/// One launch through the test launcher, or the driver.
cuda::Status launchPart(const cuda::AttentionKernelImage &image,
                        const cuda::AttentionBuffers &buffers);

} // namespace pejit::nvidia

#endif // PEJIT_RUNTIME_NVIDIAPARTS_H
