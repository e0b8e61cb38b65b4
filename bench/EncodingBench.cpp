// `pejit bench --encodings`: the fused score biases against plain attention
// at the same shape (b = 1, hq = hkv = 16, s = 2048, f32): T5 bidirectional
// without a mask, T5 one-sided under a causal mask (a decoder), the same
// attention given a materialized [1, h, s, s] bias tensor (the fallback, as
// a framework's attn_mask), ALiBi, and Shaw's relative key and value terms
// (a^K + a^V, clip 16), each at d = 64 and 128. FLOPs = 4 b hq sq skv d (half when
// causal), the same count for every row of a shape, so GFLOP/s compare directly. Each time is the
// median of repeats after a warm-up, with the FMA peak sampled between runs (Timing.h).
#include "bench/AttentionBench.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "pejit/runtime/Encodings.h"
#include "pejit/runtime/Pejit.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

int runEncodingBench(int argc, char **argv) {
  const int repeats = repeatsOption(argc, argv, 5);
  const int threads = benchThreads();
  const int64_t heads = 16, seq = 2048;
  double peak = measurePeakFmaGflops(threads);
  std::printf("pejit bench --encodings: b=1 hq=hkv=16 s=2048 f32, %d threads, peak %.1f "
              "GFLOP/s at start\n\n",
              threads, peak);
  std::printf("| d | mask | encoding | ms | GFLOP/s | %% of peak | vs plain |\n"
              "| ---: | --- | --- | ---: | ---: | ---: | ---: |\n");
  Runtime runtime({threads});
  std::mt19937 engine(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t d : {64, 128}) {
    std::vector<float> q(heads * seq * d), k(q.size()), v(q.size()), o(q.size());
    // A materialized bias (what a framework passes as attn_mask): 256 MiB.
    std::vector<float> table(32 * heads), bias(heads * seq * seq);
    const int64_t clip = 16;
    std::vector<float> shawKey((2 * clip + 1) * d), shawValue((2 * clip + 1) * d);
    for (std::vector<float> *t : {&q, &k, &v, &table, &bias, &shawKey, &shawValue})
      for (float &x : *t)
        x = dist(engine);
    std::vector<int64_t> dims{1, heads, seq, d};
    Shape shape{1, heads, heads, seq, seq, d, d};
    for (bool causal : {false, true}) {
      double gflop = 4.0 * heads * seq * seq * d * (causal ? 0.5 : 1.0) / 1e9;
      struct Row {
        const char *name;
        AttentionSpec spec;
        /// The encoding operands, with their shapes.
        std::vector<std::pair<const std::vector<float> *, std::vector<int64_t>>> operands;
      };
      AttentionSpec plain, t5, alibi, materialized, shaw;
      plain.causal = t5.causal = alibi.causal = materialized.causal = shaw.causal = causal;
      shaw.encodings = {encodings::shawKey(clip, d), encodings::shawValue(clip, d)};
      t5.encodings = {encodings::t5Bias(32, 128, /*bidirectional=*/!causal, heads)};
      alibi.alibi = AlibiSpec{heads, 0, !causal};
      std::vector<int64_t> biasShape{1, heads, seq, seq};
      materialized.encodings = {encodings::biasTensor(biasShape)};
      double plainMs = 0;
      for (const Row &row :
           {Row{"plain", plain, {}},
            Row{causal ? "T5 one-sided" : "T5 bidirectional", t5, {{&table, {32, heads}}}},
            Row{"bias tensor [h, s, s] (the fallback)", materialized, {{&bias, biasShape}}},
            Row{causal ? "ALiBi causal" : "ALiBi symmetric", alibi, {}},
            Row{"Shaw a^K + a^V, clip 16",
                shaw,
                {{&shawKey, {2 * clip + 1, d}}, {&shawValue, {2 * clip + 1, d}}}}}) {
        Expected<X86Kernel> kernel = runtime.getX86(Spec::fromBuilder(row.spec, shape));
        if (!kernel) {
          std::fprintf(stderr, "%s: %s\n", row.name, kernel.error().c_str());
          return 1;
        }
        std::vector<TensorView> inputs = {{q.data(), DType::F32, dims, {}},
                                          {k.data(), DType::F32, dims, {}},
                                          {v.data(), DType::F32, dims, {}}};
        for (const auto &[operand, operandShape] : row.operands)
          inputs.push_back({const_cast<float *>(operand->data()), DType::F32, operandShape, {}});
        TensorView out{o.data(), DType::F32, dims, {}};
        Interleaved runs =
            medianWithPeak(repeats, threads, [&] { (void)kernel->run(inputs, out); });
        if (!plainMs)
          plainMs = runs.kernelMs;
        std::printf("| %lld | %s | %s | %.1f | %.1f | %.0f%% | %.2f |\n", (long long)d,
                    causal ? "causal" : "none", row.name, runs.kernelMs,
                    gflop / runs.kernelMs * 1e3,
                    100.0 * gflop / runs.kernelMs * 1e3 / runs.peakGflops, plainMs / runs.kernelMs);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

} // namespace pejit::bench
