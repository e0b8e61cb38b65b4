#include "dialects/pe/RopeConfig.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace pejit;
using namespace pejit::pe;

ref::RopeConfig pejit::pe::toReferenceConfig(RopeAttr rope) {
  ref::RopeConfig config;
  config.layout = rope.getLayout() == RopeLayout::Half ? ref::RopeLayout::Half
                                                       : ref::RopeLayout::Interleaved;
  config.theta = rope.getTheta();
  config.rotaryDim = rope.getRotaryDim().value_or(0);
  config.sections.assign(rope.getSections().begin(), rope.getSections().end());
  ref::RopeScaling &s = config.scaling;
  using Kind = ref::RopeScaling::Kind;
  auto optional = [](std::optional<F64> v) -> std::optional<double> {
    return v ? std::optional<double>(v->value) : std::nullopt;
  };
  if (!rope.getScaling())
    return config;
  llvm::TypeSwitch<mlir::Attribute>(rope.getScaling())
      .Case([&](LinearScalingAttr a) { s.kind = Kind::Linear; s.factor = a.getFactor(); })
      .Case([&](NtkScalingAttr a) { s.kind = Kind::Ntk; s.factor = a.getFactor(); })
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
