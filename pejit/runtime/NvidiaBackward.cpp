// NvidiaKernelImpl::runBackward: an attention backward call on the GPU
// (docs/backward.md, "NVIDIA"). Every view is checked first: q, k, v (the
// kernel's 16-bit type), o and dO (the forward's output type), a training
// forward's lse (f32), the ids, and the gradients (dq, dk, dv in q's type,
// each operand's in f32, dense); then it needs a CUDA driver and a device
// of the kernel's architecture or newer. The inputs are packed dense and
// cuda::runAttentionBackward launches the six kernels.
#include "pejit/runtime/NvidiaParts.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/cuda/BackwardLaunch.h"

#include <cstring>

namespace pejit {

using namespace nvidia;

Status NvidiaKernelImpl::runBackward(const std::vector<TensorView> &inputs,
                                     const std::vector<TensorView> &gradients) const {
  auto fail = [](const std::string &what) { return Status::error("nvidia backward: " + what); };
  if (launch.kernel != "pejit_backward")
    return fail("this kernel is a forward (" + launch.kernel + "): call run");
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return fail(st.message());
  if (!bound.query || !bound.key || !bound.value || !bound.output || !bound.outputGradient)
    return fail("a backward takes query, key, value, output and output_grad");
  Expected<Shape> resolved = callShape(shape, *bound.query, *bound.key);
  if (!resolved)
    return fail(resolved.error());
  const Shape &s = *resolved;
  const std::vector<int64_t> qDims{s.batch, s.queryHeads, s.querySeq, s.headDim},
      kDims{s.batch, s.kvHeads, s.keySeq, s.headDim},
      vDims{s.batch, s.kvHeads, s.keySeq, s.valueDim},
      oDims{s.batch, s.queryHeads, s.querySeq, s.valueDim};
  DType outType = inputDtype;
  for (const KernelArgument &argument : signature.arguments)
    if (argument.role == ArgumentRole::Output)
      outType = argument.dtype;
  std::pair<const TensorView *, std::pair<std::string, const std::vector<int64_t> *>> views[] = {
      {bound.query, {"query", &qDims}},
      {bound.key, {"key", &kDims}},
      {bound.value, {"value", &vDims}},
      {bound.output, {"output", &oDims}},
      {bound.outputGradient, {"output_grad", &oDims}}};
  for (auto [view, what] : views) {
    bool out = view == bound.output || view == bound.outputGradient;
    if (Status st = checkView(*view, what.first, *what.second, {out ? outType : inputDtype}); !st)
      return fail(st.message());
  }
  if (bound.logSumExp)
    if (Status st =
            checkView(*bound.logSumExp, "lse", {s.batch, s.queryHeads, s.querySeq}, {DType::F32});
        !st)
      return fail(st.message());
  // The gradients: dq, dk, dv, then each operand's asked for (its shape, f32).
  const size_t expected = 3 + signature.operandGradients.size();
  if (gradients.size() != expected)
    return fail("expected " + std::to_string(expected) + " gradients (dq, dk, dv and the " +
                std::to_string(signature.operandGradients.size()) + " operand gradients), got " +
                std::to_string(gradients.size()));
  const char *names[3] = {"dq", "dk", "dv"};
  const std::vector<int64_t> *gradDims[3] = {&qDims, &kDims, &vDims};
  for (int g = 0; g < 3; ++g) {
    if (Status st = checkView(gradients[g], names[g], *gradDims[g], {inputDtype}); !st)
      return fail(st.message());
    if (!isDenseRowMajor(gradients[g]))
      return fail(std::string(names[g]) + " must be contiguous (row-major)");
  }
  for (size_t n = 0; n < signature.operandGradients.size(); ++n) {
    unsigned slot = signature.operandGradients[n];
    const TensorView *operand =
        slot < bound.encodingOperands.size() ? bound.encodingOperands[slot] : nullptr;
    if (!operand)
      return fail("encoding operand " + std::to_string(slot) + " is missing");
    const TensorView &grad = gradients[3 + n];
    if (Status st =
            checkView(grad, "operand gradient " + std::to_string(n), operand->shape, {DType::F32});
        !st)
      return fail(st.message());
    if (!isDenseRowMajor(grad))
      return fail("operand gradient " + std::to_string(n) + " must be contiguous (row-major)");
  }
  std::vector<int64_t> queryIds, keyIds;
  if (Status st = callPositionTables(*this, bound, s, queryIds, keyIds); !st)
    return fail(st.message());
  if (Status st = checkDevice(launch.arch); !st)
    return fail(st.message());

  // Dense inputs: the views in place, or packed.
  std::vector<char> stores[5];
  auto dense = [&](int i, const TensorView &view, const std::vector<int64_t> &dims, DType type) {
    size_t bytes = denseBytes(dims, type);
    if (wholeDense(view, -1, 0, view.shape[2]))
      return std::pair<const void *, size_t>{view.data, bytes};
    stores[i] = packRows(view, -1, 0, view.shape[2]);
    return std::pair<const void *, size_t>{stores[i].data(), bytes};
  };
  cuda::BackwardBuffers buffers;
  buffers.query = dense(0, *bound.query, qDims, inputDtype);
  buffers.key = dense(1, *bound.key, kDims, inputDtype);
  buffers.value = dense(2, *bound.value, vDims, inputDtype);
  buffers.output = dense(3, *bound.output, oDims, outType);
  buffers.outputGrad = dense(4, *bound.outputGradient, oDims, outType);
  std::vector<float> lse;
  if (bound.logSumExp) {
    std::vector<char> packed = packRows(lseAsRows(*bound.logSumExp), -1, 0, s.querySeq);
    lse.resize(packed.size() / 4);
    std::memcpy(lse.data(), packed.data(), packed.size());
    buffers.lse = {lse.data(), lse.size() * 4};
  }
  buffers.queryPositions = &queryIds;
  buffers.keyPositions = &keyIds;
  for (const TensorView *operand : bound.encodingOperands)
    buffers.encodingOperands.push_back({operand->data, denseBytes(operand->shape, operand->dtype)});
  std::pair<void *, size_t> *grads[3] = {&buffers.queryGrad, &buffers.keyGrad, &buffers.valueGrad};
  for (int g = 0; g < 3; ++g)
    *grads[g] = {gradients[g].data, denseBytes(*gradDims[g], inputDtype)};
  for (size_t n = 3; n < gradients.size(); ++n)
    buffers.operandGrads.push_back(
        {static_cast<float *>(gradients[n].data), denseBytes(gradients[n].shape, DType::F32)});
  if (cuda::Status st =
          cuda::runAttentionBackward(cubin().empty() ? ptx() : cubin(), *this, s, buffers);
      !st)
    return fail(st.error());
  return Status();
}

} // namespace pejit
