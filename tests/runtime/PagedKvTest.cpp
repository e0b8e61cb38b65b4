// A paged KV cache (attn.paged_kv, docs/shape-classes.md): K and V live in
// pages [num_pages, page_size, hkv, d] in shuffled order, each batch row's
// pages listed in a block table, with per-row key lengths spanning partial
// pages. Every page the rows do not own, and every row past a length, is
// NaN: a read of the wrong page or row poisons the output. Each row is
// checked against the float64 reference of that row run alone over its
// logical K and V (f32: max |out - ref| <= 1e-4 max |ref|), with fresh
// random inputs and the output poisoned. Page sizes 16 and 64, decode rows
// and chunks, RoPE on Q only (a pre-rotated cache) and on both (rotated at
// read time), ALiBi; one compile per page size; bad table entries are
// errors naming the row and the index.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <numeric>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr int64_t kHeads = 8, kKvHeads = 2, kDim = 64, kMaxPages = 20;

/// A logical K or V [b, hkv, max_pages * page_size, d] scattered into
/// shuffled pages; the rest of the pool NaN.
struct Pool {
  std::vector<float> pages; ///< [num_pages, page_size, hkv, d]
  int64_t numPages = 0;
};

Pool scatter(const ref::Tensor &logical, const std::vector<int32_t> &table, int64_t pageSize,
             const std::vector<int64_t> &lengths, int64_t numPages) {
  Pool pool;
  pool.numPages = numPages;
  int64_t b = logical.dim(0), h = logical.dim(1), d = logical.dim(3);
  pool.pages.assign(numPages * pageSize * h * d, std::numeric_limits<float>::quiet_NaN());
  for (int64_t n = 0; n < b; ++n)
    for (int64_t j = 0; j < lengths[n]; ++j) {
      int64_t page = table[n * kMaxPages + j / pageSize], r = j % pageSize;
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t c = 0; c < d; ++c)
          pool.pages[((page * pageSize + r) * h + hh) * d + c] =
              static_cast<float>(logical.at(n, hh, j, c));
    }
  return pool;
}

/// Runs rows of `lengths` over a paged cache of `pageSize` and returns
/// max |out - ref| / max |ref|.
double runPaged(const AttentionSpec &spec, int64_t pageSize, const std::vector<int64_t> &lengths,
                int64_t sq, std::string &error, bool consecutiveEvenRows = false) {
  std::mt19937 &engine = rng(nullptr);
  int64_t b = static_cast<int64_t>(lengths.size()), capacity = kMaxPages * pageSize;
  ref::Tensor q = randomTensor({b, kHeads, sq, kDim}, engine);
  ref::Tensor k = randomTensor({b, kKvHeads, capacity, kDim}, engine);
  ref::Tensor v = randomTensor({b, kKvHeads, capacity, kDim}, engine);
  // Shuffled pages, 5 more than the rows own; entries a row does not read
  // point past the pool.
  int64_t numPages = b * kMaxPages + 5;
  std::vector<int32_t> order(numPages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), engine);
  // Even rows' pages consecutive (read in place, no gather), odd rows'
  // shuffled: the pages n * max_pages .. are the even row's own.
  if (consecutiveEvenRows) {
    std::iota(order.begin(), order.end(), 0);
    for (int64_t n = 1; n < b; n += 2)
      std::shuffle(order.begin() + n * kMaxPages, order.begin() + (n + 1) * kMaxPages, engine);
  }
  std::vector<int32_t> table(b * kMaxPages);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < kMaxPages; ++i)
      table[n * kMaxPages + i] = i * pageSize < lengths[n] ? order[n * kMaxPages + i]
                                                           : static_cast<int32_t>(numPages + 1000);
  Pool kPool = scatter(k, table, pageSize, lengths, numPages);
  Pool vPool = scatter(v, table, pageSize, lengths, numPages);

  AttentionSpec kernelSpec = spec;
  kernelSpec.keyLengths = true;
  kernelSpec.pageSize = pageSize;
  Shape cls{kDynamicDim, kHeads, kKvHeads, kDynamicDim, kDynamicDim, kDim, kDim};
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(kernelSpec, cls));
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  std::vector<float> qf = toFloat(q);
  std::vector<int32_t> lens(lengths.begin(), lengths.end());
  std::vector<TensorView> inputs = {
      {qf.data(), DType::F32, q.shape, {}},
      {kPool.pages.data(), DType::F32, {numPages, pageSize, kKvHeads, kDim}, {}},
      {vPool.pages.data(), DType::F32, {numPages, pageSize, kKvHeads, kDim}, {}},
      {table.data(), DType::I32, {b, kMaxPages}, {}},
      {lens.data(), DType::I32, {b}, {}}};
  std::vector<float> out(b * kHeads * sq * kDim, std::numeric_limits<float>::quiet_NaN());
  if (Status st = kernel->run(inputs, {out.data(), DType::F32, {b, kHeads, sq, kDim}, {}}); !st) {
    error = st.message();
    return 0;
  }
  double maxRef = 0, maxErr = 0;
  for (int64_t n = 0; n < b; ++n) {
    ref::Tensor expected({1, kHeads, sq, kDim});
    if (lengths[n] > 0) {
      Case c;
      c.spec = spec;
      c.shape = {1, kHeads, kKvHeads, sq, lengths[n], kDim, kDim};
      expected = referenceOutput(c, rowPrefix(q, n, sq), rowPrefix(k, n, lengths[n]),
                                 rowPrefix(v, n, lengths[n]), {}, {}, {}, error);
      if (!error.empty())
        return 0;
    }
    for (size_t i = 0; i < expected.data.size(); ++i) {
      float got = out[n * kHeads * sq * kDim + i];
      maxRef = std::max(maxRef, std::fabs(expected.data[i]));
      maxErr = std::max(maxErr, std::isnan(got) ? INFINITY : std::fabs(got - expected.data[i]));
    }
  }
  return maxErr / std::max(maxRef, 1e-30);
}

void expectPagedMatch(const AttentionSpec &spec) {
  for (int64_t pageSize : {16, 64}) {
    int64_t compilesBefore = suiteRuntime().stats().compiles;
    for (int64_t sq : {1, 5})
      for (const std::vector<int64_t> &lengths :
           {std::vector<int64_t>{1, 37, 300}, {pageSize, 0, pageSize + 1, 17}, {250}}) {
        SCOPED_TRACE("page size " + std::to_string(pageSize) + ", sq " + std::to_string(sq) + ", " +
                     std::to_string(lengths.size()) + " rows, first " + std::to_string(lengths[0]));
        std::string error;
        double relative = runPaged(spec, pageSize, lengths, sq, error);
        ASSERT_EQ(error, "");
        EXPECT_LE(relative, 1e-4);
      }
    EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1) << "one class per page size";
  }
}

TEST(PagedKv, PlainAndCausalRows) {
  AttentionSpec spec;
  spec.causal = true;
  expectPagedMatch(spec);
}

TEST(PagedKv, RopeOnAPreRotatedCacheAndAtReadTime) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  spec.ropeOnKey = false;
  expectPagedMatch(spec);
  spec.ropeOnKey = true;
  expectPagedMatch(spec);
}

TEST(PagedKv, AlibiRows) {
  AttentionSpec spec;
  spec.encodings.push_back(encodings::alibi(kHeads, 0, /*symmetric=*/false));
  spec.causal = true;
  expectPagedMatch(spec);
}

// Rows whose pages are consecutive are read in place (a strided view of
// the pools), the others gathered: the same results either way.
TEST(PagedKv, ConsecutivePagesMatchToo) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  for (int64_t sq : {1, 5}) {
    std::string error;
    double relative = runPaged(spec, 16, {300, 37, 1, 250}, sq, error, /*consecutive=*/true);
    ASSERT_EQ(error, "");
    EXPECT_LE(relative, 1e-4);
  }
}

// A table entry a row reads must name a page of the pool: the error names
// the row and the index; an entry past the row's length is never read.
TEST(PagedKv, BadTableEntriesAreErrorsNamingRowAndIndex) {
  AttentionSpec spec;
  spec.keyLengths = true;
  spec.pageSize = 16;
  Shape cls{kDynamicDim, 2, 2, kDynamicDim, kDynamicDim, kDim, kDim};
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(spec, cls));
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->arguments(), (std::vector<std::string>{"query", "key_pages", "value_pages",
                                                           "block_table", "key_lengths"}));
  std::vector<float> q(2 * 2 * kDim, 1.0f), pages(4 * 16 * 2 * kDim, 1.0f), out(q.size());
  auto runWith = [&](std::vector<int32_t> table, std::vector<int32_t> lens) {
    Status st = kernel->run({{q.data(), DType::F32, {2, 2, 1, kDim}, {}},
                             {pages.data(), DType::F32, {4, 16, 2, kDim}, {}},
                             {pages.data(), DType::F32, {4, 16, 2, kDim}, {}},
                             {table.data(), DType::I32, {2, 2}, {}},
                             {lens.data(), DType::I32, {2}, {}}},
                            {out.data(), DType::F32, {2, 2, 1, kDim}, {}});
    return st ? std::string("ok") : st.message();
  };
  EXPECT_EQ(runWith({0, 1, 2, 99}, {32, 16}), "ok"); // entry [1, 1] is not read
  auto expectError = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  expectError(runWith({0, 1, 2, 99}, {32, 17}), "block_table: entry [1, 1] is 99, outside [0, "
                                                "num_pages = 4)");
  expectError(runWith({-1, 1, 2, 3}, {1, 1}), "block_table: entry [0, 0] is -1");
  expectError(runWith({0, 1, 2, 3}, {33, 1}), "key_lengths: entry 0 is 33, outside [0, skv = 32]");
}

// The interpreter gathers pages per row as the kernel does.
TEST(PagedKv, InterpreterAgreesWithTheKernel) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  spec.keyLengths = true;
  spec.pageSize = 16;
  std::mt19937 &engine = rng(nullptr);
  Shape cls{kDynamicDim, kHeads, kKvHeads, kDynamicDim, kDynamicDim, kDim, kDim};
  std::string source = Spec::fromBuilder(spec, cls).source();
  ref::Tensor q = randomTensor({2, kHeads, 3, kDim}, engine);
  ref::Tensor pages = randomTensor({6, 16, kKvHeads, kDim}, engine);
  ref::PositionIds table({2, 3}, {4, 1, 0, 2, 5, 3});
  ref::PositionIds lens = ref::PositionIds::shared({40, 20});
  Expected<ref::Tensor> want = interpretReference(source, {q, pages, pages, table, lens});
  ASSERT_TRUE(want) << want.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(spec, cls));
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> qf = toFloat(q), pf = toFloat(pages), out(2 * kHeads * 3 * kDim, NAN);
  std::vector<int32_t> t(table.data.begin(), table.data.end()), l{40, 20};
  ASSERT_TRUE(kernel->run({{qf.data(), DType::F32, q.shape, {}},
                           {pf.data(), DType::F32, pages.shape, {}},
                           {pf.data(), DType::F32, pages.shape, {}},
                           {t.data(), DType::I32, {2, 3}, {}},
                           {l.data(), DType::I32, {2}, {}}},
                          {out.data(), DType::F32, {2, kHeads, 3, kDim}, {}}));
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(want->data[i]));
    maxErr = std::max(maxErr, std::isnan(out[i]) ? INFINITY : std::fabs(out[i] - want->data[i]));
  }
  EXPECT_LE(maxErr / maxRef, 1e-4);
  // A bad entry the row reads: the interpreter names it too.
  Expected<ref::Tensor> bad = interpretReference(
      source, {q, pages, pages, ref::PositionIds({2, 3}, {4, 1, 0, 2, 9, 3}), lens});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("block_table entry [1, 1] is 9, outside [0, num_pages = 6)"),
            std::string::npos)
      << bad.error();
}

} // namespace
