// X86KernelImpl::runEmbeddingGradient: a table gradient's call
// (pe.embed_grad, docs/backward.md "Standalone kernels"). It checks the
// views and the ids (an id outside the table is an error naming it, before
// anything is written), sorts the flattened rows r = b s + t by id with a
// stable counting sort (starts[v] .. starts[v + 1] are id v's rows, in
// ascending r), and runs the items: ceil(rows / R) blocks of table rows,
// each row summed by one item in that order. No atomics; the same bits at
// any thread count.
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

namespace pejit {

Status X86KernelImpl::runEmbeddingGradient(const std::vector<TensorView> &inputs,
                                           const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  if (!bound.query || !bound.queryPositions)
    return Status::error("a table gradient takes its gradient rows and their ids");
  const TensorView &grad = *bound.query;
  if (grad.shape.size() != 3)
    return Status::error("input 0 (grad_rows): expected [b, s, d], got rank " +
                         std::to_string(grad.shape.size()));
  int64_t batch = grad.shape[0], seq = grad.shape[1], rows = positionLimit;
  std::vector<int64_t> dims{shape.batch == kDynamicDim ? batch : shape.batch,
                            shape.querySeq == kDynamicDim ? seq : shape.querySeq, shape.headDim};
  if (Status st = checkView(grad, "input 0 (grad_rows)", dims, {inputDtype}); !st)
    return st;
  if (Status st = checkView(out, "output", {rows, shape.headDim}, {outputDtype}); !st)
    return st;
  if (Status st = checkWrites(signature, inputs, out, false); !st)
    return st;
  // The ids' rows: [s] shared by the batch, or [b, s].
  bool shared = true;
  for (const KernelArgument &argument : signature.arguments)
    if (argument.role == ArgumentRole::GradIds)
      shared = argument.shape.size() == 1;
  std::vector<int64_t> ids;
  if (Status st = buildPositionTable(bound.queryPositions, bound.queryPositionsName,
                                     shared ? 1 : batch, seq, batch, 0, ids, 1, rows, "id");
      !st)
    return st;
  // Counting sort of r = b s + t by id, stable: ascending r within an id.
  std::vector<int64_t> starts(rows + 1, 0), order(std::max<int64_t>(batch * seq, 1));
  auto idOf = [&](int64_t r) { return ids[shared ? r % seq : r]; };
  for (int64_t r = 0; r < batch * seq; ++r)
    ++starts[idOf(r) + 1];
  for (int64_t v = 0; v < rows; ++v)
    starts[v + 1] += starts[v];
  std::vector<int64_t> next(starts.begin(), starts.end() - 1);
  for (int64_t r = 0; r < batch * seq; ++r)
    order[next[idOf(r)]++] = r;

  MemRefDescriptor<float, 4> g = describe4(withOneHead(grad));
  MemRefDescriptor<int64_t, 1> sorted = {
      order.data(), order.data(), 0, {static_cast<int64_t>(order.size())}, {1}};
  MemRefDescriptor<int64_t, 1> bounds = {starts.data(), starts.data(), 0, {rows + 1}, {1}};
  std::vector<int64_t> outStrides = stridesOf(out);
  MemRefDescriptor<float, 2> o = {static_cast<float *>(out.data),
                                  static_cast<float *>(out.data),
                                  0,
                                  {rows, shape.headDim},
                                  {outStrides[0], outStrides[1]}};
  int64_t items = (rows + queryTile - 1) / queryTile;
  auto item = [&](int64_t index) {
    MemRefDescriptor<float, 4> gc = g;
    MemRefDescriptor<int64_t, 1> sc = sorted, bc = bounds;
    MemRefDescriptor<float, 2> oc = o;
    embedGradItem_(&gc, &sc, &bc, &oc, index);
  };
  bool onCaller = (batch * seq + rows) * shape.headDim <= kInlineStandaloneElements;
  runItems(items, onCaller, item);
  return Status();
}

} // namespace pejit
