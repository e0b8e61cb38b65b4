// pejit run: compile a .mlir file, run it on .npy inputs, write the result,
// and optionally check it against the float64 reference interpreter or time
// repeated runs.
#include "tools/pejit/Args.h"
#include "tools/pejit/Commands.h"
#include "tools/pejit/RunBackward.h"
#include "tools/pejit/RunNvidia.h"
#include "tools/pejit/TensorIO.h"

#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/npy/Npy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

namespace pejit::cli {

namespace {

/// --check's bound on max |out - ref| / max |ref|: f32 kernels 1e-4; with
/// f16/bf16 inputs or output 1e-2 (a bf16 value alone is off by up to 2^-9).
constexpr double kTolerance = 1e-4, kHalfTolerance = 1e-2;

int fail(const std::string &message) {
  std::fprintf(stderr, "pejit: %s\n", message.c_str());
  return kExitError;
}

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

struct RunOptions {
  std::string file;
  std::vector<std::string> inputs;
  std::optional<std::string> output;
  std::optional<X86TileConfig> tiles; // none: the tuned config, else the default
  int threads = 0;
  int64_t repeat = 0;
  bool check = false;
  Target target = Target::host();
  /// --backward: the gradients (RunBackward.cpp).
  bool backward = false;
  std::string gradOutput, gradsDir;
};

/// Fills `options` from the command line; "" or a usage message.
std::string parseRunOptions(const Args &args, RunOptions &options) {
  if (args.positional.size() != 1)
    return "expected one FILE.mlir, got " + std::to_string(args.positional.size()) +
           " positional arguments";
  options.file = args.positional[0];
  for (const std::string &input : args.values("input"))
    options.inputs.push_back(filePath(input));
  if (std::optional<std::string> output = args.value("output"))
    options.output = filePath(*output);
  if (options.output && options.output->empty())
    return "--output needs a file name (--output=@FILE.npy)";
  if (std::optional<std::string> tile = args.value("tile")) {
    std::optional<X86TileConfig> parsed = parseTile(*tile);
    if (!parsed)
      return "--tile=" + *tile + " is not MxN (e.g. 96x72)";
    options.tiles = *parsed;
  }
  if (std::optional<std::string> threads = args.value("threads")) {
    std::optional<int64_t> n = parseInteger(*threads, 1);
    if (!n || *n > 4096)
      return "--threads=" + *threads + " is not a thread count >= 1";
    options.threads = static_cast<int>(*n);
  }
  if (std::optional<std::string> repeat = args.value("repeat")) {
    std::optional<int64_t> n = parseInteger(*repeat, 1);
    if (!n)
      return "--repeat=" + *repeat + " is not a count >= 1";
    options.repeat = *n;
  }
  options.check = args.has("check");
  options.backward = args.has("backward");
  if (std::optional<std::string> gradOutput = args.value("grad-output"))
    options.gradOutput = filePath(*gradOutput);
  options.gradsDir = args.value("grads").value_or("");
  if (options.backward && options.gradOutput.empty())
    return "--backward needs --grad-output=@FILE.npy (dO, float32 of the output's shape)";
  if (!options.backward && (!options.gradOutput.empty() || !options.gradsDir.empty()))
    return "--grad-output and --grads go with --backward";
  std::string targetError;
  std::optional<Target> target = Target::parse(args.value("target").value_or("host"), &targetError);
  if (!target)
    return "--target: " + targetError;
  options.target = *target;
  return "";
}

} // namespace

int runCommand(int argc, char **argv) {
  Args args;
  std::vector<FlagSpec> specs = {{"input", true, true},
                                 {"output"},
                                 {"tile"},
                                 {"threads"},
                                 {"repeat"},
                                 {"check", false},
                                 {"target"},
                                 {"backward", false},
                                 {"grad-output"},
                                 {"grads"}};
  if (std::string error = parseArgs(argc, argv, 2, specs, args); !error.empty())
    return usageError("run: " + error);
  if (args.has("help")) {
    std::fputs(usageText().c_str(), stdout);
    return kExitOk;
  }
  RunOptions options;
  if (std::string error = parseRunOptions(args, options); !error.empty())
    return usageError("run: " + error);

  // Inputs are checked against the function's signature before compiling,
  // so a wrong file fails fast and names the argument it was meant for.
  Expected<Spec> spec = Spec::fromFile(options.file);
  if (!spec)
    return fail(spec.error());
  Expected<FunctionSignature> signature = describeFunction(spec->source(), options.file);
  if (!signature)
    return fail(signature.error());
  const FunctionSignature &sig = *signature;
  size_t given = options.inputs.size();
  if (given < sig.requiredArguments || given > sig.arguments.size())
    return fail(options.file + ": @" + sig.name + " takes " +
                (sig.requiredArguments == sig.arguments.size()
                     ? std::to_string(sig.arguments.size())
                     : std::to_string(sig.requiredArguments) + " to " +
                           std::to_string(sig.arguments.size())) +
                " inputs (--input=@FILE.npy, in argument order), got " + std::to_string(given) +
                "; its arguments:\n" + listArguments(sig));
  if (options.target.kind == Target::Kind::Nvidia)
    return runNvidia({options.file, options.target.arch, *spec, sig, options.inputs, options.output,
                      options.check});
  std::vector<HostTensor> inputs(given);
  for (size_t i = 0; i < given; ++i) {
    std::string note;
    if (std::string error = loadArgument(options.inputs[i], sig, i, inputs[i], note);
        !error.empty())
      return fail(error);
    if (!note.empty())
      std::fprintf(stderr, "%s\n", note.c_str());
  }
  if (options.backward) {
    if (options.target.kind == Target::Kind::Nvidia || options.output || options.repeat > 0)
      return usageError("run: --backward runs on the host and writes --grads=DIR (not "
                        "--output, --repeat or --target=nvidia)");
    uint32_t seed = std::random_device{}();
    return runBackward(
        {options.file, options.gradOutput, options.gradsDir, options.threads, options.check, seed},
        *spec, inputs);
  }

  Runtime runtime(RuntimeOptions{options.threads});
  Expected<X86Kernel> kernel = runtime.getX86(*spec, options.tiles);
  if (!kernel)
    return fail(kernel.error());
  // A kernel on f16/bf16 inputs reads 16-bit values; --check's reference
  // gets the same rounded values.
  // Each float input goes in its own argument's dtype: an f32 encoding
  // operand (a T5 table, a position scale) of a 16-bit kernel stays f32.
  std::vector<npy::Array> narrowInputs(inputs.size());
  std::vector<TensorView> views;
  const std::vector<KernelArgument> &arguments = kernel->signature().arguments;
  for (size_t i = 0; i < inputs.size(); ++i) {
    HostTensor &input = inputs[i];
    DType wanted = i < arguments.size() ? arguments[i].dtype : kernel->dtype();
    if (input.isInteger || wanted == DType::F32) {
      views.push_back(input.view());
      continue;
    }
    narrowInputs[i] = npy::fromFloat32(input.floats, input.shape, npyDtype(wanted));
    input.floats = npy::toFloat32(narrowInputs[i]);
    views.push_back({narrowInputs[i].bytes.data(), wanted, input.shape, {}});
  }
  // --check's reference reads the inputs as they are before the run: a
  // linear attention's carried state is updated in place by it.
  std::vector<ReferenceArgument> reference;
  if (options.check)
    for (const HostTensor &input : inputs)
      reference.push_back(input.referenceArgument());
  // The call's shape: a `?` length is the one the inputs give.
  Expected<Shape> callShape = kernel->callShape(views);
  if (!callShape)
    return fail(options.file + ": " + callShape.error());
  const Shape &shape = *callShape;
  std::vector<int64_t> outShape = {shape.batch, shape.queryHeads, shape.querySeq, shape.valueDim};
  if (kernel->signature().embeddingTransform()) // [b, s, d]: one head
    outShape = {shape.batch, shape.querySeq, shape.valueDim};
  if (kernel->signature().embeddingGradient()) // a table's [rows, d]
    outShape = {shape.querySeq, shape.valueDim};
  // The scale's [1] or [b]; a materialized bias's tensor's shape.
  if (kernel->signature().ropeScaleGradient() || kernel->signature().scoreBiasGradient())
    for (const KernelArgument &argument : kernel->signature().arguments)
      if (argument.role == ArgumentRole::EncodingOperand)
        outShape = argument.shape;
  int64_t outElements = 1;
  for (int64_t extent : outShape)
    outElements *= extent;
  std::vector<float> out(outElements, std::numeric_limits<float>::quiet_NaN());
  // A 16-bit output is poisoned with 0xffff (NaN), then widened for --output.
  bool narrowOut = kernel->outputDtype() != DType::F32;
  std::vector<uint8_t> out16(narrowOut ? out.size() * 2 : 0, 0xff);
  TensorView outView{narrowOut ? static_cast<void *>(out16.data()) : out.data(),
                     kernel->outputDtype(),
                     outShape,
                     {}};

  auto start = std::chrono::steady_clock::now();
  if (Status status = kernel->run(views, outView); !status)
    return fail(options.file + ": " + status.message());
  double runMs = millisecondsSince(start);
  if (narrowOut)
    out = npy::toFloat32(npy::Array{npyDtype(kernel->outputDtype()), outShape, out16});
  // Tiles are an attention kernel's; a standalone kernel has none.
  std::string tiles =
      kernel->signature().standaloneTransform() || kernel->signature().materializedBias ||
              kernel->signature().embeddingGradient() || kernel->signature().scoreBiasGradient()
          ? std::string("standalone kernel")
          : "tiles " + std::to_string(kernel->tiles().queryTile) + "x" +
                std::to_string(kernel->tiles().keyTile);
  std::fprintf(stderr, "pejit: %s %.1f ms (%s), run %.3f ms\n",
               kernel->loadedFromDisk() ? "loaded from the disk cache in" : "compile",
               kernel->compileMilliseconds(), tiles.c_str(), runMs);

  if (options.output) {
    if (std::string error = writeFloat32(*options.output, out, outShape); !error.empty())
      return fail(error);
  } else {
    std::fprintf(stderr, "pejit: no --output=@FILE.npy given: the result is not saved\n");
  }
  // --check compares the first run's output (a repeat with a carried state
  // runs on from the updated state).
  const std::vector<float> firstOut = options.check ? out : std::vector<float>();

  if (options.repeat > 0) {
    std::vector<double> times;
    for (int64_t r = 0; r < options.repeat; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      if (Status status = kernel->run(views, outView); !status)
        return fail(options.file + ": " + status.message());
      times.push_back(millisecondsSince(t0));
    }
    std::sort(times.begin(), times.end());
    double median = times.size() % 2
                        ? times[times.size() / 2]
                        : 0.5 * (times[times.size() / 2 - 1] + times[times.size() / 2]);
    if (kernel->signature().standaloneTransform() || kernel->signature().materializedBias) {
      // Memory-bound: the bytes written per second, not an attention's
      // FLOP count (which does not apply).
      double written = static_cast<double>(dtypeBytes(kernel->outputDtype()));
      for (int64_t extent : outShape)
        written *= static_cast<double>(extent);
      std::printf("median %.3f ms over %lld runs, %.2f GB/s of output written\n", median,
                  static_cast<long long>(options.repeat), written / (median * 1e6));
    } else {
      double flops = 4.0 * shape.batch * shape.queryHeads * shape.querySeq * shape.keySeq *
                     shape.headDim * (sig.causal ? 0.5 : 1.0);
      std::printf("median %.3f ms over %lld runs, %.2f GFLOP/s\n", median,
                  static_cast<long long>(options.repeat), flops / (median * 1e6));
    }
  }

  if (options.check) {
    Expected<ref::Tensor> expected = interpretReference(spec->source(), reference, options.file);
    if (!expected)
      return fail("--check: " + expected.error());
    if (expected->data.size() != firstOut.size())
      return fail("--check: the reference result " + ref::shapeToString(expected->shape) +
                  " does not match the kernel's output");
    double error = relativeError(firstOut, *expected);
    bool half = kernel->dtype() != DType::F32 || kernel->outputDtype() != DType::F32;
    double tolerance = half ? kHalfTolerance : kTolerance;
    const char *toleranceText = half ? "1e-2, f16/bf16" : "1e-4";
    std::printf("max relative error: %.3g (tolerance %s)\n", error, toleranceText);
    if (!(error <= tolerance))
      return fail("--check failed: max relative error " + std::to_string(error) +
                  " is above the tolerance " + toleranceText);
  }
  return kExitOk;
}

} // namespace pejit::cli
