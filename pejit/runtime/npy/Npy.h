//===- Npy.h - read and write NumPy .npy files (light runtime) -------------===//
//
// The light runtime's I/O for tensors: NumPy's .npy format, versions 1.0, 2.0
// and 3.0 (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
// No exceptions and no aborts: every failure is a message that names the file
// and the problem, so a CLI can print it as is.
//
// Supported element types and their descriptors:
//   float32 '<f4', float16 '<f2', int32 '<i4', int64 '<i8', and
//   bfloat16 stored as '<u2'. NumPy has no bfloat16 dtype, so a bf16 tensor is
//   written as its raw uint16 bit patterns, and every '<u2' file reads back as
//   DType::BF16. From PyTorch: t.view(torch.uint16).numpy() (or
//   t.view(torch.int16).numpy().view(np.uint16)); with ml_dtypes:
//   a.view(np.uint16).
// '=' (native) is accepted as little-endian: the runtime only targets
// little-endian hosts. Big-endian data, Fortran order and structured dtypes
// are rejected with a hint.
//
// Data is always C order, little-endian. Writing goes to a temporary file in
// the target's directory that is then renamed over the target, so an existing
// file is never left half-written. (A symlink at the target is replaced, not
// followed.)
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_NPY_NPY_H
#define PEJIT_RUNTIME_NPY_NPY_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pejit::npy {

enum class DType { F32, F16, BF16, I32, I64 };

/// "float32", "float16", "bfloat16", "int32", "int64".
const char *dtypeName(DType dtype);
/// Bytes per element: 4, 2, 2, 4, 8.
size_t elementSize(DType dtype);
/// The descriptor written to the header: "<f4", "<f2", "<u2", "<i4", "<i8".
const char *dtypeDescr(DType dtype);

/// A dense tensor as stored in a .npy file: C order, little-endian bytes.
/// shape {} is a scalar (one element).
struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  /// Product of shape (1 for a scalar). Assumes non-negative dims that do not
  /// overflow; arrays from parseNpy/readNpy always satisfy that.
  int64_t numel() const;
};

/// A value or an error message (the runtime does not use exceptions).
template <class T> struct Expected {
  std::optional<T> value;
  std::string error;

  static Expected success(T v) {
    Expected e;
    e.value = std::move(v);
    return e;
  }
  static Expected failure(std::string message) {
    Expected e;
    e.error = std::move(message);
    return e;
  }
  explicit operator bool() const { return value.has_value(); }
  /// Only valid when the Expected holds a value.
  T &operator*() { return *value; }
  const T &operator*() const { return *value; }
  T *operator->() { return &*value; }
  const T *operator->() const { return &*value; }
};

/// Python's spelling of a shape, for messages: "()", "(7,)", "(2, 3)".
std::string shapeToString(const std::vector<int64_t> &shape);

/// Reads and validates a .npy file. Messages start with "<path>: ". The
/// header is read and checked before any data, and no more data is read
/// than the header declares (a file that is not .npy, like /dev/zero, fails
/// after its first bytes).
Expected<Array> readNpy(const std::string &path);

/// Header lengths above this are refused (NumPy's own limit is 10000 by
/// default; the format allows 4 GiB).
constexpr uint64_t kMaxHeaderLength = uint64_t(1) << 20;

/// The fixed start of a .npy file: magic, version, header length.
struct NpyPreamble {
  size_t headerStart = 0;    ///< offset of the header text
  uint64_t headerLength = 0; ///< bytes of header text
};
/// Parses the preamble from the first bytes of a file (at least 12 of them
/// when the file has them).
Expected<NpyPreamble> parseNpyPreamble(const uint8_t *data, size_t size,
                                       const std::string &nameForMessages);

/// The array a header describes (shape and dtype, no bytes yet) and where
/// and how much data follows.
struct NpyHeader {
  Array array;
  size_t dataStart = 0;
  uint64_t dataBytes = 0;
};
/// Parses preamble and header; data[0, size) must hold at least the header.
Expected<NpyHeader> parseNpyHeader(const uint8_t *data, size_t size,
                                   const std::string &nameForMessages);
/// "" when `have` bytes of data are what the header needs, else the message.
std::string dataSizeProblem(const NpyHeader &header, uint64_t have);

/// Parses .npy bytes held in memory. Messages start with "<nameForMessages>: ".
Expected<Array> parseNpy(const uint8_t *data, size_t size, const std::string &nameForMessages);

/// "" when array.bytes holds exactly the bytes its shape and dtype need,
/// else what is wrong, e.g. "shape (2, 3) of float32 needs 24 bytes of data
/// but the array holds 20".
std::string validateArray(const Array &array);

/// The bytes of a .npy file for array (version 1.0 when the header fits in
/// 65535 bytes, else 2.0; data starts at a multiple of 64). Returns an empty
/// vector when validateArray(array) fails; a valid .npy file is never empty.
std::vector<uint8_t> serializeNpy(const Array &array);

/// Writes array to path atomically (temporary file + rename). Returns "" on
/// success, else a message starting with "<path>: ".
std::string writeNpy(const std::string &path, const Array &array);

// --- element conversions ---------------------------------------------------
// float -> f16/bf16 rounds to nearest, ties to even; overflow gives inf; NaN
// stays NaN (quiet). f16 subnormals are produced and read exactly.

float f16BitsToFloat(uint16_t bits);
uint16_t floatToF16Bits(float value);
float bf16BitsToFloat(uint16_t bits);
uint16_t floatToBf16Bits(float value);

/// Every element as float. Exact for F32/F16/BF16; integers round to nearest
/// float (exact up to 2^24 in magnitude).
std::vector<float> toFloat32(const Array &array);
/// Every element as int64. Exact for I32/I64; floats truncate toward zero,
/// NaN becomes 0 and out-of-range values saturate.
std::vector<int64_t> toInt64(const Array &array);

/// An array of dtype target holding values (rounded as above for F16/BF16;
/// for I32/I64 truncated toward zero, NaN -> 0, saturated). values.size()
/// should equal the product of shape; writeNpy reports a mismatch.
Array fromFloat32(const std::vector<float> &values, std::vector<int64_t> shape, DType target);
/// An array of dtype target holding values (I32 saturates; float targets go
/// through float, so they are exact up to 2^24 in magnitude).
Array fromInt64(const std::vector<int64_t> &values, std::vector<int64_t> shape, DType target);

} // namespace pejit::npy

#endif // PEJIT_RUNTIME_NPY_NPY_H
