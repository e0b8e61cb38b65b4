// The float64 interpreter's evaluator (ReferenceInterpreter.cpp runs it):
// the values of one function, op by op. Its core (values, ids, dims, the
// op switch) is Interpreter.cpp; how each op kind evaluates is
// EvaluateOps.cpp. Internal to the interpreter library.
#ifndef PEJIT_REFERENCE_INTERPRETER_INTERPRETER_H
#define PEJIT_REFERENCE_INTERPRETER_INTERPRETER_H

#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEOps.h"
#include "pejit/reference/Tensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>
#include <vector>

namespace pejit::interp {

/// A value of the function: a float tensor, position ids, or omitted ids
/// (the default of the role that reads them).
struct Val {
  enum Kind { Float, Ids, Default } kind = Float;
  ref::Tensor tensor;
  ref::PositionIds ids;
};

/// One function's values, evaluated op by op with the reference/
/// functions; a failure leaves its message in `error`.
class Interpreter {
public:
  llvm::DenseMap<mlir::Value, Val> values;
  ref::Tensor returned; ///< the function's result
  std::string error;
  /// A per-row evaluation (key_lengths): the row's key count and index,
  /// which attn.paged_kv gathers (-1: all of the block table's keys).
  int64_t pagedKeys = -1, pagedRow = 0;

  bool fail(mlir::Operation *op, const std::string &message);

  /// A value's dims: its evaluated tensor's (or ids'), the transformed
  /// input's for a pe op not evaluated yet, else its type's (`?` dims are
  /// only known once the arguments bind them).
  std::vector<int64_t> dimsOf(mlir::Value value);

  const ref::Tensor &tensor(mlir::Value value);

  /// Ids of `value` (null = absent) in the role query/key of an attention
  /// with sq, skv; omitted ids take docs/semantics.md's defaults.
  std::optional<ref::PositionIds> ids(mlir::Operation *op, mlir::Value value, bool isKey,
                                      int64_t sq, int64_t skv);

  /// The ids a pe op reads at `positions`: for a QK transform, the
  /// defaults of the attention side it feeds; for other ops (absolute
  /// embeddings), 0 .. s - 1.
  std::optional<ref::PositionIds> opIds(pe::PositionalEncodingOpInterface op,
                                        mlir::Value positions);

  /// RoPE's seqLen: max(position) + 1 over every id a RoPE reads.
  std::optional<int64_t> ropeSeqLen(mlir::func::FuncOp func);

  bool omitted(mlir::Value positions);

  bool attention(attn::AttentionOp op, int64_t seqLen, ref::Tensor &out);

  /// attn.linear_attention: its fused RoPE (if any) rotates at the ids
  /// (defaults filled in) where its placement says.
  bool linearAttention(attn::LinearAttentionOp op, int64_t seqLen, ref::Tensor &out);

  /// The dims of a materialized term: its type's, `?` lengths taken from an
  /// attention that reads it (bias and key_term are [1|b, h, sq, skv];
  /// value_term [(h,) sq, skv, dv]). Unknown dims stay kDynamic.
  std::vector<int64_t> resultDims(mlir::Value result);

  /// A pe op through its interface: operands as tensors or as ids (the
  /// defaults filled in), the semantics its own files define.
  bool evaluateEncoding(pe::PositionalEncodingOpInterface op, int64_t seqLen, ref::Tensor &result);

  /// pe.embed: rows of the table at the tokens, scaled; a token outside
  /// the table is the caller's error.
  bool embed(pe::EmbedOp op, ref::Tensor &result);
  bool embedGrad(pe::EmbedGradOp op, ref::Tensor &result);
  bool ropeScaleGrad(pe::RopeScaleGradOp op, int64_t seqLen, ref::Tensor &result);
  /// pe.score_bias_grad: the encoding's reference adjoint
  /// (referenceScoreBiasGradient) of dBias.
  bool scoreBiasGrad(pe::ScoreBiasGradOp op, ref::Tensor &result);

  /// Evaluates one op into `values`; false (with `error`) if it cannot.
  bool evaluate(mlir::Operation &op, int64_t seqLen);
};

} // namespace pejit::interp

#endif // PEJIT_REFERENCE_INTERPRETER_INTERPRETER_H
