// attn-instantiate-template as a function: the fused attention function of a
// module becomes the kernel of a target template (today: x86 AVX2).
#ifndef PEJIT_COMPILER_INSTANTIATETEMPLATE_H
#define PEJIT_COMPILER_INSTANTIATETEMPLATE_H

#include "mlir/IR/BuiltinOps.h"
#include <cstdint>

namespace pejit {

struct TemplateTiles {
  int64_t queryTile = 144; ///< BM: query rows per work item (multiple of 48)
  int64_t keyTile = 96;   ///< BN: keys per KV tile (multiple of 6)
};

/// Name of the module attribute (a dictionary) that describes the kernel to
/// the runtime: items, scratch_floats, query_position_rows,
/// key_position_rows, tile_m, tile_n, and `arguments`, the role of each
/// argument of the source function ("query", "key", "value",
/// "query_positions", "key_positions", or "positions" for one argument that
/// is both).
inline constexpr const char *kKernelInfoAttr = "pejit.kernel";

/// Replaces the module's one function (one fused attn.attention on function
/// arguments, static f32 shapes) by the kernel functions @pejit_prologue and
/// @pejit_item of the template, with the encodings' hooks expanded. Emits a
/// diagnostic naming the problem and fails on anything it cannot compile.
mlir::LogicalResult instantiateX86Template(mlir::ModuleOp module, const TemplateTiles &tiles);

/// Tiles of the nvidia template: queryTile = 16 x warps (16, 32, 64, 128),
/// keyTile a multiple of 16 up to 128; Q staging and the K, V tiles must fit
/// 48 KB of static shared memory.
struct NvidiaTiles {
  int64_t queryTile = 0; ///< 0: 16 for sq <= 16, 32 for sq <= 32, else 64
  int64_t keyTile = 64;
  /// Split-KV: KV tiles of a query tile shared among this many blocks, then
  /// combined (decode); 0 = chosen from the shape, 1 = no split.
  int64_t splits = 0;
};

/// The nvidia (tensor-core, f16/bf16) template. The kernel description
/// (`pejit.kernel`) carries grid, block and dtype.
mlir::LogicalResult instantiateNvidiaTemplate(mlir::ModuleOp module,
                                              const NvidiaTiles &tiles = {});

} // namespace pejit

#endif // PEJIT_COMPILER_INSTANTIATETEMPLATE_H
