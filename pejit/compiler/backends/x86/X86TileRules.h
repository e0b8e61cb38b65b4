// Which tile configs the x86 template takes. One rule, used where tiles are
// instantiated and where the runtime reads tuned configs back from the disk
// cache (no MLIR here, so the light runtime can use it too).
#ifndef PEJIT_COMPILER_X86TILERULES_H
#define PEJIT_COMPILER_X86TILERULES_H

#include "pejit/dialects/Limits.h"

#include <cstdint>
#include <optional>
#include <string>

namespace pejit {

/// Bytes of one work item's tiles on the stack: Qs [BM, D], Qt [D, BM], Ks
/// [BN, D], Vs [BN, DV], St [BN, BM], Os [BM, DV] and the row vectors M, L,
/// A [BM], in f32; nothing when a product overflows.
inline std::optional<int64_t> x86ItemTileBytes(int64_t queryTile, int64_t keyTile, int64_t headDim,
                                               int64_t valueDim) {
  using limits::product;
  int64_t bm = queryTile, bn = keyTile, d = headDim, dv = valueDim;
  std::optional<int64_t> parts[] = {product(2 * d + dv + 3, bm), product(d + dv, bn),
                                    product(bn, bm)};
  std::optional<int64_t> floats = 0;
  for (std::optional<int64_t> part : parts)
    floats = part && floats ? llvm::checkedAdd(*floats, *part) : std::nullopt;
  return floats ? product(*floats, 4) : std::nullopt;
}

/// Why the x86 template cannot take tiles (queryTile x keyTile) at head dims
/// d, dv; empty when it can. tile_m is a positive multiple of 48, tile_n of
/// 6, and one work item's tiles fit limits::kMaxTileStackBytes of a worker's
/// stack (--tile=48x99999996 once asked for 70 GB of it and crashed).
/// Without a shape, pass the smallest head dims the template takes (8, 16):
/// tiles that fail there fail for every shape.
inline std::string x86TileProblem(int64_t queryTile, int64_t keyTile, int64_t headDim,
                                  int64_t valueDim) {
  std::string config =
      "tile config (" + std::to_string(queryTile) + ", " + std::to_string(keyTile) + ")";
  if (queryTile <= 0 || queryTile % 48 != 0 || keyTile <= 0 || keyTile % 6 != 0)
    return config + " is invalid: tile_m must be a multiple of 48, tile_n of 6";
  std::optional<int64_t> bytes = x86ItemTileBytes(queryTile, keyTile, headDim, valueDim);
  if (bytes && *bytes <= limits::kMaxTileStackBytes)
    return "";
  return config + " is invalid: a work item's tiles at d = " + std::to_string(headDim) +
         ", dv = " + std::to_string(valueDim) + " need " +
         (bytes ? std::to_string(*bytes) + " bytes" : std::string("over 2^63 bytes")) +
         " of stack, beyond pejit's limit of " + std::to_string(limits::kMaxTileStackBytes) +
         " (4 MiB)";
}

} // namespace pejit

#endif // PEJIT_COMPILER_X86TILERULES_H
