// attn-instantiate-x86-template, linear attention form: a function whose
// body is one attn.linear_attention on its arguments becomes the kernel of
// templates/x86/linear_attention.mlir (docs/linear-attention.md). The
// fused RoPE's hooks are the attention templates' (the prologue's cos/sin
// tables, the tile transform on Q and K rows); this file names no concrete
// encoding. The kernel's entry points and calling convention are the
// softmax attention kernel's, so the runtime runs it as one: one item per
// (b, hq) covers every query row (tile_m is the largest length).
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/LinearAttentionKernel.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/compiler/passes/X86LinearTemplate.h"
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/attn/AttnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "templates/X86Exp2.inc"
#include "templates/X86LinearAttention.inc"
#include "templates/X86LinearBlocks.inc"
#include "templates/X86LinearGemm.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Query (and key) rows a tile reads at once into f32. Causal, a chunk's
/// own keys cost 2 R (d + dv) FLOPs per row in the masked matmuls, so R
/// stays small; not causal there are none, and 64 rows per step read and
/// write S a quarter as often (3-10% faster, bench/RESULTS.md session 21).
/// With a state the calls are short (decode, chunked prefill): 16.
int64_t rowsPerTile(attn::LinearAttentionOp op) {
  return op.getCausal() || op.getState() ? 16 : 64;
}

} // namespace

std::string pejit::x86FeatureMapBody(attn::FeatureMap map) {
  switch (map) {
  case attn::FeatureMap::EluPlusOne:
    return "%zero = arith.constant dense<0.0> : vector<8xf32>\n"
           "  %one = arith.constant dense<1.0> : vector<8xf32>\n"
           "  %positive = arith.cmpf ogt, %x, %zero : vector<8xf32>\n"
           "  %log2e = arith.constant dense<1.44269504088896341> : vector<8xf32>\n"
           "  %x2 = arith.mulf %x, %log2e : vector<8xf32>\n"
           "  %e = func.call @exp2_vec(%x2) : (vector<8xf32>) -> vector<8xf32>\n"
           "  %p = arith.addf %x, %one : vector<8xf32>\n"
           "  %y = arith.select %positive, %p, %e : vector<8xi1>, vector<8xf32>\n"
           "  return %y : vector<8xf32>";
  case attn::FeatureMap::Relu:
    return "%zero = arith.constant dense<0.0> : vector<8xf32>\n"
           "  %y = arith.maximumf %x, %zero : vector<8xf32>\n"
           "  return %y : vector<8xf32>";
  case attn::FeatureMap::Identity:
  case attn::FeatureMap::SoftmaxKeys:
    return "return %x : vector<8xf32>";
  }
  return "return %x : vector<8xf32>";
}

bool pejit::isLinearAttention(ModuleOp module) {
  bool found = false;
  module.walk([&](attn::LinearAttentionOp) { found = true; });
  return found;
}

namespace {

/// The carried state's memref: [b, hq, d, dv + 2] f32, strided rows.
std::string stateType(const pe::AttentionShape &shape) {
  return "memref<" + dimToString(shape.batch) + "x" + std::to_string(shape.queryHeads) + "x" +
         std::to_string(shape.headDim) + "x" + std::to_string(shape.valueDim + 2) +
         "xf32, strided<[?, ?, ?, 1], offset: ?>>";
}

/// @state_in's (in) or @state_out's body: z and m by channel (m only for
/// softmax_keys; other maps store 0 there). S is updated in place.
std::string stateCopyBody(bool in, attn::FeatureMap map) {
  bool softmax = map == attn::FeatureMap::SoftmaxKeys;
  std::string text = "scf.for %c = %c0 to %D step %c1 {\n";
  if (in)
    text += "    %zc = memref.load %st[%b, %h, %c, %DV] : !E3\n"
            "    memref.store %zc, %z[%c] : !VEC\n";
  else
    text += "    %zc = memref.load %z[%c] : !VEC\n"
            "    memref.store %zc, %st[%b, %h, %c, %DV] : !E3\n";
  if (in && softmax)
    text += "    %mc = memref.load %st[%b, %h, %c, %DVM] : !E3\n"
            "    memref.store %mc, %m[%c] : !VEC\n";
  if (!in)
    text += softmax ? "    %mc = memref.load %m[%c] : !VEC\n"
                      "    memref.store %mc, %st[%b, %h, %c, %DVM] : !E3\n"
                    : "    %mc = arith.constant 0.0 : f32\n"
                      "    memref.store %mc, %st[%b, %h, %c, %DVM] : !E3\n";
  return text + "  }";
}

/// The item's %S: the state's columns [0, dv) of (b, h), updated in place,
/// or a zeroed matrix on the item's stack.
std::string stateViewText(bool hasState, const pe::AttentionShape &shape) {
  std::string dims = std::to_string(shape.headDim) + ", " + std::to_string(shape.valueDim);
  if (hasState)
    return "%S = memref.subview %e3[%b, %h, 0, 0] [1, 1, " + dims +
           "] [1, 1, 1, 1] : !E3 to !STATE";
  std::string local =
      "memref<" + std::to_string(shape.headDim) + "x" + std::to_string(shape.valueDim) + "xf32>";
  return "%S_local = memref.alloca() {alignment = 64 : i64} : " + local +
         "\n  %S = memref.cast %S_local : " + local +
         " to !STATE\n"
         "  scf.for %c = %c0 to %D step %c1 {\n"
         "    scf.for %e = %c0 to %DV step %c8 {\n"
         "      vector.store %zero8, %S[%c, %e] : !STATE, !V8\n"
         "    }\n"
         "  }";
}

} // namespace

LogicalResult pejit::instantiateX86LinearAttention(ModuleOp module) {
  FailureOr<LinearAttentionKernel> read = readLinearAttention(module);
  if (failed(read))
    return failure();
  func::FuncOp func = read->func;
  attn::LinearAttentionOp op = read->op;
  const KernelSignature &signature = read->signature;
  pe::PositionalEncodingAttrInterface rope = read->rope;
  if (failed(
          requireX86QueryKeyValue(op, op.getQuery(), op.getKey(), op.getValue(), op.getResult())))
    return failure();
  auto qType = cast<RankedTensorType>(op.getQuery().getType());
  auto oType = cast<RankedTensorType>(op.getResult().getType());
  pe::AttentionShape shape =
      attentionShape(op.getQuery(), op.getKey(), op.getValue(), op.getQueryPositions(),
                     op.getKeyPositions(), rope, /*vectorWidth=*/8);
  int64_t rows = rowsPerTile(op);
  shape.queryTileRows = rows;
  if (failed(checkX86LinearShape(op, shape, /*states=*/1)))
    return failure();
  // The RoPE's own tensors (its runtime scale): slot 0.
  FailureOr<SmallVector<std::string>> slots = encodingOperandSlots(op, read->operands, 1);
  if (failed(slots))
    return failure();
  std::string scaleSlot = read->operands.empty() ? "!UNUSED" : (*slots)[0];

  const char *inName = kernelElementTypeName(qType.getElementType());
  const char *outName = kernelElementTypeName(oType.getElementType());
  bool onNumerator = op.getRopePlacement() == attn::RopePlacement::OnNumerator;
  attn::FeatureMap map = op.getFeatureMap();
  std::map<std::string, std::string> params = x86LinearParams(
      shape, X86LinearForm{map, op.getCausal(), onNumerator}, rows, inName, scaleSlot);
  params.insert({{"OT", outName},
                 {"HAS_STATE", op.getState() ? "true" : "false"},
                 {"DVS", std::to_string(shape.valueDim + 2)},
                 {"E3", op.getState() ? stateType(shape) : "!UNUSED"},
                 {"STATE_VIEW", stateViewText(op.getState() != nullptr, shape)},
                 {"STATE_IN", op.getState() ? stateCopyBody(/*in=*/true, map) : ""},
                 {"STATE_OUT", op.getState() ? stateCopyBody(/*in=*/false, map) : ""},
                 {"NARROW8", x86NarrowBody(outName)},
                 {"L", "8"}}); // exp2.mlir's lanes
  FailureOr<std::string> text =
      substitute(loadTemplateWithBlocks({"x86/linear_attention.mlir", kX86LinearAttentionTemplate},
                                        {{"x86/linear_blocks.mlir", kX86LinearBlocksTemplate},
                                         {"x86/linear_gemm.mlir", kX86LinearGemmTemplate},
                                         {"x86/exp2.mlir", kX86Exp2Template}}),
                 params, op);
  if (failed(text))
    return failure();
  // One item per (b, hq): tile_m is the largest length, so it covers every
  // query row.
  return finishX86LinearKernel(module, op, func, signature, *text, shape, rope, shape.queryHeads,
                               rows, NamedAttrList(), inName, outName);
}
