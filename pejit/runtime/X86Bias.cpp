// X86KernelImpl::runBias: a materialized term's call (pe.alibi, pe.t5_bias,
// pe.relative_key, pe.relative_value on their own;
// docs/standalone-kernels.md). The output is [o0, o1, o2, o3]: [1|b, h, sq,
// skv], or a value term's [(h,) sq, skv, dv] (a rank-3 view is [1, ...]).
// Its `?` dims are the view's; its tables are checked by bindInputs, a key
// term's query here. Items: tile_m output rows of o3 each (one row, or a
// block for a bias of the distance alone), o0 o1 ceil(o2 / tile_m) of them.
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

#include <algorithm>

namespace pejit {

Status X86KernelImpl::runBias(const std::vector<TensorView> &inputs, const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  TensorView o = out;
  if (o.shape.size() == 3 && shape.batch == 1) { // [sq, skv, dv]: one shared table's
    o.shape.insert(o.shape.begin(), 1);
    if (!o.strides.empty())
      o.strides.insert(o.strides.begin(), o.shape[1] * o.strides[0]);
  }
  if (o.shape.size() != 4)
    return Status::error(
        "output: expected rank 4 ([b, h, sq, skv] or [h, sq, skv, dv]), got rank " +
        std::to_string(out.shape.size()));
  // shape is {o0, o1, o1, o2, o3, d, o3} (X86Backend): `?` dims are the view's.
  auto pick = [&](int64_t kernelDim, int64_t viewDim) {
    return kernelDim == kDynamicDim ? viewDim : kernelDim;
  };
  std::vector<int64_t> dims = {pick(shape.batch, o.shape[0]), pick(shape.queryHeads, o.shape[1]),
                               pick(shape.querySeq, o.shape[2]), pick(shape.keySeq, o.shape[3])};
  if (Status st = checkView(o, "output", dims, {outputDtype}); !st)
    return st;
  if (Status st = checkWrites(signature, inputs, o, false); !st)
    return st;
  // A key term's query [b, h, sq, d]: the output's first three dims.
  static float unread[8] = {};
  MemRefDescriptor<float, 4> q = {unread, unread, 0, {1, 1, 1, 8}, {8, 8, 8, 1}};
  if (bound.query) {
    if (Status st = checkView(*bound.query, "query", {dims[0], dims[1], dims[2], shape.headDim},
                              {inputDtype});
        !st)
      return st;
    q = describe4(*bound.query);
  }
  const std::vector<int64_t> table =
      operandSlotWords(bound.encodingOperands.empty() ? nullptr : bound.encodingOperands[0]);
  MemRefDescriptor<float, 4> od = describe4(o);
  // Items of queryTile (tile_m) rows: one, or a block of a bias of the
  // distance alone.
  int64_t rows = std::max<int64_t>(queryTile, 1);
  int64_t items = dims[0] * dims[1] * ((dims[2] + rows - 1) / rows);
  auto item = [&](int64_t index) {
    MemRefDescriptor<float, 4> oc = od, qc = q;
    std::vector<int64_t> e0 = table;
    biasItem_(&oc, &qc, e0.data(), index);
  };
  runItems(items, dims[0] * dims[1] * dims[2] * dims[3] <= kInlineStandaloneElements, item);
  return Status();
}

} // namespace pejit
