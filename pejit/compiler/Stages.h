// Compilation stages as data. Each backend (pejit/compiler/backends/*) has one
// stage table: its stages in order, each a name, a one-line summary and a
// function. The same table drives the compile (runStages), a kernel's
// ir(stage), PEJIT_DUMP_IR and `pejit compile --emit`; nothing else lists
// stages. Kept stages leave their IR as text in the artifact; derived ones
// are computed from an earlier stage's text when asked for.
#ifndef PEJIT_COMPILER_STAGES_H
#define PEJIT_COMPILER_STAGES_H

#include "pejit/core/KernelArtifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pejit {

/// What one compile's stages share: the module, being rewritten, and the
/// artifact, being filled.
struct CompileState {
  std::string sourceText, sourceName;
  mlir::MLIRContext *context = nullptr;
  mlir::OwningOpRef<mlir::ModuleOp> module; // set by the source stage
  KernelArtifact artifact;
};

enum class StageKind {
  Kept,    ///< rewrites the module; its IR is kept as text in the artifact
  Binary,  ///< fills the artifact's objects; no text of its own
  Derived, ///< text computed on request from earlier stages' text
};

/// The text of a stage by name (what a derived stage reads earlier ones by).
using StageTextFn = std::function<Expected<std::string>(const std::string &)>;

struct Stage {
  std::string name;
  std::string summary;
  StageKind kind = StageKind::Kept;
  /// Kept and Binary: runs on the state; on failure, diagnostics say why.
  std::function<mlir::LogicalResult(CompileState &)> run;
  /// Derived: the stage's text.
  std::function<Expected<std::string>(const StageTextFn &)> derive;
  /// Derived: also written by PEJIT_DUMP_IR (cheap enough at every compile).
  bool dumped = false;
};

struct StageTable {
  std::string target; ///< "x86" or "nvidia", in messages
  std::vector<Stage> stages;
  /// Whether MLIR's function-level passes may run on a shared thread pool.
  bool parallelPasses = false;
};

/// Runs the Kept and Binary stages in order. The error names the stage and
/// carries its diagnostics. PEJIT_TIMING=1 prints each stage's time.
Expected<KernelArtifact> runStages(const StageTable &table, const std::string &source,
                                   const std::string &name);

/// The stages that have text (kept and derived), in order.
std::vector<std::string> textStageNames(const StageTable &table);

/// A stage's text: a kept one from `kept`; a derived one from `derived`,
/// else computed (reading earlier stages the same way) and stored there.
/// The caller keeps `derived` (and locks it when shared). An error lists the
/// table's stages when `name` is none of them.
Expected<std::string> stageText(const StageTable &table,
                                const std::map<std::string, std::string> &kept,
                                const std::string &name,
                                std::map<std::string, std::string> &derived);

/// Threads one compile uses (MLIR's function-level passes, x86 codegen
/// parts): one per core, at most 4, since a kernel has only a few big
/// functions.
int compilerThreads();

/// Initializes the native target and registers pejit's passes and
/// pipelines (once per process).
void initializeCompilerOnce();

/// A context with pejit's dialects loaded; with `parallelPasses`, on a
/// thread pool shared by every such context.
std::unique_ptr<mlir::MLIRContext> makeCompilerContext(bool parallelPasses);

/// The operation's IR as text (what every kept stage keeps).
std::string printOperation(mlir::Operation *op);

/// Collects a context's diagnostics (with their notes) into one message.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext &context);
  ~DiagnosticCollector();
  /// "<stage>: <diagnostics>" ("failed" when there are none); clears them.
  std::string take(const std::string &stage);
  const std::string &messages() const { return messages_; }

private:
  std::string messages_;
  struct Handler;
  std::unique_ptr<Handler> handler_;
};

/// The kernel description the template instantiation left on the module
/// (`pejit.kernel`, Instantiate.h): the roles of the arguments, dtypes,
/// scratch size, position rows and (x86) work items and prepare jobs.
void readKernelInfo(mlir::ModuleOp module, KernelDescription &description);

/// One integer (0 when absent) and one integer list (empty when absent) of
/// a kernel description: what the backends read beyond readKernelInfo.
int64_t kernelInfoInt(mlir::DictionaryAttr info, llvm::StringRef name);
std::vector<int64_t> kernelInfoInts(mlir::DictionaryAttr info, llvm::StringRef name);

/// The call's shape from a kernel function's first three arguments, the
/// memrefs of q [b, hq, sq, d], k [b, hkv, skv, d] and v [b, hkv, skv, dv].
Shape kernelShape(mlir::TypeRange arguments);

/// The source stage (parse the user's IR) and the fused stage
/// (pe-fuse-into-attention): the first two of every table.
Stage sourceStage();
Stage fusedStage();

} // namespace pejit

#endif // PEJIT_COMPILER_STAGES_H
