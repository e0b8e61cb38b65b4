// pejit's public C++ API: describe attention with its positional encoding,
// get a kernel JIT-compiled for one shape, run it on your buffers, and read
// the IR of every compilation stage.
//
//   pejit::Runtime rt;
//   pejit::AttentionSpec spec;                 // or Spec::fromFile("x.mlir")
//   spec.rope = pejit::ref::RopeConfig{...};   // fused RoPE on Q and K
//   spec.causal = true;
//   pejit::Shape shape{1, 32, 8, 2048, 2048, 128, 128};
//   auto kernel = rt.get(pejit::Spec::fromBuilder(spec, shape));
//   if (!kernel) { std::cerr << kernel.error(); ... }
//   pejit::Status s = kernel->run({q, k, v}, out);  // TensorViews
//   std::cout << kernel->ir("tiled");
//
// Errors are values with a message that names what is wrong; nothing here
// throws or aborts on bad input.
#ifndef PEJIT_RUNTIME_PEJIT_H
#define PEJIT_RUNTIME_PEJIT_H

#include "reference/Rope.h"

#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pejit {

/// Success, or an error message.
class Status {
public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !message_; }
  explicit operator bool() const { return ok(); }
  const std::string &message() const;

private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

/// A value, or an error message.
template <typename T> class Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  static Expected error(std::string message) { return Expected(Status::error(std::move(message))); }
  Expected(Status status) : status_(std::move(status)) {}
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string &error() const { return status_.message(); }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }
  const T &operator*() const { return *value_; }
  const T *operator->() const { return &*value_; }

private:
  std::optional<T> value_;
  Status status_;
};

enum class DType { F32, F16, BF16, I32, I64 };
const char *dtypeName(DType dtype);

/// A user buffer: element pointer, dtype, shape and strides in elements.
/// Empty strides mean contiguous (row-major).
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

/// The static shape of one attention call.
struct Shape {
  int64_t batch = 1, queryHeads = 1, kvHeads = 1;
  int64_t querySeq = 1, keySeq = 1, headDim = 64, valueDim = 64;
  bool operator==(const Shape &other) const;
  std::string str() const;
};

/// ALiBi over `numHeads` heads in total; this attention's heads are
/// [headOffset, headOffset + queryHeads) of them.
struct AlibiSpec {
  int64_t numHeads = 0;
  int64_t headOffset = 0;
  bool symmetric = false;
};

/// What the C++ builder describes: attention and its fused encodings.
struct AttentionSpec {
  std::optional<ref::RopeConfig> rope; ///< RoPE on Q and K (sections unsupported)
  std::optional<AlibiSpec> alibi;
  bool causal = false;
  std::optional<int64_t> window;
  std::optional<double> softcap;
  std::optional<double> scale; ///< default 1/sqrt(d)
  /// Whether run() takes query/key position ids ([s] shared, or [b, s] when
  /// positionsPerBatch); otherwise the CONVENTIONS.md defaults are used.
  bool queryPositions = false, keyPositions = false, positionsPerBatch = false;
};

/// A compilable description: MLIR source text (pe + attn dialects) with
/// static shapes. Build it from the C++ builder or from a .mlir file.
class Spec {
public:
  static Spec fromBuilder(const AttentionSpec &spec, const Shape &shape);
  static Expected<Spec> fromText(std::string mlirText, std::string name = "<text>");
  static Expected<Spec> fromFile(const std::string &path);
  const std::string &source() const { return source_; }
  const std::string &name() const { return name_; }

private:
  Spec(std::string source, std::string name)
      : source_(std::move(source)), name_(std::move(name)) {}
  std::string source_, name_;
};

/// Tile sizes of the x86 template: tile_m a multiple of 48, tile_n of 6.
struct TileConfig {
  int64_t queryTile = 144;
  int64_t keyTile = 96;
};

class CompiledKernel;

/// A JIT-compiled kernel for one (spec, shape, target, tile config).
/// Cheap to copy; copies share the compiled code.
class Kernel {
public:
  /// Inputs bound in the order of the source function's arguments (query,
  /// key, value and the position ids it declares); `out` is [b, hq, sq, dv].
  /// Thread-safe. Each concurrent run uses a scratch buffer of its own (RoPE
  /// tables and, for prefill, K rotated once in f32: up to 256 MiB); the
  /// compiled kernel keeps one for later runs (as long as its Runtime or a
  /// copy of this Kernel holds it).
  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// Text of a stage: "source", "fused", "tiled", "llvm" (LLVM dialect),
  /// "llvm-ir" (optimized LLVM IR) or "asm"; an error for other names. The
  /// first three are kept from the compile; the others are derived from the
  /// tiled stage on the first request (tens of ms), as the compile lowered
  /// and compiled it (asm: part by part, as the kernel's objects were).
  Expected<std::string> ir(const std::string &stage) const;
  static const std::vector<std::string> &stageNames();
  /// The argument roles, in order ("query", "key", ...).
  const std::vector<std::string> &arguments() const;
  const Shape &shape() const;
  /// Milliseconds spent compiling, or loading it from the disk cache.
  double compileMilliseconds() const;
  /// True when the code came from the disk cache (nothing was compiled).
  bool loadedFromDisk() const;
  /// The tile config the kernel was compiled with.
  TileConfig tiles() const;
  DType dtype() const;       ///< of query, key and value (f32, f16 or bf16)
  DType outputDtype() const; ///< of the output, as the IR's result says
  /// Identity of the compiled code (equal for the same cache entry).
  const void *id() const { return impl_.get(); }

private:
  friend class Runtime;
  explicit Kernel(std::shared_ptr<const CompiledKernel> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const CompiledKernel> impl_;
};

class NvidiaKernelImpl;

/// Tiles of the nvidia kernel: queryTile = 16 x warps per block (16, 32, 64,
/// 128), keyTile a multiple of 16 up to 128 (shared memory permitting).
struct NvidiaTileConfig {
  /// 0 = from the shape: 16 rows (1 warp) for sq <= 16, 32 for sq <= 32, else 64.
  int64_t queryTile = 0;
  int64_t keyTile = 64;
  /// Split-KV blocks per query tile (decode); 0 = from the shape, 1 = none.
  int64_t splits = 0;
};

/// A kernel compiled for an NVIDIA GPU: PTX for one architecture, and a cubin
/// when ptxas is found ($PEJIT_PTXAS, $CUDA_HOME/bin, /usr/local/cuda/bin or
/// PATH). Inputs are f16 or bf16, the output f32. Cheap to copy.
class NvidiaKernel {
public:
  /// "source", "fused", "tiled" (the gpu.module), "unrolled" (its register
  /// loops unrolled, the last MLIR stage before NVVM) or "ptx".
  Expected<std::string> ir(const std::string &stage) const;
  static const std::vector<std::string> &stageNames();
  const std::string &arch() const;
  const std::string &ptx() const;
  /// Empty without ptxas.
  const std::string &cubin() const;
  /// ptxas -v output (registers, stack frame, spills); empty without ptxas.
  const std::string &ptxasLog() const;
  const std::vector<int64_t> &grid() const;
  const std::vector<int64_t> &block() const;
  const std::vector<std::string> &arguments() const;
  const Shape &shape() const;
  DType dtype() const;        ///< of the inputs (f16 or bf16)
  DType outputDtype() const;  ///< f32, f16 or bf16, as the IR's result says
  /// Floats of the QK transform's tables (pejit_prologue fills them); 0: none.
  int64_t scratchFloats() const;
  /// Split-KV: blocks sharing a query tile's keys (1: none), the sizes of
  /// their partial outputs and row statistics, and pejit_combine's grid.
  int64_t splits() const;
  int64_t partialOutputFloats() const;
  int64_t partialRowFloats() const;
  const std::vector<int64_t> &combineGrid() const;
  /// Copies the inputs (host, contiguous, the kernel's dtype) to the GPU,
  /// launches, and copies the f32 output back. Needs a CUDA driver and a
  /// device of this architecture or newer; without them, an error saying so.
  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;

private:
  friend class Runtime;
  explicit NvidiaKernel(std::shared_ptr<const NvidiaKernelImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const NvidiaKernelImpl> impl_;
};

struct RuntimeOptions {
  int threads = 0; ///< worker threads for run(); 0 = all cores (or PEJIT_NUM_THREADS)
  /// Disk cache directory; empty = PEJIT_CACHE_DIR, $XDG_CACHE_HOME/pejit or
  /// ~/.cache/pejit. PEJIT_DISABLE_CACHE=1 keeps kernels in memory only.
  std::string cacheDir;
};

/// One tile config the autotuner tried: its median time, or why it failed.
struct TuneCandidate {
  TileConfig tiles;
  double medianMs = 0; ///< infinity when it failed
  std::string error;
};

struct TuneOptions {
  /// Configs to try; empty = the template's candidate set, pruned to those
  /// whose tiles fit the L2 cache and are not much longer than the sequence.
  std::vector<TileConfig> candidates;
  int repeats = 5;      ///< timed runs per candidate (after one warm-up)
  bool progress = true; ///< progress bar on stderr, when it is a terminal
  /// Times one compiled candidate in ms (tests use it to control speeds);
  /// default: median of `repeats` runs on random inputs of the shape.
  std::function<double(const Kernel &)> measure;
};

struct TuneReport {
  std::vector<TuneCandidate> candidates; ///< in the order tried
  TileConfig best;
  /// A Markdown table of the candidates, best marked.
  std::string table() const;
};

/// What get() did so far, in this Runtime.
struct RuntimeStats {
  int64_t compiles = 0;    ///< kernels compiled from source
  int64_t diskHits = 0;    ///< kernels loaded from the disk cache
  int64_t memoryHits = 0;  ///< get() calls answered from memory
};

/// Compiles and caches kernels. Thread-safe: concurrent get() calls for the
/// same key compile it once and all receive that kernel.
class Runtime {
public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  /// The kernel for `spec` with `tiles`; without tiles, the config the
  /// autotuner stored for this (spec, shape, target), else the default.
  Expected<Kernel> get(const Spec &spec, std::optional<TileConfig> tiles = std::nullopt);
  /// Number of compilations done (misses of both caches).
  int64_t compileCount() const;
  RuntimeStats stats() const;
  /// The kernel for `spec` on an NVIDIA GPU of architecture `arch` (sm_80,
  /// sm_86, sm_89, sm_90); compiled here, no GPU needed. Cached in memory.
  Expected<NvidiaKernel> getNvidia(const Spec &spec, const std::string &arch = "sm_80",
                                   NvidiaTileConfig tiles = {});
  /// Compiles and times every candidate tile config for `spec` (one shape,
  /// this host), stores the fastest in the disk cache, where later get()
  /// calls without tiles (in any process) find it. Fails only when no
  /// candidate works.
  Expected<TuneReport> tune(const Spec &spec, TuneOptions options = {});
  /// The host CPU name and features that are part of every kernel key.
  static std::string hostTarget();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_PEJIT_H
