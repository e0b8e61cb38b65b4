// One attention call on the GPU (AttentionLaunch.h).
#include "pejit/runtime/cuda/AttentionLaunch.h"
#include "pejit/runtime/cuda/LaunchSupport.h"

#include <algorithm>

namespace pejit::cuda {

namespace {

/// A standalone kernel (templates/nvidia/transform.mlir, embed.mlir): the
/// prologue over the ids, then pejit_transform (x, o) or pejit_embed
/// (tokens, table, o), each with the scratch, the lengths and the pe ops'
/// own table (a 4-byte placeholder when they have none).
Status runStandalone(const AttentionKernelImage &kernel, const AttentionBuffers &host,
                     int timedRepeats, std::vector<float> *timesMs) {
  Result<Module> module = Module::load(kernel.image);
  if (!module)
    return Error{module.error()};
  Result<Function> entry = module->function(kernel.kernel);
  if (!entry)
    return Error{entry.error()};
  bool embedding = kernel.kernel == "pejit_embed";
  if (!host.queryPositions)
    return Error{"the kernel takes position ids (defaults filled in): none were given"};
  if (host.encodingOperands.size() > 1)
    return Error{"a standalone kernel takes at most one table of its pe ops"};
  // 0 x, 1 o, 2 scratch, 3 ids, 4 no ids, 5 the pe ops' table, 6 an
  // embedding's token table.
  std::vector<DeviceBuffer> buffers;
  std::pair<const void *, size_t> operand = host.encodingOperands.empty()
                                                ? std::pair<const void *, size_t>{nullptr, 4}
                                                : host.encodingOperands.front();
  for (auto [data, bytes] :
       {std::pair{host.query, host.queryBytes},
        std::pair<const void *, size_t>{nullptr, host.outputBytes},
        std::pair<const void *, size_t>{nullptr, static_cast<size_t>(kernel.scratchFloats) * 4},
        std::pair<const void *, size_t>{host.queryPositions->data(),
                                        host.queryPositions->size() * 8},
        std::pair<const void *, size_t>{nullptr, 8}, operand,
        std::pair<const void *, size_t>{host.key, embedding ? host.keyBytes : 4}})
    if (Status st = upload(data, bytes, buffers); !st)
      return st;
  auto lengths = [&](KernelArgs &to) {
    to.int64(kernel.batch).int64(kernel.querySeq).int64(0).int64(1).int64(kernel.scratchFloats);
  };
  KernelArgs args, prologueArgs;
  if (embedding)
    args.pointer(buffers[0]).pointer(buffers[6]);
  else
    args.pointer(buffers[0]);
  args.pointer(buffers[1]).pointer(buffers[2]);
  lengths(args);
  args.pointer(buffers[5]);
  prologueArgs.pointer(buffers[3]).pointer(buffers[4]).pointer(buffers[2]);
  lengths(prologueArgs);
  prologueArgs.pointer(buffers[5]);
  Result<Function> prologue = Error{"no prologue"};
  if (kernel.scratchFloats > 0) {
    prologue = module->function("pejit_prologue");
    if (!prologue)
      return Error{prologue.error()};
  }
  auto once = [&]() -> Status {
    if (kernel.scratchFloats > 0) {
      size_t positions = host.queryPositions->size();
      if (Status st = launchPrologue(*prologue, positions, prologueArgs); !st)
        return st;
    }
    return launch(*entry, dims3(kernel.grid), dims3(kernel.block), 0, args);
  };
  auto download = [&] { return buffers[1].copyToHost(host.output, host.outputBytes); };
  return runAndTime(once, download, timedRepeats, timesMs);
}

/// Linear attention (templates/nvidia/linear_attention.mlir): the RoPE's
/// prologue, then pejit_linear (q, k, v, o, scratch, the ids, the state,
/// the lengths, the RoPE's runtime scale); the state goes back to the host.
Status runLinear(const AttentionKernelImage &kernel, const AttentionBuffers &host, int timedRepeats,
                 std::vector<float> *timesMs) {
  Result<Module> module = Module::load(kernel.image);
  if (!module)
    return Error{module.error()};
  Result<Function> entry = module->function("pejit_linear");
  if (!entry)
    return Error{entry.error()};
  if (!host.queryPositions || !host.keyPositions)
    return Error{"the kernel takes position ids (defaults filled in): none were given"};
  if (host.encodingOperands.size() > 1)
    return Error{"linear attention takes at most one encoding operand (the RoPE's scale)"};
  std::pair<const void *, size_t> operand = host.encodingOperands.empty()
                                                ? std::pair<const void *, size_t>{nullptr, 4}
                                                : host.encodingOperands.front();
  // 0 q, 1 k, 2 v, 3 o, 4 scratch, 5 query ids, 6 key ids, 7 state, 8 scale.
  std::vector<DeviceBuffer> buffers;
  for (auto [data, bytes] :
       {std::pair{host.query, host.queryBytes}, std::pair{host.key, host.keyBytes},
        std::pair{host.value, host.valueBytes},
        std::pair<const void *, size_t>{nullptr, host.outputBytes},
        std::pair<const void *, size_t>{nullptr, static_cast<size_t>(kernel.scratchFloats) * 4},
        std::pair<const void *, size_t>{host.queryPositions->data(),
                                        host.queryPositions->size() * 8},
        std::pair<const void *, size_t>{host.keyPositions->data(), host.keyPositions->size() * 8},
        std::pair<const void *, size_t>{host.state, host.state ? host.stateBytes : 4}, operand})
    if (Status st = upload(data, bytes, buffers); !st)
      return st;
  auto lengths = [&](KernelArgs &to) {
    to.int64(kernel.batch).int64(kernel.querySeq).int64(kernel.keySeq).int64(1);
    to.int64(kernel.scratchFloats);
  };
  KernelArgs args, prologueArgs;
  for (int i = 0; i < 8; ++i)
    args.pointer(buffers[i]);
  lengths(args);
  args.pointer(buffers[8]);
  prologueArgs.pointer(buffers[5]).pointer(buffers[6]).pointer(buffers[4]);
  lengths(prologueArgs);
  prologueArgs.pointer(buffers[8]);
  Result<Function> prologue = Error{"no prologue"};
  if (kernel.scratchFloats > 0) {
    prologue = module->function("pejit_prologue");
    if (!prologue)
      return Error{prologue.error()};
  }
  // A state is read and written: a timed repeat would start from the
  // state the run before it left, so only an untimed call updates it.
  if (host.state && timedRepeats > 0)
    return Error{"linear attention with a state is not timed (each run updates it)"};
  auto once = [&]() -> Status {
    if (kernel.scratchFloats > 0) {
      size_t positions = std::max(host.queryPositions->size(), host.keyPositions->size());
      if (Status st = launchPrologue(*prologue, positions, prologueArgs); !st)
        return st;
    }
    return launch(*entry, dims3(kernel.grid), dims3(kernel.block), 0, args);
  };
  auto download = [&]() -> Status {
    if (Status st = buffers[3].copyToHost(host.output, host.outputBytes); !st)
      return st;
    return host.state ? buffers[7].copyToHost(host.state, host.stateBytes) : Status();
  };
  return runAndTime(once, download, timedRepeats, timesMs);
}

} // namespace

Status runAttention(const AttentionKernelImage &kernel, const AttentionBuffers &host,
                    int timedRepeats, std::vector<float> *timesMs) {
  if (kernel.kernel == "pejit_linear")
    return runLinear(kernel, host, timedRepeats, timesMs);
  if (kernel.kernel != "pejit_attention")
    return runStandalone(kernel, host, timedRepeats, timesMs);
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
      if (Status st = launchPrologue(*prologue, positions, prologueArgs); !st)
        return st;
    }
    if (Status st = launch(*attention, dims3(kernel.grid), dims3(kernel.block), 0, args); !st)
      return st;
    if (kernel.splits > 1)
      return launch(*combine, dims3(kernel.combineGrid), dims3(kernel.block), 0, combineArgs);
    return Status();
  };
  auto download = [&] { return buffers[3].copyToHost(host.output, host.outputBytes); };
  return runAndTime(runOnce, download, timedRepeats, timesMs);
}

} // namespace pejit::cuda
