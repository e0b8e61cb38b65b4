// #pe.rope -> the float64 reference's RopeConfig: one source of truth for
// RoPE frequencies, shared by the kernel hooks and the tests.
#ifndef PEJIT_DIALECTS_PE_ROPECONFIG_H
#define PEJIT_DIALECTS_PE_ROPECONFIG_H

#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/reference/Rope.h"

namespace pejit::pe {

ref::RopeConfig toReferenceConfig(RopeAttr rope);

/// The frequencies and attention factor the kernels will use for `rope` on
/// head dim `headDim` (rotary dims already checked against it), for short
/// and long contexts: every inverse frequency finite and at most
/// limits::kMaxInverseFrequency (so angles stay where float64 holds them
/// exactly enough), the attention factor positive and an f32.
mlir::LogicalResult verifyRopeFrequencies(RopeAttr rope, int64_t headDim,
                                          llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// A RoPE on one side (apply_to query or key) with a scaling whose
/// frequencies follow the call's length is refused: the other side was
/// rotated in another call, at other frequencies (the message says so).
mlir::LogicalResult verifyOneSidedScaling(RopeSides applyTo, RopeScalingAttrInterface scaling,
                                          llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_ROPECONFIG_H
