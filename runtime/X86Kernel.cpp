// X86Kernel: an artifact's objects linked into the process (load), its
// stages' text (stage), and run: checks the user's views against the
// compiled shape, binds them to the kernel's memref descriptors, runs the
// prologue once and the work items on the thread pool.
#include "runtime/Views.h"
#include "runtime/X86KernelImpl.h"
#include "runtime/core/CallPlan.h"
#include <array>

#include "compiler/backends/x86/ObjectCode.h"
#include "compiler/backends/x86/X86Backend.h"

#include <sstream>

namespace pejit {

namespace {

MemRefDescriptor<float, 4> describe4(const TensorView &view) {
  MemRefDescriptor<float, 4> desc{};
  desc.allocated = desc.aligned = static_cast<float *>(view.data);
  std::vector<int64_t> strides = stridesOf(view);
  for (int i = 0; i < 4; ++i) {
    desc.sizes[i] = view.shape[i];
    desc.strides[i] = strides[i];
  }
  return desc;
}

} // namespace

X86KernelImpl::~X86KernelImpl() = default;

Expected<std::shared_ptr<X86KernelImpl>> X86KernelImpl::load(KernelArtifact artifact,
                                                             std::shared_ptr<ThreadPool> pool) {
  using Result = Expected<std::shared_ptr<X86KernelImpl>>;
  // Each call is planned from the tiles (runtime/core/CallPlan.h).
  if (artifact.queryTile <= 0 || artifact.keyTile <= 0)
    return Result::error("the kernel's description has no tile sizes (tile_m " +
                         std::to_string(artifact.queryTile) + ", tile_n " +
                         std::to_string(artifact.keyTile) + "): its calls cannot be planned");
  Expected<std::unique_ptr<LoadedObject>> object = LoadedObject::load(artifact.objects);
  if (!object)
    return Result::error(object.error());
  Expected<void *> prologue = (*object)->lookup("_mlir_ciface_pejit_prologue");
  if (!prologue)
    return Result::error(prologue.error());
  Expected<void *> item = (*object)->lookup("_mlir_ciface_pejit_item");
  if (!item)
    return Result::error(item.error());
  void *prepare = nullptr;
  if (artifact.keyCacheTile > 0) { // a key cache may pay: the plan decides per call
    Expected<void *> found = (*object)->lookup("_mlir_ciface_pejit_prepare");
    if (!found)
      return Result::error(found.error());
    prepare = *found;
  }
  void *decodeItem = nullptr, *decodeCombine = nullptr;
  if (artifact.decodeGroup > 0) {
    Expected<void *> found = (*object)->lookup("_mlir_ciface_pejit_decode_item");
    if (!found)
      return Result::error(found.error());
    decodeItem = *found;
    Expected<void *> combine = (*object)->lookup("_mlir_ciface_pejit_decode_combine");
    if (!combine)
      return Result::error(combine.error());
    decodeCombine = *combine;
  }
  std::shared_ptr<X86KernelImpl> kernel(new X86KernelImpl());
  kernel->decodeItem_ = reinterpret_cast<DecodeItemFn>(decodeItem);
  kernel->decodeCombine_ = reinterpret_cast<CombineFn>(decodeCombine);
  kernel->prepare_ = reinterpret_cast<PrepareFn>(prepare);
  kernel->pool_ = std::move(pool);
  kernel->object_ = std::move(*object);
  kernel->prologue_ = reinterpret_cast<PrologueFn>(*prologue);
  kernel->item_ = reinterpret_cast<ItemFn>(*item);
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

Status X86KernelImpl::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  const TensorView *views[3] = {bound.query, bound.key, bound.value};
  // The call's shape: the kernel's, its `?` lengths taken from Q and K.
  Expected<Shape> resolved = callShape(shape, *views[0], *views[1]);
  if (!resolved)
    return Status::error(resolved.error());
  const Shape &s = *resolved;
  auto name = [&](int role) {
    return std::string(role == 0   ? "input 0 (query)"
                       : role == 1 ? "input 1 (key)"
                                   : "input 2 (value)");
  };
  std::vector<int64_t> qShape{s.batch, s.queryHeads, s.querySeq, s.headDim};
  std::vector<int64_t> kShape{s.batch, s.kvHeads, s.keySeq, s.headDim};
  std::vector<int64_t> vShape{s.batch, s.kvHeads, s.keySeq, s.valueDim};
  std::vector<int64_t> oShape{s.batch, s.queryHeads, s.querySeq, s.valueDim};
  if (Status st = checkView(*views[0], name(0), qShape, {inputDtype}); !st)
    return st;
  if (Status st = checkView(*views[1], name(1), kShape, {inputDtype}); !st)
    return st;
  if (Status st = checkView(*views[2], name(2), vShape, {inputDtype}); !st)
    return st;
  if (Status st = checkView(out, "output", oShape, {outputDtype}); !st)
    return st;

  std::vector<int64_t> queryPositions, keyPositions;
  if (Status st = buildPositionTable(bound.queryPositions, bound.queryPositionsName,
                                     queryPositionRows, s.querySeq, s.batch, s.keySeq - s.querySeq,
                                     queryPositions, positionAxes);
      !st)
    return st;
  if (Status st = buildPositionTable(bound.keyPositions, bound.keyPositionsName, keyPositionRows,
                                     s.keySeq, s.batch, 0, keyPositions, positionAxes);
      !st)
    return st;

  MemRefDescriptor<int64_t, 2> qp{queryPositions.data(),
                                  queryPositions.data(),
                                  0,
                                  {positionAxes * queryPositionRows, s.querySeq},
                                  {s.querySeq, 1}};
  MemRefDescriptor<int64_t, 2> kp{keyPositions.data(),
                                  keyPositions.data(),
                                  0,
                                  {positionAxes * keyPositionRows, s.keySeq},
                                  {s.keySeq, 1}};
  // Items, tables and the key cache of this call (the compile-time plan at
  // a static shape: the same rule).
  CallPlan plan = planCall(*this, s, pool_->threads());
  // One buffer: the tables, then (64-byte aligned) the key cache or a split
  // decode's partial rows.
  int64_t cacheOffset = (plan.tableFloats + 15) / 16 * 16;
  int64_t floats = cacheOffset + std::max(plan.keyCacheFloats, plan.partialFloats);
  ScratchBuffer scratch = takeScratch(floats);
  if (!scratch.data)
    return Status::error("out of memory: the kernel's scratch of " + std::to_string(floats) +
                         " floats could not be allocated");
  float *base = scratch.data.get();
  MemRefDescriptor<float, 1> sd{base, base, 0, {std::max<int64_t>(plan.tableFloats, 1)}, {1}};
  // No key cache: 0 floats, which tells the kernel to rotate K per tile.
  // Its own base pointer: the kernel's views of it (reinterpret_cast) set
  // their offset from the aligned pointer, not from this one's offset.
  float *cache = base + cacheOffset;
  MemRefDescriptor<float, 1> kcd{cache, cache, 0, {plan.keyCacheFloats}, {1}};
  MemRefDescriptor<float, 1> partials{
      cache, cache, 0, {std::max<int64_t>(plan.partialFloats, 1)}, {1}};
  MemRefDescriptor<float, 4> q = describe4(*views[0]), k = describe4(*views[1]),
                             v = describe4(*views[2]), o = describe4(out);
  // The tables (RoPE's cos/sin per position) on all cores: call i fills
  // the position rows i, i + parts, ... Without tables (no QK transform)
  // the prologue is empty: no round trip through the pool.
  if (plan.tableFloats > 0) {
    int64_t parts = pool_->threads();
    pool_->parallelFor(parts, [&](int64_t part) {
      MemRefDescriptor<int64_t, 2> qpc = qp, kpc = kp;
      MemRefDescriptor<float, 1> sdc = sd;
      prologue_(&qpc, &kpc, &sdc, part, parts);
    });
  }
  // K rotated once into the key cache (after all tables exist).
  if (plan.prepareJobs > 0) {
    int64_t parts = std::min<int64_t>(pool_->threads(), plan.prepareJobs);
    pool_->parallelFor(parts, [&](int64_t part) {
      MemRefDescriptor<float, 4> kc = k;
      MemRefDescriptor<float, 1> kcc = kcd, sdc = sd;
      prepare_(&kc, &kcc, &sdc, s.querySeq, part, parts);
    });
  }
  // The encoding operand slots: each a memref descriptor of its own rank,
  // as words (two pointers, the offset, sizes, strides); unused slots get a
  // one-float dummy the kernel never reads.
  std::array<std::vector<int64_t>, kEncodingOperandSlots> operandWords;
  static float unusedSlot = 0.0f;
  for (size_t slot = 0; slot < kEncodingOperandSlots; ++slot) {
    const TensorView *view =
        slot < bound.encodingOperands.size() ? bound.encodingOperands[slot] : nullptr;
    std::vector<int64_t> sizes = view ? view->shape : std::vector<int64_t>{1};
    std::vector<int64_t> strides = view ? stridesOf(*view) : std::vector<int64_t>{1};
    auto pointer = reinterpret_cast<int64_t>(view ? view->data : &unusedSlot);
    std::vector<int64_t> &words = operandWords[slot];
    words = {pointer, pointer, 0};
    words.insert(words.end(), sizes.begin(), sizes.end());
    words.insert(words.end(), strides.begin(), strides.end());
  }
  ItemFn item = item_;
  DecodeItemFn decodeItem = decodeItem_;
  pool_->parallelFor(plan.items, [&](int64_t index) {
    // Each call gets its own descriptor copies: the kernel may not write
    // them, but nothing is shared between threads but the buffers.
    MemRefDescriptor<float, 4> qc = q, kc = k, vc = v, oc = o;
    MemRefDescriptor<float, 1> scc = sd, kcc = kcd, pc = partials;
    std::array<std::vector<int64_t>, kEncodingOperandSlots> ec = operandWords;
    MemRefDescriptor<int64_t, 2> qpc = qp, kpc = kp;
    if (plan.groupedDecode)
      decodeItem(&qc, &kc, &vc, &oc, &scc, &pc, ec[0].data(), ec[1].data(), ec[2].data(),
                 ec[3].data(), &qpc, &kpc, index, plan.parts);
    else
      item(&qc, &kc, &vc, &oc, &scc, &kcc, ec[0].data(), ec[1].data(), ec[2].data(), ec[3].data(),
           &qpc, &kpc, index);
  });
  // A split decode's parts merged, one item per (b, hk).
  if (plan.combineItems > 0) {
    CombineFn combine = decodeCombine_;
    pool_->parallelFor(plan.combineItems, [&](int64_t index) {
      MemRefDescriptor<float, 4> oc = o;
      MemRefDescriptor<float, 1> pc = partials;
      combine(&oc, &pc, index, plan.parts);
    });
  }
  returnScratch(std::move(scratch));
  return Status();
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

Expected<std::string> X86Kernel::ir(const std::string &stage) const { return impl_->stage(stage); }

const std::vector<std::string> &X86Kernel::stageNames() {
  static const std::vector<std::string> names = textStageNames(x86Stages());
  return names;
}

std::vector<std::string> X86Kernel::arguments() const { return impl_->signature.labels(); }
const KernelSignature &X86Kernel::signature() const { return impl_->signature; }
const Shape &X86Kernel::shape() const { return impl_->shape; }
Expected<Shape> X86Kernel::callShape(const std::vector<TensorView> &inputs) const {
  BoundInputs bound;
  if (Status st = bindInputs(impl_->signature, inputs, bound); !st)
    return st;
  return pejit::callShape(impl_->shape, *bound.query, *bound.key);
}
double X86Kernel::compileMilliseconds() const { return impl_->compileMs; }

bool X86Kernel::loadedFromDisk() const { return impl_->fromDisk; }

X86TileConfig X86Kernel::tiles() const { return impl_->tiles; }
DType X86Kernel::dtype() const { return impl_->inputDtype; }
DType X86Kernel::outputDtype() const { return impl_->outputDtype; }

} // namespace pejit
