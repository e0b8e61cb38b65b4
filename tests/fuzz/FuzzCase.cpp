#include "tests/fuzz/FuzzCase.h"

#include "pejit/compiler/Registration.h"
#include "pejit/compiler/SourceNesting.h"
#include "pejit/dialects/attn/AttnOps.h"
#include "pejit/dialects/pe/PEAttrs.h"
#include "pejit/dialects/pe/RopeConfig.h"
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/npy/Npy.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

namespace pejit::fuzz {

const char *verdictName(Verdict verdict) {
  switch (verdict) {
  case Verdict::RejectedParse:
    return "rejected-parse";
  case Verdict::Parsed:
    return "parsed";
  case Verdict::RejectedCompile:
    return "rejected-compile";
  case Verdict::RejectedRun:
    return "rejected-run";
  case Verdict::Compiled:
    return "compiled";
  case Verdict::Checked:
    return "checked";
  case Verdict::Bounded:
    return "bounded";
  case Verdict::Overflows:
    return "overflows";
  case Verdict::RoundtripFailure:
    return "roundtrip-failure";
  case Verdict::WrongResult:
    return "wrong-result";
  }
  return "?";
}

bool isFailure(Verdict verdict) {
  return verdict == Verdict::RoundtripFailure || verdict == Verdict::WrongResult;
}

namespace {

std::string firstLine(const std::string &text) { return text.substr(0, text.find('\n')); }

/// Parses `text` in `context`; the first diagnostic goes to `error`.
mlir::OwningOpRef<mlir::ModuleOp> parse(mlir::MLIRContext &context, const std::string &text,
                                        std::string &error) {
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (error.empty())
      error = diag.str();
    return mlir::success();
  });
  return mlir::parseSourceString<mlir::ModuleOp>(text, &context);
}

std::string print(mlir::ModuleOp module, bool generic) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  module->print(os, flags);
  return text;
}

std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  auto context =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  return context;
}

/// Printed IR must parse back and print the same, from the custom and from
/// the generic form. Empty, or what differs.
std::string roundtripProblem(mlir::ModuleOp module) {
  std::string custom = print(module, false);
  for (bool generic : {false, true}) {
    std::string printed = generic ? print(module, true) : custom, error;
    auto context = makeContext();
    mlir::OwningOpRef<mlir::ModuleOp> again = parse(*context, printed, error);
    if (!again)
      return std::string(generic ? "generic" : "custom") +
             " form does not parse back: " + firstLine(error);
    if (print(*again, false) != custom)
      return std::string(generic ? "generic" : "custom") +
             " form prints differently after a roundtrip";
  }
  return "";
}

/// The largest score magnitude the attention can produce on inputs in
/// [-1, 1] (RoPE pairs rotate to at most sqrt 2 per channel, times the
/// attention factor), plus ALiBi's largest bias. Above ~200, f32 rounding of
/// the scores (~2^-22 relative) moves the softmax by more than 1e-4, and
/// only bounds can be checked. `raw`: the largest scale q.k before any
/// softcap, which the kernels compute in f32 (docs/semantics.md).
double scoreMagnitude(mlir::ModuleOp module, double &raw) {
  double magnitude = 0;
  raw = 0;
  module->walk([&](attn::AttentionOp op) {
    auto q = mlir::cast<mlir::RankedTensorType>(op.getQuery().getType());
    auto k = mlir::cast<mlir::RankedTensorType>(op.getKey().getType());
    if (mlir::ShapedType::isDynamic(q.getDimSize(3)))
      return; // never compiled: nothing runs
    // A `?` length runs at most 200 (drawInputs' longest).
    auto length = [](mlir::RankedTensorType t) {
      return t.isDynamicDim(2) ? 200.0 : static_cast<double>(t.getDimSize(2));
    };
    double d = static_cast<double>(q.getDimSize(3));
    double factor = 1.0, slope = 0.0;
    bool byPosition = false; // ALiBi distances from ids: up to 2^32

    module->walk([&](mlir::Operation *inner) {
      auto consider = [&](mlir::Attribute attr) {
        if (auto rope = mlir::dyn_cast<pe::RopeAttr>(attr)) {
          ref::RopeConfig config = pe::toReferenceConfig(rope);
          for (int64_t len : {int64_t(0), config.scaling.originalMaxPosition + 1})
            factor = std::max(
                factor,
                std::fabs(
                    ref::computeRopeFrequencies(config, q.getDimSize(3), len).attentionFactor));
        } else if (auto alibi = mlir::dyn_cast<pe::AlibiAttr>(attr)) {
          std::vector<double> slopes =
              alibi.getSlopes().empty()
                  ? ref::alibiSlopes(alibi.getNumHeads())
                  : std::vector<double>(alibi.getSlopes().begin(), alibi.getSlopes().end());
          for (double s : slopes)
            slope = std::max(slope, std::fabs(s));
          byPosition = byPosition || alibi.readsPositions();
        }
      };
      for (mlir::NamedAttribute named : inner->getAttrs()) {
        consider(named.getValue());
        if (auto list = mlir::dyn_cast<mlir::ArrayAttr>(named.getValue()))
          for (mlir::Attribute item : list)
            consider(item);
      }
    });
    double dot = op.getEffectiveScale() * 2.0 * factor * factor * d;
    raw = std::max(raw, std::fabs(dot));
    if (mlir::FloatAttr softcap = op.getSoftcapAttr())
      dot = std::min(dot, softcap.getValueAsDouble());
    double lengths = byPosition ? 4294967296.0 : length(q) + length(k);
    magnitude = std::max(magnitude, dot + slope * lengths);
  });
  return magnitude;
}

struct Inputs {
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<int64_t>> ids;
  std::vector<npy::Array> narrow; // 16-bit copies the kernel reads
  std::vector<TensorView> views;
  std::vector<ReferenceArgument> reference;
  std::vector<std::vector<int64_t>> shapes; // as drawn: `?` dims bound
};

int64_t elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Random inputs for the signature's arguments (trailing position ids
/// omitted now and then): floats in [-1, 1], rounded to the kernel's dtype;
/// position ids in a random range, rarely beyond 2^31. Every `?` dim (-1,
/// a length of a shape class) is bound to one drawn length, so the `?`
/// lengths of Q, K, V and the ids agree.
Inputs drawInputs(const FunctionSignature &sig, DType dtype, std::mt19937_64 &rng) {
  Inputs in;
  const int64_t lengths[] = {1, 7, 65, 200};
  int64_t length = lengths[rng() % 4];
  size_t count = sig.arguments.size();
  if (count > sig.requiredArguments && rng() % 3 == 0)
    count = sig.requiredArguments;
  in.floats.resize(count);
  in.ids.resize(count);
  in.narrow.resize(count);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int64_t ranges[] = {16, 4096, int64_t(1) << 20, (int64_t(1) << 31) - 1, int64_t(1) << 32};
  for (size_t i = 0; i < count; ++i) {
    ArgumentInfo arg = sig.arguments[i];
    for (int64_t &dim : arg.shape)
      dim = dim == -1 ? length : dim;
    in.shapes.push_back(arg.shape);
    int64_t n = elements(arg.shape);
    if (arg.isInteger) {
      int64_t range = ranges[rng() % (rng() % 50 == 0 ? 5 : 4)];
      bool sequential = rng() % 2 == 0;
      for (int64_t j = 0; j < n; ++j)
        in.ids[i].push_back(sequential ? j % range : static_cast<int64_t>(rng() % range));
      in.views.push_back({in.ids[i].data(), DType::I64, arg.shape, {}});
      in.reference.push_back(ref::PositionIds(arg.shape, in.ids[i]));
      continue;
    }
    for (int64_t j = 0; j < n; ++j)
      in.floats[i].push_back(unit(rng));
    // Each argument in its own element type: an f32 operand (a position
    // scale) of a 16-bit kernel stays f32.
    DType own = arg.elementType == "f16"    ? DType::F16
                : arg.elementType == "bf16" ? DType::BF16
                : arg.elementType == "f32"  ? DType::F32
                                            : dtype;
    if (own == DType::F32) {
      in.views.push_back({in.floats[i].data(), DType::F32, arg.shape, {}});
    } else {
      npy::DType narrow = own == DType::F16 ? npy::DType::F16 : npy::DType::BF16;
      in.narrow[i] = npy::fromFloat32(in.floats[i], arg.shape, narrow);
      in.floats[i] = npy::toFloat32(in.narrow[i]);
      in.views.push_back({in.narrow[i].bytes.data(), own, arg.shape, {}});
    }
    in.reference.push_back(
        ref::Tensor(arg.shape, std::vector<double>(in.floats[i].begin(), in.floats[i].end())));
  }
  return in;
}

/// Ill-conditioned attention: every output finite and within the range of
/// its KV head's values, widened per channel by each value-term table's
/// (`valueTerms`, [m, dv] each: their rows add through the probabilities);
/// rows without a visible key (reference 0) zero, and no other row all zero.
std::string boundsProblem(const std::vector<float> &out, const ref::Tensor &expected,
                          const std::vector<float> &value, const std::vector<int64_t> &vShape,
                          int64_t queryHeads, const std::vector<const ref::Tensor *> &valueTerms) {
  int64_t b = vShape[0], hkv = vShape[1], skv = vShape[2], dv = vShape[3];
  int64_t sq = expected.shape[2], group = queryHeads / hkv;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < queryHeads; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        bool refZero = true, outZero = true;
        for (int64_t c = 0; c < dv; ++c) {
          size_t at = static_cast<size_t>(((bi * queryHeads + h) * sq + i) * dv + c);
          refZero &= expected.data[at] == 0.0;
          outZero &= out[at] == 0.0;
        }
        if (refZero != outZero)
          return "row [" + std::to_string(bi) + ", " + std::to_string(h) + ", " +
                 std::to_string(i) + "] is " +
                 (outZero ? "zero, the reference's is not" : "not zero, the reference's is");
        if (refZero)
          continue; // a row that sees no key
        for (int64_t c = 0; c < dv; ++c) {
          double lo = INFINITY, hi = -INFINITY;
          for (int64_t j = 0; j < skv; ++j) {
            double x = value[((bi * hkv + h / group) * skv + j) * dv + c];
            lo = std::min(lo, x);
            hi = std::max(hi, x);
          }
          for (const ref::Tensor *table : valueTerms) {
            // A shared [2k+1, dv] table, or head h's rows of a per-head
            // [hq, 2k+1, dv] one.
            double tableLo = INFINITY, tableHi = -INFINITY;
            bool perHead = table->rank() == 3;
            int64_t rows = perHead ? table->dim(1) : table->dim(0);
            for (int64_t m = 0; m < rows; ++m) {
              double x = perHead ? table->at(h, m, c) : table->at(m, c);
              tableLo = std::min(tableLo, x);
              tableHi = std::max(tableHi, x);
            }
            lo += tableLo;
            hi += tableHi;
          }
          size_t at = static_cast<size_t>(((bi * queryHeads + h) * sq + i) * dv + c);
          double x = out[at], slack = 1e-2;
          if (!std::isfinite(x) || x < lo - slack || x > hi + slack)
            return "output [" + std::to_string(bi) + ", " + std::to_string(h) + ", " +
                   std::to_string(i) + ", " + std::to_string(c) + "] = " + std::to_string(x) +
                   " is outside its values' range";
        }
      }
  return "";
}

} // namespace

CaseResult runCase(const std::string &text, uint64_t inputSeed) {
  if (std::optional<std::string> problem = sourceNestingProblem(text, "<fuzz>"))
    return {Verdict::RejectedParse, *problem};
  auto context = makeContext();
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(*context, text, error);
  if (!module)
    return {Verdict::RejectedParse, firstLine(error)};
  if (std::string problem = roundtripProblem(*module); !problem.empty())
    return {Verdict::RoundtripFailure, problem};
  bool hasAttention = false;
  module->walk([&](attn::AttentionOp) { hasAttention = true; });
  if (!hasAttention)
    return {Verdict::Parsed, ""};
  double rawScores = 0;
  double magnitude = scoreMagnitude(*module, rawScores);

  Expected<Spec> spec = Spec::fromText(text, "<fuzz>");
  if (!spec)
    return {Verdict::RejectedCompile, firstLine(spec.error())};
  Runtime runtime(RuntimeOptions{1, ""});
  Expected<X86Kernel> kernel = runtime.getX86(*spec);
  if (!kernel)
    return {Verdict::RejectedCompile, firstLine(kernel.error())};
  Expected<FunctionSignature> signature = describeFunction(spec->source(), "<fuzz>");
  if (!signature)
    return {Verdict::WrongResult,
            "compiled, but the reference cannot read it: " + firstLine(signature.error())};
  // A mutated shape can ask for terabytes (a batch of 2^24): the harness
  // draws at most 2^26 input elements (the longest `?` length is 200).
  double inputElements = 0;
  for (const ArgumentInfo &arg : signature->arguments) {
    double n = 1;
    for (int64_t dim : arg.shape)
      n *= dim == -1 ? 200.0 : static_cast<double>(dim);
    inputElements += n;
  }
  if (inputElements > double(int64_t(1) << 26))
    return {Verdict::Bounded, "inputs of " + std::to_string(inputElements) + " elements"};
  std::mt19937_64 rng(inputSeed);
  Inputs inputs = drawInputs(*signature, kernel->dtype(), rng);
  // The call's shape: the kernel's, `?` lengths as drawn.
  Expected<Shape> call = kernel->callShape(inputs.views);
  if (!call)
    return {Verdict::RejectedRun, firstLine(call.error())};
  const Shape &s = *call;
  double referenceWork = static_cast<double>(s.batch) * s.queryHeads * s.querySeq * s.keySeq *
                         (s.headDim + s.valueDim);
  if (referenceWork > 2e8)
    return {Verdict::Compiled, s.str()};
  std::vector<int64_t> outShape = {s.batch, s.queryHeads, s.querySeq, s.valueDim};
  std::vector<float> out(static_cast<size_t>(elements(outShape)),
                         std::numeric_limits<float>::quiet_NaN());
  bool narrowOut = kernel->outputDtype() != DType::F32;
  std::vector<uint8_t> out16(narrowOut ? out.size() * 2 : 0, 0xff); // 0xffff: NaN
  TensorView outView{narrowOut ? static_cast<void *>(out16.data()) : out.data(),
                     kernel->outputDtype(),
                     outShape,
                     {}};
  if (Status status = kernel->run(inputs.views, outView); !status)
    return {Verdict::RejectedRun, firstLine(status.message())};
  if (narrowOut)
    out = npy::toFloat32(npy::Array{
        kernel->outputDtype() == DType::F16 ? npy::DType::F16 : npy::DType::BF16, outShape, out16});
  // Past f32's range the scores are inf or NaN, softcap or not: the
  // contract holds below it (docs/semantics.md "Softmax"). It ran, without
  // a crash; there is no result to compare.
  if (rawScores > 1e37) {
    char bound[32];
    std::snprintf(bound, sizeof bound, "%.3g", rawScores);
    return {Verdict::Overflows, std::string("scale q.k up to ") + bound};
  }
  Expected<ref::Tensor> expected = interpretReference(spec->source(), inputs.reference, "<fuzz>");
  if (!expected)
    return {Verdict::WrongResult, "ran, but the reference failed: " + firstLine(expected.error())};
  if (expected->data.size() != out.size())
    return {Verdict::WrongResult, "the reference's result has another shape"};

  if (magnitude > 200) {
    size_t valueIndex = 0;
    std::vector<const ref::Tensor *> valueTerms;
    for (size_t i = 0; i < signature->arguments.size(); ++i) {
      if (signature->arguments[i].role == "value")
        valueIndex = i;
      if (signature->arguments[i].valueTerm && i < inputs.reference.size())
        if (const auto *table = std::get_if<ref::Tensor>(&inputs.reference[i]);
            table && (table->rank() == 2 || table->rank() == 3))
          valueTerms.push_back(table);
    }
    std::string problem = boundsProblem(out, *expected, inputs.floats[valueIndex],
                                        inputs.shapes[valueIndex], s.queryHeads, valueTerms);
    if (!problem.empty())
      return {Verdict::WrongResult, "scores up to " + std::to_string(magnitude) + ": " + problem};
    return {Verdict::Bounded, "scores up to " + std::to_string(magnitude)};
  }
  double maxRef = 0, maxErr = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(expected->data[i]));
    double err = std::fabs(out[i] - expected->data[i]);
    maxErr = std::max(maxErr, std::isnan(err) ? INFINITY : err);
  }
  double relative = maxErr / std::max(maxRef, 1e-30);
  // docs/semantics.md "Data types": 1e-4 for f32, 1e-2 for f16/bf16, and
  // 2e-2 for bf16 inputs in avx512_bf16 (Q', K' and P rounded to bf16).
  bool half = kernel->dtype() != DType::F32 || narrowOut;
  bool bf16Products = kernel->dtype() == DType::BF16 && kernel->isa() == X86Isa::Avx512Bf16;
  double tolerance = bf16Products ? 2e-2 : half ? 1e-2 : 1e-4;
  char measured[80];
  std::snprintf(measured, sizeof measured, "relative error %f (tolerance %g)", relative, tolerance);
  if (!(relative <= tolerance))
    return {Verdict::WrongResult, measured};
  return {Verdict::Checked, measured};
}

} // namespace pejit::fuzz
