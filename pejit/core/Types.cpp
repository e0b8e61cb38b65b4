#include "pejit/core/Types.h"

namespace pejit {

const std::string &Status::message() const {
  static const std::string empty;
  return message_ ? *message_ : empty;
}

size_t dtypeBytes(DType dtype) {
  return dtype == DType::F32 || dtype == DType::I32 ? 4 : dtype == DType::I64 ? 8 : 2;
}

size_t denseBytes(const std::vector<int64_t> &shape, DType dtype) {
  size_t bytes = dtypeBytes(dtype);
  for (int64_t d : shape)
    bytes *= static_cast<size_t>(d);
  return bytes;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float32";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I32:
    return "int32";
  case DType::I64:
    return "int64";
  }
  return "unknown";
}

std::optional<DType> floatDtypeNamed(const std::string &name) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

bool Shape::operator==(const Shape &o) const {
  return batch == o.batch && queryHeads == o.queryHeads && kvHeads == o.kvHeads &&
         querySeq == o.querySeq && keySeq == o.keySeq && headDim == o.headDim &&
         valueDim == o.valueDim;
}

bool Shape::hasDynamicDims() const {
  for (int64_t dim : {batch, queryHeads, kvHeads, querySeq, keySeq, headDim, valueDim})
    if (dim == kDynamicDim)
      return true;
  return false;
}

std::string dimText(int64_t dim) {
  return dim == kDynamicDim ? std::string("?") : std::to_string(dim);
}

std::string Shape::str() const {
  return "b=" + dimText(batch) + " hq=" + dimText(queryHeads) + " hkv=" + dimText(kvHeads) +
         " sq=" + dimText(querySeq) + " skv=" + dimText(keySeq) + " d=" + dimText(headDim) +
         " dv=" + dimText(valueDim);
}

} // namespace pejit
