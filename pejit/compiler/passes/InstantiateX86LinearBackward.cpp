// attn-instantiate-x86-template, linear attention backward form: a function
// whose body is one attn.linear_attention_backward on its arguments becomes
// the kernel of templates/x86/linear_attention_backward.mlir
// (docs/backward.md, "Linear attention"): @pejit_prologue (the fused RoPE's
// tables) and @pejit_linear_backward_item, one item per (b, hkv). The
// RoPE's hooks are the forward's (its transform on Q and K rows) and its
// adjoint; this file names no concrete encoding.
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/LinearAttentionKernel.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/compiler/passes/X86LinearTemplate.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/attn/AttnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "templates/X86Exp2.inc"
#include "templates/X86LinearBackward.inc"
#include "templates/X86LinearBackwardBlocks.inc"
#include "templates/X86LinearBackwardCausal.inc"
#include "templates/X86LinearBackwardCausalKeys.inc"
#include "templates/X86LinearBlocks.inc"
#include "templates/X86LinearGemm.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Rows of Q (and keys) per chunk of the matmul forms. Not causal: 64, long
/// enough matmuls to run near the FMA peak. Causal: 16, since a chunk's own
/// keys cost masked matmuls that grow with the chunk (measured at s = 8192:
/// 52 ms at 16, 61 at 8, 64 at 32, 66 at 64; bench/RESULTS.md).
int64_t rowsPerTile(attn::LinearAttentionBackwardOp op) { return op.getCausal() ? 16 : 64; }

/// The body of @query_factor8 (key = false) or @key_factor8: the feature
/// map's derivative read from its value y (elu + 1: min(y, 1), since
/// phi(x) = e^x <= 1 exactly where x <= 0; relu: y > 0; identity: 1); for
/// softmax_keys 1 on the query side and the weight e itself on the key side.
std::string factorBody(attn::FeatureMap map, bool key) {
  const std::string one = "%one = arith.constant dense<1.0> : vector<8xf32>\n  ";
  switch (map) {
  case attn::FeatureMap::EluPlusOne:
    return one + "%f = arith.minimumf %y, %one : vector<8xf32>\n  return %f : vector<8xf32>";
  case attn::FeatureMap::Relu:
    return one + "%zero = arith.constant dense<0.0> : vector<8xf32>\n"
                 "  %positive = arith.cmpf ogt, %y, %zero : vector<8xf32>\n"
                 "  %f = arith.select %positive, %one, %zero : vector<8xi1>, vector<8xf32>\n"
                 "  return %f : vector<8xf32>";
  case attn::FeatureMap::SoftmaxKeys:
    if (key)
      return "return %y : vector<8xf32>";
    [[fallthrough]];
  case attn::FeatureMap::Identity:
    return one + "return %one : vector<8xf32>";
  }
  return one + "return %one : vector<8xf32>";
}

} // namespace

bool pejit::isLinearAttentionBackward(ModuleOp module) {
  bool found = false;
  module.walk([&](attn::LinearAttentionBackwardOp) { found = true; });
  return found;
}

LogicalResult pejit::instantiateX86LinearBackward(ModuleOp module) {
  FailureOr<LinearAttentionBackwardKernel> read = readLinearAttentionBackward(module);
  if (failed(read))
    return failure();
  attn::LinearAttentionBackwardOp op = read->op;
  pe::PositionalEncodingAttrInterface rope = read->rope;
  if (failed(
          requireX86QueryKeyValue(op, op.getQuery(), op.getKey(), op.getValue(), op.getOutput())))
    return failure();
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto oType = cast<RankedTensorType>(op.getOutput().getType());
  if (oType.getElementType() != qType.getElementType())
    return op.emitError() << "the x86 backward takes o and dO of q's element type "
                          << qType.getElementType() << ", got " << oType.getElementType();
  pe::AttentionShape shape =
      attentionShape(op.getQuery(), op.getKey(), op.getValue(), op.getQueryPositions(),
                     op.getKeyPositions(), rope, /*vectorWidth=*/8);
  const int64_t rows = rowsPerTile(op);
  shape.queryTileRows = rows;
  if (failed(checkX86LinearShape(op, shape, /*states=*/2)))
    return failure();
  SmallVector<Value> operands(op.getEncodingOperands());
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, operands, 1);
  if (failed(slots))
    return failure();
  const char *typeName = kernelElementTypeName(qType.getElementType());
  attn::FeatureMap map = op.getFeatureMap();
  X86LinearForm form{map, op.getCausal(),
                     op.getRopePlacement() == attn::RopePlacement::OnNumerator};
  std::map<std::string, std::string> params =
      x86LinearParams(shape, form, rows, typeName, operands.empty() ? "!UNUSED" : (*slots)[0]);
  params.insert({{"RW", std::to_string(2 * shape.headDim + 8)},
                 {"HAS_STATE", "false"},
                 {"QUERY_FACTOR8", factorBody(map, /*key=*/false)},
                 {"KEY_FACTOR8", factorBody(map, /*key=*/true)},
                 {"NARROW8", x86NarrowBody(typeName)},
                 {"L", "8"}}); // exp2.mlir's lanes
  FailureOr<std::string> text = substitute(
      loadTemplateWithBlocks(
          {"x86/linear_attention_backward.mlir", kX86LinearBackwardTemplate},
          {{"x86/linear_backward_blocks.mlir", kX86LinearBackwardBlocksTemplate},
           {"x86/linear_backward_causal.mlir", kX86LinearBackwardCausalTemplate},
           {"x86/linear_backward_causal_keys.mlir", kX86LinearBackwardCausalKeysTemplate},
           {"x86/linear_blocks.mlir", kX86LinearBlocksTemplate},
           {"x86/linear_gemm.mlir", kX86LinearGemmTemplate},
           {"x86/exp2.mlir", kX86Exp2Template}}),
      params, op);
  if (failed(text))
    return failure();
  // One item per (b, hkv). Causal, each query row keeps P, W and 1/den
  // (2 d + 8 floats, RW) for the key half; not causal, no row needs
  // scratch (2: the floor).
  NamedAttrList extra;
  extra.append(
      "row_scratch_floats",
      Builder(module.getContext()).getI64IntegerAttr(op.getCausal() ? 2 * shape.headDim + 8 : 2));
  return finishX86LinearKernel(module, op, read->func, read->signature, *text, shape, rope,
                               shape.kvHeads, rows, extra, typeName, typeName);
}
