// One attention call on the GPU (AttentionLaunch.h).
#include "runtime/cuda/AttentionLaunch.h"

#include <algorithm>
#include <array>

namespace pejit::cuda {

namespace {

Status upload(const void *data, size_t bytes, std::vector<DeviceBuffer> &buffers) {
  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(std::max<size_t>(bytes, 4));
  if (!buffer)
    return Error{buffer.error()};
  if (data && bytes)
    if (Status copied = buffer->copyFromHost(data, bytes); !copied)
      return copied;
  buffers.push_back(std::move(*buffer));
  return Status();
}

std::array<unsigned, 3> dims3(const std::vector<int64_t> &values) {
  std::array<unsigned, 3> out{1, 1, 1};
  for (size_t i = 0; i < 3 && i < values.size(); ++i)
    out[i] = static_cast<unsigned>(values[i]);
  return out;
}

} // namespace

Status runAttention(const AttentionKernelImage &kernel, const AttentionBuffers &host,
                    int timedRepeats, std::vector<float> *timesMs) {
  Result<Module> module = Module::load(kernel.image);
  if (!module)
    return Error{module.error()};
  Result<Function> attention = module->function("pejit_attention");
  if (!attention)
    return Error{attention.error()};
  // Fixed slots: q, k, v, o, scratch, partial O, partial m, partial l,
  // then query positions, key positions; the lengths; the encoding operands.
  std::vector<DeviceBuffer> buffers;
  buffers.reserve(10);
  for (auto [data, bytes] :
       {std::pair{host.query, host.queryBytes}, std::pair{host.key, host.keyBytes},
        std::pair{host.value, host.valueBytes},
        std::pair<const void *, size_t>{nullptr, host.outputBytes},
        std::pair<const void *, size_t>{nullptr, static_cast<size_t>(kernel.scratchFloats) * 4},
        std::pair<const void *, size_t>{nullptr,
                                        static_cast<size_t>(kernel.partialOutputFloats) * 4},
        std::pair<const void *, size_t>{nullptr, static_cast<size_t>(kernel.partialRowFloats) * 4},
        std::pair<const void *, size_t>{nullptr, static_cast<size_t>(kernel.partialRowFloats) * 4}})
    if (Status st = upload(data, bytes, buffers); !st)
      return st;
  // Position ids go to slots 8 and 9 (the prologue's tables and the score
  // hooks of encodings with relative_to = position read them), the
  // encoding operands after them, each its own pejit_attention argument.
  if (!host.queryPositions || !host.keyPositions)
    return Error{"the kernel takes position ids (defaults filled in): none were given"};
  if (Status st = upload(host.queryPositions->data(), host.queryPositions->size() * 8, buffers);
      !st)
    return st;
  if (Status st = upload(host.keyPositions->data(), host.keyPositions->size() * 8, buffers); !st)
    return st;
  std::vector<DeviceBuffer> operandBuffers;
  for (auto [data, bytes] : host.encodingOperands)
    if (Status st = upload(data, bytes, operandBuffers); !st)
      return st;
  // Every kernel takes the call's lengths after its pointers (b, sq, skv,
  // splits, table floats: templates/nvidia/mma_attention.mlir).
  auto lengths = [&](KernelArgs &to) {
    to.int64(kernel.batch).int64(kernel.querySeq).int64(kernel.keySeq).int64(kernel.splits);
    to.int64(kernel.scratchFloats);
  };
  KernelArgs args, combineArgs;
  for (int i = 0; i < 10; ++i)
    args.pointer(buffers[i]);
  lengths(args);
  for (DeviceBuffer &operand : operandBuffers)
    args.pointer(operand);
  combineArgs.pointer(buffers[3]).pointer(buffers[5]).pointer(buffers[6]).pointer(buffers[7]);
  lengths(combineArgs);
  Result<Function> combine = Error{"no combine kernel"};
  if (kernel.splits > 1) {
    combine = module->function("pejit_combine");
    if (!combine)
      return Error{combine.error()};
  }

  auto runOnce = [&]() -> Status {
    if (kernel.scratchFloats > 0) {
      Result<Function> prologue = module->function("pejit_prologue");
      if (!prologue)
        return Error{prologue.error()};
      KernelArgs prologueArgs;
      prologueArgs.pointer(buffers[8]).pointer(buffers[9]).pointer(buffers[4]);
      lengths(prologueArgs);
      for (DeviceBuffer &operand : operandBuffers) // a RoPE's runtime scale
        prologueArgs.pointer(operand);
      size_t positions = std::max(host.queryPositions->size(), host.keyPositions->size());
      unsigned blocks = static_cast<unsigned>(std::min<size_t>((positions + 127) / 128, 1024));
      if (Status st = launch(*prologue, {blocks, 1, 1}, {128, 1, 1}, 0, prologueArgs); !st)
        return st;
    }
    if (Status st = launch(*attention, dims3(kernel.grid), dims3(kernel.block), 0, args); !st)
      return st;
    if (kernel.splits > 1)
      return launch(*combine, dims3(kernel.combineGrid), dims3(kernel.block), 0, combineArgs);
    return Status();
  };
  if (Status st = runOnce(); !st)
    return st;
  if (Status st = synchronize(); !st)
    return st;
  if (Status st = buffers[3].copyToHost(host.output, host.outputBytes); !st)
    return st;
  for (int r = 0; r < timedRepeats; ++r) {
    Result<Timer> timer = Timer::create();
    if (!timer)
      return Error{timer.error()};
    if (Status st = timer->start(nullptr); !st)
      return st;
    if (Status st = runOnce(); !st)
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

} // namespace pejit::cuda
