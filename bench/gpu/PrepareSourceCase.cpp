// bench/gpu/GpuSourceCases.h, prepare half: compiles a source case for the
// GPU, draws its inputs and writes them, the kernel's position tables and
// the float64 reference (from the reference interpreter) into the bundle.
#include "bench/gpu/PrepareSourceCase.h"

#include "pejit/core/KernelMeta.h"
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "pejit/runtime/Views.h"
#include "pejit/runtime/npy/Npy.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <random>

namespace pejit::gpucheck {

namespace {

bool writeBytes(const std::string &path, const void *data, size_t bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(static_cast<const char *>(data), static_cast<std::streamsize>(bytes));
  return static_cast<bool>(file);
}

npy::DType npyType(DType type) {
  switch (type) {
  case DType::F16:
    return npy::DType::F16;
  case DType::BF16:
    return npy::DType::BF16;
  default:
    return npy::DType::F32;
  }
}

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Compiles `spec` for `arch` and writes NAME.ptx, NAME.cubin (when ptxas
/// is here), NAME.meta and, for a shape class, NAME.call; the kernel's
/// description and the call's shape come out. Returns "" or the error.
std::string writeKernel(Runtime &runtime, const Spec &spec, const std::string &arch,
                        const std::string &dir, const std::string &name,
                        const std::vector<int64_t> &call, KernelDescription &description,
                        Shape &shape) {
  Expected<NvidiaKernel> kernel = runtime.getNvidia(spec, arch);
  if (!kernel)
    return kernel.error();
  NvidiaLaunch launch;
  if (Status status = readNvidiaMeta(kernel->launchMeta(), launch, description); !status)
    return status.message();
  std::ofstream(sourceCaseFile(dir, name, "ptx"), std::ios::binary) << kernel->ptx();
  if (!kernel->cubin().empty())
    std::ofstream(sourceCaseFile(dir, name, "cubin"), std::ios::binary) << kernel->cubin();
  std::ofstream(sourceCaseFile(dir, name, "meta")) << kernel->launchMeta();
  // A shape class's inputs at the case's call (NAME.call says which).
  shape = shapeAtCall(description.shape, call);
  if (shape.hasDynamicDims())
    return "the kernel has `?` lengths: give the case its call's b, sq and skv";
  if (!call.empty())
    std::ofstream(sourceCaseFile(dir, name, "call"))
        << shape.batch << " " << shape.querySeq << " " << shape.keySeq << "\n";
  return "";
}

/// Position ids of shape `shape` ([.., seq]) from `first`: restarting
/// every 50 (packed sequences) and differing per batch row and axis, so
/// relative_to = position and M-RoPE read real ids.
std::vector<int64_t> drawIds(const std::vector<int64_t> &shape, int64_t first) {
  int64_t seq = shape.back(), n = count(shape);
  std::vector<int64_t> ids(n);
  for (int64_t e = 0; e < n; ++e)
    ids[e] = (first + e % seq) % 50 + 3 * (e / seq);
  return ids;
}

/// The kernel's position tables, the defaults where the ids are null
/// (queries at skv - sq + i), as NAME.query_positions and .key_positions.
std::string writePositionTables(const KernelDescription &description, const Shape &shape,
                                const TensorView *queryIds, const TensorView *keyIds,
                                const std::string &dir, const std::string &name) {
  std::vector<int64_t> queryTable, keyTable;
  if (Status st = buildPositionTable(queryIds, "query positions", description.queryPositionRows,
                                     shape.querySeq, shape.batch, shape.keySeq - shape.querySeq,
                                     queryTable, description.positionAxes);
      !st)
    return st.message();
  if (Status st =
          buildPositionTable(keyIds, "key positions", description.keyPositionRows, shape.keySeq,
                             shape.batch, 0, keyTable, description.positionAxes);
      !st)
    return st.message();
  if (!writeBytes(sourceCaseFile(dir, name, "query_positions"), queryTable.data(),
                  queryTable.size() * 8) ||
      !writeBytes(sourceCaseFile(dir, name, "key_positions"), keyTable.data(), keyTable.size() * 8))
    return "cannot write " + name + "'s position tables";
  return "";
}

/// `values` rounded to `dtype` (what the GPU sees), written as NAME.part;
/// `seen` is what was written, in float64.
std::string writeInput(const std::vector<float> &values, const std::vector<int64_t> &shape,
                       DType dtype, const std::string &dir, const std::string &name,
                       const std::string &part, ref::Tensor &seen) {
  npy::Array stored = npy::fromFloat32(values, shape, npyType(dtype));
  std::vector<float> rounded = npy::toFloat32(stored);
  seen = ref::Tensor(shape, std::vector<double>(rounded.begin(), rounded.end()));
  if (!writeBytes(sourceCaseFile(dir, name, part), stored.bytes.data(), stored.bytes.size()))
    return "cannot write " + sourceCaseFile(dir, name, part);
  return "";
}

} // namespace

std::string prepareSourceCase(Runtime &runtime, const GpuSourceCase &c, const std::string &dir,
                              const std::string &arch) {
  Expected<Spec> spec = Spec::fromText(c.source, c.name);
  if (!spec)
    return spec.error();
  KernelDescription description;
  Shape shape;
  if (std::string error =
          writeKernel(runtime, *spec, arch, dir, c.name, c.call, description, shape);
      !error.empty())
    return error;

  std::mt19937 engine(
      static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<ReferenceArgument> reference;
  // Position ids: restarting every 50 (packed sequences) and differing per
  // batch row and axis, so relative_to = position and M-RoPE read real ids.
  std::vector<std::vector<int64_t>> ids(description.signature.arguments.size());
  const TensorView *queryIds = nullptr, *keyIds = nullptr;
  std::vector<TensorView> idViews(ids.size());
  int operand = 0;
  for (size_t a = 0; a < description.signature.arguments.size(); ++a) {
    KernelArgument arg = description.signature.arguments[a];
    arg.shape = argumentDimsAt(arg, shape);
    int64_t n = count(arg.shape);
    if (arg.role == ArgumentRole::EmbedTokens) {
      // Tokens: every row of the token table, in turn (the bundle's
      // NAME.tokens, i64), not a position table.
      int64_t vocab = 1;
      for (const KernelArgument &other : description.signature.arguments)
        if (other.role == ArgumentRole::EmbedTable)
          vocab = other.shape[0];
      ids[a].resize(n);
      for (int64_t e = 0; e < n; ++e)
        ids[a][e] = (7 * e + 3) % vocab;
      reference.push_back(ref::PositionIds(arg.shape, ids[a]));
      if (!writeBytes(sourceCaseFile(dir, c.name, "tokens"), ids[a].data(), n * 8))
        return "cannot write " + sourceCaseFile(dir, c.name, "tokens");
      continue;
    }
    if (arg.dtype == DType::I32 || arg.dtype == DType::I64) {
      int64_t first = arg.role == ArgumentRole::QueryPositions ? shape.keySeq - shape.querySeq : 0;
      ids[a] = drawIds(arg.shape, first);
      reference.push_back(ref::PositionIds(arg.shape, ids[a]));
      // The ids are passed as i64 whatever the argument's integer type.
      idViews[a] = TensorView{ids[a].data(), DType::I64, arg.shape, {}};
      if (arg.readsQueryPositions())
        queryIds = &idViews[a];
      if (arg.role == ArgumentRole::TransformPositions) // a standalone kernel's: both
        queryIds = keyIds = &idViews[a];
      if (arg.readsKeyPositions())
        keyIds = &idViews[a];
      continue;
    }
    std::vector<float> values(n);
    for (float &x : values)
      x = dist(engine);
    ref::Tensor seen;
    if (std::string error = writeInput(values, arg.shape, arg.dtype, dir, c.name,
                                       sourceCasePart(arg.role, operand), seen);
        !error.empty())
      return error;
    reference.push_back(std::move(seen));
  }
  if (std::string error = writePositionTables(description, shape, queryIds, keyIds, dir, c.name);
      !error.empty())
    return error;

  Expected<ref::Tensor> expected = interpretReference(c.source, reference, c.name);
  if (!expected)
    return expected.error();
  std::vector<float> narrow(expected->data.begin(), expected->data.end());
  if (!writeBytes(sourceCaseFile(dir, c.name, "expected"), narrow.data(), narrow.size() * 4))
    return "cannot write " + sourceCaseFile(dir, c.name, "expected");
  return "";
}

std::string prepareBackwardCase(Runtime &runtime, const GpuBackwardCase &c, const std::string &dir,
                                const std::string &arch) {
  Expected<Spec> forward = Spec::fromText(c.source, c.name);
  if (!forward)
    return forward.error();
  Expected<Spec> backward = Spec::backwardOf(*forward);
  if (!backward)
    return backward.error();
  KernelDescription description;
  Shape shape;
  if (std::string error =
          writeKernel(runtime, *backward, arch, dir, c.name, c.call, description, shape);
      !error.empty())
    return error;

  std::mt19937 engine(
      static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Inputs by role, each rounded to its dtype first (what the GPU sees);
  // O comes from the reference below.
  std::map<ArgumentRole, ref::Tensor> inputs;
  std::map<std::string, ref::Tensor> operands; // by signature name
  std::vector<int64_t> outputShape;
  DType outputType = DType::F32;
  int operand = 0;
  // Given ids as a source case's: restarting every 50 (packed sequences),
  // differing per batch row; the defaults otherwise.
  std::vector<int64_t> queryIdData, keyIdData;
  std::vector<int64_t> queryIdShape, keyIdShape;
  TensorView queryIdView, keyIdView;
  const TensorView *queryIds = nullptr, *keyIds = nullptr;
  for (KernelArgument arg : description.signature.arguments) {
    arg.shape = argumentDimsAt(arg, shape);
    if (arg.dtype == DType::I32 || arg.dtype == DType::I64) {
      bool query = arg.readsQueryPositions();
      std::vector<int64_t> &data = query ? queryIdData : keyIdData;
      data = drawIds(arg.shape, query ? shape.keySeq - shape.querySeq : 0);
      (query ? queryIdShape : keyIdShape) = arg.shape;
      (query ? queryIdView : keyIdView) = TensorView{data.data(), DType::I64, arg.shape, {}};
      (query ? queryIds : keyIds) = query ? &queryIdView : &keyIdView;
      if (arg.readsQueryPositions() && arg.readsKeyPositions()) {
        keyIdData = data;
        keyIdShape = arg.shape;
        keyIdView = TensorView{keyIdData.data(), DType::I64, arg.shape, {}};
        keyIds = &keyIdView;
      }
      continue;
    }
    if (arg.role == ArgumentRole::Output) {
      outputShape = arg.shape;
      outputType = arg.dtype;
      continue;
    }
    std::vector<float> values(count(arg.shape));
    for (float &x : values)
      x = dist(engine);
    // Slopes near ALiBi's own and a position scale near 1: what training
    // moves them to.
    if (arg.name == "alibi_slopes") {
      std::vector<double> slopes = ref::alibiSlopes(static_cast<int64_t>(values.size()));
      for (size_t h = 0; h < values.size(); ++h)
        values[h] = static_cast<float>(slopes[h] * (1.0 + 0.25 * values[h]));
    }
    if (arg.name == "rope_position_scale")
      for (float &x : values)
        x = 1.0f + 0.5f * x;
    ref::Tensor &tensor =
        arg.role == ArgumentRole::EncodingOperand ? operands[arg.name] : inputs[arg.role];
    if (std::string error = writeInput(values, arg.shape, arg.dtype, dir, c.name,
                                       sourceCasePart(arg.role, operand), tensor);
        !error.empty())
      return error;
  }
  if (std::string error = writePositionTables(description, shape, queryIds, keyIds, dir, c.name);
      !error.empty())
    return error;

  // The float64 reference: rotate, attend, differentiate, rotate back.
  const ref::Tensor &q = inputs[ArgumentRole::Query], &k = inputs[ArgumentRole::Key],
                    &v = inputs[ArgumentRole::Value], &dOut = inputs[ArgumentRole::OutputGradient];
  ref::PositionIds queryPositions = queryIds
                                        ? ref::PositionIds(queryIdShape, queryIdData)
                                        : ref::defaultQueryPositions(shape.querySeq, shape.keySeq);
  ref::PositionIds keyPositions =
      keyIds ? ref::PositionIds(keyIdShape, keyIdData) : ref::defaultKeyPositions(shape.keySeq);
  int64_t seqLen = ref::maxPositionPlusOne(queryPositions, keyPositions);
  std::vector<double> scale;
  if (c.ropeScale)
    scale = operands["rope_position_scale"].data;
  ref::Tensor qr = c.rope ? ref::applyRope(*c.rope, q, queryPositions, seqLen, scale) : q;
  ref::Tensor kr = c.rope ? ref::applyRope(*c.rope, k, keyPositions, seqLen, scale) : k;
  // The score biases' distances: by index, or by the ids (relative_to =
  // position).
  ref::RelativeDistance distance{shape.querySeq, shape.keySeq};
  if (c.byPosition) {
    distance.queryPositions = &queryPositions;
    distance.keyPositions = &keyPositions;
  }
  ref::AttentionOptions options;
  options.causal = c.causal;
  options.window = c.window;
  options.softcap = c.softcap;
  ref::Tensor bias;
  if (c.alibiHeads)
    bias = ref::alibiBias(*c.alibiHeads, 0, shape.queryHeads, ref::AlibiForm::Causal, distance,
                          c.learnedSlopes ? operands["alibi_slopes"].data : std::vector<double>{});
  if (c.t5) { // added to ALiBi's when both are there (one distance, one shape)
    ref::Tensor t5 = ref::t5Bias(operands["t5_table"], c.t5->bidirectional, c.t5->buckets,
                                 c.t5->maxDistance, distance);
    if (c.alibiHeads)
      for (size_t e = 0; e < t5.data.size(); ++e)
        t5.data[e] += bias.data[e];
    bias = t5;
  }
  if (c.biasTensor)
    bias = operands["bias"];
  if (c.alibiHeads || c.t5 || c.biasTensor)
    options.bias = &bias;
  // Shaw's terms: the key term from the rotated q, the value term by bucket.
  ref::Tensor keyTerm;
  if (c.shawKeyClip > 0) {
    keyTerm = ref::relativeKeyTerm(qr, operands["shaw_key_table"], c.shawKeyClip, distance);
    options.keyTerm = &keyTerm;
  }
  if (c.shawValueClip > 0) {
    options.bucketedValueTerm.rows = &operands["shaw_value_table"];
    options.bucketedValueTerm.bucket = [&](int64_t, int64_t i, int64_t j) {
      return ref::shawRelativeIndex(i, j, c.shawValueClip, shape.querySeq, shape.keySeq) +
             c.shawValueClip;
    };
  }
  ref::Tensor o = ref::attention(qr, kr, v, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::Tensor dq = want.dq, dk = want.dk;
  std::map<std::string, ref::Tensor> operandGrads;
  if (c.shawKeyClip > 0) { // q reaches the loss through q . k and q . a^K
    ref::RelativeKeyTermGradients keyGrads = ref::relativeKeyTermBackward(
        qr, operands["shaw_key_table"], c.shawKeyClip, distance, want.dKeyTerm);
    for (size_t n = 0; n < want.dq.data.size(); ++n)
      want.dq.data[n] += keyGrads.dq.data[n];
    dq = want.dq;
    operandGrads["shaw_key_table"] = keyGrads.dKeyTable;
  }
  if (c.shawValueClip > 0)
    operandGrads["shaw_value_table"] = want.dValueRows;
  if (c.biasTensor)
    operandGrads["bias"] = want.dBias;
  // The operands' gradients, by the names the signature gives them.
  if (c.rope) {
    ref::RopeGradients gq =
        ref::applyRopeBackward(*c.rope, q, want.dq, queryPositions, seqLen, scale);
    ref::RopeGradients gk =
        ref::applyRopeBackward(*c.rope, k, want.dk, keyPositions, seqLen, scale);
    dq = gq.dx;
    dk = gk.dx;
    if (c.ropeScale)
      operandGrads["rope_position_scale"] =
          ref::Tensor({1}, {gq.dPositionScale[0] + gk.dPositionScale[0]});
  }
  if (c.learnedSlopes)
    operandGrads["alibi_slopes"] =
        ref::Tensor({shape.queryHeads},
                    ref::alibiSlopeGradient(want.dScores, ref::AlibiForm::Causal, distance));
  if (c.t5)
    operandGrads["t5_table"] = ref::t5TableGradient(want.dScores, c.t5->bidirectional,
                                                    c.t5->buckets, c.t5->maxDistance, distance);
  if (o.shape != outputShape)
    return "the reference's O does not have the kernel's output shape";
  npy::Array storedO = npy::fromFloat32(std::vector<float>(o.data.begin(), o.data.end()),
                                        outputShape, npyType(outputType));
  if (!writeBytes(sourceCaseFile(dir, c.name, "output"), storedO.bytes.data(),
                  storedO.bytes.size()))
    return "cannot write " + sourceCaseFile(dir, c.name, "output");
  std::vector<std::pair<const ref::Tensor *, std::string>> gradients = {
      {&dq, "expected_dq"}, {&dk, "expected_dk"}, {&want.dv, "expected_dv"}};
  for (unsigned slot : description.signature.operandGradients)
    for (const KernelArgument &arg : description.signature.arguments)
      if (arg.role == ArgumentRole::EncodingOperand &&
          std::find(arg.slots.begin(), arg.slots.end(), slot) != arg.slots.end()) {
        if (!operandGrads.count(arg.name))
          return "the case's recipe has no gradient of " + arg.name;
        gradients.push_back({&operandGrads[arg.name], "expected_d" + arg.name});
      }
  for (auto [tensor, part] : gradients) {
    std::vector<float> narrow(tensor->data.begin(), tensor->data.end());
    if (!writeBytes(sourceCaseFile(dir, c.name, part), narrow.data(), narrow.size() * 4))
      return "cannot write " + sourceCaseFile(dir, c.name, part);
  }
  return "";
}

} // namespace pejit::gpucheck
