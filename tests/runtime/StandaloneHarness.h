// Runs a standalone kernel (docs/standalone-kernels.md) on fresh random
// inputs against the float64 interpreter on the same source: shared by the
// standalone RoPE and embedding tests.
#ifndef PEJIT_TESTS_RUNTIME_STANDALONEHARNESS_H
#define PEJIT_TESTS_RUNTIME_STANDALONEHARNESS_H

#include "pejit/runtime/npy/Npy.h"
#include "tests/runtime/SuiteRuntime.h"

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace pejit::testing {

/// "f32", "f16" or "bf16": a float dtype as the IR spells it.
inline std::string elementName(DType dtype) {
  return dtype == DType::F16 ? "f16" : dtype == DType::BF16 ? "bf16" : "f32";
}

/// "tensor<2x?x16xf32>": a tensor type of `shape` (a negative size is `?`)
/// and element type `t`.
inline std::string tensorText(const std::vector<int64_t> &shape, const std::string &t) {
  std::string text = "tensor<";
  for (int64_t d : shape)
    text += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return text + t + ">";
}

inline npy::DType npyDtype(DType dtype) {
  return dtype == DType::F16    ? npy::DType::F16
         : dtype == DType::BF16 ? npy::DType::BF16
                                : npy::DType::F32;
}

/// A fresh random tensor in `dtype`, and the same values (rounded to dtype)
/// as float64 for the reference.
inline std::pair<npy::Array, ref::Tensor> randomInput(const std::vector<int64_t> &shape,
                                                      DType dtype) {
  ref::Tensor x = randomTensor(shape, rng(nullptr));
  npy::Array bytes = npy::fromFloat32(toFloat(x), shape, npyDtype(dtype));
  std::vector<float> rounded = npy::toFloat32(bytes); // what the kernel reads
  x.data.assign(rounded.begin(), rounded.end());
  return {std::move(bytes), std::move(x)};
}

/// A one-op source: x [B, H, S, D] (`x`, e.g. "?x4x?x64xf32") rotated by
/// `<rope>` at ids of type `ids` ("?xi64"); with `scale` ("1xf32"), the
/// runtime position scale as a third argument.
inline std::string ropeSource(const std::string &rope, const std::string &x, const std::string &ids,
                              const std::string &scale = "") {
  std::string xt = "tensor<" + x + ">", it = "tensor<" + ids + ">", st = "tensor<" + scale + ">";
  std::string args = "%x: " + xt + ", %pos: " + it + (scale.empty() ? "" : ", %s: " + st);
  std::string operand = scale.empty() ? "" : " scale(%s : " + st + ")";
  return "func.func @rotate(" + args + ") -> " + xt + " {\n  %r = pe.rope %x, %pos" + operand +
         " <" + rope + "> : " + xt + ", " + it + "\n  return %r : " + xt + "\n}\n";
}

/// A RoPE of every scaling and layout, its head dim and the largest
/// position to draw (the forward's and the backward's standalone tests).
struct RopeCase {
  std::string name, rope;
  int64_t headDim = 128;
  int64_t maxPosition = 5000;
};

inline std::vector<RopeCase> ropeScalingCases() {
  return {
      {"plain", "layout = half, theta = 500000.0"},
      {"interleaved", "layout = interleaved, theta = 10000.0", 64},
      {"partial", "layout = half, theta = 10000.0, rotary_dim = 32", 64},
      {"linear", "layout = half, theta = 10000.0, scaling = #pe.linear<factor = 4.0>"},
      {"ntk", "layout = half, theta = 10000.0, scaling = #pe.ntk<factor = 4.0>"},
      {"yarn",
       "layout = half, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position "
       "= 2048>"},
      {"llama3",
       "layout = half, theta = 500000.0, scaling = #pe.llama3<factor = 8.0, low_freq_factor = "
       "1.0, high_freq_factor = 4.0, original_max_position = 8192>",
       128, 100000},
      // The length picks the frequencies: max(position) + 1 over the call,
      // which crosses 2048 at some lengths of the tests' loops and not others.
      {"dynamic_ntk",
       "layout = half, theta = 10000.0, scaling = #pe.dynamic_ntk<factor = 2.0, "
       "original_max_position = 2048>",
       64, 4000},
      {"longrope",
       "layout = half, theta = 10000.0, rotary_dim = 8, scaling = #pe.longrope<short_factor = "
       "[1.0, 1.5, 2.0, 2.5], long_factor = [2.0, 3.0, 4.0, 5.0], original_max_position = 2048>",
       64, 4000},
  };
}

/// `source` compiled on the suite's runtime (an error says why not).
inline Expected<X86Kernel> suiteKernel(const std::string &source) {
  Expected<Spec> spec = Spec::fromText(source);
  if (!spec)
    return Expected<X86Kernel>::error(spec.error());
  return suiteRuntime().getX86(*spec);
}

/// An output of `shape` in `dtype`, poisoned: NaN in f32, 0xffff (a NaN)
/// in f16 and bf16.
inline npy::Array poisonedOutput(const std::vector<int64_t> &shape, DType dtype) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  npy::Array out{npyDtype(dtype), shape, std::vector<uint8_t>(count * dtypeBytes(dtype), 0xff)};
  if (dtype == DType::F32)
    for (int64_t e = 0; e < count; ++e)
      reinterpret_cast<float *>(out.bytes.data())[e] = std::numeric_limits<float>::quiet_NaN();
  return out;
}

/// max |got - expected| / max |expected| (a NaN counts as infinite error).
inline double maxRelativeError(const std::vector<float> &got, const ref::Tensor &expected) {
  double maxRef = 0, maxErr = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    maxRef = std::max(maxRef, std::fabs(expected.data[e]));
    double err = std::fabs(got[e] - expected.data[e]);
    maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  return maxRef > 0 ? maxErr / maxRef : maxErr;
}

/// Runs `kernel` (compiled from `source`) on x of `shape` in `dtype` and
/// ids of `idsShape` (drawn from [0, maxPosition)), and returns max |out -
/// ref| / max |ref|; `inPlace` writes the output over x. With a
/// `tableShape`, a random table of it (in dtype) is the third input.
inline double runAndCompare(const X86Kernel &kernel, const std::string &source,
                            std::vector<int64_t> shape, std::vector<int64_t> idsShape, DType dtype,
                            int64_t maxPosition, bool inPlace, std::string &error,
                            const std::vector<int64_t> &tableShape = {}) {
  std::mt19937 &engine = rng(nullptr);
  auto [bytes, x] = randomInput(shape, dtype);
  std::vector<float> rounded = npy::toFloat32(bytes);
  int64_t count = 1;
  for (int64_t extent : idsShape)
    count *= extent;
  std::uniform_int_distribution<int64_t> position(0, maxPosition - 1);
  std::vector<int64_t> ids(count);
  for (int64_t &p : ids)
    p = position(engine);
  std::vector<ReferenceArgument> referenceInputs = {x, ref::PositionIds(idsShape, ids)};
  std::vector<TensorView> inputs = {{bytes.bytes.data(), dtype, shape, {}},
                                    {ids.data(), DType::I64, idsShape, {}}};
  std::optional<std::pair<npy::Array, ref::Tensor>> table;
  if (!tableShape.empty()) {
    table = randomInput(tableShape, dtype);
    referenceInputs.push_back(table->second);
    inputs.push_back({table->first.bytes.data(), dtype, tableShape, {}});
  }
  Expected<ref::Tensor> expected = interpretReference(source, referenceInputs);
  if (!expected) {
    error = expected.error();
    return 0;
  }
  npy::Array out = poisonedOutput(shape, dtype);
  void *outData = inPlace ? bytes.bytes.data() : out.bytes.data();
  Status status = kernel.run(inputs, {outData, dtype, shape, {}});
  if (!status) {
    error = status.message();
    return 0;
  }
  return maxRelativeError(npy::toFloat32(inPlace ? bytes : out), *expected);
}

} // namespace pejit::testing

#endif // PEJIT_TESTS_RUNTIME_STANDALONEHARNESS_H
