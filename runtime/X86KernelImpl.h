// A compiled kernel: the text of every stage, the JIT-compiled entry points
// and what the runtime needs to call them (runtime-internal).
#ifndef PEJIT_RUNTIME_COMPILEDKERNEL_H
#define PEJIT_RUNTIME_COMPILEDKERNEL_H

#include "runtime/Pejit.h"
#include "runtime/ThreadPool.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class Operation;
class StringAttr;
} // namespace mlir

namespace pejit {

/// MLIR's memref descriptor as the C interface (_mlir_ciface_*) takes it.
template <typename T, int Rank> struct MemRefDescriptor {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

/// (query positions, key positions, scratch, first row, row step).
using PrologueFn = void (*)(MemRefDescriptor<int64_t, 2> *, MemRefDescriptor<int64_t, 2> *,
                            MemRefDescriptor<float, 1> *, int64_t, int64_t);
/// (key, scratch, first job, job step): the key cache jobs (pejit_prepare).
using PrepareFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 1> *, int64_t,
                           int64_t);
using ItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                        MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                        MemRefDescriptor<float, 1> *, int64_t);

class LoadedObject;

/// What the runtime needs to call a compiled kernel, besides its code: the
/// same for host and nvidia kernels, kept by both and by the disk cache.
struct KernelDescription {
  Shape shape;
  std::vector<std::string> arguments;
  int64_t items = 0, scratchFloats = 0, queryPositionRows = 1, keyPositionRows = 1;
  /// Jobs of pejit_prepare (K rotated once per call into scratch); 0: none.
  int64_t prepareJobs = 0;
  DType inputDtype = DType::F32, outputDtype = DType::F32; // of q/k/v and of the output
};

/// Everything a compiled kernel is, as data: its description, the text of
/// every stage and its object code. This is what the disk cache stores.
struct KernelArtifact : KernelDescription {
  std::map<std::string, std::string> stages; // source, fused, tiled (llvm when dumped)
  /// Host: ELF relocatables, one per codegen part, linked together on load.
  /// NVIDIA: one entry, the cubin (empty without ptxas).
  std::vector<std::string> objects;
};

class CompiledKernel : public KernelDescription {
public:
  /// Runs every stage from the source to machine code; an error names the
  /// stage and carries the compiler's diagnostics.
  static Expected<KernelArtifact> build(const Spec &spec, const TileConfig &tiles);
  /// Links an artifact's objects into the process: no compiling. The caller
  /// fills in compileMs, fromDisk and tiles before sharing it as const.
  static Expected<std::shared_ptr<CompiledKernel>> load(KernelArtifact artifact,
                                                        std::shared_ptr<ThreadPool> pool);
  ~CompiledKernel();

  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;
  Expected<std::string> stage(const std::string &name) const;

  double compileMs = 0;
  bool fromDisk = false;
  TileConfig tiles;

private:
  CompiledKernel() = default;
  std::map<std::string, std::string> stages_; // the artifact's stages; its object is loaded
  mutable std::map<std::string, std::string> derivedStages_; // llvm, llvm-ir, asm: on demand
  mutable std::mutex derivedMutex_;
  std::unique_ptr<LoadedObject> object_;
  PrologueFn prologue_ = nullptr;
  PrepareFn prepare_ = nullptr;
  ItemFn item_ = nullptr;
  std::shared_ptr<ThreadPool> pool_;
  /// The scratch buffer of an earlier run, kept for the next one (at most
  /// one): the key cache makes scratch as big as K, and fresh pages per call
  /// cost page faults. Concurrent runs each take their own.
  struct FreeScratch {
    void operator()(float *p) const { std::free(p); }
  };
  using ScratchBuffer = std::unique_ptr<float, FreeScratch>;
  ScratchBuffer takeScratch() const;
  void returnScratch(ScratchBuffer buffer) const;
  mutable std::mutex scratchMutex_;
  mutable ScratchBuffer spareScratch_; // null: none kept
};

/// Initializes the native target and registers pejit's passes (once per
/// process; the Runtime constructor calls it so no compile pays for it).
void initializeCompilerOnce();

/// A kernel description's element type ("f32", "f16", "bf16"; absent or
/// other: f32) as a DType.
DType kernelInfoDtype(mlir::StringAttr name);

/// dtypeName's word ("float32", "float16", "bfloat16") back to the float
/// DType; nullopt for any other word.
std::optional<DType> floatDtypeNamed(const std::string &name);

/// The operation's IR as text (what every stage keeps).
std::string printOperation(mlir::Operation *op);

/// Position ids as kernels take them: i64 [rows, seq], from the user's
/// i32/i64 view, or the CONVENTIONS.md default (first + index) when null.
Status buildPositionTable(const TensorView *view, const std::string &what, int64_t rows,
                          int64_t seq, int64_t batch, int64_t first, std::vector<int64_t> &table);

/// The llvm stage of a tiled stage's text: the module lowered whole by
/// pejit-lower-to-llvm, as the kernel's codegen parts each were.
Expected<std::string> lowerTiledStage(const std::string &tiled);

/// Optimized LLVM IR, or host assembly, of an LLVM-dialect module's text.
Expected<std::string> translateLLVMDialect(const std::string &llvmDialect, bool assembly);

} // namespace pejit

#endif // PEJIT_RUNTIME_COMPILEDKERNEL_H
