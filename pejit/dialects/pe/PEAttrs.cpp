// Parsing, printing and verification of pe attributes. The rules checked here
// depend only on an attribute's own parameters; rules that need operand
// shapes (e.g. rotary_dim <= head_dim) live in the op verifiers.
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/Limits.h"
#include "pejit/dialects/pe/PEDialect.h"
#include "pejit/dialects/pe/RopeConfig.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mlir;
using namespace pejit;
using namespace pejit::pe;

#include "pejit/dialects/pe/PEEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// Parameter parsing and printing
//===----------------------------------------------------------------------===//

FailureOr<F64> pejit::pe::parseF64(AsmParser &parser) {
  double value = 0;
  if (parser.parseFloat(value))
    return failure();
  return F64(value);
}

FailureOr<std::optional<F64>> pejit::pe::parseOptionalF64(AsmParser &parser) {
  FailureOr<F64> value = parseF64(parser);
  if (failed(value))
    return failure();
  return std::optional<F64>(*value);
}

FailureOr<llvm::SmallVector<F64>> pejit::pe::parseF64Array(AsmParser &parser) {
  llvm::SmallVector<F64> values;
  auto parseOne = [&]() -> ParseResult {
    FailureOr<F64> value = parseF64(parser);
    if (failed(value))
      return failure();
    values.push_back(*value);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne))
    return failure();
  return values;
}

FailureOr<llvm::SmallVector<int64_t>> pejit::pe::parseI64Array(AsmParser &parser) {
  llvm::SmallVector<int64_t> values;
  auto parseOne = [&]() -> ParseResult { return parser.parseInteger(values.emplace_back()); };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne))
    return failure();
  return values;
}

FailureOr<bool> pejit::pe::parseBool(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(), "expected true or false");
}

// Shortest "%.Ng" that reads back as the same double, always with a '.' so
// the MLIR lexer sees a float literal (10000 -> 10000.0, 1e-06 -> 1.0e-06).
std::string pejit::pe::formatF64(double value) {
  char buffer[40];
  // inf and NaN as their bits, the form MLIR's float literals read back
  // (0x7FF0000000000000 is +inf); verifiers reject them where they matter,
  // but the printed IR must still parse, e.g. in an error message.
  if (!std::isfinite(value)) {
    std::snprintf(buffer, sizeof(buffer), "0x%016llX",
                  static_cast<unsigned long long>(llvm::bit_cast<uint64_t>(value)));
    return buffer;
  }
  // Whole numbers print in full (theta = 500000.0, not 5.0e+05).
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buffer, sizeof(buffer), "%.1f", value);
    return buffer;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text(buffer);
  if (std::isfinite(value) && text.find('.') == std::string::npos) {
    size_t exponent = text.find('e');
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  return text;
}

void pejit::pe::printF64(AsmPrinter &printer, double value) { printer << formatF64(value); }

void pejit::pe::printF64Array(AsmPrinter &printer, llvm::ArrayRef<F64> values) {
  printer << '[';
  llvm::interleaveComma(values, printer, [&](double v) { printF64(printer, v); });
  printer << ']';
}

//===----------------------------------------------------------------------===//
// RoPE scalings
//===----------------------------------------------------------------------===//

namespace {
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

LogicalResult requireFinite(EmitErrorFn emitError, llvm::StringRef name, double value) {
  if (!std::isfinite(value))
    return emitError() << name << " must be finite, got " << formatF64(value);
  return success();
}

LogicalResult requirePositive(EmitErrorFn emitError, llvm::StringRef name, double value) {
  if (!(value > 0.0) || !std::isfinite(value))
    return emitError() << name << " must be positive and finite, got " << formatF64(value);
  return success();
}

/// A value the kernels hold as an f32 constant (ALiBi slopes).
LogicalResult requireF32(EmitErrorFn emitError, llvm::StringRef name, double value) {
  llvm::StringRef problem = limits::f32RangeProblem(value);
  if (!problem.empty())
    return emitError() << name << " (" << formatF64(value) << ") is " << problem
                       << ": the kernels use it as an f32";
  return success();
}

/// An integer parameter in [1, max]; `why` says what the bound protects.
LogicalResult requireInRange(EmitErrorFn emitError, llvm::StringRef name, int64_t value,
                             int64_t max, llvm::StringRef why) {
  if (value <= 0)
    return emitError() << name << " must be positive, got " << value;
  if (value > max)
    return emitError() << name << " (" << value << ") exceeds pejit's limit of " << max << " ("
                       << why << ")";
  return success();
}

LogicalResult requirePositive(EmitErrorFn emitError, llvm::StringRef name, int64_t value) {
  if (value <= 0)
    return emitError() << name << " must be positive, got " << value;
  return success();
}
} // namespace

LogicalResult LinearScalingAttr::verify(EmitErrorFn emitError, F64 factor) {
  return requirePositive(emitError, "linear scaling factor", factor);
}

LogicalResult NtkScalingAttr::verify(EmitErrorFn emitError, F64 factor) {
  return requirePositive(emitError, "ntk scaling factor", factor);
}

// The NTK base exponent rd / (rd - 2) needs rd > 2.
static LogicalResult verifyNtkRotaryDim(llvm::StringRef name, int64_t rotaryDim,
                                        EmitErrorFn emitError) {
  if (rotaryDim <= 2)
    return emitError() << name << " needs rotary_dim > 2 (base exponent rd/(rd-2)), got "
                       << rotaryDim;
  return success();
}

LogicalResult NtkScalingAttr::verifyRotaryDim(int64_t rotaryDim, EmitErrorFn emitError) const {
  return verifyNtkRotaryDim("ntk scaling", rotaryDim, emitError);
}

LogicalResult DynamicNtkScalingAttr::verifyRotaryDim(int64_t rotaryDim,
                                                     EmitErrorFn emitError) const {
  return verifyNtkRotaryDim("dynamic_ntk scaling", rotaryDim, emitError);
}

LogicalResult DynamicNtkScalingAttr::verify(EmitErrorFn emitError, F64 factor,
                                            int64_t originalMaxPosition) {
  if (failed(requirePositive(emitError, "dynamic_ntk factor", factor)))
    return failure();
  return requirePositive(emitError, "dynamic_ntk original_max_position", originalMaxPosition);
}

LogicalResult YarnScalingAttr::verify(EmitErrorFn emitError, F64 factor,
                                      int64_t originalMaxPosition, F64 betaFast, F64 betaSlow,
                                      std::optional<F64> mscale, std::optional<F64> mscaleAllDim,
                                      std::optional<F64> attentionFactor, bool truncate) {
  if (failed(requirePositive(emitError, "yarn factor", factor)) ||
      failed(requirePositive(emitError, "yarn original_max_position", originalMaxPosition)) ||
      failed(requirePositive(emitError, "yarn beta_slow", betaSlow)) ||
      failed(requireFinite(emitError, "yarn beta_fast", betaFast)) ||
      (mscale && failed(requireFinite(emitError, "yarn mscale", *mscale))) ||
      (mscaleAllDim && failed(requireFinite(emitError, "yarn mscale_all_dim", *mscaleAllDim))))
    return failure();
  if (!(betaFast > betaSlow))
    return emitError() << "yarn beta_fast (" << formatF64(betaFast)
                       << ") must be greater than beta_slow (" << formatF64(betaSlow) << ")";
  if (attentionFactor &&
      failed(requirePositive(emitError, "yarn attention_factor", *attentionFactor)))
    return failure();
  return success();
}

LogicalResult Llama3ScalingAttr::verify(EmitErrorFn emitError, F64 factor, F64 lowFreqFactor,
                                        F64 highFreqFactor, int64_t originalMaxPosition) {
  if (failed(requirePositive(emitError, "llama3 factor", factor)) ||
      failed(requirePositive(emitError, "llama3 low_freq_factor", lowFreqFactor)) ||
      failed(requirePositive(emitError, "llama3 high_freq_factor", highFreqFactor)) ||
      failed(requirePositive(emitError, "llama3 original_max_position", originalMaxPosition)))
    return failure();
  if (!(highFreqFactor > lowFreqFactor))
    return emitError() << "llama3 high_freq_factor (" << formatF64(highFreqFactor)
                       << ") must be greater than low_freq_factor (" << formatF64(lowFreqFactor)
                       << ")";
  return success();
}

LogicalResult LongRopeScalingAttr::verify(EmitErrorFn emitError, llvm::ArrayRef<F64> shortFactor,
                                          llvm::ArrayRef<F64> longFactor,
                                          int64_t originalMaxPosition, F64 factor,
                                          std::optional<F64> attentionFactor) {
  if (shortFactor.size() != longFactor.size())
    return emitError() << "longrope short_factor has " << shortFactor.size()
                       << " entries but long_factor has " << longFactor.size();
  for (F64 f : shortFactor)
    if (failed(requirePositive(emitError, "longrope short_factor entry", f)))
      return failure();
  for (F64 f : longFactor)
    if (failed(requirePositive(emitError, "longrope long_factor entry", f)))
      return failure();
  if (failed(requirePositive(emitError, "longrope original_max_position", originalMaxPosition)) ||
      failed(requirePositive(emitError, "longrope factor", factor)))
    return failure();
  if (attentionFactor &&
      failed(requirePositive(emitError, "longrope attention_factor", *attentionFactor)))
    return failure();
  return success();
}

LogicalResult LongRopeScalingAttr::verifyRotaryDim(int64_t rotaryDim, EmitErrorFn emitError) const {
  if (static_cast<int64_t>(getShortFactor().size()) != rotaryDim / 2)
    return emitError() << "longrope factor lists have " << getShortFactor().size()
                       << " entries but rotary_dim/2 is " << rotaryDim / 2;
  return success();
}

//===----------------------------------------------------------------------===//
// Positional encodings
//===----------------------------------------------------------------------===//

LogicalResult RopeAttr::verify(EmitErrorFn emitError, RopeLayout layout, F64 theta,
                               std::optional<int64_t> rotaryDim, RopeScalingAttrInterface scaling,
                               llvm::ArrayRef<int64_t> sections, bool interleavedSections,
                               bool axial, RopeSides applyTo, bool runtimeScale,
                               bool learnedInvFreq) {
  if (failed(requirePositive(emitError, "rope theta", theta)))
    return failure();
  if (rotaryDim) {
    if (failed(requireInRange(emitError, "rope rotary_dim", *rotaryDim, limits::kMaxHeadDim,
                              "the largest head dim")))
      return failure();
    if (*rotaryDim % 2 != 0)
      return emitError() << "rope rotary_dim must be even, got " << *rotaryDim;
    if (scaling && failed(scaling.verifyRotaryDim(*rotaryDim, emitError)))
      return failure();
  }
  int64_t sectionSum = 0;
  for (int64_t section : sections) {
    if (failed(requireInRange(emitError, "rope section", section, limits::kMaxHeadDim / 2,
                              "half the largest head dim")))
      return failure();
    sectionSum += section;
  }
  if (rotaryDim && !sections.empty() && sectionSum != *rotaryDim / 2)
    return emitError() << "rope sections sum to " << sectionSum << " but rotary_dim/2 is "
                       << *rotaryDim / 2;
  if (interleavedSections && sections.size() != 3)
    return emitError() << "rope interleaved_sections needs three sections (t, h, w), got "
                       << sections.size();
  if (axial && (!sections.empty() || scaling))
    return emitError() << "rope axial (2-D, [2, s] positions) takes no sections and no scaling";
  if (axial && rotaryDim && *rotaryDim % 4 != 0)
    return emitError() << "rope axial needs rotary_dim % 4 == 0 (rotary_dim/4 frequencies per "
                          "axis), got "
                       << *rotaryDim;
  if (failed(verifyOneSidedScaling(applyTo, scaling, emitError)))
    return failure();
  if (learnedInvFreq && scaling && scaling.followsCallLength())
    return emitError() << "rope learned_inv_freq with " << scaling
                       << ": its frequencies follow the call's length; learned frequencies are "
                          "one set (use no scaling, or linear, ntk, yarn, llama3 for the "
                          "attention factor)";
  if (runtimeScale && scaling && scaling.followsCallLength())
    return emitError() << "rope runtime_scale with " << scaling
                       << ": its frequencies follow the call's length, so a scaled position "
                          "has no one frequency; use a scaling that does not (linear, ntk, "
                          "yarn, llama3) or none";
  return success();
}

// A pre-rotated side was rotated at its call's length (vLLM#5093: the
// static "dynamic" NTK cache).
LogicalResult pejit::pe::verifyOneSidedScaling(RopeSides applyTo, RopeScalingAttrInterface scaling,
                                               EmitErrorFn emitError) {
  if (applyTo == RopeSides::Both || !scaling || !scaling.followsCallLength())
    return success();
  return emitError() << "rope apply_to = " << stringifyRopeSides(applyTo) << " with " << scaling
                     << ": its frequencies follow each call's length (max(position) + 1), so a "
                        "side rotated in an earlier call (a pre-rotated K cache) was rotated "
                        "with other frequencies once the length passes original_max_position; "
                        "keep that side unrotated and rotate both at read time (apply_to = both)";
}

bool DynamicNtkScalingAttr::followsCallLength() const { return true; }
bool LongRopeScalingAttr::followsCallLength() const { return true; }

LogicalResult AlibiAttr::verify(EmitErrorFn emitError, int64_t numHeads, int64_t headOffset,
                                AlibiForm form, llvm::ArrayRef<F64> slopes, RelativeTo,
                                bool learnedSlopes) {
  if (learnedSlopes && !slopes.empty())
    return emitError() << "alibi learned_slopes reads the slopes from its operand alibi_slopes: "
                          "leave `slopes` out";
  if (failed(requireInRange(emitError, "alibi num_heads", numHeads, limits::kMaxHeads,
                            "the most heads an attention has")))
    return failure();
  if (headOffset < 0 || headOffset >= numHeads)
    return emitError() << "alibi head_offset (" << headOffset
                       << ") must be in [0, num_heads = " << numHeads << ")";
  if (!slopes.empty() && static_cast<int64_t>(slopes.size()) != numHeads)
    return emitError() << "alibi slopes has " << slopes.size() << " entries but num_heads is "
                       << numHeads;
  for (auto [index, slope] : llvm::enumerate(slopes))
    if (failed(requireF32(emitError, "alibi slopes[" + std::to_string(index) + "]", slope)))
      return failure();
  return success();
}

LogicalResult T5BiasAttr::verify(EmitErrorFn emitError, int64_t numBuckets, int64_t maxDistance,
                                 bool bidirectional, RelativeTo) {
  // T5's _relative_position_bucket: buckets per sign (halved when
  // bidirectional), half of those exact, the rest logarithmic up to
  // max_distance; the log needs max_distance > max_exact >= 1.
  int64_t perSign = bidirectional ? numBuckets / 2 : numBuckets;
  int64_t maxExact = perSign / 2;
  if (numBuckets < (bidirectional ? 4 : 2) || (bidirectional && numBuckets % 2))
    return emitError() << "t5_bias num_buckets (" << numBuckets << ") must be "
                       << (bidirectional ? "even and >= 4 when bidirectional" : ">= 2");
  if (numBuckets > limits::kMaxTableRows)
    return emitError() << "t5_bias num_buckets (" << numBuckets << ") exceeds pejit's limit of "
                       << limits::kMaxTableRows << " (rows of the bias table)";
  if (maxDistance > limits::kMaxLength)
    return emitError() << "t5_bias max_distance (" << maxDistance << ") exceeds pejit's limit of "
                       << limits::kMaxLength << " (the longest sequence)";
  if (maxDistance <= maxExact)
    return emitError() << "t5_bias max_distance (" << maxDistance
                       << ") must exceed the exact bucket range (" << maxExact << ")";
  return success();
}

LogicalResult RelativeKeyAttr::verify(EmitErrorFn emitError, int64_t clip, RelativeTo) {
  if (clip < 0)
    return emitError() << "relative_key clip must be non-negative, got " << clip;
  if (clip > (limits::kMaxTableRows - 1) / 2)
    return emitError() << "relative_key clip (" << clip << ") exceeds pejit's limit of "
                       << (limits::kMaxTableRows - 1) / 2 << " (the table has 2 clip + 1 rows)";
  return success();
}

LogicalResult RelativeValueAttr::verify(EmitErrorFn emitError, int64_t clip, RelativeTo) {
  if (clip < 0)
    return emitError() << "relative_value clip must be non-negative, got " << clip;
  if (clip > (limits::kMaxTableRows - 1) / 2)
    return emitError() << "relative_value clip (" << clip << ") exceeds pejit's limit of "
                       << (limits::kMaxTableRows - 1) / 2 << " (the table has 2 clip + 1 rows)";
  return success();
}

LogicalResult SinusoidalAttr::verify(EmitErrorFn emitError, F64 base) {
  return requirePositive(emitError, "sinusoidal base", base);
}

LogicalResult LearnedAttr::verify(EmitErrorFn emitError, int64_t maxPositions) {
  return requireInRange(emitError, "learned max_positions", maxPositions, limits::kMaxTableRows,
                        "rows of the embedding table");
}

LogicalResult RopeAttr::verifyForAttention(int64_t queryHeads, int64_t headDim,
                                           EmitErrorFn emitError) const {
  // Fusion builds one-sided RoPEs with get(), which does not verify.
  if (failed(verifyOneSidedScaling(getApplyTo(), getScaling(), emitError)))
    return failure();
  if (ShapedType::isDynamic(headDim))
    return success();
  std::optional<int64_t> explicitRotaryDim = getRotaryDim();
  if (explicitRotaryDim && *explicitRotaryDim > headDim)
    return emitError() << "rotary_dim (" << *explicitRotaryDim << ") exceeds head_dim (" << headDim
                       << ") of input";
  if (!explicitRotaryDim && headDim % 2 != 0)
    return emitError() << "head_dim (" << headDim << ") must be even when rotary_dim is absent";
  int64_t rotaryDim = explicitRotaryDim.value_or(headDim);
  if (getAxial() && rotaryDim % 4 != 0)
    return emitError() << "rope axial needs rotary_dim % 4 == 0 (rotary_dim/4 frequencies per "
                          "axis), got "
                       << rotaryDim;
  if (getScaling() && failed(getScaling().verifyRotaryDim(rotaryDim, emitError)))
    return failure();
  if (!getSections().empty()) {
    int64_t sum = 0;
    for (int64_t section : getSections())
      sum += section;
    if (sum != rotaryDim / 2)
      return emitError() << "sections sum to " << sum << " but rotary_dim/2 is " << rotaryDim / 2;
  }
  return verifyRopeFrequencies(*this, headDim, emitError);
}

LogicalResult AlibiAttr::verifyForAttention(int64_t queryHeads, int64_t headDim,
                                            EmitErrorFn emitError) const {
  if (!ShapedType::isDynamic(queryHeads) && getHeadOffset() + queryHeads > getNumHeads())
    return emitError() << "head_offset (" << getHeadOffset() << ") + heads (" << queryHeads
                       << ") exceeds num_heads (" << getNumHeads() << ")";
  return success();
}

// Fused RoPE reads [s] or [b, s] positions, or [A, s] / [A, b, s] with
// axes (M-RoPE sections, 2-D axial).
bool RopeAttr::isFusable() const { return true; }
int64_t RopeAttr::getPositionAxes() const {
  return getAxial() ? 2 : static_cast<int64_t>(getSections().size());
}
bool AlibiAttr::isFusable() const { return true; }

EncodingKind RopeAttr::getEncodingKind() const { return EncodingKind::QKTransform; }
bool RopeAttr::hasQKTransformAdjoint() const { return true; }
EncodingKind AlibiAttr::getEncodingKind() const { return EncodingKind::ScoreBias; }
EncodingKind T5BiasAttr::getEncodingKind() const { return EncodingKind::ScoreBias; }
EncodingKind RelativeKeyAttr::getEncodingKind() const { return EncodingKind::ScoreBias; }
EncodingKind RelativeValueAttr::getEncodingKind() const { return EncodingKind::ValueTerm; }
EncodingKind SinusoidalAttr::getEncodingKind() const { return EncodingKind::Additive; }
EncodingKind LearnedAttr::getEncodingKind() const { return EncodingKind::Additive; }

#define GET_ATTRDEF_CLASSES
#include "pejit/dialects/pe/PEAttrs.cpp.inc"

void PEDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pejit/dialects/pe/PEAttrs.cpp.inc"
      >();
}
