// Checking user buffers (TensorView) against a kernel's shapes, and the
// position tables kernels take. Shared by the x86 and nvidia runs.
#ifndef PEJIT_RUNTIME_VIEWS_H
#define PEJIT_RUNTIME_VIEWS_H

#include "pejit/core/KernelSignature.h"
#include "pejit/core/Types.h"

#include <string>
#include <utility>
#include <vector>

namespace pejit {

/// "[2, 8, 64]".
std::string dimsText(const std::vector<int64_t> &shape);

/// The view's strides, or the row-major strides of its shape.
std::vector<int64_t> stridesOf(const TensorView &view);

/// A training forward's lse [b, hq, sq] (checked) seen as [b, hq, sq, 1],
/// so that a call's rows slice it as they slice o (docs/backward.md).
TensorView lseAsRows(const TensorView &lse);

/// Whether the view is dense and row-major: every dim of more than one
/// element has the stride of the dims inside it (a dim of one element may
/// have any stride: NumPy gives a new axis stride 0).
bool isDenseRowMajor(const TensorView &view);

/// An encoding operand slot as a kernel takes it: a memref descriptor of
/// the view's rank, as words (two pointers, the offset, sizes, strides). A
/// null view is an unused slot: a one-float dummy the kernel never reads.
std::vector<int64_t> operandSlotWords(const TensorView *view);

/// An embedding's [b, s, d] view as a standalone kernel's [b, 1, s, d] (the
/// head stride is never stepped). A view of another rank, or with strides
/// of another rank, stays as it is, for checkView to name.
TensorView withOneHead(const TensorView &view);

/// The shape of a call of a kernel of shape `kernel`: each `?` dim
/// (kDynamicDim) taken from the query (b: dim 0, sq: dim 2) or the key
/// (skv: dim 2), which must lie in [1, 2^31 - 1]; an error names the
/// tensor, the dim and its value.
Expected<Shape> callShape(const Shape &kernel, const TensorView &query, const TensorView &key);

/// Checks a view's pointer, dtype (one of `dtypes`), shape and strides
/// (last dimension contiguous, none negative); `what` names it.
Status checkView(const TensorView &view, const std::string &what,
                 const std::vector<int64_t> &expected, std::vector<DType> dtypes);

/// Position ids as kernels take them: i64 [rows, seq], from the user's
/// i32/i64 view ([seq], [1, seq] or [batch, seq]), or the docs/semantics.md
/// default (first + index) when null. Positions outside [-2^31, 2^31) are an
/// error naming the index (docs/limits.md).
/// With axes > 1 (M-RoPE) the ids are [axes, seq] or [axes, batch, seq]
/// and required; the table is [axes * rows, seq], one block per axis. With
/// `defaultsOnEveryAxis` (a side the kernel has no ids argument for, so
/// nothing rotates it: K of a pre-rotated cache) a null view gives the
/// defaults on every axis (a text token's position on all of them).
/// With limit > 0 (a learned table's rows), ids outside [0, limit) are an
/// error naming the id (as `noun`: "position", "token"), its index and the
/// limit.
Status buildPositionTable(const TensorView *view, const std::string &what, int64_t rows,
                          int64_t seq, int64_t batch, int64_t first, std::vector<int64_t> &table,
                          int64_t axes = 1, int64_t limit = 0, const std::string &noun = "position",
                          bool defaultsOnEveryAxis = false);

/// What a run writes may not alias what it reads: `out` (and linear
/// attention's carried state, which the run reads and writes) must not
/// overlap any input nor each other, and may not repeat an element (a zero
/// stride on a dim of more than one element). With `inPlaceAllowed` (a
/// standalone transform), `out` may be exactly an input's view (the same
/// data, shape and strides). An error names both buffers.
Status checkWrites(const KernelSignature &signature, const std::vector<TensorView> &inputs,
                   const TensorView &out, bool inPlaceAllowed);
/// The same for several outputs (a backward's dq, dk, dv, each with the
/// name messages use; the first is the one `inPlaceAllowed` concerns), which
/// must not overlap each other either.
Status checkWrites(const KernelSignature &signature, const std::vector<TensorView> &inputs,
                   std::vector<std::pair<const TensorView *, std::string>> written,
                   bool inPlaceAllowed);

struct BoundInputs;

/// docs/limits.md: a RoPE runtime position scale (the encoding operand
/// `rope_position_scale`, f32 [1] or [b]) holds finite numbers, and
/// |scale| * |position| < 2^31 for every position in `tables` (the i64
/// position tables of the call), the same bound as on position ids, so
/// angles stay below 2^36 rad. An error names the scale's entry. Without
/// such an operand, nothing to check.
Status checkPositionScale(const KernelSignature &signature, const BoundInputs &bound,
                          const std::vector<const std::vector<int64_t> *> &tables);

/// A run's inputs by role (KernelSignature): null for omitted position ids.
struct BoundInputs {
  const TensorView *query = nullptr, *key = nullptr, *value = nullptr;
  const TensorView *queryPositions = nullptr, *keyPositions = nullptr;
  /// "input 3 (query_positions)": how messages name them.
  std::string queryPositionsName = "query positions", keyPositionsName = "key positions";
  /// The encoding operands, in order; each checked against its shape and
  /// dtype and contiguous (the kernels read them as dense tables).
  std::vector<const TensorView *> encodingOperands;
  /// A packed batch's cu_seqlens_q and cu_seqlens_k (checked by
  /// readSegments); null for a kernel without segments.
  const TensorView *querySegments = nullptr, *keySegments = nullptr;
  /// Each batch row's key count (checked by readKeyLengths); null without.
  const TensorView *keyLengths = nullptr;
  /// A paged cache's pools and block table (pejit/runtime/PagedKv.h); null
  /// without.
  const TensorView *keyPages = nullptr, *valuePages = nullptr, *blockTable = nullptr;
  /// pe.embed's tokens (checked by the run) and table (checked here:
  /// shape, dtype, contiguous); null without.
  const TensorView *embedTokens = nullptr, *embedTable = nullptr;
  std::string embedTokensName = "tokens";
  /// attn.linear_attention's carried state (read and written in place;
  /// checked by the run against the call's shape); null without.
  const TensorView *linearState = nullptr;
  std::string linearStateName = "linear_state";
  /// A backward's forward output o and its gradient dO (checked by the
  /// run); null without.
  const TensorView *output = nullptr, *outputGradient = nullptr, *logSumExp = nullptr;
};

/// A packed batch's sequences: query rows [query[i], query[i + 1]) against
/// key rows [key[i], key[i + 1]).
struct Segments {
  std::vector<int64_t> query, key;
  size_t count() const { return query.size() - 1; }
};

/// Reads and checks cu_seqlens_q / cu_seqlens_k against the packed lengths
/// (i32 or i64 [n + 1], the same n, 0 first, non-decreasing, the last equal to
/// the query's sq or the key's skv); an error names the input and index.
Expected<Segments> readSegments(const BoundInputs &bound, int64_t totalQuery, int64_t totalKey);

/// Reads and checks key_lengths: [b] i32 or i64, each in [0, skv] (an
/// error names the index and the rule).
Expected<std::vector<int64_t>> readKeyLengths(const BoundInputs &bound, int64_t batch,
                                              int64_t keySeq);

/// Binds `inputs` to the signature's arguments: checks their number, and
/// each encoding operand's view. An error names the input and its role.
Status bindInputs(const KernelSignature &signature, const std::vector<TensorView> &inputs,
                  BoundInputs &bound);

} // namespace pejit

#endif // PEJIT_RUNTIME_VIEWS_H
