// The float64 interpreter's core (Interpreter.h): values, position ids
// and their defaults, dims, and the switch over the ops.
#include "pejit/interpreter/Interpreter.h"
#include "pejit/interpreter/PackedBatch.h"
#include "pejit/interpreter/Signature.h"

#include "pejit/reference/Rope.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

namespace pejit::interp {

bool Interpreter::fail(mlir::Operation *op, const std::string &message) {
  error = "'" + op->getName().getStringRef().str() + "' at " + str(op->getLoc()) + ": " + message;
  return false;
}

/// A value's dims: its evaluated tensor's (or ids'), the transformed
/// input's for a pe op not evaluated yet, else its type's (`?` dims are
/// only known once the arguments bind them).
std::vector<int64_t> Interpreter::dimsOf(mlir::Value value) {
  if (auto it = values.find(value); it != values.end()) {
    if (it->second.kind == Val::Float && !it->second.tensor.shape.empty())
      return it->second.tensor.shape;
    if (it->second.kind == Val::Ids)
      return it->second.ids.shape;
  }
  if (auto op = value.getDefiningOp<pe::PositionalEncodingOpInterface>())
    if (mlir::Value input = op.getTransformedInput())
      return dimsOf(input);
  // A paged K or V not gathered yet: [b, h, keys, d] from its pages and
  // block table (keys: the row's count, or all the table's).
  if (auto paged = value.getDefiningOp<attn::PagedKvOp>()) {
    std::vector<int64_t> pages = dimsOf(paged.getPages()), table = dimsOf(paged.getBlockTable());
    if (pages.size() == 4 && table.size() == 2 && pages[1] >= 0 && table[1] >= 0)
      return {table[0], pages[2], pagedKeys >= 0 ? pagedKeys : table[1] * pages[1], pages[3]};
  }
  auto shape = mlir::cast<mlir::RankedTensorType>(value.getType()).getShape();
  return {shape.begin(), shape.end()};
}

const ref::Tensor &Interpreter::tensor(mlir::Value value) {
  static const ref::Tensor missing;
  auto it = values.find(value); // operands dominate their users: always found
  return it == values.end() ? missing : it->second.tensor;
}

/// Ids of `value` (null = absent) in the role query/key of an attention
/// with sq, skv; omitted ids take docs/semantics.md's defaults.
std::optional<ref::PositionIds> Interpreter::ids(mlir::Operation *op, mlir::Value value, bool isKey,
                                                 int64_t sq, int64_t skv) {
  if (value && !values.count(value)) {
    fail(op, "position ids must be a function argument");
    return std::nullopt;
  }
  if (value && values[value].kind == Val::Ids)
    return values[value].ids;
  if (sq < 0 || skv < 0) {
    fail(op, "its lengths are not known from the arguments, so its default position ids "
             "cannot be made");
    return std::nullopt;
  }
  return isKey ? ref::defaultKeyPositions(skv) : ref::defaultQueryPositions(sq, skv);
}

/// The ids a pe op reads at `positions`: for a QK transform, the
/// defaults of the attention side it feeds; for other ops (absolute
/// embeddings), 0 .. s - 1.
std::optional<ref::PositionIds> Interpreter::opIds(pe::PositionalEncodingOpInterface op,
                                                   mlir::Value positions) {
  if (!values.count(positions)) {
    fail(op, "position ids must be a function argument");
    return std::nullopt;
  }
  if (!op.getTransformedInput()) {
    int64_t s = dimsOf(positions).back();
    return ids(op, positions, true, s, s);
  }
  auto [attention, isKey] = transformTarget(op);
  if (!attention && values[positions].kind != Val::Ids) {
    fail(op, "its position ids are omitted but its result does not feed an "
             "attn.attention query or key, so they have no default");
    return std::nullopt;
  }
  if (!attention)
    return values[positions].ids;
  return ids(op, positions, isKey, dimsOf(attention.getQuery())[2], dimsOf(attention.getKey())[2]);
}

/// RoPE's seqLen: max(position) + 1 over every id a RoPE reads.
std::optional<int64_t> Interpreter::ropeSeqLen(mlir::func::FuncOp func) {
  int64_t seqLen = 0;
  for (mlir::Operation &op : func.getBody().getOps()) {
    std::vector<std::optional<ref::PositionIds>> all;
    if (auto encodingOp = mlir::dyn_cast<pe::PositionalEncodingOpInterface>(op))
      if (encodingOp.getTransformedInput() && encodingOp.getPositionIds())
        all.push_back(opIds(encodingOp, encodingOp.getPositionIds()));
    if (auto linear = mlir::dyn_cast<attn::LinearAttentionOp>(op))
      if (linear.getFusedQKTransform()) {
        int64_t sq = dimsOf(linear.getQuery())[2], skv = dimsOf(linear.getKey())[2];
        all.push_back(ids(&op, linear.getQueryPositions(), false, sq, skv));
        all.push_back(ids(&op, linear.getKeyPositions(), true, sq, skv));
      }
    if (auto attention = mlir::dyn_cast<attn::AttentionOp>(op)) {
      // The ids of the sides a fused QK transform rotates.
      pe::PositionalEncodingAttrInterface transform = attention.getFusedQKTransform();
      int64_t sq = dimsOf(attention.getQuery())[2], skv = dimsOf(attention.getKey())[2];
      if (transform && transform.transformsQuery())
        all.push_back(ids(&op, attention.getQueryPositions(), false, sq, skv));
      if (transform && transform.transformsKey())
        all.push_back(ids(&op, attention.getKeyPositions(), true, sq, skv));
    }
    for (const auto &positions : all) {
      if (!positions)
        return std::nullopt;
      seqLen = std::max(seqLen, ref::maxPositionPlusOne(*positions));
    }
  }
  return seqLen;
}

bool Interpreter::omitted(mlir::Value positions) {
  return !positions || values[positions].kind == Val::Default;
}

/// The dims of a materialized term: its type's, `?` lengths taken from an
/// attention that reads it (bias and key_term are [1|b, h, sq, skv];
/// value_term [(h,) sq, skv, dv]). Unknown dims stay kDynamic.
std::vector<int64_t> Interpreter::resultDims(mlir::Value result) {
  auto type = mlir::cast<mlir::RankedTensorType>(result.getType());
  std::vector<int64_t> dims(type.getShape().begin(), type.getShape().end());
  for (mlir::OpOperand &use : result.getUses()) {
    auto attention = mlir::dyn_cast<attn::AttentionOp>(use.getOwner());
    if (!attention)
      continue;
    std::vector<int64_t> q = dimsOf(attention.getQuery()), k = dimsOf(attention.getKey());
    size_t r = dims.size();
    auto fill = [&](size_t at, int64_t size) {
      if (at < r && mlir::ShapedType::isDynamic(dims[at]))
        dims[at] = size;
    };
    if ((result == attention.getBias() || result == attention.getKeyTerm()) && r == 4) {
      fill(0, q[0]);
      fill(2, q[2]);
      fill(3, k[2]);
    } else if (result == attention.getValueTerm() && r >= 3) {
      fill(r - 3, q[2]);
      fill(r - 2, k[2]);
    }
  }
  return dims;
}

/// Evaluates one op into `values`; false (with `error`) if it cannot.
bool Interpreter::evaluate(mlir::Operation &op, int64_t seqLen) {
  ref::Tensor result;
  bool ok = llvm::TypeSwitch<mlir::Operation *, bool>(&op)
                .Case([&](pe::PositionalEncodingOpInterface encodingOp) {
                  return evaluateEncoding(encodingOp, seqLen, result);
                })
                .Case([&](attn::AttentionOp a) { return attention(a, seqLen, result); })
                .Case([&](pe::EmbedOp e) { return embed(e, result); })
                .Case([&](pe::EmbedGradOp e) { return embedGrad(e, result); })
                .Case([&](pe::RopeScaleGradOp g) { return ropeScaleGrad(g, seqLen, result); })
                .Case([&](pe::ScoreBiasGradOp g) { return scoreBiasGrad(g, result); })
                .Case([&](attn::LinearAttentionOp a) { return linearAttention(a, seqLen, result); })
                .Case([&](attn::PagedKvOp p) {
                  auto table = values.find(p.getBlockTable());
                  std::string problem;
                  if (table == values.end() || table->second.kind != Val::Ids)
                    return fail(p, "its block table must be an argument of the function");
                  if (!gatherPagedKv(tensor(p.getPages()), table->second.ids, pagedKeys, pagedRow,
                                     result, problem))
                    return fail(p, problem);
                  return true;
                })
                .Case([&](mlir::func::ReturnOp ret) {
                  result = tensor(ret.getOperand(0));
                  return true;
                })
                .Default([&](mlir::Operation *other) {
                  return fail(other, "this op is not supported by the reference interpreter");
                });
  // A training forward's second result (lse) is the kernel's alone.
  if (ok && op.getNumResults() >= 1)
    values[op.getResult(0)].tensor = std::move(result);
  else if (ok && mlir::isa<mlir::func::ReturnOp>(op))
    returned = std::move(result);
  return ok;
}

} // namespace pejit::interp
