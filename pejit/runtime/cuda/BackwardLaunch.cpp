// The attention backward's launches on the GPU (BackwardLaunch.h).
#include "pejit/runtime/cuda/BackwardLaunch.h"

#include "pejit/runtime/cuda/LaunchSupport.h"

namespace pejit::cuda {

BackwardPlan planBackward(const KernelDescription &kernel, const Shape &call) {
  auto idRows = [&](int64_t positionRows) { return positionRows == 1 ? 1 : call.batch; };
  auto tiles = [](int64_t n) { return (n + 63) / 64; };
  BackwardPlan plan;
  plan.tableFloats =
      kernel.tableFloatsPerQueryPosition * idRows(kernel.queryPositionRows) * call.querySeq +
      kernel.tableFloatsPerKeyPosition * idRows(kernel.keyPositionRows) * call.keySeq;
  plan.rowFloats = 2 * call.batch * call.queryHeads * call.querySeq;
  plan.queryGradFloats = call.batch * call.queryHeads * call.querySeq * call.headDim;
  plan.keyGradFloats = call.batch * call.kvHeads * call.keySeq * call.headDim;
  plan.rowsGrid = {tiles(call.querySeq), call.queryHeads, call.batch};
  plan.keysGrid = {tiles(call.keySeq), call.kvHeads, call.batch};
  plan.sidesGrid = {tiles(std::max(call.querySeq, call.keySeq)), call.queryHeads + call.kvHeads,
                    call.batch};
  return plan;
}

Status runAttentionBackward(const std::string &image, const KernelDescription &kernel,
                            const Shape &call, const BackwardBuffers &host, int timedRepeats,
                            std::vector<float> *timesMs) {
  Result<Module> module = Module::load(image);
  if (!module)
    return Error{module.error()};
  if (!host.queryPositions || !host.keyPositions)
    return Error{"the kernel takes position ids (defaults filled in): none were given"};
  BackwardPlan plan = planBackward(kernel, call);
  // The kernels' fixed arguments, in order (mma_attention_backward.mlir):
  // q k v o dO dq dk dv tq tk scratch rows gq gk lse qpos kpos.
  auto floats = [](int64_t n) {
    return std::pair<const void *, size_t>{nullptr, static_cast<size_t>(n) * 4};
  };
  std::pair<const void *, size_t> lse = host.lse.first ? host.lse : floats(1);
  std::vector<DeviceBuffer> buffers;
  buffers.reserve(17);
  for (auto [data, bytes] :
       {host.query, host.key, host.value, host.output, host.outputGrad,
        std::pair<const void *, size_t>{nullptr, host.queryGrad.second},
        std::pair<const void *, size_t>{nullptr, host.keyGrad.second},
        std::pair<const void *, size_t>{nullptr, host.valueGrad.second},
        std::pair<const void *, size_t>{nullptr, host.query.second},
        std::pair<const void *, size_t>{nullptr, host.key.second}, floats(plan.tableFloats),
        floats(plan.rowFloats), floats(plan.queryGradFloats), floats(plan.keyGradFloats), lse,
        std::pair<const void *, size_t>{host.queryPositions->data(),
                                        host.queryPositions->size() * 8},
        std::pair<const void *, size_t>{host.keyPositions->data(), host.keyPositions->size() * 8}})
    if (Status st = upload(data, bytes, buffers); !st)
      return st;
  std::vector<DeviceBuffer> operandBuffers;
  for (auto [data, bytes] : host.encodingOperands)
    if (Status st = upload(data, bytes, operandBuffers); !st)
      return st;
  auto lengths = [&](KernelArgs &to) {
    to.int64(call.batch).int64(call.querySeq).int64(call.keySeq).int64(1);
    to.int64(plan.tableFloats);
  };
  KernelArgs args, prologueArgs;
  for (DeviceBuffer &buffer : buffers)
    args.pointer(buffer);
  lengths(args);
  for (DeviceBuffer &operand : operandBuffers)
    args.pointer(operand);
  prologueArgs.pointer(buffers[15]).pointer(buffers[16]).pointer(buffers[10]);
  lengths(prologueArgs);
  for (DeviceBuffer &operand : operandBuffers)
    prologueArgs.pointer(operand);
  const char *phases[] = {"pejit_backward_transform", "pejit_backward_rows", "pejit_backward_kv",
                          "pejit_backward_q", "pejit_backward_finish"};
  const std::vector<int64_t> *grids[] = {&plan.sidesGrid, &plan.rowsGrid, &plan.keysGrid,
                                         &plan.rowsGrid, &plan.sidesGrid};
  std::vector<Function> entries;
  for (const char *name : phases) {
    Result<Function> entry = module->function(name);
    if (!entry)
      return Error{entry.error()};
    entries.push_back(*entry);
  }
  Result<Function> prologue = Error{"no prologue"};
  if (plan.tableFloats > 0) {
    prologue = module->function("pejit_prologue");
    if (!prologue)
      return Error{prologue.error()};
  }
  // In order on one stream: each phase reads what the one before wrote.
  auto once = [&]() -> Status {
    if (plan.tableFloats > 0) {
      size_t positions = std::max(host.queryPositions->size(), host.keyPositions->size());
      unsigned blocks = static_cast<unsigned>(std::min<size_t>((positions + 127) / 128, 1024));
      if (Status st = launch(*prologue, {blocks, 1, 1}, {128, 1, 1}, 0, prologueArgs); !st)
        return st;
    }
    for (size_t p = 0; p < entries.size(); ++p)
      if (Status st = launch(entries[p], dims3(*grids[p]), {128, 1, 1}, 0, args); !st)
        return st;
    return Status();
  };
  auto download = [&]() -> Status {
    if (Status st = buffers[5].copyToHost(host.queryGrad.first, host.queryGrad.second); !st)
      return st;
    if (Status st = buffers[6].copyToHost(host.keyGrad.first, host.keyGrad.second); !st)
      return st;
    return buffers[7].copyToHost(host.valueGrad.first, host.valueGrad.second);
  };
  return runAndTime(once, download, timedRepeats, timesMs);
}

} // namespace pejit::cuda
