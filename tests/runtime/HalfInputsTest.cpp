// x86 kernels on f16 and bf16 inputs (f32 tiles and accumulation; the
// fused encodings' tables in the same dtype), with an f32 or a 16-bit output, against the float64
// reference interpreted from the same IR on the same 16-bit values. Fresh random inputs every run;
// the output is poisoned with NaN first. Tolerance: max |out - ref| / max |ref|
// <= 1e-2 (a bf16 output alone rounds by up to 2^-9 relative).
#include "bench/gpu/GpuSourceCases.h"
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/npy/Npy.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

using namespace pejit;

namespace {

/// @T@: the input element type, @OT@: the output element type.
std::vector<std::pair<std::string, std::string>> variants() {
  return {
      {"rope_gqa_causal",
       "func.func @f(%q: tensor<1x4x100x64x@T@>, %k: tensor<1x2x100x64x@T@>, "
       "%v: tensor<1x2x100x64x@T@>, %pos: tensor<100xi32>) -> tensor<1x4x100x64x@OT@> {\n"
       "  %qr = pe.rope %q, %pos <layout = half, theta = 500000.0> : tensor<1x4x100x64x@T@>, "
       "tensor<100xi32>\n"
       "  %kr = pe.rope %k, %pos <layout = half, theta = 500000.0> : tensor<1x2x100x64x@T@>, "
       "tensor<100xi32>\n"
       "  %o = attn.attention %qr, %kr, %v causal : tensor<1x4x100x64x@T@>, "
       "tensor<1x2x100x64x@T@>, tensor<1x2x100x64x@T@> -> tensor<1x4x100x64x@OT@>\n"
       "  return %o : tensor<1x4x100x64x@OT@>\n}\n"},
      {"alibi_12_heads_noncausal",
       "func.func @f(%q: tensor<1x12x63x64x@T@>, %k: tensor<1x12x130x64x@T@>, "
       "%v: tensor<1x12x130x64x@T@>) -> tensor<1x12x63x64x@OT@> {\n"
       "  %b = pe.alibi <num_heads = 12, form = symmetric> : tensor<1x12x63x130xf32>\n"
       "  %o = attn.attention %q, %k, %v bias(%b : tensor<1x12x63x130xf32>) : "
       "tensor<1x12x63x64x@T@>, tensor<1x12x130x64x@T@>, tensor<1x12x130x64x@T@> -> "
       "tensor<1x12x63x64x@OT@>\n"
       "  return %o : tensor<1x12x63x64x@OT@>\n}\n"},
      {"decode_interleaved_rope",
       "func.func @f(%q: tensor<2x8x1x128x@T@>, %k: tensor<2x2x257x128x@T@>, "
       "%v: tensor<2x2x257x128x@T@>, %qpos: tensor<1xi64>, %kpos: tensor<257xi64>) -> "
       "tensor<2x8x1x128x@OT@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%qpos : tensor<1xi64>) "
       "key_positions(%kpos : tensor<257xi64>) causal encodings([#pe.rope<layout = "
       "interleaved, theta = 10000.0>]) : tensor<2x8x1x128x@T@>, tensor<2x2x257x128x@T@>, "
       "tensor<2x2x257x128x@T@> -> tensor<2x8x1x128x@OT@>\n"
       "  return %o : tensor<2x8x1x128x@OT@>\n}\n"},
      // Fused T5, Shaw a^K and a^V with 16-bit tables, sq < skv, GQA.
      {"t5_shaw_16bit_tables",
       "func.func @f(%q: tensor<1x4x65x64x@T@>, %k: tensor<1x2x100x64x@T@>, "
       "%v: tensor<1x2x100x64x@T@>, %t: tensor<32x4x@T@>, %ak: tensor<9x64x@T@>, "
       "%av: tensor<9x64x@T@>) -> tensor<1x4x65x64x@OT@> {\n"
       "  %o = attn.attention %q, %k, %v scale(0.125) encodings([#pe.t5_bias<num_buckets = 32, "
       "max_distance = 128>, #pe.relative_key<clip = 4>, #pe.relative_value<clip = 4>]) "
       "encoding_operands(%t, %ak, %av : tensor<32x4x@T@>, tensor<9x64x@T@>, tensor<9x64x@T@>) "
       ": tensor<1x4x65x64x@T@>, tensor<1x2x100x64x@T@>, tensor<1x2x100x64x@T@> -> "
       "tensor<1x4x65x64x@OT@>\n"
       "  return %o : tensor<1x4x65x64x@OT@>\n}\n"},
      // 2-D axial RoPE with a 16-bit bias tensor read by the kernel.
      {"axial_rope_bias_tensor",
       "func.func @f(%q: tensor<1x4x64x64x@T@>, %k: tensor<1x4x64x64x@T@>, "
       "%v: tensor<1x4x64x64x@T@>, %b: tensor<1x4x64x64x@T@>, %p: tensor<2x64xi64>) -> "
       "tensor<1x4x64x64x@OT@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x64xi64>) "
       "key_positions(%p : tensor<2x64xi64>) encodings([#pe.rope<layout = interleaved, theta = "
       "100.0, axial = true>, #pe.bias_tensor]) encoding_operands(%b : tensor<1x4x64x64x@T@>) : "
       "tensor<1x4x64x64x@T@>, tensor<1x4x64x64x@T@>, tensor<1x4x64x64x@T@> -> "
       "tensor<1x4x64x64x@OT@>\n"
       "  return %o : tensor<1x4x64x64x@OT@>\n}\n"},
      // ALiBi and a per-head Shaw value term measured by position ids.
      {"by_position_per_head_shaw",
       "func.func @f(%q: tensor<1x4x64x64x@T@>, %k: tensor<1x4x100x64x@T@>, "
       "%v: tensor<1x4x100x64x@T@>, %av: tensor<4x9x64x@T@>, %qp: tensor<64xi64>, "
       "%kp: tensor<100xi64>) -> tensor<1x4x64x64x@OT@> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<64xi64>) "
       "key_positions(%kp : tensor<100xi64>) causal encodings([#pe.alibi<num_heads = 4, form = "
       "causal, relative_to = position>, #pe.relative_value<clip = 4, relative_to = position>]) "
       "encoding_operands(%av : tensor<4x9x64x@T@>) : tensor<1x4x64x64x@T@>, "
       "tensor<1x4x100x64x@T@>, tensor<1x4x100x64x@T@> -> tensor<1x4x64x64x@OT@>\n"
       "  return %o : tensor<1x4x64x64x@OT@>\n}\n"},
  };
}

std::string withTypes(std::string text, const std::string &in, const std::string &out) {
  for (auto [mark, type] : {std::pair{std::string("@OT@"), out}, {std::string("@T@"), in}})
    for (size_t at; (at = text.find(mark)) != std::string::npos;)
      text.replace(at, mark.size(), type);
  return text;
}

DType dtypeOf(const std::string &type) {
  return type == "f16" ? DType::F16 : type == "bf16" ? DType::BF16 : DType::F32;
}
npy::DType npyOf(const std::string &type) {
  return type == "f16" ? npy::DType::F16 : type == "bf16" ? npy::DType::BF16 : npy::DType::F32;
}

struct Input {
  npy::Array array;         // the bytes the kernel reads
  std::vector<int64_t> ids; // position ids
};

/// Compiles `text` for x86, runs it on fresh random inputs in each
/// argument's own dtype (position ids restart every 50 and differ per row
/// and axis: packed sequences), the output poisoned first, and compares
/// with the float64 reference interpreted on the same rounded values.
void expectMatchesReference(Runtime &runtime, const std::string &text, std::mt19937 &engine,
                            DType in, DType out, const std::vector<int64_t> &call = {}) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Expected<FunctionSignature> sig = describeFunction(text);
  ASSERT_TRUE(sig) << sig.error();
  Expected<Spec> spec = Spec::fromText(text);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = runtime.getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->dtype(), in);
  EXPECT_EQ(kernel->outputDtype(), out);

  // A `?`-length source runs at the call's {b, sq, skv}.
  Shape shape = gpucheck::shapeAtCall(kernel->shape(), call);
  int64_t sq = shape.querySeq, skv = shape.keySeq;
  std::vector<Input> inputs(sig->arguments.size());
  std::vector<TensorView> views;
  std::vector<ReferenceArgument> reference;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ArgumentInfo arg = sig->arguments[i];
    bool querySide = arg.role == "query" || arg.role == "query_positions";
    for (size_t d = 0; d < arg.shape.size(); ++d)
      if (arg.shape[d] == kDynamicDim)
        arg.shape[d] = (arg.isInteger ? d + 1 == arg.shape.size() : d == 2) ? (querySide ? sq : skv)
                                                                            : shape.batch;
    int64_t count = 1;
    for (int64_t extent : arg.shape)
      count *= extent;
    if (arg.isInteger) { // keys from 0, queries from skv - sq
      int64_t first = arg.role == "query_positions" ? skv - sq : 0, seq = arg.shape.back();
      for (int64_t e = 0; e < count; ++e)
        inputs[i].ids.push_back((first + e % seq) % 50 + 3 * (e / seq));
      views.push_back({inputs[i].ids.data(), DType::I64, arg.shape, {}});
      reference.push_back(ref::PositionIds(arg.shape, inputs[i].ids));
      continue;
    }
    std::vector<float> values(count);
    for (float &x : values)
      x = dist(engine);
    inputs[i].array = npy::fromFloat32(values, arg.shape, npyOf(arg.elementType));
    std::vector<float> rounded = npy::toFloat32(inputs[i].array); // what the kernel reads
    views.push_back({inputs[i].array.bytes.data(), dtypeOf(arg.elementType), arg.shape, {}});
    reference.push_back(
        ref::Tensor(arg.shape, std::vector<double>(rounded.begin(), rounded.end())));
  }
  const Shape &s = shape;
  // [b, h, s, dv], or an embedding's [b, s, d] (its result has rank 3).
  std::vector<int64_t> outShape = {s.batch, s.queryHeads, s.querySeq, s.valueDim};
  if (std::count(sig->resultType.begin(), sig->resultType.end(), 'x') == 3)
    outShape = {s.batch, s.querySeq, s.valueDim};
  size_t outCount = s.batch * s.queryHeads * s.querySeq * s.valueDim;
  // Poisoned: NaN in f32, 0xffff (a NaN) in f16 and bf16.
  std::vector<float> out32(outCount, std::numeric_limits<float>::quiet_NaN());
  std::vector<uint8_t> out16(outCount * 2, 0xff);
  bool narrow = out != DType::F32;
  npy::DType outNpy = out == DType::F16 ? npy::DType::F16 : npy::DType::BF16;
  TensorView outView{narrow ? static_cast<void *>(out16.data()) : out32.data(), out, outShape, {}};
  Status status = kernel->run(views, outView);
  ASSERT_TRUE(status) << status.message();
  if (narrow)
    out32 = npy::toFloat32(npy::Array{outNpy, outShape, out16});

  Expected<ref::Tensor> expected = interpretReference(text, reference);
  ASSERT_TRUE(expected) << expected.error();
  double maxRef = 0, maxErr = 0;
  for (size_t e = 0; e < outCount; ++e) {
    maxRef = std::max(maxRef, std::fabs(expected->data[e]));
    double err = std::fabs(out32[e] - expected->data[e]);
    maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  EXPECT_LE(maxErr / maxRef, 1e-2) << "max error " << maxErr << " of " << maxRef;
}

TEST(HalfInputs, F16AndBf16KernelsMatchTheFloat64Reference) {
  std::mt19937 engine(std::random_device{}());
  Runtime runtime;
  for (const auto &[name, text16] : variants())
    for (std::string in : {"f16", "bf16"})
      for (std::string out : {std::string("f32"), in}) {
        SCOPED_TRACE(name + " " + in + " -> " + out);
        expectMatchesReference(runtime, withTypes(text16, in, out), engine, dtypeOf(in),
                               dtypeOf(out));
      }
}

/// The GPU check's source cases (bench/gpu/GpuSourceCases.h) on x86: the
/// same IR, the same 16-bit inputs and tables, the same tolerance. A case
/// whose IR means something other than its name says fails here first.
TEST(HalfInputs, TheGpuCheckSourceCasesMatchOnX86) {
  std::mt19937 engine(std::random_device{}());
  Runtime runtime;
  for (const gpucheck::GpuSourceCase &c : gpucheck::gpuSourceCases()) {
    SCOPED_TRACE(c.name);
    Expected<FunctionSignature> sig = describeFunction(c.source);
    ASSERT_TRUE(sig) << sig.error();
    // Q's element type, or a standalone kernel's first float input's (an
    // embedding's tokens come first).
    DType in = DType::F32;
    for (const ArgumentInfo &arg : sig->arguments)
      if (!arg.isInteger) {
        in = dtypeOf(arg.elementType);
        break;
      }
    // The result's element type: "tensor<...x f32>" after the last 'x'.
    const std::string &result = sig->resultType;
    size_t last = result.rfind('x');
    DType out = dtypeOf(result.substr(last + 1, result.size() - last - 2));
    expectMatchesReference(runtime, c.source, engine, in, out, c.call);
  }
}

TEST(HalfInputs, AViewOfAnotherDtypeIsAClearError) {
  Runtime runtime;
  std::string text = withTypes(variants()[1].second, "bf16", "f32");
  Expected<Spec> spec = Spec::fromText(text);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = runtime.getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> q(12 * 63 * 64), k(12 * 130 * 64), v(k.size()), o(q.size(), -7.0f);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  Status status = kernel->run({{q.data(), DType::F32, {1, 12, 63, 64}, {}},
                               {k16.data(), DType::BF16, {1, 12, 130, 64}, {}},
                               {v16.data(), DType::BF16, {1, 12, 130, 64}, {}}},
                              {o.data(), DType::F32, {1, 12, 63, 64}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("dtype float32 is not supported here (expected bfloat16)"),
            std::string::npos)
      << status.message();
  for (float x : o)
    ASSERT_EQ(x, -7.0f);
}

} // namespace
