// X86KernelImpl::runBackward: a backward kernel's run (docs/backward.md).
// It checks the views (the inputs against the kernel's shape class, each
// gradient against its input's shape, no gradient overlapping an input or
// another), then runs its calls (X86BackwardCall.cpp): the whole run, or,
// for a packed batch (segments) or per-row key lengths, one call per
// sequence or row on its slices, as the forward does (CallParts.h). Keys
// past every part (a row's unused capacity) get zero gradients. The
// encoding operands' gradients are summed over the calls in their order, in
// f64, and rounded once.
#include "pejit/runtime/CallParts.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

#include <algorithm>
#include <array>

namespace pejit {

Status X86KernelImpl::runBackward(const std::vector<TensorView> &inputs,
                                  const std::vector<TensorView> &gradients) const {
  if (keyTermGradItem_ || valueTermGradItem_)
    return runShawTermGradient(inputs, gradients);
  if (!backwardQuery_ && !linearBackwardItem_)
    return Status::error("runBackward needs a backward kernel (a source with "
                         "attn.attention_backward); this one is a forward: call run");
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  if (!bound.query || !bound.key || !bound.value || !bound.output || !bound.outputGradient)
    return Status::error("a backward takes query, key, value, output and output_grad");
  // How messages name encoding operand `slot` ("t5_table").
  auto operandLabel = [&](unsigned slot) -> std::string {
    for (const KernelArgument &argument : signature.arguments)
      for (unsigned s : argument.slots)
        if (s == slot)
          return argument.name;
    return "encoding operand " + std::to_string(slot);
  };
  Expected<Shape> resolved = callShape(shape, *bound.query, *bound.key);
  if (!resolved)
    return Status::error(resolved.error());
  const Shape &s = *resolved;
  const std::vector<int64_t> queryDims{s.batch, s.queryHeads, s.querySeq, s.headDim},
      keyDims{s.batch, s.kvHeads, s.keySeq, s.headDim},
      valueDims{s.batch, s.kvHeads, s.keySeq, s.valueDim},
      outputDims{s.batch, s.queryHeads, s.querySeq, s.valueDim};
  // q, k, v, o, dO and dq, dk, dv: the kernel's element type (f32, f16,
  // bf16); the operand gradients f32.
  // (o and dO: the forward's output type, the kernel's or f32).
  const std::vector<DType> f32{DType::F32}, io{inputDtype}, out{outputDtype};
  std::pair<const TensorView *, std::pair<const char *, const std::vector<int64_t> *>> views[] = {
      {bound.query, {"query", &queryDims}},
      {bound.key, {"key", &keyDims}},
      {bound.value, {"value", &valueDims}},
      {bound.output, {"output", &outputDims}},
      {bound.outputGradient, {"output_grad", &outputDims}}};
  for (auto [view, what] : views)
    if (Status st = checkView(*view, what.first, *what.second,
                              view == bound.output || view == bound.outputGradient ? out : io);
        !st)
      return st;
  // A training forward's lse [b, hq, sq] (f32).
  TensorView lse4;
  if (bound.logSumExp) {
    if (Status st = checkView(*bound.logSumExp, "lse", {s.batch, s.queryHeads, s.querySeq}, f32);
        !st)
      return st;
    lse4 = lseAsRows(*bound.logSumExp);
  }
  const std::vector<unsigned> &operandGradients = signature.operandGradients;
  if (gradients.size() != 3 + operandGradients.size()) {
    std::string names = "dq, dk, dv";
    for (unsigned slot : operandGradients)
      names += ", d " + operandLabel(slot);
    return Status::error("expected " + std::to_string(3 + operandGradients.size()) +
                         " gradients (" + names + "), got " + std::to_string(gradients.size()));
  }
  const char *gradientNames[] = {"dq", "dk", "dv"};
  const std::vector<int64_t> *gradientDims[] = {&queryDims, &keyDims, &valueDims};
  for (size_t n = 0; n < 3; ++n)
    if (Status st = checkView(gradients[n], gradientNames[n], *gradientDims[n], io); !st)
      return st;
  // Each operand gradient: f32, dense, the shape of its operand; and its
  // place in the kv items' partial buffers (the sizes before it, as the
  // compiler laid them out).
  std::vector<std::pair<const TensorView *, std::string>> written = {
      {&gradients[0], "dq"}, {&gradients[1], "dk"}, {&gradients[2], "dv"}};
  BackwardOperandGrads grads;
  TensorView scoreGradient;
  for (size_t n = 0; n < operandGradients.size(); ++n) {
    unsigned slot = operandGradients[n];
    const TensorView *operand =
        slot < bound.encodingOperands.size() ? bound.encodingOperands[slot] : nullptr;
    if (!operand)
      return Status::error("no input for encoding operand slot " + std::to_string(slot));
    std::string name = "d " + operandLabel(slot);
    const TensorView &grad = gradients[3 + n];
    if (Status st = checkView(grad, name, operand->shape, f32); !st)
      return st;
    if (!isDenseRowMajor(grad))
      return Status::error(name + " must be contiguous (row-major): the run writes it whole");
    written.push_back({&grad, name});
    if (signature.scoreShapedGradient == slot) { // dS summed by the call itself
      scoreGradient = grad;
      continue;
    }
    int64_t size = 1;
    for (int64_t dim : operand->shape)
      size *= dim;
    grads.offsets.push_back(grads.floats);
    grads.sizes.push_back(size);
    grads.floats += size;
    grads.outputs.push_back(3 + n);
  }
  if (Status st = checkWrites(signature, inputs, written, /*inPlaceAllowed=*/false); !st)
    return st;
  if (linearBackwardItem_) // linear attention: no segments, no operand gradients
    return runLinearBackwardCall(s, bound, gradients);

  // The calls: the run itself, one per sequence of a packed batch, or one
  // per batch row with its key length.
  Expected<std::vector<CallPart>> partsRead = callParts(signature, bound, s);
  if (!partsRead)
    return Status::error(partsRead.error());
  const std::vector<CallPart> &parts = *partsRead;
  std::vector<std::vector<double>> sums;
  for (int64_t size : grads.sizes)
    sums.emplace_back(size, 0.0);
  const bool whole = parts.size() == 1 && parts[0].row < 0 && parts[0].q0 == 0 &&
                     parts[0].nq == s.querySeq && parts[0].k0 == 0 && parts[0].nk == s.keySeq;
  if (scoreGradient.data && !whole)
    return Status::error("a bias tensor's gradient with segments or key lengths is not built yet");
  if (whole) {
    BackwardCall call{s,
                      *bound.query,
                      *bound.key,
                      *bound.value,
                      *bound.output,
                      *bound.outputGradient,
                      gradients[0],
                      gradients[1],
                      gradients[2],
                      bound.queryPositions,
                      bound.keyPositions,
                      lse4,
                      scoreGradient};
    if (Status st = runBackwardCall(call, bound, grads, sums); !st)
      return st;
  } else {
    // Rows and keys no part covers keep gradient 0.
    for (size_t n = 0; n < 3; ++n)
      for (int64_t row = 0; row < gradients[n].shape[0]; ++row)
        zeroRows(gradients[n], row, 0, gradients[n].shape[2]);
    const bool sliced = partsSliceIds(signature);
    for (const CallPart &part : parts) {
      if (part.nq == 0 || part.nk == 0) // rows that see no key: dq stays 0
        continue;
      auto rows = [&](const TensorView &view, int64_t first, int64_t count) {
        return sliceRows(view, part.row, first, count);
      };
      std::optional<TensorView> queryIds, keyIds;
      if (bound.queryPositions)
        queryIds =
            sliced ? positionsOf(*bound.queryPositions, part.q0, part.nq) : *bound.queryPositions;
      if (bound.keyPositions)
        keyIds = sliced ? positionsOf(*bound.keyPositions, part.k0, part.nk) : *bound.keyPositions;
      Shape partShape = s;
      partShape.batch = part.row < 0 ? s.batch : 1;
      partShape.querySeq = part.nq;
      partShape.keySeq = part.nk;
      BackwardCall call{partShape,
                        rows(*bound.query, part.q0, part.nq),
                        rows(*bound.key, part.k0, part.nk),
                        rows(*bound.value, part.k0, part.nk),
                        rows(*bound.output, part.q0, part.nq),
                        rows(*bound.outputGradient, part.q0, part.nq),
                        rows(gradients[0], part.q0, part.nq),
                        rows(gradients[1], part.k0, part.nk),
                        rows(gradients[2], part.k0, part.nk),
                        queryIds ? &*queryIds : nullptr,
                        keyIds ? &*keyIds : nullptr,
                        lse4.data ? rows(lse4, part.q0, part.nq) : TensorView{}};
      if (Status st = runBackwardCall(call, bound, grads, sums); !st)
        return st;
    }
  }
  for (size_t n = 0; n < sums.size(); ++n) {
    float *out = static_cast<float *>(gradients[grads.outputs[n]].data);
    for (size_t e = 0; e < sums[n].size(); ++e)
      out[e] = static_cast<float>(sums[n][e]);
  }
  return Status();
}

} // namespace pejit
