// The x86 ISA families (docs/isa.md): which vector instructions an x86
// kernel is compiled for. Plain C++17 (no LLVM/MLIR): part of the public API
// (pejit/runtime/Pejit.h), the compiler and the disk cache's loader.
//
//   avx2          8 f32 lanes, 16 ymm registers (the floor)
//   avx512        16 f32 lanes, 32 zmm registers
//   avx512_bf16   avx512, and vdpbf16ps for the products of 16-bit kernels
//   amx           avx512_bf16, and AMX tiles for those products
#ifndef PEJIT_COMPILER_X86ISA_H
#define PEJIT_COMPILER_X86ISA_H

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pejit {

enum class X86Isa { Avx2, Avx512, Avx512Bf16, Amx };

/// Every family, weakest first.
inline const std::vector<X86Isa> &allX86Isas() {
  static const std::vector<X86Isa> all = {X86Isa::Avx2, X86Isa::Avx512, X86Isa::Avx512Bf16,
                                          X86Isa::Amx};
  return all;
}

/// "avx2", "avx512", "avx512_bf16", "amx": what PEJIT_X86_ISA, the kernel
/// description and the disk cache's meta say.
inline const char *x86IsaName(X86Isa isa) {
  switch (isa) {
  case X86Isa::Avx2:
    return "avx2";
  case X86Isa::Avx512:
    return "avx512";
  case X86Isa::Avx512Bf16:
    return "avx512_bf16";
  case X86Isa::Amx:
    return "amx";
  }
  return "avx2";
}

/// The family a name says; nullopt, with `error` listing the names, else.
inline std::optional<X86Isa> parseX86Isa(const std::string &name, std::string *error = nullptr) {
  for (X86Isa isa : allX86Isas())
    if (name == x86IsaName(isa))
      return isa;
  if (error)
    *error = "unknown x86 ISA family '" + name + "' (avx2, avx512, avx512_bf16 or amx)";
  return std::nullopt;
}

/// The CPU flags a family needs, as LLVM names them (`avx512bf16`; Linux's
/// /proc/cpuinfo writes `avx512_bf16`), its weaker families' included.
inline std::vector<std::string> x86IsaFlags(X86Isa isa) {
  std::vector<std::string> flags = {"avx2", "fma"};
  if (isa == X86Isa::Avx2)
    return flags;
  for (const char *flag : {"avx512f", "avx512bw", "avx512vl", "avx512dq"})
    flags.push_back(flag);
  if (isa == X86Isa::Avx512)
    return flags;
  flags.push_back("avx512bf16");
  if (isa == X86Isa::Avx512Bf16)
    return flags;
  flags.push_back("amx-tile");
  flags.push_back("amx-bf16");
  return flags;
}

/// f32 lanes of the family's vectors.
inline int x86IsaLanes(X86Isa isa) { return isa == X86Isa::Avx2 ? 8 : 16; }

/// The first flag the family needs that `hostHas` says the host lacks;
/// empty when it has them all.
inline std::string x86IsaMissingFlag(X86Isa isa,
                                     const std::function<bool(const std::string &)> &hostHas) {
  for (const std::string &flag : x86IsaFlags(isa))
    if (!hostHas(flag))
      return flag;
  return "";
}

/// Whether pejit has kernels for the family yet (docs/status.md).
inline bool x86IsaBuilt(X86Isa isa) { return isa != X86Isa::Amx; }

/// The best built family whose flags the host has (avx2 as the floor:
/// pejit's x86 backend needs AVX2 and FMA). avx512_bf16 only where its
/// bf16 products are faster than f32 FMAs (`bf16ProductsFaster`, measured:
/// some cores run vdpbf16ps at half the FMA rate, docs/isa.md).
inline X86Isa bestX86Isa(const std::function<bool(const std::string &)> &hostHas,
                         bool bf16ProductsFaster = true) {
  X86Isa best = X86Isa::Avx2;
  for (X86Isa isa : allX86Isas())
    if (x86IsaBuilt(isa) && x86IsaMissingFlag(isa, hostHas).empty() &&
        (isa != X86Isa::Avx512Bf16 || bf16ProductsFaster))
      best = isa;
  return best;
}

} // namespace pejit

#endif // PEJIT_COMPILER_X86ISA_H
