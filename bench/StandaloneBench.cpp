// `pejit bench --standalone`: the memory-bound standalone kernels other
// than RoPE (docs/standalone-kernels.md; RoPE is `pejit bench --rope`),
// each against this machine's measured read bandwidth:
//   - BERT embeddings: pe.embed (tokens [8, 512] into a 30522 x 768 f32
//     table) + pe.learned (a 512 x 768 position table), one pass;
//   - Transformer embeddings: pe.embed (37000 x 512, scaled) +
//     pe.sinusoidal (computed, not read), one pass;
//   - ALiBi and T5 biases materialized as [1, 16, 2048, 2048] f32 (what a
//     user who needs the tensor gets; attention fuses them instead).
// "Bytes moved" counts what the kernel must touch at least once: the
// gathered table rows, the position table once, the token ids, and the
// output written. A written byte costs at least a read's time, so 100% of
// the read bandwidth is out of reach for the bias kernels, which only
// write. bench/compare_standalone.py times the PyTorch way of each.
#include "bench/AttentionBench.h"
#include "bench/Bandwidth.h"
#include "bench/Timing.h"
#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

namespace {

const char *kBertSource = R"(
func.func @bert(%tokens: tensor<8x512xi64>, %words: tensor<30522x768xf32>,
                %positions: tensor<512xi64>, %table: tensor<512x768xf32>)
    -> tensor<8x512x768xf32> {
  %t = pe.embed %tokens, %words : tensor<8x512xi64>, tensor<30522x768xf32> -> tensor<8x512x768xf32>
  %x = pe.learned %t, %positions, %table <max_positions = 512>
      : tensor<8x512x768xf32>, tensor<512xi64>, tensor<512x768xf32>
  return %x : tensor<8x512x768xf32>
})";

const char *kTransformerSource = R"(
func.func @transformer(%tokens: tensor<8x512xi64>, %words: tensor<37000x512xf32>,
                       %positions: tensor<512xi64>) -> tensor<8x512x512xf32> {
  %t = pe.embed %tokens, %words {scale = 22.627416997969522 : f64}
      : tensor<8x512xi64>, tensor<37000x512xf32> -> tensor<8x512x512xf32>
  %x = pe.sinusoidal %t, %positions <base = 10000.0> : tensor<8x512x512xf32>, tensor<512xi64>
  return %x : tensor<8x512x512xf32>
})";

const char *kAlibiSource = R"(
func.func @alibi() -> tensor<1x16x2048x2048xf32> {
  %b = pe.alibi <num_heads = 16, form = causal> : tensor<1x16x2048x2048xf32>
  return %b : tensor<1x16x2048x2048xf32>
})";

const char *kT5Source = R"(
func.func @t5(%table: tensor<32x16xf32>) -> tensor<1x16x2048x2048xf32> {
  %b = pe.t5_bias %table <num_buckets = 32, max_distance = 128, bidirectional = true>
      : tensor<32x16xf32> -> tensor<1x16x2048x2048xf32>
  return %b : tensor<1x16x2048x2048xf32>
})";

std::vector<float> randomFloats(int64_t count, std::mt19937 &engine) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = dist(engine);
  return values;
}

std::vector<int64_t> randomIds(int64_t count, int64_t below, std::mt19937 &engine) {
  std::uniform_int_distribution<int64_t> dist(0, below - 1);
  std::vector<int64_t> ids(count);
  for (int64_t &id : ids)
    id = dist(engine);
  return ids;
}

} // namespace

int runStandaloneBench(int argc, char **argv) {
  const int repeats = repeatsOption(argc, argv, 11);
  const int threads = benchThreads();
  // The read bandwidth is sampled just before each case (it moves by a
  // third within a minute on a shared host).
  std::printf("pejit bench --standalone: %d threads\n\n"
              "| case | output | compile ms | median ms | GB/s moved | read BW GB/s (just before) "
              "| of read BW |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
              threads);
  Runtime runtime({threads});
  std::mt19937 engine(7);
  const int64_t batch = 8, seq = 512;
  std::vector<int64_t> positions(seq);
  for (int64_t s = 0; s < seq; ++s)
    positions[s] = s;

  std::vector<int64_t> bertTokens = randomIds(batch * seq, 30522, engine);
  std::vector<float> bertWords = randomFloats(30522 * 768, engine);
  std::vector<float> bertTable = randomFloats(512 * 768, engine);
  std::vector<int64_t> transformerTokens = randomIds(batch * seq, 37000, engine);
  std::vector<float> transformerWords = randomFloats(37000 * 512, engine);
  std::vector<float> t5Table = randomFloats(32 * 16, engine);

  struct Case {
    const char *name, *source, *output;
    std::vector<TensorView> inputs;
    std::vector<int64_t> outShape;
    double inputBytes; // at least once: gathered rows, tables, ids
  };
  const double ids = batch * seq * 8.0;
  std::vector<Case> cases = {
      {"BERT embeddings (gather + learned)",
       kBertSource,
       "[8, 512, 768] f32",
       {{bertTokens.data(), DType::I64, {batch, seq}, {}},
        {bertWords.data(), DType::F32, {30522, 768}, {}},
        {positions.data(), DType::I64, {seq}, {}},
        {bertTable.data(), DType::F32, {512, 768}, {}}},
       {batch, seq, 768},
       ids + batch * seq * 768 * 4.0 + 512 * 768 * 4.0},
      {"Transformer embeddings (gather + sinusoidal)",
       kTransformerSource,
       "[8, 512, 512] f32",
       {{transformerTokens.data(), DType::I64, {batch, seq}, {}},
        {transformerWords.data(), DType::F32, {37000, 512}, {}},
        {positions.data(), DType::I64, {seq}, {}}},
       {batch, seq, 512},
       ids + batch * seq * 512 * 4.0},
      {"ALiBi bias (causal form)",
       kAlibiSource,
       "[1, 16, 2048, 2048] f32",
       {},
       {1, 16, 2048, 2048},
       0},
      {"T5 bias (bidirectional)",
       kT5Source,
       "[1, 16, 2048, 2048] f32",
       {{t5Table.data(), DType::F32, {32, 16}, {}}},
       {1, 16, 2048, 2048},
       32 * 16 * 4.0},
  };
  for (Case &c : cases) {
    Expected<Spec> spec = Spec::fromText(c.source);
    if (!spec) {
      std::fprintf(stderr, "standalone: %s\n", spec.error().c_str());
      return 1;
    }
    Expected<X86Kernel> kernel = runtime.getX86(*spec);
    if (!kernel) {
      std::fprintf(stderr, "standalone: %s\n", kernel.error().c_str());
      return 1;
    }
    int64_t outCount = 1;
    for (int64_t extent : c.outShape)
      outCount *= extent;
    std::vector<float> out(outCount);
    TensorView outView{out.data(), DType::F32, c.outShape, {}};
    Status status;
    double bandwidth = measureReadBandwidthGBs(threads);
    double median = medianMs(repeats, [&] { status = kernel->run(c.inputs, outView); });
    if (!status) {
      std::fprintf(stderr, "standalone: %s: %s\n", c.name, status.message().c_str());
      return 1;
    }
    double moved = c.inputBytes + outCount * 4.0;
    double gbs = moved / (median * 1e-3) / 1e9;
    std::printf("| %s | %s | %.0f | %.3f | %.1f | %.1f | %.0f%% |\n", c.name, c.output,
                kernel->compileMilliseconds(), median, gbs, bandwidth, 100.0 * gbs / bandwidth);
  }
  std::printf("\n");
  return 0;
}

} // namespace pejit::bench
