// X86KernelImpl::runShawTermGradient: pe.relative_term_grad's call (a
// materialized Shaw term's gradients, docs/backward.md), through
// runBackward. It checks the views, then runs the items, each adding its
// part of the table's gradient to its own zeroed partial (and, for the key
// term, writing its rows of dq); the partials are summed in item order in
// f64 and rounded once: the same bits at any thread count.
//   key term:   inputs q, a^K, dE [b, h, sq, skv]; gradients dq (q's type)
//               and d a^K (f32); items b h ceil(sq / tile_m)
//   value term: inputs a^V, dR [(h,) sq, skv, dv]; gradient d a^V (f32);
//               items heads ceil((sq + skv - 1) / tile_m)
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

namespace pejit {

Status X86KernelImpl::runShawTermGradient(const std::vector<TensorView> &inputs,
                                          const std::vector<TensorView> &gradients) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  bool key = keyTermGradItem_ != nullptr;
  if (!bound.outputGradient || bound.encodingOperands.empty() || !bound.encodingOperands[0] ||
      (key && !bound.query))
    return Status::error(key ? "a key term's backward takes query, its table and output_grad (dE)"
                             : "a value term's backward takes its table and output_grad (dR)");
  if (gradients.size() != (key ? 2u : 1u))
    return Status::error(std::string("expected ") +
                         (key ? "2 gradients (dq, the table's)" : "1 gradient (the table's)") +
                         ", got " + std::to_string(gradients.size()));
  const TensorView &term = *bound.outputGradient;
  const TensorView &table = *bound.encodingOperands[0];
  // shape is {b, h, h, sq, skv, d, d} (X86Backend): `?` dims are the view's.
  auto pick = [](int64_t kernelDim, int64_t viewDim) {
    return kernelDim == kDynamicDim ? viewDim : kernelDim;
  };
  size_t rank = term.shape.size();
  bool sharedValue = !key && rank == 3;
  if (rank != (sharedValue ? 3u : 4u))
    return Status::error("output_grad: expected rank " +
                         std::string(key ? "4 [b, h, sq, skv]" : "3 or 4 [(h,) sq, skv, dv]") +
                         ", got rank " + std::to_string(rank));
  // The term as a 4-D view ([1, sq, skv, dv] for a shared value table).
  TensorView term4 = term;
  if (sharedValue) {
    std::vector<int64_t> strides = stridesOf(term);
    term4.shape.insert(term4.shape.begin(), 1);
    term4.strides = {0, strides[0], strides[1], strides[2]};
  }
  std::vector<int64_t> dims =
      key ? std::vector<int64_t>{pick(shape.batch, term.shape[0]),
                                 pick(shape.queryHeads, term.shape[1]),
                                 pick(shape.querySeq, term.shape[2]),
                                 pick(shape.keySeq, term.shape[3])}
          : std::vector<int64_t>{shape.queryHeads, pick(shape.querySeq, term4.shape[1]),
                                 pick(shape.keySeq, term4.shape[2]), shape.valueDim};
  if (Status st = checkView(term4, "output_grad", dims, {inputDtype}); !st)
    return st;
  const TensorView &tableGrad = gradients.back();
  if (Status st = checkView(tableGrad, "the table's gradient", table.shape, {DType::F32}); !st)
    return st;
  if (!isDenseRowMajor(tableGrad))
    return Status::error("the table's gradient must be contiguous (row-major): the run writes it "
                         "whole");
  std::vector<std::pair<const TensorView *, std::string>> written = {
      {&tableGrad, "the table's gradient"}};
  if (key) {
    std::vector<int64_t> rows = {dims[0], dims[1], dims[2], shape.headDim};
    DType queryType = inputDtype;
    for (const KernelArgument &argument : signature.arguments)
      if (argument.role == ArgumentRole::Query)
        queryType = argument.dtype;
    if (Status st = checkView(*bound.query, "query", rows, {queryType}); !st)
      return st;
    if (Status st = checkView(gradients[0], "dq", rows, {queryType}); !st)
      return st;
    written.insert(written.begin(), {&gradients[0], "dq"});
  }
  if (Status st = checkWrites(signature, inputs, written, false); !st)
    return st;
  int64_t floats = 1;
  for (int64_t dim : table.shape)
    floats *= dim;
  const int64_t items = key ? dims[0] * dims[1] * ((dims[2] + queryTile - 1) / queryTile)
                            : dims[0] * ((dims[1] + dims[2] - 1 + queryTile - 1) / queryTile);
  std::vector<float> partial(std::max<int64_t>(items * floats, 1));
  MemRefDescriptor<float, 1> partials = {
      partial.data(), partial.data(), 0, {static_cast<int64_t>(partial.size())}, {1}};
  const MemRefDescriptor<float, 4> t = describe4(term4);
  const std::vector<int64_t> tableWords = operandSlotWords(&table);
  bool onCaller = dims[0] * dims[1] * dims[2] * dims[3] <= kInlineStandaloneElements;
  if (key) {
    const MemRefDescriptor<float, 4> q = describe4(*bound.query);
    const MemRefDescriptor<float, 4> dq = describe4(gradients[0]);
    runItems(items, onCaller, [&](int64_t index) {
      MemRefDescriptor<float, 4> tc = t, qc = q, dqc = dq;
      MemRefDescriptor<float, 1> pc = partials;
      std::vector<int64_t> words = tableWords;
      keyTermGradItem_(&tc, &qc, &dqc, words.data(), &pc, index);
    });
  } else {
    runItems(items, onCaller, [&](int64_t index) {
      MemRefDescriptor<float, 4> tc = t;
      MemRefDescriptor<float, 1> pc = partials;
      std::vector<int64_t> words = tableWords;
      valueTermGradItem_(&tc, words.data(), &pc, index);
    });
  }
  sumPartialsInItemOrder(partial, items, floats, static_cast<float *>(tableGrad.data));
  return Status();
}

} // namespace pejit
