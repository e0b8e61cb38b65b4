// The GPU check runs where there is no compiler: its float64 reference is
// built from each case's parameters (bench/gpu/GpuCheckCases.h), not from
// the case's IR. Here, with the compiler, the two must agree: the reference
// interpreter on caseMlir(c) gives what caseReference(c) gives.
#include "bench/gpu/GpuCheckCases.h"
#include "reference/interpreter/ReferenceInterpreter.h"

#include "gtest/gtest.h"

#include <cmath>
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

} // namespace
