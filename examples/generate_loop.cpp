// A toy 2-layer decoder, random weights, that generates 256 tokens with a KV
// cache. Every attention call is one pejit kernel: causal, GQA 8/2 heads,
// d = 64, RoPE (theta 500000) fused on Q over a pre-rotated K cache. New K
// rows are rotated once, as the KV-append kernel (a standalone pe.rope,
// docs/standalone-kernels.md) writes them into the cache: no step rotates
// the cached keys again. Both kernels have one shape class, written with
// `?` lengths (docs/shape-classes.md), so the prompt's prefill (sq = 16) and
// every decode step (sq = 1, the cache growing from 17 to 272 keys) run
// through the kernels compiled on the first call.
//
// Each step: embed the last token, then per layer x += Wo attention(RoPE(Wq
// x), K cache, V cache) with the new rows appended first (K: RoPE(Wk x),
// V: Wv x), and x += W2 relu(W1 x); the next token is the argmax of Wout x.
// The caches are [1, hkv, capacity, d] per layer; the kernels read and
// write rows of them as strided views.
//
//   generate_loop
// prints the compile count (2: one attention and one KV-append kernel,
// whatever the number of tokens), the compile time, and the median decode
// step.
#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr int64_t kVocab = 512, kModel = 512, kHeads = 8, kKvHeads = 2, kDim = 64, kHidden = 1024;
constexpr int64_t kLayers = 2, kPrompt = 16, kGenerate = 256, kCapacity = kPrompt + kGenerate;

/// y[r] = sum_c w[r, c] x[c] (w row-major [rows, cols]).
void matvec(const std::vector<float> &w, const float *x, float *y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c)
      sum += w[r * cols + c] * x[c];
    y[r] = sum;
  }
}

std::vector<float> randomMatrix(int64_t rows, int64_t cols, std::mt19937 &engine) {
  std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
  std::vector<float> w(rows * cols);
  for (float &x : w)
    x = dist(engine);
  return w;
}

struct Layer {
  std::vector<float> wq, wk, wv, wo, w1, w2;
  /// [1, hkv, capacity, d]: row t of head h at (h capacity + t) d.
  std::vector<float> keyCache, valueCache;
};

} // namespace

int main() {
  std::mt19937 engine(2026);
  std::vector<float> embedding = randomMatrix(kVocab, kModel, engine);
  std::vector<float> unembedding = randomMatrix(kVocab, kModel, engine);
  std::vector<Layer> layers(kLayers);
  for (Layer &layer : layers) {
    layer.wq = randomMatrix(kHeads * kDim, kModel, engine);
    layer.wk = randomMatrix(kKvHeads * kDim, kModel, engine);
    layer.wv = randomMatrix(kKvHeads * kDim, kModel, engine);
    layer.wo = randomMatrix(kModel, kHeads * kDim, engine);
    layer.w1 = randomMatrix(kHidden, kModel, engine);
    layer.w2 = randomMatrix(kModel, kHidden, engine);
    layer.keyCache.assign(kKvHeads * kCapacity * kDim, 0.0f);
    layer.valueCache.assign(layer.keyCache.size(), 0.0f);
  }

  // One shape class for every attention call of both layers: the lengths
  // are `?`, everything else fixed.
  pejit::AttentionSpec spec;
  pejit::ref::RopeConfig rope;
  rope.theta = 500000.0;
  spec.rope = rope;
  spec.ropeOnKey = false; // K is rotated once, by the KV-append kernel
  spec.queryPositions = true;
  spec.causal = true;
  pejit::Shape shapeClass{1, kHeads, kKvHeads, pejit::kDynamicDim, pejit::kDynamicDim, kDim, kDim};
  pejit::Spec attentionSpec = pejit::Spec::fromBuilder(spec, shapeClass);
  // The KV-append kernel: new K rows [1, hkv, rows, d] rotated at their
  // positions into the cache.
  pejit::Spec appendSpec = pejit::Spec::standaloneRope(rope, 1, kKvHeads, pejit::kDynamicDim, kDim);
  pejit::Runtime runtime;
  double compileMs = 0;
  bool firstCallDone = false;

  std::vector<int64_t> tokens(kPrompt);
  for (int64_t &token : tokens)
    token = static_cast<int64_t>(engine() % kVocab);
  std::vector<double> stepMs;
  // Step 0 runs the prompt (sq = 16 rows at once); each later step one token.
  int64_t cached = 0;
  while (static_cast<int64_t>(tokens.size()) < kPrompt + kGenerate) {
    auto start = std::chrono::steady_clock::now();
    int64_t rows = cached == 0 ? kPrompt : 1; // new tokens this step
    std::vector<float> x(rows * kModel);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t token = tokens[tokens.size() - rows + r];
      std::copy_n(embedding.begin() + token * kModel, kModel, x.begin() + r * kModel);
    }
    for (Layer &layer : layers) {
      // Q [1, hq, rows, d]; K and V rows appended at [cached, cached + rows).
      std::vector<float> q(kHeads * rows * kDim), out(q.size()), projected(kHeads * kDim);
      std::vector<float> newKeys(kKvHeads * rows * kDim);
      for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x.data() + r * kModel;
        matvec(layer.wq, xr, projected.data(), kHeads * kDim, kModel);
        for (int64_t h = 0; h < kHeads; ++h)
          std::copy_n(projected.begin() + h * kDim, kDim, q.begin() + (h * rows + r) * kDim);
        matvec(layer.wk, xr, projected.data(), kKvHeads * kDim, kModel);
        for (int64_t h = 0; h < kKvHeads; ++h)
          std::copy_n(projected.begin() + h * kDim, kDim, newKeys.begin() + (h * rows + r) * kDim);
        matvec(layer.wv, xr, projected.data(), kKvHeads * kDim, kModel);
        for (int64_t h = 0; h < kKvHeads; ++h)
          std::copy_n(projected.begin() + h * kDim, kDim,
                      layer.valueCache.begin() + (h * kCapacity + cached + r) * kDim);
      }
      // The kernel of the class: compiled on the first call, then a hit in
      // memory for every layer and step.
      pejit::Expected<pejit::X86Kernel> kernel = runtime.getX86(attentionSpec);
      if (!kernel) {
        std::fprintf(stderr, "%s\n", kernel.error().c_str());
        return 1;
      }
      pejit::Expected<pejit::X86Kernel> append = runtime.getX86(appendSpec);
      if (!append) {
        std::fprintf(stderr, "%s\n", append.error().c_str());
        return 1;
      }
      if (!firstCallDone) { // each compiled (or loaded from the disk cache) once
        compileMs = kernel->compileMilliseconds() + append->compileMilliseconds();
        firstCallDone = true;
      }
      int64_t keys = cached + rows;
      std::vector<int64_t> positions(rows);
      for (int64_t r = 0; r < rows; ++r)
        positions[r] = cached + r;
      std::vector<int64_t> cacheStrides{kKvHeads * kCapacity * kDim, kCapacity * kDim, kDim, 1};
      // The new K rows, rotated, into cache rows [cached, cached + rows).
      pejit::Status status =
          append->run({{newKeys.data(), pejit::DType::F32, {1, kKvHeads, rows, kDim}, {}},
                       {positions.data(), pejit::DType::I64, {rows}, {}}},
                      {layer.keyCache.data() + cached * kDim,
                       pejit::DType::F32,
                       {1, kKvHeads, rows, kDim},
                       cacheStrides});
      if (status)
        status = kernel->run(
            {{q.data(), pejit::DType::F32, {1, kHeads, rows, kDim}, {}},
             {layer.keyCache.data(), pejit::DType::F32, {1, kKvHeads, keys, kDim}, cacheStrides},
             {layer.valueCache.data(), pejit::DType::F32, {1, kKvHeads, keys, kDim}, cacheStrides},
             {positions.data(), pejit::DType::I64, {rows}, {}}},
            {out.data(), pejit::DType::F32, {1, kHeads, rows, kDim}, {}});
      if (!status) {
        std::fprintf(stderr, "%s\n", status.message().c_str());
        return 1;
      }
      // x += Wo concat_h(out), then x += W2 relu(W1 x), row by row.
      std::vector<float> heads(kHeads * kDim), delta(kModel), hidden(kHidden);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < kHeads; ++h)
          std::copy_n(out.begin() + (h * rows + r) * kDim, kDim, heads.begin() + h * kDim);
        float *xr = x.data() + r * kModel;
        matvec(layer.wo, heads.data(), delta.data(), kModel, kHeads * kDim);
        for (int64_t c = 0; c < kModel; ++c)
          xr[c] += delta[c];
        matvec(layer.w1, xr, hidden.data(), kHidden, kModel);
        for (float &h : hidden)
          h = std::max(h, 0.0f);
        matvec(layer.w2, hidden.data(), delta.data(), kModel, kHidden);
        for (int64_t c = 0; c < kModel; ++c)
          xr[c] += delta[c];
      }
    }
    cached += rows;
    // The next token: argmax of the logits of the last row.
    std::vector<float> logits(kVocab);
    matvec(unembedding, x.data() + (rows - 1) * kModel, logits.data(), kVocab, kModel);
    tokens.push_back(std::max_element(logits.begin(), logits.end()) - logits.begin());
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (rows == 1)
      stepMs.push_back(ms);
  }
  std::sort(stepMs.begin(), stepMs.end());
  pejit::RuntimeStats stats = runtime.stats();
  std::printf(
      "generated %lld tokens after a %lld-token prompt, %lld layers, cache up to %lld keys\n",
      (long long)kGenerate, (long long)kPrompt, (long long)kLayers, (long long)cached);
  std::printf("kernels compiled (attention + KV-append): %lld (loaded from disk: %lld), %lld "
              "calls answered "
              "from memory; compile (or load) %.1f ms\n",
              (long long)stats.compiles, (long long)stats.diskHits, (long long)stats.memoryHits,
              compileMs);
  std::printf("median decode step (both layers, whole model): %.3f ms\n",
              stepMs[stepMs.size() / 2]);
  std::printf("last tokens:");
  for (size_t i = tokens.size() - 8; i < tokens.size(); ++i)
    std::printf(" %lld", (long long)tokens[i]);
  std::printf("\n");
  // One kernel per shape class (attention, KV-append), whatever the number
  // of tokens.
  return stats.compiles + stats.diskHits == 2 ? 0 : 1;
}
