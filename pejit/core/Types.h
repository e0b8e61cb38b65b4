// The vocabulary every part of pejit shares: errors as values, element
// types, user buffers and the shape of one attention call. Plain C++17 (no
// LLVM/MLIR), so the light tools (the GPU check runner) use it too.
#ifndef PEJIT_RUNTIME_CORE_TYPES_H
#define PEJIT_RUNTIME_CORE_TYPES_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pejit {

/// Success, or an error message.
class Status {
public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !message_; }
  explicit operator bool() const { return ok(); }
  const std::string &message() const;

private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

/// A value, or an error message.
template <typename T> class Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  static Expected error(std::string message) { return Expected(Status::error(std::move(message))); }
  Expected(Status status) : status_(std::move(status)) {}
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string &error() const { return status_.message(); }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }
  const T &operator*() const { return *value_; }
  const T *operator->() const { return &*value_; }

private:
  std::optional<T> value_;
  Status status_;
};

enum class DType { F32, F16, BF16, I32, I64 };
/// "float32", "float16", "bfloat16", "int32", "int64".
const char *dtypeName(DType dtype);
/// dtypeName's word back to a float DType; nullopt for any other word.
std::optional<DType> floatDtypeNamed(const std::string &name);
/// Bytes of one element: 4, 2 or 8.
size_t dtypeBytes(DType dtype);
/// Bytes of a contiguous tensor of `shape` (dims assumed valid).
size_t denseBytes(const std::vector<int64_t> &shape, DType dtype);

/// A user buffer: element pointer, dtype, shape and strides in elements.
/// Empty strides mean contiguous (row-major).
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

/// A dimension a kernel takes from each call (`?` in the source, "?" in
/// text): batch, querySeq and keySeq of a shape class.
inline constexpr int64_t kDynamicDim = -1;

/// A dim as text: "?" for kDynamicDim (as the source writes it).
std::string dimText(int64_t dim);

/// The shape of one attention call, or of a kernel's shape class (a dim may
/// be kDynamicDim there).
struct Shape {
  int64_t batch = 1, queryHeads = 1, kvHeads = 1;
  int64_t querySeq = 1, keySeq = 1, headDim = 64, valueDim = 64;
  bool operator==(const Shape &other) const;
  /// Whether any dim is kDynamicDim.
  bool hasDynamicDims() const;
  /// "b=1 hq=32 hkv=8 sq=? skv=? d=128 dv=128".
  std::string str() const;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_CORE_TYPES_H
