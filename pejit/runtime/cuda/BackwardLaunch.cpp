// The attention backward's launches on the GPU (BackwardLaunch.h).
#include "pejit/runtime/cuda/BackwardLaunch.h"

#include "pejit/runtime/cuda/LaunchSupport.h"

#include <algorithm>

namespace pejit::cuda {

BackwardPlan planBackward(const KernelDescription &kernel, const Shape &call) {
  auto idRows = [&](int64_t positionRows) { return positionRows == 1 ? 1 : call.batch; };
  auto tiles = [](int64_t n) { return (n + 63) / 64; };
  BackwardPlan plan;
  plan.tableFloats =
      kernel.tableFloatsPerQueryPosition * idRows(kernel.queryPositionRows) * call.querySeq +
      kernel.tableFloatsPerKeyPosition * idRows(kernel.keyPositionRows) * call.keySeq;
  plan.rowFloats = 2 * call.batch * call.queryHeads * call.querySeq;
  plan.termFloats = (kernel.rowScratchFloats - 2) * call.batch * call.queryHeads * call.querySeq;
  plan.queryGradFloats = call.batch * call.queryHeads * call.querySeq * call.headDim;
  plan.keyGradFloats = call.batch * call.kvHeads * call.keySeq * call.headDim;
  plan.rowsGrid = {tiles(call.querySeq), call.queryHeads, call.batch};
  plan.keysGrid = {tiles(call.keySeq), call.kvHeads, call.batch};
  plan.sidesGrid = {tiles(std::max(call.querySeq, call.keySeq)), call.queryHeads + call.kvHeads,
                    call.batch};
  for (unsigned slot : kernel.signature.operandGradients)
    for (const KernelArgument &arg : kernel.signature.arguments)
      if (arg.role == ArgumentRole::EncodingOperand &&
          std::find(arg.slots.begin(), arg.slots.end(), slot) != arg.slots.end()) {
        int64_t n = 1;
        for (int64_t dim : arg.shape)
          n *= dim;
        if (kernel.signature.scoreShapedGradient == slot) {
          plan.scoreShapedAt = static_cast<int64_t>(plan.operandGradFloats.size());
          plan.dScoreFloats = call.batch * call.queryHeads * call.querySeq * call.keySeq;
          if (arg.shape.size() == 4) {
            plan.biasBatch = arg.shape[0] == 1 ? 1 : call.batch;
            plan.biasHeads = arg.shape[1] == 1 ? 1 : call.queryHeads;
          }
          n = plan.biasBatch * plan.biasHeads * call.querySeq * call.keySeq;
        } else {
          plan.slotFloats += n;
        }
        plan.operandGradFloats.push_back(n);
        break;
      }
  if (plan.slotFloats > 0) {
    int64_t blocks = plan.rowsGrid[0] * plan.rowsGrid[1] * plan.rowsGrid[2] +
                     plan.sidesGrid[0] * plan.sidesGrid[1] * plan.sidesGrid[2];
    plan.slots = 4 * blocks;
  }
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
  if (plan.operandGradFloats.size() != host.operandGrads.size())
    return Error{"the kernel gives " + std::to_string(plan.operandGradFloats.size()) +
                 " operand gradients, the call has room for " +
                 std::to_string(host.operandGrads.size())};
  for (size_t g = 0; g < host.operandGrads.size(); ++g)
    if (host.operandGrads[g].second != static_cast<size_t>(plan.operandGradFloats[g]) * 4)
      return Error{"operand gradient " + std::to_string(g) + " has " +
                   std::to_string(host.operandGrads[g].second) + " bytes, not " +
                   std::to_string(plan.operandGradFloats[g] * 4)};
  // The transform's operand gradients read Q' and K' in f32.
  bool keepF32 = plan.slotFloats > 0;
  // The kernels' fixed arguments, in order (mma_attention_backward.mlir):
  // q k v o dO dq dk dv tq tk scratch rows gq gk lse part tqf tkf terms
  // dscore qpos kpos.
  auto floats = [](int64_t n) {
    return std::pair<const void *, size_t>{nullptr, static_cast<size_t>(n) * 4};
  };
  std::pair<const void *, size_t> lse = host.lse.first ? host.lse : floats(1);
  std::vector<DeviceBuffer> buffers;
  buffers.reserve(22);
  for (auto [data, bytes] :
       {host.query,
        host.key,
        host.value,
        host.output,
        host.outputGrad,
        std::pair<const void *, size_t>{nullptr, host.queryGrad.second},
        std::pair<const void *, size_t>{nullptr, host.keyGrad.second},
        std::pair<const void *, size_t>{nullptr, host.valueGrad.second},
        std::pair<const void *, size_t>{nullptr, host.query.second},
        std::pair<const void *, size_t>{nullptr, host.key.second},
        floats(plan.tableFloats),
        floats(plan.rowFloats),
        floats(plan.queryGradFloats),
        floats(plan.keyGradFloats),
        lse,
        floats(std::max<int64_t>(plan.slots * plan.slotFloats, 1)),
        floats(keepF32 ? plan.queryGradFloats : 1),
        floats(keepF32 ? plan.keyGradFloats : 1),
        floats(std::max<int64_t>(plan.termFloats, 1)),
        floats(std::max<int64_t>(plan.dScoreFloats, 1)),
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
  prologueArgs.pointer(buffers[20]).pointer(buffers[21]).pointer(buffers[10]);
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
      if (Status st = launchPrologue(*prologue, positions, prologueArgs); !st)
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
    if (Status st = buffers[7].copyToHost(host.valueGrad.first, host.valueGrad.second); !st)
      return st;
    if (plan.scoreShapedAt >= 0) {
      // dS summed over the bias's broadcast dims ([1|b, 1|h, sq, skv]).
      std::vector<float> dscore(static_cast<size_t>(plan.dScoreFloats));
      if (Status st = buffers[19].copyToHost(dscore.data(), dscore.size() * 4); !st)
        return st;
      float *out = host.operandGrads[plan.scoreShapedAt].first;
      int64_t plane = call.querySeq * call.keySeq;
      std::vector<double> sums(static_cast<size_t>(plan.biasBatch * plan.biasHeads * plane), 0.0);
      for (int64_t b = 0; b < call.batch; ++b)
        for (int64_t h = 0; h < call.queryHeads; ++h) {
          int64_t row =
              (plan.biasBatch > 1 ? b : 0) * plan.biasHeads + (plan.biasHeads > 1 ? h : 0);
          const float *from = dscore.data() + (b * call.queryHeads + h) * plane;
          for (int64_t e = 0; e < plane; ++e)
            sums[row * plane + e] += from[e];
        }
      for (size_t e = 0; e < sums.size(); ++e)
        out[e] = static_cast<float>(sums[e]);
    }
    if (plan.slotFloats == 0)
      return Status();
    std::vector<float> slots(static_cast<size_t>(plan.slots * plan.slotFloats));
    if (Status st = buffers[15].copyToHost(slots.data(), slots.size() * 4); !st)
      return st;
    int64_t offset = 0;
    for (size_t g = 0; g < host.operandGrads.size(); ++g) {
      if (static_cast<int64_t>(g) == plan.scoreShapedAt)
        continue;
      for (int64_t e = 0; e < plan.operandGradFloats[g]; ++e) {
        double sum = 0;
        for (int64_t slot = 0; slot < plan.slots; ++slot)
          sum += slots[static_cast<size_t>(slot * plan.slotFloats + offset + e)];
        host.operandGrads[g].first[e] = static_cast<float>(sum);
      }
      offset += plan.operandGradFloats[g];
    }
    return Status();
  };
  return runAndTime(once, download, timedRepeats, timesMs);
}

} // namespace pejit::cuda
