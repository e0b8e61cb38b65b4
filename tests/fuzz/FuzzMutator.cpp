#include "tests/fuzz/FuzzMutator.h"

#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace pejit::fuzz {

namespace {

template <typename T> const T &pick(const std::vector<T> &items, Rng &rng) {
  return items[rng() % items.size()];
}

bool chance(Rng &rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

// Values at the edges of every bound pejit has (dims, i32/i64, f32 range).
const std::vector<std::string> kIntegers = {"0",
                                            "1",
                                            "2",
                                            "3",
                                            "-1",
                                            "5",
                                            "6",
                                            "7",
                                            "8",
                                            "12",
                                            "15",
                                            "16",
                                            "17",
                                            "31",
                                            "32",
                                            "47",
                                            "48",
                                            "63",
                                            "64",
                                            "65",
                                            "96",
                                            "127",
                                            "128",
                                            "129",
                                            "144",
                                            "256",
                                            "1000",
                                            "1023",
                                            "1024",
                                            "1025",
                                            "4096",
                                            "65536",
                                            "16777216",
                                            "2147483647",
                                            "2147483648",
                                            "4294967296",
                                            "1099511627776",
                                            "9223372036854775807",
                                            "-9223372036854775808",
                                            "-2147483648"};
const std::vector<std::string> kFloats = {"0.0",
                                          "-0.0",
                                          "1.0",
                                          "-1.0",
                                          "0.5",
                                          "2.0",
                                          "1.0e-300",
                                          "1.0e-40",
                                          "1.0e-38",
                                          "1.0e-7",
                                          "1.0e9",
                                          "1.0e30",
                                          "3.4e38",
                                          "3.5e38",
                                          "1.0e39",
                                          "1.0e300",
                                          "0x7FF0000000000000",
                                          "0xFFF0000000000000",
                                          "0x7FF8000000000000",
                                          "10000.0",
                                          "500000.0",
                                          "0.125",
                                          "8.0",
                                          "32.0"};
const std::vector<std::pair<std::string, std::string>> kSwaps = {
    {"half", "interleaved"},
    {"causal", "symmetric"},
    {"f32", "f16"},
    {"f32", "bf16"},
    {"f16", "f64"},
    {"i32", "i64"},
    {"i64", "f32"},
    {"true", "false"},
    {"linear", "ntk"},
    {"yarn", "llama3"},
    {"rope", "alibi"},
    {"%q", "%k"},
    {"key_positions", "query_positions"},
    {"tensor<", "memref<"}};
const std::vector<std::string> kAttentionSnippets = {
    " causal",        " window(0)",        " window(1)",     " window(9223372036854775807)",
    " softcap(30.0)", " softcap(1.0e-40)", " scale(1.0e30)", " scale(0.0)",
    " scale(1.0)",    " window(-1)"};
const std::vector<std::string> kRopeSnippets = {
    ", rotary_dim = 32",
    ", rotary_dim = 0",
    ", rotary_dim = 1048576",
    ", sections = [8, 8, 16]",
    ", scaling = #pe.linear<factor = 1.0e-300>",
    ", scaling = #pe.ntk<factor = 4.0>",
    ", scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 16>",
    ", scaling = #pe.yarn<factor = 4.0, original_max_position = 32>",
    ", scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, "
    "original_max_position = 64>"};

/// [begin, end) of every number token (decimal, float, hex).
std::vector<std::pair<size_t, size_t>> numberTokens(const std::string &text) {
  std::vector<std::pair<size_t, size_t>> tokens;
  for (size_t i = 0; i < text.size();) {
    bool startsNumber =
        std::isdigit(static_cast<unsigned char>(text[i])) &&
        (i == 0 || !std::isalpha(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == 'x');
    if (!startsNumber) {
      ++i;
      continue;
    }
    size_t begin = i > 0 && text[i - 1] == '-' ? i - 1 : i;
    size_t end = i;
    if (text.compare(i, 2, "0x") == 0)
      for (end = i + 2; end < text.size() && std::isxdigit(static_cast<unsigned char>(text[end]));)
        ++end;
    else
      while (end < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
              (text[end] == 'e' && end + 1 < text.size() &&
               (text[end + 1] == '-' || text[end + 1] == '+' ||
                std::isdigit(static_cast<unsigned char>(text[end + 1])))) ||
              ((text[end] == '-' || text[end] == '+') && text[end - 1] == 'e')))
        ++end;
    tokens.push_back({begin, end});
    i = end;
  }
  return tokens;
}

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

std::string joined(const std::vector<std::string> &parts) {
  std::string out;
  for (const std::string &part : parts)
    out += part + "\n";
  return out;
}

std::string replaceAll(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string mutateOnce(const std::string &text, const std::vector<std::string> &corpus, Rng &rng) {
  std::vector<std::pair<size_t, size_t>> numbers = numberTokens(text);
  switch (rng() % 9) {
  case 0: // one number -> an edge value
  case 1: {
    if (numbers.empty())
      break;
    auto [begin, end] = pick(numbers, rng);
    std::string token = text.substr(begin, end - begin);
    bool isFloat = token.find_first_of(".e") != std::string::npos || token.rfind("0x", 0) == 0;
    return text.substr(0, begin) + pick(isFloat ? kFloats : kIntegers, rng) + text.substr(end);
  }
  case 2: { // every occurrence of one dim inside types: shapes stay consistent
    if (numbers.empty())
      break;
    auto [begin, end] = pick(numbers, rng);
    std::string token = text.substr(begin, end - begin);
    if (token.find_first_not_of("0123456789") != std::string::npos)
      break;
    int64_t value = std::stoll(token.substr(0, 18));
    std::vector<std::string> choices = {std::to_string(value * 2), std::to_string(value + 1),
                                        std::to_string(std::max<int64_t>(value / 2, 1)),
                                        pick(kIntegers, rng)};
    std::string to = pick(choices, rng);
    std::string out = replaceAll(text, "x" + token + "x", "x" + to + "x");
    out = replaceAll(out, "<" + token + "x", "<" + to + "x");
    return out;
  }
  case 3: { // keyword swap
    const auto &[a, b] = pick(kSwaps, rng);
    bool forward = chance(rng, 0.5);
    const std::string &from = forward ? a : b, &to = forward ? b : a;
    size_t at = text.find(from);
    if (at == std::string::npos)
      break;
    return chance(rng, 0.5) ? replaceAll(text, from, to)
                            : text.substr(0, at) + to + text.substr(at + from.size());
  }
  case 4: { // an attribute snippet where it belongs
    size_t attention = text.find("attn.attention");
    size_t rope = text.find("theta = ");
    if (rope != std::string::npos && chance(rng, 0.5)) {
      size_t close = text.find_first_of(",>", rope);
      if (close != std::string::npos)
        return text.substr(0, close) + pick(kRopeSnippets, rng) + text.substr(close);
    }
    if (attention == std::string::npos)
      break;
    size_t colon = text.find(" : ", attention);
    if (colon == std::string::npos)
      break;
    return text.substr(0, colon) + pick(kAttentionSnippets, rng) + text.substr(colon);
  }
  case 5: { // delete, duplicate or swap lines
    std::vector<std::string> all = lines(text);
    if (all.size() < 2)
      break;
    size_t a = rng() % all.size(), b = rng() % all.size();
    switch (rng() % 3) {
    case 0:
      all.erase(all.begin() + a);
      break;
    case 1:
      all.insert(all.begin() + a, all[b]);
      break;
    default:
      std::swap(all[a], all[b]);
    }
    return joined(all);
  }
  case 6: { // splice a line of another program
    std::vector<std::string> all = lines(text), other = lines(pick(corpus, rng));
    if (all.empty() || other.empty())
      break;
    all.insert(all.begin() + rng() % all.size(), pick(other, rng));
    return joined(all);
  }
  case 7: { // delete a span of characters
    if (text.size() < 2)
      break;
    size_t at = rng() % text.size(), length = 1 + rng() % 12;
    return text.substr(0, at) + text.substr(std::min(text.size(), at + length));
  }
  default: { // insert punctuation
    static const std::string kChars = "()[]{}<>,:=%#@\"x0-!?";
    size_t at = rng() % (text.size() + 1);
    return text.substr(0, at) + kChars[rng() % kChars.size()] + text.substr(at);
  }
  }
  return text;
}

} // namespace

std::vector<std::string> loadCorpus(const std::string &sourceDir) {
  std::vector<std::string> corpus;
  for (const char *sub : {"examples", "tests/lit"}) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto &item : fs::recursive_directory_iterator(fs::path(sourceDir) / sub, ec))
      if (item.path().extension() == ".mlir")
        files.push_back(item.path());
    std::sort(files.begin(), files.end()); // the same order on every machine
    for (const fs::path &file : files) {
      std::ifstream in(file);
      std::string text((std::istreambuf_iterator<char>(in)), {});
      size_t at = 0;
      while (at <= text.size()) {
        size_t split = text.find("// -----", at);
        std::string piece =
            text.substr(at, split == std::string::npos ? std::string::npos : split - at);
        if (piece.find("func.func") != std::string::npos)
          corpus.push_back(piece);
        if (split == std::string::npos)
          break;
        at = split + 8;
      }
    }
  }
  return corpus;
}

std::string randomBuilderProgram(Rng &rng) {
  auto between = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % (hi - lo + 1));
  };
  Shape shape;
  shape.batch = between(1, 2);
  shape.kvHeads = pick(std::vector<int64_t>{1, 2}, rng);
  shape.queryHeads = shape.kvHeads * pick(std::vector<int64_t>{1, 2, 3}, rng);
  shape.querySeq = chance(rng, 0.2) ? 1 : between(1, 160);
  shape.keySeq = chance(rng, 0.2) ? shape.querySeq : between(1, 160);
  shape.headDim = pick(std::vector<int64_t>{8, 16, 32, 64, 128}, rng);
  shape.valueDim = chance(rng, 0.7) ? std::max<int64_t>(shape.headDim, 16)
                                    : pick(std::vector<int64_t>{16, 32, 64}, rng);
  AttentionSpec spec;
  if (chance(rng, 0.7)) {
    ref::RopeConfig rope;
    rope.layout = chance(rng, 0.5) ? ref::RopeLayout::Half : ref::RopeLayout::Interleaved;
    rope.theta = pick(std::vector<double>{10000.0, 500000.0, 1.0e6, 100.0, 2.0, 1.0e-5}, rng);
    if (chance(rng, 0.3))
      rope.rotaryDim = 2 * between(1, shape.headDim / 2);
    using Kind = ref::RopeScaling::Kind;
    ref::RopeScaling &s = rope.scaling;
    s.kind = pick(std::vector<Kind>{Kind::None, Kind::Linear, Kind::Ntk, Kind::DynamicNtk,
                                    Kind::Yarn, Kind::Llama3, Kind::LongRope},
                  rng);
    s.factor = pick(std::vector<double>{1.0, 2.0, 8.0, 0.5, 64.0, 1.0e-300, 1.0e300}, rng);
    s.originalMaxPosition = pick(std::vector<int64_t>{16, 64, 4096}, rng);
    if (chance(rng, 0.3))
      s.attentionFactor = pick(std::vector<double>{1.0, 0.5, 2.0, 1.0e39}, rng);
    if (s.kind == Kind::LongRope) {
      int64_t half = (rope.rotaryDim ? rope.rotaryDim : shape.headDim) / 2;
      for (int64_t c = 0; c < half; ++c) {
        s.shortFactor.push_back(1.0 + 0.1 * c);
        s.longFactor.push_back(chance(rng, 0.05) ? 1.0e-300 : 2.0 + 0.5 * c);
      }
    }
    spec.rope = rope;
    spec.queryPositions = spec.keyPositions = chance(rng, 0.6);
    spec.positionsPerBatch = chance(rng, 0.3);
  }
  if (chance(rng, 0.3))
    spec.alibi = AlibiSpec{shape.queryHeads + (chance(rng, 0.3) ? 2 : 0), 0, chance(rng, 0.5)};
  spec.causal = chance(rng, 0.5);
  if (chance(rng, 0.3))
    spec.window = pick(std::vector<int64_t>{0, 1, 7, 64, 159, 160, 1000, 9223372036854775807}, rng);
  if (chance(rng, 0.2))
    spec.softcap = pick(std::vector<double>{30.0, 1.0, 1.0e-3, 1.0e30}, rng);
  if (chance(rng, 0.2))
    spec.scale = pick(std::vector<double>{1.0, 0.01, 1.0e-30, 1.0e9, 1.0e30, 3.0}, rng);
  return Spec::fromBuilder(spec, shape).source();
}

std::string mutate(const std::string &seed, const std::vector<std::string> &corpus, Rng &rng) {
  std::string text = seed;
  for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n; ++i)
    text = mutateOnce(text, corpus, rng);
  return text;
}

} // namespace pejit::fuzz
