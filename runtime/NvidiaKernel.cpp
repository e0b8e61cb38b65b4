// NVIDIA kernels: the stages from the user's IR to PTX (compiler/
// NvidiaLowering), ptxas when present (cubin + resource usage), and a run
// through the CUDA driver (runtime/cuda, loaded with dlopen).
#include "runtime/NvidiaKernelImpl.h"

#include "compiler/passes/Instantiate.h"
#include "compiler/backends/nvidia/NvidiaLowering.h"
#include "compiler/passes/Passes.h"
#include "compiler/Registration.h"
#include "runtime/X86KernelImpl.h"
#include "runtime/cache/DiskCache.h"
#include "runtime/cuda/AttentionLaunch.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace pejit {

namespace {

std::string ptxasPath() {
  std::vector<std::string> candidates;
  if (const char *env = std::getenv("PEJIT_PTXAS"))
    candidates.push_back(env);
  if (const char *home = std::getenv("CUDA_HOME"))
    candidates.push_back(std::string(home) + "/bin/ptxas");
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  if (const char *path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      candidates.push_back(dir + "/ptxas");
  }
  for (const std::string &candidate : candidates)
    if (!candidate.empty() && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  return "";
}

std::string shellQuoted(const std::string &text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// ptxas -v on the PTX: the cubin and its resource report, or an error
/// carrying ptxas's messages (a rejected kernel is a compiler bug).
Status assemble(NvidiaKernelImpl &kernel) {
  std::string ptxas = ptxasPath();
  if (ptxas.empty())
    return Status();
  char dirTemplate[] = "/tmp/pejit-ptxas-XXXXXX";
  if (!mkdtemp(dirTemplate))
    return Status::error("ptxas: cannot create a temporary directory");
  fs::path dir = dirTemplate;
  std::ofstream(dir / "kernel.ptx", std::ios::binary) << kernel.ptx;
  std::string command = shellQuoted(ptxas) + " -arch=" + kernel.arch + " -v " +
                        shellQuoted((dir / "kernel.ptx").string()) + " -o " +
                        shellQuoted((dir / "kernel.cubin").string()) + " > " +
                        shellQuoted((dir / "log").string()) + " 2>&1";
  int status = std::system(command.c_str());
  std::ifstream log(dir / "log");
  kernel.ptxasLog.assign(std::istreambuf_iterator<char>(log), {});
  std::ifstream cubin(dir / "kernel.cubin", std::ios::binary);
  kernel.cubin.assign(std::istreambuf_iterator<char>(cubin), {});
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  if (status != 0 || kernel.cubin.empty())
    return Status::error("ptxas (" + ptxas + ") rejected the kernel for " + kernel.arch + ":\n" +
                         kernel.ptxasLog);
  return Status();
}

std::vector<int64_t> intArray(mlir::DictionaryAttr info, llvm::StringRef name) {
  std::vector<int64_t> values;
  if (auto array = info.getAs<mlir::ArrayAttr>(name))
    for (mlir::Attribute value : array)
      values.push_back(mlir::cast<mlir::IntegerAttr>(value).getInt());
  return values;
}

} // namespace

Expected<std::shared_ptr<const NvidiaKernelImpl>>
NvidiaKernelImpl::compile(const Spec &spec, const std::string &arch,
                          const NvidiaTileConfig &tiles) {
  using Result = Expected<std::shared_ptr<const NvidiaKernelImpl>>;
  if (!isSupportedNvidiaChip(arch))
    return Result::error("nvidia: architecture '" + arch +
                         "' is not supported (sm_80, sm_86, sm_89, sm_90)");
  initializeCompilerOnce();
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << (diagnostics.empty() ? "" : "\n") << diag.getLocation() << ": " << diag;
    return mlir::success();
  });
  auto failed = [&](const char *stage) {
    return Result::error(std::string(stage) + ": " +
                         (diagnostics.empty() ? "failed" : diagnostics));
  };
  auto kernel = std::make_shared<NvidiaKernelImpl>();
  kernel->arch = arch;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(spec.source(), &context, spec.name());
  if (!module)
    return failed("source");
  kernel->stages["source"] = printOperation(*module);
  mlir::PassManager fuse(&context);
  fuse.addNestedPass<mlir::func::FuncOp>(createFuseIntoAttention());
  if (mlir::failed(fuse.run(*module)))
    return failed("fused");
  kernel->stages["fused"] = printOperation(*module);
  if (mlir::failed(instantiateNvidiaTemplate(*module, {tiles.queryTile, tiles.keyTile, tiles.splits})))
    return failed("tiled");
  kernel->stages["tiled"] = printOperation(*module);
  auto info = (*module)->getAttrOfType<mlir::DictionaryAttr>(kKernelInfoAttr);
  kernel->grid = intArray(info, "grid");
  kernel->block = intArray(info, "block");
  for (mlir::Attribute role : info.getAs<mlir::ArrayAttr>("arguments"))
    kernel->arguments.push_back(mlir::cast<mlir::StringAttr>(role).str());
  kernel->inputDtype = kernelInfoDtype(info.getAs<mlir::StringAttr>("dtype"));
  kernel->outputDtype = kernelInfoDtype(info.getAs<mlir::StringAttr>("out_dtype"));
  kernel->scratchFloats = info.getAs<mlir::IntegerAttr>("scratch_floats").getInt();
  kernel->queryPositionRows = info.getAs<mlir::IntegerAttr>("query_position_rows").getInt();
  kernel->keyPositionRows = info.getAs<mlir::IntegerAttr>("key_position_rows").getInt();
  kernel->splits = info.getAs<mlir::IntegerAttr>("splits").getInt();
  kernel->partialOutputFloats = info.getAs<mlir::IntegerAttr>("partial_output_floats").getInt();
  kernel->partialRowFloats = info.getAs<mlir::IntegerAttr>("partial_row_floats").getInt();
  kernel->combineGrid = intArray(info, "combine_grid");
  (*module)->removeAttr(kKernelInfoAttr);
  // The kernel's memref types carry the static shape (q, k, v, o).
  module->walk([&](mlir::gpu::GPUFuncOp func) {
    if (func.getName() != "pejit_attention")
      return;
    auto dims = [&](unsigned arg) {
      return mlir::cast<mlir::MemRefType>(func.getArgumentTypes()[arg]).getShape();
    };
    kernel->shape = {dims(0)[0], dims(0)[1], dims(1)[1], dims(0)[2],
                     dims(1)[2], dims(0)[3], dims(2)[3]};
  });
  mlir::FailureOr<std::string> ptx =
      lowerNvidiaToPtx(*module, arch, &kernel->stages["unrolled"], findCudaToolkit(ptxasPath()));
  if (mlir::failed(ptx))
    return failed("ptx");
  kernel->ptx = *ptx;
  kernel->stages["ptx"] = *ptx;
  if (Status status = assemble(*kernel); !status)
    return Result::error(status.message());
  return std::shared_ptr<const NvidiaKernelImpl>(kernel);
}

namespace {

size_t elementBytes(DType dtype) {
  return dtype == DType::F32 || dtype == DType::I32 ? 4 : dtype == DType::I64 ? 8 : 2;
}

} // namespace

Status NvidiaKernelImpl::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  auto fail = [](const std::string &what) { return Status::error("nvidia run: " + what); };
  // Inputs by role, like the host kernel: query, key, value, then optional
  // position ids (one tensor for both when the role is "positions").
  const TensorView *views[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  const char *roles[5] = {"query", "key", "value", "query_positions", "key_positions"};
  if (inputs.size() < 3 || inputs.size() > arguments.size())
    return fail("expected 3 to " + std::to_string(arguments.size()) + " inputs, got " +
                std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int r = 0; r < 5; ++r)
      if (arguments[i] == roles[r] || (r >= 3 && arguments[i] == "positions"))
        views[r] = &inputs[i];
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
  if (Status st = buildPositionTable(views[3], "query positions", queryPositionRows, s.querySeq,
                                     s.batch, s.keySeq - s.querySeq, queryPositions);
      !st)
    return st;
  if (Status st = buildPositionTable(views[4], "key positions", keyPositionRows, s.keySeq,
                                     s.batch, 0, keyPositions);
      !st)
    return st;

  auto driver = cuda::currentDriver();
  if (!driver)
    return fail(driver.error());
  std::string deviceArch = (*driver)->device().arch();
  if (deviceArch.size() == arch.size() && deviceArch < arch)
    return fail("the kernel is for " + arch + ", the device is " + deviceArch);
  auto bytesOf = [](const std::vector<int64_t> &shape, DType type) {
    size_t bytes = elementBytes(type);
    for (int64_t d : shape)
      bytes *= static_cast<size_t>(d);
    return bytes;
  };
  cuda::AttentionKernelImage image{cubin.empty() ? ptx : cubin, grid, block, scratchFloats,
                                   splits, partialOutputFloats, partialRowFloats, combineGrid};
  cuda::AttentionBuffers buffers;
  buffers.query = views[0]->data;
  buffers.key = views[1]->data;
  buffers.value = views[2]->data;
  buffers.queryBytes = bytesOf(dims[0], inputDtype);
  buffers.keyBytes = bytesOf(dims[1], inputDtype);
  buffers.valueBytes = bytesOf(dims[2], inputDtype);
  buffers.queryPositions = &queryPositions;
  buffers.keyPositions = &keyPositions;
  buffers.output = out.data;
  buffers.outputBytes = bytesOf(outDims, outputDtype);
  if (cuda::Status st = cuda::runAttention(image, buffers); !st)
    return fail(st.error());
  return Status();
}

KernelArtifact NvidiaKernelImpl::toArtifact() const {
  KernelArtifact artifact;
  static_cast<KernelDescription &>(artifact) = *this;
  artifact.items = grid[0] * grid[1] * grid[2];
  artifact.stages = stages;
  artifact.stages["ptxas-log"] = ptxasLog;
  std::ostringstream meta;
  meta << "arch " << arch << "\ngrid " << grid[0] << " " << grid[1] << " " << grid[2]
       << "\nblock " << block[0] << " " << block[1] << " " << block[2] << "\ndtype "
       << dtypeName(inputDtype) << "\nout " << dtypeName(outputDtype) << "\nsplits " << splits
       << " " << partialOutputFloats << " " << partialRowFloats << "\ncombine "
       << combineGrid[0] << " " << combineGrid[1] << " " << combineGrid[2] << "\n";
  artifact.stages["nvidia.meta"] = meta.str();
  artifact.objects = {cubin};
  return artifact;
}

Expected<std::shared_ptr<const NvidiaKernelImpl>>
NvidiaKernelImpl::fromArtifact(const KernelArtifact &artifact) {
  using Result = Expected<std::shared_ptr<const NvidiaKernelImpl>>;
  auto meta = artifact.stages.find("nvidia.meta");
  auto ptx = artifact.stages.find("ptx");
  if (meta == artifact.stages.end() || ptx == artifact.stages.end())
    return Result::error("not an nvidia kernel entry (no nvidia.meta or ptx)");
  auto kernel = std::make_shared<NvidiaKernelImpl>();
  std::istringstream fields(meta->second);
  kernel->grid.assign(3, 0);
  kernel->block.assign(3, 0);
  for (std::string key; fields >> key;) {
    if (key == "arch")
      fields >> kernel->arch;
    else if (key == "grid")
      fields >> kernel->grid[0] >> kernel->grid[1] >> kernel->grid[2];
    else if (key == "block")
      fields >> kernel->block[0] >> kernel->block[1] >> kernel->block[2];
    else if (key == "splits")
      fields >> kernel->splits >> kernel->partialOutputFloats >> kernel->partialRowFloats;
    else if (key == "combine") {
      kernel->combineGrid.assign(3, 0);
      fields >> kernel->combineGrid[0] >> kernel->combineGrid[1] >> kernel->combineGrid[2];
    } else if (key == "dtype" || key == "out") {
      std::string name;
      fields >> name;
      (key == "dtype" ? kernel->inputDtype : kernel->outputDtype) =
          floatDtypeNamed(name).value_or(DType::F32);
    }
  }
  if (kernel->arch.empty() || kernel->grid[0] <= 0 || kernel->block[0] <= 0)
    return Result::error("nvidia.meta is incomplete");
  DType inputDtype = kernel->inputDtype, outputDtype = kernel->outputDtype; // from nvidia.meta
  static_cast<KernelDescription &>(*kernel) = artifact;
  kernel->inputDtype = inputDtype;
  kernel->outputDtype = outputDtype;
  kernel->stages = artifact.stages;
  kernel->ptxasLog = kernel->stages["ptxas-log"];
  kernel->stages.erase("ptxas-log");
  kernel->stages.erase("nvidia.meta");
  kernel->ptx = ptx->second;
  kernel->cubin = artifact.objects.empty() ? std::string() : artifact.objects[0];
  return std::shared_ptr<const NvidiaKernelImpl>(kernel);
}

const std::vector<std::string> &NvidiaKernel::stageNames() {
  static const std::vector<std::string> names = {"source", "fused", "tiled", "unrolled", "ptx"};
  return names;
}

Expected<std::string> NvidiaKernel::ir(const std::string &stage) const {
  auto it = impl_->stages.find(stage);
  if (it != impl_->stages.end())
    return it->second;
  std::string known;
  for (const std::string &name : stageNames())
    known += (known.empty() ? "" : ", ") + name;
  return Expected<std::string>::error("unknown nvidia stage '" + stage + "' (stages: " + known +
                                      ")");
}

const std::string &NvidiaKernel::arch() const { return impl_->arch; }
const std::string &NvidiaKernel::ptx() const { return impl_->ptx; }
const std::string &NvidiaKernel::cubin() const { return impl_->cubin; }
const std::string &NvidiaKernel::ptxasLog() const { return impl_->ptxasLog; }
const std::vector<int64_t> &NvidiaKernel::grid() const { return impl_->grid; }
const std::vector<int64_t> &NvidiaKernel::block() const { return impl_->block; }
const std::vector<std::string> &NvidiaKernel::arguments() const { return impl_->arguments; }
const Shape &NvidiaKernel::shape() const { return impl_->shape; }
DType NvidiaKernel::dtype() const { return impl_->inputDtype; }
DType NvidiaKernel::outputDtype() const { return impl_->outputDtype; }
int64_t NvidiaKernel::scratchFloats() const { return impl_->scratchFloats; }
int64_t NvidiaKernel::splits() const { return impl_->splits; }
int64_t NvidiaKernel::partialOutputFloats() const { return impl_->partialOutputFloats; }
int64_t NvidiaKernel::partialRowFloats() const { return impl_->partialRowFloats; }
const std::vector<int64_t> &NvidiaKernel::combineGrid() const { return impl_->combineGrid; }
Status NvidiaKernel::run(const std::vector<TensorView> &inputs, const TensorView &out) const {
  return impl_->run(inputs, out);
}

} // namespace pejit
