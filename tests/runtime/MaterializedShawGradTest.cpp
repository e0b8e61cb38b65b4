// The backward of Shaw's materialized terms (pe.relative_term_grad, derived
// by Runtime::getX86Backward from the term's own source; docs/backward.md):
// the key term's dq and d a^K from dE, the value term's d a^V from dR,
// against the float64 reference (ref::relativeKeyTermBackward,
// ref::relativeValueTableGradient, checked by finite differences in
// tests/unit/AttentionGradTest.cpp). Fresh random inputs, NaN-poisoned
// outputs, max |got - ref| <= 1e-4 max |ref| (f32; 1e-2 for bf16, whose
// reference sums the rounded values). Shared and per-head tables, fewer
// queries than keys and more (every bucket, the clipped ones full), items
// crossed, a `?` shape class, bitwise determinism across thread counts,
// guard pages, and an error that names a bad gradient.
#include "pejit/reference/ScoreBiasGrad.h"
#include "tests/runtime/GuardPages.h"
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cstring>
#include <limits>

namespace pejit::testing {
namespace {

constexpr int64_t kClip = 4, kBuckets = 2 * kClip + 1;

struct TermCase {
  bool key = true, perHead = false;
  int64_t batch = 1, heads = 4, sq = 20, skv = 24, d = 32;
  DType dtype = DType::F32;
  bool shapeClass = false;
  std::string str() const {
    return std::string(key ? "key" : "value") + (perHead ? " per head" : " shared") + " " +
           std::to_string(sq) + "x" + std::to_string(skv) + " " + elementName(dtype) +
           (shapeClass ? " class" : "");
  }
};

std::string tensorType(const std::vector<std::string> &dims, DType dtype) {
  std::string text = "tensor<";
  for (const std::string &dim : dims)
    text += dim + "x";
  return text + elementName(dtype) + ">";
}

std::vector<int64_t> tableShape(const TermCase &c) {
  return c.perHead ? std::vector<int64_t>{c.heads, kBuckets, c.d}
                   : std::vector<int64_t>{kBuckets, c.d};
}

std::string source(const TermCase &c) {
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string sq = c.shapeClass ? "?" : n(c.sq), skv = c.shapeClass ? "?" : n(c.skv);
  std::vector<std::string> tableDims;
  for (int64_t dim : tableShape(c))
    tableDims.push_back(n(dim));
  std::string table = tensorType(tableDims, c.dtype);
  if (c.key) {
    std::string q = tensorType({n(c.batch), n(c.heads), sq, n(c.d)}, c.dtype);
    std::string e = tensorType({n(c.batch), n(c.heads), sq, skv}, c.dtype);
    return "func.func @key(%q: " + q + ", %t: " + table + ") -> " + e +
           " {\n  %e = pe.relative_key %q, %t <clip = 4> : " + q + ", " + table + " -> " + e +
           "\n  return %e : " + e + "\n}\n";
  }
  std::vector<std::string> rDims = {sq, skv, n(c.d)};
  if (c.perHead)
    rDims.insert(rDims.begin(), n(c.heads));
  std::string r = tensorType(rDims, c.dtype);
  return "func.func @value(%t: " + table + ") -> " + r +
         " {\n  %r = pe.relative_value %t <clip = 4> : " + table + " -> " + r +
         "\n  return %r : " + r + "\n}\n";
}

struct TermRun {
  std::vector<float> dq, dtable;
  double dqError = 0, tableError = 0;
  std::string error;
};

/// Runs the derived backward on `runtime` with fresh inputs.
TermRun runCase(const TermCase &c, Runtime &runtime) {
  TermRun run;
  Expected<Spec> forward = Spec::fromText(source(c));
  if (!forward)
    return run.error = forward.error(), run;
  Expected<X86Kernel> kernel = runtime.getX86Backward(*forward);
  if (!kernel)
    return run.error = kernel.error(), run;
  std::vector<int64_t> tShape = tableShape(c);
  auto [table, tableRef] = randomInput(tShape, c.dtype);
  int64_t tableFloats = tableRef.data.size();
  run.dtable.assign(tableFloats, std::numeric_limits<float>::quiet_NaN());
  TensorView tableGrad{run.dtable.data(), DType::F32, tShape, {}};
  if (c.key) {
    std::vector<int64_t> qShape = {c.batch, c.heads, c.sq, c.d};
    auto [q, qRef] = randomInput(qShape, c.dtype);
    auto [de, deRef] = randomInput({c.batch, c.heads, c.sq, c.skv}, c.dtype);
    npy::Array dq = npy::fromFloat32(
        std::vector<float>(qRef.data.size(), std::numeric_limits<float>::quiet_NaN()), qShape,
        q.dtype);
    Status status = kernel->runBackward({{q.bytes.data(), c.dtype, qShape, {}},
                                         {table.bytes.data(), c.dtype, tShape, {}},
                                         {de.bytes.data(), c.dtype, deRef.shape, {}}},
                                        {{dq.bytes.data(), c.dtype, qShape, {}}, tableGrad});
    if (!status)
      return run.error = status.message(), run;
    ref::RelativeKeyTermGradients want = ref::relativeKeyTermBackward(
        qRef, tableRef, kClip, ref::RelativeDistance{c.sq, c.skv}, deRef);
    run.dq = npy::toFloat32(dq);
    run.dqError = maxRelativeError(run.dq, want.dq);
    run.tableError = maxRelativeError(run.dtable, want.dKeyTable);
    return run;
  }
  std::vector<int64_t> rShape = {c.sq, c.skv, c.d};
  if (c.perHead)
    rShape.insert(rShape.begin(), c.heads);
  auto [dr, drRef] = randomInput(rShape, c.dtype);
  Status status = kernel->runBackward(
      {{table.bytes.data(), c.dtype, tShape, {}}, {dr.bytes.data(), c.dtype, rShape, {}}},
      {tableGrad});
  if (!status)
    return run.error = status.message(), run;
  ref::Tensor want = ref::relativeValueTableGradient(drRef, kClip, c.sq, c.skv);
  run.tableError = maxRelativeError(run.dtable, want);
  return run;
}

void expectCase(const TermCase &c) {
  SCOPED_TRACE(c.str() + "\n" + source(c));
  TermRun run = runCase(c, suiteRuntime());
  ASSERT_EQ(run.error, "");
  double tolerance = c.dtype == DType::F32 ? 1e-4 : 1e-2;
  EXPECT_LE(run.tableError, tolerance) << "the table's gradient";
  if (c.key)
    EXPECT_LE(run.dqError, tolerance) << "dq";
}

TEST(MaterializedShawGrad, KeyAndValueTermsSharedAndPerHeadAtEveryShape) {
  for (bool key : {true, false})
    for (bool perHead : {false, true})
      for (auto [sq, skv] :
           {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {20, 24}, {70, 33}, {40, 200}}) {
        TermCase c;
        c.key = key, c.perHead = perHead;
        c.sq = sq, c.skv = skv;
        expectCase(c);
      }
}

TEST(MaterializedShawGrad, BatchRowsHalfInputsAndAShapeClass) {
  for (bool key : {true, false}) {
    TermCase c;
    c.key = key;
    c.batch = key ? 2 : 1;
    expectCase(c);
    c.dtype = DType::BF16;
    c.d = 24;
    expectCase(c);
    c.dtype = DType::F32;
    c.d = 32;
    c.shapeClass = true;
    for (auto [sq, skv] : {std::pair<int64_t, int64_t>{5, 9}, {90, 17}}) {
      c.sq = sq, c.skv = skv;
      expectCase(c);
    }
  }
}

TEST(MaterializedShawGrad, BitwiseIdenticalAcrossThreadCounts) {
  for (bool key : {true, false}) {
    TermCase c;
    c.key = key;
    c.sq = 150, c.skv = 170;
    RuntimeOptions options;
    options.threads = 1;
    Runtime single(options);
    options.threads = 2;
    Runtime pair(options);
    const std::mt19937 saved = rng(nullptr);
    TermRun one = runCase(c, single);
    ASSERT_EQ(one.error, "");
    rng(nullptr) = saved;
    TermRun two = runCase(c, pair);
    ASSERT_EQ(two.error, "");
    EXPECT_EQ(std::memcmp(one.dtable.data(), two.dtable.data(), one.dtable.size() * 4), 0);
    EXPECT_EQ(one.dq, two.dq);
  }
}

// Every input read-only and every output ending right before an
// inaccessible page: the kernels touch nothing past them (bf16, d = 24:
// rows that end mid-cache-line).
TEST(MaterializedShawGrad, StaysWithinEveryTensorAgainstGuardPages) {
  const int64_t h = 2, sq = 19, skv = 23, d = 24;
  DType dtype = DType::BF16;
  for (bool key : {true, false}) {
    TermCase c;
    c.key = key, c.heads = h, c.sq = sq, c.skv = skv, c.d = d, c.dtype = dtype;
    c.perHead = true;
    Expected<Spec> forward = Spec::fromText(source(c));
    ASSERT_TRUE(forward) << forward.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*forward);
    ASSERT_TRUE(kernel) << kernel.error();
    std::vector<int64_t> tShape = tableShape(c);
    auto [table, tableRef] = randomInput(tShape, dtype);
    GuardedBuffer t(table.bytes.size()), dtable(tableRef.data.size() * 4);
    std::memcpy(t.data(), table.bytes.data(), table.bytes.size());
    t.protectReadOnly();
    TensorView tableGrad{dtable.data(), DType::F32, tShape, {}};
    if (key) {
      std::vector<int64_t> qShape = {1, h, sq, d};
      auto [q, qRef] = randomInput(qShape, dtype);
      auto [de, deRef] = randomInput({1, h, sq, skv}, dtype);
      GuardedBuffer qb(q.bytes.size()), eb(de.bytes.size()), dqb(q.bytes.size());
      std::memcpy(qb.data(), q.bytes.data(), q.bytes.size());
      std::memcpy(eb.data(), de.bytes.data(), de.bytes.size());
      qb.protectReadOnly();
      eb.protectReadOnly();
      Status status = kernel->runBackward({{qb.data(), dtype, qShape, {}},
                                           {t.data(), dtype, tShape, {}},
                                           {eb.data(), dtype, deRef.shape, {}}},
                                          {{dqb.data(), dtype, qShape, {}}, tableGrad});
      ASSERT_TRUE(status) << status.message();
      ref::RelativeKeyTermGradients want = ref::relativeKeyTermBackward(
          qRef, tableRef, kClip, ref::RelativeDistance{sq, skv}, deRef);
      npy::Array dq{npy::DType::BF16, qShape,
                    std::vector<uint8_t>(dqb.as<uint8_t>(), dqb.as<uint8_t>() + q.bytes.size())};
      EXPECT_LE(maxRelativeError(npy::toFloat32(dq), want.dq), 1e-2);
      std::vector<float> got(dtable.as<float>(), dtable.as<float>() + tableRef.data.size());
      EXPECT_LE(maxRelativeError(got, want.dKeyTable), 1e-2);
    } else {
      std::vector<int64_t> rShape = {h, sq, skv, d};
      auto [dr, drRef] = randomInput(rShape, dtype);
      GuardedBuffer rb(dr.bytes.size());
      std::memcpy(rb.data(), dr.bytes.data(), dr.bytes.size());
      rb.protectReadOnly();
      Status status = kernel->runBackward(
          {{t.data(), dtype, tShape, {}}, {rb.data(), dtype, rShape, {}}}, {tableGrad});
      ASSERT_TRUE(status) << status.message();
      std::vector<float> got(dtable.as<float>(), dtable.as<float>() + tableRef.data.size());
      EXPECT_LE(maxRelativeError(got, ref::relativeValueTableGradient(drRef, kClip, sq, skv)),
                1e-2);
    }
  }
}

TEST(MaterializedShawGrad, AGradientOfTheWrongShapeIsAnErrorNamingIt) {
  TermCase c;
  c.key = false;
  Expected<Spec> forward = Spec::fromText(source(c));
  ASSERT_TRUE(forward) << forward.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*forward);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> table(kBuckets * 32), dr(20 * 25 * 32), out(kBuckets * 32, 7.0f);
  Status status = kernel->runBackward(
      {{table.data(), DType::F32, {kBuckets, 32}, {}}, {dr.data(), DType::F32, {20, 25, 32}, {}}},
      {{out.data(), DType::F32, {kBuckets, 32}, {}}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("output_grad"), std::string::npos) << status.message();
  EXPECT_EQ(out[0], 7.0f); // nothing written
  // The forward's run is not the backward's: an error that says which.
  Status run = kernel->run({{table.data(), DType::F32, {kBuckets, 32}, {}}},
                           {out.data(), DType::F32, {kBuckets, 32}, {}});
  ASSERT_FALSE(run);
  EXPECT_NE(run.message().find("runBackward"), std::string::npos) << run.message();
}

} // namespace
} // namespace pejit::testing
