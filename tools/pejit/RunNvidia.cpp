// pejit run --target=nvidia[:sm_XX]: the same .npy inputs, run on an NVIDIA
// GPU through the CUDA driver. Tensors stay in their 16-bit dtype (f16 .npy,
// or bf16 stored as uint16); the output is written as float32. --check
// compares with the float64 interpreter at the bf16/f16 tolerance, 1e-2.
#include "tools/pejit/RunNvidia.h"
#include "tools/pejit/Commands.h"
#include "tools/pejit/TensorIO.h"

#include "pejit/runtime/npy/Npy.h"

#include <cstdio>
#include <limits>

namespace pejit::cli {

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "pejit: %s\n", message.c_str());
  return kExitError;
}

/// A 16-bit float .npy's raw bytes for the GPU, and its values for --check.
struct DeviceInput {
  npy::Array array;
  std::vector<int64_t> ids;
  bool isInteger = false;
};

} // namespace

int runNvidia(const NvidiaRunRequest &request, const NvidiaLauncher &launch) {
  const FunctionSignature &sig = request.signature;
  Runtime runtime;
  Expected<NvidiaKernel> kernel = runtime.getNvidia(request.spec, request.arch);
  if (!kernel)
    return fail(kernel.error());
  std::vector<DeviceInput> inputs(request.inputs.size());
  std::vector<TensorView> views;
  std::vector<ReferenceArgument> reference;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const std::string &path = request.inputs[i];
    npy::Expected<npy::Array> array = npy::readNpy(path);
    if (!array)
      return fail(array.error);
    const ArgumentInfo &arg = sig.arguments[i];
    // A `?` dim (a length the call gives) takes any extent.
    if (std::string error = checkArgumentShape(path, array->shape, sig, i); !error.empty())
      return fail(error);
    DeviceInput &input = inputs[i];
    input.isInteger = arg.isInteger;
    if (arg.isInteger) {
      input.ids = npy::toInt64(*array);
      views.push_back({input.ids.data(), DType::I64, array->shape, {}});
      reference.push_back(ref::PositionIds(array->shape, input.ids));
      continue;
    }
    // Q, K and V in the kernel's dtype; an encoding operand (a T5 or Shaw
    // table) in its own, as the IR types it.
    DType type = arg.elementType == "f16"    ? DType::F16
                 : arg.elementType == "bf16" ? DType::BF16
                                             : DType::F32;
    npy::DType wanted = npyDtype(type);
    if (array->dtype != wanted)
      return fail(path + ": dtype " + npy::dtypeName(array->dtype) + " does not match " + arg.role +
                  ": the nvidia kernel takes " + npy::dtypeName(wanted) +
                  (type == DType::BF16 ? " (bf16 stored as uint16)" : ""));
    input.array = std::move(*array);
    views.push_back({input.array.bytes.data(), type, input.array.shape, {}});
    std::vector<float> values = npy::toFloat32(input.array);
    reference.push_back(
        ref::Tensor(input.array.shape, std::vector<double>(values.begin(), values.end())));
  }
  // The call's shape: a `?` length is the one the inputs give.
  Expected<Shape> callShape = kernel->callShape(views);
  if (!callShape)
    return fail(request.file + ": " + callShape.error());
  const Shape &s = *callShape;
  std::vector<int64_t> outShape = {s.batch, s.queryHeads, s.querySeq, s.valueDim};
  // The GPU writes the output dtype the IR declares; --output is float32.
  std::vector<float> out(s.batch * s.queryHeads * s.querySeq * s.valueDim,
                         std::numeric_limits<float>::quiet_NaN());
  // A 16-bit output is poisoned with 0xffff (NaN) too.
  DType outType = kernel->outputDtype();
  bool narrowOut = outType != DType::F32;
  std::vector<uint8_t> out16(narrowOut ? out.size() * 2 : 0, 0xff);
  TensorView outView{
      narrowOut ? static_cast<void *>(out16.data()) : out.data(), outType, outShape, {}};
  Status status = launch ? launch(*kernel, views, outView) : kernel->run(views, outView);
  if (!status)
    return fail(request.file + ": " + status.message());
  if (narrowOut)
    out = npy::toFloat32(npy::Array{npyDtype(outType), outShape, out16});
  std::fprintf(stderr, "pejit: ran on the GPU (%s)\n", kernel->arch().c_str());
  if (request.output)
    if (std::string error =
            npy::writeNpy(*request.output, npy::fromFloat32(out, outShape, npy::DType::F32));
        !error.empty())
      return fail(error);
  if (request.check) {
    Expected<ref::Tensor> expected =
        interpretReference(request.spec.source(), reference, request.file);
    if (!expected)
      return fail("--check: " + expected.error());
    if (expected->data.size() != out.size())
      return fail("--check: the reference result " + ref::shapeToString(expected->shape) +
                  " does not match the kernel's output");
    double error = relativeError(out, *expected);
    if (request.maxRelativeError)
      *request.maxRelativeError = error;
    std::printf("max relative error: %.3g (tolerance 1e-2, f16/bf16 inputs)\n", error);
    if (!(error <= 1e-2))
      return fail("--check failed: max relative error " + std::to_string(error));
  }
  return kExitOk;
}

} // namespace pejit::cli
