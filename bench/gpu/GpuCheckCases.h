// The GPU check matrix, shared by the two halves of bench/gpu_check.sh: the
// prepare tool (here, with the compiler) turns each case into MLIR and
// compiles it into the bundle; the runner (on the GPU machine, no compiler)
// loads the bundle by case name and builds the float64 reference from the
// same parameters. Header-only, no LLVM.
#ifndef PEJIT_BENCH_GPU_GPUCHECKCASES_H
#define PEJIT_BENCH_GPU_GPUCHECKCASES_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pejit::gpucheck {

struct GpuCase {
  std::string name;
  int64_t batch, queryHeads, kvHeads, querySeq, keySeq, headDim;
  bool bf16;
  bool rope;             ///< LLaMA-style RoPE on Q and K (half layout unless interleaved)
  bool interleaved;      ///< RoPE layout
  double theta;
  bool alibi;            ///< ALiBi (causal form) over queryHeads
  bool causal;
  std::optional<int64_t> window;
  bool timed;            ///< part of the timing table (vs torch), not numerics only
};

inline std::vector<GpuCase> gpuCases() {
  std::vector<GpuCase> cases = {
      // Numerics: odd lengths, GQA/MQA, causal or not, RoPE layouts, ALiBi,
      // decode with an offset (sq = 1 sees all 1000 keys), windows.
      {"rope_gqa_causal_f16", 1, 8, 2, 100, 100, 128, false, true, false, 500000.0, false, true, {}, false},
      {"rope_gqa_causal_bf16", 2, 8, 2, 65, 65, 128, true, true, false, 500000.0, false, true, {}, false},
      {"rope_interleaved_bf16", 1, 4, 4, 63, 257, 64, true, true, true, 10000.0, false, true, {}, false},
      {"rope_noncausal_mqa_f16", 1, 4, 1, 7, 130, 64, false, true, false, 10000.0, false, false, {}, false},
      {"alibi_12_heads_bf16", 1, 12, 12, 130, 130, 64, true, false, false, 0.0, true, true, {}, false},
      {"rope_alibi_f16", 1, 8, 8, 77, 77, 128, false, true, false, 10000.0, true, true, {}, false},
      {"decode_rope_bf16", 1, 32, 8, 1, 1000, 128, true, true, false, 500000.0, false, true, {}, false},
      {"window_bf16", 1, 4, 2, 200, 200, 128, true, true, false, 10000.0, false, true, 64, false},
  };
  // Timing: fused RoPE + causal, bf16, b = 4, h = 32, d = 128.
  for (int64_t s : {1024, 4096, 8192})
    cases.push_back({"timed_rope_causal_bf16_s" + std::to_string(s), 4, 32, 32, s, s, 128, true,
                     true, false, 10000.0, false, true, {}, true});
  return cases;
}

/// The case as pejit IR: pe.rope on Q and K with position ids (%qpos,
/// %kpos: the runner passes CONVENTIONS.md's defaults, queries at
/// skv - sq + i), pe.alibi as a bias, f32 output.
inline std::string caseMlir(const GpuCase &c) {
  std::string t = c.bf16 ? "bf16" : "f16";
  auto tensor = [&](int64_t h, int64_t s, const std::string &type) {
    return "tensor<" + std::to_string(c.batch) + "x" + std::to_string(h) + "x" +
           std::to_string(s) + "x" + std::to_string(c.headDim) + "x" + type + ">";
  };
  std::string q = tensor(c.queryHeads, c.querySeq, t), k = tensor(c.kvHeads, c.keySeq, t);
  std::string o = tensor(c.queryHeads, c.querySeq, "f32");
  std::string rope = "<layout = " + std::string(c.interleaved ? "interleaved" : "half") +
                     ", theta = " + std::to_string(c.theta) + ">";
  std::string qPos = "tensor<" + std::to_string(c.querySeq) + "xi64>";
  std::string kPos = "tensor<" + std::to_string(c.keySeq) + "xi64>";
  std::string text = "func.func @" + c.name + "(%q: " + q + ", %k: " + k + ", %v: " + k +
                     (c.rope ? ", %qpos: " + qPos + ", %kpos: " + kPos : "") + ") -> " + o +
                     " {\n";
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

} // namespace pejit::gpucheck

#endif // PEJIT_BENCH_GPU_GPUCHECKCASES_H
