// The hybrid of seed 000 sec. 5.1: a learned absolute table added to the
// token embeddings, then RoPE inside attention. Two pejit kernels:
//   1. pe.embed + pe.learned: x = words[tokens] + positions_table[p]
//      (one pass, docs/standalone-kernels.md);
//   2. attention over x's heads with RoPE fused on Q and K (no rotated copy).
// Kernel 2 reads x [b, s, h * dh] in place as [b, h, s, dh] through a
// strided view: no transpose. (A real layer projects x into Q, K and V
// first; pejit has no matmul op, so this toy layer attends over x itself.)
// Prints both kernels' IR (source and fused stage), runs them on random
// tokens, and checks the result against the float64 interpreter run on
// each kernel's source. Exits 0 only if the error is below 1e-4.
//
//   hybrid_embedding [--ir]
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/Pejit.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int64_t kVocab = 1000, kMaxPositions = 512, kHeads = 4, kHeadDim = 32;
constexpr int64_t kModel = kHeads * kHeadDim;

const char *kEmbedSource = R"mlir(
func.func @embeddings(%tokens: tensor<1x?xi64>, %words: tensor<1000x128xf32>,
                      %positions: tensor<?xi64>, %table: tensor<512x128xf32>)
    -> tensor<1x?x128xf32> {
  %t = pe.embed %tokens, %words : tensor<1x?xi64>, tensor<1000x128xf32> -> tensor<1x?x128xf32>
  %x = pe.learned %t, %positions, %table <max_positions = 512>
      : tensor<1x?x128xf32>, tensor<?xi64>, tensor<512x128xf32>
  return %x : tensor<1x?x128xf32>
}
)mlir";

const char *kAttentionSource = R"mlir(
func.func @attention(%q: tensor<1x4x?x32xf32>, %k: tensor<1x4x?x32xf32>,
                     %v: tensor<1x4x?x32xf32>, %positions: tensor<?xi64>)
    -> tensor<1x4x?x32xf32> {
  %q_rot = pe.rope %q, %positions <layout = half, theta = 10000.0>
      : tensor<1x4x?x32xf32>, tensor<?xi64>
  %k_rot = pe.rope %k, %positions <layout = half, theta = 10000.0>
      : tensor<1x4x?x32xf32>, tensor<?xi64>
  %o = attn.attention %q_rot, %k_rot, %v causal
      : tensor<1x4x?x32xf32>, tensor<1x4x?x32xf32>, tensor<1x4x?x32xf32> -> tensor<1x4x?x32xf32>
  return %o : tensor<1x4x?x32xf32>
}
)mlir";

std::vector<double> asDouble(const std::vector<float> &v) { return {v.begin(), v.end()}; }

} // namespace

int main(int argc, char **argv) {
  bool printIr = argc > 1 && std::string(argv[1]) == "--ir";
  pejit::Runtime runtime;
  pejit::Expected<pejit::Spec> embedSpec = pejit::Spec::fromText(kEmbedSource, "embeddings");
  pejit::Expected<pejit::Spec> attentionSpec = pejit::Spec::fromText(kAttentionSource, "attention");
  if (!embedSpec || !attentionSpec) {
    std::fprintf(stderr, "%s\n", (!embedSpec ? embedSpec.error() : attentionSpec.error()).c_str());
    return 1;
  }
  pejit::Expected<pejit::X86Kernel> embed = runtime.getX86(*embedSpec);
  pejit::Expected<pejit::X86Kernel> attention = runtime.getX86(*attentionSpec);
  if (!embed || !attention) {
    std::fprintf(stderr, "%s\n", (!embed ? embed.error() : attention.error()).c_str());
    return 1;
  }
  if (printIr)
    for (auto [name, kernel] : {std::pair{"embedding", &*embed}, {"attention", &*attention}})
      for (const char *stage : {"source", "fused"}) {
        pejit::Expected<std::string> text = kernel->ir(stage);
        std::printf("// ===== %s kernel, stage %s =====\n%s\n", name, stage,
                    text ? text->c_str() : text.error().c_str());
      }

  const int64_t seq = 77;
  std::mt19937 engine(3);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::uniform_int_distribution<int64_t> token(0, kVocab - 1);
  std::vector<float> words(kVocab * kModel), table(kMaxPositions * kModel);
  for (float &w : words)
    w = dist(engine);
  for (float &w : table)
    w = dist(engine);
  std::vector<int64_t> tokens(seq), positions(seq);
  for (int64_t t = 0; t < seq; ++t) {
    tokens[t] = token(engine);
    positions[t] = t;
  }
  // Kernel 1: x [1, s, h dh].
  std::vector<float> x(seq * kModel, NAN), out(seq * kModel, NAN);
  pejit::Status status =
      embed->run({{tokens.data(), pejit::DType::I64, {1, seq}, {}},
                  {words.data(), pejit::DType::F32, {kVocab, kModel}, {}},
                  {positions.data(), pejit::DType::I64, {seq}, {}},
                  {table.data(), pejit::DType::F32, {kMaxPositions, kModel}, {}}},
                 {x.data(), pejit::DType::F32, {1, seq, kModel}, {}});
  if (!status) {
    std::fprintf(stderr, "embedding: %s\n", status.message().c_str());
    return 1;
  }
  // Kernel 2 on x's heads in place: [1, h, s, dh] with x's strides.
  std::vector<int64_t> heads{1, kHeads, seq, kHeadDim};
  std::vector<int64_t> strides{seq * kModel, kHeadDim, kModel, 1};
  pejit::TensorView xHeads{x.data(), pejit::DType::F32, heads, strides};
  status =
      attention->run({xHeads, xHeads, xHeads, {positions.data(), pejit::DType::I64, {seq}, {}}},
                     {out.data(), pejit::DType::F32, heads, {}});
  if (!status) {
    std::fprintf(stderr, "attention: %s\n", status.message().c_str());
    return 1;
  }

  // The float64 reference of each kernel's source, chained the same way.
  namespace ref = pejit::ref;
  ref::PositionIds ids({seq}, positions);
  pejit::Expected<ref::Tensor> x64 = pejit::interpretReference(
      kEmbedSource,
      {ref::PositionIds({1, seq}, tokens), ref::Tensor({kVocab, kModel}, asDouble(words)), ids,
       ref::Tensor({kMaxPositions, kModel}, asDouble(table))});
  if (!x64) {
    std::fprintf(stderr, "reference: %s\n", x64.error().c_str());
    return 1;
  }
  ref::Tensor heads64(heads);
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t c = 0; c < kHeadDim; ++c)
        heads64.at(0, h, t, c) = x64->at(0, t, h * kHeadDim + c);
  pejit::Expected<ref::Tensor> o64 =
      pejit::interpretReference(kAttentionSource, {heads64, heads64, heads64, ids});
  if (!o64) {
    std::fprintf(stderr, "reference: %s\n", o64.error().c_str());
    return 1;
  }
  double maxErr = 0, maxRef = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(o64->data[i]));
    maxErr = std::max(maxErr, std::isnan(out[i]) ? INFINITY : std::fabs(out[i] - o64->data[i]));
  }
  double rel = maxErr / maxRef;
  std::printf("hybrid embedding (learned table + RoPE in attention), s = %lld: 2 kernels, "
              "max relative error %.2e against float64 (tolerance 1e-4)\n",
              (long long)seq, rel);
  return rel <= 1e-4 ? 0 : 1;
}
