// The grammar of FuzzGrammar.h: an attention's shape, then its encodings,
// each bringing its attribute text and the tensors it reads, then the
// function around them with its arguments shuffled.
#include "tests/fuzz/FuzzGrammar.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace pejit::fuzz {

namespace {

template <typename T> T pick(Rng &rng, std::initializer_list<T> options) {
  return *(options.begin() + rng() % options.size());
}

struct Argument {
  std::string name, type;
};

struct Program {
  int64_t b, hq, hkv, sq, skv, d, dv;
  bool dynamic; ///< `?` lengths: the fuzz case picks them per run
  std::string element;
  std::vector<std::string> encodings;
  std::vector<Argument> operands; ///< the encodings' tensors, in their order
  bool positions = false;         ///< an encoding reads position ids
  bool rope = false;

  std::string length(int64_t n) const { return dynamic ? "?" : std::to_string(n); }
  std::string tensor(std::vector<std::string> dims, const std::string &t) const {
    std::string text = "tensor<";
    for (const std::string &dim : dims)
      text += dim + "x";
    return text + t + ">";
  }
};

/// A float literal MLIR reads back: "0.125", "10000.0".
std::string number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  std::string text = out.str();
  if (text.find_first_of(".e") == std::string::npos)
    text += ".0";
  return text;
}

std::string ropeScaling(Rng &rng) {
  std::string factor = number(pick(rng, {0.5, 2.0, 4.0, 8.0, 32.0}));
  std::string original = std::to_string(pick<int64_t>(rng, {16, 64, 2048}));
  switch (rng() % 6) {
  case 0:
    return ", scaling = #pe.linear<factor = " + factor + ">";
  case 1:
    return ", scaling = #pe.ntk<factor = " + factor + ">";
  case 2:
    return ", scaling = #pe.yarn<factor = " + factor + ", original_max_position = " + original +
           ">";
  case 3:
    return ", scaling = #pe.llama3<factor = " + factor +
           ", low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = " + original +
           ">";
  case 4:
    return ", scaling = #pe.dynamic_ntk<factor = " + factor +
           ", original_max_position = " + original + ">";
  default:
    return "";
  }
}

void addRope(Program &p, Rng &rng) {
  std::string attr = std::string("#pe.rope<layout = ") +
                     pick<const char *>(rng, {"half", "interleaved"}) +
                     ", theta = " + number(pick(rng, {100.0, 10000.0, 500000.0}));
  if (rng() % 4 == 0)
    attr += ", rotary_dim = " + std::to_string(p.d / 2);
  std::string scaling = ropeScaling(rng);
  attr += scaling;
  // A runtime position scale (not with dynamic_ntk, whose frequencies
  // follow the call's length): an f32 [1] operand.
  bool runtimeScale = rng() % 4 == 0 && scaling.find("dynamic_ntk") == std::string::npos;
  if (runtimeScale)
    attr += ", runtime_scale = true";
  p.encodings.push_back(attr + ">");
  if (runtimeScale)
    p.operands.push_back({"rope_scale", "tensor<1xf32>"});
  p.positions = p.rope = true;
}

std::string relativeTo(Program &p, Rng &rng) {
  if (rng() % 4 != 0)
    return "";
  p.positions = true;
  return ", relative_to = position";
}

void addScoreBiases(Program &p, Rng &rng) {
  if (rng() % 3 == 0)
    p.encodings.push_back("#pe.alibi<num_heads = " + std::to_string(p.hq) +
                          ", form = " + pick<const char *>(rng, {"causal", "symmetric"}) +
                          relativeTo(p, rng) + ">");
  if (rng() % 3 == 0) {
    int64_t buckets = pick<int64_t>(rng, {8, 32});
    p.encodings.push_back("#pe.t5_bias<num_buckets = " + std::to_string(buckets) +
                          ", max_distance = " + std::to_string(pick<int64_t>(rng, {16, 128})) +
                          (rng() % 2 ? ", bidirectional = false" : "") + relativeTo(p, rng) + ">");
    p.operands.push_back(
        {"t5", p.tensor({std::to_string(buckets), std::to_string(p.hq)}, p.element)});
  }
  if (rng() % 4 == 0 && !p.dynamic) {
    p.encodings.push_back("#pe.bias_tensor");
    p.operands.push_back({"bias", p.tensor({rng() % 2 ? std::to_string(p.b) : "1",
                                            rng() % 2 ? std::to_string(p.hq) : "1",
                                            std::to_string(p.sq), std::to_string(p.skv)},
                                           p.element)});
  }
}

void addShaw(Program &p, Rng &rng) {
  int64_t clip = pick<int64_t>(rng, {1, 4, 16});
  std::string rows = std::to_string(2 * clip + 1);
  // a^K rotates with nothing: the key term reads the unrotated Q.
  if (!p.rope && rng() % 3 == 0) {
    p.encodings.push_back("#pe.relative_key<clip = " + std::to_string(clip) + relativeTo(p, rng) +
                          ">");
    std::vector<std::string> dims = {rows, std::to_string(p.d)};
    if (rng() % 2)
      dims.insert(dims.begin(), std::to_string(p.hq));
    p.operands.push_back({"shaw_key", p.tensor(dims, p.element)});
  }
  if (rng() % 3 == 0) {
    p.encodings.push_back("#pe.relative_value<clip = " + std::to_string(clip) + relativeTo(p, rng) +
                          ">");
    std::vector<std::string> dims = {rows, std::to_string(p.dv)};
    if (rng() % 2)
      dims.insert(dims.begin(), std::to_string(p.hq));
    p.operands.push_back({"shaw_value", p.tensor(dims, p.element)});
  }
}

} // namespace

std::string randomGrammarProgram(Rng &rng) {
  Program p;
  p.b = pick<int64_t>(rng, {1, 2});
  p.hkv = pick<int64_t>(rng, {1, 2});
  p.hq = p.hkv * pick<int64_t>(rng, {1, 2, 3});
  p.sq = pick<int64_t>(rng, {1, 5, 33, 70});
  p.skv = rng() % 3 == 0 ? p.sq : pick<int64_t>(rng, {p.sq, p.sq + 7, 64, 150});
  p.skv = std::max(p.skv, p.sq);
  p.d = pick<int64_t>(rng, {16, 32, 64});
  p.dv = pick<int64_t>(rng, {16, 32, 64});
  p.dynamic = rng() % 4 == 0;
  p.element = rng() % 4 == 0 ? pick<const char *>(rng, {"f16", "bf16"}) : "f32";
  if (rng() % 2)
    addRope(p, rng);
  addScoreBiases(p, rng);
  addShaw(p, rng);

  std::string q = p.tensor(
      {std::to_string(p.b), std::to_string(p.hq), p.length(p.sq), std::to_string(p.d)}, p.element);
  std::string k =
      p.tensor({std::to_string(p.b), std::to_string(p.hkv), p.length(p.skv), std::to_string(p.d)},
               p.element);
  std::string v =
      p.tensor({std::to_string(p.b), std::to_string(p.hkv), p.length(p.skv), std::to_string(p.dv)},
               p.element);
  std::string o = p.tensor(
      {std::to_string(p.b), std::to_string(p.hq), p.length(p.sq), std::to_string(p.dv)}, p.element);
  std::string qp = p.tensor({p.length(p.sq)}, "i64"), kp = p.tensor({p.length(p.skv)}, "i64");
  std::vector<Argument> arguments = p.operands;
  if (p.positions) {
    arguments.push_back({"qp", qp});
    arguments.push_back({"kp", kp});
  }
  // Q, K, V first (the kernel takes them there); the rest in any order.
  std::shuffle(arguments.begin(), arguments.end(), rng);
  std::string text = "func.func @fuzz(%q: " + q + ", %k: " + k + ", %v: " + v;
  for (const Argument &argument : arguments)
    text += ", %" + argument.name + ": " + argument.type;
  text += ") -> " + o + " {\n  %o = attn.attention %q, %k, %v";
  if (p.positions)
    text += " query_positions(%qp : " + qp + ") key_positions(%kp : " + kp + ")";
  if (rng() % 2)
    text += " causal";
  if (rng() % 4 == 0)
    text += " window(" + std::to_string(pick<int64_t>(rng, {0, 3, 40})) + ")";
  if (rng() % 6 == 0)
    text += " window_right(" + std::to_string(pick<int64_t>(rng, {0, 5})) + ")";
  if (rng() % 5 == 0)
    text += " softcap(" + number(pick(rng, {5.0, 30.0})) + ")";
  text += " scale(" + number(pick(rng, {0.125, 0.25, 1.0})) + ")";
  if (!p.encodings.empty()) {
    text += " encodings([";
    for (size_t n = 0; n < p.encodings.size(); ++n)
      text += (n ? ", " : "") + p.encodings[n];
    text += "])";
  }
  if (!p.operands.empty()) {
    std::string names, types;
    for (const Argument &operand : p.operands) {
      names += (names.empty() ? "%" : ", %") + operand.name;
      types += (types.empty() ? "" : ", ") + operand.type;
    }
    text += " encoding_operands(" + names + " : " + types + ")";
  }
  text += " : " + q + ", " + k + ", " + v + " -> " + o + "\n  return %o : " + o + "\n}\n";
  return text;
}

} // namespace pejit::fuzz
