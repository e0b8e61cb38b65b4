// NvidiaKernel: a kernel the nvidia stage table compiled (pejit/compiler/backends/
// nvidia), kept as its artifact; NvidiaCall.cpp runs it through the CUDA
// driver (pejit/runtime/cuda, loaded with dlopen).
#include "pejit/runtime/CallParts.h"
#include "pejit/runtime/NvidiaKernelImpl.h"

#include "pejit/compiler/backends/nvidia/NvidiaBackend.h"
#include "pejit/core/KernelMeta.h"

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
Expected<Shape> NvidiaKernel::callShape(const std::vector<TensorView> &inputs) const {
  return callShapeOf(*impl_, inputs);
}
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
Status NvidiaKernel::runBackward(const std::vector<TensorView> &inputs,
                                 const std::vector<TensorView> &gradients) const {
  return impl_->runBackward(inputs, gradients);
}

} // namespace pejit
