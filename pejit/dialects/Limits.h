// The bounds pejit promises to compile within (docs/limits.md lists them for
// users). Every size the compiler turns into memory or code is checked
// against one of these in a verifier, with checked arithmetic for products,
// and every f64 attribute that becomes an f32 constant against f32's range:
// beyond them a kernel would overflow, exhaust memory or compute garbage, so
// the verifier's message is the answer instead.
#ifndef PEJIT_DIALECTS_LIMITS_H
#define PEJIT_DIALECTS_LIMITS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <optional>

namespace pejit::limits {

/// Query and KV heads of an attention, and ALiBi's total num_heads (ALiBi
/// selects its slope per head in code).
constexpr int64_t kMaxHeads = 1024;
/// Head dims d and dv (the x86 tiles hold rows of d floats on the stack).
constexpr int64_t kMaxHeadDim = 1024;
/// Batch and sequence lengths: the kernels' masks compare 32-bit lanes.
constexpr int64_t kMaxLength = INT32_MAX;
/// Elements of any one tensor (2^40, 4 TiB of f32).
constexpr int64_t kMaxElements = int64_t(1) << 40;
/// Rows of an encoding's table: T5 buckets, Shaw's 2 clip + 1, a learned
/// table's positions.
constexpr int64_t kMaxTableRows = int64_t(1) << 24;
/// Position ids lie in [-2^31, 2^31) whether they come as i32 or i64.
constexpr int64_t kMaxPositionMagnitude = int64_t(1) << 31;
/// RoPE angles = position x inv_freq stay below 2^36 rad: there the
/// float64 angle itself is good to 2^-17 rad, and two computations of an
/// inverse frequency that differ in its last bit (a kernel's and the
/// reference's) move it by less than 2^-16. (The kernels' range reduction
/// holds to 2^50.) So every inverse frequency is at most 2^36 / 2^31 = 32.
constexpr double kMaxInverseFrequency = 32.0;
/// x86 kernels keep one work item's tiles on a worker's 8 MiB stack.
constexpr int64_t kMaxTileStackBytes = int64_t(4) << 20;

/// a * b, or nothing when it overflows int64.
inline std::optional<int64_t> product(int64_t a, int64_t b) { return llvm::checkedMul(a, b); }

/// Why `value`, an f64 attribute that the kernels use as an f32 constant,
/// cannot be one: not finite, or beyond f32's range; or an empty string.
/// Zero is representable; a nonzero value must be at least FLT_MIN in
/// magnitude (subnormals flush to zero in the kernels).
inline const char *f32RangeProblem(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return "not finite";
  double magnitude = std::fabs(value);
  if (magnitude > FLT_MAX)
    return "above f32's largest value 3.4028235e38";
  if (magnitude != 0.0 && magnitude < FLT_MIN)
    return "below f32's smallest normal value 1.1754944e-38";
  return "";
}

} // namespace pejit::limits

#endif // PEJIT_DIALECTS_LIMITS_H
