// One KV-cache decode step: a single query token at position 5999 attends to
// 1000 cached keys at positions 5000..5999 (a conversation resumed mid-way),
// RoPE fused, GQA 32/8. Position ids are passed explicitly, so the same
// kernel serves any offset of a cache of this length.
//
//   decode_kv_cache
#include "pejit/runtime/Pejit.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  const int64_t cached = 1000, first = 5000;
  pejit::Shape shape{1, 32, 8, /*querySeq=*/1, /*keySeq=*/cached, 128, 128};
  pejit::AttentionSpec spec;
  spec.rope = pejit::ref::RopeConfig{};
  spec.rope->theta = 500000.0;
  pejit::Runtime runtime;
  pejit::Expected<pejit::X86Kernel> kernel = runtime.getX86(pejit::Spec::fromBuilder(spec, shape));
  if (!kernel) {
    std::fprintf(stderr, "%s\n", kernel.error().c_str());
    return 1;
  }
  std::mt19937 engine(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> q(32 * 128), k(8 * cached * 128), v(k.size()), o(q.size());
  for (std::vector<float> *t : {&q, &k, &v})
    for (float &x : *t)
      x = dist(engine);
  std::vector<int64_t> queryPosition{first + cached - 1}, keyPositions(cached);
  for (int64_t j = 0; j < cached; ++j)
    keyPositions[j] = first + j;
  std::vector<pejit::TensorView> inputs = {{q.data(), pejit::DType::F32, {1, 32, 1, 128}, {}},
                                           {k.data(), pejit::DType::F32, {1, 8, cached, 128}, {}},
                                           {v.data(), pejit::DType::F32, {1, 8, cached, 128}, {}},
                                           {queryPosition.data(), pejit::DType::I64, {1}, {}},
                                           {keyPositions.data(), pejit::DType::I64, {cached}, {}}};
  pejit::TensorView out{o.data(), pejit::DType::F32, {1, 32, 1, 128}, {}};
  (void)kernel->run(inputs, out); // warm-up
  auto start = std::chrono::steady_clock::now();
  pejit::Status status = kernel->run(inputs, out);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!status) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  std::printf("decode step: 1 query @ %lld over %lld cached keys @ %lld..%lld: %.3f ms "
              "(compile %.0f ms), o[0][0..3] = %.4f %.4f %.4f %.4f\n",
              (long long)queryPosition[0], (long long)cached, (long long)first,
              (long long)(first + cached - 1), ms, kernel->compileMilliseconds(), o[0], o[1], o[2],
              o[3]);
  return 0;
}
