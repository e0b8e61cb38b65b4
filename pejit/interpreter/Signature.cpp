// Parsing a source and reading its function's signature (Signature.h).
#include "pejit/interpreter/Signature.h"

#include "pejit/compiler/Registration.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>
#include <iterator>

namespace pejit::interp {

Expected<Parsed> parse(const std::string &source, const std::string &name) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  Parsed parsed;
  parsed.context =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  parsed.context->printOpOnDiagnostic(false); // errors name the rule, not a generic dump
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(parsed.context.get(), [&](mlir::Diagnostic &diag) {
    messages += (messages.empty() ? "" : "\n") + str(diag.getLocation()) + ": " + str(diag);
    return mlir::success();
  });
  parsed.module = mlir::parseSourceString<mlir::ModuleOp>(source, parsed.context.get(), name);
  if (!parsed.module)
    return Expected<Parsed>::error(messages.empty() ? "cannot parse the source" : messages);
  auto funcs = llvm::to_vector(parsed.module->getOps<mlir::func::FuncOp>());
  if (funcs.size() != 1 || funcs[0].isExternal())
    return Expected<Parsed>::error(name + ": expected one function with a body, found " +
                                   std::to_string(funcs.size()) + " function(s)");
  parsed.func = funcs[0];
  // One tensor; a training forward's attention returns its lse too, which
  // the interpreter leaves to the kernel (its output is the first result).
  bool trainingForward = false;
  if (parsed.func.getNumResults() == 2 && !parsed.func.getBody().empty())
    if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(parsed.func.getBody().back().back()))
      if (auto attention = ret.getOperand(1).getDefiningOp<attn::AttentionOp>())
        trainingForward =
            ret.getOperand(1) == attention.getLse() && ret.getOperand(0) == attention.getResult();
  if (parsed.func.getNumResults() != 1 && !trainingForward)
    return Expected<Parsed>::error("@" + parsed.func.getSymName().str() +
                                   " must return one tensor (or an attention's result and its "
                                   "lse)");
  return parsed;
}

std::pair<attn::AttentionOp, bool> transformTarget(pe::PositionalEncodingOpInterface op) {
  if (!op.getTransformedInput())
    return {nullptr, false};
  for (mlir::Operation *user : op->getResult(0).getUsers())
    if (auto attention = mlir::dyn_cast<attn::AttentionOp>(user)) {
      if (attention.getQuery() == op->getResult(0))
        return {attention, false};
      if (attention.getKey() == op->getResult(0))
        return {attention, true};
    }
  return {nullptr, false};
}

namespace {

/// The name of encoding operand `index` of a fused attention ("t5_table").
std::string encodingOperandName(attn::AttentionOp op, unsigned index) {
  unsigned first = 0;
  for (mlir::Attribute attr : op.getEncodingsAttr()) {
    auto encoding = mlir::cast<pe::PositionalEncodingAttrInterface>(attr);
    if (index < first + encoding.getNumEncodingOperands())
      return encoding.getEncodingOperandName(index - first);
    first += encoding.getNumEncodingOperands();
  }
  return "encoding operand #" + std::to_string(index);
}

/// attn.attention's ODS operand groups, in AttnOps.td's order; the
/// encoding_operands group comes after them.
const char *const kOperandGroupNames[] = {
    "query",    "key",        "value",          "query_positions", "key_positions", "bias",
    "key_term", "value_term", "query_segments", "key_segments",    "key_lengths"};
constexpr unsigned kEncodingOperandsGroup = std::size(kOperandGroupNames);

/// The fused encoding that reads encoding operand `index`, or null.
pe::PositionalEncodingAttrInterface encodingReading(attn::AttentionOp op, unsigned index) {
  unsigned first = 0;
  for (mlir::Attribute attr : op.getEncodingsAttr()) {
    auto encoding = mlir::cast<pe::PositionalEncodingAttrInterface>(attr);
    if (index < first + encoding.getNumEncodingOperands())
      return encoding;
    first += encoding.getNumEncodingOperands();
  }
  return {};
}

/// Whether `arg` adds to the output through the probabilities: a fused
/// value term's table, the attention's value_term, or an operand of the op
/// that computes it.
bool isValueTermArgument(mlir::BlockArgument arg) {
  auto feedsValueTerm = [](mlir::Value value) {
    for (mlir::OpOperand &use : value.getUses())
      if (auto attention = mlir::dyn_cast<attn::AttentionOp>(use.getOwner()))
        if (attention.getValueTerm() == value)
          return true;
    return false;
  };
  if (feedsValueTerm(arg))
    return true;
  for (mlir::OpOperand &use : arg.getUses()) {
    mlir::Operation *user = use.getOwner();
    if (auto attention = mlir::dyn_cast<attn::AttentionOp>(user)) {
      auto [first, count] = attention.getODSOperandIndexAndLength(kEncodingOperandsGroup);
      unsigned n = use.getOperandNumber();
      if (n >= first && n < first + count)
        if (pe::PositionalEncodingAttrInterface encoding = encodingReading(attention, n - first))
          if (encoding.getEncodingKind() == pe::EncodingKind::ValueTerm)
            return true;
    } else if (user->getNumResults() == 1 && feedsValueTerm(user->getResult(0))) {
      return true;
    }
  }
  return false;
}

std::string useRole(mlir::OpOperand &use) {
  mlir::Operation *user = use.getOwner();
  unsigned n = use.getOperandNumber();
  if (auto paged = mlir::dyn_cast<attn::PagedKvOp>(user)) {
    if (n == 1)
      return "block_table";
    // Key or value pages: where the logical tensor goes (maybe rotated).
    for (mlir::Operation *reader : paged->getUsers()) {
      mlir::Value read = paged.getResult();
      if (mlir::isa<pe::PositionalEncodingOpInterface>(reader) && reader->hasOneUse()) {
        read = reader->getResult(0);
        reader = *reader->getUsers().begin();
      }
      if (auto attention = mlir::dyn_cast<attn::AttentionOp>(reader))
        return attention.getValue() == read ? "value_pages" : "key_pages";
    }
    return "attn.paged_kv pages";
  }
  if (auto attention = mlir::dyn_cast<attn::AttentionOp>(user)) {
    auto [first, count] = attention.getODSOperandIndexAndLength(kEncodingOperandsGroup);
    if (n >= first && n < first + count)
      return encodingOperandName(attention, n - first);
    for (unsigned i = 0; i < kEncodingOperandsGroup; ++i) {
      auto [start, length] = attention.getODSOperandIndexAndLength(i);
      if (n >= start && n < start + length)
        return kOperandGroupNames[i];
    }
  }
  if (mlir::isa<pe::EmbedOp>(user))
    return n == 0 ? "tokens" : "token_table";
  if (mlir::isa<pe::EmbedGradOp>(user))
    return n == 0 ? "grad_rows" : "grad_ids";
  if (mlir::isa<pe::RopeScaleGradOp>(user))
    return n == 0   ? "output_grad"
           : n == 1 ? "transform_input"
           : n == 2 ? "transform_positions"
                    : "rope_position_scale";
  std::string name = user->getName().getStringRef().str();
  auto encodingOp = mlir::dyn_cast<pe::PositionalEncodingOpInterface>(user);
  if (!encodingOp)
    return name + " operand #" + std::to_string(n);
  // A QK transform feeding an attention: its input is the query or key.
  auto [attention, isKey] = transformTarget(encodingOp);
  if (attention) {
    std::string target = isKey ? "key" : "query";
    if (use.get() == encodingOp.getTransformedInput())
      return target;
    if (use.get() == encodingOp.getPositionIds())
      return target + "_positions";
  }
  return name + " " + encodingOp.getOperandRoleName(n);
}

std::string argumentRole(mlir::BlockArgument arg) {
  std::vector<std::string> roles;
  for (mlir::OpOperand &use : arg.getUses()) {
    std::string role = useRole(use);
    if (std::find(roles.begin(), roles.end(), role) == roles.end())
      roles.push_back(role);
  }
  if (roles.empty())
    return "unused";
  std::sort(roles.begin(), roles.end());
  if (roles == std::vector<std::string>{"key_positions", "query_positions"})
    return "positions";
  std::string joined;
  for (const std::string &role : roles)
    joined += (joined.empty() ? "" : " and ") + role;
  return joined;
}

/// A type's dims, -1 for `?` (a length each call gives).
std::vector<int64_t> signatureDims(mlir::RankedTensorType type) {
  std::vector<int64_t> dims;
  for (int64_t dim : type.getShape())
    dims.push_back(mlir::ShapedType::isDynamic(dim) ? -1 : dim);
  return dims;
}

} // namespace

Expected<FunctionSignature> signatureOf(mlir::func::FuncOp func) {
  FunctionSignature sig;
  sig.name = func.getSymName().str();
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto type = mlir::dyn_cast<mlir::RankedTensorType>(arg.getType());
    if (!type)
      return Expected<FunctionSignature>::error(
          "argument " + std::to_string(arg.getArgNumber()) + " of @" + sig.name + " has type " +
          str(arg.getType()) + ": only ranked tensors are supported");
    ArgumentInfo info;
    info.role = argumentRole(arg);
    info.shape = signatureDims(type);
    info.isInteger = type.getElementType().isInteger();
    info.elementType = str(type.getElementType());
    info.type = str(type);
    info.valueTerm = !info.isInteger && isValueTermArgument(arg);
    // Position ids may be omitted (they have defaults); a packed batch's
    // offsets, key lengths, block tables, tokens and a table gradient's ids
    // may not.
    if (!info.isInteger || info.role == "query_segments" || info.role == "key_segments" ||
        info.role == "key_lengths" || info.role == "block_table" || info.role == "tokens" ||
        info.role == "grad_ids" || info.role == "transform_positions")
      sig.requiredArguments = sig.arguments.size() + 1;
    sig.arguments.push_back(std::move(info));
  }
  auto result = mlir::dyn_cast<mlir::RankedTensorType>(func.getResultTypes()[0]);
  if (!result)
    return Expected<FunctionSignature>::error("the result of @" + sig.name +
                                              " must be a ranked tensor");
  sig.resultShape = signatureDims(result);
  sig.resultType = str(result);
  func.walk([&](attn::AttentionOp op) { sig.causal |= op.getCausal(); });
  return sig;
}

} // namespace pejit::interp
