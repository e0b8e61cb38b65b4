// Disk cache edges of the hardening campaign (issue 13): tuned configs are
// validated, checksummed, reported and removed when bad; absurd size limits
// are refused; a stuck lock holder makes others wait with a message, then
// compile themselves; crashed writers' temporaries are removed at the next
// start; zero-size specs never reach the cache.
#include "pejit/compiler/backends/x86/HostIsa.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/cache/DiskCache.h"
#include "pejit/runtime/npy/Npy.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace pejit;
namespace fs = std::filesystem;

namespace {

const Shape kShape{1, 2, 1, 24, 24, 64, 64};

Spec ropeSpec(Shape shape = kShape) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  return Spec::fromBuilder(spec, shape);
}

std::string readText(const fs::path &path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

void writeText(const fs::path &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// A pid that was a process and is none any more.
pid_t deadPid() {
  pid_t child = ::fork();
  if (child == 0)
    ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

class CacheFaults : public ::testing::Test {
protected:
  void SetUp() override {
    unsetenv("PEJIT_DISABLE_CACHE");
    dir = fs::temp_directory_path() /
          ("pejit-cache-faults-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override {
    setenv("PEJIT_DISABLE_CACHE", "1", 1);
    unsetenv("PEJIT_CACHE_MAX_MB");
    unsetenv("PEJIT_CACHE_LOCK_TIMEOUT");
    fs::remove_all(dir);
  }
  RuntimeOptions options() const {
    RuntimeOptions o;
    o.threads = 1;
    o.cacheDir = dir.string();
    return o;
  }
  CacheSettings settings() const {
    CacheSettings s = CacheSettings::fromEnvironment();
    s.enabled = true;
    s.dir = dir.string();
    return s;
  }
  /// The one tuned config file (after a tune).
  fs::path tunedFile() const {
    for (const auto &item : fs::directory_iterator(dir / "tuned"))
      if (item.path().filename().string()[0] != '.')
        return item.path();
    return {};
  }
  /// Tunes kShape with one candidate, so a tuned file exists.
  void tuneOnce(X86TileConfig tiles) {
    Runtime runtime(options());
    TuneOptions tune;
    tune.candidates = {tiles};
    tune.progress = false;
    tune.measure = [](const X86Kernel &) { return 1.0; };
    ASSERT_TRUE(runtime.tune(ropeSpec(), tune));
    ASSERT_FALSE(tunedFile().empty());
  }
  /// Rewrites the tuned file's tile line and seals it with a valid checksum,
  /// as a hand edit (or another tool) would.
  void rewriteTunedTiles(const std::string &tileLine) {
    std::string text = readText(tunedFile());
    size_t tileAt = text.find("\ntile ");
    size_t tileEnd = text.find('\n', tileAt + 1);
    text = text.substr(0, tileAt + 1) + tileLine + text.substr(tileEnd);
    text = text.substr(0, text.rfind("checksum "));
    writeText(tunedFile(), text + "checksum " + fnv1aHex(text) + "\n");
  }
  /// get() of the spec in a fresh Runtime: a kernel with the default tiles
  /// (the tuned config was bad); returns what it warned.
  std::string expectDefaultTilesWithWarnings() {
    Runtime runtime(options());
    ::testing::internal::CaptureStderr();
    Expected<X86Kernel> kernel = runtime.getX86(ropeSpec());
    std::string warnings = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(kernel) << kernel.error();
    if (kernel)
      EXPECT_EQ(kernel->tiles().queryTile, X86TileConfig{}.queryTile);
    return warnings;
  }
  fs::path dir;
};

TEST_F(CacheFaults, TunedConfigIsUsedWhenWhole) {
  tuneOnce({96, 48});
  Runtime runtime(options());
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec());
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->tiles().queryTile, 96);
  EXPECT_EQ(kernel->tiles().keyTile, 48);
  DiskCache cache(settings());
  std::vector<DiskCache::EntryInfo> entries = cache.list(/*verify=*/true);
  int tuned = 0;
  for (const DiskCache::EntryInfo &entry : entries)
    if (entry.tuned) {
      ++tuned;
      EXPECT_EQ(entry.problem, "");
      EXPECT_NE(entry.summary.find("tuned tile 96x48"), std::string::npos) << entry.summary;
    }
  EXPECT_EQ(tuned, 1);
}

// "tile 7 5" made every later run of the spec fail, and `cache verify` said
// 0 damaged; a huge tuned tile put a 70 GB frame on the stack.
TEST_F(CacheFaults, InvalidTunedTilesAreReportedRemovedAndNotUsed) {
  for (std::string tiles : {"7 5", "48 99999996"}) {
    SCOPED_TRACE("tile " + tiles);
    tuneOnce({96, 48});
    rewriteTunedTiles("tile " + tiles);
    std::string config = "tile config (" + tiles.substr(0, tiles.find(' ')) + ", " +
                         tiles.substr(tiles.find(' ') + 1) + ") is invalid";
    {
      DiskCache cache(settings());
      bool reported = false;
      for (const DiskCache::EntryInfo &entry : cache.list(/*verify=*/true))
        if (entry.tuned) {
          reported = true;
          EXPECT_NE(entry.problem.find(config), std::string::npos) << entry.problem;
        }
      EXPECT_TRUE(reported);
    }
    std::string warnings = expectDefaultTilesWithWarnings();
    EXPECT_NE(warnings.find("tuned config '"), std::string::npos) << warnings;
    EXPECT_NE(warnings.find(config), std::string::npos) << warnings;
    EXPECT_TRUE(tunedFile().empty());
  }
}

TEST_F(CacheFaults, TunedConfigWithAFlippedByteIsRemoved) {
  tuneOnce({96, 48});
  std::string text = readText(tunedFile());
  text[text.find("tile 96") + 5] = '4'; // "tile 46 ...": checksum no longer matches
  writeText(tunedFile(), text);
  std::string warnings = expectDefaultTilesWithWarnings();
  EXPECT_NE(warnings.find("checksum mismatch"), std::string::npos) << warnings;
  EXPECT_TRUE(tunedFile().empty());
}

// Tiles that pass the load check (they fit at the smallest head dims) but
// not this shape's: the default compiles, so the tuned config goes.
TEST_F(CacheFaults, TunedTilesThatFailForTheShapeFallBackToTheDefault) {
  tuneOnce({96, 48});
  rewriteTunedTiles("tile 4608 96");
  std::string warnings = expectDefaultTilesWithWarnings();
  EXPECT_NE(warnings.find("tile config (4608, 96) is invalid: a work item's tiles"),
            std::string::npos)
      << warnings;
  EXPECT_TRUE(tunedFile().empty());
}

TEST_F(CacheFaults, AbsurdSizeLimitsAreRefusedWithAWarning) {
  for (const char *value : {"9999999999999", "99999999999999999999", "-5", "12abc"}) {
    setenv("PEJIT_CACHE_MAX_MB", value, 1);
    ::testing::internal::CaptureStderr();
    CacheSettings parsed = CacheSettings::fromEnvironment();
    std::string warnings = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(parsed.maxBytes, int64_t(1) << 30) << value;
    EXPECT_NE(warnings.find("is not an integer in [0, 1073741824]; using 1024"), std::string::npos)
        << value << ": " << warnings;
  }
  setenv("PEJIT_CACHE_MAX_MB", "1073741824", 1);
  EXPECT_EQ(CacheSettings::fromEnvironment().maxBytes, int64_t(1) << 50);
  // A big limit keeps what is stored (the overflow evicted every entry).
  setenv("PEJIT_CACHE_MAX_MB", "9999999999999", 1);
  {
    Runtime runtime(options());
    ASSERT_TRUE(runtime.getX86(ropeSpec()));
  }
  Runtime second(options());
  ASSERT_TRUE(second.getX86(ropeSpec()));
  EXPECT_EQ(second.stats().diskHits, 1);
}

// A holder that never lets go: the waiter says so, then gives up and
// compiles without the lock.
TEST_F(CacheFaults, StuckLockHolderTimesOut) {
  setenv("PEJIT_CACHE_LOCK_TIMEOUT", "0.6", 1);
  DiskCache cache(settings());
  std::unique_ptr<DiskCache::KeyLock> held = cache.lockKey("some key");
  ASSERT_TRUE(held);
  auto start = std::chrono::steady_clock::now();
  ::testing::internal::CaptureStderr();
  std::unique_ptr<DiskCache::KeyLock> second = cache.lockKey("some key");
  std::string messages = ::testing::internal::GetCapturedStderr();
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(second);
  EXPECT_GE(waited, 0.6);
  EXPECT_LT(waited, 5.0);
  EXPECT_NE(messages.find("waiting for another process that compiles kernel"), std::string::npos)
      << messages;
  EXPECT_NE(messages.find("compiling the kernel in this process"), std::string::npos) << messages;
  held.reset();
  EXPECT_TRUE(cache.lockKey("some key")); // free again
}

// Every lock file of the cache held (as by a stuck process): get() still
// returns a kernel, after the timeout.
TEST_F(CacheFaults, RuntimeCompilesPastAStuckLock) {
  setenv("PEJIT_CACHE_LOCK_TIMEOUT", "0.3", 1);
  std::string key = compilerFingerprint() + "|" + Runtime::hostTarget() +
                    "|isa=" + x86IsaName(*resolveX86Isa()) +
                    "|tile=" + std::to_string(Runtime::defaultX86Tiles().queryTile) + "x" +
                    std::to_string(Runtime::defaultX86Tiles().keyTile) + "|" + ropeSpec().source();
  int fd = ::open((dir / (fnv1aHex(key) + ".lock")).c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  Runtime runtime(options());
  ::testing::internal::CaptureStderr();
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec());
  std::string messages = ::testing::internal::GetCapturedStderr();
  ::close(fd);
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_NE(messages.find("gave up after"), std::string::npos) << messages;
}

TEST_F(CacheFaults, CrashedWritersTemporariesGoAtTheNextStart) {
  pid_t dead = deadPid();
  std::string deadSuffix = std::to_string(dead) + "-0-123";
  std::string liveSuffix = std::to_string(::getppid()) + "-0-123";
  fs::create_directories(dir / (".tmp-0123456789abcdef-" + deadSuffix));
  writeText(dir / (".tmp-0123456789abcdef-" + deadSuffix) / "kernel.o", "partial");
  fs::create_directories(dir / (".tmp-fedcba9876543210-" + liveSuffix));
  fs::create_directories(dir / (".trash-0123456789abcdef-" + deadSuffix));
  fs::create_directories(dir / "tuned");
  writeText(dir / "tuned" / (".tmp-0123456789abcdef-" + deadSuffix), "partial");
  DiskCache cache(settings());
  EXPECT_FALSE(fs::exists(dir / (".tmp-0123456789abcdef-" + deadSuffix)));
  EXPECT_FALSE(fs::exists(dir / (".trash-0123456789abcdef-" + deadSuffix)));
  EXPECT_FALSE(fs::exists(dir / "tuned" / (".tmp-0123456789abcdef-" + deadSuffix)));
  // A live writer's temporary stays: it is about to be renamed.
  EXPECT_TRUE(fs::exists(dir / (".tmp-fedcba9876543210-" + liveSuffix)));
}

TEST_F(CacheFaults, CrashedNpyWritersTemporariesGoAtTheNextWrite) {
  pid_t dead = deadPid();
  fs::path output = dir / "o.npy";
  fs::path stale = dir / (".o.npy.tmp-" + std::to_string(dead) + "-0");
  fs::path live = dir / (".o.npy.tmp-" + std::to_string(::getppid()) + "-0");
  writeText(stale, "partial");
  writeText(live, "partial");
  npy::Array array;
  array.shape = {2};
  array.bytes.assign(8, 0);
  EXPECT_EQ(npy::writeNpy(output.string(), array), "");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(output));
}

TEST_F(CacheFaults, CountersSurviveUpdates) {
  DiskCache cache(settings());
  writeText(dir / "stats", "hits 99 misses 7\n");
  cache.countLookup(true);
  cache.countLookup(false);
  EXPECT_EQ(readText(dir / "stats"), "hits 100 misses 8\n");
}

// sq = 0 compiled and stored an entry that every later load called damaged.
TEST_F(CacheFaults, ZeroSizeSpecsNeverReachTheCache) {
  Runtime runtime(options());
  Shape empty = kShape;
  empty.querySeq = 0;
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec(empty));
  ASSERT_FALSE(kernel);
  EXPECT_NE(kernel.error().find("(dim 2) is 0: every dimension must be at least 1"),
            std::string::npos)
      << kernel.error();
  DiskCache cache(settings());
  EXPECT_EQ(cache.stats().entries, 0);
}

} // namespace
