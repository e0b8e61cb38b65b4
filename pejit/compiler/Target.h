// Where a kernel runs, and the tile config of each target. Plain C++17 (no
// LLVM/MLIR): part of the public API (pejit/runtime/Pejit.h) and of the compiler.
//
//   host           x86-64 with AVX2 + FMA, this process (JIT, LLVM ORC)
//   nvidia:sm_XX   an NVIDIA GPU (PTX, and a cubin when ptxas is found)
#ifndef PEJIT_COMPILER_TARGET_H
#define PEJIT_COMPILER_TARGET_H

#include "pejit/compiler/X86Isa.h"

#include <cstdint>
#include <optional>
#include <string>

namespace pejit {

/// Tiles of the x86 template: queryTile (BM) a multiple of 48, keyTile (BN)
/// a multiple of 6 (pejit/compiler/backends/x86/X86TileRules.h has every rule).
struct X86TileConfig {
  int64_t queryTile = 144;
  int64_t keyTile = 96;
  /// The ISA family (docs/isa.md); nullopt: PEJIT_X86_ISA, else the host's best.
  std::optional<X86Isa> isa;
};

/// Tiles of the nvidia template: queryTile = 16 x warps per block (16, 32,
/// 64, 128), keyTile a multiple of 16 up to 128; Q staging, the K, V
/// tiles and the encodings' per-tile tables must fit 48 KB of static
/// shared memory.
struct NvidiaTileConfig {
  /// 0 = from the shape: 16 rows (1 warp) for sq <= 16, 32 for sq <= 32, else 64.
  int64_t queryTile = 0;
  /// 0 = 64, halved (down to 16) until the block's shared memory fits.
  int64_t keyTile = 0;
  /// Split-KV blocks per query tile (decode); 0 = from the shape, 1 = none.
  int64_t splits = 0;
};

struct Target {
  enum class Kind { X86, Nvidia };
  Kind kind = Kind::X86;
  /// nvidia: the architecture (sm_80, sm_86, sm_89, sm_90); x86: empty (the
  /// host CPU, whose name and features are part of every kernel key).
  std::string arch;

  static Target host() { return Target{}; }
  static Target nvidia(std::string arch = "sm_80") { return Target{Kind::Nvidia, std::move(arch)}; }

  /// "host" (or "x86"), "nvidia" (sm_80) or "nvidia:sm_XX"; nullopt, with
  /// `error` saying what is accepted, for anything else.
  static std::optional<Target> parse(const std::string &text, std::string *error = nullptr) {
    if (text == "host" || text == "x86")
      return host();
    if (text == "nvidia")
      return nvidia();
    if (text.rfind("nvidia:", 0) == 0 && text.size() > 7)
      return nvidia(text.substr(7));
    if (error)
      *error = "unknown target '" + text + "' (host, nvidia or nvidia:sm_XX)";
    return std::nullopt;
  }

  /// "host" or "nvidia:sm_XX": what parse() reads back.
  std::string str() const { return kind == Kind::X86 ? "host" : "nvidia:" + arch; }
};

} // namespace pejit

#endif // PEJIT_COMPILER_TARGET_H
