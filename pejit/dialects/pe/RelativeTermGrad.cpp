// The verifier of pe.relative_term_grad (RelativeTermGrad.td): a Shaw
// term's gradients, shaped by the encoding's own rules (its bucket count
// and table check), never by its concrete type.
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/pe/PEOps.h"

using namespace mlir;
using namespace pejit;
using namespace pejit::pe;

LogicalResult RelativeTermGradOp::verify() {
  auto encoding = dyn_cast<PositionalEncodingAttrInterface>(getEncoding());
  bool keyTerm = encoding && encoding.isKeyTerm() && encoding.getKeyTermBuckets() > 0;
  bool valueTerm = encoding && encoding.getValueTermBuckets() > 0;
  if (!keyTerm && !valueTerm)
    return emitOpError() << "encoding " << getEncoding()
                         << " is not a Shaw term (#pe.relative_key or #pe.relative_value)";
  if (encoding.readsPositions())
    return emitOpError() << "encoding " << getEncoding()
                         << ": the materialized term's backward measures distance by index";
  auto tableType = cast<RankedTensorType>(getTable().getType());
  AttentionShape sizes;
  const DimLimit limits[] = {{"b", limits::kMaxLength},
                             {"h", limits::kMaxHeads},
                             {"sq", limits::kMaxLength},
                             {"skv", limits::kMaxLength}};
  SmallVector<Type> expected;
  if (keyTerm) {
    if (!getQuery())
      return emitOpError() << "the key term's backward takes query(...): dq needs q";
    if (failed(requireRank(getOperation(), "term_grad", getTermGrad().getType(), 4,
                           "[b, h, sq, skv]")) ||
        failed(requireSizesWithinLimits(getOperation(), "term_grad", getTermGrad().getType(),
                                        limits)) ||
        failed(requireRank(getOperation(), "query", getQuery().getType(), 4, "[b, h, sq, d]")))
      return failure();
    for (unsigned d = 0; d < 3; ++d)
      if (failed(requireDim(getOperation(), "query", getQuery().getType(), d,
                            d == 0   ? "b"
                            : d == 1 ? "h"
                                     : "sq",
                            dim(getTermGrad(), d), "term_grad's")))
        return failure();
    sizes.batch = dim(getQuery(), 0);
    sizes.queryHeads = dim(getQuery(), 1);
    sizes.headDim = dim(getQuery(), 3);
    expected.push_back(getQuery().getType());
  } else {
    if (getQuery())
      return emitOpError() << "the value term's backward takes no query(...)";
    auto termType = cast<RankedTensorType>(getTermGrad().getType());
    if (termType.getRank() != 3 && termType.getRank() != 4)
      return emitOpError() << "term_grad must be [sq, skv, dv] (a shared table) or [h, sq, skv, "
                              "dv] (per head), got "
                           << termType;
    bool perHead = termType.getRank() == 4;
    sizes.queryHeads = perHead ? termType.getDimSize(0) : ShapedType::kDynamic;
    sizes.valueDim = termType.getDimSize(termType.getRank() - 1);
    if (perHead != (tableType.getRank() == 3))
      return emitOpError() << "term_grad " << termType << " and table " << tableType
                           << " disagree: a per-head table [h, 2k+1, dv] gives [h, sq, skv, dv]";
  }
  if (failed(encoding.verifyEncodingOperand(0, tableType, sizes, [&]() {
        return emitOpError() << "table (" << encoding.getEncodingOperandName(0) << "): ";
      })))
    return failure();
  expected.push_back(RankedTensorType::get(tableType.getShape(), Float32Type::get(getContext())));
  if (TypeRange(getResults().getTypes()) != TypeRange(expected)) {
    InFlightDiagnostic diag = emitOpError() << "results must be ";
    llvm::interleaveComma(expected, diag);
    return diag << (keyTerm ? " (dq in q's type, the table's gradient in f32)"
                            : " (the table's gradient in f32)");
  }
  return success();
}
