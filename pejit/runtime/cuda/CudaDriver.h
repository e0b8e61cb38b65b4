//===- CudaDriver.h - a light CUDA driver-API launcher (no LLVM, no libcuda) ===//
//
// Loads, copies to, launches on and times an NVIDIA GPU through the CUDA
// driver API, for the parts of pejit that run generated PTX/cubin kernels.
//
// Why it looks the way it does:
//  * No link-time dependency on libcuda: the driver is dlopen()ed
//    ("libcuda.so.1") on first use, so every pejit binary builds and runs on
//    machines without a GPU or driver and only GPU work fails - with a message.
//  * No dependency on cuda.h either: the few types, enum values and function
//    signatures needed are declared below (values from the driver API), so
//    the library builds without a CUDA toolkit.
//  * No LLVM/MLIR: pejit::Status/Expected live in an LLVM-based library, so
//    this file has its own tiny Error/Status/Result (same spirit: no
//    exceptions, every failure is a readable message).
//
// One device (ordinal 0, as filtered by CUDA_VISIBLE_DEVICES) and its primary
// context are used for the whole process; every operation makes that context
// current on the calling thread, so callers on any thread need no setup.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_CUDA_CUDADRIVER_H
#define PEJIT_RUNTIME_CUDA_CUDADRIVER_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pejit::cuda {

// --- result types ------------------------------------------------------------

/// Why an operation failed, for a user ("cuMemAlloc_v2 failed:
/// CUDA_ERROR_OUT_OF_MEMORY (out of memory)"). Never empty.
struct Error {
  std::string message;
};

/// Success, or an Error. Default-constructed = success.
class Status {
public:
  Status() = default;
  Status(Error error) : error_(std::move(error.message)), failed_(true) {}
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  /// "" on success.
  const std::string &error() const { return error_; }

private:
  std::string error_;
  bool failed_ = false;
};

/// A T, or an Error.
template <class T> class Result {
public:
  Result(T value) : value_(std::move(value)) {}
  Result(Error error) : error_(std::move(error.message)) {}
  /// The failure of a Status as a Result (an ok() Status is a caller bug,
  /// still reported as a failure rather than as an empty value).
  Result(const Status &failed)
      : error_(failed.ok() ? "internal error: success used as a failure" : failed.error()) {}
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  /// "" on success.
  const std::string &error() const { return error_; }
  /// Only valid when ok().
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

private:
  std::optional<T> value_;
  std::string error_;
};

// --- driver API declarations (the subset used; values from cuda.h) ----------

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr unsigned CU_EVENT_DEFAULT = 0;
/// Dynamic shared memory a kernel may use without opting in.
constexpr unsigned kDefaultMaxDynamicShared = 48 * 1024;

/// The driver entry points used, as X(name, parameters); each is resolved by
/// its exported name with dlsym into DriverApi::name. Enum parameters are
/// int (every CUDA enum is int-sized).
#define PEJIT_CUDA_DRIVER_API(X)                                                                   \
  X(cuGetErrorName, (CUresult, const char **))                                                     \
  X(cuGetErrorString, (CUresult, const char **))                                                   \
  X(cuInit, (unsigned))                                                                            \
  X(cuDeviceGetCount, (int *))                                                                     \
  X(cuDeviceGet, (CUdevice *, int))                                                                \
  X(cuDeviceGetName, (char *, int, CUdevice))                                                      \
  X(cuDeviceGetAttribute, (int *, int, CUdevice))                                                  \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                             \
  X(cuCtxSetCurrent, (CUcontext))                                                                  \
  X(cuCtxSynchronize, ())                                                                          \
  X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                                        \
  X(cuMemFree_v2, (CUdeviceptr))                                                                   \
  X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                                          \
  X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                                \
  X(cuModuleLoadDataEx, (CUmodule *, const void *, unsigned, int *, void **))                      \
  X(cuModuleUnload, (CUmodule))                                                                    \
  X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                                   \
  X(cuFuncSetAttribute, (CUfunction, int, int))                                                    \
  X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,       \
                     unsigned, CUstream, void **, void **))                                        \
  X(cuEventCreate, (CUevent *, unsigned))                                                          \
  X(cuEventRecord, (CUevent, CUstream))                                                            \
  X(cuEventSynchronize, (CUevent))                                                                 \
  X(cuEventElapsedTime, (float *, CUevent, CUevent)) /* _v2 if exported */                         \
  X(cuEventDestroy_v2, (CUevent))

struct DriverApi {
#define PEJIT_CUDA_API_FIELD(name, params) CUresult(*name) params = nullptr;
  PEJIT_CUDA_DRIVER_API(PEJIT_CUDA_API_FIELD)
#undef PEJIT_CUDA_API_FIELD
};

// --- driver and device ---------------------------------------------------------

/// What pejit needs to know about the device it runs on.
struct Device {
  int ordinal = 0;
  std::string name; ///< e.g. "NVIDIA H100 80GB HBM3"
  int major = 0;    ///< compute capability
  int minor = 0;
  int multiprocessors = 0;
  /// Largest dynamic + static shared memory per block after opting in.
  int maxSharedPerBlockOptin = 0;
  /// The PTX/cubin target, e.g. "sm_90".
  std::string arch() const { return "sm_" + std::to_string(major * 10 + minor); }
};

/// The loaded driver: entry points, device 0 and its primary context.
/// Loaded once per process (thread-safe); never unloaded, so that RAII
/// objects destroyed at exit can still call into it.
class Driver {
public:
  /// The driver, or nullptr with *error (if given) set to why, e.g.
  /// "CUDA driver not available: dlopen(libcuda.so.1) failed: ...",
  /// "CUDA driver has no device (cuDeviceGetCount returned 0)". The outcome
  /// of the first call is remembered: later calls return the same.
  static const Driver *get(std::string *error = nullptr);

  const DriverApi &api() const { return api_; }
  const Device &device() const { return device_; }
  CUcontext context() const { return context_; }

  /// "cuXxx failed: CUDA_ERROR_NAME (description)".
  std::string describe(CUresult result, const char *call) const;
  /// Success for CUDA_SUCCESS, else describe(result, call).
  Status check(CUresult result, const char *call) const {
    return result == CUDA_SUCCESS ? Status() : Status(Error{describe(result, call)});
  }
  /// Makes the primary context current on the calling thread.
  Status makeCurrent() const { return check(api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

private:
  Driver() = default;
  static std::string load(Driver &driver);

  DriverApi api_{};
  Device device_;
  CUcontext context_ = nullptr;
};

/// The driver with its context current on this thread, or why not.
Result<const Driver *> currentDriver();

// --- memory ----------------------------------------------------------------------

/// Device memory owned by this object (freed by the destructor). Move-only.
class DeviceBuffer {
public:
  /// bytes may be 0: an empty buffer with pointer() == 0 and no allocation.
  static Result<DeviceBuffer> allocate(size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept { swap(other); }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept {
    DeviceBuffer(std::move(other)).swap(*this); // frees the old memory now
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  CUdeviceptr pointer() const { return pointer_; }
  size_t size() const { return size_; }

  /// Copies bytes host -> device at byte offset; synchronous. Fails (without
  /// copying) when [offset, offset + bytes) is not inside the buffer; 0 bytes
  /// is a no-op that needs no driver.
  Status copyFromHost(const void *source, size_t bytes, size_t offset = 0);
  /// Copies bytes device -> host from byte offset; synchronous (waits for
  /// earlier work on the default stream).
  Status copyToHost(void *destination, size_t bytes, size_t offset = 0) const;
  /// Frees now and reports the result (the destructor cannot).
  Status free();

private:
  Status checkRange(size_t bytes, size_t offset, const char *what) const;
  void swap(DeviceBuffer &other) noexcept {
    std::swap(pointer_, other.pointer_);
    std::swap(size_, other.size_);
  }

  CUdeviceptr pointer_ = 0;
  size_t size_ = 0;
};

// --- modules and kernels -----------------------------------------------------------

/// A kernel of a loaded Module; valid while that Module is.
struct Function {
  CUfunction handle = nullptr;
  std::string name;
};

/// A loaded cubin/fatbin or PTX image (unloaded by the destructor). Move-only.
class Module {
public:
  /// Loads image: cubin/fatbin bytes or NUL-terminated PTX text (the driver
  /// JIT-compiles PTX; its error log is part of the message on failure).
  static Result<Module> load(const void *image);
  /// Loads image bytes that need not be NUL-terminated (e.g. PTX text in a
  /// std::string, or a cubin read from a file).
  static Result<Module> load(const void *data, size_t size);
  static Result<Module> load(const std::string &image) { return load(image.data(), image.size()); }

  Module() = default;
  Module(Module &&other) noexcept { swap(other); }
  Module &operator=(Module &&other) noexcept {
    Module(std::move(other)).swap(*this); // unloads the old module now
    return *this;
  }
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();

  CUmodule handle() const { return module_; }
  /// The kernel called name (its mangled name for C++ kernels).
  Result<Function> function(const std::string &name) const;

private:
  void swap(Module &other) noexcept { std::swap(module_, other.module_); }
  CUmodule module_ = nullptr;
};

/// Kernel parameters, in declaration order, as cuLaunchKernel takes them.
/// Each argument lives in its own 8-byte, 8-aligned slot of a std::deque,
/// whose elements never move when more are added, so pointers from params()
/// to earlier arguments stay valid.
class KernelArgs {
public:
  enum class Kind { Pointer, Int32, Int64, Float32 };

  KernelArgs &pointer(CUdeviceptr value);
  KernelArgs &pointer(const DeviceBuffer &buffer) { return pointer(buffer.pointer()); }
  KernelArgs &int32(int32_t value);
  KernelArgs &int64(int64_t value);
  KernelArgs &float32(float value);

  size_t size() const { return slots_.size(); }
  Kind kind(size_t index) const { return slots_[index].kind; }
  /// Bytes and alignment of a kind: 8/8, 4/4, 8/8, 4/4.
  static size_t sizeOf(Kind kind);

  /// cuLaunchKernel's kernelParams: element i points at argument i's value.
  /// The array is rebuilt by each call (valid until the next change), so
  /// copies of a KernelArgs point at their own storage.
  void **params();
  /// (offset, size) of each argument with natural alignment: the layout of
  /// the parameter buffer (CU_LAUNCH_PARAM_BUFFER_POINTER) and of a C struct
  /// with the same members.
  std::vector<std::pair<size_t, size_t>> layout() const;
  /// Size of that buffer: the end of the last argument, rounded up to the
  /// largest alignment (0 without arguments).
  size_t totalSize() const;
  /// The packed parameter buffer (padding bytes are zero).
  std::vector<uint8_t> packed() const;

private:
  struct Slot {
    alignas(8) unsigned char bytes[8];
    Kind kind;
  };
  KernelArgs &add(Kind kind, const void *value, size_t bytes);

  std::deque<Slot> slots_;
  std::vector<void *> pointers_;
};

/// Launches function on stream (nullptr = the default stream) with grid x
/// block threads and sharedBytes of dynamic shared memory. Above 48 KiB the
/// kernel is opted in first (cuFuncSetAttribute
/// MAX_DYNAMIC_SHARED_SIZE_BYTES), up to the device's opt-in maximum.
/// Asynchronous: execution errors surface at synchronize().
Status launch(const Function &function, std::array<unsigned, 3> grid, std::array<unsigned, 3> block,
              unsigned sharedBytes, KernelArgs &args, CUstream stream = nullptr);

/// Waits for all work on the device (cuCtxSynchronize); this is where the
/// errors of asynchronous launches surface.
Status synchronize();

// --- timing ------------------------------------------------------------------------

/// GPU time between start() and stop(), measured with CUDA events on the
/// stream (so it excludes host overhead). Move-only.
class Timer {
public:
  static Result<Timer> create();

  Timer() = default;
  Timer(Timer &&other) noexcept { swap(other); }
  Timer &operator=(Timer &&other) noexcept {
    Timer(std::move(other)).swap(*this); // destroys the old events now
    return *this;
  }
  Timer(const Timer &) = delete;
  Timer &operator=(const Timer &) = delete;
  ~Timer();

  Status start(CUstream stream = nullptr) { return record(start_, stream); }
  Status stop(CUstream stream = nullptr) { return record(stop_, stream); }
  /// Waits for stop's event, then the milliseconds from start to stop.
  Result<float> elapsedMs() const;

private:
  Status record(CUevent event, CUstream stream);
  void swap(Timer &other) noexcept {
    std::swap(start_, other.start_);
    std::swap(stop_, other.stop_);
  }
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
};

} // namespace pejit::cuda

#endif // PEJIT_RUNTIME_CUDA_CUDADRIVER_H
