// The float64 interpreter of source IR (ReferenceInterpreter.h): parse with
// the pejit dialects, bind the arguments, then evaluate op by op with the
// reference/ functions (Interpreter.h).
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/interpreter/Interpreter.h"
#include "pejit/interpreter/PackedBatch.h"
#include "pejit/interpreter/Signature.h"

#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEOps.h"
#include "pejit/reference/Rope.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <iterator>

namespace pejit {

namespace {

using interp::Interpreter;
using interp::parse;
using interp::Parsed;
using interp::signatureOf;
using interp::str;
using interp::transformTarget;
using interp::Val;

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
