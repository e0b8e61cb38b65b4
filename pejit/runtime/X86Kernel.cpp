// X86Kernel: an artifact's objects linked into the process (load), its
// stages' text (stage) and its scratch buffers; its run is X86Call.cpp.
#include "pejit/core/CallPlan.h"
#include "pejit/runtime/CallParts.h"
#include "pejit/runtime/PagedKv.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

#include <algorithm>
#include <array>

#include "pejit/compiler/backends/x86/HostIsa.h"
#include "pejit/compiler/backends/x86/ObjectCode.h"
#include "pejit/compiler/backends/x86/X86Backend.h"

#include <sstream>

namespace pejit {

X86KernelImpl::~X86KernelImpl() = default;

Expected<std::shared_ptr<X86KernelImpl>> X86KernelImpl::load(KernelArtifact artifact,
                                                             std::shared_ptr<ThreadPool> pool) {
  using Result = Expected<std::shared_ptr<X86KernelImpl>>;
  // Each call is planned from the tiles (pejit/core/CallPlan.h).
  if (artifact.queryTile <= 0 || artifact.keyTile <= 0)
    return Result::error("the kernel's description has no tile sizes (tile_m " +
                         std::to_string(artifact.queryTile) + ", tile_n " +
                         std::to_string(artifact.keyTile) + "): its calls cannot be planned");
  // Code for a family this host lacks (a cache directory shared with
  // another kind of host) would fault on its first instruction: refused
  // before a byte of it is mapped.
  std::string isaError;
  std::optional<X86Isa> isa = parseX86Isa(artifact.isa, &isaError);
  if (!isa)
    return Result::error("the kernel's description names no x86 ISA family: " + isaError);
  if (std::string problem = x86IsaProblemOnHost(*isa); !problem.empty())
    return Result::error("the kernel was compiled for another host: " + problem);
  Expected<std::unique_ptr<LoadedObject>> object = LoadedObject::load(artifact.objects);
  if (!object)
    return Result::error(object.error());
  // Each entry point the description says the kernel has; a missing one
  // is an error naming it.
  std::shared_ptr<X86KernelImpl> kernel(new X86KernelImpl());
  std::string missing;
  auto lookup = [&](const char *name) -> void * {
    Expected<void *> found = (*object)->lookup(name);
    if (!found && missing.empty())
      missing = found.error();
    return found ? *found : nullptr;
  };
  if (artifact.signature.ropeScaleGradient()) { // pe.rope_scale_grad: a prologue and items
    kernel->transformPrologue_ =
        reinterpret_cast<TransformPrologueFn>(lookup("_mlir_ciface_pejit_prologue"));
    kernel->scaleGradItem_ =
        reinterpret_cast<ScaleGradItemFn>(lookup("_mlir_ciface_pejit_scale_grad_item"));
  } else if (artifact.signature.shawTermGradient) { // pe.relative_term_grad: one item function
    bool key = std::any_of(
        artifact.signature.arguments.begin(), artifact.signature.arguments.end(),
        [](const KernelArgument &argument) { return argument.role == ArgumentRole::Query; });
    if (key)
      kernel->keyTermGradItem_ =
          reinterpret_cast<KeyTermGradItemFn>(lookup("_mlir_ciface_pejit_key_term_grad_item"));
    else
      kernel->valueTermGradItem_ =
          reinterpret_cast<ValueTermGradItemFn>(lookup("_mlir_ciface_pejit_value_term_grad_item"));
  } else if (artifact.signature.scoreBiasGradient()) { // pe.score_bias_grad: one item function
    kernel->biasGradItem_ =
        reinterpret_cast<BiasGradItemFn>(lookup("_mlir_ciface_pejit_bias_grad_item"));
  } else if (artifact.signature.linearBackward) { // a prologue and one item per (b, hkv)
    kernel->prologue_ = reinterpret_cast<PrologueFn>(lookup("_mlir_ciface_pejit_prologue"));
    kernel->linearBackwardItem_ =
        reinterpret_cast<LinearBackwardItemFn>(lookup("_mlir_ciface_pejit_linear_backward_item"));
  } else if (artifact.signature.backward()) { // attn.attention_backward: three phases
    kernel->backwardRows_ =
        reinterpret_cast<BackwardRowsFn>(lookup("_mlir_ciface_pejit_backward_rows"));
    kernel->backwardKv_ = reinterpret_cast<BackwardKvFn>(lookup("_mlir_ciface_pejit_backward_kv"));
    kernel->backwardQuery_ =
        reinterpret_cast<BackwardQueryFn>(lookup("_mlir_ciface_pejit_backward_q"));
    kernel->backwardPrologue_ =
        reinterpret_cast<PrologueFn>(lookup("_mlir_ciface_pejit_backward_prologue"));
    kernel->backwardTransform_ =
        reinterpret_cast<BackwardTransformFn>(lookup("_mlir_ciface_pejit_backward_transform"));
    kernel->backwardWiden_ =
        reinterpret_cast<BackwardConvertFn>(lookup("_mlir_ciface_pejit_backward_widen"));
    kernel->backwardNarrow_ =
        reinterpret_cast<BackwardConvertFn>(lookup("_mlir_ciface_pejit_backward_narrow"));
  } else if (artifact.signature.embeddingGradient()) { // pe.embed_grad: one item function
    kernel->embedGradItem_ =
        reinterpret_cast<EmbedGradItemFn>(lookup("_mlir_ciface_pejit_embed_grad_item"));
  } else if (artifact.signature.materializedBias) { // a score bias written out: one item function
    kernel->biasItem_ = reinterpret_cast<BiasItemFn>(lookup("_mlir_ciface_pejit_bias_item"));
  } else if (artifact.signature.standaloneTransform()) { // a pe op on its own
    kernel->transformPrologue_ =
        reinterpret_cast<TransformPrologueFn>(lookup("_mlir_ciface_pejit_prologue"));
    if (artifact.signature.tokenEmbedding())
      kernel->embedItem_ = reinterpret_cast<EmbedItemFn>(lookup("_mlir_ciface_pejit_embed_item"));
    else
      kernel->transformItem_ =
          reinterpret_cast<TransformItemFn>(lookup("_mlir_ciface_pejit_transform_item"));
  } else {
    kernel->prologue_ = reinterpret_cast<PrologueFn>(lookup("_mlir_ciface_pejit_prologue"));
    kernel->item_ = reinterpret_cast<ItemFn>(lookup("_mlir_ciface_pejit_item"));
    if (artifact.keyCacheTile > 0) // a key cache may pay: the plan decides per call
      kernel->prepare_ = reinterpret_cast<PrepareFn>(lookup("_mlir_ciface_pejit_prepare"));
    if (artifact.decodeGroup > 0) {
      kernel->decodeItem_ =
          reinterpret_cast<DecodeItemFn>(lookup("_mlir_ciface_pejit_decode_item"));
      kernel->decodeCombine_ =
          reinterpret_cast<CombineFn>(lookup("_mlir_ciface_pejit_decode_combine"));
    }
  }
  if (!missing.empty())
    return Result::error(missing);
  kernel->pool_ = std::move(pool);
  kernel->object_ = std::move(*object);
  static_cast<KernelDescription &>(*kernel) = artifact;
  kernel->stages_ = std::move(artifact.stages);
  return Result(std::move(kernel));
}

Expected<std::string> X86KernelImpl::stage(const std::string &name) const {
  static const StageTable table = x86Stages();
  // Derived stages are computed once, under the lock, and kept.
  std::lock_guard<std::mutex> lock(derivedMutex_);
  return stageText(table, stages_, name, derivedStages_);
}

void X86KernelImpl::runItems(int64_t count, bool onCaller,
                             const std::function<void(int64_t)> &item) const {
  if (onCaller)
    for (int64_t index = 0; index < count; ++index)
      item(index);
  else
    pool_->parallelFor(count, item);
}

X86KernelImpl::ScratchBuffer X86KernelImpl::takeScratch(int64_t floats) const {
  size_t need = static_cast<size_t>(std::max<int64_t>(floats, 1));
  {
    std::lock_guard<std::mutex> lock(scratchMutex_);
    if (spareScratch_.data && spareScratch_.floats >= need)
      return std::move(spareScratch_);
  }
  // Every float the kernel reads from scratch it wrote first (tables, key
  // cache), so the buffer needs no clearing. 64-byte aligned for its tiles.
  size_t bytes = (need * sizeof(float) + 63) / 64 * 64;
  ScratchBuffer buffer;
  buffer.data.reset(static_cast<float *>(std::aligned_alloc(64, bytes)));
  buffer.floats = buffer.data ? need : 0;
  return buffer;
}

void X86KernelImpl::returnScratch(ScratchBuffer buffer) const {
  // One spare at most, the largest seen: memory stays bounded by one
  // scratch per kernel (plus one per run in flight); the other is freed.
  std::lock_guard<std::mutex> lock(scratchMutex_);
  if (!spareScratch_.data || spareScratch_.floats < buffer.floats)
    spareScratch_ = std::move(buffer);
}

Status X86Kernel::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  return impl_->run(inputs, out);
}

Status X86Kernel::runTraining(const std::vector<TensorView> &inputs, const TensorView &out,
                              const TensorView &lse) const {
  return impl_->run(inputs, out, &lse);
}

Status X86Kernel::runBackward(const std::vector<TensorView> &inputs,
                              const std::vector<TensorView> &gradients) const {
  return impl_->runBackward(inputs, gradients);
}

Expected<std::string> X86Kernel::ir(const std::string &stage) const { return impl_->stage(stage); }

const std::vector<std::string> &X86Kernel::stageNames() {
  static const std::vector<std::string> names = textStageNames(x86Stages());
  return names;
}

std::vector<std::string> X86Kernel::arguments() const { return impl_->signature.labels(); }
const KernelSignature &X86Kernel::signature() const { return impl_->signature; }
const Shape &X86Kernel::shape() const { return impl_->shape; }
Expected<Shape> X86Kernel::callShape(const std::vector<TensorView> &inputs) const {
  return callShapeOf(*impl_, inputs);
}
double X86Kernel::compileMilliseconds() const { return impl_->compileMs; }

bool X86Kernel::loadedFromDisk() const { return impl_->fromDisk; }
X86Isa X86Kernel::isa() const { return parseX86Isa(impl_->isa).value_or(X86Isa::Avx2); }
int64_t X86Kernel::lanes() const { return impl_->lanes; }

X86TileConfig X86Kernel::tiles() const { return impl_->tiles; }
DType X86Kernel::dtype() const { return impl_->inputDtype; }
DType X86Kernel::outputDtype() const { return impl_->outputDtype; }

} // namespace pejit
