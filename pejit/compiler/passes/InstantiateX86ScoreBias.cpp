// attn-instantiate-x86-template, materialized form: a function whose body
// is one score-bias or value-term pe op (pe.alibi, pe.t5_bias,
// pe.relative_key, pe.relative_value) becomes the kernel of
// templates/x86/score_bias.mlir or value_term.mlir
// (docs/standalone-kernels.md "Materialized biases"): the encoding's own
// hooks, written out. This file names no concrete encoding.
//
//   score bias: out[b, h, i, j] = score_mod(0, b, h, i, j)
//   key term:   the same at scale 1, its tile Q[b, h, i, :]  (q_i . a^K[rel + k])
//   value term: out[a, i, j, :] = row(bucket(a, i, j))       (a^V[rel + k])
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include "templates/X86ScoreBias.inc"
#include "templates/X86ValueTerm.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// The function's one pe op when its encoding is a fusable score bias or
/// value term (the kernels have its hooks), else null.
pe::PositionalEncodingOpInterface materializedBias(ModuleOp module) {
  auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
  if (funcs.size() != 1)
    return nullptr;
  pe::PositionalEncodingOpInterface found;
  for (Operation &op : funcs[0].getBody().getOps()) {
    if (isa<func::ReturnOp>(op))
      continue;
    auto encodingOp = dyn_cast<pe::PositionalEncodingOpInterface>(op);
    if (!encodingOp || found)
      return nullptr;
    pe::PositionalEncodingAttrInterface encoding = encodingOp.getPositionalEncoding();
    pe::EncodingKind kind = encoding.getEncodingKind();
    if ((kind != pe::EncodingKind::ScoreBias && kind != pe::EncodingKind::ValueTerm) ||
        !encoding.isFusable())
      return nullptr;
    found = encodingOp;
  }
  return found;
}

/// Rows per item, and keys per chunk, of a bias of the distance alone: a
/// row of 512 + 64 distances on the stack serves 64 rows of output.
constexpr int64_t kDistanceRows = 64, kDistanceKeys = 512;

/// The body of @narrow1: one f32 as `t`, through @narrow8's rounding.
std::string narrowOneBody(const std::string &t) {
  if (t == "f32")
    return "return %x : f32";
  return "%v = vector.broadcast %x : f32 to vector<8xf32>\n"
         "  %n = func.call @narrow8(%v) : (vector<8xf32>) -> vector<8x" +
         t + ">\n  %e = vector.extract %n[0] : " + t + " from vector<8x" + t +
         ">\n  return %e : " + t;
}

} // namespace

bool pejit::isMaterializedBias(ModuleOp module) {
  return static_cast<bool>(materializedBias(module));
}

LogicalResult pejit::instantiateX86ScoreBias(ModuleOp module) {
  pe::PositionalEncodingOpInterface op = materializedBias(module);
  if (!op)
    return module.emitError() << "expected one function of one score-bias or value-term pe op";
  func::FuncOp func = op->getParentOfType<func::FuncOp>();
  pe::PositionalEncodingAttrInterface encoding = op.getPositionalEncoding();
  bool valueTerm = encoding.getEncodingKind() == pe::EncodingKind::ValueTerm;
  bool keyTerm = encoding.isKeyTerm();
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  if (returnOp.getNumOperands() != 1 || returnOp.getOperand(0) != op->getResult(0))
    return func.emitError() << "the function must return the " << op->getName()
                            << "'s result (and nothing else): that is the kernel's output";
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  const char *outName = kernelElementTypeName(outType.getElementType());
  if (!outName)
    return op->emitError() << "element type " << outType.getElementType()
                           << " is not supported by the x86 kernel (f32, f16 or bf16)";
  // The output as 4-D [o0, o1, o2, o3]: [1|b, h, sq, skv] for a score bias,
  // [1|h, sq, skv, dv] for a value term (a shared table's [sq, skv, dv]
  // with a leading 1).
  SmallVector<int64_t> out(outType.getShape());
  if (valueTerm && out.size() == 3)
    out.insert(out.begin(), 1);
  if (out.size() != 4 || ShapedType::isDynamic(out[valueTerm ? 0 : 1]) ||
      (valueTerm && ShapedType::isDynamic(out[3])))
    return op->emitError() << "the kernel writes "
                           << (valueTerm ? "[(h,) sq, skv, dv] with static h and dv"
                                         : "[1|b, h, sq, skv] with a static h")
                           << ", got " << outType;

  // The op's operands: its encoding operands (tables) and, for a key term,
  // the query (its one other operand).
  SmallVector<Value> operands = op.getEncodingOperands();
  Value query;
  for (Value operand : op->getOperands())
    if (!llvm::is_contained(operands, operand))
      query = operand;
  if (keyTerm != static_cast<bool>(query))
    return op->emitError() << "a materialized key term reads one query, other biases none";
  pe::AttentionShape shape;
  if (valueTerm) {
    shape.batch = 1;
    shape.queryHeads = shape.kvHeads = out[0];
    shape.querySeq = out[1];
    shape.keySeq = out[2];
    shape.headDim = 8;
    shape.valueDim = out[3];
  } else {
    shape.batch = out[0];
    shape.queryHeads = shape.kvHeads = out[1];
    shape.querySeq = out[2];
    shape.keySeq = out[3];
    shape.headDim = shape.valueDim = 8; // no Q, K or V: unused by score hooks
  }
  shape.vectorWidth = 8;
  std::string queryType = "memref<1x1x1x8xf32>";
  const char *queryName = "f32";
  if (keyTerm) {
    auto type = cast<RankedTensorType>(query.getType());
    queryName = kernelElementTypeName(type.getElementType());
    if (!queryName)
      return op->emitError() << "query element type " << type.getElementType()
                             << " is not supported by the x86 kernel (f32, f16 or bf16)";
    shape.headDim = type.getDimSize(3);
    // One query row per tile: the key term's scratch is [2k + 1] and its
    // score hook reads it at scale 1 (the term itself, unscaled).
    shape.queryTileRows = 1;
    shape.hasQueryTileScratch = true;
    shape.scale = 1.0;
    queryType = "memref<" + dimToString(shape.batch) + "x" + std::to_string(shape.queryHeads) +
                "x" + dimToString(shape.querySeq) + "x" + std::to_string(shape.headDim) + "x" +
                queryName + ", strided<[?, ?, ?, 1], offset: ?>>";
  }
  if (failed(encoding.verifyForAttention(shape.queryHeads, shape.headDim,
                                         [&] { return op->emitOpError(); })))
    return failure();
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, operands, 1);
  if (failed(slots))
    return failure();

  KernelSignature signature;
  signature.materializedBias = true;
  for (BlockArgument arg : func.getArguments()) {
    KernelArgument argument;
    if (arg == query) {
      argument.role = ArgumentRole::Query;
    } else if (auto operand = llvm::find(operands, arg); operand != operands.end()) {
      argument.role = ArgumentRole::EncodingOperand;
      argument.name = encoding.getEncodingOperandName(operand - operands.begin());
      argument.slots = {static_cast<unsigned>(operand - operands.begin())};
    } else {
      return func.emitError() << "argument #" << arg.getArgNumber() << " is not an operand of "
                              << op->getName();
    }
    describeArgumentType(arg.getType(), argument);
    signature.arguments.push_back(std::move(argument));
  }
  for (Value operand : op->getOperands())
    if (!isa<BlockArgument>(operand))
      return op->emitError() << "the kernel reads its tensors from arguments of the function";

  // A bias of the distance alone: items of kDistanceRows rows, each chunk
  // of keys one row of distances copied per row (score_bias.mlir).
  bool distanceOnly = !valueTerm && !keyTerm && encoding.isDistanceOnly();
  int64_t rowsPerItem = distanceOnly ? kDistanceRows : 1;
  std::map<std::string, std::string> params = {{"OT", outName},
                                               {"E0", (*slots)[0]},
                                               {"NARROW8", x86NarrowBody(outName)},
                                               {"NARROW1", narrowOneBody(outName)}};
  std::string text;
  if (valueTerm) {
    params.insert({{"A", std::to_string(out[0])},
                   {"SQ", dimToString(out[1])},
                   {"SKV", dimToString(out[2])},
                   {"DV", std::to_string(out[3])},
                   {"DV_WHOLE", std::to_string(out[3] / 8 * 8)}});
    text = loadTemplate("x86/value_term.mlir", kX86ValueTermTemplate);
  } else {
    int64_t tileFloats = std::max<int64_t>(queryTileScratchFloats({encoding}, shape), 8);
    std::string tileType = "memref<" + std::to_string(tileFloats) + "xf32>";
    std::string rowType = std::string("memref<1x") + std::to_string(shape.headDim) + "x" +
                          queryName + ", strided<[?, 1], offset: ?>>";
    params.insert(
        {{"B", dimToString(out[0])},
         {"H", std::to_string(out[1])},
         {"SQ", dimToString(out[2])},
         {"SKV", dimToString(out[3])},
         {"Q", queryType},
         {"OPERANDS", operands.empty() ? "" : "operands(%e0 : !E0)"},
         {"QUERY_TILE",
          keyTerm ? "%qrow = memref.subview %q[%b, %h, %i, 0] [1, 1, 1, " +
                        std::to_string(shape.headDim) + "] [1, 1, 1, 1] : !Q to " + rowType +
                        "\n  %TS = memref.alloca() {alignment = 64 : i64} : " + tileType +
                        "\n  attn.query_tile_prologue %TS, batch %b, head %h, start %i, rows %c1 "
                        "operands(%e0 : !E0) query(%qrow : " +
                        rowType + ") : " + tileType
                  : ""},
         {"TILE", keyTerm ? "tile(%TS : " + tileType + ", %i)" : ""},
         {"R", std::to_string(rowsPerItem)},
         {"C", std::to_string(kDistanceKeys)},
         {"DIAG", std::to_string(kDistanceKeys + rowsPerItem + 7)},
         {"DISTANCE_ONLY", distanceOnly ? "true" : "false"},
         {"STREAM_MIN", std::to_string(kX86StreamMinElements)}});
    text = loadTemplate("x86/score_bias.mlir", kX86ScoreBiasTemplate);
  }
  FailureOr<std::string> substituted = substitute(text, params, op);
  if (failed(substituted))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*substituted, module.getContext());
  if (!kernel)
    return op->emitError() << "the kernel template did not parse after substitution";
  if (failed(expandHooks(*kernel, shape, {encoding}, std::nullopt)))
    return failure();

  // Items: one per tile_m output rows of o3 elements, o0 o1 ceil(o2 /
  // tile_m) of them (the runtime plans a `?` shape's calls by the same
  // rule, pejit/runtime/X86Bias.cpp).
  bool staticShape = outType.hasStaticShape();
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items",
              attrs.getI64IntegerAttr(
                  staticShape ? out[0] * out[1] * ((out[2] + rowsPerItem - 1) / rowsPerItem) : 0));
  info.append("scratch_floats", attrs.getI64IntegerAttr(0));
  info.append("tile_m", attrs.getI64IntegerAttr(rowsPerItem));
  info.append("tile_n", attrs.getI64IntegerAttr(8));
  spliceX86Kernel(module, func, signature, *kernel, info, keyTerm ? queryName : outName, outName);
  return success();
}
