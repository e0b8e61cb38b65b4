#include "tools/pejit/TensorIO.h"

#include "pejit/runtime/npy/Npy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pejit::cli {

TensorView HostTensor::view() {
  if (isInteger)
    return {ids.data(), DType::I64, shape, {}};
  return {floats.data(), DType::F32, shape, {}};
}

ReferenceArgument HostTensor::referenceArgument() const {
  if (isInteger)
    return ref::PositionIds(shape, ids);
  return ref::Tensor(shape, std::vector<double>(floats.begin(), floats.end()));
}

std::string argumentName(const FunctionSignature &signature, size_t index) {
  return "argument " + std::to_string(index) + " (" + signature.arguments[index].role + ") of @" +
         signature.name;
}

std::string listArguments(const FunctionSignature &signature) {
  std::string text;
  for (size_t i = 0; i < signature.arguments.size(); ++i) {
    const ArgumentInfo &arg = signature.arguments[i];
    text += "  " + std::to_string(i) + " (" + arg.role + "): " + arg.type;
    if (i >= signature.requiredArguments)
      text += "  [optional: default position ids]";
    text += "\n";
  }
  return text;
}

std::string checkArgumentShape(const std::string &path, const std::vector<int64_t> &shape,
                               const FunctionSignature &signature, size_t index) {
  const ArgumentInfo &arg = signature.arguments[index];
  bool fits = shape.size() == arg.shape.size();
  for (size_t d = 0; fits && d < arg.shape.size(); ++d)
    fits = arg.shape[d] == -1 || arg.shape[d] == shape[d];
  if (fits)
    return "";
  std::string expected = "(";
  for (size_t d = 0; d < arg.shape.size(); ++d)
    expected += (d ? ", " : "") + dimText(arg.shape[d]);
  expected += arg.shape.size() == 1 ? ",)" : ")";
  return path + ": shape " + npy::shapeToString(shape) + " does not match " +
         argumentName(signature, index) + ": expected " + expected;
}

std::string loadArgument(const std::string &path, const FunctionSignature &signature, size_t index,
                         HostTensor &out, std::string &note) {
  npy::Expected<npy::Array> array = npy::readNpy(path);
  if (!array)
    return array.error;
  const ArgumentInfo &arg = signature.arguments[index];
  std::string dtype = npy::dtypeName(array->dtype);
  bool isFloat = array->dtype == npy::DType::F32 || array->dtype == npy::DType::F16 ||
                 array->dtype == npy::DType::BF16;
  if (arg.isInteger && isFloat)
    return path + ": dtype " + dtype + " does not match " + argumentName(signature, index) +
           ": expected int32 or int64 position ids (" + arg.type + ")";
  if (!arg.isInteger && !isFloat)
    return path + ": dtype " + dtype + " does not match " + argumentName(signature, index) +
           ": expected float32 (" + arg.type + ")";
  // -1 (`?` in the source): any size; the kernel checks the `?` lengths.
  if (std::string error = checkArgumentShape(path, array->shape, signature, index); !error.empty())
    return error;
  out.isInteger = arg.isInteger;
  out.shape = array->shape;
  if (arg.isInteger) {
    out.ids = npy::toInt64(*array);
    return "";
  }
  out.floats = npy::toFloat32(*array);
  // The IR's element type says what the kernel reads (f32, f16 or bf16).
  std::string wanted = arg.elementType == "f16"    ? "float16"
                       : arg.elementType == "bf16" ? "bfloat16"
                                                   : "float32";
  if (dtype != wanted)
    note = "note: " + path + " is " + dtype + "; the x86 kernel takes " + wanted + " (" + arg.type +
           "), values converted";
  return "";
}

double relativeError(const std::vector<float> &out, const ref::Tensor &expected) {
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < expected.data.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    double err = std::fabs(static_cast<double>(out[i]) - expected.data[i]);
    maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  return maxErr / std::max(maxRef, 1e-30);
}

npy::DType npyDtype(DType dtype) {
  return dtype == DType::BF16  ? npy::DType::BF16
         : dtype == DType::F16 ? npy::DType::F16
                               : npy::DType::F32;
}

std::string writeFloat32(const std::string &path, const std::vector<float> &data,
                         const std::vector<int64_t> &shape) {
  return npy::writeNpy(path, npy::fromFloat32(data, shape, npy::DType::F32));
}

} // namespace pejit::cli
