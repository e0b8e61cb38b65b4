// `pejit bench --encodings`: the fused score biases against plain attention
// at the same shape (b = 1, hq = hkv = 16, s = 2048, f32): T5 bidirectional
// without a mask, T5 one-sided under a causal mask (a decoder), and ALiBi,
// each at d = 64 and 128. FLOPs = 4 b hq sq skv d (half when causal), the
// same count for every row of a shape, so GFLOP/s compare directly. Each
// time is the median of repeats after a warm-up, with the FMA peak sampled
// between runs (Timing.h).
#include "bench/AttentionBench.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "runtime/Encodings.h"
#include "runtime/Pejit.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

int runEncodingBench(int argc, char **argv) {
  int repeats = 5;
  for (int i = 0; i < argc; ++i)
    if (std::string(argv[i]).rfind("--repeats=", 0) == 0)
      repeats = std::max(1, std::atoi(argv[i] + 10));
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
    std::vector<float> table(32 * heads);
    for (std::vector<float> *t : {&q, &k, &v, &table})
      for (float &x : *t)
        x = dist(engine);
    std::vector<int64_t> dims{1, heads, seq, d};
    Shape shape{1, heads, heads, seq, seq, d, d};
    for (bool causal : {false, true}) {
      double gflop = 4.0 * heads * seq * seq * d * (causal ? 0.5 : 1.0) / 1e9;
      struct Row {
        const char *name;
        AttentionSpec spec;
        bool table;
      };
      AttentionSpec plain, t5, alibi;
      plain.causal = t5.causal = alibi.causal = causal;
      t5.encodings = {encodings::t5Bias(32, 128, /*bidirectional=*/!causal, heads)};
      alibi.alibi = AlibiSpec{heads, 0, !causal};
      double plainMs = 0;
      for (const Row &row :
           {Row{"plain", plain, false}, Row{causal ? "T5 one-sided" : "T5 bidirectional", t5, true},
            Row{causal ? "ALiBi causal" : "ALiBi symmetric", alibi, false}}) {
        Expected<X86Kernel> kernel = runtime.getX86(Spec::fromBuilder(row.spec, shape));
        if (!kernel) {
          std::fprintf(stderr, "%s: %s\n", row.name, kernel.error().c_str());
          return 1;
        }
        std::vector<TensorView> inputs = {{q.data(), DType::F32, dims, {}},
                                          {k.data(), DType::F32, dims, {}},
                                          {v.data(), DType::F32, dims, {}}};
        if (row.table)
          inputs.push_back({table.data(), DType::F32, {32, heads}, {}});
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
