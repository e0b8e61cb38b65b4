// X86KernelImpl::runBias: a materialized score bias's call (pe.alibi,
// pe.t5_bias on their own; docs/standalone-kernels.md). The output view
// gives the call's b, sq and skv where the kernel has `?`; its tables are
// checked by bindInputs. Items: one output row each, b h sq of them.
#include "runtime/Views.h"
#include "runtime/X86KernelImpl.h"

namespace pejit {

Status X86KernelImpl::runBias(const std::vector<TensorView> &inputs, const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  if (out.shape.size() != 4)
    return Status::error("output: expected [b, h, sq, skv], got rank " +
                         std::to_string(out.shape.size()));
  // shape is {b, h, h, sq, skv, skv, skv} (X86Backend): `?` dims are the view's.
  auto pick = [&](int64_t kernelDim, int64_t viewDim) {
    return kernelDim == kDynamicDim ? viewDim : kernelDim;
  };
  std::vector<int64_t> dims = {pick(shape.batch, out.shape[0]), shape.queryHeads,
                               pick(shape.querySeq, out.shape[2]),
                               pick(shape.keySeq, out.shape[3])};
  if (Status st = checkView(out, "output", dims, {outputDtype}); !st)
    return st;
  const std::vector<int64_t> table =
      operandSlotWords(bound.encodingOperands.empty() ? nullptr : bound.encodingOperands[0]);
  MemRefDescriptor<float, 4> o = describe4(out);
  int64_t items = dims[0] * dims[1] * dims[2];
  auto item = [&](int64_t index) {
    MemRefDescriptor<float, 4> oc = o;
    std::vector<int64_t> e0 = table;
    biasItem_(&oc, e0.data(), index);
  };
  if (items * dims[3] <= kInlineStandaloneElements)
    for (int64_t index = 0; index < items; ++index)
      item(index);
  else
    pool_->parallelFor(items, item);
  return Status();
}

} // namespace pejit
