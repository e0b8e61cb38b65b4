// X86KernelImpl::runLinearBackwardCall: a linear attention backward's run
// (templates/x86/linear_attention_backward.mlir, docs/backward.md), after
// runBackward has checked its views. The RoPE's tables on all cores, then
// one item per (b, hkv) on the pool: each writes the dq rows of its group's
// heads and the dk, dv rows of its KV head, once, in a fixed order, so the
// gradients are the same bit for bit at any thread count. Scratch: the
// tables, then, causal, each query row's P, W and 1/den (the description's
// row_scratch_floats, 2 d + 8) that an item's query half writes and its
// key half reads.
#include "pejit/core/CallPlan.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

#include <array>

namespace pejit {

Status X86KernelImpl::runLinearBackwardCall(const Shape &s, const BoundInputs &bound,
                                            const std::vector<TensorView> &gradients) const {
  std::vector<int64_t> queryIds, keyIds;
  if (Status st =
          buildBackwardIds(s, bound, bound.queryPositions, bound.keyPositions, queryIds, keyIds);
      !st)
    return st;
  Ids2 qp = idsDescriptor(queryIds, positionAxes * queryPositionRows, s.querySeq),
       kp = idsDescriptor(keyIds, positionAxes * keyPositionRows, s.keySeq);
  const int64_t tableFloats = planCall(*this, s).tableFloats;
  const int64_t rowsAt = (tableFloats + 15) / 16 * 16;
  // rowScratchFloats per query row: causal, the template's RW = 2 d + 8.
  const int64_t rowFloats = s.batch * s.queryHeads * s.querySeq * rowScratchFloats;
  const int64_t scratchFloats = rowsAt + rowFloats;
  ScratchBuffer scratch = takeScratch(scratchFloats);
  if (!scratch.data)
    return Status::error("out of memory: the backward's scratch of " +
                         std::to_string(scratchFloats) + " floats could not be allocated");
  float *base = scratch.data.get();
  MemRefDescriptor<float, 1> tables = {base, base, 0, {std::max<int64_t>(tableFloats, 1)}, {1}};
  MemRefDescriptor<float, 1> rows = {
      base + rowsAt, base + rowsAt, 0, {std::max<int64_t>(rowFloats, 1)}, {1}};
  std::array<std::vector<int64_t>, kEncodingOperandSlots> slots;
  for (size_t n = 0; n < kEncodingOperandSlots; ++n)
    slots[n] =
        operandSlotWords(n < bound.encodingOperands.size() ? bound.encodingOperands[n] : nullptr);
  if (tableFloatsPerQueryPosition + tableFloatsPerKeyPosition > 0) {
    const int64_t threads = pool_->threads();
    pool_->parallelFor(threads, [&](int64_t part) {
      Ids2 qpc = qp, kpc = kp;
      MemRefDescriptor<float, 1> tc = tables;
      std::array<std::vector<int64_t>, kEncodingOperandSlots> e = slots;
      prologue_(&qpc, &kpc, &tc, part, threads, e[0].data(), e[1].data(), e[2].data(), e[3].data());
    });
  }
  const Desc4 q = describe4(*bound.query), k = describe4(*bound.key), v = describe4(*bound.value),
              o = describe4(*bound.output), dO = describe4(*bound.outputGradient),
              dq = describe4(gradients[0]), dk = describe4(gradients[1]),
              dv = describe4(gradients[2]);
  pool_->parallelFor(s.batch * s.kvHeads, [&](int64_t item) {
    Desc4 qc = q, kc = k, vc = v, oc = o, dOc = dO, dqc = dq, dkc = dk, dvc = dv;
    MemRefDescriptor<float, 1> tc = tables, rc = rows;
    std::vector<int64_t> e0 = slots[0];
    Ids2 qpc = qp, kpc = kp;
    linearBackwardItem_(&qc, &kc, &vc, &oc, &dOc, &dqc, &dkc, &dvc, &tc, &rc, e0.data(), &qpc, &kpc,
                        item);
  });
  returnScratch(std::move(scratch));
  return Status();
}

} // namespace pejit
