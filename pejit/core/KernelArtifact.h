// What a backend's stage table produces and the runtime keeps: a kernel as
// data. The disk cache stores it; the x86 runtime links its objects in
// process; the nvidia runtime and the GPU check runner launch its cubin.
#ifndef PEJIT_RUNTIME_CORE_KERNELARTIFACT_H
#define PEJIT_RUNTIME_CORE_KERNELARTIFACT_H

#include "pejit/core/KernelSignature.h"
#include "pejit/core/Types.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pejit {

/// What the runtime needs to call a compiled kernel, besides its code: the
/// same for x86 and nvidia kernels.
struct KernelDescription {
  Shape shape;
  /// Each input, in order: its role, name, shape and dtype.
  KernelSignature signature;
  int64_t items = 0, scratchFloats = 0, queryPositionRows = 1, keyPositionRows = 1;
  /// Axes of the position ids (M-RoPE sections; 1 without): the kernel
  /// takes [axes * rows, s] tables.
  int64_t positionAxes = 1;
  /// Ids the kernel can take are in [0, positionLimit) (a learned table's
  /// rows): run refuses others, naming the id. 0: any id.
  int64_t positionLimit = 0;
  /// Jobs of pejit_prepare (K rotated once per call into scratch); 0: none.
  int64_t prepareJobs = 0;
  /// How an x86 call is planned from its lengths (CallPlan.h): query rows
  /// per item (BM) and key rows per tile (BN); BN when K is transformed (a key cache may pay), else
  /// 0; the QK transform's table floats per (batch row, position) of Q and K. items, scratchFloats
  /// and prepareJobs above are that plan at a static shape (0 for a shape class).
  int64_t queryTile = 0, keyTile = 0, keyCacheTile = 0;
  int64_t tableFloatsPerQueryPosition = 0, tableFloatsPerKeyPosition = 0;
  /// GROUP when one-row calls (sq = 1) may take the grouped decode item
  /// (pejit_decode_item: one item per KV head), else 0.
  int64_t decodeGroup = 0;
  /// A backward kernel's scratch floats per (batch, query head, row): D and
  /// lse, plus its bucketed terms' table (docs/backward.md); 2 for older
  /// entries, which had no such table.
  int64_t rowScratchFloats = 2;
  DType inputDtype = DType::F32, outputDtype = DType::F32; // of q/k/v and of the output
  /// x86: the ISA family the code is for (docs/isa.md: avx2, avx512, ...)
  /// and the f32 lanes of its vectors; empty and 0 for nvidia.
  std::string isa;
  int64_t lanes = 0;
};

/// How an nvidia kernel is launched: kept as the artifact's "nvidia.meta"
/// stage, in the text format of KernelMeta.h.
struct NvidiaLaunch {
  std::string arch;                 ///< sm_80, sm_86, sm_89, sm_90
  std::vector<int64_t> grid, block; ///< of pejit_attention
  /// Split-KV (splits > 1): partial outputs and row statistics per split,
  /// merged by pejit_combine over combineGrid.
  int64_t splits = 1, partialOutputFloats = 0, partialRowFloats = 0;
  std::vector<int64_t> combineGrid;
  /// The entry: pejit_attention, a standalone kernel's pejit_transform or
  /// pejit_embed (docs/standalone-kernels.md), or linear attention's
  /// pejit_linear (docs/linear-attention.md), or pejit_backward (the
  /// attention backward's kernels, docs/backward.md); only attention splits.
  std::string kernel = "pejit_attention";
  bool attention() const { return kernel == "pejit_attention"; }
};

/// Everything a compiled kernel is, as data: its description, the text of
/// every kept stage, and its object code.
struct KernelArtifact : KernelDescription {
  std::map<std::string, std::string> stages; // by stage name
  /// x86: ELF relocatables, one per codegen part, linked together on load.
  /// nvidia: one entry, the cubin (empty without ptxas).
  std::vector<std::string> objects;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_CORE_KERNELARTIFACT_H
