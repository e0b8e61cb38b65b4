// Autotuning the x86 template's tile sizes: compile each candidate, time it
// on random inputs of the real shape (one warm-up, median of repeats), keep
// the fastest. A candidate that fails to compile or run scores infinity and
// is reported, never fatal.
#include "pejit/runtime/Tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <thread>
#include <unistd.h>

namespace pejit {

std::vector<X86TileConfig> candidateTiles(const Shape &shape, int64_t l2Bytes) {
  auto roundUp = [](int64_t x, int64_t to) { return (x + to - 1) / to * to; };
  std::vector<X86TileConfig> tiles;
  for (int64_t m : {48, 96, 144, 192, 240})
    for (int64_t n : {48, 72, 96, 120}) {
      // One tile past the sequence is the most worth trying.
      if (m > roundUp(shape.querySeq, 48) && m != 48)
        continue;
      if (n > roundUp(shape.keySeq, 6) && n != 48)
        continue;
      int64_t floats = 2 * m * shape.headDim + m * shape.valueDim + n * m + n * shape.headDim;
      if (floats * 4 > l2Bytes)
        continue;
      tiles.push_back({m, n});
    }
  if (tiles.empty())
    tiles.push_back(Runtime::defaultX86Tiles());
  return tiles;
}

namespace {

double medianRunMs(const X86Kernel &kernel, const Shape &s, int repeats) {
  std::mt19937 engine(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> q(s.batch * s.queryHeads * s.querySeq * s.headDim);
  std::vector<float> k(s.batch * s.kvHeads * s.keySeq * s.headDim);
  std::vector<float> v(s.batch * s.kvHeads * s.keySeq * s.valueDim);
  std::vector<float> o(s.batch * s.queryHeads * s.querySeq * s.valueDim);
  for (std::vector<float> *t : {&q, &k, &v})
    for (float &x : *t)
      x = dist(engine);
  std::vector<TensorView> inputs = {
      {q.data(), DType::F32, {s.batch, s.queryHeads, s.querySeq, s.headDim}, {}},
      {k.data(), DType::F32, {s.batch, s.kvHeads, s.keySeq, s.headDim}, {}},
      {v.data(), DType::F32, {s.batch, s.kvHeads, s.keySeq, s.valueDim}, {}}};
  TensorView out{o.data(), DType::F32, {s.batch, s.queryHeads, s.querySeq, s.valueDim}, {}};
  std::vector<double> times;
  for (int r = 0; r <= repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (!kernel.run(inputs, out))
      return std::numeric_limits<double>::infinity();
    if (r > 0) // the first run is a warm-up
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void drawProgress(size_t done, size_t total, const TuneReport &report) {
  constexpr int kWidth = 24;
  int filled = static_cast<int>(kWidth * done / std::max<size_t>(total, 1));
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  std::string best = "-";
  double bestMs = std::numeric_limits<double>::infinity();
  for (const TuneCandidate &c : report.candidates)
    if (c.medianMs < bestMs) {
      bestMs = c.medianMs;
      best = std::to_string(c.tiles.queryTile) + "x" + std::to_string(c.tiles.keyTile);
    }
  std::fprintf(stderr, "\rtuning [%s] %zu/%zu  best %s", bar.c_str(), done, total, best.c_str());
  if (std::isfinite(bestMs))
    std::fprintf(stderr, " %.3f ms", bestMs);
  if (done == total)
    std::fputc('\n', stderr);
  std::fflush(stderr);
}

/// A call of the shape class `kernel` at sq and skv (b = 1 where `?`), or
/// an error when a static length of the class is another.
Expected<Shape> callAt(const Shape &kernel, int64_t sq, int64_t skv) {
  Shape s = kernel;
  if (s.batch == kDynamicDim)
    s.batch = 1;
  for (auto [dim, length] : {std::pair<int64_t *, int64_t>{&s.querySeq, sq}, {&s.keySeq, skv}}) {
    if (length < 1 || (*dim != kDynamicDim && *dim != length))
      return Expected<Shape>::error("tune: length sq=" + std::to_string(sq) +
                                    " skv=" + std::to_string(skv) +
                                    " is not a call of the shape class " + kernel.str());
    *dim = length;
  }
  return s;
}

/// A prefill at 512 and at 2048, and a decode step over 2048 keys: each
/// where the class leaves the length open (a static length stays).
std::vector<std::pair<int64_t, int64_t>> representativeLengths(const Shape &kernel) {
  auto at = [&](int64_t sq, int64_t skv) {
    int64_t q = kernel.querySeq == kDynamicDim ? sq : kernel.querySeq;
    int64_t k = kernel.keySeq == kDynamicDim ? std::max(skv, q) : kernel.keySeq;
    return std::pair<int64_t, int64_t>{q, k};
  };
  std::vector<std::pair<int64_t, int64_t>> lengths = {at(512, 512), at(2048, 2048)};
  if (kernel.querySeq == kDynamicDim)
    lengths.push_back(at(1, 2048));
  return lengths;
}

} // namespace

Expected<TuneReport> tuneCandidates(Runtime &runtime, const Spec &spec, TuneOptions &options) {
  // The shape is known once one kernel exists; the default config is one
  // of the candidates anyway.
  Expected<X86Kernel> probe = runtime.getX86(spec, Runtime::defaultX86Tiles());
  if (!probe)
    return Expected<TuneReport>::error(probe.error());
  // The call shapes to time: the kernel's own, or for a shape class the
  // given or representative lengths.
  const Shape &kernelShape = probe->shape();
  std::vector<Shape> lengths = {kernelShape};
  if (kernelShape.hasDynamicDims() || !options.lengths.empty()) {
    lengths.clear();
    for (auto [sq, skv] :
         options.lengths.empty() ? representativeLengths(kernelShape) : options.lengths) {
      Expected<Shape> call = callAt(kernelShape, sq, skv);
      if (!call)
        return Expected<TuneReport>::error(call.error());
      lengths.push_back(*call);
    }
  }
  if (options.candidates.empty()) {
    long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    // The longest call decides which tiles are worth trying.
    Shape longest = lengths.front();
    for (const Shape &call : lengths)
      if (call.querySeq * call.keySeq > longest.querySeq * longest.keySeq)
        longest = call;
    options.candidates = candidateTiles(longest, l2 > 0 ? l2 : 512 * 1024);
  }
  bool progress = options.progress && ::isatty(2);
  // Compile every candidate first, on all cores (each compile is one
  // thread); timing then runs them one at a time on the whole machine.
  size_t count = options.candidates.size();
  std::vector<std::optional<Expected<X86Kernel>>> kernels(count);
  std::atomic<size_t> next{0};
  auto compileSome = [&] {
    for (size_t i = next++; i < count; i = next++)
      kernels[i].emplace(runtime.getX86(spec, options.candidates[i]));
  };
  std::vector<std::thread> compilers;
  unsigned threads = std::max(
      1u, std::min<unsigned>(std::thread::hardware_concurrency(), static_cast<unsigned>(count)));
  for (unsigned t = 1; t < threads; ++t)
    compilers.emplace_back(compileSome);
  compileSome();
  for (std::thread &compiler : compilers)
    compiler.join();

  TuneReport report;
  report.lengths = lengths;
  double bestMs = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < count; ++i) {
    TuneCandidate candidate{options.candidates[i], std::numeric_limits<double>::infinity(), ""};
    const Expected<X86Kernel> &kernel = *kernels[i];
    if (!kernel) {
      candidate.error = kernel.error();
    } else {
      if (options.measure) {
        candidate.medianMs = options.measure(*kernel);
      } else {
        // The geometric mean over the call shapes: each length counts alike,
        // whatever its scale.
        double logSum = 0;
        for (const Shape &call : lengths)
          logSum += std::log(medianRunMs(*kernel, call, std::max(1, options.repeats)));
        candidate.medianMs = std::exp(logSum / static_cast<double>(lengths.size()));
      }
      if (!std::isfinite(candidate.medianMs))
        candidate.error = "the kernel failed to run";
    }
    if (candidate.medianMs < bestMs) {
      bestMs = candidate.medianMs;
      report.best = candidate.tiles;
    }
    report.candidates.push_back(candidate);
    if (progress)
      drawProgress(i + 1, options.candidates.size(), report);
  }
  if (!std::isfinite(bestMs))
    return Expected<TuneReport>::error("tune: every candidate failed; the first: " +
                                       report.candidates[0].error);
  return report;
}

std::string TuneReport::table() const {
  std::string text;
  if (!lengths.empty()) {
    text += "timed at";
    for (const Shape &call : lengths)
      text += " [b=" + std::to_string(call.batch) + " sq=" + std::to_string(call.querySeq) +
              " skv=" + std::to_string(call.keySeq) + "]";
    text += lengths.size() > 1 ? " (median ms: the geometric mean over them)\n" : "\n";
  }
  text += "| tiles | median ms | note |\n| --- | ---: | --- |\n";
  for (const TuneCandidate &c : candidates) {
    char row[512];
    std::string tiles = std::to_string(c.tiles.queryTile) + "x" + std::to_string(c.tiles.keyTile);
    bool isBest = c.tiles.queryTile == best.queryTile && c.tiles.keyTile == best.keyTile;
    std::string note = !c.error.empty() ? "failed: " + c.error.substr(0, c.error.find('\n'))
                                        : (isBest ? "best" : "");
    if (std::isfinite(c.medianMs))
      std::snprintf(row, sizeof(row), "| %s | %.3f | %s |\n", tiles.c_str(), c.medianMs,
                    note.c_str());
    else
      std::snprintf(row, sizeof(row), "| %s | - | %s |\n", tiles.c_str(), note.c_str());
    text += row;
  }
  return text;
}

} // namespace pejit
