//===- Rope.h - float64 rotary position embedding (RoPE) reference --------===//
//
// RoPE and its context-extension scalings, exactly as docs/semantics.md fixes them
// (HF transformers' rope utilities). Everything is float64: the angle
// position × inv_freq is formed in double, so positions around 1e6 stay exact
// to ~1e-10 rad.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_REFERENCE_ROPE_H
#define PEJIT_RUNTIME_REFERENCE_ROPE_H

#include "pejit/reference/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace pejit::ref {

/// Which channels form a rotated pair.
enum class RopeLayout {
  Half,        ///< c with c + rotaryDim/2 (NeoX/LLaMA rotate_half)
  Interleaved, ///< 2c with 2c + 1 (GPT-J/RoFormer)
};

struct RopeScaling {
  enum class Kind { None, Linear, Ntk, DynamicNtk, Yarn, Llama3, LongRope };
  Kind kind = Kind::None;
  double factor = 1.0;
  /// Pretraining context length; required by dynamic_ntk, yarn, llama3,
  /// longrope.
  int64_t originalMaxPosition = 0;
  // yarn
  double betaFast = 32.0, betaSlow = 1.0;
  std::optional<double> mscale, mscaleAllDim;
  /// yarn and longrope: overrides the derived attention factor.
  std::optional<double> attentionFactor;
  bool truncate = true;
  // llama3
  double lowFreqFactor = 1.0, highFreqFactor = 4.0;
  // longrope: rotaryDim/2 entries each
  std::vector<double> shortFactor, longFactor;
};

struct RopeConfig {
  RopeLayout layout = RopeLayout::Half;
  double theta = 10000.0;
  /// Rotated channels (even); 0 = the whole head dim.
  int64_t rotaryDim = 0;
  RopeScaling scaling;
  /// Empty = 1-D RoPE. Else M-RoPE (Qwen2-VL): frequency indices [0, rd/2) are
  /// split in order into sections; section a takes its angle from axis a's
  /// position ids. Must sum to rotaryDim/2.
  std::vector<int64_t> sections;
  /// Qwen3-VL (apply_interleaved_mrope): with three sections [s0, s1, s2],
  /// frequency c takes axis 1 if c % 3 == 1 and c < 3 s1, axis 2 if
  /// c % 3 == 2 and c < 3 s2, else axis 0.
  bool interleavedSections = false;
  /// 2-D axial RoPE (SAM 2 compute_axial_cis): positions [2, s] (x, y);
  /// rd/4 frequencies per axis, inv_freq[i] = theta^(-4i/rd); frequency
  /// c < rd/4 rotates by x with inv_freq[c], the next rd/4 by y with
  /// inv_freq[c - rd/4]. No scaling.
  bool axial = false;
};

struct RopeFrequencies {
  std::vector<double> invFreq; ///< rotaryDim/2 entries
  /// Multiplies cos and sin of rotated channels (yarn, longrope; else 1).
  double attentionFactor = 1.0;
};

/// rotaryDim resolved against the head dim (0 means headDim); checked even and
/// within the head.
int64_t resolveRotaryDim(const RopeConfig &config, int64_t headDim);

/// Frequencies for one call. seqLen = max(position)+1 over the call (queries
/// and keys); only dynamic_ntk and longrope read it.
RopeFrequencies computeRopeFrequencies(const RopeConfig &config, int64_t headDim, int64_t seqLen);

/// Axes of the position ids: 0 for [s] / [b, s] ids, sections.size() for
/// M-RoPE, 2 for axial RoPE.
int64_t ropePositionAxes(const RopeConfig &config);

/// The position axis of each frequency index c < half (rotaryDim/2), in
/// docs/semantics.md's rules; all 0 without axes.
std::vector<int64_t> ropeAxisOfFrequency(const RopeConfig &config, int64_t half);

/// x: [b, h, s, d]. positions: [s] or [b, s]; with axes (sections, axial),
/// [A, s] or [A, b, s] where A = ropePositionAxes(config). Returns a rotated copy; channels
/// >= rotaryDim pass through unchanged. A positionScale ([1] or [b]; empty:
/// none) multiplies batch row b's positions before the rotation:
/// angle = (position * scale) * inv_freq. frequencies, when given, replace
/// computeRopeFrequencies' (learnable inverse frequencies).
Tensor applyRope(const RopeConfig &config, const Tensor &x, const PositionIds &positions,
                 int64_t seqLen, const std::vector<double> &positionScale = {},
                 const RopeFrequencies *frequencies = nullptr);

/// The adjoint of applyRope (docs/backward.md): dx is dOut rotated back
/// (the transpose, with the attention factor); dInvFreq[c] and
/// dPositionScale ([1] or [b], empty without a scale) are
/// Σ dL/dangle · ∂angle, where dL/dangle = g_b x'_a − g_a x'_b per pair.
struct RopeGradients {
  Tensor dx;
  std::vector<double> dInvFreq;
  std::vector<double> dPositionScale;
};
RopeGradients applyRopeBackward(const RopeConfig &config, const Tensor &x, const Tensor &dOut,
                                const PositionIds &positions, int64_t seqLen,
                                const std::vector<double> &positionScale = {},
                                const RopeFrequencies *frequencies = nullptr);

/// max(position) + 1 over all given ids (0 when all are empty): the seqLen
/// that dynamic_ntk and longrope see (docs/semantics.md, RoPE).
int64_t maxPositionPlusOne(const PositionIds &positions);
template <typename... More>
int64_t maxPositionPlusOne(const PositionIds &first, const PositionIds &second,
                           const More &...more) {
  return std::max(maxPositionPlusOne(first), maxPositionPlusOne(second, more...));
}

} // namespace pejit::ref

#endif // PEJIT_RUNTIME_REFERENCE_ROPE_H
