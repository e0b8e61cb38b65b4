#include "pejit/dialects/pe/RopeConfig.h"
#include "pejit/dialects/Limits.h"
#include "pejit/dialects/pe/PEOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace pejit;
using namespace pejit::pe;

ref::RopeConfig pejit::pe::toReferenceConfig(RopeAttr rope) {
  ref::RopeConfig config;
  config.layout =
      rope.getLayout() == RopeLayout::Half ? ref::RopeLayout::Half : ref::RopeLayout::Interleaved;
  config.theta = rope.getTheta();
  config.rotaryDim = rope.getRotaryDim().value_or(0);
  config.sections.assign(rope.getSections().begin(), rope.getSections().end());
  config.interleavedSections = rope.getInterleavedSections();
  config.axial = rope.getAxial();
  ref::RopeScaling &s = config.scaling;
  using Kind = ref::RopeScaling::Kind;
  auto optional = [](std::optional<F64> v) -> std::optional<double> {
    return v ? std::optional<double>(v->value) : std::nullopt;
  };
  if (!rope.getScaling())
    return config;
  llvm::TypeSwitch<mlir::Attribute>(rope.getScaling())
      .Case([&](LinearScalingAttr a) {
        s.kind = Kind::Linear;
        s.factor = a.getFactor();
      })
      .Case([&](NtkScalingAttr a) {
        s.kind = Kind::Ntk;
        s.factor = a.getFactor();
      })
      .Case([&](DynamicNtkScalingAttr a) {
        s.kind = Kind::DynamicNtk;
        s.factor = a.getFactor();
        s.originalMaxPosition = a.getOriginalMaxPosition();
      })
      .Case([&](YarnScalingAttr a) {
        s.kind = Kind::Yarn;
        s.factor = a.getFactor();
        s.originalMaxPosition = a.getOriginalMaxPosition();
        s.betaFast = a.getBetaFast();
        s.betaSlow = a.getBetaSlow();
        s.mscale = optional(a.getMscale());
        s.mscaleAllDim = optional(a.getMscaleAllDim());
        s.attentionFactor = optional(a.getAttentionFactor());
        s.truncate = a.getTruncate();
      })
      .Case([&](Llama3ScalingAttr a) {
        s.kind = Kind::Llama3;
        s.factor = a.getFactor();
        s.lowFreqFactor = a.getLowFreqFactor();
        s.highFreqFactor = a.getHighFreqFactor();
        s.originalMaxPosition = a.getOriginalMaxPosition();
      })
      .Case([&](LongRopeScalingAttr a) {
        s.kind = Kind::LongRope;
        s.shortFactor.assign(a.getShortFactor().begin(), a.getShortFactor().end());
        s.longFactor.assign(a.getLongFactor().begin(), a.getLongFactor().end());
        s.originalMaxPosition = a.getOriginalMaxPosition();
        s.factor = a.getFactor();
        s.attentionFactor = optional(a.getAttentionFactor());
      })
      .Default([&](mlir::Attribute) { s.kind = Kind::None; });
  return config;
}

mlir::LogicalResult
pejit::pe::verifyRopeFrequencies(RopeAttr rope, int64_t headDim,
                                 llvm::function_ref<mlir::InFlightDiagnostic()> emitError) {
  ref::RopeConfig config = toReferenceConfig(rope);
  // The reference needs a head dim: with a dynamic one, the explicit rotary
  // dim is all that matters.
  if (mlir::ShapedType::isDynamic(headDim)) {
    if (config.rotaryDim == 0)
      return mlir::success();
    headDim = config.rotaryDim;
  }
  // Short contexts (seqLen 0 picks the unscaled dynamic frequencies) and
  // long ones (longrope's long factors; dynamic_ntk only lowers them).
  for (int64_t seqLen : {int64_t(0), config.scaling.originalMaxPosition + 1}) {
    ref::RopeFrequencies frequencies = ref::computeRopeFrequencies(config, headDim, seqLen);
    for (auto [c, invFreq] : llvm::enumerate(frequencies.invFreq))
      if (!(invFreq >= 0.0 && invFreq <= limits::kMaxInverseFrequency))
        return emitError() << "rope inverse frequency " << c << " is " << formatF64(invFreq)
                           << " (from theta and the scaling): it must be at most "
                           << formatF64(limits::kMaxInverseFrequency)
                           << ", so that angles (|position| < 2^31) stay below 2^36";
    double factor = frequencies.attentionFactor;
    llvm::StringRef problem = limits::f32RangeProblem(factor);
    if (!(factor > 0.0) || !problem.empty())
      return emitError() << "rope attention factor " << formatF64(factor)
                         << " (from the scaling) must be positive and an f32"
                         << (problem.empty() ? "" : ": it is ") << problem;
  }
  return mlir::success();
}

namespace pejit::pe {

// Operands: the runtime position scale, then the learned inverse
// frequencies (each only when the attribute asks for it).
unsigned RopeAttr::getNumEncodingOperands() const {
  return (getRuntimeScale() ? 1 : 0) + (getLearnedInvFreq() ? 1 : 0);
}
std::optional<unsigned> RopeAttr::scaleOperand() const {
  return getRuntimeScale() ? std::optional<unsigned>(0) : std::nullopt;
}
std::optional<unsigned> RopeAttr::invFreqOperand() const {
  return getLearnedInvFreq() ? std::optional<unsigned>(getRuntimeScale() ? 1 : 0) : std::nullopt;
}
std::string RopeAttr::getEncodingOperandName(unsigned index) const {
  return index == invFreqOperand() ? "rope_inv_freq" : "rope_position_scale";
}
// docs/backward.md: dL/ds and dL/d inv_freq[c].
bool RopeAttr::isDifferentiableOperand(unsigned) const { return true; }

/// The runtime scale: f32 [1], or [b] when every side it rotates has [b, s]
/// ids (its cos/sin tables are per id row, so a row's scale is its own).
mlir::LogicalResult
RopeAttr::verifyEncodingOperand(unsigned index, mlir::RankedTensorType type,
                                const AttentionShape &shape,
                                llvm::function_ref<mlir::InFlightDiagnostic()> emitError) const {
  if (index == invFreqOperand()) {
    int64_t half = getRotaryDim().value_or(shape.headDim) / 2;
    if (type.getRank() != 1 || !type.getElementType().isF32() || type.getDimSize(0) != half)
      return emitError() << "rope_inv_freq must be f32 [rotary_dim / 2 = " << half << "], got "
                         << type;
    return mlir::success();
  }
  if (type.getRank() != 1 || !type.getElementType().isF32() || type.isDynamicDim(0))
    return emitError() << "the RoPE position scale must be f32 [1] or [b] with a static size, got "
                       << type;
  int64_t n = type.getDimSize(0);
  if (n == 1)
    return mlir::success();
  if (n != shape.batch)
    return emitError() << "the RoPE position scale is [" << n << "]: it must be [1] or [b = "
                       << (mlir::ShapedType::isDynamic(shape.batch) ? std::string("?")
                                                                    : std::to_string(shape.batch))
                       << "] (a per-batch scale needs a static b)";
  if ((transformsQuery() && shape.queryPositionRows != n) ||
      (transformsKey() && shape.keyPositionRows != n))
    return emitError() << "a per-batch RoPE position scale [" << n
                       << "] needs per-batch position ids ([b, s]) on every side it rotates: "
                          "the cos/sin tables are per id row";
  return mlir::success();
}

bool RopeAttr::transformsQuery() const { return getApplyTo() != RopeSides::Key; }
bool RopeAttr::transformsKey() const { return getApplyTo() != RopeSides::Query; }

mlir::Attribute RopeAttr::onOneSide(bool query) const {
  return RopeAttr::get(getContext(), getLayout(), getTheta(), getRotaryDim(), getScaling(),
                       getSections(), getInterleavedSections(), getAxial(),
                       query ? RopeSides::Query : RopeSides::Key, getRuntimeScale(),
                       getLearnedInvFreq());
}

namespace {

/// x rotated (or, `adjoint`, rotated back: the transpose of the rotation,
/// applyRopeBackward's dx) by the float64 reference.
bool applyReferenceRope(RopeAttr rope, ref::Tensor &x, const ref::PositionIds &positions,
                        bool omitted, int64_t seqLen, llvm::ArrayRef<const ref::Tensor *> operands,
                        bool adjoint, std::string &error) {
  ref::RopeConfig config = toReferenceConfig(rope);
  if (ref::ropePositionAxes(config) > 0 && omitted) {
    error = "RoPE with position axes (M-RoPE sections, axial) needs explicit position ids";
    return false;
  }
  std::vector<double> positionScale;
  if (std::optional<unsigned> at = rope.scaleOperand()) {
    if (operands.size() <= *at || !operands[*at]) {
      error = "RoPE with runtime_scale needs its position scale";
      return false;
    }
    positionScale = operands[*at]->data;
  }
  std::optional<ref::RopeFrequencies> frequencies;
  if (std::optional<unsigned> at = rope.invFreqOperand()) {
    if (operands.size() <= *at || !operands[*at]) {
      error = "RoPE with learned_inv_freq needs its inverse frequencies";
      return false;
    }
    frequencies = ref::computeRopeFrequencies(config, x.shape[3], seqLen); // the attention factor
    frequencies->invFreq = operands[*at]->data;
  }
  const ref::RopeFrequencies *given = frequencies ? &*frequencies : nullptr;
  x = adjoint ? ref::applyRopeBackward(config, x, x, positions, seqLen, positionScale, given).dx
              : ref::applyRope(config, x, positions, seqLen, positionScale, given);
  return true;
}

} // namespace

bool RopeAttr::applyReferenceQKTransform(ref::Tensor &x, const ref::PositionIds &positions,
                                         bool omitted, int64_t seqLen,
                                         llvm::ArrayRef<const ref::Tensor *> operands,
                                         std::string &error) const {
  return applyReferenceRope(*this, x, positions, omitted, seqLen, operands, /*adjoint=*/false,
                            error);
}

} // namespace pejit::pe

namespace pejit::pe {

// pe.rope: its input rotated at its positions.
std::string RopeOp::getOperandRoleName(unsigned index) {
  return index == 0 ? "input" : index == 1 ? "positions" : "scale";
}

// pe.rope_scale_grad: the scale's gradient of pe.rope from its input and
// its output's gradient, by the float64 reference's adjoint.
bool RopeScaleGradOp::evaluateReference(const ref::Tensor &grad, const ref::Tensor &input,
                                        const ref::PositionIds &positions, const ref::Tensor &scale,
                                        int64_t seqLen, ref::Tensor &result, std::string &error) {
  ref::RopeConfig config = toReferenceConfig(getEncoding());
  if (positions.shape.empty()) {
    error = "pe.rope_scale_grad needs explicit position ids";
    return false;
  }
  ref::RopeGradients gradients =
      ref::applyRopeBackward(config, input, grad, positions, seqLen, scale.data);
  result = ref::Tensor(scale.shape, gradients.dPositionScale);
  return true;
}

bool RopeOp::isAdjoint() { return getAdjoint(); }
void RopeOp::makeAdjoint(bool adjoint) { setAdjoint(adjoint); }

bool RopeOp::evaluateReference(const ReferenceOpArgs &args, ref::Tensor &result,
                               std::string &error) {
  result = *args.tensors[0];
  llvm::SmallVector<const ref::Tensor *> operands;
  if (getPositionScale())
    operands.push_back(args.tensors[2]);
  return applyReferenceRope(getEncoding(), result, *args.ids[1], args.idsOmitted, args.seqLen,
                            operands, getAdjoint(), error);
}

} // namespace pejit::pe

// The standalone kernel rotates its input as Q (the prologue's Q tables).
bool RopeAttr::hasStandaloneKernel() const { return transformsQuery(); }
