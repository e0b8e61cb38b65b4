// The sub-calls of one attention call (docs/shape-classes.md): the call
// itself, one per sequence of a packed batch (segments), or one per batch
// row (key_lengths, and a paged cache, whose rows have pages of their own).
// Each part is the attention run alone on its rows; the x86 and nvidia runs
// both plan their work from these parts.
#ifndef PEJIT_RUNTIME_CALLPARTS_H
#define PEJIT_RUNTIME_CALLPARTS_H

#include "pejit/core/KernelArtifact.h"
#include "pejit/runtime/Views.h"

#include <cstdint>
#include <vector>

namespace pejit {

/// The shape of a call of `kernel` on `inputs` (in its signature's order):
/// the kernel's shape, its `?` dims from the query and the key (a paged
/// cache's: its block table's pages; a standalone transform's: x). An
/// error names the input.
Expected<Shape> callShapeOf(const KernelDescription &kernel, const std::vector<TensorView> &inputs);

/// Batch row `row` (-1: the whole batch), query rows [q0, q0 + nq) and key
/// rows [k0, k0 + nk).
struct CallPart {
  int64_t row, q0, nq, k0, nk;
};

/// The parts of a call of shape `call` to a kernel with `signature`: reads
/// and checks cu_seqlens and key_lengths (errors name the input and the
/// index), and checks that position ids a part slices hold the whole
/// call's packed length.
Expected<std::vector<CallPart>> callParts(const KernelSignature &signature,
                                          const BoundInputs &bound, const Shape &call);

/// Whether the parts slice the position ids (a packed batch or per-row key
/// lengths): each part then reads its own range of them.
bool partsSliceIds(const KernelSignature &signature);

/// Entries [first, first + count) of a position-id view's last dim.
TensorView positionsOf(const TensorView &view, int64_t first, int64_t count);

/// Rows [first, first + count) (dim 2) of batch row `row` (-1: every row)
/// of a [b, h, s, c] view: a view of the same data, strides kept.
TensorView sliceRows(const TensorView &view, int64_t row, int64_t first, int64_t count);

/// Zeros rows [first, first + count) of every head of batch row n of a
/// [b, h, s, dv] output: a part with no keys sees none (docs/semantics.md).
void zeroRows(const TensorView &out, int64_t n, int64_t first, int64_t count);

} // namespace pejit

#endif // PEJIT_RUNTIME_CALLPARTS_H
