// The C++ builder for Python: AttentionSpec and the configs of its
// encodings, field for field, and the MLIR source it writes. pejit.attention
// fills these from its keyword arguments (python/pejit/_attention.py).
#include "Common.h"
#include "pejit/runtime/Encodings.h"
#include "pejit/runtime/Pejit.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;
using namespace nb::literals;

namespace pejit::python {

namespace {

DType floatDtype(const std::string &name) {
  std::optional<DType> dtype = floatDtypeNamed(name);
  if (!dtype)
    throw Error("dtype '" + name + "' is not float32, float16 or bfloat16");
  return *dtype;
}

/// [b, hq, hkv, sq, skv, d, dv]; None for a length each call gives.
Shape shapeOf(const std::vector<std::optional<int64_t>> &dims) {
  if (dims.size() != 7)
    throw Error("shape: expected 7 dims (b, hq, hkv, sq, skv, d, dv), got " +
                std::to_string(dims.size()));
  auto dim = [&](size_t i) { return dims[i].value_or(kDynamicDim); };
  return Shape{dim(0), dim(1), dim(2), dim(3), dim(4), dim(5), dim(6)};
}

} // namespace

void bindBuilder(nb::module_ &m) {
  using Kind = ref::RopeScaling::Kind;
  nb::enum_<Kind>(m, "RopeScalingKind")
      .value("none", Kind::None)
      .value("linear", Kind::Linear)
      .value("ntk", Kind::Ntk)
      .value("dynamic_ntk", Kind::DynamicNtk)
      .value("yarn", Kind::Yarn)
      .value("llama3", Kind::Llama3)
      .value("longrope", Kind::LongRope);
  nb::class_<ref::RopeScaling>(m, "RopeScaling")
      .def(nb::init<>())
      .def_rw("kind", &ref::RopeScaling::kind)
      .def_rw("factor", &ref::RopeScaling::factor)
      .def_rw("original_max_position", &ref::RopeScaling::originalMaxPosition)
      .def_rw("beta_fast", &ref::RopeScaling::betaFast)
      .def_rw("beta_slow", &ref::RopeScaling::betaSlow)
      .def_rw("mscale", &ref::RopeScaling::mscale)
      .def_rw("mscale_all_dim", &ref::RopeScaling::mscaleAllDim)
      .def_rw("attention_factor", &ref::RopeScaling::attentionFactor)
      .def_rw("truncate", &ref::RopeScaling::truncate)
      .def_rw("low_freq_factor", &ref::RopeScaling::lowFreqFactor)
      .def_rw("high_freq_factor", &ref::RopeScaling::highFreqFactor)
      .def_rw("short_factor", &ref::RopeScaling::shortFactor)
      .def_rw("long_factor", &ref::RopeScaling::longFactor);
  nb::class_<ref::RopeConfig>(m, "RopeConfig")
      .def(nb::init<>())
      .def_prop_rw(
          "interleaved",
          [](const ref::RopeConfig &c) { return c.layout == ref::RopeLayout::Interleaved; },
          [](ref::RopeConfig &c, bool on) {
            c.layout = on ? ref::RopeLayout::Interleaved : ref::RopeLayout::Half;
          })
      .def_rw("theta", &ref::RopeConfig::theta)
      .def_rw("rotary_dim", &ref::RopeConfig::rotaryDim)
      .def_rw("scaling", &ref::RopeConfig::scaling)
      .def_rw("sections", &ref::RopeConfig::sections)
      .def_rw("interleaved_sections", &ref::RopeConfig::interleavedSections)
      .def_rw("axial", &ref::RopeConfig::axial);
  m.def("rope_position_axes", &ref::ropePositionAxes);
  // pejit's exact (float64) frequencies for a call whose longest position
  // is seqLen - 1: (inv_freq, attention_factor). For `pejit diagnose`.
  m.def(
      "rope_frequencies",
      [](const ref::RopeConfig &rope, int64_t headDim, int64_t seqLen) {
        if (headDim <= 0 || seqLen <= 0)
          throw Error("rope_frequencies: head_dim and seq_len must be positive");
        int64_t rotary = rope.rotaryDim ? rope.rotaryDim : headDim;
        if (rotary % 2 != 0 || rotary > headDim)
          throw Error("rope: rotary_dim " + std::to_string(rotary) +
                      " must be even and at most the head dim " + std::to_string(headDim));
        const ref::RopeScaling &s = rope.scaling;
        if (s.kind == ref::RopeScaling::Kind::LongRope &&
            (int64_t(s.shortFactor.size()) != rotary / 2 ||
             int64_t(s.longFactor.size()) != rotary / 2))
          throw Error("rope: longrope's short_factor and long_factor need rotary_dim / 2 = " +
                      std::to_string(rotary / 2) + " entries each");
        ref::RopeFrequencies f = ref::computeRopeFrequencies(rope, headDim, seqLen);
        return std::make_pair(f.invFreq, f.attentionFactor);
      },
      "rope"_a, "head_dim"_a, "seq_len"_a);

  nb::class_<EncodingSpec>(m, "EncodingSpec")
      .def_ro("attribute", &EncodingSpec::attribute)
      .def_ro("operand_shapes", &EncodingSpec::operandShapes);
  m.def("t5_encoding", [](int64_t buckets, int64_t maxDistance, bool bidirectional, int64_t heads,
                          const std::string &dtype) {
    return encodings::t5Bias(buckets, maxDistance, bidirectional, heads, floatDtype(dtype));
  });
  m.def("alibi_learned_encoding",
        [](int64_t numHeads, int64_t headOffset, bool symmetric, int64_t heads) {
          return encodings::alibiLearnedSlopes(numHeads, headOffset, symmetric, heads);
        });
  m.def("shaw_key_encoding", [](int64_t clip, int64_t d, const std::string &dtype, int64_t heads) {
    return encodings::shawKey(clip, d, floatDtype(dtype), heads);
  });
  m.def("shaw_value_encoding",
        [](int64_t clip, int64_t dv, const std::string &dtype, int64_t heads) {
          return encodings::shawValue(clip, dv, floatDtype(dtype), heads);
        });
  m.def("bias_encoding", [](std::vector<int64_t> shape, const std::string &dtype) {
    return encodings::biasTensor(std::move(shape), floatDtype(dtype));
  });
  m.def("by_position", &encodings::relativeToPosition);

  nb::class_<AttentionSpec>(m, "AttentionSpec")
      .def(nb::init<>())
      .def_rw("encodings", &AttentionSpec::encodings)
      .def_rw("rope", &AttentionSpec::rope)
      .def_rw("rope_on_query", &AttentionSpec::ropeOnQuery)
      .def_rw("rope_position_scale", &AttentionSpec::ropePositionScale)
      .def_rw("rope_learned_inv_freq", &AttentionSpec::ropeLearnedInvFreq)
      .def_rw("rope_on_key", &AttentionSpec::ropeOnKey)
      .def(
          "set_alibi",
          [](AttentionSpec &s, int64_t heads, int64_t offset, bool symmetric) {
            s.alibi = AlibiSpec{heads, offset, symmetric};
          },
          "num_heads"_a, "head_offset"_a = 0, "symmetric"_a = false)
      .def_rw("causal", &AttentionSpec::causal)
      .def_rw("window", &AttentionSpec::window)
      .def_rw("window_right", &AttentionSpec::windowRight)
      .def_rw("softcap", &AttentionSpec::softcap)
      .def_rw("scale", &AttentionSpec::scale)
      .def_rw("positions_per_batch", &AttentionSpec::positionsPerBatch)
      .def_rw("packed", &AttentionSpec::packed)
      .def_rw("key_lengths", &AttentionSpec::keyLengths)
      .def_rw("page_size", &AttentionSpec::pageSize)
      .def_rw("training", &AttentionSpec::training)
      .def_prop_rw(
          "dtype", [](const AttentionSpec &s) { return std::string(dtypeName(s.dtype)); },
          [](AttentionSpec &s, const std::string &name) { s.dtype = floatDtype(name); });

  m.def(
      "attention_source",
      [](const AttentionSpec &spec, const std::vector<std::optional<int64_t>> &dims) {
        return Spec::fromBuilder(spec, shapeOf(dims)).source();
      },
      "spec"_a, "shape"_a);
  m.def(
      "linear_attention_source",
      [](const std::string &featureMap, bool causal, std::optional<ref::RopeConfig> rope,
         const std::string &placement, const std::vector<std::optional<int64_t>> &dims,
         const std::string &dtype, bool positionsPerBatch) {
        return Spec::linearAttention(featureMap, causal, rope, placement, shapeOf(dims),
                                     floatDtype(dtype), positionsPerBatch)
            .source();
      },
      "feature_map"_a, "causal"_a, "rope"_a.none(), "placement"_a, "shape"_a, "dtype"_a,
      "positions_per_batch"_a = false);
  m.def(
      "rope_source",
      [](const ref::RopeConfig &rope, std::optional<int64_t> batch, int64_t heads,
         std::optional<int64_t> seq, int64_t headDim, const std::string &dtype,
         bool positionsPerBatch, int64_t scaleRows) {
        return Spec::standaloneRope(rope, batch.value_or(kDynamicDim), heads,
                                    seq.value_or(kDynamicDim), headDim, floatDtype(dtype),
                                    positionsPerBatch, scaleRows)
            .source();
      },
      "rope"_a, "batch"_a, "heads"_a, "seq"_a, "head_dim"_a, "dtype"_a,
      "positions_per_batch"_a = false, "scale_rows"_a = 0);
  m.def(
      "rope_scale_grad_source",
      [](const ref::RopeConfig &rope, std::optional<int64_t> batch, int64_t heads,
         std::optional<int64_t> seq, int64_t headDim, const std::string &dtype,
         bool positionsPerBatch, int64_t scaleRows) {
        return Spec::standaloneRopeScaleGradient(rope, batch.value_or(kDynamicDim), heads,
                                                 seq.value_or(kDynamicDim), headDim,
                                                 floatDtype(dtype), positionsPerBatch, scaleRows)
            .source();
      },
      "rope"_a, "batch"_a, "heads"_a, "seq"_a, "head_dim"_a, "dtype"_a, "positions_per_batch"_a,
      "scale_rows"_a);
}

} // namespace pejit::python
