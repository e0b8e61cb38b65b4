// attn.linear_attention on NVIDIA (docs/linear-attention.md, "How it runs
// (NVIDIA)"): every feature map, RoPE placement and carried state compiles
// to PTX that ptxas accepts for sm_80 and sm_90 with no stack frame and no
// spills, and runs through NvidiaKernel::run.
//
// Without a GPU a fake launcher evaluates the source in float64 on exactly
// the dense buffers, ids and state the launch is given (and marks the
// state it hands back), so the packing, the ids, the plan and the write-back
// of the output and of the state are checked against the interpreter on the
// user's own inputs. With a GPU the kernel itself is checked: every form at
// lengths 1, 7, 64 and 1000 against float64 (f32 1e-4), and 100 decode steps
// with the state carried equal to one causal call.
#include "tests/cli/NvidiaStandaloneHarness.h"

#include "gtest/gtest.h"

using namespace pejit;

namespace {

using namespace pejit::nvidiatest;

struct Form {
  std::string map = "elu_plus_one";
  std::string placement; ///< empty: no RoPE
  bool causal = true;
};

std::vector<Form> everyForm() {
  std::vector<Form> forms;
  for (std::string map : {"elu_plus_one", "relu", "identity", "softmax_keys"})
    for (std::string placement : {"", "rope_before_feature_map", "rope_on_numerator"})
      if (!(map == "softmax_keys" && placement == "rope_on_numerator"))
        forms.push_back({map, placement, true});
  forms.push_back({"elu_plus_one", "rope_on_numerator", false});
  return forms;
}

struct Dims {
  int64_t heads = 4, kvHeads = 2, dim = 64, valueDim = 64;
  std::string type = "f32";
};

/// The op over [1, h, s, d] tensors with ids, `sq` and `skv` lengths or
/// "?", with a state argument when `state`.
std::string linearSource(const Form &f, const Dims &n, const std::string &sq,
                         const std::string &skv, bool state) {
  auto tensor = [&](int64_t h, const std::string &s, int64_t d) {
    return "tensor<1x" + std::to_string(h) + "x" + s + "x" + std::to_string(d) + "x" + n.type + ">";
  };
  std::string q = tensor(n.heads, sq, n.dim), k = tensor(n.kvHeads, skv, n.dim);
  std::string v = tensor(n.kvHeads, skv, n.valueDim), o = tensor(n.heads, sq, n.valueDim);
  std::string qp = "tensor<" + sq + "xi64>", kp = "tensor<" + skv + "xi64>";
  std::string st = "tensor<1x" + std::to_string(n.heads) + "x" + std::to_string(n.dim) + "x" +
                   std::to_string(n.valueDim + 2) + "xf32>";
  std::string rope = f.placement.empty() ? ""
                                         : " encodings([#pe.rope<layout = half, theta = 100.0>]) "
                                           "rope_placement(" +
                                               f.placement + ")";
  return "func.func @f(%q: " + q + ", %k: " + k + ", %v: " + v + ", %qp: " + qp + ", %kp: " + kp +
         (state ? ", %st: " + st : "") + ") -> " + o +
         " {\n  %o = attn.linear_attention %q, %k, %v feature_map(" + f.map +
         ") query_positions(%qp : " + qp + ") key_positions(%kp : " + kp + ")" +
         (f.causal ? " causal" : "") + (state ? " state(%st : " + st + ")" : "") + rope + " : " +
         q + ", " + k + ", " + v + " -> " + o + "\n  return %o : " + o + "\n}\n";
}

/// One call's inputs: Q, K, V, the ids, and (with a state) a random state
/// with positive z (the column dv) and m (dv + 1).
Call linearCall(const Dims &n, int64_t sq, int64_t skv, bool state, DType dtype) {
  Call call;
  call.addFloats({1, n.heads, sq, n.dim}, dtype);
  call.addFloats({1, n.kvHeads, skv, n.dim}, dtype);
  call.addFloats({1, n.kvHeads, skv, n.valueDim}, dtype);
  call.addInts({sq}, 0, 500);
  call.addInts({skv}, 0, 500);
  if (state) {
    call.addFloats({1, n.heads, n.dim, n.valueDim + 2}, DType::F32);
    // The kernel's bytes and the reference's copy of the values alike.
    auto *values = reinterpret_cast<float *>(call.floats.back().bytes.bytes.data());
    ref::Tensor &exact = std::get<ref::Tensor>(call.reference.back());
    for (int64_t row = 0; row < n.heads * n.dim; ++row) {
      float &z = values[row * (n.valueDim + 2) + n.valueDim];
      z = std::fabs(z) + 1.0f;
      exact.data[row * (n.valueDim + 2) + n.valueDim] = z;
    }
  }
  call.setOutput({1, n.heads, sq, n.valueDim}, dtype);
  return call;
}

TEST(NvidiaLinear, EveryFormGivesPtxThatPtxasAcceptsWithoutSpills) {
  PEJIT_REQUIRE_LIBDEVICE();
  Runtime runtime;
  struct Target {
    Dims dims;
    const char *arch;
  };
  const Target targets[] = {{{4, 2, 64, 64, "bf16"}, "sm_90"},
                            {{8, 2, 128, 128, "f16"}, "sm_80"},
                            {{4, 4, 128, 64, "f32"}, "sm_90"}};
  for (const Target &target : targets)
    for (const Form &form : everyForm())
      for (bool state : {false, true}) {
        SCOPED_TRACE(form.map + " " + form.placement + (state ? " state " : " ") +
                     target.dims.type + " d=" + std::to_string(target.dims.dim) + " " +
                     target.arch);
        Expected<Spec> spec = Spec::fromText(linearSource(form, target.dims, "?", "?", state));
        ASSERT_TRUE(spec) << spec.error();
        Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, target.arch);
        ASSERT_TRUE(kernel) << kernel.error();
        EXPECT_NE(kernel->ptx().find(".entry pejit_linear"), std::string::npos);
        EXPECT_TRUE(kernel->grid().empty()); // a shape class: planned per call
        EXPECT_NE(kernel->launchMeta().find("kernel pejit_linear"), std::string::npos);
        if (kernel->ptxasLog().empty())
          continue; // no ptxas: PTX only
        EXPECT_EQ(ptxasProperties(kernel->ptxasLog(), "pejit_linear"),
                  "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads")
            << kernel->ptxasLog();
      }
  // A state too big for one block's registers is an error naming it.
  Expected<Spec> wide = Spec::fromText(linearSource({}, {2, 2, 256, 256, "f32"}, "?", "?", false));
  ASSERT_TRUE(wide) << wide.error();
  Expected<NvidiaKernel> refused = runtime.getNvidia(*wide, "sm_90");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("the state d x dv = 256 x 256 needs more than 256 threads"),
            std::string::npos)
      << refused.error();
}

/// The launch's arguments as the source's: Q, K, V, the ids and the state,
/// from the dense buffers. The fake adds 1 to the state it hands back.
Rebuild linearRebuild(const Dims &n, DType dtype, bool state) {
  return [=](const cuda::AttentionKernelImage &image, const cuda::AttentionBuffers &buffers) {
    int64_t sq = image.querySeq, skv = image.keySeq;
    std::vector<ReferenceArgument> args;
    args.push_back(fromDense(buffers.query, dtype, {1, n.heads, sq, n.dim}));
    args.push_back(fromDense(buffers.key, dtype, {1, n.kvHeads, skv, n.dim}));
    args.push_back(fromDense(buffers.value, dtype, {1, n.kvHeads, skv, n.valueDim}));
    args.push_back(ref::PositionIds({sq}, *buffers.queryPositions));
    args.push_back(ref::PositionIds({skv}, *buffers.keyPositions));
    if (state) {
      std::vector<int64_t> shape{1, n.heads, n.dim, n.valueDim + 2};
      if (!buffers.state || buffers.stateBytes != static_cast<size_t>(product(shape) * 4))
        return std::vector<ReferenceArgument>{};
      args.push_back(fromDense(buffers.state, DType::F32, shape));
      auto *values = static_cast<float *>(buffers.state);
      for (int64_t e = 0; e < product(shape); ++e)
        values[e] += 1.0f;
    }
    return args;
  };
}

/// A shape class at several lengths: each launch gets grid [1, hq, b], the
/// RoPE's tables for both sides' ids, the packed inputs and the state; the
/// output and the state (here a strided view into a bigger buffer) come
/// back into the caller's views.
TEST(NvidiaLinear, RuntimeHandsTheLaunchItsBuffersAndBringsTheStateBack) {
  PEJIT_REQUIRE_LIBDEVICE();
  SCOPED_TRACE(clitest::seedTrace());
  Dims dims{4, 2, 16, 16, "f32"};
  Form form{"elu_plus_one", "rope_on_numerator", true};
  std::string source = linearSource(form, dims, "?", "?", true);
  Runtime runtime;
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_90");
  ASSERT_TRUE(kernel) << kernel.error();
  FakeLaunches fake(source, DType::F32, linearRebuild(dims, DType::F32, true));
  for (auto [sq, skv] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 7}, {5, 70}}) {
    SCOPED_TRACE("sq=" + std::to_string(sq) + " skv=" + std::to_string(skv));
    Call call = linearCall(dims, sq, skv, true, DType::F32);
    // The state as rows of a [1, 4, 16, 20] buffer (a strided view).
    std::vector<float> padded(4 * 16 * 20, -3.0f);
    const auto *given = reinterpret_cast<const float *>(call.floats.back().bytes.bytes.data());
    for (int64_t row = 0; row < 4 * 16; ++row)
      for (int64_t c = 0; c < 18; ++c)
        padded[row * 20 + c] = given[row * 18 + c];
    call.inputs.back() = {padded.data(), DType::F32, {1, 4, 16, 18}, {4 * 16 * 20, 16 * 20, 20, 1}};
    Status status = kernel->run(call.inputs, call.outView());
    ASSERT_TRUE(status) << status.message();
    const cuda::AttentionKernelImage &image = fake.seen.back();
    EXPECT_EQ(image.kernel, "pejit_linear");
    EXPECT_EQ(image.grid, (std::vector<int64_t>{1, 4, 1}));
    EXPECT_EQ(image.block, kernel->block());
    EXPECT_GT(image.scratchFloats, 0); // the RoPE's tables
    Expected<ref::Tensor> expected = interpretReference(source, call.reference);
    ASSERT_TRUE(expected) << expected.error();
    EXPECT_LE(relativeError(call.output(), *expected), 1e-6);
    for (int64_t row = 0; row < 4 * 16; ++row)
      for (int64_t c = 0; c < 20; ++c)
        ASSERT_EQ(padded[row * 20 + c], c < 18 ? given[row * 18 + c] + 1.0f : -3.0f)
            << "state row " << row << " column " << c;
  }
  // A state of another shape is an error naming it, before any launch.
  Call call = linearCall(dims, 3, 3, true, DType::F32);
  call.inputs.back().shape = {1, 4, 16, 17};
  size_t launches = fake.seen.size();
  Status bad = kernel->run(call.inputs, call.outView());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("linear_state"), std::string::npos) << bad.message();
  EXPECT_EQ(fake.seen.size(), launches);
}

/// The kernel on a GPU: every form at lengths crossing the 16-row chunks,
/// and 100 decode steps with the state carried against one causal call.
TEST(NvidiaLinear, EveryFormMatchesTheReferenceOnTheGpu) {
  PEJIT_REQUIRE_LIBDEVICE();
  if (!hasGpu())
    GTEST_SKIP() << "no CUDA driver and GPU here: the fake-launch test checks the runtime's side, "
                    "the GPU check the kernel";
  SCOPED_TRACE(clitest::seedTrace());
  std::string arch = cuda::Driver::get(nullptr)->device().arch();
  Runtime runtime;
  Dims dims{4, 2, 64, 64, "f32"};
  for (const Form &form : everyForm())
    for (bool state : {false, true}) {
      std::string source = linearSource(form, dims, "?", "?", state);
      Expected<Spec> spec = Spec::fromText(source);
      ASSERT_TRUE(spec) << spec.error();
      Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, arch);
      ASSERT_TRUE(kernel) << kernel.error();
      for (auto [sq, skv] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {7, 7}, {64, 64}, {65, 300}, {1000, 1000}}) {
        SCOPED_TRACE(form.map + " " + form.placement + (state ? " state" : "") +
                     " sq=" + std::to_string(sq) + " skv=" + std::to_string(skv));
        Call call = linearCall(dims, sq, skv, state, DType::F32);
        Expected<ref::Tensor> expected = interpretReference(source, call.reference);
        ASSERT_TRUE(expected) << expected.error();
        Status status = kernel->run(call.inputs, call.outView());
        ASSERT_TRUE(status) << status.message();
        EXPECT_LE(relativeError(call.output(), *expected), 1e-4);
      }
    }
  // 100 decode steps from a zero state equal one causal call.
  Form form{"elu_plus_one", "rope_on_numerator", true};
  std::string full = linearSource(form, dims, "100", "100", false);
  std::string step = linearSource(form, dims, "1", "1", true);
  Expected<Spec> stepSpec = Spec::fromText(step);
  ASSERT_TRUE(stepSpec) << stepSpec.error();
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*stepSpec, arch);
  ASSERT_TRUE(kernel) << kernel.error();
  Call whole = linearCall(dims, 100, 100, false, DType::F32);
  for (int64_t t = 0; t < 100; ++t)
    whole.ints[0][t] = whole.ints[1][t] = t;
  whole.reference[3] = ref::PositionIds({100}, whole.ints[0]);
  whole.reference[4] = ref::PositionIds({100}, whole.ints[1]);
  Expected<ref::Tensor> expected = interpretReference(full, whole.reference);
  ASSERT_TRUE(expected) << expected.error();
  std::vector<float> state(4 * 64 * 66, 0.0f);
  for (int64_t t = 0; t < 100; ++t) {
    auto row = [&](int index, int64_t h, int64_t width) {
      auto *base = reinterpret_cast<float *>(whole.floats[index].bytes.bytes.data());
      return TensorView{
          base + t * width, DType::F32, {1, h, 1, width}, {h * 100 * width, 100 * width, width, 1}};
    };
    int64_t id = t;
    std::vector<float> out(4 * 64, std::nanf(""));
    Status status = kernel->run({row(0, 4, 64),
                                 row(1, 2, 64),
                                 row(2, 2, 64),
                                 {&id, DType::I64, {1}, {}},
                                 {&id, DType::I64, {1}, {}},
                                 {state.data(), DType::F32, {1, 4, 64, 66}, {}}},
                                {out.data(), DType::F32, {1, 4, 1, 64}, {}});
    ASSERT_TRUE(status) << status.message();
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t c = 0; c < 64; ++c)
        EXPECT_NEAR(out[h * 64 + c], expected->data[(h * 100 + t) * 64 + c], 1e-4)
            << "step " << t << " head " << h;
  }
}

} // namespace
