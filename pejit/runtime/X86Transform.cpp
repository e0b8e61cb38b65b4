// X86KernelImpl::runTransform: a standalone QK transform's call
// (docs/standalone-kernels.md). It checks the views, builds the i64 id
// table, runs the prologue (the cos/sin tables) and the items
// (b h ceil(s / R) of them, R = the kernel's tile_m rows each). A small
// call (a decode step's KV-append: one row per head) runs on the calling
// thread: two pool round trips would cost more than its work.
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

#include <algorithm>

namespace pejit {

Status X86KernelImpl::runTransform(const std::vector<TensorView> &inputs,
                                   const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  if (!bound.query || !bound.queryPositions)
    return Status::error("a standalone transform takes its input and its position ids");
  // An embedding kernel (its input [b, s, d]) runs as one head.
  bool embedding = signature.embeddingTransform();
  const TensorView *userInput = bound.query;
  TensorView input = embedding ? withOneHead(*userInput) : *userInput;
  TensorView output = embedding ? withOneHead(out) : out;
  bound.query = &input;
  Expected<Shape> resolved = callShape(shape, input, input);
  if (!resolved)
    return Status::error(resolved.error());
  const Shape &s = *resolved;
  // Checked as the user's views: [b, s, d] for an embedding.
  std::vector<int64_t> dims{s.batch, s.queryHeads, s.querySeq, s.headDim};
  if (embedding)
    dims = {s.batch, s.querySeq, s.headDim};
  if (Status st = checkView(*userInput, "input 0 (transform_input)", dims, {inputDtype}); !st)
    return st;
  if (Status st = checkView(out, "output", dims, {outputDtype}); !st)
    return st;
  if (Status st = checkWrites(signature, inputs, out, true); !st) // in place allowed
    return st;
  bool onCaller = s.batch * s.queryHeads * s.querySeq * s.headDim <= kInlineStandaloneElements;
  ScratchBuffer scratch;
  MemRefDescriptor<float, 1> tables;
  if (Status st = fillStandaloneTables(bound, s.batch, s.querySeq, onCaller, scratch, tables); !st)
    return st;
  MemRefDescriptor<float, 4> x = describe4(*bound.query), o = describe4(output);
  int64_t items = s.batch * s.queryHeads * ((s.querySeq + queryTile - 1) / queryTile);
  auto item = [&](int64_t index) {
    MemRefDescriptor<float, 4> xc = x, oc = o;
    MemRefDescriptor<float, 1> sd = tables;
    transformItem_(&xc, &oc, &sd, index);
  };
  runItems(items, onCaller, item);
  returnScratch(std::move(scratch));
  return Status();
}

Status X86KernelImpl::fillStandaloneTables(const BoundInputs &bound, int64_t batch, int64_t seq,
                                           bool onCaller, ScratchBuffer &scratch,
                                           MemRefDescriptor<float, 1> &tables,
                                           std::vector<int64_t> *idsOut) const {
  // i64 ids [axes * rows, s], checked (an error names the index, and an id
  // outside a learned table's rows).
  int64_t rows = queryPositionRows, axes = positionAxes;
  std::vector<int64_t> local;
  std::vector<int64_t> &ids = idsOut ? *idsOut : local;
  if (tableFloatsPerQueryPosition > 0)
    if (Status st = buildPositionTable(bound.queryPositions, bound.queryPositionsName, rows, seq,
                                       batch, 0, ids, axes, positionLimit);
        !st)
      return st;
  if (Status st = checkPositionScale(signature, bound, {&ids}); !st)
    return st;
  int64_t tableFloats = tableFloatsPerQueryPosition * rows * seq;
  scratch = takeScratch(tableFloats);
  if (!scratch.data)
    return Status::error("out of memory: the kernel's scratch of " + std::to_string(tableFloats) +
                         " floats could not be allocated");
  tables = {scratch.data.get(), scratch.data.get(), 0, {std::max<int64_t>(tableFloats, 1)}, {1}};
  if (tableFloats == 0)
    return Status();
  MemRefDescriptor<int64_t, 2> positions = {
      ids.data(), ids.data(), 0, {axes * rows, seq}, {seq, 1}};
  // The key side has no ids: its tables are empty.
  MemRefDescriptor<int64_t, 2> none = {ids.data(), ids.data(), 0, {axes * rows, 0}, {0, 1}};
  // The pe ops' own table (a learned embedding's), or an unused slot.
  const std::vector<int64_t> table =
      operandSlotWords(bound.encodingOperands.empty() ? nullptr : bound.encodingOperands[0]);
  int64_t threads = onCaller ? 1 : pool_->threads();
  auto prologue = [&](int64_t part) {
    MemRefDescriptor<int64_t, 2> qp = positions, kp = none;
    MemRefDescriptor<float, 1> sd = tables;
    std::vector<int64_t> e0 = table;
    transformPrologue_(&qp, &kp, &sd, part, threads, e0.data());
  };
  if (onCaller)
    prologue(0);
  else
    pool_->parallelFor(threads, prologue);
  return Status();
}

} // namespace pejit
