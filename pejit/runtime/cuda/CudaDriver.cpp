//===- CudaDriver.cpp - dlopen()ed CUDA driver, buffers, modules, launches --===//
//
// Every driver call's CUresult is checked and turned into a message naming
// the call, the error's name and its description; nothing here throws or
// aborts, so a machine without a GPU only sees messages.
//
//===----------------------------------------------------------------------===//
#include "pejit/runtime/cuda/CudaDriver.h"

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <mutex>

namespace pejit::cuda {

namespace {

// The soname, not "libcuda.so": only the driver package installs libcuda.so.1,
// while libcuda.so is often the toolkit's link stub, which fails every call.
constexpr const char *kLibraryName = "libcuda.so.1";

/// Points fn at symbol, unless already set or an earlier lookup failed
/// (error not empty); on failure error names the symbol.
template <class F> void resolve(void *library, F &fn, const char *symbol, std::string &error) {
  if (fn || !error.empty())
    return;
  dlerror(); // clear any stale error so the one below is this lookup's
  if (void *address = dlsym(library, symbol)) {
    fn = reinterpret_cast<F>(address);
    return;
  }
  const char *detail = dlerror();
  error = std::string("CUDA driver not available: ") + kLibraryName + " has no symbol " + symbol +
          " (" + (detail ? detail : "not found") + "; is the driver too old?)";
}

std::string dims(const std::array<unsigned, 3> &d) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) +
         ")";
}

} // namespace

/// Declares `const Driver &name` (loaded, its context current on this
/// thread), or returns the reason it is not available from the function.
#define PEJIT_CUDA_DRIVER_OR_RETURN(name)                                                          \
  Result<const Driver *> name##OrError = currentDriver();                                          \
  if (!name##OrError)                                                                              \
    return Error{name##OrError.error()};                                                           \
  const Driver &name = **name##OrError

// --- driver --------------------------------------------------------------------

std::string Driver::describe(CUresult result, const char *call) const {
  const char *name = nullptr, *text = nullptr;
  // Both lookups fail for codes this driver does not know (or a stub's).
  if (!api_.cuGetErrorName || api_.cuGetErrorName(result, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (!api_.cuGetErrorString || api_.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text)
    text = "unrecognized error code";
  return std::string(call) +
         " failed: " + (name ? std::string(name) : "CUDA error " + std::to_string(result)) + " (" +
         text + ")";
}

std::string Driver::load(Driver &d) {
  void *library = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *detail = dlerror();
    return std::string("CUDA driver not available: dlopen(") + kLibraryName +
           ") failed: " + (detail ? detail : "unknown error");
  }
  DriverApi &a = d.api_;
  std::string error;
  // cuEventElapsedTime_v2 (CUDA 12.8+, same signature) when the driver has it.
  if (void *v2 = dlsym(library, "cuEventElapsedTime_v2"))
    a.cuEventElapsedTime = reinterpret_cast<decltype(a.cuEventElapsedTime)>(v2);
#define PEJIT_CUDA_RESOLVE(name, params) resolve(library, a.name, #name, error);
  PEJIT_CUDA_DRIVER_API(PEJIT_CUDA_RESOLVE)
#undef PEJIT_CUDA_RESOLVE
  if (!error.empty()) {
    dlclose(library); // nothing from it was called yet
    return error;
  }

  // From here on the library stays loaded even on failure: cuInit may have
  // started driver threads that must not lose their code.
  if (CUresult r = a.cuInit(0); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NO_DEVICE)
      return "CUDA driver has no device (" + d.describe(r, "cuInit") + ")";
    return "CUDA driver not available: " + d.describe(r, "cuInit");
  }
  int count = 0;
  if (CUresult r = a.cuDeviceGetCount(&count); r != CUDA_SUCCESS)
    return "CUDA driver not available: " + d.describe(r, "cuDeviceGetCount");
  if (count == 0)
    return "CUDA driver has no device (cuDeviceGetCount returned 0)";

  Device &dev = d.device_;
  CUdevice handle = 0;
  char name[256] = {};
  std::string failure; // the first failing call's message
  auto call = [&](CUresult r, const char *what) {
    if (failure.empty() && r != CUDA_SUCCESS)
      failure = "CUDA device 0 not usable: " + d.describe(r, what);
  };
  call(a.cuDeviceGet(&handle, 0), "cuDeviceGet");
  if (!failure.empty())
    return failure;
  call(a.cuDeviceGetName(name, sizeof(name) - 1, handle), "cuDeviceGetName");
  const std::pair<int *, int> attributes[] = {
      {&dev.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {&dev.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
      {&dev.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {&dev.maxSharedPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN}};
  for (auto [value, attribute] : attributes)
    call(a.cuDeviceGetAttribute(value, attribute, handle), "cuDeviceGetAttribute");
  // The primary context is the one the CUDA runtime (and so PyTorch) uses,
  // so device pointers can be shared with them. It is retained for good: the
  // Driver outlives every object that uses it.
  if (failure.empty())
    call(a.cuDevicePrimaryCtxRetain(&d.context_, handle), "cuDevicePrimaryCtxRetain");
  dev.ordinal = 0;
  dev.name = name;
  return failure;
}

const Driver *Driver::get(std::string *error) {
  // Leaked on purpose: buffers and modules destroyed during static
  // destruction must still find a live Driver.
  static std::once_flag once;
  static Driver *driver = nullptr;
  static std::string *failure = nullptr; // "" once loaded
  std::call_once(once, [] {
    driver = new Driver;
    failure = new std::string(load(*driver));
  });
  if (failure->empty())
    return driver;
  if (error)
    *error = *failure;
  return nullptr;
}

Result<const Driver *> currentDriver() {
  std::string error;
  const Driver *driver = Driver::get(&error);
  if (!driver)
    return Error{error};
  if (Status s = driver->makeCurrent(); !s)
    return s;
  return driver;
}

Status synchronize() {
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  return d.check(d.api().cuCtxSynchronize(), "cuCtxSynchronize");
}

// --- memory ----------------------------------------------------------------------

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  DeviceBuffer buffer;
  if (bytes == 0) // cuMemAlloc rejects 0; an empty tensor needs no memory
    return buffer;
  if (CUresult r = d.api().cuMemAlloc_v2(&buffer.pointer_, bytes); r != CUDA_SUCCESS)
    return Error{d.describe(r, "cuMemAlloc_v2") + " (allocating " + std::to_string(bytes) +
                 " bytes)"};
  buffer.size_ = bytes;
  return buffer;
}

DeviceBuffer::~DeviceBuffer() { free(); }

Status DeviceBuffer::free() {
  if (!pointer_)
    return {};
  CUdeviceptr pointer = std::exchange(pointer_, 0);
  size_ = 0;
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  return d.check(d.api().cuMemFree_v2(pointer), "cuMemFree_v2");
}

Status DeviceBuffer::checkRange(size_t bytes, size_t offset, const char *what) const {
  if (offset <= size_ && bytes <= size_ - offset)
    return {};
  return Error{std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
               std::to_string(offset) + " is outside the device buffer of " +
               std::to_string(size_) + " bytes"};
}

Status DeviceBuffer::copyFromHost(const void *source, size_t bytes, size_t offset) {
  if (Status s = checkRange(bytes, offset, "copyFromHost"); !s || bytes == 0)
    return s; // 0 bytes: nothing to do, also for an empty buffer (pointer 0)
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  return d.check(d.api().cuMemcpyHtoD_v2(pointer_ + offset, source, bytes), "cuMemcpyHtoD_v2");
}

Status DeviceBuffer::copyToHost(void *destination, size_t bytes, size_t offset) const {
  if (Status s = checkRange(bytes, offset, "copyToHost"); !s || bytes == 0)
    return s;
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  return d.check(d.api().cuMemcpyDtoH_v2(destination, pointer_ + offset, bytes), "cuMemcpyDtoH_v2");
}

// --- modules -----------------------------------------------------------------------

Result<Module> Module::load(const void *image) {
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  if (!image)
    return Error{"Module::load: no image (null pointer)"};
  // cuModuleLoadDataEx rather than cuModuleLoadData only to get the PTX JIT's
  // error log: "CUDA_ERROR_INVALID_PTX" alone does not say which line.
  char log[8192] = {};
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof(log) - 1))};
  Module module;
  CUresult r = d.api().cuModuleLoadDataEx(&module.module_, image, 2, options, values);
  if (r == CUDA_SUCCESS)
    return module;
  module.module_ = nullptr;
  std::string message = d.describe(r, "cuModuleLoadDataEx"), text(log);
  while (!text.empty() && std::strchr(" \t\r\n", text.back()))
    text.pop_back();
  return Error{text.empty() ? message : message + "; JIT log:\n" + text};
}

Result<Module> Module::load(const void *data, size_t size) {
  if (!data || size == 0)
    return Error{"Module::load: empty image"};
  // PTX must end in a NUL; a cubin/fatbin is read by its own headers, so the
  // extra byte is harmless there.
  std::vector<char> image(size + 1, '\0');
  std::memcpy(image.data(), data, size);
  return load(static_cast<const void *>(image.data()));
}

Module::~Module() {
  if (module_)
    if (Result<const Driver *> d = currentDriver())
      (*d)->api().cuModuleUnload(module_); // nothing to report to in a destructor
}

Result<Function> Module::function(const std::string &name) const {
  if (!module_)
    return Error{"Module::function('" + name + "'): no module loaded"};
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  Function function{nullptr, name};
  if (CUresult r = d.api().cuModuleGetFunction(&function.handle, module_, name.c_str());
      r != CUDA_SUCCESS)
    return Error{d.describe(r, "cuModuleGetFunction") + " (kernel '" + name + "')"};
  return function;
}

// --- kernel arguments ----------------------------------------------------------------

size_t KernelArgs::sizeOf(Kind kind) {
  return kind == Kind::Int32 || kind == Kind::Float32 ? 4 : 8;
}

KernelArgs &KernelArgs::add(Kind kind, const void *value, size_t bytes) {
  Slot &slot = slots_.emplace_back();
  std::memset(slot.bytes, 0, sizeof(slot.bytes));
  std::memcpy(slot.bytes, value, bytes);
  slot.kind = kind;
  return *this;
}

KernelArgs &KernelArgs::pointer(CUdeviceptr value) {
  static_assert(sizeof(CUdeviceptr) == 8, "device pointers are 64-bit");
  return add(Kind::Pointer, &value, sizeof(value));
}
KernelArgs &KernelArgs::int32(int32_t value) { return add(Kind::Int32, &value, sizeof(value)); }
KernelArgs &KernelArgs::int64(int64_t value) { return add(Kind::Int64, &value, sizeof(value)); }
KernelArgs &KernelArgs::float32(float value) { return add(Kind::Float32, &value, sizeof(value)); }

void **KernelArgs::params() {
  pointers_.clear();
  for (Slot &slot : slots_)
    pointers_.push_back(slot.bytes);
  return pointers_.data();
}

std::vector<std::pair<size_t, size_t>> KernelArgs::layout() const {
  std::vector<std::pair<size_t, size_t>> result;
  size_t offset = 0;
  for (const Slot &slot : slots_) {
    size_t size = sizeOf(slot.kind); // every kind's alignment is its size
    offset = (offset + size - 1) / size * size;
    result.emplace_back(offset, size);
    offset += size;
  }
  return result;
}

size_t KernelArgs::totalSize() const {
  size_t end = 0, align = 1;
  for (auto [offset, size] : layout()) {
    end = offset + size;
    align = std::max(align, size);
  }
  return (end + align - 1) / align * align;
}

std::vector<uint8_t> KernelArgs::packed() const {
  std::vector<uint8_t> buffer(totalSize(), 0);
  std::vector<std::pair<size_t, size_t>> places = layout();
  for (size_t i = 0; i < places.size(); ++i)
    std::memcpy(buffer.data() + places[i].first, slots_[i].bytes, places[i].second);
  return buffer;
}

// --- launch ---------------------------------------------------------------------------

Status launch(const Function &function, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
              unsigned sharedBytes, KernelArgs &args, CUstream stream) {
  PEJIT_CUDA_DRIVER_OR_RETURN(d); // first: a missing driver is the root cause
  if (!function.handle)
    return Error{"launch: no kernel (the Function has no handle)"};
  std::string where = " (kernel '" + function.name + "', grid " + dims(grid) + ", block " +
                      dims(block) + ", " + std::to_string(sharedBytes) +
                      " bytes of dynamic shared memory)";
  if (sharedBytes > kDefaultMaxDynamicShared) {
    int limit = d.device().maxSharedPerBlockOptin;
    if (limit > 0 && sharedBytes > static_cast<unsigned>(limit))
      return Error{"launch: " + d.device().arch() + " allows at most " + std::to_string(limit) +
                   " bytes of shared memory per block" + where};
    if (CUresult r = d.api().cuFuncSetAttribute(function.handle,
                                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                static_cast<int>(sharedBytes));
        r != CUDA_SUCCESS)
      return Error{d.describe(r, "cuFuncSetAttribute") + where};
  }
  CUresult r =
      d.api().cuLaunchKernel(function.handle, grid[0], grid[1], grid[2], block[0], block[1],
                             block[2], sharedBytes, stream, args.params(), nullptr);
  if (r != CUDA_SUCCESS)
    return Error{d.describe(r, "cuLaunchKernel") + where};
  return {};
}

// --- timing ------------------------------------------------------------------------------

Result<Timer> Timer::create() {
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  Timer timer;
  for (CUevent *event : {&timer.start_, &timer.stop_})
    if (CUresult r = d.api().cuEventCreate(event, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
      *event = nullptr;
      return Error{d.describe(r, "cuEventCreate")};
    }
  return timer;
}

Timer::~Timer() {
  for (CUevent event : {start_, stop_})
    if (event)
      if (Result<const Driver *> d = currentDriver())
        (*d)->api().cuEventDestroy_v2(event);
}

Status Timer::record(CUevent event, CUstream stream) {
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  if (!event)
    return Error{"Timer: not created (use Timer::create)"};
  return d.check(d.api().cuEventRecord(event, stream), "cuEventRecord");
}

Result<float> Timer::elapsedMs() const {
  PEJIT_CUDA_DRIVER_OR_RETURN(d);
  if (!start_ || !stop_)
    return Error{"Timer: not created (use Timer::create)"};
  if (Status s = d.check(d.api().cuEventSynchronize(stop_), "cuEventSynchronize"); !s)
    return s;
  float ms = 0;
  if (Status s = d.check(d.api().cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime"); !s)
    return s;
  return ms;
}

} // namespace pejit::cuda
