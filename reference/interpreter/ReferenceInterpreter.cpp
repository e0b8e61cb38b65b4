// The float64 interpreter of source IR (ReferenceInterpreter.h): parse with
// the pejit dialects, bind the arguments, then evaluate op by op with the
// reference/ functions.
#include "reference/interpreter/ReferenceInterpreter.h"
#include "reference/interpreter/PackedBatch.h"
#include "reference/interpreter/Signature.h"

#include "dialects/attn/AttnOps.h"
#include "dialects/pe/PEOps.h"
#include "reference/Absolute.h"
#include "reference/Attention.h"
#include "reference/LinearAttention.h"
#include "reference/Rope.h"
#include "reference/ScoreBias.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <iterator>

namespace pejit {

namespace {

using interp::parse;
using interp::Parsed;
using interp::signatureOf;
using interp::str;
using interp::transformTarget;

/// A value of the function: a float tensor, position ids, or omitted ids
/// (the default of the role that reads them).
struct Val {
  enum Kind { Float, Ids, Default } kind = Float;
  ref::Tensor tensor;
  ref::PositionIds ids;
};

/// [1|b, 1|h, sq, skv] a + b, broadcast over the first two dims.
ref::Tensor addBias(const ref::Tensor &a, const ref::Tensor &b) {
  ref::Tensor sum({std::max(a.dim(0), b.dim(0)), std::max(a.dim(1), b.dim(1)), a.dim(2), a.dim(3)});
  for (int64_t n = 0; n < sum.dim(0); ++n)
    for (int64_t h = 0; h < sum.dim(1); ++h)
      for (int64_t i = 0; i < sum.dim(2); ++i)
        for (int64_t j = 0; j < sum.dim(3); ++j)
          sum.at(n, h, i, j) = a.at(std::min(n, a.dim(0) - 1), std::min(h, a.dim(1) - 1), i, j) +
                               b.at(std::min(n, b.dim(0) - 1), std::min(h, b.dim(1) - 1), i, j);
  return sum;
}

class Interpreter {
public:
  llvm::DenseMap<mlir::Value, Val> values;
  ref::Tensor returned; ///< the function's result
  std::string error;
  /// A per-row evaluation (key_lengths): the row's key count and index,
  /// which attn.paged_kv gathers (-1: all of the block table's keys).
  int64_t pagedKeys = -1, pagedRow = 0;

  bool fail(mlir::Operation *op, const std::string &message) {
    error = "'" + op->getName().getStringRef().str() + "' at " + str(op->getLoc()) + ": " + message;
    return false;
  }

  /// A value's dims: its evaluated tensor's (or ids'), the transformed
  /// input's for a pe op not evaluated yet, else its type's (`?` dims are
  /// only known once the arguments bind them).
  std::vector<int64_t> dimsOf(mlir::Value value) {
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

  const ref::Tensor &tensor(mlir::Value value) {
    static const ref::Tensor missing;
    auto it = values.find(value); // operands dominate their users: always found
    return it == values.end() ? missing : it->second.tensor;
  }

  /// Ids of `value` (null = absent) in the role query/key of an attention
  /// with sq, skv; omitted ids take docs/semantics.md's defaults.
  std::optional<ref::PositionIds> ids(mlir::Operation *op, mlir::Value value, bool isKey,
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
  std::optional<ref::PositionIds> opIds(pe::PositionalEncodingOpInterface op,
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
    return ids(op, positions, isKey, dimsOf(attention.getQuery())[2],
               dimsOf(attention.getKey())[2]);
  }

  /// RoPE's seqLen: max(position) + 1 over every id a RoPE reads.
  std::optional<int64_t> ropeSeqLen(mlir::func::FuncOp func) {
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

  bool omitted(mlir::Value positions) {
    return !positions || values[positions].kind == Val::Default;
  }

  bool attention(attn::AttentionOp op, int64_t seqLen, ref::Tensor &out) {
    ref::Tensor q = tensor(op.getQuery()), k = tensor(op.getKey());
    int64_t sq = q.dim(2), skv = k.dim(2);
    ref::AttentionOptions options;
    options.scale = op.getEffectiveScale();
    options.causal = op.getCausal();
    if (mlir::IntegerAttr window = op.getWindowAttr())
      options.window = window.getInt();
    if (mlir::IntegerAttr right = op.getWindowRightAttr())
      options.windowRight = right.getInt();
    if (mlir::FloatAttr softcap = op.getSoftcapAttr())
      options.softcap = softcap.getValueAsDouble();
    std::optional<ref::Tensor> bias, keyTerm;
    if (op.getBias())
      bias = tensor(op.getBias());
    // Each fused encoding brings its float64 semantics through its
    // interface; its operands are the next of encoding_operands. The
    // position ids (defaults filled in) serve QK transforms and encodings
    // that measure distance by position.
    std::optional<ref::PositionIds> qIds = ids(op, op.getQueryPositions(), false, sq, skv);
    std::optional<ref::PositionIds> kIds = ids(op, op.getKeyPositions(), true, sq, skv);
    if (!qIds || !kIds)
      return false;
    unsigned nextOperand = 0;
    for (mlir::Attribute attr : op.getEncodingsAttr() ? op.getEncodingsAttr().getValue()
                                                      : llvm::ArrayRef<mlir::Attribute>()) {
      auto encoding = mlir::cast<pe::PositionalEncodingAttrInterface>(attr);
      pe::ReferenceAttention context{q.dim(0), q.dim(1), sq, skv, {}};
      context.queryPositions = &*qIds;
      context.keyPositions = &*kIds;
      for (unsigned k = 0; k < encoding.getNumEncodingOperands(); ++k)
        context.operands.push_back(&tensor(op.getEncodingOperands()[nextOperand++]));
      switch (encoding.getEncodingKind()) {
      case pe::EncodingKind::QKTransform: {
        std::string problem;
        if ((encoding.transformsQuery() &&
             !encoding.applyReferenceQKTransform(q, *qIds, omitted(op.getQueryPositions()), seqLen,
                                                 context.operands, problem)) ||
            (encoding.transformsKey() &&
             !encoding.applyReferenceQKTransform(k, *kIds, omitted(op.getKeyPositions()), seqLen,
                                                 context.operands, problem)))
          return fail(op, problem);
        break;
      }
      case pe::EncodingKind::ScoreBias: {
        if (encoding.isKeyTerm()) {
          context.query = &q;
          keyTerm = encoding.referenceKeyTerm(context);
          break;
        }
        ref::Tensor b = encoding.referenceScoreBias(context);
        if (!b.data.empty())
          bias = bias ? addBias(*bias, b) : b;
        break;
      }
      case pe::EncodingKind::ValueTerm:
        options.bucketedValueTerm = encoding.referenceValueTerm(context);
        if (!options.bucketedValueTerm)
          return fail(op, "fused value term " + str(attr) + " has no reference");
        break;
      default:
        return fail(op, "fused encoding " + str(attr) +
                            " is not supported by the reference interpreter");
      }
    }
    options.bias = bias ? &*bias : nullptr;
    options.keyTerm = op.getKeyTerm()       ? &tensor(op.getKeyTerm())
                      : keyTerm.has_value() ? &*keyTerm
                                            : nullptr;
    options.valueTerm = op.getValueTerm() ? &tensor(op.getValueTerm()) : nullptr;
    out = ref::attention(q, k, tensor(op.getValue()), options);
    return true;
  }

  /// attn.linear_attention: its fused RoPE (if any) rotates at the ids
  /// (defaults filled in) where its placement says.
  bool linearAttention(attn::LinearAttentionOp op, int64_t seqLen, ref::Tensor &out) {
    const ref::Tensor &q = tensor(op.getQuery()), &k = tensor(op.getKey());
    int64_t sq = q.dim(2), skv = k.dim(2);
    std::optional<ref::PositionIds> qIds = ids(op, op.getQueryPositions(), false, sq, skv);
    std::optional<ref::PositionIds> kIds = ids(op, op.getKeyPositions(), true, sq, skv);
    if (!qIds || !kIds)
      return false;
    ref::LinearAttentionOptions options;
    options.map = static_cast<ref::FeatureMap>(op.getFeatureMap());
    options.causal = op.getCausal();
    options.ropeOnNumerator = op.getRopePlacement() == attn::RopePlacement::OnNumerator;
    if (op.getState())
      options.state = &tensor(op.getState());
    pe::PositionalEncodingAttrInterface rope = op.getFusedQKTransform();
    std::vector<const ref::Tensor *> ropeOperands;
    for (mlir::Value operand : op.getEncodingOperands())
      ropeOperands.push_back(&tensor(operand));
    std::string problem;
    std::function<void(ref::Tensor &, bool)> rotate;
    if (rope)
      rotate = [&](ref::Tensor &x, bool isKey) {
        mlir::Value positions = isKey ? op.getKeyPositions() : op.getQueryPositions();
        if (problem.empty())
          rope.applyReferenceQKTransform(x, isKey ? *kIds : *qIds, omitted(positions), seqLen,
                                         ropeOperands, problem);
      };
    out = ref::linearAttention(q, k, tensor(op.getValue()), options, rotate);
    if (!problem.empty())
      return fail(op, problem);
    return true;
  }

  /// The dims of a materialized term: its type's, `?` lengths taken from an
  /// attention that reads it (bias and key_term are [1|b, h, sq, skv];
  /// value_term [(h,) sq, skv, dv]). Unknown dims stay kDynamic.
  std::vector<int64_t> resultDims(mlir::Value result) {
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

  /// A pe op through its interface: operands as tensors or as ids (the
  /// defaults filled in), the semantics its own files define.
  bool evaluateEncoding(pe::PositionalEncodingOpInterface op, int64_t seqLen, ref::Tensor &result) {
    pe::ReferenceOpArgs args;
    args.seqLen = seqLen;
    std::vector<std::optional<ref::PositionIds>> resolved(op->getNumOperands());
    for (auto [n, operand] : llvm::enumerate(op->getOperands())) {
      bool isIds = mlir::isa<mlir::IntegerType>(
          mlir::cast<mlir::RankedTensorType>(operand.getType()).getElementType());
      args.tensors.push_back(isIds ? nullptr : &tensor(operand));
      if (isIds) {
        resolved[n] = opIds(op, operand);
        if (!resolved[n])
          return false;
        args.idsOmitted = args.idsOmitted || omitted(operand);
      }
      args.ids.push_back(resolved[n] ? &*resolved[n] : nullptr);
    }
    // A materialized term (a bias, ...) is sized by its result's dims: the
    // type's, with `?` lengths from the attention it feeds. An additive
    // embedding's result is its input's shape.
    if (!op.getTransformedInput() && op.getEncodingKind() != pe::EncodingKind::Additive &&
        op->getNumResults() == 1) {
      auto type = mlir::cast<mlir::RankedTensorType>(op->getResult(0).getType());
      args.resultShape = resultDims(op->getResult(0));
      if (llvm::is_contained(args.resultShape, mlir::ShapedType::kDynamic))
        return fail(op, "its result " + str(type) +
                            " has `?` dims that no attention it feeds sizes; give it static "
                            "lengths (docs/shape-classes.md)");
    }
    std::string problem;
    if (!op.evaluateReference(args, result, problem))
      return fail(op, problem);
    return true;
  }

  /// pe.embed: rows of the table at the tokens, scaled; a token outside
  /// the table is the caller's error.
  bool embed(pe::EmbedOp op, ref::Tensor &result) {
    auto tokens = values.find(op.getTokens());
    if (tokens == values.end() || tokens->second.kind != Val::Ids)
      return fail(op, "its tokens must be an argument of the function");
    const ref::Tensor &table = tensor(op.getTable());
    for (size_t i = 0; i < tokens->second.ids.data.size(); ++i) {
      int64_t token = tokens->second.ids.data[i];
      if (token < 0 || token >= table.dim(0))
        return fail(op, "token " + std::to_string(token) + " at flat index " + std::to_string(i) +
                            " is outside the table's " + std::to_string(table.dim(0)) + " rows");
    }
    result = ref::tokenEmbedding(tokens->second.ids, table, op.getScale().convertToDouble());
    return true;
  }

  /// Evaluates one op into `values`; false (with `error`) if it cannot.
  bool evaluate(mlir::Operation &op, int64_t seqLen) {
    ref::Tensor result;
    bool ok =
        llvm::TypeSwitch<mlir::Operation *, bool>(&op)
            .Case([&](pe::PositionalEncodingOpInterface encodingOp) {
              return evaluateEncoding(encodingOp, seqLen, result);
            })
            .Case([&](attn::AttentionOp a) { return attention(a, seqLen, result); })
            .Case([&](pe::EmbedOp e) { return embed(e, result); })
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
    if (ok && op.getNumResults() == 1)
      values[op.getResult(0)].tensor = std::move(result);
    else if (ok && mlir::isa<mlir::func::ReturnOp>(op))
      returned = std::move(result);
    return ok;
  }
};

/// Why `argument` cannot be argument i (empty: it can): a float tensor for
/// a float argument, ids for an integer one, of its rank and (checkDims)
/// of its static dims; -1 (`?`) matches any size.
std::string argumentProblem(const ArgumentInfo &info, size_t i, const ReferenceArgument &argument,
                            bool checkDims) {
  std::string what = "argument " + std::to_string(i) + " (" + info.role + ", " + info.type + ")";
  auto matches = [&](const std::vector<int64_t> &given) {
    if (given.size() != info.shape.size())
      return false;
    for (size_t d = 0; d < given.size() && checkDims; ++d)
      if (info.shape[d] != -1 && info.shape[d] != given[d])
        return false;
    return true;
  };
  if (const auto *t = std::get_if<ref::Tensor>(&argument)) {
    if (info.isInteger || !matches(t->shape))
      return what + " was given a float tensor " + ref::shapeToString(t->shape);
    return "";
  }
  const auto &ids = std::get<ref::PositionIds>(argument);
  if (!info.isInteger || !matches(ids.shape))
    return what + " was given position ids " + ref::shapeToString(ids.shape);
  return "";
}

/// Binds `arguments` to the function's and evaluates it once.
Expected<ref::Tensor> evaluateFunction(Parsed &parsed, const FunctionSignature &sig,
                                       const std::vector<ReferenceArgument> &arguments,
                                       const PackedCall *call = nullptr) {
  using Result = Expected<ref::Tensor>;
  Interpreter interpreter;
  if (call) {
    interpreter.pagedKeys = call->keyCount;
    interpreter.pagedRow = std::max<int64_t>(call->row, 0);
  }
  for (size_t i = 0; i < sig.arguments.size(); ++i) {
    const ArgumentInfo &info = sig.arguments[i];
    Val &val = interpreter.values[parsed.func.getArgument(i)];
    std::string what = "argument " + std::to_string(i) + " (" + info.role + ", " + info.type + ")";
    if (i >= arguments.size()) {
      val.kind = Val::Default;
      continue;
    }
    // A split call's parts are slices of checked arguments: their batch and
    // lengths are the slice's.
    if (std::string problem = argumentProblem(info, i, arguments[i], /*checkDims=*/!call);
        !problem.empty())
      return Result::error(problem);
    if (const auto *t = std::get_if<ref::Tensor>(&arguments[i])) {
      val.tensor = *t;
    } else {
      val.kind = Val::Ids;
      val.ids = std::get<ref::PositionIds>(arguments[i]);
    }
  }
  std::optional<int64_t> seqLen = interpreter.ropeSeqLen(parsed.func);
  if (!seqLen)
    return Result::error(interpreter.error);
  for (mlir::Operation &op : parsed.func.getBody().getOps())
    if (!interpreter.evaluate(op, *seqLen))
      return Result::error(interpreter.error);
  return std::move(interpreter.returned);
}

} // namespace

Expected<FunctionSignature> describeFunction(const std::string &mlirSource,
                                             const std::string &name) {
  Expected<Parsed> parsed = parse(mlirSource, name);
  if (!parsed)
    return Expected<FunctionSignature>::error(parsed.error());
  return signatureOf(parsed->func);
}

Expected<ref::Tensor> interpretReference(const std::string &mlirSource,
                                         const std::vector<ReferenceArgument> &arguments,
                                         const std::string &name) {
  using Result = Expected<ref::Tensor>;
  Expected<Parsed> parsed = parse(mlirSource, name);
  if (!parsed)
    return Result::error(parsed.error());
  Expected<FunctionSignature> sig = signatureOf(parsed->func);
  if (!sig)
    return Result::error(sig.error());
  if (arguments.size() < sig->requiredArguments || arguments.size() > sig->arguments.size())
    return Result::error("@" + sig->name + " takes " + std::to_string(sig->requiredArguments) +
                         " to " + std::to_string(sig->arguments.size()) + " arguments, got " +
                         std::to_string(arguments.size()));
  if (isPackedBatch(*sig)) {
    for (size_t i = 0; i < arguments.size(); ++i)
      if (std::string problem = argumentProblem(sig->arguments[i], i, arguments[i], true);
          !problem.empty())
        return Result::error(problem);
    return interpretPackedBatch(
        *sig, arguments, [&](const std::vector<ReferenceArgument> &part, const PackedCall &call) {
          return evaluateFunction(*parsed, *sig, part, &call);
        });
  }
  return evaluateFunction(*parsed, *sig, arguments);
}

} // namespace pejit
