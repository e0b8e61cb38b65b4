// X86KernelImpl::runScoreBiasGradient: pe.score_bias_grad's call (a
// materialized bias's tensor gradient, docs/backward.md). It checks the
// views (dBias [1|b, h, sq, skv] of the kernel's type, the output the
// tensor's shape in f32), then runs the items (b h ceil(sq / tile_m)), each
// adding its diagonals' contributions to its own zeroed partial gradient;
// the partials are summed in item order in f64 and rounded once: the same
// bits at any thread count.
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

namespace pejit {

Status X86KernelImpl::runScoreBiasGradient(const std::vector<TensorView> &inputs,
                                           const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  if (!bound.outputGradient || bound.encodingOperands.empty() || !bound.encodingOperands[0])
    return Status::error("a bias gradient takes the bias's tensor and output_grad (dBias)");
  const TensorView &dbias = *bound.outputGradient;
  if (dbias.shape.size() != 4)
    return Status::error("output_grad: expected dBias of rank 4 [1|b, h, sq, skv], got rank " +
                         std::to_string(dbias.shape.size()));
  // shape is {o0, o1, o1, o2, o3, 8, 8} (X86Backend): `?` dims are the view's.
  auto pick = [](int64_t kernelDim, int64_t viewDim) {
    return kernelDim == kDynamicDim ? viewDim : kernelDim;
  };
  const std::vector<int64_t> dims = {
      pick(shape.batch, dbias.shape[0]), pick(shape.queryHeads, dbias.shape[1]),
      pick(shape.querySeq, dbias.shape[2]), pick(shape.keySeq, dbias.shape[3])};
  if (Status st = checkView(dbias, "output_grad", dims, {inputDtype}); !st)
    return st;
  const TensorView &table = *bound.encodingOperands[0];
  if (Status st = checkView(out, "output", table.shape, {DType::F32}); !st)
    return st;
  if (!isDenseRowMajor(out))
    return Status::error("output must be contiguous (row-major): the run writes it whole");
  if (Status st = checkWrites(signature, inputs, out, false); !st)
    return st;
  int64_t floats = 1;
  for (int64_t dim : table.shape)
    floats *= dim;
  const int64_t items = dims[0] * dims[1] * ((dims[2] + queryTile - 1) / queryTile);
  std::vector<float> partial(std::max<int64_t>(items * floats, 1));
  MemRefDescriptor<float, 1> partials = {
      partial.data(), partial.data(), 0, {static_cast<int64_t>(partial.size())}, {1}};
  const MemRefDescriptor<float, 4> db = describe4(dbias);
  const std::vector<int64_t> tableWords = operandSlotWords(&table);
  bool onCaller = dims[0] * dims[1] * dims[2] * dims[3] <= kInlineStandaloneElements;
  runItems(items, onCaller, [&](int64_t index) {
    MemRefDescriptor<float, 4> dc = db;
    MemRefDescriptor<float, 1> pc = partials;
    std::vector<int64_t> words = tableWords;
    biasGradItem_(&dc, words.data(), &pc, index);
  });
  sumPartialsInItemOrder(partial, items, floats, static_cast<float *>(out.data));
  return Status();
}

} // namespace pejit
