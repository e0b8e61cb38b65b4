// The typed list of a compiled kernel's arguments, in the order of the
// source function's: what each is (its role), its name, shape and dtype.
// The compiler writes it (pejit.kernel's `arguments`), the disk cache keeps
// it in its meta, and every runner (x86, nvidia, the GPU check) binds its
// inputs through it: one serializer, no role tables elsewhere.
//
// Text form: one token per argument, separated by spaces,
//   ROLE[=NAME]:DTYPE:SHAPE      e.g. "query:f32:1x16x2048x128"
//                                     "encoding_operand=t5_table:f32:32x16"
//                                     "encoding_operand=bias@1:f32:1x1x40x45"
// ROLE is query, key, value, query_positions, key_positions, positions (one
// tensor of ids for both), encoding_operand, query_segments or key_segments
// (a packed batch's cu_seqlens), key_lengths (per-row key counts),
// key_pages, value_pages or block_table (a paged KV cache),
// transform_input or transform_positions (a standalone pe.rope), output or
// output_grad (a backward's o and dO, docs/backward.md), grad_rows or
// grad_ids (pe.embed_grad's); DTYPE
// f32, f16, bf16, i32 or
// i64; SHAPE the dims joined by 'x', '?' for one the call gives
// ("query:f32:1x32x?x128", docs/shape-classes.md). An encoding operand's
// @SLOTS (comma-separated) are its places in the fused op's
// encoding_operands, the order the kernel reads them in; written only where
// they differ from its ordinal among the encoding operands (the default).
#ifndef PEJIT_RUNTIME_CORE_KERNELSIGNATURE_H
#define PEJIT_RUNTIME_CORE_KERNELSIGNATURE_H

#include "pejit/core/Types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pejit {

enum class ArgumentRole {
  Query,
  Key,
  Value,
  QueryPositions,
  KeyPositions,
  Positions, ///< one tensor of ids for both queries and keys
  EncodingOperand,
  QuerySegments, ///< cu_seqlens_q of a packed batch (i32 [n + 1])
  KeySegments,   ///< cu_seqlens_k
  KeyLengths,    ///< each batch row's key count (i32 [b], cache_seqlens)
  KeyPages,      ///< a paged K cache [num_pages, page_size, hkv, d]
  ValuePages,    ///< a paged V cache [num_pages, page_size, hkv, dv]
  BlockTable,    ///< each batch row's pages (i32 [b, max_pages])
  /// A standalone QK transform's tensor [b, h, s, d] and its position ids
  /// (required: a tensor on its own has no default positions).
  TransformInput,
  TransformPositions,
  /// pe.embed's token ids (i32/i64 [b, s]) and its table [vocab, d]: a
  /// standalone kernel that gathers its rows.
  EmbedTokens,
  EmbedTable,
  /// attn.linear_attention's carried state [b, hq, d, dv + 2] (f32): read
  /// at the start of the call, written back at its end.
  LinearState,
  /// attn.attention_backward's forward output o and its gradient dO
  /// ([b, hq, sq, dv]): a backward kernel (docs/backward.md).
  Output,
  OutputGradient,
  /// A training forward's lse [b, hq, sq] (f32), which a backward derived
  /// from it reads instead of recomputing.
  LogSumExp,
  /// pe.embed_grad's gradient rows [b, s, d] and their table ids ([b, s] or
  /// [s]): a kernel that sums the rows into a table's gradient.
  GradRows,
  GradIds,
};

/// "query", "key", ..., "encoding_operand".
const char *argumentRoleName(ArgumentRole role);

struct KernelArgument {
  ArgumentRole role = ArgumentRole::Query;
  /// An encoding operand's name (e.g. "t5_table"); empty for other roles.
  std::string name;
  /// An encoding operand's slots: its places among the fused op's
  /// encoding_operands (the order the kernel reads them in), which need not
  /// be the function's argument order; one argument may fill several.
  std::vector<unsigned> slots;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;

  /// The role, or for an encoding operand its name: how messages call it.
  std::string label() const;
  /// Position ids may be omitted (the docs/semantics.md defaults).
  bool optional() const;
  bool readsQueryPositions() const;
  bool readsKeyPositions() const;
};

struct KernelSignature {
  std::vector<KernelArgument> arguments;
  /// A materialized term (pe.alibi, pe.t5_bias, pe.relative_key,
  /// pe.relative_value on their own): the kernel writes [1|b, h, sq, skv]
  /// (a value term [(h,) sq, skv, dv]) from its encoding operands (and a key
  /// term's query), so its arguments may be none. In str() as the token
  /// "materialized_bias".
  bool materializedBias = false;
  /// A backward kernel's encoding operand gradients (docs/backward.md): the
  /// slots whose gradient it writes after dq, dk, dv, in that order. In
  /// str() as the token "operand_grads=S,S,...".
  std::vector<unsigned> operandGradients;
  /// Among operandGradients, the slot whose gradient is the score gradient
  /// summed over the operand's broadcast dims (a bias tensor's): the kernel
  /// writes dS per score, the runtime reduces it. In str() as the token
  /// "score_grad=S".
  std::optional<unsigned> scoreShapedGradient;
  /// A training forward (attn.attention with an lse result): the kernel
  /// also writes each row's log-sum-exp [b, hq, sq] when a run asks for it.
  /// In str() as the token "lse".
  bool writesLse = false;
  /// A linear attention backward (attn.linear_attention_backward): one
  /// item per (b, hkv) writes dq, dk, dv (docs/backward.md). In str() as
  /// the token "linear_backward".
  bool linearBackward = false;
  /// A materialized Shaw term's gradients (pe.relative_term_grad): the
  /// token "shaw_term_grad".
  bool shawTermGradient = false;

  /// Arguments a run must be given (all but trailing position ids).
  size_t requiredInputs() const;
  /// The encoding operands' arguments, in the order of the function.
  std::vector<size_t> encodingOperandArguments() const;
  /// How many encoding operand slots the kernel reads (one past the
  /// largest slot).
  size_t encodingOperandSlotCount() const;
  /// Labels, in order.
  std::vector<std::string> labels() const;

  /// Whether an argument gives the query (key) positions: without one, the
  /// side takes the defaults (docs/semantics.md).
  bool declaresQueryPositions() const;
  bool declaresKeyPositions() const;
  /// Whether the kernel takes a packed batch (query_segments and
  /// key_segments, docs/shape-classes.md).
  bool segmented() const;
  /// Whether it takes key_lengths (each batch row's keys, a prefix of K).
  bool keyLengths() const;
  /// Whether K and V come from a paged cache (key_pages, value_pages,
  /// block_table).
  bool paged() const;
  /// Whether the kernel is a standalone QK transform (pe.rope on its own,
  /// docs/standalone-kernels.md): it takes transform_input.
  bool standaloneTransform() const;
  /// A standalone kernel of an embedding: its input is [b, s, d] (run as
  /// [b, 1, s, d], one head), or it gathers one (tokenEmbedding).
  bool embeddingTransform() const;
  /// A standalone kernel that starts with pe.embed: it takes tokens.
  bool tokenEmbedding() const;
  /// A position scale gradient kernel (pe.rope_scale_grad): it takes
  /// transform_input and output_grad.
  bool ropeScaleGradient() const;
  /// A table gradient kernel (pe.embed_grad): it takes grad_rows.
  bool embeddingGradient() const;
  /// A materialized bias's tensor gradient (pe.score_bias_grad): it takes
  /// output_grad (dBias) and the tensor, no query.
  bool scoreBiasGradient() const;
  /// A backward kernel (attn.attention_backward): it takes output_grad and
  /// writes dq, dk, dv (docs/backward.md).
  bool backward() const;

  std::string str() const;
  /// Reads str()'s text; an error names the malformed token.
  static Expected<KernelSignature> parse(const std::string &text);
};

} // namespace pejit

#endif // PEJIT_RUNTIME_CORE_KERNELSIGNATURE_H
