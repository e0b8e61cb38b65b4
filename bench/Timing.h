// Timing helpers shared by the benchmarks: medians over repeats, and the
// FMA peak sampled between a kernel's runs.
#ifndef PEJIT_BENCH_TIMING_H
#define PEJIT_BENCH_TIMING_H

#include "bench/PeakFma.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

using Clock = std::chrono::steady_clock;

inline double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// The value of a `--repeats=N` argument (at least 1), else `fallback`.
inline int repeatsOption(int argc, char **argv, int fallback) {
  int repeats = fallback;
  for (int i = 0; i < argc; ++i)
    if (std::string(argv[i]).rfind("--repeats=", 0) == 0)
      repeats = std::max(1, std::atoi(argv[i] + 10));
  return repeats;
}

/// Worker threads of a benchmark: every core.
inline int benchThreads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

inline double medianMs(int repeats, const std::function<void()> &body) {
  body(); // warm-up
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    body();
    times.push_back(ms(start, Clock::now()));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Median kernel time and the median FMA peak sampled between its runs:
/// this VM's speed swings by up to 2x between phases, and a peak taken in
/// another phase than the kernel would make the fraction meaningless.
struct Interleaved {
  double kernelMs = 0, peakGflops = 0;
  double bestMs = 0; // the fastest run: what the kernel does in a quiet phase
};

inline Interleaved medianWithPeak(int repeats, int threads, const std::function<void()> &body) {
  body(); // warm-up
  std::vector<double> times, peaks;
  for (int r = 0; r < repeats; ++r) {
    peaks.push_back(measurePeakFmaGflops(threads, detectFmaIsa(), 1, 0.05));
    auto start = Clock::now();
    body();
    times.push_back(ms(start, Clock::now()));
  }
  std::sort(times.begin(), times.end());
  std::sort(peaks.begin(), peaks.end());
  return {times[times.size() / 2], peaks[peaks.size() / 2], times.front()};
}

} // namespace pejit::bench

#endif // PEJIT_BENCH_TIMING_H
