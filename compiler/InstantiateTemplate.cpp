// attn-instantiate-template: the fused attention function of a module becomes
// the kernel of templates/x86/avx2_attention.mlir. The template's ${NAME}
// parameters (shapes, tiles, mask flags, scale) are substituted as text, the
// result is parsed, and its hook ops are expanded by the fused encodings
// through PositionalEncodingAttrInterface; this file never names a concrete
// encoding.
#include "compiler/InstantiateTemplate.h"
#include "compiler/Passes.h"
#include "dialects/attn/AttnOps.h"
#include "dialects/pe/PEAttrs.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "templates/X86Avx2Attention.inc"

namespace pejit {
#define GEN_PASS_DEF_INSTANTIATETEMPLATE
#include "compiler/Passes.h.inc"
} // namespace pejit

using namespace mlir;
using namespace pejit;

namespace {

/// The template text: embedded at build time, or $PEJIT_TEMPLATE_DIR/x86/... .
std::string loadTemplate() {
  if (const char *dir = std::getenv("PEJIT_TEMPLATE_DIR")) {
    std::string path = std::string(dir) + "/x86/avx2_attention.mlir";
    if (auto buffer = llvm::MemoryBuffer::getFile(path))
      return (*buffer)->getBuffer().str();
  }
  return kX86Avx2AttentionTemplate;
}

std::string formatFloat(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.9e", value);
  return buffer;
}

/// Replaces every ${NAME}; fails on a name without a value.
FailureOr<std::string> substitute(const std::string &text,
                                  const std::map<std::string, std::string> &params,
                                  Operation *op) {
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

struct FusedAttention {
  func::FuncOp func;
  attn::AttentionOp op;
  SmallVector<Attribute> roles;
};

/// The one function, whose body is one attn.attention on its arguments.
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
    } else if (!isa<func::ReturnOp>(op)) {
      return op.emitError() << "'" << op.getName()
                            << "' cannot be compiled into the kernel: only a fused "
                               "attn.attention can (no fused kernel hook for it yet)";
    }
  }
  if (!fused.op)
    return fused.func.emitError() << "no attn.attention to compile";
  attn::AttentionOp op = fused.op;
  if (op.getBias() || op.getKeyTerm() || op.getValueTerm())
    return op.emitError() << "the x86 kernel takes no bias, key_term or value_term "
                             "tensor: fuse the encoding that produces it "
                             "(pe-fuse-into-attention) or drop it";
  std::pair<Value, StringRef> operandRoles[] = {
      {op.getQuery(), "query"}, {op.getKey(), "key"}, {op.getValue(), "value"},
      {op.getQueryPositions(), "query_positions"}, {op.getKeyPositions(), "key_positions"}};
  Builder builder(module.getContext());
  for (BlockArgument arg : fused.func.getArguments()) {
    StringRef role;
    for (auto [value, name] : operandRoles)
      if (value == arg && role.empty())
        role = name;
    // One tensor of position ids for both Q and K (e.g. LLaMA's position_ids).
    if (arg == op.getQueryPositions() && arg == op.getKeyPositions())
      role = "positions";
    if (role.empty())
      return fused.func.emitError() << "argument #" << arg.getArgNumber()
                                    << " is not an operand of attn.attention";
    fused.roles.push_back(builder.getStringAttr(role));
  }
  for (auto [value, name] : operandRoles)
    if (value && !isa<BlockArgument>(value))
      return op.emitError() << "operand '" << name << "' is computed by '"
                            << value.getDefiningOp()->getName()
                            << "', which could not be fused into the attention";
  return fused;
}

/// softcap * tanh(s / softcap) on every score of the tile.
void emitSoftcap(OpBuilder &b, Location loc, Value scores, double softcap, int64_t lanes) {
  auto type = cast<MemRefType>(scores.getType());
  auto vecType = VectorType::get({lanes}, b.getF32Type());
  auto idx = [&](int64_t v) -> Value { return arith::ConstantIndexOp::create(b, loc, v); };
  auto splat = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, vecType,
                                     DenseElementsAttr::get(vecType, static_cast<float>(v)));
  };
  Value cap = splat(softcap), invCap = splat(1.0 / softcap);
  auto rows = scf::ForOp::create(b, loc, idx(0), idx(type.getDimSize(0)), idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(rows.getBody());
  auto cols = scf::ForOp::create(b, loc, idx(0), idx(type.getDimSize(1)), idx(lanes));
  b.setInsertionPointToStart(cols.getBody());
  SmallVector<Value> at{rows.getInductionVar(), cols.getInductionVar()};
  Value s = vector::LoadOp::create(b, loc, vecType, scores, at);
  Value t = math::TanhOp::create(b, loc, arith::MulFOp::create(b, loc, s, invCap));
  vector::StoreOp::create(b, loc, arith::MulFOp::create(b, loc, t, cap), scores, at);
}

} // namespace

LogicalResult pejit::instantiateX86Template(ModuleOp module, const TemplateTiles &tiles) {
  FailureOr<FusedAttention> found = findFusedAttention(module);
  if (failed(found))
    return failure();
  attn::AttentionOp op = found->op;
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto kType = cast<RankedTensorType>(op.getKey().getType());
  auto vType = cast<RankedTensorType>(op.getValue().getType());
  for (auto [type, name] : {std::pair{qType, "query"}, {kType, "key"}, {vType, "value"}}) {
    if (!type.hasStaticShape())
      return op.emitError() << name << " has a dynamic shape " << type
                            << ": pejit compiles one kernel per shape";
    if (!type.getElementType().isF32())
      return op.emitError() << name << " element type " << type.getElementType()
                            << " is not supported by the x86 kernel yet (f32 only)";
  }
  pe::AttentionShape shape;
  shape.batch = qType.getDimSize(0);
  shape.queryHeads = qType.getDimSize(1);
  shape.querySeq = qType.getDimSize(2);
  shape.headDim = qType.getDimSize(3);
  shape.kvHeads = kType.getDimSize(1);
  shape.keySeq = kType.getDimSize(2);
  shape.valueDim = vType.getDimSize(3);
  shape.vectorWidth = 8;
  auto positionRows = [](Value positions) -> int64_t {
    if (!positions)
      return 1;
    auto type = cast<RankedTensorType>(positions.getType());
    return type.getRank() == 2 ? type.getDimSize(0) : 1;
  };
  shape.queryPositionRows = positionRows(op.getQueryPositions());
  shape.keyPositionRows = positionRows(op.getKeyPositions());
  if (shape.headDim % 8 != 0 || shape.valueDim % 16 != 0)
    return op.emitError() << "the AVX2 kernel needs d % 8 == 0 and dv % 16 == 0, got d = "
                          << shape.headDim << ", dv = " << shape.valueDim;
  if (tiles.queryTile <= 0 || tiles.queryTile % 48 != 0 || tiles.keyTile <= 0 ||
      tiles.keyTile % 6 != 0)
    return op.emitError() << "tile config (" << tiles.queryTile << ", " << tiles.keyTile
                          << ") is invalid: tile_m must be a multiple of 48, tile_n of 6";

  pe::PositionalEncodingAttrInterface qkTransform;
  SmallVector<pe::PositionalEncodingAttrInterface> scoreBiases;
  if (ArrayAttr encodings = op.getEncodingsAttr()) {
    for (Attribute attr : encodings) {
      auto encoding = cast<pe::PositionalEncodingAttrInterface>(attr);
      if (!encoding.isFusable())
        return op.emitError() << "encoding " << attr << " has no kernel hooks yet";
      if (encoding.getEncodingKind() == pe::EncodingKind::QKTransform)
        qkTransform = encoding;
      else if (encoding.getEncodingKind() == pe::EncodingKind::ScoreBias)
        scoreBiases.push_back(encoding);
      else
        return op.emitError() << "encoding " << attr << " is not supported by the x86 kernel";
    }
  }

  int64_t numQueryTiles = (shape.querySeq + tiles.queryTile - 1) / tiles.queryTile;
  std::optional<int64_t> window = op.getWindow();
  std::map<std::string, std::string> params = {
      {"B", std::to_string(shape.batch)}, {"HQ", std::to_string(shape.queryHeads)},
      {"HKV", std::to_string(shape.kvHeads)},
      {"GROUP", std::to_string(shape.queryHeads / shape.kvHeads)},
      {"SQ", std::to_string(shape.querySeq)}, {"SKV", std::to_string(shape.keySeq)},
      {"D", std::to_string(shape.headDim)}, {"DV", std::to_string(shape.valueDim)},
      {"NQT", std::to_string(numQueryTiles)}, {"BM", std::to_string(tiles.queryTile)},
      {"BN", std::to_string(tiles.keyTile)},
      {"OFF", std::to_string(shape.keySeq - shape.querySeq)},
      {"CAUSAL", op.getCausal() ? "true" : "false"},
      {"HAS_WINDOW", window ? "true" : "false"}, {"WINDOW", std::to_string(window.value_or(0))},
      {"SCALE", formatFloat(op.getEffectiveScale())},
      {"QPB", std::to_string(shape.queryPositionRows)},
      {"KPB", std::to_string(shape.keyPositionRows)}};
  FailureOr<std::string> text = substitute(loadTemplate(), params, op);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return op.emitError() << "the kernel template did not parse after substitution";

  // Expand the hook ops.
  std::optional<double> softcap;
  if (FloatAttr attr = op.getSoftcapAttr())
    softcap = attr.getValueAsDouble();
  OpBuilder b(module.getContext());
  SmallVector<Operation *> hooks;
  kernel->walk([&](Operation *hook) {
    if (isa<attn::QKPrologueOp, attn::QKTransformOp, attn::ScoreModOp>(hook))
      hooks.push_back(hook);
  });
  for (Operation *hook : hooks) {
    b.setInsertionPoint(hook);
    Location loc = hook->getLoc();
    if (auto prologue = dyn_cast<attn::QKPrologueOp>(hook)) {
      if (qkTransform)
        qkTransform.emitQKPrologue(b, loc, shape,
                                   {prologue.getQueryPositions(), prologue.getKeyPositions(),
                                    prologue.getScratch()});
    } else if (auto transform = dyn_cast<attn::QKTransformOp>(hook)) {
      if (qkTransform)
        qkTransform.emitQKTileTransform(
            b, loc, shape,
            {transform.getTile(), transform.getRows(), transform.getSeqStart(),
             transform.getBatch(), transform.getScratch(), transform.getIsKey()});
    } else if (auto mod = dyn_cast<attn::ScoreModOp>(hook)) {
      if (softcap)
        emitSoftcap(b, loc, mod.getScores(), *softcap, shape.vectorWidth);
      for (pe::PositionalEncodingAttrInterface bias : scoreBiases)
        bias.emitScoreBias(b, loc, shape,
                           {mod.getScores(), mod.getHead(), mod.getQueryStart(),
                            mod.getKeyStart()});
    }
    hook->erase();
  }

  int64_t scratchFloats = qkTransform ? qkTransform.getScratchFloats(shape) : 0;
  int64_t items = shape.batch * shape.queryHeads * numQueryTiles;
  Builder attrs(module.getContext());
  NamedAttrList info;
  info.append("items", attrs.getI64IntegerAttr(items));
  info.append("scratch_floats", attrs.getI64IntegerAttr(scratchFloats));
  info.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  info.append("key_position_rows", attrs.getI64IntegerAttr(shape.keyPositionRows));
  info.append("tile_m", attrs.getI64IntegerAttr(tiles.queryTile));
  info.append("tile_n", attrs.getI64IntegerAttr(tiles.keyTile));
  info.append("target", attrs.getStringAttr("x86-avx2"));
  info.append("function", attrs.getStringAttr(found->func.getSymName()));
  info.append("arguments", attrs.getArrayAttr(found->roles));

  found->func.erase();
  Block *body = module.getBody();
  for (Operation &kernelOp : llvm::make_early_inc_range(kernel->getBody()->getOperations()))
    kernelOp.moveBefore(body, body->end());
  module->setAttr(kKernelInfoAttr, attrs.getDictionaryAttr(info));
  return success();
}

namespace {
struct InstantiateTemplatePass
    : pejit::impl::InstantiateTemplateBase<InstantiateTemplatePass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(instantiateX86Template(getOperation(), {tileM, tileN})))
      signalPassFailure();
  }
};
} // namespace
