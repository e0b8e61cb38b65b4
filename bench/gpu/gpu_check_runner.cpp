// bench/gpu_check.sh run, on the GPU machine (no LLVM, no compiler): loads
// each case of the bundle, checks its numerics against the float64
// reference (fresh random inputs, output poisoned with NaN first, bf16/f16
// tolerance 1e-2 of the reference's max |value|), then times the `timed`
// cases with CUDA events. The source cases (GpuSourceCases.h) bring their
// inputs and reference in the bundle; the runner binds them by the kernel
// signature of NAME.meta, and so do the backward cases (GpuBackwardCases.h),
// whose dq, dk and dv are each checked against their float64 gradient.
// Prints one line per case and a Markdown table.
//   gpu_check_runner BUNDLE_DIR [REPEATS=20]
#include "bench/gpu/GpuBackwardCases.h"
#include "bench/gpu/GpuCheckCases.h"
#include "bench/gpu/GpuSourceCases.h"
#include "pejit/core/KernelMeta.h"
#include "pejit/reference/Attention.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/runtime/cuda/AttentionLaunch.h"
#include "pejit/runtime/cuda/BackwardLaunch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <vector>

using namespace pejit;
using gpucheck::GpuCase;

namespace {

/// float -> bf16 / f16 bits, round to nearest even (inputs are finite).
uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}
uint16_t toF16(float x) { // |x| < 65504, normal or zero here
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffff;
  if (exponent <= 0)
    return static_cast<uint16_t>(sign); // flush tiny values (inputs are in [-1, 1])
  uint32_t half = (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}
float fromF16(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  if (exponent == 0)
    return sign ? -0.0f : 0.0f;
  uint32_t bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

struct Loaded {
  cuda::AttentionKernelImage image;
  std::string error;
};

Loaded loadCase(const std::string &dir, const GpuCase &c) {
  Loaded loaded;
  std::string meta = readFile(dir + "/" + c.name + ".meta");
  if (meta.empty()) {
    loaded.error = "no " + c.name + ".meta in the bundle";
    return loaded;
  }
  // The runtime's own reader of the launch description (KernelMeta.h).
  NvidiaLaunch launch;
  KernelDescription description;
  if (Status status = readNvidiaMeta(meta, launch, description); !status) {
    loaded.error = c.name + ".meta: " + status.message();
    return loaded;
  }
  std::string image = readFile(dir + "/" + c.name + ".cubin");
  if (image.empty())
    image = readFile(dir + "/" + c.name + ".ptx");
  if (image.empty())
    loaded.error = "no cubin or PTX for " + c.name;
  loaded.image = cuda::kernelImage(launch, description, description.shape, std::move(image));
  return loaded;
}

struct Outcome {
  bool ok = false;
  double relError = 0, medianMs = 0;
  std::string error;
};

Outcome runCase(const std::string &dir, const GpuCase &c, int repeats) {
  Outcome outcome;
  Loaded loaded = loadCase(dir, c);
  if (!loaded.error.empty()) {
    outcome.error = loaded.error;
    return outcome;
  }
  // Seeded from the clock: std::random_device pulls arc4random (glibc 2.36),
  // which the GPU machine may not have.
  std::mt19937 engine(
      static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto make = [&](int64_t heads, int64_t seq, std::vector<uint16_t> &bits, ref::Tensor &exact) {
    exact = ref::Tensor({c.batch, heads, seq, c.headDim});
    bits.resize(exact.data.size());
    for (size_t i = 0; i < bits.size(); ++i) {
      float x = dist(engine);
      bits[i] = c.bf16 ? toBf16(x) : toF16(x);
      exact.data[i] = c.bf16 ? fromBf16(bits[i]) : fromF16(bits[i]); // what the GPU sees
    }
  };
  std::vector<uint16_t> q, k, v;
  ref::Tensor qr, kr, vr;
  make(c.queryHeads, c.querySeq, q, qr);
  make(c.kvHeads, c.keySeq, k, kr);
  make(c.kvHeads, c.keySeq, v, vr);
  std::vector<int64_t> qPos = queryPositions(c), kPos = keyPositions(c);
  std::vector<float> out(static_cast<size_t>(c.batch * c.queryHeads * c.querySeq * c.headDim),
                         std::numeric_limits<float>::quiet_NaN());
  cuda::AttentionBuffers buffers;
  buffers.query = q.data();
  buffers.key = k.data();
  buffers.value = v.data();
  buffers.queryBytes = q.size() * 2;
  buffers.keyBytes = k.size() * 2;
  buffers.valueBytes = v.size() * 2;
  buffers.queryPositions = &qPos;
  buffers.keyPositions = &kPos;
  buffers.output = out.data();
  buffers.outputBytes = out.size() * 4;
  std::vector<float> times;
  if (cuda::Status st = cuda::runAttention(loaded.image, buffers, c.timed ? repeats : 0, &times);
      !st) {
    outcome.error = st.error();
    return outcome;
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    outcome.medianMs = times[times.size() / 2];
  }
  // Float64 reference on the same (rounded) inputs.
  ref::Tensor expected = caseReference(c, qr, kr, vr);
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < expected.data.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    double err = std::fabs(out[i] - expected.data[i]);
    maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  outcome.relError = maxErr / std::max(maxRef, 1e-300);
  outcome.ok = outcome.relError <= 1e-2;
  return outcome;
}

std::vector<uint8_t> readBytes(const std::string &path) {
  std::string text = readFile(path);
  return std::vector<uint8_t>(text.begin(), text.end());
}

/// A bundled kernel: its launch and description (NAME.meta), its image
/// (NAME.cubin, else NAME.ptx) and the call's shape (a shape class's at the
/// lengths of NAME.call). Returns "" or the error.
std::string loadBundledKernel(const std::string &dir, const std::string &name, NvidiaLaunch &launch,
                              KernelDescription &description, std::string &image, Shape &shape) {
  auto file = [&](const std::string &part) { return gpucheck::sourceCaseFile(dir, name, part); };
  std::string meta = readFile(file("meta"));
  if (Status status = readNvidiaMeta(meta, launch, description); meta.empty() || !status)
    return meta.empty() ? "no " + name + ".meta in the bundle"
                        : name + ".meta: " + status.message();
  image = readFile(file("cubin"));
  if (image.empty())
    image = readFile(file("ptx"));
  std::vector<int64_t> call;
  std::istringstream lengths(readFile(file("call")));
  for (int64_t value; lengths >> value;)
    call.push_back(value);
  shape = gpucheck::shapeAtCall(description.shape, call);
  if (shape.hasDynamicDims())
    return name + ": a kernel with `?` lengths and no " + name + ".call";
  return "";
}

/// A bundled i64 table (the kernel's position ids).
std::vector<int64_t> readIds(const std::string &path) {
  std::vector<uint8_t> bytes = readBytes(path);
  std::vector<int64_t> ids(bytes.size() / 8);
  std::memcpy(ids.data(), bytes.data(), ids.size() * 8);
  return ids;
}

/// max |got(i) - expected[i]| / max |expected[i]|; a NaN counts as infinite.
double relativeError(const std::function<double(size_t)> &got, const std::vector<float> &expected) {
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(static_cast<double>(expected[i])));
    double err = std::fabs(got(i) - expected[i]);
    maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  return maxErr / std::max(maxRef, 1e-300);
}

/// A source case: its inputs and float64 reference from the bundle, bound
/// by the signature in NAME.meta; the output poisoned with NaN first.
Outcome runSourceCase(const std::string &dir, const gpucheck::GpuSourceCase &c) {
  Outcome outcome;
  auto file = [&](const std::string &part) { return gpucheck::sourceCaseFile(dir, c.name, part); };
  NvidiaLaunch launch;
  KernelDescription description;
  std::string image;
  Shape s;
  if (std::string error = loadBundledKernel(dir, c.name, launch, description, image, s);
      !error.empty()) {
    outcome.error = error;
    return outcome;
  }
  // Each input file must hold exactly its argument's bytes.
  std::vector<std::vector<uint8_t>> operands;
  std::vector<uint8_t> query, key, value;
  int operand = 0;
  std::vector<int64_t> tokens; // a standalone embedding's, i64
  std::vector<uint8_t> state;  // linear attention's carried state
  for (KernelArgument arg : description.signature.arguments) {
    if (arg.role == ArgumentRole::EmbedTokens) {
      std::vector<uint8_t> bytes = readBytes(file("tokens"));
      tokens.resize(bytes.size() / 8);
      std::memcpy(tokens.data(), bytes.data(), tokens.size() * 8);
      continue;
    }
    if (arg.dtype == DType::I32 || arg.dtype == DType::I64)
      continue; // positions come as the kernel's tables below
    arg.shape = gpucheck::argumentDimsAt(arg, s);
    std::string part = gpucheck::sourceCasePart(arg.role, operand);
    std::vector<uint8_t> bytes = readBytes(file(part));
    if (bytes.size() != denseBytes(arg.shape, arg.dtype)) {
      outcome.error = c.name + "." + part + " holds " + std::to_string(bytes.size()) +
                      " bytes, its argument " + arg.label() + " needs " +
                      std::to_string(denseBytes(arg.shape, arg.dtype));
      return outcome;
    }
    // A standalone kernel's rows go where Q's do, an embedding's token
    // table where K's (cuda::AttentionBuffers).
    if (arg.role == ArgumentRole::Query || arg.role == ArgumentRole::TransformInput)
      query = std::move(bytes);
    else if (arg.role == ArgumentRole::Key || arg.role == ArgumentRole::EmbedTable)
      key = std::move(bytes);
    else if (arg.role == ArgumentRole::Value)
      value = std::move(bytes);
    else if (arg.role == ArgumentRole::LinearState)
      state = std::move(bytes);
    else // in the slot(s) the kernel reads it from
      for (unsigned slot : arg.slots) {
        if (operands.size() <= slot)
          operands.resize(slot + 1);
        operands[slot] = bytes;
      }
  }
  std::vector<int64_t> qPos = readIds(file("query_positions")),
                       kPos = readIds(file("key_positions"));
  std::vector<uint8_t> expectedBytes = readBytes(file("expected"));
  size_t n = static_cast<size_t>(s.batch * s.queryHeads * s.querySeq * s.valueDim);
  if (expectedBytes.size() != n * 4) {
    outcome.error = c.name + ".expected holds " + std::to_string(expectedBytes.size()) +
                    " bytes, the output has " + std::to_string(n) + " f32 values";
    return outcome;
  }
  std::vector<float> expected(n);
  std::memcpy(expected.data(), expectedBytes.data(), n * 4);
  // NaN in the output's dtype: a value the kernel fails to write shows.
  DType outType = description.outputDtype;
  std::vector<uint8_t> out(n * dtypeBytes(outType));
  for (size_t i = 0; i < n; ++i) {
    if (outType == DType::F32) {
      float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(&out[i * 4], &nan, 4);
    } else {
      uint16_t nan = outType == DType::BF16 ? 0x7fc0 : 0x7e00;
      std::memcpy(&out[i * 2], &nan, 2);
    }
  }
  cuda::AttentionBuffers buffers;
  if (!tokens.empty()) {
    query.resize(tokens.size() * 8);
    std::memcpy(query.data(), tokens.data(), query.size());
  }
  buffers.query = query.data();
  buffers.key = key.data();
  buffers.value = value.data();
  buffers.queryBytes = query.size();
  buffers.keyBytes = key.size();
  buffers.valueBytes = value.size();
  buffers.queryPositions = &qPos;
  buffers.keyPositions = &kPos;
  buffers.output = out.data();
  buffers.outputBytes = out.size();
  for (const std::vector<uint8_t> &bytes : operands)
    buffers.encodingOperands.push_back({bytes.data(), bytes.size()});
  if (!state.empty()) {
    buffers.state = state.data();
    buffers.stateBytes = state.size();
  }
  cuda::AttentionKernelImage kernel = cuda::kernelImage(launch, description, s, std::move(image));
  if (cuda::Status st = cuda::runAttention(kernel, buffers); !st) {
    outcome.error = st.error();
    return outcome;
  }
  outcome.relError = relativeError(
      [&](size_t i) -> double {
        if (outType == DType::F32) {
          float got;
          std::memcpy(&got, &out[i * 4], 4);
          return got;
        }
        uint16_t bits;
        std::memcpy(&bits, &out[i * 2], 2);
        return outType == DType::BF16 ? fromBf16(bits) : fromF16(bits);
      },
      expected);
  outcome.ok = outcome.relError <= 1e-2;
  return outcome;
}

/// A 16-bit value's float.
float fromBits(uint16_t bits, DType type) {
  return type == DType::BF16 ? fromBf16(bits) : fromF16(bits);
}

/// A backward case (GpuBackwardCases.h): q, k, v, the encoding operands, O
/// and dO from the bundle, bound by NAME.meta's signature; dq, dk, dv and
/// the operands' gradients poisoned with NaN first, each compared with its
/// float64 gradient (the worst is reported).
Outcome runBackwardCase(const std::string &dir, const gpucheck::GpuBackwardCase &c) {
  Outcome outcome;
  auto file = [&](const std::string &part) { return gpucheck::sourceCaseFile(dir, c.name, part); };
  NvidiaLaunch launch;
  KernelDescription description;
  std::string image;
  Shape s;
  if (std::string error = loadBundledKernel(dir, c.name, launch, description, image, s);
      !error.empty()) {
    outcome.error = error;
    return outcome;
  }
  std::map<ArgumentRole, std::vector<uint8_t>> tensors;
  std::vector<std::vector<uint8_t>> operands;
  DType inType = DType::F16;
  int operand = 0;
  for (KernelArgument arg : description.signature.arguments) {
    if (arg.dtype == DType::I32 || arg.dtype == DType::I64)
      continue;
    arg.shape = gpucheck::argumentDimsAt(arg, s);
    std::string part = gpucheck::sourceCasePart(arg.role, operand);
    std::vector<uint8_t> bytes = readBytes(file(part));
    if (bytes.size() != denseBytes(arg.shape, arg.dtype)) {
      outcome.error = c.name + "." + part + " holds " + std::to_string(bytes.size()) +
                      " bytes, its argument " + arg.label() + " needs " +
                      std::to_string(denseBytes(arg.shape, arg.dtype));
      return outcome;
    }
    if (arg.role == ArgumentRole::Query)
      inType = arg.dtype;
    if (arg.role == ArgumentRole::EncodingOperand) {
      for (unsigned slot : arg.slots) {
        if (operands.size() <= slot)
          operands.resize(slot + 1);
        operands[slot] = bytes;
      }
    } else {
      tensors[arg.role] = std::move(bytes);
    }
  }
  std::vector<int64_t> qPos = readIds(file("query_positions")),
                       kPos = readIds(file("key_positions"));
  // dq, dk, dv in the inputs' 16-bit type, NaN first.
  size_t counts[3] = {static_cast<size_t>(s.batch * s.queryHeads * s.querySeq * s.headDim),
                      static_cast<size_t>(s.batch * s.kvHeads * s.keySeq * s.headDim),
                      static_cast<size_t>(s.batch * s.kvHeads * s.keySeq * s.valueDim)};
  const char *parts[3] = {"expected_dq", "expected_dk", "expected_dv"};
  std::vector<uint16_t> grads[3];
  for (int g = 0; g < 3; ++g)
    grads[g].assign(counts[g], inType == DType::BF16 ? 0x7fc0 : 0x7e00);
  cuda::BackwardBuffers buffers;
  auto in = [&](ArgumentRole role) {
    std::vector<uint8_t> &bytes = tensors[role];
    return std::pair<const void *, size_t>{bytes.data(), bytes.size()};
  };
  buffers.query = in(ArgumentRole::Query);
  buffers.key = in(ArgumentRole::Key);
  buffers.value = in(ArgumentRole::Value);
  buffers.output = in(ArgumentRole::Output);
  buffers.outputGrad = in(ArgumentRole::OutputGradient);
  buffers.lse = {nullptr, 0};
  buffers.queryPositions = &qPos;
  buffers.keyPositions = &kPos;
  for (const std::vector<uint8_t> &bytes : operands)
    buffers.encodingOperands.push_back({bytes.data(), bytes.size()});
  buffers.queryGrad = {grads[0].data(), counts[0] * 2};
  buffers.keyGrad = {grads[1].data(), counts[1] * 2};
  buffers.valueGrad = {grads[2].data(), counts[2] * 2};
  // The operands' gradients (f32, NaN first), in operand_grads order.
  cuda::BackwardPlan plan = cuda::planBackward(description, s);
  std::vector<std::string> operandParts;
  for (unsigned slot : description.signature.operandGradients)
    for (const KernelArgument &arg : description.signature.arguments)
      if (arg.role == ArgumentRole::EncodingOperand &&
          std::find(arg.slots.begin(), arg.slots.end(), slot) != arg.slots.end())
        operandParts.push_back("expected_d" + arg.name);
  std::vector<std::vector<float>> operandGrads;
  for (int64_t n : plan.operandGradFloats)
    operandGrads.emplace_back(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
  for (std::vector<float> &grad : operandGrads)
    buffers.operandGrads.push_back({grad.data(), grad.size() * 4});
  if (cuda::Status st = cuda::runAttentionBackward(image, description, s, buffers); !st) {
    outcome.error = st.error();
    return outcome;
  }
  for (int g = 0; g < 3; ++g) {
    std::vector<uint8_t> bytes = readBytes(file(parts[g]));
    if (bytes.size() != counts[g] * 4) {
      outcome.error = c.name + "." + parts[g] + " holds " + std::to_string(bytes.size()) +
                      " bytes, the gradient has " + std::to_string(counts[g]) + " f32 values";
      return outcome;
    }
    std::vector<float> expected(counts[g]);
    std::memcpy(expected.data(), bytes.data(), bytes.size());
    double rel = relativeError([&](size_t i) { return fromBits(grads[g][i], inType); }, expected);
    outcome.relError = std::max(outcome.relError, rel);
  }
  for (size_t g = 0; g < operandGrads.size() && g < operandParts.size(); ++g) {
    std::vector<uint8_t> bytes = readBytes(file(operandParts[g]));
    if (bytes.size() != operandGrads[g].size() * 4) {
      outcome.error = c.name + "." + operandParts[g] + " holds " + std::to_string(bytes.size()) +
                      " bytes, the gradient has " + std::to_string(operandGrads[g].size()) +
                      " f32 values";
      return outcome;
    }
    std::vector<float> expected(operandGrads[g].size());
    std::memcpy(expected.data(), bytes.data(), bytes.size());
    double rel = relativeError([&](size_t i) { return operandGrads[g][i]; }, expected);
    outcome.relError = std::max(outcome.relError, rel);
  }
  if (operandParts.size() != operandGrads.size())
    outcome.error = c.name + ": the signature names " + std::to_string(operandParts.size()) +
                    " operand gradients, the plan " + std::to_string(operandGrads.size());
  outcome.ok = outcome.relError <= gpucheck::kBackwardTolerance;
  return outcome;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gpu_check_runner BUNDLE_DIR [REPEATS=20]\n");
    return 2;
  }
  std::string dir = argv[1];
  int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  std::string why;
  const cuda::Driver *driver = cuda::Driver::get(&why);
  if (!driver) {
    std::fprintf(stderr, "gpu_check_runner: %s\n", why.c_str());
    return 3;
  }
  std::printf("device: %s (%s)\n", driver->device().name.c_str(), driver->device().arch().c_str());
  int failed = 0;
  std::string table = "| case | pejit ms | TFLOPS |\n| --- | ---: | ---: |\n";
  for (const GpuCase &c : gpucheck::gpuCases()) {
    Outcome r = runCase(dir, c, repeats);
    if (!r.error.empty()) {
      std::printf("FAIL %-34s %s\n", c.name.c_str(), r.error.c_str());
      std::fflush(stdout);
      ++failed;
      continue;
    }
    std::printf("%s %-34s max rel. error %.2e (tolerance 1e-2)", r.ok ? "ok  " : "FAIL",
                c.name.c_str(), r.relError);
    failed += !r.ok;
    if (c.timed) {
      double flops =
          4.0 * c.batch * c.queryHeads * c.querySeq * c.keySeq * c.headDim * (c.causal ? 0.5 : 1.0);
      double tflops = flops / (r.medianMs * 1e-3) / 1e12;
      std::printf("  %.3f ms  %.1f TFLOPS", r.medianMs, tflops);
      char row[200];
      std::snprintf(row, sizeof(row), "| %s | %.3f | %.1f |\n", c.name.c_str(), r.medianMs, tflops);
      table += row;
    }
    std::printf("\n");
    std::fflush(stdout); // a later case that hangs must not take these lines with it
  }
  for (const gpucheck::GpuSourceCase &c : gpucheck::gpuSourceCases()) {
    Outcome r = runSourceCase(dir, c);
    if (!r.error.empty())
      std::printf("FAIL %-34s %s\n", c.name.c_str(), r.error.c_str());
    else
      std::printf("%s %-34s max rel. error %.2e (tolerance 1e-2)\n", r.ok ? "ok  " : "FAIL",
                  c.name.c_str(), r.relError);
    std::fflush(stdout);
    failed += !r.error.empty() || !r.ok;
  }
  for (const gpucheck::GpuBackwardCase &c : gpucheck::gpuBackwardCases()) {
    Outcome r = runBackwardCase(dir, c);
    if (!r.error.empty())
      std::printf("FAIL %-34s %s\n", c.name.c_str(), r.error.c_str());
    else
      std::printf("%s %-34s max rel. error of dq, dk, dv %.2e (tolerance %.0e)\n",
                  r.ok ? "ok  " : "FAIL", c.name.c_str(), r.relError, gpucheck::kBackwardTolerance);
    std::fflush(stdout);
    failed += !r.error.empty() || !r.ok;
  }
  std::printf("\n%s\n%d of %zu cases failed\n", table.c_str(), failed,
              gpucheck::gpuCases().size() + gpucheck::gpuSourceCases().size() +
                  gpucheck::gpuBackwardCases().size());
  return failed ? 1 : 0;
}
