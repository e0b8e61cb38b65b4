// The backward tests' run of a spec's forward, then its derived backward,
// on one f32 draw (docs/backward.md): outputs and gradients NaN-poisoned
// before the runs, each encoding operand given a gradient of its shape.
#ifndef PEJIT_TESTS_RUNTIME_FORWARDBACKWARDRUN_H
#define PEJIT_TESTS_RUNTIME_FORWARDBACKWARDRUN_H

#include "pejit/runtime/Pejit.h"

#include "gtest/gtest.h"

#include <limits>
#include <vector>

namespace pejit::testing {

struct ForwardBackwardRun {
  std::vector<float> o, dq, dk, dv;
  /// One per encoding operand, in order (each operand's gradient).
  std::vector<std::vector<float>> operandGrads;
};

/// q [qDims], k and v [kDims] (dv = d), dO like q; `operands` are the
/// spec's encoding operand inputs, in order, each of which gets a gradient.
/// Empty vectors (with a failed expectation) when a kernel does not build.
inline ForwardBackwardRun
runForwardBackward(Runtime &runtime, const Spec &spec, const std::vector<int64_t> &qDims,
                   const std::vector<int64_t> &kDims, const std::vector<float> &q,
                   const std::vector<float> &k, const std::vector<float> &v,
                   const std::vector<float> &dO, const std::vector<TensorView> &operands) {
  Expected<X86Kernel> forward = runtime.getX86(spec);
  Expected<X86Kernel> backward = runtime.getX86Backward(spec);
  EXPECT_TRUE(forward) << forward.error();
  EXPECT_TRUE(backward) << backward.error();
  ForwardBackwardRun run;
  if (!forward || !backward)
    return run;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  run.o.assign(q.size(), nan);
  std::vector<TensorView> inputs = {{(void *)q.data(), DType::F32, qDims, {}},
                                    {(void *)k.data(), DType::F32, kDims, {}},
                                    {(void *)v.data(), DType::F32, kDims, {}}};
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  Status ran = forward->run(inputs, {run.o.data(), DType::F32, qDims, {}});
  EXPECT_TRUE(ran) << ran.message();
  inputs.push_back({run.o.data(), DType::F32, qDims, {}});
  inputs.push_back({(void *)dO.data(), DType::F32, qDims, {}});
  run.dq.assign(q.size(), nan), run.dk.assign(k.size(), nan), run.dv.assign(v.size(), nan);
  std::vector<TensorView> gradients = {{run.dq.data(), DType::F32, qDims, {}},
                                       {run.dk.data(), DType::F32, kDims, {}},
                                       {run.dv.data(), DType::F32, kDims, {}}};
  run.operandGrads.resize(operands.size());
  for (size_t n = 0; n < operands.size(); ++n) {
    int64_t size = 1;
    for (int64_t dim : operands[n].shape)
      size *= dim;
    run.operandGrads[n].assign(size, nan);
  }
  for (size_t n = 0; n < operands.size(); ++n)
    gradients.push_back({run.operandGrads[n].data(), DType::F32, operands[n].shape, {}});
  Status status = backward->runBackward(inputs, gradients);
  EXPECT_TRUE(status) << status.message();
  return run;
}

} // namespace pejit::testing

#endif // PEJIT_TESTS_RUNTIME_FORWARDBACKWARDRUN_H
