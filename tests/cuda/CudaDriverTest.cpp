//===- CudaDriverTest.cpp - CUDA launcher: no-driver errors, args, GPU runs ===//
//
// The same binary runs on machines without a driver (where every operation
// must fail with a message naming the cause), with a driver but no device,
// and on GPU machines (where it copies, launches a PTX kernel and times it).
//
//===----------------------------------------------------------------------===//
#include "pejit/runtime/cuda/CudaDriver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <dlfcn.h>
#include <numeric>

using namespace pejit::cuda;

namespace {

/// Whether libcuda.so.1 can be loaded at all, found independently of the
/// library under test (the handle is kept: the driver is never unloaded).
bool driverLibraryLoads() { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr; }

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// Adds 1.0f to data[i] for i < n; params (ptr data, int32 n).
const char *kAddOnePtx = R"(.version 8.0
.target sm_80
.address_size 64

.visible .entry add_one(
    .param .u64 add_one_data,
    .param .s32 add_one_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [add_one_data];
    ld.param.s32 %r2, [add_one_n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, 0f3F800000;
    st.global.f32 [%rd4], %f2;
DONE:
    ret;
}
)";

TEST(CudaDriver, LoadsOrExplainsWhyNot) {
  std::string error;
  const Driver *driver = Driver::get(&error);
  if (!driverLibraryLoads()) {
    ASSERT_EQ(driver, nullptr);
    EXPECT_TRUE(contains(error, "CUDA driver not available: dlopen(libcuda.so.1) failed: "))
        << error;
    // The outcome is remembered, and the error out-parameter is optional.
    std::string again;
    EXPECT_EQ(Driver::get(&again), nullptr);
    EXPECT_EQ(again, error);
    EXPECT_EQ(Driver::get(), nullptr);
    return;
  }
  if (!driver) {
    // A driver without a usable GPU: no device, or a failing call or missing
    // symbol (e.g. a container without /dev/nvidia*, a driver too old).
    EXPECT_TRUE(error.rfind("CUDA driver has no device (", 0) == 0 ||
                error.rfind("CUDA driver not available: ", 0) == 0 ||
                error.rfind("CUDA device 0 not usable: ", 0) == 0)
        << error;
    return;
  }
  const Device &device = driver->device();
  EXPECT_GE(device.major * 10 + device.minor, 70) << device.name << " " << device.arch();
  EXPECT_FALSE(device.name.empty());
  EXPECT_EQ(device.arch(), "sm_" + std::to_string(device.major) + std::to_string(device.minor));
  EXPECT_GT(device.multiprocessors, 0);
  EXPECT_GE(device.maxSharedPerBlockOptin, 48 * 1024);

  // Smoke check: 1 MB host -> device -> host.
  std::vector<uint8_t> bytes(1 << 20), back(1 << 20, 0);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(bytes.size());
  ASSERT_TRUE(buffer) << buffer.error();
  EXPECT_NE(buffer->pointer(), 0u);
  ASSERT_TRUE(buffer->copyFromHost(bytes.data(), bytes.size()));
  Status copied = buffer->copyToHost(back.data(), back.size());
  ASSERT_TRUE(copied) << copied.error();
  EXPECT_EQ(std::memcmp(bytes.data(), back.data(), bytes.size()), 0);
  // Copies outside the buffer are refused before reaching the driver.
  Status outside = buffer->copyToHost(back.data(), 16, bytes.size() - 8);
  EXPECT_FALSE(outside);
  EXPECT_TRUE(contains(outside.error(), "outside the device buffer")) << outside.error();
  EXPECT_TRUE(buffer->free());
  EXPECT_EQ(buffer->pointer(), 0u);
}

TEST(CudaDriver, EveryOperationFailsCleanlyWithoutADriver) {
  std::string cause;
  if (Driver::get(&cause))
    GTEST_SKIP() << "the CUDA driver is available here";
  ASSERT_FALSE(cause.empty());

  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(1024);
  EXPECT_FALSE(buffer);
  EXPECT_EQ(buffer.error(), cause);
  EXPECT_FALSE(DeviceBuffer::allocate(0)); // even when nothing is allocated

  Result<Module> module = Module::load(kAddOnePtx);
  EXPECT_FALSE(module);
  EXPECT_EQ(module.error(), cause);
  EXPECT_EQ(Module::load(std::string(kAddOnePtx)).error(), cause);

  // A Function that never came from a module: the missing driver is named
  // first, as it is the root cause.
  KernelArgs args;
  args.pointer(0).int32(1);
  Status launched = launch(Function{}, {1, 1, 1}, {32, 1, 1}, 64 * 1024, args);
  EXPECT_FALSE(launched);
  EXPECT_EQ(launched.error(), cause);

  EXPECT_EQ(Timer::create().error(), cause);
  EXPECT_EQ(synchronize().error(), cause);
  EXPECT_EQ(currentDriver().error(), cause);

  // Objects that own nothing are safe to use and destroy.
  DeviceBuffer empty;
  EXPECT_TRUE(empty.free());
  EXPECT_TRUE(empty.copyFromHost(nullptr, 0));
  EXPECT_FALSE(empty.copyFromHost(&cause, 1));
  Module none;
  EXPECT_FALSE(none.function("add_one"));
  Timer idle;
  EXPECT_FALSE(idle.start());
  EXPECT_FALSE(idle.elapsedMs());
}

TEST(KernelArgs, PacksInDeclarationOrderAtNaturalOffsets) {
  const CUdeviceptr p0 = 0x00007f0012345600ull, p1 = 0x00007f00abcdef00ull,
                    p2 = 0x0000000000000100ull;
  const int32_t i0 = -123456789, i1 = 0x7fffffff;
  const int64_t l0 = -0x0123456789abcdefll;
  const float f0 = 3.25f;

  KernelArgs args;
  args.pointer(p0).pointer(p1).int32(i0).int64(l0).float32(f0).int32(i1).pointer(p2);
  ASSERT_EQ(args.size(), 7u);
  EXPECT_EQ(args.kind(3), KernelArgs::Kind::Int64);

  // The recorded layout (the same as a C struct with these members).
  const std::vector<std::pair<size_t, size_t>> expected = {{0, 8},  {8, 8},  {16, 4}, {24, 8},
                                                           {32, 4}, {36, 4}, {40, 8}};
  EXPECT_EQ(args.layout(), expected);
  EXPECT_EQ(args.totalSize(), 48u);

  // kernelParams: each entry points at exactly the value given.
  void **params = args.params();
  auto read = [&](size_t i, auto sample) {
    decltype(sample) value;
    std::memcpy(&value, params[i], sizeof(value));
    return value;
  };
  EXPECT_EQ(read(0, CUdeviceptr{}), p0);
  EXPECT_EQ(read(1, CUdeviceptr{}), p1);
  EXPECT_EQ(read(2, int32_t{}), i0);
  EXPECT_EQ(read(3, int64_t{}), l0);
  EXPECT_EQ(read(4, float{}), f0);
  EXPECT_EQ(read(5, int32_t{}), i1);
  EXPECT_EQ(read(6, CUdeviceptr{}), p2);
  for (size_t i = 0; i < args.size(); ++i)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(params[i]) % 8, 0u) << "argument " << i;

  // The packed buffer holds each value at its offset, zeros in the padding.
  std::vector<uint8_t> packed = args.packed();
  ASSERT_EQ(packed.size(), 48u);
  auto at = [&](size_t offset, auto sample) {
    decltype(sample) value;
    std::memcpy(&value, packed.data() + offset, sizeof(value));
    return value;
  };
  EXPECT_EQ(at(0, CUdeviceptr{}), p0);
  EXPECT_EQ(at(8, CUdeviceptr{}), p1);
  EXPECT_EQ(at(16, int32_t{}), i0);
  EXPECT_EQ(at(20, int32_t{}), 0); // padding before the int64
  EXPECT_EQ(at(24, int64_t{}), l0);
  EXPECT_EQ(at(32, float{}), f0);
  EXPECT_EQ(at(36, int32_t{}), i1);
  EXPECT_EQ(at(40, CUdeviceptr{}), p2);

  // Earlier arguments' storage does not move when more are added, and a copy
  // points at its own storage.
  void *first = params[0];
  for (int i = 0; i < 100; ++i)
    args.int32(i);
  EXPECT_EQ(args.params()[0], first);
  KernelArgs copy = args;
  EXPECT_NE(copy.params()[0], args.params()[0]);
  EXPECT_EQ(copy.packed(), args.packed());
}

TEST(KernelArgs, TotalSizeRoundsToTheLargestAlignment) {
  KernelArgs none;
  EXPECT_EQ(none.totalSize(), 0u);
  EXPECT_TRUE(none.packed().empty());
  KernelArgs args;
  args.int32(1).float32(2.0f).int32(3);
  EXPECT_EQ(args.totalSize(), 12u);
  args.pointer(4);
  EXPECT_EQ(args.layout().back(), (std::pair<size_t, size_t>{16, 8}));
  EXPECT_EQ(args.totalSize(), 24u);
  args.int32(5);
  EXPECT_EQ(args.totalSize(), 32u); // 28 rounded up to 8
}

TEST(CudaDriver, LaunchesAPtxKernel) {
  std::string cause;
  const Driver *driver = Driver::get(&cause);
  if (!driver)
    GTEST_SKIP() << cause;

  Result<Module> module = Module::load(kAddOnePtx);
  ASSERT_TRUE(module) << module.error();
  Result<Function> kernel = module->function("add_one");
  ASSERT_TRUE(kernel) << kernel.error();
  Result<Function> missing = module->function("no_such_kernel");
  EXPECT_FALSE(missing);
  EXPECT_TRUE(contains(missing.error(), "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND"))
      << missing.error();

  const int n = 1000;              // not a multiple of the block: the bounds check matters
  std::vector<float> host(n + 24); // the tail must stay untouched
  std::iota(host.begin(), host.end(), -10.0f);
  Result<DeviceBuffer> data = DeviceBuffer::allocate(host.size() * sizeof(float));
  ASSERT_TRUE(data) << data.error();
  ASSERT_TRUE(data->copyFromHost(host.data(), host.size() * sizeof(float)));

  Result<Timer> timer = Timer::create();
  ASSERT_TRUE(timer) << timer.error();
  ASSERT_TRUE(timer->start());
  KernelArgs args;
  args.pointer(*data).int32(n);
  const unsigned block = 128, grid = (n + block - 1) / block;
  Status launched = launch(*kernel, {grid, 1, 1}, {block, 1, 1}, 0, args);
  ASSERT_TRUE(launched) << launched.error();
  // Again with 64 KiB of dynamic shared memory: needs the opt-in.
  if (driver->device().maxSharedPerBlockOptin >= 64 * 1024) {
    launched = launch(*kernel, {grid, 1, 1}, {block, 1, 1}, 64 * 1024, args);
    ASSERT_TRUE(launched) << launched.error();
  }
  ASSERT_TRUE(timer->stop());
  Status synced = synchronize();
  ASSERT_TRUE(synced) << synced.error();
  Result<float> ms = timer->elapsedMs();
  ASSERT_TRUE(ms) << ms.error();
  EXPECT_GE(*ms, 0.0f);

  std::vector<float> result(host.size());
  ASSERT_TRUE(data->copyToHost(result.data(), result.size() * sizeof(float)));
  const float added = driver->device().maxSharedPerBlockOptin >= 64 * 1024 ? 2.0f : 1.0f;
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(result[i], i < size_t(n) ? host[i] + added : host[i]) << "element " << i;

  // Too much shared memory is refused with the device's limit.
  unsigned tooMuch = static_cast<unsigned>(driver->device().maxSharedPerBlockOptin) + 1;
  Status refused = launch(*kernel, {1, 1, 1}, {32, 1, 1}, tooMuch, args);
  EXPECT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error(), "allows at most")) << refused.error();

  // Broken PTX: the JIT's log is in the message.
  Result<Module> broken = Module::load(std::string(".version 8.0\n.target sm_80\n"
                                                   ".address_size 64\nnot ptx;\n"));
  EXPECT_FALSE(broken);
  EXPECT_TRUE(contains(broken.error(), "cuModuleLoadDataEx failed: ")) << broken.error();
}

} // namespace
