// Runtime: the per-shape in-memory kernel cache. The key covers the compiler
// version, the host CPU and its features, the tile config and the spec's
// source (which carries shapes and dtypes). Concurrent requests for one key
// share a future, so the kernel is compiled once.
#include "runtime/CompiledKernel.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/TargetParser/Host.h"

#include <atomic>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace pejit {

namespace {
constexpr const char *kCompilerVersion = "pejit-0.1/llvm-" LLVM_VERSION_STRING;
using Compiled = Expected<std::shared_ptr<const CompiledKernel>>;
} // namespace

const std::string &Status::message() const {
  static const std::string empty;
  return message_ ? *message_ : empty;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float32";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I32:
    return "int32";
  case DType::I64:
    return "int64";
  }
  return "unknown";
}

bool Shape::operator==(const Shape &o) const {
  return batch == o.batch && queryHeads == o.queryHeads && kvHeads == o.kvHeads &&
         querySeq == o.querySeq && keySeq == o.keySeq && headDim == o.headDim &&
         valueDim == o.valueDim;
}

std::string Shape::str() const {
  return "b=" + std::to_string(batch) + " hq=" + std::to_string(queryHeads) +
         " hkv=" + std::to_string(kvHeads) + " sq=" + std::to_string(querySeq) +
         " skv=" + std::to_string(keySeq) + " d=" + std::to_string(headDim) +
         " dv=" + std::to_string(valueDim);
}

struct Runtime::Impl {
  std::shared_ptr<ThreadPool> pool;
  std::mutex mutex;
  std::map<std::string, std::shared_future<Compiled>> cache;
  std::atomic<int64_t> compiles{0};
};

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>()) {
  int threads = options.threads;
  if (threads <= 0)
    if (const char *env = std::getenv("PEJIT_NUM_THREADS"))
      threads = std::atoi(env);
  if (threads <= 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  impl_->pool = std::make_shared<ThreadPool>(threads);
  initializeCompilerOnce();
}

Runtime::~Runtime() = default;

std::string Runtime::hostTarget() {
  std::string target = llvm::sys::getHostCPUName().str();
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    if (feature.second)
      target += "," + feature.first().str();
  return target;
}

Expected<Kernel> Runtime::get(const Spec &spec, TileConfig tiles) {
  static const std::string host = hostTarget();
  std::string key = std::string(kCompilerVersion) + "|" + host + "|tile=" +
                    std::to_string(tiles.queryTile) + "x" + std::to_string(tiles.keyTile) +
                    "|" + spec.source();
  std::promise<Compiled> promise;
  std::shared_future<Compiled> future;
  bool compileHere = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->cache.find(key);
    if (it == impl_->cache.end()) {
      future = promise.get_future().share();
      impl_->cache.emplace(key, future);
      compileHere = true;
    } else {
      future = it->second;
    }
  }
  if (compileHere) {
    ++impl_->compiles;
    promise.set_value(CompiledKernel::compile(spec, tiles, impl_->pool));
  }
  const Compiled &compiled = future.get();
  if (!compiled)
    return Expected<Kernel>::error(compiled.error());
  return Kernel(*compiled);
}

int64_t Runtime::compileCount() const { return impl_->compiles.load(); }

} // namespace pejit
