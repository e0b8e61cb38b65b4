// Spec: the MLIR source of one attention, from the C++ builder (generated
// text in the pe + attn dialects, unfused, as a user would write it) or from
// a file.
#include "pejit/compiler/Backward.h"
#include "pejit/compiler/SourceNesting.h"
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/runtime/Pejit.h"

#include <fstream>
#include <sstream>

namespace pejit {

namespace {

// A float literal MLIR reads back exactly ("10000.0", "1.0e-06"): the same
// printer the pe dialect uses for its own float parameters.
std::string literal(double value) { return pe::formatF64(value); }

std::string list(const std::vector<double> &values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + literal(values[i]);
  return out + "]";
}

std::string scalingText(const ref::RopeScaling &s) {
  using Kind = ref::RopeScaling::Kind;
  std::string orig = "original_max_position = " + std::to_string(s.originalMaxPosition);
  switch (s.kind) {
  case Kind::None:
    return "";
  case Kind::Linear:
    return "#pe.linear<factor = " + literal(s.factor) + ">";
  case Kind::Ntk:
    return "#pe.ntk<factor = " + literal(s.factor) + ">";
  case Kind::DynamicNtk:
    return "#pe.dynamic_ntk<factor = " + literal(s.factor) + ", " + orig + ">";
  case Kind::Yarn: {
    std::string text = "#pe.yarn<factor = " + literal(s.factor) + ", " + orig +
                       ", beta_fast = " + literal(s.betaFast) +
                       ", beta_slow = " + literal(s.betaSlow);
    if (s.mscale)
      text += ", mscale = " + literal(*s.mscale);
    if (s.mscaleAllDim)
      text += ", mscale_all_dim = " + literal(*s.mscaleAllDim);
    if (s.attentionFactor)
      text += ", attention_factor = " + literal(*s.attentionFactor);
    return text + ", truncate = " + (s.truncate ? "true" : "false") + ">";
  }
  case Kind::Llama3:
    return "#pe.llama3<factor = " + literal(s.factor) +
           ", low_freq_factor = " + literal(s.lowFreqFactor) +
           ", high_freq_factor = " + literal(s.highFreqFactor) + ", " + orig + ">";
  case Kind::LongRope: {
    std::string text = "#pe.longrope<short_factor = " + list(s.shortFactor) +
                       ", long_factor = " + list(s.longFactor) + ", " + orig +
                       ", factor = " + literal(s.factor);
    if (s.attentionFactor)
      text += ", attention_factor = " + literal(*s.attentionFactor);
    return text + ">";
  }
  }
  return "";
}

std::string ropeText(const ref::RopeConfig &rope, bool runtimeScale = false,
                     bool learnedInvFreq = false) {
  std::string text = std::string("<layout = ") +
                     (rope.layout == ref::RopeLayout::Half ? "half" : "interleaved") +
                     ", theta = " + literal(rope.theta);
  if (rope.rotaryDim)
    text += ", rotary_dim = " + std::to_string(rope.rotaryDim);
  std::string scaling = scalingText(rope.scaling);
  if (!scaling.empty())
    text += ", scaling = " + scaling;
  if (!rope.sections.empty()) {
    text += ", sections = [";
    for (size_t i = 0; i < rope.sections.size(); ++i)
      text += (i ? ", " : "") + std::to_string(rope.sections[i]);
    text += "]";
  }
  if (rope.interleavedSections)
    text += ", interleaved_sections = true";
  if (rope.axial)
    text += ", axial = true";
  if (runtimeScale)
    text += ", runtime_scale = true";
  if (learnedInvFreq)
    text += ", learned_inv_freq = true";
  return text + ">";
}

// The MLIR element type of a float DType.
const char *elementText(DType dtype) {
  return dtype == DType::F16 ? "f16" : dtype == DType::BF16 ? "bf16" : "f32";
}

std::string tensor(const std::vector<int64_t> &dims, const char *element) {
  std::string text = "tensor<";
  for (int64_t d : dims)
    text += dimText(d) + "x";
  return text + element + ">";
}

} // namespace

Spec Spec::fromBuilder(const AttentionSpec &spec, const Shape &s) {
  const char *element = elementText(spec.dtype);
  std::string q = tensor({s.batch, s.queryHeads, s.querySeq, s.headDim}, element);
  std::string k = tensor({s.batch, s.kvHeads, s.keySeq, s.headDim}, element);
  std::string v = tensor({s.batch, s.kvHeads, s.keySeq, s.valueDim}, element);
  std::string o = tensor({s.batch, s.queryHeads, s.querySeq, s.valueDim}, element);
  // Position ids: [s] or [b, s]; M-RoPE's have a leading axis per section.
  int64_t axes = spec.rope ? ref::ropePositionAxes(*spec.rope) : 0;
  auto positionType = [&](int64_t seq) {
    std::string text = "tensor<";
    if (axes > 0)
      text += std::to_string(axes) + "x";
    if (spec.positionsPerBatch)
      text += dimText(s.batch) + "x";
    return text + dimText(seq) + "xi64>";
  };
  std::string qp = positionType(s.querySeq), kp = positionType(s.keySeq);
  std::ostringstream out;
  // A paged cache: the function takes the page pools and the block table,
  // and attn.paged_kv makes the logical K and V of them.
  std::string kPages, vPages, table = "tensor<" + dimText(s.batch) + "x?xi32>";
  if (spec.pageSize) {
    kPages = "tensor<?x" + std::to_string(*spec.pageSize) + "x" + std::to_string(s.kvHeads) + "x" +
             std::to_string(s.headDim) + "x" + element + ">";
    vPages = "tensor<?x" + std::to_string(*spec.pageSize) + "x" + std::to_string(s.kvHeads) + "x" +
             std::to_string(s.valueDim) + "x" + element + ">";
    out << "func.func @attention(%q: " << q << ", %k_pages: " << kPages << ", %v_pages: " << vPages
        << ", %block_table: " << table;
  } else {
    out << "func.func @attention(%q: " << q << ", %k: " << k << ", %v: " << v;
  }
  // The encodings' operands: %e0, %e1, ... in order, then the positions.
  std::string encodingAttrs, operandNames, operandTypes;
  int operandCount = 0;
  for (const EncodingSpec &encoding : spec.encodings) {
    encodingAttrs += (encodingAttrs.empty() ? "" : ", ") + encoding.attribute;
    for (const std::vector<int64_t> &dims : encoding.operandShapes) {
      std::string type = "tensor<";
      for (int64_t d : dims)
        type += std::to_string(d) + "x";
      type += std::string(elementText(encoding.operandDtype)) + ">";
      std::string name = "%e" + std::to_string(operandCount++);
      out << ", " << name << ": " << type;
      operandNames += (operandNames.empty() ? "" : ", ") + name;
      operandTypes += (operandTypes.empty() ? "" : ", ") + type;
    }
  }
  bool ropeQ = spec.rope && spec.ropeOnQuery, ropeK = spec.rope && spec.ropeOnKey;
  // RoPE's runtime position scale: an argument after the encodings' operands.
  std::string scaleType, ropeScale;
  if (spec.rope && spec.ropePositionScale) {
    scaleType = "tensor<" + std::to_string(*spec.ropePositionScale) + "xf32>";
    out << ", %rope_scale: " << scaleType;
    ropeScale = "scale(%rope_scale : " + scaleType + ") ";
  }
  bool runtimeScale = !ropeScale.empty();
  // Learned inverse frequencies: the RoPE is fused in the attention's
  // encodings (first, its operands first), reading the ids as operands.
  const bool fusedRope = spec.rope && spec.ropeLearnedInvFreq;
  std::string freqType;
  if (fusedRope) {
    int64_t rotary = spec.rope->rotaryDim ? spec.rope->rotaryDim : s.headDim;
    freqType = "tensor<" + std::to_string(rotary / 2) + "xf32>";
    out << ", %rope_inv_freq: " << freqType;
    std::string attr = "#pe.rope" + ropeText(*spec.rope, runtimeScale, true);
    encodingAttrs = attr + (encodingAttrs.empty() ? "" : ", " + encodingAttrs);
    std::string names = runtimeScale ? "%rope_scale, %rope_inv_freq" : "%rope_inv_freq";
    std::string types = runtimeScale ? scaleType + ", " + freqType : freqType;
    operandNames = names + (operandNames.empty() ? "" : ", " + operandNames);
    operandTypes = types + (operandTypes.empty() ? "" : ", " + operandTypes);
  }
  // A bias by position reads both position ids (the same a RoPE reads).
  bool byPosition = fusedRope;
  for (const EncodingSpec &encoding : spec.encodings)
    byPosition = byPosition || encoding.readsPositions;
  if (spec.packed)
    out << ", %cu_q: tensor<?xi32>, %cu_k: tensor<?xi32>";
  if (spec.keyLengths)
    out << ", %key_lengths: tensor<" << dimText(s.batch) << "xi32>";
  if (ropeQ || byPosition)
    out << ", %q_pos: " << qp;
  if (ropeK || byPosition)
    out << ", %k_pos: " << kp;
  // A training forward returns the rows' lse [b, hq, sq] after o.
  std::string lse = "tensor<" + dimText(s.batch) + "x" + std::to_string(s.queryHeads) + "x" +
                    dimText(s.querySeq) + "xf32>";
  if (spec.training)
    out << ") -> (" << o << ", " << lse << ") {\n";
  else
    out << ") -> " << o << " {\n";
  if (spec.pageSize)
    out << "  %k = attn.paged_kv %k_pages, %block_table : " << kPages << ", " << table << " -> "
        << k << "\n  %v = attn.paged_kv %v_pages, %block_table : " << vPages << ", " << table
        << " -> " << v << "\n";
  std::string qIn = "%q", kIn = "%k";
  if (ropeQ && !fusedRope) {
    out << "  %q_rot = pe.rope %q, %q_pos " << ropeScale << ropeText(*spec.rope, runtimeScale)
        << " : " << q << ", " << qp << "\n";
    qIn = "%q_rot";
  }
  if (ropeK && !fusedRope) {
    out << "  %k_rot = pe.rope %k, %k_pos " << ropeScale << ropeText(*spec.rope, runtimeScale)
        << " : " << k << ", " << kp << "\n";
    kIn = "%k_rot";
  }
  std::string bias;
  if (spec.alibi) {
    std::string biasType = tensor({1, s.queryHeads, s.querySeq, s.keySeq}, "f32");
    out << "  %bias = pe.alibi <num_heads = " << spec.alibi->numHeads
        << ", head_offset = " << spec.alibi->headOffset
        << ", form = " << (spec.alibi->symmetric ? "symmetric" : "causal") << "> : " << biasType
        << "\n";
    bias = " bias(%bias : " + biasType + ")";
  }
  out << (spec.training ? "  %o, %lse = attn.attention " : "  %o = attn.attention ") << qIn << ", "
      << kIn << ", %v";
  if (byPosition)
    out << " query_positions(%q_pos : " << qp << ") key_positions(%k_pos : " << kp << ")";
  out << bias;
  if (spec.packed)
    out << " segments(%cu_q, %cu_k : tensor<?xi32>, tensor<?xi32>)";
  if (spec.keyLengths)
    out << " key_lengths(%key_lengths : tensor<" << dimText(s.batch) << "xi32>)";
  if (spec.causal)
    out << " causal";
  if (spec.window)
    out << " window(" << *spec.window << ")";
  if (spec.windowRight)
    out << " window_right(" << *spec.windowRight << ")";
  if (spec.softcap)
    out << " softcap(" << literal(*spec.softcap) << ")";
  if (spec.scale)
    out << " scale(" << literal(*spec.scale) << ")";
  if (!encodingAttrs.empty())
    out << " encodings([" << encodingAttrs << "])";
  if (!operandNames.empty())
    out << " encoding_operands(" << operandNames << " : " << operandTypes << ")";
  out << " : " << q << ", " << k << ", " << v << " -> " << o << (spec.training ? ", " + lse : "")
      << "\n";
  if (spec.training)
    out << "  return %o, %lse : " << o << ", " << lse << "\n}\n";
  else
    out << "  return %o : " << o << "\n}\n";
  return Spec(out.str(), "<builder>");
}

namespace {

/// A standalone RoPE's argument types: x, the ids, and the scale's (empty
/// without a runtime scale).
struct StandaloneRopeTypes {
  std::string x, ids, scale;
};

StandaloneRopeTypes standaloneRopeTypes(const ref::RopeConfig &rope, int64_t batch, int64_t heads,
                                        int64_t seq, int64_t headDim, DType dtype,
                                        bool positionsPerBatch, int64_t scaleRows) {
  StandaloneRopeTypes types;
  types.x = tensor({batch, heads, seq, headDim}, elementText(dtype));
  std::vector<int64_t> idsShape =
      positionsPerBatch ? std::vector<int64_t>{batch, seq} : std::vector<int64_t>{seq};
  if (int64_t axes = ref::ropePositionAxes(rope); axes > 0)
    idsShape.insert(idsShape.begin(), axes);
  types.ids = tensor(idsShape, "i64");
  if (scaleRows > 0)
    types.scale = tensor({scaleRows}, "f32");
  return types;
}

} // namespace

Spec Spec::standaloneRope(const ref::RopeConfig &rope, int64_t batch, int64_t heads, int64_t seq,
                          int64_t headDim, DType dtype, bool positionsPerBatch, int64_t scaleRows) {
  StandaloneRopeTypes t =
      standaloneRopeTypes(rope, batch, heads, seq, headDim, dtype, positionsPerBatch, scaleRows);
  bool scaled = !t.scale.empty();
  std::ostringstream out;
  out << "func.func @rope(%x: " << t.x << ", %positions: " << t.ids
      << (scaled ? ", %scale: " + t.scale : "") << ") -> " << t.x << " {\n"
      << "  %r = pe.rope %x, %positions " << (scaled ? "scale(%scale : " + t.scale + ") " : "")
      << ropeText(rope, scaled) << " : " << t.x << ", " << t.ids << "\n"
      << "  return %r : " << t.x << "\n}\n";
  return Spec(out.str(), "<builder>");
}

Spec Spec::linearAttention(const std::string &featureMap, bool causal,
                           const std::optional<ref::RopeConfig> &rope, const std::string &placement,
                           const Shape &shape, DType dtype, bool positionsPerBatch) {
  const char *t = elementText(dtype);
  std::string q = tensor({shape.batch, shape.queryHeads, shape.querySeq, shape.headDim}, t);
  std::string k = tensor({shape.batch, shape.kvHeads, shape.keySeq, shape.headDim}, t);
  std::string v = tensor({shape.batch, shape.kvHeads, shape.keySeq, shape.valueDim}, t);
  std::string o = tensor({shape.batch, shape.queryHeads, shape.querySeq, shape.valueDim}, t);
  auto idsType = [&](int64_t seq) {
    std::vector<int64_t> dims =
        positionsPerBatch ? std::vector<int64_t>{shape.batch, seq} : std::vector<int64_t>{seq};
    if (int64_t axes = rope ? ref::ropePositionAxes(*rope) : 0; axes > 0)
      dims.insert(dims.begin(), axes);
    return tensor(dims, "i64");
  };
  std::string qi = idsType(shape.querySeq), ki = idsType(shape.keySeq);
  std::ostringstream out;
  out << "func.func @linear(%q: " << q << ", %k: " << k << ", %v: " << v;
  if (rope)
    out << ", %qi: " << qi << ", %ki: " << ki;
  out << ") -> " << o << " {\n  %o = attn.linear_attention %q, %k, %v feature_map(" << featureMap
      << ")";
  if (rope)
    out << " query_positions(%qi : " << qi << ") key_positions(%ki : " << ki << ")";
  if (causal)
    out << " causal";
  if (rope)
    out << " encodings([#pe.rope" << ropeText(*rope) << "]) rope_placement(" << placement << ")";
  out << " : " << q << ", " << k << ", " << v << " -> " << o << "\n  return %o : " << o << "\n}\n";
  return Spec(out.str(), "<builder>");
}

Spec Spec::standaloneRopeScaleGradient(const ref::RopeConfig &rope, int64_t batch, int64_t heads,
                                       int64_t seq, int64_t headDim, DType dtype,
                                       bool positionsPerBatch, int64_t scaleRows) {
  StandaloneRopeTypes t = standaloneRopeTypes(rope, batch, heads, seq, headDim, dtype,
                                              positionsPerBatch, std::max<int64_t>(scaleRows, 1));
  std::ostringstream out;
  out << "func.func @rope_scale_grad(%dy: " << t.x << ", %x: " << t.x << ", %positions: " << t.ids
      << ", %scale: " << t.scale << ") -> " << t.scale << " {\n"
      << "  %g = pe.rope_scale_grad %dy, %x, %positions scale(%scale : " << t.scale << ") "
      << ropeText(rope, true) << " : " << t.x << ", " << t.ids << " -> " << t.scale << "\n"
      << "  return %g : " << t.scale << "\n}\n";
  return Spec(out.str(), "<builder>");
}

Expected<Spec> Spec::fromText(std::string mlirText, std::string name) {
  if (std::optional<std::string> problem = sourceNestingProblem(mlirText, name))
    return Expected<Spec>::error(*problem);
  // An attention, or pe ops on their own (a standalone pe.rope,
  // docs/standalone-kernels.md); the compiler names what it cannot compile.
  if (mlirText.find("attn.attention") == std::string::npos &&
      mlirText.find("attn.linear_attention") == std::string::npos &&
      mlirText.find("pe.") == std::string::npos)
    return Expected<Spec>::error(
        name + ": no attn.attention, no attn.linear_attention and no pe op in the source");
  return Spec(std::move(mlirText), std::move(name));
}

Expected<Spec> Spec::backwardOf(const Spec &forward, bool operandGradients,
                                bool scoreShapedGradients) {
  Expected<std::string> text = deriveBackwardSource(forward.source(), forward.name(),
                                                    operandGradients, scoreShapedGradients);
  if (!text)
    return Expected<Spec>::error(text.error());
  return fromText(std::move(*text), forward.name() + " (backward)");
}

Expected<Spec> Spec::fromFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Expected<Spec>::error(path + ": cannot open the file");
  // At most kMaxSourceBytes, read in chunks: a device (/dev/zero) or a
  // huge file is an error, never an allocation without end.
  std::string text;
  char chunk[1 << 16];
  while (file.read(chunk, sizeof chunk) || file.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(file.gcount()));
    if (text.size() > kMaxSourceBytes)
      return Expected<Spec>::error(path + ": the source is larger than " +
                                   std::to_string(kMaxSourceBytes >> 20) +
                                   " MiB: not an MLIR program pejit reads");
  }
  if (file.bad())
    return Expected<Spec>::error(path + ": cannot read the file");
  return fromText(std::move(text), path);
}

} // namespace pejit
