// The GPU check matrix, shared by the two halves of bench/gpu_check.sh: the
// prepare tool (here, with the compiler) turns each case into MLIR and
// compiles it into the bundle; the runner (on the GPU machine, no compiler)
// loads the bundle by case name and builds the float64 reference from the
// same parameters. Header-only, no LLVM.
#ifndef PEJIT_BENCH_GPU_GPUCHECKCASES_H
#define PEJIT_BENCH_GPU_GPUCHECKCASES_H

#include "pejit/reference/Attention.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBias.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pejit::gpucheck {

struct GpuCase {
  std::string name;
  int64_t batch, queryHeads, kvHeads, querySeq, keySeq, headDim;
  bool bf16;
  bool rope;        ///< LLaMA-style RoPE on Q and K (half layout unless interleaved)
  bool interleaved; ///< RoPE layout
  double theta;
  bool alibi; ///< ALiBi (causal form) over queryHeads
  bool causal;
  std::optional<int64_t> window;
  bool timed; ///< part of the timing table (vs torch), not numerics only
  /// RoPE scaling: the attribute's text and the same scaling for the
  /// float64 reference (default: none).
  std::string scalingMlir = "";
  ref::RopeScaling scaling = {};
};

inline std::vector<GpuCase> gpuCases() {
  std::vector<GpuCase> cases = {
      // Numerics: odd lengths, GQA/MQA, causal or not, RoPE layouts, ALiBi,
      // decode with an offset (sq = 1 sees all 1000 keys), windows.
      {"rope_gqa_causal_f16",
       1,
       8,
       2,
       100,
       100,
       128,
       false,
       true,
       false,
       500000.0,
       false,
       true,
       {},
       false},
      {"rope_gqa_causal_bf16",
       2,
       8,
       2,
       65,
       65,
       128,
       true,
       true,
       false,
       500000.0,
       false,
       true,
       {},
       false},
      {"rope_interleaved_bf16",
       1,
       4,
       4,
       63,
       257,
       64,
       true,
       true,
       true,
       10000.0,
       false,
       true,
       {},
       false},
      {"rope_noncausal_mqa_f16",
       1,
       4,
       1,
       7,
       130,
       64,
       false,
       true,
       false,
       10000.0,
       false,
       false,
       {},
       false},
      {"alibi_12_heads_bf16",
       1,
       12,
       12,
       130,
       130,
       64,
       true,
       false,
       false,
       0.0,
       true,
       true,
       {},
       false},
      {"rope_alibi_f16", 1, 8, 8, 77, 77, 128, false, true, false, 10000.0, true, true, {}, false},
      {"decode_rope_bf16",
       1,
       32,
       8,
       1,
       1000,
       128,
       true,
       true,
       false,
       500000.0,
       false,
       true,
       {},
       false},
      {"window_bf16", 1, 4, 2, 200, 200, 128, true, true, false, 10000.0, false, true, 64, false},
  };
  // RoPE scalings: each changes the prologue's frequency tables (dynamic
  // NTK computes them on the GPU with pow/log/exp from libdevice).
  auto scaled = [](GpuCase c, std::string mlir, ref::RopeScaling::Kind kind, double factor,
                   int64_t original) {
    c.scalingMlir = std::move(mlir);
    c.scaling.kind = kind;
    c.scaling.factor = factor;
    c.scaling.originalMaxPosition = original;
    return c;
  };
  using Kind = ref::RopeScaling::Kind;
  cases.push_back(scaled({"rope_linear_alibi_bf16",
                          1,
                          8,
                          8,
                          33,
                          77,
                          64,
                          true,
                          true,
                          false,
                          10000.0,
                          true,
                          true,
                          {},
                          false},
                         "#pe.linear<factor = 2.0>", Kind::Linear, 2.0, 0));
  cases.push_back(scaled(
      {"rope_ntk_f16", 1, 4, 4, 50, 50, 64, false, true, false, 10000.0, false, true, {}, false},
      "#pe.ntk<factor = 4.0>", Kind::Ntk, 4.0, 0));
  cases.push_back(scaled({"rope_dynamic_ntk_bf16",
                          1,
                          4,
                          2,
                          90,
                          90,
                          64,
                          true,
                          true,
                          false,
                          10000.0,
                          false,
                          true,
                          {},
                          false},
                         "#pe.dynamic_ntk<factor = 2.0, original_max_position = 32>",
                         Kind::DynamicNtk, 2.0, 32));
  cases.push_back(scaled({"rope_yarn_decode_f16",
                          1,
                          8,
                          2,
                          1,
                          300,
                          128,
                          false,
                          true,
                          false,
                          10000.0,
                          false,
                          true,
                          {},
                          false},
                         "#pe.yarn<factor = 4.0, original_max_position = 64>", Kind::Yarn, 4.0,
                         64));
  GpuCase llama3 = scaled({"rope_llama3_interleaved_bf16",
                           2,
                           4,
                           2,
                           40,
                           70,
                           128,
                           true,
                           true,
                           true,
                           500000.0,
                           false,
                           true,
                           {},
                           false},
                          "#pe.llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = "
                          "4.0, original_max_position = 8192>",
                          Kind::Llama3, 8.0, 8192);
  llama3.scaling.lowFreqFactor = 1.0;
  llama3.scaling.highFreqFactor = 4.0;
  cases.push_back(llama3);
  // Timing: fused RoPE + causal, bf16, b = 4, h = 32, d = 128.
  for (int64_t s : {1024, 4096, 8192})
    cases.push_back({"timed_rope_causal_bf16_s" + std::to_string(s),
                     4,
                     32,
                     32,
                     s,
                     s,
                     128,
                     true,
                     true,
                     false,
                     10000.0,
                     false,
                     true,
                     {},
                     true});
  return cases;
}

/// The case as pejit IR: pe.rope on Q and K with position ids (%qpos,
/// %kpos: the runner passes docs/semantics.md's defaults, queries at
/// skv - sq + i), pe.alibi as a bias, f32 output.
inline std::string caseMlir(const GpuCase &c) {
  std::string t = c.bf16 ? "bf16" : "f16";
  auto tensor = [&](int64_t h, int64_t s, const std::string &type) {
    return "tensor<" + std::to_string(c.batch) + "x" + std::to_string(h) + "x" + std::to_string(s) +
           "x" + std::to_string(c.headDim) + "x" + type + ">";
  };
  std::string q = tensor(c.queryHeads, c.querySeq, t), k = tensor(c.kvHeads, c.keySeq, t);
  std::string o = tensor(c.queryHeads, c.querySeq, "f32");
  std::string rope = "<layout = " + std::string(c.interleaved ? "interleaved" : "half") +
                     ", theta = " + std::to_string(c.theta) +
                     (c.scalingMlir.empty() ? "" : ", scaling = " + c.scalingMlir) + ">";
  std::string qPos = "tensor<" + std::to_string(c.querySeq) + "xi64>";
  std::string kPos = "tensor<" + std::to_string(c.keySeq) + "xi64>";
  std::string text = "func.func @" + c.name + "(%q: " + q + ", %k: " + k + ", %v: " + k +
                     (c.rope ? ", %qpos: " + qPos + ", %kpos: " + kPos : "") + ") -> " + o + " {\n";
  std::string qIn = "%q", kIn = "%k";
  if (c.rope) {
    text += "  %qr = pe.rope %q, %qpos " + rope + " : " + q + ", " + qPos + "\n";
    text += "  %kr = pe.rope %k, %kpos " + rope + " : " + k + ", " + kPos + "\n";
    qIn = "%qr";
    kIn = "%kr";
  }
  std::string biasType = "tensor<1x" + std::to_string(c.queryHeads) + "x" +
                         std::to_string(c.querySeq) + "x" + std::to_string(c.keySeq) + "xf32>";
  std::string bias;
  if (c.alibi) {
    text += "  %b = pe.alibi <num_heads = " + std::to_string(c.queryHeads) +
            ", form = causal> : " + biasType + "\n";
    bias = " bias(%b : " + biasType + ")";
  }
  text += "  %o = attn.attention " + qIn + ", " + kIn + ", %v" + bias +
          (c.causal ? " causal" : "") +
          (c.window ? " window(" + std::to_string(*c.window) + ")" : "") + " : " + q + ", " + k +
          ", " + k + " -> " + o + "\n";
  text += "  return %o : " + o + "\n}\n";
  return text;
}

/// The position ids the runner passes: keys at 0 .. skv-1, queries at the
/// bottom-right, skv - sq + i.
inline std::vector<int64_t> queryPositions(const GpuCase &c) {
  std::vector<int64_t> ids(c.querySeq);
  for (int64_t i = 0; i < c.querySeq; ++i)
    ids[i] = c.keySeq - c.querySeq + i;
  return ids;
}
inline std::vector<int64_t> keyPositions(const GpuCase &c) {
  std::vector<int64_t> ids(c.keySeq);
  for (int64_t j = 0; j < c.keySeq; ++j)
    ids[j] = j;
  return ids;
}

/// The float64 reference of the case on inputs q, k, v ([b, h, s, d], the
/// values the GPU sees) at those positions. Timed cases are big: batch 0,
/// head 0 only (against kv head 0).
inline ref::Tensor caseReference(const GpuCase &c, ref::Tensor q, ref::Tensor k, ref::Tensor v) {
  ref::AttentionOptions options;
  options.causal = c.causal;
  options.window = c.window;
  ref::Tensor bias;
  if (c.alibi) {
    bias =
        ref::alibiBias(c.queryHeads, 0, c.queryHeads, ref::AlibiForm::Causal, c.querySeq, c.keySeq);
    options.bias = &bias;
  }
  if (c.rope) {
    ref::RopeConfig rope;
    rope.theta = c.theta;
    rope.layout = c.interleaved ? ref::RopeLayout::Interleaved : ref::RopeLayout::Half;
    rope.scaling = c.scaling;
    ref::PositionIds qIds = ref::PositionIds::shared(queryPositions(c));
    ref::PositionIds kIds = ref::PositionIds::shared(keyPositions(c));
    int64_t seqLen = ref::maxPositionPlusOne(qIds, kIds);
    q = ref::applyRope(rope, q, qIds, seqLen);
    k = ref::applyRope(rope, k, kIds, seqLen);
  }
  if (c.timed) {
    auto slice = [](const ref::Tensor &t) {
      ref::Tensor s({1, 1, t.shape[2], t.shape[3]});
      std::copy(t.data.begin(), t.data.begin() + s.data.size(), s.data.begin());
      return s;
    };
    q = slice(q);
    k = slice(k);
    v = slice(v);
  }
  return ref::attention(q, k, v, options);
}

} // namespace pejit::gpucheck

#endif // PEJIT_BENCH_GPU_GPUCHECKCASES_H
