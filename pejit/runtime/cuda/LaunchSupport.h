// What the launchers of pejit's nvidia kernels share (AttentionLaunch.cpp,
// BackwardLaunch.cpp): device buffers from host bytes, launch dims, and
// one run then timed repeats. Light (no LLVM).
#ifndef PEJIT_RUNTIME_CUDA_LAUNCHSUPPORT_H
#define PEJIT_RUNTIME_CUDA_LAUNCHSUPPORT_H

#include "pejit/runtime/cuda/CudaDriver.h"

#include <algorithm>
#include <array>
#include <functional>
#include <vector>

namespace pejit::cuda {

/// A device buffer of `bytes` (at least 4), filled from `data` when given,
/// appended to `buffers`.
inline Status upload(const void *data, size_t bytes, std::vector<DeviceBuffer> &buffers) {
  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(std::max<size_t>(bytes, 4));
  if (!buffer)
    return Error{buffer.error()};
  if (data && bytes)
    if (Status copied = buffer->copyFromHost(data, bytes); !copied)
      return copied;
  buffers.push_back(std::move(*buffer));
  return Status();
}

inline std::array<unsigned, 3> dims3(const std::vector<int64_t> &values) {
  std::array<unsigned, 3> out{1, 1, 1};
  for (size_t i = 0; i < 3 && i < values.size(); ++i)
    out[i] = static_cast<unsigned>(values[i]);
  return out;
}

/// Runs `once` (launches, no synchronization), synchronizes, then times
/// `timedRepeats` more runs between CUDA events.
inline Status runAndTime(const std::function<Status()> &once,
                         const std::function<Status()> &download, int timedRepeats,
                         std::vector<float> *timesMs) {
  if (Status st = once(); !st)
    return st;
  if (Status st = synchronize(); !st)
    return st;
  if (Status st = download(); !st)
    return st;
  for (int r = 0; r < timedRepeats; ++r) {
    Result<Timer> timer = Timer::create();
    if (!timer)
      return Error{timer.error()};
    if (Status st = timer->start(nullptr); !st)
      return st;
    if (Status st = once(); !st)
      return st;
    if (Status st = timer->stop(nullptr); !st)
      return st;
    Result<float> ms = timer->elapsedMs();
    if (!ms)
      return Error{ms.error()};
    if (timesMs)
      timesMs->push_back(*ms);
  }
  return Status();
}

/// pejit_prologue over `positions` position rows: 128 threads a block, at
/// most 1024 blocks (its rows loop strides over the grid).
inline Status launchPrologue(const Function &prologue, size_t positions, KernelArgs &args) {
  unsigned blocks = static_cast<unsigned>(std::min<size_t>((positions + 127) / 128, 1024));
  return launch(prologue, {blocks, 1, 1}, {128, 1, 1}, 0, args);
}

} // namespace pejit::cuda

#endif // PEJIT_RUNTIME_CUDA_LAUNCHSUPPORT_H
