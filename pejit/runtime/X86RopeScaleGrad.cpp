// X86KernelImpl::runRopeScaleGradient: pe.rope_scale_grad's call
// (docs/backward.md, "Standalone kernels"). It checks the views (x and dy
// the kernel's [b, h, s, d] type, the output the scale's shape), builds the
// ids and runs the RoPE's prologue as the forward does, then the items
// (b h ceil(s / R)), each adding its sums to its own L entries of a
// zeroed partial buffer; the entries are summed in item order in f64 and
// rounded once: the same bits at any thread count.
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

namespace pejit {

Status X86KernelImpl::runRopeScaleGradient(const std::vector<TensorView> &inputs,
                                           const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  if (!bound.query || !bound.outputGradient || !bound.queryPositions ||
      bound.encodingOperands.empty())
    return Status::error("a position scale gradient takes dy, x, the position ids and the scale");
  Expected<Shape> resolved = callShape(shape, *bound.query, *bound.query);
  if (!resolved)
    return Status::error(resolved.error());
  const Shape &s = *resolved;
  std::vector<int64_t> dims{s.batch, s.queryHeads, s.querySeq, s.headDim};
  if (Status st = checkView(*bound.query, "transform_input", dims, {inputDtype}); !st)
    return st;
  if (Status st = checkView(*bound.outputGradient, "output_grad", dims, {inputDtype}); !st)
    return st;
  const TensorView &scale = *bound.encodingOperands[0];
  const int64_t length = scale.shape.empty() ? 1 : scale.shape[0];
  if (Status st = checkView(out, "output", {length}, {DType::F32}); !st)
    return st;
  if (Status st = checkWrites(signature, inputs, out, false); !st)
    return st;
  bool onCaller = s.batch * s.queryHeads * s.querySeq * s.headDim <= kInlineStandaloneElements;
  ScratchBuffer scratch;
  MemRefDescriptor<float, 1> tables;
  std::vector<int64_t> ids;
  if (Status st = fillStandaloneTables(bound, s.batch, s.querySeq, onCaller, scratch, tables, &ids);
      !st)
    return st;
  int64_t idRows = positionAxes * queryPositionRows;
  MemRefDescriptor<int64_t, 2> positions = {
      ids.data(), ids.data(), 0, {idRows, s.querySeq}, {s.querySeq, 1}};
  int64_t items = s.batch * s.queryHeads * ((s.querySeq + queryTile - 1) / queryTile);
  std::vector<float> partial(std::max<int64_t>(items * length, 1), 0.0f);
  MemRefDescriptor<float, 1> partials = {
      partial.data(), partial.data(), 0, {static_cast<int64_t>(partial.size())}, {1}};
  MemRefDescriptor<float, 4> x = describe4(*bound.query), dy = describe4(*bound.outputGradient);
  const std::vector<int64_t> scaleWords = operandSlotWords(&scale);
  auto item = [&](int64_t index) {
    MemRefDescriptor<float, 4> xc = x, dc = dy;
    MemRefDescriptor<int64_t, 2> pc = positions;
    MemRefDescriptor<float, 1> tc = tables, partc = partials;
    std::vector<int64_t> words = scaleWords;
    scaleGradItem_(&xc, &dc, &pc, &tc, &partc, words.data(), index);
  };
  runItems(items, onCaller, item);
  returnScratch(std::move(scratch));
  std::vector<int64_t> outStrides = stridesOf(out);
  for (int64_t l = 0; l < length; ++l) {
    double sum = 0;
    for (int64_t index = 0; index < items; ++index)
      sum += partial[index * length + l];
    static_cast<float *>(out.data)[l * outStrides[0]] = static_cast<float>(sum);
  }
  return Status();
}

} // namespace pejit
