// NvidiaKernel: a kernel the nvidia stage table compiled (compiler/backends/
// nvidia), kept as its artifact, and run through the CUDA driver
// (runtime/cuda, loaded with dlopen).
#include "runtime/NvidiaKernelImpl.h"

#include "compiler/backends/nvidia/NvidiaBackend.h"
#include "runtime/Views.h"
#include "runtime/core/KernelMeta.h"
#include "runtime/cuda/AttentionLaunch.h"

namespace pejit {

Expected<std::shared_ptr<const NvidiaKernelImpl>>
NvidiaKernelImpl::compile(const Spec &spec, const std::string &arch,
                          const NvidiaTileConfig &tiles) {
  using Result = Expected<std::shared_ptr<const NvidiaKernelImpl>>;
  if (Status status = checkNvidiaArch(arch); !status)
    return Result::error(status.message());
  Expected<KernelArtifact> artifact =
      runStages(nvidiaStages(arch, tiles), spec.source(), spec.name());
  if (!artifact)
    return Result::error(artifact.error());
  return fromArtifact(std::move(*artifact));
}

Expected<std::shared_ptr<const NvidiaKernelImpl>>
NvidiaKernelImpl::fromArtifact(KernelArtifact artifact) {
  using Result = Expected<std::shared_ptr<const NvidiaKernelImpl>>;
  auto meta = artifact.stages.find("nvidia.meta");
  if (meta == artifact.stages.end() || !artifact.stages.count("ptx"))
    return Result::error("not an nvidia kernel entry (no nvidia.meta or ptx)");
  auto kernel = std::make_shared<NvidiaKernelImpl>();
  static_cast<KernelDescription &>(*kernel) = artifact;
  if (Status status = readNvidiaMeta(meta->second, kernel->launch, *kernel); !status)
    return Result::error(status.message());
  if (artifact.objects.empty())
    artifact.objects.push_back(""); // no ptxas: PTX only
  artifact.stages.try_emplace("ptxas-log");
  kernel->artifact = std::move(artifact);
  return std::shared_ptr<const NvidiaKernelImpl>(kernel);
}

Status NvidiaKernelImpl::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  auto fail = [](const std::string &what) { return Status::error("nvidia run: " + what); };
  BoundInputs bound;
  if (Status st = bindInputs(signature, inputs, bound); !st)
    return fail(st.message());
  const TensorView *views[3] = {bound.query, bound.key, bound.value};
  const char *roles[3] = {"query", "key", "value"};
  const Shape &s = shape;
  std::vector<std::vector<int64_t>> dims = {{s.batch, s.queryHeads, s.querySeq, s.headDim},
                                            {s.batch, s.kvHeads, s.keySeq, s.headDim},
                                            {s.batch, s.kvHeads, s.keySeq, s.valueDim}};
  for (int i = 0; i < 3; ++i) {
    if (!views[i] || !views[i]->data)
      return fail(std::string(roles[i]) + " is missing or a null buffer");
    if (views[i]->dtype != inputDtype)
      return fail(std::string(roles[i]) + " is " + dtypeName(views[i]->dtype) +
                  ", the kernel takes " + dtypeName(inputDtype));
    if (views[i]->shape != dims[i] || !views[i]->strides.empty())
      return fail(std::string(roles[i]) + " must be a contiguous tensor of the kernel's shape (" +
                  s.str() + ")");
  }
  std::vector<int64_t> outDims = {s.batch, s.queryHeads, s.querySeq, s.valueDim};
  if (!out.data || out.dtype != outputDtype || out.shape != outDims || !out.strides.empty())
    return fail(std::string("the output must be a contiguous ") + dtypeName(outputDtype) +
                " tensor of shape [" + std::to_string(s.batch) + ", " +
                std::to_string(s.queryHeads) + ", " + std::to_string(s.querySeq) + ", " +
                std::to_string(s.valueDim) + "]");
  std::vector<int64_t> queryPositions, keyPositions;
  if (Status st = buildPositionTable(bound.queryPositions, bound.queryPositionsName,
                                     queryPositionRows, s.querySeq, s.batch, s.keySeq - s.querySeq,
                                     queryPositions, positionAxes);
      !st)
    return st;
  if (Status st = buildPositionTable(bound.keyPositions, bound.keyPositionsName, keyPositionRows,
                                     s.keySeq, s.batch, 0, keyPositions, positionAxes);
      !st)
    return st;

  auto driver = cuda::currentDriver();
  if (!driver)
    return fail(driver.error());
  const std::string &arch = launch.arch;
  std::string deviceArch = (*driver)->device().arch();
  if (deviceArch.size() == arch.size() && deviceArch < arch)
    return fail("the kernel is for " + arch + ", the device is " + deviceArch);
  cuda::AttentionKernelImage image =
      cuda::kernelImage(launch, scratchFloats, cubin().empty() ? ptx() : cubin());
  cuda::AttentionBuffers buffers;
  buffers.query = views[0]->data;
  buffers.key = views[1]->data;
  buffers.value = views[2]->data;
  buffers.queryBytes = denseBytes(dims[0], inputDtype);
  buffers.keyBytes = denseBytes(dims[1], inputDtype);
  buffers.valueBytes = denseBytes(dims[2], inputDtype);
  buffers.queryPositions = &queryPositions;
  buffers.keyPositions = &keyPositions;
  buffers.output = out.data;
  buffers.outputBytes = denseBytes(outDims, outputDtype);
  for (const TensorView *operand : bound.encodingOperands)
    buffers.encodingOperands.push_back({operand->data, denseBytes(operand->shape, operand->dtype)});
  if (cuda::Status st = cuda::runAttention(image, buffers); !st)
    return fail(st.error());
  return Status();
}

const std::vector<std::string> &NvidiaKernel::stageNames() {
  static const std::vector<std::string> names = textStageNames(nvidiaStages());
  return names;
}

Expected<std::string> NvidiaKernelImpl::stage(const std::string &name) const {
  static const StageTable table = nvidiaStages();
  std::map<std::string, std::string> derived; // the nvidia table derives none
  return stageText(table, artifact.stages, name, derived);
}

Expected<std::string> NvidiaKernel::ir(const std::string &stage) const {
  return impl_->stage(stage);
}

const std::string &NvidiaKernel::arch() const { return impl_->launch.arch; }
const std::string &NvidiaKernel::ptx() const { return impl_->ptx(); }
const std::string &NvidiaKernel::cubin() const { return impl_->cubin(); }
const std::string &NvidiaKernel::ptxasLog() const { return impl_->ptxasLog(); }
const std::vector<int64_t> &NvidiaKernel::grid() const { return impl_->launch.grid; }
const std::vector<int64_t> &NvidiaKernel::block() const { return impl_->launch.block; }
std::vector<std::string> NvidiaKernel::arguments() const { return impl_->signature.labels(); }
const KernelSignature &NvidiaKernel::signature() const { return impl_->signature; }
const Shape &NvidiaKernel::shape() const { return impl_->shape; }
DType NvidiaKernel::dtype() const { return impl_->inputDtype; }
DType NvidiaKernel::outputDtype() const { return impl_->outputDtype; }
int64_t NvidiaKernel::scratchFloats() const { return impl_->scratchFloats; }
int64_t NvidiaKernel::splits() const { return impl_->launch.splits; }
int64_t NvidiaKernel::partialOutputFloats() const { return impl_->launch.partialOutputFloats; }
int64_t NvidiaKernel::partialRowFloats() const { return impl_->launch.partialRowFloats; }
const std::vector<int64_t> &NvidiaKernel::combineGrid() const { return impl_->launch.combineGrid; }
const std::string &NvidiaKernel::launchMeta() const {
  return impl_->artifact.stages.at("nvidia.meta");
}
Status NvidiaKernel::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  return impl_->run(inputs, out);
}

} // namespace pejit
