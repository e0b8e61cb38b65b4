// The GPU check's source cases: encodings whose float64 reference needs the
// reference interpreter (T5, Shaw, bias tensors, M-RoPE and axial RoPE,
// relative_to = position, softcap), and the standalone kernels (x, or an
// embedding's tokens as NAME.tokens, i64, and its table as NAME.token_table). The runner has no
// compiler, so the prepare tool (with the compiler) draws each case's inputs, computes its
// reference, and writes both into the bundle beside the kernel:
//   NAME.query, NAME.key, NAME.value          the inputs, in the input dtype
//   NAME.query_positions, NAME.key_positions  the kernel's i64 position tables
//   NAME.operand0, NAME.operand1, ...         the encoding operands
//   NAME.expected                             the float64 reference, as f32
//   NAME.call                                 a shape class's b sq skv (text)
// all raw little-endian, shapes and dtypes from NAME.meta's signature (its
// `?` dims, for a shape class's kernel, at the lengths of NAME.call). The
// inputs are fresh random values each time the bundle is prepared (rounded
// to their 16-bit dtype first, so the reference sees what the GPU sees).
// Header-only, no LLVM.
#ifndef PEJIT_BENCH_GPU_GPUSOURCECASES_H
#define PEJIT_BENCH_GPU_GPUSOURCECASES_H

#include "pejit/core/KernelSignature.h"

#include <string>
#include <vector>

namespace pejit::gpucheck {

struct GpuSourceCase {
  std::string name;
  std::string source; ///< one func.func: f16/bf16 attention, or standalone pe ops
  /// A source with `?` lengths (docs/shape-classes.md): the call's b, sq
  /// and skv, at which the bundle's inputs are drawn. Empty: static.
  std::vector<int64_t> call = {};
};

/// A kernel's shape class with its `?` dims set from a call's {b, sq, skv}.
inline Shape shapeAtCall(Shape shape, const std::vector<int64_t> &call) {
  if (call.size() == 3) {
    for (auto [dim, value] :
         {std::pair{&shape.batch, call[0]}, {&shape.querySeq, call[1]}, {&shape.keySeq, call[2]}})
      if (*dim == kDynamicDim)
        *dim = value;
  }
  return shape;
}

/// An argument's dims at a call of shape `call`: a `?` is the batch in dim 0
/// of Q, K, V and of ids per batch row, else the length it indexes (sq for
/// Q and query ids, skv for K, V and key ids).
inline std::vector<int64_t> argumentDimsAt(const KernelArgument &arg, const Shape &call) {
  std::vector<int64_t> dims = arg.shape;
  bool query = arg.role == ArgumentRole::Query || arg.readsQueryPositions();
  int64_t length = query ? call.querySeq : call.keySeq;
  bool ids = arg.dtype == DType::I32 || arg.dtype == DType::I64;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] == kDynamicDim)
      dims[d] = (ids ? d + 1 == dims.size() : d == 2) ? length : call.batch;
  return dims;
}

inline std::string sourceCaseFile(const std::string &dir, const std::string &name,
                                  const std::string &part) {
  return dir + "/" + name + "." + part;
}

/// The bundle part of a float argument: "query", "key", "value", or the
/// next "operandN" (`operands` counts the encoding operands seen so far).
inline std::string sourceCasePart(ArgumentRole role, int &operands) {
  if (role == ArgumentRole::EncodingOperand)
    return "operand" + std::to_string(operands++);
  return argumentRoleName(role);
}

inline std::vector<GpuSourceCase> gpuSourceCases() {
  return {
      // T5 past max_distance (300 keys), bidirectional, f16 table.
      {"t5_bidirectional_f16",
       "func.func @t5_bidirectional_f16(%q: tensor<1x4x300x64xf16>, %k: tensor<1x4x300x64xf16>, "
       "%v: tensor<1x4x300x64xf16>, %t: tensor<32x4xf16>) -> tensor<1x4x300x64xf32> {\n"
       "  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128> : tensor<32x4xf16> -> "
       "tensor<1x4x300x300xf16>\n"
       "  %o = attn.attention %q, %k, %v bias(%b : tensor<1x4x300x300xf16>) scale(1.0) : "
       "tensor<1x4x300x64xf16>, tensor<1x4x300x64xf16>, tensor<1x4x300x64xf16> -> "
       "tensor<1x4x300x64xf32>\n"
       "  return %o : tensor<1x4x300x64xf32>\n}\n"},
      // T5 decoder with a cache (sq < skv: split-KV), GQA, by position.
      {"t5_causal_decode_by_position_bf16",
       "func.func @t5_causal_decode_by_position_bf16(%q: tensor<2x8x7x64xbf16>, "
       "%k: tensor<2x2x700x64xbf16>, %v: tensor<2x2x700x64xbf16>, %t: tensor<32x8xf32>, "
       "%qp: tensor<2x7xi64>, %kp: tensor<2x700xi64>) -> tensor<2x8x7x64xbf16> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<2x7xi64>) "
       "key_positions(%kp : tensor<2x700xi64>) causal scale(1.0) encodings([#pe.t5_bias<"
       "num_buckets = 32, max_distance = 128, bidirectional = false, relative_to = position>]) "
       "encoding_operands(%t : tensor<32x8xf32>) : tensor<2x8x7x64xbf16>, "
       "tensor<2x2x700x64xbf16>, tensor<2x2x700x64xbf16> -> tensor<2x8x7x64xbf16>\n"
       "  return %o : tensor<2x8x7x64xbf16>\n}\n"},
      // The fallback: a user's bias tensor with a two-sided window, RoPE on
      // Q only (a pre-rotated K), sq > skv.
      {"bias_tensor_window_query_rope_f16",
       "func.func @bias_tensor_window_query_rope_f16(%q: tensor<1x4x96x64xf16>, "
       "%k: tensor<1x4x80x64xf16>, %v: tensor<1x4x80x64xf16>, %b: tensor<1x4x96x80xf32>, "
       "%p: tensor<96xi64>) -> tensor<1x4x96x64xf32> {\n"
       "  %qr = pe.rope %q, %p <layout = half, theta = 10000.0> : tensor<1x4x96x64xf16>, "
       "tensor<96xi64>\n"
       "  %o = attn.attention %qr, %k, %v bias(%b : tensor<1x4x96x80xf32>) window(20) "
       "window_right(10) : tensor<1x4x96x64xf16>, tensor<1x4x80x64xf16>, "
       "tensor<1x4x80x64xf16> -> tensor<1x4x96x64xf32>\n"
       "  return %o : tensor<1x4x96x64xf32>\n}\n"},
      // Shaw a^K + a^V, shared tables, causal, GQA, 65 rows (a partial tile).
      {"shaw_key_value_f16",
       "func.func @shaw_key_value_f16(%q: tensor<1x8x65x64xf16>, %k: tensor<1x2x65x64xf16>, "
       "%v: tensor<1x2x65x64xf16>, %ak: tensor<33x64xf16>, %av: tensor<33x64xf32>) -> "
       "tensor<1x8x65x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.relative_key<clip = 16>, "
       "#pe.relative_value<clip = 16>]) encoding_operands(%ak, %av : tensor<33x64xf16>, "
       "tensor<33x64xf32>) : tensor<1x8x65x64xf16>, tensor<1x2x65x64xf16>, "
       "tensor<1x2x65x64xf16> -> tensor<1x8x65x64xf32>\n"
       "  return %o : tensor<1x8x65x64xf32>\n}\n"},
      // Per-head Shaw tables at d = 128 after RoPE, by position, not causal.
      {"shaw_per_head_rope_by_position_bf16",
       "func.func @shaw_per_head_rope_by_position_bf16(%q: tensor<2x4x70x128xbf16>, "
       "%k: tensor<2x4x130x128xbf16>, %v: tensor<2x4x130x128xbf16>, "
       "%ak: tensor<4x9x128xbf16>, %av: tensor<4x9x128xbf16>, %qp: tensor<2x70xi64>, "
       "%kp: tensor<2x130xi64>) -> tensor<2x4x70x128xbf16> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<2x70xi64>) "
       "key_positions(%kp : tensor<2x130xi64>) encodings([#pe.rope<layout = half, theta = "
       "10000.0>, #pe.relative_key<clip = 4, relative_to = position>, #pe.relative_value<clip "
       "= 4, relative_to = position>]) encoding_operands(%ak, %av : tensor<4x9x128xbf16>, "
       "tensor<4x9x128xbf16>) : tensor<2x4x70x128xbf16>, tensor<2x4x130x128xbf16>, "
       "tensor<2x4x130x128xbf16> -> tensor<2x4x70x128xbf16>\n"
       "  return %o : tensor<2x4x70x128xbf16>\n}\n"},
      // Shaw a^V alone in decode: split-KV partials carry it.
      {"shaw_value_decode_bf16",
       "func.func @shaw_value_decode_bf16(%q: tensor<1x4x1x64xbf16>, "
       "%k: tensor<1x4x1000x64xbf16>, %v: tensor<1x4x1000x64xbf16>, %av: tensor<9x64xbf16>) -> "
       "tensor<1x4x1x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.relative_value<clip = 4>]) "
       "encoding_operands(%av : tensor<9x64xbf16>) : tensor<1x4x1x64xbf16>, "
       "tensor<1x4x1000x64xbf16>, tensor<1x4x1000x64xbf16> -> tensor<1x4x1x64xf32>\n"
       "  return %o : tensor<1x4x1x64xf32>\n}\n"},
      // M-RoPE (Qwen2-VL sections) over [3, s] ids.
      {"mrope_sections_bf16",
       "func.func @mrope_sections_bf16(%q: tensor<1x8x48x128xbf16>, %k: tensor<1x2x48x128xbf16>, "
       "%v: tensor<1x2x48x128xbf16>, %p: tensor<3x48xi64>) -> tensor<1x8x48x128xf32> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<3x48xi64>) "
       "key_positions(%p : tensor<3x48xi64>) causal encodings([#pe.rope<layout = half, "
       "theta = 1000000.0, sections = [16, 24, 24]>]) : tensor<1x8x48x128xbf16>, "
       "tensor<1x2x48x128xbf16>, tensor<1x2x48x128xbf16> -> tensor<1x8x48x128xf32>\n"
       "  return %o : tensor<1x8x48x128xf32>\n}\n"},
      // 2-D axial RoPE (SAM 2) over [2, s] ids.
      {"axial_rope_f16",
       "func.func @axial_rope_f16(%q: tensor<1x4x64x64xf16>, %k: tensor<1x4x64x64xf16>, "
       "%v: tensor<1x4x64x64xf16>, %p: tensor<2x64xi64>) -> tensor<1x4x64x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x64xi64>) "
       "key_positions(%p : tensor<2x64xi64>) encodings([#pe.rope<layout = interleaved, "
       "theta = 100.0, axial = true>]) : tensor<1x4x64x64xf16>, tensor<1x4x64x64xf16>, "
       "tensor<1x4x64x64xf16> -> tensor<1x4x64x64xf32>\n"
       "  return %o : tensor<1x4x64x64xf32>\n}\n"},
      // ALiBi measured by per-batch position ids (packed sequences), softcap.
      {"alibi_by_position_softcap_f16",
       "func.func @alibi_by_position_softcap_f16(%q: tensor<2x4x64x64xf16>, "
       "%k: tensor<2x4x64x64xf16>, %v: tensor<2x4x64x64xf16>, %p: tensor<2x64xi64>) -> "
       "tensor<2x4x64x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v query_positions(%p : tensor<2x64xi64>) "
       "key_positions(%p : tensor<2x64xi64>) causal softcap(20.0) encodings([#pe.alibi<"
       "num_heads = 4, form = causal, relative_to = position>]) : tensor<2x4x64x64xf16>, "
       "tensor<2x4x64x64xf16>, tensor<2x4x64x64xf16> -> tensor<2x4x64x64xf32>\n"
       "  return %o : tensor<2x4x64x64xf32>\n}\n"},
      // Shape classes: one `?` kernel, inputs drawn at one call's lengths.
      // A chunk of 77 queries over 300 keys, batch 2 (RoPE, GQA 4/2).
      {"rope_class_chunk_bf16",
       "func.func @rope_class_chunk_bf16(%q: tensor<?x4x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, "
       "%v: tensor<?x2x?x64xbf16>) -> tensor<?x4x?x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, "
       "theta = 500000.0>]) : tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>, "
       "tensor<?x2x?x64xbf16> -> tensor<?x4x?x64xf32>\n"
       "  return %o : tensor<?x4x?x64xf32>\n}\n",
       {2, 77, 300}},
      // A decode step over 500 keys, 32/8 heads, d = 128: split-KV chosen
      // per call, RoPE on Q only (a pre-rotated cache).
      {"rope_class_decode_bf16",
       "func.func @rope_class_decode_bf16(%q: tensor<1x32x?x128xbf16>, "
       "%k: tensor<1x8x?x128xbf16>, %v: tensor<1x8x?x128xbf16>) -> tensor<1x32x?x128xbf16> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, "
       "theta = 500000.0, apply_to = query>]) : tensor<1x32x?x128xbf16>, "
       "tensor<1x8x?x128xbf16>, tensor<1x8x?x128xbf16> -> tensor<1x32x?x128xbf16>\n"
       "  return %o : tensor<1x32x?x128xbf16>\n}\n",
       {1, 1, 500}},
      // ALiBi + softcap with `?` batch and lengths (f16), a 130-row prefill.
      {"alibi_softcap_class_f16",
       "func.func @alibi_softcap_class_f16(%q: tensor<?x12x?x64xf16>, "
       "%k: tensor<?x12x?x64xf16>, %v: tensor<?x12x?x64xf16>) -> tensor<?x12x?x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal softcap(30.0) encodings([#pe.alibi<"
       "num_heads = 12, form = causal>]) : tensor<?x12x?x64xf16>, tensor<?x12x?x64xf16>, "
       "tensor<?x12x?x64xf16> -> tensor<?x12x?x64xf32>\n"
       "  return %o : tensor<?x12x?x64xf32>\n}\n",
       {3, 130, 130}},
      // Standalone kernels (docs/standalone-kernels.md): a Llama 3
      // KV-append RoPE (f32, a shape class, 300 rows), M-RoPE on its own
      // (bf16), and a BERT embedding (bf16 tables, a class).
      {"rope_standalone_llama3_class_f32",
       "func.func @rope_standalone_llama3_class_f32(%k: tensor<?x8x?x128xf32>, "
       "%p: tensor<?xi64>) -> tensor<?x8x?x128xf32> {\n"
       "  %r = pe.rope %k, %p <layout = half, theta = 500000.0, scaling = #pe.llama3<factor = "
       "8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>> : "
       "tensor<?x8x?x128xf32>, tensor<?xi64>\n  return %r : tensor<?x8x?x128xf32>\n}\n",
       {2, 300, 300}},
      {"mrope_standalone_bf16",
       "func.func @mrope_standalone_bf16(%x: tensor<1x4x40x128xbf16>, %p: tensor<3x40xi64>) -> "
       "tensor<1x4x40x128xbf16> {\n"
       "  %r = pe.rope %x, %p <layout = half, theta = 1000000.0, sections = [16, 24, 24]> : "
       "tensor<1x4x40x128xbf16>, tensor<3x40xi64>\n  return %r : tensor<1x4x40x128xbf16>\n}\n"},
      // The backward of a standalone RoPE (docs/backward.md): its adjoint
      // on a bf16 gradient, a class at 300 rows.
      {"rope_adjoint_class_bf16",
       "func.func @rope_adjoint_class_bf16(%dy: tensor<?x8x?x128xbf16>, %p: tensor<?xi64>) -> "
       "tensor<?x8x?x128xbf16> {\n"
       "  %r = pe.rope adjoint %dy, %p <layout = half, theta = 500000.0> : "
       "tensor<?x8x?x128xbf16>, tensor<?xi64>\n  return %r : tensor<?x8x?x128xbf16>\n}\n",
       {2, 300, 300}},
      {"bert_embed_class_bf16",
       "func.func @bert_embed_class_bf16(%tokens: tensor<?x?xi64>, %words: tensor<100x64xbf16>, "
       "%p: tensor<?xi64>, %table: tensor<64x64xbf16>) -> tensor<?x?x64xbf16> {\n"
       "  %t = pe.embed %tokens, %words : tensor<?x?xi64>, tensor<100x64xbf16> -> "
       "tensor<?x?x64xbf16>\n"
       "  %x = pe.learned %t, %p, %table <max_positions = 64> : tensor<?x?x64xbf16>, "
       "tensor<?xi64>, tensor<64x64xbf16>\n  return %x : tensor<?x?x64xbf16>\n}\n",
       {2, 30, 30}},
      // Linear attention (docs/linear-attention.md): elu + 1 with RoPE on
      // the numerator, causal, GQA, a class at 300 rows (19 chunks of 16);
      // softmax_keys with RoPE before it, not causal, bf16.
      {"linear_elu_rope_numerator_class_f32",
       "func.func @linear_elu_rope_numerator_class_f32(%q: tensor<1x8x?x64xf32>, "
       "%k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>) -> tensor<1x8x?x64xf32> {\n"
       "  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) causal "
       "encodings([#pe.rope<layout = half, theta = 10000.0>]) rope_placement(rope_on_numerator) "
       ": tensor<1x8x?x64xf32>, tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> "
       "tensor<1x8x?x64xf32>\n  return %o : tensor<1x8x?x64xf32>\n}\n",
       {1, 300, 300}},
      {"linear_softmax_keys_bf16",
       "func.func @linear_softmax_keys_bf16(%q: tensor<2x4x70x128xbf16>, "
       "%k: tensor<2x4x90x128xbf16>, %v: tensor<2x4x90x128xbf16>) -> tensor<2x4x70x128xf32> {\n"
       "  %o = attn.linear_attention %q, %k, %v feature_map(softmax_keys) "
       "encodings([#pe.rope<layout = half, theta = 10000.0>]) "
       "rope_placement(rope_before_feature_map) : tensor<2x4x70x128xbf16>, "
       "tensor<2x4x90x128xbf16>, tensor<2x4x90x128xbf16> -> tensor<2x4x70x128xf32>\n"
       "  return %o : tensor<2x4x70x128xf32>\n}\n"},
  };
}

} // namespace pejit::gpucheck

#endif // PEJIT_BENCH_GPU_GPUSOURCECASES_H
