// The autotuner behind Runtime::tune (Tuner.cpp).
#ifndef PEJIT_RUNTIME_TUNER_H
#define PEJIT_RUNTIME_TUNER_H

#include "pejit/runtime/Pejit.h"

namespace pejit {

/// The x86 template's tile candidates for `shape`: query tiles (multiples of
/// 48) and key tiles (multiples of 6) whose working set (Qs, Qt, Os, St, Ks)
/// fits `l2Bytes`, without tiles far longer than the sequences.
std::vector<X86TileConfig> candidateTiles(const Shape &shape, int64_t l2Bytes);

/// Tries every candidate through `runtime.get` (so each lands in the caches)
/// and returns them timed; the caller stores the best.
Expected<TuneReport> tuneCandidates(Runtime &runtime, const Spec &spec, TuneOptions &options);

} // namespace pejit

#endif // PEJIT_RUNTIME_TUNER_H
