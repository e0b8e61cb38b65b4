// Builder helpers (Encodings.h).
#include "runtime/Encodings.h"

#include <string>

namespace pejit::encodings {

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

EncodingSpec shawKey(int64_t clip, int64_t headDim, DType tableDtype) {
  EncodingSpec spec;
  spec.attribute = "#pe.relative_key<clip = " + std::to_string(clip) + ">";
  spec.operandShapes = {{2 * clip + 1, headDim}};
  spec.operandDtype = tableDtype;
  return spec;
}

EncodingSpec biasTensor(std::vector<int64_t> shape, DType dtype) {
  EncodingSpec spec;
  spec.attribute = "#pe.bias_tensor";
  spec.operandShapes = {std::move(shape)};
  spec.operandDtype = dtype;
  return spec;
}

} // namespace pejit::encodings
