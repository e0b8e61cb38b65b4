// The nvidia stage table (NvidiaBackend.h).
#include "pejit/compiler/backends/nvidia/NvidiaBackend.h"

#include "pejit/compiler/backends/nvidia/NvidiaLowering.h"
#include "pejit/compiler/backends/nvidia/Ptxas.h"
#include "pejit/compiler/passes/Instantiate.h"
#include "pejit/core/KernelMeta.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace pejit {

namespace {

Stage tiledStage(std::string arch, NvidiaTileConfig tiles) {
  Stage stage;
  stage.name = "tiled";
  stage.summary = "attn-instantiate-nvidia-template: the tensor-core gpu.module";
  stage.run = [arch, tiles](CompileState &state) {
    if (mlir::failed(instantiateNvidiaTemplate(*state.module, tiles)))
      return mlir::failure();
    KernelArtifact &artifact = state.artifact;
    readKernelInfo(*state.module, artifact);
    auto info = (*state.module)->getAttrOfType<mlir::DictionaryAttr>(kKernelInfoAttr);
    NvidiaLaunch launch;
    launch.arch = arch;
    launch.block = kernelInfoInts(info, "block");
    launch.splits = kernelInfoInt(info, "splits");
    if (auto kernel = info.getAs<mlir::StringAttr>("kernel"))
      launch.kernel = kernel.str();
    std::vector<int64_t> dims = kernelInfoInts(info, "shape");
    artifact.shape = Shape{dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6]};
    // A static kernel's launch is fixed; a shape class's is planned per
    // call (pejit/core/NvidiaPlan.h).
    if (!artifact.shape.hasDynamicDims()) {
      launch.grid = kernelInfoInts(info, "grid");
      launch.partialOutputFloats = kernelInfoInt(info, "partial_output_floats");
      launch.partialRowFloats = kernelInfoInt(info, "partial_row_floats");
      launch.combineGrid = kernelInfoInts(info, "combine_grid");
      artifact.items = launch.grid[0] * launch.grid[1] * launch.grid[2];
    }
    artifact.stages["nvidia.meta"] = writeNvidiaMeta(launch, artifact);
    return mlir::success();
  };
  return stage;
}

Stage unrolledStage() {
  Stage stage;
  stage.name = "unrolled";
  stage.summary = "register loops unrolled: the last MLIR stage before NVVM";
  stage.run = [](CompileState &state) {
    (*state.module)->removeAttr(kKernelInfoAttr); // kept in nvidia.meta
    return unrollNvidiaRegisterLoops(*state.module);
  };
  return stage;
}

Stage ptxStage(std::string arch) {
  Stage stage;
  stage.name = "ptx";
  stage.summary = "PTX from gpu-lower-to-nvvm-pipeline and NVPTX, libdevice linked";
  stage.run = [arch](CompileState &state) {
    mlir::FailureOr<std::string> ptx =
        lowerNvidiaToPtx(*state.module, arch, findCudaToolkit(ptxasPath()));
    if (mlir::failed(ptx))
      return mlir::failure();
    state.artifact.stages["ptx"] = *ptx; // the stage's text is the PTX, not the module
    return mlir::success();
  };
  return stage;
}

Stage cubinStage(std::string arch) {
  Stage stage;
  stage.name = "cubin";
  stage.summary = "ptxas -v, when found: the cubin and its resource report";
  stage.kind = StageKind::Binary;
  stage.run = [arch](CompileState &state) {
    std::string ptxas = ptxasPath();
    std::string cubin, log;
    if (!ptxas.empty()) {
      Status status = assembleWithPtxas(ptxas, arch, state.artifact.stages.at("ptx"), cubin, log);
      if (!status)
        return mlir::LogicalResult(mlir::emitError(state.module->getLoc()) << status.message());
    }
    state.artifact.objects = {cubin};
    state.artifact.stages["ptxas-log"] = log;
    return mlir::success();
  };
  return stage;
}

} // namespace

Status checkNvidiaArch(const std::string &arch) {
  if (isSupportedNvidiaChip(arch))
    return Status();
  return Status::error("nvidia: architecture '" + arch +
                       "' is not supported (sm_80, sm_86, sm_89, sm_90)");
}

StageTable nvidiaStages(const std::string &arch, const NvidiaTileConfig &tiles) {
  StageTable table;
  table.target = "nvidia";
  table.stages = {sourceStage(),   fusedStage(),   tiledStage(arch, tiles),
                  unrolledStage(), ptxStage(arch), cubinStage(arch)};
  return table;
}

} // namespace pejit
