// Shape checks shared by the pe and attn verifiers. Each returns failure after
// emitting a message that names the operand and the rule; dynamic dims (?)
// are never reported as mismatches, since the JIT specializes on real shapes.
#ifndef PEJIT_DIALECTS_SHAPECHECKS_H
#define PEJIT_DIALECTS_SHAPECHECKS_H

#include "pejit/dialects/Limits.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/StringRef.h"

namespace pejit {

/// True when both dims are static and differ.
inline bool dimsConflict(int64_t a, int64_t b) {
  return !mlir::ShapedType::isDynamic(a) && !mlir::ShapedType::isDynamic(b) && a != b;
}

/// Dim `index` of a ranked tensor value (verified ranked by ODS).
inline int64_t dim(mlir::Value value, unsigned index) {
  return mlir::cast<mlir::RankedTensorType>(value.getType()).getDimSize(index);
}

/// Prints a dim for a message: "?" for dynamic.
inline std::string dimToString(int64_t dim) {
  return mlir::ShapedType::isDynamic(dim) ? std::string("?") : std::to_string(dim);
}

/// `name` must be a ranked tensor of rank `rank`; `layout` (e.g. "[b, h, s, d]")
/// is quoted in the message.
inline mlir::LogicalResult requireRank(mlir::Operation *op, llvm::StringRef name, mlir::Type type,
                                       int64_t rank, llvm::StringRef layout) {
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || tensor.getRank() != rank)
    return op->emitOpError() << name << " must be " << layout << " (rank " << rank << "), got "
                             << type;
  return mlir::success();
}

/// Dim `index` of `name` (called `dimName`) must equal `expected`, which is
/// `what` (e.g. "the input's s").
inline mlir::LogicalResult requireDim(mlir::Operation *op, llvm::StringRef name, mlir::Type type,
                                      unsigned index, llvm::StringRef dimName, int64_t expected,
                                      llvm::StringRef what) {
  int64_t actual = mlir::cast<mlir::RankedTensorType>(type).getDimSize(index);
  if (dimsConflict(actual, expected))
    return op->emitOpError() << name << " " << dimName << " (dim " << index << ") is " << actual
                             << " but " << what << " is " << expected;
  return mlir::success();
}

/// One dim's name and the largest size pejit compiles (pejit/dialects/Limits.h).
struct DimLimit {
  llvm::StringRef name;
  int64_t max;
};

/// Every static dim of `name` (a ranked tensor with one DimLimit per dim) is
/// at least 1 and at most its limit, and the element count (a checked
/// product) at most limits::kMaxElements. Zero-size tensors are rejected
/// here, at spec time, rather than compiled into kernels that do nothing.
inline mlir::LogicalResult requireSizesWithinLimits(mlir::Operation *op, llvm::StringRef name,
                                                    mlir::Type type,
                                                    llvm::ArrayRef<DimLimit> dimLimits) {
  auto tensor = mlir::cast<mlir::RankedTensorType>(type);
  int64_t elements = 1;
  for (auto [index, size] : llvm::enumerate(tensor.getShape())) {
    if (mlir::ShapedType::isDynamic(size))
      continue;
    DimLimit limit = index < dimLimits.size() ? dimLimits[index] : DimLimit{"", limits::kMaxLength};
    std::string label = name.str() + (limit.name.empty() ? "" : " " + limit.name.str()) + " (dim " +
                        std::to_string(index) + ")";
    if (size < 1)
      return op->emitOpError() << label << " is " << size << ": every dimension must be at least 1";
    if (size > limit.max)
      return op->emitOpError() << label << " is " << size << ", beyond pejit's limit of "
                               << limit.max;
    std::optional<int64_t> grown = limits::product(elements, size);
    if (!grown || *grown > limits::kMaxElements)
      return op->emitOpError() << name << " " << type << " has more than 2^40 elements, "
                               << "beyond pejit's limit for one tensor";
    elements = *grown;
  }
  return mlir::success();
}

/// Position ids: element type i32 or i64; shape [s] or [b, s], or with
/// `numAxes` > 0 (M-RoPE) [numAxes, s] or [numAxes, b, s].
inline mlir::LogicalResult verifyPositionIds(mlir::Operation *op, llvm::StringRef name,
                                             mlir::Type type, int64_t batch, int64_t seq,
                                             int64_t numAxes = 0) {
  auto tensor = mlir::cast<mlir::RankedTensorType>(type);
  if (!tensor.getElementType().isSignlessInteger(32) &&
      !tensor.getElementType().isSignlessInteger(64))
    return op->emitOpError() << name << " must have element type i32 or i64, got "
                             << tensor.getElementType();
  int64_t lead = numAxes > 0 ? 1 : 0;
  int64_t rank = tensor.getRank();
  if (rank != 1 + lead && rank != 2 + lead)
    return op->emitOpError() << name << " must be "
                             << (numAxes > 0 ? "[axes, s] or [axes, b, s]" : "[s] or [b, s]")
                             << " (rank " << 1 + lead << " or " << 2 + lead << "), got " << type;
  if (numAxes > 0 && dimsConflict(tensor.getDimSize(0), numAxes))
    return op->emitOpError() << name << " has " << tensor.getDimSize(0)
                             << " axes (dim 0) but the encoding reads " << numAxes
                             << " (its sections, or 2 for axial RoPE)";
  if (failed(requireDim(op, name, type, rank - 1, "s", seq, "the sequence length")))
    return mlir::failure();
  if (rank == 2 + lead && failed(requireDim(op, name, type, lead, "b", batch, "the batch size")))
    return mlir::failure();
  return mlir::success();
}

} // namespace pejit

#endif // PEJIT_DIALECTS_SHAPECHECKS_H
