// `pejit bench --varlen`: a packed batch of 8 sequences of mixed lengths
// summing to 4096 (docs/shape-classes.md, segments), LLaMA-style: 32 query
// heads on 8 KV heads, d = 128, causal, RoPE theta 500000 on Q and K, f32.
// Three ways pejit can run it, all through `?`-length kernels:
//
// - packed: one call of the segments kernel (one pool round trip per
//   phase for all 8 sequences);
// - a loop: 8 calls of the plain `?` kernel, each on its sequence's rows
//   (strided views into the packed buffers);
// - padded: one call at b = 8, every sequence padded to the longest (the
//   real rows' outputs are the same: the padding sits after them).
//
// Reported: compiles and compile ms of the packed kernel, the median time
// of each way, GFLOP/s of the useful work (causal, sum over sequences of
// 4 hq d len (len + 1) / 2) and its fraction of this machine's FMA peak,
// and the packed output against the loop's (max |diff|).
//
// Then a chat server's decode step: 16 users, one query row each over a
// pre-rotated cache of its own length (RoPE on Q only), packed in one call,
// over a padded cache with key_lengths, over a paged cache (shuffled pages,
// gathered; pages in order, read in place), and as 16 calls; each against
// reading K and V once at this machine's measured read bandwidth.
#include "bench/AttentionBench.h"
#include "bench/Bandwidth.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kDim = 128;
const std::vector<int64_t> kLengths = {640, 128, 1024, 320, 768, 256, 512, 448};

AttentionSpec llamaSpec(bool packed) {
  AttentionSpec spec;
  ref::RopeConfig rope;
  rope.theta = 500000.0;
  spec.rope = rope;
  spec.causal = true;
  spec.packed = packed;
  return spec;
}

/// [1, h, total, d] packed rows.
std::vector<float> randomRows(int64_t heads, int64_t total, std::mt19937 &engine) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> rows(heads * total * kDim);
  for (float &x : rows)
    x = dist(engine);
  return rows;
}

/// The decode step of 16 users at their own cache lengths, five ways: packed
/// (segments), a cache padded to 4096 with key_lengths, a paged cache
/// (pages of 16, key_lengths) shuffled and in order, and one call per user.
int batchedDecode(int threads, int repeats) {
  const std::vector<int64_t> keys = {3000, 150,  1200, 40,   2200, 700, 90,   4096,
                                     512,  1800, 260,  3500, 60,   950, 2600, 1};
  const int64_t users = static_cast<int64_t>(keys.size()), capacity = 4096, pageSize = 16,
                maxPages = capacity / pageSize;
  std::vector<int32_t> cuQ{0}, cuK{0}, lengths(keys.begin(), keys.end());
  for (int64_t n : keys) {
    cuQ.push_back(cuQ.back() + 1);
    cuK.push_back(cuK.back() + static_cast<int32_t>(n));
  }
  const int64_t totalK = cuK.back();
  double bandwidth = measureReadBandwidthGBs(threads);
  double readMs = 2.0 * kKvHeads * totalK * kDim * 4 / (bandwidth * 1e9) * 1e3;
  std::mt19937 engine(9);
  std::vector<float> q = randomRows(kHeads, users, engine),
                     k = randomRows(kKvHeads, totalK, engine),
                     v = randomRows(kKvHeads, totalK, engine);
  // The same keys in a padded cache [users, hkv, 4096, d] and in shuffled
  // pages [num_pages, 16, hkv, d] with a block table [users, 256].
  std::vector<float> padK(users * kKvHeads * capacity * kDim), padV(padK.size());
  int64_t numPages = 0;
  for (int64_t n : keys)
    numPages += (n + pageSize - 1) / pageSize;
  // Two page orders: shuffled (gathered), and each user's pages in a row
  // (read in place).
  std::vector<int32_t> order(numPages), table(users * maxPages, 0), inOrder(table);
  for (int64_t i = 0; i < numPages; ++i)
    order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), engine);
  std::vector<float> pageK(numPages * pageSize * kKvHeads * kDim), pageV(pageK.size()),
      seqK(pageK.size()), seqV(pageK.size());
  for (int64_t n = 0, next = 0; n < users; ++n)
    for (int64_t j = 0; j < keys[n]; ++j) {
      if (j % pageSize == 0) {
        inOrder[n * maxPages + j / pageSize] = static_cast<int32_t>(next);
        table[n * maxPages + j / pageSize] = order[next++];
      }
      int64_t page = table[n * maxPages + j / pageSize];
      int64_t seqPage = inOrder[n * maxPages + j / pageSize];
      for (int64_t h = 0; h < kKvHeads; ++h)
        for (int64_t c = 0; c < kDim; ++c) {
          int64_t from = (h * totalK + cuK[n] + j) * kDim + c;
          int64_t padded = ((n * kKvHeads + h) * capacity + j) * kDim + c;
          int64_t paged = ((page * pageSize + j % pageSize) * kKvHeads + h) * kDim + c;
          int64_t sequential = ((seqPage * pageSize + j % pageSize) * kKvHeads + h) * kDim + c;
          padK[padded] = pageK[paged] = seqK[sequential] = k[from];
          padV[padded] = pageV[paged] = seqV[sequential] = v[from];
        }
    }

  Runtime runtime({threads});
  Shape packedClass{1, kHeads, kKvHeads, kDynamicDim, kDynamicDim, kDim, kDim};
  Shape rowsClass{kDynamicDim, kHeads, kKvHeads, kDynamicDim, kDynamicDim, kDim, kDim};
  AttentionSpec packedSpec = llamaSpec(true), plainSpec = llamaSpec(false);
  packedSpec.ropeOnKey = plainSpec.ropeOnKey = false; // a pre-rotated cache
  AttentionSpec lengthsSpec = plainSpec, pagedSpec = plainSpec;
  lengthsSpec.keyLengths = pagedSpec.keyLengths = true;
  pagedSpec.pageSize = pageSize;
  Expected<X86Kernel> packed = runtime.getX86(Spec::fromBuilder(packedSpec, packedClass));
  Expected<X86Kernel> plain = runtime.getX86(Spec::fromBuilder(plainSpec, packedClass));
  Expected<X86Kernel> withLengths = runtime.getX86(Spec::fromBuilder(lengthsSpec, rowsClass));
  Expected<X86Kernel> paged = runtime.getX86(Spec::fromBuilder(pagedSpec, rowsClass));
  for (const Expected<X86Kernel> *kernel : {&packed, &plain, &withLengths, &paged})
    if (!*kernel) {
      std::fprintf(stderr, "batched decode: %s\n", kernel->error().c_str());
      return 1;
    }
  auto view = [](float *data, int64_t heads, int64_t total, int64_t first, int64_t len) {
    return TensorView{data + first * kDim,
                      DType::F32,
                      {1, heads, len, kDim},
                      {heads * total * kDim, total * kDim, kDim, 1}};
  };
  // Outputs [1, hq, users, d] (packed, loop) and [users, hq, 1, d] (rows).
  std::vector<std::vector<float>> outs(5, std::vector<float>(q.size()));
  TensorView rowsQ{q.data(), DType::F32, {users, kHeads, 1, kDim}, {kDim, users * kDim, kDim, 1}};
  auto rowsOut = [&](int i) {
    return TensorView{
        outs[i].data(), DType::F32, {users, kHeads, 1, kDim}, {kDim, users * kDim, kDim, 1}};
  };
  auto check = [](const Status &st, const char *what) {
    if (!st)
      std::fprintf(stderr, "batched decode %s: %s\n", what, st.message().c_str());
  };
  std::vector<std::pair<const char *, std::function<void()>>> ways = {
      {"packed (segments), one call",
       [&] {
         check(packed->run({view(q.data(), kHeads, users, 0, users),
                            view(k.data(), kKvHeads, totalK, 0, totalK),
                            view(v.data(), kKvHeads, totalK, 0, totalK),
                            {cuQ.data(), DType::I32, {users + 1}, {}},
                            {cuK.data(), DType::I32, {users + 1}, {}}},
                           view(outs[0].data(), kHeads, users, 0, users)),
               "packed");
       }},
      {"padded cache [16, 8, 4096, 128] + key_lengths, one call",
       [&] {
         check(withLengths->run({rowsQ,
                                 {padK.data(), DType::F32, {users, kKvHeads, capacity, kDim}, {}},
                                 {padV.data(), DType::F32, {users, kKvHeads, capacity, kDim}, {}},
                                 {lengths.data(), DType::I32, {users}, {}}},
                                rowsOut(1)),
               "key_lengths");
       }},
      {"paged (pages of 16, shuffled) + key_lengths, one call",
       [&] {
         check(paged->run({rowsQ,
                           {pageK.data(), DType::F32, {numPages, pageSize, kKvHeads, kDim}, {}},
                           {pageV.data(), DType::F32, {numPages, pageSize, kKvHeads, kDim}, {}},
                           {table.data(), DType::I32, {users, maxPages}, {}},
                           {lengths.data(), DType::I32, {users}, {}}},
                          rowsOut(2)),
               "paged");
       }},
      {"paged, each user's pages in order (read in place) + key_lengths, one call",
       [&] {
         check(paged->run({rowsQ,
                           {seqK.data(), DType::F32, {numPages, pageSize, kKvHeads, kDim}, {}},
                           {seqV.data(), DType::F32, {numPages, pageSize, kKvHeads, kDim}, {}},
                           {inOrder.data(), DType::I32, {users, maxPages}, {}},
                           {lengths.data(), DType::I32, {users}, {}}},
                          rowsOut(3)),
               "paged in order");
       }},
      {"16 calls, one per user", [&] {
         for (int64_t n = 0; n < users; ++n)
           check(plain->run({view(q.data(), kHeads, users, n, 1),
                             view(k.data(), kKvHeads, totalK, cuK[n], keys[n]),
                             view(v.data(), kKvHeads, totalK, cuK[n], keys[n])},
                            view(outs[4].data(), kHeads, users, n, 1)),
                 "loop");
       }}};
  std::vector<std::vector<double>> times(ways.size());
  for (int round = 0; round < 3; ++round)
    for (size_t w = 0; w < ways.size(); ++w)
      times[w].push_back(medianMs(repeats * 4, ways[w].second));
  double diff = 0;
  for (size_t w = 1; w < ways.size(); ++w)
    for (size_t i = 0; i < q.size(); ++i)
      diff = std::max(diff, static_cast<double>(std::fabs(outs[w][i] - outs[0][i])));
  std::printf("### Batched decode: 16 users, one query row each, %lld keys in all (1 .. 4096 "
              "each), pre-rotated K (RoPE on Q only), hq=32 hkv=8 d=128 f32\n\n"
              "Read bandwidth %.1f GB/s: K and V read once, %.3f ms. Every way against the "
              "packed one: max |diff| %.2g.\n\n"
              "| pejit way | median ms (rounds' min .. max) | step / read |\n"
              "| --- | --- | ---: |\n",
              (long long)totalK, bandwidth, readMs, diff);
  for (size_t w = 0; w < ways.size(); ++w) {
    std::sort(times[w].begin(), times[w].end());
    std::printf("| %s | %.3f (%.3f .. %.3f) | %.2f |\n", ways[w].first, times[w][1], times[w][0],
                times[w][2], times[w][1] / readMs);
  }
  std::printf("\n");
  return 0;
}

} // namespace

int runVarlenBench(int argc, char **argv) {
  const int repeats = repeatsOption(argc, argv, 7);
  const int threads = benchThreads();
  std::vector<int32_t> cu{0};
  int64_t longest = 0;
  double usefulFlops = 0;
  std::string lengths;
  for (int64_t len : kLengths) {
    cu.push_back(cu.back() + static_cast<int32_t>(len));
    longest = std::max(longest, len);
    usefulFlops += 4.0 * kHeads * kDim * len * (len + 1) / 2.0;
    lengths += (lengths.empty() ? "" : ", ") + std::to_string(len);
  }
  const int64_t total = cu.back();
  std::printf("pejit bench --varlen: %d threads, FMA peak %.1f GFLOP/s at start\n\n", threads,
              measurePeakFmaGflops(threads));
  std::printf("### Varlen prefill: 8 sequences (%s) = %lld tokens, hq=32 hkv=8 d=128, causal, "
              "RoPE on Q and K, f32\n\n",
              lengths.c_str(), (long long)total);

  std::mt19937 engine(7);
  std::vector<float> q = randomRows(kHeads, total, engine), k = randomRows(kKvHeads, total, engine),
                     v = randomRows(kKvHeads, total, engine);
  std::vector<float> packedOut(q.size()), loopOut(q.size());
  Runtime runtime({threads});
  Shape cls{1, kHeads, kKvHeads, kDynamicDim, kDynamicDim, kDim, kDim};
  Expected<X86Kernel> packed = runtime.getX86(Spec::fromBuilder(llamaSpec(true), cls));
  if (!packed) {
    std::fprintf(stderr, "varlen: %s\n", packed.error().c_str());
    return 1;
  }
  double compileMs = packed->compileMilliseconds();
  RuntimeStats afterPacked = runtime.stats();
  Expected<X86Kernel> plain = runtime.getX86(Spec::fromBuilder(llamaSpec(false), cls));
  Shape paddedClass = cls;
  paddedClass.batch = static_cast<int64_t>(kLengths.size());
  Expected<X86Kernel> padded = runtime.getX86(Spec::fromBuilder(llamaSpec(false), paddedClass));
  if (!plain || !padded) {
    std::fprintf(stderr, "varlen: %s\n", (!plain ? plain : padded).error().c_str());
    return 1;
  }

  auto runPacked = [&] {
    Status st = packed->run({{q.data(), DType::F32, {1, kHeads, total, kDim}, {}},
                             {k.data(), DType::F32, {1, kKvHeads, total, kDim}, {}},
                             {v.data(), DType::F32, {1, kKvHeads, total, kDim}, {}},
                             {cu.data(), DType::I32, {static_cast<int64_t>(cu.size())}, {}},
                             {cu.data(), DType::I32, {static_cast<int64_t>(cu.size())}, {}}},
                            {packedOut.data(), DType::F32, {1, kHeads, total, kDim}, {}});
    if (!st)
      std::fprintf(stderr, "varlen packed: %s\n", st.message().c_str());
  };
  // One sequence's rows of a [1, h, total, d] buffer: a strided view.
  auto rows = [&](float *data, int64_t heads, size_t n) {
    int64_t len = cu[n + 1] - cu[n];
    return TensorView{data + cu[n] * kDim,
                      DType::F32,
                      {1, heads, len, kDim},
                      {heads * total * kDim, total * kDim, kDim, 1}};
  };
  auto runLoop = [&] {
    for (size_t n = 0; n < kLengths.size(); ++n) {
      Status st = plain->run(
          {rows(q.data(), kHeads, n), rows(k.data(), kKvHeads, n), rows(v.data(), kKvHeads, n)},
          rows(loopOut.data(), kHeads, n));
      if (!st)
        std::fprintf(stderr, "varlen loop: %s\n", st.message().c_str());
    }
  };
  // Padded: b = 8 at the longest length.
  const int64_t batch = static_cast<int64_t>(kLengths.size());
  std::vector<float> pq(batch * kHeads * longest * kDim), pk(batch * kKvHeads * longest * kDim),
      pv(pk.size()), po(pq.size());
  for (int64_t n = 0; n < batch; ++n)
    for (auto [src, dst, heads] :
         {std::tuple<const float *, float *, int64_t>{q.data(), pq.data(), kHeads},
          {k.data(), pk.data(), kKvHeads},
          {v.data(), pv.data(), kKvHeads}})
      for (int64_t h = 0; h < heads; ++h)
        std::copy(src + (h * total + cu[n]) * kDim, src + (h * total + cu[n + 1]) * kDim,
                  dst + ((n * heads + h) * longest) * kDim);
  auto runPadded = [&] {
    Status st = padded->run({{pq.data(), DType::F32, {batch, kHeads, longest, kDim}, {}},
                             {pk.data(), DType::F32, {batch, kKvHeads, longest, kDim}, {}},
                             {pv.data(), DType::F32, {batch, kKvHeads, longest, kDim}, {}}},
                            {po.data(), DType::F32, {batch, kHeads, longest, kDim}, {}});
    if (!st)
      std::fprintf(stderr, "varlen padded: %s\n", st.message().c_str());
  };

  // Rounds alternate the three ways (this VM drifts between phases).
  std::vector<double> packedMs, loopMs, paddedMs;
  double peak = 0;
  for (int round = 0; round < 3; ++round) {
    packedMs.push_back(medianMs(repeats, runPacked));
    loopMs.push_back(medianMs(repeats, runLoop));
    paddedMs.push_back(medianMs(repeats, runPadded));
    peak = std::max(peak, measurePeakFmaGflops(threads));
  }
  double diff = 0;
  for (size_t i = 0; i < packedOut.size(); ++i)
    diff = std::max(diff, static_cast<double>(std::fabs(packedOut[i] - loopOut[i])));
  auto medianOf = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  };
  std::printf(
      "Packed kernel: %lld compiled (%lld loaded from disk), %.0f ms. Packed output "
      "against the loop's: max |diff| %.2g. FMA peak (best of the rounds) %.1f GFLOP/s.\n\n",
      (long long)afterPacked.compiles, (long long)afterPacked.diskHits, compileMs, diff, peak);
  std::printf("| pejit way | median ms (per round) | useful GFLOP/s | of FMA peak |\n"
              "| --- | --- | ---: | ---: |\n");
  for (auto [name, times] :
       {std::pair<const char *, std::vector<double> *>{"packed (segments), one call", &packedMs},
        {"8 calls, one per sequence", &loopMs},
        {"padded to b=8 x 1024, one call", &paddedMs}}) {
    double t = medianOf(*times);
    char perRound[64];
    std::snprintf(perRound, sizeof perRound, "%.2f, %.2f, %.2f", (*times)[0], (*times)[1],
                  (*times)[2]);
    double gflops = usefulFlops / (t * 1e6);
    std::printf("| %s | %.2f (%s) | %.1f | %.1f%% |\n", name, t, perRound, gflops,
                100.0 * gflops / peak);
  }
  std::printf("\n");
  return batchedDecode(threads, repeats);
}

} // namespace pejit::bench
