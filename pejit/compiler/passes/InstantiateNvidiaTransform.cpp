// attn-instantiate-nvidia-template, standalone form: a function of pe ops
// and no attention (a StandaloneChain) becomes the gpu.module of
// templates/nvidia/transform.mlir, or of templates/nvidia/embed.mlir when it
// starts with pe.embed (docs/standalone-kernels.md). The hooks are the ones
// the x86 standalone kernels and the attention templates expand, here per
// element (vector width 1); this file names no concrete encoding.
//
//   out[b, h, i, :] = op_n(... op_0(x[b, h, i, :], ids[., i]) ...)
//   out[b, i, :] = op_n(... op_0(table[tokens[b, i]] * scale, ids[., i]) ...)
// One block per R rows of one head: grid [ceil(s / R), h, b].
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/KernelViews.h"
#include "pejit/compiler/passes/StandaloneChain.h"
#include "pejit/compiler/passes/TemplateSupport.h"
#include "pejit/dialects/ShapeChecks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"

#include <algorithm>

#include "templates/NvidiaEmbed.inc"
#include "templates/NvidiaStandalonePrologue.inc"
#include "templates/NvidiaTransform.inc"

using namespace mlir;
using namespace pejit;

namespace {

/// Threads per block: the loads and stores are spread over all of them,
/// the row transforms take one thread per row.
constexpr int64_t kThreads = 128;

/// Rows per block: a tile of about 16 KB f32 in shared memory (several
/// blocks per SM), at most 64 rows; a wide embedding row gets fewer.
int64_t rowsPerBlock(int64_t dim) { return std::clamp<int64_t>(4096 / dim, 1, 64); }

} // namespace

LogicalResult pejit::instantiateNvidiaTransform(ModuleOp module) {
  func::FuncOp func = standaloneFunction(module);
  if (!func)
    return module.emitError() << "expected one function of pe ops to compile";
  if (isMaterializedBias(module))
    return func.getBody().front().front().emitError()
           << "the nvidia backend has no materialized bias kernel: compile it for x86 "
              "(docs/standalone-kernels.md)";
  FailureOr<StandaloneChain> read = readStandaloneChain(func);
  if (failed(read))
    return failure();
  StandaloneChain &chain = *read;
  FailureOr<StandaloneKernel> described = describeStandalone(chain, /*vectorWidth=*/1, "nvidia");
  if (failed(described))
    return failure();
  StandaloneKernel &info = *described;
  pe::AttentionShape &shape = info.shape;
  const int64_t rows = rowsPerBlock(shape.headDim);
  shape.queryTileRows = 1; // each thread transforms one row

  int64_t positionRows = shape.positionAxes * shape.queryPositionRows;
  ChainHookText hooks = chainHookText(chain, shape, positionRows, /*fromRows=*/false);
  bool staticShape = !ShapedType::isDynamic(shape.batch) && !ShapedType::isDynamic(shape.querySeq);
  int64_t tableFloats = staticShape ? info.perPosition * shape.queryPositionRows * shape.querySeq
                                    : ShapedType::kDynamic;
  std::string b = ShapedType::isDynamic(shape.batch) ? "%B" : std::to_string(shape.batch);
  std::string s = ShapedType::isDynamic(shape.querySeq) ? "%S" : std::to_string(shape.querySeq);
  std::string d = std::to_string(shape.headDim), pb = std::to_string(positionRows);
  KernelView scratch{
      "scratch",
      "f32",
      {staticShape ? std::to_string(std::max<int64_t>(tableFloats, 1)) : std::string("%NSCRATCH")}};
  // %B, %S and %NSCRATCH: the kernel's numbers, or the call's (the i64
  // length arguments; nskv and nsplits are unused here).
  std::string lengths = lengthsText(
      {{"B", shape.batch, "nb"},
       {"S", shape.querySeq, "nsq"},
       {"NSCRATCH", staticShape ? std::max<int64_t>(tableFloats, 1) : tableFloats, "nscratch"}});
  std::string outName = info.outName;
  std::map<std::string, std::string> params = {
      {"BD", dimToString(shape.batch)},
      {"SD", dimToString(shape.querySeq)},
      {"H", std::to_string(shape.queryHeads)},
      {"D", d},
      {"DP", std::to_string(shape.headDim + 1)},
      {"R", std::to_string(rows)},
      {"T", info.inName},
      {"OT", outName},
      {"THREADS", std::to_string(kThreads)},
      {"PB", pb},
      {"SCRATCHD", viewDimsText(scratch)},
      {"E0", info.operandSlot},
      {"LENGTH_ARGS", "%nb: i64, %nsq: i64, %nskv: i64, %nsplits: i64, %nscratch: i64"},
      {"PROLOGUE_VIEWS",
       lengths + viewsText({{"pos", "i64", {pb, s}}, {"none", "i64", {pb, "0"}}, scratch})},
      {"PARTS", hooks.parts},
      {"PROLOGUES", hooks.prologues},
      {"TRANSFORMS", hooks.transforms},
      {"NARROW", scalarConvertText("f32", outName)}};
  KernelView out{"o", outName, {b, std::to_string(shape.queryHeads), s, d}};
  std::string kernelName = chain.embed ? "pejit_embed" : "pejit_transform";
  if (chain.embed) {
    auto tableType = cast<RankedTensorType>(chain.embed.getTable().getType());
    if (tableType.isDynamicDim(0))
      return chain.embed.emitError() << "the token table's rows must be static, got " << tableType;
    std::string tableName = kernelElementTypeName(tableType.getElementType());
    std::string vocab = std::to_string(tableType.getDimSize(0));
    params["V"] = vocab;
    params["LAST_ROW"] = std::to_string(tableType.getDimSize(0) - 1);
    params["TT"] = tableName;
    params["SCALE"] = formatFloat(chain.embed.getScale().convertToDouble());
    params["WIDEN"] = scalarConvertText(tableName, "f32");
    params["EMBED_VIEWS"] =
        lengths +
        viewsText({{"tokens", "i64", {b, s}}, {"table", tableName, {vocab, d}}, out, scratch});
  } else {
    params["WIDEN"] = scalarConvertText(info.inName, "f32");
    params["TRANSFORM_VIEWS"] =
        lengths +
        viewsText({{"x", info.inName, {b, std::to_string(shape.queryHeads), s, d}}, out, scratch});
  }
  TemplateFile prologue{"nvidia/standalone_prologue.mlir", kNvidiaStandalonePrologueTemplate};
  FailureOr<std::string> text =
      chain.embed ? substitute(loadTemplateWithBlocks({"nvidia/embed.mlir", kNvidiaEmbedTemplate},
                                                      {prologue}),
                               params, info.first)
                  : substitute(loadTemplateWithBlocks(
                                   {"nvidia/transform.mlir", kNvidiaTransformTemplate}, {prologue}),
                               params, info.first);
  if (failed(text))
    return failure();
  OwningOpRef<ModuleOp> kernel = parseSourceString<ModuleOp>(*text, module.getContext());
  if (!kernel)
    return info.first->emitError() << "the nvidia kernel template did not parse after substitution";
  if (failed(expandHooks(*kernel, shape, chain.encodings, std::nullopt)))
    return failure();

  // The launch: grid [ceil(s / R), h, b] at a static shape; the runtime
  // plans a shape class's by the same rule (pejit/core/NvidiaPlan.h).
  Builder attrs(module.getContext());
  NamedAttrList entries;
  entries.append("target", attrs.getStringAttr("nvidia"));
  entries.append("dtype", attrs.getStringAttr(info.inName));
  entries.append("out_dtype", attrs.getStringAttr(outName));
  entries.append("kernel", attrs.getStringAttr(kernelName));
  entries.append("splits", attrs.getI64IntegerAttr(1));
  if (staticShape)
    entries.append("grid", attrs.getI64ArrayAttr({(shape.querySeq + rows - 1) / rows,
                                                  shape.queryHeads, shape.batch}));
  auto dim = [](int64_t value) { return ShapedType::isDynamic(value) ? kDynamicDim : value; };
  entries.append("shape",
                 attrs.getI64ArrayAttr({dim(shape.batch), shape.queryHeads, shape.queryHeads,
                                        dim(shape.querySeq), dim(shape.querySeq), shape.headDim,
                                        shape.headDim}));
  entries.append("block", attrs.getI64ArrayAttr({kThreads, 1, 1}));
  entries.append("scratch_floats", attrs.getI64IntegerAttr(staticShape ? tableFloats : 0));
  entries.append("table_floats_per_query_position", attrs.getI64IntegerAttr(info.perPosition));
  entries.append("table_floats_per_key_position", attrs.getI64IntegerAttr(0));
  entries.append("query_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  entries.append("key_position_rows", attrs.getI64IntegerAttr(shape.queryPositionRows));
  entries.append("position_axes", attrs.getI64IntegerAttr(shape.positionAxes));
  entries.append("position_limit", attrs.getI64IntegerAttr(info.positionLimit));
  entries.append("tile_m", attrs.getI64IntegerAttr(rows));
  entries.append("tile_n", attrs.getI64IntegerAttr(rows));
  entries.append("function", attrs.getStringAttr(func.getSymName()));
  entries.append("arguments", attrs.getStringAttr(info.signature.str()));
  FusedAttention found{func, nullptr, info.signature};
  spliceKernel(module, found, *kernel, attrs.getDictionaryAttr(entries));
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), attrs.getUnitAttr());
  return success();
}
