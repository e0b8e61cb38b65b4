// Builder helpers (Encodings.h).
#include "pejit/runtime/Encodings.h"

#include <string>

namespace pejit::encodings {

EncodingSpec alibi(int64_t numHeads, int64_t headOffset, bool symmetric) {
  EncodingSpec spec;
  spec.attribute = "#pe.alibi<num_heads = " + std::to_string(numHeads) +
                   ", head_offset = " + std::to_string(headOffset) +
                   ", form = " + (symmetric ? "symmetric" : "causal") + ">";
  return spec;
}

EncodingSpec relativeToPosition(EncodingSpec spec) {
  // Every attribute here ends in '>': the parameter goes last.
  spec.attribute.insert(spec.attribute.size() - 1, ", relative_to = position");
  spec.readsPositions = true;
  return spec;
}

EncodingSpec alibiLearnedSlopes(int64_t numHeads, int64_t headOffset, bool symmetric,
                                int64_t queryHeads) {
  EncodingSpec spec;
  spec.attribute = "#pe.alibi<num_heads = " + std::to_string(numHeads) +
                   ", head_offset = " + std::to_string(headOffset) +
                   ", form = " + (symmetric ? "symmetric" : "causal") + ", learned_slopes = true>";
  spec.operandShapes = {{queryHeads}};
  spec.operandDtype = DType::F32;
  return spec;
}

EncodingSpec t5Bias(int64_t numBuckets, int64_t maxDistance, bool bidirectional, int64_t queryHeads,
                    DType tableDtype) {
  EncodingSpec spec;
  spec.attribute = "#pe.t5_bias<num_buckets = " + std::to_string(numBuckets) +
                   ", max_distance = " + std::to_string(maxDistance) +
                   ", bidirectional = " + (bidirectional ? "true" : "false") + ">";
  spec.operandShapes = {{numBuckets, queryHeads}};
  spec.operandDtype = tableDtype;
  return spec;
}

namespace {
/// A Shaw term (`mnemonic`) reading one [(hq,) 2 clip + 1, width] table.
EncodingSpec shawTerm(const char *mnemonic, int64_t clip, int64_t width, DType tableDtype,
                      int64_t queryHeads) {
  EncodingSpec spec;
  spec.attribute = std::string("#pe.") + mnemonic + "<clip = " + std::to_string(clip) + ">";
  spec.operandShapes = {queryHeads > 0 ? std::vector<int64_t>{queryHeads, 2 * clip + 1, width}
                                       : std::vector<int64_t>{2 * clip + 1, width}};
  spec.operandDtype = tableDtype;
  return spec;
}
} // namespace

EncodingSpec shawKey(int64_t clip, int64_t headDim, DType tableDtype, int64_t queryHeads) {
  return shawTerm("relative_key", clip, headDim, tableDtype, queryHeads);
}

EncodingSpec shawValue(int64_t clip, int64_t valueDim, DType tableDtype, int64_t queryHeads) {
  return shawTerm("relative_value", clip, valueDim, tableDtype, queryHeads);
}

EncodingSpec biasTensor(std::vector<int64_t> shape, DType dtype) {
  EncodingSpec spec;
  spec.attribute = "#pe.bias_tensor";
  spec.operandShapes = {std::move(shape)};
  spec.operandDtype = dtype;
  return spec;
}

} // namespace pejit::encodings
