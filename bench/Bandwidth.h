// This machine's memory read bandwidth, measured as a decode step reads K
// and V: every thread streams its share of a buffer much larger than the
// last-level cache once, summing it (so the loads cannot be dropped). The
// best of a few passes, in GB/s (1e9 bytes per second): the bound that a
// memory-bound kernel is reported against.
#ifndef PEJIT_BENCH_BANDWIDTH_H
#define PEJIT_BENCH_BANDWIDTH_H

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace pejit::bench {

inline double measureReadBandwidthGBs(int threads, int64_t bytes = int64_t(512) << 20,
                                      int passes = 3) {
  int64_t floats = bytes / 4;
  std::vector<float> buffer(floats, 1.0f); // touched: the pages exist before timing
  double best = 0;
  volatile float sink = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<float> sums(threads, 0.0f);
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        int64_t begin = floats * t / threads, end = floats * (t + 1) / threads;
        // 16 independent sums: the adds never wait on each other.
        float acc[16] = {};
        int64_t i = begin;
        for (; i + 16 <= end; i += 16)
          for (int l = 0; l < 16; ++l)
            acc[l] += buffer[i + l];
        for (; i < end; ++i)
          acc[0] += buffer[i];
        float total = 0;
        for (float a : acc)
          total += a;
        sums[t] = total;
      });
    for (std::thread &worker : workers)
      worker.join();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    float total = 0;
    for (float s : sums)
      total += s;
    sink = sink + total;
    best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
  }
  return best;
}

} // namespace pejit::bench

#endif // PEJIT_BENCH_BANDWIDTH_H
