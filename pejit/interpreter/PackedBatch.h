// A packed batch (attn.attention segments(cu_q, cu_k)) and per-row key
// lengths (key_lengths(lens)) in the float64 interpreter: the op means the
// attention run on each sequence (or batch row, over its first lens[n]
// keys) alone, so the interpreter runs the whole function once per
// sequence on its slice of the arguments and packs the results.
//
// Which argument is sliced by which offsets follows its role: the query
// and query ids by cu_q (dim 2 of a tensor, the last dim of ids), the key,
// value and key ids by cu_k (or to the row's length); with key_lengths the
// tensors take their batch row too. One ids tensor for both needs the same
// query and key rows. Any other argument with a `?` dim (or, with
// key_lengths, a rank-4 one) has no per-sequence slice: an error.
#ifndef PEJIT_REFERENCE_INTERPRETER_PACKEDBATCH_H
#define PEJIT_REFERENCE_INTERPRETER_PACKEDBATCH_H

#include "pejit/interpreter/ReferenceInterpreter.h"

#include <functional>

namespace pejit {

/// One evaluation of a split call: its batch row (-1: all) and its key
/// count (what attn.paged_kv gathers).
struct PackedCall {
  int64_t row = -1, keyCount = -1;
};

/// Whether the function takes query_segments / key_segments or key_lengths.
bool isPackedBatch(const FunctionSignature &sig);

/// Runs `evaluate` once per sequence of the packed batch `arguments`
/// describe (the offsets checked: i32 [n + 1], 0 first, non-decreasing, the
/// last the packed length; key lengths in [0, skv]; an error names the
/// argument and index) and packs the results along dim 2 (key_lengths:
/// dim 0). A sequence with queries but no keys
/// gives zero rows, as every fully-masked row does.
Expected<ref::Tensor> interpretPackedBatch(
    const FunctionSignature &sig, const std::vector<ReferenceArgument> &arguments,
    const std::function<Expected<ref::Tensor>(const std::vector<ReferenceArgument> &,
                                              const PackedCall &)> &evaluate);

/// attn.paged_kv in float64: [b, h, keys, d] from `pages` [num_pages,
/// page_size, h, d] and `table` [b, max_pages] (keys < 0: max_pages *
/// page_size). False with `problem` naming the entry ([rowBase + n, i]) if
/// one read is outside [0, num_pages).
bool gatherPagedKv(const ref::Tensor &pages, const ref::PositionIds &table, int64_t keys,
                   int64_t rowBase, ref::Tensor &out, std::string &problem);

} // namespace pejit

#endif // PEJIT_REFERENCE_INTERPRETER_PACKEDBATCH_H
