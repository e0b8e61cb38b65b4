// Checking user buffers against a kernel's shapes, and the position tables
// kernels take: shared by the x86 and nvidia runs.
#include "pejit/runtime/Views.h"

#include "pejit/dialects/Limits.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pejit {

std::string dimsText(const std::vector<int64_t> &shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << dimText(shape[i]);
  out << "]";
  return out.str();
}

std::vector<int64_t> stridesOf(const TensorView &view) {
  if (!view.strides.empty())
    return view.strides;
  std::vector<int64_t> strides(view.shape.size(), 1);
  for (int i = static_cast<int>(view.shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * view.shape[i + 1];
  return strides;
}

TensorView lseAsRows(const TensorView &lse) {
  std::vector<int64_t> strides = stridesOf(lse);
  return {lse.data,
          DType::F32,
          {lse.shape[0], lse.shape[1], lse.shape[2], 1},
          {strides[0], strides[1], strides[2], 1}};
}

bool isDenseRowMajor(const TensorView &view) {
  std::vector<int64_t> strides = stridesOf(view);
  if (strides.size() != view.shape.size())
    return false;
  int64_t inner = 1;
  for (int i = static_cast<int>(view.shape.size()) - 1; i >= 0; --i) {
    if (view.shape[i] != 1 && strides[i] != inner)
      return false;
    inner *= view.shape[i];
  }
  return true;
}

/// Checks a view's pointer, dtype, shape and strides; `what` names it.
Status checkView(const TensorView &view, const std::string &what,
                 const std::vector<int64_t> &expected, std::vector<DType> dtypes) {
  if (!view.data)
    return Status::error(what + ": data pointer is null");
  bool dtypeOk = false;
  for (DType d : dtypes)
    dtypeOk |= view.dtype == d;
  if (!dtypeOk)
    return Status::error(what + ": dtype " + dtypeName(view.dtype) +
                         " is not supported here (expected " + dtypeName(dtypes[0]) +
                         (dtypes.size() > 1 ? std::string(" or ") + dtypeName(dtypes[1]) : "") +
                         ")");
  if (view.shape != expected)
    return Status::error(what + ": shape " + dimsText(view.shape) +
                         " does not match the kernel's " + dimsText(expected));
  if (!view.strides.empty() && view.strides.size() != view.shape.size())
    return Status::error(what + ": " + std::to_string(view.strides.size()) +
                         " strides for a rank-" + std::to_string(view.shape.size()) + " shape");
  std::vector<int64_t> strides = stridesOf(view);
  if (!strides.empty() && strides.back() != 1)
    return Status::error(what + ": the last dimension must be contiguous (stride 1), got " +
                         std::to_string(strides.back()));
  for (int64_t stride : strides)
    if (stride < 0)
      return Status::error(what + ": negative strides are not supported");
  return Status();
}

TensorView withOneHead(const TensorView &view) {
  if (view.shape.size() != 3)
    return view;
  std::vector<int64_t> strides = stridesOf(view);
  if (strides.size() != 3)
    return view;
  return {view.data,
          view.dtype,
          {view.shape[0], 1, view.shape[1], view.shape[2]},
          {strides[0], strides[0], strides[1], strides[2]}};
}

Expected<Shape> callShape(const Shape &kernel, const TensorView &query, const TensorView &key) {
  Shape call = kernel;
  // A `?` dim is the call's: Q's dims 0 and 2 for b and sq, K's dim 2 for
  // skv. A view of another rank keeps `?`, and the shape check names it.
  auto take = [](int64_t &dim, const TensorView &view, int axis, const std::string &what,
                 const char *name) -> Status {
    if (dim != kDynamicDim || view.shape.size() != 4)
      return Status();
    int64_t length = view.shape[axis];
    if (length < 1 || length > limits::kMaxLength)
      return Status::error(what + ": " + name + " = " + std::to_string(length) + " (dim " +
                           std::to_string(axis) + ") is outside the kernel's [1, " +
                           std::to_string(limits::kMaxLength) + "] (docs/limits.md)");
    dim = length;
    return Status();
  };
  if (Status st = take(call.batch, query, 0, "input 0 (query)", "b"); !st)
    return st;
  if (Status st = take(call.querySeq, query, 2, "input 0 (query)", "sq"); !st)
    return st;
  if (Status st = take(call.keySeq, key, 2, "input 1 (key)", "skv"); !st)
    return st;
  return call;
}

std::vector<int64_t> operandSlotWords(const TensorView *view) {
  static float unusedSlot = 0.0f;
  std::vector<int64_t> sizes = view ? view->shape : std::vector<int64_t>{1};
  // A dense view's row-major strides (a dim of one element may come with
  // any stride, e.g. NumPy's 0 for a new axis).
  std::vector<int64_t> strides = !view ? std::vector<int64_t>{1}
                                 : isDenseRowMajor(*view)
                                     ? stridesOf(TensorView{nullptr, view->dtype, view->shape, {}})
                                     : stridesOf(*view);
  auto pointer = reinterpret_cast<int64_t>(view ? view->data : &unusedSlot);
  std::vector<int64_t> words = {pointer, pointer, 0};
  words.insert(words.end(), sizes.begin(), sizes.end());
  words.insert(words.end(), strides.begin(), strides.end());
  return words;
}

Status buildPositionTable(const TensorView *view, const std::string &what, int64_t rows,
                          int64_t seq, int64_t batch, int64_t first, std::vector<int64_t> &table,
                          int64_t axes, int64_t limit, const std::string &noun,
                          bool defaultsOnEveryAxis) {
  table.assign(axes * rows * seq, 0);
  if (!view) {
    if (axes > 1 && !defaultsOnEveryAxis)
      return Status::error(what + " must be given: M-RoPE reads " + std::to_string(axes) +
                           " axes of position ids, and the defaults have one");
    if (limit > 0 && seq > 0 && (first < 0 || first + seq > limit))
      return Status::error(what + " were not given, and the default positions [" +
                           std::to_string(first) + ", " + std::to_string(first + seq) +
                           ") pass the table's " + std::to_string(limit) + " rows");
    for (int64_t r = 0; r < axes * rows; ++r)
      for (int64_t s = 0; s < seq; ++s)
        table[r * seq + s] = first + s;
    return Status();
  }
  // [seq] or [batch, seq] (a shared [1, seq] too), each behind [axes, ...].
  std::vector<int64_t> expected =
      rows == 1 ? std::vector<int64_t>{seq} : std::vector<int64_t>{batch, seq};
  size_t lead = axes > 1 ? 1 : 0;
  if (rows == 1 && view->shape.size() == 2 + lead && view->shape[lead] == 1)
    expected = {1, seq};
  if (axes > 1)
    expected.insert(expected.begin(), axes);
  if (Status s = checkView(*view, what, expected, {DType::I64, DType::I32}); !s)
    return s;
  std::vector<int64_t> strides = stridesOf(*view);
  bool hasRows = view->shape.size() == 2 + lead;
  for (int64_t a = 0; a < axes; ++a)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t s = 0; s < seq; ++s) {
        int64_t offset =
            (lead ? a * strides[0] : 0) + (hasRows ? r * strides[lead] : 0) + s * strides.back();
        int64_t position = view->dtype == DType::I64
                               ? static_cast<const int64_t *>(view->data)[offset]
                               : static_cast<const int32_t *>(view->data)[offset];
        // docs/limits.md: RoPE angles stay exact only for |position| < 2^31.
        if (position < -limits::kMaxPositionMagnitude || position >= limits::kMaxPositionMagnitude)
          return Status::error(what + ": position " + std::to_string(position) + " at [" +
                               (lead ? std::to_string(a) + ", " : "") +
                               (hasRows ? std::to_string(r) + ", " : "") + std::to_string(s) +
                               "] is outside [-2^31, 2^31)");
        if (limit > 0 && (position < 0 || position >= limit))
          return Status::error(what + ": " + noun + " " + std::to_string(position) + " at [" +
                               (lead ? std::to_string(a) + ", " : "") +
                               (hasRows ? std::to_string(r) + ", " : "") + std::to_string(s) +
                               "] is outside the table's " + std::to_string(limit) + " rows [0, " +
                               std::to_string(limit) + ")");
        table[(a * rows + r) * seq + s] = position;
      }
  return Status();
}

} // namespace pejit

namespace pejit {

Status bindInputs(const KernelSignature &signature, const std::vector<TensorView> &inputs,
                  BoundInputs &bound) {
  size_t required = signature.requiredInputs(), all = signature.arguments.size();
  if (inputs.size() < required || inputs.size() > all) {
    std::string names;
    for (const std::string &label : signature.labels())
      names += (names.empty() ? "" : ", ") + label;
    return Status::error("expected " + std::to_string(required) +
                         (required == all ? std::string() : " to " + std::to_string(all)) +
                         " inputs (" + names + "), got " + std::to_string(inputs.size()));
  }
  bound = BoundInputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const KernelArgument &argument = signature.arguments[i];
    std::string name = "input " + std::to_string(i) + " (" + argument.label() + ")";
    switch (argument.role) {
    case ArgumentRole::Query:
      bound.query = &inputs[i];
      break;
    case ArgumentRole::Key:
      bound.key = &inputs[i];
      break;
    case ArgumentRole::Value:
      bound.value = &inputs[i];
      break;
    case ArgumentRole::EncodingOperand: {
      if (Status st = checkView(inputs[i], name, argument.shape, {argument.dtype}); !st)
        return st;
      if (!isDenseRowMajor(inputs[i]))
        return Status::error(name + " must be contiguous (row-major): the kernel reads it as a "
                                    "dense table");
      // Each in the slot(s) the kernel reads it from (the fused op's order).
      for (unsigned slot : argument.slots) {
        if (bound.encodingOperands.size() <= slot)
          bound.encodingOperands.resize(slot + 1, nullptr);
        bound.encodingOperands[slot] = &inputs[i];
      }
      break;
    }
    case ArgumentRole::QuerySegments:
      bound.querySegments = &inputs[i];
      break;
    case ArgumentRole::KeySegments:
      bound.keySegments = &inputs[i];
      break;
    case ArgumentRole::KeyLengths:
      bound.keyLengths = &inputs[i];
      break;
    case ArgumentRole::KeyPages:
      bound.keyPages = &inputs[i];
      break;
    case ArgumentRole::ValuePages:
      bound.valuePages = &inputs[i];
      break;
    case ArgumentRole::BlockTable:
      bound.blockTable = &inputs[i];
      break;
    case ArgumentRole::TransformInput: // a standalone transform's tensor
      bound.query = &inputs[i];
      break;
    case ArgumentRole::TransformPositions:
    case ArgumentRole::GradIds:
      bound.queryPositions = &inputs[i];
      bound.queryPositionsName = name;
      break;
    case ArgumentRole::GradRows: // a table gradient's rows: read as the query
      bound.query = &inputs[i];
      break;
    case ArgumentRole::EmbedTokens:
      bound.embedTokens = &inputs[i];
      bound.embedTokensName = name;
      break;
    case ArgumentRole::EmbedTable:
      if (Status st = checkView(inputs[i], name, argument.shape, {argument.dtype}); !st)
        return st;
      if (!isDenseRowMajor(inputs[i]))
        return Status::error(name + " must be contiguous (row-major): the kernel reads it as a "
                                    "dense table");
      bound.embedTable = &inputs[i];
      break;
    case ArgumentRole::LinearState: // its shape follows the call's (X86Call)
      bound.linearState = &inputs[i];
      bound.linearStateName = name;
      break;
    case ArgumentRole::Output:
      bound.output = &inputs[i];
      break;
    case ArgumentRole::OutputGradient:
      bound.outputGradient = &inputs[i];
      break;
    case ArgumentRole::LogSumExp:
      bound.logSumExp = &inputs[i];
      break;
    default:
      break;
    }
    if (argument.readsQueryPositions()) {
      bound.queryPositions = &inputs[i];
      bound.queryPositionsName = name;
    }
    if (argument.readsKeyPositions()) {
      bound.keyPositions = &inputs[i];
      bound.keyPositionsName = name;
    }
  }
  size_t slots = signature.encodingOperandSlotCount();
  bound.encodingOperands.resize(std::max(slots, bound.encodingOperands.size()), nullptr);
  for (size_t slot = 0; slot < slots; ++slot)
    if (!bound.encodingOperands[slot])
      return Status::error("no input for encoding operand slot " + std::to_string(slot) +
                           " (the kernel signature names none)");
  return Status();
}

} // namespace pejit

namespace pejit {

Expected<std::vector<int64_t>> readKeyLengths(const BoundInputs &bound, int64_t batch,
                                              int64_t keySeq) {
  const std::string what = "key_lengths";
  const TensorView *view = bound.keyLengths;
  if (!view)
    return Status::error(what + " is missing: the kernel takes each batch row's key count");
  if (Status st = checkView(*view, what, {batch}, {DType::I32, DType::I64}); !st)
    return st;
  int64_t stride = stridesOf(*view)[0];
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n < batch; ++n) {
    int64_t value = view->dtype == DType::I64
                        ? static_cast<const int64_t *>(view->data)[n * stride]
                        : static_cast<const int32_t *>(view->data)[n * stride];
    if (value < 0 || value > keySeq)
      return Status::error(what + ": entry " + std::to_string(n) + " is " + std::to_string(value) +
                           ", outside [0, skv = " + std::to_string(keySeq) +
                           "] (the keys K and V hold)");
    lengths.push_back(value);
  }
  return lengths;
}

Expected<Segments> readSegments(const BoundInputs &bound, int64_t totalQuery, int64_t totalKey) {
  Segments segments;
  // query_segments and key_segments are the 4th and 5th inputs or later:
  // messages name them by role, as the signature does.
  auto read = [](const TensorView *view, const std::string &what, int64_t total, const char *length,
                 std::vector<int64_t> &offsets) -> Status {
    if (!view)
      return Status::error(what + " is missing: the kernel takes a packed batch");
    if (view->shape.size() != 1 || view->shape[0] < 2)
      return Status::error(what + ": shape " + dimsText(view->shape) +
                           " is not [n + 1] with n >= 1 sequences");
    // i32 as the IR types them (FlashAttention's cu_seqlens), or i64 as
    // position ids may be.
    if (Status st = checkView(*view, what, view->shape, {DType::I32, DType::I64}); !st)
      return st;
    int64_t stride = stridesOf(*view)[0];
    for (int64_t i = 0; i < view->shape[0]; ++i) {
      int64_t value = view->dtype == DType::I64
                          ? static_cast<const int64_t *>(view->data)[i * stride]
                          : static_cast<const int32_t *>(view->data)[i * stride];
      if (i == 0 && value != 0)
        return Status::error(what + ": entry 0 is " + std::to_string(value) +
                             "; the offsets start at 0");
      if (i > 0 && value < offsets.back())
        return Status::error(what + ": entry " + std::to_string(i) + " (" + std::to_string(value) +
                             ") is less than entry " + std::to_string(i - 1) + " (" +
                             std::to_string(offsets.back()) +
                             "): the offsets must be non-decreasing");
      offsets.push_back(value);
    }
    if (offsets.back() != total)
      return Status::error(what + ": the last entry (" + std::to_string(offsets.back()) +
                           ", index " + std::to_string(offsets.size() - 1) +
                           ") must equal the packed " + length + " = " + std::to_string(total));
    return Status();
  };
  if (Status st = read(bound.querySegments, "query_segments (cu_seqlens_q)", totalQuery,
                       "query length sq", segments.query);
      !st)
    return st;
  if (Status st = read(bound.keySegments, "key_segments (cu_seqlens_k)", totalKey, "key length skv",
                       segments.key);
      !st)
    return st;
  if (segments.query.size() != segments.key.size())
    return Status::error("query_segments has " + std::to_string(segments.query.size()) +
                         " entries but key_segments " + std::to_string(segments.key.size()) +
                         ": both are n + 1 for n sequences");
  return segments;
}

} // namespace pejit
