// Runs a fused pejit kernel and the float64 reference on the same fresh
// random inputs and reports the error: max |out - ref| / max |ref|.
// The output is poisoned with NaN before every run, so an element the kernel
// fails to write shows up as an error, never as a stale value.
#ifndef PEJIT_TESTS_RUNTIME_FUSEDATTENTIONHARNESS_H
#define PEJIT_TESTS_RUNTIME_FUSEDATTENTIONHARNESS_H

#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/reference/Attention.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/runtime/Pejit.h"

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace pejit::testing {

struct Case {
  AttentionSpec spec;
  /// The call's shape (the inputs drawn).
  Shape shape;
  /// The kernel's shape class, with kDynamicDim for lengths the call gives;
  /// unset: `shape` itself (a static kernel).
  std::optional<Shape> shapeClass;
  X86TileConfig tiles;
  /// Explicit position ids ([s] or [b, s] per spec.positionsPerBatch); empty
  /// means the kernel's defaults.
  std::vector<int64_t> queryPositions, keyPositions;
  /// Q and K are drawn from [-inputScale, inputScale] (large scores).
  double inputScale = 1.0;
  /// Encoding operands (tables) are drawn from [-operandScale, operandScale].
  double operandScale = 1.0;
};

struct Outcome {
  std::string error; ///< non-empty if compiling or running failed
  double relativeError = std::numeric_limits<double>::infinity();
  uint32_t seed = 0;
};

inline std::mt19937 &rng(uint32_t *seedOut) {
  static uint32_t seed = std::random_device{}();
  static std::mt19937 engine(seed);
  if (seedOut)
    *seedOut = seed;
  return engine;
}

inline ref::Tensor randomTensor(std::vector<int64_t> shape, std::mt19937 &engine,
                                double range = 1.0) {
  ref::Tensor t(std::move(shape));
  std::uniform_real_distribution<float> dist(static_cast<float>(-range), static_cast<float>(range));
  for (double &x : t.data)
    x = dist(engine); // float values, so f32 inputs equal the reference's
  return t;
}

/// Batch row n of a [b, h, s, d] tensor, its first `count` rows of dim 2:
/// [1, h, count, d].
inline ref::Tensor rowPrefix(const ref::Tensor &t, int64_t n, int64_t count) {
  ref::Tensor part({1, t.dim(1), count, t.dim(3)});
  for (int64_t h = 0; h < t.dim(1); ++h)
    for (int64_t i = 0; i < count; ++i)
      for (int64_t c = 0; c < t.dim(3); ++c)
        part.at(0, h, i, c) = t.at(n, h, i, c);
  return part;
}

inline std::vector<float> toFloat(const ref::Tensor &t) {
  return std::vector<float>(t.data.begin(), t.data.end());
}

/// The shape of explicit position ids of `seq` entries: [s] or [b, s],
/// M-RoPE's and axial RoPE's with a leading axis per section.
inline std::vector<int64_t> positionShapeOf(const AttentionSpec &spec, const Shape &s,
                                            int64_t seq) {
  std::vector<int64_t> dims =
      spec.positionsPerBatch ? std::vector<int64_t>{s.batch, seq} : std::vector<int64_t>{seq};
  if (spec.rope && ref::ropePositionAxes(*spec.rope) > 0)
    dims.insert(dims.begin(), ref::ropePositionAxes(*spec.rope));
  return dims;
}

/// Whether an encoding measures distance by position: the kernel then
/// takes both position ids.
inline bool readsPositions(const AttentionSpec &spec) {
  for (const EncodingSpec &encoding : spec.encodings)
    if (encoding.readsPositions)
      return true;
  return false;
}

/// The float64 reference of case `c` (its spec at the static shape
/// c.shape) on the given inputs: rotate, bias, attend. Encodings with
/// operands go through the reference interpreter on the builder's source.
/// An error (from the interpreter) comes back in `error`.
inline ref::Tensor referenceOutput(const Case &c, const ref::Tensor &q, const ref::Tensor &k,
                                   const ref::Tensor &v, const std::vector<ref::Tensor> &operands,
                                   const std::vector<int64_t> &qp, const std::vector<int64_t> &kp,
                                   std::string &error) {
  const Shape &s = c.shape;
  auto positionShape = [&](int64_t seq) { return positionShapeOf(c.spec, s, seq); };
  bool ropeQ = c.spec.rope && c.spec.ropeOnQuery, ropeK = c.spec.rope && c.spec.ropeOnKey;
  bool byPosition = readsPositions(c.spec);
  bool passQ = (ropeQ || byPosition) && !qp.empty(), passK = (ropeK || byPosition) && !kp.empty();
  ref::Tensor qr = q, kr = k;
  if (c.spec.rope) {
    auto ids = [&](const std::vector<int64_t> &given, ref::PositionIds fallback, int64_t seq) {
      if (given.empty())
        return fallback;
      return ref::PositionIds(positionShape(seq), given);
    };
    ref::PositionIds qIds = ids(qp, ref::defaultQueryPositions(s.querySeq, s.keySeq), s.querySeq);
    ref::PositionIds kIds = ids(kp, ref::defaultKeyPositions(s.keySeq), s.keySeq);
    // Dynamic scalings: the length over the ids of the rotated sides.
    int64_t seqLen = ropeQ && ropeK ? ref::maxPositionPlusOne(qIds, kIds)
                     : ropeQ        ? ref::maxPositionPlusOne(qIds)
                                    : ref::maxPositionPlusOne(kIds);
    if (ropeQ)
      qr = ref::applyRope(*c.spec.rope, q, qIds, seqLen);
    if (ropeK)
      kr = ref::applyRope(*c.spec.rope, k, kIds, seqLen);
  }
  ref::Tensor bias;
  ref::AttentionOptions options;
  options.scale = c.spec.scale;
  options.causal = c.spec.causal;
  options.window = c.spec.window;
  options.windowRight = c.spec.windowRight;
  options.softcap = c.spec.softcap;
  if (c.spec.alibi) {
    bias =
        ref::alibiBias(c.spec.alibi->numHeads, c.spec.alibi->headOffset, s.queryHeads,
                       c.spec.alibi->symmetric ? ref::AlibiForm::Symmetric : ref::AlibiForm::Causal,
                       s.querySeq, s.keySeq);
    options.bias = &bias;
  }
  ref::Tensor expected;
  if (c.spec.encodings.empty()) {
    expected = ref::attention(qr, kr, v, options);
  } else {
    // Fused encodings bring their float64 semantics through their
    // interface: the reference interpreter on the builder's own source.
    std::vector<ReferenceArgument> arguments = {q, k, v};
    for (const ref::Tensor &operand : operands)
      arguments.push_back(operand);
    auto ids = [&](const std::vector<int64_t> &given, int64_t seq) {
      return ref::PositionIds(positionShape(seq), given);
    };
    if (passQ)
      arguments.push_back(ids(qp, s.querySeq));
    if (passK)
      arguments.push_back(ids(kp, s.keySeq));
    Expected<ref::Tensor> interpreted =
        interpretReference(Spec::fromBuilder(c.spec, s).source(), arguments);
    if (!interpreted) {
      error = "reference: " + interpreted.error();
      return {};
    }
    expected = *interpreted;
  }
  return expected;
}

inline Outcome runCase(Runtime &runtime, const Case &c) {
  Outcome outcome;
  std::mt19937 &engine = rng(&outcome.seed);
  const Shape &s = c.shape;
  ref::Tensor q =
      randomTensor({s.batch, s.queryHeads, s.querySeq, s.headDim}, engine, c.inputScale);
  ref::Tensor k = randomTensor({s.batch, s.kvHeads, s.keySeq, s.headDim}, engine, c.inputScale);
  ref::Tensor v = randomTensor({s.batch, s.kvHeads, s.keySeq, s.valueDim}, engine);
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  std::vector<float> out(s.batch * s.queryHeads * s.querySeq * s.valueDim,
                         std::numeric_limits<float>::quiet_NaN());

  Expected<X86Kernel> kernel =
      runtime.getX86(Spec::fromBuilder(c.spec, c.shapeClass.value_or(s)), c.tiles);
  if (!kernel) {
    outcome.error = kernel.error();
    return outcome;
  }
  std::vector<TensorView> inputs = {{qf.data(), DType::F32, q.shape, {}},
                                    {kf.data(), DType::F32, k.shape, {}},
                                    {vf.data(), DType::F32, v.shape, {}}};
  // The encodings' own tensors (a T5 table, ...): fresh random values too.
  std::vector<ref::Tensor> operands;
  for (const EncodingSpec &encoding : c.spec.encodings)
    for (const std::vector<int64_t> &dims : encoding.operandShapes)
      operands.push_back(randomTensor(dims, engine, c.operandScale));
  std::vector<std::vector<float>> operandFloats;
  for (const ref::Tensor &operand : operands)
    operandFloats.push_back(toFloat(operand));
  for (size_t n = 0; n < operands.size(); ++n)
    inputs.push_back({operandFloats[n].data(), DType::F32, operands[n].shape, {}});
  std::vector<int64_t> qp = c.queryPositions, kp = c.keyPositions;
  auto positionShape = [&](int64_t seq) { return positionShapeOf(c.spec, s, seq); };
  bool ropeQ = c.spec.rope && c.spec.ropeOnQuery, ropeK = c.spec.rope && c.spec.ropeOnKey;
  bool byPosition = readsPositions(c.spec);
  bool passQ = (ropeQ || byPosition) && !qp.empty(), passK = (ropeK || byPosition) && !kp.empty();
  if (passQ)
    inputs.push_back({qp.data(), DType::I64, positionShape(s.querySeq), {}});
  if (passK)
    inputs.push_back({kp.data(), DType::I64, positionShape(s.keySeq), {}});
  TensorView outView{out.data(), DType::F32, {s.batch, s.queryHeads, s.querySeq, s.valueDim}, {}};
  if (Status status = kernel->run(inputs, outView); !status) {
    outcome.error = status.message();
    return outcome;
  }

  std::string referenceError;
  ref::Tensor expected = referenceOutput(c, q, k, v, operands, qp, kp, referenceError);
  if (!referenceError.empty()) {
    outcome.error = referenceError;
    return outcome;
  }
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < expected.data.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    double err = std::fabs(static_cast<double>(out[i]) - expected.data[i]);
    if (std::isnan(out[i]))
      err = std::numeric_limits<double>::infinity();
    maxErr = std::max(maxErr, err);
  }
  outcome.relativeError = maxErr / std::max(maxRef, 1e-30);
  return outcome;
}

} // namespace pejit::testing

#endif // PEJIT_TESTS_RUNTIME_FUSEDATTENTIONHARNESS_H
