// Attributes of the pe dialect: one per positional encoding and one per RoPE
// frequency scaling (PEAttrs.td).
#ifndef PEJIT_DIALECTS_PE_PEATTRS_H
#define PEJIT_DIALECTS_PE_PEATTRS_H

#include "mlir/IR/DialectImplementation.h"
#include "pejit/dialects/pe/PEInterfaces.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/bit.h"
#include <optional>
#include <string>

#include "pejit/dialects/pe/PEEnums.h.inc"

namespace pejit::pe {

/// A float parameter of a pe attribute. MLIR's storage uniquer hashes the
/// parameters with llvm::hash_value, which has no overload for double; this
/// wrapper supplies one and converts implicitly to and from double.
struct F64 {
  double value = 0.0;
  F64() = default;
  F64(double v) : value(v) {}
  operator double() const { return value; }
  /// Bitwise, so that uniquing is exact (and NaN equals itself).
  bool operator==(const F64 &other) const {
    return llvm::bit_cast<uint64_t>(value) == llvm::bit_cast<uint64_t>(other.value);
  }
};
// Exact overloads, so `f == 1.0` is not ambiguous between the conversions.
inline bool operator==(F64 a, double b) { return a == F64(b); }
inline bool operator==(double a, F64 b) { return F64(a) == b; }
inline llvm::hash_code hash_value(F64 v) {
  return llvm::hash_value(llvm::bit_cast<uint64_t>(v.value));
}

// Float parameters: parsed from any float literal, printed in the shortest
// decimal form that parses back to the same double.
mlir::FailureOr<F64> parseF64(mlir::AsmParser &parser);
mlir::FailureOr<std::optional<F64>> parseOptionalF64(mlir::AsmParser &parser);
mlir::FailureOr<llvm::SmallVector<F64>> parseF64Array(mlir::AsmParser &parser);
mlir::FailureOr<llvm::SmallVector<int64_t>> parseI64Array(mlir::AsmParser &parser);
mlir::FailureOr<bool> parseBool(mlir::AsmParser &parser);
std::string formatF64(double value);
void printF64(mlir::AsmPrinter &printer, double value);
void printF64Array(mlir::AsmPrinter &printer, llvm::ArrayRef<F64> values);
} // namespace pejit::pe

#define GET_ATTRDEF_CLASSES
#include "pejit/dialects/pe/PEAttrs.h.inc"

#endif // PEJIT_DIALECTS_PE_PEATTRS_H
