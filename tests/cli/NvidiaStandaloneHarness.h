// Helpers of the NVIDIA standalone-kernel tests (NvidiaStandaloneTest.cpp):
// random calls, and a fake launcher that evaluates the source in float64
// on exactly the dense buffers a launch is given.
#ifndef PEJIT_TESTS_CLI_NVIDIASTANDALONEHARNESS_H
#define PEJIT_TESTS_CLI_NVIDIASTANDALONEHARNESS_H

#include "pejit/compiler/backends/nvidia/NvidiaLowering.h"
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/NvidiaKernelImpl.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/cuda/CudaDriver.h"
#include "pejit/runtime/npy/Npy.h"
#include "tests/cli/CliTestSupport.h"

#include <cstring>
#include <deque>
#include <functional>

namespace pejit::nvidiatest {

using pejit::clitest::rng;

#define PEJIT_REQUIRE_LIBDEVICE()                                                                  \
  if (findCudaToolkit().empty())                                                                   \
  GTEST_SKIP() << "no CUDA toolkit with nvvm/libdevice here (CUDA_HOME, /usr/local/cuda): "        \
                  "the GPU lowering links libdevice"

inline bool hasGpu() {
  std::string why;
  return cuda::Driver::get(&why) != nullptr;
}

inline npy::DType npyOf(DType dtype) {
  return dtype == DType::F16    ? npy::DType::F16
         : dtype == DType::BF16 ? npy::DType::BF16
                                : npy::DType::F32;
}

inline int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Dense bytes of `dtype` as float64 values.
inline ref::Tensor fromDense(const void *data, DType dtype, const std::vector<int64_t> &shape) {
  npy::Array array{npyOf(dtype), shape, {}};
  array.bytes.resize(product(shape) * dtypeBytes(dtype));
  std::memcpy(array.bytes.data(), data, array.bytes.size());
  std::vector<float> values = npy::toFloat32(array);
  ref::Tensor t(shape);
  t.data.assign(values.begin(), values.end());
  return t;
}

/// A float tensor: its bytes in `dtype` (what the kernel reads) and the
/// same values exactly (what the reference reads).
struct Floats {
  npy::Array bytes;
  ref::Tensor exact;
  DType dtype;
};

inline Floats randomFloats(const std::vector<int64_t> &shape, DType dtype) {
  ref::Tensor t = clitest::randomTensor(shape);
  npy::Array bytes =
      npy::fromFloat32(std::vector<float>(t.data.begin(), t.data.end()), shape, npyOf(dtype));
  return {bytes, fromDense(bytes.bytes.data(), dtype, shape), dtype};
}

/// One call: the kernel's inputs and the interpreter's, and its output
/// (poisoned: NaN in every element, 0xffff in 16-bit).
struct Call {
  std::deque<Floats> floats;
  std::deque<std::vector<int64_t>> ints;
  std::vector<TensorView> inputs;
  std::vector<ReferenceArgument> reference;
  npy::Array out;
  DType outDtype = DType::F32;

  void addFloats(const std::vector<int64_t> &shape, DType dtype) {
    Floats &f = floats.emplace_back(randomFloats(shape, dtype));
    inputs.push_back({f.bytes.bytes.data(), dtype, shape, {}});
    reference.push_back(f.exact);
  }
  /// Ids drawn from [low, high].
  void addInts(const std::vector<int64_t> &shape, int64_t low, int64_t high) {
    std::uniform_int_distribution<int64_t> pick(low, high);
    std::vector<int64_t> &values = ints.emplace_back(product(shape));
    for (int64_t &v : values)
      v = pick(rng());
    inputs.push_back({values.data(), DType::I64, shape, {}});
    reference.push_back(ref::PositionIds(shape, values));
  }
  void setOutput(const std::vector<int64_t> &shape, DType dtype) {
    outDtype = dtype;
    out = {npyOf(dtype), shape, std::vector<uint8_t>(product(shape) * dtypeBytes(dtype), 0xff)};
  }
  TensorView outView() { return {out.bytes.data(), outDtype, out.shape, {}}; }
  std::vector<float> output() const { return npy::toFloat32(out); }
};

/// max |got - expected| / max |expected| (a NaN counts as infinite).
inline double relativeError(const std::vector<float> &got, const ref::Tensor &expected) {
  std::vector<double> values(got.begin(), got.end());
  return clitest::relativeError(values, expected);
}

/// The interpreter's arguments rebuilt from a launch's dense buffers.
using Rebuild = std::function<std::vector<ReferenceArgument>(const cuda::AttentionKernelImage &,
                                                             const cuda::AttentionBuffers &)>;

/// The fake launch: `source` in float64 on the rebuilt arguments, written
/// to the output buffer in `outDtype`; each launch's image is kept.
struct FakeLaunches {
  std::vector<cuda::AttentionKernelImage> seen;
  FakeLaunches(const std::string &source, DType outDtype, Rebuild rebuild) {
    setNvidiaPartLauncherForTesting(
        [this, source, outDtype, rebuild](const cuda::AttentionKernelImage &image,
                                          const cuda::AttentionBuffers &buffers) -> cuda::Status {
          cuda::AttentionKernelImage kept = image;
          kept.image.clear();
          seen.push_back(kept);
          Expected<ref::Tensor> out = interpretReference(source, rebuild(image, buffers));
          if (!out)
            return cuda::Error{out.error()};
          if (static_cast<size_t>(out->data.size() * dtypeBytes(outDtype)) != buffers.outputBytes)
            return cuda::Error{"the output buffer does not match the call's rows"};
          npy::Array bytes = npy::fromFloat32(
              std::vector<float>(out->data.begin(), out->data.end()), out->shape, npyOf(outDtype));
          std::memcpy(buffers.output, bytes.bytes.data(), buffers.outputBytes);
          return cuda::Status();
        });
  }
  ~FakeLaunches() { setNvidiaPartLauncherForTesting(nullptr); }
};

/// A launch's ids, as the source's ids argument of `shape` (its last dim
/// the call's length).
inline ref::PositionIds launchIds(const cuda::AttentionBuffers &buffers, std::vector<int64_t> shape,
                                  int64_t seq) {
  shape.back() = seq;
  return ref::PositionIds(shape, *buffers.queryPositions);
}

/// The ptxas report line of `entry` (its stack frame and spills).
inline std::string ptxasProperties(const std::string &log, const std::string &entry) {
  size_t at = log.find("Function properties for " + entry);
  if (at == std::string::npos)
    return "";
  size_t begin = log.find('\n', at) + 1;
  return log.substr(begin, log.find('\n', begin) - begin);
}

} // namespace pejit::nvidiatest

#endif // PEJIT_TESTS_CLI_NVIDIASTANDALONEHARNESS_H
