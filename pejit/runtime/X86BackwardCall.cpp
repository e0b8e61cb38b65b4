// X86KernelImpl::runBackwardCall: one call of a backward kernel
// (docs/backward.md): the whole call, or one sequence of a packed batch or
// one batch row with its key length (X86Backward.cpp plans them). 16-bit
// tensors are widened into f32 scratch; a QK transform (RoPE) fills its
// tables, then Q' and K' into scratch; then the three phases, each a pool
// round trip: rows (D and lse into scratch), kv (dk, dv) and q (dq), each
// given the encodings' tensors. Every item writes outputs no other item
// writes, in a fixed order, so the gradients are the same bit for bit at
// any thread count.
#include "pejit/core/CallPlan.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

#include <algorithm>
#include <array>

namespace pejit {

Status X86KernelImpl::buildBackwardIds(const Shape &s, const BoundInputs &bound,
                                       const TensorView *queryIds, const TensorView *keyIds,
                                       std::vector<int64_t> &queryTable,
                                       std::vector<int64_t> &keyTable) const {
  if (Status st =
          buildPositionTable(queryIds, bound.queryPositionsName, queryPositionRows, s.querySeq,
                             s.batch, s.keySeq - s.querySeq, queryTable, positionAxes, 0,
                             "position", !signature.declaresQueryPositions());
      !st)
    return st;
  if (Status st = buildPositionTable(keyIds, bound.keyPositionsName, keyPositionRows, s.keySeq,
                                     s.batch, 0, keyTable, positionAxes, 0, "position",
                                     !signature.declaresKeyPositions());
      !st)
    return st;
  return checkPositionScale(signature, bound, {&queryTable, &keyTable});
}

Status X86KernelImpl::runBackwardCall(const BackwardCall &call, const BoundInputs &bound,
                                      const BackwardOperandGrads &grads,
                                      std::vector<std::vector<double>> &sums) const {
  // The position ids, as the forward builds them (queries from skv - sq,
  // keys from 0 when not given): RoPE's tables and the encodings that
  // measure distance by position (relative_to = position) read them.
  const Shape &s = call.shape;
  const bool transformed = tableFloatsPerQueryPosition + tableFloatsPerKeyPosition > 0;
  std::vector<int64_t> queryIds, keyIds;
  if (Status st = buildBackwardIds(s, bound, call.queryIds, call.keyIds, queryIds, keyIds); !st)
    return st;
  Ids2 qp = idsDescriptor(queryIds, positionAxes * queryPositionRows, s.querySeq),
       kp = idsDescriptor(keyIds, positionAxes * keyPositionRows, s.keySeq);
  // The tables' size by the forward's rule (CallPlan.h).
  const int64_t tableFloats = planCall(*this, s).tableFloats;

  // Scratch: D, lse and the bucketed terms' table (rowScratchFloats for
  // each of the b hq sq rows), then each kv and q item's
  // partial operand gradients; with a QK transform, its tables and Q', K' (the
  // transformed Q and K the phases read), each 16-float aligned.
  auto aligned = [](int64_t floats) { return (floats + 15) / 16 * 16; };
  const int64_t rowFloats = s.batch * s.queryHeads * s.querySeq;
  const int64_t keyItems = s.batch * s.kvHeads * ((s.keySeq + keyTile - 1) / keyTile);
  const int64_t queryItems = s.batch * s.queryHeads * ((s.querySeq + queryTile - 1) / queryTile);
  const int64_t gradItems = keyItems + queryItems; // partial buffers: kv items', then q items'
  const int64_t tablesAt = aligned(rowScratchFloats * rowFloats + gradItems * grads.floats);
  const int64_t queryAt = tablesAt + aligned(tableFloats);
  const int64_t keyAt = queryAt + (transformed ? aligned(rowFloats * s.headDim) : 0);
  // 16-bit tensors: f32 copies of q, k, v, o, dO and f32 dq, dk, dv.
  const bool narrow = inputDtype != DType::F32;
  const int64_t queryFloats = rowFloats * s.headDim, outputFloats = rowFloats * s.valueDim;
  const int64_t keyFloats = s.batch * s.kvHeads * s.keySeq * s.headDim,
                valueFloats = s.batch * s.kvHeads * s.keySeq * s.valueDim;
  const int64_t widenAt = keyAt + (transformed ? aligned(keyFloats) : 0);
  // A bias tensor's gradient: dS [b, hq, sq, skv], written by the kv phase.
  const int64_t scoreFloats =
      call.scoreGradient.data ? s.batch * s.queryHeads * s.querySeq * s.keySeq : 0;
  const int64_t scoreAt =
      widenAt + (narrow ? 2 * (aligned(queryFloats) + aligned(keyFloats) + aligned(valueFloats)) +
                              2 * aligned(outputFloats)
                        : 0);
  const int64_t scratchFloats = scoreAt + aligned(scoreFloats);
  ScratchBuffer scratch = takeScratch(scratchFloats);
  if (!scratch.data)
    return Status::error("out of memory: the backward's scratch of " +
                         std::to_string(scratchFloats) + " floats could not be allocated");
  float *base = scratch.data.get();
  MemRefDescriptor<float, 1> rows = {base, base, 0, {std::max<int64_t>(scratchFloats, 1)}, {1}};
  MemRefDescriptor<float, 1> tables = {
      base + tablesAt, base + tablesAt, 0, {std::max<int64_t>(tableFloats, 1)}, {1}};
  MemRefDescriptor<float, 4> q = describe4(call.q), k = describe4(call.k), v = describe4(call.v),
                             o = describe4(call.o), dO = describe4(call.dO),
                             dq = describe4(call.dq), dk = describe4(call.dk),
                             dv = describe4(call.dv);
  // Dense [b, h, s, d] views of scratch for Q' and K'.
  auto dense = [](float *at, int64_t b, int64_t h, int64_t seq, int64_t d) {
    return MemRefDescriptor<float, 4>{at, at, 0, {b, h, seq, d}, {h * seq * d, seq * d, d, 1}};
  };
  MemRefDescriptor<float, 4> tq = dense(base + queryAt, s.batch, s.queryHeads, s.querySeq,
                                        s.headDim),
                             tk = dense(base + keyAt, s.batch, s.kvHeads, s.keySeq, s.headDim);
  // 16-bit: the phases read f32 copies and write f32 gradients, converted
  // 64 rows an item (the template's @pejit_backward_widen / _narrow).
  std::array<MemRefDescriptor<float, 4>, 3> userGradients = {dq, dk, dv};
  auto items64 = [](const MemRefDescriptor<float, 4> &d) {
    return (d.sizes[0] * d.sizes[1] * d.sizes[2] + 63) / 64;
  };
  if (narrow) {
    float *at = base + widenAt;
    auto take = [&](int64_t h, int64_t seq, int64_t c) {
      MemRefDescriptor<float, 4> d = dense(at, s.batch, h, seq, c);
      at += aligned(s.batch * h * seq * c);
      return d;
    };
    // o and dO of f32 (a 16-bit forward with an f32 result) are read as
    // they are.
    const bool widenOutput = outputDtype != DType::F32;
    std::vector<std::pair<MemRefDescriptor<float, 4>, MemRefDescriptor<float, 4>>> widen = {
        std::pair{q, take(s.queryHeads, s.querySeq, s.headDim)},
        {k, take(s.kvHeads, s.keySeq, s.headDim)},
        {v, take(s.kvHeads, s.keySeq, s.valueDim)}};
    if (widenOutput) {
      widen.push_back({o, take(s.queryHeads, s.querySeq, s.valueDim)});
      widen.push_back({dO, take(s.queryHeads, s.querySeq, s.valueDim)});
    }
    std::vector<int64_t> first{0};
    for (auto &pair : widen)
      first.push_back(first.back() + items64(pair.first));
    pool_->parallelFor(first.back(), [&](int64_t item) {
      size_t n = std::upper_bound(first.begin(), first.end(), item) - first.begin() - 1;
      MemRefDescriptor<float, 4> from = widen[n].first, to = widen[n].second;
      backwardWiden_(&from, &to, item - first[n]);
    });
    q = widen[0].second, k = widen[1].second, v = widen[2].second;
    if (widenOutput)
      o = widen[3].second, dO = widen[4].second;
    dq = take(s.queryHeads, s.querySeq, s.headDim);
    dk = take(s.kvHeads, s.keySeq, s.headDim);
    dv = take(s.kvHeads, s.keySeq, s.valueDim);
  }
  // The encodings' tensors (a T5 table, ALiBi has none), slot by slot.
  std::array<std::vector<int64_t>, kEncodingOperandSlots> slots;
  for (size_t n = 0; n < kEncodingOperandSlots; ++n)
    slots[n] =
        operandSlotWords(n < bound.encodingOperands.size() ? bound.encodingOperands[n] : nullptr);
  if (transformed) {
    // The tables on all cores (part p fills position rows p, p + threads,
    // ...), then Q' and K' by query and key tiles; the phases read those.
    const int64_t threads = pool_->threads();
    pool_->parallelFor(threads, [&](int64_t part) {
      MemRefDescriptor<int64_t, 2> qpc = qp, kpc = kp;
      MemRefDescriptor<float, 1> tc = tables;
      std::array<std::vector<int64_t>, kEncodingOperandSlots> e = slots;
      backwardPrologue_(&qpc, &kpc, &tc, part, threads, e[0].data(), e[1].data(), e[2].data(),
                        e[3].data());
    });
    pool_->parallelFor(queryItems + keyItems, [&](int64_t item) {
      MemRefDescriptor<float, 4> qc = q, kc = k, tqc = tq, tkc = tk;
      MemRefDescriptor<float, 1> tc = tables;
      backwardTransform_(&qc, &kc, &tqc, &tkc, &tc, item);
    });
    q = tq;
    k = tk;
  }
  // Each phase reads what the one before wrote: three pool round trips.
  // dS for a bias tensor's gradient (zeroed: the scores a mask hides are
  // never written), or 0 rows.
  MemRefDescriptor<float, 4> dScore{};
  if (scoreFloats > 0) {
    float *at = base + scoreAt;
    std::fill(at, at + scoreFloats, 0.0f);
    dScore = dense(at, s.batch, s.queryHeads, s.querySeq, s.keySeq);
  }
  // A training forward's lse, or a descriptor of 0 rows: recomputed.
  MemRefDescriptor<float, 4> lse{};
  if (call.lse.data)
    lse = describe4(call.lse);
  pool_->parallelFor(queryItems, [&](int64_t item) {
    MemRefDescriptor<float, 4> qc = q, kc = k, vc = v, oc = o, dOc = dO, lc = lse;
    MemRefDescriptor<float, 1> sc = rows;
    std::array<std::vector<int64_t>, kEncodingOperandSlots> e = slots;
    Ids2 qpc = qp, kpc = kp;
    backwardRows_(&qc, &kc, &vc, &oc, &dOc, &lc, &sc, &qpc, &kpc, e[0].data(), e[1].data(),
                  e[2].data(), e[3].data(), item);
  });
  pool_->parallelFor(keyItems, [&](int64_t item) {
    MemRefDescriptor<float, 4> qc = q, kc = k, vc = v, dOc = dO, dkc = dk, dvc = dv, dsc = dScore;
    MemRefDescriptor<float, 1> sc = rows;
    std::array<std::vector<int64_t>, kEncodingOperandSlots> e = slots;
    MemRefDescriptor<float, 1> tc = tables;
    Ids2 qpc = qp, kpc = kp;
    backwardKv_(&qc, &kc, &vc, &dOc, &dkc, &dvc, &dsc, &sc, &tc, &qpc, &kpc, e[0].data(),
                e[1].data(), e[2].data(), e[3].data(), item);
  });
  pool_->parallelFor(queryItems, [&](int64_t item) {
    MemRefDescriptor<float, 4> qc = q, kc = k, vc = v, dOc = dO, dqc = dq;
    MemRefDescriptor<float, 1> sc = rows;
    std::array<std::vector<int64_t>, kEncodingOperandSlots> e = slots;
    MemRefDescriptor<float, 1> tc = tables;
    Ids2 qpc = qp, kpc = kp;
    backwardQuery_(&qc, &kc, &vc, &dOc, &dqc, &sc, &tc, &qpc, &kpc, e[0].data(), e[1].data(),
                   e[2].data(), e[3].data(), item);
  });
  if (narrow) { // dq, dk, dv back to the caller's 16-bit tensors
    std::array<MemRefDescriptor<float, 4>, 3> computed = {dq, dk, dv};
    std::vector<int64_t> first{0};
    for (const MemRefDescriptor<float, 4> &d : computed)
      first.push_back(first.back() + items64(d));
    pool_->parallelFor(first.back(), [&](int64_t item) {
      size_t n = std::upper_bound(first.begin(), first.end(), item) - first.begin() - 1;
      MemRefDescriptor<float, 4> from = computed[n], to = userGradients[n];
      backwardNarrow_(&from, &to, item - first[n]);
    });
  }
  // The operand gradients: each element the sum of the items' partials,
  // in item order (so the bits do not depend on the thread count), in f64
  // (a position scale's partials are large and cancel), added to `sums`.
  constexpr int64_t kChunk = 256;
  for (size_t n = 0; n < grads.sizes.size(); ++n) {
    double *out = sums[n].data();
    const float *partials = scratch.data.get() + rowScratchFloats * rowFloats + grads.offsets[n];
    pool_->parallelFor((grads.sizes[n] + kChunk - 1) / kChunk, [&](int64_t chunk) {
      int64_t end = std::min(grads.sizes[n], (chunk + 1) * kChunk);
      for (int64_t e = chunk * kChunk; e < end; ++e) {
        double sum = 0.0;
        for (int64_t item = 0; item < gradItems; ++item)
          sum += partials[item * grads.floats + e];
        out[e] += sum;
      }
    });
  }
  // A bias tensor's gradient: dS summed over the bias's broadcast dims (b,
  // then h, in order, in f64), one job per row of the gradient.
  if (scoreFloats > 0) {
    const TensorView &grad = call.scoreGradient;
    const int64_t gb = grad.shape[0], gh = grad.shape[1], sq = s.querySeq, skv = s.keySeq;
    const float *dS = base + scoreAt;
    float *out = static_cast<float *>(grad.data);
    pool_->parallelFor(gb * gh * sq, [&](int64_t row) {
      const int64_t i = row % sq, h0 = (row / sq) % gh, b0 = row / (sq * gh);
      for (int64_t j = 0; j < skv; ++j) {
        double sum = 0.0;
        for (int64_t b = (gb == 1 ? 0 : b0); b < (gb == 1 ? s.batch : b0 + 1); ++b)
          for (int64_t h = (gh == 1 ? 0 : h0); h < (gh == 1 ? s.queryHeads : h0 + 1); ++h)
            sum += dS[((b * s.queryHeads + h) * sq + i) * skv + j];
        out[row * skv + j] = static_cast<float>(sum);
      }
    });
  }
  returnScratch(std::move(scratch));
  return Status();
}

} // namespace pejit
