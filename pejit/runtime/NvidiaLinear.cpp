// NvidiaKernelImpl::runLinear: a linear attention call on the GPU
// (docs/linear-attention.md). Every input is checked first (Q, K, V, the
// output, the carried state [b, hq, d, dv + 2] f32, the ids); then the
// strided views are packed dense, one launch runs, and the output and the
// updated state are written back into the caller's views.
#include "pejit/runtime/NvidiaParts.h"
#include "pejit/runtime/Views.h"

namespace pejit {

using namespace nvidia;

Status NvidiaKernelImpl::runLinear(const std::vector<TensorView> &inputs,
                                   const TensorView &out) const {
  auto fail = [](const std::string &what) { return Status::error("nvidia run: " + what); };
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return fail(st.message());
  const TensorView *views[3] = {bound.query, bound.key, bound.value};
  const char *names[3] = {"input 0 (query)", "input 1 (key)", "input 2 (value)"};
  for (int i = 0; i < 3; ++i)
    if (!views[i] || !views[i]->data)
      return fail(std::string(names[i]) + " is missing or a null buffer");
  Expected<Shape> resolved = callShape(shape, *views[0], *views[1]);
  if (!resolved)
    return fail(resolved.error());
  const Shape &s = *resolved;
  std::vector<int64_t> dims[3] = {{s.batch, s.queryHeads, s.querySeq, s.headDim},
                                  {s.batch, s.kvHeads, s.keySeq, s.headDim},
                                  {s.batch, s.kvHeads, s.keySeq, s.valueDim}};
  for (int i = 0; i < 3; ++i)
    if (Status st = checkView(*views[i], names[i], dims[i], {inputDtype}); !st)
      return fail(st.message());
  std::vector<int64_t> oShape{s.batch, s.queryHeads, s.querySeq, s.valueDim};
  if (Status st = checkView(out, "output", oShape, {outputDtype}); !st)
    return fail(st.message());
  std::vector<int64_t> stateShape{s.batch, s.queryHeads, s.headDim, s.valueDim + 2};
  if (bound.linearState)
    if (Status st = checkView(*bound.linearState, bound.linearStateName, stateShape, {DType::F32});
        !st)
      return fail(st.message());
  // The ids: the user's, or the defaults (keys from 0, queries from skv - sq).
  std::vector<int64_t> queryIds, keyIds;
  if (Status st = callPositionTables(*this, bound, s, queryIds, keyIds); !st)
    return fail(st.message());
  if (Status st = checkDevice(launch.arch); !st)
    return fail(st.message());

  // Dense buffers: the views in place, or packed.
  std::vector<char> stores[3], stateStore, oStore;
  cuda::AttentionBuffers buffers;
  const void **data[3] = {&buffers.query, &buffers.key, &buffers.value};
  size_t *bytes[3] = {&buffers.queryBytes, &buffers.keyBytes, &buffers.valueBytes};
  for (int i = 0; i < 3; ++i) {
    *bytes[i] = denseBytes(dims[i], inputDtype);
    if (wholeDense(*views[i], -1, 0, views[i]->shape[2])) {
      *data[i] = views[i]->data;
    } else {
      stores[i] = packRows(*views[i], -1, 0, views[i]->shape[2]);
      *data[i] = stores[i].data();
    }
  }
  buffers.queryPositions = &queryIds;
  buffers.keyPositions = &keyIds;
  for (const TensorView *operand : bound.encodingOperands)
    buffers.encodingOperands.push_back({operand->data, denseBytes(operand->shape, operand->dtype)});
  bool stateInPlace = false;
  if (bound.linearState) {
    const TensorView &state = *bound.linearState;
    stateInPlace = wholeDense(state, -1, 0, s.headDim);
    if (!stateInPlace)
      stateStore = packRows(state, -1, 0, s.headDim);
    buffers.state = stateInPlace ? state.data : stateStore.data();
    buffers.stateBytes = denseBytes(stateShape, DType::F32);
  }
  bool outInPlace = wholeDense(out, -1, 0, s.querySeq);
  buffers.outputBytes = denseBytes(oShape, outputDtype);
  if (!outInPlace)
    oStore.resize(buffers.outputBytes);
  buffers.output = outInPlace ? out.data : oStore.data();
  cuda::AttentionKernelImage image =
      cuda::kernelImage(launch, *this, s, cubin().empty() ? ptx() : cubin());
  if (cuda::Status st = launchPart(image, buffers); !st)
    return fail(st.error());
  if (!outInPlace)
    unpackRows(oStore, out, -1, 0, s.querySeq);
  if (bound.linearState && !stateInPlace)
    unpackRows(stateStore, *bound.linearState, -1, 0, s.headDim);
  return Status();
}

} // namespace pejit
