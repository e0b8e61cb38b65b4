// The stage runner shared by every backend (Stages.h).
#include "pejit/compiler/Stages.h"

#include "pejit/compiler/Pipelines.h"
#include "pejit/compiler/Registration.h"
#include "pejit/compiler/Suggestions.h"
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/compiler/passes/Passes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace pejit {

std::string printOperation(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

void initializeCompilerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    registerPipelines();
  });
}

struct DiagnosticCollector::Handler {
  Handler(mlir::MLIRContext &context, std::string &messages)
      : scoped(&context, [&messages](mlir::Diagnostic &diag) {
          std::string text;
          llvm::raw_string_ostream os(text);
          os << diag.getLocation() << ": " << diag;
          for (mlir::Diagnostic &note : diag.getNotes())
            os << "\n  note: " << note;
          messages += (messages.empty() ? "" : "\n") + text;
          return mlir::success();
        }) {}
  mlir::ScopedDiagnosticHandler scoped;
};

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext &context)
    : handler_(std::make_unique<Handler>(context, messages_)) {}

DiagnosticCollector::~DiagnosticCollector() = default;

std::string DiagnosticCollector::take(const std::string &stage) {
  std::string text = stage + ": " + (messages_.empty() ? "failed" : messages_);
  messages_.clear();
  return text;
}

int compilerThreads() {
  return std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
}

namespace {

/// Worker threads for MLIR's function-level passes, shared by every
/// kernel's context: a pool per context would start threads for each
/// compile.
llvm::ThreadPoolInterface &passThreads() {
  static llvm::DefaultThreadPool pool(llvm::hardware_concurrency(compilerThreads()));
  return pool;
}

} // namespace

std::unique_ptr<mlir::MLIRContext> makeCompilerContext(bool parallelPasses) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  auto context =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  // The lowering's function-level passes run on the kernel's functions at
  // once (pejit_item and pejit_pv_tile are about the same size).
  if (parallelPasses)
    context->setThreadPool(passThreads());
  // An error names the op and the rule; the generic-form dump of the op
  // MLIR attaches by default ("see current operation") reads as noise to a
  // user who wrote the custom form.
  context->printOpOnDiagnostic(false);
  context->loadAllAvailableDialects();
  return context;
}

Expected<KernelArtifact> runStages(const StageTable &table, const std::string &source,
                                   const std::string &name) {
  initializeCompilerOnce();
  std::unique_ptr<mlir::MLIRContext> context = makeCompilerContext(table.parallelPasses);
  DiagnosticCollector diagnostics(*context);
  CompileState state;
  state.sourceText = source;
  state.sourceName = name;
  state.context = context.get();
  std::string timing;
  for (const Stage &stage : table.stages) {
    if (stage.kind == StageKind::Derived)
      continue;
    auto start = std::chrono::steady_clock::now();
    if (mlir::failed(stage.run(state))) {
      std::string message = diagnostics.take(stage.name);
      // A parse error about a mistyped name gets the dialects' nearest.
      if (stage.name == "source")
        message = withSuggestions(message, source);
      return Expected<KernelArtifact>::error(message);
    }
    // A kept stage's text is its module, unless the stage wrote its own (ptx).
    if (stage.kind == StageKind::Kept && !state.artifact.stages.count(stage.name))
      state.artifact.stages[stage.name] = printOperation(*state.module);
    char lap[64];
    std::snprintf(
        lap, sizeof(lap), " %s %.1f", stage.name.c_str(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    timing += lap;
  }
  if (std::getenv("PEJIT_TIMING"))
    std::fprintf(stderr, "pejit timing (%s, ms):%s\n", table.target.c_str(), timing.c_str());
  return std::move(state.artifact);
}

std::vector<std::string> textStageNames(const StageTable &table) {
  std::vector<std::string> names;
  for (const Stage &stage : table.stages)
    if (stage.kind != StageKind::Binary)
      names.push_back(stage.name);
  return names;
}

Expected<std::string> stageText(const StageTable &table,
                                const std::map<std::string, std::string> &kept,
                                const std::string &name,
                                std::map<std::string, std::string> &derived) {
  for (const Stage &stage : table.stages) {
    if (stage.name != name || stage.kind == StageKind::Binary)
      continue;
    // A derived stage may be kept too (PEJIT_DUMP_IR's disk entries).
    if (auto it = kept.find(name); it != kept.end())
      return it->second;
    if (stage.kind == StageKind::Kept)
      return Expected<std::string>::error("stage '" + name + "' was not kept");
    if (auto it = derived.find(name); it != derived.end())
      return it->second;
    Expected<std::string> text = stage.derive(
        [&](const std::string &earlier) { return stageText(table, kept, earlier, derived); });
    if (text)
      derived[name] = *text;
    return text;
  }
  std::string known;
  for (const std::string &stage : textStageNames(table))
    known += (known.empty() ? "" : ", ") + stage;
  return Expected<std::string>::error("unknown stage '" + name + "' of the " + table.target +
                                      " backend (stages: " + known + ")");
}

namespace {

/// "f32", "f16", "bf16" (absent or other: f32) as a DType.
DType dtypeField(mlir::DictionaryAttr dict, llvm::StringRef name) {
  auto attr = dict.getAs<mlir::StringAttr>(name);
  if (attr && attr.getValue() == "f16")
    return DType::F16;
  if (attr && attr.getValue() == "bf16")
    return DType::BF16;
  return DType::F32;
}

} // namespace

int64_t kernelInfoInt(mlir::DictionaryAttr info, llvm::StringRef name) {
  auto attr = info.getAs<mlir::IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

std::vector<int64_t> kernelInfoInts(mlir::DictionaryAttr info, llvm::StringRef name) {
  std::vector<int64_t> values;
  if (auto array = info.getAs<mlir::ArrayAttr>(name))
    for (mlir::Attribute value : array)
      values.push_back(mlir::cast<mlir::IntegerAttr>(value).getInt());
  return values;
}

Shape kernelShape(mlir::TypeRange arguments) {
  auto dim = [&](unsigned arg, unsigned d) {
    int64_t size = mlir::cast<mlir::MemRefType>(arguments[arg]).getDimSize(d);
    return mlir::ShapedType::isDynamic(size) ? kDynamicDim : size;
  };
  return {dim(0, 0), dim(0, 1), dim(1, 1), dim(0, 2), dim(1, 2), dim(0, 3), dim(2, 3)};
}

void readKernelInfo(mlir::ModuleOp module, KernelDescription &description) {
  auto info = module->getAttrOfType<mlir::DictionaryAttr>(kKernelInfoAttr);
  description.items = kernelInfoInt(info, "items");
  description.scratchFloats = kernelInfoInt(info, "scratch_floats");
  description.prepareJobs = kernelInfoInt(info, "prepare_jobs");
  description.queryTile = kernelInfoInt(info, "tile_m");
  description.keyTile = kernelInfoInt(info, "tile_n");
  description.keyCacheTile = kernelInfoInt(info, "key_cache_tile");
  description.decodeGroup = kernelInfoInt(info, "decode_group");
  description.rowScratchFloats = std::max<int64_t>(kernelInfoInt(info, "row_scratch_floats"), 2);
  description.tableFloatsPerQueryPosition = kernelInfoInt(info, "table_floats_per_query_position");
  description.tableFloatsPerKeyPosition = kernelInfoInt(info, "table_floats_per_key_position");
  description.queryPositionRows = kernelInfoInt(info, "query_position_rows");
  description.keyPositionRows = kernelInfoInt(info, "key_position_rows");
  description.positionAxes = std::max<int64_t>(kernelInfoInt(info, "position_axes"), 1);
  description.positionLimit = kernelInfoInt(info, "position_limit");
  description.inputDtype = dtypeField(info, "dtype");
  description.outputDtype = dtypeField(info, "out_dtype");
  if (auto isa = info.getAs<mlir::StringAttr>("isa"))
    description.isa = isa.str();
  description.lanes = kernelInfoInt(info, "lanes");
  // Written by the instantiation from the function it compiled: parses.
  Expected<KernelSignature> signature =
      KernelSignature::parse(info.getAs<mlir::StringAttr>("arguments").str());
  description.signature = signature ? *signature : KernelSignature();
}

Stage sourceStage() {
  Stage stage;
  stage.name = "source";
  stage.summary = "the user's IR: pe and attn ops on tensors";
  stage.run = [](CompileState &state) {
    state.module =
        mlir::parseSourceString<mlir::ModuleOp>(state.sourceText, state.context, state.sourceName);
    return mlir::success(static_cast<bool>(state.module));
  };
  return stage;
}

Stage fusedStage() {
  Stage stage;
  stage.name = "fused";
  stage.summary = "pe-fuse-into-attention: encodings moved into attn.attention";
  stage.run = [](CompileState &state) {
    mlir::PassManager fuse(state.context);
    fuse.addNestedPass<mlir::func::FuncOp>(createFuseIntoAttention());
    return fuse.run(*state.module);
  };
  return stage;
}

} // namespace pejit
