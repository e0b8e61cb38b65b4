// pejit's public C++ API: describe attention with its positional encoding,
// get a kernel JIT-compiled for one shape, run it on your buffers, and read
// the IR of every compilation stage.
//
//   pejit::Runtime rt;
//   pejit::AttentionSpec spec;                 // or Spec::fromFile("x.mlir")
//   spec.rope = pejit::ref::RopeConfig{...};   // fused RoPE on Q and K
//   spec.causal = true;
//   pejit::Shape shape{1, 32, 8, 2048, 2048, 128, 128};
//   auto kernel = rt.getX86(pejit::Spec::fromBuilder(spec, shape));
//   if (!kernel) { std::cerr << kernel.error(); ... }
//   pejit::Status s = kernel->run({q, k, v}, out);  // TensorViews
//   std::cout << kernel->ir("tiled");
//
// Errors are values with a message that names what is wrong; nothing here
// throws or aborts on bad input.
#ifndef PEJIT_RUNTIME_PEJIT_H
#define PEJIT_RUNTIME_PEJIT_H

#include "pejit/compiler/Target.h"
#include "pejit/core/KernelSignature.h"
#include "pejit/core/Types.h"
#include "pejit/reference/Rope.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pejit {

/// ALiBi over `numHeads` heads in total; this attention's heads are
/// [headOffset, headOffset + queryHeads) of them.
struct AlibiSpec {
  int64_t numHeads = 0;
  int64_t headOffset = 0;
  bool symmetric = false;
};

/// A fused encoding for the builder: its pe attribute, as MLIR text, and
/// the shapes of the tensors it reads (its encoding operands). Made by the
/// functions of pejit/runtime/Encodings.h (t5Bias, ...), so the builder never
/// names an encoding. Each operand becomes a kernel argument after q, k, v
/// (and before the position ids), in order.
struct EncodingSpec {
  std::string attribute;
  /// It measures distance by position ids (encodings::relativeToPosition):
  /// the attention then takes query and key positions.
  bool readsPositions = false;
  std::vector<std::vector<int64_t>> operandShapes;
  DType operandDtype = DType::F32;
};

/// What the C++ builder describes: attention and its fused encodings.
struct AttentionSpec {
  /// Encodings fused as given (in this order, before rope and alibi).
  std::vector<EncodingSpec> encodings;
  /// RoPE on Q and K. With position axes (M-RoPE `sections`, `axial`),
  /// position ids are [A, s] (or [A, b, s]) and must be given.
  std::optional<ref::RopeConfig> rope;
  /// Which sides `rope` rotates: one alone when the other is already
  /// rotated (a KV cache written with RoPE). Each rotated side takes its
  /// position ids.
  bool ropeOnQuery = true, ropeOnKey = true;
  /// RoPE's runtime position scale (`runtime_scale = true`): run() takes
  /// rope_position_scale, f32 [n] (n = 1: one scale for the batch; n = b:
  /// one per batch row), after the encodings' operands. Its angle is
  /// (position * scale) * inv_freq; the backward gives its gradient.
  std::optional<int64_t> ropePositionScale;
  /// RoPE's inverse frequencies as an input (`learned_inv_freq = true`):
  /// run() takes rope_inv_freq, f32 [rotary_dim / 2], after the position
  /// scale. The RoPE is then written fused into attn.attention (pe.rope
  /// computes its frequencies from theta); both sides rotate.
  bool ropeLearnedInvFreq = false;
  std::optional<AlibiSpec> alibi;
  bool causal = false;
  std::optional<int64_t> window;      ///< left window (unset: unbounded)
  std::optional<int64_t> windowRight; ///< right window (unset: unbounded)
  std::optional<double> softcap;
  std::optional<double> scale; ///< default 1/sqrt(d)
  /// Element type of Q, K, V (and the pages) and of the output: f32, f16
  /// or bf16 (16-bit kernels compute in f32 and round the output once).
  DType dtype = DType::F32;
  /// Whether run() takes query/key position ids ([s] shared, or [b, s] when
  /// positionsPerBatch); otherwise the docs/semantics.md defaults are used.
  bool queryPositions = false, keyPositions = false, positionsPerBatch = false;
  /// A packed batch of variable-length sequences (docs/shape-classes.md):
  /// run() takes cu_seqlens_q and cu_seqlens_k (i32 [n + 1]) after the
  /// encodings' operands and before the position ids, which are then
  /// packed too ([total]). The shape's b must be 1 and its lengths `?`.
  bool packed = false;
  /// Per-row key lengths (docs/shape-classes.md): run() takes key_lengths
  /// (i32 [b]) after the encodings' operands and before the position ids;
  /// batch row n attends to its first key_lengths[n] keys of K and V (a KV
  /// cache with room to grow). Position ids are then [s], shared.
  bool keyLengths = false;
  /// A paged KV cache of this page size (docs/shape-classes.md): run()
  /// takes key_pages [num_pages, page_size, hkv, d], value_pages and
  /// block_table (i32 [b, max_pages]) in place of K and V; the shape's skv
  /// must be `?` (max_pages * page_size). Usually with keyLengths.
  std::optional<int64_t> pageSize;
  /// A training forward (docs/backward.md): the attention also returns each
  /// row's log-sum-exp, which X86Kernel::runTraining writes and the backward
  /// (Runtime::getX86Backward of this spec) reads instead of recomputing.
  bool training = false;
};

/// A compilable description: MLIR source text (pe + attn dialects) with
/// static shapes. Build it from the C++ builder or from a .mlir file.
class Spec {
public:
  static Spec fromBuilder(const AttentionSpec &spec, const Shape &shape);
  /// A standalone pe.rope kernel (docs/standalone-kernels.md): x [b, h, s,
  /// d] of `dtype` rotated at ids ([s] i64, or [A, s] with position axes;
  /// with `positionsPerBatch` [b, s] or [A, b, s], which needs a static b),
  /// out = rotated x. b and s may be kDynamicDim. Its output may be a
  /// strided view: rows [t, t + s) of a K cache (KV-append).
  /// With `scaleRows` > 0, the RoPE takes a runtime position scale
  /// (runtime_scale): a third argument, f32 [scaleRows] (1, or b with
  /// per-batch ids).
  static Spec standaloneRope(const ref::RopeConfig &rope, int64_t batch, int64_t heads, int64_t seq,
                             int64_t headDim, DType dtype = DType::F32,
                             bool positionsPerBatch = false, int64_t scaleRows = 0);
  /// The position scale's gradient of standaloneRope(..., scaleRows) (a
  /// pe.rope_scale_grad, docs/backward.md): arguments dy, x, ids, scale;
  /// the result f32 [scaleRows].
  static Spec standaloneRopeScaleGradient(const ref::RopeConfig &rope, int64_t batch, int64_t heads,
                                          int64_t seq, int64_t headDim, DType dtype,
                                          bool positionsPerBatch, int64_t scaleRows);
  /// attn.linear_attention (docs/linear-attention.md): q, k, v of `shape`
  /// (b and the lengths may be kDynamicDim) and `dtype`, feature map
  /// `featureMap` ("elu_plus_one", "relu", "identity", "softmax_keys"); with
  /// a RoPE, its `placement` ("rope_before_feature_map" or
  /// "rope_on_numerator") and query and key ids as two trailing arguments
  /// ([s], or [b, s] with `positionsPerBatch`; [A, ...] for M-RoPE). The
  /// compiler checks the names.
  static Spec linearAttention(const std::string &featureMap, bool causal,
                              const std::optional<ref::RopeConfig> &rope,
                              const std::string &placement, const Shape &shape,
                              DType dtype = DType::F32, bool positionsPerBatch = false);
  static Expected<Spec> fromText(std::string mlirText, std::string name = "<text>");
  /// The backward of a forward spec (docs/backward.md): its pe ops fused,
  /// then attn.attention_backward derived from the fused attention. Its
  /// function takes the forward's arguments, then o and dO, and returns
  /// dq, dk, dv (and the gradients of the differentiable encoding
  /// operands; without `operandGradients`, dq, dk, dv only: the encodings'
  /// tensors held fixed). An error names what cannot be differentiated.
  /// Without `scoreShapedGradients`, a bias tensor is held fixed (a mask):
  /// its s x s gradient is neither computed nor returned.
  static Expected<Spec> backwardOf(const Spec &forward, bool operandGradients = true,
                                   bool scoreShapedGradients = true);
  /// A source file of at most kMaxSourceBytes (a larger one, or a device
  /// such as /dev/zero, is an error naming the path).
  static Expected<Spec> fromFile(const std::string &path);
  static constexpr size_t kMaxSourceBytes = size_t(64) << 20;
  const std::string &source() const { return source_; }
  const std::string &name() const { return name_; }

private:
  Spec(std::string source, std::string name) : source_(std::move(source)), name_(std::move(name)) {}
  std::string source_, name_;
};

class X86KernelImpl;

/// A kernel JIT-compiled for this host's x86 CPU, for one (spec, shape
/// class, tile config): a source with `?` lengths gives one kernel for every
/// length. Cheap to copy; copies share the compiled code.
class X86Kernel {
public:
  /// Inputs bound in the order of the source function's arguments (query,
  /// key, value and the position ids it declares); `out` is [b, hq, sq, dv].
  /// Thread-safe. Each concurrent run uses a scratch buffer of its own (RoPE
  /// tables and, for prefill, K rotated once in f32: up to 256 MiB); the
  /// compiled kernel keeps one for later runs (as long as its Runtime or a
  /// copy of this X86Kernel holds it).
  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// A training forward's run (attn.attention with an lse result,
  /// AttentionSpec::training): run() that also writes each row's
  /// log-sum-exp to `lse` (f32 [b, hq, sq], natural log, -inf for a row
  /// that sees no key), which the backward then reads (docs/backward.md).
  Status runTraining(const std::vector<TensorView> &inputs, const TensorView &out,
                     const TensorView &lse) const;
  /// A backward kernel's run (a source with attn.attention_backward,
  /// docs/backward.md): inputs bound as for run() (query, key, value, the
  /// forward's output o and its gradient dO), `gradients` = {dq, dk, dv} of
  /// the shapes of query, key and value. Each gradient is written whole
  /// (masked rows get 0); they may not overlap each other or an input. The
  /// result is the same bit for bit at any thread count.
  Status runBackward(const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &gradients) const;
  /// Text of a stage of the x86 stage table: "source", "fused", "tiled",
  /// "llvm" (LLVM dialect), "llvm-ir" (optimized LLVM IR) or "asm"; an error
  /// for other names. The first three are kept from the compile; the others
  /// are derived from the tiled stage on the first request (tens of ms), as
  /// the compile lowered and compiled it (asm: part by part, as the
  /// kernel's objects were).
  Expected<std::string> ir(const std::string &stage) const;
  static const std::vector<std::string> &stageNames();
  /// The argument labels, in order ("query", "key", ..., "t5_table").
  std::vector<std::string> arguments() const;
  /// Each argument's role, name, shape and dtype.
  const KernelSignature &signature() const;
  /// The kernel's shape: its shape class, with kDynamicDim for the `?`
  /// lengths each call gives (docs/shape-classes.md).
  const Shape &shape() const;
  /// The shape of a call with these inputs: shape() with its `?` lengths
  /// taken from the query and the key (what `out` must then be). An error
  /// names a missing input or a length outside [1, 2^31 - 1].
  Expected<Shape> callShape(const std::vector<TensorView> &inputs) const;
  /// Milliseconds spent compiling, or loading it from the disk cache.
  double compileMilliseconds() const;
  /// True when the code came from the disk cache (nothing was compiled).
  bool loadedFromDisk() const;
  /// The tile config the kernel was compiled with.
  X86TileConfig tiles() const;
  /// The ISA family its code is for (docs/isa.md), and the f32 lanes of
  /// its vectors: the family's, or 8 where the kernel has no wider form.
  X86Isa isa() const;
  int64_t lanes() const;
  DType dtype() const;       ///< of query, key and value (f32, f16 or bf16)
  DType outputDtype() const; ///< of the output, as the IR's result says
  /// Identity of the compiled code (equal for the same cache entry).
  const void *id() const { return impl_.get(); }

private:
  friend class Runtime;
  explicit X86Kernel(std::shared_ptr<const X86KernelImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const X86KernelImpl> impl_;
};

class NvidiaKernelImpl;

/// A kernel compiled for an NVIDIA GPU: PTX for one architecture, and a cubin
/// when ptxas is found ($PEJIT_PTXAS, $CUDA_HOME/bin, /usr/local/cuda/bin or
/// PATH). Inputs are f16 or bf16; the output f32, f16 or bf16, as the IR's
/// result says. Cheap to copy.
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
  /// pejit_attention's grid; empty for a shape class (planned per call:
  /// pejit/core/NvidiaPlan.h).
  const std::vector<int64_t> &grid() const;
  const std::vector<int64_t> &block() const;
  std::vector<std::string> arguments() const;
  /// Each argument's role, name, shape and dtype.
  const KernelSignature &signature() const;
  /// The kernel's shape class (kDynamicDim for `?` dims).
  const Shape &shape() const;
  /// The shape of a call with these inputs, as X86Kernel::callShape.
  Expected<Shape> callShape(const std::vector<TensorView> &inputs) const;
  DType dtype() const;       ///< of the inputs (f16 or bf16)
  DType outputDtype() const; ///< f32, f16 or bf16, as the IR's result says
  /// Floats of the QK transform's tables (pejit_prologue fills them); 0: none
  /// (and 0 for a shape class, whose tables follow each call's lengths).
  int64_t scratchFloats() const;
  /// Split-KV: blocks sharing a query tile's keys (1: none; 0: a shape
  /// class, planned per call), the sizes of their partial outputs and row
  /// statistics, and pejit_combine's grid (empty for a shape class).
  int64_t splits() const;
  int64_t partialOutputFloats() const;
  int64_t partialRowFloats() const;
  const std::vector<int64_t> &combineGrid() const;
  /// The launch description as text (pejit/core/KernelMeta.h): what the
  /// disk cache keeps and the GPU check runner reads.
  const std::string &launchMeta() const;
  /// Copies the inputs (host views of the kernel's dtype, strided or not)
  /// to the GPU, launches, and copies the output back; a packed batch,
  /// per-row key lengths or a paged cache is one launch per sequence or
  /// row (docs/shape-classes.md). Every input is checked first; then it
  /// needs a CUDA driver and a device of this architecture or newer, and
  /// without them it is an error saying so.
  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// The attention backward's run (a kernel of Spec::backwardOf, docs/
  /// backward.md "NVIDIA"): inputs as the backward's signature orders them
  /// (q, k, v, the encoding operands, o, dO, [lse,] ids); gradients dq, dk,
  /// dv (q's type) and each operand's asked for (f32), dense. Checked as
  /// run's; then it needs a CUDA driver and a device.
  Status runBackward(const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &gradients) const;

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
  X86TileConfig tiles;
  double medianMs = 0; ///< infinity when it failed
  std::string error;
};

struct TuneOptions {
  /// Configs to try; empty = the template's candidate set, pruned to those
  /// whose tiles fit the L2 cache and are not much longer than the sequence.
  std::vector<X86TileConfig> candidates;
  int repeats = 5;      ///< timed runs per candidate (after one warm-up)
  bool progress = true; ///< progress bar on stderr, when it is a terminal
  /// Times one compiled candidate in ms (tests use it to control speeds);
  /// default: median of `repeats` runs on random inputs of the shape.
  std::function<double(const X86Kernel &)> measure;
  /// A shape class (`?` dims) is timed at these (sq, skv) calls (b = 1
  /// where `?`); empty = representative ones: a prefill at 512 and at 2048
  /// and a decode step over 2048 keys. A candidate's time is the geometric
  /// mean over them.
  std::vector<std::pair<int64_t, int64_t>> lengths;
};

struct TuneReport {
  std::vector<TuneCandidate> candidates; ///< in the order tried
  X86TileConfig best;
  /// The call shapes timed: the spec's own shape, or a shape class's
  /// representative (or given) lengths.
  std::vector<Shape> lengths;
  /// A Markdown table of the candidates, best marked.
  std::string table() const;
};

/// One stage of a backend's stage table.
struct StageInfo {
  std::string name;
  std::string summary;
  bool derived = false; ///< computed on request from an earlier stage's text
};

/// What getX86() and getNvidia() did so far, in this Runtime.
struct RuntimeStats {
  int64_t compiles = 0;   ///< kernels compiled from source
  int64_t diskHits = 0;   ///< kernels loaded from the disk cache
  int64_t memoryHits = 0; ///< getX86() and getNvidia() calls answered from memory
};

/// Compiles and caches kernels. Thread-safe: concurrent getX86() (getNvidia()) calls for the
/// same key compile it once and all receive that kernel.
class Runtime {
public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  /// The x86 kernel for `spec` with `tiles`; without tiles, the config the
  /// autotuner stored for this (spec, shape, host CPU), else the default.
  Expected<X86Kernel> getX86(const Spec &spec, std::optional<X86TileConfig> tiles = std::nullopt);
  /// The backward kernel of a forward spec: getX86(Spec::backwardOf(spec)),
  /// from the same caches. Run it with X86Kernel::runBackward.
  Expected<X86Kernel> getX86Backward(const Spec &forward, bool operandGradients = true,
                                     bool scoreShapedGradients = true);
  /// Number of compilations done (misses of both caches).
  int64_t compileCount() const;
  RuntimeStats stats() const;
  /// The kernel for `spec` on an NVIDIA GPU of architecture `arch` (sm_80,
  /// sm_86, sm_89, sm_90); compiled here, no GPU needed. Cached in memory
  /// and on disk.
  Expected<NvidiaKernel> getNvidia(const Spec &spec, const std::string &arch = "sm_80",
                                   NvidiaTileConfig tiles = {});
  /// Compiles and times every candidate tile config for `spec` (one shape,
  /// this host), stores the fastest in the disk cache, where later getX86()
  /// calls without tiles (in any process) find it. Fails only when no
  /// candidate works.
  Expected<TuneReport> tune(const Spec &spec, TuneOptions options = {});
  /// The host CPU name and features that are part of every x86 kernel key.
  static std::string hostTarget();
  /// The tiles an x86 kernel gets when none are asked for and none are
  /// tuned: 144 x 96 in the avx2 family, 144 x 48 in the AVX-512 ones
  /// (PEJIT_X86_ISA's, else the host's best; bench/RESULTS.md 2026-12-06).
  static X86TileConfig defaultX86Tiles();
  /// The stages of `target`'s stage table that have text (what ir() and
  /// `pejit compile --emit` accept), in order, with one-line summaries.
  static std::vector<StageInfo> stages(const Target &target);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_PEJIT_H
