// The host's CPU features and the x86 ISA family a kernel is compiled for
// (docs/isa.md): which family a compile uses, and how a family becomes the
// LLVM functions' attributes at code generation.
#ifndef PEJIT_COMPILER_BACKENDS_X86_HOSTISA_H
#define PEJIT_COMPILER_BACKENDS_X86_HOSTISA_H

#include "pejit/compiler/X86Isa.h"
#include "pejit/core/Types.h"

#include <optional>
#include <string>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace mlir {
class ModuleOp;
}

namespace pejit {

/// The module attribute (a string, a family's name) that says which family
/// a tiled or lowered x86 module is compiled for. The instantiation sets it;
/// code generation reads it, so a stage's IR fed back in compiles the same.
inline constexpr const char *kX86IsaAttr = "pejit.x86_isa";

/// Whether the host CPU has a feature, as LLVM names it (avx512f, amx-bf16).
bool hostHasCpuFeature(const std::string &feature);

/// The family a compile uses: `requested`, else the PEJIT_X86_ISA
/// environment variable, else the best the host has. An error names an
/// unknown name, a family not built yet, or the CPU flag the host lacks.
Expected<X86Isa> resolveX86Isa(std::optional<X86Isa> requested = std::nullopt);

/// Whether this host's bf16 dot products (vdpbf16ps) outrun its f32 FMAs,
/// FLOP for FLOP: timed once per process (~2 ms) on register-resident
/// chains; false without AVX-512-BF16. The best family is avx512_bf16 only
/// then (some cores issue vdpbf16ps at half the FMA rate: bench/RESULTS.md).
bool bf16ProductsFasterOnHost();

/// Why a kernel compiled for `isa` cannot run here (the CPU flag the host
/// lacks); empty when it can.
std::string x86IsaProblemOnHost(X86Isa isa);

/// Gives every function defined in `module` the attributes of the family
/// its MLIR module `source` names (kX86IsaAttr; none: the host's features as
/// they are): avx2 turns AVX-512 and AMX off; the AVX-512 families let the
/// backend keep 512-bit vectors whole instead of splitting them in two.
void applyX86Isa(mlir::ModuleOp source, llvm::Module &module, const llvm::TargetMachine &machine);

} // namespace pejit

#endif // PEJIT_COMPILER_BACKENDS_X86_HOSTISA_H
