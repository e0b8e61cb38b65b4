//===- Tensor.h - float64 tensors and position ids for the reference -------===//
//
// The float64 reference is the test oracle for every pejit kernel. It favours
// obviously-correct loops over speed. Preconditions are programmer errors: they
// are checked, reported with the argument's name, and abort (no exceptions).
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_REFERENCE_TENSOR_H
#define PEJIT_RUNTIME_REFERENCE_TENSOR_H

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace pejit::ref {

/// Prints "pejit reference: <where>: <message>" to stderr and aborts.
[[noreturn]] void fail(const char *where, const std::string &message);

/// Checks a precondition; on failure names the function and the broken rule.
#define PEJIT_REF_CHECK(cond, message)                                                             \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::pejit::ref::fail(__func__, (message));                                                     \
  } while (false)

/// "[2, 3, 4]" for messages.
std::string shapeToString(const std::vector<int64_t> &shape);

/// Row-major float64 tensor.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  Tensor() = default;
  /// Zero-filled tensor of the given shape (every dimension must be >= 0).
  explicit Tensor(std::vector<int64_t> shape);
  /// Tensor with given contents; data.size() must equal the product of shape.
  Tensor(std::vector<int64_t> shape, std::vector<double> data);

  /// The error of an index offset() refuses: its rank or the first axis
  /// it is out of range on (never returns).
  [[noreturn]] void failOffset(std::initializer_list<int64_t> index) const;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t dim(int64_t axis) const;
  int64_t numel() const { return static_cast<int64_t>(data.size()); }

  /// Flat row-major offset of a full index (rank and bounds checked).
  /// Inline: the reference's inner loops call it per element (out of line
  /// it was half of a long reference's time).
  int64_t offset(std::initializer_list<int64_t> index) const {
    if (static_cast<int64_t>(index.size()) != rank())
      failOffset(index);
    int64_t flat = 0;
    const int64_t *extent = shape.data();
    for (int64_t i : index) {
      if (i < 0 || i >= *extent)
        failOffset(index);
      flat = flat * *extent++ + i;
    }
    return flat;
  }

  double &at(std::initializer_list<int64_t> index) { return data[offset(index)]; }
  double at(std::initializer_list<int64_t> index) const { return data[offset(index)]; }
  double &at(int64_t i, int64_t j) { return at({i, j}); }
  double at(int64_t i, int64_t j) const { return at({i, j}); }
  double &at(int64_t i, int64_t j, int64_t k) { return at({i, j, k}); }
  double at(int64_t i, int64_t j, int64_t k) const { return at({i, j, k}); }
  double &at(int64_t i, int64_t j, int64_t k, int64_t l) { return at({i, j, k, l}); }
  double at(int64_t i, int64_t j, int64_t k, int64_t l) const { return at({i, j, k, l}); }
};

/// Integer position ids. Plain (1-D encodings): shape [s] shared by the batch,
/// or [b, s] per batch row (like HF's position_ids). Sectioned (M-RoPE): one
/// plain set per axis, shape [A, s] or [A, b, s]. Whether a rank-2 tensor is
/// [b, s] or [A, s] is decided by the caller (the encoding knows).
struct PositionIds {
  std::vector<int64_t> shape;
  std::vector<int64_t> data;

  PositionIds() = default;
  PositionIds(std::vector<int64_t> shape, std::vector<int64_t> data);

  /// [s] positions shared by every batch row.
  static PositionIds shared(std::vector<int64_t> positions);

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Sequence length s (the last dimension).
  int64_t length() const;
  /// Batch rows held: 1 for the shared forms, else b.
  int64_t batchRows(bool sectioned) const;

  /// Plain ids: position of token `index` in batch row `batch`; [s] ignores
  /// the batch.
  int64_t get(int64_t batch, int64_t index) const;
  /// Sectioned ids ([A, s] or [A, b, s]): position along `axis`.
  int64_t get(int64_t axis, int64_t batch, int64_t index) const;
};

/// Default key positions 0 .. skv-1 (docs/semantics.md, Position ids).
PositionIds defaultKeyPositions(int64_t skv);
/// Default query positions (skv - sq) .. skv-1: bottom-right aligned, so a
/// decode step with sq = 1 gets position skv - 1 (docs/semantics.md, Position ids).
PositionIds defaultQueryPositions(int64_t sq, int64_t skv);

} // namespace pejit::ref

#endif // PEJIT_RUNTIME_REFERENCE_TENSOR_H
