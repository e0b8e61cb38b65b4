// Checks of a run's values that no shape shows: that what the run writes
// aliases nothing it reads (checkWrites), and that a RoPE runtime position
// scale keeps angles in range (checkPositionScale). Views.h declares them.
#include "pejit/dialects/Limits.h"
#include "pejit/runtime/Views.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace pejit {

namespace {

/// The bytes [first, end) a view spans (empty for a view of no element).
std::pair<uintptr_t, uintptr_t> byteSpan(const TensorView &view) {
  std::vector<int64_t> strides = stridesOf(view);
  uintptr_t first = reinterpret_cast<uintptr_t>(view.data);
  int64_t last = 0;
  for (size_t d = 0; d < view.shape.size(); ++d) {
    if (view.shape[d] <= 0)
      return {first, first};
    if (d < strides.size())
      last += (view.shape[d] - 1) * std::max<int64_t>(strides[d], 0);
  }
  return {first, first + static_cast<uintptr_t>((last + 1) * dtypeBytes(view.dtype))};
}

bool sameView(const TensorView &a, const TensorView &b) {
  return a.data == b.data && a.dtype == b.dtype && a.shape == b.shape &&
         stridesOf(a) == stridesOf(b);
}

} // namespace

Status checkWrites(const KernelSignature &signature, const std::vector<TensorView> &inputs,
                   const TensorView &out, bool inPlaceAllowed) {
  return checkWrites(signature, inputs, {{&out, "output"}}, inPlaceAllowed);
}

Status checkWrites(const KernelSignature &signature, const std::vector<TensorView> &inputs,
                   std::vector<std::pair<const TensorView *, std::string>> written,
                   bool inPlaceAllowed) {
  std::vector<std::string> labels = signature.labels();
  auto label = [&](size_t i) {
    return "input " + std::to_string(i) + " (" + (i < labels.size() ? labels[i] : "?") + ")";
  };
  const TensorView *out = written.empty() ? nullptr : written[0].first;
  // The written buffers: the outputs, and a carried state.
  const size_t outputs = written.size();
  for (size_t i = 0; i < inputs.size() && i < signature.arguments.size(); ++i)
    if (signature.arguments[i].role == ArgumentRole::LinearState)
      written.push_back({&inputs[i], label(i)});
  for (size_t w = 0; w < written.size(); ++w) {
    auto [view, what] = written[w];
    // A view of no element writes nothing (its other checks name its shape).
    if (std::find(view->shape.begin(), view->shape.end(), 0) != view->shape.end())
      continue;
    std::vector<int64_t> strides = stridesOf(*view);
    for (size_t d = 0; d < view->shape.size() && d < strides.size(); ++d)
      if (strides[d] == 0 && view->shape[d] > 1)
        return Status::error(what + ": dim " + std::to_string(d) + " has stride 0 over " +
                             std::to_string(view->shape[d]) +
                             " elements, so the run would write one element for all of them: "
                             "pass a buffer of its own (e.g. a copy, not a broadcast view)");
    auto [first, end] = byteSpan(*view);
    if (first == end || !view->data)
      continue;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (&inputs[i] == view || !inputs[i].data)
        continue;
      if (inPlaceAllowed && view == out && sameView(inputs[i], *out))
        continue;
      auto [inFirst, inEnd] = byteSpan(inputs[i]);
      if (inFirst < end && first < inEnd)
        return Status::error(
            what + " overlaps " + label(i) +
            ": the run would overwrite what it still reads; pass a buffer of its own" +
            (inPlaceAllowed ? " (or exactly the input's view, for an in-place transform)" : ""));
    }
    // Two outputs (a backward's dq, dk, dv) write disjoint buffers.
    for (size_t other = 0; other < w && w < outputs; ++other) {
      auto [otherFirst, otherEnd] = byteSpan(*written[other].first);
      if (otherFirst < end && first < otherEnd)
        return Status::error(what + " overlaps " + written[other].second +
                             ": each output needs a buffer of its own");
    }
  }
  return Status();
}

Status checkPositionScale(const KernelSignature &signature, const BoundInputs &bound,
                          const std::vector<const std::vector<int64_t> *> &tables) {
  for (const KernelArgument &argument : signature.arguments) {
    if (argument.role != ArgumentRole::EncodingOperand || argument.name != "rope_position_scale" ||
        argument.slots.empty() || argument.slots[0] >= bound.encodingOperands.size())
      continue;
    const TensorView *view = bound.encodingOperands[argument.slots[0]];
    if (!view || view->dtype != DType::F32)
      continue;
    int64_t maxPosition = 0;
    for (const std::vector<int64_t> *table : tables)
      for (int64_t position : *table)
        maxPosition = std::max(maxPosition, position < 0 ? -position : position);
    int64_t count = view->shape.empty() ? 1 : view->shape[0];
    int64_t stride = view->strides.empty() ? 1 : view->strides[0];
    for (int64_t n = 0; n < count; ++n) {
      double scale = static_cast<const float *>(view->data)[n * stride];
      std::string entry = "rope_position_scale[" + std::to_string(n) + "] = ";
      if (!std::isfinite(scale))
        return Status::error(entry +
                             (std::isnan(scale) ? "nan"
                              : scale > 0       ? "inf"
                                                : "-inf") +
                             ": the RoPE position scale must be a finite number");
      if (std::fabs(scale) * static_cast<double>(maxPosition) >= limits::kMaxPositionMagnitude) {
        std::ostringstream message;
        message << entry << scale << " times position " << maxPosition
                << " is outside [-2^31, 2^31): scaled positions obey the position ids' bound "
                   "(docs/limits.md)";
        return Status::error(message.str());
      }
    }
  }
  return Status();
}

} // namespace pejit
