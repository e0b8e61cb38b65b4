// pejit run --backward: the gradients of a forward FILE.mlir on .npy inputs
// (docs/backward.md). The forward kernel gives o; the backward the runtime
// derives from the same spec takes the inputs, o and --grad-output's dO,
// and writes dq, dk, dv and each differentiable encoding operand's
// gradient to --grads=DIR as .npy files. A standalone pe.rope's backward
// (its adjoint) takes dO in x's place and writes dx; a materialized Shaw
// term's takes dO after the inputs and writes its table's gradient (and
// the key term's dq).
//
// --check: the float64 reference interpreter has no backward, so each
// gradient g of an input x is checked through its directional derivative:
// for a random direction u (seeded, printed), with L(x) = sum(dO * f(x)) in
// float64, the central difference (L(x + e u) - L(x - e u)) / 2e must equal
// sum(g * u) to 1e-4 of sum |g * u| (f32 gradients; the difference's own
// error is O(e^2), e = 1e-3 times the input's scale).
#include "tools/pejit/RunBackward.h"
#include "tools/pejit/Commands.h"
#include "tools/pejit/TensorIO.h"

#include "pejit/interpreter/ReferenceInterpreter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

namespace pejit::cli {

namespace {

constexpr double kDirectionalTolerance = 1e-4;

int fail(const std::string &message) {
  std::fprintf(stderr, "pejit: %s\n", message.c_str());
  return kExitError;
}

/// One gradient the backward writes: its file name and the forward input
/// it belongs to.
struct Gradient {
  std::string name;
  size_t input = 0;
  std::vector<float> data;
};

/// L(x) = sum(dO * f(x)) by the float64 interpreter, with input `at`
/// replaced by x + step * direction.
Expected<double> referenceLoss(const std::string &source, const std::string &file,
                               const std::vector<HostTensor> &inputs, size_t at,
                               const std::vector<double> &direction, double step,
                               const std::vector<float> &dO) {
  std::vector<ReferenceArgument> arguments;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ReferenceArgument argument = inputs[i].referenceArgument();
    if (i == at) {
      ref::Tensor &x = std::get<ref::Tensor>(argument);
      for (size_t n = 0; n < x.data.size(); ++n)
        x.data[n] += step * direction[n];
    }
    arguments.push_back(std::move(argument));
  }
  Expected<ref::Tensor> out = interpretReference(source, arguments, file);
  if (!out)
    return Expected<double>::error(out.error());
  if (out->data.size() != dO.size())
    return Expected<double>::error("the reference result " + ref::shapeToString(out->shape) +
                                   " does not match output_grad");
  double loss = 0;
  for (size_t n = 0; n < dO.size(); ++n)
    loss += static_cast<double>(dO[n]) * out->data[n];
  return loss;
}

} // namespace

int runBackward(const BackwardRunOptions &options, const Spec &spec,
                std::vector<HostTensor> &inputs) {
  Runtime runtime(RuntimeOptions{options.threads});
  Expected<X86Kernel> forward = runtime.getX86(spec);
  if (!forward)
    return fail(forward.error());
  Expected<X86Kernel> backward = runtime.getX86Backward(spec);
  if (!backward)
    return fail(options.file + ": --backward: " + backward.error());
  std::vector<TensorView> views;
  for (HostTensor &input : inputs)
    views.push_back(input.view());
  Expected<Shape> callShape = forward->callShape(views);
  if (!callShape)
    return fail(options.file + ": " + callShape.error());
  const Shape &s = *callShape;
  // A materialized Shaw term's output is the term ([b, h, sq, skv], or
  // [(h,) sq, skv, dv]): its shape is dO's, which the forward's run checks.
  const bool shawTerm = backward->signature().shawTermGradient;
  npy::Expected<npy::Array> dOArray = npy::readNpy(options.gradOutput);
  if (!dOArray)
    return fail("--grad-output=@" + options.gradOutput + ": " + dOArray.error);
  const std::vector<int64_t> outShape =
      shawTerm ? dOArray->shape
               : std::vector<int64_t>{s.batch, s.queryHeads, s.querySeq, s.valueDim};
  int64_t outCount = 1;
  for (int64_t dim : outShape)
    outCount *= dim;
  std::vector<float> o(outCount, std::numeric_limits<float>::quiet_NaN());
  // A training forward (an lse result) also writes lse, which its
  // backward reads.
  const bool training = forward->signature().writesLse;
  const std::vector<int64_t> lseShape = {s.batch, s.queryHeads, s.querySeq};
  std::vector<float> lse(s.batch * s.queryHeads * s.querySeq,
                         std::numeric_limits<float>::quiet_NaN());
  Status ran = training ? forward->runTraining(views, {o.data(), DType::F32, outShape, {}},
                                               {lse.data(), DType::F32, lseShape, {}})
                        : forward->run(views, {o.data(), DType::F32, outShape, {}});
  if (!ran)
    return fail(options.file + ": " + ran.message());

  // dO: float32 of the output's shape.
  if (dOArray->shape != outShape)
    return fail("--grad-output=@" + options.gradOutput + ": shape " +
                ref::shapeToString(dOArray->shape) + " is not the output's " +
                ref::shapeToString(outShape));
  std::vector<float> dO = npy::toFloat32(*dOArray);

  std::vector<Gradient> gradients;
  double backwardMs = 0;
  const KernelSignature &signature = backward->signature();
  if (signature.standaloneTransform()) {
    // A standalone chain's backward (pe.rope adjoint): its input's gradient
    // from dO in x's place, the other inputs as the forward's.
    size_t xAt = 0;
    while (xAt < signature.arguments.size() &&
           signature.arguments[xAt].role != ArgumentRole::TransformInput)
      ++xAt;
    if (xAt >= views.size())
      return fail(options.file + ": --backward: the kernel's input was not found");
    std::vector<TensorView> adjointInputs(views.begin(), views.end());
    adjointInputs[xAt] = {dO.data(), DType::F32, inputs[xAt].shape, {}};
    gradients.push_back({"dx", xAt, {}});
    gradients[0].data.assign(inputs[xAt].floats.size(), std::numeric_limits<float>::quiet_NaN());
    auto start = std::chrono::steady_clock::now();
    if (Status status = backward->run(
            adjointInputs, {gradients[0].data.data(), DType::F32, inputs[xAt].shape, {}});
        !status)
      return fail(options.file + ": --backward: " + status.message());
    backwardMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  } else if (shawTerm) {
    // A materialized Shaw term's backward: the forward's inputs and dO;
    // the query's gradient (the key term) and the table's.
    std::vector<TensorView> backwardInputs(views.begin(), views.end());
    backwardInputs.push_back({dO.data(), DType::F32, outShape, {}});
    for (size_t i = 0; i < signature.arguments.size() && i < inputs.size(); ++i) {
      if (signature.arguments[i].role == ArgumentRole::Query)
        gradients.push_back({"dq", i, {}});
      if (signature.arguments[i].role == ArgumentRole::EncodingOperand)
        gradients.push_back({"d_" + signature.arguments[i].name, i, {}});
    }
    std::vector<TensorView> gradientViews;
    for (Gradient &gradient : gradients) {
      gradient.data.assign(inputs[gradient.input].floats.size(),
                           std::numeric_limits<float>::quiet_NaN());
      gradientViews.push_back({gradient.data.data(), DType::F32, inputs[gradient.input].shape, {}});
    }
    auto start = std::chrono::steady_clock::now();
    if (Status status = backward->runBackward(backwardInputs, gradientViews); !status)
      return fail(options.file + ": --backward: " + status.message());
    backwardMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  } else {
    // The backward's inputs: the forward's, with o and dO where its
    // signature has them (before the trailing position ids).
    size_t outputAt = 0;
    while (outputAt < signature.arguments.size() &&
           signature.arguments[outputAt].role != ArgumentRole::Output)
      ++outputAt;
    std::vector<TensorView> backwardInputs(views.begin(), views.end());
    size_t insertAt = std::min(outputAt, backwardInputs.size());
    std::vector<TensorView> added = {{o.data(), DType::F32, outShape, {}},
                                     {dO.data(), DType::F32, outShape, {}}};
    if (training)
      added.push_back({lse.data(), DType::F32, lseShape, {}});
    backwardInputs.insert(backwardInputs.begin() + insertAt, added.begin(), added.end());

    // The gradients: dq, dk, dv, then each operand's asked for, each the
    // shape of its forward input (found by role, or by the operand's slot).
    for (auto [role, name] : {std::pair{ArgumentRole::Query, "dq"},
                              {ArgumentRole::Key, "dk"},
                              {ArgumentRole::Value, "dv"}})
      for (size_t i = 0; i < signature.arguments.size() && i < inputs.size(); ++i)
        if (signature.arguments[i].role == role)
          gradients.push_back({name, i, {}});
    for (unsigned slot : signature.operandGradients)
      for (size_t i = 0; i < signature.arguments.size() && i < inputs.size(); ++i) {
        const std::vector<unsigned> &slots = signature.arguments[i].slots;
        if (signature.arguments[i].role == ArgumentRole::EncodingOperand &&
            std::find(slots.begin(), slots.end(), slot) != slots.end()) {
          gradients.push_back({"d_" + signature.arguments[i].name, i, {}});
          break;
        }
      }
    if (gradients.size() != 3 + signature.operandGradients.size())
      return fail(options.file + ": --backward: the gradients' inputs were not all found");
    std::vector<TensorView> gradientViews;
    for (Gradient &gradient : gradients) {
      gradient.data.assign(inputs[gradient.input].floats.size(),
                           std::numeric_limits<float>::quiet_NaN());
      gradientViews.push_back({gradient.data.data(), DType::F32, inputs[gradient.input].shape, {}});
    }
    auto start = std::chrono::steady_clock::now();
    if (Status status = backward->runBackward(backwardInputs, gradientViews); !status)
      return fail(options.file + ": --backward: " + status.message());
    backwardMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::fprintf(stderr, "pejit: backward %s in %.1f ms, run %.3f ms\n",
               backward->loadedFromDisk() ? "loaded from the disk cache" : "compiled",
               backward->compileMilliseconds(), backwardMs);

  if (options.gradsDir.empty()) {
    std::fprintf(stderr, "pejit: no --grads=DIR given: the gradients are not saved\n");
  } else {
    for (const Gradient &gradient : gradients) {
      std::string path = options.gradsDir + "/" + gradient.name + ".npy";
      if (std::string error = writeFloat32(path, gradient.data, inputs[gradient.input].shape);
          !error.empty())
        return fail(error);
      std::printf("wrote %s\n", path.c_str());
    }
  }

  if (!options.check)
    return kExitOk;
  // Each gradient's directional derivative against the float64 reference.
  std::mt19937 engine(options.seed);
  std::normal_distribution<double> normal;
  bool passed = true;
  for (const Gradient &gradient : gradients) {
    const HostTensor &x = inputs[gradient.input];
    std::vector<double> direction(x.floats.size());
    double scale = 0, analytic = 0, magnitude = 0;
    for (size_t n = 0; n < direction.size(); ++n) {
      direction[n] = normal(engine);
      scale = std::max(scale, std::fabs(static_cast<double>(x.floats[n])));
      analytic += gradient.data[n] * direction[n];
      magnitude += std::fabs(gradient.data[n] * direction[n]);
    }
    double step = 1e-3 * std::max(scale, 1.0);
    Expected<double> plus =
        referenceLoss(spec.source(), options.file, inputs, gradient.input, direction, step, dO);
    Expected<double> minus =
        referenceLoss(spec.source(), options.file, inputs, gradient.input, direction, -step, dO);
    if (!plus || !minus)
      return fail("--check: " + (!plus ? plus.error() : minus.error()));
    double numeric = (*plus - *minus) / (2 * step);
    double error = std::fabs(analytic - numeric) / std::max(magnitude, 1e-30);
    if (std::isnan(analytic))
      error = std::numeric_limits<double>::infinity();
    std::printf("%s: directional derivative %.6g, float64 reference %.6g, relative error %.3g "
                "(tolerance 1e-4)\n",
                gradient.name.c_str(), analytic, numeric, error);
    passed = passed && error <= kDirectionalTolerance;
  }
  std::printf("check seed %u\n", options.seed);
  if (!passed)
    return fail("--check failed: a gradient's directional derivative is off by more than 1e-4");
  return kExitOk;
}

} // namespace pejit::cli
