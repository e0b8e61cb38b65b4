// The float64 interpreter over a packed batch: one evaluation per sequence
// (PackedBatch.h).
#include "pejit/interpreter/PackedBatch.h"

#include <algorithm>

namespace pejit {

namespace {

/// Which offsets slice an argument.
enum class Side { None, Query, Key, Both, Row };

/// The side of one role of ArgumentInfo::role ("query", "key and value").
Side sideOf(const std::string &roles) {
  Side side = Side::None;
  auto add = [&](Side s) { side = side == Side::None || side == s ? s : Side::Both; };
  // Roles are joined by " and ".
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = roles.find(" and ", start);
    parts.push_back(roles.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos)
      break;
    start = at + 5;
  }
  for (const std::string &part : parts) {
    if (part == "query" || part == "query_positions")
      add(Side::Query);
    else if (part == "key" || part == "value" || part == "key_positions")
      add(Side::Key);
    else if (part == "positions")
      add(Side::Both);
    else if (part == "block_table")
      add(Side::Row);
  }
  return side;
}

/// Reads and checks one offsets argument against the packed length.
Expected<std::vector<int64_t>> readOffsets(const ArgumentInfo &info, size_t index,
                                           const ReferenceArgument &argument, int64_t total) {
  using Result = Expected<std::vector<int64_t>>;
  std::string what = "argument " + std::to_string(index) + " (" + info.role + ")";
  const auto *ids = std::get_if<ref::PositionIds>(&argument);
  if (!ids || ids->shape.size() != 1 || ids->shape[0] < 2)
    return Result::error(what + " must be i32 [n + 1] offsets with n >= 1 sequences");
  const std::vector<int64_t> &offsets = ids->data;
  if (offsets[0] != 0)
    return Result::error(what + ": entry 0 is " + std::to_string(offsets[0]) +
                         "; the offsets start at 0");
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      return Result::error(what + ": entry " + std::to_string(i) + " (" +
                           std::to_string(offsets[i]) + ") is less than entry " +
                           std::to_string(i - 1) + " (" + std::to_string(offsets[i - 1]) +
                           "): the offsets must be non-decreasing");
  if (offsets.back() != total)
    return Result::error(what + ": the last entry (" + std::to_string(offsets.back()) + ", index " +
                         std::to_string(offsets.size() - 1) + ") must equal the packed length " +
                         std::to_string(total));
  return offsets;
}

/// Rows [first, first + count) of dim 2 of a rank-4 tensor, of batch row
/// `row` (-1: every row).
ref::Tensor rows(const ref::Tensor &t, int64_t row, int64_t first, int64_t count) {
  int64_t n0 = row < 0 ? 0 : row, nb = row < 0 ? t.dim(0) : 1;
  ref::Tensor part({nb, t.dim(1), count, t.dim(3)});
  for (int64_t n = 0; n < nb; ++n)
    for (int64_t h = 0; h < t.dim(1); ++h)
      for (int64_t i = 0; i < count; ++i)
        for (int64_t c = 0; c < t.dim(3); ++c)
          part.at(n, h, i, c) = t.at(n0 + n, h, first + i, c);
  return part;
}

/// One evaluation: batch row `row` (-1: all), query rows [q0, q0 + nq),
/// key rows [k0, k0 + nk).
struct SubCall {
  int64_t row, q0, nq, k0, nk;
};

/// Entries [first, first + count) of the last dim of position ids.
ref::PositionIds entries(const ref::PositionIds &ids, int64_t first, int64_t count) {
  int64_t s = ids.shape.back(), lead = ids.data.size() / std::max<int64_t>(s, 1);
  std::vector<int64_t> shape = ids.shape, data;
  shape.back() = count;
  for (int64_t r = 0; r < lead; ++r)
    data.insert(data.end(), ids.data.begin() + r * s + first,
                ids.data.begin() + r * s + first + count);
  return ref::PositionIds(shape, data);
}

/// Row `row` of a [b, m] table (-1: all of it).
ref::PositionIds tableRow(const ref::PositionIds &table, int64_t row) {
  if (row < 0 || table.shape.size() != 2)
    return table;
  int64_t m = table.shape[1];
  return ref::PositionIds({1, m}, std::vector<int64_t>(table.data.begin() + row * m,
                                                       table.data.begin() + (row + 1) * m));
}

} // namespace

bool gatherPagedKv(const ref::Tensor &pages, const ref::PositionIds &table, int64_t keys,
                   int64_t rowBase, ref::Tensor &out, std::string &problem) {
  int64_t numPages = pages.dim(0), pageSize = pages.dim(1), heads = pages.dim(2),
          dim = pages.dim(3);
  int64_t batch = table.shape[0], maxPages = table.shape[1];
  int64_t rows = keys >= 0 ? keys : maxPages * pageSize;
  if (rows > maxPages * pageSize) {
    problem = "row " + std::to_string(rowBase) + " reads " + std::to_string(rows) +
              " keys but its block table holds " + std::to_string(maxPages) + " pages of " +
              std::to_string(pageSize);
    return false;
  }
  out = ref::Tensor({batch, heads, rows, dim});
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t j = 0; j < rows; ++j) {
      int64_t page = table.data[n * maxPages + j / pageSize];
      if (page < 0 || page >= numPages) {
        problem = "block_table entry [" + std::to_string(rowBase + n) + ", " +
                  std::to_string(j / pageSize) + "] is " + std::to_string(page) +
                  ", outside [0, num_pages = " + std::to_string(numPages) + ")";
        return false;
      }
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t c = 0; c < dim; ++c)
          out.at(n, h, j, c) = pages.at(page, j % pageSize, h, c);
    }
  return true;
}

bool isPackedBatch(const FunctionSignature &sig) {
  return std::any_of(sig.arguments.begin(), sig.arguments.end(), [](const ArgumentInfo &info) {
    return info.role == "query_segments" || info.role == "key_lengths";
  });
}

Expected<ref::Tensor> interpretPackedBatch(
    const FunctionSignature &sig, const std::vector<ReferenceArgument> &arguments,
    const std::function<Expected<ref::Tensor>(const std::vector<ReferenceArgument> &,
                                              const PackedCall &)> &evaluate) {
  using Result = Expected<ref::Tensor>;
  // The packed lengths, from the query and key arguments.
  int64_t totalQuery = -1, totalKey = -1;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (const auto *t = std::get_if<ref::Tensor>(&arguments[i]); t && t->rank() == 4) {
      Side side = sideOf(sig.arguments[i].role);
      if (side == Side::Query)
        totalQuery = t->dim(2);
      if (side == Side::Key)
        totalKey = t->dim(2);
    }
  // A paged K: its length is the block table's pages.
  int64_t pageSize = -1, maxPages = -1;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (const auto *t = std::get_if<ref::Tensor>(&arguments[i]);
        t && t->rank() == 4 && sig.arguments[i].role == "key_pages")
      pageSize = t->dim(1);
    if (const auto *ids = std::get_if<ref::PositionIds>(&arguments[i]);
        ids && ids->rank() == 2 && sig.arguments[i].role == "block_table")
      maxPages = ids->shape[1];
  }
  if (totalKey < 0 && pageSize > 0 && maxPages >= 0)
    totalKey = pageSize * maxPages;
  if (totalQuery < 0 || totalKey < 0)
    return Result::error("a packed batch needs its query and key as arguments of @" + sig.name);
  int64_t batch = 1;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (const auto *t = std::get_if<ref::Tensor>(&arguments[i]);
        t && t->rank() == 4 && sideOf(sig.arguments[i].role) == Side::Query)
      batch = t->dim(0);
  std::vector<int64_t> query, key, lengths;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentInfo &info = sig.arguments[i];
    if (info.role == "key_lengths") {
      const auto *ids = std::get_if<ref::PositionIds>(&arguments[i]);
      std::string what = "argument " + std::to_string(i) + " (key_lengths)";
      if (!ids || ids->shape != std::vector<int64_t>{batch})
        return Result::error(what + " must be [b] = [" + std::to_string(batch) + "]");
      for (size_t n = 0; n < ids->data.size(); ++n)
        if (ids->data[n] < 0 || ids->data[n] > totalKey)
          return Result::error(what + ": entry " + std::to_string(n) + " is " +
                               std::to_string(ids->data[n]) +
                               ", outside [0, skv = " + std::to_string(totalKey) + "]");
      lengths = ids->data;
    }
    if (info.role != "query_segments" && info.role != "key_segments")
      continue;
    bool isQuery = info.role == "query_segments";
    Expected<std::vector<int64_t>> offsets =
        readOffsets(info, i, arguments[i], isQuery ? totalQuery : totalKey);
    if (!offsets)
      return Result::error(offsets.error());
    (isQuery ? query : key) = *offsets;
  }
  std::vector<SubCall> calls;
  if (!lengths.empty()) {
    for (int64_t n = 0; n < batch; ++n)
      calls.push_back({n, 0, totalQuery, 0, lengths[n]});
  } else {
    if (query.empty() || key.empty())
      return Result::error("@" + sig.name +
                           " takes a packed batch: give query_segments and "
                           "key_segments");
    if (query.size() != key.size())
      return Result::error("query_segments has " + std::to_string(query.size()) +
                           " entries but key_segments " + std::to_string(key.size()) +
                           ": both are n + 1 for n sequences");
    for (size_t n = 0; n + 1 < query.size(); ++n)
      calls.push_back({-1, query[n], query[n + 1] - query[n], key[n], key[n + 1] - key[n]});
  }
  bool sameRanges = std::all_of(calls.begin(), calls.end(),
                                [](const SubCall &c) { return c.q0 == c.k0 && c.nq == c.nk; });
  for (size_t i = 0; i < arguments.size(); ++i) {
    const ArgumentInfo &info = sig.arguments[i];
    Side side = sideOf(info.role);
    bool dynamic = std::count(info.shape.begin(), info.shape.end(), -1) > 0;
    std::string what = "argument " + std::to_string(i) + " (" + info.role + ")";
    if (side == Side::Both && !sameRanges)
      return Result::error(what + " serves queries and keys, so each sequence's query and key "
                                  "rows must be the same");
    bool offsets = info.role == "query_segments" || info.role == "key_segments" ||
                   info.role == "key_lengths" || info.role == "key_pages" ||
                   info.role == "value_pages";
    if (side == Side::None && !offsets && (dynamic || (!lengths.empty() && info.shape.size() == 4)))
      return Result::error(what + ", " + info.type +
                           ", has `?` dims or a batch row, which segments and key_lengths "
                           "cannot slice per sequence");
    if (!lengths.empty() && side != Side::None && side != Side::Row && info.isInteger &&
        info.shape.size() != 1)
      return Result::error(what + ": with key_lengths, position ids are [s], shared by the batch");
  }
  ref::Tensor packed;
  std::vector<int64_t> resultShape = sig.resultShape;
  resultShape[0] = batch;
  resultShape[2] = totalQuery;
  for (size_t n = 0; n < calls.size(); ++n) {
    const SubCall &call = calls[n];
    std::vector<ReferenceArgument> part;
    for (size_t i = 0; i < arguments.size(); ++i) {
      Side side = sideOf(sig.arguments[i].role);
      int64_t first = side == Side::Key ? call.k0 : call.q0,
              count = side == Side::Key ? call.nk : call.nq;
      if (side == Side::None)
        part.push_back(arguments[i]);
      else if (side == Side::Row) // a block table: the row's pages
        part.push_back(tableRow(std::get<ref::PositionIds>(arguments[i]), call.row));
      else if (const auto *t = std::get_if<ref::Tensor>(&arguments[i]))
        part.push_back(rows(*t, call.row, first, count));
      else
        part.push_back(entries(std::get<ref::PositionIds>(arguments[i]), first, count));
    }
    ref::Tensor out;
    if (call.nq > 0 && call.nk > 0) {
      Result result = evaluate(part, PackedCall{call.row, call.nk});
      if (!result)
        return Result::error((call.row < 0 ? "sequence " : "batch row ") +
                             std::to_string(call.row < 0 ? static_cast<int64_t>(n) : call.row) +
                             ": " + result.error());
      out = std::move(*result);
    }
    if (packed.shape.empty() && !out.shape.empty()) {
      resultShape[1] = out.dim(1);
      resultShape[3] = out.dim(3);
      packed = ref::Tensor(resultShape);
    }
    if (!out.shape.empty())
      for (int64_t b = 0; b < out.dim(0); ++b)
        for (int64_t h = 0; h < out.dim(1); ++h)
          for (int64_t i = 0; i < call.nq; ++i)
            for (int64_t c = 0; c < out.dim(3); ++c)
              packed.at({call.row < 0 ? b : call.row, h, call.q0 + i, c}) = out.at(b, h, i, c);
  }
  if (packed.shape.empty()) // no sequence had both queries and keys
    packed = ref::Tensor(resultShape);
  return packed;
}

} // namespace pejit
