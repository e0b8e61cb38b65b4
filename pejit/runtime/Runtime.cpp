// Runtime: the per-shape kernel caches, in memory and on disk. The key covers
// the compiler fingerprint, the host CPU and its features, the tile config and
// the spec's source (which carries shapes and dtypes). Concurrent requests
// for one key share a future, so the kernel is compiled once per process;
// across processes a lock file per key does the same (DiskCache.h).
#include "pejit/compiler/backends/nvidia/NvidiaBackend.h"
#include "pejit/compiler/backends/x86/HostIsa.h"
#include "pejit/compiler/backends/x86/X86Backend.h"
#include "pejit/runtime/NvidiaKernelImpl.h"
#include "pejit/runtime/Tuner.h"
#include "pejit/runtime/X86KernelImpl.h"
#include "pejit/runtime/cache/DiskCache.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/TargetParser/Host.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace pejit {

namespace {
using Compiled = Expected<std::shared_ptr<const X86KernelImpl>>;
} // namespace

namespace {

/// The in-memory cache entry of `key`: an existing one's future, or a new
/// one (`owner` = true) that this caller fulfils through `promise`; other
/// callers of the key wait on it, so each key compiles once.
template <typename T>
std::shared_future<T> futureFor(std::mutex &mutex,
                                std::map<std::string, std::shared_future<T>> &cache,
                                const std::string &key, std::promise<T> &promise, bool &owner) {
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (inserted)
    it->second = promise.get_future().share();
  owner = inserted;
  return it->second;
}

} // namespace

struct Runtime::Impl {
  std::shared_ptr<ThreadPool> pool;
  std::mutex mutex;
  std::map<std::string, std::shared_future<Compiled>> cache;
  std::atomic<int64_t> compiles{0}, diskHits{0}, memoryHits{0};
  std::unique_ptr<DiskCache> disk;
  /// Each spec's tuned config as this Runtime first read it from disk (or
  /// stored or discarded it): a decode loop's getX86 per step then reads no
  /// file.
  std::mutex tunedMutex;
  std::map<std::string, std::optional<X86TileConfig>> tunedSeen;
  std::mutex nvidiaMutex;
  std::map<std::string, std::shared_future<Expected<std::shared_ptr<const NvidiaKernelImpl>>>>
      nvidia;

  /// The kernel of `spec` at `tiles`: from memory, disk, or compiled.
  Compiled get(const Spec &spec, const X86TileConfig &tiles);
  Compiled obtain(const Spec &spec, const X86TileConfig &tiles, const std::string &key);
  Compiled loadFromDisk(const std::string &key, const X86TileConfig &tiles);
  Compiled compileAndStore(const Spec &spec, const X86TileConfig &tiles, const std::string &key);

  /// A disk hit (`load`), else `build` under the key's lock file, after a
  /// second look (another process may have stored the key while we waited);
  /// counts the outcome. `build` also stores what it built.
  template <typename T>
  T viaDisk(const std::string &key, const std::function<std::optional<T>()> &load,
            const std::function<T()> &build) {
    std::optional<T> found = disk->readable() ? load() : std::nullopt;
    std::unique_ptr<DiskCache::KeyLock> lock;
    if (!found && (lock = disk->lockKey(key)))
      found = load();
    if (found) {
      disk->countLookup(true);
      ++diskHits;
      return std::move(*found);
    }
    disk->countLookup(false);
    ++compiles;
    return build(); // still holding the lock
  }
};

Compiled Runtime::Impl::loadFromDisk(const std::string &key, const X86TileConfig &tiles) {
  auto start = std::chrono::steady_clock::now();
  std::optional<KernelArtifact> artifact = disk->load(key);
  if (!artifact)
    return Compiled::error("not in the disk cache");
  Expected<std::shared_ptr<X86KernelImpl>> kernel = X86KernelImpl::load(std::move(*artifact), pool);
  if (!kernel) {
    disk->discard(key, kernel.error());
    return Compiled::error(kernel.error());
  }
  (*kernel)->fromDisk = true;
  (*kernel)->tiles = tiles;
  (*kernel)->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Compiled(std::shared_ptr<const X86KernelImpl>(std::move(*kernel)));
}

/// Disk hit, else compile (under the key's lock file) and store.
Compiled Runtime::Impl::obtain(const Spec &spec, const X86TileConfig &tiles,
                               const std::string &key) {
  auto load = [&]() -> std::optional<Compiled> {
    Compiled kernel = loadFromDisk(key, tiles);
    return kernel ? std::optional<Compiled>(std::move(kernel)) : std::nullopt;
  };
  return viaDisk<Compiled>(key, load, [&] { return compileAndStore(spec, tiles, key); });
}

Compiled Runtime::Impl::compileAndStore(const Spec &spec, const X86TileConfig &tiles,
                                        const std::string &key) {
  auto start = std::chrono::steady_clock::now();
  StageTable table = x86Stages(tiles);
  Expected<KernelArtifact> artifact = runStages(table, spec.source(), spec.name());
  if (!artifact)
    return Compiled::error(artifact.error());
  if (disk->dumpsStages()) {
    // Derived stages wait for a request; a dump has the cheap ones too.
    std::map<std::string, std::string> derived;
    for (const Stage &stage : table.stages)
      if (stage.kind == StageKind::Derived && stage.dumped)
        if (Expected<std::string> text = stageText(table, artifact->stages, stage.name, derived))
          artifact->stages[stage.name] = std::move(*text);
  }
  disk->dumpStages(key, *artifact);
  disk->store(key,
              artifact->shape.str() + " tile=" + std::to_string(tiles.queryTile) + "x" +
                  std::to_string(tiles.keyTile) + " " + spec.name(),
              *artifact);
  Expected<std::shared_ptr<X86KernelImpl>> kernel = X86KernelImpl::load(std::move(*artifact), pool);
  if (!kernel)
    return Compiled::error(kernel.error());
  (*kernel)->tiles = tiles;
  (*kernel)->compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Compiled(std::shared_ptr<const X86KernelImpl>(std::move(*kernel)));
}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>()) {
  int threads = options.threads;
  if (threads <= 0)
    if (const char *env = std::getenv("PEJIT_NUM_THREADS"))
      threads = std::atoi(env);
  if (threads <= 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  impl_->pool = std::make_shared<ThreadPool>(threads);
  CacheSettings cache = CacheSettings::fromEnvironment();
  if (!options.cacheDir.empty())
    cache.dir = options.cacheDir;
  impl_->disk = std::make_unique<DiskCache>(std::move(cache));
  initializeCompilerOnce();
}

Runtime::~Runtime() = default;

X86TileConfig Runtime::defaultX86Tiles() {
  // At 16 lanes a 96-key tile's K, V and score rows no longer fit L1 beside
  // the query tile's: 48 keys ran 7-10% faster at s = 2048 (and 3-6% in
  // avx2 on the same host, left as it is until an AVX2 host confirms it).
  Expected<X86Isa> isa = resolveX86Isa();
  X86TileConfig tiles;
  if (isa && x86IsaLanes(*isa) == 16)
    tiles.keyTile = 48;
  return tiles;
}

std::string Runtime::hostTarget() {
  std::string target = llvm::sys::getHostCPUName().str();
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    if (feature.second)
      target += "," + feature.first().str();
  return target;
}

namespace {
/// The tuned config's key: like a kernel key, without the tile config.
std::string tuneKey(const Spec &spec) {
  static const std::string host = Runtime::hostTarget();
  // Tuned per family: an unknown or missing PEJIT_X86_ISA fails the compile
  // that follows, with the reason.
  Expected<X86Isa> isa = resolveX86Isa();
  std::string family = isa ? x86IsaName(*isa) : "?";
  return compilerFingerprint() + "|" + host + "|isa=" + family + "|" + spec.source();
}
} // namespace

Expected<X86Kernel> Runtime::getX86Backward(const Spec &forward, bool operandGradients,
                                            bool scoreShapedGradients) {
  Expected<Spec> backward = Spec::backwardOf(forward, operandGradients, scoreShapedGradients);
  if (!backward)
    return Expected<X86Kernel>::error(backward.error());
  return getX86(*backward);
}

Expected<X86Kernel> Runtime::getX86(const Spec &spec, std::optional<X86TileConfig> requested) {
  auto kernelOf = [](const Compiled &compiled) -> Expected<X86Kernel> {
    if (!compiled)
      return Expected<X86Kernel>::error(compiled.error());
    return X86Kernel(*compiled);
  };
  if (requested)
    return kernelOf(impl_->get(spec, *requested));
  const std::string key = tuneKey(spec);
  std::optional<X86TileConfig> tuned;
  bool seen = false;
  {
    std::lock_guard<std::mutex> lock(impl_->tunedMutex);
    if (auto it = impl_->tunedSeen.find(key); it != impl_->tunedSeen.end()) {
      tuned = it->second;
      seen = true;
    }
  }
  if (!seen) {
    tuned = impl_->disk->loadTuned(key);
    std::lock_guard<std::mutex> lock(impl_->tunedMutex);
    impl_->tunedSeen[key] = tuned;
  }
  if (!tuned)
    return kernelOf(impl_->get(spec, defaultX86Tiles()));
  Compiled kernel = impl_->get(spec, *tuned);
  if (kernel)
    return kernelOf(kernel);
  // A tuned config that passed its checks on load can still fail for this
  // shape (a file edited by hand, a rule that changed): when the default
  // tiles compile, the tuned config is at fault. Say so, remove it, go on.
  Compiled fallback = impl_->get(spec, defaultX86Tiles());
  if (fallback) {
    impl_->disk->discardTuned(key, kernel.error());
    std::lock_guard<std::mutex> lock(impl_->tunedMutex);
    impl_->tunedSeen[key] = std::nullopt;
  }
  return kernelOf(fallback);
}

Compiled Runtime::Impl::get(const Spec &spec, const X86TileConfig &requested) {
  static const std::string host = hostTarget();
  // The family is part of the key: kernels of two families (PEJIT_X86_ISA)
  // never share an entry.
  Expected<X86Isa> isa = resolveX86Isa(requested.isa);
  if (!isa)
    return Compiled::error(isa.error());
  X86TileConfig tiles = requested;
  tiles.isa = *isa;
  std::string key = compilerFingerprint() + "|" + host + "|isa=" + x86IsaName(*isa) +
                    "|tile=" + std::to_string(tiles.queryTile) + "x" +
                    std::to_string(tiles.keyTile) + "|" + spec.source();
  std::promise<Compiled> promise;
  bool compileHere = false;
  std::shared_future<Compiled> future = futureFor(mutex, cache, key, promise, compileHere);
  if (!compileHere)
    ++memoryHits;
  if (compileHere)
    promise.set_value(obtain(spec, tiles, key));
  return future.get();
}

int64_t Runtime::compileCount() const { return impl_->compiles.load(); }

Expected<TuneReport> Runtime::tune(const Spec &spec, TuneOptions options) {
  Expected<TuneReport> report = tuneCandidates(*this, spec, options);
  if (report) {
    impl_->disk->storeTuned(tuneKey(spec), report->best, spec.name(), report->table());
    std::lock_guard<std::mutex> lock(impl_->tunedMutex);
    impl_->tunedSeen[tuneKey(spec)] = report->best;
  }
  return report;
}

Expected<NvidiaKernel> Runtime::getNvidia(const Spec &spec, const std::string &arch,
                                          NvidiaTileConfig tiles) {
  using Compiled = Expected<std::shared_ptr<const NvidiaKernelImpl>>;
  std::string key = compilerFingerprint() + "|nvidia:" + arch +
                    "|tile=" + std::to_string(tiles.queryTile) + "x" +
                    std::to_string(tiles.keyTile) + "/split=" + std::to_string(tiles.splits) + "|" +
                    spec.source();
  std::promise<Compiled> promise;
  bool compileHere = false;
  std::shared_future<Compiled> future =
      futureFor(impl_->nvidiaMutex, impl_->nvidia, key, promise, compileHere);
  if (compileHere) {
    // Disk hit (PTX, cubin and the launch description, keyed by arch), else
    // compile under the key's lock and store.
    DiskCache &disk = *impl_->disk;
    auto load = [&]() -> std::optional<Compiled> {
      std::optional<KernelArtifact> artifact = disk.load(key);
      if (!artifact)
        return std::nullopt;
      Compiled kernel = NvidiaKernelImpl::fromArtifact(std::move(*artifact));
      if (!kernel) {
        disk.discard(key, kernel.error());
        return std::nullopt;
      }
      return kernel;
    };
    auto build = [&] {
      Compiled compiled = NvidiaKernelImpl::compile(spec, arch, tiles);
      if (compiled) {
        const KernelArtifact &artifact = (*compiled)->artifact;
        disk.dumpStages(key, artifact);
        disk.store(key, artifact.shape.str() + " nvidia:" + arch + " " + spec.name(), artifact);
      }
      return compiled;
    };
    promise.set_value(impl_->viaDisk<Compiled>(key, load, build));
  }
  const Compiled &compiled = future.get();
  if (!compiled)
    return Expected<NvidiaKernel>::error(compiled.error());
  return NvidiaKernel(*compiled);
}

std::vector<StageInfo> Runtime::stages(const Target &target) {
  StageTable table = target.kind == Target::Kind::X86 ? x86Stages() : nvidiaStages(target.arch);
  std::vector<StageInfo> stages;
  for (const Stage &stage : table.stages)
    if (stage.kind != StageKind::Binary)
      stages.push_back({stage.name, stage.summary, stage.kind == StageKind::Derived});
  return stages;
}

RuntimeStats Runtime::stats() const {
  return {impl_->compiles.load(), impl_->diskHits.load(), impl_->memoryHits.load()};
}

} // namespace pejit
