// What an X86Kernel is inside: the text of every kept stage, the objects
// linked into the process and what the runtime needs to call their entry
// points (runtime-internal).
#ifndef PEJIT_RUNTIME_X86KERNELIMPL_H
#define PEJIT_RUNTIME_X86KERNELIMPL_H

#include "pejit/core/KernelArtifact.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/ThreadPool.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pejit {

/// MLIR's memref descriptor as the C interface (_mlir_ciface_*) takes it.
template <typename T, int Rank> struct MemRefDescriptor {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

/// A [b, h, s, d] view as the kernels' memref descriptor (X86Call.cpp).
MemRefDescriptor<float, 4> describe4(const TensorView &view);

/// out[e] = the sum over items, in item order in f64, of partial[item *
/// floats + e], rounded once: a gradient from per-item partials that has
/// the same bits at any thread count.
inline void sumPartialsInItemOrder(const std::vector<float> &partial, int64_t items, int64_t floats,
                                   float *out) {
  for (int64_t e = 0; e < floats; ++e) {
    double sum = 0;
    for (int64_t item = 0; item < items; ++item)
      sum += partial[item * floats + e];
    out[e] = static_cast<float>(sum);
  }
}

/// (query positions, key positions, scratch, first row, row step, encoding
/// operand slots 0..3 as for ItemFn).
using PrologueFn = void (*)(MemRefDescriptor<int64_t, 2> *, MemRefDescriptor<int64_t, 2> *,
                            MemRefDescriptor<float, 1> *, int64_t, int64_t, void *, void *, void *,
                            void *);
/// (key, key cache, scratch, sq, first job, job step): the key cache jobs
/// (pejit_prepare).
using PrepareFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 1> *,
                           MemRefDescriptor<float, 1> *, int64_t, int64_t, int64_t);
/// (q, k, v, o, lse, scratch, key cache, encoding operand slots 0..3, query
/// and key positions, item): each slot a memref descriptor of its operand's
/// rank; a key cache of 0 floats means none, an lse [b, hq, sq, 1] of 0
/// rows that the run asks for none (pejit_item in the template).
constexpr size_t kEncodingOperandSlots = 4;
using ItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                        MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                        MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 1> *,
                        MemRefDescriptor<float, 1> *, void *, void *, void *, void *,
                        MemRefDescriptor<int64_t, 2> *, MemRefDescriptor<int64_t, 2> *, int64_t);

/// (q, k, v, o, scratch, partials, encoding operand slots 0..3, query and
/// key positions, item, parts): pejit_decode_item, one item per (b, hk,
/// part) of a one-row call under GQA.
using DecodeItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                              MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                              MemRefDescriptor<float, 1> *, MemRefDescriptor<float, 1> *, void *,
                              void *, void *, void *, MemRefDescriptor<int64_t, 2> *,
                              MemRefDescriptor<int64_t, 2> *, int64_t, int64_t);
/// (o, partials, item, parts): pejit_decode_combine, the split parts merged.
using CombineFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 1> *, int64_t,
                           int64_t);

/// (positions, no positions, scratch, first row, row step, encoding operand
/// slot 0): pejit_prologue of a standalone transform.
using TransformPrologueFn = void (*)(MemRefDescriptor<int64_t, 2> *, MemRefDescriptor<int64_t, 2> *,
                                     MemRefDescriptor<float, 1> *, int64_t, int64_t, void *);
/// Elements of a standalone call (transform, embedding, bias) below which
/// it runs on the calling thread: two pool round trips would cost more
/// than its work (a decode step's KV-append).
constexpr int64_t kInlineStandaloneElements = 1 << 16;

/// (x, o, scratch, item): pejit_transform_item of a standalone transform
/// (templates/x86/qk_transform.mlir).
using TransformItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                                 MemRefDescriptor<float, 1> *, int64_t);

/// (tokens, token table, o, scratch, item): pejit_embed_item of a token
/// embedding (templates/x86/embed.mlir); the table is a memref descriptor
/// of rank 2 as words (operandSlotWords).
using EmbedItemFn = void (*)(MemRefDescriptor<int64_t, 2> *, void *, MemRefDescriptor<float, 4> *,
                             MemRefDescriptor<float, 1> *, int64_t);

/// (grad rows [b, 1, s, d], rows sorted by id, each id's start, out
/// [rows, d], item): pejit_embed_grad_item of a table's gradient
/// (templates/x86/embed_grad.mlir).
using EmbedGradItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<int64_t, 1> *,
                                 MemRefDescriptor<int64_t, 1> *, MemRefDescriptor<float, 2> *,
                                 int64_t);

/// (x, dy, ids, tables, partial, the scale as a descriptor's words, item):
/// pejit_scale_grad_item of pe.rope_scale_grad
/// (templates/x86/rope_scale_grad.mlir).
using ScaleGradItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                                 MemRefDescriptor<int64_t, 2> *, MemRefDescriptor<float, 1> *,
                                 MemRefDescriptor<float, 1> *, void *, int64_t);

/// (dBias, encoding operand slot 0, partials, item): pejit_bias_grad_item of
/// pe.score_bias_grad (templates/x86/score_bias_grad.mlir).
using BiasGradItemFn = void (*)(MemRefDescriptor<float, 4> *, void *, MemRefDescriptor<float, 1> *,
                                int64_t);

/// (dE, q, dq, table, partials, item) and (dR, table, partials, item):
/// the items of pe.relative_term_grad (templates/x86/key_term_grad.mlir,
/// value_term_grad.mlir).
using KeyTermGradItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *,
                                   MemRefDescriptor<float, 4> *, void *,
                                   MemRefDescriptor<float, 1> *, int64_t);
using ValueTermGradItemFn = void (*)(MemRefDescriptor<float, 4> *, void *,
                                     MemRefDescriptor<float, 1> *, int64_t);

/// (o, encoding operand slot 0, item): pejit_bias_item of a materialized
/// score bias (templates/x86/score_bias.mlir).
using BiasItemFn = void (*)(MemRefDescriptor<float, 4> *, MemRefDescriptor<float, 4> *, void *,
                            int64_t);

/// A backward kernel's phases (templates/x86/attention_backward.mlir):
/// (q, k, v, o, dO, lse, scratch, query ids, key ids, e0..e3, item; lse a
/// training forward's [b, hq, sq, 1], or 0 rows to recompute it), (q, k, v,
/// dO, dk, dv, dS (a bias tensor's gradient, [b, hq, sq, skv]; 0 rows: not
/// asked for), scratch,
/// tables, query ids, key ids, e0..e3, item) and (q, k, v, dO, dq, scratch,
/// tables, query ids, key ids, e0..e3, item); the encoding operand slots
/// as for ItemFn.
using Desc4 = MemRefDescriptor<float, 4>;
using Ids2 = MemRefDescriptor<int64_t, 2>;
/// An i64 id table [rows, seq] (buildPositionTable's) as a descriptor.
inline Ids2 idsDescriptor(std::vector<int64_t> &ids, int64_t rows, int64_t seq) {
  return {ids.data(), ids.data(), 0, {rows, seq}, {seq, 1}};
}
using BackwardRowsFn = void (*)(Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *,
                                MemRefDescriptor<float, 1> *, Ids2 *, Ids2 *, void *, void *,
                                void *, void *, int64_t);
using BackwardKvFn = void (*)(Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *,
                              MemRefDescriptor<float, 1> *, MemRefDescriptor<float, 1> *, Ids2 *,
                              Ids2 *, void *, void *, void *, void *, int64_t);
using BackwardQueryFn = void (*)(Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *,
                                 MemRefDescriptor<float, 1> *, MemRefDescriptor<float, 1> *, Ids2 *,
                                 Ids2 *, void *, void *, void *, void *, int64_t);
/// With a QK transform: (q, k, q', k', tables, item), Q' and K' of a query
/// or key tile; its tables come from a PrologueFn (pejit_backward_prologue).
using BackwardTransformFn = void (*)(Desc4 *, Desc4 *, Desc4 *, Desc4 *,
                                     MemRefDescriptor<float, 1> *, int64_t);
/// 16-bit tensors: (source, destination, item), 64 rows of a [b, h, s, c]
/// tensor widened to f32 or narrowed from it (descriptors of either type
/// share the float one's layout).
using BackwardConvertFn = void (*)(Desc4 *, Desc4 *, int64_t);
/// A linear attention backward's item (q, k, v, o, dO, dq, dk, dv, tables,
/// rows scratch, encoding operand slot 0, query ids, key ids, item):
/// pejit_linear_backward_item (templates/x86/linear_attention_backward.mlir).
using LinearBackwardItemFn = void (*)(Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *, Desc4 *,
                                      Desc4 *, MemRefDescriptor<float, 1> *,
                                      MemRefDescriptor<float, 1> *, void *, Ids2 *, Ids2 *,
                                      int64_t);

class LoadedObject;
struct BoundInputs;

/// What an X86Kernel holds: the artifact's description and kept stages,
/// its objects linked into the process, and the entry points.
class X86KernelImpl : public KernelDescription {
public:
  /// Links an artifact's objects into the process: no compiling. The caller
  /// fills in compileMs, fromDisk and tiles before sharing it as const.
  static Expected<std::shared_ptr<X86KernelImpl>> load(KernelArtifact artifact,
                                                       std::shared_ptr<ThreadPool> pool);
  ~X86KernelImpl();

  Status run(const std::vector<TensorView> &inputs, const TensorView &out,
             const TensorView *lse = nullptr) const;
  /// A backward kernel's run (pejit/runtime/X86Backward.cpp).
  Status runBackward(const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &gradients) const;
  /// A stage's text: kept ones from the artifact, derived ones (llvm,
  /// llvm-ir, asm) computed on the first request and kept.
  Expected<std::string> stage(const std::string &name) const;

  double compileMs = 0;
  bool fromDisk = false;
  X86TileConfig tiles;

private:
  X86KernelImpl() = default;
  std::map<std::string, std::string> stages_; // the artifact's stages; its object is loaded
  mutable std::map<std::string, std::string> derivedStages_; // llvm, llvm-ir, asm: on demand
  mutable std::mutex derivedMutex_;
  std::unique_ptr<LoadedObject> object_;
  PrologueFn prologue_ = nullptr;
  PrepareFn prepare_ = nullptr;
  ItemFn item_ = nullptr;
  DecodeItemFn decodeItem_ = nullptr; ///< pejit_decode_item, when decodeGroup > 0
  CombineFn decodeCombine_ = nullptr; ///< pejit_decode_combine, likewise
  /// A standalone transform's item, and its run (pejit/runtime/X86Transform.cpp).
  TransformPrologueFn transformPrologue_ = nullptr;
  TransformItemFn transformItem_ = nullptr;
  Status runTransform(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// A token embedding's item, and its run (pejit/runtime/X86Embed.cpp).
  EmbedItemFn embedItem_ = nullptr;
  Status runEmbedding(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// A table gradient's item, and its run (pejit/runtime/X86EmbedGrad.cpp).
  EmbedGradItemFn embedGradItem_ = nullptr;
  Status runEmbeddingGradient(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// A position scale gradient's item, and its run (X86RopeScaleGrad.cpp).
  ScaleGradItemFn scaleGradItem_ = nullptr;
  Status runRopeScaleGradient(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// A materialized bias's tensor gradient's item, and its run
  /// (pejit/runtime/X86BiasGrad.cpp).
  BiasGradItemFn biasGradItem_ = nullptr;
  Status runScoreBiasGradient(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// A materialized Shaw term's gradients' item, and its run
  /// (pejit/runtime/X86ShawTermGrad.cpp): runBackward's gradients are dq
  /// and d a^K (the key term) or d a^V (the value term).
  KeyTermGradItemFn keyTermGradItem_ = nullptr;
  ValueTermGradItemFn valueTermGradItem_ = nullptr;
  Status runShawTermGradient(const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &gradients) const;
  /// A materialized score bias's item, and its run (pejit/runtime/X86Bias.cpp).
  BiasItemFn biasItem_ = nullptr;
  /// A backward kernel's phases (docs/backward.md).
  BackwardRowsFn backwardRows_ = nullptr;
  BackwardKvFn backwardKv_ = nullptr;
  BackwardQueryFn backwardQuery_ = nullptr;
  PrologueFn backwardPrologue_ = nullptr;
  BackwardTransformFn backwardTransform_ = nullptr;
  BackwardConvertFn backwardWiden_ = nullptr, backwardNarrow_ = nullptr;
  /// A linear attention backward's item (its tables come from prologue_),
  /// and its run once runBackward has checked the views
  /// (pejit/runtime/X86LinearBackward.cpp).
  LinearBackwardItemFn linearBackwardItem_ = nullptr;
  Status runLinearBackwardCall(const Shape &s, const BoundInputs &bound,
                               const std::vector<TensorView> &gradients) const;
  Status runBias(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// One call of a backward kernel (X86BackwardCall.cpp): the run, or one
  /// sequence or batch row of it, on its slices; its position ids (null:
  /// the defaults for its lengths).
  struct BackwardCall {
    Shape shape;
    TensorView q, k, v, o, dO, dq, dk, dv;
    const TensorView *queryIds = nullptr, *keyIds = nullptr;
    /// A training forward's lse as [b, hq, sq, 1]; no data: recomputed.
    TensorView lse = {};
    /// A bias tensor's gradient [1|b, 1|hq, sq, skv] (f32, dense): dS
    /// summed over its broadcast dims; no data: not asked for.
    TensorView scoreGradient = {};
  };
  /// The operand gradients asked for: each one's floats and offset in a
  /// work item's partial buffer of `floats` floats.
  struct BackwardOperandGrads {
    std::vector<int64_t> offsets, sizes;
    int64_t floats = 0;
    /// Each one's index among the run's gradients (after dq, dk, dv).
    std::vector<size_t> outputs;
  };
  /// A backward call's position id tables (the forward's rule: queries
  /// from skv - sq, keys from 0 when not given; `queryIds`, `keyIds` the
  /// call's ids or null), the runtime position scale checked against them.
  Status buildBackwardIds(const Shape &s, const BoundInputs &bound, const TensorView *queryIds,
                          const TensorView *keyIds, std::vector<int64_t> &queryTable,
                          std::vector<int64_t> &keyTable) const;
  /// Runs `call`, adding each operand gradient's sum to `sums` (f64).
  Status runBackwardCall(const BackwardCall &call, const BoundInputs &bound,
                         const BackwardOperandGrads &grads,
                         std::vector<std::vector<double>> &sums) const;
  std::shared_ptr<ThreadPool> pool_;
  /// The scratch buffer of an earlier run, kept for the next one (at most
  /// one): the key cache makes scratch as big as K, and fresh pages per call
  /// cost page faults. Concurrent runs each take their own. A shape class's
  /// calls need different sizes: a spare is reused when it is big enough.
  struct FreeScratch {
    void operator()(float *p) const { std::free(p); }
  };
  struct ScratchBuffer {
    std::unique_ptr<float, FreeScratch> data;
    size_t floats = 0;
  };
  /// items(0 .. count - 1): on the calling thread when `onCaller` (a call
  /// too small for two pool round trips), else spread over the pool.
  void runItems(int64_t count, bool onCaller, const std::function<void(int64_t)> &item) const;
  ScratchBuffer takeScratch(int64_t floats) const;
  void returnScratch(ScratchBuffer buffer) const;
  /// A standalone call's per-position tables: checks and builds its ids
  /// (bound.queryPositions, [rows, seq] of `batch`), takes scratch and runs
  /// the prologue on it (on the calling thread when onCaller). `tables`
  /// describes the filled scratch (one float when there is none); `ids`,
  /// when given, receives the i64 id table ([axes * rows, seq]).
  Status fillStandaloneTables(const BoundInputs &bound, int64_t batch, int64_t seq, bool onCaller,
                              ScratchBuffer &scratch, MemRefDescriptor<float, 1> &tables,
                              std::vector<int64_t> *ids = nullptr) const;
  mutable std::mutex scratchMutex_;
  mutable ScratchBuffer spareScratch_; // data null: none kept
};

} // namespace pejit

#endif // PEJIT_RUNTIME_X86KERNELIMPL_H
