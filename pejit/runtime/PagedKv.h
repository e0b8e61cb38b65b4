// A paged KV cache at run time (attn.paged_kv, docs/shape-classes.md): the
// page pools and the block table, checked against the kernel's class, and
// the rows a call reads gathered into pejit's layout for the kernel.
#ifndef PEJIT_RUNTIME_PAGEDKV_H
#define PEJIT_RUNTIME_PAGEDKV_H

#include "pejit/runtime/Views.h"

#include <optional>

namespace pejit {

struct PagedKv {
  const TensorView *keyPages = nullptr, *valuePages = nullptr, *blockTable = nullptr;
  int64_t numPages = 0, pageSize = 0, maxPages = 0;
  /// The logical K and V of the call, [b, hkv, max_pages * page_size, d]
  /// and [.., dv] (no data): what callShape reads.
  TensorView logicalKey, logicalValue;
};

/// Reads and checks the pools ([num_pages, page_size, hkv, d] and
/// [num_pages, page_size, hkv, dv], one dtype, one num_pages and page_size)
/// and the block table (i32 or i64 [b, max_pages]); an error names the
/// input and the dim.
Expected<PagedKv> readPagedKv(const BoundInputs &bound, const Shape &kernel, DType dtype);

/// Entries [0, ceil(keys / page_size)) of block table row `row` are in
/// [0, num_pages); an error names the row, the index and the value.
Status checkBlockTable(const PagedKv &paged, int64_t row, int64_t keys);

/// The first page of row `row`'s keys [0, keys) when its pages are
/// consecutive in pools that are dense across pages (page p + 1's first
/// row follows page p's last): then the row is a strided view of the pools
/// and needs no gather. Null otherwise (checkBlockTable first).
std::optional<int64_t> consecutiveFirstPage(const PagedKv &paged, int64_t row, int64_t keys);

/// A [1, hkv, keys, dim] view of `pages` from page `firstPage` on (its rows
/// consecutive: consecutiveFirstPage).
TensorView pagesView(const PagedKv &paged, const TensorView &pages, int64_t firstPage,
                     int64_t keys);

/// Keys [0, keys) of batch row `row`, pages [firstPage, endPage) of them:
/// copied from `pages` into `out`, a dense [hkv, keys, dim] buffer of the
/// pool's dtype (checkBlockTable first).
void gatherPages(const PagedKv &paged, const TensorView &pages, int64_t row, int64_t keys,
                 int64_t firstPage, int64_t endPage, char *out);

} // namespace pejit

#endif // PEJIT_RUNTIME_PAGEDKV_H
