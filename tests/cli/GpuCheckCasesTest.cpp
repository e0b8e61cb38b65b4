// The GPU check runs where there is no compiler: its float64 reference is
// built from each case's parameters (bench/gpu/GpuCheckCases.h), not from
// the case's IR. Here, with the compiler, the two must agree: the reference
// interpreter on caseMlir(c) gives what caseReference(c) gives. The source
// cases bring their inputs and reference in the bundle: preparing them
// writes every part the runner reads, at the size the signature gives.
#include "bench/gpu/GpuCheckCases.h"
#include "bench/gpu/GpuBackwardCases.h"
#include "bench/gpu/PrepareSourceCase.h"
#include "pejit/compiler/backends/nvidia/NvidiaLowering.h"
#include "pejit/core/KernelMeta.h"
#include "pejit/core/NvidiaPlan.h"
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/npy/Npy.h"
#include "tests/cli/CliTestSupport.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

using namespace pejit;
using namespace pejit::gpucheck;

namespace {

/// Random multiples of 1/64 in [-1, 1]: exact in f16 and bf16, so the IR's
/// 16-bit tensor types change nothing.
ref::Tensor exactRandom(std::vector<int64_t> shape, std::mt19937 &engine) {
  ref::Tensor t(std::move(shape));
  std::uniform_int_distribution<int> dist(-64, 64);
  for (double &x : t.data)
    x = dist(engine) / 64.0;
  return t;
}

TEST(GpuCheckCases, TheRunnersReferenceMatchesTheInterpretedIrOfEveryCase) {
  std::mt19937 engine(std::random_device{}());
  int checked = 0;
  for (const GpuCase &c : gpuCases()) {
    if (c.timed)
      continue; // the same code path as the numerics cases, only bigger
    SCOPED_TRACE(c.name);
    ref::Tensor q = exactRandom({c.batch, c.queryHeads, c.querySeq, c.headDim}, engine);
    ref::Tensor k = exactRandom({c.batch, c.kvHeads, c.keySeq, c.headDim}, engine);
    ref::Tensor v = exactRandom({c.batch, c.kvHeads, c.keySeq, c.headDim}, engine);
    std::vector<ReferenceArgument> arguments = {q, k, v};
    if (c.rope) {
      std::vector<int64_t> qPos = queryPositions(c), kPos = keyPositions(c);
      arguments.push_back(ref::PositionIds({c.querySeq}, qPos));
      arguments.push_back(ref::PositionIds({c.keySeq}, kPos));
    }
    Expected<ref::Tensor> interpreted = interpretReference(caseMlir(c), arguments, c.name);
    ASSERT_TRUE(interpreted) << interpreted.error() << "\n" << caseMlir(c);
    ref::Tensor expected = caseReference(c, q, k, v);
    ASSERT_EQ(interpreted->data.size(), expected.data.size());
    double maxRef = 0, maxErr = 0;
    for (size_t i = 0; i < expected.data.size(); ++i) {
      maxRef = std::max(maxRef, std::fabs(expected.data[i]));
      maxErr = std::max(maxErr, std::fabs(interpreted->data[i] - expected.data[i]));
    }
    EXPECT_LE(maxErr, 1e-9 * std::max(maxRef, 1.0)) << "max abs error " << maxErr;
    ++checked;
  }
  EXPECT_GE(checked, 13);
}

TEST(GpuCheckCases, EverySourceCaseCompilesAndBundlesItsInputsAndReference) {
  if (findCudaToolkit().empty())
    GTEST_SKIP() << "no CUDA toolkit with nvvm/libdevice here: the GPU lowering links libdevice";
  clitest::TempDir dir;
  Runtime runtime;
  auto size = [&](const std::string &name, const std::string &part) -> int64_t {
    std::error_code error;
    auto bytes = std::filesystem::file_size(sourceCaseFile(dir.path(), name, part), error);
    return error ? -1 : static_cast<int64_t>(bytes);
  };
  for (const GpuSourceCase &c : gpuSourceCases()) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(prepareSourceCase(runtime, c, dir.path(), "sm_90"), "");
    std::ifstream metaFile(sourceCaseFile(dir.path(), c.name, "meta"));
    std::string meta((std::istreambuf_iterator<char>(metaFile)), {});
    NvidiaLaunch launch;
    KernelDescription description;
    ASSERT_TRUE(readNvidiaMeta(meta, launch, description));
    EXPECT_GT(size(c.name, "ptx"), 0);
    // A shape class's case is drawn at its call's lengths.
    const Shape s = shapeAtCall(description.shape, c.call);
    ASSERT_FALSE(s.hasDynamicDims());
    EXPECT_EQ(description.shape.hasDynamicDims(), !c.call.empty());
    EXPECT_EQ(size(c.name, "call") > 0, !c.call.empty());
    int operand = 0;
    for (KernelArgument arg : description.signature.arguments) {
      if (arg.dtype == DType::I32 || arg.dtype == DType::I64)
        continue;
      arg.shape = argumentDimsAt(arg, s);
      int64_t bytes = static_cast<int64_t>(denseBytes(arg.shape, arg.dtype));
      std::string part = sourceCasePart(arg.role, operand);
      EXPECT_EQ(size(c.name, part), bytes) << part;
    }
    EXPECT_EQ(size(c.name, "query_positions"),
              8 * description.positionAxes * description.queryPositionRows * s.querySeq);
    EXPECT_EQ(size(c.name, "key_positions"),
              8 * description.positionAxes * description.keyPositionRows * s.keySeq);
    // The reference: finite, and not all zero (a case that masks every key
    // would check nothing).
    std::ifstream expectedFile(sourceCaseFile(dir.path(), c.name, "expected"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(expectedFile)), {});
    ASSERT_EQ(static_cast<int64_t>(bytes.size()),
              4 * s.batch * s.queryHeads * s.querySeq * s.valueDim);
    std::vector<float> expected(bytes.size() / 4);
    std::memcpy(expected.data(), bytes.data(), bytes.size());
    double maxAbs = 0;
    for (float x : expected) {
      ASSERT_TRUE(std::isfinite(x));
      maxAbs = std::max(maxAbs, std::fabs(static_cast<double>(x)));
    }
    EXPECT_GT(maxAbs, 0.05);
  }
}

/// A bundle part's values, widened from its dtype.
std::vector<double> bundleValues(const std::string &path, DType type, std::vector<int64_t> shape) {
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), {});
  npy::Array array;
  array.dtype = type == DType::BF16  ? npy::DType::BF16
                : type == DType::F16 ? npy::DType::F16
                                     : npy::DType::F32;
  array.shape = std::move(shape);
  array.bytes.assign(bytes.begin(), bytes.end());
  if (static_cast<int64_t>(array.bytes.size()) != array.numel() * (type == DType::F32 ? 4 : 2))
    return {};
  std::vector<float> values = npy::toFloat32(array);
  return std::vector<double>(values.begin(), values.end());
}

// The backward cases' reference is a recipe written again for
// pejit/reference: the forward it implies must be the source's. The
// interpreter on the bundled inputs gives the bundled O (up to its 16-bit
// rounding), and every part the runner reads is there at its size, the
// gradients (the operands' too) finite and not all zero.
TEST(GpuCheckCases, EveryBackwardCaseBundlesItsGradientsAndItsRecipeIsTheSourcesForward) {
  if (findCudaToolkit().empty())
    GTEST_SKIP() << "no CUDA toolkit with nvvm/libdevice here: the GPU lowering links libdevice";
  clitest::TempDir dir;
  Runtime runtime;
  int operandGradients = 0;
  for (const GpuBackwardCase &c : gpuBackwardCases()) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(prepareBackwardCase(runtime, c, dir.path(), "sm_90"), "");
    std::ifstream metaFile(sourceCaseFile(dir.path(), c.name, "meta"));
    std::string meta((std::istreambuf_iterator<char>(metaFile)), {});
    NvidiaLaunch launch;
    KernelDescription description;
    ASSERT_TRUE(readNvidiaMeta(meta, launch, description));
    EXPECT_EQ(launch.kernel, "pejit_backward");
    const Shape s = shapeAtCall(description.shape, c.call);
    ASSERT_FALSE(s.hasDynamicDims());
    std::vector<ReferenceArgument> forwardArguments;
    std::vector<double> bundledOutput;
    DType outputType = DType::F32;
    int operand = 0;
    for (KernelArgument arg : description.signature.arguments) {
      arg.shape = argumentDimsAt(arg, s);
      if (arg.dtype == DType::I32 || arg.dtype == DType::I64) {
        // Given ids: the kernel's table of that side is them ([rows, s]).
        std::string part = arg.readsQueryPositions() ? "query_positions" : "key_positions";
        std::ifstream file(sourceCaseFile(dir.path(), c.name, part), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(file)), {});
        std::vector<int64_t> ids(bytes.size() / 8);
        std::memcpy(ids.data(), bytes.data(), ids.size() * 8);
        int64_t count = 1;
        for (int64_t dim : arg.shape)
          count *= dim;
        ASSERT_EQ(static_cast<int64_t>(ids.size()), count) << part;
        forwardArguments.push_back(ref::PositionIds(arg.shape, ids));
        continue;
      }
      std::string part = sourceCasePart(arg.role, operand);
      std::vector<double> values =
          bundleValues(sourceCaseFile(dir.path(), c.name, part), arg.dtype, arg.shape);
      ASSERT_FALSE(values.empty()) << part << " is missing or of the wrong size";
      if (arg.role == ArgumentRole::Output) {
        bundledOutput = values;
        outputType = arg.dtype;
      } else if (arg.role != ArgumentRole::OutputGradient)
        forwardArguments.push_back(ref::Tensor(arg.shape, values));
    }
    Expected<ref::Tensor> interpreted = interpretReference(c.source, forwardArguments, c.name);
    ASSERT_TRUE(interpreted) << interpreted.error();
    ASSERT_EQ(interpreted->data.size(), bundledOutput.size());
    double maxRef = 0, maxErr = 0;
    for (size_t i = 0; i < bundledOutput.size(); ++i) {
      maxRef = std::max(maxRef, std::fabs(interpreted->data[i]));
      maxErr = std::max(maxErr, std::fabs(interpreted->data[i] - bundledOutput[i]));
    }
    // O is stored in the output's dtype: 16 bits round to 2^-9 relative.
    double tolerance = outputType == DType::F32 ? 1e-6 : 4e-3;
    EXPECT_LE(maxErr, tolerance * maxRef) << "the recipe's O differs from the source's";
    std::vector<int64_t> shapes[3] = {{s.batch, s.queryHeads, s.querySeq, s.headDim},
                                      {s.batch, s.kvHeads, s.keySeq, s.headDim},
                                      {s.batch, s.kvHeads, s.keySeq, s.valueDim}};
    const char *parts[3] = {"expected_dq", "expected_dk", "expected_dv"};
    for (int g = 0; g < 3; ++g) {
      std::vector<double> grad =
          bundleValues(sourceCaseFile(dir.path(), c.name, parts[g]), DType::F32, shapes[g]);
      ASSERT_FALSE(grad.empty()) << parts[g];
      double maxAbs = 0;
      for (double x : grad) {
        ASSERT_TRUE(std::isfinite(x)) << parts[g];
        maxAbs = std::max(maxAbs, std::fabs(x));
      }
      EXPECT_GT(maxAbs, 1e-3) << parts[g];
    }
    // Each operand gradient the kernel gives has its float64 reference.
    for (unsigned slot : description.signature.operandGradients)
      for (const KernelArgument &arg : description.signature.arguments)
        if (arg.role == ArgumentRole::EncodingOperand &&
            std::find(arg.slots.begin(), arg.slots.end(), slot) != arg.slots.end()) {
          std::vector<double> grad = bundleValues(
              sourceCaseFile(dir.path(), c.name, "expected_d" + arg.name), DType::F32, arg.shape);
          ASSERT_FALSE(grad.empty()) << "expected_d" << arg.name;
          double maxAbs = 0;
          for (double x : grad)
            maxAbs = std::max(maxAbs, std::fabs(x));
          EXPECT_GT(maxAbs, 1e-3) << arg.name;
          ++operandGradients;
        }
  }
  EXPECT_GE(operandGradients, 3) << "T5's table, ALiBi's slopes and the RoPE's scale";
}

TEST(GpuCheckCases, TheKernelMetaCarriesShapePositionsAndSignature) {
  NvidiaLaunch launch{"sm_90", {2, 4, 1}, {128, 1, 1}, 1, 0, 0, {2, 4, 1}};
  KernelDescription description;
  description.shape = Shape{2, 4, 2, 70, 130, 128, 128};
  description.queryPositionRows = 2;
  description.keyPositionRows = 2;
  description.positionAxes = 1;
  description.inputDtype = description.outputDtype = DType::BF16;
  description.rowScratchFloats = 38; // a backward's D, lse and Shaw's terms
  Expected<KernelSignature> signature = KernelSignature::parse(
      "query:bf16:2x4x70x128 key:bf16:2x4x130x128 value:bf16:2x4x130x128 "
      "encoding_operand=shaw_key_table:bf16:4x9x128 query_positions:i64:2x70");
  ASSERT_TRUE(signature) << signature.error();
  description.signature = *signature;
  std::string meta = writeNvidiaMeta(launch, description);
  NvidiaLaunch readLaunch;
  KernelDescription read;
  ASSERT_TRUE(readNvidiaMeta(meta, readLaunch, read)) << meta;
  EXPECT_EQ(read.shape, description.shape);
  EXPECT_EQ(read.rowScratchFloats, 38);
  EXPECT_EQ(read.queryPositionRows, 2);
  EXPECT_EQ(read.keyPositionRows, 2);
  EXPECT_EQ(read.signature.str(), signature->str());
  EXPECT_EQ(readLaunch.grid, launch.grid);
  // Entries written before these lines still read; a malformed one is named.
  std::string old = meta.substr(0, meta.find("shape "));
  EXPECT_TRUE(readNvidiaMeta(old, readLaunch, read));
  Status bad = readNvidiaMeta(old + "shape 2 4 0 70 130 128 128\n", readLaunch, read);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("malformed 'shape' line"), std::string::npos) << bad.message();
}

// A shape class's meta (`?` lengths) has no grid: its launch is planned
// per call from the tiles and tables (NvidiaPlan.h).
TEST(GpuCheckCases, AShapeClassMetaCarriesItsTilesAndTablesInsteadOfAGrid) {
  NvidiaLaunch launch{"sm_90", {}, {128, 1, 1}, 0, 0, 0, {}};
  KernelDescription description;
  description.shape = Shape{kDynamicDim, 32, 8, kDynamicDim, kDynamicDim, 128, 128};
  description.queryTile = 64;
  description.keyTile = 64;
  description.tableFloatsPerQueryPosition = 128;
  description.tableFloatsPerKeyPosition = 128;
  std::string meta = writeNvidiaMeta(launch, description);
  EXPECT_NE(meta.find("shape ? 32 8 ? ? 128 128\n"), std::string::npos) << meta;
  EXPECT_EQ(meta.find("grid"), std::string::npos) << meta;
  NvidiaLaunch readLaunch;
  KernelDescription read;
  ASSERT_TRUE(readNvidiaMeta(meta, readLaunch, read)) << meta;
  EXPECT_EQ(read.shape, description.shape);
  EXPECT_EQ(read.queryTile, 64);
  EXPECT_EQ(read.tableFloatsPerKeyPosition, 128);
  EXPECT_EQ(readLaunch.splits, 0);
  // The plan of a decode call: 1 query tile x 32 heads = 32 blocks over
  // 64 KV tiles: split 9 ways; the tables for 1 + 4096 positions.
  NvidiaCallPlan plan = planNvidiaCall(read, readLaunch.splits, Shape{1, 32, 8, 1, 4096, 128, 128});
  EXPECT_EQ(plan.splits, 9);
  EXPECT_EQ(plan.grid, (std::vector<int64_t>{9, 32, 1}));
  EXPECT_EQ(plan.combineGrid, (std::vector<int64_t>{1, 32, 1}));
  EXPECT_EQ(plan.partialRowFloats, 32 * 9);
  EXPECT_EQ(plan.tableFloats, 128 * 4097);
  // Without its tiles the class cannot be planned: an error, not a launch.
  std::string noTiles = meta;
  noTiles.replace(noTiles.find("tiles 64 64"), 11, "tiles 0 0");
  Status bad = readNvidiaMeta(noTiles, readLaunch, read);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("'tiles'"), std::string::npos) << bad.message();
}

} // namespace
