// The sub-calls of one attention call (CallParts.h).
#include "pejit/runtime/CallParts.h"

#include "pejit/runtime/PagedKv.h"

#include <cstring>
#include <tuple>

namespace pejit {

Expected<Shape> callShapeOf(const KernelDescription &kernel,
                            const std::vector<TensorView> &inputs) {
  BoundInputs bound;
  if (Status st = bindInputs(kernel.signature, inputs, bound); !st)
    return st;
  if (kernel.signature.materializedBias) { // the kernel's lengths (a key term's query's b, sq)
    Shape s = kernel.shape;
    if (bound.query && bound.query->shape.size() == 4) {
      if (s.batch == kDynamicDim)
        s.batch = bound.query->shape[0];
      if (s.querySeq == kDynamicDim)
        s.querySeq = bound.query->shape[2];
    }
    if (s.hasDynamicDims())
      return Status::error("a materialized bias with `?` dims takes its lengths from the output "
                           "view: call run with the output (its shape is [b, h, sq, skv])");
    return s;
  }
  if (kernel.signature.scoreBiasGradient()) { // dBias [1|b, h, sq, skv]
    const TensorView &dbias = *bound.outputGradient;
    if (dbias.shape.size() != 4)
      return Status::error("output_grad: expected dBias of rank 4 [1|b, h, sq, skv], got rank " +
                           std::to_string(dbias.shape.size()));
    return Shape{
        dbias.shape[0], dbias.shape[1], dbias.shape[1], dbias.shape[2], dbias.shape[3], 8, 8};
  }
  if (kernel.signature.embeddingGradient()) { // out [rows, d], as [1, 1, rows, d]
    Shape s = kernel.shape;
    s.batch = s.queryHeads = s.kvHeads = 1;
    s.querySeq = s.keySeq = kernel.positionLimit;
    return s;
  }
  if (kernel.signature.tokenEmbedding()) { // tokens [b, s]: rows [b, 1, s, d]
    const TensorView &tokens = *bound.embedTokens;
    if (tokens.shape.size() != 2)
      return Status::error("tokens: expected [b, s] token ids, got rank " +
                           std::to_string(tokens.shape.size()));
    Shape s = kernel.shape;
    s.batch = tokens.shape[0];
    s.querySeq = s.keySeq = tokens.shape[1];
    return s;
  }
  if (kernel.signature.standaloneTransform()) { // x [b, h, s, d] is Q and K
    TensorView x = kernel.signature.embeddingTransform() ? withOneHead(*bound.query) : *bound.query;
    return callShape(kernel.shape, x, x);
  }
  if (kernel.signature.paged()) { // K's length: the block table's pages
    Expected<PagedKv> paged = readPagedKv(bound, kernel.shape, kernel.inputDtype);
    if (!paged)
      return Status::error(paged.error());
    return callShape(kernel.shape, *bound.query, paged->logicalKey);
  }
  return callShape(kernel.shape, *bound.query, *bound.key);
}

bool partsSliceIds(const KernelSignature &signature) {
  return signature.segmented() || signature.keyLengths();
}

Expected<std::vector<CallPart>> callParts(const KernelSignature &signature,
                                          const BoundInputs &bound, const Shape &s) {
  using Result = Expected<std::vector<CallPart>>;
  std::vector<CallPart> parts;
  if (signature.segmented()) {
    Expected<Segments> read = readSegments(bound, s.querySeq, s.keySeq);
    if (!read)
      return Result::error(read.error());
    for (size_t i = 0; i < read->count(); ++i)
      parts.push_back({-1, read->query[i], read->query[i + 1] - read->query[i], read->key[i],
                       read->key[i + 1] - read->key[i]});
  } else if (signature.keyLengths()) {
    Expected<std::vector<int64_t>> lengths = readKeyLengths(bound, s.batch, s.keySeq);
    if (!lengths)
      return Result::error(lengths.error());
    for (int64_t n = 0; n < s.batch; ++n)
      parts.push_back({n, 0, s.querySeq, 0, (*lengths)[n]});
  } else if (signature.paged()) { // each row its own pages
    for (int64_t n = 0; n < s.batch; ++n)
      parts.push_back({n, 0, s.querySeq, 0, s.keySeq});
  } else {
    parts.push_back({-1, 0, s.querySeq, 0, s.keySeq});
  }
  // Sliced ids must first hold the whole call's: [total] (or [A, total]).
  if (partsSliceIds(signature))
    for (auto [ids, name, total] : {std::tuple<const TensorView *, std::string, int64_t>{
                                        bound.queryPositions, bound.queryPositionsName, s.querySeq},
                                    {bound.keyPositions, bound.keyPositionsName, s.keySeq}})
      if (ids && (ids->shape.empty() || ids->shape.back() != total))
        return Result::error(name + ": shape " + dimsText(ids->shape) + " must end in " +
                             std::to_string(total) + " (the call's packed length)");
  return parts;
}

TensorView positionsOf(const TensorView &view, int64_t first, int64_t count) {
  TensorView part = view;
  part.strides = stridesOf(view);
  part.data = static_cast<char *>(view.data) + first * part.strides.back() * dtypeBytes(view.dtype);
  part.shape.back() = count;
  return part;
}

TensorView sliceRows(const TensorView &view, int64_t row, int64_t first, int64_t count) {
  TensorView part = view;
  part.strides = stridesOf(view);
  int64_t offset = (row < 0 ? 0 : row * part.strides[0]) + first * part.strides[2];
  part.data = static_cast<char *>(view.data) + offset * dtypeBytes(view.dtype);
  if (row >= 0)
    part.shape[0] = 1;
  part.shape[2] = count;
  return part;
}

void zeroRows(const TensorView &out, int64_t n, int64_t first, int64_t count) {
  std::vector<int64_t> strides = stridesOf(out);
  size_t bytes = dtypeBytes(out.dtype);
  for (int64_t h = 0; h < out.shape[1]; ++h)
    for (int64_t r = first; r < first + count; ++r)
      std::memset(static_cast<char *>(out.data) +
                      (n * strides[0] + h * strides[1] + r * strides[2]) * bytes,
                  0, out.shape[3] * bytes);
}

} // namespace pejit
