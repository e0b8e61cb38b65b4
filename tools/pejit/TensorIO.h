// .npy files <-> the buffers a kernel and the reference interpreter take,
// checked against the function's argument types with messages that name the
// file, the argument and the problem.
#ifndef PEJIT_TOOLS_PEJIT_TENSORIO_H
#define PEJIT_TOOLS_PEJIT_TENSORIO_H

#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/npy/Npy.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pejit::cli {

/// One input as the kernel takes it: float32 data or int64 position ids.
struct HostTensor {
  bool isInteger = false;
  std::vector<int64_t> shape;
  std::vector<float> floats;
  std::vector<int64_t> ids;

  TensorView view();
  ReferenceArgument referenceArgument() const;
};

/// "argument 1 (key) of @attn".
std::string argumentName(const FunctionSignature &signature, size_t index);

/// "  0 (query): tensor<1x4x64x64xf32>" lines for every argument, with a
/// note on which may be omitted.
std::string listArguments(const FunctionSignature &signature);

/// "" when `shape` fits argument `index` of the signature (a `?` dim takes
/// any extent), else an error naming the file, the argument and the shape
/// it needs.
std::string checkArgumentShape(const std::string &path, const std::vector<int64_t> &shape,
                               const FunctionSignature &signature, size_t index);

/// Reads `path` for argument `index`. Returns "" or a message naming the file
/// and the problem; `note` is set when the data was converted (f16/bf16).
std::string loadArgument(const std::string &path, const FunctionSignature &signature, size_t index,
                         HostTensor &out, std::string &note);

/// max |out - ref| / max |ref| over the reference's elements (out has as
/// many); a NaN in `out` counts as infinite error.
double relativeError(const std::vector<float> &out, const ref::Tensor &expected);

/// The .npy dtype of a kernel's float dtype (f32, f16, bf16).
npy::DType npyDtype(DType dtype);

/// Writes float32 data of `shape` to `path`; "" or the message.
std::string writeFloat32(const std::string &path, const std::vector<float> &data,
                         const std::vector<int64_t> &shape);

} // namespace pejit::cli

#endif // PEJIT_TOOLS_PEJIT_TENSORIO_H
