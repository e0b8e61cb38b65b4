// The one reader and writer of an nvidia kernel's launch description
// ("nvidia.meta" in the disk cache, NAME.meta in the GPU check bundle): one
// "key values..." line per field.
//   arch sm_90
//   kernel pejit_embed   (pejit_transform, pejit_embed, pejit_linear or
//                         pejit_backward, the attention backward's kernels; absent:
//                         pejit_attention)
//   grid 8 32 1          (static kernels only)
//   block 128 1 1
//   dtype float16        (of q, k, v)
//   out float32          (of the output)
//   scratch 4096         (floats of the QK transform's tables; 0 for a class)
//   row_scratch 20       (a backward's floats per row: D, lse and Shaw's
//                         terms; absent: 2)
//   splits 1 0 0         (splits, partial output floats, partial row floats;
//                         a shape class: its fixed split count or 0, 0, 0)
//   combine 1 1 1        (pejit_combine's grid; static attention kernels only)
//   tiles 64 64          (BM, BN)
//   tables 128 128       (the tables' floats per query / key position)
//   shape 1 32 8 ? ? 128 128       (b, hq, hkv, sq, skv, d, dv; `?`: per call)
//   positions 1 1 1      (query and key position rows, position axes)
//   arguments query:bf16:1x32x?x128 ...  (KernelSignature::str)
// A shape class's grid, splits and buffers are planned per call from
// tiles, tables and the call's lengths (NvidiaPlan.h). "positions" and
// "arguments" are optional on reading; the GPU check runner binds its
// source cases' inputs by them.
#ifndef PEJIT_RUNTIME_CORE_KERNELMETA_H
#define PEJIT_RUNTIME_CORE_KERNELMETA_H

#include "pejit/core/KernelArtifact.h"

#include <string>

namespace pejit {

std::string writeNvidiaMeta(const NvidiaLaunch &launch, const KernelDescription &description);

/// Reads what writeNvidiaMeta wrote into `launch` and the description's
/// dtypes, scratch size and (when present) shape, position rows and
/// signature. An error names the field that is missing or
/// malformed; unknown keys are ignored (newer writers may add fields).
Status readNvidiaMeta(const std::string &text, NvidiaLaunch &launch,
                      KernelDescription &description);

} // namespace pejit

#endif // PEJIT_RUNTIME_CORE_KERNELMETA_H
