// Verifier of attn.paged_kv: the page pool, the block table and the logical
// result they make agree dim by dim.
#include "pejit/dialects/ShapeChecks.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEOps.h"

using namespace mlir;
using namespace pejit;
using namespace pejit::attn;

namespace {

int64_t dimOf(Value value, unsigned index) {
  return cast<RankedTensorType>(value.getType()).getDimSize(index);
}

} // namespace

LogicalResult PagedKvOp::verify() {
  Operation *op = getOperation();
  Value pages = getPages(), table = getBlockTable(), result = getResult();
  if (failed(requireRank(op, "pages", pages.getType(), 4, "[num_pages, page_size, h, d]")) ||
      failed(requireRank(op, "result", result.getType(), 4, "[b, h, max_pages * page_size, d]")))
    return failure();
  auto pagesType = cast<RankedTensorType>(pages.getType());
  auto resultType = cast<RankedTensorType>(result.getType());
  if (pagesType.getElementType() != resultType.getElementType())
    return emitOpError() << "result element type " << resultType.getElementType()
                         << " differs from the pages' " << pagesType.getElementType();
  int64_t pageSize = dimOf(pages, 1);
  if (!ShapedType::isDynamic(pageSize) && pageSize < 1)
    return emitOpError() << "page_size (pages dim 1) must be at least 1, got " << pageSize;
  if (failed(requireDim(op, "result", result.getType(), 0, "b", dimOf(table, 0),
                        "the block table's rows")) ||
      failed(requireDim(op, "result", result.getType(), 1, "h", dimOf(pages, 2),
                        "the pages' heads (dim 2)")) ||
      failed(requireDim(op, "result", result.getType(), 3, "d", dimOf(pages, 3),
                        "the pages' d (dim 3)")))
    return failure();
  int64_t maxPages = dimOf(table, 1);
  int64_t rows = ShapedType::isDynamic(maxPages) || ShapedType::isDynamic(pageSize)
                     ? ShapedType::kDynamic
                     : maxPages * pageSize;
  if (!ShapedType::isDynamic(rows) && !ShapedType::isDynamic(dimOf(result, 2)) &&
      rows != dimOf(result, 2))
    return emitOpError() << "result dim 2 must be max_pages * page_size ("
                         << (ShapedType::isDynamic(rows) ? std::string("?") : std::to_string(rows))
                         << "), got " << resultType;
  for (OpOperand &use : result.getUses()) {
    // Directly, or through a QK transform (RoPE at read time) that fuses.
    Value read = result;
    Operation *user = use.getOwner();
    if (auto transform = dyn_cast<pe::PositionalEncodingOpInterface>(user);
        transform && transform.getTransformedInput() == result && user->hasOneUse()) {
      read = user->getResult(0);
      user = *user->getUsers().begin();
    }
    auto attention = dyn_cast<AttentionOp>(user);
    if (!attention || (attention.getKey() != read && attention.getValue() != read))
      return emitOpError() << "feeds '" << use.getOwner()->getName()
                           << "': a paged K or V is read only as attn.attention's key or value "
                              "(or rotated on the way, by a QK transform that fuses)";
    if (attention.getQuerySegments())
      return emitOpError() << "feeds an attention with segments: a packed batch over a paged "
                              "cache is not supported yet (key_lengths is)";
  }
  return success();
}
