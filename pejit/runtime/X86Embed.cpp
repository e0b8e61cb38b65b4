// X86KernelImpl::runEmbedding: a token embedding's call (pe.embed and the
// pe ops on its result, docs/standalone-kernels.md). It checks the views,
// builds the i64 token and id tables (a token outside the table, or an id
// outside a learned table, is an error naming it), runs the prologue (the
// per-position tables) and the items: b ceil(s / R), R = tile_m rows each.
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

namespace pejit {

Status X86KernelImpl::runEmbedding(const std::vector<TensorView> &inputs,
                                   const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  if (!bound.embedTokens || !bound.embedTable)
    return Status::error("a token embedding takes its tokens and its table");
  const TensorView &tokens = *bound.embedTokens;
  if (tokens.shape.size() != 2)
    return Status::error(bound.embedTokensName + ": expected [b, s] token ids, got rank " +
                         std::to_string(tokens.shape.size()));
  // The call's b and s are the tokens'; a static kernel dim must match.
  int64_t batch = tokens.shape[0], seq = tokens.shape[1];
  std::vector<int64_t> dims{shape.batch == kDynamicDim ? batch : shape.batch,
                            shape.querySeq == kDynamicDim ? seq : shape.querySeq};
  if (Status st = checkView(tokens, bound.embedTokensName, dims, {DType::I64, DType::I32}); !st)
    return st;
  if (Status st = checkView(out, "output", {batch, seq, shape.headDim}, {outputDtype}); !st)
    return st;
  if (Status st = checkWrites(signature, inputs, out, false); !st)
    return st;
  int64_t vocab = bound.embedTable->shape[0];
  std::vector<int64_t> tokenIds;
  if (Status st = buildPositionTable(&tokens, bound.embedTokensName, batch, seq, batch, 0, tokenIds,
                                     1, vocab, "token");
      !st)
    return st;
  bool onCaller = batch * seq * shape.headDim <= kInlineStandaloneElements;
  ScratchBuffer scratch;
  MemRefDescriptor<float, 1> tables;
  if (Status st = fillStandaloneTables(bound, batch, seq, onCaller, scratch, tables); !st)
    return st;
  MemRefDescriptor<int64_t, 2> tokenTable = {
      tokenIds.data(), tokenIds.data(), 0, {batch, seq}, {seq, 1}};
  const std::vector<int64_t> table = operandSlotWords(bound.embedTable);
  TensorView output = withOneHead(out);
  MemRefDescriptor<float, 4> o = describe4(output);
  int64_t items = batch * ((seq + queryTile - 1) / queryTile);
  auto item = [&](int64_t index) {
    MemRefDescriptor<int64_t, 2> tc = tokenTable;
    std::vector<int64_t> ec = table;
    MemRefDescriptor<float, 4> oc = o;
    MemRefDescriptor<float, 1> sd = tables;
    embedItem_(&tc, ec.data(), &oc, &sd, index);
  };
  runItems(items, onCaller, item);
  returnScratch(std::move(scratch));
  return Status();
}

} // namespace pejit
