// Shared pieces of the kernel template instantiations (TemplateSupport.h).
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/compiler/passes/Instantiate.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "pejit/dialects/Limits.h"
#include "pejit/dialects/attn/AttnOps.h"

#include "llvm/Support/MemoryBuffer.h"

#include <cstdio>
#include <cstdlib>

using namespace mlir;

namespace pejit {

std::string formatFloat(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.9e", value);
  return buffer;
}

/// Replaces every ${NAME}; fails on a name without a value.
FailureOr<std::string> substitute(const std::string &text,
                                  const std::map<std::string, std::string> &params, Operation *op) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t start = text.find("${", pos);
    if (start == std::string::npos)
      break;
    size_t end = text.find('}', start);
    std::string name = text.substr(start + 2, end - start - 2);
    auto it = params.find(name);
    if (it == params.end())
      return op->emitError() << "kernel template parameter ${" << name << "} has no value";
    out += text.substr(pos, start - pos) + it->second;
    pos = end + 1;
  }
  return out + text.substr(pos);
}

/// The one function, whose body is one attn.attention on its arguments (K
/// and V maybe paged: attn.paged_kv, which the runtime gathers).
FailureOr<FusedAttention> findFusedAttention(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return module.emitError() << "expected one function to compile, found " << funcs.size();
  FusedAttention fused{funcs[0], nullptr, {}};
  for (Operation &op : fused.func.getBody().getOps()) {
    if (auto attention = dyn_cast<attn::AttentionOp>(op)) {
      if (fused.op)
        return op.emitError() << "expected one attn.attention per kernel, found another";
      fused.op = attention;
    } else if (!isa<func::ReturnOp, attn::PagedKvOp>(op)) {
      return op.emitError() << "'" << op.getName()
                            << "' cannot be compiled into the kernel: only a fused "
                               "attn.attention can (no fused kernel hook for it yet)";
    }
  }
  if (!fused.op)
    return fused.func.emitError() << "no attn.attention to compile";
  attn::AttentionOp op = fused.op;
  // The kernel writes the attention's result to the caller's output: a
  // function that does not return it computes nothing a caller can see.
  // A training forward returns its lse too: the kernel's second output.
  auto returnOp = dyn_cast<func::ReturnOp>(fused.func.getBody().back().getTerminator());
  if (!returnOp || returnOp.getOperands() != op.getResults())
    return fused.func.emitError() << "the function must return the attn.attention's result "
                                     "(and its lse, if it has one; nothing else): that is the "
                                     "kernel's output";
  fused.signature.writesLse = bool(op.getLse());
  if (op.getBias())
    return op.emitError() << "the kernel reads a bias tensor as an encoding operand: run "
                             "pe-fuse-into-attention first (it makes it #pe.bias_tensor)";
  if (op.getKeyTerm())
    return op.emitError() << "the kernel takes no key_term tensor: a key term fuses only from "
                             "pe.relative_key on the attention's own, unrotated Q";
  if (op.getValueTerm())
    return op.emitError() << "the kernel takes no value_term tensor: a value term fuses only "
                             "from pe.relative_value (run pe-fuse-into-attention first)";
  // The kernel binds each of Q, K and V from its own argument.
  if (op.getQuery() == op.getKey() || op.getQuery() == op.getValue() ||
      op.getKey() == op.getValue())
    return op.emitError() << "the kernel takes query, key and value as three arguments, but this "
                             "attention reads one tensor as more than one of them: pass it as "
                             "separate arguments (the same buffer may be given for each)";
  // A paged K and V (attn.paged_kv): the kernel takes their page pools and
  // one block table, and gathers the rows each call reads.
  auto keyPages = op.getKey().getDefiningOp<attn::PagedKvOp>();
  auto valuePages = op.getValue().getDefiningOp<attn::PagedKvOp>();
  if (bool(keyPages) != bool(valuePages))
    return op.emitError() << "the " << (keyPages ? "key" : "value")
                          << " is paged (attn.paged_kv) but the " << (keyPages ? "value" : "key")
                          << " is not: the kernel reads both "
                          << "from pages or neither";
  if (keyPages && keyPages.getBlockTable() != valuePages.getBlockTable())
    return op.emitError() << "the paged key and value read different block tables: the kernel "
                             "takes one";
  Value key = keyPages ? keyPages.getPages() : op.getKey();
  Value value = valuePages ? valuePages.getPages() : op.getValue();
  Value blockTable = keyPages ? keyPages.getBlockTable() : Value();
  std::pair<Value, ArgumentRole> operandRoles[] = {
      {op.getQuery(), ArgumentRole::Query},
      {key, keyPages ? ArgumentRole::KeyPages : ArgumentRole::Key},
      {value, valuePages ? ArgumentRole::ValuePages : ArgumentRole::Value},
      {blockTable, ArgumentRole::BlockTable},
      {op.getQueryPositions(), ArgumentRole::QueryPositions},
      {op.getKeyPositions(), ArgumentRole::KeyPositions},
      {op.getQuerySegments(), ArgumentRole::QuerySegments},
      {op.getKeySegments(), ArgumentRole::KeySegments},
      {op.getKeyLengths(), ArgumentRole::KeyLengths}};
  // Encoding operand n: its name from the encoding that reads it.
  SmallVector<std::string> operandNames;
  if (ArrayAttr encodings = op.getEncodingsAttr())
    for (Attribute attr : encodings) {
      auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
      for (unsigned k = 0; k < encoding.getNumEncodingOperands(); ++k)
        operandNames.push_back(encoding.getEncodingOperandName(k));
    }
  for (BlockArgument arg : fused.func.getArguments()) {
    KernelArgument argument;
    bool found = false;
    for (auto [value, role] : operandRoles)
      if (value == arg && !found) {
        argument.role = role;
        found = true;
      }
    // One tensor of position ids for both Q and K (e.g. LLaMA's position_ids).
    if (arg == op.getQueryPositions() && arg == op.getKeyPositions())
      argument.role = ArgumentRole::Positions;
    // The kernel reads encoding operands in the fused op's order, which
    // need not be the function's: the signature records each argument's
    // slots, and the runtime binds by them.
    for (auto [n, operand] : llvm::enumerate(op.getEncodingOperands()))
      if (operand == arg && (!found || argument.role == ArgumentRole::EncodingOperand)) {
        argument.role = ArgumentRole::EncodingOperand;
        if (argument.name.empty())
          argument.name = operandNames[n];
        argument.slots.push_back(static_cast<unsigned>(n));
        found = true;
      }
    if (!found)
      return fused.func.emitError()
             << "argument #" << arg.getArgNumber() << " is not an operand of attn.attention";
    describeArgumentType(arg.getType(), argument);
    fused.signature.arguments.push_back(std::move(argument));
  }
  for (auto [n, operand] : llvm::enumerate(op.getEncodingOperands()))
    if (!isa<BlockArgument>(operand))
      return op.emitError() << "encoding operand #" << n << " (" << operandNames[n]
                            << ") is computed by '" << operand.getDefiningOp()->getName()
                            << "': the kernel reads it from an argument of the function";
  // A packed batch runs each sequence as a call of its own lengths: an
  // operand sized by the packed lengths (a bias tensor) has no such slice.
  if (op.getQuerySegments() || op.getKeyLengths())
    for (auto [n, operand] : llvm::enumerate(op.getEncodingOperands()))
      if (!cast<RankedTensorType>(operand.getType()).hasStaticShape())
        return op.emitError() << "encoding operand #" << n << " (" << operandNames[n]
                              << ") has `?` lengths, which segments and key_lengths cannot "
                                 "slice per sequence: "
                                 "fuse the encoding that computes it instead";
  for (auto [value, role] : operandRoles)
    if (value && !isa<BlockArgument>(value))
      return op.emitError() << "operand '" << argumentRoleName(role) << "' is computed by '"
                            << value.getDefiningOp()->getName()
                            << "', which could not be fused into the attention";
  return fused;
}

void describeArgumentType(Type type, KernelArgument &argument) {
  auto tensor = cast<RankedTensorType>(type);
  for (int64_t dim : tensor.getShape())
    argument.shape.push_back(ShapedType::isDynamic(dim) ? kDynamicDim : dim);
  Type element = tensor.getElementType();
  argument.dtype = element.isF16()         ? DType::F16
                   : element.isBF16()      ? DType::BF16
                   : element.isInteger(32) ? DType::I32
                   : element.isInteger(64) ? DType::I64
                                           : DType::F32;
}

/// softcap * tanh(s / softcap), pointwise.
Value emitSoftcap(OpBuilder &b, Location loc, Value score, double softcap) {
  Value cap = pe::constantLike(b, loc, score, softcap);
  Value invCap = pe::constantLike(b, loc, score, 1.0 / softcap);
  Value t = math::TanhOp::create(b, loc, arith::MulFOp::create(b, loc, score, invCap));
  return arith::MulFOp::create(b, loc, t, cap);
}

void spliceKernel(ModuleOp module, FusedAttention &found, ModuleOp kernel, DictionaryAttr info) {
  found.func.erase();
  Block *body = module.getBody();
  for (Operation &kernelOp : llvm::make_early_inc_range(kernel.getBody()->getOperations()))
    kernelOp.moveBefore(body, body->end());
  module->setAttr(kKernelInfoAttr, info);
}

void spliceX86Kernel(ModuleOp module, func::FuncOp func, const KernelSignature &signature,
                     ModuleOp kernel, NamedAttrList info, StringRef dtype, StringRef outDtype) {
  Builder attrs(module.getContext());
  info.append("target", attrs.getStringAttr("x86-avx2"));
  info.append("dtype", attrs.getStringAttr(dtype));
  info.append("out_dtype", attrs.getStringAttr(outDtype));
  info.append("function", attrs.getStringAttr(func.getSymName()));
  info.append("arguments", attrs.getStringAttr(signature.str()));
  FusedAttention found{func, nullptr, signature};
  spliceKernel(module, found, kernel, attrs.getDictionaryAttr(info));
}

std::string scalarConvertText(const std::string &from, const std::string &to) {
  if (from == to)
    return "%w = arith.bitcast %v : " + from + " to " + to;
  const char *op = from == "f32" ? "arith.truncf" : "arith.extf";
  return "%w = " + std::string(op) + " %v : " + from + " to " + to;
}

std::string x86WidenOneBody(const std::string &t) {
  if (t == "f32")
    return "return %x : f32";
  return "%w = arith.extf %x : " + t + " to f32\n  return %w : f32";
}

std::string x86WidenBody(const std::string &t) {
  if (t == "f32")
    return "return %x : vector<8xf32>";
  return "%w = arith.extf %x : vector<8x" + t + "> to vector<8xf32>\n  return %w : vector<8xf32>";
}

const char *kernelElementTypeName(Type type) {
  return type.isF32() ? "f32" : type.isF16() ? "f16" : type.isBF16() ? "bf16" : nullptr;
}

std::string loadTemplate(const std::string &relativePath, const char *embedded) {
  if (const char *dir = std::getenv("PEJIT_TEMPLATE_DIR")) {
    if (auto buffer = llvm::MemoryBuffer::getFile(std::string(dir) + "/" + relativePath))
      return (*buffer)->getBuffer().str();
  }
  return embedded;
}

std::string loadTemplateWithBlocks(TemplateFile kernel, llvm::ArrayRef<TemplateFile> blocks) {
  std::string text = loadTemplate(kernel.path, kernel.embedded);
  std::string blockText;
  for (const TemplateFile &block : blocks)
    blockText += loadTemplate(block.path, block.embedded) + "\n";
  const std::string marker = "// @pejit-blocks\n";
  if (size_t at = text.find(marker); at != std::string::npos)
    return text.replace(at, marker.size(), blockText);
  return text + "\n" + blockText;
}

pe::AttentionShape attentionShape(attn::AttentionOp op, int64_t vectorWidth) {
  pe::AttentionShape shape =
      attentionShape(op.getQuery(), op.getKey(), op.getValue(), op.getQueryPositions(),
                     op.getKeyPositions(), op.getFusedQKTransform(), vectorWidth);
  shape.scale = op.getEffectiveScale();
  return shape;
}

pe::AttentionShape attentionShape(Value q, Value k, Value v, Value queryPositions,
                                  Value keyPositions, pe::PositionalEncodingAttrInterface transform,
                                  int64_t vectorWidth) {
  auto qType = cast<RankedTensorType>(q.getType());
  auto kType = cast<RankedTensorType>(k.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  pe::AttentionShape shape;
  shape.batch = qType.getDimSize(0);
  shape.queryHeads = qType.getDimSize(1);
  shape.querySeq = qType.getDimSize(2);
  shape.headDim = qType.getDimSize(3);
  shape.kvHeads = kType.getDimSize(1);
  shape.keySeq = kType.getDimSize(2);
  shape.valueDim = vType.getDimSize(3);
  shape.vectorWidth = vectorWidth;
  // [s] ids are shared by the batch; [b, s] ids have a row per batch entry;
  // M-RoPE's [A, s] and [A, b, s] add a leading axis.
  int64_t axes = transform ? transform.getPositionAxes() : 0;
  shape.positionAxes = std::max<int64_t>(axes, 1);
  auto positionRows = [&](Value positions) -> int64_t {
    if (!positions)
      return 1;
    auto type = cast<RankedTensorType>(positions.getType());
    return type.getRank() == (axes > 0 ? 3 : 2) ? type.getDimSize(axes > 0 ? 1 : 0) : 1;
  };
  shape.queryPositionRows = positionRows(queryPositions);
  shape.keyPositionRows = positionRows(keyPositions);
  return shape;
}

LogicalResult requireX86QueryKeyValue(Operation *op, Value q, Value k, Value v, Value result) {
  auto qType = cast<RankedTensorType>(q.getType());
  auto kType = cast<RankedTensorType>(k.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  auto oType = cast<RankedTensorType>(result.getType());
  for (auto [type, name] :
       {std::pair{qType, "query"}, {kType, "key"}, {vType, "value"}, {oType, "result"}}) {
    // A shape class leaves the batch (dim 0) and the lengths (dim 2) to
    // the call (docs/shape-classes.md); heads and head dims are the class's.
    for (int64_t dim : {1, 3})
      if (type.isDynamicDim(dim))
        return op->emitError() << name << " " << type << " has a dynamic dim " << dim
                               << ": the x86 kernel takes `?` only for the batch (dim 0) and the "
                                  "lengths (dim 2)";
    if (!kernelElementTypeName(type.getElementType()))
      return op->emitError() << name << " element type " << type.getElementType()
                             << " is not supported by the x86 kernel (f32, f16 or bf16)";
  }
  Type inType = qType.getElementType();
  if (kType.getElementType() != inType || vType.getElementType() != inType)
    return op->emitError() << "the x86 kernel takes query, key and value of one element type, got "
                           << inType << ", " << kType.getElementType() << ", "
                           << vType.getElementType();
  return success();
}

namespace {
/// A length for the window rules: a `?` length may be as long as any.
int64_t lengthBound(int64_t length) {
  return ShapedType::isDynamic(length) ? limits::kMaxLength : length;
}
} // namespace

std::optional<int64_t> effectiveRightWindow(attn::AttentionOp op, int64_t querySeq) {
  querySeq = lengthBound(querySeq);
  // j <= i + skv - sq + r holds for every j < skv and i >= 0 once r >= sq - 1;
  // under a causal mask (j <= i + off) a right window hides nothing more.
  std::optional<int64_t> right = op.getWindowRight();
  if (!right || op.getCausal() || *right >= querySeq - 1)
    return std::nullopt;
  return right;
}

std::optional<int64_t> effectiveWindow(attn::AttentionOp op, int64_t keySeq) {
  keySeq = lengthBound(keySeq);
  std::optional<int64_t> window = op.getWindow();
  if (window && *window >= keySeq)
    return std::nullopt;
  return window;
}

} // namespace pejit

namespace pejit {

FailureOr<SmallVector<std::string>> encodingOperandSlots(attn::AttentionOp op, unsigned slots) {
  return encodingOperandSlots(op, op.getEncodingOperands(), slots);
}

FailureOr<SmallVector<std::string>> encodingOperandSlots(Operation *op, ValueRange operands,
                                                         unsigned slots) {
  if (operands.size() > slots)
    return op->emitError() << "the kernel takes at most " << slots << " encoding operands, got "
                           << operands.size();
  SmallVector<std::string> types;
  for (auto [n, operand] : llvm::enumerate(operands)) {
    auto type = cast<RankedTensorType>(operand.getType());
    if (!type.hasStaticShape() || !kernelElementTypeName(type.getElementType()))
      return op->emitError() << "encoding operand #" << n << " has type " << type
                             << ": the kernel takes static shapes of f32, f16 or bf16";
    std::string text = "memref<";
    for (int64_t dim : type.getShape())
      text += std::to_string(dim) + "x";
    types.push_back(text + kernelElementTypeName(type.getElementType()) + ">");
  }
  while (types.size() < slots)
    types.push_back("memref<1xf32>");
  return types;
}

} // namespace pejit

namespace pejit {

int64_t tableScratchFloats(pe::PositionalEncodingAttrInterface qkTransform,
                           const pe::AttentionShape &shape) {
  if (!qkTransform)
    return 0;
  return qkTransform.getScratchFloatsPerPosition(shape, false) * shape.queryPositionRows *
             shape.querySeq +
         qkTransform.getScratchFloatsPerPosition(shape, true) * shape.keyPositionRows *
             shape.keySeq;
}

int64_t queryTileScratchFloats(ArrayRef<pe::PositionalEncodingAttrInterface> encodings,
                               const pe::AttentionShape &shape) {
  int64_t floats = 0;
  for (pe::PositionalEncodingAttrInterface encoding : encodings)
    floats += encoding.getQueryTileScratchFloats(shape);
  return floats;
}

} // namespace pejit

pejit::EncodingArgumentTexts pejit::encodingArgumentTexts(ArrayRef<std::string> slotTypes) {
  EncodingArgumentTexts text;
  std::string names, types;
  for (auto [n, type] : llvm::enumerate(slotTypes)) {
    std::string name = "%e" + std::to_string(n);
    text.args += ", " + name + ": " + type;
    names += (n ? ", " : "") + name;
    types += (n ? ", " : "") + type;
    text.callArgs += ", " + name;
    text.callTypes += ", " + type;
  }
  if (!slotTypes.empty())
    text.operands = " operands(" + names + " : " + types + ")";
  return text;
}

std::string pejit::x86LaneIota(int64_t lanes) {
  std::string text = "[";
  for (int64_t i = 0; i < lanes; ++i)
    text += (i ? ", " : "") + std::to_string(i);
  return text + "]";
}
