// `pejit bench --linear`: linear attention with fused RoPE
// (docs/linear-attention.md) against pejit's softmax attention with fused
// RoPE, both causal, at s = 512 to 32768, d = dv = 64 and 128
// (b = 1, hq = hkv = 4, f32, RoPE theta 10000; linear: elu_plus_one,
// rope_on_numerator). FLOPs counted for each as its own work:
//   softmax: 4 hq sq skv d / 2 (causal)
//   linear:  2 hq (sq + skv) d dv (a state update per key, a read per query)
// so GFLOP/s and % of the measured FMA peak say how well each uses the
// machine, and the ms columns say which is faster. Softmax at 32768 runs
// `repeats` / 2 + 1 times: one run is seconds. Then decode steps: one
// query row after t keys, with the carried state, rebuilt from K and V,
// and as softmax attention.
#include "bench/AttentionBench.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "pejit/runtime/Pejit.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace pejit::bench {

namespace {

std::string linearSource(int64_t heads, int64_t d) {
  std::string t = "tensor<1x" + std::to_string(heads) + "x?x" + std::to_string(d) + "xf32>";
  return "func.func @linear(%q: " + t + ", %k: " + t + ", %v: " + t + ") -> " + t +
         " {\n  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal "
         "encodings([#pe.rope<layout = half, theta = 10000.0>]) "
         "rope_placement(rope_on_numerator) : " +
         t + ", " + t + ", " + t + " -> " + t + "\n  return %o : " + t + "\n}\n";
}

std::string softmaxSource(int64_t heads, int64_t d) {
  std::string t = "tensor<1x" + std::to_string(heads) + "x?x" + std::to_string(d) + "xf32>";
  return "func.func @softmax(%q: " + t + ", %k: " + t + ", %v: " + t + ") -> " + t +
         " {\n  %o = attn.attention %q, %k, %v causal "
         "encodings([#pe.rope<layout = half, theta = 10000.0>]) : " +
         t + ", " + t + ", " + t + " -> " + t + "\n  return %o : " + t + "\n}\n";
}

/// One decode step's linear attention carrying its state (ids and state
/// as inputs): O(d dv) per step whatever the sequence so far.
std::string decodeStateSource(int64_t heads, int64_t d) {
  std::string t = "tensor<1x" + std::to_string(heads) + "x?x" + std::to_string(d) + "xf32>";
  std::string st = "tensor<1x" + std::to_string(heads) + "x" + std::to_string(d) + "x" +
                   std::to_string(d + 2) + "xf32>";
  return "func.func @decode(%q: " + t + ", %k: " + t + ", %v: " + t +
         ", %qp: tensor<?xi64>, %kp: tensor<?xi64>, %st: " + st + ") -> " + t +
         " {\n  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) "
         "query_positions(%qp : tensor<?xi64>) key_positions(%kp : tensor<?xi64>) causal "
         "state(%st : " +
         st +
         ") encodings([#pe.rope<layout = half, theta = 10000.0>]) "
         "rope_placement(rope_on_numerator) : " +
         t + ", " + t + ", " + t + " -> " + t + "\n  return %o : " + t + "\n}\n";
}

/// Decode steps (one query row) after t keys: linear attention with the
/// carried state (one key in, O(d dv)), the same without a state (the
/// step re-reads all t + 1 keys), and softmax attention over t + 1 keys.
int runDecodeRows(Runtime &runtime, int64_t heads, int repeats) {
  std::printf("\nDecode: one query row after t keys (microseconds per step)\n\n"
              "| d | t | linear, carried state | linear, rebuilt from K, V | softmax (flash) | "
              "rebuilt / carried |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::mt19937 engine(12);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t d : {64, 128}) {
    Expected<Spec> stateSpec = Spec::fromText(decodeStateSource(heads, d));
    Expected<Spec> linear = Spec::fromText(linearSource(heads, d));
    Expected<Spec> softmax = Spec::fromText(softmaxSource(heads, d));
    if (!stateSpec || !linear || !softmax)
      return 1;
    Expected<X86Kernel> stateKernel = runtime.getX86(*stateSpec);
    Expected<X86Kernel> linearKernel = runtime.getX86(*linear);
    Expected<X86Kernel> softmaxKernel = runtime.getX86(*softmax);
    if (!stateKernel || !linearKernel || !softmaxKernel) {
      std::fprintf(stderr, "decode bench: %s\n",
                   (!stateKernel    ? stateKernel.error()
                    : !linearKernel ? linearKernel.error()
                                    : softmaxKernel.error())
                       .c_str());
      return 1;
    }
    for (int64_t t : {1024, 8192, 32768}) {
      std::vector<float> q(heads * d), k(heads * (t + 1) * d), v(k.size()), o(q.size());
      std::vector<float> state(heads * d * (d + 2), 0.0f);
      for (std::vector<float> *x : {&q, &k, &v})
        for (float &e : *x)
          e = dist(engine);
      std::vector<int64_t> id{t};
      std::vector<int64_t> row{1, heads, 1, d}, all{1, heads, t + 1, d};
      // The step's own key is the last row of K and V.
      std::vector<int64_t> strides{heads * (t + 1) * d, (t + 1) * d, d, 1};
      std::vector<TensorView> carried = {{q.data(), DType::F32, row, {}},
                                         {k.data() + t * d, DType::F32, row, strides},
                                         {v.data() + t * d, DType::F32, row, strides},
                                         {id.data(), DType::I64, {1}, {}},
                                         {id.data(), DType::I64, {1}, {}},
                                         {state.data(), DType::F32, {1, heads, d, d + 2}, {}}};
      std::vector<TensorView> rebuilt = {{q.data(), DType::F32, row, {}},
                                         {k.data(), DType::F32, all, {}},
                                         {v.data(), DType::F32, all, {}}};
      TensorView out{o.data(), DType::F32, row, {}};
      double stateMs = medianMs(repeats * 20, [&] { (void)stateKernel->run(carried, out); });
      double linearMs = medianMs(repeats, [&] { (void)linearKernel->run(rebuilt, out); });
      double softmaxMs = medianMs(repeats, [&] { (void)softmaxKernel->run(rebuilt, out); });
      std::printf("| %lld | %lld | %.1f | %.1f | %.1f | %.0fx |\n", (long long)d, (long long)t,
                  stateMs * 1e3, linearMs * 1e3, softmaxMs * 1e3, linearMs / stateMs);
      std::fflush(stdout);
    }
  }
  return 0;
}

} // namespace

int runLinearBench(int argc, char **argv) {
  const int repeats = repeatsOption(argc, argv, 5);
  const int threads = benchThreads();
  const int64_t heads = 4;
  double peak = measurePeakFmaGflops(threads);
  std::printf("pejit bench --linear: b=1 hq=hkv=4 f32 causal, RoPE fused, %d threads, peak %.1f "
              "GFLOP/s at start\n\n",
              threads, peak);
  std::printf("| d | s | kernel | ms | GFLOP/s | %% of peak | softmax ms / linear ms |\n"
              "| ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
  Runtime runtime({threads});
  std::mt19937 engine(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t d : {64, 128}) {
    Expected<Spec> linear = Spec::fromText(linearSource(heads, d));
    Expected<Spec> softmax = Spec::fromText(softmaxSource(heads, d));
    if (!linear || !softmax) {
      std::fprintf(stderr, "linear bench: %s\n",
                   (!linear ? linear.error() : softmax.error()).c_str());
      return 1;
    }
    Expected<X86Kernel> linearKernel = runtime.getX86(*linear);
    Expected<X86Kernel> softmaxKernel = runtime.getX86(*softmax);
    if (!linearKernel || !softmaxKernel) {
      std::fprintf(stderr, "linear bench: %s\n",
                   (!linearKernel ? linearKernel.error() : softmaxKernel.error()).c_str());
      return 1;
    }
    for (int64_t s : {512, 1024, 2048, 8192, 32768}) {
      std::vector<float> q(heads * s * d), k(q.size()), v(q.size()), o(q.size());
      for (std::vector<float> *t : {&q, &k, &v})
        for (float &x : *t)
          x = dist(engine);
      std::vector<int64_t> dims{1, heads, s, d};
      std::vector<TensorView> inputs = {{q.data(), DType::F32, dims, {}},
                                        {k.data(), DType::F32, dims, {}},
                                        {v.data(), DType::F32, dims, {}}};
      TensorView out{o.data(), DType::F32, dims, {}};
      Interleaved lin =
          medianWithPeak(repeats, threads, [&] { (void)linearKernel->run(inputs, out); });
      Interleaved soft = medianWithPeak(s > 8192 ? repeats / 2 + 1 : repeats, threads,
                                        [&] { (void)softmaxKernel->run(inputs, out); });
      double linearGflop = 2.0 * heads * (2.0 * s) * d * d / 1e9;
      double softmaxGflop = 4.0 * heads * double(s) * s * d * 0.5 / 1e9;
      for (auto [name, runs, gflop] :
           {std::tuple{"linear (elu+1, RoPE on numerator)", lin, linearGflop},
            std::tuple{"softmax (flash, RoPE fused)", soft, softmaxGflop}})
        std::printf("| %lld | %lld | %s | %.2f | %.1f | %.0f%% | %.2f |\n", (long long)d,
                    (long long)s, name, runs.kernelMs, gflop / runs.kernelMs * 1e3,
                    100.0 * gflop / runs.kernelMs * 1e3 / runs.peakGflops,
                    soft.kernelMs / lin.kernelMs);
      std::fflush(stdout);
    }
  }
  return runDecodeRows(runtime, heads, repeats);
}

} // namespace pejit::bench
