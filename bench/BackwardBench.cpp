// `pejit bench --backward`: the attention backward (docs/backward.md) at
// b = 1, 16 heads, d = 128, causal, f32, s = 512, 1024 and 2048 (the
// issue's s = 2048 case), with the forward timed in the same run; plain,
// and with RoPE fused (its rotation of Q and K and its adjoint on dQ, dK
// are O(s d) beside the O(s^2 d) products: it should cost a few percent),
// and at s = 2048 in bf16 too (widened to f32 scratch, the phases in f32);
// at s = 2048 also from a training forward, whose lse the backward reads
// instead of recomputing (column "lse": given or recomputed).
// FLOPs as FlashAttention counts them: forward 4 hq sq skv d / 2 (causal),
// backward 2.5x that (5 matmuls to the forward's 2), so GFLOP/s and the
// fraction of the FMA peak (sampled between the runs) compare the two.
// Peak memory is measured by bench/compare_torch_backward.py, which also
// times torch's backward in the same session.
#include "bench/AttentionBench.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "pejit/runtime/Pejit.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace pejit::bench {

int runBackwardBench(int argc, char **argv) {
  const int repeats = repeatsOption(argc, argv, 3);
  const int threads = benchThreads();
  const int64_t heads = 16, d = 128;
  std::printf("pejit bench --backward: b=1 hq=hkv=%lld d=%lld f32 causal, %d threads, FMA peak "
              "%.1f GFLOP/s (%s) at start\n\n",
              (long long)heads, (long long)d, threads,
              measurePeakFmaGflops(threads, detectFmaIsa()), fmaIsaName(detectFmaIsa()));
  std::printf("| s | dtype | encoding | lse | pass | ms | GFLOP/s | %% of peak |\n"
              "| ---: | --- | --- | --- | --- | ---: | ---: | ---: |\n");
  Runtime runtime({threads});
  std::mt19937 engine(13);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // training: the training forward writes lse and the backward reads it
  // (docs/backward.md); else the backward recomputes it.
  struct Case {
    int64_t s;
    DType dtype;
    bool rope, training;
  };
  std::vector<Case> cases;
  for (int64_t s : {512, 1024, 2048})
    for (bool rope : {false, true})
      cases.push_back({s, DType::F32, rope, false});
  for (bool rope : {false, true})
    cases.push_back({2048, DType::BF16, rope, false});
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool rope : {false, true})
      cases.push_back({2048, dtype, rope, true});
  for (const Case &c : cases) {
    const int64_t s = c.s;
    AttentionSpec attention;
    attention.causal = true;
    attention.dtype = c.dtype;
    attention.training = c.training;
    if (c.rope)
      attention.rope = ref::RopeConfig{};
    Spec forward = Spec::fromBuilder(attention, Shape{1, heads, heads, s, s, d, d});
    Expected<X86Kernel> forwardKernel = runtime.getX86(forward);
    Expected<X86Kernel> backwardKernel = runtime.getX86Backward(forward);
    if (!forwardKernel || !backwardKernel) {
      std::fprintf(stderr, "backward bench: %s\n",
                   (!forwardKernel ? forwardKernel.error() : backwardKernel.error()).c_str());
      return 1;
    }
    std::vector<float> q(heads * s * d), k(q.size()), v(q.size()), o(q.size()), dO(q.size()),
        dq(q.size()), dk(q.size()), dv(q.size());
    for (std::vector<float> *x : {&q, &k, &v, &dO})
      for (float &e : *x)
        e = dist(engine);
    // bf16: each float's high half, packed at the front of its buffer.
    if (c.dtype == DType::BF16)
      for (std::vector<float> *x : {&q, &k, &v, &dO}) {
        uint16_t *half = reinterpret_cast<uint16_t *>(x->data());
        for (size_t n = 0; n < x->size(); ++n) {
          uint32_t bits;
          std::memcpy(&bits, &(*x)[n], 4);
          half[n] = static_cast<uint16_t>(bits >> 16);
        }
      }
    std::vector<int64_t> dims{1, heads, s, d};
    auto view = [&](std::vector<float> &x) { return TensorView{x.data(), c.dtype, dims, {}}; };
    std::vector<TensorView> qkv = {view(q), view(k), view(v)};
    std::vector<TensorView> inputs = {view(q), view(k), view(v), view(o), view(dO)};
    std::vector<TensorView> grads = {view(dq), view(dk), view(dv)};
    std::vector<float> lse(heads * s);
    TensorView lseView{lse.data(), DType::F32, {1, heads, s}, {}};
    if (c.training)
      inputs.push_back(lseView);
    auto runForward = [&] {
      if (c.training)
        (void)forwardKernel->runTraining(qkv, view(o), lseView);
      else
        (void)forwardKernel->run(qkv, view(o));
    };
    Interleaved fwd = medianWithPeak(repeats, threads, runForward);
    Interleaved bwd =
        medianWithPeak(repeats, threads, [&] { (void)backwardKernel->runBackward(inputs, grads); });
    double forwardGflop = 4.0 * heads * double(s) * s * d * 0.5 / 1e9;
    for (auto [name, runs, gflop] : {std::tuple{"forward", fwd, forwardGflop},
                                     std::tuple{"backward", bwd, 2.5 * forwardGflop}})
      std::printf("| %lld | %s | %s | %s | %s | %.1f | %.1f | %.1f%% |\n", (long long)s,
                  c.dtype == DType::BF16 ? "bf16" : "f32", c.rope ? "rope" : "none",
                  c.training ? "given" : "recomputed", name, runs.kernelMs,
                  gflop / runs.kernelMs * 1e3,
                  100.0 * gflop / runs.kernelMs * 1e3 / runs.peakGflops);
    std::fflush(stdout);
  }
  return 0;
}

} // namespace pejit::bench
