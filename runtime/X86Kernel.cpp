// Kernel::run: checks the user's views against the compiled shape, binds
// them to the kernel's memref descriptors, runs the prologue once and the
// work items on the thread pool.
#include "runtime/X86KernelImpl.h"
#include "dialects/Limits.h"

#include <sstream>

namespace pejit {

namespace {

std::string dims(const std::vector<int64_t> &shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::vector<int64_t> stridesOf(const TensorView &view) {
  if (!view.strides.empty())
    return view.strides;
  std::vector<int64_t> strides(view.shape.size(), 1);
  for (int i = static_cast<int>(view.shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * view.shape[i + 1];
  return strides;
}

/// Checks a view's pointer, dtype, shape and strides; `what` names it.
Status checkView(const TensorView &view, const std::string &what,
                 const std::vector<int64_t> &expected, std::vector<DType> dtypes) {
  if (!view.data)
    return Status::error(what + ": data pointer is null");
  bool dtypeOk = false;
  for (DType d : dtypes)
    dtypeOk |= view.dtype == d;
  if (!dtypeOk)
    return Status::error(what + ": dtype " + dtypeName(view.dtype) +
                         " is not supported here (expected " + dtypeName(dtypes[0]) +
                         (dtypes.size() > 1 ? std::string(" or ") + dtypeName(dtypes[1]) : "") +
                         ")");
  if (view.shape != expected)
    return Status::error(what + ": shape " + dims(view.shape) +
                         " does not match the kernel's " + dims(expected));
  if (!view.strides.empty() && view.strides.size() != view.shape.size())
    return Status::error(what + ": " + std::to_string(view.strides.size()) +
                         " strides for a rank-" + std::to_string(view.shape.size()) + " shape");
  std::vector<int64_t> strides = stridesOf(view);
  if (!strides.empty() && strides.back() != 1)
    return Status::error(what + ": the last dimension must be contiguous (stride 1), got " +
                         std::to_string(strides.back()));
  for (int64_t stride : strides)
    if (stride < 0)
      return Status::error(what + ": negative strides are not supported");
  return Status();
}

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

/// Position ids as the kernel takes them: i64 [rows, seq], from the user's
/// i32/i64 view, or the CONVENTIONS.md default (first + index).
Status buildPositionTable(const TensorView *view, const std::string &what, int64_t rows,
                     int64_t seq, int64_t batch, int64_t first, std::vector<int64_t> &table) {
  table.assign(rows * seq, 0);
  if (!view) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t s = 0; s < seq; ++s)
        table[r * seq + s] = first + s;
    return Status();
  }
  std::vector<int64_t> expected = rows == 1 ? std::vector<int64_t>{seq}
                                            : std::vector<int64_t>{batch, seq};
  if (rows == 1 && view->shape.size() == 2 && view->shape[0] == 1)
    expected = {1, seq};
  if (Status s = checkView(*view, what, expected, {DType::I64, DType::I32}); !s)
    return s;
  std::vector<int64_t> strides = stridesOf(*view);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < seq; ++s) {
      int64_t offset = (view->shape.size() == 2 ? r * strides[0] : 0) + s * strides.back();
      int64_t position = view->dtype == DType::I64
                             ? static_cast<const int64_t *>(view->data)[offset]
                             : static_cast<const int32_t *>(view->data)[offset];
      // docs/limits.md: RoPE angles stay exact only for |position| < 2^31.
      if (position < -limits::kMaxPositionMagnitude || position >= limits::kMaxPositionMagnitude)
        return Status::error(what + ": position " + std::to_string(position) + " at [" +
                             (view->shape.size() == 2 ? std::to_string(r) + ", " : "") +
                             std::to_string(s) + "] is outside [-2^31, 2^31)");
      table[r * seq + s] = position;
    }
  return Status();
}

Status CompiledKernel::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  size_t required = 0;
  for (const std::string &role : arguments)
    required += role.find("positions") == std::string::npos;
  if (inputs.size() < required || inputs.size() > arguments.size())
    return Status::error("expected " + std::to_string(required) +
                         (required == arguments.size()
                              ? std::string()
                              : " to " + std::to_string(arguments.size())) +
                         " inputs (" + [&] {
                           std::string names;
                           for (const std::string &r : arguments)
                             names += (names.empty() ? "" : ", ") + r;
                           return names;
                         }() + "), got " + std::to_string(inputs.size()));
  const Shape &s = shape;
  const TensorView *views[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  const char *roles[5] = {"query", "key", "value", "query_positions", "key_positions"};
  // "positions": one argument holds the ids of both queries and keys.
  auto plays = [&](size_t argument, int role) {
    return arguments[argument] == roles[role] ||
           (role >= 3 && arguments[argument] == "positions");
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int r = 0; r < 5; ++r)
      if (plays(i, r))
        views[r] = &inputs[i];
  auto name = [&](int role) {
    for (size_t i = 0; i < arguments.size(); ++i)
      if (plays(i, role))
        return "input " + std::to_string(i) + " (" + arguments[i] + ")";
    return std::string(roles[role]);
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
  if (Status st = buildPositionTable(views[3], name(3), queryPositionRows, s.querySeq, s.batch,
                                s.keySeq - s.querySeq, queryPositions);
      !st)
    return st;
  if (Status st = buildPositionTable(views[4], name(4), keyPositionRows, s.keySeq, s.batch, 0,
                                keyPositions);
      !st)
    return st;

  MemRefDescriptor<int64_t, 2> qp{queryPositions.data(), queryPositions.data(), 0,
                                  {queryPositionRows, s.querySeq}, {s.querySeq, 1}};
  MemRefDescriptor<int64_t, 2> kp{keyPositions.data(), keyPositions.data(), 0,
                                  {keyPositionRows, s.keySeq}, {s.keySeq, 1}};
  ScratchBuffer scratch = takeScratch();
  if (!scratch)
    return Status::error("out of memory: the kernel's scratch of " +
                         std::to_string(scratchFloats) + " floats could not be allocated");
  MemRefDescriptor<float, 1> sd{scratch.get(), scratch.get(), 0,
                                {std::max<int64_t>(scratchFloats, 1)}, {1}};
  MemRefDescriptor<float, 4> q = describe4(*views[0]), k = describe4(*views[1]),
                             v = describe4(*views[2]), o = describe4(out);
  // The tables (RoPE's cos/sin per position) on all cores: call i fills
  // the position rows i, i + parts, ... Without tables (no QK transform)
  // the prologue is empty: no round trip through the pool.
  if (scratchFloats > 0) {
    int64_t parts = pool_->threads();
    pool_->parallelFor(parts, [&](int64_t part) {
      MemRefDescriptor<int64_t, 2> qpc = qp, kpc = kp;
      MemRefDescriptor<float, 1> sdc = sd;
      prologue_(&qpc, &kpc, &sdc, part, parts);
    });
  }
  // K rotated once into the key cache (after all tables exist).
  if (prepareJobs > 0) {
    int64_t parts = std::min<int64_t>(pool_->threads(), prepareJobs);
    pool_->parallelFor(parts, [&](int64_t part) {
      MemRefDescriptor<float, 4> kc = k;
      MemRefDescriptor<float, 1> sdc = sd;
      prepare_(&kc, &sdc, part, parts);
    });
  }
  ItemFn item = item_;
  pool_->parallelFor(items, [&](int64_t index) {
    // Each call gets its own descriptor copies: the kernel may not write
    // them, but nothing is shared between threads but the buffers.
    MemRefDescriptor<float, 4> qc = q, kc = k, vc = v, oc = o;
    MemRefDescriptor<float, 1> scc = sd;
    item(&qc, &kc, &vc, &oc, &scc, index);
  });
  returnScratch(std::move(scratch));
  return Status();
}

CompiledKernel::ScratchBuffer CompiledKernel::takeScratch() const {
  {
    std::lock_guard<std::mutex> lock(scratchMutex_);
    if (spareScratch_)
      return std::move(spareScratch_);
  }
  // Every float the kernel reads from scratch it wrote first (tables, key
  // cache), so the buffer needs no clearing. 64-byte aligned for its tiles.
  size_t bytes = (static_cast<size_t>(std::max<int64_t>(scratchFloats, 1)) * sizeof(float) + 63) /
                 64 * 64;
  return ScratchBuffer(static_cast<float *>(std::aligned_alloc(64, bytes)));
}

void CompiledKernel::returnScratch(ScratchBuffer buffer) const {
  // One spare at most: memory stays bounded by one scratch per kernel
  // (plus one per run in flight); a concurrent run's extra one is freed.
  std::lock_guard<std::mutex> lock(scratchMutex_);
  if (!spareScratch_)
    spareScratch_ = std::move(buffer);
}

Status Kernel::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  return impl_->run(inputs, out);
}

Expected<std::string> Kernel::ir(const std::string &stage) const { return impl_->stage(stage); }

const std::vector<std::string> &Kernel::stageNames() {
  static const std::vector<std::string> names = {"source", "fused", "tiled",
                                                 "llvm",   "llvm-ir", "asm"};
  return names;
}

const std::vector<std::string> &Kernel::arguments() const { return impl_->arguments; }
const Shape &Kernel::shape() const { return impl_->shape; }
double Kernel::compileMilliseconds() const { return impl_->compileMs; }

bool Kernel::loadedFromDisk() const { return impl_->fromDisk; }

TileConfig Kernel::tiles() const { return impl_->tiles; }
DType Kernel::dtype() const { return impl_->inputDtype; }
DType Kernel::outputDtype() const { return impl_->outputDtype; }

} // namespace pejit
