// Built against an installed pejit (find_package(pejit)): compiles a fused
// RoPE + causal attention kernel, runs it on fresh random inputs into a
// NaN-poisoned output, and compares with the installed float64 reference.
// Prints the relative error; exits 1 above 1e-4 or on any error. Its own
// runtime/, core/, ... folders hold decoys that pejit's headers must not reach.
#include "pejit/reference/Attention.h"
#include "pejit/reference/Rope.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/Version.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

int main() {
  pejit::Shape shape{1, 4, 2, 40, 40, 32, 32};
  pejit::AttentionSpec spec;
  spec.rope = pejit::ref::RopeConfig{};
  spec.causal = true;
  pejit::RuntimeOptions options;
  options.threads = 1;
  pejit::Runtime runtime(options);
  pejit::Expected<pejit::X86Kernel> kernel = runtime.getX86(pejit::Spec::fromBuilder(spec, shape));
  if (!kernel) {
    std::fprintf(stderr, "consumer: %s\n", kernel.error().c_str());
    return 1;
  }

  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto fill = [&](std::vector<int64_t> dims) {
    int64_t count = 1;
    for (int64_t d : dims)
      count *= d;
    std::vector<float> values(count);
    for (float &v : values)
      v = uniform(rng);
    return values;
  };
  std::vector<int64_t> qDims = {1, 4, 40, 32}, kvDims = {1, 2, 40, 32};
  std::vector<float> q = fill(qDims), k = fill(kvDims), v = fill(kvDims);
  std::vector<float> out(q.size(), std::numeric_limits<float>::quiet_NaN());
  pejit::Status status = kernel->run({{q.data(), pejit::DType::F32, qDims, {}},
                                      {k.data(), pejit::DType::F32, kvDims, {}},
                                      {v.data(), pejit::DType::F32, kvDims, {}}},
                                     {out.data(), pejit::DType::F32, qDims, {}});
  if (!status) {
    std::fprintf(stderr, "consumer: %s\n", status.message().c_str());
    return 1;
  }

  using pejit::ref::Tensor;
  auto tensor = [](const std::vector<int64_t> &dims, const std::vector<float> &values) {
    return Tensor(dims, std::vector<double>(values.begin(), values.end()));
  };
  // Default positions (docs/semantics.md): keys 0..skv-1, queries end at skv-1.
  std::vector<int64_t> ids(40);
  for (int64_t i = 0; i < 40; ++i)
    ids[i] = i;
  pejit::ref::PositionIds positions = pejit::ref::PositionIds::shared(ids);
  Tensor qr = pejit::ref::applyRope(*spec.rope, tensor(qDims, q), positions, 40);
  Tensor kr = pejit::ref::applyRope(*spec.rope, tensor(kvDims, k), positions, 40);
  pejit::ref::AttentionOptions attention;
  attention.causal = true;
  Tensor expected = pejit::ref::attention(qr, kr, tensor(kvDims, v), attention);

  double maxError = 0, maxValue = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double error = std::fabs(out[i] - expected.data[i]);
    maxError = std::isnan(error) ? INFINITY : std::max(maxError, error);
    maxValue = std::max(maxValue, std::fabs(expected.data[i]));
  }
  double relative = maxError / std::max(maxValue, 1e-30);
  std::printf("consumer: pejit %s, compiled in %.0f ms, max relative error %.2e\n", PEJIT_VERSION,
              kernel->compileMilliseconds(), relative);
  if (!(relative <= 1e-4)) {
    std::printf("consumer: FAILED (tolerance 1e-4)\n");
    return 1;
  }
  std::printf("consumer: OK (tolerance 1e-4)\n");
  return 0;
}
