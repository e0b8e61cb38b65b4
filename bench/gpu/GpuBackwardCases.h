// The GPU check's backward cases (docs/backward.md, "NVIDIA"): a forward
// source whose backward the prepare step derives (with the gradients of
// the encodings' operands) and compiles, and the recipe
// of its float64 reference, written again for pejit/reference (RoPE, ALiBi,
// T5, the mask, softcap) as the x86 backward's tests write it. The bundle
// holds, beside the kernel (NAME.ptx, .cubin, .meta, .call as a source
// case's):
//   NAME.query, .key, .value, .operand0   the inputs, in their dtypes
//   NAME.output                           the forward's float64 O, rounded
//   NAME.output_grad                      dO, fresh random values
//   NAME.query_positions, .key_positions  the kernel's (default) tables
//   NAME.expected_dq, _dk, _dv            the float64 gradients, as f32
//   NAME.expected_d<operand>              an operand's, by its signature name
//                                         (expected_dt5_table, ...)
// Header-only, no LLVM.
#ifndef PEJIT_BENCH_GPU_GPUBACKWARDCASES_H
#define PEJIT_BENCH_GPU_GPUBACKWARDCASES_H

#include "pejit/reference/Rope.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pejit::gpucheck {

struct GpuBackwardCase {
  std::string name;
  std::string source;             ///< the forward: one func.func, f16/bf16 q, k, v, default ids
  std::vector<int64_t> call = {}; ///< a `?` kernel's b, sq, skv; empty: static
  // The reference's recipe: the forward's encodings and options again.
  std::optional<ref::RopeConfig> rope = std::nullopt;
  std::optional<int64_t> alibiHeads = std::nullopt; ///< ALiBi, causal form
  /// ALiBi's slopes are the operand alibi_slopes [hq]; the RoPE's position
  /// scale is the operand rope_position_scale [1].
  bool learnedSlopes = false, ropeScale = false;
  /// The score biases measure distance by the ids (relative_to =
  /// position); ids arguments are drawn as a source case's.
  bool byPosition = false;
  /// Shaw's terms with this clip: the key term (its table the operand
  /// shaw_key_table) and the value term (shaw_value_table); 0: none.
  int64_t shawKeyClip = 0, shawValueClip = 0;
  /// A bias tensor (the operand `bias`, [1|b, 1|h, sq, skv]) with its
  /// gradient.
  bool biasTensor = false;
  struct T5 {
    int64_t buckets, maxDistance;
    bool bidirectional;
  };
  std::optional<T5> t5 = std::nullopt; ///< its table is the operand t5_table [buckets, hq]
  bool causal = false;
  std::optional<int64_t> window = std::nullopt;
  std::optional<double> softcap = std::nullopt;
};

/// 16-bit gradients: 2e-2 of each gradient's max |value| (P and dS are
/// rounded to 16 bits for the tensor-core products, as in the forward).
inline constexpr double kBackwardTolerance = 2e-2;

inline std::vector<GpuBackwardCase> gpuBackwardCases() {
  ref::RopeConfig half;
  ref::RopeConfig interleaved;
  interleaved.layout = ref::RopeLayout::Interleaved;
  std::vector<GpuBackwardCase> cases;
  auto add = [&](std::string name, std::string source) -> GpuBackwardCase & {
    cases.push_back(GpuBackwardCase{std::move(name), std::move(source)});
    return cases.back();
  };
  // RoPE, causal, GQA 4/2, 130 rows (three row tiles, the last partial).
  GpuBackwardCase &rope =
      add("backward_rope_causal_gqa_bf16",
          "func.func @backward_rope_causal_gqa_bf16(%q: tensor<2x4x130x64xbf16>, "
          "%k: tensor<2x2x130x64xbf16>, %v: tensor<2x2x130x64xbf16>) -> tensor<2x4x130x64xbf16> {\n"
          "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, "
          "theta = 10000.0>]) : tensor<2x4x130x64xbf16>, tensor<2x2x130x64xbf16>, "
          "tensor<2x2x130x64xbf16> -> tensor<2x4x130x64xbf16>\n"
          "  return %o : tensor<2x4x130x64xbf16>\n}\n");
  rope.rope = half;
  rope.causal = true;
  // ALiBi with a window and a softcap at d = 128 (16-row steps), sq < skv
  // (a chunk after a cache), f32 output.
  GpuBackwardCase &alibi =
      add("backward_alibi_window_softcap_f16",
          "func.func @backward_alibi_window_softcap_f16(%q: tensor<1x4x96x128xf16>, "
          "%k: tensor<1x4x160x128xf16>, %v: tensor<1x4x160x128xf16>) -> tensor<1x4x96x128xf32> {\n"
          "  %o = attn.attention %q, %k, %v causal window(40) softcap(5.0) "
          "encodings([#pe.alibi<num_heads = 4, form = causal>]) : tensor<1x4x96x128xf16>, "
          "tensor<1x4x160x128xf16>, tensor<1x4x160x128xf16> -> tensor<1x4x96x128xf32>\n"
          "  return %o : tensor<1x4x96x128xf32>\n}\n");
  alibi.alibiHeads = 4;
  alibi.causal = true;
  alibi.window = 40;
  alibi.softcap = 5.0;
  // T5 (bidirectional, past max_distance) after interleaved RoPE, MQA, a
  // shape class called at 1 x 150 x 150, not causal; the table's gradient.
  GpuBackwardCase &t5 =
      add("backward_t5_rope_class_bf16",
          "func.func @backward_t5_rope_class_bf16(%q: tensor<?x4x?x64xbf16>, "
          "%k: tensor<?x1x?x64xbf16>, %v: tensor<?x1x?x64xbf16>, %t: tensor<32x4xf32>) -> "
          "tensor<?x4x?x64xf32> {\n"
          "  %o = attn.attention %q, %k, %v encodings([#pe.rope<layout = interleaved, "
          "theta = 10000.0>, #pe.t5_bias<num_buckets = 32, max_distance = 64, bidirectional = "
          "true>]) encoding_operands(%t : tensor<32x4xf32>) : tensor<?x4x?x64xbf16>, "
          "tensor<?x1x?x64xbf16>, tensor<?x1x?x64xbf16> -> tensor<?x4x?x64xf32>\n"
          "  return %o : tensor<?x4x?x64xf32>\n}\n");
  t5.call = {1, 150, 150};
  t5.rope = interleaved;
  t5.t5 = GpuBackwardCase::T5{32, 64, true};
  // ALiBi's learned slopes and the RoPE's position scale, with their
  // gradients (per-warp partials), causal, GQA 4/2, 100 rows.
  GpuBackwardCase &learned =
      add("backward_learned_slopes_rope_scale_bf16",
          "func.func @backward_learned_slopes_rope_scale_bf16(%q: tensor<1x4x100x64xbf16>, "
          "%k: tensor<1x2x100x64xbf16>, %v: tensor<1x2x100x64xbf16>, %s: tensor<1xf32>, "
          "%sl: tensor<4xf32>) -> tensor<1x4x100x64xbf16> {\n"
          "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, theta = "
          "10000.0, runtime_scale = true>, #pe.alibi<num_heads = 4, form = causal, learned_slopes "
          "= true>]) encoding_operands(%s, %sl : tensor<1xf32>, tensor<4xf32>) : "
          "tensor<1x4x100x64xbf16>, tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16> -> "
          "tensor<1x4x100x64xbf16>\n"
          "  return %o : tensor<1x4x100x64xbf16>\n}\n");
  learned.rope = half;
  learned.ropeScale = true;
  learned.alibiHeads = 4;
  learned.learnedSlopes = true;
  learned.causal = true;
  // T5 and ALiBi measured by per-batch position ids (packed sequences),
  // beside RoPE at the same ids, causal, GQA 4/2; the table's gradient.
  GpuBackwardCase &byPosition =
      add("backward_by_position_t5_alibi_rope_f16",
          "func.func @backward_by_position_t5_alibi_rope_f16(%q: tensor<2x4x80x64xf16>, "
          "%k: tensor<2x2x80x64xf16>, %v: tensor<2x2x80x64xf16>, %t: tensor<32x4xf32>, "
          "%p: tensor<2x80xi64>) -> tensor<2x4x80x64xf16> {\n"
          "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x80xi64>) "
          "key_positions(%p : tensor<2x80xi64>) causal encodings([#pe.rope<layout = half, theta "
          "= 10000.0>, #pe.alibi<num_heads = 4, form = causal, relative_to = position>, "
          "#pe.t5_bias<num_buckets = 32, max_distance = 64, bidirectional = false, relative_to = "
          "position>]) encoding_operands(%t : tensor<32x4xf32>) : tensor<2x4x80x64xf16>, "
          "tensor<2x2x80x64xf16>, tensor<2x2x80x64xf16> -> tensor<2x4x80x64xf16>\n"
          "  return %o : tensor<2x4x80x64xf16>\n}\n");
  byPosition.rope = half;
  byPosition.alibiHeads = 4;
  byPosition.t5 = GpuBackwardCase::T5{32, 64, false};
  byPosition.byPosition = true;
  byPosition.causal = true;
  // Shaw's key and value terms (shared tables) after RoPE, causal, GQA
  // 4/2, 70 rows: dq through the key term too, and both tables' gradients.
  GpuBackwardCase &shaw =
      add("backward_shaw_key_value_rope_bf16",
          "func.func @backward_shaw_key_value_rope_bf16(%q: tensor<1x4x70x64xbf16>, "
          "%k: tensor<1x2x70x64xbf16>, %v: tensor<1x2x70x64xbf16>, %ak: tensor<17x64xbf16>, "
          "%av: tensor<17x64xbf16>) -> tensor<1x4x70x64xbf16> {\n"
          "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, theta = "
          "10000.0>, #pe.relative_key<clip = 8>, #pe.relative_value<clip = 8>]) "
          "encoding_operands(%ak, %av : tensor<17x64xbf16>, tensor<17x64xbf16>) : "
          "tensor<1x4x70x64xbf16>, tensor<1x2x70x64xbf16>, tensor<1x2x70x64xbf16> -> "
          "tensor<1x4x70x64xbf16>\n"
          "  return %o : tensor<1x4x70x64xbf16>\n}\n");
  shaw.rope = half;
  shaw.causal = true;
  shaw.shawKeyClip = 8;
  shaw.shawValueClip = 8;
  // A bias tensor shared by the batch, with its gradient (dS per score,
  // summed over the batch), causal, sq < skv, batch 2.
  GpuBackwardCase &bias =
      add("backward_bias_tensor_grad_f16",
          "func.func @backward_bias_tensor_grad_f16(%q: tensor<2x4x60x64xf16>, "
          "%k: tensor<2x4x90x64xf16>, %v: tensor<2x4x90x64xf16>, %b: tensor<1x4x60x90xf32>) -> "
          "tensor<2x4x60x64xf16> {\n"
          "  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x60x90xf32>) causal : "
          "tensor<2x4x60x64xf16>, tensor<2x4x90x64xf16>, tensor<2x4x90x64xf16> -> "
          "tensor<2x4x60x64xf16>\n"
          "  return %o : tensor<2x4x60x64xf16>\n}\n");
  bias.biasTensor = true;
  bias.causal = true;
  // No encoding, d = 128 with dv = 64, not causal, 200 rows.
  add("backward_plain_d128_dv64_f16",
      "func.func @backward_plain_d128_dv64_f16(%q: tensor<1x2x200x128xf16>, "
      "%k: tensor<1x2x200x128xf16>, %v: tensor<1x2x200x64xf16>) -> tensor<1x2x200x64xf16> {\n"
      "  %o = attn.attention %q, %k, %v : tensor<1x2x200x128xf16>, tensor<1x2x200x128xf16>, "
      "tensor<1x2x200x64xf16> -> tensor<1x2x200x64xf16>\n"
      "  return %o : tensor<1x2x200x64xf16>\n}\n");
  return cases;
}

} // namespace pejit::gpucheck

#endif // PEJIT_BENCH_GPU_GPUBACKWARDCASES_H
