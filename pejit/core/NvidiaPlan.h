// How an nvidia kernel is launched for one call's lengths: the grid, the
// split-KV parts and their buffers, the QK transform's tables. The
// compiler plans a static shape with the same rule
// (attn-instantiate-nvidia-template), so a kernel and its launcher agree; a
// shape class's kernel (`?` lengths) is planned per call, as CallPlan.h
// plans an x86 call.
#ifndef PEJIT_RUNTIME_CORE_NVIDIAPLAN_H
#define PEJIT_RUNTIME_CORE_NVIDIAPLAN_H

#include "pejit/core/KernelArtifact.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace pejit {

struct NvidiaCallPlan {
  std::vector<int64_t> grid, combineGrid; ///< pejit_attention's, pejit_combine's
  int64_t splits = 1;                     ///< KV parts per query tile (1: no combine)
  int64_t partialRowFloats = 0, partialOutputFloats = 0; ///< [b, hq, splits, sq] (x dv)
  int64_t tableFloats = 0;                               ///< the prologue's tables (0: no prologue)
};

/// Split-KV parts when there are too few blocks to fill a GPU (decode):
/// about 2 blocks per SM of a 132-SM part, each part at least 2 KV tiles,
/// at most 32 parts.
inline int64_t nvidiaSplits(int64_t blocks, int64_t kvTiles) {
  if (blocks >= 264 || kvTiles < 4)
    return 1;
  return std::max<int64_t>(1, std::min<int64_t>({(264 + blocks - 1) / blocks, kvTiles / 2, 32}));
}

/// The launch of a call of `call` (every dim known): `rule` gives the tiles
/// (queryTile BM, keyTile BN), the tables' floats per position and the
/// position rows; `splits` is the kernel's fixed part count, or 0 to choose
/// it by nvidiaSplits.
inline NvidiaCallPlan planNvidiaCall(const KernelDescription &rule, int64_t splits,
                                     const Shape &call) {
  NvidiaCallPlan plan;
  int64_t queryTiles = (call.querySeq + rule.queryTile - 1) / rule.queryTile;
  int64_t kvTiles = (call.keySeq + rule.keyTile - 1) / rule.keyTile;
  int64_t blocks = queryTiles * call.queryHeads * call.batch;
  plan.splits = splits > 0 ? splits : nvidiaSplits(blocks, kvTiles);
  plan.splits = std::min(plan.splits, std::max<int64_t>(kvTiles, 1));
  plan.grid = {queryTiles * plan.splits, call.queryHeads, call.batch};
  plan.combineGrid = {queryTiles, call.queryHeads, call.batch};
  if (plan.splits > 1) {
    plan.partialRowFloats = call.batch * call.queryHeads * plan.splits * call.querySeq;
    plan.partialOutputFloats = plan.partialRowFloats * call.valueDim;
  }
  auto rows = [&](int64_t positionRows) { return positionRows == 1 ? 1 : call.batch; };
  plan.tableFloats =
      rule.tableFloatsPerQueryPosition * rows(rule.queryPositionRows) * call.querySeq +
      rule.tableFloatsPerKeyPosition * rows(rule.keyPositionRows) * call.keySeq;
  return plan;
}

} // namespace pejit

#endif // PEJIT_RUNTIME_CORE_NVIDIAPLAN_H
