// NvidiaKernelImpl::runStandalone: a standalone kernel's call on the GPU
// (pe.rope and the embeddings on their own, docs/standalone-kernels.md):
// every input checked first, the rows packed dense when strided, one
// launch, the output written into the caller's view.
#include "pejit/runtime/NvidiaParts.h"
#include "pejit/runtime/Views.h"

namespace pejit {

using namespace nvidia;

Status NvidiaKernelImpl::runStandalone(const std::vector<TensorView> &inputs,
                                       const TensorView &out) const {
  auto fail = [](const std::string &what) { return Status::error("nvidia run: " + what); };
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return fail(st.message());
  bool embedding = launch.kernel == "pejit_embed";
  int64_t batch = 0, seq = 0, heads = shape.queryHeads, dim = shape.headDim;
  // An embedding's rows are [b, s, d]: the kernel's [b, 1, s, d].
  std::vector<int64_t> tokenIds;
  std::vector<char> packedInput; // a strided x, packed dense
  TensorView output = embedding ? withOneHead(out) : out;
  cuda::AttentionBuffers buffers;
  if (embedding) {
    if (!bound.embedTokens || !bound.embedTable)
      return fail("a token embedding takes its tokens and its table");
    const TensorView &tokens = *bound.embedTokens;
    if (tokens.shape.size() != 2)
      return fail(bound.embedTokensName + ": expected [b, s] token ids, got rank " +
                  std::to_string(tokens.shape.size()));
    batch = tokens.shape[0];
    seq = tokens.shape[1];
    std::vector<int64_t> dims{shape.batch == kDynamicDim ? batch : shape.batch,
                              shape.querySeq == kDynamicDim ? seq : shape.querySeq};
    if (Status st = checkView(tokens, bound.embedTokensName, dims, {DType::I64, DType::I32}); !st)
      return fail(st.message());
    if (Status st = buildPositionTable(&tokens, bound.embedTokensName, batch, seq, batch, 0,
                                       tokenIds, 1, bound.embedTable->shape[0], "token");
        !st)
      return fail(st.message());
    if (Status st = checkView(out, "output", {batch, seq, dim}, {outputDtype}); !st)
      return fail(st.message());
    buffers.query = tokenIds.data();
    buffers.queryBytes = tokenIds.size() * sizeof(int64_t);
    buffers.key = bound.embedTable->data;
    buffers.keyBytes = denseBytes(bound.embedTable->shape, bound.embedTable->dtype);
  } else {
    if (!bound.query || !bound.query->data)
      return fail("input 0 (transform_input) is missing or a null buffer");
    Expected<Shape> resolved = callShape(shape, *bound.query, *bound.query);
    if (!resolved)
      return fail(resolved.error());
    batch = resolved->batch;
    seq = resolved->querySeq;
    std::vector<int64_t> dims{batch, heads, seq, dim};
    if (Status st = checkView(*bound.query, "input 0 (transform_input)", dims, {inputDtype}); !st)
      return fail(st.message());
    if (Status st = checkView(out, "output", dims, {outputDtype}); !st)
      return fail(st.message());
    if (wholeDense(*bound.query, -1, 0, seq)) {
      buffers.query = bound.query->data;
    } else {
      packedInput = packRows(*bound.query, -1, 0, seq);
      buffers.query = packedInput.data();
    }
    buffers.queryBytes = denseBytes(dims, inputDtype);
  }
  // The ids (an id outside a learned table is an error naming it); the key
  // side has none.
  std::vector<int64_t> ids, noIds;
  if (tableFloatsPerQueryPosition > 0)
    if (Status st =
            buildPositionTable(bound.queryPositions, bound.queryPositionsName, queryPositionRows,
                               seq, batch, 0, ids, positionAxes, positionLimit);
        !st)
      return fail(st.message());
  buffers.queryPositions = &ids;
  buffers.keyPositions = &noIds;
  for (const TensorView *operand : bound.encodingOperands)
    buffers.encodingOperands.push_back({operand->data, denseBytes(operand->shape, operand->dtype)});
  if (Status st = checkDevice(launch.arch); !st)
    return fail(st.message());
  bool outInPlace = wholeDense(output, -1, 0, seq);
  std::vector<char> oStore;
  buffers.outputBytes = denseBytes({batch, heads, seq, dim}, outputDtype);
  if (!outInPlace)
    oStore.resize(buffers.outputBytes);
  buffers.output = outInPlace ? output.data : oStore.data();
  Shape call{batch, heads, heads, seq, seq, dim, dim};
  cuda::AttentionKernelImage image =
      cuda::kernelImage(launch, *this, call, cubin().empty() ? ptx() : cubin());
  if (cuda::Status st = launchPart(image, buffers); !st)
    return fail(st.error());
  if (!outInPlace)
    unpackRows(oStore, output, -1, 0, seq);
  return Status();
}

} // namespace pejit
