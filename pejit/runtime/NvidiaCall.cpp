// NvidiaKernelImpl::run: checks the user's views against the kernel's shape
// class, splits the call into its parts (CallParts.h: a packed batch's
// sequences, per-row key lengths, a paged cache's rows) and launches the
// kernel once per part through the CUDA driver, each planned from its own
// lengths (NvidiaPlan.h). The buffers are host memory: each part's rows are
// packed dense (a strided view, a packed sequence, a row's gathered pages),
// uploaded, and its output rows written back into the caller's view.
#include "pejit/runtime/CallParts.h"
#include "pejit/runtime/NvidiaKernelImpl.h"
#include "pejit/runtime/NvidiaParts.h"
#include "pejit/runtime/PagedKv.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/cuda/AttentionLaunch.h"

#include <cstring>
#include <optional>

namespace pejit {

using namespace nvidia;

namespace {

NvidiaPartLauncher &partLauncherForTesting() {
  static NvidiaPartLauncher launcher;
  return launcher;
}

/// Byte offset of element (n, h, r, 0) of a [b, h, s, d] view.
int64_t rowOffset(const TensorView &view, const std::vector<int64_t> &strides, int64_t n, int64_t h,
                  int64_t r) {
  return (n * strides[0] + h * strides[1] + r * strides[2]) * dtypeBytes(view.dtype);
}

/// A part's K or V: the view's rows in place, packed, or (paged) gathered
/// from its pages; `storage` keeps a copy alive.
const void *partRows(const TensorView &view, const PagedKv *paged, const TensorView *pages,
                     const CallPart &part, std::vector<char> &storage) {
  if (paged) {
    int64_t pageCount = (part.nk + paged->pageSize - 1) / paged->pageSize;
    storage.resize(
        static_cast<size_t>(view.shape[1] * part.nk * view.shape[3] * dtypeBytes(view.dtype)));
    gatherPages(*paged, *pages, part.row, part.nk, 0, pageCount, storage.data());
    return storage.data();
  }
  if (wholeDense(view, part.row, part.k0, part.nk))
    return view.data;
  storage = packRows(view, part.row, part.k0, part.nk);
  return storage.data();
}

} // namespace

namespace nvidia {

/// Whether rows [first, first + count) of batch row `row` (-1: all) are the
/// whole of a dense view: then the part reads it in place.
bool wholeDense(const TensorView &view, int64_t row, int64_t first, int64_t count) {
  return row < 0 && first == 0 && count == view.shape[2] &&
         stridesOf(view) == stridesOf(TensorView{view.data, view.dtype, view.shape, {}});
}

/// Rows [first, first + count) of batch row `row` (-1: every row) of a
/// [b, h, s, d] view, packed dense: [1 or b, h, count, d].
std::vector<char> packRows(const TensorView &view, int64_t row, int64_t first, int64_t count) {
  std::vector<int64_t> strides = stridesOf(view);
  int64_t rowBytes = view.shape[3] * dtypeBytes(view.dtype);
  int64_t n0 = row < 0 ? 0 : row, n1 = row < 0 ? view.shape[0] : row + 1;
  std::vector<char> out(static_cast<size_t>((n1 - n0) * view.shape[1] * count * rowBytes));
  char *to = out.data();
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t h = 0; h < view.shape[1]; ++h)
      for (int64_t r = first; r < first + count; ++r, to += rowBytes)
        std::memcpy(to, static_cast<const char *>(view.data) + rowOffset(view, strides, n, h, r),
                    rowBytes);
  return out;
}

/// The inverse of packRows: `dense` ([1 or b, h, count, d]) into the rows of
/// the view.
void unpackRows(const std::vector<char> &dense, const TensorView &view, int64_t row, int64_t first,
                int64_t count) {
  std::vector<int64_t> strides = stridesOf(view);
  int64_t rowBytes = view.shape[3] * dtypeBytes(view.dtype);
  int64_t n0 = row < 0 ? 0 : row, n1 = row < 0 ? view.shape[0] : row + 1;
  const char *from = dense.data();
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t h = 0; h < view.shape[1]; ++h)
      for (int64_t r = first; r < first + count; ++r, from += rowBytes)
        std::memcpy(static_cast<char *>(view.data) + rowOffset(view, strides, n, h, r), from,
                    rowBytes);
}

/// The driver and device a launch needs, checked once every input was:
/// a machine without one still reports bad inputs as such. Nothing to
/// check under a test launcher.
Status checkDevice(const std::string &arch) {
  if (partLauncherForTesting())
    return Status();
  auto driver = cuda::currentDriver();
  if (!driver)
    return Status::error(driver.error());
  std::string deviceArch = (*driver)->device().arch();
  if (deviceArch.size() == arch.size() && deviceArch < arch)
    return Status::error("the kernel is for " + arch + ", the device is " + deviceArch);
  return Status();
}

Status callPositionTables(const NvidiaKernelImpl &kernel, const BoundInputs &bound, const Shape &s,
                          std::vector<int64_t> &queryIds, std::vector<int64_t> &keyIds) {
  if (Status st = buildPositionTable(bound.queryPositions, bound.queryPositionsName,
                                     kernel.queryPositionRows, s.querySeq, s.batch,
                                     s.keySeq - s.querySeq, queryIds, kernel.positionAxes, 0,
                                     "position", !kernel.signature.declaresQueryPositions());
      !st)
    return st;
  return buildPositionTable(bound.keyPositions, bound.keyPositionsName, kernel.keyPositionRows,
                            s.keySeq, s.batch, 0, keyIds, kernel.positionAxes, 0, "position",
                            !kernel.signature.declaresKeyPositions());
}

/// One launch through the test launcher, or the driver.
cuda::Status launchPart(const cuda::AttentionKernelImage &image,
                        const cuda::AttentionBuffers &buffers) {
  const NvidiaPartLauncher &testLauncher = partLauncherForTesting();
  return testLauncher ? testLauncher(image, buffers) : cuda::runAttention(image, buffers);
}

} // namespace nvidia

void setNvidiaPartLauncherForTesting(NvidiaPartLauncher launcher) {
  partLauncherForTesting() = std::move(launcher);
}

Status NvidiaKernelImpl::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  if (launch.kernel == "pejit_linear")
    return runLinear(inputs, out);
  // The backward writes several gradients: NvidiaKernel::runBackward.
  if (launch.kernel == "pejit_backward")
    return Status::error("nvidia run: this is the attention backward: call runBackward with its "
                         "gradients dq, dk, dv");
  if (!launch.attention())
    return runStandalone(inputs, out);
  auto fail = [](const std::string &what) { return Status::error("nvidia run: " + what); };
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return fail(st.message());
  const TensorView *views[3] = {bound.query, bound.key, bound.value};
  // A paged cache: K and V are the pools' logical views, gathered per row.
  std::optional<PagedKv> paged;
  if (signature.paged()) {
    Expected<PagedKv> read = readPagedKv(bound, shape, inputDtype);
    if (!read)
      return fail(read.error());
    paged = std::move(*read);
    views[1] = &paged->logicalKey;
    views[2] = &paged->logicalValue;
  }
  if (!views[0] || !views[0]->data)
    return fail("query is missing or a null buffer");
  // The call's shape: the kernel's, its `?` lengths taken from Q and K (a
  // packed batch's total lengths).
  Expected<Shape> resolved = callShape(shape, *views[0], *views[1]);
  if (!resolved)
    return fail(resolved.error());
  const Shape &s = *resolved;
  std::vector<int64_t> qShape{s.batch, s.queryHeads, s.querySeq, s.headDim};
  std::vector<int64_t> kShape{s.batch, s.kvHeads, s.keySeq, s.headDim};
  std::vector<int64_t> vShape{s.batch, s.kvHeads, s.keySeq, s.valueDim};
  std::vector<int64_t> oShape{s.batch, s.queryHeads, s.querySeq, s.valueDim};
  if (Status st = checkView(*views[0], "input 0 (query)", qShape, {inputDtype}); !st)
    return fail(st.message());
  if (paged && paged->logicalKey.shape != kShape)
    return fail("block_table: the pages make K " + dimsText(paged->logicalKey.shape) +
                ", but the kernel's is " + dimsText(kShape));
  if (!paged) {
    if (Status st = checkView(*views[1], "input 1 (key)", kShape, {inputDtype}); !st)
      return fail(st.message());
    if (Status st = checkView(*views[2], "input 2 (value)", vShape, {inputDtype}); !st)
      return fail(st.message());
  }
  if (Status st = checkView(out, "output", oShape, {outputDtype}); !st)
    return fail(st.message());
  Expected<std::vector<CallPart>> parts = callParts(signature, bound, s);
  if (!parts)
    return fail(parts.error());
  if (paged)
    for (const CallPart &part : *parts)
      if (part.nq > 0 && part.nk > 0)
        if (Status st = checkBlockTable(*paged, part.row, part.nk); !st)
          return fail(st.message());
  for (const TensorView *operand : bound.encodingOperands)
    if (!isDenseRowMajor(*operand))
      return fail("encoding operands must be contiguous (the kernel reads them as dense tables)");

  // Every check passed: only now the driver.
  if (Status st = checkDevice(launch.arch); !st)
    return fail(st.message());

  bool sliced = partsSliceIds(signature);
  for (const CallPart &part : *parts) {
    if (part.nq == 0)
      continue;
    if (part.nk == 0) { // its rows see no key
      for (int64_t n = part.row < 0 ? 0 : part.row; n < (part.row < 0 ? s.batch : part.row + 1);
           ++n)
        zeroRows(out, n, part.q0, part.nq);
      continue;
    }
    Shape sub = s;
    sub.querySeq = part.nq;
    sub.keySeq = part.nk;
    if (part.row >= 0)
      sub.batch = 1;
    // Position ids: the part's slice of packed ids, or the defaults from
    // its own lengths (keys from 0, queries from nk - nq).
    std::optional<TensorView> qIds, kIds;
    const TensorView *queryIds = bound.queryPositions, *keyIds = bound.keyPositions;
    if (sliced && queryIds)
      queryIds = &qIds.emplace(positionsOf(*queryIds, part.q0, part.nq));
    if (sliced && keyIds)
      keyIds = &kIds.emplace(positionsOf(*keyIds, part.k0, part.nk));
    std::vector<int64_t> queryPositions, keyPositions;
    if (Status st =
            buildPositionTable(queryIds, bound.queryPositionsName, queryPositionRows, part.nq,
                               s.batch, part.nk - part.nq, queryPositions, positionAxes, 0,
                               "position", !signature.declaresQueryPositions());
        !st)
      return fail(st.message());
    if (Status st = buildPositionTable(keyIds, bound.keyPositionsName, keyPositionRows, part.nk,
                                       s.batch, 0, keyPositions, positionAxes, 0, "position",
                                       !signature.declaresKeyPositions());
        !st)
      return fail(st.message());
    if (Status st = checkPositionScale(signature, bound, {&queryPositions, &keyPositions}); !st)
      return fail(st.message());

    std::vector<char> qStore, kStore, vStore, oStore;
    cuda::AttentionBuffers buffers;
    buffers.query = wholeDense(*views[0], part.row, part.q0, part.nq)
                        ? views[0]->data
                        : (qStore = packRows(*views[0], part.row, part.q0, part.nq)).data();
    buffers.key = partRows(*views[1], paged ? &*paged : nullptr, paged ? paged->keyPages : nullptr,
                           part, kStore);
    buffers.value = partRows(*views[2], paged ? &*paged : nullptr,
                             paged ? paged->valuePages : nullptr, part, vStore);
    buffers.queryBytes = denseBytes({sub.batch, s.queryHeads, part.nq, s.headDim}, inputDtype);
    buffers.keyBytes = denseBytes({sub.batch, s.kvHeads, part.nk, s.headDim}, inputDtype);
    buffers.valueBytes = denseBytes({sub.batch, s.kvHeads, part.nk, s.valueDim}, inputDtype);
    buffers.queryPositions = &queryPositions;
    buffers.keyPositions = &keyPositions;
    bool outInPlace = wholeDense(out, part.row, part.q0, part.nq);
    buffers.outputBytes = denseBytes({sub.batch, s.queryHeads, part.nq, s.valueDim}, outputDtype);
    if (!outInPlace)
      oStore.resize(buffers.outputBytes);
    buffers.output = outInPlace ? out.data : oStore.data();
    for (const TensorView *operand : bound.encodingOperands)
      buffers.encodingOperands.push_back(
          {operand->data, denseBytes(operand->shape, operand->dtype)});
    cuda::AttentionKernelImage image =
        cuda::kernelImage(launch, *this, sub, cubin().empty() ? ptx() : cubin());
    if (cuda::Status st = launchPart(image, buffers); !st)
      return fail(st.error());
    if (!outInPlace)
      unpackRows(oStore, out, part.row, part.q0, part.nq);
  }
  return Status();
}

} // namespace pejit
