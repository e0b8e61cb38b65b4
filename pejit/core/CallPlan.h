// What one x86 kernel call needs besides its tensors, from the call's
// lengths: work items, the QK transform's tables, and whether K is rotated
// once into a key cache. The compiler plans a static shape with the same
// rule (attn-instantiate-x86-template), so a kernel and its runtime agree;
// a shape class's kernel (docs/shape-classes.md) is planned per call.
#ifndef PEJIT_RUNTIME_CORE_CALLPLAN_H
#define PEJIT_RUNTIME_CORE_CALLPLAN_H

#include "pejit/core/KernelArtifact.h"

#include <algorithm>
#include <cstdint>

namespace pejit {

/// The key cache's bound: K in f32 above it is rotated per tile instead.
inline constexpr int64_t kMaxKeyCacheBytes = int64_t(256) << 20;

struct CallPlan {
  int64_t items = 0; ///< b hq ceil(sq / BM), or b hkv grouped
  /// sq = 1 and the kernel groups decode: pejit_decode_item, one item per
  /// (b, hk) for its GROUP query heads, K and V read once per KV head.
  bool groupedDecode = false;
  /// Split-KV parts of a grouped decode step (1: none): with fewer
  /// (b, hk) items than 2 per thread, each takes 1 / parts of the keys, and
  /// pejit_decode_combine merges them from partialFloats of scratch
  /// ([b hkv, parts, GROUP, dv + 2]: Os, m, l) in combineItems items.
  int64_t parts = 1, partialFloats = 0, combineItems = 0;
  int64_t tableFloats = 0;    ///< the prologue's tables
  int64_t keyCacheFloats = 0; ///< [b, hkv, ceil(skv / BN), BN, d]; 0: no key cache
  int64_t prepareJobs = 0;    ///< b hkv ceil(skv / BN) with a key cache, else 0
};

/// A split-KV part takes at least this many key tiles: fewer would spend
/// more on merging than they save.
inline constexpr int64_t kMinTilesPerPart = 4;

/// The plan of a call of `shape` (all dims known, each below 2^31 and the
/// tensors within 2^40 elements: no product here overflows) on `threads`
/// threads. The key cache pays with two or more query tiles (each K tile is
/// read by several) and within kMaxKeyCacheBytes.
inline CallPlan planCall(const KernelDescription &rule, const Shape &shape, int64_t threads = 1) {
  CallPlan plan;
  int64_t queryTiles = (shape.querySeq + rule.queryTile - 1) / rule.queryTile;
  plan.items = shape.batch * shape.queryHeads * queryTiles;
  if (rule.decodeGroup > 1 && shape.querySeq == 1) {
    plan.groupedDecode = true;
    int64_t heads = shape.batch * shape.kvHeads;
    int64_t keyTiles = (shape.keySeq + rule.keyTile - 1) / std::max<int64_t>(rule.keyTile, 1);
    if (heads < 2 * threads)
      plan.parts = std::max<int64_t>(
          1, std::min((2 * threads + heads - 1) / heads, keyTiles / kMinTilesPerPart));
    plan.items = heads * plan.parts;
    if (plan.parts > 1) {
      plan.partialFloats = heads * plan.parts * rule.decodeGroup * (shape.valueDim + 2);
      plan.combineItems = heads;
    }
  }
  auto rows = [&](int64_t positionRows) { return positionRows == 1 ? 1 : shape.batch; };
  plan.tableFloats =
      rule.tableFloatsPerQueryPosition * rows(rule.queryPositionRows) * shape.querySeq +
      rule.tableFloatsPerKeyPosition * rows(rule.keyPositionRows) * shape.keySeq;
  if (rule.keyCacheTile <= 0 || queryTiles < 2)
    return plan;
  int64_t keyTiles = (shape.keySeq + rule.keyCacheTile - 1) / rule.keyCacheTile;
  int64_t jobs = shape.batch * shape.kvHeads * keyTiles;
  int64_t floats = jobs * rule.keyCacheTile * shape.headDim;
  if (floats > kMaxKeyCacheBytes / 4)
    return plan;
  plan.keyCacheFloats = floats;
  plan.prepareJobs = jobs;
  return plan;
}

} // namespace pejit

#endif // PEJIT_RUNTIME_CORE_CALLPLAN_H
