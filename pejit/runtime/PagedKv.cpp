// The paged KV cache's checks and gather (PagedKv.h).
#include "pejit/runtime/PagedKv.h"

#include <algorithm>
#include <cstring>

namespace pejit {

namespace {

int64_t tableEntry(const PagedKv &paged, int64_t row, int64_t index) {
  const TensorView &table = *paged.blockTable;
  std::vector<int64_t> strides = stridesOf(table);
  int64_t at = row * strides[0] + index * strides[1];
  return table.dtype == DType::I64 ? static_cast<const int64_t *>(table.data)[at]
                                   : static_cast<const int32_t *>(table.data)[at];
}

} // namespace

Expected<PagedKv> readPagedKv(const BoundInputs &bound, const Shape &kernel, DType dtype) {
  PagedKv paged;
  paged.keyPages = bound.keyPages;
  paged.valuePages = bound.valuePages;
  paged.blockTable = bound.blockTable;
  if (!paged.keyPages || !paged.valuePages || !paged.blockTable)
    return Status::error("the kernel reads a paged KV cache: give key_pages, value_pages and "
                         "block_table");
  const TensorView &keys = *paged.keyPages;
  if (keys.shape.size() != 4)
    return Status::error("key_pages: shape " + dimsText(keys.shape) +
                         " is not [num_pages, page_size, hkv, d]");
  paged.numPages = keys.shape[0];
  paged.pageSize = keys.shape[1];
  if (paged.numPages < 1 || paged.pageSize < 1)
    return Status::error("key_pages: shape " + dimsText(keys.shape) +
                         " has no page (num_pages and page_size must be at least 1)");
  if (Status st =
          checkView(keys, "key_pages",
                    {paged.numPages, paged.pageSize, kernel.kvHeads, kernel.headDim}, {dtype});
      !st)
    return st;
  if (Status st =
          checkView(*paged.valuePages, "value_pages",
                    {paged.numPages, paged.pageSize, kernel.kvHeads, kernel.valueDim}, {dtype});
      !st)
    return st;
  const TensorView &table = *paged.blockTable;
  if (table.shape.size() != 2)
    return Status::error("block_table: shape " + dimsText(table.shape) + " is not [b, max_pages]");
  paged.maxPages = table.shape[1];
  if (Status st = checkView(table, "block_table", table.shape, {DType::I32, DType::I64}); !st)
    return st;
  paged.logicalKey = {
      nullptr,
      dtype,
      {table.shape[0], kernel.kvHeads, paged.maxPages * paged.pageSize, kernel.headDim},
      {}};
  paged.logicalValue = paged.logicalKey;
  paged.logicalValue.shape[3] = kernel.valueDim;
  return paged;
}

Status checkBlockTable(const PagedKv &paged, int64_t row, int64_t keys) {
  int64_t pages = (keys + paged.pageSize - 1) / paged.pageSize;
  for (int64_t i = 0; i < pages; ++i) {
    int64_t page = tableEntry(paged, row, i);
    if (page < 0 || page >= paged.numPages)
      return Status::error("block_table: entry [" + std::to_string(row) + ", " + std::to_string(i) +
                           "] is " + std::to_string(page) +
                           ", outside [0, num_pages = " + std::to_string(paged.numPages) +
                           ") (row " + std::to_string(row) + " reads " + std::to_string(keys) +
                           " keys: its first " + std::to_string(pages) + " entries)");
  }
  return Status();
}

std::optional<int64_t> consecutiveFirstPage(const PagedKv &paged, int64_t row, int64_t keys) {
  for (const TensorView *pool : {paged.keyPages, paged.valuePages}) {
    std::vector<int64_t> strides = stridesOf(*pool);
    if (strides[0] != paged.pageSize * strides[1])
      return std::nullopt;
  }
  int64_t pages = (keys + paged.pageSize - 1) / paged.pageSize;
  int64_t first = tableEntry(paged, row, 0);
  for (int64_t i = 1; i < pages; ++i)
    if (tableEntry(paged, row, i) != first + i)
      return std::nullopt;
  return first;
}

TensorView pagesView(const PagedKv &paged, const TensorView &pages, int64_t firstPage,
                     int64_t keys) {
  std::vector<int64_t> strides = stridesOf(pages);
  TensorView view;
  view.data = static_cast<char *>(pages.data) + firstPage * strides[0] * dtypeBytes(pages.dtype);
  view.dtype = pages.dtype;
  view.shape = {1, pages.shape[2], keys, pages.shape[3]};
  view.strides = {paged.pageSize * strides[0], strides[2], strides[1], strides[3]};
  return view;
}

void gatherPages(const PagedKv &paged, const TensorView &pages, int64_t row, int64_t keys,
                 int64_t firstPage, int64_t endPage, char *out) {
  std::vector<int64_t> strides = stridesOf(pages);
  int64_t heads = pages.shape[2], dim = pages.shape[3];
  size_t bytes = dtypeBytes(pages.dtype), rowBytes = dim * bytes;
  const char *base = static_cast<const char *>(pages.data);
  for (int64_t i = firstPage; i < endPage; ++i) {
    int64_t page = tableEntry(paged, row, i);
    int64_t first = i * paged.pageSize, count = std::min(paged.pageSize, keys - first);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < count; ++r)
        std::memcpy(out + ((h * keys + first + r) * dim) * bytes,
                    base + (page * strides[0] + r * strides[1] + h * strides[2]) * bytes, rowBytes);
  }
}

} // namespace pejit
