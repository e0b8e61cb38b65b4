//===- Npy.cpp - .npy header parsing, validation and serialization --------===//
//
// The header is a Python dict literal; a tiny recursive-descent parser reads
// the subset NumPy writes (strings, True/False/None, ints, tuples, lists,
// dicts) so that odd but valid headers parse and broken ones get a message.
//
//===----------------------------------------------------------------------===//
#include "pejit/runtime/npy/Npy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "pejit::npy stores little-endian data in host order");

namespace pejit::npy {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float32";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I32:
    return "int32";
  case DType::I64:
    return "int64";
  }
  return "?";
}

size_t elementSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  }
  return 0;
}

const char *dtypeDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::BF16:
    return "<u2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  }
  return "?";
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeToString(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlignment = 64;

/// Byte count of shape × elemSize, or nullopt on a negative dim or overflow.
std::optional<int64_t> byteCount(const std::vector<int64_t> &shape, size_t elemSize) {
  int64_t n = static_cast<int64_t>(elemSize);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max())
    return std::nullopt;
  return n;
}

// --- header dict parser -----------------------------------------------------

struct Value {
  enum Kind { String, Bool, None, Int, Tuple, List, Dict } kind = None;
  std::string text; // String: contents; Int: the literal as written
  bool boolean = false;
  int64_t integer = 0;
  bool overflow = false;         // Int did not fit in int64
  std::vector<Value> items;      // Tuple, List, Dict values
  std::vector<std::string> keys; // Dict keys (string keys only)
};

class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : s(text) {}

  /// Parses the whole header as one dict; "" on success else what is wrong.
  std::string parseDict(Value &out) {
    skipSpace();
    if (pos >= s.size() || s[pos] != '{')
      return "header is not a Python dict literal";
    if (!parseValue(out, 0))
      return "malformed header dict (" + problem + " at offset " + std::to_string(pos) + ")";
    skipSpace();
    if (pos != s.size())
      return "malformed header dict (unexpected text after the closing '}')";
    return "";
  }

private:
  const std::string &s;
  size_t pos = 0;
  std::string problem;

  void skipSpace() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r'))
      ++pos;
  }
  bool fail(const char *what) {
    problem = what;
    return false;
  }
  bool startsWith(const char *word) { return s.compare(pos, std::strlen(word), word) == 0; }

  bool parseValue(Value &v, int depth) {
    if (depth > 16)
      return fail("nested too deeply");
    skipSpace();
    if (pos >= s.size())
      return fail("unexpected end");
    char c = s[pos];
    if (c == '\'' || c == '"')
      return parseString(v);
    if (c == '(' || c == '[' || c == '{')
      return parseSequence(v, depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9'))
      return parseInt(v);
    for (auto [word, kind, b] :
         {std::tuple{"True", Value::Bool, true}, std::tuple{"False", Value::Bool, false},
          std::tuple{"None", Value::None, false}})
      if (startsWith(word)) {
        pos += std::strlen(word);
        v.kind = kind;
        v.boolean = b;
        return true;
      }
    return fail("unexpected character");
  }

  bool parseString(Value &v) {
    char quote = s[pos++];
    v.kind = Value::String;
    while (pos < s.size() && s[pos] != quote) {
      if (s[pos] == '\\' && pos + 1 < s.size())
        ++pos; // keep the escaped character as is; descrs never need more
      v.text += s[pos++];
    }
    if (pos >= s.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }

  bool parseInt(Value &v) {
    size_t start = pos;
    bool negative = s[pos] == '-';
    if (s[pos] == '-' || s[pos] == '+')
      ++pos;
    if (pos >= s.size() || s[pos] < '0' || s[pos] > '9')
      return fail("expected a digit");
    v.kind = Value::Int;
    for (; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos) {
      int digit = s[pos] - '0';
      if (__builtin_mul_overflow(v.integer, 10, &v.integer) ||
          __builtin_add_overflow(v.integer, negative ? -digit : digit, &v.integer))
        v.overflow = true;
    }
    v.text = s.substr(start, pos - start);
    if (pos < s.size() && (s[pos] == 'L' || s[pos] == 'l'))
      ++pos; // Python 2 long suffix, seen in old files
    return true;
  }

  bool parseSequence(Value &v, int depth) {
    char open = s[pos++];
    char close = open == '(' ? ')' : open == '[' ? ']' : '}';
    v.kind = open == '(' ? Value::Tuple : open == '[' ? Value::List : Value::Dict;
    for (;;) {
      skipSpace();
      if (pos < s.size() && s[pos] == close) {
        ++pos;
        return true;
      }
      if (v.kind == Value::Dict) {
        Value key;
        if (!parseValue(key, depth + 1))
          return false;
        if (key.kind != Value::String)
          return fail("dict key is not a string");
        skipSpace();
        if (pos >= s.size() || s[pos] != ':')
          return fail("expected ':'");
        ++pos;
        v.keys.push_back(key.text);
      }
      v.items.emplace_back();
      if (!parseValue(v.items.back(), depth + 1))
        return false;
      skipSpace();
      if (pos < s.size() && s[pos] == ',')
        ++pos;
      else if (pos >= s.size() || s[pos] != close)
        return fail("expected ',' or a closing bracket");
    }
  }
};

// --- descriptor -------------------------------------------------------------

/// NumPy's name for a descriptor's type code, for messages ("" if unknown).
std::string numpyTypeName(const std::string &code) {
  static const char *const names[][2] = {
      {"f2", "float16"}, {"f4", "float32"},   {"f8", "float64"},     {"f16", "float128"},
      {"i1", "int8"},    {"i2", "int16"},     {"i4", "int32"},       {"i8", "int64"},
      {"u1", "uint8"},   {"u2", "uint16"},    {"u4", "uint32"},      {"u8", "uint64"},
      {"b1", "bool"},    {"c8", "complex64"}, {"c16", "complex128"}, {"c32", "complex256"},
      {"O", "object"},   {"O8", "object"}};
  for (auto &n : names)
    if (code == n[0])
      return n[1];
  if (!code.empty() && std::strchr("USVMma", code[0]))
    return code[0] == 'U'   ? "unicode string"
           : code[0] == 'S' ? "bytes"
           : code[0] == 'V' ? "void"
           : code[0] == 'M' ? "datetime64"
           : code[0] == 'm' ? "timedelta64"
                            : "bytes";
  return "";
}

/// The DType for a descriptor string, or the message for an unsupported one.
Expected<DType> parseDescr(const std::string &descr) {
  char order = '=';
  std::string code = descr;
  if (!code.empty() && std::strchr("<>=|", code[0])) {
    order = code[0];
    code.erase(0, 1);
  }
  static const std::pair<const char *, DType> supported[] = {{"f4", DType::F32},
                                                             {"f2", DType::F16},
                                                             {"u2", DType::BF16},
                                                             {"i4", DType::I32},
                                                             {"i8", DType::I64}};
  for (auto &[c, dtype] : supported) {
    if (code != c)
      continue;
    if (order == '>')
      return Expected<DType>::failure("big-endian '" + descr +
                                      "' is not supported; save little-endian "
                                      "data (e.g. a.astype('<" +
                                      code + "'))");
    if (order == '|')
      return Expected<DType>::failure("dtype '" + descr +
                                      "' is ambiguous: byte order '|' is only valid "
                                      "for 1-byte types");
    return Expected<DType>::success(dtype);
  }
  std::string name = numpyTypeName(code);
  return Expected<DType>::failure(
      "'" + descr + "'" + (name.empty() ? "" : " (" + name + ")") +
      " is not supported; use float32, float16, bfloat16 (as uint16), int32 "
      "or int64");
}

} // namespace

Expected<NpyPreamble> parseNpyPreamble(const uint8_t *data, size_t size,
                                       const std::string &nameForMessages) {
  auto failure = [&](const std::string &message) {
    return Expected<NpyPreamble>::failure(nameForMessages + ": " + message);
  };
  if (size > 0 && std::memcmp(data, kMagic, std::min(size, kMagicSize)) != 0)
    return failure("not a .npy file (bad magic)");
  if (size < kMagicSize + 2)
    return failure("truncated header (file ends after " + std::to_string(size) + " bytes)");
  uint8_t major = data[6], minor = data[7];
  if (major < 1 || major > 3 || minor != 0)
    return failure("unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t lengthBytes = major == 1 ? 2 : 4;
  NpyPreamble preamble;
  preamble.headerStart = kMagicSize + 2 + lengthBytes;
  if (size < preamble.headerStart)
    return failure("truncated header (file ends after " + std::to_string(size) + " bytes)");
  for (size_t i = 0; i < lengthBytes; ++i)
    preamble.headerLength |= uint64_t(data[8 + i]) << (8 * i);
  if (preamble.headerLength > kMaxHeaderLength)
    return failure("header of " + std::to_string(preamble.headerLength) +
                   " bytes is beyond the limit of " + std::to_string(kMaxHeaderLength) +
                   " (NumPy writes a few hundred)");
  return Expected<NpyPreamble>::success(preamble);
}

Expected<NpyHeader> parseNpyHeader(const uint8_t *data, size_t size,
                                   const std::string &nameForMessages) {
  auto failure = [&](const std::string &message) {
    return Expected<NpyHeader>::failure(nameForMessages + ": " + message);
  };
  Expected<NpyPreamble> preamble = parseNpyPreamble(data, size, nameForMessages);
  if (!preamble)
    return Expected<NpyHeader>::failure(preamble.error);
  size_t headerStart = preamble->headerStart;
  uint64_t headerLength = preamble->headerLength;
  if (headerLength > size - headerStart)
    return failure("truncated header (it claims " + std::to_string(headerLength) +
                   " bytes but only " + std::to_string(size - headerStart) + " follow)");
  std::string header(reinterpret_cast<const char *>(data) + headerStart, headerLength);
  Value dict;
  if (std::string problem = HeaderParser(header).parseDict(dict); !problem.empty())
    return failure(problem);
  const Value *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (size_t i = 0; i < dict.keys.size(); ++i) { // other keys are ignored
    if (dict.keys[i] == "descr")
      descr = &dict.items[i];
    else if (dict.keys[i] == "fortran_order")
      fortran = &dict.items[i];
    else if (dict.keys[i] == "shape")
      shape = &dict.items[i];
  }
  if (!descr)
    return failure("header has no 'descr' key");
  if (!shape)
    return failure("header has no 'shape' key");
  if (descr->kind != Value::String)
    return failure(descr->kind == Value::List ? "structured dtypes are not supported"
                                              : "'descr' is not a string");
  // Missing 'fortran_order' is read as False (NumPy always writes it).
  if (fortran && fortran->kind != Value::Bool)
    return failure("'fortran_order' is not True or False");
  Expected<DType> dtype = parseDescr(descr->text);
  if (!dtype)
    return failure(dtype.error);

  NpyHeader result;
  Array &array = result.array;
  array.dtype = *dtype;
  if (shape->kind != Value::Tuple)
    return failure("'shape' is not a tuple");
  for (const Value &d : shape->items) {
    if (d.kind != Value::Int)
      return failure("'shape' holds a non-integer");
    if (d.overflow)
      return failure("shape dimension " + d.text + " is too large");
    array.shape.push_back(d.integer);
  }
  for (int64_t d : array.shape)
    if (d < 0)
      return failure("shape " + shapeToString(array.shape) + " has a negative dimension");
  // Fortran and C order coincide when at most one dim exceeds 1 or there is
  // no data, so only reject when the layouts really differ.
  int64_t nonUnitDims = 0;
  bool empty = false;
  for (int64_t d : array.shape) {
    nonUnitDims += d != 1;
    empty |= d == 0;
  }
  if (fortran && fortran->boolean && nonUnitDims > 1 && !empty)
    return failure("fortran_order=True is not supported (save with "
                   "np.ascontiguousarray)");
  std::optional<int64_t> needed = byteCount(array.shape, elementSize(*dtype));
  if (!needed)
    return failure("shape " + shapeToString(array.shape) + " of " + dtypeName(*dtype) +
                   " is too large (size overflows)");
  result.dataStart = headerStart + headerLength;
  result.dataBytes = static_cast<uint64_t>(*needed);
  return Expected<NpyHeader>::success(std::move(result));
}

std::string dataSizeProblem(const NpyHeader &header, uint64_t have) {
  if (header.dataBytes == have)
    return "";
  return "shape " + shapeToString(header.array.shape) + " of " + dtypeName(header.array.dtype) +
         " needs " + std::to_string(header.dataBytes) + " bytes of data but the file has " +
         std::to_string(have);
}

Expected<Array> parseNpy(const uint8_t *data, size_t size, const std::string &nameForMessages) {
  Expected<NpyHeader> header = parseNpyHeader(data, size, nameForMessages);
  if (!header)
    return Expected<Array>::failure(header.error);
  if (std::string problem = dataSizeProblem(*header, size - header->dataStart); !problem.empty())
    return Expected<Array>::failure(nameForMessages + ": " + problem);
  Array array = std::move(header->array);
  array.bytes.assign(data + header->dataStart, data + size);
  return Expected<Array>::success(std::move(array));
}

std::string validateArray(const Array &array) {
  std::optional<int64_t> needed = byteCount(array.shape, elementSize(array.dtype));
  std::string what = "shape " + shapeToString(array.shape) + " of " + dtypeName(array.dtype);
  if (!needed)
    return what + " is invalid (negative dimension or size overflow)";
  if (static_cast<uint64_t>(*needed) != array.bytes.size())
    return what + " needs " + std::to_string(*needed) + " bytes of data but the array holds " +
           std::to_string(array.bytes.size());
  return "";
}

std::vector<uint8_t> serializeNpy(const Array &array) {
  if (!validateArray(array).empty())
    return {};
  std::string dict = std::string("{'descr': '") + dtypeDescr(array.dtype) +
                     "', 'fortran_order': False, 'shape': " + shapeToString(array.shape) + ", }";
  // Version 1.0 while the padded header length fits its uint16 field.
  auto paddedLength = [&](size_t prefix) {
    size_t unpadded = prefix + dict.size() + 1; // + '\n'
    return (unpadded + kAlignment - 1) / kAlignment * kAlignment - prefix;
  };
  uint8_t major = paddedLength(10) <= 0xffff ? 1 : 2;
  size_t prefix = major == 1 ? 10 : 12, headerLength = paddedLength(prefix);
  dict.append(headerLength - dict.size() - 1, ' ');
  dict += '\n';

  std::vector<uint8_t> out(kMagic, kMagic + kMagicSize);
  out.push_back(major);
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<uint8_t>(headerLength >> (8 * i)));
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), array.bytes.begin(), array.bytes.end());
  return out;
}

} // namespace pejit::npy
