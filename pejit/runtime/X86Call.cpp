// X86KernelImpl::run: checks the user's views against the kernel's shape
// class, plans the call (pejit/core/CallPlan.h) and runs its phases on
// the thread pool: the tables (prologue), the key cache (prepare), the work
// items and a split decode's combine. A packed batch (segments) is one
// sub-call per sequence, and per-row key lengths (key_lengths) one per
// batch row, each planned from its own lengths; the phases of all of them
// run as one pool round trip each, so short sequences share the cores
// instead of waiting for each other.
#include "pejit/core/CallPlan.h"
#include "pejit/runtime/CallParts.h"
#include "pejit/runtime/PagedKv.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/X86KernelImpl.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

namespace pejit {

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

namespace {

/// `base` moved by `bytes`. A paged cache's logical K/V have no data until
/// gathered (a null base), so this is integer arithmetic: pointer
/// arithmetic on null is undefined behaviour.
float *offsetBytes(float *base, int64_t bytes) {
  return reinterpret_cast<float *>(reinterpret_cast<uintptr_t>(base) + bytes);
}

/// Rows [first, first + count) of dim 2 of a [b, h, s, d] descriptor.
MemRefDescriptor<float, 4> rowsOf(MemRefDescriptor<float, 4> desc, DType dtype, int64_t first,
                                  int64_t count) {
  desc.allocated = desc.aligned =
      offsetBytes(desc.aligned, first * desc.strides[2] * dtypeBytes(dtype));
  desc.sizes[2] = count;
  return desc;
}

/// Batch row n of a [b, h, s, d] descriptor.
MemRefDescriptor<float, 4> batchRowOf(MemRefDescriptor<float, 4> desc, DType dtype, int64_t n) {
  desc.allocated = desc.aligned =
      offsetBytes(desc.aligned, n * desc.strides[0] * dtypeBytes(dtype));
  desc.sizes[0] = 1;
  return desc;
}

/// One call of the kernel at one set of lengths: the whole call, or one
/// sequence of a packed batch.
struct SubCall {
  Shape shape;
  CallPlan plan;
  MemRefDescriptor<float, 4> q{}, k{}, v{}, o{}, lse{};
  std::vector<int64_t> queryPositions, keyPositions;
  MemRefDescriptor<int64_t, 2> qp{}, kp{};
  int64_t scratchOffset = 0, cacheOffset = 0; ///< floats into the call's scratch
  /// A paged row's gathered K (then V): bytes into the gather region.
  int64_t gatherAt = -1;
  MemRefDescriptor<float, 1> sd{}, kcd{}, partials{};
};

/// Table floats up to which the prologue runs on the calling thread: 64
/// positions of a d = 128 RoPE (a cos and a sin per frequency).
constexpr int64_t kInlineTableFloats = 64 * 128;

/// Multiply-adds up to which a call's items run on the calling thread: a
/// pool round trip costs more than their work (a decode step of linear
/// attention with its carried state, a few rows over a few keys).
constexpr int64_t kInlineItemFmas = int64_t(1) << 18;

/// Index of the sub-call whose range [first[i], first[i + 1]) holds `index`.
size_t subCallOf(const std::vector<int64_t> &first, int64_t index) {
  return std::upper_bound(first.begin(), first.end(), index) - first.begin() - 1;
}

} // namespace

Status X86KernelImpl::run(const std::vector<TensorView> &inputs, const TensorView &out,
                          const TensorView *lse) const {
  if (transformItem_)
    return runTransform(inputs, out);
  if (embedItem_)
    return runEmbedding(inputs, out);
  if (biasItem_)
    return runBias(inputs, out);
  if (embedGradItem_)
    return runEmbeddingGradient(inputs, out);
  if (scaleGradItem_)
    return runRopeScaleGradient(inputs, out);
  if (biasGradItem_)
    return runScoreBiasGradient(inputs, out);
  if (backwardQuery_)
    return Status::error("this is a backward kernel (attn.attention_backward): call runBackward "
                         "with its gradients dq, dk, dv");
  if (keyTermGradItem_ || valueTermGradItem_)
    return Status::error("this is a Shaw term's backward (pe.relative_term_grad): call "
                         "runBackward with its gradients (dq and the table's, or the table's)");
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return st;
  const TensorView *views[3] = {bound.query, bound.key, bound.value};
  // A paged cache: K and V are the pools' logical views, gathered below.
  std::optional<PagedKv> paged;
  if (signature.paged()) {
    Expected<PagedKv> read = readPagedKv(bound, shape, inputDtype);
    if (!read)
      return Status::error(read.error());
    paged = std::move(*read);
    views[1] = &paged->logicalKey;
    views[2] = &paged->logicalValue;
  }
  // The call's shape: the kernel's, its `?` lengths taken from Q and K (a
  // packed batch's total lengths).
  Expected<Shape> resolved = callShape(shape, *views[0], *views[1]);
  if (!resolved)
    return Status::error(resolved.error());
  const Shape &s = *resolved;
  std::vector<int64_t> qShape{s.batch, s.queryHeads, s.querySeq, s.headDim};
  std::vector<int64_t> kShape{s.batch, s.kvHeads, s.keySeq, s.headDim};
  std::vector<int64_t> vShape{s.batch, s.kvHeads, s.keySeq, s.valueDim};
  std::vector<int64_t> oShape{s.batch, s.queryHeads, s.querySeq, s.valueDim};
  if (Status st = checkView(*views[0], "input 0 (query)", qShape, {inputDtype}); !st)
    return st;
  if (paged && paged->logicalKey.shape != kShape)
    return Status::error("block_table: " + std::to_string(paged->logicalKey.shape[0]) +
                         " rows of " + std::to_string(paged->maxPages) + " pages of " +
                         std::to_string(paged->pageSize) + " keys make K " +
                         dimsText(paged->logicalKey.shape) + ", but the kernel's is " +
                         dimsText(kShape));
  if (!paged)
    if (Status st = checkView(*views[1], "input 1 (key)", kShape, {inputDtype}); !st)
      return st;
  if (!paged)
    if (Status st = checkView(*views[2], "input 2 (value)", vShape, {inputDtype}); !st)
      return st;
  if (Status st = checkView(out, "output", oShape, {outputDtype}); !st)
    return st;
  // A training forward's lse, [b, hq, sq] f32, seen by the kernel as
  // [b, hq, sq, 1]; without one, a descriptor of 0 rows.
  MemRefDescriptor<float, 4> lseDesc{};
  if (lse) {
    if (!signature.writesLse)
      return Status::error("lse: this kernel does not write it: compile a training forward "
                           "(attn.attention with an lse result; AttentionSpec::training)");
    if (Status st = checkView(*lse, "lse", {s.batch, s.queryHeads, s.querySeq}, {DType::F32}); !st)
      return st;
    lseDesc = describe4(lseAsRows(*lse));
  }
  // Linear attention's carried state [b, hq, d, dv + 2], updated in place.
  if (bound.linearState)
    if (Status st = checkView(*bound.linearState, bound.linearStateName,
                              {s.batch, s.queryHeads, s.headDim, s.valueDim + 2}, {DType::F32});
        !st)
      return st;
  // Checked once the shapes are known good: what the run writes aliases
  // nothing it reads.
  if (Status st = checkWrites(signature, inputs, out, false); !st)
    return st;
  if (lse)
    if (Status st = checkWrites(signature, inputs, {{&out, "output"}, {lse, "lse"}}, false); !st)
      return st;

  // The sub-calls: the call itself, one per sequence of a packed batch, or
  // one per batch row with its key length or its pages.
  Expected<std::vector<CallPart>> partsRead = callParts(signature, bound, s);
  if (!partsRead)
    return Status::error(partsRead.error());
  const std::vector<CallPart> &parts = *partsRead;
  // A paged row's gathered K and V: [hkv, nk, d] then [hkv, nk, dv], at
  // gatherOffset[i] bytes of the gather region (after the sub-calls' own
  // scratch, so the buffer is the kernel's reused one), filled in one pool
  // round trip (one job per part and run of pages).
  std::vector<int64_t> gatherOffset(parts.size(), 0);
  int64_t gatherBytes = 0;
  const int64_t unit = dtypeBytes(inputDtype);
  struct GatherJob {
    size_t part;
    int64_t firstPage, endPage;
    bool value;
  };
  std::vector<GatherJob> jobs;
  if (paged) {
    const int64_t pagesPerJob = std::max<int64_t>(1, 4096 / paged->pageSize);
    for (size_t i = 0; i < parts.size(); ++i) {
      const CallPart &part = parts[i];
      if (part.nq == 0 || part.nk == 0)
        continue;
      if (Status st = checkBlockTable(*paged, part.row, part.nk); !st)
        return st;
      // Consecutive pages: a strided view of the pools, no gather.
      if (consecutiveFirstPage(*paged, part.row, part.nk)) {
        gatherOffset[i] = -1;
        continue;
      }
      gatherOffset[i] = gatherBytes;
      gatherBytes += (s.kvHeads * part.nk * (s.headDim + s.valueDim) * unit + 63) / 64 * 64;
      int64_t pages = (part.nk + paged->pageSize - 1) / paged->pageSize;
      for (int64_t p = 0; p < pages; p += pagesPerJob)
        for (bool value : {false, true})
          jobs.push_back({i, p, std::min(pages, p + pagesPerJob), value});
    }
  }
  bool sliced = partsSliceIds(signature);
  MemRefDescriptor<float, 4> q = describe4(*views[0]), k = describe4(*views[1]),
                             v = describe4(*views[2]), o = describe4(out);
  std::vector<SubCall> calls;
  int64_t threads = pool_->threads();
  int64_t floats = 0;
  for (size_t partIndex = 0; partIndex < parts.size(); ++partIndex) {
    const CallPart &part = parts[partIndex];
    int64_t q0 = part.q0, nq = part.nq, k0 = part.k0, nk = part.nk;
    if (nq == 0)
      continue;
    if (nk == 0) { // its rows see no key: o = 0, lse = -inf
      for (int64_t n = part.row < 0 ? 0 : part.row; n < (part.row < 0 ? s.batch : part.row + 1);
           ++n) {
        zeroRows(out, n, q0, nq);
        if (lse)
          for (int64_t h = 0; h < s.queryHeads; ++h)
            for (int64_t i = q0; i < q0 + nq; ++i)
              lseDesc.aligned[n * lseDesc.strides[0] + h * lseDesc.strides[1] +
                              i * lseDesc.strides[2]] = -std::numeric_limits<float>::infinity();
      }
      continue;
    }
    SubCall call;
    call.shape = s;
    call.shape.querySeq = nq;
    call.shape.keySeq = nk;
    call.q = rowsOf(q, inputDtype, q0, nq);
    call.k = rowsOf(k, inputDtype, k0, nk);
    call.v = rowsOf(v, inputDtype, k0, nk);
    call.o = rowsOf(o, outputDtype, q0, nq);
    call.lse = lse ? rowsOf(lseDesc, DType::F32, q0, nq) : lseDesc;
    if (part.row >= 0) {
      if (lse)
        call.lse = batchRowOf(call.lse, DType::F32, part.row);
      call.shape.batch = 1;
      call.q = batchRowOf(call.q, inputDtype, part.row);
      call.k = batchRowOf(call.k, inputDtype, part.row);
      call.v = batchRowOf(call.v, inputDtype, part.row);
      call.o = batchRowOf(call.o, outputDtype, part.row);
    }
    if (paged && gatherOffset[partIndex] < 0) { // consecutive pages: views
      int64_t firstPage = *consecutiveFirstPage(*paged, part.row, nk);
      call.k = describe4(pagesView(*paged, *paged->keyPages, firstPage, nk));
      call.v = describe4(pagesView(*paged, *paged->valuePages, firstPage, nk));
    } else if (paged) { // the row's gathered K and V, dense [1, hkv, nk, d];
                        // the pointers once the scratch exists
      call.gatherAt = gatherOffset[partIndex];
      for (auto [desc, dim] : {std::pair<MemRefDescriptor<float, 4> *, int64_t>{&call.k, s.headDim},
                               {&call.v, s.valueDim}}) {
        desc->offset = 0;
        int64_t sizes[4] = {1, s.kvHeads, nk, dim},
                strides[4] = {s.kvHeads * nk * dim, nk * dim, dim, 1};
        std::copy(sizes, sizes + 4, desc->sizes);
        std::copy(strides, strides + 4, desc->strides);
      }
    }
    // Position ids: the sequence's slice of the packed ids, or the
    // defaults from its own lengths (keys from 0, queries from nk - nq).
    auto slice = [&](const TensorView *ids, int64_t first, int64_t count,
                     std::optional<TensorView> &part) -> const TensorView * {
      if (!ids || !sliced)
        return ids;
      part = positionsOf(*ids, first, count);
      return &*part;
    };
    std::optional<TensorView> qIds, kIds;
    if (Status st =
            buildPositionTable(slice(bound.queryPositions, q0, nq, qIds), bound.queryPositionsName,
                               queryPositionRows, nq, s.batch, nk - nq, call.queryPositions,
                               positionAxes, 0, "position", !signature.declaresQueryPositions());
        !st)
      return st;
    if (Status st =
            buildPositionTable(slice(bound.keyPositions, k0, nk, kIds), bound.keyPositionsName,
                               keyPositionRows, nk, s.batch, 0, call.keyPositions, positionAxes, 0,
                               "position", !signature.declaresKeyPositions());
        !st)
      return st;
    if (Status st =
            checkPositionScale(signature, bound, {&call.queryPositions, &call.keyPositions});
        !st)
      return st;
    call.qp = {call.queryPositions.data(),
               call.queryPositions.data(),
               0,
               {positionAxes * queryPositionRows, nq},
               {nq, 1}};
    call.kp = {call.keyPositions.data(),
               call.keyPositions.data(),
               0,
               {positionAxes * keyPositionRows, nk},
               {nk, 1}};
    // Items, tables and the key cache of this sub-call (the compile-time
    // plan at a static shape: the same rule). Its scratch: the tables,
    // then (64-byte aligned) the key cache or a split decode's partials.
    call.plan = planCall(*this, call.shape, threads);
    call.scratchOffset = floats;
    call.cacheOffset = floats + (call.plan.tableFloats + 15) / 16 * 16;
    floats = call.cacheOffset +
             (std::max(call.plan.keyCacheFloats, call.plan.partialFloats) + 15) / 16 * 16;
    calls.push_back(std::move(call));
  }
  if (calls.empty())
    return Status();
  const int64_t gatherBase = floats;
  floats += (gatherBytes / 4 + 15) / 16 * 16;
  ScratchBuffer scratch = takeScratch(floats);
  if (!scratch.data)
    return Status::error("out of memory: the kernel's scratch of " + std::to_string(floats) +
                         " floats could not be allocated");
  if (paged) {
    char *region = reinterpret_cast<char *>(scratch.data.get() + gatherBase);
    for (SubCall &call : calls) {
      if (call.gatherAt < 0)
        continue;
      char *keys = region + call.gatherAt;
      call.k.allocated = call.k.aligned = reinterpret_cast<float *>(keys);
      call.v.allocated = call.v.aligned =
          reinterpret_cast<float *>(keys + s.kvHeads * call.shape.keySeq * s.headDim * unit);
    }
    pool_->parallelFor(static_cast<int64_t>(jobs.size()), [&](int64_t index) {
      const GatherJob &job = jobs[index];
      const CallPart &part = parts[job.part];
      char *keys = region + gatherOffset[job.part];
      char *out = job.value ? keys + s.kvHeads * part.nk * s.headDim * unit : keys;
      gatherPages(*paged, job.value ? *paged->valuePages : *paged->keyPages, part.row, part.nk,
                  job.firstPage, job.endPage, out);
    });
  }
  // Each sub-call's views of scratch have their own base pointers: the
  // kernel's views of them (reinterpret_cast) set their offset from the
  // aligned pointer. A key cache of 0 floats tells the kernel to rotate K
  // per tile.
  int64_t allTableFloats = 0; // of every sub-call
  std::vector<int64_t> firstPrepare{0}, firstItem{0}, firstCombine{0};
  for (SubCall &call : calls) {
    float *tables = scratch.data.get() + call.scratchOffset;
    float *cache = scratch.data.get() + call.cacheOffset;
    call.sd = {tables, tables, 0, {std::max<int64_t>(call.plan.tableFloats, 1)}, {1}};
    call.kcd = {cache, cache, 0, {call.plan.keyCacheFloats}, {1}};
    call.partials = {cache, cache, 0, {std::max<int64_t>(call.plan.partialFloats, 1)}, {1}};
    allTableFloats += call.plan.tableFloats;
    firstPrepare.push_back(firstPrepare.back() + std::min(threads, call.plan.prepareJobs));
    firstItem.push_back(firstItem.back() + call.plan.items);
    firstCombine.push_back(firstCombine.back() + call.plan.combineItems);
  }
  // The encoding operand slots: each a memref descriptor of its own rank,
  // as words (two pointers, the offset, sizes, strides); unused slots get a
  // one-float dummy the kernel never reads.
  std::array<std::vector<int64_t>, kEncodingOperandSlots> operandWords;
  for (size_t slot = 0; slot < kEncodingOperandSlots; ++slot)
    operandWords[slot] = operandSlotWords(
        slot < bound.encodingOperands.size() ? bound.encodingOperands[slot] : nullptr);
  // Linear attention's state rides in slot 3 (a strided [b, hq, d, dv + 2]
  // descriptor; its RoPE's operand, if any, is slot 0).
  if (bound.linearState)
    operandWords[3] = operandSlotWords(bound.linearState);
  // The tables (RoPE's cos/sin per position) on all cores: part p of a
  // sub-call fills its position rows p, p + threads, ... Without tables
  // (no QK transform) the prologue is empty: no round trip through the pool.
  // Small tables (a decode step's one query row over a pre-rotated cache)
  // are filled on the calling thread: a pool round trip costs more.
  if (allTableFloats > 0 && allTableFloats <= kInlineTableFloats)
    for (SubCall &call : calls) {
      MemRefDescriptor<int64_t, 2> qpc = call.qp, kpc = call.kp;
      MemRefDescriptor<float, 1> sdc = call.sd;
      std::array<std::vector<int64_t>, kEncodingOperandSlots> ec = operandWords;
      prologue_(&qpc, &kpc, &sdc, 0, 1, ec[0].data(), ec[1].data(), ec[2].data(), ec[3].data());
    }
  else if (allTableFloats > 0)
    pool_->parallelFor(static_cast<int64_t>(calls.size()) * threads, [&](int64_t index) {
      SubCall &call = calls[index / threads];
      MemRefDescriptor<int64_t, 2> qpc = call.qp, kpc = call.kp;
      MemRefDescriptor<float, 1> sdc = call.sd;
      std::array<std::vector<int64_t>, kEncodingOperandSlots> ec = operandWords;
      prologue_(&qpc, &kpc, &sdc, index % threads, threads, ec[0].data(), ec[1].data(),
                ec[2].data(), ec[3].data());
    });
  // The call's work, roughly: softmax attention's Q.K^T and P.V, sq skv
  // (d + dv) a head; linear attention's state updates and reads, (sq + skv)
  // d dv. Only softmax kernels have a grouped decode item; for the others
  // both terms count. At most kInlineItemFmas, every phase runs on the
  // calling thread: each pool round trip (a condition-variable wake of
  // every worker) costs more than such work.
  int64_t work = s.batch * s.queryHeads * s.querySeq * s.keySeq * (s.headDim + s.valueDim);
  if (!decodeItem_)
    work += s.batch * s.queryHeads * (s.querySeq + s.keySeq) * s.headDim * s.valueDim;
  auto forEachJob = [&](int64_t count, const std::function<void(int64_t)> &job) {
    if (work <= kInlineItemFmas)
      for (int64_t index = 0; index < count; ++index)
        job(index);
    else
      pool_->parallelFor(count, job);
  };
  // K rotated once into the key cache (after all tables exist).
  if (firstPrepare.back() > 0)
    forEachJob(firstPrepare.back(), [&](int64_t index) {
      size_t c = subCallOf(firstPrepare, index);
      SubCall &call = calls[c];
      MemRefDescriptor<float, 4> kc = call.k;
      MemRefDescriptor<float, 1> kcc = call.kcd, sdc = call.sd;
      int64_t parts = firstPrepare[c + 1] - firstPrepare[c];
      prepare_(&kc, &kcc, &sdc, call.shape.querySeq, index - firstPrepare[c], parts);
    });
  ItemFn item = item_;
  DecodeItemFn decodeItem = decodeItem_;
  auto runItem = [&](int64_t index) {
    size_t c = calls.size() == 1 ? 0 : subCallOf(firstItem, index);
    const SubCall &call = calls[c];
    // Each call gets its own descriptor copies: the kernel may not write
    // them, but nothing is shared between threads but the buffers.
    MemRefDescriptor<float, 4> qc = call.q, kc = call.k, vc = call.v, oc = call.o, lc = call.lse;
    MemRefDescriptor<float, 1> scc = call.sd, kcc = call.kcd, pc = call.partials;
    std::array<std::vector<int64_t>, kEncodingOperandSlots> ec = operandWords;
    MemRefDescriptor<int64_t, 2> qpc = call.qp, kpc = call.kp;
    int64_t local = index - firstItem[c];
    if (call.plan.groupedDecode)
      decodeItem(&qc, &kc, &vc, &oc, &scc, &pc, ec[0].data(), ec[1].data(), ec[2].data(),
                 ec[3].data(), &qpc, &kpc, local, call.plan.parts);
    else
      item(&qc, &kc, &vc, &oc, &lc, &scc, &kcc, ec[0].data(), ec[1].data(), ec[2].data(),
           ec[3].data(), &qpc, &kpc, local);
  };
  forEachJob(firstItem.back(), runItem);
  // A split decode's parts merged, one item per (b, hk).
  if (firstCombine.back() > 0)
    forEachJob(firstCombine.back(), [&](int64_t index) {
      size_t c = subCallOf(firstCombine, index);
      const SubCall &call = calls[c];
      MemRefDescriptor<float, 4> oc = call.o;
      MemRefDescriptor<float, 1> pc = call.partials;
      decodeCombine_(&oc, &pc, index - firstCombine[c], call.plan.parts);
    });
  returnScratch(std::move(scratch));
  return Status();
}

} // namespace pejit
